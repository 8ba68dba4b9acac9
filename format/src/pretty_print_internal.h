#pragma once

/// \file
/// Private helpers shared by pretty_print.cc and compare.cc.

#include <cstdint>
#include <string>
#include <string_view>

#include "alkaid/format/array.h"

namespace alkaid::format::internal {

/// The value of an IEEE 754 binary16 bit pattern, exactly (every half value
/// is representable as a float).
float HalfToFloat(uint16_t bits);

/// FormatValue with a custom text for nulls (applied at every nesting level).
std::string FormatValueWithNull(const Array& array, int64_t i, std::string_view null_repr);

}  // namespace alkaid::format::internal
