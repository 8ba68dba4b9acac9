// ObjectMemory (object_memory.h) under a pool of the test's own: the objects
// builders and RecordBatch::Make create are made in its slots, share the
// count of the pool's owner (so does everything taken from a batch: the
// links hold no count), are linked once and found linked by the next use;
// the memory is released when the last pointer into it goes, on that
// thread, and no thread is started for it; other shapes, overflow, objects
// linked to another pool and a closed memory fall back correctly.

#include "alkaid/format/object_memory.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/format/builder.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/validate.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

// A heap pool with an ObjectMemory, as ShmBatchPool's region: each use has
// an owner (the pool's shared_owner, which builders hold for their bytes
// and the objects share); when its last holder goes, the memory is
// released, and `released` counts the releases that completed. The
// owner's count is made in the pool (at the same address each use, as a
// region's: the objects stay linked from one use to the next).
//
// As a region does, the pool gives back the bytes of every buffer made in a
// use when the use is released (the object memory's buffer objects have no
// count of their own to give them back by: object_memory.h); the bytes
// freed before (a builder's growth and Reset) go back at once.
class RecyclingPool : public SystemMemoryPool {
 public:
  ~RecyclingPool() override { FreeAll(); }
  ObjectMemory* object_memory() override { return &objects_; }
  std::shared_ptr<MemoryPool> shared_owner() override { return owner_.lock(); }

  Result<uint8_t*> Allocate(int64_t size, int64_t alignment) override {
    ALKAID_ASSIGN_OR_RAISE(uint8_t * p, SystemMemoryPool::Allocate(size, alignment));
    std::lock_guard<std::mutex> lock(mutex_);
    live_[p] = size;
    return p;
  }
  Result<uint8_t*> Reallocate(uint8_t* ptr, int64_t old_size, int64_t new_size,
                              int64_t alignment) override {
    ALKAID_ASSIGN_OR_RAISE(uint8_t * p,
                           SystemMemoryPool::Reallocate(ptr, old_size, new_size, alignment));
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(ptr);
    live_[p] = new_size;
    return p;
  }
  void Free(uint8_t* ptr, int64_t size, int64_t alignment) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_.erase(ptr);
    }
    SystemMemoryPool::Free(ptr, size, alignment);
  }
  using SystemMemoryPool::Allocate;
  using SystemMemoryPool::Free;

  // A use of the pool: the caller's reference to its owner. The last use
  // must be released (as ShmBatchPool lends a block only when it is).
  std::shared_ptr<MemoryPool> Open() {
    EXPECT_EQ(released(), opened_) << "a use opened before the last one was released";
    ++opened_;
    std::shared_ptr<MemoryPool> owner(static_cast<MemoryPool*>(this), LetGoOfOwner{this},
                                      CountAllocator<MemoryPool>(this));
    owner_ = owner;
    objects_.Open(owner);
    return owner;
  }
  int released() const { return released_.load(); }
  // Bytes of buffers not given back yet.
  size_t live_buffers() {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.size();
  }

 private:
  // The owner's count fell to zero: the pool's own weak reference goes
  // (the count's block is freed after).
  struct LetGoOfOwner {
    RecyclingPool* pool;
    void operator()(MemoryPool* /*p*/) const { pool->owner_.reset(); }
  };
  // The owner's count, in count_; freeing it releases the use.
  template <typename T>
  struct CountAllocator {
    using value_type = T;
    RecyclingPool* pool;
    explicit CountAllocator(RecyclingPool* p) : pool(p) {}
    template <typename U>
    explicit CountAllocator(const CountAllocator<U>& o) : pool(o.pool) {}
    T* allocate(size_t n) {
      static_assert(sizeof(T) <= sizeof(count_), "the count fits");
      EXPECT_EQ(n, 1u);
      return static_cast<T*>(static_cast<void*>(pool->count_));
    }
    void deallocate(T* /*p*/, size_t /*n*/) noexcept {
      pool->objects_.Close();
      pool->FreeAll();
      pool->released_.fetch_add(1);
    }
    template <typename U>
    bool operator==(const CountAllocator<U>& o) const {
      return pool == o.pool;
    }
  };

  // Gives back every allocation still live (the use's buffers).
  void FreeAll() {
    std::map<uint8_t*, int64_t> live;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live.swap(live_);
    }
    for (const auto& [p, size] : live) SystemMemoryPool::Free(p, size, kBufferAlignment);
  }

  std::mutex mutex_;
  std::map<uint8_t*, int64_t> live_;
  alignas(std::max_align_t) std::byte count_[96];
  ObjectMemory objects_;
  std::weak_ptr<MemoryPool> owner_;
  int opened_ = 0;
  std::atomic<int> released_{0};
};

// The threads of this process.
int Threads() {
  int n = 0;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)t;
    ++n;
  }
  return n;
}

SchemaPtr Int64Columns(int n) {
  std::vector<FieldPtr> fields;
  for (int c = 0; c < n; ++c) fields.push_back(field("c" + std::to_string(c), int64(), false));
  return schema(std::move(fields));
}

// A batch of `columns` int64 columns of 8 rows: column c holds first + 8c + r.
RecordBatchPtr Build(MemoryPool* pool, const SchemaPtr& of, int columns, int64_t first) {
  std::vector<ArrayPtr> arrays;
  for (int c = 0; c < columns; ++c) {
    Int64Builder b(pool);
    EXPECT_OK(b.Reserve(8));
    for (int64_t r = 0; r < 8; ++r) b.UnsafeAppend(first + 8 * c + r);
    arrays.push_back(b.Finish().ValueOrDie());
  }
  return RecordBatch::Make(of, 8, arrays).ValueOrDie();
}

void ExpectValues(const RecordBatch& batch, int64_t first) {
  ASSERT_OK(ValidateFull(batch));
  for (int c = 0; c < batch.num_columns(); ++c) {
    const int64_t* v = batch.column_data(c)->GetValues<int64_t>(1);
    for (int64_t r = 0; r < 8; ++r) ASSERT_EQ(v[r], first + 8 * c + r) << c << "," << r;
  }
}

// The batch and everything made for it share the owner's count: the owner
// goes with the batch, the memory is released at once (quiet), and the
// next use finds the same objects, linked to each other as before.
TEST(ObjectMemoryTest, ObjectsShareTheOwnersCountAndStayLinked) {
  RecyclingPool pool;
  const SchemaPtr two = Int64Columns(2);
  const ArrayData* first_data = nullptr;
  const RecordBatch* first_batch = nullptr;
  const Buffer* first_values = nullptr;
  for (int64_t use = 0; use < 4; ++use) {
    std::shared_ptr<MemoryPool> owner = pool.Open();
    auto batch = Build(&pool, two, 2, 1000 * use);
    ASSERT_NO_FATAL_FAILURE(ExpectValues(*batch, 1000 * use));
    if (use == 0) {
      first_data = batch->column_data(0).get();
      first_batch = batch.get();
      first_values = batch->column_data(0)->buffers[1].get();
    }
    EXPECT_EQ(batch->column_data(0).get(), first_data);
    EXPECT_EQ(batch.get(), first_batch);
    EXPECT_EQ(batch->column_data(0)->buffers[1].get(), first_values);
    EXPECT_EQ(batch->metadata(), nullptr);
    EXPECT_EQ(owner.use_count(), 2);  // the caller's and the batch's: one count
    owner.reset();
    EXPECT_EQ(pool.released(), use);  // the batch holds it
    batch.reset();
    EXPECT_EQ(pool.released(), use + 1);
  }
}

// A column copied from a batch (a copy of a link: it shares the owner's
// count) keeps the memory when the batch and the owner are gone, and the
// values stay readable; so do a slice and a batch with metadata made from
// it. Dropped on another thread, the memory is released there.
TEST(ObjectMemoryTest, PointersTakenFromABatchKeepTheMemory) {
  RecyclingPool pool;
  const SchemaPtr two = Int64Columns(2);
  int released = 0;
  for (int how = 0; how < 3; ++how) {
    std::shared_ptr<MemoryPool> owner = pool.Open();
    auto batch = Build(&pool, two, 2, 100 * how);
    ArrayDataPtr column;
    RecordBatchPtr derived;
    if (how == 0) column = batch->column_data(1);
    if (how == 1) derived = batch->Slice(2, 5);
    if (how == 2)
      derived = batch->WithMetadata(std::make_shared<KeyValueMetadata>(
          std::vector<std::pair<std::string, std::string>>{{"k", "v"}}));
    batch.reset();
    owner.reset();
    EXPECT_EQ(pool.released(), released);
    if (column != nullptr) {
      EXPECT_EQ(column->GetValues<int64_t>(1)[7], 100 * how + 8 + 7);
    } else {
      ASSERT_OK(ValidateFull(*derived));
      EXPECT_EQ(derived->column_data(0)->GetValues<int64_t>(1)[0], 100 * how + (how == 1 ? 2 : 0));
    }
    std::thread([&] {
      column.reset();
      derived.reset();
    }).join();
    ++released;
    EXPECT_EQ(pool.released(), released);  // on that thread, before join returned
  }
}

// column(i) of a batch made in the memory makes its array per call (a
// boxed one would hold the owner's count from the reused batch, and the
// memory would never be released): the owner goes with the batch and the
// column, and each call's array is a new one, holding the owner as any
// pointer taken from the batch does.
TEST(ObjectMemoryTest, ColumnsOfABatchInTheMemoryAreMadePerCall) {
  RecyclingPool pool;
  const SchemaPtr two = Int64Columns(2);
  for (int64_t use = 0; use < 3; ++use) {
    std::shared_ptr<MemoryPool> owner = pool.Open();
    auto batch = Build(&pool, two, 2, 10 * use);
    ArrayPtr column = batch->column(1);
    EXPECT_NE(batch->column(1).get(), column.get());
    EXPECT_EQ(std::static_pointer_cast<Int64Array>(column)->Value(3), 10 * use + 8 + 3);
    owner.reset();
    batch.reset();
    EXPECT_EQ(pool.released(), use) << "the column holds the owner";
    EXPECT_EQ(std::static_pointer_cast<Int64Array>(column)->Value(7), 10 * use + 8 + 7);
    column.reset();
    EXPECT_EQ(pool.released(), use + 1);
  }
}

// Uses of different shapes in turn (slots that held an array data now hold
// a buffer object, more columns than slots, strings with three buffers):
// every batch is whole, objects past the last slot come from the heap, and
// every use is released.
TEST(ObjectMemoryTest, OtherShapesAndOverflowAreWhole) {
  RecyclingPool pool;
  int uses = 0;
  for (int round = 0; round < 4; ++round) {
    for (int columns : {1, 3, 12, 2}) {  // 12 columns: 37 objects, 24 slots
      std::shared_ptr<MemoryPool> owner = pool.Open();
      auto batch = Build(&pool, Int64Columns(columns), columns, round * 100 + columns);
      owner.reset();
      ASSERT_NO_FATAL_FAILURE(ExpectValues(*batch, round * 100 + columns));
      batch.reset();
      ++uses;
      EXPECT_EQ(pool.released(), uses);
    }
    std::shared_ptr<MemoryPool> owner = pool.Open();
    StringBuilder s(&pool);
    ASSERT_OK(s.Append("linked"));
    ASSERT_OK(s.AppendNull());
    ASSERT_OK(s.Append("slots"));
    ASSERT_OK_AND_ASSIGN(auto strings, s.Finish());
    ASSERT_OK_AND_ASSIGN(auto batch, RecordBatch::Make(schema({field("s", utf8())}), 3,
                                                       std::vector<ArrayPtr>{strings}));
    owner.reset();
    ASSERT_OK(ValidateFull(*batch));
    EXPECT_EQ(batch->column_data(0)->null_count, 1);
    EXPECT_EQ(batch->column(0)->ToString(), strings->ToString());
    batch.reset();
    strings.reset();
    ++uses;
    EXPECT_EQ(pool.released(), uses);
  }
}

// A batch of columns from two pools is made on the heap (its links would
// leave either memory), holds both, and both are released when it goes.
TEST(ObjectMemoryTest, ABatchOfTwoPoolsIsMadeOnTheHeap) {
  RecyclingPool a;
  RecyclingPool b;
  std::shared_ptr<MemoryPool> owner_a = a.Open();
  std::shared_ptr<MemoryPool> owner_b = b.Open();
  auto one = Build(&a, Int64Columns(1), 1, 10);
  auto two = Build(&b, Int64Columns(1), 1, 20);
  ASSERT_OK_AND_ASSIGN(auto both,
                       RecordBatch::Make(Int64Columns(2), 8, {one->column(0), two->column(0)}));
  one.reset();
  two.reset();
  owner_a.reset();
  owner_b.reset();
  EXPECT_EQ(both->column_data(1)->GetValues<int64_t>(1)[0], 20);
  EXPECT_EQ(a.released() + b.released(), 0);
  both.reset();
  EXPECT_EQ(a.released(), 1);
  EXPECT_EQ(b.released(), 1);
}

// Finish of a fixed-width builder whose objects the block's last use left
// linked fills them in (ArrayBuilder::FinishLinked): the array is whole and
// of its type's class whatever the uses before it made in those slots (an
// int64 array, an array data of another type finished alone, nulls), and
// the builder is empty after.
TEST(ObjectMemoryTest, AnArrayFinishedIntoLinkedObjectsIsOfItsTypesClass) {
  RecyclingPool pool;
  ArrayPtr a;
  const auto use = [&](const TypePtr& type, bool nulls, bool data_only) -> ArrayPtr {
    a.reset();  // the last use's array: the memory is idle again
    std::shared_ptr<MemoryPool> owner = pool.Open();
    std::unique_ptr<ArrayBuilder> b = MakeBuilder(type, &pool).ValueOrDie();
    for (int r = 0; r < 8; ++r) {
      if (nulls && r % 3 == 1) {
        EXPECT_OK(b->AppendNull());
      } else {
        EXPECT_OK(b->AppendEmptyValue());
      }
    }
    if (data_only) {
      EXPECT_OK(b->FinishData().status());
      return nullptr;
    }
    ArrayPtr made = b->Finish().ValueOrDie();
    EXPECT_EQ(b->length(), 0);
    return made;
  };
  for (int round = 0; round < 3; ++round) {
    a = use(int64(), false, false);
    ASSERT_NE(std::dynamic_pointer_cast<Int64Array>(a), nullptr);
    ASSERT_OK(ValidateFull(*a));
    a = use(int64(), false, false);  // linked now
    ASSERT_NE(std::dynamic_pointer_cast<Int64Array>(a), nullptr);
    EXPECT_EQ(a->null_count(), 0);
    a = use(int64(), true, false);
    ASSERT_OK(ValidateFull(*a));
    EXPECT_EQ(a->null_count(), 3);
    EXPECT_TRUE(a->IsNull(1));
    use(float64(), false, true);  // an array data of another type, no array
    a = use(float64(), false, false);
    ASSERT_NE(std::dynamic_pointer_cast<DoubleArray>(a), nullptr) << a->type()->ToString();
    ASSERT_OK(ValidateFull(*a));
    a = use(float64(), false, false);
    ASSERT_NE(std::dynamic_pointer_cast<DoubleArray>(a), nullptr);
    a = use(int32(), false, false);
    ASSERT_NE(std::dynamic_pointer_cast<Int32Array>(a), nullptr);
    EXPECT_EQ(a->length(), 8);
  }
}

// Two builders of one use on two threads at once (the cursor hands each
// object's slot to one maker; the linked paths claim their slots before
// they look at them): every batch is whole, use after use. Under
// ThreadSanitizer, also free of data races.
TEST(ObjectMemoryTest, BuildersOnTwoThreadsShareAUse) {
  RecyclingPool pool;
  const SchemaPtr two = Int64Columns(2);
  for (int use = 0; use < 200; ++use) {
    std::shared_ptr<MemoryPool> owner = pool.Open();
    ArrayPtr columns[2];
    auto build = [&](int c) {
      Int64Builder b(&pool);
      EXPECT_OK(b.Reserve(8));
      for (int64_t r = 0; r < 8; ++r) b.UnsafeAppend(use * 100 + 8 * c + r);
      columns[c] = b.Finish().ValueOrDie();
    };
    std::thread other(build, 1);
    build(0);
    other.join();
    ASSERT_OK_AND_ASSIGN(auto batch, RecordBatch::Make(two, 8, {columns[0], columns[1]}));
    ASSERT_NO_FATAL_FAILURE(ExpectValues(*batch, use * 100));
    batch.reset();
    columns[0].reset();
    columns[1].reset();
    owner.reset();
    EXPECT_EQ(pool.released(), use + 1);
  }
}

// The links between the objects hold no count of the owner; every pointer
// copied from one holds one (and gives it back when it goes). A link that
// held a count would keep the owner for ever (the memory never released);
// one copied without a count would let the memory go under its holder.
TEST(ObjectMemoryTest, LinksHoldNoCount) {
  RecyclingPool pool;
  const SchemaPtr two = Int64Columns(2);
  for (int use = 0; use < 3; ++use) {
    std::shared_ptr<MemoryPool> owner = pool.Open();
    auto batch = Build(&pool, two, 2, use);
    EXPECT_EQ(owner.use_count(), 2);  // the caller's and the batch's
    {
      ArrayPtr column = batch->column(1);
      std::shared_ptr<Buffer> values = batch->column_data(0)->buffers[1];
      ArrayDataPtr data = column->data();
      EXPECT_EQ(owner.use_count(), 5);
      RecordBatchPtr slice = batch->Slice(1, 3);  // heap objects of counted copies
      EXPECT_GT(owner.use_count(), 5);
    }
    EXPECT_EQ(owner.use_count(), 2);
    batch.reset();
    EXPECT_EQ(owner.use_count(), 1);
    owner.reset();
    EXPECT_EQ(pool.released(), use + 1);
    EXPECT_EQ(pool.live_buffers(), 0u);
  }
}

// The last pointer into a use releases it, on the thread that drops it:
// a column, a buffer and a slice kept after the batch and the owner went,
// dropped on other threads one after the other; the memory goes with the
// last of them (its buffers given back before the drop returns), and no
// thread of the library's ever runs (a sweeper would be one more task of
// this process while the memory is held).
TEST(ObjectMemoryTest, TheLastDropReleasesOnItsThreadAndNoThreadStarts) {
  // A thread first: TSan's runtime starts a thread of its own with the
  // process's first one, which is not the library's.
  std::thread([] {}).join();
  const int threads = Threads();
  RecyclingPool pool;
  const SchemaPtr three = Int64Columns(3);
  for (int use = 0; use < 3; ++use) {
    std::shared_ptr<MemoryPool> owner = pool.Open();
    auto batch = Build(&pool, three, 3, 10 * use);
    ArrayPtr column = batch->column(2);
    std::shared_ptr<Buffer> values = batch->column_data(1)->buffers[1];
    RecordBatchPtr slice = batch->Slice(4, 2);
    batch.reset();
    owner.reset();
    EXPECT_EQ(pool.released(), use);
    EXPECT_GT(pool.live_buffers(), 0u);
    EXPECT_LE(Threads(), threads);  // nothing started to wait for them
    std::thread([&] { column.reset(); }).join();
    std::thread([&] { slice.reset(); }).join();
    EXPECT_EQ(pool.released(), use);
    EXPECT_EQ(reinterpret_cast<const int64_t*>(values->data())[3], 10 * use + 8 + 3);
    std::thread([&] { values.reset(); }).join();
    EXPECT_EQ(pool.released(), use + 1);  // before the drop's thread was joined
    EXPECT_EQ(pool.live_buffers(), 0u);
    EXPECT_LE(Threads(), threads);
  }
}

// A memory that is not open makes nothing: the objects come from the heap.
TEST(ObjectMemoryTest, AClosedMemoryLeavesObjectsToTheHeap) {
  RecyclingPool pool;
  auto batch = Build(&pool, Int64Columns(1), 1, 5);
  ASSERT_NO_FATAL_FAILURE(ExpectValues(*batch, 5));
  EXPECT_EQ(pool.released(), 0);
}

}  // namespace
}  // namespace alkaid::format
