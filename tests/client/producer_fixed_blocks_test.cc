// Fixed blocks through a real broker (ProducerOptions::fixed_block_bytes;
// docs/SHM_LAYOUT.md, "Fixed blocks"): a producer's FixedShapeWriter
// publishes into them and its consumers receive, batches outlive their
// consumer without being rewritten, a consumer SIGKILLed while holding
// some gives them back, and bad values are refused by the client before the
// broker is asked and by the broker against its limit.
//
// What tells a fixed block from an arena block here is ProducerStats::
// arena_bytes_free: a writer's batch held by a consumer takes no arena
// space when it lies in a fixed block, and its body's bytes when it does
// not (each test shows the producer without fixed blocks differs).

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/array.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "test_util.h"

namespace alkaid::client {
namespace {

using namespace std::chrono_literals;
using broker::testing::BrokerProcess;
using broker::testing::ConsumerOn;
using broker::testing::Pipe;
using broker::testing::WaitForConsumers;
using broker::testing::WaitUntil;

constexpr int64_t kRows = 64;  // 512 bytes of int64 values: one fixed block

format::SchemaPtr ValueSchema() {
  return format::schema({format::field("v", format::int64(), false)});
}

ProducerOptions FixedOn(const BrokerProcess& broker, uint32_t count) {
  ProducerOptions po;
  po.socket_path = broker.socket();
  po.topic.arena_bytes = 1 << 20;
  po.topic.slot_count = 64;
  po.fixed_block_bytes = Producer::FixedShapeBodyBytes(*ValueSchema(), kRows).ValueOrDie();
  po.fixed_block_count = count;
  po.wait_for_consumers = 10s;
  return po;
}

// Batch `n` through `writer`: value r of it is n * 1000 + r.
Status PublishBatch(FixedShapeWriter* writer, int64_t n) {
  ALKAID_RETURN_NOT_OK(writer->Begin(FixedShapeWriter::Fill::kNone));
  auto* v = reinterpret_cast<int64_t*>(writer->buffer(1).data());
  for (int64_t r = 0; r < kRows; ++r) v[r] = n * 1000 + r;
  return writer->Publish();
}

// True if `batch` is batch `n` as PublishBatch wrote it.
bool IsBatch(const format::RecordBatch& batch, int64_t n) {
  if (batch.num_rows() != kRows || batch.column_data(0)->length != kRows) return false;
  // The column's values as laid out, read through the batch's own data:
  // column(0) makes a new Array each call, and a reference into it would
  // not outlive the statement that made it.
  const int64_t* v = batch.column_data(0)->GetValues<int64_t>(1);
  for (int64_t r = 0; r < kRows; ++r) {
    if (v[r] != n * 1000 + r) return false;
  }
  return true;
}

uint64_t ArenaFree(Producer* producer) {
  producer->Poll();
  return producer->stats().arena_bytes_free;
}

// Publishes batches `first` to `first + 7` and has `live` hold all eight
// at once: the 8 fixed blocks serve them, and the arena keeps the
// `free_before` bytes it had. Then lets them go, closes and ends.
void HoldAllEightThenClose(Producer* producer, std::unique_ptr<FixedShapeWriter> writer,
                           std::unique_ptr<Consumer> live, int64_t first, uint64_t free_before) {
  std::vector<format::RecordBatchPtr> held;
  for (int64_t n = first; n < first + 8; ++n) {
    ASSERT_OK(PublishBatch(writer.get(), n));
    ASSERT_OK_AND_ASSIGN(auto batch, live->Next(10s));
    ASSERT_TRUE(IsBatch(*batch, n)) << batch->ToString();
    held.push_back(std::move(batch));
  }
  EXPECT_EQ(ArenaFree(producer), free_before);
  EXPECT_EQ(producer->stats().held_by_consumers, 8u);
  held.clear();
  writer.reset();
  ASSERT_OK(live->Close());
  ASSERT_OK(producer->Close());
}

// A writer's batches in fixed blocks: sized by FixedShapeBodyBytes (512),
// granted and listed by the broker (counted in the producer's shm_bytes),
// received by two consumers with their values, and held by them without
// taking arena space, where a producer without fixed blocks gives up 512
// bytes per held batch. Once released, more batches than there are blocks
// go through the same blocks.
TEST(ProducerFixedBlocksTest, AWritersBatchesLieInFixedBlocksAndArrive) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ProducerOptions plain_options = FixedOn(broker, 0);
  plain_options.fixed_block_bytes = 0;
  for (const bool fixed : {true, false}) {
    SCOPED_TRACE(fixed ? "fixed blocks" : "without");
    const std::string topic = fixed ? "fixed" : "plain";
    ASSERT_OK_AND_ASSIGN(
        auto producer,
        Producer::Open(topic, ValueSchema(), fixed ? FixedOn(broker, 32) : plain_options));
    EXPECT_EQ(producer->fixed_block_bytes(), fixed ? 512u : 0u);
    EXPECT_EQ(producer->fixed_block_count(), fixed ? 32u : 0u);
    ASSERT_OK_AND_ASSIGN(auto a, Consumer::Open(topic, ConsumerOn(broker)));
    ASSERT_OK_AND_ASSIGN(auto b, Consumer::Open(topic, ConsumerOn(broker)));
    ASSERT_OK_AND_ASSIGN(auto writer, producer->NewFixedShapeWriter(kRows));
    EXPECT_LE(writer->body_length(), 512u);
    const uint64_t free_before = ArenaFree(producer.get());
    std::vector<format::RecordBatchPtr> held;
    for (int64_t n = 0; n < 10; ++n) {
      ASSERT_OK(PublishBatch(writer.get(), n));
      for (Consumer* c : {a.get(), b.get()}) {
        ASSERT_OK_AND_ASSIGN(auto batch, c->Next(10s));
        EXPECT_TRUE(IsBatch(*batch, n)) << batch->ToString();
        held.push_back(std::move(batch));
      }
    }
    const uint64_t free_held = ArenaFree(producer.get());
    EXPECT_EQ(producer->stats().held_by_consumers, 20u);
    if (fixed) {
      EXPECT_EQ(free_held, free_before);
    } else {
      EXPECT_LE(free_held + 10 * 512, free_before);
    }
    held.clear();
    for (int64_t n = 10; n < 200; ++n) {
      ASSERT_OK(PublishBatch(writer.get(), n));
      for (Consumer* c : {a.get(), b.get()}) {
        ASSERT_OK_AND_ASSIGN(auto batch, c->Next(10s));
        ASSERT_TRUE(IsBatch(*batch, n)) << batch->ToString();
      }
    }
    // The broker lists the producer's blocks as it granted them.
    if (fixed) {
      EXPECT_EQ(ArenaFree(producer.get()), free_before);
      ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
      ASSERT_OK_AND_ASSIGN(auto topics, admin->ListTopics());
      ASSERT_EQ(topics.size(), 1u);
      ASSERT_EQ(topics[0].producer_list.size(), 1u);
      EXPECT_EQ(topics[0].producer_list[0].fixed_block_bytes, 512u);
      EXPECT_EQ(topics[0].producer_list[0].fixed_block_count, 32u);
    }
    writer.reset();
    ASSERT_OK(a->Close());
    ASSERT_OK(b->Close());
    ASSERT_OK(producer->Close());
  }
}

// Batches a consumer received outlive it (closed and destroyed) and keep
// their values while the producer goes on through every other block more
// than a dozen times: a block a closed consumer still holds is never
// rewritten. Once they are dropped, the blocks come back: a live consumer
// can hold all 8 at once with no arena space taken.
TEST(ProducerFixedBlocksTest, BatchesOutliveTheirConsumerUnrewrittenAndTheirBlocksComeBack) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", ValueSchema(), FixedOn(broker, 8)));
  ASSERT_EQ(producer->fixed_block_count(), 8u);
  ASSERT_OK_AND_ASSIGN(auto gone, Consumer::Open("t", ConsumerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto live, Consumer::Open("t", ConsumerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto writer, producer->NewFixedShapeWriter(kRows));
  const uint64_t free_before = ArenaFree(producer.get());
  std::vector<format::RecordBatchPtr> kept;
  for (int64_t n = 0; n < 5; ++n) {
    ASSERT_OK(PublishBatch(writer.get(), n));
    ASSERT_OK_AND_ASSIGN(auto batch, gone->Next(10s));
    kept.push_back(std::move(batch));
    ASSERT_OK_AND_ASSIGN(auto seen, live->Next(10s));
  }
  ASSERT_OK(gone->Close());
  gone.reset();
  for (int64_t n = 5; n < 50; ++n) {
    ASSERT_OK(PublishBatch(writer.get(), n));
    ASSERT_OK_AND_ASSIGN(auto batch, live->Next(10s));
    ASSERT_TRUE(IsBatch(*batch, n));
  }
  for (int64_t n = 0; n < 5; ++n) EXPECT_TRUE(IsBatch(*kept[n], n)) << kept[n]->ToString();
  kept.clear();
  HoldAllEightThenClose(producer.get(), std::move(writer), std::move(live), 50, free_before);
}

// A consumer process SIGKILLed while it holds 6 of the 8 fixed blocks: the
// producer reclaims it (its pid checks in Poll) and stops reading its hold
// counts, so the 6 blocks serve again: a live consumer then holds all 8
// batches at once with no arena space taken.
TEST(ProducerFixedBlocksTest, AKilledConsumersFixedBlocksComeBack) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  TopicOptions topic;
  topic.arena_bytes = 1 << 20;
  topic.slot_count = 64;
  ASSERT_OK(admin->CreateTopic("t", ValueSchema(), topic).status());
  constexpr int kHeld = 6;
  Pipe to_parent;
  const pid_t child = broker::testing::ForkTestChild();
  if (child == 0) {
    auto consumer = Consumer::Open("t", ConsumerOn(broker));
    if (!consumer.ok()) ::_exit(1);
    std::vector<format::RecordBatchPtr> held;
    for (int64_t n = 0; n < kHeld; ++n) {
      auto batch = (*consumer)->Next(30s);
      if (!batch.ok() || !IsBatch(**batch, n)) ::_exit(2);
      held.push_back(*batch);
    }
    to_parent.Put('h');
    while (true) ::pause();
  }
  // Only the child writes: a child that fails ends the parent's Get (0).
  ::close(to_parent.fds[1]);
  to_parent.fds[1] = -1;
  ASSERT_TRUE(WaitForConsumers(broker.socket(), "t", 1));
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", ValueSchema(), FixedOn(broker, 8)));
  ASSERT_EQ(producer->fixed_block_count(), 8u);
  ASSERT_OK_AND_ASSIGN(auto writer, producer->NewFixedShapeWriter(kRows));
  const uint64_t free_before = ArenaFree(producer.get());
  for (int64_t n = 0; n < kHeld; ++n) ASSERT_OK(PublishBatch(writer.get(), n));
  ASSERT_EQ(to_parent.Get(), 'h');
  EXPECT_EQ(ArenaFree(producer.get()), free_before);
  EXPECT_EQ(producer->stats().held_by_consumers, static_cast<uint64_t>(kHeld));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  EXPECT_TRUE(WaitUntil([&] {
    producer->Poll();
    return producer->stats().dead_consumers_detached == 1;
  }));
  EXPECT_EQ(broker::testing::Wait(child), -SIGKILL);
  ASSERT_OK_AND_ASSIGN(auto live, Consumer::Open("t", ConsumerOn(broker)));
  // Opened after the producer: it reads from the next batch on.
  HoldAllEightThenClose(producer.get(), std::move(writer), std::move(live), kHeld, free_before);
}

// A broker killed and started again: the writer goes on through the blocks
// meanwhile, and the producer re-registers its channel with what it has, so
// that the new broker counts and lists its blocks as the first one did.
TEST(ProducerFixedBlocksTest, AReRegisteredProducersBlocksAreCountedAgain) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", ValueSchema(), FixedOn(broker, 16)));
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("t", ConsumerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto writer, producer->NewFixedShapeWriter(kRows));
  const uint64_t free_before = ArenaFree(producer.get());
  const auto listed = [&](uint64_t* shm_bytes) {
    auto admin = BrokerClient::Connect(broker.socket());
    if (!admin.ok()) return false;
    auto topics = (*admin)->ListTopics();
    if (!topics.ok() || topics->size() != 1 || (*topics)[0].producer_list.size() != 1) return false;
    const TopicProducerStatus& p = (*topics)[0].producer_list[0];
    *shm_bytes = p.shm_bytes;
    return p.fixed_block_bytes == 512 && p.fixed_block_count == 16;
  };
  uint64_t shm_first = 0;
  ASSERT_TRUE(listed(&shm_first));
  broker.Kill();
  for (int64_t n = 0; n < 20; ++n) {
    ASSERT_OK(PublishBatch(writer.get(), n));
    ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(10s));
    ASSERT_TRUE(IsBatch(*batch, n));
  }
  ASSERT_TRUE(broker.Start());
  uint64_t shm_again = 0;
  EXPECT_TRUE(WaitUntil([&] {
    producer->Poll();
    return producer->stats().reregistrations >= 1 && listed(&shm_again);
  }));
  EXPECT_EQ(shm_again, shm_first);
  for (int64_t n = 20; n < 40; ++n) {
    ASSERT_OK(PublishBatch(writer.get(), n));
    ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(10s));
    ASSERT_TRUE(IsBatch(*batch, n));
  }
  EXPECT_EQ(ArenaFree(producer.get()), free_before);
  writer.reset();
  ASSERT_OK(consumer->Close());
  ASSERT_OK(producer->Close());
}

// Bad values never reach a broker: the client refuses them before it
// connects (the socket here answers nothing, so any other failure would be
// an IOError), naming the field and the bound.
TEST(ProducerFixedBlocksTest, HostileValuesAreRefusedBeforeTheBrokerIsAsked) {
  ProducerOptions po;
  po.socket_path = "/nonexistent/alkaid-fixed-blocks.sock";
  const struct {
    uint64_t bytes;
    uint32_t count;
    const char* message;
  } hostile[] = {
      {0, 8, "ProducerOptions: fixed_block_count 8 without fixed_block_bytes"},
      {(uint64_t{1} << 30) + 64, 1, "at most 1073741824 bytes"},
      {64, (uint32_t{1} << 20) + 1, "at most 1048576 blocks"},
      {uint64_t{1} << 30, uint32_t{1} << 20, "more than a channel's 549755813888"},
  };
  for (const auto& h : hostile) {
    po.fixed_block_bytes = h.bytes;
    po.fixed_block_count = h.count;
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, h.message, Producer::Open("t", ValueSchema(), po));
  }
  po.fixed_block_bytes = 512;
  po.fixed_block_count = 0;
  EXPECT_EQ(Producer::Open("t", ValueSchema(), po).status().code(), StatusCode::kIOError);
  // The size helper: fixed-width columns only, each padded to 64.
  ASSERT_OK_AND_ASSIGN(uint64_t bytes, Producer::FixedShapeBodyBytes(*ValueSchema(), 64));
  EXPECT_EQ(bytes, 512u);
  ASSERT_OK_AND_ASSIGN(bytes, Producer::FixedShapeBodyBytes(*ValueSchema(), 65));
  EXPECT_EQ(bytes, 576u);
  EXPECT_EQ(Producer::FixedShapeBodyBytes(*format::schema({format::field("s", format::utf8())}), 4)
                .status()
                .code(),
            StatusCode::kNotImplemented);
}

// The broker counts the fixed area against its shm limit: a producer whose
// blocks do not fit is refused at Open with CapacityError naming them; the
// same producer without them attaches.
TEST(ProducerFixedBlocksTest, BlocksBeyondTheBrokersLimitAreRefused) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start({"--shm-limit", "16777216"}));
  ProducerOptions po = FixedOn(broker, 64);
  po.fixed_block_bytes = 1 << 20;  // 64 MiB of blocks
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "(64 fixed blocks of 1048576",
                             Producer::Open("t", ValueSchema(), po));
  po.fixed_block_bytes = 0;
  po.fixed_block_count = 0;
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", ValueSchema(), po));
  EXPECT_EQ(producer->fixed_block_bytes(), 0u);
  ASSERT_OK(producer->Close());
}

}  // namespace
}  // namespace alkaid::client
