// IPC both ways with a running Arrow C++ (the libarrow that pyarrow's wheel
// ships):
// - every gold case read by Alkaid and written again by Alkaid's stream and
//   file writers (no compression, LZ4 frame, ZSTD; files with the ARROW1
//   magic, and with ALKAID1 once the magic is swapped) is read by Arrow C++'s
//   IPC readers equal to Arrow C++'s reading of the original file;
// - streams and files Arrow C++ writes with what the gold files lack
//   (string and binary views, list views, run-end encoded, delta
//   dictionaries, LZ4 and ZSTD bodies) are read by Alkaid equal to Arrow
//   C++'s own reading (compared in Arrow C++, after the C Data Interface).

// Arrow's ABI header first: Alkaid's c_data.h must coexist with it.
#include <arrow/api.h>
#include <arrow/c/abi.h>
#include <arrow/c/bridge.h>
#include <arrow/io/file.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/reader.h>
#include <arrow/ipc/writer.h>
#include <arrow/json/from_string.h>
#include <arrow/util/compression.h>

#include "alkaid/format/c_data.h"

#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/ipc/writer.h"
#include "arrow_test_util.h"
#include "test_util.h"

namespace {

namespace af = alkaid::format;
namespace aipc = alkaid::format::ipc;

using ArrowBatches = std::vector<std::shared_ptr<arrow::RecordBatch>>;
struct ArrowReading {
  std::shared_ptr<arrow::Schema> schema;
  ArrowBatches batches;
};

using alkaid::interop_testing::GoldCases;
using alkaid::interop_testing::GoldFile;

arrow::Result<ArrowReading> ArrowReadFile(std::shared_ptr<arrow::io::RandomAccessFile> file) {
  ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchFileReader::Open(file));
  ArrowReading out{reader->schema(), {}};
  for (int i = 0; i < reader->num_record_batches(); ++i) {
    ARROW_ASSIGN_OR_RAISE(auto b, reader->ReadRecordBatch(i));
    ARROW_RETURN_NOT_OK(b->ValidateFull());
    out.batches.push_back(std::move(b));
  }
  return out;
}

arrow::Result<ArrowReading> ArrowReadStream(std::shared_ptr<arrow::Buffer> bytes) {
  auto input = std::make_shared<arrow::io::BufferReader>(std::move(bytes));
  ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchStreamReader::Open(input));
  ArrowReading out{reader->schema(), {}};
  while (true) {
    ARROW_ASSIGN_OR_RAISE(auto b, reader->Next());
    if (b == nullptr) break;
    ARROW_RETURN_NOT_OK(b->ValidateFull());
    out.batches.push_back(std::move(b));
  }
  return out;
}

// Alkaid's bytes as an Arrow buffer (a copy: the test's bytes must outlive
// nothing of Alkaid's).
std::shared_ptr<arrow::Buffer> ToArrow(const af::Buffer& bytes) {
  return arrow::Buffer::FromString(
      std::string(reinterpret_cast<const char*>(bytes.data()), static_cast<size_t>(bytes.size())));
}

std::shared_ptr<af::Buffer> ToAlkaid(const arrow::Buffer& bytes) {
  auto owner = std::make_shared<std::string>(bytes.ToString());
  return std::make_shared<af::Buffer>(reinterpret_cast<const uint8_t*>(owner->data()),
                                      static_cast<int64_t>(owner->size()), owner);
}

void ExpectSameReading(const ArrowReading& got, const ArrowReading& expected) {
  EXPECT_TRUE(got.schema->Equals(*expected.schema, /*check_metadata=*/true))
      << got.schema->ToString(true) << "\nvs\n"
      << expected.schema->ToString(true);
  ASSERT_EQ(got.batches.size(), expected.batches.size());
  for (size_t i = 0; i < got.batches.size(); ++i) {
    EXPECT_TRUE(got.batches[i]->Equals(*expected.batches[i], /*check_metadata=*/true))
        << "batch " << i << ":\n"
        << got.batches[i]->ToString() << "\nvs\n"
        << expected.batches[i]->ToString();
  }
}

struct Codec {
  const char* name;
  aipc::CompressionType alkaid;
  arrow::Compression::type arrow;
};
constexpr Codec kCodecs[] = {
    {"none", aipc::CompressionType::kNone, arrow::Compression::UNCOMPRESSED},
    {"lz4", aipc::CompressionType::kLz4Frame, arrow::Compression::LZ4_FRAME},
    {"zstd", aipc::CompressionType::kZstd, arrow::Compression::ZSTD},
};

// What Alkaid's writers produce from `batches`.
alkaid::Result<std::shared_ptr<af::Buffer>> AlkaidWrite(
    const af::SchemaPtr& schema, const std::vector<af::RecordBatchPtr>& batches, bool file,
    aipc::IpcWriteOptions options) {
  // Extension types as Arrow spells their metadata keys.
  options.extension_metadata_namespace = "ARROW";
  ALKAID_ASSIGN_OR_RAISE(auto sink, aipc::BufferOutputStream::Create());
  std::unique_ptr<aipc::RecordBatchWriter> writer;
  if (file) {
    ALKAID_ASSIGN_OR_RAISE(writer, aipc::MakeFileWriter(sink.get(), schema, options));
  } else {
    ALKAID_ASSIGN_OR_RAISE(writer, aipc::MakeStreamWriter(sink.get(), schema, options));
  }
  for (const auto& b : batches) ALKAID_RETURN_NOT_OK(writer->WriteRecordBatch(*b));
  ALKAID_RETURN_NOT_OK(writer->Close());
  return sink->Finish();
}

// An ALKAID1 file with Arrow's magic instead: "ALKAID1\0" leads, "ALKAID1"
// ends; Arrow's are "ARROW1\0\0" and "ARROW1". Nothing else differs.
std::string SwapMagic(std::string file) {
  if (file.size() < 16 || file.compare(0, 8, std::string("ALKAID1\0", 8)) != 0 ||
      file.compare(file.size() - 7, 7, "ALKAID1") != 0) {
    return "";
  }
  file.replace(0, 8, std::string("ARROW1\0\0", 8));
  file.replace(file.size() - 7, 7, "ARROW1");
  return file;
}

class GoldIpcTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldIpcTest, AlkaidWritesArrowReads) {
  ASSERT_ARROW_OK_AND_ASSIGN(auto original, arrow::io::ReadableFile::Open(GoldFile(GetParam())));
  ASSERT_ARROW_OK_AND_ASSIGN(auto expected, ArrowReadFile(original));
  ASSERT_OK_AND_ASSIGN(auto file, aipc::MemoryMappedFile::Open(GoldFile(GetParam())));
  ASSERT_OK_AND_ASSIGN(auto reader, aipc::RecordBatchFileReader::Open(file));
  std::vector<af::RecordBatchPtr> ours;
  for (int i = 0; i < reader->num_record_batches(); ++i) {
    ASSERT_OK_AND_ASSIGN(auto b, reader->ReadRecordBatch(i));
    ours.push_back(b);
  }
  for (const Codec& codec : kCodecs) {
    SCOPED_TRACE(codec.name);
    aipc::IpcWriteOptions options;
    options.compression = codec.alkaid;
    {
      SCOPED_TRACE("stream");
      ASSERT_OK_AND_ASSIGN(auto bytes, AlkaidWrite(reader->schema(), ours, false, options));
      ASSERT_ARROW_OK_AND_ASSIGN(auto got, ArrowReadStream(ToArrow(*bytes)));
      ExpectSameReading(got, expected);
    }
    for (auto magic : {aipc::FileMagic::kArrow, aipc::FileMagic::kAlkaid}) {
      const bool arrow_magic = magic == aipc::FileMagic::kArrow;
      SCOPED_TRACE(arrow_magic ? "file ARROW1" : "file ALKAID1, magic swapped");
      options.magic = magic;
      ASSERT_OK_AND_ASSIGN(auto bytes, AlkaidWrite(reader->schema(), ours, true, options));
      std::string text(reinterpret_cast<const char*>(bytes->data()),
                       static_cast<size_t>(bytes->size()));
      if (!arrow_magic) {
        // Arrow C++ refuses the ALKAID1 magic itself ...
        auto refused = ArrowReadFile(
            std::make_shared<arrow::io::BufferReader>(arrow::Buffer::FromString(text)));
        EXPECT_FALSE(refused.ok());
        // ... and reads the rest unchanged.
        text = SwapMagic(std::move(text));
        ASSERT_FALSE(text.empty());
      }
      ASSERT_ARROW_OK_AND_ASSIGN(auto got, ArrowReadFile(std::make_shared<arrow::io::BufferReader>(
                                               arrow::Buffer::FromString(std::move(text)))));
      ExpectSameReading(got, expected);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Gold, GoldIpcTest, ::testing::ValuesIn(GoldCases()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(GoldIpcCases, AllPresent) { EXPECT_EQ(GoldCases().size(), 32u); }

// ---------------------------------------------------------------------------
// Arrow C++ writes, Alkaid reads.

// Alkaid's reading of a stream or file, handed to Arrow C++ through the C
// Data Interface (zero-copy), to be compared there.
alkaid::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> AlkaidReadToArrow(
    const arrow::Buffer& bytes, bool file, std::shared_ptr<arrow::Schema>* schema) {
  auto buffer = ToAlkaid(bytes);
  auto input = std::make_shared<aipc::BufferReader>(buffer);
  std::vector<af::RecordBatchPtr> ours;
  af::SchemaPtr our_schema;
  aipc::IpcReadOptions options;
  options.validate_full = true;
  if (file) {
    ALKAID_ASSIGN_OR_RAISE(auto reader, aipc::RecordBatchFileReader::Open(input, options));
    our_schema = reader->schema();
    for (int i = 0; i < reader->num_record_batches(); ++i) {
      ALKAID_ASSIGN_OR_RAISE(auto b, reader->ReadRecordBatch(i));
      ours.push_back(b);
    }
  } else {
    ALKAID_ASSIGN_OR_RAISE(auto reader, aipc::RecordBatchStreamReader::Open(input, options));
    our_schema = reader->schema();
    ALKAID_ASSIGN_OR_RAISE(ours, reader->ReadAll());
  }
  ArrowSchema c_schema;
  ALKAID_RETURN_NOT_OK(af::ExportSchema(*our_schema, &c_schema));
  auto imported_schema = arrow::ImportSchema(&c_schema);
  if (!imported_schema.ok()) return alkaid::Status::Invalid(imported_schema.status().ToString());
  *schema = *imported_schema;
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  for (const auto& b : ours) {
    ArrowArray c_array;
    ALKAID_RETURN_NOT_OK(af::ExportRecordBatch(*b, &c_array));
    auto imported = arrow::ImportRecordBatch(&c_array, *schema);
    if (!imported.ok()) return alkaid::Status::Invalid(imported.status().ToString());
    out.push_back(*imported);
  }
  return out;
}

arrow::Result<std::shared_ptr<arrow::Array>> Json(const std::shared_ptr<arrow::DataType>& type,
                                                  const std::string& json) {
  return arrow::json::ArrayFromJSONString(type, json);
}

// Batches of the layouts the gold files lack, two of them so that the
// dictionary grows (a delta) from the first to the second.
arrow::Result<std::pair<std::shared_ptr<arrow::Schema>, ArrowBatches>> ArrowMade() {
  const std::string long_a(40, 'a');
  std::vector<std::shared_ptr<arrow::Field>> fields;
  std::vector<std::vector<std::shared_ptr<arrow::Array>>> columns(2);
  auto add = [&](const std::string& name, std::shared_ptr<arrow::Array> first,
                 std::shared_ptr<arrow::Array> second) {
    fields.push_back(arrow::field(name, first->type()));
    columns[0].push_back(std::move(first));
    columns[1].push_back(std::move(second));
  };
  ARROW_ASSIGN_OR_RAISE(auto sv1,
                        Json(arrow::utf8_view(), R"(["short", null, ")" + long_a + R"("])"));
  ARROW_ASSIGN_OR_RAISE(auto sv2, Json(arrow::utf8_view(), R"(["", ")" + long_a + R"(b", "x"])"));
  add("string_view", sv1, sv2);
  ARROW_ASSIGN_OR_RAISE(auto bv1,
                        Json(arrow::binary_view(), R"([")" + long_a + R"(", "b", null])"));
  ARROW_ASSIGN_OR_RAISE(auto bv2, Json(arrow::binary_view(), R"([null, null, "tiny"])"));
  add("binary_view", bv1, bv2);
  ARROW_ASSIGN_OR_RAISE(auto lv1, Json(arrow::list_view(arrow::int32()), "[[1, 2], null, []]"));
  ARROW_ASSIGN_OR_RAISE(auto lv2, Json(arrow::list_view(arrow::int32()), "[[3], [4, 5, 6], null]"));
  add("list_view", lv1, lv2);
  ARROW_ASSIGN_OR_RAISE(
      auto llv1, Json(arrow::large_list_view(arrow::utf8()), R"([["a"], null, ["bb", "c"]])"));
  ARROW_ASSIGN_OR_RAISE(auto llv2,
                        Json(arrow::large_list_view(arrow::utf8()), R"([[], ["d"], ["e"]])"));
  add("large_list_view", llv1, llv2);
  ARROW_ASSIGN_OR_RAISE(auto ends1, Json(arrow::int32(), "[2, 3]"));
  ARROW_ASSIGN_OR_RAISE(auto vals1, Json(arrow::utf8(), R"(["x", null])"));
  ARROW_ASSIGN_OR_RAISE(auto ree1, arrow::RunEndEncodedArray::Make(3, ends1, vals1));
  ARROW_ASSIGN_OR_RAISE(auto ends2, Json(arrow::int32(), "[1, 3]"));
  ARROW_ASSIGN_OR_RAISE(auto vals2, Json(arrow::utf8(), R"(["y", "z"])"));
  ARROW_ASSIGN_OR_RAISE(auto ree2, arrow::RunEndEncodedArray::Make(3, ends2, vals2));
  add("ree", ree1, ree2);
  // The second dictionary extends the first: a delta.
  auto dict_type = arrow::dictionary(arrow::int8(), arrow::utf8());
  ARROW_ASSIGN_OR_RAISE(
      auto d1, arrow::json::DictArrayFromJSONString(dict_type, "[0, 1, 0]", R"(["red", "green"])"));
  ARROW_ASSIGN_OR_RAISE(auto d2, arrow::json::DictArrayFromJSONString(
                                     dict_type, "[2, null, 1]", R"(["red", "green", "blue"])"));
  add("dict", d1, d2);
  auto schema = arrow::schema(fields);
  ArrowBatches batches;
  for (auto& cols : columns) batches.push_back(arrow::RecordBatch::Make(schema, 3, cols));
  return std::make_pair(schema, batches);
}

arrow::Result<std::shared_ptr<arrow::Buffer>> ArrowWrite(
    const std::shared_ptr<arrow::Schema>& schema, const ArrowBatches& batches, bool file,
    arrow::Compression::type compression, int64_t* deltas) {
  auto options = arrow::ipc::IpcWriteOptions::Defaults();
  options.emit_dictionary_deltas = true;
  if (compression != arrow::Compression::UNCOMPRESSED) {
    ARROW_ASSIGN_OR_RAISE(options.codec, arrow::util::Codec::Create(compression));
  }
  ARROW_ASSIGN_OR_RAISE(auto sink, arrow::io::BufferOutputStream::Create());
  std::shared_ptr<arrow::ipc::RecordBatchWriter> writer;
  if (file) {
    ARROW_ASSIGN_OR_RAISE(writer, arrow::ipc::MakeFileWriter(sink, schema, options));
  } else {
    ARROW_ASSIGN_OR_RAISE(writer, arrow::ipc::MakeStreamWriter(sink, schema, options));
  }
  for (const auto& b : batches) ARROW_RETURN_NOT_OK(writer->WriteRecordBatch(*b));
  ARROW_RETURN_NOT_OK(writer->Close());
  *deltas = writer->stats().num_dictionary_deltas;
  return sink->Finish();
}

TEST(ArrowWritesTest, AlkaidReadsWhatTheGoldFilesLack) {
  ASSERT_ARROW_OK_AND_ASSIGN(auto made, ArrowMade());
  for (const Codec& codec : kCodecs) {
    for (bool file : {false, true}) {
      SCOPED_TRACE(std::string(codec.name) + (file ? " file" : " stream"));
      int64_t deltas = 0;
      auto written = ArrowWrite(made.first, made.second, file, codec.arrow, &deltas);
      ASSERT_ARROW_OK(written.status());
      EXPECT_EQ(deltas, 1);  // the dictionary grew: a delta, not a replacement
      ArrowReading expected;
      if (file) {
        ASSERT_ARROW_OK_AND_ASSIGN(
            expected, ArrowReadFile(std::make_shared<arrow::io::BufferReader>(*written)));
      } else {
        ASSERT_ARROW_OK_AND_ASSIGN(expected, ArrowReadStream(*written));
      }
      ArrowReading got;
      ASSERT_OK_AND_ASSIGN(got.batches, AlkaidReadToArrow(**written, file, &got.schema));
      for (const auto& b : got.batches) ASSERT_ARROW_OK(b->ValidateFull());
      ExpectSameReading(got, expected);
    }
  }
}

}  // namespace
