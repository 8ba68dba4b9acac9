// One-way inter-process latency of publishing a record batch through the
// client glue, against the body size, beside the floor measured in the same
// run: two processes ping-ponging on one shared cache line.
//
// For each body size, the parent builds a batch (one int64 column) in place
// in shared memory (not timed), then times: Publish -> the child (another
// process, busy-polling) rebuilds the batch zero-copy and reads its first
// and last value. The child stamps that moment with the same monotonic
// clock, so one-way latency is measured directly; the round trip (the child
// answers with a small message on a second channel, no body) is reported
// too, halved. Only the metadata crosses the channel and no page is faulted
// in on the way (segments are prefaulted), so the latency must not grow
// with the body size.
//
// "body" rows are the size-matched floor, measured in the same run: the
// same body, built the same way (the values written to a private vector,
// then copied into a loaned block) at the addresses the alkaid run's
// allocator gives them (loans of a channel of the same options, never
// published through; the channel's holding of blocks played by a FIFO of
// its slot count), handed over with the cache-line ping-pong instead of
// the channel: the child sees a signal line change, reads the body's first
// and last value, answers on the line. Its warm-up round trip carries a
// body of the same size whose first and last value the parent writes and
// the child reads, as the alkaid warm-up batch is. Nothing of Alkaid is on
// its timed path, so alkaid minus body is what the transport adds to the
// physics of the access pattern (at 16 MiB the body's first line has left the builder's caches,
// at 64 B it is in its L1).
//
// "cold" rows time the publish right after building the batch: a batch
// larger than the caches has evicted the code and data of the publish and
// receive paths by then, which costs a few microseconds of cache misses
// whatever the size (not a per-byte cost). "warm" rows first make an
// untimed round trip with a batch of the same shape of which only the
// first and last value are written, as the previous message of a
// one-shape stream would be (it brings back the code and the per-shape
// state: the publisher's metadata cache entry, the subscriber's decode
// plan; a one-row warm-up left a 16 MiB batch's entries cold and the 64 B
// batch's warm, see docs/PERFORMANCE.md). "evicted" rows are the control: small
// batches, with 64 MiB written after building them. "warm evicted" rows
// hold the cache state constant across sizes: every batch, whatever its
// size, is built, then 64 MiB are written, then the untimed round trip is
// made. Against each other they show what the size itself costs; against
// the "warm" rows, what the caches that a large build leaves behind cost.
//
// The parent and the children are pinned to the first two CPUs the bench
// may use (--no-pin: not): two spinning processes left on one CPU would
// measure the scheduler's time slice (~4 ms), which on a loaded 2-CPU
// machine happened in most 16 MiB samples.
//
// The run ends with a summary of the "warm" rows against the project's
// targets: p50 <= 4x floor, p99 <= 10x floor, p50(16 MiB) <= 1.2x p50(64 B).
//
// Usage: alkaid_shm_latency_bench [iterations-scale, default 1] [--no-prefault]
//                                 [--warm-only] [--huge-pages] [--size BYTES]...
//                                 [--settle-us N] [--no-pin]
// (--warm-only: only the "warm" and "warm evicted" rows)

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/measure/clock.h"
#include "alkaid/measure/floor.h"
#include "alkaid/measure/histogram.h"
#include "alkaid/measure/process.h"
#include "alkaid/measure/shared_mapping.h"
#include "alkaid/shm/segment.h"
#include "batch_ping.h"
#include "bench_util.h"

namespace {

using namespace alkaid;
using bench::Die;
using measure::AwaitChild;
using measure::NowNs;
using namespace std::chrono_literals;

struct Figures {
  double median_ns;
  double p99_ns;
};

Figures Summarize(const std::vector<double>& one_way_ns) {
  return {measure::Quantile(one_way_ns, 0.5), measure::Quantile(one_way_ns, 0.99)};
}

// Per-iteration timestamps (CLOCK_MONOTONIC, shared by both processes).
struct Stamps {
  int64_t t0;      // parent: before Publish
  int64_t t_pub;   // parent: Publish returned
  int64_t t_recv;  // child: Receive returned (batch rebuilt)
  int64_t t_vals;  // child: first and last values read
};

// CPUs of the parent and of the child of every run: by default the first
// two CPUs this process may use (--no-pin leaves the placement to the
// scheduler).
measure::CpuPair g_cpus;

// The floor: one shared cache line handed back and forth.
Figures CacheLinePingPong(int iterations) {
  std::vector<double> samples;
  for (const int64_t half : measure::FloorSamples(g_cpus, static_cast<uint64_t>(iterations))) {
    samples.push_back(static_cast<double>(half));
  }
  return Summarize(samples);
}

struct BatchFigures {
  Figures one_way;   // t_vals - t0, measured across the processes
  Figures half_rtt;  // (pong received - t0) / 2
  Figures publish;   // t_pub - t0
  Figures receive;   // t_recv - t0
};

// The figures of a run from its stamps.
BatchFigures FiguresOf(const Stamps* stamps, int iterations, std::vector<double> half_rtt) {
  std::vector<double> one_way, publish, receive;
  for (int i = 0; i < iterations; ++i) {
    one_way.push_back(static_cast<double>(stamps[i].t_vals - stamps[i].t0));
    publish.push_back(static_cast<double>(stamps[i].t_pub - stamps[i].t0));
    receive.push_back(static_cast<double>(stamps[i].t_recv - stamps[i].t0));
  }
  return {Summarize(std::move(one_way)), Summarize(std::move(half_rtt)),
          Summarize(std::move(publish)), Summarize(std::move(receive))};
}

// The values of a ping's body: those of measured ping k are k, k + 1,
// ..., k + rows - 1; a warm-up's (alkaid and body floor alike) start at
// kWarmUpValue. Bodies are read at their first and last value only.
constexpr int64_t kWarmUpValue = -2;

// Child side: checks the first and last value of a ping (exits 2 unless
// they are a warm-up's or measured ping `*got_measured`'s), then stamps
// and counts a measured one.
void OnPing(Stamps* stamps, int* got_measured, int64_t first, int64_t last, uint64_t rows,
            int64_t t_recv, int64_t t_vals) {
  const bool warm_up = first == kWarmUpValue;
  if ((!warm_up && first != *got_measured) || last != first + static_cast<int64_t>(rows) - 1) {
    std::fprintf(stderr, "child: ping %d has values %lld..%lld\n", *got_measured,
                 static_cast<long long>(first), static_cast<long long>(last));
    ::_exit(2);
  }
  if (warm_up) return;
  stamps[*got_measured].t_recv = t_recv;
  stamps[*got_measured].t_vals = t_vals;
  ++*got_measured;
}

// Ping: a batch of `rows` int64 values i, i+1, ... built in place (not
// timed), published (timed from here), rebuilt by the child, which reads
// its first and last value and answers on the pong channel. With kWarm, a
// batch of the same shape (two values written) makes an untimed round trip
// between building and the timed publish: it brings the publish and
// receive paths and their per-shape state back into the caches
// (building a batch larger than the caches evicts them) and makes sure the
// child is running, not preempted while it spun alone during the build.
// kEvicted is the control for "cold": after building, the parent writes a
// buffer larger than the last-level cache (untimed), so that a small batch
// is published with caches as cold as after building a large one.
// kWarmEvicted: the 64 MiB write, then the warm-up round trip, for every
// size (the same cache state whatever the size).
enum class Mode { kCold, kWarm, kEvicted, kWarmEvicted };

bool Evicts(Mode mode) { return mode == Mode::kEvicted || mode == Mode::kWarmEvicted; }
bool WarmsUp(Mode mode) { return mode == Mode::kWarm || mode == Mode::kWarmEvicted; }

// Slots of BatchPingPong's channels; BodyFloorPingPong holds its last
// blocks in a FIFO of this length.
constexpr uint32_t kChannelSlots = 4;

// Whether segments are prefaulted (the default); --no-prefault shows what
// page faults on the data path cost.
bool g_prefault = true;
// --huge-pages: the channel segments (arenas) are backed by transparent huge pages
// (SegmentOptions::huge_pages = kRequire).
bool g_huge_pages = false;
// --settle-us N: after building each batch, spin N microseconds before the
// warm-up and the timed publish (diagnostic: gives the memory system time
// to write back the build's dirty lines).
int64_t g_settle_ns = 0;
// --size BYTES (repeatable): run only these cases.
std::vector<uint64_t> g_only_sizes;

// Untimed, between building iteration i's batch and publishing it: the
// "evicted" control's 64 MiB write, then --settle-us.
void AfterBuild(Mode mode, std::vector<uint8_t>* scratch, int i) {
  if (Evicts(mode)) {
    std::memset(scratch->data(), i & 0xff, scratch->size());
    // Keep the stores: the buffer is read back below.
    if ((*scratch)[static_cast<size_t>(i) % scratch->size()] != (i & 0xff)) std::abort();
  }
  if (g_settle_ns > 0) {
    const int64_t until = NowNs() + g_settle_ns;
    while (NowNs() < until) {
    }
  }
}

// Segment options of both runs of a size (the ping channel's, and the
// floor's): prefault, huge pages.
shm::SegmentOptions BodySegmentOptions() {
  shm::SegmentOptions so;
  // Segments are prefaulted at creation (SegmentOptions::prefault) and at
  // open: neither side takes a page fault in the timed part.
  so.prefault = g_prefault;
  if (g_huge_pages) so.huge_pages = shm::HugePages::kRequire;
  return so;
}

// The name tag of a run: pid, body size, mode.
std::string RunTag(uint64_t body_bytes, Mode mode) {
  return std::to_string(::getpid()) + "_" + std::to_string(body_bytes) + "_" +
         std::to_string(static_cast<int>(mode));
}

BatchFigures BatchPingPong(uint64_t body_bytes, int iterations, Mode mode) {
  const bool warm = WarmsUp(mode);
  const uint64_t rows = std::max<uint64_t>(1, body_bytes / 8);
  const uint64_t region = rows * 8 + 4096;
  auto schema = format::schema({format::field("v", format::int64(), false)});

  auto stamps_mapping = measure::SharedMapping<Stamps>::MapOrDie(static_cast<size_t>(iterations));
  Stamps* stamps = stamps_mapping.get();
  bench::BatchPingPongSegments segments(RunTag(body_bytes, mode), 8 * region + (1 << 20),
                                        BodySegmentOptions(), kChannelSlots);
  const pid_t child = measure::ForkPinned(g_cpus);
  if (child == 0) {
    auto sub = segments.OpenInChild(schema);
    for (int got_measured = 0; got_measured < iterations;) {
      auto got = sub->Receive(60s);
      if (!got.ok()) Die(got.status(), "child receive");
      const int64_t t_recv = NowNs();
      auto values = std::static_pointer_cast<format::Int64Array>(got->batch->column(0));
      const int64_t first = values->Value(0);
      const int64_t last = values->Value(values->length() - 1);
      const int64_t t_vals = NowNs();
      OnPing(stamps, &got_measured, first, last, rows, t_recv, t_vals);
      got->batch.reset();
      segments.Answer(first + last);
    }
    ::_exit(0);
  }
  auto publisher = client::BatchPublisher::Create(segments.ping(), schema).ValueOrDie();
  segments.AwaitAnswer();  // the child is ready
  std::vector<double> half_rtt;
  std::vector<int64_t> values(rows);
  std::vector<uint8_t> scratch(Evicts(mode) ? (64u << 20) : 0);
  for (int i = 0; i < iterations; ++i) {
    // Not timed: build the batch in place in shared memory.
    auto pool = publisher->NewPool(region).ValueOrDie();
    format::Int64Builder builder(pool.get());
    for (uint64_t r = 0; r < rows; ++r) values[r] = i + static_cast<int64_t>(r);
    CHECK_OK(builder.AppendValues(values));
    auto array = builder.Finish().ValueOrDie();
    auto batch =
        format::RecordBatch::Make(schema, static_cast<int64_t>(rows), {array}).ValueOrDie();
    AfterBuild(mode, &scratch, i);
    if (warm) segments.WarmUp(publisher.get(), schema, rows, region, kWarmUpValue);

    // Timed: from just before Publish to the child holding the rebuilt
    // batch with its first and last values read (stamped by the child with
    // the same clock), and on to the pong (round trip).
    const int64_t t0 = NowNs();
    CHECK_OK(publisher->Publish(*batch, pool.get()));
    const int64_t t_pub = NowNs();
    segments.AwaitAnswer();
    const int64_t t1 = NowNs();
    stamps[i].t0 = t0;
    stamps[i].t_pub = t_pub;
    half_rtt.push_back(static_cast<double>(t1 - t0) / 2);
    batch.reset();
    array.reset();
  }
  AwaitChild(child);
  publisher.reset();
  return FiguresOf(stamps, iterations, std::move(half_rtt));
}

// The size-matched floor of BatchPingPong(body_bytes, iterations, mode):
// the same body at the same addresses, built the same way, handed over on
// a signal line instead of the channel (see the file comment).
BatchFigures BodyFloorPingPong(uint64_t body_bytes, int iterations, Mode mode) {
  const std::string bodies_name = "alkaid_lat_f" + RunTag(body_bytes, mode);
  const uint64_t rows = std::max<uint64_t>(1, body_bytes / 8);
  const uint64_t region = rows * 8 + 4096;
  // The ping channel's options (BatchPingPongSegments); its loans are the
  // bodies, never published. As the ping channel holds a block until its
  // consumer returns it, the last kChannelSlots loans are held.
  shm::ChannelOptions co;
  co.slot_count = kChannelSlots;
  co.inline_capacity = 448;
  co.arena_bytes = 8 * region + (1 << 20);
  co.space_timeout = 30s;
  co.segment = BodySegmentOptions();
  auto bodies = measure::BodyLoans::Create(bodies_name, co, kChannelSlots).ValueOrDie();
  // The signal line, in a page of its own.
  auto signal_mapping = measure::SharedMapping<measure::BodyLine>::MapOrDie();
  measure::BodyLine* signal = signal_mapping.get();
  const auto never = [] { return false; };
  auto stamps_mapping = measure::SharedMapping<Stamps>::MapOrDie(static_cast<size_t>(iterations));
  Stamps* stamps = stamps_mapping.get();

  const pid_t child = measure::ForkPinned(g_cpus);
  if (child == 0) {
    shm::SegmentOpenOptions open_options;
    open_options.prefault = g_prefault;
    auto segment =
        shm::Segment::Open(bodies_name, shm::SegmentKind::kChannel, open_options).ValueOrDie();
    const std::byte* arena = segment->data();
    signal->Ready();
    uint64_t seen = 0;
    for (int got_measured = 0; got_measured < iterations;) {
      uint64_t k;
      if (!signal->AwaitPing(seen, &k, never)) ::_exit(2);
      seen = k;
      const int64_t t_recv = NowNs();
      // Warm-ups and measured pings alike, as the alkaid child reads every
      // batch.
      const auto* values = reinterpret_cast<const int64_t*>(arena + signal->body_offset);
      const int64_t first = values[0];
      const int64_t last = values[rows - 1];
      OnPing(stamps, &got_measured, first, last, rows, t_recv, NowNs());
      signal->Answer(k);
    }
    ::_exit(0);
  }
  (void)signal->AwaitReady(never);
  uint64_t k = 0;
  auto round_trip = [&](uint64_t offset, int64_t id) { signal->Send(++k, offset, id); };
  auto await_answer = [&] { (void)signal->AwaitAnswer(k, never); };
  std::vector<double> half_rtt;
  std::vector<int64_t> values(rows);
  std::vector<uint8_t> scratch(Evicts(mode) ? (64u << 20) : 0);
  for (int i = 0; i < iterations; ++i) {
    // Not timed: the body, as BatchPingPong builds it (values, then one
    // copy into the region), in a region of the same size.
    auto body = bodies.Loan(region).ValueOrDie();
    for (uint64_t r = 0; r < rows; ++r) values[r] = i + static_cast<int64_t>(r);
    std::memcpy(body.data().data(), values.data(), rows * 8);
    AfterBuild(mode, &scratch, i);
    const uint64_t offset = body.offset();
    if (WarmsUp(mode)) {
      // As BatchPingPong's warm-up batch: a region of the same size, its
      // first and last value written here and read by the child.
      auto warm = bodies.Loan(region).ValueOrDie();
      auto* warm_values = reinterpret_cast<int64_t*>(warm.data().data());
      warm_values[0] = kWarmUpValue;
      warm_values[rows - 1] = kWarmUpValue + static_cast<int64_t>(rows) - 1;
      const uint64_t warm_offset = warm.offset();
      bodies.Hold(std::move(warm));
      round_trip(warm_offset, kWarmUpValue);
      await_answer();
    }

    const int64_t t0 = NowNs();
    round_trip(offset, i);
    const int64_t t_pub = NowNs();
    await_answer();
    const int64_t t1 = NowNs();
    stamps[i].t0 = t0;
    stamps[i].t_pub = t_pub;
    half_rtt.push_back(static_cast<double>(t1 - t0) / 2);
    bodies.Hold(std::move(body));
  }
  AwaitChild(child);
  bodies.Release();
  return FiguresOf(stamps, iterations, std::move(half_rtt));
}

}  // namespace

int main(int argc, char** argv) {
  double scale = 1.0;
  bool warm_only = false;
  bool pin = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-prefault") == 0) {
      g_prefault = false;
    } else if (std::strcmp(argv[i], "--settle-us") == 0 && i + 1 < argc) {
      g_settle_ns = std::atoll(argv[++i]) * 1000;
    } else if (std::strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
      g_only_sizes.push_back(std::strtoull(argv[++i], nullptr, 10));
    } else if (std::strcmp(argv[i], "--huge-pages") == 0) {
      g_huge_pages = true;
    } else if (std::strcmp(argv[i], "--no-pin") == 0) {
      pin = false;
    } else if (std::strcmp(argv[i], "--warm-only") == 0) {
      warm_only = true;
    } else {
      scale = std::atof(argv[i]);
    }
  }
  auto iters = [&](int n) { return std::max(10, static_cast<int>(n * scale)); };
  double load[3] = {0, 0, 0};
  (void)::getloadavg(load, 3);
  if (pin) g_cpus = measure::PinToFirstTwoCpus();
  std::printf("load average %.2f %.2f %.2f; segments %sprefaulted; body pages %s; ", load[0],
              load[1], load[2], g_prefault ? "" : "NOT ", g_huge_pages ? "2 MiB" : "4 KiB");
  if (g_cpus.child >= 0) {
    std::printf("parent on CPU %d, child on CPU %d\n", g_cpus.parent, g_cpus.child);
  } else {
    std::printf("not pinned\n");
  }
  std::printf(
      "one-way: parent before Publish -> child read first and last value (same clock)\n"
      "rtt/2: parent before Publish -> pong received, halved\n"
      "publish: the Publish call; rebuilt: parent before Publish -> child holds the batch\n"
      "cold: timed right after building the batch; warm: after an untimed round trip\n"
      "of a batch of the same shape (two values written);\n"
      "evicted: cold, plus 64 MiB written after building (control: caches as cold as\n"
      "after building a batch larger than the last-level cache)\n"
      "warm evicted: 64 MiB written after building, then the warm-up round trip, at\n"
      "every size (the same cache state whatever the size)\n"
      "body: the size-matched floor of the row above: same body, same addresses, same\n"
      "build, handed over on a shared cache line instead of the channel (publish: the store)\n");
  std::printf("%-28s %9s %9s %9s %9s %9s %9s %7s\n", "case (busy-poll, ns)", "one-way", "p99",
              "rtt/2", "p99", "publish", "rebuilt", "samples");
  const int floor_n = iters(20000);
  const Figures floor = CacheLinePingPong(floor_n);
  std::printf("%-28s %9.0f %9.0f %9s %9s %9s %9s %7d\n", "floor: cache line", floor.median_ns,
              floor.p99_ns, "", "", "", "", floor_n);
  const struct {
    const char* name;
    uint64_t bytes;
    int n;
  } cases[] = {{"64 B", 64, 5000},
               {"4 KiB", 4096, 5000},
               {"64 KiB", 65536, 2000},
               {"1 MiB", 1 << 20, 500},
               {"16 MiB", 16 << 20, 100}};
  const struct {
    Mode mode;
    const char* label;
  } modes[] = {{Mode::kCold, "cold "},
               {Mode::kWarm, "warm "},
               {Mode::kEvicted, "evicted "},
               {Mode::kWarmEvicted, "warm evicted "}};
  struct WarmRow {
    const char* name;
    Figures alkaid;
    Figures body;  // the size-matched floor
  };
  std::vector<WarmRow> warm_rows;
  std::vector<WarmRow> warm_evicted_rows;
  for (const auto& m : modes) {
    if (warm_only && !WarmsUp(m.mode)) continue;
    for (const auto& c : cases) {
      // The control only needs the sizes whose build fits in the caches.
      if (m.mode == Mode::kEvicted && c.bytes > 65536) continue;
      if (!g_only_sizes.empty() &&
          std::find(g_only_sizes.begin(), g_only_sizes.end(), c.bytes) == g_only_sizes.end()) {
        continue;
      }
      // Writing 64 MiB takes milliseconds: 300 samples at most per evicting row.
      const int n = Evicts(m.mode) ? std::min(iters(c.n), iters(300)) : iters(c.n);
      const BatchFigures f = BatchPingPong(c.bytes, n, m.mode);
      const BatchFigures p = BodyFloorPingPong(c.bytes, n, m.mode);
      if (m.mode == Mode::kWarm) warm_rows.push_back({c.name, f.one_way, p.one_way});
      if (m.mode == Mode::kWarmEvicted) {
        warm_evicted_rows.push_back({c.name, f.one_way, p.one_way});
      }
      for (const auto& [prefix, figures] : {std::pair{"", &f}, std::pair{"body ", &p}}) {
        const std::string name = prefix + std::string(m.label) + c.name;
        std::printf("%-28s %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f %7d\n", name.c_str(),
                    figures->one_way.median_ns, figures->one_way.p99_ns,
                    figures->half_rtt.median_ns, figures->half_rtt.p99_ns,
                    figures->publish.median_ns, figures->receive.median_ns, n);
      }
    }
  }
  // Summary against the targets (warm one-way figures).
  std::printf("\nsummary (warm one-way, ns; floor p50 %.0f)\n", floor.median_ns);
  std::printf("%-8s %9s %9s %11s %11s %11s %11s %11s %11s\n", "size", "p50", "p99", "p50/floor",
              "p99/floor", "body p50", "body p99", "p50-body", "p99-body");
  for (const auto& row : warm_rows) {
    const Figures& f = row.alkaid;
    const Figures& p = row.body;
    std::printf("%-8s %9.0f %9.0f %10.1fx %10.1fx %11.0f %11.0f %11.0f %11.0f\n", row.name,
                f.median_ns, f.p99_ns, f.median_ns / floor.median_ns, f.p99_ns / floor.median_ns,
                p.median_ns, p.p99_ns, f.median_ns - p.median_ns, f.p99_ns - p.p99_ns);
  }
  const auto flatness = [](const char* label, const std::vector<WarmRow>& rows) {
    if (rows.size() < 2) return;
    const WarmRow& small = rows.front();
    const WarmRow& large = rows.back();
    std::printf("%s flatness: p50(%s) / p50(%s) = %.2f (target <= 1.2); body floor %.2f\n", label,
                large.name, small.name, large.alkaid.median_ns / small.alkaid.median_ns,
                large.body.median_ns / small.body.median_ns);
    std::printf("%s overhead over the body floor (p50): %.0f ns at %s, %.0f ns at %s\n", label,
                small.alkaid.median_ns - small.body.median_ns, small.name,
                large.alkaid.median_ns - large.body.median_ns, large.name);
  };
  flatness("warm", warm_rows);
  // The same cache state for every size: what the size itself costs.
  flatness("warm evicted", warm_evicted_rows);
  (void)::getloadavg(load, 3);
  std::printf("load average at the end %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  return 0;
}
