// alkaid-broker: the Alkaid control-plane daemon (docs/BROKER.md).
// Foreground, logs to stderr, stops cleanly on SIGINT/SIGTERM.

#include <signal.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <optional>

#include "daemon/broker.h"
#ifdef ALKAID_HAVE_METRICS
#include "daemon/metrics.h"
#endif

namespace {

alkaid::broker::Broker* g_broker = nullptr;

void OnSignal(int) {
  if (g_broker != nullptr) g_broker->RequestStop();
}

}  // namespace

namespace {

int Main(int argc, char** argv) {
  alkaid::broker::BrokerOptions options;
  std::string log_level = "info";
  CLI::App app{
      "alkaid-broker: names shared-memory segments, tracks producers and consumers, "
      "cleans up after crashes"};
  app.set_version_flag("--version", "alkaid-broker 0.1.0");
  app.set_config("--config", "", "Read options from an INI/TOML file (key = value)");
  app.add_option("--socket", options.socket_path,
                 "Unix socket path (default: $XDG_RUNTIME_DIR/alkaid/broker.sock or "
                 "/tmp/alkaid-<uid>/broker.sock)");
  app.add_option("--name", options.name, "Broker name: prefix of every segment it names")
      ->capture_default_str();
  uint64_t shm_limit = 0;
  CLI::Option* shm_limit_option = app.add_option(
      "--shm-limit", shm_limit,
      "Most bytes of shared memory producers may reserve together; 0: no limit. Default: "
      "half of /dev/shm's size, rounded down to whole MiB (32 MiB on a 64 MiB /dev/shm). A "
      "limit above /dev/shm's free space is refused at start. The limit in force is logged "
      "at start and shown by `alkaid topics`");
  app.add_option("--group", options.group,
                 "Group (name or gid) whose members may connect too; segments get mode 0660");
  double adopt_timeout_seconds = 30;
  app.add_option("--adopt-timeout", adopt_timeout_seconds,
                 "Seconds a restarted broker keeps the segments of live producers of its "
                 "predecessor for them to re-register")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  double drain_seconds = 30;
  app.add_option("--dead-producer-drain", drain_seconds,
                 "Seconds a dead producer's arena extensions are kept at most for consumers "
                 "that have not read its channel to the end yet (each says when it has, or goes)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  std::string metrics;
  bool metrics_allow_remote = false;
  app.add_option("--metrics", metrics,
                 "Serve the broker's figures at http://HOST:PORT/metrics in Prometheus' text "
                 "format (HOST a loopback address unless --metrics-allow-remote)");
  app.add_flag("--metrics-allow-remote", metrics_allow_remote,
               "Let --metrics listen on an address other machines can reach");
  app.add_option("--log-level", log_level, "error, warn, info or debug")
      ->check(CLI::IsMember({"error", "warn", "info", "debug"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  auto level = alkaid::broker::ParseLogLevel(log_level);
  if (!level.ok()) {
    std::cerr << "alkaid-broker: " << level.status().ToString() << "\n";
    return 2;
  }
  options.log_level = *level;
  // Given on the command line or in the --config file: it wins.
  if (shm_limit_option->count() > 0) options.shm_limit = shm_limit;
  options.adopt_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(adopt_timeout_seconds * 1000));
  options.dead_producer_drain =
      std::chrono::milliseconds(static_cast<int64_t>(drain_seconds * 1000));

#ifdef ALKAID_HAVE_METRICS
  std::optional<alkaid::broker::MetricsAddress> metrics_address;
  if (!metrics.empty()) {
    auto parsed = alkaid::broker::ParseMetricsAddress(metrics, metrics_allow_remote);
    if (!parsed.ok()) {
      std::cerr << "alkaid-broker: " << parsed.status().message() << "\n";
      return 2;
    }
    metrics_address = *parsed;
  }
#else
  if (!metrics.empty()) {
    std::cerr << "alkaid-broker: --metrics: this build has no HTTP server (cpp-httplib)\n";
    return 2;
  }
#endif
  auto broker = alkaid::broker::Broker::Create(options);
  if (!broker.ok()) {
    std::cerr << "alkaid-broker: cannot start: " << broker.status().ToString() << "\n";
    return 1;
  }
  g_broker = broker->get();
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  (void)::signal(SIGPIPE, SIG_IGN);  // SIG_ERR only for an invalid signal number

#ifdef ALKAID_HAVE_METRICS
  std::unique_ptr<alkaid::broker::MetricsServer> metrics_server;
  if (metrics_address) {
    auto started = alkaid::broker::MetricsServer::Start(*metrics_address, (*broker)->socket_path());
    if (!started.ok()) {
      std::cerr << "alkaid-broker: cannot start: " << started.status().message() << "\n";
      return 1;
    }
    metrics_server = std::move(*started);
  }
#endif
  const alkaid::Status status = (*broker)->Run();
#ifdef ALKAID_HAVE_METRICS
  metrics_server.reset();  // before the broker's socket goes
#endif
  g_broker = nullptr;
  broker->reset();  // removes the segments it named and the socket
  if (!status.ok()) {
    std::cerr << "alkaid-broker: " << status.ToString() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // CLI11 and the standard library may throw (bad_alloc, a parser bug):
  // report and exit instead of terminating.
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "alkaid-broker: " << e.what() << "\n";
    return 1;
  }
}
