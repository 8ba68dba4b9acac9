#pragma once

/// \file
/// The logical data types of the Alkaid columnar format, fields and schemas.
///
/// Types are immutable and shared through std::shared_ptr; build them with the
/// factory functions at the end of this file (`int32()`, `list(field)`, ...).
/// Every type of the specification is here with all its parameters. All
/// classes are safe to share between threads.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/type_fwd.h"

namespace alkaid::format {

/// Identifies a logical type. The order is part of no wire format.
enum class TypeId : uint8_t {
  kNull,
  kBool,
  kInt8,
  kUInt8,
  kInt16,
  kUInt16,
  kInt32,
  kUInt32,
  kInt64,
  kUInt64,
  kHalfFloat,
  kFloat,
  kDouble,
  kDecimal32,
  kDecimal64,
  kDecimal128,
  kDecimal256,
  kDate32,
  kDate64,
  kTime32,
  kTime64,
  kTimestamp,
  kIntervalMonths,
  kIntervalDayTime,
  kIntervalMonthDayNano,
  kDuration,
  kFixedSizeBinary,
  kBinary,
  kString,
  kLargeBinary,
  kLargeString,
  kBinaryView,
  kStringView,
  kFixedSizeList,
  kList,
  kLargeList,
  kListView,
  kLargeListView,
  kStruct,
  kMap,
  kSparseUnion,
  kDenseUnion,
  kDictionary,
  kRunEndEncoded,
  kExtension,
};

/// Name of a type id ("int32", "large_list_view", ...).
ALKAID_EXPORT std::string_view TypeIdName(TypeId id);

enum class TimeUnit : uint8_t { kSecond, kMilli, kMicro, kNano };
ALKAID_EXPORT std::string_view TimeUnitName(TimeUnit unit);  // "s", "ms", "us", "ns"

enum class DateUnit : uint8_t { kDay, kMilli };
enum class IntervalUnit : uint8_t { kYearMonth, kDayTime, kMonthDayNano };
enum class UnionMode : uint8_t { kSparse, kDense };

/// Ordered string key/value pairs (custom_metadata of the spec). Keys may
/// repeat in the wire format; order is preserved.
class ALKAID_EXPORT KeyValueMetadata {
 public:
  KeyValueMetadata() = default;
  explicit KeyValueMetadata(std::vector<std::pair<std::string, std::string>> pairs)
      : pairs_(std::move(pairs)) {}

  size_t size() const { return pairs_.size(); }
  bool empty() const { return pairs_.empty(); }
  const std::string& key(size_t i) const { return pairs_[i].first; }
  const std::string& value(size_t i) const { return pairs_[i].second; }
  const std::vector<std::pair<std::string, std::string>>& pairs() const { return pairs_; }

  /// Index of the first pair with `key`, or -1.
  int64_t FindKey(std::string_view key) const;
  /// Value of the first pair with `key`.
  std::optional<std::string> Get(std::string_view key) const;
  bool Contains(std::string_view key) const { return FindKey(key) >= 0; }

  void Append(std::string key, std::string value);
  /// Replaces the value of `key`, appending if absent.
  void Set(std::string key, std::string value);
  /// A copy without the pairs whose key is in `keys`.
  std::shared_ptr<const KeyValueMetadata> Without(const std::vector<std::string_view>& keys) const;

  /// Same pairs, in any order (order carries no meaning in the format).
  bool Equals(const KeyValueMetadata& other) const;
  std::string ToString() const;

 private:
  std::vector<std::pair<std::string, std::string>> pairs_;
};

using MetadataPtr = std::shared_ptr<const KeyValueMetadata>;

/// One kind of buffer in a type's physical layout.
struct DataTypeLayout {
  enum class BufferKind : uint8_t {
    kValidity,    ///< bitmap, one bit per slot
    kFixedWidth,  ///< `byte_width` bytes per slot
    kBitmap,      ///< packed booleans
    kAlwaysNull,  ///< no buffer (the slot exists in IPC but carries nothing)
  };
  struct BufferSpec {
    BufferKind kind;
    int64_t byte_width;  ///< for kFixedWidth
  };
  /// The buffers in spec order (validity first where the layout has one).
  std::vector<BufferSpec> buffers;
  /// True for view types, whose data buffers follow the listed ones.
  bool variadic = false;
  /// True if buffers[0] is a validity bitmap.
  bool has_validity = true;
};

/// Base of all logical types.
class ALKAID_EXPORT DataType : public std::enable_shared_from_this<DataType> {
 public:
  virtual ~DataType();
  DataType(const DataType&) = delete;
  DataType& operator=(const DataType&) = delete;

  TypeId id() const { return id_; }
  /// Child fields of a nested type (empty for others).
  const FieldVector& fields() const { return children_; }
  int num_fields() const { return static_cast<int>(children_.size()); }
  const FieldPtr& field(int i) const { return children_[static_cast<size_t>(i)]; }

  /// Readable form, e.g. "list<item: int32>", "timestamp[us, tz=UTC]".
  virtual std::string ToString() const = 0;
  /// Short name of the type ("int32", "list", ...).
  std::string_view name() const { return TypeIdName(id_); }

  /// Structural equality; with `check_metadata`, child field metadata too.
  bool Equals(const DataType& other, bool check_metadata = false) const;
  bool Equals(const TypePtr& other, bool check_metadata = false) const {
    return other != nullptr && Equals(*other, check_metadata);
  }

  /// Buffer layout of an array of this type: computed on first use, then
  /// kept (a load on the hot paths that ask, e.g. IsValid). Thread-safe.
  const DataTypeLayout& layout() const;

 protected:
  explicit DataType(TypeId id) : id_(id) {}
  /// The layout, computed (layout() keeps the first result).
  virtual DataTypeLayout ComputeLayout() const = 0;
  /// Compares parameters (not children) of two types with the same id.
  virtual bool ParamsEqual(const DataType& other) const = 0;
  /// Compares the child fields of two types with the same id and number of
  /// children; by default names, nullability and types, one by one.
  virtual bool ChildrenEqual(const DataType& other, bool check_metadata) const;

  TypeId id_;
  FieldVector children_;

 private:
  mutable std::atomic<const DataTypeLayout*> layout_{nullptr};
};

ALKAID_EXPORT std::ostream& operator<<(std::ostream& os, const DataType& type);

/// A named, typed column or child with nullability and metadata.
class ALKAID_EXPORT Field {
 public:
  Field(std::string name, TypePtr type, bool nullable = true, MetadataPtr metadata = nullptr)
      : name_(std::move(name)),
        type_(std::move(type)),
        nullable_(nullable),
        metadata_(std::move(metadata)) {}

  const std::string& name() const { return name_; }
  const TypePtr& type() const { return type_; }
  bool nullable() const { return nullable_; }
  /// May be null (no metadata).
  const MetadataPtr& metadata() const { return metadata_; }

  FieldPtr WithName(std::string name) const;
  FieldPtr WithType(TypePtr type) const;
  FieldPtr WithNullable(bool nullable) const;
  FieldPtr WithMetadata(MetadataPtr metadata) const;

  bool Equals(const Field& other, bool check_metadata = false) const;
  std::string ToString() const;  // "name: type" (+ " not null")

 private:
  std::string name_;
  TypePtr type_;
  bool nullable_;
  MetadataPtr metadata_;
};

ALKAID_EXPORT FieldPtr field(std::string name, TypePtr type, bool nullable = true,
                             MetadataPtr metadata = nullptr);

/// Ordered fields plus schema-level metadata. Field names may repeat.
class ALKAID_EXPORT Schema {
 public:
  explicit Schema(FieldVector fields, MetadataPtr metadata = nullptr)
      : fields_(std::move(fields)), metadata_(std::move(metadata)) {}

  const FieldVector& fields() const { return fields_; }
  int num_fields() const { return static_cast<int>(fields_.size()); }
  const FieldPtr& field(int i) const { return fields_[static_cast<size_t>(i)]; }
  const MetadataPtr& metadata() const { return metadata_; }

  /// Index of the first field named `name`, or -1.
  int GetFieldIndex(std::string_view name) const;
  FieldPtr GetFieldByName(std::string_view name) const;

  std::shared_ptr<Schema> WithMetadata(MetadataPtr metadata) const;
  bool Equals(const Schema& other, bool check_metadata = false) const;
  std::string ToString(bool show_metadata = true) const;

 private:
  FieldVector fields_;
  MetadataPtr metadata_;
};

using SchemaPtr = std::shared_ptr<Schema>;
ALKAID_EXPORT SchemaPtr schema(FieldVector fields, MetadataPtr metadata = nullptr);

// ---------------------------------------------------------------------------
// Concrete types

/// Types without parameters (null, bool, integers, floats, binary, string,
/// large_*, *_view, month/day-time/month-day-nano intervals, ...).
class ALKAID_EXPORT SimpleType : public DataType {
 public:
  explicit SimpleType(TypeId id) : DataType(id) {}
  std::string ToString() const override;
  DataTypeLayout ComputeLayout() const override;

 protected:
  bool ParamsEqual(const DataType&) const override { return true; }
};

/// Bit width of fixed-width types (1 for bool, 0 for everything else that
/// is not fixed-width).
ALKAID_EXPORT int BitWidth(TypeId id);
ALKAID_EXPORT int BitWidth(const DataType& type);
ALKAID_EXPORT bool IsInteger(TypeId id);
ALKAID_EXPORT bool IsSignedInteger(TypeId id);
ALKAID_EXPORT bool IsFloating(TypeId id);
ALKAID_EXPORT bool IsDecimal(TypeId id);
/// Primitive and other single-data-buffer fixed-width layouts (incl. bool,
/// decimals, dates/times, intervals, fixed_size_binary).
ALKAID_EXPORT bool IsFixedWidth(TypeId id);
ALKAID_EXPORT bool IsBinaryLike(TypeId id);       // binary, string
ALKAID_EXPORT bool IsLargeBinaryLike(TypeId id);  // large_binary, large_string
ALKAID_EXPORT bool IsBinaryView(TypeId id);       // binary_view, string_view
ALKAID_EXPORT bool IsUtf8(TypeId id);             // string, large_string, string_view
ALKAID_EXPORT bool IsListLike(TypeId id);         // list, large_list, map
ALKAID_EXPORT bool IsListView(TypeId id);
ALKAID_EXPORT bool IsUnion(TypeId id);
ALKAID_EXPORT bool IsNested(TypeId id);

class ALKAID_EXPORT DecimalType : public DataType {
 public:
  /// `bit_width` is 32, 64, 128 or 256; precision must fit it.
  static Result<TypePtr> Make(int bit_width, int32_t precision, int32_t scale);
  int bit_width() const { return bit_width_; }
  int byte_width() const { return bit_width_ / 8; }
  int32_t precision() const { return precision_; }
  int32_t scale() const { return scale_; }
  /// Largest precision representable at `bit_width` (9, 18, 38, 76).
  static int32_t MaxPrecision(int bit_width);
  std::string ToString() const override;
  DataTypeLayout ComputeLayout() const override;
  DecimalType(int bit_width, int32_t precision, int32_t scale);

 protected:
  bool ParamsEqual(const DataType& other) const override;

 private:
  int bit_width_;
  int32_t precision_;
  int32_t scale_;
};

/// Unit-parameterised fixed-width types share this shape.
class ALKAID_EXPORT Date32Type : public SimpleType {
 public:
  Date32Type() : SimpleType(TypeId::kDate32) {}
  DateUnit unit() const { return DateUnit::kDay; }
};
class ALKAID_EXPORT Date64Type : public SimpleType {
 public:
  Date64Type() : SimpleType(TypeId::kDate64) {}
  DateUnit unit() const { return DateUnit::kMilli; }
};

class ALKAID_EXPORT TimeType : public DataType {
 public:
  /// time32 takes second/milli, time64 micro/nano.
  static Result<TypePtr> Make(TimeUnit unit);
  TimeUnit unit() const { return unit_; }
  int bit_width() const { return id_ == TypeId::kTime32 ? 32 : 64; }
  std::string ToString() const override;
  DataTypeLayout ComputeLayout() const override;
  explicit TimeType(TimeUnit unit);

 protected:
  bool ParamsEqual(const DataType& other) const override;

 private:
  TimeUnit unit_;
};

class ALKAID_EXPORT TimestampType : public DataType {
 public:
  TimestampType(TimeUnit unit, std::string timezone)
      : DataType(TypeId::kTimestamp), unit_(unit), timezone_(std::move(timezone)) {}
  TimeUnit unit() const { return unit_; }
  /// Empty when the timestamp is zone-naive.
  const std::string& timezone() const { return timezone_; }
  std::string ToString() const override;
  DataTypeLayout ComputeLayout() const override;

 protected:
  bool ParamsEqual(const DataType& other) const override;

 private:
  TimeUnit unit_;
  std::string timezone_;
};

class ALKAID_EXPORT DurationType : public DataType {
 public:
  explicit DurationType(TimeUnit unit) : DataType(TypeId::kDuration), unit_(unit) {}
  TimeUnit unit() const { return unit_; }
  std::string ToString() const override;
  DataTypeLayout ComputeLayout() const override;

 protected:
  bool ParamsEqual(const DataType& other) const override;

 private:
  TimeUnit unit_;
};

/// Interval types carry their unit in the type id; this gives it back.
ALKAID_EXPORT IntervalUnit IntervalUnitOf(TypeId id);

class ALKAID_EXPORT FixedSizeBinaryType : public DataType {
 public:
  explicit FixedSizeBinaryType(int32_t byte_width)
      : DataType(TypeId::kFixedSizeBinary), byte_width_(byte_width) {}
  int32_t byte_width() const { return byte_width_; }
  std::string ToString() const override;
  DataTypeLayout ComputeLayout() const override;

 protected:
  bool ParamsEqual(const DataType& other) const override;

 private:
  int32_t byte_width_;
};

/// list, large_list, list_view, large_list_view: one child field.
class ALKAID_EXPORT ListType : public DataType {
 public:
  ListType(TypeId id, FieldPtr value_field);
  const FieldPtr& value_field() const { return children_[0]; }
  const TypePtr& value_type() const;
  /// 32 or 64.
  int offset_bit_width() const;
  std::string ToString() const override;
  DataTypeLayout ComputeLayout() const override;

 protected:
  bool ParamsEqual(const DataType&) const override { return true; }
};

class ALKAID_EXPORT FixedSizeListType : public DataType {
 public:
  FixedSizeListType(FieldPtr value_field, int32_t list_size);
  const FieldPtr& value_field() const { return children_[0]; }
  const TypePtr& value_type() const;
  int32_t list_size() const { return list_size_; }
  std::string ToString() const override;
  DataTypeLayout ComputeLayout() const override;

 protected:
  bool ParamsEqual(const DataType& other) const override;

 private:
  int32_t list_size_;
};

/// map<key, item>: physically list<entries: struct<key, value>>. The entries
/// struct is non-nullable and its key field non-nullable.
class ALKAID_EXPORT MapType : public DataType {
 public:
  /// `entries` must be a non-nullable struct field with exactly two children.
  static Result<TypePtr> Make(FieldPtr entries, bool keys_sorted = false);
  MapType(FieldPtr entries, bool keys_sorted);
  const FieldPtr& entries_field() const { return children_[0]; }
  const FieldPtr& key_field() const;
  const FieldPtr& item_field() const;
  bool keys_sorted() const { return keys_sorted_; }
  std::string ToString() const override;
  DataTypeLayout ComputeLayout() const override;

 protected:
  bool ParamsEqual(const DataType& other) const override;
  /// The names of the entries, key and value fields are conventional
  /// (writers differ: "entries"/"key"/"value" or their own); only the key
  /// and item types and the item's nullability carry meaning.
  bool ChildrenEqual(const DataType& other, bool check_metadata) const override;

 private:
  bool keys_sorted_;
};

class ALKAID_EXPORT StructType : public DataType {
 public:
  explicit StructType(FieldVector fields);
  int GetFieldIndex(std::string_view name) const;
  std::string ToString() const override;
  DataTypeLayout ComputeLayout() const override;

 protected:
  bool ParamsEqual(const DataType&) const override { return true; }
};

class ALKAID_EXPORT UnionType : public DataType {
 public:
  static constexpr int kMaxTypeCode = 127;
  /// `type_codes[i]` is the code of child i; empty means 0..n-1. Codes must be
  /// distinct and in [0, 127].
  static Result<TypePtr> Make(FieldVector fields, std::vector<int8_t> type_codes, UnionMode mode);
  UnionType(FieldVector fields, std::vector<int8_t> type_codes, UnionMode mode);
  UnionMode mode() const {
    return id_ == TypeId::kSparseUnion ? UnionMode::kSparse : UnionMode::kDense;
  }
  const std::vector<int8_t>& type_codes() const { return type_codes_; }
  /// Child index of each type code (-1 where undeclared); 128 entries.
  const std::vector<int>& child_ids() const { return child_ids_; }
  std::string ToString() const override;
  DataTypeLayout ComputeLayout() const override;

 protected:
  bool ParamsEqual(const DataType& other) const override;

 private:
  std::vector<int8_t> type_codes_;
  std::vector<int> child_ids_;
};

class ALKAID_EXPORT DictionaryType : public DataType {
 public:
  /// `index_type` must be an integer type.
  static Result<TypePtr> Make(TypePtr index_type, TypePtr value_type, bool ordered = false);
  DictionaryType(TypePtr index_type, TypePtr value_type, bool ordered);
  const TypePtr& index_type() const { return index_type_; }
  const TypePtr& value_type() const { return value_type_; }
  bool ordered() const { return ordered_; }
  std::string ToString() const override;
  DataTypeLayout ComputeLayout() const override;

 protected:
  bool ParamsEqual(const DataType& other) const override;

 private:
  TypePtr index_type_;
  TypePtr value_type_;
  bool ordered_;
};

class ALKAID_EXPORT RunEndEncodedType : public DataType {
 public:
  /// `run_end_type` must be int16, int32 or int64.
  static Result<TypePtr> Make(TypePtr run_end_type, TypePtr value_type);
  RunEndEncodedType(TypePtr run_end_type, TypePtr value_type);
  const TypePtr& run_end_type() const;
  const TypePtr& value_type() const;
  std::string ToString() const override;
  DataTypeLayout ComputeLayout() const override;

 protected:
  bool ParamsEqual(const DataType&) const override { return true; }
};

/// A user-defined type: a name and serialized metadata over a storage type.
/// Carried in IPC as field metadata (ALKAID:extension:name / :metadata).
/// Subclass it for behaviour; the base class alone round-trips any extension.
class ALKAID_EXPORT ExtensionType : public DataType {
 public:
  ExtensionType(std::string extension_name, std::string serialized, TypePtr storage_type);
  const std::string& extension_name() const { return extension_name_; }
  /// The ALKAID:extension:metadata value (may be empty).
  const std::string& serialized() const { return serialized_; }
  const TypePtr& storage_type() const { return storage_type_; }
  std::string ToString() const override;
  DataTypeLayout ComputeLayout() const override;

 protected:
  bool ParamsEqual(const DataType& other) const override;

 private:
  std::string extension_name_;
  std::string serialized_;
  TypePtr storage_type_;
};

// ---------------------------------------------------------------------------
// Factories. Parameterless types are singletons.

ALKAID_EXPORT TypePtr null();
ALKAID_EXPORT TypePtr boolean();
ALKAID_EXPORT TypePtr int8();
ALKAID_EXPORT TypePtr int16();
ALKAID_EXPORT TypePtr int32();
ALKAID_EXPORT TypePtr int64();
ALKAID_EXPORT TypePtr uint8();
ALKAID_EXPORT TypePtr uint16();
ALKAID_EXPORT TypePtr uint32();
ALKAID_EXPORT TypePtr uint64();
ALKAID_EXPORT TypePtr float16();
ALKAID_EXPORT TypePtr float32();
ALKAID_EXPORT TypePtr float64();
ALKAID_EXPORT TypePtr utf8();
ALKAID_EXPORT TypePtr binary();
ALKAID_EXPORT TypePtr large_utf8();
ALKAID_EXPORT TypePtr large_binary();
ALKAID_EXPORT TypePtr utf8_view();
ALKAID_EXPORT TypePtr binary_view();
ALKAID_EXPORT TypePtr date32();
ALKAID_EXPORT TypePtr date64();
ALKAID_EXPORT TypePtr month_interval();
ALKAID_EXPORT TypePtr day_time_interval();
ALKAID_EXPORT TypePtr month_day_nano_interval();
/// Aborts on invalid precision; use DecimalType::Make for untrusted input.
ALKAID_EXPORT TypePtr decimal32(int32_t precision, int32_t scale);
ALKAID_EXPORT TypePtr decimal64(int32_t precision, int32_t scale);
ALKAID_EXPORT TypePtr decimal128(int32_t precision, int32_t scale);
ALKAID_EXPORT TypePtr decimal256(int32_t precision, int32_t scale);
/// time32 for s/ms, time64 for us/ns.
ALKAID_EXPORT TypePtr time32(TimeUnit unit);
ALKAID_EXPORT TypePtr time64(TimeUnit unit);
ALKAID_EXPORT TypePtr timestamp(TimeUnit unit, std::string timezone = {});
ALKAID_EXPORT TypePtr duration(TimeUnit unit);
ALKAID_EXPORT TypePtr fixed_size_binary(int32_t byte_width);
ALKAID_EXPORT TypePtr list(TypePtr value_type);  // child named "item"
ALKAID_EXPORT TypePtr list(FieldPtr value_field);
ALKAID_EXPORT TypePtr large_list(TypePtr value_type);
ALKAID_EXPORT TypePtr large_list(FieldPtr value_field);
ALKAID_EXPORT TypePtr list_view(TypePtr value_type);
ALKAID_EXPORT TypePtr list_view(FieldPtr value_field);
ALKAID_EXPORT TypePtr large_list_view(TypePtr value_type);
ALKAID_EXPORT TypePtr large_list_view(FieldPtr value_field);
ALKAID_EXPORT TypePtr fixed_size_list(TypePtr value_type, int32_t list_size);
ALKAID_EXPORT TypePtr fixed_size_list(FieldPtr value_field, int32_t list_size);
/// map<key_type, item_type> with fields "entries", "key", "value".
ALKAID_EXPORT TypePtr map(TypePtr key_type, TypePtr item_type, bool keys_sorted = false);
ALKAID_EXPORT TypePtr struct_(FieldVector fields);
ALKAID_EXPORT TypePtr sparse_union(FieldVector fields, std::vector<int8_t> type_codes = {});
ALKAID_EXPORT TypePtr dense_union(FieldVector fields, std::vector<int8_t> type_codes = {});
ALKAID_EXPORT TypePtr dictionary(TypePtr index_type, TypePtr value_type, bool ordered = false);
ALKAID_EXPORT TypePtr run_end_encoded(TypePtr run_end_type, TypePtr value_type);
ALKAID_EXPORT TypePtr extension(std::string name, std::string serialized, TypePtr storage);

/// For dictionary and extension types, the type whose layout the data has
/// (indices for dictionary, storage for extension); otherwise `type`.
ALKAID_EXPORT const DataType& StorageType(const DataType& type);

}  // namespace alkaid::format
