#pragma once

// Replaces the global operator new and delete of the test executable that
// includes this header (in exactly one of its files) with ones that count
// allocations, for the tests that show a path allocates nothing. The
// sanitizers' runtimes define these operators themselves: such tests are
// built without sanitizers only.

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace counting_new {

/// Heap allocations through operator new so far.
inline std::atomic<uint64_t> g_allocations{0};

/// Those of the calling thread (a test that counts one thread's calls while
/// a library's background threads allocate on their own schedule).
inline thread_local uint64_t t_allocations = 0;

/// While set, the calling thread's nothrow operator new returns null, as
/// it would with the heap exhausted (for the tests of a path that
/// allocates that way and must fail cleanly). The throwing one is
/// untouched.
inline thread_local bool t_refuse_nothrow = false;

}  // namespace counting_new

// Not inlined: g++ would see free() of what its built-in operator new
// returned and warn (-Wmismatched-new-delete).
[[gnu::noinline]] void* operator new(std::size_t size) {
  counting_new::g_allocations.fetch_add(1, std::memory_order_relaxed);
  ++counting_new::t_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  if (counting_new::t_refuse_nothrow) return nullptr;
  counting_new::g_allocations.fetch_add(1, std::memory_order_relaxed);
  ++counting_new::t_allocations;
  return std::malloc(size == 0 ? 1 : size);
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
