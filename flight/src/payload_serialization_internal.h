#pragma once

// Sending a FlightData without copying its body: a FlightPayload is an IPC
// payload (Message flatbuffer + body buffers) that gRPC serializes with the
// SerializationTraits below into a ByteBuffer of slices: one small slice
// with the protobuf encoding of data_header, app_metadata and the
// data_body field's tag and length, then one slice per body buffer that
// points at the buffer where it lies (for a DoGet: the producer's shared
// memory) and whose destroy callback drops the buffer's reference, and
// static zero slices for the padding between buffers. gRPC writes the
// slices to the socket and releases them once written, which releases the
// batch's block to its producer. On the wire this is exactly the FlightData
// message protobuf would encode.
//
// Only the server's DoGet sends FlightPayload (server.cc registers the
// method by hand for it); everything else uses the generated messages.

#include <string>

#include <grpcpp/impl/codegen/serialization_traits.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include "alkaid/format/ipc/writer.h"

namespace alkaid::flight::internal {

struct FlightPayload {
  format::ipc::IpcPayload ipc;
  std::string app_metadata;
};

/// The serialization above; `*bytes_referenced` (if not null) is set to the
/// body bytes passed by reference rather than copied.
grpc::Status SerializePayload(const FlightPayload& payload, grpc::ByteBuffer* out,
                              int64_t* bytes_referenced = nullptr);

}  // namespace alkaid::flight::internal

namespace grpc {

template <>
class SerializationTraits<alkaid::flight::internal::FlightPayload, void> {
 public:
  static Status Serialize(const alkaid::flight::internal::FlightPayload& payload,
                          ByteBuffer* buffer, bool* own_buffer) {
    *own_buffer = true;
    return alkaid::flight::internal::SerializePayload(payload, buffer);
  }
  // Never received: the server only sends payloads.
  static Status Deserialize(ByteBuffer* /*buffer*/,
                            alkaid::flight::internal::FlightPayload* /*payload*/) {
    return {StatusCode::INTERNAL, "FlightPayload is send-only"};
  }
};

}  // namespace grpc
