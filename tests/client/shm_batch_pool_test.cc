#include "alkaid/client/shm_batch_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "alkaid/format/builder.h"
#include "alkaid/format/builder_primitive.h"
#include "client_test_util.h"

namespace alkaid::client {
namespace {

using testing::Channel;

TEST(ShmBatchPoolTest, BuffersAreAlignedAndInsideTheRegion) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  ASSERT_OK_AND_ASSIGN(auto pool, ShmBatchPool::Create(ch.producer.get(), 4096));
  EXPECT_EQ(pool->region_size(), 4096u);
  EXPECT_EQ(pool->backend_name(), "shm:" + ch.name);
  ASSERT_OK_AND_ASSIGN(uint8_t * a, pool->Allocate(10));
  ASSERT_OK_AND_ASSIGN(uint8_t * b, pool->Allocate(0));
  ASSERT_OK_AND_ASSIGN(uint8_t * c, pool->Allocate(100, 8));
  for (uint8_t* p : {a, b, c}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    EXPECT_TRUE(pool->Contains(p, 1));
  }
  EXPECT_NE(a, b);
  EXPECT_EQ(pool->used_bytes(), 64u + 64u + 128u);
  EXPECT_EQ(pool->bytes_allocated(), 110);
  pool->Free(c, 100, 8);  // the last allocation gives its space back
  EXPECT_EQ(pool->used_bytes(), 128u);
  pool->Free(a, 10, 64);  // not the last: stays used
  EXPECT_EQ(pool->used_bytes(), 128u);
  ASSERT_RAISES(kInvalid, pool->Allocate(8, 128));
  ASSERT_RAISES(kInvalid, pool->Allocate(-1));
  ASSERT_RAISES(kOutOfMemory, pool->Allocate(8192));
  pool->Free(b, 0, 64);
}

TEST(ShmBatchPoolTest, LastAllocationGrowsInPlace) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  ASSERT_OK_AND_ASSIGN(auto pool, ShmBatchPool::Create(ch.producer.get(), 1024));
  ASSERT_OK_AND_ASSIGN(uint8_t * a, pool->Allocate(64));
  a[0] = 42;
  ASSERT_OK_AND_ASSIGN(uint8_t * grown, pool->Reallocate(a, 64, 512, 64));
  EXPECT_EQ(grown, a);
  EXPECT_EQ(pool->used_bytes(), 512u);
  ASSERT_OK_AND_ASSIGN(uint8_t * b, pool->Allocate(64));
  b[0] = 7;
  // `grown` is no longer the last: it moves, keeping its bytes.
  ASSERT_OK_AND_ASSIGN(uint8_t * moved, pool->Reallocate(grown, 512, 256, 64));
  EXPECT_NE(moved, grown);
  EXPECT_EQ(moved[0], 42);
  EXPECT_EQ(pool->used_bytes(), 512u + 64u + 256u);
  ASSERT_RAISES(kOutOfMemory, pool->Reallocate(moved, 256, 4096, 64));
  pool->Free(moved, 256);
  pool->Free(b, 64);
}

TEST(ShmBatchPoolTest, BuildersWriteIntoTheRegion) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  ASSERT_OK_AND_ASSIGN(auto pool, ShmBatchPool::Create(ch.producer.get(), 64 << 10));
  {
    format::Int64Builder builder(pool.get());
    ASSERT_OK(builder.Reserve(1000));
    for (int64_t i = 0; i < 1000; ++i) ASSERT_OK(builder.Append(i * 3));
    ASSERT_OK_AND_ASSIGN(auto array, builder.Finish());
    const auto& values = array->data()->buffers[1];
    ASSERT_NE(values, nullptr);
    EXPECT_TRUE(pool->Contains(values->data(), static_cast<uint64_t>(values->size())));
    EXPECT_GE(pool->bytes_allocated(), 8000);
  }
  EXPECT_EQ(pool->bytes_allocated(), 0);
  EXPECT_GE(pool->max_memory(), 8000);
}

TEST(ShmBatchPoolTest, RegionIsReleasedWithThePool) {
  Channel ch;
  ASSERT_OK(ch.Create(4096));
  ASSERT_OK_AND_ASSIGN(auto pool, ShmBatchPool::Create(ch.producer.get(), 2048));
  EXPECT_EQ(ch.producer->stats().blocks_live, 1u);
  pool.reset();
  ch.producer->Poll();  // takes back loans dropped (on any thread)
  EXPECT_EQ(ch.producer->stats().blocks_live, 0u);
  ASSERT_RAISES(kInvalid, ShmBatchPool::Create(ch.producer.get(), 0));
  ASSERT_RAISES(kInvalid, ShmBatchPool::Create(nullptr, 64));
}

// A batch may outlive its pool: its buffers hold the region, which keeps
// the block until the last of them goes (also on another thread), after
// the consumers returned it if it was published.
TEST(ShmBatchPoolTest, ABatchOutlivesItsPoolAndHoldsTheRegion) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  std::shared_ptr<format::Array> array;
  {
    ASSERT_OK_AND_ASSIGN(auto pool, ShmBatchPool::Create(ch.producer.get(), 64 << 10));
    format::Int64Builder builder(pool.get());
    ASSERT_OK(builder.Reserve(1000));
    for (int64_t i = 0; i < 1000; ++i) builder.UnsafeAppend(i * 3);
    ASSERT_OK_AND_ASSIGN(array, builder.Finish());
  }  // the pool goes first
  ch.producer->Poll();
  EXPECT_EQ(ch.producer->stats().blocks_live, 1u);  // held by the array's buffers
  // Fill the rest of the 1 MiB arena: the region is never handed out again.
  std::vector<shm::ChannelLoan> loans;
  for (int i = 0; i < 15; ++i) {
    ASSERT_OK_AND_ASSIGN(shm::ChannelLoan loan, ch.producer->Loan(64 << 10));
    std::memset(loan.data().data(), 0xff, loan.data().size());
    loans.push_back(std::move(loan));
  }
  const auto* values = array->data()->GetValues<int64_t>(1);
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(values[i], i * 3) << i;
  loans.clear();
  std::thread([&] { array.reset(); }).join();
  ch.producer->Poll();
  EXPECT_EQ(ch.producer->stats().blocks_live, 0u);
}

}  // namespace
}  // namespace alkaid::client
