// alkaid-measure --layer channel: the libshm channel alone, beneath the
// client layer. Each producer is a ChannelProducer in a process of its own,
// each consumer a ChannelConsumer in another; a message is a body of the
// payload's bytes loaned from the arena (int64 values, as the client layer's
// column) with its id in `user` and no inline bytes, and the receiver reads
// the body's first and last value. No batch, no broker: the client layer's
// figure minus this one is what batches, metadata and the broker session
// cost on the path.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

#include "alkaid/shm/channel.h"
#include "latency_internal.h"

namespace alkaid::tools::latency {

namespace {

using namespace std::chrono_literals;

constexpr int64_t kWarmId = -2;  // untimed round trip before each ping
constexpr int64_t kIdleId = -3;  // side B: measure an idle period now

Status Stop() { return Status::Cancelled("stopped"); }

shm::ChannelOptions Options(const RunSpec& spec, uint32_t slots, uint64_t arena_bytes,
                            int consumers) {
  shm::ChannelOptions o;
  o.slot_count = slots;
  o.arena_bytes = arena_bytes;
  o.max_consumers = static_cast<uint32_t>(consumers);
  o.stamp_publish_time = spec.timestamps;
  o.publish_timeout = 30s;
  o.space_timeout = 30s;
  return o;
}

// Waits until the other processes counted `want` in `counter` (set-up).
Status AwaitCount(const std::atomic<int>& counter, int want, const Shared* s, const char* what) {
  const int64_t deadline = NowNs() + 20'000'000'000;
  while (counter.load() < want) {
    if (Stopping(s)) return Stop();
    if (NowNs() > deadline) return Status::TimedOut(what, " within 20 s");
    std::this_thread::sleep_for(1ms);
  }
  return Status::OK();
}

// Opens channel `name` (made by another process) with the run's waiting.
Result<std::unique_ptr<shm::ChannelConsumer>> OpenConsumer(const RunSpec& spec,
                                                           const std::string& name) {
  shm::ChannelConsumerOptions o;
  o.wait_mode = spec.mode == "spin"    ? shm::WaitMode::kBusyPoll
                : spec.mode == "block" ? shm::WaitMode::kBlock
                                       : shm::WaitMode::kSpinThenBlock;
  return shm::ChannelConsumer::Open(name, o);
}

// The next message, waiting in slices of 50 ms to notice a stop;
// EndOfStream once the producer closed.
Status Next(shm::ChannelConsumer* consumer, shm::ChannelMessage* m, const Shared* s) {
  while (true) {
    Status st = consumer->Receive(m, 50ms);
    if (st.code() != StatusCode::kTimedOut) return st;
    if (Stopping(s)) return Stop();
  }
}

// A loaned body of `rows` values; `*values` points at them.
Result<shm::ChannelLoan> LoanBody(shm::ChannelProducer* p, int64_t rows, int64_t** values) {
  ALKAID_ASSIGN_OR_RAISE(auto loan, p->Loan(static_cast<uint64_t>(rows) * 8));
  *values = reinterpret_cast<int64_t*>(loan.data().data());
  return loan;
}

// The first and last value of a received body of `rows` values.
Status Ends(const shm::ChannelMessage& m, int64_t rows, int64_t* first, int64_t* last) {
  if (m.body().size() != static_cast<uint64_t>(rows) * 8) {
    return Status::Invalid("message ", m.sequence(), ": a body of ", m.body().size(),
                           " bytes, expected ", rows * 8);
  }
  const auto* v = reinterpret_cast<const int64_t*>(m.body().data());
  *first = v[0];
  *last = v[rows - 1];
  return Status::OK();
}

// ---- ping-pong ----------------------------------------------------------

// Side A: publishes pings on its channel, times the round trips.
Status PingSide(const RunSpec& spec, Shared* s, const std::string& ping, const std::string& pong) {
  const int64_t rows = RowsFor(spec.payload_bytes);
  ALKAID_ASSIGN_OR_RAISE(
      auto producer,
      shm::ChannelProducer::Create(ping, Options(spec, kPingSlotCount, PingArenaBytes(rows), 1)));
  s->ready.fetch_add(1);
  ALKAID_RETURN_NOT_OK(AwaitCount(s->ready, 2, s, "side B did not make its channel"));
  ALKAID_ASSIGN_OR_RAISE(auto answers, OpenConsumer(spec, pong));
  s->linked.fetch_add(1);
  ALKAID_RETURN_NOT_OK(AwaitCount(s->linked, 2, s, "side B did not open the ping channel"));
  shm::ChannelMessage answer;
  auto round_trip = [&](shm::ChannelLoan body, int64_t id) -> Status {
    ALKAID_RETURN_NOT_OK(producer->Publish({}, std::move(body), static_cast<uint64_t>(id)));
    ALKAID_RETURN_NOT_OK(Next(answers.get(), &answer, s));
    if (static_cast<int64_t>(answer.user()) != id) {
      return Status::Invalid("answer ", static_cast<int64_t>(answer.user()), " to ping ", id);
    }
    return Status::OK();
  };
  const measure::LoopBounds bounds{spec.count, static_cast<int64_t>(spec.duration_seconds * 1e9)};
  auto step = [&](int64_t i, measure::RoundTripTimer* timer) -> Status {
    // Not timed, as the client layer: every value written, then a round
    // trip with a body of the same size of which the ends are written.
    int64_t* values = nullptr;
    ALKAID_ASSIGN_OR_RAISE(auto body, LoanBody(producer.get(), rows, &values));
    for (int64_t r = 0; r < rows; ++r) values[r] = i + r;
    if (spec.warmup) {
      ALKAID_ASSIGN_OR_RAISE(auto warm, LoanBody(producer.get(), rows, &values));
      values[0] = kWarmId;
      values[rows - 1] = kWarmId + rows - 1;
      ALKAID_RETURN_NOT_OK(round_trip(std::move(warm), kWarmId));
      ALKAID_RETURN_NOT_OK(AwaitOtherSideWaiting(s, kWarmId));
    } else if (i > 0) {
      ALKAID_RETURN_NOT_OK(AwaitOtherSideWaiting(s, i - 1));
    }
    timer->Start();
    ALKAID_RETURN_NOT_OK(round_trip(std::move(body), i));
    timer->Stop();
    return Status::OK();
  };
  ALKAID_RETURN_NOT_OK(measure::RunPingPongLoop(
      bounds, &s->histograms[0], &s->progress, &s->elapsed_ns, [s] { return Stopping(s); }, step));
  // The idle period: B waits in Receive with nothing coming.
  ALKAID_RETURN_NOT_OK(producer->Publish({}, static_cast<uint64_t>(kIdleId)));
  while (s->phase.load() != 2) {
    if (Stopping(s)) return Stop();
    std::this_thread::sleep_for(10ms);
  }
  producer->Close();
  return Status::OK();
}

// Side B: answers each ping (a message without body, the ping's id) once
// it read and checked the body's first and last value.
Status PongSide(const RunSpec& spec, Shared* s, const std::string& ping, const std::string& pong) {
  const int64_t rows = RowsFor(spec.payload_bytes);
  ALKAID_ASSIGN_OR_RAISE(
      auto producer, shm::ChannelProducer::Create(pong, Options(spec, kPingSlotCount, 4096, 1)));
  ALKAID_RETURN_NOT_OK(AwaitCount(s->ready, 1, s, "side A did not make its channel"));
  s->ready.fetch_add(1);
  ALKAID_ASSIGN_OR_RAISE(auto pings, OpenConsumer(spec, ping));
  s->linked.fetch_add(1);
  int64_t answered = std::numeric_limits<int64_t>::min();
  shm::ChannelMessage m;
  while (true) {
    // Release: partner of A's acquire load (AwaitOtherSideWaiting).
    s->answered.store(answered, std::memory_order_release);
    const Status st = Next(pings.get(), &m, s);
    if (st.code() == StatusCode::kEndOfStream) return Status::OK();
    ALKAID_RETURN_NOT_OK(st);
    const auto id = static_cast<int64_t>(m.user());
    if (id == kIdleId) {
      const int64_t cpu0 = ProcessCpuNs();
      const int64_t wall0 = NowNs();
      const Status idle = pings->Receive(
          &m, std::chrono::nanoseconds(static_cast<int64_t>(spec.idle_seconds * 1e9)));
      s->idle_cpu_ns = ProcessCpuNs() - cpu0;
      s->idle_wall_ns = NowNs() - wall0;
      if (idle.code() != StatusCode::kTimedOut) {
        return idle.ok() ? Status::Invalid("a message arrived during the idle period") : idle;
      }
      s->phase.store(2);
      continue;
    }
    int64_t first = 0, last = 0;
    ALKAID_RETURN_NOT_OK(Ends(m, rows, &first, &last));
    if (first != id || last != id + rows - 1) {
      return Status::Invalid("ping ", id, ": values ", first, "..", last, ", expected ", id, "..",
                             id + rows - 1);
    }
    m.Reset();  // the block goes back before the answer, as the client layer's batch
    ALKAID_RETURN_NOT_OK(producer->Publish({}, static_cast<uint64_t>(id)));
    answered = id;
  }
}

// ---- stream -------------------------------------------------------------

Status StreamProducer(const RunSpec& spec, Shared* s, const std::string& name) {
  const int64_t rows = RowsFor(spec.payload_bytes);
  const uint64_t region = RoundUp64(static_cast<uint64_t>(rows) * 8);
  // The client layer's stream topic: 1,024 slots, an arena for all of them.
  const uint64_t arena =
      std::max<uint64_t>(4 * region + (1 << 20), std::min<uint64_t>(1024 * region, 64 << 20));
  ALKAID_ASSIGN_OR_RAISE(auto producer, shm::ChannelProducer::Create(
                                            name, Options(spec, 1024, arena, spec.consumers)));
  s->producer_pid.store(static_cast<int>(::getpid()));
  s->ready.fetch_add(1);
  ALKAID_RETURN_NOT_OK(
      AwaitCount(s->linked, spec.consumers, s, "not every consumer opened the channel"));
  const int64_t limit_ns = static_cast<int64_t>(spec.duration_seconds * 1e9);
  const int64_t start = NowNs();
  s->start_ns.store(start);
  for (int64_t i = 0; i < spec.count; ++i) {
    if ((i & 1023) == 0) {
      if (Stopping(s)) return Stop();
      if (limit_ns > 0 && NowNs() - start > limit_ns) break;
    }
    int64_t* values = nullptr;
    ALKAID_ASSIGN_OR_RAISE(auto body, LoanBody(producer.get(), rows, &values));
    // Value 0: publish time; the others: the sequence number.
    for (int64_t r = 1; r < rows; ++r) values[r] = i;
    values[0] = NowNs();
    ALKAID_RETURN_NOT_OK(producer->Publish({}, std::move(body), static_cast<uint64_t>(i)));
    s->published.store(i + 1, std::memory_order_relaxed);
  }
  producer->Close();
  return Status::OK();
}

Status StreamConsumer(const RunSpec& spec, Shared* s, const std::string& name, int index) {
  const int64_t rows = RowsFor(spec.payload_bytes);
  ALKAID_RETURN_NOT_OK(AwaitCount(s->ready, 1, s, "the producer did not make its channel"));
  ALKAID_ASSIGN_OR_RAISE(auto consumer, OpenConsumer(spec, name));
  s->linked.fetch_add(1);
  shm::ChannelMessage m;
  for (int64_t expected = 0;; ++expected) {
    const Status st = Next(consumer.get(), &m, s);
    if (st.code() == StatusCode::kEndOfStream) return Status::OK();
    ALKAID_RETURN_NOT_OK(st);
    const int64_t now = NowNs();
    int64_t first = 0, last = 0;
    ALKAID_RETURN_NOT_OK(Ends(m, rows, &first, &last));
    if (static_cast<int64_t>(m.user()) != expected || (rows >= 2 && last != expected)) {
      return Status::Invalid("consumer ", index, ": message ", expected, " carries ", m.user(),
                             " and sequence number ", last, " (lost or reordered)");
    }
    s->histograms[index].Record(now - first);
    s->received[index] = expected + 1;
    s->end_ns[index] = now;
    if (index == 0) s->progress.store(expected + 1, std::memory_order_relaxed);
  }
}

}  // namespace

Status MeasureChannel(const RunSpec& spec, const ProgressHook& progress, Measurement* out) {
  SharedBlock shared;
  ALKAID_RETURN_NOT_OK(shared.Map());
  Shared* s = shared.get();
  const bool stream = spec.pattern == "stream";
  const std::string a = spec.topic_prefix + (stream ? ".stream" : ".ping");
  const std::string b = spec.topic_prefix + ".pong";
  std::vector<std::function<int()>> bodies;
  if (stream) {
    bodies.push_back(
        [&] { return ChildMain(s, "producer", [&] { return StreamProducer(spec, s, a); }); });
    for (int k = 0; k < spec.consumers; ++k) {
      bodies.push_back([&, k] {
        return ChildMain(s, "consumer " + std::to_string(k),
                         [&] { return StreamConsumer(spec, s, a, k); });
      });
    }
  } else {
    bodies.push_back(
        [&] { return ChildMain(s, "ping side", [&] { return PingSide(spec, s, a, b); }); });
    bodies.push_back(
        [&] { return ChildMain(s, "pong side", [&] { return PongSide(spec, s, a, b); }); });
  }
  std::function<void()> on_wait;
  if (progress) on_wait = [&] { progress(*s); };
  const Status st = RunChildren(bodies, spec.cpus, &s->control, on_wait);
  // What a process that failed left behind (its producer removes its names).
  (void)shm::RemoveChannel(a);
  if (!stream) (void)shm::RemoveChannel(b);
  ALKAID_RETURN_NOT_OK(st);
  Finish(spec, *s, "alkaid", spec.mode, spec.pattern, out);
  out->layer = "channel";
  out->timestamps = spec.timestamps;
  if (!stream) {
    out->has_idle = true;
    out->idle_cpu_ns = s->idle_cpu_ns;
    out->idle_wall_ns = s->idle_wall_ns;
  }
  return Status::OK();
}

}  // namespace alkaid::tools::latency
