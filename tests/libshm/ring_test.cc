#include "alkaid/shm/ring.h"
#include "alkaid/shm/segment.h"
#include "ring_layout_internal.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "shm_test_util.h"
#include "test_util.h"

namespace alkaid::shm {
namespace {

using namespace std::chrono_literals;
using testing::MakePayload;
using testing::ShmTest;
using testing::VerifyPayload;

std::span<const std::byte> Bytes(const std::vector<std::byte>& v) { return {v.data(), v.size()}; }

class RingTest : public ShmTest {
 protected:
  std::unique_ptr<RingProducer> MakeRing(RingOptions options, BodyAllocator* bodies = nullptr) {
    name_ = NewName("ring");
    auto r = RingProducer::Create(name_, options, bodies);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::move(r).ValueOrDie() : nullptr;
  }
  std::unique_ptr<RingConsumer> Attach(ConsumerOptions options = {}) {
    auto r = RingConsumer::Open(name_, options);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::move(r).ValueOrDie() : nullptr;
  }
  std::string name_;
};

TEST_F(RingTest, MessagesArriveInOrderWithTheirPayload) {
  RingOptions options;
  options.slot_count = 8;
  options.inline_capacity = 200;
  auto producer = MakeRing(options);
  auto c1 = Attach();
  auto c2 = Attach();
  ASSERT_NE(c1->id(), c2->id());
  RingMessage msg;
  ASSERT_OK_AND_ASSIGN(bool got, c1->TryReceive(&msg));
  EXPECT_FALSE(got);
  for (uint64_t i = 0; i < 20; ++i) {
    ASSERT_OK(producer->Publish(Bytes(MakePayload(i, 150))));
    for (auto* c : {c1.get(), c2.get()}) {
      ASSERT_OK(c->Receive(&msg, 1s));
      EXPECT_EQ(msg.sequence(), i);
      EXPECT_EQ(VerifyPayload(msg.payload()), i);
      EXPECT_EQ(msg.lost_before(), 0u);
      EXPECT_FALSE(msg.body_handle().valid());
    }
  }
  EXPECT_EQ(producer->next_sequence(), 20u);
}

TEST_F(RingTest, EmptyAndMaximalPayloads) {
  RingOptions options;
  options.slot_count = 4;
  options.inline_capacity = 100;  // rounded up to 128
  auto producer = MakeRing(options);
  EXPECT_EQ(producer->options().inline_capacity, 128u);
  auto c = Attach();
  std::vector<std::byte> big(128, std::byte{0x5A});
  ASSERT_OK(producer->Publish({}));
  ASSERT_OK(producer->Publish(Bytes(big)));
  std::vector<std::byte> too_big(129);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "inline capacity", producer->Publish(Bytes(too_big)));
  RingMessage msg;
  ASSERT_OK(c->Receive(&msg, 1s));
  EXPECT_EQ(msg.payload().size(), 0u);
  ASSERT_OK(c->Receive(&msg, 1s));
  ASSERT_EQ(msg.payload().size(), 128u);
  EXPECT_EQ(std::memcmp(msg.payload().data(), big.data(), 128), 0);
}

TEST_F(RingTest, OptionsAreValidated) {
  RingOptions bad;
  bad.slot_count = 6;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "power of two", RingProducer::Create(NewName(), bad));
  bad = {};
  bad.max_consumers = 0;
  ASSERT_RAISES(kInvalid, RingProducer::Create(NewName(), bad));
  bad = {};
  bad.max_consumers = kMaxConsumers + 1;
  ASSERT_RAISES(kInvalid, RingProducer::Create(NewName(), bad));
  bad = {};
  bad.inline_capacity = kMaxInlinePayload + 1;
  ASSERT_RAISES(kInvalid, RingProducer::Create(NewName(), bad));
  bad = {};
  bad.policy = static_cast<SlowConsumerPolicy>(9);
  ASSERT_RAISES(kInvalid, RingProducer::Create(NewName(), bad));
}

TEST_F(RingTest, CloseGivesEndOfStreamAfterTheLastMessage) {
  auto producer = MakeRing({});
  auto c = Attach();
  ASSERT_OK(producer->Publish(Bytes(MakePayload(0))));
  producer->Close();
  ASSERT_RAISES(kInvalid, producer->Publish(Bytes(MakePayload(1))));
  RingMessage msg;
  ASSERT_OK(c->Receive(&msg, 1s));
  ASSERT_RAISES(kEndOfStream, c->Receive(&msg, 1s));
}

TEST_F(RingTest, ReceiveTimesOutInEveryWaitMode) {
  auto producer = MakeRing({});
  for (WaitMode mode : {WaitMode::kBusyPoll, WaitMode::kBlock, WaitMode::kSpinThenBlock}) {
    ConsumerOptions co;
    co.wait_mode = mode;
    auto c = Attach(co);
    RingMessage msg;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_RAISES_WITH_MESSAGE(kTimedOut, "no message", c->Receive(&msg, 20ms));
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 20ms);
  }
}

TEST_F(RingTest, BlockedConsumerIsWokenByThePublisher) {
  auto producer = MakeRing({});
  for (WaitMode mode : {WaitMode::kBlock, WaitMode::kSpinThenBlock, WaitMode::kBusyPoll}) {
    ConsumerOptions co;
    co.wait_mode = mode;
    co.spin_iterations = 16;
    auto c = Attach(co);
    Status received;
    RingMessage msg;
    const auto* header =
        reinterpret_cast<const internal::RingHeaderData*>(producer->segment()->payload());
    const uint32_t futex_before = header->data_futex.load();
    std::thread t([&] { received = c->Receive(&msg, 30s); });
    if (mode != WaitMode::kBusyPoll) {
      // Until it announced that it goes to sleep (a condition, no guessed
      // duration); a busy-polling consumer never sleeps.
      while (header->data_waiters.load() == 0) std::this_thread::yield();
    }
    const uint64_t seq = producer->next_sequence();
    ASSERT_OK(producer->Publish(Bytes(MakePayload(seq))));
    t.join();
    ASSERT_OK(received);
    EXPECT_EQ(VerifyPayload(msg.payload()), seq);
    // The publish woke the sleeper (it bumps the futex word only for a
    // consumer that announced itself).
    if (mode != WaitMode::kBusyPoll) {
      EXPECT_GT(header->data_futex.load(), futex_before);
    }
  }
}

TEST_F(RingTest, BlockPolicyTimesOutOnASlowConsumerAndResumesWhenItReads) {
  RingOptions options;
  options.slot_count = 4;
  options.publish_timeout = 30ms;
  auto producer = MakeRing(options);
  auto slow = Attach();
  for (uint64_t i = 0; i < 4; ++i) ASSERT_OK(producer->Publish(Bytes(MakePayload(i))));
  ASSERT_RAISES_WITH_MESSAGE(kTimedOut, "consumer " + std::to_string(slow->id()),
                             producer->Publish(Bytes(MakePayload(4))));
  RingMessage msg;
  ASSERT_OK(slow->Receive(&msg, 1s));
  EXPECT_EQ(msg.sequence(), 0u);
  ASSERT_OK(producer->Publish(Bytes(MakePayload(4))));
  for (uint64_t i = 1; i <= 4; ++i) {
    ASSERT_OK(slow->Receive(&msg, 1s));
    EXPECT_EQ(VerifyPayload(msg.payload()), i);
  }
}

TEST_F(RingTest, DetachedConsumerNoLongerHoldsTheProducer) {
  RingOptions options;
  options.slot_count = 4;
  options.publish_timeout = 20ms;
  auto producer = MakeRing(options);
  auto fast = Attach();
  auto stuck = Attach();
  RingMessage msg;
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_OK(producer->Publish(Bytes(MakePayload(i))));
    ASSERT_OK(fast->Receive(&msg, 1s));
  }
  ASSERT_RAISES(kTimedOut, producer->Publish(Bytes(MakePayload(4))));
  ASSERT_RAISES(kIndexError, producer->DetachConsumer(options.max_consumers));
  ASSERT_OK(producer->DetachConsumer(stuck->id()));
  ASSERT_RAISES(kKeyError, producer->DetachConsumer(stuck->id()));
  for (uint64_t i = 4; i < 20; ++i) {
    ASSERT_OK(producer->Publish(Bytes(MakePayload(i))));
    ASSERT_OK(fast->Receive(&msg, 1s));
    EXPECT_EQ(VerifyPayload(msg.payload()), i);
  }
  ASSERT_RAISES_WITH_MESSAGE(kCancelled, "detached", stuck->TryReceive(&msg));
  // Its registration can be reused; the old consumer must not free it.
  auto newcomer = Attach();
  EXPECT_EQ(newcomer->id(), stuck->id());
  stuck.reset();
  auto infos = producer->ConsumersGuess();
  EXPECT_TRUE(infos[newcomer->id()].active);
}

TEST_F(RingTest, ForceDetachedLiveConsumerKeepsItsRegistrationUntilItNotices) {
  // A live consumer may be between its registration check and its cursor
  // store when it is force-detached; its entry must not be handed to a new
  // consumer before it noticed, or that store would land in the newcomer's
  // cursor.
  RingOptions options;
  options.slot_count = 4;
  options.max_consumers = 1;
  auto producer = MakeRing(options);
  auto old = Attach();
  const uint32_t id = old->id();
  ASSERT_OK(producer->DetachConsumer(id));
  auto infos = producer->ConsumersGuess();
  EXPECT_FALSE(infos[id].active);
  EXPECT_TRUE(infos[id].detached);
  // Our own process is alive: the entry stays reserved.
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "registrations are taken", RingConsumer::Open(name_));
  // Detached consumers do not hold the producer back.
  for (uint64_t i = 0; i < 8; ++i) ASSERT_OK(producer->Publish(Bytes(MakePayload(i))));
  RingMessage msg;
  ASSERT_RAISES_WITH_MESSAGE(kCancelled, "detached", old->TryReceive(&msg));
  infos = producer->ConsumersGuess();
  EXPECT_FALSE(infos[id].detached);
  auto newcomer = Attach();
  ASSERT_NE(newcomer, nullptr);
  EXPECT_EQ(newcomer->id(), id);
  old.reset();  // must not touch the newcomer's entry
  infos = producer->ConsumersGuess();
  EXPECT_TRUE(infos[id].active);
  ASSERT_OK(producer->Publish(Bytes(MakePayload(8))));
  ASSERT_OK(newcomer->Receive(&msg, 1s));
  EXPECT_EQ(VerifyPayload(msg.payload()), 8u);

  // The destructor of a force-detached consumer frees its entry too.
  ASSERT_OK(producer->DetachConsumer(id));
  ASSERT_RAISES(kCapacityError, RingConsumer::Open(name_));
  newcomer.reset();
  EXPECT_NE(Attach(), nullptr);
}

TEST_F(RingTest, RegistrationsOfDeadConsumersAreFreed) {
  RingOptions options;
  options.slot_count = 4;
  options.max_consumers = 1;
  auto producer = MakeRing(options);
  // A consumer process that dies without detaching; the producer detaches
  // it after it is gone: freed at once.
  auto run_child = [&](int ready_fd, int go_fd) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      auto c = RingConsumer::Open(name_);
      char byte = c.ok() ? 'y' : 'n';
      (void)!::write(ready_fd, &byte, 1);
      (void)!::read(go_fd, &byte, 1);
      ::_exit(0);  // no destructor: the registration stays behind
    }
    return pid;
  };
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  pid_t pid = run_child(ready[1], go[0]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ASSERT_EQ(byte, 'y');
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);
  ASSERT_OK(producer->DetachConsumer(0));
  EXPECT_FALSE(producer->ConsumersGuess()[0].detached);
  {
    auto c = Attach();
    EXPECT_NE(c, nullptr);
  }

  // Force-detached while alive, then dies without noticing: the next Open
  // that finds no free entry frees it.
  pid = run_child(ready[1], go[0]);
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ASSERT_EQ(byte, 'y');
  ASSERT_OK(producer->DetachConsumer(0));
  EXPECT_TRUE(producer->ConsumersGuess()[0].detached);
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);
  EXPECT_TRUE(producer->ConsumersGuess()[0].detached);
  auto c = Attach();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->id(), 0u);
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
}

TEST_F(RingTest, DropPolicyCountsExactlyWhatASlowConsumerLost) {
  RingOptions options;
  options.slot_count = 8;
  options.policy = SlowConsumerPolicy::kDropOldest;
  auto producer = MakeRing(options);
  auto slow = Attach();
  for (uint64_t i = 0; i < 30; ++i) ASSERT_OK(producer->Publish(Bytes(MakePayload(i))));
  RingMessage msg;
  ASSERT_OK(slow->Receive(&msg, 1s));
  // Messages 0..21 were overwritten; 22..29 are in the ring.
  EXPECT_EQ(msg.lost_before(), 22u);
  EXPECT_EQ(msg.sequence(), 22u);
  EXPECT_EQ(VerifyPayload(msg.payload()), 22u);
  for (uint64_t i = 23; i < 30; ++i) {
    ASSERT_OK(slow->Receive(&msg, 1s));
    EXPECT_EQ(msg.sequence(), i);
    EXPECT_EQ(msg.lost_before(), 0u);
  }
  EXPECT_EQ(slow->lost_count(), 22u);
  EXPECT_EQ(producer->ConsumersGuess()[slow->id()].lost, 22u);
}

TEST_F(RingTest, RegistrationsAreLimited) {
  RingOptions options;
  options.max_consumers = 2;
  auto producer = MakeRing(options);
  auto a = Attach();
  auto b = Attach();
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "registrations", RingConsumer::Open(name_));
  a.reset();  // detaches
  ASSERT_OK(RingConsumer::Open(name_));
}

TEST_F(RingTest, BodiesTravelWithMessagesAndAreReleasedWhenConsumed) {
  const std::string body_name = NewName("bodies");
  BodyAllocatorOptions bo;
  bo.full_policy = FullPolicy::kError;
  ASSERT_OK_AND_ASSIGN(auto bodies, BodyAllocator::Create(body_name, 16 * 1024, bo));
  ASSERT_OK_AND_ASSIGN(auto reader, BodyReader::Open(body_name));
  RingOptions options;
  options.slot_count = 64;
  auto producer = MakeRing(options, bodies.get());
  ConsumerOptions co;
  co.bodies = reader.get();
  auto c = Attach(co);
  RingMessage msg;
  // Many more bodies than fit at once: space must come back as the consumer
  // moves on (through the reclaim callback the ring installed).
  for (uint64_t i = 0; i < 500; ++i) {
    ASSERT_OK_AND_ASSIGN(auto block, bodies->Allocate(1000));
    testing::FillPattern(i, block.data());
    ASSERT_OK(producer->Publish(Bytes(MakePayload(i)), block));
    EXPECT_FALSE(block.valid());
    ASSERT_OK(c->Receive(&msg, 1s));
    ASSERT_TRUE(msg.body().valid());
    EXPECT_TRUE(testing::CheckPattern(i, msg.body().data()));
  }
  BlockRef kept = msg.TakeBody();
  c.reset();
  producer->ReleaseConsumedBodies();
  bodies->Reclaim();
  EXPECT_EQ(bodies->stats().in_use_blocks, 1u);  // only `kept`
  kept.Release();
  bodies->Reclaim();
  EXPECT_EQ(bodies->stats().in_use_blocks, 0u);
}

TEST_F(RingTest, CorruptHeaderIsRefusedAtOpen) {
  auto producer = MakeRing({});
  ASSERT_OK_AND_ASSIGN(auto seg, Segment::Open(name_, SegmentKind::kRing));
  // slot_count lives at byte 16 of the ring header.
  const uint32_t garbage = 12345;
  std::memcpy(seg->payload() + 16, &garbage, 4);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "ring header is corrupt", RingConsumer::Open(name_));
  const uint32_t huge = 1u << 23;  // a valid count that does not fit the segment
  std::memcpy(seg->payload() + 16, &huge, 4);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "does not match", RingConsumer::Open(name_));
}

TEST_F(RingTest, CorruptSlotIsReportedAndSkipped) {
  RingOptions options;
  options.slot_count = 4;
  options.inline_capacity = 64;
  ASSERT_OK_AND_ASSIGN(uint64_t payload_size, RingProducer::PayloadSizeFor(options));
  auto producer = MakeRing(options);
  auto c = Attach();
  ASSERT_OK(producer->Publish(Bytes(MakePayload(0, 8))));
  ASSERT_OK(producer->Publish(Bytes(MakePayload(1, 8))));
  ASSERT_OK_AND_ASSIGN(auto seg, Segment::Open(name_, SegmentKind::kRing));
  // Slot 0's payload_size (offset 8 of the slot header) claims a huge payload.
  const uint64_t slots_offset = payload_size - 4 * (64 + 64);
  const uint32_t garbage = 1u << 30;
  std::memcpy(seg->payload() + slots_offset + 8, &garbage, 4);
  RingMessage msg;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "records a payload", c->Receive(&msg, 1s));
  ASSERT_OK(c->Receive(&msg, 1s));
  EXPECT_EQ(msg.sequence(), 1u);
}

TEST_F(RingTest, FromOldestStartsWithTheMessagesStillInTheRing) {
  RingOptions options;
  options.slot_count = 8;
  options.inline_capacity = 64;
  auto producer = MakeRing(options);
  // 3 messages before anyone listens: a from_oldest consumer gets them all.
  for (uint64_t i = 0; i < 3; ++i) ASSERT_OK(producer->Publish(Bytes(MakePayload(i, 16))));
  ConsumerOptions oldest;
  oldest.from_oldest = true;
  auto early = Attach(oldest);
  auto plain = Attach();
  EXPECT_EQ(early->next_sequence(), 0u);
  EXPECT_EQ(plain->next_sequence(), 3u);
  ASSERT_OK(producer->Publish(Bytes(MakePayload(3, 16))));
  RingMessage msg;
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_OK(early->Receive(&msg, 1s));
    EXPECT_EQ(msg.sequence(), i);
    EXPECT_EQ(msg.lost_before(), 0u);
    EXPECT_EQ(VerifyPayload(msg.payload()), i);
  }
  ASSERT_OK(plain->Receive(&msg, 1s));
  EXPECT_EQ(msg.sequence(), 3u);
  // After wrapping (20 published, nobody else holding the ring back), the
  // oldest still held is 20 - 8.
  early.reset();
  plain.reset();
  for (uint64_t i = 4; i < 20; ++i) ASSERT_OK(producer->Publish(Bytes(MakePayload(i, 16))));
  auto late = Attach(oldest);
  EXPECT_EQ(late->next_sequence(), 12u);
  for (uint64_t i = 12; i < 20; ++i) {
    ASSERT_OK(late->Receive(&msg, 1s));
    EXPECT_EQ(msg.sequence(), i);
    EXPECT_EQ(VerifyPayload(msg.payload()), i);
  }
}

TEST_F(RingTest, FromOldestCountsReleasedBodiesAsLost) {
  const std::string bodies_name = NewName("bodies");
  ASSERT_OK_AND_ASSIGN(auto bodies, BodyAllocator::Create(bodies_name, 64 * 1024));
  ASSERT_OK_AND_ASSIGN(auto reader, BodyReader::Open(bodies_name));
  RingOptions options;
  options.slot_count = 8;
  options.inline_capacity = 64;
  auto producer = MakeRing(options, bodies.get());
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(auto block, bodies->Allocate(100));
    std::memset(block.data().data(), static_cast<int>(i), 100);
    ASSERT_OK(producer->Publish(Bytes(MakePayload(i, 16)), block));
  }
  // Nobody listened: the producer may drop its references to all four.
  producer->ReleaseConsumedBodies();
  ASSERT_OK_AND_ASSIGN(auto block, bodies->Allocate(100));
  std::memset(block.data().data(), 4, 100);
  ASSERT_OK(producer->Publish(Bytes(MakePayload(4, 16)), block));
  ConsumerOptions oldest;
  oldest.from_oldest = true;
  oldest.bodies = reader.get();
  auto c = Attach(oldest);
  EXPECT_EQ(c->next_sequence(), 0u);
  RingMessage msg;
  // Messages 0-3 lost their bodies (not an error): the first delivered is 4.
  ASSERT_OK(c->Receive(&msg, 1s));
  EXPECT_EQ(msg.sequence(), 4u);
  EXPECT_EQ(msg.lost_before(), 4u);
  ASSERT_TRUE(msg.body().valid());
  EXPECT_EQ(msg.body().data()[99], std::byte{4});
}

TEST_F(RingTest, SidebandIsReadAsOneConsistentSet) {
  auto producer = MakeRing({});
  auto c = Attach();
  ASSERT_OK_AND_ASSIGN(auto words, c->ReadSideband());
  EXPECT_EQ(words, (std::array<uint64_t, kSidebandWords>{}));
  const uint64_t two[] = {7, 9};
  ASSERT_OK(producer->SetSideband(two));
  ASSERT_OK_AND_ASSIGN(words, c->ReadSideband());
  EXPECT_EQ(words, (std::array<uint64_t, kSidebandWords>{7, 9, 0, 0}));
  const uint64_t too_many[kSidebandWords + 1] = {};
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "sideband holds", producer->SetSideband(too_many));
  // Four equal words before the reader starts: it may read this first.
  const uint64_t zeros[kSidebandWords] = {};
  ASSERT_OK(producer->SetSideband(zeros));

  // A reader in another process, while the producer rewrites the words as
  // fast as it can, never sees a mix of two writes: every set it reads has
  // four equal words, and they never go backwards.
  std::atomic<bool>* stop = static_cast<std::atomic<bool>*>(
      ::mmap(nullptr, sizeof(std::atomic<bool>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
             -1, 0));
  ASSERT_NE(stop, MAP_FAILED);
  new (stop) std::atomic<bool>(false);
  const std::string name = name_;
  const pid_t reader = testing::ForkChild([&]() -> int {
    auto consumer = RingConsumer::Open(name);
    CHILD_CHECK(consumer.ok(), 2, "%s", consumer.status().ToString().c_str());
    uint64_t last = 0;
    uint64_t reads = 0;
    while (!stop->load() || reads < 1000) {
      auto got = (*consumer)->ReadSideband();
      CHILD_CHECK(got.ok(), 3, "%s", got.status().ToString().c_str());
      const auto& w = *got;
      CHILD_CHECK(w[0] == w[1] && w[1] == w[2] && w[2] == w[3], 4, "torn read %llu %llu %llu %llu",
                  static_cast<unsigned long long>(w[0]), static_cast<unsigned long long>(w[1]),
                  static_cast<unsigned long long>(w[2]), static_cast<unsigned long long>(w[3]));
      CHILD_CHECK(w[0] >= last, 5, "went back from %llu to %llu",
                  static_cast<unsigned long long>(last), static_cast<unsigned long long>(w[0]));
      last = w[0];
      ++reads;
    }
    return 0;
  });
  for (uint64_t k = 1; k <= 2000000; ++k) {
    const uint64_t same[] = {k, k, k, k};
    ASSERT_OK(producer->SetSideband(same));
  }
  stop->store(true);
  EXPECT_EQ(testing::WaitChild(reader), 0);
  ::munmap(stop, sizeof(std::atomic<bool>));
}

TEST_F(RingTest, SidebandStuckMidWriteTimesOut) {
  auto producer = MakeRing({});
  auto c = Attach();
  ASSERT_OK_AND_ASSIGN(auto seg, Segment::Open(name_, SegmentKind::kRing));
  // sideband_version is the first word of header line 4 (byte 256): a
  // producer that died mid-write leaves it odd.
  const uint64_t odd = 3;
  std::memcpy(seg->payload() + 256, &odd, 8);
  ASSERT_RAISES_WITH_MESSAGE(kTimedOut, "mid-write", c->ReadSideband());
}

}  // namespace
}  // namespace alkaid::shm
