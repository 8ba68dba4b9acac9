#pragma once

/// \file
/// Readable text forms of arrays and record batches, for humans (tools,
/// tests, debugging). The exact format is not a stable contract.

#include <cstdint>
#include <string>

#include "alkaid/common/export.h"
#include "alkaid/format/array.h"

namespace alkaid::format {

class RecordBatch;

struct PrettyPrintOptions {
  /// Spaces before each line.
  int indent = 0;
  /// Values shown at each end of a long array; the middle becomes "...".
  /// -1 shows everything.
  int64_t window = 10;
  /// How nulls are written.
  std::string null_repr = "null";
};

/// A multi-line form such as
///   [
///     1,
///     null,
///     2
///   ]
ALKAID_EXPORT std::string PrettyPrint(const Array& array, const PrettyPrintOptions& options = {});

/// The schema (Schema::ToString), then the row count ("3 rows"), then each
/// column as "name: <array>".
ALKAID_EXPORT std::string PrettyPrint(const RecordBatch& batch,
                                      const PrettyPrintOptions& options = {});

/// One slot as a single-line value ("null", "42", "\"joe\"", "[1, 2]",
/// "{a: 1, b: \"x\"}", "2024-01-31", timestamps in ISO-8601, decimals with
/// their scale, ...). `i` is a logical index. Binary values are hex in SQL
/// style (x'0aff'); strings are quoted with C-style escapes; unions show the
/// selected child's value; dictionary and run-end encoded slots show the
/// decoded value; extension slots the storage value.
ALKAID_EXPORT std::string FormatValue(const Array& array, int64_t i);

}  // namespace alkaid::format
