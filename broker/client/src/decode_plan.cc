// The decode cache of BatchSubscriber (batch_subscriber_internal.h): a
// batch's shape recorded once, and the plan that makes the next batches of
// that shape.

#include <algorithm>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "batch_subscriber_internal.h"

namespace alkaid::client {

namespace internal {

bool DecodePlan::Record(const format::ArrayData& data, const format::Buffer& body,
                        format::BatchShape* shape, uint32_t* index) {
  if (data.dictionary != nullptr || data.null_count < 0) return false;
  format::BatchShape::Node node;
  node.type = data.type;
  node.length = data.length;
  node.null_count = data.null_count;
  node.offset = data.offset;
  for (const auto& b : data.buffers) {
    format::BatchShape::Node::BufferRange range;
    if (b != nullptr) {
      if (!body.Contains(b->data(), b->size())) return false;
      range.offset = b->data() - body.data();
      range.size = b->size();
    }
    node.buffers.push_back(range);
  }
  for (const auto& child : data.child_data) {
    if (child == nullptr) return false;
    uint32_t c = 0;
    if (!Record(*child, body, shape, &c)) return false;
    node.children.push_back(c);
  }
  *index = static_cast<uint32_t>(shape->nodes.size());
  shape->nodes.push_back(std::move(node));
  return true;
}

namespace {

// Whether Message nodes and buffers of `type` follow its layout one for
// one, recursively (the reader's default case): what a varying plan covers.
bool FollowsLayout(const format::DataType& type) {
  using format::TypeId;
  const format::DataType& storage = format::StorageType(type);
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
  if (storage.layout().variadic) return false;
  for (const auto& f : storage.fields()) {
    if (!FollowsLayout(*f->type())) return false;
  }
  return true;
}

// Where a Message buffer went: its node in the shape and its index there.
struct BufferPlace {
  uint32_t node;
  uint32_t k;
};

// Records `data` (a node decoded from `body`) into `shape` as Record does,
// and numbers its Message node and buffers (pre-order, as the writer lays
// them out) into `plan` and `places`.
bool RecordVarying(const format::ArrayData& data, const format::Buffer& body,
                   format::BatchShape* shape, uint32_t* index, VaryingPlan* plan,
                   std::vector<BufferPlace>* places) {
  const format::DataTypeLayout& layout = format::StorageType(*data.type).layout();
  if (data.dictionary != nullptr || data.offset != 0 || data.null_count < 0 ||
      data.buffers.size() != layout.buffers.size()) {
    return false;
  }
  const size_t pre = plan->node_of.size();
  plan->node_of.push_back(0);
  plan->validity.push_back(layout.has_validity ? static_cast<int8_t>(data.buffers[0] != nullptr)
                                               : int8_t{-1});
  const size_t first = places->size();
  format::BatchShape::Node node;
  node.type = data.type;
  node.length = data.length;
  node.null_count = data.null_count;
  for (size_t k = 0; k < data.buffers.size(); ++k) {
    const auto& b = data.buffers[k];
    format::BatchShape::Node::BufferRange range;
    if (b != nullptr) {
      if (!body.Contains(b->data(), b->size())) return false;
      range.offset = b->data() - body.data();
      range.size = b->size();
    } else if (k != 0 || !layout.has_validity) {
      return false;  // only a validity bitmap is ever absent
    }
    node.buffers.push_back(range);
    places->push_back({0, static_cast<uint32_t>(k)});
  }
  for (const auto& child : data.child_data) {
    uint32_t c = 0;
    if (child == nullptr || !RecordVarying(*child, body, shape, &c, plan, places)) return false;
    node.children.push_back(c);
  }
  *index = static_cast<uint32_t>(shape->nodes.size());
  shape->nodes.push_back(std::move(node));
  plan->node_of[pre] = *index;
  for (size_t j = first; j < first + data.buffers.size(); ++j) (*places)[j].node = *index;
  return true;
}

}  // namespace

bool VaryingPlan::Covers(const format::Schema& schema) {
  for (const auto& f : schema.fields()) {
    if (!FollowsLayout(*f->type())) return false;
  }
  return true;
}

std::unique_ptr<VaryingPlan> VaryingPlan::Make(const format::RecordBatch& batch,
                                               const format::Buffer& body, Message message,
                                               const format::SchemaPtr& schema) {
  auto plan = std::make_unique<VaryingPlan>(std::move(message));
  format::BatchShape shape;
  shape.schema = schema;
  shape.num_rows = batch.num_rows();
  shape.metadata = batch.metadata();
  shape.body_length = body.size();
  shape.varying = true;
  std::vector<BufferPlace> places;
  for (int i = 0; i < batch.num_columns(); ++i) {
    plan->roots.push_back(static_cast<uint32_t>(plan->node_of.size()));
    uint32_t root = 0;
    if (!RecordVarying(*batch.column_data(i), body, &shape, &root, plan.get(), &places)) {
      return nullptr;
    }
    shape.columns.push_back(root);
  }
  if (plan->node_of.size() != plan->message.num_nodes() ||
      places.size() != plan->message.num_buffers()) {
    return nullptr;
  }
  // The template's present buffers: nodes in order, each one's in order.
  std::vector<std::vector<int32_t>> slot(shape.nodes.size());
  int32_t next = 0;
  for (size_t i = 0; i < shape.nodes.size(); ++i) {
    for (const auto& range : shape.nodes[i].buffers) {
      slot[i].push_back(range.offset >= 0 ? next++ : -1);
    }
  }
  for (const BufferPlace& p : places) plan->slot_of.push_back(slot[p.node][p.k]);
  auto made = format::BatchTemplate::Make(std::move(shape));
  if (!made.ok()) return nullptr;
  plan->batches = std::move(made).ValueOrDie();
  plan->read_nodes.resize(plan->message.num_nodes());
  plan->read_buffers.resize(plan->message.num_buffers());
  plan->nodes.resize(plan->message.num_nodes());
  plan->buffers.resize(static_cast<size_t>(next));
  return plan;
}

bool VaryingPlan::Take(const uint8_t* md, uint64_t body_length,
                       format::BatchTemplate::Numbers* numbers) {
  int64_t length = 0;
  int64_t message_body = 0;
  message.Read(md, &length, &message_body, read_nodes.data(), read_buffers.data());
  if (length < 0 || message_body < 0 || static_cast<uint64_t>(message_body) != body_length) {
    return false;
  }
  for (size_t i = 0; i < read_nodes.size(); ++i) {
    const Message::Node& n = read_nodes[i];
    if (n.length < 0 || n.null_count < 0 || n.null_count > n.length) return false;
    // The reader drops a bitmap whose node has no nulls: the shape must
    // have it exactly when the node has nulls.
    if ((n.null_count != 0) != (validity[i] == 1)) return false;
    nodes[node_of[i]] = {n.length, n.null_count};
  }
  for (uint32_t root : roots) {
    if (read_nodes[root].length != length) return false;
  }
  for (size_t j = 0; j < read_buffers.size(); ++j) {
    const Message::Range& r = read_buffers[j];
    int64_t end = 0;
    if (r.offset < 0 || r.length < 0 || __builtin_add_overflow(r.offset, r.length, &end) ||
        end > message_body) {
      return false;
    }
    if (slot_of[j] < 0) continue;
    if (r.offset % 8 != 0) return false;  // the reader would copy it to align it
    buffers[static_cast<size_t>(slot_of[j])] = {r.offset, r.length};
  }
  numbers->num_rows = length;
  numbers->body_length = message_body;
  numbers->nodes = nodes.data();
  numbers->buffers = buffers.data();
  return true;
}

}  // namespace internal

const internal::DecodePlan* BatchSubscriber::Impl::FindPlan(std::span<const std::byte> md,
                                                            uint64_t body_length) const {
  const uint32_t shape = message.shape();
  if (shape != 0) {
    if (shape < shape_plans.size() && shape_plans[shape] != 0)
      return &plans[shape_plans[shape] - 1];
    return nullptr;
  }
  for (const DecodePlan& p : plans) {
    if (p.Matches(md, body_length)) return &p;
  }
  return nullptr;
}

bool BatchSubscriber::Impl::SeenBefore(const std::shared_ptr<format::Buffer>& metadata) {
  const std::span<const uint8_t> bytes(metadata->data(), static_cast<size_t>(metadata->size()));
  for (const auto& m : recent_metadata) {
    if (m->size() == metadata->size() && std::equal(bytes.begin(), bytes.end(), m->data())) {
      return true;
    }
  }
  if (recent_metadata.size() < internal::kShapeCacheEntries) {
    recent_metadata.push_back(metadata);
  } else {
    recent_metadata[next_recent] = metadata;
    next_recent = (next_recent + 1) % internal::kShapeCacheEntries;
  }
  return false;
}

void BatchSubscriber::Impl::Remember(const format::RecordBatch& batch, const format::Buffer& body,
                                     std::shared_ptr<format::Buffer> metadata,
                                     uint64_t body_length) {
  format::BatchShape shape;
  shape.schema = schema;
  shape.num_rows = batch.num_rows();
  shape.metadata = batch.metadata();
  shape.body_length = static_cast<int64_t>(body_length);
  bool validate_each = options.read.validate_full;
  for (int i = 0; i < batch.num_columns(); ++i) {
    const auto& col = batch.column_data(i);
    uint32_t root = 0;
    if (!DecodePlan::Record(*col, body, &shape, &root)) return;  // not replayable
    shape.columns.push_back(root);
    if (!internal::IsStructuralLayout(*col->type)) validate_each = true;
  }
  auto made = format::BatchTemplate::Make(std::move(shape));
  if (!made.ok()) return;  // a shape the template refuses is decoded in full each time
  DecodePlan plan;
  plan.shape_id = message.shape();
  plan.metadata = std::move(metadata);
  plan.body_length = body_length;
  plan.batches = std::move(made).ValueOrDie();
  plan.validate_each = validate_each;
  if (validate_each && !options.read.validate_full) {
    plan.checker = format::ShapeValidator::Make(batch);
  }
  if (plan.shape_id != 0) {
    if (shape_plans.size() <= plan.shape_id) shape_plans.resize(plan.shape_id + 1, 0);
    plans.push_back(std::move(plan));
    shape_plans[plans.back().shape_id] = static_cast<uint32_t>(plans.size());
    return;
  }
  // Metadata-keyed plans: the last few distinct ones.
  std::vector<size_t> keyed;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i].shape_id == 0) keyed.push_back(i);
  }
  if (keyed.size() < internal::kShapeCacheEntries) {
    plans.push_back(std::move(plan));
  } else {
    plans[keyed[next_victim]] = std::move(plan);
    next_victim = (next_victim + 1) % internal::kShapeCacheEntries;
  }
}

}  // namespace alkaid::client

namespace alkaid::client {

void BatchSubscriber::Impl::RememberVarying(const format::RecordBatch& batch,
                                            const format::Buffer& body,
                                            std::span<const std::byte> md) {
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(md.data()), md.size());
  if (!last_structure.has_value() || !last_structure->Matches(bytes)) {
    // The first of its structure: noted (a Message that leaves a number
    // out, or is compressed, has none).
    auto t = format::ipc::RecordBatchMessageTemplate::FromMessage(bytes);
    if (t.ok()) {
      last_structure = std::move(t).ValueOrDie();
    } else {
      last_structure.reset();
    }
    return;
  }
  auto plan = internal::VaryingPlan::Make(batch, body, std::move(*last_structure), schema);
  last_structure.reset();
  if (plan == nullptr) return;
  if (varying.size() < internal::kShapeCacheEntries) {
    varying.push_back(std::move(plan));
  } else {
    varying[next_varying] = std::move(plan);
    next_varying = (next_varying + 1) % internal::kShapeCacheEntries;
  }
}

}  // namespace alkaid::client
