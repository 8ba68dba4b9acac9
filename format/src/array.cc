#include "alkaid/format/array.h"

#include <algorithm>
#include <type_traits>

#include "alkaid/format/compare.h"
#include "alkaid/format/pretty_print.h"
#include "array_internal.h"
#include "pool_object_internal.h"

namespace alkaid::format {

bool Array::IsNull(int64_t i) const {
  switch (type_id()) {
    case TypeId::kNull:
      return true;
    case TypeId::kSparseUnion:
    case TypeId::kDenseUnion: {
      const auto& u = static_cast<const UnionArray&>(*this);
      return u.field(u.child_id(i))->IsNull(u.value_offset(i));
    }
    case TypeId::kRunEndEncoded: {
      const auto& r = static_cast<const RunEndEncodedArray&>(*this);
      return r.values()->IsNull(r.FindPhysicalIndex(i));
    }
    case TypeId::kDictionary: {
      if (data_->IsNull(i)) return true;
      const auto& d = static_cast<const DictionaryArray&>(*this);
      return d.dictionary() != nullptr && d.dictionary()->IsNull(d.GetIndex(i));
    }
    case TypeId::kExtension:
      return static_cast<const ExtensionArray&>(*this).storage()->IsNull(i);
    default:
      return data_->IsNull(i);
  }
}

std::shared_ptr<Array> Array::Slice(int64_t offset, int64_t length) const {
  offset = std::clamp<int64_t>(offset, 0, this->length());
  length = std::clamp<int64_t>(length, 0, this->length() - offset);
  return MakeArray(data_->Slice(offset, length));
}

bool Array::Equals(const Array& other) const { return ArrayEquals(*this, other); }

std::string Array::ToString() const { return PrettyPrint(*this); }

FixedSizeBinaryArray::FixedSizeBinaryArray(ArrayDataPtr data)
    : Array(std::move(data)), byte_width_(BitWidth(StorageType(*data_->type)) / 8) {}

std::string_view BinaryViewArray::GetView(int64_t i) const {
  const BinaryViewHeader& v = raw_views()[i];
  if (v.is_inline()) {
    return {reinterpret_cast<const char*>(v.inlined.data), static_cast<size_t>(v.size())};
  }
  const auto& buf = data_->buffers[static_cast<size_t>(v.ref.buffer_index) + 2];
  return {reinterpret_cast<const char*>(buf->data()) + v.ref.offset, static_cast<size_t>(v.size())};
}

MapArray::MapArray(ArrayDataPtr data, const internal::ChildArrays& make)
    : ListArray(std::move(data), make) {
  const auto& entries = values_->data();
  keys_ = make(entries->child_data[0]);
  items_ = make(entries->child_data[1]);
}

FixedSizeListArray::FixedSizeListArray(ArrayDataPtr data, const internal::ChildArrays& make)
    : Array(std::move(data)),
      list_size_(static_cast<const FixedSizeListType&>(StorageType(*data_->type)).list_size()),
      values_(make(data_->child_data[0])) {}

StructArray::StructArray(ArrayDataPtr data, const internal::ChildArrays& make)
    : Array(std::move(data)) {
  fields_.reserve(data_->child_data.size());
  for (const auto& child : data_->child_data) fields_.push_back(make(child));
}

ArrayPtr StructArray::GetFlattenedField(int i) const {
  return MakeArray(fields_[static_cast<size_t>(i)]->data()->Slice(data_->offset, data_->length));
}

ArrayPtr StructArray::GetFieldByName(std::string_view name) const {
  const int i = static_cast<const StructType&>(StorageType(*type())).GetFieldIndex(name);
  return i < 0 ? nullptr : fields_[static_cast<size_t>(i)];
}

UnionArray::UnionArray(ArrayDataPtr data, const internal::ChildArrays& make)
    : Array(std::move(data)) {
  fields_.reserve(data_->child_data.size());
  for (const auto& child : data_->child_data) fields_.push_back(make(child));
}

DictionaryArray::DictionaryArray(ArrayDataPtr data) : Array(std::move(data)) {
  auto idx = std::make_shared<ArrayData>(*data_);
  idx->type = dict_type().index_type();
  idx->dictionary = nullptr;
  indices_ = MakeArray(std::move(idx));
  if (data_->dictionary != nullptr) dictionary_ = MakeArray(data_->dictionary);
}

int64_t DictionaryArray::GetIndex(int64_t i) const {
  const int64_t j = data_->offset + i;
  const uint8_t* p = data_->buffers[1]->data();
  switch (dict_type().index_type()->id()) {
    case TypeId::kInt8:
      return reinterpret_cast<const int8_t*>(p)[j];
    case TypeId::kUInt8:
      return p[j];
    case TypeId::kInt16:
      return reinterpret_cast<const int16_t*>(p)[j];
    case TypeId::kUInt16:
      return reinterpret_cast<const uint16_t*>(p)[j];
    case TypeId::kInt32:
      return reinterpret_cast<const int32_t*>(p)[j];
    case TypeId::kUInt32:
      return reinterpret_cast<const uint32_t*>(p)[j];
    case TypeId::kInt64:
      return reinterpret_cast<const int64_t*>(p)[j];
    case TypeId::kUInt64:
      return static_cast<int64_t>(reinterpret_cast<const uint64_t*>(p)[j]);
    default:
      return -1;
  }
}

RunEndEncodedArray::RunEndEncodedArray(ArrayDataPtr data, const internal::ChildArrays& make)
    : Array(std::move(data)),
      run_ends_(make(data_->child_data[0])),
      values_(make(data_->child_data[1])) {}

int64_t RunEndEncodedArray::RunEnd(int64_t i) const {
  const auto& re = *run_ends_->data();
  switch (re.type->id()) {
    case TypeId::kInt16:
      return re.GetValues<int16_t>(1)[i];
    case TypeId::kInt32:
      return re.GetValues<int32_t>(1)[i];
    default:
      return re.GetValues<int64_t>(1)[i];
  }
}

int64_t RunEndEncodedArray::FindPhysicalIndex(int64_t i) const {
  // First run whose end is greater than the logical position.
  const int64_t logical = data_->offset + i;
  int64_t lo = 0;
  int64_t hi = run_ends_->length();
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (RunEnd(mid) <= logical) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

ExtensionArray::ExtensionArray(ArrayDataPtr data) : Array(std::move(data)) {
  auto storage = std::make_shared<ArrayData>(*data_);
  storage->type = extension_type().storage_type();
  storage_ = MakeArray(std::move(storage));
}

ExtensionArray::ExtensionArray(ArrayDataPtr data, const internal::ChildArrays& make)
    : Array(std::move(data)), storage_(make.storage(make.context, data_)) {}

namespace {

// The typed Array class for `data`'s type, made by `make(tag, data)` where
// `tag` is a std::type_identity of that class.
template <typename Make>
auto MakeTypedArray(ArrayDataPtr data, const Make& make)
    -> decltype(make(std::type_identity<Array>{}, std::move(data))) {
  switch (data->type->id()) {
    case TypeId::kNull:
      return make(std::type_identity<NullArray>{}, std::move(data));
    case TypeId::kBool:
      return make(std::type_identity<BooleanArray>{}, std::move(data));
    case TypeId::kInt8:
      return make(std::type_identity<Int8Array>{}, std::move(data));
    case TypeId::kUInt8:
      return make(std::type_identity<UInt8Array>{}, std::move(data));
    case TypeId::kInt16:
      return make(std::type_identity<Int16Array>{}, std::move(data));
    case TypeId::kUInt16:
    case TypeId::kHalfFloat:
      return make(std::type_identity<UInt16Array>{}, std::move(data));
    case TypeId::kInt32:
    case TypeId::kDate32:
    case TypeId::kTime32:
    case TypeId::kIntervalMonths:
      return make(std::type_identity<Int32Array>{}, std::move(data));
    case TypeId::kUInt32:
      return make(std::type_identity<UInt32Array>{}, std::move(data));
    case TypeId::kInt64:
    case TypeId::kDate64:
    case TypeId::kTime64:
    case TypeId::kTimestamp:
    case TypeId::kDuration:
      return make(std::type_identity<Int64Array>{}, std::move(data));
    case TypeId::kUInt64:
      return make(std::type_identity<UInt64Array>{}, std::move(data));
    case TypeId::kFloat:
      return make(std::type_identity<FloatArray>{}, std::move(data));
    case TypeId::kDouble:
      return make(std::type_identity<DoubleArray>{}, std::move(data));
    case TypeId::kDecimal32:
    case TypeId::kDecimal64:
    case TypeId::kDecimal128:
    case TypeId::kDecimal256:
    case TypeId::kIntervalDayTime:
    case TypeId::kIntervalMonthDayNano:
    case TypeId::kFixedSizeBinary:
      return make(std::type_identity<FixedSizeBinaryArray>{}, std::move(data));
    case TypeId::kBinary:
    case TypeId::kString:
      return make(std::type_identity<BinaryArray>{}, std::move(data));
    case TypeId::kLargeBinary:
    case TypeId::kLargeString:
      return make(std::type_identity<LargeBinaryArray>{}, std::move(data));
    case TypeId::kBinaryView:
    case TypeId::kStringView:
      return make(std::type_identity<BinaryViewArray>{}, std::move(data));
    case TypeId::kFixedSizeList:
      return make(std::type_identity<FixedSizeListArray>{}, std::move(data));
    case TypeId::kList:
      return make(std::type_identity<ListArray>{}, std::move(data));
    case TypeId::kLargeList:
      return make(std::type_identity<LargeListArray>{}, std::move(data));
    case TypeId::kListView:
      return make(std::type_identity<ListViewArray>{}, std::move(data));
    case TypeId::kLargeListView:
      return make(std::type_identity<LargeListViewArray>{}, std::move(data));
    case TypeId::kStruct:
      return make(std::type_identity<StructArray>{}, std::move(data));
    case TypeId::kMap:
      return make(std::type_identity<MapArray>{}, std::move(data));
    case TypeId::kSparseUnion:
    case TypeId::kDenseUnion:
      return make(std::type_identity<UnionArray>{}, std::move(data));
    case TypeId::kDictionary:
      return make(std::type_identity<DictionaryArray>{}, std::move(data));
    case TypeId::kRunEndEncoded:
      return make(std::type_identity<RunEndEncodedArray>{}, std::move(data));
    case TypeId::kExtension:
      return make(std::type_identity<ExtensionArray>{}, std::move(data));
  }
  return make(std::type_identity<Array>{}, std::move(data));
}

}  // namespace

ArrayPtr MakeArray(ArrayDataPtr data) {
  return MakeTypedArray(std::move(data), [](auto tag, ArrayDataPtr d) -> ArrayPtr {
    return std::make_shared<typename decltype(tag)::type>(std::move(d));
  });
}

namespace internal {

struct ArrayAccess {
  template <typename T>
  static constexpr bool kNested =
      std::is_same_v<T, ListArray> || std::is_same_v<T, LargeListArray> ||
      std::is_same_v<T, MapArray> || std::is_same_v<T, ListViewArray> ||
      std::is_same_v<T, LargeListViewArray> || std::is_same_v<T, FixedSizeListArray> ||
      std::is_same_v<T, StructArray> || std::is_same_v<T, UnionArray> ||
      std::is_same_v<T, RunEndEncodedArray>;

  template <typename T>
  static Array* New(ArrayDataPtr data, const ChildArrays& make) {
    if constexpr (std::is_same_v<T, DictionaryArray>) {
      return nullptr;
    } else if constexpr (std::is_same_v<T, ExtensionArray>) {
      return make.storage == nullptr ? nullptr : new T(std::move(data), make);
    } else if constexpr (kNested<T>) {
      return new T(std::move(data), make);
    } else {
      return new T(std::move(data));
    }
  }

  // Overwrites `p` with an empty pointer's bits: no count changes.
  template <typename T>
  static void Forget(std::shared_ptr<T>& p) {
    ::new (static_cast<void*>(&p)) std::shared_ptr<T>();
  }

  static void ForgetLinks(Array* a) {
    switch (a->type_id()) {
      case TypeId::kList:
        Forget(static_cast<ListArray*>(a)->values_);
        break;
      case TypeId::kLargeList:
        Forget(static_cast<LargeListArray*>(a)->values_);
        break;
      case TypeId::kMap: {
        auto* m = static_cast<MapArray*>(a);
        Forget(m->keys_);
        Forget(m->items_);
        Forget(m->values_);
        break;
      }
      case TypeId::kListView:
        Forget(static_cast<ListViewArray*>(a)->values_);
        break;
      case TypeId::kLargeListView:
        Forget(static_cast<LargeListViewArray*>(a)->values_);
        break;
      case TypeId::kFixedSizeList:
        Forget(static_cast<FixedSizeListArray*>(a)->values_);
        break;
      case TypeId::kStruct:
        for (auto& f : static_cast<StructArray*>(a)->fields_) Forget(f);
        break;
      case TypeId::kSparseUnion:
      case TypeId::kDenseUnion:
        for (auto& f : static_cast<UnionArray*>(a)->fields_) Forget(f);
        break;
      case TypeId::kRunEndEncoded: {
        auto* r = static_cast<RunEndEncodedArray*>(a);
        Forget(r->run_ends_);
        Forget(r->values_);
        break;
      }
      case TypeId::kExtension:
        Forget(static_cast<ExtensionArray*>(a)->storage_);
        break;
      default:
        break;
    }
    Forget(a->data_);
  }
};

bool LinkableArrayType(const DataType& type) {
  if (type.id() == TypeId::kDictionary) return false;
  if (type.id() == TypeId::kExtension) {
    // Its storage array is a node of its own (an extension over an
    // extension is not: made per call).
    const TypePtr& storage = static_cast<const ExtensionType&>(type).storage_type();
    return storage->id() != TypeId::kExtension && LinkableArrayType(*storage);
  }
  for (const auto& f : type.fields()) {
    if (!LinkableArrayType(*f->type())) return false;
  }
  return true;
}

Array* NewLinkedArray(ArrayDataPtr data, const ChildArrays& make) {
  if (!LinkableArrayType(*data->type)) return nullptr;
  return MakeTypedArray(std::move(data), [&make](auto tag, ArrayDataPtr d) -> Array* {
    return ArrayAccess::New<typename decltype(tag)::type>(std::move(d), make);
  });
}

void ForgetLinks(Array* array) { ArrayAccess::ForgetLinks(array); }

ArrayPtr MakeArrayIn(ArrayDataPtr data, MemoryPool* pool) {
  ObjectMemory* m = pool != nullptr ? pool->object_memory() : nullptr;
  if (m != nullptr && !ObjectMemoryAccess::Owns(m, data.get())) m = nullptr;
  return MakeTypedArray(std::move(data), [pool, m](auto tag, ArrayDataPtr d) -> ArrayPtr {
    using T = typename decltype(tag)::type;
    if (m != nullptr) {
      if (ArrayPtr a = ObjectMemoryAccess::MakeArray<T>(m, d)) return a;
    }
    return MakePoolObject<T>(pool, std::move(d));
  });
}

}  // namespace internal

}  // namespace alkaid::format
