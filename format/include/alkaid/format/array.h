#pragma once

/// \file
/// Typed, read-only views over ArrayData.
///
/// An Array is cheap to create (it holds a shared_ptr to its ArrayData) and
/// immutable; any number of threads may read it. Accessors take logical
/// indices (0..length-1, the slice offset is applied for you) and do not check
/// bounds: validate untrusted data first (validate.h).

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "alkaid/common/export.h"
#include "alkaid/format/array_data.h"
#include "alkaid/format/type.h"

namespace alkaid::format {

/// Wraps `data` in the typed Array class for its type.
ALKAID_EXPORT ArrayPtr MakeArray(ArrayDataPtr data);

namespace internal {
struct ArrayAccess;
/// How a nested array's constructor makes the arrays of its children: by
/// MakeArray (`make` null), or as a BatchTemplate graph's own objects
/// (batch_template.cc, through ArrayAccess). Not API.
struct ChildArrays {
  ArrayPtr (*make)(void* context, const ArrayDataPtr& child) = nullptr;
  void* context = nullptr;
  /// An extension array's storage array (`extension` its data); null: the
  /// graph has none for it (then never called).
  ArrayPtr (*storage)(void* context, const ArrayDataPtr& extension) = nullptr;
  ArrayPtr operator()(const ArrayDataPtr& child) const {
    return make == nullptr ? MakeArray(child) : make(context, child);
  }
};
}  // namespace internal

/// Base of all typed arrays.
class ALKAID_EXPORT Array {
 public:
  explicit Array(ArrayDataPtr data) : data_(std::move(data)) {}
  virtual ~Array() = default;

  const ArrayDataPtr& data() const { return data_; }
  const TypePtr& type() const { return data_->type; }
  TypeId type_id() const { return data_->type->id(); }
  int64_t length() const { return data_->length; }
  int64_t offset() const { return data_->offset; }
  int64_t null_count() const { return data_->GetNullCount(); }

  /// Logical nullness of slot i: the validity bitmap for most types; for
  /// the null type always true; for unions the selected child's slot; for
  /// run-end encoded arrays the run's value; for dictionary arrays the index
  /// (a null dictionary value referenced by a valid index is also null).
  bool IsNull(int64_t i) const;
  bool IsValid(int64_t i) const { return !IsNull(i); }

  /// Zero-copy slice; `length` is clamped to the array's end.
  std::shared_ptr<Array> Slice(int64_t offset, int64_t length) const;
  std::shared_ptr<Array> Slice(int64_t offset) const { return Slice(offset, length() - offset); }

  /// Logical equality (see compare.h).
  bool Equals(const Array& other) const;
  /// Readable multi-line form (see pretty_print.h).
  std::string ToString() const;

 protected:
  friend struct internal::ArrayAccess;
  ArrayDataPtr data_;
};

class ALKAID_EXPORT NullArray : public Array {
 public:
  using Array::Array;
};

class ALKAID_EXPORT BooleanArray : public Array {
 public:
  using Array::Array;
  bool Value(int64_t i) const {
    return bit_util::GetBit(data_->buffers[1]->data(), data_->offset + i);
  }
};

/// Fixed-width arrays whose values are C values of type T: integers, floats
/// (uint16_t for float16), date/time/timestamp/duration, month intervals.
template <typename T>
class ALKAID_EXPORT NumericArray : public Array {
 public:
  using CType = T;
  using Array::Array;
  T Value(int64_t i) const {
    T v;
    std::memcpy(&v, raw_values() + i, sizeof(T));
    return v;
  }
  /// Values starting at the slice offset.
  const T* raw_values() const { return data_->GetValues<T>(1); }
};

using Int8Array = NumericArray<int8_t>;
using Int16Array = NumericArray<int16_t>;
using Int32Array = NumericArray<int32_t>;
using Int64Array = NumericArray<int64_t>;
using UInt8Array = NumericArray<uint8_t>;
using UInt16Array = NumericArray<uint16_t>;
using UInt32Array = NumericArray<uint32_t>;
using UInt64Array = NumericArray<uint64_t>;
using HalfFloatArray = NumericArray<uint16_t>;
using FloatArray = NumericArray<float>;
using DoubleArray = NumericArray<double>;

/// Day-time interval: two int32 (days, milliseconds).
struct DayTimeInterval {
  int32_t days;
  int32_t milliseconds;
  bool operator==(const DayTimeInterval&) const = default;
};
/// Month-day-nano interval: int32 months, int32 days, int64 nanoseconds.
struct MonthDayNanoInterval {
  int32_t months;
  int32_t days;
  int64_t nanoseconds;
  bool operator==(const MonthDayNanoInterval&) const = default;
};
static_assert(sizeof(DayTimeInterval) == 8 && sizeof(MonthDayNanoInterval) == 16);

/// fixed_size_binary, decimals and the two struct-valued intervals: each slot
/// is byte_width() bytes.
class ALKAID_EXPORT FixedSizeBinaryArray : public Array {
 public:
  explicit FixedSizeBinaryArray(ArrayDataPtr data);
  int32_t byte_width() const { return byte_width_; }
  const uint8_t* GetValue(int64_t i) const { return raw_values() + i * byte_width_; }
  std::string_view GetView(int64_t i) const {
    return {reinterpret_cast<const char*>(GetValue(i)), static_cast<size_t>(byte_width_)};
  }
  const uint8_t* raw_values() const {
    return data_->buffers[1]->data() + data_->offset * byte_width_;
  }

 private:
  int32_t byte_width_;
};

/// binary/string (int32_t offsets) and large_binary/large_string (int64_t).
template <typename OffsetT>
class ALKAID_EXPORT BaseBinaryArray : public Array {
 public:
  using OffsetType = OffsetT;
  using Array::Array;
  const OffsetT* raw_offsets() const { return data_->GetValues<OffsetT>(1); }
  const uint8_t* raw_data() const {
    return data_->buffers[2] == nullptr ? nullptr : data_->buffers[2]->data();
  }
  OffsetT value_offset(int64_t i) const { return raw_offsets()[i]; }
  OffsetT value_length(int64_t i) const { return raw_offsets()[i + 1] - raw_offsets()[i]; }
  std::string_view GetView(int64_t i) const {
    const OffsetT begin = raw_offsets()[i];
    return {reinterpret_cast<const char*>(raw_data()) + begin,
            static_cast<size_t>(raw_offsets()[i + 1] - begin)};
  }
  std::string GetString(int64_t i) const { return std::string(GetView(i)); }
};
using BinaryArray = BaseBinaryArray<int32_t>;
using StringArray = BaseBinaryArray<int32_t>;
using LargeBinaryArray = BaseBinaryArray<int64_t>;
using LargeStringArray = BaseBinaryArray<int64_t>;

/// One 16-byte view of binary_view/utf8_view: inline for <= 12 bytes,
/// otherwise a 4-byte prefix, a data-buffer index and an offset.
union BinaryViewHeader {
  static constexpr int32_t kInlineSize = 12;
  struct {
    int32_t size;
    uint8_t data[kInlineSize];
  } inlined;
  struct {
    int32_t size;
    uint8_t prefix[4];
    int32_t buffer_index;
    int32_t offset;
  } ref;
  int32_t size() const { return inlined.size; }
  bool is_inline() const { return inlined.size <= kInlineSize; }
};
static_assert(sizeof(BinaryViewHeader) == 16);

class ALKAID_EXPORT BinaryViewArray : public Array {
 public:
  using Array::Array;
  const BinaryViewHeader* raw_views() const { return data_->GetValues<BinaryViewHeader>(1); }
  /// The value of slot i. Assumes a valid array (buffer index and range).
  std::string_view GetView(int64_t i) const;
  std::string GetString(int64_t i) const { return std::string(GetView(i)); }
  /// Number of variadic data buffers.
  int64_t num_data_buffers() const { return static_cast<int64_t>(data_->buffers.size()) - 2; }
};
using StringViewArray = BinaryViewArray;

/// list/large_list/map: offsets into one child array.
template <typename OffsetT>
class ALKAID_EXPORT BaseListArray : public Array {
 public:
  using OffsetType = OffsetT;
  explicit BaseListArray(ArrayDataPtr data) : BaseListArray(std::move(data), {}) {}
  const OffsetT* raw_offsets() const { return data_->GetValues<OffsetT>(1); }
  OffsetT value_offset(int64_t i) const { return raw_offsets()[i]; }
  OffsetT value_length(int64_t i) const { return raw_offsets()[i + 1] - raw_offsets()[i]; }
  /// The whole child array (not sliced to this array's range).
  const ArrayPtr& values() const { return values_; }
  /// The child values of slot i, as a slice.
  ArrayPtr value_slice(int64_t i) const { return values_->Slice(value_offset(i), value_length(i)); }

 protected:
  friend struct internal::ArrayAccess;
  BaseListArray(ArrayDataPtr data, const internal::ChildArrays& make)
      : Array(std::move(data)), values_(make(data_->child_data[0])) {}
  ArrayPtr values_;
};
using ListArray = BaseListArray<int32_t>;
using LargeListArray = BaseListArray<int64_t>;

class ALKAID_EXPORT MapArray : public ListArray {
 public:
  explicit MapArray(ArrayDataPtr data) : MapArray(std::move(data), {}) {}
  const ArrayPtr& keys() const { return keys_; }
  const ArrayPtr& items() const { return items_; }

 private:
  friend struct internal::ArrayAccess;
  MapArray(ArrayDataPtr data, const internal::ChildArrays& make);
  ArrayPtr keys_;
  ArrayPtr items_;
};

/// list_view/large_list_view: offsets and sizes into one child array.
template <typename OffsetT>
class ALKAID_EXPORT BaseListViewArray : public Array {
 public:
  using OffsetType = OffsetT;
  explicit BaseListViewArray(ArrayDataPtr data) : BaseListViewArray(std::move(data), {}) {}
  const OffsetT* raw_offsets() const { return data_->GetValues<OffsetT>(1); }
  const OffsetT* raw_sizes() const { return data_->GetValues<OffsetT>(2); }
  OffsetT value_offset(int64_t i) const { return raw_offsets()[i]; }
  OffsetT value_length(int64_t i) const { return raw_sizes()[i]; }
  const ArrayPtr& values() const { return values_; }
  ArrayPtr value_slice(int64_t i) const { return values_->Slice(value_offset(i), value_length(i)); }

 private:
  friend struct internal::ArrayAccess;
  BaseListViewArray(ArrayDataPtr data, const internal::ChildArrays& make)
      : Array(std::move(data)), values_(make(data_->child_data[0])) {}
  ArrayPtr values_;
};
using ListViewArray = BaseListViewArray<int32_t>;
using LargeListViewArray = BaseListViewArray<int64_t>;

class ALKAID_EXPORT FixedSizeListArray : public Array {
 public:
  explicit FixedSizeListArray(ArrayDataPtr data) : FixedSizeListArray(std::move(data), {}) {}
  int32_t list_size() const { return list_size_; }
  int64_t value_offset(int64_t i) const { return (data_->offset + i) * list_size_; }
  int64_t value_length(int64_t /*i*/) const { return list_size_; }
  const ArrayPtr& values() const { return values_; }
  ArrayPtr value_slice(int64_t i) const { return values_->Slice(value_offset(i), list_size_); }

 private:
  friend struct internal::ArrayAccess;
  FixedSizeListArray(ArrayDataPtr data, const internal::ChildArrays& make);
  int32_t list_size_;
  ArrayPtr values_;
};

class ALKAID_EXPORT StructArray : public Array {
 public:
  explicit StructArray(ArrayDataPtr data) : StructArray(std::move(data), {}) {}
  int num_fields() const { return static_cast<int>(fields_.size()); }
  /// Child i as stored (its own offset; the struct's offset is NOT applied).
  const ArrayPtr& field(int i) const { return fields_[static_cast<size_t>(i)]; }
  /// Child i sliced to this struct's offset and length.
  ArrayPtr GetFlattenedField(int i) const;
  ArrayPtr GetFieldByName(std::string_view name) const;

 private:
  friend struct internal::ArrayAccess;
  StructArray(ArrayDataPtr data, const internal::ChildArrays& make);
  std::vector<ArrayPtr> fields_;
};

class ALKAID_EXPORT UnionArray : public Array {
 public:
  explicit UnionArray(ArrayDataPtr data) : UnionArray(std::move(data), {}) {}
  const UnionType& union_type() const { return static_cast<const UnionType&>(*type()); }
  UnionMode mode() const { return union_type().mode(); }
  const int8_t* raw_type_codes() const { return data_->GetValues<int8_t>(0); }
  int8_t type_code(int64_t i) const { return raw_type_codes()[i]; }
  /// Child index of slot i.
  int child_id(int64_t i) const {
    return union_type().child_ids()[static_cast<size_t>(static_cast<uint8_t>(type_code(i)))];
  }
  /// Index into the child of slot i (dense: the offsets buffer; sparse: the
  /// slot's position plus the array offset).
  int64_t value_offset(int64_t i) const {
    return mode() == UnionMode::kDense ? data_->GetValues<int32_t>(1)[i] : data_->offset + i;
  }
  const ArrayPtr& field(int i) const { return fields_[static_cast<size_t>(i)]; }
  int num_fields() const { return static_cast<int>(fields_.size()); }

 private:
  friend struct internal::ArrayAccess;
  UnionArray(ArrayDataPtr data, const internal::ChildArrays& make);
  std::vector<ArrayPtr> fields_;
};

class ALKAID_EXPORT DictionaryArray : public Array {
 public:
  explicit DictionaryArray(ArrayDataPtr data);
  const DictionaryType& dict_type() const { return static_cast<const DictionaryType&>(*type()); }
  /// The indices as an integer array (same offset and length).
  const ArrayPtr& indices() const { return indices_; }
  /// The dictionary values (may be null if the data has none attached).
  const ArrayPtr& dictionary() const { return dictionary_; }
  /// Index of slot i, widened to int64.
  int64_t GetIndex(int64_t i) const;

 private:
  ArrayPtr indices_;
  ArrayPtr dictionary_;
};

class ALKAID_EXPORT RunEndEncodedArray : public Array {
 public:
  explicit RunEndEncodedArray(ArrayDataPtr data) : RunEndEncodedArray(std::move(data), {}) {}
  const ArrayPtr& run_ends() const { return run_ends_; }
  const ArrayPtr& values() const { return values_; }
  /// Index into values() of logical slot i (binary search over run ends,
  /// taking the array offset into account).
  int64_t FindPhysicalIndex(int64_t i) const;
  /// Run end i as int64.
  int64_t RunEnd(int64_t i) const;

 private:
  friend struct internal::ArrayAccess;
  RunEndEncodedArray(ArrayDataPtr data, const internal::ChildArrays& make);
  ArrayPtr run_ends_;
  ArrayPtr values_;
};

class ALKAID_EXPORT ExtensionArray : public Array {
 public:
  explicit ExtensionArray(ArrayDataPtr data);
  const ExtensionType& extension_type() const { return static_cast<const ExtensionType&>(*type()); }
  /// The same data typed as the storage type.
  const ArrayPtr& storage() const { return storage_; }

 private:
  friend struct internal::ArrayAccess;
  // A BatchTemplate graph's: the storage array is the graph's own (`make`'s).
  ExtensionArray(ArrayDataPtr data, const internal::ChildArrays& make);
  ArrayPtr storage_;
};

}  // namespace alkaid::format
