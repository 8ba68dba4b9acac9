// BatchTemplate: batches of one shape over successive bodies, made from
// recycled object graphs. What each test shows is in its name; the
// allocation counts come from a counting global operator new.

#include "alkaid/format/batch_template.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

#include "alkaid/format/array.h"
#include "alkaid/format/c_data.h"
#include "alkaid/format/validate.h"
#include "test_util.h"

namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

// Not inlined: g++ would see free() of what its built-in operator new
// returned and warn (-Wmismatched-new-delete).
[[gnu::noinline]] void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace alkaid::format {
namespace {

// A body keeper that counts how many bodies are held.
struct Keeper {
  std::atomic<int>* held = nullptr;
  explicit Keeper(std::atomic<int>* h) : held(h) { held->fetch_add(1); }
  Keeper(Keeper&& o) noexcept : held(o.held) { o.held = nullptr; }
  Keeper(const Keeper&) = delete;
  Keeper& operator=(const Keeper&) = delete;
  Keeper& operator=(Keeper&&) = delete;
  ~Keeper() {
    if (held != nullptr) held->fetch_sub(1);
  }
};

constexpr int64_t kRows = 4;

// A body: int64 column "a" (4 values at 0), then list<int32> "b": offsets
// (5 int32 at 64), values (8 int32 at 128).
struct Body {
  alignas(64) uint8_t bytes[192] = {};
  explicit Body(int64_t seed) {
    auto* a = reinterpret_cast<int64_t*>(bytes);
    for (int i = 0; i < kRows; ++i) a[i] = seed + i;
    auto* off = reinterpret_cast<int32_t*>(bytes + 64);
    for (int i = 0; i <= kRows; ++i) off[i] = 2 * i;
    auto* v = reinterpret_cast<int32_t*>(bytes + 128);
    for (int i = 0; i < 2 * kRows; ++i) v[i] = static_cast<int32_t>(seed * 100 + i);
  }
};

BatchShape Shape() {
  BatchShape s;
  s.schema = schema({field("a", int64(), false), field("b", list(int32()))});
  s.num_rows = kRows;
  s.body_length = 192;
  BatchShape::Node a{int64(), kRows, 0, 0, {{-1, 0}, {0, 32}}, {}};
  BatchShape::Node values{int32(), 2 * kRows, 0, 0, {{-1, 0}, {128, 32}}, {}};
  BatchShape::Node b{list(int32()), kRows, 0, 0, {{-1, 0}, {64, 20}}, {1}};
  s.nodes = {a, values, b};
  s.columns = {0, 2};
  return s;
}

void ExpectValues(const RecordBatch& batch, int64_t seed) {
  ASSERT_EQ(batch.num_rows(), kRows);
  auto a = std::static_pointer_cast<Int64Array>(batch.column(0));
  auto b = std::static_pointer_cast<ListArray>(batch.column(1));
  for (int i = 0; i < kRows; ++i) {
    EXPECT_EQ(a->Value(i), seed + i);
    auto slot = std::static_pointer_cast<Int32Array>(b->value_slice(i));
    ASSERT_EQ(slot->length(), 2);
    EXPECT_EQ(slot->Value(1), seed * 100 + 2 * i + 1);
  }
}

TEST(BatchTemplateTest, BatchesPointIntoEachBodyAndValidate) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body one(1), two(2);
  std::shared_ptr<Buffer> whole;
  auto b1 = t->Instantiate(one.bytes, Keeper(&held), &whole);
  auto b2 = t->Instantiate(two.bytes, Keeper(&held));
  EXPECT_EQ(held.load(), 2);
  ASSERT_OK(ValidateFull(*b1));
  ASSERT_OK(ValidateFull(*b2));
  ExpectValues(*b1, 1);
  ExpectValues(*b2, 2);
  EXPECT_EQ(b1->column_data(0)->buffers[1]->data(), one.bytes);
  EXPECT_EQ(whole->data(), one.bytes);
  EXPECT_EQ(whole->size(), 192);
  EXPECT_EQ(t->graphs_made(), 2u);
  b1.reset();
  EXPECT_EQ(held.load(), 2) << "the whole-body buffer still holds the first body";
  whole.reset();
  EXPECT_EQ(held.load(), 1);
  b2.reset();
  EXPECT_EQ(held.load(), 0);
}

TEST(BatchTemplateTest, AGraphIsReusedOnceEverythingTakenFromItIsDropped) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body body(7);
  for (int i = 0; i < 100; ++i) {
    auto b = t->Instantiate(body.bytes, Keeper(&held));
    ExpectValues(*b, 7);
  }
  EXPECT_EQ(t->graphs_made(), 1u);
  EXPECT_EQ(held.load(), 0);
}

TEST(BatchTemplateTest, SteadyStateAllocatesNothing) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body body(3);
  { auto warm = t->Instantiate(body.bytes, Keeper(&held)); }
  const uint64_t before = g_allocations.load();
  int64_t sum = 0;
  for (int i = 0; i < 1000; ++i) {
    auto b = t->Instantiate(body.bytes, Keeper(&held));
    sum += b->column_data(0)->GetValues<int64_t>(1)[3];
  }
  EXPECT_EQ(g_allocations.load() - before, 0u);
  EXPECT_EQ(sum, 1000 * 6);
}

// Each kind of pointer taken from a batch keeps its part, and through it
// the body, after the batch is dropped; the graph is not reused meanwhile.
TEST(BatchTemplateTest, AColumnAChildABufferOrASliceKeptAfterTheBatchHoldsIt) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body body(5);
  ArrayDataPtr column, child;
  std::shared_ptr<Buffer> buffer;
  RecordBatchPtr slice;
  ArrayPtr values;
  {
    auto b = t->Instantiate(body.bytes, Keeper(&held));
    column = b->column_data(1);
    child = b->column_data(1)->child_data[0];
    buffer = b->column_data(0)->buffers[1];
    slice = b->Slice(1, 2);
    values = std::static_pointer_cast<ListArray>(b->column(1))->values();
  }
  EXPECT_EQ(held.load(), 1);
  // A second batch needs a second graph: the first is still in use.
  Body other(6);
  auto b2 = t->Instantiate(other.bytes, Keeper(&held));
  EXPECT_EQ(t->graphs_made(), 2u);
  ExpectValues(*b2, 6);
  EXPECT_EQ(reinterpret_cast<const int64_t*>(buffer->data())[2], 7);
  EXPECT_EQ(child->GetValues<int32_t>(1)[3], 503);
  EXPECT_EQ(column->child_data[0].get(), child.get());
  ASSERT_OK(ValidateFull(*slice));
  EXPECT_EQ(std::static_pointer_cast<Int64Array>(slice->column(0))->Value(0), 6);
  EXPECT_EQ(values->length(), 2 * kRows);
  column.reset();
  child.reset();
  buffer.reset();
  values.reset();
  EXPECT_EQ(held.load(), 2) << "the slice still holds the first body";
  slice.reset();
  EXPECT_EQ(held.load(), 1);
  b2.reset();
  EXPECT_EQ(held.load(), 0);
  // Both graphs are back: two more batches at once make none.
  auto c1 = t->Instantiate(body.bytes, Keeper(&held));
  auto c2 = t->Instantiate(other.bytes, Keeper(&held));
  EXPECT_EQ(t->graphs_made(), 2u);
}

// A weak reference keeps a part's control block, so its graph is not
// reused while one exists (it would reuse the block under it).
TEST(BatchTemplateTest, AWeakReferenceKeepsTheGraphFromReuse) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body body(1);
  std::weak_ptr<RecordBatch> weak;
  {
    auto b = t->Instantiate(body.bytes, Keeper(&held));
    weak = b;
  }
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(held.load(), 0) << "the body goes with the batch";
  { auto b = t->Instantiate(body.bytes, Keeper(&held)); }
  EXPECT_EQ(t->graphs_made(), 2u);
  weak.reset();
  { auto b = t->Instantiate(body.bytes, Keeper(&held)); }
  EXPECT_EQ(t->graphs_made(), 2u);
}

TEST(BatchTemplateTest, BatchesOutliveTheTemplateAndAreDroppedOnOtherThreads) {
  std::atomic<int> held{0};
  std::vector<RecordBatchPtr> batches;
  Body body(9);
  {
    ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
    for (int i = 0; i < 64; ++i) batches.push_back(t->Instantiate(body.bytes, Keeper(&held)));
  }
  EXPECT_EQ(held.load(), 64);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&batches, k] {
      for (size_t i = static_cast<size_t>(k); i < batches.size(); i += 4) {
        ExpectValues(*batches[i], 9);
        batches[i].reset();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(held.load(), 0);
}

TEST(BatchTemplateTest, ConcurrentDropsReturnGraphsWhileInstantiating) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body body(4);
  std::atomic<RecordBatchPtr*> handoff{nullptr};
  std::atomic<bool> done{false};
  std::thread dropper([&] {
    while (!done.load() || handoff.load() != nullptr) {
      RecordBatchPtr* b = handoff.exchange(nullptr);
      if (b != nullptr) {
        ExpectValues(**b, 4);
        delete b;
      }
    }
  });
  for (int i = 0; i < 5000; ++i) {
    auto* b = new RecordBatchPtr(t->Instantiate(body.bytes, Keeper(&held)));
    RecordBatchPtr* expected = nullptr;
    while (!handoff.compare_exchange_weak(expected, b)) expected = nullptr;
  }
  done.store(true);
  dropper.join();
  EXPECT_EQ(held.load(), 0);
  EXPECT_LE(t->graphs_made(), 3u);
}

TEST(BatchTemplateTest, ExportedThroughTheCDataInterfaceAndReleasedAfterTheBatch) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body body(2);
  ArrowArray c{};
  ArrowSchema cs{};
  {
    auto b = t->Instantiate(body.bytes, Keeper(&held));
    ASSERT_OK(ExportRecordBatch(*b, &c, &cs));
  }
  EXPECT_EQ(held.load(), 1);
  ASSERT_OK_AND_ASSIGN(auto back, ImportRecordBatch(&c, &cs));
  ExpectValues(*back, 2);
  back.reset();
  EXPECT_EQ(held.load(), 0);
}

TEST(BatchTemplateTest, MalformedShapesAreRefused) {
  auto bad_child = Shape();
  bad_child.nodes[2].children = {2};
  ASSERT_RAISES(kInvalid, BatchTemplate::Make(bad_child));
  auto orphan = Shape();
  orphan.nodes[2].children = {};
  ASSERT_RAISES(kInvalid, BatchTemplate::Make(orphan));
  auto wrong_type = Shape();
  wrong_type.nodes[0].type = int32();
  ASSERT_RAISES(kInvalid, BatchTemplate::Make(wrong_type));
  auto columns = Shape();
  columns.columns = {0};
  ASSERT_RAISES(kInvalid, BatchTemplate::Make(columns));
  auto shared = Shape();
  shared.columns = {0, 0};
  ASSERT_RAISES(kInvalid, BatchTemplate::Make(shared));
}

}  // namespace
}  // namespace alkaid::format
