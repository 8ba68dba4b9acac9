// Round trips through the writers: every type (taken from the gold files),
// slices, compression, alignment, framings, magics, dictionaries (deltas,
// replacements, shared ids), extension types, the region API.

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "alkaid/format/compare.h"
#include "alkaid/format/extension.h"
#include "alkaid/format/ipc/message_template.h"
#include "alkaid/format/validate.h"
#include "ipc_test_util.h"
#include "test_util.h"

namespace alkaid::format::ipc {
namespace {

using testing::Buf;
using testing::DictColumn;
using testing::GoldCases;
using testing::GoldPath;
using testing::Int32s;
using testing::ReadFileBuffer;
using testing::ReadStreamBuffer;
using testing::Strings;
using testing::WriteBatches;

struct Variant {
  const char* name;
  bool file;
  IpcWriteOptions options;
};

std::vector<Variant> Variants() {
  std::vector<Variant> v;
  for (bool file : {false, true}) {
    IpcWriteOptions o;
    v.push_back({file ? "file" : "stream", file, o});
    o.compression = CompressionType::kLz4Frame;
    v.push_back({file ? "file_lz4" : "stream_lz4", file, o});
    o.compression = CompressionType::kZstd;
    v.push_back({file ? "file_zstd" : "stream_zstd", file, o});
    o = IpcWriteOptions();
    o.alignment = 64;
    v.push_back({file ? "file_align64" : "stream_align64", file, o});
    o = IpcWriteOptions();
    o.write_legacy_format = true;
    v.push_back({file ? "file_legacy" : "stream_legacy", file, o});
  }
  IpcWriteOptions arrow;
  arrow.magic = FileMagic::kArrow;
  v.push_back({"file_arrow_magic", true, arrow});
  return v;
}

Result<std::vector<RecordBatchPtr>> ReadGold(const std::string& name, SchemaPtr* schema) {
  ALKAID_ASSIGN_OR_RAISE(auto bytes, ReadWholeFile(GoldPath(name, ".stream")));
  return ReadStreamBuffer(bytes, schema);
}

Status CheckSame(const std::vector<RecordBatchPtr>& expected,
                 const std::vector<RecordBatchPtr>& actual) {
  if (expected.size() != actual.size()) {
    return Status::Invalid("expected ", expected.size(), " batches, got ", actual.size());
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    ALKAID_RETURN_NOT_OK(ValidateFull(*actual[i]));
    ALKAID_RETURN_NOT_OK_CTX(CheckRecordBatchEquals(*expected[i], *actual[i]), "batch " << i);
  }
  return Status::OK();
}

class GoldRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldRoundTrip, EveryVariantReadsBackEqual) {
  SchemaPtr schema;
  ASSERT_OK_AND_ASSIGN(auto batches, ReadGold(GetParam(), &schema));
  for (const Variant& v : Variants()) {
    SCOPED_TRACE(v.name);
    ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(schema, batches, v.options, v.file));
    SchemaPtr back_schema;
    IpcReadOptions ro;
    ro.validate_full = true;
    auto back = v.file ? ReadFileBuffer(bytes, &back_schema, ro)
                       : ReadStreamBuffer(bytes, &back_schema, ro);
    ASSERT_OK(back);
    ASSERT_TRUE(schema->Equals(*back_schema, /*check_metadata=*/true))
        << schema->ToString() << "\nvs\n"
        << back_schema->ToString();
    ASSERT_OK(CheckSame(batches, *back));
    if (v.file) {
      ASSERT_OK_AND_ASSIGN(auto reader,
                           RecordBatchFileReader::Open(std::make_shared<BufferReader>(bytes)));
      EXPECT_EQ(reader->magic(), v.options.magic);
    }
  }
}

TEST_P(GoldRoundTrip, SlicesReadBackEqual) {
  SchemaPtr schema;
  ASSERT_OK_AND_ASSIGN(auto batches, ReadGold(GetParam(), &schema));
  for (const auto& batch : batches) {
    const int64_t n = batch->num_rows();
    for (auto [off, len] : std::vector<std::pair<int64_t, int64_t>>{
             {1, n - 2}, {n / 3, n / 2}, {3, 5}, {n - 1, 1}, {7, 0}}) {
      if (off < 0 || len < 0 || off + len > n) continue;
      auto slice = batch->Slice(off, len);
      SCOPED_TRACE("slice " + std::to_string(off) + "+" + std::to_string(len));
      for (bool file : {false, true}) {
        IpcWriteOptions o;
        o.compression = file ? CompressionType::kZstd : CompressionType::kNone;
        ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(schema, {slice}, o, file));
        SchemaPtr s;
        auto back = file ? ReadFileBuffer(bytes, &s) : ReadStreamBuffer(bytes, &s);
        ASSERT_OK(back);
        ASSERT_OK(CheckSame({slice}, *back));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Arrow21, GoldRoundTrip, ::testing::ValuesIn(GoldCases()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// ---------------------------------------------------------------------------

SchemaPtr IntSchema() { return schema({field("x", int32())}); }

TEST(IpcWriterTest, EmptyBatchesAndZeroBatches) {
  auto s = schema({field("x", int32()), field("s", utf8()), field("l", list(int64()))});
  ASSERT_OK_AND_ASSIGN(
      auto empty_list,
      RecordBatch::Make(
          s, 0,
          std::vector<ArrayDataPtr>{
              Int32s({}), Strings({}),
              ArrayData::Make(
                  list(int64()), 0, {nullptr, Buf(std::vector<int32_t>{0})},
                  {ArrayData::Make(int64(), 0, {nullptr, Buf(std::vector<int64_t>{})}, 0)}, 0)}));
  for (bool file : {false, true}) {
    ASSERT_OK_AND_ASSIGN(auto none, WriteBatches(s, {}, {}, file));
    SchemaPtr back;
    auto r = file ? ReadFileBuffer(none, &back) : ReadStreamBuffer(none, &back);
    ASSERT_OK(r);
    EXPECT_TRUE(back->Equals(*s));
    EXPECT_TRUE(r->empty());

    ASSERT_OK_AND_ASSIGN(auto two, WriteBatches(s, {empty_list, empty_list}, {}, file));
    r = file ? ReadFileBuffer(two, &back) : ReadStreamBuffer(two, &back);
    ASSERT_OK(r);
    ASSERT_EQ(r->size(), 2u);
    EXPECT_EQ((*r)[1]->num_rows(), 0);
  }
}

TEST(IpcWriterTest, ReadingFromBufferIsZeroCopy) {
  ASSERT_OK_AND_ASSIGN(
      auto batch,
      RecordBatch::Make(schema({field("x", int32()), field("s", utf8())}), 3,
                        std::vector<ArrayDataPtr>{Int32s({1, 2, 3}), Strings({"a", "bc", "def"})}));
  ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(batch->schema(), {batch}, {}, false));
  SchemaPtr s;
  ASSERT_OK_AND_ASSIGN(auto back, ReadStreamBuffer(bytes, &s));
  ASSERT_EQ(back.size(), 1u);
  for (const auto& col : back[0]->columns()) {
    for (const auto& b : col->buffers) {
      if (b != nullptr && b->size() > 0) {
        EXPECT_TRUE(bytes->Contains(b->data(), b->size()));
      }
    }
  }
  // Compressed bodies decompress into new buffers.
  IpcWriteOptions o;
  o.compression = CompressionType::kLz4Frame;
  std::vector<int32_t> many(10000, 42);
  ASSERT_OK_AND_ASSIGN(
      auto big, RecordBatch::Make(IntSchema(), 10000, std::vector<ArrayDataPtr>{Int32s(many)}));
  ASSERT_OK_AND_ASSIGN(auto compressed, WriteBatches(IntSchema(), {big}, o, false));
  ASSERT_OK_AND_ASSIGN(auto plain, WriteBatches(IntSchema(), {big}, {}, false));
  EXPECT_LT(compressed->size(), plain->size() / 10);
  ASSERT_OK_AND_ASSIGN(back, ReadStreamBuffer(compressed, &s));
  const auto& values = back[0]->column_data(0)->buffers[1];
  EXPECT_FALSE(compressed->Contains(values->data(), values->size()));
  ASSERT_OK(CheckRecordBatchEquals(*big, *back[0]));
}

// With min_space_savings, a buffer that does not shrink enough is stored as
// it is (length -1); by default (as Arrow C++) every buffer is compressed,
// so that no reader uses one in place at an alignment the writer cannot
// know (polars 1.44 panicked on such a decimal128 buffer).
TEST(IpcWriterTest, IncompressibleBuffersAreStoredWithMinusOneOnlyWhenAsked) {
  std::mt19937 rng(7);
  std::vector<int32_t> noise(4096);
  for (auto& x : noise) x = static_cast<int32_t>(rng());
  ASSERT_OK_AND_ASSIGN(
      auto batch, RecordBatch::Make(IntSchema(), 4096, std::vector<ArrayDataPtr>{Int32s(noise)}));
  // The int64 -1 prefix directly followed by the raw values.
  std::string needle(8, '\xFF');
  needle.append(reinterpret_cast<const char*>(noise.data()), 16);
  for (auto codec : {CompressionType::kLz4Frame, CompressionType::kZstd}) {
    IpcWriteOptions o;
    o.compression = codec;
    ASSERT_OK_AND_ASSIGN(auto compressed, WriteBatches(IntSchema(), {batch}, o, false));
    EXPECT_EQ(compressed->view().find(needle), std::string_view::npos);
    SchemaPtr schema_back;
    ASSERT_OK_AND_ASSIGN(auto all, ReadStreamBuffer(compressed, &schema_back));
    ASSERT_OK(CheckRecordBatchEquals(*batch, *all[0]));
    o.min_space_savings = 0.0;
    ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(IntSchema(), {batch}, o, false));
    EXPECT_NE(bytes->view().find(needle), std::string_view::npos);
    SchemaPtr s;
    ASSERT_OK_AND_ASSIGN(auto back, ReadStreamBuffer(bytes, &s));
    ASSERT_OK(CheckRecordBatchEquals(*batch, *back[0]));
  }
}

TEST(IpcWriterTest, MinSpaceSavingsOutsideZeroToOneIsRefused) {
  std::vector<int32_t> one(1, 1);
  ASSERT_OK_AND_ASSIGN(auto batch,
                       RecordBatch::Make(IntSchema(), 1, std::vector<ArrayDataPtr>{Int32s(one)}));
  IpcWriteOptions o;
  o.compression = CompressionType::kZstd;
  o.min_space_savings = 1.5;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "min_space_savings must be in [0, 1]",
                             WriteBatches(IntSchema(), {batch}, o, false));
}

TEST(IpcWriterTest, DecompressedSizeLimit) {
  std::vector<int32_t> many(1000, 1);
  ASSERT_OK_AND_ASSIGN(
      auto batch, RecordBatch::Make(IntSchema(), 1000, std::vector<ArrayDataPtr>{Int32s(many)}));
  IpcWriteOptions o;
  o.compression = CompressionType::kZstd;
  ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(IntSchema(), {batch}, o, false));
  IpcReadOptions ro;
  ro.max_decompressed_size = 100;
  SchemaPtr s;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "uncompressed bytes (limit 100)",
                             ReadStreamBuffer(bytes, &s, ro));
}

TEST(IpcWriterTest, AlignmentIsHonoured) {
  ASSERT_OK_AND_ASSIGN(
      auto batch,
      RecordBatch::Make(schema({field("x", int32()), field("s", utf8())}), 3,
                        std::vector<ArrayDataPtr>{Int32s({1, 2, 3}), Strings({"a", "bc", "def"})}));
  IpcWriteOptions o;
  o.alignment = 64;
  ASSERT_OK_AND_ASSIGN(auto payload, GetRecordBatchPayload(*batch, o));
  EXPECT_EQ(payload.body_length % 64, 0);
  // x values, s offsets, s data: one 64-byte slot each; no validity bitmaps.
  EXPECT_EQ(payload.body_length, 64 * 3);
  o.alignment = 12;
  ASSERT_RAISES(kInvalid, GetRecordBatchPayload(*batch, o));
}

// A buffer that does not compress is stored as it is (length -1) inside a
// compressed body; its bytes start on a multiple of 64 from the stream's
// start, so a reader can use 16-byte decimals in place (polars insists).
TEST(IpcWriterTest, BuffersStoredRawInACompressedBodyAre64ByteAligned) {
  // 40 decimal128 values of pseudo-random bytes: incompressible.
  std::vector<uint64_t> words(80);
  uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (auto& w : words) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    w = x;
  }
  auto values = ArrayData::Make(decimal128(38, 0), 40, {nullptr, Buf(words)}, 0);
  auto s = schema({field("x", int32()), field("d", decimal128(38, 0))});
  std::vector<int32_t> xs(40, 1);
  ASSERT_OK_AND_ASSIGN(auto batch,
                       RecordBatch::Make(s, 40, std::vector<ArrayDataPtr>{Int32s(xs), values}));
  for (CompressionType codec : {CompressionType::kLz4Frame, CompressionType::kZstd}) {
    IpcWriteOptions o;
    o.compression = codec;
    o.min_space_savings = 0.0;  // incompressible buffers stored raw
    ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(s, {batch}, o, false));
    SchemaPtr back_schema;
    ASSERT_OK_AND_ASSIGN(auto back, ReadStreamBuffer(bytes, &back_schema));
    ASSERT_EQ(back.size(), 1u);
    ASSERT_OK(CheckRecordBatchEquals(*batch, *back[0]));
    // Read in place (not decompressed into new memory), and aligned.
    const auto& data = back[0]->column_data(1)->buffers[1];
    ASSERT_TRUE(bytes->Contains(data->data(), data->size())) << "stored raw, read in place";
    EXPECT_EQ((data->data() - bytes->data()) % 64, 0);
  }
}

TEST(IpcWriterTest, RecordBatchCustomMetadataSurvivesEveryVariant) {
  auto s = schema({field("x", int32()), field("s", utf8())});
  auto md = std::make_shared<KeyValueMetadata>();
  md->Append("origin", "sensor-7");
  md->Append("", "empty key");
  ASSERT_OK_AND_ASSIGN(
      auto plain,
      RecordBatch::Make(s, 3,
                        std::vector<ArrayDataPtr>{Int32s({1, 2, 3}), Strings({"a", "bc", ""})}));
  auto tagged = plain->WithMetadata(md);
  EXPECT_TRUE(tagged->Equals(*plain));
  EXPECT_FALSE(tagged->Equals(*plain, /*check_metadata=*/true));
  EXPECT_TRUE(tagged->Slice(1, 1)->metadata()->Equals(*md));
  for (const Variant& v : Variants()) {
    SCOPED_TRACE(v.name);
    // A batch with metadata, one without, one with again: nothing leaks across.
    ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(s, {tagged, plain, tagged}, v.options, v.file));
    SchemaPtr back_schema;
    ASSERT_OK_AND_ASSIGN(auto back, v.file ? ReadFileBuffer(bytes, &back_schema)
                                           : ReadStreamBuffer(bytes, &back_schema));
    ASSERT_EQ(back.size(), 3u);
    ASSERT_NE(back[0]->metadata(), nullptr);
    EXPECT_TRUE(back[0]->metadata()->Equals(*md)) << back[0]->metadata()->ToString();
    EXPECT_EQ(back[1]->metadata(), nullptr);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_TRUE(back[i]->Equals(i == 1 ? *plain : *tagged, /*check_metadata=*/true)) << i;
    }
  }
}

// ---------------------------------------------------------------------------
// Dictionaries

SchemaPtr DictSchema() { return schema({field("d", dictionary(int32(), utf8()))}); }

RecordBatchPtr DictBatch(const std::vector<int32_t>& idx, ArrayDataPtr dict) {
  return *RecordBatch::Make(DictSchema(), static_cast<int64_t>(idx.size()),
                            std::vector<ArrayDataPtr>{DictColumn(idx, std::move(dict))});
}

TEST(IpcDictionaryTest, DeltasAndReplacementsInStreams) {
  auto d1 = Strings({"a", "b"});
  auto d2 = Strings({"a", "b", "c"});       // grows: delta
  auto d3 = Strings({"x", "y", "z", "w"});  // differs: replacement
  std::vector<RecordBatchPtr> batches{DictBatch({0, 1, 1}, d1), DictBatch({2, 0}, d2),
                                      DictBatch({2, 0}, d2), DictBatch({3, 1}, d3)};
  WriteStats stats;
  ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(DictSchema(), batches, {}, false, &stats));
  EXPECT_EQ(stats.num_dictionary_batches, 3);
  EXPECT_EQ(stats.num_dictionary_deltas, 1);
  EXPECT_EQ(stats.num_replaced_dictionaries, 1);
  EXPECT_EQ(stats.num_record_batches, 4);
  EXPECT_EQ(stats.total_bytes, bytes->size());

  BufferReader source(bytes);
  ASSERT_OK_AND_ASSIGN(auto reader, RecordBatchStreamReader::Open(&source));
  ASSERT_OK_AND_ASSIGN(auto back, reader->ReadAll());
  ASSERT_OK(CheckSame(batches, back));
  EXPECT_EQ(reader->stats().num_dictionary_deltas, 1);
  EXPECT_EQ(reader->stats().num_replaced_dictionaries, 1);
  EXPECT_EQ(reader->dictionary_memo().field_ids().at({0}), 0);

  // Without deltas, growth is written as a replacement.
  IpcWriteOptions no_delta;
  no_delta.emit_dictionary_deltas = false;
  ASSERT_OK_AND_ASSIGN(bytes, WriteBatches(DictSchema(), batches, no_delta, false, &stats));
  EXPECT_EQ(stats.num_dictionary_deltas, 0);
  EXPECT_EQ(stats.num_replaced_dictionaries, 2);
  SchemaPtr s;
  ASSERT_OK_AND_ASSIGN(back, ReadStreamBuffer(bytes, &s));
  ASSERT_OK(CheckSame(batches, back));
}

TEST(IpcDictionaryTest, FilesAllowDeltasButNotReplacements) {
  auto d1 = Strings({"a", "b"});
  auto d2 = Strings({"a", "b", "c"});
  std::vector<RecordBatchPtr> growing{DictBatch({0, 1}, d1), DictBatch({2, 0}, d2)};
  WriteStats stats;
  ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(DictSchema(), growing, {}, true, &stats));
  EXPECT_EQ(stats.num_dictionary_deltas, 1);
  ASSERT_OK_AND_ASSIGN(auto reader,
                       RecordBatchFileReader::Open(std::make_shared<BufferReader>(bytes)));
  EXPECT_EQ(reader->num_dictionaries(), 2);
  // After all deltas, the dictionary is the full one; both batches decode.
  ASSERT_OK_AND_ASSIGN(auto b1, reader->ReadRecordBatch(1));
  ASSERT_OK(CheckRecordBatchEquals(*growing[1], *b1));
  ASSERT_OK_AND_ASSIGN(auto b0, reader->ReadRecordBatch(0));
  ASSERT_OK(ValidateFull(*b0));
  EXPECT_TRUE(ArrayEquals(*growing[0]->column(0), *b0->column(0)));

  std::vector<RecordBatchPtr> replacing{DictBatch({0, 1}, d1), DictBatch({0}, Strings({"z", "y"}))};
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "cannot replace dictionaries",
                             WriteBatches(DictSchema(), replacing, {}, true));
  // A file whose footer lists a replacement is refused by the reader: build
  // one by hand-writing the stream part with replacement dictionary batches.
  ASSERT_OK_AND_ASSIGN(auto stream_bytes, WriteBatches(DictSchema(), replacing, {}, false));
  SchemaPtr s;
  ASSERT_OK(ReadStreamBuffer(stream_bytes, &s));  // streams accept it
}

TEST(IpcDictionaryTest, SharedIdsAndStableIds) {
  auto s = schema({field("a", dictionary(int32(), utf8())), field("b", dictionary(int32(), utf8())),
                   field("c", dictionary(int32(), utf8()))});
  DictionaryMemo ids;
  ASSERT_OK(ids.AddField(7, {0}, utf8()));
  ASSERT_OK(ids.AddField(7, {1}, utf8()));  // shared with a
  auto dict = Strings({"p", "q"});
  auto other = Strings({"r"});
  ASSERT_OK_AND_ASSIGN(
      auto batch, RecordBatch::Make(
                      s, 2,
                      std::vector<ArrayDataPtr>{DictColumn({0, 1}, dict), DictColumn({1, 1}, dict),
                                                DictColumn({0, 0}, other)}));
  for (bool file : {false, true}) {
    WriteStats stats;
    ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(s, {batch}, {}, file, &stats, &ids));
    EXPECT_EQ(stats.num_dictionary_batches, 2);  // id 7 once, c once
    BufferReader source(bytes);
    if (!file) {
      ASSERT_OK_AND_ASSIGN(auto reader, RecordBatchStreamReader::Open(&source));
      EXPECT_EQ(reader->dictionary_memo().field_ids().at({0}), 7);
      EXPECT_EQ(reader->dictionary_memo().field_ids().at({1}), 7);
      EXPECT_EQ(reader->dictionary_memo().field_ids().at({2}), 8);
      ASSERT_OK_AND_ASSIGN(auto back, reader->ReadAll());
      ASSERT_OK(CheckSame({batch}, back));
    } else {
      SchemaPtr back_schema;
      ASSERT_OK_AND_ASSIGN(auto back, ReadFileBuffer(bytes, &back_schema));
      ASSERT_OK(CheckSame({batch}, back));
    }
  }
  // Fields sharing an id must carry the same dictionary.
  ASSERT_OK_AND_ASSIGN(
      auto bad, RecordBatch::Make(
                    s, 2,
                    std::vector<ArrayDataPtr>{DictColumn({0, 1}, dict), DictColumn({0, 0}, other),
                                              DictColumn({0, 0}, other)}));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "sharing dictionary id 7",
                             WriteBatches(s, {bad}, {}, false, nullptr, &ids));
}

TEST(IpcDictionaryTest, NestedDictionaryRoundTrip) {
  // Outer dictionary whose values are a list of dictionary-encoded strings.
  auto inner_type = dictionary(int32(), utf8());
  auto value_type = list(field("item", inner_type));
  auto s = schema({field("nested", dictionary(int32(), value_type))});
  auto inner_dict = Strings({"x", "y", "z"});
  auto inner = DictColumn({2, 0, 1, 1}, inner_dict);
  auto outer_values =
      ArrayData::Make(value_type, 2, {nullptr, Buf(std::vector<int32_t>{0, 1, 4})}, {inner}, 0);
  auto col =
      ArrayData::Make(s->field(0)->type(), 3, {nullptr, Buf(std::vector<int32_t>{1, 0, 1})}, 0);
  col->dictionary = outer_values;
  ASSERT_OK_AND_ASSIGN(auto batch, RecordBatch::Make(s, 3, std::vector<ArrayDataPtr>{col}));
  ASSERT_OK(ValidateFull(*batch));
  for (bool file : {false, true}) {
    ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(s, {batch}, {}, file));
    SchemaPtr back_schema;
    auto back = file ? ReadFileBuffer(bytes, &back_schema) : ReadStreamBuffer(bytes, &back_schema);
    ASSERT_OK(back);
    ASSERT_OK(CheckSame({batch}, *back));
  }
}

// ---------------------------------------------------------------------------
// Extension types

TEST(IpcExtensionTest, UnregisteredKeepsStorageAndMetadata) {
  auto ext = extension("my.uuid", "v1", fixed_size_binary(4));
  auto s = schema({field("u", ext)});
  auto storage = ArrayData::Make(ext, 1, {nullptr, Buffer::FromString("abcd")}, 0);
  ASSERT_OK_AND_ASSIGN(auto batch, RecordBatch::Make(s, 1, std::vector<ArrayDataPtr>{storage}));
  ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(s, {batch}, {}, false));
  SchemaPtr back;
  ASSERT_OK_AND_ASSIGN(auto batches, ReadStreamBuffer(bytes, &back));
  EXPECT_EQ(back->field(0)->type()->id(), TypeId::kFixedSizeBinary);
  ASSERT_NE(back->field(0)->metadata(), nullptr);
  EXPECT_EQ(back->field(0)->metadata()->Get("ALKAID:extension:name"), "my.uuid");
  EXPECT_EQ(back->field(0)->metadata()->Get("ALKAID:extension:metadata"), "v1");
  // Written back unchanged.
  ASSERT_OK_AND_ASSIGN(auto again, WriteBatches(back, batches, {}, false));
  EXPECT_TRUE(again->Equals(*bytes));
}

TEST(IpcExtensionTest, RegisteredComesBackAsExtensionBothNamespaces) {
  ASSERT_OK(RegisterExtensionType(
      "test.point", [](const TypePtr& storage, const std::string& s) -> Result<TypePtr> {
        if (storage->id() != TypeId::kInt32) return Status::TypeError("point needs int32 storage");
        return extension("test.point", s, storage);
      }));
  ASSERT_RAISES(
      kAlreadyExists,
      RegisterExtensionType(
          "test.point", [](const TypePtr& t, const std::string&) -> Result<TypePtr> { return t; }));
  auto ext = extension("test.point", "meta", int32());
  auto s = schema({field("p", ext, true,
                         std::make_shared<KeyValueMetadata>(
                             std::vector<std::pair<std::string, std::string>>{{"user", "kept"}}))});
  auto col = ArrayData::Make(ext, 2, {nullptr, Buf(std::vector<int32_t>{3, 4})}, 0);
  ASSERT_OK_AND_ASSIGN(auto batch, RecordBatch::Make(s, 2, std::vector<ArrayDataPtr>{col}));
  for (const char* ns : {"ALKAID", "ARROW"}) {
    IpcWriteOptions o;
    o.extension_metadata_namespace = ns;
    ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(s, {batch}, o, true));
    EXPECT_NE(bytes->view().find(std::string(ns) + ":extension:name"), std::string_view::npos);
    SchemaPtr back;
    ASSERT_OK_AND_ASSIGN(auto batches, ReadFileBuffer(bytes, &back));
    ASSERT_TRUE(back->field(0)->type()->Equals(*ext)) << back->field(0)->type()->ToString();
    ASSERT_NE(back->field(0)->metadata(), nullptr);
    EXPECT_EQ(back->field(0)->metadata()->size(), 1u);
    ASSERT_OK(CheckSame({batch}, batches));
  }
  ASSERT_OK(UnregisterExtensionType("test.point"));
  ASSERT_RAISES(kKeyError, UnregisterExtensionType("test.point"));
}

// ---------------------------------------------------------------------------
// Region API

TEST(IpcRegionTest, MetadataForBuffersInOneRegion) {
  // Lay out validity, int32 values and string offsets/data in one region.
  ASSERT_OK_AND_ASSIGN(auto region, AllocateBuffer(256));
  uint8_t* base = region->mutable_data();
  base[0] = 0b101;  // validity of 3 slots: valid, null, valid
  const int32_t values[3] = {10, 0, 30};
  std::memcpy(base + 64, values, sizeof(values));
  const int32_t offsets[4] = {0, 2, 2, 5};
  std::memcpy(base + 128, offsets, sizeof(offsets));
  std::memcpy(base + 192, "hello", 5);
  std::shared_ptr<Buffer> r = region;
  auto x = ArrayData::Make(int32(), 3, {SliceBuffer(r, 0, 1), SliceBuffer(r, 64, 12)}, 1);
  auto str =
      ArrayData::Make(utf8(), 3, {nullptr, SliceBuffer(r, 128, 16), SliceBuffer(r, 192, 5)}, 0);
  auto s = schema({field("x", int32()), field("s", utf8())});
  ASSERT_OK_AND_ASSIGN(auto batch, RecordBatch::Make(s, 3, std::vector<ArrayDataPtr>{x, str}));
  ASSERT_OK_AND_ASSIGN(auto metadata, GetRecordBatchMetadataForRegion(*batch, base, 256));
  ASSERT_OK_AND_ASSIGN(auto message, Message::Open(metadata, r));
  EXPECT_EQ(message->body_length(), 256);
  ASSERT_OK_AND_ASSIGN(auto back, ReadRecordBatch(*message, s, nullptr));
  ASSERT_OK(CheckRecordBatchEquals(*batch, *back));
  EXPECT_EQ(back->column_data(0)->buffers[1]->data(), base + 64);  // no copy

  // Framing the metadata and appending the region is a valid message.
  IpcPayload payload;
  payload.metadata = metadata;
  payload.body_buffers = {r};
  payload.body_length = 256;
  ASSERT_OK_AND_ASSIGN(auto sink, BufferOutputStream::Create());
  ASSERT_OK(WriteIpcPayload(payload, {}, sink.get()));
  ASSERT_OK_AND_ASSIGN(auto framed, sink->Finish());
  BufferReader in(framed);
  ASSERT_OK_AND_ASSIGN(auto again, ReadMessage(&in));
  ASSERT_OK_AND_ASSIGN(back, ReadRecordBatch(*again, s, nullptr));
  ASSERT_OK(CheckRecordBatchEquals(*batch, *back));

  // Buffers outside the region, or a slice needing re-basing, are refused.
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "outside",
                             GetRecordBatchMetadataForRegion(*batch, base, 100));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "re-basing",
                             GetRecordBatchMetadataForRegion(*batch->Slice(1, 2), base, 256));
}

// The Message template of the region batch above: filled with the batch's
// numbers it reads back as the batch; a Message of the template's
// structure with other numbers matches it, one with a byte changed
// elsewhere does not; a Message that leaves a number out has no template.
TEST(RecordBatchMessageTemplateTest, FilledReadAndMatched) {
  ASSERT_OK_AND_ASSIGN(auto region, AllocateBuffer(256));
  uint8_t* base = region->mutable_data();
  base[0] = 0b101;
  const int32_t values[3] = {10, 0, 30};
  std::memcpy(base + 64, values, sizeof(values));
  const int32_t offsets[4] = {0, 2, 2, 5};
  std::memcpy(base + 128, offsets, sizeof(offsets));
  std::memcpy(base + 192, "hello", 5);
  std::shared_ptr<Buffer> r = region;
  auto s = schema({field("x", int32()), field("s", utf8())});
  auto x = ArrayData::Make(int32(), 3, {SliceBuffer(r, 0, 1), SliceBuffer(r, 64, 12)}, 1);
  auto str =
      ArrayData::Make(utf8(), 3, {nullptr, SliceBuffer(r, 128, 16), SliceBuffer(r, 192, 5)}, 0);
  ASSERT_OK_AND_ASSIGN(auto batch, RecordBatch::Make(s, 3, std::vector<ArrayDataPtr>{x, str}));

  ASSERT_OK_AND_ASSIGN(auto t, RecordBatchMessageTemplate::Make(2, 5));
  EXPECT_EQ(t.num_nodes(), 2u);
  EXPECT_EQ(t.num_buffers(), 5u);
  const RecordBatchMessageTemplate::Node nodes[2] = {{3, 1}, {3, 0}};
  const RecordBatchMessageTemplate::Range ranges[5] = {
      {0, 1}, {64, 12}, {0, 0}, {128, 16}, {192, 5}};
  std::vector<uint8_t> md(t.size());
  t.Fill(3, 256, nodes, ranges, md.data());
  ASSERT_OK_AND_ASSIGN(auto copy, Buffer::CopyOf(std::string_view(
                                      reinterpret_cast<const char*>(md.data()), md.size())));
  ASSERT_OK_AND_ASSIGN(auto message, Message::Open(copy, r));
  EXPECT_EQ(message->body_length(), 256);
  ASSERT_OK_AND_ASSIGN(auto back, ReadRecordBatch(*message, s, nullptr));
  ASSERT_OK(CheckRecordBatchEquals(*batch, *back));
  EXPECT_TRUE(t.Matches(md));

  // The template of the filled Message reads its numbers back; other
  // numbers still match it.
  ASSERT_OK_AND_ASSIGN(auto again, RecordBatchMessageTemplate::FromMessage(md));
  int64_t length = 0;
  int64_t body = 0;
  RecordBatchMessageTemplate::Node read_nodes[2];
  RecordBatchMessageTemplate::Range read_ranges[5];
  again.Read(md.data(), &length, &body, read_nodes, read_ranges);
  EXPECT_EQ(length, 3);
  EXPECT_EQ(body, 256);
  EXPECT_EQ(read_nodes[0].null_count, 1);
  EXPECT_EQ(read_ranges[4].offset, 192);
  EXPECT_EQ(read_ranges[4].length, 5);
  std::vector<uint8_t> other(t.size());
  const RecordBatchMessageTemplate::Node two[2] = {{2, 0}, {2, 0}};
  t.Fill(2, 128, two, ranges, other.data());
  EXPECT_NE(other, md);
  EXPECT_TRUE(again.Matches(other));
  // A byte outside the numbers (each one in turn) is another structure.
  size_t outside = 0;
  for (size_t i = 0; i < md.size(); ++i) {
    std::vector<uint8_t> flipped = md;
    flipped[i] ^= 0x40;
    bool numbers_unchanged = true;
    int64_t l2 = 0;
    int64_t b2 = 0;
    RecordBatchMessageTemplate::Node n2[2];
    RecordBatchMessageTemplate::Range r2[5];
    again.Read(flipped.data(), &l2, &b2, n2, r2);
    numbers_unchanged = l2 == 3 && b2 == 256 && std::memcmp(n2, read_nodes, sizeof(n2)) == 0 &&
                        std::memcmp(r2, read_ranges, sizeof(r2)) == 0;
    if (numbers_unchanged) {
      ++outside;
      EXPECT_FALSE(again.Matches(flipped)) << "byte " << i;
    } else {
      EXPECT_TRUE(again.Matches(flipped)) << "byte " << i;
    }
  }
  EXPECT_EQ(outside, md.size() - (8 + 8 + 2 * 16 + 5 * 16));
  EXPECT_FALSE(again.Matches(std::span<const uint8_t>(md.data(), md.size() - 8)));

  // The region encoding leaves no number out here; an empty batch's row
  // count and body length (0) are left out: no template.
  ASSERT_OK_AND_ASSIGN(auto encoded, GetRecordBatchMetadataForRegion(*batch, base, 256));
  EXPECT_OK(RecordBatchMessageTemplate::FromMessage(
                {encoded->data(), static_cast<size_t>(encoded->size())})
                .status());
  ASSERT_OK_AND_ASSIGN(auto empty, RecordBatch::Make(schema({field("x", int32())}), 0,
                                                     std::vector<ArrayDataPtr>{x->Slice(0, 0)}));
  ASSERT_OK_AND_ASSIGN(auto empty_md, GetRecordBatchMetadataForRegion(*empty, base, 0));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "left out",
                             RecordBatchMessageTemplate::FromMessage(
                                 {empty_md->data(), static_cast<size_t>(empty_md->size())})
                                 .status());
}

}  // namespace
}  // namespace alkaid::format::ipc
