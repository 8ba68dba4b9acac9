#pragma once

// Private helpers shared by the builder sources. Not installed.

#include <cstdint>
#include <limits>
#include <string_view>

#include "alkaid/format/builder.h"

namespace alkaid::format::internal {

/// Slot counts whose offsets (or views) would overflow int64 byte sizes.
inline constexpr int64_t kMaxSlotReserve = std::numeric_limits<int64_t>::max() / 16;

/// CapacityError unless `n` slots can be reserved. `where()` names the
/// builder; it formats a string, so it is called only for the error.
template <typename Where>
Status CheckSlotReserve(int64_t n, const Where& where) {
  if (n > kMaxSlotReserve) return Status::CapacityError(where(), ": cannot reserve ", n, " slots");
  return Status::OK();
}

/// CapacityError unless `n` slots of `width` bytes fit in int64 bytes
/// (`where` as for CheckSlotReserve).
template <typename Where>
Status CheckReserveBytes(int64_t n, int64_t width, const Where& where) {
  if (width > 0 && n > std::numeric_limits<int64_t>::max() / width) {
    return Status::CapacityError(where(), ": cannot reserve ", n, " slots of ", width, " bytes");
  }
  return Status::OK();
}

/// True if values of `type` can be appended from a plain byte string with
/// AppendRawValue: fixed-width types (boolean included), binary/utf8, their
/// large variants and the view types.
bool SupportsRawValues(const DataType& type);

/// Appends one valid value given as bytes to `builder`, which must have
/// been made for a type with SupportsRawValues (MakeBuilder's classes).
/// Fixed-width values must be exactly the byte width (Invalid otherwise);
/// a boolean is one byte, non-zero meaning true.
Status AppendRawValue(ArrayBuilder* builder, std::string_view bytes);

/// The bytes AppendRawValue takes for the type's empty value.
std::string EmptyRawValue(const DataType& type);

/// Fails with TypeError unless `actual` (a child builder's output) has the
/// type the parent declares for it.
Status CheckChildType(const ArrayData& actual, const DataType& expected, const char* role,
                      const DataType& parent);

}  // namespace alkaid::format::internal
