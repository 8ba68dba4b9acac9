// ConsumerOptions::stop: a consumer waiting for a topic that does not exist
// yet is cancelled from another thread. Real broker (tests/broker's
// BrokerProcess). Every wait is for a condition; the bounds are failure
// guards only: without the cancellation, Open would wait forever
// (wait_for_topic is unlimited) and the guard reports it.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <stop_token>
#include <string>
#include <thread>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/type.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "test_util.h"

namespace alkaid::client {
namespace {

using namespace std::chrono_literals;
using broker::testing::AwaitingConsumers;
using broker::testing::BrokerProcess;
using broker::testing::WaitUntil;

constexpr auto kGuard = 30s;

ConsumerOptions WaitForever(const BrokerProcess& broker, std::stop_token stop) {
  ConsumerOptions options;
  options.socket_path = broker.socket();
  options.wait_for_topic = std::chrono::milliseconds::max();
  options.stop = std::move(stop);
  return options;
}

// Open's result, or the process ends: a thread still blocked in Open could
// neither be joined nor abandoned safely.
Status Collect(std::future<Status>* pending, const char* what) {
  if (pending->wait_for(kGuard) != std::future_status::ready) {
    std::fprintf(stderr, "FAILED: %s: Open still waits %lld s after the stop request\n", what,
                 static_cast<long long>(kGuard.count()));
    std::_Exit(1);
  }
  return pending->get();
}

// Consumer::Open of `topic` on a thread of its own; `options` must outlive
// the future.
std::future<Status> OpenInBackground(const std::string& topic, const ConsumerOptions& options) {
  return std::async(std::launch::async,
                    [topic, &options] { return Consumer::Open(topic, options).status(); });
}

TEST(ConsumerCancelTest, AStopRequestEndsTheWaitForATopicWithCancelled) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  std::stop_source source;
  const ConsumerOptions options = WaitForever(broker, source.get_token());
  std::future<Status> opened = OpenInBackground("not_yet", options);
  // The consumer is registered with the broker as waiting: the stop comes
  // while Open is inside its wait, not before it.
  ASSERT_TRUE(WaitUntil([&] { return AwaitingConsumers(broker.socket(), "not_yet") == 1; }));
  ASSERT_EQ(opened.wait_for(0s), std::future_status::timeout) << opened.get().ToString();
  source.request_stop();
  const Status st = Collect(&opened, "AStopRequestEndsTheWaitForATopicWithCancelled");
  ASSERT_EQ(st.code(), StatusCode::kCancelled) << st.ToString();
  EXPECT_NE(st.message().find("'not_yet'"), std::string::npos) << st.ToString();
  // Its connection closed, the broker forgets the waiting consumer; a topic
  // created afterwards has no consumer from it.
  ASSERT_TRUE(WaitUntil([&] { return AwaitingConsumers(broker.socket(), "not_yet") == 0; }));
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK_AND_ASSIGN(
      bool created,
      admin->CreateTopic("not_yet", format::schema({format::field("id", format::int64(), false)})));
  EXPECT_TRUE(created);
  ASSERT_OK_AND_ASSIGN(auto topics, admin->ListTopics());
  for (const auto& t : topics) {
    if (t.name == "not_yet") {
      EXPECT_EQ(t.consumers, 0U);
    }
  }
}

TEST(ConsumerCancelTest, AStopRequestedBeforeOpenFailsWithoutWaiting) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  std::stop_source source;
  source.request_stop();
  const auto result = Consumer::Open("never", WaitForever(broker, source.get_token()));
  ASSERT_RAISES(kCancelled, result);
}

// The stop survives a broker outage: a consumer that lost its broker while
// waiting (and sleeps between reconnection attempts) is cancelled too.
TEST(ConsumerCancelTest, AStopRequestEndsTheWaitWhileTheBrokerIsDown) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  std::stop_source source;
  const ConsumerOptions options = WaitForever(broker, source.get_token());
  std::future<Status> opened = OpenInBackground("not_yet", options);
  // The consumer is registered with the broker as waiting: the stop comes
  // while Open is inside its wait, not before it.
  ASSERT_TRUE(WaitUntil([&] { return AwaitingConsumers(broker.socket(), "not_yet") == 1; }));
  broker.Stop();
  ASSERT_EQ(opened.wait_for(0s), std::future_status::timeout) << opened.get().ToString();
  source.request_stop();
  const Status st = Collect(&opened, "AStopRequestEndsTheWaitWhileTheBrokerIsDown");
  ASSERT_EQ(st.code(), StatusCode::kCancelled) << st.ToString();
}

// Without a stop request, the token changes nothing: the topic's creation
// ends the wait as before.
TEST(ConsumerCancelTest, AnUnstoppedTokenLetsTheWaitEndWithTheTopic) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  std::stop_source source;
  const ConsumerOptions options = WaitForever(broker, source.get_token());
  auto opened =
      std::async(std::launch::async, [&options] { return Consumer::Open("later", options); });
  ASSERT_TRUE(WaitUntil([&] { return AwaitingConsumers(broker.socket(), "later") == 1; }));
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK_AND_ASSIGN(
      bool created,
      admin->CreateTopic("later", format::schema({format::field("id", format::int64(), false)})));
  EXPECT_TRUE(created);
  ASSERT_EQ(opened.wait_for(kGuard), std::future_status::ready);
  ASSERT_OK_AND_ASSIGN(auto consumer, opened.get());
  EXPECT_EQ(consumer->topic(), "later");
}

}  // namespace
}  // namespace alkaid::client
