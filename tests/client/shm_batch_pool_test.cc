#include "alkaid/client/shm_batch_pool.h"

#include <gtest/gtest.h>

#include <string>

#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/format/builder.h"
#include "alkaid/format/builder_nested.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/validate.h"
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

TEST(ShmBatchPoolTest, NoChannelOrNoBytesIsRefused) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "null channel", ShmBatchPool::Create(nullptr, 64));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "empty region", ShmBatchPool::Create(ch.producer.get(), 0));
  ASSERT_OK_AND_ASSIGN(auto publisher,
                       BatchPublisher::Create(ch.producer.get(), format::schema({})));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "empty region", publisher->NewPool(0));
}

// AllocateWithOwner: Allocate's bytes and the region (what shared_owner()
// hands out, the same count) in one call; an error hands out neither.
TEST(ShmBatchPoolTest, AllocateWithOwnerHandsOutTheRegion) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  ASSERT_OK_AND_ASSIGN(auto pool, ShmBatchPool::Create(ch.producer.get(), 1024));
  uint8_t* a = nullptr;
  std::shared_ptr<format::MemoryPool> owner;
  ASSERT_OK(pool->AllocateWithOwner(100, 64, &a, &owner));
  const std::shared_ptr<format::MemoryPool> shared = pool->shared_owner();
  ASSERT_NE(owner, nullptr);
  EXPECT_EQ(owner, shared);
  EXPECT_FALSE(owner.owner_before(shared) || shared.owner_before(owner));
  EXPECT_TRUE(pool->Contains(a, 100));
  EXPECT_EQ(pool->used_bytes(), 128u);
  EXPECT_EQ(pool->bytes_allocated(), 100);
  // Given back to the owner: the last allocation's space is free again.
  owner->Free(a, 100, 64);
  EXPECT_EQ(pool->used_bytes(), 0u);
  uint8_t* untouched = a;
  std::shared_ptr<format::MemoryPool> none;
  ASSERT_RAISES(kInvalid, pool->AllocateWithOwner(-1, 64, &untouched, &none));
  ASSERT_RAISES(kInvalid, pool->AllocateWithOwner(8, 128, &untouched, &none));
  ASSERT_RAISES(kOutOfMemory, pool->AllocateWithOwner(2048, 64, &untouched, &none));
  EXPECT_EQ(untouched, a);
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(pool->used_bytes(), 0u);
  // No bytes: 64 of its own, as Allocate gives.
  ASSERT_OK(pool->AllocateWithOwner(0, 64, &untouched, &none));
  EXPECT_EQ(pool->used_bytes(), 64u);
  none->Free(untouched, 0, 64);
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
  // The finished buffer shares the region's count and has none of its own
  // to give its bytes back by: they count until the region goes.
  EXPECT_GE(pool->bytes_allocated(), 8000);
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

// A builder holding bytes it has not finished holds the region too: the
// pool object may go first; the builder then finishes a column that keeps
// the region, or, destroyed on another thread, gives its bytes back and
// lets the block go.
TEST(ShmBatchPoolTest, ABuilderOutlivesItsPoolAndHoldsTheRegion) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  auto pool_or = ShmBatchPool::Create(ch.producer.get(), 64 << 10);
  ASSERT_OK(pool_or.status());
  std::unique_ptr<ShmBatchPool> pool = std::move(pool_or).ValueOrDie();
  auto finished = std::make_unique<format::Int64Builder>(pool.get());
  auto unfinished = std::make_unique<format::Int64Builder>(pool.get());
  ASSERT_OK(finished->Reserve(100));
  ASSERT_OK(unfinished->Reserve(100));
  for (int64_t i = 0; i < 100; ++i) {
    finished->UnsafeAppend(i);
    unfinished->UnsafeAppend(-i);
  }
  pool.reset();  // the builders' bytes hold the region
  ch.producer->Poll();
  EXPECT_EQ(ch.producer->stats().blocks_live, 1u);
  ASSERT_OK_AND_ASSIGN(auto array, finished->Finish());
  finished.reset();
  const auto* values = array->data()->GetValues<int64_t>(1);
  for (int64_t i = 0; i < 100; ++i) ASSERT_EQ(values[i], i) << i;
  std::thread([&] { unfinished.reset(); }).join();
  ch.producer->Poll();
  EXPECT_EQ(ch.producer->stats().blocks_live, 1u);  // the array's
  std::thread([&] { array.reset(); }).join();
  ch.producer->Poll();
  EXPECT_EQ(ch.producer->stats().blocks_live, 0u);
}

// Pools from BatchPublisher::NewPool: the block of a pool let go (its
// region's last holder gone) is taken again by the next NewPool; the loan
// itself goes back to the arena when the last holder goes, not when the
// block is taken again.
namespace recycling {

format::SchemaPtr Int64Schema(int columns) {
  std::vector<format::FieldPtr> fields;
  fields.reserve(static_cast<size_t>(columns));
  for (int c = 0; c < columns; ++c) {
    fields.push_back(format::field("c" + std::to_string(c), format::int64(), false));
  }
  return format::schema(std::move(fields));
}

// A batch of `columns` int64 columns of `rows` values (column c, row r:
// first + c * rows + r), built on `pool`.
format::RecordBatchPtr Build(ShmBatchPool* pool, const format::SchemaPtr& schema, int columns,
                             int64_t rows, int64_t first) {
  std::vector<format::ArrayPtr> arrays;
  for (int c = 0; c < columns; ++c) {
    format::Int64Builder b(pool);
    EXPECT_OK(b.Reserve(rows));
    for (int64_t r = 0; r < rows; ++r) b.UnsafeAppend(first + c * rows + r);
    arrays.push_back(b.Finish().ValueOrDie());
  }
  return format::RecordBatch::Make(schema, rows, arrays).ValueOrDie();
}

// True if `n` blocks are live once the producer took back those let go (a
// block goes back when its last holder goes, on that holder's thread).
bool BlocksLive(Channel& ch, uint64_t n) {
  ch.producer->Poll();
  return ch.producer->stats().blocks_live == n;
}

// The threads of this process.
int Threads() {
  int n = 0;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)t;
    ++n;
  }
  return n;
}

void ExpectValues(const format::RecordBatch& batch, int64_t first) {
  const int64_t rows = batch.num_rows();
  for (int c = 0; c < batch.num_columns(); ++c) {
    const int64_t* v = batch.column_data(c)->GetValues<int64_t>(1);
    for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(v[r], first + c * rows + r) << c << "," << r;
  }
}

TEST(ShmBatchPoolRecyclingTest, NewPoolTakesTheBlockOfAPoolLetGo) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  auto schema = Int64Schema(1);
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), schema));
  const void* first_pool = nullptr;
  {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(512));
    first_pool = pool.get();
    auto batch = Build(pool.get(), schema, 1, 64, 0);
    ch.producer->Poll();
    EXPECT_EQ(ch.producer->stats().blocks_live, 1u);
  }
  ch.producer->Poll();
  EXPECT_EQ(ch.producer->stats().blocks_live, 0u);  // the loan went with its last holder
  for (int64_t i = 1; i <= 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto again, publisher->NewPool(512));
    EXPECT_EQ(static_cast<const void*>(again.get()), first_pool);
    EXPECT_EQ(again->used_bytes(), 0u);
    EXPECT_FALSE(again->sealed());
    EXPECT_EQ(again->bytes_allocated(), 0);
    auto batch = Build(again.get(), schema, 1, 64, 100 * i);
    ASSERT_NO_FATAL_FAILURE(ExpectValues(*batch, 100 * i));
    ASSERT_OK(format::ValidateFull(*batch));
    ASSERT_OK(publisher->Publish(*batch, again.get()));
  }
}

// A batch, or a column of it, kept after its pool and its publish holds the
// region: its block is not taken again, its loan stays lent, and other
// pools come and go meanwhile; dropped on another thread, the loan goes
// back and the block is taken again. (A published block is also held by
// its slot until the slots come round to it: 8 slots here, lapped.)
TEST(ShmBatchPoolRecyclingTest, AColumnKeptAfterPublishHoldsItsRegion) {
  Channel ch;
  shm::ChannelOptions options;
  options.slot_count = 8;
  ASSERT_OK(ch.Create(1 << 20, options));
  auto schema = Int64Schema(2);
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), schema));
  format::ArrayPtr kept;
  const void* kept_pool = nullptr;
  {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(1024));
    kept_pool = pool.get();
    auto batch = Build(pool.get(), schema, 2, 64, 7);
    ASSERT_OK(publisher->Publish(*batch, pool.get()));
    kept = batch->column(1);
  }
  for (int64_t i = 0; i < 100; ++i) {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(1024));
    EXPECT_NE(static_cast<const void*>(pool.get()), kept_pool);
    auto batch = Build(pool.get(), schema, 2, 64, 1000 * (i + 1));
    ASSERT_OK(publisher->Publish(*batch, pool.get()));
    ASSERT_NO_FATAL_FAILURE(ExpectValues(*batch, 1000 * (i + 1)));
  }
  ch.producer->Poll();
  // The kept one, and those of the 8 slots.
  EXPECT_EQ(ch.producer->stats().blocks_live, 9u);
  const int64_t* v = kept->data()->GetValues<int64_t>(1);
  for (int64_t r = 0; r < 64; ++r) ASSERT_EQ(v[r], 7 + 64 + r);
  std::thread([&] { kept.reset(); }).join();
  EXPECT_TRUE(BlocksLive(ch, 8));
  // Both blocks are idle now; the one let go last is taken first.
  ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(1024));
  EXPECT_EQ(static_cast<const void*>(pool.get()), kept_pool);
}

// One builder pointed at each batch's pool (ArrayBuilder::ResetTo): each
// batch is written into its own region, and from the second on is made of
// the objects the block's first batch was (the same batch, array data and
// buffer objects, linked once), with this batch's values and addresses.
TEST(ShmBatchPoolRecyclingTest, ABuilderPointedAtEachPoolFindsTheObjectsLinked) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  auto schema = Int64Schema(1);
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), schema));
  format::Int64Builder b;
  const format::RecordBatch* first_batch = nullptr;
  const format::ArrayData* first_data = nullptr;
  const format::Buffer* first_values = nullptr;
  for (int64_t i = 0; i < 5; ++i) {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(512));
    ASSERT_OK(b.ResetTo(pool.get()));
    ASSERT_OK(b.Reserve(64));
    for (int64_t r = 0; r < 64; ++r) b.UnsafeAppend(100 * i + r);
    ASSERT_OK_AND_ASSIGN(auto array, b.Finish());
    ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(schema, 64, {array}));
    const auto& values = batch->column_data(0)->buffers[1];
    EXPECT_TRUE(pool->Contains(values->data(), 512));
    if (i == 0) {
      first_batch = batch.get();
      first_data = batch->column_data(0).get();
      first_values = values.get();
    }
    EXPECT_EQ(batch.get(), first_batch);
    EXPECT_EQ(batch->column_data(0).get(), first_data);
    EXPECT_EQ(values.get(), first_values);
    EXPECT_EQ(array->data().get(), first_data);
    ASSERT_OK(format::ValidateFull(*batch));
    ASSERT_NO_FATAL_FAILURE(ExpectValues(*batch, 100 * i));
    ASSERT_OK(publisher->Publish(*batch, pool.get()));
  }
  // Nested builders cannot be pointed elsewhere (yet): they say so.
  ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(512));
  format::ListBuilder list(format::list(format::int64()), std::make_unique<format::Int64Builder>());
  ASSERT_RAISES(kNotImplemented, list.ResetTo(pool.get()));
}

// RecordBatch::Make over the columns of the block's linked batch takes that
// batch only for the same schema object, the same row count and the
// schema's own type objects; anything else is checked as any batch is (a
// wrong row count refused, an equal schema object kept by the batch made).
TEST(ShmBatchPoolRecyclingTest, ALinkedBatchIsCheckedAsAnyOther) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  auto schema = Int64Schema(1);
  auto equal = Int64Schema(1);
  ASSERT_NE(schema, equal);
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), schema));
  format::Int64Builder b;
  for (int64_t i = 0; i < 6; ++i) {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(512));
    ASSERT_OK(b.ResetTo(pool.get()));
    ASSERT_OK(b.Reserve(64));
    for (int64_t r = 0; r < 64; ++r) b.UnsafeAppend(100 * i + r);
    ASSERT_OK_AND_ASSIGN(auto array, b.Finish());
    if (i == 3) {
      // The linked batch's shape, but the batch claims another row count.
      ASSERT_RAISES(kInvalid, format::RecordBatch::Make(schema, 63, {array}));
      continue;
    }
    if (i == 4) {
      // An equal schema of another object: the batch is made with it.
      ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(equal, 64, {array}));
      EXPECT_EQ(batch->schema(), equal);
      ASSERT_NO_FATAL_FAILURE(ExpectValues(*batch, 100 * i));
      continue;
    }
    ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(schema, 64, {array}));
    EXPECT_EQ(batch->schema(), schema);
    EXPECT_EQ(batch->num_rows(), 64);
    ASSERT_OK(format::ValidateFull(*batch));
    ASSERT_NO_FATAL_FAILURE(ExpectValues(*batch, 100 * i));
    ASSERT_OK(publisher->Publish(*batch, pool.get()));
  }
}

// A column copied from a batch (a pointer sharing the region's count, as
// the batch did) keeps the region's loan and bytes after the batch and the
// pool are gone, on any thread; once it goes the loan goes back, before
// the drop returns, and the block is taken again.
TEST(ShmBatchPoolRecyclingTest, AColumnCopiedFromABatchKeepsTheLoan) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  auto schema = Int64Schema(2);
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), schema));
  format::ArrayDataPtr column;
  const void* first_pool = nullptr;
  {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(1024));
    first_pool = pool.get();
    auto batch = Build(pool.get(), schema, 2, 64, 3);
    column = batch->column_data(1);
  }
  EXPECT_TRUE(BlocksLive(ch, 1));
  {
    ASSERT_OK_AND_ASSIGN(auto other, publisher->NewPool(1024));
    EXPECT_NE(static_cast<const void*>(other.get()), first_pool);
  }
  for (int64_t r = 0; r < 64; ++r) ASSERT_EQ(column->GetValues<int64_t>(1)[r], 3 + 64 + r);
  std::thread([&] { column.reset(); }).join();
  EXPECT_TRUE(BlocksLive(ch, 0));
  // Two idle blocks now (that one and the other's): the next two pools take both.
  ASSERT_OK_AND_ASSIGN(auto p1, publisher->NewPool(1024));
  ASSERT_OK_AND_ASSIGN(auto p2, publisher->NewPool(1024));
  EXPECT_TRUE(static_cast<const void*>(p1.get()) == first_pool ||
              static_cast<const void*>(p2.get()) == first_pool);
}

// Pools and batches may outlive their publisher: the blocks go when their
// last holder does (ASan and LSan see that nothing leaks or is used after
// it was freed).
TEST(ShmBatchPoolRecyclingTest, BatchesOutliveTheirPublisher) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  auto schema = Int64Schema(1);
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), schema));
  { ASSERT_OK_AND_ASSIGN(auto idle, publisher->NewPool(512)); }  // one block idle
  ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(512));
  auto batch = Build(pool.get(), schema, 1, 64, 5);
  ASSERT_OK(publisher->Publish(*batch, pool.get()));
  ASSERT_OK_AND_ASSIGN(auto unpublished, publisher->NewPool(512));
  auto other = Build(unpublished.get(), schema, 1, 64, 50);
  publisher.reset();
  pool.reset();
  unpublished.reset();
  ch.producer->Poll();
  EXPECT_EQ(ch.producer->stats().blocks_live, 2u);
  ASSERT_NO_FATAL_FAILURE(ExpectValues(*batch, 5));
  ASSERT_NO_FATAL_FAILURE(ExpectValues(*other, 50));
  other.reset();
  ch.producer->Poll();
  EXPECT_EQ(ch.producer->stats().blocks_live, 1u);
  std::thread([&] { batch.reset(); }).join();
  ch.producer->Poll();
  EXPECT_EQ(ch.producer->stats().blocks_live, 1u);  // the published one: its slot's
}

// A column, a buffer and a slice kept after their batch, pool, publisher
// and channel producer went, dropped on other threads: the values stay
// readable until the last of them goes (ASan: nothing read after it was
// freed, nothing leaks), and no thread is started to wait for them. With
// the producer kept, the block's loan goes back with the last drop.
TEST(ShmBatchPoolRecyclingTest, ColumnsOutliveTheirProducerWithoutAThread) {
  // A thread first: TSan's runtime starts a thread of its own with the
  // process's first one, which is not the library's.
  std::thread([] {}).join();
  const int threads = Threads();
  for (bool keep_producer : {true, false}) {
    Channel ch;
    ASSERT_OK(ch.Create(1 << 20));
    auto schema = Int64Schema(3);
    ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), schema));
    format::ArrayPtr column;
    std::shared_ptr<format::Buffer> values;
    format::RecordBatchPtr slice;
    for (int64_t i = 0; i < 3; ++i) {  // one block: the last batch's objects were linked
      ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(2048));
      auto batch = Build(pool.get(), schema, 3, 64, 1000 * i);
      if (i < 2) continue;
      column = batch->column(2);
      values = batch->column_data(0)->buffers[1];
      slice = batch->Slice(10, 5);
    }
    EXPECT_TRUE(BlocksLive(ch, 1));
    EXPECT_LE(Threads(), threads);
    publisher.reset();
    if (!keep_producer) ch.producer.reset();
    std::thread([&] { column.reset(); }).join();
    ASSERT_OK(format::ValidateFull(*slice));
    EXPECT_EQ(slice->column_data(1)->GetValues<int64_t>(1)[0], 2000 + 64 + 10);
    std::thread([&] { slice.reset(); }).join();
    EXPECT_EQ(reinterpret_cast<const int64_t*>(values->data())[63], 2000 + 63);
    if (keep_producer) {
      EXPECT_TRUE(BlocksLive(ch, 1));
    }
    std::thread([&] { values.reset(); }).join();
    if (keep_producer) {
      EXPECT_TRUE(BlocksLive(ch, 0));
    }
    EXPECT_LE(Threads(), threads);
  }
}

// A weak_ptr to a column of a built batch shares the region's count: it
// expires with the batch's last pointer (never locking onto a later batch
// made of the same objects), and holds the block and its loan until it
// goes too.
TEST(ShmBatchPoolRecyclingTest, AWeakPointerExpiresWithTheBatchAndHoldsItsBlock) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  auto schema = Int64Schema(1);
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), schema));
  std::weak_ptr<format::ArrayData> weak;
  {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(512));
    auto batch = Build(pool.get(), schema, 1, 64, 0);
    weak = batch->column_data(0);
  }
  EXPECT_TRUE(weak.expired());
  EXPECT_TRUE(BlocksLive(ch, 1));
  {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(512));  // another block
    auto batch = Build(pool.get(), schema, 1, 64, 100);
    EXPECT_EQ(weak.lock(), nullptr);
  }
  weak.reset();
  EXPECT_TRUE(BlocksLive(ch, 0));
}

// A batch whose objects do not fit the region's object memory (40 columns)
// takes the rest from the heap, and is whole.
TEST(ShmBatchPoolRecyclingTest, ObjectsPastTheObjectMemoryComeFromTheHeap) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  constexpr int kColumns = 40;
  auto schema = Int64Schema(kColumns);
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), schema));
  for (int round = 0; round < 3; ++round) {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(uint64_t{kColumns} * 16 * 8));
    auto batch = Build(pool.get(), schema, kColumns, 16, round);
    ASSERT_OK(format::ValidateFull(*batch));
    ASSERT_OK(publisher->Publish(*batch, pool.get()));
    pool.reset();
    ASSERT_NO_FATAL_FAILURE(ExpectValues(*batch, round));
  }
}

}  // namespace recycling

}  // namespace
}  // namespace alkaid::client
