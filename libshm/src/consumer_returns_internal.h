#pragma once

// Private: a consumer's return queue as its process sees it
// (ChannelBlock::Returns), shared by the ChannelConsumer that fills it and
// every ChannelBlock that holds a body it received. Push is called from any
// thread of the consumer's process; the rest is immutable after Open.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "alkaid/shm/channel.h"
#include "alkaid/shm/segment.h"
#include "channel_layout_internal.h"

namespace alkaid::shm {

// The consumer's return queue and everything a held block needs: it keeps
// the channel mapped (the block's bytes) and the consumer's own segment
// (where returns go), so blocks may outlive the ChannelConsumer. When the
// last holder goes (the consumer closed and every block came back), it
// tells the producer the consumer is done.
struct ChannelBlock::Returns {
  std::shared_ptr<Segment> channel;
  std::shared_ptr<Segment> registry;
  std::shared_ptr<Segment> own;
  internal::ConsumerSegHeaderData* header = nullptr;
  std::atomic<uint64_t>* cells = nullptr;
  uint32_t capacity = 0;
  uint32_t capacity_log2 = 0;
  const internal::ConsumerControlData* control = nullptr;
  internal::RegistryHeaderData* reg_header = nullptr;
  std::atomic<uint64_t> reserve{0};     // next queue position to fill (process-local)
  std::atomic<uint64_t> read_guess{0};  // the producer's returns_read, as last seen
  // The extensions of the producer's arena this process mapped, by table
  // entry, and those it let go of (their pages dropped: Segment::DropPages),
  // kept, like the channel, as long as a block may point into them. The
  // consumer thread alone changes them.
  std::array<std::shared_ptr<Segment>, internal::kMaxExtensions> extensions;
  std::vector<std::shared_ptr<Segment>> retired;

  Returns() = default;
  Returns(const Returns&) = delete;
  Returns& operator=(const Returns&) = delete;

  ~Returns() {
    // Release: every return queued above is visible before `done`; partner
    // of the producer's acquire load of the state.
    header->state.store(internal::kConsumerDone, std::memory_order_release);
    reg_header->changes.fetch_add(1, std::memory_order_release);
    // We created the name, we remove it; a producer that accepted us keeps
    // its mapping until it has drained our last returns.
    (void)Segment::Remove(own->name());
  }

  // Queues the return of a block; any thread.
  void Push(uint32_t descriptor, uint32_t generation) {
    const uint64_t pos = reserve.fetch_add(1, std::memory_order_relaxed);
    if (pos - read_guess.load(std::memory_order_relaxed) >= capacity && !WaitForRoom(pos)) return;
    // Release: the producer's acquire load of the entry sees it whole.
    cells[pos & (capacity - 1)].store(
        internal::ReturnWord(internal::ReturnLap(pos, capacity_log2), descriptor, generation),
        std::memory_order_release);
  }

  // Gives a block this consumer claimed back to the producer; any thread.
  // A fixed block (`hold`: this consumer's count of it) by its hold count,
  // which the producer reads before it lends the block again; another by a
  // return. (ChannelBlock::Release writes the same rule out.)
  static void LetGo(Returns* returns, uint32_t descriptor, uint32_t generation,
                    std::atomic<uint32_t>* hold) {
    if (hold != nullptr) {
      internal::DropHold(hold);
    } else {
      returns->Push(descriptor, generation);
    }
  }

  // Push's slow path, out of line (its clock and sleep would otherwise
  // widen every caller's frame): waits until entry `pos` is free; false if
  // the producer is gone or broken (nothing to tell it then).
  [[gnu::noinline]] bool WaitForRoom(uint64_t pos) {
    // Cannot happen with an honest producer (the queue holds twice the
    // blocks that can be live); wait for it to drain, within reason.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (true) {
      // Acquire: partner of the producer's release store after draining.
      const uint64_t read = control->returns_read.load(std::memory_order_acquire);
      read_guess.store(read, std::memory_order_relaxed);
      if (pos - read < capacity) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
};

}  // namespace alkaid::shm
