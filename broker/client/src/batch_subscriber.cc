#include "alkaid/client/batch_subscriber.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/message.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/validate.h"
#include "batch_descriptor_internal.h"

namespace alkaid::client {

using internal::MessageKind;
using internal::RegionMetadata;
using internal::UserWord;

namespace {

// The body of a received batch: a view of its shared block that holds the
// block (the producer does not reuse it while this lives; the block keeps
// the consumer's mappings). One allocation per message.
class BodyBuffer : public format::Buffer {
 public:
  BodyBuffer(shm::ChannelBlock block, uint64_t length) : block_(std::move(block)) {
    data_ = const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(block_.data().data()));
    size_ = static_cast<int64_t>(length);
    capacity_ = size_;
  }

 private:
  shm::ChannelBlock block_;
};

}  // namespace

const char* VerificationName(Verification v) {
  switch (v) {
    case Verification::kStructure:
      return "structure";
    case Verification::kFull:
      return "full";
    case Verification::kPrivateCopy:
      return "private-copy";
  }
  return "?";
}

// What decoding one Message flatbuffer produced, kept so that the next
// message with byte-identical metadata (and the same body length) is
// rebuilt without verifying, parsing or validating its metadata again: the
// shape of the batch (types, lengths, null counts, offsets, and where each
// buffer lies in the body) is a function of those bytes, the body length,
// the schema and the read options, all unchanged.
//
// Safety: the bytes compared are the subscriber's private copy (the region
// metadata is copied out of shared memory first), and the plan's buffers
// were checked to lie inside the body when it was built.
struct DecodePlan {
  static uint64_t NextSerial() {
    static std::atomic<uint64_t> counter{1};
    return counter.fetch_add(1, std::memory_order_relaxed);
  }
  struct Buffer {
    bool present = false;
    int64_t offset = 0;  // from the body start
    int64_t size = 0;
  };
  struct Node {
    format::TypePtr type;
    int64_t length = 0;
    int64_t null_count = 0;
    int64_t offset = 0;
    std::vector<Buffer> buffers;
    std::vector<size_t> children;  // indexes into nodes
  };

  std::shared_ptr<format::Buffer> metadata;  // verified private copy
  // Unique among all plans of the process: a BatchView filled from this
  // plan before only needs its buffer addresses moved.
  uint64_t serial = NextSerial();
  uint64_t body_length = 0;
  int64_t num_rows = 0;
  // The batch's own custom metadata (part of the metadata bytes compared).
  format::MetadataPtr batch_metadata;
  std::vector<Node> nodes;
  std::vector<size_t> columns;  // root node per column
  // Validate must run on every rebuilt batch (its verdict reads values).
  bool validate_each = true;

  bool Matches(std::span<const std::byte> md, uint64_t body) const {
    return metadata != nullptr && body == body_length &&
           static_cast<int64_t>(md.size()) == metadata->size() &&
           (md.empty() || std::memcmp(md.data(), metadata->data(), md.size()) == 0);
  }

  // Records `data` (a node of a batch decoded from `body`); false if it
  // cannot be replayed (a buffer outside the body: decompressed or
  // re-aligned copies; dictionaries).
  bool Record(const format::ArrayData& data, const format::Buffer& body, size_t* index) {
    if (data.dictionary != nullptr || data.null_count < 0) return false;
    Node node;
    node.type = data.type;
    node.length = data.length;
    node.null_count = data.null_count;
    node.offset = data.offset;
    for (const auto& b : data.buffers) {
      Buffer pb;
      if (b != nullptr) {
        if (!body.Contains(b->data(), b->size())) return false;
        pb.present = true;
        pb.offset = b->data() - body.data();
        pb.size = b->size();
      }
      node.buffers.push_back(pb);
    }
    for (const auto& child : data.child_data) {
      if (child == nullptr) return false;
      size_t c = 0;
      if (!Record(*child, body, &c)) return false;
      node.children.push_back(c);
    }
    *index = nodes.size();
    nodes.push_back(std::move(node));
    return true;
  }

  format::ArrayDataPtr Build(size_t index, const std::shared_ptr<format::Buffer>& body) const {
    const Node& n = nodes[index];
    auto d = std::make_shared<format::ArrayData>();
    d->type = n.type;
    d->length = n.length;
    d->null_count = n.null_count;
    d->offset = n.offset;
    d->buffers.reserve(n.buffers.size());
    for (const Buffer& b : n.buffers) {
      d->buffers.push_back(b.present ? std::make_shared<format::Buffer>(body, b.offset, b.size)
                                     : nullptr);
    }
    if (!n.children.empty()) {
      d->child_data.reserve(n.children.size());
      for (size_t c : n.children) d->child_data.push_back(Build(c, body));
    }
    return d;
  }
};

struct BatchSubscriber::Impl {
  format::SchemaPtr schema;
  SubscriberOptions options;
  // Dictionary-encoded fields' ids (no dictionaries), and the ids with the
  // current dictionaries (docs/CLIENT.md, "Dictionaries").
  format::ipc::DictionaryMemo ids;
  format::ipc::DictionaryMemo memo;
  bool has_dictionaries = false;
  // `memo` holds the state of dictionary generation `generation` and no
  // dictionary message after it was missed: dictionary messages apply.
  bool dictionaries_synced = false;
  uint16_t generation = 0;
  // A replay being received (kReplay messages until kReplayEnd).
  bool replaying = false;
  format::ipc::DictionaryMemo replay;
  uint64_t undecodable = 0;          // batches skipped for want of dictionaries
  uint64_t dictionary_messages = 0;  // dictionary messages applied
  uint64_t replays_loaded = 0;
  // Messages lost or skipped since the last batch returned.
  uint64_t pending_lost = 0;
  bool first_message = true;
  std::unique_ptr<shm::ChannelConsumer> consumer;
  shm::ChannelMessage message;
  // Private copy of shape or region metadata, reused across messages.
  std::vector<std::byte> metadata_scratch;
  // Plans by shape id (index 0 unused), and for messages without a shape
  // id the last few distinct ones decoded in full.
  std::vector<std::optional<DecodePlan>> shape_plans;
  std::vector<DecodePlan> plans;
  size_t next_victim = 0;  // round-robin replacement once full
  uint64_t plan_hits = 0;

  std::string Where() const {
    return "channel '" + consumer->name() + "' sequence " + std::to_string(message.sequence());
  }

  // The body of a message for decoding: a view that holds the shared
  // block, or with Verification::kPrivateCopy a private copy (the block is
  // returned at once).
  Result<std::shared_ptr<format::Buffer>> BodyOf(shm::ChannelBlock block, uint64_t length) const;
  Status ApplyDictionaryMessage(std::span<const std::byte> md,
                                const std::shared_ptr<format::Buffer>& body,
                                format::ipc::DictionaryMemo* into);
  // Decodes the message received. With `view`, a batch goes into it
  // (`*filled` says one did) instead of the result.
  Result<ReceivedBatch> Decode(BatchView* view = nullptr, bool* filled = nullptr);
  Result<ReceivedBatch> DecodeBatch(const UserWord& user, std::span<const std::byte> md,
                                    shm::ChannelBlock block, BatchView* view, bool* filled);
  // The common case in a few loads: the message received is a record
  // batch of a cached shape whose plan needs no validation per batch, in a
  // schema without dictionaries. Fills `view` and returns true; false
  // leaves everything to Decode (which also reports what is wrong).
  bool TryFillFast(BatchView* view);
  // Fills `view` from `plan` over the block the view already holds (no
  // allocation once the view's tables are large enough).
  void FillFromPlan(const DecodePlan& plan, uint64_t body_length, BatchView* view,
                    uint64_t lost_before) const;
  // Fills `view` from a decoded batch, which it keeps.
  void FillFromBatch(format::RecordBatchPtr batch, BatchView* view, uint64_t lost_before) const;
};

Result<std::shared_ptr<format::Buffer>> BatchSubscriber::Impl::BodyOf(shm::ChannelBlock block,
                                                                     uint64_t length) const {
  if (options.verification != Verification::kPrivateCopy) {
    return std::make_shared<BodyBuffer>(std::move(block), length);
  }
  // A producer that rewrites the block while we copy only changes what the
  // copy holds; the copy is what gets validated and read.
  ALKAID_ASSIGN_OR_RAISE(auto copy, format::AllocateBuffer(static_cast<int64_t>(length)));
  if (length > 0) std::memcpy(copy->mutable_data(), block.data().data(), length);
  block.Reset();
  return std::shared_ptr<format::Buffer>(std::move(copy));
}

// Decodes DictionaryBatch message `md` over `body` into `into`.
Status BatchSubscriber::Impl::ApplyDictionaryMessage(std::span<const std::byte> md,
                                                     const std::shared_ptr<format::Buffer>& body,
                                                     format::ipc::DictionaryMemo* into) {
  ALKAID_ASSIGN_OR_RAISE(
      auto metadata,
      format::Buffer::CopyOf(std::string_view(reinterpret_cast<const char*>(md.data()),
                                              md.size())));
  auto decoded = format::ipc::Message::Open(std::move(metadata), body, options.read);
  Status st = decoded.status();
  if (st.ok() && (*decoded)->type() != format::ipc::MessageType::kDictionaryBatch) {
    st = Status::Invalid("message flagged as a dictionary is a ",
                         format::ipc::MessageTypeName((*decoded)->type()));
  }
  if (st.ok()) st = format::ipc::ReadDictionary(**decoded, into, options.read).status();
  return st;
}

BatchSubscriber::BatchSubscriber(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BatchSubscriber::~BatchSubscriber() = default;

Result<std::unique_ptr<BatchSubscriber>> BatchSubscriber::Open(std::string_view channel_name,
                                                               format::SchemaPtr schema,
                                                               const SubscriberOptions& options) {
  if (schema == nullptr) return Status::Invalid("BatchSubscriber: null schema");
  auto impl = std::make_unique<Impl>();
  impl->schema = std::move(schema);
  impl->options = options;
  if (options.verification != Verification::kStructure) impl->options.read.validate_full = true;
  ALKAID_RETURN_NOT_OK(impl->ids.AssignIds(*impl->schema));
  impl->memo = impl->ids;
  impl->has_dictionaries = impl->ids.num_fields() > 0;
  ALKAID_ASSIGN_OR_RAISE(impl->consumer, shm::ChannelConsumer::Open(channel_name, options.consumer));
  return std::unique_ptr<BatchSubscriber>(new BatchSubscriber(std::move(impl)));
}

const format::SchemaPtr& BatchSubscriber::schema() const { return impl_->schema; }
const shm::ChannelConsumer& BatchSubscriber::consumer() const { return *impl_->consumer; }
uint64_t BatchSubscriber::decode_cache_hits() const { return impl_->plan_hits; }

DictionaryStats BatchSubscriber::dictionary_stats() const {
  DictionaryStats s;
  s.messages_applied = impl_->dictionary_messages;
  s.replays_loaded = impl_->replays_loaded;
  s.undecodable_batches = impl_->undecodable;
  return s;
}

Result<ReceivedBatch> BatchSubscriber::Receive(std::chrono::nanoseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left = std::max(std::chrono::nanoseconds(0),
                               std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   deadline - std::chrono::steady_clock::now()));
    ALKAID_RETURN_NOT_OK(impl_->consumer->Receive(&impl_->message, left));
    ALKAID_ASSIGN_OR_RAISE(auto out, impl_->Decode());
    // A dictionary message, or a batch skipped for want of its
    // dictionaries: not for the caller.
    if (out.batch != nullptr) return out;
  }
}

Result<ReceivedBatch> BatchSubscriber::TryReceive() {
  while (true) {
    ALKAID_ASSIGN_OR_RAISE(bool got, impl_->consumer->TryReceive(&impl_->message));
    if (!got) return ReceivedBatch{};
    ALKAID_ASSIGN_OR_RAISE(auto out, impl_->Decode());
    if (out.batch != nullptr) return out;
  }
}

Result<ReceivedBatch> BatchSubscriber::Impl::Decode(BatchView* view, bool* filled) {
  shm::ChannelMessage& m = message;
  const UserWord user = UserWord::Unpack(m.user());
  if (has_dictionaries) {
    if (first_message) {
      // From the channel's first message on, the empty state is the state.
      dictionaries_synced = m.sequence() == 0;
      generation = 0;
    } else if (m.lost_before() > 0 && dictionaries_synced) {
      // The state stays good if no dictionary message was among the lost:
      // the generation moves by one per dictionary message, and fewer than
      // 2^15 were lost.
      dictionaries_synced = m.lost_before() <= UserWord::kGenerationMask &&
                            user.dictionary_generation == generation;
    }
  }
  first_message = false;
  // Counted before anything can fail, so that a bad message right after a
  // gap does not hide it.
  pending_lost += m.lost_before();
  if (user.kind > internal::kMaxMessageKind) {
    return Status::Invalid(Where(), ": unknown message kind ", static_cast<int>(user.kind));
  }
  const auto kind = static_cast<MessageKind>(user.kind);
  if (kind == MessageKind::kReplayEnd) {
    if (has_dictionaries && !dictionaries_synced) {
      memo = replaying ? std::move(replay) : ids;
      generation = user.dictionary_generation;
      dictionaries_synced = true;
      ++replays_loaded;
    }
    replaying = false;
    return ReceivedBatch{};
  }
  // Error context is built only on the error paths (Where()).
  shm::ChannelBlock block = m.TakeBody();
  if (!block.valid()) return Status::Invalid(Where(), ": message carries no body block");
  const std::span<const std::byte> region = block.data();
  if (user.body_length > region.size()) {
    return Status::Invalid(Where(), ": body of ", user.body_length, " bytes exceeds its ",
                           region.size(), "-byte block");
  }
  // The metadata is used only from private memory: inline metadata was
  // copied out of the slot by the channel; shape and region metadata are
  // copied out of shared memory here, before they are compared or verified,
  // so the producer cannot change them between verification and use.
  std::span<const std::byte> md;
  const auto payload = m.payload();
  if (m.shape() != 0) {
    if (user.metadata_in_region || !payload.empty()) {
      return Status::Invalid(Where(), ": a shape id and other metadata");
    }
    // Cached plans need no bytes (DecodeBatch looks the id up first).
  } else if (user.metadata_in_region) {
    RegionMetadata where;
    if (payload.size() != sizeof(where)) {
      return Status::Invalid(Where(), ": region metadata record of ", payload.size(),
                             " bytes (", sizeof(where), " expected)");
    }
    std::memcpy(&where, payload.data(), sizeof(where));
    if (where.offset > region.size() || where.length > region.size() - where.offset ||
        where.offset < user.body_length) {
      return Status::Invalid(Where(), ": metadata at region offset ", where.offset,
                             " with length ", where.length, " is not inside the ",
                             region.size(), "-byte block after the ", user.body_length,
                             "-byte body");
    }
    metadata_scratch.resize(where.length);
    if (where.length > 0) {
      std::memcpy(metadata_scratch.data(), region.data() + where.offset, where.length);
    }
    md = metadata_scratch;
  } else {
    md = payload;
  }
  if (kind == MessageKind::kRecordBatch) {
    if (has_dictionaries &&
        !(dictionaries_synced && user.dictionary_generation == generation)) {
      // Its dictionaries are not known here (a replay will come): counted
      // as lost, like a message the channel dropped.
      ++undecodable;
      ++pending_lost;
      return ReceivedBatch{};
    }
    return DecodeBatch(user, md, std::move(block), view, filled);
  }
  // A dictionary message or a replayed dictionary.
  ALKAID_ASSIGN_OR_RAISE(auto body, BodyOf(std::move(block), user.body_length));
  if (!has_dictionaries) {
    return Status::Invalid(Where(), ": a dictionary message, but the schema has no "
                           "dictionary-encoded field");
  }
  if (kind == MessageKind::kDictionary) {
    if (!dictionaries_synced) return ReceivedBatch{};  // a replay follows
    Status st = ApplyDictionaryMessage(md, body, &memo);
    if (!st.ok()) {
      // The state is unknown from here: the next replay restores it.
      dictionaries_synced = false;
      return st.WithContext(Where());
    }
    generation = user.dictionary_generation;
    ++dictionary_messages;
    return ReceivedBatch{};
  }
  if (dictionaries_synced) return ReceivedBatch{};  // not for us
  if (!replaying) {
    replay = ids;
    replaying = true;
  }
  Status st = ApplyDictionaryMessage(md, body, &replay);
  if (!st.ok()) {
    replaying = false;
    return st.WithContext(Where() + ": dictionary replay");
  }
  return ReceivedBatch{};
}

bool BatchSubscriber::Impl::TryFillFast(BatchView* view) {
  const shm::ChannelMessage& m = message;
  const uint64_t word = m.user();
  const uint32_t shape = m.shape();
  if (has_dictionaries || shape == 0 || shape >= shape_plans.size() ||
      !UserWord::IsPlainRecordBatch(word) || !m.payload().empty() || !m.has_body()) {
    return false;
  }
  const std::optional<DecodePlan>& plan = shape_plans[shape];
  const uint64_t body_length = word & UserWord::kLengthMask;
  if (!plan.has_value() || plan->validate_each || plan->body_length != body_length ||
      body_length > m.body().size()) {
    return false;
  }
  first_message = false;
  const uint64_t lost_before = pending_lost + m.lost_before();
  pending_lost = 0;
  ++plan_hits;
  BatchView& v = *view;
  v.body_.reset();
  v.batch_.reset();
  message.TakeBodyInto(&v.block_);
  FillFromPlan(*plan, body_length, view, lost_before);
  return true;
}

Result<ReceivedBatch> BatchSubscriber::Impl::DecodeBatch(const UserWord& user,
                                                         std::span<const std::byte> md,
                                                         shm::ChannelBlock block,
                                                         BatchView* view, bool* filled) {
  ReceivedBatch out;
  out.sequence = message.sequence();
  const uint64_t lost_before = pending_lost;
  out.lost_before = lost_before;
  const uint32_t shape = message.shape();
  const DecodePlan* hit = nullptr;
  if (shape != 0) {
    if (shape < shape_plans.size() && shape_plans[shape].has_value()) {
      hit = &*shape_plans[shape];
      if (hit->body_length != user.body_length) {
        return Status::Invalid(Where(), ": shape ", shape, " has a body of ", hit->body_length,
                               " bytes, the message says ", user.body_length);
      }
    } else {
      // First use of this shape: its bytes, copied once.
      Status st = consumer->ReadShape(shape, &metadata_scratch);
      if (!st.ok()) return st.WithContext(Where());
      md = metadata_scratch;
    }
  } else {
    for (const DecodePlan& p : plans) {
      if (p.Matches(md, user.body_length)) {
        hit = &p;
        break;
      }
    }
  }
  if (hit != nullptr && view != nullptr && !hit->validate_each) {
    // Into the caller's view: nothing allocated.
    pending_lost = 0;
    ++plan_hits;
    view->Reset();
    view->block_ = std::move(block);
    FillFromPlan(*hit, user.body_length, view, lost_before);
    *filled = true;
    return out;
  }
  ALKAID_ASSIGN_OR_RAISE(std::shared_ptr<format::Buffer> body,
                         BodyOf(std::move(block), user.body_length));
  pending_lost = 0;
  if (hit != nullptr) {
    // Same metadata as a message already verified, decoded and validated:
    // replay its shape over this body.
    std::vector<format::ArrayDataPtr> columns;
    columns.reserve(hit->columns.size());
    for (size_t root : hit->columns) columns.push_back(hit->Build(root, body));
    auto batch = format::RecordBatch::Make(schema, hit->num_rows, std::move(columns));
    if (!batch.ok()) return batch.status().WithContext(Where());
    if (hit->batch_metadata != nullptr) *batch = (*batch)->WithMetadata(hit->batch_metadata);
    if (hit->validate_each) {
      Status st = options.read.validate_full ? format::ValidateFull(**batch)
                                             : format::Validate(**batch);
      if (!st.ok()) return st.WithContext(Where());
    }
    ++plan_hits;
    out.batch = std::move(batch).ValueOrDie();
    out.metadata = hit->metadata;
    out.body = std::move(body);
    if (view != nullptr) {
      FillFromBatch(std::move(out.batch), view, lost_before);
      *filled = true;
      return ReceivedBatch{};
    }
    return out;
  }

  ALKAID_ASSIGN_OR_RAISE(
      auto metadata,
      format::Buffer::CopyOf(std::string_view(reinterpret_cast<const char*>(md.data()),
                                              md.size())));
  auto decoded = format::ipc::Message::Open(metadata, body);
  if (!decoded.ok()) return decoded.status().WithContext(Where());
  if ((*decoded)->type() != format::ipc::MessageType::kRecordBatch) {
    return Status::Invalid(Where(), ": message is not a record batch");
  }
  if ((*decoded)->body_length() != static_cast<int64_t>(user.body_length)) {
    return Status::Invalid(Where(), ": the Message says a body of ", (*decoded)->body_length(),
                           " bytes, the slot ", user.body_length);
  }
  auto batch = format::ipc::ReadRecordBatch(**decoded, schema, &memo, options.read);
  if (!batch.ok()) return batch.status().WithContext(Where());

  // Remember the shape for the next messages (schemas are fixed per topic,
  // so a producer publishing batches of one shape hits this every time).
  DecodePlan plan;
  plan.metadata = metadata;
  plan.body_length = user.body_length;
  plan.num_rows = (*batch)->num_rows();
  plan.batch_metadata = (*batch)->metadata();
  plan.validate_each = options.read.validate_full;
  bool replayable = true;
  for (int i = 0; i < (*batch)->num_columns() && replayable; ++i) {
    const auto& col = (*batch)->column_data(i);
    size_t root = 0;
    replayable = plan.Record(*col, *body, &root);
    plan.columns.push_back(root);
    if (!internal::IsStructuralLayout(*col->type)) plan.validate_each = true;
  }
  if (replayable) {
    if (shape != 0) {
      if (shape_plans.size() <= shape) shape_plans.resize(shape + 1);
      shape_plans[shape] = std::move(plan);
    } else if (plans.size() < internal::kShapeCacheEntries) {
      plans.push_back(std::move(plan));
    } else {
      plans[next_victim] = std::move(plan);
      next_victim = (next_victim + 1) % internal::kShapeCacheEntries;
    }
  }

  out.batch = std::move(batch).ValueOrDie();
  out.metadata = std::move(metadata);
  out.body = std::move(body);
  if (view != nullptr) {
    FillFromBatch(std::move(out.batch), view, lost_before);
    *filled = true;
    return ReceivedBatch{};
  }
  return out;
}

void BatchSubscriber::Impl::FillFromPlan(const DecodePlan& plan, uint64_t body_length,
                                         BatchView* view, uint64_t lost_before) const {
  BatchView& v = *view;
  v.body_length_ = body_length;
  const auto* base = reinterpret_cast<const uint8_t*>(v.block_.data().data());
  v.valid_ = true;
  v.num_rows_ = plan.num_rows;
  v.num_columns_ = static_cast<uint32_t>(plan.columns.size());
  v.sequence_ = message.sequence();
  v.lost_before_ = lost_before;
  if (v.plan_serial_ == plan.serial) {
    // The same plan as last time: only the buffers' addresses move.
    for (size_t i = 0; i < v.buffers_.size(); ++i) {
      const int64_t at = v.buffer_offsets_[i];
      if (at >= 0) v.buffers_[i] = {base + at, v.buffers_[i].size()};
    }
    return;
  }
  v.plan_serial_ = plan.serial;
  if (v.schema_ != schema) v.schema_ = schema;
  v.batch_metadata_ = plan.batch_metadata;
  // The plan's node indexes are the view's (same order).
  v.nodes_.resize(plan.nodes.size());
  v.types_.resize(plan.nodes.size());
  v.buffers_.clear();
  v.buffer_offsets_.clear();
  v.children_.clear();
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const DecodePlan::Node& n = plan.nodes[i];
    ArrayView& a = v.nodes_[i];
    if (v.types_[i] != n.type) v.types_[i] = n.type;
    a.type = n.type.get();
    a.length = n.length;
    a.null_count = n.null_count;
    a.offset = n.offset;
    a.first_buffer = static_cast<uint32_t>(v.buffers_.size());
    a.num_buffers = static_cast<uint32_t>(n.buffers.size());
    for (const DecodePlan::Buffer& b : n.buffers) {
      if (b.present) {
        v.buffers_.emplace_back(base + b.offset, static_cast<size_t>(b.size));
        v.buffer_offsets_.push_back(b.offset);
      } else {
        v.buffers_.emplace_back();
        v.buffer_offsets_.push_back(-1);
      }
    }
    a.first_child = static_cast<uint32_t>(v.children_.size());
    a.num_children = static_cast<uint32_t>(n.children.size());
    for (size_t c : n.children) v.children_.push_back(static_cast<uint32_t>(c));
  }
  v.columns_.resize(plan.columns.size());
  for (size_t c = 0; c < plan.columns.size(); ++c) {
    v.columns_[c] = static_cast<uint32_t>(plan.columns[c]);
  }
}

void BatchSubscriber::Impl::FillFromBatch(format::RecordBatchPtr batch, BatchView* view,
                                          uint64_t lost_before) const {
  BatchView& v = *view;
  v.Reset();
  v.plan_serial_ = 0;
  v.valid_ = true;
  v.num_rows_ = batch->num_rows();
  v.num_columns_ = static_cast<uint32_t>(batch->num_columns());
  v.sequence_ = message.sequence();
  v.lost_before_ = lost_before;
  if (v.schema_ != schema) v.schema_ = schema;
  v.batch_metadata_ = batch->metadata();
  v.nodes_.clear();
  v.types_.clear();
  v.buffers_.clear();
  v.buffer_offsets_.clear();
  v.children_.clear();
  v.columns_.clear();
  // Depth first, children before their parent (as the plans record them).
  struct Walk {
    BatchView& v;
    uint32_t Add(const format::ArrayData& d) {
      std::vector<uint32_t> kids;
      kids.reserve(d.child_data.size());
      for (const auto& child : d.child_data) kids.push_back(Add(*child));
      ArrayView a;
      a.type = d.type.get();
      a.length = d.length;
      a.null_count = d.null_count;
      a.offset = d.offset;
      a.first_buffer = static_cast<uint32_t>(v.buffers_.size());
      a.num_buffers = static_cast<uint32_t>(d.buffers.size());
      for (const auto& b : d.buffers) {
        if (b != nullptr) {
          v.buffers_.emplace_back(b->data(), static_cast<size_t>(b->size()));
        } else {
          v.buffers_.emplace_back();
        }
        v.buffer_offsets_.push_back(-1);
      }
      a.first_child = static_cast<uint32_t>(v.children_.size());
      a.num_children = static_cast<uint32_t>(kids.size());
      v.children_.insert(v.children_.end(), kids.begin(), kids.end());
      v.nodes_.push_back(a);
      v.types_.push_back(d.type);
      return static_cast<uint32_t>(v.nodes_.size() - 1);
    }
  } walk{v};
  for (int c = 0; c < batch->num_columns(); ++c) {
    v.columns_.push_back(walk.Add(*batch->column_data(c)));
  }
  v.batch_ = std::move(batch);
}

Status BatchSubscriber::ReceiveInto(BatchView* view, std::chrono::nanoseconds timeout) {
  if (view == nullptr) return Status::Invalid("BatchSubscriber::ReceiveInto: null view");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left = std::max(std::chrono::nanoseconds(0),
                               std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   deadline - std::chrono::steady_clock::now()));
    ALKAID_RETURN_NOT_OK(impl_->consumer->Receive(&impl_->message, left));
    if (impl_->TryFillFast(view)) return Status::OK();
    bool filled = false;
    ALKAID_RETURN_NOT_OK(impl_->Decode(view, &filled).status());
    if (filled) return Status::OK();
  }
}

Result<bool> BatchSubscriber::TryReceiveInto(BatchView* view) {
  if (view == nullptr) return Status::Invalid("BatchSubscriber::TryReceiveInto: null view");
  while (true) {
    ALKAID_ASSIGN_OR_RAISE(bool got, impl_->consumer->TryReceive(&impl_->message));
    if (!got) return false;
    if (impl_->TryFillFast(view)) return true;
    bool filled = false;
    ALKAID_RETURN_NOT_OK(impl_->Decode(view, &filled).status());
    if (filled) return true;
  }
}

// ---- BatchView ---------------------------------------------------------------

void BatchView::Reset() {
  valid_ = false;
  block_.Reset();
  body_.reset();
  batch_.reset();
}

Result<format::RecordBatchPtr> BatchView::ToRecordBatch() {
  if (!valid_) return Status::Invalid("BatchView::ToRecordBatch: the view holds no batch");
  if (batch_ != nullptr) return batch_;
  if (body_ == nullptr) body_ = std::make_shared<BodyBuffer>(std::move(block_), body_length_);
  // Nodes are depth first, children before parents: build in order.
  std::vector<format::ArrayDataPtr> built(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const ArrayView& a = nodes_[i];
    auto d = std::make_shared<format::ArrayData>();
    d->type = types_[i];
    d->length = a.length;
    d->null_count = a.null_count;
    d->offset = a.offset;
    for (uint32_t b = 0; b < a.num_buffers; ++b) {
      const int64_t at = buffer_offsets_[a.first_buffer + b];
      const auto span = buffers_[a.first_buffer + b];
      d->buffers.push_back(at < 0 ? nullptr
                                  : std::make_shared<format::Buffer>(
                                        body_, at, static_cast<int64_t>(span.size())));
    }
    for (uint32_t c = 0; c < a.num_children; ++c) {
      d->child_data.push_back(built[children_[a.first_child + c]]);
    }
    built[i] = std::move(d);
  }
  std::vector<format::ArrayDataPtr> columns;
  columns.reserve(columns_.size());
  for (uint32_t root : columns_) columns.push_back(built[root]);
  ALKAID_ASSIGN_OR_RAISE(auto batch, format::RecordBatch::Make(schema_, num_rows_,
                                                               std::move(columns)));
  if (batch_metadata_ != nullptr) batch = batch->WithMetadata(batch_metadata_);
  batch_ = batch;
  return batch;
}

}  // namespace alkaid::client
