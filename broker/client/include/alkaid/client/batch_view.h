#pragma once

/// \file
/// BatchView: a received record batch with its channel sequence and loss
/// count, for the deprecated `*Into` calls (BatchSubscriber::ReceiveInto,
/// Consumer::NextInto).
///
/// Deprecated: receive with BatchSubscriber::Receive or Consumer::Next. A
/// batch of a cached shape is made from recycled objects (a
/// format::BatchTemplate), so those calls allocate nothing in steady state
/// either; a view now only holds such a batch.

#include <cstdint>
#include <span>
#include <utility>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/record_batch.h"

namespace alkaid::client {

/// A received batch (deprecated: see the file comment). Holds the batch,
/// and with it the batch's shared block, until the next receive into it,
/// Reset(), or its destruction, on any thread; it may outlive the
/// subscriber.
class ALKAID_EXPORT BatchView {
 public:
  BatchView() = default;
  /// A view of `batch`, received at channel `sequence` after `lost_before`
  /// lost batches.
  BatchView(format::RecordBatchPtr batch, uint64_t sequence, uint64_t lost_before)
      : batch_(std::move(batch)), sequence_(sequence), lost_before_(lost_before) {}

  /// True once a batch was received into the view (and not Reset).
  bool valid() const { return batch_ != nullptr; }
  int64_t num_rows() const { return batch_ == nullptr ? 0 : batch_->num_rows(); }
  int num_columns() const { return batch_ == nullptr ? 0 : batch_->num_columns(); }
  /// The batch's schema (the view must be valid()).
  const format::SchemaPtr& schema() const { return batch_->schema(); }
  /// Channel sequence of the message, and batches lost just before it.
  uint64_t sequence() const { return sequence_; }
  uint64_t lost_before() const { return lost_before_; }
  /// The batch (null when not valid()).
  const format::RecordBatchPtr& batch() const { return batch_; }

  /// The values of fixed-width column `c` as T, from the column's offset
  /// on (its buffer 1; the caller names the right T for the type).
  template <typename T>
  std::span<const T> Values(int c) const {
    const auto& a = batch_->column_data(c);
    const T* base = a->template GetValues<T>(1);
    if (base == nullptr) return {};
    return {base, static_cast<size_t>(a->length)};
  }

  /// The batch (it is one already; nothing is made).
  Result<format::RecordBatchPtr> ToRecordBatch() const {
    if (batch_ == nullptr)
      return Status::Invalid("BatchView::ToRecordBatch: the view holds no batch");
    return batch_;
  }

  /// Lets go of the batch (its block goes back to the producer once nothing
  /// else holds it).
  void Reset() { batch_.reset(); }

 private:
  format::RecordBatchPtr batch_;
  uint64_t sequence_ = 0;
  uint64_t lost_before_ = 0;
};

}  // namespace alkaid::client
