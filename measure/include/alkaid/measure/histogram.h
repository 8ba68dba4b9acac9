#pragma once

/// \file
/// Sample stores of the measurements: a log-bucketed histogram of a fixed
/// size, so that it can live in shared memory written by a child process and
/// read by the parent, with percentile and HdrHistogram-style reports of it;
/// and exact order statistics of a vector of samples.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace alkaid::measure {

/// Nanosecond samples in buckets of relative width at most 1/1024: values
/// below 2048 ns are exact, larger ones share a bucket with values within
/// 0.1%. A plain struct (no pointers) so that it can be placed in a
/// MAP_SHARED mapping; zero-filled memory is an empty histogram.
struct Histogram {
  static constexpr int kSubBucketBits = 10;
  static constexpr int64_t kSubBuckets = int64_t{1} << kSubBucketBits;  // 1024
  static constexpr int kMaxShift = 40;  // values up to 2^51 ns (26 days)
  static constexpr int64_t kBuckets = 2 * kSubBuckets + kMaxShift * kSubBuckets;

  uint64_t counts[kBuckets];
  uint64_t total;
  int64_t min_value;  // valid when total > 0
  int64_t max_value;
  double sum;
  double sum_squares;

  /// Empties the histogram.
  void Reset();
  /// Adds one sample (negative values count as 0).
  void Record(int64_t value_ns);
  /// Adds every sample of `other`.
  void Merge(const Histogram& other);

  /// Bucket of a value, and the value reported for a bucket (its midpoint,
  /// which is within 0.05% of every value in it).
  static int64_t BucketOf(int64_t value_ns);
  static int64_t BucketValue(int64_t bucket);

  /// The smallest recorded value v such that at least `percentile` percent
  /// of the samples are <= v (to the bucket's precision; exact at 100, the
  /// maximum). 0 when empty.
  int64_t ValueAtPercentile(double percentile) const;
  double Mean() const;
  double StdDeviation() const;
};

/// The summary alkaid-measure prints and writes to JSON.
struct Summary {
  uint64_t samples = 0;
  int64_t p50_ns = 0;
  int64_t p90_ns = 0;
  int64_t p99_ns = 0;
  int64_t p999_ns = 0;
  int64_t max_ns = 0;
  double mean_ns = 0;
};

Summary Summarize(const Histogram& histogram);

/// The histogram in HdrHistogram's percentile-distribution text format
/// ("Value Percentile TotalCount 1/(1-Percentile)", values in microseconds,
/// five reporting ticks per half distance, #[Mean ...] / #[Max ...] footer),
/// as HdrHistogram's plotters read it.
std::string FormatPercentileDistribution(const Histogram& histogram);

/// The element of rank floor(q * n) (clamped to the last) of `samples`
/// sorted ascending: Quantile(v, 0.5) is the median v[n / 2]. `samples`
/// must not be empty; it is taken by value and sorted.
template <typename T>
T Quantile(std::vector<T> samples, double q) {
  std::sort(samples.begin(), samples.end());
  const auto rank = static_cast<std::size_t>(q * static_cast<double>(samples.size()));
  return samples[std::min(samples.size() - 1, rank)];
}

/// The median of paired differences with its 95 % interval: the order
/// statistics of ranks n/2 -+ 0.98 sqrt(n) (the sign test's, with the
/// normal approximation of the binomial: no assumption about the
/// distribution). `samples` must not be empty; it is taken by value.
struct MedianInterval {
  int64_t median = 0;
  int64_t lo = 0;
  int64_t hi = 0;
};
MedianInterval MedianWithInterval(std::vector<int64_t> samples);

}  // namespace alkaid::measure
