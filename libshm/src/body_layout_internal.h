#pragma once

// Private: shared-memory layout of a body segment (see docs/SHM_LAYOUT.md).
//
//   segment payload offset 0    BodyArenaHeaderData (128 bytes)
//   offset 128                  BlockDescriptorData[descriptor_count] (64 bytes each)
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
inline constexpr uint32_t kBodyArenaLayoutVersion = 3;
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
  uint8_t reserved[kCacheLineSize - 48];

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
  uint8_t reserved1[kCacheLineSize - 8];
};
ALKAID_SHM_PLAIN_DATA(BodyArenaHeaderData, kBodyArenaHeaderSize);

/// One block's shared header, in the descriptor table beside the arena.
/// Descriptor `i` describes at most one block at a time; it is reused for
/// another block once the previous one is reclaimed.
///
/// `state` packs (generation << 32) | reference_count so that a consumer's
/// Acquire can check "same generation and still referenced" and increment in
/// one compare-and-swap: a count that reached zero can never be raised again,
/// and a reused descriptor (new generation) can never be acquired through an
/// old handle. Generations come from one per-allocator counter (never 0), so
/// a generation names one allocation.
///
/// Ordering:
/// - Producer allocation: writes offset/length/capacity relaxed, then stores
///   `state` = (gen, 1) with release. Partner: the acquire CAS in
///   BodyReader::Acquire (and, transitively, the ring slot publication).
/// - Release (consumer or producer): compare-and-swap decrement with release
///   (acq_rel for the producer). Partner: the acquire load of `state` in
///   BodyAllocator::Reclaim, so every read of the data by a consumer happens
///   before the producer reuses the space.
/// - offset/length/capacity are only rewritten while the count is zero
///   (after reclaim), and consumers read them only while holding a
///   reference, so they never race; they are atomics because a hostile
///   process could still write them, and every reader checks them.
struct alignas(kCacheLineSize) BlockDescriptorData {
  std::atomic<uint64_t> state;
  std::atomic<uint64_t> offset;    ///< payload offset of the block's first data byte
  std::atomic<uint64_t> length;    ///< bytes requested
  std::atomic<uint64_t> capacity;  ///< bytes reserved in the arena, multiple of 64
  uint8_t reserved[kCacheLineSize - 32];
};
ALKAID_SHM_PLAIN_DATA(BlockDescriptorData, kCacheLineSize);

constexpr uint64_t PackBlockState(uint32_t generation, uint32_t count) {
  return (static_cast<uint64_t>(generation) << 32) | count;
}
constexpr uint32_t BlockGeneration(uint64_t state) { return static_cast<uint32_t>(state >> 32); }
constexpr uint32_t BlockCount(uint64_t state) { return static_cast<uint32_t>(state); }

/// Descriptor table size when BodyAllocatorOptions::max_blocks is 0: one
/// per 4 KiB of arena, between these bounds.
inline constexpr uint32_t kMinDefaultDescriptors = 256;
inline constexpr uint32_t kMaxDefaultDescriptors = 65536;

/// Counts above this are treated as corruption (no process holds 2^30
/// references to one block).
inline constexpr uint32_t kMaxBlockRefs = uint32_t{1} << 30;

}  // namespace alkaid::shm::internal
