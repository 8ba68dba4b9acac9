#pragma once

/// \file
/// A small client for administering the alkaid-broker daemon: create a
/// topic, list topics, the broker's statistics. Producer and Consumer
/// (producer.h, consumer.h) use the same connection machinery.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "alkaid/client/topic.h"
#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/type.h"
#include "alkaid/shm/delivery.h"

namespace alkaid::client {

/// One producer of a topic, as the broker knows it (`alkaid top`'s expanded
/// view): its process and user, its figures as it last reported them (every
/// 500 ms, as of its last publish or Poll), and its shared memory.
struct TopicProducerStatus {
  uint64_t id = 0;
  uint32_t pid = 0;
  uint32_t uid = 0;
  uint64_t published = 0;
  /// Messages its slowest consumer has yet to read.
  uint64_t depth = 0;
  uint64_t drops = 0;
  /// Bodies its consumers hold, read or not.
  uint64_t held = 0;
  /// Its channel and arena extensions, as the broker counts them.
  uint64_t shm_bytes = 0;
  /// Its arena now (the initial arena and every extension), as last reported.
  uint64_t arena_bytes = 0;
  /// Body bytes it published, as last reported (0 from a client of an
  /// earlier release): a running count; `alkaid top` shows its rate.
  uint64_t published_bytes = 0;
  /// Its channel's fixed blocks (ProducerOptions::fixed_block_bytes, rounded
  /// up to 64, and their count), counted in shm_bytes; 0 without them.
  uint64_t fixed_block_bytes = 0;
  uint32_t fixed_block_count = 0;
};

/// One consumer of a topic: its process and user, how it waits, and what
/// the topic's producers last reported of it (lag the largest over the
/// producers, the rest summed). Each Consumer of a process has figures of
/// its own: its producers report it by the token it wrote into its segment
/// (docs/BROKER.md, "Watching it live"). A consumer or producer of a
/// release before tokens is matched by pid alone: a process of that release
/// with two consumers on one topic shows their sum for each.
struct TopicConsumerStatus {
  uint64_t id = 0;
  uint32_t pid = 0;
  uint32_t uid = 0;
  /// How it waits; empty if its client did not say (an older release).
  std::optional<shm::WaitMode> wait_mode;
  /// False until a producer reported it (none yet, or no producer).
  bool reported = false;
  /// Messages it has yet to read, the largest over the producers.
  uint64_t lag = 0;
  /// Messages it lost (kDropOldest), summed over the producers.
  uint64_t drops = 0;
  /// Bodies it holds (received, not returned) and their arena bytes.
  uint64_t held_blocks = 0;
  uint64_t held_bytes = 0;
  /// Body bytes of the messages before its cursor in each producer's
  /// channel (read, or lost to kDropOldest), summed over the producers: a
  /// running count from each channel's first message, to take rates of
  /// (`alkaid top`'s MB/s per consumer), not what it received since it came.
  uint64_t read_bytes = 0;
};

/// What `alkaid topics` shows about one topic. The deprecated members are
/// the previous release's names of three of them (kept for one release,
/// filled with the same values; reading one warns at compile time).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
struct TopicStatus {
  std::string name;
  /// The topic's schema; null for the topics a list leaves it out of (the
  /// broker lists schemas while their serialized sizes sum to at most 1 MiB,
  /// so that the reply fits one control frame).
  format::SchemaPtr schema;
  uint32_t slot_count = 0;
  uint64_t arena_bytes = 0;      ///< each producer's initial arena
  uint64_t max_arena_bytes = 0;  ///< what each producer's arena may grow to
  shm::SlowConsumerPolicy policy = shm::SlowConsumerPolicy::kBlockProducer;
  TopicKind kind = TopicKind::kRecordBatch;
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
  /// Shared memory the topic's producers hold now: their channels and the
  /// extensions of their arenas the broker granted.
  uint64_t shm_bytes = 0;
  /// Whether producers stamp publish times (TopicOptions::publish_timestamps).
  bool publish_timestamps = false;
  /// Body bytes published so far, summed over its producers, gone ones
  /// included (as last reported).
  uint64_t published_bytes = 0;
  /// Each producer and each consumer (empty from a broker of an earlier
  /// release, which does not list them).
  std::vector<TopicProducerStatus> producer_list;
  std::vector<TopicConsumerStatus> consumer_list;

  /// Deprecated: slot_count.
  [[deprecated("TopicStatus::ring_slots is slot_count")]] uint32_t ring_slots = 0;
  /// Deprecated: arena_bytes.
  [[deprecated("TopicStatus::segment_bytes is arena_bytes")]] uint64_t segment_bytes = 0;
  /// Deprecated: max_arena_bytes.
  [[deprecated("TopicStatus::max_segment_bytes is max_arena_bytes")]] uint64_t max_segment_bytes =
      0;
};
#pragma GCC diagnostic pop

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
  /// Bytes of shared memory the attached producers hold (each producer's
  /// arena and channel), counted against shm_limit.
  uint64_t reserved_bytes = 0;
  /// The most producers may hold together; 0: no limit. Chosen at the
  /// broker's start: --shm-limit, or half of /dev/shm's size.
  uint64_t shm_limit = 0;
  uint64_t rejected_frames = 0;
  /// Where shm_limit came from: "--shm-limit", "half of /dev/shm's 64 MiB".
  /// Empty from a broker that does not say.
  std::string shm_limit_origin;
  /// The size of the file system holding the segments (/dev/shm) and what
  /// is free on it as the broker answered, whoever holds the rest; 0 if
  /// unknown.
  uint64_t shm_total = 0;
  uint64_t shm_free = 0;
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
  /// Invalid, naming the limit, for a schema whose IPC Schema message
  /// exceeds 1 MiB.
  Result<bool> CreateTopic(const std::string& name, const format::SchemaPtr& schema,
                           const TopicOptions& options = {});

  /// Removes topic `name`, which must have no producer (Invalid, naming
  /// their pids, otherwise; KeyError if there is no such topic). Its
  /// consumers are detached: their Next returns EndOfStream ("topic removed
  /// by pid N") once they have read what they received before. A producer
  /// may then create the topic again, with another schema if it likes.
  Status RemoveTopic(const std::string& name);

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
