// BatchTemplate's steady state allocates nothing (global operator new is
// replaced in this test executable to count allocations; the sanitizers'
// runtimes define it themselves, so this test is built without them).

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "alkaid/format/batch_template.h"
#include "alkaid/format/c_data.h"
#include "batch_template_test_util.h"
#include "counting_new.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

using testing::Body;
using testing::Keeper;
using testing::Shape;

// Heap allocations made by 1,000 batches of `t` (over one body, after one
// batch of warm-up), each read by `read(batch)`, whose results are summed
// into `*sum`.
template <typename Read>
uint64_t AllocationsOfAThousandBatches(BatchTemplate& t, Read&& read, int64_t* sum) {
  std::atomic<int> held{0};
  Body body(3);
  { auto warm = t.Instantiate(body.bytes, Keeper(&held)); }
  const uint64_t before = counting_new::g_allocations.load();
  for (int i = 0; i < 1000; ++i) {
    auto b = t.Instantiate(body.bytes, Keeper(&held));
    *sum += read(*b);
  }
  return counting_new::g_allocations.load() - before;
}

TEST(BatchTemplateAllocTest, SteadyStateAllocatesNothing) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  int64_t sum = 0;
  auto read = [](const RecordBatch& b) { return b.column_data(0)->GetValues<int64_t>(1)[3]; };
  EXPECT_EQ(AllocationsOfAThousandBatches(*t, read, &sum), 0u);
  EXPECT_EQ(sum, 1000 * 6);
}

// column(i) of a recycled batch is the array its graph made: reading the
// columns through their typed arrays (a list's values too) allocates
// nothing after the first batch.
TEST(BatchTemplateAllocTest, ColumnsOfARecycledBatchAllocateNothing) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  int64_t sum = 0;
  auto read = [](const RecordBatch& b) {
    ArrayPtr a = b.column(0);
    ArrayPtr list = b.column(1);
    return static_cast<const Int64Array&>(*a).Value(3) +
           static_cast<const Int32Array&>(*static_cast<const ListArray&>(*list).values()).Value(1);
  };
  EXPECT_EQ(AllocationsOfAThousandBatches(*t, read, &sum), 0u);
  EXPECT_EQ(sum, 1000 * (6 + 301));
}

// An extension column's array and its storage array are the graph's:
// reading them allocates nothing after the first batch (they were made per
// call, four allocations each, before the graph kept them).
TEST(BatchTemplateAllocTest, ExtensionColumnsOfARecycledBatchAllocateNothing) {
  const TypePtr stamp = extension("alkaid.test.stamp", "", int64());
  BatchShape s = Shape();
  s.schema = schema({field("a", stamp, false), field("b", list(int32()))});
  s.nodes[0].type = stamp;
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(std::move(s)));
  int64_t sum = 0;
  auto read = [](const RecordBatch& b) {
    ArrayPtr a = b.column(0);
    const auto& storage = static_cast<const ExtensionArray&>(*a).storage();
    return static_cast<const Int64Array&>(*storage).Value(3);
  };
  EXPECT_EQ(AllocationsOfAThousandBatches(*t, read, &sum), 0u);
  EXPECT_EQ(sum, 1000 * 6);
}

// An export of a recycled batch fills the tree parked in its graph: after
// the first, exporting and releasing allocates nothing.
TEST(BatchTemplateAllocTest, ExportOfARecycledBatchAllocatesNothing) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body body(3);
  {
    auto warm = t->Instantiate(body.bytes, Keeper(&held));
    ArrowArray c{};
    ASSERT_OK(ExportRecordBatch(*warm, &c));
    c.release(&c);
  }
  const uint64_t before = counting_new::g_allocations.load();
  int64_t sum = 0;
  for (int i = 0; i < 1000; ++i) {
    auto b = t->Instantiate(body.bytes, Keeper(&held));
    ArrowArray c{};
    ASSERT_OK(ExportRecordBatch(*b, &c));
    sum += static_cast<const int64_t*>(c.children[0]->buffers[1])[3];
    c.release(&c);
  }
  EXPECT_EQ(counting_new::g_allocations.load() - before, 0u);
  EXPECT_EQ(sum, 1000 * 6);
}

}  // namespace
}  // namespace alkaid::format
