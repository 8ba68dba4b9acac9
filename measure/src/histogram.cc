// Log-bucketed latency histogram and its reports.

#include "alkaid/measure/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace alkaid::measure {

void Histogram::Reset() { std::memset(this, 0, sizeof(*this)); }

int64_t Histogram::BucketOf(int64_t value_ns) {
  const uint64_t v = value_ns < 0 ? 0 : static_cast<uint64_t>(value_ns);
  if (v < static_cast<uint64_t>(2 * kSubBuckets)) return static_cast<int64_t>(v);
  int shift = std::bit_width(v) - 1 - kSubBucketBits;
  uint64_t sub = v >> shift;
  if (shift > kMaxShift) {  // beyond the range: the last bucket
    shift = kMaxShift;
    sub = 2 * kSubBuckets - 1;
  }
  return 2 * kSubBuckets + (shift - 1) * kSubBuckets + (static_cast<int64_t>(sub) - kSubBuckets);
}

int64_t Histogram::BucketValue(int64_t bucket) {
  if (bucket < 2 * kSubBuckets) return bucket;
  const int64_t rel = bucket - 2 * kSubBuckets;
  const int shift = static_cast<int>(rel / kSubBuckets) + 1;
  const int64_t sub = rel % kSubBuckets + kSubBuckets;
  const int64_t width = int64_t{1} << shift;
  return (sub << shift) + (width - 1) / 2;
}

void Histogram::Record(int64_t value_ns) {
  if (value_ns < 0) value_ns = 0;
  ++counts[BucketOf(value_ns)];
  if (total == 0 || value_ns < min_value) min_value = value_ns;
  if (total == 0 || value_ns > max_value) max_value = value_ns;
  ++total;
  const double v = static_cast<double>(value_ns);
  sum += v;
  sum_squares += v * v;
}

void Histogram::Merge(const Histogram& other) {
  if (other.total == 0) return;
  for (int64_t i = 0; i < kBuckets; ++i) counts[i] += other.counts[i];
  if (total == 0 || other.min_value < min_value) min_value = other.min_value;
  if (total == 0 || other.max_value > max_value) max_value = other.max_value;
  total += other.total;
  sum += other.sum;
  sum_squares += other.sum_squares;
}

namespace {

// Bucket holding the sample of 1-based rank `rank`, and the count up to it.
int64_t BucketOfRank(const Histogram& h, uint64_t rank, uint64_t* cumulative) {
  uint64_t seen = 0;
  for (int64_t i = 0; i < Histogram::kBuckets; ++i) {
    seen += h.counts[i];
    if (seen >= rank) {
      *cumulative = seen;
      return i;
    }
  }
  *cumulative = seen;
  return Histogram::kBuckets - 1;
}

uint64_t RankOf(const Histogram& h, double percentile) {
  const double p = std::clamp(percentile, 0.0, 100.0);
  auto rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(h.total)));
  return std::clamp<uint64_t>(rank, 1, h.total);
}

// The value reported for a bucket: its midpoint, kept within the recorded
// range (a bucket holding the maximum reports no more than the maximum).
int64_t ReportedValue(const Histogram& h, int64_t bucket) {
  return std::clamp(Histogram::BucketValue(bucket), h.min_value, h.max_value);
}

}  // namespace

int64_t Histogram::ValueAtPercentile(double percentile) const {
  if (total == 0) return 0;
  if (percentile >= 100.0) return max_value;
  uint64_t cumulative = 0;
  return ReportedValue(*this, BucketOfRank(*this, RankOf(*this, percentile), &cumulative));
}

double Histogram::Mean() const { return total == 0 ? 0 : sum / static_cast<double>(total); }

double Histogram::StdDeviation() const {
  if (total == 0) return 0;
  const double mean = Mean();
  const double var = sum_squares / static_cast<double>(total) - mean * mean;
  return var > 0 ? std::sqrt(var) : 0;
}

Summary Summarize(const Histogram& histogram) {
  Summary s;
  s.samples = histogram.total;
  s.p50_ns = histogram.ValueAtPercentile(50);
  s.p90_ns = histogram.ValueAtPercentile(90);
  s.p99_ns = histogram.ValueAtPercentile(99);
  s.p999_ns = histogram.ValueAtPercentile(99.9);
  s.max_ns = histogram.total == 0 ? 0 : histogram.max_value;
  s.mean_ns = histogram.Mean();
  return s;
}

std::string FormatPercentileDistribution(const Histogram& h) {
  constexpr int kTicksPerHalfDistance = 5;
  constexpr double kUs = 1000.0;
  std::string out;
  char line[160];
  (void)std::snprintf(line, sizeof(line), "%12s %14s %10s %14s\n\n", "Value", "Percentile",
                      "TotalCount", "1/(1-Percentile)");
  out += line;
  if (h.total > 0) {
    double percentile = 0;
    for (int guard = 0; guard < 100000; ++guard) {
      const uint64_t rank = RankOf(h, percentile);
      if (rank >= h.total) break;
      uint64_t cumulative = 0;
      const int64_t bucket = BucketOfRank(h, rank, &cumulative);
      const double fraction = percentile / 100.0;
      (void)std::snprintf(line, sizeof(line), "%12.3f %2.12f %10llu %14.2f\n",
                          static_cast<double>(ReportedValue(h, bucket)) / kUs, fraction,
                          static_cast<unsigned long long>(cumulative), 1.0 / (1.0 - fraction));
      out += line;
      // Ticks get finer by halves of the remaining distance to 100%.
      const double half_distances = std::floor(std::log2(100.0 / (100.0 - percentile))) + 1;
      const double ticks = kTicksPerHalfDistance * std::pow(2.0, half_distances);
      percentile += 100.0 / ticks;
    }
    (void)std::snprintf(line, sizeof(line), "%12.3f %2.12f %10llu\n",
                        static_cast<double>(h.max_value) / kUs, 1.0,
                        static_cast<unsigned long long>(h.total));
    out += line;
  }
  int64_t used_buckets = 0;
  for (int64_t i = 0; i < Histogram::kBuckets; ++i) used_buckets += h.counts[i] != 0;
  (void)std::snprintf(line, sizeof(line), "#[Mean    = %12.3f, StdDeviation   = %12.3f]\n",
                      h.Mean() / kUs, h.StdDeviation() / kUs);
  out += line;
  (void)std::snprintf(line, sizeof(line), "#[Max     = %12.3f, Total count    = %12llu]\n",
                      static_cast<double>(h.total == 0 ? 0 : h.max_value) / kUs,
                      static_cast<unsigned long long>(h.total));
  out += line;
  (void)std::snprintf(line, sizeof(line), "#[Buckets = %12lld, SubBuckets     = %12lld]\n",
                      static_cast<long long>(used_buckets),
                      static_cast<long long>(Histogram::kSubBuckets));
  out += line;
  return out;
}

MedianInterval MedianWithInterval(std::vector<int64_t> samples) {
  std::sort(samples.begin(), samples.end());
  const double n = static_cast<double>(samples.size());
  const double half = 0.98 * std::sqrt(n);
  const auto lo = static_cast<std::size_t>(std::max(0.0, std::floor(n / 2 - half)));
  const auto hi = static_cast<std::size_t>(std::min(n - 1, std::ceil(n / 2 + half)));
  return {samples[samples.size() / 2], samples[lo], samples[hi]};
}

}  // namespace alkaid::measure
