// The C ABI's export of flat received batches: batch_export_internal.h.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "alkaid/format/array_data.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/type.h"
#include "batch_export_internal.h"

namespace alkaid::capi::internal {

namespace {

// Where a block is. Written by the consumer (kOut when it hands the block
// out, kAbandoned when it is gone) and by the releaser (kFree).
enum BlockState : uint32_t { kFree = 0, kOut = 1, kAbandoned = 2 };

// What an empty data buffer points to: consumers may read any data buffer
// address the interface gives them.
alignas(64) constexpr uint8_t kZeroBytes[64] = {};

}  // namespace

// One exported batch's tree, laid out for the consumer's schema once and
// filled again at each export: node i and its buffer table are column i's.
struct FlatExportBlock {
  std::atomic<uint32_t> state{kFree};
  // Nodes not yet released (the top-level struct and every child), kept
  // up to date only once a child is released on its own (moved out).
  std::atomic<int64_t> live{0};
  int64_t n_nodes = 0;
  format::RecordBatchPtr batch;  // the one reference the export holds
  std::vector<ArrowArray> nodes;
  std::vector<ArrowArray*> pointers;
  std::vector<const void*> buffers;  // [0]: the struct's validity (none)
};

namespace {

// The block's batch goes and the block goes back to the consumer, or is
// freed if the consumer is gone.
void Finish(FlatExportBlock* block) {
  // First: dropping the reference may return the batch's graph and its
  // shared-memory block (on this thread), and the block may be reused as
  // soon as it is marked free.
  block->batch.reset();
  // Acq_rel. Release: the consumer's acquire load in FreeBlock sees the
  // batch gone and the nodes marked before it reuses the block. Acquire:
  // with kAbandoned, the consumer's last use of the block (its exchange in
  // ~FlatExporter) comes before the delete.
  if (block->state.exchange(kFree, std::memory_order_acq_rel) == kAbandoned) delete block;
}

// Takes `released` nodes off the block's count; the last one finishes it.
void Drop(FlatExportBlock* block, int64_t released) {
  // Acq_rel: the last release sees every other node's release (and the
  // importer's reads of the buffers before it) before the batch goes.
  if (block->live.fetch_sub(released, std::memory_order_acq_rel) == released) Finish(block);
}

// A child released on its own: it was moved out of the tree, and held the
// block since.
void ReleaseChild(ArrowArray* array) {
  if (array == nullptr || array->release == nullptr) return;
  auto* block = static_cast<FlatExportBlock*>(array->private_data);
  array->release = nullptr;
  array->private_data = nullptr;
  Drop(block, 1);
}

// The top-level struct (wherever the importer moved it): releases the
// children still attached. If they all were, no other node is out, and the
// batch goes without touching the count.
void ReleaseTop(ArrowArray* array) {
  if (array == nullptr || array->release == nullptr) return;
  auto* block = static_cast<FlatExportBlock*>(array->private_data);
  int64_t released = 1;
  for (ArrowArray* child : block->pointers) {
    if (child->release == nullptr) continue;  // moved out: released on its own
    if (child->release != &ReleaseChild || child->private_data != block) {
      child->release(child);  // not ours: cannot happen, but honour the interface
      continue;
    }
    child->release = nullptr;
    child->private_data = nullptr;
    ++released;
  }
  array->release = nullptr;
  array->private_data = nullptr;
  if (released == block->n_nodes) {
    Finish(block);
  } else {
    Drop(block, released);
  }
}

bool IsFlat(const format::DataType& type) {
  const format::TypeId id = type.id();
  if (!format::IsFixedWidth(id) && !format::IsBinaryLike(id) && !format::IsLargeBinaryLike(id)) {
    return false;
  }
  const format::DataTypeLayout& layout = type.layout();
  return !layout.variadic && layout.has_validity && !layout.buffers.empty();
}

}  // namespace

std::unique_ptr<FlatExporter> FlatExporter::Make(const format::Schema& schema) {
  std::vector<Column> columns;
  columns.reserve(static_cast<size_t>(schema.num_fields()));
  for (int i = 0; i < schema.num_fields(); ++i) {
    const format::DataType& type = *schema.field(i)->type();
    if (!IsFlat(type)) return nullptr;
    columns.push_back({static_cast<int>(type.layout().buffers.size())});
  }
  return std::unique_ptr<FlatExporter>(new FlatExporter(std::move(columns)));
}

FlatExporter::FlatExporter(std::vector<Column> columns) : columns_(std::move(columns)) {
  for (const Column& c : columns_) n_buffers_ += static_cast<size_t>(c.n_buffers);
}

FlatExporter::~FlatExporter() {
  for (FlatExportBlock* block : blocks_) {
    // Acq_rel, the partner of Finish's exchange: whichever of the two comes
    // second frees the block.
    if (block->state.exchange(kAbandoned, std::memory_order_acq_rel) == kFree) delete block;
  }
}

FlatExportBlock* FlatExporter::FreeBlock() {
  // Importers usually release in the order they received, so the block
  // after the last one handed out is the likeliest to be back. A few
  // looks, then a new block; every block once there are many (many held),
  // so that it does not grow past what is held.
  constexpr size_t kLooks = 8;
  constexpr size_t kScanAllFrom = 64;
  const size_t n = blocks_.size();
  const size_t looks = n >= kScanAllFrom ? n : std::min(n, kLooks);
  for (size_t i = 0; i < looks; ++i) {
    FlatExportBlock* block = blocks_[cursor_];
    cursor_ = cursor_ + 1 == n ? 0 : cursor_ + 1;
    // Acquire: partner of Finish's release; the releaser is done with it.
    if (block->state.load(std::memory_order_acquire) == kFree) return block;
  }
  auto block = std::make_unique<FlatExportBlock>();
  const size_t n_columns = columns_.size();
  block->n_nodes = static_cast<int64_t>(n_columns) + 1;
  block->nodes.resize(n_columns);
  block->pointers.resize(n_columns);
  block->buffers.resize(1 + n_buffers_);
  for (size_t i = 0; i < n_columns; ++i) block->pointers[i] = &block->nodes[i];
  blocks_.push_back(block.get());
  return block.release();
}

Status FlatExporter::Export(format::RecordBatchPtr* batch, ArrowArray* out) {
  const format::RecordBatch& b = **batch;
  if (static_cast<size_t>(b.num_columns()) != columns_.size()) {
    return Status::Invalid("exporting a batch of ", b.num_columns(),
                           " columns where the schema has ", columns_.size());
  }
  FlatExportBlock* block = FreeBlock();
  const void** table = block->buffers.data();
  *table++ = nullptr;  // the struct's validity: none
  for (size_t i = 0; i < columns_.size(); ++i) {
    const Column& col = columns_[i];
    const format::ArrayData& data = *b.column_data(static_cast<int>(i));
    if (data.buffers.size() != static_cast<size_t>(col.n_buffers) || !data.child_data.empty() ||
        data.dictionary != nullptr) {
      // The block stays free: nothing was handed out.
      return Status::Invalid("exporting column ", i, ": ", data.buffers.size(), " buffers and ",
                             data.child_data.size(), " children where its type has ", col.n_buffers,
                             " and none");
    }
    ArrowArray& node = block->nodes[i];
    node.length = data.length;
    node.null_count = data.buffers[0] == nullptr ? 0 : data.null_count;
    node.offset = data.offset;
    node.n_buffers = col.n_buffers;
    node.n_children = 0;
    node.buffers = table;
    node.children = nullptr;
    node.dictionary = nullptr;
    node.release = &ReleaseChild;
    node.private_data = block;
    for (int j = 0; j < col.n_buffers; ++j) {
      const format::Buffer* buffer = data.buffers[static_cast<size_t>(j)].get();
      // A missing bitmap stays NULL; an empty data buffer gets a real
      // address.
      const void* if_empty = j == 0 ? nullptr : static_cast<const void*>(kZeroBytes);
      *table++ = buffer != nullptr && buffer->data() != nullptr ? buffer->data() : if_empty;
    }
  }
  out->length = b.num_rows();
  out->null_count = 0;
  out->offset = 0;
  out->n_buffers = 1;
  out->n_children = static_cast<int64_t>(columns_.size());
  out->buffers = block->buffers.data();
  out->children = block->pointers.data();
  out->dictionary = nullptr;
  out->release = &ReleaseTop;
  out->private_data = block;
  // Plain stores: the releaser reads them after the struct reached it,
  // which orders them (its thread got it from ours).
  block->live.store(block->n_nodes, std::memory_order_relaxed);
  block->state.store(kOut, std::memory_order_relaxed);
  block->batch = std::move(*batch);  // moved: no reference count touched
  ++total_;
  return Status::OK();
}

uint64_t FlatExporter::held() const {
  uint64_t held = 0;
  for (const FlatExportBlock* block : blocks_) {
    // Acquire: partner of Finish's release (a released batch is gone).
    if (block->state.load(std::memory_order_acquire) == kOut) ++held;
  }
  return held;
}

}  // namespace alkaid::capi::internal
