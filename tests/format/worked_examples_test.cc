// The worked examples ("示例布局") of the columnar format specification,
// rebuilt byte for byte from the buffers the spec shows: each buffer is a
// 64-byte allocation holding exactly the listed bytes. Slots the spec marks
// "unspecified" are filled with garbage on purpose, since readers must not
// depend on them. Each test checks that the typed accessors of array.h give
// the logical values and that ValidateFull accepts the layout.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "alkaid/format/array.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/type.h"
#include "alkaid/format/validate.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

constexpr int64_t kPadded = 64;

/// A 64-byte (or larger multiple of 64) buffer whose first bytes are `bytes`
/// and whose padding is zero.
std::shared_ptr<Buffer> Padded(const std::vector<uint8_t>& bytes) {
  const auto n = static_cast<int64_t>(bytes.size());
  const int64_t size = n <= kPadded ? kPadded : (n + kPadded - 1) / kPadded * kPadded;
  auto buffer = AllocateBuffer(size).ValueOrDie();
  if (!bytes.empty()) std::memcpy(buffer->mutable_data(), bytes.data(), bytes.size());
  return buffer;
}

/// The little-endian bytes of `values`.
template <typename T>
std::vector<uint8_t> LE(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <typename T>
std::shared_ptr<Buffer> PaddedValues(const std::vector<T>& values) {
  return Padded(LE(values));
}

std::shared_ptr<Buffer> PaddedText(const std::string& text) {
  return Padded(std::vector<uint8_t>(text.begin(), text.end()));
}

/// A one-byte validity bitmap written as the spec prints it, most
/// significant bit first ("00011101": slots 0, 2, 3 and 4 valid).
std::shared_ptr<Buffer> Bitmap(const std::string& bits) {
  EXPECT_EQ(bits.size(), 8u);
  return Padded({static_cast<uint8_t>(std::stoi(bits, nullptr, 2))});
}

// Stands in for bytes the spec calls "unspecified".
constexpr int32_t kJunk32 = static_cast<int32_t>(0xDEADBEEF);
constexpr uint8_t kJunk8 = 0xA5;

void ExpectValid(const ArrayDataPtr& data) {
  EXPECT_OK(Validate(*data));
  EXPECT_OK(ValidateFull(*data));
}

// ---------------------------------------------------------------------------
// Primitive layout

TEST(WorkedExamples, Int32WithNulls) {
  // [1, null, 2, 4, 8]
  auto data = ArrayData::Make(int32(), 5,
                              {Bitmap("00011101"), PaddedValues<int32_t>({1, kJunk32, 2, 4, 8})},
                              /*null_count=*/1);
  EXPECT_EQ(data->buffers[0]->size(), 64);
  EXPECT_EQ(data->buffers[0]->data()[0], 0x1D);
  ExpectValid(data);

  Int32Array a(data);
  EXPECT_EQ(a.null_count(), 1);
  EXPECT_TRUE(a.IsValid(0));
  EXPECT_TRUE(a.IsNull(1));
  const int32_t expected[] = {1, 0, 2, 4, 8};
  for (int64_t i : {0, 2, 3, 4}) EXPECT_EQ(a.Value(i), expected[i]) << i;
}

TEST(WorkedExamples, NonNullInt32WithBitmap) {
  auto data =
      ArrayData::Make(int32(), 5, {Bitmap("00011111"), PaddedValues<int32_t>({1, 2, 3, 4, 8})},
                      /*null_count=*/0);
  ExpectValid(data);
  Int32Array a(data);
  EXPECT_EQ(a.null_count(), 0);
  const int32_t expected[] = {1, 2, 3, 4, 8};
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(a.IsValid(i));
    EXPECT_EQ(a.Value(i), expected[i]);
  }
}

TEST(WorkedExamples, NonNullInt32WithoutBitmap) {
  auto data = ArrayData::Make(int32(), 5, {nullptr, PaddedValues<int32_t>({1, 2, 3, 4, 8})},
                              /*null_count=*/0);
  ExpectValid(data);
  Int32Array a(data);
  EXPECT_EQ(a.null_count(), 0);
  const int32_t expected[] = {1, 2, 3, 4, 8};
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(a.IsValid(i));
    EXPECT_EQ(a.Value(i), expected[i]);
  }
}

// ---------------------------------------------------------------------------
// Variable-size binary

TEST(WorkedExamples, VarBinary) {
  // ['joe', null, null, 'mark']
  for (const TypePtr& type : {binary(), utf8()}) {
    auto data = ArrayData::Make(
        type, 4,
        {Bitmap("00001001"), PaddedValues<int32_t>({0, 3, 3, 3, 7}), PaddedText("joemark")},
        /*null_count=*/2);
    ExpectValid(data);
    BinaryArray a(data);
    EXPECT_EQ(a.null_count(), 2);
    EXPECT_EQ(a.GetView(0), "joe");
    EXPECT_TRUE(a.IsNull(1));
    EXPECT_TRUE(a.IsNull(2));
    EXPECT_EQ(a.value_length(1), 0);
    EXPECT_EQ(a.GetView(3), "mark");
  }
}

// ---------------------------------------------------------------------------
// Lists

ArrayDataPtr Int8Child(const std::vector<int8_t>& values) {
  return ArrayData::Make(int8(), static_cast<int64_t>(values.size()),
                         {nullptr, PaddedValues(values)}, /*null_count=*/0);
}

std::vector<int8_t> Int8Values(const ArrayPtr& slice) {
  const auto& a = static_cast<const Int8Array&>(*slice);
  std::vector<int8_t> out;
  for (int64_t i = 0; i < a.length(); ++i) out.push_back(a.Value(i));
  return out;
}

TEST(WorkedExamples, ListOfInt8) {
  // [[12, -7, 25], null, [0, -127, 127, 50], []]
  auto data =
      ArrayData::Make(list(int8()), 4, {Bitmap("00001101"), PaddedValues<int32_t>({0, 3, 3, 7, 7})},
                      {Int8Child({12, -7, 25, 0, -127, 127, 50})}, /*null_count=*/1);
  ExpectValid(data);
  ListArray a(data);
  EXPECT_EQ(Int8Values(a.value_slice(0)), (std::vector<int8_t>{12, -7, 25}));
  EXPECT_TRUE(a.IsNull(1));
  EXPECT_EQ(Int8Values(a.value_slice(2)), (std::vector<int8_t>{0, -127, 127, 50}));
  EXPECT_TRUE(a.IsValid(3));
  EXPECT_EQ(a.value_length(3), 0);
}

TEST(WorkedExamples, ListOfListOfInt8) {
  // [[[1, 2], [3, 4]], [[5, 6, 7], null, [8]], [[9, 10]]]
  auto values = Int8Child({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  auto inner = ArrayData::Make(list(int8()), 6,
                               {Bitmap("00110111"), PaddedValues<int32_t>({0, 2, 4, 7, 7, 8, 10})},
                               {values}, /*null_count=*/1);
  auto outer = ArrayData::Make(list(list(int8())), 3,
                               {nullptr, PaddedValues<int32_t>({0, 2, 5, 6})}, {inner},
                               /*null_count=*/0);
  ExpectValid(outer);

  ListArray a(outer);
  EXPECT_EQ(a.null_count(), 0);
  EXPECT_EQ(a.value_length(0), 2);
  EXPECT_EQ(a.value_length(1), 3);
  EXPECT_EQ(a.value_length(2), 1);
  const ListArray lists(inner);
  EXPECT_EQ(Int8Values(lists.value_slice(0)), (std::vector<int8_t>{1, 2}));
  EXPECT_EQ(Int8Values(lists.value_slice(1)), (std::vector<int8_t>{3, 4}));
  EXPECT_EQ(Int8Values(lists.value_slice(2)), (std::vector<int8_t>{5, 6, 7}));
  EXPECT_TRUE(lists.IsNull(3));
  EXPECT_EQ(Int8Values(lists.value_slice(4)), (std::vector<int8_t>{8}));
  EXPECT_EQ(Int8Values(lists.value_slice(5)), (std::vector<int8_t>{9, 10}));
  // The second outer slot covers inner slots [2, 5).
  EXPECT_EQ(a.value_offset(1), 2);
  const auto second = std::static_pointer_cast<ListArray>(a.value_slice(1));
  EXPECT_TRUE(second->IsNull(1));
  EXPECT_EQ(Int8Values(second->value_slice(2)), (std::vector<int8_t>{8}));
}

TEST(WorkedExamples, ListViewOfInt8) {
  // [[12, -7, 25], null, [0, -127, 127, 50], []]
  auto data = ArrayData::Make(list_view(int8()), 4,
                              {Bitmap("00001101"), PaddedValues<int32_t>({0, 7, 3, 0}),
                               PaddedValues<int32_t>({3, 0, 4, 0})},
                              {Int8Child({12, -7, 25, 0, -127, 127, 50})}, /*null_count=*/1);
  ExpectValid(data);
  ListViewArray a(data);
  EXPECT_EQ(Int8Values(a.value_slice(0)), (std::vector<int8_t>{12, -7, 25}));
  EXPECT_TRUE(a.IsNull(1));
  EXPECT_EQ(Int8Values(a.value_slice(2)), (std::vector<int8_t>{0, -127, 127, 50}));
  EXPECT_TRUE(a.IsValid(3));
  EXPECT_EQ(a.value_length(3), 0);
}

TEST(WorkedExamples, ListViewOutOfOrderSharedValues) {
  // [[12, -7, 25], null, [0, -127, 127, 50], [], [50, 12]]
  auto data = ArrayData::Make(list_view(int8()), 5,
                              {Bitmap("00011101"), PaddedValues<int32_t>({4, 7, 0, 0, 3}),
                               PaddedValues<int32_t>({3, 0, 4, 0, 2})},
                              {Int8Child({0, -127, 127, 50, 12, -7, 25})}, /*null_count=*/1);
  ExpectValid(data);
  ListViewArray a(data);
  EXPECT_EQ(Int8Values(a.value_slice(0)), (std::vector<int8_t>{12, -7, 25}));
  EXPECT_TRUE(a.IsNull(1));
  EXPECT_EQ(Int8Values(a.value_slice(2)), (std::vector<int8_t>{0, -127, 127, 50}));
  EXPECT_EQ(a.value_length(3), 0);
  // Shares child values with slots 0 and 2.
  EXPECT_EQ(Int8Values(a.value_slice(4)), (std::vector<int8_t>{50, 12}));
}

TEST(WorkedExamples, FixedSizeListOfByte) {
  // [[192, 168, 0, 12], null, [192, 168, 0, 25], [192, 168, 0, 1]]
  auto child = ArrayData::Make(uint8(), 16,
                               {nullptr, Padded({192, 168, 0, 12, kJunk8, kJunk8, kJunk8, kJunk8,
                                                 192, 168, 0, 25, 192, 168, 0, 1})},
                               /*null_count=*/0);
  auto data = ArrayData::Make(fixed_size_list(uint8(), 4), 4, {Bitmap("00001101")}, {child},
                              /*null_count=*/1);
  ExpectValid(data);
  FixedSizeListArray a(data);
  auto bytes = [&a](int64_t i) {
    const ArrayPtr slice = a.value_slice(i);
    const auto& s = static_cast<const UInt8Array&>(*slice);
    std::vector<uint8_t> out;
    for (int64_t k = 0; k < s.length(); ++k) out.push_back(s.Value(k));
    return out;
  };
  EXPECT_EQ(bytes(0), (std::vector<uint8_t>{192, 168, 0, 12}));
  EXPECT_TRUE(a.IsNull(1));
  EXPECT_EQ(bytes(2), (std::vector<uint8_t>{192, 168, 0, 25}));
  EXPECT_EQ(bytes(3), (std::vector<uint8_t>{192, 168, 0, 1}));
}

// ---------------------------------------------------------------------------
// Struct

TEST(WorkedExamples, StructWithHiddenChildValue) {
  // [{'joe', 1}, {null, 2}, null, {'mark', 4}] over children
  // ['joe', null, 'alice', 'mark'] and [1, 2, null, 4].
  auto names = ArrayData::Make(
      binary(), 4,
      {Bitmap("00001101"), PaddedValues<int32_t>({0, 3, 3, 8, 12}), PaddedText("joealicemark")},
      /*null_count=*/1);
  auto ages =
      ArrayData::Make(int32(), 4, {Bitmap("00001011"), PaddedValues<int32_t>({1, 2, kJunk32, 4})},
                      /*null_count=*/1);
  auto type = struct_({field("name", binary()), field("age", int32())});
  auto data = ArrayData::Make(type, 4, {Bitmap("00001011")}, {names, ages}, /*null_count=*/1);
  ExpectValid(data);

  StructArray s(data);
  EXPECT_EQ(s.null_count(), 1);
  EXPECT_TRUE(s.IsValid(0));
  EXPECT_TRUE(s.IsValid(1));
  EXPECT_TRUE(s.IsNull(2));
  EXPECT_TRUE(s.IsValid(3));

  const auto& name = static_cast<const BinaryArray&>(*s.field(0));
  const auto& age = static_cast<const Int32Array&>(*s.field(1));
  EXPECT_EQ(name.GetView(0), "joe");
  EXPECT_EQ(age.Value(0), 1);
  EXPECT_TRUE(name.IsNull(1));
  EXPECT_EQ(age.Value(1), 2);
  // The struct hides 'alice': slot 2 is null in the struct, valid in the child.
  EXPECT_TRUE(name.IsValid(2));
  EXPECT_EQ(name.GetView(2), "alice");
  EXPECT_TRUE(age.IsNull(2));
  EXPECT_EQ(name.GetView(3), "mark");
  EXPECT_EQ(age.Value(3), 4);
}

// ---------------------------------------------------------------------------
// Unions

TEST(WorkedExamples, DenseUnion) {
  // [{f=1.2}, null, {f=3.4}, {i=5}]
  auto f = ArrayData::Make(float32(), 3, {Padded({0x05}), Padded(LE<float>({1.2f, -99.0f, 3.4f}))},
                           /*null_count=*/1);
  auto i = ArrayData::Make(int32(), 1, {nullptr, PaddedValues<int32_t>({5})}, /*null_count=*/0);
  auto type = dense_union({field("f", float32()), field("i", int32())});
  auto data =
      ArrayData::Make(type, 4, {Padded({0, 0, 0, 1}), PaddedValues<int32_t>({0, 1, 2, 0})}, {f, i},
                      /*null_count=*/0);
  ExpectValid(data);

  UnionArray u(data);
  EXPECT_EQ(u.mode(), UnionMode::kDense);
  EXPECT_EQ(u.null_count(), 0);  // unions keep their nulls in the children
  auto float_at = [&u](int64_t slot) {
    return static_cast<const FloatArray&>(*u.field(u.child_id(slot))).Value(u.value_offset(slot));
  };
  EXPECT_EQ(u.child_id(0), 0);
  EXPECT_FLOAT_EQ(float_at(0), 1.2f);
  EXPECT_TRUE(u.IsNull(1));
  EXPECT_FLOAT_EQ(float_at(2), 3.4f);
  EXPECT_EQ(u.child_id(3), 1);
  EXPECT_EQ(u.value_offset(3), 0);
  EXPECT_EQ(static_cast<const Int32Array&>(*u.field(1)).Value(0), 5);
  EXPECT_TRUE(u.IsValid(3));
}

TEST(WorkedExamples, SparseUnion) {
  // [{i=5}, {f=1.2}, {s='joe'}, {f=3.4}, {i=4}, {s='mark'}]
  auto i = ArrayData::Make(
      int32(), 6,
      {Bitmap("00010001"), PaddedValues<int32_t>({5, kJunk32, kJunk32, kJunk32, 4, kJunk32})},
      /*null_count=*/4);
  auto f = ArrayData::Make(
      float32(), 6,
      {Bitmap("00001010"), Padded(LE<float>({-1.0f, 1.2f, -1.0f, 3.4f, -1.0f, -1.0f}))},
      /*null_count=*/4);
  auto s = ArrayData::Make(
      binary(), 6,
      {Bitmap("00100100"), PaddedValues<int32_t>({0, 0, 0, 3, 3, 3, 7}), PaddedText("joemark")},
      /*null_count=*/4);
  auto type = sparse_union({field("i", int32()), field("f", float32()), field("s", binary())});
  auto data = ArrayData::Make(type, 6, {Padded({0, 1, 2, 1, 0, 2})}, {i, f, s}, /*null_count=*/0);
  ExpectValid(data);

  UnionArray u(data);
  EXPECT_EQ(u.mode(), UnionMode::kSparse);
  const auto& ints = static_cast<const Int32Array&>(*u.field(0));
  const auto& floats = static_cast<const FloatArray&>(*u.field(1));
  const auto& strings = static_cast<const BinaryArray&>(*u.field(2));
  for (int64_t slot = 0; slot < 6; ++slot) EXPECT_TRUE(u.IsValid(slot)) << slot;
  EXPECT_EQ(u.child_id(0), 0);
  EXPECT_EQ(ints.Value(u.value_offset(0)), 5);
  EXPECT_FLOAT_EQ(floats.Value(u.value_offset(1)), 1.2f);
  EXPECT_EQ(strings.GetView(u.value_offset(2)), "joe");
  EXPECT_FLOAT_EQ(floats.Value(u.value_offset(3)), 3.4f);
  EXPECT_EQ(ints.Value(u.value_offset(4)), 4);
  EXPECT_EQ(strings.GetView(u.value_offset(5)), "mark");
}

// ---------------------------------------------------------------------------
// Dictionary encoding

TEST(WorkedExamples, DictionaryEncoded) {
  // ['foo', 'bar', 'foo', 'bar', null, 'baz']
  auto dict = ArrayData::Make(
      binary(), 3, {nullptr, PaddedValues<int32_t>({0, 3, 6, 9}), PaddedText("foobarbaz")},
      /*null_count=*/0);
  auto data = ArrayData::Make(dictionary(int32(), binary()), 6,
                              {Bitmap("00101111"), PaddedValues<int32_t>({0, 1, 0, 1, kJunk32, 2})},
                              /*null_count=*/1);
  data->dictionary = dict;
  ExpectValid(data);

  DictionaryArray a(data);
  const auto& values = static_cast<const BinaryArray&>(*a.dictionary());
  const char* expected[] = {"foo", "bar", "foo", "bar", nullptr, "baz"};
  for (int64_t k = 0; k < 6; ++k) {
    if (expected[k] == nullptr) {
      EXPECT_TRUE(a.IsNull(k));
    } else {
      EXPECT_EQ(values.GetView(a.GetIndex(k)), expected[k]) << k;
    }
  }
}

TEST(WorkedExamples, DictionaryWithDuplicatesAndNulls) {
  // Indices [0, 1, 3, 1, 4, 2] into ['foo', 'bar', 'baz', 'foo', null].
  auto dict = ArrayData::Make(
      binary(), 5,
      {Bitmap("00001111"), PaddedValues<int32_t>({0, 3, 6, 9, 12, 12}), PaddedText("foobarbazfoo")},
      /*null_count=*/1);
  auto data = ArrayData::Make(dictionary(int32(), binary()), 6,
                              {nullptr, PaddedValues<int32_t>({0, 1, 3, 1, 4, 2})},
                              /*null_count=*/0);
  data->dictionary = dict;
  ExpectValid(data);

  DictionaryArray a(data);
  // The null count comes from the indices alone...
  EXPECT_EQ(a.null_count(), 0);
  const auto& values = static_cast<const BinaryArray&>(*a.dictionary());
  EXPECT_EQ(values.GetView(a.GetIndex(0)), "foo");
  EXPECT_EQ(values.GetView(a.GetIndex(1)), "bar");
  EXPECT_EQ(values.GetView(a.GetIndex(2)), "foo");  // the duplicate entry 3
  EXPECT_EQ(a.GetIndex(2), 3);
  EXPECT_EQ(values.GetView(a.GetIndex(3)), "bar");
  EXPECT_EQ(values.GetView(a.GetIndex(5)), "baz");
  // ...although slot 4 refers to a null dictionary value and reads as null.
  EXPECT_TRUE(a.IsNull(4));
}

// ---------------------------------------------------------------------------
// Run-end encoding

TEST(WorkedExamples, RunEndEncodedFloat32) {
  // [1.0, 1.0, 1.0, 1.0, null, null, 2.0]
  auto run_ends = ArrayData::Make(int32(), 3, {nullptr, PaddedValues<int32_t>({4, 6, 7})},
                                  /*null_count=*/0);
  auto values =
      ArrayData::Make(float32(), 3, {Padded({0x05}), Padded(LE<float>({1.0f, -5.0f, 2.0f}))},
                      /*null_count=*/1);
  auto data = ArrayData::Make(run_end_encoded(int32(), float32()), 7, {}, {run_ends, values},
                              /*null_count=*/0);
  ExpectValid(data);

  RunEndEncodedArray a(data);
  EXPECT_EQ(a.null_count(), 0);
  EXPECT_EQ(a.RunEnd(0), 4);
  EXPECT_EQ(a.RunEnd(2), 7);
  const auto& floats = static_cast<const FloatArray&>(*a.values());
  const int64_t expected_run[] = {0, 0, 0, 0, 1, 1, 2};
  for (int64_t i = 0; i < 7; ++i) {
    EXPECT_EQ(a.FindPhysicalIndex(i), expected_run[i]) << i;
  }
  for (int64_t i : {0, 1, 2, 3}) EXPECT_EQ(floats.Value(a.FindPhysicalIndex(i)), 1.0f);
  EXPECT_TRUE(a.IsNull(4));
  EXPECT_TRUE(a.IsNull(5));
  EXPECT_TRUE(a.IsValid(6));
  EXPECT_EQ(floats.Value(a.FindPhysicalIndex(6)), 2.0f);
}

// ---------------------------------------------------------------------------
// Binary view

/// One 16-byte view, laid out as the spec's table shows.
std::vector<uint8_t> InlineView(const std::string& s) {
  std::vector<uint8_t> v(16, 0);  // "data (padded with 0)"
  const auto size = static_cast<int32_t>(s.size());
  std::memcpy(v.data(), &size, 4);
  std::memcpy(v.data() + 4, s.data(), s.size());
  return v;
}

std::vector<uint8_t> RefView(const std::string& s, int32_t buffer_index, int32_t offset) {
  std::vector<uint8_t> v(16, 0);
  const auto size = static_cast<int32_t>(s.size());
  std::memcpy(v.data(), &size, 4);
  std::memcpy(v.data() + 4, s.data(), 4);  // prefix
  std::memcpy(v.data() + 8, &buffer_index, 4);
  std::memcpy(v.data() + 12, &offset, 4);
  return v;
}

TEST(WorkedExamples, BinaryViewShortAndLongStrings) {
  // ["hello", null, "a string longer than twelve", "", "exactly12byt", "another long value"]
  const std::string long0 = "a string longer than twelve";
  const std::string long1 = "another long value";
  std::vector<uint8_t> views;
  auto append = [&views](const std::vector<uint8_t>& v) {
    views.insert(views.end(), v.begin(), v.end());
  };
  append(InlineView("hello"));
  append(std::vector<uint8_t>(16, 0));  // null slot
  append(RefView(long0, 0, 0));
  append(InlineView(""));
  append(InlineView("exactly12byt"));
  append(RefView(long1, 1, 3));

  for (const TypePtr& type : {binary_view(), utf8_view()}) {
    auto data = ArrayData::Make(
        type, 6, {Bitmap("00111101"), Padded(views), PaddedText(long0), PaddedText("xyz" + long1)},
        /*null_count=*/1);
    ExpectValid(data);
    BinaryViewArray a(data);
    EXPECT_EQ(a.num_data_buffers(), 2);
    EXPECT_TRUE(a.raw_views()[0].is_inline());
    EXPECT_EQ(a.GetView(0), "hello");
    EXPECT_TRUE(a.IsNull(1));
    EXPECT_FALSE(a.raw_views()[2].is_inline());
    EXPECT_EQ(a.GetView(2), long0);
    EXPECT_EQ(a.GetView(3), "");
    EXPECT_TRUE(a.raw_views()[4].is_inline());
    EXPECT_EQ(a.GetView(4), "exactly12byt");
    EXPECT_EQ(a.GetView(5), long1);
  }
}

}  // namespace
}  // namespace alkaid::format
