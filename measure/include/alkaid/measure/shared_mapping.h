#pragma once

/// \file
/// Memory the processes of one measurement share: an anonymous MAP_SHARED
/// mapping made before the fork, so that the parent and its children see
/// the same objects (control words, stamps, histograms) without a name in
/// /dev/shm that could be left behind. A mapping is whole pages: a
/// signalling line mapped alone has its page to itself.

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "alkaid/common/status.h"

namespace alkaid::measure {

/// `count` objects of T in an anonymous shared mapping, zero-filled, then
/// default-constructed (T must be fine with that: atomics and plain data);
/// destroyed and unmapped by the destructor. Move-only.
template <typename T>
class SharedMapping {
  static_assert(std::is_default_constructible_v<T>);

 public:
  SharedMapping() = default;
  ~SharedMapping() { Reset(); }
  SharedMapping(SharedMapping&& other) noexcept
      : objects_(std::exchange(other.objects_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  SharedMapping& operator=(SharedMapping&& other) noexcept {
    if (this != &other) {
      Reset();
      objects_ = std::exchange(other.objects_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;

  /// Maps `count` (>= 1) objects, replacing what this held; `what` names
  /// them in the error (IOError with the errno).
  Status Map(std::size_t count = 1, const char* what = "shared objects") {
    Reset();
    const std::size_t bytes = sizeof(T) * count;
    void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
      return Status::IOError("mmap of ", bytes, " shared bytes for ", what, ": ",
                             ErrnoMessage(errno));
    }
    // Fresh anonymous memory is zero-filled; the constructors start the
    // objects' lifetimes.
    objects_ = static_cast<T*>(mem);
    count_ = count;
    for (std::size_t i = 0; i < count; ++i) new (objects_ + i) T;
    return Status::OK();
  }

  /// As Map, for benches: prints the error and exits with 1.
  static SharedMapping MapOrDie(std::size_t count = 1) {
    SharedMapping mapping;
    const Status st = mapping.Map(count);
    if (!st.ok()) {
      (void)std::fprintf(stderr, "%s\n", st.ToString().c_str());
      // NOLINTNEXTLINE(concurrency-mt-unsafe): for single-threaded benches, before they fork
      std::exit(1);
    }
    return mapping;
  }

  T* get() const { return objects_; }
  T* operator->() const { return objects_; }

 private:
  void Reset() {
    if (objects_ == nullptr) return;
    std::destroy_n(objects_, count_);
    ::munmap(objects_, sizeof(T) * count_);
    objects_ = nullptr;
    count_ = 0;
  }

  T* objects_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace alkaid::measure
