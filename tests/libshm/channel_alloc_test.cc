// The channel's steady state allocates no heap memory: lend, fill, publish,
// receive into a reused message, return. Global operator new is replaced in
// this test executable to count allocations.

#include <atomic>
#include <cstdlib>
#include <new>

#include "alkaid/shm/channel.h"
#include "counting_new.h"
#include "shm_test_util.h"
#include "test_util.h"

namespace alkaid::shm {
namespace {

using namespace std::chrono_literals;
using testing::ShmTest;

// One round: lend `size` bytes, write them, publish with inline bytes,
// receive into `message` (returning the body it held).
void Round(ChannelProducer* producer, ChannelConsumer* consumer, ChannelMessage* message,
           uint64_t i, uint64_t size) {
  auto loan = producer->Loan(size);
  ASSERT_TRUE(loan.ok()) << loan.status().ToString();
  std::memset(loan->data().data(), static_cast<int>(i), size);
  const std::byte inline_bytes[24] = {};
  ASSERT_TRUE(producer->Publish(inline_bytes, std::move(*loan), i).ok());
  auto got = consumer->TryReceive(message);
  ASSERT_TRUE(got.ok() && *got);
  ASSERT_EQ(message->user(), i);
}

TEST_F(ShmTest, ChannelSteadyStateAllocatesNothing) {
  const std::string name = NewName("ch");
  ChannelOptions o;
  o.slot_count = 64;
  o.inline_capacity = 64;
  o.arena_bytes = 1 << 20;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ChannelConsumerOptions co;
  co.wait_mode = WaitMode::kBusyPoll;
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name, co));
  ChannelMessage message;
  for (uint64_t size : {512u, 4096u, 100u}) {
    // Warm up: the arena's free list for this size, the message's buffer.
    for (uint64_t i = 0; i < 1000; ++i) Round(producer.get(), consumer.get(), &message, i, size);
    const uint64_t before = counting_new::g_allocations.load();
    for (uint64_t i = 1000; i < 11000; ++i) {
      Round(producer.get(), consumer.get(), &message, i, size);
    }
    EXPECT_EQ(counting_new::g_allocations.load() - before, 0u)
        << "allocations in 10000 rounds of " << size << " bytes";
  }
  // The counter counts: a receive into a fresh message grows its buffer.
  const uint64_t before = counting_new::g_allocations.load();
  ChannelMessage fresh;
  Round(producer.get(), consumer.get(), &fresh, 11000, 64);
  EXPECT_GT(counting_new::g_allocations.load() - before, 0u);
}

}  // namespace
}  // namespace alkaid::shm
