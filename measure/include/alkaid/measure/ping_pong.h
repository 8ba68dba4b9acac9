#pragma once

/// \file
/// The skeleton of a ping-pong's timed side: for each ping, untimed work
/// (build the body, a warm-up round trip), then the timed round trip, half
/// of which is the one-way latency recorded; within a count, a duration and
/// a stop flag.

#include <atomic>
#include <cstdint>

#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/measure/clock.h"
#include "alkaid/measure/histogram.h"

#if defined(ALKAID_MEASURE_CALLGRIND)
#include <valgrind/callgrind.h>
#endif

namespace alkaid::measure {

/// Switches callgrind's event collection on or off (CALLGRIND_TOGGLE_COLLECT)
/// when the process runs under callgrind; outside valgrind a few
/// instructions that change nothing (no call, no system call), and nothing
/// at all in a build without valgrind's header (ALKAID_MEASURE_CALLGRIND).
inline void ToggleCallgrindCollection() {
#if defined(ALKAID_MEASURE_CALLGRIND)
  CALLGRIND_TOGGLE_COLLECT;
#endif
}

/// What a step times: Start() just before the ping leaves, Stop() once the
/// answer is in.
///
/// Under callgrind, the timed span is also what is counted: Start() switches
/// collection on just before its clock read, Stop() off just after its own
/// (ToggleCallgrindCollection, outside the span timed). Run with
/// `valgrind --tool=callgrind --collect-atstart=no` (and
/// `--trace-children=yes` for alkaid-measure's processes), the timed side's
/// profile holds its part of the timed round trips alone: not the body's
/// build or fill, the warm-up, the untimed waits, nor the start-up; the
/// other side's profile stays empty. With `--cache-sim=yes` the cache
/// simulation still runs outside the span, so the misses counted are those
/// of the timed part in the cache state the untimed work left.
class RoundTripTimer {
 public:
  void Start() {
    ToggleCallgrindCollection();
    t0_ = NowNs();
  }
  void Stop() {
    t1_ = NowNs();
    ToggleCallgrindCollection();
  }
  /// Half the round trip, in nanoseconds.
  int64_t HalfNs() const { return (t1_ - t0_) / 2; }

 private:
  int64_t t0_ = 0;
  int64_t t1_ = 0;
};

/// How long a ping-pong runs: at most `count` round trips, and no longer
/// than `duration_ns` (0: no limit; checked before each round trip).
struct LoopBounds {
  int64_t count = 0;
  int64_t duration_ns = 0;
};

/// Runs `step(i, &timer)` (a Status) for i = 0, 1, ... within `bounds`;
/// each step times its round trip with the timer, whose half goes into
/// `histogram`, and i + 1 into `progress` (if not null). Returns Cancelled
/// as soon as `stopping()` is true before a step, or the first error of a
/// step. The loop's duration goes to `*elapsed_ns` when it ends within its
/// bounds.
template <typename Stop, typename Step>
Status RunPingPongLoop(const LoopBounds& bounds, Histogram* histogram,
                       std::atomic<int64_t>* progress, int64_t* elapsed_ns, Stop&& stopping,
                       Step&& step) {
  RoundTripTimer timer;
  const int64_t start = NowNs();
  for (int64_t i = 0; i < bounds.count; ++i) {
    if (stopping()) return Status::Cancelled("stopped");
    if (bounds.duration_ns > 0 && NowNs() - start > bounds.duration_ns) break;
    ALKAID_RETURN_NOT_OK(step(i, &timer));
    histogram->Record(timer.HalfNs());
    if (progress != nullptr) progress->store(i + 1, std::memory_order_relaxed);
  }
  *elapsed_ns = NowNs() - start;
  return Status::OK();
}

}  // namespace alkaid::measure
