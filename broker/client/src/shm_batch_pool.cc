#include "alkaid/client/shm_batch_pool.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

namespace alkaid::client {

namespace {

constexpr uint64_t kAlign = static_cast<uint64_t>(format::kBufferAlignment);

uint64_t Padded(uint64_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

}  // namespace

// The region: the loan and a bump allocator over its bytes. Shared by the
// pool and every buffer allocated from it (MemoryPool::shared_owner), so
// the loan goes (back to the arena if never published, else once every
// consumer returned it) when the last of them does.
struct ShmBatchPool::Region final : format::MemoryPool {
  explicit Region(shm::ChannelLoan l)
      : loan(std::move(l)),
        data(reinterpret_cast<uint8_t*>(loan.data().data())),
        size(loan.data().size()) {}

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
  using format::MemoryPool::Allocate;
  using format::MemoryPool::Free;

  const shm::ChannelLoan loan;
  uint8_t* const data;
  const uint64_t size;

  mutable std::mutex mutex;
  uint64_t top = 0;         // bump pointer, offset from data
  uint64_t last_begin = 0;  // offset of the most recent live allocation
  bool has_last = false;
  int64_t allocated = 0;
  int64_t max_allocated = 0;
  bool sealed = false;
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

ShmBatchPool::ShmBatchPool(shm::ChannelProducer* channel, std::shared_ptr<Region> region)
    : channel_(channel),
      shared_(std::move(region)),
      region_(shared_->data),
      region_size_(shared_->size) {}

ShmBatchPool::~ShmBatchPool() = default;

Result<std::unique_ptr<ShmBatchPool>> ShmBatchPool::Create(shm::ChannelProducer* channel,
                                                           uint64_t region_bytes) {
  if (channel == nullptr) return Status::Invalid("ShmBatchPool: null channel");
  if (region_bytes == 0) return Status::Invalid("ShmBatchPool: empty region requested");
  ALKAID_ASSIGN_OR_RAISE(shm::ChannelLoan loan, channel->Loan(Padded(region_bytes)));
  auto region = std::make_shared<Region>(std::move(loan));
  return std::unique_ptr<ShmBatchPool>(new ShmBatchPool(channel, std::move(region)));
}

Result<uint8_t*> ShmBatchPool::Allocate(int64_t size, int64_t alignment) {
  return shared_->Allocate(size, alignment);
}

Result<uint8_t*> ShmBatchPool::Reallocate(uint8_t* ptr, int64_t old_size, int64_t new_size,
                                          int64_t alignment) {
  return shared_->Reallocate(ptr, old_size, new_size, alignment);
}

void ShmBatchPool::Free(uint8_t* ptr, int64_t size, int64_t alignment) {
  shared_->Free(ptr, size, alignment);
}

int64_t ShmBatchPool::bytes_allocated() const { return shared_->bytes_allocated(); }
int64_t ShmBatchPool::max_memory() const { return shared_->max_memory(); }
std::string ShmBatchPool::backend_name() const { return shared_->backend_name(); }
std::shared_ptr<format::MemoryPool> ShmBatchPool::shared_owner() { return shared_; }
uint64_t ShmBatchPool::region_offset() const { return shared_->loan.offset(); }
const shm::ChannelLoan& ShmBatchPool::loan() const { return shared_->loan; }

uint64_t ShmBatchPool::used_bytes() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->top;
}

bool ShmBatchPool::sealed() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->sealed;
}

bool ShmBatchPool::Contains(const void* p, uint64_t n) const {
  const auto* b = static_cast<const uint8_t*>(p);
  return b >= region_ && static_cast<uint64_t>(b - region_) <= region_size_ &&
         n <= region_size_ - static_cast<uint64_t>(b - region_);
}

uint64_t ShmBatchPool::Seal() {
  std::lock_guard lock(shared_->mutex);
  shared_->sealed = true;
  return shared_->top;
}

Result<uint64_t> ShmBatchPool::AppendTail(std::span<const uint8_t> bytes) {
  Region& r = *shared_;
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
  std::lock_guard lock(shared_->mutex);
  shared_->top = offset;
}

}  // namespace alkaid::client
