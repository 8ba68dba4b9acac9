#pragma once

// Private: shared-memory layout of a body segment (see docs/SHM_LAYOUT.md).
//
//   segment payload offset 0    BodyArenaHeaderData (128 bytes)
//   offset 128                  BlockDescriptorData[descriptor_count] (64 bytes each)
//   holders_offset              BodyHolderData[holder_count] (64 bytes each)
//   arena_offset                the arena: block data only, 64-byte aligned
//
// Offsets in BlockHandle are counted from the segment payload start. Block
// headers (reference count, generation) live in the descriptor table, never
// in the arena: a consumer holding a stale handle only ever touches a
// descriptor word, which holds nothing but descriptor states, never bytes of
// a body the producer may be writing with plain stores.

#include <atomic>
#include <cstdint>

#include "layout_internal.h"

namespace alkaid::shm::internal {

/// "ALKBODY1" as a little-endian 64-bit integer.
inline constexpr uint64_t kBodyArenaMagic = 0x3159444f424b4c41ULL;
inline constexpr uint32_t kBodyArenaLayoutVersion = 4;
inline constexpr uint64_t kBodyArenaHeaderSize = 128;

/// Header of the arena. Written once by the producer at creation; then
/// read-only.
///
/// Publication: `magic` is stored last with memory_order_release; BodyReader
/// loads it with memory_order_acquire (partner) before trusting the rest.
struct alignas(kCacheLineSize) BodyArenaHeaderData {
  std::atomic<uint64_t> magic;
  uint32_t layout_version;
  uint32_t block_alignment;     ///< kBlockAlignment
  uint64_t arena_offset;        ///< from the payload start, after the descriptors
  uint64_t arena_size;          ///< bytes of block space
  uint32_t producer_pid;        ///< diagnostics only
  uint32_t descriptor_count;    ///< entries of the descriptor table
  uint64_t descriptors_offset;  ///< from the payload start; kBodyArenaHeaderSize
  uint64_t holders_offset;      ///< from the payload start; right after the descriptors
  uint32_t holder_count;        ///< kBodyHolderCount
  uint8_t reserved[kCacheLineSize - 60];

  // --- line 1: the producer's wait for space (FullPolicy::kWait).
  /// Bumped (release) by a consumer before FUTEX_WAKE; the producer
  /// FUTEX_WAITs on it while the arena is full.
  std::atomic<uint32_t> space_futex;
  /// Non-zero while the producer announces that it may block. Incremented
  /// by the producer with seq_cst, followed by a seq_cst fence and a reclaim
  /// pass; a consumer loads it with seq_cst right after its seq_cst release
  /// of a block (Dekker pair), so either the reclaim sees the release or the
  /// consumer sees the announcement and wakes the producer.
  std::atomic<uint32_t> space_waiters;
  /// Incremented (relaxed: only uniqueness matters) by every BodyReader
  /// that claims a holder entry; tags the entry.
  std::atomic<uint32_t> holder_counter;
  uint8_t reserved1[kCacheLineSize - 12];
};
ALKAID_SHM_PLAIN_DATA(BodyArenaHeaderData, kBodyArenaHeaderSize);

/// Number of holder entries, hence of holder bits per descriptor.
inline constexpr uint32_t kBodyHolderCount = 256;  // = alkaid::shm::kMaxBodyHolders
inline constexpr uint32_t kHolderWords = kBodyHolderCount / 64;

/// One block's shared header, in the descriptor table beside the arena.
/// Descriptor `i` describes at most one block at a time; it is reused for
/// another block once the previous one is reclaimed.
///
/// A block's references come in two kinds:
/// - `state` packs (generation << 32) | reclaiming flag (bit 31) | count
///   (bits 0-30). The count holds the anonymous references: the producer's
///   (its own, the ring's, a pool's) and those of readers without a holder
///   entry (or a second reference by a reader that already holds the
///   block).
/// - `holders`: bit h (word h / 64, bit h % 64) is set while the reader
///   owning holder entry h holds the block. Setting or clearing one bit is
///   one atomic operation, so a reader that dies at any point leaves either
///   its bit or nothing: a third party that knows the reader is dead clears
///   exactly its bits (BodyReader::ReclaimDeadHolders).
///
/// The block is free when its count is 0 and no holder bit is set. Only the
/// producer decides that, with the reclaiming flag: it CASes (g, 0) to
/// (g, reclaiming), re-reads the holder words, and frees the block if they
/// are all zero, else clears the flag again. A reader that sets its bit and
/// then (seq_cst, Dekker pair with the producer's seq_cst CAS and re-read)
/// finds `state` still of its generation and not reclaiming holds the block:
/// the producer's re-read is after its CAS and sees the bit. A reader that
/// finds the flag clears its bit and fails.
///
/// Ordering:
/// - Producer allocation: writes offset/length/capacity relaxed, then stores
///   `state` = (gen, 1) with release. Partner: the acquire CAS or load in
///   BodyReader::Acquire (and, transitively, the ring slot publication). The
///   holder words are not reset: bits set on a free descriptor are transient
///   (their setter clears them) or a dead reader's (cleared by reclaim).
/// - Releases (count decrement, bit clear): seq_cst, release semantics:
///   partner of the producer's acquire/seq_cst loads before reuse, so every
///   read of the data happens before the space is reused.
/// - offset/length/capacity are only rewritten while the block is free, and
///   consumers read them only while holding a reference, so they never
///   race; they are atomics because a hostile process could still write
///   them, and every reader checks them.
struct alignas(kCacheLineSize) BlockDescriptorData {
  std::atomic<uint64_t> state;
  std::atomic<uint64_t> offset;                 ///< payload offset of the block's first data byte
  std::atomic<uint64_t> length;                 ///< bytes requested
  std::atomic<uint64_t> capacity;               ///< bytes reserved in the arena, multiple of 64
  std::atomic<uint64_t> holders[kHolderWords];  ///< one bit per holder entry
};
ALKAID_SHM_PLAIN_DATA(BlockDescriptorData, kCacheLineSize);

/// One reader registration ("holder"): (pid << 32) | (tag << 2) | state, so
/// that the claim records the owner's pid atomically (an entry is never
/// owned by someone whose pid it does not show). Claimed by CAS 0 ->
/// (pid, tag, active) (acq_rel), freed by the owner with a release CAS to 0;
/// a reclaimer CASes (pid, tag, active) to (pid, tag, reclaiming), clears the
/// holder's bits, then stores 0 (release; partner: the next claim's acquire).
/// One cache line per entry: claims and frees are rare, and no entry shares
/// a line with another reader's.
struct alignas(kCacheLineSize) BodyHolderData {
  std::atomic<uint64_t> owner;
  uint8_t reserved[kCacheLineSize - 8];
};
ALKAID_SHM_PLAIN_DATA(BodyHolderData, kCacheLineSize);

enum HolderState : uint32_t {
  kHolderFree = 0,
  kHolderActive = 1,
  kHolderReclaiming = 2,
};
constexpr uint64_t HolderWord(uint32_t pid, uint32_t tag, HolderState state) {
  return (static_cast<uint64_t>(pid) << 32) | (static_cast<uint64_t>(tag & 0x3fffffffU) << 2) |
         state;
}
constexpr uint32_t HolderPid(uint64_t word) { return static_cast<uint32_t>(word >> 32); }
constexpr uint32_t HolderStateOf(uint64_t word) { return static_cast<uint32_t>(word & 3); }

constexpr uint64_t PackBlockState(uint32_t generation, uint32_t count) {
  return (static_cast<uint64_t>(generation) << 32) | count;
}
constexpr uint32_t BlockGeneration(uint64_t state) { return static_cast<uint32_t>(state >> 32); }
/// The anonymous reference count (bits 0-30).
constexpr uint32_t BlockCount(uint64_t state) { return static_cast<uint32_t>(state) & 0x7fffffffU; }
/// Bit 31: the producer is deciding whether to free the block.
inline constexpr uint64_t kBlockReclaiming = uint64_t{1} << 31;
constexpr bool BlockReclaiming(uint64_t state) { return (state & kBlockReclaiming) != 0; }

/// Descriptor table size when BodyAllocatorOptions::max_blocks is 0: one
/// per 4 KiB of arena, between these bounds.
inline constexpr uint32_t kMinDefaultDescriptors = 256;
inline constexpr uint32_t kMaxDefaultDescriptors = 65536;

/// Counts above this are treated as corruption (no process holds 2^30
/// references to one block).
inline constexpr uint32_t kMaxBlockRefs = uint32_t{1} << 30;

}  // namespace alkaid::shm::internal
