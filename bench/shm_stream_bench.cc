// The command the object-model issue and docs/PERFORMANCE.md quote for the
// data path's instructions per batch, kept as a front end of the one loop
// (`alkaid latency --layer inproc`, tools/alkaid/latency_inproc.cc):
//
//   alkaid_shm_stream_bench --inproc N [--fixed] [--stamp]
//
// publishes, receives, checks and drops N batches of one int64 column x 64
// rows in one thread (after 1,000 untimed), with builders or (--fixed) a
// FixedShapeWriter, and prints the time per batch. Under callgrind, the
// count at N = 30,000 minus the count at N = 10,000, over 20,000, is the
// instructions per batch.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "latency_internal.h"

int main(int argc, char** argv) {
  namespace lat = alkaid::tools::latency;
  lat::RunSpec spec;
  spec.layer = "inproc";
  spec.pattern = "stream";
  spec.payload_bytes = 512;
  spec.count = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--inproc") == 0 && i + 1 < argc) {
      spec.count = std::strtoll(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--fixed") == 0) {
      spec.writer = "fixed";
    } else if (std::strcmp(argv[i], "--stamp") == 0) {
      spec.timestamps = true;
    } else {
      spec.count = 0;
      break;
    }
  }
  if (spec.count <= 0) {
    (void)std::fprintf(stderr, "usage: %s --inproc N [--fixed] [--stamp]  (N > 0)\n", argv[0]);
    return 2;
  }
  spec.topic_prefix = "alkaid_stream_i" + std::to_string(::getpid());
  lat::Measurement m;
  const alkaid::Status st = lat::MeasureInProcess(spec, &m);
  if (!st.ok()) {
    (void)std::fprintf(stderr, "alkaid_shm_stream_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  (void)std::printf("[%s] in-process publish + receive + decode (one thread): %.0f ns per batch\n",
                    spec.writer == "fixed" ? "FixedShapeWriter" : "built per batch",
                    m.summary.mean_ns);
  return 0;
}
