#pragma once

// Helpers shared by the multi-process benches (not Google Benchmark): exit
// on an error Status, and a clock both processes of a run can compare.

#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "alkaid/common/status.h"

namespace alkaid::bench {

/// Prints "<what>: <status>" to stderr and exits with 1.
[[noreturn]] inline void Die(const Status& st, const char* what) {
  std::fprintf(stderr, "%s: %s\n", what, st.ToString().c_str());
  std::exit(1);
}

/// CLOCK_MONOTONIC in nanoseconds: the same clock in every process.
inline int64_t NowNs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace alkaid::bench

/// Evaluates `expr` (a Status); on an error, Die()s naming the expression.
#define CHECK_OK(expr)                             \
  do {                                             \
    ::alkaid::Status _s = (expr);                  \
    if (!_s.ok()) ::alkaid::bench::Die(_s, #expr); \
  } while (false)
