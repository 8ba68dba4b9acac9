// JSON integration format -> Alkaid arrays.
//
// The document is parsed with nlohmann-json into a DOM, then walked: first
// the schema (fields, types, dictionary ids), then the dictionaries (parsed
// on first use, so that a dictionary whose values contain dictionary-encoded
// children finds them ready), then the batches. Every JSON access goes
// through a helper that checks the kind of value, so that nothing nlohmann
// throws for a wrong type can escape, and every error names where it is.
//
// Allocation is bounded by the input: before a buffer is allocated, the
// JSON array that fills it is checked to have exactly the number of entries
// the column's "count" requires, so a huge "count" with no data behind it is
// an error, not a huge allocation.

#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "alkaid/format/array.h"
#include "alkaid/format/bit_util.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/extension.h"
#include "alkaid/format/json_integration.h"
#include "alkaid/format/validate.h"
#include "json_integration_internal.h"

namespace alkaid::format {

namespace {

using json = nlohmann::json;
using BufferPtr = std::shared_ptr<Buffer>;

/// Deepest nesting of types (and columns) accepted.
constexpr int kMaxDepth = 64;

// ---------------------------------------------------------------------------
// Typed access to JSON values

const json* Member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::string Kind(const json& v) { return v.type_name(); }

/// `v` as an integer of type T: a JSON integer, an integral float, or a
/// decimal string (64-bit values are written as strings).
template <typename T>
Result<T> ToInteger(const json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (!std::in_range<T>(u)) return Status::Invalid(u, " is out of range");
    return static_cast<T>(u);
  }
  if (v.is_number_integer()) {
    const auto s = v.get<int64_t>();
    if (!std::in_range<T>(s)) return Status::Invalid(s, " is out of range");
    return static_cast<T>(s);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::trunc(d) != d || std::fabs(d) > 9007199254740992.0) {
      return Status::Invalid(v.dump(), " is not an integer");
    }
    const auto s = static_cast<int64_t>(d);
    if (!std::in_range<T>(s)) return Status::Invalid(v.dump(), " is out of range");
    return static_cast<T>(s);
  }
  if (v.is_string()) {
    const auto& str = v.get_ref<const std::string&>();
    const char* begin = str.data();
    const char* end = begin + str.size();
    if (begin != end && *begin == '+') ++begin;
    if constexpr (std::is_signed_v<T>) {
      int64_t s = 0;
      auto [p, ec] = std::from_chars(begin, end, s);
      if (ec != std::errc() || p != end || begin == end) {
        return Status::Invalid("'", str, "' is not a 64-bit integer");
      }
      if (!std::in_range<T>(s)) return Status::Invalid(str, " is out of range");
      return static_cast<T>(s);
    } else {
      uint64_t u = 0;
      auto [p, ec] = std::from_chars(begin, end, u);
      if (ec != std::errc() || p != end || begin == end) {
        return Status::Invalid("'", str, "' is not an unsigned 64-bit integer");
      }
      if (!std::in_range<T>(u)) return Status::Invalid(str, " is out of range");
      return static_cast<T>(u);
    }
  }
  return Status::Invalid("expected an integer, got ", Kind(v));
}

Result<double> ToDouble(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_null()) return 0.0;  // only meaningful in null slots
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity" || s == "Inf" || s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity" || s == "-Inf" || s == "-inf") {
      return -std::numeric_limits<double>::infinity();
    }
    return Status::Invalid("'", s, "' is not a number");
  }
  return Status::Invalid("expected a number, got ", Kind(v));
}

Result<const std::string*> ToString(const json& v) {
  if (!v.is_string()) return Status::Invalid("expected a string, got ", Kind(v));
  return &v.get_ref<const std::string&>();
}

Result<bool> ToBool(const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer() || v.is_number_unsigned()) {
    const auto i = v.get<int64_t>();
    if (i == 0 || i == 1) return i == 1;
  }
  return Status::Invalid("expected true/false or 0/1, got ", v.dump());
}

/// Names where an error happened: "batch 2, column 'a.item'".
struct Loc {
  std::string scope;   // "batch 2", "dictionary 0", "schema"
  std::string column;  // dotted column path, may be empty

  std::string str() const { return column.empty() ? scope : scope + ", column '" + column + "'"; }
  Loc Child(const std::string& name) const {
    return {scope, column.empty() ? name : column + "." + name};
  }
};

std::ostream& operator<<(std::ostream& os, const Loc& loc) { return os << loc.str(); }

Result<const json*> RequireMember(const json& obj, const char* key, const Loc& loc) {
  if (!obj.is_object()) return Status::Invalid(loc, ": expected an object, got ", Kind(obj));
  const json* m = Member(obj, key);
  if (m == nullptr) return Status::Invalid(loc, ": missing \"", key, "\"");
  return m;
}

Result<const std::string*> RequireString(const json& obj, const char* key, const Loc& loc) {
  ALKAID_ASSIGN_OR_RAISE(const json* m, RequireMember(obj, key, loc));
  auto r = ToString(*m);
  if (!r.ok()) return r.status().WithContext(loc.str() + ": \"" + key + "\"");
  return r;
}

template <typename T>
Result<T> RequireInteger(const json& obj, const char* key, const Loc& loc) {
  ALKAID_ASSIGN_OR_RAISE(const json* m, RequireMember(obj, key, loc));
  auto r = ToInteger<T>(*m);
  if (!r.ok()) return r.status().WithContext(loc.str() + ": \"" + key + "\"");
  return r;
}

Result<bool> OptionalBool(const json& obj, const char* key, bool default_value, const Loc& loc) {
  const json* m = Member(obj, key);
  if (m == nullptr) return default_value;
  auto r = ToBool(*m);
  if (!r.ok()) return r.status().WithContext(loc.str() + ": \"" + key + "\"");
  return r;
}

/// The array under `key`, which must have exactly `expected` entries.
Result<const json*> RequireArray(const json& col, const char* key, int64_t expected,
                                 const Loc& loc) {
  ALKAID_ASSIGN_OR_RAISE(const json* m, RequireMember(col, key, loc));
  if (!m->is_array()) {
    return Status::Invalid(loc, ": ", key, " must be an array, got ", Kind(*m));
  }
  if (static_cast<int64_t>(m->size()) != expected) {
    return Status::Invalid(loc, ": ", key, " has ", m->size(), " values, count is ", expected);
  }
  return m;
}

/// Wraps a per-value error with its position: "<loc>: DATA[3]: <message>".
Status AtValue(const Status& st, const Loc& loc, const char* key, size_t i) {
  std::ostringstream ss;
  ss << loc << ": " << key << "[" << i << "]";
  return st.WithContext(ss.str());
}

Result<TimeUnit> ReadTimeUnit(const json& t, const Loc& loc) {
  ALKAID_ASSIGN_OR_RAISE(const std::string* unit, RequireString(t, "unit", loc));
  if (*unit == "SECOND") return TimeUnit::kSecond;
  if (*unit == "MILLISECOND") return TimeUnit::kMilli;
  if (*unit == "MICROSECOND") return TimeUnit::kMicro;
  if (*unit == "NANOSECOND") return TimeUnit::kNano;
  return Status::Invalid(loc, ": unknown time unit '", *unit, "'");
}

// ---------------------------------------------------------------------------
// The reader

class Reader {
 public:
  Reader(const JsonReadOptions& options, int64_t input_size)
      : pool_(options.pool != nullptr ? options.pool : default_memory_pool()),
        validate_(options.validate),
        decimal_precision_(options.validate_decimal_precision),
        input_size_(input_size) {}

  Result<JsonIntegrationData> Read(const json& doc);

 private:
  struct DictEntry {
    const json* data = nullptr;  // the "data" object, once seen
    FieldPtr field;              // "DICT<id>" field of the value type
    FieldPath path;              // path of the first field using the id
    ArrayDataPtr values;         // once parsed
    bool in_progress = false;
  };

  // Schema
  Result<FieldPtr> ReadField(const json& j, FieldPath* path, const Loc& loc, int depth);
  Result<TypePtr> ReadType(const json& t, FieldVector children, const Loc& loc);
  Result<TypePtr> ReadIntType(const json& t, const Loc& loc);
  Result<MetadataPtr> ReadMetadata(const json* j, const Loc& loc);

  // Arrays
  Result<ArrayDataPtr> ReadColumn(const json& col, const Field& field, FieldPath* path,
                                  const Loc& loc, int depth, bool check_name);
  Result<ArrayDataPtr> ReadArray(const json& col, const TypePtr& type, int64_t count,
                                 FieldPath* path, const Loc& loc, int depth);
  Result<std::vector<ArrayDataPtr>> ReadChildren(const json& col, const DataType& type,
                                                 FieldPath* path, const Loc& loc, int depth);
  Result<ArrayDataPtr> GetDictionary(int64_t id, const Loc& loc);

  // Buffers
  Result<BufferPtr> Allocate(int64_t bytes) {
    ALKAID_ASSIGN_OR_RAISE(auto buf, AllocateBuffer(bytes, pool_));
    return BufferPtr(std::move(buf));
  }
  /// Validity bitmap (null when absent or all valid) and the null count.
  Result<std::pair<BufferPtr, int64_t>> ReadValidity(const json& col, int64_t count,
                                                     const Loc& loc);
  template <typename T>
  Result<BufferPtr> ReadIntegers(const json& col, const char* key, int64_t n, const Loc& loc);
  template <typename T>
  Result<BufferPtr> ReadFloats(const json& col, int64_t n, const Loc& loc);
  Result<BufferPtr> ReadHalfFloats(const json& col, int64_t n, const Loc& loc);
  Result<BufferPtr> ReadBooleans(const json& col, int64_t n, const Loc& loc);
  Result<BufferPtr> ReadDecimals(const json& col, int64_t n, int bit_width, const Loc& loc);
  Result<BufferPtr> ReadDayTime(const json& col, int64_t n, const Loc& loc);
  Result<BufferPtr> ReadMonthDayNano(const json& col, int64_t n, const Loc& loc);
  Result<BufferPtr> ReadFixedSizeBinary(const json& col, int64_t n, int32_t width, const Loc& loc);
  template <typename OffsetT>
  Result<std::vector<BufferPtr>> ReadBinary(const json& col, int64_t n, bool utf8, const Loc& loc);
  Result<std::vector<BufferPtr>> ReadViews(const json& col, int64_t n, bool utf8, const Loc& loc);
  /// The bytes of one DATA/INLINED value: hex for binary, text for UTF-8.
  Status ValueBytes(const json& v, bool utf8, std::string* scratch, std::string_view* out);

  MemoryPool* pool_;
  bool validate_;
  bool decimal_precision_;
  int64_t input_size_;
  std::map<int64_t, DictEntry> dicts_;
  JsonIntegrationData out_;
};

// ---------------------------------------------------------------------------
// Schema

Result<MetadataPtr> Reader::ReadMetadata(const json* j, const Loc& loc) {
  if (j == nullptr || j->is_null()) return MetadataPtr();
  auto md = std::make_shared<KeyValueMetadata>();
  if (j->is_object()) {  // older writers: {"key": "value", ...}
    for (auto it = j->begin(); it != j->end(); ++it) {
      if (!it->is_string()) {
        return Status::Invalid(loc, ": metadata value of '", it.key(), "' must be a string");
      }
      md->Append(it.key(), it->get<std::string>());
    }
  } else if (j->is_array()) {
    for (size_t i = 0; i < j->size(); ++i) {
      const json& kv = (*j)[i];
      const Loc at{loc.str() + ": metadata[" + std::to_string(i) + "]", ""};
      ALKAID_ASSIGN_OR_RAISE(const std::string* key, RequireString(kv, "key", at));
      ALKAID_ASSIGN_OR_RAISE(const std::string* value, RequireString(kv, "value", at));
      md->Append(*key, *value);
    }
  } else {
    return Status::Invalid(loc, ": metadata must be an array of {key, value}, got ", Kind(*j));
  }
  if (md->empty()) return MetadataPtr();
  return MetadataPtr(std::move(md));
}

Result<TypePtr> Reader::ReadIntType(const json& t, const Loc& loc) {
  ALKAID_ASSIGN_OR_RAISE(const std::string* name, RequireString(t, "name", loc));
  if (*name != "int") return Status::Invalid(loc, ": expected an int type, got '", *name, "'");
  ALKAID_ASSIGN_OR_RAISE(int bits, RequireInteger<int>(t, "bitWidth", loc));
  ALKAID_ASSIGN_OR_RAISE(bool is_signed, OptionalBool(t, "isSigned", true, loc));
  switch (bits) {
    case 8:
      return is_signed ? int8() : uint8();
    case 16:
      return is_signed ? int16() : uint16();
    case 32:
      return is_signed ? int32() : uint32();
    case 64:
      return is_signed ? int64() : uint64();
    default:
      return Status::Invalid(loc, ": int bitWidth must be 8, 16, 32 or 64, got ", bits);
  }
}

Result<TypePtr> Reader::ReadType(const json& t, FieldVector children, const Loc& loc) {
  if (!t.is_object()) return Status::Invalid(loc, ": \"type\" must be an object, got ", Kind(t));
  ALKAID_ASSIGN_OR_RAISE(const std::string* name_ptr, RequireString(t, "name", loc));
  const std::string& name = *name_ptr;

  auto want_children = [&](size_t n) -> Status {
    if (children.size() != n) {
      return Status::Invalid(loc, ": type '", name, "' takes ", n, " children, got ",
                             children.size());
    }
    return Status::OK();
  };
  auto wrap = [&](Result<TypePtr> r) -> Result<TypePtr> {
    if (!r.ok()) return Status::Invalid(loc, ": ", r.status().message());
    return r;
  };

  if (name == "struct") return std::make_shared<StructType>(std::move(children));
  if (name == "list" || name == "largelist" || name == "listview" || name == "largelistview") {
    ALKAID_RETURN_NOT_OK(want_children(1));
    const TypeId id = name == "list"        ? TypeId::kList
                      : name == "largelist" ? TypeId::kLargeList
                      : name == "listview"  ? TypeId::kListView
                                            : TypeId::kLargeListView;
    return std::make_shared<ListType>(id, children[0]);
  }
  if (name == "fixedsizelist") {
    ALKAID_RETURN_NOT_OK(want_children(1));
    ALKAID_ASSIGN_OR_RAISE(int32_t size, RequireInteger<int32_t>(t, "listSize", loc));
    if (size < 0) return Status::Invalid(loc, ": negative listSize ", size);
    return std::make_shared<FixedSizeListType>(children[0], size);
  }
  if (name == "map") {
    ALKAID_RETURN_NOT_OK(want_children(1));
    ALKAID_ASSIGN_OR_RAISE(bool sorted, OptionalBool(t, "keysSorted", false, loc));
    return wrap(MapType::Make(children[0], sorted));
  }
  if (name == "union") {
    ALKAID_ASSIGN_OR_RAISE(const std::string* mode, RequireString(t, "mode", loc));
    UnionMode m;
    if (*mode == "SPARSE") {
      m = UnionMode::kSparse;
    } else if (*mode == "DENSE") {
      m = UnionMode::kDense;
    } else {
      return Status::Invalid(loc, ": unknown union mode '", *mode, "'");
    }
    std::vector<int8_t> codes;
    if (const json* ids = Member(t, "typeIds"); ids != nullptr && !ids->is_null()) {
      if (!ids->is_array()) return Status::Invalid(loc, ": typeIds must be an array");
      for (size_t i = 0; i < ids->size(); ++i) {
        auto code = ToInteger<int8_t>((*ids)[i]);
        if (!code.ok() || *code < 0) {
          return Status::Invalid(loc, ": typeIds[", i, "] must be in [0, 127], got ",
                                 (*ids)[i].dump());
        }
        codes.push_back(*code);
      }
    }
    return wrap(UnionType::Make(std::move(children), std::move(codes), m));
  }
  if (name == "runendencoded") {
    ALKAID_RETURN_NOT_OK(want_children(2));
    return wrap(RunEndEncodedType::Make(children[0]->type(), children[1]->type()));
  }

  // Leaf types.
  ALKAID_RETURN_NOT_OK(want_children(0));
  if (name == "null") return null();
  if (name == "bool") return boolean();
  if (name == "int") return ReadIntType(t, loc);
  if (name == "floatingpoint") {
    ALKAID_ASSIGN_OR_RAISE(const std::string* p, RequireString(t, "precision", loc));
    if (*p == "HALF") return float16();
    if (*p == "SINGLE") return float32();
    if (*p == "DOUBLE") return float64();
    return Status::Invalid(loc, ": unknown floating point precision '", *p, "'");
  }
  if (name == "decimal") {
    ALKAID_ASSIGN_OR_RAISE(int32_t precision, RequireInteger<int32_t>(t, "precision", loc));
    ALKAID_ASSIGN_OR_RAISE(int32_t scale, RequireInteger<int32_t>(t, "scale", loc));
    int bits = 128;
    if (Member(t, "bitWidth") != nullptr) {
      ALKAID_ASSIGN_OR_RAISE(bits, RequireInteger<int>(t, "bitWidth", loc));
    }
    return wrap(DecimalType::Make(bits, precision, scale));
  }
  if (name == "date") {
    ALKAID_ASSIGN_OR_RAISE(const std::string* unit, RequireString(t, "unit", loc));
    if (*unit == "DAY") return date32();
    if (*unit == "MILLISECOND") return date64();
    return Status::Invalid(loc, ": unknown date unit '", *unit, "'");
  }
  if (name == "time") {
    ALKAID_ASSIGN_OR_RAISE(TimeUnit unit, ReadTimeUnit(t, loc));
    const int expected = unit == TimeUnit::kSecond || unit == TimeUnit::kMilli ? 32 : 64;
    if (Member(t, "bitWidth") != nullptr) {
      ALKAID_ASSIGN_OR_RAISE(int bits, RequireInteger<int>(t, "bitWidth", loc));
      if (bits != expected) {
        return Status::Invalid(loc, ": time unit ", TimeUnitName(unit), " needs bitWidth ",
                               expected, ", got ", bits);
      }
    }
    return wrap(TimeType::Make(unit));
  }
  if (name == "timestamp") {
    ALKAID_ASSIGN_OR_RAISE(TimeUnit unit, ReadTimeUnit(t, loc));
    std::string tz;
    if (const json* z = Member(t, "timezone"); z != nullptr && !z->is_null()) {
      if (!z->is_string()) return Status::Invalid(loc, ": timezone must be a string");
      tz = z->get<std::string>();
    }
    return timestamp(unit, std::move(tz));
  }
  if (name == "duration") {
    ALKAID_ASSIGN_OR_RAISE(TimeUnit unit, ReadTimeUnit(t, loc));
    return duration(unit);
  }
  if (name == "interval") {
    ALKAID_ASSIGN_OR_RAISE(const std::string* unit, RequireString(t, "unit", loc));
    if (*unit == "YEAR_MONTH") return month_interval();
    if (*unit == "DAY_TIME") return day_time_interval();
    if (*unit == "MONTH_DAY_NANO") return month_day_nano_interval();
    return Status::Invalid(loc, ": unknown interval unit '", *unit, "'");
  }
  if (name == "binary") return binary();
  if (name == "utf8") return utf8();
  if (name == "largebinary") return large_binary();
  if (name == "largeutf8") return large_utf8();
  if (name == "binaryview") return binary_view();
  if (name == "utf8view") return utf8_view();
  if (name == "fixedsizebinary") {
    ALKAID_ASSIGN_OR_RAISE(int32_t width, RequireInteger<int32_t>(t, "byteWidth", loc));
    if (width < 0) return Status::Invalid(loc, ": negative byteWidth ", width);
    return fixed_size_binary(width);
  }
  return Status::Invalid(loc, ": unknown type name '", name, "'");
}

Result<FieldPtr> Reader::ReadField(const json& j, FieldPath* path, const Loc& parent, int depth) {
  if (!j.is_object()) {
    return Status::Invalid(parent, ": field must be an object, got ", Kind(j));
  }
  if (depth > kMaxDepth) {
    return Status::Invalid(parent, ": fields nested deeper than ", kMaxDepth, " levels");
  }
  ALKAID_ASSIGN_OR_RAISE(const std::string* name, RequireString(j, "name", parent));
  const Loc loc = parent.Child(*name);
  ALKAID_ASSIGN_OR_RAISE(bool nullable, OptionalBool(j, "nullable", true, loc));
  ALKAID_ASSIGN_OR_RAISE(const json* type_json, RequireMember(j, "type", loc));

  FieldVector children;
  if (const json* cj = Member(j, "children"); cj != nullptr && !cj->is_null()) {
    if (!cj->is_array()) return Status::Invalid(loc, ": \"children\" must be an array");
    for (size_t i = 0; i < cj->size(); ++i) {
      path->push_back(static_cast<int>(i));
      auto child = ReadField((*cj)[i], path, loc, depth + 1);
      path->pop_back();
      ALKAID_RETURN_NOT_OK(child);
      children.push_back(*std::move(child));
    }
  }
  ALKAID_ASSIGN_OR_RAISE(TypePtr type, ReadType(*type_json, std::move(children), loc));
  ALKAID_ASSIGN_OR_RAISE(MetadataPtr metadata, ReadMetadata(Member(j, "metadata"), loc));

  if (const json* dj = Member(j, "dictionary"); dj != nullptr && !dj->is_null()) {
    ALKAID_ASSIGN_OR_RAISE(int64_t id, RequireInteger<int64_t>(*dj, "id", loc));
    ALKAID_ASSIGN_OR_RAISE(const json* index_json, RequireMember(*dj, "indexType", loc));
    ALKAID_ASSIGN_OR_RAISE(TypePtr index_type, ReadIntType(*index_json, loc));
    ALKAID_ASSIGN_OR_RAISE(bool ordered, OptionalBool(*dj, "isOrdered", false, loc));
    TypePtr value_type = type;
    ALKAID_ASSIGN_OR_RAISE(type, DictionaryType::Make(index_type, value_type, ordered));

    DictEntry& entry = dicts_[id];
    if (entry.field == nullptr) {
      entry.field = field("DICT" + std::to_string(id), value_type, true);
      entry.path = *path;
    } else if (!entry.field->type()->Equals(*value_type)) {
      return Status::Invalid(loc, ": dictionary id ", id, " is already used with value type ",
                             entry.field->type()->ToString(), ", here with ",
                             value_type->ToString());
    }
    out_.dictionary_ids[*path] = id;
  }

  // Extension types: a registered name becomes an ExtensionType (and its
  // metadata keys are dropped); an unregistered one stays storage + metadata.
  if (metadata != nullptr) {
    for (const char* ns : {"ARROW", "ALKAID"}) {
      const std::string name_key = std::string(ns) + ":extension:name";
      const std::string meta_key = std::string(ns) + ":extension:metadata";
      auto ext_name = metadata->Get(name_key);
      if (!ext_name) continue;
      ExtensionTypeFactory factory = GetExtensionType(*ext_name);
      if (!factory) break;
      const std::string serialized = metadata->Get(meta_key).value_or("");
      auto ext = factory(type, serialized);
      if (!ext.ok()) {
        return Status::Invalid(loc, ": extension type '", *ext_name,
                               "' rejected its storage: ", ext.status().message());
      }
      type = *std::move(ext);
      MetadataPtr rest = metadata->Without({name_key, meta_key});
      metadata = rest->empty() ? nullptr : rest;
      break;
    }
  }
  return field(*name, std::move(type), nullable, std::move(metadata));
}

// ---------------------------------------------------------------------------
// Buffers

Result<std::pair<BufferPtr, int64_t>> Reader::ReadValidity(const json& col, int64_t count,
                                                           const Loc& loc) {
  const json* v = Member(col, "VALIDITY");
  if (v == nullptr) return std::pair<BufferPtr, int64_t>{nullptr, 0};
  ALKAID_ASSIGN_OR_RAISE(const json* arr, RequireArray(col, "VALIDITY", count, loc));
  ALKAID_ASSIGN_OR_RAISE(BufferPtr bitmap, Allocate(bit_util::BytesForBits(count)));
  uint8_t* bits = bitmap->mutable_data();
  int64_t nulls = 0;
  for (size_t i = 0; i < arr->size(); ++i) {
    auto valid = ToBool((*arr)[i]);
    if (!valid.ok()) return AtValue(valid.status(), loc, "VALIDITY", i);
    if (*valid) {
      bit_util::SetBit(bits, static_cast<int64_t>(i));
    } else {
      ++nulls;
    }
  }
  if (nulls == 0) return std::pair<BufferPtr, int64_t>{nullptr, 0};
  return std::pair<BufferPtr, int64_t>{std::move(bitmap), nulls};
}

template <typename T>
Result<BufferPtr> Reader::ReadIntegers(const json& col, const char* key, int64_t n,
                                       const Loc& loc) {
  ALKAID_ASSIGN_OR_RAISE(const json* arr, RequireArray(col, key, n, loc));
  ALKAID_ASSIGN_OR_RAISE(BufferPtr buf, Allocate(n * static_cast<int64_t>(sizeof(T))));
  T* out = buf->mutable_data_as<T>();
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& v = (*arr)[i];
    if (v.is_null()) {  // tolerated in null slots
      out[i] = 0;
      continue;
    }
    auto r = ToInteger<T>(v);
    if (!r.ok()) return AtValue(r.status(), loc, key, i);
    out[i] = *r;
  }
  return buf;
}

template <typename T>
Result<BufferPtr> Reader::ReadFloats(const json& col, int64_t n, const Loc& loc) {
  ALKAID_ASSIGN_OR_RAISE(const json* arr, RequireArray(col, "DATA", n, loc));
  ALKAID_ASSIGN_OR_RAISE(BufferPtr buf, Allocate(n * static_cast<int64_t>(sizeof(T))));
  T* out = buf->mutable_data_as<T>();
  for (size_t i = 0; i < arr->size(); ++i) {
    auto r = ToDouble((*arr)[i]);
    if (!r.ok()) return AtValue(r.status(), loc, "DATA", i);
    out[i] = static_cast<T>(*r);
  }
  return buf;
}

Result<BufferPtr> Reader::ReadHalfFloats(const json& col, int64_t n, const Loc& loc) {
  ALKAID_ASSIGN_OR_RAISE(const json* arr, RequireArray(col, "DATA", n, loc));
  ALKAID_ASSIGN_OR_RAISE(BufferPtr buf, Allocate(n * 2));
  auto* out = buf->mutable_data_as<uint16_t>();
  for (size_t i = 0; i < arr->size(); ++i) {
    auto r = ToDouble((*arr)[i]);
    if (!r.ok()) return AtValue(r.status(), loc, "DATA", i);
    out[i] = internal::HalfFromDouble(*r);
  }
  return buf;
}

Result<BufferPtr> Reader::ReadBooleans(const json& col, int64_t n, const Loc& loc) {
  ALKAID_ASSIGN_OR_RAISE(const json* arr, RequireArray(col, "DATA", n, loc));
  ALKAID_ASSIGN_OR_RAISE(BufferPtr buf, Allocate(bit_util::BytesForBits(n)));
  uint8_t* bits = buf->mutable_data();
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& v = (*arr)[i];
    if (v.is_null()) continue;
    auto r = ToBool(v);
    if (!r.ok()) return AtValue(r.status(), loc, "DATA", i);
    if (*r) bit_util::SetBit(bits, static_cast<int64_t>(i));
  }
  return buf;
}

Result<BufferPtr> Reader::ReadDecimals(const json& col, int64_t n, int bit_width, const Loc& loc) {
  ALKAID_ASSIGN_OR_RAISE(const json* arr, RequireArray(col, "DATA", n, loc));
  const int64_t width = bit_width / 8;
  ALKAID_ASSIGN_OR_RAISE(BufferPtr buf, Allocate(n * width));
  uint8_t* out = buf->mutable_data();
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& v = (*arr)[i];
    if (v.is_null()) continue;
    std::string text;
    if (v.is_string()) {
      text = v.get<std::string>();
    } else if (v.is_number_integer() || v.is_number_unsigned()) {
      text = v.dump();
    } else {
      return AtValue(Status::Invalid("expected a decimal string, got ", Kind(v)), loc, "DATA", i);
    }
    Status st =
        internal::ParseDecimalInteger(text, bit_width, out + static_cast<int64_t>(i) * width);
    if (!st.ok()) return AtValue(st, loc, "DATA", i);
  }
  return buf;
}

Result<BufferPtr> Reader::ReadDayTime(const json& col, int64_t n, const Loc& loc) {
  ALKAID_ASSIGN_OR_RAISE(const json* arr, RequireArray(col, "DATA", n, loc));
  ALKAID_ASSIGN_OR_RAISE(BufferPtr buf, Allocate(n * 8));
  auto* out = buf->mutable_data_as<DayTimeInterval>();
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& v = (*arr)[i];
    const Loc at{loc.str() + ": DATA[" + std::to_string(i) + "]", ""};
    ALKAID_ASSIGN_OR_RAISE(out[i].days, RequireInteger<int32_t>(v, "days", at));
    ALKAID_ASSIGN_OR_RAISE(out[i].milliseconds, RequireInteger<int32_t>(v, "milliseconds", at));
  }
  return buf;
}

Result<BufferPtr> Reader::ReadMonthDayNano(const json& col, int64_t n, const Loc& loc) {
  ALKAID_ASSIGN_OR_RAISE(const json* arr, RequireArray(col, "DATA", n, loc));
  ALKAID_ASSIGN_OR_RAISE(BufferPtr buf, Allocate(n * 16));
  auto* out = buf->mutable_data_as<MonthDayNanoInterval>();
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& v = (*arr)[i];
    const Loc at{loc.str() + ": DATA[" + std::to_string(i) + "]", ""};
    ALKAID_ASSIGN_OR_RAISE(out[i].months, RequireInteger<int32_t>(v, "months", at));
    ALKAID_ASSIGN_OR_RAISE(out[i].days, RequireInteger<int32_t>(v, "days", at));
    ALKAID_ASSIGN_OR_RAISE(out[i].nanoseconds, RequireInteger<int64_t>(v, "nanoseconds", at));
  }
  return buf;
}

Result<BufferPtr> Reader::ReadFixedSizeBinary(const json& col, int64_t n, int32_t width,
                                              const Loc& loc) {
  ALKAID_ASSIGN_OR_RAISE(const json* arr, RequireArray(col, "DATA", n, loc));
  // Check every value's length before allocating count * width bytes.
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& v = (*arr)[i];
    if (!v.is_string()) {
      return AtValue(Status::Invalid("expected a hex string, got ", Kind(v)), loc, "DATA", i);
    }
    if (static_cast<int64_t>(v.get_ref<const std::string&>().size()) != 2 * int64_t{width}) {
      return AtValue(Status::Invalid("value has ", v.get_ref<const std::string&>().size() / 2,
                                     " bytes, byteWidth is ", width),
                     loc, "DATA", i);
    }
  }
  ALKAID_ASSIGN_OR_RAISE(BufferPtr buf, Allocate(n * width));
  std::string bytes;
  for (size_t i = 0; i < arr->size(); ++i) {
    Status st = internal::HexDecode((*arr)[i].get_ref<const std::string&>(), &bytes);
    if (!st.ok()) return AtValue(st, loc, "DATA", i);
    if (!bytes.empty()) {
      std::memcpy(buf->mutable_data() + static_cast<int64_t>(i) * width, bytes.data(),
                  bytes.size());
    }
  }
  return buf;
}

Status Reader::ValueBytes(const json& v, bool utf8, std::string* scratch, std::string_view* out) {
  if (!v.is_string()) {
    return Status::Invalid("expected a ", utf8 ? "string" : "hex string", ", got ", Kind(v));
  }
  const auto& s = v.get_ref<const std::string&>();
  if (utf8) {
    *out = s;
    return Status::OK();
  }
  ALKAID_RETURN_NOT_OK(internal::HexDecode(s, scratch));
  *out = *scratch;
  return Status::OK();
}

template <typename OffsetT>
Result<std::vector<BufferPtr>> Reader::ReadBinary(const json& col, int64_t n, bool utf8,
                                                  const Loc& loc) {
  ALKAID_ASSIGN_OR_RAISE(BufferPtr offsets_buf, ReadIntegers<OffsetT>(col, "OFFSET", n + 1, loc));
  const OffsetT* offsets = offsets_buf->data_as<OffsetT>();
  ALKAID_ASSIGN_OR_RAISE(const json* arr, RequireArray(col, "DATA", n, loc));
  if (offsets[0] < 0) return Status::Invalid(loc, ": OFFSET[0] is negative (", offsets[0], ")");
  // Values are placed at their offsets, so the data buffer holds
  // [0, OFFSET[count]). The bytes before OFFSET[0] carry nothing; refuse a
  // leading gap larger than the whole input rather than allocate it.
  if (static_cast<int64_t>(offsets[0]) > input_size_) {
    return Status::Invalid(loc, ": OFFSET[0] is ", offsets[0],
                           ", more than the input's size; refusing to allocate the gap");
  }
  std::string scratch;
  std::string_view bytes;
  for (int64_t i = 0; i < n; ++i) {
    if (offsets[i + 1] < offsets[i]) {
      return Status::Invalid(loc, ": OFFSET[", i + 1, "] (", offsets[i + 1],
                             ") is less than OFFSET[", i, "] (", offsets[i], ")");
    }
    Status st = ValueBytes((*arr)[static_cast<size_t>(i)], utf8, &scratch, &bytes);
    if (!st.ok()) return AtValue(st, loc, "DATA", static_cast<size_t>(i));
    if (static_cast<int64_t>(bytes.size()) != static_cast<int64_t>(offsets[i + 1] - offsets[i])) {
      return Status::Invalid(loc, ": DATA[", i, "] has ", bytes.size(), " bytes but OFFSET says ",
                             offsets[i + 1] - offsets[i]);
    }
  }
  // Every value's length equals its offset span, so OFFSET[count] is bounded
  // by OFFSET[0] plus the bytes present in the input.
  ALKAID_ASSIGN_OR_RAISE(BufferPtr data, Allocate(static_cast<int64_t>(offsets[n])));
  for (int64_t i = 0; i < n; ++i) {
    ALKAID_RETURN_NOT_OK(ValueBytes((*arr)[static_cast<size_t>(i)], utf8, &scratch, &bytes));
    if (!bytes.empty()) {
      std::memcpy(data->mutable_data() + offsets[i], bytes.data(), bytes.size());
    }
  }
  return std::vector<BufferPtr>{std::move(offsets_buf), std::move(data)};
}

Result<std::vector<BufferPtr>> Reader::ReadViews(const json& col, int64_t n, bool utf8,
                                                 const Loc& loc) {
  ALKAID_ASSIGN_OR_RAISE(const json* arr, RequireArray(col, "VIEWS", n, loc));
  ALKAID_ASSIGN_OR_RAISE(BufferPtr views_buf, Allocate(n * 16));
  auto* views = views_buf->mutable_data_as<BinaryViewHeader>();
  std::string scratch;
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& v = (*arr)[i];
    const Loc at{loc.str() + ": VIEWS[" + std::to_string(i) + "]", ""};
    ALKAID_ASSIGN_OR_RAISE(int32_t size, RequireInteger<int32_t>(v, "SIZE", at));
    if (size < 0) return Status::Invalid(at, ": negative SIZE ", size);
    BinaryViewHeader& h = views[i];
    std::memset(&h, 0, sizeof(h));
    h.inlined.size = size;
    if (size <= BinaryViewHeader::kInlineSize) {
      ALKAID_ASSIGN_OR_RAISE(const json* inl, RequireMember(v, "INLINED", at));
      std::string_view bytes;
      Status st = ValueBytes(*inl, utf8, &scratch, &bytes);
      if (!st.ok()) return st.WithContext(at.str() + ": INLINED");
      if (static_cast<int64_t>(bytes.size()) != size) {
        return Status::Invalid(at, ": INLINED has ", bytes.size(), " bytes, SIZE is ", size);
      }
      if (!bytes.empty()) std::memcpy(h.inlined.data, bytes.data(), bytes.size());
    } else {
      ALKAID_ASSIGN_OR_RAISE(const std::string* prefix, RequireString(v, "PREFIX_HEX", at));
      Status st = internal::HexDecode(*prefix, &scratch);
      if (!st.ok()) return st.WithContext(at.str() + ": PREFIX_HEX");
      if (scratch.size() != 4) {
        return Status::Invalid(at, ": PREFIX_HEX has ", scratch.size(), " bytes, expected 4");
      }
      std::memcpy(h.ref.prefix, scratch.data(), 4);
      ALKAID_ASSIGN_OR_RAISE(h.ref.buffer_index, RequireInteger<int32_t>(v, "BUFFER_INDEX", at));
      ALKAID_ASSIGN_OR_RAISE(h.ref.offset, RequireInteger<int32_t>(v, "OFFSET", at));
    }
  }
  std::vector<BufferPtr> buffers{std::move(views_buf)};
  if (const json* vb = Member(col, "VARIADIC_DATA_BUFFERS"); vb != nullptr) {
    if (!vb->is_array()) {
      return Status::Invalid(loc, ": VARIADIC_DATA_BUFFERS must be an array, got ", Kind(*vb));
    }
    for (size_t i = 0; i < vb->size(); ++i) {
      const json& hex = (*vb)[i];
      if (!hex.is_string()) {
        return AtValue(Status::Invalid("expected a hex string, got ", Kind(hex)), loc,
                       "VARIADIC_DATA_BUFFERS", i);
      }
      Status st = internal::HexDecode(hex.get_ref<const std::string&>(), &scratch);
      if (!st.ok()) return AtValue(st, loc, "VARIADIC_DATA_BUFFERS", i);
      ALKAID_ASSIGN_OR_RAISE(BufferPtr data, Buffer::CopyOf(scratch, pool_));
      buffers.push_back(std::move(data));
    }
  }
  return buffers;
}

// ---------------------------------------------------------------------------
// Columns

Result<std::vector<ArrayDataPtr>> Reader::ReadChildren(const json& col, const DataType& type,
                                                       FieldPath* path, const Loc& loc, int depth) {
  const auto n = static_cast<size_t>(type.num_fields());
  ALKAID_ASSIGN_OR_RAISE(const json* arr, RequireMember(col, "children", loc));
  if (!arr->is_array()) return Status::Invalid(loc, ": \"children\" must be an array");
  if (arr->size() != n) {
    return Status::Invalid(loc, ": \"children\" has ", arr->size(), " columns, type ",
                           type.ToString(), " has ", n, " fields");
  }
  std::vector<ArrayDataPtr> out;
  for (size_t i = 0; i < n; ++i) {
    const Field& f = *type.field(static_cast<int>(i));
    path->push_back(static_cast<int>(i));
    auto child = ReadColumn((*arr)[i], f, path, loc.Child(f.name()), depth + 1, true);
    path->pop_back();
    ALKAID_RETURN_NOT_OK(child);
    out.push_back(*std::move(child));
  }
  return out;
}

Result<ArrayDataPtr> Reader::ReadColumn(const json& col, const Field& field, FieldPath* path,
                                        const Loc& loc, int depth, bool check_name) {
  if (!col.is_object()) return Status::Invalid(loc, ": column must be an object, got ", Kind(col));
  if (depth > kMaxDepth) {
    return Status::Invalid(loc, ": columns nested deeper than ", kMaxDepth, " levels");
  }
  ALKAID_ASSIGN_OR_RAISE(int64_t count, RequireInteger<int64_t>(col, "count", loc));
  if (count < 0) return Status::Invalid(loc, ": negative count ", count);
  if (check_name) {
    if (const json* name = Member(col, "name"); name != nullptr) {
      if (!name->is_string() || name->get_ref<const std::string&>() != field.name()) {
        return Status::Invalid(loc, ": column is named ", name->dump(), ", the field '",
                               field.name(), "'");
      }
    }
  }
  return ReadArray(col, field.type(), count, path, loc, depth);
}

Result<ArrayDataPtr> Reader::ReadArray(const json& col, const TypePtr& type, int64_t count,
                                       FieldPath* path, const Loc& loc, int depth) {
  const TypeId id = type->id();
  switch (id) {
    case TypeId::kExtension: {
      const auto& ext = static_cast<const ExtensionType&>(*type);
      ALKAID_ASSIGN_OR_RAISE(ArrayDataPtr storage,
                             ReadArray(col, ext.storage_type(), count, path, loc, depth));
      storage->type = type;
      return storage;
    }
    case TypeId::kDictionary: {
      const auto& dict = static_cast<const DictionaryType&>(*type);
      auto it = out_.dictionary_ids.find(*path);
      if (it == out_.dictionary_ids.end()) {
        return Status::Invalid(loc, ": dictionary-encoded column without a dictionary id");
      }
      ALKAID_ASSIGN_OR_RAISE(ArrayDataPtr indices,
                             ReadArray(col, dict.index_type(), count, path, loc, depth));
      indices->type = type;
      ALKAID_ASSIGN_OR_RAISE(indices->dictionary, GetDictionary(it->second, loc));
      return indices;
    }
    case TypeId::kNull:
      return ArrayData::Make(type, count, {nullptr}, count);
    case TypeId::kRunEndEncoded: {
      ALKAID_ASSIGN_OR_RAISE(auto children, ReadChildren(col, *type, path, loc, depth));
      return ArrayData::Make(type, count, {}, std::move(children), 0);
    }
    case TypeId::kSparseUnion:
    case TypeId::kDenseUnion: {
      std::vector<BufferPtr> buffers;
      ALKAID_ASSIGN_OR_RAISE(BufferPtr type_ids, ReadIntegers<int8_t>(col, "TYPE_ID", count, loc));
      buffers.push_back(std::move(type_ids));
      if (id == TypeId::kDenseUnion) {
        ALKAID_ASSIGN_OR_RAISE(BufferPtr offsets, ReadIntegers<int32_t>(col, "OFFSET", count, loc));
        buffers.push_back(std::move(offsets));
      }
      ALKAID_ASSIGN_OR_RAISE(auto children, ReadChildren(col, *type, path, loc, depth));
      return ArrayData::Make(type, count, std::move(buffers), std::move(children), 0);
    }
    default:
      break;
  }

  // Everything else starts with a validity bitmap.
  ALKAID_ASSIGN_OR_RAISE(auto validity, ReadValidity(col, count, loc));
  std::vector<BufferPtr> buffers{std::move(validity.first)};
  const int64_t nulls = validity.second;
  auto make = [&](std::vector<BufferPtr> rest) {
    for (auto& b : rest) buffers.push_back(std::move(b));
    return ArrayData::Make(type, count, std::move(buffers), nulls);
  };
  auto one = [&](Result<BufferPtr> r) -> Result<ArrayDataPtr> {
    ALKAID_RETURN_NOT_OK(r);
    return make({*std::move(r)});
  };

  switch (id) {
    case TypeId::kBool:
      return one(ReadBooleans(col, count, loc));
    case TypeId::kInt8:
      return one(ReadIntegers<int8_t>(col, "DATA", count, loc));
    case TypeId::kUInt8:
      return one(ReadIntegers<uint8_t>(col, "DATA", count, loc));
    case TypeId::kInt16:
      return one(ReadIntegers<int16_t>(col, "DATA", count, loc));
    case TypeId::kUInt16:
      return one(ReadIntegers<uint16_t>(col, "DATA", count, loc));
    case TypeId::kInt32:
    case TypeId::kDate32:
    case TypeId::kTime32:
    case TypeId::kIntervalMonths:
      return one(ReadIntegers<int32_t>(col, "DATA", count, loc));
    case TypeId::kUInt32:
      return one(ReadIntegers<uint32_t>(col, "DATA", count, loc));
    case TypeId::kInt64:
    case TypeId::kDate64:
    case TypeId::kTime64:
    case TypeId::kTimestamp:
    case TypeId::kDuration:
      return one(ReadIntegers<int64_t>(col, "DATA", count, loc));
    case TypeId::kUInt64:
      return one(ReadIntegers<uint64_t>(col, "DATA", count, loc));
    case TypeId::kHalfFloat:
      return one(ReadHalfFloats(col, count, loc));
    case TypeId::kFloat:
      return one(ReadFloats<float>(col, count, loc));
    case TypeId::kDouble:
      return one(ReadFloats<double>(col, count, loc));
    case TypeId::kDecimal32:
    case TypeId::kDecimal64:
    case TypeId::kDecimal128:
    case TypeId::kDecimal256:
      return one(ReadDecimals(col, count, static_cast<const DecimalType&>(*type).bit_width(), loc));
    case TypeId::kIntervalDayTime:
      return one(ReadDayTime(col, count, loc));
    case TypeId::kIntervalMonthDayNano:
      return one(ReadMonthDayNano(col, count, loc));
    case TypeId::kFixedSizeBinary:
      return one(ReadFixedSizeBinary(
          col, count, static_cast<const FixedSizeBinaryType&>(*type).byte_width(), loc));
    case TypeId::kBinary:
    case TypeId::kString: {
      ALKAID_ASSIGN_OR_RAISE(auto bufs,
                             ReadBinary<int32_t>(col, count, id == TypeId::kString, loc));
      return make(std::move(bufs));
    }
    case TypeId::kLargeBinary:
    case TypeId::kLargeString: {
      ALKAID_ASSIGN_OR_RAISE(auto bufs,
                             ReadBinary<int64_t>(col, count, id == TypeId::kLargeString, loc));
      return make(std::move(bufs));
    }
    case TypeId::kBinaryView:
    case TypeId::kStringView: {
      ALKAID_ASSIGN_OR_RAISE(auto bufs, ReadViews(col, count, id == TypeId::kStringView, loc));
      return make(std::move(bufs));
    }
    case TypeId::kList:
    case TypeId::kMap:
    case TypeId::kLargeList:
    case TypeId::kListView:
    case TypeId::kLargeListView: {
      const bool large = id == TypeId::kLargeList || id == TypeId::kLargeListView;
      const bool view = id == TypeId::kListView || id == TypeId::kLargeListView;
      const int64_t n_offsets = view ? count : count + 1;
      std::vector<BufferPtr> rest;
      ALKAID_ASSIGN_OR_RAISE(BufferPtr offsets,
                             large ? ReadIntegers<int64_t>(col, "OFFSET", n_offsets, loc)
                                   : ReadIntegers<int32_t>(col, "OFFSET", n_offsets, loc));
      rest.push_back(std::move(offsets));
      if (view) {
        ALKAID_ASSIGN_OR_RAISE(BufferPtr sizes,
                               large ? ReadIntegers<int64_t>(col, "SIZE", count, loc)
                                     : ReadIntegers<int32_t>(col, "SIZE", count, loc));
        rest.push_back(std::move(sizes));
      }
      ALKAID_ASSIGN_OR_RAISE(auto children, ReadChildren(col, *type, path, loc, depth));
      auto out = make(std::move(rest));
      out->child_data = std::move(children);
      return out;
    }
    case TypeId::kFixedSizeList:
    case TypeId::kStruct: {
      ALKAID_ASSIGN_OR_RAISE(auto children, ReadChildren(col, *type, path, loc, depth));
      auto out = make({});
      out->child_data = std::move(children);
      return out;
    }
    default:
      return Status::NotImplemented(loc, ": reading type ", type->ToString(),
                                    " from JSON is not supported");
  }
}

Result<ArrayDataPtr> Reader::GetDictionary(int64_t id, const Loc& loc) {
  auto it = dicts_.find(id);
  if (it == dicts_.end() || it->second.field == nullptr) {
    return Status::KeyError(loc, ": dictionary id ", id, " is not declared by any field");
  }
  DictEntry& entry = it->second;
  if (entry.values != nullptr) return entry.values;
  if (entry.data == nullptr) {
    return Status::KeyError(loc, ": dictionary id ", id, " has no entry in \"dictionaries\"");
  }
  if (entry.in_progress) {
    return Status::Invalid(loc, ": dictionary id ", id,
                           " contains itself through nested dictionaries");
  }
  entry.in_progress = true;
  const Loc dloc{"dictionary " + std::to_string(id), ""};
  const json& data = *entry.data;
  ALKAID_ASSIGN_OR_RAISE(int64_t count, RequireInteger<int64_t>(data, "count", dloc));
  ALKAID_ASSIGN_OR_RAISE(const json* columns, RequireArray(data, "columns", 1, dloc));
  FieldPath path = entry.path;
  auto values =
      ReadColumn((*columns)[0], *entry.field, &path, dloc.Child(entry.field->name()), 0, false);
  ALKAID_RETURN_NOT_OK(values);
  if ((*values)->length != count) {
    return Status::Invalid(dloc, ": data count is ", count, " but its column has count ",
                           (*values)->length);
  }
  entry.in_progress = false;
  entry.values = *values;
  out_.dictionaries[id] = entry.values;
  return entry.values;
}

Result<JsonIntegrationData> Reader::Read(const json& doc) {
  if (!doc.is_object()) {
    return Status::Invalid("JSON integration document must be an object, got ", Kind(doc));
  }
  const Loc sloc{"schema", ""};
  ALKAID_ASSIGN_OR_RAISE(const json* schema_json,
                         RequireMember(doc, "schema", Loc{"document", ""}));
  ALKAID_ASSIGN_OR_RAISE(const json* fields_json, RequireMember(*schema_json, "fields", sloc));
  if (!fields_json->is_array()) return Status::Invalid("schema: \"fields\" must be an array");
  FieldVector fields;
  for (size_t i = 0; i < fields_json->size(); ++i) {
    FieldPath path{static_cast<int>(i)};
    ALKAID_ASSIGN_OR_RAISE(FieldPtr f, ReadField((*fields_json)[i], &path, sloc, 0));
    fields.push_back(std::move(f));
  }
  ALKAID_ASSIGN_OR_RAISE(MetadataPtr metadata,
                         ReadMetadata(Member(*schema_json, "metadata"), sloc));
  out_.schema = schema(std::move(fields), std::move(metadata));

  if (const json* dicts = Member(doc, "dictionaries"); dicts != nullptr && !dicts->is_null()) {
    if (!dicts->is_array()) return Status::Invalid("\"dictionaries\" must be an array");
    for (size_t i = 0; i < dicts->size(); ++i) {
      const Loc dloc{"dictionaries[" + std::to_string(i) + "]", ""};
      const json& d = (*dicts)[i];
      ALKAID_ASSIGN_OR_RAISE(int64_t id, RequireInteger<int64_t>(d, "id", dloc));
      ALKAID_ASSIGN_OR_RAISE(const json* data, RequireMember(d, "data", dloc));
      auto it = dicts_.find(id);
      if (it == dicts_.end()) {
        return Status::KeyError(dloc, ": dictionary id ", id, " is not used by any field");
      }
      if (it->second.data != nullptr) {
        return Status::Invalid(dloc, ": dictionary id ", id, " appears more than once");
      }
      it->second.data = data;
    }
  }
  for (auto& [id, entry] : dicts_) {
    if (entry.data != nullptr) {
      ALKAID_RETURN_NOT_OK(GetDictionary(id, Loc{"dictionary " + std::to_string(id), ""}));
    }
  }

  ALKAID_ASSIGN_OR_RAISE(const json* batches, RequireMember(doc, "batches", Loc{"document", ""}));
  if (!batches->is_array()) return Status::Invalid("\"batches\" must be an array");
  for (size_t b = 0; b < batches->size(); ++b) {
    const json& batch = (*batches)[b];
    const Loc bloc{"batch " + std::to_string(b), ""};
    ALKAID_ASSIGN_OR_RAISE(int64_t count, RequireInteger<int64_t>(batch, "count", bloc));
    if (count < 0) return Status::Invalid(bloc, ": negative count ", count);
    ALKAID_ASSIGN_OR_RAISE(const json* columns,
                           RequireArray(batch, "columns", out_.schema->num_fields(), bloc));
    std::vector<ArrayDataPtr> arrays;
    for (int i = 0; i < out_.schema->num_fields(); ++i) {
      const Field& f = *out_.schema->field(i);
      const Loc cloc{bloc.scope, f.name()};
      FieldPath path{i};
      ALKAID_ASSIGN_OR_RAISE(ArrayDataPtr arr, ReadColumn((*columns)[static_cast<size_t>(i)], f,
                                                          &path, cloc, 0, true));
      if (arr->length != count) {
        return Status::Invalid(cloc, ": count is ", arr->length, ", the batch's count is ", count);
      }
      arrays.push_back(std::move(arr));
    }
    auto rb = RecordBatch::Make(out_.schema, count, std::move(arrays));
    if (!rb.ok()) return rb.status().WithContext(bloc.str());
    out_.batches.push_back(*std::move(rb));
  }

  if (validate_) {
    FullValidationOptions full;
    full.decimal_precision = decimal_precision_;
    for (const auto& [id, values] : out_.dictionaries) {
      ALKAID_RETURN_NOT_OK(ValidateFull(*values, "dictionary " + std::to_string(id), full));
    }
    for (size_t b = 0; b < out_.batches.size(); ++b) {
      ALKAID_RETURN_NOT_OK_CTX(ValidateFull(*out_.batches[b], full), "batch " << b);
    }
  }
  return std::move(out_);
}

}  // namespace

Result<JsonIntegrationData> ReadJsonIntegration(std::string_view json_text,
                                                const JsonReadOptions& options) {
  try {
    json doc = json::parse(json_text.begin(), json_text.end());
    Reader reader(options, static_cast<int64_t>(json_text.size()));
    return reader.Read(doc);
  } catch (const json::parse_error& e) {
    return Status::Invalid("malformed JSON at byte ", e.byte, ": ", e.what());
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of memory while reading JSON integration data");
  } catch (const std::exception& e) {
    return Status::Invalid("cannot read JSON integration data: ", e.what());
  }
}

Result<JsonIntegrationData> ReadJsonIntegrationFile(const std::string& path,
                                                    const JsonReadOptions& options) {
  std::string contents;
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status::IOError("cannot open '", path, "' for reading");
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return Status::IOError("error reading '", path, "'");
    contents = std::move(ss).str();
  } catch (const std::exception& e) {
    return Status::IOError("error reading '", path, "': ", e.what());
  }
  if (internal::IsGzip(contents)) {
    auto plain = internal::GzipDecompress(contents, options.max_decompressed_bytes);
    if (!plain.ok()) return plain.status().WithContext(path);
    contents = *std::move(plain);
  }
  auto result = ReadJsonIntegration(contents, options);
  if (!result.ok()) return result.status().WithContext(path);
  return result;
}

}  // namespace alkaid::format
