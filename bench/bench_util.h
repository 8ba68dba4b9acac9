#pragma once

// Helpers shared by the multi-process benches (not Google Benchmark): exit
// on an error Status. Clocks, processes and floors: alkaid/measure/.

#include <cstdio>
#include <cstdlib>

#include "alkaid/common/status.h"

namespace alkaid::bench {

/// Prints "<what>: <status>" to stderr and exits with 1.
[[noreturn]] inline void Die(const Status& st, const char* what) {
  std::fprintf(stderr, "%s: %s\n", what, st.ToString().c_str());
  std::exit(1);
}

}  // namespace alkaid::bench

/// Evaluates `expr` (a Status); on an error, Die()s naming the expression.
#define CHECK_OK(expr)                             \
  do {                                             \
    ::alkaid::Status _s = (expr);                  \
    if (!_s.ok()) ::alkaid::bench::Die(_s, #expr); \
  } while (false)
