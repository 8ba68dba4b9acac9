#pragma once

// Private: LZ4-frame and ZSTD codecs for record batch body buffers.

#include <cstdint>
#include <memory>

#include "alkaid/common/result.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/ipc/options.h"

namespace alkaid::format::ipc::internal {

/// Compresses `size` bytes at `data` with `codec` (not kNone) at `level`
/// (IpcWriteOptions::kDefaultCompressionLevel: the codec's default). The
/// result holds the raw codec output, without the length prefix.
Result<std::shared_ptr<Buffer>> Compress(CompressionType codec, int level, const uint8_t* data,
                                         int64_t size, MemoryPool* pool);

/// Decompresses `in_size` bytes into exactly `out_size` bytes at `out`;
/// fails if the data is corrupt or decompresses to any other size.
Status Decompress(CompressionType codec, const uint8_t* in, int64_t in_size, uint8_t* out,
                  int64_t out_size);

std::string_view CompressionName(CompressionType codec);

}  // namespace alkaid::format::ipc::internal
