#pragma once

/// \file
/// The words every client of the broker shares: where the broker listens,
/// what a topic's messages carry, and the settings a topic is created with.

#include <cstdint>
#include <string>

#include "alkaid/common/export.h"
#include "alkaid/shm/delivery.h"

namespace alkaid::client {

/// The socket a client connects to when none is given: $ALKAID_BROKER_SOCKET
/// if set, else $XDG_RUNTIME_DIR/alkaid/broker.sock, else
/// /tmp/alkaid-<uid>/broker.sock (the daemon's default).
ALKAID_EXPORT std::string DefaultBrokerSocket();

/// What each message of a topic carries.
enum class TopicKind : uint8_t {
  /// An Arrow-format record batch, received zero-copy as a RecordBatch.
  kRecordBatch = 0,
  /// An UnsafeRow row batch (format/unsafe_row.h), received zero-copy as
  /// bytes (ReceivedRows) and convertible to a RecordBatch.
  kUnsafeRow = 1,
};

/// "record-batch" or "unsafe-row".
ALKAID_EXPORT const char* TopicKindName(TopicKind kind);

/// Settings of a topic, used when the topic is created (the first
/// producer's or CreateTopic's options win; later ones are ignored).
///
/// The deprecated members at the end are the previous release's names,
/// kept for one release: writing one warns at compile time, and each is
/// honoured when its new name is left at 0. (The pragmas keep the struct's
/// implicit constructors and copies from warning; only a use does.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
struct TopicOptions {
  /// Slots of each producer's channel: a power of two >= 2, or 0 for the broker's
  /// default (1024).
  uint32_t slot_count = 0;
  /// Bytes of each producer's initial arena, or 0 for the broker's default
  /// (1 MiB). The arena grows by extension segments when a batch does not
  /// fit (each granted by the broker, within its shm limit), and gives them
  /// back when they are no longer used.
  uint64_t arena_bytes = 0;
  /// The most each producer's arena may grow to, initial arena included, or
  /// 0 for the broker's default (2 GiB, or its shm limit if smaller). A
  /// batch larger than this cannot be published (CapacityError naming both
  /// sizes); a value at most arena_bytes: the arena does not grow.
  uint64_t max_arena_bytes = 0;
  /// What a producer does when a consumer lags every slot behind.
  shm::SlowConsumerPolicy policy = shm::SlowConsumerPolicy::kBlockProducer;
  /// What the messages carry, for BrokerClient::CreateTopic; rows need a
  /// schema format::CheckRowSchema accepts. Producer::Open and
  /// RowProducer::Open do not read it: their type says the kind
  /// (kRecordBatch, kUnsafeRow), and a topic of the other kind refuses them.
  TopicKind kind = TopicKind::kRecordBatch;
  /// Whether producers stamp each message with the time they publish it
  /// (CLOCK_REALTIME nanoseconds, in the channel's slot): consumers read it
  /// as BatchOrigin::publish_ns (Consumer::Next), `alkaid hz` shows
  /// publish-to-receive latency, `alkaid record` keeps it. Costs a clock
  /// read (vDSO, no system call) per publish; off (the default) costs
  /// nothing but one branch, and consumers read 0.
  bool publish_timestamps = false;

  /// Deprecated: slot_count.
  [[deprecated("TopicOptions::ring_slots is slot_count")]] uint32_t ring_slots = 0;
  /// Deprecated: arena_bytes.
  [[deprecated("TopicOptions::segment_bytes is arena_bytes")]] uint64_t segment_bytes = 0;
  /// Deprecated: max_arena_bytes.
  [[deprecated("TopicOptions::max_segment_bytes is max_arena_bytes")]] uint64_t max_segment_bytes =
      0;
};
#pragma GCC diagnostic pop

}  // namespace alkaid::client
