#include "alkaid/format/record_batch.h"

#include <algorithm>

#include "alkaid/format/compare.h"
#include "alkaid/format/pretty_print.h"
#include "pool_object_internal.h"

namespace alkaid::format {

namespace {

// The pool whose object memory a batch of `columns` is made in: the pool of
// the first column's first buffer, if a builder made that buffer; else none
// (the heap).
MemoryPool* ObjectPoolOf(const std::vector<ArrayDataPtr>& columns) {
  if (columns.empty() || columns[0] == nullptr) return nullptr;
  for (const auto& b : columns[0]->buffers) {
    if (b != nullptr) return internal::BuiltBufferPool(*b);
  }
  return nullptr;
}

}  // namespace

Result<std::shared_ptr<RecordBatch>> RecordBatch::Make(SchemaPtr schema, int64_t num_rows,
                                                       std::vector<ArrayDataPtr> columns) {
  if (schema == nullptr) return Status::Invalid("record batch schema is null");
  if (num_rows < 0) return Status::Invalid("record batch length ", num_rows, " is negative");
  if (columns.size() != static_cast<size_t>(schema->num_fields())) {
    return Status::Invalid("record batch has ", columns.size(), " columns but the schema has ",
                           schema->num_fields(), " fields");
  }
  for (size_t i = 0; i < columns.size(); ++i) {
    const auto& f = schema->fields()[i];
    if (columns[i] == nullptr) return Status::Invalid("column ", i, " ('", f->name(), "') is null");
    if (columns[i]->length != num_rows) {
      return Status::Invalid("column ", i, " ('", f->name(), "') has ", columns[i]->length,
                             " rows, the batch ", num_rows);
    }
    if (columns[i]->type != f->type() && !columns[i]->type->Equals(*f->type())) {
      return Status::TypeError("column ", i, " ('", f->name(), "') is ",
                               columns[i]->type->ToString(), " but the schema says ",
                               f->type()->ToString());
    }
  }
  MemoryPool* objects = ObjectPoolOf(columns);
  return internal::MakePoolObject<RecordBatch>(objects, Key{}, std::move(schema), num_rows,
                                               std::move(columns));
}

Result<std::shared_ptr<RecordBatch>> RecordBatch::Make(SchemaPtr schema, int64_t num_rows,
                                                       const std::vector<ArrayPtr>& columns) {
  std::vector<ArrayDataPtr> data;
  data.reserve(columns.size());
  for (const auto& c : columns) data.push_back(c == nullptr ? nullptr : c->data());
  return Make(std::move(schema), num_rows, std::move(data));
}

Result<std::shared_ptr<RecordBatch>> RecordBatch::Make(SchemaPtr schema, int64_t num_rows,
                                                       std::initializer_list<ArrayPtr> columns) {
  std::vector<ArrayDataPtr> data;
  data.reserve(columns.size());
  for (const auto& c : columns) data.push_back(c == nullptr ? nullptr : c->data());
  return Make(std::move(schema), num_rows, std::move(data));
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
    if (!ArrayEquals(*MakeArray(columns_[i]), *MakeArray(other.columns_[i]))) return false;
  }
  return true;
}

std::string RecordBatch::ToString() const { return PrettyPrint(*this); }

}  // namespace alkaid::format
