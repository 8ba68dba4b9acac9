// DictionaryBuilder: memo table, index encoding and delta dictionaries.

#include <limits>

#include "alkaid/format/builder.h"
#include "builder_internal.h"

namespace alkaid::format {

namespace {

// Bytes of valid slot i of an array whose type supports raw values.
std::string_view RawValueAt(const ArrayData& d, int64_t i, int32_t width) {
  const TypeId id = StorageType(*d.type).id();
  const int64_t j = d.offset + i;
  if (IsBinaryLike(id)) {
    const int32_t* o = d.buffers[1]->data_as<int32_t>();
    const char* base = d.buffers[2] == nullptr ? "" : d.buffers[2]->data_as<char>();
    return {base + o[j], static_cast<size_t>(o[j + 1] - o[j])};
  }
  if (IsLargeBinaryLike(id)) {
    const int64_t* o = d.buffers[1]->data_as<int64_t>();
    const char* base = d.buffers[2] == nullptr ? "" : d.buffers[2]->data_as<char>();
    return {base + o[j], static_cast<size_t>(o[j + 1] - o[j])};
  }
  if (IsBinaryView(id)) {
    const BinaryViewHeader& v = d.buffers[1]->data_as<BinaryViewHeader>()[j];
    if (v.is_inline()) {
      return {reinterpret_cast<const char*>(v.inlined.data), static_cast<size_t>(v.size())};
    }
    const auto& buf = d.buffers[static_cast<size_t>(v.ref.buffer_index) + 2];
    return {buf->data_as<char>() + v.ref.offset, static_cast<size_t>(v.size())};
  }
  return {d.buffers[1]->data_as<char>() + j * width, static_cast<size_t>(width)};
}

}  // namespace

DictionaryBuilder::DictionaryBuilder(TypePtr type, MemoryPool* pool)
    : ArrayBuilder(std::move(type), pool), indices_(pool) {
  if (type_->id() != TypeId::kDictionary) {
    init_status_ = Status::TypeError("DictionaryBuilder cannot build ", type_->ToString());
    return;
  }
  const auto& d = static_cast<const DictionaryType&>(*type_);
  value_type_ = d.value_type();
  index_type_ = d.index_type();
  if (index_type_ == nullptr || !IsInteger(index_type_->id())) {
    init_status_ = Status::TypeError(type_->ToString(), ": index type must be an integer type");
    return;
  }
  if (value_type_ == nullptr || value_type_->id() == TypeId::kBool ||
      !internal::SupportsRawValues(*value_type_)) {
    init_status_ =
        Status::TypeError("DictionaryBuilder does not support dictionary values of type ",
                          value_type_ ? value_type_->ToString() : "null");
    return;
  }
  const int bits = BitWidth(*index_type_);
  index_width_ = bits / 8;
  if (IsSignedInteger(index_type_->id())) {
    max_index_ = bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (bits - 1)) - 1;
  } else {
    max_index_ = bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << bits) - 1;
  }
  value_width_ = IsFixedWidth(value_type_->id()) ? BitWidth(*value_type_) / 8 : -1;
}

Status DictionaryBuilder::CheckNumber(size_t size, bool is_float) const {
  ALKAID_RETURN_NOT_OK(Status(init_status_));
  if (value_width_ < 0 || static_cast<size_t>(value_width_) != size) {
    return Status::TypeError(type_->ToString(), ": cannot append a ", size,
                             "-byte number to dictionary values of type ", value_type_->ToString());
  }
  const TypeId id = value_type_->id();
  const bool float_values = IsFloating(id) && id != TypeId::kHalfFloat;
  if (is_float != float_values) {
    return Status::TypeError(type_->ToString(), ": cannot append a ",
                             is_float ? "floating-point" : "integer", " number to values of type ",
                             value_type_->ToString());
  }
  return Status::OK();
}

Result<int64_t> DictionaryBuilder::InsertNew(std::string_view value, bool is_null) {
  const auto index = static_cast<int64_t>(entries_.size());
  if (index > max_index_) {
    return Status::CapacityError(type_->ToString(), ": a new dictionary value needs index ", index,
                                 ", past the largest ", index_type_->ToString(), " index (",
                                 max_index_, ")");
  }
  entries_.emplace_back(value);
  if (is_null) {
    null_entry_ = index;
  } else {
    memo_.emplace(std::string_view(entries_.back()), index);
  }
  return index;
}

Result<int64_t> DictionaryBuilder::GetOrInsert(std::string_view value) {
  auto it = memo_.find(value);
  if (it != memo_.end()) return it->second;
  return InsertNew(value, false);
}

void DictionaryBuilder::UnsafeAppendIndex(int64_t index) {
  switch (index_width_) {
    case 1:
      indices_.UnsafeAppendValue(static_cast<uint8_t>(index));
      break;
    case 2:
      indices_.UnsafeAppendValue(static_cast<uint16_t>(index));
      break;
    case 4:
      indices_.UnsafeAppendValue(static_cast<uint32_t>(index));
      break;
    default:
      indices_.UnsafeAppendValue(static_cast<uint64_t>(index));
      break;
  }
}

Status DictionaryBuilder::Reserve(int64_t additional) {
  ALKAID_RETURN_NOT_OK(Status(init_status_));
  ALKAID_RETURN_NOT_OK(ArrayBuilder::Reserve(additional));
  if (additional > std::numeric_limits<int64_t>::max() / 8) {
    return Status::CapacityError(Where(), ": cannot reserve ", additional, " slots");
  }
  return indices_.Reserve(additional * index_width_);
}

Status DictionaryBuilder::Append(std::string_view value) {
  ALKAID_RETURN_NOT_OK(Status(init_status_));
  if (value_width_ >= 0 && static_cast<int64_t>(value.size()) != value_width_) {
    return Status::Invalid(type_->ToString(), ": value for slot ", length_, " has ", value.size(),
                           " bytes, expected ", value_width_);
  }
  ALKAID_RETURN_NOT_OK(Reserve(1));
  ALKAID_ASSIGN_OR_RAISE(const int64_t index, GetOrInsert(value));
  UnsafeAppendIndex(index);
  UnsafeAppendValidity(true);
  return Status::OK();
}

Status DictionaryBuilder::AppendNulls(int64_t n) {
  ALKAID_RETURN_NOT_OK(Status(init_status_));
  ALKAID_RETURN_NOT_OK(CheckCount(n, "null"));
  ALKAID_RETURN_NOT_OK(ReserveValidity(n, n > 0));
  ALKAID_RETURN_NOT_OK(Reserve(n));
  indices_.UnsafeAppendZeros(n * index_width_);
  UnsafeAppendValidity(n, false);
  return Status::OK();
}

Status DictionaryBuilder::AppendEmptyValues(int64_t n) {
  ALKAID_RETURN_NOT_OK(Status(init_status_));
  ALKAID_RETURN_NOT_OK(CheckCount(n, "value"));
  const std::string empty = internal::EmptyRawValue(*value_type_);
  for (int64_t i = 0; i < n; ++i) ALKAID_RETURN_NOT_OK(Append(std::string_view(empty)));
  return Status::OK();
}

Status DictionaryBuilder::InsertMemoValues(const Array& values) {
  ALKAID_RETURN_NOT_OK(Status(init_status_));
  if (!values.type()->Equals(*value_type_)) {
    return Status::TypeError(type_->ToString(), ": cannot insert memo values of type ",
                             values.type()->ToString());
  }
  const ArrayData& d = *values.data();
  for (int64_t i = 0; i < values.length(); ++i) {
    if (values.IsNull(i)) {
      if (null_entry_ < 0) ALKAID_RETURN_NOT_OK(InsertNew({}, true).status());
      continue;
    }
    ALKAID_RETURN_NOT_OK(GetOrInsert(RawValueAt(d, i, value_width_)).status());
  }
  delta_start_ = dictionary_length();
  return Status::OK();
}

Result<ArrayDataPtr> DictionaryBuilder::BuildDictionary(int64_t from) const {
  ALKAID_ASSIGN_OR_RAISE(auto builder, MakeBuilder(value_type_, pool_));
  ALKAID_RETURN_NOT_OK(builder->Reserve(dictionary_length() - from));
  for (int64_t k = from; k < dictionary_length(); ++k) {
    if (k == null_entry_) {
      ALKAID_RETURN_NOT_OK(builder->AppendNull());
    } else {
      ALKAID_RETURN_NOT_OK(
          internal::AppendRawValue(builder.get(), entries_[static_cast<size_t>(k)]));
    }
  }
  return builder->FinishData();
}

Result<ArrayDataPtr> DictionaryBuilder::FinishInternal() {
  ALKAID_RETURN_NOT_OK(Status(init_status_));
  ALKAID_ASSIGN_OR_RAISE(auto dictionary, BuildDictionary(0));
  ALKAID_ASSIGN_OR_RAISE(auto validity, FinishValidity());
  ALKAID_ASSIGN_OR_RAISE(auto indices, indices_.Finish());
  auto out =
      ArrayData::Make(type_, length_, {std::move(validity), std::move(indices)}, null_count_);
  out->dictionary = std::move(dictionary);
  delta_start_ = dictionary_length();
  return out;
}

Result<DictionaryDelta> DictionaryBuilder::FinishDelta() {
  const int64_t from = delta_start_;
  Result<ArrayDataPtr> delta = BuildDictionary(from);
  if (!delta.ok()) {
    Reset();
    return delta.status();
  }
  ALKAID_ASSIGN_OR_RAISE(auto data, FinishData());
  DictionaryDelta out;
  out.array = MakeArray(std::move(data));
  out.delta = MakeArray(std::move(delta).ValueOrDie());
  out.delta_offset = from;
  return out;
}

void DictionaryBuilder::Reset() {
  ArrayBuilder::Reset();
  indices_.Reset();
}

void DictionaryBuilder::ResetFull() {
  Reset();
  memo_.clear();
  entries_.clear();
  null_entry_ = -1;
  delta_start_ = 0;
}

}  // namespace alkaid::format
