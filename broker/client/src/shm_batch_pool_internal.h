#pragma once

// ShmBatchPool's region, block and cache (shm_batch_pool.h), for the two
// files that use them: shm_batch_pool.cc, and batch_publisher.cc, whose
// Publish seals a pool and reads its loan inline (Seal, loan). Not
// installed.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>

#include "alkaid/client/shm_batch_pool.h"
#include "alkaid/format/object_memory.h"

namespace alkaid::client {

namespace internal {

inline constexpr uint64_t kAlign = static_cast<uint64_t>(format::kBufferAlignment);

inline uint64_t Padded(uint64_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

// The region's reference count (libstdc++'s _Sp_counted_deleter with our
// deleter and allocator: 32 bytes; checked at compile time).
inline constexpr size_t kCountBytes = 64;

// Guards a region's allocator: held for a few instructions at a time, by
// the builders of one batch (rarely on several threads), so a spin costs
// less than a mutex.
class SpinLock {
 public:
  void lock() {
    // Acquire: partner of the previous holder's release in unlock().
    if (held_.exchange(true, std::memory_order_acquire)) LockHeld();
  }
  // Acquire: as in lock().
  bool try_lock() { return !held_.exchange(true, std::memory_order_acquire); }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  // lock() when another holds it: out of line, so that the frames that
  // take the lock (a region's allocation) make no call when it is free.
  [[gnu::noinline]] void LockHeld() {
    do {
      while (held_.load(std::memory_order_relaxed)) std::this_thread::yield();
      // Acquire: as in lock().
    } while (held_.exchange(true, std::memory_order_acquire));
  }

  std::atomic<bool> held_{false};
};

// ShmBatchPool::Lend's refusals, out of its callers' frames.
[[gnu::noinline, gnu::cold]] inline Status LendRefused(bool no_channel) {
  return no_channel ? Status::Invalid("ShmBatchPool: null channel")
                    : Status::Invalid("ShmBatchPool: empty region requested");
}

}  // namespace internal

// The region: the loan, a bump allocator over its bytes, and the memory of
// the objects made over them (object_pool). Shared by the pool and every
// buffer and object made from it, through one reference count that lives
// in the region's block: when the last of them goes (on any thread) the
// loan goes (back to the arena if never published, else once every
// consumer returned it) and the block is let go (Recycle).
struct ShmBatchPool::Region final : format::MemoryPool {
  Result<uint8_t*> Allocate(int64_t n, int64_t alignment) override;
  Result<uint8_t*> Reallocate(uint8_t* ptr, int64_t old_size, int64_t new_size,
                              int64_t alignment) override;
  void Free(uint8_t* ptr, int64_t n, int64_t alignment) override;
  int64_t bytes_allocated() const override {
    std::lock_guard lock(mutex);
    return allocated;
  }
  int64_t max_memory() const override {
    std::lock_guard lock(mutex);
    return max_allocated;
  }
  std::string backend_name() const override { return "shm:" + loan.channel_name(); }
  // The objects made on the heap for buffers of the region (past the
  // object memory's slots) hold the region through those buffers: they
  // need no hold of their own (MemoryPool::object_pool's default).
  format::ObjectMemory* object_memory() override { return &objects; }
  using format::MemoryPool::Allocate;
  using format::MemoryPool::Free;

  // Allocate's common case: `n` (>= 0: checked first) bytes (64 for none) in an
  // unsealed region with room for them. Null otherwise: Allocate says why.
  uint8_t* TryBump(int64_t n) {
    std::lock_guard lock(mutex);
    return BumpLocked(n);
  }
  // TryBump with the lock held.
  uint8_t* BumpLocked(int64_t n) {
    const uint64_t need = internal::Padded(std::max<uint64_t>(static_cast<uint64_t>(n), 1));
    if (sealed || need > size - top) return nullptr;
    last_begin = top;
    has_last = true;
    top += need;
    allocated += n;
    max_allocated = std::max(max_allocated, allocated);
    return data + last_begin;
  }

  // Back to the state of a block never lent (the reference count is at
  // zero: nothing else touches the region).
  void Clear() {
    loan.Reset();
    data = nullptr;
    size = 0;
    top = 0;
    last_begin = 0;
    has_last = false;
    allocated = 0;
    max_allocated = 0;
    sealed = false;
  }

  shm::ChannelLoan loan;
  uint8_t* data = nullptr;
  uint64_t size = 0;

  mutable internal::SpinLock mutex;
  uint64_t top = 0;         // bump pointer, offset from data
  uint64_t last_begin = 0;  // offset of the most recent live allocation
  bool has_last = false;
  int64_t allocated = 0;
  int64_t max_allocated = 0;
  bool sealed = false;

  // The objects made over the region's buffers (format::ObjectMemory):
  // they share the region's count and are linked once; a batch of the
  // shape of the block's last one finds them linked. Opened when lent,
  // closed when the count's block is freed. What does not fit comes from
  // the heap.
  format::ObjectMemory objects;
};

// What NewPool's recycling keeps: the pool object (first, so that its
// operator delete finds the block), the region's reference count and the
// region. A block is lent (a pool and its objects use it) or idle in its
// cache, or has no cache and is deleted when let go.
struct ShmBatchPool::Block {
  alignas(ShmBatchPool) std::byte pool[sizeof(ShmBatchPool)];
  alignas(std::max_align_t) std::byte count[internal::kCountBytes];
  // The pool object's reference to the region, let go by its operator
  // delete (the pool object's memory is the block's: it must not be reused
  // before the pool object is gone).
  std::shared_ptr<Region> pool_ref;
  Cache* home = nullptr;
  Block* next = nullptr;  // in the cache's lists
  Region region;
};

// A publisher's idle blocks. Blocks let go on any thread are pushed on a
// lock-free stack; the producer thread takes them all at once (one taker:
// no ABA) into its own list. Deleted, with the idle blocks, when the
// publisher and every block lent are gone.
struct ShmBatchPool::Cache {
  // The publisher's, and one per block lent.
  std::atomic<int64_t> refs{1};
  std::atomic<Block*> returned{nullptr};
  Block* idle = nullptr;  // the producer thread's

  void Push(Block* b) {
    Block* h = returned.load(std::memory_order_relaxed);
    do {
      b->next = h;
      // Release: what the last holder did with the block happens before the
      // taker's acquire exchange.
    } while (!returned.compare_exchange_weak(h, b, std::memory_order_release,
                                             std::memory_order_relaxed));
  }
  Block* Take() {
    if (idle == nullptr) idle = returned.exchange(nullptr, std::memory_order_acquire);
    Block* b = idle;
    if (b != nullptr) idle = b->next;
    return b;
  }
  void Unref() {
    // Acq_rel with every other Unref: the last sees every push before it.
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  ~Cache() {
    for (Block* list : {idle, returned.exchange(nullptr, std::memory_order_acquire)}) {
      while (list != nullptr) {
        Block* next = list->next;
        delete list;
        list = next;
      }
    }
  }
};

inline ShmBatchPool::Region& ShmBatchPool::region() const { return block_->region; }

inline const shm::ChannelLoan& ShmBatchPool::loan() const { return region().loan; }

inline const std::string& ShmBatchPool::channel_name() const { return loan().channel_name(); }

inline uint64_t ShmBatchPool::Seal() {
  Region& r = region();
  std::lock_guard lock(r.mutex);
  r.sealed = true;
  return r.top;
}

// The region's reference count, made in its block (no allocation); freeing
// it lets the block go.
template <typename T>
struct ShmBatchPool::CountAllocator {
  using value_type = T;
  Block* block;

  explicit CountAllocator(Block* b) : block(b) {}
  template <typename U>
  explicit CountAllocator(const CountAllocator<U>& o) : block(o.block) {}

  T* allocate(size_t n) {
    static_assert(sizeof(T) <= internal::kCountBytes && alignof(T) <= alignof(std::max_align_t),
                  "the region's reference count must fit its place in the block");
    if (n != 1) throw std::bad_alloc();
    return static_cast<T*>(static_cast<void*>(block->count));
  }
  void deallocate(T* /*p*/, size_t /*n*/) { Released(block); }
  template <typename U>
  bool operator==(const CountAllocator<U>& o) const {
    return block == o.block;
  }
};

// The region's count fell to zero: its last holder let go. What that
// means is done when the count's block is freed (Released): nothing holds
// the region then, weakly or not.
struct ShmBatchPool::Release {
  void operator()(Region* /*r*/) const {}
};

inline void ShmBatchPool::Released(Block* b) {
  // The count's block is free: nothing holds the region, weakly or not, and
  // so nothing made in its object memory either (every pointer to one of
  // those objects, a column copied from a batch included, shares this
  // count; the links between them hold none). The loan goes, and the block
  // with it, here, on the thread that let go last.
  b->region.objects.Close();
  b->region.Clear();
  Recycle(b);
}

inline void ShmBatchPool::Recycle(Block* b) {
  Cache* home = b->home;
  if (home == nullptr) {
    delete b;
    return;
  }
  home->Push(b);
  home->Unref();  // may delete the cache (the publisher is gone), with `b`
}

inline ShmBatchPool::ShmBatchPool(shm::ChannelProducer* channel, Block* block)
    : channel_(channel),
      block_(block),
      region_(block->region.data),
      region_size_(block->region.size) {}

// Always inline: BatchPublisher::NewPool is this call and nothing else.
[[gnu::always_inline]] inline Result<std::unique_ptr<ShmBatchPool>> ShmBatchPool::Lend(
    Cache* cache, shm::ChannelProducer* channel, uint64_t region_bytes) {
  if (channel == nullptr || region_bytes == 0) return internal::LendRefused(channel == nullptr);
  Block* b = cache != nullptr ? cache->Take() : nullptr;
  std::unique_ptr<Block> fresh;
  if (b == nullptr) {
    fresh.reset(new Block);  // not value-initialised: the object memory is not zeroed
    b = fresh.get();
    // The pool object's operator delete relies on this.
    if (static_cast<void*>(b->pool) != static_cast<void*>(b)) {
      return Status::Unknown("ShmBatchPool: the pool object is not first in its block");
    }
  }
  Region& r = b->region;
  Status loaned = channel->LoanInto(internal::Padded(region_bytes), &r.loan);
  if (!loaned.ok()) {
    r.loan.Reset();
    if (fresh == nullptr) cache->Push(b);  // idle again
    return loaned;
  }
  (void)fresh.release();
  b->home = cache;
  if (cache != nullptr) cache->refs.fetch_add(1, std::memory_order_relaxed);  // the block's
  r.data = reinterpret_cast<uint8_t*>(r.loan.data().data());
  r.size = r.loan.data().size();
  b->pool_ref = std::shared_ptr<Region>(&r, Release{}, CountAllocator<Region>(b));
  // The count is made at the same place in the block for every use: the
  // objects' links, which point at it, stay valid.
  r.objects.Open(b->pool_ref);
  return std::unique_ptr<ShmBatchPool>(::new (b->pool) ShmBatchPool(channel, b));
}

}  // namespace alkaid::client
