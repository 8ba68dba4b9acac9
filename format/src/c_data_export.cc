// Export to the Arrow C Data Interface (c_data.h): Alkaid is the producer.
//
// Every ArrowSchema node gets its own private data, holding its strings and
// children. An exported array is one block for the whole tree (see
// "Arrays" below). Either way a child can be moved out of its parent; a
// parent's release releases only the children still there (release !=
// NULL).

#include <atomic>
#include <cstddef>
#include <cstring>
#include <functional>
#include <new>
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
//
// One export is one block: a header, the ArrowArray nodes, their buffer and
// child pointer tables, the variadic sizes of binary views, and shared
// references to the exported data (the batch's columns, or the array). The
// tree is measured and checked first, then the block is allocated once and
// filled: an export costs one allocation, whatever its shape.
//
// Every node's private_data is the block, whose count starts at the number
// of nodes. A node's release releases the children and dictionary still
// there (release != NULL) and marks them and itself released, then takes
// them all off the count at once; the last one frees the block. So a child
// moved out of its parent (the interface allows it) keeps the block, and
// with it the data, alive until it is released itself.
//
// A recycled batch's block is not freed but parked in the batch's graph
// (internal::ExportSlot) and filled again by the graph's next export: the
// nodes, tables and their links stay as laid out, and only the buffer
// addresses (from `refills`), the release callbacks and the hold change.

struct ExportBlock {
  // Where a buffer table entry is read from at each export of a parked block.
  struct Refill {
    const void** entry;
    const std::shared_ptr<Buffer>* from;
    const void* if_empty;
  };

  std::atomic<int64_t> live_nodes{0};
  std::function<void()> on_release;  // the top-level node's, after its release
  // Keep the exported data alive: the batch itself when the exporter gave
  // its pointer (releasing the export is then dropping a batch reference),
  // else the columns (one per owner).
  RecordBatchPtr batch;
  size_t num_holds = 0;
  ArrayDataPtr* holds = nullptr;
  ArrowArray* nodes = nullptr;
  size_t num_nodes = 0;
  // Parked blocks only: the slot, the roots the block was laid out for (each
  // export checks the batch's against them) and the refills.
  internal::ExportSlot* slot = nullptr;
  const ArrayData* first_root = nullptr;
  size_t num_roots = 0;
  Refill* refills = nullptr;
  size_t num_refills = 0;

  static void Free(ExportBlock* b) {
    for (size_t i = 0; i < b->num_holds; ++i) b->holds[i].~ArrayDataPtr();
    b->~ExportBlock();
    ::operator delete(static_cast<void*>(b));
  }

  // Every node released: free the block, or park it for the next export.
  static void Done(ExportBlock* b) {
    if (b->slot == nullptr) {
      Free(b);
      return;
    }
    // The hold goes last: dropping it may return the graph, and with it the
    // slot, to a decoder on another thread, and a holder of the batch may
    // export it again as soon as the slot is free.
    ArrayDataPtr hold = std::move(b->holds[0]);
    RecordBatchPtr batch = std::move(b->batch);
    // Release: the block's state is the next exporter's (acquire exchange).
    b->slot->busy.store(false, std::memory_order_release);
  }
};

void ReleaseExportedNode(ArrowArray* array);

// Marks `array` (a node of `block`) and the children and dictionary still
// attached released; returns how many of the block's nodes that was. A
// node moved out (its place has release == NULL) is skipped: it holds the
// block until it is released itself.
int64_t ReleaseTree(ArrowArray* array, ExportBlock* block) {
  int64_t count = 1;
  const auto attached = [block](ArrowArray* node) {
    return node->release == &ReleaseExportedNode && node->private_data == block;
  };
  for (int64_t i = 0; i < array->n_children; ++i) {
    ArrowArray* child = array->children[i];
    if (child->release == nullptr) continue;
    if (!attached(child)) {
      child->release(child);  // not ours: cannot happen, but honour the interface
    } else if (child->n_children == 0 && child->dictionary == nullptr) {
      child->release = nullptr;  // a leaf, the common case
      child->private_data = nullptr;
      ++count;
    } else {
      count += ReleaseTree(child, block);
    }
  }
  ArrowArray* dictionary = array->dictionary;
  if (dictionary != nullptr && dictionary->release != nullptr) {
    if (attached(dictionary)) {
      count += ReleaseTree(dictionary, block);
    } else {
      dictionary->release(dictionary);
    }
  }
  array->release = nullptr;
  array->private_data = nullptr;
  return count;
}

// Releases `array`, a node of a block (`top`: the top-level struct the
// caller was given, wherever it was moved).
void ReleaseNode(ArrowArray* array, bool top) {
  if (array == nullptr || array->release == nullptr) return;
  auto* block = static_cast<ExportBlock*>(array->private_data);
  std::function<void()> notice;
  if (top) notice = std::move(block->on_release);
  const int64_t released = ReleaseTree(array, block);
  // Acq_rel: the last release sees every other node's work on the block.
  if (block->live_nodes.fetch_sub(released, std::memory_order_acq_rel) == released) {
    ExportBlock::Done(block);
  }
  if (notice) notice();
}

void ReleaseExportedNode(ArrowArray* array) { ReleaseNode(array, false); }
void ReleaseExportedTop(ArrowArray* array) { ReleaseNode(array, true); }

// What a tree needs: counted by Measure, then laid out in one block.
struct ExportSizes {
  size_t nodes = 0;
  size_t buffers = 0;
  size_t child_pointers = 0;
  size_t variadic = 0;
  size_t dictionaries = 0;
};

// Checks `data` (a node at `depth`) and adds what it needs to `sizes`.
Status Measure(const ArrayData* data, int depth, ExportSizes* sizes) {
  if (data == nullptr || data->type == nullptr) {
    return Status::Invalid("array data or type is null");
  }
  if (depth > kCDataMaxDepth) {
    return Status::Invalid("array nests deeper than ", kCDataMaxDepth, " levels");
  }
  const DataType* t = &StorageType(*data->type);
  const bool dictionary = t->id() == TypeId::kDictionary;
  if (dictionary && data->dictionary == nullptr) {
    return Status::Invalid("dictionary array of type ", data->type->ToString(),
                           " has no dictionary attached");
  }
  const size_t n_children = static_cast<size_t>(t->num_fields());
  if (data->child_data.size() != n_children) {
    return Status::Invalid("array of type ", data->type->ToString(), " has ",
                           data->child_data.size(), " children, expected ", n_children);
  }
  ++sizes->nodes;
  if (t->id() != TypeId::kNull) {
    const DataTypeLayout& layout = t->layout();
    const size_t expected = layout.buffers.size();
    const size_t actual = data->buffers.size();
    if (layout.variadic ? actual < expected : actual != expected) {
      return Status::Invalid("array of type ", data->type->ToString(), " has ", actual,
                             " buffers, expected ", layout.variadic ? "at least " : "", expected);
    }
    sizes->buffers += actual + (layout.variadic ? 1 : 0);
    if (layout.variadic) sizes->variadic += actual - expected;
  }
  sizes->child_pointers += n_children;
  for (size_t i = 0; i < n_children; ++i) {
    Status st = Measure(data->child_data[i].get(), depth + 1, sizes);
    if (!st.ok()) return st.WithContext("child " + std::to_string(i));
  }
  if (dictionary) {
    ++sizes->dictionaries;
    Status st = Measure(data->dictionary.get(), depth + 1, sizes);
    if (!st.ok()) return st.WithContext("dictionary");
  }
  return Status::OK();
}

// Where Fill takes the next entries of each table from.
struct ExportCursor {
  ExportBlock* block;
  ArrowArray* next_node;
  const void** next_buffer;
  ArrowArray** next_child;
  int64_t* next_variadic;
  ExportBlock::Refill* next_refill;  // null: the block is not parked
};

// The null count an exported node says for `data` (of storage type `t`).
int64_t ExportedNullCount(const ArrayData& data, const DataType& t) {
  if (t.id() == TypeId::kNull) return data.length;  // the interface has no buffer for nulls
  // Unions and run-end encoded arrays carry no nulls of their own; an
  // absent bitmap means none.
  if (!t.layout().has_validity || data.buffers.empty() || data.buffers[0] == nullptr) return 0;
  return data.null_count;
}

// A parked node of a varying graph's batch (ExportSlot::varying) takes the
// numbers of the batch exported now; its children alike. (Parked trees have
// no dictionaries.)
void Renumber(const ArrayData& data, ArrowArray* out) {
  out->length = data.length;
  out->offset = data.offset;
  out->null_count = ExportedNullCount(data, StorageType(*data.type));
  for (int64_t i = 0; i < out->n_children; ++i) {
    Renumber(*data.child_data[static_cast<size_t>(i)], out->children[i]);
  }
}

// Fills `out` (a node of the block) for `data`, measured before.
void Fill(const ArrayData& data, ArrowArray* out, ExportCursor* c) {
  const DataType* t = &StorageType(*data.type);
  out->private_data = c->block;
  out->release = &ReleaseExportedNode;
  out->length = data.length;
  out->offset = data.offset;
  out->n_buffers = 0;
  out->buffers = nullptr;
  if (t->id() != TypeId::kNull) {
    const DataTypeLayout& layout = t->layout();
    const size_t expected = layout.buffers.size();
    const size_t actual = data.buffers.size();
    const void** table = c->next_buffer;
    for (size_t i = 0; i < actual; ++i) {
      // Consumers may dereference any data buffer pointer: give an empty
      // one a real (zeroed) address. A missing bitmap stays NULL.
      const void* if_empty = i == 0 && layout.has_validity ? nullptr : kZeroBytes;
      const Buffer* b = data.buffers[i].get();
      table[i] = b != nullptr && b->data() != nullptr ? b->data() : if_empty;
      // A parked block refills the buffers present: a recycled batch's
      // graph has the same ones present at every export.
      if (c->next_refill != nullptr && b != nullptr) {
        *c->next_refill++ = {&table[i], &data.buffers[i], if_empty};
      }
    }
    size_t n = actual;
    if (layout.variadic) {
      int64_t* sizes = c->next_variadic;
      for (size_t i = expected; i < actual; ++i) {
        const Buffer* b = data.buffers[i].get();
        sizes[i - expected] = b == nullptr ? 0 : b->size();
      }
      c->next_variadic += actual - expected;
      table[n++] = actual > expected ? static_cast<const void*>(sizes) : kZeroBytes;
    }
    c->next_buffer += n;
    out->n_buffers = static_cast<int64_t>(n);
    out->buffers = n == 0 ? nullptr : table;
  }
  out->null_count = ExportedNullCount(data, *t);
  const size_t n_children = data.child_data.size();
  out->n_children = static_cast<int64_t>(n_children);
  out->children = nullptr;
  if (n_children > 0) {
    ArrowArray** pointers = c->next_child;
    c->next_child += n_children;
    out->children = pointers;
    for (size_t i = 0; i < n_children; ++i) pointers[i] = c->next_node++;
    for (size_t i = 0; i < n_children; ++i) Fill(*data.child_data[i], pointers[i], c);
  }
  out->dictionary = nullptr;
  if (t->id() == TypeId::kDictionary) {
    out->dictionary = c->next_node++;
    Fill(*data.dictionary, out->dictionary, c);
  }
}

template <typename T>
size_t Aligned(size_t at) {
  return (at + alignof(T) - 1) / alignof(T) * alignof(T);
}

// Consecutive roots with one owner (the columns of a recycled batch share
// one count) need one hold between them: root `i` needs one of its own when
// it is the first or its owner differs from the one before.
bool NeedsHold(const ArrayDataPtr* roots, size_t i) {
  return i == 0 || roots[i].owner_before(roots[i - 1]) || roots[i - 1].owner_before(roots[i]);
}

size_t CountHolds(const ArrayDataPtr* roots, size_t n_roots) {
  size_t holds = 0;
  for (size_t i = 0; i < n_roots; ++i) holds += NeedsHold(roots, i) ? 1 : 0;
  return holds;
}

// Gives the caller the top-level struct: by value (it may be moved again);
// the block's copy stays as the place its children hang from, and counts as
// released once the caller's is.
void HandOut(ExportBlock* block, ArrowArray* out) {
  ArrowArray* root = block->nodes;
  *out = *root;
  out->release = &ReleaseExportedTop;
  root->release = nullptr;
}

// Exports the arrays `roots` as one tree: a struct node over them (`length`
// rows) when `as_struct`, else the single root. With `park`, a tree without
// dictionaries or variadic buffers whose roots share one owner is laid out
// to be parked there and filled again by later exports.
Status ExportTree(const ArrayDataPtr* roots, size_t n_roots, bool as_struct, int64_t length,
                  const RecordBatchPtr* owner, std::function<void()> on_release,
                  internal::ExportSlot* park, ArrowArray* out) {
  ExportSizes sizes;
  if (as_struct) {
    sizes.nodes = 1;
    sizes.buffers = 1;
    sizes.child_pointers = n_roots;
  }
  for (size_t i = 0; i < n_roots; ++i) {
    Status st = Measure(roots[i].get(), as_struct ? 1 : 0, &sizes);
    if (!st.ok()) return as_struct ? st.WithContext("column " + std::to_string(i)) : st;
  }
  const size_t num_holds = CountHolds(roots, n_roots);
  if (sizes.variadic > 0 || sizes.dictionaries > 0 || num_holds != 1) park = nullptr;
  size_t at = sizeof(ExportBlock);
  const size_t nodes_at = at = Aligned<ArrowArray>(at);
  at += sizes.nodes * sizeof(ArrowArray);
  const size_t buffers_at = at = Aligned<const void*>(at);
  at += sizes.buffers * sizeof(const void*);
  const size_t children_at = at = Aligned<ArrowArray*>(at);
  // NOLINTNEXTLINE(bugprone-sizeof-expression): a table of pointers to ArrowArray, as meant
  at += sizes.child_pointers * sizeof(ArrowArray*);
  const size_t variadic_at = at = Aligned<int64_t>(at);
  at += sizes.variadic * sizeof(int64_t);
  const size_t holds_at = at = Aligned<ArrayDataPtr>(at);
  at += num_holds * sizeof(ArrayDataPtr);
  const size_t refills_at = Aligned<ExportBlock::Refill>(at);
  if (park != nullptr) at = refills_at + sizes.buffers * sizeof(ExportBlock::Refill);
  void* memory = ::operator new(at, std::nothrow);
  if (memory == nullptr) return Status::OutOfMemory("exporting an array: ", at, " bytes");
  auto* bytes = static_cast<std::byte*>(memory);
  auto* block = new (memory) ExportBlock();
  block->on_release = std::move(on_release);
  block->nodes = reinterpret_cast<ArrowArray*>(bytes + nodes_at);
  block->num_nodes = sizes.nodes;
  block->holds = reinterpret_cast<ArrayDataPtr*>(bytes + holds_at);
  block->num_holds = num_holds;
  // With the batch's own pointer the block holds the batch; the places for
  // column holds are made all the same (empty), for a parked block's later
  // exports without it.
  if (owner != nullptr) block->batch = *owner;
  for (size_t i = 0, h = 0; i < n_roots; ++i) {
    if (NeedsHold(roots, i)) {
      new (&block->holds[h++]) ArrayDataPtr(owner != nullptr ? nullptr : roots[i]);
    }
  }
  block->live_nodes.store(static_cast<int64_t>(sizes.nodes), std::memory_order_relaxed);
  ExportCursor c{block,
                 block->nodes + 1,
                 reinterpret_cast<const void**>(bytes + buffers_at),
                 reinterpret_cast<ArrowArray**>(bytes + children_at),
                 reinterpret_cast<int64_t*>(bytes + variadic_at),
                 nullptr};
  if (park != nullptr) {
    block->slot = park;
    block->first_root = n_roots == 0 ? nullptr : roots[0].get();
    block->num_roots = n_roots;
    block->refills = reinterpret_cast<ExportBlock::Refill*>(bytes + refills_at);
    c.next_refill = block->refills;
  }
  ArrowArray* root = block->nodes;
  if (as_struct) {
    root->private_data = block;
    root->release = &ReleaseExportedNode;
    root->length = length;
    root->null_count = 0;
    root->offset = 0;
    root->n_buffers = 1;
    root->buffers = c.next_buffer;
    *c.next_buffer++ = nullptr;  // the struct's validity: none
    root->n_children = static_cast<int64_t>(n_roots);
    root->children = n_roots == 0 ? nullptr : c.next_child;
    root->dictionary = nullptr;
    ArrowArray** pointers = c.next_child;
    c.next_child += n_roots;
    for (size_t i = 0; i < n_roots; ++i) pointers[i] = c.next_node++;
    for (size_t i = 0; i < n_roots; ++i) Fill(*roots[i], pointers[i], &c);
  } else {
    Fill(*roots[0], root, &c);
  }
  if (park != nullptr) {
    block->num_refills = static_cast<size_t>(c.next_refill - block->refills);
    park->block = block;
  }
  HandOut(block, out);
  return Status::OK();
}

// Exports the roots again through the block parked in `slot` (the caller
// made it busy), laid out for them by an earlier export. False (nothing
// done) when the roots are not the ones it was laid out for.
bool ExportParked(internal::ExportSlot& slot, const ArrayDataPtr* roots, size_t n_roots,
                  int64_t length, const RecordBatchPtr* owner, std::function<void()>& on_release,
                  ArrowArray* out) {
  auto* block = static_cast<ExportBlock*>(slot.block);
  // The slot's batch, or a copy of it (the same nodes: a batch's columns
  // cannot be changed); the first root stands for them all.
  if (block->num_roots != n_roots || (n_roots > 0 && block->first_root != roots[0].get())) {
    return false;
  }
  for (size_t i = 0; i < block->num_refills; ++i) {
    const ExportBlock::Refill& r = block->refills[i];
    const Buffer* b = r.from->get();
    *r.entry = b != nullptr && b->data() != nullptr ? b->data() : r.if_empty;
  }
  if (slot.varying) {
    // The top node is the struct over the roots (ExportColumns).
    ArrowArray* top = block->nodes;
    top->length = length;
    for (size_t i = 0; i < n_roots; ++i) Renumber(*roots[i], top->children[i]);
  }
  for (size_t i = 0; i < block->num_nodes; ++i) {
    block->nodes[i].release = &ReleaseExportedNode;
    block->nodes[i].private_data = block;
  }
  if (owner != nullptr) {
    block->batch = *owner;
  } else {
    block->holds[0] = roots[0];
  }
  block->on_release = std::move(on_release);
  block->live_nodes.store(static_cast<int64_t>(block->num_nodes), std::memory_order_relaxed);
  HandOut(block, out);
  return true;
}

// Exports a record batch's columns; through its graph's slot when it has
// one that is free (the first export lays the tree out to be parked there).
Status ExportColumns(const RecordBatch& batch, const RecordBatchPtr* owner,
                     internal::ExportSlot* slot, std::function<void()> on_release,
                     ArrowArray* out) {
  const ArrayDataPtr* roots = batch.columns().data();
  const size_t n_roots = batch.columns().size();
  // Acquire: pairs with the release of the parked block's last release.
  if (slot != nullptr && !slot->busy.exchange(true, std::memory_order_acquire)) {
    if (slot->block != nullptr) {
      if (ExportParked(*slot, roots, n_roots, batch.num_rows(), owner, on_release, out)) {
        return Status::OK();
      }
    } else {
      Status st = ExportTree(roots, n_roots, /*as_struct=*/true, batch.num_rows(), owner,
                             std::move(on_release), slot, out);
      // Not parked (an error, or a tree that cannot be): the slot is free.
      if (slot->block == nullptr) slot->busy.store(false, std::memory_order_relaxed);
      return st;
    }
    slot->busy.store(false, std::memory_order_relaxed);
  }
  return ExportTree(roots, n_roots, /*as_struct=*/true, batch.num_rows(), owner,
                    std::move(on_release), /*park=*/nullptr, out);
}

}  // namespace

namespace internal {

struct ExportAccess {
  static ExportSlot* Slot(const RecordBatch& batch) { return batch.export_slot_; }
};

ExportSlot::~ExportSlot() {
  if (block != nullptr) ExportBlock::Free(static_cast<ExportBlock*>(block));
}

}  // namespace internal

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
  ALKAID_RETURN_NOT_OK(ExportTree(&data, 1, /*as_struct=*/false, 0, /*owner=*/nullptr, nullptr,
                                  /*park=*/nullptr, &array));
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

namespace {

Status ExportBatch(const RecordBatch& batch, const RecordBatchPtr* owner, ArrowArray* out,
                   ArrowSchema* out_schema, std::function<void()> on_release) {
  if (out == nullptr) return Status::Invalid("ExportRecordBatch: out is null");
  ArrowArray array{};
  ALKAID_RETURN_NOT_OK(ExportColumns(batch, owner, internal::ExportAccess::Slot(batch),
                                     std::move(on_release), &array));
  if (out_schema != nullptr) {
    Status st = ExportSchema(*batch.schema(), out_schema);
    if (!st.ok()) {
      static_cast<ExportBlock*>(array.private_data)->on_release = nullptr;  // not exported
      array.release(&array);
      return st;
    }
  }
  *out = array;
  return Status::OK();
}

}  // namespace

Status ExportRecordBatch(const RecordBatch& batch, ArrowArray* out, ArrowSchema* out_schema) {
  return ExportBatch(batch, nullptr, out, out_schema, nullptr);
}

Status ExportRecordBatch(const RecordBatch& batch, ArrowArray* out, ArrowSchema* out_schema,
                         std::function<void()> on_release) {
  return ExportBatch(batch, nullptr, out, out_schema, std::move(on_release));
}

Status ExportRecordBatch(const RecordBatchPtr& batch, ArrowArray* out, ArrowSchema* out_schema,
                         std::function<void()> on_release) {
  if (batch == nullptr) return Status::Invalid("ExportRecordBatch: the batch is null");
  return ExportBatch(*batch, &batch, out, out_schema, std::move(on_release));
}

}  // namespace alkaid::format
