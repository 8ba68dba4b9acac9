// The values of alkaid-measure --layer inproc's batches: the fill writes
// every one, the checks refuse a wrong one (tools/alkaid/latency_inproc_values.h).

#include "latency_inproc_values.h"

#include <gtest/gtest.h>

#include <array>
#include <string>

namespace alkaid::tools::latency {
namespace {

// A batch's values, each row poisoned with its own number (never the value
// filled in), so that a row the fill leaves out shows.
std::array<int64_t, kInprocRows> Poisoned() {
  std::array<int64_t, kInprocRows> v{};
  for (int64_t r = 0; r < kInprocRows; ++r) v[r] = -1 - r;
  return v;
}

TEST(InprocValuesTest, TheFillWritesEveryRow) {
  for (const int64_t value : {int64_t{0}, int64_t{1}, int64_t{12345}, int64_t{-7}}) {
    alignas(64) std::array<int64_t, kInprocRows> v = Poisoned();
    FillBatchValues(v.data(), value);
    for (int64_t r = 0; r < kInprocRows; ++r) ASSERT_EQ(v[r], value) << "row " << r;
    EXPECT_TRUE(CheckBatchValues<true>(v.data(), kInprocRows, value).ok());
    EXPECT_TRUE(CheckBatchValues<false>(v.data(), kInprocRows, value).ok());
  }
}

TEST(InprocValuesTest, TheLoopsCheckRefusesAWrongFirstOrLastValue) {
  alignas(64) std::array<int64_t, kInprocRows> v{};
  FillBatchValues(v.data(), 41);
  EXPECT_FALSE(CheckBatchValues<false>(v.data(), kInprocRows, 42).ok());  // another batch's
  v[0] = 40;
  EXPECT_FALSE(CheckBatchValues<false>(v.data(), kInprocRows, 41).ok());
  v[0] = 41;
  v[kInprocRows - 1] = 40;
  const Status st = CheckBatchValues<false>(v.data(), kInprocRows, 41);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("batch 41 has values 41..40"), std::string::npos) << st.ToString();
}

TEST(InprocValuesTest, BothChecksRefuseAnotherRowCount) {
  alignas(64) std::array<int64_t, kInprocRows> v{};
  FillBatchValues(v.data(), 3);
  EXPECT_FALSE(CheckBatchValues<false>(v.data(), kInprocRows - 1, 3).ok());
  EXPECT_FALSE(CheckBatchValues<true>(v.data(), kInprocRows - 1, 3).ok());
}

TEST(InprocValuesTest, TheWarmUpsCheckRefusesAnyWrongRow) {
  for (int64_t r = 0; r < kInprocRows; ++r) {
    alignas(64) std::array<int64_t, kInprocRows> v{};
    FillBatchValues(v.data(), 9);
    v[r] = 8;
    const Status st = CheckBatchValues<true>(v.data(), kInprocRows, 9);
    ASSERT_FALSE(st.ok()) << "row " << r;
    EXPECT_NE(st.ToString().find("in row " + std::to_string(r)), std::string::npos)
        << st.ToString();
  }
}

}  // namespace
}  // namespace alkaid::tools::latency
