// Channel (libshm/channel.h): one producer, consumers in this process
// (threads); the multi-process behaviour is in channel_multiprocess_test.cc.

#include <poll.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "alkaid/shm/channel.h"
#include "channel_layout_internal.h"
#include "shm_test_util.h"
#include "test_util.h"

namespace alkaid::shm {
namespace {

using namespace std::chrono_literals;
using testing::CheckPattern;
using testing::FillPattern;
using testing::ShmTest;

class ChannelTest : public ShmTest {
 protected:
  ChannelOptions Small() {
    ChannelOptions o;
    o.slot_count = 8;
    o.inline_capacity = 64;
    o.arena_bytes = 64 << 10;
    o.max_consumers = 4;
    o.publish_timeout = 200ms;
    o.space_timeout = 200ms;
    return o;
  }
};

// Lends a block of `length` bytes filled with the pattern of `seed` and
// publishes it with `seed` as the user word.
Status PublishPattern(ChannelProducer* producer, uint64_t seed, uint64_t length) {
  ALKAID_ASSIGN_OR_RAISE(ChannelLoan loan, producer->Loan(length));
  FillPattern(seed, loan.data());
  return producer->Publish({}, std::move(loan), seed);
}

TEST_F(ChannelTest, DeliversBodiesInlineBytesUserWordAndShape) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Small()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  const std::vector<std::byte> shape_bytes(100, std::byte{7});
  ASSERT_OK_AND_ASSIGN(uint32_t shape, producer->AddShape(shape_bytes));
  EXPECT_EQ(shape, 1u);

  ASSERT_OK_AND_ASSIGN(ChannelLoan loan, producer->Loan(1000));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(loan.data().data()) % 64, 0u);
  FillPattern(42, loan.data());
  const std::byte inline_bytes[5] = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4},
                                     std::byte{5}};
  ASSERT_OK(producer->Publish(inline_bytes, std::move(loan), 42, shape));
  EXPECT_FALSE(loan.valid());            // the publish took it
  ASSERT_OK(producer->Publish({}, 43));  // no body

  ChannelMessage message;
  ASSERT_OK(consumer->Receive(&message, 1s));
  EXPECT_EQ(message.sequence(), 0u);
  EXPECT_EQ(message.user(), 42u);
  EXPECT_EQ(message.shape(), shape);
  ASSERT_EQ(message.payload().size(), 5u);
  EXPECT_EQ(std::memcmp(message.payload().data(), inline_bytes, 5), 0);
  ASSERT_TRUE(message.has_body());
  ASSERT_EQ(message.body().size(), 1000u);
  EXPECT_TRUE(CheckPattern(42, message.body()));
  std::vector<std::byte> got;
  ASSERT_OK(consumer->ReadShape(shape, &got));
  EXPECT_EQ(got, shape_bytes);
  ASSERT_RAISES(kInvalid, consumer->ReadShape(2, &got));

  ASSERT_OK(consumer->Receive(&message, 1s));
  EXPECT_EQ(message.sequence(), 1u);
  EXPECT_EQ(message.user(), 43u);
  EXPECT_FALSE(message.has_body());

  producer->Close();
  ASSERT_RAISES(kEndOfStream, consumer->Receive(&message, 1s));
}

// Layout 4: the producer's per-publish line (line 2, bytes 128-191 of the
// header) holds write_sequence alone, and the end of the stream is on line
// 5 (bytes 328-331): a consumer that finds nothing (one that keeps up, once
// per message) looks there, not at the line the producer's next publish
// stores into. Read and written by raw offsets, as another build would.
TEST_F(ChannelTest, TheEndIsOnLineFiveAndThePublishLineHoldsWriteSequenceAlone) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Small()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ChannelMessage message;
  bool got = false;
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_OK(PublishPattern(producer.get(), i, 100));
    ASSERT_OK(consumer->TryReceive(&message, &got));
    ASSERT_TRUE(got);
  }
  producer->Close();
  ASSERT_OK_AND_ASSIGN(auto rw, Segment::Open(name, SegmentKind::kChannel));
  std::byte* header = rw->data();
  EXPECT_GE(reinterpret_cast<const internal::ChannelHeaderData*>(header)->layout_version, 4u);
  uint64_t written = 0;
  std::memcpy(&written, header + 128, sizeof written);
  EXPECT_EQ(written, 3u);
  for (std::size_t b = 136; b < 192; ++b) {
    EXPECT_EQ(header[b], std::byte{0}) << "byte " << b << " of the publish line";
  }
  auto* closed = reinterpret_cast<std::atomic<uint32_t>*>(header + 328);
  EXPECT_EQ(closed->load(), 1u);
  // The consumer's end is the word on line 5: cleared, the stream reads
  // as open with nothing to receive; set again, it ends.
  closed->store(0);
  got = true;
  ASSERT_OK(consumer->TryReceive(&message, &got));
  EXPECT_FALSE(got);
  closed->store(1);
  ASSERT_RAISES(kEndOfStream, consumer->TryReceive(&message, &got));
  EXPECT_FALSE(got);
}

// The Result-free TryReceive says what the Result one does: nothing yet
// (false, OK), a message (true), a slot naming bytes outside the arena
// (Invalid, false), and the end (EndOfStream, false).
TEST_F(ChannelTest, TheResultFreeTryReceiveSaysWhatTheResultOneDoes) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Small()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ChannelMessage message;
  bool got = true;
  ASSERT_OK(consumer->TryReceive(&message, &got));
  EXPECT_FALSE(got);
  ASSERT_OK(PublishPattern(producer.get(), 9, 100));
  ASSERT_OK(consumer->TryReceive(&message, &got));
  ASSERT_TRUE(got);
  EXPECT_EQ(message.user(), 9u);
  EXPECT_TRUE(CheckPattern(9, message.body()));
  ASSERT_OK(consumer->TryReceive(&message, &got));
  EXPECT_FALSE(got);
  // A hostile slot: its body named past the arena.
  ASSERT_OK(PublishPattern(producer.get(), 10, 100));
  {
    ASSERT_OK_AND_ASSIGN(auto rw, Segment::Open(name, SegmentKind::kChannel));
    const auto* h = reinterpret_cast<const internal::ChannelHeaderData*>(rw->data());
    auto* slot = reinterpret_cast<internal::ChannelSlotData*>(rw->data() + h->slots_offset +
                                                              1 * uint64_t{h->slot_size});
    slot->body_length.store(uint64_t{1} << 40, std::memory_order_relaxed);
  }
  got = true;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "outside the arena", consumer->TryReceive(&message, &got));
  EXPECT_FALSE(got);
  producer->Close();
  got = true;
  ASSERT_RAISES(kEndOfStream, consumer->TryReceive(&message, &got));
  EXPECT_FALSE(got);
}

// accept_on_publish false: a consumer that registered is accepted only by
// AcceptConsumers or Poll, and starts at the message published after that.
TEST_F(ChannelTest, DeferredAcceptanceStartsAtTheNextMessageAfterAccepting) {
  const std::string name = NewName("ch");
  ChannelOptions o = Small();
  o.accept_on_publish = false;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  EXPECT_EQ(producer->AcceptConsumers(), 0u);
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ASSERT_OK(producer->Publish({}, 1));  // not for the consumer: not accepted yet
  ASSERT_OK(producer->Publish({}, 2));
  auto listed = producer->consumers();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_FALSE(listed[0].accepted);
  EXPECT_EQ(listed[0].pid, static_cast<uint32_t>(::getpid()));
  ChannelMessage message;
  ASSERT_OK_AND_ASSIGN(bool got, consumer->TryReceive(&message));
  EXPECT_FALSE(got);
  EXPECT_EQ(producer->AcceptConsumers(), 1u);
  EXPECT_EQ(producer->AcceptConsumers(), 0u);
  EXPECT_TRUE(producer->consumers()[0].accepted);
  ASSERT_OK(producer->Publish({}, 3));
  ASSERT_OK(consumer->Receive(&message, 1s));
  EXPECT_EQ(message.user(), 3u);
  EXPECT_EQ(message.sequence(), 2u);
  // A second consumer, accepted by Poll.
  ASSERT_OK_AND_ASSIGN(auto second, ChannelConsumer::Open(name));
  ASSERT_OK(producer->Publish({}, 4));
  producer->Poll();
  EXPECT_EQ(producer->stats().consumers_accepted, 2u);
  ASSERT_OK(producer->Publish({}, 5));
  ASSERT_OK(second->Receive(&message, 1s));
  EXPECT_EQ(message.user(), 5u);
  ASSERT_OK(consumer->Receive(&message, 1s));
  EXPECT_EQ(message.user(), 4u);
}

TEST_F(ChannelTest, ConsumerMapsTheChannelReadOnly) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Small()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ASSERT_OK(PublishPattern(producer.get(), 1, 128));
  ChannelMessage message;
  ASSERT_OK(consumer->Receive(&message, 1s));
  // A store through the consumer's view of the body faults (in a child of
  // this test, so the test survives it).
  const std::byte* body = message.body().data();
  EXPECT_DEATH({ *const_cast<volatile std::byte*>(body) = std::byte{0}; }, "");
  EXPECT_TRUE(CheckPattern(1, message.body()));
}

TEST_F(ChannelTest, AConsumerReceivesWhatIsPublishedAfterOpen) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Small()));
  ASSERT_OK(PublishPattern(producer.get(), 100, 64));  // before: not for it
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ChannelMessage message;
  ASSERT_OK_AND_ASSIGN(bool got, consumer->TryReceive(&message));
  EXPECT_FALSE(got);
  ASSERT_OK(PublishPattern(producer.get(), 101, 64));
  ASSERT_OK(consumer->Receive(&message, 1s));
  EXPECT_EQ(message.user(), 101u);
  EXPECT_EQ(message.sequence(), 1u);
}

// The realtime clock as the slot's publish_ns is read (RealtimeNs's clock).
uint64_t RealtimeNow() {
  timespec ts{};
  (void)::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// ChannelOptions::stamp_publish_time: each message carries a publish time
// between the clock read before the publish and the one after the receive,
// through three laps of the slots; a channel that does not stamp shows 0
// (its slots' publish_ns are never written).
TEST_F(ChannelTest, StampedChannelsCarryThePublishTimeOthersZero) {
  for (const bool stamp : {true, false}) {
    SCOPED_TRACE(stamp ? "stamped" : "not stamped");
    const std::string name = NewName("ch");
    ChannelOptions o = Small();
    o.stamp_publish_time = stamp;
    ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
    ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
    ChannelMessage message;
    uint64_t previous = 0;
    // Three laps of the 8 slots: every slot rewritten, stamps fresh each time.
    for (uint64_t i = 0; i < 24; ++i) {
      const uint64_t before = RealtimeNow();
      ASSERT_OK(PublishPattern(producer.get(), i, 100));
      ASSERT_OK(consumer->Receive(&message, 1s));
      const uint64_t after = RealtimeNow();
      ASSERT_EQ(message.user(), i);
      if (stamp) {
        EXPECT_GE(message.publish_ns(), before);
        EXPECT_LE(message.publish_ns(), after);
        EXPECT_GE(message.publish_ns(), previous);  // unless the clock stepped back
        previous = message.publish_ns();
      } else {
        EXPECT_EQ(message.publish_ns(), 0u);
      }
    }
  }
}

// The bytes counted for top's MB/s: the bodies published, and per consumer
// the bodies before its cursor (from the channel's first message: a count
// to take rates of).
TEST_F(ChannelTest, CountsPublishedBytesAndEachConsumersReadBytes) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Small()));
  ASSERT_OK_AND_ASSIGN(auto fast, ChannelConsumer::Open(name));
  ASSERT_OK_AND_ASSIGN(auto slow, ChannelConsumer::Open(name));
  ASSERT_OK(producer->Publish({}, 7));  // no body: counts 0
  for (uint64_t i = 0; i < 5; ++i) ASSERT_OK(PublishPattern(producer.get(), i, 100 * (i + 1)));
  EXPECT_EQ(producer->stats().published_bytes, 100u + 200 + 300 + 400 + 500);
  ChannelMessage message;
  for (int i = 0; i < 6; ++i) ASSERT_OK(fast->Receive(&message, 1s));
  for (int i = 0; i < 3; ++i) ASSERT_OK(slow->Receive(&message, 1s));  // up to the 200
  message.Reset();
  std::vector<uint64_t> read;
  for (const auto& c : producer->consumers()) read.push_back(c.read_bytes);
  ASSERT_EQ(read.size(), 2u);
  std::sort(read.begin(), read.end());
  EXPECT_EQ(read[0], 100u + 200);
  EXPECT_EQ(read[1], 1500u);
}

// Each consumer's token (ChannelConsumerOptions::token) comes back with its
// figures, so that two consumers of one process are told apart; one that
// gave none reports 0. The token lies in line 0's former padding, at offset
// 32 of the consumer segment's data (docs/SHM_LAYOUT.md).
TEST_F(ChannelTest, EachConsumersTokenComesBackWithItsFigures) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Small()));
  ChannelConsumerOptions first_options;
  first_options.token = 0x1234567890abcdefULL;
  ChannelConsumerOptions second_options;
  second_options.token = 2;
  ASSERT_OK_AND_ASSIGN(auto first, ChannelConsumer::Open(name, first_options));
  ASSERT_OK_AND_ASSIGN(auto second, ChannelConsumer::Open(name, second_options));
  ASSERT_OK_AND_ASSIGN(auto none, ChannelConsumer::Open(name));
  for (uint64_t i = 0; i < 4; ++i) ASSERT_OK(PublishPattern(producer.get(), i, 64));
  ChannelMessage message;
  for (int i = 0; i < 4; ++i) ASSERT_OK(first->Receive(&message, 1s));
  ASSERT_OK(second->Receive(&message, 1s));
  message.Reset();
  std::map<uint32_t, ChannelConsumerInfo> by_index;
  for (const auto& c : producer->consumers()) by_index[c.index] = c;
  ASSERT_EQ(by_index.size(), 3u);
  EXPECT_EQ(by_index[first->index()].token, 0x1234567890abcdefULL);
  EXPECT_EQ(by_index[first->index()].read_bytes, 4u * 64);
  EXPECT_EQ(by_index[second->index()].token, 2u);
  EXPECT_EQ(by_index[second->index()].read_bytes, 64u);
  EXPECT_EQ(by_index[none->index()].token, 0u);
  EXPECT_EQ(by_index[none->index()].read_bytes, 0u);
  static_assert(offsetof(internal::ConsumerSegHeaderData, token) == 32);
}

// The cursor the producer sees (its flow control): a kBlockProducer
// consumer behind the producer stores it every 64th message (a sixteenth of
// 1024 slots), and as soon as it has caught up, and when it closes; with
// kDropOldest at every message (the cursor says who returns a lapped
// message's block).
TEST_F(ChannelTest, ABlockingConsumerBehindStoresItsCursorEverySixtyFourMessagesAndWhenCaughtUp) {
  for (const auto policy : {SlowConsumerPolicy::kBlockProducer, SlowConsumerPolicy::kDropOldest}) {
    SCOPED_TRACE(policy == SlowConsumerPolicy::kDropOldest ? "drop-oldest" : "block");
    const bool drop = policy == SlowConsumerPolicy::kDropOldest;
    const std::string name = NewName("ch");
    ChannelOptions options = Small();
    options.slot_count = 1024;
    options.policy = policy;
    ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, options));
    ASSERT_OK_AND_ASSIGN(auto reader, ChannelConsumer::Open(name));
    ASSERT_OK_AND_ASSIGN(auto closer, ChannelConsumer::Open(name));
    ASSERT_OK(producer->Publish({}, 0));  // accepts both
    for (uint64_t i = 1; i < 200; ++i) ASSERT_OK(producer->Publish({}, i));
    auto cursor_of = [&](const ChannelConsumer& c) -> uint64_t {
      for (const auto& info : producer->consumers()) {
        if (info.index == c.index()) return info.cursor;
      }
      ADD_FAILURE() << "consumer " << c.index() << " not listed";
      return 0;
    };
    ChannelMessage message;
    for (int i = 0; i < 10; ++i) ASSERT_OK(reader->Receive(&message, 1s));
    EXPECT_EQ(cursor_of(*reader), drop ? 10u : 0u);
    for (int i = 10; i < 64; ++i) ASSERT_OK(reader->Receive(&message, 1s));
    EXPECT_EQ(cursor_of(*reader), 64u);
    for (int i = 64; i < 200; ++i) ASSERT_OK(reader->Receive(&message, 1s));
    EXPECT_EQ(cursor_of(*reader), 200u);  // caught up: stored at once
    for (int i = 0; i < 10; ++i) ASSERT_OK(closer->Receive(&message, 1s));
    message.Reset();
    EXPECT_EQ(cursor_of(*closer), drop ? 10u : 0u);
    closer->Close();  // stores what it read: the rest is the producer's to release
    EXPECT_EQ(cursor_of(*closer), 10u);
  }
}

// A consumer that keeps up holds nothing, but the producer drains returns
// only when a loan finds no cached block: CollectReturns takes them back
// for a report (consumers()' held counts).
TEST_F(ChannelTest, CollectReturnsCountsAsHeldOnlyWhatConsumersHold) {
  const std::string name = NewName("ch");
  ChannelOptions options = Small();
  options.slot_count = 64;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, options));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ChannelMessage message;
  uint64_t most_held = 0;
  for (uint64_t i = 0; i < 300; ++i) {
    ASSERT_OK(PublishPattern(producer.get(), i, 64));
    ASSERT_OK(consumer->Receive(&message, 1s));
    message.Reset();  // returns the block at once
    ASSERT_EQ(producer->consumers().size(), 1u);
    most_held = std::max(most_held, producer->consumers()[0].held_blocks);
  }
  // Returns pile up between drains (what the report would have shown).
  EXPECT_GT(most_held, 1u);
  producer->CollectReturns();
  EXPECT_EQ(producer->consumers()[0].held_blocks, 0u);
}

TEST_F(ChannelTest, FromOldestStartsAtTheOldestBodyStillHeld) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Small()));
  for (uint64_t i = 0; i < 20; ++i) ASSERT_OK(PublishPattern(producer.get(), i, 256));
  ChannelConsumerOptions options;
  options.from_oldest = true;
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name, options));
  producer->Poll();  // an idle producer accepts it here
  ChannelMessage message;
  // The slots hold the last 8 (its slot count); every one is intact.
  for (uint64_t i = 12; i < 20; ++i) {
    ASSERT_OK(consumer->Receive(&message, 1s));
    EXPECT_EQ(message.sequence(), i);
    EXPECT_TRUE(CheckPattern(i, message.body())) << i;
  }
  ASSERT_OK_AND_ASSIGN(bool got, consumer->TryReceive(&message));
  EXPECT_FALSE(got);
  EXPECT_EQ(consumer->lost_count(), 0u);
}

TEST_F(ChannelTest, BlockPolicyTimesOutNamingTheSlowConsumerAndResumes) {
  const std::string name = NewName("ch");
  ChannelOptions o = Small();
  o.resume_slots = 1;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  for (uint64_t i = 0; i < 8; ++i) ASSERT_OK(PublishPattern(producer.get(), i, 64));
  ChannelMessage message;
  // Every slot is taken: the ninth waits for the consumer, which reads nothing.
  ASSERT_OK_AND_ASSIGN(ChannelLoan loan, producer->Loan(64));
  ASSERT_RAISES_WITH_MESSAGE(kTimedOut, "consumer 0 (pid " + std::to_string(::getpid()),
                             producer->Publish({}, std::move(loan), 8));
  EXPECT_TRUE(loan.valid());  // left with the caller
  ASSERT_OK(consumer->Receive(&message, 1s));
  EXPECT_EQ(message.user(), 0u);
  ASSERT_OK(producer->Publish({}, std::move(loan), 8));
  for (uint64_t i = 1; i <= 8; ++i) {
    ASSERT_OK(consumer->Receive(&message, 1s));
    EXPECT_EQ(message.user(), i);
  }
  EXPECT_EQ(consumer->lost_count(), 0u);
}

TEST_F(ChannelTest, DropOldestCountsEveryLostMessageAndReturnsEveryBlock) {
  const std::string name = NewName("ch");
  ChannelOptions o = Small();
  o.policy = SlowConsumerPolicy::kDropOldest;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ChannelMessage message;
  uint64_t received = 0;
  uint64_t lost = 0;
  uint64_t expected_next = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    ASSERT_OK(PublishPattern(producer.get(), i, 200 + i));
    if (i % 13 != 12) continue;  // read in bursts, far behind
    while (true) {
      ASSERT_OK_AND_ASSIGN(bool got, consumer->TryReceive(&message));
      if (!got) break;
      lost += message.lost_before();
      EXPECT_EQ(message.sequence(), expected_next + message.lost_before());
      expected_next = message.sequence() + 1;
      EXPECT_TRUE(CheckPattern(message.user(), message.body()));
      EXPECT_EQ(message.user(), message.sequence());
      ++received;
    }
  }
  EXPECT_GT(lost, 0u);
  EXPECT_EQ(lost, consumer->lost_count());
  EXPECT_EQ(received + lost + (200 - expected_next), 200u);
  message.Reset();
  consumer->Close();
  consumer.reset();
  producer->Poll();
  // Every block the consumer was given came back, or was taken back when
  // overwritten unread; only the slots' own references remain (8 slots).
  EXPECT_EQ(producer->stats().blocks_live, 8u);
  EXPECT_EQ(producer->stats().consumers_finished, 1u);
  EXPECT_GT(producer->stats().dropped, 0u);
}

TEST_F(ChannelTest, HeldBodiesKeepTheirBlocksAndOutliveTheConsumer) {
  const std::string name = NewName("ch");
  ChannelOptions o = Small();
  o.slot_count = 2;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ChannelMessage message;
  std::vector<ChannelBlock> held;
  for (uint64_t i = 0; i < 6; ++i) {
    ASSERT_OK(PublishPattern(producer.get(), i, 4096));
    ASSERT_OK(consumer->Receive(&message, 1s));
    held.push_back(message.TakeBody());
  }
  message.Reset();
  consumer->Close();
  consumer.reset();
  // Fill the arena with other blocks: none of the held ones may be reused.
  std::vector<ChannelLoan> loans;
  while (true) {
    auto loan = producer->Loan(4096);
    if (!loan.ok()) {
      EXPECT_EQ(loan.status().code(), StatusCode::kTimedOut) << loan.status().ToString();
      EXPECT_NE(loan.status().message().find("holds 6"), std::string::npos)
          << loan.status().ToString();
      break;
    }
    FillPattern(999, loan->data());
    loans.push_back(std::move(*loan));
  }
  for (uint64_t i = 0; i < held.size(); ++i) EXPECT_TRUE(CheckPattern(i, held[i].data())) << i;
  // Returned from another thread, after the consumer is gone.
  std::thread([&] { held.clear(); }).join();
  loans.clear();
  producer->Poll();
  EXPECT_EQ(producer->stats().consumers_finished, 1u);
  // The slots' references went when space ran out (nobody was left to read).
  EXPECT_EQ(producer->stats().blocks_live, 0u);
  EXPECT_EQ(producer->stats().bogus_returns, 0u);
}

// A full arena is backpressure, never corruption: a loan waits up to
// space_timeout, then fails with TimedOut naming the consumer that holds
// the space; once that consumer returns its blocks the next loan succeeds,
// and the bodies it held were intact all along. A block larger than the
// arena is a CapacityError at once.
TEST_F(ChannelTest, AFullArenaTimesOutNamingItsHolderThenLoansOnceReturned) {
  const std::string name = NewName("ch");
  ChannelOptions o = Small();  // 64 KiB arena, 8 slots
  o.max_arena_bytes = 0;       // that does not grow (channel_extension_test.cc: one that does)
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ChannelMessage message;
  std::vector<ChannelBlock> held;
  // 16 KiB bodies: the consumer takes and keeps every one it receives.
  uint64_t published = 0;
  Status full;
  while (true) {
    auto loan = producer->Loan(16 << 10);
    if (!loan.ok()) {
      full = loan.status();
      break;
    }
    FillPattern(published, loan->data());
    ASSERT_OK(producer->Publish({}, std::move(*loan), published));
    ++published;
    ASSERT_OK(consumer->Receive(&message, 1s));
    held.push_back(message.TakeBody());
  }
  EXPECT_EQ(full.code(), StatusCode::kTimedOut) << full.ToString();
  EXPECT_NE(full.message().find("consumer 0 (pid " + std::to_string(::getpid()) + ") holds " +
                                std::to_string(held.size())),
            std::string::npos)
      << full.ToString();
  ASSERT_GE(held.size(), 3u);
  for (uint64_t i = 0; i < held.size(); ++i) EXPECT_TRUE(CheckPattern(i, held[i].data())) << i;
  auto too_large = producer->Loan(o.arena_bytes + 64);
  EXPECT_EQ(too_large.status().code(), StatusCode::kCapacityError) << too_large.status().ToString();
  // Returned (from another thread): the producer takes the space back at
  // its next loan.
  std::thread([&] { held.clear(); }).join();
  ASSERT_OK_AND_ASSIGN(ChannelLoan again, producer->Loan(16 << 10));
  EXPECT_EQ(producer->stats().bogus_returns, 0u);
}

// A loan kept across its publish holds the block until it is dropped (on
// any thread); consumers' returns alone do not free it.
TEST_F(ChannelTest, AKeptLoanHoldsItsBlockUntilDropped) {
  const std::string name = NewName("ch");
  ChannelOptions o = Small();
  o.slot_count = 2;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ASSERT_OK_AND_ASSIGN(ChannelLoan kept, producer->Loan(4096));
  FillPattern(5, kept.data());
  ASSERT_OK(producer->Publish({}, kept, 5));  // an lvalue: kept
  EXPECT_TRUE(kept.valid());
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "published already", producer->Publish({}, kept, 6));
  ChannelMessage message;
  ASSERT_OK(consumer->Receive(&message, 1s));
  EXPECT_TRUE(CheckPattern(5, message.body()));
  message.Reset();
  // Two more messages push it out of the slots; the consumer returned it.
  ASSERT_OK(PublishPattern(producer.get(), 6, 64));
  ASSERT_OK(PublishPattern(producer.get(), 7, 64));
  producer->Poll();
  // Fill the arena: the kept block is never handed out.
  std::vector<ChannelLoan> loans;
  while (true) {
    auto loan = producer->Loan(4096);
    if (!loan.ok()) break;
    EXPECT_NE(loan->offset(), kept.offset());
    loans.push_back(std::move(*loan));
  }
  EXPECT_TRUE(CheckPattern(5, kept.data()));
  const uint64_t offset = kept.offset();
  std::thread([&] { kept.Reset(); }).join();
  ASSERT_OK_AND_ASSIGN(ChannelLoan again, producer->Loan(4096));
  EXPECT_EQ(again.offset(), offset);
  // An unpublished loan dropped on another thread comes back too.
  std::thread([&] { again.Reset(); }).join();
  ASSERT_OK_AND_ASSIGN(ChannelLoan third, producer->Loan(4096));
  EXPECT_EQ(third.offset(), offset);
}

// LoanInto reuses one loan object: each loan lets go of the block the
// object held, a published object is empty (and cannot be published
// again), and a loan of another channel goes back to that channel.
TEST_F(ChannelTest, LoanIntoReusesOneLoanObject) {
  const std::string name = NewName("ch");
  ChannelOptions o = Small();
  o.slot_count = 2;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ASSERT_OK_AND_ASSIGN(auto other, ChannelProducer::Create(NewName("ch"), o));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ChannelMessage message;
  ChannelLoan loan;
  ASSERT_RAISES(kInvalid, producer->LoanInto(64, nullptr));
  for (uint64_t i = 0; i < 100; ++i) {
    ASSERT_OK(producer->LoanInto(1000, &loan));
    ASSERT_TRUE(loan.valid());
    FillPattern(i, loan.data());
    ASSERT_OK(producer->Publish({}, std::move(loan), i));
    EXPECT_FALSE(loan.valid());
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "empty", producer->Publish({}, std::move(loan), i));
    ASSERT_OK(consumer->Receive(&message, 1s));
    EXPECT_EQ(message.user(), i);
    EXPECT_TRUE(CheckPattern(i, message.body()));
  }
  // Loaned again without publishing: the block it held goes back (the
  // 64 KiB arena holds 16 of these).
  for (int i = 0; i < 100; ++i) {
    ASSERT_OK(producer->LoanInto(4096, &loan));
  }
  // A loan of another channel: returned there, then filled from this one.
  ASSERT_OK(other->LoanInto(64, &loan));
  EXPECT_EQ(other->stats().blocks_live, 1u);
  ASSERT_OK(producer->LoanInto(64, &loan));
  other->Poll();
  EXPECT_EQ(other->stats().blocks_live, 0u);
  ASSERT_OK(producer->Publish({}, std::move(loan), 7));
  ASSERT_OK(consumer->Receive(&message, 1s));
  EXPECT_EQ(message.user(), 7u);
}

// TakeBodyInto hands each body to one holder, which returns the block it
// held first; the holder and the message keep the consumer's queue, and
// once both let go of it a closed consumer finishes.
TEST_F(ChannelTest, TakeBodyIntoReturnsTheHoldersPreviousBlock) {
  const std::string name = NewName("ch");
  ChannelOptions o = Small();
  o.slot_count = 2;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ChannelMessage message;
  ChannelBlock holder;
  // 64 KiB of arena, 4 KiB bodies: without the returns the arena runs out
  // after 16.
  for (uint64_t i = 0; i < 200; ++i) {
    ASSERT_OK(PublishPattern(producer.get(), i, 4096));
    ASSERT_OK(consumer->Receive(&message, 1s));
    message.TakeBodyInto(&holder);
    EXPECT_FALSE(message.has_body());
    ASSERT_TRUE(holder.valid());
    EXPECT_TRUE(CheckPattern(i, holder.data())) << i;
  }
  // A message without body leaves the holder empty (its block returned).
  ASSERT_OK(producer->Publish({}, 1000));
  ASSERT_OK(consumer->Receive(&message, 1s));
  message.TakeBodyInto(&holder);
  EXPECT_FALSE(holder.valid());
  producer->Poll();
  EXPECT_EQ(producer->stats().bogus_returns, 0u);
  // Moved out instead, a body outlives the consumer in the holder.
  ASSERT_OK(PublishPattern(producer.get(), 1001, 64));
  ASSERT_OK(consumer->Receive(&message, 1s));
  ChannelBlock last = message.TakeBody();
  ASSERT_TRUE(last.valid());
  holder = std::move(last);
  consumer->Close();
  consumer.reset();
  message.Reset();
  producer->Poll();
  EXPECT_EQ(producer->stats().consumers_finished, 0u);  // the holder still holds
  EXPECT_TRUE(CheckPattern(1001, holder.data()));
  holder.Reset();
  producer->Poll();
  EXPECT_EQ(producer->stats().consumers_finished, 1u);
  EXPECT_EQ(producer->stats().bogus_returns, 0u);
}

// A hostile header cannot make a consumer create a large segment of its own
// (its return queue is sized by the header): counts beyond what the arena
// implies are refused at open. (Found by channel_fuzz: 4 GiB segments.)
TEST_F(ChannelTest, ConsumerRefusesAHeaderThatInflatesItsReturnQueue) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Small()));
  ASSERT_OK_AND_ASSIGN(auto rw, Segment::Open(name, SegmentKind::kChannel));
  auto* header = reinterpret_cast<internal::ChannelHeaderData*>(rw->data());
  const uint32_t blocks = header->block_count;
  const uint32_t returns = header->return_capacity;
  header->return_capacity = 1u << 29;  // a 4 GiB queue
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "header counts out of range", ChannelConsumer::Open(name));
  header->return_capacity = returns;
  header->block_count = 1u << 24;  // far more blocks than the arena has room for
  header->return_capacity = 1u << 25;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "header counts out of range", ChannelConsumer::Open(name));
  header->block_count = blocks;
  header->return_capacity = returns;
  ASSERT_OK(ChannelConsumer::Open(name).status());
}

TEST_F(ChannelTest, RejectsSlotsNamingBytesOutsideTheArena) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Small()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ASSERT_OK(PublishPattern(producer.get(), 0, 64));
  ASSERT_OK(PublishPattern(producer.get(), 1, 64));
  // A rogue writer with the producer's access rewrites message 0's slot.
  ASSERT_OK_AND_ASSIGN(auto rw, Segment::Open(name, SegmentKind::kChannel));
  const auto* h = reinterpret_cast<internal::ChannelHeaderData*>(rw->data());
  auto* slot = reinterpret_cast<internal::ChannelSlotData*>(rw->data() + h->slots_offset);
  slot->body_length.store(h->arena_size + 1, std::memory_order_relaxed);
  ChannelMessage message;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "outside the arena", consumer->Receive(&message, 1s));
  ASSERT_OK(consumer->Receive(&message, 1s));  // the next one is fine
  EXPECT_EQ(message.user(), 1u);
  EXPECT_TRUE(CheckPattern(1, message.body()));
}

// A consumer's registration is two steps: its request (the entry's CAS),
// then the bump of the registry's `changes` that tells a publish to look.
// A producer that saw the request in consumers() in between (Producer::Open
// waits for its consumers that way) must accept it at its next publish,
// not at the one after the bump: the consumer then gets the first message.
// (A tsan run of BrokerTest.GoldFilesThroughPublishAndSubscribe lost a
// gold file's first batches in this window.)
TEST_F(ChannelTest, ARequestSeenBeforeItsBumpIsAcceptedAtTheNextPublish) {
  for (const bool accept_on_publish : {true, false}) {
    SCOPED_TRACE(accept_on_publish ? "accept on publish" : "AcceptConsumers");
    const std::string name = NewName("ch");
    ChannelOptions o = Small();
    o.accept_on_publish = accept_on_publish;
    ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
    ASSERT_OK(PublishPattern(producer.get(), 7, 64));  // the producer has looked once
    ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
    // Back to the moment between the request and the bump.
    ASSERT_OK_AND_ASSIGN(auto registry,
                         Segment::Open(name + ".reg", SegmentKind::kChannelRegistry));
    auto* reg = reinterpret_cast<internal::RegistryHeaderData*>(registry->data());
    reg->changes.fetch_sub(1, std::memory_order_relaxed);
    const auto listed = producer->consumers();
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_FALSE(listed[0].accepted);
    if (!accept_on_publish) (void)producer->AcceptConsumers();
    ASSERT_OK(PublishPattern(producer.get(), 1, 64));
    reg->changes.fetch_add(1, std::memory_order_relaxed);  // the bump lands
    ASSERT_OK(PublishPattern(producer.get(), 2, 64));
    ChannelMessage message;
    ASSERT_OK(consumer->Receive(&message, 1s));
    EXPECT_EQ(message.user(), 1u);
    ASSERT_OK(consumer->Receive(&message, 1s));
    EXPECT_EQ(message.user(), 2u);
  }
}

// A rogue consumer writes return entries straight into its own return
// queue (its segment is writable to it), at the position the producer reads
// next. Returns (descriptor, generation) of the message whose slot is
// `sequence`'s, read from the channel segment.
class ReturnForger {
 public:
  static Result<ReturnForger> Open(const std::string& channel, uint32_t consumer_index) {
    ReturnForger f;
    ALKAID_ASSIGN_OR_RAISE(f.channel_, Segment::Open(channel, SegmentKind::kChannel));
    const auto names =
        testing::SegmentsWithPrefix(channel + ".c" + std::to_string(consumer_index) + ".");
    if (names.size() != 1) return Status::Invalid("no single segment for the consumer");
    ALKAID_ASSIGN_OR_RAISE(f.own_, Segment::Open(names[0], SegmentKind::kChannelConsumer));
    f.index_ = consumer_index;
    return f;
  }

  std::pair<uint32_t, uint32_t> BlockOf(uint64_t sequence) const {
    const auto* h = header();
    const auto* slot = reinterpret_cast<const internal::ChannelSlotData*>(
        channel_->data() + h->slots_offset + (sequence % h->slot_count) * h->slot_size);
    const uint64_t word = slot->block.load();
    return {static_cast<uint32_t>(word), static_cast<uint32_t>(word >> 32)};
  }
  uint32_t block_count() const { return header()->block_count; }

  // Queues (descriptor, generation) pairs after everything the producer
  // has drained (call after Poll, with nothing of the consumer undrained).
  void Forge(std::initializer_list<std::pair<uint32_t, uint32_t>> entries) {
    const auto* h = header();
    const auto* control = reinterpret_cast<const internal::ConsumerControlData*>(
                              channel_->data() + h->controls_offset) +
                          index_;
    const auto* own = reinterpret_cast<const internal::ConsumerSegHeaderData*>(own_->data());
    const uint32_t log2 = static_cast<uint32_t>(__builtin_ctz(own->return_capacity));
    auto* cells = reinterpret_cast<std::atomic<uint64_t>*>(own_->data() + sizeof(*own));
    uint64_t pos = control->returns_read.load();
    for (const auto& [descriptor, generation] : entries) {
      cells[pos & (own->return_capacity - 1)].store(
          internal::ReturnWord(internal::ReturnLap(pos, log2), descriptor, generation));
      ++pos;
    }
  }

 private:
  const internal::ChannelHeaderData* header() const {
    return reinterpret_cast<const internal::ChannelHeaderData*>(channel_->data());
  }
  std::shared_ptr<Segment> channel_;
  std::shared_ptr<Segment> own_;
  uint32_t index_ = 0;
};

// Returns from a consumer that name a block it does not hold (another
// consumer's, one it returned already, a descriptor out of range) free
// nothing and are counted as bogus; the other consumer's body stays
// intact and its block is not lent again until that consumer drops it.
TEST_F(ChannelTest, ForgedReturnsFreeNoBlockAnotherConsumerHolds) {
  const std::string name = NewName("ch");
  ChannelOptions o = Small();
  o.slot_count = 2;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ASSERT_OK_AND_ASSIGN(auto honest, ChannelConsumer::Open(name));
  ASSERT_OK(PublishPattern(producer.get(), 0, 4096));  // before the rogue joins
  ChannelMessage message;
  ASSERT_OK(honest->Receive(&message, 1s));
  ChannelBlock held = message.TakeBody();
  ASSERT_OK_AND_ASSIGN(auto rogue, ChannelConsumer::Open(name));
  ASSERT_EQ(rogue->index(), 1u);
  ASSERT_OK_AND_ASSIGN(ReturnForger forger, ReturnForger::Open(name, rogue->index()));
  const auto held_block = forger.BlockOf(0);
  ASSERT_OK(PublishPattern(producer.get(), 1, 4096));
  const auto rogues_block = forger.BlockOf(1);
  ChannelMessage rogues;
  ASSERT_OK(rogue->Receive(&rogues, 1s));
  ASSERT_OK(honest->Receive(&message, 1s));
  rogues.Reset();  // returned once, honestly
  message.Reset();
  // Two more messages push message 0 out of the slots: only the honest
  // consumer's hold keeps its block.
  for (uint64_t i = 2; i < 4; ++i) {
    ASSERT_OK(PublishPattern(producer.get(), i, 64));
    ASSERT_OK(rogue->Receive(&rogues, 1s));
    ASSERT_OK(honest->Receive(&message, 1s));
  }
  producer->Poll();
  const ChannelStats before = producer->stats();
  forger.Forge(
      {held_block, rogues_block, {forger.block_count(), held_block.second}, {0xffffffU, 1}});
  producer->Poll();
  EXPECT_EQ(producer->stats().bogus_returns - before.bogus_returns, 4u);
  EXPECT_EQ(producer->stats().returns, before.returns);
  // Fill the arena: the held block is never lent.
  std::vector<ChannelLoan> loans;
  while (true) {
    auto loan = producer->Loan(4096);
    if (!loan.ok()) break;
    FillPattern(999, loan->data());
    loans.push_back(std::move(*loan));
  }
  EXPECT_TRUE(CheckPattern(0, held.data()));
  loans.clear();
  held.Reset();
  message.Reset();
  producer->Poll();
  EXPECT_EQ(producer->stats().bogus_returns - before.bogus_returns, 4u);
}

// The registry (`<name>.reg`) is writable by every process that may open
// the channel (the channel's group in group mode). A process rewriting the
// entry of a live, accepted consumer (another pid and tag, closed, freed)
// and bumping `changes` gets nothing released: the producer takes a
// consumer's close from its own segment and its death from its pid, and
// puts the entry back. The
// consumer's held bodies stay intact while the arena is refilled, it goes
// on receiving, and its own close is still honoured.
TEST_F(ChannelTest, ARegistryEntryRewrittenByAnotherProcessReleasesNothing) {
  const std::string name = NewName("ch");
  ChannelOptions o = Small();
  o.slot_count = 2;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ASSERT_OK_AND_ASSIGN(auto victim, ChannelConsumer::Open(name));
  std::vector<ChannelBlock> held;
  ChannelMessage message;
  for (uint64_t i = 0; i < 4; ++i) {
    ASSERT_OK(PublishPattern(producer.get(), i, 4096));
    ASSERT_OK(victim->Receive(&message, 1s));
    held.push_back(message.TakeBody());
  }
  // Accepted: the consumer removed its segment's name once the producer had
  // mapped it, so no process can open it to forge returns.
  EXPECT_TRUE(testing::SegmentsWithPrefix(name + ".c").empty());
  ASSERT_OK_AND_ASSIGN(auto registry, Segment::Open(name + ".reg", SegmentKind::kChannelRegistry));
  auto* header = reinterpret_cast<internal::RegistryHeaderData*>(registry->data());
  auto* entry = reinterpret_cast<internal::RegistrationData*>(
                    registry->data() + sizeof(internal::RegistryHeaderData)) +
                victim->index();
  const uint64_t honest = entry->word.load();
  ASSERT_EQ(internal::RegPid(honest), static_cast<uint32_t>(::getpid()));
  const uint64_t forgeries[] = {
      internal::RegWord(1, internal::RegTag(honest) + 1, internal::kRegRequested),  // pid 1 lives
      internal::RegWithState(honest, internal::kRegClosed),
      0,
  };
  for (const uint64_t forgery : forgeries) {
    SCOPED_TRACE(forgery);
    entry->word.store(forgery);
    header->changes.fetch_add(1);
    producer->Poll();
    EXPECT_EQ(producer->stats().consumers_reclaimed, 0u);
    EXPECT_EQ(producer->stats().consumers_finished, 0u);
    EXPECT_EQ(entry->word.load(), honest) << "the entry was not put back";
  }
  // Fill the arena: no held block is lent again.
  std::vector<ChannelLoan> loans;
  while (true) {
    auto loan = producer->Loan(4096);
    if (!loan.ok()) break;
    FillPattern(999, loan->data());
    loans.push_back(std::move(*loan));
  }
  ASSERT_FALSE(loans.empty());
  for (uint64_t i = 0; i < held.size(); ++i) {
    EXPECT_TRUE(CheckPattern(i, held[i].data())) << "held body " << i << " was overwritten";
  }
  loans.clear();
  // Still counted and served.
  ASSERT_OK(PublishPattern(producer.get(), 4, 4096));
  ASSERT_OK(victim->Receive(&message, 1s));
  EXPECT_TRUE(CheckPattern(4, message.body()));
  message.Reset();
  // Its own close is honoured: once it returned everything, it is finished.
  victim->Close();
  held.clear();
  producer->Poll();
  EXPECT_EQ(producer->stats().consumers_finished, 1u);
}

// A block's descriptor is reused with a new generation; a return naming
// an earlier generation (a consumer's late duplicate, or a forgery) must
// not free the block the same consumer now holds under the new one.
TEST_F(ChannelTest, AReturnOfAnEarlierGenerationDoesNotFreeTheReusedBlock) {
  const std::string name = NewName("ch");
  ChannelOptions o = Small();  // 64 KiB arena
  o.slot_count = 2;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ASSERT_OK_AND_ASSIGN(ReturnForger forger, ReturnForger::Open(name, consumer->index()));
  // Publish and read 16 KiB bodies until a descriptor comes back under a
  // new generation; keep that body.
  ChannelMessage message;
  std::vector<std::pair<uint32_t, uint32_t>> seen;
  ChannelBlock held;
  uint64_t held_seed = 0;
  uint32_t earlier_generation = 0;
  for (uint64_t i = 0; i < 64 && !held.valid(); ++i) {
    ASSERT_OK(PublishPattern(producer.get(), i, 16 << 10));
    const auto block = forger.BlockOf(i);
    ASSERT_OK(consumer->Receive(&message, 1s));
    for (const auto& [descriptor, generation] : seen) {
      if (descriptor == block.first && generation != block.second) {
        earlier_generation = generation;
        held_seed = i;
        held = message.TakeBody();
        break;
      }
    }
    seen.push_back(block);
  }
  ASSERT_TRUE(held.valid()) << "no descriptor was reused in 64 messages";
  const auto held_block = forger.BlockOf(held_seed);
  // Push the held message out of the slots.
  for (uint64_t i = 100; i < 102; ++i) {
    ASSERT_OK(PublishPattern(producer.get(), i, 64));
    ASSERT_OK(consumer->Receive(&message, 1s));
  }
  producer->Poll();
  const ChannelStats before = producer->stats();
  forger.Forge({{held_block.first, earlier_generation}});
  producer->Poll();
  EXPECT_EQ(producer->stats().bogus_returns - before.bogus_returns, 1u);
  std::vector<ChannelLoan> loans;
  while (true) {
    auto loan = producer->Loan(16 << 10);
    if (!loan.ok()) break;
    FillPattern(999, loan->data());
    loans.push_back(std::move(*loan));
  }
  EXPECT_TRUE(CheckPattern(held_seed, held.data()));
  loans.clear();
  held.Reset();
  message.Reset();
  // The consumer's first push after the forgery landed on the entry the
  // producer had already read (it is lost to the producer); finishing the
  // consumer clears whatever it still appears to hold.
  consumer->Close();
  producer->Poll();
  EXPECT_EQ(producer->stats().consumers_finished, 1u);
  ASSERT_OK(producer->Loan(16 << 10).status());
}

// Threads: one producer, three consumers waiting in each mode; every
// message arrives once, in order, intact; every block comes back.
TEST_F(ChannelTest, ThreadsInEveryWaitMode) {
  const std::string name = NewName("ch");
  ChannelOptions o = Small();
  o.slot_count = 16;
  o.publish_timeout = 10s;
  o.space_timeout = 10s;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  constexpr uint64_t kCount = 20000;
  const WaitMode modes[] = {WaitMode::kBusyPoll, WaitMode::kBlock, WaitMode::kSpinThenBlock};
  std::vector<std::unique_ptr<ChannelConsumer>> consumers;
  for (WaitMode mode : modes) {
    ChannelConsumerOptions co;
    co.wait_mode = mode;
    ASSERT_OK_AND_ASSIGN(auto c, ChannelConsumer::Open(name, co));
    consumers.push_back(std::move(c));
  }
  std::vector<std::string> errors(consumers.size());
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < consumers.size(); ++t) {
    threads.emplace_back([&, t] {
      ChannelMessage message;
      for (uint64_t i = 0; i < kCount; ++i) {
        const Status st = consumers[t]->Receive(&message, 20s);
        if (!st.ok()) {
          errors[t] = st.ToString();
          return;
        }
        if (message.user() != i || !CheckPattern(i, message.body())) {
          errors[t] = "message " + std::to_string(i) + " damaged or out of order";
          return;
        }
      }
    });
  }
  for (uint64_t i = 0; i < kCount; ++i) ASSERT_OK(PublishPattern(producer.get(), i, 64 + i % 512));
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  consumers.clear();
  producer->Poll();
  EXPECT_EQ(producer->stats().consumers_finished, 3u);
  EXPECT_EQ(producer->stats().bogus_returns, 0u);
  EXPECT_EQ(producer->stats().blocks_live, 16u);  // the slots' references only
}

// A kBlock consumer asleep on the futex is woken by the publish itself (the
// producer sees its odd `waiting` episode and bumps data_futex), not by the
// end of its 100 ms sleep slice: the delivery tests above would pass, only
// slower, without the wake, so this one looks at the futex word. Each round
// waits until the consumer is asleep (a condition), then publishes.
// The doorbell of a consumer the producer has not accepted yet: the
// messages already published are not its own, so arming says "nothing
// there" (it said "there" at every try, and a loop sleeping on the
// descriptor spun); the publish that accepts it sounds the bell.
TEST_F(ChannelTest, AnUnacceptedConsumersDoorbellIsQuietUntilThePublishThatAcceptsIt) {
  const std::string name = NewName("ch");
  ChannelOptions o = Small();
  o.accept_on_publish = false;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ASSERT_OK(producer->Publish({}, 1));  // before the consumer
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ASSERT_OK(producer->Publish({}, 2));  // not accepted: not for it
  ASSERT_OK_AND_ASSIGN(const int fd, consumer->DoorbellFd());
  pollfd pfd{fd, POLLIN, 0};
  for (int attempt = 0; attempt < 3; ++attempt) {
    ASSERT_OK_AND_ASSIGN(const bool there, consumer->ArmDoorbell());
    EXPECT_FALSE(there) << "attempt " << attempt;
    EXPECT_EQ(::poll(&pfd, 1, 0), 0);
  }
  EXPECT_EQ(producer->AcceptConsumers(), 1u);
  ASSERT_OK(producer->Publish({}, 3));
  ASSERT_EQ(::poll(&pfd, 1, 30000), 1);  // sounded (a failure, not a hang)
  ChannelMessage message;
  ASSERT_OK_AND_ASSIGN(bool got, consumer->TryReceive(&message));
  ASSERT_TRUE(got);
  EXPECT_EQ(message.user(), 3u);
  // Accepted and drained: quiet again; one accepted before the consumer
  // looked (no receive in between) shows its message when armed.
  ASSERT_OK_AND_ASSIGN(bool there, consumer->ArmDoorbell());
  EXPECT_FALSE(there);
  ASSERT_OK_AND_ASSIGN(auto second, ChannelConsumer::Open(name));
  ASSERT_OK_AND_ASSIGN(const int second_fd, second->DoorbellFd());
  (void)second_fd;
  EXPECT_EQ(producer->AcceptConsumers(), 1u);
  ASSERT_OK(producer->Publish({}, 4));
  ASSERT_OK_AND_ASSIGN(there, second->ArmDoorbell());
  EXPECT_TRUE(there);
  ASSERT_OK_AND_ASSIGN(got, second->TryReceive(&message));
  ASSERT_TRUE(got);
  EXPECT_EQ(message.user(), 4u);
}

TEST_F(ChannelTest, PublishWakesABlockedConsumer) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Small()));
  ChannelConsumerOptions co;
  co.wait_mode = WaitMode::kBlock;
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name, co));
  // Its segment, mapped while it has a name (until the consumer sees it was
  // accepted).
  const auto names = testing::SegmentsWithPrefix(name + ".c");
  ASSERT_EQ(names.size(), 1u);
  ASSERT_OK_AND_ASSIGN(auto own, Segment::Open(names[0], SegmentKind::kChannelConsumer,
                                               SegmentOpenOptions{.read_only = true}));
  ChannelMessage message;
  ASSERT_OK(PublishPattern(producer.get(), 0, 64));  // accepted from here on
  ASSERT_OK(consumer->Receive(&message, 5s));
  ASSERT_OK_AND_ASSIGN(auto channel, Segment::Open(name, SegmentKind::kChannel,
                                                   SegmentOpenOptions{.read_only = true}));
  const auto* header = reinterpret_cast<const internal::ChannelHeaderData*>(channel->data());
  const auto* waiting =
      &reinterpret_cast<const internal::ConsumerSegHeaderData*>(own->data())->waiting;
  const uint32_t futex_before = header->data_futex.load();
  for (uint64_t round = 1; round <= 5; ++round) {
    Status received;
    std::thread reader([&] { received = consumer->Receive(&message, 30s); });
    while ((waiting->load() & 1) == 0) std::this_thread::yield();  // asleep
    ASSERT_OK(PublishPattern(producer.get(), round, 64));
    reader.join();
    ASSERT_OK(received);
    EXPECT_EQ(message.user(), round);
  }
  // Each round's publish found the consumer asleep and woke it (a round
  // whose consumer woke from a slice just then may not need to).
  EXPECT_GE(header->data_futex.load() - futex_before, 1u);
}

TEST_F(ChannelTest, RegistrationsAreBoundedAndReused) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Small()));
  std::vector<std::unique_ptr<ChannelConsumer>> consumers;
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(auto c, ChannelConsumer::Open(name));
    consumers.push_back(std::move(c));
  }
  ASSERT_RAISES(kCapacityError, ChannelConsumer::Open(name));
  producer->Poll();
  consumers.pop_back();
  producer->Poll();  // finishes the closed one: its entry is free again
  ASSERT_OK_AND_ASSIGN(auto again, ChannelConsumer::Open(name));
  EXPECT_EQ(again->index(), 3u);
}

TEST_F(ChannelTest, RemoveChannelRemovesEveryName) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Small()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  EXPECT_EQ(testing::SegmentsWithPrefix(name).size(), 3u);  // channel, registry, consumer
  ASSERT_OK(RemoveChannel(name));
  EXPECT_TRUE(testing::SegmentsWithPrefix(name).empty());
  ASSERT_RAISES(kKeyError, RemoveChannel(name));
}

}  // namespace
}  // namespace alkaid::shm
