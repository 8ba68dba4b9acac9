// Alkaid arrays -> JSON integration format.
//
// Output follows the conventions of the files Arrow writes, so that other
// implementations read it: 64-bit integers, decimals and large offsets as
// decimal strings, binary as upper-case hex, UTF-8 as JSON strings,
// intervals as objects, every slot present in DATA (null ones too).
// Non-finite floats, which JSON numbers cannot express, are written as the
// strings "NaN", "Infinity" and "-Infinity" (the reader accepts them).
//
// Slices are written as what they denote: offsets of lists and binaries are
// rebased to start at 0 and their children cut to the referenced range;
// struct, sparse union and fixed-size-list children are cut to the parent's
// window; run-end encoded arrays are re-based onto their window. List views,
// dense unions and binary views keep their offsets as stored, with their
// children and buffers written whole.

#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "alkaid/format/array.h"
#include "alkaid/format/bit_util.h"
#include "alkaid/format/compare.h"
#include "alkaid/format/json_integration.h"
#include "alkaid/format/validate.h"
#include "json_integration_internal.h"

namespace alkaid::format {

namespace {

using ojson = nlohmann::ordered_json;

std::string PathString(const FieldPath& path) {
  std::string out = "[";
  for (size_t i = 0; i < path.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(path[i]);
  }
  return out + "]";
}

/// Strips extension wrappers.
const DataType& Unwrapped(const DataType& type) { return StorageType(type); }

ojson FloatJson(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

/// The double nearest to the shortest decimal that reads back as `f`, so
/// that the JSON shows 641.818 rather than 641.8179931640625. Falls back to
/// the exact value if the shortest form would not read back as `f` through
/// a double.
double ShortestFloat(float f) {
  if (!std::isfinite(f)) return f;
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), f);
  if (ec != std::errc()) return f;
  double d = 0;
  auto [p, ec2] = std::from_chars(buf, end, d);
  if (ec2 != std::errc() || p != end || static_cast<float>(d) != f) return f;
  return d;
}

/// Same for a float16: the shortest decimal (at most 5 significant digits
/// are ever needed) that converts back to `h`.
double ShortestHalf(uint16_t h) {
  const double exact = internal::HalfToDouble(h);
  if (!std::isfinite(exact)) return exact;
  for (int digits = 1; digits <= 17; ++digits) {
    char buf[64];
    auto [end, ec] =
        std::to_chars(buf, buf + sizeof(buf), exact, std::chars_format::general, digits);
    if (ec != std::errc()) break;
    double d = 0;
    auto [p, ec2] = std::from_chars(buf, end, d);
    if (ec2 == std::errc() && p == end && internal::HalfFromDouble(d) == h) return d;
  }
  return exact;
}

std::string_view TimeUnitJson(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kSecond:
      return "SECOND";
    case TimeUnit::kMilli:
      return "MILLISECOND";
    case TimeUnit::kMicro:
      return "MICROSECOND";
    case TimeUnit::kNano:
      return "NANOSECOND";
  }
  return "SECOND";
}

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

class Writer {
 public:
  explicit Writer(const JsonIntegrationData& data) : data_(data) {}

  Result<std::string> Write(const JsonWriteOptions& options);

 private:
  Status AssignIds(const Field& field, FieldPath* path, int64_t* next);
  Status CheckIds(const Field& field, FieldPath* path);
  Status AddDictionary(int64_t id, const ArrayDataPtr& values, const DataType& value_type,
                       FieldPath* path, const std::string& where);
  Status CollectDictionaries(const ArrayData& a, const DataType& type, FieldPath* path,
                             const std::string& where);

  Result<ojson> WriteField(const Field& field, FieldPath* path);
  Result<ojson> WriteType(const DataType& type);
  Result<ojson> WriteColumn(const ArrayData& a, const DataType& type, const std::string& name,
                            FieldPath* path, const std::string& where);
  Status WriteBody(const ArrayData& a, const DataType& type, FieldPath* path,
                   const std::string& where, ojson* out);
  Status WriteChildren(const std::vector<ArrayDataPtr>& children, const DataType& type,
                       FieldPath* path, const std::string& where, ojson* out);

  const JsonIntegrationData& data_;
  std::map<FieldPath, int64_t> ids_;
  std::map<int64_t, ArrayDataPtr> dictionaries_;
  std::map<int64_t, FieldPath> dictionary_paths_;
  std::map<int64_t, TypePtr> dictionary_types_;
};

// ---------------------------------------------------------------------------
// Dictionary ids and dictionaries

Status Writer::AssignIds(const Field& field, FieldPath* path, int64_t* next) {
  const DataType* t = &Unwrapped(*field.type());
  if (t->id() == TypeId::kDictionary) {
    ids_[*path] = (*next)++;
    t = &Unwrapped(*static_cast<const DictionaryType&>(*t).value_type());
  }
  for (int i = 0; i < t->num_fields(); ++i) {
    path->push_back(i);
    Status st = AssignIds(*t->field(i), path, next);
    path->pop_back();
    ALKAID_RETURN_NOT_OK(st);
  }
  return Status::OK();
}

Status Writer::CheckIds(const Field& field, FieldPath* path) {
  const DataType* t = &Unwrapped(*field.type());
  if (t->id() == TypeId::kDictionary) {
    if (ids_.find(*path) == ids_.end()) {
      return Status::Invalid("field '", field.name(), "' (path ", PathString(*path),
                             ") is dictionary-encoded but has no dictionary id");
    }
    t = &Unwrapped(*static_cast<const DictionaryType&>(*t).value_type());
  }
  for (int i = 0; i < t->num_fields(); ++i) {
    path->push_back(i);
    Status st = CheckIds(*t->field(i), path);
    path->pop_back();
    ALKAID_RETURN_NOT_OK(st);
  }
  return Status::OK();
}

Status Writer::AddDictionary(int64_t id, const ArrayDataPtr& values, const DataType& value_type,
                             FieldPath* path, const std::string& where) {
  auto it = dictionaries_.find(id);
  if (it != dictionaries_.end()) {
    if (it->second == values) return Status::OK();
    if (!ArrayEquals(*MakeArray(it->second), *MakeArray(values))) {
      return Status::NotImplemented(
          where, ": dictionary id ", id,
          " has different values here than earlier; the JSON integration format holds one "
          "dictionary per id");
    }
    return Status::OK();
  }
  if (!values->type->Equals(value_type)) {
    return Status::Invalid(where, ": dictionary id ", id, " has values of type ",
                           values->type->ToString(), ", the field's value type is ",
                           value_type.ToString());
  }
  dictionaries_[id] = values;
  dictionary_paths_[id] = *path;
  // The values may hold dictionary-encoded children of their own.
  return CollectDictionaries(*values, value_type, path,
                             where + " (dictionary " + std::to_string(id) + ")");
}

Status Writer::CollectDictionaries(const ArrayData& a, const DataType& type, FieldPath* path,
                                   const std::string& where) {
  const DataType& t = Unwrapped(type);
  if (t.id() == TypeId::kDictionary) {
    const auto& dict_type = static_cast<const DictionaryType&>(t);
    if (a.dictionary == nullptr) {
      return Status::Invalid(where, ": dictionary-encoded column has no dictionary");
    }
    return AddDictionary(ids_.at(*path), a.dictionary, *dict_type.value_type(), path, where);
  }
  if (static_cast<int>(a.child_data.size()) != t.num_fields()) {
    return Status::Invalid(where, ": ", a.child_data.size(), " children for type ", t.ToString());
  }
  for (int i = 0; i < t.num_fields(); ++i) {
    path->push_back(i);
    Status st = CollectDictionaries(*a.child_data[static_cast<size_t>(i)], *t.field(i)->type(),
                                    path, where + "." + t.field(i)->name());
    path->pop_back();
    ALKAID_RETURN_NOT_OK(st);
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Schema

Result<ojson> Writer::WriteType(const DataType& type) {
  ojson j;
  switch (type.id()) {
    case TypeId::kNull:
      j["name"] = "null";
      break;
    case TypeId::kBool:
      j["name"] = "bool";
      break;
    case TypeId::kInt8:
    case TypeId::kUInt8:
    case TypeId::kInt16:
    case TypeId::kUInt16:
    case TypeId::kInt32:
    case TypeId::kUInt32:
    case TypeId::kInt64:
    case TypeId::kUInt64:
      j["name"] = "int";
      j["isSigned"] = IsSignedInteger(type.id());
      j["bitWidth"] = BitWidth(type.id());
      break;
    case TypeId::kHalfFloat:
    case TypeId::kFloat:
    case TypeId::kDouble:
      j["name"] = "floatingpoint";
      j["precision"] = type.id() == TypeId::kHalfFloat ? "HALF"
                       : type.id() == TypeId::kFloat   ? "SINGLE"
                                                       : "DOUBLE";
      break;
    case TypeId::kDecimal32:
    case TypeId::kDecimal64:
    case TypeId::kDecimal128:
    case TypeId::kDecimal256: {
      const auto& d = static_cast<const DecimalType&>(type);
      j["name"] = "decimal";
      j["precision"] = d.precision();
      j["scale"] = d.scale();
      j["bitWidth"] = d.bit_width();
      break;
    }
    case TypeId::kDate32:
    case TypeId::kDate64:
      j["name"] = "date";
      j["unit"] = type.id() == TypeId::kDate32 ? "DAY" : "MILLISECOND";
      break;
    case TypeId::kTime32:
    case TypeId::kTime64: {
      const auto& t = static_cast<const TimeType&>(type);
      j["name"] = "time";
      j["unit"] = TimeUnitJson(t.unit());
      j["bitWidth"] = t.bit_width();
      break;
    }
    case TypeId::kTimestamp: {
      const auto& t = static_cast<const TimestampType&>(type);
      j["name"] = "timestamp";
      j["unit"] = TimeUnitJson(t.unit());
      if (!t.timezone().empty()) j["timezone"] = t.timezone();
      break;
    }
    case TypeId::kDuration:
      j["name"] = "duration";
      j["unit"] = TimeUnitJson(static_cast<const DurationType&>(type).unit());
      break;
    case TypeId::kIntervalMonths:
    case TypeId::kIntervalDayTime:
    case TypeId::kIntervalMonthDayNano:
      j["name"] = "interval";
      j["unit"] = type.id() == TypeId::kIntervalMonths    ? "YEAR_MONTH"
                  : type.id() == TypeId::kIntervalDayTime ? "DAY_TIME"
                                                          : "MONTH_DAY_NANO";
      break;
    case TypeId::kBinary:
      j["name"] = "binary";
      break;
    case TypeId::kString:
      j["name"] = "utf8";
      break;
    case TypeId::kLargeBinary:
      j["name"] = "largebinary";
      break;
    case TypeId::kLargeString:
      j["name"] = "largeutf8";
      break;
    case TypeId::kBinaryView:
      j["name"] = "binaryview";
      break;
    case TypeId::kStringView:
      j["name"] = "utf8view";
      break;
    case TypeId::kFixedSizeBinary:
      j["name"] = "fixedsizebinary";
      j["byteWidth"] = static_cast<const FixedSizeBinaryType&>(type).byte_width();
      break;
    case TypeId::kList:
      j["name"] = "list";
      break;
    case TypeId::kLargeList:
      j["name"] = "largelist";
      break;
    case TypeId::kListView:
      j["name"] = "listview";
      break;
    case TypeId::kLargeListView:
      j["name"] = "largelistview";
      break;
    case TypeId::kFixedSizeList:
      j["name"] = "fixedsizelist";
      j["listSize"] = static_cast<const FixedSizeListType&>(type).list_size();
      break;
    case TypeId::kStruct:
      j["name"] = "struct";
      break;
    case TypeId::kMap:
      j["name"] = "map";
      j["keysSorted"] = static_cast<const MapType&>(type).keys_sorted();
      break;
    case TypeId::kSparseUnion:
    case TypeId::kDenseUnion: {
      const auto& u = static_cast<const UnionType&>(type);
      j["name"] = "union";
      j["mode"] = u.mode() == UnionMode::kSparse ? "SPARSE" : "DENSE";
      ojson codes = ojson::array();
      for (int8_t c : u.type_codes()) codes.push_back(static_cast<int>(c));
      j["typeIds"] = std::move(codes);
      break;
    }
    case TypeId::kRunEndEncoded:
      j["name"] = "runendencoded";
      break;
    case TypeId::kDictionary:
    case TypeId::kExtension:
      return Status::NotImplemented("type ", type.ToString(),
                                    " can only be written as the type of a field");
  }
  return j;
}

Result<ojson> Writer::WriteField(const Field& field, FieldPath* path) {
  ojson j;
  j["name"] = field.name();
  j["nullable"] = field.nullable();

  const DataType* t = field.type().get();
  std::vector<std::pair<std::string, std::string>> metadata;
  if (field.metadata() != nullptr) metadata = field.metadata()->pairs();
  while (t->id() == TypeId::kExtension) {
    const auto& ext = static_cast<const ExtensionType&>(*t);
    metadata.emplace_back("ARROW:extension:name", ext.extension_name());
    metadata.emplace_back("ARROW:extension:metadata", ext.serialized());
    t = ext.storage_type().get();
  }
  ojson dictionary;
  if (t->id() == TypeId::kDictionary) {
    const auto& d = static_cast<const DictionaryType&>(*t);
    ALKAID_ASSIGN_OR_RAISE(ojson index_type, WriteType(*d.index_type()));
    dictionary["id"] = ids_.at(*path);
    dictionary["indexType"] = std::move(index_type);
    dictionary["isOrdered"] = d.ordered();
    t = d.value_type().get();
    if (t->id() == TypeId::kExtension || t->id() == TypeId::kDictionary) {
      return Status::NotImplemented("field '", field.name(), "': dictionary of ", t->ToString(),
                                    " cannot be written as JSON");
    }
  }
  auto type_json = WriteType(*t);
  if (!type_json.ok()) return type_json.status().WithContext("field '" + field.name() + "'");
  j["type"] = *std::move(type_json);

  ojson children = ojson::array();
  for (int i = 0; i < t->num_fields(); ++i) {
    path->push_back(i);
    auto child = WriteField(*t->field(i), path);
    path->pop_back();
    ALKAID_RETURN_NOT_OK(child);
    children.push_back(*std::move(child));
  }
  j["children"] = std::move(children);
  if (!dictionary.is_null()) j["dictionary"] = std::move(dictionary);
  if (!metadata.empty()) {
    ojson md = ojson::array();
    for (auto& [k, v] : metadata) md.push_back({{"key", k}, {"value", v}});
    j["metadata"] = std::move(md);
  }
  return j;
}

// ---------------------------------------------------------------------------
// Columns

Result<ojson> Writer::WriteColumn(const ArrayData& a, const DataType& type, const std::string& name,
                                  FieldPath* path, const std::string& where) {
  ojson j;
  j["name"] = name;
  j["count"] = a.length;
  ALKAID_RETURN_NOT_OK(WriteBody(a, type, path, where, &j));
  return j;
}

Status Writer::WriteChildren(const std::vector<ArrayDataPtr>& children, const DataType& type,
                             FieldPath* path, const std::string& where, ojson* out) {
  if (static_cast<int>(children.size()) != type.num_fields()) {
    return Status::Invalid(where, ": ", children.size(), " children for type ", type.ToString());
  }
  ojson arr = ojson::array();
  for (int i = 0; i < type.num_fields(); ++i) {
    const Field& f = *type.field(i);
    path->push_back(i);
    auto child = WriteColumn(*children[static_cast<size_t>(i)], *f.type(), f.name(), path,
                             where + "." + f.name());
    path->pop_back();
    ALKAID_RETURN_NOT_OK(child);
    arr.push_back(*std::move(child));
  }
  (*out)["children"] = std::move(arr);
  return Status::OK();
}

/// The bytes of a string value as a JSON string, or an error if they are
/// not UTF-8.
Status Utf8Json(std::string_view bytes, const std::string& where, int64_t slot, ojson* out) {
  int64_t bad = 0;
  if (!internal::IsValidUtf8(bytes, &bad)) {
    return Status::Invalid(where, ": slot ", slot, " is not valid UTF-8 (byte ", bad, ")");
  }
  *out = std::string(bytes);
  return Status::OK();
}

Status Writer::WriteBody(const ArrayData& a, const DataType& type, FieldPath* path,
                         const std::string& where, ojson* out) {
  const DataType& t0 = Unwrapped(type);
  // A dictionary-encoded column is written as its indices.
  const DataType& t =
      t0.id() == TypeId::kDictionary ? *static_cast<const DictionaryType&>(t0).index_type() : t0;
  ojson& j = *out;
  const int64_t off = a.offset;
  const int64_t len = a.length;
  const TypeId id = t.id();

  auto values = [&](size_t i) -> const uint8_t* {
    return a.buffers.size() > i && a.buffers[i] != nullptr ? a.buffers[i]->data() : nullptr;
  };
  auto need = [&](size_t i) -> Status {
    if (values(i) == nullptr && len > 0) {
      return Status::Invalid(where, ": buffer ", i, " is missing");
    }
    return Status::OK();
  };

  if (id == TypeId::kNull) return Status::OK();
  if (id == TypeId::kRunEndEncoded) {
    const auto& ree = static_cast<const RunEndEncodedType&>(t);
    if (a.child_data.size() != 2)
      return Status::Invalid(where, ": run-end encoded needs 2 children");
    const ArrayData& run_ends = *a.child_data[0];
    const int width = BitWidth(ree.run_end_type()->id()) / 8;
    auto run_end = [&](int64_t p) -> int64_t {
      const uint8_t* base = run_ends.buffers[1]->data() + (run_ends.offset + p) * width;
      return width == 2   ? Load<int16_t>(base)
             : width == 4 ? Load<int32_t>(base)
                          : Load<int64_t>(base);
    };
    // The physical runs covering [off, off + len), re-based to start at 0.
    int64_t first = 0;
    int64_t last = -1;
    if (len > 0) {
      if (run_ends.buffers.size() < 2 || run_ends.buffers[1] == nullptr) {
        return Status::Invalid(where, ": run ends have no data buffer");
      }
      int64_t lo = 0, hi = run_ends.length;  // first run with end > off
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (run_end(mid) > off)
          hi = mid;
        else
          lo = mid + 1;
      }
      first = lo;
      lo = first, hi = run_ends.length;  // first run with end >= off + len
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (run_end(mid) >= off + len)
          hi = mid;
        else
          lo = mid + 1;
      }
      last = lo;
      if (last >= run_ends.length)
        return Status::Invalid(where, ": run ends do not cover the array");
    }
    ojson ends = {{"name", ree.field(0)->name()}, {"count", last - first + 1}};
    ojson validity = ojson::array();
    ojson data = ojson::array();
    for (int64_t p = first; p <= last; ++p) {
      const int64_t e = std::min(run_end(p) - off, len);
      validity.push_back(1);
      if (width == 8) {
        data.push_back(std::to_string(e));
      } else {
        data.push_back(e);
      }
    }
    ends["VALIDITY"] = std::move(validity);
    ends["DATA"] = std::move(data);
    path->push_back(1);
    auto vals = WriteColumn(*a.child_data[1]->Slice(first, last - first + 1), *ree.value_type(),
                            ree.field(1)->name(), path, where + "." + ree.field(1)->name());
    path->pop_back();
    ALKAID_RETURN_NOT_OK(vals);
    j["children"] = ojson::array({std::move(ends), *std::move(vals)});
    return Status::OK();
  }
  if (IsUnion(id)) {
    const bool dense = id == TypeId::kDenseUnion;
    ALKAID_RETURN_NOT_OK(need(0));
    ojson type_ids = ojson::array();
    for (int64_t i = 0; i < len; ++i)
      type_ids.push_back(static_cast<int>(Load<int8_t>(values(0) + off + i)));
    j["TYPE_ID"] = std::move(type_ids);
    if (dense) {
      ALKAID_RETURN_NOT_OK(need(1));
      ojson offsets = ojson::array();
      for (int64_t i = 0; i < len; ++i) offsets.push_back(Load<int32_t>(values(1) + 4 * (off + i)));
      j["OFFSET"] = std::move(offsets);
      return WriteChildren(a.child_data, t, path, where, out);
    }
    std::vector<ArrayDataPtr> sliced;
    for (const auto& c : a.child_data) sliced.push_back(c->Slice(off, len));
    return WriteChildren(sliced, t, path, where, out);
  }

  // Validity.
  {
    ojson validity = ojson::array();
    const uint8_t* bits = values(0);
    for (int64_t i = 0; i < len; ++i) {
      validity.push_back(bits == nullptr || bit_util::GetBit(bits, off + i) ? 1 : 0);
    }
    j["VALIDITY"] = std::move(validity);
  }
  auto is_valid = [&](int64_t i) {
    return values(0) == nullptr || bit_util::GetBit(values(0), off + i);
  };

  auto fixed = [&](int width, auto&& emit) -> Status {
    ALKAID_RETURN_NOT_OK(need(1));
    ojson data = ojson::array();
    for (int64_t i = 0; i < len; ++i) data.push_back(emit(values(1) + (off + i) * width));
    j["DATA"] = std::move(data);
    return Status::OK();
  };

  switch (id) {
    case TypeId::kBool: {
      ALKAID_RETURN_NOT_OK(need(1));
      ojson data = ojson::array();
      for (int64_t i = 0; i < len; ++i) data.push_back(bit_util::GetBit(values(1), off + i));
      j["DATA"] = std::move(data);
      return Status::OK();
    }
    case TypeId::kInt8:
      return fixed(1, [](const uint8_t* p) { return ojson(Load<int8_t>(p)); });
    case TypeId::kUInt8:
      return fixed(1, [](const uint8_t* p) { return ojson(Load<uint8_t>(p)); });
    case TypeId::kInt16:
      return fixed(2, [](const uint8_t* p) { return ojson(Load<int16_t>(p)); });
    case TypeId::kUInt16:
      return fixed(2, [](const uint8_t* p) { return ojson(Load<uint16_t>(p)); });
    case TypeId::kInt32:
    case TypeId::kDate32:
    case TypeId::kTime32:
    case TypeId::kIntervalMonths:
      return fixed(4, [](const uint8_t* p) { return ojson(Load<int32_t>(p)); });
    case TypeId::kUInt32:
      return fixed(4, [](const uint8_t* p) { return ojson(Load<uint32_t>(p)); });
    case TypeId::kInt64:
    case TypeId::kDate64:
    case TypeId::kTime64:
    case TypeId::kTimestamp:
    case TypeId::kDuration:
      return fixed(8, [](const uint8_t* p) { return ojson(std::to_string(Load<int64_t>(p))); });
    case TypeId::kUInt64:
      return fixed(8, [](const uint8_t* p) { return ojson(std::to_string(Load<uint64_t>(p))); });
    case TypeId::kHalfFloat:
      return fixed(2, [](const uint8_t* p) { return FloatJson(ShortestHalf(Load<uint16_t>(p))); });
    case TypeId::kFloat:
      return fixed(4, [](const uint8_t* p) { return FloatJson(ShortestFloat(Load<float>(p))); });
    case TypeId::kDouble:
      return fixed(8, [](const uint8_t* p) { return FloatJson(Load<double>(p)); });
    case TypeId::kDecimal32:
    case TypeId::kDecimal64:
    case TypeId::kDecimal128:
    case TypeId::kDecimal256: {
      const int bits = static_cast<const DecimalType&>(t).bit_width();
      return fixed(bits / 8, [bits](const uint8_t* p) {
        return ojson(internal::FormatDecimalInteger(p, bits));
      });
    }
    case TypeId::kIntervalDayTime:
      return fixed(8, [](const uint8_t* p) {
        const auto v = Load<DayTimeInterval>(p);
        return ojson{{"days", v.days}, {"milliseconds", v.milliseconds}};
      });
    case TypeId::kIntervalMonthDayNano:
      return fixed(16, [](const uint8_t* p) {
        const auto v = Load<MonthDayNanoInterval>(p);
        return ojson{{"months", v.months}, {"days", v.days}, {"nanoseconds", v.nanoseconds}};
      });
    case TypeId::kFixedSizeBinary: {
      const int width = static_cast<const FixedSizeBinaryType&>(t).byte_width();
      return fixed(width, [width](const uint8_t* p) {
        return ojson(internal::HexEncode(
            std::string_view(reinterpret_cast<const char*>(p), static_cast<size_t>(width))));
      });
    }
    case TypeId::kBinary:
    case TypeId::kString:
    case TypeId::kLargeBinary:
    case TypeId::kLargeString: {
      const bool large = id == TypeId::kLargeBinary || id == TypeId::kLargeString;
      const bool utf8 = id == TypeId::kString || id == TypeId::kLargeString;
      ALKAID_RETURN_NOT_OK(need(1));
      auto offset_at = [&](int64_t i) -> int64_t {
        return large ? Load<int64_t>(values(1) + 8 * (off + i))
                     : Load<int32_t>(values(1) + 4 * (off + i));
      };
      const char* chars = reinterpret_cast<const char*>(values(2));
      ojson offsets = ojson::array();
      ojson data = ojson::array();
      int64_t pos = 0;
      auto push_offset = [&](int64_t v) {
        if (large) {
          offsets.push_back(std::to_string(v));
        } else {
          offsets.push_back(v);
        }
      };
      push_offset(0);
      for (int64_t i = 0; i < len; ++i) {
        const int64_t begin = offset_at(i);
        const int64_t n = offset_at(i + 1) - begin;
        std::string_view bytes =
            n == 0 ? std::string_view() : std::string_view(chars + begin, static_cast<size_t>(n));
        if (utf8) {
          ojson s;
          Status st = Utf8Json(bytes, where, i, &s);
          if (!st.ok()) {
            // Bytes under a null slot carry nothing; write them as empty.
            if (is_valid(i)) return st;
            s = "";
            bytes = {};
          }
          data.push_back(std::move(s));
        } else {
          data.push_back(internal::HexEncode(bytes));
        }
        pos += static_cast<int64_t>(bytes.size());
        push_offset(pos);
      }
      j["OFFSET"] = std::move(offsets);
      j["DATA"] = std::move(data);
      return Status::OK();
    }
    case TypeId::kBinaryView:
    case TypeId::kStringView: {
      const bool utf8 = id == TypeId::kStringView;
      ALKAID_RETURN_NOT_OK(need(1));
      ojson views = ojson::array();
      for (int64_t i = 0; i < len; ++i) {
        const auto h = Load<BinaryViewHeader>(values(1) + 16 * (off + i));
        ojson v;
        v["SIZE"] = h.size();
        if (h.is_inline()) {
          std::string_view bytes(reinterpret_cast<const char*>(h.inlined.data),
                                 static_cast<size_t>(h.size()));
          if (utf8) {
            ojson s;
            Status st = Utf8Json(bytes, where, i, &s);
            if (!st.ok()) {
              if (is_valid(i)) return st;
              v["SIZE"] = 0;
              s = "";
            }
            v["INLINED"] = std::move(s);
          } else {
            v["INLINED"] = internal::HexEncode(bytes);
          }
        } else {
          v["PREFIX_HEX"] =
              internal::HexEncode(std::string_view(reinterpret_cast<const char*>(h.ref.prefix), 4));
          v["BUFFER_INDEX"] = h.ref.buffer_index;
          v["OFFSET"] = h.ref.offset;
        }
        views.push_back(std::move(v));
      }
      j["VIEWS"] = std::move(views);
      ojson buffers = ojson::array();
      for (size_t b = 2; b < a.buffers.size(); ++b) {
        buffers.push_back(a.buffers[b] == nullptr ? std::string()
                                                  : internal::HexEncode(a.buffers[b]->view()));
      }
      j["VARIADIC_DATA_BUFFERS"] = std::move(buffers);
      return Status::OK();
    }
    case TypeId::kList:
    case TypeId::kMap:
    case TypeId::kLargeList: {
      const bool large = id == TypeId::kLargeList;
      ALKAID_RETURN_NOT_OK(need(1));
      if (a.child_data.size() != 1) return Status::Invalid(where, ": list needs one child");
      auto offset_at = [&](int64_t i) -> int64_t {
        return large ? Load<int64_t>(values(1) + 8 * (off + i))
                     : Load<int32_t>(values(1) + 4 * (off + i));
      };
      const int64_t base = offset_at(0);
      ojson offsets = ojson::array();
      for (int64_t i = 0; i <= len; ++i) {
        const int64_t v = offset_at(i) - base;
        if (large) {
          offsets.push_back(std::to_string(v));
        } else {
          offsets.push_back(v);
        }
      }
      j["OFFSET"] = std::move(offsets);
      return WriteChildren({a.child_data[0]->Slice(base, offset_at(len) - base)}, t, path, where,
                           out);
    }
    case TypeId::kListView:
    case TypeId::kLargeListView: {
      const bool large = id == TypeId::kLargeListView;
      ALKAID_RETURN_NOT_OK(need(1));
      ALKAID_RETURN_NOT_OK(need(2));
      ojson offsets = ojson::array();
      ojson sizes = ojson::array();
      for (int64_t i = 0; i < len; ++i) {
        if (large) {
          offsets.push_back(std::to_string(Load<int64_t>(values(1) + 8 * (off + i))));
          sizes.push_back(std::to_string(Load<int64_t>(values(2) + 8 * (off + i))));
        } else {
          offsets.push_back(Load<int32_t>(values(1) + 4 * (off + i)));
          sizes.push_back(Load<int32_t>(values(2) + 4 * (off + i)));
        }
      }
      j["OFFSET"] = std::move(offsets);
      j["SIZE"] = std::move(sizes);
      return WriteChildren(a.child_data, t, path, where, out);
    }
    case TypeId::kFixedSizeList: {
      const int64_t size = static_cast<const FixedSizeListType&>(t).list_size();
      if (a.child_data.size() != 1) return Status::Invalid(where, ": list needs one child");
      return WriteChildren({a.child_data[0]->Slice(off * size, len * size)}, t, path, where, out);
    }
    case TypeId::kStruct: {
      std::vector<ArrayDataPtr> sliced;
      for (const auto& c : a.child_data) sliced.push_back(c->Slice(off, len));
      return WriteChildren(sliced, t, path, where, out);
    }
    default:
      return Status::NotImplemented(where, ": writing type ", t.ToString(),
                                    " as JSON is not supported");
  }
}

// ---------------------------------------------------------------------------

Result<std::string> Writer::Write(const JsonWriteOptions& options) {
  if (data_.schema == nullptr) return Status::Invalid("no schema to write");
  const Schema& schema = *data_.schema;

  // Dictionary ids: the caller's, or pre-order.
  if (data_.dictionary_ids.empty()) {
    int64_t next = 0;
    for (int i = 0; i < schema.num_fields(); ++i) {
      FieldPath path{i};
      ALKAID_RETURN_NOT_OK(AssignIds(*schema.field(i), &path, &next));
    }
  } else {
    ids_ = data_.dictionary_ids;
    for (int i = 0; i < schema.num_fields(); ++i) {
      FieldPath path{i};
      ALKAID_RETURN_NOT_OK(CheckIds(*schema.field(i), &path));
    }
  }

  // The batches must be valid before their buffers are read.
  for (size_t b = 0; b < data_.batches.size(); ++b) {
    const RecordBatch& batch = *data_.batches[b];
    if (!batch.schema()->Equals(schema)) {
      return Status::Invalid("batch ", b, ": schema ", batch.schema()->ToString(false),
                             " differs from ", schema.ToString(false));
    }
    ALKAID_RETURN_NOT_OK_CTX(ValidateFull(batch), "batch " << b);
  }

  // Dictionaries: the caller's first, then those the batches carry.
  for (const auto& [path, id] : ids_) {
    auto it = data_.dictionaries.find(id);
    if (it == data_.dictionaries.end() || dictionaries_.count(id) != 0) continue;
    // The value type of the field at `path`.
    const DataType* t = nullptr;
    const Field* f = nullptr;
    for (size_t k = 0; k < path.size(); ++k) {
      const int idx = path[k];
      if (k == 0) {
        if (idx < 0 || idx >= schema.num_fields()) break;
        f = schema.field(idx).get();
      } else {
        if (idx < 0 || t == nullptr || idx >= t->num_fields()) {
          f = nullptr;
          break;
        }
        f = t->field(idx).get();
      }
      t = &Unwrapped(*f->type());
      if (t->id() == TypeId::kDictionary) {
        t = &Unwrapped(*static_cast<const DictionaryType&>(*t).value_type());
      }
    }
    if (f == nullptr || t == nullptr) {
      return Status::Invalid("dictionary id ", id, ": path ", PathString(path),
                             " names no field of the schema");
    }
    ALKAID_RETURN_NOT_OK_CTX(ValidateFull(*it->second, "dictionary " + std::to_string(id)),
                             "dictionary " << id);
    FieldPath p = path;
    ALKAID_RETURN_NOT_OK(AddDictionary(id, it->second, *t, &p, "dictionary " + std::to_string(id)));
  }
  for (size_t b = 0; b < data_.batches.size(); ++b) {
    const RecordBatch& batch = *data_.batches[b];
    for (int i = 0; i < batch.num_columns(); ++i) {
      FieldPath path{i};
      ALKAID_RETURN_NOT_OK(CollectDictionaries(
          *batch.column_data(i), *schema.field(i)->type(), &path,
          "batch " + std::to_string(b) + ", column '" + schema.field(i)->name() + "'"));
    }
  }

  ojson doc;
  ojson fields = ojson::array();
  for (int i = 0; i < schema.num_fields(); ++i) {
    FieldPath path{i};
    ALKAID_ASSIGN_OR_RAISE(ojson f, WriteField(*schema.field(i), &path));
    fields.push_back(std::move(f));
  }
  doc["schema"]["fields"] = std::move(fields);
  if (schema.metadata() != nullptr && !schema.metadata()->empty()) {
    ojson md = ojson::array();
    for (const auto& [k, v] : schema.metadata()->pairs()) md.push_back({{"key", k}, {"value", v}});
    doc["schema"]["metadata"] = std::move(md);
  }

  if (!dictionaries_.empty()) {
    ojson dicts = ojson::array();
    for (const auto& [id, values] : dictionaries_) {
      FieldPath path = dictionary_paths_.at(id);
      const std::string name = "DICT" + std::to_string(id);
      ALKAID_ASSIGN_OR_RAISE(ojson col, WriteColumn(*values, *values->type, name, &path,
                                                    "dictionary " + std::to_string(id)));
      ojson d;
      d["id"] = id;
      d["data"]["count"] = values->length;
      d["data"]["columns"] = ojson::array({std::move(col)});
      dicts.push_back(std::move(d));
    }
    doc["dictionaries"] = std::move(dicts);
  }

  ojson batches = ojson::array();
  for (size_t b = 0; b < data_.batches.size(); ++b) {
    const RecordBatch& batch = *data_.batches[b];
    ojson columns = ojson::array();
    for (int i = 0; i < batch.num_columns(); ++i) {
      const Field& f = *schema.field(i);
      FieldPath path{i};
      ALKAID_ASSIGN_OR_RAISE(
          ojson col, WriteColumn(*batch.column_data(i), *f.type(), f.name(), &path,
                                 "batch " + std::to_string(b) + ", column '" + f.name() + "'"));
      columns.push_back(std::move(col));
    }
    ojson bj;
    bj["count"] = batch.num_rows();
    bj["columns"] = std::move(columns);
    batches.push_back(std::move(bj));
  }
  doc["batches"] = std::move(batches);
  return doc.dump(options.indent);
}

}  // namespace

Result<std::string> WriteJsonIntegration(const JsonIntegrationData& data,
                                         const JsonWriteOptions& options) {
  try {
    Writer writer(data);
    return writer.Write(options);
  } catch (const nlohmann::json::type_error& e) {
    // dump() refuses strings that are not UTF-8 (names, metadata).
    return Status::Invalid("cannot write JSON integration data: ", e.what());
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of memory while writing JSON integration data");
  } catch (const std::exception& e) {
    return Status::Invalid("cannot write JSON integration data: ", e.what());
  }
}

Result<std::string> WriteJsonIntegration(const Schema& schema,
                                         const std::vector<RecordBatchPtr>& batches,
                                         const JsonWriteOptions& options) {
  JsonIntegrationData data;
  data.schema = std::make_shared<Schema>(schema);
  data.batches = batches;
  return WriteJsonIntegration(data, options);
}

Status WriteJsonIntegrationFile(const std::string& path, const JsonIntegrationData& data, bool gzip,
                                const JsonWriteOptions& options) {
  ALKAID_ASSIGN_OR_RAISE(std::string text, WriteJsonIntegration(data, options));
  if (gzip) {
    ALKAID_ASSIGN_OR_RAISE(text, internal::GzipCompress(text));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::IOError("cannot open '", path, "' for writing");
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return Status::IOError("error writing '", path, "'");
  return Status::OK();
}

}  // namespace alkaid::format
