// Stream throughput of the client glue: one producer process publishes
// small record batches (one int64 column x 64 rows, built in place in shared
// memory) as fast as it can through a kBlockProducer channel; 1 or 4 consumer
// processes busy-poll, receive each batch with BatchSubscriber::Receive (zero-copy,
// from the decode plan, structurally validated once per shape) and read its
// first and last value.
// Reported: batches per second received and decoded by each consumer, from
// its first to its last batch, beside the producer's publish rate and the
// cost of a plain in-process publish + receive + decode loop (no second
// process: the CPU cost of the path, which is what callgrind and perf
// profile with --inproc).
//
// Every figure is given twice: with batches built per batch (Int64Builder
// on a ShmBatchPool, RecordBatch::Make, Publish) and with a
// FixedShapeWriter (a copy of a prototype body, the 64 values written in
// place, the prototype's metadata).
//
// Usage:
//   alkaid_shm_stream_bench [batches, default 1000000]
//   alkaid_shm_stream_bench --inproc [iterations] [--fixed] [--stamp]   (single thread, for
//     profilers; --stamp: the channel stamps publish times, ChannelOptions::stamp_publish_time)

#include <time.h>
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
#include "alkaid/measure/histogram.h"
#include "alkaid/measure/process.h"
#include "alkaid/measure/shared_mapping.h"
#include "alkaid/shm/channel.h"
#include "bench_util.h"

namespace {

using namespace alkaid;
using bench::Die;
using measure::NowNs;
using namespace std::chrono_literals;

constexpr int64_t kRows = 64;

format::SchemaPtr Schema() { return format::schema({format::field("v", format::int64(), false)}); }

// Builds batch `i` (values i, i+1, ..., i+63) in a fresh region and
// publishes it.
void PublishOne(client::BatchPublisher* publisher, const format::SchemaPtr& schema, int64_t i) {
  auto pool = publisher->NewPool(kRows * 8).ValueOrDie();
  format::Int64Builder builder(pool.get());
  CHECK_OK(builder.Reserve(kRows));
  for (int64_t r = 0; r < kRows; ++r) builder.UnsafeAppend(i + r);
  auto array = builder.Finish().ValueOrDie();
  auto batch = format::RecordBatch::Make(schema, kRows, {array}).ValueOrDie();
  CHECK_OK(publisher->Publish(*batch, pool.get()));
}

// Writes first, first + 1, ... into v[0, kRows): two values per 16-byte
// store, unrolled (g++ -O2 keeps the plain loop scalar, one value per four
// instructions, a fifth of the fixed path's count).
void FillSequence(int64_t* v, int64_t first) {
  using Pair = int64_t __attribute__((vector_size(16)));
  Pair p = {first, first + 1};
  const Pair two = {2, 2};
#pragma GCC unroll 32
  for (int64_t r = 0; r < kRows; r += 2) {
    std::memcpy(v + r, &p, sizeof p);
    p += two;
  }
}

// The same batch through a FixedShapeWriter: values written in place (all
// of them, so the region needs no copy of the prototype first).
void PublishOneFixed(client::FixedShapeWriter* writer, int64_t i) {
  CHECK_OK(writer->Begin(client::FixedShapeWriter::Fill::kNone));
  FillSequence(reinterpret_cast<int64_t*>(writer->buffer(1).data()), i);
  CHECK_OK(writer->Publish());
}

// A writer for batches of kRows int64 values, from a prototype built once.
std::unique_ptr<client::FixedShapeWriter> NewWriter(client::BatchPublisher* publisher,
                                                    const format::SchemaPtr& schema) {
  auto pool = publisher->NewPool(kRows * 8).ValueOrDie();
  format::Int64Builder builder(pool.get());
  CHECK_OK(builder.Reserve(kRows));
  for (int64_t r = 0; r < kRows; ++r) builder.UnsafeAppend(r);
  auto array = builder.Finish().ValueOrDie();
  auto batch = format::RecordBatch::Make(schema, kRows, {array}).ValueOrDie();
  return publisher->NewFixedShapeWriter(*batch, *pool).ValueOrDie();
}

// Publishes batch `i` one way or the other.
struct Source {
  client::BatchPublisher* publisher;
  client::FixedShapeWriter* writer;  // null: build each batch
  format::SchemaPtr schema;
  void Publish(int64_t i) const {
    if (writer != nullptr) {
      PublishOneFixed(writer, i);
    } else {
      PublishOne(publisher, schema, i);
    }
  }
};

// Reads the first and last value of a received batch; checks them.
void CheckBatch(const format::RecordBatch& got, int64_t expected_first) {
  const format::ArrayData& column = *got.column_data(0);
  const int64_t* v = column.GetValues<int64_t>(1);
  const int64_t first = v[0];
  const int64_t last = v[column.length - 1];
  if (first != expected_first || last != first + kRows - 1) {
    std::fprintf(stderr, "batch %lld has values %lld..%lld\n",
                 static_cast<long long>(expected_first), static_cast<long long>(first),
                 static_cast<long long>(last));
    std::exit(2);
  }
}

std::string Tag() { return std::to_string(::getpid()); }

// Ends a run: resets the owners in the order given (users before what they
// map), then removes the run's channel names.
template <typename... Owners>
void EndRun(const std::string& name, Owners&... owners) {
  (owners.reset(), ...);
  (void)shm::RemoveChannel(name);
}

// The channel of a run: `slots` slots, a 16 MiB arena, Message bytes
// inline when a shape is new.
std::unique_ptr<shm::ChannelProducer> NewChannel(const std::string& name, uint32_t slots,
                                                 bool stamp = false) {
  shm::ChannelOptions o;
  o.stamp_publish_time = stamp;
  o.slot_count = slots;
  o.inline_capacity = 448;
  o.arena_bytes = 16 << 20;
  o.max_blocks = 16384;
  o.publish_timeout = 60s;
  o.space_timeout = 60s;
  return shm::ChannelProducer::Create(name, o).ValueOrDie();
}

// Single thread: publish, receive, decode, read; the CPU cost per batch.
double InProcess(int64_t iterations, bool fixed, bool stamp = false) {
  const std::string name = "alkaid_stream_i" + Tag();
  auto schema = Schema();
  auto channel = NewChannel(name, 1024, stamp);
  client::SubscriberOptions so;
  so.consumer.wait_mode = shm::WaitMode::kBusyPoll;
  auto sub = client::BatchSubscriber::Open(name, schema, so).ValueOrDie();
  auto publisher = client::BatchPublisher::Create(channel.get(), schema).ValueOrDie();
  auto writer = fixed ? NewWriter(publisher.get(), schema) : nullptr;
  const Source source{publisher.get(), writer.get(), schema};
  // Warm-up, then the timed loop. Each batch is dropped before the next
  // publish, as a consumer that keeps up drops it.
  for (int64_t i = 0; i < 1000; ++i) {
    source.Publish(i);
    auto got = sub->TryReceive().ValueOrDie();
    if (got.batch == nullptr) Die(Status::Invalid("nothing"), "warm-up");
    CheckBatch(*got.batch, i);
  }
  const int64_t t0 = NowNs();
  for (int64_t i = 0; i < iterations; ++i) {
    source.Publish(i);
    auto got = sub->TryReceive();
    if (!got.ok()) Die(got.status(), "TryReceive");
    if (got->batch == nullptr) Die(Status::Invalid("nothing"), "TryReceive");
    CheckBatch(*got->batch, i);
  }
  const double ns = static_cast<double>(NowNs() - t0) / static_cast<double>(iterations);
  EndRun(name, sub, writer, publisher, channel);
  return ns;
}

struct Shared {
  std::atomic<int> ready;
  std::atomic<int> go;
  int64_t first_ns[8];
  int64_t last_ns[8];
};

struct StreamFigures {
  double per_consumer_rate[8];
  double producer_rate;
};

StreamFigures Stream(int consumers, int64_t batches, bool fixed) {
  const std::string name =
      "alkaid_stream_" + Tag() + "_" + std::to_string(consumers) + (fixed ? "f" : "");
  auto schema = Schema();
  auto channel = NewChannel(name, 4096);
  auto shared = measure::SharedMapping<Shared>::MapOrDie();
  std::vector<pid_t> children;
  for (int c = 0; c < consumers; ++c) {
    const pid_t pid = measure::ForkPinned(measure::CpuPair{});  // not pinned
    if (pid == 0) {
      client::SubscriberOptions so;
      so.consumer.wait_mode = shm::WaitMode::kBusyPoll;
      auto sub = client::BatchSubscriber::Open(name, schema, so).ValueOrDie();
      shared->ready.fetch_add(1);
      for (int64_t i = 0; i < batches; ++i) {
        auto got = sub->Receive(60s);
        if (!got.ok()) Die(got.status(), "consumer receive");
        if (i == 0) shared->first_ns[c] = NowNs();
        CheckBatch(*got->batch, i);
      }
      shared->last_ns[c] = NowNs();
      ::_exit(0);
    }
    children.push_back(pid);
  }
  while (shared->ready.load() < consumers) ::usleep(1000);
  auto publisher = client::BatchPublisher::Create(channel.get(), schema).ValueOrDie();
  auto writer = fixed ? NewWriter(publisher.get(), schema) : nullptr;
  const Source source{publisher.get(), writer.get(), schema};
  const int64_t t0 = NowNs();
  for (int64_t i = 0; i < batches; ++i) source.Publish(i);
  const int64_t t1 = NowNs();
  StreamFigures f{};
  for (int c = 0; c < consumers; ++c) {
    measure::AwaitChild(children[static_cast<size_t>(c)]);
    const double secs = static_cast<double>(shared->last_ns[c] - shared->first_ns[c]) / 1e9;
    f.per_consumer_rate[c] = static_cast<double>(batches - 1) / secs;
  }
  f.producer_rate = static_cast<double>(batches) / (static_cast<double>(t1 - t0) / 1e9);
  EndRun(name, writer, publisher, channel);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--inproc") == 0) {
    const int64_t n = argc >= 3 ? std::atoll(argv[2]) : 1000000;
    const bool fixed = argc >= 4 && std::strcmp(argv[3], "--fixed") == 0;
    const bool stamp = argc >= 5 && std::strcmp(argv[4], "--stamp") == 0;
    std::printf("in-process publish%s%s + receive + decode: %.0f ns per batch\n",
                fixed ? " (FixedShapeWriter)" : "", stamp ? " (stamped)" : "",
                InProcess(n, fixed, stamp));
    return 0;
  }
  const int64_t batches = argc >= 2 ? std::atoll(argv[1]) : 1000000;
  double load[3] = {0, 0, 0};
  (void)::getloadavg(load, 3);
  std::printf("load average %.2f %.2f %.2f; %lld batches of 1 int64 column x %lld rows\n", load[0],
              load[1], load[2], static_cast<long long>(batches), static_cast<long long>(kRows));
  for (bool fixed : {false, true}) {
    const char* how = fixed ? "FixedShapeWriter" : "built per batch";
    std::printf("[%s] in-process publish + receive + decode (one thread): %.0f ns per batch\n", how,
                InProcess(std::min<int64_t>(batches, 200000), fixed));
    for (int consumers : {1, 4}) {
      const StreamFigures f = Stream(consumers, batches, fixed);
      std::printf(
          "[%s] %d consumer(s): producer %.2f M batches/s; received+decoded per "
          "consumer:",
          how, consumers, f.producer_rate / 1e6);
      for (int c = 0; c < consumers; ++c) std::printf(" %.2f", f.per_consumer_rate[c] / 1e6);
      std::printf(" M/s\n");
    }
  }
  return 0;
}
