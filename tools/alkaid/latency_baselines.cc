// alkaid-measure, the baselines: the shared-cache-line floor (for the
// stream pattern, a ring of bodies in shared memory), the same floor with a
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
#include "latency_internal.h"

namespace alkaid::tools::latency {

namespace {

namespace ipc = format::ipc;

// ---- floor --------------------------------------------------------------

// The stream pattern's floor: the same bodies (the alkaid producer's 64
// values: the publish time, then the sequence number) written into a ring
// of body-sized places in one shared mapping, as many places as the alkaid
// topic has slots; the consumer reads the first and last value, as the
// alkaid consumer does. Each side's count lives in a line of its own: a
// release store per message, the other side's acquire loads. No allocator,
// no slot header, no return queue, no object per batch: what any
// shared-memory stream of these bodies pays on this machine (the bodies'
// lines and the two counts crossing between the cores, the clock reads).
struct alignas(64) StreamFloorCounts {
  static constexpr uint64_t kOpen = ~uint64_t{0};
  std::atomic<uint64_t> written{0};  ///< producer: messages written
  uint8_t pad0[56];
  std::atomic<uint64_t> read{0};  ///< consumer: messages read
  uint8_t pad1[56];
  std::atomic<uint64_t> end{kOpen};  ///< producer: kOpen while it writes, then its count
  std::atomic<uint32_t> ready{0};    ///< consumer: 1 once it waits for the first
  uint8_t pad2[52];
};
static_assert(sizeof(StreamFloorCounts) == 192, "three lines");

constexpr uint64_t kStreamFloorSlots = 1024;  // the alkaid stream topic's slot_count

Status MeasureStreamFloor(const RunSpec& spec, const ProgressHook& progress, Measurement* out) {
  if (spec.consumers != 1) {
    return Status::Invalid("the stream floor has one consumer (--consumers 1)");
  }
  SharedBlock shared;
  ALKAID_RETURN_NOT_OK(shared.Map());
  Shared* s = shared.get();
  measure::SharedMapping<StreamFloorCounts> counts_page;  // pages of its own
  ALKAID_RETURN_NOT_OK(counts_page.Map(1, "the stream floor's counts"));
  StreamFloorCounts* counts = counts_page.get();
  const int64_t rows = RowsFor(spec.payload_bytes);
  const uint64_t stride = (static_cast<uint64_t>(rows) + 7) / 8 * 8;  // int64s: 64-byte places
  measure::SharedMapping<int64_t> ring;
  ALKAID_RETURN_NOT_OK(ring.Map(stride * kStreamFloorSlots, "the stream floor's ring"));
  int64_t* places = ring.get();
  const auto stopping = [s] { return Stopping(s); };
  const int64_t limit_ns = static_cast<int64_t>(spec.duration_seconds * 1e9);

  std::vector<std::function<int()>> bodies;
  bodies.push_back([&] {
    return ChildMain(s, "stream floor producer", [&]() -> Status {
      s->producer_pid.store(static_cast<int>(::getpid()));
      while (counts->ready.load(std::memory_order_acquire) == 0) {
        if (stopping()) return Status::Cancelled("stopped");
      }
      const int64_t start = NowNs();
      s->start_ns.store(start);
      uint64_t read = 0;
      int64_t i = 0;
      for (; i < spec.count; ++i) {
        if ((i & 1023) == 0) {
          if (stopping()) return Status::Cancelled("stopped");
          if (limit_ns > 0 && NowNs() - start > limit_ns) break;
        }
        const auto n = static_cast<uint64_t>(i);
        // Acquire: partner of the consumer's release store of its count.
        for (uint32_t spins = 1; n - read >= kStreamFloorSlots; ++spins) {
          read = counts->read.load(std::memory_order_acquire);
          if ((spins & 1023) == 0 && stopping()) return Status::Cancelled("stopped");
        }
        int64_t* values = places + (n % kStreamFloorSlots) * stride;
        for (int64_t r = 1; r < rows; ++r) values[r] = i;
        values[0] = NowNs();
        // Release: publishes the body; partner of the consumer's acquire.
        counts->written.store(n + 1, std::memory_order_release);
        s->published.store(i + 1, std::memory_order_relaxed);
      }
      counts->end.store(static_cast<uint64_t>(i), std::memory_order_release);
      return Status::OK();
    });
  });
  bodies.push_back([&] {
    return ChildMain(s, "stream floor consumer", [&]() -> Status {
      Histogram* histogram = &s->histograms[0];
      counts->ready.store(1, std::memory_order_release);
      uint64_t expected = 0;
      uint64_t written = 0;
      while (true) {
        for (uint32_t spins = 1; written <= expected; ++spins) {
          // Acquire: partner of the producer's release store of its count.
          written = counts->written.load(std::memory_order_acquire);
          if (written > expected) break;
          if (counts->end.load(std::memory_order_acquire) == expected) return Status::OK();
          if ((spins & 1023) == 0 && stopping()) return Status::Cancelled("stopped");
        }
        const int64_t* values = places + (expected % kStreamFloorSlots) * stride;
        const int64_t first = values[0];
        const int64_t last = values[rows - 1];
        const int64_t now = NowNs();
        if (rows >= 2 && last != static_cast<int64_t>(expected)) {
          return Status::Invalid("stream floor: place ", expected % kStreamFloorSlots,
                                 " holds sequence number ", last, ", expected ", expected);
        }
        histogram->Record(now - first);
        ++expected;
        // Release: the place may be written again; partner of the
        // producer's acquire load.
        counts->read.store(expected, std::memory_order_release);
        s->received[0] = static_cast<int64_t>(expected);
        s->end_ns[0] = now;
        s->progress.store(static_cast<int64_t>(expected), std::memory_order_relaxed);
      }
    });
  });
  std::function<void()> on_wait;
  if (progress) on_wait = [&] { progress(*s); };
  ALKAID_RETURN_NOT_OK(RunChildren(bodies, spec.cpus, &s->control, on_wait));
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
  std::function<void()> on_wait;
  if (progress) on_wait = [&] { progress(*s); };
  ALKAID_RETURN_NOT_OK(RunChildren(bodies, spec.cpus, &s->control, on_wait));
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
  std::function<void()> on_wait;
  if (progress) on_wait = [&] { progress(*s); };
  const Status st = RunChildren(bodies, spec.cpus, &s->control, on_wait);
  (void)shm::Segment::Remove(name);  // gone already unless side A failed early
  ALKAID_RETURN_NOT_OK(st);
  Finish(spec, *s, "body", "spin", "pingpong", out);
  return Status::OK();
}

// ---- Unix domain socket -------------------------------------------------

namespace {

format::SchemaPtr BatchSchema() {
  return format::schema({format::field("v", format::int64(), false)});
}

Result<format::RecordBatchPtr> HeapBatch(int64_t rows, int64_t** values) {
  ALKAID_ASSIGN_OR_RAISE(auto buffer, format::AllocateBuffer(rows * 8));
  *values = reinterpret_cast<int64_t*>(buffer->mutable_data());
  auto data = format::ArrayData::Make(format::int64(), rows, {nullptr, std::move(buffer)}, 0);
  return format::RecordBatch::Make(BatchSchema(), rows, {format::MakeArray(std::move(data))});
}

Result<format::RecordBatchPtr> ValueBatch(int64_t value) {
  int64_t* values = nullptr;
  ALKAID_ASSIGN_OR_RAISE(auto batch, HeapBatch(1, &values));
  values[0] = value;
  return batch;
}

// Reads the next batch; EndOfStream at the end of the stream.
Result<format::RecordBatchPtr> ReadBatch(ipc::RecordBatchStreamReader* reader) {
  ALKAID_ASSIGN_OR_RAISE(auto batch, reader->ReadNext());
  if (batch == nullptr) return Status::EndOfStream("the peer ended its stream");
  return batch;
}

struct Endpoint {
  std::shared_ptr<ipc::FileOutputStream> out;
  std::shared_ptr<ipc::FileInputStream> in;
  std::unique_ptr<ipc::RecordBatchWriter> writer;
  std::unique_ptr<ipc::RecordBatchStreamReader> reader;
};

// Writer first (the schema message fits the socket buffer), then reader.
Status OpenEndpoint(int write_fd, int read_fd, Endpoint* e) {
  if (write_fd >= 0) {
    ALKAID_ASSIGN_OR_RAISE(e->out, ipc::FileOutputStream::FromDescriptor(write_fd));
    ALKAID_ASSIGN_OR_RAISE(e->writer, ipc::MakeStreamWriter(e->out.get(), BatchSchema()));
  }
  if (read_fd >= 0) {
    ALKAID_ASSIGN_OR_RAISE(e->in, ipc::FileInputStream::FromDescriptor(read_fd));
    ALKAID_ASSIGN_OR_RAISE(e->reader, ipc::RecordBatchStreamReader::Open(e->in.get()));
  }
  return Status::OK();
}

Status CloseWriter(Endpoint* e) {
  if (e->writer == nullptr) return Status::OK();
  ALKAID_RETURN_NOT_OK(e->writer->Close());
  return e->out->Flush();
}

}  // namespace

Status MeasureUds(const RunSpec& spec, const ProgressHook& progress, Measurement* out) {
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
  const int64_t rows = RowsFor(spec.payload_bytes);
  const int64_t limit_ns = static_cast<int64_t>(spec.duration_seconds * 1e9);

  std::vector<std::function<int()>> bodies;
  if (!stream) {
    bodies.push_back([&] {
      return ChildMain(s, "uds ping side", [&]() -> Status {
        ::close(pairs[0][1]);
        Endpoint e;
        ALKAID_RETURN_NOT_OK(OpenEndpoint(pairs[0][0], pairs[0][0], &e));
        auto await = [&](int64_t expected) -> Status {
          while (true) {
            ALKAID_ASSIGN_OR_RAISE(auto answer, ReadBatch(e.reader.get()));
            int64_t first = 0, last = 0;
            ALKAID_RETURN_NOT_OK(FirstLast(*answer, &first, &last));
            if (first == expected) return Status::OK();
          }
        };
        const measure::LoopBounds bounds{spec.count, limit_ns};
        auto step = [&](int64_t i, measure::RoundTripTimer* timer) -> Status {
          int64_t* values = nullptr;
          ALKAID_ASSIGN_OR_RAISE(auto batch, HeapBatch(rows, &values));
          for (int64_t r = 0; r < rows; ++r) values[r] = i + r;
          if (spec.warmup) {
            ALKAID_ASSIGN_OR_RAISE(auto warm, ValueBatch(-2));
            ALKAID_RETURN_NOT_OK(e.writer->WriteRecordBatch(*warm));
            ALKAID_RETURN_NOT_OK(await(-2));
          }
          timer->Start();
          ALKAID_RETURN_NOT_OK(e.writer->WriteRecordBatch(*batch));
          ALKAID_RETURN_NOT_OK(e.out->Flush());
          ALKAID_RETURN_NOT_OK(await(i));
          timer->Stop();
          return Status::OK();
        };
        ALKAID_RETURN_NOT_OK(measure::RunPingPongLoop(
            bounds, &s->histograms[0], &s->progress, &s->elapsed_ns, [s] { return Stopping(s); },
            step));
        return CloseWriter(&e);
      });
    });
    bodies.push_back([&] {
      return ChildMain(s, "uds pong side", [&]() -> Status {
        ::close(pairs[0][0]);
        Endpoint e;
        ALKAID_RETURN_NOT_OK(OpenEndpoint(pairs[0][1], pairs[0][1], &e));
        int64_t next_id = 0;
        while (true) {
          ALKAID_ASSIGN_OR_RAISE(auto batch, e.reader->ReadNext());
          if (batch == nullptr) break;
          int64_t first = 0, last = 0;
          ALKAID_RETURN_NOT_OK(FirstLast(*batch, &first, &last));
          if (first >= 0) {
            if (first != next_id || batch->num_rows() != rows || last != first + rows - 1) {
              return Status::Invalid("uds ping ", next_id, ": got ", batch->num_rows(),
                                     " rows, values ", first, "..", last);
            }
            ++next_id;
          }
          batch.reset();
          ALKAID_ASSIGN_OR_RAISE(auto answer, ValueBatch(first));
          ALKAID_RETURN_NOT_OK(e.writer->WriteRecordBatch(*answer));
          ALKAID_RETURN_NOT_OK(e.out->Flush());
        }
        return CloseWriter(&e);
      });
    });
  } else {
    bodies.push_back([&] {
      return ChildMain(s, "uds producer", [&]() -> Status {
        std::vector<Endpoint> ends(static_cast<std::size_t>(consumers));
        for (int k = 0; k < consumers; ++k) {
          ::close(pairs[k][1]);
          ALKAID_RETURN_NOT_OK(OpenEndpoint(pairs[k][0], -1, &ends[k]));
        }
        const int64_t start = NowNs();
        s->start_ns.store(start);
        for (int64_t i = 0; i < spec.count; ++i) {
          if ((i & 1023) == 0) {
            if (Stopping(s)) return Status::Cancelled("stopped");
            if (limit_ns > 0 && NowNs() - start > limit_ns) break;
          }
          int64_t* values = nullptr;
          ALKAID_ASSIGN_OR_RAISE(auto batch, HeapBatch(rows, &values));
          for (int64_t r = 1; r < rows; ++r) values[r] = i;
          values[0] = NowNs();
          for (auto& e : ends) {
            ALKAID_RETURN_NOT_OK(e.writer->WriteRecordBatch(*batch));
            ALKAID_RETURN_NOT_OK(e.out->Flush());
          }
          s->published.store(i + 1, std::memory_order_relaxed);
        }
        for (auto& e : ends) ALKAID_RETURN_NOT_OK(CloseWriter(&e));
        return Status::OK();
      });
    });
    for (int k = 0; k < consumers; ++k) {
      bodies.push_back([&, k] {
        return ChildMain(s, "uds consumer " + std::to_string(k), [&, k]() -> Status {
          for (int j = 0; j < consumers; ++j) {
            ::close(pairs[j][0]);
            if (j != k) ::close(pairs[j][1]);
          }
          Endpoint e;
          ALKAID_RETURN_NOT_OK(OpenEndpoint(-1, pairs[k][1], &e));
          Histogram* h = &s->histograms[k];
          int64_t expected = 0;
          while (true) {
            ALKAID_ASSIGN_OR_RAISE(auto batch, e.reader->ReadNext());
            if (batch == nullptr) break;
            const int64_t now = NowNs();
            int64_t first = 0, last = 0;
            ALKAID_RETURN_NOT_OK(FirstLast(*batch, &first, &last));
            if (batch->num_rows() != rows || (rows >= 2 && last != expected)) {
              return Status::Invalid("uds consumer ", k, ": batch ", expected, " has sequence ",
                                     last);
            }
            h->Record(now - first);
            ++expected;
            s->received[k] = expected;
            s->end_ns[k] = now;
            if (k == 0) s->progress.store(expected, std::memory_order_relaxed);
          }
          return Status::OK();
        });
      });
    }
  }
  std::function<void()> on_wait;
  if (progress) on_wait = [&] { progress(*s); };
  const Status st = RunChildren(bodies, spec.cpus, &s->control, on_wait);
  for (auto& p : pairs) {
    ::close(p[0]);
    ::close(p[1]);
  }
  ALKAID_RETURN_NOT_OK(st);
  Finish(spec, *s, "uds", "block", spec.pattern, out);
  return Status::OK();
}

}  // namespace alkaid::tools::latency
