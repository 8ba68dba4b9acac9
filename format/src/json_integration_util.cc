// Exact value codecs and gzip framing for the JSON integration format.

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "json_integration_internal.h"

namespace alkaid::format::internal {

// ---------------------------------------------------------------------------
// float16

uint16_t HalfFromDouble(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const auto sign = static_cast<uint16_t>((bits >> 48) & 0x8000u);
  const int exp = static_cast<int>((bits >> 52) & 0x7ffu);
  const uint64_t mant = bits & ((uint64_t{1} << 52) - 1);

  if (exp == 0x7ff) {
    if (mant == 0) return static_cast<uint16_t>(sign | 0x7c00u);  // infinity
    // NaN: keep the top payload bits and make sure the result is still NaN.
    auto payload = static_cast<uint16_t>(mant >> 42);
    if (payload == 0) payload = 0x200;
    return static_cast<uint16_t>(sign | 0x7c00u | payload);
  }
  // Zero and double subnormals (< 2^-1022) are far below half's smallest
  // subnormal (2^-24): they round to a signed zero.
  if (exp == 0) return sign;

  const int e = exp - 1023;  // value = m * 2^(e - 52), m has 53 bits
  if (e > 15) return static_cast<uint16_t>(sign | 0x7c00u);
  const uint64_t m = mant | (uint64_t{1} << 52);

  // Normal halves keep 11 significant bits (shift 42); subnormal halves are
  // multiples of 2^-24, i.e. m >> (52 - 24 - e).
  const int shift = e >= -14 ? 42 : 28 - e;
  if (shift > 53) return sign;  // below half the smallest subnormal
  uint64_t q = m >> shift;
  const uint64_t rem = m & ((uint64_t{1} << shift) - 1);
  const uint64_t halfway = uint64_t{1} << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1) != 0)) ++q;

  if (e >= -14) {
    // q includes the implicit bit (1024..2048); adding it to the biased
    // exponent minus one carries into the exponent on rounding overflow,
    // up to 0x7c00 (infinity).
    const uint64_t r = (static_cast<uint64_t>(e + 14) << 10) + q;
    return static_cast<uint16_t>(sign | (r >= 0x7c00u ? 0x7c00u : r));
  }
  return static_cast<uint16_t>(sign | q);  // q == 1024 is the smallest normal
}

double HalfToDouble(uint16_t half) {
  const bool negative = (half & 0x8000u) != 0;
  const int exp = (half >> 10) & 0x1f;
  const uint32_t mant = half & 0x3ffu;
  if (exp == 0x1f) {
    uint64_t bits = (negative ? uint64_t{1} << 63 : 0) | (uint64_t{0x7ff} << 52) |
                    (static_cast<uint64_t>(mant) << 42);
    double out;
    std::memcpy(&out, &bits, sizeof(out));
    return out;
  }
  double magnitude = exp == 0 ? std::ldexp(static_cast<double>(mant), -24)
                              : std::ldexp(static_cast<double>(mant + 1024), exp - 25);
  return negative ? -magnitude : magnitude;
}

// ---------------------------------------------------------------------------
// Big decimal integers, as little-endian arrays of 32-bit limbs.

namespace {

constexpr int kMaxLimbs = 8;  // 256 bits

bool ValidBitWidth(int bit_width) {
  return bit_width == 32 || bit_width == 64 || bit_width == 128 || bit_width == 256;
}

void Negate(uint32_t* limbs, int n) {
  uint64_t carry = 1;
  for (int i = 0; i < n; ++i) {
    const uint64_t v = static_cast<uint64_t>(static_cast<uint32_t>(~limbs[i])) + carry;
    limbs[i] = static_cast<uint32_t>(v);
    carry = v >> 32;
  }
}

}  // namespace

Status ParseDecimalInteger(std::string_view text, int bit_width, uint8_t* out) {
  if (!ValidBitWidth(bit_width)) {
    return Status::Invalid("decimal bit width must be 32, 64, 128 or 256, got ", bit_width);
  }
  const int n = bit_width / 32;
  size_t i = 0;
  bool negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    i = 1;
  }
  if (i == text.size()) return Status::Invalid("'", text, "' is not a decimal integer");
  uint32_t limbs[kMaxLimbs] = {};
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c < '0' || c > '9') {
      return Status::Invalid("'", text, "' is not a decimal integer (character ", i, ")");
    }
    uint64_t carry = static_cast<uint64_t>(c - '0');
    for (int k = 0; k < n; ++k) {
      const uint64_t v = static_cast<uint64_t>(limbs[k]) * 10 + carry;
      limbs[k] = static_cast<uint32_t>(v);
      carry = v >> 32;
    }
    if (carry != 0) {
      return Status::Invalid("decimal value ", text, " does not fit in ", bit_width, " bits");
    }
  }
  // The magnitude must be < 2^(bits-1), or == 2^(bits-1) when negative.
  if ((limbs[n - 1] >> 31) != 0) {
    bool is_min = negative && limbs[n - 1] == 0x80000000u;
    for (int k = 0; is_min && k < n - 1; ++k) is_min = limbs[k] == 0;
    if (!is_min) {
      return Status::Invalid("decimal value ", text, " does not fit in ", bit_width, " bits");
    }
  }
  if (negative) Negate(limbs, n);
  for (int k = 0; k < n; ++k) {
    for (int b = 0; b < 4; ++b) out[k * 4 + b] = static_cast<uint8_t>(limbs[k] >> (8 * b));
  }
  return Status::OK();
}

std::string FormatDecimalInteger(const uint8_t* in, int bit_width) {
  if (!ValidBitWidth(bit_width)) return "?";
  const int n = bit_width / 32;
  uint32_t limbs[kMaxLimbs] = {};
  for (int k = 0; k < n; ++k) {
    for (int b = 0; b < 4; ++b) limbs[k] |= static_cast<uint32_t>(in[k * 4 + b]) << (8 * b);
  }
  const bool negative = (limbs[n - 1] >> 31) != 0;
  // Negating the minimum gives back the same bits, which read as unsigned
  // are exactly its magnitude 2^(bits-1).
  if (negative) Negate(limbs, n);

  // Repeated division by 10^9 yields base-10^9 digits, least significant first.
  std::vector<uint32_t> chunks;
  int top = n;
  while (top > 0 && limbs[top - 1] == 0) --top;
  while (top > 0) {
    uint64_t rem = 0;
    for (int k = top - 1; k >= 0; --k) {
      const uint64_t cur = (rem << 32) | limbs[k];
      limbs[k] = static_cast<uint32_t>(cur / 1000000000u);
      rem = cur % 1000000000u;
    }
    chunks.push_back(static_cast<uint32_t>(rem));
    while (top > 0 && limbs[top - 1] == 0) --top;
  }
  if (chunks.empty()) return "0";
  std::string out = negative ? "-" : "";
  out += std::to_string(chunks.back());
  for (size_t c = chunks.size() - 1; c-- > 0;) {
    const std::string part = std::to_string(chunks[c]);
    out.append(9 - part.size(), '0');
    out += part;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Hex and UTF-8

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.resize(bytes.size() * 2);
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    out[2 * i] = kDigits[b >> 4];
    out[2 * i + 1] = kDigits[b & 0xf];
  }
  return out;
}

namespace {
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

Status HexDecode(std::string_view hex, std::string* out) {
  if (hex.size() % 2 != 0) {
    return Status::Invalid("hex string has odd length ", hex.size());
  }
  out->resize(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = HexValue(hex[i]);
    const int lo = HexValue(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      return Status::Invalid("invalid hex character at position ", hi < 0 ? i : i + 1);
    }
    (*out)[i / 2] = static_cast<char>((hi << 4) | lo);
  }
  return Status::OK();
}

bool IsValidUtf8(std::string_view s, int64_t* error_at) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  auto fail = [&](size_t at) {
    if (error_at != nullptr) *error_at = static_cast<int64_t>(at);
    return false;
  };
  while (i < n) {
    const uint8_t c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1fu;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0fu;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07u;
    } else {
      return fail(i);
    }
    if (i + static_cast<size_t>(len) > n) return fail(i);
    for (int k = 1; k < len; ++k) {
      const uint8_t cc = p[i + static_cast<size_t>(k)];
      if ((cc & 0xc0) != 0x80) return fail(i);
      cp = (cp << 6) | (cc & 0x3fu);
    }
    static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return fail(i);
    }
    i += static_cast<size_t>(len);
  }
  return true;
}

// ---------------------------------------------------------------------------
// gzip

bool IsGzip(std::string_view data) {
  return data.size() >= 2 && static_cast<uint8_t>(data[0]) == 0x1f &&
         static_cast<uint8_t>(data[1]) == 0x8b;
}

Result<std::string> GzipDecompress(std::string_view data, int64_t max_output) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  // 16 + MAX_WBITS: expect a gzip header and trailer.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    return Status::OutOfMemory("cannot initialise zlib inflate");
  }
  std::string out;
  size_t consumed = 0;
  char chunk[64 * 1024];
  Status status;
  while (true) {
    const size_t avail = std::min<size_t>(data.size() - consumed, std::numeric_limits<uInt>::max());
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + consumed));
    zs.avail_in = static_cast<uInt>(avail);
    zs.next_out = reinterpret_cast<Bytef*>(chunk);
    zs.avail_out = sizeof(chunk);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    consumed += avail - zs.avail_in;
    const size_t produced = sizeof(chunk) - zs.avail_out;
    if (static_cast<int64_t>(out.size() + produced) > max_output) {
      status = Status::CapacityError("gzip data decompresses to more than ", max_output, " bytes");
      break;
    }
    out.append(chunk, produced);
    if (rc == Z_STREAM_END) {
      // Another member may follow (gzip allows concatenation).
      if (consumed < data.size() && IsGzip(data.substr(consumed))) {
        inflateReset(&zs);
        continue;
      }
      if (consumed < data.size()) {
        status = Status::Invalid("gzip data has ", data.size() - consumed,
                                 " trailing bytes after the end of the stream");
      }
      break;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && consumed == data.size()) {
      status = Status::Invalid("gzip data is truncated (", data.size(), " bytes)");
      break;
    }
    status = Status::Invalid("corrupt gzip data near compressed byte ", consumed, ": ",
                             zs.msg != nullptr ? zs.msg : "inflate failed");
    break;
  }
  inflateEnd(&zs);
  if (!status.ok()) return status;
  return out;
}

Result<std::string> GzipCompress(std::string_view data) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return Status::OutOfMemory("cannot initialise zlib deflate");
  }
  std::string out;
  size_t consumed = 0;
  char chunk[64 * 1024];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    const size_t avail = std::min<size_t>(data.size() - consumed, std::numeric_limits<uInt>::max());
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + consumed));
    zs.avail_in = static_cast<uInt>(avail);
    zs.next_out = reinterpret_cast<Bytef*>(chunk);
    zs.avail_out = sizeof(chunk);
    const bool last = consumed + avail == data.size();
    rc = deflate(&zs, last ? Z_FINISH : Z_NO_FLUSH);
    if (rc == Z_STREAM_ERROR) {
      deflateEnd(&zs);
      return Status::Unknown("zlib deflate failed");
    }
    consumed += avail - zs.avail_in;
    out.append(chunk, sizeof(chunk) - zs.avail_out);
  }
  deflateEnd(&zs);
  return out;
}

}  // namespace alkaid::format::internal
