#pragma once

/// \file
/// Publishing record batches through a shared-memory ring: only the Message
/// flatbuffer (and the body region's handle) goes through the ring; the
/// body stays where it was built, in the producer's body segment.

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
#include "alkaid/format/ipc/options.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/shm/body_allocator.h"
#include "alkaid/shm/ring.h"

namespace alkaid::client {

/// Counters of a publisher.
struct PublishStats {
  uint64_t batches = 0;            ///< batches published
  uint64_t copied_batches = 0;     ///< of which through PublishCopy
  uint64_t copied_bytes = 0;       ///< body bytes PublishCopy copied
  uint64_t metadata_in_region = 0; ///< batches whose metadata exceeded the slot
  /// Publish calls that reused an encoded Message of a recent batch of the
  /// same shape (fixed-width types only; see
  /// docs/SHM_LAYOUT.md, "Client fast paths").
  uint64_t metadata_reused = 0;
  /// DictionaryBatch messages published (schemas with dictionary-encoded
  /// fields), of which deltas.
  uint64_t dictionary_batches = 0;
  uint64_t dictionary_deltas = 0;
  /// Dictionary snapshots written for late joiners (one per batch after
  /// which some dictionary changed).
  uint64_t dictionary_snapshots = 0;
};

class FixedShapeWriter;
class Producer;

}  // namespace alkaid::client

namespace alkaid::format::ipc {
class DictionaryTracker;
struct IpcPayload;
}  // namespace alkaid::format::ipc

namespace alkaid::client {

/// Publishes batches of one schema through a ring whose bodies live in a
/// BodyAllocator's segment.
///
/// Build in place: take a pool with NewPool(), build the columns with
/// format builders on that pool, make the RecordBatch, Publish(batch, pool).
/// Nothing is copied: the ring slot receives the Message flatbuffer (its
/// buffer offsets relative to the region start) and the region's handle.
/// An existing heap batch goes through PublishCopy(), which copies its body
/// into a fresh region once.
///
/// Dictionary-encoded fields: before a batch whose dictionaries differ from
/// those published before, each changed dictionary is published as a
/// DictionaryBatch message of its own (a delta when the dictionary only
/// grew at its end, else whole), copied once into the body segment: the
/// dictionary values are not part of the batch's region. The publisher
/// also keeps a snapshot of every current dictionary in the body segment
/// and announces it in the ring's sideband, so that consumers joining late
/// or after a gap decode the next batches (docs/CLIENT.md, "Dictionaries").
///
/// Thread safety: one producer thread, like the ring and the allocator.
class ALKAID_EXPORT BatchPublisher {
 public:
  /// `ring` must have been created with `bodies` (RingProducer::Create),
  /// and both must outlive the publisher.
  static Result<std::unique_ptr<BatchPublisher>> Create(shm::RingProducer* ring,
                                                        shm::BodyAllocator* bodies,
                                                        format::SchemaPtr schema);
  ~BatchPublisher();
  BatchPublisher(const BatchPublisher&) = delete;
  BatchPublisher& operator=(const BatchPublisher&) = delete;

  /// A pool over a fresh region of `region_bytes` in the body segment
  /// (waits for space per the allocator's FullPolicy).
  Result<std::unique_ptr<ShmBatchPool>> NewPool(uint64_t region_bytes);

  /// Publishes `batch`, all of whose buffers lie in `pool`'s region. The
  /// pool is sealed (no more allocations); the region stays valid while the
  /// pool lives and is reused once the pool is gone and every consumer has
  /// released the batch. Invalid if a buffer lies outside the region (or
  /// the batch is a slice needing re-basing), the schema differs, or the
  /// pool was already published; CapacityError if the metadata fits neither
  /// the slot nor the rest of the region; ring errors (TimedOut) otherwise,
  /// after which Publish may be retried with the same pool.
  Status Publish(const format::RecordBatch& batch, ShmBatchPool* pool);

  /// Publishes a batch from anywhere (heap, file) by copying its body into
  /// a new region once, laid out as the IPC writer would (slices re-based).
  Status PublishCopy(const format::RecordBatch& batch);

  /// Ring messages published so far: batches and dictionary messages.
  uint64_t messages() const { return stats_.batches + stats_.dictionary_batches; }

  /// A writer for many batches of the shape of `prototype` (see
  /// FixedShapeWriter), which must be built in `pool` — a pool of this
  /// publisher, not published yet — and have only fixed-width columns with
  /// known null counts and zero offsets (the types the metadata cache
  /// accepts, docs/SHM_LAYOUT.md "Client fast paths"); else Invalid /
  /// NotImplemented. The prototype's body and its encoded metadata are
  /// copied: `prototype` and `pool` may go afterwards. The writer uses this
  /// publisher, which must outlive it.
  Result<std::unique_ptr<FixedShapeWriter>> NewFixedShapeWriter(
      const format::RecordBatch& prototype, const ShmBatchPool& pool);

  const format::SchemaPtr& schema() const { return schema_; }
  const PublishStats& stats() const { return stats_; }

 private:
  friend class FixedShapeWriter;
  BatchPublisher(shm::RingProducer* ring, shm::BodyAllocator* bodies, format::SchemaPtr schema);
  Status CheckSchema(const format::RecordBatch& batch) const;
  Status PublishRegion(ShmBatchPool* pool, uint64_t body_length,
                       const std::shared_ptr<format::Buffer>& metadata, uint16_t kind_flags);
  // Copies an encoded message's body into a fresh region and publishes it.
  Status PublishPayloadCopy(const format::ipc::IpcPayload& payload, uint16_t kind_flags);
  // Publishes what a reader needs before `batch`: changed dictionaries,
  // then a new snapshot if anything changed.
  Status SendDictionaries(const format::RecordBatch& batch);
  Status WriteDictionarySnapshot();

  shm::RingProducer* ring_;
  shm::BodyAllocator* bodies_;
  format::SchemaPtr schema_;
  PublishStats stats_;
  // Metadata cache: the shapes (see AppendShape in batch_publisher.cc) of
  // the last few distinct batches published through Publish, with their
  // encoded Messages. A batch of the same shape has byte-identical
  // metadata, so it is not encoded again.
  struct CachedMetadata {
    std::vector<int64_t> shape;
    std::shared_ptr<format::Buffer> metadata;
  };
  std::vector<int64_t> shape_scratch_;
  std::vector<CachedMetadata> metadata_cache_;
  size_t metadata_cache_next_ = 0;  // round-robin victim
  // The slot payload being assembled; kept between publishes so that a
  // publish allocates nothing here.
  std::vector<std::byte> slot_payload_;
  // Schemas with dictionary-encoded fields only: the dictionaries sent, the
  // epoch of the current state (the ring sequence after the last dictionary
  // message), and the snapshot blocks kept, oldest first (the newest is
  // announced in the sideband).
  std::unique_ptr<format::ipc::DictionaryTracker> dictionaries_;
  uint64_t dictionary_epoch_ = 0;
  bool snapshot_stale_ = false;
  struct Snapshot {
    uint64_t epoch;
    shm::WritableBlock block;
  };
  std::deque<Snapshot> snapshots_;
};

/// Publishes batches of one fixed shape — the row count, null counts and
/// buffer layout of a prototype batch — without building a RecordBatch per
/// batch: each Begin() takes a fresh region holding a copy of the
/// prototype's body, the caller overwrites the buffers it wants through
/// buffer(i), and Publish() hands the region to the ring with the
/// prototype's encoded metadata. Per batch this is one block allocation, a
/// copy of the body and a ring publish; no builder, no object graph, no
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

  /// Takes a fresh region (waits for space per the allocator's FullPolicy)
  /// and fills it with the prototype's body. Invalid if a region taken by
  /// an earlier Begin() was not published yet.
  Status Begin();
  /// Number of buffers of the shape: every column's buffers, depth first
  /// (for an int64 column: its validity bitmap, then its values). A buffer
  /// the prototype did not have (an absent bitmap) is empty.
  size_t num_buffers() const { return buffers_.size(); }
  /// Buffer `i` of the region taken by Begin(): writable until Publish().
  /// Empty if there is no such region or buffer.
  std::span<uint8_t> buffer(size_t i);
  /// Publishes the region taken by Begin(). Invalid without one; ring
  /// errors (TimedOut) otherwise, after which Publish may be retried.
  Status Publish();

  /// Body bytes of one batch (the region also holds the metadata when it
  /// does not fit in a ring slot).
  uint64_t body_length() const { return body_length_; }

 private:
  friend class BatchPublisher;
  friend class Producer;
  struct BufferSpan {
    uint64_t offset;
    uint64_t size;
  };
  explicit FixedShapeWriter(BatchPublisher* publisher) : publisher_(publisher) {}

  BatchPublisher* publisher_;
  std::vector<uint8_t> image_;  // the region's bytes: prototype body, then metadata if in region
  uint64_t body_length_ = 0;
  std::vector<BufferSpan> buffers_;
  std::vector<std::byte> slot_payload_;  // descriptor (+ metadata if inline), fixed
  bool metadata_in_region_ = false;
  shm::WritableBlock block_;
  bool pending_ = false;
  // Set by Producer::NewFixedShapeWriter: the producer's count of published
  // batches (what its Close drains up to), kept exact.
  std::atomic<uint64_t>* published_counter_ = nullptr;
};

}  // namespace alkaid::client
