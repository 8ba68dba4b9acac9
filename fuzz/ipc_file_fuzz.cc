// Fuzzes the IPC file reader (footer, blocks, random access).

#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "fuzz_util.h"

namespace ipc = alkaid::format::ipc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto buffer = alkaid::fuzz::ToBuffer(data, size);
  if (buffer == nullptr) return 0;
  ipc::IpcReadOptions options;
  options.max_decompressed_size = int64_t{1} << 24;
  auto reader =
      ipc::RecordBatchFileReader::Open(std::make_shared<ipc::BufferReader>(buffer), options);
  if (!reader.ok()) return 0;
  for (int i = 0; i < (*reader)->num_record_batches(); ++i) {
    auto batch = (*reader)->ReadRecordBatch(i);
    if (batch.ok()) alkaid::fuzz::Exercise(**batch);
  }
  return 0;
}
