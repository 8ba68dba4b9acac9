// Builders for lists, list views, fixed-size lists, maps, structs, unions,
// run-end encoded and extension arrays.

#include <algorithm>
#include <limits>
#include <sstream>

#include "alkaid/format/builder.h"
#include "builder_internal.h"

namespace alkaid::format {

namespace {

Status CheckValueBuilder(const ArrayBuilder* b, const DataType& parent, const char* role) {
  if (b == nullptr) return Status::Invalid(parent.ToString(), ": ", role, " builder is null");
  return Status::OK();
}

// Type of child `i` of `type`, or nullptr when the type has no such child.
const DataType* ChildType(const DataType& type, int i) {
  if (i < 0 || i >= type.num_fields() || type.field(i) == nullptr) return nullptr;
  return type.field(i)->type().get();
}

Status CheckChild(const ArrayDataPtr& data, const DataType& parent, int i, const char* role) {
  const DataType* expected = ChildType(parent, i);
  if (expected == nullptr) {
    return Status::TypeError(parent.ToString(), " has no child ", i, " for its ", role);
  }
  return internal::CheckChildType(*data, *expected, role, parent);
}

}  // namespace

// ---------------------------------------------------------------------------
// SlotOffsetsBuilder: what list and list-view builders share

template <typename OffsetT>
SlotOffsetsBuilder<OffsetT>::SlotOffsetsBuilder(TypePtr type,
                                                std::unique_ptr<ArrayBuilder> value_builder,
                                                MemoryPool* pool)
    : ArrayBuilder(std::move(type), pool), offsets_(pool) {
  children_.push_back(std::move(value_builder));
}

template <typename OffsetT>
Status SlotOffsetsBuilder<OffsetT>::Reserve(int64_t additional) {
  ALKAID_RETURN_NOT_OK(ArrayBuilder::Reserve(additional));
  ALKAID_RETURN_NOT_OK(internal::CheckSlotReserve(additional, [this] { return Where(); }));
  return offsets_.Reserve(additional * static_cast<int64_t>(sizeof(OffsetT)));
}

template <typename OffsetT>
Status SlotOffsetsBuilder<OffsetT>::AppendSlots(int64_t n, bool is_valid) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, is_valid ? "value" : "null"));
  ALKAID_RETURN_NOT_OK(CheckValueBuilder(value_builder(), *type_, "value"));
  const int64_t child_length = value_builder()->length();
  if (child_length > std::numeric_limits<OffsetT>::max()) {
    return Status::CapacityError(type_->ToString(), ": slot ", length_, " would start at child ",
                                 "element ", child_length, ", past what ", sizeof(OffsetT) * 8,
                                 "-bit offsets address");
  }
  ALKAID_RETURN_NOT_OK(ReserveValidity(n, !is_valid && n > 0));
  ALKAID_RETURN_NOT_OK(Reserve(n));
  for (int64_t i = 0; i < n; ++i) offsets_.UnsafeAppendValue(static_cast<OffsetT>(child_length));
  UnsafeAppendValidity(n, is_valid);
  return Status::OK();
}

template <typename OffsetT>
Status SlotOffsetsBuilder<OffsetT>::Append(bool is_valid) {
  return AppendSlots(1, is_valid);
}
template <typename OffsetT>
Status SlotOffsetsBuilder<OffsetT>::AppendNulls(int64_t n) {
  return AppendSlots(n, false);
}
template <typename OffsetT>
Status SlotOffsetsBuilder<OffsetT>::AppendEmptyValues(int64_t n) {
  return AppendSlots(n, true);
}

template <typename OffsetT>
void SlotOffsetsBuilder<OffsetT>::Reset() {
  ArrayBuilder::Reset();
  offsets_.Reset();
}

template <typename OffsetT>
Result<int64_t> SlotOffsetsBuilder<OffsetT>::CheckFinish(TypeId want) const {
  if (type_->id() != want) {
    return Status::TypeError("a ", TypeIdName(want), " builder cannot build ", type_->ToString());
  }
  ALKAID_RETURN_NOT_OK(CheckValueBuilder(value_builder(), *type_, "value"));
  const int64_t child_length = value_builder()->length();
  if (child_length > std::numeric_limits<OffsetT>::max()) {
    return Status::CapacityError(type_->ToString(), ": the child holds ", child_length,
                                 " elements, past what ", sizeof(OffsetT) * 8,
                                 "-bit offsets address");
  }
  return child_length;
}

template class SlotOffsetsBuilder<int32_t>;
template class SlotOffsetsBuilder<int64_t>;

// ---------------------------------------------------------------------------
// BaseListBuilder

template <typename OffsetT>
Result<ArrayDataPtr> BaseListBuilder<OffsetT>::FinishInternal() {
  ALKAID_ASSIGN_OR_RAISE(
      const int64_t child_length,
      this->CheckFinish(sizeof(OffsetT) == 4 ? TypeId::kList : TypeId::kLargeList));
  ALKAID_RETURN_NOT_OK(this->offsets_.AppendValue(static_cast<OffsetT>(child_length)));
  ALKAID_ASSIGN_OR_RAISE(auto values, this->value_builder()->FinishData());
  ALKAID_RETURN_NOT_OK(CheckChild(values, *this->type_, 0, "list value"));
  ALKAID_ASSIGN_OR_RAISE(auto validity, this->FinishValidity());
  ALKAID_ASSIGN_OR_RAISE(auto offsets, this->offsets_.Finish());
  return ArrayData::Make(this->type_, this->length_, {std::move(validity), std::move(offsets)},
                         {std::move(values)}, this->null_count_);
}

template class BaseListBuilder<int32_t>;
template class BaseListBuilder<int64_t>;

namespace {
TypePtr ValueTypeOf(const ArrayBuilder* b) { return b != nullptr ? b->type() : null(); }
}  // namespace

ListBuilder::ListBuilder(std::unique_ptr<ArrayBuilder> value_builder, MemoryPool* pool)
    : BaseListBuilder(nullptr, std::move(value_builder), pool) {
  type_ = list(ValueTypeOf(this->value_builder()));
}

LargeListBuilder::LargeListBuilder(std::unique_ptr<ArrayBuilder> value_builder, MemoryPool* pool)
    : BaseListBuilder(nullptr, std::move(value_builder), pool) {
  type_ = large_list(ValueTypeOf(this->value_builder()));
}

// ---------------------------------------------------------------------------
// BaseListViewBuilder

template <typename OffsetT>
Result<ArrayDataPtr> BaseListViewBuilder<OffsetT>::FinishInternal() {
  ALKAID_ASSIGN_OR_RAISE(
      const int64_t child_length,
      this->CheckFinish(sizeof(OffsetT) == 4 ? TypeId::kListView : TypeId::kLargeListView));
  // Slot i spans from its start to the next slot's start (the child's end
  // for the last slot); null slots get size 0.
  const int64_t length = this->length_;
  internal::BufferBuilder sizes(this->pool_);
  ALKAID_RETURN_NOT_OK(sizes.Reserve(length * static_cast<int64_t>(sizeof(OffsetT))));
  const OffsetT* starts = this->offsets_.template data_as<OffsetT>();
  for (int64_t i = 0; i < length; ++i) {
    const int64_t end = i + 1 < length ? int64_t{starts[i + 1]} : child_length;
    const OffsetT size = this->IsValidSlot(i) ? static_cast<OffsetT>(end - starts[i]) : OffsetT{0};
    sizes.UnsafeAppendValue(size);
  }
  ALKAID_ASSIGN_OR_RAISE(auto values, this->value_builder()->FinishData());
  ALKAID_RETURN_NOT_OK(CheckChild(values, *this->type_, 0, "list-view value"));
  ALKAID_ASSIGN_OR_RAISE(auto validity, this->FinishValidity());
  ALKAID_ASSIGN_OR_RAISE(auto offsets, this->offsets_.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto size_buffer, sizes.Finish());
  return ArrayData::Make(this->type_, length,
                         {std::move(validity), std::move(offsets), std::move(size_buffer)},
                         {std::move(values)}, this->null_count_);
}

template class BaseListViewBuilder<int32_t>;
template class BaseListViewBuilder<int64_t>;

// ---------------------------------------------------------------------------
// FixedSizeListBuilder

FixedSizeListBuilder::FixedSizeListBuilder(TypePtr type,
                                           std::unique_ptr<ArrayBuilder> value_builder,
                                           MemoryPool* pool)
    : ArrayBuilder(std::move(type), pool),
      list_size_(type_->id() == TypeId::kFixedSizeList
                     ? static_cast<const FixedSizeListType&>(*type_).list_size()
                     : 0) {
  children_.push_back(std::move(value_builder));
}

Status FixedSizeListBuilder::CheckChildLength(int64_t slots) const {
  ALKAID_RETURN_NOT_OK(CheckValueBuilder(value_builder(), *type_, "value"));
  const int64_t actual = value_builder()->length();
  const int64_t expected = slots * list_size_;
  if (actual == expected) return Status::OK();
  if (slots == 0) {
    return Status::Invalid(type_->ToString(), ": the child builder holds ", actual,
                           " values but no slot was appended");
  }
  return Status::Invalid(type_->ToString(), ": slot ", slots - 1, " has ",
                         actual - (slots - 1) * list_size_, " child values, expected ", list_size_,
                         " (child length ", actual, ", expected ", expected, ")");
}

Status FixedSizeListBuilder::Reserve(int64_t additional) {
  ALKAID_RETURN_NOT_OK(ArrayBuilder::Reserve(additional));
  ALKAID_RETURN_NOT_OK(CheckValueBuilder(value_builder(), *type_, "value"));
  if (list_size_ > 0 && additional > std::numeric_limits<int64_t>::max() / 16 / list_size_) {
    return Status::CapacityError(Where(), ": cannot reserve ", additional, " slots");
  }
  return value_builder()->Reserve(additional * list_size_);
}

Status FixedSizeListBuilder::Append(bool is_valid) {
  ALKAID_RETURN_NOT_OK(CheckChildLength(length_));
  ALKAID_RETURN_NOT_OK(ReserveValidity(1, !is_valid));
  UnsafeAppendValidity(is_valid);
  return Status::OK();
}

Status FixedSizeListBuilder::AppendSlots(int64_t n, bool is_valid) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, is_valid ? "value" : "null"));
  ALKAID_RETURN_NOT_OK(CheckChildLength(length_));
  if (list_size_ > 0 && n > std::numeric_limits<int64_t>::max() / 16 / list_size_) {
    return Status::CapacityError(Where(), ": cannot append ", n, " slots");
  }
  ALKAID_RETURN_NOT_OK(ReserveValidity(n, !is_valid && n > 0));
  ALKAID_RETURN_NOT_OK(value_builder()->AppendEmptyValues(n * list_size_));
  UnsafeAppendValidity(n, is_valid);
  return Status::OK();
}

Status FixedSizeListBuilder::AppendNulls(int64_t n) { return AppendSlots(n, false); }
Status FixedSizeListBuilder::AppendEmptyValues(int64_t n) { return AppendSlots(n, true); }

Result<ArrayDataPtr> FixedSizeListBuilder::FinishInternal() {
  if (type_->id() != TypeId::kFixedSizeList) {
    return Status::TypeError("FixedSizeListBuilder cannot build ", type_->ToString());
  }
  ALKAID_RETURN_NOT_OK(CheckChildLength(length_));
  ALKAID_ASSIGN_OR_RAISE(auto values, value_builder()->FinishData());
  ALKAID_RETURN_NOT_OK(CheckChild(values, *type_, 0, "fixed-size list value"));
  ALKAID_ASSIGN_OR_RAISE(auto validity, FinishValidity());
  return ArrayData::Make(type_, length_, {std::move(validity)}, {std::move(values)}, null_count_);
}

// ---------------------------------------------------------------------------
// MapBuilder

MapBuilder::MapBuilder(TypePtr type, std::unique_ptr<ArrayBuilder> key_builder,
                       std::unique_ptr<ArrayBuilder> item_builder, MemoryPool* pool)
    : ArrayBuilder(std::move(type), pool), offsets_(pool) {
  children_.push_back(std::move(key_builder));
  children_.push_back(std::move(item_builder));
}

Status MapBuilder::CheckEntries() const {
  ALKAID_RETURN_NOT_OK(CheckValueBuilder(key_builder(), *type_, "key"));
  ALKAID_RETURN_NOT_OK(CheckValueBuilder(item_builder(), *type_, "item"));
  const int64_t keys = key_builder()->length();
  const int64_t items = item_builder()->length();
  if (keys != items) {
    return Status::Invalid(type_->ToString(), ": ", keys, " keys but ", items, " items after slot ",
                           length_ - 1, "; append one item per key");
  }
  return Status::OK();
}

Status MapBuilder::Reserve(int64_t additional) {
  ALKAID_RETURN_NOT_OK(ArrayBuilder::Reserve(additional));
  ALKAID_RETURN_NOT_OK(internal::CheckSlotReserve(additional, [this] { return Where(); }));
  return offsets_.Reserve(additional * 4);
}

Status MapBuilder::AppendSlots(int64_t n, bool is_valid) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, is_valid ? "value" : "null"));
  ALKAID_RETURN_NOT_OK(CheckEntries());
  const int64_t entries = key_builder()->length();
  if (entries > std::numeric_limits<int32_t>::max()) {
    return Status::CapacityError(type_->ToString(), ": slot ", length_, " would start at entry ",
                                 entries, ", past what 32-bit offsets address");
  }
  ALKAID_RETURN_NOT_OK(ReserveValidity(n, !is_valid && n > 0));
  ALKAID_RETURN_NOT_OK(Reserve(n));
  for (int64_t i = 0; i < n; ++i) offsets_.UnsafeAppendValue(static_cast<int32_t>(entries));
  UnsafeAppendValidity(n, is_valid);
  return Status::OK();
}

Status MapBuilder::Append(bool is_valid) { return AppendSlots(1, is_valid); }
Status MapBuilder::AppendNulls(int64_t n) { return AppendSlots(n, false); }
Status MapBuilder::AppendEmptyValues(int64_t n) { return AppendSlots(n, true); }

void MapBuilder::Reset() {
  ArrayBuilder::Reset();
  offsets_.Reset();
}

Result<ArrayDataPtr> MapBuilder::FinishInternal() {
  if (type_->id() != TypeId::kMap) {
    return Status::TypeError("MapBuilder cannot build ", type_->ToString());
  }
  const auto& map_type = static_cast<const MapType&>(*type_);
  ALKAID_RETURN_NOT_OK(CheckEntries());
  const int64_t entries = key_builder()->length();
  if (entries > std::numeric_limits<int32_t>::max()) {
    return Status::CapacityError(type_->ToString(), ": ", entries,
                                 " entries, past what 32-bit offsets address");
  }
  ALKAID_RETURN_NOT_OK(offsets_.AppendValue(static_cast<int32_t>(entries)));
  ALKAID_ASSIGN_OR_RAISE(auto keys, key_builder()->FinishData());
  ALKAID_ASSIGN_OR_RAISE(auto items, item_builder()->FinishData());
  const DataType& entries_type = *map_type.entries_field()->type();
  ALKAID_RETURN_NOT_OK(CheckChild(keys, entries_type, 0, "map key"));
  ALKAID_RETURN_NOT_OK(CheckChild(items, entries_type, 1, "map item"));

  // Keys must not be null. Types without a validity bitmap (null, unions,
  // run-end encoded) carry nulls elsewhere, so check them slot by slot.
  if (keys->GetNullCount() > 0 || !keys->type->layout().has_validity) {
    const ArrayPtr key_array = MakeArray(keys);
    for (int64_t j = 0; j < keys->length; ++j) {
      if (!key_array->IsNull(j)) continue;
      const int32_t* starts = offsets_.data_as<int32_t>();
      const int64_t slot =
          std::upper_bound(starts, starts + length_, static_cast<int32_t>(j)) - starts - 1;
      return Status::Invalid(type_->ToString(), ": key of entry ", j, " (slot ", slot,
                             ") is null; map keys must not be null");
    }
  }
  auto entries_data = ArrayData::Make(map_type.entries_field()->type(), entries, {nullptr},
                                      {std::move(keys), std::move(items)}, 0);
  ALKAID_ASSIGN_OR_RAISE(auto validity, FinishValidity());
  ALKAID_ASSIGN_OR_RAISE(auto offsets, offsets_.Finish());
  return ArrayData::Make(type_, length_, {std::move(validity), std::move(offsets)},
                         {std::move(entries_data)}, null_count_);
}

// ---------------------------------------------------------------------------
// StructBuilder

StructBuilder::StructBuilder(TypePtr type,
                             std::vector<std::unique_ptr<ArrayBuilder>> field_builders,
                             MemoryPool* pool)
    : ArrayBuilder(std::move(type), pool) {
  children_ = std::move(field_builders);
}

Status StructBuilder::Append(bool is_valid) {
  ALKAID_RETURN_NOT_OK(ReserveValidity(1, !is_valid));
  UnsafeAppendValidity(is_valid);
  return Status::OK();
}

Status StructBuilder::AppendNulls(int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, "null"));
  ALKAID_RETURN_NOT_OK(ReserveValidity(n, n > 0));
  for (int i = 0; i < num_children(); ++i) {
    ALKAID_RETURN_NOT_OK(CheckValueBuilder(child(i), *type_, "field"));
    const bool nullable = i < type_->num_fields() && type_->field(i)->nullable();
    ALKAID_RETURN_NOT_OK(nullable ? child(i)->AppendNulls(n) : child(i)->AppendEmptyValues(n));
  }
  UnsafeAppendValidity(n, false);
  return Status::OK();
}

Status StructBuilder::AppendEmptyValues(int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, "value"));
  ALKAID_RETURN_NOT_OK(ReserveValidity(n, false));
  for (int i = 0; i < num_children(); ++i) {
    ALKAID_RETURN_NOT_OK(CheckValueBuilder(child(i), *type_, "field"));
    ALKAID_RETURN_NOT_OK(child(i)->AppendEmptyValues(n));
  }
  UnsafeAppendValidity(n, true);
  return Status::OK();
}

Result<ArrayDataPtr> StructBuilder::FinishInternal() {
  if (type_->id() != TypeId::kStruct) {
    return Status::TypeError("StructBuilder cannot build ", type_->ToString());
  }
  if (num_children() != type_->num_fields()) {
    return Status::TypeError(type_->ToString(), ": ", num_children(), " field builders for ",
                             type_->num_fields(), " fields");
  }
  for (int i = 0; i < num_children(); ++i) {
    ALKAID_RETURN_NOT_OK(CheckValueBuilder(child(i), *type_, "field"));
    if (child(i)->length() != length_) {
      return Status::Invalid(type_->ToString(), ": field '", type_->field(i)->name(), "' (index ",
                             i, ") has ", child(i)->length(), " values, expected ", length_,
                             " (one per struct slot)");
    }
  }
  std::vector<ArrayDataPtr> fields;
  for (int i = 0; i < num_children(); ++i) {
    ALKAID_ASSIGN_OR_RAISE(auto f, child(i)->FinishData());
    ALKAID_RETURN_NOT_OK(CheckChild(f, *type_, i, "struct field"));
    fields.push_back(std::move(f));
  }
  ALKAID_ASSIGN_OR_RAISE(auto validity, FinishValidity());
  return ArrayData::Make(type_, length_, {std::move(validity)}, std::move(fields), null_count_);
}

// ---------------------------------------------------------------------------
// UnionBuilder

UnionBuilder::UnionBuilder(TypePtr type, std::vector<std::unique_ptr<ArrayBuilder>> children,
                           MemoryPool* pool)
    : ArrayBuilder(std::move(type), pool),
      union_type_(IsUnion(type_->id()) ? static_cast<const UnionType*>(type_.get()) : nullptr),
      types_(pool) {
  children_ = std::move(children);
}

int UnionBuilder::child_id(int8_t type_code) const {
  if (union_type_ == nullptr || type_code < 0) return -1;
  return union_type_->child_ids()[static_cast<size_t>(type_code)];
}

Result<int> UnionBuilder::ResolveCode(int8_t type_code) const {
  if (union_type_ == nullptr) {
    return Status::TypeError("a union builder cannot build ", type_->ToString());
  }
  const int id = child_id(type_code);
  if (id < 0 || id >= num_children() || child(id) == nullptr) {
    std::ostringstream declared;
    for (size_t i = 0; i < union_type_->type_codes().size(); ++i) {
      declared << (i > 0 ? ", " : "") << int{union_type_->type_codes()[i]};
    }
    return Status::Invalid(type_->ToString(), ": type code ", int{type_code}, " (slot ", length_,
                           ") is not declared; declared codes are [", declared.str(), "]");
  }
  return id;
}

Status UnionBuilder::Reserve(int64_t additional) {
  ALKAID_RETURN_NOT_OK(CheckCount(additional, "reserved slot"));
  return types_.Reserve(additional);
}

Status UnionBuilder::AppendNulls(int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, "null"));
  if (n == 0) return Status::OK();
  if (union_type_ == nullptr || union_type_->type_codes().empty() || num_children() == 0) {
    return Status::Invalid(type_->ToString(), ": a union without children cannot hold nulls");
  }
  const int8_t code = union_type_->type_codes()[0];
  for (int64_t i = 0; i < n; ++i) {
    ALKAID_RETURN_NOT_OK(Append(code));
    ALKAID_RETURN_NOT_OK(child(0)->AppendNull());
  }
  return Status::OK();
}

Status UnionBuilder::AppendEmptyValues(int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckCount(n, "value"));
  if (n == 0) return Status::OK();
  if (union_type_ == nullptr || union_type_->type_codes().empty() || num_children() == 0) {
    return Status::Invalid(type_->ToString(), ": a union without children has no empty value");
  }
  const int8_t code = union_type_->type_codes()[0];
  for (int64_t i = 0; i < n; ++i) {
    ALKAID_RETURN_NOT_OK(Append(code));
    ALKAID_RETURN_NOT_OK(child(0)->AppendEmptyValue());
  }
  return Status::OK();
}

void UnionBuilder::Reset() {
  ArrayBuilder::Reset();
  types_.Reset();
}

Result<std::vector<ArrayDataPtr>> UnionBuilder::FinishChildren(
    TypeId want, const std::function<int64_t(int)>& expected_length, std::string_view before,
    std::string_view after) {
  ALKAID_RETURN_NOT_OK(CheckChildTypes());
  if (type_->id() != want) {
    return Status::TypeError("a ", TypeIdName(want), " builder cannot build ", type_->ToString());
  }
  for (int i = 0; i < num_children(); ++i) {
    const int64_t expected = expected_length(i);
    if (child(i)->length() != expected) {
      return Status::Invalid(type_->ToString(), ": child '", type_->field(i)->name(), "' (code ",
                             int{union_type_->type_codes()[static_cast<size_t>(i)]}, ") has ",
                             child(i)->length(), " values", before, expected, after);
    }
  }
  std::vector<ArrayDataPtr> children;
  for (int i = 0; i < num_children(); ++i) {
    ALKAID_ASSIGN_OR_RAISE(auto c, child(i)->FinishData());
    ALKAID_RETURN_NOT_OK(CheckChild(c, *type_, i, "union child"));
    children.push_back(std::move(c));
  }
  return children;
}

Status UnionBuilder::CheckChildTypes() const {
  if (union_type_ == nullptr) {
    return Status::TypeError("a union builder cannot build ", type_->ToString());
  }
  if (num_children() != type_->num_fields()) {
    return Status::TypeError(type_->ToString(), ": ", num_children(), " child builders for ",
                             type_->num_fields(), " children");
  }
  for (int i = 0; i < num_children(); ++i) {
    ALKAID_RETURN_NOT_OK(CheckValueBuilder(child(i), *type_, "child"));
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------
// SparseUnionBuilder

SparseUnionBuilder::SparseUnionBuilder(TypePtr type,
                                       std::vector<std::unique_ptr<ArrayBuilder>> children,
                                       MemoryPool* pool)
    : UnionBuilder(std::move(type), std::move(children), pool) {}

Status SparseUnionBuilder::FillSiblings(int selected) {
  for (int i = 0; i < num_children(); ++i) {
    if (i == selected) continue;
    ALKAID_RETURN_NOT_OK(CheckValueBuilder(child(i), *type_, "child"));
    const bool nullable = type_->field(i)->nullable();
    ALKAID_RETURN_NOT_OK(nullable ? child(i)->AppendNull() : child(i)->AppendEmptyValue());
  }
  return Status::OK();
}

Status SparseUnionBuilder::Append(int8_t type_code) {
  ALKAID_ASSIGN_OR_RAISE(const int id, ResolveCode(type_code));
  ALKAID_RETURN_NOT_OK(types_.Reserve(1));
  ALKAID_RETURN_NOT_OK(FillSiblings(id));
  types_.UnsafeAppendValue(type_code);
  ++length_;
  return Status::OK();
}

Result<ArrayDataPtr> SparseUnionBuilder::FinishInternal() {
  ALKAID_ASSIGN_OR_RAISE(auto children,
                         FinishChildren(
                             TypeId::kSparseUnion, [this](int) { return length_; }, ", expected ",
                             "; append exactly one value to the selected child per slot"));
  ALKAID_ASSIGN_OR_RAISE(auto types, types_.Finish());
  return ArrayData::Make(type_, length_, {std::move(types)}, std::move(children), 0);
}

// ---------------------------------------------------------------------------
// DenseUnionBuilder

DenseUnionBuilder::DenseUnionBuilder(TypePtr type,
                                     std::vector<std::unique_ptr<ArrayBuilder>> children,
                                     MemoryPool* pool)
    : UnionBuilder(std::move(type), std::move(children), pool),
      offsets_(pool),
      counts_(static_cast<size_t>(num_children()), 0) {}

Status DenseUnionBuilder::Reserve(int64_t additional) {
  ALKAID_RETURN_NOT_OK(UnionBuilder::Reserve(additional));
  ALKAID_RETURN_NOT_OK(internal::CheckSlotReserve(additional, [this] { return Where(); }));
  return offsets_.Reserve(additional * 4);
}

Status DenseUnionBuilder::Append(int8_t type_code) {
  ALKAID_ASSIGN_OR_RAISE(const int id, ResolveCode(type_code));
  const int64_t offset = child(id)->length();
  if (offset > std::numeric_limits<int32_t>::max()) {
    return Status::CapacityError(type_->ToString(), ": child '", type_->field(id)->name(),
                                 "' holds ", offset, " values, past what 32-bit offsets address");
  }
  ALKAID_RETURN_NOT_OK(types_.Reserve(1));
  ALKAID_RETURN_NOT_OK(offsets_.Reserve(4));
  types_.UnsafeAppendValue(type_code);
  offsets_.UnsafeAppendValue(static_cast<int32_t>(offset));
  ++counts_[static_cast<size_t>(id)];
  ++length_;
  return Status::OK();
}

void DenseUnionBuilder::Reset() {
  UnionBuilder::Reset();
  offsets_.Reset();
  std::fill(counts_.begin(), counts_.end(), 0);
}

Result<ArrayDataPtr> DenseUnionBuilder::FinishInternal() {
  ALKAID_ASSIGN_OR_RAISE(
      auto children,
      FinishChildren(
          TypeId::kDenseUnion, [this](int i) { return counts_[static_cast<size_t>(i)]; }, " but ",
          " slots select it; append exactly one value per slot"));
  ALKAID_ASSIGN_OR_RAISE(auto types, types_.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto offsets, offsets_.Finish());
  return ArrayData::Make(type_, length_, {std::move(types), std::move(offsets)},
                         std::move(children), 0);
}

// ---------------------------------------------------------------------------
// RunEndEncodedBuilder

namespace {
int RunEndWidth(const DataType& type) {
  if (type.id() != TypeId::kRunEndEncoded || type.num_fields() != 2) return 0;
  switch (type.field(0)->type()->id()) {
    case TypeId::kInt16:
      return 2;
    case TypeId::kInt32:
      return 4;
    case TypeId::kInt64:
      return 8;
    default:
      return 0;
  }
}
}  // namespace

RunEndEncodedBuilder::RunEndEncodedBuilder(TypePtr type,
                                           std::unique_ptr<ArrayBuilder> value_builder,
                                           MemoryPool* pool)
    : ArrayBuilder(std::move(type), pool),
      run_end_width_(RunEndWidth(*type_)),
      max_run_end_(run_end_width_ == 2   ? std::numeric_limits<int16_t>::max()
                   : run_end_width_ == 4 ? std::numeric_limits<int32_t>::max()
                                         : std::numeric_limits<int64_t>::max()),
      run_ends_(pool) {
  children_.push_back(std::move(value_builder));
}

void RunEndEncodedBuilder::SetLastRunEnd(int64_t end) {
  uint8_t* p = run_ends_.mutable_data() + (num_runs_ - 1) * run_end_width_;
  switch (run_end_width_) {
    case 2: {
      const auto v = static_cast<int16_t>(end);
      std::memcpy(p, &v, 2);
      break;
    }
    case 4: {
      const auto v = static_cast<int32_t>(end);
      std::memcpy(p, &v, 4);
      break;
    }
    default:
      std::memcpy(p, &end, 8);
      break;
  }
}

Status RunEndEncodedBuilder::AddRun(int64_t run_length, bool extend) {
  const int64_t end = length_ + run_length;
  if (extend) {
    SetLastRunEnd(end);
  } else {
    // The caller reserved the space.
    ++num_runs_;
    run_ends_.UnsafeAppendZeros(run_end_width_);
    SetLastRunEnd(end);
  }
  length_ = end;
  return Status::OK();
}

namespace {
Status CheckRun(const ArrayBuilder& b, int run_end_width, int64_t max_run_end, int64_t run_length) {
  if (run_end_width == 0) {
    return Status::TypeError("RunEndEncodedBuilder cannot build ", b.type()->ToString());
  }
  if (run_length < 0) return Status::Invalid("negative run length ", run_length);
  if (run_length > max_run_end - b.length()) {
    return Status::CapacityError(b.type()->ToString(), ": run end ", b.length(), " + ", run_length,
                                 " does not fit the run-end type (max ", max_run_end, ")");
  }
  return Status::OK();
}
}  // namespace

Status RunEndEncodedBuilder::AppendValue(std::string_view bytes, int64_t run_length) {
  ALKAID_RETURN_NOT_OK(CheckRun(*this, run_end_width_, max_run_end_, run_length));
  ALKAID_RETURN_NOT_OK(CheckValueBuilder(value_builder(), *type_, "value"));
  if (!internal::SupportsRawValues(*value_builder()->type())) {
    return Status::TypeError(type_->ToString(), ": values of type ",
                             value_builder()->type()->ToString(),
                             " cannot be given as bytes; append to value_builder() and call "
                             "AppendRun");
  }
  if (run_length == 0) return Status::OK();
  if (last_kind_ == LastRun::kBytes && last_bytes_ == bytes) return AddRun(run_length, true);
  ALKAID_RETURN_NOT_OK(run_ends_.Reserve(run_end_width_));
  ALKAID_RETURN_NOT_OK(internal::AppendRawValue(value_builder(), bytes));
  last_bytes_.assign(bytes.data(), bytes.size());
  last_kind_ = LastRun::kBytes;
  return AddRun(run_length, false);
}

Status RunEndEncodedBuilder::AppendRun(int64_t run_length) {
  ALKAID_RETURN_NOT_OK(CheckRun(*this, run_end_width_, max_run_end_, run_length));
  ALKAID_RETURN_NOT_OK(CheckValueBuilder(value_builder(), *type_, "value"));
  if (run_length == 0) {
    return Status::Invalid(type_->ToString(),
                           ": a run closed with AppendRun needs at least one "
                           "slot");
  }
  if (value_builder()->length() != num_runs_ + 1) {
    return Status::Invalid(type_->ToString(),
                           ": AppendRun expects exactly one new value in "
                           "value_builder(), which holds ",
                           value_builder()->length(), " values for ", num_runs_, " runs");
  }
  ALKAID_RETURN_NOT_OK(run_ends_.Reserve(run_end_width_));
  last_kind_ = LastRun::kOpaque;
  return AddRun(run_length, false);
}

Status RunEndEncodedBuilder::AppendNulls(int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckRun(*this, run_end_width_, max_run_end_, n));
  ALKAID_RETURN_NOT_OK(CheckValueBuilder(value_builder(), *type_, "value"));
  if (n == 0) return Status::OK();
  if (last_kind_ == LastRun::kNull) return AddRun(n, true);
  ALKAID_RETURN_NOT_OK(run_ends_.Reserve(run_end_width_));
  ALKAID_RETURN_NOT_OK(value_builder()->AppendNull());
  last_kind_ = LastRun::kNull;
  return AddRun(n, false);
}

Status RunEndEncodedBuilder::AppendEmptyValues(int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckValueBuilder(value_builder(), *type_, "value"));
  if (internal::SupportsRawValues(*value_builder()->type())) {
    return AppendValue(internal::EmptyRawValue(*value_builder()->type()), n);
  }
  ALKAID_RETURN_NOT_OK(CheckRun(*this, run_end_width_, max_run_end_, n));
  if (n == 0) return Status::OK();
  ALKAID_RETURN_NOT_OK(run_ends_.Reserve(run_end_width_));
  ALKAID_RETURN_NOT_OK(value_builder()->AppendEmptyValue());
  last_kind_ = LastRun::kOpaque;
  return AddRun(n, false);
}

Status RunEndEncodedBuilder::Reserve(int64_t additional) {
  ALKAID_RETURN_NOT_OK(CheckCount(additional, "reserved run"));
  ALKAID_RETURN_NOT_OK(internal::CheckSlotReserve(additional, [this] { return Where(); }));
  return run_ends_.Reserve(additional * run_end_width_);
}

void RunEndEncodedBuilder::Reset() {
  ArrayBuilder::Reset();
  run_ends_.Reset();
  num_runs_ = 0;
  last_kind_ = LastRun::kNone;
  last_bytes_.clear();
}

Result<ArrayDataPtr> RunEndEncodedBuilder::FinishInternal() {
  if (run_end_width_ == 0) {
    return Status::TypeError("RunEndEncodedBuilder cannot build ", type_->ToString());
  }
  ALKAID_RETURN_NOT_OK(CheckValueBuilder(value_builder(), *type_, "value"));
  if (value_builder()->length() != num_runs_) {
    return Status::Invalid(type_->ToString(), ": value_builder() holds ", value_builder()->length(),
                           " values for ", num_runs_, " runs; close each value with AppendRun");
  }
  ALKAID_ASSIGN_OR_RAISE(auto values, value_builder()->FinishData());
  ALKAID_RETURN_NOT_OK(CheckChild(values, *type_, 1, "run-end encoded value"));
  ALKAID_ASSIGN_OR_RAISE(auto run_end_buffer, run_ends_.Finish());
  auto run_ends =
      ArrayData::Make(type_->field(0)->type(), num_runs_, {nullptr, std::move(run_end_buffer)}, 0);
  return ArrayData::Make(type_, length_, {}, {std::move(run_ends), std::move(values)}, 0);
}

// ---------------------------------------------------------------------------
// ExtensionBuilder

ExtensionBuilder::ExtensionBuilder(TypePtr type, std::unique_ptr<ArrayBuilder> storage_builder,
                                   MemoryPool* pool)
    : ArrayBuilder(std::move(type), pool) {
  children_.push_back(std::move(storage_builder));
}

Result<ArrayDataPtr> ExtensionBuilder::FinishInternal() {
  if (type_->id() != TypeId::kExtension) {
    return Status::TypeError("ExtensionBuilder cannot build ", type_->ToString());
  }
  ALKAID_RETURN_NOT_OK(CheckValueBuilder(storage_builder(), *type_, "storage"));
  ALKAID_ASSIGN_OR_RAISE(auto storage, storage_builder()->FinishData());
  const auto& ext = static_cast<const ExtensionType&>(*type_);
  ALKAID_RETURN_NOT_OK(
      internal::CheckChildType(*storage, *ext.storage_type(), "extension storage", *type_));
  storage->type = type_;
  return storage;
}

}  // namespace alkaid::format
