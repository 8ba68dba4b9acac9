// What the first touch of a body page costs a consumer when its caches and
// TLB are cold, with 4 KiB pages and with transparent huge pages
// (SegmentOptions::huge_pages). The answer to "is a large batch slower to
// receive because of its size?": a receiver touches a handful of lines of
// the body (metadata, first and last value), each on a page whose
// translation may be cold; on a VM with nested paging, a page-table walk on
// cold page tables costs several cache misses.
//
// For each page size, N times: write 64 MiB of private memory (evicts the
// caches and the TLB), then time
//   cold:  one load from a random page of a 32 MiB segment (translation and
//          line both cold),
//   line:  a load from another line of the same page right after
//          (translation warm, line cold): the cache miss alone,
// and report medians; cold - line is the page walk.
//
// Usage: alkaid_shm_page_walk_bench [samples, default 400]

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "alkaid/measure/clock.h"
#include "alkaid/measure/histogram.h"
#include "alkaid/shm/segment.h"

namespace {

using namespace alkaid;

using measure::NowNs;

double Median(const std::vector<double>& v) { return measure::Quantile(v, 0.5); }

// Times one load; the clock's own cost is subtracted by the caller.
inline double TimedLoad(const volatile std::byte* p) {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const int64_t t0 = NowNs();
  (void)*p;
  const int64_t t1 = NowNs();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  return static_cast<double>(t1 - t0);
}

void Run(shm::HugePages huge, int samples) {
  const std::string name = "alkaid_page_walk_" + std::to_string(::getpid());
  shm::SegmentOptions options;
  options.huge_pages = huge;
  constexpr uint64_t kSegment = 32u << 20;
  auto created = shm::Segment::Create(name, kSegment, shm::SegmentKind::kRaw, options);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    std::exit(1);
  }
  auto segment = *created;
  const char* label = segment->huge_pages() ? "2 MiB pages" : "4 KiB pages";
  if (huge != shm::HugePages::kOff && !segment->huge_pages()) {
    std::printf("huge pages unavailable: %s\n", segment->huge_pages_error().c_str());
  }
  std::vector<uint8_t> scratch(64u << 20);
  std::mt19937_64 rng(42);
  std::vector<double> clock_cost, cold, line;
  for (int i = 0; i < 1000; ++i) {
    const int64_t t0 = NowNs();
    const int64_t t1 = NowNs();
    clock_cost.push_back(static_cast<double>(t1 - t0));
  }
  const double overhead = Median(clock_cost);
  const auto* base = static_cast<const volatile std::byte*>(segment->data());
  for (int i = 0; i < samples; ++i) {
    std::memset(scratch.data(), i & 0xff, scratch.size());
    const uint64_t page = rng() % (kSegment / 4096 - 1);
    const volatile std::byte* p = base + page * 4096;
    cold.push_back(TimedLoad(p) - overhead);
    line.push_back(TimedLoad(p + 2048) - overhead);
  }
  // Keep the evicting stores: read one back.
  if (scratch[static_cast<size_t>(rng() % scratch.size())] != ((samples - 1) & 0xff)) std::abort();
  const double c = Median(cold);
  const double l = Median(line);
  std::printf("%-12s cold page+line %5.0f ns   line only %5.0f ns   page walk %5.0f ns\n", label, c,
              l, c - l);
  segment.reset();
  (void)shm::Segment::Remove(name);
}

}  // namespace

int main(int argc, char** argv) {
  const int samples = argc >= 2 ? std::max(10, std::atoi(argv[1])) : 400;
  double load[3] = {0, 0, 0};
  (void)::getloadavg(load, 3);
  std::printf("load average %.2f %.2f %.2f; %d samples; medians, clock cost subtracted\n", load[0],
              load[1], load[2], samples);
  Run(shm::HugePages::kOff, samples);
  Run(shm::HugePages::kTry, samples);
  return 0;
}
