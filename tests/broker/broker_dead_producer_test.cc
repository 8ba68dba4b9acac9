// A producer's death with committed messages in extensions of its arena that
// a consumer has not mapped yet (a consumer maps an extension only when a
// message first names it): a real broker, a real producer process SIGKILLed,
// real shared memory.
//
// - the broker keeps the dead producer's extension names until the consumer
//   says it read the channel to its end (ProducerDrained): every committed
//   message is read exactly once, in order, bodies intact, and no name is
//   left once it has (the broker up, the consumer still open);
// - a consumer that never reads does not pin them past the broker's bound
//   (--dead-producer-drain), and nothing is left;
// - a broker that dies with the producer: the next one keeps the dead
//   producer's extensions for its bound too (the consumer reads everything),
//   and removes them when it stops;
// - a producer that registered again with a restarted broker and died before
//   the consumer subscribed again: the new broker keeps them for the process
//   registered on the channel, which reads every message and says so by the
//   channel's name.

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using client::BrokerClient;
using client::Consumer;
using client::Producer;
using testing::BrokerProcess;
using testing::ShmNames;
using namespace std::chrono_literals;

constexpr int64_t kInArena = 4;      // small messages, in the channel segment's arena
constexpr int64_t kInExtension = 4;  // 100 KB messages: each needs an extension
constexpr uint64_t kArenaBytes = 64 << 10;
// A drain bound no test reaches: only the consumer's report ends the wait.
const std::vector<std::string> kLongDrain = {"--dead-producer-drain", "600"};

format::SchemaPtr PadSchema() {
  return format::schema(
      {format::field("seq", format::int64(), false), format::field("pad", format::binary())});
}

int64_t PadLength(int64_t seq) { return seq < kInArena ? 16 : 100'000; }
uint8_t PadByte(int64_t seq, int64_t i) { return static_cast<uint8_t>((seq * 31 + i) & 0xff); }

Result<format::RecordBatchPtr> PadBatch(int64_t seq) {
  format::Int64Builder a;
  format::BinaryBuilder pad;
  ALKAID_RETURN_NOT_OK(a.Append(seq));
  std::string bytes(static_cast<size_t>(PadLength(seq)), '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<char>(PadByte(seq, static_cast<int64_t>(i)));
  }
  ALKAID_RETURN_NOT_OK(pad.Append(bytes));
  ALKAID_ASSIGN_OR_RAISE(auto x, a.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto y, pad.Finish());
  return format::RecordBatch::Make(PadSchema(), 1, {x, y});
}

// "" if `batch` is message `seq` with its padding intact, else what is wrong.
std::string CheckBatch(const format::RecordBatch& batch, int64_t seq) {
  const int64_t got = std::static_pointer_cast<format::Int64Array>(batch.column(0))->Value(0);
  if (got != seq) return "message " + std::to_string(got) + " where " + std::to_string(seq);
  const std::string_view pad =
      std::static_pointer_cast<format::BinaryArray>(batch.column(1))->GetView(0);
  if (static_cast<int64_t>(pad.size()) != PadLength(seq)) return "padding length";
  for (size_t i = 0; i < pad.size(); ++i) {
    if (static_cast<uint8_t>(pad[i]) != PadByte(seq, static_cast<int64_t>(i))) {
      return "padding byte " + std::to_string(i) + " of message " + std::to_string(seq);
    }
  }
  return "";
}

client::TopicOptions SmallArenaTopic() {
  client::TopicOptions topic;
  topic.slot_count = 64;
  topic.arena_bytes = kArenaBytes;
  topic.max_arena_bytes = 16 << 20;
  return topic;
}

std::set<std::string> ExtensionNames(const BrokerProcess& broker) {
  std::set<std::string> found;
  for (const auto& n : ShmNames(broker.name() + ".")) {
    if (n.find(".channel.x") != std::string::npos) found.insert(n);
  }
  return found;
}

// The fixture's steps: a consumer in this process, registered on the
// channel of a producer child that publishes kInArena messages in its
// arena and kInExtension in extensions, then waits to be SIGKILLed. The
// consumer has received nothing, so it has mapped no extension.
class DeadProducerTest : public ::testing::Test {
 protected:
  // Opens the topic, the consumer and a producer child (`*child`) that
  // publishes kInArena messages in its arena and kInExtension in
  // extensions once the consumer registered, then waits to be SIGKILLed.
  void StartPublishedProducer(BrokerProcess& broker, pid_t* child) {
    ASSERT_OK_AND_ASSIGN(admin_, BrokerClient::Connect(broker.socket()));
    ASSERT_OK(admin_->CreateTopic("t", PadSchema(), SmallArenaTopic()).status());
    ASSERT_OK_AND_ASSIGN(consumer_, Consumer::Open("t", testing::ConsumerOn(broker)));
    testing::Pipe ready, go, published;
    *child = testing::ForkTestChild();
    ASSERT_GE(*child, 0);
    if (*child == 0) {
      // Open returns once our consumer registered on the channel.
      auto producer =
          Producer::Open("t", PadSchema(), testing::ProducerOn(broker, SmallArenaTopic()));
      if (!producer.ok()) ::_exit(3);
      ready.Put('r');
      if (go.Get() != 'g') ::_exit(4);
      for (int64_t seq = 0; seq < kInArena + kInExtension; ++seq) {
        auto batch = PadBatch(seq);
        if (!batch.ok() || !(*producer)->PublishCopy(**batch).ok()) ::_exit(5);
      }
      published.Put('p');
      while (true) ::pause();  // killed here, its messages unread
    }
    // The consumer registers when it sees the producer (its Next looks at
    // the broker's events); nothing is published before `go`.
    while (!ready.Readable()) {
      auto batch = consumer_->Next(10ms);
      ASSERT_TRUE(batch.status().IsTimedOut()) << batch.status().ToString();
      ASSERT_FALSE(testing::Exited(*child).has_value()) << "the producer could not open";
    }
    go.Put('g');
    ASSERT_EQ(published.Get(), 'p') << "the producer did not publish";
    ASSERT_FALSE(ExtensionNames(broker).empty()) << "the producer's arena did not grow";
  }

  // A broker that keeps a dead producer's extensions for long (only a
  // consumer's report ends the wait), then StartPublishedProducer, then the
  // broker SIGKILLed: the producer lives on, its arena grown.
  void StartProducerAndKillTheBroker(BrokerProcess& broker, pid_t* child) {
    ASSERT_TRUE(broker.Start(kLongDrain));
    ASSERT_NO_FATAL_FAILURE(StartPublishedProducer(broker, child));
    admin_.reset();
    broker.Kill();
  }

  // As StartPublishedProducer, then SIGKILLs the producer, and waits for
  // the broker to see the death (the producer no longer listed).
  void StartProducerAndKillIt(BrokerProcess& broker) {
    pid_t child = -1;
    ASSERT_NO_FATAL_FAILURE(StartPublishedProducer(broker, &child));
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    ASSERT_TRUE(testing::WaitUntil([&] {
      auto topics = admin_->ListTopics();
      return topics.ok() && topics->size() == 1 && (*topics)[0].producers == 0;
    }));
  }

  // Reads until the end of the stream: every message exactly once, in
  // order, intact. Returns how many.
  int64_t ReadToTheEnd() {
    int64_t next = 0;
    while (true) {
      auto batch = consumer_->Next(30s);
      if (batch.status().IsEndOfStream()) break;
      EXPECT_TRUE(batch.ok()) << "after " << next << " messages: " << batch.status().ToString();
      if (!batch.ok()) break;
      const std::string wrong = CheckBatch(**batch, next);
      EXPECT_EQ(wrong, "");
      if (!wrong.empty()) break;
      ++next;
    }
    return next;
  }

  std::unique_ptr<BrokerClient> admin_;
  std::unique_ptr<Consumer> consumer_;
};

// The gap this closes: the broker used to remove a dead producer's names at
// once, so the consumer could not map the extensions and lost every message
// there ("names extension K, which cannot be mapped").
TEST_F(DeadProducerTest, MessagesInExtensionsNotMappedYetAreReadAfterTheProducerIsKilled) {
  BrokerProcess broker;
  // Only the consumer's report may end the wait here, not the bound.
  ASSERT_TRUE(broker.Start(kLongDrain));
  ASSERT_NO_FATAL_FAILURE(StartProducerAndKillIt(broker));
  EXPECT_EQ(ReadToTheEnd(), kInArena + kInExtension);
  // Read to its end: the consumer said so, and the broker removed the
  // extensions with the consumer still open.
  EXPECT_TRUE(testing::WaitNoSegments(broker.name() + "."))
      << "left: " << ::testing::PrintToString(ShmNames(broker.name() + "."));
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK_AND_ASSIGN(auto stats, admin->Stats());
  EXPECT_EQ(stats.reserved_bytes, 0u);
  EXPECT_EQ(stats.segments, 0u);
  consumer_.reset();
  EXPECT_EQ(broker.Stop(), 0);
  EXPECT_TRUE(ShmNames(broker.name() + ".").empty());
}

// A consumer that does not read (stopped, stuck) does not keep the dead
// producer's extensions past the broker's bound: they go while it lives,
// and the broker says why.
TEST_F(DeadProducerTest, AConsumerThatNeverReadsDoesNotPinTheExtensionsPastTheBound) {
  BrokerProcess broker;
  const std::string log = "/tmp/alkaid-test-" + broker.name() + ".log";
  ASSERT_TRUE(broker.Start({"--dead-producer-drain", "0.5"}, log));
  ASSERT_NO_FATAL_FAILURE(StartProducerAndKillIt(broker));
  EXPECT_TRUE(testing::WaitNoSegments(broker.name() + "."))
      << "left: " << ::testing::PrintToString(ShmNames(broker.name() + "."));
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  EXPECT_TRUE(testing::WaitUntil([&] {
    auto stats = admin->Stats();
    return stats.ok() && stats->reserved_bytes == 0;
  }));
  EXPECT_NE(testing::ReadFile(log).find("not read to the end in time by every consumer"),
            std::string::npos);
  consumer_.reset();
  EXPECT_EQ(broker.Stop(), 0);
  ::unlink(log.c_str());
}

// The broker SIGKILLed before the producer: the next broker finds the dead
// producer's extensions among its predecessor's leftovers and keeps them
// for its bound (it does not know the consumers), so the consumer, which
// outlived both, reads every message; the broker removes them as it stops.
TEST_F(DeadProducerTest, ANewBrokerKeepsTheExtensionsOfAProducerThatDiedWithTheOldOne) {
  BrokerProcess broker;
  pid_t child = -1;
  // Growing the arena asked the broker; now it dies, and the producer too.
  ASSERT_NO_FATAL_FAILURE(StartProducerAndKillTheBroker(broker, &child));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_TRUE(broker.Start(kLongDrain));
  EXPECT_EQ(ReadToTheEnd(), kInArena + kInExtension);
  consumer_.reset();
  EXPECT_EQ(broker.Stop(), 0);
  EXPECT_TRUE(ShmNames(broker.name() + ".").empty())
      << "left: " << ::testing::PrintToString(ShmNames(broker.name() + "."));
}

// The gap the soak found next: the broker restarted, the producer registered
// again with the new one and was SIGKILLed before the consumer (not calling
// Next meanwhile) subscribed again. The new broker knew no consumer of the
// topic at the death and removed the extensions at once; the consumer,
// registered on the channel since before the restart, lost every message
// there. Now the broker waits for the processes registered on the channel
// too, and the consumer, which has no id for that producer with this
// broker, says by the channel's name that it read it to the end: the names
// go with the consumer still open.
TEST_F(DeadProducerTest, AConsumerNotYetBackFromABrokerRestartStillReadsTheExtensions) {
  BrokerProcess broker;
  pid_t child = -1;
  ASSERT_NO_FATAL_FAILURE(StartProducerAndKillTheBroker(broker, &child));
  ASSERT_TRUE(broker.Start(kLongDrain));
  ASSERT_OK_AND_ASSIGN(admin_, BrokerClient::Connect(broker.socket()));
  auto producers_listed = [&](uint32_t n) {
    return testing::WaitUntil([&] {
      auto topics = admin_->ListTopics();
      return topics.ok() && topics->size() == 1 && (*topics)[0].producers == n;
    });
  };
  // The producer's session thread registers again; the consumer, which
  // does not call Next, does not.
  ASSERT_TRUE(producers_listed(1)) << "the producer did not register again";
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_TRUE(producers_listed(0));
  EXPECT_FALSE(ExtensionNames(broker).empty())
      << "the new broker removed the extensions of a producer its consumer had not read";
  EXPECT_EQ(ReadToTheEnd(), kInArena + kInExtension);
  // The consumer says so once it is back with the broker; an application
  // keeps calling Next at the end of the stream (producers may come).
  EXPECT_TRUE(testing::WaitUntil([&] {
    (void)consumer_->Next(1ms);
    return ShmNames(broker.name() + ".").empty();
  })) << "left: "
      << ::testing::PrintToString(ShmNames(broker.name() + "."));
  ASSERT_OK_AND_ASSIGN(auto stats, admin_->Stats());
  EXPECT_EQ(stats.reserved_bytes, 0u);
  consumer_.reset();
  EXPECT_EQ(broker.Stop(), 0);
  EXPECT_TRUE(ShmNames(broker.name() + ".").empty());
}

}  // namespace
}  // namespace alkaid::broker
