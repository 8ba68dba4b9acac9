// One-way inter-process latency of publishing a record batch through the
// client glue, against the body size, beside the floor measured in the same
// run: two processes ping-ponging on one shared cache line.
//
// For each body size, the parent builds a batch (one int64 column) in place
// in shared memory (not timed), then times: Publish -> the child (another
// process, busy-polling) rebuilds the batch zero-copy and reads its first
// and last value -> the child answers with a small ring message (no body)
// -> the parent receives it. One-way = round trip / 2. Only the metadata
// crosses the ring, so the latency must not grow with the body size.
//
// Usage: alkaid_shm_latency_bench [iterations-scale, default 1]

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/shm/segment.h"

namespace {

using namespace alkaid;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

void Die(const Status& st, const char* what) {
  std::fprintf(stderr, "%s: %s\n", what, st.ToString().c_str());
  std::exit(1);
}

#define CHECK_OK(expr)                   \
  do {                                   \
    ::alkaid::Status _s = (expr);        \
    if (!_s.ok()) Die(_s, #expr);        \
  } while (false)

struct Figures {
  double median_ns;
  double p99_ns;
};

Figures Summarize(std::vector<double> one_way_ns) {
  std::sort(one_way_ns.begin(), one_way_ns.end());
  const size_t n = one_way_ns.size();
  return {one_way_ns[n / 2], one_way_ns[std::min(n - 1, n * 99 / 100)]};
}

// The floor: one shared cache line, parent writes 2k+1, child answers 2k+2.
Figures CacheLinePingPong(int iterations) {
  void* mem = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  auto* word = new (mem) std::atomic<uint64_t>(0);
  const pid_t child = ::fork();
  if (child == 0) {
    for (uint64_t k = 0; k < static_cast<uint64_t>(iterations); ++k) {
      while (word->load(std::memory_order_acquire) != 2 * k + 1) {
      }
      word->store(2 * k + 2, std::memory_order_release);
    }
    ::_exit(0);
  }
  std::vector<double> samples;
  for (uint64_t k = 0; k < static_cast<uint64_t>(iterations); ++k) {
    const auto t0 = Clock::now();
    word->store(2 * k + 1, std::memory_order_release);
    while (word->load(std::memory_order_acquire) != 2 * k + 2) {
    }
    samples.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / 2);
  }
  ::waitpid(child, nullptr, 0);
  ::munmap(mem, 4096);
  return Summarize(std::move(samples));
}

Figures BatchPingPong(uint64_t body_bytes, int iterations) {
  const std::string tag = std::to_string(::getpid()) + "_" + std::to_string(body_bytes);
  const std::string bodies_name = "alkaid_lat_b" + tag;
  const std::string ping_name = "alkaid_lat_p" + tag;
  const std::string pong_name = "alkaid_lat_q" + tag;
  const uint64_t rows = std::max<uint64_t>(1, body_bytes / 8);
  const uint64_t region = rows * 8 + 4096;
  shm::RingOptions ro;
  ro.slot_count = 4;
  ro.publish_timeout = 30s;
  shm::BodyAllocatorOptions bo;
  bo.wait_timeout = 30s;
  auto schema = format::schema({format::field("v", format::int64(), false)});

  auto bodies = shm::BodyAllocator::Create(bodies_name, 8 * region, bo).ValueOrDie();
  auto ping = shm::RingProducer::Create(ping_name, ro, bodies.get()).ValueOrDie();
  auto pong_ring = shm::RingProducer::Create(pong_name, ro).ValueOrDie();
  shm::ConsumerOptions busy;
  busy.wait_mode = shm::WaitMode::kBusyPoll;
  // The child attaches before fork returns in the parent: open it here.
  auto pong = shm::RingConsumer::Open(pong_name, busy).ValueOrDie();

  client::SubscriberOptions so;
  so.consumer.wait_mode = shm::WaitMode::kBusyPoll;
  auto sub = client::BatchSubscriber::Open(ping_name, bodies_name, schema, so).ValueOrDie();
  const pid_t child = ::fork();
  if (child == 0) {
    // Registrations live in shared memory: the child leaves the parent's
    // pong consumer alone and publishes pongs on the ring the parent
    // created, as that ring's only producer from now on.
    for (int i = 0; i < iterations; ++i) {
      auto got = sub->Receive(60s);
      if (!got.ok()) Die(got.status(), "child receive");
      auto values = std::static_pointer_cast<format::Int64Array>(got->batch->column(0));
      const int64_t first = values->Value(0);
      const int64_t last = values->Value(values->length() - 1);
      if (first != i || last != i + static_cast<int64_t>(rows) - 1) {
        std::fprintf(stderr, "child: batch %d has values %lld..%lld\n", i,
                     static_cast<long long>(first), static_cast<long long>(last));
        ::_exit(2);
      }
      got->batch.reset();
      const int64_t reply = first + last;
      CHECK_OK(pong_ring->Publish(
          std::span<const std::byte>(reinterpret_cast<const std::byte*>(&reply), 8)));
    }
    ::_exit(0);
  }
  // The parent keeps `sub` (the child's registration) untouched until the
  // child is done.
  auto publisher = client::BatchPublisher::Create(ping.get(), bodies.get(), schema).ValueOrDie();
  std::vector<double> samples;
  shm::RingMessage msg;
  std::vector<int64_t> values(rows);
  for (int i = 0; i < iterations; ++i) {
    // Not timed: build the batch in place in shared memory.
    auto pool = publisher->NewPool(region).ValueOrDie();
    format::Int64Builder builder(pool.get());
    for (uint64_t r = 0; r < rows; ++r) values[r] = i + static_cast<int64_t>(r);
    CHECK_OK(builder.AppendValues(values));
    auto array = builder.Finish().ValueOrDie();
    auto batch =
        format::RecordBatch::Make(schema, static_cast<int64_t>(rows), {array}).ValueOrDie();

    const auto t0 = Clock::now();
    CHECK_OK(publisher->Publish(*batch, pool.get()));
    CHECK_OK(pong->Receive(&msg, 60s));
    const auto t1 = Clock::now();
    samples.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / 2);
    batch.reset();
    array.reset();
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "child failed\n");
    std::exit(1);
  }
  publisher.reset();
  sub.reset();
  pong.reset();
  pong_ring.reset();
  ping.reset();
  bodies.reset();
  (void)shm::Segment::Remove(bodies_name);
  (void)shm::Segment::Remove(ping_name);
  (void)shm::Segment::Remove(pong_name);
  return Summarize(std::move(samples));
}

}  // namespace

int main(int argc, char** argv) {
  const double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
  auto iters = [&](int n) { return std::max(10, static_cast<int>(n * scale)); };
  std::printf("%-28s %12s %12s %10s\n", "case (one-way, busy-poll)", "median ns", "p99 ns",
              "samples");
  const Figures floor = CacheLinePingPong(iters(20000));
  std::printf("%-28s %12.0f %12.0f %10d\n", "floor: shared cache line", floor.median_ns,
              floor.p99_ns, iters(20000));
  const struct {
    const char* name;
    uint64_t bytes;
    int n;
  } cases[] = {{"batch body 64 B", 64, 5000},       {"batch body 4 KiB", 4096, 5000},
               {"batch body 64 KiB", 65536, 2000},  {"batch body 1 MiB", 1 << 20, 300},
               {"batch body 16 MiB", 16 << 20, 40}};
  for (const auto& c : cases) {
    const Figures f = BatchPingPong(c.bytes, iters(c.n));
    std::printf("%-28s %12.0f %12.0f %10d\n", c.name, f.median_ns, f.p99_ns, iters(c.n));
  }
  return 0;
}
