// Filling a caller's BatchView (batch_subscriber_internal.h), and the view.

#include <memory>
#include <utility>
#include <vector>

#include "alkaid/client/batch_view.h"
#include "batch_subscriber_internal.h"

namespace alkaid::client {

void BatchSubscriber::Impl::FillFromPlan(const DecodePlan& plan, uint64_t body_length,
                                         BatchView* view, uint64_t lost_before) const {
  BatchView& out = *view;
  out.body_length_ = body_length;
  const auto* base = reinterpret_cast<const uint8_t*>(out.block_.data().data());
  out.valid_ = true;
  out.num_rows_ = plan.num_rows;
  out.num_columns_ = static_cast<uint32_t>(plan.columns.size());
  out.sequence_ = message.sequence();
  out.lost_before_ = lost_before;
  if (out.plan_serial_ == plan.serial) {
    // The same plan as last time: only the buffers' addresses move.
    for (size_t i = 0; i < out.buffers_.size(); ++i) {
      const int64_t at = out.buffer_offsets_[i];
      if (at >= 0) out.buffers_[i] = {base + at, out.buffers_[i].size()};
    }
    return;
  }
  out.plan_serial_ = plan.serial;
  if (out.schema_ != schema) out.schema_ = schema;
  out.batch_metadata_ = plan.batch_metadata;
  // The plan's node indexes are the view's (same order).
  out.nodes_.resize(plan.nodes.size());
  out.types_.resize(plan.nodes.size());
  out.buffers_.clear();
  out.buffer_offsets_.clear();
  out.children_.clear();
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const DecodePlan::Node& n = plan.nodes[i];
    ArrayView& a = out.nodes_[i];
    if (out.types_[i] != n.type) out.types_[i] = n.type;
    a.type = n.type.get();
    a.length = n.length;
    a.null_count = n.null_count;
    a.offset = n.offset;
    a.first_buffer = static_cast<uint32_t>(out.buffers_.size());
    a.num_buffers = static_cast<uint32_t>(n.buffers.size());
    for (const DecodePlan::Buffer& b : n.buffers) {
      if (b.present) {
        out.buffers_.emplace_back(base + b.offset, static_cast<size_t>(b.size));
        out.buffer_offsets_.push_back(b.offset);
      } else {
        out.buffers_.emplace_back();
        out.buffer_offsets_.push_back(-1);
      }
    }
    a.first_child = static_cast<uint32_t>(out.children_.size());
    a.num_children = static_cast<uint32_t>(n.children.size());
    for (size_t c : n.children) out.children_.push_back(static_cast<uint32_t>(c));
  }
  out.columns_.resize(plan.columns.size());
  for (size_t c = 0; c < plan.columns.size(); ++c) {
    out.columns_[c] = static_cast<uint32_t>(plan.columns[c]);
  }
}

void BatchSubscriber::Impl::FillFromBatch(format::RecordBatchPtr batch, BatchView* view,
                                          uint64_t lost_before) const {
  BatchView& out = *view;
  out.Reset();
  out.plan_serial_ = 0;
  out.valid_ = true;
  out.num_rows_ = batch->num_rows();
  out.num_columns_ = static_cast<uint32_t>(batch->num_columns());
  out.sequence_ = message.sequence();
  out.lost_before_ = lost_before;
  if (out.schema_ != schema) out.schema_ = schema;
  out.batch_metadata_ = batch->metadata();
  out.nodes_.clear();
  out.types_.clear();
  out.buffers_.clear();
  out.buffer_offsets_.clear();
  out.children_.clear();
  out.columns_.clear();
  // Depth first, children before their parent (as the plans record them).
  struct Walk {
    BatchView& out;
    uint32_t Add(const format::ArrayData& d) {
      std::vector<uint32_t> kids;
      kids.reserve(d.child_data.size());
      for (const auto& child : d.child_data) kids.push_back(Add(*child));
      ArrayView a;
      a.type = d.type.get();
      a.length = d.length;
      a.null_count = d.null_count;
      a.offset = d.offset;
      a.first_buffer = static_cast<uint32_t>(out.buffers_.size());
      a.num_buffers = static_cast<uint32_t>(d.buffers.size());
      for (const auto& b : d.buffers) {
        if (b != nullptr) {
          out.buffers_.emplace_back(b->data(), static_cast<size_t>(b->size()));
        } else {
          out.buffers_.emplace_back();
        }
        out.buffer_offsets_.push_back(-1);
      }
      a.first_child = static_cast<uint32_t>(out.children_.size());
      a.num_children = static_cast<uint32_t>(kids.size());
      out.children_.insert(out.children_.end(), kids.begin(), kids.end());
      out.nodes_.push_back(a);
      out.types_.push_back(d.type);
      return static_cast<uint32_t>(out.nodes_.size() - 1);
    }
  } walk{out};
  for (int c = 0; c < batch->num_columns(); ++c) {
    out.columns_.push_back(walk.Add(*batch->column_data(c)));
  }
  out.batch_ = std::move(batch);
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
  if (body_ == nullptr)
    body_ = std::make_shared<internal::BodyBuffer>(std::move(block_), body_length_);
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
      d->buffers.push_back(
          at < 0 ? nullptr
                 : std::make_shared<format::Buffer>(body_, at, static_cast<int64_t>(span.size())));
    }
    for (uint32_t c = 0; c < a.num_children; ++c) {
      d->child_data.push_back(built[children_[a.first_child + c]]);
    }
    built[i] = std::move(d);
  }
  std::vector<format::ArrayDataPtr> columns;
  columns.reserve(columns_.size());
  for (uint32_t root : columns_) columns.push_back(built[root]);
  ALKAID_ASSIGN_OR_RAISE(auto batch,
                         format::RecordBatch::Make(schema_, num_rows_, std::move(columns)));
  if (batch_metadata_ != nullptr) batch = batch->WithMetadata(batch_metadata_);
  batch_ = batch;
  return batch;
}

}  // namespace alkaid::client
