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

/// The two halves of an asymmetric Dekker fence between processes
/// (membarrier(2), MEMBARRIER_CMD_GLOBAL_EXPEDITED). A process that called
/// RegisterForHeavyFence may order a store before a later load with a
/// compiler barrier alone, as long as the other side of the pair calls
/// HeavyFence between its own store and load: the kernel makes every
/// running thread of every registered process execute a full barrier
/// before HeavyFence returns (threads not running pass one when they are
/// switched in). RegisterForHeavyFence is false where the kernel has no
/// such command (then use a full fence on both sides); it registers the
/// whole process, once. HeavyFence is false if the call failed.
bool RegisterForHeavyFence();
bool HeavyFence();

}  // namespace alkaid::shm::internal
