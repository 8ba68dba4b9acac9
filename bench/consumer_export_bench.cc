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
// CallgrindTargetExportRelease: ExportBatch + release while Alkaid's
// reference still holds the block; CallgrindTargetDrop: dropping the last
// reference (the block goes back to the producer's return queue), which a
// receive without export pays too. Divide each inclusive Ir by N.

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/c_data.h"
#include "ten_column_batch.h"

namespace af = alkaid::format;
namespace ac = alkaid::client;

namespace {

using alkaid::bench::TenColumnBatch;

[[gnu::noinline]] af::RecordBatchPtr CallgrindTargetNext(ac::Consumer* consumer) {
  return consumer->Next(std::chrono::seconds(5)).ValueOrDie();
}

[[gnu::noinline]] void CallgrindTargetExportRelease(ac::Consumer* consumer,
                                                    const af::RecordBatch& batch) {
  ArrowArray c;
  if (!consumer->ExportBatch(batch, &c).ok()) std::abort();
  c.release(&c);
}

[[gnu::noinline]] void CallgrindTargetDrop(af::RecordBatchPtr* batch) { batch->reset(); }

int Run(const std::string& broker_bin, int64_t rows, int n) {
  const std::string name = "cxb" + std::to_string(::getpid());
  const std::string socket = "/tmp/alkaid-" + name + ".sock";
  const pid_t broker = ::fork();
  if (broker == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // the broker goes with us, also if we abort
    ::execl(broker_bin.c_str(), broker_bin.c_str(), "--socket", socket.c_str(), "--name",
            name.c_str(), "--log-level", "warn", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int code = 1;
  for (int i = 0; i < 500; ++i) {
    auto client = ac::BrokerClient::Connect(socket);
    if (client.ok() && (*client)->Stats().ok()) {
      code = 0;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (code == 0) {
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
      CallgrindTargetExportRelease(consumer.get(), *got);
      CallgrindTargetDrop(&got);
    }
    std::printf("%d batches of %lld rows received, exported and released\n", n,
                static_cast<long long>(rows));
    consumer.reset();
    (void)producer->Close();
  }
  ::kill(broker, SIGTERM);
  ::waitpid(broker, nullptr, 0);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s BROKER_BIN ROWS N\n", argv[0]);
    return 2;
  }
  return Run(argv[1], std::atoll(argv[2]), std::atoi(argv[3]));
}
