#include "alkaid/shm/body_allocator.h"

#include <unistd.h>

#include <algorithm>
#include <deque>
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
using internal::BlockDescriptorData;
using internal::BlockGeneration;
using internal::BodyArenaHeaderData;
using internal::kBodyArenaHeaderSize;
using internal::kBodyArenaLayoutVersion;
using internal::kBodyArenaMagic;
using internal::kMaxBlockRefs;
using internal::PackBlockState;
using internal::RoundUp;

static_assert(kBlockAlignment == internal::kCacheLineSize);

namespace {

// Where the parts of a body segment are, from the payload start. Computed
// by the producer from its options and by readers from the (untrusted)
// header, then kept in private memory.
struct ArenaGeometry {
  uint64_t descriptors_offset = kBodyArenaHeaderSize;
  uint32_t descriptor_count = 0;
  uint64_t arena_offset = 0;
  uint64_t arena_size = 0;
};

// Checks that `handle` names a plausible block of `g`, without touching
// shared memory: descriptor index inside the table, data offset 64-byte
// aligned inside the arena, length inside the arena.
Status CheckHandleBounds(const BlockHandle& handle, const ArenaGeometry& g,
                         const std::string& name) {
  const uint64_t arena_begin = g.arena_offset;
  const uint64_t arena_end = arena_begin + g.arena_size;
  if (handle.generation == 0) {
    return Status::Invalid("body segment '", name, "': block handle at offset ", handle.offset,
                           " has generation 0 (not a block)");
  }
  if (handle.descriptor >= g.descriptor_count) {
    return Status::Invalid("body segment '", name, "': block handle at offset ", handle.offset,
                           " names descriptor ", handle.descriptor, ", past the table of ",
                           g.descriptor_count);
  }
  if (handle.offset < arena_begin || handle.offset > arena_end ||
      (handle.offset - arena_begin) % kBlockAlignment != 0) {
    return Status::Invalid("body segment '", name, "': block offset ", handle.offset,
                           " is not a 64-byte-aligned data offset inside the arena [",
                           arena_begin, ", ", arena_end, "]");
  }
  if (handle.length > arena_end - handle.offset) {
    return Status::Invalid("body segment '", name, "': block at offset ", handle.offset,
                           " with length ", handle.length, " ends at ",
                           handle.offset + handle.length, ", past the arena end ", arena_end);
  }
  return Status::OK();
}

BlockDescriptorData* DescriptorAt(std::byte* payload, const ArenaGeometry& g, uint32_t index) {
  return reinterpret_cast<BlockDescriptorData*>(payload + g.descriptors_offset) + index;
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
    uint64_t offset;      // data offset from the payload start
    uint64_t size;        // arena bytes (capacity)
    uint32_t generation;  // what the producer wrote into the descriptor
  };

  std::shared_ptr<Segment> segment;
  BodyAllocatorOptions options;
  BodyArenaHeaderData* header = nullptr;
  std::byte* payload = nullptr;  // segment payload start; offsets count from here
  ArenaGeometry g;

  // Producer-private bookkeeping: consumers cannot reach it. Offsets are
  // data offsets from the payload start.
  std::map<uint64_t, uint64_t> free_by_offset;            // offset -> size
  std::set<std::pair<uint64_t, uint64_t>> free_by_size;  // (size, offset)
  std::unordered_map<uint32_t, Live> live;                // descriptor -> block
  // Unused descriptors, oldest first: a descriptor is reused as late as
  // possible, which keeps stale handles to it stale for longer.
  std::deque<uint32_t> free_descriptors;
  uint64_t in_use_bytes = 0;
  uint32_t next_generation = 1;
  uint64_t allocations = 0;
  uint64_t reclaimed = 0;
  uint64_t quarantined = 0;
  std::function<void()> reclaim_callback;

  BlockDescriptorData* DescriptorOf(uint32_t index) const {
    return DescriptorAt(payload, g, index);
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

  void FreeBlock(uint32_t index) {
    auto it = live.find(index);
    const Live block = it->second;
    live.erase(it);
    in_use_bytes -= block.size;
    ++reclaimed;
    AddFree(block.offset, block.size);
    free_descriptors.push_back(index);
  }

  // Never reused: neither the space nor the descriptor. A consumer may
  // still be reading the block, and the shared count cannot say when it
  // stops.
  void Quarantine(uint32_t index) {
    live.erase(index);
    ++quarantined;
  }

  uint64_t LargestFree() const {
    return free_by_size.empty() ? 0 : free_by_size.rbegin()->first;
  }

  // Finds the live block `handle` names (producer-private bookkeeping).
  Result<std::unordered_map<uint32_t, Live>::iterator> FindLive(const BlockHandle& handle) {
    ALKAID_RETURN_NOT_OK(CheckHandleBounds(handle, g, segment->name()));
    auto it = live.find(handle.descriptor);
    if (it == live.end() || it->second.generation != handle.generation ||
        it->second.offset != handle.offset) {
      return Status::KeyError("body segment '", segment->name(), "': no live block at offset ",
                              handle.offset, " with descriptor ", handle.descriptor,
                              " and generation ", handle.generation);
    }
    return it;
  }

  // One attempt, no reclaim, no waiting.
  Result<WritableBlock> AllocateOnce(BodyAllocator* self, uint64_t length, uint64_t need) {
    if (free_descriptors.empty()) {
      return Status::OutOfMemory("body segment '", segment->name(), "' is full: all ",
                                 g.descriptor_count, " block descriptors are in use (",
                                 in_use_bytes, " of ", g.arena_size,
                                 " arena bytes still referenced; raise max_blocks for many "
                                 "small blocks)");
    }
    auto it = free_by_size.lower_bound({need, 0});
    if (it == free_by_size.end()) {
      return Status::OutOfMemory("body segment '", segment->name(), "' is full: a ", length,
                                 "-byte block needs ", need, " bytes, the largest free range is ",
                                 LargestFree(), " of ", g.arena_size, " (", live.size(),
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
    const uint32_t index = free_descriptors.front();
    free_descriptors.pop_front();
    const uint32_t generation = next_generation;
    next_generation = next_generation == UINT32_MAX ? 1 : next_generation + 1;
    live.emplace(index, Live{offset, need, generation});
    in_use_bytes += need;
    ++allocations;

    // The descriptor's count is zero (free) or it was never used: no
    // consumer can hold or take a reference, so these stores race with
    // nothing but failing acquire attempts through stale handles, which
    // only load `state`.
    BlockDescriptorData* d = DescriptorOf(index);
    d->offset.store(offset, std::memory_order_relaxed);
    d->length.store(length, std::memory_order_relaxed);
    d->capacity.store(need, std::memory_order_relaxed);
    // Release: publishes the fields above together with the new generation;
    // partner of the acquire CAS in BodyReader::Acquire.
    d->state.store(PackBlockState(generation, 1), std::memory_order_release);

    BlockHandle handle{offset, length, generation, index};
    std::span<std::byte> data(payload + offset, length);
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
  if (options.max_blocks > kMaxBlocks) {
    return Status::Invalid("body segment '", name, "': max_blocks ", options.max_blocks,
                           " exceeds the limit of ", kMaxBlocks);
  }
  ArenaGeometry g;
  g.arena_size = RoundUp(arena_bytes, kBlockAlignment);
  g.descriptor_count =
      options.max_blocks != 0
          ? options.max_blocks
          : static_cast<uint32_t>(std::clamp<uint64_t>(g.arena_size / 4096,
                                                       internal::kMinDefaultDescriptors,
                                                       internal::kMaxDefaultDescriptors));
  g.descriptors_offset = kBodyArenaHeaderSize;
  g.arena_offset = g.descriptors_offset + uint64_t{g.descriptor_count} * sizeof(BlockDescriptorData);
  ALKAID_ASSIGN_OR_RAISE(auto segment, Segment::Create(name, g.arena_offset + g.arena_size,
                                                       SegmentKind::kBodies, options.segment));
  auto impl = std::make_unique<Impl>();
  impl->segment = segment;
  impl->options = options;
  impl->payload = segment->payload();
  impl->g = g;
  // The segment is zero-filled: every descriptor has state (0, 0), which no
  // handle can acquire (generations are never 0).
  auto* header = new (segment->payload()) BodyArenaHeaderData();
  header->layout_version = kBodyArenaLayoutVersion;
  header->block_alignment = static_cast<uint32_t>(kBlockAlignment);
  header->arena_offset = g.arena_offset;
  header->arena_size = g.arena_size;
  header->producer_pid = static_cast<uint32_t>(::getpid());
  header->descriptor_count = g.descriptor_count;
  header->descriptors_offset = g.descriptors_offset;
  // Release: publishes the header; partner of the acquire load in
  // BodyReader::Open.
  header->magic.store(kBodyArenaMagic, std::memory_order_release);
  impl->header = header;
  impl->AddFree(g.arena_offset, g.arena_size);
  for (uint32_t i = 0; i < g.descriptor_count; ++i) impl->free_descriptors.push_back(i);
  return std::unique_ptr<BodyAllocator>(new BodyAllocator(std::move(impl)));
}

Result<WritableBlock> BodyAllocator::TryAllocate(uint64_t length) {
  Impl& d = *impl_;
  if (length > d.g.arena_size) {
    return Status::CapacityError("body segment '", d.segment->name(), "': a block of ", length,
                                 " bytes cannot fit in a ", d.g.arena_size, "-byte arena");
  }
  // At least one alignment unit, so every block has a distinct offset.
  const uint64_t need = std::max(kBlockAlignment, RoundUp(length, kBlockAlignment));
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
  ALKAID_ASSIGN_OR_RAISE(auto it, d.FindLive(handle));
  (void)it;
  BlockDescriptorData* desc = d.DescriptorOf(handle.descriptor);
  uint64_t cur = desc->state.load(std::memory_order_relaxed);
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
  } while (!desc->state.compare_exchange_weak(cur, cur + count, std::memory_order_relaxed,
                                              std::memory_order_relaxed));
  return Status::OK();
}

Status BodyAllocator::Release(const BlockHandle& handle) {
  Impl& d = *impl_;
  ALKAID_ASSIGN_OR_RAISE(auto it, d.FindLive(handle));
  BlockDescriptorData* desc = d.DescriptorOf(handle.descriptor);
  uint64_t cur = desc->state.load(std::memory_order_relaxed);
  do {
    if (BlockGeneration(cur) != handle.generation || BlockCount(cur) == 0 ||
        BlockCount(cur) > kMaxBlockRefs) {
      // Someone wrote garbage into the shared count: never reuse this space,
      // a consumer may still be reading it.
      d.live.erase(it);
      ++d.quarantined;
      return Status::Invalid("body segment '", d.segment->name(), "': block at offset ",
                             handle.offset, " (descriptor ", handle.descriptor,
                             ") has a corrupt shared state (generation ", BlockGeneration(cur),
                             ", count ", BlockCount(cur), "); block quarantined");
    }
    // acq_rel: release pairs with the acquire load in Reclaim (producer
    // writes to the data happen before reuse, trivially here); acquire pairs
    // with the consumers' release decrements so that if this was the last
    // reference, their reads happen before we reuse the space below.
  } while (!desc->state.compare_exchange_weak(cur, cur - 1, std::memory_order_acq_rel,
                                              std::memory_order_relaxed));
  if (BlockCount(cur) == 1) d.FreeBlock(handle.descriptor);
  return Status::OK();
}

uint64_t BodyAllocator::Reclaim() {
  Impl& d = *impl_;
  uint64_t count = 0;
  for (auto it = d.live.begin(); it != d.live.end();) {
    const uint32_t index = it->first;
    const Impl::Live live = it->second;
    ++it;  // FreeBlock and Quarantine erase the current entry
    // Acquire: partner of the release decrement in BodyReader::Release;
    // consumers' reads of the data happen before the space is reused.
    const uint64_t state = d.DescriptorOf(index)->state.load(std::memory_order_acquire);
    if (BlockGeneration(state) != live.generation || BlockCount(state) > kMaxBlockRefs) {
      d.Quarantine(index);
      continue;
    }
    if (BlockCount(state) == 0) {
      // A count of zero is final: Acquire refuses to raise it.
      d.FreeBlock(index);
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
  s.capacity_bytes = d.g.arena_size;
  s.in_use_bytes = d.in_use_bytes;
  s.in_use_blocks = d.live.size();
  s.largest_free_bytes = d.LargestFree();
  s.allocations = d.allocations;
  s.reclaimed_blocks = d.reclaimed;
  s.quarantined_blocks = d.quarantined;
  s.max_blocks = d.g.descriptor_count;
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
  ArenaGeometry g;  // private copy, checked against the segment at Open

  BlockDescriptorData* DescriptorOf(uint32_t index) const {
    return DescriptorAt(payload, g, index);
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
  ArenaGeometry g;
  g.descriptors_offset = header->descriptors_offset;
  g.descriptor_count = header->descriptor_count;
  g.arena_offset = header->arena_offset;
  g.arena_size = header->arena_size;
  const uint64_t payload_size = segment->payload_size();
  const uint64_t table_end = kBodyArenaHeaderSize + uint64_t{g.descriptor_count} *
                                                        sizeof(BlockDescriptorData);
  if (header->block_alignment != kBlockAlignment ||
      g.descriptors_offset != kBodyArenaHeaderSize || g.descriptor_count == 0 ||
      g.descriptor_count > kMaxBlocks || g.arena_offset != table_end ||
      g.arena_offset > payload_size || g.arena_size > payload_size - g.arena_offset ||
      g.arena_size % kBlockAlignment != 0) {
    return Status::Invalid("body segment '", name, "': arena header (", g.descriptor_count,
                           " descriptors at ", g.descriptors_offset, ", arena at ",
                           g.arena_offset, " of ", g.arena_size, " bytes, alignment ",
                           header->block_alignment, ") does not fit the ", payload_size,
                           "-byte payload");
  }
  auto impl = std::make_unique<Impl>();
  impl->segment = std::move(segment);
  impl->payload = impl->segment->payload();
  impl->header = reinterpret_cast<BodyArenaHeaderData*>(impl->payload);
  impl->g = g;
  return std::unique_ptr<BodyReader>(new BodyReader(std::move(impl)));
}

Result<BlockRef> BodyReader::Acquire(const BlockHandle& handle) const {
  const Impl& d = *impl_;
  const std::string& name = d.segment->name();
  ALKAID_RETURN_NOT_OK(CheckHandleBounds(handle, d.g, name));
  // Only the descriptor is touched before a reference is held: a stale
  // handle never reads or writes the arena.
  BlockDescriptorData* desc = d.DescriptorOf(handle.descriptor);
  uint64_t cur = desc->state.load(std::memory_order_relaxed);
  do {
    if (BlockGeneration(cur) != handle.generation) {
      return Status::KeyError("body segment '", name, "': block at offset ", handle.offset,
                              " is stale: descriptor ", handle.descriptor, " has generation ",
                              BlockGeneration(cur), ", handle has ", handle.generation);
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
    // BodyAllocator allocation, so offset/length/capacity/data are visible.
  } while (!desc->state.compare_exchange_weak(cur, cur + 1, std::memory_order_acquire,
                                              std::memory_order_relaxed));
  // We hold a reference: the descriptor cannot be reused under us now.
  // Check it against the handle and the arena before handing out the data.
  const uint64_t offset = desc->offset.load(std::memory_order_relaxed);
  const uint64_t capacity = desc->capacity.load(std::memory_order_relaxed);
  const uint64_t length = desc->length.load(std::memory_order_relaxed);
  const uint64_t arena_end = d.g.arena_offset + d.g.arena_size;
  const bool ok = offset == handle.offset && length == handle.length &&
                  capacity <= arena_end - handle.offset && handle.length <= capacity;
  if (!ok) {
    (void)Release(handle);
    return Status::Invalid("body segment '", name, "': block handle (offset ", handle.offset,
                           ", length ", handle.length, ") is inconsistent with descriptor ",
                           handle.descriptor, " (offset ", offset, ", length ", length,
                           ", capacity ", capacity, ")");
  }
  return BlockRef(this, handle,
                  std::span<const std::byte>(d.payload + handle.offset, handle.length));
}

Status BodyReader::Release(const BlockHandle& handle) const {
  const Impl& d = *impl_;
  const std::string& name = d.segment->name();
  ALKAID_RETURN_NOT_OK(CheckHandleBounds(handle, d.g, name));
  BlockDescriptorData* desc = d.DescriptorOf(handle.descriptor);
  uint64_t cur = desc->state.load(std::memory_order_relaxed);
  do {
    if (BlockGeneration(cur) != handle.generation || BlockCount(cur) == 0) {
      return Status::Invalid("body segment '", name, "': release of block at offset ",
                             handle.offset, " (descriptor ", handle.descriptor, ", generation ",
                             handle.generation,
                             ") that holds no reference (shared state: generation ",
                             BlockGeneration(cur), ", count ", BlockCount(cur), ")");
    }
    // seq_cst (release semantics): partner of the acquire load in
    // BodyAllocator::Reclaim (and of the acq_rel decrement in
    // BodyAllocator::Release): our reads of the data happen before the
    // producer reuses the space. seq_cst because it is also the first half
    // of the Dekker pair with a waiting producer (see Allocate).
  } while (!desc->state.compare_exchange_weak(cur, cur - 1, std::memory_order_seq_cst,
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
