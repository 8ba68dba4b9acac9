// A channel's arena that grows by extension segments and shrinks again
// (ChannelOptions::max_arena_bytes, extension_idle, extensions): what the
// producer adds and releases, what consumers map and let go of, and what a
// hostile slot naming an extension gets.

#include <unistd.h>

#include <fstream>
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

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

class ChannelExtensionTest : public ShmTest {
 protected:
  // 64 KiB to start with, up to 64 MiB.
  static ChannelOptions Growing() {
    ChannelOptions o;
    o.slot_count = 64;
    o.arena_bytes = 64 * kKiB;
    o.max_arena_bytes = 64 * kMiB;
    o.max_consumers = 4;
    o.space_timeout = 200ms;
    o.publish_timeout = 200ms;
    return o;
  }
};

Status PublishPattern(ChannelProducer* producer, uint64_t seed, uint64_t length) {
  ALKAID_ASSIGN_OR_RAISE(ChannelLoan loan, producer->Loan(length));
  FillPattern(seed, loan.data());
  return producer->Publish({}, std::move(loan), seed);
}

// Lines of /proc/self/maps that map segment `name` (exactly).
int MappingsOf(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);) {
    const std::string tail = "/" + name;
    if (line.size() >= tail.size() &&
        line.compare(line.size() - tail.size(), tail.size(), tail) == 0) {
      ++count;
    }
    if (line.find("/" + name + " (deleted)") != std::string::npos) ++count;
  }
  return count;
}

// Bodies the consumer keeps fill the 64 KiB arena; further loans add
// extensions (twice the arena each time) instead of waiting, each mapped by
// the consumer once, the first time a message names it, whatever the
// number of messages in it. Every body reads back intact.
TEST_F(ChannelExtensionTest, LoansThatDoNotFitAddExtensionsEachMappedOnce) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Growing()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ChannelMessage message;
  std::vector<ChannelBlock> held;
  for (uint64_t i = 0; i < 40; ++i) {  // 40 x 16 KiB = 640 KiB, ten times the arena
    ASSERT_OK(PublishPattern(producer.get(), i, 16 * kKiB));
    ASSERT_OK(consumer->Receive(&message, 1s));
    held.push_back(message.TakeBody());
  }
  const ChannelStats stats = producer->stats();
  EXPECT_GE(stats.extensions, 3u);  // 64 KiB + 64 + 128 + 256 + 512 ...
  EXPECT_EQ(stats.extensions, stats.extensions_added);
  EXPECT_GE(stats.arena_bytes, 640 * kKiB);
  EXPECT_EQ(consumer->extensions_mapped(), stats.extensions);
  for (uint64_t i = 0; i < held.size(); ++i) EXPECT_TRUE(CheckPattern(i, held[i].data())) << i;
  EXPECT_EQ(testing::SegmentsWithPrefix(name + ".x").size(), stats.extensions);

  // Many more messages in the extensions: no further mapping.
  held.clear();
  for (uint64_t i = 0; i < 500; ++i) {
    ASSERT_OK(PublishPattern(producer.get(), i, 16 * kKiB));
    ASSERT_OK(consumer->Receive(&message, 1s));
    EXPECT_TRUE(CheckPattern(i, message.body())) << i;
  }
  EXPECT_EQ(consumer->extensions_mapped(), stats.extensions);
  EXPECT_EQ(producer->stats().extensions_added, stats.extensions_added);
}

// One block larger than every arena gets an extension of its own, read by
// the consumer in place; over the maximum, a CapacityError naming both
// sizes, and the producer goes on.
TEST_F(ChannelExtensionTest, ABlockOfAnySizeUpToTheMaximumAndAClearErrorPastIt) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Growing()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ASSERT_OK(PublishPattern(producer.get(), 7, 40 * kMiB));
  EXPECT_EQ(producer->stats().extensions, 1u);
  EXPECT_GE(producer->stats().arena_bytes, 40 * kMiB);
  ChannelMessage message;
  ASSERT_OK(consumer->Receive(&message, 1s));
  ASSERT_EQ(message.body().size(), 40 * kMiB);
  EXPECT_NE(message.body_offset() >> internal::kExtensionShift, 0u);
  EXPECT_TRUE(CheckPattern(7, message.body()));

  auto over = producer->Loan(64 * kMiB + 1);
  ASSERT_RAISES(kCapacityError, over.status());
  EXPECT_NE(over.status().message().find(std::to_string(64 * kMiB + 1) + " bytes"),
            std::string::npos)
      << over.status().ToString();
  EXPECT_NE(over.status().message().find("maximum of " + std::to_string(64 * kMiB)),
            std::string::npos)
      << over.status().ToString();
  // Within the maximum but not beside the 40 MiB the consumer holds: the
  // wait for space times out saying why the arena could not grow.
  auto beside = producer->Loan(30 * kMiB);
  ASSERT_RAISES_WITH_MESSAGE(kTimedOut, "could not grow", beside.status());
  message.Reset();
  // Returned: the idle extension makes room for the larger one.
  ASSERT_OK(PublishPattern(producer.get(), 8, 50 * kMiB));
  ASSERT_OK(consumer->Receive(&message, 1s));
  EXPECT_TRUE(CheckPattern(8, message.body()));
  EXPECT_EQ(producer->stats().extensions, 1u);
  EXPECT_EQ(producer->stats().extensions_released, 1u);
  EXPECT_EQ(consumer->extensions_mapped(), 2u);
}

// The broker's part: acquire is asked before each extension (and may
// refuse: that loan fails with its error, the producer carries on), release
// is told after each one goes.
TEST_F(ChannelExtensionTest, AcquireIsAskedAndReleaseToldForEachExtension) {
  const std::string name = NewName("ch");
  ChannelOptions o = Growing();
  std::vector<std::pair<uint32_t, uint64_t>> acquired;
  std::vector<std::pair<uint32_t, uint64_t>> released;
  bool refuse = false;
  o.extensions.acquire = [&](uint32_t id, uint64_t bytes) -> Result<std::string> {
    if (refuse) return Status::CapacityError("the broker's limit is reached");
    acquired.emplace_back(id, bytes);
    return ChannelExtensionName(name, id);
  };
  o.extensions.release = [&](uint32_t id, uint64_t bytes) { released.emplace_back(id, bytes); };
  o.extension_idle = 1ms;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ASSERT_OK(PublishPattern(producer.get(), 1, 1 * kMiB));
  ASSERT_EQ(acquired.size(), 1u);
  EXPECT_EQ(acquired[0].first, 1u);
  EXPECT_GE(acquired[0].second, 1 * kMiB);
  refuse = true;
  auto refused = producer->Loan(2 * kMiB);
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "the broker's limit is reached", refused.status());
  ASSERT_OK(PublishPattern(producer.get(), 2, 4 * kKiB));  // carries on
  // Nobody holds the 1 MiB block: released once idle (ReleaseIdleExtensions,
  // what a producer that never polls calls; Poll does the same).
  for (int i = 0; i < 10000 && producer->stats().extensions != 0; ++i) {
    producer->ReleaseIdleExtensions();
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0], acquired[0]);
  EXPECT_TRUE(testing::SegmentsWithPrefix(name + ".x").empty());
}

// An extension no block used for extension_idle is released: its name
// goes, and a consumer that finds no message lets go of its mapping.
TEST_F(ChannelExtensionTest, AnIdleExtensionIsReleasedAndConsumersLetGo) {
  const std::string name = NewName("ch");
  ChannelOptions o = Growing();
  o.extension_idle = 5ms;
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, o));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  ASSERT_OK(PublishPattern(producer.get(), 3, 2 * kMiB));
  ChannelMessage message;
  ASSERT_OK(consumer->Receive(&message, 1s));
  const std::string extension = ChannelExtensionName(name, 1);
  EXPECT_EQ(MappingsOf(extension), 2);  // the producer's and the consumer's
  // Held: never released, however long.
  for (int i = 0; i < 20; ++i) {
    producer->Poll();
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(producer->stats().extensions, 1u);
  EXPECT_TRUE(CheckPattern(3, message.body()));
  message.Reset();
  for (int i = 0; i < 10000 && producer->stats().extensions != 0; ++i) {
    producer->Poll();
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(producer->stats().extensions, 0u);
  EXPECT_EQ(producer->stats().arena_bytes, 64 * kKiB);
  EXPECT_TRUE(testing::SegmentsWithPrefix(extension).empty());
  EXPECT_EQ(MappingsOf(extension), 1);  // the consumer's, until it looks
  ASSERT_OK_AND_ASSIGN(bool got, consumer->TryReceive(&message));
  EXPECT_FALSE(got);
  EXPECT_EQ(consumer->extensions_dropped(), 1u);
  EXPECT_EQ(MappingsOf(extension), 0);
  // And the arena grows again when needed, under a new id.
  ASSERT_OK(PublishPattern(producer.get(), 4, 2 * kMiB));
  ASSERT_OK(consumer->Receive(&message, 1s));
  EXPECT_TRUE(CheckPattern(4, message.body()));
  EXPECT_EQ(testing::SegmentsWithPrefix(ChannelExtensionName(name, 2)).size(), 1u);
}

// A hostile slot naming an extension that is not there, an entry outside
// the table, or a range outside the extension: Invalid for that message,
// which is skipped; the next one is delivered.
TEST_F(ChannelExtensionTest, SlotsNamingMissingExtensionsOrRangesOutsideThemAreRefused) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Growing()));
  ASSERT_OK_AND_ASSIGN(auto consumer, ChannelConsumer::Open(name));
  // Message 0 in an extension (it does not fit the arena), 1..4 too.
  for (uint64_t i = 0; i < 5; ++i) ASSERT_OK(PublishPattern(producer.get(), i, 128 * kKiB));
  ASSERT_OK_AND_ASSIGN(auto rw, Segment::Open(name, SegmentKind::kChannel));
  const auto* h = reinterpret_cast<internal::ChannelHeaderData*>(rw->data());
  auto slot = [&](uint64_t n) {
    return reinterpret_cast<internal::ChannelSlotData*>(rw->data() + h->slots_offset +
                                                        n * h->slot_size);
  };
  ASSERT_NE(slot(0)->extension.load(), 0u);
  slot(0)->extension.store(999);                                           // no such extension
  slot(1)->body_offset.store(slot(1)->body_offset.load() + 64 * kMiB);     // past its end
  slot(2)->body_offset.store(uint64_t{60} << internal::kExtensionShift);   // an unused entry
  slot(3)->body_offset.store(uint64_t{200} << internal::kExtensionShift);  // beyond the table
  ChannelMessage message;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "names extension 999", consumer->TryReceive(&message));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "outside its", consumer->TryReceive(&message));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "which holds none", consumer->TryReceive(&message));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "outside the table", consumer->TryReceive(&message));
  ASSERT_OK(consumer->Receive(&message, 1s));
  EXPECT_EQ(message.user(), 4u);
  EXPECT_TRUE(CheckPattern(4, message.body()));
}

// A channel whose producer died leaves its extensions' names too:
// RemoveChannel removes those its table lists.
TEST_F(ChannelExtensionTest, RemoveChannelRemovesTheExtensions) {
  const std::string name = NewName("ch");
  ASSERT_OK_AND_ASSIGN(auto producer, ChannelProducer::Create(name, Growing()));
  ASSERT_OK(PublishPattern(producer.get(), 1, 1 * kMiB));
  EXPECT_EQ(testing::SegmentsWithPrefix(name + ".x").size(), 1u);
  ASSERT_OK(RemoveChannel(name));
  EXPECT_TRUE(testing::SegmentsWithPrefix(name).empty());
}

}  // namespace
}  // namespace alkaid::shm
