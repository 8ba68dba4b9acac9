// alkaid-flight: serves the broker's topics over Arrow Flight (docs/FLIGHT.md).

#include <signal.h>

#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "alkaid/flight/server.h"

namespace {

int Main(int argc, char** argv) {
  alkaid::flight::FlightServerOptions options;
  CLI::App app{"alkaid-flight: the broker's topics as Arrow Flight streams (gRPC)"};
  app.add_option("--socket", options.broker_socket, "the broker's socket (default: the broker's)");
  app.add_option("--listen", options.listen,
                 "HOST:PORT to listen on (port 0: any; non-loopback needs --tokens)")
      ->required();
  app.add_option("--tls-cert", options.tls_cert_file, "PEM certificate chain (TLS)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", options.tls_key_file, "PEM private key (TLS)")
      ->check(CLI::ExistingFile);
  app.add_option("--tokens", options.tokens_file,
                 "JSON token file: bearer tokens and the topics each may read and write")
      ->check(CLI::ExistingFile);
  app.add_flag("--spin-wait", options.spin_wait,
               "DoGet consumers spin before they sleep (lower latency, a core per waiting stream)");
  app.add_option("--max-message-bytes", options.max_message_bytes,
                 "largest DoPut message a client may send: its header, its body and every "
                 "compressed buffer decompressed (bytes; refused with INVALID_ARGUMENT beyond)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  // SIGINT/SIGTERM are taken by sigwait below; blocked before gRPC starts
  // its threads, which inherit the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  (void)pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A client that goes away while a reply is written must not kill us.
  (void)signal(SIGPIPE, SIG_IGN);

  auto server = alkaid::flight::FlightServer::Start(options);
  if (!server.ok()) {
    (void)std::fprintf(stderr, "alkaid-flight: %s\n", server.status().ToString().c_str());
    return 1;
  }
  // Tests and scripts read the port from this line.
  (void)std::printf("alkaid-flight: listening on port %d\n", (*server)->port());
  (void)std::fflush(stdout);
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  (*server)->Shutdown();
  (*server)->Wait();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // CLI11, gRPC and the standard library may throw (bad_alloc, a parser
  // bug): report and exit instead of terminating.
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    (void)std::fprintf(stderr, "alkaid-flight: %s\n", e.what());
    return 1;
  }
}
