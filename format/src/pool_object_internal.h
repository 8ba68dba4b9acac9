#pragma once

// Objects made over a pool's buffers in the pool's object memory
// (MemoryPool::object_pool): a builder's buffer objects, the array data and
// array it finishes, the record batch made of them. Not installed.

#include <cstddef>
#include <memory>
#include <new>
#include <utility>

#include <vector>

#include "alkaid/format/array_data.h"
#include "alkaid/format/memory_pool.h"
#include "alkaid/format/type_fwd.h"

namespace alkaid::format::internal {

/// Allocates from a pool's object memory, and holds the pool (its
/// object_pool()): a shared_ptr made with it keeps the pool, and with it the
/// memory, until the reference count itself is freed (libstdc++ frees a
/// control block through a copy of its allocator, destroyed after).
template <typename T>
struct PoolObjectAllocator {
  using value_type = T;
  std::shared_ptr<MemoryPool> pool;

  explicit PoolObjectAllocator(std::shared_ptr<MemoryPool> p) : pool(std::move(p)) {}
  template <typename U>
  explicit PoolObjectAllocator(const PoolObjectAllocator<U>& o) : pool(o.pool) {}

  T* allocate(size_t n) { return static_cast<T*>(pool->AllocateObject(n * sizeof(T), alignof(T))); }
  void deallocate(T* p, size_t n) noexcept { pool->FreeObject(p, n * sizeof(T), alignof(T)); }
  template <typename U>
  bool operator==(const PoolObjectAllocator<U>& o) const {
    return pool == o.pool;
  }
};

/// A `T` made with `args` in the object memory of `pool` (null, or a pool
/// without object memory: the heap, as std::make_shared).
template <typename T, typename... Args>
std::shared_ptr<T> MakePoolObject(MemoryPool* pool, Args&&... args) {
  if (pool != nullptr) {
    if (std::shared_ptr<MemoryPool> objects = pool->object_pool()) {
      return std::allocate_shared<T>(PoolObjectAllocator<T>(std::move(objects)),
                                     std::forward<Args>(args)...);
    }
  }
  return std::make_shared<T>(std::forward<Args>(args)...);
}

/// ArrayData::Make's array data, in the object memory of `pool`.
inline ArrayDataPtr MakeArrayData(MemoryPool* pool, TypePtr type, int64_t length,
                                  std::vector<std::shared_ptr<Buffer>> buffers,
                                  int64_t null_count) {
  auto d = MakePoolObject<ArrayData>(pool);
  d->type = std::move(type);
  d->length = length;
  d->null_count = null_count;
  d->buffers = std::move(buffers);
  return d;
}

/// The pool of a buffer a builder made (ResizableBuffer::MakeShared, as
/// BufferBuilder does), or null for any other buffer.
MemoryPool* BuiltBufferPool(const Buffer& buffer);

/// MakeArray's typed array, in the object memory of `pool`.
ArrayPtr MakeArrayIn(ArrayDataPtr data, MemoryPool* pool);

}  // namespace alkaid::format::internal
