// The client's fast paths: the publisher's metadata cache (a batch of the
// shape of the previous one reuses its encoded Message) and the
// subscriber's decode cache (a message whose metadata bytes and body length
// equal those of the last one decoded in full is rebuilt from its shape).
// Both must give exactly the batches the full paths give, fall back to the
// full path whenever anything differs, and stay safe against a producer
// that sends cached metadata with a body that does not fit it.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/validate.h"
#include "batch_layout_internal.h"
#include "client_test_util.h"

namespace alkaid::client {
namespace {

using namespace std::chrono_literals;
using testing::Channel;

format::SchemaPtr Int64Schema() {
  return format::schema({format::field("v", format::int64(), true)});
}

// `rows` values start, start+1, ...; every 5th null when `nulls`.
Result<format::RecordBatchPtr> BuildInts(ShmBatchPool* pool, const format::SchemaPtr& schema,
                                         int64_t rows, int64_t start, bool nulls) {
  format::Int64Builder b(pool);
  ALKAID_RETURN_NOT_OK(b.Reserve(rows));
  for (int64_t i = 0; i < rows; ++i) {
    if (nulls && i % 5 == 2) {
      ALKAID_RETURN_NOT_OK(b.AppendNull());
    } else {
      ALKAID_RETURN_NOT_OK(b.Append(start + i));
    }
  }
  ALKAID_ASSIGN_OR_RAISE(auto a, b.Finish());
  return format::RecordBatch::Make(schema, rows, {a});
}

::testing::AssertionResult CheckInts(const format::RecordBatch& batch, int64_t rows, int64_t start,
                                     bool nulls) {
  if (batch.num_rows() != rows) {
    return ::testing::AssertionFailure() << batch.num_rows() << " rows, expected " << rows;
  }
  Status st = format::ValidateFull(batch);
  if (!st.ok()) return ::testing::AssertionFailure() << st.ToString();
  auto v = std::static_pointer_cast<format::Int64Array>(batch.column(0));
  for (int64_t i = 0; i < rows; ++i) {
    const bool null = nulls && i % 5 == 2;
    if (v->IsNull(i) != null || (!null && v->Value(i) != start + i)) {
      return ::testing::AssertionFailure() << "row " << i << " of the batch starting at " << start;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(BatchFastPathTest, SameShapeReusesMetadataAndDecodeCache) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  auto schema = Int64Schema();
  ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
  ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(ch.name, schema));
  // Shapes: 64 rows without nulls (x3), 64 rows with nulls (x2), 10 rows,
  // back to 64 without nulls. Only a shape not seen among the last four
  // encodes and decodes in full.
  struct Case {
    int64_t rows;
    bool nulls;
  };
  const std::vector<Case> cases = {{64, false}, {64, false}, {64, false}, {64, true},
                                   {64, true},  {10, false}, {64, false}, {64, false}};
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
    const int64_t start = static_cast<int64_t>(i) * 1000;
    ASSERT_OK_AND_ASSIGN(auto batch,
                         BuildInts(pool.get(), schema, cases[i].rows, start, cases[i].nulls));
    ASSERT_OK(pub->Publish(*batch, pool.get()));
    ASSERT_OK_AND_ASSIGN(auto got, sub->Receive(1s));
    ASSERT_NE(got.batch, nullptr);
    EXPECT_TRUE(CheckInts(*got.batch, cases[i].rows, start, cases[i].nulls)) << "message " << i;
    // The metadata handed out is the verified Message of this batch.
    ASSERT_NE(got.metadata, nullptr);
    ASSERT_NE(got.body, nullptr);
  }
  EXPECT_EQ(pub->stats().batches, cases.size());
  EXPECT_EQ(pub->stats().metadata_reused, 5u);  // messages 1, 2, 4, 6, 7
  EXPECT_EQ(sub->decode_cache_hits(), 5u);
  // Six new shapes (1..6 rows), then four of them again, then the first:
  // the channel's shape table keeps every distinct shape (up to its
  // shape_count), so each repeat is sent and decoded by id.
  const uint64_t reused = pub->stats().metadata_reused;
  const uint64_t hits = sub->decode_cache_hits();
  std::vector<int64_t> sequence = {1, 2, 3, 4, 5, 6, 3, 4, 5, 6, 1};
  for (int64_t rows : sequence) {
    ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
    ASSERT_OK_AND_ASSIGN(auto batch, BuildInts(pool.get(), schema, rows, rows * 7, false));
    ASSERT_OK(pub->Publish(*batch, pool.get()));
    ASSERT_OK_AND_ASSIGN(auto got, sub->Receive(1s));
    EXPECT_TRUE(CheckInts(*got.batch, rows, rows * 7, false));
  }
  EXPECT_EQ(pub->stats().metadata_reused - reused, 5u);
  EXPECT_EQ(sub->decode_cache_hits() - hits, 5u);
}

// The publisher compares a batch with the shape of the last one in place:
// the same column at the same place in a region with more bytes allocated
// after it (a longer body) is another shape, with its own Message.
TEST(BatchFastPathTest, ALongerBodyIsAnotherShape) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  auto schema = Int64Schema();
  ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
  ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(ch.name, schema));
  for (int64_t extra : {0, 0, 128, 128, 0}) {
    ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
    ASSERT_OK_AND_ASSIGN(auto batch, BuildInts(pool.get(), schema, 64, extra, false));
    if (extra > 0) ASSERT_OK(pool->Allocate(extra).status());
    const uint64_t body = pool->used_bytes();
    ASSERT_OK(pub->Publish(*batch, pool.get()));
    ASSERT_OK_AND_ASSIGN(auto got, sub->Receive(1s));
    ASSERT_NE(got.batch, nullptr);
    EXPECT_TRUE(CheckInts(*got.batch, 64, extra, false));
    ASSERT_NE(got.body, nullptr);
    EXPECT_EQ(static_cast<uint64_t>(got.body->size()), body) << "extra " << extra;
  }
  EXPECT_EQ(pub->stats().metadata_reused, 3u);  // the second of each, and the last
}

// Batches Publish's common case leaves to its general way (a schema equal
// to the publisher's but another object; a channel that does not accept its
// consumers itself) are checked in full, and a repeated shape still goes by
// id.
TEST(BatchFastPathTest, TheGeneralWayReusesTheLastShapeToo) {
  for (bool accept : {true, false}) {
    SCOPED_TRACE(accept ? "another schema object" : "accept_on_publish false");
    Channel ch;
    shm::ChannelOptions o;
    o.accept_on_publish = accept;
    ASSERT_OK(ch.Create(1 << 20, o));
    auto schema = Int64Schema();
    auto equal = Int64Schema();
    ASSERT_NE(equal, schema);
    ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
    ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(ch.name, schema));
    for (int64_t i = 0; i < 4; ++i) {
      ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
      ASSERT_OK_AND_ASSIGN(auto batch,
                           BuildInts(pool.get(), accept ? equal : schema, 64, i * 100, false));
      ASSERT_OK(pub->Publish(*batch, pool.get()));
      ASSERT_OK_AND_ASSIGN(auto got, sub->Receive(1s));
      ASSERT_NE(got.batch, nullptr);
      EXPECT_TRUE(CheckInts(*got.batch, 64, i * 100, false));
    }
    EXPECT_EQ(pub->stats().batches, 4u);
    EXPECT_EQ(pub->stats().metadata_reused, 3u);
  }
}

// With the shape table full, new shapes travel inline; the subscriber
// still makes them by a plan.
TEST(BatchFastPathTest, FullShapeTableFallsBackToInlineMetadata) {
  Channel ch;
  shm::ChannelOptions o;
  o.shape_count = 2;
  ASSERT_OK(ch.Create(1 << 20, o));
  auto schema = Int64Schema();
  ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
  ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(ch.name, schema));
  const std::vector<int64_t> sequence = {1, 2, 3, 4, 3, 4, 3, 4, 1, 2};
  for (int64_t rows : sequence) {
    ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
    ASSERT_OK_AND_ASSIGN(auto batch, BuildInts(pool.get(), schema, rows, rows * 7, false));
    ASSERT_OK(pub->Publish(*batch, pool.get()));
    ASSERT_OK_AND_ASSIGN(auto got, sub->Receive(1s));
    EXPECT_TRUE(CheckInts(*got.batch, rows, rows * 7, false));
  }
  // 1 and 2 took the table's two entries: their repeats go by id (2
  // hits). 3 and 4 go inline each time, their Messages of one structure:
  // the first is decoded in full and its structure noted, the second
  // decoded in full makes a plan of varying numbers, which makes the four
  // after them (4 hits).
  EXPECT_EQ(pub->stats().metadata_reused, 2u);
  EXPECT_EQ(sub->decode_cache_hits(), 6u);
}

TEST(BatchFastPathTest, BatchCustomMetadataIsNeverTakenFromACache) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  auto schema = Int64Schema();
  ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
  ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(ch.name, schema));
  auto md = std::make_shared<format::KeyValueMetadata>();
  md->Append("frame", "42");
  // One shape throughout: tagged and plain batches alternate, built in
  // place and copied, twice (the second round meets warm caches).
  int64_t start = 0;
  for (int round = 0; round < 2; ++round) {
    for (bool copy : {false, true}) {
      for (bool tagged : {true, false, true}) {
        SCOPED_TRACE(::testing::Message() << "round " << round << (copy ? " copy" : " in place")
                                          << (tagged ? " tagged" : " plain"));
        ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
        ASSERT_OK_AND_ASSIGN(auto batch, BuildInts(pool.get(), schema, 64, start, true));
        if (tagged) batch = batch->WithMetadata(md);
        ASSERT_OK(copy ? pub->PublishCopy(*batch) : pub->Publish(*batch, pool.get()));
        ASSERT_OK_AND_ASSIGN(auto got, sub->Receive(1s));
        EXPECT_TRUE(CheckInts(*got.batch, 64, start, true));
        if (tagged) {
          ASSERT_NE(got.batch->metadata(), nullptr);
          EXPECT_TRUE(got.batch->metadata()->Equals(*md));
        } else {
          EXPECT_EQ(got.batch->metadata(), nullptr);
        }
        start += 1000;
      }
    }
  }
  // The plain in-place batches of the second round reused the first's Message.
  EXPECT_GT(pub->stats().metadata_reused, 0u);
  EXPECT_GT(sub->decode_cache_hits(), 0u);
}

// PublishCopy: a shape seen twice in a row goes into the shape table and
// travels by id from then on (the consumer's cached plan); shapes that never
// repeat (here a new row count each time, strings of new lengths) travel
// inline and take no entry of the table.
TEST(BatchFastPathTest, CopiesOfARepeatedShapeGoById) {
  Channel ch;
  shm::ChannelOptions o;
  o.shape_count = 4;
  ASSERT_OK(ch.Create(1 << 20, o));
  auto schema = Int64Schema();
  ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
  ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(ch.name, schema));
  const auto copy_and_check = [&](int64_t rows, int64_t start) {
    ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
    ASSERT_OK_AND_ASSIGN(auto batch, BuildInts(pool.get(), schema, rows, start, true));
    ASSERT_OK(pub->PublishCopy(*batch));
    ASSERT_OK_AND_ASSIGN(auto got, sub->Receive(1s));
    ASSERT_NE(got.batch, nullptr);
    EXPECT_TRUE(CheckInts(*got.batch, rows, start, true)) << rows << " rows from " << start;
  };
  // Ten shapes that never repeat: more than the table holds, none enters it.
  for (int64_t rows = 1; rows <= 10; ++rows) copy_and_check(rows, rows * 100);
  EXPECT_EQ(pub->stats().metadata_reused, 0u);
  // One shape five times: the second and every later one by id.
  for (int64_t i = 0; i < 5; ++i) copy_and_check(64, i * 1000);
  EXPECT_EQ(pub->stats().metadata_reused, 4u);
  EXPECT_GE(sub->decode_cache_hits(), 3u);
  // A second repeated shape takes a second entry; the first still goes by id.
  for (int64_t i = 0; i < 3; ++i) copy_and_check(32, i * 1000);
  copy_and_check(64, 7000);
  EXPECT_EQ(pub->stats().metadata_reused, 4u + 2u + 1u);
  EXPECT_EQ(pub->stats().copied_batches, 10u + 5u + 3u + 1u);

  // Strings whose lengths change every batch: inline each time.
  auto strings = format::schema({format::field("s", format::utf8())});
  Channel ch2;
  ASSERT_OK(ch2.Create(1 << 20, o));
  ASSERT_OK_AND_ASSIGN(auto spub, BatchPublisher::Create(ch2.producer.get(), strings));
  ASSERT_OK_AND_ASSIGN(auto ssub, BatchSubscriber::Open(ch2.name, strings));
  for (int i = 0; i < 6; ++i) {
    ASSERT_OK_AND_ASSIGN(auto pool, spub->NewPool(4096));
    format::StringBuilder b(pool.get());
    for (int r = 0; r < 8; ++r) ASSERT_OK(b.Append(std::string(static_cast<size_t>(i + r), 'x')));
    ASSERT_OK_AND_ASSIGN(auto a, b.Finish());
    ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(strings, 8, {a}));
    ASSERT_OK(spub->PublishCopy(*batch));
    ASSERT_OK_AND_ASSIGN(auto got, ssub->Receive(1s));
    ASSERT_OK(format::ValidateFull(*got.batch));
    auto s = std::static_pointer_cast<format::StringArray>(got.batch->column(0));
    for (int r = 0; r < 8; ++r)
      EXPECT_EQ(s->GetView(r), std::string(static_cast<size_t>(i + r), 'x'));
  }
  EXPECT_EQ(spub->stats().metadata_reused, 0u);
}

// Receive: batches of a cached shape are made by the plan over each body
// (buffers in the shared block), equal to what was published; a batch holds
// its block until it is dropped. The deprecated ReceiveInto gives the same.
TEST(BatchFastPathTest, CachedShapesGiveTheSameBatchesHoldingTheirBlocks) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  auto schema = Int64Schema();
  ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
  ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(ch.name, schema));
  ASSERT_OK_AND_ASSIGN(auto none, sub->TryReceive());
  EXPECT_EQ(none.batch, nullptr);
  format::RecordBatchPtr last;
  for (int64_t i = 0; i < 6; ++i) {
    const bool nulls = i % 2 == 1;
    ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
    ASSERT_OK_AND_ASSIGN(auto batch, BuildInts(pool.get(), schema, 64, i * 100, nulls));
    ASSERT_OK(pub->Publish(*batch, pool.get()));
    last.reset();
    ASSERT_OK_AND_ASSIGN(auto got, sub->Receive(1s));
    EXPECT_EQ(got.sequence, static_cast<uint64_t>(i));
    ASSERT_EQ(got.batch->num_columns(), 1);
    const auto& column = got.batch->column_data(0);
    EXPECT_EQ(column->null_count, nulls ? 13 : 0);
    EXPECT_EQ(column->buffers[0] == nullptr, !nulls);  // the validity bitmap
    EXPECT_TRUE(CheckInts(*got.batch, 64, i * 100, nulls));
    // Zero-copy: the values are in the shared block.
    EXPECT_TRUE(got.body->Contains(column->buffers[1]->data(), column->buffers[1]->size()));
    ASSERT_OK(format::Validate(*got.batch));
    last = std::move(got.batch);
  }
  // The first of each shape decodes in full, the rest come from the plans.
  EXPECT_EQ(sub->decode_cache_hits(), 4u);
  // The batch holds its block until it (and all taken from it) is dropped.
  auto values = last->column_data(0)->buffers[1];
  last.reset();
  ch.producer->Poll();
  EXPECT_EQ(ch.producer->consumers()[0].held_blocks, 1u);
  values.reset();
  // A buffer (or column, slice, export) kept after its batch pins the
  // batch's graph: the subscriber's next receive, here one that finds
  // nothing, sees it let go and lets the block go.
  ASSERT_OK_AND_ASSIGN(auto idle, sub->TryReceive());
  EXPECT_EQ(idle.batch, nullptr);
  ch.producer->Poll();
  EXPECT_EQ(ch.producer->consumers()[0].held_blocks, 0u);

  // The deprecated view: a holder of the same batch.
  ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
  ASSERT_OK_AND_ASSIGN(auto batch, BuildInts(pool.get(), schema, 64, 700, false));
  ASSERT_OK(pub->Publish(*batch, pool.get()));
  BatchView view;
  EXPECT_FALSE(view.valid());
  ASSERT_RAISES(kInvalid, view.ToRecordBatch());
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  ASSERT_OK(sub->ReceiveInto(&view, 1s));
#pragma GCC diagnostic pop
  ASSERT_TRUE(view.valid());
  EXPECT_EQ(view.sequence(), 6u);
  EXPECT_EQ(view.Values<int64_t>(0)[63], 763);
  ASSERT_OK_AND_ASSIGN(auto held, view.ToRecordBatch());
  EXPECT_TRUE(CheckInts(*held, 64, 700, false));
}

TEST(BatchFastPathTest, VariableWidthColumnsAreRevalidatedAndStillCorrect) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  auto schema = format::schema({format::field("s", format::utf8())});
  ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
  ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(ch.name, schema));
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
    format::StringBuilder b(pool.get());
    for (int r = 0; r < 8; ++r) ASSERT_OK(b.Append("v" + std::to_string(i * 10 + r)));
    ASSERT_OK_AND_ASSIGN(auto a, b.Finish());
    ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(schema, 8, {a}));
    ASSERT_OK(pub->Publish(*batch, pool.get()));
    ASSERT_OK_AND_ASSIGN(auto got, sub->Receive(1s));
    ASSERT_OK(format::ValidateFull(*got.batch));
    auto s = std::static_pointer_cast<format::StringArray>(got.batch->column(0));
    for (int r = 0; r < 8; ++r) EXPECT_EQ(s->GetView(r), "v" + std::to_string(i * 10 + r));
  }
  // Strings are never encoded from a cached shape (their metadata could
  // depend on the offsets).
  EXPECT_EQ(pub->stats().metadata_reused, 0u);
}

// A hostile producer replays the metadata of a cached message with bodies
// that do not fit it: every such message must fail on its own, and a good
// message afterwards must still decode.
TEST(BatchFastPathTest, CachedMetadataWithAWrongBodyIsRefused) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  auto schema = Int64Schema();
  ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
  ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(ch.name, schema));
  ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
  ASSERT_OK_AND_ASSIGN(auto batch, BuildInts(pool.get(), schema, 64, 7, true));
  ASSERT_OK(pub->Publish(*batch, pool.get()));
  ASSERT_OK_AND_ASSIGN(auto good, sub->Receive(1s));
  ASSERT_TRUE(CheckInts(*good.batch, 64, 7, true));
  const uint64_t body_length = static_cast<uint64_t>(good.body->size());
  const std::string metadata = good.metadata->ToString();

  // Messages as a hostile producer could write them: `md` inline, or the
  // id of the good batch's shape, over a block of 0xff bytes.
  auto send = [&](uint64_t block_bytes, uint64_t declared_body, const std::string& md,
                  uint32_t shape) -> Status {
    internal::UserWord user;
    user.body_length = declared_body;
    ALKAID_ASSIGN_OR_RAISE(auto loan, ch.producer->Loan(block_bytes));
    std::memset(loan.data().data(), 0xff, loan.data().size());
    return ch.producer->Publish(std::as_bytes(std::span(md.data(), md.size())), std::move(loan),
                                user.Pack(), shape);
  };
  // The shape, body declared longer than its block.
  ASSERT_OK(send(64, body_length, "", 1));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "exceeds its", sub->Receive(1s).status());
  // The shape, with a shorter body (fits the block): refused by the plan.
  ASSERT_OK(send(body_length, body_length - 64, "", 1));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "has a body of", sub->Receive(1s).status());
  // The same metadata inline with a shorter body: not a cached plan (the
  // body length differs), so it goes through Message::Open, which refuses
  // the size mismatch.
  ASSERT_OK(send(body_length, body_length - 64, metadata, 0));
  EXPECT_FALSE(sub->Receive(1s).ok());
  // One metadata byte changed: verified again from scratch.
  std::string flipped = metadata;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x5a);
  ASSERT_OK(send(body_length, body_length, flipped, 0));
  auto r = sub->Receive(1s);
  if (r.ok()) {
    // A flip that still verifies must still give a valid batch.
    ASSERT_OK(format::Validate(*r->batch));
  }
  // And the stream goes on.
  ASSERT_OK_AND_ASSIGN(auto pool2, pub->NewPool(4096));
  ASSERT_OK_AND_ASSIGN(auto batch2, BuildInts(pool2.get(), schema, 64, 99, true));
  ASSERT_OK(pub->Publish(*batch2, pool2.get()));
  ASSERT_OK_AND_ASSIGN(auto again, sub->Receive(1s));
  EXPECT_TRUE(CheckInts(*again.batch, 64, 99, true));
}

TEST(BatchFastPathTest, SubscriberFromOldestGetsBatchesPublishedBeforeItOpened) {
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  auto schema = Int64Schema();
  ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
  for (int64_t i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(4096));
    ASSERT_OK_AND_ASSIGN(auto batch, BuildInts(pool.get(), schema, 16, i * 100, false));
    ASSERT_OK(pub->Publish(*batch, pool.get()));
  }
  SubscriberOptions so;
  so.consumer.from_oldest = true;
  ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(ch.name, schema, so));
  ASSERT_OK_AND_ASSIGN(auto plain, BatchSubscriber::Open(ch.name, schema));
  // An idle producer accepts consumers when it polls (or publishes next).
  ch.producer->Poll();
  for (int64_t i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto got, sub->Receive(1s));
    EXPECT_EQ(got.sequence, static_cast<uint64_t>(i));
    EXPECT_TRUE(CheckInts(*got.batch, 16, i * 100, false));
  }
  ASSERT_OK_AND_ASSIGN(auto none, plain->TryReceive());
  EXPECT_EQ(none.batch, nullptr);
}

}  // namespace
}  // namespace alkaid::client
