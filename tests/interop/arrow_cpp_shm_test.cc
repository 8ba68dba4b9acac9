// Batches received from a topic (a real alkaid-broker, the producer in
// another process) handed to a running Arrow C++ through the C Data and C
// Stream Interfaces, computed on with Arrow's compute functions and
// released, after which the producer has its blocks back; and batches
// Arrow C++ hands to a Producer, in place when they lie in the producer's
// pool, copied once otherwise.

// Arrow's ABI header first: Alkaid's c_data.h must coexist with it.
#include <arrow/api.h>
#include <arrow/c/abi.h>
#include <arrow/c/bridge.h>
#include <arrow/compute/api.h>
#include <arrow/compute/initialize.h>
#include <arrow/json/from_string.h>

#include "alkaid/format/c_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "arrow_test_util.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "test_util.h"

namespace {

namespace af = alkaid::format;
namespace ac = alkaid::client;
using alkaid::broker::testing::BrokerProcess;
using alkaid::broker::testing::ConsumerOn;
using alkaid::broker::testing::ProducerOn;
using alkaid::broker::testing::TopicWithArena;
using namespace std::chrono_literals;

constexpr int64_t kRows = 1000;

af::SchemaPtr Schema() {
  return af::schema({af::field("id", af::int64()), af::field("price", af::float64()),
                     af::field("name", af::utf8())});
}

// Batch `b`: ids b*kRows.., prices id/2, names "n<id>"; in `pool` if given.
alkaid::Result<af::RecordBatchPtr> MakeBatch(int64_t b, af::MemoryPool* pool = nullptr) {
  if (pool == nullptr) pool = af::default_memory_pool();
  af::Int64Builder ids(pool);
  af::DoubleBuilder prices(pool);
  af::StringBuilder names(pool);
  for (int64_t i = b * kRows; i < (b + 1) * kRows; ++i) {
    ALKAID_RETURN_NOT_OK(ids.Append(i));
    ALKAID_RETURN_NOT_OK(prices.Append(static_cast<double>(i) / 2));
    ALKAID_RETURN_NOT_OK(names.Append("n" + std::to_string(i)));
  }
  ALKAID_ASSIGN_OR_RAISE(auto a, ids.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto p, prices.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto n, names.Finish());
  return af::RecordBatch::Make(Schema(), kRows, {a, p, n});
}

// Sum of the ids of batch `b`.
int64_t IdSum(int64_t b) { return (b * kRows + (b + 1) * kRows - 1) * kRows / 2; }

// Every buffer of `data` (children included) lies in a /dev/shm mapping of
// the broker's segments.
void ExpectInShm(const arrow::ArrayData& data, const std::string& prefix) {
  for (size_t i = 0; i < data.buffers.size(); ++i) {
    const auto& b = data.buffers[i];
    if (b == nullptr || b->size() == 0) continue;
    const std::string where = alkaid::broker::testing::MappingOf(b->data());
    EXPECT_EQ(where.rfind("/dev/shm/" + prefix, 0), 0u)
        << "buffer " << i << " at " << static_cast<const void*>(b->data()) << " is in '" << where
        << "'";
  }
  for (const auto& child : data.child_data) ExpectInShm(*child, prefix);
}

bool WriteByte(int fd) {
  const char c = 1;
  return ::write(fd, &c, 1) == 1;
}
bool ReadByte(int fd) {
  char c = 0;
  return ::read(fd, &c, 1) == 1;
}

// Child: polls its producer until its consumers hold `held` bodies (5 s).
bool ProducerSeesHeld(ac::Producer* producer, uint64_t held) {
  for (int i = 0; i < 500; ++i) {
    producer->Poll();
    if (producer->stats().held_by_consumers == held) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(ArrowCppShmTest, ReceivedBatchesComputedOnByArrowThenBlocksFree) {
  ASSERT_ARROW_OK(arrow::compute::Initialize());
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, ac::BrokerClient::Connect(broker.socket()));
  ASSERT_OK(admin->CreateTopic("ticks", Schema()).status());
  ASSERT_OK_AND_ASSIGN(auto consumer, ac::Consumer::Open("ticks", ConsumerOn(broker)));
  int to_child[2], to_parent[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(to_parent), 0);
  constexpr int kBatches = 3;
  const pid_t child = alkaid::broker::testing::ForkTestChild();
  if (child == 0) {
    // The producer process: publishes in place, then reports on its blocks.
    auto producer =
        ac::Producer::Open("ticks", Schema(), ProducerOn(broker, TopicWithArena(8 << 20)));
    if (!producer.ok()) ::_exit(1);
    for (int64_t b = 0; b < kBatches; ++b) {
      auto pool = (*producer)->NewBatchPool(256 * 1024);
      if (!pool.ok()) ::_exit(2);
      auto batch = MakeBatch(b, pool->get());
      if (!batch.ok() || !(*producer)->Publish(**batch, pool->get()).ok()) ::_exit(3);
    }
    if (!ReadByte(to_child[0])) ::_exit(4);  // the parent holds only Arrow's batches
    if (!ProducerSeesHeld(producer->get(), kBatches)) ::_exit(5);
    if (!WriteByte(to_parent[1])) ::_exit(6);
    if (!ReadByte(to_child[0])) ::_exit(7);  // Arrow released them
    if (!ProducerSeesHeld(producer->get(), 0)) ::_exit(8);
    (void)(*producer)->Close();
    ::_exit(0);
  }
  // Register on the child's channel (it waits for us), then receive.
  std::vector<std::shared_ptr<arrow::RecordBatch>> theirs;
  for (int b = 0; b < kBatches; ++b) {
    ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(10s));
    ArrowArray c_array;
    ArrowSchema c_schema;
    ASSERT_OK(consumer->ExportBatch(*batch, &c_array, &c_schema));
    ASSERT_ARROW_OK_AND_ASSIGN(auto imported, arrow::ImportRecordBatch(&c_array, &c_schema));
    ASSERT_ARROW_OK(imported->ValidateFull());
    for (int c = 0; c < imported->num_columns(); ++c) {
      ExpectInShm(*imported->column_data(c), broker.name() + ".");
    }
    // Zero-copy: Arrow's ids are the received ones, in the shared mapping.
    EXPECT_EQ(imported->column_data(0)->buffers[1]->data(),
              batch->column_data(0)->buffers[1]->data());
    // Computed on by Arrow C++.
    ASSERT_ARROW_OK_AND_ASSIGN(auto sum, arrow::compute::Sum(imported->column(0)));
    EXPECT_EQ(sum.scalar_as<arrow::Int64Scalar>().value, IdSum(b));
    ASSERT_ARROW_OK_AND_ASSIGN(auto total, arrow::compute::Sum(imported->column(1)));
    EXPECT_DOUBLE_EQ(total.scalar_as<arrow::DoubleScalar>().value,
                     static_cast<double>(IdSum(b)) / 2);
    ASSERT_ARROW_OK_AND_ASSIGN(auto lengths,
                               arrow::compute::CallFunction("utf8_length", {imported->column(2)}));
    ASSERT_ARROW_OK_AND_ASSIGN(auto longest, arrow::compute::MinMax(lengths));
    EXPECT_GE(longest.scalar_as<arrow::StructScalar>().value[1]->ToString().size(), 1u);
    theirs.push_back(std::move(imported));
  }
  EXPECT_EQ(consumer->stats().exported_held, static_cast<uint64_t>(kBatches));
  consumer.reset();  // only Arrow's batches hold the blocks now
  ASSERT_TRUE(WriteByte(to_child[1]));
  ASSERT_TRUE(ReadByte(to_parent[0])) << "the producer did not see its blocks held";
  theirs.clear();  // Arrow releases: each block goes back to the producer
  ASSERT_TRUE(WriteByte(to_child[1]));
  EXPECT_EQ(alkaid::broker::testing::Wait(child), 0);
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) ::close(fd);
}

TEST(ArrowCppShmTest, TopicAsAnArrowRecordBatchReader) {
  ASSERT_ARROW_OK(arrow::compute::Initialize());
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(
      auto producer,
      ac::Producer::Open("t", Schema(), ProducerOn(broker, TopicWithArena(8 << 20))));
  ASSERT_OK_AND_ASSIGN(auto consumer, ac::Consumer::Open("t", ConsumerOn(broker)));
  for (int64_t b = 0; b < 4; ++b) {
    ASSERT_OK_AND_ASSIGN(auto pool, producer->NewBatchPool(256 * 1024));
    ASSERT_OK_AND_ASSIGN(auto batch, MakeBatch(b, pool.get()));
    ASSERT_OK(producer->Publish(*batch, pool.get()));
  }
  // Close waits for the consumer to read everything: on another thread.
  alkaid::Status closed;
  std::thread closer([&] { closed = producer->Close(); });
  ArrowArrayStream stream;
  ASSERT_OK(ac::Consumer::ExportStream(std::move(consumer), &stream));
  auto reader = arrow::ImportRecordBatchReader(&stream);
  auto read = reader.ok() ? (*reader)->ToTable() : reader.status();
  closer.join();
  ASSERT_OK(closed);
  ASSERT_ARROW_OK_AND_ASSIGN(auto table, std::move(read));
  EXPECT_EQ(table->num_rows(), 4 * kRows);
  ASSERT_ARROW_OK_AND_ASSIGN(auto sum, arrow::compute::Sum(table->column(0)));
  EXPECT_EQ(sum.scalar_as<arrow::Int64Scalar>().value, IdSum(0) + IdSum(1) + IdSum(2) + IdSum(3));
  for (const auto& chunk : table->column(0)->chunks()) {
    ExpectInShm(*chunk->data(), broker.name() + ".");
  }
}

TEST(ArrowCppShmTest, ArrowBatchesPublishedInPlaceOrCopiedOnce) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(
      auto producer,
      ac::Producer::Open("t", Schema(), ProducerOn(broker, TopicWithArena(8 << 20))));
  ASSERT_OK_AND_ASSIGN(auto consumer, ac::Consumer::Open("t", ConsumerOn(broker)));
  // Built in the producer's pool, handed to Arrow C++, which passes (a
  // projection of) it back: published without a copy.
  {
    ASSERT_OK_AND_ASSIGN(auto pool, producer->NewBatchPool(256 * 1024));
    ASSERT_OK_AND_ASSIGN(auto batch, MakeBatch(0, pool.get()));
    ArrowArray c_array;
    ArrowSchema c_schema;
    ASSERT_OK(af::ExportRecordBatch(*batch, &c_array, &c_schema));
    batch.reset();
    ASSERT_ARROW_OK_AND_ASSIGN(auto arrow_batch, arrow::ImportRecordBatch(&c_array, &c_schema));
    ASSERT_ARROW_OK_AND_ASSIGN(auto same, arrow_batch->SelectColumns({0, 1, 2}));
    arrow_batch.reset();
    ASSERT_ARROW_OK(arrow::ExportRecordBatch(*same, &c_array, &c_schema));
    same.reset();
    ASSERT_OK(producer->PublishArrowArray(&c_array, &c_schema, pool.get()));
  }
  EXPECT_EQ(producer->stats().arrow_zero_copy, 1u);
  EXPECT_EQ(producer->stats().copied_bytes, 0u);
  // Arrow's own heap memory: one copy.
  std::shared_ptr<arrow::Schema> arrow_schema;
  {
    ArrowSchema c_schema;
    ASSERT_OK(af::ExportSchema(*Schema(), &c_schema));
    ASSERT_ARROW_OK_AND_ASSIGN(arrow_schema, arrow::ImportSchema(&c_schema));
  }
  ASSERT_ARROW_OK_AND_ASSIGN(
      auto rows, arrow::json::ArrayFromJSONString(arrow::struct_(arrow_schema->fields()),
                                                  R"([{"id": 1, "price": 0.5, "name": "a"},
                                                      {"id": 2, "price": null, "name": "bb"}])"));
  ASSERT_ARROW_OK_AND_ASSIGN(auto heap, arrow::RecordBatch::FromStructArray(rows));
  {
    ArrowArray c_array;
    ArrowSchema c_schema;
    ASSERT_ARROW_OK(arrow::ExportRecordBatch(*heap, &c_array, &c_schema));
    ASSERT_OK(producer->PublishArrowArray(&c_array, &c_schema));
  }
  EXPECT_EQ(producer->stats().arrow_copied, 1u);
  const uint64_t one_copy = producer->stats().copied_bytes;
  EXPECT_GT(one_copy, 0u);
  // An Arrow stream of two heap batches: one copy each.
  {
    ASSERT_ARROW_OK_AND_ASSIGN(auto reader,
                               arrow::RecordBatchReader::Make({heap, heap}, arrow_schema));
    ArrowArrayStream c_stream;
    ASSERT_ARROW_OK(arrow::ExportRecordBatchReader(reader, &c_stream));
    ASSERT_OK_AND_ASSIGN(uint64_t n, producer->PublishArrowStream(&c_stream));
    EXPECT_EQ(n, 2u);
  }
  EXPECT_EQ(producer->stats().arrow_copied, 3u);
  EXPECT_EQ(producer->stats().copied_bytes, 3 * one_copy);
  // The consumer gets them all, equal to what Arrow had.
  ASSERT_OK_AND_ASSIGN(auto first, consumer->Next(5s));
  ASSERT_OK_AND_ASSIGN(auto expected, MakeBatch(0));
  EXPECT_TRUE(first->Equals(*expected));
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto got, consumer->Next(5s));
    ArrowArray c_array;
    ArrowSchema c_schema;
    ASSERT_OK(consumer->ExportBatch(*got, &c_array, &c_schema));
    ASSERT_ARROW_OK_AND_ASSIGN(auto back, arrow::ImportRecordBatch(&c_array, &c_schema));
    EXPECT_TRUE(back->Equals(*heap)) << back->ToString();
  }
  ASSERT_OK(producer->Close());
}

}  // namespace
