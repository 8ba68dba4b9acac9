// Multi-process tests of the ring and the body allocator: real processes
// made with fork(), each with its own mappings of the segments.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "alkaid/shm/body_allocator.h"
#include "alkaid/shm/ring.h"
#include "alkaid/shm/segment.h"
#include "ring_layout_internal.h"
#include "shm_test_util.h"
#include "test_util.h"

namespace alkaid::shm {
namespace {

using namespace std::chrono_literals;
using testing::CheckPattern;
using testing::FillPattern;
using testing::ForkChild;
using testing::MakePayload;
using testing::ShmTest;
using testing::VerifyPayload;
using testing::WaitChild;

std::span<const std::byte> Bytes(const std::vector<std::byte>& v) { return {v.data(), v.size()}; }

// Waits until `n` consumers are registered and active.
bool WaitForActive(const RingProducer& producer, uint32_t n, std::chrono::seconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    uint32_t active = 0;
    for (const auto& info : producer.ConsumersGuess()) active += info.active ? 1 : 0;
    if (active >= n) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

// Pipe used as a one-shot signal between processes.
struct Signal {
  int fds[2] = {-1, -1};
  Signal() { (void)!::pipe(fds); }
  ~Signal() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  void Notify() { (void)!::write(fds[1], "x", 1); }
  bool Wait() {
    char c;
    return ::read(fds[0], &c, 1) == 1;
  }
};

// Reads messages made by MakePayload until EndOfStream and checks order,
// exactly-once delivery and contents; messages with seq % body_every == 0
// must carry a FillPattern(seq) body. Returns 0 on success.
int VerifyingConsumer(const std::string& ring, const std::string& bodies, uint64_t expected,
                      uint64_t body_every) {
  std::unique_ptr<BodyReader> reader;
  if (!bodies.empty()) {
    auto r = BodyReader::Open(bodies);
    CHILD_CHECK(r.ok(), 10, "%s", r.status().ToString().c_str());
    reader = std::move(r).ValueOrDie();
  }
  ConsumerOptions co;
  co.bodies = reader.get();
  co.wait_mode = WaitMode::kSpinThenBlock;
  co.spin_iterations = 256;
  auto c = RingConsumer::Open(ring, co);
  CHILD_CHECK(c.ok(), 11, "%s", c.status().ToString().c_str());
  RingMessage msg;
  uint64_t next = 0;
  while (true) {
    Status st = (*c)->Receive(&msg, 20s);
    if (st.IsEndOfStream()) break;
    CHILD_CHECK(st.ok(), 12, "at %llu: %s", static_cast<unsigned long long>(next),
                st.ToString().c_str());
    CHILD_CHECK(msg.sequence() == next, 13, "sequence %llu, expected %llu",
                static_cast<unsigned long long>(msg.sequence()),
                static_cast<unsigned long long>(next));
    CHILD_CHECK(msg.lost_before() == 0, 14, "lost %llu",
                static_cast<unsigned long long>(msg.lost_before()));
    CHILD_CHECK(VerifyPayload(msg.payload()) == next, 15, "payload of %llu is damaged",
                static_cast<unsigned long long>(next));
    if (body_every != 0) {
      const bool want = next % body_every == 0;
      CHILD_CHECK(msg.body_handle().valid() == want, 16, "body presence at %llu",
                  static_cast<unsigned long long>(next));
      if (want) {
        CHILD_CHECK(msg.body().valid() && CheckPattern(next, msg.body().data()), 17,
                    "body of %llu is damaged", static_cast<unsigned long long>(next));
      }
    }
    ++next;
  }
  CHILD_CHECK(next == expected, 18, "received %llu of %llu", static_cast<unsigned long long>(next),
              static_cast<unsigned long long>(expected));
  return 0;
}

class RingMultiProcessTest : public ShmTest {};

TEST_F(RingMultiProcessTest, OneProducerFourConsumersAMillionMessages) {
  constexpr uint64_t kMessages = 1'000'000;
  constexpr uint64_t kBodyEvery = 16;
  const std::string ring = NewName("ring");
  const std::string body_name = NewName("bodies");
  BodyAllocatorOptions bo;
  bo.wait_timeout = 20s;
  ASSERT_OK_AND_ASSIGN(auto bodies, BodyAllocator::Create(body_name, 4 << 20, bo));
  RingOptions options;
  options.slot_count = 4096;
  options.inline_capacity = 128;
  options.publish_timeout = 20s;
  ASSERT_OK_AND_ASSIGN(auto producer, RingProducer::Create(ring, options, bodies.get()));

  std::vector<pid_t> children;
  for (int i = 0; i < 4; ++i) {
    children.push_back(
        ForkChild([&] { return VerifyingConsumer(ring, body_name, kMessages, kBodyEvery); }));
  }
  ASSERT_TRUE(WaitForActive(*producer, 4));
  for (uint64_t i = 0; i < kMessages; ++i) {
    const auto payload = MakePayload(i);
    if (i % kBodyEvery == 0) {
      ASSERT_OK_AND_ASSIGN(auto block, bodies->Allocate(1 + (i * 13) % 2000));
      FillPattern(i, block.data());
      ASSERT_OK(producer->Publish(Bytes(payload), block));
    } else {
      ASSERT_OK(producer->Publish(Bytes(payload)));
    }
  }
  producer->Close();
  for (pid_t pid : children) EXPECT_EQ(WaitChild(pid), 0);
  producer->ReleaseConsumedBodies();
  bodies->Reclaim();
  EXPECT_EQ(bodies->stats().in_use_blocks, 0u);
}

TEST_F(RingMultiProcessTest, ConsumersReleaseBodiesOutOfOrderAndSpaceIsReused) {
  constexpr uint64_t kMessages = 30'000;
  const std::string ring = NewName("ring");
  const std::string body_name = NewName("bodies");
  BodyAllocatorOptions bo;
  bo.wait_timeout = 20s;
  ASSERT_OK_AND_ASSIGN(auto bodies, BodyAllocator::Create(body_name, 512 << 10, bo));
  RingOptions options;
  options.slot_count = 256;
  options.publish_timeout = 20s;
  ASSERT_OK_AND_ASSIGN(auto producer, RingProducer::Create(ring, options, bodies.get()));

  auto holder = [&](uint32_t seed) -> int {
    auto reader = BodyReader::Open(body_name);
    CHILD_CHECK(reader.ok(), 10, "%s", reader.status().ToString().c_str());
    ConsumerOptions co;
    co.bodies = reader->get();
    auto c = RingConsumer::Open(ring, co);
    CHILD_CHECK(c.ok(), 11, "%s", c.status().ToString().c_str());
    std::mt19937 rng(seed);
    std::vector<std::pair<uint64_t, BlockRef>> held;
    RingMessage msg;
    uint64_t next = 0;
    while (true) {
      Status st = (*c)->Receive(&msg, 20s);
      if (st.IsEndOfStream()) break;
      CHILD_CHECK(st.ok() && msg.sequence() == next && msg.body().valid(), 12, "message %llu: %s",
                  static_cast<unsigned long long>(next), st.ToString().c_str());
      held.emplace_back(next, msg.TakeBody());
      ++next;
      // Keep up to 48 bodies and release a random one: releases happen in
      // no particular order.
      while (held.size() > std::uniform_int_distribution<size_t>(1, 48)(rng)) {
        const size_t k = std::uniform_int_distribution<size_t>(0, held.size() - 1)(rng);
        CHILD_CHECK(CheckPattern(held[k].first, held[k].second.data()), 13,
                    "body %llu changed while held", static_cast<unsigned long long>(held[k].first));
        std::swap(held[k], held.back());
        held.pop_back();  // releases
      }
    }
    CHILD_CHECK(next == kMessages, 14, "received %llu", static_cast<unsigned long long>(next));
    return 0;
  };
  const pid_t a = ForkChild([&] { return holder(1); });
  const pid_t b = ForkChild([&] { return holder(2); });
  ASSERT_TRUE(WaitForActive(*producer, 2));
  std::mt19937 rng(3);
  for (uint64_t i = 0; i < kMessages; ++i) {
    ASSERT_OK_AND_ASSIGN(auto block,
                         bodies->Allocate(std::uniform_int_distribution<uint64_t>(256, 4096)(rng)));
    FillPattern(i, block.data());
    ASSERT_OK(producer->Publish(Bytes(MakePayload(i)), block));
  }
  producer->Close();
  EXPECT_EQ(WaitChild(a), 0);
  EXPECT_EQ(WaitChild(b), 0);
  producer->ReleaseConsumedBodies();
  bodies->Reclaim();
  const auto stats = bodies->stats();
  EXPECT_EQ(stats.allocations, kMessages);
  EXPECT_EQ(stats.in_use_blocks, 0u);
  EXPECT_EQ(stats.largest_free_bytes, stats.capacity_bytes);
  // ~60 MB went through a 512 KiB arena: space was reused many times.
  EXPECT_GT(stats.reclaimed_blocks, kMessages - 200);
}

TEST_F(RingMultiProcessTest, FullBodySegmentGivesBackpressureOrAnError) {
  const std::string ring = NewName("ring");
  const std::string body_name = NewName("bodies");
  BodyAllocatorOptions bo;
  bo.full_policy = FullPolicy::kWait;
  bo.wait_timeout = 100ms;
  ASSERT_OK_AND_ASSIGN(auto bodies, BodyAllocator::Create(body_name, 64 << 10, bo));
  RingOptions options;
  options.slot_count = 64;
  ASSERT_OK_AND_ASSIGN(auto producer, RingProducer::Create(ring, options, bodies.get()));
  Signal release;
  const pid_t child = ForkChild([&]() -> int {
    auto reader = BodyReader::Open(body_name);
    CHILD_CHECK(reader.ok(), 10, "%s", reader.status().ToString().c_str());
    ConsumerOptions co;
    co.bodies = reader->get();
    auto c = RingConsumer::Open(ring, co);
    CHILD_CHECK(c.ok(), 11, "%s", c.status().ToString().c_str());
    std::vector<BlockRef> hoard;
    RingMessage msg;
    while (true) {
      Status st = (*c)->Receive(&msg, 20s);
      if (st.IsEndOfStream()) break;
      CHILD_CHECK(st.ok(), 12, "%s", st.ToString().c_str());
      hoard.push_back(msg.TakeBody());
      if (hoard.size() == 15) {
        CHILD_CHECK(release.Wait(), 13, "pipe");
        hoard.clear();  // release everything at once
      }
    }
    return 0;
  });
  ASSERT_TRUE(WaitForActive(*producer, 1));
  // 15 blocks of 4 KiB (+ 64-byte headers) fill the 64 KiB arena.
  for (uint64_t i = 0; i < 15; ++i) {
    ASSERT_OK_AND_ASSIGN(auto block, bodies->Allocate(4000));
    ASSERT_OK(producer->Publish(Bytes(MakePayload(i)), block));
  }
  // Wait until the child has taken them all (so the producer's own
  // references are gone and only the child's hold the space).
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (producer->ConsumersGuess()[0].cursor < 15 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_RAISES_WITH_MESSAGE(kOutOfMemory, "is full", bodies->TryAllocate(8000));
  ASSERT_RAISES_WITH_MESSAGE(kTimedOut, "after waiting", bodies->Allocate(8000));
  release.Notify();
  // Backpressure now ends as soon as the consumer lets go.
  Status st;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto block = bodies->Allocate(8000);
    st = block.status();
    if (block.ok()) {
      ASSERT_OK(producer->Publish(Bytes(MakePayload(15)), *block));
      break;
    }
  }
  ASSERT_OK(st);
  producer->Close();
  EXPECT_EQ(WaitChild(child), 0);
}

TEST_F(RingMultiProcessTest, BlockPolicyProducerWaitsForASlowConsumerThenProceeds) {
  constexpr uint64_t kMessages = 2000;
  constexpr uint32_t kSlots = 64;
  const std::string ring = NewName("ring");
  RingOptions options;
  options.slot_count = kSlots;
  options.publish_timeout = 30s;
  ASSERT_OK_AND_ASSIGN(auto producer, RingProducer::Create(ring, options));
  Signal go;
  const pid_t consumer = ForkChild([&]() -> int {
    // Attach, then read nothing until told: the producer must wait for us.
    std::unique_ptr<RingConsumer> c;
    {
      auto r = RingConsumer::Open(ring);
      CHILD_CHECK(r.ok(), 11, "%s", r.status().ToString().c_str());
      c = std::move(r).ValueOrDie();
    }
    CHILD_CHECK(go.Wait(), 12, "pipe");
    RingMessage msg;
    for (uint64_t i = 0; i < kMessages; ++i) {
      Status st = c->Receive(&msg, 20s);
      CHILD_CHECK(st.ok() && msg.sequence() == i && msg.lost_before() == 0 &&
                      VerifyPayload(msg.payload()) == i,
                  13, "message %llu: %s", static_cast<unsigned long long>(i),
                  st.ToString().c_str());
    }
    return 0;
  });
  ASSERT_TRUE(WaitForActive(*producer, 1));
  const auto* header =
      reinterpret_cast<const internal::RingHeaderData*>(producer->segment()->payload());
  std::atomic<uint64_t> published{0};
  Status publishing;
  std::thread writer([&] {
    for (uint64_t i = 0; i < kMessages; ++i) {
      publishing = producer->Publish(Bytes(MakePayload(i)));
      if (!publishing.ok()) return;
      published.store(i + 1);
    }
  });
  // The ring holds 64 messages: the producer announces that it waits for
  // room, with exactly the ring's worth published, the consumer at 0.
  // (Bounded, should a broken producer never announce: then the check
  // below fails instead of the test hanging.)
  const auto guard = std::chrono::steady_clock::now() + 60s;
  while (header->space_waiters.load() == 0 && published.load() < kMessages &&
         std::chrono::steady_clock::now() < guard) {
    std::this_thread::yield();
  }
  EXPECT_EQ(published.load(), kSlots);
  go.Notify();
  writer.join();
  ASSERT_OK(publishing);
  EXPECT_EQ(published.load(), kMessages);
  EXPECT_EQ(WaitChild(consumer), 0);
}

TEST_F(RingMultiProcessTest, DropPolicySlowConsumerSeesAGapEqualToWhatItLost) {
  constexpr uint64_t kMessages = 1000;
  constexpr uint32_t kSlots = 64;
  const std::string ring = NewName("ring");
  RingOptions options;
  options.slot_count = kSlots;
  options.policy = SlowConsumerPolicy::kDropOldest;
  ASSERT_OK_AND_ASSIGN(auto producer, RingProducer::Create(ring, options));
  Signal go;
  const pid_t consumer = ForkChild([&]() -> int {
    auto c = RingConsumer::Open(ring);
    CHILD_CHECK(c.ok(), 11, "%s", c.status().ToString().c_str());
    CHILD_CHECK(go.Wait(), 12, "pipe");
    RingMessage msg;
    uint64_t received = 0, lost = 0, last = 0;
    bool first = true;
    while (true) {
      Status st = (*c)->Receive(&msg, 20s);
      if (st.IsEndOfStream()) break;
      CHILD_CHECK(st.ok(), 13, "%s", st.ToString().c_str());
      CHILD_CHECK(VerifyPayload(msg.payload()) == msg.sequence(), 14, "damaged payload");
      const uint64_t expected = first ? msg.lost_before() : last + 1 + msg.lost_before();
      CHILD_CHECK(msg.sequence() == expected, 15, "sequence %llu after %llu with gap %llu",
                  static_cast<unsigned long long>(msg.sequence()),
                  static_cast<unsigned long long>(last),
                  static_cast<unsigned long long>(msg.lost_before()));
      first = false;
      last = msg.sequence();
      lost += msg.lost_before();
      ++received;
    }
    CHILD_CHECK(received + lost == kMessages, 16, "received %llu + lost %llu",
                static_cast<unsigned long long>(received), static_cast<unsigned long long>(lost));
    CHILD_CHECK(lost == kMessages - kSlots && (*c)->lost_count() == lost, 17, "lost %llu",
                static_cast<unsigned long long>(lost));
    return 0;
  });
  ASSERT_TRUE(WaitForActive(*producer, 1));
  for (uint64_t i = 0; i < kMessages; ++i) ASSERT_OK(producer->Publish(Bytes(MakePayload(i))));
  producer->Close();
  go.Notify();
  EXPECT_EQ(WaitChild(consumer), 0);
}

TEST_F(RingMultiProcessTest, KilledConsumerIsDetachedAndTheOthersCarryOn) {
  constexpr uint64_t kMessages = 50'000;
  const std::string ring = NewName("ring");
  RingOptions options;
  options.slot_count = 256;
  options.publish_timeout = 100ms;
  ASSERT_OK_AND_ASSIGN(auto producer, RingProducer::Create(ring, options));
  const pid_t victim = ForkChild([&]() -> int {
    auto c = RingConsumer::Open(ring);
    CHILD_CHECK(c.ok(), 11, "%s", c.status().ToString().c_str());
    RingMessage msg;
    for (int i = 0; i < 1000; ++i) (void)(*c)->Receive(&msg, 20s);
    ::pause();  // mid-stream; SIGKILL arrives here
    return 0;
  });
  std::vector<pid_t> survivors;
  for (int i = 0; i < 2; ++i) {
    survivors.push_back(ForkChild([&] { return VerifyingConsumer(ring, "", kMessages, 0); }));
  }
  ASSERT_TRUE(WaitForActive(*producer, 3));
  int detached = 0;
  for (uint64_t i = 0; i < kMessages; ++i) {
    if (i == 1200) {  // the victim is somewhere around message 1000
      ::kill(victim, SIGKILL);
      EXPECT_EQ(WaitChild(victim), 128 + SIGKILL);
    }
    Status st = producer->Publish(Bytes(MakePayload(i)));
    for (int retry = 0; st.IsTimedOut(); ++retry) {
      ASSERT_LT(retry, 100) << "producer stuck at message " << i << ": " << st;
      // What the broker will do: find registrations of dead processes and
      // deactivate them.
      for (const auto& info : producer->ConsumersGuess()) {
        if (info.active && ::kill(static_cast<pid_t>(info.pid), 0) != 0 && errno == ESRCH) {
          ASSERT_OK(producer->DetachConsumer(info.id));
          ++detached;
        }
      }
      st = producer->Publish(Bytes(MakePayload(i)));
    }
    ASSERT_OK(st);
  }
  producer->Close();
  EXPECT_EQ(detached, 1);
  for (pid_t pid : survivors) EXPECT_EQ(WaitChild(pid), 0);
}

TEST_F(RingMultiProcessTest, KilledProducerLeavesEverythingCommittedReadable) {
  constexpr uint64_t kCommitted = 1000;
  const std::string ring = NewName("ring");
  Signal created, attached, published;
  const pid_t producer = ForkChild([&]() -> int {
    RingOptions options;
    options.slot_count = 4096;
    auto p = RingProducer::Create(ring, options);
    CHILD_CHECK(p.ok(), 10, "%s", p.status().ToString().c_str());
    created.Notify();
    CHILD_CHECK(attached.Wait(), 11, "pipe");
    uint64_t i = 0;
    for (; i < kCommitted; ++i) {
      CHILD_CHECK((*p)->Publish(Bytes(MakePayload(i))).ok(), 12, "publish");
    }
    published.Notify();
    while (true) {  // keeps publishing until killed
      (void)(*p)->Publish(Bytes(MakePayload(i++)));
      std::this_thread::sleep_for(100us);
    }
  });
  ASSERT_TRUE(created.Wait());
  ASSERT_OK_AND_ASSIGN(auto consumer, RingConsumer::Open(ring));
  attached.Notify();
  ASSERT_TRUE(published.Wait());
  // Killed while it still publishes (past what it reported committed): the
  // ring's write sequence says so, no guessed duration.
  ASSERT_OK_AND_ASSIGN(
      auto mapping, Segment::Open(ring, SegmentKind::kRing, SegmentOpenOptions{.read_only = true}));
  const auto* header = reinterpret_cast<const internal::RingHeaderData*>(mapping->payload());
  while (header->write_sequence.load() < kCommitted + 10) std::this_thread::yield();
  ::kill(producer, SIGKILL);
  EXPECT_EQ(WaitChild(producer), 128 + SIGKILL);

  RingMessage msg;
  uint64_t next = 0;
  Status st;
  while ((st = consumer->Receive(&msg, 200ms)).ok()) {
    ASSERT_EQ(msg.sequence(), next);
    ASSERT_EQ(VerifyPayload(msg.payload()), next);
    ++next;
  }
  EXPECT_TRUE(st.IsTimedOut()) << st;
  EXPECT_GE(next, kCommitted);
}

}  // namespace
}  // namespace alkaid::shm
