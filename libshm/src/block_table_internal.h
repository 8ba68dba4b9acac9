#pragma once

// Private: the producer's table of block descriptors, the lifetime of every
// block of its arena. Plain private memory (never shared memory, where
// another process could corrupt it), nothing atomic: every call is made on
// the producer thread (ChannelProducer's calls; ProducerState and
// ConsumerSet are its only users). It knows nothing of slots, consumers or
// segments: a holder is a bit index, an offset is whatever the caller's
// arena uses (the channel's: from the start of its segment's data).
//
// A block is live from its publish until its slot's reference is dropped
// (its slot is overwritten, or space is needed and every consumer passed
// it), every consumer that was given it returned it (or was finished or
// reclaimed), and a loan kept across its publish was dropped. Then it is
// freed: to the LIFO list of its capacity (a size class, up to
// kMaxSizeClasses capacities), else its space goes back to the free ranges
// and its descriptor to the free descriptors. Each loan gives the block a
// new generation (never 0), so that a return naming an older one is
// refused.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <vector>

#include "alkaid/shm/delivery.h"
#include "free_ranges_internal.h"

namespace alkaid::shm::internal {

inline constexpr uint32_t kNoBlock = UINT32_MAX;
inline constexpr uint32_t kHolderWords = kMaxConsumers / 64;

enum class BlockState : uint8_t { kFree, kCached, kLoaned, kLive };

/// A block descriptor.
struct Block {
  uint64_t offset = 0;    // arena offset of the first data byte
  uint64_t capacity = 0;  // arena bytes, multiple of 64
  uint32_t generation = 0;
  BlockState state = BlockState::kFree;
  bool slot_ref = false;
  bool loan_ref = false;  // a ChannelLoan still names it
  uint64_t holders[kHolderWords] = {};
  uint32_t next_cached = kNoBlock;  // kCached: next block of its size class
};

// Sets of holders (consumer indices below kMaxConsumers) as kHolderWords
// bit words.

/// Calls f(k) for every set bit k of `words` (kHolderWords of them).
template <typename F>
void ForEachBit(const uint64_t* words, F&& f) {
  for (uint32_t w = 0; w < kHolderWords; ++w) {
    for (uint64_t bits = words[w]; bits != 0; bits &= bits - 1) {
      f(w * 64 + static_cast<uint32_t>(__builtin_ctzll(bits)));
    }
  }
}

inline bool TestBit(const uint64_t* words, uint32_t k) { return (words[k / 64] >> (k % 64)) & 1; }
inline void SetBit(uint64_t* words, uint32_t k) { words[k / 64] |= uint64_t{1} << (k % 64); }
inline void ClearBit(uint64_t* words, uint32_t k) { words[k / 64] &= ~(uint64_t{1} << (k % 64)); }

/// The descriptors and the arena's free space. The data path's calls
/// (TakeCached, TryTake, Lend, Publish, the drops and returns, and the frees
/// they cause) are inline: they run once or twice per message.
class BlockTable {
 public:
  /// Freed blocks are kept by capacity for this many capacities; others
  /// give their space back at once.
  static constexpr std::size_t kMaxSizeClasses = 16;

  BlockTable() = default;
  /// `count` descriptors (all free), the arena [arena_offset, arena_offset +
  /// arena_size) free. Holders are below 64 * `holder_words` (at most
  /// kHolderWords): the data path's loops over a block's holder words stop
  /// there (one word for the default 64 consumers; copies of the whole set,
  /// a constant four words, stay as they are). Allocates everything it
  /// will need.
  BlockTable(uint32_t count, uint64_t arena_offset, uint64_t arena_size,
             uint32_t holder_words = kHolderWords);

  uint32_t size() const { return static_cast<uint32_t>(blocks_.size()); }
  Block& operator[](uint32_t d) { return blocks_[d]; }
  const Block& operator[](uint32_t d) const { return blocks_[d]; }

  /// A freed block of exactly this capacity (the most recently freed), or
  /// kNoBlock. The block keeps its place; it is not lent yet (Lend).
  uint32_t TakeCached(uint64_t capacity) {
    for (SizeClass& c : classes_) {
      if (c.capacity == capacity && c.head != kNoBlock) {
        const uint32_t d = c.head;
        c.head = blocks_[d].next_cached;
        blocks_[d].next_cached = kNoBlock;
        return d;
      }
    }
    return kNoBlock;
  }

  /// One attempt: a cached block of this capacity, else a free descriptor
  /// with space carved from the best-fitting free range; kNoBlock if
  /// neither. Not lent yet (Lend).
  uint32_t TryTake(uint64_t capacity) {
    const uint32_t cached = TakeCached(capacity);
    if (cached != kNoBlock) return cached;
    if (free_descriptors_.empty()) return kNoBlock;
    auto offset = ranges_.Take(capacity);
    if (!offset) return kNoBlock;
    const uint32_t d = free_descriptors_.back();
    free_descriptors_.pop_back();
    blocks_[d].offset = *offset;
    blocks_[d].capacity = capacity;
    return d;
  }

  /// Lends block `d` (just taken): loaned, a new generation, the loan its
  /// only reference.
  void Lend(uint32_t d) {
    Block& b = blocks_[d];
    b.state = BlockState::kLoaned;
    b.generation = next_generation_++;
    if (next_generation_ == 0) next_generation_ = 1;
    b.slot_ref = false;
    b.loan_ref = true;
    std::fill(std::begin(b.holders), std::end(b.holders), 0);
    ++blocks_live_;
  }

  /// Loaned block `d` is published: live, held by its slot, by `holders`
  /// (kHolderWords words), and by its loan only if `keep`.
  void Publish(uint32_t d, bool keep, const uint64_t* holders) {
    Block& b = blocks_[d];
    b.state = BlockState::kLive;
    b.slot_ref = true;
    b.loan_ref = keep;
    // Word by word: std::copy of the four became a call of memcpy.
    for (uint32_t w = 0; w < kHolderWords; ++w) b.holders[w] = holders[w];
  }

  /// The loan of generation `generation` of block `d` was dropped: an
  /// unpublished block is freed, a published one loses its loan reference.
  /// A stale generation, or a block without loan reference, is ignored.
  void DropLoan(uint32_t d, uint32_t generation) {
    Block& b = blocks_[d];
    if (b.generation != generation || !b.loan_ref) return;
    b.loan_ref = false;
    if (b.state == BlockState::kLoaned) {
      b.state = BlockState::kLive;  // so Free's accounting holds
      Free(d);
    } else {
      MaybeFree(d);
    }
  }

  /// Its slot lets go of block `d`.
  void DropSlotRef(uint32_t d) {
    blocks_[d].slot_ref = false;
    MaybeFree(d);
  }

  /// Holder `k` returns generation `generation` of block `d`. False (and
  /// nothing changes) unless `d` is a descriptor, live, of that generation,
  /// and held by `k`: the return is bogus.
  bool Return(uint32_t k, uint32_t d, uint32_t generation) {
    if (d >= blocks_.size() || blocks_[d].state != BlockState::kLive ||
        blocks_[d].generation != generation || !TestBit(blocks_[d].holders, k)) {
      return false;
    }
    ClearBit(blocks_[d].holders, k);
    MaybeFree(d);
    return true;
  }

  /// Holder `k` lets go of live block `d` if it holds it.
  void DropHolder(uint32_t d, uint32_t k) {
    if (blocks_[d].state == BlockState::kLive && TestBit(blocks_[d].holders, k)) {
      ClearBit(blocks_[d].holders, k);
      MaybeFree(d);
    }
  }

  /// Holder `k` lets go of every block (it died, or finished and claims to
  /// hold nothing).
  void DropHolderEverywhere(uint32_t k);

  /// Live blocks holder `k` holds; their arena bytes (capacities) into
  /// `*bytes` if given. One pass over the table: for reports, not the data path.
  uint64_t HeldBy(uint32_t k, uint64_t* bytes = nullptr) const;

  /// HeldBy for every holder below `held.size()` at once, in one pass over
  /// the table (a report of n consumers reads it once, not n times): live
  /// blocks into `held[k]`, their capacities into `bytes[k]` (the same size).
  void HeldByEach(std::span<uint64_t> held, std::span<uint64_t> bytes) const;

  /// Whether a consumer holds block `b`.
  bool AnyHolder(const Block& b) const {
    for (uint32_t w = 0; w < holder_words_; ++w) {
      if (b.holders[w] != 0) return true;
    }
    return false;
  }

  /// Frees block `d` if nothing holds it any more.
  void MaybeFree(uint32_t d) {
    Block& b = blocks_[d];
    if (b.state == BlockState::kLive && !b.slot_ref && !b.loan_ref && !AnyHolder(b)) Free(d);
  }

  /// Gives the cached blocks' space back to the free ranges (so that it can
  /// be carved into other sizes).
  void FlushClasses();

  /// Adds [offset, offset + size) to the free space (an arena's extension;
  /// it must not touch free space already there).
  void AddRange(uint64_t offset, uint64_t size) { ranges_.Add(offset, size); }
  /// Whether a block of [offset, offset + size) is loaned or live.
  bool InUse(uint64_t offset, uint64_t size) const;
  /// Takes [offset, offset + size), added before by AddRange, out of the
  /// free space, the cached blocks in it first. False (nothing changes but
  /// those blocks' return to the free space) if a block in it is in use.
  bool RemoveRange(uint64_t offset, uint64_t size);
  /// Calls f(offset) for every block loaned or live.
  template <typename F>
  void ForEachInUse(F&& f) const {
    for (const Block& b : blocks_) {
      if (b.state == BlockState::kLoaned || b.state == BlockState::kLive) f(b.offset);
    }
  }
  /// Whether a descriptor is free (cached blocks aside).
  bool has_free_descriptor() const { return !free_descriptors_.empty(); }

  /// Blocks loaned, in flight or held.
  uint64_t blocks_live() const { return blocks_live_; }
  /// Arena bytes in no block: the free ranges and the cached blocks.
  uint64_t free_bytes() const;
  /// The free ranges alone (cached blocks not counted), and their largest.
  uint64_t free_range_bytes() const { return ranges_.free_bytes(); }
  uint64_t largest_free_range() const { return ranges_.largest(); }

 private:
  // Freed blocks of one capacity, kept with their space (LIFO: the most
  // recently used, the warmest in the caches, first).
  struct SizeClass {
    uint64_t capacity = 0;
    uint32_t head = kNoBlock;
  };

  // Block `d`'s last reference went: onto its capacity's cached list,
  // inline (once per message, from the returns and the slots' overwrites);
  // a capacity without a list yet takes FreeUncached's way.
  [[gnu::always_inline]] void Free(uint32_t d) {
    Block& b = blocks_[d];
    --blocks_live_;
    for (SizeClass& c : classes_) {
      if (c.capacity == b.capacity) {
        b.state = BlockState::kCached;
        b.next_cached = c.head;
        c.head = d;
        return;
      }
    }
    FreeUncached(d);
  }

  // Free for a capacity no cached list has: a new list while there are
  // fewer than kMaxSizeClasses, else its space back to the arena. Out of
  // line, so that Free's common case stays small enough to inline.
  [[gnu::noinline]] void FreeUncached(uint32_t d) {
    Block& b = blocks_[d];
    if (classes_.size() < kMaxSizeClasses) {
      classes_.push_back({b.capacity, d});
      b.state = BlockState::kCached;
      b.next_cached = kNoBlock;
      return;
    }
    ranges_.Add(b.offset, b.capacity);
    b.state = BlockState::kFree;
    free_descriptors_.push_back(d);
  }

  std::vector<Block> blocks_;
  std::vector<uint32_t> free_descriptors_;  // LIFO
  std::vector<SizeClass> classes_;
  FreeRanges ranges_;
  uint32_t next_generation_ = 1;
  uint64_t blocks_live_ = 0;
  uint32_t holder_words_ = kHolderWords;
};

}  // namespace alkaid::shm::internal
