#pragma once

// The C ABI's own export of received batches (alkaid_consumer_next), for a
// consumer whose columns are all flat: fixed-width, boolean, binary and
// string (the large ones too). Private to the C ABI library.
//
// Why not Consumer::ExportBatch: that export serves every tree (nested,
// dictionaries, variadic buffers) and every caller, and pays for it per
// batch: a std::function release notice, the consumer's export counter
// (reserve, reference, total: four atomic read-modify-writes and their
// undoing), the parked tree's busy flag, the batch pointer copied. Here the
// tree's shape is the consumer's schema, fixed at open, so each export is
// laid out once and reused:
//
// - a block per exported batch: the child nodes, the child pointer table,
//   the buffer tables and the batch's one reference, reused from the
//   consumer's blocks once the importer released it;
// - one release callback per batch (the top-level struct's): it marks the
//   children still attached released, drops the batch's reference (moved
//   in, never copied) and hands the block back with one atomic exchange;
// - no counter the releasing thread updates: the consumer counts what it
//   handed out, and what is still held is the blocks not yet handed back.
//
// A child moved out of the tree (the C Data Interface allows it) keeps the
// block until it is released too: the block's node count, touched only
// when the top-level release finds a child missing.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "alkaid/alkaid.h"
#include "alkaid/common/status.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/type_fwd.h"

namespace alkaid::capi::internal {

struct FlatExportBlock;

/// A consumer's exports of flat batches. Made, used and destroyed by the
/// consumer's thread; the structs it fills are released on any thread,
/// also after it is gone.
class FlatExporter {
 public:
  /// An exporter for batches of `schema`, or null when a column is not
  /// flat (nested, dictionary, view, extension or null type): those go
  /// through Consumer::ExportBatch.
  static std::unique_ptr<FlatExporter> Make(const format::Schema& schema);

  /// Hands every block still out to its releaser (which frees it) and
  /// frees the others.
  ~FlatExporter();

  FlatExporter(const FlatExporter&) = delete;
  FlatExporter& operator=(const FlatExporter&) = delete;

  /// Exports `*batch` into `out` (a struct array, one child per column),
  /// taking the batch's reference: `*batch` is null on success and left
  /// alone on failure. Invalid if the batch does not have the schema's
  /// layout (a column count or buffer count that differs).
  Status Export(format::RecordBatchPtr* batch, ArrowArray* out);

  /// Batches handed out and not yet released (a pass over the blocks: for
  /// stats and max_held_batches, not per batch).
  uint64_t held() const;
  /// Batches handed out so far.
  uint64_t total() const { return total_; }

 private:
  struct Column {
    int n_buffers;  // the type's, validity first
  };

  explicit FlatExporter(std::vector<Column> columns);
  // A block that is not out: the next one, in order, that the importer
  // gave back, or a new one.
  FlatExportBlock* FreeBlock();

  std::vector<Column> columns_;
  size_t n_buffers_ = 0;  // over every column
  std::vector<FlatExportBlock*> blocks_;
  size_t cursor_ = 0;  // where FreeBlock looks first
  uint64_t total_ = 0;
};

}  // namespace alkaid::capi::internal
