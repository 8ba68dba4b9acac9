#pragma once

/// \file
/// UnsafeRow: Apache Spark's row serialization, byte for byte, and conversion
/// between record batches and batches of rows.
///
/// A row is `null bits | fixed-width slots | variable-width data`, each part
/// 8-byte aligned, little-endian; a row batch is every row preceded by its
/// size as a 4-byte big-endian integer. docs/UNSAFE_ROW.md specifies the
/// layout and the type mapping in full; in brief:
///
/// | Alkaid type                                   | UnsafeRow value            |
/// |-----------------------------------------------|----------------------------|
/// | null                                          | UNKNOWN (always null)      |
/// | bool, int8, int16, int32, int64               | BOOLEAN ... BIGINT         |
/// | float32, float64                              | REAL, DOUBLE               |
/// | date32                                        | DATE (int32 days)          |
/// | timestamp[us] (any time zone)                 | TIMESTAMP (int64 micros)   |
/// | decimal32/64/128/256, precision <= 18         | short decimal (int64)      |
/// | decimal128/256, 18 < precision <= 38          | long decimal (BigInteger)  |
/// | utf8, large_utf8, utf8_view                   | VARCHAR                    |
/// | binary, large_binary, binary_view             | VARBINARY                  |
/// | list, large_list, fixed_size_list             | ARRAY                      |
/// | map                                           | MAP                        |
/// | struct                                        | ROW                        |
/// | dictionary<int*, V> (encoding only)           | the value of type V        |
///
/// Anything else (unsigned integers, float16, date64, time32/64, timestamps
/// in other units, durations, intervals, fixed_size_binary, list views,
/// unions, run-end encoded, extension types, decimals over 38 digits) fails
/// CheckRowSchema with TypeError naming the field.
///
/// Dictionary-encoded columns are written as their values; rows carry no
/// dictionaries, so decoding against a schema with dictionary fields yields
/// the schema of RowOutputSchema (dictionaries replaced by their value types).
///
/// All functions are thread-safe (they share no state). Decoding never trusts
/// the input: every size and offset is checked against its enclosing row or
/// array before use and errors name the row, the field path and the byte
/// offset in the batch.

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/memory_pool.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/type.h"

namespace alkaid::format {

/// Deepest nesting of arrays, maps and structs a row schema may have (the
/// top-level row is depth 0). Decoding recursion follows the schema, so this
/// bounds the stack use of every call here.
inline constexpr int kMaxUnsafeRowNesting = 64;

/// OK if every field of `schema` (recursively) has a type UnsafeRow can
/// carry; TypeError naming the field path and its type otherwise, Invalid
/// if the schema nests deeper than kMaxUnsafeRowNesting.
ALKAID_EXPORT Status CheckRowSchema(const Schema& schema);

/// The schema decoded batches have: `schema` with every dictionary type
/// replaced by its value type (recursively). Same checks as CheckRowSchema.
ALKAID_EXPORT Result<SchemaPtr> RowOutputSchema(const Schema& schema);

/// Encodes rows of one record batch, one at a time. Holds a reference to the
/// batch; not thread-safe (one writer per thread).
///
/// Rows can be written in place: RowSize() gives a row's exact size and
/// WriteRow() writes it into memory the caller provides (a shared-memory
/// block, a slice of a larger buffer), with no intermediate copy.
class ALKAID_EXPORT UnsafeRowWriter {
 public:
  /// Checks the schema (CheckRowSchema) and keeps `batch`.
  static Result<std::unique_ptr<UnsafeRowWriter>> Make(std::shared_ptr<const RecordBatch> batch);

  ~UnsafeRowWriter();
  UnsafeRowWriter(const UnsafeRowWriter&) = delete;
  UnsafeRowWriter& operator=(const UnsafeRowWriter&) = delete;

  /// The exact size in bytes of row `row` (0 <= row < num_rows) as one
  /// UnsafeRow: what WriteRow() writes and AppendRow() appends, a multiple
  /// of 8. Walks only the variable-width values. IndexError for a bad row
  /// number; CapacityError for a row over 2 GiB; Invalid for what sizes
  /// depend on (a dictionary index of a variable-width value out of range,
  /// a long decimal over 16 bytes). Value checks sizes do not need (a short
  /// decimal over 18 digits, a dictionary index of a fixed-width value) are
  /// left to WriteRow().
  Result<int64_t> RowSize(int64_t row) const;

  /// Writes row `row` as one UnsafeRow at the start of `out` and returns its
  /// size (bytes of `out` past it are not touched). The bytes are those
  /// AppendRow() appends, padding zeroed: `out` need not be initialized.
  /// Never writes outside `out`: CapacityError naming both sizes if the row
  /// does not fit (size `out` with RowSize()). Other errors as AppendRow().
  /// After an error the contents of `out` are unspecified.
  Result<int64_t> WriteRow(int64_t row, std::span<uint8_t> out) const;

  /// Appends row `row` (0 <= row < num_rows) as one UnsafeRow to `out`
  /// (which grows; nothing before its current end is touched) and returns
  /// the row's size in bytes, always a multiple of 8. IndexError for a bad
  /// row number; Invalid for column data the row cannot hold (a dictionary
  /// index out of range, a decimal that does not fit its precision);
  /// CapacityError for a row over 2 GiB.
  Result<int64_t> AppendRow(int64_t row, std::vector<uint8_t>* out);

  /// The row as a buffer of its own.
  Result<std::shared_ptr<Buffer>> EncodeRow(int64_t row, MemoryPool* pool = default_memory_pool());

  const RecordBatch& batch() const { return *batch_; }

 private:
  explicit UnsafeRowWriter(std::shared_ptr<const RecordBatch> batch);
  std::shared_ptr<const RecordBatch> batch_;
};

/// The exact size in bytes of the row batch of `batch` (what EncodeRowBatch
/// returns and EncodeRowBatchInto writes): 4 + RowSize per row. Checks the
/// schema (CheckRowSchema); other errors as UnsafeRowWriter::RowSize, with
/// the row named.
ALKAID_EXPORT Result<int64_t> EncodedRowBatchSize(const RecordBatch& batch);

/// Writes the row batch of `batch` (every row preceded by its size as a
/// 4-byte big-endian integer) at the start of `out`, in place, and returns
/// the bytes written; bytes of `out` past them are not touched. `out` need
/// not be initialized (padding is zeroed). Never writes outside `out`: a
/// span smaller than EncodedRowBatchSize(batch) is a CapacityError naming
/// both sizes and the first row that did not fit. Other errors as
/// UnsafeRowWriter::WriteRow, with the row named. After an error the
/// contents of `out` are unspecified.
///
/// EncodedRowBatchSize then EncodeRowBatchInto is how a row batch is
/// written straight into a shared-memory block (client::RowPublisher).
ALKAID_EXPORT Result<int64_t> EncodeRowBatchInto(const RecordBatch& batch, std::span<uint8_t> out);

/// Every row of `batch`, each preceded by its size as a 4-byte big-endian
/// integer, in one buffer of exactly that size allocated from `pool`
/// (EncodedRowBatchSize, then EncodeRowBatchInto the buffer).
ALKAID_EXPORT Result<std::shared_ptr<Buffer>> EncodeRowBatch(
    const RecordBatch& batch, MemoryPool* pool = default_memory_pool());

/// The rows of a row batch, as views into `batch` (which must outlive them).
/// Invalid, naming the row and the byte offset, if a size prefix is cut off,
/// is negative, is not a multiple of 8, or runs past the end of the batch.
/// The row contents are not looked at.
ALKAID_EXPORT Result<std::vector<std::string_view>> SplitRowBatch(std::string_view batch);

/// Decodes rows (each one UnsafeRow, without size prefix) of `schema` into
/// one record batch whose schema is RowOutputSchema(schema). Errors name the
/// row, the field path ("a.b[3].key") and the byte offset; with
/// `row_base_offsets` (one per row, e.g. the rows' offsets in a row batch)
/// offsets are reported relative to those, otherwise within the row.
ALKAID_EXPORT Result<RecordBatchPtr> DecodeRows(
    const std::vector<std::string_view>& rows, const SchemaPtr& schema,
    MemoryPool* pool = default_memory_pool(),
    const std::vector<int64_t>* row_base_offsets = nullptr);

/// SplitRowBatch then DecodeRows; byte offsets in errors are offsets in
/// `batch`.
ALKAID_EXPORT Result<RecordBatchPtr> DecodeRowBatch(std::string_view batch, const SchemaPtr& schema,
                                                    MemoryPool* pool = default_memory_pool());
ALKAID_EXPORT Result<RecordBatchPtr> DecodeRowBatch(const Buffer& batch, const SchemaPtr& schema,
                                                    MemoryPool* pool = default_memory_pool());

}  // namespace alkaid::format
