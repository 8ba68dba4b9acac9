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
