// Readers on hand-made and damaged input: framings, end-of-stream forms, the
// incremental decoder, hostile lengths, nesting limits, files and streams I/O.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "alkaid/format/compare.h"
#include "alkaid/format/validate.h"
#include "ipc_test_util.h"
#include "test_util.h"

namespace alkaid::format::ipc {
namespace {

using testing::Buf;
using testing::DictColumn;
using testing::Int32s;
using testing::ReadFileBuffer;
using testing::ReadStreamBuffer;
using testing::Strings;
using testing::WriteBatches;

SchemaPtr TwoColumns() {
  return schema({field("x", int32()), field("d", dictionary(int32(), utf8()))});
}

std::vector<RecordBatchPtr> SampleBatches() {
  auto d1 = Strings({"a", "b"});
  auto d2 = Strings({"a", "b", "c"});
  return {
      *RecordBatch::Make(TwoColumns(), 2,
                         std::vector<ArrayDataPtr>{Int32s({1, 2}), DictColumn({0, 1}, d1)}),
      *RecordBatch::Make(TwoColumns(), 3,
                         std::vector<ArrayDataPtr>{Int32s({3, 4, 5}), DictColumn({2, 2, 0}, d2)})};
}

Status CheckSame(const std::vector<RecordBatchPtr>& expected,
                 const std::vector<RecordBatchPtr>& actual) {
  if (expected.size() != actual.size()) {
    return Status::Invalid("expected ", expected.size(), " batches, got ", actual.size());
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    ALKAID_RETURN_NOT_OK(CheckRecordBatchEquals(*expected[i], *actual[i]));
  }
  return Status::OK();
}

TEST(StreamDecoderTest, ByteByByteAndWholeBuffers) {
  auto batches = SampleBatches();
  for (bool legacy : {false, true}) {
    IpcWriteOptions o;
    o.write_legacy_format = legacy;
    ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(TwoColumns(), batches, o, false));
    auto listener = std::make_shared<CollectListener>();
    StreamDecoder decoder(listener);
    EXPECT_EQ(decoder.next_required_size(), 4);
    int64_t fed = 0;
    while (fed < bytes->size()) {
      // Feed exactly what is asked for, or one byte, alternately.
      int64_t n = (fed % 2 == 0) ? std::max<int64_t>(decoder.next_required_size(), 1) : 1;
      n = std::min(n, bytes->size() - fed);
      ASSERT_OK(decoder.Consume(bytes->data() + fed, n));
      fed += n;
    }
    ASSERT_OK(decoder.Finish());
    EXPECT_TRUE(listener->ended());
    EXPECT_EQ(decoder.next_required_size(), 0);
    ASSERT_NE(decoder.schema(), nullptr);
    EXPECT_EQ(decoder.stats().num_dictionary_deltas, 1);
    ASSERT_OK(CheckSame(batches, listener->batches()));
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "after the end-of-stream",
                               decoder.Consume(bytes->data(), 1));
  }
}

TEST(StreamDecoderTest, WholeBufferIsZeroCopy) {
  auto batches = SampleBatches();
  ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(TwoColumns(), batches, {}, false));
  auto listener = std::make_shared<CollectListener>();
  StreamDecoder decoder(listener);
  ASSERT_OK(decoder.Consume(bytes));
  ASSERT_EQ(listener->batches().size(), 2u);
  const auto& values = listener->batches()[1]->column_data(0)->buffers[1];
  EXPECT_TRUE(bytes->Contains(values->data(), values->size()));
}

TEST(StreamDecoderTest, TruncationAndErrorsAreSticky) {
  ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(TwoColumns(), SampleBatches(), {}, false));
  auto listener = std::make_shared<CollectListener>();
  StreamDecoder decoder(listener);
  ASSERT_OK(decoder.Consume(SliceBuffer(bytes, 0, bytes->size() - 20)));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "truncated", decoder.Finish());

  // A record batch before any schema.
  std::string garbage = std::string("\xFF\xFF\xFF\xFF", 4) + std::string("\x08\x00\x00\x00", 4) +
                        std::string(8, '\x01');
  StreamDecoder bad(std::make_shared<CollectListener>());
  Status st = bad.Consume(reinterpret_cast<const uint8_t*>(garbage.data()),
                          static_cast<int64_t>(garbage.size()));
  ASSERT_FALSE(st.ok());
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "stopped after an error", bad.Consume(bytes));
}

TEST(StreamReaderTest, EndOfStreamForms) {
  auto batches = SampleBatches();
  ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(TwoColumns(), batches, {}, false));
  SchemaPtr s;
  // Without any EOS marker (end of input).
  ASSERT_OK_AND_ASSIGN(auto r, ReadStreamBuffer(SliceBuffer(bytes, 0, bytes->size() - 8), &s));
  ASSERT_OK(CheckSame(batches, r));
  // With the legacy 4-byte 0 EOS marker.
  std::string legacy_eos(bytes->view().substr(0, static_cast<size_t>(bytes->size() - 8)));
  legacy_eos.append(4, '\0');
  ASSERT_OK_AND_ASSIGN(r, ReadStreamBuffer(Buffer::FromString(legacy_eos), &s));
  ASSERT_OK(CheckSame(batches, r));
}

// Sets the `version` of every message of an IPC stream (the Message table's
// field 0, an int16 MetadataVersion: V1 = 0 ... V5 = 4); returns how many it
// set. Each message is 0xFFFFFFFF, its int32 length, the flatbuffer, then a
// body of the Message's bodyLength (field 3).
int SetMessageVersions(std::string* bytes, int16_t version) {
  int count = 0;
  size_t pos = 0;
  while (pos + 8 <= bytes->size()) {
    int32_t length;
    std::memcpy(&length, bytes->data() + pos + 4, 4);
    if (length == 0) break;  // end of stream
    const size_t message = pos + 8;
    uint32_t root;
    std::memcpy(&root, bytes->data() + message, 4);
    const size_t table = message + root;
    int32_t to_vtable;
    std::memcpy(&to_vtable, bytes->data() + table, 4);
    const size_t vtable = table - static_cast<size_t>(to_vtable);
    uint16_t vtable_size;
    std::memcpy(&vtable_size, bytes->data() + vtable, 2);
    uint16_t version_at;
    std::memcpy(&version_at, bytes->data() + vtable + 4, 2);
    if (version_at == 0) return -1;  // absent: V1, cannot be set in place
    std::memcpy(bytes->data() + table + version_at, &version, 2);
    int64_t body = 0;
    uint16_t body_at = 0;
    if (vtable_size > 4 + 2 * 3) std::memcpy(&body_at, bytes->data() + vtable + 4 + 2 * 3, 2);
    if (body_at != 0) std::memcpy(&body, bytes->data() + table + body_at, 8);
    pos = message + static_cast<size_t>(length) + static_cast<size_t>(body);
    ++count;
  }
  return count;
}

// The IPC format's versions (docs/COMPATIBILITY.md): Alkaid writes metadata
// V5 and reads V4 and V5 (Arrow 0.15 and later); messages of V1-V3 (before
// Arrow 0.15) are refused naming their version, and a version no Arrow
// release has written as unknown.
TEST(StreamReaderTest, MetadataVersionsBeforeV4AreRefusedByName) {
  auto batches = SampleBatches();
  ASSERT_OK_AND_ASSIGN(auto written, WriteBatches(TwoColumns(), batches, {}, false));
  SchemaPtr s;
  {
    std::string v4(written->view());
    // The schema, the dictionaries and each batch.
    ASSERT_GT(SetMessageVersions(&v4, 3), 1 + static_cast<int>(batches.size()));
    ASSERT_OK_AND_ASSIGN(auto read, ReadStreamBuffer(Buffer::FromString(v4), &s));
    ASSERT_OK(CheckSame(batches, read));
  }
  for (int16_t v : {0, 1, 2}) {
    std::string old(written->view());
    ASSERT_GT(SetMessageVersions(&old, v), 0);
    ASSERT_RAISES_WITH_MESSAGE(kNotImplemented,
                               "metadata version V" + std::to_string(v + 1) +
                                   " (before Arrow 0.15) is not supported; need V4 or V5",
                               ReadStreamBuffer(Buffer::FromString(old), &s));
  }
  std::string unknown(written->view());
  ASSERT_GT(SetMessageVersions(&unknown, 9), 0);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "unknown metadata version 9",
                             ReadStreamBuffer(Buffer::FromString(unknown), &s));
}

// Metadata that is not a Message flatbuffer (a root offset far past its
// 16 bytes) is refused by the verifier, which each reader runs once per
// Message (ReadMessage, and with it RecordBatchStreamReader; StreamDecoder),
// with a clear error.
TEST(StreamReaderTest, MetadataThatIsNoMessageIsRefused) {
  ASSERT_OK_AND_ASSIGN(auto written, WriteBatches(TwoColumns(), {}, {}, false));
  std::string garbage(8 + 16, '\x7f');
  const uint32_t marker = 0xFFFFFFFFu;
  const int32_t length = 16;
  std::memcpy(garbage.data(), &marker, 4);
  std::memcpy(garbage.data() + 4, &length, 4);
  {
    BufferReader br(Buffer::FromString(garbage));
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "is not a valid Message flatbuffer", ReadMessage(&br));
  }
  // The schema's Message, then the garbage in place of the end marker.
  std::string stream(written->view().substr(0, static_cast<size_t>(written->size()) - 8));
  stream += garbage;
  SchemaPtr s;
  auto read = ReadStreamBuffer(Buffer::FromString(stream), &s);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "is not a valid Message flatbuffer", read);
  EXPECT_NE(read.status().message().find("message #1"), std::string::npos)
      << read.status().ToString();
  auto listener = std::make_shared<CollectListener>();
  StreamDecoder decoder(listener);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "is not a valid Message flatbuffer",
                             decoder.Consume(Buffer::FromString(stream)));
}

TEST(StreamReaderTest, HostileLengthsNeverAllocate) {
  auto batches = SampleBatches();
  ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(TwoColumns(), batches, {}, false));
  SchemaPtr s;
  // Metadata length prefixes: negative and huge.
  for (uint32_t len : {0x80000000u, 0x7FFFFFF0u}) {
    std::string data(bytes->view());
    std::memcpy(data.data() + 4, &len, 4);
    auto r = ReadStreamBuffer(Buffer::FromString(data), &s);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalid) << r.status().ToString();
  }
  // The same from a file descriptor with a small memory budget: the reader
  // must report truncation, not try to allocate 2 GiB.
  char path[] = "/tmp/alkaid_ipc_hostileXXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string data(bytes->view());
  const uint32_t huge = 0x7FFFFFF0u;
  std::memcpy(data.data() + 4, &huge, 4);
  ASSERT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  close(fd);
  SystemMemoryPool small(1 << 20);
  IpcReadOptions ro;
  ro.pool = &small;
  ASSERT_OK_AND_ASSIGN(auto in, FileInputStream::Open(path, &small));
  auto reader = RecordBatchStreamReader::Open(in.get(), ro);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kInvalid) << reader.status().ToString();
  EXPECT_NE(reader.status().message().find("truncated"), std::string::npos);
  unlink(path);

  // A body length of 2^60 declared in the metadata.
  ASSERT_OK_AND_ASSIGN(auto payload, GetRecordBatchPayload(*batches[0]));
  const int64_t body_len = payload.body_length;
  std::string meta(payload.metadata->view());
  const size_t at = meta.find(std::string(reinterpret_cast<const char*>(&body_len), 8));
  ASSERT_NE(at, std::string::npos);
  const int64_t evil = int64_t{1} << 60;
  std::memcpy(meta.data() + at, &evil, 8);
  payload.metadata = Buffer::FromString(meta);
  ASSERT_OK_AND_ASSIGN(auto sink, BufferOutputStream::Create());
  ASSERT_OK(WriteIpcPayload(payload, {}, sink.get()));
  ASSERT_OK_AND_ASSIGN(auto framed, sink->Finish());
  BufferReader br(framed);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "truncated", ReadMessage(&br));
  auto listener = std::make_shared<CollectListener>();
  StreamDecoder decoder(listener);
  ASSERT_OK(decoder.Consume(framed));
  // Waiting for the rest of the declared body, having allocated nothing.
  EXPECT_EQ(decoder.next_required_size(), evil - body_len);
  ASSERT_RAISES(kInvalid, decoder.Finish());
}

// Every buffer a Message names must lie inside its body: an offset past
// the end, a length past it, a negative offset and an offset + length that
// overflows are each refused before any byte is read.
TEST(StreamReaderTest, BuffersOutsideTheBodyAreRefused) {
  auto one = schema({field("x", int32(), false)});
  ASSERT_OK_AND_ASSIGN(
      auto batch, RecordBatch::Make(one, 5, std::vector<ArrayDataPtr>{Int32s({1, 2, 3, 4, 5})}));
  ASSERT_OK_AND_ASSIGN(auto payload, GetRecordBatchPayload(*batch));
  const int64_t body_length = payload.body_length;
  ASSERT_OK_AND_ASSIGN(auto sink, BufferOutputStream::Create());
  ASSERT_OK(WriteIpcPayload(payload, {}, sink.get()));
  ASSERT_OK_AND_ASSIGN(auto framed, sink->Finish());
  // The data buffer's Buffer struct in the metadata: offset 0, length 20
  // (padding is not part of a buffer's length).
  const int64_t data_buffer[2] = {0, 20};
  const std::string pattern(reinterpret_cast<const char*>(data_buffer), sizeof(data_buffer));
  const std::string bytes(framed->view());
  const size_t at = bytes.find(pattern);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes.find(pattern, at + 1), std::string::npos);
  auto read = [&](const std::string& data) -> Result<RecordBatchPtr> {
    BufferReader input(Buffer::FromString(data));
    ALKAID_ASSIGN_OR_RAISE(auto message, ReadMessage(&input));
    if (message == nullptr) return Status::Invalid("no message");
    return ReadRecordBatch(*message, one, nullptr);
  };
  ASSERT_OK_AND_ASSIGN(auto back, read(bytes));
  ASSERT_TRUE(back->Equals(*batch));
  const int64_t cases[][2] = {
      {body_length, 20}, {0, body_length + 1}, {-8, 20}, {INT64_MAX - 4, 20}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::to_string(c[0]) + ", +" + std::to_string(c[1]));
    std::string evil = bytes;
    std::memcpy(evil.data() + at, c, sizeof(data_buffer));
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "outside the", read(evil));
  }
}

TEST(StreamReaderTest, MessageBlockChecks) {
  ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(TwoColumns(), SampleBatches(), {}, true));
  BufferReader file(bytes);
  ASSERT_RAISES(kInvalid, ReadMessage(&file, 8, 1 << 30, 0));         // past the end
  ASSERT_RAISES(kInvalid, ReadMessage(&file, -8, 16, 0));             // negative offset
  ASSERT_RAISES(kInvalid, ReadMessage(&file, 8, 16, INT64_MAX - 4));  // overflow
}

TEST(StreamReaderTest, NestingDepthLimit) {
  TypePtr t = int32();
  for (int i = 0; i < 80; ++i) t = list(t);
  auto s = schema({field("deep", t)});
  ASSERT_OK_AND_ASSIGN(auto sink, BufferOutputStream::Create());
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "max_recursion_depth", MakeStreamWriter(sink.get(), s));
  IpcWriteOptions o;
  o.max_recursion_depth = 200;
  ASSERT_OK_AND_ASSIGN(auto writer, MakeStreamWriter(sink.get(), s, o));
  ASSERT_OK(writer->Close());
  ASSERT_OK_AND_ASSIGN(auto bytes, sink->Finish());
  SchemaPtr back;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "max_recursion_depth", ReadStreamBuffer(bytes, &back));
  IpcReadOptions ro;
  ro.max_recursion_depth = 200;
  ASSERT_OK(ReadStreamBuffer(bytes, &back, ro));
  EXPECT_TRUE(back->Equals(*s));
}

TEST(FileReaderTest, MagicAndRandomAccess) {
  auto batches = SampleBatches();
  ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(TwoColumns(), batches, {}, true));
  EXPECT_EQ(bytes->view().substr(0, 8), std::string_view("ALKAID1\0", 8));
  EXPECT_EQ(bytes->view().substr(static_cast<size_t>(bytes->size() - 7)), "ALKAID1");
  ASSERT_OK_AND_ASSIGN(auto reader,
                       RecordBatchFileReader::Open(std::make_shared<BufferReader>(bytes)));
  EXPECT_EQ(reader->magic(), FileMagic::kAlkaid);
  EXPECT_EQ(reader->version(), MetadataVersion::kV5);
  ASSERT_EQ(reader->num_record_batches(), 2);
  ASSERT_OK_AND_ASSIGN(auto second, reader->ReadRecordBatch(1));
  ASSERT_OK(CheckRecordBatchEquals(*batches[1], *second));
  ASSERT_RAISES(kIndexError, reader->ReadRecordBatch(2));
  EXPECT_EQ(reader->dictionary_memo().field_ids().at({1}), 0);

  // A stream is not a file.
  ASSERT_OK_AND_ASSIGN(auto stream, WriteBatches(TwoColumns(), batches, {}, false));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "magic",
                             RecordBatchFileReader::Open(std::make_shared<BufferReader>(stream)));
  // Mismatched leading magic.
  std::string mixed(bytes->view());
  std::memcpy(mixed.data(), "ARROW1\0\0", 8);
  ASSERT_RAISES_WITH_MESSAGE(
      kInvalid, "leading magic",
      RecordBatchFileReader::Open(std::make_shared<BufferReader>(Buffer::FromString(mixed))));
  // Footer metadata round trip.
  ASSERT_OK_AND_ASSIGN(auto sink, BufferOutputStream::Create());
  auto md = std::make_shared<KeyValueMetadata>(
      std::vector<std::pair<std::string, std::string>>{{"origin", "test"}});
  ASSERT_OK_AND_ASSIGN(auto writer, MakeFileWriter(sink.get(), TwoColumns(), {}, nullptr, md));
  ASSERT_OK(writer->Close());
  ASSERT_OK_AND_ASSIGN(auto with_md, sink->Finish());
  ASSERT_OK_AND_ASSIGN(reader,
                       RecordBatchFileReader::Open(std::make_shared<BufferReader>(with_md)));
  ASSERT_NE(reader->footer_metadata(), nullptr);
  EXPECT_EQ(reader->footer_metadata()->Get("origin"), "test");
}

TEST(IoTest, FilesPipesAndErrors) {
  char path[] = "/tmp/alkaid_ipc_ioXXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  auto batches = SampleBatches();
  {
    ASSERT_OK_AND_ASSIGN(auto out, FileOutputStream::Open(path));
    ASSERT_OK_AND_ASSIGN(auto writer, MakeFileWriter(out.get(), TwoColumns()));
    for (const auto& b : batches) ASSERT_OK(writer->WriteRecordBatch(*b));
    ASSERT_OK(writer->Close());
    ASSERT_OK(out->Close());
    ASSERT_RAISES(kIOError, out->Write("x", 1));
  }
  ASSERT_OK_AND_ASSIGN(auto mapped, MemoryMappedFile::Open(path));
  ASSERT_OK_AND_ASSIGN(auto reader, RecordBatchFileReader::Open(mapped));
  ASSERT_OK_AND_ASSIGN(auto b0, reader->ReadRecordBatch(0));
  ASSERT_OK(CheckRecordBatchEquals(*batches[0], *b0));
  EXPECT_TRUE(mapped->buffer()->Contains(b0->column_data(0)->buffers[1]->data(), 8));
  ASSERT_RAISES(kIndexError, mapped->ReadAt(-1, 4));
  unlink(path);

  // A pipe: the stream format needs no seeking.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(TwoColumns(), batches, {}, false));
  ASSERT_LT(bytes->size(), 60000);  // fits the pipe buffer
  ASSERT_EQ(write(fds[1], bytes->data(), static_cast<size_t>(bytes->size())), bytes->size());
  close(fds[1]);
  ASSERT_OK_AND_ASSIGN(auto in, FileInputStream::FromDescriptor(fds[0], /*owns_fd=*/true));
  ASSERT_OK_AND_ASSIGN(auto stream_reader, RecordBatchStreamReader::Open(in.get()));
  ASSERT_OK_AND_ASSIGN(auto back, stream_reader->ReadAll());
  ASSERT_OK(CheckSame(batches, back));

  ASSERT_RAISES_WITH_MESSAGE(kIOError, "/nonexistent/alkaid",
                             FileInputStream::Open("/nonexistent/alkaid"));
  ASSERT_RAISES_WITH_MESSAGE(kIOError, "No such file",
                             MemoryMappedFile::Open("/nonexistent/alkaid"));
  ASSERT_RAISES(kIOError, FileOutputStream::Open("/nonexistent/dir/file"));
}

// --- Files older writers leave (issue #16), kept in tests/data/legacy ------

// Writes `bytes` to $ALKAID_WRITE_TEST_DATA/<name> when that is set: how the
// files in tests/data/legacy were made (tests/data/README.md).
void MaybeKeep(const std::shared_ptr<Buffer>& bytes, const std::string& name) {
  const char* dir = std::getenv(
      "ALKAID_WRITE_TEST_DATA");  // NOLINT(concurrency-mt-unsafe): test setup, one thread
  if (dir == nullptr) return;
  ASSERT_OK_AND_ASSIGN(auto out, FileOutputStream::Open(std::string(dir) + "/" + name));
  ASSERT_OK(out->Write(bytes->data(), bytes->size()));
  ASSERT_OK(out->Close());
}

std::shared_ptr<Buffer> Legacy(const std::string& name) {
  auto file = MemoryMappedFile::Open(std::string(ALKAID_LEGACY_DIR) + "/" + name);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  auto size = (*file)->GetSize();
  auto bytes = (*file)->ReadAt(0, *size);
  return bytes.ok() ? *bytes : nullptr;
}

// Arrow before 0.15 wrote no `version` in the file footer (it reads as V1).
// Such a file's version is its messages'.
TEST(LegacyFileTest, FooterWithoutVersionReadsAsItsMessages) {
  auto batches = SampleBatches();
  ASSERT_OK_AND_ASSIGN(auto written, WriteBatches(TwoColumns(), batches, {}, true));
  std::string bytes(written->view());
  // The footer ends 4 + 7 bytes before the end (its length, "ALKAID1").
  int32_t footer_len;
  std::memcpy(&footer_len, bytes.data() + bytes.size() - 11, 4);
  const size_t footer = bytes.size() - 11 - static_cast<size_t>(footer_len);
  uint32_t root;
  std::memcpy(&root, bytes.data() + footer, 4);
  const size_t table = footer + root;
  int32_t to_vtable;
  std::memcpy(&to_vtable, bytes.data() + table, 4);
  const size_t vtable = table - static_cast<size_t>(to_vtable);
  uint16_t version_field;
  std::memcpy(&version_field, bytes.data() + vtable + 4, 2);
  ASSERT_NE(version_field, 0) << "the footer we write carries its version";
  const uint16_t absent = 0;
  std::memcpy(bytes.data() + vtable + 4, &absent, 2);  // field 0 (version) absent
  auto patched = Buffer::FromString(bytes);
  MaybeKeep(patched, "footer-without-version.arrow_file");
  for (const auto& data : {patched, Legacy("footer-without-version.arrow_file")}) {
    ASSERT_NE(data, nullptr);
    ASSERT_OK_AND_ASSIGN(auto reader,
                         RecordBatchFileReader::Open(std::make_shared<BufferReader>(data)));
    EXPECT_EQ(reader->version(), MetadataVersion::kV5);
    ASSERT_EQ(reader->num_record_batches(), 2);
    for (int i = 0; i < 2; ++i) {
      ASSERT_OK_AND_ASSIGN(auto batch, reader->ReadRecordBatch(i));
      ASSERT_OK(CheckRecordBatchEquals(*batches[static_cast<size_t>(i)], *batch));
    }
  }
}

// Some writers put -1 in the null count of a Null-typed field node; its
// null count is its length.
TEST(LegacyFileTest, NullTypeWithNullCountMinusOne) {
  auto schema = format::schema({field("a", null()), field("b", int32())});
  auto nulls = ArrayData::Make(null(), 56, {nullptr}, 56);
  std::vector<int32_t> values(56);
  for (int32_t i = 0; i < 56; ++i) values[static_cast<size_t>(i)] = i;
  ASSERT_OK_AND_ASSIGN(
      auto batch, RecordBatch::Make(schema, 56, std::vector<ArrayDataPtr>{nulls, Int32s(values)}));
  ASSERT_OK_AND_ASSIGN(auto written, WriteBatches(schema, {batch}, {}, false));
  std::string bytes(written->view());
  // The field nodes of `a` (length 56, null count 56) and `b` (56, 0): the
  // vector of FieldNode structs, four int64.
  const int64_t node[4] = {56, 56, 56, 0};
  const std::string pattern(reinterpret_cast<const char*>(node), sizeof(node));
  const size_t at = bytes.find(pattern);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes.find(pattern, at + 1), std::string::npos);
  const int64_t minus_one = -1;
  std::memcpy(bytes.data() + at + 8, &minus_one, 8);
  auto patched = Buffer::FromString(bytes);
  MaybeKeep(patched, "null-count-minus-one.stream");
  for (const auto& data : {patched, Legacy("null-count-minus-one.stream")}) {
    ASSERT_NE(data, nullptr);
    SchemaPtr read_schema;
    ASSERT_OK_AND_ASSIGN(auto read, ReadStreamBuffer(data, &read_schema));
    ASSERT_EQ(read.size(), 1u);
    EXPECT_EQ(read[0]->column_data(0)->null_count, 56);
    ASSERT_OK(CheckRecordBatchEquals(*batch, *read[0]));
  }
  // Only the null type: -1 elsewhere is still refused.
  std::string other(written->view());
  std::memcpy(other.data() + at + 24, &minus_one, 8);
  SchemaPtr ignored;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "null count -1",
                             ReadStreamBuffer(Buffer::FromString(other), &ignored));
}

// Older Arrow versions wrote decimal values with more digits than their
// precision: they read safely; full validation reports them unless told not
// to check the precision (Arrow's integration quirk no_decimal_validate).
TEST(LegacyFileTest, DecimalsBeyondTheirPrecision) {
  auto schema = format::schema({field("d", decimal128(5, 0))});
  const std::vector<uint64_t> words = {123456, 0, 42, 0};  // 123456 has 6 digits
  auto values = ArrayData::Make(decimal128(5, 0), 2, {nullptr, Buf(words)}, 0);
  ASSERT_OK_AND_ASSIGN(auto batch, RecordBatch::Make(schema, 2, std::vector<ArrayDataPtr>{values}));
  ASSERT_OK_AND_ASSIGN(auto written, WriteBatches(schema, {batch}, {}, false));
  MaybeKeep(written, "decimal-beyond-precision.stream");
  for (const auto& data : {written, Legacy("decimal-beyond-precision.stream")}) {
    ASSERT_NE(data, nullptr);
    SchemaPtr read_schema;
    ASSERT_OK(ReadStreamBuffer(data, &read_schema).status());  // structural: fine
    IpcReadOptions full;
    full.validate_full = true;
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "more digits than precision 5",
                               ReadStreamBuffer(data, &read_schema, full));
    full.validate_decimal_precision = false;
    ASSERT_OK_AND_ASSIGN(auto read, ReadStreamBuffer(data, &read_schema, full));
    ASSERT_OK(CheckRecordBatchEquals(*batch, *read[0]));
  }
  FullValidationOptions lenient;
  lenient.decimal_precision = false;
  ASSERT_OK(ValidateFull(*batch, lenient));
  ASSERT_RAISES(kInvalid, ValidateFull(*batch));
}

// A RecordBatch message's own custom_metadata (distinct from the schema's):
// read, and kept for the tools' tests (alkaid convert must carry it).
TEST(LegacyFileTest, RecordBatchCustomMetadata) {
  auto schema = format::schema({field("x", int32())});
  auto md = std::make_shared<KeyValueMetadata>();
  md->Append("frame", "42");
  ASSERT_OK_AND_ASSIGN(auto plain,
                       RecordBatch::Make(schema, 3, std::vector<ArrayDataPtr>{Int32s({7, 8, 9})}));
  ASSERT_OK_AND_ASSIGN(auto written,
                       WriteBatches(schema, {plain->WithMetadata(md), plain}, {}, false));
  MaybeKeep(written, "batch-metadata.stream");
  for (const auto& data : {written, Legacy("batch-metadata.stream")}) {
    ASSERT_NE(data, nullptr);
    SchemaPtr read_schema;
    ASSERT_OK_AND_ASSIGN(auto read, ReadStreamBuffer(data, &read_schema));
    ASSERT_EQ(read.size(), 2u);
    ASSERT_NE(read[0]->metadata(), nullptr);
    EXPECT_EQ(read[0]->metadata()->Get("frame"), "42");
    EXPECT_EQ(read[1]->metadata(), nullptr);
  }
}

// --- Big-endian input (tests/data/legacy/big-endian.*) ----------------------

// Arrow's Schema table for one field `x: int32`, built field by field with
// the flatbuffers builder (Schema.fbs's field ids: a vtable slot is 4 + 2 *
// id), declaring `endianness` (0 Little, 1 Big).
flatbuffers::uoffset_t BuildSchemaTable(flatbuffers::FlatBufferBuilder* fbb, int16_t endianness) {
  const auto name = fbb->CreateString("x");
  const auto children = fbb->CreateVector(std::vector<flatbuffers::Offset<void>>{});
  auto start = fbb->StartTable();
  fbb->AddElement<int32_t>(4, 32, 0);  // Int.bitWidth
  fbb->AddElement<uint8_t>(6, 1, 0);   // Int.is_signed
  const flatbuffers::Offset<void> int_type(fbb->EndTable(start));
  start = fbb->StartTable();
  fbb->AddOffset(4, name);            // Field.name
  fbb->AddElement<uint8_t>(6, 1, 0);  // Field.nullable
  fbb->AddElement<uint8_t>(8, 2, 0);  // Field.type_type = Int
  fbb->AddOffset(10, int_type);       // Field.type
  fbb->AddOffset(14, children);       // Field.children
  const flatbuffers::Offset<void> field(fbb->EndTable(start));
  const auto fields = fbb->CreateVector(std::vector<flatbuffers::Offset<void>>{field});
  start = fbb->StartTable();
  fbb->AddElement<int16_t>(4, endianness, 0);  // Schema.endianness (Little by default)
  fbb->AddOffset(6, fields);                   // Schema.fields
  return fbb->EndTable(start);
}

void PutLE32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// An IPC stream of just a Schema message (V5) declaring `endianness`, then
// end-of-stream.
std::string SchemaOnlyStream(int16_t endianness) {
  flatbuffers::FlatBufferBuilder fbb;
  const flatbuffers::Offset<void> schema(BuildSchemaTable(&fbb, endianness));
  const auto start = fbb.StartTable();
  fbb.AddElement<int64_t>(10, 0, 0);  // Message.bodyLength
  fbb.AddOffset(8, schema);           // Message.header
  fbb.AddElement<int16_t>(4, 4, 0);   // Message.version = V5
  fbb.AddElement<uint8_t>(6, 1, 0);   // Message.header_type = Schema
  fbb.Finish(flatbuffers::Offset<void>(fbb.EndTable(start)));
  std::string metadata(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
  metadata.resize((metadata.size() + 7) / 8 * 8, '\0');  // the body starts 8-aligned
  std::string out;
  PutLE32(&out, 0xFFFFFFFFu);
  PutLE32(&out, static_cast<uint32_t>(metadata.size()));
  out += metadata;
  PutLE32(&out, 0xFFFFFFFFu);
  PutLE32(&out, 0);
  return out;
}

// An IPC file (Arrow's magic) of that stream and a footer whose schema
// declares `endianness`, no batches.
std::string SchemaOnlyFile(int16_t endianness) {
  flatbuffers::FlatBufferBuilder fbb;
  const flatbuffers::Offset<void> schema(BuildSchemaTable(&fbb, endianness));
  const auto none = fbb.CreateVector(std::vector<int64_t>{});  // empty [Block]
  const auto start = fbb.StartTable();
  fbb.AddOffset(6, schema);          // Footer.schema
  fbb.AddOffset(8, none);            // Footer.dictionaries
  fbb.AddOffset(10, none);           // Footer.recordBatches
  fbb.AddElement<int16_t>(4, 4, 0);  // Footer.version = V5
  fbb.Finish(flatbuffers::Offset<void>(fbb.EndTable(start)));
  std::string out("ARROW1\0\0", 8);
  out += SchemaOnlyStream(endianness);
  out.append(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
  PutLE32(&out, fbb.GetSize());
  out += "ARROW1";
  return out;
}

std::shared_ptr<Buffer> BufferOf(const std::string& bytes) {
  auto buffer = AllocateBuffer(static_cast<int64_t>(bytes.size()));
  EXPECT_TRUE(buffer.ok());
  std::memcpy((*buffer)->mutable_data(), bytes.data(), bytes.size());
  return std::shared_ptr<Buffer>(std::move(*buffer));
}

// A stream and a file whose Schema says Endianness::Big are refused at
// Open, saying so ("big-endian data is not supported"); the same bytes
// declaring Little read as the schema x: int32 (the hand-built messages
// are right, and only the endianness makes the difference). The big-endian
// ones are kept in tests/data/legacy for the tools' tests (alkaid
// cat/validate/schema, `alkaid publish -`).
TEST(BigEndianTest, StreamsAndFilesDeclaringBigEndianAreRefused) {
  const auto little_stream = BufferOf(SchemaOnlyStream(0));
  SchemaPtr read_schema;
  ASSERT_OK_AND_ASSIGN(auto none, ReadStreamBuffer(little_stream, &read_schema));
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(read_schema->Equals(*schema({field("x", int32())})));
  ASSERT_OK_AND_ASSIGN(none, ReadFileBuffer(BufferOf(SchemaOnlyFile(0)), &read_schema));
  EXPECT_TRUE(read_schema->Equals(*schema({field("x", int32())})));

  const auto big_stream = BufferOf(SchemaOnlyStream(1));
  const auto big_file = BufferOf(SchemaOnlyFile(1));
  MaybeKeep(big_stream, "big-endian.stream");
  MaybeKeep(big_file, "big-endian.arrow_file");
  for (const auto& data : {big_stream, Legacy("big-endian.stream")}) {
    ASSERT_NE(data, nullptr);
    ASSERT_RAISES_WITH_MESSAGE(kNotImplemented, "big-endian data is not supported",
                               ReadStreamBuffer(data, &read_schema));
  }
  for (const auto& data : {big_file, Legacy("big-endian.arrow_file")}) {
    ASSERT_NE(data, nullptr);
    ASSERT_RAISES_WITH_MESSAGE(kNotImplemented, "big-endian data is not supported",
                               ReadFileBuffer(data, &read_schema));
  }
}

}  // namespace
}  // namespace alkaid::format::ipc
