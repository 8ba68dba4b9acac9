#include "compression_internal.h"

#include <lz4frame.h>
#include <zstd.h>

#include <cstring>

namespace alkaid::format::ipc::internal {

std::string_view CompressionName(CompressionType codec) {
  switch (codec) {
    case CompressionType::kNone:
      return "none";
    case CompressionType::kLz4Frame:
      return "lz4_frame";
    case CompressionType::kZstd:
      return "zstd";
  }
  return "unknown";
}

namespace {

Result<std::shared_ptr<Buffer>> CompressLz4(int level, const uint8_t* data, int64_t size,
                                            MemoryPool* pool) {
  LZ4F_preferences_t prefs;
  std::memset(&prefs, 0, sizeof(prefs));
  prefs.compressionLevel = level == IpcWriteOptions::kDefaultCompressionLevel ? 0 : level;
  prefs.frameInfo.contentSize = static_cast<unsigned long long>(size);
  const size_t bound = LZ4F_compressFrameBound(static_cast<size_t>(size), &prefs);
  ALKAID_ASSIGN_OR_RAISE(auto out, AllocateBuffer(static_cast<int64_t>(bound), pool));
  const size_t n =
      LZ4F_compressFrame(out->mutable_data(), bound, data, static_cast<size_t>(size), &prefs);
  if (LZ4F_isError(n)) {
    return Status::IOError("LZ4 frame compression failed: ", LZ4F_getErrorName(n));
  }
  ALKAID_RETURN_NOT_OK(out->Resize(static_cast<int64_t>(n)));
  return std::shared_ptr<Buffer>(std::move(out));
}

Result<std::shared_ptr<Buffer>> CompressZstd(int level, const uint8_t* data, int64_t size,
                                             MemoryPool* pool) {
  const size_t bound = ZSTD_compressBound(static_cast<size_t>(size));
  ALKAID_ASSIGN_OR_RAISE(auto out, AllocateBuffer(static_cast<int64_t>(bound), pool));
  const int lvl = level == IpcWriteOptions::kDefaultCompressionLevel ? 1 : level;
  const size_t n = ZSTD_compress(out->mutable_data(), bound, data, static_cast<size_t>(size), lvl);
  if (ZSTD_isError(n)) return Status::IOError("ZSTD compression failed: ", ZSTD_getErrorName(n));
  ALKAID_RETURN_NOT_OK(out->Resize(static_cast<int64_t>(n)));
  return std::shared_ptr<Buffer>(std::move(out));
}

Status DecompressLz4(const uint8_t* in, int64_t in_size, uint8_t* out, int64_t out_size) {
  LZ4F_dctx* ctx = nullptr;
  size_t rc = LZ4F_createDecompressionContext(&ctx, LZ4F_VERSION);
  if (LZ4F_isError(rc)) {
    return Status::OutOfMemory("LZ4 decompression context: ", LZ4F_getErrorName(rc));
  }
  struct Guard {
    LZ4F_dctx* c;
    ~Guard() { LZ4F_freeDecompressionContext(c); }
  } guard{ctx};
  int64_t in_pos = 0;
  int64_t out_pos = 0;
  size_t hint = 1;
  while (in_pos < in_size) {
    size_t src_n = static_cast<size_t>(in_size - in_pos);
    size_t dst_n = static_cast<size_t>(out_size - out_pos);
    hint = LZ4F_decompress(ctx, out + out_pos, &dst_n, in + in_pos, &src_n, nullptr);
    if (LZ4F_isError(hint)) {
      return Status::Invalid("corrupt LZ4 frame: ", LZ4F_getErrorName(hint));
    }
    in_pos += static_cast<int64_t>(src_n);
    out_pos += static_cast<int64_t>(dst_n);
    if (hint == 0) break;  // frame complete
    if (src_n == 0 && dst_n == 0) {
      // No progress: the output is full but the frame wants to write more.
      return Status::Invalid("LZ4 frame decompresses to more than the declared ", out_size,
                             " bytes");
    }
  }
  if (hint != 0) return Status::Invalid("LZ4 frame is truncated");
  if (in_pos != in_size) {
    return Status::Invalid("LZ4 buffer has ", in_size - in_pos, " bytes after its frame");
  }
  if (out_pos != out_size) {
    return Status::Invalid("LZ4 frame decompressed to ", out_pos, " bytes, declared ", out_size);
  }
  return Status::OK();
}

Status DecompressZstd(const uint8_t* in, int64_t in_size, uint8_t* out, int64_t out_size) {
  const size_t n =
      ZSTD_decompress(out, static_cast<size_t>(out_size), in, static_cast<size_t>(in_size));
  if (ZSTD_isError(n)) return Status::Invalid("corrupt ZSTD data: ", ZSTD_getErrorName(n));
  if (static_cast<int64_t>(n) != out_size) {
    return Status::Invalid("ZSTD data decompressed to ", n, " bytes, declared ", out_size);
  }
  return Status::OK();
}

}  // namespace

Result<std::shared_ptr<Buffer>> Compress(CompressionType codec, int level, const uint8_t* data,
                                         int64_t size, MemoryPool* pool) {
  switch (codec) {
    case CompressionType::kLz4Frame:
      return CompressLz4(level, data, size, pool);
    case CompressionType::kZstd:
      return CompressZstd(level, data, size, pool);
    case CompressionType::kNone:
      break;
  }
  return Status::Invalid("no codec to compress with");
}

Status Decompress(CompressionType codec, const uint8_t* in, int64_t in_size, uint8_t* out,
                  int64_t out_size) {
  switch (codec) {
    case CompressionType::kLz4Frame:
      return DecompressLz4(in, in_size, out, out_size);
    case CompressionType::kZstd:
      return DecompressZstd(in, in_size, out, out_size);
    case CompressionType::kNone:
      break;
  }
  return Status::Invalid("no codec to decompress with");
}

}  // namespace alkaid::format::ipc::internal
