#include "alkaid/format/pretty_print.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <string_view>

#include "alkaid/format/record_batch.h"
#include "pretty_print_internal.h"

// Text forms used by FormatValue (one slot, one line):
//   null                 the null text ("null" unless PrettyPrintOptions says otherwise)
//   bool                 true / false
//   integers             decimal
//   float16/32/64        shortest form that reads back to the same value ("1.5",
//                        "1e+20", "inf", "-inf", "nan"); float16 is decoded first
//   decimals             exact, with `scale` fractional digits ("-123.45"); a
//                        negative scale appends zeros ("12300")
//   date32/date64        "2024-01-31" (proleptic Gregorian, any year; years outside
//                        0..9999 are written with a sign or more digits); a date64
//                        that is not a whole day also shows " HH:MM:SS.mmm"
//   time32/time64        "HH:MM:SS" plus ".fff", ".ffffff" or ".fffffffff" per unit
//   timestamp            "2024-01-31 12:34:56.123456" (fraction per unit), then
//                        " <timezone>" when the type has one
//   duration             value and unit: "123ms", "5s", "7us", "9ns"
//   intervals            months "14M"; day-time "3d1500ms"; month-day-nano "1M2d3ns"
//   binary-like          hex in SQL style: x'0aff' (binary, large_binary,
//                        binary_view, fixed_size_binary)
//   string-like          double-quoted; \" \\ \n \r \t and \xNN for other control bytes
//   lists                "[1, 2, null]" (list, large_list, list_view, fixed_size_list)
//   map                  "{k1: v1, k2: v2}"
//   struct               "{a: 1, b: \"x\"}"
//   union                the selected child's value (the type code is not shown)
//   dictionary           the decoded dictionary value
//   run-end encoded      the decoded value
//   extension            the storage value

namespace alkaid::format {

namespace internal {

float HalfToFloat(uint16_t bits) {
  const bool negative = (bits & 0x8000u) != 0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  float value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
  } else if (exponent == 0x1f) {
    value = mantissa == 0 ? INFINITY : NAN;
  } else {
    value = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  return negative ? -value : value;
}

}  // namespace internal

namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

template <typename T>
void AppendNumber(std::string* out, T value) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value);
  out->append(buf, res.ptr);
}

template <typename T>
T LoadValue(const Array& array, int64_t i) {
  return static_cast<const NumericArray<T>&>(array).Value(i);
}

/// Appends `value` as decimal with at least `width` digits (zero padded).
void AppendPadded(std::string* out, uint64_t value, int width) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof(buf), value);
  for (auto n = res.ptr - buf; n < width; ++n) out->push_back('0');
  out->append(buf, res.ptr);
}

/// Floor division and non-negative remainder for a positive divisor.
void FloorDivMod(int64_t a, int64_t b, int64_t* q, int64_t* r) {
  *q = a / b;
  *r = a % b;
  if (*r < 0) {
    *r += b;
    *q -= 1;
  }
}

/// Proleptic Gregorian date of `days` since 1970-01-01, by shifting to a
/// calendar whose years start on March 1st (leap day last) and counting
/// 400-year eras of 146097 days.
void AppendDate(std::string* out, int64_t days) {
  const int64_t z = days + 719468;  // days since 0000-03-01
  int64_t era;
  int64_t day_of_era;
  FloorDivMod(z, 146097, &era, &day_of_era);
  const int64_t year_of_era =
      (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const int64_t day_of_year =
      day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const int64_t month_from_march = (5 * day_of_year + 2) / 153;
  const int64_t day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
  const int64_t month = month_from_march < 10 ? month_from_march + 3 : month_from_march - 9;
  const int64_t year = year_of_era + era * 400 + (month <= 2 ? 1 : 0);
  if (year < 0) {
    out->push_back('-');
    AppendPadded(out, static_cast<uint64_t>(-year), 4);
  } else {
    AppendPadded(out, static_cast<uint64_t>(year), 4);
  }
  out->push_back('-');
  AppendPadded(out, static_cast<uint64_t>(month), 2);
  out->push_back('-');
  AppendPadded(out, static_cast<uint64_t>(day), 2);
}

int64_t UnitsPerSecond(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kSecond:
      return 1;
    case TimeUnit::kMilli:
      return 1000;
    case TimeUnit::kMicro:
      return 1000000;
    case TimeUnit::kNano:
      return 1000000000;
  }
  return 1;
}

int FractionDigits(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kSecond:
      return 0;
    case TimeUnit::kMilli:
      return 3;
    case TimeUnit::kMicro:
      return 6;
    case TimeUnit::kNano:
      return 9;
  }
  return 0;
}

/// "HH:MM:SS[.fraction]" for a non-negative count of `unit`s (hours are not
/// wrapped, so out-of-range times stay visible).
void AppendTimeOfDay(std::string* out, uint64_t units, TimeUnit unit) {
  const auto per_second = static_cast<uint64_t>(UnitsPerSecond(unit));
  const uint64_t seconds = units / per_second;
  const uint64_t fraction = units % per_second;
  AppendPadded(out, seconds / 3600, 2);
  out->push_back(':');
  AppendPadded(out, (seconds / 60) % 60, 2);
  out->push_back(':');
  AppendPadded(out, seconds % 60, 2);
  const int digits = FractionDigits(unit);
  if (digits > 0) {
    out->push_back('.');
    AppendPadded(out, fraction, digits);
  }
}

void AppendTime(std::string* out, int64_t value, TimeUnit unit) {
  if (value < 0) {
    out->push_back('-');
    AppendTimeOfDay(out, 0 - static_cast<uint64_t>(value), unit);
  } else {
    AppendTimeOfDay(out, static_cast<uint64_t>(value), unit);
  }
}

void AppendTimestamp(std::string* out, int64_t value, TimeUnit unit) {
  const int64_t per_day = 86400 * UnitsPerSecond(unit);
  int64_t days;
  int64_t within_day;
  FloorDivMod(value, per_day, &days, &within_day);
  AppendDate(out, days);
  out->push_back(' ');
  AppendTimeOfDay(out, static_cast<uint64_t>(within_day), unit);
}

// Largest |scale| written in plain notation: every decimal the format can
// hold at a sensible scale (precision <= 76) fits; beyond it, an exponent.
constexpr int32_t kMaxPlainScale = 100;

/// Exact decimal text of a little-endian two's complement integer of
/// `byte_width` bytes (4, 8, 16 or 32), with `scale` fractional digits.
void AppendDecimal(std::string* out, const uint8_t* bytes, int byte_width, int32_t scale) {
  uint32_t limbs[8] = {};
  const int n = byte_width / 4;
  for (int k = 0; k < n; ++k) {
    const uint8_t* limb = bytes + 4 * static_cast<ptrdiff_t>(k);
    limbs[k] = static_cast<uint32_t>(limb[0]) | static_cast<uint32_t>(limb[1]) << 8 |
               static_cast<uint32_t>(limb[2]) << 16 | static_cast<uint32_t>(limb[3]) << 24;
  }
  const bool negative = (limbs[n - 1] & 0x80000000u) != 0;
  if (negative) {  // magnitude = ~x + 1 (the most negative value maps to itself, unsigned)
    uint64_t carry = 1;
    for (int k = 0; k < n; ++k) {
      const uint64_t sum = static_cast<uint64_t>(~limbs[k]) + carry;
      limbs[k] = static_cast<uint32_t>(sum);
      carry = sum >> 32;
    }
  }
  // Repeated division of the multi-word magnitude by 10^9, least
  // significant chunk first.
  constexpr uint32_t kChunk = 1000000000u;
  std::string digits;
  for (;;) {
    bool zero = true;
    for (int k = 0; k < n; ++k) zero = zero && limbs[k] == 0;
    if (zero) break;
    uint64_t rem = 0;
    for (int k = n - 1; k >= 0; --k) {
      const uint64_t cur = (rem << 32) | limbs[k];
      limbs[k] = static_cast<uint32_t>(cur / kChunk);
      rem = cur % kChunk;
    }
    for (int d = 0; d < 9; ++d) {
      digits.push_back(static_cast<char>('0' + rem % 10));
      rem /= 10;
    }
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (digits.empty()) digits = "0";
  std::string text(digits.rbegin(), digits.rend());
  if (scale > kMaxPlainScale || scale < -kMaxPlainScale) {
    // The scale comes from metadata and may be anything in int32: beyond what
    // plain notation can show in reasonable space, write the unscaled
    // integer with an exponent ("123E-2147483648").
    if (negative) out->push_back('-');
    out->append(text);
    out->append("E");
    out->append(std::to_string(-static_cast<int64_t>(scale)));
    return;
  }
  if (scale > 0) {
    const auto s = static_cast<size_t>(scale);
    if (text.size() <= s) text.insert(0, s + 1 - text.size(), '0');
    text.insert(text.size() - s, 1, '.');
  } else if (scale < 0 && text != "0") {
    text.append(static_cast<size_t>(-static_cast<int64_t>(scale)), '0');
  }
  if (negative) out->push_back('-');
  out->append(text);
}

void AppendHex(std::string* out, std::string_view bytes) {
  out->append("x'");
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out->push_back(kHexDigits[b >> 4]);
    out->push_back(kHexDigits[b & 0xf]);
  }
  out->push_back('\'');
}

void AppendQuoted(std::string* out, std::string_view s) {
  out->push_back('"');
  for (char c : s) {
    const auto b = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (b < 0x20 || b == 0x7f) {
          out->append("\\x");
          out->push_back(kHexDigits[b >> 4]);
          out->push_back(kHexDigits[b & 0xf]);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

void AppendBytes(std::string* out, std::string_view bytes, bool utf8) {
  if (utf8) {
    AppendQuoted(out, bytes);
  } else {
    AppendHex(out, bytes);
  }
}

void AppendValue(std::string* out, const Array& array, int64_t i, std::string_view null_repr);

void AppendElements(std::string* out, const Array& values, int64_t begin, int64_t length,
                    std::string_view null_repr) {
  out->push_back('[');
  for (int64_t k = 0; k < length; ++k) {
    if (k > 0) out->append(", ");
    AppendValue(out, values, begin + k, null_repr);
  }
  out->push_back(']');
}

void AppendMapEntries(std::string* out, const MapArray& map, int64_t i,
                      std::string_view null_repr) {
  const auto& entries = static_cast<const StructArray&>(*map.values());
  const int64_t begin = map.value_offset(i);
  const int64_t length = map.value_length(i);
  const int64_t base = entries.offset();
  out->push_back('{');
  for (int64_t k = 0; k < length; ++k) {
    if (k > 0) out->append(", ");
    const int64_t e = begin + k;
    if (entries.IsNull(e)) {
      out->append(null_repr);
      continue;
    }
    AppendValue(out, *entries.field(0), base + e, null_repr);
    out->append(": ");
    AppendValue(out, *entries.field(1), base + e, null_repr);
  }
  out->push_back('}');
}

void AppendValue(std::string* out, const Array& array, int64_t i, std::string_view null_repr) {
  const DataType& type = *array.type();
  // Types whose nullness lives elsewhere: resolve them first, with range
  // checks so that malformed indices print a marker instead of reading
  // out of bounds.
  switch (type.id()) {
    case TypeId::kNull:
      out->append(null_repr);
      return;
    case TypeId::kSparseUnion:
    case TypeId::kDenseUnion: {
      const auto& u = static_cast<const UnionArray&>(array);
      const int child = u.child_id(i);
      if (child < 0 || child >= u.num_fields()) {
        out->append("<undefined type code ");
        AppendNumber(out, static_cast<int>(u.type_code(i)));
        out->push_back('>');
        return;
      }
      const int64_t j = u.value_offset(i);
      if (j < 0 || j >= u.field(child)->length()) {
        out->append("<union offset out of range>");
        return;
      }
      AppendValue(out, *u.field(child), j, null_repr);
      return;
    }
    case TypeId::kDictionary: {
      if (array.data()->IsNull(i)) {
        out->append(null_repr);
        return;
      }
      const auto& d = static_cast<const DictionaryArray&>(array);
      const int64_t index = d.GetIndex(i);
      if (d.dictionary() == nullptr || index < 0 || index >= d.dictionary()->length()) {
        out->append("<dictionary index ");
        AppendNumber(out, index);
        out->append(d.dictionary() == nullptr ? " without dictionary>" : " out of range>");
        return;
      }
      AppendValue(out, *d.dictionary(), index, null_repr);
      return;
    }
    case TypeId::kRunEndEncoded: {
      const auto& r = static_cast<const RunEndEncodedArray&>(array);
      const int64_t run = r.FindPhysicalIndex(i);
      if (run >= r.values()->length()) {
        out->append("<past the last run>");
        return;
      }
      AppendValue(out, *r.values(), run, null_repr);
      return;
    }
    case TypeId::kExtension:
      AppendValue(out, *static_cast<const ExtensionArray&>(array).storage(), i, null_repr);
      return;
    default:
      break;
  }
  if (array.data()->IsNull(i)) {
    out->append(null_repr);
    return;
  }
  switch (type.id()) {
    case TypeId::kBool:
      out->append(static_cast<const BooleanArray&>(array).Value(i) ? "true" : "false");
      return;
    case TypeId::kInt8:
      AppendNumber(out, static_cast<int>(LoadValue<int8_t>(array, i)));
      return;
    case TypeId::kUInt8:
      AppendNumber(out, static_cast<unsigned>(LoadValue<uint8_t>(array, i)));
      return;
    case TypeId::kInt16:
      AppendNumber(out, LoadValue<int16_t>(array, i));
      return;
    case TypeId::kUInt16:
      AppendNumber(out, LoadValue<uint16_t>(array, i));
      return;
    case TypeId::kInt32:
      AppendNumber(out, LoadValue<int32_t>(array, i));
      return;
    case TypeId::kUInt32:
      AppendNumber(out, LoadValue<uint32_t>(array, i));
      return;
    case TypeId::kInt64:
      AppendNumber(out, LoadValue<int64_t>(array, i));
      return;
    case TypeId::kUInt64:
      AppendNumber(out, LoadValue<uint64_t>(array, i));
      return;
    case TypeId::kHalfFloat:
      AppendNumber(out, internal::HalfToFloat(LoadValue<uint16_t>(array, i)));
      return;
    case TypeId::kFloat:
      AppendNumber(out, LoadValue<float>(array, i));
      return;
    case TypeId::kDouble:
      AppendNumber(out, LoadValue<double>(array, i));
      return;
    case TypeId::kDecimal32:
    case TypeId::kDecimal64:
    case TypeId::kDecimal128:
    case TypeId::kDecimal256: {
      const auto& dt = static_cast<const DecimalType&>(type);
      const auto& fsb = static_cast<const FixedSizeBinaryArray&>(array);
      AppendDecimal(out, fsb.GetValue(i), dt.byte_width(), dt.scale());
      return;
    }
    case TypeId::kDate32:
      AppendDate(out, LoadValue<int32_t>(array, i));
      return;
    case TypeId::kDate64: {
      int64_t days;
      int64_t ms;
      FloorDivMod(LoadValue<int64_t>(array, i), 86400000, &days, &ms);
      AppendDate(out, days);
      if (ms != 0) {
        out->push_back(' ');
        AppendTimeOfDay(out, static_cast<uint64_t>(ms), TimeUnit::kMilli);
      }
      return;
    }
    case TypeId::kTime32:
      AppendTime(out, LoadValue<int32_t>(array, i), static_cast<const TimeType&>(type).unit());
      return;
    case TypeId::kTime64:
      AppendTime(out, LoadValue<int64_t>(array, i), static_cast<const TimeType&>(type).unit());
      return;
    case TypeId::kTimestamp: {
      const auto& ts = static_cast<const TimestampType&>(type);
      AppendTimestamp(out, LoadValue<int64_t>(array, i), ts.unit());
      if (!ts.timezone().empty()) {
        out->push_back(' ');
        out->append(ts.timezone());
      }
      return;
    }
    case TypeId::kDuration:
      AppendNumber(out, LoadValue<int64_t>(array, i));
      out->append(TimeUnitName(static_cast<const DurationType&>(type).unit()));
      return;
    case TypeId::kIntervalMonths:
      AppendNumber(out, LoadValue<int32_t>(array, i));
      out->push_back('M');
      return;
    case TypeId::kIntervalDayTime: {
      DayTimeInterval v;
      std::memcpy(&v, static_cast<const FixedSizeBinaryArray&>(array).GetValue(i), sizeof(v));
      AppendNumber(out, v.days);
      out->push_back('d');
      AppendNumber(out, v.milliseconds);
      out->append("ms");
      return;
    }
    case TypeId::kIntervalMonthDayNano: {
      MonthDayNanoInterval v;
      std::memcpy(&v, static_cast<const FixedSizeBinaryArray&>(array).GetValue(i), sizeof(v));
      AppendNumber(out, v.months);
      out->push_back('M');
      AppendNumber(out, v.days);
      out->push_back('d');
      AppendNumber(out, v.nanoseconds);
      out->append("ns");
      return;
    }
    case TypeId::kFixedSizeBinary:
      AppendHex(out, static_cast<const FixedSizeBinaryArray&>(array).GetView(i));
      return;
    case TypeId::kBinary:
    case TypeId::kString:
      AppendBytes(out, static_cast<const BinaryArray&>(array).GetView(i), IsUtf8(type.id()));
      return;
    case TypeId::kLargeBinary:
    case TypeId::kLargeString:
      AppendBytes(out, static_cast<const LargeBinaryArray&>(array).GetView(i), IsUtf8(type.id()));
      return;
    case TypeId::kBinaryView:
    case TypeId::kStringView:
      AppendBytes(out, static_cast<const BinaryViewArray&>(array).GetView(i), IsUtf8(type.id()));
      return;
    case TypeId::kList: {
      const auto& l = static_cast<const ListArray&>(array);
      AppendElements(out, *l.values(), l.value_offset(i), l.value_length(i), null_repr);
      return;
    }
    case TypeId::kLargeList: {
      const auto& l = static_cast<const LargeListArray&>(array);
      AppendElements(out, *l.values(), l.value_offset(i), l.value_length(i), null_repr);
      return;
    }
    case TypeId::kListView: {
      const auto& l = static_cast<const ListViewArray&>(array);
      AppendElements(out, *l.values(), l.value_offset(i), l.value_length(i), null_repr);
      return;
    }
    case TypeId::kLargeListView: {
      const auto& l = static_cast<const LargeListViewArray&>(array);
      AppendElements(out, *l.values(), l.value_offset(i), l.value_length(i), null_repr);
      return;
    }
    case TypeId::kFixedSizeList: {
      const auto& l = static_cast<const FixedSizeListArray&>(array);
      AppendElements(out, *l.values(), l.value_offset(i), l.list_size(), null_repr);
      return;
    }
    case TypeId::kMap:
      AppendMapEntries(out, static_cast<const MapArray&>(array), i, null_repr);
      return;
    case TypeId::kStruct: {
      const auto& s = static_cast<const StructArray&>(array);
      const int64_t j = s.offset() + i;
      out->push_back('{');
      for (int c = 0; c < s.num_fields(); ++c) {
        if (c > 0) out->append(", ");
        out->append(type.field(c)->name());
        out->append(": ");
        AppendValue(out, *s.field(c), j, null_repr);
      }
      out->push_back('}');
      return;
    }
    default:
      out->append("<");
      out->append(type.ToString());
      out->append(">");
      return;
  }
}

bool PrintsNested(TypeId id) {
  switch (id) {
    case TypeId::kList:
    case TypeId::kLargeList:
    case TypeId::kListView:
    case TypeId::kLargeListView:
    case TypeId::kFixedSizeList:
      return true;
    default:
      return false;
  }
}

/// The child values of list-like slot i, as a slice.
ArrayPtr ListSlot(const Array& array, int64_t i) {
  switch (array.type_id()) {
    case TypeId::kList:
      return static_cast<const ListArray&>(array).value_slice(i);
    case TypeId::kLargeList:
      return static_cast<const LargeListArray&>(array).value_slice(i);
    case TypeId::kListView:
      return static_cast<const ListViewArray&>(array).value_slice(i);
    case TypeId::kLargeListView:
      return static_cast<const LargeListViewArray&>(array).value_slice(i);
    default:
      return static_cast<const FixedSizeListArray&>(array).value_slice(i);
  }
}

/// Appends the multi-line form of `array`; the opening bracket is not
/// indented (the caller has placed it), every later line is indented by
/// `indent` (closing bracket) or `indent + 2` (elements).
void AppendArray(std::string* out, const Array& array, int indent,
                 const PrettyPrintOptions& options) {
  const int64_t length = array.length();
  if (length == 0) {
    out->append("[]");
    return;
  }
  const std::string pad(static_cast<size_t>(indent) + 2, ' ');
  const bool elide = options.window >= 0 && length > 2 * options.window;
  const int64_t head = elide ? options.window : length;
  const int64_t tail_begin = elide ? length - options.window : length;
  const bool nested = PrintsNested(array.type_id());
  out->append("[\n");
  auto element = [&](int64_t i) {
    out->append(pad);
    if (nested && !array.data()->IsNull(i)) {
      AppendArray(out, *ListSlot(array, i), indent + 2, options);
    } else {
      AppendValue(out, array, i, options.null_repr);
    }
    out->append(i + 1 < length ? ",\n" : "\n");
  };
  for (int64_t i = 0; i < head; ++i) element(i);
  if (elide) {
    out->append(pad);
    out->append(options.window > 0 ? "...,\n" : "...\n");
    for (int64_t i = tail_begin; i < length; ++i) element(i);
  }
  out->append(static_cast<size_t>(indent), ' ');
  out->push_back(']');
}

}  // namespace

namespace internal {

std::string FormatValueWithNull(const Array& array, int64_t i, std::string_view null_repr) {
  std::string out;
  AppendValue(&out, array, i, null_repr);
  return out;
}

}  // namespace internal

std::string FormatValue(const Array& array, int64_t i) {
  return internal::FormatValueWithNull(array, i, "null");
}

std::string PrettyPrint(const Array& array, const PrettyPrintOptions& options) {
  const int indent = options.indent < 0 ? 0 : options.indent;
  std::string out(static_cast<size_t>(indent), ' ');
  AppendArray(&out, array, indent, options);
  return out;
}

std::string PrettyPrint(const RecordBatch& batch, const PrettyPrintOptions& options) {
  const int indent = options.indent < 0 ? 0 : options.indent;
  const std::string pad(static_cast<size_t>(indent), ' ');
  std::string out;
  // The schema, one line per field (nested fields indented by Schema::ToString).
  const std::string schema_text = batch.schema()->ToString();
  size_t start = 0;
  while (start < schema_text.size()) {
    size_t end = schema_text.find('\n', start);
    if (end == std::string::npos) end = schema_text.size();
    out.append(pad);
    out.append(schema_text, start, end - start);
    out.push_back('\n');
    start = end + 1;
  }
  out.append(pad);
  AppendNumber(&out, batch.num_rows());
  out.append(batch.num_rows() == 1 ? " row\n" : " rows\n");
  for (int c = 0; c < batch.num_columns(); ++c) {
    out.append(pad);
    out.append(batch.schema()->field(c)->name());
    out.append(": ");
    AppendArray(&out, *batch.column(c), indent, options);
    out.push_back('\n');
  }
  return out;
}

}  // namespace alkaid::format
