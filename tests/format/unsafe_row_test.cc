// UnsafeRow: the seed's worked examples byte for byte, Spark's encodings of
// long decimals, strings and nested values, random round trips, encoding in
// place (exact sizes, caller memory, spans too small), and corrupt input.

#include "alkaid/format/unsafe_row.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "alkaid/format/builder.h"
#include "alkaid/format/compare.h"
#include "alkaid/format/validate.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

// Expected bytes, written as little-endian 8-byte words and raw bytes.
class Bytes {
 public:
  Bytes& W(uint64_t v) {
    for (int k = 0; k < 8; ++k) b_.push_back(static_cast<uint8_t>(v >> (8 * k)));
    return *this;
  }
  /// An offset/size word.
  Bytes& OS(uint64_t offset, uint64_t size) { return W((offset << 32) | size); }
  Bytes& B(std::initializer_list<int> bytes) {
    for (int x : bytes) b_.push_back(static_cast<uint8_t>(x));
    return *this;
  }
  /// Zero bytes up to the next multiple of 8.
  Bytes& Pad() {
    while (b_.size() % 8 != 0) b_.push_back(0);
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return b_; }

 private:
  std::vector<uint8_t> b_;
};

std::vector<uint8_t> ToVector(const Buffer& b) { return {b.data(), b.data() + b.size()}; }

// The single row of `batch`, via the one-row writer; checks that the batch
// encoding is the same row behind a big-endian size prefix.
std::vector<uint8_t> EncodeOnlyRow(const RecordBatchPtr& batch) {
  EXPECT_EQ(batch->num_rows(), 1);
  auto writer = UnsafeRowWriter::Make(batch);
  EXPECT_OK(writer.status());
  auto row = (*writer)->EncodeRow(0);
  EXPECT_OK(row.status());
  std::vector<uint8_t> bytes = ToVector(**row);
  auto encoded = EncodeRowBatch(*batch);
  EXPECT_OK(encoded.status());
  std::vector<uint8_t> framed = ToVector(**encoded);
  EXPECT_EQ(framed.size(), bytes.size() + 4);
  if (framed.size() == bytes.size() + 4) {
    const uint32_t n = static_cast<uint32_t>(bytes.size());
    EXPECT_EQ(framed[0], n >> 24);
    EXPECT_EQ(framed[1], (n >> 16) & 0xff);
    EXPECT_EQ(framed[2], (n >> 8) & 0xff);
    EXPECT_EQ(framed[3], n & 0xff);
    EXPECT_EQ(std::vector<uint8_t>(framed.begin() + 4, framed.end()), bytes);
  }
  // And it decodes back to the batch.
  auto decoded = DecodeRowBatch(**encoded, batch->schema());
  EXPECT_OK(decoded.status());
  if (decoded.ok()) {
    EXPECT_OK(ValidateFull(**decoded));
    EXPECT_OK(CheckRecordBatchEquals(*batch, **decoded));
  }
  return bytes;
}

template <typename Fn>
ArrayPtr Build(const TypePtr& type, Fn&& fill) {
  auto builder = MakeBuilder(type);
  EXPECT_OK(builder.status());
  EXPECT_OK(fill(builder->get()));
  auto array = (*builder)->Finish();
  EXPECT_OK(array.status());
  return *array;
}

RecordBatchPtr OneColumn(const TypePtr& type, const ArrayPtr& column, std::string name = "c") {
  auto batch =
      RecordBatch::Make(schema({field(std::move(name), type)}), column->length(), {column});
  EXPECT_OK(batch.status());
  return *batch;
}

template <typename T>
Status AppendNum(ArrayBuilder* b, T v) {
  return static_cast<FixedWidthBuilder*>(b)->AppendRaw(reinterpret_cast<const uint8_t*>(&v));
}

ArrayPtr Int64List(const std::vector<int64_t>& values) {
  return Build(list(int64()), [&](ArrayBuilder* b) {
    auto* lb = static_cast<ListBuilder*>(b);
    ALKAID_RETURN_NOT_OK(lb->Append());
    for (int64_t v : values) ALKAID_RETURN_NOT_OK(AppendNum(lb->value_builder(), v));
    return Status::OK();
  });
}

// ---------------------------------------------------------------------------
// The seed's five examples.

TEST(UnsafeRowSeed, IntegerAndBigint24Bytes) {
  auto a = Build(int32(), [](ArrayBuilder* b) { return AppendNum<int32_t>(b, -2); });
  auto c = Build(int64(), [](ArrayBuilder* b) { return AppendNum<int64_t>(b, 300); });
  ASSERT_OK_AND_ASSIGN(
      auto batch, RecordBatch::Make(schema({field("a", int32()), field("b", int64())}), 1, {a, c}));
  // An int is written in the low 4 bytes of a zeroed slot (not sign-extended).
  Bytes expected;
  expected.W(0).B({0xfe, 0xff, 0xff, 0xff, 0, 0, 0, 0}).W(300);
  EXPECT_EQ(EncodeOnlyRow(batch), expected.bytes());
  EXPECT_EQ(expected.bytes().size(), 24u);
}

TEST(UnsafeRowSeed, BigintArrayOf10Is112Bytes) {
  std::vector<int64_t> values = {0, 11, 22, 33, 44, 55, 66, 77, 88, 99};
  auto batch = OneColumn(list(int64()), Int64List(values));
  Bytes expected;
  expected.W(0).OS(16, 96).W(10).W(0);
  for (int64_t v : values) expected.W(static_cast<uint64_t>(v));
  ASSERT_EQ(expected.bytes().size(), 112u);
  EXPECT_EQ(EncodeOnlyRow(batch), expected.bytes());
}

TEST(UnsafeRowSeed, TinyintArrayOf10Is48Bytes) {
  auto array = Build(list(int8()), [](ArrayBuilder* b) {
    auto* lb = static_cast<ListBuilder*>(b);
    ALKAID_RETURN_NOT_OK(lb->Append());
    for (int v = 0; v < 100; v += 11) {
      ALKAID_RETURN_NOT_OK(AppendNum<int8_t>(lb->value_builder(), static_cast<int8_t>(v)));
    }
    return Status::OK();
  });
  Bytes expected;
  expected.W(0).OS(16, 32).W(10).W(0).B({0, 11, 22, 33, 44, 55, 66, 77, 88, 99}).Pad();
  ASSERT_EQ(expected.bytes().size(), 48u);
  EXPECT_EQ(EncodeOnlyRow(OneColumn(list(int8()), array)), expected.bytes());
}

TEST(UnsafeRowSeed, BigintMapOf3Is104Bytes) {
  auto type = map(int64(), int64());
  auto array = Build(type, [](ArrayBuilder* b) {
    auto* mb = static_cast<MapBuilder*>(b);
    ALKAID_RETURN_NOT_OK(mb->Append());
    for (int64_t k = 1; k <= 3; ++k) {
      ALKAID_RETURN_NOT_OK(AppendNum(mb->key_builder(), k));
      ALKAID_RETURN_NOT_OK(AppendNum(mb->item_builder(), k * 10));
    }
    return Status::OK();
  });
  Bytes expected;
  expected.W(0).OS(16, 88).W(40);
  expected.W(3).W(0).W(1).W(2).W(3);
  expected.W(3).W(0).W(10).W(20).W(30);
  ASSERT_EQ(expected.bytes().size(), 104u);
  EXPECT_EQ(EncodeOnlyRow(OneColumn(type, array)), expected.bytes());
}

TEST(UnsafeRowSeed, StructOfBigintAndDoubleIs40Bytes) {
  auto type = struct_({field("x", int64()), field("y", float64())});
  auto array = Build(type, [](ArrayBuilder* b) {
    auto* sb = static_cast<StructBuilder*>(b);
    ALKAID_RETURN_NOT_OK(sb->Append());
    ALKAID_RETURN_NOT_OK(AppendNum<int64_t>(sb->field_builder(0), 7));
    return AppendNum<double>(sb->field_builder(1), 1.5);
  });
  Bytes expected;
  expected.W(0).OS(16, 24).W(0).W(7).W(0x3FF8000000000000ull);  // 1.5
  ASSERT_EQ(expected.bytes().size(), 40u);
  EXPECT_EQ(EncodeOnlyRow(OneColumn(type, array)), expected.bytes());
}

// ---------------------------------------------------------------------------
// Spark exactness.

TEST(UnsafeRowSpark, LongDecimalIsBigIntegerToByteArray) {
  auto type = decimal128(38, 2);
  struct Case {
    const char* text;  // at scale 2: the unscaled value is text * 100
    std::vector<int> bytes;
  };
  const std::vector<Case> cases = {
      {"0", {0x00}},
      {"1.27", {0x7f}},
      {"1.28", {0x00, 0x80}},
      {"-0.01", {0xff}},
      {"-1.29", {0xff, 0x7f}},
      {"-1.28", {0x80}},
      {"655.35", {0x00, 0xff, 0xff}},
      // 10^38 - 1 (unscaled 38 nines): 16 bytes
      {"999999999999999999999999999999999999.99",
       {0x4b, 0x3b, 0x4c, 0xa8, 0x5a, 0x86, 0xc4, 0x7a, 0x09, 0x8a, 0x22, 0x3f, 0xff, 0xff, 0xff,
        0xff}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto array = Build(type, [&](ArrayBuilder* b) {
      return static_cast<DecimalBuilder*>(b)->AppendDecimal(c.text);
    });
    // null bits | slot -> (16, n) | 16 reserved bytes holding the big-endian value
    Bytes expected;
    expected.W(0).OS(16, c.bytes.size());
    std::vector<uint8_t> reserved(16, 0);
    for (size_t k = 0; k < c.bytes.size(); ++k) reserved[k] = static_cast<uint8_t>(c.bytes[k]);
    for (uint8_t x : reserved) expected.B({x});
    EXPECT_EQ(EncodeOnlyRow(OneColumn(type, array)), expected.bytes());
  }
}

TEST(UnsafeRowSpark, NullLongDecimalKeepsItsSixteenBytes) {
  // Spark's UnsafeRowWriter reserves 16 zero bytes for a null long decimal
  // and keeps their offset in the slot (size 0), so it can be set in place.
  auto type = decimal128(20, 0);
  auto array = Build(type, [](ArrayBuilder* b) { return b->AppendNull(); });
  Bytes expected;
  expected.W(1).OS(16, 0).W(0).W(0);
  EXPECT_EQ(EncodeOnlyRow(OneColumn(type, array)), expected.bytes());
}

TEST(UnsafeRowSpark, LongDecimalsInArraysAreRoundedTo8) {
  auto type = list(decimal128(30, 0));
  auto array = Build(type, [](ArrayBuilder* b) {
    auto* lb = static_cast<ListBuilder*>(b);
    ALKAID_RETURN_NOT_OK(lb->Append());
    auto* db = static_cast<DecimalBuilder*>(lb->value_builder());
    ALKAID_RETURN_NOT_OK(db->AppendUnscaled(128));
    ALKAID_RETURN_NOT_OK(db->AppendNull());
    return db->AppendUnscaled(-1);
  });
  // array: count 3 | null bits (element 1) | 3 slots | 00 80 | ff
  Bytes expected;
  expected.W(0).OS(16, 56);
  expected.W(3).W(0b010).OS(40, 2).W(0).OS(48, 1);
  expected.B({0x00, 0x80}).Pad().B({0xff}).Pad();
  EXPECT_EQ(EncodeOnlyRow(OneColumn(type, array)), expected.bytes());
}

TEST(UnsafeRowSpark, ShortDecimalIsUnscaledLong) {
  auto array = Build(decimal128(18, 3), [](ArrayBuilder* b) {
    return static_cast<DecimalBuilder*>(b)->AppendDecimal("-1.5");
  });
  Bytes expected;
  expected.W(0).W(static_cast<uint64_t>(int64_t{-1500}));
  EXPECT_EQ(EncodeOnlyRow(OneColumn(decimal128(18, 3), array)), expected.bytes());
  auto d64 = Build(decimal64(10, 0), [](ArrayBuilder* b) {
    return static_cast<DecimalBuilder*>(b)->AppendUnscaled(-7);
  });
  Bytes e64;
  e64.W(0).W(static_cast<uint64_t>(int64_t{-7}));
  EXPECT_EQ(EncodeOnlyRow(OneColumn(decimal64(10, 0), d64)), e64.bytes());
}

TEST(UnsafeRowSpark, StringsAreOffsetAndSize) {
  auto s =
      schema({field("a", utf8()), field("b", utf8()), field("c", binary()), field("d", utf8())});
  auto a = Build(utf8(),
                 [](ArrayBuilder* b) { return static_cast<StringBuilder*>(b)->Append("hello"); });
  auto e =
      Build(utf8(), [](ArrayBuilder* b) { return static_cast<StringBuilder*>(b)->Append(""); });
  auto c = Build(binary(), [](ArrayBuilder* b) {
    return static_cast<BinaryBuilder*>(b)->Append(
        std::string("\x00\x01\x02\x03\x04\x05\x06\x07\x08", 9));
  });
  auto n = Build(utf8(), [](ArrayBuilder* b) { return b->AppendNull(); });
  ASSERT_OK_AND_ASSIGN(auto batch, RecordBatch::Make(s, 1, {a, e, c, n}));
  // 8 null bits (d) | 4 slots | "hello" pad | (empty: offset, size 0) | 9 bytes pad
  Bytes expected;
  expected.W(0b1000).OS(40, 5).OS(48, 0).OS(48, 9).W(0);
  expected.B({'h', 'e', 'l', 'l', 'o'}).Pad().B({0, 1, 2, 3, 4, 5, 6, 7, 8}).Pad();
  EXPECT_EQ(EncodeOnlyRow(batch), expected.bytes());
}

TEST(UnsafeRowSpark, NestedArraysOfStrings) {
  auto type = list(list(utf8()));
  auto array = Build(type, [](ArrayBuilder* b) {
    auto* outer = static_cast<ListBuilder*>(b);
    auto* inner = static_cast<ListBuilder*>(outer->value_builder());
    auto* str = static_cast<StringBuilder*>(inner->value_builder());
    ALKAID_RETURN_NOT_OK(outer->Append());
    ALKAID_RETURN_NOT_OK(inner->Append());
    ALKAID_RETURN_NOT_OK(str->Append("a"));
    ALKAID_RETURN_NOT_OK(str->Append("bc"));
    ALKAID_RETURN_NOT_OK(inner->Append());
    return inner->AppendNull();
  });
  Bytes expected;
  expected.W(0).OS(16, 96);
  // outer: 3 elements, element 2 null; offsets relative to the outer array
  expected.W(3).W(0b100).OS(40, 48).OS(88, 8).W(0);
  // inner ["a", "bc"]: offsets relative to the inner array
  expected.W(2).W(0).OS(32, 1).OS(40, 2).B({'a'}).Pad().B({'b', 'c'}).Pad();
  // inner []
  expected.W(0);
  EXPECT_EQ(EncodeOnlyRow(OneColumn(type, array)), expected.bytes());
}

TEST(UnsafeRowSpark, MapOfArrays) {
  auto type = map(utf8(), list(int32()));
  auto array = Build(type, [](ArrayBuilder* b) {
    auto* mb = static_cast<MapBuilder*>(b);
    auto* lb = static_cast<ListBuilder*>(mb->item_builder());
    ALKAID_RETURN_NOT_OK(mb->Append());
    ALKAID_RETURN_NOT_OK(static_cast<StringBuilder*>(mb->key_builder())->Append("k"));
    ALKAID_RETURN_NOT_OK(lb->Append());
    for (int32_t v : {1, 2, 3}) ALKAID_RETURN_NOT_OK(AppendNum(lb->value_builder(), v));
    return Status::OK();
  });
  Bytes expected;
  expected.W(0).OS(16, 96);
  expected.W(32);                               // key array size
  expected.W(1).W(0).OS(24, 1).B({'k'}).Pad();  // keys
  expected.W(1).W(0).OS(24, 32);                // values
  expected.W(3).W(0).B({1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0}).Pad();
  EXPECT_EQ(EncodeOnlyRow(OneColumn(type, array)), expected.bytes());
}

TEST(UnsafeRowSpark, NarrowTypesAndUnknown) {
  auto s =
      schema({field("b", boolean()), field("t", int8()), field("s", int16()), field("f", float32()),
              field("d", date32()), field("ts", timestamp(TimeUnit::kMicro)), field("u", null()),
              field("lu", list(null()))});
  auto b = Build(boolean(),
                 [](ArrayBuilder* x) { return static_cast<BooleanBuilder*>(x)->Append(true); });
  auto t = Build(int8(), [](ArrayBuilder* x) { return AppendNum<int8_t>(x, -1); });
  auto sh = Build(int16(), [](ArrayBuilder* x) { return AppendNum<int16_t>(x, 0x1234); });
  auto f = Build(float32(), [](ArrayBuilder* x) { return AppendNum<float>(x, 1.0f); });
  auto d = Build(date32(), [](ArrayBuilder* x) { return AppendNum<int32_t>(x, 19000); });
  auto ts =
      Build(timestamp(TimeUnit::kMicro), [](ArrayBuilder* x) { return AppendNum<int64_t>(x, -5); });
  auto u = Build(null(), [](ArrayBuilder* x) { return x->AppendNull(); });
  auto lu = Build(list(null()), [](ArrayBuilder* x) {
    auto* lb = static_cast<ListBuilder*>(x);
    ALKAID_RETURN_NOT_OK(lb->Append());
    return lb->value_builder()->AppendNulls(3);
  });
  ASSERT_OK_AND_ASSIGN(auto batch, RecordBatch::Make(s, 1, {b, t, sh, f, d, ts, u, lu}));
  Bytes expected;
  expected.W(1u << 6);
  expected.B({1, 0, 0, 0, 0, 0, 0, 0})
      .B({0xff, 0, 0, 0, 0, 0, 0, 0})
      .B({0x34, 0x12, 0, 0, 0, 0, 0, 0});
  expected.B({0, 0, 0x80, 0x3f, 0, 0, 0, 0}).W(19000).W(static_cast<uint64_t>(int64_t{-5}));
  expected.W(0).OS(72, 16);
  // UNKNOWN elements: null bits only, zero bytes each.
  expected.W(3).W(0b111);
  EXPECT_EQ(EncodeOnlyRow(batch), expected.bytes());
}

TEST(UnsafeRowSpark, NullsAndEmptyValues) {
  auto type =
      struct_({field("l", list(int32())), field("m", map(int32(), utf8())), field("s", utf8())});
  auto array = Build(type, [](ArrayBuilder* b) {
    auto* sb = static_cast<StructBuilder*>(b);
    ALKAID_RETURN_NOT_OK(sb->Append());
    ALKAID_RETURN_NOT_OK(sb->field_builder(0)->AppendEmptyValue());
    ALKAID_RETURN_NOT_OK(sb->field_builder(1)->AppendEmptyValue());
    return sb->field_builder(2)->AppendNull();
  });
  Bytes expected;
  expected.W(0).OS(16, 64);
  // nested row: bits (s null) | l -> 32 | m -> 40 | 0 | [] | {}
  expected.W(0b100).OS(32, 8).OS(40, 24).W(0);
  expected.W(0);
  expected.W(8).W(0).W(0);
  EXPECT_EQ(EncodeOnlyRow(OneColumn(type, array)), expected.bytes());
}

// ---------------------------------------------------------------------------
// Schemas.

TEST(UnsafeRowSchema, RejectsWhatRowsCannotCarry) {
  EXPECT_OK(CheckRowSchema(
      *schema({field("a", list(struct_({field("x", map(utf8(), decimal128(38, 2)))})))})));
  ASSERT_RAISES_WITH_MESSAGE(kTypeError, "field 'u'",
                             CheckRowSchema(*schema({field("u", uint32())})));
  ASSERT_RAISES_WITH_MESSAGE(
      kTypeError, "field 'a.item'",
      CheckRowSchema(*schema({field("a", list(duration(TimeUnit::kSecond)))})));
  ASSERT_RAISES(kTypeError,
                CheckRowSchema(*schema({field("x", sparse_union({field("i", int32())}))})));
  ASSERT_RAISES(kTypeError, CheckRowSchema(*schema({field("t", timestamp(TimeUnit::kNano))})));
  ASSERT_RAISES(kTypeError, CheckRowSchema(*schema({field("d", decimal256(40, 0))})));
  ASSERT_RAISES(kTypeError, CheckRowSchema(*schema({field("i", month_interval())})));
  TypePtr deep = int32();
  for (int k = 0; k < kMaxUnsafeRowNesting + 1; ++k) deep = list(deep);
  ASSERT_RAISES(kInvalid, CheckRowSchema(*schema({field("deep", deep)})));
  auto c = Build(uint8(), [](ArrayBuilder* b) { return AppendNum<uint8_t>(b, 1); });
  ASSERT_RAISES(kTypeError, EncodeRowBatch(*OneColumn(uint8(), c)));
}

TEST(UnsafeRowSchema, DictionariesAreWrittenAsTheirValues) {
  auto dict_type = dictionary(int8(), utf8());
  auto array = Build(dict_type, [](ArrayBuilder* b) {
    auto* db = static_cast<DictionaryBuilder*>(b);
    ALKAID_RETURN_NOT_OK(db->Append("x"));
    ALKAID_RETURN_NOT_OK(db->AppendNull());
    ALKAID_RETURN_NOT_OK(db->Append("yy"));
    return db->Append("x");
  });
  auto batch = OneColumn(dict_type, array);
  ASSERT_OK_AND_ASSIGN(auto encoded, EncodeRowBatch(*batch));
  ASSERT_OK_AND_ASSIGN(auto decoded, DecodeRowBatch(*encoded, batch->schema()));
  EXPECT_TRUE(decoded->schema()->field(0)->type()->Equals(utf8()));
  auto plain = Build(utf8(), [](ArrayBuilder* b) {
    auto* sb = static_cast<StringBuilder*>(b);
    ALKAID_RETURN_NOT_OK(sb->Append("x"));
    ALKAID_RETURN_NOT_OK(sb->AppendNull());
    ALKAID_RETURN_NOT_OK(sb->Append("yy"));
    return sb->Append("x");
  });
  EXPECT_OK(CheckRecordBatchEquals(*OneColumn(utf8(), plain), *decoded));
  ASSERT_OK_AND_ASSIGN(auto plain_encoded, EncodeRowBatch(*OneColumn(utf8(), plain)));
  EXPECT_TRUE(plain_encoded->Equals(*encoded));
}

// ---------------------------------------------------------------------------
// Random round trips.

class RandomRows {
 public:
  explicit RandomRows(uint32_t seed) : rng_(seed) {}

  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  TypePtr Primitive() {
    switch (Uniform(0, 17)) {
      case 0:
        return null();
      case 1:
        return boolean();
      case 2:
        return int8();
      case 3:
        return int16();
      case 4:
        return int32();
      case 5:
        return int64();
      case 6:
        return float32();
      case 7:
        return float64();
      case 8:
        return date32();
      case 9:
        return timestamp(TimeUnit::kMicro, "UTC");
      case 10:
        return decimal128(Uniform(1, 18), 2);
      case 11:
        return decimal128(Uniform(19, 38), Uniform(0, 5));
      case 12:
        return decimal64(Uniform(1, 18), 0);
      case 13:
        return decimal32(Uniform(1, 9), 1);
      case 14:
        return binary();
      case 15:
        return large_utf8();
      case 16:
        return utf8_view();
      default:
        return utf8();
    }
  }

  TypePtr Key() {
    switch (Uniform(0, 3)) {
      case 0:
        return int32();
      case 1:
        return int64();
      case 2:
        return decimal128(25, 0);
      default:
        return utf8();
    }
  }

  TypePtr Type(int depth) {
    if (depth <= 0 || Chance(0.4)) return Primitive();
    switch (Uniform(0, 4)) {
      case 0:
        return list(Field("item", depth - 1));
      case 1:
        return large_list(Field("item", depth - 1));
      case 2:
        return fixed_size_list(Field("item", depth - 1), Uniform(0, 3));
      case 3:
        return map(Key(), Type(depth - 1));
      default: {
        FieldVector fields;
        const int n = Uniform(1, 3);
        for (int k = 0; k < n; ++k) fields.push_back(Field("f" + std::to_string(k), depth - 1));
        return struct_(std::move(fields));
      }
    }
  }

  FieldPtr Field(std::string name, int depth) {
    TypePtr t = Type(depth);
    return field(std::move(name), t, t->id() == TypeId::kNull || Chance(0.8));
  }

  Status Append(ArrayBuilder* b, const DataType& type, bool nullable) {
    if (type.id() == TypeId::kNull || (nullable && Chance(0.15))) return b->AppendNull();
    switch (type.id()) {
      case TypeId::kBool:
        return static_cast<BooleanBuilder*>(b)->Append(Chance(0.5));
      case TypeId::kInt8:
        return AppendNum<int8_t>(b, static_cast<int8_t>(Uniform(-128, 127)));
      case TypeId::kInt16:
        return AppendNum<int16_t>(b, static_cast<int16_t>(Uniform(-30000, 30000)));
      case TypeId::kInt32:
      case TypeId::kDate32:
        return AppendNum<int32_t>(b, static_cast<int32_t>(rng_()));
      case TypeId::kInt64:
      case TypeId::kTimestamp:
        return AppendNum<int64_t>(b, static_cast<int64_t>((uint64_t{rng_()} << 32) | rng_()));
      case TypeId::kFloat:
        return AppendNum<float>(b, static_cast<float>(Uniform(-1000, 1000)) / 8);
      case TypeId::kDouble:
        return AppendNum<double>(b, static_cast<double>(rng_()) / 3);
      case TypeId::kDecimal32:
      case TypeId::kDecimal64:
      case TypeId::kDecimal128: {
        const int digits = Uniform(1, static_cast<const DecimalType&>(type).precision());
        std::string text = Chance(0.5) ? "-" : "";
        for (int k = 0; k < digits; ++k)
          text += static_cast<char>('0' + Uniform(k == 0 ? 1 : 0, 9));
        if (Chance(0.2)) text = "0";
        const int scale = static_cast<const DecimalType&>(type).scale();
        if (scale > 0) text += "e-" + std::to_string(scale);
        return static_cast<DecimalBuilder*>(b)->AppendDecimal(text);
      }
      case TypeId::kBinary:
      case TypeId::kString:
      case TypeId::kLargeString:
      case TypeId::kStringView: {
        std::string s;
        const int n = Chance(0.2) ? 0 : Uniform(0, 20);
        for (int k = 0; k < n; ++k) {
          s += type.id() == TypeId::kBinary ? static_cast<char>(Uniform(0, 255))
                                            : static_cast<char>(Uniform('a', 'z'));
        }
        if (type.id() == TypeId::kBinary) return static_cast<BinaryBuilder*>(b)->Append(s);
        if (type.id() == TypeId::kString) return static_cast<StringBuilder*>(b)->Append(s);
        if (type.id() == TypeId::kLargeString)
          return static_cast<LargeStringBuilder*>(b)->Append(s);
        return static_cast<BinaryViewBuilder*>(b)->Append(s);
      }
      case TypeId::kList:
      case TypeId::kLargeList: {
        ArrayBuilder* vb = nullptr;
        if (type.id() == TypeId::kList) {
          ALKAID_RETURN_NOT_OK(static_cast<ListBuilder*>(b)->Append());
          vb = static_cast<ListBuilder*>(b)->value_builder();
        } else {
          ALKAID_RETURN_NOT_OK(static_cast<LargeListBuilder*>(b)->Append());
          vb = static_cast<LargeListBuilder*>(b)->value_builder();
        }
        const int n = Chance(0.2) ? 0 : Uniform(0, 5);
        for (int k = 0; k < n; ++k) {
          ALKAID_RETURN_NOT_OK(Append(vb, *type.field(0)->type(), type.field(0)->nullable()));
        }
        return Status::OK();
      }
      case TypeId::kFixedSizeList: {
        auto* fb = static_cast<FixedSizeListBuilder*>(b);
        ALKAID_RETURN_NOT_OK(fb->Append());
        for (int k = 0; k < fb->list_size(); ++k) {
          ALKAID_RETURN_NOT_OK(
              Append(fb->value_builder(), *type.field(0)->type(), type.field(0)->nullable()));
        }
        return Status::OK();
      }
      case TypeId::kMap: {
        auto* mb = static_cast<MapBuilder*>(b);
        const auto& mt = static_cast<const MapType&>(type);
        ALKAID_RETURN_NOT_OK(mb->Append());
        const int n = Chance(0.2) ? 0 : Uniform(0, 4);
        for (int k = 0; k < n; ++k) {
          ALKAID_RETURN_NOT_OK(Append(mb->key_builder(), *mt.key_field()->type(), false));
          ALKAID_RETURN_NOT_OK(
              Append(mb->item_builder(), *mt.item_field()->type(), mt.item_field()->nullable()));
        }
        return Status::OK();
      }
      case TypeId::kStruct: {
        auto* sb = static_cast<StructBuilder*>(b);
        ALKAID_RETURN_NOT_OK(sb->Append());
        for (int k = 0; k < type.num_fields(); ++k) {
          ALKAID_RETURN_NOT_OK(
              Append(sb->field_builder(k), *type.field(k)->type(), type.field(k)->nullable()));
        }
        return Status::OK();
      }
      default:
        return Status::NotImplemented("random ", type.ToString());
    }
  }

  Result<RecordBatchPtr> Batch(int max_depth, int num_rows) {
    FieldVector fields;
    const int n = Uniform(1, 5);
    for (int k = 0; k < n; ++k) fields.push_back(Field("c" + std::to_string(k), max_depth));
    std::vector<ArrayPtr> columns;
    for (const auto& f : fields) {
      ALKAID_ASSIGN_OR_RAISE(auto b, MakeBuilder(f->type()));
      for (int r = 0; r < num_rows; ++r)
        ALKAID_RETURN_NOT_OK(Append(b.get(), *f->type(), f->nullable()));
      ALKAID_ASSIGN_OR_RAISE(auto a, b->Finish());
      columns.push_back(a);
    }
    return RecordBatch::Make(schema(fields), num_rows, columns);
  }

 private:
  std::mt19937 rng_;
};

TEST(UnsafeRowRoundTrip, RandomSchemasAndData) {
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RandomRows gen(seed);
    ASSERT_OK_AND_ASSIGN(auto batch, gen.Batch(/*max_depth=*/4, gen.Uniform(0, 12)));
    ASSERT_OK(ValidateFull(*batch));
    ASSERT_OK_AND_ASSIGN(auto encoded, EncodeRowBatch(*batch));
    ASSERT_OK_AND_ASSIGN(auto decoded, DecodeRowBatch(*encoded, batch->schema()));
    ASSERT_OK(ValidateFull(*decoded));
    ASSERT_OK(CheckRecordBatchEquals(*batch, *decoded));
    // Decoding then encoding gives the same bytes.
    ASSERT_OK_AND_ASSIGN(auto again, EncodeRowBatch(*decoded));
    ASSERT_TRUE(again->Equals(*encoded));
    // Sliced input: same bytes as the rows of the whole batch.
    if (batch->num_rows() >= 3) {
      auto slice = batch->Slice(1, batch->num_rows() - 2);
      ASSERT_OK_AND_ASSIGN(auto sliced, EncodeRowBatch(*slice));
      ASSERT_OK_AND_ASSIGN(auto rows, SplitRowBatch(encoded->view()));
      ASSERT_OK_AND_ASSIGN(auto sliced_rows, SplitRowBatch(sliced->view()));
      ASSERT_EQ(sliced_rows.size(), rows.size() - 2);
      for (size_t k = 0; k < sliced_rows.size(); ++k) ASSERT_EQ(sliced_rows[k], rows[k + 1]);
      ASSERT_OK_AND_ASSIGN(auto decoded_slice, DecodeRowBatch(*sliced, batch->schema()));
      ASSERT_OK(CheckRecordBatchEquals(*slice, *decoded_slice));
    }
  }
}

TEST(UnsafeRowRoundTrip, EmptyBatchAndNoColumns) {
  RandomRows gen(7);
  ASSERT_OK_AND_ASSIGN(auto batch, gen.Batch(2, 0));
  ASSERT_OK_AND_ASSIGN(auto encoded, EncodeRowBatch(*batch));
  EXPECT_EQ(encoded->size(), 0);
  ASSERT_OK_AND_ASSIGN(auto decoded, DecodeRowBatch(*encoded, batch->schema()));
  EXPECT_EQ(decoded->num_rows(), 0);
  // A row of no fields is empty (size 0).
  ASSERT_OK_AND_ASSIGN(auto none,
                       DecodeRowBatch(std::string_view("\0\0\0\0\0\0\0\0", 8), schema({})));
  EXPECT_EQ(none->num_rows(), 2);
}

// ---------------------------------------------------------------------------
// A batch of every kind of value, nulls included.

RecordBatchPtr RichBatch(uint32_t seed, int rows) {
  RandomRows gen(seed);
  auto s = schema({field("i", int32()), field("s", utf8()), field("l", list(utf8())),
                   field("m", map(int64(), list(decimal128(30, 2)))),
                   field("st", struct_({field("d", float64()), field("b", binary()),
                                        field("n", struct_({field("x", int16())}))})),
                   field("dec", decimal128(38, 0))});
  std::vector<ArrayPtr> columns;
  for (const auto& f : s->fields()) {
    auto b = MakeBuilder(f->type());
    EXPECT_OK(b.status());
    for (int r = 0; r < rows; ++r) EXPECT_OK(gen.Append(b->get(), *f->type(), true));
    auto a = (*b)->Finish();
    EXPECT_OK(a.status());
    columns.push_back(*a);
  }
  auto batch = RecordBatch::Make(s, rows, columns);
  EXPECT_OK(batch.status());
  return *batch;
}

// ---------------------------------------------------------------------------
// In place: exact sizes, writing into caller memory, spans too small.

constexpr uint8_t kGarbage = 0xa5;

// RowSize, WriteRow (into garbage-filled memory with a guard after it) and
// AppendRow agree for every row of `batch`; EncodedRowBatchSize and
// EncodeRowBatchInto agree with EncodeRowBatch.
void CheckInPlace(const RecordBatchPtr& batch) {
  ASSERT_OK_AND_ASSIGN(auto writer, UnsafeRowWriter::Make(batch));
  for (int64_t r = 0; r < batch->num_rows(); ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    std::vector<uint8_t> appended = {1, 2, 3};
    ASSERT_OK_AND_ASSIGN(int64_t appended_size, writer->AppendRow(r, &appended));
    ASSERT_OK_AND_ASSIGN(int64_t size, writer->RowSize(r));
    ASSERT_EQ(size, appended_size);
    ASSERT_EQ(size % 8, 0);
    std::vector<uint8_t> memory(static_cast<size_t>(size) + 16, kGarbage);
    ASSERT_OK_AND_ASSIGN(
        int64_t written,
        writer->WriteRow(r, std::span<uint8_t>(memory.data(), static_cast<size_t>(size))));
    ASSERT_EQ(written, size);
    ASSERT_EQ(std::vector<uint8_t>(memory.begin(), memory.begin() + size),
              std::vector<uint8_t>(appended.begin() + 3, appended.end()));
    for (size_t k = static_cast<size_t>(size); k < memory.size(); ++k)
      ASSERT_EQ(memory[k], kGarbage);
  }
  ASSERT_OK_AND_ASSIGN(auto encoded, EncodeRowBatch(*batch));
  ASSERT_OK_AND_ASSIGN(int64_t batch_size, EncodedRowBatchSize(*batch));
  ASSERT_EQ(batch_size, encoded->size());
  // A larger span: the row batch at its start, the rest untouched.
  std::vector<uint8_t> memory(static_cast<size_t>(batch_size) + 24, kGarbage);
  ASSERT_OK_AND_ASSIGN(int64_t written, EncodeRowBatchInto(*batch, memory));
  ASSERT_EQ(written, batch_size);
  ASSERT_EQ(std::vector<uint8_t>(memory.begin(), memory.begin() + batch_size), ToVector(*encoded));
  for (size_t k = static_cast<size_t>(batch_size); k < memory.size(); ++k)
    ASSERT_EQ(memory[k], kGarbage);
}

TEST(UnsafeRowInPlace, SizesAndBytesMatchAppendRowForRandomSchemas) {
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RandomRows gen(seed);
    ASSERT_OK_AND_ASSIGN(auto batch, gen.Batch(/*max_depth=*/4, gen.Uniform(0, 12)));
    CheckInPlace(batch);
    if (batch->num_rows() >= 3) CheckInPlace(batch->Slice(1, batch->num_rows() - 2));
  }
  CheckInPlace(RichBatch(21, 9));
}

TEST(UnsafeRowInPlace, FixedWidthSchemasAndEmptyBatches) {
  // Every row the same size (the sizing shortcut), nulls included.
  auto ints = Build(int64(), [](ArrayBuilder* b) {
    ALKAID_RETURN_NOT_OK(AppendNum<int64_t>(b, 7));
    ALKAID_RETURN_NOT_OK(b->AppendNull());
    return AppendNum<int64_t>(b, -1);
  });
  auto batch = OneColumn(int64(), ints);
  ASSERT_OK_AND_ASSIGN(int64_t size, EncodedRowBatchSize(*batch));
  EXPECT_EQ(size, 3 * (4 + 16));
  CheckInPlace(batch);
  // No rows, and rows of no fields.
  CheckInPlace(batch->Slice(0, 0));
  ASSERT_OK_AND_ASSIGN(auto no_fields, RecordBatch::Make(schema({}), 3, std::vector<ArrayPtr>{}));
  ASSERT_OK_AND_ASSIGN(int64_t empty_rows, EncodedRowBatchSize(*no_fields));
  EXPECT_EQ(empty_rows, 12);
  CheckInPlace(no_fields);
  std::vector<uint8_t> none;
  ASSERT_OK_AND_ASSIGN(int64_t written, EncodeRowBatchInto(*batch->Slice(0, 0), none));
  EXPECT_EQ(written, 0);
}

TEST(UnsafeRowInPlace, SpanTooSmallIsCapacityErrorAndNothingPastItIsWritten) {
  auto batch = RichBatch(31, 4);
  ASSERT_OK_AND_ASSIGN(auto encoded, EncodeRowBatch(*batch));
  const int64_t size = encoded->size();
  const std::string sizes =
      "the row batch takes " + std::to_string(size) + " bytes, more than the ";
  for (int64_t capacity = 0; capacity < size; ++capacity) {
    SCOPED_TRACE("capacity " + std::to_string(capacity));
    std::vector<uint8_t> memory(static_cast<size_t>(size) + 8, kGarbage);
    auto result = EncodeRowBatchInto(
        *batch, std::span<uint8_t>(memory.data(), static_cast<size_t>(capacity)));
    ASSERT_FALSE(result.ok());
    ASSERT_EQ(result.status().code(), StatusCode::kCapacityError) << result.status().ToString();
    ASSERT_NE(result.status().message().find(sizes + std::to_string(capacity) + "-byte output"),
              std::string::npos)
        << result.status().ToString();
    for (size_t k = static_cast<size_t>(capacity); k < memory.size(); ++k)
      ASSERT_EQ(memory[k], kGarbage);
  }
  // One row at a time.
  ASSERT_OK_AND_ASSIGN(auto writer, UnsafeRowWriter::Make(batch));
  for (int64_t r = 0; r < batch->num_rows(); ++r) {
    ASSERT_OK_AND_ASSIGN(int64_t row_size, writer->RowSize(r));
    for (int64_t capacity = 0; capacity < row_size; ++capacity) {
      std::vector<uint8_t> memory(static_cast<size_t>(row_size) + 8, kGarbage);
      ASSERT_RAISES_WITH_MESSAGE(
          kCapacityError,
          "row " + std::to_string(r) + " takes " + std::to_string(row_size) +
              " bytes, more than the " + std::to_string(capacity) + "-byte output",
          writer->WriteRow(r, std::span<uint8_t>(memory.data(), static_cast<size_t>(capacity))));
      for (size_t k = static_cast<size_t>(capacity); k < memory.size(); ++k)
        ASSERT_EQ(memory[k], kGarbage);
    }
  }
}

TEST(UnsafeRowInPlace, BadRowsAndBadValues) {
  auto batch = RichBatch(41, 3);
  ASSERT_OK_AND_ASSIGN(auto writer, UnsafeRowWriter::Make(batch));
  std::vector<uint8_t> memory(4096);
  ASSERT_RAISES_WITH_MESSAGE(kIndexError, "row 3 is outside the 3-row batch", writer->RowSize(3));
  ASSERT_RAISES_WITH_MESSAGE(kIndexError, "row -1 is outside", writer->WriteRow(-1, memory));

  // A dictionary index past the dictionary: sizing a variable-width value
  // needs the value, so RowSize sees it too; AppendRow leaves `out` alone.
  auto make_bad = [](const TypePtr& value_type, auto fill) {
    auto dict_type = dictionary(int8(), value_type);
    auto array = Build(dict_type, fill);
    auto data = std::make_shared<ArrayData>(*array->data());
    data->buffers[1] = Buffer::FromString(std::string("\x00\x05", 2));
    return OneColumn(dict_type, MakeArray(data), "d");
  };
  auto bad_strings = make_bad(utf8(), [](ArrayBuilder* b) {
    auto* db = static_cast<DictionaryBuilder*>(b);
    ALKAID_RETURN_NOT_OK(db->Append("x"));
    return db->Append("yy");
  });
  ASSERT_OK_AND_ASSIGN(auto strings, UnsafeRowWriter::Make(bad_strings));
  ASSERT_OK(strings->RowSize(0).status());
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "dictionary index 5", strings->RowSize(1));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "dictionary index 5", strings->WriteRow(1, memory));
  std::vector<uint8_t> appended = {9};
  ASSERT_RAISES(kInvalid, strings->AppendRow(1, &appended));
  EXPECT_EQ(appended, std::vector<uint8_t>{9});
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "row 1", EncodedRowBatchSize(*bad_strings));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "row 1", EncodeRowBatchInto(*bad_strings, memory));
  ASSERT_RAISES(kInvalid, EncodeRowBatch(*bad_strings));

  // A fixed-width value takes its slot whatever it is: RowSize does not
  // look at it, WriteRow does.
  auto bad_ints = make_bad(int64(), [](ArrayBuilder* b) {
    auto* db = static_cast<DictionaryBuilder*>(b);
    ALKAID_RETURN_NOT_OK(db->Append(int64_t{1}));
    return db->Append(int64_t{2});
  });
  ASSERT_OK_AND_ASSIGN(auto ints, UnsafeRowWriter::Make(bad_ints));
  ASSERT_OK_AND_ASSIGN(int64_t int_row, ints->RowSize(1));
  EXPECT_EQ(int_row, 16);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "dictionary index 5", ints->WriteRow(1, memory));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "row 1", EncodeRowBatchInto(*bad_ints, memory));
}

// ---------------------------------------------------------------------------
// Corrupt input.

TEST(UnsafeRowCorrupt, TruncationAtEveryByte) {
  auto batch = RichBatch(11, 6);
  ASSERT_OK_AND_ASSIGN(auto encoded, EncodeRowBatch(*batch));
  ASSERT_OK_AND_ASSIGN(auto rows, SplitRowBatch(encoded->view()));
  std::vector<size_t> boundaries = {0};
  for (const auto& r : rows)
    boundaries.push_back(static_cast<size_t>(r.data() + r.size() - encoded->view().data()));
  size_t next_boundary = 0;
  for (size_t len = 0; len < static_cast<size_t>(encoded->size()); ++len) {
    auto result = DecodeRowBatch(encoded->view().substr(0, len), batch->schema());
    if (len == boundaries[next_boundary]) {
      ASSERT_OK(result.status());
      EXPECT_EQ((*result)->num_rows(), static_cast<int64_t>(next_boundary));
      ++next_boundary;
    } else {
      ASSERT_FALSE(result.ok()) << "truncated at " << len;
      EXPECT_NE(result.status().message().find("row "), std::string::npos);
    }
  }
  // A row cut short inside its own bytes (with a consistent prefix): an
  // error while the null bits and slots are incomplete; later, an error or
  // (when only unread bytes were cut, e.g. a null decimal's reserved 16) a
  // valid batch.
  std::string row(rows[0]);
  const size_t header = 8 + 8 * static_cast<size_t>(batch->num_columns());
  for (size_t len = 0; len < row.size(); len += 8) {
    auto result = DecodeRows({std::string_view(row).substr(0, len)}, batch->schema());
    if (len < header) {
      EXPECT_FALSE(result.ok()) << len;
    } else if (result.ok()) {
      EXPECT_OK(ValidateFull(**result));
    }
  }
}

TEST(UnsafeRowCorrupt, RandomByteFlipsNeverCrash) {
  auto batch = RichBatch(12, 5);
  ASSERT_OK_AND_ASSIGN(auto encoded, EncodeRowBatch(*batch));
  std::mt19937 rng(99);
  int failures = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bytes(encoded->view());
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      bytes[rng() % bytes.size()] ^= static_cast<char>(1u << (rng() % 8));
    }
    auto result = DecodeRowBatch(bytes, batch->schema());
    if (result.ok()) {
      ASSERT_OK(ValidateFull(**result));
    } else {
      ++failures;
    }
  }
  EXPECT_GT(failures, 0);
}

TEST(UnsafeRowCorrupt, SizesPointingOutside) {
  // One list<int64> row: patch the slot to point past the row.
  auto batch = OneColumn(list(int64()), Int64List({1, 2}), "xs");
  ASSERT_OK_AND_ASSIGN(auto encoded, EncodeRowBatch(*batch));
  std::string bytes(encoded->view());
  auto patch = [&](size_t at, uint64_t v) {
    std::string b = bytes;
    for (int k = 0; k < 8; ++k) b[at + k] = static_cast<char>(v >> (8 * k));
    return b;
  };
  const size_t slot = 4 + 8;
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "row 0, field 'xs', byte 12",
      DecodeRowBatch(patch(slot, (uint64_t{16} << 32) | 4096), batch->schema()));
  ASSERT_RAISES(kInvalid,
                DecodeRowBatch(patch(slot, (uint64_t{0xfffffff8} << 32) | 16), batch->schema()));
  ASSERT_RAISES(kInvalid, DecodeRowBatch(patch(slot, (uint64_t{8} << 32) | 16), batch->schema()));
  ASSERT_RAISES(kInvalid, DecodeRowBatch(patch(slot, (uint64_t{17} << 32) | 8), batch->schema()));
  // Element count far larger than the array.
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "element count",
                             DecodeRowBatch(patch(4 + 16, uint64_t{1} << 40), batch->schema()));
  ASSERT_RAISES(kInvalid, DecodeRowBatch(patch(4 + 16, ~uint64_t{0}), batch->schema()));
  // Row size prefix larger than the batch, negative, unaligned.
  std::string big = bytes;
  big[0] = 0x7f;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "runs past", DecodeRowBatch(big, batch->schema()));
  big[0] = static_cast<char>(0xff);
  ASSERT_RAISES(kInvalid, DecodeRowBatch(big, batch->schema()));
  std::string odd = bytes;
  odd[3] = static_cast<char>(odd[3] + 1);
  ASSERT_RAISES(kInvalid, DecodeRowBatch(odd, batch->schema()));
  // A non-null value for the null type, a null in a non-nullable field.
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "UNKNOWN",
      DecodeRowBatch(std::string_view("\0\0\0\x10\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 20),
                     schema({field("u", null())})));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "non-nullable",
      DecodeRowBatch(std::string_view("\0\0\0\x10\x01\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 20),
                     schema({field("i", int32(), false)})));
}

TEST(UnsafeRowCorrupt, ErrorsNameTheNestedPath) {
  auto type = struct_({field("inner", list(utf8()))});
  auto array = Build(type, [](ArrayBuilder* b) {
    auto* sb = static_cast<StructBuilder*>(b);
    auto* lb = static_cast<ListBuilder*>(sb->field_builder(0));
    ALKAID_RETURN_NOT_OK(sb->Append());
    ALKAID_RETURN_NOT_OK(lb->Append());
    ALKAID_RETURN_NOT_OK(static_cast<StringBuilder*>(lb->value_builder())->Append("ok"));
    return static_cast<StringBuilder*>(lb->value_builder())->Append("\xc3\xa9");
  });
  auto batch = OneColumn(type, array, "outer");
  ASSERT_OK_AND_ASSIGN(auto encoded, EncodeRowBatch(*batch));
  std::string bytes(encoded->view());
  // Corrupt the UTF-8 of the second string (its first byte becomes 0xff).
  const size_t at = bytes.rfind("\xc3\xa9");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = static_cast<char>(0xff);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "field 'outer.inner[1]', byte " + std::to_string(at),
                             DecodeRowBatch(bytes, batch->schema()));
}

// Writes small valid row batches of the fuzz target's schema as seeds when
// ALKAID_UNSAFE_ROW_CORPUS names a directory (fuzz/corpus/unsafe_row_fuzz).
TEST(UnsafeRowFuzzSeeds, WriteCorpusWhenAsked) {
  const char* dir = std::getenv("ALKAID_UNSAFE_ROW_CORPUS");
  if (dir == nullptr) GTEST_SKIP() << "ALKAID_UNSAFE_ROW_CORPUS not set";
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    auto batch = RichBatch(seed, static_cast<int>(seed));
    ASSERT_OK_AND_ASSIGN(auto encoded, EncodeRowBatch(*batch));
    std::ofstream out(std::string(dir) + "/seed" + std::to_string(seed) + ".rows",
                      std::ios::binary);
    out.write(reinterpret_cast<const char*>(encoded->data()), encoded->size());
    ASSERT_TRUE(out.good());
  }
}

}  // namespace
}  // namespace alkaid::format
