#pragma once

// Private: shared-memory layout of a broadcast ring (see docs/SHM_LAYOUT.md).
//
//   payload offset 0                      RingHeaderData (320 bytes)
//   consumers_offset = 320                ConsumerData[max_consumers] (64 bytes each)
//   slots_offset                          slot_count slots of slot_size bytes:
//                                           SlotHeaderData (64 bytes)
//                                           inline payload (inline_capacity bytes,
//                                           multiple of 64, as 64-bit atomic words)

#include <atomic>
#include <cstdint>

#include "alkaid/shm/ring.h"
#include "layout_internal.h"

namespace alkaid::shm::internal {

/// "ALKRING1" as a little-endian 64-bit integer.
inline constexpr uint64_t kRingMagic = 0x31474e49524b4c41ULL;
inline constexpr uint32_t kRingLayoutVersion = 5;

/// Ring header: five cache lines so that fields written by different parties
/// never share a line.
struct alignas(kCacheLineSize) RingHeaderData {
  // --- line 0: immutable after creation. `magic` is stored last with
  // memory_order_release by RingProducer::Create; RingConsumer::Open loads it
  // with memory_order_acquire (partner) before reading the rest.
  std::atomic<uint64_t> magic;
  uint32_t layout_version;
  uint32_t policy;           ///< SlowConsumerPolicy
  uint32_t slot_count;       ///< power of two
  uint32_t slot_size;        ///< bytes per slot, multiple of 64
  uint32_t inline_capacity;  ///< bytes of payload per slot, multiple of 64
  uint32_t max_consumers;
  uint64_t consumers_offset;  ///< from the payload start
  uint64_t slots_offset;      ///< from the payload start
  uint32_t producer_pid;      ///< diagnostics only
  uint8_t pad0[kCacheLineSize - 52];

  // --- line 1: written by the producer on every publish.
  /// Number of messages committed (= sequence of the next one). Stored by
  /// the producer with memory_order_seq_cst after the slot is committed; its
  /// partners are the seq_cst load in the consumer's blocking wait (Dekker
  /// pairing with `data_waiters`), the acquire load in the consumer's
  /// resynchronisation after a gap, and the seq_cst load in Attach.
  std::atomic<uint64_t> write_sequence;
  uint8_t pad1[kCacheLineSize - 8];

  // --- line 2: the consumers' futex.
  /// Bumped (release) by the producer before FUTEX_WAKE; blocked consumers
  /// FUTEX_WAIT on it.
  std::atomic<uint32_t> data_futex;
  /// 1 when some consumer announced that it is about to block (seq_cst
  /// store, after loading `data_futex`). The producer only makes the wake
  /// system call when it is non-zero, and clears it (exchange) when it does,
  /// so one sleeping episode costs one wake-up.
  std::atomic<uint32_t> data_waiters;
  uint8_t pad2[kCacheLineSize - 8];

  // --- line 3: rarely written (read by consumers on every receive).
  /// 1 once the producer closed the stream. Release store in Close;
  /// acquire load in the consumer when it finds nothing to read.
  std::atomic<uint32_t> closed;
  /// Incremented (relaxed: only uniqueness matters) at every consumer
  /// attach; tags a registration so that a consumer can tell that it was
  /// detached and its entry reused.
  std::atomic<uint32_t> attach_counter;
  /// The producer's futex while it waits for room (kBlockProducer, ring
  /// full). Bumped (release) by a consumer before FUTEX_WAKE; the producer
  /// FUTEX_WAITs on it.
  std::atomic<uint32_t> space_futex;
  /// 1 while the producer announces that it may block for room. Incremented
  /// by the producer with seq_cst, then a seq_cst fence and a cursor scan;
  /// consumers load it with seq_cst right after their seq_cst cursor store
  /// (Dekker pair): either the producer's scan sees the new cursor, or the
  /// consumer sees the announcement and wakes it. Consumers only read it on
  /// their fast path, so this line stays shared-clean while nobody waits.
  std::atomic<uint32_t> space_waiters;
  /// The cursor the waiting producer needs every active consumer to reach.
  /// Stored (seq_cst) before `space_waiters` is incremented; a consumer wakes
  /// the producer only when its cursor crosses it, so one waiting episode
  /// costs at most one wake-up per consumer.
  std::atomic<uint64_t> space_target;
  uint8_t pad3[kCacheLineSize - 24];

  // --- line 4: the sideband (RingProducer::SetSideband), a seqlock written
  // by the producer only, rarely. `sideband_version` is odd while a write
  // is in progress: the producer stores version + 1 (relaxed), a release
  // fence, the words (relaxed), then version + 2 (release). A reader loads
  // the version (acquire), the words (relaxed), an acquire fence and the
  // version again, and keeps the words if both versions are equal and even.
  std::atomic<uint64_t> sideband_version;
  std::atomic<uint64_t> sideband[kSidebandWords];
  uint8_t pad4[kCacheLineSize - 8 - 8 * kSidebandWords];
};
ALKAID_SHM_PLAIN_DATA(RingHeaderData, 5 * kCacheLineSize);

enum ConsumerState : uint32_t {
  kConsumerFree = 0,     ///< entry unused
  kConsumerClaimed = 1,  ///< being registered; not yet counted by the producer
  kConsumerActive = 2,   ///< counted: its cursor holds the producer back (kBlockProducer)
  /// Force-detached (RingProducer::DetachConsumer) while its owner may still
  /// be running: no longer counted, but not reusable either, so a late cursor
  /// store by the owner lands in its own dead entry, never in a new
  /// consumer's. Only the owner (when it notices) or someone who saw the
  /// owner's process gone turns it into kConsumerFree.
  kConsumerDetached = 3,
};
inline constexpr uint32_t kConsumerStateMask = 3;
/// (pid << 32) | (tag << 2) | state: the registration word.
constexpr uint64_t ConsumerWord(uint32_t pid, uint32_t tag, ConsumerState state) {
  return (static_cast<uint64_t>(pid) << 32) | (static_cast<uint64_t>(tag & 0x3fffffffU) << 2) |
         state;
}
constexpr uint32_t ConsumerPid(uint64_t word) { return static_cast<uint32_t>(word >> 32); }

/// One consumer registration: one cache line, written by its consumer
/// (cursor, lost) and, rarely, by whoever attaches or detaches it.
struct alignas(kCacheLineSize) ConsumerData {
  /// (pid << 32) | (tag << 2) | ConsumerState, so that "is this still my
  /// registration" and "detach it if it is still mine" are single atomic
  /// operations, and the owner's process id is recorded by the claim itself
  /// (a consumer that dies right after claiming leaves an entry that names
  /// it, never a previous owner). The tag comes from
  /// RingHeaderData::attach_counter.
  /// Transitions keep the pid. Attach claims a free
  /// entry by CAS (acq_rel) and makes it active with a seq_cst store followed
  /// by a seq_cst fence, paired with the seq_cst fence in the producer's
  /// cursor scan. Detach CASes it to 0 with release; the producer's scan
  /// loads it with acquire (partner). A force-detach CASes (tag, active) to
  /// (tag, detached); the owner, noticing, CASes (tag, detached) to 0.
  std::atomic<uint64_t> state;
  /// Next sequence this consumer will read. Stored with release after the
  /// consumer is done with the slot; the producer's scan loads it with
  /// acquire (partner) before reusing slots below it.
  std::atomic<uint64_t> cursor;
  /// Messages lost so far (diagnostics; relaxed, no partner).
  std::atomic<uint64_t> lost;
  uint8_t pad[kCacheLineSize - 24];
};
ALKAID_SHM_PLAIN_DATA(ConsumerData, kCacheLineSize);

/// Slot header; the payload words follow it.
///
/// `sequence` is a seqlock word: 0 = never written; 2n+1 = message n being
/// written; 2n+2 = message n committed. Writer: store 2n+1 (relaxed), release
/// fence, write the fields and payload words (relaxed atomics), store 2n+2
/// (release). Reader: load (acquire; partner of the 2n+2 store), read the
/// fields and words (relaxed), acquire fence (partner of the writer's
/// release fence), load again (relaxed) and accept only if unchanged.
struct alignas(kCacheLineSize) SlotHeaderData {
  std::atomic<uint64_t> sequence;
  std::atomic<uint32_t> payload_size;
  std::atomic<uint32_t> flags;  ///< kSlotHasBody
  std::atomic<uint64_t> body_offset;
  std::atomic<uint64_t> body_length;
  std::atomic<uint32_t> body_generation;
  std::atomic<uint32_t> body_descriptor;  ///< BlockHandle::descriptor
  uint8_t pad[kCacheLineSize - 40];
};
ALKAID_SHM_PLAIN_DATA(SlotHeaderData, kCacheLineSize);

inline constexpr uint32_t kSlotHasBody = 1;

constexpr uint64_t SlotWriting(uint64_t n) { return 2 * n + 1; }
constexpr uint64_t SlotCommitted(uint64_t n) { return 2 * n + 2; }

}  // namespace alkaid::shm::internal
