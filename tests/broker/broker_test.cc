// Integration tests of the broker: a real alkaid-broker process per test,
// the client library and the alkaid tool against it, processes killed with
// SIGKILL, and /dev/shm checked for leftovers.

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/compare.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/shm/segment.h"
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
using testing::ProducerOn;
using testing::ShmNames;
using testing::WaitForConsumers;
using testing::WaitNoSegments;
using namespace std::chrono_literals;

format::SchemaPtr IdSchema() { return format::schema({format::field("id", format::int64())}); }

Result<format::RecordBatchPtr> IdBatch(int64_t first, int64_t rows) {
  format::Int64Builder ids;
  for (int64_t i = 0; i < rows; ++i) ALKAID_RETURN_NOT_OK(ids.Append(first + i));
  ALKAID_ASSIGN_OR_RAISE(auto array, ids.Finish());
  return format::RecordBatch::Make(IdSchema(), rows, {array});
}

int64_t FirstId(const format::RecordBatch& batch) {
  return std::static_pointer_cast<format::Int64Array>(batch.column(0))->Value(0);
}

TEST(BrokerTest, InPlaceBatchesThenEndOfStream) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK_AND_ASSIGN(bool created, admin->CreateTopic("ids", IdSchema()));
  EXPECT_TRUE(created);
  // One thread: the producer first, so that the consumer finds its channel at
  // attach (a consumer subscribed earlier registers when it next looks).
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("ids", IdSchema(), ProducerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("ids", ConsumerOn(broker)));
  EXPECT_EQ(consumer->producer_count(), 1u);
  for (int64_t b = 0; b < 10; ++b) {
    ASSERT_OK_AND_ASSIGN(auto pool, producer->NewBatchPool(64 * 1024));
    format::Int64Builder ids(pool.get());
    for (int64_t i = 0; i < 100; ++i) ASSERT_OK(ids.Append(b * 100 + i));
    ASSERT_OK_AND_ASSIGN(auto array, ids.Finish());
    ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(IdSchema(), 100, {array}));
    ASSERT_OK(producer->Publish(*batch, pool.get()));
  }
  std::vector<format::RecordBatchPtr> received;
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(5s));
    ASSERT_NE(batch, nullptr);
    EXPECT_EQ(FirstId(*batch), i * 100);
    received.push_back(batch);
  }
  EXPECT_TRUE(consumer->schema()->Equals(*IdSchema()));
  ASSERT_OK(producer->Close());
  ASSERT_RAISES(kEndOfStream, consumer->Next(5s));
  ASSERT_OK_AND_ASSIGN(auto topics, admin->ListTopics());
  ASSERT_EQ(topics.size(), 1u);
  EXPECT_EQ(topics[0].name, "ids");
  EXPECT_EQ(topics[0].producers, 0u);
  EXPECT_EQ(topics[0].consumers, 1u);
  EXPECT_TRUE(WaitNoSegments(broker.name() + "."));
  received.clear();
  producer.reset();
}

// Producer::Publish's refusals (its success path keeps their formatting out
// of line): a pool published already names the topic, and the batch is not
// counted; after Close, NewBatchPool and Publish say the producer is closed.
TEST(BrokerTest, PublishRefusalsNameTheTopic) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("ids", IdSchema(), ProducerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto pool, producer->NewBatchPool(4096));
  format::Int64Builder ids(pool.get());
  ASSERT_OK(ids.AppendEmptyValues(8));
  ASSERT_OK_AND_ASSIGN(auto array, ids.Finish());
  ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(IdSchema(), 8, {array}));
  ASSERT_OK(producer->Publish(*batch, pool.get()));
  EXPECT_EQ(producer->stats().published, 1u);
  const Status again = producer->Publish(*batch, pool.get());
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "was already published", again);
  EXPECT_NE(again.message().find("topic 'ids'"), std::string::npos) << again.ToString();
  EXPECT_EQ(producer->stats().published, 1u);
  ASSERT_OK(producer->Close());
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "producer of 'ids' is closed", producer->NewBatchPool(64));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "producer of 'ids' is closed",
                             producer->Publish(*batch, pool.get()));
}

// Consumer::Next with an origin, batches waiting on one producer's channel
// (Next's direct way): each says its producer, its sequence and that none
// was lost; TryNext the same; the same after the consumer had to wait for
// one; TryNext then ends the stream when the producer closes.
TEST(BrokerTest, NextSaysWhereEachWaitingBatchCameFrom) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("ids", IdSchema(), ProducerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("ids", ConsumerOn(broker)));
  ASSERT_EQ(consumer->producer_count(), 1u);
  for (int64_t b = 0; b < 3; ++b) {
    ASSERT_OK_AND_ASSIGN(auto batch, IdBatch(b * 10, 10));
    ASSERT_OK(producer->PublishCopy(*batch));
  }
  for (uint64_t i = 0; i < 3; ++i) {
    client::BatchOrigin origin;
    ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(5s, &origin));
    EXPECT_EQ(FirstId(*batch), static_cast<int64_t>(i) * 10);
    EXPECT_NE(origin.producer_id, 0u);
    EXPECT_EQ(origin.producer_pid, static_cast<uint32_t>(::getpid()));
    EXPECT_EQ(origin.sequence, i);
    EXPECT_EQ(origin.lost_before, 0u);
  }
  // TryNext the same, then nothing there.
  {
    ASSERT_OK_AND_ASSIGN(auto batch, IdBatch(30, 10));
    ASSERT_OK(producer->PublishCopy(*batch));
    client::BatchOrigin origin;
    ASSERT_OK_AND_ASSIGN(auto got, consumer->TryNext(&origin));
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(FirstId(*got), 30);
    EXPECT_EQ(origin.producer_pid, static_cast<uint32_t>(::getpid()));
    EXPECT_EQ(origin.sequence, 3u);
    ASSERT_OK_AND_ASSIGN(auto none, consumer->TryNext(&origin));
    EXPECT_EQ(none, nullptr);
  }
  // Nothing waiting: the first attempt finds nothing, the wait gets it.
  std::thread later([&] {
    std::this_thread::sleep_for(20ms);
    auto batch = IdBatch(40, 10);
    if (batch.ok()) (void)producer->PublishCopy(**batch);
  });
  client::BatchOrigin origin;
  ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(5s, &origin));
  later.join();
  EXPECT_EQ(FirstId(*batch), 40);
  EXPECT_EQ(origin.producer_pid, static_cast<uint32_t>(::getpid()));
  EXPECT_EQ(origin.sequence, 4u);
  EXPECT_EQ(consumer->lost(), 0u);
  // The producer gone, TryNext drains and ends the stream.
  ASSERT_OK(producer->Close());
  ASSERT_TRUE(testing::WaitUntil([&] { return !consumer->TryNext().ok(); }));
  ASSERT_RAISES(kEndOfStream, consumer->TryNext());
}

// A consumer that polls TryNext looks at broker events when an attempt
// finds nothing (at most every millisecond; before the first attempt it is
// due already): a producer that joins the topic is subscribed at the first
// such miss after its announcement, not at the 1,024th attempt, which is
// what maintains under load. The joining producer's Open waits for that
// (ProducerOptions::wait_for_consumers). The announcement is seen through
// WaitFd, so the test waits for nothing but it.
TEST(BrokerTest, TryNextThatFindsNothingPicksUpAJoiningProducer) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto first, Producer::Open("ids", IdSchema(), ProducerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("ids", ConsumerOn(broker)));
  ASSERT_EQ(consumer->producer_count(), 1u);
  ASSERT_OK_AND_ASSIGN(const int fd, consumer->WaitFd());
  ASSERT_OK_AND_ASSIGN(const bool ready, consumer->ArmWait());
  ASSERT_FALSE(ready);
  auto joining = std::async(std::launch::async,
                            [&] { return Producer::Open("ids", IdSchema(), ProducerOn(broker)); });
  pollfd pfd{fd, POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 30000), 1);  // the broker's ProducerJoined
  ASSERT_OK_AND_ASSIGN(auto none, consumer->TryNext());
  EXPECT_EQ(none, nullptr);
  ASSERT_EQ(consumer->producer_count(), 2u);
  ASSERT_OK_AND_ASSIGN(auto second, joining.get());
  // Both channels read (TryNext's general way): each batch says its own
  // producer.
  ASSERT_OK_AND_ASSIGN(auto batch, IdBatch(70, 10));
  ASSERT_OK(second->PublishCopy(*batch));
  for (int64_t first_id : {80, 90}) {
    ASSERT_OK_AND_ASSIGN(batch, IdBatch(first_id, 10));
    ASSERT_OK(first->PublishCopy(*batch));
  }
  std::map<int64_t, client::BatchOrigin> origins;  // by first id
  ASSERT_TRUE(testing::WaitUntil([&] {
    client::BatchOrigin origin;
    auto next = consumer->TryNext(&origin);
    if (next.ok() && *next != nullptr) origins[FirstId(**next)] = origin;
    return !next.ok() || origins.size() == 3;
  }));
  ASSERT_EQ(origins.size(), 3u);
  EXPECT_NE(origins[70].producer_id, origins[80].producer_id);
  EXPECT_EQ(origins[80].producer_id, origins[90].producer_id);
  EXPECT_EQ(origins[70].sequence, 0u);
  EXPECT_EQ(origins[80].sequence, 0u);
  EXPECT_EQ(origins[90].sequence, 1u);
  EXPECT_EQ(origins[90].producer_pid, static_cast<uint32_t>(::getpid()));
  EXPECT_EQ(consumer->lost(), 0u);
}

// Consumer::NextInto (deprecated, kept one release): the same batches into
// one reused view, then end of stream; refused with a column subset.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST(BrokerTest, NextIntoAReusedViewThenEndOfStream) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("ids", IdSchema(), ProducerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("ids", ConsumerOn(broker)));
  for (int64_t b = 0; b < 10; ++b) {
    ASSERT_OK_AND_ASSIGN(auto pool, producer->NewBatchPool(64 * 1024));
    format::Int64Builder ids(pool.get());
    for (int64_t i = 0; i < 100; ++i) ASSERT_OK(ids.Append(b * 100 + i));
    ASSERT_OK_AND_ASSIGN(auto array, ids.Finish());
    ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(IdSchema(), 100, {array}));
    ASSERT_OK(producer->Publish(*batch, pool.get()));
  }
  client::BatchView view;
  for (int64_t b = 0; b < 10; ++b) {
    ASSERT_OK(consumer->NextInto(&view, 5s));
    ASSERT_EQ(view.num_rows(), 100);
    const auto values = view.Values<int64_t>(0);
    for (int64_t i = 0; i < 100; ++i) ASSERT_EQ(values[static_cast<size_t>(i)], b * 100 + i);
  }
  ASSERT_OK(producer->Close());
  ASSERT_RAISES(kEndOfStream, consumer->NextInto(&view, 5s));
  ASSERT_RAISES(kInvalid, consumer->NextInto(nullptr, 5s));
  client::ConsumerOptions subset = ConsumerOn(broker);
  subset.columns = {"id"};
  ASSERT_OK_AND_ASSIGN(auto narrow, Consumer::Open("ids", subset));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "column subset", narrow->NextInto(&view, 5s));
}
#pragma GCC diagnostic pop

TEST(BrokerTest, SchemaMismatchIsRefused) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", IdSchema(), ProducerOn(broker)));
  auto other = format::schema({format::field("name", format::utf8())});
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "exists with a different schema",
                             Producer::Open("t", other, ProducerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_RAISES(kInvalid, admin->CreateTopic("t", other));
  ASSERT_OK_AND_ASSIGN(bool created, admin->CreateTopic("t", IdSchema()));
  EXPECT_FALSE(created);
  // Dictionary types are part of the schema: another index type is another
  // schema.
  auto dict =
      format::schema({format::field("d", format::dictionary(format::int32(), format::utf8()))});
  auto dict16 =
      format::schema({format::field("d", format::dictionary(format::int16(), format::utf8()))});
  ASSERT_OK_AND_ASSIGN(auto dict_producer, Producer::Open("d", dict, ProducerOn(broker)));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "exists with a different schema",
                             Producer::Open("d", dict16, ProducerOn(broker)));
}

// `alkaid topics rm` (BrokerClient::RemoveTopic): refused while a producer
// is attached; then the topic goes, a consumer attached to it sees the end
// of the stream saying why, and a producer creates it anew with another
// schema (no broker restart).
TEST(BrokerTest, ATopicWithoutProducersIsRemoved) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_RAISES_WITH_MESSAGE(kKeyError, "no topic 't'", admin->RemoveTopic("t"));
  ASSERT_RAISES(kInvalid, admin->RemoveTopic("bad/name"));
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", IdSchema(), ProducerOn(broker)));
  const auto rm = [&] {
    return testing::Wait(
        testing::Spawn({ALKAID_TOOL_BIN, "topics", "rm", "t", "--socket", broker.socket()}));
  };
  EXPECT_EQ(rm(), 1);  // a producer is attached
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "has 1 producer (pid " + std::to_string(::getpid()) + ")",
                             admin->RemoveTopic("t"));
  ASSERT_OK(producer->Close());
  producer.reset();

  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("t", ConsumerOn(broker)));
  ASSERT_RAISES(kTimedOut, consumer->Next(10ms));  // no producer: it waits
  auto other = format::schema({format::field("name", format::utf8())});
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "`alkaid topics rm t` removes it",
                             Producer::Open("t", other, ProducerOn(broker)));
  EXPECT_EQ(rm(), 0);
  auto end = consumer->Next(30s);
  ASSERT_RAISES_WITH_MESSAGE(kEndOfStream, "the topic was removed by pid", end);
  ASSERT_OK(consumer->Close());  // detached by the broker already: nothing to say
  EXPECT_EQ(rm(), 1);            // no such topic now
  ASSERT_OK_AND_ASSIGN(producer, Producer::Open("t", other, ProducerOn(broker)));
  ASSERT_OK(producer->Close());
  ASSERT_OK_AND_ASSIGN(auto topics, admin->ListTopics());
  ASSERT_EQ(topics.size(), 1u);
  ASSERT_NE(topics[0].schema, nullptr);
  EXPECT_TRUE(topics[0].schema->Equals(*other));
  EXPECT_TRUE(WaitNoSegments(broker.name() + "."));
}

TEST(BrokerTest, UnknownTopicAndNoBroker) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_RAISES_WITH_MESSAGE(kKeyError, "no topic 'nope'",
                             Consumer::Open("nope", ConsumerOn(broker)));
  ASSERT_RAISES(kInvalid, Consumer::Open("bad/name", ConsumerOn(broker)));
  client::ConsumerOptions nowhere;
  nowhere.socket_path = "/tmp/alkaid-test-no-such-broker.sock";
  ASSERT_RAISES_WITH_MESSAGE(kIOError, "cannot reach the broker", Consumer::Open("x", nowhere));
}

// from_oldest: what the channel still holds is delivered, in order; a default
// consumer starts with the next batch published.
TEST(BrokerTest, FromOldestReadsWhatTheChannelStillHolds) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::ProducerOptions po = ProducerOn(broker);
  po.wait_for_consumers = 0ms;
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("old", IdSchema(), po));
  for (int64_t b = 0; b < 5; ++b) {
    ASSERT_OK_AND_ASSIGN(auto batch, IdBatch(b * 10, 10));
    ASSERT_OK(producer->PublishCopy(*batch));
  }
  client::ConsumerOptions oldest = ConsumerOn(broker);
  oldest.from_oldest = true;
  ASSERT_OK_AND_ASSIGN(auto from_oldest, Consumer::Open("old", oldest));
  ASSERT_OK_AND_ASSIGN(auto from_now, Consumer::Open("old", ConsumerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto last, IdBatch(50, 10));
  ASSERT_OK(producer->PublishCopy(*last));
  for (int64_t b = 0; b < 6; ++b) {
    ASSERT_OK_AND_ASSIGN(auto got, from_oldest->Next(5s));
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(FirstId(*got), b * 10);
  }
  EXPECT_EQ(from_oldest->lost(), 0u);
  ASSERT_OK_AND_ASSIGN(auto got, from_now->Next(5s));
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(FirstId(*got), 50);
  ASSERT_OK(producer->Close());
  ASSERT_RAISES(kEndOfStream, from_oldest->Next(5s));
  ASSERT_RAISES(kEndOfStream, from_now->Next(5s));
}

// A producer that joins after the consumer attached waits for it to
// register (wait_for_consumers), so its first batch is not missed even when
// published at once.
TEST(BrokerTest, ProducerJoiningLaterIsReadFromItsFirstBatch) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK_AND_ASSIGN(bool created, admin->CreateTopic("late", IdSchema()));
  EXPECT_TRUE(created);
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("late", ConsumerOn(broker)));
  // The consumer waits in Next() on its own thread, as an application would:
  // that is where it learns of the new producer and registers on its channel.
  std::vector<int64_t> firsts;
  Status consumed;
  std::thread reader([&] {
    for (int i = 0; i < 3; ++i) {
      auto got = consumer->Next(10s);
      if (!got.ok()) {
        consumed = got.status();
        return;
      }
      firsts.push_back(FirstId(**got));
    }
  });
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("late", IdSchema(), ProducerOn(broker)));
  for (int64_t b = 0; b < 3; ++b) {
    ASSERT_OK_AND_ASSIGN(auto batch, IdBatch(b * 10, 10));
    ASSERT_OK(producer->PublishCopy(*batch));
  }
  reader.join();
  ASSERT_OK(consumed);
  EXPECT_EQ(firsts, (std::vector<int64_t>{0, 10, 20}));
  EXPECT_EQ(consumer->lost(), 0u);
  ASSERT_OK(producer->Close());
  ASSERT_RAISES(kEndOfStream, consumer->Next(5s));
}

// The broker refuses a second instance on its socket, removes leftovers of
// an earlier broker of its name at start, and removes every segment name
// it handed out when stopped with SIGTERM.
TEST(BrokerTest, StartupChecksAndCleanShutdown) {
  const std::string name = "bt" + testing::UniqueSuffix();
  ASSERT_OK_AND_ASSIGN(
      auto leftover, shm::Segment::Create(name + ".old.p1.channel", 4096, shm::SegmentKind::kRaw));
  leftover.reset();
  BrokerProcess broker(name);
  ASSERT_TRUE(broker.Start());
  EXPECT_TRUE(ShmNames(name + ".old").empty());

  const pid_t second =
      testing::Spawn({ALKAID_BROKER_BIN, "--socket", broker.socket(), "--name", name + "b"});
  EXPECT_EQ(testing::Wait(second), 1);

  const pid_t too_big = testing::Spawn({ALKAID_BROKER_BIN, "--socket", broker.socket() + "2",
                                        "--name", name + "c", "--shm-limit", "1000000000000000"});
  EXPECT_EQ(testing::Wait(too_big), 1);

  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", IdSchema(), ProducerOn(broker)));
  EXPECT_EQ(ShmNames(name + ".").size(), 2u);
  EXPECT_EQ(broker.Stop(), 0);
  EXPECT_TRUE(ShmNames(name + ".").empty());
  EXPECT_FALSE(std::filesystem::exists(broker.socket()));
  // The producer keeps working without the broker and closes cleanly.
  ASSERT_OK_AND_ASSIGN(auto batch, IdBatch(0, 3));
  ASSERT_OK(producer->PublishCopy(*batch));
  ASSERT_OK(producer->Close());
}

TEST(BrokerTest, SigkilledProducerEndsTheStreamAfterDraining) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK(admin->CreateTopic("t", IdSchema()).status());
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("t", ConsumerOn(broker)));
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = testing::ForkTestChild();
  if (child == 0) {
    auto producer = Producer::Open("t", IdSchema(), ProducerOn(broker));
    if (!producer.ok()) ::_exit(1);
    for (int64_t b = 0; b < 5; ++b) {
      auto batch = IdBatch(b * 10, 10);
      if (!batch.ok() || !(*producer)->PublishCopy(**batch).ok()) ::_exit(2);
    }
    const char byte = 1;
    if (::write(ready[1], &byte, 1) != 1) ::_exit(3);
    while (true) ::pause();
  }
  // The child waits for us to register on its channel: pump until it is there.
  ASSERT_TRUE(testing::WaitUntil([&] {
    EXPECT_OK(consumer->TryNext().status());
    return consumer->producer_count() > 0;
  }));
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::kill(child, SIGKILL);
  // The verdict is what Next returns (EndOfStream naming the dead producer,
  // not TimedOut), not how long it took.
  for (int64_t b = 0; b < 5; ++b) {
    ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(5s));
    EXPECT_EQ(FirstId(*batch), b * 10);
  }
  ASSERT_RAISES_WITH_MESSAGE(kEndOfStream, "producer gone", consumer->Next(30s));
  EXPECT_EQ(testing::Wait(child), -SIGKILL);
  EXPECT_TRUE(WaitNoSegments(broker.name() + "."));
  ::close(ready[0]);
  ::close(ready[1]);
}

uint64_t RealtimeNow() {
  timespec ts{};
  (void)::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// TopicOptions::publish_timestamps, across processes: a producer in a child
// process publishes one batch each time the test says so; the test reads
// the realtime clock before it says so and after it received the batch,
// and the batch's publish time lies between the two. The same without the
// option: 0. The broker lists which topic stamps, and the bytes published.
TEST(BrokerTest, PublishTimesOnlyOnTopicsCreatedWithThem) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  for (const bool stamped : {true, false}) {
    SCOPED_TRACE(stamped ? "stamped" : "not stamped");
    const std::string topic = stamped ? "stamped" : "plain";
    client::ConsumerOptions co = ConsumerOn(broker);
    co.wait_for_topic = 30s;
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    const pid_t child = testing::ForkTestChild();
    if (child == 0) {
      ::close(go[1]);
      client::TopicOptions options = testing::TopicWithArena();
      options.publish_timestamps = stamped;
      auto producer = Producer::Open(topic, IdSchema(), ProducerOn(broker, options));
      if (!producer.ok()) ::_exit(1);
      // Polls while idle, as a producer waiting for input should: the
      // figures it reports are refreshed at a publish or a Poll.
      for (int64_t b = 0;;) {
        pollfd p{go[0], POLLIN, 0};
        if (::poll(&p, 1, 10) == 0) {
          (*producer)->Poll();
          continue;
        }
        char byte = 0;
        if (::read(go[0], &byte, 1) != 1 || byte != 'p') break;
        auto batch = IdBatch(b * 10, 10);
        if (!batch.ok() || !(*producer)->PublishCopy(**batch).ok()) ::_exit(2);
        ++b;
      }
      ::_exit((*producer)->Close().ok() ? 0 : 3);
    }
    ::close(go[0]);
    ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open(topic, co));
    EXPECT_EQ(consumer->publish_timestamps(), stamped);
    // The child waits for us to register on its channel: pump until it is there.
    ASSERT_TRUE(testing::WaitUntil([&] {
      EXPECT_OK(consumer->TryNext().status());
      return consumer->producer_count() > 0;
    }));
    uint64_t previous = 0;
    for (int64_t b = 0; b < 5; ++b) {
      const uint64_t before = RealtimeNow();
      ASSERT_EQ(::write(go[1], "p", 1), 1);
      client::BatchOrigin origin;
      ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(30s, &origin));
      const uint64_t after = RealtimeNow();
      EXPECT_EQ(FirstId(*batch), b * 10);
      EXPECT_EQ(origin.producer_pid, static_cast<uint32_t>(child));
      if (stamped) {
        EXPECT_GE(origin.publish_ns, before);
        EXPECT_LE(origin.publish_ns, after);
        EXPECT_GT(origin.publish_ns, previous);
        previous = origin.publish_ns;
      } else {
        EXPECT_EQ(origin.publish_ns, 0u);
      }
    }
    ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
    // The producer reports every 500 ms: wait for the report of the five
    // batches (10 int64 values each: an 80-byte buffer, a body of 80 bytes
    // or more with padding).
    std::optional<client::TopicStatus> status;
    ASSERT_TRUE(testing::WaitUntil([&] {
      auto topics = admin->ListTopics();
      if (!topics.ok()) return true;
      for (const auto& t : *topics) {
        if (t.name == topic && t.published == 5 && t.published_bytes >= 5u * 80) status = t;
      }
      return status.has_value();
    }));
    ASSERT_TRUE(status.has_value());
    EXPECT_EQ(status->publish_timestamps, stamped);
    EXPECT_GE(status->published_bytes, 5u * 80);
    ASSERT_EQ(status->producer_list.size(), 1u);
    EXPECT_EQ(status->producer_list[0].published_bytes, status->published_bytes);
    ::close(go[1]);  // the child closes its producer
    ASSERT_RAISES(kEndOfStream, consumer->Next(30s));
    EXPECT_EQ(testing::Wait(child), 0);
  }
  EXPECT_TRUE(WaitNoSegments(broker.name() + "."));
}

TEST(BrokerTest, SigkilledConsumerDoesNotBlockTheProducer) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  client::TopicOptions small;
  small.slot_count = 8;
  small.arena_bytes = 1 << 20;
  ASSERT_OK(admin->CreateTopic("t", IdSchema(), small).status());
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = testing::ForkTestChild();
  if (child == 0) {
    auto consumer = Consumer::Open("t", ConsumerOn(broker));
    if (!consumer.ok()) ::_exit(1);
    // Register on the producer's channel, read one batch, then hang.
    auto first = (*consumer)->Next(10s);
    const char byte = first.ok() ? 1 : 0;
    if (::write(ready[1], &byte, 1) != 1) ::_exit(3);
    while (true) ::pause();
  }
  ASSERT_TRUE(WaitForConsumers(broker.socket(), "t", 1));
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", IdSchema(), ProducerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto first, IdBatch(0, 10));
  ASSERT_OK(producer->PublishCopy(*first));
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ASSERT_EQ(byte, 1);
  ::kill(child, SIGKILL);
  // 8 slots: without the dead consumer's release, the ninth publish
  // would wait for it and fail with TimedOut (publish_timeout); the verdict
  // is that every publish succeeds, not how long they took.
  for (int64_t b = 1; b <= 100; ++b) {
    ASSERT_OK_AND_ASSIGN(auto batch, IdBatch(b * 10, 10));
    ASSERT_OK(producer->PublishCopy(*batch));
  }
  // The channel releases what the dead consumer held when it needs room
  // or space, or when an idle producer polls (its pid checks run at most
  // every liveness interval, 200 ms), before the child is even reaped (it
  // is a zombie here).
  testing::WaitUntil([&] {
    producer->Poll();
    return producer->stats().dead_consumers_detached >= 1u;
  });
  EXPECT_GE(producer->stats().dead_consumers_detached, 1u);
  EXPECT_EQ(testing::Wait(child), -SIGKILL);
  ASSERT_OK(producer->Close());
  ::close(ready[0]);
  ::close(ready[1]);
}

// With the broker SIGKILLed, an attached producer (another process) and
// consumer keep exchanging data; the producer's Close still ends the
// stream and removes its segments, so nothing is left in /dev/shm.
TEST(BrokerTest, SurvivorsCarryOnWhenTheBrokerDies) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK(admin->CreateTopic("t", IdSchema()).status());
  admin.reset();
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("t", ConsumerOn(broker)));
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t child = testing::ForkTestChild();
  if (child == 0) {
    auto producer = Producer::Open("t", IdSchema(), ProducerOn(broker));
    if (!producer.ok()) ::_exit(1);
    char byte = 0;
    if (::read(go[0], &byte, 1) != 1) ::_exit(2);
    for (int64_t b = 0; b < 20; ++b) {
      auto batch = IdBatch(b * 10, 10);
      if (!batch.ok() || !(*producer)->PublishCopy(**batch).ok()) ::_exit(3);
    }
    ::_exit((*producer)->Close().ok() ? 0 : 4);
  }
  testing::WaitUntil([&] {
    EXPECT_OK(consumer->TryNext().status());
    return consumer->producer_count() > 0;
  });
  ASSERT_EQ(consumer->producer_count(), 1u);
  broker.Kill();
  const char byte = 1;
  ASSERT_EQ(::write(go[1], &byte, 1), 1);
  for (int64_t b = 0; b < 20; ++b) {
    ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(5s));
    EXPECT_EQ(FirstId(*batch), b * 10);
  }
  ASSERT_RAISES(kEndOfStream, consumer->Next(5s));
  EXPECT_EQ(testing::Wait(child), 0);
  EXPECT_TRUE(ShmNames(broker.name() + ".").empty());
  ASSERT_OK(consumer->Close());
  ::close(go[0]);
  ::close(go[1]);
}

int RawConnect(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  return fd;
}

// Reads until the broker closes the connection; returns the bytes read.
std::size_t DrainUntilClosed(int fd) {
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::size_t total = 0;
  char buf[4096];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return n == 0 ? total : static_cast<std::size_t>(-1);
    total += static_cast<std::size_t>(n);
  }
}

TEST(BrokerTest, MalformedRequestsCloseOnlyThatConnection) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK(admin->CreateTopic("t", IdSchema()).status());

  // A well-framed flatbuffer that is garbage: an error reply, then hang-up.
  const int a = RawConnect(broker.socket());
  ASSERT_GE(a, 0);
  const uint8_t garbage[] = {12, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  ASSERT_EQ(::send(a, garbage, sizeof(garbage), MSG_NOSIGNAL),
            static_cast<ssize_t>(sizeof(garbage)));
  const std::size_t replied = DrainUntilClosed(a);
  EXPECT_GT(replied, 4u);
  EXPECT_NE(replied, static_cast<std::size_t>(-1));
  ::close(a);

  // An oversized length prefix: refused before anything is allocated.
  const int b = RawConnect(broker.socket());
  ASSERT_GE(b, 0);
  const uint8_t huge[] = {0xF0, 0xFF, 0xFF, 0x7F};
  ASSERT_EQ(::send(b, huge, sizeof(huge), MSG_NOSIGNAL), 4);
  EXPECT_NE(DrainUntilClosed(b), static_cast<std::size_t>(-1));
  ::close(b);

  // Everyone else is still served.
  ASSERT_OK_AND_ASSIGN(auto topics, admin->ListTopics());
  EXPECT_EQ(topics.size(), 1u);
  ASSERT_OK_AND_ASSIGN(auto stats, admin->Stats());
  EXPECT_EQ(stats.rejected_frames, 2u);
  EXPECT_EQ(stats.name, broker.name());
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("t", ConsumerOn(broker)));
}

// Every gold file: `alkaid subscribe --out` started first, then `alkaid
// publish FILE`; the subscriber's stream holds the same schema,
// dictionaries and batches.
TEST(BrokerTest, GoldFilesThroughPublishAndSubscribe) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start({"--shm-limit", "0"}));
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  const std::string out_dir = "/tmp/alkaid-test-" + broker.name();
  std::filesystem::create_directories(out_dir);
  int files = 0;
  int with_dictionaries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ALKAID_GOLD_DIR)) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".arrow_file") continue;
    SCOPED_TRACE(path);
    ASSERT_OK_AND_ASSIGN(auto file, format::ipc::MemoryMappedFile::Open(path));
    ASSERT_OK_AND_ASSIGN(auto reader, format::ipc::RecordBatchFileReader::Open(file));
    if (reader->dictionary_memo().num_fields() > 0) ++with_dictionaries;
    const std::string topic = "gold" + std::to_string(files++);
    ASSERT_OK(admin->CreateTopic(topic, reader->schema()).status());
    const std::string out = out_dir + "/" + topic + ".stream";
    const pid_t sub = testing::Spawn({ALKAID_TOOL_BIN, "subscribe", topic, "--out", out,
                                      "--timeout", "10", "--socket", broker.socket()});
    ASSERT_TRUE(WaitForConsumers(broker.socket(), topic, 1));
    const pid_t pub =
        testing::Spawn({ALKAID_TOOL_BIN, "publish", topic, path, "--socket", broker.socket()});
    ASSERT_EQ(testing::Wait(pub), 0);
    ASSERT_EQ(testing::Wait(sub), 0);

    ASSERT_OK_AND_ASSIGN(auto input, format::ipc::FileInputStream::Open(out));
    ASSERT_OK_AND_ASSIGN(auto stream, format::ipc::RecordBatchStreamReader::Open(input));
    EXPECT_TRUE(stream->schema()->Equals(*reader->schema(), true));
    ASSERT_OK_AND_ASSIGN(auto batches, stream->ReadAll());
    ASSERT_EQ(static_cast<int>(batches.size()), reader->num_record_batches());
    for (int i = 0; i < reader->num_record_batches(); ++i) {
      ASSERT_OK_AND_ASSIGN(auto expected, reader->ReadRecordBatch(i));
      ASSERT_OK(format::CheckRecordBatchEquals(*expected, *batches[static_cast<size_t>(i)]));
    }
  }
  std::filesystem::remove_all(out_dir);
  EXPECT_GT(files, 15);
  EXPECT_GE(with_dictionaries, 3);
  std::cout << "[ gold     ] " << files << " files through the broker, " << with_dictionaries
            << " of them with dictionaries\n";
  EXPECT_TRUE(WaitNoSegments(broker.name() + "."));
}

}  // namespace
}  // namespace alkaid::broker
