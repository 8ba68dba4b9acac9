// alkaid subscribe / publish with a grpc://HOST:PORT/TOPIC (or grpc+tls://)
// instead of a topic: the same commands over Arrow Flight, through an
// alkaid-flight server (docs/FLIGHT.md), with our own Flight client.
// The bearer token and TLS settings come from the environment, not the
// command line (where other users could read them):
//   ALKAID_FLIGHT_TOKEN, ALKAID_FLIGHT_TLS_ROOTS, ALKAID_FLIGHT_TLS_SERVER_NAME.

#include <cstdlib>
#include <string>

#include "alkaid/flight/client.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/writer.h"
#include "batch_source.h"
#include "commands.h"
#include "output.h"

namespace alkaid::tools {

namespace ipc = format::ipc;

namespace {

std::string Env(const char* name) {
  const char* value =
      std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read before any thread starts
  return value == nullptr ? std::string() : std::string(value);
}

Result<std::unique_ptr<flight::FlightClient>> ConnectFor(const flight::FlightUri& uri) {
  flight::FlightClientOptions options;
  options.token = Env("ALKAID_FLIGHT_TOKEN");
  options.tls_roots_file = Env("ALKAID_FLIGHT_TLS_ROOTS");
  options.tls_server_name = Env("ALKAID_FLIGHT_TLS_SERVER_NAME");
  return flight::FlightClient::Connect(uri.address, uri.tls, options);
}

}  // namespace

bool IsFlightTarget(const std::string& topic) { return flight::IsFlightUri(topic); }

int RunFlightSubscribe(const SubscribeOptions& options) {
  if (options.timeout_seconds > 0 || !options.columns.empty() || options.validate != "structure" ||
      options.private_copy) {
    return ReportError("subscribe", Status::Invalid("--timeout, --columns, --validate and "
                                                    "--private-copy do not apply to grpc://"));
  }
  auto uri = flight::ParseFlightUri(options.topic);
  if (!uri.ok()) return ReportError("subscribe", uri.status());
  auto client = ConnectFor(*uri);
  if (!client.ok()) return ReportError("subscribe", client.status());
  auto reader = (*client)->Subscribe(uri->topic, options.from_oldest);
  if (!reader.ok()) return ReportError("subscribe", reader.status());

  auto opened = options.out == "-" ? ipc::FileOutputStream::FromDescriptor(1)
                                   : ipc::FileOutputStream::Open(options.out);
  if (!opened.ok()) return ReportError("subscribe", opened.status());
  std::shared_ptr<ipc::FileOutputStream> sink = *opened;
  auto writer = ipc::MakeStreamWriter(sink.get(), (*reader)->schema());
  if (!writer.ok()) return ReportError("subscribe", writer.status());
  int64_t received = 0;
  while (options.count < 0 || received < options.count) {
    auto batch = (*reader)->Next();
    if (!batch.ok()) return ReportError("subscribe", batch.status());
    if (*batch == nullptr) break;
    if (const Status st = (*writer)->WriteRecordBatch(**batch); !st.ok()) {
      return ReportError("subscribe", st);
    }
    ++received;
  }
  Status st = (*writer)->Close();
  if (st.ok()) st = sink->Close();
  if (!st.ok()) return ReportError("subscribe", st);
  return kExitOk;
}

int RunFlightPublish(const PublishOptions& options) {
  if (options.unsafe_row || options.arena_bytes != 0 || options.slot_count != 0) {
    return ReportError("publish", Status::Invalid("--unsafe-row, --arena-bytes and "
                                                  "--slot-count do not apply to grpc://"));
  }
  auto uri = flight::ParseFlightUri(options.topic);
  if (!uri.ok()) return ReportError("publish", uri.status());
  auto source = BatchSource::Open(options.input);
  if (!source.ok()) return ReportError("publish", source.status());
  auto client = ConnectFor(*uri);
  if (!client.ok()) return ReportError("publish", client.status());
  auto writer = (*client)->Publish(uri->topic, (*source)->schema());
  if (!writer.ok()) return ReportError("publish", writer.status());
  while (true) {
    auto batch = (*source)->Next();
    if (!batch.ok()) {
      (void)(*writer)->Close();
      return ReportError("publish", batch.status());
    }
    if (*batch == nullptr) break;
    if (const Status st = (*writer)->Write(**batch); !st.ok()) {
      return ReportError("publish",
                         st.WithContext("batch " + std::to_string((*source)->batches_read() - 1)));
    }
  }
  const Status st = (*writer)->Close();
  if (!st.ok()) return ReportError("publish", st);
  return kExitOk;
}

}  // namespace alkaid::tools
