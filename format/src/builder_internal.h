#pragma once

// Private helpers shared by the builder sources. Not installed.

#include <string_view>

#include "alkaid/format/builder.h"

namespace alkaid::format::internal {

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
