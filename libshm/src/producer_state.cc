// The producer's state: its slow paths (space and room), off the data path.

#include "producer_state_internal.h"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

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
      blocks(geometry.block_count, geometry.arena_offset, geometry.arena_size),
      consumers(geometry, name, options, segment->data(), registry->data()) {
  ring.slot_block.assign(geometry.slot_count, kNoBlock);
  released_next = std::make_unique<std::atomic<uint32_t>[]>(geometry.block_count);
  released_generation = std::make_unique<std::atomic<uint32_t>[]>(geometry.block_count);
}

void ProducerState::CollectSpace() {
  TakeReleased();
  consumers.ProcessRegistry(options.accept_on_publish, blocks, ring);
  consumers.DrainAllReturns(blocks);
  const uint64_t next = ring.next_sequence;
  const uint64_t passed = consumers.ScanMinCursor(next);
  const uint64_t oldest = next > geometry.slot_count ? next - geometry.slot_count : 0;
  for (uint64_t m = oldest; m < passed; ++m) {
    const uint32_t d = ring.slot_block[m & geometry.mask];
    if (d == kNoBlock) continue;
    ring.slot_block[m & geometry.mask] = kNoBlock;
    blocks.DropRingRef(d);
  }
}

Result<uint32_t> ProducerState::WaitForSpace(uint64_t length, uint64_t capacity) {
  const auto deadline = DeadlineAfter(options.space_timeout);
  auto pause = std::chrono::microseconds(20);
  while (true) {
    CollectSpace();
    uint32_t desc = blocks.TryTake(capacity);
    if (desc != kNoBlock) return desc;
    blocks.FlushClasses();
    desc = blocks.TryTake(capacity);
    if (desc != kNoBlock) return desc;
    // Still nothing: consumers that died may hold it (pid checks).
    consumers.ReapDead(blocks);
    CollectSpace();
    desc = blocks.TryTake(capacity);
    if (desc != kNoBlock) return desc;
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
          holders.empty() ? "" : "; " + holders, ")");
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
    if (consumers.ScanMinCursor(ring.next_sequence) >= target) return Status::OK();
    const auto now = Clock::now();
    // A stop is looked at past the spin, between futex waits of at most
    // 1 ms: it is seen within about a millisecond, and a caller that
    // stopped in advance still gets the spin's chance of room.
    const bool timed_out = now >= deadline;
    const bool cancelled = !timed_out && now >= spin_until && options.stop.stop_requested();
    if (timed_out || cancelled) {
      const uint64_t min_cursor = consumers.min_cursor();
      if (min_cursor >= needed) return Status::OK();  // at least one slot freed
      const uint32_t k = consumers.Slowest();
      const uint32_t pid = k < geometry.max_consumers ? RegPid(consumers[k].word) : 0;
      if (cancelled) {
        return Status::Cancelled("channel '", name, "': the wait for consumer ", k, " (pid ", pid,
                                 ") to read message ", needed - 1,
                                 " was cancelled (its cursor is at ", min_cursor, ")");
      }
      return Status::TimedOut(
          "channel '", name, "': consumer ", k, " (pid ", pid, ") has not read message ",
          needed - 1, " within ",
          std::chrono::duration_cast<std::chrono::milliseconds>(options.publish_timeout).count(),
          " ms (its cursor is at ", min_cursor, ")");
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
