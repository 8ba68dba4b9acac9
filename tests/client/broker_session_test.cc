// The broker session (broker/client/src/broker_session.h) against a real
// alkaid-broker: the event pump, a lost broker noticed, reconnection to a
// restarted broker that re-creates the topic and adopts the new id, and
// the session thread's stats reports and re-registration. The session is
// internal to the client library: this test compiles its source.

#include "broker_session.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>

#include "alkaid/client/broker_client.h"
#include "alkaid/format/type.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "test_util.h"

namespace alkaid::client::internal {
namespace {

namespace p = broker::protocol;
using broker::testing::BrokerProcess;
using broker::testing::WaitUntil;
using Role = BrokerSession::Role;
using namespace std::chrono_literals;

constexpr char kTopic[] = "session";

format::SchemaPtr TopicSchema() { return format::schema({format::field("x", format::int64())}); }

// What `alkaid topics` lists of the topic.
struct Listing {
  uint32_t producers = 0;
  uint32_t consumers = 0;
  uint64_t published = 0;
  uint64_t arena_bytes = 0;
};

// The topic as the broker lists it, if it exists.
std::optional<Listing> Listed(const BrokerProcess& broker) {
  auto client = BrokerClient::Connect(broker.socket());
  if (!client.ok()) return std::nullopt;
  auto topics = (*client)->ListTopics();
  if (!topics.ok()) return std::nullopt;
  for (const auto& t : *topics) {
    if (t.name == kTopic) return Listing{t.producers, t.consumers, t.published, t.arena_bytes};
  }
  return std::nullopt;
}

Status CreateTopic(const BrokerProcess& broker) {
  ALKAID_ASSIGN_OR_RAISE(auto client, BrokerClient::Connect(broker.socket()));
  TopicOptions options;
  options.arena_bytes = 1 << 20;
  return client->CreateTopic(kTopic, TopicSchema(), options).status();
}

Result<p::Reply> RegisterConsumer(BrokerConnection& connection) {
  p::Request attach;
  attach.type = p::RequestType::kAttachConsumer;
  attach.topic = kTopic;
  return BrokerSession::Attach(connection, std::move(attach));
}

// A producer's registration without a channel of its own (the broker
// hands out the channel's name; nothing maps it here): attach, then ready.
Result<p::Reply> RegisterProducer(BrokerConnection& connection) {
  p::Request attach;
  attach.type = p::RequestType::kAttachProducer;
  attach.topic = kTopic;
  ALKAID_ASSIGN_OR_RAISE(p::Reply reply, BrokerSession::Attach(connection, std::move(attach)));
  ALKAID_RETURN_NOT_OK(BrokerSession::Ready(connection, reply.attached_id).status());
  return reply;
}

// A session of `role` on the topic, registered with `reg`.
Result<std::unique_ptr<BrokerSession>> Registered(const BrokerProcess& broker, Role role,
                                                  const BrokerSession::Register& reg) {
  ALKAID_ASSIGN_OR_RAISE(auto session, BrokerSession::Connect(kTopic, role, broker.socket()));
  ALKAID_ASSIGN_OR_RAISE(p::Reply reply, reg(session->connection()));
  session->Attached(reply);
  return session;
}

// A broker with the topic created.
class BrokerSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(broker_.Start());
    ASSERT_OK(CreateTopic(broker_));
  }
  BrokerProcess broker_;
};

TEST(EveryTest, IsDueOncePerInterval) {
  const auto start = std::chrono::steady_clock::now();
  Every every(1h);
  EXPECT_TRUE(every.Due(start));
  EXPECT_FALSE(every.Due(start));
  EXPECT_FALSE(every.Due(start + 59min));
  EXPECT_TRUE(every.Due(start + 1h));
  EXPECT_FALSE(every.Due(start + 1h));
}

// A consumer's session sees a producer join through its event pump; once
// the broker is killed, the pump says so and the session is lost: it
// offers no descriptor to wait on and its Detach sends nothing.
TEST_F(BrokerSessionTest, PumpsEventsAndNoticesALostBroker) {
  BrokerProcess& broker = broker_;
  ASSERT_OK_AND_ASSIGN(auto consumer, Registered(broker, Role::kConsumer, RegisterConsumer));
  EXPECT_NE(consumer->id(), 0u);
  EXPECT_EQ(consumer->config().name, kTopic);
  ASSERT_OK_AND_ASSIGN(auto producer, Registered(broker, Role::kProducer, RegisterProducer));

  uint64_t joined = 0;
  EXPECT_TRUE(WaitUntil([&] {
    EXPECT_OK(consumer->PumpEvents([&](const p::Event& e) {
      if (e.type == p::EventType::kProducerJoined) joined = e.producer.id;
    }));
    return joined != 0;
  }));
  EXPECT_EQ(joined, producer->id());
  EXPECT_FALSE(consumer->lost());
  EXPECT_GE(consumer->fd(), 0);

  ASSERT_OK(producer->Detach());
  EXPECT_TRUE(WaitUntil([&] {
    auto t = Listed(broker);
    return t.has_value() && t->producers == 0;
  }));

  broker.Kill();
  EXPECT_TRUE(WaitUntil([&] {
    (void)consumer->PumpEvents([](const p::Event&) {});
    return consumer->lost();
  }));
  EXPECT_EQ(consumer->fd(), -1);
  EXPECT_OK(consumer->Detach());  // nothing to tell
  EXPECT_EQ(consumer->reregistrations(), 0u);
}

// After a broker restart, Reconnect re-creates the topic from the config
// the first attach returned (the new broker knows nothing of it) and
// adopts the new connection and id.
TEST_F(BrokerSessionTest, ReconnectReCreatesTheTopicAndAdoptsTheNewId) {
  BrokerProcess& broker = broker_;
  ASSERT_OK_AND_ASSIGN(auto session, Registered(broker, Role::kConsumer, RegisterConsumer));

  broker.Kill();
  ASSERT_TRUE(broker.Start());
  EXPECT_FALSE(Listed(broker).has_value());  // a new broker: no topic
  EXPECT_TRUE(WaitUntil([&] {
    (void)session->PumpEvents([](const p::Event&) {});
    return session->lost();
  }));

  int registers = 0;
  auto reply = session->Reconnect(
      [&](BrokerConnection& connection) {
        ++registers;
        return RegisterConsumer(connection);
      },
      /*create_topic=*/true);
  ASSERT_OK(reply.status());
  EXPECT_EQ(registers, 1);
  EXPECT_FALSE(session->lost());
  EXPECT_EQ(session->id(), reply->attached_id);
  EXPECT_GE(session->fd(), 0);
  auto listed = Listed(broker);
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->consumers, 1u);
  EXPECT_EQ(listed->arena_bytes, 1u << 20);  // the config we had
  // Reconnect alone is not a re-registration (a consumer waiting for its
  // topic reconnects too): the caller counts.
  EXPECT_EQ(session->reregistrations(), 0u);
  EXPECT_OK(session->Detach());
  EXPECT_TRUE(WaitUntil([&] {
    auto t = Listed(broker);
    return t.has_value() && t->consumers == 0;
  }));
}

// The session thread reports the producer's figures to the broker, and
// after a broker restart registers again on its own and reports to the new
// broker under the new id (a broker takes a report only from the
// connection and id that registered the producer).
TEST_F(BrokerSessionTest, TheSessionThreadReportsAndReRegisters) {
  BrokerProcess& broker = broker_;
  ASSERT_OK_AND_ASSIGN(auto session, Registered(broker, Role::kProducer, RegisterProducer));

  std::atomic<uint64_t> published{42};
  std::atomic<int> registers{0};
  session->StartThread(
      [&](BrokerConnection& connection) {
        registers.fetch_add(1);
        return RegisterProducer(connection);
      },
      [&](p::Request& request) { request.published = published.load(); });
  EXPECT_TRUE(WaitUntil([&] {
    auto t = Listed(broker);
    return t.has_value() && t->published == 42;
  }));

  broker.Kill();
  ASSERT_TRUE(broker.Start());
  published = 43;
  EXPECT_TRUE(WaitUntil([&] { return session->reregistrations() == 1; }));
  EXPECT_EQ(registers.load(), 1);
  EXPECT_TRUE(WaitUntil([&] {
    auto t = Listed(broker);
    return t.has_value() && t->producers == 1 && t->published == 43;
  }));
  EXPECT_FALSE(session->broker_lost());

  session->StopThread();
  session->ReportStats();
  EXPECT_OK(session->Detach());
  EXPECT_TRUE(WaitUntil([&] {
    auto t = Listed(broker);
    return t.has_value() && t->producers == 0;
  }));
}

}  // namespace
}  // namespace alkaid::client::internal
