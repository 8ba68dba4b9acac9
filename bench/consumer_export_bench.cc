// What handing a received batch to foreign code costs beside receiving it:
// a 10-column batch (7 fixed-width columns, bool, utf8, list<int32>; the
// batch of c_data_bench.cc) published through a real alkaid-broker's topic,
// received with Consumer::Next, exported with Consumer::ExportBatch and
// released (as Arrow C++ or pyarrow would release it), in one process.
// Each step runs in its own function named CallgrindTarget*, so one
// callgrind run gives them side by side:
//
//   alkaid_consumer_export_bench BROKER_BIN ROWS N
//   valgrind --tool=callgrind --toggle-collect='*CallgrindTarget*'
//     --callgrind-out-file=cg.out alkaid_consumer_export_bench BROKER_BIN 1000 100
//   (one command line)
//   callgrind_annotate --inclusive=yes cg.out | grep CallgrindTarget
//
// CallgrindTargetNext: Consumer::Next (the receive, decode-cache hit);
// CallgrindTargetColumns: column(0..9), each column's typed array, as a
// reader of the batch takes them (their lengths summed);
// CallgrindTargetExportRelease: ExportBatch + release while Alkaid's
// reference still holds the block; CallgrindTargetDrop: dropping the last
// reference (the block goes back to the producer's return queue), which a
// receive without export pays too. Divide each inclusive Ir by N.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/c_data.h"
#include "alkaid/measure/broker.h"
#include "ten_column_batch.h"

namespace af = alkaid::format;
namespace ac = alkaid::client;

namespace {

using alkaid::bench::TenColumnBatch;

[[gnu::noinline]] af::RecordBatchPtr CallgrindTargetNext(ac::Consumer* consumer) {
  return consumer->Next(std::chrono::seconds(5)).ValueOrDie();
}

[[gnu::noinline]] int64_t CallgrindTargetColumns(const af::RecordBatch& batch) {
  int64_t sum = 0;
  for (int c = 0; c < batch.num_columns(); ++c) sum += batch.column(c)->length();
  return sum;
}

[[gnu::noinline]] void CallgrindTargetExportRelease(ac::Consumer* consumer,
                                                    const af::RecordBatch& batch) {
  ArrowArray c;
  if (!consumer->ExportBatch(batch, &c).ok()) std::abort();
  c.release(&c);
}

[[gnu::noinline]] void CallgrindTargetDrop(af::RecordBatchPtr* batch) { batch->reset(); }

int Run(const std::string& broker_bin, int64_t rows, int n) {
  alkaid::measure::PrivateBroker broker;
  if (const auto st = broker.Start("alkaid-cxb", "consumer_export_bench", broker_bin); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  const std::string& socket = broker.socket();
  auto batch = TenColumnBatch(rows);
  ac::ProducerOptions po;
  po.socket_path = socket;
  po.topic.arena_bytes = 192 << 20;  // a 1,000,000-row batch is 54 MiB
  ac::ConsumerOptions co;
  co.socket_path = socket;
  auto producer = ac::Producer::Open("bench", batch->schema(), po).ValueOrDie();
  auto consumer = ac::Consumer::Open("bench", co).ValueOrDie();
  // Warm-up: the decode cache learns the shape.
  for (int i = 0; i < 2; ++i) {
    if (!producer->PublishCopy(*batch).ok()) std::abort();
    (void)consumer->Next(std::chrono::seconds(5)).ValueOrDie();
  }
  // One batch in flight at a time, so that large ones fit the segment.
  for (int i = 0; i < n; ++i) {
    if (!producer->PublishCopy(*batch).ok()) std::abort();
    auto got = CallgrindTargetNext(consumer.get());
    if (CallgrindTargetColumns(*got) != rows * got->num_columns()) std::abort();
    CallgrindTargetExportRelease(consumer.get(), *got);
    CallgrindTargetDrop(&got);
  }
  std::printf("%d batches of %lld rows received, exported and released\n", n,
              static_cast<long long>(rows));
  consumer.reset();
  (void)producer->Close();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s BROKER_BIN ROWS N\n", argv[0]);
    return 2;
  }
  return Run(argv[1], std::atoll(argv[2]), std::atoi(argv[3]));
}
