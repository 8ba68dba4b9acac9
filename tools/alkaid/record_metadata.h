#pragma once

// The custom metadata `alkaid record` puts on every recorded batch
// (docs/BROKER.md, "Recording and replaying"). Values are decimal integers.

#include <string_view>

namespace alkaid::tools {

/// When the recorder received the batch: nanoseconds since the epoch
/// (CLOCK_REALTIME).
inline constexpr std::string_view kReceiveTimeKey = "alkaid.receive_time_ns";
/// When the producer published it (CLOCK_REALTIME ns); only on topics created
/// with publish timestamps.
inline constexpr std::string_view kPublishTimeKey = "alkaid.publish_time_ns";
/// The producer, as the broker numbered it, and its process.
inline constexpr std::string_view kProducerIdKey = "alkaid.producer_id";
inline constexpr std::string_view kProducerPidKey = "alkaid.producer_pid";
/// The batch's sequence in its producer's channel.
inline constexpr std::string_view kSequenceKey = "alkaid.sequence";
/// Batches of that producer lost just before this one (a drop-oldest gap).
inline constexpr std::string_view kLostBeforeKey = "alkaid.lost_before";

/// Every key above: what replay removes before publishing.
inline constexpr std::string_view kRecordKeys[] = {kReceiveTimeKey, kPublishTimeKey,
                                                   kProducerIdKey,  kProducerPidKey,
                                                   kSequenceKey,    kLostBeforeKey};

}  // namespace alkaid::tools
