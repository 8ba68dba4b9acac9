#include "alkaid/measure/ping_pong.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "alkaid/measure/clock.h"

namespace alkaid::measure {
namespace {

class PingPongLoopTest : public ::testing::Test {
 protected:
  void SetUp() override { histogram_->Reset(); }

  std::unique_ptr<Histogram> histogram_ = std::make_unique<Histogram>();
  std::atomic<int64_t> progress_{0};
  int64_t elapsed_ns_ = -1;
};

// Spins until NowNs() reaches `until_ns`.
void SpinUntil(int64_t until_ns) {
  while (NowNs() < until_ns) {
  }
}

// A step that times an empty round trip.
Status TimedStep(RoundTripTimer* timer) {
  timer->Start();
  timer->Stop();
  return Status::OK();
}

TEST_F(PingPongLoopTest, RecordsEveryRoundTripAndCountsProgress) {
  int64_t steps = 0;
  const Status st = RunPingPongLoop(
      LoopBounds{25, 0}, histogram_.get(), &progress_, &elapsed_ns_, [] { return false; },
      [&](int64_t i, RoundTripTimer* timer) {
        EXPECT_EQ(i, steps);
        ++steps;
        return TimedStep(timer);
      });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(steps, 25);
  EXPECT_EQ(histogram_->total, 25u);
  EXPECT_EQ(progress_.load(), 25);
  EXPECT_GE(elapsed_ns_, 0);
}

TEST_F(PingPongLoopTest, StoppingBeforeAStepIsCancelled) {
  int64_t steps = 0;
  const Status st = RunPingPongLoop(
      LoopBounds{100, 0}, histogram_.get(), nullptr, &elapsed_ns_, [&] { return steps == 3; },
      [&](int64_t, RoundTripTimer* timer) {
        ++steps;
        return TimedStep(timer);
      });
  EXPECT_EQ(st.code(), StatusCode::kCancelled) << st.ToString();
  EXPECT_EQ(steps, 3);
  EXPECT_EQ(histogram_->total, 3u);
}

TEST_F(PingPongLoopTest, AStepsErrorEndsTheLoopUnrecorded) {
  const Status st = RunPingPongLoop(
      LoopBounds{100, 0}, histogram_.get(), &progress_, &elapsed_ns_, [] { return false; },
      [&](int64_t i, RoundTripTimer* timer) {
        if (i == 4) return Status::Invalid("ping ", i, " came back wrong");
        return TimedStep(timer);
      });
  EXPECT_EQ(st.code(), StatusCode::kInvalid) << st.ToString();
  EXPECT_EQ(histogram_->total, 4u);
  EXPECT_EQ(progress_.load(), 4);
}

TEST_F(PingPongLoopTest, TheDurationEndsTheLoop) {
  // Each step outlasts the whole duration, so no step starts after the
  // first one ended (whether the first starts depends on how soon the
  // loop looks at the clock; without the bound all 100 would run).
  constexpr int64_t kDurationNs = 1'000'000;
  const Status st = RunPingPongLoop(
      LoopBounds{100, kDurationNs}, histogram_.get(), &progress_, &elapsed_ns_,
      [] { return false; },
      [&](int64_t, RoundTripTimer* timer) {
        SpinUntil(NowNs() + kDurationNs + 1);
        return TimedStep(timer);
      });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_LE(histogram_->total, 1u);
  EXPECT_EQ(progress_.load(), static_cast<int64_t>(histogram_->total));
  EXPECT_GE(elapsed_ns_, 0);
}

TEST(RoundTripTimerTest, HalfIsHalfTheTimedSpan) {
  RoundTripTimer timer;
  timer.Start();
  SpinUntil(NowNs() + 1000);
  timer.Stop();
  EXPECT_GE(timer.HalfNs(), 500);
}

}  // namespace
}  // namespace alkaid::measure
