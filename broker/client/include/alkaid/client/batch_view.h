#pragma once

/// \file
/// A received record batch as a caller-owned, reusable view
/// (BatchSubscriber::ReceiveInto): the arrays' lengths, null counts,
/// offsets and buffer addresses, pointing into the shared block, filled
/// from the subscriber's decode plan without allocating once the view has
/// seen a batch of the shape.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/shm/channel.h"

namespace alkaid::client {

/// One array of a BatchView: a column or a child of one.
struct ArrayView {
  const format::DataType* type = nullptr;
  int64_t length = 0;
  int64_t null_count = 0;
  int64_t offset = 0;
  /// Where this array's buffers and children are in the view's tables.
  uint32_t first_buffer = 0;
  uint32_t num_buffers = 0;
  uint32_t first_child = 0;
  uint32_t num_children = 0;
};

/// A received batch, owned by the caller and meant to be reused: each
/// BatchSubscriber::ReceiveInto lets go of the batch it held and fills the
/// view with the next one. For batches the subscriber rebuilds from a
/// decode plan without validating each (columns of fixed-width, struct and
/// fixed-size-list types; no dictionaries; not validate_full), filling
/// allocates nothing once the view's tables have grown to the shape; other
/// batches are decoded into a RecordBatch that the view keeps.
///
/// The view holds the batch's block (the producer does not reuse it) until
/// the next receive into it, Reset(), or its destruction, on any thread;
/// it may outlive the subscriber. Spans it hands out are valid as long.
class ALKAID_EXPORT BatchView {
 public:
  BatchView() = default;
  BatchView(BatchView&&) noexcept = default;
  BatchView& operator=(BatchView&&) noexcept = default;
  BatchView(const BatchView&) = delete;
  BatchView& operator=(const BatchView&) = delete;

  /// True once a batch was received into the view (and not Reset).
  bool valid() const { return valid_; }
  int64_t num_rows() const { return num_rows_; }
  int num_columns() const { return static_cast<int>(num_columns_); }
  const format::SchemaPtr& schema() const { return schema_; }
  /// Channel sequence of the message, and batches lost just before it.
  uint64_t sequence() const { return sequence_; }
  uint64_t lost_before() const { return lost_before_; }

  /// Column `c` (0 <= c < num_columns()).
  const ArrayView& column(int c) const { return nodes_[columns_[static_cast<size_t>(c)]]; }
  /// Child `i` of `array`.
  const ArrayView& child(const ArrayView& array, int i) const {
    return nodes_[children_[array.first_child + static_cast<uint32_t>(i)]];
  }
  /// Buffer `i` of `array` (empty if the array has no such buffer).
  std::span<const uint8_t> buffer(const ArrayView& array, int i) const {
    if (i < 0 || static_cast<uint32_t>(i) >= array.num_buffers) return {};
    return buffers_[array.first_buffer + static_cast<uint32_t>(i)];
  }
  /// The values of fixed-width column `c` as T, from the column's offset
  /// on (its buffer 1; the caller names the right T for the type).
  template <typename T>
  std::span<const T> Values(int c) const {
    const ArrayView& a = column(c);
    const auto bytes = buffer(a, 1);
    const auto* base = reinterpret_cast<const T*>(bytes.data());
    if (base == nullptr) return {};
    return {base + a.offset, static_cast<size_t>(a.length)};
  }

  /// The same batch as a RecordBatch whose buffers point into the block
  /// (zero-copy; allocates the object graph, once per received batch). The
  /// batch keeps the block on its own.
  Result<format::RecordBatchPtr> ToRecordBatch();

  /// Lets go of the batch (its block goes back to the producer).
  void Reset();

 private:
  friend class BatchSubscriber;

  bool valid_ = false;
  int64_t num_rows_ = 0;
  uint32_t num_columns_ = 0;
  uint64_t sequence_ = 0;
  uint64_t lost_before_ = 0;
  format::SchemaPtr schema_;
  format::MetadataPtr batch_metadata_;
  // The fast path holds the block; ToRecordBatch wraps it into `body_`
  // (shared with the batches it made) the first time.
  shm::ChannelBlock block_;
  uint64_t body_length_ = 0;
  std::shared_ptr<format::Buffer> body_;
  // The slow path keeps its decoded batch.
  format::RecordBatchPtr batch_;
  // Tables, reused: nodes (depth first per column), the node index of each
  // column, of each node's children, and each node's buffers.
  std::vector<ArrayView> nodes_;
  std::vector<uint32_t> columns_;
  std::vector<uint32_t> children_;
  std::vector<std::span<const uint8_t>> buffers_;
  // Where each buffer lies in the body (fast path, for ToRecordBatch):
  // offset, or -1 for an absent buffer.
  std::vector<int64_t> buffer_offsets_;
  std::vector<format::TypePtr> types_;  // owners of the nodes' type pointers
  uint64_t plan_serial_ = 0;            // the decode plan the tables are of (0: none)
};

}  // namespace alkaid::client
