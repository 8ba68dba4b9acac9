#pragma once

/// \file
/// A format::MemoryPool whose buffers lie in one block of a producer's
/// channel arena, so that format builders write a record batch directly
/// into shared memory.

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/memory_pool.h"
#include "alkaid/shm/channel.h"

namespace alkaid::client {

/// Carves 64-byte aligned buffers out of ONE block (the batch "region"), a
/// loan of a shm::ChannelProducer's arena. Give it to format::MakeBuilder (or any code taking a
/// MemoryPool) to build a batch in place; every buffer of that batch then
/// lies in the region, which BatchPublisher::Publish sends without copying.
///
/// Allocation is a bump pointer: Free and shrinking only give space back
/// when they concern the most recent allocation, and growing the most
/// recent allocation happens in place. Size the region for the batch plus
/// the builders' growth (a builder doubles its buffers as it appends, so
/// reserving capacity up front keeps the waste low).
///
/// Lifetime: the region and its allocator are shared by the pool and every
/// buffer allocated from it, and hold the loan: the region stays valid (and
/// is never reused) until the pool and the last of those buffers are gone,
/// on whichever thread that happens, and after publishing also until every
/// consumer returned it. A batch may outlive its pool. Once published
/// (Seal()), the pool refuses further allocations.
///
/// The objects made over the pool's buffers (the builders' buffer objects,
/// the array data, arrays and record batch they finish into) are made in
/// the slots of an object memory that belongs to the region
/// (MemoryPool::object_memory, format::ObjectMemory): they have no
/// reference count of their own but share the region's, and their links to
/// each other are made once and kept with the block, so that the next batch
/// of the same shape built in the block only fills in lengths and
/// addresses. They cost no heap allocation and own what they point to
/// wherever they go: a pointer copied from a link (a batch's column kept
/// after the batch and the pool) shares the region's count too, and keeps
/// the loan until it goes; whichever pointer goes last, on whichever
/// thread, lets the loan and the block go (no sweep, no thread). Objects past
/// the slots come from the heap (MemoryPool::object_pool). A buffer's bytes
/// count in bytes_allocated() until the region goes (the buffer object has
/// no count of its own to give them back by).
///
/// Recycling: the region, its object memory and the pool object itself
/// are one block of heap memory, made once and taken again for later
/// batches when the pool comes from BatchPublisher::NewPool (the publisher
/// keeps the blocks let go, on whatever thread that happened). The block's
/// loan goes back to the arena when the last holder goes, as before; only
/// the block's own memory is kept for the next pool. Create makes a block
/// of its own each time.
///
/// Thread safety: Allocate/Reallocate/Free may be called from any thread
/// (a mutex). Create must run on the producer thread; the pool may be
/// destroyed on any thread.
class ALKAID_EXPORT ShmBatchPool : public format::MemoryPool {
 public:
  ~ShmBatchPool() override;
  /// The pool object lies in its region's block (see above; never from new):
  /// deleting it (std::unique_ptr) gives back the pool's reference to the
  /// region, and the block goes once the region's last holder does.
  // NOLINTNEXTLINE(cert-dcl54-cpp): the pool is made by Lend/Create only (no operator new)
  static void operator delete(void* p) noexcept;

  /// Loans a region of `region_bytes` (rounded up to 64) from `channel`
  /// (waiting for space up to its space_timeout). The pool keeps the
  /// channel's state alive on its own.
  static Result<std::unique_ptr<ShmBatchPool>> Create(shm::ChannelProducer* channel,
                                                      uint64_t region_bytes);

  Result<uint8_t*> Allocate(int64_t size, int64_t alignment) override;
  Result<uint8_t*> Reallocate(uint8_t* ptr, int64_t old_size, int64_t new_size,
                              int64_t alignment) override;
  void Free(uint8_t* ptr, int64_t size, int64_t alignment) override;
  /// Allocate in the region, and the region (shared_owner()) as the
  /// bytes' owner, in one call.
  Status AllocateWithOwner(int64_t size, int64_t alignment, uint8_t** out,
                           std::shared_ptr<format::MemoryPool>* owner) override;
  int64_t bytes_allocated() const override;
  int64_t max_memory() const override;
  /// "shm:<segment name>".
  std::string backend_name() const override;
  /// The shared region: what buffers allocated from this pool hold.
  std::shared_ptr<format::MemoryPool> shared_owner() override;
  /// The region: the objects made over the pool's buffers go in its object
  /// memory.
  std::shared_ptr<format::MemoryPool> object_pool() override;
  /// The region's object memory: those objects are parked there between
  /// uses of the region's block, and taken again by the next batch built in
  /// it (format::ObjectMemory).
  format::ObjectMemory* object_memory() override;
  using format::MemoryPool::Allocate;
  using format::MemoryPool::Free;

  /// First byte of the region.
  uint8_t* region_data() const { return region_; }
  /// Bytes of the region.
  uint64_t region_size() const { return region_size_; }
  /// Bytes from the region start up to the end of the highest allocation
  /// (a multiple of 64): the body a published batch occupies.
  uint64_t used_bytes() const;
  /// Offset of the region in the channel's payload (as consumers see it).
  uint64_t region_offset() const;
  /// True if [p, p + n) lies inside the region.
  bool Contains(const void* p, uint64_t n) const;

  /// True once a BatchPublisher published the region: allocations fail.
  bool sealed() const;

 private:
  friend class BatchPublisher;
  struct Region;   // the loan, its bump allocator, the object memory (shm_batch_pool.cc)
  struct Block;    // a region, its reference count and the pool object, recycled
  struct Cache;    // a publisher's blocks let go, for its next pools
  struct Release;  // the region's count fell to zero
  template <typename T>
  struct CountAllocator;  // the region's count, in its block
  // The functions declared inline below are defined in
  // shm_batch_pool_internal.h, for the two files of this library that use
  // them (shm_batch_pool.cc, and batch_publisher.cc: NewPool lends a pool,
  // Publish seals it, without a call).
  //
  // The region's count fell to zero and its block was freed: nothing made
  // over the region is held; the loan goes and the block is recycled.
  static inline void Released(Block* b);
  // Lets go of a block whose region and objects are idle: back to its
  // cache, or deleted.
  static inline void Recycle(Block* b);
  inline ShmBatchPool(shm::ChannelProducer* channel, Block* block);

  // A pool over a block from `cache` (null: a block of its own).
  static inline Result<std::unique_ptr<ShmBatchPool>> Lend(Cache* cache,
                                                           shm::ChannelProducer* channel,
                                                           uint64_t region_bytes);
  // A publisher's cache, and its going (the cache is deleted once the
  // last block lent from it is let go).
  static Cache* NewCache();
  static void DropCache(Cache* cache);
  inline Region& region() const;

  // Stops further allocations; returns the used extent.
  inline uint64_t Seal();
  // Copies `bytes` into the region after everything allocated so far
  // (64-aligned); returns their offset from the region start.
  Result<uint64_t> AppendTail(std::span<const uint8_t> bytes);
  // Undoes AppendTail's append at `offset` (what it returned), for a
  // publish that failed: the pool can then be published again.
  void DropTail(uint64_t offset);
  // The loan, for BatchPublisher to publish (and keep held by the region).
  inline const shm::ChannelLoan& loan() const;
  inline const std::string& channel_name() const;

  shm::ChannelProducer* channel_;  // identifies the channel; not used after Create
  Block* block_;                   // holds the pool's reference to the region
  uint8_t* region_ = nullptr;
  uint64_t region_size_ = 0;
  bool published_ = false;  // the channel published the loan (kept by the region)
};

}  // namespace alkaid::client
