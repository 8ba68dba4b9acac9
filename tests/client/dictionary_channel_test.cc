// Dictionary-encoded columns through a ring: dictionary messages (whole,
// deltas, replacements) travel before the batches that need them; a late
// joiner, a from-oldest reader and a reader that lost messages load the
// producer's snapshot and decode every batch they return with the
// dictionaries it was published with; a hostile snapshot is an error.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/array.h"
#include "batch_descriptor_internal.h"
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
  void Open(shm::RingOptions options = {}) {
    ASSERT_OK(ch_.Create(8 << 20, options));
    ASSERT_OK_AND_ASSIGN(publisher_,
                         BatchPublisher::Create(ch_.ring.get(), ch_.bodies.get(), WordSchema()));
  }
  std::unique_ptr<BatchSubscriber> Subscribe(bool from_oldest = false) {
    SubscriberOptions options;
    options.consumer.from_oldest = from_oldest;
    auto s = BatchSubscriber::Open(ch_.ring_name, ch_.bodies_name, WordSchema(), options);
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
  EXPECT_EQ(publisher_->stats().dictionary_snapshots, changes);
  EXPECT_EQ(publisher_->messages(), 30 + changes);
  // Everything came through the ring; nothing from the snapshot.
  EXPECT_EQ(subscriber->dictionary_stats().messages_applied, changes);
  EXPECT_EQ(subscriber->dictionary_stats().snapshots_loaded, 0u);
  EXPECT_EQ(subscriber->dictionary_stats().undecodable_batches, 0u);
}

TEST_F(DictionaryChannelTest, LateJoinersLoadTheSnapshotThenFollowTheRing) {
  Open();
  PublishScript(0, 15);
  auto mid_generation = Subscribe();  // joins before batch 15 (no change)
  PublishScript(15, 20);
  auto at_replacement = Subscribe();  // its first message replaces the dictionary
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
  EXPECT_EQ(mid_generation->dictionary_stats().snapshots_loaded, 1u);
  EXPECT_GT(mid_generation->dictionary_stats().messages_applied, 0u);
  EXPECT_EQ(at_replacement->dictionary_stats().snapshots_loaded, 1u);
  EXPECT_EQ(mid_generation->dictionary_stats().undecodable_batches, 0u);
  EXPECT_EQ(at_replacement->dictionary_stats().undecodable_batches, 0u);
}

// Reads everything left in the ring: every batch returned is checked;
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

TEST_F(DictionaryChannelTest, FromOldestDecodesEveryBatchLeftInTheRing) {
  shm::RingOptions options;
  options.slot_count = 8;
  options.policy = shm::SlowConsumerPolicy::kDropOldest;
  Open(options);
  // Batches 0..24: the ring keeps the last 8 messages (batches 20..24 and
  // the dictionary messages of 20, 22 and 24), whose dictionaries changed
  // three times: the kept snapshots cover each batch's epoch.
  PublishScript(0, 25);
  auto subscriber = Subscribe(/*from_oldest=*/true);
  ch_.ring->Close();
  const Drained d = DrainChecked(subscriber.get());
  EXPECT_EQ(d.last, 24);
  EXPECT_EQ(d.returned, 5u);
  EXPECT_EQ(d.lost, 0u);
  // The newest snapshot at attach, then the one of the oldest batch left.
  EXPECT_EQ(subscriber->dictionary_stats().snapshots_loaded, 2u);
  EXPECT_EQ(subscriber->dictionary_stats().undecodable_batches, 0u);
}

TEST_F(DictionaryChannelTest, BatchesOlderThanTheKeptSnapshotsAreCountedAsLost) {
  shm::RingOptions options;
  options.slot_count = 64;
  options.policy = shm::SlowConsumerPolicy::kDropOldest;
  Open(options);
  // 80 batches and 48 dictionary messages: the ring keeps the last 64
  // messages, in which the dictionaries changed more often than the
  // producer keeps snapshots for.
  PublishScript(0, 80);
  auto subscriber = Subscribe(/*from_oldest=*/true);
  ch_.ring->Close();
  const Drained d = DrainChecked(subscriber.get());
  EXPECT_EQ(d.last, 79);
  const DictionaryStats stats = subscriber->dictionary_stats();
  EXPECT_GT(stats.undecodable_batches, 0u);
  EXPECT_EQ(d.lost, stats.undecodable_batches);  // reported, never silent
  EXPECT_GT(d.returned, 10u);
}

TEST_F(DictionaryChannelTest, ReaderThatLostMessagesResynchronises) {
  shm::RingOptions options;
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
  // 10, 20 and 30) mostly drop out of the ring before the reader looks.
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
  EXPECT_GE(subscriber->dictionary_stats().snapshots_loaded, 1u);
  // In step again: the next batches come through the ring, none lost.
  for (int64_t b = 37; b < 45; ++b) {
    PublishScript(b, b + 1);
    ASSERT_OK_AND_ASSIGN(ReceivedBatch got, subscriber->Receive(1s));
    EXPECT_TRUE(IsBatch(*got.batch, b));
    EXPECT_EQ(got.lost_before, 0u);
  }
}

TEST_F(DictionaryChannelTest, InPlaceBatchesKeepIndicesAndDictionariesInSharedMemory) {
  Open();
  // Through the producer's own mappings, so that addresses compare.
  ASSERT_OK_AND_ASSIGN(auto subscriber,
                       BatchSubscriber::Open(ch_.ring->segment(), ch_.bodies->segment(),
                                             WordSchema()));
  const auto* seg_begin = reinterpret_cast<const uint8_t*>(ch_.bodies->segment()->payload());
  const auto* seg_end = seg_begin + ch_.bodies->segment()->payload_size();
  auto in_segment = [&](const format::Buffer& b) {
    return b.data() >= seg_begin && b.data() + b.size() <= seg_end;
  };
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
    // A dictionary sent whole stays in its shared block; one extended by
    // deltas is concatenated into the reader's memory.
    if (b % 10 <= 1) {
      for (const auto& buffer : words->dictionary->buffers) {
        if (buffer != nullptr && buffer->size() > 0) {
          EXPECT_TRUE(in_segment(*buffer)) << "batch " << b << ": a dictionary buffer outside "
                                           << "the body segment";
        }
      }
    }
  }
  EXPECT_EQ(publisher_->stats().copied_bytes, 0u);
}

TEST_F(DictionaryChannelTest, HostileSnapshotIsAnErrorAndNothingElse) {
  Open();
  PublishScript(0, 6);
  ASSERT_OK_AND_ASSIGN(auto words, Subscribe()->consumer().ReadSideband());
  const auto real = internal::DictionarySideband::FromWords(words);
  // Batch 5 again changes no dictionary: the producer leaves the sideband
  // as the rogue below sets it.
  ASSERT_OK_AND_ASSIGN(auto again, script_.Build(5));
  // A reader that attaches while the sideband is the rogue's cannot use it
  // at attach, and reports it at its first batch.
  auto first_batch_with = [&](const internal::DictionarySideband& rogue) {
    EXPECT_OK(ch_.ring->SetSideband(rogue.ToWords()));
    auto reader = Subscribe();
    EXPECT_OK(publisher_->PublishCopy(*again));
    return reader->Receive(1s).status();
  };
  // A block that does not exist...
  internal::DictionarySideband bogus = real;
  bogus.block.offset += 1 << 20;
  Status st = first_batch_with(bogus);
  EXPECT_NE(st.ToString().find("dictionary snapshot"), std::string::npos) << st;
  // ... a real block full of garbage...
  ASSERT_OK_AND_ASSIGN(auto junk, ch_.bodies->Allocate(256));
  std::memset(junk.data().data(), 0x5a, 256);
  internal::DictionarySideband garbage;
  garbage.block = junk.handle();
  garbage.epoch = real.epoch;
  st = first_batch_with(garbage);
  EXPECT_EQ(st.code(), StatusCode::kInvalid) << st;
  EXPECT_NE(st.ToString().find("is corrupt"), std::string::npos) << st;
  // ... a snapshot header that claims more bytes than the block has...
  internal::SnapshotHeader header;
  header.epoch = real.epoch;
  header.messages_length = 1 << 20;
  std::memcpy(junk.data().data(), &header, sizeof(header));
  st = first_batch_with(garbage);
  EXPECT_NE(st.ToString().find("is corrupt"), std::string::npos) << st;
  // ... and messages that are garbage.
  header.messages_length = 192;
  std::memcpy(junk.data().data(), &header, sizeof(header));
  st = first_batch_with(garbage);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("dictionary snapshot"), std::string::npos) << st;
  // The honest snapshot again: readers decode.
  ASSERT_OK(ch_.ring->SetSideband(real.ToWords()));
  auto reader = Subscribe();
  ASSERT_OK(publisher_->PublishCopy(*again));
  ASSERT_OK_AND_ASSIGN(ReceivedBatch ok, reader->Receive(1s));
  EXPECT_TRUE(IsBatch(*ok.batch, 5));
  EXPECT_EQ(reader->dictionary_stats().snapshots_loaded, 1u);
}

TEST_F(DictionaryChannelTest, ReaderAttachingWhileDictionariesArePublishedWaitsForTheSnapshot) {
  Open();
  PublishScript(0, 4);  // the last change is batch 2's
  ASSERT_OK_AND_ASSIGN(auto words, Subscribe()->consumer().ReadSideband());
  const auto before = internal::DictionarySideband::FromWords(words);
  PublishScript(4, 5);  // a delta the old snapshot does not have
  // As between a producer's dictionary messages and its snapshot: the
  // sideband still names the old snapshot, marked pending. A reader that
  // took it for the whole state would apply batch 6's delta on top of a
  // dictionary lacking batch 4's word and decode batch 6 wrongly.
  auto pending = before;
  pending.pending = true;
  ASSERT_OK(ch_.ring->SetSideband(pending.ToWords()));
  auto reader = Subscribe();
  // Batch 5 (no change) is built but not sent, so the reader's first
  // message is batch 6's delta.
  ASSERT_OK(script_.Build(5).status());
  PublishScript(6, 8);  // 6: a delta and a new snapshot; 7: no change
  for (int64_t b : {6, 7}) {
    ASSERT_OK_AND_ASSIGN(ReceivedBatch got, reader->Receive(1s));
    EXPECT_TRUE(IsBatch(*got.batch, b));
    EXPECT_EQ(got.lost_before, 0u);
  }
  EXPECT_EQ(reader->dictionary_stats().snapshots_loaded, 1u);
}

}  // namespace
}  // namespace alkaid::client
