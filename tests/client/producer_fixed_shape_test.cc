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
