#pragma once

/// \file
/// Publishing record batches to a topic of the broker (Producer), and the
/// options and counters it shares with RowProducer (row_producer.h).

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/shm_batch_pool.h"
#include "alkaid/client/topic.h"
#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/c_data.h"
#include "alkaid/format/record_batch.h"

namespace alkaid::client {

namespace internal {
struct ProducerImpl;  // the state and broker protocol Producer and RowProducer share
}  // namespace internal

/// Options for Producer::Open() and RowProducer::Open().
struct ProducerOptions {
  /// Broker socket; empty: DefaultBrokerSocket().
  std::string socket_path;
  /// Used if this producer creates the topic; `topic.kind` is not read:
  /// the producer's type says what it publishes (Producer: kRecordBatch,
  /// RowProducer: kUnsafeRow), and a topic of the other kind refuses it
  /// (Invalid, naming both).
  TopicOptions topic;
  /// Longest wait of Publish for a free slot (kBlockProducer) or arena space.
  std::chrono::milliseconds publish_timeout{5000};
  /// Open waits for the consumers attached to the topic before this
  /// producer was ready (those waiting for the topic included: they are
  /// attached when it is created) to register on its channel, so that they see
  /// its first message. The wait ends as soon as each of them has
  /// registered, detached or died; this bounds it, for a consumer that does
  /// not look for data (a consumer registers in Next/TryNext). 0: no wait.
  std::chrono::milliseconds wait_for_consumers{10000};
  /// Close() waits this long for the active consumers to read every
  /// published batch before it drops the producer's references (a body
  /// nobody has acquired yet would otherwise be gone). Dead consumers are
  /// detached meanwhile and do not hold it up.
  std::chrono::milliseconds drain_timeout{5000};
  /// Back this producer's channel segment (its arena) with transparent huge pages
  /// (shm::SegmentOptions::huge_pages): consumers of large batches then take
  /// one page-table walk per 2 MiB instead of per 4 KiB. kTry falls back to
  /// 4 KiB pages (huge_pages() says which); kRequire makes
  /// Open fail with the reason (e.g. the kernel setting in the way).
  /// Default: kOff.
  shm::HugePages huge_pages = shm::HugePages::kOff;
  /// Fixed blocks in this producer's channel (docs/SHM_LAYOUT.md, "Fixed
  /// blocks"): bytes of each (rounded up to 64; at most 2^30), 0 (the
  /// default) for none. They serve a writer that loans one size: a
  /// FixedShapeWriter whose region (body_length(), for a batch whose Message
  /// has a shape-table entry) is at most this takes a fixed block per batch,
  /// which needs no block table entry and comes back without a return
  /// (fewer instructions per batch than an arena block). Size them with
  /// Producer::FixedShapeBodyBytes (for NewFixedShapeWriter(rows)) or from
  /// the writer's body_length(). Any loan that fits (a pool, a copy, a
  /// dictionary) may take one; a larger one, or any loan while every fixed
  /// block is in flight or held, goes to the arena as without them. The
  /// blocks lie beside the arena, not in it: the arena keeps its size, and
  /// the broker counts count x bytes against its shm limit on top of it
  /// (CapacityError at Open, naming both, beyond it). Per producer: each
  /// producer of a topic asks for its own. A broker of an earlier release
  /// grants none, and the producer makes none (fixed_block_bytes() says).
  uint64_t fixed_block_bytes = 0;
  /// How many fixed blocks (with fixed_block_bytes; at most 2^20, the area
  /// at most 2^39 bytes): 0 (the default) for twice the topic's slot_count,
  /// which a writer that the consumers keep up with never runs out of.
  uint32_t fixed_block_count = 0;
  /// Cancels the producer's waits: once a stop is requested on its
  /// std::stop_source, from any thread, the wait in progress ends within a
  /// few milliseconds with Cancelled naming the topic, and so does every
  /// later one. The waits are Open's for the consumers
  /// (wait_for_consumers: Open then detaches, removes what it created and
  /// fails), a publish's for room (kBlockProducer) or arena space
  /// (publish_timeout: nothing is published, as on TimedOut; the caller may
  /// retry), NewBatchPool's for space, and Close's drain (drain_timeout:
  /// the producer is closed all the same, consumers get EndOfStream after
  /// what was published, and Close returns Cancelled). Only the waits look
  /// at it: a publish that need not wait goes through. set_stop replaces it.
  /// Default: a token that is never stopped.
  std::stop_token stop;
};

/// Counters of a producer.
struct ProducerStats {
  uint64_t published = 0;
  /// Body bytes copied into shared memory: PublishCopy's, or a
  /// RowProducer's PublishRowBatch's (PublishRows encodes in place).
  uint64_t copied_bytes = 0;
  /// Consumers whose process died, and whose registration and blocks the
  /// channel released (as of the last publish or Poll).
  uint64_t dead_consumers_detached = 0;
  /// Blocks of the producer's arena not free (lent to a writer, published
  /// and still held by the producer or by a consumer), and the arena's free
  /// bytes, as of the last publish or Poll: a dead consumer's blocks come
  /// back here once the channel reclaimed it.
  uint64_t blocks_live = 0;
  uint64_t arena_bytes_free = 0;
  /// Times this producer re-registered with a restarted broker.
  uint64_t reregistrations = 0;
  /// Batches published from the Arrow C Data / C Stream Interface
  /// (PublishArrowArray, PublishArrowStream) without a copy (their buffers
  /// lay in a pool of this producer) and with one copy. 0 for a RowProducer.
  uint64_t arrow_zero_copy = 0;
  uint64_t arrow_copied = 0;
  /// Bodies the consumers have not returned yet, read or not (summed over
  /// consumers: a batch two consumers hold counts twice), as of the last
  /// publish or Poll. A body a consumer exported to foreign code counts
  /// until the foreign side releases it. Reported to the broker (`alkaid
  /// topics`, column HELD).
  uint64_t held_by_consumers = 0;
};

/// One producer of a record-batch topic (TopicKind::kRecordBatch; rows go
/// through RowProducer, which has the same lifecycle). Owns a channel (shm::ChannelProducer, named
/// by the broker, created here) and publishes batches into it; the broker never sees the data.
///
/// Dead consumers never hold the producer back: the channel releases what
/// they held whenever it needs room or space (pid checks in its waits), also
/// while the broker is down. An idle producer does so in Poll().
///
/// The thread of the producer's broker session listens to the broker and
/// reports the topic's figures.
///
/// Broker outages: publishing never involves the broker and goes on while
/// it is down. The session thread notices the lost connection and, every
/// 200 ms, tries to reconnect; once a broker answers on the socket again it
/// re-creates the topic (same config) and re-registers this producer with
/// the segments it already has (the restarted broker kept them for it), so
/// new consumers find it again. If the broker no longer has the segments
/// (it was stopped cleanly, or the producer came back after its
/// --adopt-timeout) the producer stops trying and goes on unregistered.
///
/// Thread safety: NewBatchPool, Publish*, and Close from one thread at a
/// time. Errors are Status values; nothing throws.
class ALKAID_EXPORT Producer {
 public:
  ~Producer();  ///< Close()
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  /// Connects to the broker, creates topic `topic` with `schema` (or checks
  /// that the existing topic has this schema: Invalid naming both
  /// otherwise), attaches as a producer and creates the segments.
  /// Dictionary-encoded fields are published with their dictionaries
  /// (docs/CLIENT.md, "Dictionaries"). IOError if no broker answers.
  static Result<std::unique_ptr<Producer>> Open(const std::string& topic, format::SchemaPtr schema,
                                                const ProducerOptions& options = {});

  /// A memory pool over a fresh region of `region_bytes` in this producer's
  /// arena: build a batch there with format builders, then
  /// Publish(batch, pool). See ShmBatchPool for the rules.
  Result<std::unique_ptr<ShmBatchPool>> NewBatchPool(uint64_t region_bytes);

  /// A writer that publishes many batches of the shape of `prototype`
  /// (built in `pool`, a pool of this producer not yet published) without
  /// building them: see FixedShapeWriter and
  /// BatchPublisher::NewFixedShapeWriter for the rules. Its batches count
  /// as published (stats, Close's drain). It must not outlive the producer;
  /// after Close, its Publish fails.
  Result<std::unique_ptr<FixedShapeWriter>> NewFixedShapeWriter(
      const format::RecordBatch& prototype, const ShmBatchPool& pool,
      const FixedShapeWriterOptions& options = {});

  /// A writer of batches of `rows` rows (>= 0) of this producer's schema
  /// when every column is fixed-width (numbers, temporal types, decimals,
  /// fixed-size binary, boolean): the prototype is made here, without
  /// validity bitmaps (no nulls) and with its values zeroed, so that
  /// buffer(2 * i + 1) is column i's values and buffer(2 * i) is empty.
  /// NotImplemented naming the first other column; as the other overload
  /// otherwise (a wait for the prototype's space included).
  Result<std::unique_ptr<FixedShapeWriter>> NewFixedShapeWriter(
      int64_t rows, const FixedShapeWriterOptions& options = {});

  /// Publishes a batch built in `pool` without copying it.
  Status Publish(const format::RecordBatch& batch, ShmBatchPool* pool);

  /// Publishes a batch from anywhere by copying its body once.
  Status PublishCopy(const format::RecordBatch& batch);

  /// Publishes a record batch handed over through the Arrow C Data
  /// Interface: `array` (a struct array without nulls, as
  /// format::ImportRecordBatch takes it) and its `schema` (null: this
  /// producer's schema describes it). Both are taken, as every import takes
  /// them (released on return on error; otherwise once the batch is
  /// published or copied and no longer referenced). Imported with
  /// `options` (default: ValidateFull, since the bytes become what the
  /// consumers read); the schema must equal the producer's.
  ///
  /// Zero copies when every buffer lies in the region of `pool`, a pool of
  /// this producer not yet published (the batch was built there, e.g. by
  /// Alkaid builders, exported to Arrow C++, and handed back): then as
  /// Publish(batch, pool). Otherwise (no pool, a buffer elsewhere, or a
  /// layout Publish cannot send in place such as a slice, after which
  /// `pool` is sealed and unpublished) exactly one copy into the segment, as
  /// PublishCopy. stats() counts which happened.
  Status PublishArrowArray(ArrowArray* array, ArrowSchema* schema, ShmBatchPool* pool = nullptr,
                           const format::CImportOptions& options = {});

  /// Publishes every batch of an Arrow C stream, in order, until its end;
  /// takes `stream` (released on return, also on error). Each batch as
  /// PublishArrowArray does: zero copies when its buffers lie in one of
  /// `pools` (each used at most once), one copy otherwise. Stops at the
  /// first error (the stream's, named with its get_last_error text, or the
  /// publish's); the batches before it stay published. Returns how many
  /// were published.
  Result<uint64_t> PublishArrowStream(ArrowArrayStream* stream,
                                      std::span<ShmBatchPool* const> pools = {},
                                      const format::CImportOptions& options = {});

  /// Ends the stream: consumers read what was published, then get
  /// EndOfStream. Waits (up to ProducerOptions::drain_timeout) until every
  /// active consumer has read everything, detaches from the broker and
  /// removes the segment names. Idempotent; works when the broker is gone.
  /// Cancelled, once closed, if ProducerOptions::stop cut the drain short
  /// while a consumer had not read everything.
  Status Close();

  /// Replaces ProducerOptions::stop for the waits that begin after this
  /// call (e.g. a fresh token per call, for a caller that cancels one call
  /// at a time). Producer thread, between calls, like Publish.
  void set_stop(std::stop_token stop);

  const std::string& topic() const;
  const format::SchemaPtr& schema() const;
  ProducerStats stats() const;

  /// Producer thread, for an idle producer: accepts consumers that
  /// registered (they get the next batch, after a dictionary replay where
  /// needed), releases what dead and finished consumers held, and updates
  /// stats(). Publishing does this as needed.
  void Poll();
  /// True while the producer is not registered with a broker (connection
  /// lost and not re-registered yet); the data path works regardless.
  bool broker_lost() const;
  /// Whether the channel segment is backed by huge pages
  /// (ProducerOptions::huge_pages obtained them).
  bool huge_pages() const;
  /// The fixed blocks of the producer's channel (ProducerOptions::
  /// fixed_block_bytes, rounded up to 64, and the count the broker granted);
  /// 0 and 0 without them, or from a broker of an earlier release.
  uint64_t fixed_block_bytes() const;
  uint32_t fixed_block_count() const;
  /// The body bytes of each batch of NewFixedShapeWriter(rows) of `schema`
  /// (every column fixed-width; as that call says otherwise): what to give
  /// ProducerOptions::fixed_block_bytes for that writer.
  static Result<uint64_t> FixedShapeBodyBytes(const format::Schema& schema, int64_t rows);
  /// Deprecated (the previous release's name): huge_pages().
  [[deprecated("body_segment_huge_pages() is huge_pages()")]] bool body_segment_huge_pages() const {
    return huge_pages();
  }

 private:
  explicit Producer(std::unique_ptr<internal::ProducerImpl> impl);
  // PublishArrowArray/Stream after the import: in place or one copy.
  Status PublishImported(const format::RecordBatch& batch, ShmBatchPool* pool);
  std::unique_ptr<internal::ProducerImpl> impl_;
};

}  // namespace alkaid::client
