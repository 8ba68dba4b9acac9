#pragma once

/// \file
/// Builders for the flat fixed-width layouts: null, boolean, integers,
/// floats, dates, times, timestamps, durations, intervals,
/// fixed_size_binary and decimals.

#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

#include "alkaid/format/builder_base.h"

namespace alkaid::format {

/// Builds arrays of the null type: every slot is null and nothing is
/// allocated.
class ALKAID_EXPORT NullBuilder : public ArrayBuilder {
 public:
  explicit NullBuilder(MemoryPool* pool = default_memory_pool());
  NullBuilder(TypePtr type, MemoryPool* pool);

  Status AppendNulls(int64_t n) override;
  /// The null type has no other value: same as AppendNulls.
  Status AppendEmptyValues(int64_t n) override { return AppendNulls(n); }

 protected:
  Result<ArrayDataPtr> FinishInternal() override;
  Status ResetBuffersTo(MemoryPool* /*pool*/) override { return Status::OK(); }
};

/// Builds boolean arrays (values bit-packed).
class ALKAID_EXPORT BooleanBuilder : public ArrayBuilder {
 public:
  explicit BooleanBuilder(MemoryPool* pool = default_memory_pool());
  BooleanBuilder(TypePtr type, MemoryPool* pool);

  Status Append(bool value);
  /// `n` values given one per byte (non-zero is true); `valid_bytes`, if
  /// given, marks slot i null where valid_bytes[i] == 0.
  Status AppendValues(const uint8_t* values, int64_t n, const uint8_t* valid_bytes = nullptr);
  Status AppendValues(const std::vector<bool>& values);
  Status AppendNulls(int64_t n) override;
  /// Appends `false` values.
  Status AppendEmptyValues(int64_t n) override;
  Status Reserve(int64_t additional) override;
  void Reset() override;

 protected:
  Result<ArrayDataPtr> FinishInternal() override;
  Status ResetBuffersTo(MemoryPool* pool) override {
    data_.ResetTo(pool);
    return Status::OK();
  }

 private:
  internal::BitmapBuilder data_;
};

/// Common base of the builders whose slots are `byte_width()` bytes each
/// (every fixed-width type except boolean). AppendRaw copies bytes as they
/// are; typed subclasses add checked, typed appends.
class ALKAID_EXPORT FixedWidthBuilder : public ArrayBuilder {
 public:
  /// `type` (or its storage type) must be a fixed-width type other than
  /// boolean; otherwise Finish reports a TypeError.
  FixedWidthBuilder(TypePtr type, MemoryPool* pool);

  int32_t byte_width() const { return byte_width_; }

  /// Appends one valid slot copied from `byte_width()` bytes at `value`.
  Status AppendRaw(const uint8_t* value);
  /// Appends `n` slots from `n * byte_width()` contiguous bytes; slot i is
  /// null where `valid_bytes` (if given) is 0.
  Status AppendRawValues(const uint8_t* values, int64_t n, const uint8_t* valid_bytes = nullptr);
  /// Null slots hold zero bytes.
  Status AppendNulls(int64_t n) override;
  /// Appends slots of zero bytes.
  Status AppendEmptyValues(int64_t n) override;
  Status Reserve(int64_t additional) override;
  void Reset() override;

  /// Bytes of slot i appended so far (i < length()).
  const uint8_t* GetValue(int64_t i) const { return data_.data() + i * byte_width_; }

 protected:
  Result<ArrayDataPtr> FinishInternal() override;
  Status ResetBuffersTo(MemoryPool* pool) override {
    data_.ResetTo(pool);
    return Status::OK();
  }
  ArrayPtr FinishLinked() override;

  internal::BufferBuilder data_;
  int32_t byte_width_;
  // The C value size a typed subclass appends (NumericBuilder: sizeof(T)),
  // which must be the byte width for Finish to succeed; 0: any.
  int32_t value_size_ = 0;
  // Whether type() is a fixed-width type other than boolean (found once, at
  // construction: Finish checks it).
  bool fixed_width_;
};

namespace internal {
/// The type a NumericBuilder<T> gets when none is given.
template <typename T>
TypePtr DefaultNumericType() {
  if constexpr (std::is_same_v<T, int8_t>)
    return int8();
  else if constexpr (std::is_same_v<T, int16_t>)
    return int16();
  else if constexpr (std::is_same_v<T, int32_t>)
    return int32();
  else if constexpr (std::is_same_v<T, int64_t>)
    return int64();
  else if constexpr (std::is_same_v<T, uint8_t>)
    return uint8();
  else if constexpr (std::is_same_v<T, uint16_t>)
    return uint16();
  else if constexpr (std::is_same_v<T, uint32_t>)
    return uint32();
  else if constexpr (std::is_same_v<T, uint64_t>)
    return uint64();
  else if constexpr (std::is_same_v<T, float>)
    return float32();
  else if constexpr (std::is_same_v<T, double>)
    return float64();
  else if constexpr (std::is_same_v<T, DayTimeInterval>)
    return day_time_interval();
  else if constexpr (std::is_same_v<T, MonthDayNanoInterval>)
    return month_day_nano_interval();
  else
    static_assert(sizeof(T) == 0, "no default type for this C type");
}
}  // namespace internal

/// Builds fixed-width arrays whose slots are C values of type T: integers,
/// floats (uint16_t bits for float16), date32/date64, time32/time64,
/// timestamp, duration, month intervals (int32_t), and the two struct-valued
/// intervals (DayTimeInterval, MonthDayNanoInterval).
///
/// The type's byte width must equal sizeof(T) (MakeBuilder guarantees it);
/// Finish reports a TypeError otherwise.
template <typename T>
class ALKAID_EXPORT NumericBuilder : public FixedWidthBuilder {
 public:
  static_assert(std::is_trivially_copyable_v<T>);
  using ValueType = T;

  /// A builder for the default type of T (int32 for int32_t, float64 for
  /// double, uint16 for uint16_t...).
  explicit NumericBuilder(MemoryPool* pool = default_memory_pool())
      : FixedWidthBuilder(internal::DefaultNumericType<T>(), pool) {
    value_size_ = static_cast<int32_t>(sizeof(T));
  }
  NumericBuilder(TypePtr type, MemoryPool* pool) : FixedWidthBuilder(std::move(type), pool) {
    value_size_ = static_cast<int32_t>(sizeof(T));
  }

  Status Append(T value) {
    ALKAID_RETURN_NOT_OK(Reserve(1));
    UnsafeAppend(value);
    return Status::OK();
  }
  /// FixedWidthBuilder::Reserve, its common case (no nulls so far, a count
  /// below 2^31) inline: final, so that a call through a NumericBuilder is
  /// direct and comes down to the value buffer's room test (and its
  /// growth, out of line). Anything else takes FixedWidthBuilder's way.
  Status Reserve(int64_t additional) final {
    // Unsigned: a negative count takes the general way, which refuses it.
    // Below 2^31 slots of at most 2^31 bytes: the product cannot overflow.
    if (!has_bitmap() && static_cast<uint64_t>(additional) <= kInlineReserveSlots) {
      return data_.Reserve(additional * byte_width_);
    }
    return FixedWidthBuilder::Reserve(additional);
  }
  /// Appends `n` values; slot i is null where `valid_bytes` (if given) is 0.
  Status AppendValues(const T* values, int64_t n, const uint8_t* valid_bytes = nullptr) {
    return AppendRawValues(reinterpret_cast<const uint8_t*>(values), n, valid_bytes);
  }
  Status AppendValues(const std::vector<T>& values) {
    return AppendValues(values.data(), static_cast<int64_t>(values.size()));
  }
  /// Appends after a successful Reserve; cannot fail.
  void UnsafeAppend(T value) {
    data_.UnsafeAppendValue(value);
    UnsafeAppendValid();
  }
  /// Value of slot i appended so far.
  T GetValueAt(int64_t i) const {
    T v;
    std::memcpy(&v, GetValue(i), sizeof(T));
    return v;
  }

 protected:
  Result<ArrayDataPtr> FinishInternal() override {
    if (static_cast<size_t>(byte_width_) != sizeof(T)) {
      return Status::TypeError("NumericBuilder of ", sizeof(T), "-byte values cannot build ",
                               type_->ToString(), " (", byte_width_, " bytes per value)");
    }
    return FixedWidthBuilder::FinishInternal();
  }

 private:
  static constexpr uint64_t kInlineReserveSlots = (uint64_t{1} << 31) - 1;
};

using Int8Builder = NumericBuilder<int8_t>;
using Int16Builder = NumericBuilder<int16_t>;
using Int32Builder = NumericBuilder<int32_t>;
using Int64Builder = NumericBuilder<int64_t>;
using UInt8Builder = NumericBuilder<uint8_t>;
using UInt16Builder = NumericBuilder<uint16_t>;
using UInt32Builder = NumericBuilder<uint32_t>;
using UInt64Builder = NumericBuilder<uint64_t>;
/// float16 values as their IEEE binary16 bit patterns.
using HalfFloatBuilder = NumericBuilder<uint16_t>;
using FloatBuilder = NumericBuilder<float>;
using DoubleBuilder = NumericBuilder<double>;
using DayTimeIntervalBuilder = NumericBuilder<DayTimeInterval>;
using MonthDayNanoIntervalBuilder = NumericBuilder<MonthDayNanoInterval>;

/// Builds fixed_size_binary arrays (and is the base of DecimalBuilder).
class ALKAID_EXPORT FixedSizeBinaryBuilder : public FixedWidthBuilder {
 public:
  FixedSizeBinaryBuilder(TypePtr type, MemoryPool* pool = default_memory_pool());

  /// Appends `value`, which must be exactly byte_width() bytes (Invalid
  /// otherwise, naming the slot).
  Status Append(std::string_view value);
  /// Appends byte_width() bytes from `value` (no length to check).
  Status Append(const uint8_t* value) { return AppendRaw(value); }
};

/// Builds decimal32/64/128/256 arrays. Slots are two's-complement
/// little-endian integers of byte_width() bytes holding the unscaled value
/// (value = unscaled * 10^-scale).
class ALKAID_EXPORT DecimalBuilder : public FixedSizeBinaryBuilder {
 public:
  /// `type` must be a decimal type.
  DecimalBuilder(TypePtr type, MemoryPool* pool = default_memory_pool());

  int32_t precision() const { return precision_; }
  int32_t scale() const { return scale_; }

  /// Appends the unscaled integer `unscaled` (so 12345 at scale 2 is
  /// 123.45). Invalid if it has more digits than the precision.
  Status AppendUnscaled(int64_t unscaled);
  /// Parses a decimal number ("-123.45", "+7", ".5", "1.2e3") and appends it
  /// at the type's scale, exactly: Invalid if it would need rounding, has
  /// more digits than the precision allows, or is malformed.
  Status AppendDecimal(std::string_view text);

 private:
  int32_t precision_;
  int32_t scale_;
};

}  // namespace alkaid::format
