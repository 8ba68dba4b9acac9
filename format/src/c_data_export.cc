// Export to the Arrow C Data Interface (c_data.h): Alkaid is the producer.
//
// Every ArrowSchema/ArrowArray node gets its own private data, allocated
// once, holding what that node and its descendants point to: the strings of
// a schema node, and for an array node a shared reference to its ArrayData
// (which keeps its buffers alive), the buffer pointer table and the child
// structs. A child therefore owns its memory on its own and can be moved out
// of its parent; a parent's release releases only the children still there
// (release != NULL).

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "alkaid/format/c_data.h"
#include "c_data_internal.h"

namespace alkaid::format {
namespace {

using internal::kCDataMaxDepth;
using internal::kExtensionMetadataKey;
using internal::kExtensionNameKey;
using internal::kZeroBytes;

char UnitChar(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kSecond:
      return 's';
    case TimeUnit::kMilli:
      return 'm';
    case TimeUnit::kMicro:
      return 'u';
    case TimeUnit::kNano:
      return 'n';
  }
  return '?';
}

// The format string of a type that is neither an extension nor a dictionary.
Result<std::string> FormatOf(const DataType& type) {
  switch (type.id()) {
    case TypeId::kNull:
      return std::string("n");
    case TypeId::kBool:
      return std::string("b");
    case TypeId::kInt8:
      return std::string("c");
    case TypeId::kUInt8:
      return std::string("C");
    case TypeId::kInt16:
      return std::string("s");
    case TypeId::kUInt16:
      return std::string("S");
    case TypeId::kInt32:
      return std::string("i");
    case TypeId::kUInt32:
      return std::string("I");
    case TypeId::kInt64:
      return std::string("l");
    case TypeId::kUInt64:
      return std::string("L");
    case TypeId::kHalfFloat:
      return std::string("e");
    case TypeId::kFloat:
      return std::string("f");
    case TypeId::kDouble:
      return std::string("g");
    case TypeId::kDecimal32:
    case TypeId::kDecimal64:
    case TypeId::kDecimal128:
    case TypeId::kDecimal256: {
      const auto& d = static_cast<const DecimalType&>(type);
      std::string f = "d:" + std::to_string(d.precision()) + "," + std::to_string(d.scale());
      // 128 bits is the default width; writing it out too would be valid,
      // leaving it out is what every consumer understands.
      if (d.bit_width() != 128) f += "," + std::to_string(d.bit_width());
      return f;
    }
    case TypeId::kDate32:
      return std::string("tdD");
    case TypeId::kDate64:
      return std::string("tdm");
    case TypeId::kTime32:
    case TypeId::kTime64:
      return std::string("tt") + UnitChar(static_cast<const TimeType&>(type).unit());
    case TypeId::kTimestamp: {
      const auto& ts = static_cast<const TimestampType&>(type);
      return std::string("ts") + UnitChar(ts.unit()) + ":" + ts.timezone();
    }
    case TypeId::kDuration:
      return std::string("tD") + UnitChar(static_cast<const DurationType&>(type).unit());
    case TypeId::kIntervalMonths:
      return std::string("tiM");
    case TypeId::kIntervalDayTime:
      return std::string("tiD");
    case TypeId::kIntervalMonthDayNano:
      return std::string("tin");
    case TypeId::kFixedSizeBinary:
      return "w:" + std::to_string(static_cast<const FixedSizeBinaryType&>(type).byte_width());
    case TypeId::kBinary:
      return std::string("z");
    case TypeId::kString:
      return std::string("u");
    case TypeId::kLargeBinary:
      return std::string("Z");
    case TypeId::kLargeString:
      return std::string("U");
    case TypeId::kBinaryView:
      return std::string("vz");
    case TypeId::kStringView:
      return std::string("vu");
    case TypeId::kFixedSizeList:
      return "+w:" + std::to_string(static_cast<const FixedSizeListType&>(type).list_size());
    case TypeId::kList:
      return std::string("+l");
    case TypeId::kLargeList:
      return std::string("+L");
    case TypeId::kListView:
      return std::string("+vl");
    case TypeId::kLargeListView:
      return std::string("+vL");
    case TypeId::kStruct:
      return std::string("+s");
    case TypeId::kMap:
      return std::string("+m");
    case TypeId::kSparseUnion:
    case TypeId::kDenseUnion: {
      const auto& u = static_cast<const UnionType&>(type);
      std::string f = u.mode() == UnionMode::kSparse ? "+us:" : "+ud:";
      for (size_t i = 0; i < u.type_codes().size(); ++i) {
        if (i > 0) f += ",";
        f += std::to_string(u.type_codes()[i]);
      }
      return f;
    }
    case TypeId::kRunEndEncoded:
      return std::string("+r");
    case TypeId::kDictionary:
    case TypeId::kExtension:
      break;
  }
  return Status::Invalid("type ", type.ToString(), " has no C data format string here");
}

// The interface's metadata encoding: int32 pair count, then per pair int32
// key length, key bytes, int32 value length, value bytes (native endian).
Result<std::string> EncodeMetadata(const KeyValueMetadata& metadata) {
  std::string out;
  auto put_int = [&out](size_t n) -> Status {
    if (n > static_cast<size_t>(INT32_MAX)) {
      return Status::CapacityError("metadata entry of ", n, " bytes exceeds the int32 limit");
    }
    const auto v = static_cast<int32_t>(n);
    char bytes[sizeof(v)];
    std::memcpy(bytes, &v, sizeof(v));
    out.append(bytes, sizeof(v));
    return Status::OK();
  };
  ALKAID_RETURN_NOT_OK(put_int(metadata.size()));
  for (const auto& [key, value] : metadata.pairs()) {
    ALKAID_RETURN_NOT_OK(put_int(key.size()));
    out += key;
    ALKAID_RETURN_NOT_OK(put_int(value.size()));
    out += value;
  }
  return out;
}

// --- Schemas ---------------------------------------------------------------

struct ExportedSchema {
  std::string format;
  std::string name;
  std::string metadata;  // encoded; empty means none
  std::vector<ArrowSchema> children;
  std::vector<ArrowSchema*> child_pointers;
  ArrowSchema dictionary{};
};

void ReleaseExportedSchema(ArrowSchema* schema) {
  if (schema == nullptr || schema->release == nullptr) return;
  auto* priv = static_cast<ExportedSchema*>(schema->private_data);
  for (ArrowSchema& child : priv->children) {
    if (child.release != nullptr) child.release(&child);
  }
  if (priv->dictionary.release != nullptr) priv->dictionary.release(&priv->dictionary);
  delete priv;
  schema->release = nullptr;
  schema->private_data = nullptr;
}

// Fills `out` (a struct with release == NULL) for a field of `type`. On
// error `out` stays released and nothing leaks.
Status FillSchema(const std::string& name, const DataType& type, bool nullable,
                  const KeyValueMetadata* field_metadata, ArrowSchema* out, int depth) {
  if (depth > kCDataMaxDepth) {
    return Status::Invalid("type nests deeper than ", kCDataMaxDepth, " levels");
  }
  auto* priv = new ExportedSchema();
  ArrowSchema node{};
  node.release = &ReleaseExportedSchema;
  node.private_data = priv;
  // From here on, returning an error releases `node` (and what it holds).
  auto fail = [&node](Status st) {
    node.release(&node);
    return st;
  };

  priv->name = name;
  const DataType* t = &type;
  std::shared_ptr<KeyValueMetadata> merged;
  if (t->id() == TypeId::kExtension) {
    const auto& ext = static_cast<const ExtensionType&>(*t);
    merged = field_metadata != nullptr ? std::make_shared<KeyValueMetadata>(*field_metadata)
                                       : std::make_shared<KeyValueMetadata>();
    merged->Set(kExtensionNameKey, ext.extension_name());
    merged->Set(kExtensionMetadataKey, ext.serialized());
    t = ext.storage_type().get();
    if (t->id() == TypeId::kExtension) {
      return fail(Status::NotImplemented("field '", name,
                                         "': an extension type stored as "
                                         "another extension type"));
    }
    field_metadata = merged.get();
  }
  int64_t flags = nullable ? ARROW_FLAG_NULLABLE : 0;
  if (t->id() == TypeId::kDictionary) {
    const auto& dict = static_cast<const DictionaryType&>(*t);
    if (dict.ordered()) flags |= ARROW_FLAG_DICTIONARY_ORDERED;
    Status st = FillSchema("", *dict.value_type(), true, nullptr, &priv->dictionary, depth + 1);
    if (!st.ok()) return fail(st.WithContext("dictionary of field '" + name + "'"));
    t = dict.index_type().get();
  }
  if (t->id() == TypeId::kMap && static_cast<const MapType&>(*t).keys_sorted()) {
    flags |= ARROW_FLAG_MAP_KEYS_SORTED;
  }
  auto format = FormatOf(*t);
  if (!format.ok()) return fail(format.status());
  priv->format = std::move(*format);
  if (field_metadata != nullptr && !field_metadata->empty()) {
    auto encoded = EncodeMetadata(*field_metadata);
    if (!encoded.ok()) return fail(encoded.status());
    priv->metadata = std::move(*encoded);
  }

  const size_t n = t->fields().size();
  priv->children.resize(n);  // zeroed: release == NULL until filled
  priv->child_pointers.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Field& f = *t->fields()[i];
    priv->child_pointers[i] = &priv->children[i];
    Status st = FillSchema(f.name(), *f.type(), f.nullable(), f.metadata().get(),
                           &priv->children[i], depth + 1);
    if (!st.ok()) return fail(st);
  }

  node.format = priv->format.c_str();
  node.name = priv->name.c_str();
  node.metadata = priv->metadata.empty() ? nullptr : priv->metadata.data();
  node.flags = flags;
  node.n_children = static_cast<int64_t>(n);
  node.children = n == 0 ? nullptr : priv->child_pointers.data();
  node.dictionary = priv->dictionary.release != nullptr ? &priv->dictionary : nullptr;
  *out = node;
  return Status::OK();
}

// --- Arrays ----------------------------------------------------------------

struct ExportedArray {
  ArrayDataPtr data;  // keeps this node's buffers (and its subtree) alive
  std::vector<const void*> buffers;
  std::vector<int64_t> variadic_sizes;  // binary views: the extra last buffer
  std::vector<ArrowArray> children;
  std::vector<ArrowArray*> child_pointers;
  ArrowArray dictionary{};
};

void ReleaseExportedArray(ArrowArray* array) {
  if (array == nullptr || array->release == nullptr) return;
  auto* priv = static_cast<ExportedArray*>(array->private_data);
  for (ArrowArray& child : priv->children) {
    if (child.release != nullptr) child.release(&child);
  }
  if (priv->dictionary.release != nullptr) priv->dictionary.release(&priv->dictionary);
  delete priv;
  array->release = nullptr;
  array->private_data = nullptr;
}

Status FillArray(const ArrayDataPtr& data, ArrowArray* out, int depth) {
  if (data == nullptr || data->type == nullptr) {
    return Status::Invalid("array data or type is null");
  }
  if (depth > kCDataMaxDepth) {
    return Status::Invalid("array nests deeper than ", kCDataMaxDepth, " levels");
  }
  const DataType* t = &StorageType(*data->type);
  const DataType* dict_values = nullptr;
  if (t->id() == TypeId::kDictionary) {
    if (data->dictionary == nullptr) {
      return Status::Invalid("dictionary array of type ", data->type->ToString(),
                             " has no dictionary attached");
    }
    dict_values = static_cast<const DictionaryType&>(*t).value_type().get();
  }
  const DataTypeLayout layout = t->layout();
  const size_t n_children = static_cast<size_t>(t->num_fields());
  if (data->child_data.size() != n_children) {
    return Status::Invalid("array of type ", data->type->ToString(), " has ",
                           data->child_data.size(), " children, expected ", n_children);
  }

  auto* priv = new ExportedArray();
  ArrowArray node{};
  node.release = &ReleaseExportedArray;
  node.private_data = priv;
  auto fail = [&node](Status st) {
    node.release(&node);
    return st;
  };
  priv->data = data;

  int64_t null_count = data->null_count;
  if (t->id() == TypeId::kNull) {
    null_count = data->length;  // the interface has no buffer for nulls
  } else {
    const size_t expected = layout.buffers.size();
    const size_t actual = data->buffers.size();
    if (layout.variadic ? actual < expected : actual != expected) {
      return fail(Status::Invalid("array of type ", data->type->ToString(), " has ", actual,
                                  " buffers, expected ", layout.variadic ? "at least " : "",
                                  expected));
    }
    priv->buffers.reserve(actual + (layout.variadic ? 1 : 0));
    for (size_t i = 0; i < actual; ++i) {
      const Buffer* b = data->buffers[i].get();
      const bool validity = i == 0 && layout.has_validity;
      if (b != nullptr && b->data() != nullptr) {
        priv->buffers.push_back(b->data());
      } else {
        // Consumers may dereference any data buffer pointer: give an empty
        // one a real (zeroed) address. A missing bitmap stays NULL.
        priv->buffers.push_back(validity ? nullptr : kZeroBytes);
      }
    }
    if (layout.variadic) {
      priv->variadic_sizes.reserve(actual - expected);
      for (size_t i = expected; i < actual; ++i) {
        const Buffer* b = data->buffers[i].get();
        priv->variadic_sizes.push_back(b == nullptr ? 0 : b->size());
      }
      priv->buffers.push_back(priv->variadic_sizes.empty() ? static_cast<const void*>(kZeroBytes)
                                                           : priv->variadic_sizes.data());
    }
    // Unions and run-end encoded arrays carry no nulls of their own; an
    // absent bitmap means none.
    if (!layout.has_validity || data->buffers[0] == nullptr) null_count = 0;
  }

  priv->children.resize(n_children);
  priv->child_pointers.resize(n_children);
  for (size_t i = 0; i < n_children; ++i) {
    priv->child_pointers[i] = &priv->children[i];
    Status st = FillArray(data->child_data[i], &priv->children[i], depth + 1);
    if (!st.ok()) return fail(st.WithContext("child " + std::to_string(i)));
  }
  if (dict_values != nullptr) {
    Status st = FillArray(data->dictionary, &priv->dictionary, depth + 1);
    if (!st.ok()) return fail(st.WithContext("dictionary"));
  }

  node.length = data->length;
  node.null_count = null_count;
  node.offset = data->offset;
  node.n_buffers = static_cast<int64_t>(priv->buffers.size());
  node.n_children = static_cast<int64_t>(n_children);
  node.buffers = priv->buffers.empty() ? nullptr : priv->buffers.data();
  node.children = n_children == 0 ? nullptr : priv->child_pointers.data();
  node.dictionary = dict_values != nullptr ? &priv->dictionary : nullptr;
  *out = node;
  return Status::OK();
}

}  // namespace

Status ExportType(const DataType& type, ArrowSchema* out) {
  if (out == nullptr) return Status::Invalid("ExportType: out is null");
  return FillSchema("", type, /*nullable=*/true, nullptr, out, 0);
}

Status ExportField(const Field& field, ArrowSchema* out) {
  if (out == nullptr) return Status::Invalid("ExportField: out is null");
  if (field.type() == nullptr) return Status::Invalid("field '", field.name(), "' has no type");
  return FillSchema(field.name(), *field.type(), field.nullable(), field.metadata().get(), out, 0);
}

Status ExportSchema(const Schema& schema, ArrowSchema* out) {
  if (out == nullptr) return Status::Invalid("ExportSchema: out is null");
  for (const FieldPtr& f : schema.fields()) {
    if (f == nullptr || f->type() == nullptr) return Status::Invalid("schema has a null field");
  }
  const StructType as_struct(schema.fields());
  return FillSchema("", as_struct, /*nullable=*/false, schema.metadata().get(), out, 0);
}

Status ExportArray(const ArrayDataPtr& data, ArrowArray* out, ArrowSchema* out_schema) {
  if (out == nullptr) return Status::Invalid("ExportArray: out is null");
  ArrowArray array{};
  ALKAID_RETURN_NOT_OK(FillArray(data, &array, 0));
  if (out_schema != nullptr) {
    Status st = ExportType(*data->type, out_schema);
    if (!st.ok()) {
      array.release(&array);
      return st;
    }
  }
  *out = array;
  return Status::OK();
}

Status ExportArray(const Array& array, ArrowArray* out, ArrowSchema* out_schema) {
  return ExportArray(array.data(), out, out_schema);
}

Status ExportRecordBatch(const RecordBatch& batch, ArrowArray* out, ArrowSchema* out_schema) {
  if (out == nullptr) return Status::Invalid("ExportRecordBatch: out is null");
  const size_t n = batch.columns().size();
  auto* priv = new ExportedArray();
  ArrowArray node{};
  node.release = &ReleaseExportedArray;
  node.private_data = priv;
  priv->buffers.push_back(nullptr);  // the struct's validity: none
  priv->children.resize(n);
  priv->child_pointers.resize(n);
  for (size_t i = 0; i < n; ++i) {
    priv->child_pointers[i] = &priv->children[i];
    Status st = FillArray(batch.columns()[i], &priv->children[i], 1);
    if (!st.ok()) {
      node.release(&node);
      return st.WithContext("column " + std::to_string(i));
    }
  }
  node.length = batch.num_rows();
  node.null_count = 0;
  node.offset = 0;
  node.n_buffers = 1;
  node.n_children = static_cast<int64_t>(n);
  node.buffers = priv->buffers.data();
  node.children = n == 0 ? nullptr : priv->child_pointers.data();
  if (out_schema != nullptr) {
    Status st = ExportSchema(*batch.schema(), out_schema);
    if (!st.ok()) {
      node.release(&node);
      return st;
    }
  }
  *out = node;
  return Status::OK();
}

}  // namespace alkaid::format
