#include "alkaid/client/batch_publisher.h"

#include <cstring>
#include <utility>
#include <vector>

#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/ipc/dictionary_tracker.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/writer.h"
#include "batch_descriptor_internal.h"

namespace alkaid::client {

using internal::BatchDescriptor;

namespace {

// Appends the shape of `data` to `out`: everything of an array that
// GetRecordBatchMetadataForRegion encodes (length, null count, and each
// buffer's position and size in the region), recursively. False if the
// metadata could depend on anything else: a type whose buffers are not all
// fixed-width (its encoding reads offsets), an unknown null count (counted
// from the bitmap), a non-zero offset (re-basing), a dictionary.
bool AppendShape(const format::ArrayData& data, const uint8_t* region,
                 std::vector<int64_t>* out) {
  if (data.null_count < 0 || data.offset != 0 || data.dictionary != nullptr ||
      !internal::IsStructuralLayout(*data.type)) {
    return false;
  }
  out->push_back(data.length);
  out->push_back(data.null_count);
  out->push_back(static_cast<int64_t>(data.buffers.size()));
  for (const auto& b : data.buffers) {
    if (b == nullptr) {
      out->push_back(-1);
      out->push_back(-1);
    } else {
      out->push_back(b->data() - region);
      out->push_back(b->size());
    }
  }
  out->push_back(static_cast<int64_t>(data.child_data.size()));
  for (const auto& child : data.child_data) {
    if (child == nullptr || !AppendShape(*child, region, out)) return false;
  }
  return true;
}

// Appends every buffer of `data` (depth first) as (offset in the region,
// size); an absent buffer as (0, 0). Only called on shapes AppendShape
// accepted, whose buffers all lie in the region.
void AppendBufferSpans(const format::ArrayData& data, const uint8_t* region,
                       std::vector<std::pair<uint64_t, uint64_t>>* out) {
  for (const auto& b : data.buffers) {
    if (b == nullptr) {
      out->emplace_back(0, 0);
    } else {
      out->emplace_back(static_cast<uint64_t>(b->data() - region),
                        static_cast<uint64_t>(b->size()));
    }
  }
  for (const auto& child : data.child_data) AppendBufferSpans(*child, region, out);
}

}  // namespace

Result<std::unique_ptr<BatchPublisher>> BatchPublisher::Create(shm::RingProducer* ring,
                                                               shm::BodyAllocator* bodies,
                                                               format::SchemaPtr schema) {
  if (ring == nullptr || bodies == nullptr || schema == nullptr) {
    return Status::Invalid("BatchPublisher: ring, body allocator and schema are required");
  }
  if (ring->options().inline_capacity < sizeof(BatchDescriptor)) {
    return Status::Invalid("BatchPublisher: ring '", ring->name(), "' has ",
                           ring->options().inline_capacity,
                           " inline bytes per slot; a batch descriptor needs ",
                           sizeof(BatchDescriptor));
  }
  format::ipc::DictionaryMemo ids;
  ALKAID_RETURN_NOT_OK(ids.AssignIds(*schema));
  std::unique_ptr<BatchPublisher> publisher(new BatchPublisher(ring, bodies, std::move(schema)));
  if (ids.num_fields() > 0) {
    // Deltas when a dictionary only grows; replacements otherwise (a ring
    // is a stream: readers replace their dictionary).
    // The batches' dictionaries may live in a pool's region, which goes
    // with the pool: the tracker keeps its own copies.
    format::ipc::DictionaryTrackerOptions tracking;
    tracking.copy_to = format::default_memory_pool();
    publisher->dictionaries_ =
        std::make_unique<format::ipc::DictionaryTracker>(ids, tracking);
  }
  return publisher;
}

BatchPublisher::BatchPublisher(shm::RingProducer* ring, shm::BodyAllocator* bodies,
                               format::SchemaPtr schema)
    : ring_(ring), bodies_(bodies), schema_(std::move(schema)) {}

BatchPublisher::~BatchPublisher() = default;

namespace {

format::ipc::IpcWriteOptions RegionWriteOptions() {
  format::ipc::IpcWriteOptions options;
  options.alignment = 64;
  return options;
}

}  // namespace

Status BatchPublisher::SendDictionaries(const format::RecordBatch& batch) {
  if (dictionaries_ == nullptr) return Status::OK();
  ALKAID_ASSIGN_OR_RAISE(auto changes, dictionaries_->Diff(batch));
  for (const format::ipc::DictionaryChange& change : changes) {
    if (change.values != nullptr) {
      if (!snapshot_stale_) {
        // From now until the new snapshot, a reader that attaches must not
        // take the current snapshot for the whole state.
        internal::DictionarySideband pending;
        if (!snapshots_.empty()) {
          pending.block = snapshots_.back().block.handle();
          pending.epoch = snapshots_.back().epoch;
        }
        pending.pending = true;
        const auto words = pending.ToWords();
        ALKAID_RETURN_NOT_OK(ring_->SetSideband(words));
        snapshot_stale_ = true;
      }
      ALKAID_ASSIGN_OR_RAISE(auto payload,
                             format::ipc::GetDictionaryPayload(change.id, change.is_delta,
                                                               change.values, RegionWriteOptions()));
      ALKAID_RETURN_NOT_OK(PublishPayloadCopy(payload, internal::kDictionaryMessage));
      ++stats_.dictionary_batches;
      if (change.is_delta) ++stats_.dictionary_deltas;
      // Batches from here on decode with the state that includes it.
      dictionary_epoch_ = ring_->next_sequence();
      snapshot_stale_ = true;
    }
    // Recorded once published: a failed publish is retried by the next call.
    ALKAID_RETURN_NOT_OK(dictionaries_->Commit(change));
  }
  // No batch goes out with an epoch the snapshot does not describe: a
  // failure here fails the publish, and the retry writes the snapshot.
  if (snapshot_stale_) ALKAID_RETURN_NOT_OK(WriteDictionarySnapshot());
  return Status::OK();
}

Status BatchPublisher::WriteDictionarySnapshot() {
  // Every current dictionary, whole, framed like a stream's dictionary
  // messages (nested ones first, as the tracker orders them).
  ALKAID_ASSIGN_OR_RAISE(auto sink, format::ipc::BufferOutputStream::Create());
  const format::ipc::IpcWriteOptions options = RegionWriteOptions();
  for (const auto& [id, dictionary] : dictionaries_->current()) {
    ALKAID_ASSIGN_OR_RAISE(auto payload,
                           format::ipc::GetDictionaryPayload(id, false, dictionary, options));
    ALKAID_RETURN_NOT_OK(format::ipc::WriteIpcPayload(payload, options, sink.get()).status());
  }
  ALKAID_ASSIGN_OR_RAISE(auto messages, sink->Finish());
  internal::SnapshotHeader header;
  header.epoch = dictionary_epoch_;
  header.messages_length = static_cast<uint64_t>(messages->size());
  if (!snapshots_.empty()) {
    const Snapshot& previous = snapshots_.back();
    const shm::BlockHandle& h = previous.block.handle();
    header.previous_offset = h.offset;
    header.previous_length = h.length;
    header.previous_generation = h.generation;
    header.previous_descriptor = h.descriptor;
    header.previous_epoch = previous.epoch;
  }
  ALKAID_ASSIGN_OR_RAISE(shm::WritableBlock block,
                         bodies_->Allocate(sizeof(header) + header.messages_length));
  std::memcpy(block.data().data(), &header, sizeof(header));
  if (header.messages_length > 0) {
    std::memcpy(block.data().data() + sizeof(header), messages->data(), header.messages_length);
  }
  internal::DictionarySideband sideband;
  sideband.block = block.handle();
  sideband.epoch = dictionary_epoch_;
  const auto words = sideband.ToWords();
  ALKAID_RETURN_NOT_OK(ring_->SetSideband(words));
  snapshots_.push_back({dictionary_epoch_, std::move(block)});
  // An older snapshot goes (its producer reference dropped; readers that
  // loaded it keep theirs) once no batch of its epoch can be left in the
  // ring: such batches precede its successor's epoch, which is then a full
  // ring behind the next sequence.
  const uint64_t slots = ring_->options().slot_count;
  while (snapshots_.size() > internal::kKeptSnapshots + 1 ||
         (snapshots_.size() >= 2 && snapshots_[1].epoch + slots <= ring_->next_sequence())) {
    snapshots_.pop_front();
  }
  snapshot_stale_ = false;
  ++stats_.dictionary_snapshots;
  return Status::OK();
}

Result<std::unique_ptr<ShmBatchPool>> BatchPublisher::NewPool(uint64_t region_bytes) {
  return ShmBatchPool::Create(bodies_, region_bytes);
}

Status BatchPublisher::CheckSchema(const format::RecordBatch& batch) const {
  if (batch.schema() != schema_ && !batch.schema()->Equals(*schema_)) {
    return Status::Invalid("BatchPublisher: batch schema ", batch.schema()->ToString(),
                           " differs from the publisher's ", schema_->ToString());
  }
  return Status::OK();
}

Status BatchPublisher::Publish(const format::RecordBatch& batch, ShmBatchPool* pool) {
  if (pool == nullptr) return Status::Invalid("BatchPublisher::Publish: null pool");
  if (!pool->block_.valid()) {
    return Status::Invalid("BatchPublisher::Publish: region ", pool->handle().offset,
                           " of '", bodies_->name(), "' was already published");
  }
  if (pool->allocator_ != bodies_) {
    return Status::Invalid("BatchPublisher::Publish: the pool belongs to body segment '",
                           pool->allocator_->name(), "', the ring's bodies are in '",
                           bodies_->name(), "'");
  }
  ALKAID_RETURN_NOT_OK(CheckSchema(batch));
  ALKAID_RETURN_NOT_OK(SendDictionaries(batch));
  const uint64_t body_length = pool->Seal();
  // The metadata of a batch with the shape of the previous one is the same
  // bytes: reuse them instead of encoding a flatbuffer per publish.
  std::vector<int64_t>& shape = shape_scratch_;
  shape.clear();
  shape.push_back(batch.num_rows());
  shape.push_back(static_cast<int64_t>(body_length));
  // A batch's own custom metadata is part of its Message: such batches are
  // encoded each time (the shape does not cover it).
  bool cacheable = batch.metadata() == nullptr;
  for (int i = 0; i < batch.num_columns() && cacheable; ++i) {
    cacheable = AppendShape(*batch.column_data(i), pool->region_data(), &shape);
  }
  if (cacheable) {
    for (const CachedMetadata& c : metadata_cache_) {
      if (c.shape == shape) {
        ALKAID_RETURN_NOT_OK(PublishRegion(pool, body_length, c.metadata, 0));
        ++stats_.metadata_reused;
        return Status::OK();
      }
    }
  }
  ALKAID_ASSIGN_OR_RAISE(auto metadata,
                         format::ipc::GetRecordBatchMetadataForRegion(
                             batch, pool->region_data(), static_cast<int64_t>(body_length)));
  if (cacheable) {
    // A few shapes (a topic alternating between a handful of batch sizes)
    // all stay cached; beyond that, round-robin replacement.
    if (metadata_cache_.size() < internal::kShapeCacheEntries) {
      metadata_cache_.push_back({std::move(shape), metadata});
      shape = {};
    } else {
      CachedMetadata& victim = metadata_cache_[metadata_cache_next_];
      metadata_cache_next_ = (metadata_cache_next_ + 1) % internal::kShapeCacheEntries;
      victim.shape.swap(shape);
      victim.metadata = metadata;
    }
  }
  return PublishRegion(pool, body_length, metadata, 0);
}

Status BatchPublisher::PublishRegion(ShmBatchPool* pool, uint64_t body_length,
                                     const std::shared_ptr<format::Buffer>& metadata,
                                     uint16_t kind_flags) {
  const uint64_t md_size = static_cast<uint64_t>(metadata->size());
  if (md_size > UINT32_MAX) {
    return Status::CapacityError("BatchPublisher: ", md_size, "-byte metadata");
  }
  BatchDescriptor desc;
  desc.body_length = body_length;
  desc.metadata_length = static_cast<uint32_t>(md_size);
  desc.flags = kind_flags;
  const bool dictionary_message = (kind_flags & internal::kDictionaryMessage) != 0;
  desc.dictionary_epoch = dictionary_message ? 0 : dictionary_epoch_;
  const uint64_t capacity = ring_->options().inline_capacity;
  const bool inline_md = sizeof(BatchDescriptor) + md_size <= capacity;
  if (!inline_md) {
    ALKAID_ASSIGN_OR_RAISE(desc.metadata_offset,
                           pool->AppendTail({metadata->data(), md_size}));
    desc.flags |= internal::kMetadataInRegion;
  }
  // The slot payload: descriptor, then the metadata if it fits.
  std::vector<std::byte>& payload = slot_payload_;
  payload.resize(sizeof(BatchDescriptor) + (inline_md ? md_size : 0));
  std::memcpy(payload.data(), &desc, sizeof(desc));
  if (inline_md && md_size > 0) {
    std::memcpy(payload.data() + sizeof(desc), metadata->data(), md_size);
  }

  // The pool keeps a reference of its own (the region stays valid while it
  // lives); the one in its WritableBlock moves into the ring.
  ALKAID_RETURN_NOT_OK(bodies_->AddRef(pool->handle_));
  Status st = ring_->Publish(payload, pool->block_);
  if (!st.ok()) {
    (void)bodies_->Release(pool->handle_);
    return st;
  }
  pool->holds_extra_ref_ = true;
  if (!dictionary_message) ++stats_.batches;
  if (!inline_md) ++stats_.metadata_in_region;
  return Status::OK();
}

Status BatchPublisher::PublishCopy(const format::RecordBatch& batch) {
  ALKAID_RETURN_NOT_OK(CheckSchema(batch));
  ALKAID_RETURN_NOT_OK(SendDictionaries(batch));
  // The IPC writer's own layout: every buffer re-based and padded; its
  // metadata's offsets are relative to the body start, i.e. the region.
  ALKAID_ASSIGN_OR_RAISE(auto payload,
                         format::ipc::GetRecordBatchPayload(batch, RegionWriteOptions()));
  ALKAID_RETURN_NOT_OK(PublishPayloadCopy(payload, 0));
  ++stats_.copied_batches;
  stats_.copied_bytes += static_cast<uint64_t>(payload.body_length);
  return Status::OK();
}

Status BatchPublisher::PublishPayloadCopy(const format::ipc::IpcPayload& payload,
                                          uint16_t kind_flags) {
  const uint64_t body_length = static_cast<uint64_t>(payload.body_length);
  const uint64_t md_size = static_cast<uint64_t>(payload.metadata->size());
  uint64_t region = body_length;
  if (sizeof(BatchDescriptor) + md_size > ring_->options().inline_capacity) {
    region += (md_size + 63) & ~uint64_t{63};
  }
  ALKAID_ASSIGN_OR_RAISE(auto pool, NewPool(region == 0 ? 64 : region));
  // One copy, straight into shared memory, padding zeroed.
  uint8_t* dst = pool->region_data();
  if (body_length > 0) {
    ALKAID_ASSIGN_OR_RAISE(dst, pool->Allocate(static_cast<int64_t>(body_length)));
  }
  // Each buffer where the metadata says it is (payload.body_offsets; or one
  // after the other, padded to the alignment), zeros in between.
  const uint64_t align = static_cast<uint64_t>(payload.alignment);
  const bool placed = payload.body_offsets.size() == payload.body_buffers.size();
  uint64_t pos = 0;
  for (size_t i = 0; i < payload.body_buffers.size(); ++i) {
    const auto& buffer = payload.body_buffers[i];
    const uint64_t size = buffer == nullptr ? 0 : static_cast<uint64_t>(buffer->size());
    const uint64_t start = placed ? static_cast<uint64_t>(payload.body_offsets[i]) : pos;
    const uint64_t end = placed ? start + size : start + (size + align - 1) / align * align;
    if (start < pos || end > body_length) {
      return Status::Invalid("BatchPublisher: body buffer ", i, " at [", start, ", ", end,
                             ") does not fit after ", pos, " in the body of ", body_length,
                             " bytes");
    }
    std::memset(dst + pos, 0, start - pos);
    if (size > 0) std::memcpy(dst + start, buffer->data(), size);
    std::memset(dst + start + size, 0, end - start - size);
    pos = end;
  }
  std::memset(dst + pos, 0, body_length - pos);
  (void)pool->Seal();
  // The pool (and its extra reference) goes on return: the ring's reference
  // and the consumers' keep the region alive.
  return PublishRegion(pool.get(), body_length, payload.metadata, kind_flags);
}

}  // namespace alkaid::client

namespace alkaid::client {

Result<std::unique_ptr<FixedShapeWriter>> BatchPublisher::NewFixedShapeWriter(
    const format::RecordBatch& prototype, const ShmBatchPool& pool) {
  if (pool.allocator_ != bodies_) {
    return Status::Invalid("NewFixedShapeWriter: the pool belongs to body segment '",
                           pool.allocator_->name(), "', the ring's bodies are in '",
                           bodies_->name(), "'");
  }
  if (pool.sealed()) {
    return Status::Invalid("NewFixedShapeWriter: the prototype's pool (region ",
                           pool.handle().offset, " of '", bodies_->name(),
                           "') was already published");
  }
  ALKAID_RETURN_NOT_OK(CheckSchema(prototype));
  const uint8_t* region = pool.region_data();
  const uint64_t body_length = pool.used_bytes();
  std::vector<int64_t> shape;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (int i = 0; i < prototype.num_columns(); ++i) {
    const format::ArrayData& column = *prototype.column_data(i);
    if (!AppendShape(column, region, &shape)) {
      return Status::NotImplemented(
          "NewFixedShapeWriter: column ", i, " ('", prototype.schema()->field(i)->name(),
          "', ", column.type->ToString(),
          ") is not of a fixed shape: only fixed-width types with known null counts and "
          "zero offsets are");
    }
    AppendBufferSpans(column, region, &spans);
  }
  for (size_t k = 0; k < spans.size(); ++k) {
    const auto [offset, size] = spans[k];
    if (size > 0 && !pool.Contains(region + offset, size)) {
      return Status::Invalid("NewFixedShapeWriter: buffer ", k, " of the prototype (",
                             size, " bytes) lies outside its pool's region");
    }
    if (offset + size > body_length) {
      return Status::Invalid("NewFixedShapeWriter: buffer ", k, " of the prototype ends at ",
                             offset + size, ", past the ", body_length,
                             " bytes allocated from its pool");
    }
  }
  ALKAID_ASSIGN_OR_RAISE(auto metadata,
                         format::ipc::GetRecordBatchMetadataForRegion(
                             prototype, region, static_cast<int64_t>(body_length)));
  const uint64_t md_size = static_cast<uint64_t>(metadata->size());
  if (md_size > UINT32_MAX) {
    return Status::CapacityError("NewFixedShapeWriter: ", md_size, "-byte metadata");
  }
  std::unique_ptr<FixedShapeWriter> w(new FixedShapeWriter(this));
  w->body_length_ = body_length;
  for (const auto& [offset, size] : spans) w->buffers_.push_back({offset, size});
  BatchDescriptor desc;
  desc.body_length = body_length;
  desc.metadata_length = static_cast<uint32_t>(md_size);
  w->metadata_in_region_ = sizeof(BatchDescriptor) + md_size > ring_->options().inline_capacity;
  // The region image: the prototype's body, then (if it does not fit in a
  // slot) the metadata, padded like ShmBatchPool::AppendTail pads it.
  const uint64_t tail = w->metadata_in_region_ ? (md_size + 63) / 64 * 64 : 0;
  w->image_.assign(region, region + body_length);
  if (w->metadata_in_region_) {
    desc.metadata_offset = body_length;
    desc.flags = internal::kMetadataInRegion;
    w->image_.resize(body_length + tail, 0);
    std::memcpy(w->image_.data() + body_length, metadata->data(), md_size);
  }
  if (w->image_.empty()) w->image_.resize(64, 0);  // a block always has a distinct offset
  w->slot_payload_.resize(sizeof(BatchDescriptor) + (w->metadata_in_region_ ? 0 : md_size));
  std::memcpy(w->slot_payload_.data(), &desc, sizeof(desc));
  if (!w->metadata_in_region_ && md_size > 0) {
    std::memcpy(w->slot_payload_.data() + sizeof(desc), metadata->data(), md_size);
  }
  return w;
}

FixedShapeWriter::~FixedShapeWriter() = default;  // an unpublished block is released

Status FixedShapeWriter::Begin() {
  if (pending_) {
    return Status::Invalid("FixedShapeWriter::Begin: the region taken by the previous Begin (",
                           block_.handle().offset, " of '", publisher_->bodies_->name(),
                           "') was not published");
  }
  ALKAID_ASSIGN_OR_RAISE(block_, publisher_->bodies_->Allocate(image_.size()));
  std::memcpy(block_.data().data(), image_.data(), image_.size());
  pending_ = true;
  return Status::OK();
}

std::span<uint8_t> FixedShapeWriter::buffer(size_t i) {
  if (!pending_ || i >= buffers_.size()) return {};
  auto* base = reinterpret_cast<uint8_t*>(block_.data().data());
  return {base + buffers_[i].offset, static_cast<size_t>(buffers_[i].size)};
}

Status FixedShapeWriter::Publish() {
  if (!pending_) return Status::Invalid("FixedShapeWriter::Publish: no region; call Begin first");
  // The block's only reference moves into the ring: nothing else keeps the
  // region, so no extra reference is taken and dropped per batch.
  ALKAID_RETURN_NOT_OK(publisher_->ring_->Publish(slot_payload_, block_));
  pending_ = false;
  if (published_counter_ != nullptr) published_counter_->fetch_add(1, std::memory_order_relaxed);
  ++publisher_->stats_.batches;
  if (metadata_in_region_) ++publisher_->stats_.metadata_in_region;
  return Status::OK();
}

}  // namespace alkaid::client
