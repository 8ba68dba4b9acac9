// alkaid-measure, the baselines: the shared-cache-line floor (for the
// stream pattern, a queue of bodies in shared memory), the same floor with a
// body of the batch's size (the size-matched floor), and an IPC stream over
// Unix domain sockets.

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>

#include "alkaid/format/array.h"
#include "alkaid/format/array_data.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/ipc/writer.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/shm/channel.h"
#include "alkaid/shm/segment.h"
#include "latency_loops.h"

namespace alkaid::tools::latency {

namespace {

namespace ipc = format::ipc;

// ---- floor --------------------------------------------------------------

// The stream pattern's floor: the same bodies (the alkaid producer's 64
// values: the publish time, then the sequence number) through a queue of
// body-sized places (measure::StreamQueue), as many as the alkaid topic has
// slots, by the stream's own loops (StreamLoop, StreamRead: the consumer
// reads the first and last value, as the alkaid consumer does).
constexpr uint64_t kStreamFloorSlots = 1024;  // the alkaid stream topic's slot_count

struct QueueOut {
  measure::StreamQueue* queue;
  const Shared* s;
  uint64_t n = 0;  // messages written

  Status Begin(int64_t /*rows*/, uint64_t /*region*/, int64_t** values) {
    *values = queue->AwaitRoom(n, [this] { return Stopping(s); });
    return *values == nullptr ? StopStatus() : Status::OK();
  }
  Status Commit(int64_t /*id*/) {
    queue->Written(n++);
    return Status::OK();
  }
  Status Close() {
    queue->End(n);
    return Status::OK();
  }
};

// A place is given back at the next Next, once its values were read.
struct QueueIn {
  measure::StreamQueue* queue;
  int64_t rows;
  bool stamp = true;  // always: a stream's consumer
  uint64_t n = 0;     // messages read
  bool holding = false;

  Status Next(std::chrono::nanoseconds /*1,024 spins instead*/, Got* got) {
    if (holding) queue->Consumed(n++);
    holding = false;
    const measure::StreamQueue::Wait wait = queue->AwaitMessage(n);
    if (wait == measure::StreamQueue::Wait::kEnded) return Status::EndOfStream("the stream ended");
    if (wait == measure::StreamQueue::Wait::kWaiting) return Status::TimedOut("not yet");
    const int64_t* values = queue->Place(n);
    *got = {static_cast<int64_t>(n), rows, values[0], values[rows - 1], NowNs()};
    holding = true;
    return Status::OK();
  }
  Status Close() { return Status::OK(); }
};

Status MeasureStreamFloor(const RunSpec& spec, const ProgressHook& progress, Measurement* out) {
  if (spec.consumers != 1) {
    return Status::Invalid("the stream floor has one consumer (--consumers 1)");
  }
  SharedBlock shared;
  ALKAID_RETURN_NOT_OK(shared.Map());
  Shared* s = shared.get();
  const int64_t rows = RowsFor(spec.payload_bytes);
  measure::StreamQueue queue;  // places of whole 64-byte lines
  ALKAID_RETURN_NOT_OK(queue.Map(kStreamFloorSlots, (static_cast<uint64_t>(rows) + 7) / 8 * 8));
  std::vector<std::function<int()>> bodies;
  bodies.push_back([&] {
    return ChildMain(s, "stream floor producer", [&]() -> Status {
      s->producer_pid.store(static_cast<int>(::getpid()));
      ALKAID_RETURN_NOT_OK(AwaitCount(s->linked, 1, s, "the consumer did not start"));
      QueueOut queue_out{&queue, s};
      return StreamLoop(spec, s, &queue_out);
    });
  });
  bodies.push_back([&] {
    return ChildMain(s, "stream floor consumer", [&]() -> Status {
      QueueIn queue_in{&queue, rows};
      s->linked.fetch_add(1);
      return StreamRead(spec, s, &queue_in, 0, false);
    });
  });
  ALKAID_RETURN_NOT_OK(RunProcesses(bodies, spec, progress, s));
  Finish(spec, *s, "floor", "spin", "stream", out);
  return Status::OK();
}

}  // namespace

Status MeasureFloor(const RunSpec& spec, const ProgressHook& progress, Measurement* out) {
  if (spec.pattern == "stream") return MeasureStreamFloor(spec, progress, out);
  SharedBlock shared;
  ALKAID_RETURN_NOT_OK(shared.Map());
  Shared* s = shared.get();
  measure::SharedMapping<measure::FloorLine> page;  // a page of its own
  ALKAID_RETURN_NOT_OK(page.Map(1, "the floor's line"));
  measure::FloorLine* line = page.get();
  const auto stopping = [s] { return Stopping(s); };
  const measure::LoopBounds bounds{spec.count, static_cast<int64_t>(spec.duration_seconds * 1e9)};

  std::vector<std::function<int()>> bodies;
  bodies.push_back([&] {
    return ChildMain(s, "floor ping side", [&]() -> Status {
      if (!line->AwaitReady(stopping)) return Status::Cancelled("stopped");
      ALKAID_RETURN_NOT_OK(
          measure::RunPingPongLoop(bounds, &s->histograms[0], &s->progress, &s->elapsed_ns,
                                   stopping, [line](int64_t i, measure::RoundTripTimer* timer) {
                                     timer->Start();
                                     (void)line->RoundTrip(static_cast<uint64_t>(i) + 1);
                                     timer->Stop();
                                     return Status::OK();
                                   }));
      line->Quit();
      return Status::OK();
    });
  });
  bodies.push_back([&] {
    return ChildMain(s, "floor pong side", [&]() -> Status {
      line->Serve(stopping);
      return Status::OK();
    });
  });
  ALKAID_RETURN_NOT_OK(RunProcesses(bodies, spec, progress, s));
  Finish(spec, *s, "floor", "spin", "pingpong", out);
  return Status::OK();
}

// ---- body floor ---------------------------------------------------------

namespace {

// Where the bodies go. The alkaid ping side loans a fresh region of its
// channel's arena for every ping (Producer::NewBatchPool) and, with the
// warm-up, a second one of the same size before it; B holds each batch
// until its next receive, and A gets a block back when B has returned it.
// So the bodies neither stay at one address nor walk through the whole
// arena: they cycle over a few regions of the arena (PingArenaBytes). To
// give the caches and TLBs the same pattern, the body floor loans its
// bodies from a channel of the ping topic's arena size (ChannelProducer,
// never published through: BodyLoans) and keeps the last kHeldLoans of
// them, as B's view keeps the last batch. None of it is timed, and B reads the two
// values from the mapped segment, nothing else.
constexpr std::size_t kHeldLoans = 2;

// Side A of the body floor: builds the bodies, times the round trips.
Status BodyFloorPingSide(const RunSpec& spec, const std::string& name, measure::BodyLine* signal,
                         Shared* s) {
  const int64_t rows = RowsFor(spec.payload_bytes);
  const auto stopping = [s] { return Stopping(s); };
  shm::ChannelOptions options;  // as the producer's: 4 KiB pages, prefaulted
  options.slot_count = kPingSlotCount;
  options.max_consumers = 1;
  options.arena_bytes = PingArenaBytes(rows);
  options.space_timeout = std::chrono::seconds(30);
  ALKAID_ASSIGN_OR_RAISE(auto bodies, measure::BodyLoans::Create(name, options, kHeldLoans));
  s->ready.fetch_add(1);  // B may open the segment
  while (s->ready.load() < 2) {
    if (stopping()) return Status::Cancelled("stopped");
  }
  // Both have it mapped: the names go now (the producer's own removal at
  // the end then finds nothing).
  ALKAID_RETURN_NOT_OK(shm::RemoveChannel(name));
  uint64_t k = 0;
  // One round trip: the body's offset and id, then the number.
  auto round_trip = [&](uint64_t body_offset, int64_t id) -> Status {
    signal->Send(++k, body_offset, id);
    if (!signal->AwaitAnswer(k, stopping)) return Status::Cancelled("stopped");
    return Status::OK();
  };
  const measure::LoopBounds bounds{spec.count, static_cast<int64_t>(spec.duration_seconds * 1e9)};
  auto step = [&](int64_t i, measure::RoundTripTimer* timer) -> Status {
    // Not timed: loan and write the body as PingSide builds its column,
    // then (like PingSide) an untimed round trip with a body of the same
    // size of its own, whose first and last value A writes and B reads
    // as PingSide's warm-up batch is.
    ALKAID_ASSIGN_OR_RAISE(auto body, bodies.Loan(PingRegionBytes(rows)));
    const uint64_t at = body.offset();
    auto* values = reinterpret_cast<int64_t*>(body.data().data());
    for (int64_t r = 0; r < rows; ++r) values[r] = i + r;
    if (spec.warmup) {
      ALKAID_ASSIGN_OR_RAISE(auto warm, bodies.Loan(PingRegionBytes(rows)));
      const uint64_t warm_at = warm.offset();
      const int64_t warm_value = -1;
      auto* warm_values = reinterpret_cast<int64_t*>(warm.data().data());
      warm_values[0] = warm_value;
      warm_values[rows - 1] = warm_value + rows - 1;
      ALKAID_RETURN_NOT_OK(round_trip(warm_at, warm_value));
      bodies.Hold(std::move(warm));
    }
    timer->Start();
    ALKAID_RETURN_NOT_OK(round_trip(at, i));
    timer->Stop();
    bodies.Hold(std::move(body));
    return Status::OK();
  };
  ALKAID_RETURN_NOT_OK(measure::RunPingPongLoop(bounds, &s->histograms[0], &s->progress,
                                                &s->elapsed_ns, stopping, step));
  signal->Quit();
  return Status::OK();
}

// Side B: reads each body's first and last value, checks them, answers.
Status BodyFloorPongSide(const RunSpec& spec, const std::string& name, measure::BodyLine* signal,
                         Shared* s) {
  const int64_t rows = RowsFor(spec.payload_bytes);
  while (s->ready.load() < 1) {
    if (Stopping(s)) return Status::OK();
  }
  ALKAID_ASSIGN_OR_RAISE(auto segment, shm::Segment::Open(name, shm::SegmentKind::kChannel));
  s->ready.fetch_add(1);
  const std::byte* arena = segment->data();
  const uint64_t limit = segment->data_size() - static_cast<uint64_t>(rows) * 8;
  uint64_t seen = 0;
  while (true) {
    uint64_t k;
    // The body and the fields are written before `ping` (BodyLine).
    if (!signal->AwaitPing(seen, &k, [s] { return Stopping(s); })) return Status::OK();
    seen = k;
    const int64_t id = signal->id;
    // A ping's body holds `rows` values id, id+1, ...; a warm-up's (id < 0)
    // starts at the id too, and only its first and last value are written.
    const uint64_t at = signal->body_offset;
    if (at > limit) {
      return Status::Invalid("body floor ping ", id, ": body offset ", at, " is past the ",
                             segment->data_size(), "-byte segment");
    }
    const auto* values = reinterpret_cast<const int64_t*>(arena + at);
    const int64_t first = values[0];
    const int64_t last = values[rows - 1];
    if (first != id || last != id + rows - 1) {
      return Status::Invalid("body floor ping ", id, ": the body at offset ", at, " holds values ",
                             first, "..", last, "; expected ", id, "..", id + rows - 1);
    }
    signal->Answer(k);
  }
}

}  // namespace

Status MeasureBodyFloor(const RunSpec& spec, const ProgressHook& progress, Measurement* out) {
  SharedBlock shared;
  ALKAID_RETURN_NOT_OK(shared.Map());
  Shared* s = shared.get();
  measure::SharedMapping<measure::BodyLine> page;  // a page of its own
  ALKAID_RETURN_NOT_OK(page.Map(1, "the body floor's signal"));
  measure::BodyLine* signal = page.get();
  const std::string name = spec.topic_prefix + ".body";

  std::vector<std::function<int()>> bodies;
  bodies.push_back([&] {
    return ChildMain(s, "body floor ping side",
                     [&] { return BodyFloorPingSide(spec, name, signal, s); });
  });
  bodies.push_back([&] {
    return ChildMain(s, "body floor pong side",
                     [&] { return BodyFloorPongSide(spec, name, signal, s); });
  });
  const Status st = RunProcesses(bodies, spec, progress, s);
  (void)shm::Segment::Remove(name);  // gone already unless side A failed early
  ALKAID_RETURN_NOT_OK(st);
  Finish(spec, *s, "body", "spin", "pingpong", out);
  return Status::OK();
}

// ---- Unix domain socket -------------------------------------------------

namespace {

// The sending end: batches of heap memory written as an IPC stream to one
// socket (ping-pong) or to each consumer's (stream), flushed each time.
struct UdsOut {
  struct Body {
    format::RecordBatchPtr batch;
    int64_t* values = nullptr;
  };
  std::vector<std::shared_ptr<ipc::FileOutputStream>> outs;
  std::vector<std::unique_ptr<ipc::RecordBatchWriter>> writers;
  Body next;  // stream: between Begin and Commit

  // Writes the schema first (it fits the socket buffer).
  Status Open(int fd) {
    ALKAID_ASSIGN_OR_RAISE(auto out, ipc::FileOutputStream::FromDescriptor(fd));
    ALKAID_ASSIGN_OR_RAISE(auto writer, ipc::MakeStreamWriter(out.get(), BatchSchema()));
    outs.push_back(std::move(out));
    writers.push_back(std::move(writer));
    return Status::OK();
  }
  Result<Body> Make(int64_t rows, uint64_t /*region*/) {
    Body body;
    ALKAID_ASSIGN_OR_RAISE(
        body.batch, Int64Batch(BatchSchema(), rows, format::default_memory_pool(), &body.values));
    return body;
  }
  Status Send(const Body& body, int64_t /*id: the first value*/) {
    for (std::size_t k = 0; k < writers.size(); ++k) {
      ALKAID_RETURN_NOT_OK(writers[k]->WriteRecordBatch(*body.batch));
      ALKAID_RETURN_NOT_OK(outs[k]->Flush());
    }
    return Status::OK();
  }
  // The stream's batch, made by Begin and written by Commit.
  Status Begin(int64_t rows, uint64_t region, int64_t** values) {
    ALKAID_ASSIGN_OR_RAISE(next, Make(rows, region));
    *values = next.values;
    return Status::OK();
  }
  Status Commit(int64_t id) {
    Status st = Send(next, id);
    next = Body();
    return st;
  }
  Status SendValue(int64_t value) {
    ALKAID_ASSIGN_OR_RAISE(auto body, Make(1, 0));
    body.values[0] = value;
    return Send(body, value);
  }
  Status Prepare(int64_t /*id*/) { return Status::OK(); }
  // The answer is made when it is sent, as a socket's reader would.
  Status SendAnswer(int64_t id) { return SendValue(id); }
  Status Close() {
    for (std::size_t k = 0; k < writers.size(); ++k) {
      ALKAID_RETURN_NOT_OK(writers[k]->Close());
      ALKAID_RETURN_NOT_OK(outs[k]->Flush());
    }
    return Status::OK();
  }
};

// The receiving end: the IPC stream of one socket, decoded; reads block
// (the timeout is not used: the stream ends when the writer closes).
struct UdsIn {
  std::shared_ptr<ipc::FileInputStream> in;
  std::unique_ptr<ipc::RecordBatchStreamReader> reader;
  format::RecordBatchPtr batch;  // the last one received, until Release or the next
  bool stamp = false;            // Got::at_ns

  Status Open(int fd) {
    ALKAID_ASSIGN_OR_RAISE(in, ipc::FileInputStream::FromDescriptor(fd));
    ALKAID_ASSIGN_OR_RAISE(reader, ipc::RecordBatchStreamReader::Open(in.get()));
    return Status::OK();
  }
  Status Next(std::chrono::nanoseconds /*timeout*/, Got* got) {
    ALKAID_ASSIGN_OR_RAISE(auto next, reader->ReadNext());
    if (next == nullptr) return Status::EndOfStream("the peer ended its stream");
    return TakeBatch(std::move(next), stamp, &batch, got);
  }
  void Release() { batch.reset(); }
  Status Close() {
    batch.reset();
    return Status::OK();
  }
};

}  // namespace

Status MeasureUds(const RunSpec& given, const ProgressHook& progress, Measurement* out) {
  RunSpec spec = given;
  spec.idle_seconds = 0;  // the socket's reads block: no idle period
  SharedBlock shared;
  ALKAID_RETURN_NOT_OK(shared.Map());
  Shared* s = shared.get();
  const bool stream = spec.pattern == "stream";
  const int consumers = stream ? spec.consumers : 1;
  // One socket pair per consumer: [0] is A's end, [1] the consumer's.
  std::vector<std::array<int, 2>> pairs(static_cast<std::size_t>(consumers), {-1, -1});
  for (auto& p : pairs) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      const std::string error = ErrnoMessage(errno);
      for (auto& q : pairs) {
        if (q[0] >= 0) ::close(q[0]);
        if (q[1] >= 0) ::close(q[1]);
      }
      return Status::IOError("socketpair: ", error);
    }
    p = {fds[0], fds[1]};
  }
  // Each process closes the ends that are not its own (k: a consumer's
  // index, -1 for side A).
  auto keep = [&](int k) {
    for (int j = 0; j < consumers; ++j) {
      if (k >= 0) ::close(pairs[j][0]);
      if (j != k) ::close(pairs[j][1]);
    }
  };

  std::vector<std::function<int()>> bodies;
  bodies.push_back([&] {
    return ChildMain(s, stream ? "uds producer" : "uds ping side", [&]() -> Status {
      keep(-1);
      UdsOut to;
      for (const auto& p : pairs) ALKAID_RETURN_NOT_OK(to.Open(p[0]));
      if (stream) return StreamLoop(spec, s, &to);
      UdsIn answers;
      ALKAID_RETURN_NOT_OK(answers.Open(pairs[0][0]));
      ALKAID_RETURN_NOT_OK(PingLoop(spec, s, &to, &answers));
      return answers.Close();
    });
  });
  for (int k = 0; k < consumers; ++k) {
    bodies.push_back([&, k] {
      const std::string who = stream ? "uds consumer " + std::to_string(k) : "uds pong side";
      return ChildMain(s, who, [&, k]() -> Status {
        keep(k);
        UdsIn from;
        if (stream) {
          ALKAID_RETURN_NOT_OK(from.Open(pairs[k][1]));
          return StreamRead(spec, s, &from, k, false);
        }
        UdsOut answers;
        ALKAID_RETURN_NOT_OK(answers.Open(pairs[0][1]));
        ALKAID_RETURN_NOT_OK(from.Open(pairs[0][1]));
        ALKAID_RETURN_NOT_OK(PongLoop(spec, s, &answers, &from));
        return from.Close();
      });
    });
  }
  const Status st = RunProcesses(bodies, spec, progress, s);
  for (auto& p : pairs) {
    ::close(p[0]);
    ::close(p[1]);
  }
  ALKAID_RETURN_NOT_OK(st);
  Finish(spec, *s, "uds", "block", spec.pattern, out);
  return Status::OK();
}

}  // namespace alkaid::tools::latency
