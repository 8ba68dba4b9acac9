#pragma once

/// \file
/// UnsafeRow row batches through a channel: the row path of
/// unsafe-row topics (docs/CLIENT.md, "Row topics").
///
/// Each message body is one row batch exactly as format/unsafe_row.h writes
/// it (every row behind its 4-byte big-endian size), placed in a block of
/// the producer's channel arena. The slot's inline payload is a 32-byte
/// record (src/row_record_internal.h). Consumers get a view of the
/// block: no byte of the rows is copied on the way, and the block stays
/// held while the view is.

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "alkaid/client/batch_subscriber.h"
#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/memory_pool.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/shm/channel.h"

namespace alkaid::client {

/// One received row batch.
///
/// `data` is a view of the producer's shared block (its bytes are not
/// copied); the block stays referenced (cross-process count) until `data`
/// and every buffer sliced from it are dropped, on any thread, even after
/// the consumer is gone. The row bytes are untrusted: Rows() checks the
/// size prefixes, ToRecordBatch() checks everything.
struct ALKAID_EXPORT ReceivedRows {
  /// The row batch: size-prefixed UnsafeRows, in shared memory.
  std::shared_ptr<format::Buffer> data;
  /// Rows in the batch, as the producer announced and the size prefixes
  /// confirm.
  int64_t num_rows = 0;
  /// The topic's full schema (what the rows encode).
  format::SchemaPtr row_schema;
  /// Indices of the columns ToRecordBatch() keeps (empty: all), in order.
  std::vector<int> columns;
  /// Channel sequence of the message, and messages lost just before it
  /// (kDropOldest channels only).
  uint64_t sequence = 0;
  uint64_t lost_before = 0;

  /// Views of each row (without size prefix) into `data`.
  Result<std::vector<std::string_view>> Rows() const;

  /// Decodes the rows into a record batch of format::RowOutputSchema(
  /// row_schema), restricted to `columns` when set (rows interleave their
  /// fields, so every field is decoded and the others are dropped).
  /// Allocates from `pool`; the result does not refer to shared memory.
  Result<format::RecordBatchPtr> ToRecordBatch(
      format::MemoryPool* pool = format::default_memory_pool()) const;
};

/// Publishes row batches of one schema through a channel.
///
/// Thread safety: the producer thread only (like the channel).
class ALKAID_EXPORT RowPublisher {
 public:
  ~RowPublisher();
  RowPublisher(const RowPublisher&) = delete;
  RowPublisher& operator=(const RowPublisher&) = delete;

  /// `channel` must outlive the publisher. TypeError (naming the field) if `schema` has a type rows
  /// cannot carry (format::CheckRowSchema).
  static Result<std::unique_ptr<RowPublisher>> Create(shm::ChannelProducer* channel,
                                                      format::SchemaPtr schema);

  /// Encodes every row of `batch` (schema equal to the publisher's) as
  /// UnsafeRows straight into a fresh block and publishes it: the batch is
  /// sized (format::EncodedRowBatchSize), a block of exactly that size is
  /// allocated and the rows are written in place
  /// (format::EncodeRowBatchInto). Zero-copy like record-batch bodies: no
  /// private buffer, no memcpy of the body; adds nothing to copied_bytes().
  Status PublishRows(const format::RecordBatch& batch);

  /// Publishes an already encoded row batch (size-prefixed rows of the
  /// publisher's schema). The bytes live in the caller's memory, so they are
  /// copied once into a block (counted in copied_bytes()). The size prefixes
  /// are checked (format::SplitRowBatch); the row contents are not.
  Status PublishRowBatch(std::span<const uint8_t> row_batch);

  /// Body bytes copied into shared memory so far: PublishRowBatch's only
  /// (PublishRows writes the rows in place).
  uint64_t copied_bytes() const { return copied_bytes_; }
  const format::SchemaPtr& schema() const { return schema_; }

 private:
  RowPublisher(shm::ChannelProducer* channel, format::SchemaPtr schema)
      : channel_(channel), schema_(std::move(schema)) {}
  /// Publishes `loan`, whose first `body_length` bytes are a row batch of
  /// `num_rows` rows. On error the loan stays with the caller.
  Status Publish(shm::ChannelLoan* loan, uint64_t body_length, int64_t num_rows);

  shm::ChannelProducer* channel_;
  format::SchemaPtr schema_;
  uint64_t copied_bytes_ = 0;
};

/// Receives row batches published by a RowPublisher, in any process.
///
/// Every figure read from shared memory is checked: the record against
/// the slot, the body length against the block, the size prefixes against
/// the body. What more is checked is the Verification given to Open, as for
/// record batches (docs/RELIABILITY.md, "Trust between processes"):
/// - kStructure (the default): nothing more; `data` is a view of the shared
///   block. The rows' contents are read (and checked) only by whoever
///   decodes them, e.g. ReceivedRows::ToRecordBatch.
/// - kFull: every row also decoded against the schema (format::DecodeRowBatch:
///   every offset, size and nesting checked; the result is dropped), still
///   zero-copy. A buggy producer's rows are refused here; a hostile one can
///   rewrite them after the check.
/// - kPrivateCopy: the row batch copied into private memory and its block
///   returned at once, then the copy checked as kFull does: what the caller
///   reads cannot change after it was checked. One copy per row batch.
/// A bad message is an error for that message only.
///
/// Thread safety: Receive/TryReceive from one thread at a time; received
/// rows may be used and dropped anywhere.
class ALKAID_EXPORT RowSubscriber {
 public:
  ~RowSubscriber();
  RowSubscriber(const RowSubscriber&) = delete;
  RowSubscriber& operator=(const RowSubscriber&) = delete;

  /// Maps channel `channel_name` read-only and registers as its consumer.
  /// `columns`: indices kept by ReceivedRows::ToRecordBatch (empty: all);
  /// `verification`: what is checked of each row batch (see above).
  static Result<std::unique_ptr<RowSubscriber>> Open(
      std::string_view channel_name, format::SchemaPtr schema, std::vector<int> columns = {},
      const shm::ChannelConsumerOptions& options = {},
      Verification verification = Verification::kStructure);

  /// The next row batch, waiting up to `timeout`: TimedOut, EndOfStream,
  /// IOError (the producer died), or the error of a bad message (then
  /// skipped), also of one the Verification refuses (Invalid, naming the
  /// message, the row and the field).
  Result<ReceivedRows> Receive(std::chrono::nanoseconds timeout);
  /// The next row batch if one is there; null `data` otherwise.
  Result<ReceivedRows> TryReceive();

  /// When the producer published the row batch the last Receive or
  /// TryReceive returned: CLOCK_REALTIME ns, 0 unless the channel stamps
  /// publish times (BatchSubscriber::last_publish_ns).
  uint64_t last_publish_ns() const;

  const shm::ChannelConsumer& consumer() const;
  /// The same, for its doorbell (DoorbellFd, ArmDoorbell).
  shm::ChannelConsumer& mutable_consumer();

 private:
  struct Impl;
  explicit RowSubscriber(std::unique_ptr<Impl> impl);
  Result<ReceivedRows> Decode();
  std::unique_ptr<Impl> impl_;
};

}  // namespace alkaid::client
