// The only file that touches the generated Flatbuffers code. It converts
// between the wire tables (format/fbs/*.fbs, binary-identical to Arrow's
// metadata V5) and Alkaid's types, checking everything it reads.

#include "metadata_internal.h"

#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "alkaid/format/extension.h"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wnull-dereference"
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
#include "alkaid/fbs/File_generated.h"
#include "alkaid/fbs/Message_generated.h"
#include "alkaid/fbs/Schema_generated.h"
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace alkaid::format::ipc::internal {

namespace fb = ::flatbuffers;
namespace fbs = ::alkaid::fbs;

using KeyValueVector = fb::Vector<fb::Offset<fbs::KeyValue>>;

std::string ExtensionNameKey(std::string_view ns) { return std::string(ns) + ":extension:name"; }
std::string ExtensionMetadataKey(std::string_view ns) {
  return std::string(ns) + ":extension:metadata";
}

namespace {

// Flatbuffers counts one level per nested table; a field costs about three
// (Field, its children vector, the type table).
fb::uoffset_t VerifierDepth(int max_depth) {
  return static_cast<fb::uoffset_t>(std::clamp(max_depth, 1, 1 << 20) * 3 + 16);
}
constexpr fb::uoffset_t kMaxTables = 10'000'000;

Result<MetadataVersion> VersionFromFlatbuffer(fbs::MetadataVersion v) {
  switch (v) {
    case fbs::MetadataVersion::V4:
      return MetadataVersion::kV4;
    case fbs::MetadataVersion::V5:
      return MetadataVersion::kV5;
    case fbs::MetadataVersion::V1:
    case fbs::MetadataVersion::V2:
    case fbs::MetadataVersion::V3:
      return Status::NotImplemented("metadata version V", static_cast<int>(v) + 1,
                                    " (before Arrow 0.15) is not supported; need V4 or V5");
  }
  return Status::Invalid("unknown metadata version ", static_cast<int>(v));
}

MetadataPtr MetadataFromFlatbuffer(const KeyValueVector* kv) {
  if (kv == nullptr) return nullptr;
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(kv->size());
  for (const fbs::KeyValue* p : *kv) {
    if (p == nullptr) continue;
    pairs.emplace_back(p->key() ? p->key()->str() : std::string(),
                       p->value() ? p->value()->str() : std::string());
  }
  return std::make_shared<KeyValueMetadata>(std::move(pairs));
}

std::string Quoted(const std::string& path) { return "field '" + path + "'"; }

Result<TypePtr> IntFromFlatbuffer(const fbs::Int* t, const std::string& where) {
  if (t == nullptr) return Status::Invalid(where, ": Int type table is missing");
  const bool s = t->is_signed();
  switch (t->bitWidth()) {
    case 8:
      return s ? int8() : uint8();
    case 16:
      return s ? int16() : uint16();
    case 32:
      return s ? int32() : uint32();
    case 64:
      return s ? int64() : uint64();
    default:
      return Status::Invalid(where, ": integer bit width ", t->bitWidth(),
                             " is not 8, 16, 32 or 64");
  }
}

Result<TimeUnit> UnitFromFlatbuffer(fbs::TimeUnit u, const std::string& where) {
  switch (u) {
    case fbs::TimeUnit::SECOND:
      return TimeUnit::kSecond;
    case fbs::TimeUnit::MILLISECOND:
      return TimeUnit::kMilli;
    case fbs::TimeUnit::MICROSECOND:
      return TimeUnit::kMicro;
    case fbs::TimeUnit::NANOSECOND:
      return TimeUnit::kNano;
  }
  return Status::Invalid(where, ": unknown time unit ", static_cast<int>(u));
}

fbs::TimeUnit UnitToFlatbuffer(TimeUnit u) {
  switch (u) {
    case TimeUnit::kSecond:
      return fbs::TimeUnit::SECOND;
    case TimeUnit::kMilli:
      return fbs::TimeUnit::MILLISECOND;
    case TimeUnit::kMicro:
      return fbs::TimeUnit::MICROSECOND;
    case TimeUnit::kNano:
      return fbs::TimeUnit::NANOSECOND;
  }
  return fbs::TimeUnit::SECOND;
}

Status ExpectChildren(const FieldVector& children, size_t n, std::string_view type_name,
                      const std::string& where) {
  if (children.size() != n) {
    return Status::Invalid(where, ": type ", type_name, " needs ", n, " child field(s), has ",
                           children.size());
  }
  return Status::OK();
}

// The concrete type of a field from its type table and decoded children.
Result<TypePtr> TypeFromFlatbuffer(const fbs::Field* f, FieldVector children,
                                   const std::string& where) {
  auto missing = [&](const char* name) {
    return Status::Invalid(where, ": ", name, " type table is missing");
  };
  switch (f->type_type()) {
    case fbs::Type::NONE:
      return Status::Invalid(where, ": field has no type");
    case fbs::Type::Null:
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "null", where));
      return null();
    case fbs::Type::Int:
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "int", where));
      return IntFromFlatbuffer(f->type_as_Int(), where);
    case fbs::Type::FloatingPoint: {
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "floating point", where));
      const auto* t = f->type_as_FloatingPoint();
      if (t == nullptr) return missing("FloatingPoint");
      switch (t->precision()) {
        case fbs::Precision::HALF:
          return float16();
        case fbs::Precision::SINGLE:
          return float32();
        case fbs::Precision::DOUBLE:
          return float64();
      }
      return Status::Invalid(where, ": unknown floating point precision ",
                             static_cast<int>(t->precision()));
    }
    case fbs::Type::Binary:
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "binary", where));
      return binary();
    case fbs::Type::Utf8:
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "utf8", where));
      return utf8();
    case fbs::Type::LargeBinary:
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "large_binary", where));
      return large_binary();
    case fbs::Type::LargeUtf8:
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "large_utf8", where));
      return large_utf8();
    case fbs::Type::BinaryView:
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "binary_view", where));
      return binary_view();
    case fbs::Type::Utf8View:
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "utf8_view", where));
      return utf8_view();
    case fbs::Type::Bool:
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "bool", where));
      return boolean();
    case fbs::Type::Decimal: {
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "decimal", where));
      const auto* t = f->type_as_Decimal();
      if (t == nullptr) return missing("Decimal");
      const int bw = t->bitWidth();
      if (bw != 32 && bw != 64 && bw != 128 && bw != 256) {
        return Status::Invalid(where, ": decimal bit width ", bw, " is not 32, 64, 128 or 256");
      }
      auto r = DecimalType::Make(bw, t->precision(), t->scale());
      if (!r.ok()) return r.status().WithContext(where);
      return r;
    }
    case fbs::Type::Date: {
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "date", where));
      const auto* t = f->type_as_Date();
      // An absent table means all defaults (MILLISECOND).
      if (t == nullptr || t->unit() == fbs::DateUnit::MILLISECOND) return date64();
      if (t->unit() == fbs::DateUnit::DAY) return date32();
      return Status::Invalid(where, ": unknown date unit ", static_cast<int>(t->unit()));
    }
    case fbs::Type::Time: {
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "time", where));
      const auto* t = f->type_as_Time();
      if (t == nullptr) return missing("Time");
      ALKAID_ASSIGN_OR_RAISE(TimeUnit unit, UnitFromFlatbuffer(t->unit(), where));
      const bool is32 = unit == TimeUnit::kSecond || unit == TimeUnit::kMilli;
      if (t->bitWidth() != (is32 ? 32 : 64)) {
        return Status::Invalid(where, ": time unit ", TimeUnitName(unit), " needs bit width ",
                               is32 ? 32 : 64, ", got ", t->bitWidth());
      }
      return std::make_shared<TimeType>(unit);
    }
    case fbs::Type::Timestamp: {
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "timestamp", where));
      const auto* t = f->type_as_Timestamp();
      if (t == nullptr) return missing("Timestamp");
      ALKAID_ASSIGN_OR_RAISE(TimeUnit unit, UnitFromFlatbuffer(t->unit(), where));
      return timestamp(unit, t->timezone() ? t->timezone()->str() : std::string());
    }
    case fbs::Type::Interval: {
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "interval", where));
      const auto* t = f->type_as_Interval();
      if (t == nullptr) return missing("Interval");
      switch (t->unit()) {
        case fbs::IntervalUnit::YEAR_MONTH:
          return month_interval();
        case fbs::IntervalUnit::DAY_TIME:
          return day_time_interval();
        case fbs::IntervalUnit::MONTH_DAY_NANO:
          return month_day_nano_interval();
      }
      return Status::Invalid(where, ": unknown interval unit ", static_cast<int>(t->unit()));
    }
    case fbs::Type::Duration: {
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "duration", where));
      const auto* t = f->type_as_Duration();
      if (t == nullptr) return missing("Duration");
      ALKAID_ASSIGN_OR_RAISE(TimeUnit unit, UnitFromFlatbuffer(t->unit(), where));
      return duration(unit);
    }
    case fbs::Type::FixedSizeBinary: {
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 0, "fixed_size_binary", where));
      const auto* t = f->type_as_FixedSizeBinary();
      if (t == nullptr) return missing("FixedSizeBinary");
      if (t->byteWidth() < 0) {
        return Status::Invalid(where, ": fixed_size_binary byte width ", t->byteWidth(),
                               " is negative");
      }
      return fixed_size_binary(t->byteWidth());
    }
    case fbs::Type::List:
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 1, "list", where));
      return list(children[0]);
    case fbs::Type::LargeList:
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 1, "large_list", where));
      return large_list(children[0]);
    case fbs::Type::ListView:
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 1, "list_view", where));
      return list_view(children[0]);
    case fbs::Type::LargeListView:
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 1, "large_list_view", where));
      return large_list_view(children[0]);
    case fbs::Type::FixedSizeList: {
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 1, "fixed_size_list", where));
      const auto* t = f->type_as_FixedSizeList();
      if (t == nullptr) return missing("FixedSizeList");
      if (t->listSize() < 0) {
        return Status::Invalid(where, ": fixed_size_list size ", t->listSize(), " is negative");
      }
      return fixed_size_list(children[0], t->listSize());
    }
    case fbs::Type::Map: {
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 1, "map", where));
      const auto* t = f->type_as_Map();
      auto r = MapType::Make(children[0], t != nullptr && t->keysSorted());
      if (!r.ok()) return Status::Invalid(where, ": ", r.status().message());
      return r;
    }
    case fbs::Type::Struct_:
      return struct_(std::move(children));
    case fbs::Type::Union: {
      const auto* t = f->type_as_Union();
      if (t == nullptr) return missing("Union");
      std::vector<int8_t> codes;
      if (t->typeIds() != nullptr) {
        for (int32_t code : *t->typeIds()) {
          if (code < 0 || code > UnionType::kMaxTypeCode) {
            return Status::Invalid(where, ": union type code ", code, " is outside [0, 127]");
          }
          codes.push_back(static_cast<int8_t>(code));
        }
        if (codes.size() != children.size()) {
          return Status::Invalid(where, ": union has ", children.size(), " children but ",
                                 codes.size(), " type ids");
        }
      }
      UnionMode mode;
      switch (t->mode()) {
        case fbs::UnionMode::Sparse:
          mode = UnionMode::kSparse;
          break;
        case fbs::UnionMode::Dense:
          mode = UnionMode::kDense;
          break;
        default:
          return Status::Invalid(where, ": unknown union mode ", static_cast<int>(t->mode()));
      }
      auto r = UnionType::Make(std::move(children), std::move(codes), mode);
      if (!r.ok()) return Status::Invalid(where, ": ", r.status().message());
      return r;
    }
    case fbs::Type::RunEndEncoded: {
      ALKAID_RETURN_NOT_OK(ExpectChildren(children, 2, "run_end_encoded", where));
      auto r = RunEndEncodedType::Make(children[0]->type(), children[1]->type());
      if (!r.ok()) return Status::Invalid(where, ": ", r.status().message());
      return r;
    }
  }
  return Status::Invalid(where, ": unknown type tag ", static_cast<int>(f->type_type()));
}

// Replaces `type` by the registered extension type named in `metadata`, if
// any, removing the extension keys from the metadata.
Status ApplyExtension(TypePtr* type, MetadataPtr* metadata, const std::string& where) {
  if (*metadata == nullptr) return Status::OK();
  for (std::string_view ns : {"ALKAID", "ARROW"}) {
    const std::string name_key = ExtensionNameKey(ns);
    auto name = (*metadata)->Get(name_key);
    if (!name.has_value()) continue;
    ExtensionTypeFactory factory = GetExtensionType(*name);
    if (!factory) return Status::OK();  // unknown: keep storage + metadata
    const std::string meta_key = ExtensionMetadataKey(ns);
    std::string serialized = (*metadata)->Get(meta_key).value_or(std::string());
    auto r = factory(*type, serialized);
    if (!r.ok()) return r.status().WithContext(where + ": extension '" + *name + "'");
    if (*r == nullptr) return Status::Invalid(where, ": extension '", *name, "' factory gave null");
    *type = *r;
    auto rest = (*metadata)->Without({name_key, meta_key});
    *metadata = rest->empty() ? nullptr : rest;
    return Status::OK();
  }
  return Status::OK();
}

struct SchemaReadContext {
  DictionaryMemo* memo;
  int max_depth;
};

Result<FieldPtr> FieldFromFlatbuffer(const fbs::Field* f, FieldPath* path,
                                     const std::string& parent, SchemaReadContext* ctx, int depth) {
  if (f == nullptr) return Status::Invalid("null field at path ", parent);
  std::string name = f->name() ? f->name()->str() : std::string();
  const std::string dotted = parent.empty() ? name : parent + "." + name;
  const std::string where = Quoted(dotted);
  if (depth > ctx->max_depth) {
    return Status::Invalid(where, ": type nesting deeper than max_recursion_depth (",
                           ctx->max_depth, ")");
  }
  FieldVector children;
  if (f->children() != nullptr) {
    children.reserve(f->children()->size());
    for (fb::uoffset_t i = 0; i < f->children()->size(); ++i) {
      path->push_back(static_cast<int>(i));
      auto child = FieldFromFlatbuffer(f->children()->Get(i), path, dotted, ctx, depth + 1);
      path->pop_back();
      ALKAID_RETURN_NOT_OK(child);
      children.push_back(*std::move(child));
    }
  }
  ALKAID_ASSIGN_OR_RAISE(TypePtr type, TypeFromFlatbuffer(f, std::move(children), where));
  MetadataPtr metadata = MetadataFromFlatbuffer(f->custom_metadata());

  if (const fbs::DictionaryEncoding* enc = f->dictionary(); enc != nullptr) {
    TypePtr index_type = int32();
    if (enc->indexType() != nullptr) {
      ALKAID_ASSIGN_OR_RAISE(index_type, IntFromFlatbuffer(enc->indexType(), where));
    }
    if (ctx->memo != nullptr) {
      Status st = ctx->memo->AddField(enc->id(), *path, type);
      if (!st.ok()) return st.WithContext(where);
    }
    type =
        std::make_shared<DictionaryType>(std::move(index_type), std::move(type), enc->isOrdered());
  }
  ALKAID_RETURN_NOT_OK(ApplyExtension(&type, &metadata, where));
  return std::make_shared<Field>(std::move(name), std::move(type), f->nullable(),
                                 std::move(metadata));
}

Result<SchemaPtr> SchemaFromFlatbuffer(const fbs::Schema* s, DictionaryMemo* memo, int max_depth) {
  if (s == nullptr) return Status::Invalid("schema table is missing");
  if (s->endianness() == fbs::Endianness::Big) {
    return Status::NotImplemented("big-endian data is not supported");
  }
  if (s->endianness() != fbs::Endianness::Little) {
    return Status::Invalid("unknown endianness ", static_cast<int>(s->endianness()));
  }
  SchemaReadContext ctx{memo, max_depth};
  FieldVector fields;
  if (s->fields() != nullptr) {
    fields.reserve(s->fields()->size());
    FieldPath path;
    for (fb::uoffset_t i = 0; i < s->fields()->size(); ++i) {
      path.assign(1, static_cast<int>(i));
      ALKAID_ASSIGN_OR_RAISE(auto field,
                             FieldFromFlatbuffer(s->fields()->Get(i), &path, "", &ctx, 1));
      fields.push_back(std::move(field));
    }
  }
  return schema(std::move(fields), MetadataFromFlatbuffer(s->custom_metadata()));
}

namespace {

// The Verifier checks a vector's length prefix but not that its elements sit
// at their natural alignment; a hostile buffer can place a vector of 8-byte
// structs (or int64 scalars) 4 bytes off. Flatbuffers writers align every
// non-empty vector (empty ones may sit anywhere: nothing is read from them),
// so misaligned elements are refused rather than read.
template <typename T>
Status CheckVectorAlignment(const fb::Vector<T>* v, const char* what, const char* vector) {
  if (v == nullptr || v->size() == 0) return Status::OK();
  using Element = std::remove_cv_t<std::remove_pointer_t<T>>;
  const auto address = reinterpret_cast<uintptr_t>(v->Data());
  if (address % alignof(Element) != 0) {
    return Status::Invalid(what, ": the ", vector, " vector is not ", alignof(Element),
                           "-byte aligned in the metadata");
  }
  return Status::OK();
}

}  // namespace

Result<RecordBatchMeta> RecordBatchFromFlatbuffer(const fbs::RecordBatch* rb, const char* what) {
  if (rb == nullptr) return Status::Invalid(what, ": RecordBatch table is missing");
  RecordBatchMeta out;
  out.length = rb->length();
  if (out.length < 0) return Status::Invalid(what, ": negative length ", out.length);
  ALKAID_RETURN_NOT_OK(CheckVectorAlignment(rb->nodes(), what, "nodes"));
  ALKAID_RETURN_NOT_OK(CheckVectorAlignment(rb->buffers(), what, "buffers"));
  ALKAID_RETURN_NOT_OK(
      CheckVectorAlignment(rb->variadicBufferCounts(), what, "variadicBufferCounts"));
  if (rb->nodes() != nullptr) {
    out.nodes.reserve(rb->nodes()->size());
    for (const fbs::FieldNode* n : *rb->nodes()) {
      out.nodes.push_back({n->length(), n->null_count()});
    }
  }
  if (rb->buffers() != nullptr) {
    out.buffers.reserve(rb->buffers()->size());
    for (const fbs::Buffer* b : *rb->buffers()) out.buffers.push_back({b->offset(), b->length()});
  }
  if (const fbs::BodyCompression* c = rb->compression(); c != nullptr) {
    if (c->method() != fbs::BodyCompressionMethod::BUFFER) {
      return Status::NotImplemented(what, ": body compression method ",
                                    static_cast<int>(c->method()), " is not supported");
    }
    switch (c->codec()) {
      case fbs::CompressionType::LZ4_FRAME:
        out.compression = CompressionType::kLz4Frame;
        break;
      case fbs::CompressionType::ZSTD:
        out.compression = CompressionType::kZstd;
        break;
      default:
        return Status::Invalid(what, ": unknown compression codec ", static_cast<int>(c->codec()));
    }
  }
  if (rb->variadicBufferCounts() != nullptr) {
    for (int64_t c : *rb->variadicBufferCounts()) out.variadic_counts.push_back(c);
  }
  return out;
}

const fbs::Message* RootMessage(const uint8_t* data) { return fbs::GetMessage(data); }

}  // namespace

// ---------------------------------------------------------------------------
// Reading

Result<MessageInfo> VerifyMessage(const uint8_t* data, int64_t size, int max_depth) {
  if (size <= 0 || size > kMaxMetadataSize) {
    return Status::Invalid("message metadata size ", size, " is not in [1, 2^31)");
  }
  fb::Verifier verifier(data, static_cast<size_t>(size), VerifierDepth(max_depth), kMaxTables);
  if (!fbs::VerifyMessageBuffer(verifier)) {
    return Status::Invalid("message metadata (", size, " bytes) is not a valid Message flatbuffer");
  }
  return ReadMessageInfo(data);
}

Result<MessageInfo> ReadMessageInfo(const uint8_t* data) {
  const fbs::Message* m = RootMessage(data);
  MessageInfo info;
  ALKAID_ASSIGN_OR_RAISE(info.version, VersionFromFlatbuffer(m->version()));
  switch (m->header_type()) {
    case fbs::MessageHeader::Schema:
      info.type = MessageType::kSchema;
      break;
    case fbs::MessageHeader::DictionaryBatch:
      info.type = MessageType::kDictionaryBatch;
      break;
    case fbs::MessageHeader::RecordBatch:
      info.type = MessageType::kRecordBatch;
      break;
    case fbs::MessageHeader::Tensor:
    case fbs::MessageHeader::SparseTensor:
      return Status::NotImplemented("tensor messages are not supported");
    case fbs::MessageHeader::NONE:
      return Status::Invalid("message has no header");
    default:
      return Status::Invalid("unknown message header type ", static_cast<int>(m->header_type()));
  }
  if (m->header() == nullptr) {
    return Status::Invalid(MessageTypeName(info.type), " message: header table is missing");
  }
  info.body_length = m->bodyLength();
  if (info.body_length < 0) {
    return Status::Invalid("message declares a negative body length ", info.body_length);
  }
  info.custom_metadata = MetadataFromFlatbuffer(m->custom_metadata());
  return info;
}

Result<SchemaPtr> GetSchema(const uint8_t* message, DictionaryMemo* memo, int max_depth) {
  const fbs::Message* m = RootMessage(message);
  return SchemaFromFlatbuffer(m->header_as_Schema(), memo, max_depth);
}

Result<RecordBatchMeta> GetRecordBatch(const uint8_t* message) {
  return RecordBatchFromFlatbuffer(RootMessage(message)->header_as_RecordBatch(),
                                   "record batch message");
}

Result<RecordBatchNumbersAt> LocateRecordBatchNumbers(const uint8_t* message) {
  const fbs::Message* m = RootMessage(message);
  const fbs::RecordBatch* rb = m->header_as_RecordBatch();
  if (rb == nullptr) return Status::Invalid("not a record batch message");
  if (rb->compression() != nullptr) return Status::Invalid("a compressed record batch");
  // The generated tables are flatbuffers::Table underneath (privately):
  // a stored field's address, or null when the writer left it out.
  const auto* message_table = reinterpret_cast<const fb::Table*>(m);
  const auto* batch_table = reinterpret_cast<const fb::Table*>(rb);
  const uint8_t* length = batch_table->GetAddressOf(fbs::RecordBatch::VT_LENGTH);
  const uint8_t* body_length = message_table->GetAddressOf(fbs::Message::VT_BODYLENGTH);
  if (length == nullptr || body_length == nullptr || rb->nodes() == nullptr ||
      rb->buffers() == nullptr) {
    return Status::Invalid("a record batch message with a number left out");
  }
  static_assert(sizeof(fbs::FieldNode) == 16 && sizeof(fbs::Buffer) == 16);
  RecordBatchNumbersAt at;
  at.length = length - message;
  at.body_length = body_length - message;
  at.nodes = reinterpret_cast<const uint8_t*>(rb->nodes()->Data()) - message;
  at.buffers = reinterpret_cast<const uint8_t*>(rb->buffers()->Data()) - message;
  at.num_nodes = rb->nodes()->size();
  at.num_buffers = rb->buffers()->size();
  return at;
}

Result<DictionaryBatchMeta> GetDictionaryBatch(const uint8_t* message) {
  const fbs::DictionaryBatch* d = RootMessage(message)->header_as_DictionaryBatch();
  if (d == nullptr) return Status::Invalid("dictionary batch table is missing");
  DictionaryBatchMeta out;
  out.id = d->id();
  out.is_delta = d->isDelta();
  ALKAID_ASSIGN_OR_RAISE(out.data, RecordBatchFromFlatbuffer(d->data(), "dictionary batch"));
  return out;
}

Result<FooterMeta> ReadFooter(const uint8_t* data, int64_t size, DictionaryMemo* memo,
                              int max_depth) {
  if (size <= 0 || size > kMaxMetadataSize) {
    return Status::Invalid("footer size ", size, " is not in [1, 2^31)");
  }
  fb::Verifier verifier(data, static_cast<size_t>(size), VerifierDepth(max_depth), kMaxTables);
  if (!fbs::VerifyFooterBuffer(verifier)) {
    return Status::Invalid("file footer (", size, " bytes) is not a valid Footer flatbuffer");
  }
  const fbs::Footer* f = fbs::GetFooter(data);
  FooterMeta out;
  // Writers before Arrow 0.15 left the footer's version out (it then reads
  // as V1). Nothing in the footer depends on it: every message in the file
  // carries its own version, which is what decoding checks. The file's
  // version is then that of its messages (RecordBatchFileReader::version).
  auto version = VersionFromFlatbuffer(f->version());
  out.version_in_footer = version.ok();
  if (version.ok()) out.version = *version;
  if (f->schema() == nullptr) return Status::Invalid("file footer has no schema");
  auto schema_result = SchemaFromFlatbuffer(f->schema(), memo, max_depth);
  if (!schema_result.ok()) return schema_result.status().WithContext("file footer schema");
  out.schema = *std::move(schema_result);
  ALKAID_RETURN_NOT_OK(CheckVectorAlignment(f->dictionaries(), "file footer", "dictionaries"));
  ALKAID_RETURN_NOT_OK(CheckVectorAlignment(f->recordBatches(), "file footer", "recordBatches"));
  auto blocks = [](const fb::Vector<const fbs::Block*>* v, std::vector<BlockMeta>* dst) {
    if (v == nullptr) return;
    dst->reserve(v->size());
    for (const fbs::Block* b : *v)
      dst->push_back({b->offset(), b->metaDataLength(), b->bodyLength()});
  };
  blocks(f->dictionaries(), &out.dictionaries);
  blocks(f->recordBatches(), &out.record_batches);
  out.custom_metadata = MetadataFromFlatbuffer(f->custom_metadata());
  return out;
}

// ---------------------------------------------------------------------------
// Writing

namespace {

using FieldOffset = fb::Offset<fbs::Field>;
using KvOffset = fb::Offset<KeyValueVector>;

KvOffset MetadataToFlatbuffer(fb::FlatBufferBuilder* fbb, const KeyValueMetadata* md) {
  if (md == nullptr) return 0;
  std::vector<fb::Offset<fbs::KeyValue>> kv;
  kv.reserve(md->size());
  for (size_t i = 0; i < md->size(); ++i) {
    auto k = fbb->CreateString(md->key(i));
    auto v = fbb->CreateString(md->value(i));
    kv.push_back(fbs::CreateKeyValue(*fbb, k, v));
  }
  return fbb->CreateVector(kv);
}

fb::Offset<fbs::Int> IntToFlatbuffer(fb::FlatBufferBuilder* fbb, TypeId id) {
  return fbs::CreateInt(*fbb, BitWidth(id), IsSignedInteger(id));
}

class SchemaWriter {
 public:
  SchemaWriter(fb::FlatBufferBuilder* fbb, const DictionaryMemo& ids, const IpcWriteOptions& o)
      : fbb_(fbb), ids_(ids), options_(o) {}

  Result<fb::Offset<fbs::Schema>> Write(const Schema& schema) {
    std::vector<FieldOffset> fields;
    FieldPath path;
    for (int i = 0; i < schema.num_fields(); ++i) {
      path.assign(1, i);
      ALKAID_ASSIGN_OR_RAISE(auto f, WriteField(*schema.field(i), &path, "", 1));
      fields.push_back(f);
    }
    auto fv = fbb_->CreateVector(fields);
    auto md = MetadataToFlatbuffer(fbb_, schema.metadata().get());
    return fbs::CreateSchema(*fbb_, fbs::Endianness::Little, fv, md);
  }

 private:
  Result<FieldOffset> WriteField(const Field& field, FieldPath* path, const std::string& parent,
                                 int depth) {
    const std::string dotted = parent.empty() ? field.name() : parent + "." + field.name();
    if (depth > options_.max_recursion_depth) {
      return Status::Invalid(Quoted(dotted), ": type nesting deeper than max_recursion_depth (",
                             options_.max_recursion_depth, ")");
    }
    TypePtr type = field.type();
    std::shared_ptr<KeyValueMetadata> metadata;
    if (field.metadata() != nullptr) {
      metadata = std::make_shared<KeyValueMetadata>(field.metadata()->pairs());
    }
    if (type->id() == TypeId::kExtension) {
      const auto& ext = static_cast<const ExtensionType&>(*type);
      if (metadata == nullptr) metadata = std::make_shared<KeyValueMetadata>();
      metadata->Set(ExtensionNameKey(options_.extension_metadata_namespace), ext.extension_name());
      metadata->Set(ExtensionMetadataKey(options_.extension_metadata_namespace), ext.serialized());
      type = ext.storage_type();
      if (type->id() == TypeId::kExtension) {
        return Status::NotImplemented(Quoted(dotted),
                                      ": an extension type stored as another extension type");
      }
    }
    fb::Offset<fbs::DictionaryEncoding> dict_offset = 0;
    if (type->id() == TypeId::kDictionary) {
      const auto& dict = static_cast<const DictionaryType&>(*type);
      auto id = ids_.GetId(*path);
      if (!id.ok()) return id.status().WithContext(Quoted(dotted));
      auto index = IntToFlatbuffer(fbb_, dict.index_type()->id());
      dict_offset = fbs::CreateDictionaryEncoding(*fbb_, *id, index, dict.ordered(),
                                                  fbs::DictionaryKind::DenseArray);
      type = dict.value_type();
      if (type->id() == TypeId::kExtension || type->id() == TypeId::kDictionary) {
        return Status::NotImplemented(Quoted(dotted), ": dictionary values of type ",
                                      type->ToString(), " cannot be written");
      }
    }
    std::vector<FieldOffset> children;
    for (int i = 0; i < type->num_fields(); ++i) {
      path->push_back(i);
      auto child = WriteField(*type->field(i), path, dotted, depth + 1);
      path->pop_back();
      ALKAID_RETURN_NOT_OK(child);
      children.push_back(*child);
    }
    ALKAID_ASSIGN_OR_RAISE(auto type_pair, WriteType(*type, dotted));
    auto name = fbb_->CreateString(field.name());
    auto cv = fbb_->CreateVector(children);
    auto md = MetadataToFlatbuffer(fbb_, metadata.get());
    return fbs::CreateField(*fbb_, name, field.nullable(), type_pair.first, type_pair.second,
                            dict_offset, cv, md);
  }

  Result<std::pair<fbs::Type, fb::Offset<void>>> WriteType(const DataType& type,
                                                           const std::string& dotted) {
    fb::FlatBufferBuilder& b = *fbb_;
    auto u = [](auto offset) { return offset.Union(); };
    switch (type.id()) {
      case TypeId::kNull:
        return std::make_pair(fbs::Type::Null, u(fbs::CreateNull(b)));
      case TypeId::kBool:
        return std::make_pair(fbs::Type::Bool, u(fbs::CreateBool(b)));
      case TypeId::kInt8:
      case TypeId::kInt16:
      case TypeId::kInt32:
      case TypeId::kInt64:
      case TypeId::kUInt8:
      case TypeId::kUInt16:
      case TypeId::kUInt32:
      case TypeId::kUInt64:
        return std::make_pair(fbs::Type::Int, u(IntToFlatbuffer(fbb_, type.id())));
      case TypeId::kHalfFloat:
        return std::make_pair(fbs::Type::FloatingPoint,
                              u(fbs::CreateFloatingPoint(b, fbs::Precision::HALF)));
      case TypeId::kFloat:
        return std::make_pair(fbs::Type::FloatingPoint,
                              u(fbs::CreateFloatingPoint(b, fbs::Precision::SINGLE)));
      case TypeId::kDouble:
        return std::make_pair(fbs::Type::FloatingPoint,
                              u(fbs::CreateFloatingPoint(b, fbs::Precision::DOUBLE)));
      case TypeId::kDecimal32:
      case TypeId::kDecimal64:
      case TypeId::kDecimal128:
      case TypeId::kDecimal256: {
        const auto& t = static_cast<const DecimalType&>(type);
        return std::make_pair(fbs::Type::Decimal,
                              u(fbs::CreateDecimal(b, t.precision(), t.scale(), t.bit_width())));
      }
      case TypeId::kDate32:
        return std::make_pair(fbs::Type::Date, u(fbs::CreateDate(b, fbs::DateUnit::DAY)));
      case TypeId::kDate64:
        return std::make_pair(fbs::Type::Date, u(fbs::CreateDate(b, fbs::DateUnit::MILLISECOND)));
      case TypeId::kTime32:
      case TypeId::kTime64: {
        const auto& t = static_cast<const TimeType&>(type);
        return std::make_pair(fbs::Type::Time,
                              u(fbs::CreateTime(b, UnitToFlatbuffer(t.unit()), t.bit_width())));
      }
      case TypeId::kTimestamp: {
        const auto& t = static_cast<const TimestampType&>(type);
        fb::Offset<fb::String> tz = 0;
        if (!t.timezone().empty()) tz = b.CreateString(t.timezone());
        return std::make_pair(fbs::Type::Timestamp,
                              u(fbs::CreateTimestamp(b, UnitToFlatbuffer(t.unit()), tz)));
      }
      case TypeId::kDuration: {
        const auto& t = static_cast<const DurationType&>(type);
        return std::make_pair(fbs::Type::Duration,
                              u(fbs::CreateDuration(b, UnitToFlatbuffer(t.unit()))));
      }
      case TypeId::kIntervalMonths:
        return std::make_pair(fbs::Type::Interval,
                              u(fbs::CreateInterval(b, fbs::IntervalUnit::YEAR_MONTH)));
      case TypeId::kIntervalDayTime:
        return std::make_pair(fbs::Type::Interval,
                              u(fbs::CreateInterval(b, fbs::IntervalUnit::DAY_TIME)));
      case TypeId::kIntervalMonthDayNano:
        return std::make_pair(fbs::Type::Interval,
                              u(fbs::CreateInterval(b, fbs::IntervalUnit::MONTH_DAY_NANO)));
      case TypeId::kFixedSizeBinary: {
        const auto& t = static_cast<const FixedSizeBinaryType&>(type);
        return std::make_pair(fbs::Type::FixedSizeBinary,
                              u(fbs::CreateFixedSizeBinary(b, t.byte_width())));
      }
      case TypeId::kBinary:
        return std::make_pair(fbs::Type::Binary, u(fbs::CreateBinary(b)));
      case TypeId::kString:
        return std::make_pair(fbs::Type::Utf8, u(fbs::CreateUtf8(b)));
      case TypeId::kLargeBinary:
        return std::make_pair(fbs::Type::LargeBinary, u(fbs::CreateLargeBinary(b)));
      case TypeId::kLargeString:
        return std::make_pair(fbs::Type::LargeUtf8, u(fbs::CreateLargeUtf8(b)));
      case TypeId::kBinaryView:
        return std::make_pair(fbs::Type::BinaryView, u(fbs::CreateBinaryView(b)));
      case TypeId::kStringView:
        return std::make_pair(fbs::Type::Utf8View, u(fbs::CreateUtf8View(b)));
      case TypeId::kList:
        return std::make_pair(fbs::Type::List, u(fbs::CreateList(b)));
      case TypeId::kLargeList:
        return std::make_pair(fbs::Type::LargeList, u(fbs::CreateLargeList(b)));
      case TypeId::kListView:
        return std::make_pair(fbs::Type::ListView, u(fbs::CreateListView(b)));
      case TypeId::kLargeListView:
        return std::make_pair(fbs::Type::LargeListView, u(fbs::CreateLargeListView(b)));
      case TypeId::kFixedSizeList: {
        const auto& t = static_cast<const FixedSizeListType&>(type);
        return std::make_pair(fbs::Type::FixedSizeList,
                              u(fbs::CreateFixedSizeList(b, t.list_size())));
      }
      case TypeId::kMap: {
        const auto& t = static_cast<const MapType&>(type);
        return std::make_pair(fbs::Type::Map, u(fbs::CreateMap(b, t.keys_sorted())));
      }
      case TypeId::kStruct:
        return std::make_pair(fbs::Type::Struct_, u(fbs::CreateStruct_(b)));
      case TypeId::kSparseUnion:
      case TypeId::kDenseUnion: {
        const auto& t = static_cast<const UnionType&>(type);
        std::vector<int32_t> codes(t.type_codes().begin(), t.type_codes().end());
        auto cv = b.CreateVector(codes);
        return std::make_pair(
            fbs::Type::Union,
            u(fbs::CreateUnion(
                b, t.mode() == UnionMode::kSparse ? fbs::UnionMode::Sparse : fbs::UnionMode::Dense,
                cv)));
      }
      case TypeId::kRunEndEncoded:
        return std::make_pair(fbs::Type::RunEndEncoded, u(fbs::CreateRunEndEncoded(b)));
      case TypeId::kDictionary:
      case TypeId::kExtension:
        break;
    }
    return Status::NotImplemented(Quoted(dotted), ": cannot write type ", type.ToString());
  }

  fb::FlatBufferBuilder* fbb_;
  const DictionaryMemo& ids_;
  const IpcWriteOptions& options_;
};

Result<std::shared_ptr<Buffer>> FinishBuffer(fb::FlatBufferBuilder* fbb, MemoryPool* pool) {
  const int64_t size = fbb->GetSize();
  if (size > kMaxMetadataSize) {
    return Status::CapacityError("metadata flatbuffer of ", size,
                                 " bytes exceeds the 2^31-1 limit");
  }
  return Buffer::CopyOf(std::string_view(reinterpret_cast<const char*>(fbb->GetBufferPointer()),
                                         static_cast<size_t>(size)),
                        pool);
}

// Rough upper bound of a record batch's metadata size, checked before
// building so that an oversize batch is refused cleanly (Flatbuffers itself
// asserts past 2 GiB).
Status CheckRecordBatchMetaSize(const RecordBatchMeta& batch) {
  const double estimate = 1024.0 + 16.0 * static_cast<double>(batch.nodes.size()) +
                          16.0 * static_cast<double>(batch.buffers.size()) +
                          8.0 * static_cast<double>(batch.variadic_counts.size());
  if (estimate > static_cast<double>(kMaxMetadataSize)) {
    return Status::CapacityError("record batch metadata for ", batch.nodes.size(), " nodes and ",
                                 batch.buffers.size(),
                                 " buffers would exceed the 2^31-1 byte metadata limit");
  }
  return Status::OK();
}

fb::Offset<fbs::RecordBatch> RecordBatchToFlatbuffer(fb::FlatBufferBuilder* fbb,
                                                     const RecordBatchMeta& batch) {
  std::vector<fbs::FieldNode> nodes;
  nodes.reserve(batch.nodes.size());
  for (const auto& n : batch.nodes) nodes.emplace_back(n.length, n.null_count);
  std::vector<fbs::Buffer> buffers;
  buffers.reserve(batch.buffers.size());
  for (const auto& b : batch.buffers) buffers.emplace_back(b.offset, b.length);
  auto nv = fbb->CreateVectorOfStructs(nodes);
  auto bv = fbb->CreateVectorOfStructs(buffers);
  fb::Offset<fbs::BodyCompression> comp = 0;
  if (batch.compression != CompressionType::kNone) {
    comp = fbs::CreateBodyCompression(*fbb,
                                      batch.compression == CompressionType::kLz4Frame
                                          ? fbs::CompressionType::LZ4_FRAME
                                          : fbs::CompressionType::ZSTD,
                                      fbs::BodyCompressionMethod::BUFFER);
  }
  fb::Offset<fb::Vector<int64_t>> variadic = 0;
  if (!batch.variadic_counts.empty()) variadic = fbb->CreateVector(batch.variadic_counts);
  return fbs::CreateRecordBatch(*fbb, batch.length, nv, bv, comp, variadic);
}

}  // namespace

Result<std::shared_ptr<Buffer>> WriteSchemaMessage(const Schema& schema, const DictionaryMemo& ids,
                                                   const IpcWriteOptions& options) {
  fb::FlatBufferBuilder fbb(1024);
  SchemaWriter writer(&fbb, ids, options);
  ALKAID_ASSIGN_OR_RAISE(auto s, writer.Write(schema));
  auto m =
      fbs::CreateMessage(fbb, fbs::MetadataVersion::V5, fbs::MessageHeader::Schema, s.Union(), 0);
  fbb.Finish(m);
  return FinishBuffer(&fbb, options.pool);
}

Result<std::shared_ptr<Buffer>> WriteRecordBatchMessage(const RecordBatchMeta& batch,
                                                        int64_t body_length,
                                                        const IpcWriteOptions& options,
                                                        const MetadataPtr& custom_metadata,
                                                        bool store_defaults) {
  ALKAID_RETURN_NOT_OK(CheckRecordBatchMetaSize(batch));
  fb::FlatBufferBuilder fbb(256 + 32 * batch.nodes.size());
  fbb.ForceDefaults(store_defaults);
  auto rb = RecordBatchToFlatbuffer(&fbb, batch);
  auto md = MetadataToFlatbuffer(&fbb, custom_metadata.get());
  auto m = fbs::CreateMessage(fbb, fbs::MetadataVersion::V5, fbs::MessageHeader::RecordBatch,
                              rb.Union(), body_length, md);
  fbb.Finish(m);
  return FinishBuffer(&fbb, options.pool);
}

Result<std::shared_ptr<Buffer>> WriteDictionaryMessage(int64_t id, bool is_delta,
                                                       const RecordBatchMeta& batch,
                                                       int64_t body_length,
                                                       const IpcWriteOptions& options) {
  ALKAID_RETURN_NOT_OK(CheckRecordBatchMetaSize(batch));
  fb::FlatBufferBuilder fbb(256 + 32 * batch.nodes.size());
  auto rb = RecordBatchToFlatbuffer(&fbb, batch);
  auto d = fbs::CreateDictionaryBatch(fbb, id, rb, is_delta);
  auto m = fbs::CreateMessage(fbb, fbs::MetadataVersion::V5, fbs::MessageHeader::DictionaryBatch,
                              d.Union(), body_length);
  fbb.Finish(m);
  return FinishBuffer(&fbb, options.pool);
}

Result<std::shared_ptr<Buffer>> WriteFooter(const Schema& schema, const DictionaryMemo& ids,
                                            const std::vector<BlockMeta>& dictionaries,
                                            const std::vector<BlockMeta>& record_batches,
                                            const MetadataPtr& custom_metadata,
                                            const IpcWriteOptions& options) {
  fb::FlatBufferBuilder fbb(1024);
  SchemaWriter writer(&fbb, ids, options);
  ALKAID_ASSIGN_OR_RAISE(auto s, writer.Write(schema));
  auto blocks = [&](const std::vector<BlockMeta>& v) {
    std::vector<fbs::Block> out;
    out.reserve(v.size());
    for (const auto& b : v) out.emplace_back(b.offset, b.metadata_length, b.body_length);
    return fbb.CreateVectorOfStructs(out);
  };
  auto dv = blocks(dictionaries);
  auto rv = blocks(record_batches);
  auto md = MetadataToFlatbuffer(&fbb, custom_metadata.get());
  auto footer = fbs::CreateFooter(fbb, fbs::MetadataVersion::V5, s, dv, rv, md);
  fbb.Finish(footer);
  return FinishBuffer(&fbb, options.pool);
}

}  // namespace alkaid::format::ipc::internal
