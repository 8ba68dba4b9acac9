#pragma once

// Private: what the producer and consumer sides of a channel share besides
// the layout structs: the geometry, its checks, and segment names.

#include <time.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "alkaid/common/result.h"
#include "alkaid/shm/channel.h"
#include "channel_layout_internal.h"

namespace alkaid::shm::internal {

/// Now, CLOCK_REALTIME nanoseconds: a slot's publish_ns. The realtime
/// clock, not the monotonic one, because other processes compare it with
/// their own reading and a recording keeps it next to its receive time
/// (CLOCK_REALTIME too): a wall-clock step (NTP) shows up as such.
inline uint64_t RealtimeNs() {
  timespec ts{};
  (void)::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

/// Suffix of a channel's registry segment.
inline constexpr std::string_view kRegistrySuffix = ".reg";
/// Characters a channel name leaves for the longest suffix
/// (".c<index>.<tag>": 2 + 3 + 1 + 10, with a margin).
inline constexpr std::size_t kChannelNameReserve = 24;

/// Where everything is in a channel segment's data, and its counts.
/// Computed by the producer from its options, and by each consumer from
/// the (untrusted) header, checked, then kept in private memory.
struct ChannelGeometry {
  uint32_t policy = 0;
  uint32_t slot_count = 0;
  uint64_t mask = 0;
  uint32_t inline_capacity = 0;
  uint32_t slot_size = 0;
  uint32_t max_consumers = 0;
  uint32_t block_count = 0;
  uint32_t return_capacity = 0;
  uint32_t shape_count = 0;
  uint32_t shape_size = 0;
  uint64_t controls_offset = 0;
  uint64_t slots_offset = 0;
  uint64_t shapes_offset = 0;
  uint64_t arena_offset = 0;
  uint64_t arena_size = 0;  ///< the initial arena
  uint32_t extension_count = 0;
  uint64_t extensions_offset = 0;
  uint64_t arena_max = 0;    ///< the initial arena plus every extension, at most
  uint32_t fixed_count = 0;  ///< fixed blocks (0: none)
  uint32_t fixed_size = 0;   ///< bytes of each, a multiple of 64
  uint64_t fixed_offset = 0;
  uint64_t total_size = 0;  ///< payload bytes

  /// Where fixed block `i` lies in the channel segment's data (i ==
  /// fixed_count: the end of the fixed area).
  uint64_t FixedBlockOffset(uint32_t i) const { return fixed_offset + uint64_t{i} * fixed_size; }
};

/// The geometry for `options`; Invalid for options out of range.
Result<ChannelGeometry> ComputeChannelGeometry(const ChannelOptions& options);

/// Writes every header field but the magic.
void WriteChannelHeader(const ChannelGeometry& geometry, ChannelHeaderData* header);

/// Reads and checks a mapped channel's header: the magic, version and every
/// count and offset must be what the counts imply and fit `payload_size`.
Result<ChannelGeometry> ReadChannelHeader(const ChannelHeaderData& header, uint64_t payload_size,
                                          std::string_view name);

/// "<channel>.c<index>.<tag>".
std::string ConsumerSegmentName(std::string_view channel, uint32_t index, uint32_t tag);

}  // namespace alkaid::shm::internal
