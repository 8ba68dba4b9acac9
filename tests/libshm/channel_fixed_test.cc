// Fixed blocks (ChannelOptions::fixed_block_bytes): a loan of at most that
// size takes one of the channel's fixed blocks, which is free again once
// every consumer passed its message and no consumer holds it (a count in the
// consumer's own segment), without the block table or a return queue.

#include <algorithm>
#include <cstring>
#include <set>
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

class ChannelFixedTest : public ShmTest {
 protected:
  ChannelOptions Options(SlowConsumerPolicy policy = SlowConsumerPolicy::kBlockProducer) {
    ChannelOptions o;
    o.slot_count = 8;
    o.inline_capacity = 64;
    o.arena_bytes = 64 << 10;
    o.max_arena_bytes = 64 << 10;
    o.max_consumers = 4;
    o.policy = policy;
    o.publish_timeout = 200ms;
    o.space_timeout = 200ms;
    o.fixed_block_bytes = kFixedBytes;
    o.fixed_block_count = kFixedCount;
    return o;
  }
};

// Where the fixed blocks lie in the channel segment's data.
struct FixedArea {
  uint64_t offset = 0;
  uint64_t size = 0;
  bool Contains(uint64_t body_offset) const {
    return body_offset >= offset && body_offset < offset + size;
  }
};

FixedArea AreaOf(const std::string& name) {
  auto rw = Segment::Open(name, SegmentKind::kChannel);
  EXPECT_TRUE(rw.ok());
  const auto* h = reinterpret_cast<const internal::ChannelHeaderData*>((*rw)->data());
  EXPECT_EQ(h->fixed_count, kFixedCount);
  EXPECT_EQ(h->fixed_size, kFixedBytes);
  return {h->fixed_offset, uint64_t{h->fixed_count} * h->fixed_size};
}

Status PublishPattern(ChannelProducer* producer, uint64_t seed, uint64_t length,
                      uint64_t* offset = nullptr) {
  ALKAID_ASSIGN_OR_RAISE(ChannelLoan loan, producer->Loan(length));
  FillPattern(seed, loan.data());
  if (offset != nullptr) *offset = loan.offset();
  return producer->Publish({}, std::move(loan), seed);
}

// A consumer that keeps up: every loan of at most the fixed size is a fixed
// block, a message's block is lent again once its slot was overwritten
// (the fixed blocks cycle: twice the slots), and nothing goes through the
// return queue; a larger loan is a block of the arena, returned as ever.
TEST_F(ChannelFixedTest, OneSizeLoansReuseTheBlockJustLetGoWithoutReturns) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  const FixedArea area = AreaOf(name);
  ChannelMessage message;
  std::set<uint64_t> offsets;
  for (uint64_t i = 0; i < 1000; ++i) {
    uint64_t offset = 0;
    ASSERT_OK(PublishPattern(producer.get(), i, 1 + i % kFixedBytes, &offset));
    EXPECT_TRUE(area.Contains(offset)) << i;
    offsets.insert(offset);
    ASSERT_OK(consumer->Receive(&message, 1s));
    ASSERT_EQ(message.user(), i);
    ASSERT_EQ(message.body_offset(), offset);
    ASSERT_TRUE(CheckPattern(i, message.body())) << i;
    message.Reset();
  }
  // The slots' 8 and the free ones: a block comes back once its slot is
  // overwritten (and only the fixed blocks are used).
  EXPECT_LE(offsets.size(), kFixedCount);
  EXPECT_EQ(producer->stats().returns, 0u);
  // A larger loan is a block of the arena, and comes back by return.
  uint64_t offset = 0;
  ASSERT_OK(PublishPattern(producer.get(), 5000, kFixedBytes + 1, &offset));
  EXPECT_FALSE(area.Contains(offset));
  ASSERT_OK(consumer->Receive(&message, 1s));
  EXPECT_TRUE(CheckPattern(5000, message.body()));
  message.Reset();
  producer->CollectReturns();
  EXPECT_EQ(producer->stats().returns, 1u);
  EXPECT_EQ(producer->stats().bogus_returns, 0u);
  ASSERT_EQ(producer->consumers().size(), 1u);
  EXPECT_EQ(producer->consumers()[0].held_blocks, 0u);
}

// Bodies a consumer holds keep their fixed blocks: the producer lends the
// others, then blocks of the arena, never a held one; each comes back when
// it is dropped.
TEST_F(ChannelFixedTest, AHeldFixedBlockIsNeverLentAgain) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  const FixedArea area = AreaOf(name);
  ChannelMessage message;
  std::vector<ChannelBlock> held;
  std::set<uint64_t> held_offsets;
  for (uint64_t i = 0; i < 6; ++i) {
    uint64_t offset = 0;
    ASSERT_OK(PublishPattern(producer.get(), i, kFixedBytes, &offset));
    held_offsets.insert(offset);
    ASSERT_OK(consumer->Receive(&message, 1s));
    held.push_back(message.TakeBody());
  }
  ASSERT_EQ(producer->consumers().size(), 1u);
  EXPECT_EQ(producer->consumers()[0].held_blocks, 6u);
  // Many more, read and dropped: twice the fixed blocks.
  uint64_t in_arena = 0;
  for (uint64_t i = 6; i < 6 + 2 * kFixedCount; ++i) {
    uint64_t offset = 0;
    ASSERT_OK(PublishPattern(producer.get(), i, kFixedBytes, &offset));
    in_arena += area.Contains(offset) ? 0 : 1;
    ASSERT_EQ(held_offsets.count(offset), 0u) << "message " << i << " took a held block";
    ASSERT_OK(consumer->Receive(&message, 1s));
    ASSERT_TRUE(CheckPattern(i, message.body())) << i;
    message.Reset();
  }
  EXPECT_EQ(in_arena, 0u);  // the free fixed blocks were enough
  for (uint64_t i = 0; i < held.size(); ++i) {
    EXPECT_TRUE(CheckPattern(i, held[i].data())) << "held body " << i << " was written over";
  }
  // Every fixed block taken: loans go to the arena.
  std::vector<ChannelLoan> loans;
  for (uint32_t i = 0; i < kFixedCount; ++i) {
    ASSERT_OK_AND_ASSIGN(ChannelLoan loan, producer->Loan(kFixedBytes));
    FillPattern(999, loan.data());
    loans.push_back(std::move(loan));
  }
  uint64_t fixed_loans = 0;
  for (const ChannelLoan& l : loans) fixed_loans += area.Contains(l.offset()) ? 1 : 0;
  EXPECT_EQ(fixed_loans, kFixedCount - held.size());
  for (uint64_t i = 0; i < held.size(); ++i) {
    EXPECT_TRUE(CheckPattern(i, held[i].data())) << "held body " << i << " was lent again";
  }
  loans.clear();
  held.clear();
  EXPECT_EQ(producer->consumers()[0].held_blocks, 0u);
  // All of them free again.
  for (uint32_t i = 0; i < kFixedCount; ++i) {
    ASSERT_OK_AND_ASSIGN(ChannelLoan loan, producer->Loan(kFixedBytes));
    EXPECT_TRUE(area.Contains(loan.offset()));
    loans.push_back(std::move(loan));
  }
}

// A message the consumer has not read keeps its block (kBlockProducer):
// the producer fills the slots, and reuses no block of an unread message.
TEST_F(ChannelFixedTest, AnUnreadMessageKeepsItsBlock) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  std::set<uint64_t> offsets;
  for (uint64_t i = 0; i < 8; ++i) {
    uint64_t offset = 0;
    ASSERT_OK(PublishPattern(producer.get(), i, 100, &offset));
    EXPECT_TRUE(offsets.insert(offset).second) << "message " << i << " took a block in use";
  }
  ASSERT_RAISES(kTimedOut, PublishPattern(producer.get(), 8, 100));  // every slot taken
  ChannelMessage message;
  for (uint64_t i = 0; i < 8; ++i) {
    ASSERT_OK(consumer->Receive(&message, 1s));
    ASSERT_EQ(message.user(), i);
    EXPECT_TRUE(CheckPattern(i, message.body())) << i;
  }
}

// kDropOldest: a lapped consumer loses messages but never a body it holds,
// and the messages it then reads are intact.
TEST_F(ChannelFixedTest, DropOldestNeverWritesOverAHeldFixedBlock) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer,
                       ChannelProducer::Create(name, Options(SlowConsumerPolicy::kDropOldest)));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ChannelMessage message;
  ASSERT_OK(PublishPattern(producer.get(), 0, kFixedBytes));
  ASSERT_OK(consumer->Receive(&message, 1s));
  ChannelBlock held = message.TakeBody();
  for (uint64_t i = 1; i < 200; ++i) ASSERT_OK(PublishPattern(producer.get(), i, kFixedBytes));
  EXPECT_GT(producer->stats().dropped, 0u);
  EXPECT_TRUE(CheckPattern(0, held.data()));
  uint64_t read = 0;
  while (true) {
    ASSERT_OK_AND_ASSIGN(bool got, consumer->TryReceive(&message));
    if (!got) break;
    EXPECT_TRUE(CheckPattern(message.user(), message.body())) << message.user();
    ++read;
  }
  EXPECT_EQ(read, 8u);  // the slots' last 8
  EXPECT_EQ(consumer->lost_count(), 199u - 8u);
  held.Reset();
  message.Reset();
  EXPECT_EQ(producer->consumers()[0].held_blocks, 0u);
  EXPECT_EQ(producer->stats().returns, 0u);
}

// A consumer opened from_oldest starts at the oldest message whose fixed
// block still carries it.
TEST_F(ChannelFixedTest, FromOldestStartsAtTheOldestFixedBodyStillThere) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
  for (uint64_t i = 0; i < 20; ++i) ASSERT_OK(PublishPattern(producer.get(), i, 256));
  ChannelConsumerOptions options;
  options.from_oldest = true;
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name, options));
  producer->Poll();
  ChannelMessage message;
  // The slots hold the last 8; every one's block still carries it (16
  // fixed blocks, lent in turn while nobody read).
  for (uint64_t i = 12; i < 20; ++i) {
    ASSERT_OK(consumer->Receive(&message, 1s));
    EXPECT_EQ(message.sequence(), i);
    EXPECT_TRUE(CheckPattern(i, message.body())) << i;
  }
  ASSERT_OK_AND_ASSIGN(bool got, consumer->TryReceive(&message));
  EXPECT_FALSE(got);
  // Once a block of a message still in its slot is lent again, a later
  // from_oldest consumer starts after that message.
  message.Reset();
  for (uint64_t i = 20; i < 40; ++i) {
    ASSERT_OK(PublishPattern(producer.get(), i, 256));
    ASSERT_OK(consumer->Receive(&message, 1s));
    message.Reset();
  }
  ASSERT_OK_AND_ASSIGN(auto late, ChannelConsumer::Open(name, options));
  producer->Poll();
  while (true) {
    ASSERT_OK_AND_ASSIGN(bool more, late->TryReceive(&message));
    if (!more) break;
    EXPECT_TRUE(CheckPattern(message.user(), message.body())) << message.user();
  }
}

// A slot naming a fixed block the channel does not have, or not where that
// block lies, is refused (the message skipped), as a body outside the arena.
TEST_F(ChannelFixedTest, RejectsSlotsNamingAFixedBlockWrongly) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  for (uint64_t i = 0; i < 4; ++i) ASSERT_OK(PublishPattern(producer.get(), i, 64));
  ASSERT_OK_AND_ASSIGN(auto rw, Segment::Open(name, SegmentKind::kChannel));
  const auto* h = reinterpret_cast<internal::ChannelHeaderData*>(rw->data());
  auto slot = [&](uint64_t k) {
    return reinterpret_cast<internal::ChannelSlotData*>(rw->data() + h->slots_offset +
                                                        k * h->slot_size);
  };
  // Message 0: a block beyond the table.
  slot(0)->block.store(internal::PackBlock(internal::kFixedBlockFlag | kFixedCount, 0));
  // Message 1: the right block, the wrong place.
  slot(1)->body_offset.store(slot(1)->body_offset.load() + 64);
  // Message 2: longer than a fixed block.
  slot(2)->body_length.store(kFixedBytes + 1);
  ChannelMessage message;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "fixed block", consumer->Receive(&message, 1s));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "fixed block", consumer->Receive(&message, 1s));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "fixed block", consumer->Receive(&message, 1s));
  ASSERT_OK(consumer->Receive(&message, 1s));
  EXPECT_EQ(message.user(), 3u);
  EXPECT_TRUE(CheckPattern(3, message.body()));
}

// A header whose fixed blocks do not add up is refused at open.
TEST_F(ChannelFixedTest, ConsumerRefusesAHeaderWithFixedBlocksOutOfRange) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
  ASSERT_OK_AND_ASSIGN(auto rw, Segment::Open(name, SegmentKind::kChannel));
  auto* h = reinterpret_cast<internal::ChannelHeaderData*>(rw->data());
  h->fixed_count = internal::kMaxFixedBlocks;  // far more than the segment holds
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "header counts out of range", ChannelConsumer::Open(name));
  h->fixed_count = kFixedCount;
  h->fixed_size = 100;  // not a multiple of 64
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "header counts out of range", ChannelConsumer::Open(name));
  h->fixed_size = kFixedBytes;
  h->fixed_offset += 4096;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "do not match", ChannelConsumer::Open(name));
  h->fixed_offset -= 4096;
  ASSERT_OK(ChannelConsumer::Open(name).status());
}

// Fixed blocks held by bodies that outlive their consumer come back when
// the bodies go; the consumer is then finished.
TEST_F(ChannelFixedTest, HeldFixedBodiesOutliveTheConsumer) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
  std::vector<ChannelBlock> held;
  {
    ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
    ChannelMessage message;
    for (uint64_t i = 0; i < 3; ++i) {
      ASSERT_OK(PublishPattern(producer.get(), i, 300));
      ASSERT_OK(consumer->Receive(&message, 1s));
      held.push_back(message.TakeBody());
    }
  }
  producer->Poll();
  ASSERT_EQ(producer->consumers().size(), 1u);
  EXPECT_TRUE(producer->consumers()[0].closed);
  EXPECT_EQ(producer->consumers()[0].held_blocks, 3u);
  for (uint64_t i = 3; i < 3 + 2 * kFixedCount; ++i) {
    ASSERT_OK(PublishPattern(producer.get(), i, 300));
  }
  for (uint64_t i = 0; i < held.size(); ++i) EXPECT_TRUE(CheckPattern(i, held[i].data())) << i;
  held.clear();
  producer->Poll();
  EXPECT_TRUE(producer->consumers().empty());
  EXPECT_EQ(producer->stats().consumers_finished, 1u);
}

// A ChannelWriter (one length, payload, user word and shape, checked once)
// lends fixed blocks and publishes them as Loan and Publish do: the
// consumer sees each message whole, with the writer's numbers; a block kept
// by Publish(held) is never lent again while held; with no fixed block free
// (or a length past their size) it takes the arena's, as Loan does.
TEST_F(ChannelFixedTest, AWriterOfOneFormLoansAndPublishesAsLoanAndPublishDo) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  const FixedArea area = AreaOf(name);
  const std::vector<std::byte> shape_bytes(40, std::byte{7});
  ASSERT_OK_AND_ASSIGN(uint32_t shape, producer->AddShape(shape_bytes));
  const std::vector<std::byte> payload(12, std::byte{0x5a});
  ASSERT_OK_AND_ASSIGN(ChannelWriter writer, producer->NewWriter(300, payload, 77, shape));
  EXPECT_EQ(writer.length(), 300u);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "nothing to publish", writer.Publish());
  ChannelMessage message;
  ChannelLoan kept;
  for (uint64_t i = 0; i < 100; ++i) {
    ASSERT_OK(writer.Loan());
    ASSERT_TRUE(writer.loaned());
    ASSERT_EQ(writer.data().size(), 300u);
    EXPECT_TRUE(area.Contains(writer.offset())) << i;
    FillPattern(i, writer.data());
    const uint64_t offset = writer.offset();
    if (i == 0) {
      ASSERT_RAISES_WITH_MESSAGE(kInvalid, "not published", writer.Loan());
    }
    if (i == 10) {
      ASSERT_OK(writer.Publish(&kept));
      EXPECT_TRUE(kept.valid());
      EXPECT_EQ(kept.offset(), offset);
    } else {
      ASSERT_OK(writer.Publish());
    }
    EXPECT_FALSE(writer.loaned());
    ASSERT_OK(consumer->Receive(&message, 1s));
    ASSERT_EQ(message.sequence(), i);
    ASSERT_EQ(message.user(), 77u);
    ASSERT_EQ(message.shape(), shape);
    ASSERT_EQ(message.body_offset(), offset);
    ASSERT_EQ(message.payload().size(), payload.size());
    EXPECT_TRUE(std::equal(payload.begin(), payload.end(), message.payload().begin()));
    ASSERT_TRUE(CheckPattern(i, message.body())) << i;
    message.Reset();
    if (i > 10) {
      EXPECT_NE(offset, kept.offset()) << "a kept block is not lent again";
    }
  }
  EXPECT_TRUE(CheckPattern(10, kept.data()));
  kept.Reset();
  EXPECT_EQ(producer->stats().returns, 0u);
  // No fixed block free (the consumer holds them all): the arena's.
  std::vector<ChannelBlock> held;
  uint64_t in_arena = 0;
  for (uint64_t i = 100; i < 100 + kFixedCount + 2; ++i) {
    ASSERT_OK(writer.Loan());
    if (!area.Contains(writer.offset())) ++in_arena;
    FillPattern(i, writer.data());
    ASSERT_OK(writer.Publish());
    ASSERT_OK(consumer->Receive(&message, 1s));
    ASSERT_TRUE(CheckPattern(i, message.body())) << i;
    held.push_back(message.TakeBody());
  }
  EXPECT_GE(in_arena, 2u);
  held.clear();
  // A length past the fixed blocks' size: always the arena's.
  ASSERT_OK_AND_ASSIGN(ChannelWriter large, producer->NewWriter(kFixedBytes + 1, {}, 1, 0));
  ASSERT_OK(large.Loan());
  EXPECT_FALSE(area.Contains(large.offset()));
  ASSERT_OK(large.Publish());
  ASSERT_OK(consumer->Receive(&message, 1s));
  EXPECT_EQ(message.body().size(), kFixedBytes + 1);
  message.Reset();
  // Checked once, when made; and every call after Close is refused.
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "inline payload",
                             producer->NewWriter(64, std::vector<std::byte>(65), 0, 0));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "was not added", producer->NewWriter(64, {}, 0, shape + 1));
  ASSERT_RAISES(kCapacityError, producer->NewWriter(uint64_t{1} << 20, {}, 0, 0));
  ASSERT_OK(writer.Loan());
  producer->Close();
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "closed", writer.Publish());
  EXPECT_TRUE(writer.loaned()) << "a refused publish leaves the block lent";
  ChannelWriter empty;
  ASSERT_RAISES(kInvalid, empty.Loan());
}

// A writer with no inline bytes takes its common case inline (ChannelWriter::
// Loan and Publish over the producer's hot state, producer_hot.h): every
// message arrives whole with the writer's numbers, a held block is never
// lent again, a consumer that registers is accepted by the next publish,
// and a consumer a whole ring behind makes the publish wait (TimedOut, the
// block left lent) as the general way does.
TEST_F(ChannelFixedTest, AnInlineWriterKeepsTheGeneralWaysGuarantees) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  const FixedArea area = AreaOf(name);
  ASSERT_OK_AND_ASSIGN(uint32_t shape, producer->AddShape(std::vector<std::byte>(40)));
  ASSERT_OK_AND_ASSIGN(ChannelWriter writer, producer->NewWriter(kFixedBytes, {}, 77, shape));
  ChannelMessage message;
  std::vector<ChannelBlock> held;
  std::set<uint64_t> held_offsets;
  uint64_t sequence = 0;
  // Publishes message `sequence` (its pattern) through the writer.
  auto publish = [&]() -> Status {
    ALKAID_RETURN_NOT_OK(writer.Loan());
    if (held_offsets.count(writer.offset()) != 0) {
      return Status::Invalid("message ", sequence, " took a held block");
    }
    FillPattern(sequence, writer.data());
    return writer.Publish();
  };
  // Receives it whole.
  auto receive = [&](ChannelConsumer* c) {
    ASSERT_OK(c->Receive(&message, 1s));
    ASSERT_EQ(message.sequence(), sequence);
    ASSERT_EQ(message.user(), 77u);
    ASSERT_EQ(message.shape(), shape);
    ASSERT_EQ(message.payload().size(), 0u);
    ASSERT_TRUE(area.Contains(message.body_offset())) << sequence;
    ASSERT_TRUE(CheckPattern(sequence, message.body())) << sequence;
  };
  for (; sequence < 100; ++sequence) {
    ASSERT_OK(publish());
    ASSERT_NO_FATAL_FAILURE(receive(consumer.get()));
    if (sequence % 20 == 3) {
      held_offsets.insert(message.body_offset());
      held.push_back(message.TakeBody());
    } else {
      message.Reset();
    }
  }
  for (uint64_t i = 0; i < held.size(); ++i) {
    EXPECT_TRUE(CheckPattern(20 * i + 3, held[i].data())) << "held body " << i << " written over";
  }
  held.clear();  // free to be lent again
  held_offsets.clear();
  EXPECT_EQ(producer->stats().published, 100u);
  EXPECT_EQ(producer->stats().published_bytes, 100u * kFixedBytes);
  EXPECT_EQ(producer->stats().returns, 0u);
  // A consumer that registers now is accepted by the next publish, and
  // receives from it on.
  ASSERT_OK_AND_ASSIGN(auto second, ChannelConsumer::Open(name));
  ASSERT_OK(publish());
  ASSERT_NO_FATAL_FAILURE(receive(consumer.get()));
  ASSERT_NO_FATAL_FAILURE(receive(second.get()));
  message.Reset();
  ++sequence;
  // The second reads no more: a ring later the publish waits for it.
  for (uint32_t i = 0; i < 8; ++i, ++sequence) {
    ASSERT_OK(publish());
    ASSERT_NO_FATAL_FAILURE(receive(consumer.get()));
    message.Reset();
  }
  ASSERT_OK(writer.Loan());
  FillPattern(sequence, writer.data());
  ASSERT_RAISES(kTimedOut, writer.Publish());
  EXPECT_TRUE(writer.loaned()) << "a publish that timed out leaves the block lent";
  for (uint32_t i = 0; i < 8; ++i) {
    ASSERT_OK(second->Receive(&message, 1s));
    EXPECT_TRUE(CheckPattern(message.sequence(), message.body())) << message.sequence();
  }
  message.Reset();
  ASSERT_OK(writer.Publish());
  ASSERT_NO_FATAL_FAILURE(receive(consumer.get()));
  ASSERT_NO_FATAL_FAILURE(receive(second.get()));
  message.Reset();
  EXPECT_EQ(producer->stats().published, sequence + 1);
}

// The inline publish over a slot whose old message had a block of the
// arena goes the general way, which lets the slot's reference go: once the
// consumer returned them, the whole arena is free again.
TEST_F(ChannelFixedTest, AnInlinePublishLetsGoOfTheArenaBlockInItsSlot) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  const FixedArea area = AreaOf(name);
  ASSERT_OK_AND_ASSIGN(ChannelWriter writer, producer->NewWriter(kFixedBytes, {}, 5, 0));
  ChannelMessage message;
  // Bodies of the arena in every slot (larger than a fixed block), read.
  for (uint64_t i = 0; i < 8; ++i) {
    uint64_t offset = 0;
    ASSERT_OK(PublishPattern(producer.get(), i, kFixedBytes + 1, &offset));
    ASSERT_FALSE(area.Contains(offset));
    ASSERT_OK(consumer->Receive(&message, 1s));
    message.Reset();
  }
  // The writer's fixed blocks over them.
  for (uint64_t i = 8; i < 16; ++i) {
    ASSERT_OK(writer.Loan());
    ASSERT_TRUE(area.Contains(writer.offset()));
    FillPattern(i, writer.data());
    ASSERT_OK(writer.Publish());
    ASSERT_OK(consumer->Receive(&message, 1s));
    ASSERT_TRUE(CheckPattern(i, message.body())) << i;
    message.Reset();
  }
  producer->CollectReturns();
  const ChannelStats stats = producer->stats();
  EXPECT_EQ(stats.returns, 8u);
  EXPECT_EQ(stats.arena_bytes_free, stats.arena_bytes) << "a slot kept its arena block";
}

// A consumer asleep is woken by the inline publish (its `waiting` word read
// after the write_sequence store; the wake itself out of line), each round.
TEST_F(ChannelFixedTest, AnInlinePublishWakesASleepingConsumer) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Options()));
  ChannelConsumerOptions co;
  co.wait_mode = WaitMode::kBlock;
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name, co));
  const auto names = testing::SegmentsWithPrefix(name + ".c");
  ASSERT_EQ(names.size(), 1u);
  ASSERT_OK_AND_ASSIGN(auto own, Segment::Open(names[0], SegmentKind::kChannelConsumer,
                                               SegmentOpenOptions{.read_only = true}));
  ASSERT_OK_AND_ASSIGN(ChannelWriter writer, producer->NewWriter(64, {}, 0, 0));
  ChannelMessage message;
  ASSERT_OK(writer.Loan());
  ASSERT_OK(writer.Publish());  // accepts the consumer
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
    ASSERT_OK(writer.Loan());
    ASSERT_OK(writer.Publish());
    reader.join();
    ASSERT_OK(received);
    EXPECT_EQ(message.sequence(), round);
  }
  // Each round's publish found the consumer asleep and woke it (a round
  // whose consumer woke from a slice just then may not need to).
  EXPECT_GE(header->data_futex.load() - futex_before, 1u);
}

// kDropOldest: the inline loan reuses the block of an overwritten message
// the lapped consumer never read (not one it holds), and the writer
// publishes on without waiting.
TEST_F(ChannelFixedTest, AnInlineWriterWithDropOldestNeverWaits) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer,
                       ChannelProducer::Create(name, Options(SlowConsumerPolicy::kDropOldest)));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ASSERT_OK_AND_ASSIGN(ChannelWriter writer, producer->NewWriter(kFixedBytes, {}, 0, 0));
  ChannelMessage message;
  ASSERT_OK(writer.Loan());
  FillPattern(0, writer.data());
  ASSERT_OK(writer.Publish());
  ASSERT_OK(consumer->Receive(&message, 1s));
  const uint64_t held_offset = message.body_offset();
  ChannelBlock held = message.TakeBody();
  for (uint64_t i = 1; i < 200; ++i) {
    ASSERT_OK(writer.Loan());
    ASSERT_NE(writer.offset(), held_offset) << "message " << i << " took the held block";
    FillPattern(i, writer.data());
    ASSERT_OK(writer.Publish());
  }
  EXPECT_TRUE(CheckPattern(0, held.data()));
  uint64_t read = 0;
  while (true) {
    ASSERT_OK_AND_ASSIGN(bool got, consumer->TryReceive(&message));
    if (!got) break;
    EXPECT_TRUE(CheckPattern(message.sequence(), message.body())) << message.sequence();
    ++read;
  }
  EXPECT_EQ(read, 8u);
  EXPECT_EQ(consumer->lost_count(), 199u - 8u);
}

// Layout version 5: a consumer's hold counts of 64 fixed blocks lie in 4
// lines of 16, block i's at word (i mod 4) * 16 + i / 4, so that
// consecutive blocks (the order the producer lends them in) have their
// counts in different lines. Each receive (the inline one and the out-of-line one)
// counts its block there and the drop clears it; the producer reads it
// there: a body held lends none of the later messages its block.
TEST_F(ChannelFixedTest, HoldCountsOfConsecutiveBlocksLieInDifferentLines) {
  constexpr uint32_t kBlocks = 64;
  const std::string name = NewName("ch");
  ChannelOptions options = Options();
  options.fixed_block_count = kBlocks;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, options));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  const auto names = testing::SegmentsWithPrefix(name + ".c");
  ASSERT_EQ(names.size(), 1u);
  ASSERT_OK_AND_ASSIGN(auto own, Segment::Open(names[0], SegmentKind::kChannelConsumer,
                                               SegmentOpenOptions{.read_only = true}));
  ASSERT_OK_AND_ASSIGN(auto channel, Segment::Open(name, SegmentKind::kChannel,
                                                   SegmentOpenOptions{.read_only = true}));
  const auto* header = reinterpret_cast<const internal::ChannelHeaderData*>(channel->data());
  const auto* own_header = reinterpret_cast<const internal::ConsumerSegHeaderData*>(own->data());
  const uint64_t holds_at =
      sizeof(internal::ConsumerSegHeaderData) + uint64_t{own_header->return_capacity} * 8;
  // Four whole lines of counts, right after the return queue.
  ASSERT_GE(own->data_size(), holds_at + uint64_t{4} * 64);
  const auto* holds = reinterpret_cast<const std::atomic<uint32_t>*>(own->data() + holds_at);
  auto count_sum = [&] {
    uint32_t sum = 0;
    for (uint32_t w = 0; w < 4 * 16; ++w) sum += holds[w].load();
    return sum;
  };
  ASSERT_OK_AND_ASSIGN(ChannelWriter writer, producer->NewWriter(kFixedBytes, {}, 0, 0));
  ChannelMessage message;
  uint64_t previous_block = 99;
  uint64_t previous_line = 99;
  for (uint64_t i = 0; i < uint64_t{3} * kBlocks; ++i) {
    ASSERT_OK(writer.Loan());
    FillPattern(i, writer.data());
    ASSERT_OK(writer.Publish());
    if (i % 2 == 0) {
      ASSERT_OK(consumer->Receive(&message, 1s));  // the out-of-line receive
    } else {
      bool got = false;
      ASSERT_OK(consumer->TryReceive(&message, &got));  // the inline one
      ASSERT_TRUE(got);
    }
    ASSERT_EQ(message.sequence(), i);
    const uint64_t block = (message.body_offset() - header->fixed_offset) / kFixedBytes;
    ASSERT_LT(block, kBlocks);
    const uint64_t word = (block % 4) * 16 + block / 4;
    EXPECT_EQ(holds[word].load(), 1u) << "message " << i << ", block " << block;
    EXPECT_EQ(count_sum(), 1u) << "message " << i;
    if (block == previous_block + 1) {
      EXPECT_NE(word / 16, previous_line) << "message " << i << ": the previous block's line";
    }
    previous_block = block;
    previous_line = word / 16;
    message.Reset();
    EXPECT_EQ(count_sum(), 0u) << "message " << i;
  }
  // A held body: the producer finds its count and lends its block to none
  // of twice the blocks' messages after it.
  ASSERT_OK(writer.Loan());
  FillPattern(1000, writer.data());
  const uint64_t held_offset = writer.offset();
  ASSERT_OK(writer.Publish());
  ASSERT_OK(consumer->Receive(&message, 1s));
  ChannelBlock held = message.TakeBody();
  for (uint64_t i = 0; i < uint64_t{2} * kBlocks; ++i) {
    ASSERT_OK(writer.Loan());
    ASSERT_NE(writer.offset(), held_offset) << "message " << i << " took the held block";
    FillPattern(i, writer.data());
    ASSERT_OK(writer.Publish());
    ASSERT_OK(consumer->Receive(&message, 1s));
    message.Reset();
  }
  EXPECT_TRUE(CheckPattern(1000, held.data()));
}

}  // namespace
}  // namespace alkaid::shm
