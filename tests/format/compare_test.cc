#include "alkaid/format/compare.h"

#include <array>
#include <cmath>
#include <limits>

#include "alkaid/format/record_batch.h"
#include "raw_array_test_util.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

using namespace alkaid::format::testing;  // NOLINT(google-build-using-namespace): test helpers
using std::nullopt;

void ExpectEqual(const ArrayPtr& a, const ArrayPtr& b, const EqualOptions& options = {}) {
  EXPECT_TRUE(ArrayEquals(*a, *b, options));
  EXPECT_TRUE(ArrayEquals(*b, *a, options));
  EXPECT_OK(CheckArrayEquals(*a, *b, options));
  if (!options.nans_equal && !options.check_metadata) {
    EXPECT_TRUE(a->Equals(*b));
  }
}

void ExpectNotEqual(const ArrayPtr& a, const ArrayPtr& b, const EqualOptions& options = {}) {
  EXPECT_FALSE(ArrayEquals(*a, *b, options));
  EXPECT_FALSE(ArrayEquals(*b, *a, options));
  EXPECT_FALSE(CheckArrayEquals(*a, *b, options).ok());
}

std::string Diff(const ArrayPtr& expected, const ArrayPtr& actual,
                 const EqualOptions& options = {}) {
  Status st = CheckArrayEquals(*expected, *actual, options);
  EXPECT_EQ(st.code(), StatusCode::kInvalid);
  return st.ok() ? std::string("OK") : st.message();
}

// ---------------------------------------------------------------------------
// Primitive layouts

TEST(CompareTest, PrimitiveEqualAndDifferent) {
  ExpectEqual(Int32s({1, 2, 3}), Int32s({1, 2, 3}));
  ExpectNotEqual(Int32s({1, 2, 3}), Int32s({1, 2, 4}));
  ExpectNotEqual(Int32s({1, 2, 3}), Int32s({1, nullopt, 3}));
  ExpectEqual(Int32s({}), Int32s({}));
  EXPECT_EQ(Diff(Int32s({1, 2, 3, 5}), Int32s({1, 2, 3, nullopt})), "slot 3: expected 5, got null");
  EXPECT_EQ(Diff(Int32s({1, nullopt}), Int32s({1, 7})), "slot 1: expected null, got 7");
  EXPECT_EQ(Diff(Int32s({1, 2}), Int32s({1, 3})), "slot 1: expected 2, got 3");
}

TEST(CompareTest, TypeAndLengthMismatch) {
  EXPECT_EQ(Diff(Int32s({1}), Fixed<int64_t>(int64(), {1})), "type: expected int32, got int64");
  EXPECT_EQ(Diff(Int32s({1, 2, 3, 4}), Int32s({1, 2, 3, 4, 5})), "length: expected 4, got 5");
  ExpectNotEqual(Fixed<int32_t>(date32(), {1}), Int32s({1}));
  ExpectNotEqual(Fixed<int64_t>(timestamp(TimeUnit::kMilli), {1}),
                 Fixed<int64_t>(timestamp(TimeUnit::kMilli, "UTC"), {1}));
}

TEST(CompareTest, SliceOffsetsOnEitherSide) {
  auto full = Int32s({9, 1, nullopt, 3, 9});
  auto sliced = full->Slice(1, 3);
  ExpectEqual(sliced, Int32s({1, nullopt, 3}));
  // Both sliced, different offsets.
  auto other = Int32s({7, 7, 7, 1, nullopt, 3})->Slice(3, 3);
  ExpectEqual(sliced, other);
  ExpectNotEqual(full->Slice(0, 3), Int32s({1, nullopt, 3}));
  EXPECT_EQ(Diff(Int32s({1, nullopt, 4}), sliced), "slot 2: expected 4, got 3");
  // Non-null fast path with offsets.
  ExpectEqual(Int32s({5, 6, 7, 8})->Slice(2), Int32s({0, 0, 0, 7, 8})->Slice(3));
  ExpectNotEqual(Int32s({5, 6, 7, 8})->Slice(2), Int32s({0, 0, 0, 7, 9})->Slice(3));
}

TEST(CompareTest, BitmapPresentOrAbsentAndGarbageInNullSlots) {
  ExpectEqual(Int32s({1, 2, 3}, 0, /*force_bitmap=*/true), Int32s({1, 2, 3}));
  ExpectEqual(Int32s({1, nullopt, 3}, /*garbage=*/123), Int32s({1, nullopt, 3}, -55));
  ExpectEqual(Fixed<double>(float64(), {1.5, nullopt}, std::nan("")),
              Fixed<double>(float64(), {1.5, nullopt}, 2.0));
}

TEST(CompareTest, BooleansAtBitOffsets) {
  auto a = Bools({true, false, true, nullopt, false, true, true, false, true, false});
  auto b = Bools({false, false, false, true, false, true, nullopt, false, true, true, true});
  ExpectEqual(a->Slice(4, 2), b->Slice(4, 2));     // false, true
  ExpectNotEqual(a->Slice(5, 2), b->Slice(5, 2));  // true,true vs true,null
  ExpectEqual(a->Slice(7, 3)->Slice(1), Bools({true, false}));
  EXPECT_EQ(Diff(Bools({true, false}), Bools({true, true})), "slot 1: expected false, got true");
}

TEST(CompareTest, OtherFixedWidthTypes) {
  ExpectEqual(Fixed<uint8_t>(uint8(), {1, 255}), Fixed<uint8_t>(uint8(), {1, 255}));
  ExpectNotEqual(Fixed<uint64_t>(uint64(), {1, 2}), Fixed<uint64_t>(uint64(), {1, 3}));
  ExpectNotEqual(Fixed<int64_t>(duration(TimeUnit::kSecond), {1}),
                 Fixed<int64_t>(duration(TimeUnit::kSecond), {2}));
  using D128 = std::array<uint64_t, 2>;
  auto dec = [](std::vector<std::optional<D128>> v) {
    return Fixed<D128>(decimal128(20, 2), v, D128{7, 7});
  };
  ExpectEqual(dec({D128{5, 0}, nullopt}), dec({D128{5, 0}, nullopt}));
  ExpectNotEqual(dec({D128{5, 0}}), dec({D128{5, 1}}));
  EXPECT_EQ(Diff(dec({D128{12345, 0}}), dec({D128{~uint64_t{0}, ~uint64_t{0}}})),
            "slot 0: expected 123.45, got -0.01");
  ExpectNotEqual(Fixed<D128>(decimal128(20, 2), {D128{1, 0}}),
                 Fixed<D128>(decimal128(20, 3), {D128{1, 0}}));
  using MDN = MonthDayNanoInterval;
  ExpectEqual(Fixed<MDN>(month_day_nano_interval(), {MDN{1, 2, 3}}),
              Fixed<MDN>(month_day_nano_interval(), {MDN{1, 2, 3}}));
  EXPECT_EQ(Diff(Fixed<MDN>(month_day_nano_interval(), {MDN{1, 2, 3}}),
                 Fixed<MDN>(month_day_nano_interval(), {MDN{1, 2, 4}})),
            "slot 0: expected 1M2d3ns, got 1M2d4ns");
  using FSB = std::array<uint8_t, 3>;
  ExpectNotEqual(Fixed<FSB>(fixed_size_binary(3), {FSB{1, 2, 3}}),
                 Fixed<FSB>(fixed_size_binary(3), {FSB{1, 2, 4}}));
  ExpectEqual(Fixed<FSB>(fixed_size_binary(3), {FSB{9, 9, 9}, FSB{1, 2, 3}})->Slice(1),
              Fixed<FSB>(fixed_size_binary(3), {FSB{1, 2, 3}}));
}

TEST(CompareTest, NullType) {
  auto n3 = MakeArray(ArrayData::Make(null(), 3, {nullptr}, 3));
  auto n3b = MakeArray(ArrayData::Make(null(), 5, {nullptr}, 5))->Slice(1, 3);
  auto n4 = MakeArray(ArrayData::Make(null(), 4, {nullptr}, 4));
  ExpectEqual(n3, n3b);
  EXPECT_EQ(Diff(n3, n4), "length: expected 3, got 4");
}

// ---------------------------------------------------------------------------
// Floating point

TEST(CompareTest, FloatsCompareByValue) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto a = Fixed<double>(float64(), {1.0, nan, 0.0});
  auto b = Fixed<double>(float64(), {1.0, -nan, -0.0});
  ExpectNotEqual(a, b);
  EXPECT_FALSE(ArrayEquals(*a, *a));  // NaN != NaN even for the same array
  ExpectEqual(a, b, EqualOptions{.nans_equal = true});
  EXPECT_TRUE(ArrayEquals(*a, *a, EqualOptions{.nans_equal = true}));
  EXPECT_EQ(Diff(a, b), "slot 1: expected nan, got -nan");
  ExpectEqual(Fixed<double>(float64(), {0.0}), Fixed<double>(float64(), {-0.0}));
  ExpectNotEqual(Fixed<float>(float32(), {1.0f}), Fixed<float>(float32(), {1.0000001f}));
  ExpectNotEqual(Fixed<float>(float32(), {nan}), Fixed<float>(float32(), {1.0f}),
                 EqualOptions{.nans_equal = true});
}

TEST(CompareTest, HalfFloatsCompareDecodedValues) {
  // 0x0000 = +0, 0x8000 = -0, 0x7e00 and 0x7c01 are NaNs, 0x3c00 = 1.
  auto a = Fixed<uint16_t>(float16(), {0x0000, 0x3c00, 0x7e00});
  auto b = Fixed<uint16_t>(float16(), {0x8000, 0x3c00, 0x7c01});
  ExpectNotEqual(a, b);
  ExpectEqual(a, b, EqualOptions{.nans_equal = true});
  EXPECT_EQ(Diff(Fixed<uint16_t>(float16(), {0x3c00}), Fixed<uint16_t>(float16(), {0xc000})),
            "slot 0: expected 1, got -2");
}

// ---------------------------------------------------------------------------
// Variable-width binary

TEST(CompareTest, StringsWithOffsetsNotStartingAtZero) {
  ExpectEqual(Strings({"ab", nullopt, "", "xyz"}), Strings({"ab", nullopt, "", "xyz"}, "junk"));
  ExpectNotEqual(Strings({"ab", "c"}), Strings({"ab", "d"}));
  ExpectNotEqual(Strings({"ab", "c"}), Strings({"a", "bc"}));
  ExpectNotEqual(Strings({""}), Strings({nullopt}));
  EXPECT_EQ(Diff(Strings({"ab", "c"}), Strings({"ab", "cd"})),
            "slot 1: expected \"c\", got \"cd\"");
  ExpectEqual(Strings({"q", "ab", "c"})->Slice(1),
              Strings({"zz", "ab", "c", "w"}, "jj")->Slice(1, 2));
  ExpectEqual(Binaries<int64_t>(large_utf8(), {"x", nullopt}, "lead"),
              Binaries<int64_t>(large_utf8(), {"x", nullopt}));
  ExpectNotEqual(Binaries<int64_t>(large_binary(), {"x"}),
                 Binaries<int64_t>(large_binary(), {"y"}));
  ExpectNotEqual(Binaries(binary(), {"x"}), Strings({"x"}));  // types differ
  EXPECT_EQ(Diff(Binaries(binary(), {std::string("\x0a\xff", 2)}), Binaries(binary(), {"a"})),
            "slot 0: expected x'0aff', got x'61'");
}

TEST(CompareTest, BinaryViewsSplitDifferently) {
  const std::string long1 = "a string longer than twelve bytes";
  const std::string long2 = "another fairly long string value";
  auto a = Views(utf8_view(), {"short", long1, nullopt, long2, ""}, 1);
  auto b = Views(utf8_view(), {"short", long1, nullopt, long2, ""}, 2, "leading junk");
  ExpectEqual(a, b);
  ExpectEqual(a->Slice(1, 3), Views(utf8_view(), {long1, nullopt, long2}, 3));
  // Same prefix, difference after it.
  ExpectNotEqual(Views(binary_view(), {long1}), Views(binary_view(), {long1 + "!"}));
  std::string changed = long1;
  changed[20] = 'X';
  EXPECT_EQ(Diff(Views(binary_view(), {"x", long1}), Views(binary_view(), {"x", changed}, 2))
                .substr(0, 18),
            "slot 1: expected x");
  ExpectNotEqual(Views(utf8_view(), {"abc"}), Views(utf8_view(), {"abd"}));
}

// ---------------------------------------------------------------------------
// Lists

TEST(CompareTest, ListsWithDifferentOffsets) {
  // [[1, 2], null, [], [3]]
  auto a =
      ListOf<int32_t>(list(int32()), {0, 2, 2, 2, 3}, {true, false, true, true}, Int32s({1, 2, 3}));
  // Same values; the child has junk around the ranges and the null slot
  // covers a non-empty range.
  auto b = ListOf<int32_t>(list(int32()), {1, 3, 6, 6, 7}, {true, false, true, true},
                           Int32s({99, 1, 2, 5, 5, 5, 3, 99}));
  ExpectEqual(a, b);
  ExpectEqual(a->Slice(2), b->Slice(2));
  // Child slice offset.
  auto c = ListOf<int32_t>(list(int32()), {0, 2, 2, 2, 3}, {true, false, true, true},
                           Int32s({0, 0, 1, 2, 3})->Slice(2));
  ExpectEqual(a, c);
  ExpectNotEqual(a, ListOf<int32_t>(list(int32()), {0, 2, 2, 2, 3}, {true, true, true, true},
                                    Int32s({1, 2, 3})));
  // Empty list vs null list.
  EXPECT_EQ(Diff(a, ListOf<int32_t>(list(int32()), {0, 2, 2, 2, 3}, {true, true, true, true},
                                    Int32s({1, 2, 3}))),
            "slot 1: expected null, got []");
}

TEST(CompareTest, ListDifferencesNameTheElement) {
  auto a = ListOf<int32_t>(list(int32()), {0, 1, 1, 3}, {true, true, true}, Int32s({4, 6, 7}));
  auto b = ListOf<int32_t>(list(int32()), {0, 1, 1, 3}, {true, true, true}, Int32s({4, 6, 8}));
  EXPECT_EQ(Diff(a, b), "slot 2.item[1]: expected 7, got 8");
  auto c = ListOf<int32_t>(list(int32()), {0, 1, 1, 2}, {true, true, true}, Int32s({4, 6}));
  EXPECT_EQ(Diff(a, c), "slot 2: expected [6, 7], got [6]");
  // Null element inside a list.
  auto d =
      ListOf<int32_t>(list(int32()), {0, 1, 1, 3}, {true, true, true}, Int32s({4, nullopt, 7}));
  EXPECT_EQ(Diff(a, d), "slot 2.item[0]: expected 6, got null");
  // Large lists.
  auto la = ListOf<int64_t>(large_list(utf8()), {0, 2}, {true}, Strings({"a", "b"}));
  auto lb = ListOf<int64_t>(large_list(utf8()), {1, 3}, {true}, Strings({"z", "a", "b"}));
  ExpectEqual(la, lb);
  EXPECT_EQ(Diff(la, ListOf<int64_t>(large_list(utf8()), {0, 2}, {true}, Strings({"a", "c"}))),
            "slot 0.item[1]: expected \"b\", got \"c\"");
}

TEST(CompareTest, NestedListsRecurseWithTheRightIndices) {
  // [[[1], [2, 3]], [[4]]] built twice with different inner layouts.
  auto inner_a =
      ListOf<int32_t>(list(int32()), {0, 1, 3, 4}, {true, true, true}, Int32s({1, 2, 3, 4}));
  auto a = ListOf<int32_t>(list(list(int32())), {0, 2, 3}, {true, true}, inner_a);
  auto inner_b = ListOf<int32_t>(list(int32()), {5, 5, 6, 8, 9}, {true, true, true, true},
                                 Int32s({0, 0, 0, 0, 0, 1, 2, 3, 4}));
  auto b = ListOf<int32_t>(list(list(int32())), {1, 3, 4}, {true, true}, inner_b);
  ExpectEqual(a, b);
  auto inner_c =
      ListOf<int32_t>(list(int32()), {0, 1, 3, 4}, {true, true, true}, Int32s({1, 2, 30, 4}));
  auto c = ListOf<int32_t>(list(list(int32())), {0, 2, 3}, {true, true}, inner_c);
  EXPECT_EQ(Diff(a, c), "slot 0.item[1].item[1]: expected 3, got 30");
}

TEST(CompareTest, ListViewsWithDifferentChildOrderAndSharing) {
  // [[1, 2], [3], null, [1, 2]]
  auto a = ListViewOf<int32_t>(list_view(int32()), {0, 2, 0, 0}, {2, 1, 0, 2},
                               {true, true, false, true}, Int32s({1, 2, 3}));
  // Reversed child order, separate copies, garbage behind the null.
  auto b = ListViewOf<int32_t>(list_view(int32()), {4, 3, 1, 0}, {2, 1, 5, 2},
                               {true, true, false, true}, Int32s({1, 2, 9, 3, 1, 2}));
  ExpectEqual(a, b);
  ExpectEqual(a->Slice(1, 2), b->Slice(1, 2));
  auto c = ListViewOf<int32_t>(list_view(int32()), {0, 2, 0, 1}, {2, 1, 0, 2},
                               {true, true, false, true}, Int32s({1, 2, 3}));
  EXPECT_EQ(Diff(a, c), "slot 3.item[0]: expected 1, got 2");
  auto la = ListViewOf<int64_t>(large_list_view(int32()), {1}, {1}, {true}, Int32s({0, 5}));
  auto lb = ListViewOf<int64_t>(large_list_view(int32()), {0}, {1}, {true}, Int32s({5}));
  ExpectEqual(la, lb);
  ExpectNotEqual(la,
                 ListViewOf<int64_t>(large_list_view(int32()), {0}, {2}, {true}, Int32s({5, 6})));
}

TEST(CompareTest, FixedSizeLists) {
  auto type = fixed_size_list(int32(), 2);
  auto a = Nested(type, {true, false, true}, {Int32s({1, 2, 0, 0, 3, 4})});
  auto b = Nested(type, {true, true, false, true}, {Int32s({7, 7, 1, 2, 9, 9, 3, 4})})->Slice(1);
  ExpectEqual(a, b);
  auto c = Nested(type, {true, false, true}, {Int32s({1, 2, 0, 0, 3, 5})});
  EXPECT_EQ(Diff(a, c), "slot 2.item[1]: expected 4, got 5");
  ExpectNotEqual(a, Nested(fixed_size_list(int32(), 3), {true}, {Int32s({1, 2, 3})})->Slice(0, 0));
}

// ---------------------------------------------------------------------------
// Structs and maps

TEST(CompareTest, Structs) {
  auto type = struct_({field("a", int32()), field("b", utf8())});
  auto a = Nested(type, {true, false, true}, {Int32s({1, 2, 3}), Strings({"x", "y", "z"})});
  // Struct sliced; children carry their own offsets too; null slot differs inside.
  auto b = Nested(type, {false, true, false, true},
                  {Int32s({0, 0, 1, 99, 3})->Slice(1), Strings({"_", "x", "q", "z"})})
               ->Slice(1);
  ExpectEqual(a, b);
  EXPECT_EQ(
      Diff(a, Nested(type, {true, true, true}, {Int32s({1, 2, 3}), Strings({"x", "y", "z"})})),
      "slot 1: expected null, got {a: 2, b: \"y\"}");
  auto c = Nested(type, {true, false, true}, {Int32s({1, 2, 3}), Strings({"x", "y", "w"})});
  EXPECT_EQ(Diff(a, c), "slot 2.b: expected \"z\", got \"w\"");
  auto d = Nested(type, {true, false, true}, {Int32s({1, 2, nullopt}), Strings({"x", "y", "z"})});
  EXPECT_EQ(Diff(a, d), "slot 2.a: expected 3, got null");
  ExpectNotEqual(a, Nested(struct_({field("a", int32()), field("c", utf8())}), {true, false, true},
                           {Int32s({1, 2, 3}), Strings({"x", "y", "z"})}));
}

TEST(CompareTest, DeeplyNestedPath) {
  // list<struct<a: list<int32>>>
  auto inner_type = list(int32());
  auto struct_type = struct_({field("a", inner_type)});
  auto make = [&](int32_t last) {
    auto ints = Int32s({1, 2, last});
    auto inner = ListOf<int32_t>(inner_type, {0, 1, 3}, {true, true}, ints);
    auto structs = Nested(struct_type, {true, true}, {inner});
    return ListOf<int32_t>(list(struct_type), {0, 2}, {true}, structs);
  };
  ExpectEqual(make(3), make(3));
  EXPECT_EQ(Diff(make(3), make(4)), "slot 0.item[1].a.item[1]: expected 3, got 4");
}

TEST(CompareTest, Maps) {
  auto type = map(utf8(), int32());
  const auto& entries_type = type->field(0)->type();
  auto entries_a = Nested(entries_type, {true, true, true},
                          {Strings({"k1", "k2", "k3"}), Int32s({1, nullopt, 3})});
  auto a = ListOf<int32_t>(type, {0, 2, 2, 3}, {true, false, true}, entries_a);
  // Entries sliced, a junk entry, and the null map slot covering one entry.
  auto entries_b =
      Nested(entries_type, {true, true, true, true, true, true},
             {Strings({"", "zz", "k1", "k2", "k0", "k3"}), Int32s({0, 0, 1, nullopt, 4, 3})})
          ->Slice(1);
  auto b = ListOf<int32_t>(type, {1, 3, 4, 5}, {true, false, true}, entries_b);
  ExpectEqual(a, b);
  auto entries_c = Nested(entries_type, {true, true, true},
                          {Strings({"k1", "kX", "k3"}), Int32s({1, nullopt, 3})});
  auto c = ListOf<int32_t>(type, {0, 2, 2, 3}, {true, false, true}, entries_c);
  EXPECT_EQ(Diff(a, c), "slot 0.entries[1].key: expected \"k2\", got \"kX\"");
  auto entries_d =
      Nested(entries_type, {true, true, true}, {Strings({"k1", "k2", "k3"}), Int32s({1, 5, 3})});
  auto d = ListOf<int32_t>(type, {0, 2, 2, 3}, {true, false, true}, entries_d);
  EXPECT_EQ(Diff(a, d), "slot 0.entries[1].value: expected null, got 5");
}

// ---------------------------------------------------------------------------
// Unions

TEST(CompareTest, SparseUnions) {
  auto type = sparse_union({field("i", int32()), field("s", utf8())}, {3, 7});
  auto a = SparseUnion(type, {3, 7, 3}, {Int32s({1, 0, nullopt}), Strings({"", "x", ""})});
  auto b = SparseUnion(type, {3, 7, 3}, {Int32s({1, 5, nullopt}), Strings({"q", "x", "r"})});
  ExpectEqual(a, b);
  auto big =
      SparseUnion(type, {7, 3, 7, 3}, {Int32s({0, 1, 0, nullopt}), Strings({"w", "", "x", ""})});
  ExpectEqual(a, big->Slice(1));
  auto c = SparseUnion(type, {3, 7, 3}, {Int32s({1, 0, nullopt}), Strings({"", "y", ""})});
  EXPECT_EQ(Diff(a, c), "slot 1.s: expected \"x\", got \"y\"");
  auto d = SparseUnion(type, {3, 3, 3}, {Int32s({1, 0, nullopt}), Strings({"", "x", ""})});
  EXPECT_EQ(Diff(a, d), "slot 1: expected \"x\" (type code 7), got 0 (type code 3)");
  // Null in either child is a null slot; codes must still match.
  auto e = SparseUnion(type, {3, 7, 7}, {Int32s({1, 0, nullopt}), Strings({"", "x", nullopt})});
  ExpectNotEqual(a, e);
}

TEST(CompareTest, DenseUnions) {
  auto type = dense_union({field("i", int32()), field("s", utf8())});
  auto a = DenseUnion(type, {0, 1, 0, 1}, {0, 0, 1, 1}, {Int32s({5, 6}), Strings({"a", "b"})});
  auto b = DenseUnion(type, {0, 1, 0, 1}, {3, 0, 1, 0}, {Int32s({0, 6, 0, 5}), Strings({"b"})});
  ExpectNotEqual(a, b);  // slot 1 of b selects "b"
  auto c =
      DenseUnion(type, {0, 1, 0, 1}, {3, 1, 1, 0}, {Int32s({0, 6, 0, 5}), Strings({"b", "a"})});
  ExpectEqual(a, c);
  ExpectEqual(a->Slice(2), c->Slice(2));
  EXPECT_EQ(Diff(a, b), "slot 1.s: expected \"a\", got \"b\"");
  auto d = DenseUnion(type, {0, 1, 0, 1}, {0, 0, 1, 1}, {Int32s({5, 7}), Strings({"a", "b"})});
  EXPECT_EQ(Diff(a, d), "slot 2.i: expected 6, got 7");
}

// ---------------------------------------------------------------------------
// Dictionaries, run-end encoding, extensions

TEST(CompareTest, DictionariesCompareDecodedValues) {
  auto a = Dict(Strings({"x", "y", "z"}), {0, 2, nullopt, 1});
  auto b = Dict(Strings({"z", "y", "x", "unused"}), {2, 0, nullopt, 1});
  ExpectEqual(a, b);
  ExpectEqual(a->Slice(1, 2), b->Slice(1, 2));
  // A valid index to a null dictionary value is null.
  auto c = Dict(Strings({"x", "y", "z", nullopt}), {0, 2, 3, 1});
  ExpectEqual(a, c);
  auto d = Dict(Strings({"x", "y", "w"}), {0, 2, nullopt, 1});
  EXPECT_EQ(Diff(a, d), "slot 1: expected \"z\", got \"w\"");
  auto e = Dict(Strings({"x", "y", "z"}), {0, 2, 0, 1});
  EXPECT_EQ(Diff(a, e), "slot 2: expected null, got \"x\"");
  ExpectNotEqual(a, Dict(Strings({"x", "y", "z"}), {0, 2, nullopt, 3}));  // out of range index
}

TEST(CompareTest, RunEndEncodedWithDifferentRuns) {
  // 1 1 1 2 2 null null
  auto a = Ree({3, 5, 7}, Int32s({1, 2, nullopt}));
  auto b = Ree({1, 3, 4, 5, 6, 7}, Int32s({1, 1, 2, 2, nullopt, nullopt}));
  ExpectEqual(a, b);
  ExpectEqual(a->Slice(2, 4), b->Slice(2, 4));
  ExpectEqual(a->Slice(2, 4), Ree({1, 3, 4}, Int32s({1, 2, nullopt})));
  auto c = Ree({3, 4, 7}, Int32s({1, 2, nullopt}));
  EXPECT_EQ(Diff(a, c), "slot 4: expected 2, got null");
  auto d = Ree({3, 5, 7}, Int32s({1, 3, nullopt}));
  EXPECT_EQ(Diff(a, d), "slot 3: expected 2, got 3");
}

TEST(CompareTest, Extensions) {
  auto uuid = extension("uuid", "", fixed_size_binary(2));
  auto other = extension("other", "", fixed_size_binary(2));
  using B2 = std::array<uint8_t, 2>;
  auto storage = Fixed<B2>(fixed_size_binary(2), {B2{1, 2}, nullopt, B2{3, 4}});
  auto a = Retype(storage, uuid);
  auto b = Retype(Fixed<B2>(fixed_size_binary(2), {B2{0, 0}, B2{1, 2}, nullopt, B2{3, 4}}), uuid)
               ->Slice(1);
  ExpectEqual(a, b);
  EXPECT_EQ(Diff(a, Retype(storage, other)).substr(0, 6), "type: ");
  auto c = Retype(Fixed<B2>(fixed_size_binary(2), {B2{1, 2}, nullopt, B2{3, 5}}), uuid);
  EXPECT_EQ(Diff(a, c), "slot 2: expected x'0304', got x'0305'");
}

TEST(CompareTest, FieldMetadataOnlyWithCheckMetadata) {
  auto md = std::make_shared<KeyValueMetadata>(
      std::vector<std::pair<std::string, std::string>>{{"k", "v"}});
  auto t1 = list(field("item", int32(), true, md));
  auto t2 = list(field("item", int32()));
  auto a = ListOf<int32_t>(t1, {0, 1}, {true}, Int32s({1}));
  auto b = ListOf<int32_t>(t2, {0, 1}, {true}, Int32s({1}));
  ExpectEqual(a, b);
  ExpectNotEqual(a, b, EqualOptions{.check_metadata = true});
}

// ---------------------------------------------------------------------------
// Record batches

TEST(CompareTest, RecordBatches) {
  auto s = schema({field("a", int32()), field("b", utf8())});
  ASSERT_OK_AND_ASSIGN(
      auto x,
      RecordBatch::Make(
          s, 4, std::vector<ArrayPtr>{Int32s({1, 2, 3, 4}), Strings({"p", "q", "r", "s"})}));
  ASSERT_OK_AND_ASSIGN(
      auto y, RecordBatch::Make(s, 4,
                                std::vector<ArrayPtr>{Int32s({0, 1, 2, 3, 4})->Slice(1),
                                                      Strings({"p", "q", "r", "s"}, "zz")}));
  EXPECT_OK(CheckRecordBatchEquals(*x, *y));
  EXPECT_TRUE(x->Equals(*y));
  ASSERT_OK_AND_ASSIGN(
      auto z,
      RecordBatch::Make(
          s, 4, std::vector<ArrayPtr>{Int32s({1, 2, 3, 4}), Strings({"p", "q", "r", nullopt})}));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "column 'b' (1): slot 3: expected \"s\", got null",
                             CheckRecordBatchEquals(*x, *z));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "num_rows: expected 4, got 2",
                             CheckRecordBatchEquals(*x, *x->Slice(1, 2)));
  auto s2 = schema({field("a", int32()), field("c", utf8())});
  ASSERT_OK_AND_ASSIGN(auto w, RecordBatch::Make(s2, 4, x->columns()));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "schema field 1: expected b: string, got c: string",
                             CheckRecordBatchEquals(*x, *w));
  auto md = std::make_shared<KeyValueMetadata>(
      std::vector<std::pair<std::string, std::string>>{{"k", "v"}});
  ASSERT_OK_AND_ASSIGN(auto m, RecordBatch::Make(s->WithMetadata(md), 4, x->columns()));
  EXPECT_OK(CheckRecordBatchEquals(*x, *m));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "schema metadata: expected none",
                             CheckRecordBatchEquals(*x, *m, EqualOptions{.check_metadata = true}));
}

}  // namespace
}  // namespace alkaid::format
