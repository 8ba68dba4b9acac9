#pragma once

/// \file
/// Not API: what ChannelConsumer::TryReceiveHot, its receive's common case
/// inlined into the caller's frame, reads. A layout shared by libshm and
/// the libraries built with it (the same SONAME): a program built against
/// one release's headers runs with that release's libraries only. Only
/// ChannelConsumer (its inline TryReceiveHot and its own .cc files) reads
/// or writes these; see docs/ARCHITECTURE.md, "The inline receive".

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "alkaid/common/export.h"
#include "alkaid/shm/hot_slot.h"

namespace alkaid::shm::internal {

/// Wakes a producer waiting for room on this consumer's cursor word
/// (`cursor`, in the consumer's own segment). Out of line: rare.
ALKAID_EXPORT void WakeRoomWaiter(std::atomic<uint64_t>* cursor);

/// A consumer's hot state, in its ChannelConsumer (private memory, one
/// thread: the consumer's). Everything taken from the shared header was
/// checked at open (ReadChannelHeader) and is copied here; the slot's
/// numbers are checked against these bounds on every message.
struct ConsumerHot {
  // The slots (the channel segment, read-only): slot s at
  // slots + (s & mask) * slot_size.
  const std::byte* slots = nullptr;
  uint64_t mask = 0;
  uint64_t slot_size = 0;
  // The channel segment's data: a body in its arena or a fixed block lies
  // at data + the slot's body_offset.
  const std::byte* data = nullptr;
  // The next sequence to read, and the one last stored in our segment
  // (the producer's flow control; kBlockProducer stores it once caught up
  // or every flush_every messages).
  uint64_t cursor = 0;
  uint64_t stored_cursor = 0;
  uint64_t flush_every = 1;
  // Our cursor word (own segment) and the producer's wait for room
  // (channel header line 4: 1 + the index of the consumer it waits on, and
  // the sequence that consumer's cursor must reach).
  std::atomic<uint64_t>* own_cursor = nullptr;
  const std::atomic<uint64_t>* space_waiting = nullptr;
  const std::atomic<uint64_t>* space_target = nullptr;
  uint64_t waiter = 0;  // our index + 1
  // Our hold counts of the fixed blocks (own segment), and the geometry a
  // fixed block and an arena block are checked against.
  std::atomic<uint32_t>* holds = nullptr;
  uint64_t fixed_offset = 0;
  uint32_t fixed_count = 0;
  uint32_t fixed_size = 0;
  // Per fixed block, where its hold count lies among ours (HoldIndex;
  // fixed_count entries, our own memory).
  const uint32_t* hold_index = nullptr;
  uint64_t arena_offset = 0;
  uint64_t arena_end = 0;  // arena_offset + the initial arena's size
  uint32_t block_count = 0;
  // TryReceiveHot may run: accepted, not closed, kBlockProducer.
  bool ready = false;
  // The consumer's return queue (a received body's ChannelBlock keeps a
  // reference; compared only).
  const void* returns = nullptr;

  const HotSlotData* Slot(uint64_t sequence) const {
    return reinterpret_cast<const HotSlotData*>(slots + (sequence & mask) * slot_size);
  }

  /// Stores our cursor and wakes a producer waiting on it for room.
  void StoreCursor(uint64_t c) {
    stored_cursor = c;
    // seq_cst: the Dekker pair with the producer's seq_cst store of
    // space_waiting before its reload of this cursor (WaitForRoom); with
    // kDropOldest also the pair with its seq_cst odd store when it laps.
    own_cursor->store(c, std::memory_order_seq_cst);
    if (space_waiting->load(std::memory_order_seq_cst) == waiter &&
        c >= space_target->load(std::memory_order_relaxed)) {
      WakeRoomWaiter(own_cursor);
    }
  }
};

}  // namespace alkaid::shm::internal
