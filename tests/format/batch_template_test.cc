// BatchTemplate: batches of one shape over successive bodies, made from
// recycled object graphs. What each test shows is in its name; that the
// steady state allocates nothing is in batch_template_alloc_test.cc.

#include "alkaid/format/batch_template.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "alkaid/format/array.h"
#include "alkaid/format/c_data.h"
#include "alkaid/format/shape_validator.h"
#include "alkaid/format/validate.h"
#include "batch_template_test_util.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

using testing::Body;
using testing::ExpectValues;
using testing::Keeper;
using testing::kRows;
using testing::Shape;

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
  EXPECT_EQ(held.load(), 1) << "the first body goes with the last pointer of its batch";
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

// Each kind of pointer taken from a batch keeps its graph, and with it the
// body, after the batch is dropped; the graph is not reused meanwhile, and
// the body goes with the last of them (no sweep).
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
  EXPECT_EQ(held.load(), 1) << "the first body goes with the slice, its last pointer";
  b2.reset();
  EXPECT_EQ(held.load(), 0);
  // Both graphs are back: two more batches at once make none.
  auto c1 = t->Instantiate(body.bytes, Keeper(&held));
  auto c2 = t->Instantiate(other.bytes, Keeper(&held));
  EXPECT_EQ(t->graphs_made(), 2u);
}

// column(i) returns the array its graph made for the column: the same
// object on every call and for every batch of the graph; a list column's
// values are the graph's array of the child node.
TEST(BatchTemplateTest, ColumnsAreTheGraphsArrays) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body one(1);
  Body two(2);
  const Array* a = nullptr;
  const Array* values = nullptr;
  {
    auto b = t->Instantiate(one.bytes, Keeper(&held));
    a = b->column(0).get();
    EXPECT_EQ(b->column(0).get(), a);
    auto list = std::static_pointer_cast<ListArray>(b->column(1));
    EXPECT_EQ(b->column(1).get(), list.get());
    values = list->values().get();
    EXPECT_EQ(list->values()->data().get(), b->column_data(1)->child_data[0].get());
    EXPECT_EQ(b->column(0)->data().get(), b->column_data(0).get());
    ExpectValues(*b, 1);
  }
  auto b = t->Instantiate(two.bytes, Keeper(&held));
  EXPECT_EQ(t->graphs_made(), 1u);
  EXPECT_EQ(b->column(0).get(), a);
  EXPECT_EQ(std::static_pointer_cast<ListArray>(b->column(1))->values().get(), values);
  ExpectValues(*b, 2);
}

// A column (or its list's values) kept after its batch holds the batch's
// count, and so the body and the graph; the body goes with the last of
// them, and the graph is taken again for the next body.
TEST(BatchTemplateTest, AColumnKeptAfterItsBatchHoldsTheBody) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body body(3);
  for (int keep_values = 0; keep_values < 2; ++keep_values) {
    ArrayPtr kept;
    {
      auto b = t->Instantiate(body.bytes, Keeper(&held));
      kept = b->column(1);
      if (keep_values == 1) kept = std::static_pointer_cast<ListArray>(kept)->values();
    }
    EXPECT_EQ(held.load(), 1);
    Body other(4);
    {
      auto b2 = t->Instantiate(other.bytes, Keeper(&held));
      EXPECT_EQ(t->graphs_made(), 2u) << "the kept column's graph is in use";
      ExpectValues(*b2, 4);
    }
    if (keep_values == 1) {
      EXPECT_EQ(std::static_pointer_cast<Int32Array>(kept)->Value(5), 305);
    } else {
      auto slot = std::static_pointer_cast<ListArray>(kept)->value_slice(2);
      EXPECT_EQ(std::static_pointer_cast<Int32Array>(slot)->Value(1), 305);
    }
    EXPECT_EQ(held.load(), 1);
    kept.reset();
    EXPECT_EQ(held.load(), 0);
  }
  EXPECT_EQ(t->graphs_made(), 2u);
}

// A column of a dictionary type has no array in the graph (a dictionary
// array keeps an array data of its own): column(i) makes one per call,
// which holds the body like any pointer taken from the batch.
TEST(BatchTemplateTest, ADictionaryColumnIsMadePerCall) {
  BatchShape s;
  s.schema = schema({field("d", dictionary(int32(), utf8()))});
  s.num_rows = kRows;
  s.body_length = 192;
  s.nodes = {{dictionary(int32(), utf8()), kRows, 0, 0, {{-1, 0}, {64, 16}}, {}}};
  s.columns = {0};
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(std::move(s)));
  std::atomic<int> held{0};
  Body body(0);
  ArrayPtr kept;
  {
    auto b = t->Instantiate(body.bytes, Keeper(&held));
    kept = b->column(0);
    EXPECT_NE(b->column(0).get(), kept.get());
    EXPECT_EQ(kept->type_id(), TypeId::kDictionary);
  }
  EXPECT_EQ(held.load(), 1);
  kept.reset();
  EXPECT_EQ(held.load(), 0);
}

// Extension columns have their arrays in the graph, storage and all: an
// extension over int64, and an extension over list<int32> inside a struct.
// Their storage arrays are the graph's too (the same buffers under the
// storage type), recycled with it, and hold the batch like any column.
BatchShape ExtensionShape() {
  const TypePtr stamp = extension("alkaid.test.stamp", "", int64());
  const TypePtr pairs = extension("alkaid.test.pairs", "p", list(int32()));
  const TypePtr outer = struct_({field("p", pairs)});
  BatchShape s;
  s.schema = schema({field("a", stamp, false), field("s", outer)});
  s.num_rows = kRows;
  s.body_length = 192;
  BatchShape::Node a{stamp, kRows, 0, 0, {{-1, 0}, {0, 32}}, {}};
  BatchShape::Node values{int32(), 2 * kRows, 0, 0, {{-1, 0}, {128, 32}}, {}};
  BatchShape::Node p{pairs, kRows, 0, 0, {{-1, 0}, {64, 20}}, {1}};
  BatchShape::Node st{outer, kRows, 0, 0, {{-1, 0}}, {2}};
  s.nodes = {a, values, p, st};
  s.columns = {0, 3};
  return s;
}

TEST(BatchTemplateTest, ExtensionColumnsAndTheirStorageAreTheGraphsArrays) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(ExtensionShape()));
  std::atomic<int> held{0};
  const Array* stamp = nullptr;
  const Array* pairs = nullptr;
  ArrayPtr kept;
  for (int seed = 1; seed <= 3; ++seed) {
    Body body(seed);
    auto b = t->Instantiate(body.bytes, Keeper(&held));
    ASSERT_OK(ValidateFull(*b));
    auto a = std::static_pointer_cast<ExtensionArray>(b->column(0));
    ASSERT_EQ(a->type_id(), TypeId::kExtension);
    EXPECT_EQ(b->column(0).get(), a.get());
    EXPECT_EQ(a->data().get(), b->column_data(0).get());
    ASSERT_EQ(a->storage()->type_id(), TypeId::kInt64);
    EXPECT_EQ(a->storage()->data()->buffers[1], b->column_data(0)->buffers[1]);
    EXPECT_EQ(a->storage()->length(), kRows);
    auto s = std::static_pointer_cast<StructArray>(b->column(1));
    auto p = std::static_pointer_cast<ExtensionArray>(s->field(0));
    ASSERT_EQ(p->type_id(), TypeId::kExtension);
    auto list = std::static_pointer_cast<ListArray>(p->storage());
    ASSERT_EQ(list->type_id(), TypeId::kList);
    EXPECT_EQ(list->values()->data().get(), p->data()->child_data[0].get());
    for (int i = 0; i < kRows; ++i) {
      EXPECT_EQ(std::static_pointer_cast<Int64Array>(a->storage())->Value(i), seed + i);
      auto slot = std::static_pointer_cast<Int32Array>(list->value_slice(i));
      EXPECT_EQ(slot->Value(1), seed * 100 + 2 * i + 1);
    }
    if (seed == 1) {
      stamp = a.get();
      pairs = p.get();
    } else {
      EXPECT_EQ(a.get(), stamp) << "the graph is recycled with its arrays";
      EXPECT_EQ(p.get(), pairs);
    }
    if (seed == 3) kept = list;  // a storage array kept past its batch
  }
  EXPECT_EQ(t->graphs_made(), 1u);
  EXPECT_EQ(held.load(), 1) << "the kept storage array holds the last body";
  kept.reset();
  EXPECT_EQ(held.load(), 0);
}

// With numbers of its own per batch (InstantiateWith), an extension
// column's storage array has the batch's length and null count too.
TEST(BatchTemplateTest, AnExtensionsStorageTakesEachBatchsNumbers) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(ExtensionShape()));
  std::atomic<int> held{0};
  Body body(5);
  for (int64_t rows : {2, 3}) {
    // The present buffers in node order: a's values, the list's values,
    // the list's offsets.
    const BatchShape::Node::BufferRange buffers[] = {
        {0, 8 * rows}, {128, 8 * rows}, {64, 4 * (rows + 1)}};
    const BatchTemplate::Numbers::Node nodes[] = {{rows, 0}, {2 * rows, 0}, {rows, 0}, {rows, 0}};
    BatchTemplate::Numbers numbers;
    numbers.num_rows = rows;
    numbers.body_length = 192;
    numbers.nodes = nodes;
    numbers.buffers = buffers;
    auto b = t->InstantiateWith(numbers, body.bytes, Keeper(&held));
    auto a = std::static_pointer_cast<ExtensionArray>(b->column(0));
    EXPECT_EQ(a->length(), rows);
    EXPECT_EQ(a->storage()->length(), rows);
    auto s = std::static_pointer_cast<StructArray>(b->column(1));
    auto p = std::static_pointer_cast<ExtensionArray>(s->field(0));
    EXPECT_EQ(p->storage()->length(), rows);
    EXPECT_EQ(std::static_pointer_cast<Int64Array>(a->storage())->Value(rows - 1), 5 + rows - 1);
  }
}

// A keeper with TakeFrom and Release (shm::ChannelBlock's shape) is
// resident: each graph makes one, takes every batch's keeper into it,
// releases it when the batch goes, and destroys it only with the graph (a
// batch that outlives the template keeps its graph, and so its keeper).
struct ResidentKeeper {
  static inline int made = 0;       // default-constructed: the graphs' own
  static inline int taken = 0;      // batches' keepers taken in
  static inline int released = 0;   // batches let go
  static inline int destroyed = 0;  // graphs' own destroyed
  static inline int holding = 0;    // graphs' own holding a body now
  bool own = false;
  bool held = false;
  ResidentKeeper() : own(true) { ++made; }
  explicit ResidentKeeper(int /*body*/) : held(true) {}
  ResidentKeeper(ResidentKeeper&&) = delete;
  ResidentKeeper& operator=(ResidentKeeper&&) = delete;
  ~ResidentKeeper() {
    if (own) ++destroyed;
  }
  void TakeFrom(ResidentKeeper* from) {
    EXPECT_FALSE(held) << "a resident keeper is released before it takes the next";
    held = std::exchange(from->held, false);
    ++taken;
    ++holding;
  }
  void Release() {
    if (held) {
      held = false;
      ++released;
      --holding;
    }
  }
};

TEST(BatchTemplateTest, AResidentKeeperIsMadeOncePerGraphAndReleasedPerBatch) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  Body body(3);
  for (int i = 0; i < 100; ++i) {
    auto b = t->Instantiate(body.bytes, ResidentKeeper(i));
    EXPECT_EQ(ResidentKeeper::holding, 1);
    ExpectValues(*b, 3);
  }
  EXPECT_EQ(t->graphs_made(), 1u);
  EXPECT_EQ(ResidentKeeper::made, 1) << "one keeper for the graph, not one per batch";
  EXPECT_EQ(ResidentKeeper::taken, 100);
  EXPECT_EQ(ResidentKeeper::released, 100);
  EXPECT_EQ(ResidentKeeper::holding, 0);
  EXPECT_EQ(ResidentKeeper::destroyed, 0) << "the graph keeps its keeper while idle";
  // A column kept after its batch holds the body until it is dropped; a
  // second graph (and keeper) serves meanwhile.
  ArrayDataPtr column;
  {
    auto b = t->Instantiate(body.bytes, ResidentKeeper(0));
    column = b->column_data(0);
  }
  auto second = t->Instantiate(body.bytes, ResidentKeeper(0));
  EXPECT_EQ(ResidentKeeper::made, 2);
  EXPECT_EQ(ResidentKeeper::holding, 2);
  column.reset();
  EXPECT_EQ(ResidentKeeper::holding, 1);
  // The batch outlives its template: the template's graphs (and their
  // keepers) go once its last batch is let go.
  t.reset();
  EXPECT_EQ(ResidentKeeper::destroyed, 0);
  EXPECT_EQ(ResidentKeeper::holding, 1);
  second.reset();
  EXPECT_EQ(ResidentKeeper::holding, 0);
  EXPECT_EQ(ResidentKeeper::released, 102);
  EXPECT_EQ(ResidentKeeper::destroyed, 2);
}

// The whole-body buffer of a batch with a resident keeper, on a graph made
// for it and on one taken again (whose keeper is there already: the common
// case, taken without a frame): it is this body's, and holds the batch.
TEST(BatchTemplateTest, AResidentKeepersBatchHandsOutItsWholeBody) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  const int released = ResidentKeeper::released;
  Body one(1), two(2);
  for (const Body* body : {&one, &two, &one}) {
    std::shared_ptr<Buffer> whole;
    auto b = t->Instantiate(body->bytes, ResidentKeeper(0), &whole);
    ASSERT_NE(whole, nullptr);
    EXPECT_EQ(whole->data(), body->bytes);
    EXPECT_EQ(whole->size(), 192);
    b.reset();
    EXPECT_EQ(ResidentKeeper::holding, 1) << "the whole-body buffer holds the batch";
    whole.reset();
    EXPECT_EQ(ResidentKeeper::holding, 0);
    // A batch without it on the same graph: no buffer asked, none made.
    ExpectValues(*t->Instantiate(body->bytes, ResidentKeeper(0)), body == &one ? 1 : 2);
  }
  EXPECT_EQ(t->graphs_made(), 1u);
  EXPECT_EQ(ResidentKeeper::released - released, 6);
}

// A graph holds a resident keeper of one type: a batch whose keeper is of
// another type (resident or not) destroys it first, and the next batch of
// the first type makes a new one. (The resident keeper is taken in by the
// inline Instantiate, the graph's storage and whether one is there already
// coming from the template.)
template <int kTag>
struct TaggedResident {
  static inline int made = 0;
  static inline int destroyed = 0;
  static inline int holding = 0;
  bool own = false;
  bool held = false;
  TaggedResident() : own(true) { ++made; }
  explicit TaggedResident(int /*body*/) : held(true) {}
  TaggedResident(TaggedResident&&) = delete;
  TaggedResident& operator=(TaggedResident&&) = delete;
  ~TaggedResident() {
    if (own) ++destroyed;
  }
  void TakeFrom(TaggedResident* from) {
    EXPECT_TRUE(own) << "taken into a keeper the graph made";
    held = std::exchange(from->held, false);
    ++holding;
  }
  void Release() {
    if (held) {
      held = false;
      --holding;
    }
  }
};

TEST(BatchTemplateTest, AGraphsResidentKeeperIsReplacedByAKeeperOfAnotherType) {
  using A = TaggedResident<1>;
  using B = TaggedResident<2>;
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  Body body(3);
  std::atomic<int> held{0};
  for (int i = 0; i < 2; ++i) {
    auto b = t->Instantiate(body.bytes, A(i));
    EXPECT_EQ(A::holding, 1);
    ExpectValues(*b, 3);
  }
  EXPECT_EQ(A::made, 1);
  EXPECT_EQ(A::holding, 0);
  {
    auto b = t->Instantiate(body.bytes, B(0));
    EXPECT_EQ(B::holding, 1);
    ExpectValues(*b, 3);
  }
  EXPECT_EQ(A::destroyed, 1) << "the graph's keeper of the first type goes";
  EXPECT_EQ(B::made, 1);
  EXPECT_EQ(B::holding, 0);
  {
    auto b = t->Instantiate(body.bytes, Keeper(&held));
    EXPECT_EQ(held.load(), 1);
  }
  EXPECT_EQ(held.load(), 0);
  EXPECT_EQ(B::destroyed, 1);
  {
    auto b = t->Instantiate(body.bytes, A(0));
    EXPECT_EQ(A::holding, 1);
  }
  EXPECT_EQ(A::made, 2) << "a new resident keeper after a keeper that was not one";
  EXPECT_EQ(A::holding, 0);
  EXPECT_EQ(t->graphs_made(), 1u);
  t.reset();
  EXPECT_EQ(A::destroyed, 2) << "the graph's keeper goes with the graph";
}

// A weak reference to a batch, or to anything taken from it, keeps its
// control block, so its graph is not reused while one exists (it would
// reuse the block under it); the body goes with the batch all the same, and
// the weak reference expires with it (it never locks onto a later batch).
TEST(BatchTemplateTest, AWeakReferenceKeepsTheGraphFromReuse) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body body(1);
  std::weak_ptr<RecordBatch> weak;
  std::weak_ptr<ArrayData> weak_column;
  {
    auto b = t->Instantiate(body.bytes, Keeper(&held));
    weak = b;
    weak_column = b->column_data(1);
  }
  EXPECT_TRUE(weak.expired());
  EXPECT_TRUE(weak_column.expired()) << "a node's weak pointer expires with its batch";
  EXPECT_EQ(held.load(), 0) << "the body goes with the batch";
  { auto b = t->Instantiate(body.bytes, Keeper(&held)); }
  EXPECT_EQ(t->graphs_made(), 2u);
  weak.reset();
  {
    auto b1 = t->Instantiate(body.bytes, Keeper(&held));
    auto b2 = t->Instantiate(body.bytes, Keeper(&held));
    EXPECT_EQ(weak_column.lock(), nullptr) << "never locks onto a later batch of a graph";
  }
  EXPECT_EQ(t->graphs_made(), 3u) << "the column's weak pointer still keeps the first graph";
  weak_column.reset();
  {
    auto b1 = t->Instantiate(body.bytes, Keeper(&held));
    auto b2 = t->Instantiate(body.bytes, Keeper(&held));
    auto b3 = t->Instantiate(body.bytes, Keeper(&held));
  }
  EXPECT_EQ(t->graphs_made(), 3u);
  EXPECT_EQ(held.load(), 0);
}

// Dropping a batch with nothing taken from it kept lets go of its body at
// once; keeping a column keeps the graph and the body until the column is
// dropped, and the graph is taken again after that.
TEST(BatchTemplateTest, AGraphHeldByAColumnIsTakenAgainOnceTheColumnIsDropped) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body one(1), two(2);
  ArrayDataPtr column;
  {
    auto b = t->Instantiate(one.bytes, Keeper(&held));
    column = b->column_data(0);
  }
  EXPECT_EQ(held.load(), 1);
  { auto b = t->Instantiate(two.bytes, Keeper(&held)); }
  EXPECT_EQ(held.load(), 1) << "the second batch's body went with it";
  EXPECT_EQ(t->graphs_made(), 2u);
  EXPECT_EQ(column->GetValues<int64_t>(1)[0], 1) << "the column still sees its own body";
  column.reset();
  EXPECT_EQ(held.load(), 0) << "the body goes with the column, the batch's last pointer";
  std::vector<RecordBatchPtr> both;
  for (int i = 0; i < 2; ++i) {
    both.push_back(t->Instantiate(two.bytes, Keeper(&held)));
    ExpectValues(*both.back(), 2);
  }
  EXPECT_EQ(t->graphs_made(), 2u) << "both graphs are idle again";
}

// Graphs held through a column when the template's owner goes let go of
// their bodies when the column is dropped, on that thread (no reaper).
TEST(BatchTemplateTest, BodiesHeldAfterTheOwnerWentGoWithTheirLastPointer) {
  std::atomic<int> held{0};
  Body body(3);
  ArrayDataPtr kept_before, kept_after;
  RecordBatchPtr batch;
  {
    ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
    {
      auto b = t->Instantiate(body.bytes, Keeper(&held));
      kept_before = b->column_data(1);
    }
    batch = t->Instantiate(body.bytes, Keeper(&held));
    kept_after = batch->column_data(0);
  }
  // One graph was pinned before the owner went, one is pinned after.
  batch.reset();
  EXPECT_EQ(held.load(), 2);
  EXPECT_EQ(kept_before->child_data[0]->GetValues<int32_t>(1)[0], 300);
  kept_before.reset();
  EXPECT_EQ(held.load(), 1);
  kept_after.reset();
  EXPECT_EQ(held.load(), 0);
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

// An export given the batch's pointer holds the batch itself: dropping the
// batch and then releasing the export lets the body go at once (no sweep),
// through the parked tree as through a first export.
TEST(BatchTemplateTest, AnExportOfTheBatchPointerLetsTheBodyGoOnRelease) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body body(4);
  for (int round = 0; round < 3; ++round) {
    auto b = t->Instantiate(body.bytes, Keeper(&held));
    ArrowArray c{};
    ASSERT_OK(ExportRecordBatch(b, &c));
    b.reset();
    EXPECT_EQ(held.load(), 1);
    ASSERT_OK_AND_ASSIGN(auto back, ImportRecordBatch(&c, t->shape().schema));
    ExpectValues(*back, 4);
    back.reset();
    EXPECT_EQ(held.load(), 0) << "round " << round;
  }
  EXPECT_EQ(t->graphs_made(), 1u);
}

// A graph's export tree is laid out once and parked in the graph: the next
// export of a batch of that graph (the same body or a later one) fills it
// again with that body's addresses.
TEST(BatchTemplateTest, ExportsOfARecycledGraphRefillItsParkedTree) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body one(1), two(2);
  const void* first_tree = nullptr;
  for (Body* body : {&one, &two, &one}) {
    auto b = t->Instantiate(body->bytes, Keeper(&held));
    ArrowArray c{};
    ASSERT_OK(ExportRecordBatch(*b, &c));
    ASSERT_EQ(c.n_children, 2);
    if (first_tree == nullptr) first_tree = c.children;
    EXPECT_EQ(c.children, first_tree) << "the parked tree is filled again";
    EXPECT_EQ(c.children[0]->buffers[1], body->bytes);
    EXPECT_EQ(c.children[1]->children[0]->buffers[1], body->bytes + 128);
    b.reset();
    EXPECT_EQ(held.load(), 1) << "the export holds the body";
    ASSERT_OK_AND_ASSIGN(auto back, ImportRecordBatch(&c, t->shape().schema));
    ExpectValues(*back, body == &two ? 2 : 1);
    back.reset();
    EXPECT_EQ(held.load(), 0);
  }
  EXPECT_EQ(t->graphs_made(), 1u);
}

// While a graph's parked tree is out, a second export of the same batch gets
// a tree of its own; a child moved out of the first keeps the graph (and the
// parked tree) from reuse until it is released, and the graph's next batch
// then gets the parked tree with its own body.
TEST(BatchTemplateTest, AParkedTreeIsNotReusedWhileAnyOfItsNodesIsOut) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body one(1), two(2);
  auto b = t->Instantiate(one.bytes, Keeper(&held));
  ArrowArray first{};
  ArrowArray second{};
  ASSERT_OK(ExportRecordBatch(*b, &first));
  ASSERT_OK(ExportRecordBatch(*b, &second));
  EXPECT_NE(first.children, second.children);
  second.release(&second);
  // Move column "b" out of the first export, then release the rest.
  ArrowArray child = *first.children[1];
  first.children[1]->release = nullptr;
  first.release(&first);
  b.reset();
  EXPECT_EQ(held.load(), 1) << "the moved-out child holds the body";
  auto b2 = t->Instantiate(two.bytes, Keeper(&held));
  EXPECT_EQ(t->graphs_made(), 2u) << "the first graph is still held by the child";
  b2.reset();
  ASSERT_OK_AND_ASSIGN(auto column, ImportArray(&child, list(int32())));
  EXPECT_EQ(column->length(), kRows);
  EXPECT_EQ(column->data()->child_data[0]->GetValues<int32_t>(1)[1], 101);
  column.reset();
  EXPECT_EQ(held.load(), 0);
  // Both graphs are idle now; whichever comes back, its export shows its body.
  for (int round = 0; round < 3; ++round) {
    Body& body = round % 2 == 0 ? two : one;
    auto again = t->Instantiate(body.bytes, Keeper(&held));
    ArrowArray c{};
    ASSERT_OK(ExportRecordBatch(*again, &c));
    EXPECT_EQ(c.children[0]->buffers[1], body.bytes);
    EXPECT_EQ(c.children[1]->children[0]->buffers[1], body.bytes + 128);
    c.release(&c);
  }
  EXPECT_EQ(t->graphs_made(), 2u);
  EXPECT_EQ(held.load(), 0);
}

// Exports released on other threads hand the parked tree back to the
// decoding thread's next export (TSan checks the hand-over).
TEST(BatchTemplateTest, ExportsReleasedOnOtherThreadsAreRefilledSafely) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body one(1), two(2);
  std::vector<std::thread> releasers;
  for (int i = 0; i < 200; ++i) {
    Body& body = i % 2 == 0 ? one : two;
    auto b = t->Instantiate(body.bytes, Keeper(&held));
    auto* c = new ArrowArray{};
    ASSERT_OK(ExportRecordBatch(*b, c));
    ASSERT_EQ(c->children[0]->buffers[1], body.bytes);
    releasers.emplace_back([c, expected = body.bytes] {
      const bool ok = c->children[0]->buffers[1] == expected;
      c->release(c);
      delete c;
      if (!ok) std::abort();
    });
    if (releasers.size() == 4) {
      for (auto& r : releasers) r.join();
      releasers.clear();
    }
  }
  for (auto& r : releasers) r.join();
  EXPECT_EQ(held.load(), 0);
}

// For batches of the template's shape, ShapeValidator gives Validate's
// verdict, and its error, from the first and last offsets alone.
TEST(BatchTemplateTest, AShapeValidatorAgreesWithValidate) {
  ASSERT_OK_AND_ASSIGN(auto t, BatchTemplate::Make(Shape()));
  std::atomic<int> held{0};
  Body honest(1), past(2), negative(3), decreasing(4);
  reinterpret_cast<int32_t*>(past.bytes + 64)[kRows] = 100;      // past the 8 values
  reinterpret_cast<int32_t*>(negative.bytes + 64)[0] = -1;       // a negative first offset
  reinterpret_cast<int32_t*>(decreasing.bytes + 64)[kRows] = 0;  // last before first...
  reinterpret_cast<int32_t*>(decreasing.bytes + 64)[0] = 2;      // ...of the slice
  auto prototype = t->Instantiate(honest.bytes, Keeper(&held));
  ASSERT_OK(Validate(*prototype));
  auto validator = ShapeValidator::Make(*prototype);
  ASSERT_NE(validator, nullptr);
  EXPECT_OK(validator->Validate(*prototype));
  for (Body* body : {&past, &negative, &decreasing}) {
    auto batch = t->Instantiate(body->bytes, Keeper(&held));
    const Status expected = Validate(*batch);
    ASSERT_FALSE(expected.ok());
    const Status got = validator->Validate(*batch);
    EXPECT_EQ(got.code(), expected.code());
    EXPECT_EQ(got.message(), expected.message());
  }
  // An inner offset is not read (Validate does not read it either).
  Body inner(5);
  reinterpret_cast<int32_t*>(inner.bytes + 64)[2] = 1000;
  auto batch = t->Instantiate(inner.bytes, Keeper(&held));
  EXPECT_OK(Validate(*batch));
  EXPECT_OK(validator->Validate(*batch));
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
