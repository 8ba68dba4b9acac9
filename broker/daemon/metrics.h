#pragma once

// alkaid-broker --metrics HOST:PORT: the broker's figures in the Prometheus
// text exposition format (docs/BROKER.md, "Metrics").
//
// The server runs on its own threads (cpp-httplib) and asks the broker for
// its figures over the broker's own socket, as `alkaid topics` does, on each
// scrape: the broker's loop shares no state with it and takes no lock.

#include <memory>
#include <string>

#include "alkaid/client/broker_client.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"

namespace alkaid::broker {

/// Where to listen: HOST:PORT (HOST a name or an address; [v6]:PORT).
struct MetricsAddress {
  std::string host;
  int port = 0;
};

/// Parses HOST:PORT; Invalid naming what is wrong. A host that is not a
/// loopback address (127.0.0.0/8, ::1, localhost) is refused unless
/// `allow_remote`.
Result<MetricsAddress> ParseMetricsAddress(const std::string& text, bool allow_remote);

/// The exposition of one set of figures (metric families, HELP, TYPE,
/// labels escaped).
std::string FormatMetrics(const client::BrokerStatus& broker,
                          const std::vector<client::TopicStatus>& topics,
                          const std::vector<client::AwaitedTopic>& awaited);

/// Serves GET /metrics until destroyed.
class MetricsServer {
 public:
  /// Binds `address` at once (IOError naming it and the system's reason,
  /// e.g. a port in use); serves scrapes from the broker at `socket_path`.
  static Result<std::unique_ptr<MetricsServer>> Start(const MetricsAddress& address,
                                                      const std::string& socket_path);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace alkaid::broker
