#pragma once

// Private: the free space of an arena, kept by its single owner in private
// memory (never in shared memory, where another process could corrupt it).
// Best fit, coalescing neighbours on free. Offsets and sizes are whatever
// unit the caller uses (bytes, multiples of 64). Splitting a range and
// merging one with a neighbour allocate nothing (free_ranges.cc).

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace alkaid::shm::internal {

class FreeRanges {
 public:
  /// Adds [offset, offset + size) to the free space, merging it with free
  /// neighbours. The range must not overlap free space.
  void Add(uint64_t offset, uint64_t size);

  /// Takes `size` from the smallest free range that holds it (its start);
  /// nullopt if none does.
  std::optional<uint64_t> Take(uint64_t size);

  /// Takes exactly the free range [offset, offset + size) (as it was
  /// added: whole, not merged with a neighbour); false if it is not free.
  bool TakeExact(uint64_t offset, uint64_t size);

  uint64_t free_bytes() const { return free_bytes_; }
  /// Size of the largest free range (0 if none).
  uint64_t largest() const { return by_size_.empty() ? 0 : by_size_.rbegin()->first; }

 private:
  using OffsetIndex = std::map<uint64_t, uint64_t>;           // offset -> size
  using SizeIndex = std::set<std::pair<uint64_t, uint64_t>>;  // (size, offset)
  OffsetIndex by_offset_;
  SizeIndex by_size_;
  uint64_t free_bytes_ = 0;
};

}  // namespace alkaid::shm::internal
