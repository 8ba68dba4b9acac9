#include "alkaid/measure/histogram.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

namespace alkaid::measure {
namespace {

TEST(HistogramTest, ValuesBelow2048AreExactAndLargerOnesWithinHalfAPermille) {
  for (int64_t v = 0; v < 2048; ++v) {
    ASSERT_EQ(Histogram::BucketValue(Histogram::BucketOf(v)), v);
  }
  for (int64_t v = 2048; v < (int64_t{1} << 40); v = v * 3 / 2 + 7) {
    const int64_t reported = Histogram::BucketValue(Histogram::BucketOf(v));
    const double error = static_cast<double>(reported - v) / static_cast<double>(v);
    ASSERT_LE(error < 0 ? -error : error, 0.0005) << v << " reported as " << reported;
  }
}

TEST(HistogramTest, ZeroFilledMemoryIsAnEmptyHistogram) {
  auto h = std::make_unique<Histogram>();
  std::memset(static_cast<void*>(h.get()), 0, sizeof(Histogram));
  EXPECT_EQ(h->total, 0u);
  EXPECT_EQ(h->ValueAtPercentile(50), 0);
  EXPECT_EQ(Summarize(*h).samples, 0u);
}

TEST(HistogramTest, PercentilesAreNearestRank) {
  auto h = std::make_unique<Histogram>();
  h->Reset();
  for (int64_t v = 1; v <= 100; ++v) h->Record(v);
  EXPECT_EQ(h->ValueAtPercentile(0), 1);
  EXPECT_EQ(h->ValueAtPercentile(50), 50);
  EXPECT_EQ(h->ValueAtPercentile(99), 99);
  EXPECT_EQ(h->ValueAtPercentile(100), 100);
  const Summary s = Summarize(*h);
  EXPECT_EQ(s.samples, 100u);
  EXPECT_EQ(s.p50_ns, 50);
  EXPECT_EQ(s.p90_ns, 90);
  EXPECT_EQ(s.max_ns, 100);
  EXPECT_DOUBLE_EQ(s.mean_ns, 50.5);
}

TEST(HistogramTest, MergeIsRecordingEverySampleInOne) {
  auto a = std::make_unique<Histogram>();
  auto b = std::make_unique<Histogram>();
  auto both = std::make_unique<Histogram>();
  a->Reset();
  b->Reset();
  both->Reset();
  for (int64_t v = 0; v < 5000; v += 7) {
    (v % 2 == 0 ? a : b)->Record(v * 13);
    both->Record(v * 13);
  }
  a->Merge(*b);
  EXPECT_EQ(a->total, both->total);
  EXPECT_EQ(a->min_value, both->min_value);
  EXPECT_EQ(a->max_value, both->max_value);
  for (const double p : {1.0, 50.0, 90.0, 99.0, 99.9}) {
    EXPECT_EQ(a->ValueAtPercentile(p), both->ValueAtPercentile(p)) << p;
  }
}

TEST(QuantileTest, IsTheElementOfRankFloorQTimesN) {
  const std::vector<int64_t> v = {50, 10, 40, 20, 30};
  EXPECT_EQ(Quantile(v, 0.0), 10);
  EXPECT_EQ(Quantile(v, 0.5), 30);  // rank floor(2.5) = 2: the median
  EXPECT_EQ(Quantile(v, 0.7), 40);  // rank floor(3.5) = 3
  EXPECT_EQ(Quantile(v, 1.0), 50);  // rank 5, clamped to the last
  EXPECT_EQ(v.front(), 50) << "the caller's vector is left as it was";
}

TEST(MedianWithIntervalTest, IsTheMedianBetweenTheSignTestsOrderStatistics) {
  std::vector<int64_t> v;
  for (int64_t i = 99; i >= 0; --i) v.push_back(i * 10 - 500);  // -500 .. 490, descending
  const MedianInterval m = MedianWithInterval(v);
  EXPECT_EQ(m.median, 0);  // rank 50
  EXPECT_EQ(m.lo, -100);   // rank floor(50 - 9.8) = 40
  EXPECT_EQ(m.hi, 100);    // rank ceil(50 + 9.8) = 60
  const MedianInterval one = MedianWithInterval({7});
  EXPECT_EQ(one.median, 7);
  EXPECT_EQ(one.lo, 7);
  EXPECT_EQ(one.hi, 7);
}

}  // namespace
}  // namespace alkaid::measure
