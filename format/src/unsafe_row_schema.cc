// Which Alkaid types UnsafeRow carries, and the decoded schema.

#include <string>

#include "alkaid/format/unsafe_row.h"
#include "unsafe_row_internal.h"

namespace alkaid::format {
namespace internal {

RowKind RowKindOf(const DataType& type) {
  switch (type.id()) {
    case TypeId::kNull:
      return RowKind::kUnknown;
    case TypeId::kBool:
      return RowKind::kBool;
    case TypeId::kInt8:
      return RowKind::kInt8;
    case TypeId::kInt16:
      return RowKind::kInt16;
    case TypeId::kInt32:
    case TypeId::kDate32:
      return RowKind::kInt32;
    case TypeId::kInt64:
    case TypeId::kTimestamp:
      return RowKind::kInt64;
    case TypeId::kFloat:
      return RowKind::kFloat;
    case TypeId::kDouble:
      return RowKind::kDouble;
    case TypeId::kDecimal32:
    case TypeId::kDecimal64:
    case TypeId::kDecimal128:
    case TypeId::kDecimal256:
      return static_cast<const DecimalType&>(type).precision() <= kMaxShortDecimalPrecision
                 ? RowKind::kShortDecimal
                 : RowKind::kLongDecimal;
    case TypeId::kList:
    case TypeId::kLargeList:
    case TypeId::kFixedSizeList:
      return RowKind::kArray;
    case TypeId::kMap:
      return RowKind::kMap;
    case TypeId::kStruct:
      return RowKind::kStruct;
    case TypeId::kDictionary:
      return RowKindOf(*static_cast<const DictionaryType&>(type).value_type());
    default:
      return RowKind::kBinary;  // binary-like (CheckRowSchema admits no other)
  }
}

const FieldPtr& ListValueField(const DataType& type) { return type.field(0); }

namespace {

Status CheckType(const DataType& type, const std::string& path, int depth) {
  auto reject = [&](std::string_view why) {
    return Status::TypeError("field '", path, "' has type ", type.ToString(),
                             ", which UnsafeRow cannot carry", why.empty() ? "" : ": ", why);
  };
  switch (type.id()) {
    case TypeId::kNull:
    case TypeId::kBool:
    case TypeId::kInt8:
    case TypeId::kInt16:
    case TypeId::kInt32:
    case TypeId::kInt64:
    case TypeId::kFloat:
    case TypeId::kDouble:
    case TypeId::kDate32:
    case TypeId::kBinary:
    case TypeId::kString:
    case TypeId::kLargeBinary:
    case TypeId::kLargeString:
    case TypeId::kBinaryView:
    case TypeId::kStringView:
      return Status::OK();
    case TypeId::kTimestamp:
      if (static_cast<const TimestampType&>(type).unit() != TimeUnit::kMicro) {
        return reject("Spark timestamps are microseconds (timestamp[us])");
      }
      return Status::OK();
    case TypeId::kDecimal32:
    case TypeId::kDecimal64:
    case TypeId::kDecimal128:
    case TypeId::kDecimal256:
      if (static_cast<const DecimalType&>(type).precision() > kMaxRowDecimalPrecision) {
        return reject("Spark decimals have at most 38 digits");
      }
      return Status::OK();
    case TypeId::kDictionary: {
      const auto& dict = static_cast<const DictionaryType&>(type);
      if (dict.value_type()->id() == TypeId::kDictionary) return reject("nested dictionary");
      return CheckType(*dict.value_type(), path, depth);
    }
    case TypeId::kList:
    case TypeId::kLargeList:
    case TypeId::kFixedSizeList:
    case TypeId::kMap:
    case TypeId::kStruct: {
      if (depth + 1 > kMaxUnsafeRowNesting) {
        return Status::Invalid("field '", path, "' nests deeper than ", kMaxUnsafeRowNesting,
                               " levels");
      }
      for (const auto& child : type.fields()) {
        if (child == nullptr || child->type() == nullptr) {
          return Status::Invalid("field '", path, "' has a missing child type");
        }
        if (type.id() == TypeId::kMap) {
          // Through the entries struct to key and value.
          for (const auto& kv : child->type()->fields()) {
            ALKAID_RETURN_NOT_OK(CheckType(*kv->type(), path + "." + kv->name(), depth + 1));
          }
        } else {
          ALKAID_RETURN_NOT_OK(CheckType(*child->type(), path + "." + child->name(), depth + 1));
        }
      }
      return Status::OK();
    }
    case TypeId::kUInt8:
    case TypeId::kUInt16:
    case TypeId::kUInt32:
    case TypeId::kUInt64:
      return reject("Spark has no unsigned integers");
    case TypeId::kSparseUnion:
    case TypeId::kDenseUnion:
      return reject("Spark has no union type");
    case TypeId::kDuration:
    case TypeId::kIntervalMonths:
    case TypeId::kIntervalDayTime:
    case TypeId::kIntervalMonthDayNano:
      return reject("durations and intervals have no UnsafeRow layout here");
    default:
      return reject("");
  }
}

TypePtr WithoutDictionaries(const TypePtr& type);

FieldPtr FieldWithoutDictionaries(const FieldPtr& f) {
  TypePtr t = WithoutDictionaries(f->type());
  return t == f->type() ? f : f->WithType(std::move(t));
}

TypePtr WithoutDictionaries(const TypePtr& type) {
  switch (type->id()) {
    case TypeId::kDictionary:
      return WithoutDictionaries(static_cast<const DictionaryType&>(*type).value_type());
    case TypeId::kList:
    case TypeId::kLargeList:
    case TypeId::kFixedSizeList:
    case TypeId::kMap:
    case TypeId::kStruct: {
      FieldVector children;
      bool changed = false;
      for (const auto& c : type->fields()) {
        children.push_back(FieldWithoutDictionaries(c));
        changed = changed || children.back() != c;
      }
      if (!changed) return type;
      switch (type->id()) {
        case TypeId::kList:
          return list(children[0]);
        case TypeId::kLargeList:
          return large_list(children[0]);
        case TypeId::kFixedSizeList:
          return fixed_size_list(children[0],
                                 static_cast<const FixedSizeListType&>(*type).list_size());
        case TypeId::kMap:
          return std::make_shared<MapType>(children[0],
                                           static_cast<const MapType&>(*type).keys_sorted());
        default:
          return struct_(std::move(children));
      }
    }
    default:
      return type;
  }
}

}  // namespace
}  // namespace internal

Status CheckRowSchema(const Schema& schema) {
  for (const auto& f : schema.fields()) {
    if (f == nullptr || f->type() == nullptr) {
      return Status::Invalid("schema has a field without a type");
    }
    ALKAID_RETURN_NOT_OK(internal::CheckType(*f->type(), f->name(), 0));
  }
  return Status::OK();
}

Result<SchemaPtr> RowOutputSchema(const Schema& schema) {
  ALKAID_RETURN_NOT_OK(CheckRowSchema(schema));
  FieldVector fields;
  fields.reserve(schema.fields().size());
  for (const auto& f : schema.fields()) fields.push_back(internal::FieldWithoutDictionaries(f));
  return std::make_shared<Schema>(std::move(fields), schema.metadata());
}

}  // namespace alkaid::format
