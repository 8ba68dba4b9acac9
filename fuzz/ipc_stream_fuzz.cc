// Fuzzes the IPC stream reader (both framings) and the incremental decoder.

#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "fuzz_util.h"

namespace ipc = alkaid::format::ipc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto buffer = alkaid::fuzz::ToBuffer(data, size);
  if (buffer == nullptr) return 0;
  ipc::IpcReadOptions options;
  options.max_decompressed_size = int64_t{1} << 24;
  auto source = std::make_shared<ipc::BufferReader>(buffer);
  auto reader = ipc::RecordBatchStreamReader::Open(source, options);
  if (reader.ok()) {
    while (true) {
      auto batch = (*reader)->ReadNext();
      if (!batch.ok() || *batch == nullptr) break;
      alkaid::fuzz::Exercise(**batch);
    }
  }
  // The same bytes through the incremental decoder, in uneven pieces.
  auto listener = std::make_shared<ipc::CollectListener>();
  ipc::StreamDecoder decoder(listener, options);
  size_t pos = 0;
  size_t step = 1;
  while (pos < size) {
    const size_t n = std::min(step, size - pos);
    if (!decoder.Consume(data + pos, static_cast<int64_t>(n)).ok()) break;
    pos += n;
    step = step * 3 + 1;
  }
  for (const auto& batch : listener->batches()) alkaid::fuzz::Exercise(*batch);
  return 0;
}
