// Alkaid against a running Arrow C++ (the libarrow that pyarrow's wheel
// ships), through the C Data and C Stream Interfaces, both ways:
// - every gold case read by Alkaid, exported, imported by Arrow C++:
//   ValidateFull passes and it equals Arrow C++'s own reading of the file;
// - every gold case read by Arrow C++, exported, imported by Alkaid:
//   ValidateFull passes and it equals Alkaid's own reading;
// - arrays Arrow C++ builds of types and layouts the gold files lack go to
//   Alkaid and back to Arrow C++ unchanged, zero-copy;
// - streams both ways.

// Arrow's ABI header first: Alkaid's c_data.h must coexist with it.
#include <arrow/api.h>
#include <arrow/c/abi.h>
#include <arrow/c/bridge.h>
#include <arrow/extension/uuid.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/json/from_string.h>

#include "alkaid/format/c_data.h"

#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>
#include <string>
#include <vector>

#include "alkaid/format/compare.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/validate.h"
#include "arrow_test_util.h"
#include "test_util.h"

namespace {

namespace af = alkaid::format;

using alkaid::interop_testing::GoldCases;
using alkaid::interop_testing::GoldFile;

// Arrow C++'s own reading of a gold file.
arrow::Result<std::pair<std::shared_ptr<arrow::Schema>, arrow::RecordBatchVector>> ArrowRead(
    const std::string& name) {
  ARROW_ASSIGN_OR_RAISE(auto file, arrow::io::ReadableFile::Open(GoldFile(name)));
  ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchFileReader::Open(file));
  arrow::RecordBatchVector batches;
  for (int i = 0; i < reader->num_record_batches(); ++i) {
    ARROW_ASSIGN_OR_RAISE(auto b, reader->ReadRecordBatch(i));
    batches.push_back(std::move(b));
  }
  return std::make_pair(reader->schema(), std::move(batches));
}

// Alkaid's own reading of the same file.
alkaid::Result<std::pair<af::SchemaPtr, std::vector<af::RecordBatchPtr>>> AlkaidRead(
    const std::string& name) {
  ALKAID_ASSIGN_OR_RAISE(auto file, af::ipc::MemoryMappedFile::Open(GoldFile(name)));
  ALKAID_ASSIGN_OR_RAISE(auto reader, af::ipc::RecordBatchFileReader::Open(file));
  std::vector<af::RecordBatchPtr> batches;
  for (int i = 0; i < reader->num_record_batches(); ++i) {
    ALKAID_ASSIGN_OR_RAISE(auto b, reader->ReadRecordBatch(i));
    batches.push_back(std::move(b));
  }
  return std::make_pair(reader->schema(), std::move(batches));
}

class GoldInteropTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldInteropTest, AlkaidExportsArrowImports) {
  ASSERT_ARROW_OK_AND_ASSIGN(auto expected, ArrowRead(GetParam()));
  ASSERT_OK_AND_ASSIGN(auto ours, AlkaidRead(GetParam()));
  ASSERT_EQ(expected.second.size(), ours.second.size());

  ArrowSchema c_schema;
  ASSERT_OK(af::ExportSchema(*ours.first, &c_schema));
  ASSERT_ARROW_OK_AND_ASSIGN(auto schema, arrow::ImportSchema(&c_schema));
  EXPECT_TRUE(schema->Equals(*expected.first, /*check_metadata=*/true))
      << schema->ToString() << "\nvs Arrow's\n"
      << expected.first->ToString();

  for (size_t i = 0; i < ours.second.size(); ++i) {
    SCOPED_TRACE("batch " + std::to_string(i));
    ArrowArray c_array;
    ASSERT_OK(af::ExportRecordBatch(*ours.second[i], &c_array, &c_schema));
    ASSERT_ARROW_OK_AND_ASSIGN(auto batch, arrow::ImportRecordBatch(&c_array, &c_schema));
    ASSERT_ARROW_OK(batch->ValidateFull());
    EXPECT_TRUE(batch->Equals(*expected.second[i], /*check_metadata=*/true))
        << batch->ToString() << "\nvs Arrow's\n"
        << expected.second[i]->ToString();
    // Zero copy: Arrow's first column buffer is Alkaid's.
    if (batch->num_columns() > 0 && ours.second[i]->num_columns() > 0) {
      const auto& theirs = batch->column_data(0)->buffers;
      const auto& mine = ours.second[i]->column_data(0)->buffers;
      for (size_t k = 1; k < std::min(theirs.size(), mine.size()); ++k) {
        if (mine[k] != nullptr && mine[k]->size() > 0 && theirs[k] != nullptr) {
          EXPECT_EQ(theirs[k]->data(), mine[k]->data()) << "buffer " << k;
          break;
        }
      }
    }
    // A slice, with its offsets.
    const int64_t n = ours.second[i]->num_rows();
    if (n >= 2) {
      ASSERT_OK(af::ExportRecordBatch(*ours.second[i]->Slice(1, n - 1), &c_array, &c_schema));
      ASSERT_ARROW_OK_AND_ASSIGN(auto sliced, arrow::ImportRecordBatch(&c_array, &c_schema));
      ASSERT_ARROW_OK(sliced->ValidateFull());
      EXPECT_TRUE(sliced->Equals(*expected.second[i]->Slice(1, n - 1)));
    }
  }
}

TEST_P(GoldInteropTest, ArrowExportsAlkaidImports) {
  ASSERT_ARROW_OK_AND_ASSIGN(auto theirs, ArrowRead(GetParam()));
  ASSERT_OK_AND_ASSIGN(auto expected, AlkaidRead(GetParam()));
  ASSERT_EQ(theirs.second.size(), expected.second.size());

  ArrowSchema c_schema;
  ASSERT_ARROW_OK(arrow::ExportSchema(*theirs.first, &c_schema));
  ASSERT_OK_AND_ASSIGN(auto schema, af::ImportSchema(&c_schema));
  EXPECT_TRUE(schema->Equals(*expected.first, /*check_metadata=*/true))
      << schema->ToString() << "\nvs Alkaid's\n"
      << expected.first->ToString();

  for (size_t i = 0; i < theirs.second.size(); ++i) {
    SCOPED_TRACE("batch " + std::to_string(i));
    ArrowArray c_array;
    ASSERT_ARROW_OK(arrow::ExportRecordBatch(*theirs.second[i], &c_array, &c_schema));
    ASSERT_OK_AND_ASSIGN(auto batch, af::ImportRecordBatch(&c_array, &c_schema));
    ASSERT_OK(af::ValidateFull(*batch));
    EXPECT_TRUE(batch->schema()->Equals(*expected.first, /*check_metadata=*/true));
    ASSERT_OK(af::CheckRecordBatchEquals(*expected.second[i], *batch));
    const int64_t n = theirs.second[i]->num_rows();
    if (n >= 2) {
      ASSERT_ARROW_OK(
          arrow::ExportRecordBatch(*theirs.second[i]->Slice(1, n - 1), &c_array, &c_schema));
      ASSERT_OK_AND_ASSIGN(auto sliced, af::ImportRecordBatch(&c_array, &c_schema));
      ASSERT_OK(af::ValidateFull(*sliced));
      ASSERT_OK(af::CheckRecordBatchEquals(*expected.second[i]->Slice(1, n - 1), *sliced));
    }
  }
}

TEST_P(GoldInteropTest, StreamsBothWays) {
  ASSERT_OK_AND_ASSIGN(auto ours, AlkaidRead(GetParam()));
  ASSERT_ARROW_OK_AND_ASSIGN(auto theirs, ArrowRead(GetParam()));

  // Alkaid -> Arrow C++.
  ArrowArrayStream stream;
  ASSERT_OK(af::ExportRecordBatchStream(ours.first, ours.second, &stream));
  ASSERT_ARROW_OK_AND_ASSIGN(auto reader, arrow::ImportRecordBatchReader(&stream));
  ASSERT_ARROW_OK_AND_ASSIGN(auto got, reader->ToRecordBatches());
  ASSERT_EQ(got.size(), theirs.second.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_ARROW_OK(got[i]->ValidateFull());
    EXPECT_TRUE(got[i]->Equals(*theirs.second[i]));
  }

  // Arrow C++ -> Alkaid.
  ASSERT_ARROW_OK_AND_ASSIGN(auto arrow_reader,
                             arrow::RecordBatchReader::Make(theirs.second, theirs.first));
  ASSERT_ARROW_OK(arrow::ExportRecordBatchReader(arrow_reader, &stream));
  ASSERT_OK_AND_ASSIGN(auto alkaid_reader, af::CStreamReader::Import(&stream));
  ASSERT_OK_AND_ASSIGN(auto back, alkaid_reader->ReadAll());
  ASSERT_EQ(back.size(), ours.second.size());
  for (size_t i = 0; i < back.size(); ++i) {
    ASSERT_OK(af::CheckRecordBatchEquals(*ours.second[i], *back[i]));
  }
}

INSTANTIATE_TEST_SUITE_P(Arrow21, GoldInteropTest, ::testing::ValuesIn(GoldCases()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(GoldInteropCases, AllPresent) { EXPECT_EQ(GoldCases().size(), 32u); }

// --- Layouts the gold files lack, built by Arrow C++ ---------------------------

struct Case {
  std::shared_ptr<arrow::DataType> type;
  std::string json;  // for run-end encoded types: the values, with run_ends_json
  std::string run_ends_json;
};

// Arrow's JSON reader does not make run-end encoded arrays: build them.
arrow::Result<std::shared_ptr<arrow::Array>> MakeArrowArray(const Case& c) {
  if (c.type->id() != arrow::Type::RUN_END_ENCODED) {
    return arrow::json::ArrayFromJSONString(c.type, c.json);
  }
  const auto& ree = static_cast<const arrow::RunEndEncodedType&>(*c.type);
  ARROW_ASSIGN_OR_RAISE(auto ends,
                        arrow::json::ArrayFromJSONString(ree.run_end_type(), c.run_ends_json));
  ARROW_ASSIGN_OR_RAISE(auto values, arrow::json::ArrayFromJSONString(ree.value_type(), c.json));
  ARROW_ASSIGN_OR_RAISE(auto last, ends->GetScalar(ends->length() - 1));
  ARROW_ASSIGN_OR_RAISE(auto length64, last->CastTo(arrow::int64()));
  const int64_t length = std::static_pointer_cast<arrow::Int64Scalar>(length64)->value;
  return arrow::RunEndEncodedArray::Make(length, ends, values);
}

std::vector<Case> ArrowMadeCases() {
  using arrow::field;
  return {
      {arrow::utf8_view(),
       R"(["short", null, "a value longer than twelve bytes", "", "another long string value"])"},
      {arrow::binary_view(), R"(["AAAA", null, "a binary value longer than twelve"])"},
      {arrow::list_view(arrow::int32()), R"([[1, 2], null, [], [3, 4, 5]])"},
      {arrow::large_list_view(arrow::utf8()), R"([["a"], null, ["bb", "ccc"]])"},
      {arrow::run_end_encoded(arrow::int16(), arrow::utf8()), R"(["a", null, "b"])", "[2, 3, 6]"},
      {arrow::run_end_encoded(arrow::int64(), arrow::float64()), R"([1.5, 2.5])", "[2, 3]"},
      {arrow::dense_union({field("i", arrow::int32()), field("s", arrow::utf8())}, {5, 2}),
       R"([[5, 1], [2, "x"], [5, null], [2, "yz"]])"},
      {arrow::sparse_union({field("i", arrow::int32()), field("s", arrow::utf8())}, {7, 3}),
       R"([[7, 1], [3, "x"], [7, null]])"},
      {arrow::map(arrow::utf8(), arrow::int32(), /*keys_sorted=*/true),
       R"([[["a", 1], ["b", null]], null, []])"},
      {arrow::fixed_size_list(arrow::int16(), 2), R"([[1, 2], null, [3, null]])"},
      {arrow::decimal32(7, 2), R"(["12.34", null, "-0.01"])"},
      {arrow::decimal64(15, 3), R"(["12.345", null])"},
      {arrow::decimal256(60, 4), R"(["1.0001", null])"},
      {arrow::timestamp(arrow::TimeUnit::NANO, "America/New_York"), R"([1, null, 3])"},
      {arrow::month_day_nano_interval(), R"([[1, 2, 3], null])"},
      {arrow::large_binary(), R"(["abc", null, ""])"},
      {arrow::null(), R"([null, null])"},
      {arrow::struct_({field("a", arrow::int8(), false), field("b", arrow::boolean())}),
       R"([{"a": 1, "b": true}, null, {"a": 3, "b": null}])"},
      {arrow::fixed_size_binary(3), R"(["abc", null, "xyz"])"},
      {arrow::float16(), R"([1.5, null, -2])"},
  };
}

// Arrow -> Alkaid (validate, compare with Arrow's values through a second
// export) -> Arrow, equal to the original; zero copies on the way.
void ThereAndBack(const std::shared_ptr<arrow::RecordBatch>& original) {
  ArrowArray c_array;
  ArrowSchema c_schema;
  ASSERT_ARROW_OK(arrow::ExportRecordBatch(*original, &c_array, &c_schema));
  ASSERT_OK_AND_ASSIGN(auto ours, af::ImportRecordBatch(&c_array, &c_schema));
  ASSERT_OK(af::ValidateFull(*ours));
  ASSERT_OK(af::ExportRecordBatch(*ours, &c_array, &c_schema));
  ASSERT_ARROW_OK_AND_ASSIGN(auto back, arrow::ImportRecordBatch(&c_array, &c_schema));
  ASSERT_ARROW_OK(back->ValidateFull());
  EXPECT_TRUE(back->Equals(*original, /*check_metadata=*/true)) << back->ToString() << "\nvs\n"
                                                                << original->ToString();
  EXPECT_TRUE(back->schema()->Equals(*original->schema(), /*check_metadata=*/true))
      << back->schema()->ToString() << "\nvs\n"
      << original->schema()->ToString();
  for (int c = 0; c < original->num_columns(); ++c) {
    const auto& a = original->column_data(c)->buffers;
    const auto& b = back->column_data(c)->buffers;
    for (size_t k = 0; k < std::min(a.size(), b.size()); ++k) {
      if (a[k] != nullptr && a[k]->size() > 0 && b[k] != nullptr) {
        EXPECT_EQ(a[k]->data(), b[k]->data()) << "column " << c << " buffer " << k;
      }
    }
  }
}

TEST(ArrowMadeTest, EveryLayoutThereAndBack) {
  for (const Case& c : ArrowMadeCases()) {
    SCOPED_TRACE(c.type->ToString());
    ASSERT_ARROW_OK_AND_ASSIGN(auto array, MakeArrowArray(c));
    auto batch = arrow::RecordBatch::Make(arrow::schema({arrow::field("x", c.type)}),
                                          array->length(), {array});
    ThereAndBack(batch);
    if (array->length() >= 2) ThereAndBack(batch->Slice(1));
  }
}

TEST(ArrowMadeTest, DictionariesAndCanonicalExtension) {
  auto dict_type = arrow::dictionary(arrow::int16(), arrow::utf8(), /*ordered=*/true);
  ASSERT_ARROW_OK_AND_ASSIGN(auto dict, arrow::json::DictArrayFromJSONString(
                                            dict_type, "[0, 1, null, 1, 0]", R"(["lo", "hi"])"));
  ASSERT_ARROW_OK_AND_ASSIGN(
      auto uuid_storage,
      arrow::json::ArrayFromJSONString(arrow::fixed_size_binary(16),
                                       R"(["0123456789abcdef", null, "fedcba9876543210",
                                           "0000000000000000", "1111111111111111"])"));
  auto uuid = arrow::ExtensionType::WrapArray(arrow::extension::uuid(), uuid_storage);
  auto md = arrow::key_value_metadata({"origin"}, {"arrow"});
  auto batch = arrow::RecordBatch::Make(
      arrow::schema({arrow::field("d", dict_type, false), arrow::field("u", uuid->type())}, md), 5,
      {dict, uuid});
  ThereAndBack(batch);
  ThereAndBack(batch->Slice(2));

  // Alkaid does not know arrow.uuid: it keeps the storage and the metadata.
  ArrowArray c_array;
  ArrowSchema c_schema;
  ASSERT_ARROW_OK(arrow::ExportRecordBatch(*batch, &c_array, &c_schema));
  ASSERT_OK_AND_ASSIGN(auto ours, af::ImportRecordBatch(&c_array, &c_schema));
  const auto& f = ours->schema()->field(1);
  EXPECT_TRUE(f->type()->Equals(*af::fixed_size_binary(16)));
  ASSERT_NE(f->metadata(), nullptr);
  EXPECT_EQ(f->metadata()->Get("ARROW:extension:name"), "arrow.uuid");
  EXPECT_TRUE(ours->schema()->field(0)->type()->Equals(
      *af::dictionary(af::int16(), af::utf8(), /*ordered=*/true)));
}

TEST(ArrowMadeTest, ArrowReleasesWhenAlkaidLetsGo) {
  // Arrow C++ keeps the exported memory alive until Alkaid's last reference
  // goes: watch the buffer's use count.
  ASSERT_ARROW_OK_AND_ASSIGN(auto array,
                             arrow::json::ArrayFromJSONString(arrow::int64(), "[1, 2, 3]"));
  std::weak_ptr<arrow::Buffer> watch = array->data()->buffers[1];
  ArrowArray c_array;
  ArrowSchema c_schema;
  ASSERT_ARROW_OK(arrow::ExportArray(*array, &c_array, &c_schema));
  array.reset();
  EXPECT_FALSE(watch.expired());
  ASSERT_OK_AND_ASSIGN(auto ours, af::ImportArray(&c_array, &c_schema));
  auto slice = ours->Slice(1);
  ours.reset();
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(std::static_pointer_cast<af::Int64Array>(slice)->Value(1), 3);
  slice.reset();
  EXPECT_TRUE(watch.expired());
}

}  // namespace
