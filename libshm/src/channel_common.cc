// What both sides of a channel share: its geometry (computed, written, read
// and checked) and its names (consumer segments; RemoveChannel).

#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "alkaid/shm/channel.h"
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
void Lay(ChannelGeometry* geometry) {
  geometry->mask = geometry->slot_count - 1;
  geometry->slot_size = static_cast<uint32_t>(sizeof(ChannelSlotData)) + geometry->inline_capacity;
  geometry->controls_offset = sizeof(ChannelHeaderData);
  geometry->slots_offset =
      geometry->controls_offset + uint64_t{geometry->max_consumers} * sizeof(ConsumerControlData);
  geometry->shapes_offset =
      geometry->slots_offset + uint64_t{geometry->slot_count} * geometry->slot_size;
  geometry->extensions_offset =
      geometry->shapes_offset + uint64_t{geometry->shape_count} * geometry->shape_size;
  geometry->fixed_offset =
      RoundUp(geometry->extensions_offset +
                  uint64_t{geometry->extension_count} * sizeof(ExtensionEntryData),
              kPageSize);
  geometry->arena_offset = RoundUp(geometry->FixedBlockOffset(geometry->fixed_count), kPageSize);
  geometry->total_size = geometry->arena_offset + geometry->arena_size;
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
  const uint64_t arena_bytes = options.arena_bytes != 0
                                   ? options.arena_bytes
                                   : std::clamp<uint64_t>(uint64_t{options.slot_count} << 10,
                                                          uint64_t{256} << 10, uint64_t{16} << 20);
  if (arena_bytes < 64 || arena_bytes > kMaxSegmentSize / 2) {
    return Status::Invalid("channel arena_bytes ", arena_bytes, " must be between 64 and ",
                           kMaxSegmentSize / 2);
  }
  if (options.max_arena_bytes > kMaxArena) {
    return Status::Invalid("channel max_arena_bytes ", options.max_arena_bytes, " exceeds ",
                           kMaxArena);
  }
  if (options.shape_count > kMaxShapes || options.shape_bytes > kMaxInlinePayload) {
    return Status::Invalid("channel shapes: at most ", kMaxShapes, " of at most ",
                           kMaxInlinePayload, " bytes");
  }
  constexpr uint64_t kMaxFixedSize = uint64_t{1} << 30;
  if (options.fixed_block_bytes > kMaxFixedSize || options.fixed_block_count > kMaxFixedBlocks) {
    return Status::Invalid("channel fixed blocks: at most ", kMaxFixedBlocks, " of at most ",
                           kMaxFixedSize, " bytes");
  }
  if (options.max_blocks > (uint32_t{1} << 24)) {
    return Status::Invalid("channel max_blocks ", options.max_blocks, " exceeds 2^24");
  }
  ChannelGeometry geometry;
  geometry.policy = static_cast<uint32_t>(options.policy);
  if (options.policy != SlowConsumerPolicy::kBlockProducer &&
      options.policy != SlowConsumerPolicy::kDropOldest) {
    return Status::Invalid("channel policy ", geometry.policy, " is not a SlowConsumerPolicy");
  }
  geometry.slot_count = options.slot_count;
  geometry.inline_capacity = static_cast<uint32_t>(RoundUp(options.inline_capacity, 64));
  geometry.max_consumers = options.max_consumers;
  geometry.arena_size = RoundUp(arena_bytes, 64);
  geometry.arena_max = std::max(geometry.arena_size, RoundUp(options.max_arena_bytes, 64));
  geometry.extension_count = geometry.arena_max > geometry.arena_size ? kMaxExtensions : 0;
  geometry.block_count = options.max_blocks != 0
                             ? options.max_blocks
                             : static_cast<uint32_t>(std::clamp<uint64_t>(
                                   std::max<uint64_t>(geometry.arena_size / kPageSize,
                                                      2 * uint64_t{options.slot_count}),
                                   256, 65536));
  // More blocks than 64-byte pieces of the arena could never be live.
  geometry.block_count = static_cast<uint32_t>(
      std::min<uint64_t>(geometry.block_count, std::max<uint64_t>(1, geometry.arena_max / 64)));
  // A consumer's undrained returns name distinct live blocks, twice at most
  // (a duplicate after a lap): the queue never fills.
  geometry.return_capacity = NextPowerOfTwo(uint64_t{geometry.block_count} * 2);
  geometry.shape_count = options.shape_count;
  geometry.shape_size =
      static_cast<uint32_t>(sizeof(ShapeEntryData) + RoundUp(options.shape_bytes, 64));
  if (options.fixed_block_bytes != 0) {
    geometry.fixed_size = static_cast<uint32_t>(RoundUp(options.fixed_block_bytes, 64));
    geometry.fixed_count = options.fixed_block_count != 0
                               ? options.fixed_block_count
                               : std::min(2 * options.slot_count, kMaxFixedBlocks);
    if (uint64_t{geometry.fixed_count} * geometry.fixed_size > kMaxSegmentSize / 2) {
      return Status::Invalid("channel fixed blocks: ", geometry.fixed_count, " of ",
                             geometry.fixed_size, " bytes exceed ", kMaxSegmentSize / 2);
    }
  }
  Lay(&geometry);
  return geometry;
}

void WriteChannelHeader(const ChannelGeometry& geometry, ChannelHeaderData* h) {
  h->layout_version = kChannelLayoutVersion;
  h->policy = geometry.policy;
  h->slot_count = geometry.slot_count;
  h->slot_size = geometry.slot_size;
  h->inline_capacity = geometry.inline_capacity;
  h->max_consumers = geometry.max_consumers;
  h->block_count = geometry.block_count;
  h->return_capacity = geometry.return_capacity;
  h->shape_count = geometry.shape_count;
  h->shape_size = geometry.shape_size;
  h->producer_pid = static_cast<uint32_t>(::getpid());
  h->controls_offset = geometry.controls_offset;
  h->slots_offset = geometry.slots_offset;
  h->shapes_offset = geometry.shapes_offset;
  h->arena_offset = geometry.arena_offset;
  h->arena_size = geometry.arena_size;
  h->extension_count = geometry.extension_count;
  h->extensions_offset = geometry.extensions_offset;
  h->arena_max = geometry.arena_max;
  h->fixed_offset = geometry.fixed_offset;
  h->fixed_count = geometry.fixed_count;
  h->fixed_size = geometry.fixed_size;
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
  ChannelGeometry geometry;
  geometry.policy = h.policy;
  geometry.slot_count = h.slot_count;
  geometry.inline_capacity = h.inline_capacity;
  geometry.max_consumers = h.max_consumers;
  geometry.block_count = h.block_count;
  geometry.return_capacity = h.return_capacity;
  geometry.shape_count = h.shape_count;
  geometry.shape_size = h.shape_size;
  geometry.arena_size = h.arena_size;
  geometry.extension_count = h.extension_count;
  geometry.arena_max = h.arena_max;
  geometry.fixed_count = h.fixed_count;
  geometry.fixed_size = h.fixed_size;
  const bool counts_ok =
      (geometry.policy == static_cast<uint32_t>(SlowConsumerPolicy::kBlockProducer) ||
       geometry.policy == static_cast<uint32_t>(SlowConsumerPolicy::kDropOldest)) &&
      geometry.slot_count >= 2 && IsPowerOfTwo(geometry.slot_count) &&
      geometry.slot_count <= kMaxSlots && geometry.inline_capacity % 64 == 0 &&
      geometry.inline_capacity <= kMaxInlinePayload && geometry.max_consumers >= 1 &&
      geometry.max_consumers <= kMaxConsumers && geometry.block_count >= 1 &&
      geometry.block_count <= (uint32_t{1} << 24) &&
      // Consumers size their own segment by the return queue: it is what the
      // producer's geometry implies, no larger (a hostile header cannot make
      // a consumer create more than a fraction of the segment it maps).
      geometry.block_count <= std::max<uint64_t>(1, payload_size / 64) &&
      geometry.extension_count <= kMaxExtensions && geometry.arena_max >= geometry.arena_size &&
      geometry.arena_max <= kMaxArena &&
      geometry.return_capacity == NextPowerOfTwo(uint64_t{geometry.block_count} * 2) &&
      geometry.shape_count <= kMaxShapes && geometry.shape_size >= sizeof(ShapeEntryData) &&
      geometry.shape_size % 64 == 0 &&
      geometry.shape_size <= sizeof(ShapeEntryData) + kMaxInlinePayload &&
      geometry.arena_size % 64 == 0 && geometry.arena_size <= payload_size &&
      // Fixed blocks: whole 64-byte pieces of the segment, so that their
      // count (which sizes a consumer's hold counts) is bounded by it.
      geometry.fixed_count <= kMaxFixedBlocks && geometry.fixed_size % 64 == 0 &&
      (geometry.fixed_count == 0
           ? geometry.fixed_size == 0
           : (geometry.fixed_size != 0 &&
              uint64_t{geometry.fixed_count} * geometry.fixed_size <= payload_size));
  if (!counts_ok) {
    return Status::Invalid(
        "channel '", name, "': header counts out of range (", geometry.slot_count, " slots, ",
        geometry.inline_capacity, " inline bytes, ", geometry.max_consumers, " consumers, ",
        geometry.block_count, " blocks, ", geometry.return_capacity, " return entries, ",
        geometry.shape_count, " shapes of ", geometry.shape_size, " bytes, arena of ",
        geometry.arena_size, " up to ", geometry.arena_max, ", ", geometry.extension_count,
        " extensions, ", geometry.fixed_count, " fixed blocks of ", geometry.fixed_size, " bytes)");
  }
  Lay(&geometry);
  if (h.slot_size != geometry.slot_size || h.controls_offset != geometry.controls_offset ||
      h.slots_offset != geometry.slots_offset || h.shapes_offset != geometry.shapes_offset ||
      h.arena_offset != geometry.arena_offset || h.fixed_offset != geometry.fixed_offset ||
      h.extensions_offset != geometry.extensions_offset || geometry.total_size > payload_size) {
    return Status::Invalid("channel '", name,
                           "': header offsets do not match its counts or "
                           "the segment's ",
                           payload_size, " bytes");
  }
  return geometry;
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

namespace alkaid::shm {

using internal::RegistrationData;
using internal::RegistryHeaderData;

std::string ChannelExtensionName(std::string_view channel, uint32_t id) {
  std::string name(channel);
  name += ".x";
  name += std::to_string(id);
  return name;
}

Status RemoveChannel(std::string_view name, ChannelRemains* remains) {
  ALKAID_RETURN_NOT_OK(Segment::ValidateName(name));
  // The extensions its table lists (an extension being added or released
  // when the producer died may be missing: the broker, which granted it,
  // removes those by name), or, asked to keep them, their ids.
  SegmentOpenOptions ro;
  ro.read_only = true;
  ro.prefault = false;
  auto channel = Segment::Open(name, SegmentKind::kChannel, ro);
  if (channel.ok() && (*channel)->data_size() >= sizeof(internal::ChannelHeaderData)) {
    const auto* h = reinterpret_cast<const internal::ChannelHeaderData*>((*channel)->data());
    auto geometry = internal::ReadChannelHeader(*h, (*channel)->data_size(), name);
    if (geometry.ok()) {
      const auto* entries = reinterpret_cast<const internal::ExtensionEntryData*>(
          (*channel)->data() + geometry->extensions_offset);
      for (uint32_t k = 0; k < geometry->extension_count; ++k) {
        const uint32_t id = entries[k].id.load(std::memory_order_acquire);
        if (id == 0) continue;
        if (remains != nullptr) {
          remains->extensions.push_back(id);
        } else {
          (void)Segment::Remove(ChannelExtensionName(name, id));
        }
      }
    }
  }
  const std::string reg_name = std::string(name) + std::string(internal::kRegistrySuffix);
  auto registry = Segment::Open(reg_name, SegmentKind::kChannelRegistry);
  if (registry.ok() && (*registry)->data_size() >= sizeof(RegistryHeaderData)) {
    const auto* h = reinterpret_cast<const RegistryHeaderData*>((*registry)->data());
    const uint64_t room =
        ((*registry)->data_size() - sizeof(RegistryHeaderData)) / sizeof(RegistrationData);
    const uint32_t count = static_cast<uint32_t>(std::min<uint64_t>(h->max_consumers, room));
    const auto* regs =
        reinterpret_cast<const RegistrationData*>((*registry)->data() + sizeof(RegistryHeaderData));
    for (uint32_t k = 0; k < count; ++k) {
      const uint64_t word = regs[k].word.load(std::memory_order_acquire);
      if (word == 0) continue;
      if (remains != nullptr) remains->consumer_pids.push_back(internal::RegPid(word));
      (void)Segment::Remove(internal::ConsumerSegmentName(name, k, internal::RegTag(word)));
    }
  }
  (void)Segment::Remove(reg_name);
  return Segment::Remove(name);
}

}  // namespace alkaid::shm
