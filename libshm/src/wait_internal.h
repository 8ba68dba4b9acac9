#pragma once

// Private: waiting helpers shared by the allocator and the ring.

#include <chrono>
#include <cstdint>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace alkaid::shm::internal {

/// One iteration of a spin loop: tells the CPU we are spinning.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

using SteadyClock = std::chrono::steady_clock;

/// Escalating pause for slow paths (backpressure, allocator full): spins a
/// little, then yields, then sleeps with a growing interval capped at
/// `max_sleep`. Never used on the data path of the ring.
class Backoff {
 public:
  explicit Backoff(std::chrono::microseconds max_sleep = std::chrono::microseconds(200))
      : max_sleep_(max_sleep) {}

  void Pause() {
    if (round_ < 64) {
      CpuRelax();
    } else if (round_ < 80) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep_);
      if (sleep_ < max_sleep_) sleep_ *= 2;
    }
    ++round_;
  }

 private:
  std::chrono::microseconds max_sleep_;
  std::chrono::microseconds sleep_{1};
  uint32_t round_ = 0;
};

/// Deadline `timeout` from now; saturates instead of overflowing for huge
/// timeouts.
inline SteadyClock::time_point DeadlineAfter(std::chrono::nanoseconds timeout) {
  const auto now = SteadyClock::now();
  if (timeout > std::chrono::hours(24 * 365)) return SteadyClock::time_point::max();
  return now + timeout;
}

}  // namespace alkaid::shm::internal
