#include "alkaid/shm/body_allocator.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <new>
#include <set>
#include <utility>
#include <vector>

#include "alkaid/common/process.h"
#include "body_layout_internal.h"
#include "futex_internal.h"
#include "wait_internal.h"

namespace alkaid::shm {

using internal::BlockCount;
using internal::BlockDescriptorData;
using internal::BlockGeneration;
using internal::BlockReclaiming;
using internal::BodyArenaHeaderData;
using internal::BodyHolderData;
using internal::HolderPid;
using internal::HolderStateOf;
using internal::HolderWord;
using internal::kBlockReclaiming;
using internal::kBodyArenaHeaderSize;
using internal::kBodyArenaLayoutVersion;
using internal::kBodyArenaMagic;
using internal::kHolderWords;
using internal::kMaxBlockRefs;
using internal::PackBlockState;
using internal::RoundUp;

static_assert(kBlockAlignment == internal::kCacheLineSize);
static_assert(kMaxBodyHolders == internal::kBodyHolderCount);

namespace {

// Where the parts of a body segment are, from the payload start. Computed
// by the producer from its options and by readers from the (untrusted)
// header, then kept in private memory.
struct ArenaGeometry {
  uint64_t descriptors_offset = kBodyArenaHeaderSize;
  uint32_t descriptor_count = 0;
  uint64_t holders_offset = 0;
  uint32_t holder_count = kMaxBodyHolders;
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
                           " is not a 64-byte-aligned data offset inside the arena [", arena_begin,
                           ", ", arena_end, "]");
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

BodyHolderData* HolderAt(std::byte* payload, const ArenaGeometry& g, uint32_t index) {
  return reinterpret_cast<BodyHolderData*>(payload + g.holders_offset) + index;
}

bool AnyHolder(const BlockDescriptorData* d) {
  for (uint32_t w = 0; w < kHolderWords; ++w) {
    // seq_cst: second half of the Dekker pair with a reader's seq_cst bit
    // set followed by its seq_cst load of `state` (see BlockDescriptorData).
    if (d->holders[w].load(std::memory_order_seq_cst) != 0) return true;
  }
  return false;
}

// Wakes a producer waiting for space (FullPolicy::kWait) if one announced
// itself. Called after a release, whose seq_cst RMW this seq_cst load follows
// (Dekker pair with the producer's announcement; see Allocate).
void WakeSpaceWaiter(BodyArenaHeaderData* header) {
  if (header->space_waiters.load(std::memory_order_seq_cst) == 0) return;
  // Release increment: partner of the producer's load of the futex word (it
  // reclaims after waking).
  header->space_futex.fetch_add(1, std::memory_order_release);
  internal::FutexWakeAll(&header->space_futex);
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
  static constexpr uint32_t kNoBlock = UINT32_MAX;

  // One per descriptor. Live blocks are chained oldest first (Reclaim walks
  // them in allocation order, which is release order for a stream).
  struct Live {
    uint64_t offset = 0;      // data offset from the payload start
    uint64_t size = 0;        // arena bytes (capacity)
    uint32_t generation = 0;  // what the producer wrote into the descriptor; 0: not live
    uint32_t prev = kNoBlock;
    uint32_t next = kNoBlock;
  };

  std::shared_ptr<Segment> segment;
  BodyAllocatorOptions options;
  BodyArenaHeaderData* header = nullptr;
  std::byte* payload = nullptr;  // segment payload start; offsets count from here
  ArenaGeometry g;

  // Producer-private bookkeeping: consumers cannot reach it. Offsets are
  // data offsets from the payload start. The free ranges are kept in two
  // trees whose nodes are re-keyed in place (extract / insert) when a range
  // is split or grows, so the common pattern — allocate from one large
  // range, free the oldest block next to the range freed before it — does
  // no heap allocation at all.
  std::map<uint64_t, uint64_t> free_by_offset;           // offset -> size
  std::set<std::pair<uint64_t, uint64_t>> free_by_size;  // (size, offset)
  // Nodes of ranges used up exactly, kept for the next range: a block freed
  // and reallocated at once (best fit reuses it) allocates nothing either.
  std::vector<std::map<uint64_t, uint64_t>::node_type> spare_offset_nodes;
  std::vector<std::set<std::pair<uint64_t, uint64_t>>::node_type> spare_size_nodes;
  static constexpr size_t kMaxSpareNodes = 16;
  std::vector<Live> blocks;       // by descriptor
  uint32_t live_head = kNoBlock;  // oldest live block
  uint32_t live_tail = kNoBlock;  // newest live block
  uint64_t live_count = 0;
  // Unused descriptors, oldest first (a FIFO in a fixed ring): a descriptor
  // is reused as late as possible, which keeps stale handles to it stale
  // for longer.
  std::vector<uint32_t> free_descriptors;
  uint64_t free_descriptors_head = 0;
  uint64_t free_descriptors_count = 0;
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
    const bool join_next = next != free_by_offset.end() && offset + size == next->first;
    if (next != free_by_offset.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        // Grow the previous range in place (its key stays).
        auto size_node = free_by_size.extract({prev->second, prev->first});
        prev->second += size;
        if (join_next) {
          prev->second += next->second;
          free_by_size.erase({next->second, next->first});
          free_by_offset.erase(next);
        }
        size_node.value() = {prev->second, prev->first};
        free_by_size.insert(std::move(size_node));
        return;
      }
    }
    if (join_next) {
      // Grow the next range downwards: re-key its nodes.
      auto offset_node = free_by_offset.extract(next);
      auto size_node = free_by_size.extract({offset_node.mapped(), offset_node.key()});
      offset_node.key() = offset;
      offset_node.mapped() += size;
      size_node.value() = {offset_node.mapped(), offset};
      free_by_offset.insert(std::move(offset_node));
      free_by_size.insert(std::move(size_node));
      return;
    }
    if (!spare_offset_nodes.empty() && !spare_size_nodes.empty()) {
      auto offset_node = std::move(spare_offset_nodes.back());
      auto size_node = std::move(spare_size_nodes.back());
      spare_offset_nodes.pop_back();
      spare_size_nodes.pop_back();
      offset_node.key() = offset;
      offset_node.mapped() = size;
      size_node.value() = {size, offset};
      free_by_offset.insert(std::move(offset_node));
      free_by_size.insert(std::move(size_node));
      return;
    }
    free_by_offset.emplace(offset, size);
    free_by_size.emplace(size, offset);
  }

  // The live block of descriptor `index`, or null.
  Live* LiveBlock(uint32_t index) {
    Live* b = &blocks[index];
    return b->generation != 0 ? b : nullptr;
  }

  void LinkLive(uint32_t index, uint64_t offset, uint64_t size, uint32_t generation) {
    Live& b = blocks[index];
    b.offset = offset;
    b.size = size;
    b.generation = generation;
    b.prev = live_tail;
    b.next = kNoBlock;
    if (live_tail != kNoBlock) {
      blocks[live_tail].next = index;
    } else {
      live_head = index;
    }
    live_tail = index;
    ++live_count;
  }

  void UnlinkLive(uint32_t index) {
    Live& b = blocks[index];
    if (b.prev != kNoBlock) {
      blocks[b.prev].next = b.next;
    } else {
      live_head = b.next;
    }
    if (b.next != kNoBlock) {
      blocks[b.next].prev = b.prev;
    } else {
      live_tail = b.prev;
    }
    b.generation = 0;
    b.prev = b.next = kNoBlock;
    --live_count;
  }

  void PushFreeDescriptor(uint32_t index) {
    const uint64_t n = free_descriptors.size();
    free_descriptors[(free_descriptors_head + free_descriptors_count) % n] = index;
    ++free_descriptors_count;
  }

  uint32_t PopFreeDescriptor() {
    const uint32_t index = free_descriptors[free_descriptors_head];
    free_descriptors_head = (free_descriptors_head + 1) % free_descriptors.size();
    --free_descriptors_count;
    return index;
  }

  void FreeBlock(uint32_t index) {
    const Live block = blocks[index];
    UnlinkLive(index);
    in_use_bytes -= block.size;
    ++reclaimed;
    AddFree(block.offset, block.size);
    PushFreeDescriptor(index);
  }

  // Never reused: neither the space nor the descriptor. A consumer may
  // still be reading the block, and the shared count cannot say when it
  // stops.
  void Quarantine(uint32_t index) {
    UnlinkLive(index);
    ++quarantined;
  }

  // The producer's decision to free descriptor `index` (generation `gen`),
  // whose count it saw at 0: no holder bit, then CAS (gen, 0) to (gen,
  // reclaiming), then no holder bit again (a reader that set its bit before
  // the CAS is seen here; one after it sees the flag and backs off). Frees
  // the block and returns true, or leaves it (flag cleared) and returns false.
  bool TryFree(uint32_t index, uint32_t gen) {
    BlockDescriptorData* desc = DescriptorOf(index);
    if (AnyHolder(desc)) return false;
    uint64_t expected = PackBlockState(gen, 0);
    // seq_cst: first half of the Dekker pair with the readers (see above);
    // acquire semantics also pair with the readers' release decrements.
    if (!desc->state.compare_exchange_strong(expected, expected | kBlockReclaiming,
                                             std::memory_order_seq_cst,
                                             std::memory_order_relaxed)) {
      return false;
    }
    if (!AnyHolder(desc)) {
      // Free for good: no reader can take a reference any more (the flag
      // stays until the next allocation stores a new state).
      FreeBlock(index);
      return true;
    }
    // A reader holds it after all: clear the flag (only the producer sets
    // or clears it, readers' CASes fail while it is set).
    uint64_t flagged = expected | kBlockReclaiming;
    if (!desc->state.compare_exchange_strong(flagged, expected, std::memory_order_seq_cst,
                                             std::memory_order_relaxed)) {
      Quarantine(index);  // someone else wrote the word: corrupt
    }
    return false;
  }

  uint64_t LargestFree() const { return free_by_size.empty() ? 0 : free_by_size.rbegin()->first; }

  // Checks that `handle` names a live block (producer-private bookkeeping).
  Status FindLive(const BlockHandle& handle) {
    ALKAID_RETURN_NOT_OK(CheckHandleBounds(handle, g, segment->name()));
    const Live* b = LiveBlock(handle.descriptor);
    if (b == nullptr || b->generation != handle.generation || b->offset != handle.offset) {
      return Status::KeyError("body segment '", segment->name(), "': no live block at offset ",
                              handle.offset, " with descriptor ", handle.descriptor,
                              " and generation ", handle.generation);
    }
    return Status::OK();
  }

  // One attempt, no reclaim, no waiting.
  Result<WritableBlock> AllocateOnce(BodyAllocator* self, uint64_t length, uint64_t need) {
    if (free_descriptors_count == 0) {
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
                                 LargestFree(), " of ", g.arena_size, " (", live_count, " blocks, ",
                                 in_use_bytes, " bytes still referenced)");
    }
    const uint64_t range_size = it->first;
    const uint64_t offset = it->second;
    // Split the range, re-keying its nodes rather than allocating new ones.
    auto size_node = free_by_size.extract(it);
    auto offset_node = free_by_offset.extract(offset);
    if (range_size > need) {
      size_node.value() = {range_size - need, offset + need};
      offset_node.key() = offset + need;
      offset_node.mapped() = range_size - need;
      free_by_size.insert(std::move(size_node));
      free_by_offset.insert(std::move(offset_node));
    } else if (spare_offset_nodes.size() < kMaxSpareNodes) {
      spare_offset_nodes.push_back(std::move(offset_node));
      spare_size_nodes.push_back(std::move(size_node));
    }
    const uint32_t index = PopFreeDescriptor();
    const uint32_t generation = next_generation;
    next_generation = next_generation == UINT32_MAX ? 1 : next_generation + 1;
    LinkLive(index, offset, need, generation);
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
  g.descriptor_count = options.max_blocks != 0
                           ? options.max_blocks
                           : static_cast<uint32_t>(std::clamp<uint64_t>(
                                 g.arena_size / 4096, internal::kMinDefaultDescriptors,
                                 internal::kMaxDefaultDescriptors));
  g.descriptors_offset = kBodyArenaHeaderSize;
  g.holders_offset =
      g.descriptors_offset + uint64_t{g.descriptor_count} * sizeof(BlockDescriptorData);
  g.holder_count = kMaxBodyHolders;
  g.arena_offset = g.holders_offset + uint64_t{kMaxBodyHolders} * sizeof(BodyHolderData);
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
  header->holders_offset = g.holders_offset;
  header->holder_count = kMaxBodyHolders;
  // Release: publishes the header; partner of the acquire load in
  // BodyReader::Open.
  header->magic.store(kBodyArenaMagic, std::memory_order_release);
  impl->header = header;
  impl->AddFree(g.arena_offset, g.arena_size);
  impl->blocks.resize(g.descriptor_count);
  impl->spare_offset_nodes.reserve(Impl::kMaxSpareNodes);
  impl->spare_size_nodes.reserve(Impl::kMaxSpareNodes);
  impl->free_descriptors.resize(g.descriptor_count);
  for (uint32_t i = 0; i < g.descriptor_count; ++i) impl->PushFreeDescriptor(i);
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
  return Status::TimedOut(
      "body segment '", impl_->segment->name(), "': no room for a ", length,
      "-byte block after waiting ",
      std::chrono::duration_cast<std::chrono::milliseconds>(impl_->options.wait_timeout).count(),
      " ms (", impl_->live_count, " blocks still referenced)");
}

Status BodyAllocator::AddRef(const BlockHandle& handle, uint32_t count) {
  Impl& d = *impl_;
  ALKAID_RETURN_NOT_OK(d.FindLive(handle));
  BlockDescriptorData* desc = d.DescriptorOf(handle.descriptor);
  uint64_t cur = desc->state.load(std::memory_order_relaxed);
  do {
    if (BlockGeneration(cur) != handle.generation || BlockCount(cur) == 0 || BlockReclaiming(cur) ||
        BlockCount(cur) > kMaxBlockRefs - count) {
      return Status::Invalid("body segment '", d.segment->name(), "': block at offset ",
                             handle.offset, " has state (generation ", BlockGeneration(cur),
                             ", count ", BlockCount(cur), "); cannot add ", count, " references");
    }
    // Relaxed: the producer already holds a reference, so the block cannot
    // be reclaimed concurrently; no data is published by this increment.
  } while (!desc->state.compare_exchange_weak(cur, cur + count, std::memory_order_relaxed,
                                              std::memory_order_relaxed));
  return Status::OK();
}

Status BodyAllocator::Release(const BlockHandle& handle) {
  Impl& d = *impl_;
  ALKAID_RETURN_NOT_OK(d.FindLive(handle));
  BlockDescriptorData* desc = d.DescriptorOf(handle.descriptor);
  uint64_t cur = desc->state.load(std::memory_order_relaxed);
  do {
    if (BlockGeneration(cur) != handle.generation || BlockCount(cur) == 0 || BlockReclaiming(cur) ||
        BlockCount(cur) > kMaxBlockRefs) {
      // Someone wrote garbage into the shared count: never reuse this space,
      // a consumer may still be reading it.
      d.Quarantine(handle.descriptor);
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
  // The last anonymous reference: free unless a reader holds it by its bit.
  if (BlockCount(cur) == 1) (void)d.TryFree(handle.descriptor, handle.generation);
  return Status::OK();
}

uint64_t BodyAllocator::Reclaim() {
  Impl& d = *impl_;
  uint64_t count = 0;
  for (uint32_t index = d.live_head; index != Impl::kNoBlock;) {
    const Impl::Live live = d.blocks[index];
    const uint32_t current = index;
    index = live.next;  // FreeBlock and Quarantine unlink the current entry
    // Acquire: partner of the release decrement in BodyReader::Release;
    // consumers' reads of the data happen before the space is reused.
    const uint64_t state = d.DescriptorOf(current)->state.load(std::memory_order_acquire);
    if (BlockGeneration(state) != live.generation || BlockReclaiming(state) ||
        BlockCount(state) > kMaxBlockRefs) {
      d.Quarantine(current);
      continue;
    }
    if (BlockCount(state) == 0 && d.TryFree(current, live.generation)) ++count;
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
  s.in_use_blocks = d.live_count;
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
      data_(std::exchange(other.data_, {})),
      holder_(std::exchange(other.holder_, kNoHolder)) {}

BlockRef& BlockRef::operator=(BlockRef&& other) noexcept {
  if (this != &other) {
    Release();
    reader_ = std::exchange(other.reader_, nullptr);
    handle_ = std::exchange(other.handle_, {});
    data_ = std::exchange(other.data_, {});
    holder_ = std::exchange(other.holder_, kNoHolder);
  }
  return *this;
}

BlockRef::~BlockRef() { Release(); }

void BlockRef::Release() {
  if (reader_ == nullptr) return;
  // Only fails if another party corrupted the shared count; nothing more a
  // destructor can do about it.
  (void)reader_->ReleaseRef(handle_, holder_);
  reader_ = nullptr;
  handle_ = {};
  data_ = {};
  holder_ = kNoHolder;
}

// ---------------------------------------------------------------------------
// BodyReader

struct BodyReader::Impl {
  std::shared_ptr<Segment> segment;
  BodyArenaHeaderData* header = nullptr;
  std::byte* payload = nullptr;
  ArenaGeometry g;  // private copy, checked against the segment at Open
  uint32_t holder = kNoHolder;
  uint64_t holder_word = 0;  // HolderWord(pid, tag, kHolderActive)

  BlockDescriptorData* DescriptorOf(uint32_t index) const {
    return DescriptorAt(payload, g, index);
  }
  BodyHolderData* HolderOf(uint32_t index) const { return HolderAt(payload, g, index); }

  // Clears holder `h`'s bit in every descriptor; returns how many were set.
  uint64_t ClearHolderBits(uint32_t h) const {
    const uint64_t bit = uint64_t{1} << (h % 64);
    uint64_t cleared = 0;
    for (uint32_t i = 0; i < g.descriptor_count; ++i) {
      std::atomic<uint64_t>& word = DescriptorOf(i)->holders[h / 64];
      // Relaxed pre-check: a dead holder's bits change no more.
      if ((word.load(std::memory_order_relaxed) & bit) == 0) continue;
      // seq_cst (release semantics): like the holder's own release; partner
      // of the producer's seq_cst re-read of the holder words in TryFree.
      if ((word.fetch_and(~bit, std::memory_order_seq_cst) & bit) != 0) ++cleared;
    }
    return cleared;
  }

  // Frees holder entry `h` if its process is gone (and is `pid`, unless 0).
  // Returns the references released, or -1 if the entry was not reclaimed.
  int64_t ReclaimIfDead(uint32_t h, uint32_t pid) const {
    std::atomic<uint64_t>& owner = HolderOf(h)->owner;
    uint64_t word = owner.load(std::memory_order_acquire);
    if (HolderStateOf(word) != internal::kHolderActive) return -1;
    if (pid != 0 && HolderPid(word) != pid) return -1;
    if (!::alkaid::ProcessIsGone(HolderPid(word))) return -1;
    // Claim the cleanup (two reclaimers never sweep the same entry). The pid
    // came with the claim in one word, so it is the owner's own: a dead
    // process makes no more stores, and nobody else can own the entry
    // before it is freed below.
    const uint64_t reclaiming = (word & ~uint64_t{3}) | internal::kHolderReclaiming;
    if (!owner.compare_exchange_strong(word, reclaiming, std::memory_order_acq_rel,
                                       std::memory_order_relaxed)) {
      return -1;
    }
    const uint64_t cleared = ClearHolderBits(h);
    // Release: partner of the acquire CAS of the next claim; the bit clears
    // above happen before the entry can be owned again.
    owner.store(0, std::memory_order_release);
    return static_cast<int64_t>(cleared);
  }

  // Claims a free holder entry; on failure frees entries of dead processes
  // and tries once more. Leaves `holder` at kNoHolder if all are taken.
  void ClaimHolder() {
    const uint32_t pid = static_cast<uint32_t>(::getpid());
    const uint32_t tag = header->holder_counter.fetch_add(1, std::memory_order_relaxed) + 1;
    const uint64_t mine = HolderWord(pid, tag, internal::kHolderActive);
    for (int pass = 0; pass < 2; ++pass) {
      for (uint32_t h = 0; h < g.holder_count; ++h) {
        if (pass == 1 && ReclaimIfDead(h, 0) < 0) continue;
        uint64_t expected = 0;
        // acq_rel: acquire pairs with the release store that freed the
        // entry (its bits were cleared before); release orders the claim.
        if (HolderOf(h)->owner.compare_exchange_strong(expected, mine, std::memory_order_acq_rel,
                                                       std::memory_order_relaxed)) {
          holder = h;
          holder_word = mine;
          return;
        }
      }
    }
  }
};

BodyReader::BodyReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

BodyReader::~BodyReader() {
  if (impl_ == nullptr || impl_->holder == kNoHolder) return;
  // Every BlockRef is gone (they must not outlive the reader), so no bit of
  // ours is set unless a caller kept raw references (Acquire without
  // BlockRef is not offered for holders). Release: partner of the next
  // claim's acquire. Fails harmlessly if the entry was reclaimed.
  uint64_t expected = impl_->holder_word;
  impl_->HolderOf(impl_->holder)
      ->owner.compare_exchange_strong(expected, 0, std::memory_order_release,
                                      std::memory_order_relaxed);
}

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
                           " bytes cannot hold the ", kBodyArenaHeaderSize, "-byte arena header");
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
                           header->layout_version, ", this build reads ", kBodyArenaLayoutVersion);
  }
  ArenaGeometry g;
  g.descriptors_offset = header->descriptors_offset;
  g.descriptor_count = header->descriptor_count;
  g.holders_offset = header->holders_offset;
  g.holder_count = header->holder_count;
  g.arena_offset = header->arena_offset;
  g.arena_size = header->arena_size;
  const uint64_t payload_size = segment->payload_size();
  const uint64_t table_end =
      kBodyArenaHeaderSize + uint64_t{g.descriptor_count} * sizeof(BlockDescriptorData);
  const uint64_t holders_end = table_end + uint64_t{kMaxBodyHolders} * sizeof(BodyHolderData);
  if (header->block_alignment != kBlockAlignment || g.descriptors_offset != kBodyArenaHeaderSize ||
      g.descriptor_count == 0 || g.descriptor_count > kMaxBlocks || g.holders_offset != table_end ||
      g.holder_count != kMaxBodyHolders || g.arena_offset != holders_end ||
      g.arena_offset > payload_size || g.arena_size > payload_size - g.arena_offset ||
      g.arena_size % kBlockAlignment != 0) {
    return Status::Invalid("body segment '", name, "': arena header (", g.descriptor_count,
                           " descriptors at ", g.descriptors_offset, ", arena at ", g.arena_offset,
                           " of ", g.arena_size, " bytes, alignment ", header->block_alignment,
                           ") does not fit the ", payload_size, "-byte payload");
  }
  auto impl = std::make_unique<Impl>();
  impl->segment = std::move(segment);
  impl->payload = impl->segment->payload();
  impl->header = reinterpret_cast<BodyArenaHeaderData*>(impl->payload);
  impl->g = g;
  impl->ClaimHolder();
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
  auto refuse = [&](uint64_t state) -> Status {
    if (BlockGeneration(state) != handle.generation) {
      return Status::KeyError("body segment '", name, "': block at offset ", handle.offset,
                              " is stale: descriptor ", handle.descriptor, " has generation ",
                              BlockGeneration(state), ", handle has ", handle.generation);
    }
    if (BlockCount(state) >= kMaxBlockRefs) {
      return Status::Invalid("body segment '", name, "': block at offset ", handle.offset,
                             " has an implausible reference count ", BlockCount(state));
    }
    return Status::KeyError("body segment '", name, "': block at offset ", handle.offset,
                            " (generation ", handle.generation, ") was already released");
  };
  // A new reference needs the block alive with an anonymous reference left
  // (the producer's, while the message is in the ring): once the count is
  // 0 the block is on its way out and nobody new may take it.
  if (BlockGeneration(cur) != handle.generation || BlockCount(cur) == 0 || BlockReclaiming(cur) ||
      BlockCount(cur) >= kMaxBlockRefs) {
    return refuse(cur);
  }
  uint32_t holder = kNoHolder;
  if (d.holder != kNoHolder) {
    std::atomic<uint64_t>& word = desc->holders[d.holder / 64];
    const uint64_t bit = uint64_t{1} << (d.holder % 64);
    uint64_t bits = word.load(std::memory_order_relaxed);
    while ((bits & bit) == 0) {
      // seq_cst: first half of the Dekker pair with the producer's free
      // decision (its seq_cst CAS to "reclaiming" then re-read of the
      // holder words, in TryFree).
      if (word.compare_exchange_weak(bits, bits | bit, std::memory_order_seq_cst,
                                     std::memory_order_relaxed)) {
        holder = d.holder;
        break;
      }
    }
    if (holder != kNoHolder) {
      // seq_cst load (acquire semantics: partner of the allocation's release
      // store, so offset/length/capacity/data are visible): the block is
      // ours if it is still this generation and not being freed.
      cur = desc->state.load(std::memory_order_seq_cst);
      if (BlockGeneration(cur) != handle.generation || BlockReclaiming(cur)) {
        // Release: nothing was read under the transient bit.
        word.fetch_and(~bit, std::memory_order_release);
        return refuse(cur);
      }
    }
    // Otherwise our bit is already set: this reader holds the block (or
    // another thread of it is trying to): take an anonymous reference.
  }
  if (holder == kNoHolder) {
    do {
      // An anonymous reference needs the generation and no free decision in
      // progress; the count may be 0 only when our holder bit keeps the
      // block alive (checked above for the others).
      if (BlockGeneration(cur) != handle.generation || BlockReclaiming(cur) ||
          BlockCount(cur) >= kMaxBlockRefs || (BlockCount(cur) == 0 && d.holder == kNoHolder)) {
        return refuse(cur);
      }
      // Acquire on success: partner of the release store of `state` in
      // BodyAllocator allocation, so offset/length/capacity/data are visible.
    } while (!desc->state.compare_exchange_weak(cur, cur + 1, std::memory_order_seq_cst,
                                                std::memory_order_relaxed));
  }
  // We hold a reference: the descriptor cannot be reused under us now.
  // Check it against the handle and the arena before handing out the data.
  const uint64_t offset = desc->offset.load(std::memory_order_relaxed);
  const uint64_t capacity = desc->capacity.load(std::memory_order_relaxed);
  const uint64_t length = desc->length.load(std::memory_order_relaxed);
  const uint64_t arena_end = d.g.arena_offset + d.g.arena_size;
  const bool ok = offset == handle.offset && length == handle.length &&
                  capacity <= arena_end - handle.offset && handle.length <= capacity;
  if (!ok) {
    (void)ReleaseRef(handle, holder);
    return Status::Invalid("body segment '", name, "': block handle (offset ", handle.offset,
                           ", length ", handle.length, ") is inconsistent with descriptor ",
                           handle.descriptor, " (offset ", offset, ", length ", length,
                           ", capacity ", capacity, ")");
  }
  return BlockRef(this, handle,
                  std::span<const std::byte>(d.payload + handle.offset, handle.length), holder);
}

Status BodyReader::Release(const BlockHandle& handle) const {
  return ReleaseRef(handle, kNoHolder);
}

Status BodyReader::ReleaseRef(const BlockHandle& handle, uint32_t holder) const {
  const Impl& d = *impl_;
  const std::string& name = d.segment->name();
  ALKAID_RETURN_NOT_OK(CheckHandleBounds(handle, d.g, name));
  BlockDescriptorData* desc = d.DescriptorOf(handle.descriptor);
  if (holder != kNoHolder) {
    const uint64_t bit = uint64_t{1} << (holder % 64);
    // seq_cst (release semantics): our reads of the data happen before the
    // producer, whose seq_cst re-read of the holder words sees this, reuses
    // the space; also the first half of the Dekker pair with a producer
    // waiting for space (WakeSpaceWaiter).
    const uint64_t before = desc->holders[holder / 64].fetch_and(~bit, std::memory_order_seq_cst);
    if ((before & bit) == 0) {
      return Status::Invalid("body segment '", name, "': release of block at offset ",
                             handle.offset, " (descriptor ", handle.descriptor, ") by holder ",
                             holder, ", whose bit was not set");
    }
    WakeSpaceWaiter(d.header);
    return Status::OK();
  }
  uint64_t cur = desc->state.load(std::memory_order_relaxed);
  do {
    if (BlockGeneration(cur) != handle.generation || BlockCount(cur) == 0 || BlockReclaiming(cur)) {
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
  // Zero unless the producer waits, so a release makes no system call
  // otherwise.
  if (BlockCount(cur) <= 2) WakeSpaceWaiter(d.header);
  return Status::OK();
}

uint32_t BodyReader::holder() const { return impl_->holder; }

DeadHolderReport BodyReader::ReclaimDeadHolders(uint32_t pid) const {
  const Impl& d = *impl_;
  DeadHolderReport report;
  for (uint32_t h = 0; h < d.g.holder_count; ++h) {
    const int64_t released = d.ReclaimIfDead(h, pid);
    if (released < 0) continue;
    ++report.holders_reclaimed;
    report.references_released += static_cast<uint64_t>(released);
  }
  // The producer may be waiting for exactly this space.
  if (report.references_released > 0) {
    d.header->space_futex.fetch_add(1, std::memory_order_release);
    internal::FutexWakeAll(&d.header->space_futex);
  }
  return report;
}

const std::string& BodyReader::name() const { return impl_->segment->name(); }

}  // namespace alkaid::shm
