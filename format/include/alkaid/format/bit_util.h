#pragma once

/// \file
/// Validity-bitmap helpers (LSB bit numbering, as the format requires).

#include <bit>
#include <cstdint>
#include <cstring>

namespace alkaid::format::bit_util {

constexpr int64_t BytesForBits(int64_t bits) { return (bits + 7) >> 3; }

inline bool GetBit(const uint8_t* bits, int64_t i) { return (bits[i >> 3] >> (i & 7)) & 1; }

inline void SetBit(uint8_t* bits, int64_t i) {
  bits[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
}

inline void ClearBit(uint8_t* bits, int64_t i) {
  bits[i >> 3] &= static_cast<uint8_t>(~(1u << (i & 7)));
}

inline void SetBitTo(uint8_t* bits, int64_t i, bool v) {
  bits[i >> 3] = static_cast<uint8_t>((bits[i >> 3] & ~(1u << (i & 7))) |
                                      (static_cast<unsigned>(v) << (i & 7)));
}

/// Number of set bits in [offset, offset + length).
inline int64_t CountSetBits(const uint8_t* bits, int64_t offset, int64_t length) {
  int64_t count = 0;
  int64_t i = offset;
  const int64_t end = offset + length;
  // Leading bits up to a byte boundary.
  for (; i < end && (i & 7) != 0; ++i) count += GetBit(bits, i);
  // Whole 64-bit words.
  for (; i + 64 <= end; i += 64) {
    uint64_t word;
    std::memcpy(&word, bits + (i >> 3), sizeof(word));
    count += std::popcount(word);
  }
  for (; i + 8 <= end; i += 8) count += std::popcount(static_cast<unsigned>(bits[i >> 3]));
  for (; i < end; ++i) count += GetBit(bits, i);
  return count;
}

/// Copies `length` bits from src (starting at bit src_offset) to dst
/// (starting at bit dst_offset).
inline void CopyBitmap(const uint8_t* src, int64_t src_offset, int64_t length, uint8_t* dst,
                       int64_t dst_offset) {
  if ((src_offset & 7) == 0 && (dst_offset & 7) == 0) {
    const int64_t whole = length >> 3;
    std::memcpy(dst + (dst_offset >> 3), src + (src_offset >> 3), static_cast<size_t>(whole));
    for (int64_t i = whole * 8; i < length; ++i) {
      SetBitTo(dst, dst_offset + i, GetBit(src, src_offset + i));
    }
    return;
  }
  for (int64_t i = 0; i < length; ++i) SetBitTo(dst, dst_offset + i, GetBit(src, src_offset + i));
}

}  // namespace alkaid::format::bit_util
