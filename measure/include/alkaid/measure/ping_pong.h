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

namespace alkaid::measure {

/// What a step times: Start() just before the ping leaves, Stop() once the
/// answer is in.
class RoundTripTimer {
 public:
  void Start() { t0_ = NowNs(); }
  void Stop() { t1_ = NowNs(); }
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
