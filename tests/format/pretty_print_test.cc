#include "alkaid/format/pretty_print.h"

#include <array>
#include <climits>
#include <cmath>
#include <limits>

#include "alkaid/format/record_batch.h"
#include "raw_array_test_util.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

using namespace alkaid::format::testing;  // NOLINT(google-build-using-namespace): test helpers
using std::nullopt;

/// All slots of `array` through FormatValue, joined by " | ".
std::string Values(const ArrayPtr& array) {
  std::string out;
  for (int64_t i = 0; i < array->length(); ++i) {
    if (i > 0) out += " | ";
    out += FormatValue(*array, i);
  }
  return out;
}

template <size_t N>
std::array<uint8_t, N> LittleEndian(uint64_t low, uint64_t fill) {
  std::array<uint8_t, N> out{};
  for (size_t k = 0; k < N; ++k) {
    out[k] = static_cast<uint8_t>(k < 8 ? (low >> (8 * k)) : fill);
  }
  return out;
}

// ---------------------------------------------------------------------------
// FormatValue, one type category at a time

TEST(FormatValueTest, NullBoolAndIntegers) {
  EXPECT_EQ(Values(Bools({true, nullopt, false})), "true | null | false");
  EXPECT_EQ(Values(Fixed<int8_t>(int8(), {-128, 127})), "-128 | 127");
  EXPECT_EQ(Values(Fixed<uint8_t>(uint8(), {0, 255})), "0 | 255");
  EXPECT_EQ(Values(Fixed<int16_t>(int16(), {-300})), "-300");
  EXPECT_EQ(Values(Fixed<uint16_t>(uint16(), {65535})), "65535");
  EXPECT_EQ(Values(Int32s({1, nullopt, -2})), "1 | null | -2");
  EXPECT_EQ(Values(Fixed<uint32_t>(uint32(), {4294967295u})), "4294967295");
  EXPECT_EQ(Values(Fixed<int64_t>(int64(), {std::numeric_limits<int64_t>::min()})),
            "-9223372036854775808");
  EXPECT_EQ(Values(Fixed<uint64_t>(uint64(), {std::numeric_limits<uint64_t>::max()})),
            "18446744073709551615");
  EXPECT_EQ(Values(MakeArray(ArrayData::Make(null(), 2, {nullptr}, 2))), "null | null");
}

TEST(FormatValueTest, FloatsUseShortestRoundTripForm) {
  EXPECT_EQ(Values(Fixed<double>(float64(), {1.5, 0.1, 1e20, -0.0, 3.0})),
            "1.5 | 0.1 | 1e+20 | -0 | 3");
  EXPECT_EQ(Values(Fixed<double>(float64(), {std::numeric_limits<double>::infinity(),
                                             -std::numeric_limits<double>::infinity(),
                                             std::numeric_limits<double>::quiet_NaN()})),
            "inf | -inf | nan");
  EXPECT_EQ(Values(Fixed<float>(float32(), {0.1f, 16777216.0f})), "0.1 | 16777216");
  // float16: 1, -2, 1/3 rounded to half, smallest subnormal, 65504, inf, NaN
  // (decoded to float, then printed in the shortest form for a float).
  EXPECT_EQ(
      Values(Fixed<uint16_t>(float16(), {0x3c00, 0xc000, 0x3555, 0x0001, 0x7bff, 0x7c00, 0x7e00})),
      "1 | -2 | 0.33325195 | 5.9604645e-08 | 65504 | inf | nan");
}

TEST(FormatValueTest, DecimalsAreExact) {
  using D32 = std::array<uint8_t, 4>;
  using D64 = std::array<uint8_t, 8>;
  EXPECT_EQ(Values(Fixed<int32_t>(decimal32(7, 2), {-12345, 5, 0, -5, 100})),
            "-123.45 | 0.05 | 0.00 | -0.05 | 1.00");
  EXPECT_EQ(Values(Fixed<int64_t>(decimal64(18, 0), {-9, 123456789012345678})),
            "-9 | 123456789012345678");
  EXPECT_EQ(Values(Fixed<int32_t>(decimal32(5, -2), {123, 0, -7})), "12300 | 0 | -700");
  // Scales from hostile metadata: an exponent instead of billions of zeros
  // (found by ipc_message_fuzz).
  EXPECT_EQ(Values(Fixed<int32_t>(decimal32(5, INT32_MIN), {123, -7})),
            "123E2147483648 | -7E2147483648");
  EXPECT_EQ(Values(Fixed<int32_t>(decimal32(5, INT32_MAX), {123})), "123E-2147483647");
  EXPECT_EQ(Values(Fixed<int32_t>(decimal32(5, 100), {1})), "0." + std::string(99, '0') + "1");
  static_assert(sizeof(D32) == 4 && sizeof(D64) == 8);
  using D128 = std::array<uint8_t, 16>;
  D128 max128 = LittleEndian<16>(~uint64_t{0}, 0xff);
  max128[15] = 0x7f;
  D128 min128{};
  min128[15] = 0x80;
  EXPECT_EQ(Values(Fixed<D128>(decimal128(38, 0), {max128, min128})),
            "170141183460469231731687303715884105727 | "
            "-170141183460469231731687303715884105728");
  EXPECT_EQ(Values(Fixed<D128>(decimal128(38, 10), {LittleEndian<16>(~uint64_t{0} - 122, 0xff)})),
            "-0.0000000123");
  using D256 = std::array<uint8_t, 32>;
  D256 max256 = LittleEndian<32>(~uint64_t{0}, 0xff);
  max256[31] = 0x7f;
  D256 min256{};
  min256[31] = 0x80;
  EXPECT_EQ(Values(Fixed<D256>(decimal256(76, 0), {max256, min256})),
            "57896044618658097711785492504343953926634992332820282019728792003956564819967 | "
            "-57896044618658097711785492504343953926634992332820282019728792003956564819968");
  EXPECT_EQ(Values(Fixed<D256>(decimal256(76, 4),
                               {LittleEndian<32>(1234567, 0),
                                LittleEndian<32>(~uint64_t{0} - 1234566, 0xff), nullopt})),
            "123.4567 | -123.4567 | null");
  // 2^64 exercises the carry between words.
  D256 two64{};
  two64[8] = 1;
  EXPECT_EQ(Values(Fixed<D256>(decimal256(76, 2), {two64})), "184467440737095516.16");
}

TEST(FormatValueTest, DatesAnyYear) {
  EXPECT_EQ(Values(Fixed<int32_t>(date32(), {0, 19753, -1, -25508, -135081, -719162, 2932896})),
            "1970-01-01 | 2024-01-31 | 1969-12-31 | 1900-03-01 | 1600-02-29 | 0001-01-01 | "
            "9999-12-31");
  EXPECT_EQ(Values(Fixed<int32_t>(date32(), {-719528, -719529, 2932897})),
            "0000-01-01 | -0001-12-31 | 10000-01-01");
  EXPECT_EQ(Values(Fixed<int64_t>(date64(), {19753LL * 86400000, -86400000, 1, -1})),
            "2024-01-31 | 1969-12-31 | 1970-01-01 00:00:00.001 | 1969-12-31 23:59:59.999");
}

TEST(FormatValueTest, TimesPerUnit) {
  EXPECT_EQ(Values(Fixed<int32_t>(time32(TimeUnit::kSecond), {0, 3661, 86399})),
            "00:00:00 | 01:01:01 | 23:59:59");
  EXPECT_EQ(Values(Fixed<int32_t>(time32(TimeUnit::kMilli), {3661001})), "01:01:01.001");
  EXPECT_EQ(Values(Fixed<int64_t>(time64(TimeUnit::kMicro), {45296000007})), "12:34:56.000007");
  EXPECT_EQ(Values(Fixed<int64_t>(time64(TimeUnit::kNano), {1, -1})),
            "00:00:00.000000001 | -00:00:00.000000001");
}

TEST(FormatValueTest, Timestamps) {
  EXPECT_EQ(Values(Fixed<int64_t>(timestamp(TimeUnit::kMicro), {1706704496123456})),
            "2024-01-31 12:34:56.123456");
  EXPECT_EQ(Values(Fixed<int64_t>(timestamp(TimeUnit::kSecond, "UTC"), {0, -1})),
            "1970-01-01 00:00:00 UTC | 1969-12-31 23:59:59 UTC");
  EXPECT_EQ(Values(Fixed<int64_t>(timestamp(TimeUnit::kMilli, "Europe/Paris"), {-1})),
            "1969-12-31 23:59:59.999 Europe/Paris");
  // The extremes of a nanosecond timestamp.
  EXPECT_EQ(
      Values(Fixed<int64_t>(timestamp(TimeUnit::kNano), {std::numeric_limits<int64_t>::max(),
                                                         std::numeric_limits<int64_t>::min()})),
      "2262-04-11 23:47:16.854775807 | 1677-09-21 00:12:43.145224192");
  // Seconds far before the common era.
  EXPECT_EQ(Values(Fixed<int64_t>(timestamp(TimeUnit::kSecond), {-62167219200LL - 1})),
            "-0001-12-31 23:59:59");
}

TEST(FormatValueTest, DurationsAndIntervals) {
  EXPECT_EQ(Values(Fixed<int64_t>(duration(TimeUnit::kMilli), {123, -5})), "123ms | -5ms");
  EXPECT_EQ(Values(Fixed<int64_t>(duration(TimeUnit::kSecond), {7})), "7s");
  EXPECT_EQ(Values(Fixed<int64_t>(duration(TimeUnit::kMicro), {7})), "7us");
  EXPECT_EQ(Values(Fixed<int64_t>(duration(TimeUnit::kNano), {7})), "7ns");
  EXPECT_EQ(Values(Fixed<int32_t>(month_interval(), {14, -1})), "14M | -1M");
  EXPECT_EQ(Values(Fixed<DayTimeInterval>(day_time_interval(), {DayTimeInterval{3, 1500}})),
            "3d1500ms");
  EXPECT_EQ(Values(Fixed<MonthDayNanoInterval>(month_day_nano_interval(),
                                               {MonthDayNanoInterval{1, 2, 3}, nullopt})),
            "1M2d3ns | null");
}

TEST(FormatValueTest, BinaryAndStrings) {
  EXPECT_EQ(Values(Binaries(binary(), {std::string("\x0a\xff", 2), "", nullopt})),
            "x'0aff' | x'' | null");
  EXPECT_EQ(Values(Strings({"joe", "", "say \"hi\"\\", "tab\tnl\ncr\r", std::string("\x01\x7f", 2),
                            "h\xc3\xa9"})),
            "\"joe\" | \"\" | \"say \\\"hi\\\"\\\\\" | \"tab\\tnl\\ncr\\r\" | \"\\x01\\x7f\" | "
            "\"h\xc3\xa9\"");
  EXPECT_EQ(Values(Binaries<int64_t>(large_utf8(), {"big"}, "junk")), "\"big\"");
  EXPECT_EQ(Values(Binaries<int64_t>(large_binary(), {"AB"})), "x'4142'");
  using B3 = std::array<uint8_t, 3>;
  EXPECT_EQ(Values(Fixed<B3>(fixed_size_binary(3), {B3{0, 1, 0xab}, nullopt})), "x'0001ab' | null");
  EXPECT_EQ(Values(Views(utf8_view(), {"short", "a string longer than twelve bytes", nullopt}, 2)),
            "\"short\" | \"a string longer than twelve bytes\" | null");
  EXPECT_EQ(Values(Views(binary_view(), {"\x01", "0123456789abcdef"})),
            "x'01' | x'30313233343536373839616263646566'");
}

TEST(FormatValueTest, ListsMapsStructs) {
  auto l =
      ListOf<int32_t>(list(int32()), {1, 4, 4, 4}, {true, true, false}, Int32s({9, 1, 2, nullopt}));
  EXPECT_EQ(Values(l), "[1, 2, null] | [] | null");
  EXPECT_EQ(Values(l->Slice(1)), "[] | null");
  auto ll = ListOf<int64_t>(large_list(utf8()), {0, 2}, {true}, Strings({"a", "b"}));
  EXPECT_EQ(Values(ll), "[\"a\", \"b\"]");
  auto lv =
      ListViewOf<int32_t>(list_view(int32()), {2, 0}, {1, 3}, {true, true}, Int32s({1, 2, 3}));
  EXPECT_EQ(Values(lv), "[3] | [1, 2, 3]");
  auto fsl = Nested(fixed_size_list(int32(), 2), {true, false, true}, {Int32s({1, 2, 0, 0, 3, 4})});
  EXPECT_EQ(Values(fsl->Slice(1)), "null | [3, 4]");
  auto nested = ListOf<int32_t>(list(list(int32())), {0, 2}, {true}, l);
  EXPECT_EQ(Values(nested), "[[1, 2, null], []]");

  auto mtype = map(utf8(), int32());
  auto entries = Nested(mtype->field(0)->type(), {true, true, true},
                        {Strings({"k1", "k2", "k3"}), Int32s({1, nullopt, 3})});
  auto m = ListOf<int32_t>(mtype, {0, 2, 2, 3}, {true, false, true}, entries);
  EXPECT_EQ(Values(m), "{\"k1\": 1, \"k2\": null} | null | {\"k3\": 3}");

  auto stype = struct_({field("a", int32()), field("b", utf8())});
  auto s = Nested(stype, {true, false, true, true},
                  {Int32s({0, 1, 2, nullopt}), Strings({"", "x", "y", "z"})});
  EXPECT_EQ(Values(s->Slice(1)), "null | {a: 2, b: \"y\"} | {a: null, b: \"z\"}");
}

TEST(FormatValueTest, UnionsDictionariesRunEndsExtensions) {
  auto su = SparseUnion(sparse_union({field("i", int32()), field("s", utf8())}, {3, 7}), {3, 7, 3},
                        {Int32s({5, 0, nullopt}), Strings({"", "x", ""})});
  EXPECT_EQ(Values(su), "5 | \"x\" | null");
  EXPECT_EQ(Values(su->Slice(1)), "\"x\" | null");
  auto du = DenseUnion(dense_union({field("i", int32()), field("s", utf8())}), {1, 0, 1}, {1, 0, 0},
                       {Int32s({42}), Strings({"a", "b"})});
  EXPECT_EQ(Values(du), "\"b\" | 42 | \"a\"");
  auto d = Dict(Strings({"x", "y", nullopt}), {1, nullopt, 0, 2});
  EXPECT_EQ(Values(d), "\"y\" | null | \"x\" | null");
  auto r = Ree({2, 3, 5}, Int32s({7, nullopt, 8}));
  EXPECT_EQ(Values(r), "7 | 7 | null | 8 | 8");
  EXPECT_EQ(Values(r->Slice(1, 3)), "7 | null | 8");
  auto e = Retype(Int32s({1, nullopt}), extension("my.ext", "meta", int32()));
  EXPECT_EQ(Values(e), "1 | null");
}

TEST(FormatValueTest, MalformedIndicesPrintMarkers) {
  auto d = Dict(Strings({"x"}), {0, 5});
  EXPECT_EQ(FormatValue(*d, 1), "<dictionary index 5 out of range>");
  auto su = SparseUnion(sparse_union({field("i", int32())}, {3}), {3, 4}, {Int32s({1, 2})});
  EXPECT_EQ(FormatValue(*su, 1), "<undefined type code 4>");
}

// ---------------------------------------------------------------------------
// PrettyPrint

TEST(PrettyPrintTest, FlatArray) {
  EXPECT_EQ(PrettyPrint(*Int32s({1, nullopt, 2})), "[\n  1,\n  null,\n  2\n]");
  EXPECT_EQ(PrettyPrint(*Int32s({})), "[]");
  EXPECT_EQ(Int32s({1, nullopt, 2})->ToString(), "[\n  1,\n  null,\n  2\n]");
  EXPECT_EQ(PrettyPrint(*Strings({"a", nullopt}), {.null_repr = "NA"}), "[\n  \"a\",\n  NA\n]");
  EXPECT_EQ(PrettyPrint(*Int32s({1, 2}), {.indent = 4}), "    [\n      1,\n      2\n    ]");
}

TEST(PrettyPrintTest, NestedListsAreIndented) {
  auto inner =
      ListOf<int32_t>(list(int32()), {0, 2, 2, 3}, {true, false, true}, Int32s({1, 2, nullopt}));
  EXPECT_EQ(PrettyPrint(*inner),
            "[\n"
            "  [\n"
            "    1,\n"
            "    2\n"
            "  ],\n"
            "  null,\n"
            "  [\n"
            "    null\n"
            "  ]\n"
            "]");
  auto outer = ListOf<int32_t>(list(list(int32())), {0, 1, 1, 3}, {true, true, true}, inner);
  EXPECT_EQ(PrettyPrint(*outer, {.indent = 1, .null_repr = "-"}),
            " [\n"
            "   [\n"
            "     [\n"
            "       1,\n"
            "       2\n"
            "     ]\n"
            "   ],\n"
            "   [],\n"
            "   [\n"
            "     -,\n"
            "     [\n"
            "       -\n"
            "     ]\n"
            "   ]\n"
            " ]");
  // Structs and maps stay on one line per slot.
  auto stype = struct_({field("a", int32())});
  EXPECT_EQ(PrettyPrint(*Nested(stype, {true, false}, {Int32s({1, 2})})),
            "[\n  {a: 1},\n  null\n]");
}

TEST(PrettyPrintTest, WindowElidesTheMiddle) {
  auto a = Int32s({0, 1, 2, 3, 4, 5, 6});
  EXPECT_EQ(PrettyPrint(*a, {.window = 2}), "[\n  0,\n  1,\n  ...,\n  5,\n  6\n]");
  EXPECT_EQ(PrettyPrint(*a, {.window = 0}), "[\n  ...\n]");
  EXPECT_EQ(PrettyPrint(*a->Slice(0, 4), {.window = 2}), "[\n  0,\n  1,\n  2,\n  3\n]");
  std::string all = "[\n";
  for (int i = 0; i < 30; ++i) all += "  " + std::to_string(i) + (i < 29 ? ",\n" : "\n");
  all += "]";
  std::vector<std::optional<int32_t>> many;
  for (int i = 0; i < 30; ++i) many.push_back(i);
  EXPECT_EQ(PrettyPrint(*Int32s(many), {.window = -1}), all);
  // Default window is 10 at each end.
  const std::string def = PrettyPrint(*Int32s(many));
  EXPECT_NE(def.find("  9,\n  ...,\n  20,"), std::string::npos) << def;
  // The window applies at each nesting level.
  auto lists = ListOf<int32_t>(list(int32()), {0, 5, 5, 5, 5, 5}, {true, true, true, true, true},
                               Int32s({1, 2, 3, 4, 5}));
  EXPECT_EQ(PrettyPrint(*lists, {.window = 1}),
            "[\n  [\n    1,\n    ...,\n    5\n  ],\n  ...,\n  []\n]");
}

TEST(PrettyPrintTest, RecordBatch) {
  auto s = schema({field("a", int32()), field("b", utf8())});
  ASSERT_OK_AND_ASSIGN(
      auto batch,
      RecordBatch::Make(s, 2, std::vector<ArrayPtr>{Int32s({1, nullopt}), Strings({"x", "y"})}));
  const std::string expected_columns =
      "2 rows\n"
      "a: [\n"
      "  1,\n"
      "  null\n"
      "]\n"
      "b: [\n"
      "  \"x\",\n"
      "  \"y\"\n"
      "]\n";
  const std::string text = PrettyPrint(*batch);
  EXPECT_EQ(text, s->ToString() + expected_columns);
  EXPECT_EQ(batch->ToString(), text);
  ASSERT_OK_AND_ASSIGN(auto one,
                       RecordBatch::Make(s, 1, std::vector<ArrayPtr>{Int32s({1}), Strings({"x"})}));
  EXPECT_NE(PrettyPrint(*one).find("\n1 row\n"), std::string::npos);
  const std::string indented = PrettyPrint(*one, {.indent = 2});
  EXPECT_NE(indented.find("\n  1 row\n  a: [\n    1\n  ]\n  b: [\n"), std::string::npos)
      << indented;
}

}  // namespace
}  // namespace alkaid::format
