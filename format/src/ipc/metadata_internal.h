#pragma once

// Private: translation between Alkaid's types and the Flatbuffers metadata.
// metadata_internal.cc is the ONLY file that includes the generated
// Flatbuffers code; everything here is plain C++.

#include <cstdint>
#include <memory>
#include <vector>

#include "alkaid/common/result.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/ipc/message.h"
#include "alkaid/format/ipc/options.h"
#include "alkaid/format/type.h"

namespace alkaid::format::ipc::internal {

struct FieldNodeMeta {
  int64_t length;
  int64_t null_count;
};

struct BufferMeta {
  int64_t offset;
  int64_t length;
};

struct RecordBatchMeta {
  int64_t length = 0;
  std::vector<FieldNodeMeta> nodes;
  std::vector<BufferMeta> buffers;
  CompressionType compression = CompressionType::kNone;
  std::vector<int64_t> variadic_counts;
};

struct DictionaryBatchMeta {
  int64_t id = 0;
  bool is_delta = false;
  RecordBatchMeta data;
};

/// What the Message table says besides its header.
struct MessageInfo {
  MessageType type = MessageType::kSchema;
  MetadataVersion version = MetadataVersion::kV5;
  int64_t body_length = 0;
  MetadataPtr custom_metadata;
};

struct BlockMeta {
  int64_t offset;
  int32_t metadata_length;
  int64_t body_length;
};

struct FooterMeta {
  MetadataVersion version = MetadataVersion::kV5;
  /// False for a footer without a usable version (before Arrow 0.15):
  /// `version` is then taken from the file's messages.
  bool version_in_footer = true;
  SchemaPtr schema;
  std::vector<BlockMeta> dictionaries;
  std::vector<BlockMeta> record_batches;
  MetadataPtr custom_metadata;
};

// --- reading (all inputs untrusted) ---

/// Runs the Flatbuffers verifier over a Message and reads its fixed part.
Result<MessageInfo> VerifyMessage(const uint8_t* data, int64_t size, int max_depth);
/// VerifyMessage's reading of the fixed part alone, for a Message it
/// accepted already: the same answer, without the verifier.
Result<MessageInfo> ReadMessageInfo(const uint8_t* data);

/// Makes the Message of `metadata`, which VerifyMessage accepted (`info`,
/// what it read), and `body` (null: none), checking only the body's size:
/// for a reader that verified the metadata itself to learn the body's
/// length, so that no Message is verified twice (message.cc; Message::Open
/// verifies and then ends here too). `metadata` must be 8-byte aligned.
struct MessageAccess {
  static Result<std::unique_ptr<Message>> Make(std::shared_ptr<Buffer> metadata,
                                               std::shared_ptr<Buffer> body, MessageInfo info);
};

/// The following take a buffer VerifyMessage accepted.
Result<SchemaPtr> GetSchema(const uint8_t* message, DictionaryMemo* memo, int max_depth);
Result<RecordBatchMeta> GetRecordBatch(const uint8_t* message);
Result<DictionaryBatchMeta> GetDictionaryBatch(const uint8_t* message);

/// Verifies and reads a Footer; its schema's dictionary fields go to `memo`.
Result<FooterMeta> ReadFooter(const uint8_t* data, int64_t size, DictionaryMemo* memo,
                              int max_depth);

/// Where a record batch Message's per-batch numbers lie in its bytes, from
/// the start of the flatbuffer: RecordBatch.length and Message.bodyLength
/// (8 bytes each), and the FieldNode and Buffer vectors' elements (16 bytes
/// each: length then null count; offset then length).
struct RecordBatchNumbersAt {
  int64_t length = 0;
  int64_t body_length = 0;
  int64_t nodes = 0;
  int64_t buffers = 0;
  size_t num_nodes = 0;
  size_t num_buffers = 0;
};
/// The places of `message`'s numbers (a Message already verified by
/// VerifyMessage); Invalid when it is not an uncompressed record batch with
/// every one of them stored (a writer may leave a default out).
Result<RecordBatchNumbersAt> LocateRecordBatchNumbers(const uint8_t* message);

// --- writing ---

Result<std::shared_ptr<Buffer>> WriteSchemaMessage(const Schema& schema, const DictionaryMemo& ids,
                                                   const IpcWriteOptions& options);

/// `custom_metadata`: the batch's own (RecordBatch::metadata()), or null.
/// With `store_defaults`, every number is stored even where it equals the
/// schema's default (0), so that the bytes' layout is a function of the
/// numbers of nodes and buffers only (RecordBatchMessageTemplate).
Result<std::shared_ptr<Buffer>> WriteRecordBatchMessage(
    const RecordBatchMeta& batch, int64_t body_length, const IpcWriteOptions& options,
    const MetadataPtr& custom_metadata = nullptr, bool store_defaults = false);

Result<std::shared_ptr<Buffer>> WriteDictionaryMessage(int64_t id, bool is_delta,
                                                       const RecordBatchMeta& batch,
                                                       int64_t body_length,
                                                       const IpcWriteOptions& options);

Result<std::shared_ptr<Buffer>> WriteFooter(const Schema& schema, const DictionaryMemo& ids,
                                            const std::vector<BlockMeta>& dictionaries,
                                            const std::vector<BlockMeta>& record_batches,
                                            const MetadataPtr& custom_metadata,
                                            const IpcWriteOptions& options);

/// Extension metadata keys (`<ns>:extension:name`, `<ns>:extension:metadata`).
std::string ExtensionNameKey(std::string_view ns);
std::string ExtensionMetadataKey(std::string_view ns);

}  // namespace alkaid::format::ipc::internal
