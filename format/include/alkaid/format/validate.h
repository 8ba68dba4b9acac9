#pragma once

/// \file
/// Checks that arrays obey the format, at two depths:
///
/// - Validate: structural, cost independent of the data values: buffer
///   counts and sizes for the length and offset, child counts and lengths,
///   null counts consistent with the layout, type parameters.
/// - ValidateFull: everything Validate checks plus every value that could
///   lead a reader astray: offsets monotonic and in bounds (also under
///   nulls), binary views' sizes, buffer indices, offsets and prefixes,
///   list-view invariants, union type codes declared and dense offsets in
///   bounds, run ends positive, strictly increasing and non-null, dictionary
///   indices in range, UTF-8 for string types, decimal precision, and the
///   null count against the bitmap.
///
/// Data that passed ValidateFull may be read with the unchecked accessors of
/// array.h. Errors are Invalid and name the field path and the position, e.g.
/// "field 'col1.b': offset 4 (slot 3) is 17, past the 12-byte data buffer".

#include <string_view>

#include "alkaid/common/export.h"
#include "alkaid/common/status.h"
#include "alkaid/format/array.h"

namespace alkaid::format {

class RecordBatch;

/// `name` labels the array in messages (a field name or path).
ALKAID_EXPORT Status Validate(const ArrayData& data, std::string_view name = "array");
ALKAID_EXPORT Status ValidateFull(const ArrayData& data, std::string_view name = "array");
inline Status Validate(const Array& a, std::string_view name = "array") {
  return Validate(*a.data(), name);
}
inline Status ValidateFull(const Array& a, std::string_view name = "array") {
  return ValidateFull(*a.data(), name);
}

/// Every column, labelled with its field name.
ALKAID_EXPORT Status Validate(const RecordBatch& batch);
ALKAID_EXPORT Status ValidateFull(const RecordBatch& batch);

}  // namespace alkaid::format
