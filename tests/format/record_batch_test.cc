// RecordBatch::column: a batch that owns its columns boxes each column's
// typed array on the first call and returns that object after, on any
// thread.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "alkaid/format/array.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/record_batch.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

RecordBatchPtr TwoColumns(int64_t first) {
  Int64Builder a;
  Int64Builder b;
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_OK(a.Append(first + r));
    EXPECT_OK(b.Append(first * 10 + r));
  }
  auto sch = schema({field("a", int64()), field("b", int64())});
  return RecordBatch::Make(sch, 4, {a.Finish().ValueOrDie(), b.Finish().ValueOrDie()}).ValueOrDie();
}

TEST(RecordBatchTest, AColumnIsBoxedOnceAndKept) {
  auto batch = TwoColumns(5);
  ArrayPtr a = batch->column(0);
  EXPECT_EQ(batch->column(0).get(), a.get());
  EXPECT_EQ(batch->GetColumnByName("a").get(), a.get());
  EXPECT_EQ(a->data().get(), batch->column_data(0).get());
  EXPECT_EQ(std::static_pointer_cast<Int64Array>(batch->column(1))->Value(2), 52);
  // A slice is a batch of its own, with its own boxes.
  auto slice = batch->Slice(1, 2);
  EXPECT_NE(slice->column(0).get(), a.get());
  EXPECT_EQ(slice->column(0).get(), slice->column(0).get());
  EXPECT_EQ(std::static_pointer_cast<Int64Array>(slice->column(0))->Value(0), 6);
}

TEST(RecordBatchTest, AColumnKeptAfterItsBatchKeepsItsData) {
  auto batch = TwoColumns(7);
  ArrayPtr b = batch->column(1);
  const ArrayData* data = batch->column_data(1).get();
  batch.reset();
  EXPECT_EQ(b->data().get(), data);
  EXPECT_EQ(std::static_pointer_cast<Int64Array>(b)->Value(3), 73);
}

// Threads asking for the same columns at once: every array is the column's,
// and once they are done every call returns one object.
TEST(RecordBatchTest, ThreadsBoxAColumnOnce) {
  for (int round = 0; round < 20; ++round) {
    auto batch = TwoColumns(round);
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    std::vector<ArrayPtr> got(8);
    for (size_t t = 0; t < got.size(); ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) {
        }
        got[t] = batch->column(static_cast<int>(t % 2));
      });
    }
    go.store(true);
    for (auto& t : threads) t.join();
    for (size_t t = 0; t < got.size(); ++t) {
      const int c = static_cast<int>(t % 2);
      ASSERT_NE(got[t], nullptr);
      EXPECT_EQ(got[t]->data().get(), batch->column_data(c).get());
      EXPECT_EQ(std::static_pointer_cast<Int64Array>(got[t])->Value(1),
                (c == 0 ? round : round * 10) + 1);
    }
    const Array* zero = batch->column(0).get();
    const Array* one = batch->column(1).get();
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(batch->column(0).get(), zero);
      EXPECT_EQ(batch->column(1).get(), one);
    }
  }
}

}  // namespace
}  // namespace alkaid::format
