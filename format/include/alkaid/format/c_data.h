#pragma once

/// \file
/// The Arrow C Data Interface and C Stream Interface: hand schemas, arrays,
/// record batches and streams of batches to any Arrow implementation (Arrow
/// C++, pyarrow, polars, DuckDB, nanoarrow) and take theirs, without copying
/// a single buffer.
///
/// The three structs below are the interface's ABI, declared exactly as the
/// interface specifies and guarded by the same macros, so this header can be
/// included next to Arrow's own `arrow/c/abi.h` (whichever comes first wins;
/// the definitions are identical).
///
/// Lifetime rules (the interface's, which these functions follow):
/// - **Export**: Alkaid is the producer. It fills the caller's struct and
///   owns everything it points to until the consumer calls `release`, from any
///   thread, exactly once. Buffers are Alkaid's own buffers, kept alive by
///   shared ownership: the exported struct keeps the data alive even after
///   every Alkaid reference to the array is gone. Each child and dictionary
///   struct owns what it needs on its own, so a consumer may move a child out
///   of its parent (bitwise copy, then mark the original released) and
///   release parent and child in any order.
/// - **Import**: Alkaid is the consumer. Every Import function takes
///   ownership of the structs passed to it, on success AND on failure: when
///   it returns, the caller's struct is marked released (`release == NULL`)
///   and Alkaid calls the producer's `release` exactly once, when no Alkaid
///   buffer refers to the foreign memory any more (after the last reference to
///   an imported array is gone, or before returning an error). A struct that
///   is already released is an error and is not touched.
/// - Import never trusts the producer's struct: null pointers, buffer and
///   child counts, lengths, offsets, null counts, format strings and the
///   dictionary's presence are checked before any buffer is read, and the
///   result then passes Validate or (by default) ValidateFull (validate.h).
///   A malformed struct gives an Invalid status, never a crash. What cannot
///   be checked is what the interface does not describe: buffer sizes are
///   implied by the type, length and offsets, so a producer that lies about
///   them (a buffer shorter than its length implies) is not detectable.

#include <stdint.h>  // NOLINT(modernize-deprecated-headers): C ABI block below

#include <functional>
#include <memory>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/array.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/type.h"
#include "alkaid/format/validate.h"

// The interface's ABI, spelled as its specification spells it.
#ifdef __cplusplus
extern "C" {
#endif

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  // Array type description
  const char* format;
  const char* name;
  const char* metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;

  // Release callback
  void (*release)(struct ArrowSchema*);
  // Opaque producer-specific data
  void* private_data;
};

struct ArrowArray {
  // Array data description
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;

  // Release callback
  void (*release)(struct ArrowArray*);
  // Opaque producer-specific data
  void* private_data;
};

#endif  // ARROW_C_DATA_INTERFACE

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE

struct ArrowArrayStream {
  // Callbacks providing stream functionality
  int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out);
  int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out);
  const char* (*get_last_error)(struct ArrowArrayStream*);

  // Release callback
  void (*release)(struct ArrowArrayStream*);

  // Opaque producer-specific data
  void* private_data;
};

#endif  // ARROW_C_STREAM_INTERFACE

#ifdef __cplusplus
}
#endif
// End of the interface's ABI.

namespace alkaid::format {

// ---------------------------------------------------------------------------
// Export (Alkaid is the producer)
//
// On success `*out` is a live struct the caller must eventually release (by
// calling out->release(out)). On failure nothing was allocated and `*out` is
// left untouched. Types the interface cannot describe do not exist in the
// format, so export fails only on malformed input (an ArrayData whose buffer
// or child count does not fit its type) or out of memory. Thread-safe: the
// exported structs share nothing mutable with the source.
//
// Mapping details: an extension type travels as its storage type with the
// field metadata `ARROW:extension:name` and `ARROW:extension:metadata`; a
// RecordBatch as a non-nullable struct array without validity whose children
// are the columns (the batch's own custom metadata has no place in the
// interface and is dropped); a schema as a struct with the schema metadata.

/// Exports `type` as an unnamed, nullable ArrowSchema.
ALKAID_EXPORT Status ExportType(const DataType& type, ArrowSchema* out);
/// Exports `field`: its name, type, nullability and metadata.
ALKAID_EXPORT Status ExportField(const Field& field, ArrowSchema* out);
/// Exports `schema` as a struct-typed ArrowSchema with one child per field.
ALKAID_EXPORT Status ExportSchema(const Schema& schema, ArrowSchema* out);

/// Exports `array` without copying: the buffers are the array's own, with its
/// slice offset. If `out_schema` is not null, its type is exported there too
/// (if that fails, `*out` is released again before returning).
ALKAID_EXPORT Status ExportArray(const Array& array, ArrowArray* out,
                                 ArrowSchema* out_schema = nullptr);
ALKAID_EXPORT Status ExportArray(const ArrayDataPtr& data, ArrowArray* out,
                                 ArrowSchema* out_schema = nullptr);
/// Exports `batch` as a struct array (see above); the schema with
/// ExportSchema if `out_schema` is not null. The whole tree is one
/// allocation holding a reference to each column.
ALKAID_EXPORT Status ExportRecordBatch(const RecordBatch& batch, ArrowArray* out,
                                       ArrowSchema* out_schema = nullptr);
/// As above; `on_release` (if not empty) runs once the top-level struct
/// `*out` (wherever it was moved) is released, after its release, on the
/// releasing thread. Not run if the export fails.
ALKAID_EXPORT Status ExportRecordBatch(const RecordBatch& batch, ArrowArray* out,
                                       ArrowSchema* out_schema, std::function<void()> on_release);
/// As above, holding the batch itself (rather than its columns) until the
/// export is released: releasing it is dropping one reference to the batch.
/// Prefer it when you have the pointer: a recycled batch (a received one)
/// whose last reference is the export's then goes back at once, where held
/// columns would wait for its decoder's next sweep (batch_template.h).
ALKAID_EXPORT Status ExportRecordBatch(const RecordBatchPtr& batch, ArrowArray* out,
                                       ArrowSchema* out_schema = nullptr,
                                       std::function<void()> on_release = nullptr);

// ---------------------------------------------------------------------------
// Import (Alkaid is the consumer). See the file comment for ownership: every
// struct passed in is taken, also on error.

/// How much of the imported data Import checks before returning it.
struct ALKAID_EXPORT CImportOptions {
  /// true (default): ValidateFull, linear in the data (offsets, UTF-8,
  /// dictionary indices, ...), so hostile values cannot lead a reader out of
  /// bounds. false: Validate only, at a cost independent of the row count;
  /// for producers the caller trusts (e.g. its own process's Arrow C++).
  bool validate_full = true;
  /// Passed to ValidateFull (e.g. tolerate out-of-precision decimals).
  FullValidationOptions full_validation;
};

/// The type described by `schema`. An extension name without a registered
/// factory (extension.h) comes back as the storage type; the name is then
/// only kept by ImportField (in the field metadata), as the IPC reader does.
ALKAID_EXPORT Result<TypePtr> ImportType(ArrowSchema* schema);
/// The field described by `schema`: name, type, nullability, metadata.
ALKAID_EXPORT Result<FieldPtr> ImportField(ArrowSchema* schema);
/// The schema described by a struct-typed `schema` (format "+s").
ALKAID_EXPORT Result<SchemaPtr> ImportSchema(ArrowSchema* schema);

/// An array of `type` wrapping the memory of `array` (no copy).
ALKAID_EXPORT Result<ArrayPtr> ImportArray(ArrowArray* array, const TypePtr& type,
                                           const CImportOptions& options = {});
/// Same, the type coming from `schema` (taken and released too).
ALKAID_EXPORT Result<ArrayPtr> ImportArray(ArrowArray* array, ArrowSchema* schema,
                                           const CImportOptions& options = {});
/// A record batch from a struct array without nulls (a non-zero struct
/// offset slices the columns).
ALKAID_EXPORT Result<RecordBatchPtr> ImportRecordBatch(ArrowArray* array, const SchemaPtr& schema,
                                                       const CImportOptions& options = {});
ALKAID_EXPORT Result<RecordBatchPtr> ImportRecordBatch(ArrowArray* array, ArrowSchema* schema,
                                                       const CImportOptions& options = {});

// ---------------------------------------------------------------------------
// Streams

/// Produces the next batch of a stream: a batch, null at the end of the
/// stream, or an error (handed to the consumer through get_last_error).
/// Called from whichever thread the consumer calls get_next on, one call at
/// a time.
using NextBatchFunction = std::function<Result<RecordBatchPtr>()>;

/// Exports a stream whose batches come from `next`. Every batch must match
/// `schema` (checked; a mismatch ends get_next with EINVAL). The stream
/// holds `next` (and what it captures) until the consumer releases it.
ALKAID_EXPORT Status ExportRecordBatchStream(SchemaPtr schema, NextBatchFunction next,
                                             ArrowArrayStream* out);
/// As above; each batch get_next hands out carries a copy of `on_release`,
/// run once its top-level struct is released (ExportRecordBatch's: on the
/// releasing thread, also after the stream is gone; not run for a batch
/// whose export failed). A callable small enough for std::function's own
/// storage (a plain pointer, say) costs no allocation per batch.
ALKAID_EXPORT Status ExportRecordBatchStream(SchemaPtr schema, NextBatchFunction next,
                                             ArrowArrayStream* out,
                                             std::function<void()> on_release);
/// Exports a stream over `batches`, in order.
ALKAID_EXPORT Status ExportRecordBatchStream(SchemaPtr schema, std::vector<RecordBatchPtr> batches,
                                             ArrowArrayStream* out);

/// Reads an imported ArrowArrayStream batch by batch. Owns the stream and
/// releases it when destroyed (batches already read stay valid: each holds
/// its own ArrowArray). Not thread-safe: one thread at a time.
class ALKAID_EXPORT CStreamReader {
 public:
  /// Takes `stream` (marked released on return, also on error) and reads its
  /// schema.
  static Result<std::unique_ptr<CStreamReader>> Import(ArrowArrayStream* stream,
                                                       const CImportOptions& options = {});
  ~CStreamReader();
  CStreamReader(const CStreamReader&) = delete;
  CStreamReader& operator=(const CStreamReader&) = delete;

  const SchemaPtr& schema() const { return schema_; }
  /// The next batch, null at the end of the stream (and after), or the
  /// producer's error (IOError with its get_last_error message).
  Result<RecordBatchPtr> Next();
  /// Every remaining batch.
  Result<std::vector<RecordBatchPtr>> ReadAll();

 private:
  CStreamReader() = default;
  ArrowArrayStream stream_{};
  SchemaPtr schema_;
  CImportOptions options_;
  bool finished_ = false;
};

}  // namespace alkaid::format
