#pragma once

/// \file
/// Subscribing to a topic of the broker.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/shm/ring.h"

namespace alkaid::client {

/// Options for Consumer::Open().
struct ConsumerOptions {
  /// Broker socket; empty: DefaultBrokerSocket().
  std::string socket_path;
  /// Start at the oldest batch the producers' rings still hold instead of
  /// the next one published. Not available yet (NotImplemented): libshm's
  /// RingConsumer registers at the current write position only.
  bool from_oldest = false;
  /// Receive only these columns. Not available yet (NotImplemented); empty
  /// means every column.
  std::vector<std::string> columns;
  /// How the consumer waits for data (see shm::WaitMode).
  shm::WaitMode wait_mode = shm::WaitMode::kSpinThenBlock;
};

/// One subscription to a topic: receives every batch every producer of the
/// topic publishes after the subscription (per producer in order),
/// zero-copy.
///
/// End of stream: once this consumer has seen at least one producer and
/// every producer it saw has finished — closed its stream, or died (the
/// broker or the consumer's own pid check notices within a second) — and
/// everything committed was read, Next gives EndOfStream. A consumer that
/// has seen no producer yet waits for one.
///
/// Thread safety: one thread at a time. Returned batches may be used and
/// dropped on any thread, and outlive the consumer.
class ALKAID_EXPORT Consumer {
 public:
  ~Consumer();  ///< Close()
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  /// Connects to the broker and subscribes to `topic` (KeyError if the
  /// broker has no such topic). The schema comes from the broker.
  static Result<std::unique_ptr<Consumer>> Open(const std::string& topic,
                                                const ConsumerOptions& options = {});

  /// The next batch, waiting up to `timeout`: TimedOut if none came,
  /// EndOfStream (see above). The batch's buffers point into the
  /// producer's shared memory, which stays referenced until the batch and
  /// every array of it are dropped.
  Result<format::RecordBatchPtr> Next(std::chrono::nanoseconds timeout);

  /// The next batch if one is there; null if none (yet); EndOfStream as
  /// Next.
  Result<format::RecordBatchPtr> TryNext();

  /// Detaches from the broker and the rings. Idempotent.
  Status Close();

  const std::string& topic() const;
  const format::SchemaPtr& schema() const;
  /// Producers this consumer currently reads from.
  std::size_t producer_count() const;
  /// Batches lost to ring overwrites (kDropOldest topics).
  uint64_t lost() const;

 private:
  struct Impl;
  explicit Consumer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace alkaid::client
