// alkaid-measure, Alkaid's own transport on its two process layers: the
// client layer (Producer and Consumers through a broker) and the channel
// layer (a ChannelProducer and ChannelConsumers alone: a message is a body of
// the payload's bytes loaned from the arena, its id in `user`, no batch, no
// broker). The ping-pong, the paired ping-pong and the stream are written
// once (PingLoop, PongLoop, StreamLoop, StreamRead) over each layer's sending
// end (ClientOut, ChannelOut) and receiving end (ClientIn, ChannelIn).

#include <unistd.h>

#include <algorithm>
#include <chrono>
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
#include "alkaid/shm/channel.h"
#include "latency_internal.h"

namespace alkaid::tools::latency {

namespace {

using namespace std::chrono_literals;

// Control values carried as a message's id; measured messages have ids >= 0.
constexpr int64_t kWarmValue = -2;     // untimed round trip before each ping
constexpr int64_t kIdleValue = -3;     // side B: measure an idle period now
constexpr int64_t kHelloBase = -1000;  // the client layer's hellos: kHelloBase - k

constexpr auto kSlice = 50ms;  // waits are cut in slices to notice a stop
constexpr int64_t kLinkTimeoutNs = 20'000'000'000;

Status StopStatus() { return Status::Cancelled("stopped"); }

// A message received: its id (client layer: the first value), its rows
// (none for a message without body), first and last value, and when it was
// received (only if the receiving end stamps: a clock read).
struct Got {
  int64_t id = 0, rows = 0, first = 0, last = 0, at_ns = 0;
};

// ---- the client layer ---------------------------------------------------

format::SchemaPtr BatchSchema() {
  return format::schema({format::field("v", format::int64(), false)});
}

shm::WaitMode WaitModeOf(const std::string& mode) {
  if (mode == "spin") return shm::WaitMode::kBusyPoll;
  if (mode == "block") return shm::WaitMode::kBlock;
  return shm::WaitMode::kSpinThenBlock;
}

// A pool plus a batch of one int64 column built in it (the batch's buffers
// share the pool's region, so either may go first); `values` for the caller
// to fill.
struct PooledBatch {
  std::unique_ptr<client::ShmBatchPool> pool;
  format::RecordBatchPtr batch;
  int64_t* values = nullptr;
};

Result<PooledBatch> BuildBatch(client::Producer* producer, const format::SchemaPtr& schema,
                               int64_t rows, uint64_t region_bytes) {
  PooledBatch out;
  ALKAID_ASSIGN_OR_RAISE(out.pool, producer->NewBatchPool(region_bytes));
  ALKAID_ASSIGN_OR_RAISE(auto buffer, format::AllocateBuffer(rows * 8, out.pool.get()));
  out.values = reinterpret_cast<int64_t*>(buffer->mutable_data());
  auto data = format::ArrayData::Make(format::int64(), rows, {nullptr, std::move(buffer)}, 0);
  ALKAID_ASSIGN_OR_RAISE(
      out.batch, format::RecordBatch::Make(schema, rows, {format::MakeArray(std::move(data))}));
  return out;
}

// The client layer's sending end: a Producer; bodies built in a pool, or
// (a stream with --writer fixed) written in a FixedShapeWriter's region.
struct ClientOut {
  using Body = PooledBatch;
  std::unique_ptr<client::Producer> producer;
  format::SchemaPtr schema = BatchSchema();
  std::unique_ptr<client::FixedShapeWriter> writer;
  PooledBatch answer;  // side B: the answer to the next measured ping, built ahead

  Result<Body> Make(int64_t rows, uint64_t region) {
    if (writer == nullptr) return BuildBatch(producer.get(), schema, rows, region);
    // Every value is written by the caller (and the shape has no bitmap).
    ALKAID_RETURN_NOT_OK(writer->Begin(client::FixedShapeWriter::Fill::kNone));
    const std::span<uint8_t> buffer = writer->buffer(1);
    if (buffer.size() < static_cast<uint64_t>(rows) * 8) {
      return Status::Invalid("--writer fixed: a values buffer of ", buffer.size(), " bytes");
    }
    Body body;
    body.values = reinterpret_cast<int64_t*>(buffer.data());
    return body;
  }
  Status Send(const Body& body, int64_t /*id: the first value*/) {
    return writer != nullptr ? writer->Publish() : producer->Publish(*body.batch, body.pool.get());
  }
  // A one-row batch carrying `value` (hellos, control values, answers).
  Status SendValue(int64_t value) {
    ALKAID_ASSIGN_OR_RAISE(auto b, BuildBatch(producer.get(), schema, 1, kSmallRegionBytes));
    b.values[0] = value;
    return producer->Publish(*b.batch, b.pool.get());
  }
  // Side B: the answer built ahead for measured ping `id`, sent by SendAnswer.
  Status Prepare(int64_t id) {
    answer = PooledBatch();
    ALKAID_ASSIGN_OR_RAISE(answer, BuildBatch(producer.get(), schema, 1, kSmallRegionBytes));
    answer.values[0] = id;
    return Status::OK();
  }
  Status SendAnswer(int64_t id) {
    ALKAID_RETURN_NOT_OK(producer->Publish(*answer.batch, answer.pool.get()));
    return Prepare(id + 1);
  }
  Status Close() {
    answer = PooledBatch();
    return producer->Close();
  }
};

// The client layer's receiving end: a Consumer (batches made from recycled
// objects: Next allocates nothing in steady state).
struct ClientIn {
  std::unique_ptr<client::Consumer> consumer;
  format::RecordBatchPtr batch;  // the last one received, until Release or the next
  bool stamp = false;            // Got::at_ns

  Status Next(std::chrono::nanoseconds timeout, Got* got) {
    auto next = consumer->Next(timeout);
    if (!next.ok()) return next.status();
    if (stamp) got->at_ns = NowNs();
    batch = std::move(*next);
    got->rows = batch->num_rows();
    ALKAID_RETURN_NOT_OK(FirstLast(*batch, &got->first, &got->last));
    got->id = got->first;
    return Status::OK();
  }
  void Release() { batch.reset(); }
  Status Close() {
    batch.reset();
    return consumer->Close();
  }
};

Result<ClientOut> OpenClientOut(const RunSpec& spec, const std::string& topic) {
  client::ProducerOptions options;
  options.socket_path = spec.socket;
  options.publish_timeout = 30s;
  // Ping-pong: each side opens its producer while the other side's
  // consumer is not yet looking for new producers (it is in Producer::Open
  // itself), so waiting for them would only delay; the hellos make sure
  // nothing measured is missed. Stream consumers are in Next already.
  options.wait_for_consumers = spec.pattern == "stream" ? 2000ms : 0ms;
  options.drain_timeout = spec.pattern == "stream" ? 30000ms : 2000ms;
  ClientOut out;
  ALKAID_ASSIGN_OR_RAISE(out.producer, client::Producer::Open(topic, out.schema, options));
  return out;
}

Result<ClientIn> OpenClientIn(const RunSpec& spec, const std::string& topic) {
  client::ConsumerOptions options;
  options.socket_path = spec.socket;
  options.wait_mode = WaitModeOf(spec.mode);
  ClientIn in;
  ALKAID_ASSIGN_OR_RAISE(in.consumer, client::Consumer::Open(topic, options));
  return in;
}

// ---- the channel layer --------------------------------------------------

struct ChannelOut {
  struct Body {
    shm::ChannelLoan loan;
    int64_t* values = nullptr;
  };
  std::unique_ptr<shm::ChannelProducer> producer;

  Result<Body> Make(int64_t rows, uint64_t /*region*/) {
    Body body;
    ALKAID_ASSIGN_OR_RAISE(body.loan, producer->Loan(static_cast<uint64_t>(rows) * 8));
    body.values = reinterpret_cast<int64_t*>(body.loan.data().data());
    return body;
  }
  Status Send(Body& body, int64_t id) {
    return producer->Publish({}, std::move(body.loan), static_cast<uint64_t>(id));
  }
  Status SendValue(int64_t id) { return producer->Publish({}, static_cast<uint64_t>(id)); }
  Status Prepare(int64_t /*id*/) { return Status::OK(); }
  Status SendAnswer(int64_t id) { return SendValue(id); }
  Status Close() {
    producer->Close();
    return Status::OK();
  }
};

struct ChannelIn {
  std::unique_ptr<shm::ChannelConsumer> consumer;
  shm::ChannelMessage m;  // the last one received, until Release or the next
  bool stamp = false;     // Got::at_ns

  Status Next(std::chrono::nanoseconds timeout, Got* got) {
    ALKAID_RETURN_NOT_OK(consumer->Receive(&m, timeout));
    if (stamp) got->at_ns = NowNs();
    got->id = static_cast<int64_t>(m.user());
    got->rows = static_cast<int64_t>(m.body().size() / 8);
    const auto* v = reinterpret_cast<const int64_t*>(m.body().data());
    got->first = got->rows > 0 ? v[0] : got->id;
    got->last = got->rows > 0 ? v[got->rows - 1] : got->id;
    return Status::OK();
  }
  void Release() { m.Reset(); }
  Status Close() {
    m.Reset();
    consumer->Close();
    return Status::OK();
  }
};

Result<ChannelOut> CreateChannelOut(const RunSpec& spec, const std::string& name, uint32_t slots,
                                    uint64_t arena_bytes, int consumers) {
  shm::ChannelOptions o;
  o.slot_count = slots;
  o.arena_bytes = arena_bytes;
  o.max_consumers = static_cast<uint32_t>(consumers);
  o.stamp_publish_time = spec.timestamps;
  o.publish_timeout = 30s;
  o.space_timeout = 30s;
  ChannelOut out;
  ALKAID_ASSIGN_OR_RAISE(out.producer, shm::ChannelProducer::Create(name, o));
  return out;
}

Result<ChannelIn> OpenChannelIn(const RunSpec& spec, const std::string& name) {
  shm::ChannelConsumerOptions o;
  o.wait_mode = WaitModeOf(spec.mode);
  ChannelIn in;
  ALKAID_ASSIGN_OR_RAISE(in.consumer, shm::ChannelConsumer::Open(name, o));
  return in;
}

// The channel layer's processes find each other by counts in the shared
// block: waits until `counter` reaches `want`.
Status AwaitCount(const std::atomic<int>& counter, int want, const Shared* s, const char* what) {
  const int64_t deadline = NowNs() + kLinkTimeoutNs;
  while (counter.load() < want) {
    if (Stopping(s)) return StopStatus();
    if (NowNs() > deadline) return Status::TimedOut(what, " within 20 s");
    std::this_thread::sleep_for(1ms);
  }
  return Status::OK();
}

// ---- the patterns, over either layer ------------------------------------

// The next message on `in`, waiting in slices to notice a stop (up to
// `timeout_ns` if > 0); EndOfStream once its producer closed.
template <typename In>
Status Await(In* in, Got* got, const Shared* s, int64_t timeout_ns = 0) {
  const int64_t deadline = timeout_ns > 0 ? NowNs() + timeout_ns : 0;
  while (true) {
    Status st = in->Next(kSlice, got);
    if (st.code() != StatusCode::kTimedOut) return st;
    if (Stopping(s)) return StopStatus();
    if (timeout_ns > 0 && NowNs() > deadline) return Status::TimedOut("nothing within 30 s");
  }
}

// Waits for the answer carrying `expected`, skipping older answers (to
// hellos the other side saw late).
template <typename In>
Status AwaitAnswer(In* in, int64_t expected, const Shared* s) {
  Got got;
  do {
    ALKAID_RETURN_NOT_OK(Await(in, &got, s, 30'000'000'000));
    in->Release();
  } while (got.id != expected);
  return Status::OK();
}

// Side A, once linked: publishes pings, times the round trips; then asks B
// for the idle period.
template <typename Out, typename In>
Status PingLoop(const RunSpec& spec, Shared* s, Out* out, In* answers) {
  const measure::LoopBounds bounds{spec.count, static_cast<int64_t>(spec.duration_seconds * 1e9)};
  // Ping `i` of `rows` values.
  auto ping_once = [&](int64_t i, int64_t rows, measure::RoundTripTimer* timer) -> Status {
    const uint64_t region = PingRegionBytes(rows);
    // Not timed: build the body in shared memory, then an untimed round
    // trip with a body of the same shape of which only the first and last
    // value are written, as the previous message of a one-shape stream
    // would be: it brings the publish and receive paths and their
    // per-shape state (the metadata cache entry, the decode plan) back
    // into the caches a large build evicted, and makes sure B is running.
    ALKAID_ASSIGN_OR_RAISE(auto ping, out->Make(rows, region));
    for (int64_t r = 0; r < rows; ++r) ping.values[r] = i + r;
    if (spec.warmup) {
      ALKAID_ASSIGN_OR_RAISE(auto warm, out->Make(rows, region));
      warm.values[0] = kWarmValue;
      warm.values[rows - 1] = kWarmValue + rows - 1;
      ALKAID_RETURN_NOT_OK(out->Send(warm, kWarmValue));
      ALKAID_RETURN_NOT_OK(AwaitAnswer(answers, kWarmValue, s));
      ALKAID_RETURN_NOT_OK(AwaitOtherSideWaiting(s, kWarmValue));
    } else if (i > 0) {
      ALKAID_RETURN_NOT_OK(AwaitOtherSideWaiting(s, i - 1));
    }
    // Timed: publish -> B holds the body, read first and last value,
    // answers -> A holds the answer.
    timer->Start();
    ALKAID_RETURN_NOT_OK(out->Send(ping, i));
    ALKAID_RETURN_NOT_OK(AwaitAnswer(answers, i, s));
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
    s->histograms[1].Record(small.HalfNs());
    diffs.push_back(timer->HalfNs() - small.HalfNs());
    return Status::OK();
  };
  ALKAID_RETURN_NOT_OK(measure::RunPingPongLoop(
      bounds, &s->histograms[0], &s->progress, &s->elapsed_ns, [s] { return Stopping(s); }, step));
  if (!diffs.empty()) {
    const auto pairs = static_cast<int64_t>(diffs.size());
    const measure::MedianInterval d = measure::MedianWithInterval(std::move(diffs));
    s->paired = {pairs, 0, d.median, d.lo, d.hi};
  }
  // The idle period: B waits with nothing coming.
  s->phase.store(1);
  ALKAID_RETURN_NOT_OK(out->SendValue(kIdleValue));
  while (s->phase.load() != 2) {
    if (Stopping(s)) return StopStatus();
    std::this_thread::sleep_for(10ms);
  }
  return out->Close();
}

// Side B: answers each ping once it holds it and read its first and last
// value, until A's producer closes.
template <typename Out, typename In>
Status PongLoop(const RunSpec& spec, Shared* s, Out* out, In* pings) {
  const bool paired = spec.pattern == "paired";
  int64_t next_id = 0;  // of the next measured ping
  ALKAID_RETURN_NOT_OK(out->Prepare(next_id));
  // What A waits for before a timed ping (AwaitOtherSideWaiting).
  int64_t answered = std::numeric_limits<int64_t>::min();
  Got got;
  while (true) {
    // Release: partner of A's acquire load; everything done since the
    // answer is done before A times anything.
    s->answered.store(answered, std::memory_order_release);
    const Status st = Await(pings, &got, s);
    if (st.code() == StatusCode::kEndOfStream) return out->Close();
    ALKAID_RETURN_NOT_OK(st);
    // The rows of the next measured ping (and of the warm-up before it).
    const int64_t rows = RowsFor(paired && !IsLarge(next_id) ? 64 : spec.payload_bytes);
    if (got.id >= 0) {
      if (got.id != next_id || got.rows != rows || got.last != got.first + rows - 1) {
        return Status::Invalid("ping ", next_id, ": got ", got.rows, " rows, values ", got.first,
                               "..", got.last, "; expected ", rows, " rows, values ", next_id, "..",
                               next_id + rows - 1);
      }
      pings->Release();
      ALKAID_RETURN_NOT_OK(out->SendAnswer(next_id++));
      answered = got.id;
    } else if (got.id == kIdleValue) {
      pings->Release();
      const int64_t cpu0 = ProcessCpuNs();
      const int64_t wall0 = NowNs();
      Status idle = pings->Next(
          std::chrono::nanoseconds(static_cast<int64_t>(spec.idle_seconds * 1e9)), &got);
      s->idle_cpu_ns = ProcessCpuNs() - cpu0;
      s->idle_wall_ns = NowNs() - wall0;
      if (idle.ok()) return Status::Invalid("a message arrived during the idle period");
      if (idle.code() != StatusCode::kTimedOut) return idle;
      s->phase.store(2);
    } else {
      // A hello (one row) or a warm-up (the ping's shape).
      if (got.id == kWarmValue && (got.rows != rows || got.last != got.first + rows - 1)) {
        return Status::Invalid("warm-up: got ", got.rows, " rows, values ", got.first, "..",
                               got.last, "; expected ", rows, " rows, values ", got.first, "..",
                               got.first + rows - 1);
      }
      pings->Release();
      if (got.id <= kHelloBase) s->hellos_seen.fetch_add(1);
      ALKAID_RETURN_NOT_OK(out->SendValue(got.id));
      answered = got.id;
    }
  }
}

// The stream's producer, once linked: `spec.count` bodies whose first value
// is the publish time and the others the sequence number.
template <typename Out>
Status StreamLoop(const RunSpec& spec, Shared* s, Out* out) {
  const int64_t rows = RowsFor(spec.payload_bytes);
  const uint64_t region = RoundUp64(static_cast<uint64_t>(rows) * 8) + 1024;
  const int64_t limit_ns = static_cast<int64_t>(spec.duration_seconds * 1e9);
  const int64_t start = NowNs();
  s->start_ns.store(start);
  for (int64_t i = 0; i < spec.count; ++i) {
    if ((i & 1023) == 0) {
      if (Stopping(s)) return StopStatus();
      if (limit_ns > 0 && NowNs() - start > limit_ns) break;
    }
    ALKAID_ASSIGN_OR_RAISE(auto body, out->Make(rows, region));
    for (int64_t r = 1; r < rows; ++r) body.values[r] = i;
    body.values[0] = NowNs();
    ALKAID_RETURN_NOT_OK(out->Send(body, i));
    s->published.store(i + 1, std::memory_order_relaxed);
  }
  return out->Close();
}

// Stream consumer `index`: checks every sequence number, records publish
// to receive; consumer 0 of the client layer samples memory (`memory`).
template <typename In>
Status StreamRead(const RunSpec& spec, Shared* s, In* in, int index, bool memory) {
  const int64_t rows = RowsFor(spec.payload_bytes);
  bool linked = false;
  int64_t expected = 0;
  const int64_t checkpoint = std::min<int64_t>(1'000'000, std::max<int64_t>(1, spec.count / 2));
  auto sample_memory = [&](int which) {
    MemorySample& m = s->memory[which];
    m.messages = expected;
    m.producer_rss = ResidentBytes(s->producer_pid.load());
    m.consumer_rss = ResidentBytes(static_cast<int>(::getpid()));
    m.broker_rss = ResidentBytes(spec.broker_pid);
    m.segments_bytes = SegmentBytes(spec.shm_prefix);
    s->memory_samples.store(which + 1);
  };
  memory = memory && index == 0;
  in->stamp = true;
  Got got;
  while (true) {
    const Status st = Await(in, &got, s);
    if (st.code() == StatusCode::kEndOfStream) break;
    ALKAID_RETURN_NOT_OK(st);
    if (got.first < 0) {  // a hello (client layer)
      if (!linked) {
        linked = true;
        s->linked.fetch_add(1);
      }
      continue;
    }
    if (got.rows != rows || (rows >= 2 && got.last != expected)) {
      return Status::Invalid("consumer ", index, ": message ", expected, " has ", got.rows,
                             " rows and sequence number ", got.last, "; expected ", rows,
                             " rows (lost or reordered)");
    }
    s->histograms[index].Record(got.at_ns - got.first);
    ++expected;
    s->received[index] = expected;
    s->end_ns[index] = got.at_ns;
    if (index == 0) s->progress.store(expected, std::memory_order_relaxed);
    if (memory && expected == checkpoint) sample_memory(0);
    // At the last batch the producer still runs (it drains in Close()).
    if (memory && expected == spec.count && expected > checkpoint) sample_memory(1);
  }
  if (memory && expected > checkpoint && expected < spec.count) sample_memory(1);
  return in->Close();
}

// ---- each process of a run ----------------------------------------------

Status ClientPing(const RunSpec& spec, Shared* s) {
  ALKAID_ASSIGN_OR_RAISE(auto answers, OpenClientIn(spec, spec.topic_prefix + ".pong"));
  ALKAID_ASSIGN_OR_RAISE(auto out, OpenClientOut(spec, spec.topic_prefix + ".ping"));
  s->ready.fetch_add(1);
  // Hellos until side B answers one, whichever: from then on both are
  // registered on each other's channels and no message is missed (later
  // answers to hellos are skipped by AwaitAnswer). Waiting for the answer
  // to the latest hello instead, reading one answer per hello, would leave
  // this side one answer behind for good once a single answer took longer
  // than the 20 ms wait (B slow to start, a loaded machine).
  const int64_t link_deadline = NowNs() + kLinkTimeoutNs;
  Got got;
  for (int64_t k = 0;; ++k) {
    if (Stopping(s)) return StopStatus();
    if (NowNs() > link_deadline) {
      return Status::TimedOut(
          "side B (pid ", s->pong_pid.load(), ", consumer of '", spec.topic_prefix,
          ".ping', producer of '", spec.topic_prefix, ".pong') did not answer any of ", k,
          " hellos within 20 s; it received ", s->hellos_seen.load(), " of them, and side A (pid ",
          ::getpid(), ") reads ", answers.consumer->producer_count(), " producer(s) of '",
          spec.topic_prefix, ".pong'");
    }
    const int64_t hello = kHelloBase - k;
    ALKAID_RETURN_NOT_OK(out.SendValue(hello));
    const Status st = answers.Next(20ms, &got);
    if (st.code() == StatusCode::kTimedOut) continue;
    ALKAID_RETURN_NOT_OK(st);
    answers.Release();
    if (got.id <= kHelloBase && got.id >= hello) break;  // an answer to any of our hellos
  }
  ALKAID_RETURN_NOT_OK(PingLoop(spec, s, &out, &answers));
  return answers.Close();
}

Status ClientPong(const RunSpec& spec, Shared* s) {
  ALKAID_ASSIGN_OR_RAISE(auto pings, OpenClientIn(spec, spec.topic_prefix + ".ping"));
  ALKAID_ASSIGN_OR_RAISE(auto out, OpenClientOut(spec, spec.topic_prefix + ".pong"));
  s->pong_pid.store(static_cast<int>(::getpid()));
  s->ready.fetch_add(1);
  ALKAID_RETURN_NOT_OK(PongLoop(spec, s, &out, &pings));
  return pings.Close();
}

Status ClientStreamProducer(const RunSpec& spec, Shared* s) {
  ALKAID_ASSIGN_OR_RAISE(auto out, OpenClientOut(spec, spec.topic_prefix + ".stream"));
  s->producer_pid.store(static_cast<int>(::getpid()));
  s->ready.fetch_add(1);
  const int64_t link_deadline = NowNs() + kLinkTimeoutNs;
  while (s->linked.load() < spec.consumers) {
    if (Stopping(s)) return StopStatus();
    if (NowNs() > link_deadline) {
      return Status::TimedOut("only ", s->linked.load(), " of ", spec.consumers,
                              " consumer processes saw the stream within 20 s");
    }
    ALKAID_RETURN_NOT_OK(out.SendValue(kHelloBase));
    std::this_thread::sleep_for(2ms);
  }
  if (spec.writer == "fixed") {
    // The prototype's values do not matter: every batch overwrites them all.
    const int64_t rows = RowsFor(spec.payload_bytes);
    ALKAID_ASSIGN_OR_RAISE(auto prototype,
                           out.Make(rows, RoundUp64(static_cast<uint64_t>(rows) * 8) + 1024));
    ALKAID_ASSIGN_OR_RAISE(out.writer,
                           out.producer->NewFixedShapeWriter(*prototype.batch, *prototype.pool));
    if (out.writer->num_buffers() != 2) {
      return Status::Invalid("--writer fixed: ", out.writer->num_buffers(),
                             " buffers in the shape, expected 2");
    }
  }
  return StreamLoop(spec, s, &out);
}

Status ClientStreamConsumer(const RunSpec& spec, Shared* s, int index) {
  ALKAID_ASSIGN_OR_RAISE(auto in, OpenClientIn(spec, spec.topic_prefix + ".stream"));
  s->ready.fetch_add(1);
  return StreamRead(spec, s, &in, index, true);
}

// Channel layer: each side makes its channel, then opens the other's.
Status ChannelPing(const RunSpec& spec, Shared* s, const std::string& ping,
                   const std::string& pong) {
  const uint64_t arena = PingArenaBytes(spec);
  ALKAID_ASSIGN_OR_RAISE(auto out, CreateChannelOut(spec, ping, kPingSlotCount, arena, 1));
  s->ready.fetch_add(1);
  ALKAID_RETURN_NOT_OK(AwaitCount(s->ready, 2, s, "side B did not make its channel"));
  ALKAID_ASSIGN_OR_RAISE(auto answers, OpenChannelIn(spec, pong));
  s->linked.fetch_add(1);
  ALKAID_RETURN_NOT_OK(AwaitCount(s->linked, 2, s, "side B did not open the ping channel"));
  ALKAID_RETURN_NOT_OK(PingLoop(spec, s, &out, &answers));
  return answers.Close();
}

Status ChannelPong(const RunSpec& spec, Shared* s, const std::string& ping,
                   const std::string& pong) {
  ALKAID_ASSIGN_OR_RAISE(auto out, CreateChannelOut(spec, pong, kPingSlotCount, 4096, 1));
  ALKAID_RETURN_NOT_OK(AwaitCount(s->ready, 1, s, "side A did not make its channel"));
  s->ready.fetch_add(1);
  ALKAID_ASSIGN_OR_RAISE(auto pings, OpenChannelIn(spec, ping));
  s->linked.fetch_add(1);
  ALKAID_RETURN_NOT_OK(PongLoop(spec, s, &out, &pings));
  return pings.Close();
}

Status ChannelStreamProducer(const RunSpec& spec, Shared* s, const std::string& name) {
  const uint64_t region = RoundUp64(static_cast<uint64_t>(RowsFor(spec.payload_bytes)) * 8);
  // As the client layer's stream topic: 1,024 slots, an arena for them all.
  const uint64_t arena =
      std::max<uint64_t>(4 * region + (1 << 20), std::min<uint64_t>(1024 * region, 64 << 20));
  ALKAID_ASSIGN_OR_RAISE(auto out, CreateChannelOut(spec, name, 1024, arena, spec.consumers));
  s->producer_pid.store(static_cast<int>(::getpid()));
  s->ready.fetch_add(1);
  ALKAID_RETURN_NOT_OK(AwaitCount(s->linked, spec.consumers, s, "not every consumer opened"));
  return StreamLoop(spec, s, &out);
}

Status ChannelStreamConsumer(const RunSpec& spec, Shared* s, const std::string& name, int index) {
  ALKAID_RETURN_NOT_OK(AwaitCount(s->ready, 1, s, "the producer did not make its channel"));
  ALKAID_ASSIGN_OR_RAISE(auto in, OpenChannelIn(spec, name));
  s->linked.fetch_add(1);
  return StreamRead(spec, s, &in, index, false);
}

// The client layer's topics, made through the broker and sized for the payload.
Status CreateTopics(const RunSpec& spec) {
  ALKAID_ASSIGN_OR_RAISE(auto admin, client::BrokerClient::Connect(spec.socket));
  const auto schema = BatchSchema();
  const int64_t rows = RowsFor(spec.payload_bytes);
  client::TopicOptions topic;
  topic.publish_timestamps = spec.timestamps;
  if (spec.pattern == "stream") {
    const uint64_t region = RoundUp64(static_cast<uint64_t>(rows) * 8) + 1024;
    topic.slot_count = 1024;
    topic.arena_bytes =
        std::max<uint64_t>(4 * region + (1 << 20), std::min<uint64_t>(1024 * region, 64 << 20));
    return admin->CreateTopic(spec.topic_prefix + ".stream", schema, topic)
        .status()
        .WithContext("creating the stream topic");
  }
  topic.slot_count = kPingSlotCount;
  topic.arena_bytes = PingArenaBytes(spec);
  ALKAID_RETURN_NOT_OK(admin->CreateTopic(spec.topic_prefix + ".ping", schema, topic)
                           .status()
                           .WithContext("creating the ping topic"));
  topic.arena_bytes = 1 << 20;
  return admin->CreateTopic(spec.topic_prefix + ".pong", schema, topic)
      .status()
      .WithContext("creating the pong topic");
}

}  // namespace

Status MeasureAlkaid(const RunSpec& spec, const ProgressHook& progress, Measurement* out) {
  SharedBlock shared;
  ALKAID_RETURN_NOT_OK(shared.Map());
  const bool stream = spec.pattern == "stream";
  const bool channel = spec.layer == "channel";
  if (!channel) ALKAID_RETURN_NOT_OK(CreateTopics(spec));
  const std::string a = spec.topic_prefix + (stream ? ".stream" : ".ping");
  const std::string b = spec.topic_prefix + ".pong";
  Shared* s = shared.get();
  std::vector<std::function<int()>> bodies;
  if (stream) {
    bodies.push_back([&] {
      return ChildMain(s, "producer", [&] {
        return channel ? ChannelStreamProducer(spec, s, a) : ClientStreamProducer(spec, s);
      });
    });
    for (int k = 0; k < spec.consumers; ++k) {
      bodies.push_back([&, k] {
        return ChildMain(s, "consumer " + std::to_string(k), [&] {
          return channel ? ChannelStreamConsumer(spec, s, a, k) : ClientStreamConsumer(spec, s, k);
        });
      });
    }
  } else {
    bodies.push_back([&] {
      return ChildMain(s, "ping side",
                       [&] { return channel ? ChannelPing(spec, s, a, b) : ClientPing(spec, s); });
    });
    bodies.push_back([&] {
      return ChildMain(s, "pong side",
                       [&] { return channel ? ChannelPong(spec, s, a, b) : ClientPong(spec, s); });
    });
  }
  std::function<void()> on_wait;
  if (progress) on_wait = [&] { progress(*s); };
  const Status st = RunChildren(bodies, spec.cpus, &s->control, on_wait);
  if (channel) {
    // What a process that failed left (a producer removes its names).
    (void)shm::RemoveChannel(a);
    if (!stream) (void)shm::RemoveChannel(b);
  }
  ALKAID_RETURN_NOT_OK(st);

  Finish(spec, *s, "alkaid", spec.mode, spec.pattern, out);
  out->layer = spec.layer;
  out->timestamps = spec.timestamps;
  if (stream) {
    if (!channel) out->writer = spec.writer;
    for (int k = 0; k < s->memory_samples.load() && k < 2; ++k) out->memory.push_back(s->memory[k]);
  } else {
    out->has_idle = true;
    out->idle_cpu_ns = s->idle_cpu_ns;
    out->idle_wall_ns = s->idle_wall_ns;
  }
  return Status::OK();
}

}  // namespace alkaid::tools::latency
