// One-way inter-process latency against the body size, as paired
// comparisons with a 64-byte batch (Google Benchmark rows).
//
// Each row runs one parent and one forked child (pinned to two CPUs) for
// the whole row and alternates two batches: one of the row's size and one
// of 64 bytes. Both go through the same channel (slots and arena) and processes,
// so whatever one run shares (where the hypervisor placed the two vCPUs,
// the machine's load, the arena's size) is the same for both, and the size
// is the only variable. The order alternates so that neither size meets
// one of the channel's slots more often (see IsLarge). A batch is one int64
// column. Timed: from the parent's Publish until the child holds the
// rebuilt batch and has read its first and last value (stamped by the
// child with the same monotonic clock). The child checks both values of
// every batch against the schedule and answers on a second channel.
//
// Counters, in nanoseconds (medians over the row's pairs):
//   p50, p99      one-way latency of the row's size (Time: its mean)
//   p50_64B       one-way latency of the 64-byte batches of the same run
//   ratio         p50 / p50_64B
//   d_p50         median of the paired differences (size - 64 B)
//   d_lo, d_hi    its 95 % confidence interval (sign-test order statistics:
//                 no assumption about the distribution)
//   rebuilt, rebuilt_64B   until the child holds the batch, before it reads
//                 a value: the transport alone
//   dr_p50, dr_lo, dr_hi   the paired comparison of `rebuilt`
// The 64-byte row compares 64 B with itself: its interval shows what "no
// difference" looks like in that run.
//
// How the body is filled (not timed):
//   loaned        a region of the size is taken from the segment and only
//                 the first and last value are written, as by a producer
//                 that loans a large buffer and updates part of it. Nothing
//                 but the size differs between the two batches.
//   built         every value is written by a builder, then a batch of the
//                 same shape (a loaned one) makes an untimed round trip, as
//                 the previous message of a one-shape stream would: it
//                 brings back the code and the per-shape state (the
//                 publisher's metadata cache entry, the subscriber's decode
//                 plan) that the build evicted. This batch's own objects
//                 (its pool, its block descriptor, its batch) and its body
//                 stay as the build left them: at 16 MiB the build has
//                 evicted them from the caches and the TLB, at 64 B not.
//                 `alkaid latency --compare body` (the size-matched floor)
//                 shows how much of that any shared-memory hand-off of the
//                 body pays.
//   built_evicted as built, with 64 MiB written after the build, at both
//                 sizes: the same cache state whatever the size. What is
//                 left is the body itself: the child reads its first and
//                 last value, one line at 64 B, two lines on two pages at
//                 16 MiB, each a miss after the eviction.
//
// Usage: alkaid_shm_flatness_bench [Google Benchmark flags] [--pairs-scale X]
//                                  [--no-pin]

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/client/shm_batch_pool.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/measure/clock.h"
#include "alkaid/measure/histogram.h"
#include "alkaid/measure/process.h"
#include "alkaid/measure/shared_mapping.h"
#include "batch_ping.h"
#include "bench_util.h"

namespace {

using namespace alkaid;
using namespace std::chrono_literals;
using measure::NowNs;

constexpr uint64_t kSmallBytes = 64;
constexpr uint32_t kSlotCount = 4;
constexpr int64_t kWarmUpValue = -2;

enum class Fill { kLoaned, kBuilt, kBuiltEvicted };

measure::CpuPair g_cpus;

// Per ping, in a mapping shared with the child (CLOCK_MONOTONIC).
struct Stamp {
  int64_t t0;      // parent: before Publish
  int64_t t_recv;  // child: the batch rebuilt
  int64_t t_vals;  // child: its first and last value read
};

// Ping i is the row's size or 64 B. Which goes first in pair k = i / 2
// follows k's second bit, so that over four pairs each size is published
// once into each of the channel's four slots, with or without a warm-up
// message between pings. That matters: one publish per lap of the slots
// refreshes the producer's view of the consumers' cursors (a cache line
// the consumer owns), which costs that publish ~0.2 us here; a schedule
// that gave one size that slot more often would measure the slot. Parent
// and child both follow this schedule.
bool IsLarge(uint64_t i) {
  const bool large_first = ((i / 2) / 2) % 2 == 1;
  return (i % 2 == 0) == large_first;
}
static_assert(kSlotCount == 4, "the schedule of IsLarge balances four slots");

uint64_t RowsOf(uint64_t bytes) { return std::max<uint64_t>(1, bytes / 8); }

// A one-column batch of `rows` int64 in `pool`, whose first value is `id`
// and last `id + rows - 1` (kLoaned: only those two are written; else all,
// id, id + 1, ..., by a builder).
format::RecordBatchPtr BuildBatch(client::ShmBatchPool* pool, const format::SchemaPtr& schema,
                                  uint64_t rows, int64_t id, Fill fill,
                                  std::vector<int64_t>* values) {
  if (fill == Fill::kLoaned) return bench::LoanedInt64Batch(pool, schema, rows, id);
  values->resize(rows);
  for (uint64_t r = 0; r < rows; ++r) (*values)[r] = id + static_cast<int64_t>(r);
  format::Int64Builder builder(pool);
  CHECK_OK(builder.AppendValues(*values));
  auto array = builder.Finish().ValueOrDie();
  return format::RecordBatch::Make(schema, static_cast<int64_t>(rows), {array}).ValueOrDie();
}

// The child of a row: receives every batch, checks its values against the
// schedule, stamps measured ones, answers each. Exits 2 on a wrong value.
[[noreturn]] void ChildLoop(const bench::BatchPingPongSegments& segments,
                            const format::SchemaPtr& schema, uint64_t large_bytes, Stamp* stamps,
                            uint64_t pings) {
  auto sub = segments.OpenInChild(schema);
  for (uint64_t i = 0; i < pings;) {
    auto got = sub->Receive(60s);
    if (!got.ok()) bench::Die(got.status(), "child receive");
    const int64_t t_recv = NowNs();
    auto values = std::static_pointer_cast<format::Int64Array>(got->batch->column(0));
    const int64_t first = values->Value(0);
    const int64_t last = values->Value(values->length() - 1);
    const int64_t t_vals = NowNs();
    const auto rows = static_cast<int64_t>(RowsOf(IsLarge(i) ? large_bytes : kSmallBytes));
    const bool warm_up = first == kWarmUpValue && last == first + values->length() - 1;
    if (!warm_up) {
      if (first != static_cast<int64_t>(i) || values->length() != rows ||
          last != first + rows - 1) {
        std::fprintf(stderr,
                     "child: ping %llu has %lld values %lld..%lld, expected %lld from %llu\n",
                     static_cast<unsigned long long>(i), static_cast<long long>(values->length()),
                     static_cast<long long>(first), static_cast<long long>(last),
                     static_cast<long long>(rows), static_cast<unsigned long long>(i));
        ::_exit(2);
      }
      stamps[i].t_recv = t_recv;
      stamps[i].t_vals = t_vals;
      ++i;
    }
    got->batch.reset();
    segments.Answer(first);
  }
  ::_exit(0);
}

// Median and 95 % confidence interval of the median of `d` (sorted here):
// the order statistics n/2 -+ 0.98 sqrt(n) (sign test, normal
// approximation of the binomial).
struct MedianCi {
  double median, lo, hi;
};
MedianCi MedianWithCi(std::vector<double> d) {
  std::sort(d.begin(), d.end());
  const double n = static_cast<double>(d.size());
  const double half = 0.98 * std::sqrt(n);
  const auto lo = static_cast<size_t>(std::max(0.0, std::floor(n / 2 - half)));
  const auto hi = static_cast<size_t>(std::min(n - 1, std::ceil(n / 2 + half)));
  return {d[d.size() / 2], d[lo], d[hi]};
}

void BM_OneWayPaired(benchmark::State& state, Fill fill) {
  const auto large_bytes = static_cast<uint64_t>(state.range(0));
  const uint64_t pings = 2 * static_cast<uint64_t>(state.max_iterations);
  const uint64_t large_region = RowsOf(large_bytes) * 8 + 4096;
  auto schema = format::schema({format::field("v", format::int64(), false)});

  shm::SegmentOptions segment_options;
  segment_options.prefault = true;  // no page fault on the timed path
  const std::string tag = std::to_string(::getpid()) + "_f" + std::to_string(large_bytes) + "_" +
                          std::to_string(static_cast<int>(fill));
  bench::BatchPingPongSegments segments(tag, 8 * large_region + (1 << 20), segment_options,
                                        kSlotCount);
  auto stamps_mapping = measure::SharedMapping<Stamp>::MapOrDie(pings);
  Stamp* stamps = stamps_mapping.get();
  const pid_t child = measure::ForkPinned(g_cpus);
  if (child == 0) ChildLoop(segments, schema, large_bytes, stamps, pings);

  auto publisher = client::BatchPublisher::Create(segments.ping(), schema).ValueOrDie();
  segments.AwaitAnswer();  // the child is ready
  std::vector<int64_t> values;
  std::vector<uint8_t> scratch(fill == Fill::kBuiltEvicted ? (64u << 20) : 0);
  uint64_t i = 0;
  for (auto _ : state) {
    double large_seconds = 0;
    for (int half = 0; half < 2; ++half, ++i) {
      const bool large = IsLarge(i);
      const uint64_t rows = RowsOf(large ? large_bytes : kSmallBytes);
      auto pool = publisher->NewPool(rows * 8 + 4096).ValueOrDie();
      auto batch = BuildBatch(pool.get(), schema, rows, static_cast<int64_t>(i), fill, &values);
      if (fill == Fill::kBuiltEvicted) {
        std::memset(scratch.data(), static_cast<int>(i & 0xff), scratch.size());
        benchmark::DoNotOptimize(scratch.data());
        benchmark::ClobberMemory();
      }
      if (fill != Fill::kLoaned) {
        segments.WarmUp(publisher.get(), schema, rows, rows * 8 + 4096, kWarmUpValue);
      }
      const int64_t t0 = NowNs();
      CHECK_OK(publisher->Publish(*batch, pool.get()));
      segments.AwaitAnswer();
      // The child stamped before answering; the pong channel's receive is
      // the acquire partner of its publish.
      stamps[i].t0 = t0;
      if (large) large_seconds = static_cast<double>(stamps[i].t_vals - t0) * 1e-9;
    }
    state.SetIterationTime(large_seconds);
  }
  measure::AwaitChild(child);
  publisher.reset();

  // [0]: 64 B, [1]: the row's size; *_diff: per pair, size - 64 B.
  std::vector<double> one_way[2], rebuilt[2], one_way_diff, rebuilt_diff;
  for (uint64_t k = 0; k + 1 < pings; k += 2) {
    for (uint64_t j = k; j < k + 2; ++j) {
      const int which = IsLarge(j) ? 1 : 0;
      one_way[which].push_back(static_cast<double>(stamps[j].t_vals - stamps[j].t0));
      rebuilt[which].push_back(static_cast<double>(stamps[j].t_recv - stamps[j].t0));
    }
    one_way_diff.push_back(one_way[1].back() - one_way[0].back());
    rebuilt_diff.push_back(rebuilt[1].back() - rebuilt[0].back());
  }
  const double p50 = measure::Quantile(one_way[1], 0.5);
  const double p50_small = measure::Quantile(one_way[0], 0.5);
  state.counters["p50"] = p50;
  state.counters["p99"] = measure::Quantile(one_way[1], 0.99);
  state.counters["p50_64B"] = p50_small;
  state.counters["ratio"] = p50 / p50_small;
  state.counters["rebuilt"] = measure::Quantile(rebuilt[1], 0.5);
  state.counters["rebuilt_64B"] = measure::Quantile(rebuilt[0], 0.5);
  for (const auto& [prefix, diffs] :
       {std::pair{"d", &one_way_diff}, std::pair{"dr", &rebuilt_diff}}) {
    const MedianCi d = MedianWithCi(*diffs);
    state.counters[std::string(prefix) + "_p50"] = d.median;
    state.counters[std::string(prefix) + "_lo"] = d.lo;
    state.counters[std::string(prefix) + "_hi"] = d.hi;
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  double scale = 1.0;
  bool pin = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--pairs-scale") == 0 && i + 1 < argc) {
      scale = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--no-pin") == 0) {
      pin = false;
    } else {
      std::fprintf(stderr,
                   "alkaid_shm_flatness_bench: unknown argument '%s'\n"
                   "usage: alkaid_shm_flatness_bench [Google Benchmark flags] "
                   "[--pairs-scale X] [--no-pin]\n",
                   argv[i]);
      return 2;
    }
  }
  if (scale <= 0) {
    std::fprintf(stderr, "alkaid_shm_flatness_bench: --pairs-scale must be positive\n");
    return 2;
  }
  if (pin) g_cpus = measure::PinToFirstTwoCpus();
  const struct {
    Fill fill;
    const char* name;
  } fills[] = {
      {Fill::kLoaned, "loaned"}, {Fill::kBuilt, "built"}, {Fill::kBuiltEvicted, "built_evicted"}};
  const struct {
    uint64_t bytes;
    int pairs[3];  // loaned, built, built_evicted
  } sizes[] = {{64, {5000, 5000, 300}},
               {4096, {5000, 5000, 300}},
               {65536, {5000, 2000, 300}},
               {1 << 20, {5000, 1000, 300}},
               {16 << 20, {5000, 200, 200}}};
  for (const auto& f : fills) {
    for (const auto& s : sizes) {
      const int pairs = std::max(10, static_cast<int>(s.pairs[static_cast<int>(f.fill)] * scale));
      benchmark::RegisterBenchmark(
          (std::string("one_way_vs_64B/") + f.name).c_str(),
          [fill = f.fill](benchmark::State& st) { BM_OneWayPaired(st, fill); })
          ->Arg(static_cast<int64_t>(s.bytes))
          ->Iterations(pairs)
          ->UseManualTime()
          ->Unit(benchmark::kNanosecond);
    }
  }
  if (g_cpus.child >= 0) {
    std::printf("parent on CPU %d, child on CPU %d\n", g_cpus.parent, g_cpus.child);
  } else {
    std::printf("not pinned\n");
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
