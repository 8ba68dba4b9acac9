#include "alkaid/client/batch_publisher.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "alkaid/format/bit_util.h"
#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/ipc/dictionary_tracker.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/message_template.h"
#include "alkaid/format/ipc/writer.h"
#include "batch_layout_internal.h"
#include "shm_batch_pool_internal.h"

namespace alkaid::client {

using internal::MessageKind;
using internal::RegionMetadata;
using internal::UserWord;

namespace {

using MessageNode = format::ipc::RecordBatchMessageTemplate::Node;

// Appends the shape of `data` to `out`: everything of an array that
// GetRecordBatchMetadataForRegion encodes (length, null count, and each
// buffer's position and size in the region), recursively. False if the
// metadata could depend on anything else: a type whose buffers are not all
// fixed-width (its encoding reads offsets), an unknown null count (counted
// from the bitmap), a non-zero offset (re-basing), a dictionary.
bool AppendShape(const format::ArrayData& data, const uint8_t* region, std::vector<int64_t>* out) {
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

// The shape at `at` (what AppendShape appends for a node) past the node
// `data` (its numbers, buffers and child count, not its children) if the
// node has it; null as soon as anything differs. Only for a column of the
// publisher's schema (RecordBatch::Make checked its type against the
// batch's schema, Publish the schema against its own) whose shape
// AppendShape accepted: its type then has the structural layout the shape
// needs and no dictionary, and the shape's null count is not negative, so
// none of that is tested again. Inlined into Publish's loop: most columns
// have no children. (The position goes in and out by value, so that it
// stays in a register.)
[[gnu::always_inline]] inline const int64_t* SameNodeShape(const format::ArrayData& data,
                                                           const uint8_t* region, const int64_t* p,
                                                           const int64_t* end) {
  const size_t n = data.buffers.size();
  if (end - p < static_cast<ptrdiff_t>(4 + 2 * n) || p[0] != data.length ||
      p[1] != data.null_count || p[2] != static_cast<int64_t>(n) || data.offset != 0) {
    return nullptr;
  }
  p += 3;
  for (const auto& b : data.buffers) {
    const int64_t where = b == nullptr ? -1 : b->data() - region;
    const int64_t size = b == nullptr ? -1 : b->size();
    if (p[0] != where || p[1] != size) return nullptr;
    p += 2;
  }
  if (*p++ != static_cast<int64_t>(data.child_data.size())) return nullptr;
  return p;
}

// SameNodeShape for `data` and, depth first, its children.
const int64_t* SameShape(const format::ArrayData& data, const uint8_t* region, const int64_t* at,
                         const int64_t* end) {
  at = SameNodeShape(data, region, at, end);
  for (const auto& child : data.child_data) {
    if (at == nullptr || child == nullptr) return nullptr;
    at = SameShape(*child, region, at, end);
  }
  return at;
}

// True if `batch`, built in a region at `region` and sealed at
// `body_length`, has the shape `last` (what AppendShape made for a batch
// published before): its Message is that batch's. Only for a batch of the
// publisher's schema without custom metadata (see SameNodeShape). Inlined
// into Publish's common case.
[[gnu::always_inline]] inline bool SameShapeAs(const std::vector<int64_t>& last,
                                               const format::RecordBatch& batch,
                                               const uint8_t* region, uint64_t body_length) {
  const int64_t* at = last.data();
  const int64_t* end = at + last.size();
  if (last.size() < 2 || at[0] != batch.num_rows() || at[1] != static_cast<int64_t>(body_length)) {
    return false;
  }
  at += 2;
  for (const format::ArrayDataPtr& c : batch.columns()) {
    const format::ArrayData& column = *c;
    at = column.child_data.empty() ? SameNodeShape(column, region, at, end)
                                   : SameShape(column, region, at, end);
    if (at == nullptr) return false;
  }
  return at == end;
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

// The IPC writer's field nodes and body buffers of `a`, for the layouts it
// encodes without reading anything else (fixed-width values, booleans,
// strings and binaries whose offsets start at 0, structs of those; no
// offset, no dictionary): appends each node's (length, null count) to
// `nodes` and each body buffer, in the writer's order and slicing, to
// `pieces` (an absent or empty buffer as {nullptr, 0}: the writer encodes
// both alike). The Message is a function of these numbers and sizes. False
// for anything else: such a batch is encoded in full, which also reports
// what is wrong with an invalid one.
bool AppendIpcPieces(const format::ArrayData& a, std::vector<MessageNode>* nodes,
                     std::vector<internal::BodyPiece>* pieces) {
  if (a.offset != 0 || a.dictionary != nullptr) return false;
  const format::DataType& storage = format::StorageType(*a.type);
  const format::TypeId id = storage.id();
  const auto add = [&](const std::shared_ptr<format::Buffer>& b, int64_t size) {
    if (b == nullptr || size == 0) {
      pieces->push_back({nullptr, 0});
      return true;
    }
    if (b->size() < size) return false;  // not a valid array: the full path says why
    pieces->push_back({b->data(), static_cast<uint64_t>(size)});
    return true;
  };
  if (id == format::TypeId::kNull || id == format::TypeId::kDictionary ||
      id == format::TypeId::kSparseUnion || id == format::TypeId::kDenseUnion ||
      id == format::TypeId::kRunEndEncoded || id == format::TypeId::kBinaryView ||
      id == format::TypeId::kStringView || a.buffers.empty()) {
    return false;
  }
  const int64_t nulls = a.GetNullCount();
  nodes->push_back({a.length, nulls});
  const int64_t bitmap = format::bit_util::BytesForBits(a.length);
  if (!add(nulls == 0 ? nullptr : a.buffers[0], bitmap)) return false;
  switch (id) {
    case format::TypeId::kBool:
      return a.buffers.size() == 2 && add(a.buffers[1], bitmap);
    case format::TypeId::kString:
    case format::TypeId::kBinary:
    case format::TypeId::kLargeString:
    case format::TypeId::kLargeBinary: {
      const bool large = id == format::TypeId::kLargeString || id == format::TypeId::kLargeBinary;
      const int64_t w = large ? 8 : 4;
      if (a.buffers.size() != 3 || a.length == 0 || a.buffers[1] == nullptr ||
          a.buffers[1]->size() < (a.length + 1) * w) {
        return false;
      }
      const uint8_t* offsets = a.buffers[1]->data();
      int64_t first = 0;
      int64_t last = 0;
      if (large) {
        std::memcpy(&first, offsets, 8);
        std::memcpy(&last, offsets + a.length * 8, 8);
      } else {
        int32_t f = 0;
        int32_t l = 0;
        std::memcpy(&f, offsets, 4);
        std::memcpy(&l, offsets + a.length * 4, 4);
        first = f;
        last = l;
      }
      if (first != 0 || last < 0) return false;
      return add(a.buffers[1], (a.length + 1) * w) && add(a.buffers[2], last);
    }
    case format::TypeId::kStruct:
      if (a.buffers.size() != 1) return false;
      for (const auto& child : a.child_data) {
        if (child == nullptr || child->length != a.length) return false;
        if (!AppendIpcPieces(*child, nodes, pieces)) return false;
      }
      return true;
    default: {
      const format::DataTypeLayout& layout = storage.layout();
      if (layout.buffers.size() != 2 || a.buffers.size() != 2 || !a.child_data.empty() ||
          layout.buffers[1].kind != format::DataTypeLayout::BufferKind::kFixedWidth) {
        return false;
      }
      return add(a.buffers[1], a.length * layout.buffers[1].byte_width);
    }
  }
}

// Copies `pieces` to `dst` at `offsets` (each after the one before, inside
// `body_length`), zeroing the padding around them.
Status LayBody(uint8_t* dst, uint64_t body_length, std::span<const internal::BodyPiece> pieces,
               std::span<const uint64_t> offsets) {
  uint64_t pos = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const uint64_t start = offsets[i];
    const uint64_t end = start + pieces[i].size;
    if (start < pos || end > body_length) {
      return Status::Invalid("BatchPublisher: body buffer ", i, " at [", start, ", ", end,
                             ") does not fit after ", pos, " in the body of ", body_length,
                             " bytes");
    }
    std::memset(dst + pos, 0, start - pos);
    if (pieces[i].size > 0) std::memcpy(dst + start, pieces[i].data, pieces[i].size);
    pos = end;
  }
  std::memset(dst + pos, 0, body_length - pos);
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<BatchPublisher>> BatchPublisher::Create(shm::ChannelProducer* channel,
                                                               format::SchemaPtr schema) {
  if (channel == nullptr || schema == nullptr) {
    return Status::Invalid("BatchPublisher: a channel and a schema are required");
  }
  if (channel->options().inline_capacity < sizeof(RegionMetadata)) {
    return Status::Invalid("BatchPublisher: channel '", channel->name(), "' has ",
                           channel->options().inline_capacity, " inline bytes per slot; at least ",
                           sizeof(RegionMetadata), " are needed");
  }
  format::ipc::DictionaryMemo ids;
  ALKAID_RETURN_NOT_OK(ids.AssignIds(*schema));
  if (ids.num_fields() > 0 && channel->options().accept_on_publish) {
    return Status::Invalid("BatchPublisher: channel '", channel->name(),
                           "' accepts consumers on publish; a schema with dictionary-encoded "
                           "fields needs accept_on_publish false (new consumers get a replay "
                           "of the dictionaries first)");
  }
  std::unique_ptr<BatchPublisher> publisher(new BatchPublisher(channel, std::move(schema)));
  if (ids.num_fields() > 0) {
    // Deltas when a dictionary only grows; replacements otherwise (a
    // channel is a stream: readers replace their dictionary).
    // The batches' dictionaries may live in a pool's region, which goes
    // with the pool: the tracker keeps its own copies.
    format::ipc::DictionaryTrackerOptions tracking;
    tracking.copy_to = format::default_memory_pool();
    publisher->dictionaries_ = std::make_unique<format::ipc::DictionaryTracker>(ids, tracking);
  }
  return publisher;
}

BatchPublisher::BatchPublisher(shm::ChannelProducer* channel, format::SchemaPtr schema)
    : channel_(channel),
      pool_cache_(ShmBatchPool::NewCache()),
      schema_(std::move(schema)),
      accept_on_publish_(channel->options().accept_on_publish),
      inline_capacity_(channel->options().inline_capacity) {}

BatchPublisher::~BatchPublisher() { ShmBatchPool::DropCache(pool_cache_); }

namespace {

format::ipc::IpcWriteOptions RegionWriteOptions() {
  format::ipc::IpcWriteOptions options;
  options.alignment = 64;
  return options;
}

}  // namespace

uint64_t BatchPublisher::UserWordFor(uint64_t body_length, MessageKind kind, bool in_region) const {
  UserWord u;
  u.body_length = body_length;
  u.kind = static_cast<uint8_t>(kind);
  u.metadata_in_region = in_region;
  u.dictionary_generation = static_cast<uint16_t>(dictionary_generation_);
  return u.Pack();
}

Status BatchPublisher::SendDictionaries(const format::RecordBatch& batch) {
  // A channel that does not accept consumers on publish leaves it to us.
  // Consumers accepted now start at the next message: the replay below, at
  // the latest, reaches them before the batch.
  if (!channel_->options().accept_on_publish) (void)channel_->AcceptConsumers();
  if (dictionaries_ == nullptr) return Status::OK();
  ALKAID_ASSIGN_OR_RAISE(auto changes, dictionaries_->Diff(batch));
  for (const format::ipc::DictionaryChange& change : changes) {
    if (change.values != nullptr) {
      ALKAID_ASSIGN_OR_RAISE(
          auto payload, format::ipc::GetDictionaryPayload(change.id, change.is_delta, change.values,
                                                          RegionWriteOptions()));
      // The message, and every one after it, carries the generation of
      // the state that includes it.
      ++dictionary_generation_;
      Status st = PublishPayloadCopy(payload, MessageKind::kDictionary);
      if (!st.ok()) {
        --dictionary_generation_;  // nothing went out
        return st;
      }
      ++stats_.dictionary_batches;
      if (change.is_delta) ++stats_.dictionary_deltas;
    }
    // Recorded once published: a failed publish is retried by the next call.
    ALKAID_RETURN_NOT_OK(dictionaries_->Commit(change));
  }
  const shm::ChannelStats counters = channel_->stats();
  // A consumer accepted since the last batch needs the state now. After
  // drops, one that lost a dictionary message needs it too (one that did
  // not sees the same generation and goes on): replayed at most once per
  // quarter of the slots, since a stalled consumer makes the channel drop
  // at every publish.
  const bool joined = counters.consumers_accepted != accepted_seen_;
  const uint64_t now = channel_->next_sequence();
  const bool gap = counters.dropped != dropped_seen_ &&
                   now - last_replay_ >= std::max<uint64_t>(1, channel_->options().slot_count / 4);
  if (!joined && !gap) return Status::OK();
  // Someone does not know the state: every current dictionary, whole,
  // nested ones first (as the tracker orders them), then the end marker.
  // Consumers that know the state skip them.
  for (const auto& [id, dictionary] : dictionaries_->current()) {
    ALKAID_ASSIGN_OR_RAISE(auto payload, format::ipc::GetDictionaryPayload(id, false, dictionary,
                                                                           RegionWriteOptions()));
    ALKAID_RETURN_NOT_OK(PublishPayloadCopy(payload, MessageKind::kReplay));
  }
  ALKAID_RETURN_NOT_OK(channel_->Publish({}, UserWordFor(0, MessageKind::kReplayEnd, false)));
  ++messages_;
  ++stats_.dictionary_replays;
  // Recorded once sent: a failure above replays again at the next batch.
  accepted_seen_ = counters.consumers_accepted;
  dropped_seen_ = counters.dropped;
  last_replay_ = now;
  return Status::OK();
}

Result<std::unique_ptr<ShmBatchPool>> BatchPublisher::NewPool(uint64_t region_bytes) {
  return ShmBatchPool::Lend(pool_cache_, channel_, region_bytes);
}

Status BatchPublisher::CheckSchema(const format::RecordBatch& batch) const {
  if (batch.schema() != schema_ && !batch.schema()->Equals(*schema_)) {
    return Status::Invalid("BatchPublisher: batch schema ", batch.schema()->ToString(),
                           " differs from the publisher's ", schema_->ToString());
  }
  return Status::OK();
}

Status BatchPublisher::Publish(const format::RecordBatch& batch, ShmBatchPool* pool) {
  // The common case, on its own: a pool of this channel not published yet,
  // a batch of the publisher's own schema (a builder's batch made with it),
  // nothing to send before it (no dictionaries, a channel that accepts its
  // consumers itself), and the shape of the batch before, compared in
  // place: sent by its shape id, nothing inline, nothing appended to the
  // region, the user word made with the shape. Anything else, every error
  // included, is PublishGeneral's.
  if (pool == nullptr || pool->published_ || pool->channel_ != channel_ ||
      batch.schema() != schema_ || dictionaries_ != nullptr || !accept_on_publish_) {
    return PublishGeneral(batch, pool);
  }
  const uint64_t body_length = pool->Seal();
  // shapes_ only grows, and last_shape_ is one of its entries once it has
  // any: not empty means last_shape_ is in range.
  if (shapes_.empty() || batch.metadata() != nullptr ||
      !SameShapeAs(shapes_[last_shape_].shape, batch, pool->region_data(), body_length)) {
    return PublishShape(batch, pool, body_length);
  }
  const CachedShape& cached = shapes_[last_shape_];
  ALKAID_RETURN_NOT_OK(channel_->Publish({}, pool->loan(), cached.user, cached.id));
  pool->published_ = true;
  ++messages_;
  ++stats_.batches;
  ++stats_.metadata_reused;
  return Status::OK();
}

Status BatchPublisher::PublishGeneral(const format::RecordBatch& batch, ShmBatchPool* pool) {
  if (pool == nullptr) return Status::Invalid("BatchPublisher::Publish: null pool");
  if (pool->published_) {
    return Status::Invalid("BatchPublisher::Publish: region ", pool->region_offset(), " of '",
                           channel_->name(), "' was already published");
  }
  if (pool->channel_ != channel_) {
    return Status::Invalid("BatchPublisher::Publish: the pool belongs to channel '",
                           pool->channel_name(), "', not to '", channel_->name(), "'");
  }
  if (batch.schema() != schema_) ALKAID_RETURN_NOT_OK(CheckSchema(batch));
  // Nothing to send without dictionaries on a channel that accepts its
  // consumers itself: no call.
  if (dictionaries_ != nullptr || !accept_on_publish_)
    ALKAID_RETURN_NOT_OK(SendDictionaries(batch));
  const uint64_t body_length = pool->Seal();
  if (!shapes_.empty() && batch.metadata() == nullptr &&
      SameShapeAs(shapes_[last_shape_].shape, batch, pool->region_data(), body_length)) {
    const CachedShape& cached = shapes_[last_shape_];
    const uint64_t user = dictionaries_ == nullptr
                              ? cached.user
                              : UserWordFor(body_length, MessageKind::kRecordBatch, false);
    ALKAID_RETURN_NOT_OK(channel_->Publish({}, pool->loan(), user, cached.id));
    pool->published_ = true;
    ++messages_;
    ++stats_.batches;
    ++stats_.metadata_reused;
    return Status::OK();
  }
  return PublishShape(batch, pool, body_length);
}

Status BatchPublisher::PublishShape(const format::RecordBatch& batch, ShmBatchPool* pool,
                                    uint64_t body_length) {
  // The metadata of a batch with the shape of one published before is the
  // same bytes, already in the channel's shape table: send its id.
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
    for (size_t k = 0; k < shapes_.size(); ++k) {
      if (shapes_[k].shape == shape) {
        ALKAID_RETURN_NOT_OK(
            PublishRegion(pool, body_length, {}, shapes_[k].id, MessageKind::kRecordBatch));
        ++stats_.metadata_reused;
        last_shape_ = k;
        return Status::OK();
      }
    }
  }
  // Numbers of its own (a variable-width column's lengths change from
  // batch to batch): the schema's Message template, filled.
  if (!cacheable && batch.metadata() == nullptr && dictionaries_ == nullptr) {
    ALKAID_ASSIGN_OR_RAISE(const bool filled, PublishFilled(batch, pool, body_length));
    if (filled) return Status::OK();
  }
  ALKAID_ASSIGN_OR_RAISE(auto metadata,
                         format::ipc::GetRecordBatchMetadataForRegion(
                             batch, pool->region_data(), static_cast<int64_t>(body_length)));
  const std::span<const uint8_t> md(metadata->data(), static_cast<size_t>(metadata->size()));
  uint32_t id = 0;
  if (cacheable && !shape_table_full_) {
    auto added = channel_->AddShape(std::as_bytes(md));
    if (added.ok()) {
      id = *added;
      shapes_.push_back(
          {std::move(shape), id, UserWordFor(body_length, MessageKind::kRecordBatch, false)});
      last_shape_ = shapes_.size() - 1;
      shape = {};
    } else if (added.status().code() == StatusCode::kCapacityError) {
      shape_table_full_ = true;  // from now on, new shapes travel inline
    } else {
      return added.status();
    }
  }
  return PublishRegion(pool, body_length, id != 0 ? std::span<const uint8_t>{} : md, id,
                       MessageKind::kRecordBatch);
}

Status BatchPublisher::FillMessage(int64_t num_rows, uint64_t body_length) {
  if (message_template_ == nullptr || message_template_->num_nodes() != node_scratch_.size() ||
      message_template_->num_buffers() != range_scratch_.size()) {
    ALKAID_ASSIGN_OR_RAISE(auto made, format::ipc::RecordBatchMessageTemplate::Make(
                                          node_scratch_.size(), range_scratch_.size()));
    message_template_ = std::make_unique<format::ipc::RecordBatchMessageTemplate>(std::move(made));
  }
  filled_.resize(message_template_->size());
  message_template_->Fill(num_rows, static_cast<int64_t>(body_length), node_scratch_.data(),
                          range_scratch_.data(), filled_.data());
  return Status::OK();
}

Result<bool> BatchPublisher::PublishFilled(const format::RecordBatch& batch, ShmBatchPool* pool,
                                           uint64_t body_length) {
  node_scratch_.clear();
  copy_pieces_.clear();
  for (int i = 0; i < batch.num_columns(); ++i) {
    if (!AppendIpcPieces(*batch.column_data(i), &node_scratch_, &copy_pieces_)) return false;
  }
  const uint8_t* region = pool->region_data();
  range_scratch_.clear();
  for (const internal::BodyPiece& p : copy_pieces_) {
    if (p.data == nullptr) {
      range_scratch_.push_back({0, 0});
      continue;
    }
    // A buffer outside the body or unaligned: the full encoding says why.
    if (p.data < region || p.size > body_length ||
        static_cast<uint64_t>(p.data - region) > body_length - p.size ||
        (p.data - region) % 8 != 0) {
      return false;
    }
    range_scratch_.push_back({p.data - region, static_cast<int64_t>(p.size)});
  }
  ALKAID_RETURN_NOT_OK(FillMessage(batch.num_rows(), body_length));
  ALKAID_RETURN_NOT_OK(PublishRegion(pool, body_length, filled_, 0, MessageKind::kRecordBatch));
  ++stats_.metadata_filled;
  return true;
}

Status BatchPublisher::PublishRegion(ShmBatchPool* pool, uint64_t body_length,
                                     std::span<const uint8_t> metadata, uint32_t shape,
                                     MessageKind kind) {
  const uint64_t capacity = inline_capacity_;
  bool in_region = false;
  std::span<const std::byte> payload;
  if (shape == 0) {
    if (metadata.size() <= capacity) {
      payload = std::as_bytes(metadata);
    } else {
      RegionMetadata where;
      ALKAID_ASSIGN_OR_RAISE(where.offset, pool->AppendTail(metadata));
      where.length = metadata.size();
      slot_payload_.resize(sizeof(where));
      std::memcpy(slot_payload_.data(), &where, sizeof(where));
      payload = slot_payload_;
      in_region = true;
    }
  }
  // The region keeps the loan: it stays valid while the pool or any of
  // its buffers lives.
  Status published =
      channel_->Publish(payload, pool->loan(), UserWordFor(body_length, kind, in_region), shape);
  if (!published.ok()) {
    // TimedOut or Cancelled waiting for room: the pool is left as it was
    // (sealed at the same top), so that the caller may publish it again.
    if (in_region) pool->DropTail(body_length);
    return published;
  }
  pool->published_ = true;
  ++messages_;
  if (kind == MessageKind::kRecordBatch) ++stats_.batches;
  if (in_region) ++stats_.metadata_in_region;
  return Status::OK();
}

Status BatchPublisher::PublishCopy(const format::RecordBatch& batch) {
  ALKAID_RETURN_NOT_OK(CheckSchema(batch));
  ALKAID_RETURN_NOT_OK(SendDictionaries(batch));
  // A batch whose encoding is a function of its copy shape (the numbers of
  // its Message): laid out as the IPC writer would, its Message the
  // schema's template filled (PublishCopyFilled); once that Message is in
  // the channel's shape table, its body is laid out as the plan says, and
  // nothing is filled either.
  std::vector<int64_t>& key = shape_scratch_;
  key.clear();
  node_scratch_.clear();
  copy_pieces_.clear();
  bool walked = dictionaries_ == nullptr && batch.metadata() == nullptr;
  for (int i = 0; i < batch.num_columns() && walked; ++i) {
    walked = AppendIpcPieces(*batch.column_data(i), &node_scratch_, &copy_pieces_);
  }
  if (!walked) {
    // Anything else: the IPC writer's own encoding (every buffer re-based
    // and padded; its metadata's offsets relative to the body start, i.e.
    // the region).
    ALKAID_ASSIGN_OR_RAISE(auto payload,
                           format::ipc::GetRecordBatchPayload(batch, RegionWriteOptions()));
    ALKAID_RETURN_NOT_OK(PublishPayloadCopy(payload, MessageKind::kRecordBatch));
    ++stats_.copied_batches;
    stats_.copied_bytes += static_cast<uint64_t>(payload.body_length);
    return Status::OK();
  }
  key.push_back(batch.num_rows());
  for (const MessageNode& n : node_scratch_) {
    key.push_back(n.length);
    key.push_back(n.null_count);
  }
  for (const internal::BodyPiece& p : copy_pieces_) key.push_back(static_cast<int64_t>(p.size));
  for (const CopyPlan& plan : copy_plans_) {
    if (plan.key != key) continue;
    ALKAID_ASSIGN_OR_RAISE(auto pool, NewPool(plan.body_length == 0 ? 64 : plan.body_length));
    if (plan.body_length > 0) {
      ALKAID_ASSIGN_OR_RAISE(uint8_t * dst, pool->Allocate(static_cast<int64_t>(plan.body_length)));
      ALKAID_RETURN_NOT_OK(LayBody(dst, plan.body_length, copy_pieces_, plan.offsets));
    }
    (void)pool->Seal();
    ALKAID_RETURN_NOT_OK(
        PublishRegion(pool.get(), plan.body_length, {}, plan.id, MessageKind::kRecordBatch));
    ++stats_.metadata_reused;
    ++stats_.copied_batches;
    stats_.copied_bytes += plan.body_length;
    return Status::OK();
  }
  return PublishCopyFilled(batch, key);
}

Status BatchPublisher::PublishCopyFilled(const format::RecordBatch& batch,
                                         const std::vector<int64_t>& key) {
  // The IPC writer's layout (each buffer at the next multiple of 64, the
  // body padded to one), and the schema's Message template filled with it:
  // what GetRecordBatchPayload would encode, without encoding it.
  constexpr uint64_t kAlign = 64;
  const auto pad = [](uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
  range_scratch_.clear();
  payload_offsets_.clear();
  uint64_t pos = 0;
  for (const internal::BodyPiece& p : copy_pieces_) {
    pos = pad(pos);
    payload_offsets_.push_back(pos);
    range_scratch_.push_back({static_cast<int64_t>(pos), static_cast<int64_t>(p.size)});
    pos += p.size;
  }
  const uint64_t body_length = pad(pos);
  ALKAID_RETURN_NOT_OK(FillMessage(batch.num_rows(), body_length));
  uint64_t region = body_length;
  if (filled_.size() > channel_->options().inline_capacity) region += pad(filled_.size());
  ALKAID_ASSIGN_OR_RAISE(auto pool, NewPool(region == 0 ? 64 : region));
  if (body_length > 0) {
    ALKAID_ASSIGN_OR_RAISE(uint8_t * dst, pool->Allocate(static_cast<int64_t>(body_length)));
    ALKAID_RETURN_NOT_OK(LayBody(dst, body_length, copy_pieces_, payload_offsets_));
  }
  (void)pool->Seal();
  const uint32_t shape = CopiedShapeId(filled_);
  ALKAID_RETURN_NOT_OK(PublishRegion(pool.get(), body_length,
                                     shape != 0 ? std::span<const uint8_t>{} : filled_, shape,
                                     MessageKind::kRecordBatch));
  ++stats_.copied_batches;
  stats_.copied_bytes += body_length;
  if (shape != 0) {
    ++stats_.metadata_reused;
    // Its Message went by id: the next batch of the same copy shape needs
    // no filling either.
    CopyPlan plan;
    plan.key = key;
    plan.id = shape;
    plan.body_length = body_length;
    plan.offsets = payload_offsets_;
    copy_plans_.push_back(std::move(plan));
  } else {
    ++stats_.metadata_filled;
  }
  return Status::OK();
}

Status BatchPublisher::PublishPayloadCopy(const format::ipc::IpcPayload& payload, MessageKind kind,
                                          uint32_t* shape_out) {
  const uint64_t body_length = static_cast<uint64_t>(payload.body_length);
  const uint64_t md_size = static_cast<uint64_t>(payload.metadata->size());
  uint64_t region = body_length;
  if (md_size > channel_->options().inline_capacity) region += (md_size + 63) & ~uint64_t{63};
  ALKAID_ASSIGN_OR_RAISE(auto pool, NewPool(region == 0 ? 64 : region));
  // One copy, straight into shared memory, padding zeroed: each buffer where
  // the metadata says it is (payload.body_offsets; or one after the other,
  // padded to the alignment).
  if (body_length > 0) {
    ALKAID_ASSIGN_OR_RAISE(uint8_t * dst, pool->Allocate(static_cast<int64_t>(body_length)));
    const uint64_t align = static_cast<uint64_t>(payload.alignment);
    const bool placed = payload.body_offsets.size() == payload.body_buffers.size();
    std::vector<internal::BodyPiece>& pieces = payload_pieces_;
    std::vector<uint64_t>& offsets = payload_offsets_;
    pieces.clear();
    offsets.clear();
    uint64_t pos = 0;
    for (size_t i = 0; i < payload.body_buffers.size(); ++i) {
      const auto& buffer = payload.body_buffers[i];
      const uint64_t size = buffer == nullptr ? 0 : static_cast<uint64_t>(buffer->size());
      const uint64_t start = placed ? static_cast<uint64_t>(payload.body_offsets[i]) : pos;
      pieces.push_back({buffer == nullptr ? nullptr : buffer->data(), size});
      offsets.push_back(start);
      pos = placed ? start + size : start + (size + align - 1) / align * align;
    }
    ALKAID_RETURN_NOT_OK(LayBody(dst, body_length, pieces, offsets));
  }
  (void)pool->Seal();
  const std::span<const uint8_t> md(payload.metadata->data(),
                                    static_cast<size_t>(payload.metadata->size()));
  const uint32_t shape = kind == MessageKind::kRecordBatch ? CopiedShapeId(md) : 0;
  // The pool (and its loan) goes on return: the channel keeps the region
  // until every consumer returned it.
  ALKAID_RETURN_NOT_OK(PublishRegion(pool.get(), body_length,
                                     shape != 0 ? std::span<const uint8_t>{} : md, shape, kind));
  if (shape != 0) ++stats_.metadata_reused;
  if (shape_out != nullptr) *shape_out = shape;
  return Status::OK();
}

// The copy's Message is the same bytes for every batch of one shape (row
// count, null counts, buffer sizes; and custom metadata): the second batch
// in a row with those bytes puts them in the channel's shape table, and
// every later one sends the id, so that consumers take their cached plan.
// Shapes that never repeat stay inline and take no entry.
uint32_t BatchPublisher::CopiedShapeId(std::span<const uint8_t> metadata) {
  const auto same = [metadata](const std::vector<uint8_t>& bytes) {
    return bytes.size() == metadata.size() &&
           std::memcmp(bytes.data(), metadata.data(), metadata.size()) == 0;
  };
  for (const CopiedShape& c : copied_shapes_) {
    if (same(c.metadata)) return c.id;
  }
  if (shape_table_full_ || !same(last_inline_)) {
    last_inline_.assign(metadata.begin(), metadata.end());
    return 0;
  }
  auto added = channel_->AddShape(std::as_bytes(metadata));
  if (!added.ok()) {
    // Full (CapacityError: new shapes travel inline from now on) or refused:
    // the batch goes inline either way.
    if (added.status().code() == StatusCode::kCapacityError) shape_table_full_ = true;
    return 0;
  }
  copied_shapes_.push_back({std::move(last_inline_), *added});
  last_inline_ = {};
  return *added;
}

}  // namespace alkaid::client

namespace alkaid::client {

Result<std::unique_ptr<FixedShapeWriter>> BatchPublisher::NewFixedShapeWriter(
    const format::RecordBatch& prototype, const ShmBatchPool& pool,
    const FixedShapeWriterOptions& options) {
  if (pool.channel_ != channel_) {
    return Status::Invalid("NewFixedShapeWriter: the pool belongs to channel '",
                           pool.channel_name(), "', not to '", channel_->name(), "'");
  }
  if (pool.sealed()) {
    return Status::Invalid("NewFixedShapeWriter: the prototype's pool (region ",
                           pool.region_offset(), " of '", channel_->name(),
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
          "NewFixedShapeWriter: column ", i, " ('", prototype.schema()->field(i)->name(), "', ",
          column.type->ToString(),
          ") is not of a fixed shape: only fixed-width types with known null counts and "
          "zero offsets are");
    }
    AppendBufferSpans(column, region, &spans);
  }
  for (size_t k = 0; k < spans.size(); ++k) {
    const auto [offset, size] = spans[k];
    if (size > 0 && !pool.Contains(region + offset, size)) {
      return Status::Invalid("NewFixedShapeWriter: buffer ", k, " of the prototype (", size,
                             " bytes) lies outside its pool's region");
    }
    if (offset + size > body_length) {
      return Status::Invalid("NewFixedShapeWriter: buffer ", k, " of the prototype ends at ",
                             offset + size, ", past the ", body_length,
                             " bytes allocated from its pool");
    }
  }
  ALKAID_ASSIGN_OR_RAISE(auto metadata, format::ipc::GetRecordBatchMetadataForRegion(
                                            prototype, region, static_cast<int64_t>(body_length)));
  const uint64_t md_size = static_cast<uint64_t>(metadata->size());
  std::unique_ptr<FixedShapeWriter> w(new FixedShapeWriter(this));
  w->accept_on_publish_ = channel_->options().accept_on_publish;
  w->body_length_ = body_length;
  for (const auto& [offset, size] : spans) w->buffers_.push_back({offset, size});
  // The prototype's Message goes into the shape table: each batch is then
  // one slot line. With the table full, it travels inline or in the region.
  const std::span<const uint8_t> md(metadata->data(), static_cast<size_t>(md_size));
  uint32_t shape_id = 0;
  if (!shape_table_full_) {
    auto added = channel_->AddShape(std::as_bytes(md));
    if (added.ok()) {
      shape_id = *added;
    } else if (added.status().code() == StatusCode::kCapacityError) {
      shape_table_full_ = true;
    } else {
      return added.status();
    }
  }
  const uint64_t capacity = channel_->options().inline_capacity;
  w->metadata_in_region_ = shape_id == 0 && md_size > capacity;
  // The region: the prototype's body, then (if it does not fit in a slot)
  // the metadata, padded like ShmBatchPool::AppendTail pads it; at least 64
  // bytes (a block always has a distinct offset). The image keeps it from
  // the body on, or from the metadata on without the prototype.
  const uint64_t tail = w->metadata_in_region_ ? (md_size + 63) / 64 * 64 : 0;
  w->region_bytes_ = std::max<uint64_t>(body_length + tail, 64);
  w->image_offset_ = options.keep_prototype ? 0 : std::min(body_length, w->region_bytes_);
  w->image_.assign(w->region_bytes_ - w->image_offset_, 0);
  if (w->image_offset_ < body_length) {
    std::memcpy(w->image_.data(), region, body_length - w->image_offset_);
  }
  // Begin(Fill::kNone) copies from the body's end on: nothing when the
  // region is the body alone.
  w->none_copies_nothing_ = body_length >= w->region_bytes_;
  // The slot's inline bytes: the metadata's place in the region, or the
  // metadata itself, or nothing (a shape id).
  std::vector<std::byte> payload;
  if (w->metadata_in_region_) {
    std::memcpy(w->image_.data() + (body_length - w->image_offset_), metadata->data(), md_size);
    RegionMetadata where{body_length, md_size};
    payload.resize(sizeof(where));
    std::memcpy(payload.data(), &where, sizeof(where));
  } else if (shape_id == 0) {
    const auto bytes = std::as_bytes(md);
    payload.assign(bytes.begin(), bytes.end());
  }
  ALKAID_ASSIGN_OR_RAISE(
      w->channel_writer_,
      channel_->NewWriter(
          w->region_bytes_, payload,
          UserWordFor(body_length, MessageKind::kRecordBatch, w->metadata_in_region_), shape_id));
  w->UpdatePlainPublish();
  return w;
}

FixedShapeWriter::~FixedShapeWriter() = default;  // an unpublished block is released

Status FixedShapeWriter::BeginCopying(Fill fill) {
  if (channel_writer_.loaned()) {
    return Status::Invalid("FixedShapeWriter::Begin: the region taken by the previous Begin (",
                           channel_writer_.offset(), " of '", publisher_->channel_->name(),
                           "') was not published");
  }
  if (fill == Fill::kPrototype && image_offset_ != 0) {
    return Status::Invalid(
        "FixedShapeWriter::Begin(Fill::kPrototype): the writer keeps no prototype "
        "(FixedShapeWriterOptions::keep_prototype was false); use Fill::kNone");
  }
  ALKAID_RETURN_NOT_OK(channel_writer_.Loan());
  // Without the prototype's body, only the metadata the region carries.
  const uint64_t from = fill == Fill::kPrototype ? 0 : std::min(body_length_, region_bytes_);
  if (from < region_bytes_) {
    std::memcpy(channel_writer_.data().data() + from, image_.data() + (from - image_offset_),
                region_bytes_ - from);
  }
  return Status::OK();
}

// Both Publish calls' general way: the region moves into the channel
// (`held` null: nothing else keeps it) or goes on being held by `*held`.
Status FixedShapeWriter::PublishTo(shm::ChannelLoan* held) {
  if (!channel_writer_.loaned()) {
    return Status::Invalid("FixedShapeWriter::Publish: no region; call Begin first");
  }
  if (!accept_on_publish_) (void)publisher_->channel_->AcceptConsumers();
  if (held == nullptr) {
    ALKAID_RETURN_NOT_OK(channel_writer_.Publish());
  } else {
    ALKAID_RETURN_NOT_OK(channel_writer_.Publish(held));
  }
  if (producer_ != nullptr) internal::WriterPublished(producer_);
  ++publisher_->stats_.batches;
  ++publisher_->messages_;
  if (metadata_in_region_) ++publisher_->stats_.metadata_in_region;
  return Status::OK();
}

Status FixedShapeWriter::Publish(shm::ChannelLoan* held) { return PublishTo(held); }

}  // namespace alkaid::client
