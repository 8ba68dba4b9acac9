// The broker's shared-memory limit as it is chosen at start
// (broker/daemon/shm_limit.h), from made-up statvfs figures: half of
// /dev/shm's size by default, --shm-limit when given (refused above the
// free space), and the sizes as the start message writes them.

#include "daemon/shm_limit.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>

#include "test_util.h"

namespace alkaid::broker::internal {
namespace {

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

ShmSpace Space(uint64_t total, uint64_t free) {
  ShmSpace space;
  space.total = total;
  space.free = free;
  return space;
}

TEST(ShmLimitTest, DefaultIsHalfOfTheTotalInWholeMiB) {
  EXPECT_EQ(DefaultShmLimit(64 * kMiB), 32 * kMiB);  // Docker's default /dev/shm
  EXPECT_EQ(DefaultShmLimit(24 * kGiB), 12 * kGiB);
  // tmpfs sizes are in pages, not MiB: half of 11.7 GiB and a bit.
  EXPECT_EQ(DefaultShmLimit(12'621'799'424), 6018 * kMiB);
  EXPECT_EQ(DefaultShmLimit(65 * kMiB), 32 * kMiB);
  EXPECT_EQ(DefaultShmLimit(3 * kMiB), kMiB);
  // Below 2 MiB, whole 4 KiB pages.
  EXPECT_EQ(DefaultShmLimit(kMiB), 512 * kKiB);
  EXPECT_EQ(DefaultShmLimit(12 * kKiB), 4 * kKiB);
  EXPECT_EQ(DefaultShmLimit(4 * kKiB), 0u);
  EXPECT_EQ(DefaultShmLimit(0), 0u);
}

TEST(ShmLimitTest, WithoutAnOptionTheDefaultIsUsedAndSaysWhereItCameFrom) {
  ASSERT_OK_AND_ASSIGN(auto limit,
                       ChooseShmLimit(std::nullopt, Space(64 * kMiB, 64 * kMiB), "/dev/shm"));
  EXPECT_EQ(limit.bytes, 32 * kMiB);
  EXPECT_TRUE(limit.is_default);
  EXPECT_EQ(limit.origin, "half of /dev/shm's 64 MiB");
}

// What other processes hold is not the broker's to count: with less free
// than the default limit it still starts (producers are refused when their
// segments do not fit).
TEST(ShmLimitTest, TheDefaultStartsWhateverIsFree) {
  ASSERT_OK_AND_ASSIGN(auto limit,
                       ChooseShmLimit(std::nullopt, Space(64 * kMiB, 3 * kMiB), "/dev/shm"));
  EXPECT_EQ(limit.bytes, 32 * kMiB);
  ASSERT_OK_AND_ASSIGN(limit, ChooseShmLimit(std::nullopt, Space(64 * kMiB, 0), "/dev/shm"));
  EXPECT_EQ(limit.bytes, 32 * kMiB);
}

TEST(ShmLimitTest, AFileSystemTooSmallForAnyDefaultIsRefused) {
  ASSERT_RAISES_WITH_MESSAGE(kOutOfMemory, "/x holds only 4096 bytes (4 KiB)",
                             ChooseShmLimit(std::nullopt, Space(4 * kKiB, 4 * kKiB), "/x"));
}

TEST(ShmLimitTest, AnExplicitLimitWins) {
  ASSERT_OK_AND_ASSIGN(auto limit,
                       ChooseShmLimit(16 * kMiB, Space(64 * kMiB, 20 * kMiB), "/dev/shm"));
  EXPECT_EQ(limit.bytes, 16 * kMiB);
  EXPECT_FALSE(limit.is_default);
  EXPECT_EQ(limit.origin, "--shm-limit");
  // Above half of the total is fine while it is free.
  ASSERT_OK_AND_ASSIGN(limit, ChooseShmLimit(60 * kMiB, Space(64 * kMiB, 60 * kMiB), "/dev/shm"));
  EXPECT_EQ(limit.bytes, 60 * kMiB);
}

TEST(ShmLimitTest, AnExplicitLimitAboveTheFreeSpaceIsRefused) {
  auto limit = ChooseShmLimit(256 * kMiB, Space(64 * kMiB, 64 * kMiB), "/dev/shm");
  ASSERT_RAISES_WITH_MESSAGE(
      kOutOfMemory,
      "/dev/shm has only 67108864 bytes (64 MiB) free, less than --shm-limit 268435456 bytes "
      "(256 MiB)",
      limit);
  EXPECT_NE(limit.status().message().find("docker run --shm-size"), std::string::npos)
      << limit.status().ToString();
}

TEST(ShmLimitTest, ZeroMeansNoLimitWhateverTheSpace) {
  ASSERT_OK_AND_ASSIGN(auto limit, ChooseShmLimit(0, Space(0, 0), "/dev/shm"));
  EXPECT_EQ(limit.bytes, 0u);
  EXPECT_FALSE(limit.is_default);
  EXPECT_EQ(limit.origin, "--shm-limit 0");
}

TEST(ShmLimitTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(0), "0 bytes");
  EXPECT_EQ(HumanBytes(1), "1 byte");
  EXPECT_EQ(HumanBytes(1023), "1023 bytes");
  EXPECT_EQ(HumanBytes(4 * kKiB), "4 KiB");
  EXPECT_EQ(HumanBytes(512 * kKiB), "512 KiB");
  EXPECT_EQ(HumanBytes(32 * kMiB), "32 MiB");
  EXPECT_EQ(HumanBytes(64 * kMiB + 720 * kKiB), "64.7 MiB");
  // Rounded down: never more than there is.
  EXPECT_EQ(HumanBytes(2 * kMiB - 1), "1.9 MiB");
  EXPECT_EQ(HumanBytes(12 * kGiB), "12 GiB");
  EXPECT_EQ(HumanBytes(12'621'799'424), "11.7 GiB");
  EXPECT_EQ(HumanBytes(3 * (kGiB << 10)), "3 TiB");
  EXPECT_EQ(HumanBytes(5000 * (kGiB << 10)), "5000 TiB");
}

TEST(ShmLimitTest, StatShmSpaceReadsTheFileSystem) {
  ASSERT_OK_AND_ASSIGN(auto space, StatShmSpace("/dev/shm"));
  EXPECT_GT(space.total, 0u);
  EXPECT_LE(space.free, space.total);
  ASSERT_RAISES_WITH_MESSAGE(kIOError, "statvfs /nonexistent-alkaid-dir",
                             StatShmSpace("/nonexistent-alkaid-dir"));
}

}  // namespace
}  // namespace alkaid::broker::internal
