#pragma once

// Private helpers shared by the IPC sources.

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

#include "alkaid/common/result.h"
#include "alkaid/format/buffer.h"

namespace alkaid::format::ipc::internal {

/// `n` rounded up to a multiple of `alignment` (a power of two).
constexpr int64_t PadTo(int64_t n, int64_t alignment) {
  return (n + alignment - 1) & ~(alignment - 1);
}

/// a + b, or false on signed overflow.
inline bool AddOverflows(int64_t a, int64_t b, int64_t* out) {
  return __builtin_add_overflow(a, b, out);
}

inline bool IsAligned(const void* p, int64_t alignment) {
  return (reinterpret_cast<uintptr_t>(p) & static_cast<uintptr_t>(alignment - 1)) == 0;
}

/// `buffer` itself if its data is `alignment`-aligned, otherwise an aligned
/// copy from `pool`.
inline Result<std::shared_ptr<Buffer>> EnsureAligned(std::shared_ptr<Buffer> buffer,
                                                     int64_t alignment, MemoryPool* pool) {
  if (buffer == nullptr || IsAligned(buffer->data(), alignment)) return buffer;
  ALKAID_ASSIGN_OR_RAISE(auto copy, AllocateBuffer(buffer->size(), pool));
  if (buffer->size() > 0) {
    std::memcpy(copy->mutable_data(), buffer->data(), static_cast<size_t>(buffer->size()));
  }
  return std::shared_ptr<Buffer>(std::move(copy));
}

inline int32_t LoadInt32LE(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline uint32_t LoadUInt32LE(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline int64_t LoadInt64LE(const uint8_t* p) {
  int64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace alkaid::format::ipc::internal
