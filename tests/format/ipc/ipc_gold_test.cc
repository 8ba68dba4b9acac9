// Every Arrow C++ 21.0.0 gold file (stream and file format) opens, decodes
// with full validation, holds the values of its JSON gold file (read by the
// JSON integration reader: every value compared), and the stream and file
// versions agree. Truncated and bit-flipped versions fail cleanly.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "alkaid/format/compare.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/json_integration.h"
#include "alkaid/format/validate.h"
#include "ipc_test_util.h"
#include "test_util.h"

namespace alkaid::format::ipc {
namespace {

using testing::GoldCases;
using testing::GoldPath;

Result<std::vector<RecordBatchPtr>> ReadStream(std::shared_ptr<Buffer> data, SchemaPtr* schema,
                                               const IpcReadOptions& options = {}) {
  return testing::ReadStreamBuffer(std::move(data), schema, options);
}

Result<std::vector<RecordBatchPtr>> ReadFile(std::shared_ptr<RandomAccessFile> file,
                                             SchemaPtr* schema,
                                             const IpcReadOptions& options = {}) {
  ALKAID_ASSIGN_OR_RAISE(auto r, RecordBatchFileReader::Open(std::move(file), options));
  *schema = r->schema();
  std::vector<RecordBatchPtr> out;
  for (int i = 0; i < r->num_record_batches(); ++i) {
    ALKAID_ASSIGN_OR_RAISE(auto b, r->ReadRecordBatch(i));
    out.push_back(std::move(b));
  }
  return out;
}

class GoldTest : public ::testing::TestWithParam<std::string> {};

TEST(GoldCasesTest, AllPresent) { EXPECT_EQ(GoldCases().size(), 32u); }

TEST_P(GoldTest, StreamAndFileDecodeAndAgree) {
  const std::string name = GetParam();
  IpcReadOptions options;
  options.validate_full = true;

  ASSERT_OK_AND_ASSIGN(auto stream_bytes, ReadWholeFile(GoldPath(name, ".stream")));
  SchemaPtr stream_schema;
  ASSERT_OK_AND_ASSIGN(auto stream_batches, ReadStream(stream_bytes, &stream_schema, options));

  ASSERT_OK_AND_ASSIGN(auto mapped, MemoryMappedFile::Open(GoldPath(name, ".arrow_file")));
  SchemaPtr file_schema;
  ASSERT_OK_AND_ASSIGN(auto file_batches, ReadFile(mapped, &file_schema, options));
  ASSERT_OK_AND_ASSIGN(auto reader, RecordBatchFileReader::Open(mapped));
  EXPECT_EQ(reader->magic(), FileMagic::kArrow);

  // Arrow 21 writes canonical map child names ("entries", "key", "value")
  // into the stream's schema message but the original names into the file
  // footer of generated_map_non_canonical; map child names do not take part
  // in type equality, so both still compare equal.
  ASSERT_TRUE(stream_schema->Equals(*file_schema, /*check_metadata=*/true))
      << stream_schema->ToString() << "\nvs\n"
      << file_schema->ToString();
  // The values: what Arrow's JSON gold file says (the readers above
  // validated fully already; this reads every value).
  ASSERT_OK_AND_ASSIGN(auto json, ReadJsonIntegrationFile(GoldPath(name, ".json.gz")));
  ASSERT_EQ(json.batches.size(), stream_batches.size());
  ASSERT_EQ(stream_batches.size(), file_batches.size());
  for (size_t i = 0; i < stream_batches.size(); ++i) {
    SCOPED_TRACE("batch " + std::to_string(i));
    ASSERT_OK(CheckRecordBatchEquals(*json.batches[i], *stream_batches[i]));
    ASSERT_OK(CheckRecordBatchEquals(*stream_batches[i], *file_batches[i]));
  }

  // The same stream decoded incrementally, one byte at a time.
  auto listener = std::make_shared<CollectListener>();
  StreamDecoder decoder(listener, options);
  for (int64_t i = 0; i < stream_bytes->size(); ++i) {
    ASSERT_OK(decoder.Consume(stream_bytes->data() + i, 1));
  }
  ASSERT_OK(decoder.Finish());
  EXPECT_TRUE(listener->ended());
  ASSERT_EQ(listener->batches().size(), stream_batches.size());
  for (size_t i = 0; i < stream_batches.size(); ++i) {
    ASSERT_OK(CheckRecordBatchEquals(*stream_batches[i], *listener->batches()[i]));
  }
}

TEST_P(GoldTest, FileReadingIsZeroCopy) {
  const std::string name = GetParam();
  ASSERT_OK_AND_ASSIGN(auto mapped, MemoryMappedFile::Open(GoldPath(name, ".arrow_file")));
  ASSERT_OK_AND_ASSIGN(auto reader, RecordBatchFileReader::Open(mapped));
  const Buffer& whole = *mapped->buffer();
  std::function<void(const ArrayData&)> check = [&](const ArrayData& d) {
    for (const auto& b : d.buffers) {
      if (b != nullptr && b->size() > 0) {
        EXPECT_TRUE(whole.Contains(b->data(), b->size())) << name << ": buffer copied";
      }
    }
    for (const auto& c : d.child_data) check(*c);
  };
  for (int i = 0; i < reader->num_record_batches(); ++i) {
    ASSERT_OK_AND_ASSIGN(auto batch, reader->ReadRecordBatch(i));
    for (const auto& col : batch->columns()) check(*col);
  }
}

// Every truncation of the stream fails cleanly or yields a prefix of it.
TEST_P(GoldTest, TruncatedStreamsFailCleanly) {
  const std::string name = GetParam();
  ASSERT_OK_AND_ASSIGN(auto bytes, ReadWholeFile(GoldPath(name, ".stream")));
  const int64_t step = std::max<int64_t>(1, bytes->size() / 200);
  for (int64_t n = 0; n < bytes->size(); n += step) {
    SchemaPtr schema;
    auto r = ReadStream(SliceBuffer(bytes, 0, n), &schema);
    if (r.ok()) {
      for (const auto& b : *r) ASSERT_OK(Validate(*b));
    }
    auto listener = std::make_shared<CollectListener>();
    StreamDecoder decoder(listener);
    Status st = decoder.Consume(SliceBuffer(bytes, 0, n));
    if (st.ok()) st = decoder.Finish();
    // Truncation before the EOS marker must be reported.
    if (n < bytes->size() - 8) {
      EXPECT_FALSE(st.ok() && listener->ended()) << name << " cut at " << n;
    }
  }
}

TEST_P(GoldTest, TruncatedFilesFailCleanly) {
  const std::string name = GetParam();
  ASSERT_OK_AND_ASSIGN(auto bytes, ReadWholeFile(GoldPath(name, ".arrow_file")));
  const int64_t step = std::max<int64_t>(1, bytes->size() / 200);
  for (int64_t n = 0; n < bytes->size(); n += step) {
    SchemaPtr schema;
    auto r = ReadFile(std::make_shared<BufferReader>(SliceBuffer(bytes, 0, n)), &schema);
    EXPECT_FALSE(r.ok()) << name << " cut at " << n;
  }
}

// Flipping bytes anywhere yields an error or batches that still validate.
TEST_P(GoldTest, BitFlipsFailCleanly) {
  const std::string name = GetParam();
  for (const char* ext : {".stream", ".arrow_file"}) {
    ASSERT_OK_AND_ASSIGN(auto original, ReadWholeFile(GoldPath(name, ext)));
    const int64_t step = std::max<int64_t>(1, original->size() / 150);
    for (int64_t pos = 0; pos < original->size(); pos += step) {
      for (uint8_t mask : {0x01, 0x80, 0xFF}) {
        std::string copy(original->view());
        copy[static_cast<size_t>(pos)] = static_cast<char>(copy[static_cast<size_t>(pos)] ^ mask);
        auto buf = Buffer::FromString(std::move(copy));
        SchemaPtr schema;
        Result<std::vector<RecordBatchPtr>> r =
            std::string(ext) == ".stream" ? ReadStream(buf, &schema)
                                          : ReadFile(std::make_shared<BufferReader>(buf), &schema);
        if (r.ok()) {
          SCOPED_TRACE(name + ext + " flip at " + std::to_string(pos));
          for (const auto& b : *r) ASSERT_OK(Validate(*b));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Arrow21, GoldTest, ::testing::ValuesIn(GoldCases()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace alkaid::format::ipc
