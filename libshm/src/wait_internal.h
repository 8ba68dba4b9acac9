#pragma once

// Private: waiting helpers shared by the channel's producer and consumer.

#include <chrono>
#include <cstdint>

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

/// Deadline `timeout` from now; saturates instead of overflowing for huge
/// timeouts.
inline SteadyClock::time_point DeadlineAfter(std::chrono::nanoseconds timeout) {
  const auto now = SteadyClock::now();
  if (timeout > std::chrono::hours(24 * 365)) return SteadyClock::time_point::max();
  return now + timeout;
}

}  // namespace alkaid::shm::internal
