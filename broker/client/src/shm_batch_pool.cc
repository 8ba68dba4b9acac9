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
using internal::Padded;

Result<uint8_t*> ShmBatchPool::Region::Allocate(int64_t n, int64_t alignment) {
  if (n < 0) return Status::Invalid("ShmBatchPool: negative allocation size ", n);
  if (alignment <= 0 || alignment > static_cast<int64_t>(kAlign) ||
      (alignment & (alignment - 1)) != 0) {
    return Status::Invalid("ShmBatchPool: alignment ", alignment,
                           " is not a power of two up to 64");
  }
  // Zero-size requests still get a distinct address: 64 bytes, like the
  // padding any buffer gets.
  if (uint8_t* p = TryBump(n)) return p;
  std::lock_guard lock(mutex);
  if (sealed) {
    return Status::Invalid("ShmBatchPool '", backend_name(),
                           "': the region was published; no more allocations");
  }
  return Status::OutOfMemory("ShmBatchPool '", backend_name(), "': ", n, " bytes requested, ",
                             size - top, " of ", size, " region bytes left");
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

Result<uint8_t*> ShmBatchPool::Allocate(int64_t size, int64_t alignment) {
  return region().Allocate(size, alignment);
}

namespace {

// AllocateWithOwner's way when its common case does not serve (another
// alignment, a lock held by another thread, an owner not empty, or an
// error to say): the region's Allocate, out of the common case's frame. (A
// template: the block's type is the pool's private business.)
template <typename Block>
[[gnu::noinline]] Status AllocateFromRegion(Block* block, int64_t size, int64_t alignment,
                                            uint8_t** out,
                                            std::shared_ptr<format::MemoryPool>* owner) {
  ALKAID_ASSIGN_OR_RAISE(*out, block->region.Allocate(size, alignment));
  *owner = block->pool_ref;
  return Status::OK();
}

}  // namespace

Status ShmBatchPool::AllocateWithOwner(int64_t size, int64_t alignment, uint8_t** out,
                                       std::shared_ptr<format::MemoryPool>* owner) {
  // A builder's first bytes of a buffer: bumped in place, and the region
  // handed out as their owner, without a Result, a second call or any call
  // at all (the lock taken only if free; else the general way waits).
  Region& r = region();
  if (size >= 0 && alignment == format::kBufferAlignment && *owner == nullptr &&
      r.mutex.try_lock()) {
    uint8_t* got = r.BumpLocked(size);
    r.mutex.unlock();
    if (got != nullptr) {
      *out = got;
      // `*owner` is empty (tested above): the region's count is copied into
      // its place, with no old value to let go.
      ::new (static_cast<void*>(owner)) std::shared_ptr<format::MemoryPool>(block_->pool_ref);
      return Status::OK();
    }
  }
  return AllocateFromRegion(block_, size, alignment, out, owner);
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
