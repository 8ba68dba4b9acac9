#include "alkaid/client/batch_publisher.h"

#include <cstring>
#include <utility>
#include <vector>

#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/ipc/writer.h"
#include "batch_descriptor_internal.h"

namespace alkaid::client {

using internal::BatchDescriptor;

namespace {

Status RefuseDictionaries(const format::Schema& schema) {
  format::ipc::DictionaryMemo memo;
  ALKAID_RETURN_NOT_OK(memo.AssignIds(schema));
  if (memo.num_fields() > 0) {
    return Status::NotImplemented(
        "batches with dictionary-encoded fields cannot be published through a ring yet: ",
        memo.num_fields(), " field(s) need dictionary exchange, which the broker provides");
  }
  return Status::OK();
}

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
  ALKAID_RETURN_NOT_OK(RefuseDictionaries(*schema));
  return std::unique_ptr<BatchPublisher>(new BatchPublisher(ring, bodies, std::move(schema)));
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
  const uint64_t body_length = pool->Seal();
  // The metadata of a batch with the shape of the previous one is the same
  // bytes: reuse them instead of encoding a flatbuffer per publish.
  std::vector<int64_t>& shape = shape_scratch_;
  shape.clear();
  shape.push_back(batch.num_rows());
  shape.push_back(static_cast<int64_t>(body_length));
  bool cacheable = true;
  for (int i = 0; i < batch.num_columns() && cacheable; ++i) {
    cacheable = AppendShape(*batch.column_data(i), pool->region_data(), &shape);
  }
  if (cacheable) {
    for (const CachedMetadata& c : metadata_cache_) {
      if (c.shape == shape) {
        ALKAID_RETURN_NOT_OK(PublishRegion(pool, body_length, c.metadata));
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
  return PublishRegion(pool, body_length, metadata);
}

Status BatchPublisher::PublishRegion(ShmBatchPool* pool, uint64_t body_length,
                                     const std::shared_ptr<format::Buffer>& metadata) {
  const uint64_t md_size = static_cast<uint64_t>(metadata->size());
  if (md_size > UINT32_MAX) {
    return Status::CapacityError("BatchPublisher: ", md_size, "-byte metadata");
  }
  BatchDescriptor desc;
  desc.body_length = body_length;
  desc.metadata_length = static_cast<uint32_t>(md_size);
  const uint64_t capacity = ring_->options().inline_capacity;
  const bool inline_md = sizeof(BatchDescriptor) + md_size <= capacity;
  if (!inline_md) {
    ALKAID_ASSIGN_OR_RAISE(desc.metadata_offset,
                           pool->AppendTail({metadata->data(), md_size}));
    desc.flags = internal::kMetadataInRegion;
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
  ++stats_.batches;
  if (!inline_md) ++stats_.metadata_in_region;
  return Status::OK();
}

Status BatchPublisher::PublishCopy(const format::RecordBatch& batch) {
  ALKAID_RETURN_NOT_OK(CheckSchema(batch));
  // The IPC writer's own layout: every buffer re-based and padded; its
  // metadata's offsets are relative to the body start, i.e. the region.
  format::ipc::IpcWriteOptions options;
  options.alignment = 64;
  ALKAID_ASSIGN_OR_RAISE(auto payload, format::ipc::GetRecordBatchPayload(batch, options));
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
  const uint64_t align = static_cast<uint64_t>(payload.alignment);
  uint64_t pos = 0;
  for (const auto& buffer : payload.body_buffers) {
    const uint64_t size = buffer == nullptr ? 0 : static_cast<uint64_t>(buffer->size());
    const uint64_t padded = (size + align - 1) / align * align;
    if (pos + padded > body_length) {
      return Status::Invalid("BatchPublisher::PublishCopy: body buffers (", pos + padded,
                             " bytes so far) exceed the declared body length ", body_length);
    }
    if (size > 0) std::memcpy(dst + pos, buffer->data(), size);
    std::memset(dst + pos + size, 0, padded - size);
    pos += padded;
  }
  std::memset(dst + pos, 0, body_length - pos);
  (void)pool->Seal();
  ALKAID_RETURN_NOT_OK(PublishRegion(pool.get(), body_length, payload.metadata));
  ++stats_.copied_batches;
  stats_.copied_bytes += body_length;
  // The pool (and its extra reference) goes now: the ring's reference and
  // the consumers' keep the region alive.
  return Status::OK();
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
