// The channel (libshm/channel.h), the data path v2 transport, measured
// alone:
//
//   alkaid_shm_channel_bench [--sizes 64,4096,...] [--count N] [--mode spin|block|hybrid]
//       Ping-pong between two pinned processes: A lends a
//       block of the size, writes its first and last int64 (not timed),
//       publishes it; B receives it, reads both values and checks them,
//       answers with a message without body; A receives the answer.
//       One-way = round trip / 2. Before each timed ping an untimed one of
//       the same size. Printed beside the one-line floor of the same run:
//       the same two processes handing a counter over through one shared
//       cache line. --mode: how both sides wait (busy poll, futex, or spin
//       then futex).
//
//   alkaid_shm_channel_bench --stream N [--size B]
//       Throughput: A publishes N messages of B bytes (default 512: 64
//       int64 values written) as fast as it can; B receives each and reads
//       its first and last value. Messages per second at B.
//
//   alkaid_shm_channel_bench --inproc N [--size B]
//       One thread: lend a B-byte block (default 512), write its 64-bit
//       words, publish, receive into a reused message, read the first and
//       last word, return the previous body. For callgrind: the difference
//       of two iteration counts is the cost per message.

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "alkaid/measure/clock.h"
#include "alkaid/measure/floor.h"
#include "alkaid/measure/histogram.h"
#include "alkaid/measure/process.h"
#include "alkaid/measure/shared_mapping.h"
#include "alkaid/shm/channel.h"
#include "batch_ping.h"
#include "bench_util.h"

namespace {

using namespace alkaid;
using bench::Die;
using measure::NowNs;
using namespace std::chrono_literals;

int64_t ReadWord(std::span<const std::byte> body, std::size_t offset) {
  int64_t v;
  std::memcpy(&v, body.data() + offset, 8);
  return v;
}

void WriteWord(std::span<std::byte> body, std::size_t offset, int64_t v) {
  std::memcpy(body.data() + offset, &v, 8);
}

shm::ChannelOptions Options(uint64_t largest) {
  shm::ChannelOptions o;
  o.slot_count = 64;
  o.arena_bytes = std::max<uint64_t>(4 * largest + (1 << 20), 16 << 20);
  o.max_consumers = 4;
  o.publish_timeout = 10s;
  o.space_timeout = 10s;
  return o;
}

void InProcess(int64_t iterations, uint64_t size) {
  const std::string name = "alkaid_chbench_" + std::to_string(::getpid());
  auto producer = shm::ChannelProducer::Create(name, Options(size)).ValueOrDie();
  shm::ChannelConsumerOptions co;
  co.wait_mode = shm::WaitMode::kBusyPoll;
  auto consumer = shm::ChannelConsumer::Open(name, co).ValueOrDie();
  shm::ChannelMessage message;
  const std::size_t words = size / 8;
  int64_t sum = 0;
  for (int64_t i = 0; i < iterations; ++i) {
    auto loan = producer->Loan(size);
    if (!loan.ok()) Die(loan.status(), "Loan");
    auto* v = reinterpret_cast<int64_t*>(loan->data().data());
    for (std::size_t w = 0; w < words; ++w) v[w] = i + static_cast<int64_t>(w);
    CHECK_OK(producer->Publish({}, std::move(*loan)));
    auto got = consumer->TryReceive(&message);
    if (!got.ok() || !*got) Die(got.status(), "TryReceive");
    sum += ReadWord(message.body(), 0) + ReadWord(message.body(), size - 8);
  }
  message.Reset();
  consumer.reset();
  producer.reset();
  std::printf("in-process: %lld messages of %llu bytes (checksum %lld)\n",
              static_cast<long long>(iterations), static_cast<unsigned long long>(size),
              static_cast<long long>(sum));
}

struct Flags {
  alignas(64) std::atomic<uint64_t> ready;  // the child's channel exists
};

// The floor: a counter handed over through one cache line (100 untimed
// round trips first).
std::vector<int64_t> Floor(const measure::CpuPair& cpus, int count) {
  return measure::FloorSamples(cpus, static_cast<uint64_t>(count), 100);
}

// Receives the next message into `m`, as `mode` says: busy-polling
// TryReceive, or Receive (which sleeps on the futex in block and hybrid).
void Next(shm::ChannelConsumer* consumer, shm::WaitMode mode, shm::ChannelMessage* m) {
  if (mode == shm::WaitMode::kBusyPoll) {
    while (true) {
      auto got = consumer->TryReceive(m);
      if (!got.ok()) Die(got.status(), "receive");
      if (*got) return;
    }
  }
  CHECK_OK(consumer->Receive(m, 10s));
}

shm::ChannelConsumerOptions ConsumerOptions(shm::WaitMode mode) {
  shm::ChannelConsumerOptions co;
  co.wait_mode = mode;
  return co;
}

// One ping: A publishes `value` in a block of `size`, B answers `value`.
std::vector<int64_t> PingPong(const measure::CpuPair& cpus, uint64_t size, int count,
                              shm::WaitMode mode) {
  const std::string stem =
      "alkaid_chbench_" + std::to_string(::getpid()) + "_" + std::to_string(size);
  const std::string ab = stem + "_ab", ba = stem + "_ba";
  auto f = measure::SharedMapping<Flags>::MapOrDie();
  std::vector<int64_t> out(static_cast<size_t>(count));
  auto to_b = shm::ChannelProducer::Create(ab, Options(size));
  if (!to_b.ok()) Die(to_b.status(), "create");
  const pid_t child = measure::ForkPinned(cpus);
  if (child == 0) {
    auto from_a = shm::ChannelConsumer::Open(ab, ConsumerOptions(mode));
    if (!from_a.ok()) Die(from_a.status(), "open");
    auto to_a = shm::ChannelProducer::Create(ba, Options(64));
    if (!to_a.ok()) Die(to_a.status(), "create");
    f->ready.store(1, std::memory_order_release);
    shm::ChannelMessage m;
    for (int i = 0; i < 2 * count; ++i) {
      Next(from_a->get(), mode, &m);
      const int64_t first = ReadWord(m.body(), 0), last = ReadWord(m.body(), size - 8);
      if (first != last) {
        std::fprintf(stderr, "child: first %lld != last %lld\n", static_cast<long long>(first),
                     static_cast<long long>(last));
        ::_exit(2);
      }
      CHECK_OK((*to_a)->Publish({}, static_cast<uint64_t>(first)));
    }
    m.Reset();
    from_a->reset();
    to_a->reset();  // removes its names
    ::_exit(0);
  }
  while (f->ready.load(std::memory_order_acquire) == 0) {
  }
  auto from_b = shm::ChannelConsumer::Open(ba, ConsumerOptions(mode));
  if (!from_b.ok()) Die(from_b.status(), "open");
  shm::ChannelMessage m;
  auto round_trip = [&](int64_t value, bool timed) {
    auto loan = (*to_b)->Loan(size);
    if (!loan.ok()) Die(loan.status(), "loan");
    WriteWord(loan->data(), 0, value);
    WriteWord(loan->data(), size - 8, value);
    const int64_t t0 = timed ? NowNs() : 0;
    CHECK_OK((*to_b)->Publish({}, std::move(*loan)));
    Next(from_b->get(), mode, &m);
    if (m.user() != static_cast<uint64_t>(value)) {
      std::fprintf(stderr, "answer %llu for %lld\n", static_cast<unsigned long long>(m.user()),
                   static_cast<long long>(value));
      std::exit(1);
    }
    return timed ? (NowNs() - t0) / 2 : 0;
  };
  for (int i = 0; i < count; ++i) {
    (void)round_trip(-2 - i, false);  // warm-up of the same size
    out[i] = round_trip(i, true);
  }
  measure::AwaitChild(child);
  m.Reset();
  from_b->reset();
  return out;
}

// Messages per second received by a consumer process.
void Stream(const measure::CpuPair& cpus, int64_t count, uint64_t size) {
  const std::string name = "alkaid_chbench_" + std::to_string(::getpid()) + "_stream";
  auto f = measure::SharedMapping<Flags>::MapOrDie();
  auto rate = measure::SharedMapping<double>::MapOrDie();
  auto producer = shm::ChannelProducer::Create(name, Options(size));
  if (!producer.ok()) Die(producer.status(), "create");
  const pid_t child = measure::ForkPinned(cpus);
  if (child == 0) {
    auto consumer = shm::ChannelConsumer::Open(name, ConsumerOptions(shm::WaitMode::kBusyPoll));
    if (!consumer.ok()) Die(consumer.status(), "open");
    f->ready.store(1, std::memory_order_release);
    shm::ChannelMessage m;
    int64_t start = 0;
    for (int64_t i = 0; i < count; ++i) {
      Next(consumer->get(), shm::WaitMode::kBusyPoll, &m);
      if (i == 0) start = NowNs();
      if (ReadWord(m.body(), 0) != i || ReadWord(m.body(), size - 8) != i) {
        std::fprintf(stderr, "message %lld damaged\n", static_cast<long long>(i));
        ::_exit(2);
      }
    }
    *rate.get() = static_cast<double>(count - 1) * 1e9 / static_cast<double>(NowNs() - start);
    m.Reset();
    consumer->reset();
    ::_exit(0);
  }
  while (f->ready.load(std::memory_order_acquire) == 0) {
  }
  const std::size_t words = size / 8;
  const int64_t t0 = NowNs();
  for (int64_t i = 0; i < count; ++i) {
    auto loan = (*producer)->Loan(size);
    if (!loan.ok()) Die(loan.status(), "loan");
    auto* v = reinterpret_cast<int64_t*>(loan->data().data());
    for (std::size_t w = 0; w < words; ++w) v[w] = i;
    CHECK_OK((*producer)->Publish({}, std::move(*loan)));
  }
  const double publish_rate = static_cast<double>(count) * 1e9 / static_cast<double>(NowNs() - t0);
  measure::AwaitChild(child);
  std::printf("stream: %lld messages of %llu bytes: %.2f M/s received (%.2f M/s published)\n",
              static_cast<long long>(count), static_cast<unsigned long long>(size),
              *rate.get() / 1e6, publish_rate / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint64_t> sizes = {64, 4096, 65536, 1 << 20, 16 << 20};
  int count = 5000;
  int64_t inproc = -1;
  int64_t stream = -1;
  uint64_t inproc_size = 512;
  shm::WaitMode mode = shm::WaitMode::kBusyPoll;
  const char* mode_name = "spin";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--inproc") {
      inproc = std::atoll(next().c_str());
    } else if (a == "--stream") {
      stream = std::atoll(next().c_str());
    } else if (a == "--mode") {
      const std::string m = next();
      if (m == "spin") {
        mode = shm::WaitMode::kBusyPoll;
      } else if (m == "block") {
        mode = shm::WaitMode::kBlock;
      } else if (m == "hybrid") {
        mode = shm::WaitMode::kSpinThenBlock;
      } else {
        std::fprintf(stderr, "--mode spin|block|hybrid\n");
        return 2;
      }
      mode_name = argv[i];
    } else if (a == "--size") {
      inproc_size = std::strtoull(next().c_str(), nullptr, 10);
    } else if (a == "--count") {
      count = std::atoi(next().c_str());
    } else if (a == "--sizes") {
      sizes.clear();
      std::string list = next();
      for (size_t pos = 0; pos <= list.size();) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        sizes.push_back(std::strtoull(list.substr(pos, comma - pos).c_str(), nullptr, 10));
        pos = comma + 1;
      }
    } else {
      std::fprintf(stderr,
                   "usage: alkaid_shm_channel_bench [--sizes a,b,...] [--count N] "
                   "[--mode spin|block|hybrid] | --inproc N [--size B] | --stream N "
                   "[--size B]\n");
      return 2;
    }
  }
  if (inproc >= 0 || stream >= 0) {
    if (inproc_size < 8 || inproc_size % 8 != 0) {
      std::fprintf(stderr, "--size must be a positive multiple of 8\n");
      return 2;
    }
    if (inproc >= 0) {
      InProcess(inproc, inproc_size);
    } else {
      Stream(measure::PinToFirstTwoCpus(), std::max<int64_t>(stream, 2), inproc_size);
    }
    return 0;
  }
  for (uint64_t s : sizes) {
    if (s < 8) {
      std::fprintf(stderr, "sizes must be at least 8 bytes\n");
      return 2;
    }
  }
  const measure::CpuPair cpus = measure::PinToFirstTwoCpus();
  if (cpus.child < 0) std::fprintf(stderr, "warning: fewer than two CPUs; not pinned\n");
  const std::vector<int64_t> floor = Floor(cpus, count);
  const int64_t floor_p50 = measure::Quantile(floor, 0.5);
  std::printf("one-way latency, %s, %d pings per size (ns)\n", mode_name, count);
  std::printf("%10s %9s %9s %11s %13s\n", "size", "p50", "p99", "floor p50", "p50 / floor");
  for (uint64_t s : sizes) {
    const std::vector<int64_t> v = PingPong(cpus, s, count, mode);
    const int64_t p50 = measure::Quantile(v, 0.5);
    std::printf("%10llu %9lld %9lld %11lld %13.1f\n", static_cast<unsigned long long>(s),
                static_cast<long long>(p50), static_cast<long long>(measure::Quantile(v, 0.99)),
                static_cast<long long>(floor_p50),
                static_cast<double>(p50) / static_cast<double>(std::max<int64_t>(floor_p50, 1)));
  }
  return 0;
}
