#pragma once

// Private: everything a channel's producer keeps (ChannelProducer's state,
// shared with its loans): the channel segment it alone writes, its block
// table, its consumer set, its slots and the flow control between
// them (waiting for room, waking sleeping consumers, collecting space).
// Every member and call is for the producer thread, except the stack of
// dropped loans (PushReleased: any thread). Its base, ProducerHot
// (alkaid/shm/producer_hot.h), holds what ChannelWriter's inline Loan and
// Publish read and write: the slots' record, the fixed blocks, the
// consumers' bound and words, the published counts.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alkaid/common/status.h"
#include "alkaid/shm/channel.h"
#include "alkaid/shm/producer_hot.h"
#include "alkaid/shm/segment.h"
#include "block_table_internal.h"
#include "channel_internal.h"
#include "channel_layout_internal.h"
#include "consumer_set_internal.h"
#include "futex_internal.h"

namespace alkaid::shm::internal {

struct ProducerState : ProducerHot {
  /// Takes the channel's segments, their headers written (magic included).
  ProducerState(const ChannelOptions& options, std::string name, const ChannelGeometry& geometry,
                std::shared_ptr<Segment> segment, std::shared_ptr<Segment> registry);

  ChannelOptions options;
  std::string name;
  ChannelGeometry geometry;
  std::shared_ptr<Segment> segment;
  std::shared_ptr<Segment> registry;
  ChannelHeaderData* header = nullptr;
  // (slot_base, the first slot, slots, closed: ProducerHot's.)

  BlockTable blocks;
  ConsumerSet consumers;
  // slots.slot_block's entries.
  std::unique_ptr<uint32_t[]> slot_block_storage;
  uint32_t shapes_used = 0;
  // Dropped, extensions; published and published_bytes are ProducerHot's;
  // the rest is counted where it happens.
  ChannelStats stats;

  // --- the arena's extensions ------------------------------------------------
  // Arena a of a block's offset (offset >> kExtensionShift): 0 the channel
  // segment's, k + 1 extension table entry k. Where each starts in our
  // mapping, and the id a slot names it by (0 for the channel segment's).
  std::array<std::byte*, kMaxExtensions + 1> arena_base{};
  std::array<uint32_t, kMaxExtensions + 1> arena_id{};
  struct Extension {
    uint32_t id = 0;  // 0: entry unused
    uint64_t size = 0;
    std::shared_ptr<Segment> segment;
    bool idle = false;  // no block in use at the last look, since idle_since
    std::chrono::steady_clock::time_point idle_since;
  };
  std::array<Extension, kMaxExtensions> extensions;
  uint64_t arena_bytes = 0;  // the initial arena and every extension
  uint32_t next_extension_id = 1;
  std::chrono::steady_clock::time_point next_idle_check;

  // --- fixed blocks (ChannelOptions::fixed_block_bytes) -----------------------
  // Fixed block i lies at geometry.FixedBlockOffset(i) of the segment's data.
  // A loan and slots.slot_block name it as descriptor block_count + i (one
  // space with the block table's descriptors), a slot as kFixedBlockFlag | i.
  // It is not in the block table: the slot's reference, the loan's and the
  // consumers' holds are kept in its FixedBlockRecord (ProducerHot::fixed)
  // and in each consumer's hold counts.
  using FixedBlock = FixedBlockRecord;
  // ProducerHot's fixed, fixed_free (free fixed blocks, a LIFO stack: the
  // most recently freed, the warmest, first) and fixed_flight (the
  // published ones, a ring in publish order: the oldest, likely the first
  // every consumer passed, first). Both hold fixed_count at most: no
  // allocation after the constructor.
  std::unique_ptr<FixedBlock[]> fixed_storage;
  std::unique_ptr<uint32_t[]> fixed_free_storage;
  std::unique_ptr<uint32_t[]> fixed_flight_storage;

  bool IsFixed(uint32_t descriptor) const { return descriptor >= geometry.block_count; }

  /// Where published fixed block `i` stands. kUnread: some counted consumer
  /// has not passed its message (and, with kDropOldest, its slot was not
  /// overwritten yet). kHeld: passed, but a loan kept after its publish or
  /// an accepted consumer (closed ones too) still holds it. kFree: it may be
  /// lent again. The loads of the hold counts are seq_cst: with kDropOldest,
  /// the Dekker partner of a consumer's seq_cst increment, cursor store and
  /// reload of the slot's sequence (our odd store of the overwrite came
  /// first); with kBlockProducer they follow our acquire load of the cursor
  /// that passed the message, which the consumer stored after its increment.
  enum class FixedState : uint8_t { kUnread, kHeld, kFree };
  FixedState LookAtFixed(uint32_t i) {
    const FixedBlock& b = fixed[i];
    const uint64_t n = slots.next_sequence;
    const bool overwritten = b.sequence + geometry.slot_count < n;
    if (!(overwritten && options.policy == SlowConsumerPolicy::kDropOldest) &&
        consumers.min_cursor() <= b.sequence && consumers.ScanMinCursor(n) <= b.sequence) {
      return FixedState::kUnread;
    }
    if (b.loan_ref) return FixedState::kHeld;
    const uint32_t at = b.hold_index;
    for (uint32_t k : consumers.accepted_list()) {
      if (consumers[k].holds[at].load(std::memory_order_seq_cst) != 0) return FixedState::kHeld;
    }
    return FixedState::kFree;
  }

  /// A free fixed block (descriptor block_count + i; not lent yet), or
  /// kNoBlock. First moves the oldest published ones that may be reused to
  /// the free stack (up to 8 looks per call; one that is passed but still
  /// held goes to the back of the ring): those whose slot was overwritten,
  /// and, when no other is free, those of messages still in their slots
  /// (as the block table's slot references go under pressure: a consumer
  /// opened from_oldest then starts after them).
  [[gnu::always_inline]] uint32_t TakeFixed() {
    // The common case inline, as the writer's Loan takes it
    // (ProducerHot::TakeFixedAtOnce): the oldest block in flight left its
    // slot and is free (a consumer that keeps up), or it has not and
    // another is free. Everything else (a cursor to scan, a held block to
    // rotate, none free) is TakeFixedSlow's.
    uint32_t i;
    if (TakeFixedAtOnce(&i)) return geometry.block_count + i;
    return TakeFixedSlow();
  }

  /// TakeFixed's general way: up to 8 looks at the oldest in flight.
  [[gnu::noinline]] uint32_t TakeFixedSlow() {
    // Locals: the stores into the uint32_t arrays below could otherwise
    // alias every uint32_t member, and each would be loaded again.
    uint32_t* const stack = fixed_free;
    uint32_t* const flight = fixed_flight;
    uint32_t top = fixed_free_top;
    uint32_t head = flight_head;
    uint32_t size = flight_size;
    const uint32_t count = geometry.fixed_count;
    const uint64_t in_slots_from =
        slots.next_sequence - std::min<uint64_t>(slots.next_sequence, geometry.slot_count);
    for (uint32_t look = 0; look < 8 && size != 0; ++look) {
      const uint32_t i = flight[head];
      FixedBlock& b = fixed[i];
      // Still in its slot, and another block is free: kept for now.
      if (top != 0 && b.sequence >= in_slots_from) break;
      const FixedState state = LookAtFixed(i);
      if (state == FixedState::kUnread) break;  // the later ones are newer
      head = head + 1 == count ? 0 : head + 1;
      --size;
      if (state == FixedState::kFree) {
        // Its message, if still in its slot, has no body any more (a
        // consumer accepted from_oldest starts after it).
        uint32_t& in_slot = slots.slot_block[b.sequence & geometry.mask];
        if (in_slot == geometry.block_count + i) in_slot = kNoBlock;
        stack[top++] = i;
      } else {
        const uint32_t at = head + size;  // to the back of the ring
        flight[at >= count ? at - count : at] = i;
        ++size;
      }
    }
    flight_head = head;
    flight_size = size;
    if (top == 0) {
      fixed_free_top = 0;
      TakeReleased();  // loans dropped unpublished
      top = fixed_free_top;
      if (top == 0) return kNoBlock;
    }
    fixed_free_top = top - 1;
    return geometry.block_count + stack[top - 1];
  }
  void PushFlight(uint32_t i) {
    uint32_t at = flight_head + flight_size;
    if (at >= geometry.fixed_count) at -= geometry.fixed_count;
    fixed_flight[at] = i;
    ++flight_size;
  }
  /// The loan of fixed block `i` was dropped: unpublished, it is free again.
  void DropFixedLoan(uint32_t i) {
    FixedBlock& b = fixed[i];
    if (!b.loan_ref) return;
    b.loan_ref = false;
    if (b.loaned) {
      b.loaned = false;
      fixed_free[fixed_free_top++] = i;
    }
  }
  /// Fixed blocks some accepted consumer holds, and that consumer `k` holds
  /// (for reports).
  uint64_t FixedHeldBy(uint32_t k) const {
    uint64_t n = 0;
    for (uint32_t i = 0; i < geometry.fixed_count; ++i) {
      const uint32_t count =
          consumers[k].holds[fixed[i].hold_index].load(std::memory_order_relaxed);
      n += count != 0 ? 1 : 0;
    }
    return n;
  }

  ChannelSlotData* Slot(uint64_t sequence) const {
    return reinterpret_cast<ChannelSlotData*>(slot_base +
                                              (sequence & geometry.mask) * geometry.slot_size);
  }

  /// Where the block at `offset` (a block table offset) is in our mapping.
  std::byte* Address(uint64_t offset) const {
    return arena_base[offset >> kExtensionShift] + (offset & kExtensionOffsetMask);
  }
  /// The extension id a slot names for the block at `offset` (0: none).
  uint32_t ArenaId(uint64_t offset) const { return arena_id[offset >> kExtensionShift]; }

  /// Adds an extension that can hold a block of `capacity` bytes: twice
  /// the arena's bytes (at most 64 MiB), or `capacity` if larger, within
  /// geometry.arena_max. CapacityError if the maximum or the table leaves
  /// no room, acquire's error, or Segment::Create's (OutOfMemory for a full
  /// /dev/shm); nothing is left behind on failure.
  Status Grow(uint64_t length, uint64_t capacity);
  /// Releases the extensions no block used for options.extension_idle
  /// (every one not in use now, if `force`). Looks at most every
  /// extension_idle / 4 unless forced.
  void ReleaseIdleExtensions(bool force);
  /// Releases extension entry `k` if no block in it is in use: its range
  /// leaves the free space, its entry is emptied, its name removed.
  void ReleaseExtension(uint32_t k);
  /// Removes every extension's name (the producer is going away).
  void RemoveExtensionNames();

  void PollRegistry() { consumers.PollRegistry(blocks, slots); }

  /// Everything that can give space back without a system call: dropped
  /// loans, returns, finished consumers, then the slots' references on
  /// messages every counted consumer passed. (Dead consumers: ReapDead,
  /// when this was not enough.)
  void CollectSpace();

  /// Loan's slow path, when no block of `capacity` bytes came at once:
  /// collects space, flushes the size classes, reaps dead consumers, grows
  /// the arena (Grow; once), sleeping 20 µs-1 ms between attempts up to
  /// options.space_timeout. A block no arena can hold fails at once with
  /// Grow's error.
  /// The descriptor taken (not lent yet), or TimedOut / Cancelled naming
  /// who holds the arena.
  Result<uint32_t> WaitForSpace(uint64_t length, uint64_t capacity);

  /// Waits until message `sequence - slot_count` was passed by every
  /// counted consumer (kBlockProducer): spins, then sleeps on the slowest
  /// consumer's cursor word, which it wakes when its cursor crosses our
  /// target.
  Status WaitForRoom(uint64_t sequence);

  /// After a publish: wakes the consumers that announced they sleep (one
  /// FUTEX_WAKE for all; a byte into the doorbell of each that waits on
  /// one), each sleeping episode once.
  void WakeSleepers() {
    bool wake = false;
    for (uint32_t k : consumers.counted_list()) {
      ConsumerState& c = consumers[k];
      // seq_cst: second half of the Dekker pair with the consumer's seq_cst
      // store of an odd episode before its seq_cst reload of write_sequence.
      const uint32_t episode = c.header->waiting.load(std::memory_order_seq_cst);
      if ((episode & 1) != 0 && episode != c.last_woken) {
        c.last_woken = episode;
        // Relaxed: stored before the odd episode this load follows.
        const uint32_t bell = c.header->doorbell.load(std::memory_order_relaxed);
        if (bell == 0 || !c.doorbell.Sound(RegPid(c.word), bell)) wake = true;
      }
    }
    if (!wake) return;
    // Release: partner of the waiter's acquire load of the futex word.
    header->data_futex.fetch_add(1, std::memory_order_release);
    FutexWakeAll(&header->data_futex);
  }

  // --- loans dropped on any thread -------------------------------------------
  // A dropped loan is pushed onto a lock-free stack (links per descriptor:
  // a block has one loan at a time, so it is on the stack once at most) in
  // this process's memory; the producer thread takes the whole stack when
  // it looks for blocks. Pushers never pop, so a stale head only ever makes
  // a CAS fail.
  std::atomic<uint64_t> released_head{0};  // descriptor + 1, 0: empty
  std::unique_ptr<std::atomic<uint32_t>[]> released_next;
  std::unique_ptr<std::atomic<uint32_t>[]> released_generation;

  /// Any thread: the loan of generation `generation` of block `d` was
  /// dropped.
  void PushReleased(uint32_t d, uint32_t generation) {
    released_generation[d].store(generation, std::memory_order_relaxed);
    uint64_t head = released_head.load(std::memory_order_relaxed);
    do {
      released_next[d].store(static_cast<uint32_t>(head), std::memory_order_relaxed);
      // Release: the two stores above are visible to the producer's acquire
      // exchange that takes the stack.
    } while (!released_head.compare_exchange_weak(head, uint64_t{d} + 1, std::memory_order_release,
                                                  std::memory_order_relaxed));
  }

  /// Producer thread: gives the block table (or the fixed blocks) every
  /// loan dropped since.
  void TakeReleased() {
    if (released_head.load(std::memory_order_relaxed) == 0) return;
    // Acquire: partner of the pushers' release CAS.
    uint64_t index = released_head.exchange(0, std::memory_order_acquire);
    while (index != 0) {
      const uint32_t d = static_cast<uint32_t>(index - 1);
      const uint32_t generation = released_generation[d].load(std::memory_order_relaxed);
      index = released_next[d].load(std::memory_order_relaxed);
      if (IsFixed(d)) {
        DropFixedLoan(d - geometry.block_count);
      } else {
        blocks.DropLoan(d, generation);
      }
    }
  }
};

}  // namespace alkaid::shm::internal
