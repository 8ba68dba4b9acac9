#pragma once

// The values of `alkaid-measure --layer inproc`'s batches (latency_inproc.cc):
// batch i's int64 column holds i in each of its kInprocRows rows. A header
// of its own so that tests/tools/latency_values_test.cc checks the fill and
// the check themselves (a broken fill or check fails it, whatever the loop
// happens to receive).

#include <cstdint>
#include <cstring>

#include "alkaid/common/status.h"

namespace alkaid::tools::latency {

inline constexpr int64_t kInprocRows = 64;

// Writes `value` into v[0, kInprocRows): 32 16-byte stores of one pair,
// unrolled (g++ -O2 keeps a plain loop scalar, one value per store; a
// sequence i, i + 1, ... would take an add per store as well).
[[gnu::always_inline]] inline void FillBatchValues(int64_t* v, int64_t value) {
  using Pair = int64_t __attribute__((vector_size(16)));
  const Pair pair = {value, value};
#pragma GCC unroll 32
  for (int64_t r = 0; r < kInprocRows; r += 2) std::memcpy(v + r, &pair, sizeof pair);
}

// Checks batch `i`'s values `v` (`rows` of them): its first and last, or
// with `every` all of them (the warm-up's check: a row the fill left out
// holds an earlier batch's number, or the zero of a block never used).
template <bool every>
[[gnu::always_inline]] inline Status CheckBatchValues(const int64_t* v, int64_t rows, int64_t i) {
  if (rows != kInprocRows) return Status::Invalid("batch ", i, " has ", rows, " rows");
  if constexpr (every) {
    for (int64_t r = 0; r < kInprocRows; ++r) {
      if (v[r] != i) return Status::Invalid("batch ", i, " has ", v[r], " in row ", r);
    }
  } else {
    if (v[0] != i || v[kInprocRows - 1] != i) {
      return Status::Invalid("batch ", i, " has values ", v[0], "..", v[kInprocRows - 1]);
    }
  }
  return Status::OK();
}

}  // namespace alkaid::tools::latency
