#pragma once

/// \file
/// The Arrow Flight bridge: a gRPC Flight service over the broker's topics
/// (docs/FLIGHT.md). Any Flight client (pyarrow.flight, Java, Go, Rust, C#,
/// FlightClient below) lists the topics, reads one live (DoGet) or publishes
/// into one (DoPut).

#include <cstdint>
#include <memory>
#include <string>

#include "alkaid/common/result.h"
#include "alkaid/common/status.h"

namespace alkaid::flight {

/// FlightServerOptions::max_message_bytes' default: 64 MiB.
inline constexpr int64_t kDefaultMaxMessageBytes = int64_t{64} << 20;

/// Options for FlightServer::Start().
struct FlightServerOptions {
  /// The broker's socket; empty: client::DefaultBrokerSocket().
  std::string broker_socket;
  /// Where to listen, "HOST:PORT" (port 0: any free port; FlightServer::port()
  /// says which). Without `tokens_file` only a loopback host (127.x.x.x,
  /// ::1, localhost) is accepted: Start fails with PermissionDenied.
  std::string listen = "127.0.0.1:0";
  /// TLS: PEM certificate chain and private key files. Both or neither;
  /// without them the server speaks plaintext.
  std::string tls_cert_file;
  std::string tls_key_file;
  /// The token file (JSON, docs/FLIGHT.md "Security"): which bearer tokens
  /// exist and which topics each may read and write. Empty: no
  /// authentication (loopback only, see `listen`).
  std::string tokens_file;
  /// How each DoGet's consumer waits for the next batch: false (the
  /// default) sleeps on the channel's futex (shm::WaitMode::kBlock), true
  /// spins first (kSpinThenBlock: lower latency on an idle core, a core
  /// busy per waiting stream; docs/FLIGHT.md, "Figures").
  bool spin_wait = false;
  /// The largest DoPut message a client may send, in bytes (positive;
  /// Start fails with Invalid otherwise). It bounds each FlightData's
  /// data_header and data_body, and the decompressed size every LZ4/ZSTD
  /// compressed buffer of a body may declare, so that a small hostile body
  /// cannot make the server allocate gigabytes. A message over it is refused
  /// with INVALID_ARGUMENT naming the limit: nothing of it is published and
  /// the put ends (batches before it stay published). gRPC refuses a message
  /// larger than twice the limit plus 1 MiB itself (RESOURCE_EXHAUSTED),
  /// before the handler sees it. Default: kDefaultMaxMessageBytes.
  int64_t max_message_bytes = kDefaultMaxMessageBytes;
};

/// A running Flight server. Each call runs on a gRPC thread: DoGet opens a
/// client::Consumer for the stream's lifetime, DoPut a client::Producer.
/// Start returns once the server listens. Thread safety: Shutdown and Wait
/// may be called from any thread.
class FlightServer {
 public:
  ~FlightServer();  ///< Shutdown() and Wait()
  FlightServer(const FlightServer&) = delete;
  FlightServer& operator=(const FlightServer&) = delete;

  /// Checks the options (loopback rule, TLS files, token file), and starts
  /// listening. Errors: Invalid (bad option or token file), IOError (a file
  /// cannot be read, the address cannot be bound), PermissionDenied (a
  /// non-loopback address without a token file).
  static Result<std::unique_ptr<FlightServer>> Start(const FlightServerOptions& options);

  /// The port the server listens on.
  int port() const;
  /// Blocks until Shutdown() (from another thread or a signal handler's
  /// helper thread).
  void Wait();
  /// Stops accepting calls and cancels those in flight (their consumers and
  /// producers are closed). Idempotent.
  void Shutdown();

 private:
  struct Impl;
  explicit FlightServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Whether `host` (no port) names the loopback interface.
bool IsLoopbackHost(const std::string& host);

}  // namespace alkaid::flight
