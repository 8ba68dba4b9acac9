// Through the public API: a Producer's FixedShapeWriter and huge-page body
// segment, with a real broker (tests/broker/broker_process.h starts one).

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <stop_token>
#include <string>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/client/row_producer.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/validate.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "shm_test_util.h"
#include "test_util.h"

namespace alkaid::client {
namespace {

using namespace std::chrono_literals;
using broker::testing::BrokerProcess;

format::SchemaPtr IdSchema() {
  return format::schema({format::field("id", format::int64(), false)});
}

// A writer of `rows` int64 ids, from a prototype built in a pool of the
// producer's (both gone once the writer is made).
Result<std::unique_ptr<FixedShapeWriter>> NewWriter(Producer* producer, int64_t rows) {
  ALKAID_ASSIGN_OR_RAISE(auto pool, producer->NewBatchPool(static_cast<uint64_t>(rows) * 8));
  format::Int64Builder b(pool.get());
  for (int64_t r = 0; r < rows; ++r) ALKAID_RETURN_NOT_OK(b.Append(r));
  ALKAID_ASSIGN_OR_RAISE(auto a, b.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto prototype, format::RecordBatch::Make(IdSchema(), rows, {a}));
  return producer->NewFixedShapeWriter(*prototype, *pool);
}

TEST(BatchProducerFixedShapeTest, WriterBatchesArriveAndCountForCloseOnHugePages) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK_AND_ASSIGN(bool created, admin->CreateTopic("fixed", IdSchema()));
  EXPECT_TRUE(created);
  ProducerOptions po;
  po.socket_path = broker.socket();
  po.topic.arena_bytes = 4 << 20;
  po.huge_pages = shm::HugePages::kTry;
  po.drain_timeout = 60s;  // a guard: the wait below is cancelled
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("fixed", IdSchema(), po));
  ConsumerOptions co;
  co.socket_path = broker.socket();
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("fixed", co));

  constexpr int64_t kRows = 16;
  ASSERT_OK_AND_ASSIGN(auto writer, NewWriter(producer.get(), kRows));
  constexpr int64_t kBatches = 200;
  const void* last_buffer = nullptr;
  for (int64_t n = 0; n < kBatches; ++n) {
    ASSERT_OK(writer->Begin());
    auto* v = reinterpret_cast<int64_t*>(writer->buffer(1).data());
    for (int64_t r = 0; r < kRows; ++r) v[r] = n * 1000 + r;
    last_buffer = v;
    ASSERT_OK(writer->Publish());
  }
  EXPECT_EQ(producer->stats().published, static_cast<uint64_t>(kBatches));
  // Huge pages were asked with kTry: the producer says what the kernel did.
  // Its buffers lie in a PMD-mapped (2 MiB page) mapping exactly when it
  // reports huge pages (either is right on a given kernel).
  const long pmd_kb = shm::testing::ShmemPmdMappedKb(last_buffer);
  ASSERT_GE(pmd_kb, 0) << "the writer's buffer lies in no mapping of /proc/self/smaps";
  EXPECT_EQ(producer->huge_pages(), pmd_kb > 0) << "ShmemPmdMapped " << pmd_kb << " kB";
  // Close waits for the consumer to read every batch the writer published
  // (a writer whose batches did not count would let it return at once, OK).
  // The consumer has read none yet; a stop already requested makes Close's
  // wait return at its first look, Cancelled, saying what it waited for.
  std::stop_source stop;
  stop.request_stop();
  producer->set_stop(stop.get_token());
  const Status closed = producer->Close();
  ASSERT_RAISES(kCancelled, closed);
  EXPECT_NE(closed.message().find("wait for the consumers to read the " + std::to_string(kBatches) +
                                  " messages published"),
            std::string::npos)
      << closed.ToString();
  EXPECT_NE(closed.message().find(", at 0)"), std::string::npos) << closed.ToString();
  for (int64_t n = 0; n < kBatches; ++n) {
    ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(5s));
    ASSERT_OK(format::ValidateFull(*batch));
    auto ids = std::static_pointer_cast<format::Int64Array>(batch->column(0));
    ASSERT_EQ(ids->length(), kRows);
    ASSERT_EQ(ids->Value(0), n * 1000);
    ASSERT_EQ(ids->Value(kRows - 1), n * 1000 + kRows - 1);
  }
  ASSERT_RAISES(kEndOfStream, consumer->Next(5s));
  // After Close the writer cannot take a region (the channel is closed).
  ASSERT_RAISES(kInvalid, writer->Begin());
  ASSERT_RAISES(kInvalid, writer->Publish());
  writer.reset();
  producer.reset();
}

// A producer that publishes only through a FixedShapeWriter answers its
// broker session's requests for figures too: the topic's held bodies (here
// every batch the consumer read and keeps) reach ListTopics. (They stayed 0
// when the writer's publish did not fill them.)
TEST(BatchProducerFixedShapeTest, WriterPublishesReportTheProducersFigures) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ProducerOptions po;
  po.socket_path = broker.socket();
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("figures", IdSchema(), po));
  ConsumerOptions co;
  co.socket_path = broker.socket();
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("figures", co));
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK_AND_ASSIGN(auto writer, NewWriter(producer.get(), 4));
  // The session asks every 500 ms; the producer answers at its next
  // publish: publish and keep batches until a report counts them held.
  std::vector<format::RecordBatchPtr> kept;
  uint64_t held = 0;
  EXPECT_TRUE(broker::testing::WaitUntil([&] {
    if (!writer->Begin(FixedShapeWriter::Fill::kNone).ok()) return true;
    std::memset(writer->buffer(1).data(), 0, writer->buffer(1).size());
    if (!writer->Publish().ok()) return true;
    auto batch = consumer->Next(5s);
    if (!batch.ok()) return true;
    kept.push_back(*batch);
    auto topics = admin->ListTopics();
    if (!topics.ok()) return true;
    for (const auto& t : *topics) {
      if (t.name == "figures") held = t.held;
    }
    return held >= 3;
  }));
  // What the report counted was held then, and is still.
  EXPECT_GE(held, 3u);
  EXPECT_LE(held, kept.size());
}

// A writer made from the schema alone (NewFixedShapeWriter(rows)): every
// fixed-width layout gets its buffer, zeroed in the prototype, and batches
// arrive with what was written. Publish(&held) keeps the region: what it
// published stays there, read-only, while the arena turns over many times
// (the region without the hold is reused as soon as the consumer lets go).
TEST(BatchProducerFixedShapeTest, AWriterOfRowsIsMadeFromTheSchemaAndCanHoldWhatItPublished) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  const auto schema = format::schema(
      {format::field("i", format::int32(), false), format::field("f", format::float64()),
       format::field("b", format::boolean()), format::field("w", format::fixed_size_binary(3))});
  ProducerOptions po;
  po.socket_path = broker.socket();
  po.topic.arena_bytes = 64 << 10;
  po.topic.slot_count = 4;
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("rows", schema, po));
  ConsumerOptions co;
  co.socket_path = broker.socket();
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("rows", co));

  constexpr int64_t kRows = 5;
  ASSERT_OK_AND_ASSIGN(auto writer, producer->NewFixedShapeWriter(kRows));
  ASSERT_EQ(writer->num_buffers(), 8u);
  ASSERT_OK(writer->Begin());  // Fill::kPrototype: zeros
  const std::vector<size_t> sizes = {0, 4 * kRows, 0, 8 * kRows, 0, 1, 0, 3 * kRows};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::span<uint8_t> buffer = writer->buffer(i);
    ASSERT_EQ(buffer.size(), sizes[i]) << "buffer " << i;
    for (const uint8_t byte : buffer) ASSERT_EQ(byte, 0) << "buffer " << i;
  }
  auto* ints = reinterpret_cast<int32_t*>(writer->buffer(1).data());
  for (int32_t r = 0; r < kRows; ++r) ints[r] = 100 + r;
  writer->buffer(5)[0] = 0b10101;
  std::memcpy(writer->buffer(7).data(), "abcdefghijklmno", 3 * kRows);
  shm::ChannelLoan held;
  ASSERT_OK(writer->Publish(&held));
  ASSERT_TRUE(held.valid());
  const auto* held_ints = reinterpret_cast<const int32_t*>(held.data().data());
  ASSERT_EQ(held_ints, ints);  // the very region the writer filled
  {
    ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(5s));
    ASSERT_OK(format::ValidateFull(*batch));
    ASSERT_EQ(batch->num_rows(), kRows);
    // column(i) makes an array each time: kept while they are read.
    const format::ArrayPtr columns[] = {batch->column(0), batch->column(1), batch->column(2),
                                        batch->column(3)};
    const auto& i = static_cast<const format::Int32Array&>(*columns[0]);
    const auto& f = static_cast<const format::DoubleArray&>(*columns[1]);
    const auto& b = static_cast<const format::BooleanArray&>(*columns[2]);
    const auto& w = static_cast<const format::FixedSizeBinaryArray&>(*columns[3]);
    for (int64_t r = 0; r < kRows; ++r) {
      EXPECT_EQ(i.Value(r), 100 + r);
      EXPECT_EQ(f.Value(r), 0.0);
      EXPECT_EQ(b.Value(r), r % 2 == 0) << r;
      EXPECT_EQ(w.GetView(r), std::string_view("abcdefghijklmno").substr(3 * r, 3));
      EXPECT_FALSE(i.IsNull(r) || f.IsNull(r) || b.IsNull(r) || w.IsNull(r));
    }
  }
  // 1,000 more batches through a 64 KiB arena (each region reused as soon
  // as the consumer lets go of it): the held one is not among them.
  for (int n = 0; n < 1000; ++n) {
    ASSERT_OK(writer->Begin(FixedShapeWriter::Fill::kNone));
    std::memset(writer->buffer(1).data(), 0xff, writer->buffer(1).size());
    ASSERT_NE(reinterpret_cast<const int32_t*>(writer->buffer(1).data()), held_ints);
    ASSERT_OK(writer->Publish());
    ASSERT_OK(consumer->Next(5s).status());
  }
  for (int32_t r = 0; r < kRows; ++r) EXPECT_EQ(held_ints[r], 100 + r);
  held.Reset();  // and then the region is the arena's again
  bool reused = false;
  for (int n = 0; n < 1000 && !reused; ++n) {
    ASSERT_OK(writer->Begin(FixedShapeWriter::Fill::kNone));
    reused = reinterpret_cast<const int32_t*>(writer->buffer(1).data()) == held_ints;
    ASSERT_OK(writer->Publish());
    ASSERT_OK(consumer->Next(5s).status());
  }
  EXPECT_TRUE(reused);
  // Without a region, Publish(&held) refuses as Publish() does.
  ASSERT_RAISES(kInvalid, writer->Publish(&held));
  EXPECT_FALSE(held.valid());
}

TEST(BatchProducerFixedShapeTest, AWriterOfRowsNeedsFixedWidthColumnsAndRowsInRange) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ProducerOptions po;
  po.socket_path = broker.socket();
  const auto schema =
      format::schema({format::field("id", format::int64()), format::field("name", format::utf8())});
  ASSERT_OK_AND_ASSIGN(auto mixed, Producer::Open("mixed", schema, po));
  const auto refused = mixed->NewFixedShapeWriter(4);
  ASSERT_RAISES(kNotImplemented, refused);
  EXPECT_NE(refused.status().message().find("column 1 ('name') has type string"), std::string::npos)
      << refused.status().ToString();
  ASSERT_OK_AND_ASSIGN(auto ids, Producer::Open("ids", IdSchema(), po));
  ASSERT_RAISES(kInvalid, ids->NewFixedShapeWriter(-1));
  ASSERT_RAISES(kInvalid, ids->NewFixedShapeWriter(int64_t{1} << 41));
  ASSERT_OK_AND_ASSIGN(auto empty, ids->NewFixedShapeWriter(0));  // an empty batch is a batch
  ASSERT_OK(empty->Begin());
  EXPECT_TRUE(empty->buffer(1).empty());
  ASSERT_OK(empty->Publish());
}

// Row topics have no writer: a RowProducer has no NewFixedShapeWriter (it
// used to be refused at run time, Invalid), a Producer has one.
template <typename P>
concept HasFixedShapeWriter = requires(P& producer, const format::RecordBatch& prototype,
                                       const ShmBatchPool& pool) {
  producer.NewFixedShapeWriter(prototype, pool);
};
static_assert(HasFixedShapeWriter<Producer>);
static_assert(!HasFixedShapeWriter<RowProducer>);

}  // namespace
}  // namespace alkaid::client
