#pragma once

/// \file
/// Builders for the variable-size binary layouts: binary/utf8 (32-bit
/// offsets), large_binary/large_utf8 (64-bit offsets) and the view layouts
/// binary_view/utf8_view.
///
/// String builders do not check UTF-8; ValidateFull does.

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "alkaid/format/builder_base.h"

namespace alkaid::format {

/// Builds offsets + data arrays with offsets of type OffsetT (int32_t or
/// int64_t). Appending a value that would push the data past the largest
/// offset fails with CapacityError and leaves the builder unchanged.
template <typename OffsetT>
class ALKAID_EXPORT BaseBinaryBuilder : public ArrayBuilder {
 public:
  static_assert(std::is_same_v<OffsetT, int32_t> || std::is_same_v<OffsetT, int64_t>);
  using OffsetType = OffsetT;
  /// Largest number of data bytes an array of this builder can hold.
  static constexpr int64_t kMaxDataLength = std::numeric_limits<OffsetT>::max();

  BaseBinaryBuilder(TypePtr type, MemoryPool* pool);

  Status Append(std::string_view value) {
    // Inline while the space is reserved and no slot is null (the bitmap's
    // bits would need their own room): two stores and a copy.
    const auto size = static_cast<int64_t>(value.size());
    if (!has_bitmap() && offsets_.HasRoom(sizeof(OffsetT)) && data_.HasRoom(size) &&
        size <= kMaxDataLength - data_.length()) {
      offsets_.UnsafeAppendValue(static_cast<OffsetT>(data_.length()));
      data_.UnsafeAppend(value.data(), size);
      UnsafeAppendValid();
      return Status::OK();
    }
    return AppendReserving(value);
  }
  Status Append(const uint8_t* value, int64_t length) {
    return Append(
        std::string_view(reinterpret_cast<const char*>(value), static_cast<size_t>(length)));
  }
  /// Appends every string; slot i is null where `valid_bytes` (if given) is
  /// 0 (its string is then ignored).
  Status AppendValues(const std::vector<std::string>& values, const uint8_t* valid_bytes = nullptr);
  /// Null slots are empty (their end offset equals their start).
  Status AppendNulls(int64_t n) override;
  /// Appends empty strings.
  Status AppendEmptyValues(int64_t n) override;
  Status Reserve(int64_t additional) override;
  /// Ensures `additional` more data bytes fit without reallocating.
  Status ReserveData(int64_t additional);
  void Reset() override;

  /// Data bytes appended so far.
  int64_t value_data_length() const { return data_.length(); }
  /// Value of slot i appended so far (i < length()).
  std::string_view GetView(int64_t i) const;

 protected:
  Result<ArrayDataPtr> FinishInternal() override;
  Status ResetBuffersTo(MemoryPool* pool) override;

 private:
  Status CheckDataCapacity(int64_t additional) const;
  // Append when space must be reserved first (or a bitmap extended).
  Status AppendReserving(std::string_view value);

  /// Start offset of each slot; the final end offset is added at Finish.
  internal::BufferBuilder offsets_;
  internal::BufferBuilder data_;
};

extern template class BaseBinaryBuilder<int32_t>;
extern template class BaseBinaryBuilder<int64_t>;

/// binary (32-bit offsets).
class ALKAID_EXPORT BinaryBuilder : public BaseBinaryBuilder<int32_t> {
 public:
  explicit BinaryBuilder(MemoryPool* pool = default_memory_pool())
      : BaseBinaryBuilder(binary(), pool) {}
  BinaryBuilder(TypePtr type, MemoryPool* pool) : BaseBinaryBuilder(std::move(type), pool) {}
};

/// utf8 (32-bit offsets).
class ALKAID_EXPORT StringBuilder : public BinaryBuilder {
 public:
  explicit StringBuilder(MemoryPool* pool = default_memory_pool()) : BinaryBuilder(utf8(), pool) {}
  StringBuilder(TypePtr type, MemoryPool* pool) : BinaryBuilder(std::move(type), pool) {}
};

/// large_binary (64-bit offsets).
class ALKAID_EXPORT LargeBinaryBuilder : public BaseBinaryBuilder<int64_t> {
 public:
  explicit LargeBinaryBuilder(MemoryPool* pool = default_memory_pool())
      : BaseBinaryBuilder(large_binary(), pool) {}
  LargeBinaryBuilder(TypePtr type, MemoryPool* pool) : BaseBinaryBuilder(std::move(type), pool) {}
};

/// large_utf8 (64-bit offsets).
class ALKAID_EXPORT LargeStringBuilder : public LargeBinaryBuilder {
 public:
  explicit LargeStringBuilder(MemoryPool* pool = default_memory_pool())
      : LargeBinaryBuilder(large_utf8(), pool) {}
  LargeStringBuilder(TypePtr type, MemoryPool* pool) : LargeBinaryBuilder(std::move(type), pool) {}
};

/// Builds binary_view / utf8_view arrays.
///
/// Values of at most 12 bytes are stored inline in their 16-byte view (zero
/// padded). Longer values get a 4-byte prefix in the view plus the index of
/// a variadic data buffer and their offset in it. Data buffers are filled
/// one block at a time: when a value does not fit in the rest of the current
/// block, the block is closed and a new one of max(block_size, value size)
/// bytes is started, so a value never spans blocks. The finished array's
/// buffers are [validity, views, data 0, data 1, ...], each data buffer
/// trimmed to the bytes it holds.
class ALKAID_EXPORT BinaryViewBuilder : public ArrayBuilder {
 public:
  /// Default size of a data block.
  static constexpr int64_t kDefaultBlockSize = int64_t{32} * 1024;

  explicit BinaryViewBuilder(MemoryPool* pool = default_memory_pool())
      : BinaryViewBuilder(binary_view(), pool) {}
  BinaryViewBuilder(TypePtr type, MemoryPool* pool, int64_t block_size = kDefaultBlockSize);

  /// Values longer than INT32_MAX bytes fail with CapacityError.
  Status Append(std::string_view value);
  Status AppendValues(const std::vector<std::string>& values, const uint8_t* valid_bytes = nullptr);
  /// Null slots have all-zero views.
  Status AppendNulls(int64_t n) override;
  Status AppendEmptyValues(int64_t n) override;
  Status Reserve(int64_t additional) override;
  void Reset() override;

  int64_t block_size() const { return block_size_; }
  /// Changes the size of blocks started from now on (at least 1).
  void set_block_size(int64_t block_size) { block_size_ = block_size < 1 ? 1 : block_size; }
  /// Data buffers closed or in progress so far.
  int64_t num_data_buffers() const {
    return static_cast<int64_t>(blocks_.size()) + (current_block_size_ > 0 ? 1 : 0);
  }

 protected:
  Result<ArrayDataPtr> FinishInternal() override;

 private:
  Status CloseBlock();

  int64_t block_size_;
  internal::BufferBuilder views_;
  /// The block being filled and its size limit (0: no block open).
  internal::BufferBuilder current_;
  int64_t current_block_size_ = 0;
  std::vector<std::shared_ptr<Buffer>> blocks_;
};

/// utf8_view.
class ALKAID_EXPORT StringViewBuilder : public BinaryViewBuilder {
 public:
  explicit StringViewBuilder(MemoryPool* pool = default_memory_pool())
      : BinaryViewBuilder(utf8_view(), pool) {}
  StringViewBuilder(TypePtr type, MemoryPool* pool, int64_t block_size = kDefaultBlockSize)
      : BinaryViewBuilder(std::move(type), pool, block_size) {}
};

}  // namespace alkaid::format
