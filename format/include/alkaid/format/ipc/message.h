#pragma once

/// \file
/// Encapsulated IPC messages: a Flatbuffers `Message` (the metadata) followed
/// by a body.
///
/// Framing, as written by Alkaid and Arrow >= 0.15:
///
///     0xFFFFFFFF | int32 metadata size | metadata flatbuffer + padding | body
///
/// where the metadata size counts the flatbuffer and its padding, so that the
/// body starts at a multiple of 8. The legacy framing (before Arrow 0.15)
/// omits the 0xFFFFFFFF continuation marker. End of stream is 0xFFFFFFFF
/// 0x00000000, a legacy bare 0x00000000, or simply the end of the input.
/// Readers accept both framings.

#include <cstdint>
#include <memory>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/options.h"
#include "alkaid/format/type.h"

namespace alkaid::format::ipc {

namespace internal {
struct MessageAccess;
}  // namespace internal

/// The header kinds Alkaid reads (Tensor and SparseTensor are refused).
enum class MessageType : uint8_t { kSchema, kDictionaryBatch, kRecordBatch };

ALKAID_EXPORT std::string_view MessageTypeName(MessageType type);

/// Metadata versions of the format; Alkaid writes kV5 and reads kV4 and kV5.
enum class MetadataVersion : uint8_t { kV1, kV2, kV3, kV4, kV5 };

/// The 0xFFFFFFFF continuation marker that starts a framed message.
inline constexpr uint32_t kIpcContinuationToken = 0xFFFFFFFFu;

/// Largest metadata flatbuffer accepted or written (the int32 size prefix).
inline constexpr int64_t kMaxMetadataSize = INT32_MAX;

/// One message: verified metadata plus its body. Immutable and thread-safe.
class ALKAID_EXPORT Message {
 public:
  /// Verifies `metadata` (a Message flatbuffer, trailing padding allowed)
  /// and checks that `body` has exactly the size the metadata declares.
  /// `body` may be null when the declared body length is 0.
  static Result<std::unique_ptr<Message>> Open(std::shared_ptr<Buffer> metadata,
                                               std::shared_ptr<Buffer> body,
                                               const IpcReadOptions& options = {});

  MessageType type() const { return type_; }
  MetadataVersion version() const { return version_; }
  int64_t body_length() const { return body_length_; }
  /// The Message flatbuffer (with any trailing padding).
  const std::shared_ptr<Buffer>& metadata() const { return metadata_; }
  /// The body (never null; empty for schema messages).
  const std::shared_ptr<Buffer>& body() const { return body_; }
  /// Message-level custom_metadata, or null.
  const MetadataPtr& custom_metadata() const { return custom_metadata_; }

 private:
  // Makes a Message of metadata its reader verified already (message.cc).
  friend struct internal::MessageAccess;

  Message() = default;
  MessageType type_ = MessageType::kSchema;
  MetadataVersion version_ = MetadataVersion::kV5;
  int64_t body_length_ = 0;
  std::shared_ptr<Buffer> metadata_;
  std::shared_ptr<Buffer> body_;
  MetadataPtr custom_metadata_;
};

/// Reads the next message from `stream`; returns null at end of stream (an
/// EOS marker or the end of the input between messages). A message cut short
/// is an error. No allocation exceeds the bytes the stream actually holds.
ALKAID_EXPORT Result<std::unique_ptr<Message>> ReadMessage(InputStream* stream,
                                                           const IpcReadOptions& options = {});

/// Reads the message framed at `offset` of `file`, whose metadata part
/// (prefix + flatbuffer + padding) is `metadata_length` bytes and whose body
/// is `body_length` bytes (the fields of a file footer Block). Zero-copy for
/// in-memory and mapped files.
ALKAID_EXPORT Result<std::unique_ptr<Message>> ReadMessage(RandomAccessFile* file, int64_t offset,
                                                           int64_t metadata_length,
                                                           int64_t body_length,
                                                           const IpcReadOptions& options = {});

}  // namespace alkaid::format::ipc
