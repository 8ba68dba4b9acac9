#pragma once

// `alkaid latency`: measures the broker's publish-to-receive latency and
// throughput between processes, beside baselines measured in the same run.
// See docs/PERFORMANCE.md.

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace alkaid::tools {

struct LatencyOptions {
  std::string layer = "client";  ///< client (processes, a broker) | inproc (one thread)
  std::string sizes;          ///< body bytes, comma-separated; empty: 64 B to 16 MiB (inproc: 512)
  int64_t count = 10000;      ///< samples (pingpong) or batches (stream) per size
  double duration = 10;       ///< at most this many seconds per (transport, size); 0: no limit
  std::string mode = "spin";  ///< spin | block | hybrid
  std::string pattern;        ///< pingpong | stream; empty: pingpong (inproc: stream)
  int consumers = 1;          ///< stream: consumer processes
  std::string compare;        ///< comma-separated baselines: floor, body, uds
  std::string json;           ///< JSON report path, "-" for stdout; empty: none
  std::string hgrm;           ///< directory for .hgrm files; empty: none
  std::string socket;         ///< broker socket; empty: the client's default
  bool progress = false;      ///< progress line even if stderr is not a terminal
  bool no_warmup = false;     ///< pingpong: no untimed round trip before each ping
  std::string writer = "build";  ///< stream: how each batch is made: build | fixed
  bool timestamps = false;  ///< topics stamp their publish times (TopicOptions::publish_timestamps)
  bool no_pin = false;      ///< do not pin processes to CPUs
  double idle = 0.5;        ///< seconds of the idle-CPU measurement
};

/// Runs the measurement; exit code 0, 1 (runtime failure), 2 (usage),
/// 130 (interrupted).
int RunLatency(const LatencyOptions& options);

/// Registers `alkaid latency` on `app`; its callback stores the exit code
/// in `*code`.
void AddLatencyCommand(CLI::App* app, int* code);

}  // namespace alkaid::tools
