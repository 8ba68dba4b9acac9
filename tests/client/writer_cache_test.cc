// WriterCache: which row counts get a writer, and the idle writers by row
// count (client/writer_cache.h). Without sanitizers (whose runtimes define
// the operators themselves), global operator new is replaced in this
// executable to count allocations (tests/support/counting_new.h).

#include "alkaid/client/writer_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#if ALKAID_COUNT_ALLOCATIONS
#include "counting_new.h"
#endif

namespace alkaid::client {
namespace {

// What the C ABI keeps per writer: an object owned through a pointer.
struct Held {
  int64_t rows;
  int begins = 0;
};
using Cache = WriterCache<std::unique_ptr<Held>>;

Status CountBegin(std::unique_ptr<Held>& held) {
  ++held->begins;
  return Status::OK();
}

TEST(WriterCacheTest, AWriterIsWantedForARowCountSeenAmongTheLastEight) {
  Cache cache;
  EXPECT_FALSE(cache.ShouldMake(64));  // first time: a count seen once
  EXPECT_TRUE(cache.ShouldMake(64));   // back again
  // Eight other counts push 64 out of the remembered ones.
  for (int64_t rows = 1; rows <= 8; ++rows) EXPECT_FALSE(cache.ShouldMake(rows * 1000));
  EXPECT_FALSE(cache.ShouldMake(64));
  EXPECT_TRUE(cache.ShouldMake(8000));  // the last of the eight is still there
  // Nothing is remembered before the first count: not even a count of -1
  // or 0 (the slots' initial values) is "seen".
  Cache fresh;
  EXPECT_FALSE(fresh.ShouldMake(0));
  Cache negative;
  EXPECT_FALSE(negative.ShouldMake(-1));
}

TEST(WriterCacheTest, AtMostEightWritersAreMade) {
  Cache cache;
  for (int i = 0; i < Cache::kMaxMade; ++i) {
    const int64_t rows = 100 + i;
    EXPECT_FALSE(cache.ShouldMake(rows));
    ASSERT_TRUE(cache.ShouldMake(rows)) << "writer " << i;
    cache.Made();
  }
  EXPECT_EQ(cache.made(), Cache::kMaxMade);
  EXPECT_FALSE(cache.ShouldMake(500));
  EXPECT_FALSE(cache.ShouldMake(500));  // seen, but no more writers
}

TEST(WriterCacheTest, TheNewestIdleItemOfTheRowsIsTakenAfterItsBeginSucceeded) {
  Cache cache;
  auto first = std::make_unique<Held>(Held{64});
  auto second = std::make_unique<Held>(Held{64});
  Held* newest = second.get();
  cache.Keep(64, std::move(first));
  cache.Keep(128, std::make_unique<Held>(Held{128}));
  cache.Keep(64, std::move(second));
  auto taken = cache.TakeIdle(64, CountBegin);
  ASSERT_TRUE(taken.ok());
  ASSERT_TRUE(taken->has_value());
  EXPECT_EQ((**taken).get(), newest);
  EXPECT_EQ((**taken)->begins, 1);
  EXPECT_EQ(cache.idle(), 2u);
  auto none = cache.TakeIdle(32, CountBegin);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(WriterCacheTest, AnItemWhoseBeginFailsStaysIdleAndItsErrorIsReturned) {
  Cache cache;
  cache.Keep(64, std::make_unique<Held>(Held{64}));
  auto failed = cache.TakeIdle(64, [](std::unique_ptr<Held>& held) {
    ++held->begins;
    return Status::TimedOut("no space in time");
  });
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kTimedOut);
  EXPECT_EQ(cache.idle(), 1u);
  auto again = cache.TakeIdle(64, CountBegin);
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((**again)->begins, 2);  // the same item, tried twice
  EXPECT_EQ(cache.idle(), 0u);
}

TEST(WriterCacheTest, AtMostFourWaitAndTheOldestGoesFirst) {
  Cache cache;
  for (int64_t rows = 1; rows <= 6; ++rows) cache.Keep(rows, std::make_unique<Held>(Held{rows}));
  EXPECT_EQ(cache.idle(), Cache::kMaxIdle);
  for (int64_t rows = 1; rows <= 2; ++rows) {
    auto gone = cache.TakeIdle(rows, CountBegin);
    ASSERT_TRUE(gone.ok());
    EXPECT_FALSE(gone->has_value()) << rows << " rows should have been let go";
  }
  for (int64_t rows = 3; rows <= 6; ++rows) {
    auto kept = cache.TakeIdle(rows, CountBegin);
    ASSERT_TRUE(kept.ok() && kept->has_value()) << rows;
    EXPECT_EQ((**kept)->rows, rows);
  }
  cache.Keep(7, std::make_unique<Held>(Held{7}));
  cache.Clear();
  EXPECT_EQ(cache.idle(), 0u);
}

#if ALKAID_COUNT_ALLOCATIONS
TEST(WriterCacheTest, KeepingTakingAndDecidingAllocateNothing) {
  Cache cache;
  auto item = std::make_unique<Held>(Held{64});
  Held* const held = item.get();
  const uint64_t before = counting_new::g_allocations.load();
  for (int i = 0; i < 1000; ++i) {
    (void)cache.ShouldMake(64 + i % 3);
    cache.Keep(64, std::move(item));  // the newest: the two below push out older ones
    cache.Keep(65 + i % 2, nullptr);
    cache.Keep(67, nullptr);
    auto taken = cache.TakeIdle(64, [](std::unique_ptr<Held>&) { return Status::OK(); });
    ASSERT_TRUE(taken.ok() && taken->has_value()) << "round " << i;
    item = std::move(**taken);
  }
  EXPECT_EQ(counting_new::g_allocations.load() - before, 0u);
  EXPECT_EQ(item.get(), held);
}
#endif

}  // namespace
}  // namespace alkaid::client
