#pragma once

/// \file
/// The results of a measurement program and how they are reported: a row
/// per transport and size (Measurement), printed as a table, written as
/// the JSON of `alkaid-measure --json`. alkaid-measure and the iceoryx
/// 2.0 peer (bench/peers/) write through this, so that
/// scripts/perf-report.sh reads them alike.

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "alkaid/common/status.h"
#include "alkaid/measure/histogram.h"

namespace alkaid::measure {

/// Memory figures taken by a stream's consumer 0 at a checkpoint.
struct MemorySample {
  int64_t messages = 0;      ///< batches received when taken
  int64_t producer_rss = 0;  ///< bytes resident (VmRSS, shared pages included)
  int64_t consumer_rss = 0;
  int64_t broker_rss = 0;      ///< 0: not measured (a broker this run did not start)
  int64_t segments_bytes = 0;  ///< /dev/shm bytes allocated to the broker's segments
};

/// A paired run's figures beside its size's: the 64 B pings' p50 and the
/// paired differences (size - 64 B, one-way, per pair): median and the
/// 95 % interval of the median (MedianWithInterval).
struct Paired {
  int64_t pairs = 0;  ///< 0: not a paired run
  int64_t p50_64_ns = 0;
  int64_t diff_p50_ns = 0;
  int64_t diff_lo_ns = 0;
  int64_t diff_hi_ns = 0;
};

/// What one measurement (a transport at a size) gives: one row of the
/// results. Optional parts are reported only when set.
struct Measurement {
  std::string transport;    ///< alkaid | floor | body | uds | a peer's name
  std::string layer;        ///< alkaid-measure's rows: channel | client | inproc; else empty
  std::string mode;         ///< how the receiver waits: spin | block | hybrid
  std::string wait;         ///< a peer's own name for its mode (JSON "wait"); empty: none
  std::string pattern;      ///< pingpong | stream | paired
  std::string writer;       ///< alkaid stream runs: build | fixed; else empty
  bool timestamps = false;  ///< alkaid: the topics stamped publish times
  int64_t payload_bytes = 0;
  int consumers = 1;
  double msgs_per_s = 0;
  bool has_idle = false;  ///< idle_cpu_ns and idle_wall_ns were measured
  int64_t idle_cpu_ns = 0;
  int64_t idle_wall_ns = 0;
  Summary summary;                       ///< inproc: samples and mean_ns only
  std::shared_ptr<Histogram> histogram;  ///< null: not timed one by one (JSON null percentiles)
  std::vector<MemorySample> memory;
  Paired paired;
};

/// The table of the rows of `size` in `all`: percentiles, samples and
/// rate, then each row's p50 and p99 over each of `baselines` (transports
/// of the same size); then, where measured, the paired figures, alkaid's
/// overhead over the body floor, memory samples and idle CPU.
void PrintRows(std::ostream& out, const std::vector<Measurement>& all, int64_t size,
               const std::vector<std::string>& baselines);

/// Writes `{"results": [a row per measurement], "host": {cpus online,
/// `cpus` pinned, load average}}` to `path`, or to stdout if it is "-";
/// IOError naming the path if it cannot be written.
Status WriteJson(const std::string& path, const std::vector<Measurement>& all,
                 const std::vector<int>& cpus);

}  // namespace alkaid::measure
