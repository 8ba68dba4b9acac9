// ChannelConsumer::TryReceiveHot, the receive's common case inline in the
// caller's frame (the Result-free TryReceive tries it first): it delivers
// exactly what the out-of-line receive delivers, and leaves every slot that
// one refuses (and everything else it does not take) to it, touching
// nothing.

#include <cstring>
#include <deque>
#include <string>
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

constexpr uint64_t kFixedBytes = 512;
constexpr uint32_t kFixedCount = 16;
constexpr uint64_t kArenaBody = 1000;  // more than a fixed block: the arena's

class ConsumerHotTest : public ShmTest {
 protected:
  static ChannelOptions Options() {
    ChannelOptions o;
    o.slot_count = 8;
    o.inline_capacity = 64;
    o.arena_bytes = 64 << 10;
    o.max_arena_bytes = 64 << 10;
    o.max_consumers = 4;
    o.publish_timeout = 200ms;
    o.space_timeout = 200ms;
    o.fixed_block_bytes = kFixedBytes;
    o.fixed_block_count = kFixedCount;
    o.stamp_publish_time = true;
    return o;
  }

  // The channel's slots, writable (a rogue writer with the producer's access).
  struct Rogue {
    std::shared_ptr<Segment> rw;
    internal::ChannelHeaderData* header = nullptr;
    internal::ChannelSlotData* Slot(uint64_t sequence) const {
      return reinterpret_cast<internal::ChannelSlotData*>(
          rw->data() + header->slots_offset + (sequence % header->slot_count) * header->slot_size);
    }
  };
  static Rogue OpenRogue(const std::string& name) {
    Rogue r;
    auto rw = Segment::Open(name, SegmentKind::kChannel);
    EXPECT_TRUE(rw.ok());
    r.rw = std::move(*rw);
    r.header = reinterpret_cast<internal::ChannelHeaderData*>(r.rw->data());
    return r;
  }
};

Status PublishPattern(ChannelProducer* producer, uint64_t seed, uint64_t length,
                      std::span<const std::byte> inline_bytes = {}, uint32_t shape = 0) {
  ALKAID_ASSIGN_OR_RAISE(ChannelLoan loan, producer->Loan(length));
  FillPattern(seed, loan.data());
  return producer->Publish(inline_bytes, std::move(loan), seed, shape);
}

// The first receive accepts the consumer (TryReceive's way): message 0.
void Accept(ChannelConsumer* consumer, ChannelMessage* message) {
  bool got = false;
  ASSERT_OK(consumer->TryReceive(message, &got));
  ASSERT_TRUE(got);
}

// Every kind of message, received by one consumer through TryReceiveHot
// (TryReceive where it says no) and by another through the Result
// TryReceive, which never takes the inline way:
// the same numbers and bodies. The fixed and arena bodies without inline
// bytes are the inline receive's; the others are not. Four rounds of the
// slots: the inline receive stores its cursor (the producer would time out
// waiting for room otherwise).
TEST_F(ConsumerHotTest, DeliversWhatTryReceiveDelivers) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
  ASSERT_OK_AND_ASSIGN(auto hot, ChannelConsumer::Open(name));
  ASSERT_OK_AND_ASSIGN(auto plain, ChannelConsumer::Open(name));
  ASSERT_OK_AND_ASSIGN(uint32_t shape, producer->AddShape(std::vector<std::byte>(40)));
  ASSERT_OK(PublishPattern(producer.get(), 0, 64));
  ChannelMessage a;
  ChannelMessage b;
  Accept(hot.get(), &a);
  Accept(plain.get(), &b);
  const std::byte inline_bytes[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
  uint64_t seed = 1;
  uint64_t hot_fixed = 0;
  uint64_t hot_arena = 0;
  for (int round = 0; round < 4; ++round) {
    // fixed, arena, fixed with a shape, inline bytes, no body, arena with a shape
    ASSERT_OK(PublishPattern(producer.get(), seed++, 64));
    ASSERT_OK(PublishPattern(producer.get(), seed++, kArenaBody));
    ASSERT_OK(PublishPattern(producer.get(), seed++, kFixedBytes, {}, shape));
    ASSERT_OK(PublishPattern(producer.get(), seed++, 64, inline_bytes));
    ASSERT_OK(producer->Publish(inline_bytes, seed++));
    ASSERT_OK(PublishPattern(producer.get(), seed++, kArenaBody, {}, shape));
    for (int k = 0; k < 6; ++k) {
      SCOPED_TRACE("message " + std::to_string(b.sequence() + 1));
      const uint64_t before = hot->next_sequence();
      const bool took = hot->TryReceiveHot(&a);
      EXPECT_EQ(took, k != 3 && k != 4);  // no inline bytes, a body
      if (took) {
        EXPECT_EQ(hot->next_sequence(), before + 1);
        (a.body().size() <= kFixedBytes ? hot_fixed : hot_arena) += 1;
      } else {
        EXPECT_EQ(hot->next_sequence(), before);
        bool got = false;
        ASSERT_OK(hot->TryReceive(&a, &got));
        ASSERT_TRUE(got);
      }
      ASSERT_OK_AND_ASSIGN(const bool got, plain->TryReceive(&b));  // never the inline way
      ASSERT_TRUE(got);
      EXPECT_EQ(a.sequence(), b.sequence());
      EXPECT_EQ(a.user(), b.user());
      EXPECT_EQ(a.shape(), b.shape());
      EXPECT_EQ(a.publish_ns(), b.publish_ns());
      EXPECT_NE(a.publish_ns(), 0u);
      EXPECT_EQ(a.lost_before(), b.lost_before());
      EXPECT_EQ(a.has_body(), b.has_body());
      EXPECT_EQ(a.body_offset(), b.body_offset());
      EXPECT_EQ(a.body().size(), b.body().size());
      ASSERT_EQ(a.payload().size(), b.payload().size());
      if (!a.payload().empty()) {
        EXPECT_EQ(std::memcmp(a.payload().data(), b.payload().data(), a.payload().size()), 0);
      }
      if (a.has_body()) {
        EXPECT_TRUE(CheckPattern(a.user(), a.body()));
        EXPECT_TRUE(CheckPattern(b.user(), b.body()));
      }
    }
  }
  EXPECT_EQ(hot_fixed, 8u);
  EXPECT_EQ(hot_arena, 8u);
  EXPECT_FALSE(hot->TryReceiveHot(&a));  // nothing there
  producer->Close();
  EXPECT_FALSE(hot->TryReceiveHot(&a));
  bool got = true;
  ASSERT_RAISES(kEndOfStream, hot->TryReceive(&a, &got));
}

// A fixed body received inline is held: kept past many more messages, its
// block is never lent again (the hold count), and once let go it is.
TEST_F(ConsumerHotTest, AFixedBodyReceivedInlineIsHeld) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ASSERT_OK(PublishPattern(producer.get(), 100, 64));
  ChannelMessage message;
  Accept(consumer.get(), &message);
  ASSERT_OK(PublishPattern(producer.get(), 101, 64));
  ASSERT_TRUE(consumer->TryReceiveHot(&message));
  ChannelBlock kept = message.TakeBody();
  const std::byte* where = kept.data().data();
  for (uint64_t i = 0; i < 4 * kFixedCount; ++i) {
    ASSERT_OK(PublishPattern(producer.get(), 200 + i, 64));
    ASSERT_TRUE(consumer->TryReceiveHot(&message));
    EXPECT_NE(message.body().data(), where);
    EXPECT_TRUE(CheckPattern(200 + i, message.body()));
  }
  EXPECT_TRUE(CheckPattern(101, kept.data()));
  kept.Reset();
  bool lent_again = false;
  for (uint64_t i = 0; i < 2 * kFixedCount && !lent_again; ++i) {
    ASSERT_OK(PublishPattern(producer.get(), 300 + i, 64));
    ASSERT_TRUE(consumer->TryReceiveHot(&message));
    lent_again = message.body().data() == where;
  }
  EXPECT_TRUE(lent_again);
}

// Every slot TryReceive refuses, and one read while the producer rewrites
// it, is left to TryReceive: TryReceiveHot says no and moves nothing (the
// cursor, the hold counts), TryReceive then refuses it with its error, and
// the next message is the inline receive's again.
TEST_F(ConsumerHotTest, LeavesEveryHostileSlotToTryReceive) {
  struct Case {
    const char* what;
    bool fixed;  // a fixed block's message (else the arena's)
    void (*spoil)(internal::ChannelSlotData* slot, const internal::ChannelHeaderData& h);
    const char* error;  // TryReceive's; null: no error, nothing received
  };
  using Slot = internal::ChannelSlotData;
  using Header = internal::ChannelHeaderData;
  const Case cases[] = {
      {"fixed block beyond the table", true,
       [](Slot* s, const Header&) {
         s->block.store(internal::PackBlock(internal::kFixedBlockFlag | kFixedCount, 0));
       },
       "fixed block"},
      {"fixed block beyond the table, where it would lie", true,
       [](Slot* s, const Header& h) {
         s->block.store(internal::PackBlock(internal::kFixedBlockFlag | kFixedCount, 0));
         s->body_offset.store(h.fixed_offset + uint64_t{kFixedCount} * kFixedBytes);
       },
       "fixed block"},
      {"fixed block elsewhere", true,
       [](Slot* s, const Header&) { s->body_offset.store(s->body_offset.load() + 64); },
       "fixed block"},
      {"fixed block too long", true,
       [](Slot* s, const Header&) { s->body_length.store(kFixedBytes + 1); }, "fixed block"},
      {"fixed block in an extension", true, [](Slot* s, const Header&) { s->extension.store(1); },
       "fixed block"},
      {"descriptor beyond the table", false,
       [](Slot* s, const Header& h) { s->block.store(internal::PackBlock(h.block_count, 1)); },
       "names descriptor"},
      {"generation 0", false,
       [](Slot* s, const Header&) { s->block.store(internal::PackBlock(1, 0)); },  // not 0: a body
       "names descriptor"},
      {"before the arena", false,
       [](Slot* s, const Header& h) { s->body_offset.store(h.arena_offset - 64); },
       "outside the arena"},
      {"past the arena", false,
       [](Slot* s, const Header& h) { s->body_offset.store(h.arena_offset + h.arena_size + 64); },
       "outside the arena"},
      {"not 64-aligned", false,
       [](Slot* s, const Header&) { s->body_offset.store(s->body_offset.load() + 8); },
       "outside the arena"},
      {"longer than the arena", false,
       [](Slot* s, const Header& h) { s->body_length.store(h.arena_size + 1); },
       "outside the arena"},
      {"in an extension not there", false, [](Slot* s, const Header&) { s->extension.store(1); },
       "extension"},
      {"too many inline bytes", false,
       [](Slot* s, const Header& h) { s->payload_size.store(h.inline_capacity + 1); },
       "inline bytes"},
      {"rewritten while read (odd sequence)", false,
       [](Slot* s, const Header&) { s->sequence.store(s->sequence.load() - 1); }, nullptr},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string name = NewName("ch");
    ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
    ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
    ASSERT_OK(PublishPattern(producer.get(), 0, 64));
    ChannelMessage message;
    Accept(consumer.get(), &message);
    message.Reset();  // hold nothing
    const uint64_t length = c.fixed ? 64 : kArenaBody;
    ASSERT_OK(PublishPattern(producer.get(), 1, length));
    ASSERT_OK(PublishPattern(producer.get(), 2, length));
    Rogue rogue = OpenRogue(name);
    internal::ChannelSlotData* slot = rogue.Slot(1);
    const uint64_t sequence = slot->sequence.load();
    c.spoil(slot, *rogue.header);
    EXPECT_FALSE(consumer->TryReceiveHot(&message));
    EXPECT_EQ(consumer->next_sequence(), 1u);
    EXPECT_FALSE(message.has_body());
    bool got = true;
    if (c.error != nullptr) {
      ASSERT_RAISES_WITH_MESSAGE(kInvalid, c.error, consumer->TryReceive(&message, &got));
      EXPECT_FALSE(got);
    } else {
      ASSERT_OK(consumer->TryReceive(&message, &got));
      EXPECT_FALSE(got);
      EXPECT_EQ(consumer->next_sequence(), 1u);
      slot->sequence.store(sequence);  // the rewrite is over: message 1 as it was
      ASSERT_TRUE(consumer->TryReceiveHot(&message));
      EXPECT_EQ(message.user(), 1u);
    }
    EXPECT_EQ(consumer->next_sequence(), 2u);
    ASSERT_TRUE(consumer->TryReceiveHot(&message));
    EXPECT_EQ(message.user(), 2u);
    EXPECT_TRUE(CheckPattern(2, message.body()));
  }
}

// A consumer not yet accepted, and one of a kDropOldest channel, receive by
// TryReceive alone; a closed one too (TryReceive says it is closed).
TEST_F(ConsumerHotTest, TakesNothingBeforeAcceptanceWithDropOldestOrOnceClosed) {
  for (const auto policy : {SlowConsumerPolicy::kBlockProducer, SlowConsumerPolicy::kDropOldest}) {
    const std::string name = NewName("ch");
    ChannelOptions o = Options();
    o.policy = policy;
    ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
    ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
    ASSERT_OK(PublishPattern(producer.get(), 0, 64));
    ChannelMessage message;
    EXPECT_FALSE(consumer->TryReceiveHot(&message));  // not accepted yet
    Accept(consumer.get(), &message);
    ASSERT_OK(PublishPattern(producer.get(), 1, 64));
    EXPECT_EQ(consumer->TryReceiveHot(&message), policy == SlowConsumerPolicy::kBlockProducer);
    ASSERT_OK(PublishPattern(producer.get(), 2, 64));
    consumer->Close();
    EXPECT_FALSE(consumer->TryReceiveHot(&message));
    bool got = true;
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "closed", consumer->TryReceive(&message, &got));
  }
}

// A producer thread and a consumer thread on a kBlockProducer channel (for
// ThreadSanitizer and AddressSanitizer too): every message, fixed and arena
// bodies in turn, received by the Result-free TryReceive (its inline way
// first) in order and whole, the last few bodies held and checked again
// before they go (a block lent again while held would show another
// pattern), and the producer never stuck for room (the cursor stores).
TEST_F(ConsumerHotTest, AProducerThreadAndAnInlineReceiverAgree) {
  const std::string name = NewName("ch");
  ChannelOptions o = Options();
  o.publish_timeout = 10s;
  o.space_timeout = 10s;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  constexpr uint64_t kMessages = 20'000;
  Status published;
  std::thread writer([&] {
    for (uint64_t i = 0; i < kMessages && published.ok(); ++i) {
      published = PublishPattern(producer.get(), i, i % 3 == 0 ? kArenaBody : 64 + (i % 8) * 56);
    }
    producer->Close();
  });
  ChannelMessage message;
  std::deque<std::pair<uint64_t, ChannelBlock>> held;
  uint64_t next = 0;
  std::string failure;
  while (failure.empty()) {
    bool got = false;
    const Status st = consumer->TryReceive(&message, &got);
    if (st.IsEndOfStream()) break;
    if (!st.ok()) {
      failure = st.ToString();
      break;
    }
    if (!got) {
      std::this_thread::yield();
      continue;
    }
    if (message.user() != next || message.sequence() != next ||
        !CheckPattern(next, message.body())) {
      failure = "message " + std::to_string(next) + " differs";
    }
    held.emplace_back(next++, message.TakeBody());
    if (held.size() > 4) {
      if (!CheckPattern(held.front().first, held.front().second.data())) {
        failure = "the body of message " + std::to_string(held.front().first) + " changed";
      }
      held.pop_front();
    }
  }
  writer.join();
  EXPECT_EQ(failure, "");
  ASSERT_OK(published);
  EXPECT_EQ(next, kMessages);
}

}  // namespace
}  // namespace alkaid::shm
