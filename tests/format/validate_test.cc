// Validate and ValidateFull against one kind of corruption per test, built
// from raw buffers (no builders), plus valid and sliced arrays that must pass.

#include "alkaid/format/validate.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "alkaid/format/array.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/type.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

// ---------------------------------------------------------------------------
// Raw-buffer helpers

/// A pool buffer (padded to 64 bytes of capacity) whose size() is exactly
/// the given bytes.
std::shared_ptr<Buffer> Bytes(const void* p, size_t n) {
  auto buffer = AllocateBuffer(static_cast<int64_t>(n)).ValueOrDie();
  if (n > 0) std::memcpy(buffer->mutable_data(), p, n);
  return buffer;
}

template <typename T>
std::shared_ptr<Buffer> Values(const std::vector<T>& v) {
  return Bytes(v.data(), v.size() * sizeof(T));
}

std::shared_ptr<Buffer> Text(const std::string& s) { return Bytes(s.data(), s.size()); }

/// Validity bitmap from per-slot flags (LSB numbering).
std::shared_ptr<Buffer> Bits(const std::vector<bool>& valid) {
  std::vector<uint8_t> bytes((valid.size() + 7) / 8, 0);
  for (size_t i = 0; i < valid.size(); ++i) {
    if (valid[i]) bytes[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
  }
  return Bytes(bytes.data(), bytes.size());
}

int64_t CountNulls(const std::vector<bool>& valid) {
  int64_t n = 0;
  for (bool v : valid) n += v ? 0 : 1;
  return n;
}

/// A primitive array of `type` over `values`; `valid` empty means no bitmap.
template <typename T>
ArrayDataPtr Primitive(TypePtr type, const std::vector<T>& values,
                       const std::vector<bool>& valid = {}) {
  return ArrayData::Make(std::move(type), static_cast<int64_t>(values.size()),
                         {valid.empty() ? nullptr : Bits(valid), Values(values)},
                         CountNulls(valid));
}

ArrayDataPtr Int32s(const std::vector<int32_t>& values, const std::vector<bool>& valid = {}) {
  return Primitive(int32(), values, valid);
}

ArrayDataPtr Int8s(const std::vector<int8_t>& values) { return Primitive(int8(), values); }

/// binary/string (OffsetT = int32_t) or large_* (int64_t) from raw offsets
/// and data, so that tests can corrupt them.
template <typename OffsetT = int32_t>
ArrayDataPtr RawBinary(TypePtr type, const std::vector<OffsetT>& offsets, const std::string& data,
                       const std::vector<bool>& valid = {}) {
  const auto length = static_cast<int64_t>(offsets.size()) - 1;
  return ArrayData::Make(std::move(type), length,
                         {valid.empty() ? nullptr : Bits(valid), Values(offsets), Text(data)},
                         CountNulls(valid));
}

/// A well-formed binary-like array of `values` (nullopt is null).
template <typename OffsetT = int32_t>
ArrayDataPtr Strings(TypePtr type, const std::vector<std::optional<std::string>>& values) {
  std::vector<OffsetT> offsets{0};
  std::vector<bool> valid;
  std::string data;
  bool any_null = false;
  for (const auto& v : values) {
    if (v) data += *v;
    offsets.push_back(static_cast<OffsetT>(data.size()));
    valid.push_back(v.has_value());
    any_null |= !v.has_value();
  }
  return RawBinary<OffsetT>(std::move(type), offsets, data, any_null ? valid : std::vector<bool>{});
}

/// One binary view.
struct View {
  int32_t size;
  uint8_t bytes[12];
};
static_assert(sizeof(View) == 16);

View Inline(const std::string& s) {
  View v{static_cast<int32_t>(s.size()), {}};
  std::memcpy(v.bytes, s.data(), s.size());
  return v;
}

View Ref(int32_t size, const std::string& prefix, int32_t buffer_index, int32_t offset) {
  View v{size, {}};
  std::memcpy(v.bytes, prefix.data(), 4);
  std::memcpy(v.bytes + 4, &buffer_index, 4);
  std::memcpy(v.bytes + 8, &offset, 4);
  return v;
}

ArrayDataPtr Views(TypePtr type, const std::vector<View>& views,
                   const std::vector<std::string>& data_buffers,
                   const std::vector<bool>& valid = {}) {
  std::vector<std::shared_ptr<Buffer>> buffers{valid.empty() ? nullptr : Bits(valid),
                                               Values(views)};
  for (const auto& d : data_buffers) buffers.push_back(Text(d));
  return ArrayData::Make(std::move(type), static_cast<int64_t>(views.size()), std::move(buffers),
                         CountNulls(valid));
}

ArrayDataPtr List(TypePtr type, const std::vector<int32_t>& offsets, ArrayDataPtr child,
                  const std::vector<bool>& valid = {}) {
  const auto length = static_cast<int64_t>(offsets.size()) - 1;
  return ArrayData::Make(std::move(type), length,
                         {valid.empty() ? nullptr : Bits(valid), Values(offsets)}, {child},
                         CountNulls(valid));
}

ArrayDataPtr ListView(const std::vector<int32_t>& offsets, const std::vector<int32_t>& sizes,
                      ArrayDataPtr child, const std::vector<bool>& valid = {}) {
  return ArrayData::Make(list_view(child->type), static_cast<int64_t>(offsets.size()),
                         {valid.empty() ? nullptr : Bits(valid), Values(offsets), Values(sizes)},
                         {child}, CountNulls(valid));
}

ArrayDataPtr Ree(TypePtr run_end_type, ArrayDataPtr run_ends, ArrayDataPtr values, int64_t length) {
  return ArrayData::Make(run_end_encoded(std::move(run_end_type), values->type), length, {},
                         {std::move(run_ends), values}, 0);
}

ArrayDataPtr Dict(ArrayDataPtr indices, ArrayDataPtr dictionary) {
  auto data = std::make_shared<ArrayData>(*indices);
  data->type = format::dictionary(indices->type, dictionary->type);
  data->dictionary = std::move(dictionary);
  return data;
}

// Both depths fail with `msg`.
#define EXPECT_BOTH_FAIL(msg, data)                                   \
  do {                                                                \
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, msg, Validate(*(data)));     \
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, msg, ValidateFull(*(data))); \
  } while (false)

// Only the full depth notices.
#define EXPECT_FULL_FAILS(msg, data)                                  \
  do {                                                                \
    ASSERT_OK(Validate(*(data)));                                     \
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, msg, ValidateFull(*(data))); \
  } while (false)

#define EXPECT_BOTH_PASS(data)        \
  do {                                \
    ASSERT_OK(Validate(*(data)));     \
    ASSERT_OK(ValidateFull(*(data))); \
  } while (false)

// ---------------------------------------------------------------------------
// Basics: type, length, offset, buffers, children, null count

TEST(Validate, TypeIsNull) {
  ArrayData data;
  data.type = nullptr;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "field 'array': type is null", Validate(data));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "type is null", ValidateFull(data));
}

TEST(Validate, NameAppearsInMessages) {
  auto data = Int32s({1, 2});
  data->length = -1;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "field 'col1': length -1 is negative",
                             Validate(*data, "col1"));
}

TEST(Validate, NegativeLengthAndOffset) {
  auto data = Int32s({1, 2, 3});
  data->length = -2;
  EXPECT_BOTH_FAIL("length -2 is negative", data);
  data = Int32s({1, 2, 3});
  data->offset = -1;
  EXPECT_BOTH_FAIL("offset -1 is negative", data);
}

TEST(Validate, OffsetPlusLengthOverflows) {
  auto data = Int32s({1, 2, 3});
  data->offset = std::numeric_limits<int64_t>::max();
  data->length = 1;
  data->null_count = 0;
  EXPECT_BOTH_FAIL("overflows", data);

  // Overflow of (offset + length) * width, not of offset + length.
  data = Int32s({1, 2, 3});
  data->offset = std::numeric_limits<int64_t>::max() / 2;
  data->length = 1;
  EXPECT_BOTH_FAIL("overflows at 4 bytes per value", data);

  // Offsets need offset + length + 1 entries.
  data = Strings(utf8(), {"a"});
  data->offset = std::numeric_limits<int64_t>::max() - 1;
  data->length = 1;
  EXPECT_BOTH_FAIL("overflows", data);
}

TEST(Validate, BufferTooSmall) {
  auto data = ArrayData::Make(int32(), 5, {nullptr, Values<int32_t>({1, 2, 3, 4})}, 0);
  EXPECT_BOTH_FAIL(
      "buffer 1 (values) is 16 bytes, too small for 4 bytes x (offset 0 + length 5) = 20 bytes",
      data);

  // Bitmaps are measured in bits.
  data = ArrayData::Make(int32(), 9, {Bits({true}), Values<int32_t>({1, 2, 3, 4, 5, 6, 7, 8, 9})},
                         kUnknownNullCount);
  EXPECT_BOTH_FAIL("buffer 0 (validity) is 1 bytes, too small", data);

  // Booleans are bit-packed: 9 values need 2 bytes.
  data = ArrayData::Make(boolean(), 9, {nullptr, Bytes("\xff", 1)}, 0);
  EXPECT_BOTH_FAIL("buffer 1 (values) is 1 bytes, too small", data);
  data = ArrayData::Make(boolean(), 8, {nullptr, Bytes("\xff", 1)}, 0);
  EXPECT_BOTH_PASS(data);

  // fixed_size_binary[3] x 2 needs 6 bytes.
  data = ArrayData::Make(fixed_size_binary(3), 2, {nullptr, Text("abcde")}, 0);
  EXPECT_BOTH_FAIL("too small for 3 bytes x (offset 0 + length 2) = 6 bytes", data);

  // Offsets: length + 1 entries.
  data = ArrayData::Make(utf8(), 4, {nullptr, Values<int32_t>({0, 1, 2, 3}), Text("abcd")}, 0);
  EXPECT_BOTH_FAIL(
      "buffer 1 (offsets) is 16 bytes, too small for 4 bytes x (offset 0 + length 4 + 1)", data);

  // Intervals and decimals have their own widths.
  data = ArrayData::Make(month_day_nano_interval(), 2,
                         {nullptr, Bytes(std::string(24, 0).data(), 24)}, 0);
  EXPECT_BOTH_FAIL("too small for 16 bytes", data);
  data = ArrayData::Make(decimal256(10, 2), 1, {nullptr, Bytes(std::string(16, 0).data(), 16)}, 0);
  EXPECT_BOTH_FAIL("too small for 32 bytes", data);
}

TEST(Validate, MissingBuffer) {
  auto data = ArrayData::Make(int32(), 3, {nullptr, nullptr}, 0);
  EXPECT_BOTH_FAIL("buffer 1 (values) is missing", data);
  data = ArrayData::Make(utf8(), 1, {nullptr, nullptr, Text("a")}, 0);
  EXPECT_BOTH_FAIL("buffer 1 (offsets) is missing", data);
  // Nothing is needed for an empty array.
  data = ArrayData::Make(int32(), 0, {nullptr, nullptr}, 0);
  EXPECT_BOTH_PASS(data);
  data = ArrayData::Make(utf8(), 0, {nullptr, nullptr, nullptr}, 0);
  EXPECT_BOTH_PASS(data);
}

TEST(Validate, WrongBufferCount) {
  auto data = Int32s({1, 2});
  data->buffers.push_back(nullptr);
  EXPECT_BOTH_FAIL("has 3 buffers, expected 2", data);
  data = Int32s({1, 2});
  data->buffers.pop_back();
  EXPECT_BOTH_FAIL("has 1 buffers, expected 2", data);

  // View types need at least the validity and views buffers.
  data = ArrayData::Make(utf8_view(), 0, {nullptr}, 0);
  EXPECT_BOTH_FAIL("has 1 buffers, expected at least 2", data);

  // Unions carry no validity bitmap.
  auto type = sparse_union({field("a", int32())});
  data = ArrayData::Make(type, 1, {Bits({true}), Values<int8_t>({0})}, {Int32s({7})}, 0);
  EXPECT_BOTH_FAIL("sparse_union arrays have no validity bitmap", data);

  // Run-end encoded arrays have no buffers at all.
  auto ree = Ree(int32(), Int32s({2}), Int32s({5}), 2);
  ree->buffers.push_back(nullptr);
  EXPECT_BOTH_FAIL("has 1 buffers, expected 0", ree);

  // Null arrays have no buffers: none or one empty slot.
  EXPECT_BOTH_PASS(ArrayData::Make(null(), 3, {}, 3));
  EXPECT_BOTH_PASS(ArrayData::Make(null(), 3, {nullptr}, 3));
  EXPECT_BOTH_FAIL("null arrays have no buffers", ArrayData::Make(null(), 3, {Bits({true})}, 3));
}

TEST(Validate, WrongChildCount) {
  auto type = struct_({field("a", int32()), field("b", int32())});
  auto data = ArrayData::Make(type, 2, {nullptr}, {Int32s({1, 2})}, 0);
  EXPECT_BOTH_FAIL("has 1 children, expected 2", data);

  data = Int32s({1});
  data->child_data.push_back(Int32s({1}));
  EXPECT_BOTH_FAIL("has 1 children, expected 0", data);

  data = ArrayData::Make(type, 2, {nullptr}, {Int32s({1, 2}), nullptr}, 0);
  EXPECT_BOTH_FAIL("child 1 ('b') is null", data);
}

TEST(Validate, ChildTypeMismatch) {
  auto type = struct_({field("a", int32()), field("b", utf8())});
  auto data = ArrayData::Make(type, 1, {nullptr}, {Int32s({1}), Int32s({2})}, 0);
  EXPECT_BOTH_FAIL("child 1 ('b') has type int32, expected string", data);
}

TEST(Validate, NullCount) {
  // Out of range.
  auto data = Int32s({1, 2, 3}, {true, false, true});
  data->null_count = 4;
  EXPECT_BOTH_FAIL("null_count 4 is outside [0, length 3]", data);
  data->null_count = -2;
  EXPECT_BOTH_FAIL("null_count -2 is outside", data);

  // Positive without a bitmap.
  data = Int32s({1, 2, 3});
  data->null_count = 1;
  EXPECT_BOTH_FAIL("null_count is 1 but there is no validity bitmap", data);

  // Disagreeing with the bitmap: only the full check counts bits.
  data = Int32s({1, 2, 3}, {true, false, true});
  data->null_count = 2;
  EXPECT_FULL_FAILS("null_count 2 does not match the validity bitmap, which has 1 nulls", data);
  data->null_count = kUnknownNullCount;
  EXPECT_BOTH_PASS(data);

  // The null type: null_count == length.
  EXPECT_BOTH_FAIL("must equal the length 3", ArrayData::Make(null(), 3, {nullptr}, 1));

  // Types without a validity bitmap: 0.
  auto type = sparse_union({field("a", int32())});
  data = ArrayData::Make(type, 1, {Values<int8_t>({0})}, {Int32s({7})}, 1);
  EXPECT_BOTH_FAIL("null_count 1 must be 0: sparse_union arrays have no validity bitmap", data);
  auto ree = Ree(int32(), Int32s({2}), Int32s({5}, {false}), 2);
  ree->null_count = 2;
  EXPECT_BOTH_FAIL("run_end_encoded arrays have no validity bitmap", ree);
}

TEST(Validate, NestingDepthIsBounded) {
  TypePtr type = int8();
  ArrayDataPtr data = Int8s({1});
  for (int i = 0; i < 70; ++i) {
    type = list(type);
    data = List(type, {0, 1}, data);
  }
  EXPECT_BOTH_FAIL("nests deeper than 64 levels", data);
}

// ---------------------------------------------------------------------------
// Type parameters

TEST(Validate, DecimalPrecisionOutOfRange) {
  auto type = std::make_shared<DecimalType>(32, 12, 0);
  auto data = ArrayData::Make(type, 1, {nullptr, Values<int32_t>({1})}, 0);
  EXPECT_BOTH_FAIL("decimal32 precision 12 is outside [1, 9]", data);
  type = std::make_shared<DecimalType>(256, 0, 0);
  data = ArrayData::Make(type, 0, {nullptr, nullptr}, 0);
  EXPECT_BOTH_FAIL("precision 0 is outside [1, 76]", data);
}

TEST(Validate, UnionTypeCodesOutOfRange) {
  auto type = std::make_shared<UnionType>(FieldVector{field("a", int32()), field("b", int32())},
                                          std::vector<int8_t>{-3, 1}, UnionMode::kSparse);
  auto data = ArrayData::Make(type, 1, {Values<int8_t>({1})}, {Int32s({1}), Int32s({2})}, 0);
  EXPECT_BOTH_FAIL("union type code -3 is outside [0, 127]", data);

  type = std::make_shared<UnionType>(FieldVector{field("a", int32()), field("b", int32())},
                                     std::vector<int8_t>{4, 4}, UnionMode::kSparse);
  data = ArrayData::Make(type, 1, {Values<int8_t>({4})}, {Int32s({1}), Int32s({2})}, 0);
  EXPECT_BOTH_FAIL("union type code 4 is declared twice", data);
}

TEST(Validate, MapTypeMustHaveNonNullableKeys) {
  auto entries = field("entries", struct_({field("key", utf8()), field("value", int32())}),
                       /*nullable=*/false);
  auto type = std::make_shared<MapType>(entries, false);
  auto keys = Strings(utf8(), {"a"});
  auto entries_data = ArrayData::Make(entries->type(), 1, {nullptr}, {keys, Int32s({1})}, 0);
  auto data = List(type, {0, 1}, entries_data);
  EXPECT_BOTH_FAIL("map key field must not be nullable", data);

  auto bad_entries = field("entries", struct_({field("key", utf8())}), false);
  type = std::make_shared<MapType>(bad_entries, false);
  data = List(type, {0, 0},
              ArrayData::Make(bad_entries->type(), 0, {nullptr}, {Strings(utf8(), {})}, 0));
  EXPECT_BOTH_FAIL("map entries must be a struct with two fields", data);
}

TEST(Validate, MapKeysMustNotBeNull) {
  auto type = map(utf8(), int32());
  const auto& entries_type = type->field(0)->type();
  auto keys = Strings(utf8(), {"a", std::nullopt});
  auto entries = ArrayData::Make(entries_type, 2, {nullptr}, {keys, Int32s({1, 2})}, 0);
  auto data = List(type, {0, 2}, entries);
  EXPECT_BOTH_FAIL("map keys must not be null", data);

  // An unknown null count is only counted by the full check.
  keys->null_count = kUnknownNullCount;
  EXPECT_FULL_FAILS(
      "field 'array': map keys must not be null, but child 'array.entries.key' has 1 nulls", data);

  keys = Strings(utf8(), {"a", "b"});
  entries = ArrayData::Make(entries_type, 2, {nullptr}, {keys, Int32s({1, 2}, {true, false})}, 0);
  EXPECT_BOTH_PASS(List(type, {0, 1, 2}, entries));
}

TEST(Validate, FixedSizeBinaryWidth) {
  auto type = std::make_shared<FixedSizeBinaryType>(-1);
  auto data = ArrayData::Make(type, 0, {nullptr, nullptr}, 0);
  EXPECT_BOTH_FAIL("fixed_size_binary byte width -1 is out of range", data);
}

// ---------------------------------------------------------------------------
// Variable-size binary and list offsets

TEST(Validate, NonMonotonicOffsets) {
  auto data = RawBinary(binary(), {0, 3, 2, 5}, "abcde");
  EXPECT_FULL_FAILS("slot 1: end offset 2 is less than its start offset 3", data);
  // Also under a null slot.
  data = RawBinary(binary(), {0, 3, 2, 5}, "abcde", {true, false, true});
  EXPECT_FULL_FAILS("slot 1: end offset 2 is less than its start offset 3", data);
  // Large offsets.
  data = RawBinary<int64_t>(large_binary(), {0, 3, 2, 5}, "abcde", {true, false, true});
  EXPECT_FULL_FAILS("slot 1: end offset 2 is less than its start offset 3", data);
  // The last offset below the first is visible structurally.
  data = RawBinary(binary(), {4, 5, 3}, "abcde");
  EXPECT_BOTH_FAIL("slot 1: end offset 3 is less than the first offset 4", data);
}

TEST(Validate, OffsetPastDataEnd) {
  // The last offset is checked structurally (O(1)).
  auto data = RawBinary(utf8(), {0, 3, 8, 12, 17}, std::string(12, 'x'));
  EXPECT_BOTH_FAIL(
      "field 'array': slot 3: end offset 17 is past the end of the 12-byte data buffer", data);
  // An inner one only by the full check, null slot or not.
  data = RawBinary(utf8(), {0, 17, 12}, std::string(12, 'x'), {false, true});
  EXPECT_FULL_FAILS("slot 0: end offset 17 is past the end of the 12-byte data buffer", data);
  // A missing data buffer counts as empty.
  data = RawBinary(binary(), {0, 1}, "x");
  data->buffers[2] = nullptr;
  EXPECT_BOTH_FAIL("past the end of the 0-byte data buffer", data);
  data = RawBinary(binary(), {0, 0}, "");
  data->buffers[2] = nullptr;
  EXPECT_BOTH_PASS(data);
}

TEST(Validate, FirstOffsetNegative) {
  auto data = RawBinary(binary(), {-1, 3}, "abc");
  EXPECT_BOTH_FAIL("slot 0: offset -1 is negative", data);
  data = RawBinary<int64_t>(large_utf8(), {-5, 3}, "abc");
  EXPECT_BOTH_FAIL("slot 0: offset -5 is negative", data);
  data = List(list(int8()), {-1, 2}, Int8s({1, 2}));
  EXPECT_BOTH_FAIL("slot 0: offset -1 is negative", data);
}

TEST(Validate, ListOffsets) {
  auto child = Int8s({1, 2, 3});
  EXPECT_BOTH_PASS(List(list(int8()), {0, 2, 2, 3}, child, {true, false, true}));
  EXPECT_BOTH_FAIL("slot 2: end offset 4 is past the end of the child array (length 3)",
                   List(list(int8()), {0, 2, 2, 4}, child));
  EXPECT_FULL_FAILS("slot 1: end offset 1 is less than its start offset 2",
                    List(list(int8()), {0, 2, 1, 3}, child, {true, false, true}));
  EXPECT_FULL_FAILS("slot 0: end offset 5 is past the end of the child array (length 3)",
                    List(list(int8()), {0, 5, 3}, child, {false, true}));

  auto large =
      ArrayData::Make(large_list(int8()), 2, {nullptr, Values<int64_t>({0, 3, 2})}, {child}, 0);
  EXPECT_FULL_FAILS("slot 1: end offset 2 is less than its start offset 3", large);
}

// ---------------------------------------------------------------------------
// List views

TEST(Validate, ListViewBounds) {
  auto child = Int8s({1, 2, 3, 4});
  EXPECT_BOTH_PASS(ListView({2, 0, 4}, {2, 4, 0}, child));
  EXPECT_FULL_FAILS("slot 1: offset 2 + size 3 is past the end of the child array (length 4)",
                    ListView({0, 2}, {1, 3}, child));
  // Under a null slot as well.
  EXPECT_FULL_FAILS("slot 1: offset 2 + size 3 is past the end of the child array (length 4)",
                    ListView({0, 2}, {1, 3}, child, {true, false}));
  EXPECT_FULL_FAILS("slot 0: offset -1 is negative", ListView({-1}, {1}, child));
  EXPECT_FULL_FAILS("slot 0: size -2 is negative", ListView({1}, {-2}, child));
  // offset + size overflowing int32 must not wrap around.
  EXPECT_FULL_FAILS("past the end of the child array",
                    ListView({std::numeric_limits<int32_t>::max()},
                             {std::numeric_limits<int32_t>::max()}, child));
  auto large = ArrayData::Make(large_list_view(int8()), 1,
                               {nullptr, Values<int64_t>({std::numeric_limits<int64_t>::max()}),
                                Values<int64_t>({std::numeric_limits<int64_t>::max()})},
                               {child}, 0);
  EXPECT_FULL_FAILS("past the end of the child array", large);
  // Sizes buffer too small.
  auto data = ListView({0, 1}, {1}, child);
  EXPECT_BOTH_FAIL("buffer 2 (sizes) is 4 bytes, too small", data);
}

// ---------------------------------------------------------------------------
// Binary views

TEST(Validate, BinaryViewValid) {
  const std::string long_value = "0123456789abcdefXYZ";
  auto data = Views(binary_view(),
                    {Inline("short"), Ref(19, "0123", 0, 0), Ref(16, "4567", 1, 0), Inline("")},
                    {long_value, "4567890123456789"});
  EXPECT_BOTH_PASS(data);
  EXPECT_EQ(BinaryViewArray(data).GetView(1), long_value);
}

TEST(Validate, BinaryViewBadBufferIndex) {
  auto data = Views(binary_view(), {Inline("a"), Ref(20, "abcd", 1, 0)}, {std::string(32, 'a')});
  EXPECT_FULL_FAILS("slot 1: view references data buffer 1, but the array has 1 data buffers",
                    data);
  data = Views(binary_view(), {Ref(20, "abcd", -1, 0)}, {std::string(32, 'a')});
  EXPECT_FULL_FAILS("view references data buffer -1", data);
}

TEST(Validate, BinaryViewBadOffset) {
  auto data = Views(binary_view(), {Ref(20, "abcd", 0, -4)}, {std::string(32, 'a')});
  EXPECT_FULL_FAILS("slot 0: view offset -4 is negative", data);
  data = Views(binary_view(), {Ref(20, "aaaa", 0, 20)}, {std::string(32, 'a')});
  EXPECT_FULL_FAILS("slot 0: view range [20, 40) is past the end of the 32-byte data buffer 0",
                    data);
  // offset + size must not wrap in 32 bits.
  data = Views(
      binary_view(),
      {Ref(std::numeric_limits<int32_t>::max(), "aaaa", 0, std::numeric_limits<int32_t>::max())},
      {std::string(32, 'a')});
  EXPECT_FULL_FAILS("is past the end of the 32-byte data buffer 0", data);
}

TEST(Validate, BinaryViewPrefixMismatch) {
  auto data = Views(binary_view(), {Ref(20, "abce", 0, 0)}, {"abcdefghijklmnopqrstuvwxyz"});
  EXPECT_FULL_FAILS("slot 0: view prefix does not match the first 4 bytes of the value", data);
}

TEST(Validate, BinaryViewNegativeSize) {
  auto data = Views(binary_view(), {Inline("ok"), View{-1, {}}}, {});
  EXPECT_FULL_FAILS("slot 1: view size -1 is negative", data);
}

TEST(Validate, BinaryViewInlinePadding) {
  View v = Inline("abc");
  v.bytes[7] = 'z';
  auto data = Views(binary_view(), {v}, {});
  EXPECT_FULL_FAILS("slot 0: inline view of 3 bytes is not zero-padded (byte 7", data);
}

TEST(Validate, BinaryViewNullSlotsAreNotRead) {
  // The spec leaves the views of null slots unspecified.
  auto data = Views(binary_view(), {Inline("a"), Ref(99, "zzzz", 7, -3)}, {}, {true, false});
  EXPECT_BOTH_PASS(data);
}

// ---------------------------------------------------------------------------
// UTF-8

struct Utf8Case {
  const char* name;
  std::string bytes;
  const char* reason;
};

const std::vector<Utf8Case>& InvalidUtf8Cases() {
  static const std::vector<Utf8Case> cases = {
      {"truncated 3-byte sequence", "ab\xE2\x82", "truncated sequence"},
      {"truncated 2-byte sequence at end", "\xC3", "truncated sequence"},
      {"missing continuation", "\xE2(\xA1", "truncated sequence"},
      {"overlong 2-byte", "\xC0\xAF", "overlong encoding"},
      {"overlong 3-byte", "\xE0\x80\xAF", "overlong encoding"},
      {"overlong 4-byte", "\xF0\x80\x80\xAF", "overlong encoding"},
      {"surrogate", "\xED\xA0\x80", "encoded surrogate"},
      {"above U+10FFFF", "\xF4\x90\x80\x80", "code point above U+10FFFF"},
      {"stray continuation", "a\x80", "unexpected continuation byte"},
      {"0xFF", "\xFF", "never appears in UTF-8"},
  };
  return cases;
}

TEST(Validate, Utf8ValidStringsPass) {
  const std::vector<std::optional<std::string>> values = {
      "",
      "plain ascii that is longer than sixteen bytes",
      "h\xC3\xA9llo",      // é
      "\xE2\x82\xAC",      // €
      "\xF0\x9D\x84\x9E",  // 𝄞
      "\xED\x9F\xBF",      // U+D7FF
      "\xEE\x80\x80",      // U+E000
      "\xF4\x8F\xBF\xBF",  // U+10FFFF
      std::nullopt};
  EXPECT_BOTH_PASS(Strings(utf8(), values));
  EXPECT_BOTH_PASS(Strings<int64_t>(large_utf8(), values));
}

TEST(Validate, InvalidUtf8InString) {
  for (const auto& c : InvalidUtf8Cases()) {
    SCOPED_TRACE(c.name);
    auto data = Strings(utf8(), {"fine", c.bytes});
    EXPECT_FULL_FAILS("slot 1: invalid UTF-8", data);
    EXPECT_FULL_FAILS(c.reason, data);
    // Binary accepts any bytes.
    EXPECT_BOTH_PASS(Strings(binary(), {"fine", c.bytes}));
  }
}

TEST(Validate, InvalidUtf8InLargeString) {
  for (const auto& c : InvalidUtf8Cases()) {
    SCOPED_TRACE(c.name);
    auto data = Strings<int64_t>(large_utf8(), {c.bytes});
    EXPECT_FULL_FAILS("slot 0: invalid UTF-8", data);
    EXPECT_FULL_FAILS(c.reason, data);
  }
}

TEST(Validate, InvalidUtf8InStringView) {
  for (const auto& c : InvalidUtf8Cases()) {
    SCOPED_TRACE(c.name);
    // Inline.
    EXPECT_FULL_FAILS(c.reason, Views(utf8_view(), {Inline(c.bytes)}, {}));
    // Out of line.
    const std::string long_value = "long enough to be out of line " + c.bytes;
    auto data = Views(utf8_view(),
                      {Inline("ok"), Ref(static_cast<int32_t>(long_value.size()), "long", 0, 0)},
                      {long_value});
    EXPECT_FULL_FAILS("slot 1: invalid UTF-8", data);
    EXPECT_FULL_FAILS(c.reason, data);
    EXPECT_BOTH_PASS(Views(
        binary_view(), {Ref(static_cast<int32_t>(long_value.size()), "long", 0, 0)}, {long_value}));
  }
}

TEST(Validate, Utf8ErrorPositionAfterAsciiRun) {
  // The word-at-a-time ASCII path must stop at the right byte.
  auto data = Strings(utf8(), {std::string(21, 'a') + "\xFF" + "bcd"});
  EXPECT_FULL_FAILS("invalid UTF-8 at byte 21 of the value", data);
}

/// Reference for the test below, written the other way round: decode the
/// code point from the bit patterns, then reject by range.
bool ReferenceIsUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto lead = static_cast<uint8_t>(s[i]);
    int trail;
    uint32_t cp;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      trail = 1;
      cp = lead & 0x1Fu;
    } else if ((lead & 0xF0) == 0xE0) {
      trail = 2;
      cp = lead & 0x0Fu;
    } else if ((lead & 0xF8) == 0xF0) {
      trail = 3;
      cp = lead & 0x07u;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(trail) >= s.size()) return false;
    for (int k = 1; k <= trail; ++k) {
      const auto c = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3Fu);
    }
    const uint32_t min_cp[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[trail] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;
    i += 1 + static_cast<size_t>(trail);
  }
  return true;
}

TEST(Validate, Utf8MatchesReferenceDecoder) {
  std::vector<std::string> candidates;
  for (int a = 0x7F; a < 256; ++a) {  // ASCII leads add nothing beyond 0x7F
    for (int b = 0; b < 256; ++b) {
      const char ca = static_cast<char>(a);
      const char cb = static_cast<char>(b);
      candidates.push_back({ca, cb});
      if (a >= 0xE0 && a <= 0xEF) {
        for (int c : {0x41, 0x80, 0xBF, 0xC0}) candidates.push_back({ca, cb, static_cast<char>(c)});
      }
      if (a >= 0xF0 && a <= 0xF7) {
        for (int d : {0x41, 0x80, 0xBF}) {
          candidates.push_back({ca, cb, '\x80', static_cast<char>(d)});
        }
        candidates.push_back({ca, cb, '\x80'});  // truncated
      }
    }
  }
  // One array holds every candidate, each behind an ASCII run so that the
  // word-at-a-time path hands over mid-string; one-slot slices check each.
  std::vector<std::optional<std::string>> values;
  for (const auto& c : candidates) values.push_back("0123456789" + c);
  const auto all = Strings(utf8(), values);
  int mismatches = 0;
  int valid = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const bool ok = ValidateFull(*all->Slice(static_cast<int64_t>(i), 1)).ok();
    valid += ok ? 1 : 0;
    if (ok != ReferenceIsUtf8(*values[i]) && ++mismatches <= 10) {
      ADD_FAILURE() << "bytes " << ::testing::PrintToString(candidates[i]) << ": validator says "
                    << ok;
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(valid, 1000);  // the reference is not trivially false
}

TEST(Validate, InvalidUtf8UnderNullIsIgnored) {
  auto data = RawBinary(utf8(), {0, 2, 4}, "ok\xC0\xAF", {true, false});
  EXPECT_BOTH_PASS(data);
}

// ---------------------------------------------------------------------------
// Unions

FieldVector TwoInts() { return {field("a", int32()), field("b", int32())}; }

TEST(Validate, UnionUndeclaredTypeCode) {
  auto type = sparse_union(TwoInts(), {3, 7});
  auto data = ArrayData::Make(type, 3, {Values<int8_t>({3, 7, 5})},
                              {Int32s({1, 2, 3}), Int32s({4, 5, 6})}, 0);
  EXPECT_FULL_FAILS("slot 2: type code 5 is not declared by the union (declared: 3, 7)", data);
  data->buffers[0] = Values<int8_t>({3, -1, 7});
  EXPECT_FULL_FAILS("slot 1: type code -1 is not declared", data);
  data->buffers[0] = Values<int8_t>({3, 7, 7});
  EXPECT_BOTH_PASS(data);
}

TEST(Validate, SparseUnionChildTooShort) {
  auto data = ArrayData::Make(sparse_union(TwoInts()), 3, {Values<int8_t>({0, 1, 0})},
                              {Int32s({1, 2, 3}), Int32s({4, 5})}, 0);
  EXPECT_BOTH_FAIL("child 'array.b' has length 2, too short for offset + length 3", data);
}

TEST(Validate, DenseUnionOffsets) {
  auto type = dense_union(TwoInts());
  auto make = [&type](std::vector<int32_t> offsets) {
    return ArrayData::Make(type, 3, {Values<int8_t>({0, 1, 0}), Values(offsets)},
                           {Int32s({1, 2}), Int32s({3})}, 0);
  };
  EXPECT_BOTH_PASS(make({0, 0, 1}));
  EXPECT_FULL_FAILS("slot 1: offset 1 is past the end of child 'array.b' (length 1)",
                    make({0, 1, 1}));
  EXPECT_FULL_FAILS("slot 2: offset -1 is negative", make({0, 0, -1}));
  auto data = make({0, 0, 1});
  data->buffers[1] = nullptr;
  EXPECT_BOTH_FAIL("buffer 1 (offsets) is missing", data);
  data->buffers[1] = Values<int32_t>({0, 0});
  EXPECT_BOTH_FAIL("buffer 1 (offsets) is 8 bytes, too small", data);
}

// ---------------------------------------------------------------------------
// Run-end encoding

TEST(Validate, RunEnds) {
  auto values = Primitive(float32(), std::vector<float>{1.0f, 2.0f, 3.0f});
  EXPECT_BOTH_PASS(Ree(int32(), Int32s({2, 5, 6}), values, 6));
  EXPECT_FULL_FAILS("field 'array.run_ends': slot 0: run end 0 is not positive",
                    Ree(int32(), Int32s({0, 5, 6}), values, 6));
  EXPECT_FULL_FAILS("slot 0: run end -2 is not positive",
                    Ree(int32(), Int32s({-2, 5, 6}), values, 6));
  EXPECT_FULL_FAILS("slot 1: run end 2 is not greater than the previous run end 2",
                    Ree(int32(), Int32s({2, 2, 6}), values, 6));
  auto four_values = Primitive(float32(), std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f});
  EXPECT_FULL_FAILS("slot 2: run end 4 is not greater than the previous run end 5",
                    Ree(int32(), Int32s({2, 5, 4, 6}), four_values, 4));
}

TEST(Validate, RunEndsOtherWidths) {
  auto values = Int32s({1, 2});
  auto re16 = Primitive(int16(), std::vector<int16_t>{3, 1});
  EXPECT_FULL_FAILS("run end 1 is not greater", Ree(int16(), re16, values, 1));
  auto re64 = Primitive(int64(), std::vector<int64_t>{3, 9});
  EXPECT_BOTH_PASS(Ree(int64(), re64, values, 9));
  EXPECT_BOTH_FAIL("last run end 9 is less than the parent's offset + length 10",
                   Ree(int64(), re64, values, 10));
}

TEST(Validate, NullRunEnd) {
  auto values = Int32s({1, 2, 3});
  auto run_ends = Int32s({2, 4, 6}, {true, false, true});
  EXPECT_BOTH_FAIL("field 'array.run_ends': run ends must not be null, but null_count is 1",
                   Ree(int32(), run_ends, values, 6));
  // With the count unknown, only the bitmap tells.
  run_ends->null_count = kUnknownNullCount;
  EXPECT_FULL_FAILS("slot 1: run end is null", Ree(int32(), run_ends, values, 6));
  // An all-ones bitmap is allowed.
  EXPECT_BOTH_PASS(Ree(int32(), Int32s({2, 4, 6}, {true, true, true}), values, 6));
}

TEST(Validate, RunEndsTooShortForLength) {
  auto values = Int32s({1, 2});
  EXPECT_BOTH_FAIL("slot 1: last run end 6 is less than the parent's offset + length 7",
                   Ree(int32(), Int32s({4, 6}), values, 7));
  // With an offset.
  auto data = Ree(int32(), Int32s({4, 6}), values, 5);
  data->offset = 2;
  EXPECT_BOTH_FAIL("less than the parent's offset + length 7", data);
  data->length = 4;
  EXPECT_BOTH_PASS(data);
  // No runs at all.
  EXPECT_BOTH_FAIL("run_ends is empty but the array has length 3",
                   Ree(int32(), Int32s({}), Int32s({}), 3));
  // Values shorter than run ends.
  EXPECT_BOTH_FAIL("values child has length 1, shorter than the 2 run ends",
                   Ree(int32(), Int32s({4, 6}), Int32s({1}), 6));
}

// ---------------------------------------------------------------------------
// Dictionaries

TEST(Validate, DictionaryIndexOutOfRange) {
  auto dict = Strings(utf8(), {"a", "b", "c"});
  EXPECT_BOTH_PASS(Dict(Int32s({0, 2, 1}), dict));
  EXPECT_FULL_FAILS("slot 1: dictionary index 3 is outside [0, 3)", Dict(Int32s({0, 3}), dict));
  EXPECT_FULL_FAILS("slot 0: dictionary index -1 is outside [0, 3)", Dict(Int32s({-1}), dict));
  EXPECT_FULL_FAILS("dictionary index -128 is outside",
                    Dict(Primitive(int8(), std::vector<int8_t>{-128}), dict));
  EXPECT_FULL_FAILS("dictionary index 18446744073709551615 is outside",
                    Dict(Primitive(uint64(), std::vector<uint64_t>{~uint64_t{0}}), dict));
  EXPECT_FULL_FAILS("dictionary index 255 is outside",
                    Dict(Primitive(uint8(), std::vector<uint8_t>{255}), dict));
  // Null slots may hold anything.
  EXPECT_BOTH_PASS(Dict(Int32s({0, 99}, {true, false}), dict));
}

TEST(Validate, MissingDictionary) {
  auto data = Dict(Int32s({0}), Strings(utf8(), {"a"}));
  data->dictionary = nullptr;
  EXPECT_BOTH_FAIL("dictionary array has no dictionary attached", data);
}

TEST(Validate, DictionaryOfWrongType) {
  auto data = Dict(Int32s({0}), Strings(utf8(), {"a"}));
  data->dictionary = Int32s({1});
  EXPECT_BOTH_FAIL("dictionary has type int32, expected the value type string", data);
}

TEST(Validate, DictionaryIsValidatedToo) {
  auto data = Dict(Int32s({0}), Strings(utf8(), {"\xC0\xAF"}));
  EXPECT_FULL_FAILS("field 'array.<dictionary>': slot 0: invalid UTF-8", data);
  data = Dict(Int32s({0}), RawBinary(utf8(), {0, 9}, "abc"));
  EXPECT_BOTH_FAIL("field 'array.<dictionary>': slot 0: end offset 9 is past the end", data);
}

// ---------------------------------------------------------------------------
// Decimals

/// The `width`-byte little-endian two's complement of the decimal integer
/// in `digits` (optionally with a leading '-').
std::vector<uint8_t> DecimalBytes(const std::string& digits, int width) {
  std::vector<uint8_t> out(static_cast<size_t>(width), 0);
  const bool negative = !digits.empty() && digits[0] == '-';
  for (size_t i = negative ? 1 : 0; i < digits.size(); ++i) {
    unsigned carry = static_cast<unsigned>(digits[i] - '0');
    for (auto& byte : out) {
      const unsigned v = byte * 10u + carry;
      byte = static_cast<uint8_t>(v & 0xFF);
      carry = v >> 8;
    }
  }
  if (negative) {
    unsigned carry = 1;
    for (auto& byte : out) {
      const unsigned v = static_cast<uint8_t>(~byte) + carry;
      byte = static_cast<uint8_t>(v & 0xFF);
      carry = v >> 8;
    }
  }
  return out;
}

ArrayDataPtr Decimals(TypePtr type, const std::vector<std::string>& values,
                      const std::vector<bool>& valid = {}) {
  const int width = static_cast<const DecimalType&>(*type).byte_width();
  std::vector<uint8_t> bytes;
  for (const auto& v : values) {
    auto b = DecimalBytes(v, width);
    bytes.insert(bytes.end(), b.begin(), b.end());
  }
  return ArrayData::Make(std::move(type), static_cast<int64_t>(values.size()),
                         {valid.empty() ? nullptr : Bits(valid), Bytes(bytes.data(), bytes.size())},
                         CountNulls(valid));
}

std::string Nines(int n) { return std::string(static_cast<size_t>(n), '9'); }
std::string PowerOfTen(int n) { return "1" + std::string(static_cast<size_t>(n), '0'); }

TEST(Validate, DecimalHelperEncodesTwosComplement) {
  EXPECT_EQ(DecimalBytes("-1", 4), (std::vector<uint8_t>{0xFF, 0xFF, 0xFF, 0xFF}));
  EXPECT_EQ(DecimalBytes("256", 4), (std::vector<uint8_t>{0, 1, 0, 0}));
  EXPECT_EQ(DecimalBytes("-256", 4), (std::vector<uint8_t>{0, 0xFF, 0xFF, 0xFF}));
}

TEST(Validate, Decimal32Precision) {
  auto type = decimal32(5, 2);
  EXPECT_BOTH_PASS(Decimals(type, {"0", "99999", "-99999"}));
  EXPECT_FULL_FAILS("slot 1: unscaled value 100000 has more digits than precision 5",
                    Decimals(type, {"1", "100000"}));
  EXPECT_FULL_FAILS("slot 0: unscaled value -100000 has more digits than precision 5",
                    Decimals(type, {"-100000"}));
  EXPECT_FULL_FAILS("unscaled value -2147483648 has more digits than precision 9",
                    Decimals(decimal32(9, 0), {"-2147483648"}));
  // Null slots are not checked.
  EXPECT_BOTH_PASS(Decimals(type, {"1", "100000"}, {true, false}));
}

TEST(Validate, Decimal64Precision) {
  auto type = decimal64(18, 0);
  EXPECT_BOTH_PASS(Decimals(type, {Nines(18), "-" + Nines(18)}));
  EXPECT_FULL_FAILS("unscaled value " + PowerOfTen(18) + " has more digits than precision 18",
                    Decimals(type, {PowerOfTen(18)}));
  EXPECT_FULL_FAILS("unscaled value -9223372036854775808 has more digits",
                    Decimals(type, {"-9223372036854775808"}));
  EXPECT_FULL_FAILS("has more digits than precision 10",
                    Decimals(decimal64(10, 3), {PowerOfTen(10)}));
}

TEST(Validate, Decimal128Precision) {
  auto type = decimal128(38, 10);
  EXPECT_BOTH_PASS(Decimals(type, {Nines(38), "-" + Nines(38), "0", "-1"}));
  EXPECT_FULL_FAILS(
      "slot 1: unscaled value " + PowerOfTen(38) + " has more digits than precision 38",
      Decimals(type, {"5", PowerOfTen(38)}));
  EXPECT_FULL_FAILS("unscaled value -" + PowerOfTen(38), Decimals(type, {"-" + PowerOfTen(38)}));
  // Precision 20 crosses the 64-bit word boundary.
  EXPECT_BOTH_PASS(Decimals(decimal128(20, 0), {Nines(20), "-" + Nines(20)}));
  EXPECT_FULL_FAILS("unscaled value -" + PowerOfTen(20) + " has more digits than precision 20",
                    Decimals(decimal128(20, 0), {"-" + PowerOfTen(20)}));
}

TEST(Validate, Decimal256Precision) {
  auto type = decimal256(76, 0);
  EXPECT_BOTH_PASS(Decimals(type, {Nines(76), "-" + Nines(76)}));
  EXPECT_FULL_FAILS("unscaled value " + PowerOfTen(76) + " has more digits than precision 76",
                    Decimals(type, {PowerOfTen(76)}));
  EXPECT_FULL_FAILS("unscaled value -" + PowerOfTen(76), Decimals(type, {"-" + PowerOfTen(76)}));
  // The most negative 256-bit value, -2^255.
  const std::string min256 =
      "-57896044618658097711785492504343953926634992332820282019728792003956564819968";
  EXPECT_FULL_FAILS("unscaled value " + min256, Decimals(type, {min256}));
  // A precision inside the upper words.
  EXPECT_BOTH_PASS(Decimals(decimal256(60, 5), {Nines(60), "-" + Nines(60)}));
  EXPECT_FULL_FAILS("has more digits than precision 60",
                    Decimals(decimal256(60, 5), {"1", "-" + PowerOfTen(60)}));
}

// ---------------------------------------------------------------------------
// Fixed-size lists and structs

TEST(Validate, FixedSizeListChildTooShort) {
  auto type = fixed_size_list(int8(), 3);
  auto data = ArrayData::Make(type, 2, {nullptr}, {Int8s({1, 2, 3, 4, 5})}, 0);
  EXPECT_BOTH_FAIL("child 'array.item' has length 5, too short: need 6", data);
  data = ArrayData::Make(type, 2, {nullptr}, {Int8s({1, 2, 3, 4, 5, 6})}, 0);
  EXPECT_BOTH_PASS(data);
  data->offset = 1;
  EXPECT_BOTH_FAIL("too short: need 9", data);
  data->length = 1;
  EXPECT_BOTH_PASS(data);
}

TEST(Validate, StructChildTooShort) {
  auto type = struct_({field("a", int32()), field("b", utf8())});
  auto data =
      ArrayData::Make(type, 3, {nullptr}, {Int32s({1, 2, 3}), Strings(utf8(), {"x", "y"})}, 0);
  EXPECT_BOTH_FAIL("field 'array': child 'array.b' has length 2, too short for offset + length 3",
                   data);
}

// ---------------------------------------------------------------------------
// Slices

TEST(Validate, SlicedArraysPass) {
  auto ints = Int32s({1, 2, 3, 4, 5}, {true, false, true, true, false});
  EXPECT_BOTH_PASS(ints->Slice(1, 3));
  EXPECT_BOTH_PASS(ints->Slice(5, 0));

  auto strings = Strings(utf8(), {"ab", std::nullopt, "\xE2\x82\xAC", "d"});
  EXPECT_BOTH_PASS(strings->Slice(1, 2));
  EXPECT_BOTH_PASS(strings->Slice(3, 1));

  auto lists = List(list(int8()), {0, 1, 3, 3, 4}, Int8s({1, 2, 3, 4}), {true, true, false, true});
  EXPECT_BOTH_PASS(lists->Slice(1, 3));

  auto views = ListView({2, 0, 1}, {2, 1, 3}, Int8s({1, 2, 3, 4}));
  EXPECT_BOTH_PASS(views->Slice(1, 2));

  auto type = struct_({field("a", int32())});
  auto st = ArrayData::Make(type, 5, {Bits({true, true, false, true, true})}, {ints}, 1);
  EXPECT_BOTH_PASS(st->Slice(2, 3));

  auto un = ArrayData::Make(dense_union(TwoInts()), 3,
                            {Values<int8_t>({0, 1, 0}), Values<int32_t>({0, 0, 1})},
                            {Int32s({1, 2}), Int32s({3})}, 0);
  EXPECT_BOTH_PASS(un->Slice(1, 2));

  auto ree = Ree(int32(), Int32s({2, 5, 6}), Int32s({7, 8, 9}), 6);
  EXPECT_BOTH_PASS(ree->Slice(3, 3));

  auto dict = Dict(Int32s({0, 1, 2, 1}), Strings(utf8(), {"a", "b", "c"}));
  EXPECT_BOTH_PASS(dict->Slice(1, 3));

  auto bv =
      Views(utf8_view(), {Inline("a"), Ref(13, "0123", 0, 0), Inline("c")}, {"0123456789abc"});
  EXPECT_BOTH_PASS(bv->Slice(1, 2));
}

TEST(Validate, SlicesOnlyCheckTheirRange) {
  // Slot 0 is corrupt (its end offset is below its start); a slice without
  // it is fine, and errors inside a slice name slots relative to it.
  auto data = RawBinary(binary(), {3, 1, 2, 4}, "abcd");
  EXPECT_FULL_FAILS("slot 0: end offset 1 is less than its start offset 3", data);
  EXPECT_BOTH_PASS(data->Slice(1, 2));

  auto list_data = List(list(int8()), {0, 1, 2, 9}, Int8s({1, 2, 3}));
  EXPECT_BOTH_PASS(list_data->Slice(0, 2));
  EXPECT_BOTH_FAIL("slot 1: end offset 9 is past the end of the child array (length 3)",
                   list_data->Slice(1, 2));

  auto strings = Strings(utf8(), {"ok", "fine", "\xFF", "end"});
  EXPECT_FULL_FAILS("slot 1: invalid UTF-8", strings->Slice(1, 2));
  EXPECT_BOTH_PASS(strings->Slice(3, 1));
}

TEST(Validate, SliceBeyondBuffers) {
  auto data = Int32s({1, 2, 3, 4, 5});
  data->offset = 3;
  data->length = 3;
  EXPECT_BOTH_FAIL(
      "buffer 1 (values) is 20 bytes, too small for 4 bytes x (offset 3 + length 3) = 24 bytes",
      data);
  auto bits =
      Int32s({1, 2, 3, 4, 5, 6, 7, 8, 9}, {true, true, true, true, true, true, true, true, true});
  bits->offset = 7;
  bits->length = 2;
  bits->null_count = kUnknownNullCount;
  EXPECT_BOTH_PASS(bits);
  bits->buffers[0] = Bits({true});
  EXPECT_BOTH_FAIL("buffer 0 (validity) is 1 bytes, too small for (offset 7 + length 2) bits",
                   bits);
  // Struct children must cover the parent's offset too.
  auto type = struct_({field("a", int32())});
  auto st = ArrayData::Make(type, 2, {nullptr}, {Int32s({1, 2, 3})}, 0);
  st->offset = 2;
  EXPECT_BOTH_FAIL("child 'array.a' has length 3, too short for offset + length 4", st);
}

// ---------------------------------------------------------------------------
// Nested paths

TEST(Validate, NestedPathsInMessages) {
  auto child = ArrayData::Make(int32(), 3, {nullptr, Values<int32_t>({1, 2})}, 0);
  auto data = List(list(int32()), {0, 3}, child);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "field 'a.item': buffer 1 (values) is 8 bytes, too small",
                             Validate(*data, "a"));

  auto inner = struct_({field("x", int32()), field("b", list(utf8()))});
  auto strings = Strings(utf8(), {"ok", "\xC0\xAF"});
  auto b = List(list(utf8()), {0, 2}, strings);
  auto st = ArrayData::Make(inner, 1, {nullptr}, {Int32s({1}), b}, 0);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "field 'col1.b.item': slot 1: invalid UTF-8",
                             ValidateFull(*st, "col1"));
  ASSERT_OK(Validate(*st, "col1"));

  auto ext = extension("my.json", "", utf8());
  auto e = Strings(utf8(), {"\xFF"});
  e->type = ext;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "field 'j': slot 0: invalid UTF-8", ValidateFull(*e, "j"));
  EXPECT_OK(Validate(*e, "j"));
}

TEST(Validate, ArrayOverload) {
  auto a = MakeArray(Strings(utf8(), {"a", "\xFF"}));
  EXPECT_OK(Validate(*a));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "field 's': slot 1: invalid UTF-8", ValidateFull(*a, "s"));
}

// ---------------------------------------------------------------------------
// Record batches

TEST(Validate, RecordBatchNamesColumns) {
  auto s = schema({field("a", int32()), field("b", utf8())});
  auto good = Strings(utf8(), {"x", "y"});
  ASSERT_OK_AND_ASSIGN(auto batch, RecordBatch::Make(s, 2, {Int32s({1, 2}), good}));
  EXPECT_OK(Validate(*batch));
  EXPECT_OK(ValidateFull(*batch));

  auto bad = Strings(utf8(), {"x", "\xC3"});
  ASSERT_OK_AND_ASSIGN(batch, RecordBatch::Make(s, 2, {Int32s({1, 2}), bad}));
  EXPECT_OK(Validate(*batch));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "field 'b': slot 1: invalid UTF-8 at byte 0 of the value (truncated sequence)",
      ValidateFull(*batch));
}

// ---------------------------------------------------------------------------
// Random corruption: whatever the bytes, validation returns a Status, and
// whatever ValidateFull accepts can be read with the unchecked accessors.
// (Run under the asan preset to catch out-of-bounds reads.)

ArrayDataPtr DeepCopy(const ArrayData& data) {
  auto out = std::make_shared<ArrayData>(data);
  for (auto& b : out->buffers) {
    if (b != nullptr) b = Bytes(b->data(), static_cast<size_t>(b->size()));
  }
  for (auto& c : out->child_data) c = DeepCopy(*c);
  if (out->dictionary != nullptr) out->dictionary = DeepCopy(*out->dictionary);
  return out;
}

void CollectNodes(const ArrayDataPtr& data, std::vector<ArrayData*>* out) {
  out->push_back(data.get());
  for (const auto& c : data->child_data) CollectNodes(c, out);
  if (data->dictionary != nullptr) CollectNodes(data->dictionary, out);
}

/// Reads every value of a validated array through array.h; returns a
/// checksum so that the reads cannot be optimised away.
int64_t TouchAll(const Array& a) {
  int64_t sum = 0;
  const ArrayData& d = *a.data();
  for (int64_t i = 0; i < a.length(); ++i) sum += a.IsNull(i) ? 1 : 0;
  switch (StorageType(*a.type()).id()) {
    case TypeId::kString:
    case TypeId::kBinary: {
      const auto& b = static_cast<const BinaryArray&>(a);
      for (int64_t i = 0; i < a.length(); ++i) {
        const auto v = b.GetView(i);  // null slots too: offsets are checked everywhere
        for (char ch : v) sum += ch;
      }
      break;
    }
    case TypeId::kStringView:
    case TypeId::kBinaryView: {
      const auto& b = static_cast<const BinaryViewArray&>(a);
      for (int64_t i = 0; i < a.length(); ++i) {
        if (!d.IsValid(i)) continue;
        for (char ch : b.GetView(i)) sum += ch;
      }
      break;
    }
    case TypeId::kList: {
      const auto& l = static_cast<const ListArray&>(a);
      for (int64_t i = 0; i < a.length(); ++i) sum += TouchAll(*l.value_slice(i));
      break;
    }
    case TypeId::kListView: {
      const auto& l = static_cast<const ListViewArray&>(a);
      for (int64_t i = 0; i < a.length(); ++i) sum += TouchAll(*l.value_slice(i));
      break;
    }
    case TypeId::kStruct: {
      const auto& st = static_cast<const StructArray&>(a);
      for (int f = 0; f < st.num_fields(); ++f) sum += TouchAll(*st.GetFlattenedField(f));
      break;
    }
    case TypeId::kDenseUnion:
    case TypeId::kSparseUnion: {
      const auto& u = static_cast<const UnionArray&>(a);
      for (int64_t i = 0; i < a.length(); ++i) {
        sum += TouchAll(*u.field(u.child_id(i))->Slice(u.value_offset(i), 1));
      }
      break;
    }
    case TypeId::kRunEndEncoded: {
      const auto& r = static_cast<const RunEndEncodedArray&>(a);
      for (int64_t i = 0; i < a.length(); ++i) {
        sum += TouchAll(*r.values()->Slice(r.FindPhysicalIndex(i), 1));
      }
      break;
    }
    case TypeId::kDictionary: {
      const auto& dict = static_cast<const DictionaryArray&>(a);
      for (int64_t i = 0; i < a.length(); ++i) {
        if (d.IsValid(i)) sum += TouchAll(*dict.dictionary()->Slice(dict.GetIndex(i), 1));
      }
      break;
    }
    case TypeId::kInt32: {
      const auto& n = static_cast<const Int32Array&>(a);
      for (int64_t i = 0; i < a.length(); ++i) sum += n.Value(i);
      break;
    }
    case TypeId::kInt8: {
      const auto& n = static_cast<const Int8Array&>(a);
      for (int64_t i = 0; i < a.length(); ++i) sum += n.Value(i);
      break;
    }
    default:
      break;
  }
  return sum;
}

std::vector<ArrayDataPtr> CorruptionSeeds() {
  auto strings = Strings(utf8(), {"alpha", std::nullopt, "\xE2\x82\xAC uro", "", "omega"});
  auto lists = List(list(int8()), {0, 2, 2, 5}, Int8s({1, 2, 3, 4, 5}), {true, false, true});
  auto views = ListView({3, 0, 1}, {2, 1, 4}, Int8s({1, 2, 3, 4, 5}), {true, true, false});
  auto bv = Views(utf8_view(),
                  {Inline("short"), Ref(20, "0123", 0, 0), Inline(""), Ref(14, "abcd", 1, 2)},
                  {"0123456789abcdefghij", "xxabcdefghijklmnop"}, {true, true, false, true});
  auto dense = ArrayData::Make(dense_union({field("s", utf8()), field("i", int32())}), 4,
                               {Values<int8_t>({0, 1, 0, 1}), Values<int32_t>({0, 0, 1, 1})},
                               {Strings(utf8(), {"a", "bc"}), Int32s({7, 8})}, 0);
  auto ree = Ree(int32(), Int32s({2, 3, 6}), Strings(utf8(), {"x", std::nullopt, "zz"}), 6);
  auto dict =
      Dict(Int32s({2, 0, 1, 0}, {true, true, false, true}), Strings(utf8(), {"a", "b", "c"}));
  auto st = ArrayData::Make(struct_({field("l", list(int8())), field("s", utf8())}), 3, {nullptr},
                            {lists, Strings(utf8(), {"p", "q", "r"})}, 0);
  return {strings, lists, views, bv, dense, ree, dict, st};
}

TEST(Validate, RandomCorruptionIsCaughtOrHarmless) {
  std::mt19937_64 rng(20240611);
  int accepted = 0;
  int rejected = 0;
  for (const auto& seed : CorruptionSeeds()) {
    SCOPED_TRACE(seed->type->ToString());
    ASSERT_OK(ValidateFull(*seed));
    for (int iteration = 0; iteration < 400; ++iteration) {
      auto copy = DeepCopy(*seed);
      std::vector<ArrayData*> nodes;
      CollectNodes(copy, &nodes);
      // Flip a few bytes anywhere in the tree.
      for (int flips = 0; flips < 1 + static_cast<int>(rng() % 3); ++flips) {
        ArrayData* node = nodes[rng() % nodes.size()];
        std::vector<Buffer*> candidates;
        for (const auto& b : node->buffers) {
          if (b != nullptr && b->size() > 0) candidates.push_back(b.get());
        }
        if (candidates.empty()) continue;
        auto* b = static_cast<ResizableBuffer*>(candidates[rng() % candidates.size()]);
        const auto at = static_cast<int64_t>(rng() % static_cast<uint64_t>(b->size()));
        b->mutable_data()[at] ^= static_cast<uint8_t>(1 + rng() % 255);
      }
      // Sometimes also shift a length or offset, as a bad slice would.
      if (rng() % 4 == 0) {
        ArrayData* node = nodes[rng() % nodes.size()];
        const int64_t delta = static_cast<int64_t>(rng() % 5) - 2;
        (rng() % 2 == 0 ? node->length : node->offset) += delta;
        node->null_count = kUnknownNullCount;
      }
      const Status structural = Validate(*copy);
      const Status full = ValidateFull(*copy);
      if (!structural.ok()) {
        // Whatever the structural check rejects, the full check rejects too.
        EXPECT_FALSE(full.ok());
      }
      if (full.ok()) {
        ++accepted;
        TouchAll(*MakeArray(copy));
      } else {
        ++rejected;
        EXPECT_TRUE(full.IsInvalid()) << full.ToString();
        EXPECT_NE(full.message().find("field '"), std::string::npos) << full.message();
      }
    }
  }
  // Both outcomes occur, or the test exercises nothing.
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 100);
}

// ---------------------------------------------------------------------------
// Every type, valid and empty

TEST(Validate, EmptyArraysOfEveryLayoutPass) {
  std::vector<ArrayDataPtr> arrays = {
      ArrayData::Make(null(), 0, {nullptr}, 0),
      ArrayData::Make(boolean(), 0, {nullptr, nullptr}, 0),
      ArrayData::Make(float64(), 0, {nullptr, nullptr}, 0),
      ArrayData::Make(timestamp(TimeUnit::kNano, "UTC"), 0, {nullptr, nullptr}, 0),
      ArrayData::Make(decimal128(10, 2), 0, {nullptr, nullptr}, 0),
      ArrayData::Make(utf8(), 0, {nullptr, nullptr, nullptr}, 0),
      ArrayData::Make(large_binary(), 0, {nullptr, Values<int64_t>({0}), nullptr}, 0),
      ArrayData::Make(binary_view(), 0, {nullptr, nullptr}, 0),
      ArrayData::Make(list(int8()), 0, {nullptr, nullptr}, {Int8s({})}, 0),
      ArrayData::Make(list_view(int8()), 0, {nullptr, nullptr, nullptr}, {Int8s({})}, 0),
      ArrayData::Make(fixed_size_list(int8(), 2), 0, {nullptr}, {Int8s({})}, 0),
      ArrayData::Make(struct_({}), 0, {nullptr}, 0),
      ArrayData::Make(sparse_union(TwoInts()), 0, {nullptr}, {Int32s({}), Int32s({})}, 0),
      ArrayData::Make(dense_union(TwoInts()), 0, {nullptr, nullptr}, {Int32s({}), Int32s({})}, 0),
      Ree(int16(), Primitive(int16(), std::vector<int16_t>{}), Int32s({}), 0),
      Dict(Int32s({}), Strings(utf8(), {})),
  };
  for (const auto& a : arrays) {
    SCOPED_TRACE(a->type->ToString());
    EXPECT_BOTH_PASS(a);
  }
}

}  // namespace
}  // namespace alkaid::format
