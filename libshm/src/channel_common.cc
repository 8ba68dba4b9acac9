#include <unistd.h>

#include <algorithm>
#include <string>

#include "channel_internal.h"

namespace alkaid::shm::internal {

namespace {
constexpr uint32_t kMaxShapes = 1024;
constexpr uint64_t kPageSize = 4096;

uint32_t NextPowerOfTwo(uint64_t n) {
  uint64_t p = 1;
  while (p < n) p <<= 1;
  return static_cast<uint32_t>(p);
}

// Fills the offsets from the counts.
void Lay(ChannelGeometry* g) {
  g->mask = g->slot_count - 1;
  g->slot_size = static_cast<uint32_t>(sizeof(ChannelSlotData)) + g->inline_capacity;
  g->controls_offset = sizeof(ChannelHeaderData);
  g->slots_offset = g->controls_offset + uint64_t{g->max_consumers} * sizeof(ConsumerControlData);
  g->shapes_offset = g->slots_offset + uint64_t{g->slot_count} * g->slot_size;
  g->arena_offset = RoundUp(g->shapes_offset + uint64_t{g->shape_count} * g->shape_size, kPageSize);
  g->total_size = g->arena_offset + g->arena_size;
}
}  // namespace

Result<ChannelGeometry> ComputeChannelGeometry(const ChannelOptions& options) {
  if (options.slot_count < 2 || !IsPowerOfTwo(options.slot_count) ||
      options.slot_count > kMaxSlots) {
    return Status::Invalid("channel slot_count ", options.slot_count,
                           " must be a power of two between 2 and ", kMaxSlots);
  }
  if (options.inline_capacity > kMaxInlinePayload) {
    return Status::Invalid("channel inline_capacity ", options.inline_capacity, " exceeds ",
                           kMaxInlinePayload);
  }
  if (options.max_consumers < 1 || options.max_consumers > kMaxConsumers) {
    return Status::Invalid("channel max_consumers ", options.max_consumers,
                           " must be between 1 and ", kMaxConsumers);
  }
  if (options.arena_bytes < 64 || options.arena_bytes > kMaxSegmentSize / 2) {
    return Status::Invalid("channel arena_bytes ", options.arena_bytes, " must be between 64 and ",
                           kMaxSegmentSize / 2);
  }
  if (options.shape_count > kMaxShapes || options.shape_bytes > kMaxInlinePayload) {
    return Status::Invalid("channel shapes: at most ", kMaxShapes, " of at most ",
                           kMaxInlinePayload, " bytes");
  }
  if (options.max_blocks > (uint32_t{1} << 24)) {
    return Status::Invalid("channel max_blocks ", options.max_blocks, " exceeds 2^24");
  }
  ChannelGeometry g;
  g.policy = static_cast<uint32_t>(options.policy);
  if (options.policy != SlowConsumerPolicy::kBlockProducer &&
      options.policy != SlowConsumerPolicy::kDropOldest) {
    return Status::Invalid("channel policy ", g.policy, " is not a SlowConsumerPolicy");
  }
  g.slot_count = options.slot_count;
  g.inline_capacity = static_cast<uint32_t>(RoundUp(options.inline_capacity, 64));
  g.max_consumers = options.max_consumers;
  g.arena_size = RoundUp(options.arena_bytes, 64);
  g.block_count =
      options.max_blocks != 0
          ? options.max_blocks
          : static_cast<uint32_t>(std::clamp<uint64_t>(g.arena_size / kPageSize, 256, 65536));
  // More blocks than 64-byte pieces of the arena could never be live.
  g.block_count = static_cast<uint32_t>(
      std::min<uint64_t>(g.block_count, std::max<uint64_t>(1, g.arena_size / 64)));
  // A consumer's undrained returns name distinct live blocks, twice at most
  // (a duplicate after a lap): the queue never fills.
  g.return_capacity = NextPowerOfTwo(uint64_t{g.block_count} * 2);
  g.shape_count = options.shape_count;
  g.shape_size = static_cast<uint32_t>(sizeof(ShapeEntryData) + RoundUp(options.shape_bytes, 64));
  Lay(&g);
  return g;
}

void WriteChannelHeader(const ChannelGeometry& g, ChannelHeaderData* h) {
  h->layout_version = kChannelLayoutVersion;
  h->policy = g.policy;
  h->slot_count = g.slot_count;
  h->slot_size = g.slot_size;
  h->inline_capacity = g.inline_capacity;
  h->max_consumers = g.max_consumers;
  h->block_count = g.block_count;
  h->return_capacity = g.return_capacity;
  h->shape_count = g.shape_count;
  h->shape_size = g.shape_size;
  h->producer_pid = static_cast<uint32_t>(::getpid());
  h->controls_offset = g.controls_offset;
  h->slots_offset = g.slots_offset;
  h->shapes_offset = g.shapes_offset;
  h->arena_offset = g.arena_offset;
  h->arena_size = g.arena_size;
}

Result<ChannelGeometry> ReadChannelHeader(const ChannelHeaderData& h, uint64_t payload_size,
                                          std::string_view name) {
  // Acquire: partner of the producer's release store of the magic.
  if (h.magic.load(std::memory_order_acquire) != kChannelMagic) {
    return Status::Invalid("channel '", name, "': no channel header (bad magic)");
  }
  if (h.layout_version != kChannelLayoutVersion) {
    return Status::Invalid("channel '", name, "' has layout version ", h.layout_version,
                           "; this build reads ", kChannelLayoutVersion);
  }
  ChannelGeometry g;
  g.policy = h.policy;
  g.slot_count = h.slot_count;
  g.inline_capacity = h.inline_capacity;
  g.max_consumers = h.max_consumers;
  g.block_count = h.block_count;
  g.return_capacity = h.return_capacity;
  g.shape_count = h.shape_count;
  g.shape_size = h.shape_size;
  g.arena_size = h.arena_size;
  const bool counts_ok =
      (g.policy == static_cast<uint32_t>(SlowConsumerPolicy::kBlockProducer) ||
       g.policy == static_cast<uint32_t>(SlowConsumerPolicy::kDropOldest)) &&
      g.slot_count >= 2 && IsPowerOfTwo(g.slot_count) && g.slot_count <= kMaxSlots &&
      g.inline_capacity % 64 == 0 && g.inline_capacity <= kMaxInlinePayload &&
      g.max_consumers >= 1 && g.max_consumers <= kMaxConsumers && g.block_count >= 1 &&
      g.block_count <= (uint32_t{1} << 24) &&
      // Consumers size their own segment by the return queue: it is what the
      // producer's geometry implies, no larger (a hostile header cannot make
      // a consumer create more than a fraction of the arena it maps).
      g.block_count <= std::max<uint64_t>(1, g.arena_size / 64) &&
      g.return_capacity == NextPowerOfTwo(uint64_t{g.block_count} * 2) &&
      g.shape_count <= kMaxShapes &&
      g.shape_size >= sizeof(ShapeEntryData) && g.shape_size % 64 == 0 &&
      g.shape_size <= sizeof(ShapeEntryData) + kMaxInlinePayload && g.arena_size % 64 == 0 &&
      g.arena_size <= payload_size;
  if (!counts_ok) {
    return Status::Invalid("channel '", name, "': header counts out of range (", g.slot_count,
                           " slots, ", g.inline_capacity, " inline bytes, ", g.max_consumers,
                           " consumers, ", g.block_count, " blocks, ", g.return_capacity,
                           " return entries, ", g.shape_count, " shapes of ", g.shape_size,
                           " bytes, arena of ", g.arena_size, ")");
  }
  Lay(&g);
  if (h.slot_size != g.slot_size || h.controls_offset != g.controls_offset ||
      h.slots_offset != g.slots_offset || h.shapes_offset != g.shapes_offset ||
      h.arena_offset != g.arena_offset || g.total_size > payload_size) {
    return Status::Invalid("channel '", name,
                           "': header offsets do not match its counts or "
                           "the segment's ",
                           payload_size, " bytes");
  }
  return g;
}

std::string ConsumerSegmentName(std::string_view channel, uint32_t index, uint32_t tag) {
  std::string name(channel);
  name += ".c";
  name += std::to_string(index);
  name += '.';
  name += std::to_string(tag);
  return name;
}

}  // namespace alkaid::shm::internal
