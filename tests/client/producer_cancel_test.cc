// ProducerOptions::stop: each wait of a producer (Open's for consumers, a
// publish's for room or arena space, Close's drain) cancelled from another
// thread. Real broker (tests/broker's BrokerProcess), real consumers.
// Every timeout under test is 60 s and every wait of the test is for a
// condition; kGuard (30 s) only bounds a hang: a wait that ignored the stop
// would outlast it and fail the test instead of ending by its timeout.
// Where the test can see the call inside its wait (the broker lists the
// opening producer; the publishes before the blocked one returned) it
// requests the stop only then; a loan's or Close's wait shows nothing
// outside, and the stop may come before the wait starts. The verdict holds
// either way: a stop is sticky, so a wait that begins after it must end at
// its first look at the token, and one that never looks lasts 60 s.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/client/row_consumer.h"
#include "alkaid/client/row_producer.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/type.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "test_util.h"

namespace alkaid::client {
namespace {

using namespace std::chrono_literals;
using broker::testing::BrokerProcess;
using broker::testing::ConsumerOn;
using broker::testing::ProducerOn;
using broker::testing::ShmNames;
using broker::testing::TopicWithArena;
using broker::testing::WaitUntil;

constexpr auto kGuard = 30s;
constexpr auto kTimeout = std::chrono::milliseconds(60s);

format::SchemaPtr Schema() { return format::schema({format::field("id", format::int64(), false)}); }

// A batch of `rows` ids.
format::RecordBatchPtr Batch(int64_t rows) {
  format::Int64Builder ids;
  for (int64_t i = 0; i < rows; ++i) EXPECT_OK(ids.Append(i));
  auto array = ids.Finish();
  EXPECT_OK(array.status());
  auto batch = format::RecordBatch::Make(Schema(), rows, {*array});
  EXPECT_OK(batch.status());
  return *batch;
}

// Options whose every wait lasts kTimeout unless stopped.
ProducerOptions Patient(const BrokerProcess& broker, std::stop_token stop,
                        TopicOptions topic = TopicWithArena()) {
  ProducerOptions options = ProducerOn(broker, topic);
  options.publish_timeout = kTimeout;
  options.wait_for_consumers = kTimeout;
  options.drain_timeout = kTimeout;
  options.stop = std::move(stop);
  return options;
}

// The result of a call on another thread, or the process ends: a thread
// still blocked in the call could neither be joined nor abandoned safely.
template <typename T>
T Collect(std::future<T>* pending, const char* what) {
  if (pending->wait_for(kGuard) != std::future_status::ready) {
    std::fprintf(stderr, "FAILED: %s: still waiting %lld s after the stop request\n", what,
                 static_cast<long long>(kGuard.count()));
    std::_Exit(1);
  }
  return pending->get();
}

uint32_t Producers(const BrokerProcess& broker, const std::string& topic) {
  auto admin = BrokerClient::Connect(broker.socket());
  if (!admin.ok()) return 0;
  auto topics = (*admin)->ListTopics();
  if (!topics.ok()) return 0;
  for (const auto& t : *topics) {
    if (t.name == topic) return t.producers;
  }
  return 0;
}

// A consumer of `topic` that has read batch 0 of `producer` (so it is
// registered and counted on the channel), and reads nothing more unless
// the test asks.
std::unique_ptr<Consumer> ConsumerThatReadOne(const BrokerProcess& broker, const std::string& topic,
                                              Producer* producer) {
  ConsumerOptions options = ConsumerOn(broker);
  options.from_oldest = true;  // batch 0 even if published before it registered
  auto consumer = Consumer::Open(topic, options);
  EXPECT_OK(consumer.status());
  if (!consumer.ok()) return nullptr;
  EXPECT_OK(producer->PublishCopy(*Batch(1)));
  auto first = (*consumer)->Next(kGuard);
  EXPECT_OK(first.status());
  return std::move(*consumer);
}

// A producer of "t" with `stop` on a channel of 2 slots, both taken by
// batches its consumer (which read batch 0) has not read: the next publish
// waits for room.
void OpenFullChannel(const BrokerProcess& broker, std::stop_token stop,
                     std::unique_ptr<Producer>* producer, std::unique_ptr<Consumer>* consumer) {
  TopicOptions topic = TopicWithArena();
  topic.slot_count = 2;
  ProducerOptions options = Patient(broker, std::move(stop), topic);
  options.wait_for_consumers = 0ms;
  ASSERT_OK_AND_ASSIGN(*producer, Producer::Open("t", Schema(), options));
  *consumer = ConsumerThatReadOne(broker, "t", producer->get());
  ASSERT_NE(*consumer, nullptr);
  const auto batch = Batch(1);
  ASSERT_OK((*producer)->PublishCopy(*batch));
  ASSERT_OK((*producer)->PublishCopy(*batch));
}

// (a) Open waits for a consumer that attached before it and never looks for
// data (it registers on the channel only in Next/TryNext).
TEST(ProducerCancelTest, AStopEndsOpensWaitForConsumersWithCancelled) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK(admin->CreateTopic("t", Schema(), TopicWithArena()).status());
  ASSERT_OK_AND_ASSIGN(auto idle, Consumer::Open("t", ConsumerOn(broker)));
  const auto names_before = ShmNames(broker.name() + ".");

  std::stop_source source;
  const ProducerOptions options = Patient(broker, source.get_token());
  auto opened = std::async(std::launch::async,
                           [&options] { return Producer::Open("t", Schema(), options).status(); });
  // The broker lists the producer once it is ready, i.e. just before Open
  // waits for the consumers it announced it to.
  ASSERT_TRUE(WaitUntil([&] { return Producers(broker, "t") == 1; }));
  ASSERT_EQ(opened.wait_for(0s), std::future_status::timeout) << opened.get().ToString();
  source.request_stop();
  const Status st = Collect(&opened, "Open");
  ASSERT_EQ(st.code(), StatusCode::kCancelled) << st.ToString();
  EXPECT_NE(st.message().find("'t'"), std::string::npos) << st.ToString();
  // Open undid itself: detached from the broker, its channel removed.
  ASSERT_TRUE(WaitUntil([&] { return Producers(broker, "t") == 0; }));
  EXPECT_EQ(ShmNames(broker.name() + "."), names_before);
}

// (b) A publish on a kBlockProducer topic whose consumer stopped reading
// waits for room in the channel.
TEST(ProducerCancelTest, AStopEndsAPublishWaitingForRoomWithCancelled) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  TopicOptions topic = TopicWithArena();
  topic.slot_count = 4;
  topic.policy = shm::SlowConsumerPolicy::kBlockProducer;
  std::stop_source source;
  ProducerOptions options = Patient(broker, source.get_token(), topic);
  options.wait_for_consumers = 0ms;
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", Schema(), options));
  auto consumer = ConsumerThatReadOne(broker, "t", producer.get());
  ASSERT_NE(consumer, nullptr);

  // Batch 0 was read: batches 1..4 fill the slots, batch 5 waits.
  const auto batch = Batch(1);
  std::atomic<int> published{0};
  auto publishing = std::async(std::launch::async, [&] {
    while (true) {
      const Status st = producer->PublishCopy(*batch);
      if (!st.ok()) return st;
      published.fetch_add(1);
    }
  });
  ASSERT_TRUE(WaitUntil([&] { return published.load() == 4; }));
  ASSERT_EQ(publishing.wait_for(0s), std::future_status::timeout) << publishing.get().ToString();
  source.request_stop();
  const Status st = Collect(&publishing, "Publish");
  ASSERT_EQ(st.code(), StatusCode::kCancelled) << st.ToString();
  EXPECT_NE(st.message().find("'t'"), std::string::npos) << st.ToString();
  EXPECT_EQ(published.load(), 4);
  // Nothing of the cancelled batch went out: the consumer reads 1..4.
  for (int i = 1; i <= 4; ++i) {
    ASSERT_OK_AND_ASSIGN(auto b, consumer->Next(kGuard));
    ASSERT_NE(b, nullptr);
  }
  ASSERT_OK_AND_ASSIGN(auto none, consumer->TryNext());
  EXPECT_EQ(none, nullptr);
}

// (b) A loan (NewBatchPool) waits for arena space a consumer holds.
TEST(ProducerCancelTest, AStopEndsALoanWaitingForSpaceWithCancelled) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  std::stop_source source;
  TopicOptions fixed = TopicWithArena(1 << 20);
  fixed.max_arena_bytes = 1 << 20;  // an arena that does not grow: the loan waits
  ProducerOptions options = Patient(broker, source.get_token(), fixed);
  options.wait_for_consumers = 0ms;
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", Schema(), options));
  ConsumerOptions consumer_options = ConsumerOn(broker);
  consumer_options.from_oldest = true;
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("t", consumer_options));
  // A 640 KiB batch the consumer holds: a second one does not fit the
  // 1 MiB arena until it lets go.
  ASSERT_OK(producer->PublishCopy(*Batch(80 << 10)));
  ASSERT_OK_AND_ASSIGN(auto held, consumer->Next(kGuard));
  ASSERT_NE(held, nullptr);

  auto loaning =
      std::async(std::launch::async, [&] { return producer->NewBatchPool(640 << 10).status(); });
  ASSERT_EQ(loaning.wait_for(0s), std::future_status::timeout) << loaning.get().ToString();
  source.request_stop();
  const Status st = Collect(&loaning, "NewBatchPool");
  ASSERT_EQ(st.code(), StatusCode::kCancelled) << st.ToString();
  EXPECT_NE(st.message().find("space"), std::string::npos) << st.ToString();
  // The stop is for the waits only: space that is there is lent.
  ASSERT_OK(producer->NewBatchPool(4096).status());
}

// (c) Close waits for a consumer to read what was published; the stop cuts
// the wait short, and the producer is closed all the same.
TEST(ProducerCancelTest, AStopEndsClosesDrainAndCloseFinishes) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  std::stop_source source;
  ProducerOptions options = Patient(broker, source.get_token());
  options.wait_for_consumers = 0ms;
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", Schema(), options));
  auto consumer = ConsumerThatReadOne(broker, "t", producer.get());
  ASSERT_NE(consumer, nullptr);
  ASSERT_OK(producer->PublishCopy(*Batch(3)));  // unread when Close starts

  auto closing = std::async(std::launch::async, [&] { return producer->Close(); });
  ASSERT_EQ(closing.wait_for(0s), std::future_status::timeout) << closing.get().ToString();
  source.request_stop();
  const Status st = Collect(&closing, "Close");
  ASSERT_EQ(st.code(), StatusCode::kCancelled) << st.ToString();
  EXPECT_NE(st.message().find("'t'"), std::string::npos) << st.ToString();
  // Closed: detached from the broker, publishing refused, and the consumer
  // reads the batch it had not read, then the end of the stream.
  ASSERT_TRUE(WaitUntil([&] { return Producers(broker, "t") == 0; }));
  ASSERT_RAISES(kInvalid, producer->PublishCopy(*Batch(1)));
  ASSERT_OK_AND_ASSIGN(auto last, consumer->Next(kGuard));
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->num_rows(), 3);
  ASSERT_RAISES(kEndOfStream, consumer->Next(kGuard));
  EXPECT_OK(producer->Close());  // idempotent
}

// A cancelled Publish(batch, pool) whose Message went into the region (1 KiB
// of custom metadata does not fit a slot) leaves the pool as it was: made
// again, the batch goes out whole. The region has room for one copy of the
// Message only, so a second append would fail.
TEST(ProducerCancelTest, ACancelledPublishOfAPoolCanBeMadeAgain) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  TopicOptions topic = TopicWithArena();
  topic.slot_count = 2;
  std::stop_source source;
  ProducerOptions options = Patient(broker, source.get_token(), topic);
  options.wait_for_consumers = 0ms;
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", Schema(), options));
  auto consumer = ConsumerThatReadOne(broker, "t", producer.get());
  ASSERT_NE(consumer, nullptr);
  ASSERT_OK(producer->PublishCopy(*Batch(1)));
  ASSERT_OK(producer->PublishCopy(*Batch(1)));  // every slot is taken

  ASSERT_OK_AND_ASSIGN(auto pool, producer->NewBatchPool(2048));
  format::Int64Builder ids(pool.get());
  for (int64_t i = 0; i < 10; ++i) ASSERT_OK(ids.Append(i * 3));
  ASSERT_OK_AND_ASSIGN(auto array, ids.Finish());
  ASSERT_OK_AND_ASSIGN(auto plain, format::RecordBatch::Make(Schema(), 10, {array}));
  const auto batch = plain->WithMetadata(std::make_shared<format::KeyValueMetadata>(
      std::vector<std::pair<std::string, std::string>>{{"note", std::string(1024, 'x')}}));
  source.request_stop();
  ASSERT_RAISES(kCancelled, producer->Publish(*batch, pool.get()));
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(auto b, consumer->Next(kGuard));
    ASSERT_NE(b, nullptr);
  }
  producer->set_stop({});
  ASSERT_OK(producer->Publish(*batch, pool.get()));
  ASSERT_OK_AND_ASSIGN(auto got, consumer->Next(kGuard));
  ASSERT_NE(got, nullptr);
  EXPECT_TRUE(got->Equals(*batch, /*check_metadata=*/true));
}

// RowProducer shares the implementation: its publish wait is cancelled too.
TEST(ProducerCancelTest, AStopEndsARowProducersPublishWaitingForRoom) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  TopicOptions topic = TopicWithArena();
  topic.slot_count = 2;
  std::stop_source source;
  ProducerOptions options = Patient(broker, source.get_token(), topic);
  options.wait_for_consumers = 0ms;
  ASSERT_OK_AND_ASSIGN(auto producer, RowProducer::Open("rows", Schema(), options));
  ConsumerOptions consumer_options = ConsumerOn(broker);
  consumer_options.from_oldest = true;
  ASSERT_OK_AND_ASSIGN(auto consumer, RowConsumer::Open("rows", consumer_options));
  const auto batch = Batch(2);
  ASSERT_OK(producer->PublishRows(*batch));
  ASSERT_OK_AND_ASSIGN(auto first, consumer->NextRows(kGuard));
  ASSERT_NE(first.data, nullptr);

  std::atomic<int> published{0};
  auto publishing = std::async(std::launch::async, [&] {
    while (true) {
      const Status st = producer->PublishRows(*batch);
      if (!st.ok()) return st;
      published.fetch_add(1);
    }
  });
  ASSERT_TRUE(WaitUntil([&] { return published.load() == 2; }));
  ASSERT_EQ(publishing.wait_for(0s), std::future_status::timeout) << publishing.get().ToString();
  source.request_stop();
  const Status st = Collect(&publishing, "PublishRows");
  ASSERT_EQ(st.code(), StatusCode::kCancelled) << st.ToString();
  EXPECT_EQ(published.load(), 2);
}

// Without a stop request the token changes nothing: the consumer reading
// ends the publish's wait as before.
TEST(ProducerCancelTest, AnUnstoppedTokenLetsAPublishWaitEndWithRoom) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  std::stop_source source;
  std::unique_ptr<Producer> producer;
  std::unique_ptr<Consumer> consumer;
  ASSERT_NO_FATAL_FAILURE(OpenFullChannel(broker, source.get_token(), &producer, &consumer));
  const auto batch = Batch(1);
  auto publishing = std::async(std::launch::async, [&] { return producer->PublishCopy(*batch); });
  ASSERT_EQ(publishing.wait_for(0s), std::future_status::timeout) << publishing.get().ToString();
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto b, consumer->Next(kGuard));
    ASSERT_NE(b, nullptr);
  }
  EXPECT_OK(Collect(&publishing, "Publish"));
}

// set_stop gives each call its own token: a stop of the first leaves the
// next call's wait alone.
TEST(ProducerCancelTest, SetStopReplacesTheTokenForLaterWaits) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  std::stop_source first;
  std::unique_ptr<Producer> producer;
  std::unique_ptr<Consumer> consumer;
  ASSERT_NO_FATAL_FAILURE(OpenFullChannel(broker, first.get_token(), &producer, &consumer));
  const auto batch = Batch(1);
  first.request_stop();
  ASSERT_RAISES(kCancelled, producer->PublishCopy(*batch));  // every slot is taken
  std::stop_source second;
  producer->set_stop(second.get_token());
  auto publishing = std::async(std::launch::async, [&] { return producer->PublishCopy(*batch); });
  ASSERT_EQ(publishing.wait_for(0s), std::future_status::timeout) << publishing.get().ToString();
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto b, consumer->Next(kGuard));
    ASSERT_NE(b, nullptr);
  }
  EXPECT_OK(Collect(&publishing, "Publish"));
}

}  // namespace
}  // namespace alkaid::client
