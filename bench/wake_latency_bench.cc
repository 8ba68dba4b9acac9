// Wake latency of a sleeping consumer, through the C ABI: the futex wait
// (alkaid_consumer_next with a timeout, ALKAID_WAIT_BLOCK: no spinning)
// beside the pollable descriptor (alkaid_consumer_wait_fd and epoll_wait),
// in one run, alternating every 100 batches so that both see the same
// machine (after 100 batches of warm-up, not counted). A forked producer publishes a one-row batch
// every --period-us, long after the consumer went to sleep; the row is the CLOCK_MONOTONIC time
// just before alkaid_producer_publish_loan, and the latency is the consumer's clock when it holds
// the batch minus that.
//
//   alkaid_wake_latency_bench [--batches N] [--period-us U] [--broker PATH]

#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "alkaid/alkaid.h"
#include "alkaid/format/c_data.h"
#include "alkaid/format/type.h"
#include "alkaid/measure/broker.h"
#include "alkaid/measure/clock.h"

namespace {

using alkaid::measure::NowNs;

[[noreturn]] void Die(const char* what) {
  (void)std::fprintf(stderr, "wake_latency_bench: %s: %s\n", what, alkaid_last_error());
  std::_Exit(1);  // no atexit handlers: also the forked producer's way out
}

constexpr int64_t kBlock = 100;   // batches per mode before switching
constexpr int64_t kWarmUp = 100;  // batches first, both modes, not recorded

// Batch i (counting the warm-up) is awaited on the descriptor.
bool EpollMode(int64_t i) { return i < kWarmUp ? i % 2 == 1 : ((i - kWarmUp) / kBlock) % 2 == 1; }

int RunProducer(const std::string& socket, int64_t batches, int64_t period_us) {
  ArrowSchema schema{};
  const auto s =
      alkaid::format::schema({alkaid::format::field("stamp", alkaid::format::int64(), false)});
  if (!alkaid::format::ExportSchema(*s, &schema).ok()) return 1;
  alkaid_producer_options po;
  alkaid_producer_options_init(&po);
  po.socket_path = socket.c_str();
  po.wait_for_consumers_ms = 30000;
  alkaid_producer* p = nullptr;
  if (alkaid_producer_open("wake", &schema, &po, &p) != ALKAID_OK) Die("producer open");
  for (int64_t i = 0; i < batches; ++i) {
    const timespec pause{0, period_us * 1000};
    ::nanosleep(&pause, nullptr);
    alkaid_loan* loan = nullptr;
    if (alkaid_producer_loan(p, 1, nullptr, 0, &loan) != ALKAID_OK) Die("loan");
    void* data = nullptr;
    int64_t size = 0;
    if (alkaid_loan_buffer(loan, 0, 1, &data, &size) != ALKAID_OK) Die("loan buffer");
    *static_cast<int64_t*>(data) = NowNs();
    if (alkaid_producer_publish_loan(p, loan) != ALKAID_OK) Die("publish");
  }
  return alkaid_producer_close(p) == ALKAID_OK ? 0 : 1;
}

void Report(const char* name, std::vector<int64_t> ns) {
  std::sort(ns.begin(), ns.end());
  auto at = [&](double q) {
    return static_cast<double>(ns[static_cast<size_t>(q * static_cast<double>(ns.size() - 1))]) /
           1000.0;
  };
  std::printf("%-34s %6zu %9.1f %9.1f %9.1f %9.1f\n", name, ns.size(), at(0.5), at(0.9), at(0.99),
              at(1.0));
}

}  // namespace

int main(int argc, char** argv) {
  int64_t batches = 2000;
  int64_t period_us = 2000;
  std::string broker_bin = ALKAID_BROKER_BIN;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : "";
    char* end = nullptr;
    const long long number = std::strtoll(value, &end, 10);
    const bool positive = end != value && *end == '\0' && number > 0;
    if (flag == "--batches" && positive) {
      batches = number;
    } else if (flag == "--period-us" && positive) {
      period_us = number;
    } else if (flag == "--broker" && *value != '\0') {
      broker_bin = value;
    } else {
      (void)std::fprintf(stderr, "usage: %s [--batches N] [--period-us U] [--broker PATH]\n",
                         argv[0]);
      return 2;
    }
  }
  batches = std::max<int64_t>(batches / (2 * kBlock), 1) * 2 * kBlock;
  alkaid::measure::PrivateBroker broker;
  if (const auto st = broker.Start("alkaid-wakebench", "wake_latency_bench", broker_bin);
      !st.ok()) {
    (void)std::fprintf(stderr, "wake_latency_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  const std::string& socket = broker.socket();

  (void)std::fflush(nullptr);
  const pid_t producer = ::fork();
  if (producer == 0) ::_exit(RunProducer(socket, kWarmUp + batches, period_us));

  alkaid_consumer_options co;
  alkaid_consumer_options_init(&co);
  co.socket_path = socket.c_str();
  co.wait_for_topic_ms = 30000;
  co.wait_mode = ALKAID_WAIT_BLOCK;
  alkaid_consumer* c = nullptr;
  if (alkaid_consumer_open("wake", &co, &c) != ALKAID_OK) Die("consumer open");
  int fd = -1;
  if (alkaid_consumer_wait_fd(c, &fd) != ALKAID_OK) Die("wait fd");
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  ArrowArray none{};
  (void)alkaid_consumer_next(c, 0, &none, nullptr, nullptr);  // registers

  std::vector<int64_t> futex_ns;
  std::vector<int64_t> epoll_ns;
  int64_t epoll_wakes = 0;
  for (int64_t i = 0; i < kWarmUp + batches; ++i) {
    ArrowArray out{};
    alkaid_status st;
    if (EpollMode(i)) {
      while ((st = alkaid_consumer_next(c, 0, &out, nullptr, nullptr)) == ALKAID_TIMED_OUT) {
        epoll_event got{};
        if (::epoll_wait(ep, &got, 1, 10000) == 1 && i >= kWarmUp) ++epoll_wakes;
      }
    } else {
      st = alkaid_consumer_next(c, 10000, &out, nullptr, nullptr);
    }
    const int64_t now = NowNs();
    if (st != ALKAID_OK) Die("next");
    const int64_t stamp = static_cast<const int64_t*>(out.children[0]->buffers[1])[0];
    if (i >= kWarmUp) (EpollMode(i) ? epoll_ns : futex_ns).push_back(now - stamp);
    out.release(&out);
  }
  (void)alkaid_consumer_next(c, 10000, &none, nullptr, nullptr);  // the end
  alkaid_consumer_close(c);
  int status = 0;
  ::waitpid(producer, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    (void)std::fprintf(stderr, "wake_latency_bench: the producer failed\n");
    return 1;
  }
  std::printf("one-way latency of a sleeping consumer's wake, publish to batch in hand, us\n");
  std::printf(
      "(a 1-row batch every %lld us, modes alternating every %lld batches; %lld epoll "
      "wakes)\n",
      static_cast<long long>(period_us), static_cast<long long>(kBlock),
      static_cast<long long>(epoll_wakes));
  std::printf("%-34s %6s %9s %9s %9s %9s\n", "wait", "n", "p50", "p90", "p99", "max");
  Report("futex (next, ALKAID_WAIT_BLOCK)", futex_ns);
  Report("descriptor (wait_fd + epoll_wait)", epoll_ns);
  return 0;
}
