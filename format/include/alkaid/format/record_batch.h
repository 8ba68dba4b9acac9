#pragma once

/// \file
/// RecordBatch: equal-length columns under a schema, the unit of IPC.

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/array.h"
#include "alkaid/format/type.h"

namespace alkaid::format {

namespace internal {
struct ExportSlot;
struct ExportAccess;
struct ObjectMemoryAccess;
struct ColumnBox;
}  // namespace internal

/// Immutable; safe to share between threads (column(i) too, which makes a
/// column's typed array once and keeps it).
class ALKAID_EXPORT RecordBatch {
 private:
  // Only RecordBatch can make one, so only Make and Slice construct batches.
  struct Key {
    explicit Key() = default;
  };

 public:
  /// Checks that there is one column per field, of the field's type and of
  /// length `num_rows`. Does not validate the column data (see validate.h).
  static Result<std::shared_ptr<RecordBatch>> Make(SchemaPtr schema, int64_t num_rows,
                                                   std::vector<ArrayDataPtr> columns);
  /// Same, taking typed arrays. The schema is taken by reference: a batch
  /// recycled in a pool's object memory (object_memory.h) that already
  /// holds it takes no count of it.
  static Result<std::shared_ptr<RecordBatch>> Make(const SchemaPtr& schema, int64_t num_rows,
                                                   const std::vector<ArrayPtr>& columns);
  /// Same, for columns listed in place (`Make(schema, n, {a, b})`), without
  /// a temporary vector.
  static Result<std::shared_ptr<RecordBatch>> Make(const SchemaPtr& schema, int64_t num_rows,
                                                   std::initializer_list<ArrayPtr> columns);

  const SchemaPtr& schema() const { return schema_; }
  int64_t num_rows() const { return num_rows_; }
  int num_columns() const { return static_cast<int>(columns_.size()); }
  const ArrayDataPtr& column_data(int i) const { return columns_[static_cast<size_t>(i)]; }
  const std::vector<ArrayDataPtr>& columns() const { return columns_; }
  /// Column i as its typed array (MakeArray's class for its type). Made
  /// once per batch and kept: later calls, on any thread, return the same
  /// object without allocating. A batch a BatchTemplate makes (a received
  /// one) has its columns' arrays made with its graph and reused with it:
  /// column(i) allocates nothing there, except for a column with a
  /// dictionary or an extension type at any depth, whose array is made per
  /// call. So is every column of a batch made in a pool's object memory
  /// (object_memory.h). The array, like any pointer taken from the batch,
  /// keeps what it points to after the batch is dropped.
  ArrayPtr column(int i) const;
  /// First column named `name`, or null.
  ArrayPtr GetColumnByName(std::string_view name) const;

  /// Zero-copy slice of every column (and the batch's metadata); `length`
  /// is clamped to the end.
  std::shared_ptr<RecordBatch> Slice(int64_t offset, int64_t length) const;

  /// The batch's own custom metadata (in IPC: the RecordBatch message's
  /// `custom_metadata`), or null. Distinct from the schema's.
  const MetadataPtr& metadata() const { return metadata_; }
  /// The same columns (shared, nothing copied) with `metadata` as the
  /// batch's custom metadata (null: none).
  std::shared_ptr<RecordBatch> WithMetadata(MetadataPtr metadata) const;

  /// Logical equality of schema (fields) and columns; with `check_metadata`,
  /// also of the schema's and the batch's custom metadata.
  bool Equals(const RecordBatch& other, bool check_metadata = false) const;
  /// Schema followed by each column, pretty-printed.
  std::string ToString() const;

  /// Not callable outside RecordBatch (Key is private): use Make. Public so
  /// that std::make_shared can put a batch and its reference count in one
  /// allocation.
  RecordBatch(Key, SchemaPtr schema, int64_t num_rows, std::vector<ArrayDataPtr> columns)
      : schema_(std::move(schema)), num_rows_(num_rows), columns_(std::move(columns)) {}
  ~RecordBatch();
  RecordBatch(const RecordBatch&) = delete;
  RecordBatch& operator=(const RecordBatch&) = delete;

 private:
  // The two Make overloads over typed arrays.
  static Result<std::shared_ptr<RecordBatch>> MakeFromArrays(SchemaPtr schema, int64_t num_rows,
                                                             const ArrayPtr* columns, size_t n);
  // column(i) when its box is not ready: boxes it (or makes it per call).
  ArrayPtr BoxColumn(int i) const;

  // Recycles batch objects of one shape (batch_template.h).
  friend class BatchTemplate;
  // The C Data export reads export_slot_ (c_data_export.cc).
  friend struct internal::ExportAccess;
  // Makes batches in, and parks them in, a pool's object memory
  // (pool_object_internal.h).
  friend struct internal::ObjectMemoryAccess;

  SchemaPtr schema_;
  int64_t num_rows_;
  std::vector<ArrayDataPtr> columns_;
  MetadataPtr metadata_;
  // A recycled batch's place for its exports' ArrowArray tree (set by
  // BatchTemplate; null for every other batch).
  internal::ExportSlot* export_slot_ = nullptr;
  // column(i)'s arrays, one box per column (column_box_internal.h): null
  // until the first call, or set by BatchTemplate when it makes the batch.
  // Deleted with the batch.
  mutable std::atomic<internal::ColumnBox*> boxes_{nullptr};
  // Never box: a batch made in a pool's object memory and reused with it,
  // which a boxed array (holding the pool owner's count) would keep from
  // ever going (ObjectMemoryAccess::MakeBatch).
  bool box_per_call_ = false;
};

using RecordBatchPtr = std::shared_ptr<RecordBatch>;

}  // namespace alkaid::format
