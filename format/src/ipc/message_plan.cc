// MessagePlan and MessagePlanCache (message_plan.h): a decoded batch's
// shape recorded once, and the plan that makes the next batches of it.

#include "alkaid/format/ipc/message_plan.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>

#include "alkaid/format/validate.h"
#include "metadata_internal.h"

namespace alkaid::format::ipc {

using Range = BatchShape::Node::BufferRange;

// How a varying plan's Message numbers map onto its template's.
struct MessagePlan::Numbering {
  using Message = RecordBatchMessageTemplate;
  explicit Numbering(Message m) : message(std::move(m)) {}

  Message message;
  // Per Message node (pre-order): its node in the shape, and whether the
  // shape has its validity bitmap (1), has none (0: the null count must
  // stay 0) or its layout has none (-1: so must the null count).
  std::vector<uint32_t> node_of;
  std::vector<int8_t> validity;
  // Per Message buffer: where it went while recording (its node in the
  // shape, its index there), then its index among the shape's present
  // buffers (the order of BatchTemplate::Numbers::buffers), or -1 (an
  // absent bitmap).
  std::vector<std::pair<uint32_t, uint32_t>> places;
  std::vector<int32_t> slot_of;
  // The Message node of each column.
  std::vector<uint32_t> roots;
  // Per batch: the numbers read, and the template's.
  std::vector<Message::Node> read_nodes;
  std::vector<Message::Range> read_buffers;
  std::vector<BatchTemplate::Numbers::Node> nodes;
  std::vector<Range> buffers;
};

namespace {

bool HasDictionary(const DataType& type) {
  const DataType& storage = StorageType(type);
  if (storage.id() == TypeId::kDictionary) return true;
  return std::any_of(storage.fields().begin(), storage.fields().end(),
                     [](const FieldPtr& f) { return HasDictionary(*f->type()); });
}

// Whether Message nodes and buffers of `type` follow its layout one for
// one, recursively (the reader's default case): what a varying plan covers.
bool FollowsLayout(const DataType& type) {
  const DataType& storage = StorageType(type);
  switch (storage.id()) {
    case TypeId::kNull:
    case TypeId::kDictionary:
    case TypeId::kSparseUnion:
    case TypeId::kDenseUnion:
    case TypeId::kRunEndEncoded:
      return false;
    default:
      break;
  }
  return !storage.layout().variadic &&
         std::all_of(storage.fields().begin(), storage.fields().end(),
                     [](const FieldPtr& f) { return FollowsLayout(*f->type()); });
}

}  // namespace

// Records `data` (a node of a batch decoded from `body`) into `shape`, its
// index into `*index`; with `numbering`, also numbers its Message node and
// buffers (pre-order, as the writer lays them out), which must then follow
// the layout one for one. False if it cannot be replayed: a dictionary, a
// buffer outside the body (decompressed or re-aligned copies).
bool MessagePlan::Record(const ArrayData& data, const Buffer& body, BatchShape* shape,
                         uint32_t* index, Numbering* numbering) {
  if (data.dictionary != nullptr || data.null_count < 0) return false;
  const DataTypeLayout& layout = StorageType(*data.type).layout();
  size_t pre = 0;
  size_t first = 0;
  if (numbering != nullptr) {
    if (data.offset != 0 || data.buffers.size() != layout.buffers.size()) return false;
    pre = numbering->node_of.size();
    numbering->node_of.push_back(0);
    numbering->validity.push_back(
        layout.has_validity ? static_cast<int8_t>(data.buffers[0] != nullptr) : int8_t{-1});
    first = numbering->places.size();
  }
  BatchShape::Node node;
  node.type = data.type;
  node.length = data.length;
  node.null_count = data.null_count;
  node.offset = data.offset;
  for (size_t k = 0; k < data.buffers.size(); ++k) {
    const auto& b = data.buffers[k];
    Range range;
    if (b != nullptr) {
      if (!body.Contains(b->data(), b->size())) return false;
      range.offset = b->data() - body.data();
      range.size = b->size();
    } else if (numbering != nullptr && (k != 0 || !layout.has_validity)) {
      return false;  // only a validity bitmap is ever absent
    }
    node.buffers.push_back(range);
    if (numbering != nullptr) numbering->places.emplace_back(0, static_cast<uint32_t>(k));
  }
  for (const auto& child : data.child_data) {
    uint32_t c = 0;
    if (child == nullptr || !Record(*child, body, shape, &c, numbering)) return false;
    node.children.push_back(c);
  }
  *index = static_cast<uint32_t>(shape->nodes.size());
  shape->nodes.push_back(std::move(node));
  if (numbering != nullptr) {
    numbering->node_of[pre] = *index;
    for (size_t j = first; j < first + data.buffers.size(); ++j)
      numbering->places[j].first = *index;
  }
  return true;
}

MessagePlan::~MessagePlan() = default;

bool MessagePlan::CanVary(const Schema& schema) {
  return std::all_of(schema.fields().begin(), schema.fields().end(),
                     [](const FieldPtr& f) { return FollowsLayout(*f->type()); });
}

std::unique_ptr<MessagePlan> MessagePlan::Make(Kind kind, const RecordBatch& batch,
                                               const Buffer& body, std::span<const uint8_t> message,
                                               const IpcReadOptions& options) {
  if (message.empty()) return nullptr;
  std::unique_ptr<MessagePlan> plan(new MessagePlan());
  plan->kind_ = kind;
  plan->validate_full_ = options.validate_full;
  plan->decimal_precision_ = options.validate_decimal_precision;
  Numbering* numbering = nullptr;
  if (kind == Kind::kVarying) {
    // The template refuses a compressed Message and one that leaves a
    // number out.
    auto t = RecordBatchMessageTemplate::FromMessage(message);
    if (!t.ok()) return nullptr;
    plan->numbering_ = std::make_unique<Numbering>(std::move(t).ValueOrDie());
    numbering = plan->numbering_.get();
  } else {
    // The plan's own copy (aligned, for the flatbuffer read below).
    auto copy = Buffer::CopyOf(
        std::string_view(reinterpret_cast<const char*>(message.data()), message.size()));
    if (!copy.ok()) return nullptr;
    plan->message_ = std::move(copy).ValueOrDie();
    plan->body_length_ = body.size();
    // A compressed body whose buffers were all stored as they are decodes
    // into slices of the body too; the next body of these bytes may not.
    auto meta = internal::GetRecordBatch(plan->message_->data());
    if (!meta.ok() || meta->compression != CompressionType::kNone) return nullptr;
  }
  BatchShape shape;
  shape.schema = batch.schema();
  shape.num_rows = batch.num_rows();
  shape.metadata = batch.metadata();
  shape.body_length = body.size();
  shape.varying = numbering != nullptr;
  for (int i = 0; i < batch.num_columns(); ++i) {
    if (numbering != nullptr) {
      numbering->roots.push_back(static_cast<uint32_t>(numbering->node_of.size()));
    }
    uint32_t root = 0;
    if (!Record(*batch.column_data(i), body, &shape, &root, numbering)) return nullptr;
    shape.columns.push_back(root);
  }
  if (numbering != nullptr) {
    if (numbering->node_of.size() != numbering->message.num_nodes() ||
        numbering->places.size() != numbering->message.num_buffers()) {
      return nullptr;
    }
    // The template's present buffers: nodes in order, each one's in order.
    std::vector<std::vector<int32_t>> slot(shape.nodes.size());
    int32_t next = 0;
    for (size_t i = 0; i < shape.nodes.size(); ++i) {
      for (const Range& range : shape.nodes[i].buffers) {
        slot[i].push_back(range.offset >= 0 ? next++ : -1);
      }
    }
    for (const auto& [node, k] : numbering->places) numbering->slot_of.push_back(slot[node][k]);
    numbering->read_nodes.resize(numbering->message.num_nodes());
    numbering->read_buffers.resize(numbering->message.num_buffers());
    numbering->nodes.resize(numbering->message.num_nodes());
    numbering->buffers.resize(static_cast<size_t>(next));
    plan->numbers_.nodes = numbering->nodes.data();
    plan->numbers_.buffers = numbering->buffers.data();
  } else if (!options.validate_full) {
    plan->checker_ = ShapeValidator::Make(batch);
    plan->validate_each_ = plan->checker_ == nullptr || plan->checker_->reads_values();
  }
  auto made = BatchTemplate::Make(std::move(shape));
  if (!made.ok()) return nullptr;
  plan->batches_ = std::move(made).ValueOrDie();
  return plan;
}

bool MessagePlan::Take(std::span<const uint8_t> message, int64_t body_length) {
  if (kind_ == Kind::kExact) {
    return body_length == body_length_ &&
           static_cast<int64_t>(message.size()) == message_->size() &&
           std::memcmp(message.data(), message_->data(), message.size()) == 0;
  }
  Numbering& n = *numbering_;
  if (!n.message.Matches(message)) return false;
  int64_t length = 0;
  int64_t message_body = 0;
  n.message.Read(message.data(), &length, &message_body, n.read_nodes.data(),
                 n.read_buffers.data());
  if (length < 0 || message_body != body_length) return false;
  for (size_t i = 0; i < n.read_nodes.size(); ++i) {
    const Numbering::Message::Node& node = n.read_nodes[i];
    if (node.length < 0 || node.null_count < 0 || node.null_count > node.length) return false;
    // The reader drops a bitmap whose node has no nulls: the shape must
    // have it exactly when the node has nulls.
    if ((node.null_count != 0) != (n.validity[i] == 1)) return false;
    n.nodes[n.node_of[i]] = {node.length, node.null_count};
  }
  for (uint32_t root : n.roots) {
    if (n.read_nodes[root].length != length) return false;
  }
  for (size_t j = 0; j < n.read_buffers.size(); ++j) {
    const Numbering::Message::Range& r = n.read_buffers[j];
    int64_t end = 0;
    if (r.offset < 0 || r.length < 0 || __builtin_add_overflow(r.offset, r.length, &end) ||
        end > message_body) {
      return false;
    }
    if (n.slot_of[j] < 0) continue;
    if (r.offset % 8 != 0) return false;  // the reader would copy it to align it
    n.buffers[static_cast<size_t>(n.slot_of[j])] = {r.offset, r.length};
  }
  numbers_.num_rows = length;
  numbers_.body_length = message_body;
  return true;
}

Status MessagePlan::ValidateAll(const RecordBatch& batch) const {
  if (validate_full_) {
    FullValidationOptions full;
    full.decimal_precision = decimal_precision_;
    return ValidateFull(batch, full);
  }
  return format::Validate(batch);
}

// ---- MessagePlanCache -----------------------------------------------------------

namespace {

// Puts `plan` into `plans`, which keeps the last MessagePlanCache::kEntries
// (`*next` is the round-robin victim).
void Keep(std::unique_ptr<MessagePlan> plan, std::vector<std::unique_ptr<MessagePlan>>* plans,
          size_t* next) {
  if (plan == nullptr) return;
  if (plans->size() < MessagePlanCache::kEntries) {
    plans->push_back(std::move(plan));
    return;
  }
  (*plans)[*next] = std::move(plan);
  *next = (*next + 1) % MessagePlanCache::kEntries;
}

}  // namespace

MessagePlanCache::MessagePlanCache(const Schema& schema, const IpcReadOptions& options)
    : options_(options) {
  exact_possible_ = std::none_of(schema.fields().begin(), schema.fields().end(),
                                 [](const FieldPtr& f) { return HasDictionary(*f->type()); });
  vary_possible_ = exact_possible_ && MessagePlan::CanVary(schema);
}

MessagePlanCache::~MessagePlanCache() = default;

MessagePlan* MessagePlanCache::Find(std::span<const uint8_t> message, int64_t body_length) {
  for (const auto& p : exact_) {
    if (p->Take(message, body_length)) return p.get();
  }
  for (const auto& p : varying_) {
    if (p->Take(message, body_length)) return p.get();
  }
  return nullptr;
}

bool MessagePlanCache::SeenBefore(std::span<const uint8_t> message) {
  for (const auto& m : recent_) {
    if (std::equal(m.begin(), m.end(), message.begin(), message.end())) return true;
  }
  if (recent_.size() < kEntries) {
    recent_.emplace_back(message.begin(), message.end());
  } else {
    recent_[next_recent_].assign(message.begin(), message.end());
    next_recent_ = (next_recent_ + 1) % kEntries;
  }
  return false;
}

void MessagePlanCache::Learn(const RecordBatch& batch, const Buffer& body,
                             std::span<const uint8_t> message) {
  if (!exact_possible_) return;
  // A batch with variable-width columns has a Message of its own nearly
  // every time: an exact plan only for one that came again.
  if (SeenBefore(message)) {
    Keep(MessagePlan::Make(MessagePlan::Kind::kExact, batch, body, message, options_), &exact_,
         &next_exact_);
  }
  if (!vary_possible_) return;
  if (!last_structure_.has_value() || !last_structure_->Matches(message)) {
    // The first of its structure: noted (a Message that leaves a number
    // out, or is compressed, has none).
    auto t = RecordBatchMessageTemplate::FromMessage(message);
    if (t.ok()) {
      last_structure_ = std::move(t).ValueOrDie();
    } else {
      last_structure_.reset();
    }
    return;
  }
  last_structure_.reset();
  Keep(MessagePlan::Make(MessagePlan::Kind::kVarying, batch, body, message, options_), &varying_,
       &next_varying_);
}

}  // namespace alkaid::format::ipc
