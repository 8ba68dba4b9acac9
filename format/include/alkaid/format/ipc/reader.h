#pragma once

/// \file
/// Reading the IPC stream and file formats.
///
/// Decoding is zero-copy: the buffers of the arrays returned are slices of
/// the message body (itself a slice of a mapped file or an in-memory buffer
/// when the source allows), except for compressed bodies, which decompress
/// into new buffers, and for bodies that are not 8-byte aligned in memory,
/// which are copied once. Nothing read is trusted: every length, offset,
/// count and nesting depth is checked, every decoded batch passes Validate
/// (or ValidateFull, see IpcReadOptions), and malformed input yields an error
/// naming the message, field path and buffer.
///
/// A stream reader (StreamDecoder, RecordBatchStreamReader) keeps plans of
/// the shapes its stream repeats (MessagePlanCache, message_plan.h): a
/// record batch Message of a shape seen before becomes a batch without
/// being decoded again, checked and validated to the same verdict.
///
/// Big-endian data is not supported: a schema declaring Big endianness is
/// refused ("big-endian data is not supported").

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

/// Decodes a Schema message, recording its dictionary-encoded fields in
/// `memo` (which must not know them yet).
ALKAID_EXPORT Result<SchemaPtr> ReadSchema(const Message& message, DictionaryMemo* memo,
                                           const IpcReadOptions& options = {});

/// Decodes a RecordBatch message of `schema`. Dictionary-encoded columns get
/// their dictionaries from `memo`.
ALKAID_EXPORT Result<RecordBatchPtr> ReadRecordBatch(const Message& message,
                                                     const SchemaPtr& schema,
                                                     const DictionaryMemo* memo,
                                                     const IpcReadOptions& options = {});

/// Decodes a DictionaryBatch message into `memo` (new, replacement or delta;
/// replacement is refused unless `allow_replacement`).
ALKAID_EXPORT Result<DictionaryUpdate> ReadDictionary(const Message& message, DictionaryMemo* memo,
                                                      const IpcReadOptions& options = {},
                                                      bool allow_replacement = true);

/// Counters of what a reader has decoded.
struct ReadStats {
  int64_t num_messages = 0;
  int64_t num_record_batches = 0;
  int64_t num_dictionary_batches = 0;
  int64_t num_dictionary_deltas = 0;
  int64_t num_replaced_dictionaries = 0;
  /// Of num_record_batches, those made by the plan of a Message of their
  /// shape read before (message_plan.h) instead of decoded in full.
  int64_t num_planned_record_batches = 0;
};

/// Receives what a StreamDecoder decodes. An error returned from a callback
/// stops the decoder and is returned from Consume.
class ALKAID_EXPORT StreamListener {
 public:
  virtual ~StreamListener() = default;
  virtual Status OnSchema(const SchemaPtr& schema);
  virtual Status OnRecordBatch(RecordBatchPtr batch) = 0;
  /// After the EOS marker; later bytes are an error.
  virtual Status OnEndOfStream();
};

/// A listener that keeps everything it is given.
class ALKAID_EXPORT CollectListener : public StreamListener {
 public:
  Status OnSchema(const SchemaPtr& schema) override;
  Status OnRecordBatch(RecordBatchPtr batch) override;
  Status OnEndOfStream() override;
  const SchemaPtr& schema() const { return schema_; }
  const std::vector<RecordBatchPtr>& batches() const { return batches_; }
  bool ended() const { return ended_; }

 private:
  SchemaPtr schema_;
  std::vector<RecordBatchPtr> batches_;
  bool ended_ = false;
};

/// Incremental stream decoder: feed bytes as they arrive, in pieces of any
/// size (even one byte); each message is decoded as soon as it is complete.
/// After an error the decoder refuses further input. Not thread-safe.
class ALKAID_EXPORT StreamDecoder {
 public:
  StreamDecoder(std::shared_ptr<StreamListener> listener, IpcReadOptions options = {});
  ~StreamDecoder();
  StreamDecoder(const StreamDecoder&) = delete;
  StreamDecoder& operator=(const StreamDecoder&) = delete;

  /// Copies the bytes it needs to keep.
  Status Consume(const uint8_t* data, int64_t size);
  /// Keeps slices of `buffer` where a message lies wholly inside it (no
  /// copy), copies otherwise.
  Status Consume(std::shared_ptr<Buffer> buffer);
  /// Bytes needed to make progress (to finish the current length prefix,
  /// metadata or body). 0 after end of stream.
  int64_t next_required_size() const;
  /// Null until the schema message has been decoded.
  SchemaPtr schema() const;
  const DictionaryMemo& dictionary_memo() const;
  ReadStats stats() const;
  /// Errors if the input stopped in the middle of a message (call when the
  /// source is exhausted); OK at a message boundary.
  Status Finish();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

/// Reads a stream from an InputStream, one batch at a time.
class ALKAID_EXPORT RecordBatchStreamReader {
 public:
  virtual ~RecordBatchStreamReader() = default;
  /// Reads the schema message. `stream` must outlive the reader.
  static Result<std::unique_ptr<RecordBatchStreamReader>> Open(InputStream* stream,
                                                               const IpcReadOptions& options = {});
  /// Same, sharing ownership of the stream.
  static Result<std::unique_ptr<RecordBatchStreamReader>> Open(std::shared_ptr<InputStream> stream,
                                                               const IpcReadOptions& options = {});

  virtual const SchemaPtr& schema() const = 0;
  /// The next batch (applying the dictionary batches before it), or null at
  /// the end of the stream.
  virtual Result<RecordBatchPtr> ReadNext() = 0;
  /// Reads all remaining batches.
  Result<std::vector<RecordBatchPtr>> ReadAll();
  /// Dictionary ids of the dictionary-encoded fields and current dictionaries.
  virtual const DictionaryMemo& dictionary_memo() const = 0;
  virtual ReadStats stats() const = 0;
};

/// Random access to the batches of an IPC file.
///
/// Layout: magic ("ALKAID1" or "ARROW1") padded to 8 bytes, the stream
/// (schema, dictionaries, batches, EOS), the Footer flatbuffer, its int32
/// length, and the magic again (unpadded). Dictionaries are read in footer
/// order when the file is opened; a dictionary replacement is an error, deltas
/// apply in order. Thread-compatible: concurrent ReadRecordBatch calls on one
/// reader are safe.
class ALKAID_EXPORT RecordBatchFileReader {
 public:
  static Result<std::shared_ptr<RecordBatchFileReader>> Open(std::shared_ptr<RandomAccessFile> file,
                                                             const IpcReadOptions& options = {});
  ~RecordBatchFileReader();

  const SchemaPtr& schema() const;
  int num_record_batches() const;
  int num_dictionaries() const;
  /// Batch `i` (0-based), decoded from its footer block.
  Result<RecordBatchPtr> ReadRecordBatch(int i) const;
  /// Which magic the file carries.
  FileMagic magic() const;
  MetadataVersion version() const;
  /// The footer's custom_metadata (may be null); the schema's is in schema().
  const MetadataPtr& footer_metadata() const;
  const DictionaryMemo& dictionary_memo() const;

 private:
  struct Impl;
  explicit RecordBatchFileReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace alkaid::format::ipc
