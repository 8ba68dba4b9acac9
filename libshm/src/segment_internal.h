#pragma once

// Private: the header at offset 0 of every Alkaid shared-memory segment.

#include <atomic>
#include <cstdint>

#include "layout_internal.h"

namespace alkaid::shm::internal {

/// "ALKSEG01" read as a little-endian 64-bit integer.
inline constexpr uint64_t kSegmentMagic = 0x31304745534b4c41ULL;
/// Bumped whenever SegmentHeaderData changes incompatibly.
inline constexpr uint32_t kSegmentLayoutVersion = 1;
/// Offset of the data: two cache lines, so the data never shares a
/// line (or an adjacent-line prefetch pair) with the header.
inline constexpr uint64_t kSegmentDataOffset = 128;

/// Segment header. Written once by the creator, then read-only.
///
/// Publication: the creator fills every other field, then stores `magic`
/// with memory_order_release; Segment::Open loads `magic` with
/// memory_order_acquire before reading any other field (partner of that
/// release), so a complete magic implies a complete header.
struct alignas(kCacheLineSize) SegmentHeaderData {
  std::atomic<uint64_t> magic;  ///< kSegmentMagic once initialised, 0 before
  uint32_t layout_version;      ///< kSegmentLayoutVersion
  uint32_t kind;                ///< SegmentKind
  uint64_t total_size;          ///< bytes of the object, header included
  uint64_t data_offset;         ///< kSegmentDataOffset
  uint32_t creator_pid;         ///< for diagnostics only
  uint32_t reserved0;
  uint8_t reserved[kSegmentDataOffset - 40];
};
ALKAID_SHM_PLAIN_DATA(SegmentHeaderData, kSegmentDataOffset);

}  // namespace alkaid::shm::internal
