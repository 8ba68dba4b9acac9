// The promises of docs/RELIABILITY.md through the public client API and a
// real broker, each decided by a condition, not by how long something took:
//
// - a consumer that dies (SIGKILL) while holding batches, or that closes
//   while holding them and then dies, gives the producer its blocks back
//   (ProducerStats::blocks_live); one that closes while holding them and
//   lives on returns them when it drops them, and never holds the producer;
// - kDropOldest through Producer/Consumer: Consumer::lost() is exactly the
//   number of batches overwritten unread, from_oldest included;
// - Producer::Close() waits until a slow consumer has read everything;
// - the kBlockProducer timeout names the slow consumer, and the producer
//   publishes again once the consumer reads;
// - four producers at full speed on one topic: Next's round robin starves
//   none of them;
// - 0-row batches, built in place, copied, and through a FixedShapeWriter.

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>
#include <algorithm>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/writer.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using client::BrokerClient;
using client::Consumer;
using client::Producer;
using testing::BrokerProcess;
using testing::ConsumerOn;
using testing::Pipe;
using testing::ProducerOn;
using testing::WaitForConsumers;
using testing::WaitUntil;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

format::SchemaPtr PairSchema() {
  return format::schema(
      {format::field("tag", format::int64(), false), format::field("seq", format::int64(), false)});
}

Result<format::RecordBatchPtr> Pair(int64_t tag, int64_t seq, int64_t rows = 1) {
  format::Int64Builder a, b;
  for (int64_t r = 0; r < rows; ++r) {
    ALKAID_RETURN_NOT_OK(a.Append(tag));
    ALKAID_RETURN_NOT_OK(b.Append(seq));
  }
  ALKAID_ASSIGN_OR_RAISE(auto x, a.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto y, b.Finish());
  return format::RecordBatch::Make(PairSchema(), rows, {x, y});
}

int64_t Col(const format::RecordBatch& batch, int column) {
  return std::static_pointer_cast<format::Int64Array>(batch.column(column))->Value(0);
}

enum class Ending { kKilled, kClosedThenKilled, kClosedThenDropped };

std::string EndingName(const ::testing::TestParamInfo<Ending>& info) {
  switch (info.param) {
    case Ending::kKilled:
      return "Killed";
    case Ending::kClosedThenKilled:
      return "ClosedThenKilled";
    case Ending::kClosedThenDropped:
      return "ClosedThenDropped";
  }
  return "?";
}

class HeldBatchesTest : public ::testing::TestWithParam<Ending> {};

// A consumer process reads 20 batches and holds every one of them; then,
// per the parameter, it is SIGKILLed, or it Close()s and is SIGKILLed, or
// it Close()s, lives on and drops them. The producer (8 slots) gets back
// every block the consumer held, seen through ProducerStats::blocks_live,
// on its own (Poll: the channel's pid checks), with the broker up.
TEST_P(HeldBatchesTest, TheProducerGetsTheConsumersBlocksBack) {
  const Ending ending = GetParam();
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::TopicOptions topic;
  topic.slot_count = 8;
  topic.arena_bytes = 1 << 20;
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK(admin->CreateTopic("held", PairSchema(), topic).status());
  constexpr int kHeld = 20;
  Pipe to_parent, to_child;
  const pid_t child = testing::ForkTestChild();
  if (child == 0) {
    auto consumer = Consumer::Open("held", ConsumerOn(broker));
    if (!consumer.ok()) ::_exit(1);
    std::vector<format::RecordBatchPtr> held;
    for (int i = 0; i < kHeld; ++i) {
      auto batch = (*consumer)->Next(30s);
      if (!batch.ok() || Col(**batch, 1) != i) ::_exit(2);
      held.push_back(*batch);
    }
    if (ending != Ending::kKilled && !(*consumer)->Close().ok()) ::_exit(3);
    to_parent.Put('h');
    if (ending == Ending::kClosedThenDropped) {
      if (to_child.Get() != 'd') ::_exit(4);
      held.clear();
      consumer->reset();
      to_parent.Put('d');
    }
    while (true) ::pause();
  }
  ASSERT_TRUE(WaitForConsumers(broker.socket(), "held", 1));
  ASSERT_OK_AND_ASSIGN(auto producer,
                       Producer::Open("held", PairSchema(), ProducerOn(broker, topic)));
  for (int i = 0; i < kHeld; ++i) {
    ASSERT_OK_AND_ASSIGN(auto batch, Pair(0, i));
    ASSERT_OK(producer->PublishCopy(*batch));
  }
  ASSERT_EQ(to_parent.Get(), 'h');
  producer->Poll();
  const uint64_t live_while_held = producer->stats().blocks_live;
  // The slots hold at most their 8 blocks; the consumer the other 12.
  EXPECT_GE(live_while_held, static_cast<uint64_t>(kHeld));
  if (ending == Ending::kClosedThenDropped) {
    // Closed: it no longer counts for room, so a full channel's worth more
    // goes through although it reads nothing.
    for (int i = kHeld; i < kHeld + 16; ++i) {
      ASSERT_OK_AND_ASSIGN(auto batch, Pair(0, i));
      ASSERT_OK(producer->PublishCopy(*batch));
    }
    to_child.Put('d');
    ASSERT_EQ(to_parent.Get(), 'd');
  } else {
    ASSERT_EQ(::kill(child, SIGKILL), 0);
  }
  // Released by the producer's own Poll (pid checks at most every 200 ms),
  // before the child is even reaped (a zombie is dead to the check).
  EXPECT_TRUE(WaitUntil([&] {
    producer->Poll();
    return producer->stats().blocks_live <= topic.slot_count;
  })) << "blocks live: "
      << producer->stats().blocks_live << " (with the consumer holding " << live_while_held << ")";
  EXPECT_EQ(producer->stats().dead_consumers_detached,
            ending == Ending::kClosedThenDropped ? 0u : 1u);
  if (ending == Ending::kClosedThenDropped) {
    ASSERT_EQ(::kill(child, SIGKILL), 0);
  }
  EXPECT_EQ(testing::Wait(child), -SIGKILL);
  ASSERT_OK(producer->Close());
}

INSTANTIATE_TEST_SUITE_P(Endings, HeldBatchesTest,
                         ::testing::Values(Ending::kKilled, Ending::kClosedThenKilled,
                                           Ending::kClosedThenDropped),
                         EndingName);

// kDropOldest through the client: a consumer that reads nothing while 20
// batches go through 8 slots loses exactly the 12 overwritten, and is
// told so by lost(); a from_oldest consumer that joined when 5 were held
// loses the same 12 and reads the same last 8; so does one that names its
// columns (which Next reads through its general way, not the direct one).
TEST(BrokerReliabilityTest, DropOldestLostCountsExactlyWhatWasOverwritten) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::TopicOptions topic;
  topic.slot_count = 8;
  topic.arena_bytes = 1 << 20;
  topic.policy = shm::SlowConsumerPolicy::kDropOldest;
  client::ProducerOptions po = ProducerOn(broker, topic);
  po.wait_for_consumers = 0ms;
  po.drain_timeout = 0ms;
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("drop", PairSchema(), po));
  ASSERT_OK_AND_ASSIGN(auto now, Consumer::Open("drop", ConsumerOn(broker)));
  ASSERT_EQ(now->producer_count(), 1u);
  client::ConsumerOptions named = ConsumerOn(broker);
  named.columns = {"tag", "seq"};
  ASSERT_OK_AND_ASSIGN(auto columns, Consumer::Open("drop", named));
  ASSERT_EQ(columns->producer_count(), 1u);
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK_AND_ASSIGN(auto batch, Pair(0, i));
    ASSERT_OK(producer->PublishCopy(*batch));
  }
  client::ConsumerOptions co = ConsumerOn(broker);
  co.from_oldest = true;
  ASSERT_OK_AND_ASSIGN(auto oldest, Consumer::Open("drop", co));
  ASSERT_EQ(oldest->producer_count(), 1u);
  for (int i = 5; i < 20; ++i) {
    ASSERT_OK_AND_ASSIGN(auto batch, Pair(0, i));
    ASSERT_OK(producer->PublishCopy(*batch));
  }
  for (Consumer* consumer : {now.get(), oldest.get(), columns.get()}) {
    SCOPED_TRACE(consumer == now.get()      ? "from now"
                 : consumer == oldest.get() ? "from oldest"
                                            : "with columns");
    for (int i = 12; i < 20; ++i) {
      ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(5s));
      ASSERT_NE(batch, nullptr);
      EXPECT_EQ(Col(*batch, 1), i);
    }
    EXPECT_EQ(consumer->lost(), 12u);
    ASSERT_OK_AND_ASSIGN(auto none, consumer->TryNext());
    EXPECT_EQ(none, nullptr);
  }
  ASSERT_OK(producer->Close());
  ASSERT_RAISES(kEndOfStream, now->Next(5s));
}

// Close() returns only once a slow consumer (a thread reading one batch
// every 2 ms) has read all 50 batches; then it sees EndOfStream.
TEST(BrokerReliabilityTest, CloseWaitsUntilASlowConsumerReadEverything) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::TopicOptions topic;
  topic.slot_count = 64;  // the producer never waits for room
  topic.arena_bytes = 1 << 20;
  client::ProducerOptions po = ProducerOn(broker, topic);
  po.drain_timeout = 60s;  // a bound for a hang only
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("drain", PairSchema(), po));
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("drain", ConsumerOn(broker)));
  constexpr int kBatches = 50;
  std::atomic<int> read{0};
  std::atomic<bool> go{false};
  Status reader_status;
  std::thread reader([&] {
    while (!go.load()) std::this_thread::yield();
    for (int i = 0; i < kBatches; ++i) {
      auto batch = consumer->Next(30s);
      if (!batch.ok() || Col(**batch, 1) != i) {
        reader_status = batch.ok() ? Status::Invalid("batch ", i, " out of order") : batch.status();
        return;
      }
      std::this_thread::sleep_for(2ms);  // slow, so Close has to wait
      read.store(i + 1);
    }
    auto end = consumer->Next(30s);
    reader_status = end.ok() ? Status::Invalid("no EndOfStream") : Status::OK();
    if (!end.ok() && !end.status().IsEndOfStream()) reader_status = end.status();
  });
  for (int i = 0; i < kBatches; ++i) {
    ASSERT_OK_AND_ASSIGN(auto batch, Pair(0, i));
    ASSERT_OK(producer->PublishCopy(*batch));
  }
  go.store(true);
  ASSERT_OK(producer->Close());
  // Close waits for the consumer's cursor to pass the last batch: it has at
  // least received batch 49 (read counts after the pause that follows).
  EXPECT_GE(read.load(), kBatches - 1);
  reader.join();
  ASSERT_OK(reader_status);
  EXPECT_EQ(read.load(), kBatches);
}

// kBlockProducer through the client: with every slot full and the consumer
// reading nothing, PublishCopy times out naming the consumer (its pid);
// once the consumer reads, the same producer publishes again and nothing
// is lost.
TEST(BrokerReliabilityTest, BlockPolicyTimeoutNamesTheSlowConsumerAndTheProducerGoesOn) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::TopicOptions topic;
  topic.slot_count = 8;
  topic.arena_bytes = 1 << 20;
  client::ProducerOptions po = ProducerOn(broker, topic);
  po.publish_timeout = 200ms;
  po.wait_for_consumers = 0ms;
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("block", PairSchema(), po));
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("block", ConsumerOn(broker)));
  int published = 0;
  Status refused;
  for (; published < 64; ++published) {
    ASSERT_OK_AND_ASSIGN(auto batch, Pair(0, published));
    refused = producer->PublishCopy(*batch);
    if (!refused.ok()) break;
  }
  EXPECT_EQ(published, 8);
  ASSERT_RAISES_WITH_MESSAGE(kTimedOut, "(pid " + std::to_string(::getpid()) + ")", refused);
  EXPECT_NE(refused.message().find("topic 'block'"), std::string::npos) << refused.ToString();
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(5s));
    EXPECT_EQ(Col(*batch, 1), i);
  }
  for (int i = published; i < published + 4; ++i) {
    ASSERT_OK_AND_ASSIGN(auto batch, Pair(0, i));
    ASSERT_OK(producer->PublishCopy(*batch));
  }
  for (int i = 4; i < published + 4; ++i) {
    ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(5s));
    EXPECT_EQ(Col(*batch, 1), i);
  }
  EXPECT_EQ(consumer->lost(), 0u);
  ASSERT_OK(producer->Close());
  ASSERT_RAISES(kEndOfStream, consumer->Next(5s));
}

// Four producer processes publish into one topic (16 slots each,
// kBlockProducer) while one consumer reads: every batch of each arrives
// once, in order, and Next's round robin serves them in turn. The turn is
// shown by a condition, not by the scheduler: each producer first fills its
// channel with 8 batches and pauses; while all four hold batches, every prefix
// of the 32 reads has taken as many from each producer, give or take one.
// Then they publish the rest as fast as they can.
TEST(BrokerReliabilityTest, FourProducersAtFullSpeedAreServedInTurn) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::TopicOptions topic;
  topic.slot_count = 16;
  topic.arena_bytes = 1 << 20;
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK(admin->CreateTopic("four", PairSchema(), topic).status());
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("four", ConsumerOn(broker)));
  constexpr int kProducers = 4;
  constexpr int64_t kFirst = 8;
  constexpr int64_t kEach = 5000;
  Pipe ready, go, filled, rest;
  std::vector<pid_t> children;
  for (int tag = 0; tag < kProducers; ++tag) {
    const pid_t pid = testing::ForkTestChild();
    if (pid == 0) {
      client::ProducerOptions po = ProducerOn(broker, topic);
      po.publish_timeout = 60s;
      auto producer = Producer::Open("four", PairSchema(), po);
      if (!producer.ok()) ::_exit(1);
      ready.Put('r');
      if (go.Get() != 'g') ::_exit(2);
      for (int64_t seq = 0; seq < kEach; ++seq) {
        if (seq == kFirst) {
          filled.Put('f');
          if (rest.Get() != 'g') ::_exit(5);
        }
        auto batch = Pair(tag, seq);
        if (!batch.ok() || !(*producer)->PublishCopy(**batch).ok()) ::_exit(3);
      }
      ::_exit((*producer)->Close().ok() ? 0 : 4);
    }
    children.push_back(pid);
  }
  // Each child's Open waits for this consumer to register on its channel,
  // which it does while looking for data.
  ASSERT_TRUE(WaitUntil([&] {
    auto none = consumer->TryNext();
    return none.ok() && consumer->producer_count() == kProducers;
  }));
  for (int i = 0; i < kProducers; ++i) ASSERT_EQ(ready.Get(), 'r');
  for (int i = 0; i < kProducers; ++i) go.Put('g');
  for (int i = 0; i < kProducers; ++i) ASSERT_EQ(filled.Get(), 'f');
  std::vector<int64_t> next(kProducers, 0);
  auto read_one = [&]() -> int64_t {
    auto batch = consumer->Next(30s);
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok() || *batch == nullptr) return -1;
    const int64_t tag = Col(**batch, 0);
    EXPECT_TRUE(tag >= 0 && tag < kProducers) << tag;
    if (tag < 0 || tag >= kProducers) return -1;
    EXPECT_EQ(Col(**batch, 1), next[static_cast<size_t>(tag)]) << "producer " << tag;
    ++next[static_cast<size_t>(tag)];
    return tag;
  };
  for (int64_t r = 0; r < kProducers * kFirst; ++r) {
    ASSERT_GE(read_one(), 0);
    const auto [least, most] = std::minmax_element(next.begin(), next.end());
    ASSERT_LE(*most - *least, 1) << "read " << r + 1 << " of the first " << kProducers * kFirst
                                 << ": " << next[0] << " " << next[1] << " " << next[2] << " "
                                 << next[3];
  }
  for (int i = 0; i < kProducers; ++i) rest.Put('g');
  for (int64_t total = kProducers * kFirst; total < kProducers * kEach; ++total) {
    ASSERT_GE(read_one(), 0);
  }
  for (int tag = 0; tag < kProducers; ++tag) EXPECT_EQ(next[static_cast<size_t>(tag)], kEach);
  for (pid_t pid : children) EXPECT_EQ(testing::Wait(pid), 0);
  ASSERT_RAISES(kEndOfStream, consumer->Next(10s));
}

// 0-row batches: built in place in a pool, copied, and through a
// FixedShapeWriter of a 0-row prototype, each arrives as a 0-row batch
// between 1-row ones.
TEST(BrokerReliabilityTest, ZeroRowBatchesInPlaceCopiedAndFromAFixedShapeWriter) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::TopicOptions topic;
  topic.arena_bytes = 1 << 20;
  client::ProducerOptions po = ProducerOn(broker, topic);
  po.wait_for_consumers = 0ms;
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("zero", PairSchema(), po));
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("zero", ConsumerOn(broker)));
  auto in_place = [&](int64_t rows) -> Status {
    ALKAID_ASSIGN_OR_RAISE(auto pool, producer->NewBatchPool(4096));
    format::Int64Builder a(pool.get()), b(pool.get());
    for (int64_t r = 0; r < rows; ++r) {
      ALKAID_RETURN_NOT_OK(a.Append(7));
      ALKAID_RETURN_NOT_OK(b.Append(r));
    }
    ALKAID_ASSIGN_OR_RAISE(auto x, a.Finish());
    ALKAID_ASSIGN_OR_RAISE(auto y, b.Finish());
    ALKAID_ASSIGN_OR_RAISE(auto batch, format::RecordBatch::Make(PairSchema(), rows, {x, y}));
    return producer->Publish(*batch, pool.get());
  };
  ASSERT_OK(in_place(0));
  ASSERT_OK(in_place(1));
  ASSERT_OK_AND_ASSIGN(auto empty_copy, Pair(1, 0, 0));
  ASSERT_OK(producer->PublishCopy(*empty_copy));
  std::unique_ptr<client::FixedShapeWriter> writer;
  {
    ASSERT_OK_AND_ASSIGN(auto pool, producer->NewBatchPool(4096));
    format::Int64Builder a(pool.get()), b(pool.get());
    ASSERT_OK_AND_ASSIGN(auto x, a.Finish());
    ASSERT_OK_AND_ASSIGN(auto y, b.Finish());
    ASSERT_OK_AND_ASSIGN(auto prototype, format::RecordBatch::Make(PairSchema(), 0, {x, y}));
    ASSERT_OK_AND_ASSIGN(writer, producer->NewFixedShapeWriter(*prototype, *pool));
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(writer->Begin());
    ASSERT_OK(writer->Publish());
  }
  ASSERT_OK_AND_ASSIGN(auto last, Pair(2, 0, 1));
  ASSERT_OK(producer->PublishCopy(*last));
  const std::vector<int64_t> rows = {0, 1, 0, 0, 0, 0, 1};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE("batch " + std::to_string(i));
    ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(5s));
    ASSERT_NE(batch, nullptr);
    EXPECT_EQ(batch->num_rows(), rows[i]);
    EXPECT_EQ(batch->num_columns(), 2);
    EXPECT_EQ(batch->column(0)->length(), rows[i]);
    EXPECT_EQ(batch->column(1)->length(), rows[i]);
  }
  EXPECT_EQ(producer->stats().published, 7u);
  writer.reset();
  ASSERT_OK(producer->Close());
  ASSERT_RAISES(kEndOfStream, consumer->Next(5s));
}

// A schema of `columns` int32 fields named "c<i>" padded to `name_length`
// characters.
format::SchemaPtr WideSchema(int columns, std::size_t name_length = 6) {
  std::vector<format::FieldPtr> fields;
  fields.reserve(static_cast<std::size_t>(columns));
  for (int i = 0; i < columns; ++i) {
    std::string name = "c" + std::to_string(i);
    if (name.size() < name_length) name.append(name_length - name.size(), '_');
    fields.push_back(format::field(name, format::int32(), false));
  }
  return format::schema(std::move(fields));
}

// Batch `b` of WideSchema: column c, row r holds b * 1'000'000 + c * 10 + r.
Result<format::RecordBatchPtr> WideBatch(const format::SchemaPtr& schema, int32_t b, int64_t rows) {
  std::vector<format::ArrayPtr> columns;
  for (int c = 0; c < schema->num_fields(); ++c) {
    format::Int32Builder builder;
    for (int64_t r = 0; r < rows; ++r) {
      ALKAID_RETURN_NOT_OK(builder.Append(b * 1'000'000 + c * 10 + static_cast<int32_t>(r)));
    }
    ALKAID_ASSIGN_OR_RAISE(auto array, builder.Finish());
    columns.push_back(std::move(array));
  }
  return format::RecordBatch::Make(schema, rows, std::move(columns));
}

// The size of `schema`'s IPC Schema message as a topic carries it.
std::size_t SchemaBytes(const format::SchemaPtr& schema) {
  auto sink = format::ipc::BufferOutputStream::Create();
  if (!sink.ok()) return 0;
  auto writer = format::ipc::MakeStreamWriter(sink->get(), schema);
  if (!writer.ok() || !(*writer)->Close().ok()) return 0;
  auto buffer = (*sink)->Finish();
  return buffer.ok() ? static_cast<std::size_t>((*buffer)->size()) : 0;
}

// A topic of 5,000 columns through the broker: a consumer process receives
// every batch with every value of every column, then EndOfStream; the
// broker lists the topic with its 5,000-field schema.
TEST(BrokerSchemaSizeTest, FiveThousandColumnsEndToEnd) {
  constexpr int kColumns = 5000;
  constexpr int kBatches = 3;
  constexpr int64_t kRows = 4;
  const auto schema = WideSchema(kColumns);
  std::printf("a schema of %d int32 columns is %zu bytes as an IPC Schema message\n", kColumns,
              SchemaBytes(schema));
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::TopicOptions topic;
  topic.arena_bytes = 16 << 20;
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK(admin->CreateTopic("wide", schema, topic).status());
  const pid_t child = testing::ForkTestChild();
  if (child == 0) {
    auto consumer = Consumer::Open("wide", ConsumerOn(broker));
    if (!consumer.ok() || (*consumer)->schema()->num_fields() != kColumns) ::_exit(1);
    for (int32_t b = 0; b < kBatches; ++b) {
      auto batch = (*consumer)->Next(30s);
      if (!batch.ok() || (*batch)->num_columns() != kColumns || (*batch)->num_rows() != kRows) {
        ::_exit(2);
      }
      for (int c = 0; c < kColumns; ++c) {
        auto column = std::static_pointer_cast<format::Int32Array>((*batch)->column(c));
        for (int64_t r = 0; r < kRows; ++r) {
          if (column->Value(r) != b * 1'000'000 + c * 10 + r) ::_exit(3);
        }
      }
    }
    auto end = (*consumer)->Next(30s);
    ::_exit(end.status().code() == StatusCode::kEndOfStream ? 0 : 4);
  }
  ASSERT_TRUE(WaitForConsumers(broker.socket(), "wide", 1));
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("wide", schema, ProducerOn(broker, topic)));
  for (int32_t b = 0; b < kBatches; ++b) {
    ASSERT_OK_AND_ASSIGN(auto batch, WideBatch(schema, b, kRows));
    ASSERT_OK(producer->PublishCopy(*batch));
  }
  ASSERT_OK(producer->Close());
  EXPECT_EQ(testing::Wait(child), 0) << "1: open, 2: batch, 3: a value, 4: no EndOfStream";
  ASSERT_OK_AND_ASSIGN(auto topics, admin->ListTopics());
  ASSERT_EQ(topics.size(), 1u);
  ASSERT_NE(topics[0].schema, nullptr);
  EXPECT_TRUE(topics[0].schema->Equals(*schema));
}

// A schema over the broker's 1 MiB maximum is refused by the client with
// Invalid naming the limit, before anything is sent, by Producer::Open and
// BrokerClient::CreateTopic alike; nothing is created and the broker goes
// on serving (a topic with a schema of 1 MiB less a little works).
TEST(BrokerSchemaSizeTest, ASchemaOverTheLimitIsRefusedNamingIt) {
  // ~40-byte names: 20,000 fields are about 1.3 MiB.
  const auto too_big = WideSchema(20000, 40);
  ASSERT_GT(SchemaBytes(too_big), std::size_t{1} << 20);
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  auto producer = Producer::Open("wide", too_big, ProducerOn(broker, {}));
  ASSERT_EQ(producer.status().code(), StatusCode::kInvalid) << producer.status();
  EXPECT_NE(producer.status().message().find("maximum of 1048576 bytes"), std::string::npos)
      << producer.status();
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  auto created = admin->CreateTopic("wide", too_big);
  ASSERT_EQ(created.status().code(), StatusCode::kInvalid) << created.status();
  EXPECT_NE(created.status().message().find("maximum of 1048576 bytes"), std::string::npos)
      << created.status();
  // The same connection and the broker go on.
  ASSERT_OK_AND_ASSIGN(auto topics, admin->ListTopics());
  EXPECT_TRUE(topics.empty());
  int columns = 15000;  // as many as fit
  while (SchemaBytes(WideSchema(columns, 40)) > (std::size_t{1} << 20)) columns -= 500;
  std::printf("%d columns of 40-character names: %zu bytes; 20,000: %zu bytes\n", columns,
              SchemaBytes(WideSchema(columns, 40)), SchemaBytes(too_big));
  ASSERT_OK(admin->CreateTopic("almost", WideSchema(columns, 40)).status());
  ASSERT_OK_AND_ASSIGN(topics, admin->ListTopics());
  ASSERT_EQ(topics.size(), 1u);
  ASSERT_NE(topics[0].schema, nullptr);
  EXPECT_EQ(topics[0].schema->num_fields(), columns);
}

// Two topics whose schemas are each under the limit but together over the
// control frame: ListTopics still answers (a reply over the frame maximum
// would be refused by the client), every topic is listed, the schemas up
// to 1 MiB in all with it and the rest without (null).
TEST(BrokerSchemaSizeTest, ListTopicsFitsAFrameWithTwoLargeSchemas) {
  const auto schema = WideSchema(9000, 40);
  const std::size_t bytes = SchemaBytes(schema);
  ASSERT_LT(bytes, std::size_t{1} << 20);
  ASSERT_GT(2 * bytes, std::size_t{(1u << 20) + (64u << 10)});
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK(admin->CreateTopic("a-wide", schema).status());
  ASSERT_OK(admin->CreateTopic("b-wide", schema).status());
  ASSERT_OK_AND_ASSIGN(auto topics, admin->ListTopics());
  ASSERT_EQ(topics.size(), 2u);
  int with_schema = 0;
  for (const auto& t : topics) {
    if (t.schema != nullptr) {
      EXPECT_TRUE(t.schema->Equals(*schema)) << t.name;
      ++with_schema;
    }
  }
  EXPECT_EQ(with_schema, 1);
  // Consumers still get the schema of each (their attach reply carries one).
  for (const char* name : {"a-wide", "b-wide"}) {
    ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open(name, ConsumerOn(broker)));
    EXPECT_TRUE(consumer->schema()->Equals(*schema)) << name;
  }
  ASSERT_OK_AND_ASSIGN(auto stats, admin->Stats());
  EXPECT_EQ(stats.rejected_frames, 0u);
}

}  // namespace
}  // namespace alkaid::broker
