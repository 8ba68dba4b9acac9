#include "alkaid/format/type.h"

#include <algorithm>
#include <ostream>
#include <sstream>

namespace alkaid::format {

using BufferKind = DataTypeLayout::BufferKind;

std::string_view TypeIdName(TypeId id) {
  switch (id) {
    case TypeId::kNull:
      return "null";
    case TypeId::kBool:
      return "bool";
    case TypeId::kInt8:
      return "int8";
    case TypeId::kUInt8:
      return "uint8";
    case TypeId::kInt16:
      return "int16";
    case TypeId::kUInt16:
      return "uint16";
    case TypeId::kInt32:
      return "int32";
    case TypeId::kUInt32:
      return "uint32";
    case TypeId::kInt64:
      return "int64";
    case TypeId::kUInt64:
      return "uint64";
    case TypeId::kHalfFloat:
      return "halffloat";
    case TypeId::kFloat:
      return "float";
    case TypeId::kDouble:
      return "double";
    case TypeId::kDecimal32:
      return "decimal32";
    case TypeId::kDecimal64:
      return "decimal64";
    case TypeId::kDecimal128:
      return "decimal128";
    case TypeId::kDecimal256:
      return "decimal256";
    case TypeId::kDate32:
      return "date32";
    case TypeId::kDate64:
      return "date64";
    case TypeId::kTime32:
      return "time32";
    case TypeId::kTime64:
      return "time64";
    case TypeId::kTimestamp:
      return "timestamp";
    case TypeId::kIntervalMonths:
      return "month_interval";
    case TypeId::kIntervalDayTime:
      return "day_time_interval";
    case TypeId::kIntervalMonthDayNano:
      return "month_day_nano_interval";
    case TypeId::kDuration:
      return "duration";
    case TypeId::kFixedSizeBinary:
      return "fixed_size_binary";
    case TypeId::kBinary:
      return "binary";
    case TypeId::kString:
      return "string";
    case TypeId::kLargeBinary:
      return "large_binary";
    case TypeId::kLargeString:
      return "large_string";
    case TypeId::kBinaryView:
      return "binary_view";
    case TypeId::kStringView:
      return "string_view";
    case TypeId::kFixedSizeList:
      return "fixed_size_list";
    case TypeId::kList:
      return "list";
    case TypeId::kLargeList:
      return "large_list";
    case TypeId::kListView:
      return "list_view";
    case TypeId::kLargeListView:
      return "large_list_view";
    case TypeId::kStruct:
      return "struct";
    case TypeId::kMap:
      return "map";
    case TypeId::kSparseUnion:
      return "sparse_union";
    case TypeId::kDenseUnion:
      return "dense_union";
    case TypeId::kDictionary:
      return "dictionary";
    case TypeId::kRunEndEncoded:
      return "run_end_encoded";
    case TypeId::kExtension:
      return "extension";
  }
  return "unknown";
}

std::string_view TimeUnitName(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kSecond:
      return "s";
    case TimeUnit::kMilli:
      return "ms";
    case TimeUnit::kMicro:
      return "us";
    case TimeUnit::kNano:
      return "ns";
  }
  return "?";
}

// ---------------------------------------------------------------------------
// KeyValueMetadata

int64_t KeyValueMetadata::FindKey(std::string_view key) const {
  for (size_t i = 0; i < pairs_.size(); ++i) {
    if (pairs_[i].first == key) return static_cast<int64_t>(i);
  }
  return -1;
}

std::optional<std::string> KeyValueMetadata::Get(std::string_view key) const {
  const int64_t i = FindKey(key);
  if (i < 0) return std::nullopt;
  return pairs_[static_cast<size_t>(i)].second;
}

void KeyValueMetadata::Append(std::string key, std::string value) {
  pairs_.emplace_back(std::move(key), std::move(value));
}

void KeyValueMetadata::Set(std::string key, std::string value) {
  const int64_t i = FindKey(key);
  if (i < 0) {
    Append(std::move(key), std::move(value));
  } else {
    pairs_[static_cast<size_t>(i)].second = std::move(value);
  }
}

MetadataPtr KeyValueMetadata::Without(const std::vector<std::string_view>& keys) const {
  auto out = std::make_shared<KeyValueMetadata>();
  for (const auto& [k, v] : pairs_) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) out->Append(k, v);
  }
  return out;
}

bool KeyValueMetadata::Equals(const KeyValueMetadata& other) const {
  if (pairs_.size() != other.pairs_.size()) return false;
  if (pairs_ == other.pairs_) return true;
  auto a = pairs_;
  auto b = other.pairs_;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

std::string KeyValueMetadata::ToString() const {
  std::ostringstream ss;
  ss << "{";
  for (size_t i = 0; i < pairs_.size(); ++i) {
    if (i > 0) ss << ", ";
    ss << "'" << pairs_[i].first << "': '" << pairs_[i].second << "'";
  }
  ss << "}";
  return ss.str();
}

namespace {

bool MetadataEquals(const MetadataPtr& a, const MetadataPtr& b) {
  const bool a_empty = a == nullptr || a->empty();
  const bool b_empty = b == nullptr || b->empty();
  if (a_empty || b_empty) return a_empty == b_empty;
  return a->Equals(*b);
}

DataTypeLayout FixedLayout(int64_t byte_width) {
  return {{{BufferKind::kValidity, 0}, {BufferKind::kFixedWidth, byte_width}}, false, true};
}

}  // namespace

// ---------------------------------------------------------------------------
// DataType, Field, Schema

bool DataType::Equals(const DataType& other, bool check_metadata) const {
  if (this == &other) return true;
  if (id_ != other.id_ || children_.size() != other.children_.size()) return false;
  return ParamsEqual(other) && ChildrenEqual(other, check_metadata);
}

bool DataType::ChildrenEqual(const DataType& other, bool check_metadata) const {
  for (size_t i = 0; i < children_.size(); ++i) {
    if (!children_[i]->Equals(*other.children_[i], check_metadata)) return false;
  }
  return true;
}

std::ostream& operator<<(std::ostream& os, const DataType& type) { return os << type.ToString(); }

FieldPtr Field::WithName(std::string name) const {
  return std::make_shared<Field>(std::move(name), type_, nullable_, metadata_);
}
FieldPtr Field::WithType(TypePtr type) const {
  return std::make_shared<Field>(name_, std::move(type), nullable_, metadata_);
}
FieldPtr Field::WithNullable(bool nullable) const {
  return std::make_shared<Field>(name_, type_, nullable, metadata_);
}
FieldPtr Field::WithMetadata(MetadataPtr metadata) const {
  return std::make_shared<Field>(name_, type_, nullable_, std::move(metadata));
}

bool Field::Equals(const Field& other, bool check_metadata) const {
  if (this == &other) return true;
  if (name_ != other.name_ || nullable_ != other.nullable_) return false;
  if (check_metadata && !MetadataEquals(metadata_, other.metadata_)) return false;
  return type_->Equals(*other.type_, check_metadata);
}

std::string Field::ToString() const {
  std::string out = name_ + ": " + type_->ToString();
  if (!nullable_) out += " not null";
  return out;
}

FieldPtr field(std::string name, TypePtr type, bool nullable, MetadataPtr metadata) {
  return std::make_shared<Field>(std::move(name), std::move(type), nullable, std::move(metadata));
}

int Schema::GetFieldIndex(std::string_view name) const {
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (fields_[i]->name() == name) return static_cast<int>(i);
  }
  return -1;
}

FieldPtr Schema::GetFieldByName(std::string_view name) const {
  const int i = GetFieldIndex(name);
  return i < 0 ? nullptr : fields_[static_cast<size_t>(i)];
}

std::shared_ptr<Schema> Schema::WithMetadata(MetadataPtr metadata) const {
  return std::make_shared<Schema>(fields_, std::move(metadata));
}

bool Schema::Equals(const Schema& other, bool check_metadata) const {
  if (this == &other) return true;
  if (fields_.size() != other.fields_.size()) return false;
  if (check_metadata && !MetadataEquals(metadata_, other.metadata_)) return false;
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (!fields_[i]->Equals(*other.fields_[i], check_metadata)) return false;
  }
  return true;
}

namespace {
void PrintFieldTree(std::ostringstream& ss, const Field& f, int indent, bool show_metadata) {
  ss << std::string(static_cast<size_t>(indent), ' ') << f.ToString() << "\n";
  if (show_metadata && f.metadata() != nullptr && !f.metadata()->empty()) {
    ss << std::string(static_cast<size_t>(indent) + 2, ' ')
       << "-- metadata: " << f.metadata()->ToString() << "\n";
  }
  for (const auto& child : f.type()->fields()) {
    if (show_metadata && child->metadata() != nullptr && !child->metadata()->empty()) {
      PrintFieldTree(ss, *child, indent + 2, show_metadata);
    }
  }
}
}  // namespace

std::string Schema::ToString(bool show_metadata) const {
  std::ostringstream ss;
  for (const auto& f : fields_) PrintFieldTree(ss, *f, 0, show_metadata);
  if (show_metadata && metadata_ != nullptr && !metadata_->empty()) {
    ss << "-- schema metadata: " << metadata_->ToString() << "\n";
  }
  return ss.str();
}

SchemaPtr schema(FieldVector fields, MetadataPtr metadata) {
  return std::make_shared<Schema>(std::move(fields), std::move(metadata));
}

// ---------------------------------------------------------------------------
// Type predicates

int BitWidth(TypeId id) {
  switch (id) {
    case TypeId::kBool:
      return 1;
    case TypeId::kInt8:
    case TypeId::kUInt8:
      return 8;
    case TypeId::kInt16:
    case TypeId::kUInt16:
    case TypeId::kHalfFloat:
      return 16;
    case TypeId::kInt32:
    case TypeId::kUInt32:
    case TypeId::kFloat:
    case TypeId::kDate32:
    case TypeId::kTime32:
    case TypeId::kIntervalMonths:
    case TypeId::kDecimal32:
      return 32;
    case TypeId::kInt64:
    case TypeId::kUInt64:
    case TypeId::kDouble:
    case TypeId::kDate64:
    case TypeId::kTime64:
    case TypeId::kTimestamp:
    case TypeId::kDuration:
    case TypeId::kIntervalDayTime:
    case TypeId::kDecimal64:
      return 64;
    case TypeId::kDecimal128:
    case TypeId::kIntervalMonthDayNano:
      return 128;
    case TypeId::kDecimal256:
      return 256;
    default:
      return 0;
  }
}

int BitWidth(const DataType& type) {
  if (type.id() == TypeId::kFixedSizeBinary) {
    return static_cast<const FixedSizeBinaryType&>(type).byte_width() * 8;
  }
  return BitWidth(type.id());
}

bool IsInteger(TypeId id) { return id >= TypeId::kInt8 && id <= TypeId::kUInt64; }
bool IsSignedInteger(TypeId id) {
  return id == TypeId::kInt8 || id == TypeId::kInt16 || id == TypeId::kInt32 ||
         id == TypeId::kInt64;
}
bool IsFloating(TypeId id) { return id >= TypeId::kHalfFloat && id <= TypeId::kDouble; }
bool IsDecimal(TypeId id) { return id >= TypeId::kDecimal32 && id <= TypeId::kDecimal256; }
bool IsFixedWidth(TypeId id) { return (id >= TypeId::kBool && id <= TypeId::kFixedSizeBinary); }
bool IsBinaryLike(TypeId id) { return id == TypeId::kBinary || id == TypeId::kString; }
bool IsLargeBinaryLike(TypeId id) {
  return id == TypeId::kLargeBinary || id == TypeId::kLargeString;
}
bool IsBinaryView(TypeId id) { return id == TypeId::kBinaryView || id == TypeId::kStringView; }
bool IsUtf8(TypeId id) {
  return id == TypeId::kString || id == TypeId::kLargeString || id == TypeId::kStringView;
}
bool IsListLike(TypeId id) {
  return id == TypeId::kList || id == TypeId::kLargeList || id == TypeId::kMap;
}
bool IsListView(TypeId id) { return id == TypeId::kListView || id == TypeId::kLargeListView; }
bool IsUnion(TypeId id) { return id == TypeId::kSparseUnion || id == TypeId::kDenseUnion; }
bool IsNested(TypeId id) {
  return (id >= TypeId::kFixedSizeList && id <= TypeId::kDenseUnion) ||
         id == TypeId::kRunEndEncoded;
}

IntervalUnit IntervalUnitOf(TypeId id) {
  switch (id) {
    case TypeId::kIntervalDayTime:
      return IntervalUnit::kDayTime;
    case TypeId::kIntervalMonthDayNano:
      return IntervalUnit::kMonthDayNano;
    default:
      return IntervalUnit::kYearMonth;
  }
}

// ---------------------------------------------------------------------------
// SimpleType

std::string SimpleType::ToString() const { return std::string(TypeIdName(id_)); }

DataType::~DataType() { delete layout_.load(std::memory_order_acquire); }

const DataTypeLayout& DataType::layout() const {
  // Acquire: partner of the release CAS below, so the layout's contents
  // are seen whole.
  const DataTypeLayout* known = layout_.load(std::memory_order_acquire);
  if (known != nullptr) return *known;
  auto* made = new DataTypeLayout(ComputeLayout());
  if (layout_.compare_exchange_strong(known, made, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
    return *made;
  }
  delete made;  // another thread was first: `known` is its layout
  return *known;
}

DataTypeLayout SimpleType::ComputeLayout() const {
  switch (id_) {
    case TypeId::kNull:
      return {{{BufferKind::kAlwaysNull, 0}}, false, false};
    case TypeId::kBool:
      return {{{BufferKind::kValidity, 0}, {BufferKind::kBitmap, 0}}, false, true};
    case TypeId::kBinary:
    case TypeId::kString:
      return {
          {{BufferKind::kValidity, 0}, {BufferKind::kFixedWidth, 4}, {BufferKind::kFixedWidth, 1}},
          false,
          true};
    case TypeId::kLargeBinary:
    case TypeId::kLargeString:
      return {
          {{BufferKind::kValidity, 0}, {BufferKind::kFixedWidth, 8}, {BufferKind::kFixedWidth, 1}},
          false,
          true};
    case TypeId::kBinaryView:
    case TypeId::kStringView:
      return {{{BufferKind::kValidity, 0}, {BufferKind::kFixedWidth, 16}}, true, true};
    default:
      return FixedLayout(BitWidth(id_) / 8);
  }
}

// ---------------------------------------------------------------------------
// Parameterised types

int32_t DecimalType::MaxPrecision(int bit_width) {
  switch (bit_width) {
    case 32:
      return 9;
    case 64:
      return 18;
    case 128:
      return 38;
    case 256:
      return 76;
    default:
      return 0;
  }
}

DecimalType::DecimalType(int bit_width, int32_t precision, int32_t scale)
    : DataType(bit_width == 32    ? TypeId::kDecimal32
               : bit_width == 64  ? TypeId::kDecimal64
               : bit_width == 128 ? TypeId::kDecimal128
                                  : TypeId::kDecimal256),
      bit_width_(bit_width),
      precision_(precision),
      scale_(scale) {}

Result<TypePtr> DecimalType::Make(int bit_width, int32_t precision, int32_t scale) {
  const int32_t max = MaxPrecision(bit_width);
  if (max == 0)
    return Status::Invalid("decimal bit width must be 32, 64, 128 or 256, got ", bit_width);
  if (precision < 1 || precision > max) {
    return Status::Invalid("decimal", bit_width, " precision must be in [1, ", max, "], got ",
                           precision);
  }
  return std::make_shared<DecimalType>(bit_width, precision, scale);
}

std::string DecimalType::ToString() const {
  std::ostringstream ss;
  ss << "decimal" << bit_width_ << "(" << precision_ << ", " << scale_ << ")";
  return ss.str();
}

DataTypeLayout DecimalType::ComputeLayout() const { return FixedLayout(byte_width()); }

bool DecimalType::ParamsEqual(const DataType& other) const {
  const auto& o = static_cast<const DecimalType&>(other);
  return precision_ == o.precision_ && scale_ == o.scale_;
}

TimeType::TimeType(TimeUnit unit)
    : DataType(unit == TimeUnit::kSecond || unit == TimeUnit::kMilli ? TypeId::kTime32
                                                                     : TypeId::kTime64),
      unit_(unit) {}

Result<TypePtr> TimeType::Make(TimeUnit unit) { return std::make_shared<TimeType>(unit); }

std::string TimeType::ToString() const {
  return std::string(TypeIdName(id_)) + "[" + std::string(TimeUnitName(unit_)) + "]";
}
DataTypeLayout TimeType::ComputeLayout() const { return FixedLayout(bit_width() / 8); }
bool TimeType::ParamsEqual(const DataType& other) const {
  return unit_ == static_cast<const TimeType&>(other).unit_;
}

std::string TimestampType::ToString() const {
  std::string out = "timestamp[" + std::string(TimeUnitName(unit_));
  if (!timezone_.empty()) out += ", tz=" + timezone_;
  return out + "]";
}
DataTypeLayout TimestampType::ComputeLayout() const { return FixedLayout(8); }
bool TimestampType::ParamsEqual(const DataType& other) const {
  const auto& o = static_cast<const TimestampType&>(other);
  return unit_ == o.unit_ && timezone_ == o.timezone_;
}

std::string DurationType::ToString() const {
  return "duration[" + std::string(TimeUnitName(unit_)) + "]";
}
DataTypeLayout DurationType::ComputeLayout() const { return FixedLayout(8); }
bool DurationType::ParamsEqual(const DataType& other) const {
  return unit_ == static_cast<const DurationType&>(other).unit_;
}

std::string FixedSizeBinaryType::ToString() const {
  return "fixed_size_binary[" + std::to_string(byte_width_) + "]";
}
DataTypeLayout FixedSizeBinaryType::ComputeLayout() const { return FixedLayout(byte_width_); }
bool FixedSizeBinaryType::ParamsEqual(const DataType& other) const {
  return byte_width_ == static_cast<const FixedSizeBinaryType&>(other).byte_width_;
}

ListType::ListType(TypeId id, FieldPtr value_field) : DataType(id) {
  children_.push_back(std::move(value_field));
}
const TypePtr& ListType::value_type() const { return children_[0]->type(); }
int ListType::offset_bit_width() const {
  return id_ == TypeId::kList || id_ == TypeId::kListView ? 32 : 64;
}
std::string ListType::ToString() const {
  return std::string(TypeIdName(id_)) + "<" + value_field()->ToString() + ">";
}
DataTypeLayout ListType::ComputeLayout() const {
  const int64_t w = offset_bit_width() / 8;
  if (IsListView(id_)) {
    return {
        {{BufferKind::kValidity, 0}, {BufferKind::kFixedWidth, w}, {BufferKind::kFixedWidth, w}},
        false,
        true};
  }
  return {{{BufferKind::kValidity, 0}, {BufferKind::kFixedWidth, w}}, false, true};
}

FixedSizeListType::FixedSizeListType(FieldPtr value_field, int32_t list_size)
    : DataType(TypeId::kFixedSizeList), list_size_(list_size) {
  children_.push_back(std::move(value_field));
}
const TypePtr& FixedSizeListType::value_type() const { return children_[0]->type(); }
std::string FixedSizeListType::ToString() const {
  return "fixed_size_list<" + value_field()->ToString() + ">[" + std::to_string(list_size_) + "]";
}
DataTypeLayout FixedSizeListType::ComputeLayout() const {
  return {{{BufferKind::kValidity, 0}}, false, true};
}
bool FixedSizeListType::ParamsEqual(const DataType& other) const {
  return list_size_ == static_cast<const FixedSizeListType&>(other).list_size_;
}

MapType::MapType(FieldPtr entries, bool keys_sorted)
    : DataType(TypeId::kMap), keys_sorted_(keys_sorted) {
  children_.push_back(std::move(entries));
}

Result<TypePtr> MapType::Make(FieldPtr entries, bool keys_sorted) {
  if (entries == nullptr || entries->type()->id() != TypeId::kStruct ||
      entries->type()->num_fields() != 2) {
    return Status::TypeError("map entries must be a struct with two fields (key, value)");
  }
  if (entries->nullable()) return Status::TypeError("map entries must not be nullable");
  if (entries->type()->field(0)->nullable()) {
    return Status::TypeError("map key field must not be nullable");
  }
  return std::make_shared<MapType>(std::move(entries), keys_sorted);
}

const FieldPtr& MapType::key_field() const { return children_[0]->type()->field(0); }
const FieldPtr& MapType::item_field() const { return children_[0]->type()->field(1); }
std::string MapType::ToString() const {
  std::string out =
      "map<" + key_field()->type()->ToString() + ", " + item_field()->type()->ToString();
  if (keys_sorted_) out += ", keys_sorted";
  return out + ">";
}
DataTypeLayout MapType::ComputeLayout() const {
  return {{{BufferKind::kValidity, 0}, {BufferKind::kFixedWidth, 4}}, false, true};
}
bool MapType::ParamsEqual(const DataType& other) const {
  return keys_sorted_ == static_cast<const MapType&>(other).keys_sorted_;
}
bool MapType::ChildrenEqual(const DataType& other, bool check_metadata) const {
  const auto& o = static_cast<const MapType&>(other);
  return key_field()->type()->Equals(*o.key_field()->type(), check_metadata) &&
         item_field()->type()->Equals(*o.item_field()->type(), check_metadata) &&
         item_field()->nullable() == o.item_field()->nullable();
}

StructType::StructType(FieldVector fields) : DataType(TypeId::kStruct) {
  children_ = std::move(fields);
}
int StructType::GetFieldIndex(std::string_view name) const {
  for (size_t i = 0; i < children_.size(); ++i) {
    if (children_[i]->name() == name) return static_cast<int>(i);
  }
  return -1;
}
std::string StructType::ToString() const {
  std::string out = "struct<";
  for (size_t i = 0; i < children_.size(); ++i) {
    if (i > 0) out += ", ";
    out += children_[i]->ToString();
  }
  return out + ">";
}
DataTypeLayout StructType::ComputeLayout() const {
  return {{{BufferKind::kValidity, 0}}, false, true};
}

UnionType::UnionType(FieldVector fields, std::vector<int8_t> type_codes, UnionMode mode)
    : DataType(mode == UnionMode::kSparse ? TypeId::kSparseUnion : TypeId::kDenseUnion),
      type_codes_(std::move(type_codes)),
      child_ids_(kMaxTypeCode + 1, -1) {
  children_ = std::move(fields);
  if (type_codes_.empty()) {
    for (size_t i = 0; i < children_.size(); ++i) type_codes_.push_back(static_cast<int8_t>(i));
  }
  for (size_t i = 0; i < type_codes_.size(); ++i) {
    if (type_codes_[i] >= 0) child_ids_[static_cast<size_t>(type_codes_[i])] = static_cast<int>(i);
  }
}

Result<TypePtr> UnionType::Make(FieldVector fields, std::vector<int8_t> type_codes,
                                UnionMode mode) {
  if (!type_codes.empty() && type_codes.size() != fields.size()) {
    return Status::TypeError("union has ", fields.size(), " children but ", type_codes.size(),
                             " type codes");
  }
  if (fields.size() > static_cast<size_t>(kMaxTypeCode) + 1) {
    return Status::TypeError("union has ", fields.size(), " children; at most 128 allowed");
  }
  std::vector<bool> seen(kMaxTypeCode + 1, false);
  for (int8_t code : type_codes) {
    if (code < 0) return Status::TypeError("union type code ", int{code}, " is negative");
    if (seen[static_cast<size_t>(code)]) {
      return Status::TypeError("union type code ", int{code}, " is declared twice");
    }
    seen[static_cast<size_t>(code)] = true;
  }
  return std::make_shared<UnionType>(std::move(fields), std::move(type_codes), mode);
}

std::string UnionType::ToString() const {
  std::string out = std::string(TypeIdName(id_)) + "<";
  for (size_t i = 0; i < children_.size(); ++i) {
    if (i > 0) out += ", ";
    out += children_[i]->ToString() + "=" + std::to_string(type_codes_[i]);
  }
  return out + ">";
}
DataTypeLayout UnionType::ComputeLayout() const {
  if (mode() == UnionMode::kSparse) return {{{BufferKind::kFixedWidth, 1}}, false, false};
  return {{{BufferKind::kFixedWidth, 1}, {BufferKind::kFixedWidth, 4}}, false, false};
}
bool UnionType::ParamsEqual(const DataType& other) const {
  return type_codes_ == static_cast<const UnionType&>(other).type_codes_;
}

DictionaryType::DictionaryType(TypePtr index_type, TypePtr value_type, bool ordered)
    : DataType(TypeId::kDictionary),
      index_type_(std::move(index_type)),
      value_type_(std::move(value_type)),
      ordered_(ordered) {}

Result<TypePtr> DictionaryType::Make(TypePtr index_type, TypePtr value_type, bool ordered) {
  if (index_type == nullptr || !IsInteger(index_type->id())) {
    return Status::TypeError("dictionary index type must be an integer type, got ",
                             index_type ? index_type->ToString() : "null");
  }
  if (value_type == nullptr) return Status::TypeError("dictionary value type is null");
  return std::make_shared<DictionaryType>(std::move(index_type), std::move(value_type), ordered);
}

std::string DictionaryType::ToString() const {
  return "dictionary<values=" + value_type_->ToString() + ", indices=" + index_type_->ToString() +
         (ordered_ ? ", ordered" : "") + ">";
}
DataTypeLayout DictionaryType::ComputeLayout() const { return index_type_->layout(); }
bool DictionaryType::ParamsEqual(const DataType& other) const {
  const auto& o = static_cast<const DictionaryType&>(other);
  return ordered_ == o.ordered_ && index_type_->Equals(*o.index_type_) &&
         value_type_->Equals(*o.value_type_);
}

RunEndEncodedType::RunEndEncodedType(TypePtr run_end_type, TypePtr value_type)
    : DataType(TypeId::kRunEndEncoded) {
  children_.push_back(std::make_shared<Field>("run_ends", std::move(run_end_type), false));
  children_.push_back(std::make_shared<Field>("values", std::move(value_type), true));
}

Result<TypePtr> RunEndEncodedType::Make(TypePtr run_end_type, TypePtr value_type) {
  if (run_end_type == nullptr ||
      (run_end_type->id() != TypeId::kInt16 && run_end_type->id() != TypeId::kInt32 &&
       run_end_type->id() != TypeId::kInt64)) {
    return Status::TypeError("run end type must be int16, int32 or int64, got ",
                             run_end_type ? run_end_type->ToString() : "null");
  }
  if (value_type == nullptr) return Status::TypeError("run-end encoded value type is null");
  return std::make_shared<RunEndEncodedType>(std::move(run_end_type), std::move(value_type));
}

const TypePtr& RunEndEncodedType::run_end_type() const { return children_[0]->type(); }
const TypePtr& RunEndEncodedType::value_type() const { return children_[1]->type(); }
std::string RunEndEncodedType::ToString() const {
  return "run_end_encoded<run_ends: " + run_end_type()->ToString() +
         ", values: " + value_type()->ToString() + ">";
}
DataTypeLayout RunEndEncodedType::ComputeLayout() const { return {{}, false, false}; }

ExtensionType::ExtensionType(std::string extension_name, std::string serialized,
                             TypePtr storage_type)
    : DataType(TypeId::kExtension),
      extension_name_(std::move(extension_name)),
      serialized_(std::move(serialized)),
      storage_type_(std::move(storage_type)) {}

std::string ExtensionType::ToString() const {
  return "extension<" + extension_name_ + ", storage=" + storage_type_->ToString() + ">";
}
DataTypeLayout ExtensionType::ComputeLayout() const { return storage_type_->layout(); }
bool ExtensionType::ParamsEqual(const DataType& other) const {
  const auto& o = static_cast<const ExtensionType&>(other);
  return extension_name_ == o.extension_name_ && serialized_ == o.serialized_ &&
         storage_type_->Equals(*o.storage_type_);
}

const DataType& StorageType(const DataType& type) {
  if (type.id() == TypeId::kExtension) {
    return StorageType(*static_cast<const ExtensionType&>(type).storage_type());
  }
  return type;
}

// ---------------------------------------------------------------------------
// Factories

#define ALKAID_SINGLETON_TYPE(fn, ID, Class)                     \
  TypePtr fn() {                                                 \
    static const TypePtr instance = std::make_shared<Class>(ID); \
    return instance;                                             \
  }

ALKAID_SINGLETON_TYPE(null, TypeId::kNull, SimpleType)
ALKAID_SINGLETON_TYPE(boolean, TypeId::kBool, SimpleType)
ALKAID_SINGLETON_TYPE(int8, TypeId::kInt8, SimpleType)
ALKAID_SINGLETON_TYPE(int16, TypeId::kInt16, SimpleType)
ALKAID_SINGLETON_TYPE(int32, TypeId::kInt32, SimpleType)
ALKAID_SINGLETON_TYPE(int64, TypeId::kInt64, SimpleType)
ALKAID_SINGLETON_TYPE(uint8, TypeId::kUInt8, SimpleType)
ALKAID_SINGLETON_TYPE(uint16, TypeId::kUInt16, SimpleType)
ALKAID_SINGLETON_TYPE(uint32, TypeId::kUInt32, SimpleType)
ALKAID_SINGLETON_TYPE(uint64, TypeId::kUInt64, SimpleType)
ALKAID_SINGLETON_TYPE(float16, TypeId::kHalfFloat, SimpleType)
ALKAID_SINGLETON_TYPE(float32, TypeId::kFloat, SimpleType)
ALKAID_SINGLETON_TYPE(float64, TypeId::kDouble, SimpleType)
ALKAID_SINGLETON_TYPE(utf8, TypeId::kString, SimpleType)
ALKAID_SINGLETON_TYPE(binary, TypeId::kBinary, SimpleType)
ALKAID_SINGLETON_TYPE(large_utf8, TypeId::kLargeString, SimpleType)
ALKAID_SINGLETON_TYPE(large_binary, TypeId::kLargeBinary, SimpleType)
ALKAID_SINGLETON_TYPE(utf8_view, TypeId::kStringView, SimpleType)
ALKAID_SINGLETON_TYPE(binary_view, TypeId::kBinaryView, SimpleType)
ALKAID_SINGLETON_TYPE(month_interval, TypeId::kIntervalMonths, SimpleType)
ALKAID_SINGLETON_TYPE(day_time_interval, TypeId::kIntervalDayTime, SimpleType)
ALKAID_SINGLETON_TYPE(month_day_nano_interval, TypeId::kIntervalMonthDayNano, SimpleType)
#undef ALKAID_SINGLETON_TYPE

TypePtr date32() {
  static const TypePtr instance = std::make_shared<Date32Type>();
  return instance;
}
TypePtr date64() {
  static const TypePtr instance = std::make_shared<Date64Type>();
  return instance;
}

namespace {
TypePtr DecimalOrDie(int bits, int32_t precision, int32_t scale) {
  auto r = DecimalType::Make(bits, precision, scale);
  r.status().Abort("decimal type");
  return *std::move(r);
}
}  // namespace

TypePtr decimal32(int32_t p, int32_t s) { return DecimalOrDie(32, p, s); }
TypePtr decimal64(int32_t p, int32_t s) { return DecimalOrDie(64, p, s); }
TypePtr decimal128(int32_t p, int32_t s) { return DecimalOrDie(128, p, s); }
TypePtr decimal256(int32_t p, int32_t s) { return DecimalOrDie(256, p, s); }

TypePtr time32(TimeUnit unit) {
  if (unit != TimeUnit::kSecond && unit != TimeUnit::kMilli) {
    Status::TypeError("time32 takes s or ms").Abort();
  }
  return std::make_shared<TimeType>(unit);
}
TypePtr time64(TimeUnit unit) {
  if (unit != TimeUnit::kMicro && unit != TimeUnit::kNano) {
    Status::TypeError("time64 takes us or ns").Abort();
  }
  return std::make_shared<TimeType>(unit);
}
TypePtr timestamp(TimeUnit unit, std::string timezone) {
  return std::make_shared<TimestampType>(unit, std::move(timezone));
}
TypePtr duration(TimeUnit unit) { return std::make_shared<DurationType>(unit); }
TypePtr fixed_size_binary(int32_t byte_width) {
  return std::make_shared<FixedSizeBinaryType>(byte_width);
}

TypePtr list(FieldPtr f) { return std::make_shared<ListType>(TypeId::kList, std::move(f)); }
TypePtr list(TypePtr t) { return list(field("item", std::move(t))); }
TypePtr large_list(FieldPtr f) {
  return std::make_shared<ListType>(TypeId::kLargeList, std::move(f));
}
TypePtr large_list(TypePtr t) { return large_list(field("item", std::move(t))); }
TypePtr list_view(FieldPtr f) {
  return std::make_shared<ListType>(TypeId::kListView, std::move(f));
}
TypePtr list_view(TypePtr t) { return list_view(field("item", std::move(t))); }
TypePtr large_list_view(FieldPtr f) {
  return std::make_shared<ListType>(TypeId::kLargeListView, std::move(f));
}
TypePtr large_list_view(TypePtr t) { return large_list_view(field("item", std::move(t))); }
TypePtr fixed_size_list(FieldPtr f, int32_t n) {
  return std::make_shared<FixedSizeListType>(std::move(f), n);
}
TypePtr fixed_size_list(TypePtr t, int32_t n) {
  return fixed_size_list(field("item", std::move(t)), n);
}

TypePtr map(TypePtr key_type, TypePtr item_type, bool keys_sorted) {
  auto entries = field(
      "entries",
      struct_({field("key", std::move(key_type), false), field("value", std::move(item_type))}),
      false);
  return std::make_shared<MapType>(std::move(entries), keys_sorted);
}
TypePtr struct_(FieldVector fields) { return std::make_shared<StructType>(std::move(fields)); }

TypePtr sparse_union(FieldVector fields, std::vector<int8_t> codes) {
  auto r = UnionType::Make(std::move(fields), std::move(codes), UnionMode::kSparse);
  r.status().Abort("sparse_union");
  return *std::move(r);
}
TypePtr dense_union(FieldVector fields, std::vector<int8_t> codes) {
  auto r = UnionType::Make(std::move(fields), std::move(codes), UnionMode::kDense);
  r.status().Abort("dense_union");
  return *std::move(r);
}
TypePtr dictionary(TypePtr index_type, TypePtr value_type, bool ordered) {
  auto r = DictionaryType::Make(std::move(index_type), std::move(value_type), ordered);
  r.status().Abort("dictionary");
  return *std::move(r);
}
TypePtr run_end_encoded(TypePtr run_end_type, TypePtr value_type) {
  auto r = RunEndEncodedType::Make(std::move(run_end_type), std::move(value_type));
  r.status().Abort("run_end_encoded");
  return *std::move(r);
}
TypePtr extension(std::string name, std::string serialized, TypePtr storage) {
  return std::make_shared<ExtensionType>(std::move(name), std::move(serialized),
                                         std::move(storage));
}

}  // namespace alkaid::format
