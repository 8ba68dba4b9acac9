#pragma once

// Between Alkaid's IPC messages and Flight's messages: FlightData from an
// IPC payload and back, the schema bytes of FlightInfo / SchemaResult, the
// tickets, gRPC status from Status.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include <grpcpp/support/status.h>

#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/ipc/message.h"
#include "alkaid/format/ipc/options.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/ipc/writer.h"
#include "alkaid/format/record_batch.h"
#include "proto_internal.h"

namespace alkaid::flight::internal {

/// What the bridge writes: 8-byte alignment (what Flight implementations
/// write), Arrow's extension metadata namespace.
format::ipc::IpcWriteOptions FlightWriteOptions();

/// The encapsulated Schema message (continuation, length, flatbuffer,
/// padding) that FlightInfo.schema and SchemaResult.schema carry.
Result<std::string> SerializeSchema(const format::Schema& schema);

/// Decodes FlightInfo.schema / SchemaResult.schema.
Result<format::SchemaPtr> DeserializeSchema(const std::string& bytes);

/// FlightData of `payload`: data_header is the Message flatbuffer, data_body
/// the body, laid out as the metadata says (buffers at their offsets, zero
/// padding). The body is copied once into the protobuf message.
Status PayloadToFlightData(const format::ipc::IpcPayload& payload, pb::FlightData* out);

/// The IPC Message a FlightData carries. Shares `data` (its body becomes the
/// message's body without a copy).
Result<std::unique_ptr<format::ipc::Message>> FlightDataToMessage(
    const std::shared_ptr<pb::FlightData>& data);

/// DoPut's decoding of what a client sends: the Schema message first, then
/// dictionary batches (applied) and record batches, decoded against it.
/// The server runs every received FlightData through it, and
/// fuzz/flight_data_fuzz.cc feeds it hostile ones. Not thread-safe.
class PutDecoder {
 public:
  /// `max_message_bytes` (FlightServerOptions::max_message_bytes, positive):
  /// the largest data_header and data_body accepted, and the largest size a
  /// compressed buffer may declare decompressed; Invalid naming the limit
  /// beyond it, before the message is decoded or a buffer decompressed.
  explicit PutDecoder(int64_t max_message_bytes);

  /// The first message, which must be a Schema; Invalid naming what it is
  /// otherwise.
  Status Start(const std::shared_ptr<pb::FlightData>& first);
  /// The schema Start read.
  const format::SchemaPtr& schema() const { return schema_; }
  /// A following message: its record batch (whose buffers share `data`), or
  /// null for a dictionary batch (applied to later batches); Invalid for a
  /// second Schema or anything that does not decode.
  Result<format::RecordBatchPtr> Next(const std::shared_ptr<pb::FlightData>& data);

 private:
  Status CheckSize(const pb::FlightData& data) const;

  int64_t max_message_bytes_;
  format::ipc::IpcReadOptions options_;
  format::ipc::DictionaryMemo memo_;
  format::SchemaPtr schema_;
};

/// Tickets: "oldest/TOPIC" (from the oldest held batch, then live) and
/// "live/TOPIC".
struct ParsedTicket {
  bool from_oldest = false;
  std::string topic;
};
std::string MakeTicket(const std::string& topic, bool from_oldest);
Result<ParsedTicket> ParseTicket(const std::string& ticket);

/// The topic a PATH descriptor names (one element); Invalid otherwise.
Result<std::string> DescriptorTopic(const pb::FlightDescriptor& descriptor);

/// Status to gRPC: KeyError NOT_FOUND, Invalid INVALID_ARGUMENT,
/// PermissionDenied PERMISSION_DENIED, AlreadyExists ALREADY_EXISTS,
/// TimedOut DEADLINE_EXCEEDED, IOError UNAVAILABLE, Cancelled CANCELLED,
/// the rest INTERNAL; the message is kept.
grpc::Status ToGrpc(const Status& status);
/// gRPC to Status, naming the call: "DoGet: UNAVAILABLE: ...".
Status FromGrpc(const grpc::Status& status, const char* call);

/// app_metadata of a batch after a gap: {"lost_before": N}.
std::string LostMetadata(uint64_t lost_before);
/// The N of LostMetadata, 0 for anything else.
uint64_t ParseLostMetadata(const std::string& app_metadata);
/// app_metadata of DoPut's PutResult after the N-th record batch of the
/// call was published: {"published": N}.
std::string PublishedMetadata(uint64_t published);

}  // namespace alkaid::flight::internal
