// Tests of the JSON integration reader/writer (format/src/json_integration_*.cc)
// against Arrow's gold files, plus the exact codecs and hostile inputs.

#include "alkaid/format/json_integration.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "alkaid/format/array.h"
#include "alkaid/format/compare.h"
#include "alkaid/format/extension.h"
#include "alkaid/format/validate.h"
#include "json_integration_internal.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

namespace fs = std::filesystem;

const char* kGoldCases[] = {
    "binary",
    "binary_no_batches",
    "binary_view",
    "binary_zerolength",
    "custom_metadata",
    "datetime",
    "decimal",
    "decimal256",
    "decimal32",
    "decimal64",
    "dictionary",
    "dictionary_unsigned",
    "duplicate_fieldnames",
    "duration",
    "extension",
    "interval",
    "interval_mdn",
    "large_binary",
    "list_view",
    "map",
    "map_non_canonical",
    "nested",
    "nested_dictionary",
    "nested_large_offsets",
    "null",
    "null_trivial",
    "primitive",
    "primitive_no_batches",
    "primitive_zerolength",
    "recursive_nested",
    "run_end_encoded",
    "union",
};

std::string GoldPath(const std::string& name) {
  return std::string(ALKAID_GOLD_DIR) + "/generated_" + name + ".json.gz";
}

Result<JsonIntegrationData> ReadGold(const std::string& name) {
  return ReadJsonIntegrationFile(GoldPath(name));
}

void ExpectSameBatches(const JsonIntegrationData& a, const JsonIntegrationData& b) {
  ASSERT_TRUE(a.schema->Equals(*b.schema, /*check_metadata=*/true))
      << a.schema->ToString() << "\nvs\n"
      << b.schema->ToString();
  ASSERT_EQ(a.batches.size(), b.batches.size());
  for (size_t i = 0; i < a.batches.size(); ++i) {
    EXPECT_OK(CheckRecordBatchEquals(*a.batches[i], *b.batches[i]));
    EXPECT_TRUE(a.batches[i]->Equals(*b.batches[i], true)) << "batch " << i;
  }
  EXPECT_EQ(a.dictionary_ids, b.dictionary_ids);
  ASSERT_EQ(a.dictionaries.size(), b.dictionaries.size());
  for (const auto& [id, values] : a.dictionaries) {
    auto it = b.dictionaries.find(id);
    ASSERT_NE(it, b.dictionaries.end()) << "dictionary " << id;
    EXPECT_OK(CheckArrayEquals(*MakeArray(values), *MakeArray(it->second)));
  }
}

// ---------------------------------------------------------------------------
// Gold files

class GoldTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldTest, ReadsValidatesAndRoundTrips) {
  ASSERT_OK_AND_ASSIGN(JsonIntegrationData data, ReadGold(GetParam()));
  ASSERT_NE(data.schema, nullptr);
  for (size_t b = 0; b < data.batches.size(); ++b) {
    ASSERT_OK(ValidateFull(*data.batches[b]));
    ASSERT_EQ(data.batches[b]->num_columns(), data.schema->num_fields());
  }
  for (const auto& [id, values] : data.dictionaries) ASSERT_OK(ValidateFull(*values));

  // JSON -> data -> JSON -> data gives the same data.
  ASSERT_OK_AND_ASSIGN(std::string text, WriteJsonIntegration(data));
  ASSERT_OK_AND_ASSIGN(JsonIntegrationData again, ReadJsonIntegration(text));
  ExpectSameBatches(data, again);

  // Ids assigned by the writer (schema pre-order) also round-trip the values.
  ASSERT_OK_AND_ASSIGN(std::string text2, WriteJsonIntegration(*data.schema, data.batches));
  ASSERT_OK_AND_ASSIGN(JsonIntegrationData again2, ReadJsonIntegration(text2));
  ASSERT_EQ(again2.batches.size(), data.batches.size());
  for (size_t b = 0; b < data.batches.size(); ++b) {
    EXPECT_OK(CheckRecordBatchEquals(*data.batches[b], *again2.batches[b]));
  }
}

INSTANTIATE_TEST_SUITE_P(AllCases, GoldTest, ::testing::ValuesIn(kGoldCases),
                         [](const auto& p) { return std::string(p.param); });

TEST(JsonGold, Primitive) {
  ASSERT_OK_AND_ASSIGN(auto data, ReadGold("primitive"));
  const Schema& s = *data.schema;
  ASSERT_EQ(s.num_fields(), 22);
  EXPECT_EQ(s.field(0)->name(), "bool_nullable");
  EXPECT_TRUE(s.field(0)->type()->Equals(boolean()));
  EXPECT_TRUE(s.field(0)->nullable());
  EXPECT_EQ(s.field(1)->name(), "bool_nonnullable");
  EXPECT_FALSE(s.field(1)->nullable());
  EXPECT_TRUE(s.field(8)->type()->Equals(int64()));
  EXPECT_TRUE(s.field(16)->type()->Equals(uint64()));
  EXPECT_TRUE(s.field(18)->type()->Equals(float32()));
  EXPECT_TRUE(s.field(21)->type()->Equals(float64()));
  ASSERT_EQ(data.batches.size(), 2u);
  const RecordBatch& b0 = *data.batches[0];
  EXPECT_EQ(b0.num_rows(), 17);

  // int8_nullable: VALIDITY [1,1,1,1,1,1,1,1,0,...], DATA [-128, 127, 27, ...]
  auto i8 = std::static_pointer_cast<Int8Array>(b0.column(2));
  EXPECT_EQ(i8->Value(0), -128);
  EXPECT_EQ(i8->Value(1), 127);
  EXPECT_EQ(i8->Value(2), 27);
  EXPECT_TRUE(i8->IsNull(8));
  EXPECT_EQ(i8->null_count(), 5);
  // bool_nullable VALIDITY [0,0,1,...], DATA [false,true,true,...]
  auto bools = std::static_pointer_cast<BooleanArray>(b0.column(0));
  EXPECT_TRUE(bools->IsNull(0));
  EXPECT_TRUE(bools->IsValid(2));
  EXPECT_TRUE(bools->Value(2));
  // int64 values are strings in the file.
  auto i64 = std::static_pointer_cast<Int64Array>(b0.column(8));
  EXPECT_EQ(i64->Value(0), -2147483648LL);
  EXPECT_EQ(i64->Value(1), 2147483647LL);
  EXPECT_EQ(i64->Value(2), 1756534929LL);
  auto u16 = std::static_pointer_cast<UInt16Array>(b0.column(13));
  EXPECT_EQ(u16->Value(1), 65535);
  // Non-nullable, all-valid columns have no bitmap.
  EXPECT_EQ(b0.column_data(1)->buffers[0], nullptr);
  EXPECT_EQ(b0.column_data(1)->null_count, 0);
  auto f32 = std::static_pointer_cast<FloatArray>(b0.column(18));
  EXPECT_EQ(f32->Value(0), 641.818f);
  auto f64 = std::static_pointer_cast<DoubleArray>(b0.column(20));
  EXPECT_EQ(f64->Value(1), -1746.99);
}

TEST(JsonGold, Decimal256) {
  ASSERT_OK_AND_ASSIGN(auto data, ReadGold("decimal256"));
  const auto& type = static_cast<const DecimalType&>(*data.schema->field(0)->type());
  EXPECT_EQ(type.id(), TypeId::kDecimal256);
  EXPECT_EQ(type.precision(), 37);
  EXPECT_EQ(type.scale(), 5);
  auto col = std::static_pointer_cast<FixedSizeBinaryArray>(data.batches[0]->column(0));
  EXPECT_EQ(internal::FormatDecimalInteger(col->GetValue(0), 256),
            "5991550892164182936399252686702397067");
  EXPECT_EQ(internal::FormatDecimalInteger(col->GetValue(1), 256),
            "-2031123033167196931846941783813867591");
  auto last = std::static_pointer_cast<FixedSizeBinaryArray>(data.batches[0]->column(32));
  EXPECT_EQ(internal::FormatDecimalInteger(last->GetValue(1), 256),
            "-134565972417683372816160712933150180745685285323410646200995451039655");
}

TEST(JsonGold, IntervalMonthDayNano) {
  ASSERT_OK_AND_ASSIGN(auto data, ReadGold("interval_mdn"));
  EXPECT_TRUE(data.schema->field(0)->type()->Equals(month_day_nano_interval()));
  const ArrayData& col = *data.batches[0]->column_data(0);
  const auto* v = col.GetValues<MonthDayNanoInterval>(1);
  EXPECT_EQ(v[0].months, 1493908993);
  EXPECT_EQ(v[0].days, -474729930);
  EXPECT_EQ(v[0].nanoseconds, 8820212087008106548LL);
  EXPECT_EQ(v[1].nanoseconds, -8743230752344178907LL);
  EXPECT_TRUE(col.IsNull(2));
}

TEST(JsonGold, Union) {
  ASSERT_OK_AND_ASSIGN(auto data, ReadGold("union"));
  const auto& sparse = static_cast<const UnionType&>(*data.schema->field(0)->type());
  EXPECT_EQ(sparse.mode(), UnionMode::kSparse);
  EXPECT_EQ(sparse.type_codes(), (std::vector<int8_t>{5, 7}));
  const auto& dense = static_cast<const UnionType&>(*data.schema->field(3)->type());
  EXPECT_EQ(dense.mode(), UnionMode::kDense);
  EXPECT_EQ(dense.type_codes(), (std::vector<int8_t>{42, 43, 44}));
  EXPECT_FALSE(data.schema->field(3)->nullable());

  const RecordBatch& b1 = *data.batches[1];
  EXPECT_EQ(b1.num_rows(), 11);
  auto u = std::static_pointer_cast<UnionArray>(b1.column(1));  // dense_1
  EXPECT_EQ(u->type_code(0), 10);
  EXPECT_EQ(u->type_code(3), 20);
  EXPECT_EQ(u->value_offset(3), 0);
  EXPECT_EQ(u->value_offset(10), 6);
  EXPECT_EQ(u->field(0)->length(), 7);
  auto s1 = std::static_pointer_cast<UnionArray>(b1.column(0));  // sparse_1
  EXPECT_EQ(s1->type_code(0), 7);
  EXPECT_EQ(s1->child_id(0), 1);
  // Unions have no validity bitmap of their own.
  EXPECT_EQ(b1.column_data(0)->buffers.size(), 1u);
  EXPECT_EQ(b1.column_data(1)->buffers.size(), 2u);
}

TEST(JsonGold, NestedDictionary) {
  ASSERT_OK_AND_ASSIGN(auto data, ReadGold("nested_dictionary"));
  // list_dict is dictionary id 1 whose values (list<str_dict>) hold
  // dictionary id 0; struct_dict is id 2 with two children using id 0.
  const std::map<FieldPath, int64_t> expected_ids = {
      {{0}, 1}, {{0, 0}, 0}, {{1}, 2}, {{1, 0}, 0}, {{1, 1}, 0}};
  EXPECT_EQ(data.dictionary_ids, expected_ids);
  ASSERT_EQ(data.dictionaries.size(), 3u);

  const auto& t0 = static_cast<const DictionaryType&>(*data.schema->field(0)->type());
  EXPECT_TRUE(t0.index_type()->Equals(int8()));
  EXPECT_EQ(t0.value_type()->id(), TypeId::kList);
  const auto& inner = static_cast<const ListType&>(*t0.value_type());
  EXPECT_EQ(inner.value_field()->name(), "str_dict");
  EXPECT_EQ(inner.value_type()->id(), TypeId::kDictionary);

  const RecordBatch& b0 = *data.batches[0];
  const ArrayData& col0 = *b0.column_data(0);
  ASSERT_NE(col0.dictionary, nullptr);
  EXPECT_EQ(col0.dictionary, data.dictionaries.at(1));
  EXPECT_EQ(col0.dictionary->length, 30);
  // The dictionary's list child is itself dictionary-encoded with id 0.
  const ArrayData& list_child = *col0.dictionary->child_data[0];
  EXPECT_EQ(list_child.dictionary, data.dictionaries.at(0));
  // struct_dict's two children share dictionary 0.
  const ArrayData& d2 = *data.dictionaries.at(2);
  EXPECT_EQ(d2.child_data[0]->dictionary, d2.child_data[1]->dictionary);

  // First index of list_dict is 22 (DATA [22, 21, ...]).
  auto dict_arr = std::static_pointer_cast<DictionaryArray>(b0.column(0));
  EXPECT_EQ(dict_arr->GetIndex(0), 22);
  EXPECT_TRUE(dict_arr->IsNull(7));
}

TEST(JsonGold, DictionaryAndMetadata) {
  ASSERT_OK_AND_ASSIGN(auto data, ReadGold("dictionary"));
  const std::map<FieldPath, int64_t> ids = {{{0}, 0}, {{1}, 1}, {{2}, 2}};
  EXPECT_EQ(data.dictionary_ids, ids);
  auto values = std::static_pointer_cast<StringArray>(MakeArray(data.dictionaries.at(0)));
  EXPECT_EQ(values->length(), 10);
  EXPECT_EQ(values->GetView(2), "jhak1rp");

  ASSERT_OK_AND_ASSIGN(auto md, ReadGold("custom_metadata"));
  ASSERT_NE(md.schema->metadata(), nullptr);
  EXPECT_EQ(md.schema->metadata()->Get("schema_custom_0"), "{}");
  EXPECT_EQ(md.schema->field(1)->metadata()->size(), 9u);
  // Unregistered extension: storage type plus the metadata.
  EXPECT_TRUE(md.schema->field(2)->type()->Equals(int8()));
  EXPECT_EQ(md.schema->field(2)->metadata()->Get("ARROW:extension:name"), "!nonexistent");
  // Child field metadata.
  const auto& list = static_cast<const ListType&>(*md.schema->field(3)->type());
  EXPECT_EQ(list.value_field()->metadata()->Get("odd_values"), "{}");
}

TEST(JsonGold, BinaryViewAndListView) {
  ASSERT_OK_AND_ASSIGN(auto data, ReadGold("binary_view"));
  const RecordBatch& b2 = *data.batches[2];
  auto bv = std::static_pointer_cast<BinaryViewArray>(b2.column(0));
  EXPECT_EQ(bv->num_data_buffers(), 3);
  EXPECT_EQ(bv->GetView(0), std::string("\x5f\xcd\xed", 3));
  ASSERT_OK_AND_ASSIGN(auto lv, ReadGold("list_view"));
  auto lva = std::static_pointer_cast<ListViewArray>(lv.batches[1]->column(0));
  EXPECT_EQ(lva->value_offset(0), 7);  // offsets kept as given
  EXPECT_EQ(lva->value_length(1), 3);
}

TEST(JsonGold, RegisteredExtensionBecomesExtensionType) {
  const std::string name = "arrow.uuid";
  const bool registered_here = !GetExtensionType(name);
  if (registered_here) {
    ASSERT_OK(RegisterExtensionType(name, [name](const TypePtr& storage, const std::string& s) {
      return Result<TypePtr>(extension(name, s, storage));
    }));
  }
  auto result = ReadGold("extension");
  if (registered_here) ASSERT_OK(UnregisterExtensionType(name));
  ASSERT_OK(result);
  const Field& f = *result->schema->field(0);
  ASSERT_EQ(f.type()->id(), TypeId::kExtension);
  EXPECT_TRUE(
      static_cast<const ExtensionType&>(*f.type()).storage_type()->Equals(fixed_size_binary(16)));
  // The extension keys are consumed; the writer puts them back.
  EXPECT_TRUE(f.metadata() == nullptr || !f.metadata()->Contains("ARROW:extension:name"));
  ASSERT_OK_AND_ASSIGN(std::string text, WriteJsonIntegration(*result));
  EXPECT_NE(text.find("\"ARROW:extension:name\",\"value\":\"arrow.uuid\""), std::string::npos);
  ASSERT_OK_AND_ASSIGN(auto plain, ReadJsonIntegration(text));
  if (registered_here) {
    EXPECT_TRUE(plain.schema->field(0)->type()->Equals(fixed_size_binary(16)));
  }
}

TEST(JsonGold, PlainAndGzipFilesReadTheSame) {
  const fs::path dir =
      fs::temp_directory_path() / ("alkaid_json_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ASSERT_OK_AND_ASSIGN(auto data, ReadGold("nested"));
  const std::string plain = (dir / "nested.json.gz").string();  // name says gz, content is not
  const std::string gz = (dir / "nested.json").string();        // and the other way round
  ASSERT_OK(WriteJsonIntegrationFile(plain, data, /*gzip=*/false));
  ASSERT_OK(WriteJsonIntegrationFile(gz, data, /*gzip=*/true, JsonWriteOptions{2}));
  ASSERT_OK_AND_ASSIGN(auto a, ReadJsonIntegrationFile(plain));
  ASSERT_OK_AND_ASSIGN(auto b, ReadJsonIntegrationFile(gz));
  ExpectSameBatches(a, b);
  ExpectSameBatches(data, a);
  fs::remove_all(dir);
  ASSERT_RAISES(kIOError, ReadJsonIntegrationFile((dir / "missing.json").string()));
}

// ---------------------------------------------------------------------------
// Writer details

TEST(JsonWriter, SlicesAreWrittenAsTheyRead) {
  ASSERT_OK_AND_ASSIGN(auto data, ReadGold("recursive_nested"));
  const RecordBatch& b = *data.batches[1];
  ASSERT_GT(b.num_rows(), 4);
  auto sliced = b.Slice(2, b.num_rows() - 3);
  ASSERT_OK_AND_ASSIGN(std::string text, WriteJsonIntegration(*data.schema, {sliced}));
  ASSERT_OK_AND_ASSIGN(auto back, ReadJsonIntegration(text));
  ASSERT_EQ(back.batches.size(), 1u);
  EXPECT_OK(CheckRecordBatchEquals(*sliced, *back.batches[0]));

  for (const char* name : {"run_end_encoded", "binary", "union", "map", "binary_view", "list_view",
                           "dictionary", "decimal256", "interval"}) {
    ASSERT_OK_AND_ASSIGN(auto d, ReadGold(name));
    for (const auto& batch : d.batches) {
      if (batch->num_rows() < 3) continue;
      auto s = batch->Slice(1, batch->num_rows() - 2);
      ASSERT_OK_AND_ASSIGN(std::string t, WriteJsonIntegration(*d.schema, {s}));
      ASSERT_OK_AND_ASSIGN(auto r, ReadJsonIntegration(t));
      const Status st = CheckRecordBatchEquals(*s, *r.batches[0]);
      EXPECT_TRUE(st.ok()) << name << ": " << st.ToString();
    }
  }
}

TEST(JsonWriter, SixtyFourBitValuesAreStrings) {
  ASSERT_OK_AND_ASSIGN(auto data, ReadGold("datetime"));
  ASSERT_OK_AND_ASSIGN(std::string text, WriteJsonIntegration(data));
  EXPECT_NE(text.find("\"-9223372036854775808\""), std::string::npos);
  EXPECT_NE(text.find("{\"name\":\"date\",\"unit\":\"DAY\"}"), std::string::npos);
  EXPECT_NE(text.find("\"timezone\":\"US/Eastern\""), std::string::npos);
  // Floats are written in their shortest form that reads back exactly.
  ASSERT_OK_AND_ASSIGN(auto prim, ReadGold("primitive"));
  ASSERT_OK_AND_ASSIGN(std::string ptext, WriteJsonIntegration(prim));
  EXPECT_NE(ptext.find("641.818,"), std::string::npos);
  EXPECT_EQ(ptext.find("641.8179"), std::string::npos);
}

TEST(JsonWriter, NonFiniteFloatsAndHalfFloats) {
  const char* text = R"({"schema": {"fields": [
      {"name": "h", "nullable": true, "type": {"name": "floatingpoint", "precision": "HALF"}},
      {"name": "d", "nullable": true, "type": {"name": "floatingpoint", "precision": "DOUBLE"}}]},
    "batches": [{"count": 4, "columns": [
      {"name": "h", "count": 4, "VALIDITY": [1, 1, 1, 1], "DATA": [1.5, 65504, 5.960464477539063e-08, "-Infinity"]},
      {"name": "d", "count": 4, "VALIDITY": [1, 1, 1, 0], "DATA": ["NaN", "Infinity", -0.0, null]}]}]})";
  ASSERT_OK_AND_ASSIGN(auto data, ReadJsonIntegration(text));
  const auto* h = data.batches[0]->column_data(0)->GetValues<uint16_t>(1);
  EXPECT_EQ(h[0], 0x3e00);
  EXPECT_EQ(h[1], 0x7bff);
  EXPECT_EQ(h[2], 0x0001);
  EXPECT_EQ(h[3], 0xfc00);
  const auto* d = data.batches[0]->column_data(1)->GetValues<double>(1);
  EXPECT_TRUE(std::isnan(d[0]));
  EXPECT_EQ(d[1], std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::signbit(d[2]));
  ASSERT_OK_AND_ASSIGN(std::string out, WriteJsonIntegration(data));
  EXPECT_NE(out.find("\"NaN\""), std::string::npos);
  EXPECT_NE(out.find("\"-Infinity\""), std::string::npos);
  // Shortest decimals that convert back to the same halves: 65500 -> 0x7bff
  // (65504), 6e-08 -> 0x0001 (2^-24).
  EXPECT_NE(out.find("[1.5,65500.0,6e-08,"), std::string::npos) << out;
  ASSERT_OK_AND_ASSIGN(auto back, ReadJsonIntegration(out));
  EXPECT_EQ(std::memcmp(back.batches[0]->column_data(0)->GetValues<uint16_t>(1), h, 8), 0);
  EXPECT_OK(CheckRecordBatchEquals(*data.batches[0], *back.batches[0], EqualOptions{true, false}));
}

TEST(JsonWriter, RefusesDifferentDictionariesForOneId) {
  ASSERT_OK_AND_ASSIGN(auto data, ReadGold("dictionary"));
  ASSERT_GE(data.batches.size(), 2u);
  // Give batch 1's first column a different dictionary of the same length.
  ASSERT_EQ(data.dictionaries.at(0)->length, 10);
  std::string offsets;
  for (int32_t i = 0; i <= 10; ++i) offsets.append(reinterpret_cast<const char*>(&i), 4);
  auto other = ArrayData::Make(
      utf8(), 10, {nullptr, Buffer::FromString(offsets), Buffer::FromString("abcdefghij")}, 0);
  auto col = std::make_shared<ArrayData>(*data.batches[1]->column_data(0));
  col->dictionary = other;
  std::vector<ArrayDataPtr> cols = data.batches[1]->columns();
  cols[0] = col;
  ASSERT_OK_AND_ASSIGN(auto b1, RecordBatch::Make(data.schema, data.batches[1]->num_rows(), cols));
  ASSERT_OK(ValidateFull(*b1));
  ASSERT_RAISES_WITH_MESSAGE(kNotImplemented, "one dictionary per id",
                             WriteJsonIntegration(*data.schema, {data.batches[0], b1}));
}

TEST(JsonWriter, InvalidUtf8IsAnErrorOnlyInValidSlots) {
  auto offsets = Buffer::FromString(std::string("\0\0\0\0\2\0\0\0\4\0\0\0", 12));
  auto chars = Buffer::FromString("\xff\xfe\xc3\xa9");
  auto validity = Buffer::FromString(std::string("\x02", 1));  // slot 0 null
  auto arr = ArrayData::Make(utf8(), 2, {validity, offsets, chars}, 1);
  auto sch = schema({field("s", utf8())});
  ASSERT_OK_AND_ASSIGN(auto batch, RecordBatch::Make(sch, 2, {arr}));
  ASSERT_OK(ValidateFull(*batch));
  ASSERT_OK_AND_ASSIGN(std::string text, WriteJsonIntegration(*sch, {batch}));
  ASSERT_OK_AND_ASSIGN(auto back, ReadJsonIntegration(text));
  EXPECT_OK(CheckRecordBatchEquals(*batch, *back.batches[0]));
  auto all_valid = ArrayData::Make(utf8(), 2, {nullptr, offsets, chars}, 0);
  ASSERT_OK_AND_ASSIGN(auto bad, RecordBatch::Make(sch, 2, {all_valid}));
  EXPECT_FALSE(WriteJsonIntegration(*sch, {bad}).ok());
}

// ---------------------------------------------------------------------------
// float16

TEST(Float16, ExactConversions) {
  using internal::HalfFromDouble;
  using internal::HalfFromFloat;
  using internal::HalfToDouble;
  using internal::HalfToFloat;
  EXPECT_EQ(HalfFromFloat(0.0f), 0x0000);
  EXPECT_EQ(HalfFromFloat(-0.0f), 0x8000);
  EXPECT_EQ(HalfFromFloat(1.0f), 0x3c00);
  EXPECT_EQ(HalfFromFloat(-2.0f), 0xc000);
  EXPECT_EQ(HalfFromFloat(65504.0f), 0x7bff);   // max finite
  EXPECT_EQ(HalfFromFloat(65519.99f), 0x7bff);  // just below the rounding boundary
  EXPECT_EQ(HalfFromFloat(65520.0f), 0x7c00);   // ties to even -> overflow to inf
  EXPECT_EQ(HalfFromFloat(1e10f), 0x7c00);
  EXPECT_EQ(HalfFromFloat(-std::numeric_limits<float>::infinity()), 0xfc00);
  const uint16_t nan = HalfFromFloat(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(HalfFromFloat(6.103515625e-05f), 0x0400);          // smallest normal
  EXPECT_EQ(HalfFromFloat(5.9604644775390625e-08f), 0x0001);   // smallest subnormal
  EXPECT_EQ(HalfFromFloat(2.98023223876953125e-08f), 0x0000);  // half of it: tie -> even (0)
  EXPECT_EQ(HalfFromDouble(2.98023223876953125e-08 * 1.0000001), 0x0001);  // just above the tie
  EXPECT_EQ(HalfFromFloat(8.940696716308594e-08f), 0x0002);  // 1.5 ulp: tie -> even (2)
  EXPECT_EQ(HalfFromFloat(6.097555160522461e-05f), 0x03ff);  // largest subnormal
  EXPECT_EQ(HalfFromDouble(1e-300), 0x0000);
  EXPECT_EQ(HalfFromDouble(-1e-300), 0x8000);
  EXPECT_EQ(HalfFromDouble(1.0 + 1.0 / 2048), 0x3c00);          // tie -> even
  EXPECT_EQ(HalfFromDouble(1.0 + 3.0 / 2048), 0x3c02);          // tie -> even (up)
  EXPECT_EQ(HalfFromDouble(1.0 + 1.0 / 2048 + 1e-12), 0x3c01);  // above the tie
  EXPECT_EQ(HalfToDouble(0x3555), 0.333251953125);
  EXPECT_EQ(HalfToDouble(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(HalfToDouble(0x8001), -std::ldexp(1.0, -24));
  EXPECT_EQ(HalfToDouble(0x7bff), 65504.0);
  EXPECT_TRUE(std::isinf(HalfToDouble(0x7c00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  // Every non-NaN half round-trips through float and double.
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto half = static_cast<uint16_t>(h);
    if ((half & 0x7c00) == 0x7c00 && (half & 0x3ff) != 0) {
      EXPECT_EQ(HalfFromDouble(HalfToDouble(half)), half);  // payload kept
      continue;
    }
    ASSERT_EQ(HalfFromFloat(HalfToFloat(half)), half) << h;
  }
}

// ---------------------------------------------------------------------------
// Big decimal integers

std::string RoundTripDecimal(const std::string& text, int bits) {
  uint8_t buf[32];
  Status st = internal::ParseDecimalInteger(text, bits, buf);
  if (!st.ok()) return "error: " + st.message();
  return internal::FormatDecimalInteger(buf, bits);
}

TEST(BigDecimal, ParseAndFormat) {
  const std::string max256 =
      "57896044618658097711785492504343953926634992332820282019728792003956564819967";
  const std::string min256 =
      "-57896044618658097711785492504343953926634992332820282019728792003956564819968";
  EXPECT_EQ(RoundTripDecimal(max256, 256), max256);
  EXPECT_EQ(RoundTripDecimal(min256, 256), min256);
  EXPECT_EQ(RoundTripDecimal("0", 256), "0");
  EXPECT_EQ(RoundTripDecimal("-0", 128), "0");
  EXPECT_EQ(RoundTripDecimal("+17", 32), "17");
  EXPECT_EQ(RoundTripDecimal("-1", 64), "-1");
  EXPECT_EQ(RoundTripDecimal("000123", 128), "123");
  EXPECT_EQ(RoundTripDecimal("170141183460469231731687303715884105727", 128),
            "170141183460469231731687303715884105727");
  EXPECT_EQ(RoundTripDecimal("-170141183460469231731687303715884105728", 128),
            "-170141183460469231731687303715884105728");
  EXPECT_EQ(RoundTripDecimal("-2147483648", 32), "-2147483648");
  EXPECT_EQ(RoundTripDecimal("1000000000", 64), "1000000000");  // chunk boundary zeros
  EXPECT_EQ(RoundTripDecimal("1000000000000000000000000001", 128), "1000000000000000000000000001");

  // Out of range by one, and malformed.
  EXPECT_NE(RoundTripDecimal("2147483648", 32).find("does not fit"), std::string::npos);
  EXPECT_NE(RoundTripDecimal("-2147483649", 32).find("does not fit"), std::string::npos);
  EXPECT_NE(
      RoundTripDecimal(
          "57896044618658097711785492504343953926634992332820282019728792003956564819968", 256)
          .find("does not fit"),
      std::string::npos);
  EXPECT_NE(RoundTripDecimal(std::string(100, '9'), 256).find("does not fit"), std::string::npos);
  EXPECT_NE(RoundTripDecimal("", 128).find("not a decimal"), std::string::npos);
  EXPECT_NE(RoundTripDecimal("-", 128).find("not a decimal"), std::string::npos);
  EXPECT_NE(RoundTripDecimal("1.5", 128).find("not a decimal"), std::string::npos);
  EXPECT_NE(RoundTripDecimal("12a", 128).find("not a decimal"), std::string::npos);

  // Byte layout: little-endian two's complement.
  uint8_t buf[16];
  ASSERT_OK(internal::ParseDecimalInteger("-2", 128, buf));
  EXPECT_EQ(buf[0], 0xfe);
  for (int i = 1; i < 16; ++i) EXPECT_EQ(buf[i], 0xff);
  ASSERT_OK(internal::ParseDecimalInteger("258", 128, buf));
  EXPECT_EQ(buf[0], 2);
  EXPECT_EQ(buf[1], 1);
}

TEST(Codecs, HexUtf8Gzip) {
  std::string out;
  ASSERT_OK(internal::HexDecode("00ff7fAb", &out));
  EXPECT_EQ(out, std::string("\x00\xff\x7f\xab", 4));
  EXPECT_EQ(internal::HexEncode(out), "00FF7FAB");
  ASSERT_RAISES(kInvalid, internal::HexDecode("abc", &out));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "position 2", internal::HexDecode("00zz", &out));

  EXPECT_TRUE(internal::IsValidUtf8("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));
  EXPECT_FALSE(internal::IsValidUtf8("\xc0\x80"));          // overlong
  EXPECT_FALSE(internal::IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(internal::IsValidUtf8("\xf4\x90\x80\x80"));  // > U+10FFFF
  int64_t at = -1;
  EXPECT_FALSE(internal::IsValidUtf8("ab\xe2\x82", &at));  // truncated
  EXPECT_EQ(at, 2);

  const std::string text(100000, 'x');
  ASSERT_OK_AND_ASSIGN(std::string gz, internal::GzipCompress(text));
  EXPECT_TRUE(internal::IsGzip(gz));
  EXPECT_LT(gz.size(), text.size());
  ASSERT_OK_AND_ASSIGN(std::string back, internal::GzipDecompress(gz, 1 << 20));
  EXPECT_EQ(back, text);
  ASSERT_OK_AND_ASSIGN(std::string twice, internal::GzipDecompress(gz + gz, 1 << 20));
  EXPECT_EQ(twice, text + text);
  ASSERT_RAISES(kCapacityError, internal::GzipDecompress(gz, 1000));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "truncated",
                             internal::GzipDecompress(gz.substr(0, gz.size() / 2), 1 << 20));
  std::string corrupt = gz;
  corrupt[12] = static_cast<char>(corrupt[12] ^ 0x55);
  corrupt[13] = static_cast<char>(corrupt[13] ^ 0x55);
  EXPECT_FALSE(internal::GzipDecompress(corrupt, 1 << 20).ok());
}

// ---------------------------------------------------------------------------
// Hostile and malformed input

std::string OneColumn(const std::string& type, const std::string& column, int64_t count = 3,
                      const std::string& extra_field = "") {
  return R"({"schema": {"fields": [{"name": "x", "nullable": true, "type": )" + type + extra_field +
         R"(, "children": []}]}, "batches": [{"count": )" + std::to_string(count) +
         R"(, "columns": [)" + column + "]}]}";
}

TEST(JsonHostile, MalformedDocuments) {
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "malformed JSON", ReadJsonIntegration("{\"schema\": "));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "malformed JSON", ReadJsonIntegration(""));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "must be an object", ReadJsonIntegration("[1, 2]"));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "missing \"schema\"", ReadJsonIntegration("{}"));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "missing \"fields\"",
                             ReadJsonIntegration(R"({"schema": {}, "batches": []})"));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "missing \"batches\"",
                             ReadJsonIntegration(R"({"schema": {"fields": []}})"));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "unknown type name 'int33'",
                             ReadJsonIntegration(OneColumn(R"({"name": "int33"})", "{}")));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "bitWidth must be 8, 16, 32 or 64",
      ReadJsonIntegration(OneColumn(R"({"name": "int", "isSigned": true, "bitWidth": 12})", "{}")));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "schema, column 'x': missing \"type\"",
      ReadJsonIntegration(R"({"schema": {"fields": [{"name": "x"}]}, "batches": []})"));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "takes 1 children, got 0",
                             ReadJsonIntegration(OneColumn(R"({"name": "list"})", "{}")));
  ASSERT_RAISES(kInvalid, ReadJsonIntegration(R"({"schema": {"fields": [{"name": 5,
      "type": {"name": "null"}}]}, "batches": []})"));
  // Decimal precision that does not fit the width.
  ASSERT_RAISES(kInvalid,
                ReadJsonIntegration(OneColumn(
                    R"({"name": "decimal", "precision": 40, "scale": 0, "bitWidth": 128})", "{}")));
}

TEST(JsonHostile, CountsThatDoNotMatch) {
  const std::string int32 = R"({"name": "int", "isSigned": true, "bitWidth": 32})";
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "batch 0, column 'x': DATA has 3 values, count is 5",
      ReadJsonIntegration(OneColumn(
          int32, R"({"name": "x", "count": 5, "VALIDITY": [1,1,1,1,1], "DATA": [1, 2, 3]})", 5)));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "VALIDITY has 2 values, count is 3",
      ReadJsonIntegration(
          OneColumn(int32, R"({"name": "x", "count": 3, "VALIDITY": [1,1], "DATA": [1, 2, 3]})")));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "batch's count is 4",
      ReadJsonIntegration(OneColumn(
          int32, R"({"name": "x", "count": 3, "VALIDITY": [1,1,1], "DATA": [1, 2, 3]})", 4)));
  // A huge count with no data behind it: an error, not a huge allocation.
  SystemMemoryPool pool(1 << 20);
  JsonReadOptions options;
  options.pool = &pool;
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "DATA has 1 values, count is 1000000000000000",
      ReadJsonIntegration(
          OneColumn(int32, R"({"name": "x", "count": 1000000000000000, "DATA": [1]})",
                    1000000000000000),
          options));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "OFFSET has 2 values, count is 1000000001",
      ReadJsonIntegration(OneColumn(R"({"name": "utf8"})",
                                    R"({"name": "x", "count": 1000000000, "OFFSET": [0, 1],
                                        "DATA": ["a"]})",
                                    1000000000),
                          options));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "negative count",
      ReadJsonIntegration(OneColumn(int32, R"({"name": "x", "count": -1, "DATA": []})", -1)));
  // A huge byteWidth is checked against each value before allocating.
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "byteWidth is 2000000000",
      ReadJsonIntegration(OneColumn(R"({"name": "fixedsizebinary", "byteWidth": 2000000000})",
                                    R"({"name": "x", "count": 2, "DATA": ["", ""]})", 2),
                          options));
  // A leading offset gap larger than the input.
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "OFFSET[0] is 1000000000",
      ReadJsonIntegration(OneColumn(R"({"name": "binary"})",
                                    R"({"name": "x", "count": 1, "OFFSET": [1000000000, 1000000001],
                                        "DATA": ["00"]})",
                                    1),
                          options));
  EXPECT_LT(pool.max_memory(), 1 << 20);
}

TEST(JsonHostile, WrongValueTypes) {
  const std::string int32 = R"({"name": "int", "isSigned": true, "bitWidth": 32})";
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "batch 0, column 'x': DATA[1]: expected an integer, got object",
      ReadJsonIntegration(OneColumn(int32, R"({"name": "x", "count": 3, "DATA": [1, {}, 3]})")));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "DATA[2]: 4294967296 is out of range",
      ReadJsonIntegration(
          OneColumn(int32, R"({"name": "x", "count": 3, "DATA": [1, 2, 4294967296]})")));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "DATA[0]: '12x' is not a 64-bit integer",
      ReadJsonIntegration(OneColumn(R"({"name": "int", "isSigned": true, "bitWidth": 64})",
                                    R"({"name": "x", "count": 1, "DATA": ["12x"]})", 1)));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "VALIDITY[0]: expected true/false or 0/1, got 2",
      ReadJsonIntegration(
          OneColumn(int32, R"({"name": "x", "count": 1, "VALIDITY": [2], "DATA": [1]})", 1)));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "DATA[0] has 2 bytes but OFFSET says 3",
      ReadJsonIntegration(
          OneColumn(R"({"name": "binary"})",
                    R"({"name": "x", "count": 1, "OFFSET": [0, 3], "DATA": ["ABCD"]})", 1)));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "OFFSET[2] (1) is less than OFFSET[1] (2)",
      ReadJsonIntegration(OneColumn(R"({"name": "utf8"})",
                                    R"({"name": "x", "count": 2, "OFFSET": [0, 2, 1],
                                        "DATA": ["ab", "c"]})",
                                    2)));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "invalid hex character",
      ReadJsonIntegration(
          OneColumn(R"({"name": "binary"})",
                    R"({"name": "x", "count": 1, "OFFSET": [0, 1], "DATA": ["GG"]})", 1)));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "does not fit in 32 bits",
      ReadJsonIntegration(
          OneColumn(R"({"name": "decimal", "precision": 9, "scale": 0, "bitWidth": 32})",
                    R"({"name": "x", "count": 1, "DATA": ["99999999999"]})", 1)));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "VIEWS[0]: INLINED has 2 bytes, SIZE is 3",
      ReadJsonIntegration(
          OneColumn(R"({"name": "binaryview"})",
                    R"({"name": "x", "count": 1, "VIEWS": [{"SIZE": 3, "INLINED": "ABCD"}],
                                        "VARIADIC_DATA_BUFFERS": []})",
                    1)));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "column is named \"y\", the field 'x'",
      ReadJsonIntegration(OneColumn(int32, R"({"name": "y", "count": 1, "DATA": [1]})", 1)));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "DATA[0]: missing \"milliseconds\"",
      ReadJsonIntegration(OneColumn(R"({"name": "interval", "unit": "DAY_TIME"})",
                                    R"({"name": "x", "count": 1, "DATA": [{"days": 1}]})", 1)));
}

TEST(JsonHostile, InvalidLayoutIsCaughtByValidation) {
  // Offsets past the child: the reader builds what the JSON says, and
  // validation (on by default) refuses it.
  const std::string list = R"({"name": "list"})";
  const std::string text = R"({"schema": {"fields": [{"name": "l", "nullable": true,
      "type": {"name": "list"}, "children": [{"name": "item", "nullable": true,
      "type": {"name": "int", "isSigned": true, "bitWidth": 8}, "children": []}]}]},
    "batches": [{"count": 1, "columns": [{"name": "l", "count": 1, "VALIDITY": [1],
      "OFFSET": [0, 5], "children": [{"name": "item", "count": 2, "VALIDITY": [1, 1],
      "DATA": [1, 2]}]}]}]})";
  EXPECT_FALSE(ReadJsonIntegration(text).ok());
  JsonReadOptions no_validate;
  no_validate.validate = false;
  ASSERT_OK_AND_ASSIGN(auto data, ReadJsonIntegration(text, no_validate));
  EXPECT_FALSE(ValidateFull(*data.batches[0]).ok());
}

TEST(JsonHostile, Dictionaries) {
  const std::string field =
      R"({"name": "x", "nullable": true, "type": {"name": "utf8"}, "children": [],
          "dictionary": {"id": 7, "indexType": {"name": "int", "isSigned": true, "bitWidth": 8}}})";
  const std::string batch =
      R"("batches": [{"count": 1, "columns": [{"name": "x", "count": 1, "DATA": [0]}]}])";
  ASSERT_RAISES_WITH_MESSAGE(
      kKeyError, "dictionary id 7 has no entry",
      ReadJsonIntegration(R"({"schema": {"fields": [)" + field + "]}, " + batch + "}"));
  const std::string dict =
      R"({"id": 7, "data": {"count": 1, "columns": [{"name": "DICT7", "count": 1,
          "OFFSET": [0, 1], "DATA": ["a"]}]}})";
  ASSERT_OK_AND_ASSIGN(
      auto ok, ReadJsonIntegration(R"({"schema": {"fields": [)" + field +
                                   R"(]}, "dictionaries": [)" + dict + "], " + batch + "}"));
  EXPECT_EQ(ok.batches[0]->column_data(0)->dictionary, ok.dictionaries.at(7));
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "appears more than once",
      ReadJsonIntegration(R"({"schema": {"fields": [)" + field + R"(]}, "dictionaries": [)" + dict +
                          "," + dict + "], " + batch + "}"));
  ASSERT_RAISES_WITH_MESSAGE(
      kKeyError, "dictionary id 3 is not used by any field",
      ReadJsonIntegration(R"({"schema": {"fields": [)" + field +
                          R"(]}, "dictionaries": [{"id": 3, "data": {}}], )" + batch + "}"));
  // A dictionary whose values contain a field with the same id.
  const std::string cyclic = R"({"schema": {"fields": [{"name": "x", "nullable": true,
      "type": {"name": "list"}, "children": [{"name": "item", "nullable": true,
        "type": {"name": "utf8"}, "children": [],
        "dictionary": {"id": 0, "indexType": {"name": "int", "isSigned": true, "bitWidth": 8}}}],
      "dictionary": {"id": 0, "indexType": {"name": "int", "isSigned": true, "bitWidth": 8}}}]},
    "dictionaries": [{"id": 0, "data": {"count": 0, "columns": [{"name": "D", "count": 0,
      "OFFSET": [0], "children": [{"name": "item", "count": 0, "DATA": []}]}]}}],
    "batches": []})";
  EXPECT_FALSE(ReadJsonIntegration(cyclic).ok());
}

TEST(JsonHostile, DeepNestingIsRefused) {
  std::string type = R"({"name": "int", "isSigned": true, "bitWidth": 8})";
  std::string f = R"({"name": "a", "type": )" + type + "}";
  for (int i = 0; i < 100; ++i) {
    f = R"({"name": "a", "type": {"name": "struct"}, "children": [)" + f + "]}";
  }
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "nested deeper",
      ReadJsonIntegration(R"({"schema": {"fields": [)" + f + R"(]}, "batches": []})"));
  // Deep JSON that is not a schema at all.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_FALSE(ReadJsonIntegration(deep).ok());
}

}  // namespace
}  // namespace alkaid::format
