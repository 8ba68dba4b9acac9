#pragma once

/// \file
/// Alkaid's own Arrow Flight client: reads a topic from a remote
/// alkaid-flight server (or any Flight server) and publishes into one.
/// `alkaid subscribe grpc://HOST:PORT/TOPIC` and `alkaid publish
/// grpc://HOST:PORT/TOPIC` use it.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/record_batch.h"

namespace alkaid::flight {

/// A parsed `grpc://HOST:PORT/TOPIC` or `grpc+tls://HOST:PORT/TOPIC`.
struct FlightUri {
  bool tls = false;
  /// "HOST:PORT".
  std::string address;
  std::string topic;
};

/// Parses `uri`; Invalid naming what is wrong.
Result<FlightUri> ParseFlightUri(const std::string& uri);

/// Whether `s` starts with grpc:// or grpc+tls://.
bool IsFlightUri(const std::string& s);

/// Options for FlightClient::Connect().
struct FlightClientOptions {
  /// Sent as `authorization: Bearer <token>` on every call when not empty.
  std::string token;
  /// TLS: a PEM file of the roots to trust (empty: the system's).
  std::string tls_roots_file;
  /// Overrides the name checked against the server's certificate (tests
  /// with a certificate made for "localhost" reached through 127.0.0.1).
  std::string tls_server_name;
};

/// One topic as ListFlights reports it.
struct FlightTopic {
  std::string name;
  format::SchemaPtr schema;
};

/// A read stream (DoGet). Thread safety: one thread at a time.
class FlightReader {
 public:
  virtual ~FlightReader() = default;
  /// The stream's schema (the first message).
  virtual const format::SchemaPtr& schema() const = 0;
  /// The next batch, dictionaries applied; null at the end of the stream.
  /// An error names the gRPC status the server sent.
  virtual Result<format::RecordBatchPtr> Next() = 0;
  /// Batches the server reported lost just before the last batch returned
  /// (a kDropOldest topic overwrote them before this stream read them).
  virtual uint64_t lost_before() const = 0;
  /// Cancels the call.
  virtual void Cancel() = 0;
};

/// A write stream (DoPut). Thread safety: one thread at a time.
class FlightWriter {
 public:
  virtual ~FlightWriter() = default;
  /// Sends the dictionaries `batch` needs (whole, delta or replacement) and
  /// the batch. Its schema must be the writer's.
  virtual Status Write(const format::RecordBatch& batch) = 0;
  /// Ends the stream and waits for the server's verdict (an error if
  /// anything was refused).
  virtual Status Close() = 0;
};

/// A connection to a Flight server. Thread safety: calls may be made from
/// several threads; each stream belongs to one.
class FlightClient {
 public:
  ~FlightClient();
  FlightClient(const FlightClient&) = delete;
  FlightClient& operator=(const FlightClient&) = delete;

  /// `address` is "HOST:PORT". Connecting is lazy: the first call fails
  /// (IOError naming the address) if nothing answers.
  static Result<std::unique_ptr<FlightClient>> Connect(const std::string& address, bool tls,
                                                       const FlightClientOptions& options = {});

  /// ListFlights: every topic the token may read.
  Result<std::vector<FlightTopic>> ListTopics();
  /// DoGet of `topic`: from the oldest batch the topic still holds
  /// (`from_oldest`, the first endpoint's ticket) or live (the second).
  Result<std::unique_ptr<FlightReader>> Subscribe(const std::string& topic, bool from_oldest);
  /// DoPut into `topic` (created with `schema` if it does not exist).
  Result<std::unique_ptr<FlightWriter>> Publish(const std::string& topic,
                                                const format::SchemaPtr& schema);

 private:
  struct Impl;
  explicit FlightClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace alkaid::flight
