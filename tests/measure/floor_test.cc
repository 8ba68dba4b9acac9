#include "alkaid/measure/floor.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/measure/shared_mapping.h"
#include "test_util.h"

namespace alkaid::measure {
namespace {

// How many names in /dev/shm start with `prefix`.
int ShmNamesStartingWith(const std::string& prefix) {
  int count = 0;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (const dirent* e = ::readdir(dir)) count += std::string(e->d_name).rfind(prefix, 0) == 0;
    ::closedir(dir);
  }
  return count;
}

TEST(FloorTest, FloorLineServesUntilQuitAndLeavesWhenStopping) {
  auto line = SharedMapping<FloorLine>::MapOrDie();
  std::thread b([&] { line->Serve([] { return false; }); });
  ASSERT_TRUE(line->AwaitReady([] { return false; }));
  for (uint64_t k = 1; k <= 100; ++k) EXPECT_GE(line->RoundTrip(k), 0);
  EXPECT_EQ(line->word.load(), 201u) << "B answered round trip 100 with 2k + 1";
  line->Quit();
  b.join();

  // A B waiting for a round trip that never comes leaves when told to stop.
  line->word.store(0);
  std::atomic<bool> stop{false};
  std::thread idle([&] { line->Serve([&] { return stop.load(); }); });
  ASSERT_TRUE(line->AwaitReady([] { return false; }));
  stop.store(true);
  idle.join();
}

TEST(FloorTest, BodyLineCarriesTheBodysPlaceAndId) {
  auto line = SharedMapping<BodyLine>::MapOrDie();
  struct Seen {
    uint64_t offset = 0;
    int64_t id = 0;
  };
  std::vector<Seen> seen;
  std::thread b([&] {
    uint64_t last = 0, k = 0;
    while (line->AwaitPing(last, &k, [] { return false; })) {
      seen.push_back({line->body_offset, line->id});
      line->Answer(k);
      last = k;
    }
  });
  for (uint64_t k = 1; k <= 3; ++k) {
    line->Send(k, 4096 * k, -static_cast<int64_t>(k));
    ASSERT_TRUE(line->AwaitAnswer(k, [] { return false; }));
  }
  line->Quit();
  b.join();
  ASSERT_EQ(seen.size(), 3u);
  for (uint64_t k = 1; k <= 3; ++k) {
    EXPECT_EQ(seen[k - 1].offset, 4096 * k);
    EXPECT_EQ(seen[k - 1].id, -static_cast<int64_t>(k));
  }
}

TEST(FloorTest, BodyLoansHoldTheLastLoansAndRemoveTheirChannel) {
  const std::string name = "alkaid_measure_loans_" + std::to_string(::getpid());
  shm::ChannelOptions options;
  options.max_consumers = 1;
  options.arena_bytes = 3 * 4096;  // the held loans and one more
  options.max_blocks = 3;
  options.space_timeout = std::chrono::milliseconds(1);
  {
    ASSERT_OK_AND_ASSIGN(auto loans, BodyLoans::Create(name, options, 2));
    for (int i = 0; i < 20; ++i) {
      ASSERT_OK_AND_ASSIGN(auto loan, loans.Loan(4096));
      std::memset(loan.data().data(), i, 4096);
      loans.Hold(std::move(loan));
    }
    // Holding three leaves no room for a fourth.
    ASSERT_OK_AND_ASSIGN(auto third, loans.Loan(4096));
    ASSERT_RAISES(kTimedOut, loans.Loan(4096));
    third.Reset();
    EXPECT_OK(loans.Loan(4096).status());  // its block is back: two are held, no more
  }
  EXPECT_EQ(ShmNamesStartingWith(name), 0) << "the channel's names are removed";
}

TEST(FloorTest, StreamQueueHandsMessagesOverInOrderThenEnds) {
  StreamQueue queue;
  ASSERT_OK(queue.Map(4, 8));
  constexpr uint64_t kMessages = 10000;
  std::thread producer([&] {
    for (uint64_t n = 0; n < kMessages; ++n) {
      int64_t* place = queue.AwaitRoom(n, [] { return false; });
      for (uint64_t v = 0; v < 8; ++v) place[v] = static_cast<int64_t>(8 * n + v);
      queue.Written(n);
    }
    queue.End(kMessages);
  });
  uint64_t n = 0;
  bool in_order = true;
  for (StreamQueue::Wait wait; (wait = queue.AwaitMessage(n)) != StreamQueue::Wait::kEnded;) {
    if (wait == StreamQueue::Wait::kWaiting) continue;
    const int64_t* place = queue.Place(n);
    in_order = in_order && place[0] == static_cast<int64_t>(8 * n) &&
               place[7] == static_cast<int64_t>(8 * n + 7);
    queue.Consumed(n++);
  }
  producer.join();
  EXPECT_TRUE(in_order) << "a place was read before it was written, or written before it was read";
  EXPECT_EQ(n, kMessages);
}

TEST(FloorTest, StreamQueueWaitsForRoomAndForMessages) {
  StreamQueue queue;
  ASSERT_OK(queue.Map(2, 1));
  const auto never = [] { return false; };
  const auto now = [] { return true; };
  EXPECT_EQ(queue.AwaitMessage(0), StreamQueue::Wait::kWaiting) << "nothing written yet";
  for (uint64_t n = 0; n < 2; ++n) {
    ASSERT_EQ(queue.AwaitRoom(n, never), queue.Place(n));
    queue.Written(n);
  }
  EXPECT_EQ(queue.AwaitRoom(2, now), nullptr) << "both places hold messages not read";
  EXPECT_EQ(queue.AwaitMessage(0), StreamQueue::Wait::kReady);
  queue.Consumed(0);
  EXPECT_EQ(queue.AwaitRoom(2, now), queue.Place(0)) << "message 0's place is free again";
  queue.End(2);
  EXPECT_EQ(queue.AwaitMessage(1), StreamQueue::Wait::kReady) << "written before the end";
  EXPECT_EQ(queue.AwaitMessage(2), StreamQueue::Wait::kEnded);
}

}  // namespace
}  // namespace alkaid::measure
