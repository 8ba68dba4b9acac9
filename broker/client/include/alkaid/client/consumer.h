#pragma once

/// \file
/// Subscribing to a topic of the broker as record batches (Consumer), and the
/// options and counters it shares with RowConsumer (row_consumer.h).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "alkaid/client/batch_subscriber.h"
#include "alkaid/client/batch_view.h"
#include "alkaid/client/row_channel.h"
#include "alkaid/client/topic.h"
#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/shm/delivery.h"

// The Arrow C Data / C Stream Interface structs (alkaid/format/c_data.h).
struct ArrowArray;
struct ArrowSchema;
struct ArrowArrayStream;

namespace alkaid::client {

namespace internal {
struct ConsumerImpl;  // the state and broker protocol Consumer and RowConsumer share
}  // namespace internal

/// Options for Consumer::Open() and RowConsumer::Open().
struct ConsumerOptions {
  /// Broker socket; empty: DefaultBrokerSocket().
  std::string socket_path;
  /// How long Open waits for the topic to be created if the broker does not
  /// have it yet. 0 (the default): Open fails at once with KeyError.
  /// Otherwise the consumer registers with the broker as waiting for the
  /// topic, and the broker makes it one of the topic's consumers the moment
  /// the topic is created, before any producer attaches: every producer
  /// then waits for it to register on its channel (bounded by
  /// ProducerOptions::wait_for_consumers), so it receives every batch from
  /// the first one, whoever started first. Open returns as soon as the topic
  /// exists; TimedOut naming the topic if it was not created in time. The
  /// broker must be running when Open starts (IOError otherwise); a broker
  /// restart during the wait is survived (Open reconnects and waits again).
  /// std::chrono::milliseconds::max(): no limit.
  std::chrono::milliseconds wait_for_topic{0};
  /// Cancels Open's wait for the topic (wait_for_topic): once a stop is
  /// requested on its std::stop_source, from any thread, Open stops waiting
  /// at once (the request wakes the wait) and fails with Cancelled naming
  /// the topic; a stop requested before Open makes it fail before it
  /// waits. Only the wait for the topic is cancelled: an Open past it, and
  /// Next, are not affected. Default: a token that is never stopped.
  std::stop_token stop;
  /// Start at the oldest batch the channels of the topic's current producers
  /// still hold instead of the next one published. Those older batches are
  /// delivered if still intact when read: one the producer overwrites first
  /// is skipped and counted in lost(). From the batch published after Open
  /// on, nothing is lost (with kBlockProducer). Producers that join later
  /// are read from the next batch they publish (they wait for attached
  /// consumers first: ProducerOptions::wait_for_consumers).
  bool from_oldest = false;
  /// Receive only these columns, by name, in this order (empty: every
  /// column). Open fails with KeyError naming an unknown column and listing
  /// the topic's, Invalid for a name given twice. Record batches are
  /// projected zero-copy (the kept columns' buffers still point into shared
  /// memory); for row topics, ReceivedRows::ToRecordBatch keeps only these.
  std::vector<std::string> columns;
  /// The topic kind a Consumer expects; attaching to a topic of another
  /// kind is refused (Invalid, naming both; after waiting for the topic,
  /// too). std::nullopt: whatever kind the topic carries (Consumer::kind()
  /// says which; Next returns record batches from both, converting row
  /// batches). RowConsumer does not read it: it expects kUnsafeRow.
  std::optional<TopicKind> kind = TopicKind::kRecordBatch;
  /// How the consumer waits for data (see shm::WaitMode).
  shm::WaitMode wait_mode = shm::WaitMode::kSpinThenBlock;
  /// What the consumer checks of record batches before returning them
  /// (Verification; docs/RELIABILITY.md, "Trust between processes"). The
  /// default trusts the topic's producers with the values; kPrivateCopy is
  /// for producers you do not trust. Row topics: a RowConsumer's row
  /// batches are checked as RowSubscriber does in that mode (kFull: every
  /// row decoded to check it; kPrivateCopy: copied first); a Consumer
  /// decodes every row batch it returns, which checks every row in any
  /// mode, and with kPrivateCopy copies the rows out of shared memory first.
  Verification verification = Verification::kStructure;
  /// How many batches exported through the Arrow C Data Interface
  /// (ExportBatch, ExportStream) foreign code may hold at once, i.e. not yet
  /// released. Each holds its producer's block, so this bounds how much of
  /// the producers' arenas foreign code can pin. Beyond it ExportBatch, and
  /// the exported stream's get_next, fail at once with CapacityError (the
  /// stream: before receiving, so no batch is lost): waiting could never
  /// end when the thread that would release them is the one asking.
  /// 0 (the default): no limit.
  uint64_t max_exported_batches = 0;
};

/// Counters of a consumer (read on the consumer's thread; the export figures
/// are exact at the moment of reading, as releases happen on any thread).
struct ConsumerStats {
  /// Batches lost to slot overwrites (kDropOldest topics), as lost().
  uint64_t lost = 0;
  /// Times this consumer re-subscribed after a broker restart.
  uint64_t reregistrations = 0;
  /// Batches exported (ExportBatch, ExportStream) and not yet released by
  /// the foreign side.
  uint64_t exported_held = 0;
  /// Batches exported so far.
  uint64_t exported_total = 0;
  /// Exports refused by ConsumerOptions::max_exported_batches.
  uint64_t exports_refused = 0;
};

/// Where a batch Consumer::Next returned came from.
struct BatchOrigin {
  /// The producer, as the broker numbers producers (a restarted broker
  /// numbers them anew; 0 for one that has not re-registered with it), and
  /// its process.
  uint64_t producer_id = 0;
  uint32_t producer_pid = 0;
  /// The batch's sequence in that producer's channel (0, 1, ... per
  /// producer; dictionary messages take sequences too).
  uint64_t sequence = 0;
  /// Batches of that producer lost just before this one (overwritten on a
  /// kDropOldest topic, or undecodable for want of dictionaries).
  uint64_t lost_before = 0;
  /// When the producer published it: CLOCK_REALTIME nanoseconds, taken by
  /// the producer just before it wrote the batch's slot. 0 unless the topic
  /// stamps publish times (TopicOptions::publish_timestamps). Comparable
  /// with this machine's CLOCK_REALTIME (std::chrono::system_clock), so a
  /// receive time minus it is the publish-to-receive latency, give or take
  /// a clock step.
  uint64_t publish_ns = 0;
};

/// Options for Consumer::ExportStream().
struct StreamExportOptions {
  /// How long each get_next waits for the next batch; after that it fails
  /// with ETIMEDOUT (get_last_error says so). max(): until a batch comes or
  /// the stream ends (the default).
  std::chrono::nanoseconds batch_timeout = std::chrono::nanoseconds::max();
  /// Once a stop is requested on its std::stop_source (from any thread),
  /// a get_next waiting now ends within a few milliseconds, and every later
  /// one at once, with ECANCELED (get_last_error says so). Default: a token
  /// that is never stopped.
  std::stop_token stop;
};

/// One subscription to a topic, as record batches (a row topic's row batches
/// too, converted, if ConsumerOptions::kind allows it; RowConsumer receives
/// them zero-copy as rows): receives the batches of every producer of
/// the topic, per producer in publish order, zero-copy. Which ones
/// (docs/CLIENT.md, "Which batches a consumer gets"): of a producer that
/// attached after this consumer (or after it started waiting for the
/// topic, see ConsumerOptions::wait_for_topic), every batch from its first;
/// of a producer already publishing at Open, every batch published after
/// Open (or, with ConsumerOptions::from_oldest, from the oldest its channel
/// still holds).
///
/// End of stream: once this consumer has seen at least one producer and
/// every producer it saw has finished — closed its stream, or died (the
/// broker or the consumer's own pid check notices within a second) — and
/// everything committed was read, Next gives EndOfStream. A consumer that
/// has seen no producer yet waits for one.
///
/// Broker outages: receiving never involves the broker and goes on while
/// it is down; producers that die meanwhile are still noticed (pid check).
/// Once a broker answers on the socket again, the next Next/TryNext call
/// (at most every 200 ms) re-creates the topic with the config it had and
/// re-subscribes; producers it already reads are recognised by their channel
/// and kept (nothing is received twice), new ones are added.
///
/// Thread safety: one thread at a time. Returned batches may be used and
/// dropped on any thread, and outlive the consumer.
class ALKAID_EXPORT Consumer {
 public:
  ~Consumer();  ///< Close()
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  /// Connects to the broker and subscribes to `topic`. If the broker has no
  /// such topic: KeyError, or with ConsumerOptions::wait_for_topic waits
  /// for it to be created (TimedOut). The schema comes from the broker.
  static Result<std::unique_ptr<Consumer>> Open(const std::string& topic,
                                                const ConsumerOptions& options = {});

  /// The next batch, waiting up to `timeout`: TimedOut if none came,
  /// EndOfStream (see above). A producer whose channel this consumer cannot
  /// attach to (a damaged header, no permission) is returned once as that
  /// error, naming the producer and its pid; the consumer goes on with the
  /// others (and ends when they have). The batch's buffers point into the
  /// producer's shared memory, which stays referenced until the batch and
  /// every array, buffer or slice taken from it are dropped. A batch of a
  /// shape received before is made from recycled objects: in steady state
  /// Next allocates nothing (but with a column subset: one batch object).
  Result<format::RecordBatchPtr> Next(std::chrono::nanoseconds timeout);
  /// As Next, and says where the batch came from in `*origin` (untouched
  /// on error). For recorders and monitors; Next itself pays nothing for it.
  Result<format::RecordBatchPtr> Next(std::chrono::nanoseconds timeout, BatchOrigin* origin);

  /// The next batch if one is there; null if none (yet); EndOfStream as
  /// Next.
  Result<format::RecordBatchPtr> TryNext();
  /// As TryNext, and says where a batch it returns came from in `*origin`
  /// (untouched when it returns null or an error).
  Result<format::RecordBatchPtr> TryNext(BatchOrigin* origin);

  /// Deprecated: Next allocates nothing in steady state either. As Next,
  /// into `view` (which lets go of the batch it held). Record-batch topics
  /// without a column subset (Invalid otherwise).
  [[deprecated("use Next: it allocates nothing for a cached shape")]] Status NextInto(
      BatchView* view, std::chrono::nanoseconds timeout);

  /// Exports `batch`, received from this consumer (Next or TryNext), through the Arrow C Data
  /// Interface (format::ExportRecordBatch; its schema too if `out_schema`
  /// is not null), zero-copy: the exported buffers point into the
  /// producer's shared memory. The exported struct holds the batch's block
  /// until its `release` is called, on any thread, also after this consumer
  /// is gone; the release returns the block through the channel's queue
  /// without touching this object (no lock). Counted against
  /// ConsumerOptions::max_exported_batches (CapacityError beyond; `*out` is
  /// then untouched): the count covers the top-level struct, so a child a
  /// consumer moves out and keeps after releasing its parent is no longer
  /// counted (it still holds the block). Other batches may be exported the
  /// same way (they are counted too).
  Status ExportBatch(const format::RecordBatch& batch, ArrowArray* out,
                     ArrowSchema* out_schema = nullptr);
  /// As above, the export holding the batch itself rather than its columns:
  /// releasing it is dropping one reference to the batch, so a received
  /// batch whose last reference the export was goes back at once (with the
  /// columns held, its block waits for this consumer's next receive).
  /// Prefer it when you have the pointer.
  Status ExportBatch(const format::RecordBatchPtr& batch, ArrowArray* out,
                     ArrowSchema* out_schema = nullptr);

  /// Exports this consumer as an ArrowArrayStream: its schema is schema();
  /// each get_next is the next batch (Next, waiting per `options`), exported
  /// as ExportBatch does and counted the same way; end of stream
  /// (EndOfStream) ends it (a released `out` array); errors are errno codes
  /// with the Status text from get_last_error. get_next must be called from
  /// one thread at a time, and not while another thread uses the consumer.
  /// The stream borrows the consumer: release the stream before the
  /// consumer is destroyed (batches it gave out may outlive both). The
  /// static overload below owns it instead.
  Status ExportStream(ArrowArrayStream* out, const StreamExportOptions& options = {});
  /// As above; the stream owns `consumer` and closes it when released.
  static Status ExportStream(std::unique_ptr<Consumer> consumer, ArrowArrayStream* out,
                             const StreamExportOptions& options = {});

  /// A descriptor for poll, select or epoll (level-triggered; an epoll
  /// set, so it nests in the caller's) that turns readable when this
  /// consumer may have news for Next after ArmWait: a batch, a new or
  /// finished producer, a broker event. For waiting on many topics from
  /// one thread: drain each with TryNext, ArmWait, then sleep on the
  /// descriptors. Made on the first call; owned by the consumer (do not
  /// close it). Producers sound it through their channel's doorbell
  /// (shm::ChannelConsumer::DoorbellFd), which needs them to run as the
  /// same user; a producer that dies sounds nothing (the broker tells the
  /// connection, a little later): sleep with a timeout.
  Result<int> WaitFd();
  /// Before sleeping on WaitFd: arms every producer's doorbell and brings
  /// the descriptor's set up to date. True if a batch may be there already
  /// (call TryNext instead of sleeping). Next and TryNext's own waits end
  /// the arming: arm again before each sleep.
  Result<bool> ArmWait();

  /// Detaches from the broker and the channels. Idempotent.
  Status Close();

  const std::string& topic() const;
  /// The schema of the batches Next returns: the topic's, restricted to
  /// ConsumerOptions::columns (for row topics with dictionaries:
  /// format::RowOutputSchema of it).
  const format::SchemaPtr& schema() const;
  /// The topic's full schema, as the producer published it.
  const format::SchemaPtr& topic_schema() const;
  TopicKind kind() const;
  /// Whether the topic's producers stamp publish times
  /// (TopicOptions::publish_timestamps; BatchOrigin::publish_ns). False
  /// until the topic exists (ConsumerOptions::wait_for_topic).
  bool publish_timestamps() const;
  /// Times this consumer re-subscribed after a broker restart.
  uint64_t reregistrations() const;
  /// Producers this consumer currently reads from.
  std::size_t producer_count() const;
  /// Batches lost to slot overwrites (kDropOldest topics).
  uint64_t lost() const;
  /// Every counter at once.
  ConsumerStats stats() const;

 private:
  explicit Consumer(std::unique_ptr<internal::ConsumerImpl> impl);
  std::unique_ptr<internal::ConsumerImpl> impl_;
};

}  // namespace alkaid::client
