#pragma once

/// \file
/// Writing the IPC stream and file formats, and the lower-level payload API
/// used to publish batches that already sit in shared memory.
///
/// Bodies are laid out as the format specifies: pre-order FieldNodes and
/// buffers, each buffer padded to IpcWriteOptions::alignment, body length a
/// multiple of it. Sliced arrays are written re-based (bitmaps re-aligned,
/// offsets starting at 0); validity bitmaps are omitted when there are no
/// nulls. Extension types are written as their storage type plus field
/// metadata `<NS>:extension:name` / `<NS>:extension:metadata`.

#include <cstdint>
#include <memory>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/message.h"
#include "alkaid/format/ipc/options.h"
#include "alkaid/format/record_batch.h"

namespace alkaid::format::ipc {

/// Counters of what a writer has written.
struct WriteStats {
  int64_t num_messages = 0;
  int64_t num_record_batches = 0;
  int64_t num_dictionary_batches = 0;
  int64_t num_dictionary_deltas = 0;
  int64_t num_replaced_dictionaries = 0;
  /// Bytes written to the sink, magic and footer included.
  int64_t total_bytes = 0;
};

/// Writes record batches of one schema. Not thread-safe.
class ALKAID_EXPORT RecordBatchWriter {
 public:
  virtual ~RecordBatchWriter() = default;
  /// Writes the dictionaries the batch needs (new, delta or replacement),
  /// then the batch. Its schema must equal the writer's (metadata aside).
  virtual Status WriteRecordBatch(const RecordBatch& batch) = 0;
  /// Writes the end-of-stream marker (and the footer for files). Does not
  /// close the sink. Idempotent.
  virtual Status Close() = 0;
  virtual WriteStats stats() const = 0;
};

/// A stream writer on `sink` (which must outlive the writer). The schema
/// message is written at once. `ids`, if given, fixes the dictionary id of
/// dictionary-encoded fields by path (e.g. to keep the ids of a stream being
/// copied, or to share one id between fields); others are numbered from 0.
ALKAID_EXPORT Result<std::unique_ptr<RecordBatchWriter>> MakeStreamWriter(
    OutputStream* sink, SchemaPtr schema, const IpcWriteOptions& options = {},
    const DictionaryMemo* ids = nullptr);

/// A file writer (magic per options.magic, footer on Close). `footer_metadata`
/// goes into the footer's custom_metadata.
ALKAID_EXPORT Result<std::unique_ptr<RecordBatchWriter>> MakeFileWriter(
    OutputStream* sink, SchemaPtr schema, const IpcWriteOptions& options = {},
    const DictionaryMemo* ids = nullptr, MetadataPtr footer_metadata = nullptr);

/// One encapsulated message ready to be written.
struct ALKAID_EXPORT IpcPayload {
  MessageType type = MessageType::kRecordBatch;
  /// The Message flatbuffer (unpadded; WriteIpcPayload frames and pads it).
  std::shared_ptr<Buffer> metadata;
  /// The body buffers in order, unpadded. Null entries stand for empty
  /// buffers.
  std::vector<std::shared_ptr<Buffer>> body_buffers;
  /// Where each body buffer starts in the body (what the metadata says),
  /// zero padding before each and up to body_length. Empty: one after the
  /// other, each padded to `alignment`.
  std::vector<int64_t> body_offsets;
  /// Total body length, padding included.
  int64_t body_length = 0;
  int32_t alignment = 8;
};

/// The schema message (dictionary ids from `ids`, which must map every
/// dictionary-encoded field; see DictionaryMemo::AssignIds).
ALKAID_EXPORT Result<IpcPayload> GetSchemaPayload(const Schema& schema, const DictionaryMemo& ids,
                                                  const IpcWriteOptions& options = {});

/// The record batch message of `batch` (dictionary columns contribute their
/// indices only; write their dictionaries with GetDictionaryPayload).
ALKAID_EXPORT Result<IpcPayload> GetRecordBatchPayload(const RecordBatch& batch,
                                                       const IpcWriteOptions& options = {});

/// A dictionary batch message for dictionary `id` holding `values`.
ALKAID_EXPORT Result<IpcPayload> GetDictionaryPayload(int64_t id, bool is_delta,
                                                      const ArrayDataPtr& values,
                                                      const IpcWriteOptions& options = {});

/// Frames and writes `payload` (continuation marker unless legacy format,
/// length, padded metadata, padded body buffers). Returns the bytes written.
ALKAID_EXPORT Result<int64_t> WriteIpcPayload(const IpcPayload& payload,
                                              const IpcWriteOptions& options, OutputStream* sink);

/// Writes the end-of-stream marker (8 bytes, or 4 in legacy format).
ALKAID_EXPORT Status WriteEndOfStream(const IpcWriteOptions& options, OutputStream* sink);

/// For a batch whose buffers all lie inside the `region_size` bytes at
/// `region`, builds only the Message flatbuffer (unpadded) whose buffer
/// offsets are relative to `region` and whose body length is `region_size`:
/// framing it and appending the region gives a valid encapsulated message
/// without copying. Fails (Invalid) if a buffer lies outside the region, is
/// not 8-byte aligned relative to it, or the batch would need re-basing (a
/// slice whose bitmaps or offsets do not start at 0). No compression.
ALKAID_EXPORT Result<std::shared_ptr<Buffer>> GetRecordBatchMetadataForRegion(
    const RecordBatch& batch, const uint8_t* region, int64_t region_size,
    const IpcWriteOptions& options = {});

/// A framed schema message followed by the framed batch (and its
/// dictionaries) and EOS, i.e. a whole one-batch stream, in one buffer.
ALKAID_EXPORT Result<std::shared_ptr<Buffer>> SerializeRecordBatchStream(
    const RecordBatch& batch, const IpcWriteOptions& options = {});

}  // namespace alkaid::format::ipc
