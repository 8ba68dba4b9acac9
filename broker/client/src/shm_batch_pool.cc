#include "alkaid/client/shm_batch_pool.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include "alkaid/format/object_memory.h"
#include "shm_batch_pool_internal.h"

namespace alkaid::client {

using internal::kAlign;
using internal::kCountBytes;
using internal::Padded;

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
    static_assert(sizeof(T) <= kCountBytes && alignof(T) <= alignof(std::max_align_t),
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

Result<uint8_t*> ShmBatchPool::Region::Allocate(int64_t n, int64_t alignment) {
  if (n < 0) return Status::Invalid("ShmBatchPool: negative allocation size ", n);
  if (alignment <= 0 || alignment > static_cast<int64_t>(kAlign) ||
      (alignment & (alignment - 1)) != 0) {
    return Status::Invalid("ShmBatchPool: alignment ", alignment,
                           " is not a power of two up to 64");
  }
  std::lock_guard lock(mutex);
  if (sealed) {
    return Status::Invalid("ShmBatchPool '", backend_name(),
                           "': the region was published; no more allocations");
  }
  // Zero-size requests still get a distinct address: 64 bytes, like the
  // padding any buffer gets.
  const uint64_t need = Padded(std::max<uint64_t>(static_cast<uint64_t>(n), 1));
  if (need > size - top) {
    return Status::OutOfMemory("ShmBatchPool '", backend_name(), "': ", n, " bytes requested, ",
                               size - top, " of ", size, " region bytes left");
  }
  last_begin = top;
  has_last = true;
  top += need;
  allocated += n;
  max_allocated = std::max(max_allocated, allocated);
  return data + last_begin;
}

Result<uint8_t*> ShmBatchPool::Region::Reallocate(uint8_t* ptr, int64_t old_size, int64_t new_size,
                                                  int64_t alignment) {
  if (new_size < 0) return Status::Invalid("ShmBatchPool: negative allocation size ", new_size);
  {
    std::lock_guard lock(mutex);
    if (sealed) {
      return Status::Invalid("ShmBatchPool '", backend_name(),
                             "': the region was published; no more allocations");
    }
    // The most recent allocation grows or shrinks in place.
    if (has_last && ptr == data + last_begin) {
      const uint64_t need = Padded(std::max<uint64_t>(static_cast<uint64_t>(new_size), 1));
      if (need > size - last_begin) {
        return Status::OutOfMemory("ShmBatchPool '", backend_name(), "': growing a buffer to ",
                                   new_size, " bytes needs ", need, ", ", size - last_begin,
                                   " region bytes left");
      }
      top = last_begin + need;
      allocated += new_size - old_size;
      max_allocated = std::max(max_allocated, allocated);
      return ptr;
    }
  }
  ALKAID_ASSIGN_OR_RAISE(uint8_t * fresh, Allocate(new_size, alignment));
  if (ptr != nullptr && old_size > 0) {
    std::memcpy(fresh, ptr, static_cast<size_t>(std::min(old_size, new_size)));
  }
  Free(ptr, old_size, alignment);
  return fresh;
}

void ShmBatchPool::Region::Free(uint8_t* ptr, int64_t n, int64_t /*alignment*/) {
  std::lock_guard lock(mutex);
  allocated -= n;
  // Only the most recent allocation of an unpublished region gives its
  // space back; anything else stays until the region is released.
  if (!sealed && has_last && ptr == data + last_begin) {
    top = last_begin;
    has_last = false;
  }
}

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

ShmBatchPool::~ShmBatchPool() = default;

void ShmBatchPool::operator delete(void* p) noexcept {  // NOLINT(cert-dcl54-cpp): see the header
  // The pool object is the block's first member.
  auto* b = static_cast<Block*>(p);
  // Moved out first: once the count falls, the block may be taken again.
  std::shared_ptr<Region> last = std::move(b->pool_ref);
}

ShmBatchPool::Cache* ShmBatchPool::NewCache() { return new Cache; }

void ShmBatchPool::DropCache(Cache* cache) {
  if (cache != nullptr) cache->Unref();
}

Result<std::unique_ptr<ShmBatchPool>> ShmBatchPool::Create(shm::ChannelProducer* channel,
                                                           uint64_t region_bytes) {
  return Lend(nullptr, channel, region_bytes);
}

Result<std::unique_ptr<ShmBatchPool>> ShmBatchPool::Lend(Cache* cache,
                                                         shm::ChannelProducer* channel,
                                                         uint64_t region_bytes) {
  if (channel == nullptr) return Status::Invalid("ShmBatchPool: null channel");
  if (region_bytes == 0) return Status::Invalid("ShmBatchPool: empty region requested");
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
  Status loaned = channel->LoanInto(Padded(region_bytes), &r.loan);
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

Result<uint8_t*> ShmBatchPool::Allocate(int64_t size, int64_t alignment) {
  return region().Allocate(size, alignment);
}

Result<uint8_t*> ShmBatchPool::Reallocate(uint8_t* ptr, int64_t old_size, int64_t new_size,
                                          int64_t alignment) {
  return region().Reallocate(ptr, old_size, new_size, alignment);
}

void ShmBatchPool::Free(uint8_t* ptr, int64_t size, int64_t alignment) {
  region().Free(ptr, size, alignment);
}

int64_t ShmBatchPool::bytes_allocated() const { return region().bytes_allocated(); }
int64_t ShmBatchPool::max_memory() const { return region().max_memory(); }
std::string ShmBatchPool::backend_name() const { return region().backend_name(); }
std::shared_ptr<format::MemoryPool> ShmBatchPool::shared_owner() { return block_->pool_ref; }
std::shared_ptr<format::MemoryPool> ShmBatchPool::object_pool() { return block_->pool_ref; }
format::ObjectMemory* ShmBatchPool::object_memory() { return &block_->region.objects; }
uint64_t ShmBatchPool::region_offset() const { return region().loan.offset(); }

uint64_t ShmBatchPool::used_bytes() const {
  std::lock_guard lock(region().mutex);
  return region().top;
}

bool ShmBatchPool::sealed() const {
  std::lock_guard lock(region().mutex);
  return region().sealed;
}

bool ShmBatchPool::Contains(const void* p, uint64_t n) const {
  const auto* b = static_cast<const uint8_t*>(p);
  return b >= region_ && static_cast<uint64_t>(b - region_) <= region_size_ &&
         n <= region_size_ - static_cast<uint64_t>(b - region_);
}

Result<uint64_t> ShmBatchPool::AppendTail(std::span<const uint8_t> bytes) {
  Region& r = region();
  std::lock_guard lock(r.mutex);
  const uint64_t need = Padded(bytes.size());
  if (need > r.size - r.top) {
    return Status::CapacityError("ShmBatchPool '", r.backend_name(), "': ", bytes.size(),
                                 " bytes of metadata do not fit after the ", r.top,
                                 "-byte body in a ", r.size,
                                 "-byte region (make the region larger)");
  }
  const uint64_t at = r.top;
  std::memcpy(r.data + at, bytes.data(), bytes.size());
  r.top += need;
  r.has_last = false;
  return at;
}

void ShmBatchPool::DropTail(uint64_t offset) {
  std::lock_guard lock(region().mutex);
  region().top = offset;
}

}  // namespace alkaid::client
