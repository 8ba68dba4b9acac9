#pragma once

/// \file
/// Not API: a channel slot's header, and the rule for letting go of a fixed
/// block, as the inline receive
/// (ChannelConsumer::TryReceiveHot, consumer_hot.h) and the inline publish
/// (ChannelWriter's Loan and Publish, producer_hot.h) read and write it. A
/// layout shared by libshm and the libraries built with it (the same
/// SONAME), and the declaration of the private ChannelSlotData's fields
/// (docs/SHM_LAYOUT.md, "Channel").

#include <atomic>
#include <cstdint>

namespace alkaid::shm::internal {

/// A slot's header (the private ChannelSlotData is this, padded to its
/// cache line; docs/SHM_LAYOUT.md, "Channel"). In the producer's segment,
/// mapped read-only by its consumers.
struct HotSlotData {
  /// 2n+1 while message n is written, 2n+2 once committed (a seqlock).
  std::atomic<uint64_t> sequence;
  /// Payload offset of the body's first byte; its length.
  std::atomic<uint64_t> body_offset;
  std::atomic<uint64_t> body_length;
  /// generation << 32 | descriptor of the body's block; 0 without body.
  std::atomic<uint64_t> block;
  /// Inline payload bytes; the shape id (0: none) the message refers to.
  std::atomic<uint32_t> payload_size;
  std::atomic<uint32_t> shape;
  /// A word for the layer above (ChannelProducer::Publish's `user`).
  std::atomic<uint64_t> user;
  /// The id of the extension segment holding the body (0: the channel
  /// segment's arena); body_offset's high bits say which table entry.
  std::atomic<uint32_t> extension;
  uint8_t pad[4];
  /// When the message was published: CLOCK_REALTIME nanoseconds, written by
  /// producers of a channel with ChannelOptions::stamp_publish_time; never
  /// written (0, as the segment was created) otherwise. It took 8 of the 12
  /// padding bytes the slot had: the slot's size and every other offset are
  /// unchanged, so the layout version is too (docs/COMPATIBILITY.md).
  std::atomic<uint64_t> publish_ns;
};

/// A slot's block word names fixed block i as kHotFixedBlockFlag | i (the
/// private kFixedBlockFlag; checked equal in channel_layout_internal.h).
inline constexpr uint32_t kHotFixedBlockFlag = uint32_t{1} << 31;

/// A consumer's hold counts of the fixed blocks (layout version 5) lie in
/// 2^lines_log2 cache lines of 16 counts, fixed block i's in line
/// i mod 2^lines_log2, word i >> lines_log2: consecutive blocks (the order
/// a producer lends them in) are in different lines, so the count the
/// producer reads before it lends a block again is not in the line the
/// consumer changes at that moment (the count of the message it receives,
/// and the one it drops).
inline constexpr uint32_t kHoldsPerLine = 16;

/// lines_log2 for `fixed_count` blocks: the fewest lines (a power of two)
/// of kHoldsPerLine counts that hold them all (0 for none or 16 at most).
constexpr uint32_t HoldLinesLog2(uint32_t fixed_count) {
  uint32_t log2 = 0;
  while ((uint64_t{kHoldsPerLine} << log2) < fixed_count) ++log2;
  return log2;
}

/// The index of fixed block i's hold count among a consumer's counts.
[[gnu::always_inline]] constexpr uint32_t HoldIndex(uint32_t i, uint32_t lines_log2) {
  return ((i & ((uint32_t{1} << lines_log2) - 1)) * kHoldsPerLine) | (i >> lines_log2);
}

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
