#include "alkaid/shm/body_allocator.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <new>
#include <set>
#include <unordered_map>
#include <utility>

#include "body_layout_internal.h"
#include "futex_internal.h"
#include "wait_internal.h"

namespace alkaid::shm {

using internal::BlockCount;
using internal::BlockGeneration;
using internal::BlockHeaderData;
using internal::BodyArenaHeaderData;
using internal::kBlockHeaderSize;
using internal::kBlockTag;
using internal::kBodyArenaHeaderSize;
using internal::kBodyArenaLayoutVersion;
using internal::kBodyArenaMagic;
using internal::kMaxBlockRefs;
using internal::PackBlockState;
using internal::RoundUp;

static_assert(kBlockAlignment == internal::kCacheLineSize);
static_assert(kBlockHeaderSize == kBlockAlignment);

namespace {

// Checks that `handle` names a plausible block of an arena of `arena_size`
// bytes starting at payload offset kBodyArenaHeaderSize, without touching
// shared memory. Returns the header's offset from the payload start.
Result<uint64_t> CheckHandleBounds(const BlockHandle& handle, uint64_t arena_size,
                                   const std::string& name) {
  const uint64_t arena_begin = kBodyArenaHeaderSize;
  const uint64_t arena_end = arena_begin + arena_size;
  if (handle.generation == 0) {
    return Status::Invalid("body segment '", name, "': block handle at offset ", handle.offset,
                           " has generation 0 (not a block)");
  }
  if (handle.offset < arena_begin + kBlockHeaderSize || handle.offset > arena_end ||
      (handle.offset - arena_begin) % kBlockAlignment != 0) {
    return Status::Invalid("body segment '", name, "': block offset ", handle.offset,
                           " is not a 64-byte-aligned data offset inside the arena [",
                           arena_begin + kBlockHeaderSize, ", ", arena_end, "]");
  }
  if (handle.length > arena_end - handle.offset) {
    return Status::Invalid("body segment '", name, "': block at offset ", handle.offset,
                           " with length ", handle.length, " ends at ",
                           handle.offset + handle.length, ", past the arena end ", arena_end);
  }
  return handle.offset - kBlockHeaderSize;
}

}  // namespace

// ---------------------------------------------------------------------------
// WritableBlock

WritableBlock::WritableBlock(WritableBlock&& other) noexcept
    : allocator_(std::exchange(other.allocator_, nullptr)),
      handle_(std::exchange(other.handle_, {})),
      data_(std::exchange(other.data_, {})) {}

WritableBlock& WritableBlock::operator=(WritableBlock&& other) noexcept {
  if (this != &other) {
    Release();
    allocator_ = std::exchange(other.allocator_, nullptr);
    handle_ = std::exchange(other.handle_, {});
    data_ = std::exchange(other.data_, {});
  }
  return *this;
}

WritableBlock::~WritableBlock() { Release(); }

void WritableBlock::Release() {
  if (allocator_ == nullptr) return;
  // Can only fail if shared memory was corrupted; the allocator then
  // quarantines the block, and there is nothing more a destructor can do.
  (void)allocator_->Release(handle_);
  allocator_ = nullptr;
  handle_ = {};
  data_ = {};
}

BlockHandle WritableBlock::Detach() {
  BlockHandle h = handle_;
  allocator_ = nullptr;
  handle_ = {};
  data_ = {};
  return h;
}

// ---------------------------------------------------------------------------
// BodyAllocator

struct BodyAllocator::Impl {
  struct Live {
    uint64_t size;        // header + capacity
    uint32_t generation;  // what the producer wrote into the header
  };

  std::shared_ptr<Segment> segment;
  BodyAllocatorOptions options;
  BodyArenaHeaderData* header = nullptr;
  std::byte* payload = nullptr;  // segment payload start; offsets count from here
  uint64_t arena_size = 0;

  // Producer-private bookkeeping: consumers cannot reach it. Offsets are
  // header offsets from the payload start.
  std::map<uint64_t, uint64_t> free_by_offset;            // offset -> size
  std::set<std::pair<uint64_t, uint64_t>> free_by_size;  // (size, offset)
  std::unordered_map<uint64_t, Live> live;                // header offset -> block
  uint64_t in_use_bytes = 0;
  uint32_t next_generation = 1;
  uint64_t allocations = 0;
  uint64_t reclaimed = 0;
  uint64_t quarantined = 0;
  std::function<void()> reclaim_callback;

  BlockHeaderData* HeaderAt(uint64_t header_offset) const {
    return reinterpret_cast<BlockHeaderData*>(payload + header_offset);
  }

  void AddFree(uint64_t offset, uint64_t size) {
    // Coalesce with the neighbours so that freed space is reusable for
    // blocks larger than any single freed one.
    auto next = free_by_offset.lower_bound(offset);
    if (next != free_by_offset.end() && offset + size == next->first) {
      size += next->second;
      free_by_size.erase({next->second, next->first});
      next = free_by_offset.erase(next);
    }
    if (next != free_by_offset.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        free_by_size.erase({prev->second, prev->first});
        free_by_offset.erase(prev);
      }
    }
    free_by_offset.emplace(offset, size);
    free_by_size.emplace(size, offset);
  }

  void FreeBlock(uint64_t header_offset) {
    auto it = live.find(header_offset);
    const uint64_t size = it->second.size;
    live.erase(it);
    in_use_bytes -= size;
    ++reclaimed;
    AddFree(header_offset, size);
  }

  uint64_t LargestFree() const {
    return free_by_size.empty() ? 0 : free_by_size.rbegin()->first;
  }

  // One attempt, no reclaim, no waiting.
  Result<WritableBlock> AllocateOnce(BodyAllocator* self, uint64_t length, uint64_t need) {
    auto it = free_by_size.lower_bound({need, 0});
    if (it == free_by_size.end()) {
      return Status::OutOfMemory("body segment '", segment->name(), "' is full: a ", length,
                                 "-byte block needs ", need, " bytes, the largest free range is ",
                                 LargestFree(), " of ", arena_size, " (", live.size(),
                                 " blocks, ", in_use_bytes, " bytes still referenced)");
    }
    const uint64_t range_size = it->first;
    const uint64_t offset = it->second;
    free_by_size.erase(it);
    free_by_offset.erase(offset);
    if (range_size > need) {
      free_by_offset.emplace(offset + need, range_size - need);
      free_by_size.emplace(range_size - need, offset + need);
    }
    const uint32_t generation = next_generation;
    next_generation = next_generation == UINT32_MAX ? 1 : next_generation + 1;
    live.emplace(offset, Live{need, generation});
    in_use_bytes += need;
    ++allocations;

    // The header may lie over the data of an earlier block. It is written
    // only through atomic stores (no placement-new, which would be a plain
    // write racing with a stale consumer's atomic load of the old header).
    BlockHeaderData* h = HeaderAt(offset);
    h->capacity.store(need - kBlockHeaderSize, std::memory_order_relaxed);
    h->length.store(length, std::memory_order_relaxed);
    h->tag.store(kBlockTag, std::memory_order_relaxed);
    // Release: publishes the fields above together with the new generation;
    // partner of the acquire CAS in BodyReader::Acquire.
    h->state.store(PackBlockState(generation, 1), std::memory_order_release);

    BlockHandle handle{offset + kBlockHeaderSize, length, generation};
    std::span<std::byte> data(payload + handle.offset, length);
    return WritableBlock(self, handle, data);
  }
};

BodyAllocator::BodyAllocator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BodyAllocator::~BodyAllocator() = default;

Result<std::unique_ptr<BodyAllocator>> BodyAllocator::Create(std::string_view name,
                                                             uint64_t arena_bytes,
                                                             const BodyAllocatorOptions& options) {
  if (arena_bytes == 0 || arena_bytes > kMaxSegmentSize) {
    return Status::Invalid("body segment '", name, "': arena size ", arena_bytes,
                           " must be between 1 and ", kMaxSegmentSize, " bytes");
  }
  if (options.wait_timeout.count() < 0) {
    return Status::Invalid("body segment '", name, "': negative wait_timeout");
  }
  const uint64_t arena = RoundUp(arena_bytes, kBlockAlignment);
  ALKAID_ASSIGN_OR_RAISE(auto segment, Segment::Create(name, kBodyArenaHeaderSize + arena,
                                                       SegmentKind::kBodies, options.segment));
  auto impl = std::make_unique<Impl>();
  impl->segment = segment;
  impl->options = options;
  impl->payload = segment->payload();
  impl->arena_size = arena;
  auto* header = new (segment->payload()) BodyArenaHeaderData();
  header->layout_version = kBodyArenaLayoutVersion;
  header->block_alignment = static_cast<uint32_t>(kBlockAlignment);
  header->arena_offset = kBodyArenaHeaderSize;
  header->arena_size = arena;
  header->producer_pid = static_cast<uint32_t>(::getpid());
  // Release: publishes the header; partner of the acquire load in
  // BodyReader::Open.
  header->magic.store(kBodyArenaMagic, std::memory_order_release);
  impl->header = header;
  impl->AddFree(kBodyArenaHeaderSize, arena);
  return std::unique_ptr<BodyAllocator>(new BodyAllocator(std::move(impl)));
}

Result<WritableBlock> BodyAllocator::TryAllocate(uint64_t length) {
  Impl& d = *impl_;
  if (length > d.arena_size - kBlockHeaderSize) {
    return Status::CapacityError("body segment '", d.segment->name(), "': a block of ", length,
                                 " bytes cannot fit in a ", d.arena_size, "-byte arena");
  }
  const uint64_t need = kBlockHeaderSize + RoundUp(length, kBlockAlignment);
  auto first = d.AllocateOnce(this, length, need);
  if (first.ok() || !first.status().IsOutOfMemory()) return first;
  if (Reclaim() > 0) {
    auto second = d.AllocateOnce(this, length, need);
    if (second.ok()) return second;
  }
  if (d.reclaim_callback) {
    d.reclaim_callback();
    Reclaim();
  }
  return d.AllocateOnce(this, length, need);
}

Result<WritableBlock> BodyAllocator::Allocate(uint64_t length) {
  auto result = TryAllocate(length);
  if (result.ok() || !result.status().IsOutOfMemory() ||
      impl_->options.full_policy == FullPolicy::kError) {
    return result;
  }
  // Backpressure: the producer waits for consumers to release blocks. It
  // spins briefly (space often comes back within microseconds), then sleeps
  // on the arena's futex. Consumers wake it when they drop a block to one
  // reference or none and see the announcement; their releases make no
  // system call otherwise. The sleep is cut into slices of at most
  // kReclaimSlice so that references only the ring holds (dropped by the
  // reclaim callback once consumers that hold no BlockRef have moved on,
  // which no shared release signals) are retried too.
  constexpr auto kSpin = std::chrono::microseconds(50);
  constexpr auto kReclaimSlice = std::chrono::milliseconds(1);
  Impl& d = *impl_;
  const auto start = internal::SteadyClock::now();
  const auto deadline = internal::DeadlineAfter(d.options.wait_timeout);
  const auto spin_until = std::min(deadline, start + kSpin);
  for (uint32_t round = 1;; ++round) {
    internal::CpuRelax();
    if ((round & 63) != 0) continue;
    result = TryAllocate(length);
    if (result.ok() || !result.status().IsOutOfMemory()) return result;
    if (internal::SteadyClock::now() >= spin_until) break;
  }
  BodyArenaHeaderData* h = d.header;
  while (true) {
    const auto now = internal::SteadyClock::now();
    if (now >= deadline) break;
    // Read the futex word before announcing: a wake after this load
    // changes it, so FUTEX_WAIT returns at once instead of missing it.
    const uint32_t word = h->space_futex.load(std::memory_order_seq_cst);
    // seq_cst increment and fence, then the acquire loads of Reclaim: Dekker
    // pair with the consumer's seq_cst decrement followed by its seq_cst
    // load of space_waiters (BodyReader::Release).
    h->space_waiters.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    result = TryAllocate(length);
    if (result.ok() || !result.status().IsOutOfMemory()) {
      h->space_waiters.fetch_sub(1, std::memory_order_relaxed);
      return result;
    }
    internal::FutexWait(&h->space_futex, word,
                        std::min<std::chrono::nanoseconds>(deadline - now, kReclaimSlice));
    // Relaxed: only a hint for the consumers; no data is published by it.
    h->space_waiters.fetch_sub(1, std::memory_order_relaxed);
    result = TryAllocate(length);
    if (result.ok() || !result.status().IsOutOfMemory()) return result;
  }
  return Status::TimedOut("body segment '", impl_->segment->name(), "': no room for a ", length,
                          "-byte block after waiting ",
                          std::chrono::duration_cast<std::chrono::milliseconds>(
                              impl_->options.wait_timeout)
                              .count(),
                          " ms (", impl_->live.size(), " blocks still referenced)");
}

Status BodyAllocator::AddRef(const BlockHandle& handle, uint32_t count) {
  Impl& d = *impl_;
  ALKAID_ASSIGN_OR_RAISE(uint64_t header_offset,
                         CheckHandleBounds(handle, d.arena_size, d.segment->name()));
  auto it = d.live.find(header_offset);
  if (it == d.live.end() || it->second.generation != handle.generation) {
    return Status::KeyError("body segment '", d.segment->name(), "': no live block at offset ",
                            handle.offset, " with generation ", handle.generation);
  }
  BlockHeaderData* h = d.HeaderAt(header_offset);
  uint64_t cur = h->state.load(std::memory_order_relaxed);
  do {
    if (BlockGeneration(cur) != handle.generation || BlockCount(cur) == 0 ||
        BlockCount(cur) > kMaxBlockRefs - count) {
      return Status::Invalid("body segment '", d.segment->name(), "': block at offset ",
                             handle.offset, " has state (generation ", BlockGeneration(cur),
                             ", count ", BlockCount(cur), "); cannot add ", count,
                             " references");
    }
    // Relaxed: the producer already holds a reference, so the block cannot
    // be reclaimed concurrently; no data is published by this increment.
  } while (!h->state.compare_exchange_weak(cur, cur + count, std::memory_order_relaxed,
                                           std::memory_order_relaxed));
  return Status::OK();
}

Status BodyAllocator::Release(const BlockHandle& handle) {
  Impl& d = *impl_;
  ALKAID_ASSIGN_OR_RAISE(uint64_t header_offset,
                         CheckHandleBounds(handle, d.arena_size, d.segment->name()));
  auto it = d.live.find(header_offset);
  if (it == d.live.end() || it->second.generation != handle.generation) {
    return Status::KeyError("body segment '", d.segment->name(), "': no live block at offset ",
                            handle.offset, " with generation ", handle.generation);
  }
  BlockHeaderData* h = d.HeaderAt(header_offset);
  uint64_t cur = h->state.load(std::memory_order_relaxed);
  do {
    if (BlockGeneration(cur) != handle.generation || BlockCount(cur) == 0 ||
        BlockCount(cur) > kMaxBlockRefs) {
      // Someone wrote garbage into the shared count: never reuse this space,
      // a consumer may still be reading it.
      d.live.erase(it);
      ++d.quarantined;
      return Status::Invalid("body segment '", d.segment->name(), "': block at offset ",
                             handle.offset, " has a corrupt shared state (generation ",
                             BlockGeneration(cur), ", count ", BlockCount(cur),
                             "); block quarantined");
    }
    // acq_rel: release pairs with the acquire load in Reclaim (producer
    // writes to the data happen before reuse, trivially here); acquire pairs
    // with the consumers' release decrements so that if this was the last
    // reference, their reads happen before we reuse the space below.
  } while (!h->state.compare_exchange_weak(cur, cur - 1, std::memory_order_acq_rel,
                                           std::memory_order_relaxed));
  if (BlockCount(cur) == 1) d.FreeBlock(header_offset);
  return Status::OK();
}

uint64_t BodyAllocator::Reclaim() {
  Impl& d = *impl_;
  uint64_t count = 0;
  for (auto it = d.live.begin(); it != d.live.end();) {
    const uint64_t header_offset = it->first;
    const Impl::Live live = it->second;
    ++it;  // FreeBlock erases the current entry
    // Acquire: partner of the release decrement in BodyReader::Release;
    // consumers' reads of the data happen before the space is reused.
    const uint64_t state = d.HeaderAt(header_offset)->state.load(std::memory_order_acquire);
    if (BlockGeneration(state) != live.generation || BlockCount(state) > kMaxBlockRefs) {
      d.live.erase(header_offset);
      ++d.quarantined;
      continue;
    }
    if (BlockCount(state) == 0) {
      // A count of zero is final: Acquire refuses to raise it.
      d.FreeBlock(header_offset);
      ++count;
    }
  }
  return count;
}

void BodyAllocator::SetReclaimCallback(std::function<void()> callback) {
  impl_->reclaim_callback = std::move(callback);
}

BodyAllocatorStats BodyAllocator::stats() const {
  const Impl& d = *impl_;
  BodyAllocatorStats s;
  s.capacity_bytes = d.arena_size;
  s.in_use_bytes = d.in_use_bytes;
  s.in_use_blocks = d.live.size();
  s.largest_free_bytes = d.LargestFree();
  s.allocations = d.allocations;
  s.reclaimed_blocks = d.reclaimed;
  s.quarantined_blocks = d.quarantined;
  return s;
}

const std::string& BodyAllocator::name() const { return impl_->segment->name(); }
const std::shared_ptr<Segment>& BodyAllocator::segment() const { return impl_->segment; }

// ---------------------------------------------------------------------------
// BlockRef

BlockRef::BlockRef(BlockRef&& other) noexcept
    : reader_(std::exchange(other.reader_, nullptr)),
      handle_(std::exchange(other.handle_, {})),
      data_(std::exchange(other.data_, {})) {}

BlockRef& BlockRef::operator=(BlockRef&& other) noexcept {
  if (this != &other) {
    Release();
    reader_ = std::exchange(other.reader_, nullptr);
    handle_ = std::exchange(other.handle_, {});
    data_ = std::exchange(other.data_, {});
  }
  return *this;
}

BlockRef::~BlockRef() { Release(); }

void BlockRef::Release() {
  if (reader_ == nullptr) return;
  // Only fails if another party corrupted the shared count; nothing more a
  // destructor can do about it.
  (void)reader_->Release(handle_);
  reader_ = nullptr;
  handle_ = {};
  data_ = {};
}

// ---------------------------------------------------------------------------
// BodyReader

struct BodyReader::Impl {
  std::shared_ptr<Segment> segment;
  BodyArenaHeaderData* header = nullptr;
  std::byte* payload = nullptr;
  uint64_t arena_size = 0;

  BlockHeaderData* HeaderAt(uint64_t header_offset) const {
    return reinterpret_cast<BlockHeaderData*>(payload + header_offset);
  }
};

BodyReader::BodyReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BodyReader::~BodyReader() = default;

Result<std::unique_ptr<BodyReader>> BodyReader::Open(std::string_view name) {
  ALKAID_ASSIGN_OR_RAISE(auto segment, Segment::Open(name, SegmentKind::kBodies));
  return Open(std::move(segment));
}

Result<std::unique_ptr<BodyReader>> BodyReader::Open(std::shared_ptr<Segment> segment) {
  if (segment == nullptr) return Status::Invalid("BodyReader::Open: null segment");
  const std::string& name = segment->name();
  if (segment->kind() != SegmentKind::kBodies) {
    return Status::Invalid("segment '", name, "' is a ", SegmentKindName(segment->kind()),
                           " segment, not a body segment");
  }
  if (segment->payload_size() < kBodyArenaHeaderSize) {
    return Status::Invalid("body segment '", name, "': payload of ", segment->payload_size(),
                           " bytes cannot hold the ", kBodyArenaHeaderSize,
                           "-byte arena header");
  }
  const auto* header = reinterpret_cast<const BodyArenaHeaderData*>(segment->payload());
  // Acquire: partner of the release store of `magic` in BodyAllocator::Create.
  const uint64_t magic = header->magic.load(std::memory_order_acquire);
  if (magic != kBodyArenaMagic) {
    return Status::Invalid("body segment '", name, "': arena magic 0x", std::hex, magic,
                           " at payload offset 0, expected 0x", kBodyArenaMagic,
                           " (not initialised, or not a body segment)");
  }
  if (header->layout_version != kBodyArenaLayoutVersion) {
    return Status::Invalid("body segment '", name, "': arena layout version ",
                           header->layout_version, ", this build reads ",
                           kBodyArenaLayoutVersion);
  }
  const uint64_t arena_size = header->arena_size;
  if (header->block_alignment != kBlockAlignment ||
      header->arena_offset != kBodyArenaHeaderSize ||
      arena_size > segment->payload_size() - kBodyArenaHeaderSize ||
      arena_size % kBlockAlignment != 0) {
    return Status::Invalid("body segment '", name, "': arena header (offset ",
                           header->arena_offset, ", size ", arena_size, ", alignment ",
                           header->block_alignment, ") does not fit the ",
                           segment->payload_size(), "-byte payload");
  }
  auto impl = std::make_unique<Impl>();
  impl->segment = std::move(segment);
  impl->payload = impl->segment->payload();
  impl->header = reinterpret_cast<BodyArenaHeaderData*>(impl->payload);
  impl->arena_size = arena_size;
  return std::unique_ptr<BodyReader>(new BodyReader(std::move(impl)));
}

Result<BlockRef> BodyReader::Acquire(const BlockHandle& handle) const {
  const Impl& d = *impl_;
  const std::string& name = d.segment->name();
  ALKAID_ASSIGN_OR_RAISE(uint64_t header_offset, CheckHandleBounds(handle, d.arena_size, name));
  BlockHeaderData* h = d.HeaderAt(header_offset);
  uint64_t cur = h->state.load(std::memory_order_relaxed);
  do {
    if (BlockGeneration(cur) != handle.generation) {
      return Status::KeyError("body segment '", name, "': block at offset ", handle.offset,
                              " is stale: generation ", BlockGeneration(cur), ", handle has ",
                              handle.generation);
    }
    if (BlockCount(cur) == 0) {
      return Status::KeyError("body segment '", name, "': block at offset ", handle.offset,
                              " (generation ", handle.generation, ") was already released");
    }
    if (BlockCount(cur) >= kMaxBlockRefs) {
      return Status::Invalid("body segment '", name, "': block at offset ", handle.offset,
                             " has an implausible reference count ", BlockCount(cur));
    }
    // Acquire on success: partner of the release store of `state` in
    // BodyAllocator allocation, so capacity/length/data are visible.
  } while (!h->state.compare_exchange_weak(cur, cur + 1, std::memory_order_acquire,
                                           std::memory_order_relaxed));
  // We hold a reference: the header cannot change under us now. Check it
  // against the arena before handing out the data.
  const uint64_t capacity = h->capacity.load(std::memory_order_relaxed);
  const uint64_t arena_end = kBodyArenaHeaderSize + d.arena_size;
  const bool ok = h->tag.load(std::memory_order_relaxed) == kBlockTag &&
                  capacity <= arena_end - handle.offset && handle.length <= capacity &&
                  h->length.load(std::memory_order_relaxed) == handle.length;
  if (!ok) {
    (void)Release(handle);
    return Status::Invalid("body segment '", name, "': block at offset ", handle.offset,
                           " has a header (capacity ", capacity, ") inconsistent with handle length ",
                           handle.length);
  }
  return BlockRef(this, handle,
                  std::span<const std::byte>(d.payload + handle.offset, handle.length));
}

Status BodyReader::Release(const BlockHandle& handle) const {
  const Impl& d = *impl_;
  const std::string& name = d.segment->name();
  ALKAID_ASSIGN_OR_RAISE(uint64_t header_offset, CheckHandleBounds(handle, d.arena_size, name));
  BlockHeaderData* h = d.HeaderAt(header_offset);
  uint64_t cur = h->state.load(std::memory_order_relaxed);
  do {
    if (BlockGeneration(cur) != handle.generation || BlockCount(cur) == 0) {
      return Status::Invalid("body segment '", name, "': release of block at offset ",
                             handle.offset, " (generation ", handle.generation,
                             ") that holds no reference (shared state: generation ",
                             BlockGeneration(cur), ", count ", BlockCount(cur), ")");
    }
    // seq_cst (release semantics): partner of the acquire load in
    // BodyAllocator::Reclaim (and of the acq_rel decrement in
    // BodyAllocator::Release): our reads of the data happen before the
    // producer reuses the space. seq_cst because it is also the first half
    // of the Dekker pair with a waiting producer (see Allocate).
  } while (!h->state.compare_exchange_weak(cur, cur - 1, std::memory_order_seq_cst,
                                           std::memory_order_relaxed));
  // A producer waiting for space can use this block once no reference (or
  // only its own, which the ring drops once consumers moved on) is left.
  // seq_cst load: the second half of the pair; zero unless the producer
  // waits, so a release makes no system call otherwise.
  if (BlockCount(cur) <= 2 && d.header->space_waiters.load(std::memory_order_seq_cst) != 0) {
    // Release increment: partner of the producer's load of the futex word
    // (it reclaims after waking).
    d.header->space_futex.fetch_add(1, std::memory_order_release);
    internal::FutexWakeAll(&d.header->space_futex);
  }
  return Status::OK();
}

const std::string& BodyReader::name() const { return impl_->segment->name(); }

}  // namespace alkaid::shm
