#pragma once

// Private helpers of the JSON integration reader and writer: value codecs
// that must be exact (float16, big decimal integers), hex, UTF-8 checking
// and gzip framing. Exported only so that the unit tests can reach them;
// not installed, not API.

#include <cstdint>
#include <string>
#include <string_view>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"

namespace alkaid::format::internal {

/// IEEE 754 binary16 from a double, rounded to nearest, ties to even
/// (correct for every input, subnormal results included; overflow gives
/// infinity; NaN stays NaN with as much of the payload as fits).
ALKAID_EXPORT uint16_t HalfFromDouble(double value);
/// The exact double value of a binary16 (NaN payloads preserved).
ALKAID_EXPORT double HalfToDouble(uint16_t half);
/// float <-> binary16; a float converts to double exactly, so the rounding
/// is the same single correct rounding as HalfFromDouble.
inline uint16_t HalfFromFloat(float value) { return HalfFromDouble(static_cast<double>(value)); }
inline float HalfToFloat(uint16_t half) { return static_cast<float>(HalfToDouble(half)); }

/// Parses a decimal integer string ("-123", "+7", "0") into a
/// `bit_width`-bit (32, 64, 128 or 256) two's-complement little-endian
/// integer at `out` (bit_width / 8 bytes). Exact; fails with Invalid if
/// the text is not an integer or the value does not fit.
ALKAID_EXPORT Status ParseDecimalInteger(std::string_view text, int bit_width, uint8_t* out);
/// The decimal text of the `bit_width`-bit two's-complement little-endian
/// integer at `in`.
ALKAID_EXPORT std::string FormatDecimalInteger(const uint8_t* in, int bit_width);

/// Upper-case hexadecimal of `bytes`.
ALKAID_EXPORT std::string HexEncode(std::string_view bytes);
/// Decodes hexadecimal text (either case) into `out`; fails with Invalid on
/// an odd length or a non-hex character (naming its position).
ALKAID_EXPORT Status HexDecode(std::string_view hex, std::string* out);

/// True if `s` is well-formed UTF-8 (no overlongs, surrogates or code
/// points past U+10FFFF). On failure `*error_at` is the offending byte.
ALKAID_EXPORT bool IsValidUtf8(std::string_view s, int64_t* error_at = nullptr);

/// True if `data` starts with the gzip magic 1f 8b.
ALKAID_EXPORT bool IsGzip(std::string_view data);
/// Decompresses gzip data (one or more concatenated members). Fails with
/// Invalid on corrupt or truncated input and with CapacityError past
/// `max_output` bytes.
ALKAID_EXPORT Result<std::string> GzipDecompress(std::string_view data, int64_t max_output);
/// Compresses `data` as one gzip member.
ALKAID_EXPORT Result<std::string> GzipCompress(std::string_view data);

}  // namespace alkaid::format::internal
