// Channel across real processes (fork): the stream, read-only mappings that
// contain a faulting consumer, and exact reclaim of what a killed consumer
// held.

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/shm/channel.h"
#include "alkaid/shm/segment.h"
#include "channel_layout_internal.h"
#include "shm_test_util.h"
#include "test_util.h"

namespace alkaid::shm {
namespace {

using namespace std::chrono_literals;
using testing::CheckPattern;
using testing::FillPattern;
using testing::ForkChild;
using testing::ShmTest;
using testing::WaitChild;

// A pipe: one process notifies, the other waits (bounded by the read end
// closing when the writer dies).
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

Status PublishPattern(ChannelProducer* producer, uint64_t seed, uint64_t length) {
  ALKAID_ASSIGN_OR_RAISE(ChannelLoan loan, producer->Loan(length));
  FillPattern(seed, loan.data());
  return producer->Publish({}, std::move(loan), seed);
}

ChannelOptions Options() {
  ChannelOptions o;
  o.slot_count = 64;
  o.arena_bytes = 1 << 20;
  o.max_consumers = 8;
  o.publish_timeout = 20s;
  o.space_timeout = 20s;
  o.liveness_interval = 0ms;
  return o;
}

// Reads `count` messages and checks order and contents; 0 on success.
int VerifyingConsumer(const std::string& name, uint64_t count, WaitMode mode, Signal* ready) {
  ChannelConsumerOptions co;
  co.wait_mode = mode;
  auto consumer = ChannelConsumer::Open(name, co);
  CHILD_CHECK(consumer.ok(), 10, "%s", consumer.status().ToString().c_str());
  ready->Notify();
  ChannelMessage message;
  for (uint64_t i = 0; i < count; ++i) {
    const Status st = (*consumer)->Receive(&message, 20s);
    CHILD_CHECK(st.ok(), 11, "at %llu: %s", static_cast<unsigned long long>(i),
                st.ToString().c_str());
    CHILD_CHECK(message.sequence() == i && message.user() == i, 12, "got %llu, expected %llu",
                static_cast<unsigned long long>(message.sequence()),
                static_cast<unsigned long long>(i));
    CHILD_CHECK(CheckPattern(i, message.body()), 13, "body of %llu damaged",
                static_cast<unsigned long long>(i));
  }
  const Status end = (*consumer)->Receive(&message, 20s);
  CHILD_CHECK(end.IsEndOfStream(), 14, "after the last: %s", end.ToString().c_str());
  return 0;
}

TEST_F(ShmTest, ChannelStreamsToConsumerProcessesInEveryWaitMode) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
  constexpr uint64_t kCount = 50000;
  Signal ready;
  std::vector<pid_t> children;
  for (WaitMode mode : {WaitMode::kBusyPoll, WaitMode::kBlock, WaitMode::kSpinThenBlock}) {
    children.push_back(ForkChild([&] { return VerifyingConsumer(name, kCount, mode, &ready); }));
  }
  for (std::size_t i = 0; i < children.size(); ++i) ASSERT_TRUE(ready.Wait());
  for (uint64_t i = 0; i < kCount; ++i) {
    ASSERT_OK(PublishPattern(producer.get(), i, 8 + (i * 37) % 3000));
  }
  producer->Close();
  for (pid_t pid : children) EXPECT_EQ(WaitChild(pid), 0);
  producer->Poll();
  const ChannelStats stats = producer->stats();
  EXPECT_EQ(stats.consumers_finished + stats.consumers_reclaimed, 3u);
  EXPECT_EQ(stats.bogus_returns, 0u);
}

// A consumer that writes into a body dies of SIGSEGV in its own process;
// the other consumer reads the same body intact, and the dead one's
// registration and segment are reclaimed.
TEST_F(ShmTest, ChannelConsumerWritingIntoABodyFaultsAlone) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
  Signal ready;
  const pid_t rogue = ForkChild([&] {
    auto consumer = ChannelConsumer::Open(name);
    CHILD_CHECK(consumer.ok(), 10, "%s", consumer.status().ToString().c_str());
    ready.Notify();
    ChannelMessage message;
    const Status st = (*consumer)->Receive(&message, 20s);
    CHILD_CHECK(st.ok(), 11, "%s", st.ToString().c_str());
    // The default action, not a sanitizer's report: the test checks how the
    // process died.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGSEGV, &dfl, nullptr);
    std::memset(const_cast<std::byte*>(message.body().data()), 0, message.body().size());
    return 12;  // not reached: the store faults
  });
  ASSERT_TRUE(ready.Wait());
  ASSERT_OK_AND_ASSIGN(auto honest, ChannelConsumer::Open(name));
  ASSERT_OK(PublishPattern(producer.get(), 7, 4096));
  EXPECT_EQ(WaitChild(rogue), 128 + SIGSEGV);
  ChannelMessage message;
  ASSERT_OK(honest->Receive(&message, 5s));
  EXPECT_TRUE(CheckPattern(7, message.body()));
  producer->Poll();
  EXPECT_EQ(producer->stats().consumers_reclaimed, 1u);
  // Both consumers removed their segments' names once accepted.
  EXPECT_TRUE(testing::SegmentsWithPrefix(name + ".c").empty());
}

// A child that opens channel `name` as a consumer (then `ready`), receives
// ten messages and holds their bodies (then `holding`), until it is killed.
pid_t ForkHolderOfTen(const std::string& name, Signal* ready, Signal* holding) {
  return ForkChild([&] {
    auto consumer = ChannelConsumer::Open(name);
    CHILD_CHECK(consumer.ok(), 10, "%s", consumer.status().ToString().c_str());
    ready->Notify();
    ChannelMessage message;
    std::vector<ChannelBlock> held;
    for (int i = 0; i < 10; ++i) {
      const Status st = (*consumer)->Receive(&message, 20s);
      CHILD_CHECK(st.ok(), 11, "%s", st.ToString().c_str());
      held.push_back(message.TakeBody());
    }
    holding->Notify();
    ::pause();
    return 0;
  });
}

// What a SIGKILLed consumer held is released exactly, while the producer
// goes on; its segment name is removed.
TEST_F(ShmTest, ChannelReclaimsExactlyWhatAKilledConsumerHeld) {
  const std::string name = NewName("ch");
  ChannelOptions o = Options();
  o.slot_count = 4;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  Signal ready, holding;
  const pid_t victim = ForkHolderOfTen(name, &ready, &holding);
  ASSERT_TRUE(ready.Wait());
  for (uint64_t i = 0; i < 10; ++i) ASSERT_OK(PublishPattern(producer.get(), i, 10000));
  ASSERT_TRUE(holding.Wait());
  ASSERT_EQ(producer->consumers().size(), 1u);
  EXPECT_EQ(producer->consumers()[0].held_blocks, 10u);
  ::kill(victim, SIGKILL);
  EXPECT_EQ(WaitChild(victim), 128 + SIGKILL);
  producer->Poll();
  EXPECT_EQ(producer->stats().consumers_reclaimed, 1u);
  EXPECT_TRUE(producer->consumers().empty());
  EXPECT_EQ(producer->stats().blocks_live, 4u);  // the slots' references only
  EXPECT_TRUE(testing::SegmentsWithPrefix(name + ".c").empty());
  // The space is usable again: the arena (1 MiB) takes 100 more.
  for (uint64_t i = 10; i < 110; ++i) ASSERT_OK(PublishPattern(producer.get(), i, 10000));
}

// Fixed blocks (ChannelOptions::fixed_block_bytes): a SIGKILLed consumer's
// holds are counts in its own segment, which the producer stops reading
// when it reclaims it: exactly what it held comes back, and every fixed
// block is lent again.
TEST_F(ShmTest, ChannelReclaimsTheFixedBlocksAKilledConsumerHeld) {
  const std::string name = NewName("ch");
  ChannelOptions o = Options();
  o.slot_count = 4;
  o.fixed_block_bytes = 10000;
  o.fixed_block_count = 16;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  uint64_t fixed_offset = 0;
  uint64_t fixed_bytes = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto rw, Segment::Open(name, SegmentKind::kChannel));
    const auto* h = reinterpret_cast<const internal::ChannelHeaderData*>(rw->data());
    fixed_offset = h->fixed_offset;
    fixed_bytes = uint64_t{h->fixed_count} * h->fixed_size;
  }
  Signal ready, holding;
  const pid_t victim = ForkHolderOfTen(name, &ready, &holding);
  ASSERT_TRUE(ready.Wait());
  for (uint64_t i = 0; i < 10; ++i) ASSERT_OK(PublishPattern(producer.get(), i, 10000));
  ASSERT_TRUE(holding.Wait());
  ASSERT_EQ(producer->consumers().size(), 1u);
  EXPECT_EQ(producer->consumers()[0].held_blocks, 10u);
  ::kill(victim, SIGKILL);
  EXPECT_EQ(WaitChild(victim), 128 + SIGKILL);
  producer->Poll();
  EXPECT_EQ(producer->stats().consumers_reclaimed, 1u);
  EXPECT_TRUE(producer->consumers().empty());
  EXPECT_TRUE(testing::SegmentsWithPrefix(name + ".c").empty());
  std::vector<ChannelLoan> loans;
  for (uint32_t i = 0; i < o.fixed_block_count; ++i) {
    ASSERT_OK_AND_ASSIGN(ChannelLoan loan, producer->Loan(10000));
    EXPECT_GE(loan.offset(), fixed_offset) << i;
    EXPECT_LT(loan.offset(), fixed_offset + fixed_bytes) << i;
    loans.push_back(std::move(loan));
  }
}

// Two consumers hold the same bodies; one is SIGKILLed and reclaimed: only
// its holder bits go. The survivor still holds every block (the producer
// says so), none of them is lent again while it does (the arena is filled
// with new loans, each written over), and its bodies keep their bytes;
// once it drops them, they come back.
TEST_F(ShmTest, ChannelReclaimOfADeadConsumerLeavesTheSurvivorsBlocksHeld) {
  const std::string name = NewName("ch");
  ChannelOptions o = Options();
  o.slot_count = 4;
  o.space_timeout = 200ms;  // a full arena fails the loan that finds it full
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ASSERT_OK_AND_ASSIGN(auto survivor, ChannelConsumer::Open(name));
  Signal ready, holding;
  const pid_t victim = ForkHolderOfTen(name, &ready, &holding);
  ASSERT_TRUE(ready.Wait());
  ChannelMessage message;
  std::vector<ChannelBlock> held;
  for (uint64_t i = 0; i < 10; ++i) {
    // Read as published: the channel has 4 slots and the producer waits for
    // both consumers.
    ASSERT_OK(PublishPattern(producer.get(), i, 10000));
    ASSERT_OK(survivor->Receive(&message, 20s));
    ASSERT_EQ(message.user(), i);
    held.push_back(message.TakeBody());
  }
  ASSERT_TRUE(holding.Wait());
  ASSERT_EQ(producer->consumers().size(), 2u);
  for (const auto& c : producer->consumers()) EXPECT_EQ(c.held_blocks, 10u);

  ::kill(victim, SIGKILL);
  EXPECT_EQ(WaitChild(victim), 128 + SIGKILL);
  producer->Poll();
  EXPECT_EQ(producer->stats().consumers_reclaimed, 1u);
  ASSERT_EQ(producer->consumers().size(), 1u);
  EXPECT_EQ(producer->consumers()[0].index, survivor->index());
  EXPECT_EQ(producer->consumers()[0].held_blocks, 10u);
  EXPECT_EQ(producer->stats().blocks_live, 10u);  // the survivor's (the slots' 4 among them)

  // The rest of the arena, loaned and written over.
  std::vector<ChannelLoan> loans;
  while (true) {
    auto loan = producer->Loan(10000);
    if (!loan.ok()) break;
    FillPattern(999, loan->data());
    loans.push_back(std::move(*loan));
  }
  EXPECT_GT(loans.size(), 10u);
  for (uint64_t i = 0; i < held.size(); ++i) {
    EXPECT_TRUE(CheckPattern(i, held[i].data())) << "the survivor's body " << i << " was reused";
  }
  loans.clear();
  held.clear();
  message.Reset();
  producer->Poll();
  EXPECT_EQ(producer->consumers()[0].held_blocks, 0u);
  // The slots' references went when the full arena made the loans look for
  // room (every consumer had read those messages): nothing is live.
  EXPECT_EQ(producer->stats().blocks_live, 0u);
}

// A consumer that Close()s while holding bodies is no longer counted, but
// its blocks stay its own until it returns them; SIGKILLed then, it never
// will: the producer's pid checks release exactly what it held, as for a
// consumer killed without closing.
TEST_F(ShmTest, ChannelReclaimsWhatAClosedThenKilledConsumerHeld) {
  const std::string name = NewName("ch");
  ChannelOptions o = Options();
  o.slot_count = 4;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  Signal ready, holding;
  const pid_t victim = ForkChild([&] {
    auto consumer = ChannelConsumer::Open(name);
    CHILD_CHECK(consumer.ok(), 10, "%s", consumer.status().ToString().c_str());
    ready.Notify();
    ChannelMessage message;
    std::vector<ChannelBlock> held;
    for (int i = 0; i < 10; ++i) {
      const Status st = (*consumer)->Receive(&message, 20s);
      CHILD_CHECK(st.ok(), 11, "%s", st.ToString().c_str());
      held.push_back(message.TakeBody());
    }
    (*consumer)->Close();
    holding.Notify();
    ::pause();
    return 0;
  });
  ASSERT_TRUE(ready.Wait());
  for (uint64_t i = 0; i < 10; ++i) ASSERT_OK(PublishPattern(producer.get(), i, 10000));
  ASSERT_TRUE(holding.Wait());
  producer->Poll();
  ASSERT_EQ(producer->consumers().size(), 1u);
  EXPECT_TRUE(producer->consumers()[0].closed);
  EXPECT_EQ(producer->consumers()[0].held_blocks, 10u);
  EXPECT_EQ(producer->stats().blocks_live, 10u);
  ::kill(victim, SIGKILL);
  EXPECT_EQ(WaitChild(victim), 128 + SIGKILL);
  producer->Poll();
  EXPECT_EQ(producer->stats().consumers_reclaimed, 1u);
  EXPECT_EQ(producer->stats().consumers_finished, 0u);
  EXPECT_TRUE(producer->consumers().empty());
  EXPECT_EQ(producer->stats().blocks_live, 4u);  // the slots' references only
  EXPECT_TRUE(testing::SegmentsWithPrefix(name + ".c").empty());
}

// A producer that dies: its consumer reads what was committed, then gets a
// clear error; RemoveChannel clears the names it left.
TEST_F(ShmTest, ChannelConsumerOutlivesADeadProducer) {
  const std::string name = NewName("ch");
  Signal created, ready;
  const pid_t producer = ForkChild([&] {
    auto p = ChannelProducer::Create(name, Options());
    CHILD_CHECK(p.ok(), 10, "%s", p.status().ToString().c_str());
    created.Notify();
    CHILD_CHECK(ready.Wait(), 11, "no consumer");
    for (uint64_t i = 0; i < 3; ++i) {
      const Status st = PublishPattern(p->get(), i, 100);
      CHILD_CHECK(st.ok(), 12, "%s", st.ToString().c_str());
    }
    ::_exit(0);  // dies without closing or removing anything
  });
  ASSERT_TRUE(created.Wait());
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ready.Notify();
  ChannelMessage message;
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_OK(consumer->Receive(&message, 10s));
    EXPECT_TRUE(CheckPattern(i, message.body()));
  }
  EXPECT_EQ(WaitChild(producer), 0);
  ASSERT_RAISES_WITH_MESSAGE(kIOError, "is gone", consumer->Receive(&message, 10s));
  message.Reset();
  consumer.reset();
  ASSERT_OK(RemoveChannel(name));
  EXPECT_TRUE(testing::SegmentsWithPrefix(name).empty());
}

// A consumer SIGKILLed while its doorbell is armed: the producer, which
// kept the bell's pipe open from the last time it sounded it, sounds it
// again at its next publish. The pipe has lost its reader with the
// consumer, and a write into such a pipe raises SIGPIPE, which killed the
// producer's process; the producer holds the pipe open for reading too, so
// the write finds a reader and the producer goes on.
TEST_F(ShmTest, ChannelProducerSurvivesTheArmedDoorbellOfAKilledConsumer) {
  const std::string name = NewName("ch");
  ChannelOptions o = Options();
  o.liveness_interval = 3600s;  // the dead consumer stays counted, armed
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  Signal ready, armed;
  const pid_t victim = ForkChild([&] {
    auto consumer = ChannelConsumer::Open(name);
    CHILD_CHECK(consumer.ok(), 10, "%s", consumer.status().ToString().c_str());
    auto fd = (*consumer)->DoorbellFd();
    CHILD_CHECK(fd.ok(), 11, "%s", fd.status().ToString().c_str());
    ready.Notify();
    ChannelMessage message;
    for (;;) {  // sleeps on the doorbell until message 0 comes
      auto there = (*consumer)->ArmDoorbell();
      CHILD_CHECK(there.ok(), 12, "%s", there.status().ToString().c_str());
      if (!*there) {
        pollfd pfd{*fd, POLLIN, 0};
        CHILD_CHECK(::poll(&pfd, 1, 20000) == 1, 13, "the doorbell was not sounded");
      }
      auto got = (*consumer)->TryReceive(&message);
      CHILD_CHECK(got.ok(), 14, "%s", got.status().ToString().c_str());
      if (*got) break;
    }
    auto there = (*consumer)->ArmDoorbell();  // asleep again, for ever
    CHILD_CHECK(there.ok() && !*there, 15, "armed with nothing there");
    armed.Notify();
    ::pause();
    return 0;
  });
  ASSERT_TRUE(ready.Wait());
  // Accepts the consumer and sounds its bell (the producer keeps the pipe).
  ASSERT_OK(PublishPattern(producer.get(), 0, 100));
  ASSERT_TRUE(armed.Wait());
  ::kill(victim, SIGKILL);
  EXPECT_EQ(WaitChild(victim), 128 + SIGKILL);
  for (uint64_t i = 1; i < 4; ++i) ASSERT_OK(PublishPattern(producer.get(), i, 100));
  // Not reaped yet (liveness_interval): each of those publishes sounded it.
  ASSERT_EQ(producer->consumers().size(), 1u);
}

// A producer killed in the middle of a publish: message 2's slot holds an
// odd sequence and half-written fields. The consumer takes the two
// committed messages intact, never the half-written one, and learns that
// the producer is gone.
TEST_F(ShmTest, ChannelProducerKilledMidWriteLeavesNoHalfMessage) {
  const std::string name = NewName("ch");
  Signal created, ready;
  const pid_t producer = ForkChild([&] {
    auto p = ChannelProducer::Create(name, Options());
    CHILD_CHECK(p.ok(), 10, "%s", p.status().ToString().c_str());
    created.Notify();
    CHILD_CHECK(ready.Wait(), 11, "no consumer");
    for (uint64_t i = 0; i < 2; ++i) {
      const Status st = PublishPattern(p->get(), i, 100);
      CHILD_CHECK(st.ok(), 12, "%s", st.ToString().c_str());
    }
    // What Publish leaves between its first and last store, done by hand
    // through a mapping of our own (the producer's is private).
    auto seg = Segment::Open(name, SegmentKind::kChannel);
    CHILD_CHECK(seg.ok(), 13, "%s", seg.status().ToString().c_str());
    auto* header = reinterpret_cast<internal::ChannelHeaderData*>((*seg)->data());
    auto* slot = reinterpret_cast<internal::ChannelSlotData*>(
        (*seg)->data() + header->slots_offset + 2 * header->slot_size);
    slot->sequence.store(2 * 2 + 1);
    slot->body_offset.store(uint64_t{1} << 40);
    slot->body_length.store(uint64_t{1} << 40);
    slot->block.store(~uint64_t{0});
    ::raise(SIGKILL);
    return 99;  // not reached
  });
  ASSERT_TRUE(created.Wait());
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ready.Notify();
  ChannelMessage message;
  for (uint64_t i = 0; i < 2; ++i) {
    ASSERT_OK(consumer->Receive(&message, 10s));
    EXPECT_EQ(message.sequence(), i);
    EXPECT_TRUE(CheckPattern(i, message.body()));
  }
  EXPECT_EQ(WaitChild(producer), 128 + SIGKILL);
  ASSERT_OK_AND_ASSIGN(bool got, consumer->TryReceive(&message));
  EXPECT_FALSE(got);                         // the half-written slot is not a message
  EXPECT_EQ(consumer->next_sequence(), 2u);  // nor a lost one: still the next to read
  EXPECT_EQ(consumer->lost_count(), 0u);
  ASSERT_RAISES_WITH_MESSAGE(kIOError, "is gone", consumer->Receive(&message, 10s));
  message.Reset();
  consumer.reset();
  ASSERT_OK(RemoveChannel(name));
  EXPECT_TRUE(testing::SegmentsWithPrefix(name).empty());
}

}  // namespace
}  // namespace alkaid::shm
