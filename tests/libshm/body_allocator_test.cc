#include "alkaid/shm/body_allocator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "body_layout_internal.h"
#include "shm_test_util.h"
#include "test_util.h"

namespace alkaid::shm {
namespace {

using testing::CheckPattern;
using testing::FillPattern;
using testing::ShmTest;

class BodyAllocatorTest : public ShmTest {
 protected:
  void Make(uint64_t arena, FullPolicy policy = FullPolicy::kError,
            std::chrono::milliseconds timeout = std::chrono::milliseconds(50)) {
    name_ = NewName("bodies");
    BodyAllocatorOptions options;
    options.full_policy = policy;
    options.wait_timeout = timeout;
    ASSERT_OK_AND_ASSIGN(alloc_, BodyAllocator::Create(name_, arena, options));
    ASSERT_OK_AND_ASSIGN(reader_, BodyReader::Open(name_));
  }

  std::string name_;
  std::unique_ptr<BodyAllocator> alloc_;
  std::unique_ptr<BodyReader> reader_;
};

TEST_F(BodyAllocatorTest, BlocksAreAlignedAndReadableFromAnotherMapping) {
  Make(64 * 1024);
  for (uint64_t len : {0, 1, 63, 64, 65, 1000}) {
    ASSERT_OK_AND_ASSIGN(auto block, alloc_->Allocate(len));
    ASSERT_EQ(block.data().size(), len);
    EXPECT_EQ(block.handle().offset % kBlockAlignment, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(block.data().data()) % kBlockAlignment, 0u);
    EXPECT_NE(block.handle().generation, 0u);
    FillPattern(len, block.data());
    ASSERT_OK_AND_ASSIGN(auto ref, reader_->Acquire(block.handle()));
    ASSERT_EQ(ref.data().size(), len);
    EXPECT_TRUE(CheckPattern(len, ref.data()));
    EXPECT_NE(ref.data().data(), block.data().data());  // the reader's own mapping
  }
}

TEST_F(BodyAllocatorTest, ABlockStaysAliveWhileAConsumerHoldsIt) {
  Make(4096);
  ASSERT_OK_AND_ASSIGN(auto block, alloc_->Allocate(100));
  FillPattern(5, block.data());
  ASSERT_OK_AND_ASSIGN(auto ref, reader_->Acquire(block.handle()));
  const BlockHandle handle = block.handle();
  block.Release();  // the producer lets go first
  EXPECT_EQ(alloc_->Reclaim(), 0u);
  EXPECT_EQ(alloc_->stats().in_use_blocks, 1u);
  EXPECT_TRUE(CheckPattern(5, ref.data()));
  ref.Release();
  EXPECT_EQ(alloc_->Reclaim(), 1u);
  EXPECT_EQ(alloc_->stats().in_use_blocks, 0u);
  // The count reached zero: nobody can resurrect the block.
  ASSERT_RAISES_WITH_MESSAGE(kKeyError, "already released", reader_->Acquire(handle));
}

TEST_F(BodyAllocatorTest, OutOfOrderReleaseFreesEverythingAndCoalesces) {
  Make(64 * 1024);
  std::vector<BlockRef> refs;
  std::mt19937 rng(7);
  uint64_t i = 0;
  while (true) {
    auto block = alloc_->TryAllocate(std::uniform_int_distribution<uint64_t>(1, 900)(rng));
    if (!block.ok()) {
      ASSERT_TRUE(block.status().IsOutOfMemory()) << block.status();
      break;
    }
    FillPattern(i++, block->data());
    ASSERT_OK_AND_ASSIGN(auto ref, reader_->Acquire(block->handle()));
    refs.push_back(std::move(ref));
  }  // the producer's references are dropped as the blocks go out of scope
  ASSERT_GT(refs.size(), 40u);
  std::shuffle(refs.begin(), refs.end(), rng);
  for (std::size_t k = 0; k < refs.size(); ++k) {
    refs[k].Release();
    if (k % 7 == 0) alloc_->Reclaim();
  }
  alloc_->Reclaim();
  const auto stats = alloc_->stats();
  EXPECT_EQ(stats.in_use_blocks, 0u);
  EXPECT_EQ(stats.in_use_bytes, 0u);
  EXPECT_EQ(stats.largest_free_bytes, stats.capacity_bytes);  // fully coalesced
  // The whole arena is one block again.
  ASSERT_OK(alloc_->TryAllocate(stats.capacity_bytes - 64));
}

// Interleaved allocations and releases, FIFO (a stream) and random (slow
// consumers), checked against a model of the arena: live blocks never
// overlap, and every free path of the bookkeeping (a range growing in place
// at either end, two ranges joined, a range used up exactly and its nodes
// reused) ends with the whole arena as one range again.
TEST_F(BodyAllocatorTest, FreeRangesStayConsistentUnderStreamAndRandomRelease) {
  Make(256 * 1024);
  std::mt19937 rng(11);
  struct Held {
    BlockHandle handle;
    uint64_t begin, end;
    uint64_t seed;
  };
  std::vector<Held> held;  // allocation order
  std::vector<WritableBlock> blocks;
  auto overlaps_any = [&](uint64_t begin, uint64_t end) {
    for (const Held& h : held) {
      if (begin < h.end && h.begin < end) return true;
    }
    return false;
  };
  uint64_t allocated = 0;
  for (int round = 0; round < 4000; ++round) {
    const bool stream = (round / 500) % 2 == 0;  // phases: FIFO, then random
    const uint64_t len = stream ? 576 : std::uniform_int_distribution<uint64_t>(1, 3000)(rng);
    auto block = alloc_->TryAllocate(len);
    if (block.ok()) {
      const BlockHandle h = block->handle();
      const uint64_t begin = h.offset;
      const uint64_t end = begin + std::max<uint64_t>(64, (len + 63) / 64 * 64);
      ASSERT_FALSE(overlaps_any(begin, end)) << "round " << round << " offset " << begin;
      FillPattern(round, block->data());
      held.push_back({h, begin, end, static_cast<uint64_t>(round)});
      blocks.push_back(std::move(*block));
      ++allocated;
    } else {
      ASSERT_TRUE(block.status().IsOutOfMemory()) << block.status();
    }
    // Release one block: the oldest in a stream phase, any in a random one
    // (more often when the arena is full).
    const bool release = !held.empty() && (!block.ok() || rng() % 3 != 0 || held.size() > 100);
    if (release) {
      const std::size_t k =
          stream ? 0 : std::uniform_int_distribution<std::size_t>(0, held.size() - 1)(rng);
      // Nothing else was carved out of its space meanwhile.
      ASSERT_TRUE(CheckPattern(held[k].seed, blocks[k].data())) << "round " << round;
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(k));
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
    }
    const auto stats = alloc_->stats();
    ASSERT_EQ(stats.in_use_blocks, held.size()) << "round " << round;
  }
  EXPECT_GT(allocated, 3000u);
  blocks.clear();
  held.clear();
  const auto stats = alloc_->stats();
  EXPECT_EQ(stats.in_use_blocks, 0u);
  EXPECT_EQ(stats.in_use_bytes, 0u);
  EXPECT_EQ(stats.largest_free_bytes, stats.capacity_bytes);
  ASSERT_OK(alloc_->TryAllocate(stats.capacity_bytes));
}

// Reclaim walks the live blocks oldest first and frees exactly those whose
// references are gone, leaving the others (and their order) intact.
TEST_F(BodyAllocatorTest, ReclaimFreesOnlyUnreferencedBlocksAnywhereInTheLiveList) {
  Make(64 * 1024);
  std::vector<BlockRef> refs;
  std::vector<BlockHandle> handles;
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK_AND_ASSIGN(auto block, alloc_->Allocate(1000));
    handles.push_back(block.handle());
    ASSERT_OK_AND_ASSIGN(auto ref, reader_->Acquire(block.handle()));
    refs.push_back(std::move(ref));
  }  // only the reader's references are left
  for (int i : {0, 4, 9}) refs[static_cast<std::size_t>(i)].Release();  // head, middle, tail
  EXPECT_EQ(alloc_->Reclaim(), 3u);
  EXPECT_EQ(alloc_->stats().in_use_blocks, 7u);
  EXPECT_EQ(alloc_->Reclaim(), 0u);
  for (int i : {1, 8, 5}) refs[static_cast<std::size_t>(i)].Release();
  EXPECT_EQ(alloc_->Reclaim(), 3u);
  refs.clear();
  EXPECT_EQ(alloc_->Reclaim(), 4u);
  const auto stats = alloc_->stats();
  EXPECT_EQ(stats.in_use_blocks, 0u);
  EXPECT_EQ(stats.largest_free_bytes, stats.capacity_bytes);
  // Every released handle is stale now.
  for (const BlockHandle& h : handles) ASSERT_RAISES(kKeyError, reader_->Acquire(h));
}

// A body segment asked to use huge pages (rounded up to whole 2 MiB pages)
// works like any other, whether or not the kernel gave them.
TEST_F(BodyAllocatorTest, HugePageSegmentsWorkWithOrWithoutHugePages) {
  name_ = NewName("bodies");
  BodyAllocatorOptions options;
  options.full_policy = FullPolicy::kError;
  options.segment.huge_pages = HugePages::kTry;
  ASSERT_OK_AND_ASSIGN(alloc_, BodyAllocator::Create(name_, 3 << 20, options));
  EXPECT_EQ(alloc_->segment()->mapped_size() % (2u << 20), 0u);
  EXPECT_EQ(alloc_->segment()->huge_pages(), alloc_->segment()->huge_pages_error().empty());
  ASSERT_OK_AND_ASSIGN(reader_, BodyReader::Open(name_));
  EXPECT_EQ(alloc_->stats().capacity_bytes, uint64_t{3} << 20);  // the arena asked for
  ASSERT_OK_AND_ASSIGN(auto big, alloc_->Allocate((3 << 20) - 4096));
  FillPattern(3, big.data());
  ASSERT_OK_AND_ASSIGN(auto ref, reader_->Acquire(big.handle()));
  EXPECT_TRUE(CheckPattern(3, ref.data()));
  ASSERT_RAISES(kOutOfMemory, alloc_->TryAllocate(8192));
  // The huge pages themselves: where obtained, the arena is mapped by PMD
  // entries (ShmemPmdMapped in /proc/self/smaps covers it) in the
  // producer's mapping and the reader's; where not, the reason is given
  // and the test says it did not see huge pages.
  if (alloc_->segment()->huge_pages()) {
    EXPECT_GE(testing::ShmemPmdMappedKb(big.data().data()), 2048);
    EXPECT_GE(testing::ShmemPmdMappedKb(ref.data().data()), 2048);
  } else {
    const std::string why = alloc_->segment()->huge_pages_error();
    EXPECT_NE(why.find("MADV_COLLAPSE"), std::string::npos) << why;
    GTEST_SKIP() << "no huge pages on this machine (the fallback to 4 KiB pages was checked): "
                 << why;
  }
}

TEST_F(BodyAllocatorTest, FullArenaInErrorModeIsOutOfMemory) {
  Make(4096, FullPolicy::kError);
  ASSERT_OK_AND_ASSIGN(auto a, alloc_->Allocate(2000));
  ASSERT_OK_AND_ASSIGN(auto b, alloc_->Allocate(1500));
  ASSERT_RAISES_WITH_MESSAGE(kOutOfMemory, "is full", alloc_->Allocate(1000));
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "cannot fit", alloc_->Allocate(5000));
  a.Release();
  ASSERT_OK(alloc_->Allocate(1000));
}

TEST_F(BodyAllocatorTest, FullArenaInWaitModeTimesOutThenProceedsWhenReleased) {
  Make(4096, FullPolicy::kWait, std::chrono::milliseconds(50));
  ASSERT_OK_AND_ASSIGN(auto a, alloc_->Allocate(3000));
  ASSERT_OK_AND_ASSIGN(auto ref, reader_->Acquire(a.handle()));
  a.Release();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_RAISES_WITH_MESSAGE(kTimedOut, "after waiting", alloc_->Allocate(3000));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));

  // A consumer thread releases while the producer waits: an allocator
  // that waits up to 60 s, so that the verdict does not depend on how soon
  // the thread runs (the 10 ms only make the wait likely to have begun).
  ref.Release();
  Make(4096, FullPolicy::kWait, std::chrono::seconds(60));
  ASSERT_OK_AND_ASSIGN(auto b, alloc_->Allocate(3000));
  ASSERT_OK_AND_ASSIGN(auto held, reader_->Acquire(b.handle()));
  b.Release();
  std::thread consumer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    held.Release();
  });
  auto result = alloc_->Allocate(3000);
  consumer.join();
  ASSERT_OK(result);
}

TEST_F(BodyAllocatorTest, ReclaimCallbackRunsBeforeGivingUp) {
  Make(4096, FullPolicy::kError);
  ASSERT_OK_AND_ASSIGN(auto a, alloc_->Allocate(3000));
  const BlockHandle held = a.Detach();  // e.g. a ring holding the producer reference
  int calls = 0;
  alloc_->SetReclaimCallback([&] {
    ++calls;
    ASSERT_OK(alloc_->Release(held));
  });
  ASSERT_OK(alloc_->Allocate(3000));
  EXPECT_EQ(calls, 1);
}

TEST_F(BodyAllocatorTest, StaleHandlesAreDetectedAfterReuse) {
  Make(4096);
  BlockHandle old;
  {
    ASSERT_OK_AND_ASSIGN(auto a, alloc_->Allocate(100));
    old = a.handle();
  }
  ASSERT_OK_AND_ASSIGN(auto b, alloc_->Allocate(100));  // same space, new generation
  ASSERT_EQ(b.handle().offset, old.offset);
  ASSERT_NE(b.handle().generation, old.generation);
  // The old descriptor is free (count 0), the new block has another one.
  ASSERT_NE(b.handle().descriptor, old.descriptor);
  ASSERT_RAISES_WITH_MESSAGE(kKeyError, "already released", reader_->Acquire(old));
  ASSERT_RAISES(kInvalid, reader_->Release(old));
  // A handle with the old generation but the new descriptor: stale.
  BlockHandle mixed = b.handle();
  mixed.generation = old.generation;
  ASSERT_RAISES_WITH_MESSAGE(kKeyError, "stale", reader_->Acquire(mixed));
  ASSERT_OK(reader_->Acquire(b.handle()));
}

TEST_F(BodyAllocatorTest, HostileHandlesNeverReachOutsideTheArena) {
  Make(4096);
  ASSERT_OK_AND_ASSIGN(auto a, alloc_->Allocate(256));
  const BlockHandle good = a.handle();
  auto with = [&](uint64_t offset, uint64_t length, uint32_t gen) {
    return BlockHandle{offset, length, gen, good.descriptor};
  };
  ASSERT_RAISES(kInvalid, reader_->Acquire(with(good.offset, good.length, 0)));
  ASSERT_RAISES(kInvalid, reader_->Acquire(with(good.offset + 8, good.length, good.generation)));
  ASSERT_RAISES(kInvalid, reader_->Acquire(with(0, 10, good.generation)));
  ASSERT_RAISES(kInvalid, reader_->Acquire(with(1ULL << 40, 10, good.generation)));
  ASSERT_RAISES(kInvalid, reader_->Acquire(with(UINT64_MAX - 63, 10, good.generation)));
  ASSERT_RAISES(kInvalid, reader_->Acquire(with(good.offset, UINT64_MAX, good.generation)));
  ASSERT_RAISES(kInvalid, reader_->Acquire(with(good.offset, 4096, good.generation)));
  // Inside the arena but a longer length than the block: refused, and the
  // count is left as it was.
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "inconsistent",
                             reader_->Acquire(with(good.offset, 300, good.generation)));
  // Pointing into the middle of the data: the descriptor disagrees.
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "inconsistent with descriptor",
                             reader_->Acquire(with(good.offset + 64, 10, good.generation)));
  // A descriptor index past the table.
  BlockHandle far = good;
  far.descriptor = 1u << 30;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "past the table", reader_->Acquire(far));
  ASSERT_RAISES(kInvalid, reader_->Release(far));
  // Another (unused) descriptor: its state is (0, 0).
  BlockHandle other = good;
  other.descriptor = good.descriptor + 1;
  ASSERT_RAISES_WITH_MESSAGE(kKeyError, "stale", reader_->Acquire(other));
  // None of these left a reference behind.
  a.Release();
  EXPECT_EQ(alloc_->stats().in_use_blocks, 0u);
}

TEST_F(BodyAllocatorTest, CorruptSharedCountQuarantinesTheBlock) {
  Make(4096);
  ASSERT_OK_AND_ASSIGN(auto a, alloc_->Allocate(100));
  const BlockHandle h = a.Detach();
  // Scribble over the descriptor's state word.
  auto* descriptors = reinterpret_cast<internal::BlockDescriptorData*>(
      alloc_->segment()->payload() + internal::kBodyArenaHeaderSize);
  descriptors[h.descriptor].state.store(0xDEADBEEF00000000ULL);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "quarantined", alloc_->Release(h));
  EXPECT_EQ(alloc_->stats().quarantined_blocks, 1u);
  EXPECT_EQ(alloc_->Reclaim(), 0u);
}

TEST_F(BodyAllocatorTest, StaleHandlesOnlyTouchTheirDescriptor) {
  // The race that a header inside the arena made possible: a consumer holds
  // a handle whose block was reclaimed and whose space now holds another
  // block's data, written with plain stores. Its acquire attempt must fail
  // by looking at the descriptor alone, whatever the data bytes are, even
  // data that imitates the old block's (generation, count) word.
  Make(4096);
  BlockHandle old;
  {
    ASSERT_OK_AND_ASSIGN(auto a, alloc_->Allocate(4096));
    old = a.handle();
  }
  ASSERT_OK_AND_ASSIGN(auto b, alloc_->Allocate(4096));
  ASSERT_EQ(b.handle().offset, old.offset);
  ASSERT_NE(b.handle().descriptor, old.descriptor);
  const uint64_t imitation = internal::PackBlockState(old.generation, 1);
  for (std::size_t i = 0; i + 8 <= b.data().size(); i += 8) {
    std::memcpy(b.data().data() + i, &imitation, 8);
  }
  ASSERT_RAISES_WITH_MESSAGE(kKeyError, "already released", reader_->Acquire(old));
  ASSERT_RAISES(kInvalid, reader_->Release(old));
  // The new block's bytes are untouched.
  for (std::size_t i = 0; i + 8 <= b.data().size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, b.data().data() + i, 8);
    ASSERT_EQ(word, imitation) << "at byte " << i;
  }
  ASSERT_OK(reader_->Acquire(b.handle()));
}

TEST_F(BodyAllocatorTest, DescriptorTableBoundsLiveBlocks) {
  name_ = NewName("bodies");
  BodyAllocatorOptions options;
  options.full_policy = FullPolicy::kError;
  options.max_blocks = 3;
  ASSERT_OK_AND_ASSIGN(alloc_, BodyAllocator::Create(name_, 64 * 1024, options));
  EXPECT_EQ(alloc_->stats().max_blocks, 3u);
  ASSERT_OK_AND_ASSIGN(auto a, alloc_->Allocate(10));
  ASSERT_OK_AND_ASSIGN(auto b, alloc_->Allocate(10));
  ASSERT_OK_AND_ASSIGN(auto c, alloc_->Allocate(10));
  ASSERT_RAISES_WITH_MESSAGE(kOutOfMemory, "descriptors are in use", alloc_->Allocate(10));
  const uint32_t freed = b.handle().descriptor;
  b.Release();
  ASSERT_OK_AND_ASSIGN(auto d, alloc_->Allocate(10));
  EXPECT_EQ(d.handle().descriptor, freed);  // the only free descriptor
  options.max_blocks = kMaxBlocks + 1;
  ASSERT_RAISES(kInvalid, BodyAllocator::Create(NewName("bodies"), 4096, options));
}

TEST_F(BodyAllocatorTest, AddRefCountsExtraHolders) {
  Make(4096);
  ASSERT_OK_AND_ASSIGN(auto a, alloc_->Allocate(64));
  ASSERT_OK(alloc_->AddRef(a.handle(), 2));
  const BlockHandle h = a.handle();
  a.Release();
  ASSERT_OK(reader_->Release(h));
  EXPECT_EQ(alloc_->Reclaim(), 0u);
  ASSERT_OK(reader_->Release(h));
  EXPECT_EQ(alloc_->Reclaim(), 1u);
  ASSERT_RAISES(kInvalid, reader_->Release(h));
}

TEST_F(BodyAllocatorTest, ReaderRefusesAForeignSegment) {
  const std::string name = NewName();
  ASSERT_OK_AND_ASSIGN(auto seg, Segment::Create(name, 4096, SegmentKind::kBodies));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "arena magic", BodyReader::Open(name));
  ASSERT_RAISES(kInvalid, BodyAllocator::Create(NewName(), 0));
}

}  // namespace
}  // namespace alkaid::shm
