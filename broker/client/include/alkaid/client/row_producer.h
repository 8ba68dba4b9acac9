#pragma once

/// \file
/// Publishing UnsafeRow row batches to a row topic of the broker.

#include <cstdint>
#include <memory>
#include <span>
#include <stop_token>
#include <string>

#include "alkaid/client/producer.h"
#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/record_batch.h"

namespace alkaid::client {

/// One producer of a row topic (TopicKind::kUnsafeRow, docs/CLIENT.md "Row
/// topics"): each message is an UnsafeRow row batch in a block of this
/// producer's channel arena. Everything but what it publishes is as
/// Producer: the same options (ProducerOptions), counters (ProducerStats),
/// consumer wait at Open, drain at Close, dead-consumer release, session
/// thread and broker-outage behaviour; see there.
///
/// Thread safety: PublishRows, PublishRowBatch, Poll and Close from one
/// thread at a time. Errors are Status values; nothing throws.
class ALKAID_EXPORT RowProducer {
 public:
  ~RowProducer();  ///< Close()
  RowProducer(const RowProducer&) = delete;
  RowProducer& operator=(const RowProducer&) = delete;

  /// Connects to the broker, creates row topic `topic` with `schema` (or
  /// checks that the existing topic is a row topic with this schema:
  /// Invalid naming both otherwise), attaches as a producer and creates
  /// the segments. `schema` must be one format::CheckRowSchema accepts
  /// (TypeError naming the field otherwise). IOError if no broker answers.
  static Result<std::unique_ptr<RowProducer>> Open(const std::string& topic,
                                                   format::SchemaPtr schema,
                                                   const ProducerOptions& options = {});

  /// Encodes every row of `batch` (the topic's schema) as UnsafeRows
  /// straight into a shared-memory block of exactly the row batch's size
  /// and publishes it, copying nothing (RowPublisher::PublishRows).
  Status PublishRows(const format::RecordBatch& batch);

  /// Publishes an encoded row batch (size-prefixed UnsafeRows of the
  /// topic's schema), copied once into shared memory. Invalid for broken
  /// size prefixes.
  Status PublishRowBatch(std::span<const uint8_t> row_batch);

  /// Ends the stream, as Producer::Close. Idempotent; works when the broker
  /// is gone.
  Status Close();

  /// As Producer::set_stop: replaces ProducerOptions::stop for the waits
  /// that begin after this call.
  void set_stop(std::stop_token stop);

  const std::string& topic() const;
  const format::SchemaPtr& schema() const;
  ProducerStats stats() const;

  /// As Producer::Poll, for an idle producer.
  void Poll();
  /// True while the producer is not registered with a broker; the data
  /// path works regardless.
  bool broker_lost() const;
  /// Whether the channel segment is backed by huge pages
  /// (ProducerOptions::huge_pages obtained them).
  bool huge_pages() const;
  /// Deprecated (the previous release's name): huge_pages().
  [[deprecated("body_segment_huge_pages() is huge_pages()")]] bool body_segment_huge_pages() const {
    return huge_pages();
  }

 private:
  explicit RowProducer(std::unique_ptr<internal::ProducerImpl> impl);
  std::unique_ptr<internal::ProducerImpl> impl_;
};

}  // namespace alkaid::client
