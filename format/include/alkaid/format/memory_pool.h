#pragma once

/// \file
/// Where array buffers come from. Every allocation in format/ goes through a
/// MemoryPool; nothing assumes the process heap, so a pool backed by a
/// shared-memory segment can hand out the buffers a producer builds in place.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"

namespace alkaid::format {

class ObjectMemory;

/// Alignment of every buffer allocated by Alkaid, and the multiple its
/// capacity is padded to (the format's recommended 64 bytes).
inline constexpr int64_t kBufferAlignment = 64;

/// Rounds `n` up to a multiple of kBufferAlignment.
constexpr int64_t PaddedLength(int64_t n) {
  return (n + kBufferAlignment - 1) & ~(kBufferAlignment - 1);
}

/// Allocator interface for buffer memory.
///
/// Implementations must be thread-safe: builders on several threads may share
/// one pool. Sizes are in bytes; the pool may round them up internally but the
/// caller always passes back the size it asked for.
class ALKAID_EXPORT MemoryPool {
 public:
  virtual ~MemoryPool() = default;

  /// Allocates `size` bytes at an address that is a multiple of `alignment`
  /// (a power of two, at least kBufferAlignment). The memory is uninitialised.
  /// A zero-size request returns a valid, unique-per-pool sentinel pointer
  /// that must still be passed to Free.
  virtual Result<uint8_t*> Allocate(int64_t size, int64_t alignment) = 0;

  /// Grows or shrinks an allocation, preserving min(old_size, new_size) bytes.
  /// The default allocates, copies and frees.
  virtual Result<uint8_t*> Reallocate(uint8_t* ptr, int64_t old_size, int64_t new_size,
                                      int64_t alignment);

  /// Returns memory obtained from Allocate/Reallocate with the same size and
  /// alignment.
  virtual void Free(uint8_t* ptr, int64_t size, int64_t alignment) = 0;

  /// Bytes currently allocated through this pool.
  virtual int64_t bytes_allocated() const = 0;
  /// Highest value bytes_allocated() has had.
  virtual int64_t max_memory() const = 0;
  /// Short name of the backing store ("system", "shm:<segment>", ...).
  virtual std::string backend_name() const = 0;

  /// For a pool whose handle may go before the buffers allocated from it
  /// (a pool over one shared-memory region): the pool those buffers use
  /// and hold, which lives until the last of them and the handle are gone.
  /// Null (the default) for pools that outlive their buffers by contract
  /// (default_memory_pool(), a SystemMemoryPool kept by its user).
  virtual std::shared_ptr<MemoryPool> shared_owner() { return nullptr; }

  /// Allocate for a caller that holds the bytes' owner while it keeps them
  /// (a builder's growing buffer): `size` bytes at `alignment`, as
  /// Allocate, into `*out`, and shared_owner() into `*owner` (null for a
  /// pool without one). The caller then gives the bytes back (Reallocate,
  /// Free) to `*owner` when it is not null, else to this pool. One call
  /// where shared_owner() and Allocate would be two: a pool over one region
  /// (client::ShmBatchPool) bumps its pointer in it. On failure `*out` and
  /// `*owner` are left as they were. The default calls shared_owner() and
  /// the owner's (or this pool's) Allocate. `*owner` must be empty.
  virtual Status AllocateWithOwner(int64_t size, int64_t alignment, uint8_t** out,
                                   std::shared_ptr<MemoryPool>* owner);

  /// For a pool that draws the small objects made over its buffers (the
  /// buffer objects, array data, arrays and record batches that builders
  /// and RecordBatch::Make create, each with its reference count) from
  /// memory of its own when they are not made in its object_memory(): the
  /// pool to draw them from with AllocateObject, shared by each such
  /// object, so that it lives until the last of them is gone. Null (the
  /// default): such objects come from the heap.
  virtual std::shared_ptr<MemoryPool> object_pool() { return nullptr; }
  /// For a pool recycled with its region (ShmBatchPool): the memory those
  /// objects are made in, sharing the pool's shared_owner() count and
  /// linked to each other once, so that the region's next use of the same
  /// shape finds them linked (object_memory.h). Taken before object_pool().
  /// A pool returns one only if its shared_owner() gives back the bytes of
  /// all its buffers when it goes (a region): the buffer objects made there
  /// do not free theirs. Null (the default): none.
  virtual ObjectMemory* object_memory() { return nullptr; }
  /// Memory for one object (`alignment` at most alignof(std::max_align_t));
  /// never null (throws std::bad_alloc as operator new does). The default is
  /// the heap. Thread-safe.
  virtual void* AllocateObject(size_t size, size_t alignment);
  /// Gives back what AllocateObject returned, with the same size and
  /// alignment. Thread-safe.
  virtual void FreeObject(void* p, size_t size, size_t alignment) noexcept;

  Result<uint8_t*> Allocate(int64_t size) { return Allocate(size, kBufferAlignment); }
  void Free(uint8_t* ptr, int64_t size) { Free(ptr, size, kBufferAlignment); }
};

/// The process-wide pool backed by aligned heap allocation. Never null;
/// lives for the whole process.
ALKAID_EXPORT MemoryPool* default_memory_pool();

/// A pool over the heap with its own statistics, optionally refusing to go
/// past `limit_bytes` (-1: no limit). Useful for tests and for bounding a
/// decoder's memory. Thread-safe.
class ALKAID_EXPORT SystemMemoryPool : public MemoryPool {
 public:
  explicit SystemMemoryPool(int64_t limit_bytes = -1);
  ~SystemMemoryPool() override;

  Result<uint8_t*> Allocate(int64_t size, int64_t alignment) override;
  Result<uint8_t*> Reallocate(uint8_t* ptr, int64_t old_size, int64_t new_size,
                              int64_t alignment) override;
  void Free(uint8_t* ptr, int64_t size, int64_t alignment) override;
  int64_t bytes_allocated() const override;
  int64_t max_memory() const override;
  std::string backend_name() const override;
  using MemoryPool::Allocate;
  using MemoryPool::Free;

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace alkaid::format
