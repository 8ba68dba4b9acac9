// Builders for binary/utf8, their large variants, and the view layouts.

#include <algorithm>
#include <limits>

#include "alkaid/format/builder.h"
#include "builder_internal.h"
#include "pool_object_internal.h"

namespace alkaid::format {

// ---------------------------------------------------------------------------
// BaseBinaryBuilder

template <typename OffsetT>
BaseBinaryBuilder<OffsetT>::BaseBinaryBuilder(TypePtr type, MemoryPool* pool)
    : ArrayBuilder(std::move(type), pool), offsets_(pool), data_(pool) {}

template <typename OffsetT>
Status BaseBinaryBuilder<OffsetT>::CheckDataCapacity(int64_t additional) const {
  if (additional > kMaxDataLength - data_.length()) {
    return Status::CapacityError(type_->ToString(), ": appending ", additional, " bytes at slot ",
                                 length_, " to the ", data_.length(),
                                 " bytes already held would exceed the ", kMaxDataLength,
                                 "-byte limit of its ", sizeof(OffsetT) * 8, "-bit offsets");
  }
  return Status::OK();
}

template <typename OffsetT>
Status BaseBinaryBuilder<OffsetT>::Reserve(int64_t additional) {
  ALKAID_RETURN_NOT_OK(ArrayBuilder::Reserve(additional));
  ALKAID_RETURN_NOT_OK(internal::CheckSlotReserve(additional, [this] { return Where(); }));
  return offsets_.Reserve(additional * static_cast<int64_t>(sizeof(OffsetT)));
}

template <typename OffsetT>
Status BaseBinaryBuilder<OffsetT>::ReserveData(int64_t additional) {
  ALKAID_RETURN_NOT_OK(CheckCount(additional, "byte"));
  ALKAID_RETURN_NOT_OK(CheckDataCapacity(additional));
  return data_.Reserve(additional);
}

template <typename OffsetT>
Status BaseBinaryBuilder<OffsetT>::AppendReserving(std::string_view value) {
  const auto size = static_cast<int64_t>(value.size());
  ALKAID_RETURN_NOT_OK(CheckDataCapacity(size));
  ALKAID_RETURN_NOT_OK(Reserve(1));
  ALKAID_RETURN_NOT_OK(data_.Reserve(size));
  offsets_.UnsafeAppendValue(static_cast<OffsetT>(data_.length()));
  data_.UnsafeAppend(value.data(), size);
  UnsafeAppendValidity(true);
  return Status::OK();
}

template <typename OffsetT>
Status BaseBinaryBuilder<OffsetT>::AppendValues(const std::vector<std::string>& values,
                                                const uint8_t* valid_bytes) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (valid_bytes != nullptr && valid_bytes[i] == 0) {
      ALKAID_RETURN_NOT_OK(AppendNull());
    } else {
      ALKAID_RETURN_NOT_OK(Append(values[i]));
    }
  }
  return Status::OK();
}

template <typename OffsetT>
Status BaseBinaryBuilder<OffsetT>::AppendNulls(int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, "null"));
  ALKAID_RETURN_NOT_OK(ReserveValidity(n, n > 0));
  ALKAID_RETURN_NOT_OK(Reserve(n));
  const auto offset = static_cast<OffsetT>(data_.length());
  for (int64_t i = 0; i < n; ++i) offsets_.UnsafeAppendValue(offset);
  UnsafeAppendValidity(n, false);
  return Status::OK();
}

template <typename OffsetT>
Status BaseBinaryBuilder<OffsetT>::AppendEmptyValues(int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, "value"));
  ALKAID_RETURN_NOT_OK(Reserve(n));
  const auto offset = static_cast<OffsetT>(data_.length());
  for (int64_t i = 0; i < n; ++i) offsets_.UnsafeAppendValue(offset);
  UnsafeAppendValidity(n, true);
  return Status::OK();
}

template <typename OffsetT>
Status BaseBinaryBuilder<OffsetT>::ResetBuffersTo(MemoryPool* pool) {
  offsets_.ResetTo(pool);
  data_.ResetTo(pool);
  return Status::OK();
}

template <typename OffsetT>
void BaseBinaryBuilder<OffsetT>::Reset() {
  ArrayBuilder::Reset();
  offsets_.Reset();
  data_.Reset();
}

template <typename OffsetT>
std::string_view BaseBinaryBuilder<OffsetT>::GetView(int64_t i) const {
  const OffsetT* offsets = offsets_.data_as<OffsetT>();
  const int64_t begin = offsets[i];
  const int64_t end = i + 1 < length_ ? int64_t{offsets[i + 1]} : data_.length();
  return {reinterpret_cast<const char*>(data_.data()) + begin, static_cast<size_t>(end - begin)};
}

template <typename OffsetT>
Result<ArrayDataPtr> BaseBinaryBuilder<OffsetT>::FinishInternal() {
  const TypeId id = StorageType(*type_).id();
  const bool ok = sizeof(OffsetT) == 4 ? IsBinaryLike(id) : IsLargeBinaryLike(id);
  if (!ok) {
    return Status::TypeError("a builder with ", sizeof(OffsetT) * 8, "-bit offsets cannot build ",
                             type_->ToString());
  }
  ALKAID_RETURN_NOT_OK(offsets_.AppendValue(static_cast<OffsetT>(data_.length())));
  ALKAID_ASSIGN_OR_RAISE(auto validity, FinishValidity());
  ALKAID_ASSIGN_OR_RAISE(auto offsets, offsets_.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto data, data_.Finish());
  return internal::MakeArrayData(pool_, type_, length_,
                                 {std::move(validity), std::move(offsets), std::move(data)},
                                 null_count_);
}

template class BaseBinaryBuilder<int32_t>;
template class BaseBinaryBuilder<int64_t>;

// ---------------------------------------------------------------------------
// BinaryViewBuilder

BinaryViewBuilder::BinaryViewBuilder(TypePtr type, MemoryPool* pool, int64_t block_size)
    : ArrayBuilder(std::move(type), pool),
      block_size_(std::max<int64_t>(1, block_size)),
      views_(pool),
      current_(pool) {}

Status BinaryViewBuilder::Reserve(int64_t additional) {
  ALKAID_RETURN_NOT_OK(ArrayBuilder::Reserve(additional));
  ALKAID_RETURN_NOT_OK(internal::CheckSlotReserve(additional, [this] { return Where(); }));
  return views_.Reserve(additional * static_cast<int64_t>(sizeof(BinaryViewHeader)));
}

Status BinaryViewBuilder::CloseBlock() {
  if (current_block_size_ == 0) return Status::OK();
  if (current_.length() == 0) {
    current_.Reset();
  } else {
    ALKAID_ASSIGN_OR_RAISE(auto block, current_.Finish());
    blocks_.push_back(std::move(block));
  }
  current_block_size_ = 0;
  return Status::OK();
}

Status BinaryViewBuilder::Append(std::string_view value) {
  const auto size = static_cast<int64_t>(value.size());
  if (size > std::numeric_limits<int32_t>::max()) {
    return Status::CapacityError(type_->ToString(), ": value for slot ", length_, " has ", size,
                                 " bytes; views hold at most ",
                                 std::numeric_limits<int32_t>::max());
  }
  ALKAID_RETURN_NOT_OK(Reserve(1));
  BinaryViewHeader view{};
  view.inlined.size = static_cast<int32_t>(size);
  if (size <= BinaryViewHeader::kInlineSize) {
    if (size > 0) std::memcpy(view.inlined.data, value.data(), static_cast<size_t>(size));
  } else {
    if (current_block_size_ == 0 || current_.length() + size > current_block_size_) {
      // Start a new block; allocate it before closing the current one so a
      // failure leaves the builder as it was.
      const int64_t new_size = std::max(block_size_, size);
      internal::BufferBuilder fresh(pool_);
      ALKAID_RETURN_NOT_OK(fresh.Reserve(new_size));
      ALKAID_RETURN_NOT_OK(CloseBlock());
      if (static_cast<int64_t>(blocks_.size()) >= std::numeric_limits<int32_t>::max()) {
        return Status::CapacityError(type_->ToString(), ": too many data buffers");
      }
      current_ = std::move(fresh);
      current_block_size_ = new_size;
    }
    std::memcpy(view.ref.prefix, value.data(), 4);
    view.ref.buffer_index = static_cast<int32_t>(blocks_.size());
    view.ref.offset = static_cast<int32_t>(current_.length());
    current_.UnsafeAppend(value.data(), size);
  }
  views_.UnsafeAppendValue(view);
  UnsafeAppendValidity(true);
  return Status::OK();
}

Status BinaryViewBuilder::AppendValues(const std::vector<std::string>& values,
                                       const uint8_t* valid_bytes) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (valid_bytes != nullptr && valid_bytes[i] == 0) {
      ALKAID_RETURN_NOT_OK(AppendNull());
    } else {
      ALKAID_RETURN_NOT_OK(Append(values[i]));
    }
  }
  return Status::OK();
}

Status BinaryViewBuilder::AppendNulls(int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, "null"));
  ALKAID_RETURN_NOT_OK(ReserveValidity(n, n > 0));
  ALKAID_RETURN_NOT_OK(Reserve(n));
  views_.UnsafeAppendZeros(n * static_cast<int64_t>(sizeof(BinaryViewHeader)));
  UnsafeAppendValidity(n, false);
  return Status::OK();
}

Status BinaryViewBuilder::AppendEmptyValues(int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, "value"));
  ALKAID_RETURN_NOT_OK(Reserve(n));
  views_.UnsafeAppendZeros(n * static_cast<int64_t>(sizeof(BinaryViewHeader)));
  UnsafeAppendValidity(n, true);
  return Status::OK();
}

void BinaryViewBuilder::Reset() {
  ArrayBuilder::Reset();
  views_.Reset();
  current_.Reset();
  current_block_size_ = 0;
  blocks_.clear();
}

Result<ArrayDataPtr> BinaryViewBuilder::FinishInternal() {
  if (!IsBinaryView(StorageType(*type_).id())) {
    return Status::TypeError("BinaryViewBuilder cannot build ", type_->ToString());
  }
  ALKAID_RETURN_NOT_OK(CloseBlock());
  ALKAID_ASSIGN_OR_RAISE(auto validity, FinishValidity());
  ALKAID_ASSIGN_OR_RAISE(auto views, views_.Finish());
  std::vector<std::shared_ptr<Buffer>> buffers;
  buffers.reserve(2 + blocks_.size());
  buffers.push_back(std::move(validity));
  buffers.push_back(std::move(views));
  for (auto& b : blocks_) buffers.push_back(std::move(b));
  blocks_.clear();
  return ArrayData::Make(type_, length_, std::move(buffers), null_count_);
}

}  // namespace alkaid::format
