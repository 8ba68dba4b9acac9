#pragma once

/// \file
/// How messages reach a channel's consumers (channel.h): what a producer
/// does about a consumer that falls behind, how a consumer waits, and the
/// channel's limits.

#include <cstddef>
#include <cstdint>

namespace alkaid::shm {

/// Most consumers a channel can be created for.
inline constexpr uint32_t kMaxConsumers = 256;
/// Most slots a channel can be created with.
inline constexpr uint32_t kMaxSlots = uint32_t{1} << 24;
/// Largest inline payload per slot.
inline constexpr uint32_t kMaxInlinePayload = uint32_t{1} << 20;

/// What the producer does when the slot it needs still holds a message that
/// an active consumer has not read.
enum class SlowConsumerPolicy : uint32_t {
  kBlockProducer = 1,  ///< wait for the slowest active consumer, up to publish_timeout
  kDropOldest = 2,     ///< overwrite; the slow consumer sees a gap count
};

/// How a consumer waits for the next message.
enum class WaitMode : uint8_t {
  kBusyPoll,       ///< spin on the slot: lowest latency, one core busy, no system calls
  kBlock,          ///< sleep on a futex in shared memory until the producer wakes it
  kSpinThenBlock,  ///< spin `spin_iterations` times, then block (default)
};

}  // namespace alkaid::shm
