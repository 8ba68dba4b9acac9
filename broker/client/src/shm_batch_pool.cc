#include "alkaid/client/shm_batch_pool.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace alkaid::client {

namespace {

constexpr uint64_t kAlign = static_cast<uint64_t>(format::kBufferAlignment);

uint64_t Padded(uint64_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

}  // namespace

ShmBatchPool::ShmBatchPool(shm::ChannelProducer* channel, shm::ChannelLoan loan)
    : channel_(channel), channel_name_(channel->name()), loan_(std::move(loan)) {
  region_ = reinterpret_cast<uint8_t*>(loan_.data().data());
  region_size_ = loan_.data().size();
}

// The loan goes with the pool: back to the arena if never published, else
// once every consumer returned the region.
ShmBatchPool::~ShmBatchPool() = default;

Result<std::unique_ptr<ShmBatchPool>> ShmBatchPool::Create(shm::ChannelProducer* channel,
                                                           uint64_t region_bytes) {
  if (channel == nullptr) return Status::Invalid("ShmBatchPool: null channel");
  if (region_bytes == 0) return Status::Invalid("ShmBatchPool: empty region requested");
  ALKAID_ASSIGN_OR_RAISE(shm::ChannelLoan loan, channel->Loan(Padded(region_bytes)));
  return std::unique_ptr<ShmBatchPool>(new ShmBatchPool(channel, std::move(loan)));
}

Result<uint8_t*> ShmBatchPool::Allocate(int64_t size, int64_t alignment) {
  if (size < 0) return Status::Invalid("ShmBatchPool: negative allocation size ", size);
  if (alignment <= 0 || alignment > static_cast<int64_t>(kAlign) ||
      (alignment & (alignment - 1)) != 0) {
    return Status::Invalid("ShmBatchPool: alignment ", alignment,
                           " is not a power of two up to 64");
  }
  std::lock_guard lock(mutex_);
  if (sealed_) {
    return Status::Invalid("ShmBatchPool '", backend_name(),
                           "': the region was published; no more allocations");
  }
  // Zero-size requests still get a distinct address: 64 bytes, like the
  // padding any buffer gets.
  const uint64_t need = Padded(std::max<uint64_t>(static_cast<uint64_t>(size), 1));
  if (need > region_size_ - top_) {
    return Status::OutOfMemory("ShmBatchPool '", backend_name(), "': ", size,
                               " bytes requested, ", region_size_ - top_, " of ", region_size_,
                               " region bytes left");
  }
  last_begin_ = top_;
  has_last_ = true;
  top_ += need;
  allocated_ += size;
  max_allocated_ = std::max(max_allocated_, allocated_);
  return region_ + last_begin_;
}

Result<uint8_t*> ShmBatchPool::Reallocate(uint8_t* ptr, int64_t old_size, int64_t new_size,
                                          int64_t alignment) {
  if (new_size < 0) return Status::Invalid("ShmBatchPool: negative allocation size ", new_size);
  {
    std::lock_guard lock(mutex_);
    if (sealed_) {
      return Status::Invalid("ShmBatchPool '", backend_name(),
                             "': the region was published; no more allocations");
    }
    // The most recent allocation grows or shrinks in place.
    if (has_last_ && ptr == region_ + last_begin_) {
      const uint64_t need = Padded(std::max<uint64_t>(static_cast<uint64_t>(new_size), 1));
      if (need > region_size_ - last_begin_) {
        return Status::OutOfMemory("ShmBatchPool '", backend_name(), "': growing a buffer to ",
                                   new_size, " bytes needs ", need, ", ",
                                   region_size_ - last_begin_, " region bytes left");
      }
      top_ = last_begin_ + need;
      allocated_ += new_size - old_size;
      max_allocated_ = std::max(max_allocated_, allocated_);
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

void ShmBatchPool::Free(uint8_t* ptr, int64_t size, int64_t /*alignment*/) {
  std::lock_guard lock(mutex_);
  allocated_ -= size;
  // Only the most recent allocation of an unpublished region gives its
  // space back; anything else stays until the region is released.
  if (!sealed_ && has_last_ && ptr == region_ + last_begin_) {
    top_ = last_begin_;
    has_last_ = false;
  }
}

int64_t ShmBatchPool::bytes_allocated() const {
  std::lock_guard lock(mutex_);
  return allocated_;
}

int64_t ShmBatchPool::max_memory() const {
  std::lock_guard lock(mutex_);
  return max_allocated_;
}

std::string ShmBatchPool::backend_name() const { return "shm:" + channel_name_; }

uint64_t ShmBatchPool::used_bytes() const {
  std::lock_guard lock(mutex_);
  return top_;
}

bool ShmBatchPool::sealed() const {
  std::lock_guard lock(mutex_);
  return sealed_;
}

bool ShmBatchPool::Contains(const void* p, uint64_t n) const {
  const auto* b = static_cast<const uint8_t*>(p);
  return b >= region_ && static_cast<uint64_t>(b - region_) <= region_size_ &&
         n <= region_size_ - static_cast<uint64_t>(b - region_);
}

uint64_t ShmBatchPool::Seal() {
  std::lock_guard lock(mutex_);
  sealed_ = true;
  return top_;
}

Result<uint64_t> ShmBatchPool::AppendTail(std::span<const uint8_t> bytes) {
  std::lock_guard lock(mutex_);
  const uint64_t need = Padded(bytes.size());
  if (need > region_size_ - top_) {
    return Status::CapacityError("ShmBatchPool '", backend_name(), "': ", bytes.size(),
                                 " bytes of metadata do not fit after the ", top_,
                                 "-byte body in a ", region_size_,
                                 "-byte region (make the region larger)");
  }
  const uint64_t at = top_;
  std::memcpy(region_ + at, bytes.data(), bytes.size());
  top_ += need;
  has_last_ = false;
  return at;
}

}  // namespace alkaid::client
