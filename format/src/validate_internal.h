#pragma once

// Private helpers of the array validator: a UTF-8 checker and the decimal
// precision check. Not installed; header-only so that other translation
// units of the format library (builders, IPC) may reuse them.

#include <array>
#include <cstdint>
#include <cstring>
#include <string>

namespace alkaid::format::internal {

// ---------------------------------------------------------------------------
// UTF-8

/// Where and why a byte string is not UTF-8.
struct Utf8Error {
  int64_t position = -1;         ///< first byte of the offending sequence; -1 if valid
  const char* reason = nullptr;  ///< static string, e.g. "overlong encoding"
};

/// Checks `size` bytes at `data` against the UTF-8 definition of Unicode
/// (Table 3-7 of the standard): rejects stray continuation bytes, truncated
/// sequences, overlong encodings, encoded surrogates (U+D800..U+DFFF) and code
/// points above U+10FFFF. ASCII runs are skipped eight bytes at a time.
inline Utf8Error FindInvalidUtf8(const uint8_t* data, int64_t size) {
  int64_t i = 0;
  while (i < size) {
    if (data[i] < 0x80) {
      // ASCII fast path: whole words without a high bit.
      while (i + 8 <= size) {
        uint64_t word;
        std::memcpy(&word, data + i, sizeof(word));
        if ((word & 0x8080808080808080ULL) != 0) break;
        i += 8;
      }
      while (i < size && data[i] < 0x80) ++i;
      continue;
    }
    const uint8_t lead = data[i];
    int trail;          // number of continuation bytes
    uint8_t lo = 0x80;  // allowed range of the first continuation byte
    uint8_t hi = 0xBF;
    const char* narrow_reason = nullptr;  // why a byte outside [lo, hi] but in 80..BF fails
    if (lead < 0xC0) return {i, "unexpected continuation byte"};
    if (lead < 0xC2) return {i, "overlong encoding"};
    if (lead < 0xE0) {
      trail = 1;
    } else if (lead < 0xF0) {
      trail = 2;
      if (lead == 0xE0) {
        lo = 0xA0;
        narrow_reason = "overlong encoding";
      } else if (lead == 0xED) {
        hi = 0x9F;
        narrow_reason = "encoded surrogate (U+D800..U+DFFF)";
      }
    } else if (lead < 0xF5) {
      trail = 3;
      if (lead == 0xF0) {
        lo = 0x90;
        narrow_reason = "overlong encoding";
      } else if (lead == 0xF4) {
        hi = 0x8F;
        narrow_reason = "code point above U+10FFFF";
      }
    } else {
      return {i, "byte 0xF5..0xFF never appears in UTF-8"};
    }
    for (int k = 1; k <= trail; ++k) {
      if (i + k >= size) return {i, "truncated sequence"};
      const uint8_t b = data[i + k];
      if (b < 0x80 || b > 0xBF) return {i, "truncated sequence"};
      if (k == 1 && (b < lo || b > hi)) return {i, narrow_reason};
    }
    i += 1 + trail;
  }
  return {};
}

// ---------------------------------------------------------------------------
// Decimals

/// A 256-bit unsigned integer as four 64-bit words, least significant first.
using UInt256 = std::array<uint64_t, 4>;

/// x * 10 + carry_in, in place; no floating point, no 128-bit integers.
constexpr void MulAdd10(UInt256& x, uint64_t carry) {
  for (auto& word : x) {
    const uint64_t lo = (word & 0xFFFFFFFFULL) * 10 + carry;
    const uint64_t hi = (word >> 32) * 10 + (lo >> 32);
    word = (hi << 32) | (lo & 0xFFFFFFFFULL);
    carry = hi >> 32;
  }
}

inline constexpr int kMaxDecimalPrecision = 76;

constexpr std::array<UInt256, kMaxDecimalPrecision + 1> MakePowersOfTen() {
  std::array<UInt256, kMaxDecimalPrecision + 1> out{};
  UInt256 p{1, 0, 0, 0};
  for (auto& entry : out) {
    entry = p;
    MulAdd10(p, 0);
  }
  return out;
}

/// kPowersOfTen[n] == 10^n for n in [0, 76] (10^76 < 2^253).
inline constexpr std::array<UInt256, kMaxDecimalPrecision + 1> kPowersOfTen = MakePowersOfTen();

static_assert(kPowersOfTen[1][0] == 10 && kPowersOfTen[18][0] == 1000000000000000000ULL);
static_assert(kPowersOfTen[19][0] == 10000000000000000000ULL && kPowersOfTen[19][1] == 0);
static_assert(kPowersOfTen[20][1] == 5 && kPowersOfTen[20][0] == 7766279631452241920ULL);

constexpr bool LessThan(const UInt256& a, const UInt256& b) {
  for (int i = 3; i >= 0; --i) {
    if (a[static_cast<size_t>(i)] != b[static_cast<size_t>(i)]) {
      return a[static_cast<size_t>(i)] < b[static_cast<size_t>(i)];
    }
  }
  return false;
}

/// The magnitude of the `byte_width`-byte (4, 8, 16 or 32) two's complement
/// little-endian integer at `p`; `negative` receives its sign.
inline UInt256 DecimalMagnitude(const uint8_t* p, int byte_width, bool* negative) {
  uint8_t bytes[32];
  std::memcpy(bytes, p, static_cast<size_t>(byte_width));
  *negative = (bytes[byte_width - 1] & 0x80) != 0;
  std::memset(bytes + byte_width, *negative ? 0xFF : 0x00, static_cast<size_t>(32 - byte_width));
  UInt256 x{};
  for (size_t w = 0; w < 4; ++w) {
    uint64_t word = 0;
    for (int b = 7; b >= 0; --b) word = (word << 8) | bytes[w * 8 + static_cast<size_t>(b)];
    x[w] = word;
  }
  if (*negative) {
    // Two's complement negation: invert and add one.
    uint64_t carry = 1;
    for (auto& word : x) {
      word = ~word + carry;
      carry = (carry != 0 && word == 0) ? 1 : 0;
    }
  }
  return x;
}

/// True if |value| < 10^precision, for precision in [1, 76].
inline bool DecimalFitsPrecision(const uint8_t* p, int byte_width, int32_t precision) {
  bool negative;
  const UInt256 magnitude = DecimalMagnitude(p, byte_width, &negative);
  return LessThan(magnitude, kPowersOfTen[static_cast<size_t>(precision)]);
}

/// Decimal digits of the integer at `p` (same encoding as DecimalMagnitude),
/// with a leading '-' when negative: for error messages.
inline std::string DecimalToString(const uint8_t* p, int byte_width) {
  bool negative;
  UInt256 x = DecimalMagnitude(p, byte_width, &negative);
  std::string digits;
  auto is_zero = [&x] { return (x[0] | x[1] | x[2] | x[3]) == 0; };
  do {
    // Divide by 10 using 32-bit limbs from the top, collecting the remainder.
    uint64_t rem = 0;
    for (int w = 3; w >= 0; --w) {
      uint64_t& word = x[static_cast<size_t>(w)];
      const uint64_t hi = (rem << 32) | (word >> 32);
      const uint64_t q_hi = hi / 10;
      rem = hi % 10;
      const uint64_t lo = (rem << 32) | (word & 0xFFFFFFFFULL);
      const uint64_t q_lo = lo / 10;
      rem = lo % 10;
      word = (q_hi << 32) | q_lo;
    }
    digits.push_back(static_cast<char>('0' + rem));
  } while (!is_zero());
  if (negative) digits.push_back('-');
  return std::string(digits.rbegin(), digits.rend());
}

}  // namespace alkaid::format::internal
