// Dictionary-encoded columns through a channel: dictionary messages (whole,
// deltas, replacements) travel before the batches that need them; a late
// joiner and a reader that lost messages take the producer's replay of the
// current dictionaries and decode every batch they return with the
// dictionaries it was published with; batches before the replay a reader
// could not decode are counted as lost; a hostile replay is an error.

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/array.h"
#include "batch_layout_internal.h"
#include "client_test_util.h"
#include "dictionary_script.h"

namespace alkaid::client {
namespace {

using namespace std::chrono_literals;
using format::RecordBatchPtr;
using testing::Channel;

using alkaid::testing::BatchId;
using alkaid::testing::ChangesDictionary;
using alkaid::testing::IsBatch;
using alkaid::testing::Script;
using alkaid::testing::WordSchema;

class DictionaryChannelTest : public ::testing::Test {
 protected:
  void Open(shm::ChannelOptions options = {}) {
    options.accept_on_publish = false;  // the publisher accepts, then replays
    ASSERT_OK(ch_.Create(8 << 20, options));
    ASSERT_OK_AND_ASSIGN(publisher_, BatchPublisher::Create(ch_.producer.get(), WordSchema()));
  }
  std::unique_ptr<BatchSubscriber> Subscribe(bool from_oldest = false) {
    SubscriberOptions options;
    options.consumer.from_oldest = from_oldest;
    auto s = BatchSubscriber::Open(ch_.name, WordSchema(), options);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(s).ValueOrDie() : nullptr;
  }
  void PublishScript(int64_t from, int64_t to) {
    for (int64_t b = from; b < to; ++b) {
      ASSERT_OK_AND_ASSIGN(auto batch, script_.Build(b));
      ASSERT_OK(publisher_->PublishCopy(*batch));
    }
  }

  Channel ch_;
  std::unique_ptr<BatchPublisher> publisher_;
  Script script_;
};

TEST_F(DictionaryChannelTest, WholeDeltaAndReplacementDictionariesArriveInOrder) {
  Open();
  auto subscriber = Subscribe();
  uint64_t changes = 0, deltas = 0;
  for (int64_t b = 0; b < 30; ++b) {
    ASSERT_OK_AND_ASSIGN(auto batch, script_.Build(b));
    ASSERT_OK(publisher_->PublishCopy(*batch));
    if (ChangesDictionary(b)) {
      ++changes;
      if (b % 10 != 0) ++deltas;
    }
    ASSERT_OK_AND_ASSIGN(ReceivedBatch got, subscriber->Receive(1s));
    ASSERT_NE(got.batch, nullptr);
    EXPECT_TRUE(IsBatch(*got.batch, b));
    EXPECT_EQ(got.lost_before, 0u);
  }
  EXPECT_EQ(publisher_->stats().dictionary_batches, changes);
  EXPECT_EQ(publisher_->stats().dictionary_deltas, deltas);
  // One replay, for the subscriber accepted at the first batch: the
  // dictionary and the end marker.
  EXPECT_EQ(publisher_->stats().dictionary_replays, 1u);
  EXPECT_EQ(publisher_->messages(), 30 + changes + 2);
  // It read from the channel's first message: it knew the state, applied
  // every dictionary message and skipped the replay.
  EXPECT_EQ(subscriber->dictionary_stats().messages_applied, changes);
  EXPECT_EQ(subscriber->dictionary_stats().replays_loaded, 0u);
  EXPECT_EQ(subscriber->dictionary_stats().undecodable_batches, 0u);
}

TEST_F(DictionaryChannelTest, LateJoinersTakeTheReplayThenFollowTheChannel) {
  Open();
  PublishScript(0, 15);
  auto mid_generation = Subscribe();  // joins before batch 15 (no change)
  PublishScript(15, 20);
  auto at_replacement = Subscribe();  // its first batch replaces the dictionary
  PublishScript(20, 30);
  for (int64_t b = 15; b < 30; ++b) {
    ASSERT_OK_AND_ASSIGN(ReceivedBatch got, mid_generation->Receive(1s));
    EXPECT_TRUE(IsBatch(*got.batch, b));
    EXPECT_EQ(got.lost_before, 0u);
  }
  for (int64_t b = 20; b < 30; ++b) {
    ASSERT_OK_AND_ASSIGN(ReceivedBatch got, at_replacement->Receive(1s));
    EXPECT_TRUE(IsBatch(*got.batch, b));
    EXPECT_EQ(got.lost_before, 0u);
  }
  EXPECT_EQ(mid_generation->dictionary_stats().replays_loaded, 1u);
  EXPECT_GT(mid_generation->dictionary_stats().messages_applied, 0u);
  EXPECT_EQ(at_replacement->dictionary_stats().replays_loaded, 1u);
  EXPECT_EQ(mid_generation->dictionary_stats().undecodable_batches, 0u);
  EXPECT_EQ(at_replacement->dictionary_stats().undecodable_batches, 0u);
  // A replay per joiner (the first batch had no consumer).
  EXPECT_EQ(publisher_->stats().dictionary_replays, 2u);
}

// Reads everything left in the channel: every batch returned is checked;
// returns (batches returned, lost_before summed, last batch id).
struct Drained {
  uint64_t returned = 0;
  uint64_t lost = 0;
  int64_t last = -1;
};
Drained DrainChecked(BatchSubscriber* subscriber) {
  Drained d;
  while (true) {
    auto got = subscriber->Receive(1s);
    if (got.status().code() == StatusCode::kEndOfStream) break;
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) break;
    const int64_t b = BatchId(*got->batch);
    EXPECT_GT(b, d.last);
    EXPECT_TRUE(IsBatch(*got->batch, b));
    d.last = b;
    ++d.returned;
    d.lost += got->lost_before;
  }
  return d;
}

// A from-oldest reader starts at the oldest message the channel holds,
// before the replay that reaches it: those older batches cannot be decoded
// and are counted as lost (never returned wrong, never silent); from the
// replay on it gets every batch.
TEST_F(DictionaryChannelTest, FromOldestCountsBatchesBeforeItsReplayAsLost) {
  shm::ChannelOptions options;
  options.slot_count = 32;
  options.policy = shm::SlowConsumerPolicy::kDropOldest;
  Open(options);
  PublishScript(0, 25);  // 25 batches and 12 dictionary messages: 5 dropped out
  auto subscriber = Subscribe(/*from_oldest=*/true);
  ch_.producer->Poll();   // accepted: from the oldest message held
  PublishScript(25, 27);  // the replay, then batches 25 and 26
  ch_.producer->Close();
  const Drained d = DrainChecked(subscriber.get());
  EXPECT_EQ(d.last, 26);
  EXPECT_EQ(d.returned, 2u);
  const DictionaryStats stats = subscriber->dictionary_stats();
  EXPECT_GT(stats.undecodable_batches, 10u);
  EXPECT_EQ(stats.replays_loaded, 1u);
  // Reported, never silent: the batches it could not decode, and what the
  // channel overwrote before it read it (the publishes after it joined).
  EXPECT_EQ(d.lost, stats.undecodable_batches + subscriber->consumer().lost_count());
}

TEST_F(DictionaryChannelTest, ReaderThatLostMessagesResynchronises) {
  shm::ChannelOptions options;
  options.slot_count = 8;
  options.policy = shm::SlowConsumerPolicy::kDropOldest;
  Open(options);
  auto subscriber = Subscribe();
  PublishScript(0, 3);
  for (int64_t b = 0; b < 3; ++b) {
    ASSERT_OK_AND_ASSIGN(ReceivedBatch got, subscriber->Receive(1s));
    EXPECT_TRUE(IsBatch(*got.batch, b));
  }
  // Overrun: batches 3..36 and their dictionary messages (a replacement at
  // 10, 20 and 30) mostly drop out of the channel before the reader looks;
  // the publisher replays now and then since the channel drops.
  PublishScript(3, 37);
  int64_t last = 2;
  uint64_t lost = 0;
  while (last < 36) {
    ASSERT_OK_AND_ASSIGN(ReceivedBatch got, subscriber->Receive(1s));
    const int64_t b = BatchId(*got.batch);
    EXPECT_GT(b, last);
    EXPECT_TRUE(IsBatch(*got.batch, b));
    lost += got.lost_before;
    last = b;
  }
  EXPECT_GT(lost, 0u);
  EXPECT_GE(subscriber->dictionary_stats().replays_loaded, 1u);
  // In step again: the next batches come through the channel, none lost.
  for (int64_t b = 37; b < 45; ++b) {
    PublishScript(b, b + 1);
    ASSERT_OK_AND_ASSIGN(ReceivedBatch got, subscriber->Receive(1s));
    EXPECT_TRUE(IsBatch(*got.batch, b));
    EXPECT_EQ(got.lost_before, 0u);
  }
}

// True if [p, p + n) lies in a mapping of a file whose name contains
// `name` (/proc/self/maps): shared memory of that channel.
bool InMappingOf(const void* p, int64_t n, const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto at = reinterpret_cast<uintptr_t>(p);
  while (std::getline(maps, line)) {
    if (line.find(name) == std::string::npos) continue;
    std::istringstream fields(line);
    std::string range;
    fields >> range;
    const auto dash = range.find('-');
    const uintptr_t begin = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (at >= begin && at + static_cast<uintptr_t>(n) <= end) return true;
  }
  return false;
}

TEST_F(DictionaryChannelTest, InPlaceBatchesKeepIndicesAndDictionariesInSharedMemory) {
  Open();
  auto subscriber = Subscribe();
  // The previous batch's pool stays until the next batch continued its
  // dictionary (its buffers live in that pool's region, and go back to the
  // pool: declared first, the pool goes last).
  std::unique_ptr<ShmBatchPool> previous_pool;
  format::ArrayPtr previous;
  for (int64_t b = 0; b < 12; ++b) {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher_->NewPool(64 << 10));
    ASSERT_OK_AND_ASSIGN(auto batch, Script::BuildIn(b, pool.get(), previous));
    previous = std::static_pointer_cast<format::DictionaryArray>(batch->column(1))->dictionary();
    // The builder's dictionary lives in the pool too; the publisher copies
    // it into a dictionary message of its own.
    ASSERT_OK(publisher_->Publish(*batch, pool.get()));
    previous_pool = std::move(pool);
    ASSERT_OK_AND_ASSIGN(ReceivedBatch got, subscriber->Receive(1s));
    EXPECT_TRUE(IsBatch(*got.batch, b));
    const auto& words = got.batch->column_data(1);
    EXPECT_TRUE(got.body->Contains(words->buffers[1]->data(), words->buffers[1]->size()));
    EXPECT_TRUE(InMappingOf(words->buffers[1]->data(), words->buffers[1]->size(), ch_.name));
    // A dictionary sent whole stays in its shared block; one extended by
    // deltas is concatenated into the reader's memory.
    if (b % 10 <= 1) {
      for (const auto& buffer : words->dictionary->buffers) {
        if (buffer != nullptr && buffer->size() > 0) {
          EXPECT_TRUE(InMappingOf(buffer->data(), buffer->size(), ch_.name))
              << "batch " << b << ": a dictionary buffer outside the channel";
        }
      }
    }
  }
  EXPECT_EQ(publisher_->stats().copied_bytes, 0u);
}

// A rogue producer's replay: garbage dictionary bytes are an error for that
// message, and nothing else; the honest replay that follows restores the
// state.
TEST_F(DictionaryChannelTest, HostileReplayIsAnErrorAndNothingElse) {
  Open();
  PublishScript(0, 6);
  auto reader = Subscribe();
  ch_.producer->Poll();  // accepted now; the publisher replays at its next batch
  internal::UserWord user;
  user.kind = static_cast<uint8_t>(internal::MessageKind::kReplay);
  user.body_length = 64;
  {
    std::vector<std::byte> junk(48, std::byte{0x5a});
    ASSERT_OK_AND_ASSIGN(auto loan, ch_.producer->Loan(64));
    std::memset(loan.data().data(), 0x5a, 64);
    ASSERT_OK(ch_.producer->Publish(junk, std::move(loan), user.Pack()));
  }
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "dictionary replay", reader->Receive(1s));
  // The honest replay comes before batch 6 (the publisher saw the reader
  // accepted): batch 6 decodes.
  PublishScript(6, 7);
  ASSERT_OK_AND_ASSIGN(ReceivedBatch got, reader->Receive(1s));
  EXPECT_TRUE(IsBatch(*got.batch, 6));
  EXPECT_EQ(got.lost_before, 0u);
  EXPECT_EQ(reader->dictionary_stats().replays_loaded, 1u);
}

}  // namespace
}  // namespace alkaid::client
