// alkaid-measure, Alkaid's own transport on its two process layers: the
// client layer (Producer and Consumers through a broker) and the channel
// layer (a ChannelProducer and ChannelConsumers alone: a message is a body of
// the payload's bytes loaned from the arena, its id in `user`, no batch, no
// broker): each layer's sending end (ClientOut, ChannelOut) and receiving
// end (ClientIn, ChannelIn) for the ping-pong, the paired ping-pong and the
// stream of latency_loops.h, and the processes of a run.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/array.h"
#include "alkaid/format/array_data.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/shm/channel.h"
#include "latency_loops.h"

namespace alkaid::tools::latency {

namespace {

using namespace std::chrono_literals;

// ---- the client layer ---------------------------------------------------

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
  ALKAID_ASSIGN_OR_RAISE(out.batch, Int64Batch(schema, rows, out.pool.get(), &out.values));
  return out;
}

// The client layer's sending end: a Producer; bodies built in a pool, or
// (a stream with --writer fixed) written in a FixedShapeWriter's region.
struct ClientOut {
  using Body = PooledBatch;
  std::unique_ptr<client::Producer> producer;
  format::SchemaPtr schema = BatchSchema();
  std::unique_ptr<client::FixedShapeWriter> writer;  // stream, --writer fixed
  PooledBatch answer;  // side B: the answer to the next measured ping, built ahead
  PooledBatch next;    // stream, built: the body between Begin and Commit
  // Stream, built: the builder of every body, kept and pointed at each
  // body's pool (ArrayBuilder::ResetTo), as a producer that builds every
  // batch alike keeps it (and as shm_stream_bench's built loop does).
  std::unique_ptr<format::Int64Builder> builder;

  Result<Body> Make(int64_t rows, uint64_t region) {
    return BuildBatch(producer.get(), schema, rows, region);
  }
  Status Send(const Body& body, int64_t /*id: the first value*/) {
    return producer->Publish(*body.batch, body.pool.get());
  }
  // The stream's body: the writer's region (its values buffer), else a
  // batch built in a pool of its own, as Make's.
  Status Begin(int64_t rows, uint64_t region, int64_t** values) {
    if (writer != nullptr) {
      // Every value is written by the caller (and the shape has no bitmap).
      ALKAID_RETURN_NOT_OK(writer->Begin(client::FixedShapeWriter::Fill::kNone));
      const std::span<uint8_t> buffer = writer->buffer(1);
      if (buffer.size() < static_cast<uint64_t>(rows) * 8) {
        return Status::Invalid("--writer fixed: a values buffer of ", buffer.size(), " bytes");
      }
      *values = reinterpret_cast<int64_t*>(buffer.data());
      return Status::OK();
    }
    return BeginBuilt(rows, region, values);
  }
  // The built stream's body: `rows` slots appended by the kept builder in a
  // pool of its own (zeros: one 512-byte fill for the stream's 64 values),
  // finished into its batch at once; the caller then writes every value into
  // the batch's values buffer (the builder's bytes, which Finish hands to
  // the array in place: checked), the publish time last, as into Make's.
  Status BeginBuilt(int64_t rows, uint64_t region, int64_t** values) {
    if (builder == nullptr) builder = std::make_unique<format::Int64Builder>();
    ALKAID_ASSIGN_OR_RAISE(next.pool, producer->NewBatchPool(region));
    ALKAID_RETURN_NOT_OK(builder->ResetTo(next.pool.get()));
    ALKAID_RETURN_NOT_OK(builder->AppendEmptyValues(rows));
    const uint8_t* bytes = builder->GetValue(0);
    ALKAID_ASSIGN_OR_RAISE(auto array, builder->Finish());
    const auto& buffers = array->data()->buffers;
    if (buffers.size() != 2 || buffers[1] == nullptr || buffers[1]->data() != bytes) {
      return Status::Invalid("--writer build: the finished array's values are not the builder's");
    }
    ALKAID_ASSIGN_OR_RAISE(next.batch, format::RecordBatch::Make(schema, rows, {std::move(array)}));
    // The region's bytes, writable (a mapping of the channel's arena): the
    // batch is ours alone until Commit publishes it.
    *values = reinterpret_cast<int64_t*>(const_cast<uint8_t*>(bytes));
    return Status::OK();
  }
  Status Commit(int64_t /*id: the first value*/) {
    if (writer != nullptr) return writer->Publish();
    Status st = producer->Publish(*next.batch, next.pool.get());
    next = PooledBatch();
    return st;
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
    next = PooledBatch();
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
    return TakeBatch(std::move(*next), stamp, &batch, got);
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
  // --writer fixed: the writer's regions are fixed blocks of the channel
  // (ProducerOptions::fixed_block_bytes, sized to the writer's body; no
  // block table, no return queue). ALKAID_MEASURE_FIXED_BLOCKS=0 leaves
  // them out, for the figure without them from the same build.
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read before this process's threads start
  const char* fixed_blocks = std::getenv("ALKAID_MEASURE_FIXED_BLOCKS");
  if (spec.writer == "fixed" && (fixed_blocks == nullptr || std::string(fixed_blocks) != "0")) {
    ALKAID_ASSIGN_OR_RAISE(
        options.fixed_block_bytes,
        client::Producer::FixedShapeBodyBytes(*BatchSchema(), RowsFor(spec.payload_bytes)));
  }
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
  // The stream's loan, refilled by each Begin (LoanInto: one loan object
  // for the stream, no reference count touched a body).
  shm::ChannelLoan next;

  Result<Body> Make(int64_t rows, uint64_t /*region*/) {
    Body body;
    ALKAID_ASSIGN_OR_RAISE(body.loan, producer->Loan(static_cast<uint64_t>(rows) * 8));
    body.values = reinterpret_cast<int64_t*>(body.loan.data().data());
    return body;
  }
  Status Send(Body& body, int64_t id) {
    return producer->Publish({}, std::move(body.loan), static_cast<uint64_t>(id));
  }
  Status Begin(int64_t rows, uint64_t /*region*/, int64_t** values) {
    ALKAID_RETURN_NOT_OK(producer->LoanInto(static_cast<uint64_t>(rows) * 8, &next));
    *values = reinterpret_cast<int64_t*>(next.data().data());
    return Status::OK();
  }
  Status Commit(int64_t id) {
    return producer->Publish({}, std::move(next), static_cast<uint64_t>(id));
  }
  Status SendValue(int64_t id) { return producer->Publish({}, static_cast<uint64_t>(id)); }
  Status Prepare(int64_t /*id*/) { return Status::OK(); }
  Status SendAnswer(int64_t id) { return SendValue(id); }
  Status Close() {
    next.Reset();
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
  // As the client layer's stream topic, for bodies without metadata.
  const uint64_t arena =
      StreamArenaBytes(RoundUp64(static_cast<uint64_t>(RowsFor(spec.payload_bytes)) * 8));
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
    topic.slot_count = 1024;
    topic.arena_bytes = StreamArenaBytes(RoundUp64(static_cast<uint64_t>(rows) * 8) + 1024);
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
  const Status st = RunProcesses(bodies, spec, progress, s);
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
    out->has_idle = spec.idle_seconds > 0;
    out->idle_cpu_ns = s->idle_cpu_ns;
    out->idle_wall_ns = s->idle_wall_ns;
  }
  return Status::OK();
}

}  // namespace alkaid::tools::latency
