// How often a busy consumer looks at the broker: Consumer::Next maintains
// (a poll(2) of the broker socket, the producers' pids) when it found
// nothing and the last look is kMaintainInterval old, never per message.
// poll(2) is interposed in this test executable and counted on the threads
// that ask; the sanitizers' runtimes intercept it themselves, so this test
// is built without them.

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/builder_primitive.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "test_util.h"

namespace {
thread_local bool t_count_polls = false;
std::atomic<uint64_t> g_polls{0};
}  // namespace

// Every poll(2) of this process comes here first (the executable's symbol,
// exported, comes before libc's), and goes on to libc's.
extern "C" __attribute__((visibility("default"))) int poll(struct pollfd* fds, nfds_t nfds,
                                                           int timeout) {
  using Poll = int (*)(struct pollfd*, nfds_t, int);
  static const auto real = reinterpret_cast<Poll>(dlsym(RTLD_NEXT, "poll"));
  if (t_count_polls) g_polls.fetch_add(1, std::memory_order_relaxed);
  return real(fds, nfds, timeout);
}

namespace alkaid::broker {
namespace {

using client::Consumer;
using client::Producer;
using testing::BrokerProcess;
using namespace std::chrono_literals;

constexpr int64_t kBatches = 300;
constexpr auto kGap = 600us;                 // a 16 MiB ping's fill, about
constexpr auto kMaintainInterval = 50ms;     // consumer.cc's
constexpr auto kIdleBeforeMaintain = 100us;  // consumer.cc's: shorter than kGap

static_assert(kGap > kIdleBeforeMaintain, "every wait is long enough to maintain in");

// Batches every ~600 us to a consumer waiting in Next (busy-poll): every
// wait passes the point where it may maintain, and yet it looks at the
// broker once per kMaintainInterval at most, not in every other gap (as it
// did with a 1 ms interval: about kBatches / 2 polls). It still looks.
TEST(ConsumerMaintainTest, AConsumerWokenEveryFewHundredMicrosecondsLooksAtTheBrokerRarely) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  const auto schema = format::schema({format::field("v", format::int64(), false)});
  auto po = testing::ProducerOn(broker);
  po.wait_for_consumers = 0ms;
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", schema, po));
  auto co = testing::ConsumerOn(broker);
  co.wait_mode = shm::WaitMode::kBusyPoll;
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("t", co));
  auto publish = [&](int64_t value) -> Status {
    ALKAID_ASSIGN_OR_RAISE(auto pool, producer->NewBatchPool(64));
    format::Int64Builder b(pool.get());
    ALKAID_RETURN_NOT_OK(b.Append(value));
    ALKAID_ASSIGN_OR_RAISE(auto values, b.Finish());
    ALKAID_ASSIGN_OR_RAISE(auto batch, format::RecordBatch::Make(schema, 1, {values}));
    return producer->Publish(*batch, pool.get());
  };
  // The first batch: the consumer has its channel and the shape.
  ASSERT_OK(publish(-1));
  ASSERT_OK_AND_ASSIGN(auto first, consumer->Next(10s));
  ASSERT_NE(first, nullptr);

  Status fed;
  std::thread feeder([&] {
    for (int64_t i = 0; i < kBatches && fed.ok(); ++i) {
      std::this_thread::sleep_for(kGap);
      fed = publish(i);
    }
  });
  g_polls.store(0);
  t_count_polls = true;
  const auto start = std::chrono::steady_clock::now();
  Status received;
  for (int64_t i = 0; i < kBatches && received.ok(); ++i) {
    auto got = consumer->Next(10s);
    if (!got.ok()) {
      received = got.status();
    } else if (*got == nullptr || (*got)->column_data(0)->GetValues<int64_t>(1)[0] != i) {
      received = Status::Invalid("batch ", i, " missing or out of order");
    }
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  t_count_polls = false;
  feeder.join();
  ASSERT_OK(fed);
  ASSERT_OK(received);
  const uint64_t polls = g_polls.load();
  // One look when due at the start, one per interval after it, and one
  // more for the kMaintainEvery-th receive attempt (about 2 per batch here).
  const auto allowed = static_cast<uint64_t>(elapsed / kMaintainInterval) + 3;
  EXPECT_LE(polls, allowed)
      << "looks at the broker socket in "
      << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms of "
      << kBatches << " batches";
  EXPECT_GE(polls, 1u) << "a consumer woken this often must still look at the broker";
  EXPECT_OK(producer->Close());
  EXPECT_OK(consumer->Close());
}

}  // namespace
}  // namespace alkaid::broker
