#pragma once

/// \file
/// Not API: a channel slot's header, and the rule for letting go of a fixed
/// block, as the inline receive
/// (ChannelConsumer::TryReceiveHot, consumer_hot.h) and the inline publish
/// (ChannelWriter's Loan and Publish, producer_hot.h) read and write it. A
/// layout shared by libshm and the libraries built with it (the same
/// SONAME): channel_layout_internal.h checks each offset against the
/// private ChannelSlotData (docs/SHM_LAYOUT.md, "Channel").

#include <atomic>
#include <cstdint>

namespace alkaid::shm::internal {

/// The fields of the private ChannelSlotData at the same offsets. In the
/// producer's segment (mapped read-only by its consumers).
struct HotSlotData {
  std::atomic<uint64_t> sequence;
  std::atomic<uint64_t> body_offset;
  std::atomic<uint64_t> body_length;
  std::atomic<uint64_t> block;
  std::atomic<uint32_t> payload_size;
  std::atomic<uint32_t> shape;
  std::atomic<uint64_t> user;
  std::atomic<uint32_t> extension;
  uint8_t pad[4];
  std::atomic<uint64_t> publish_ns;
};

/// A slot's block word names fixed block i as kHotFixedBlockFlag | i (the
/// private kFixedBlockFlag; checked equal in channel_layout_internal.h).
inline constexpr uint32_t kHotFixedBlockFlag = uint32_t{1} << 31;

/// Lets go of a hold on a fixed block (`hold`: the consumer's count of it);
/// any thread. A load and a store, not a locked decrement: the count's
/// changes are ordered by themselves. Its increment (the consumer thread's,
/// when it claimed the message) happened before this holder had the block,
/// and the next increment of the same count comes only after the producer
/// saw this decrement leave it at 0 and lent the block again. Two holders
/// of one block at once (a producer that named a held block in a second
/// slot) could lose a decrement: the count then stays above 0 and that
/// producer never reuses the block; nothing else reads the count.
inline void DropHold(std::atomic<uint32_t>* hold) {
  // Release: our reads of the body happen before the producer's (seq_cst)
  // load that sees the count at 0 and lends the block again.
  hold->store(hold->load(std::memory_order_relaxed) - 1, std::memory_order_release);
}

}  // namespace alkaid::shm::internal
