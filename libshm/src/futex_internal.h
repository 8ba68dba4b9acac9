#pragma once

// Private: cross-process futex on a 32-bit word in shared memory. No
// FUTEX_PRIVATE_FLAG: waiters and wakers are in different processes.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace alkaid::shm::internal {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex needs a plain 32-bit word");

/// Sleeps while `*word == expected`, at most `timeout`. Returns on wake-up,
/// value change, timeout or signal; the caller re-checks its condition.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout);

/// Wakes every waiter on `word`.
void FutexWakeAll(std::atomic<uint32_t>* word);

}  // namespace alkaid::shm::internal
