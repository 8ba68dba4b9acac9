#pragma once

/// \file
/// The clocks of a measurement. Every process of a run stamps with the same
/// CLOCK_MONOTONIC, so a stamp taken in one process may be subtracted from
/// one taken in another.

#include <time.h>

#include <cstdint>

namespace alkaid::measure {

/// CLOCK_MONOTONIC in nanoseconds (the vDSO: no system call).
inline int64_t NowNs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

/// CPU time (user + system) of the calling process, in nanoseconds.
int64_t ProcessCpuNs();

}  // namespace alkaid::measure
