// The producer's block table alone: plain private memory, no segment, no
// consumer, no slots. Offsets are the table's own (an arena at 4096 here).

#include "block_table_internal.h"
#include "free_ranges_internal.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace alkaid::shm::internal {
namespace {

constexpr uint64_t kArena = 4096;  // where the arena starts
constexpr uint64_t kArenaSize = 64 * 64;

// Takes and lends a block of `capacity` bytes; kNoBlock if none.
uint32_t Lend(BlockTable& table, uint64_t capacity) {
  const uint32_t d = table.TryTake(capacity);
  if (d != kNoBlock) table.Lend(d);
  return d;
}

// Holder bit words with the given holders set.
std::vector<uint64_t> Holders(std::initializer_list<uint32_t> ks) {
  std::vector<uint64_t> words(kHolderWords, 0);
  for (uint32_t k : ks) SetBit(words.data(), k);
  return words;
}

// FreeRanges against a model (one flag per unit): random takes and frees of
// random sizes, including frees next to free space on either side or both,
// so that ranges split and merge (their index nodes re-keyed in place).
// After each step: the free bytes, the largest range, and every take is the
// smallest free range that holds it (its start, the lowest such start on a
// tie), or none when no run of free units is long enough.
TEST(FreeRangesTest, SplitsAndMergesAgreeWithAModel) {
  constexpr uint64_t kUnits = 512;
  FreeRanges ranges;
  std::vector<bool> free(kUnits, true);
  ranges.Add(0, kUnits);
  struct Taken {
    uint64_t offset;
    uint64_t size;
  };
  std::vector<Taken> taken;
  std::mt19937_64 rng(42);
  // The model's maximal free runs as (size, offset).
  auto runs = [&] {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (uint64_t i = 0; i < kUnits;) {
      if (!free[i]) {
        ++i;
        continue;
      }
      uint64_t j = i;
      while (j < kUnits && free[j]) ++j;
      out.push_back({j - i, i});
      i = j;
    }
    return out;
  };
  for (int step = 0; step < 20000; ++step) {
    const bool take = taken.empty() || rng() % 2 == 0;
    if (take) {
      const uint64_t size = 1 + rng() % 24;
      auto model = runs();
      std::sort(model.begin(), model.end());
      const auto fit =
          std::lower_bound(model.begin(), model.end(), std::make_pair(size, uint64_t{0}));
      const std::optional<uint64_t> got = ranges.Take(size);
      if (fit == model.end()) {
        ASSERT_FALSE(got.has_value()) << "step " << step;
        continue;
      }
      ASSERT_TRUE(got.has_value()) << "step " << step;
      ASSERT_EQ(*got, fit->second) << "step " << step << ", size " << size;
      for (uint64_t u = *got; u < *got + size; ++u) free[u] = false;
      taken.push_back({*got, size});
    } else {
      const size_t i = rng() % taken.size();
      const Taken t = taken[i];
      taken[i] = taken.back();
      taken.pop_back();
      ranges.Add(t.offset, t.size);
      for (uint64_t u = t.offset; u < t.offset + t.size; ++u) free[u] = true;
    }
    const auto model = runs();
    uint64_t bytes = 0;
    uint64_t largest = 0;
    for (const auto& [size, offset] : model) {
      bytes += size;
      largest = std::max(largest, size);
    }
    ASSERT_EQ(ranges.free_bytes(), bytes) << "step " << step;
    ASSERT_EQ(ranges.largest(), largest) << "step " << step;
  }
  // Everything back: one range again, whole.
  for (const Taken& t : taken) ranges.Add(t.offset, t.size);
  EXPECT_EQ(ranges.largest(), kUnits);
  EXPECT_TRUE(ranges.TakeExact(0, kUnits));
  EXPECT_EQ(ranges.free_bytes(), 0u);
}

TEST(BlockTableTest, StartsWithEveryDescriptorAndTheWholeArenaFree) {
  BlockTable table(8, kArena, kArenaSize);
  EXPECT_EQ(table.size(), 8u);
  EXPECT_EQ(table.blocks_live(), 0u);
  EXPECT_EQ(table.free_bytes(), kArenaSize);
  EXPECT_EQ(table.free_range_bytes(), kArenaSize);
  EXPECT_EQ(table.largest_free_range(), kArenaSize);
  for (uint32_t d = 0; d < table.size(); ++d) EXPECT_EQ(table[d].state, BlockState::kFree);
}

TEST(BlockTableTest, LendCarvesSpaceInOrderAndGivesEachLoanANewGeneration) {
  BlockTable table(8, kArena, kArenaSize);
  const uint32_t a = Lend(table, 64);
  const uint32_t b = Lend(table, 128);
  ASSERT_NE(a, kNoBlock);
  ASSERT_NE(b, kNoBlock);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, 0u);  // the lowest descriptor first
  EXPECT_EQ(table[a].offset, kArena);
  EXPECT_EQ(table[a].capacity, 64u);
  EXPECT_EQ(table[b].offset, kArena + 64);
  EXPECT_EQ(table[b].capacity, 128u);
  EXPECT_EQ(table[a].state, BlockState::kLoaned);
  EXPECT_TRUE(table[a].loan_ref);
  EXPECT_FALSE(table[a].slot_ref);
  EXPECT_FALSE(table.AnyHolder(table[a]));
  EXPECT_EQ(table[a].generation, 1u);
  EXPECT_EQ(table[b].generation, 2u);
  EXPECT_EQ(table.blocks_live(), 2u);
  EXPECT_EQ(table.free_bytes(), kArenaSize - 192);
  EXPECT_EQ(table.largest_free_range(), kArenaSize - 192);
}

TEST(BlockTableTest, AnUnpublishedLoanDroppedIsCachedByCapacityAndReusedFirst) {
  BlockTable table(8, kArena, kArenaSize);
  const uint32_t a = Lend(table, 256);
  const uint32_t generation = table[a].generation;
  table.DropLoan(a, generation + 1);  // stale: ignored
  EXPECT_EQ(table[a].state, BlockState::kLoaned);
  table.DropLoan(a, generation);
  EXPECT_EQ(table[a].state, BlockState::kCached);
  EXPECT_EQ(table.blocks_live(), 0u);
  // Cached space is free, though not in the free ranges.
  EXPECT_EQ(table.free_bytes(), kArenaSize);
  EXPECT_EQ(table.free_range_bytes(), kArenaSize - 256);
  table.DropLoan(a, generation);  // a second drop of the same loan: ignored
  EXPECT_EQ(table.blocks_live(), 0u);

  EXPECT_EQ(table.TakeCached(128), kNoBlock);  // another capacity
  const uint32_t again = Lend(table, 256);
  EXPECT_EQ(again, a);
  EXPECT_EQ(table[again].offset, kArena);
  EXPECT_EQ(table[again].generation, generation + 1);
}

TEST(BlockTableTest, SizeClassesAreLastInFirstOut) {
  BlockTable table(8, kArena, kArenaSize);
  const uint32_t a = Lend(table, 64);
  const uint32_t b = Lend(table, 64);
  table.DropLoan(a, table[a].generation);
  table.DropLoan(b, table[b].generation);
  EXPECT_EQ(table.TakeCached(64), b);  // the warmest first
  EXPECT_EQ(table.TakeCached(64), a);
  EXPECT_EQ(table.TakeCached(64), kNoBlock);
}

TEST(BlockTableTest, APublishedBlockIsFreedWhenItsSlotTheLoanAndEveryHolderLetGo) {
  BlockTable table(8, kArena, kArenaSize);
  const uint32_t d = Lend(table, 64);
  const uint32_t g = table[d].generation;
  const auto holders = Holders({0, 3, 200});
  table.Publish(d, /*keep=*/true, holders.data());
  EXPECT_EQ(table[d].state, BlockState::kLive);
  EXPECT_TRUE(table[d].slot_ref);
  EXPECT_TRUE(table[d].loan_ref);
  EXPECT_EQ(table.HeldBy(3), 1u);
  EXPECT_EQ(table.HeldBy(4), 0u);

  EXPECT_TRUE(table.Return(0, d, g));
  EXPECT_FALSE(table.Return(0, d, g));  // not a holder any more
  EXPECT_TRUE(table.Return(200, d, g));
  table.DropSlotRef(d);
  table.DropLoan(d, g);
  EXPECT_EQ(table[d].state, BlockState::kLive);  // consumer 3 holds it
  EXPECT_EQ(table.blocks_live(), 1u);
  EXPECT_TRUE(table.Return(3, d, g));
  EXPECT_EQ(table[d].state, BlockState::kCached);
  EXPECT_EQ(table.blocks_live(), 0u);
}

TEST(BlockTableTest, WhatEveryHolderHoldsIsCountedInOnePassAsHeldByCountsIt) {
  BlockTable table(16, kArena, kArenaSize);
  const uint32_t a = Lend(table, 64);
  const uint32_t b = Lend(table, 128);
  const uint32_t c = Lend(table, 192);
  const uint32_t loaned = Lend(table, 64);  // not published: held by nobody
  const auto first = Holders({0, 3, 64, 255});
  const auto second = Holders({3, 64});
  const auto third = Holders({200});
  table.Publish(a, /*keep=*/false, first.data());
  table.Publish(b, /*keep=*/false, second.data());
  table.Publish(c, /*keep=*/false, third.data());
  EXPECT_TRUE(table.Return(200, c, table[c].generation));  // c: live by its slot alone
  std::vector<uint64_t> held(kMaxConsumers, 99);
  std::vector<uint64_t> bytes(kMaxConsumers, 99);
  table.HeldByEach(held, bytes);
  for (uint32_t k = 0; k < kMaxConsumers; ++k) {
    uint64_t expected_bytes = 0;
    EXPECT_EQ(held[k], table.HeldBy(k, &expected_bytes)) << "holder " << k;
    EXPECT_EQ(bytes[k], expected_bytes) << "holder " << k;
  }
  EXPECT_EQ(held[3], 2u);
  EXPECT_EQ(bytes[3], table[a].capacity + table[b].capacity);
  EXPECT_EQ(held[255], 1u);
  EXPECT_EQ(held[200], 0u);
  EXPECT_EQ(held[1], 0u);
  // Fewer holders asked for than the table knows: the others are left out.
  std::vector<uint64_t> few(4, 99);
  std::vector<uint64_t> few_bytes(4, 99);
  table.HeldByEach(few, few_bytes);
  EXPECT_EQ(few, (std::vector<uint64_t>{1, 0, 0, 2}));
  EXPECT_EQ(few_bytes[0], table[a].capacity);
  table.DropLoan(loaned, table[loaned].generation);
}

TEST(BlockTableTest, ReturnsThatNameNoHeldBlockAreRefused) {
  BlockTable table(8, kArena, kArenaSize);
  const uint32_t d = Lend(table, 64);
  const uint32_t g = table[d].generation;
  EXPECT_FALSE(table.Return(1, d, g));  // loaned, not live
  const auto holders = Holders({1});
  table.Publish(d, /*keep=*/false, holders.data());
  EXPECT_FALSE(table.Return(1, d, g + 1));         // another generation
  EXPECT_FALSE(table.Return(2, d, g));             // not a holder
  EXPECT_FALSE(table.Return(1, table.size(), g));  // not a descriptor
  EXPECT_FALSE(table.Return(1, kNoBlock, g));      // not a descriptor
  EXPECT_FALSE(table.Return(1, (d + 1) % 8, g));   // a free one
  EXPECT_EQ(table[d].state, BlockState::kLive);
  EXPECT_TRUE(TestBit(table[d].holders, 1));
  table.DropSlotRef(d);  // without a kept loan, the last holder frees it
  EXPECT_TRUE(table.Return(1, d, g));
  EXPECT_EQ(table[d].state, BlockState::kCached);
}

TEST(BlockTableTest, DroppingAHolderEverywhereFreesWhatOnlyItHeld) {
  BlockTable table(8, kArena, kArenaSize);
  const uint32_t a = Lend(table, 64);
  const uint32_t b = Lend(table, 64);
  const auto only5 = Holders({5});
  const auto both = Holders({5, 6});
  table.Publish(a, /*keep=*/false, only5.data());
  table.Publish(b, /*keep=*/false, both.data());
  table.DropSlotRef(a);
  table.DropSlotRef(b);
  EXPECT_EQ(table.HeldBy(5), 2u);
  table.DropHolderEverywhere(5);
  EXPECT_EQ(table.HeldBy(5), 0u);
  EXPECT_EQ(table[a].state, BlockState::kCached);
  EXPECT_EQ(table[b].state, BlockState::kLive);
  table.DropHolder(b, 5);  // not a holder: nothing
  EXPECT_EQ(table[b].state, BlockState::kLive);
  table.DropHolder(b, 6);
  EXPECT_EQ(table[b].state, BlockState::kCached);
  EXPECT_EQ(table.blocks_live(), 0u);
}

TEST(BlockTableTest, BeyondTheLastSizeClassSpaceGoesBackToTheRanges) {
  const uint32_t count = BlockTable::kMaxSizeClasses + 1;
  const uint64_t arena_size = 64 * 256;
  BlockTable table(count, kArena, arena_size);
  std::vector<uint32_t> lent;
  for (uint32_t i = 0; i < count; ++i) lent.push_back(Lend(table, 64 * (i + 1)));
  const uint64_t used = 64 * count * (count + 1) / 2;
  ASSERT_LE(used, arena_size);
  EXPECT_EQ(table.free_range_bytes(), arena_size - used);
  for (uint32_t d : lent) table.DropLoan(d, table[d].generation);
  // The first kMaxSizeClasses capacities are cached; the last is not.
  EXPECT_EQ(table[lent.back()].state, BlockState::kFree);
  EXPECT_EQ(table.free_range_bytes(), arena_size - used + 64 * count);
  EXPECT_EQ(table.free_bytes(), arena_size);
  for (uint32_t i = 0; i + 1 < count; ++i) EXPECT_EQ(table[lent[i]].state, BlockState::kCached);
}

TEST(BlockTableTest, FlushingTheClassesCoalescesTheArenaAgain) {
  BlockTable table(8, kArena, kArenaSize);
  std::vector<uint32_t> lent;
  for (uint64_t capacity : {64, 128, 64, 192}) lent.push_back(Lend(table, capacity));
  // Free in an order that leaves holes between cached blocks.
  for (uint32_t i : {2u, 0u, 3u, 1u}) table.DropLoan(lent[i], table[lent[i]].generation);
  EXPECT_EQ(table.free_bytes(), kArenaSize);
  EXPECT_LT(table.largest_free_range(), kArenaSize);
  table.FlushClasses();
  EXPECT_EQ(table.free_range_bytes(), kArenaSize);
  EXPECT_EQ(table.largest_free_range(), kArenaSize);  // one range: every neighbour merged
  for (uint32_t d : lent) EXPECT_EQ(table[d].state, BlockState::kFree);
  EXPECT_EQ(table.TakeCached(64), kNoBlock);
  const uint32_t whole = Lend(table, kArenaSize);
  ASSERT_NE(whole, kNoBlock);
  EXPECT_EQ(table[whole].offset, kArena);
}

TEST(BlockTableTest, ExhaustedByDescriptorsOrBySpace) {
  {
    BlockTable table(2, kArena, kArenaSize);
    EXPECT_NE(Lend(table, 64), kNoBlock);
    EXPECT_NE(Lend(table, 64), kNoBlock);
    EXPECT_EQ(table.TryTake(64), kNoBlock);  // space left, no descriptor
    EXPECT_EQ(table.free_range_bytes(), kArenaSize - 128);
  }
  {
    BlockTable table(8, kArena, 256);
    const uint32_t a = Lend(table, 192);
    EXPECT_EQ(table.TryTake(128), kNoBlock);  // a descriptor left, no space
    const uint32_t b = Lend(table, 64);
    ASSERT_NE(b, kNoBlock);
    EXPECT_EQ(table.free_bytes(), 0u);
    EXPECT_EQ(table.largest_free_range(), 0u);
    // A cached block of another capacity is not carved: it needs a flush.
    table.DropLoan(a, table[a].generation);
    EXPECT_EQ(table.TryTake(128), kNoBlock);
    table.FlushClasses();
    EXPECT_NE(table.TryTake(128), kNoBlock);
  }
}

}  // namespace
}  // namespace alkaid::shm::internal
