// Publish+receive throughput of small inline messages through a channel
// (libshm/channel.h), with one and four consumer threads, beside a mutex-protected
// std::queue baseline measured in the same run. Inter-process latency is
// measured by the broker's latency tool, not here.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/shm/channel.h"

namespace {

using alkaid::shm::ChannelConsumer;
using alkaid::shm::ChannelConsumerOptions;
using alkaid::shm::ChannelMessage;
using alkaid::shm::ChannelOptions;
using alkaid::shm::ChannelProducer;

constexpr std::size_t kMessageSize = 64;

std::string BenchName() {
  static int counter = 0;
  return "alkaid_bench_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
}

// Each iteration publishes one 64-byte inline message (no body) that every
// consumer thread receives (block policy). Second argument: consumer wait
// mode (0 busy-poll, 2 spin-then-block).
void BM_ShmChannel(benchmark::State& state) {
  const int consumers = static_cast<int>(state.range(0));
  const std::string name = BenchName();
  ChannelOptions options;
  options.slot_count = 4096;
  options.inline_capacity = 128;
  options.max_consumers = 4;
  options.arena_bytes = 4096;  // the messages carry no body
  options.publish_timeout = std::chrono::seconds(30);
  auto producer_r = ChannelProducer::Create(name, options);
  if (!producer_r.ok()) {
    state.SkipWithError(producer_r.status().ToString().c_str());
    return;
  }
  auto producer = std::move(producer_r).ValueOrDie();
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (int i = 0; i < consumers; ++i) {
    threads.emplace_back([&] {
      ChannelConsumerOptions co;
      co.wait_mode = static_cast<alkaid::shm::WaitMode>(state.range(1));
      auto c = ChannelConsumer::Open(name, co).ValueOrDie();
      ready.fetch_add(1);
      ChannelMessage msg;
      uint64_t sum = 0;
      while (c->Receive(&msg, std::chrono::seconds(30)).ok()) sum += msg.payload().size();
      benchmark::DoNotOptimize(sum);
    });
  }
  while (ready.load() < consumers) std::this_thread::yield();
  std::array<std::byte, kMessageSize> payload{};
  for (auto _ : state) {
    if (!producer->Publish(payload).ok()) {
      state.SkipWithError("publish failed");
      break;
    }
  }
  producer->Close();
  for (auto& t : threads) t.join();
  producer.reset();  // removes the channel's names
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * kMessageSize);
}
BENCHMARK(BM_ShmChannel)
    ->ArgsProduct({{1, 4},
                   {static_cast<int>(alkaid::shm::WaitMode::kBusyPoll),
                    static_cast<int>(alkaid::shm::WaitMode::kSpinThenBlock)}})
    ->UseRealTime();

// Baseline: one mutex-protected std::queue per consumer (broadcast by
// copying), the obvious in-process alternative.
void BM_MutexQueue(benchmark::State& state) {
  const int consumers = static_cast<int>(state.range(0));
  using Msg = std::array<std::byte, kMessageSize>;
  struct Queue {
    std::mutex mu;
    std::condition_variable cv;
    std::queue<Msg, std::deque<Msg>> q;
    bool closed = false;
  };
  std::vector<std::unique_ptr<Queue>> queues;
  for (int i = 0; i < consumers; ++i) queues.push_back(std::make_unique<Queue>());
  std::vector<std::thread> threads;
  for (int i = 0; i < consumers; ++i) {
    threads.emplace_back([q = queues[i].get()] {
      uint64_t sum = 0;
      while (true) {
        std::unique_lock lock(q->mu);
        q->cv.wait(lock, [&] { return !q->q.empty() || q->closed; });
        if (q->q.empty()) break;
        sum += q->q.front().size();
        q->q.pop();
      }
      benchmark::DoNotOptimize(sum);
    });
  }
  Msg payload{};
  constexpr std::size_t kBound = 4096;  // same capacity as the channel
  for (auto _ : state) {
    for (auto& q : queues) {
      while (true) {
        std::unique_lock lock(q->mu);
        if (q->q.size() < kBound) {
          q->q.push(payload);
          break;
        }
        lock.unlock();
        std::this_thread::yield();
      }
      q->cv.notify_one();
    }
  }
  for (auto& q : queues) {
    {
      std::lock_guard lock(q->mu);
      q->closed = true;
    }
    q->cv.notify_one();
  }
  for (auto& t : threads) t.join();
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * kMessageSize);
}
BENCHMARK(BM_MutexQueue)->Arg(1)->Arg(4)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
