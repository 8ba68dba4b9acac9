#include "free_ranges_internal.h"

namespace alkaid::shm::internal {

// The nodes of both indexes are re-keyed in place where a range changes
// (node handles), so that neither the split of a range by Take nor the
// merge of a range with a free neighbour by Add allocates: a loan and the
// return of its block, one batch at a time, cost no heap allocation.

void FreeRanges::Add(uint64_t offset, uint64_t size) {
  if (size == 0) return;
  free_bytes_ += size;
  auto next = by_offset_.lower_bound(offset);
  // The nodes of a neighbour merged in, reused for the merged range.
  OffsetIndex::node_type offset_node;
  SizeIndex::node_type size_node;
  if (next != by_offset_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      size_node = by_size_.extract({prev->second, prev->first});
      offset = prev->first;
      size += prev->second;
      offset_node = by_offset_.extract(prev);
    }
  }
  if (next != by_offset_.end() && offset + size == next->first) {
    SizeIndex::node_type next_size = by_size_.extract({next->second, next->first});
    size += next->second;
    const auto after = std::next(next);
    OffsetIndex::node_type next_offset = by_offset_.extract(next);
    if (size_node.empty()) size_node = std::move(next_size);
    if (offset_node.empty()) offset_node = std::move(next_offset);
    next = after;
  }
  if (offset_node.empty()) {
    by_offset_.emplace_hint(next, offset, size);
  } else {
    offset_node.key() = offset;
    offset_node.mapped() = size;
    by_offset_.insert(next, std::move(offset_node));
  }
  if (size_node.empty()) {
    by_size_.emplace(size, offset);
  } else {
    size_node.value() = {size, offset};
    by_size_.insert(std::move(size_node));
  }
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
  auto node = by_offset_.find(offset);
  free_bytes_ -= size;
  if (range_size == size) {
    by_size_.erase(it);
    by_offset_.erase(node);
    return offset;
  }
  // Keep the tail free: its nodes in both indexes are re-keyed in place.
  SizeIndex::node_type size_node = by_size_.extract(it);
  size_node.value() = {range_size - size, offset + size};
  by_size_.insert(std::move(size_node));
  OffsetIndex::node_type offset_node = by_offset_.extract(node);
  offset_node.key() = offset + size;
  offset_node.mapped() = range_size - size;
  by_offset_.insert(std::move(offset_node));
  return offset;
}

}  // namespace alkaid::shm::internal
