#pragma once

/// \file
/// Logical equality of arrays: two arrays are equal when they have equal types
/// and the same values in the same slots, whatever their physical layout
/// (slice offsets, present or absent all-valid bitmaps, contents of null
/// slots, offsets that do not start at 0, view buffers split differently,
/// list-view child order, dictionary contents beyond the referenced values).

#include <string>

#include "alkaid/common/export.h"
#include "alkaid/common/status.h"
#include "alkaid/format/array.h"

namespace alkaid::format {

class RecordBatch;

struct EqualOptions {
  /// Treat NaN as equal to NaN (floating point and decimals are otherwise
  /// compared by value, so +0.0 == -0.0).
  bool nans_equal = false;
  /// Also compare field metadata inside nested types.
  bool check_metadata = false;
};

ALKAID_EXPORT bool ArrayEquals(const Array& a, const Array& b, const EqualOptions& options = {});

/// OK if equal; otherwise Invalid naming the first difference, e.g.
/// "slot 3: expected 5, got null" or "type: expected int32, got int64".
/// Differences inside nested values carry a path below the slot: a child
/// field is ".name", a list element ".name[k]" (the list's value field name),
/// so "slot 2.item[1]: expected 7, got 8" or
/// "slot 0.entries[1].key: expected \"k2\", got \"kX\"". Values are written
/// as FormatValue writes them (pretty_print.h).
ALKAID_EXPORT Status CheckArrayEquals(const Array& expected, const Array& actual,
                                      const EqualOptions& options = {});

/// Like CheckArrayEquals over all columns, naming the column
/// ("column 'b' (1): slot 3: ..."), after checking num_rows and the schema
/// fields (schema and field metadata only with `check_metadata`).
ALKAID_EXPORT Status CheckRecordBatchEquals(const RecordBatch& expected, const RecordBatch& actual,
                                            const EqualOptions& options = {});

}  // namespace alkaid::format
