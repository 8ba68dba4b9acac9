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
/// "field 'col1.b': slot 3: end offset 17 is past the end of the 12-byte data
/// buffer". Paths join child field names with '.'; a dictionary appears as
/// "<dictionary>" ("field 'col1.<dictionary>'").
///
/// Details of the contract:
/// - Both depths recurse into children and dictionaries. Type trees and
///   arrays nested deeper than 64 levels are rejected (the validator
///   recurses, and hostile input must not exhaust the stack).
/// - Slots are logical (0 is the first slot after `offset`); buffer sizes
///   are checked against offset + length.
/// - Null slots: offsets, list-view offsets/sizes, union type codes and dense
///   offsets are checked for every slot; values (UTF-8, decimals, dictionary
///   indices) and binary views only for valid slots, because the spec leaves
///   the contents of null slots unspecified. Do not read a null slot of a
///   binary view array.
/// - Null arrays may carry zero buffers or one null buffer.
/// - Validate reads at most O(1) values per array (the first and last
///   offset, the last run end); ValidateFull is linear in the data.
/// - Thread-safe: validation only reads.

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

/// What ValidateFull may leave out.
struct ALKAID_EXPORT FullValidationOptions {
  /// Check that every decimal value fits its type's precision. Older Arrow
  /// versions wrote values that do not; reading such data is safe (the
  /// check guards the declared precision, not memory), so a reader may
  /// accept it, as Arrow's integration runner does with its
  /// `no_decimal_validate` quirk. Default: true.
  bool decimal_precision = true;
};

/// ValidateFull, leaving out what `options` says.
ALKAID_EXPORT Status ValidateFull(const ArrayData& data, std::string_view name,
                                  const FullValidationOptions& options);
ALKAID_EXPORT Status ValidateFull(const RecordBatch& batch, const FullValidationOptions& options);

}  // namespace alkaid::format
