// The producer's block table: what is not on the data path.

#include "block_table_internal.h"

#include <algorithm>

namespace alkaid::shm::internal {

BlockTable::BlockTable(uint32_t count, uint64_t arena_offset, uint64_t arena_size,
                       uint32_t holder_words)
    : blocks_(count), holder_words_(std::min(holder_words, kHolderWords)) {
  free_descriptors_.reserve(count);
  for (uint32_t i = count; i > 0; --i) free_descriptors_.push_back(i - 1);
  classes_.reserve(kMaxSizeClasses);
  ranges_.Add(arena_offset, arena_size);
}

void BlockTable::DropHolderEverywhere(uint32_t k) {
  for (uint32_t d = 0; d < blocks_.size(); ++d) DropHolder(d, k);
}

uint64_t BlockTable::HeldBy(uint32_t k, uint64_t* bytes) const {
  uint64_t held = 0;
  uint64_t held_bytes = 0;
  for (const Block& b : blocks_) {
    if (b.state == BlockState::kLive && TestBit(b.holders, k)) {
      ++held;
      held_bytes += b.capacity;
    }
  }
  if (bytes != nullptr) *bytes = held_bytes;
  return held;
}

void BlockTable::HeldByEach(std::span<uint64_t> held, std::span<uint64_t> bytes) const {
  std::fill(held.begin(), held.end(), 0);
  std::fill(bytes.begin(), bytes.end(), 0);
  const auto n = static_cast<uint32_t>(std::min(held.size(), bytes.size()));
  for (const Block& b : blocks_) {
    if (b.state != BlockState::kLive) continue;
    for (uint32_t w = 0; w < holder_words_; ++w) {
      for (uint64_t bits = b.holders[w]; bits != 0; bits &= bits - 1) {
        const uint32_t k = w * 64 + static_cast<uint32_t>(__builtin_ctzll(bits));
        if (k >= n) continue;
        ++held[k];
        bytes[k] += b.capacity;
      }
    }
  }
}

void BlockTable::FlushClasses() {
  for (SizeClass& c : classes_) {
    for (uint32_t d = c.head; d != kNoBlock;) {
      Block& b = blocks_[d];
      const uint32_t next = b.next_cached;
      ranges_.Add(b.offset, b.capacity);
      b.state = BlockState::kFree;
      b.next_cached = kNoBlock;
      free_descriptors_.push_back(d);
      d = next;
    }
  }
  classes_.clear();
}

bool BlockTable::InUse(uint64_t offset, uint64_t size) const {
  for (const Block& b : blocks_) {
    if ((b.state == BlockState::kLoaned || b.state == BlockState::kLive) && b.offset >= offset &&
        b.offset < offset + size) {
      return true;
    }
  }
  return false;
}

bool BlockTable::RemoveRange(uint64_t offset, uint64_t size) {
  if (InUse(offset, size)) return false;
  // Cached blocks inside the range give their space back first; the other
  // classes keep theirs.
  for (SizeClass& c : classes_) {
    uint32_t* link = &c.head;
    while (*link != kNoBlock) {
      const uint32_t d = *link;
      Block& b = blocks_[d];
      if (b.offset >= offset && b.offset < offset + size) {
        *link = b.next_cached;
        ranges_.Add(b.offset, b.capacity);
        b.state = BlockState::kFree;
        b.next_cached = kNoBlock;
        free_descriptors_.push_back(d);
      } else {
        link = &b.next_cached;
      }
    }
  }
  return ranges_.TakeExact(offset, size);
}

uint64_t BlockTable::free_bytes() const {
  uint64_t cached = 0;
  for (const SizeClass& c : classes_) {
    for (uint32_t d = c.head; d != kNoBlock; d = blocks_[d].next_cached) {
      cached += blocks_[d].capacity;
    }
  }
  return ranges_.free_bytes() + cached;
}

}  // namespace alkaid::shm::internal
