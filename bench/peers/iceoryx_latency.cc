// The ping-pong of `alkaid latency` over Eclipse iceoryx 2.0, so that the
// figures compare: process A loans a chunk of the payload size, fills it
// with int64 values i, i+1, ... (not timed), then times publish -> process
// B takes the chunk, reads its first and last value, answers with a small
// chunk -> A holds the answer; one-way = round trip / 2. Before each timed
// ping an untimed round trip with a chunk of the same size (its first and
// last value written and read) brings both paths back into the caches, as
// alkaid latency does by default.
//
// Waiting: spin (busy-poll take()) or block (a WaitSet on the subscriber's
// HAS_DATA state). Starts iox-roudi with roudi_config.toml (16 MiB chunks)
// unless --no-roudi, and stops it at the end.
//
//   alkaid_iceoryx_latency [--sizes 64,4096,...] [--count N] [--duration SEC]
//                          [--mode spin|block] [--json FILE|-] [--roudi-config FILE]
//                          [--no-roudi]
// Output: a table per size, and with --json the JSON of `alkaid latency
// --json` (transport "iceoryx"), both written by measure/report.h.

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/measure/clock.h"
#include "alkaid/measure/histogram.h"
#include "alkaid/measure/ping_pong.h"
#include "alkaid/measure/process.h"
#include "alkaid/measure/report.h"
#include "alkaid/measure/shared_mapping.h"
#include "alkaid/measure/text.h"
#include "iceoryx_hoofs/log/logmanager.hpp"
#include "iceoryx_posh/popo/untyped_publisher.hpp"
#include "iceoryx_posh/popo/untyped_subscriber.hpp"
#include "iceoryx_posh/popo/wait_set.hpp"
#include "iceoryx_posh/runtime/posh_runtime.hpp"

namespace {

using alkaid::Status;
using alkaid::measure::ChildControl;
using alkaid::measure::Histogram;
using alkaid::measure::NowNs;
using alkaid::measure::Stopping;
using alkaid::measure::Summarize;

constexpr int64_t kWarmValue = -2;

struct Shared {
  ChildControl control;  // stop flag, first error
  int64_t elapsed_ns;
  Histogram histogram;
};

void Fail(Shared* shared, const std::string& message) {
  alkaid::measure::ReportChildError(&shared->control, "iceoryx", Status::IOError(message));
  shared->control.stop.store(1);
}

bool Stopping(const Shared* shared) { return Stopping(shared->control); }

struct Options {
  std::vector<int64_t> sizes = {64, 4096, 65536, 1048576, 16777216};
  int64_t count = 10000;
  double duration = 10;
  std::string mode = "spin";
  std::string json;
  std::string roudi_config = ALKAID_PEERS_DIR "/roudi_config.toml";
  bool start_roudi = true;
};

// The endpoint of one process: a publisher on `out`, a subscriber on `in`.
class Endpoint {
 public:
  Endpoint(const char* out, const char* in, bool block)
      : publisher_(Service(out)), subscriber_(Service(in), MakeSubscriberOptions()), block_(block) {
    if (block_) {
      waitset_.emplace();
      if (waitset_->attachState(subscriber_, iox::popo::SubscriberState::HAS_DATA).has_error()) {
        (void)std::fprintf(stderr, "iceoryx: attaching the subscriber to the WaitSet failed\n");
        std::_Exit(1);
      }
    }
  }

  // Waits until the other side's subscriber is connected to our publisher.
  bool WaitConnected(const Shared* shared) {
    const int64_t deadline = NowNs() + 20'000'000'000;
    while (!publisher_.hasSubscribers()) {
      if (Stopping(shared) || NowNs() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  void* Loan(uint64_t bytes) {
    auto chunk = publisher_.loan(static_cast<uint32_t>(bytes), 64);
    if (chunk.has_error()) return nullptr;
    return chunk.value();
  }
  void Publish(void* chunk) { publisher_.publish(chunk); }

  // Next received chunk (spinning, or sleeping on the WaitSet); null when
  // stopped.
  const void* Take(const Shared* shared) {
    while (true) {
      auto chunk = subscriber_.take();
      if (!chunk.has_error()) return chunk.value();
      if (Stopping(shared)) return nullptr;
      if (block_) (void)waitset_->timedWait(iox::units::Duration::fromMilliseconds(50));
    }
  }
  void Release(const void* chunk) { subscriber_.release(chunk); }

  // The warm-up: a chunk of `rows` values of which only the first
  // (kWarmValue) and the last (kWarmValue + rows - 1) are written.
  bool SendWarmUp(int64_t rows) {
    auto* values = static_cast<int64_t*>(Loan(static_cast<uint64_t>(rows) * 8));
    if (values == nullptr) return false;
    values[0] = kWarmValue;
    values[rows - 1] = kWarmValue + rows - 1;
    Publish(values);
    return true;
  }

  bool SendValue(int64_t value) {
    void* chunk = Loan(8);
    if (chunk == nullptr) return false;
    *static_cast<int64_t*>(chunk) = value;
    Publish(chunk);
    return true;
  }

 private:
  static iox::capro::ServiceDescription Service(const char* event) {
    return iox::capro::ServiceDescription(
        "alkaid", "latency", iox::capro::IdString_t(iox::cxx::TruncateToCapacity, event));
  }

  static iox::popo::SubscriberOptions MakeSubscriberOptions() {
    iox::popo::SubscriberOptions options;
    options.queueCapacity = 16;
    return options;
  }

  iox::popo::UntypedPublisher publisher_;
  iox::popo::UntypedSubscriber subscriber_;
  bool block_;
  std::optional<iox::popo::WaitSet<>> waitset_;
};

int PingSide(const Options& options, int64_t size, Shared* shared) {
  iox::runtime::PoshRuntime::initRuntime(iox::RuntimeName_t(
      iox::cxx::TruncateToCapacity, ("alkaid-ping-" + std::to_string(::getpid())).c_str()));
  Endpoint e("ping", "pong", options.mode == "block");
  if (!e.WaitConnected(shared)) {
    Fail(shared, "ping side: the pong side did not subscribe within 20 s");
    return 1;
  }
  auto await = [&](int64_t expected) {
    while (true) {
      const void* chunk = e.Take(shared);
      if (chunk == nullptr) return false;
      const int64_t got = *static_cast<const int64_t*>(chunk);
      e.Release(chunk);
      if (got == expected) return true;
    }
  };
  // Both sides are connected both ways before answering (WaitConnected),
  // so the first warm-up ping is answered.
  const int64_t rows = size < 8 ? 1 : size / 8;
  if (!e.SendWarmUp(rows) || !await(kWarmValue)) return Stopping(shared) ? 3 : 1;
  const alkaid::measure::LoopBounds bounds{options.count,
                                           static_cast<int64_t>(options.duration * 1e9)};
  const Status looped = alkaid::measure::RunPingPongLoop(
      bounds, &shared->histogram, nullptr, &shared->elapsed_ns,
      [shared] { return Stopping(shared); },
      [&](int64_t i, alkaid::measure::RoundTripTimer* timer) -> Status {
        auto* values = static_cast<int64_t*>(e.Loan(static_cast<uint64_t>(rows) * 8));
        if (values == nullptr) {
          return Status::CapacityError("no chunk of ", rows * 8, " bytes (see roudi_config.toml)");
        }
        for (int64_t r = 0; r < rows; ++r) values[r] = i + r;
        if (!e.SendWarmUp(rows) || !await(kWarmValue)) return Status::Cancelled("warm-up");
        timer->Start();
        e.Publish(values);
        if (!await(i)) return Status::Cancelled("stopped");
        timer->Stop();
        return Status::OK();
      });
  if (!looped.ok()) {
    if (Stopping(shared)) return 3;
    Fail(shared, "ping side: " + looped.message());
    return 1;
  }
  shared->control.stop.store(1);  // the pong side leaves
  return 0;
}

int PongSide(const Options& options, int64_t size, Shared* shared) {
  iox::runtime::PoshRuntime::initRuntime(iox::RuntimeName_t(
      iox::cxx::TruncateToCapacity, ("alkaid-pong-" + std::to_string(::getpid())).c_str()));
  Endpoint e("pong", "ping", options.mode == "block");
  if (!e.WaitConnected(shared)) {
    if (Stopping(shared)) return 0;
    Fail(shared, "pong side: the ping side did not subscribe within 20 s");
    return 1;
  }
  const int64_t rows = size < 8 ? 1 : size / 8;
  int64_t next_id = 0;
  while (true) {
    const void* chunk = e.Take(shared);
    if (chunk == nullptr) return 0;  // stopped: the ping side is done
    const auto* values = static_cast<const int64_t*>(chunk);
    const int64_t first = values[0];
    const int64_t answer = first;
    // A ping (id >= 0) or a warm-up (kWarmValue), both of `rows` values.
    const int64_t last = values[rows - 1];
    if ((first >= 0 ? first != next_id : first != kWarmValue) || last != first + rows - 1) {
      Fail(shared, "pong side: " +
                       (first >= 0 ? "ping " + std::to_string(next_id) : std::string("warm-up")) +
                       " holds " + std::to_string(first) + ".." + std::to_string(last));
      e.Release(chunk);
      return 1;
    }
    if (first >= 0) ++next_id;
    e.Release(chunk);
    if (!e.SendValue(answer)) {
      Fail(shared, "pong side: loan failed");
      return 1;
    }
  }
}

// Forks both sides for one size, pinned to `cpus` (if not empty).
Status MeasureSize(const Options& options, int64_t size, const std::vector<int>& cpus,
                   Shared* shared) {
  std::memset(static_cast<void*>(shared), 0, sizeof(Shared));
  std::vector<std::function<int()>> sides;
  sides.reserve(2);
  for (int side = 0; side < 2; ++side) {
    sides.push_back([&options, size, shared, side]() -> int {
      iox::log::LogManager::GetLogManager().SetDefaultLogLevel(
          iox::log::LogLevel::kWarn, iox::log::LogLevelOutput::kHideLogLevel);
      // exit(), not _exit(): the runtime's destructor deregisters from RouDi.
      // NOLINTNEXTLINE(concurrency-mt-unsafe): a forked child of one thread
      std::exit(side == 0 ? PingSide(options, size, shared) : PongSide(options, size, shared));
    });
  }
  return alkaid::measure::RunChildren(sides, cpus, &shared->control, nullptr);
}

// The command line into `o`; false once --help is printed (throws
// std::invalid_argument on a bad one).
bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--sizes") {
      o->sizes.clear();
      for (const std::string& item : alkaid::measure::SplitCommas(value())) {
        int64_t size = 0;
        if (!alkaid::measure::ParseSize(item, &size) || size < 1 || size > (int64_t{16} << 20)) {
          throw std::invalid_argument("size " + item + " outside 1 B .. 16 MiB");
        }
        o->sizes.push_back(size);
      }
    } else if (arg == "--count") {
      o->count = std::stoll(value());
    } else if (arg == "--duration") {
      o->duration = std::stod(value());
    } else if (arg == "--mode") {
      o->mode = value();
      if (o->mode != "spin" && o->mode != "block") throw std::invalid_argument("--mode spin|block");
    } else if (arg == "--json") {
      o->json = value();
    } else if (arg == "--roudi-config") {
      o->roudi_config = value();
    } else if (arg == "--no-roudi") {
      o->start_roudi = false;
    } else if (arg == "--help" || arg == "-h") {
      std::printf(
          "alkaid_iceoryx_latency [--sizes 64,4096,...] [--count N] [--duration SEC]\n"
          "                       [--mode spin|block] [--json FILE|-] [--roudi-config FILE]\n"
          "                       [--no-roudi]\n");
      return false;
    } else {
      throw std::invalid_argument("unknown argument " + arg);
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    if (!ParseArgs(argc, argv, &options)) return 0;  // --help
  } catch (const std::exception& e) {
    (void)std::fprintf(stderr, "alkaid_iceoryx_latency: %s\n", e.what());
    return 2;
  }
  alkaid::measure::InstallInterruptHandler();

  pid_t roudi = -1;
  if (options.start_roudi) {
    roudi = ::fork();
    if (roudi == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      (void)::dup2(2, 1);  // RouDi's messages on stderr: stdout may be the JSON's (--json -)
      ::execlp("iox-roudi", "iox-roudi", "-c", options.roudi_config.c_str(), "-l", "error",
               static_cast<char*>(nullptr));
      (void)std::fprintf(stderr, "alkaid_iceoryx_latency: exec iox-roudi: %s\n",
                         alkaid::ErrnoMessage(errno).c_str());
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // RouDi maps its segments
    int status = 0;
    if (::waitpid(roudi, &status, WNOHANG) == roudi) {
      (void)std::fprintf(stderr, "alkaid_iceoryx_latency: iox-roudi exited at start\n");
      return 1;
    }
  }

  auto mapping = alkaid::measure::SharedMapping<Shared>::MapOrDie();
  Shared* shared = mapping.get();
  // The first two CPUs this process may use (if it may use two).
  std::vector<int> cpus = alkaid::measure::AllowedCpus();
  cpus.resize(cpus.size() >= 2 ? 2 : 0);
  std::vector<alkaid::measure::Measurement> all;
  std::ostream& table = options.json == "-" ? std::cerr : std::cout;  // the JSON's is stdout
  int code = 0;
  for (const int64_t size : options.sizes) {
    const Status measured = MeasureSize(options, size, cpus, shared);
    if (!measured.ok()) {
      (void)std::fprintf(stderr, "alkaid_iceoryx_latency: %lld B: %s\n",
                         static_cast<long long>(size), measured.message().c_str());
      code = alkaid::measure::Interrupted() ? 130 : 1;
      break;
    }
    alkaid::measure::Measurement m;
    m.transport = "iceoryx";
    m.mode = options.mode;
    m.wait = options.mode == "block" ? "waitset" : "busy-poll";
    m.pattern = "pingpong";
    m.payload_bytes = size;
    m.histogram = std::make_shared<Histogram>(shared->histogram);
    m.summary = Summarize(shared->histogram);
    if (shared->elapsed_ns > 0) {
      m.msgs_per_s =
          static_cast<double>(m.summary.samples) * 1e9 / static_cast<double>(shared->elapsed_ns);
    }
    all.push_back(std::move(m));
    table << "\npayload " << alkaid::measure::FormatBytes(size) << ", iceoryx ping-pong, mode "
          << options.mode << "; one-way latency = round trip / 2\n";
    alkaid::measure::PrintRows(table, all, size, {});
  }
  if (roudi > 0) {
    ::kill(roudi, SIGTERM);
    ::waitpid(roudi, nullptr, 0);
  }
  if (!options.json.empty() && code == 0) {
    const Status written = alkaid::measure::WriteJson(options.json, all, cpus);
    if (!written.ok()) {
      (void)std::fprintf(stderr, "alkaid_iceoryx_latency: %s\n", written.ToString().c_str());
      code = 1;
    }
  }
  return code;
}
