#include "alkaid/format/memory_pool.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

namespace alkaid::format {

namespace {

// Zero-size allocations all return this aligned address; it is never
// dereferenced or freed.
alignas(kBufferAlignment) uint8_t zero_size_area[1];

bool ValidAlignment(int64_t alignment) {
  return alignment >= kBufferAlignment && (alignment & (alignment - 1)) == 0;
}

}  // namespace

Result<uint8_t*> MemoryPool::Reallocate(uint8_t* ptr, int64_t old_size, int64_t new_size,
                                        int64_t alignment) {
  ALKAID_ASSIGN_OR_RAISE(uint8_t * out, Allocate(new_size, alignment));
  const int64_t keep = old_size < new_size ? old_size : new_size;
  if (keep > 0) std::memcpy(out, ptr, static_cast<size_t>(keep));
  Free(ptr, old_size, alignment);
  return out;
}

Status MemoryPool::AllocateWithOwner(int64_t size, int64_t alignment, uint8_t** out,
                                     std::shared_ptr<MemoryPool>* owner) {
  std::shared_ptr<MemoryPool> held = shared_owner();
  MemoryPool* from = held != nullptr ? held.get() : this;
  ALKAID_ASSIGN_OR_RAISE(*out, from->Allocate(size, alignment));
  *owner = std::move(held);
  return Status::OK();
}

void* MemoryPool::AllocateObject(size_t size, size_t alignment) {
  return ::operator new(size, std::align_val_t(alignment));
}

void MemoryPool::FreeObject(void* p, size_t /*size*/, size_t alignment) noexcept {
  // Unsized: clang enables sized deallocation only when asked.
  ::operator delete(p, std::align_val_t(alignment));
}

struct SystemMemoryPool::Impl {
  int64_t limit;
  // Relaxed suffices: the counters are statistics and a soft limit, not used
  // to publish memory to other threads.
  std::atomic<int64_t> allocated{0};
  std::atomic<int64_t> max{0};

  bool Reserve(int64_t size) {
    const int64_t now = allocated.fetch_add(size, std::memory_order_relaxed) + size;
    if (limit >= 0 && now > limit) {
      allocated.fetch_sub(size, std::memory_order_relaxed);
      return false;
    }
    int64_t prev = max.load(std::memory_order_relaxed);
    while (now > prev && !max.compare_exchange_weak(prev, now, std::memory_order_relaxed)) {
    }
    return true;
  }
};

SystemMemoryPool::SystemMemoryPool(int64_t limit_bytes) : impl_(new Impl{limit_bytes}) {}
SystemMemoryPool::~SystemMemoryPool() { delete impl_; }

Result<uint8_t*> SystemMemoryPool::Allocate(int64_t size, int64_t alignment) {
  if (size < 0) return Status::Invalid("negative allocation size ", size);
  if (!ValidAlignment(alignment)) return Status::Invalid("bad alignment ", alignment);
  if (size == 0) return zero_size_area;
  if (static_cast<uint64_t>(size) > std::numeric_limits<size_t>::max() / 2) {
    return Status::OutOfMemory("allocation of ", size, " bytes is too large");
  }
  if (!impl_->Reserve(size)) {
    return Status::OutOfMemory("allocating ", size, " bytes would exceed the pool limit of ",
                               impl_->limit, " bytes (", impl_->allocated.load(), " in use)");
  }
  void* p = nullptr;
  if (posix_memalign(&p, static_cast<size_t>(alignment), static_cast<size_t>(size)) != 0) {
    impl_->allocated.fetch_sub(size, std::memory_order_relaxed);
    return Status::OutOfMemory("malloc of ", size, " bytes failed");
  }
  return static_cast<uint8_t*>(p);
}

Result<uint8_t*> SystemMemoryPool::Reallocate(uint8_t* ptr, int64_t old_size, int64_t new_size,
                                              int64_t alignment) {
  if (ptr == zero_size_area) return Allocate(new_size, alignment);
  if (new_size == 0) {
    Free(ptr, old_size, alignment);
    return zero_size_area;
  }
  return MemoryPool::Reallocate(ptr, old_size, new_size, alignment);
}

void SystemMemoryPool::Free(uint8_t* ptr, int64_t size, int64_t /*alignment*/) {
  if (ptr == nullptr || ptr == zero_size_area) return;
  std::free(ptr);
  impl_->allocated.fetch_sub(size, std::memory_order_relaxed);
}

int64_t SystemMemoryPool::bytes_allocated() const {
  return impl_->allocated.load(std::memory_order_relaxed);
}
int64_t SystemMemoryPool::max_memory() const { return impl_->max.load(std::memory_order_relaxed); }
std::string SystemMemoryPool::backend_name() const { return "system"; }

MemoryPool* default_memory_pool() {
  // Leaked on purpose: buffers may be freed from static destructors.
  static auto* pool = new SystemMemoryPool();
  return pool;
}

}  // namespace alkaid::format
