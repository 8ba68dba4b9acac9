#pragma once

// Private to alkaid-measure (`alkaid latency`): what the parent and the
// measuring child processes share, and the transports' entry points.

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "alkaid/client/batch_view.h"
#include "alkaid/common/status.h"
#include "alkaid/format/array_data.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/measure/clock.h"
#include "alkaid/measure/floor.h"
#include "alkaid/measure/histogram.h"
#include "alkaid/measure/ping_pong.h"
#include "alkaid/measure/process.h"
#include "alkaid/measure/report.h"
#include "alkaid/measure/shared_mapping.h"
#include "alkaid/measure/text.h"

namespace alkaid::tools::latency {

using measure::Histogram;
using measure::Measurement;
using measure::MemorySample;
using measure::NowNs;
using measure::Paired;
using measure::ProcessCpuNs;
using measure::ResidentBytes;
using measure::SegmentBytes;
using measure::Summarize;
using measure::Summary;

/// How one (transport, size) measurement is run.
struct RunSpec {
  std::string layer = "client";  ///< channel | client | inproc
  std::string mode = "spin";     ///< spin | block | hybrid
  std::string pattern;           ///< pingpong | stream | paired (empty: by the layer)
  int64_t payload_bytes = 64;    ///< body bytes: rows = max(1, payload / 8) int64 values
  int consumers = 1;             ///< stream: consumers
  int64_t count = 10000;         ///< samples (pingpong), pairs (paired) or batches (stream)
  double duration_seconds = 10;  ///< stop early after this long; 0: no limit
  double idle_seconds = 0.5;     ///< alkaid pingpong: idle period measured at the end (0: none)
  bool warmup = true;            ///< pingpong: untimed warm-up before each ping
  std::string writer = "build";  ///< stream: build | fixed (FixedShapeWriter)
  bool timestamps = false;       ///< topics (or the inproc channel) stamp publish times
  std::string socket;            ///< alkaid: broker socket
  std::string topic_prefix;      ///< alkaid: unique per run
  std::vector<int> cpus;         ///< CPUs to pin the processes to (empty: no pinning)
  int broker_pid = 0;            ///< stream memory samples: the broker (0: unknown)
  std::string shm_prefix;        ///< stream memory samples: /dev/shm names of the broker
};

/// Rows of int64 values a batch of `payload_bytes` has.
inline int64_t RowsFor(int64_t payload_bytes) { return payload_bytes < 8 ? 1 : payload_bytes / 8; }

/// `n` rounded up to a cache line (the channel arena's granularity).
inline uint64_t RoundUp64(uint64_t n) { return (n + 63) / 64 * 64; }

/// Region of shared memory a pingpong ping batch of `rows` values is built
/// in: the body, then room for the metadata the publisher appends.
inline uint64_t PingRegionBytes(int64_t rows) {
  return RoundUp64(static_cast<uint64_t>(rows) * 8) + 4096;
}

/// Arena of the ping topic's channel: four ping regions (pings and
/// warm-ups) plus 1 MiB for the small batches (hellos, control values).
inline uint64_t PingArenaBytes(int64_t rows) { return 4 * PingRegionBytes(rows) + (1 << 20); }

/// The ping channel's arena of a run: a paired run's has room for eight
/// large regions, as the flatness bench's channel had, since its 64 B
/// bodies come between the large ones (an arena with no gap for the next
/// large body grows by an extension, which the consumer maps when it
/// receives the body).
inline uint64_t PingArenaBytes(const RunSpec& spec) {
  return (spec.pattern == "paired" ? 2 : 1) * PingArenaBytes(RowsFor(spec.payload_bytes));
}

/// Arena of a stream's channel (1,024 slots) for regions of `region` bytes:
/// one for every slot, within 4 regions + 1 MiB and 64 MiB.
inline uint64_t StreamArenaBytes(uint64_t region) {
  return std::max<uint64_t>(4 * region + (1 << 20), std::min<uint64_t>(1024 * region, 64 << 20));
}

/// Region of each small batch: hellos, control values, answers.
inline constexpr uint64_t kSmallRegionBytes = 1024;

/// Slots of the pingpong topics' channels.
inline constexpr std::size_t kPingSlotCount = 16;

/// Whether ping `id` of a paired run is of the row's size (else 64 B). The
/// order within a pair alternates every two pairs, so that neither size
/// always goes first.
inline bool IsLarge(int64_t id) { return (id % 2 == 0) == ((id / 4) % 2 == 1); }

/// Shared between the parent and the children of one measurement (a
/// MAP_SHARED anonymous mapping created before fork).
struct Shared {
  static constexpr int kMaxConsumers = 64;
  measure::ChildControl control;  ///< stop flag, first child error
  /// Samples or batches so far: written per batch by side B or consumer 0,
  /// so on a line of its own (the producer's stores would share it).
  alignas(64) std::atomic<int64_t> progress;
  alignas(64) std::atomic<int> ready;  ///< children that finished setting up
  std::atomic<int> linked;             ///< consumers that saw the producer's hello
  std::atomic<int> phase;              ///< pingpong: 1 = idle period requested, 2 = done
  /// Pingpong: the value side B answered last, stored when B waits again
  /// (after the answer's publish and its own clean-up).
  std::atomic<int64_t> answered;
  std::atomic<int64_t> start_ns;     ///< stream: producer's first timed publish
  int64_t end_ns[kMaxConsumers];     ///< stream: each consumer's last receive
  int64_t received[kMaxConsumers];   ///< stream: each consumer's batches
  int64_t elapsed_ns;                ///< pingpong: time of the timed loop
  int64_t idle_cpu_ns;               ///< consumer CPU time over the idle period
  int64_t idle_wall_ns;              ///< length of the idle period
  std::atomic<int> producer_pid;     ///< stream: the producer process
  std::atomic<int> pong_pid;         ///< pingpong: side B's process
  std::atomic<int64_t> hellos_seen;  ///< pingpong: hellos side B received
  MemorySample memory[2];            ///< stream: at min(1M, count/2) batches, at the end
  std::atomic<int> memory_samples;
  Paired paired;                        ///< paired: figures of the ping side
  Histogram histograms[kMaxConsumers];  ///< one per consumer (pingpong: [0])
};

/// The mapping of one Shared; released by the destructor.
using SharedBlock = measure::SharedMapping<Shared>;

/// Whether the children should give up (interrupted, or told to stop).
inline bool Stopping(const Shared* shared) { return measure::Stopping(shared->control); }

/// Runs `body` in a child: exit 0, 3 when stopped, 1 on error (recorded).
inline int ChildMain(Shared* shared, const std::string& who, const std::function<Status()>& body) {
  return measure::ChildExitCode(&shared->control, who, body());
}

/// FirstLast's error: Invalid, naming what `batch` has.
Status NotOneInt64Column(const format::RecordBatch& batch);

/// First and last values of a received batch, whose schema must be one
/// int64 column (every transport's); Invalid if it has another number of
/// columns or no row. Inline: a stream's consumer calls it for every batch.
inline Status FirstLast(const format::RecordBatch& batch, int64_t* first, int64_t* last) {
  if (batch.num_columns() != 1 || batch.num_rows() < 1 ||
      batch.column_data(0)->type->id() != format::TypeId::kInt64) [[unlikely]] {
    return NotOneInt64Column(batch);
  }
  // The column's data, not an Array object (which would be allocated).
  const int64_t* values = batch.column_data(0)->GetValues<int64_t>(1);
  *first = values[0];
  *last = values[batch.num_rows() - 1];
  return Status::OK();
}

/// Pingpong, untimed: waits until side B, having answered `value`, is back
/// waiting for the next ping (Shared::answered). B's own work after an
/// answer (publishing it, dropping what it answered, preparing the next
/// answer) would otherwise be measured as latency of the ping that arrives
/// while B is still busy.
Status AwaitOtherSideWaiting(const Shared* shared, int64_t value);

/// Fills `out` from what the children of a measurement left in `shared`:
/// the histograms merged (stream: every consumer's), the message rate
/// (stream: the consumers' mean, from the producer's first publish to each
/// one's last receive; pingpong: round trips over the loop's time), the
/// summary.
void Finish(const RunSpec& spec, const Shared& shared, const std::string& transport,
            const std::string& mode, const std::string& pattern, Measurement* out);

/// Hooks the parent gives a measurement (progress reporting).
using ProgressHook = std::function<void(const Shared&)>;

/// Runs each of `bodies` in a child process (RunChildren, pinned to
/// spec.cpus), calling `progress` (if set) while it waits.
Status RunProcesses(const std::vector<std::function<int()>>& bodies, const RunSpec& spec,
                    const ProgressHook& progress, Shared* s);

/// The schema of every transport's batches: one non-nullable int64 column.
format::SchemaPtr BatchSchema();

/// A batch of `schema` (BatchSchema's) of `rows` values allocated from
/// `pool`, left for the caller to write at `*values` (every value: the
/// memory is not zeroed).
Result<format::RecordBatchPtr> Int64Batch(const format::SchemaPtr& schema, int64_t rows,
                                          format::MemoryPool* pool, int64_t** values);

/// Alkaid's own transport, pingpong, paired (the pingpong alternating the
/// size with 64 B) or stream, on the client layer (Producer and Consumer,
/// topics made through BrokerClient) or the channel layer (ChannelProducer
/// and ChannelConsumer alone, no broker).
Status MeasureAlkaid(const RunSpec& spec, const ProgressHook& progress, Measurement* out);

/// The client's data path in one thread, for profilers: publish, receive
/// (TryReceive), check and drop `spec.count` batches of 512 B through one
/// channel, without a broker (latency_inproc.cc).
Status MeasureInProcess(const RunSpec& spec, Measurement* out);

/// Two processes ping-ponging one shared cache line (always spinning,
/// always ping-pong).
Status MeasureFloor(const RunSpec& spec, const ProgressHook& progress, Measurement* out);

/// The size-matched floor: the ping-pong of MeasureFloor, plus a body of
/// the payload's size in a channel arena (4 KiB pages) at the addresses the
/// alkaid ping side's allocator would give it, written before each ping as
/// the alkaid ping side fills its column, and read (first and last value)
/// by the other side before it answers. Always spinning, always ping-pong.
Status MeasureBodyFloor(const RunSpec& spec, const ProgressHook& progress, Measurement* out);

/// The same batches as an IPC stream over Unix domain sockets, decoded by
/// the reader (blocking reads).
Status MeasureUds(const RunSpec& spec, const ProgressHook& progress, Measurement* out);

}  // namespace alkaid::tools::latency
