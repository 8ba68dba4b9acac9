// alkaid-measure, the client layer (the broker transport): producer and consumers in
// separate processes, through the client library (Producer, Consumer).

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/array.h"
#include "alkaid/format/array_data.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/record_batch.h"
#include "latency_internal.h"

namespace alkaid::tools::latency {

namespace {

using namespace std::chrono_literals;

// Control values carried in the first value of small batches; measured
// batches carry ids >= 0.
constexpr int64_t kWarmValue = -2;     // untimed round trip before each ping
constexpr int64_t kIdleValue = -3;     // consumer: measure an idle period now
constexpr int64_t kHelloBase = -1000;  // hellos: kHelloBase - k

constexpr auto kSlice = 50ms;  // waits are cut in slices to notice a stop
constexpr int64_t kAnswerTimeoutNs = 30'000'000'000;

Status StopStatus() { return Status::Cancelled("stopped"); }

format::SchemaPtr BatchSchema() {
  return format::schema({format::field("v", format::int64(), false)});
}

shm::WaitMode WaitModeOf(const std::string& mode) {
  if (mode == "spin") return shm::WaitMode::kBusyPoll;
  if (mode == "block") return shm::WaitMode::kBlock;
  return shm::WaitMode::kSpinThenBlock;
}

// A batch of `rows` int64 values allocated from `pool`; `*values` points at
// them for the caller to fill (the batch is only built, not published).
Result<format::RecordBatchPtr> NewBatch(format::MemoryPool* pool, const format::SchemaPtr& schema,
                                        int64_t rows, int64_t** values) {
  ALKAID_ASSIGN_OR_RAISE(auto buffer, format::AllocateBuffer(rows * 8, pool));
  *values = reinterpret_cast<int64_t*>(buffer->mutable_data());
  auto data = format::ArrayData::Make(format::int64(), rows, {nullptr, std::move(buffer)}, 0);
  return format::RecordBatch::Make(schema, rows, {format::MakeArray(std::move(data))});
}

// A pool plus the batch built in it (the batch's buffers share the pool's
// region, so either may go first).
struct PooledBatch {
  std::unique_ptr<client::ShmBatchPool> pool;
  format::RecordBatchPtr batch;
  int64_t* values = nullptr;
};

Result<PooledBatch> BuildBatch(client::Producer* producer, const format::SchemaPtr& schema,
                               int64_t rows, uint64_t region_bytes) {
  PooledBatch out;
  ALKAID_ASSIGN_OR_RAISE(out.pool, producer->NewBatchPool(region_bytes));
  ALKAID_ASSIGN_OR_RAISE(out.batch, NewBatch(out.pool.get(), schema, rows, &out.values));
  return out;
}

Status PublishValue(client::Producer* producer, const format::SchemaPtr& schema, int64_t value) {
  ALKAID_ASSIGN_OR_RAISE(auto b, BuildBatch(producer, schema, 1, kSmallRegionBytes));
  b.values[0] = value;
  return producer->Publish(*b.batch, b.pool.get());
}

// Waits for the answer carrying `expected`, skipping older answers (to
// hellos the other side saw late).
Status AwaitAnswer(client::Consumer* consumer, int64_t expected, const Shared* shared) {
  const int64_t deadline = NowNs() + kAnswerTimeoutNs;
  // Answers are made from recycled objects (Consumer::Next): no allocation.
  while (true) {
    auto answer = consumer->Next(kSlice);
    if (!answer.ok()) {
      const Status& got = answer.status();
      if (got.code() != StatusCode::kTimedOut) return got;
      if (Stopping(shared)) return StopStatus();
      if (NowNs() > deadline) {
        return Status::TimedOut("no answer carrying ", expected, " within 30 s");
      }
      continue;
    }
    int64_t first = 0, last = 0;
    ALKAID_RETURN_NOT_OK(FirstLast(**answer, &first, &last));
    answer->reset();
    if (first == expected) return Status::OK();
  }
}

client::ProducerOptions MakeProducerOptions(const RunSpec& spec) {
  client::ProducerOptions options;
  options.socket_path = spec.socket;
  options.publish_timeout = 30s;
  // Ping-pong: each side opens its producer while the other side's
  // consumer is not yet looking for new producers (it is in Producer::Open
  // itself), so waiting for them would only delay; the hellos make sure
  // nothing measured is missed. Stream consumers are in Next already.
  options.wait_for_consumers = spec.pattern == "stream" ? 2000ms : 0ms;
  options.drain_timeout = 2000ms;
  return options;
}

client::ConsumerOptions MakeConsumerOptions(const RunSpec& spec) {
  client::ConsumerOptions options;
  options.socket_path = spec.socket;
  options.wait_mode = WaitModeOf(spec.mode);
  return options;
}

// ---- ping-pong ----------------------------------------------------------

// Side A: publishes pings, times the round trips.
Status PingSide(const RunSpec& spec, Shared* shared) {
  const auto schema = BatchSchema();
  ALKAID_ASSIGN_OR_RAISE(
      auto answers, client::Consumer::Open(spec.topic_prefix + ".pong", MakeConsumerOptions(spec)));
  ALKAID_ASSIGN_OR_RAISE(auto producer, client::Producer::Open(spec.topic_prefix + ".ping", schema,
                                                               MakeProducerOptions(spec)));
  shared->ready.fetch_add(1);

  // Hellos until side B answers one, whichever: from then on both are
  // registered on each other's channels and no message is missed (later
  // answers to hellos are skipped by AwaitAnswer). Waiting for the answer
  // to the latest hello instead, reading one answer per hello, would leave
  // this side one answer behind for good once a single answer took longer
  // than the 20 ms wait (B slow to start, a loaded machine).
  const int64_t link_deadline = NowNs() + 20'000'000'000;
  for (int64_t k = 0;; ++k) {
    if (Stopping(shared)) return StopStatus();
    if (NowNs() > link_deadline) {
      return Status::TimedOut(
          "side B (pid ", shared->pong_pid.load(), ", consumer of '", spec.topic_prefix,
          ".ping', producer of '", spec.topic_prefix, ".pong') did not answer any of ", k,
          " hellos within 20 s; it received ", shared->hellos_seen.load(),
          " of them, and side A (pid ", ::getpid(), ") reads ", answers->producer_count(),
          " producer(s) of '", spec.topic_prefix, ".pong'");
    }
    const int64_t hello = kHelloBase - k;
    ALKAID_RETURN_NOT_OK(PublishValue(producer.get(), schema, hello));
    auto got = answers->Next(20ms);
    if (!got.ok()) {
      if (got.status().code() == StatusCode::kTimedOut) continue;
      return got.status();
    }
    int64_t first = 0, last = 0;
    ALKAID_RETURN_NOT_OK(FirstLast(**got, &first, &last));
    if (first <= kHelloBase && first >= hello) break;  // an answer to any of our hellos
  }

  const measure::LoopBounds bounds{spec.count, static_cast<int64_t>(spec.duration_seconds * 1e9)};
  const auto stopping = [shared] { return Stopping(shared); };
  // Ping `i` of `rows` values.
  auto ping_once = [&](int64_t i, int64_t rows, measure::RoundTripTimer* timer) -> Status {
    const uint64_t region = PingRegionBytes(rows);
    // Not timed: build the batch in shared memory, then an untimed round
    // trip with a batch of the same shape of which only the first and last
    // value are written, as the previous message of a one-shape stream
    // would be: it brings the publish and receive paths and their
    // per-shape state (the metadata cache entry, the decode plan) back
    // into the caches a large build evicted, and makes sure B is running.
    ALKAID_ASSIGN_OR_RAISE(auto ping, BuildBatch(producer.get(), schema, rows, region));
    for (int64_t r = 0; r < rows; ++r) ping.values[r] = i + r;
    if (spec.warmup) {
      ALKAID_ASSIGN_OR_RAISE(auto warm, BuildBatch(producer.get(), schema, rows, region));
      warm.values[0] = kWarmValue;
      warm.values[rows - 1] = kWarmValue + rows - 1;
      ALKAID_RETURN_NOT_OK(producer->Publish(*warm.batch, warm.pool.get()));
      ALKAID_RETURN_NOT_OK(AwaitAnswer(answers.get(), kWarmValue, shared));
      ALKAID_RETURN_NOT_OK(AwaitOtherSideWaiting(shared, kWarmValue));
    } else if (i > 0) {
      ALKAID_RETURN_NOT_OK(AwaitOtherSideWaiting(shared, i - 1));
    }

    // Timed: publish -> B holds the validated batch, read first and last
    // value, answers -> A holds the answer.
    timer->Start();
    ALKAID_RETURN_NOT_OK(producer->Publish(*ping.batch, ping.pool.get()));
    ALKAID_RETURN_NOT_OK(AwaitAnswer(answers.get(), i, shared));
    timer->Stop();
    return Status::OK();
  };
  // Paired: step i is pings 2i and 2i + 1, one of the size (timed by
  // `timer`, into histograms[0]) and one of 64 B (into histograms[1]).
  const bool paired = spec.pattern == "paired";
  std::vector<int64_t> diffs;
  auto step = [&](int64_t i, measure::RoundTripTimer* timer) -> Status {
    if (!paired) return ping_once(i, RowsFor(spec.payload_bytes), timer);
    measure::RoundTripTimer small;
    for (int64_t id = 2 * i; id < 2 * i + 2; ++id) {
      ALKAID_RETURN_NOT_OK(IsLarge(id) ? ping_once(id, RowsFor(spec.payload_bytes), timer)
                                       : ping_once(id, RowsFor(64), &small));
    }
    shared->histograms[1].Record(small.HalfNs());
    diffs.push_back(timer->HalfNs() - small.HalfNs());
    return Status::OK();
  };
  ALKAID_RETURN_NOT_OK(measure::RunPingPongLoop(bounds, &shared->histograms[0], &shared->progress,
                                                &shared->elapsed_ns, stopping, step));
  if (!diffs.empty()) {
    // The median's 95 % interval: order statistics n/2 -+ 0.98 sqrt(n)
    // (sign test, normal approximation of the binomial).
    std::sort(diffs.begin(), diffs.end());
    const double n = static_cast<double>(diffs.size());
    const double half = 0.98 * std::sqrt(n);
    const auto lo = static_cast<std::size_t>(std::max(0.0, std::floor(n / 2 - half)));
    const auto hi = static_cast<std::size_t>(std::min(n - 1, std::ceil(n / 2 + half)));
    shared->paired = {static_cast<int64_t>(diffs.size()), 0, diffs[diffs.size() / 2], diffs[lo],
                      diffs[hi]};
  }

  // The idle period: B sits in Next with nothing coming.
  shared->phase.store(1);
  ALKAID_RETURN_NOT_OK(PublishValue(producer.get(), schema, kIdleValue));
  while (shared->phase.load() != 2) {
    if (Stopping(shared)) return StopStatus();
    std::this_thread::sleep_for(10ms);
  }
  ALKAID_RETURN_NOT_OK(producer->Close());
  return answers->Close();
}

// Side B: answers each ping once it holds the batch and read its first and
// last values.
Status PongSide(const RunSpec& spec, Shared* shared) {
  const auto schema = BatchSchema();
  ALKAID_ASSIGN_OR_RAISE(
      auto pings, client::Consumer::Open(spec.topic_prefix + ".ping", MakeConsumerOptions(spec)));
  ALKAID_ASSIGN_OR_RAISE(auto producer, client::Producer::Open(spec.topic_prefix + ".pong", schema,
                                                               MakeProducerOptions(spec)));
  shared->pong_pid.store(static_cast<int>(::getpid()));
  shared->ready.fetch_add(1);
  const bool paired = spec.pattern == "paired";

  // The answer to the next measured ping is built ahead, off the timed path.
  int64_t next_id = 0;
  ALKAID_ASSIGN_OR_RAISE(auto answer, BuildBatch(producer.get(), schema, 1, kSmallRegionBytes));
  answer.values[0] = next_id;
  // What A waits for before a timed ping (AwaitOtherSideWaiting).
  int64_t answered = std::numeric_limits<int64_t>::min();
  // Pings are made from recycled objects (Consumer::Next): no allocation.
  format::RecordBatchPtr batch;
  while (true) {
    // Release: partner of A's acquire load; everything done since the
    // answer is done before A times anything.
    shared->answered.store(answered, std::memory_order_release);
    auto ping = pings->Next(kSlice);
    if (ping.ok()) batch = std::move(*ping);
    Status got = ping.status();
    if (!got.ok()) {
      if (got.code() == StatusCode::kEndOfStream) break;
      if (got.code() != StatusCode::kTimedOut) return got;
      if (Stopping(shared)) return StopStatus();
      continue;
    }
    int64_t first = 0, last = 0;
    ALKAID_RETURN_NOT_OK(FirstLast(*batch, &first, &last));
    // The rows of the next measured ping (and of the warm-up before it).
    const int64_t rows = RowsFor(paired && !IsLarge(next_id) ? 64 : spec.payload_bytes);
    if (first >= 0) {
      if (first != next_id || batch->num_rows() != rows || last != first + rows - 1) {
        return Status::Invalid("ping ", next_id, ": got ", batch->num_rows(), " rows, values ",
                               first, "..", last, "; expected ", rows, " rows, values ", next_id,
                               "..", next_id + rows - 1);
      }
      batch.reset();
      ALKAID_RETURN_NOT_OK(producer->Publish(*answer.batch, answer.pool.get()));
      answer = PooledBatch();
      ++next_id;
      ALKAID_ASSIGN_OR_RAISE(answer, BuildBatch(producer.get(), schema, 1, kSmallRegionBytes));
      answer.values[0] = next_id;
      answered = first;
    } else if (first == kIdleValue) {
      batch.reset();
      const int64_t cpu0 = ProcessCpuNs();
      const int64_t wall0 = NowNs();
      auto idle =
          pings->Next(std::chrono::nanoseconds(static_cast<int64_t>(spec.idle_seconds * 1e9)));
      shared->idle_cpu_ns = ProcessCpuNs() - cpu0;
      shared->idle_wall_ns = NowNs() - wall0;
      if (idle.ok()) return Status::Invalid("a batch arrived during the idle period");
      if (idle.status().code() != StatusCode::kTimedOut) return idle.status();
      shared->phase.store(2);
    } else {
      // A hello (one row) or a warm-up (the ping's shape).
      if (first == kWarmValue && (batch->num_rows() != rows || last != first + rows - 1)) {
        return Status::Invalid("warm-up: got ", batch->num_rows(), " rows, values ", first, "..",
                               last, "; expected ", rows, " rows, values ", first, "..",
                               first + rows - 1);
      }
      batch.reset();
      if (first <= kHelloBase) shared->hellos_seen.fetch_add(1);
      ALKAID_RETURN_NOT_OK(PublishValue(producer.get(), schema, first));
      answered = first;
    }
  }
  answer = PooledBatch();
  ALKAID_RETURN_NOT_OK(producer->Close());
  return pings->Close();
}

// ---- stream -------------------------------------------------------------

Status StreamProducer(const RunSpec& spec, Shared* shared) {
  const auto schema = BatchSchema();
  auto options = MakeProducerOptions(spec);
  options.drain_timeout = 30000ms;
  ALKAID_ASSIGN_OR_RAISE(auto producer,
                         client::Producer::Open(spec.topic_prefix + ".stream", schema, options));
  shared->producer_pid.store(static_cast<int>(::getpid()));
  shared->ready.fetch_add(1);
  const int64_t link_deadline = NowNs() + 20'000'000'000;
  while (shared->linked.load() < spec.consumers) {
    if (Stopping(shared)) return StopStatus();
    if (NowNs() > link_deadline) {
      return Status::TimedOut("only ", shared->linked.load(), " of ", spec.consumers,
                              " consumer processes saw the stream within 20 s");
    }
    ALKAID_RETURN_NOT_OK(PublishValue(producer.get(), schema, kHelloBase));
    std::this_thread::sleep_for(2ms);
  }

  const int64_t rows = RowsFor(spec.payload_bytes);
  const uint64_t region = RoundUp64(static_cast<uint64_t>(rows) * 8) + 1024;
  const int64_t limit_ns = static_cast<int64_t>(spec.duration_seconds * 1e9);
  const int64_t start = NowNs();
  shared->start_ns.store(start);
  std::unique_ptr<client::FixedShapeWriter> writer;
  if (spec.writer == "fixed") {
    // The prototype's values do not matter: every batch overwrites them all.
    ALKAID_ASSIGN_OR_RAISE(auto prototype, BuildBatch(producer.get(), schema, rows, region));
    ALKAID_ASSIGN_OR_RAISE(writer,
                           producer->NewFixedShapeWriter(*prototype.batch, *prototype.pool));
    if (writer->num_buffers() != 2) {
      return Status::Invalid("--writer fixed: ", writer->num_buffers(),
                             " buffers in the shape, expected 2");
    }
  }
  for (int64_t i = 0; i < spec.count; ++i) {
    if ((i & 1023) == 0) {
      if (Stopping(shared)) return StopStatus();
      if (limit_ns > 0 && NowNs() - start > limit_ns) break;
    }
    // The batch's values, in shared memory: the writer's fresh region's
    // (buffer 1 of an int64 column; buffer 0 is the absent bitmap), or
    // those of a batch built in a pool.
    PooledBatch b;
    int64_t* values = nullptr;
    if (writer != nullptr) {
      // Every value is written below (and the shape has no bitmap).
      ALKAID_RETURN_NOT_OK(writer->Begin(client::FixedShapeWriter::Fill::kNone));
      const std::span<uint8_t> buffer = writer->buffer(1);
      if (buffer.size() < static_cast<uint64_t>(rows) * 8) {
        return Status::Invalid("--writer fixed: a values buffer of ", buffer.size(), " bytes");
      }
      values = reinterpret_cast<int64_t*>(buffer.data());
    } else {
      ALKAID_ASSIGN_OR_RAISE(b, BuildBatch(producer.get(), schema, rows, region));
      values = b.values;
    }
    // Value 0: publish time; the others: the sequence number.
    for (int64_t r = 1; r < rows; ++r) values[r] = i;
    values[0] = NowNs();
    ALKAID_RETURN_NOT_OK(writer != nullptr ? writer->Publish()
                                           : producer->Publish(*b.batch, b.pool.get()));
    shared->published.store(i + 1, std::memory_order_relaxed);
  }
  return producer->Close();
}

Status StreamConsumer(const RunSpec& spec, Shared* shared, int index) {
  ALKAID_ASSIGN_OR_RAISE(auto consumer, client::Consumer::Open(spec.topic_prefix + ".stream",
                                                               MakeConsumerOptions(spec)));
  shared->ready.fetch_add(1);
  const int64_t rows = RowsFor(spec.payload_bytes);
  Histogram* histogram = &shared->histograms[index];
  bool linked = false;
  int64_t expected = 0;
  const int64_t checkpoint = std::min<int64_t>(1'000'000, std::max<int64_t>(1, spec.count / 2));
  auto sample_memory = [&](int which) {
    MemorySample& m = shared->memory[which];
    m.messages = expected;
    m.producer_rss = ResidentBytes(shared->producer_pid.load());
    m.consumer_rss = ResidentBytes(static_cast<int>(::getpid()));
    m.broker_rss = ResidentBytes(spec.broker_pid);
    m.segments_bytes = SegmentBytes(spec.shm_prefix);
    shared->memory_samples.store(which + 1);
  };
  format::RecordBatchPtr got;  // Next allocates nothing in steady state
  while (true) {
    auto next = consumer->Next(kSlice);
    if (next.ok()) got = std::move(*next);
    Status st = next.status();
    if (!st.ok()) {
      if (st.code() == StatusCode::kEndOfStream) break;
      if (st.code() != StatusCode::kTimedOut) return st;
      if (Stopping(shared)) return StopStatus();
      continue;
    }
    const int64_t now = NowNs();
    int64_t first = 0, last = 0;
    ALKAID_RETURN_NOT_OK(FirstLast(*got, &first, &last));
    if (first < 0) {  // a hello
      if (!linked) {
        linked = true;
        shared->linked.fetch_add(1);
      }
      continue;
    }
    if (got->num_rows() != rows || (rows >= 2 && last != expected)) {
      return Status::Invalid("consumer ", index, ": batch ", expected, " has ", got->num_rows(),
                             " rows and sequence number ", last, "; expected ", rows,
                             " rows (lost or reordered batch)");
    }
    histogram->Record(now - first);
    ++expected;
    shared->received[index] = expected;
    shared->end_ns[index] = now;
    if (index == 0) {
      shared->progress.store(expected, std::memory_order_relaxed);
      if (expected == checkpoint) sample_memory(0);
      // At the last batch the producer still runs (it drains in Close()).
      if (expected == spec.count && expected > checkpoint) sample_memory(1);
    }
  }
  if (index == 0 && expected > checkpoint && expected < spec.count) sample_memory(1);
  return consumer->Close();
}

}  // namespace

Status MeasureAlkaid(const RunSpec& spec, const ProgressHook& progress, Measurement* out) {
  SharedBlock shared;
  ALKAID_RETURN_NOT_OK(shared.Map());
  const bool stream = spec.pattern == "stream";
  const int64_t rows = RowsFor(spec.payload_bytes);

  {
    // Topics are created through the broker, sized for the payload.
    ALKAID_ASSIGN_OR_RAISE(auto admin, client::BrokerClient::Connect(spec.socket));
    const auto schema = BatchSchema();
    if (stream) {
      const uint64_t region = RoundUp64(static_cast<uint64_t>(rows) * 8) + 1024;
      client::TopicOptions topic;
      topic.publish_timestamps = spec.timestamps;
      topic.slot_count = 1024;
      topic.arena_bytes =
          std::max<uint64_t>(4 * region + (1 << 20), std::min<uint64_t>(1024 * region, 64 << 20));
      ALKAID_RETURN_NOT_OK(admin->CreateTopic(spec.topic_prefix + ".stream", schema, topic)
                               .status()
                               .WithContext("creating the stream topic"));
    } else {
      client::TopicOptions ping;
      ping.publish_timestamps = spec.timestamps;
      ping.slot_count = kPingSlotCount;
      ping.arena_bytes = PingArenaBytes(rows);
      client::TopicOptions pong;
      pong.publish_timestamps = spec.timestamps;
      pong.slot_count = kPingSlotCount;
      pong.arena_bytes = 1 << 20;
      ALKAID_RETURN_NOT_OK(admin->CreateTopic(spec.topic_prefix + ".ping", schema, ping)
                               .status()
                               .WithContext("creating the ping topic"));
      ALKAID_RETURN_NOT_OK(admin->CreateTopic(spec.topic_prefix + ".pong", schema, pong)
                               .status()
                               .WithContext("creating the pong topic"));
    }
  }

  Shared* s = shared.get();
  std::vector<std::function<int()>> bodies;
  if (stream) {
    bodies.push_back(
        [&] { return ChildMain(s, "producer", [&] { return StreamProducer(spec, s); }); });
    for (int k = 0; k < spec.consumers; ++k) {
      bodies.push_back([&, k] {
        return ChildMain(s, "consumer " + std::to_string(k),
                         [&] { return StreamConsumer(spec, s, k); });
      });
    }
  } else {
    bodies.push_back([&] { return ChildMain(s, "ping side", [&] { return PingSide(spec, s); }); });
    bodies.push_back([&] { return ChildMain(s, "pong side", [&] { return PongSide(spec, s); }); });
  }
  std::function<void()> on_wait;
  if (progress) on_wait = [&] { progress(*s); };
  ALKAID_RETURN_NOT_OK(RunChildren(bodies, spec.cpus, &s->control, on_wait));

  Finish(spec, *s, "alkaid", spec.mode, spec.pattern, out);
  out->timestamps = spec.timestamps;
  if (stream) {
    out->writer = spec.writer;
    for (int k = 0; k < s->memory_samples.load() && k < 2; ++k) out->memory.push_back(s->memory[k]);
  } else {
    out->has_idle = true;
    out->idle_cpu_ns = s->idle_cpu_ns;
    out->idle_wall_ns = s->idle_wall_ns;
  }
  return Status::OK();
}

}  // namespace alkaid::tools::latency
