#pragma once

/// \file
/// Not API: the producer's state that ChannelWriter's inline Loan and
/// Publish (their common case, inlined into the caller's frame) read and
/// write. A layout shared by libshm and the libraries built with it (the
/// same SONAME): a program built against one release's headers runs with
/// that release's libraries only. Only ChannelWriter's inline calls and
/// the producer's own .cc files touch it; see docs/ARCHITECTURE.md, "The
/// inline publish".

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "alkaid/shm/delivery.h"
#include "alkaid/shm/hot_slot.h"

namespace alkaid::shm::internal {

/// What the producer knows of fixed block i (ChannelOptions::
/// fixed_block_bytes). It is not in the block table: the slot's reference,
/// the loan's and the consumers' holds are kept here and in each
/// consumer's hold counts.
struct FixedBlockRecord {
  uint64_t sequence = 0;  ///< the message it carried last (while in flight)
  bool loaned = false;    ///< lent and not published yet
  bool loan_ref = false;  ///< a ChannelLoan names it (loaned, or kept after its publish)
  /// Where its hold count lies among each consumer's (HoldIndex), set once.
  uint32_t hold_index = 0;
};

/// The producer's record of its slots, which acceptance and closing read.
struct SlotRecord {
  /// The block of the message in each slot (by sequence & mask), slot_count
  /// entries: kNoBlock (UINT32_MAX) when it has no body or the slot let go
  /// of it; a fixed block as block_count + i.
  uint32_t* slot_block = nullptr;
  /// Sequence of the next message (= messages published).
  uint64_t next_sequence = 0;
};

/// The producer's hot state: the part of its ProducerState (which derives
/// from this; private memory, the producer thread only) that the data
/// path's common case reads and writes, in one place. The fields marked
/// immutable are copies of the channel's geometry made when it was
/// created; the rest is the one record of what it says (no other copy).
struct ProducerHot {
  // --- immutable
  std::byte* slot_base = nullptr;  ///< the first slot
  uint64_t mask = 0;               ///< slot_count - 1
  uint64_t slot_size = 0;          ///< bytes per slot
  uint64_t slot_count = 0;
  /// The channel segment's data: fixed block i at fixed_offset + i *
  /// fixed_size of it (before the arena).
  std::byte* channel_data = nullptr;
  uint64_t fixed_offset = 0;
  uint64_t fixed_size = 0;
  uint32_t fixed_count = 0;
  /// Descriptors below this are the block table's; from it on, fixed
  /// blocks (block_count + i).
  uint32_t block_count = 0;
  /// kDropOldest (else kBlockProducer).
  bool drop_oldest = false;
  /// The channel header's write_sequence (seq_cst after each publish).
  std::atomic<uint64_t>* write_sequence = nullptr;
  /// The registry's change counter (consumers bump it, release).
  const std::atomic<uint64_t>* registry_changes = nullptr;

  // --- the producer thread
  bool closed = false;
  SlotRecord slots;
  /// The registry's `changes` as last handled (ConsumerSet's).
  uint64_t registry_seen = 0;
  /// A lower bound of the counted consumers' cursors, at most
  /// slots.next_sequence (ConsumerSet keeps it: ScanMinCursor, acceptance,
  /// kDropOldest's overwrite).
  uint64_t min_cursor = 0;
  /// The counted consumers (accepted, not closed: room and new messages):
  /// each one's `waiting` word (its segment, read-only), in index order.
  uint32_t counted_count = 0;
  /// The accepted consumers (closed ones too): each one's fixed_count hold
  /// counts (its segment, read-only), in index order.
  uint32_t accepted_count = 0;
  const std::atomic<uint32_t>* counted_waiting[kMaxConsumers] = {};
  const std::atomic<uint32_t>* accepted_holds[kMaxConsumers] = {};

  // Fixed blocks: their records, the free ones (a LIFO stack, the warmest
  // on top) and the published ones (a ring in publish order, the oldest at
  // flight_head). Both hold fixed_count at most.
  FixedBlockRecord* fixed = nullptr;
  uint32_t* fixed_free = nullptr;
  uint32_t fixed_free_top = 0;
  uint32_t* fixed_flight = nullptr;
  uint32_t flight_head = 0;
  uint32_t flight_size = 0;

  /// ChannelStats' published and published_bytes.
  uint64_t published = 0;
  uint64_t published_bytes = 0;

  /// The common case of taking a fixed block, with no call: the oldest in
  /// flight when its slot was overwritten and it is free at once (every
  /// counted consumer is known to have passed it, or kDropOldest; no loan
  /// and no accepted consumer holds it), else, while the oldest still has
  /// its slot, the top of the free stack. False when neither is: the
  /// producer's TakeFixed must look (it scans the cursors, rotates held
  /// blocks, takes dropped loans back). Sets `*index` to the block (not
  /// lent yet) on true.
  [[gnu::always_inline]] bool TakeFixedAtOnce(uint32_t* index) {
    const uint32_t top = fixed_free_top;
    if (flight_size != 0) {
      const uint32_t i = fixed_flight[flight_head];
      FixedBlockRecord& b = fixed[i];
      if (b.sequence + slot_count < slots.next_sequence) {
        // min_cursor above its message: every counted consumer passed it
        // (below: perhaps not, which TakeFixed finds out).
        if (b.loan_ref || (!drop_oldest && min_cursor <= b.sequence)) return false;
        const uint32_t at = b.hold_index;
        for (uint32_t k = 0; k < accepted_count; ++k) {
          // seq_cst: as ProducerState::LookAtFixed's loads of the hold
          // counts (it names their partners).
          if (accepted_holds[k][at].load(std::memory_order_seq_cst) != 0) return false;
        }
        flight_head = flight_head + 1 == fixed_count ? 0 : flight_head + 1;
        --flight_size;
        // Its slot holds a later message: nothing there names it.
        *index = i;
        return true;
      }
    }
    if (top == 0) return false;
    fixed_free_top = top - 1;
    *index = fixed_free[top - 1];
    return true;
  }

  /// Whether a publish of the next message needs none of the general
  /// way's steps before its slot is written: the channel is open, no
  /// consumer changed its registration, no counted consumer is a whole
  /// ring behind (no lap: no wait for room, no overwrite), and the slot's
  /// old message has no arena block to let go of (none, or a fixed block).
  [[gnu::always_inline]] bool PublishesAtOnce() const {
    if (closed) return false;
    // Acquire: partner of the consumers' release increments (as
    // ConsumerSet::PollRegistry's load, which the general way makes).
    if (registry_changes->load(std::memory_order_acquire) != registry_seen) return false;
    const uint64_t n = slots.next_sequence;
    if (n - min_cursor >= slot_count && counted_count != 0) return false;
    return slots.slot_block[n & mask] >= block_count;
  }

  /// Whether a counted consumer announced it sleeps (an odd `waiting`):
  /// the general wake (ProducerState::WakeSleepers) then runs. Made after
  /// the seq_cst store of write_sequence.
  [[gnu::always_inline]] bool AnySleeper() const {
    for (uint32_t k = 0; k < counted_count; ++k) {
      // seq_cst: second half of the Dekker pair with the consumer's seq_cst
      // store of an odd episode before its seq_cst reload of write_sequence
      // (as ProducerState::WakeSleepers' load).
      if ((counted_waiting[k]->load(std::memory_order_seq_cst) & 1) != 0) return true;
    }
    return false;
  }
};

}  // namespace alkaid::shm::internal
