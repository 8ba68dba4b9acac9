// alkaid-measure, the measurement program (`alkaid latency` runs it):
// command line, broker start/stop, reports. See docs/PERFORMANCE.md.

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>

#include "alkaid/client/broker_client.h"
#include "alkaid/measure/broker.h"
#include "alkaid/measure/report.h"
#include "alkaid/measure/text.h"
#include "commands.h"
#include "latency_internal.h"

namespace alkaid::tools {

namespace {

namespace lat = latency;
using measure::FormatBytes;
using measure::FormatNs;
using measure::ParseSize;
using measure::SplitCommas;
constexpr int kExitInterrupted = 130;

// The command line: what a run is (bound into the RunSpec each
// measurement starts from), and what is done with the results.
struct LatencyOptions {
  lat::RunSpec spec;       ///< pattern empty: pingpong (inproc: stream)
  std::string sizes;       ///< body bytes, comma-separated; empty: 64 B to 16 MiB (inproc: 512)
  std::string compare;     ///< comma-separated baselines: floor, body, uds
  std::string json;        ///< JSON report path, "-" for stdout; empty: none
  std::string hgrm;        ///< directory for .hgrm files; empty: none
  bool progress = false;   ///< progress line even if stderr is not a terminal
  bool no_warmup = false;  ///< pingpong: no untimed round trip before each ping
  bool no_pin = false;     ///< do not pin processes to CPUs
};

int Usage(const std::string& message) {
  std::cerr << "alkaid-measure: " << message << "\n";
  return kExitUsage;
}

int Failure(const Status& status) {
  std::cerr << "alkaid-measure: " << status.ToString() << "\n";
  return kExitFailure;
}

// Usage error if one of `flags` was given: `what` says why they do not apply.
int Refuse(const std::set<std::string>& given, std::initializer_list<const char*> flags,
           const std::string& what) {
  for (const char* flag : flags) {
    if (given.count(flag) != 0) return Usage(std::string(flag) + ": " + what);
  }
  return kExitOk;
}

// ---- reports ------------------------------------------------------------

// The heading of a size's table, then its rows (measure::PrintRows).
void PrintTable(std::ostream& out, int64_t size, const std::vector<lat::Measurement>& all,
                const std::vector<std::string>& baselines, const lat::RunSpec& run) {
  if (run.layer == "inproc") {
    const lat::Measurement& m = all.back();
    out << "\npayload " << FormatBytes(size) << ", in one thread (publish, receive, check, drop), "
        << "writer " << run.writer << ": " << m.summary.samples << " batches, "
        << FormatNs(m.summary.mean_ns) << " per batch, " << static_cast<int64_t>(m.msgs_per_s)
        << " batches/s\n";
    return;
  }
  out << "\npayload " << FormatBytes(size) << " (" << lat::RowsFor(size) << " int64 rows), layer "
      << run.layer << ", " << run.pattern << ", mode " << run.mode;
  if (run.pattern == "stream") {
    out << ", " << run.consumers << " consumer" << (run.consumers > 1 ? "s" : "")
        << (run.layer == "client" ? ", writer " + run.writer : "")
        << "; latency = publish to receive";
  } else {
    out << "; one-way latency = round trip / 2";
  }
  out << "\n";
  measure::PrintRows(out, all, size, baselines);
}

Status WriteHgrm(const std::string& dir, const std::vector<lat::Measurement>& all) {
  for (const auto& m : all) {
    const std::string path =
        dir + "/" + m.transport + "_" + std::to_string(m.payload_bytes) + ".hgrm";
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    if (!file) return Status::IOError("cannot write '", path, "': ", ErrnoMessage(errno));
    file << measure::FormatPercentileDistribution(*m.histogram);
    if (!file.flush()) return Status::IOError("writing '", path, "' failed");
  }
  return Status::OK();
}

int RunLatency(const LatencyOptions& options, const std::set<std::string>& given) {
  lat::RunSpec base = options.spec;
  const bool inproc = base.layer == "inproc";
  const bool client = base.layer == "client";
  if (base.pattern.empty()) base.pattern = inproc ? "stream" : "pingpong";
  std::string sizes_text = options.sizes;
  if (sizes_text.empty()) sizes_text = inproc ? "512" : "64,4096,65536,1048576,16777216";
  base.warmup = !options.no_warmup;
  const bool stream = base.pattern == "stream";
  if (inproc && (!stream || base.consumers != 1 || base.mode != "spin")) {
    return Usage(
        "--layer inproc is one thread publishing and receiving 512 B batches (--pattern stream, "
        "--sizes 512, --writer, --count, --timestamps, --json): no other --pattern, "
        "--consumers or --mode");
  }
  // One error at a time: the layer's, then the pattern's.
  int code = inproc
                 ? Refuse(given,
                          {"--compare", "--hgrm", "--duration", "--idle", "--no-warmup",
                           "--progress", "--socket", "--no-pin"},
                          "not with --layer inproc (one thread, no broker, runs --count batches)")
                 : kExitOk;
  if (code == kExitOk && base.layer == "channel") {
    code = Refuse(given, {"--socket", "--writer"},
                  "not with --layer channel (no broker, no batch: bodies of bytes)");
  }
  if (code == kExitOk) {
    code = stream ? Refuse(given, {"--no-warmup", "--idle"}, "applies to --pattern pingpong only")
                  : Refuse(given, {"--writer"}, "applies to --pattern stream only");
  }
  if (code != kExitOk) return code;
  if (base.writer == "strings" && !inproc) {
    return Usage("--writer strings: with --layer inproc only");
  }
  if (base.pattern == "paired" && !options.compare.empty()) {
    return Usage("--compare: the baselines have no --pattern paired");
  }
  std::vector<int64_t> sizes;
  for (const auto& item : SplitCommas(sizes_text)) {
    int64_t size = 0;
    if (!ParseSize(item, &size) || size < 1 || size > (int64_t{1} << 30)) {
      return Usage("--sizes: '" + item +
                   "' is not a size between 1 B and 1 GiB (e.g. 64, 4K, 16M)");
    }
    sizes.push_back(size);
  }
  if (sizes.empty()) return Usage("--sizes: no size given");
  if (inproc && (sizes.size() != 1 || sizes[0] != 512)) {
    return Usage("--layer inproc publishes 512 B batches only (--sizes 512)");
  }
  std::vector<std::string> baselines;
  for (std::string item : SplitCommas(options.compare)) {
    if (item == "payload") {
      // The previous release's name of the body floor: deprecated.
      std::cerr << "alkaid-measure: --compare payload is deprecated; use --compare body\n";
      item = "body";
    }
    if (item != "floor" && item != "body" && item != "uds") {
      return Usage("--compare: unknown baseline '" + item + "' (floor, body, uds)");
    }
    if (std::find(baselines.begin(), baselines.end(), item) == baselines.end()) {
      baselines.push_back(item);
    }
  }
  if (!stream && base.consumers != 1) {
    return Usage("--consumers applies to --pattern stream only");
  }
  if (base.pattern == "stream" && base.consumers != 1 &&
      std::find(baselines.begin(), baselines.end(), "floor") != baselines.end()) {
    return Usage("--compare floor with --pattern stream has one consumer (--consumers 1)");
  }
  if (base.consumers < 1 || base.consumers > lat::Shared::kMaxConsumers) {
    return Usage("--consumers must be between 1 and " + std::to_string(lat::Shared::kMaxConsumers));
  }
  if (!options.hgrm.empty()) {
    if (::mkdir(options.hgrm.c_str(), 0755) != 0 && errno != EEXIST) {
      return Usage("--hgrm: cannot create directory '" + options.hgrm +
                   "': " + ErrnoMessage(errno));
    }
  }

  measure::InstallInterruptHandler();
  // The table goes to stdout, unless the JSON does.
  std::ostream& table = options.json == "-" ? std::cerr : std::cout;
  const bool show_progress = options.progress || ::isatty(2);

  // A broker: the one at --socket (or the default socket) if it answers,
  // else a private one.
  measure::PrivateBroker private_broker;
  if (client && !client::BrokerClient::Connect(base.socket).ok()) {
    const Status st = private_broker.Start("alkaid-latency", "alkaid-measure");
    if (!st.ok()) return Failure(st);
    base.socket = private_broker.socket();
  }
  base.broker_pid = private_broker.pid() > 0 ? static_cast<int>(private_broker.pid()) : 0;
  base.shm_prefix = private_broker.name().empty() ? "" : private_broker.name() + ".";
  if (!options.no_pin && !inproc) {
    const auto allowed = measure::AllowedCpus();
    const std::size_t needed =
        base.pattern == "stream" ? 1 + static_cast<std::size_t>(base.consumers) : 2;
    if (allowed.size() >= needed) base.cpus.assign(allowed.begin(), allowed.begin() + needed);
  }

  std::vector<lat::Measurement> all;
  int run = 0;
  for (const int64_t size : sizes) {
    std::vector<std::string> transports = {"alkaid"};
    transports.insert(transports.end(), baselines.begin(), baselines.end());
    for (const auto& transport : transports) {
      lat::RunSpec spec = base;
      spec.payload_bytes = size;
      spec.topic_prefix =
          "alkaid-latency." + std::to_string(::getpid()) + "." + std::to_string(run++);
      const std::string label = transport + " " + FormatBytes(size);
      auto last_print = std::chrono::steady_clock::now();
      lat::ProgressHook progress;
      if (show_progress) {
        progress = [&](const lat::Shared& shared) {
          const auto now = std::chrono::steady_clock::now();
          if (!::isatty(2) && now - last_print < std::chrono::seconds(1)) return;
          last_print = now;
          (void)std::fprintf(stderr, "%s[%s] %lld/%lld%s", ::isatty(2) ? "\r\033[K" : "",
                             label.c_str(), static_cast<long long>(shared.progress.load()),
                             static_cast<long long>(spec.count), ::isatty(2) ? "" : "\n");
        };
      }
      lat::Measurement m;
      Status st;
      if (inproc) {
        st = lat::MeasureInProcess(spec, &m);
      } else if (transport == "alkaid") {
        st = lat::MeasureAlkaid(spec, progress, &m);
      } else if (transport == "floor") {
        st = lat::MeasureFloor(spec, progress, &m);
      } else if (transport == "body") {
        st = lat::MeasureBodyFloor(spec, progress, &m);
      } else {
        st = lat::MeasureUds(spec, progress, &m);
      }
      if (show_progress && ::isatty(2)) (void)std::fprintf(stderr, "\r\033[K");
      if (measure::Interrupted()) {
        std::cerr << "alkaid-measure: interrupted\n";
        return kExitInterrupted;
      }
      if (!st.ok()) return Failure(st.WithContext(label));
      m.layer = base.layer;  // a baseline's row: the run's
      all.push_back(std::move(m));
    }
    PrintTable(table, size, all, baselines, base);
  }

  if (!options.json.empty()) {
    const Status st = measure::WriteJson(options.json, all, base.cpus);
    if (!st.ok()) return Failure(st);
  }
  if (!options.hgrm.empty()) {
    const Status st = WriteHgrm(options.hgrm, all);
    if (!st.ok()) return Failure(st);
  }
  return kExitOk;
}

int Main(int argc, char** argv) {
  auto options = std::make_shared<LatencyOptions>();
  CLI::App app(
      "alkaid-measure (also run as `alkaid latency`): publish-to-receive latency and throughput "
      "between processes, per layer, beside baselines measured in the same run "
      "(docs/PERFORMANCE.md)",
      "alkaid-measure");
  CLI::App* cmd = &app;
  cmd->add_option("--layer", options->spec.layer,
                  "channel: a ChannelProducer and ChannelConsumers (libshm alone: bodies of "
                  "bytes, no batch, no broker) in processes of their own; client: Producer and "
                  "Consumers in processes of their own through a broker; inproc: a "
                  "BatchPublisher and a BatchSubscriber on one channel in one thread, no broker "
                  "(the data path's cost per batch, for callgrind and perf)")
      ->check(CLI::IsMember({"channel", "client", "inproc"}))
      ->capture_default_str();
  cmd->add_option("--sizes", options->sizes,
                  "Body sizes in bytes, comma-separated (suffixes K, M: binary); default "
                  "64,4096,65536,1048576,16777216 (inproc: 512, the only one)");
  cmd->add_option("--count", options->spec.count, "Samples (pingpong) or batches (stream) per size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--duration", options->spec.duration_seconds,
                  "At most SEC seconds per transport and size (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--mode", options->spec.mode,
                  "How consumers wait: spin (busy poll), block (futex), hybrid (spin then block)")
      ->check(CLI::IsMember({"spin", "block", "hybrid"}))
      ->capture_default_str();
  cmd->add_option("--pattern", options->spec.pattern,
                  "pingpong: round trips, one-way = RTT/2; stream: publish as fast as possible, "
                  "publish-to-receive time per batch and throughput; paired: "
                  "pingpong alternating each size with 64 B in the same processes, the median "
                  "difference per pair with its 95% interval (default: pingpong; inproc: stream)")
      ->check(CLI::IsMember({"pingpong", "stream", "paired"}));
  cmd->add_option("--consumers", options->spec.consumers, "Consumer processes (stream)")
      ->capture_default_str();
  cmd->add_option("--compare", options->compare,
                  "Baselines in the same run, comma-separated: floor (one shared cache line; "
                  "stream: the same bodies through a queue of them in shared memory, one count "
                  "per side), "
                  "body (the same plus a body of the batch's size at the addresses alkaid's "
                  "allocator gives it, written the same way before each ping, first and last "
                  "value read by the other side: the size-matched floor), uds (IPC stream over "
                  "a Unix socket)");
  cmd->add_option("--json", options->json, "Write the results as JSON to FILE, or - for stdout");
  cmd->add_option("--hgrm", options->hgrm,
                  "Write HdrHistogram percentile distributions (microseconds) to DIR, one file "
                  "per transport and size");
  cmd->add_option("--socket", options->spec.socket,
                  "Broker socket; if nothing answers there, a private broker is started");
  cmd->add_flag("--progress", options->progress, "Progress on stderr even if it is not a terminal");
  cmd->add_flag("--no-warmup", options->no_warmup,
                "pingpong: no untimed warm-up round trip (a batch of the ping's shape) between "
                "building a batch and timing it");
  cmd->add_option("--writer", options->spec.writer,
                  "stream: how the producer makes each batch: build (a builder in a batch pool, "
                  "then Publish) or fixed (a FixedShapeWriter: a new region taken with "
                  "Fill::kNone, every value written in place); inproc also strings (built, "
                  "the 512 B int64 column and a utf8 one of 1 to 5 letters a row, row 0 of "
                  "0 to 60, whose lengths change from batch to batch)")
      ->check(CLI::IsMember({"build", "fixed", "strings"}))
      ->capture_default_str();
  cmd->add_flag("--timestamps", options->spec.timestamps,
                "The topics stamp each message's publish time (TopicOptions::publish_timestamps; "
                "inproc: the channel's), to measure what stamping costs");
  cmd->add_flag("--no-pin", options->no_pin, "Do not pin the processes to separate CPUs");
  cmd->add_option("--idle", options->spec.idle_seconds,
                  "Seconds of the consumer's idle-CPU measurement (pingpong; 0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int parse_code = app.exit(e);  // help: 0; every other parse error is usage (2)
    return parse_code == 0 ? kExitOk : kExitUsage;
  }
  std::set<std::string> given;
  for (const CLI::Option* option : app.get_options()) {
    if (option->count() > 0) given.insert(option->get_name());
  }
  return RunLatency(*options, given);
}

// Called alkaid_shm_stream_bench (the command the issues quote for the
// data path's instructions per batch), it takes `--inproc N [--fixed |
// --strings] [--stamp]`: `--layer inproc --count N [--writer fixed|strings]
// [--timestamps]`.
int RunAs(int argc, char** argv) {
  const std::string name = argv[0];
  if (name.substr(name.rfind('/') + 1) != "alkaid_shm_stream_bench") {
    return Main(argc, argv);
  }
  std::vector<std::string> args = {name, "--layer", "inproc"};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--inproc" && i + 1 < argc && args.size() == 3) {
      args.insert(args.end(), {"--count", argv[++i]});
    } else if (arg == "--fixed" || arg == "--strings" || arg == "--stamp") {
      args.push_back(arg == "--stamp" ? "--timestamps" : "--writer=" + arg.substr(2));
    } else {
      args.resize(0);
      break;
    }
  }
  if (args.size() < 5) {
    std::cerr << "usage: " << name << " --inproc N [--fixed | --strings] [--stamp]  (N > 0)\n";
    return kExitUsage;
  }
  std::vector<char*> pointers;
  pointers.reserve(args.size());
  for (auto& arg : args) pointers.push_back(arg.data());
  return Main(static_cast<int>(pointers.size()), pointers.data());
}

}  // namespace

}  // namespace alkaid::tools

int main(int argc, char** argv) {
  try {
    return alkaid::tools::RunAs(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "alkaid-measure: " << e.what() << '\n';
  } catch (...) {
    std::cerr << "alkaid-measure: unknown exception\n";
  }
  return alkaid::tools::kExitFailure;
}
