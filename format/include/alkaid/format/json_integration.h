#pragma once

/// \file
/// Reading and writing Apache Arrow's JSON integration-test format.
///
/// The format is the human-readable description of a schema, its record
/// batches and its dictionaries that Arrow's cross-implementation
/// integration tests use (the `.json.gz` "gold" files):
///
///     {"schema": {"fields": [...], "metadata": [{"key": .., "value": ..}]},
///      "dictionaries": [{"id": I, "data": {"count": N, "columns": [col]}}],
///      "batches": [{"count": N, "columns": [col, ...]}]}
///
/// Every buffer is spelled out per column ("VALIDITY", "OFFSET", "SIZE",
/// "TYPE_ID", "DATA", "VIEWS", "VARIADIC_DATA_BUFFERS", "children"), so the
/// arrays built from a file have exactly the physical layout it describes
/// (offsets, list views, binary views and union type ids as given); the one
/// normalisation is that an all-valid VALIDITY produces no bitmap.
/// docs/json_integration.md describes the format in full.
///
/// Dictionary-encoded fields: a column holds the indices; the values come
/// from the "dictionaries" section by id, and a dictionary's own values may
/// contain dictionary-encoded children (nested dictionaries). Extension
/// types travel as their storage type plus the field metadata
/// `ARROW:extension:name` / `ARROW:extension:metadata`.
///
/// All functions are thread-safe (they share no state) and never throw.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/memory_pool.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/type.h"

namespace alkaid::format {

/// A field's position in a schema: the top-level field index followed by a
/// child index per level. Below a dictionary-encoded field, the indices walk
/// the children of the dictionary's value type.
using FieldPath = std::vector<int>;

/// The content of one JSON integration file.
struct ALKAID_EXPORT JsonIntegrationData {
  SchemaPtr schema;
  /// Dictionary-encoded columns have ArrayData::dictionary set to the
  /// dictionary's values (shared between fields that use the same id).
  std::vector<RecordBatchPtr> batches;
  /// Dictionary id -> the dictionary's values.
  std::map<int64_t, ArrayDataPtr> dictionaries;
  /// Path of every dictionary-encoded field -> its dictionary id.
  std::map<FieldPath, int64_t> dictionary_ids;
};

/// Options of the readers.
struct ALKAID_EXPORT JsonReadOptions {
  /// Pool for every buffer of the arrays built. Never null.
  MemoryPool* pool = default_memory_pool();
  /// Run ValidateFull on every column and dictionary read, so that what is
  /// returned is safe to read with the unchecked accessors of array.h.
  /// Turn off only to inspect deliberately invalid data.
  bool validate = true;
  /// With `validate`: decimal values must fit their type's precision (Arrow's
  /// integration quirk `no_decimal_validate` turns this off for data older
  /// Arrow versions wrote). Default: true.
  bool validate_decimal_precision = true;
  /// Largest decompressed size accepted from a gzip file (guards against
  /// decompression bombs).
  int64_t max_decompressed_bytes = int64_t{1} << 31;
};

/// Options of the writers.
struct ALKAID_EXPORT JsonWriteOptions {
  /// Indentation of the output: negative writes one compact line.
  int indent = -1;
};

/// Parses JSON integration text. Errors are Invalid (or KeyError for an
/// unknown dictionary id) and say where, e.g.
/// "batch 0, column 'x': DATA has 3 values, count is 5".
ALKAID_EXPORT Result<JsonIntegrationData> ReadJsonIntegration(std::string_view json_text,
                                                              const JsonReadOptions& options = {});

/// Reads a file holding JSON integration text, plain or gzip-compressed
/// (recognised by its 1f 8b magic, not by its name).
ALKAID_EXPORT Result<JsonIntegrationData> ReadJsonIntegrationFile(
    const std::string& path, const JsonReadOptions& options = {});

/// Writes `schema` and `batches` as JSON integration text.
///
/// Dictionary ids are assigned to the dictionary-encoded fields in schema
/// pre-order (0, 1, ...), descending into dictionary value types; each
/// dictionary's values are taken from the batches' columns
/// (ArrayData::dictionary). The format holds one dictionary per id, so a
/// field whose batches carry unequal dictionaries is refused
/// (NotImplemented). The batches are checked with ValidateFull first.
ALKAID_EXPORT Result<std::string> WriteJsonIntegration(const Schema& schema,
                                                       const std::vector<RecordBatchPtr>& batches,
                                                       const JsonWriteOptions& options = {});

/// Same, with the caller's dictionary ids (data.dictionary_ids; when empty,
/// assigned as above) and dictionaries (data.dictionaries; ids missing there
/// are taken from the batches). Writing what ReadJsonIntegration returned
/// reproduces the file's ids and dictionaries.
ALKAID_EXPORT Result<std::string> WriteJsonIntegration(const JsonIntegrationData& data,
                                                       const JsonWriteOptions& options = {});

/// Writes the text of WriteJsonIntegration(data) to `path`, gzip-compressed
/// when `gzip` is true. Replaces an existing file.
ALKAID_EXPORT Status WriteJsonIntegrationFile(const std::string& path,
                                              const JsonIntegrationData& data, bool gzip,
                                              const JsonWriteOptions& options = {});

}  // namespace alkaid::format
