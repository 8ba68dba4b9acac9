// Fuzzes the message decoder: one encapsulated message, decoded as whatever
// its header says, against the schema of a fixed, type-rich stream prefix
// when it is a record batch.

#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/message.h"
#include "alkaid/format/ipc/reader.h"
#include "fuzz_util.h"

namespace ipc = alkaid::format::ipc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto buffer = alkaid::fuzz::ToBuffer(data, size);
  if (buffer == nullptr) return 0;
  ipc::IpcReadOptions options;
  options.max_decompressed_size = int64_t{1} << 24;
  ipc::BufferReader source(buffer);
  // A schema message first, then messages decoded against it.
  auto first = ipc::ReadMessage(&source, options);
  if (!first.ok() || *first == nullptr) return 0;
  ipc::DictionaryMemo memo;
  auto schema = ipc::ReadSchema(**first, &memo, options);
  if (!schema.ok()) return 0;
  while (true) {
    auto message = ipc::ReadMessage(&source, options);
    if (!message.ok() || *message == nullptr) break;
    if ((*message)->type() == ipc::MessageType::kDictionaryBatch) {
      (void)ipc::ReadDictionary(**message, &memo, options);
    } else if ((*message)->type() == ipc::MessageType::kRecordBatch) {
      auto batch = ipc::ReadRecordBatch(**message, *schema, &memo, options);
      if (batch.ok()) alkaid::fuzz::Exercise(**batch);
    }
  }
  return 0;
}
