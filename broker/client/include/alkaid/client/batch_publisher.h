#pragma once

/// \file
/// Publishing record batches through a shared-memory channel: only the
/// Message flatbuffer (or the id of a shape published before) and the body
/// region's place go through the channel's slot; the body stays where it
/// was built, in the producer's arena.

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "alkaid/client/shm_batch_pool.h"
#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/ipc/message_template.h"
#include "alkaid/format/ipc/options.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/shm/channel.h"

namespace alkaid::client {

/// Counters of a publisher.
struct PublishStats {
  uint64_t batches = 0;             ///< batches published
  uint64_t copied_batches = 0;      ///< of which through PublishCopy
  uint64_t copied_bytes = 0;        ///< body bytes PublishCopy copied
  uint64_t metadata_in_region = 0;  ///< batches whose metadata exceeded the slot
  /// Batches sent with the id of a shape published before instead of an
  /// encoded Message: Publish for fixed-width types, PublishCopy for a
  /// Message it sent the batch before too (docs/SHM_LAYOUT.md, "Batches on
  /// a channel").
  uint64_t metadata_reused = 0;
  /// Batches whose Message was the schema's template filled with their
  /// numbers (format::ipc::RecordBatchMessageTemplate) rather than encoded,
  /// and sent inline: Publish for batches with variable-width columns,
  /// PublishCopy for a copy shape not sent before.
  uint64_t metadata_filled = 0;
  /// DictionaryBatch messages published (schemas with dictionary-encoded
  /// fields), of which deltas.
  uint64_t dictionary_batches = 0;
  uint64_t dictionary_deltas = 0;
  /// Replays of every current dictionary, for consumers accepted since
  /// the previous batch or after the channel dropped messages.
  uint64_t dictionary_replays = 0;
};

class FixedShapeWriter;
class Producer;

/// How a FixedShapeWriter is made (BatchPublisher::NewFixedShapeWriter,
/// Producer::NewFixedShapeWriter).
struct FixedShapeWriterOptions {
  /// Keep a private copy of the prototype's body, for Begin(Fill::kPrototype).
  /// false: the writer keeps the encoded metadata alone, and each Begin must
  /// be Begin(Fill::kNone) (the caller writes every byte). A writer of large
  /// batches that writes them whole saves that copy: as much heap memory as
  /// a region, and the writer's own lines stay warm.
  bool keep_prototype = true;
};
namespace internal {
enum class MessageKind : uint8_t;  // batch_layout_internal.h
struct ProducerImpl;               // producer.cc
// A Producer's writer published a batch (producer.cc).
void WriterPublished(ProducerImpl* producer);
// A body buffer to copy (PublishCopy): its bytes, or none.
struct BodyPiece {
  const uint8_t* data;
  uint64_t size;
};
}  // namespace internal

}  // namespace alkaid::client

namespace alkaid::format::ipc {
class DictionaryTracker;
struct IpcPayload;
}  // namespace alkaid::format::ipc

namespace alkaid::client {

/// Publishes batches of one schema through a channel (shm::ChannelProducer).
///
/// Build in place: take a pool with NewPool(), build the columns with
/// format builders on that pool, make the RecordBatch, Publish(batch, pool).
/// Nothing is copied: the slot receives the Message flatbuffer (its buffer
/// offsets relative to the region start), or the id of the channel's shape
/// entry holding it when a batch of the same shape was published before.
/// An existing heap batch goes through PublishCopy(), which copies its body
/// into a fresh region once.
///
/// Dictionary-encoded fields: before a batch whose dictionaries differ from
/// those published before, each changed dictionary is published as a
/// DictionaryBatch message of its own (a delta when the dictionary only
/// grew at its end, else whole), copied once into the arena. Consumers the
/// channel accepted since the previous batch (the channel must be created
/// with accept_on_publish false, so that this publisher accepts them), and
/// consumers after the channel dropped messages, first get a replay of
/// every current dictionary (docs/CLIENT.md, "Dictionaries").
///
/// Thread safety: the producer thread, like the channel.
class ALKAID_EXPORT BatchPublisher {
 public:
  /// `channel` must outlive the publisher. For a schema with
  /// dictionary-encoded fields it must have been created with
  /// accept_on_publish false (Invalid otherwise).
  static Result<std::unique_ptr<BatchPublisher>> Create(shm::ChannelProducer* channel,
                                                        format::SchemaPtr schema);
  ~BatchPublisher();
  BatchPublisher(const BatchPublisher&) = delete;
  BatchPublisher& operator=(const BatchPublisher&) = delete;

  /// A pool over a fresh region of `region_bytes` of the arena (waits for
  /// space up to the channel's space_timeout).
  Result<std::unique_ptr<ShmBatchPool>> NewPool(uint64_t region_bytes);

  /// Publishes `batch`, all of whose buffers lie in `pool`'s region. The
  /// pool is sealed (no more allocations); the region stays valid while the
  /// pool lives and is reused once the pool is gone and every consumer has
  /// released the batch. Invalid if a buffer lies outside the region (or
  /// the batch is a slice needing re-basing), the schema differs, or the
  /// pool was already published; CapacityError if the metadata fits neither
  /// the slot nor the rest of the region; channel errors (TimedOut) otherwise,
  /// after which Publish may be retried with the same pool.
  Status Publish(const format::RecordBatch& batch, ShmBatchPool* pool);

  /// Publishes a batch from anywhere (heap, file) by copying its body into
  /// a new region once, laid out as the IPC writer would (slices re-based).
  Status PublishCopy(const format::RecordBatch& batch);

  /// Channel messages published so far: batches, dictionary messages and
  /// replays.
  uint64_t messages() const { return messages_; }

  /// A writer for many batches of the shape of `prototype` (see
  /// FixedShapeWriter), which must be built in `pool` — a pool of this
  /// publisher, not published yet — and have only fixed-width columns with
  /// known null counts and zero offsets (the types the metadata cache
  /// accepts, docs/SHM_LAYOUT.md "Client fast paths"); else Invalid /
  /// NotImplemented. The prototype's body (unless `options` say not to keep
  /// it) and its encoded metadata are copied: `prototype` and `pool` may go
  /// afterwards. The writer uses this publisher, which must outlive it.
  Result<std::unique_ptr<FixedShapeWriter>> NewFixedShapeWriter(
      const format::RecordBatch& prototype, const ShmBatchPool& pool,
      const FixedShapeWriterOptions& options = {});

  const format::SchemaPtr& schema() const { return schema_; }
  const PublishStats& stats() const { return stats_; }

 private:
  friend class FixedShapeWriter;
  BatchPublisher(shm::ChannelProducer* channel, format::SchemaPtr schema);
  Status CheckSchema(const format::RecordBatch& batch) const;
  // Publish's way for everything but its common case (see there): the
  // checks and their errors, dictionaries, accepting consumers, then as
  // Publish.
  Status PublishGeneral(const format::RecordBatch& batch, ShmBatchPool* pool);
  // Publishes a checked batch, its pool sealed at `body_length`, whose
  // shape is not the last batch's: by the id of another shape published
  // before, the schema's Message template filled, or its Message encoded.
  Status PublishShape(const format::RecordBatch& batch, ShmBatchPool* pool, uint64_t body_length);
  // Publishes `pool`'s region (kept by the pool) with `metadata` as its
  // Message: by shape id if `shape` is not 0, else inline if it fits, else
  // appended to the region.
  Status PublishRegion(ShmBatchPool* pool, uint64_t body_length, std::span<const uint8_t> metadata,
                       uint32_t shape, internal::MessageKind kind);
  // Copies an encoded message's body into a fresh region and publishes it;
  // `shape_out`, if given, receives the shape id it went by (0: inline).
  Status PublishPayloadCopy(const format::ipc::IpcPayload& payload, internal::MessageKind kind,
                            uint32_t* shape_out = nullptr);
  // Publishes `batch` (built in `pool`) with the schema's Message template
  // filled with its numbers; false (nothing done) for a batch the template
  // does not cover (AppendIpcPieces in batch_publisher.cc).
  Result<bool> PublishFilled(const format::RecordBatch& batch, ShmBatchPool* pool,
                             uint64_t body_length);
  // The schema's Message template (made at the first use) filled into
  // filled_ with the numbers in node_scratch_ and range_scratch_.
  Status FillMessage(int64_t num_rows, uint64_t body_length);
  // PublishCopy of a batch whose copy shape (`key`, and the pieces and
  // nodes in the scratch vectors) has no plan yet: laid out as the IPC
  // writer would, with the Message template filled.
  Status PublishCopyFilled(const format::RecordBatch& batch, const std::vector<int64_t>& key);
  // Publishes what a reader needs before `batch`: changed dictionaries,
  // then a replay if some consumer needs one.
  Status SendDictionaries(const format::RecordBatch& batch);
  uint64_t UserWordFor(uint64_t body_length, internal::MessageKind kind, bool in_region) const;

  shm::ChannelProducer* channel_;
  // NewPool's blocks let go (ShmBatchPool's recycling); deleted once this
  // publisher and every pool lent from it are gone.
  ShmBatchPool::Cache* pool_cache_ = nullptr;
  format::SchemaPtr schema_;
  PublishStats stats_;
  uint64_t messages_ = 0;
  // The channel's options Publish reads (fixed when the channel is made).
  bool accept_on_publish_;
  uint64_t inline_capacity_;
  // Shapes (see AppendShape in batch_publisher.cc) of batches published
  // through Publish, with the id of the channel's shape entry holding their
  // encoded Message. A batch of the same shape has byte-identical metadata.
  struct CachedShape {
    std::vector<int64_t> shape;
    uint32_t id;
    uint64_t user;  // the slot's user word (UserWordFor), without dictionaries
  };
  std::vector<int64_t> shape_scratch_;
  std::vector<CachedShape> shapes_;
  // The entry of shapes_ the last batch matched: the next batch is compared
  // with it in place first (most producers publish one shape over and over).
  size_t last_shape_ = 0;
  bool shape_table_full_ = false;
  // Shape ids of copied batches (PublishCopy): the encoded Message of a
  // shape seen twice in a row, and the last one that travelled inline.
  struct CopiedShape {
    std::vector<uint8_t> metadata;
    uint32_t id;
  };
  uint32_t CopiedShapeId(std::span<const uint8_t> metadata);
  std::vector<CopiedShape> copied_shapes_;
  std::vector<uint8_t> last_inline_;
  // PublishCopy's plans: for a copy shape (AppendCopyShape in
  // batch_publisher.cc) whose Message is in the shape table, where each body
  // buffer goes; a batch of that shape is copied without being encoded.
  struct CopyPlan {
    std::vector<int64_t> key;
    uint32_t id = 0;
    uint64_t body_length = 0;
    std::vector<uint64_t> offsets;
  };
  std::vector<CopyPlan> copy_plans_;
  std::vector<internal::BodyPiece> copy_pieces_;
  // The Message template of this schema's batches (PublishFilled), made at
  // the first batch it fills, and its scratch.
  std::unique_ptr<format::ipc::RecordBatchMessageTemplate> message_template_;
  std::vector<format::ipc::RecordBatchMessageTemplate::Node> node_scratch_;
  std::vector<format::ipc::RecordBatchMessageTemplate::Range> range_scratch_;
  std::vector<uint8_t> filled_;
  std::vector<internal::BodyPiece> payload_pieces_;
  std::vector<uint64_t> payload_offsets_;
  // The region-metadata record sent inline, kept between publishes.
  std::vector<std::byte> slot_payload_;
  // Schemas with dictionary-encoded fields only: the dictionaries sent,
  // how many dictionary messages went out (UserWord::dictionary_generation),
  // and what the channel had accepted and dropped at the last batch.
  std::unique_ptr<format::ipc::DictionaryTracker> dictionaries_;
  uint64_t dictionary_generation_ = 0;
  uint64_t accepted_seen_ = 0;
  uint64_t dropped_seen_ = 0;
  uint64_t last_replay_ = 0;  // channel sequence of the last replay
};

/// Publishes batches of one fixed shape — the row count, null counts and
/// buffer layout of a prototype batch — without building a RecordBatch per
/// batch: each Begin() takes a fresh region holding a copy of the
/// prototype's body, the caller overwrites the buffers it wants through
/// buffer(i), and Publish() hands the region to the channel with the
/// prototype's encoded metadata. Per batch this is one block allocation, a
/// copy of the body and a channel publish; no builder, no object graph, no
/// flatbuffer, and no extra reference for a pool. Consumers see ordinary
/// batches (the same metadata bytes every time, so their decode cache
/// applies).
///
/// What the caller writes must keep the batch valid for its metadata: the
/// null counts are the prototype's, so a validity bitmap may be rearranged
/// but must keep its number of nulls (consumers validate the structure, not
/// the counts, on their fast path; ValidateFull would report a mismatch).
///
/// Thread safety: the producer thread, like the BatchPublisher.
class ALKAID_EXPORT FixedShapeWriter {
 public:
  ~FixedShapeWriter();
  FixedShapeWriter(const FixedShapeWriter&) = delete;
  FixedShapeWriter& operator=(const FixedShapeWriter&) = delete;

  /// What Begin() puts in the region's buffers.
  enum class Fill : uint8_t {
    /// A copy of the prototype's body: the caller overwrites what it wants.
    kPrototype,
    /// Nothing: the buffers hold whatever the arena held (an earlier batch
    /// of this producer, or zeros), so the caller writes every byte it means,
    /// validity bitmaps included. Saves a copy of the body per batch.
    kNone,
  };
  /// Takes a fresh region (waits for space up to the channel's
  /// space_timeout) and fills it as `fill` says. Invalid if a region taken
  /// by an earlier Begin() was not published yet, or for kPrototype if the
  /// writer keeps no prototype (FixedShapeWriterOptions::keep_prototype).
  [[gnu::always_inline]] Status Begin(Fill fill = Fill::kPrototype) {
    // Inline when nothing is copied into the region: the channel's loan is
    // then the whole of it (shm::ChannelWriter, whose checks were made once).
    if (fill == Fill::kNone && none_copies_nothing_) return channel_writer_.Loan();
    return BeginCopying(fill);
  }
  /// Number of buffers of the shape: every column's buffers, depth first
  /// (for an int64 column: its validity bitmap, then its values). A buffer
  /// the prototype did not have (an absent bitmap) is empty.
  size_t num_buffers() const { return buffers_.size(); }
  /// Buffer `i` of the region taken by Begin(): writable until Publish().
  /// Empty if there is no such region or buffer.
  [[gnu::always_inline]] std::span<uint8_t> buffer(size_t i) {
    if (!channel_writer_.loaned() || i >= buffers_.size()) return {};
    auto* base = reinterpret_cast<uint8_t*>(channel_writer_.data().data());
    return {base + buffers_[i].offset, static_cast<size_t>(buffers_[i].size)};
  }
  /// Publishes the region taken by Begin(). Invalid without one; channel
  /// errors (TimedOut) otherwise, after which Publish may be retried.
  [[gnu::always_inline]] Status Publish() {
    // Inline for a writer whose channel accepts consumers itself and that
    // no Producer counts (the stream's common case); the rest out of line.
    if (!plain_publish_) return PublishTo(nullptr);
    Status st = channel_writer_.Publish();
    if (st.ok()) {
      ++publisher_->stats_.batches;
      ++publisher_->messages_;
    }
    return st;
  }
  /// As Publish(), and `*held` goes on holding the region, read-only, until
  /// it is dropped or reset (any thread): for a caller that keeps pointers
  /// into what it published. Without it the region is the consumers' alone
  /// and is reused once they have released it.
  Status Publish(shm::ChannelLoan* held);

  /// Body bytes of one batch (the region also holds the metadata when it
  /// does not fit in a slot).
  uint64_t body_length() const { return body_length_; }

 private:
  friend class BatchPublisher;
  friend class Producer;
  struct BufferSpan {
    uint64_t offset;
    uint64_t size;
  };
  explicit FixedShapeWriter(BatchPublisher* publisher) : publisher_(publisher) {}
  // Begin's way when it copies (the prototype's body, or the metadata the
  // region carries, or its padding).
  Status BeginCopying(Fill fill);
  // Publish(), or Publish(held) when `held` is not null: the out-of-line
  // way, with every count and the acceptance of new consumers.
  Status PublishTo(shm::ChannelLoan* held);
  // Whether Publish() is the channel writer's publish and a count: the
  // channel accepts consumers itself, no Producer is told, the metadata
  // travels in the shape table or the slot (set when made, and by
  // Producer::NewFixedShapeWriter).
  void UpdatePlainPublish() {
    plain_publish_ = accept_on_publish_ && producer_ == nullptr && !metadata_in_region_;
  }

  // What Begin and Publish read first, together.
  // The channel's loan and publish of this shape's regions (its payload,
  // user word and shape id fixed; checked once).
  shm::ChannelWriter channel_writer_;
  // Begin(Fill::kNone) copies nothing: the region is the body alone.
  bool none_copies_nothing_ = false;
  bool plain_publish_ = false;
  bool metadata_in_region_ = false;
  // The channel's accept_on_publish (false: Publish accepts new consumers
  // itself, as BatchPublisher does), read once.
  bool accept_on_publish_ = true;
  BatchPublisher* publisher_;  // its counts kept by Publish
  // Set by Producer::NewFixedShapeWriter: the producer told of each publish
  // (internal::WriterPublished: its count, which its Close drains up to, and
  // the figures its broker session asked for).
  internal::ProducerImpl* producer_ = nullptr;
  uint64_t region_bytes_ = 0;  // body, then metadata if in region
  uint64_t image_offset_ = 0;  // where in the region image_ starts
  uint64_t body_length_ = 0;
  // The region's bytes from image_offset_ on: the prototype's body (unless
  // not kept), then the metadata if it is in the region.
  std::vector<uint8_t> image_;
  std::vector<BufferSpan> buffers_;
};

}  // namespace alkaid::client
