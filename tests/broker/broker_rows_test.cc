// Unsafe-row topics and column subsets through a real alkaid-broker: row
// batches published by another process and received zero-copy, topic
// kinds checked at attach (and, for what a producer can call, at compile
// time), `alkaid publish --unsafe-row` / `alkaid
// subscribe` (started before the topic exists), `--columns`.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <sstream>
#include <utility>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/client/row_consumer.h"
#include "alkaid/client/row_producer.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/compare.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/ipc/writer.h"
#include "alkaid/format/unsafe_row.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using client::BrokerClient;
using client::Consumer;
using client::Producer;
using client::RowConsumer;
using client::RowProducer;
using client::TopicKind;
using testing::BrokerProcess;
using testing::ReadFile;
using testing::ShmNames;
using testing::WaitForConsumers;
using testing::WaitNoSegments;
using namespace std::chrono_literals;

format::SchemaPtr RowSchema() {
  return format::schema({format::field("id", format::int64(), false),
                         format::field("name", format::utf8()),
                         format::field("score", format::float64())});
}

// Rows first .. first+rows-1; every third name and every fifth score null.
Result<format::RecordBatchPtr> MakeRows(int64_t first, int64_t rows) {
  format::Int64Builder ids;
  format::StringBuilder names;
  format::DoubleBuilder scores;
  for (int64_t i = first; i < first + rows; ++i) {
    ALKAID_RETURN_NOT_OK(ids.Append(i));
    if (i % 3 == 0) {
      ALKAID_RETURN_NOT_OK(names.AppendNull());
    } else {
      ALKAID_RETURN_NOT_OK(names.Append("row-" + std::to_string(i) + std::string(i % 17, 'x')));
    }
    if (i % 5 == 0) {
      ALKAID_RETURN_NOT_OK(scores.AppendNull());
    } else {
      ALKAID_RETURN_NOT_OK(scores.Append(static_cast<double>(i) * 0.5));
    }
  }
  ALKAID_ASSIGN_OR_RAISE(auto a, ids.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto b, names.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto c, scores.Finish());
  return format::RecordBatch::Make(RowSchema(), rows, {a, b, c});
}

client::ProducerOptions RowProducerOn(const BrokerProcess& broker) {
  client::TopicOptions topic = testing::TopicWithArena();
  topic.slot_count = 16;
  return testing::ProducerOn(broker, topic);
}

// True if `address` lies in a mapping of a /dev/shm object named
// `prefix`* (from /proc/self/maps).
bool InShm(const void* address, const std::string& prefix) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto a = reinterpret_cast<uintptr_t>(address);
  while (std::getline(maps, line)) {
    if (line.find("/dev/shm/" + prefix) == std::string::npos) continue;
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi) return true;
  }
  return false;
}

// Each producer type has only the calls that fit its topic's kind: what used
// to be refused at run time (Invalid) does not compile.
template <typename P>
concept CanPublishRows = requires(P& producer, const format::RecordBatch& batch) {
  producer.PublishRows(batch);
  producer.PublishRowBatch(std::span<const uint8_t>());
};
template <typename P>
concept CanPublishBatches = requires(P& producer, const format::RecordBatch& batch,
                                     client::ShmBatchPool* pool) {
  producer.Publish(batch, pool);
  producer.PublishCopy(batch);
  producer.NewBatchPool(uint64_t{1});
};
template <typename C>
concept CanReceiveRows = requires(C& consumer) {
  consumer.NextRows(std::chrono::nanoseconds(0));
  consumer.TryNextRows();
};
// The same for consumers (a Consumer still reads a row topic as record
// batches if its options allow it, docs/CLIENT.md).
static_assert(CanPublishBatches<Producer> && !CanPublishRows<Producer>);
static_assert(CanPublishRows<RowProducer> && !CanPublishBatches<RowProducer>);
static_assert(CanReceiveRows<RowConsumer> && !CanReceiveRows<Consumer>);

// A forked producer publishes 40 row batches (some through PublishRowBatch
// with rows it encoded itself); this process receives each as a view of
// the shared block and decodes it to exactly the source batch.
TEST(BrokerRowsTest, RowBatchesFromAnotherProcessRoundTrip) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  client::TopicOptions topic_options;
  topic_options.kind = TopicKind::kUnsafeRow;
  topic_options.slot_count = 16;
  ASSERT_OK_AND_ASSIGN(bool created, admin->CreateTopic("rows", RowSchema(), topic_options));
  EXPECT_TRUE(created);
  // A RowConsumer: it attaches only to a row topic.
  ASSERT_OK_AND_ASSIGN(auto consumer, RowConsumer::Open("rows", testing::ConsumerOn(broker)));

  constexpr int kBatches = 40;
  const pid_t child = testing::ForkTestChild();
  if (child == 0) {
    auto producer = RowProducer::Open("rows", RowSchema(), RowProducerOn(broker));
    if (!producer.ok()) ::_exit(1);
    for (int b = 0; b < kBatches; ++b) {
      auto batch = MakeRows(b * 100, 1 + b * 7);
      if (!batch.ok()) ::_exit(2);
      Status st;
      if (b % 4 == 3) {
        auto encoded = format::EncodeRowBatch(**batch);
        if (!encoded.ok()) ::_exit(3);
        st = (*producer)->PublishRowBatch(
            {(*encoded)->data(), static_cast<std::size_t>((*encoded)->size())});
      } else {
        st = (*producer)->PublishRows(**batch);
      }
      if (!st.ok()) ::_exit(4);
    }
    // (A row producer has no record-batch calls: the static_asserts above.)
    ::_exit((*producer)->Close().ok() ? 0 : 6);
  }
  std::vector<client::ReceivedRows> held;
  for (int b = 0; b < kBatches; ++b) {
    SCOPED_TRACE(b);
    ASSERT_OK_AND_ASSIGN(auto rows, consumer->NextRows(10s));
    ASSERT_NE(rows.data, nullptr);
    EXPECT_EQ(rows.num_rows, 1 + b * 7);
    // Zero-copy: the rows are read where the producer wrote them.
    EXPECT_TRUE(InShm(rows.data->data(), broker.name() + "."));
    ASSERT_OK_AND_ASSIGN(auto expected, MakeRows(b * 100, 1 + b * 7));
    ASSERT_OK_AND_ASSIGN(auto encoded, format::EncodeRowBatch(*expected));
    // Byte for byte what the producer encoded.
    ASSERT_EQ(rows.data->size(), encoded->size());
    EXPECT_EQ(std::memcmp(rows.data->data(), encoded->data(), encoded->size()), 0);
    ASSERT_OK_AND_ASSIGN(auto views, rows.Rows());
    EXPECT_EQ(static_cast<int64_t>(views.size()), rows.num_rows);
    ASSERT_OK_AND_ASSIGN(auto decoded, rows.ToRecordBatch());
    ASSERT_OK(format::CheckRecordBatchEquals(*expected, *decoded));
    if (b % 10 == 0) held.push_back(std::move(rows));  // kept beyond later receives
  }
  ASSERT_RAISES(kEndOfStream, consumer->NextRows(10s));
  EXPECT_EQ(testing::Wait(child), 0);
  // Views held past the end of the stream (and the producer's exit) are
  // still readable: the mapping and the block reference live with them.
  for (std::size_t i = 0; i < held.size(); ++i) {
    ASSERT_OK_AND_ASSIGN(
        auto expected, MakeRows(static_cast<int64_t>(i) * 1000, 1 + static_cast<int64_t>(i) * 70));
    ASSERT_OK_AND_ASSIGN(auto decoded, held[i].ToRecordBatch());
    ASSERT_OK(format::CheckRecordBatchEquals(*expected, *decoded));
  }
  held.clear();
  ASSERT_OK(consumer->Close());
  EXPECT_TRUE(WaitNoSegments(broker.name() + "."));
}

// PublishRows encodes straight into the shared block (nothing counted as
// copied); PublishRowBatch copies the caller's bytes once. Both bodies are
// exactly the row batch EncodeRowBatch makes, in a block of exactly its
// size.
TEST(BrokerRowsTest, PublishRowsEncodesInPlace) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto producer,
                       RowProducer::Open("rows", RowSchema(), RowProducerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto consumer, RowConsumer::Open("rows", testing::ConsumerOn(broker)));
  ASSERT_TRUE(WaitForConsumers(broker.socket(), "rows", 1));

  ASSERT_OK_AND_ASSIGN(auto first, MakeRows(0, 257));
  ASSERT_OK_AND_ASSIGN(auto first_encoded, format::EncodeRowBatch(*first));
  ASSERT_OK_AND_ASSIGN(int64_t first_size, format::EncodedRowBatchSize(*first));
  EXPECT_EQ(first_size, first_encoded->size());
  ASSERT_OK(producer->PublishRows(*first));
  EXPECT_EQ(producer->stats().copied_bytes, 0u);

  ASSERT_OK_AND_ASSIGN(auto second, MakeRows(1000, 31));
  ASSERT_OK_AND_ASSIGN(auto second_encoded, format::EncodeRowBatch(*second));
  ASSERT_OK(producer->PublishRowBatch(
      {second_encoded->data(), static_cast<std::size_t>(second_encoded->size())}));
  EXPECT_EQ(producer->stats().copied_bytes, static_cast<uint64_t>(second_encoded->size()));

  // An empty batch is an empty body.
  ASSERT_OK_AND_ASSIGN(auto empty, MakeRows(0, 0));
  ASSERT_OK(producer->PublishRows(*empty));

  const std::vector<std::pair<format::RecordBatchPtr, std::shared_ptr<format::Buffer>>> sent = {
      {first, first_encoded}, {second, second_encoded}, {empty, nullptr}};
  for (const auto& [batch, encoded] : sent) {
    ASSERT_OK_AND_ASSIGN(auto rows, consumer->NextRows(10s));
    ASSERT_NE(rows.data, nullptr);
    EXPECT_EQ(rows.num_rows, batch->num_rows());
    if (encoded == nullptr) {
      EXPECT_EQ(rows.data->size(), 0);
      continue;
    }
    EXPECT_TRUE(InShm(rows.data->data(), broker.name() + "."));
    ASSERT_EQ(rows.data->size(), encoded->size());
    EXPECT_EQ(std::memcmp(rows.data->data(), encoded->data(), encoded->size()), 0);
    ASSERT_OK_AND_ASSIGN(auto decoded, rows.ToRecordBatch());
    ASSERT_OK(format::CheckRecordBatchEquals(*batch, *decoded));
  }
  EXPECT_EQ(producer->stats().copied_bytes, static_cast<uint64_t>(second_encoded->size()));
  ASSERT_OK(producer->Close());
  ASSERT_RAISES(kEndOfStream, consumer->NextRows(10s));
  ASSERT_OK(consumer->Close());
}

// kDropOldest on a row topic: 20 row batches through 8 slots, read after
// the fact, lose the 12 overwritten. A RowConsumer's rows and a Consumer's
// origin (the row batch converted) say so on the first batch read, and
// both lost() count them.
TEST(BrokerRowsTest, DroppedRowBatchesAreCounted) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::TopicOptions topic = testing::TopicWithArena(1 << 20);
  topic.slot_count = 8;
  topic.policy = shm::SlowConsumerPolicy::kDropOldest;
  client::ProducerOptions po = testing::ProducerOn(broker, topic);
  po.wait_for_consumers = 0ms;
  po.drain_timeout = 0ms;
  ASSERT_OK_AND_ASSIGN(auto producer, RowProducer::Open("drop", RowSchema(), po));
  ASSERT_OK_AND_ASSIGN(auto rows, RowConsumer::Open("drop", testing::ConsumerOn(broker)));
  client::ConsumerOptions co = testing::ConsumerOn(broker);
  co.kind = TopicKind::kUnsafeRow;
  ASSERT_OK_AND_ASSIGN(auto batches, Consumer::Open("drop", co));
  ASSERT_EQ(rows->producer_count(), 1u);
  ASSERT_EQ(batches->producer_count(), 1u);
  for (int64_t i = 0; i < 20; ++i) {
    ASSERT_OK_AND_ASSIGN(auto batch, MakeRows(i * 10, 10));
    ASSERT_OK(producer->PublishRows(*batch));
  }
  for (uint64_t i = 12; i < 20; ++i) {
    ASSERT_OK_AND_ASSIGN(auto received, rows->NextRows(10s));
    ASSERT_NE(received.data, nullptr);
    EXPECT_EQ(received.sequence, i);
    EXPECT_EQ(received.lost_before, i == 12 ? 12u : 0u);
    client::BatchOrigin origin;
    ASSERT_OK_AND_ASSIGN(auto batch, batches->Next(10s, &origin));
    EXPECT_EQ(std::static_pointer_cast<format::Int64Array>(batch->column(0))->Value(0),
              static_cast<int64_t>(i) * 10);
    EXPECT_EQ(origin.sequence, i);
    EXPECT_EQ(origin.lost_before, i == 12 ? 12u : 0u);
  }
  EXPECT_EQ(rows->lost(), 12u);
  EXPECT_EQ(batches->lost(), 12u);
}

TEST(BrokerRowsTest, TopicKindMismatchIsRefused) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto producer,
                       RowProducer::Open("rows", RowSchema(), RowProducerOn(broker)));
  // A record-batch consumer or producer on a row topic, and the reverse.
  client::ConsumerOptions plain;
  plain.socket_path = broker.socket();
  ASSERT_RAISES_WITH_MESSAGE(kInvalid,
                             "carries unsafe-row payloads; this consumer expects "
                             "record-batch",
                             Consumer::Open("rows", plain));
  client::ProducerOptions plain_producer;
  plain_producer.socket_path = broker.socket();
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "carries unsafe-row payloads, not record-batch",
                             Producer::Open("rows", RowSchema(), plain_producer));
  ASSERT_OK_AND_ASSIGN(auto batches, Producer::Open("plain", RowSchema(), plain_producer));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid,
                             "carries record-batch payloads; this consumer expects "
                             "unsafe-row",
                             RowConsumer::Open("plain", testing::ConsumerOn(broker)));
  // A record-batch producer cannot publish rows (the static_asserts above); a
  // row producer on its topic is refused.
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "carries record-batch payloads, not unsafe-row",
                             RowProducer::Open("plain", RowSchema(), RowProducerOn(broker)));
  // Types rows cannot carry are refused when the row topic is made.
  auto unsigned_schema = format::schema({format::field("u", format::uint32())});
  ASSERT_RAISES_WITH_MESSAGE(kTypeError, "'u'",
                             RowProducer::Open("u", unsigned_schema, RowProducerOn(broker)));
  // `alkaid topics` shows the topic kind.
  const std::string out = "/tmp/alkaid-test-" + broker.name() + ".topics";
  const pid_t topics =
      testing::Spawn({ALKAID_TOOL_BIN, "topics", "--socket", broker.socket()}, out);
  ASSERT_EQ(testing::Wait(topics), 0);
  const std::string text = ReadFile(out);
  std::filesystem::remove(out);
  EXPECT_NE(text.find("PAYLOAD"), std::string::npos) << text;
  bool rows_line = false, plain_line = false;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("rows ", 0) == 0) rows_line = line.find("unsafe-row") != std::string::npos;
    if (line.rfind("plain ", 0) == 0) plain_line = line.find("record-batch") != std::string::npos;
  }
  EXPECT_TRUE(rows_line && plain_line) << text;
}

Status WriteStream(const std::string& path, const std::vector<format::RecordBatchPtr>& batches) {
  ALKAID_ASSIGN_OR_RAISE(auto sink, format::ipc::FileOutputStream::Open(path));
  ALKAID_ASSIGN_OR_RAISE(auto writer, format::ipc::MakeStreamWriter(sink.get(), RowSchema()));
  for (const auto& b : batches) ALKAID_RETURN_NOT_OK(writer->WriteRecordBatch(*b));
  ALKAID_RETURN_NOT_OK(writer->Close());
  return sink->Close();
}

Result<std::vector<format::RecordBatchPtr>> ReadStream(const std::string& path,
                                                       format::SchemaPtr* schema) {
  ALKAID_ASSIGN_OR_RAISE(auto input, format::ipc::FileInputStream::Open(path));
  ALKAID_ASSIGN_OR_RAISE(auto reader, format::ipc::RecordBatchStreamReader::Open(input));
  *schema = reader->schema();
  return reader->ReadAll();
}

// `alkaid subscribe` started before the topic exists waits for it; `alkaid
// publish --unsafe-row` creates it and publishes rows; the subscriber
// writes them back as record batches. A second subscriber takes a subset
// of the columns.
TEST(BrokerRowsTest, ToolSubscribesToARowTopicBeforeItExists) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  const std::string dir = "/tmp/alkaid-test-" + broker.name();
  std::filesystem::create_directories(dir);
  std::vector<format::RecordBatchPtr> source;
  for (int b = 0; b < 5; ++b) {
    ASSERT_OK_AND_ASSIGN(auto batch, MakeRows(b * 50, 10 + b));
    source.push_back(batch);
  }
  ASSERT_OK(WriteStream(dir + "/in.stream", source));
  const pid_t all =
      testing::Spawn({ALKAID_TOOL_BIN, "subscribe", "late", "--out", dir + "/all.stream",
                      "--timeout", "10", "--socket", broker.socket()});
  const pid_t some =
      testing::Spawn({ALKAID_TOOL_BIN, "subscribe", "late", "--out", dir + "/some.stream",
                      "--timeout", "10", "--columns", "score,id", "--socket", broker.socket()});
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  // Both are waiting for the topic now: the broker says so (a condition,
  // not a guessed delay).
  bool waiting = false;
  for (int i = 0; i < 5000 && !waiting; ++i) {
    ASSERT_OK_AND_ASSIGN(auto awaited, admin->ListAwaitedTopics());
    for (const auto& t : awaited) waiting = waiting || (t.name == "late" && t.consumers == 2);
    if (!waiting) std::this_thread::sleep_for(2ms);
  }
  ASSERT_TRUE(waiting) << "the two subscribers never waited for 'late'";
  client::TopicOptions topic_options;
  topic_options.kind = TopicKind::kUnsafeRow;
  ASSERT_OK(admin->CreateTopic("late", RowSchema(), topic_options).status());
  ASSERT_TRUE(WaitForConsumers(broker.socket(), "late", 2));
  const pid_t pub = testing::Spawn({ALKAID_TOOL_BIN, "publish", "late", dir + "/in.stream",
                                    "--unsafe-row", "--socket", broker.socket()});
  ASSERT_EQ(testing::Wait(pub), 0);
  ASSERT_EQ(testing::Wait(all), 0);
  ASSERT_EQ(testing::Wait(some), 0);

  format::SchemaPtr schema;
  ASSERT_OK_AND_ASSIGN(auto received, ReadStream(dir + "/all.stream", &schema));
  EXPECT_TRUE(schema->Equals(*RowSchema()));
  ASSERT_EQ(received.size(), source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    ASSERT_OK(format::CheckRecordBatchEquals(*source[i], *received[i]));
  }
  ASSERT_OK_AND_ASSIGN(auto projected, ReadStream(dir + "/some.stream", &schema));
  ASSERT_EQ(schema->num_fields(), 2);
  EXPECT_EQ(schema->field(0)->name(), "score");
  EXPECT_EQ(schema->field(1)->name(), "id");
  ASSERT_EQ(projected.size(), source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    EXPECT_TRUE(projected[i]->column(0)->Equals(*source[i]->column(2)));
    EXPECT_TRUE(projected[i]->column(1)->Equals(*source[i]->column(0)));
  }
  // Without a producer, subscribe gives up after --timeout with a clear
  // message.
  const pid_t none =
      testing::Spawn({ALKAID_TOOL_BIN, "subscribe", "never", "--out", dir + "/never.stream",
                      "--timeout", "0.3", "--socket", broker.socket()});
  EXPECT_NE(testing::Wait(none), 0);
  std::filesystem::remove_all(dir);
}

// Column subsets of a record-batch topic: projected zero-copy, unknown
// names refused.
TEST(BrokerRowsTest, ColumnSubsetOfRecordBatches) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::ProducerOptions producer_options;
  producer_options.socket_path = broker.socket();
  producer_options.topic.arena_bytes = 4 << 20;
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("cols", RowSchema(), producer_options));
  client::ConsumerOptions options;
  options.socket_path = broker.socket();
  options.columns = {"name", "zz"};
  ASSERT_RAISES_WITH_MESSAGE(kKeyError, "no column 'zz'; its columns are id, name, score",
                             Consumer::Open("cols", options));
  options.columns = {"id", "id"};
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "'id' is asked for twice", Consumer::Open("cols", options));
  options.columns = {"score", "name"};
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("cols", options));
  ASSERT_EQ(consumer->schema()->num_fields(), 2);
  EXPECT_EQ(consumer->schema()->field(0)->name(), "score");
  EXPECT_EQ(consumer->topic_schema()->num_fields(), 3);
  client::ConsumerOptions everything;
  everything.socket_path = broker.socket();
  ASSERT_OK_AND_ASSIGN(auto full, Consumer::Open("cols", everything));
  // Let both register on the producer's channel.
  for (int i = 0; i < 100 && (consumer->producer_count() == 0 || full->producer_count() == 0);
       ++i) {
    ASSERT_OK(consumer->TryNext().status());
    ASSERT_OK(full->TryNext().status());
    std::this_thread::sleep_for(5ms);
  }
  for (int b = 0; b < 5; ++b) {
    ASSERT_OK_AND_ASSIGN(auto batch, MakeRows(b * 10, 7));
    ASSERT_OK(producer->PublishCopy(*batch));
    ASSERT_OK_AND_ASSIGN(auto got, consumer->Next(5s));
    ASSERT_OK_AND_ASSIGN(auto whole, full->Next(5s));
    ASSERT_EQ(got->num_columns(), 2);
    EXPECT_TRUE(got->column(0)->Equals(*batch->column(2)));
    EXPECT_TRUE(got->column(1)->Equals(*batch->column(1)));
    // Zero-copy: the projected columns' values lie in a mapping of the
    // producer's body segment.
    const auto& data = got->column_data(0);
    ASSERT_GE(data->buffers.size(), 2u);
    ASSERT_NE(data->buffers[1], nullptr);
    EXPECT_TRUE(InShm(data->buffers[1]->data(), broker.name() + "."));
    EXPECT_TRUE(whole->column(2)->Equals(*got->column(0)));
  }
}

// ConsumerOptions::verification on a row topic, with a row batch whose
// size prefixes are right but whose first row puts its name far outside
// the row (published with PublishRowBatch, which checks the prefixes
// only). A RowConsumer in kStructure hands it out (a view in shared
// memory; decoding it fails); in kFull and kPrivateCopy it refuses it,
// naming the row and the field, and goes on; kPrivateCopy's row batches
// are private copies. A Consumer reading the topic as record batches
// decodes every row batch, so it refuses the hostile one in any mode.
TEST(BrokerRowsTest, RowConsumersHonourTheVerificationMode) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  // The producer first: the consumers then register on its channel at Open.
  ASSERT_OK_AND_ASSIGN(auto producer,
                       RowProducer::Open("rows", RowSchema(), RowProducerOn(broker)));
  const client::Verification modes[] = {client::Verification::kStructure,
                                        client::Verification::kFull,
                                        client::Verification::kPrivateCopy};
  std::vector<std::unique_ptr<RowConsumer>> row_consumers;
  std::vector<std::unique_ptr<Consumer>> batch_consumers;
  for (client::Verification mode : modes) {
    client::ConsumerOptions options = testing::ConsumerOn(broker);
    options.verification = mode;
    ASSERT_OK_AND_ASSIGN(auto rows, RowConsumer::Open("rows", options));
    row_consumers.push_back(std::move(rows));
    options.kind = std::nullopt;
    ASSERT_OK_AND_ASSIGN(auto batches, Consumer::Open("rows", options));
    batch_consumers.push_back(std::move(batches));
  }
  ASSERT_TRUE(WaitForConsumers(broker.socket(), "rows", 6));
  ASSERT_OK_AND_ASSIGN(auto honest, MakeRows(0, 5));
  ASSERT_OK_AND_ASSIGN(auto lying, MakeRows(100, 5));
  ASSERT_OK_AND_ASSIGN(auto encoded, format::EncodeRowBatch(*lying));
  std::vector<uint8_t> hostile(encoded->data(), encoded->data() + encoded->size());
  // Row 0 (row 100: its name is not null) starts after its 4-byte size: 8
  // bytes of null bits, the id's slot, then the name's (offset << 32 |
  // size): offset 2^20.
  uint64_t slot = 0;
  std::memcpy(&slot, hostile.data() + 4 + 16, 8);
  slot = (uint64_t{1} << 52) | (slot & 0xffffffffU);
  std::memcpy(hostile.data() + 4 + 16, &slot, 8);
  ASSERT_OK(producer->PublishRows(*honest));
  ASSERT_OK(producer->PublishRowBatch(hostile));
  ASSERT_OK(producer->PublishRows(*honest));

  const auto expect_refusal = [](const Status& st) {
    EXPECT_EQ(st.code(), StatusCode::kInvalid) << st;
    EXPECT_NE(st.message().find("row 0, field 'name'"), std::string::npos) << st;
  };
  for (size_t m = 0; m < 3; ++m) {
    SCOPED_TRACE(client::VerificationName(modes[m]));
    RowConsumer& rows = *row_consumers[m];
    ASSERT_OK_AND_ASSIGN(auto first, rows.NextRows(10s));
    ASSERT_NE(first.data, nullptr);
    // Zero-copy but in kPrivateCopy.
    EXPECT_EQ(InShm(first.data->data(), broker.name() + "."),
              modes[m] != client::Verification::kPrivateCopy);
    auto second = rows.NextRows(10s);
    if (modes[m] == client::Verification::kStructure) {
      ASSERT_OK(second.status());
      expect_refusal(second->ToRecordBatch().status());
    } else {
      ASSERT_FALSE(second.ok()) << "the hostile row batch was handed out";
      expect_refusal(second.status());
      std::printf("RowConsumer, %s -> %s\n", client::VerificationName(modes[m]),
                  second.status().ToString().c_str());
    }
    ASSERT_OK_AND_ASSIGN(auto third, rows.NextRows(10s));
    ASSERT_OK_AND_ASSIGN(auto decoded, third.ToRecordBatch());
    ASSERT_OK(format::CheckRecordBatchEquals(*honest, *decoded));

    Consumer& batches = *batch_consumers[m];
    ASSERT_OK_AND_ASSIGN(auto batch, batches.Next(10s));
    ASSERT_OK(format::CheckRecordBatchEquals(*honest, *batch));
    auto refused = batches.Next(10s);
    ASSERT_FALSE(refused.ok()) << "the hostile row batch was decoded";
    expect_refusal(refused.status());
    ASSERT_OK_AND_ASSIGN(batch, batches.Next(10s));
    ASSERT_OK(format::CheckRecordBatchEquals(*honest, *batch));
  }
  ASSERT_OK(producer->Close());
}

}  // namespace
}  // namespace alkaid::broker
