// Batches past the 32-bit limits: a column of more than INT32_MAX rows and a
// body larger than 2 GiB is written to a real file and read back from a
// memory mapping (zero-copy). Labelled `stress`: it writes ~2.3 GiB to disk.

#include <unistd.h>

#include <cstdio>
#include <string>

#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/ipc/writer.h"
#include "alkaid/format/record_batch.h"
#include "test_util.h"

namespace alkaid::format::ipc {
namespace {

constexpr int64_t kRows = (int64_t{1} << 31) + 4096;  // > INT32_MAX rows, > 2 GiB body

TEST(IpcLargeTest, BatchLargerThanTwoGiBRoundTripsThroughAMappedFile) {
  ASSERT_OK_AND_ASSIGN(auto values, AllocateBuffer(kRows));
  uint8_t* v = values->mutable_data();
  for (int64_t i = 0; i < kRows; i += 4096) v[i] = static_cast<uint8_t>(i >> 12);
  v[kRows - 1] = 0x5A;
  auto column = ArrayData::Make(uint8(), kRows, {nullptr, values}, 0);
  ASSERT_OK_AND_ASSIGN(auto batch,
                       RecordBatch::Make(schema({field("big", uint8(), false)}), kRows, {column}));

  const std::string path = "/tmp/alkaid_large_" + std::to_string(getpid()) + ".alkaid";
  {
    ASSERT_OK_AND_ASSIGN(auto sink, FileOutputStream::Open(path));
    ASSERT_OK_AND_ASSIGN(auto writer, MakeFileWriter(sink.get(), batch->schema()));
    ASSERT_OK(writer->WriteRecordBatch(*batch));
    ASSERT_OK(writer->Close());
    ASSERT_OK(sink->Close());
  }
  values.reset();
  batch.reset();
  column.reset();

  ASSERT_OK_AND_ASSIGN(auto mapped, MemoryMappedFile::Open(path));
  std::remove(path.c_str());  // the mapping stays valid
  ASSERT_OK_AND_ASSIGN(auto reader, RecordBatchFileReader::Open(mapped));
  ASSERT_EQ(reader->num_record_batches(), 1);
  ASSERT_OK_AND_ASSIGN(auto back, reader->ReadRecordBatch(0));
  ASSERT_EQ(back->num_rows(), kRows);
  const auto& data = *back->column_data(0);
  // Zero-copy: the values point into the mapping.
  EXPECT_TRUE(mapped->buffer()->Contains(data.buffers[1]->data(), kRows));
  const uint8_t* got = data.buffers[1]->data();
  for (int64_t i = 0; i < kRows; i += 4096) {
    ASSERT_EQ(got[i], static_cast<uint8_t>(i >> 12)) << i;
  }
  EXPECT_EQ(got[kRows - 1], 0x5A);
}

TEST(IpcLargeTest, ThirtyTwoBitOffsetsCannotAddressMoreThanTwoGiB) {
  // A utf8 column's int32 offsets cannot describe more than INT32_MAX bytes:
  // an offset that overflowed past 2 GiB reads as negative. The writer does
  // not validate (it writes what it is given, as Arrow's does); every reader
  // refuses the result, with the default (structural) validation and with
  // full validation, naming the field.
  ASSERT_OK_AND_ASSIGN(auto offsets, AllocateBuffer(3 * sizeof(int32_t)));
  auto* o = offsets->mutable_data_as<int32_t>();
  o[0] = 0;
  o[1] = 8;
  o[2] = -2;  // what an overflowed 32-bit offset looks like
  ASSERT_OK_AND_ASSIGN(auto data, AllocateBuffer(16));
  auto column = ArrayData::Make(utf8(), 2, {nullptr, offsets, data}, 0);
  ASSERT_OK_AND_ASSIGN(auto batch, RecordBatch::Make(schema({field("s", utf8())}), 2, {column}));
  ASSERT_OK_AND_ASSIGN(auto sink, BufferOutputStream::Create());
  ASSERT_OK_AND_ASSIGN(auto writer, MakeStreamWriter(sink.get(), batch->schema()));
  ASSERT_OK(writer->WriteRecordBatch(*batch));
  ASSERT_OK(writer->Close());
  ASSERT_OK_AND_ASSIGN(auto bytes, sink->Finish());
  for (bool full : {false, true}) {
    SCOPED_TRACE(full ? "validate_full" : "structural validation");
    IpcReadOptions options;
    options.validate_full = full;
    auto source = std::make_shared<BufferReader>(bytes);
    ASSERT_OK_AND_ASSIGN(auto reader, RecordBatchStreamReader::Open(source, options));
    auto read = reader->ReadNext();
    ASSERT_RAISES(kInvalid, read);
    EXPECT_NE(read.status().message().find("field 's'"), std::string::npos) << read.status();
  }
}

}  // namespace
}  // namespace alkaid::format::ipc
