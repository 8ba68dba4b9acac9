#pragma once

// Shared by the UnsafeRow encoder and decoder: how each Alkaid type maps to
// an UnsafeRow value kind, and the byte-level helpers of the layout.

#include <cstdint>
#include <cstring>

#include "alkaid/format/type.h"

namespace alkaid::format::internal {

static_assert(sizeof(void*) == 8 || sizeof(void*) == 4);

/// What an UnsafeRow stores for a value of a (row-compatible) type.
enum class RowKind : uint8_t {
  kUnknown,       // null type: 8-byte slot in rows, 0 bytes in arrays
  kBool,          // 1 byte
  kInt8,          // 1 byte
  kInt16,         // 2 bytes
  kInt32,         // 4 bytes (int32, date32)
  kInt64,         // 8 bytes (int64, timestamp[us])
  kFloat,         // 4 bytes
  kDouble,        // 8 bytes
  kShortDecimal,  // 8 bytes: unscaled int64
  kLongDecimal,   // variable: BigInteger.toByteArray
  kBinary,        // variable: the bytes
  kArray,         // variable: UnsafeArrayData
  kMap,           // variable: key array size | key array | value array
  kStruct,        // variable: nested UnsafeRow
};

/// Kind of a type CheckRowSchema accepted (dictionaries: their value type).
RowKind RowKindOf(const DataType& type);

/// Bytes one array element of `kind` takes in the elements region.
inline int64_t ArrayElementWidth(RowKind kind) {
  switch (kind) {
    case RowKind::kUnknown:
      return 0;
    case RowKind::kBool:
    case RowKind::kInt8:
      return 1;
    case RowKind::kInt16:
      return 2;
    case RowKind::kInt32:
    case RowKind::kFloat:
      return 4;
    default:
      return 8;
  }
}

inline bool IsVariableKind(RowKind kind) {
  return kind == RowKind::kLongDecimal || kind == RowKind::kBinary || kind == RowKind::kArray ||
         kind == RowKind::kMap || kind == RowKind::kStruct;
}

/// The element / key / item field of a list-like or map type.
const FieldPtr& ListValueField(const DataType& type);

/// Bytes of the null bitset for `n` fields or elements: whole 8-byte words.
inline int64_t NullBitsetBytes(int64_t n) { return ((n + 63) / 64) * 8; }
inline int64_t RoundUp8(int64_t n) { return (n + 7) & ~int64_t{7}; }

inline uint64_t LoadU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline void StoreU64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

/// Spark's largest decimal precision (DecimalType.MAX_PRECISION).
inline constexpr int32_t kMaxRowDecimalPrecision = 38;
/// Largest precision stored as an unscaled long (Decimal.MAX_LONG_DIGITS).
inline constexpr int32_t kMaxShortDecimalPrecision = 18;

}  // namespace alkaid::format::internal
