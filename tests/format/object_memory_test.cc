// ObjectMemory (object_memory.h) under a pool of the test's own: the objects
// builders and RecordBatch::Make create are made in its slots, hold its
// owner while they live, are parked when dropped and taken back by the next
// use; other shapes, overflow and a closed memory fall back correctly.

#include "alkaid/format/object_memory.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/format/builder.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/validate.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

// A heap pool with an ObjectMemory, opened over an owner whose last holder
// closes it (as ShmBatchPool's region does).
class RecyclingPool : public SystemMemoryPool {
 public:
  ObjectMemory* object_memory() override { return &objects_; }

  // A use of the pool: the owner the objects hold. Closed when its last
  // holder (the caller's copy, or an object made since) goes.
  std::shared_ptr<void> Open() {
    std::shared_ptr<void> owner(static_cast<void*>(this), [this](void*) {
      objects_.Close();
      ++closed_;
    });
    objects_.Open(owner);
    return owner;
  }
  int closed() const { return closed_; }

 private:
  ObjectMemory objects_;
  int closed_ = 0;
};

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

// The objects of a batch hold the owner: it is closed when the last of them
// goes (here a column kept after the batch, dropped on another thread), and
// the next use gets the same (parked) array data and batch objects back.
TEST(ObjectMemoryTest, ObjectsHoldTheOwnerAndAreTakenBackByTheNextUse) {
  RecyclingPool pool;
  const SchemaPtr two = Int64Columns(2);
  const ArrayData* first_data = nullptr;
  const RecordBatch* first_batch = nullptr;
  ArrayDataPtr kept;
  {
    std::shared_ptr<void> owner = pool.Open();
    auto batch = Build(&pool, two, 2, 100);
    ASSERT_NO_FATAL_FAILURE(ExpectValues(*batch, 100));
    first_data = batch->column_data(0).get();
    first_batch = batch.get();
    kept = batch->column_data(1);
    EXPECT_GT(owner.use_count(), 1);  // the objects' holds
  }
  EXPECT_EQ(pool.closed(), 0);  // the kept column holds it
  EXPECT_EQ(kept->GetValues<int64_t>(1)[7], 100 + 8 + 7);
  std::thread([&] { kept.reset(); }).join();
  EXPECT_EQ(pool.closed(), 1);
  for (int64_t use = 1; use <= 3; ++use) {
    std::shared_ptr<void> owner = pool.Open();
    auto batch = Build(&pool, two, 2, 1000 * use);
    ASSERT_NO_FATAL_FAILURE(ExpectValues(*batch, 1000 * use));
    EXPECT_EQ(batch->column_data(0).get(), first_data);
    EXPECT_EQ(batch.get(), first_batch);
    EXPECT_EQ(batch->metadata(), nullptr);
    owner.reset();
    EXPECT_EQ(pool.closed(), use);  // the batch still holds it
    batch.reset();
    EXPECT_EQ(pool.closed(), use + 1);
  }
}

// Uses of different shapes in turn (slots that held an array data now hold
// a buffer object, more columns than slots, strings with three buffers):
// every batch is whole, and objects past the last slot come from the heap.
TEST(ObjectMemoryTest, OtherShapesAndOverflowAreWhole) {
  RecyclingPool pool;
  for (int round = 0; round < 4; ++round) {
    for (int columns : {1, 3, 12, 2}) {  // 12 columns: 37 objects, 24 slots
      std::shared_ptr<void> owner = pool.Open();
      auto batch = Build(&pool, Int64Columns(columns), columns, round * 100 + columns);
      owner.reset();
      ASSERT_NO_FATAL_FAILURE(ExpectValues(*batch, round * 100 + columns));
    }
    std::shared_ptr<void> owner = pool.Open();
    StringBuilder s(&pool);
    ASSERT_OK(s.Append("parked"));
    ASSERT_OK(s.AppendNull());
    ASSERT_OK(s.Append("slots"));
    ASSERT_OK_AND_ASSIGN(auto strings, s.Finish());
    ASSERT_OK_AND_ASSIGN(auto batch, RecordBatch::Make(schema({field("s", utf8())}), 3,
                                                       std::vector<ArrayPtr>{strings}));
    owner.reset();
    ASSERT_OK(ValidateFull(*batch));
    EXPECT_EQ(batch->column_data(0)->null_count, 1);
    EXPECT_EQ(batch->column(0)->ToString(), strings->ToString());
  }
}

// A memory that is not open (no owner) makes nothing: the objects come from
// the heap and hold nothing.
TEST(ObjectMemoryTest, AClosedMemoryLeavesObjectsToTheHeap) {
  RecyclingPool pool;
  auto batch = Build(&pool, Int64Columns(1), 1, 5);
  ASSERT_NO_FATAL_FAILURE(ExpectValues(*batch, 5));
  EXPECT_EQ(pool.closed(), 0);
}

}  // namespace
}  // namespace alkaid::format
