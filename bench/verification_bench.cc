// What a consumer's Verification mode costs per received batch of ~1 MiB
// (an int64 column, a utf8 column): the receive alone is timed (manual
// time), the publish before it is not. One process: a publisher and a
// subscriber on one channel.
//
//   alkaid_verification_bench [--benchmark_filter=...]
// Rows: <column>/<mode>, mode 0 structure, 1 full, 2 private copy; the
// bytes/s column is the body's size over the receive time.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/shm/channel.h"

namespace {

using namespace alkaid;  // NOLINT(google-build-using-namespace): a bench

constexpr int64_t kBytes = 1 << 20;

format::RecordBatchPtr MakeBatch(bool strings) {
  if (strings) {
    // 12-byte strings: 16 bytes per row with the offset.
    constexpr int64_t rows = kBytes / 16;
    format::StringBuilder b;
    for (int64_t i = 0; i < rows; ++i) {
      const std::string s = "value-" + std::to_string(100000 + i % 900000);
      if (!b.Append(s).ok()) std::abort();
    }
    auto a = b.Finish().ValueOrDie();
    return format::RecordBatch::Make(format::schema({format::field("s", format::utf8(), false)}),
                                     rows, {a})
        .ValueOrDie();
  }
  constexpr int64_t rows = kBytes / 8;
  format::Int64Builder b;
  if (!b.Reserve(rows).ok()) std::abort();
  for (int64_t i = 0; i < rows; ++i) b.UnsafeAppend(i);
  auto a = b.Finish().ValueOrDie();
  return format::RecordBatch::Make(format::schema({format::field("v", format::int64(), false)}),
                                   rows, {a})
      .ValueOrDie();
}

void BM_Receive(benchmark::State& state) {
  const bool strings = state.range(0) == 1;
  const auto mode = static_cast<client::Verification>(state.range(1));
  const auto batch = MakeBatch(strings);
  const std::string name = "alkaid_vb" + std::to_string(::getpid()) + "_" +
                           std::to_string(state.range(0)) + std::to_string(state.range(1));
  shm::ChannelOptions co;
  co.arena_bytes = 64 << 20;
  co.inline_capacity = 448;
  auto producer = shm::ChannelProducer::Create(name, co).ValueOrDie();
  auto publisher = client::BatchPublisher::Create(producer.get(), batch->schema()).ValueOrDie();
  client::SubscriberOptions so;
  so.verification = mode;
  so.consumer.wait_mode = shm::WaitMode::kBusyPoll;
  auto subscriber = client::BatchSubscriber::Open(name, batch->schema(), so).ValueOrDie();
  int64_t body = 0;
  for (auto _ : state) {
    if (!publisher->PublishCopy(*batch).ok()) std::abort();
    const auto t0 = std::chrono::steady_clock::now();
    auto got = subscriber->Receive(std::chrono::seconds(1));
    const auto t1 = std::chrono::steady_clock::now();
    if (!got.ok() || got->batch == nullptr) std::abort();
    body = got->body->size();
    benchmark::DoNotOptimize(got->batch);
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
  state.SetBytesProcessed(state.iterations() * body);
  state.SetLabel(std::string(strings ? "utf8" : "int64") + " " + client::VerificationName(mode));
  subscriber.reset();
  publisher.reset();
  producer.reset();
  (void)shm::RemoveChannel(name);
}
BENCHMARK(BM_Receive)
    ->ArgsProduct({{0, 1}, {0, 1, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
