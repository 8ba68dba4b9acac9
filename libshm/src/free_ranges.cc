#include "free_ranges_internal.h"

namespace alkaid::shm::internal {

void FreeRanges::Add(uint64_t offset, uint64_t size) {
  if (size == 0) return;
  free_bytes_ += size;
  auto next = by_offset_.lower_bound(offset);
  if (next != by_offset_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      by_size_.erase({prev->second, prev->first});
      offset = prev->first;
      size += prev->second;
      by_offset_.erase(prev);
    }
  }
  if (next != by_offset_.end() && offset + size == next->first) {
    by_size_.erase({next->second, next->first});
    size += next->second;
    next = by_offset_.erase(next);
  }
  by_offset_.emplace_hint(next, offset, size);
  by_size_.emplace(size, offset);
}

bool FreeRanges::TakeExact(uint64_t offset, uint64_t size) {
  auto node = by_offset_.find(offset);
  if (node == by_offset_.end() || node->second != size) return false;
  by_size_.erase({size, offset});
  by_offset_.erase(node);
  free_bytes_ -= size;
  return true;
}

std::optional<uint64_t> FreeRanges::Take(uint64_t size) {
  auto it = by_size_.lower_bound({size, 0});
  if (it == by_size_.end()) return std::nullopt;
  const uint64_t range_size = it->first;
  const uint64_t offset = it->second;
  by_size_.erase(it);
  auto node = by_offset_.find(offset);
  free_bytes_ -= size;
  if (range_size == size) {
    by_offset_.erase(node);
    return offset;
  }
  // Keep the tail free: its node in by_offset_ is re-keyed in place.
  auto handle = by_offset_.extract(node);
  handle.key() = offset + size;
  handle.mapped() = range_size - size;
  by_offset_.insert(std::move(handle));
  by_size_.emplace(range_size - size, offset + size);
  return offset;
}

}  // namespace alkaid::shm::internal
