// The producer's state: its slow paths (space and room), off the data path.

#include "producer_state_internal.h"

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "channel_internal.h"
#include "wait_internal.h"

namespace alkaid::shm::internal {

using Clock = std::chrono::steady_clock;

ProducerState::ProducerState(const ChannelOptions& options_in, std::string name_in,
                             const ChannelGeometry& geometry_in,
                             std::shared_ptr<Segment> segment_in,
                             std::shared_ptr<Segment> registry_in)
    : options(options_in),
      name(std::move(name_in)),
      geometry(geometry_in),
      segment(std::move(segment_in)),
      registry(std::move(registry_in)),
      header(reinterpret_cast<ChannelHeaderData*>(segment->data())),
      blocks(geometry.block_count, geometry.arena_offset, geometry.arena_size,
             (geometry.max_consumers + 63) / 64),
      consumers(geometry, name, options, segment->data(), registry->data(), this) {
  // The hot state's copies of the geometry, and its storage.
  slot_base = segment->data() + geometry.slots_offset;
  mask = geometry.mask;
  slot_size = geometry.slot_size;
  slot_count = geometry.slot_count;
  channel_data = segment->data();
  fixed_offset = geometry.fixed_offset;
  fixed_size = geometry.fixed_size;
  fixed_count = geometry.fixed_count;
  block_count = geometry.block_count;
  drop_oldest = options.policy == SlowConsumerPolicy::kDropOldest;
  write_sequence = &header->write_sequence;
  registry_changes = &reinterpret_cast<RegistryHeaderData*>(registry->data())->changes;
  slot_block_storage = std::make_unique<uint32_t[]>(geometry.slot_count);
  std::fill_n(slot_block_storage.get(), geometry.slot_count, kNoBlock);
  slots.slot_block = slot_block_storage.get();
  arena_base[0] = segment->data();
  arena_bytes = geometry.arena_size;
  next_idle_check = Clock::now();
  // Dropped loans by descriptor: the block table's, then the fixed blocks'.
  const uint64_t descriptors = uint64_t{geometry.block_count} + geometry.fixed_count;
  released_next = std::make_unique<std::atomic<uint32_t>[]>(descriptors);
  released_generation = std::make_unique<std::atomic<uint32_t>[]>(descriptors);
  fixed_storage = std::make_unique<FixedBlock[]>(geometry.fixed_count);
  fixed_free_storage = std::make_unique<uint32_t[]>(geometry.fixed_count);
  fixed_flight_storage = std::make_unique<uint32_t[]>(geometry.fixed_count);
  fixed = fixed_storage.get();
  fixed_free = fixed_free_storage.get();
  fixed_flight = fixed_flight_storage.get();
  // Block 0 on top: the first loans take the lowest blocks.
  const uint32_t hold_lines_log2 = HoldLinesLog2(geometry.fixed_count);
  for (uint32_t i = 0; i < geometry.fixed_count; ++i) {
    fixed_free[i] = geometry.fixed_count - 1 - i;
    fixed[i].hold_index = HoldIndex(i, hold_lines_log2);
  }
  fixed_free_top = geometry.fixed_count;
}

void ProducerState::CollectSpace() {
  TakeReleased();
  consumers.ProcessRegistry(options.accept_on_publish, blocks, slots);
  consumers.DrainAllReturns(blocks);
  const uint64_t next = slots.next_sequence;
  const uint64_t passed = consumers.ScanMinCursor(next);
  const uint64_t oldest = next > geometry.slot_count ? next - geometry.slot_count : 0;
  for (uint64_t m = oldest; m < passed; ++m) {
    const uint32_t d = slots.slot_block[m & geometry.mask];
    if (d == kNoBlock || IsFixed(d)) continue;
    slots.slot_block[m & geometry.mask] = kNoBlock;
    blocks.DropSlotRef(d);
  }
}

Status ProducerState::Grow(uint64_t length, uint64_t capacity) {
  uint32_t k = 0;
  while (k < geometry.extension_count && extensions[k].id != 0) ++k;
  const uint64_t room = geometry.arena_max - arena_bytes;
  if (capacity > room) {
    return Status::CapacityError("channel '", name, "': a block of ", length,
                                 " bytes does not fit; the arena has grown to ", arena_bytes,
                                 " bytes of its maximum of ", geometry.arena_max,
                                 " (ChannelOptions::max_arena_bytes)");
  }
  if (k == geometry.extension_count) {
    return Status::CapacityError("channel '", name, "': a block of ", length,
                                 " bytes does not fit, and all ", geometry.extension_count,
                                 " extensions of the arena are in use");
  }
  constexpr uint64_t kMaxStep = uint64_t{64} << 20;
  const uint64_t bytes =
      std::min(room, std::max(RoundUp(capacity, 4096), std::min(arena_bytes, kMaxStep)));
  const uint32_t id = next_extension_id;
  next_extension_id = next_extension_id == UINT32_MAX ? 1 : next_extension_id + 1;
  const std::string ext_name = ChannelExtensionName(name, id);
  if (options.extensions.acquire) {
    auto granted = options.extensions.acquire(id, bytes);
    if (!granted.ok()) {
      return granted.status().WithContext("channel '" + name + "': extension of " +
                                          std::to_string(bytes) + " bytes for a block of " +
                                          std::to_string(length));
    }
    if (*granted != ext_name) {
      if (options.extensions.release) options.extensions.release(id, bytes);
      return Status::Invalid("channel '", name, "': extension ", id, " was granted as '", *granted,
                             "', not '", ext_name, "'");
    }
  }
  auto created = Segment::Create(ext_name, bytes, SegmentKind::kChannelExtension, options.segment);
  if (!created.ok()) {
    if (options.extensions.release) options.extensions.release(id, bytes);
    return created.status().WithContext("channel '" + name + "': extension of " +
                                        std::to_string(bytes) + " bytes for a block of " +
                                        std::to_string(length));
  }
  Extension& e = extensions[k];
  e.id = id;
  e.size = bytes;
  e.segment = std::move(*created);
  e.idle = false;
  auto* entry =
      reinterpret_cast<ExtensionEntryData*>(segment->data() + geometry.extensions_offset) + k;
  entry->size.store(bytes, std::memory_order_relaxed);
  // Release: the segment exists and the size is stored before a consumer
  // sees the id (partner of its acquire load when it maps the extension).
  entry->id.store(id, std::memory_order_release);
  header->extensions_changed.fetch_add(1, std::memory_order_release);
  arena_base[k + 1] = e.segment->data();
  arena_id[k + 1] = id;
  blocks.AddRange(uint64_t{k + 1} << kExtensionShift, bytes);
  arena_bytes += bytes;
  ++stats.extensions_added;
  return Status::OK();
}

void ProducerState::ReleaseExtension(uint32_t k) {
  Extension& e = extensions[k];
  if (e.id == 0 || !blocks.RemoveRange(uint64_t{k + 1} << kExtensionShift, e.size)) return;
  auto* entry =
      reinterpret_cast<ExtensionEntryData*>(segment->data() + geometry.extensions_offset) + k;
  // Release: partner of the consumers' acquire load of extensions_changed,
  // after which they let go of their mappings.
  entry->id.store(0, std::memory_order_release);
  entry->size.store(0, std::memory_order_relaxed);
  header->extensions_changed.fetch_add(1, std::memory_order_release);
  (void)Segment::Remove(ChannelExtensionName(name, e.id));
  if (options.extensions.release) options.extensions.release(e.id, e.size);
  arena_bytes -= e.size;
  arena_base[k + 1] = nullptr;
  arena_id[k + 1] = 0;
  e = Extension{};
  ++stats.extensions_released;
}

void ProducerState::ReleaseIdleExtensions(bool force) {
  if (stats.extensions_added == stats.extensions_released) return;  // none
  const auto now = Clock::now();
  if (!force && now < next_idle_check) return;
  next_idle_check =
      now + std::max<Clock::duration>(options.extension_idle / 4, std::chrono::milliseconds(1));
  uint64_t in_use = 0;  // bit a: arena a has a block in use
  // The slots' references on messages every consumer passed go first: a
  // message read by all holds its extension no longer.
  CollectSpace();
  blocks.ForEachInUse(
      [&](uint64_t offset) { in_use |= uint64_t{1} << (offset >> kExtensionShift); });
  for (uint32_t k = 0; k < geometry.extension_count; ++k) {
    Extension& e = extensions[k];
    if (e.id == 0) continue;
    if (((in_use >> (k + 1)) & 1) != 0) {
      e.idle = false;
    } else if (force || (e.idle && now - e.idle_since >= options.extension_idle)) {
      ReleaseExtension(k);
    } else if (!e.idle) {
      e.idle = true;
      e.idle_since = now;
    }
  }
}

void ProducerState::RemoveExtensionNames() {
  for (Extension& e : extensions) {
    if (e.id != 0) (void)Segment::Remove(ChannelExtensionName(name, e.id));
  }
}

Result<uint32_t> ProducerState::WaitForSpace(uint64_t length, uint64_t capacity) {
  const auto deadline = DeadlineAfter(options.space_timeout);
  auto pause = std::chrono::microseconds(20);
  Status grown;  // the growth's error, if it failed
  bool tried_growing = false;
  const bool fits_fixed = capacity <= geometry.fixed_size;
  while (true) {
    CollectSpace();
    // A fixed block that came free meanwhile serves as well.
    uint32_t desc = fits_fixed ? TakeFixed() : kNoBlock;
    if (desc != kNoBlock) return desc;
    desc = blocks.TryTake(capacity);
    if (desc != kNoBlock) return desc;
    blocks.FlushClasses();
    desc = blocks.TryTake(capacity);
    if (desc != kNoBlock) return desc;
    // Still nothing: consumers that died may hold it (pid checks).
    consumers.ReapDead(blocks);
    CollectSpace();
    desc = fits_fixed ? TakeFixed() : kNoBlock;
    if (desc != kNoBlock) return desc;
    desc = blocks.TryTake(capacity);
    if (desc != kNoBlock) return desc;
    // Then a new extension, if descriptors are what is left (more space
    // would not help otherwise); once per wait.
    if (!tried_growing && geometry.extension_count > 0 && blocks.has_free_descriptor()) {
      tried_growing = true;
      grown = Grow(length, capacity);
      if (!grown.ok() && grown.code() == StatusCode::kCapacityError) {
        // Extensions nobody uses make room for one that fits.
        ReleaseIdleExtensions(/*force=*/true);
        grown = Grow(length, capacity);
      }
      if (grown.ok()) {
        desc = blocks.TryTake(capacity);
        if (desc != kNoBlock) return desc;
      }
      // A block larger than every arena waits for nothing.
      uint64_t largest = geometry.arena_size;
      for (const Extension& e : extensions) largest = std::max(largest, e.size);
      if (!grown.ok() && capacity > largest) return grown;
    }
    if (options.stop.stop_requested()) {
      return Status::Cancelled("channel '", name, "': the wait for space for a ", length,
                               "-byte block was cancelled (", blocks.free_range_bytes(),
                               " bytes free in pieces of at most ", blocks.largest_free_range(),
                               ", ", blocks.blocks_live(), " blocks live)");
    }
    if (Clock::now() >= deadline) {
      std::string holders;
      for (const ChannelConsumerInfo& c : consumers.Describe(blocks)) {
        if (c.held_blocks == 0) continue;
        holders += (holders.empty() ? "" : ", ") + std::string("consumer ") +
                   std::to_string(c.index) + " (pid " + std::to_string(c.pid) + ") holds " +
                   std::to_string(c.held_blocks);
      }
      return Status::TimedOut(
          "channel '", name, "': no space for a ", length, "-byte block within ",
          std::chrono::duration_cast<std::chrono::milliseconds>(options.space_timeout).count(),
          " ms (", blocks.free_range_bytes(), " bytes free in pieces of at most ",
          blocks.largest_free_range(), ", ", blocks.blocks_live(), " blocks live",
          holders.empty() ? "" : "; " + holders,
          grown.ok() ? std::string() : "; the arena could not grow: " + grown.message(), ")");
    }
    // Consumers return blocks without telling us: look again shortly.
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

Status ProducerState::WaitForRoom(uint64_t sequence) {
  const uint64_t needed = sequence - geometry.slot_count + 1;  // every cursor must reach this
  const uint32_t resume = std::clamp<uint32_t>(
      options.resume_slots == 0 ? geometry.slot_count / 8 : options.resume_slots, 1,
      geometry.slot_count);
  const uint64_t target = needed + resume - 1;
  const auto start = Clock::now();
  const auto spin_until = start + options.publish_spin;
  const auto deadline = DeadlineAfter(options.publish_timeout);
  while (true) {
    PollRegistry();
    if (consumers.ScanMinCursor(slots.next_sequence) >= target) return Status::OK();
    const auto now = Clock::now();
    // A stop is looked at past the spin, between futex waits of at most
    // 1 ms: it is seen within about a millisecond, and a caller that
    // stopped in advance still gets the spin's chance of room.
    const bool timed_out = now >= deadline;
    const bool cancelled = !timed_out && now >= spin_until && options.stop.stop_requested();
    if (timed_out || cancelled) {
      const uint64_t least = consumers.min_cursor();
      if (least >= needed) return Status::OK();  // at least one slot freed
      const uint32_t k = consumers.Slowest();
      const uint32_t pid = k < geometry.max_consumers ? RegPid(consumers[k].word) : 0;
      if (cancelled) {
        return Status::Cancelled("channel '", name, "': the wait for consumer ", k, " (pid ", pid,
                                 ") to read message ", needed - 1,
                                 " was cancelled (its cursor is at ", least, ")");
      }
      return Status::TimedOut(
          "channel '", name, "': consumer ", k, " (pid ", pid, ") has not read message ",
          needed - 1, " within ",
          std::chrono::duration_cast<std::chrono::milliseconds>(options.publish_timeout).count(),
          " ms (its cursor is at ", least, ")");
    }
    if (now < spin_until) {
      CpuRelax();
      continue;
    }
    consumers.ReapDead(blocks);
    const uint32_t k = consumers.Slowest();
    if (k == geometry.max_consumers) continue;
    const std::atomic<uint64_t>& cursor = consumers[k].header->cursor;
    const uint64_t seen = cursor.load(std::memory_order_seq_cst);
    header->space_target.store(target, std::memory_order_relaxed);
    // seq_cst: the Dekker pair with the consumer's seq_cst cursor store
    // followed by its seq_cst load of space_waiting: either it sees us
    // waiting and wakes us, or our reload below sees its new cursor.
    header->space_waiting.store(k + 1, std::memory_order_seq_cst);
    if (std::max(cursor.load(std::memory_order_seq_cst), consumers[k].start) < target) {
      // The futex word is the cursor's low half (little-endian).
      auto* word =
          reinterpret_cast<std::atomic<uint32_t>*>(const_cast<std::atomic<uint64_t>*>(&cursor));
      FutexWait(word, static_cast<uint32_t>(seen),
                std::min<Clock::duration>(deadline - Clock::now(), std::chrono::milliseconds(1)));
    }
    header->space_waiting.store(0, std::memory_order_relaxed);
  }
}

}  // namespace alkaid::shm::internal
