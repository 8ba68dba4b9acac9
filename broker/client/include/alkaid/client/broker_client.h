#pragma once

/// \file
/// Talking to the alkaid-broker daemon: where it listens, topic options,
/// and a small client for administration (create a topic, list topics,
/// broker statistics). Producer and Consumer (producer.h, consumer.h) use
/// the same connection machinery.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/type.h"
#include "alkaid/shm/ring.h"

namespace alkaid::client {

/// The socket a client connects to when none is given: $ALKAID_BROKER_SOCKET
/// if set, else $XDG_RUNTIME_DIR/alkaid/broker.sock, else
/// /tmp/alkaid-<uid>/broker.sock (the daemon's default).
ALKAID_EXPORT std::string DefaultBrokerSocket();

/// What each message of a topic carries.
enum class PayloadKind : uint8_t {
  /// An Arrow-format record batch, received zero-copy as a RecordBatch.
  kRecordBatch = 0,
  /// An UnsafeRow row batch (format/unsafe_row.h), received zero-copy as
  /// bytes (ReceivedRows) and convertible to a RecordBatch.
  kUnsafeRow = 1,
};

/// "record-batch" or "unsafe-row".
ALKAID_EXPORT const char* PayloadKindName(PayloadKind kind);

/// Settings of a topic, used when the topic is created (the first
/// producer's or CreateTopic's options win; later ones are ignored).
struct TopicOptions {
  /// Ring slots per producer: a power of two >= 2, or 0 for the broker's
  /// default (1024).
  uint32_t ring_slots = 0;
  /// Bytes of each producer's body segment, or 0 for the broker's default
  /// (64 MiB). A batch larger than this cannot be published.
  uint64_t segment_bytes = 0;
  /// What a producer does when a consumer lags a full ring behind.
  shm::SlowConsumerPolicy policy = shm::SlowConsumerPolicy::kBlockProducer;
  /// What the messages carry. A producer publishes this kind (and is
  /// refused, Invalid, by a topic of another kind); rows need a schema
  /// format::CheckRowSchema accepts.
  PayloadKind payload_kind = PayloadKind::kRecordBatch;
};

/// What `alkaid topics` shows about one topic.
struct TopicStatus {
  std::string name;
  /// The topic's schema; null for the topics a list leaves it out of (the
  /// broker lists schemas while their serialized sizes sum to at most 1 MiB,
  /// so that the reply fits one control frame).
  format::SchemaPtr schema;
  uint32_t ring_slots = 0;
  uint64_t segment_bytes = 0;
  shm::SlowConsumerPolicy policy = shm::SlowConsumerPolicy::kBlockProducer;
  PayloadKind payload_kind = PayloadKind::kRecordBatch;
  uint32_t producers = 0;
  uint32_t consumers = 0;
  /// Messages published so far (as last reported by the producers).
  uint64_t published = 0;
  /// Messages the slowest consumer has yet to read, largest over producers.
  uint64_t depth = 0;
  /// Messages lost by slow consumers (kDropOldest topics).
  uint64_t drops = 0;
  /// Bodies the consumers hold, read or not (ProducerStats::held_by_consumers,
  /// summed over the producers, as last reported): batches a consumer still
  /// references, or exported to foreign code that has not released them.
  uint64_t held = 0;
};

/// A topic that does not exist yet but has consumers waiting for it
/// (ConsumerOptions::wait_for_topic).
struct AwaitedTopic {
  std::string name;
  /// Consumers waiting for it to be created.
  uint32_t consumers = 0;
};

/// The broker's own figures.
struct BrokerStatus {
  std::string name;
  uint32_t pid = 0;
  uint64_t uptime_ms = 0;
  uint32_t connections = 0;
  uint32_t topics = 0;
  uint32_t producers = 0;
  uint32_t consumers = 0;
  uint32_t segments = 0;
  uint64_t reserved_bytes = 0;
  uint64_t shm_limit = 0;
  uint64_t rejected_frames = 0;
};

/// An administrative connection to the broker.
///
/// Errors: IOError if the broker cannot be reached (the message names the
/// socket), the broker's own status otherwise. Thread safety: one thread
/// at a time.
class ALKAID_EXPORT BrokerClient {
 public:
  ~BrokerClient();
  BrokerClient(const BrokerClient&) = delete;
  BrokerClient& operator=(const BrokerClient&) = delete;

  /// Connects to `socket_path` (empty: DefaultBrokerSocket()).
  static Result<std::unique_ptr<BrokerClient>> Connect(const std::string& socket_path = "");

  /// Creates topic `name` with `schema`, or checks that an existing topic
  /// has that schema (Invalid otherwise). Returns true if it was created.
  /// NotImplemented for dictionary-encoded fields. Invalid, naming the
  /// limit, for a schema whose IPC Schema message exceeds 1 MiB.
  Result<bool> CreateTopic(const std::string& name, const format::SchemaPtr& schema,
                           const TopicOptions& options = {});

  /// Every topic the broker knows.
  Result<std::vector<TopicStatus>> ListTopics();

  /// Every topic that does not exist yet and has consumers waiting for it.
  Result<std::vector<AwaitedTopic>> ListAwaitedTopics();

  Result<BrokerStatus> Stats();

 private:
  struct Impl;
  explicit BrokerClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace alkaid::client
