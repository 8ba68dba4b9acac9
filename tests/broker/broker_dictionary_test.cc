// Dictionary-encoded topics through a real alkaid-broker: a producer in
// another process sends whole, delta and replacement dictionaries; a
// consumer attached from the start and consumers that join mid-stream each
// decode every batch they receive with the dictionaries it was published
// with, lose nothing, and leave no segment behind.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "dictionary_script.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using client::BrokerClient;
using client::Consumer;
using client::Producer;
using testing::BrokerProcess;
using testing::WaitNoSegments;
using namespace std::chrono_literals;

constexpr int64_t kBatches = 300;

client::ConsumerOptions ConsumerOn(const BrokerProcess& broker) {
  client::ConsumerOptions options;
  options.socket_path = broker.socket();
  return options;
}

// Receives batches until `until` (exclusive) or end of stream; checks each
// against the script and that they follow each other from the first one.
// Returns the first batch number seen (-1 if none) and sets `*next` past
// the last.
int64_t ReceiveChecked(Consumer* consumer, int64_t until, int64_t* next) {
  int64_t first = -1;
  while (*next < until || first < 0) {
    auto got = consumer->Next(10s);
    if (got.status().code() == StatusCode::kEndOfStream) break;
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) break;
    const int64_t b = alkaid::testing::BatchId(**got);
    if (first < 0) {
      first = b;
    } else {
      EXPECT_EQ(b, *next) << "batch " << b << " after " << *next - 1;
    }
    EXPECT_TRUE(alkaid::testing::IsBatch(**got, b));
    *next = b + 1;
  }
  return first;
}

TEST(BrokerDictionaryTest, LateJoinersDecodeEveryBatchWithItsDictionaries) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK(admin->CreateTopic("words", alkaid::testing::WordSchema()).status());
  ASSERT_OK_AND_ASSIGN(auto early, Consumer::Open("words", ConsumerOn(broker)));

  const pid_t child = testing::ForkTestChild();
  if (child == 0) {
    client::ProducerOptions options;
    options.socket_path = broker.socket();
    options.wait_for_consumers = 5s;
    auto producer = Producer::Open("words", alkaid::testing::WordSchema(), options);
    if (!producer.ok()) ::_exit(1);
    alkaid::testing::Script script;
    for (int64_t b = 0; b < kBatches; ++b) {
      auto batch = script.Build(b);
      if (!batch.ok() || !(*producer)->PublishCopy(**batch).ok()) ::_exit(2);
      // Slow enough for the consumers below to join mid-stream.
      std::this_thread::sleep_for(1ms);
    }
    ::_exit((*producer)->Close().ok() ? 0 : 3);
  }

  // The early consumer paces the joins: late consumers attach after it saw
  // 40, 125 (mid-generation) and 200 batches (just before a replacement).
  std::vector<std::unique_ptr<Consumer>> late;
  int64_t next = 0;
  EXPECT_EQ(ReceiveChecked(early.get(), 40, &next), 0);
  for (int64_t join_after : {125, 199}) {
    ASSERT_OK_AND_ASSIGN(auto c, Consumer::Open("words", ConsumerOn(broker)));
    late.push_back(std::move(c));
    ReceiveChecked(early.get(), join_after, &next);
  }
  ASSERT_OK_AND_ASSIGN(auto last_late, Consumer::Open("words", ConsumerOn(broker)));
  late.push_back(std::move(last_late));
  ReceiveChecked(early.get(), kBatches, &next);
  EXPECT_EQ(next, kBatches);
  EXPECT_EQ(early->lost(), 0u);

  for (size_t i = 0; i < late.size(); ++i) {
    SCOPED_TRACE("late consumer " + std::to_string(i));
    int64_t late_next = 0;
    const int64_t first = ReceiveChecked(late[i].get(), kBatches, &late_next);
    EXPECT_GT(first, 0) << "joined before the first batch";
    EXPECT_EQ(late_next, kBatches);  // every batch from its first on
    EXPECT_EQ(late[i]->lost(), 0u);
    auto end = late[i]->Next(5s);
    EXPECT_EQ(end.status().code(), StatusCode::kEndOfStream) << end.status();
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  early.reset();
  late.clear();
  EXPECT_TRUE(WaitNoSegments(broker.name() + "."));
}

}  // namespace
}  // namespace alkaid::broker
