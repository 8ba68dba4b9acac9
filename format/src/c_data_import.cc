// Import from the Arrow C Data Interface (c_data.h): Alkaid is the consumer.
//
// An imported ArrowArray is moved into one ImportedArray guard; every Buffer
// made from its memory (the whole tree's, children and dictionaries
// included) holds a shared reference to that guard, whose destructor calls
// the producer's release exactly once. Nothing is copied.
//
// The interface does not carry buffer sizes: they follow from the type, the
// length and offset, and for variable-size data from the last offset (or, for
// binary views, from the extra buffer of variadic sizes). Everything else a
// producer could get wrong (null pointers, counts, negative numbers,
// overflowing sizes, released structs, format strings, metadata, cycles) is
// checked before a buffer is read; the arrays then go through Validate or
// ValidateFull before anyone sees them.

#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "alkaid/format/c_data.h"
#include "alkaid/format/extension.h"
#include "alkaid/format/validate.h"
#include "c_data_internal.h"

namespace alkaid::format {
namespace {

using internal::kCDataMaxDepth;
using internal::kExtensionMetadataKey;
using internal::kExtensionNameKey;
using internal::kZeroBytes;

// Longest format string accepted (the longest real ones, unions with 128
// type codes or long time zone names, are well below).
constexpr size_t kMaxFormatLength = 4096;
// Sanity caps on metadata read from foreign memory.
constexpr int32_t kMaxMetadataPairs = 1 << 20;

std::string Quoted(const std::string& path) { return "'" + path + "'"; }

/// Holds a foreign ArrowSchema for the length of an import and releases it.
class TakenSchema {
 public:
  TakenSchema() = default;
  ~TakenSchema() {
    if (schema_.release != nullptr) schema_.release(&schema_);
  }
  TakenSchema(const TakenSchema&) = delete;
  TakenSchema& operator=(const TakenSchema&) = delete;

  /// Moves `*in` here (marking it released). Fails without touching it if it
  /// is null or released already.
  Status Take(ArrowSchema* in) {
    if (in == nullptr) return Status::Invalid("ArrowSchema pointer is null");
    if (in->release == nullptr) return Status::Invalid("ArrowSchema is released already");
    schema_ = *in;
    in->release = nullptr;
    return Status::OK();
  }
  const ArrowSchema* get() const { return &schema_; }

 private:
  ArrowSchema schema_{};
};

/// Owns an imported ArrowArray; its destructor calls the producer's release.
struct ImportedArray {
  ArrowArray array{};
  ImportedArray() = default;
  ~ImportedArray() {
    if (array.release != nullptr) array.release(&array);
  }
  ImportedArray(const ImportedArray&) = delete;
  ImportedArray& operator=(const ImportedArray&) = delete;
};

Result<std::shared_ptr<ImportedArray>> TakeArray(ArrowArray* in) {
  if (in == nullptr) return Status::Invalid("ArrowArray pointer is null");
  if (in->release == nullptr) return Status::Invalid("ArrowArray is released already");
  auto guard = std::make_shared<ImportedArray>();
  guard->array = *in;
  in->release = nullptr;
  return guard;
}

// --- Schemas ---------------------------------------------------------------

Result<int64_t> ParseInt(std::string_view s, int64_t min, int64_t max, const std::string& what) {
  if (s.empty()) return Status::Invalid(what, ": expected a number, got nothing");
  bool negative = false;
  size_t i = 0;
  if (s[0] == '-') {
    negative = true;
    i = 1;
    if (s.size() == 1) return Status::Invalid(what, ": '-' is not a number");
  }
  int64_t v = 0;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c < '0' || c > '9') {
      return Status::Invalid(what, ": '", s, "' is not a number");
    }
    if (v > (std::numeric_limits<int64_t>::max() - (c - '0')) / 10) {
      return Status::Invalid(what, ": ", s, " is out of range");
    }
    v = v * 10 + (c - '0');
  }
  if (negative) v = -v;
  if (v < min || v > max) {
    return Status::Invalid(what, ": ", v, " is outside [", min, ", ", max, "]");
  }
  return v;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

Result<TimeUnit> ParseUnit(char c, const std::string& where) {
  switch (c) {
    case 's':
      return TimeUnit::kSecond;
    case 'm':
      return TimeUnit::kMilli;
    case 'u':
      return TimeUnit::kMicro;
    case 'n':
      return TimeUnit::kNano;
    default:
      return Status::Invalid(where, ": unknown time unit '", std::string(1, c), "'");
  }
}

Result<MetadataPtr> DecodeMetadata(const char* p, const std::string& where) {
  if (p == nullptr) return MetadataPtr();
  auto read_int = [&p]() {
    int32_t v;
    std::memcpy(&v, p, sizeof(v));
    p += sizeof(v);
    return v;
  };
  const int32_t n = read_int();
  if (n < 0 || n > kMaxMetadataPairs) {
    return Status::Invalid(where, ": metadata pair count ", n, " is outside [0, ",
                           kMaxMetadataPairs, "]");
  }
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const int32_t klen = read_int();
    if (klen < 0) return Status::Invalid(where, ": metadata key ", i, " has length ", klen);
    std::string key(p, static_cast<size_t>(klen));
    p += klen;
    const int32_t vlen = read_int();
    if (vlen < 0) return Status::Invalid(where, ": metadata value ", i, " has length ", vlen);
    std::string value(p, static_cast<size_t>(vlen));
    p += vlen;
    pairs.emplace_back(std::move(key), std::move(value));
  }
  if (pairs.empty()) return MetadataPtr();
  return std::make_shared<const KeyValueMetadata>(std::move(pairs));
}

Status ExpectChildren(const FieldVector& children, size_t n, std::string_view format,
                      const std::string& where) {
  if (children.size() != n) {
    return Status::Invalid(where, ": format '", format, "' takes ", n, " children, got ",
                           children.size());
  }
  return Status::OK();
}

// The type a format string describes, given the already imported children.
Result<TypePtr> ParseFormat(std::string_view f, FieldVector children, int64_t flags,
                            const std::string& where) {
  auto leaf = [&](TypePtr t) -> Result<TypePtr> {
    ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, f, where));
    return t;
  };
  auto bad = [&]() { return Status::Invalid(where, ": unknown format string '", f, "'"); };
  if (f.size() == 1) {
    switch (f[0]) {
      case 'n':
        return leaf(null());
      case 'b':
        return leaf(boolean());
      case 'c':
        return leaf(int8());
      case 'C':
        return leaf(uint8());
      case 's':
        return leaf(int16());
      case 'S':
        return leaf(uint16());
      case 'i':
        return leaf(int32());
      case 'I':
        return leaf(uint32());
      case 'l':
        return leaf(int64());
      case 'L':
        return leaf(uint64());
      case 'e':
        return leaf(float16());
      case 'f':
        return leaf(float32());
      case 'g':
        return leaf(float64());
      case 'z':
        return leaf(binary());
      case 'Z':
        return leaf(large_binary());
      case 'u':
        return leaf(utf8());
      case 'U':
        return leaf(large_utf8());
      default:
        return bad();
    }
  }
  if (f == "vz") return leaf(binary_view());
  if (f == "vu") return leaf(utf8_view());
  if (f.starts_with("d:")) {
    const auto parts = Split(f.substr(2), ',');
    if (parts.size() != 2 && parts.size() != 3) return bad();
    ALKAID_ASSIGN_OR_RAISE(int64_t precision,
                           ParseInt(parts[0], 1, 76, where + ": decimal precision"));
    ALKAID_ASSIGN_OR_RAISE(int64_t scale,
                           ParseInt(parts[1], -1000000, 1000000, where + ": decimal scale"));
    int64_t bits = 128;
    if (parts.size() == 3) {
      ALKAID_ASSIGN_OR_RAISE(bits, ParseInt(parts[2], 0, 256, where + ": decimal bit width"));
    }
    if (bits != 32 && bits != 64 && bits != 128 && bits != 256) {
      return Status::Invalid(where, ": decimal bit width ", bits, " is not 32, 64, 128 or 256");
    }
    ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, f, where));
    auto t = DecimalType::Make(static_cast<int>(bits), static_cast<int32_t>(precision),
                               static_cast<int32_t>(scale));
    if (!t.ok()) return Status::Invalid(where, ": ", t.status().message());
    return t;
  }
  if (f.starts_with("w:")) {
    ALKAID_ASSIGN_OR_RAISE(
        int64_t width, ParseInt(f.substr(2), 0, INT32_MAX, where + ": fixed-size binary width"));
    return leaf(fixed_size_binary(static_cast<int32_t>(width)));
  }
  if (f[0] == 't') {
    if (f == "tdD") return leaf(date32());
    if (f == "tdm") return leaf(date64());
    if (f == "tiM") return leaf(month_interval());
    if (f == "tiD") return leaf(day_time_interval());
    if (f == "tin") return leaf(month_day_nano_interval());
    if (f.size() == 3 && f[1] == 't') {
      ALKAID_ASSIGN_OR_RAISE(TimeUnit unit, ParseUnit(f[2], where));
      return leaf(unit == TimeUnit::kSecond || unit == TimeUnit::kMilli ? time32(unit)
                                                                        : time64(unit));
    }
    if (f.size() == 3 && f[1] == 'D') {
      ALKAID_ASSIGN_OR_RAISE(TimeUnit unit, ParseUnit(f[2], where));
      return leaf(duration(unit));
    }
    if (f.size() >= 4 && f[1] == 's' && f[3] == ':') {
      ALKAID_ASSIGN_OR_RAISE(TimeUnit unit, ParseUnit(f[2], where));
      return leaf(timestamp(unit, std::string(f.substr(4))));
    }
    return bad();
  }
  if (f[0] != '+') return bad();
  if (f == "+l" || f == "+L" || f == "+vl" || f == "+vL") {
    ALKAID_RETURN_NOT_OK(ExpectChildren(children, 1, f, where));
    if (f == "+l") return list(children[0]);
    if (f == "+L") return large_list(children[0]);
    if (f == "+vl") return list_view(children[0]);
    return large_list_view(children[0]);
  }
  if (f.starts_with("+w:")) {
    ALKAID_ASSIGN_OR_RAISE(int64_t size,
                           ParseInt(f.substr(3), 0, INT32_MAX, where + ": fixed-size list size"));
    ALKAID_RETURN_NOT_OK(ExpectChildren(children, 1, f, where));
    return fixed_size_list(children[0], static_cast<int32_t>(size));
  }
  if (f == "+s") return struct_(std::move(children));
  if (f == "+m") {
    ALKAID_RETURN_NOT_OK(ExpectChildren(children, 1, f, where));
    auto t = MapType::Make(children[0], (flags & ARROW_FLAG_MAP_KEYS_SORTED) != 0);
    if (!t.ok()) return Status::Invalid(where, ": ", t.status().message());
    return t;
  }
  if (f.starts_with("+us:") || f.starts_with("+ud:")) {
    std::vector<int8_t> codes;
    const std::string_view list = f.substr(4);
    if (!list.empty()) {
      for (std::string_view part : Split(list, ',')) {
        ALKAID_ASSIGN_OR_RAISE(
            int64_t code, ParseInt(part, 0, UnionType::kMaxTypeCode, where + ": union type code"));
        codes.push_back(static_cast<int8_t>(code));
      }
    }
    if (codes.size() != children.size()) {
      return Status::Invalid(where, ": union format '", f, "' lists ", codes.size(),
                             " type codes for ", children.size(), " children");
    }
    auto t = UnionType::Make(std::move(children), std::move(codes),
                             f[2] == 's' ? UnionMode::kSparse : UnionMode::kDense);
    if (!t.ok()) return Status::Invalid(where, ": ", t.status().message());
    return t;
  }
  if (f == "+r") {
    ALKAID_RETURN_NOT_OK(ExpectChildren(children, 2, f, where));
    auto t = RunEndEncodedType::Make(children[0]->type(), children[1]->type());
    if (!t.ok()) return Status::Invalid(where, ": ", t.status().message());
    return t;
  }
  return bad();
}

// As the IPC reader: a registered extension name replaces the storage type
// by the extension type and leaves the metadata without its keys; an
// unregistered one keeps storage type and metadata.
Status ApplyExtension(TypePtr* type, MetadataPtr* metadata, const std::string& where) {
  if (*metadata == nullptr) return Status::OK();
  auto name = (*metadata)->Get(kExtensionNameKey);
  if (!name.has_value()) return Status::OK();
  ExtensionTypeFactory factory = GetExtensionType(*name);
  if (!factory) return Status::OK();
  const std::string serialized = (*metadata)->Get(kExtensionMetadataKey).value_or(std::string());
  auto r = factory(*type, serialized);
  if (!r.ok()) return r.status().WithContext(where + ": extension '" + *name + "'");
  if (*r == nullptr) return Status::Invalid(where, ": extension '", *name, "' factory gave null");
  *type = *r;
  auto rest = (*metadata)->Without({kExtensionNameKey, kExtensionMetadataKey});
  *metadata = rest->empty() ? nullptr : rest;
  return Status::OK();
}

Result<FieldPtr> ImportSchemaNode(const ArrowSchema* s, const std::string& path, int depth) {
  const std::string where = Quoted(path);
  if (s == nullptr) return Status::Invalid(where, ": ArrowSchema is null");
  if (depth > kCDataMaxDepth) {
    return Status::Invalid(where, ": schema nests deeper than ", kCDataMaxDepth,
                           " levels (or has a cycle)");
  }
  if (s->release == nullptr) return Status::Invalid(where, ": ArrowSchema is released");
  if (s->format == nullptr) return Status::Invalid(where, ": format string is null");
  const size_t format_length = strnlen(s->format, kMaxFormatLength + 1);
  if (format_length > kMaxFormatLength) {
    return Status::Invalid(where, ": format string is longer than ", kMaxFormatLength, " bytes");
  }
  const std::string_view format(s->format, format_length);
  if (format.empty()) return Status::Invalid(where, ": format string is empty");
  std::string name = s->name == nullptr ? std::string() : std::string(s->name);
  if (s->n_children < 0 || s->n_children > INT32_MAX) {
    return Status::Invalid(where, ": n_children ", s->n_children, " is out of range");
  }
  if (s->n_children > 0 && s->children == nullptr) {
    return Status::Invalid(where, ": n_children is ", s->n_children, " but children is null");
  }
  ALKAID_ASSIGN_OR_RAISE(MetadataPtr metadata, DecodeMetadata(s->metadata, where));

  FieldVector children;
  children.reserve(static_cast<size_t>(s->n_children));
  for (int64_t i = 0; i < s->n_children; ++i) {
    const ArrowSchema* c = s->children[i];
    const std::string child_path =
        path + "." +
        (c != nullptr && c->name != nullptr ? std::string(c->name)
                                            : "<child " + std::to_string(i) + ">");
    ALKAID_ASSIGN_OR_RAISE(FieldPtr child, ImportSchemaNode(c, child_path, depth + 1));
    children.push_back(std::move(child));
  }
  TypePtr value_type;
  if (s->dictionary != nullptr) {
    ALKAID_ASSIGN_OR_RAISE(FieldPtr values,
                           ImportSchemaNode(s->dictionary, path + ".<dictionary>", depth + 1));
    value_type = values->type();
  }
  ALKAID_ASSIGN_OR_RAISE(TypePtr type, ParseFormat(format, std::move(children), s->flags, where));
  if (value_type != nullptr) {
    if (!IsInteger(type->id())) {
      return Status::Invalid(where, ": dictionary index format '", format,
                             "' is not an integer type");
    }
    auto dict =
        DictionaryType::Make(type, value_type, (s->flags & ARROW_FLAG_DICTIONARY_ORDERED) != 0);
    if (!dict.ok()) return Status::Invalid(where, ": ", dict.status().message());
    type = *dict;
  }
  ALKAID_RETURN_NOT_OK(ApplyExtension(&type, &metadata, where));
  return field(std::move(name), std::move(type), (s->flags & ARROW_FLAG_NULLABLE) != 0,
               std::move(metadata));
}

// --- Arrays ----------------------------------------------------------------

bool MulOverflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }

class ArrayImporter {
 public:
  explicit ArrayImporter(std::shared_ptr<const void> owner) : owner_(std::move(owner)) {}

  Result<ArrayDataPtr> Import(const ArrowArray* c, const TypePtr& type, const std::string& path,
                              int depth) {
    const std::string where = Quoted(path);
    if (c == nullptr) return Status::Invalid(where, ": ArrowArray is null");
    if (depth > kCDataMaxDepth) {
      return Status::Invalid(where, ": array nests deeper than ", kCDataMaxDepth,
                             " levels (or has a cycle)");
    }
    if (c->release == nullptr) return Status::Invalid(where, ": ArrowArray is released");
    if (c->length < 0) return Status::Invalid(where, ": length ", c->length, " is negative");
    if (c->offset < 0) return Status::Invalid(where, ": offset ", c->offset, " is negative");
    if (c->null_count < -1 || c->null_count > c->length) {
      return Status::Invalid(where, ": null_count ", c->null_count, " is outside [-1, length ",
                             c->length, "]");
    }
    int64_t end;
    if (__builtin_add_overflow(c->offset, c->length, &end)) {
      return Status::Invalid(where, ": offset ", c->offset, " + length ", c->length, " overflows");
    }

    const DataType& storage = StorageType(*type);
    const DataType* physical = &storage;
    const DictionaryType* dict = nullptr;
    if (storage.id() == TypeId::kDictionary) {
      dict = static_cast<const DictionaryType*>(&storage);
      physical = dict->index_type().get();
    }
    const TypeId id = physical->id();
    const DataTypeLayout& layout = physical->layout();

    // Counts and pointers, before anything is read.
    int64_t expected_buffers =
        id == TypeId::kNull ? 0 : static_cast<int64_t>(layout.buffers.size());
    if (layout.variadic) {
      if (c->n_buffers < expected_buffers + 1) {
        return Status::Invalid(where, ": ", physical->name(), " array has ", c->n_buffers,
                               " buffers, expected at least ", expected_buffers + 1);
      }
      expected_buffers = c->n_buffers;
    } else if (c->n_buffers != expected_buffers) {
      return Status::Invalid(where, ": ", physical->name(), " array has ", c->n_buffers,
                             " buffers, expected ", expected_buffers);
    }
    if (c->n_buffers > 0 && c->buffers == nullptr) {
      return Status::Invalid(where, ": n_buffers is ", c->n_buffers, " but buffers is null");
    }
    const int64_t expected_children = physical->num_fields();
    if (c->n_children != expected_children) {
      return Status::Invalid(where, ": ", physical->name(), " array has ", c->n_children,
                             " children, expected ", expected_children);
    }
    if (c->n_children > 0 && c->children == nullptr) {
      return Status::Invalid(where, ": n_children is ", c->n_children, " but children is null");
    }
    if ((dict != nullptr) != (c->dictionary != nullptr)) {
      return Status::Invalid(where, dict != nullptr
                                        ? ": dictionary-encoded array has no dictionary"
                                        : ": array of a non-dictionary type has a dictionary");
    }

    auto data = std::make_shared<ArrayData>();
    data->type = type;
    data->length = c->length;
    data->offset = c->offset;
    data->null_count = c->null_count;
    if (id == TypeId::kNull) {
      data->null_count = c->length;
    } else if (!layout.has_validity && data->null_count == kUnknownNullCount) {
      data->null_count = 0;
    }

    // Buffers, sized from the type, length and offset.
    if (id != TypeId::kNull) {
      data->buffers.reserve(static_cast<size_t>(c->n_buffers));
      const bool offsets_first = IsBinaryLike(id) || IsLargeBinaryLike(id) || IsListLike(id);
      for (size_t i = 0; i < layout.buffers.size(); ++i) {
        const auto& spec = layout.buffers[i];
        const void* ptr = c->buffers[i];
        if (spec.kind == DataTypeLayout::BufferKind::kValidity) {
          if (ptr == nullptr) {
            if (c->null_count > 0) {
              return Status::Invalid(where, ": validity bitmap is null but null_count is ",
                                     c->null_count);
            }
            data->null_count = 0;
            data->buffers.push_back(nullptr);
            continue;
          }
          ALKAID_ASSIGN_OR_RAISE(auto b, Wrap(ptr, end / 8 + (end % 8 != 0 ? 1 : 0), i, where));
          data->buffers.push_back(std::move(b));
          continue;
        }
        int64_t size = 0;
        if (spec.kind == DataTypeLayout::BufferKind::kBitmap) {
          size = end / 8 + (end % 8 != 0 ? 1 : 0);
        } else if (offsets_first && i == 1) {
          // length + 1 offsets; an empty array may omit its offsets.
          if (ptr == nullptr && c->length == 0) {
            size = 0;
          } else if (MulOverflows(end + 1, spec.byte_width, &size)) {
            return Status::Invalid(where, ": offsets buffer size overflows");
          }
        } else if ((IsBinaryLike(id) || IsLargeBinaryLike(id)) && i == 2) {
          ALKAID_ASSIGN_OR_RAISE(size, BinaryDataSize(*data, id, where));
        } else if (MulOverflows(end, spec.byte_width, &size)) {
          return Status::Invalid(where, ": buffer ", i, " size overflows");
        }
        ALKAID_ASSIGN_OR_RAISE(auto b, Wrap(ptr, size, i, where));
        data->buffers.push_back(std::move(b));
      }
      if (layout.variadic) {
        ALKAID_RETURN_NOT_OK(ImportVariadic(c, layout.buffers.size(), data.get(), where));
      }
    }

    // Children and dictionary.
    data->child_data.reserve(static_cast<size_t>(c->n_children));
    for (int64_t i = 0; i < c->n_children; ++i) {
      const FieldPtr& f = physical->field(static_cast<int>(i));
      ALKAID_ASSIGN_OR_RAISE(ArrayDataPtr child,
                             Import(c->children[i], f->type(), path + "." + f->name(), depth + 1));
      data->child_data.push_back(std::move(child));
    }
    if (dict != nullptr) {
      ALKAID_ASSIGN_OR_RAISE(data->dictionary, Import(c->dictionary, dict->value_type(),
                                                      path + ".<dictionary>", depth + 1));
    }
    return data;
  }

 private:
  // A buffer over foreign memory kept alive by the import guard. A null
  // pointer is allowed only where no byte is needed.
  Result<std::shared_ptr<Buffer>> Wrap(const void* ptr, int64_t size, size_t index,
                                       const std::string& where) const {
    if (ptr == nullptr) {
      if (size > 0) {
        return Status::Invalid(where, ": buffer ", index, " is null but must hold ", size,
                               " bytes");
      }
      return std::make_shared<Buffer>(kZeroBytes, 0);
    }
    return std::make_shared<Buffer>(static_cast<const uint8_t*>(ptr), size, owner_);
  }

  // The data buffer of binary/string arrays ends at the last offset.
  static Result<int64_t> BinaryDataSize(const ArrayData& data, TypeId id,
                                        const std::string& where) {
    const Buffer* offsets = data.buffers[1].get();
    if (offsets->size() == 0) return int64_t{0};
    const int64_t last_index = data.offset + data.length;
    int64_t last;
    if (IsLargeBinaryLike(id)) {
      std::memcpy(&last, offsets->data() + last_index * 8, sizeof(last));
    } else {
      int32_t v;
      std::memcpy(&v, offsets->data() + last_index * 4, sizeof(v));
      last = v;
    }
    if (last < 0) return Status::Invalid(where, ": last offset ", last, " is negative");
    return last;
  }

  // Binary views: data buffers, then one int64 size per data buffer.
  Status ImportVariadic(const ArrowArray* c, size_t fixed, ArrayData* data,
                        const std::string& where) const {
    const int64_t n_data = c->n_buffers - static_cast<int64_t>(fixed) - 1;
    const auto* sizes = static_cast<const int64_t*>(c->buffers[c->n_buffers - 1]);
    if (n_data > 0 && sizes == nullptr) {
      return Status::Invalid(where, ": the variadic buffer sizes buffer is null");
    }
    for (int64_t k = 0; k < n_data; ++k) {
      int64_t size;
      std::memcpy(&size, sizes + k, sizeof(size));
      if (size < 0) {
        return Status::Invalid(where, ": variadic data buffer ", k, " has negative size ", size);
      }
      ALKAID_ASSIGN_OR_RAISE(auto b, Wrap(c->buffers[static_cast<int64_t>(fixed) + k], size,
                                          fixed + static_cast<size_t>(k), where));
      data->buffers.push_back(std::move(b));
    }
    return Status::OK();
  }

  std::shared_ptr<const void> owner_;
};

Status ValidateImported(const ArrayData& data, const std::string& name,
                        const CImportOptions& options) {
  return options.validate_full ? ValidateFull(data, name, options.full_validation)
                               : Validate(data, name);
}

// Imports the array held by `guard` (already taken) as `type`.
Result<ArrayDataPtr> ImportTaken(std::shared_ptr<ImportedArray> guard, const TypePtr& type,
                                 const std::string& name) {
  if (type == nullptr) return Status::Invalid("ImportArray: type is null");
  const ArrowArray* c = &guard->array;
  ArrayImporter importer(guard);
  guard.reset();  // from here on, only the buffers keep the foreign array alive
  return importer.Import(c, type, name, 0);
}

}  // namespace

Result<FieldPtr> ImportField(ArrowSchema* schema) {
  TakenSchema taken;
  ALKAID_RETURN_NOT_OK(taken.Take(schema));
  const std::string root = taken.get()->name != nullptr ? taken.get()->name : "";
  return ImportSchemaNode(taken.get(), root, 0);
}

Result<TypePtr> ImportType(ArrowSchema* schema) {
  ALKAID_ASSIGN_OR_RAISE(FieldPtr f, ImportField(schema));
  return f->type();
}

Result<SchemaPtr> ImportSchema(ArrowSchema* c_schema) {
  TakenSchema taken;
  ALKAID_RETURN_NOT_OK(taken.Take(c_schema));
  const ArrowSchema* s = taken.get();
  const std::string_view format = s->format == nullptr
                                      ? std::string_view("(null)")
                                      : std::string_view(s->format, strnlen(s->format, 64));
  if (format != "+s") {
    return Status::Invalid("ImportSchema: a schema must have the struct format '+s', got '", format,
                           "'");
  }
  ALKAID_ASSIGN_OR_RAISE(FieldPtr root, ImportSchemaNode(s, "schema", 0));
  return schema(root->type()->fields(), root->metadata());
}

Result<ArrayPtr> ImportArray(ArrowArray* array, const TypePtr& type,
                             const CImportOptions& options) {
  ALKAID_ASSIGN_OR_RAISE(auto guard, TakeArray(array));
  ALKAID_ASSIGN_OR_RAISE(ArrayDataPtr data, ImportTaken(std::move(guard), type, "array"));
  ALKAID_RETURN_NOT_OK(ValidateImported(*data, "array", options));
  return MakeArray(std::move(data));
}

Result<ArrayPtr> ImportArray(ArrowArray* array, ArrowSchema* schema,
                             const CImportOptions& options) {
  // Take both first, so that both are released whatever fails.
  TakenSchema taken;
  Status schema_taken = taken.Take(schema);
  ALKAID_ASSIGN_OR_RAISE(auto guard, TakeArray(array));
  ALKAID_RETURN_NOT_OK(schema_taken);
  const std::string root = taken.get()->name != nullptr ? taken.get()->name : "";
  ALKAID_ASSIGN_OR_RAISE(FieldPtr f, ImportSchemaNode(taken.get(), root, 0));
  const std::string name = f->name().empty() ? "array" : f->name();
  ALKAID_ASSIGN_OR_RAISE(ArrayDataPtr data, ImportTaken(std::move(guard), f->type(), name));
  ALKAID_RETURN_NOT_OK(ValidateImported(*data, name, options));
  return MakeArray(std::move(data));
}

Result<RecordBatchPtr> ImportRecordBatch(ArrowArray* array, const SchemaPtr& schema,
                                         const CImportOptions& options) {
  ALKAID_ASSIGN_OR_RAISE(auto guard, TakeArray(array));
  if (schema == nullptr) return Status::Invalid("ImportRecordBatch: schema is null");
  ALKAID_ASSIGN_OR_RAISE(ArrayDataPtr data,
                         ImportTaken(std::move(guard), struct_(schema->fields()), "batch"));
  if (data->buffers[0] != nullptr && data->GetNullCount() != 0) {
    return Status::Invalid("ImportRecordBatch: the struct array has ", data->GetNullCount(),
                           " nulls; a record batch has none");
  }
  const int64_t end = data->offset + data->length;
  std::vector<ArrayDataPtr> columns;
  columns.reserve(data->child_data.size());
  for (size_t i = 0; i < data->child_data.size(); ++i) {
    const ArrayDataPtr& child = data->child_data[i];
    if (child->length < end) {
      return Status::Invalid("ImportRecordBatch: column ", i, " ('",
                             schema->field(static_cast<int>(i))->name(), "') has ", child->length,
                             " rows, the batch needs ", end);
    }
    columns.push_back(data->offset == 0 && child->length == data->length
                          ? child
                          : child->Slice(data->offset, data->length));
  }
  ALKAID_ASSIGN_OR_RAISE(auto batch, RecordBatch::Make(schema, data->length, std::move(columns)));
  ALKAID_RETURN_NOT_OK(options.validate_full ? ValidateFull(*batch, options.full_validation)
                                             : Validate(*batch));
  return batch;
}

Result<RecordBatchPtr> ImportRecordBatch(ArrowArray* array, ArrowSchema* schema,
                                         const CImportOptions& options) {
  Result<SchemaPtr> imported = ImportSchema(schema);  // releases `schema` in any case
  if (!imported.ok()) {
    // Still take (and so release) the array, as promised.
    auto guard = TakeArray(array);
    return imported.status();
  }
  return ImportRecordBatch(array, *imported, options);
}

}  // namespace alkaid::format
