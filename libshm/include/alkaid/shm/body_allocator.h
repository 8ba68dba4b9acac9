#pragma once

/// \file
/// Message bodies in a producer's shared-memory segment.
///
/// A producer owns one body segment and is its only allocator: it carves
/// 64-byte-aligned blocks out of the segment, fills them, and shares their
/// BlockHandle (through a Ring slot, for instance). Each block carries a
/// reference count in shared memory. Consumers in any process take a
/// reference with BodyReader::Acquire() and drop it with Release(), in any
/// order; a block stays alive while any reference is held. The producer
/// notices blocks whose count fell to zero and reuses their space, so memory
/// use never exceeds the segment.
///
/// Consumers never touch the allocator's bookkeeping (it lives in the
/// producer's private heap); the only shared words they write are a block's
/// reference count and their own holder bit in it, so a hostile consumer can
/// shorten or lengthen the life of blocks but cannot corrupt the allocator,
/// and what a crashed one held by its holder bits is released exactly by
/// BodyReader::ReclaimDeadHolders(). Every handle coming from shared memory
/// is checked against the segment before use.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/shm/segment.h"

namespace alkaid::shm {

/// Alignment of every block's data, and the granularity of allocation.
inline constexpr uint64_t kBlockAlignment = 64;
/// Largest BodyAllocatorOptions::max_blocks.
inline constexpr uint32_t kMaxBlocks = uint32_t{1} << 24;
/// Readers of one body segment that hold blocks by holder bit at once (see
/// BodyReader); further readers take anonymous references.
inline constexpr uint32_t kMaxBodyHolders = 256;
/// BodyReader::holder() of a reader without a holder entry.
inline constexpr uint32_t kNoHolder = UINT32_MAX;

/// Names a block for consumers. Plain data: safe to copy into a ring slot.
///
/// `offset` is the position of the block's first data byte from the start
/// of the segment payload; `descriptor` is the entry of the segment's
/// descriptor table that holds the block's reference count; `generation`
/// changes with every allocation, so a stale handle is detected (and only
/// ever touches its descriptor, never body bytes) instead of reading
/// someone else's data.
struct BlockHandle {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t generation = 0;  ///< never 0 for a real block
  uint32_t descriptor = 0;  ///< index into the descriptor table

  bool valid() const { return generation != 0; }
  bool operator==(const BlockHandle&) const = default;
};

/// What Allocate() does when the segment has no room.
enum class FullPolicy : uint8_t {
  kError,  ///< fail at once with OutOfMemory
  kWait,   ///< wait up to BodyAllocatorOptions::wait_timeout, then TimedOut
};

/// Options for BodyAllocator::Create().
struct BodyAllocatorOptions {
  /// Behaviour when the segment is full. Default: wait (backpressure).
  FullPolicy full_policy = FullPolicy::kWait;
  /// Longest wait for space under FullPolicy::kWait. Default: 1 s.
  std::chrono::nanoseconds wait_timeout = std::chrono::seconds(1);
  /// Most blocks alive at once: the size of the descriptor table beside the
  /// arena (64 bytes per entry, not taken from the arena). When every
  /// descriptor is in use the arena counts as full. 0 (default): one per
  /// 4 KiB of arena, at least 256 and at most 65536. At most kMaxBlocks.
  uint32_t max_blocks = 0;
  /// Permissions of the segment.
  SegmentOptions segment;
};

/// Usage figures of an allocator. The counts are exact for the producer's
/// bookkeeping; how many of the in-use blocks consumers still hold is only
/// known at the next reclaim pass.
struct BodyAllocatorStats {
  uint64_t capacity_bytes = 0;      ///< arena size
  uint64_t in_use_bytes = 0;        ///< arena bytes of blocks not yet reclaimed
  uint64_t in_use_blocks = 0;       ///< blocks not yet reclaimed
  uint64_t largest_free_bytes = 0;  ///< largest contiguous free range
  uint64_t allocations = 0;         ///< successful Allocate() calls
  uint64_t reclaimed_blocks = 0;    ///< blocks whose space was reused
  uint64_t quarantined_blocks = 0;  ///< blocks never reused: their shared count was corrupt
  uint64_t max_blocks = 0;          ///< descriptor table entries
};

class BodyAllocator;

/// A block just allocated by the producer, holding the producer's reference.
///
/// Write the body into data(), then hand handle() to consumers (or move the
/// block into RingProducer::Publish, which keeps the reference until every
/// consumer has moved past the message). Destroying a WritableBlock, or
/// calling Release(), drops the producer's reference.
///
/// Owned by the producer thread; must not outlive its BodyAllocator.
class ALKAID_EXPORT WritableBlock {
 public:
  WritableBlock() = default;
  WritableBlock(WritableBlock&& other) noexcept;
  WritableBlock& operator=(WritableBlock&& other) noexcept;
  WritableBlock(const WritableBlock&) = delete;
  WritableBlock& operator=(const WritableBlock&) = delete;
  ~WritableBlock();

  /// The block's bytes (exactly the requested length).
  std::span<std::byte> data() const { return data_; }
  const BlockHandle& handle() const { return handle_; }
  bool valid() const { return allocator_ != nullptr; }

  /// Drops the producer's reference now. No-op on an empty block.
  void Release();
  /// Gives up ownership of the producer's reference without dropping it;
  /// the caller must later call BodyAllocator::Release(handle).
  BlockHandle Detach();

 private:
  friend class BodyAllocator;
  WritableBlock(BodyAllocator* allocator, BlockHandle handle, std::span<std::byte> data)
      : allocator_(allocator), handle_(handle), data_(data) {}

  BodyAllocator* allocator_ = nullptr;
  BlockHandle handle_;
  std::span<std::byte> data_;
};

/// The producer side: the only allocator of a body segment.
///
/// Thread safety: all methods must be called from one thread at a time (the
/// producer thread), in the process that created the allocator.
class ALKAID_EXPORT BodyAllocator {
 public:
  ~BodyAllocator();
  BodyAllocator(const BodyAllocator&) = delete;
  BodyAllocator& operator=(const BodyAllocator&) = delete;

  /// Creates body segment `name` with `arena_bytes` of block space (rounded
  /// up to kBlockAlignment; each block takes its length rounded up to 64,
  /// at least 64), plus the descriptor table.
  static Result<std::unique_ptr<BodyAllocator>> Create(std::string_view name, uint64_t arena_bytes,
                                                       const BodyAllocatorOptions& options = {});

  /// Allocates a block of `length` bytes (0 is allowed and still gets a
  /// distinct handle). CapacityError if it can never fit; when the arena is
  /// full, follows FullPolicy: OutOfMemory or, after waiting, TimedOut.
  Result<WritableBlock> Allocate(uint64_t length);

  /// Like Allocate() with FullPolicy::kError, whatever the options say.
  Result<WritableBlock> TryAllocate(uint64_t length);

  /// Adds `count` references to a live block the producer holds, e.g. on
  /// behalf of consumers it hands the block to directly.
  Status AddRef(const BlockHandle& handle, uint32_t count = 1);

  /// Drops one reference held by the producer (see WritableBlock::Detach).
  /// If it was the last one, the space is reusable at once.
  Status Release(const BlockHandle& handle);

  /// Reuses the space of every block whose shared count reached zero.
  /// Returns how many blocks were reclaimed. Allocate() calls it when needed.
  uint64_t Reclaim();

  /// Called by Allocate() before each retry when the arena is full, so that
  /// whoever holds producer references (a RingProducer) can drop those that
  /// are no longer needed. Replaces any previous callback; pass nullptr to
  /// clear.
  void SetReclaimCallback(std::function<void()> callback);

  BodyAllocatorStats stats() const;
  const std::string& name() const;
  const std::shared_ptr<Segment>& segment() const;

 private:
  struct Impl;
  explicit BodyAllocator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class BodyReader;

/// A reference to a block held by a consumer; releases it when destroyed.
///
/// Must not outlive the BodyReader that produced it. May be moved between
/// threads; not to be used from two threads at once.
class ALKAID_EXPORT BlockRef {
 public:
  BlockRef() = default;
  BlockRef(BlockRef&& other) noexcept;
  BlockRef& operator=(BlockRef&& other) noexcept;
  BlockRef(const BlockRef&) = delete;
  BlockRef& operator=(const BlockRef&) = delete;
  ~BlockRef();

  std::span<const std::byte> data() const { return data_; }
  const BlockHandle& handle() const { return handle_; }
  bool valid() const { return reader_ != nullptr; }
  /// Drops the reference now. No-op on an empty ref.
  void Release();

 private:
  friend class BodyReader;
  BlockRef(const BodyReader* reader, BlockHandle handle, std::span<const std::byte> data,
           uint32_t holder)
      : reader_(reader), handle_(handle), data_(data), holder_(holder) {}

  const BodyReader* reader_ = nullptr;
  BlockHandle handle_;
  std::span<const std::byte> data_;
  uint32_t holder_ = kNoHolder;  // kNoHolder: an anonymous (counted) reference
};

/// What BodyReader::ReclaimDeadHolders() did.
struct DeadHolderReport {
  uint32_t holders_reclaimed = 0;    ///< holder entries of dead processes freed
  uint64_t references_released = 0;  ///< block references (holder bits) they still held
};

/// The consumer side of a body segment, in any process.
///
/// Holders: Open() claims one of the segment's kMaxBodyHolders holder
/// entries (recording the process id) and frees it on destruction. A reader
/// with an entry holds each block it acquires by setting its own bit in the
/// block's descriptor, one atomic operation, so that if the process dies
/// (even in the middle of Acquire or a release) a third party can release
/// exactly the references it held: ReclaimDeadHolders(). A second
/// reference to a block the reader already holds, and every reference of a
/// reader that found no free entry (holder() == kNoHolder), is anonymous
/// (counted in the descriptor): leaked if the process dies. The ring's
/// consumers take one reference per message, so a BatchSubscriber only
/// holds by bit. The entry names the process that opened the reader: a
/// forked child must open its own reader rather than use an inherited one.
///
/// Thread safety: Acquire() and the release of BlockRefs may be called from
/// any thread concurrently; they only use atomic operations on shared memory.
class ALKAID_EXPORT BodyReader {
 public:
  ~BodyReader();
  BodyReader(const BodyReader&) = delete;
  BodyReader& operator=(const BodyReader&) = delete;

  /// Opens body segment `name` (checks the segment and allocator headers).
  static Result<std::unique_ptr<BodyReader>> Open(std::string_view name);

  /// Reads a body segment through an existing mapping, e.g. the producer's
  /// own (BodyAllocator::segment()) for a consumer in the same process.
  /// Checks the kind and the allocator header like Open(name).
  static Result<std::unique_ptr<BodyReader>> Open(std::shared_ptr<Segment> segment);

  /// Takes a reference to the block named by `handle` (typically read from a
  /// ring slot). Fails with Invalid if the handle points outside the arena
  /// or the descriptor table, or disagrees with its descriptor, and with
  /// KeyError if the block is gone or its descriptor was reused (stale
  /// generation).
  Result<BlockRef> Acquire(const BlockHandle& handle) const;

  /// Drops a reference taken by Acquire() without a BlockRef (for callers
  /// that store handles). Invalid if the handle is not a live block.
  Status Release(const BlockHandle& handle) const;

  /// This reader's holder entry, or kNoHolder.
  uint32_t holder() const;

  /// Releases everything held by readers of this segment whose processes
  /// died: for each holder entry whose process is gone (kill(pid, 0) fails
  /// with ESRCH) and, if `pid` is not 0, whose pid is `pid`, clears the
  /// holder's bit in every descriptor and frees the entry. The producer
  /// reuses those blocks once no other reference remains (its next
  /// Reclaim; a producer waiting for space is woken). Safe against a reader
  /// that died at any point of an acquire or release: a bit is set or not.
  /// May be called from any process (e.g. the broker), any number of times.
  /// Costs one pass over the descriptor table per dead holder.
  DeadHolderReport ReclaimDeadHolders(uint32_t pid = 0) const;

  const std::string& name() const;

 private:
  friend class BlockRef;
  Status ReleaseRef(const BlockHandle& handle, uint32_t holder) const;
  struct Impl;
  explicit BodyReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace alkaid::shm
