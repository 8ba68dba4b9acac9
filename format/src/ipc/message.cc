#include "alkaid/format/ipc/message.h"

#include "metadata_internal.h"
#include "util_internal.h"

namespace alkaid::format::ipc {

using internal::EnsureAligned;

std::string_view MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kSchema:
      return "schema";
    case MessageType::kDictionaryBatch:
      return "dictionary batch";
    case MessageType::kRecordBatch:
      return "record batch";
  }
  return "unknown";
}

namespace {

std::shared_ptr<Buffer> EmptyBuffer() {
  static const uint8_t kZeros[8] = {};
  static const auto empty = std::make_shared<Buffer>(kZeros, 0);
  return empty;
}

}  // namespace

Result<std::unique_ptr<Message>> internal::MessageAccess::Make(std::shared_ptr<Buffer> metadata,
                                                               std::shared_ptr<Buffer> body,
                                                               MessageInfo info) {
  if (body == nullptr) body = EmptyBuffer();
  if (body->size() != info.body_length) {
    return Status::Invalid(MessageTypeName(info.type), " message body is ", body->size(),
                           " bytes but its metadata declares ", info.body_length);
  }
  std::unique_ptr<Message> m(new Message());
  m->type_ = info.type;
  m->version_ = info.version;
  m->body_length_ = info.body_length;
  m->metadata_ = std::move(metadata);
  m->body_ = std::move(body);
  m->custom_metadata_ = std::move(info.custom_metadata);
  return m;
}

Result<std::unique_ptr<Message>> Message::Open(std::shared_ptr<Buffer> metadata,
                                               std::shared_ptr<Buffer> body,
                                               const IpcReadOptions& options) {
  if (metadata == nullptr) return Status::Invalid("message metadata is null");
  // The Flatbuffers verifier requires 8-byte aligned tables.
  ALKAID_ASSIGN_OR_RAISE(metadata, EnsureAligned(std::move(metadata), 8, options.pool));
  ALKAID_ASSIGN_OR_RAISE(auto info, internal::VerifyMessage(metadata->data(), metadata->size(),
                                                            options.max_recursion_depth));
  return internal::MessageAccess::Make(std::move(metadata), std::move(body), std::move(info));
}

Result<std::unique_ptr<Message>> ReadMessage(InputStream* stream, const IpcReadOptions& options) {
  uint8_t prefix[4];
  ALKAID_ASSIGN_OR_RAISE(int64_t got, stream->Read(4, prefix));
  if (got == 0) return nullptr;  // end of input between messages
  if (got < 4) {
    return Status::Invalid("stream truncated: ", got, " bytes of a 4-byte message length prefix");
  }
  int32_t length;
  if (internal::LoadUInt32LE(prefix) == kIpcContinuationToken) {
    ALKAID_ASSIGN_OR_RAISE(got, stream->Read(4, prefix));
    if (got < 4) {
      return Status::Invalid("stream truncated: ", got,
                             " bytes of the metadata length after a continuation marker");
    }
    length = internal::LoadInt32LE(prefix);
  } else {
    length = internal::LoadInt32LE(prefix);  // legacy framing
  }
  if (length == 0) return nullptr;  // end-of-stream marker
  if (length < 0) return Status::Invalid("message metadata length ", length, " is negative");
  ALKAID_ASSIGN_OR_RAISE(auto metadata, stream->Read(length));
  if (metadata->size() < length) {
    return Status::Invalid("stream truncated: message metadata of ", length, " bytes, only ",
                           metadata->size(), " available");
  }
  ALKAID_ASSIGN_OR_RAISE(metadata, EnsureAligned(std::move(metadata), 8, options.pool));
  ALKAID_ASSIGN_OR_RAISE(auto info, internal::VerifyMessage(metadata->data(), metadata->size(),
                                                            options.max_recursion_depth));
  ALKAID_ASSIGN_OR_RAISE(auto body, stream->Read(info.body_length));
  if (body->size() < info.body_length) {
    return Status::Invalid("stream truncated: ", MessageTypeName(info.type), " body of ",
                           info.body_length, " bytes, only ", body->size(), " available");
  }
  // Verified above (aligned, the verifier run, the fixed part read): not
  // again through Open.
  return internal::MessageAccess::Make(std::move(metadata), std::move(body), std::move(info));
}

Result<std::unique_ptr<Message>> ReadMessage(RandomAccessFile* file, int64_t offset,
                                             int64_t metadata_length, int64_t body_length,
                                             const IpcReadOptions& options) {
  ALKAID_ASSIGN_OR_RAISE(int64_t file_size, file->GetSize());
  int64_t end;
  if (offset < 0 || metadata_length < 8 || body_length < 0 ||
      internal::AddOverflows(offset, metadata_length, &end) ||
      internal::AddOverflows(end, body_length, &end) || end > file_size) {
    return Status::Invalid("message block at offset ", offset, " (metadata ", metadata_length,
                           " bytes, body ", body_length, " bytes) does not fit in the ", file_size,
                           "-byte file");
  }
  ALKAID_ASSIGN_OR_RAISE(auto framed, file->ReadAt(offset, metadata_length));
  if (framed->size() < metadata_length) {
    return Status::IOError("short read of message metadata at offset ", offset);
  }
  int64_t prefix = 4;
  int32_t length = internal::LoadInt32LE(framed->data());
  if (internal::LoadUInt32LE(framed->data()) == kIpcContinuationToken) {
    prefix = 8;
    length = internal::LoadInt32LE(framed->data() + 4);
  }
  if (length <= 0 || length > metadata_length - prefix) {
    return Status::Invalid("message at offset ", offset, ": metadata length ", length,
                           " does not fit its ", metadata_length, "-byte block");
  }
  auto metadata = SliceBuffer(framed, prefix, length);
  ALKAID_ASSIGN_OR_RAISE(auto body, file->ReadAt(offset + metadata_length, body_length));
  if (body->size() < body_length) {
    return Status::IOError("short read of message body at offset ", offset + metadata_length);
  }
  auto m = Message::Open(std::move(metadata), std::move(body), options);
  if (!m.ok()) {
    return m.status().WithContext("message at offset " + std::to_string(offset));
  }
  return m;
}

}  // namespace alkaid::format::ipc
