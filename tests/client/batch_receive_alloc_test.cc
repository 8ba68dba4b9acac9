// The zero-allocation receive: publishing through a FixedShapeWriter and
// receiving with BatchSubscriber::TryReceive (a batch made from recycled
// objects, format::BatchTemplate) allocate no heap memory in steady state
// (global operator new is replaced in this test executable to count
// allocations); with batches built by builders, publishing and receiving
// add no allocation to what building them takes.

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/c_data.h"
#include "alkaid/format/extension.h"
#include "client_test_util.h"
#include "counting_new.h"

namespace alkaid::client {
namespace {

using testing::Channel;
constexpr int64_t kRows = 64;

format::SchemaPtr Schema() { return format::schema({format::field("v", format::int64(), false)}); }

struct Pair {
  Channel ch;
  std::unique_ptr<BatchPublisher> publisher;
  std::unique_ptr<BatchSubscriber> subscriber;
};

// A 256 KiB arena: the warm-up laps it, so that loans come from blocks
// freed before (taking fresh space may split a free range, which
// allocates).
void Open(Pair* p) {
  ASSERT_OK(p->ch.Create(256 << 10));
  ASSERT_OK_AND_ASSIGN(p->publisher, BatchPublisher::Create(p->ch.producer.get(), Schema()));
  SubscriberOptions so;
  so.consumer.wait_mode = shm::WaitMode::kBusyPoll;
  ASSERT_OK_AND_ASSIGN(p->subscriber, BatchSubscriber::Open(p->ch.name, Schema(), so));
}

// A fixed-shape writer of kRows int64 values, from a prototype built in the
// pair's channel.
void NewWriter(Pair& p, std::unique_ptr<FixedShapeWriter>* writer) {
  ASSERT_OK_AND_ASSIGN(auto pool, p.publisher->NewPool(kRows * 8));
  format::Int64Builder b(pool.get());
  ASSERT_OK(b.Reserve(kRows));
  for (int64_t r = 0; r < kRows; ++r) b.UnsafeAppend(r);
  ASSERT_OK_AND_ASSIGN(auto a, b.Finish());
  ASSERT_OK_AND_ASSIGN(auto prototype, format::RecordBatch::Make(Schema(), kRows, {a}));
  ASSERT_OK_AND_ASSIGN(*writer, p.publisher->NewFixedShapeWriter(*prototype, *pool));
}

// Publishes the values i, i + 1, ... through `writer`.
void PublishRows(FixedShapeWriter* writer, int64_t i) {
  ASSERT_OK(writer->Begin());
  auto* v = reinterpret_cast<int64_t*>(writer->buffer(1).data());
  for (int64_t r = 0; r < kRows; ++r) v[r] = i + r;
  ASSERT_OK(writer->Publish());
}

TEST(BatchReceiveAllocTest, FixedShapeWriterAndReceiveAllocateNothing) {
  Pair p;
  Open(&p);
  std::unique_ptr<FixedShapeWriter> writer;
  ASSERT_NO_FATAL_FAILURE(NewWriter(p, &writer));
  auto round = [&](int64_t i) {
    ASSERT_NO_FATAL_FAILURE(PublishRows(writer.get(), i));
    ASSERT_OK_AND_ASSIGN(auto got, p.subscriber->TryReceive());
    ASSERT_NE(got.batch, nullptr);
    const format::ArrayData& column = *got.batch->column_data(0);
    ASSERT_EQ(column.length, kRows);
    ASSERT_EQ(column.GetValues<int64_t>(1)[0], i);
    ASSERT_EQ(column.GetValues<int64_t>(1)[kRows - 1], i + kRows - 1);
  };
  for (int64_t i = 0; i < 2000; ++i) round(i);  // warm: lap the arena, learn the shape
  const uint64_t before = counting_new::g_allocations.load();
  for (int64_t i = 2000; i < 12000; ++i) round(i);
  EXPECT_EQ(counting_new::g_allocations.load() - before, 0u) << "heap allocations in 10000 batches";
}

// The same on a channel with fixed blocks (the writer's regions), received
// by the batch-only TryReceive(&batch).
TEST(BatchReceiveAllocTest, FixedBlocksAndTheBatchOnlyReceiveAllocateNothing) {
  Pair p;
  shm::ChannelOptions o;
  o.fixed_block_bytes = kRows * 8;
  ASSERT_OK(p.ch.Create(256 << 10, o));
  ASSERT_OK_AND_ASSIGN(p.publisher, BatchPublisher::Create(p.ch.producer.get(), Schema()));
  SubscriberOptions so;
  so.consumer.wait_mode = shm::WaitMode::kBusyPoll;
  ASSERT_OK_AND_ASSIGN(p.subscriber, BatchSubscriber::Open(p.ch.name, Schema(), so));
  std::unique_ptr<FixedShapeWriter> writer;
  ASSERT_NO_FATAL_FAILURE(NewWriter(p, &writer));
  format::RecordBatchPtr batch;
  auto round = [&](int64_t i) {
    ASSERT_NO_FATAL_FAILURE(PublishRows(writer.get(), i));
    ASSERT_OK(p.subscriber->TryReceive(&batch));
    ASSERT_NE(batch, nullptr);
    const format::ArrayData& column = *batch->column_data(0);
    ASSERT_EQ(column.GetValues<int64_t>(1)[0], i);
    ASSERT_EQ(column.GetValues<int64_t>(1)[kRows - 1], i + kRows - 1);
    batch.reset();
  };
  for (int64_t i = 0; i < 4000; ++i) round(i);  // warm: every fixed block lent once
  const uint64_t before = counting_new::g_allocations.load();
  for (int64_t i = 4000; i < 14000; ++i) round(i);
  EXPECT_EQ(counting_new::g_allocations.load() - before, 0u) << "heap allocations in 10000 batches";
  EXPECT_EQ(p.ch.producer->stats().returns, 0u);
}

// A received batch handed over through the C Data Interface and released,
// before or after the batch itself is dropped (the second is what a pyarrow
// or polars consumer does: the export holds the batch's count, and its
// release lets the block go): no allocation either way, and the release notice
// (a std::function holding a plain pointer, as Consumer::ExportBatch's)
// allocates nothing.
TEST(BatchReceiveAllocTest, ExportingAReceivedBatchAllocatesNothing) {
  Pair p;
  Open(&p);
  std::unique_ptr<FixedShapeWriter> writer;
  ASSERT_NO_FATAL_FAILURE(NewWriter(p, &writer));
  std::atomic<int64_t> released{0};
  auto round = [&](int64_t i) {
    ASSERT_NO_FATAL_FAILURE(PublishRows(writer.get(), i));
    ASSERT_OK_AND_ASSIGN(auto got, p.subscriber->TryReceive());
    ASSERT_NE(got.batch, nullptr);
    ArrowArray c{};
    std::atomic<int64_t>* counter = &released;
    ASSERT_OK(format::ExportRecordBatch(*got.batch, &c, nullptr, [counter] { ++*counter; }));
    ASSERT_EQ(static_cast<const int64_t*>(c.children[0]->buffers[1])[kRows - 1], i + kRows - 1);
    if (i % 2 == 0) {
      c.release(&c);  // the export first, then the batch
    } else {
      got = ReceivedBatch{};  // the batch first: the export holds its count
      c.release(&c);
    }
  };
  for (int64_t i = 0; i < 2000; ++i) round(i);
  const uint64_t before = counting_new::g_allocations.load();
  for (int64_t i = 2000; i < 12000; ++i) round(i);
  EXPECT_EQ(counting_new::g_allocations.load() - before, 0u) << "heap allocations in 10000 batches";
  EXPECT_EQ(released.load(), 12000);
}

// Received batches handed out through the C Stream Interface, each with a
// release notice holding a plain pointer (as Consumer::ExportStream's
// count): get_next and release allocate nothing per batch.
TEST(BatchReceiveAllocTest, AStreamOfReceivedBatchesAllocatesNothingPerBatch) {
  Pair p;
  Open(&p);
  std::unique_ptr<FixedShapeWriter> writer;
  ASSERT_NO_FATAL_FAILURE(NewWriter(p, &writer));
  std::atomic<int64_t> released{0};
  std::atomic<int64_t>* counter = &released;
  BatchSubscriber* subscriber = p.subscriber.get();
  ArrowArrayStream stream{};
  ASSERT_OK(format::ExportRecordBatchStream(
      subscriber->schema(),
      [subscriber]() -> Result<format::RecordBatchPtr> {
        ALKAID_ASSIGN_OR_RAISE(auto got, subscriber->TryReceive());
        return std::move(got.batch);
      },
      &stream, [counter] { ++*counter; }));
  auto round = [&](int64_t i) {
    ASSERT_NO_FATAL_FAILURE(PublishRows(writer.get(), i));
    ArrowArray c{};
    ASSERT_EQ(stream.get_next(&stream, &c), 0) << stream.get_last_error(&stream);
    ASSERT_NE(c.release, nullptr);
    ASSERT_EQ(static_cast<const int64_t*>(c.children[0]->buffers[1])[kRows - 1], i + kRows - 1);
    c.release(&c);
  };
  for (int64_t i = 0; i < 2000; ++i) round(i);
  const uint64_t before = counting_new::g_allocations.load();
  for (int64_t i = 2000; i < 12000; ++i) round(i);
  EXPECT_EQ(counting_new::g_allocations.load() - before, 0u) << "heap allocations in 10000 batches";
  EXPECT_EQ(released.load(), 12000);
  stream.release(&stream);
}

// Batches built with builders: building allocates (the pool, the builder's
// buffer, the array, the batch); publishing and receiving add nothing to
// that.
TEST(BatchReceiveAllocTest, PublishingAndReceivingABuiltBatchAddNothing) {
  Pair p;
  Open(&p);
  auto build = [&](int64_t i) -> std::pair<std::unique_ptr<ShmBatchPool>, format::RecordBatchPtr> {
    auto pool = p.publisher->NewPool(kRows * 8).ValueOrDie();
    format::Int64Builder b(pool.get());
    EXPECT_OK(b.Reserve(kRows));
    for (int64_t r = 0; r < kRows; ++r) b.UnsafeAppend(i + r);
    auto a = b.Finish().ValueOrDie();
    auto batch = format::RecordBatch::Make(Schema(), kRows, {a}).ValueOrDie();
    return {std::move(pool), std::move(batch)};
  };
  auto round = [&](int64_t i, bool send) {
    auto [pool, batch] = build(i);
    if (!send) return;
    ASSERT_OK(p.publisher->Publish(*batch, pool.get()));
    ASSERT_OK_AND_ASSIGN(auto got, p.subscriber->TryReceive());
    ASSERT_NE(got.batch, nullptr);
    ASSERT_EQ(got.batch->column_data(0)->GetValues<int64_t>(1)[kRows - 1], i + kRows - 1);
  };
  for (int64_t i = 0; i < 2000; ++i) round(i, true);
  uint64_t before = counting_new::g_allocations.load();
  for (int64_t i = 2000; i < 12000; ++i) round(i, false);
  const uint64_t building = counting_new::g_allocations.load() - before;
  before = counting_new::g_allocations.load();
  for (int64_t i = 12000; i < 22000; ++i) round(i, true);
  const uint64_t all = counting_new::g_allocations.load() - before;
  std::printf(
      "[ built    ] %.2f heap allocations per batch to build it, %.2f with publish and "
      "receive\n",
      static_cast<double>(building) / 10000.0, static_cast<double>(all) / 10000.0);
  EXPECT_EQ(all, building);
}

// The built path of `alkaid latency --layer inproc` (tools/alkaid/latency_inproc.cc,
// PublishOne): a pool from NewPool, an Int64Builder on it, Finish,
// RecordBatch::Make, Publish, then TryReceive. In steady state it allocates
// nothing: the pool and its region are recycled with the region's block
// (ShmBatchPool), the buffer object, array data, array and batch are made in
// the block's object memory, linked to each other once and sharing the
// region's count (format::ObjectMemory), and the received batch comes from
// its graph (BatchTemplate). One allocation in
// 10,000 batches fails these tests.
//
// Heap allocations in 10,000 built batches after 2,000 of warm-up: a
// builder per batch on its pool, or (`keep_builder`) one builder kept and
// pointed at each batch's pool (ArrayBuilder::ResetTo), as the stream
// bench's built loop does.
uint64_t BuiltPathAllocations(bool keep_builder) {
  Pair p;
  Open(&p);
  const format::SchemaPtr schema = p.publisher->schema();
  format::Int64Builder kept;
  auto round = [&](int64_t i) {
    auto pool = p.publisher->NewPool(kRows * 8).ValueOrDie();
    std::optional<format::Int64Builder> own;
    format::Int64Builder* b = &kept;
    if (keep_builder) {
      ASSERT_OK(kept.ResetTo(pool.get()));
    } else {
      b = &own.emplace(pool.get());
    }
    ASSERT_OK(b->Reserve(kRows));
    for (int64_t r = 0; r < kRows; ++r) b->UnsafeAppend(i + r);
    auto a = b->Finish().ValueOrDie();
    auto batch = format::RecordBatch::Make(schema, kRows, {a}).ValueOrDie();
    ASSERT_OK(p.publisher->Publish(*batch, pool.get()));
    ASSERT_OK_AND_ASSIGN(auto got, p.subscriber->TryReceive());
    ASSERT_NE(got.batch, nullptr);
    ASSERT_EQ(got.batch->column_data(0)->GetValues<int64_t>(1)[0], i);
    ASSERT_EQ(got.batch->column_data(0)->GetValues<int64_t>(1)[kRows - 1], i + kRows - 1);
  };
  for (int64_t i = 0; i < 2000; ++i) round(i);
  const uint64_t before = counting_new::g_allocations.load();
  for (int64_t i = 2000; i < 12000; ++i) round(i);
  const uint64_t all = counting_new::g_allocations.load() - before;
  std::printf("[ built    ] %.2f heap allocations per batch on the built path%s\n",
              static_cast<double>(all) / 10000.0, keep_builder ? " with a kept builder" : "");
  return all;
}

TEST(BatchReceiveAllocTest, TheBuiltPathAllocatesNothing) {
  EXPECT_EQ(BuiltPathAllocations(false), 0u) << "heap allocations in 10000 batches";
}

TEST(BatchReceiveAllocTest, TheBuiltPathWithAKeptBuilderAllocatesNothing) {
  EXPECT_EQ(BuiltPathAllocations(true), 0u) << "heap allocations in 10000 batches";
}

// A column of a registered extension type over int64, built per batch and
// published: the subscriber's batches come from its graph, and the column's
// ExtensionArray and its storage array are the graph's own. Receiving and
// reading both allocates nothing per batch (each column(0) of such a batch
// made an ExtensionArray and a storage array, 4 allocations, before the
// graph kept them).
TEST(BatchReceiveAllocTest, AnExtensionColumnAndItsStorageAllocateNothing) {
  const std::string name = "alkaid.test.receive_stamp";
  ASSERT_OK(format::RegisterExtensionType(
      name, [name](const format::TypePtr& storage, const std::string& serialized) {
        return Result<format::TypePtr>(format::extension(name, serialized, storage));
      }));
  const format::TypePtr stamp = format::extension(name, "", format::int64());
  const auto schema = format::schema({format::field("t", stamp, false)});
  uint64_t receiving = 0;
  {
    Pair p;
    ASSERT_OK(p.ch.Create(256 << 10));
    ASSERT_OK_AND_ASSIGN(p.publisher, BatchPublisher::Create(p.ch.producer.get(), schema));
    SubscriberOptions so;
    so.consumer.wait_mode = shm::WaitMode::kBusyPoll;
    ASSERT_OK_AND_ASSIGN(p.subscriber, BatchSubscriber::Open(p.ch.name, schema, so));
    auto round = [&](int64_t i) {
      ASSERT_OK_AND_ASSIGN(auto pool, p.publisher->NewPool(kRows * 8));
      format::Int64Builder b(pool.get());
      ASSERT_OK(b.Reserve(kRows));
      for (int64_t r = 0; r < kRows; ++r) b.UnsafeAppend(i + r);
      ASSERT_OK_AND_ASSIGN(auto values, b.Finish());
      auto data = std::make_shared<format::ArrayData>(*values->data());
      data->type = stamp;
      ASSERT_OK_AND_ASSIGN(auto batch,
                           format::RecordBatch::Make(schema, kRows, {format::MakeArray(data)}));
      ASSERT_OK(p.publisher->Publish(*batch, pool.get()));
      const uint64_t before = counting_new::g_allocations.load();
      {
        format::RecordBatchPtr got;
        ASSERT_OK(p.subscriber->TryReceive(&got));
        ASSERT_NE(got, nullptr);
        const format::ArrayPtr& column = got->column(0);
        ASSERT_EQ(column->type_id(), format::TypeId::kExtension);
        const auto& storage = static_cast<const format::ExtensionArray&>(*column).storage();
        ASSERT_EQ(storage->type_id(), format::TypeId::kInt64);
        ASSERT_EQ(static_cast<const format::Int64Array&>(*storage).Value(kRows - 1), i + kRows - 1);
      }
      receiving += counting_new::g_allocations.load() - before;
    };
    for (int64_t i = 0; i < 2000; ++i) round(i);
    receiving = 0;
    for (int64_t i = 2000; i < 4000; ++i) round(i);
  }
  ASSERT_OK(format::UnregisterExtensionType(name));
  EXPECT_EQ(receiving, 0u) << "heap allocations receiving and reading 2000 extension batches";
}

// Batches of `type` (a string type) whose row 0 holds i letters in batch i
// and every other row three: the data's length, and so the Message's
// numbers, differ from every other batch of the run. Publishes and receives
// batches 0 to 263 and returns the heap allocations per batch received of
// the last 64; `hits` gets the subscriber's plan hits among those.
template <typename Builder, typename ArrayType>
void ReceiveNewNumbers(const format::TypePtr& type, const SubscriberOptions& options,
                       double* per_batch, uint64_t* hits) {
  Pair p;
  ASSERT_OK(p.ch.Create(256 << 10));
  const auto schema = format::schema({format::field("s", type, false)});
  ASSERT_OK_AND_ASSIGN(p.publisher, BatchPublisher::Create(p.ch.producer.get(), schema));
  ASSERT_OK_AND_ASSIGN(p.subscriber, BatchSubscriber::Open(p.ch.name, schema, options));
  const std::string letters(1000, 'x');
  uint64_t receiving = 0;
  auto round = [&](int64_t i) {
    // (A view builder takes its data in blocks of 32 KiB.)
    ASSERT_OK_AND_ASSIGN(auto pool, p.publisher->NewPool(64 << 10));
    Builder b(pool.get());
    for (int64_t r = 0; r < kRows; ++r) {
      ASSERT_OK(b.Append(std::string_view(letters).substr(0, r == 0 ? i : 3)));
    }
    ASSERT_OK_AND_ASSIGN(auto a, b.Finish());
    ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(schema, kRows, {a}));
    ASSERT_OK(p.publisher->Publish(*batch, pool.get()));
    const uint64_t before = counting_new::g_allocations.load();
    ASSERT_OK_AND_ASSIGN(auto got, p.subscriber->TryReceive());
    receiving += counting_new::g_allocations.load() - before;
    ASSERT_NE(got.batch, nullptr);
    ASSERT_EQ(got.batch->column(0)->length(), kRows);
    const format::ArrayPtr column = got.batch->column(0);  // held: `s` refers into it
    const auto& s = static_cast<const ArrayType&>(*column);
    ASSERT_EQ(s.GetView(0).size(), static_cast<size_t>(i));
    ASSERT_EQ(s.GetView(kRows - 1), "xxx");
  };
  for (int64_t i = 0; i < 200; ++i) round(i);
  receiving = 0;
  const uint64_t hits_before = p.subscriber->decode_cache_hits();
  for (int64_t i = 200; i < 264; ++i) round(i);
  *per_batch = static_cast<double>(receiving) / 64.0;
  *hits = p.subscriber->decode_cache_hits() - hits_before;
}

// A string column whose values change with every batch: its Message has
// numbers of its own every time, and the receiver makes each batch by a
// varying plan (the Message template's numbers read and checked, the batch
// made over the body without allocating) from the third batch on. The
// first is decoded in full and its structure noted; the second, of the same
// structure, is decoded in full and makes the plan. Taking the Message
// along (with_message, the default) copies it: one allocation.
TEST(BatchReceiveAllocTest, StringBatchesOfNewNumbersAreMadeWithoutAllocating) {
  SubscriberOptions so;
  so.consumer.wait_mode = shm::WaitMode::kBusyPoll;
  so.with_message = false;
  double per_batch = 0;
  uint64_t hits = 0;
  ReceiveNewNumbers<format::StringBuilder, format::StringArray>(format::utf8(), so, &per_batch,
                                                                &hits);
  std::printf("[ strings  ] %.2f heap allocations per received batch of new numbers\n", per_batch);
  EXPECT_EQ(hits, 64u);
  EXPECT_EQ(per_batch, 0.0);
  so.with_message = true;
  ReceiveNewNumbers<format::StringBuilder, format::StringArray>(format::utf8(), so, &per_batch,
                                                                &hits);
  EXPECT_EQ(hits, 64u);
  EXPECT_EQ(per_batch, 1.0);
}

// A view column (its variadic buffers vary in number: not a layout a
// varying plan covers) whose Message never repeats is decoded in full each
// time, and no plan is made for it (a plan is made for metadata only when
// its bytes come again: one made per batch, never used, took 17 allocations
// more: 32 against 15).
TEST(BatchReceiveAllocTest, MetadataThatNeverRepeatsIsNotCached) {
  SubscriberOptions so;
  so.consumer.wait_mode = shm::WaitMode::kBusyPoll;
  double per_batch = 0;
  uint64_t hits = 0;
  ReceiveNewNumbers<format::StringViewBuilder, format::StringViewArray>(format::utf8_view(), so,
                                                                        &per_batch, &hits);
  std::printf("[ views    ] %.2f heap allocations per received batch of new metadata\n", per_batch);
  EXPECT_EQ(hits, 0u);
  EXPECT_LE(per_batch, 20.0);
}

}  // namespace
}  // namespace alkaid::client
