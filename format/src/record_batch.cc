#include "alkaid/format/record_batch.h"

#include <algorithm>

#include "alkaid/format/compare.h"
#include "alkaid/format/pretty_print.h"
#include "column_box_internal.h"
#include "pool_object_internal.h"

namespace alkaid::format {

namespace {

// The pool whose object memory a batch of columns is made in: the pool of
// the first column's first buffer, if a builder made that buffer; else none
// (the heap).
MemoryPool* ObjectPoolOf(const ArrayData* first_column) {
  if (first_column == nullptr) return nullptr;
  for (const auto& b : first_column->buffers) {
    if (b != nullptr) return internal::BuiltBufferPool(*b);
  }
  return nullptr;
}

// The object memory a batch of `n` columns (column(i) is the ArrayData of
// column i) is made in: that of the first column's pool when every column
// is one of its objects (made by a builder on that pool); else null.
template <typename Column>
ObjectMemory* GraphOf(size_t n, Column&& column) {
  MemoryPool* pool = ObjectPoolOf(n == 0 ? nullptr : column(0));
  ObjectMemory* m = pool != nullptr ? pool->object_memory() : nullptr;
  if (m == nullptr) return nullptr;
  for (size_t i = 0; i < n; ++i) {
    if (!internal::ObjectMemoryAccess::Owns(m, column(i))) return nullptr;
  }
  return m;
}

// Checks that `n` columns (column(i) is the ArrayData of column i, or null)
// fit `schema` and `num_rows`.
template <typename Column>
Status CheckColumns(const SchemaPtr& schema, int64_t num_rows, size_t n, Column&& column) {
  if (schema == nullptr) return Status::Invalid("record batch schema is null");
  if (num_rows < 0) return Status::Invalid("record batch length ", num_rows, " is negative");
  if (n != static_cast<size_t>(schema->num_fields())) {
    return Status::Invalid("record batch has ", n, " columns but the schema has ",
                           schema->num_fields(), " fields");
  }
  for (size_t i = 0; i < n; ++i) {
    const auto& f = schema->fields()[i];
    const ArrayData* c = column(i);
    if (c == nullptr) return Status::Invalid("column ", i, " ('", f->name(), "') is null");
    if (c->length != num_rows) {
      return Status::Invalid("column ", i, " ('", f->name(), "') has ", c->length,
                             " rows, the batch ", num_rows);
    }
    if (c->type != f->type() && !c->type->Equals(*f->type())) {
      return Status::TypeError("column ", i, " ('", f->name(), "') is ", c->type->ToString(),
                               " but the schema says ", f->type()->ToString());
    }
  }
  return Status::OK();
}

}  // namespace

Result<std::shared_ptr<RecordBatch>> RecordBatch::Make(SchemaPtr schema, int64_t num_rows,
                                                       std::vector<ArrayDataPtr> columns) {
  ALKAID_RETURN_NOT_OK(
      CheckColumns(schema, num_rows, columns.size(), [&](size_t i) { return columns[i].get(); }));
  const size_t n = columns.size();
  if (ObjectMemory* m = GraphOf(n, [&](size_t i) { return columns[i].get(); })) {
    // The batch shares column 0's count (its pointer moved in once linked).
    auto batch = internal::ObjectMemoryAccess::MakeBatch(
        m, schema, num_rows, n, std::move(columns[0]), [&](size_t i) { return columns[i].get(); });
    if (batch != nullptr) return batch;
  }
  return internal::MakePoolObject<RecordBatch>(
      ObjectPoolOf(columns.empty() ? nullptr : columns[0].get()), Key{}, std::move(schema),
      num_rows, std::move(columns));
}

namespace {

// The two Make overloads over typed arrays try this first, inline: the
// batch the block's last batch of this shape left linked to these columns,
// for the same schema (MakeLinkedBatch checks what may have changed since),
// or null.
[[gnu::always_inline]] inline std::shared_ptr<RecordBatch> LinkedBatch(const SchemaPtr& schema,
                                                                       int64_t num_rows,
                                                                       const ArrayPtr* columns,
                                                                       size_t n) {
  if (n == 0 || columns[0] == nullptr) return nullptr;
  ObjectMemory* m = internal::ObjectMemoryAccess::MemoryOf(columns[0]->data().get());
  if (m == nullptr) return nullptr;
  return internal::ObjectMemoryAccess::MakeLinkedBatch(m, schema, num_rows, n, columns);
}

}  // namespace

Result<std::shared_ptr<RecordBatch>> RecordBatch::Make(const SchemaPtr& schema, int64_t num_rows,
                                                       const std::vector<ArrayPtr>& columns) {
  if (auto linked = LinkedBatch(schema, num_rows, columns.data(), columns.size())) return linked;
  return MakeFromArrays(schema, num_rows, columns.data(), columns.size());
}

Result<std::shared_ptr<RecordBatch>> RecordBatch::Make(const SchemaPtr& schema, int64_t num_rows,
                                                       std::initializer_list<ArrayPtr> columns) {
  if (auto linked = LinkedBatch(schema, num_rows, columns.begin(), columns.size())) return linked;
  return MakeFromArrays(schema, num_rows, columns.begin(), columns.size());
}

Result<std::shared_ptr<RecordBatch>> RecordBatch::MakeFromArrays(SchemaPtr schema, int64_t num_rows,
                                                                 const ArrayPtr* columns,
                                                                 size_t n) {
  const auto data = [columns](size_t i) -> const ArrayData* {
    return columns[i] == nullptr ? nullptr : columns[i]->data().get();
  };
  // (The block's last batch of this shape, linked to these columns, was
  // tried by the caller: LinkedBatch.)
  ALKAID_RETURN_NOT_OK(CheckColumns(schema, num_rows, n, data));
  const auto column = [&](size_t i) { return const_cast<ArrayData*>(data(i)); };
  // Columns a builder made in one pool's object memory: the batch is made
  // there too, linked to them, sharing column 0's count.
  if (ObjectMemory* m = GraphOf(n, data)) {
    auto batch =
        internal::ObjectMemoryAccess::MakeBatch(m, schema, num_rows, n, columns[0], column);
    if (batch != nullptr) return batch;
  }
  std::vector<ArrayDataPtr> v;
  v.reserve(n);
  for (size_t i = 0; i < n; ++i) v.push_back(columns[i]->data());
  return Make(std::move(schema), num_rows, std::move(v));
}

RecordBatch::~RecordBatch() { delete[] boxes_.load(std::memory_order_relaxed); }

ArrayPtr RecordBatch::column(int i) const {
  // Acquire: pairs with the release that published the boxes (BoxColumn's
  // exchange; a BatchTemplate's batch reaches its thread by the usual
  // means) and with each box's release store of kReady.
  const internal::ColumnBox* boxes = boxes_.load(std::memory_order_acquire);
  if (boxes != nullptr) {
    const internal::ColumnBox& box = boxes[static_cast<size_t>(i)];
    if (box.state.load(std::memory_order_acquire) == internal::ColumnBox::kReady) return box.array;
  }
  return BoxColumn(i);
}

ArrayPtr RecordBatch::BoxColumn(int i) const {
  using internal::ColumnBox;
  ArrayPtr array = MakeArray(column_data(i));
  if (box_per_call_) return array;
  ColumnBox* boxes = boxes_.load(std::memory_order_acquire);
  if (boxes == nullptr) {
    auto* fresh = new ColumnBox[columns_.size()];
    // Release: the boxes' initial state is seen by every later acquire
    // load; acquire on failure: the winner's boxes are.
    if (boxes_.compare_exchange_strong(boxes, fresh, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
      boxes = fresh;
    } else {
      delete[] fresh;
    }
  }
  ColumnBox& box = boxes[static_cast<size_t>(i)];
  uint8_t state = ColumnBox::kEmpty;
  // The first caller writes the box; one that finds another writing it
  // (or a column boxed per call) returns its own, equal array.
  if (box.state.compare_exchange_strong(state, ColumnBox::kBoxing, std::memory_order_acquire,
                                        std::memory_order_acquire)) {
    box.array = array;
    box.state.store(ColumnBox::kReady, std::memory_order_release);  // column()'s acquire
  } else if (state == ColumnBox::kReady) {
    return box.array;
  }
  return array;
}

ArrayPtr RecordBatch::GetColumnByName(std::string_view name) const {
  const int i = schema_->GetFieldIndex(name);
  return i < 0 ? nullptr : column(i);
}

std::shared_ptr<RecordBatch> RecordBatch::Slice(int64_t offset, int64_t length) const {
  offset = std::clamp<int64_t>(offset, 0, num_rows_);
  length = std::clamp<int64_t>(length, 0, num_rows_ - offset);
  std::vector<ArrayDataPtr> cols;
  cols.reserve(columns_.size());
  for (const auto& c : columns_) cols.push_back(c->Slice(offset, length));
  auto sliced = std::make_shared<RecordBatch>(Key{}, schema_, length, std::move(cols));
  sliced->metadata_ = metadata_;
  return sliced;
}

std::shared_ptr<RecordBatch> RecordBatch::WithMetadata(MetadataPtr metadata) const {
  auto batch = std::make_shared<RecordBatch>(Key{}, schema_, num_rows_, columns_);
  batch->metadata_ = std::move(metadata);
  return batch;
}

bool RecordBatch::Equals(const RecordBatch& other, bool check_metadata) const {
  if (num_rows_ != other.num_rows_ || !schema_->Equals(*other.schema_, check_metadata)) {
    return false;
  }
  if (check_metadata) {
    const bool empty = metadata_ == nullptr || metadata_->empty();
    const bool other_empty = other.metadata_ == nullptr || other.metadata_->empty();
    if (empty != other_empty || (!empty && !metadata_->Equals(*other.metadata_))) return false;
  }
  for (size_t i = 0; i < columns_.size(); ++i) {
    const int c = static_cast<int>(i);
    if (!ArrayEquals(*column(c), *other.column(c))) return false;
  }
  return true;
}

std::string RecordBatch::ToString() const { return PrettyPrint(*this); }

}  // namespace alkaid::format
