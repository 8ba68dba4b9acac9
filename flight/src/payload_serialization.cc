#include "payload_serialization_internal.h"

#include <array>
#include <memory>
#include <vector>

#include <grpcpp/support/slice.h>

namespace alkaid::flight::internal {

namespace {

// Protobuf wire format: a length-delimited field's key is
// (field_number << 3) | 2, a varint; then the length, a varint.
constexpr uint64_t kLengthDelimited = 2;
constexpr uint64_t kDataHeaderField = 2;
constexpr uint64_t kAppMetadataField = 3;
constexpr uint64_t kDataBodyField = 1000;

void PutVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void PutKeyAndLength(uint64_t field, uint64_t length, std::string* out) {
  PutVarint((field << 3) | kLengthDelimited, out);
  PutVarint(length, out);
}

// Padding between body buffers (at most the alignment, 8 or 64 bytes).
constexpr size_t kZerosSize = 64;
const std::array<uint8_t, kZerosSize> kZeros{};

void AddPadding(int64_t bytes, std::vector<grpc::Slice>* slices) {
  while (bytes > 0) {
    const auto n = static_cast<size_t>(std::min<int64_t>(bytes, kZerosSize));
    slices->emplace_back(kZeros.data(), n, grpc::Slice::STATIC_SLICE);
    bytes -= static_cast<int64_t>(n);
  }
}

// Bodies smaller than this are copied into the header slice: a slice of
// its own costs more than the copy.
constexpr int64_t kReferenceThreshold = 1024;

void ReleaseBuffer(void* held) { delete static_cast<std::shared_ptr<format::Buffer>*>(held); }

}  // namespace

grpc::Status SerializePayload(const FlightPayload& payload, grpc::ByteBuffer* out,
                              int64_t* bytes_referenced) {
  const format::ipc::IpcPayload& ipc = payload.ipc;
  std::string head;
  const size_t header_size =
      ipc.metadata == nullptr ? 0 : static_cast<size_t>(ipc.metadata->size());
  head.reserve(header_size + payload.app_metadata.size() + 32);
  if (header_size > 0) {
    PutKeyAndLength(kDataHeaderField, header_size, &head);
    head.append(reinterpret_cast<const char*>(ipc.metadata->data()), header_size);
  }
  if (!payload.app_metadata.empty()) {
    PutKeyAndLength(kAppMetadataField, payload.app_metadata.size(), &head);
    head += payload.app_metadata;
  }
  int64_t referenced = 0;
  std::vector<grpc::Slice> slices;
  if (ipc.body_length > 0) {
    PutKeyAndLength(kDataBodyField, static_cast<uint64_t>(ipc.body_length), &head);
  }
  // The body: each buffer at its offset, zeros in between and after.
  int64_t position = 0;
  bool head_open = true;  // small buffers are appended to `head` while it is the last slice
  const int64_t alignment = ipc.alignment > 0 ? ipc.alignment : 8;
  for (size_t i = 0; i < ipc.body_buffers.size(); ++i) {
    const auto& buffer = ipc.body_buffers[i];
    const int64_t size = buffer == nullptr ? 0 : buffer->size();
    const int64_t offset = ipc.body_offsets.empty() ? position : ipc.body_offsets[i];
    if (offset < position || offset + size > ipc.body_length) {
      return {grpc::StatusCode::INTERNAL, "body buffer " + std::to_string(i) + " at " +
                                              std::to_string(offset) + " is out of place"};
    }
    if (size < kReferenceThreshold && head_open) {
      head.append(static_cast<size_t>(offset - position), '\0');
      if (size > 0)
        head.append(reinterpret_cast<const char*>(buffer->data()), static_cast<size_t>(size));
    } else {
      if (head_open) {
        slices.emplace_back(head);
        head_open = false;
      }
      AddPadding(offset - position, &slices);
      if (size > 0) {
        // The slice holds a reference to the buffer (and so to the block it
        // lies in) until gRPC has written it.
        auto* held = new std::shared_ptr<format::Buffer>(buffer);
        slices.emplace_back(const_cast<uint8_t*>(buffer->data()), static_cast<size_t>(size),
                            &ReleaseBuffer, held);
        referenced += size;
      }
    }
    position = offset + size;
    if (ipc.body_offsets.empty()) position = (position + alignment - 1) / alignment * alignment;
    position = std::min(position, ipc.body_length);
  }
  if (head_open) {
    head.append(static_cast<size_t>(ipc.body_length - position), '\0');
    slices.emplace_back(head);
  } else {
    AddPadding(ipc.body_length - position, &slices);
  }
  *out = grpc::ByteBuffer(slices.data(), slices.size());
  if (bytes_referenced != nullptr) *bytes_referenced = referenced;
  return grpc::Status::OK;
}

}  // namespace alkaid::flight::internal
