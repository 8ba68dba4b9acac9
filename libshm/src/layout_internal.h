#pragma once

// Private: constants and helpers shared by the shared-memory layouts of
// libshm. Everything that lives in shared memory is a standard-layout struct
// of fixed-size integers and lock-free atomics, addressed by offsets; see
// docs/SHM_LAYOUT.md.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace alkaid::shm::internal {

/// Size of a cache line on the platforms we target (x86-64, aarch64). Shared
/// structs pad every independently-written field group to this size so that
/// a producer and its consumers never write the same line.
inline constexpr std::size_t kCacheLineSize = 64;

/// Rounds `n` up to a multiple of `align` (a power of two). Callers check
/// for overflow before calling with untrusted values.
constexpr uint64_t RoundUp(uint64_t n, uint64_t align) { return (n + align - 1) & ~(align - 1); }

constexpr bool IsPowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

// Shared memory is only ever accessed through these atomics; a type that
// needed a lock would silently put a process-local mutex in shared memory.
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == 4 && alignof(std::atomic<uint32_t>) == 4);
static_assert(sizeof(std::atomic<uint64_t>) == 8 && alignof(std::atomic<uint64_t>) == 8);
static_assert(std::is_standard_layout_v<std::atomic<uint64_t>>);

/// Asserts what every shared-memory struct must be.
#define ALKAID_SHM_PLAIN_DATA(T, expected_size)                               \
  static_assert(std::is_standard_layout_v<T>, #T " must be standard-layout"); \
  static_assert(sizeof(T) == (expected_size), #T " has an unexpected size");  \
  static_assert(alignof(T) <= ::alkaid::shm::internal::kCacheLineSize,        \
                #T " is over-aligned for a shared segment");                  \
  static_assert(sizeof(T) % ::alkaid::shm::internal::kCacheLineSize == 0,     \
                #T " must be padded to whole cache lines")

}  // namespace alkaid::shm::internal
