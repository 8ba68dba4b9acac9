#pragma once

/// \file
/// Subscribing to a row topic of the broker.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "alkaid/client/consumer.h"
#include "alkaid/client/row_channel.h"
#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/record_batch.h"

namespace alkaid::client {

/// One subscription to a row topic (TopicKind::kUnsafeRow, docs/CLIENT.md
/// "Row topics"): receives the row batches of every producer of the topic,
/// per producer in publish order, zero-copy, as views of the producers'
/// shared blocks. Which batches, end of stream and broker outages are as
/// for Consumer; see there.
///
/// Options (ConsumerOptions): socket_path, wait_for_topic, from_oldest,
/// columns (kept by ReceivedRows::ToRecordBatch), wait_mode and
/// verification apply (row batches are checked as RowSubscriber does in
/// that mode: kFull decodes every row to check it, kPrivateCopy copies the
/// row batch into private memory first and returns its block at once);
/// `kind` is not read (a RowConsumer expects kUnsafeRow: a record-batch
/// topic refuses it, Invalid naming both), and neither is
/// max_exported_batches (row batches are not exported).
///
/// Thread safety: one thread at a time. Returned row batches may be used
/// and dropped on any thread, and outlive the consumer.
class ALKAID_EXPORT RowConsumer {
 public:
  ~RowConsumer();  ///< Close()
  RowConsumer(const RowConsumer&) = delete;
  RowConsumer& operator=(const RowConsumer&) = delete;

  /// Connects to the broker and subscribes to row topic `topic`, as
  /// Consumer::Open does.
  static Result<std::unique_ptr<RowConsumer>> Open(const std::string& topic,
                                                   const ConsumerOptions& options = {});

  /// The next row batch, zero-copy (a view of the producer's shared block,
  /// referenced while held), waiting up to `timeout`: TimedOut if none
  /// came, EndOfStream as Consumer::Next.
  Result<ReceivedRows> NextRows(std::chrono::nanoseconds timeout);
  /// The next row batch if one is there; null `data` if none (yet);
  /// EndOfStream as NextRows.
  Result<ReceivedRows> TryNextRows();

  /// Detaches from the broker and the channels. Idempotent.
  Status Close();

  const std::string& topic() const;
  /// The schema of ReceivedRows::ToRecordBatch's batches:
  /// format::RowOutputSchema of the topic's, restricted to
  /// ConsumerOptions::columns.
  const format::SchemaPtr& schema() const;
  /// The topic's full schema, as the producer published it.
  const format::SchemaPtr& topic_schema() const;
  /// Times this consumer re-subscribed after a broker restart.
  uint64_t reregistrations() const;
  /// Producers this consumer currently reads from.
  std::size_t producer_count() const;
  /// Row batches lost to slot overwrites (kDropOldest topics).
  uint64_t lost() const;
  /// Every counter at once (the export counters stay 0).
  ConsumerStats stats() const;

 private:
  explicit RowConsumer(std::unique_ptr<internal::ConsumerImpl> impl);
  std::unique_ptr<internal::ConsumerImpl> impl_;
};

}  // namespace alkaid::client
