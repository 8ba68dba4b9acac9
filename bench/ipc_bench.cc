// IPC benchmarks.
//
// BM_OpenBatch: decoding a record batch from a message in memory is
// zero-copy, so its time must not grow with the body size (1 MiB ... 1 GiB,
// same schema). BM_MemcpyBody is the baseline in the same run: what merely
// copying the body once would cost.
//
// BM_Write / BM_Read: stream write and read throughput without compression
// and with LZ4-frame and ZSTD, on compressible data (bytes = body bytes).

#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>

#include "alkaid/format/buffer.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/message.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/ipc/writer.h"
#include "alkaid/format/record_batch.h"

namespace {

namespace fmt = alkaid::format;
namespace ipc = alkaid::format::ipc;

// A batch of two int64 columns with `body_bytes` bytes in all, values
// repeating every 1000 rows so that codecs have something to find.
fmt::RecordBatchPtr MakeBatch(int64_t body_bytes) {
  const int64_t rows = body_bytes / 16;
  std::vector<fmt::ArrayDataPtr> columns;
  for (int c = 0; c < 2; ++c) {
    auto values = fmt::AllocateBuffer(rows * 8);
    values.status().Abort("allocating bench data");
    auto* v = (*values)->mutable_data_as<int64_t>();
    for (int64_t i = 0; i < rows; ++i) v[i] = (i % 1000) * (c + 1);
    columns.push_back(fmt::ArrayData::Make(fmt::int64(), rows, {nullptr, *values}, 0));
  }
  auto schema = fmt::schema({fmt::field("a", fmt::int64()), fmt::field("b", fmt::int64())});
  auto batch = fmt::RecordBatch::Make(schema, rows, std::move(columns));
  batch.status().Abort("bench batch");
  return *batch;
}

std::shared_ptr<fmt::Buffer> WriteStream(const fmt::RecordBatch& batch,
                                         ipc::CompressionType codec) {
  ipc::IpcWriteOptions options;
  options.compression = codec;
  auto sink = ipc::BufferOutputStream::Create();
  sink.status().Abort("sink");
  auto writer = ipc::MakeStreamWriter(sink->get(), batch.schema(), options);
  writer.status().Abort("writer");
  (*writer)->WriteRecordBatch(batch).Abort("write");
  (*writer)->Close().Abort("close");
  auto out = (*sink)->Finish();
  out.status().Abort("finish");
  return *out;
}

void BM_OpenBatch(benchmark::State& state) {
  const int64_t body_bytes = state.range(0);
  auto stream = WriteStream(*MakeBatch(body_bytes), ipc::CompressionType::kNone);
  // Position of the record batch message: after the schema message.
  ipc::BufferReader reader(stream);
  auto schema_message = ipc::ReadMessage(&reader);
  schema_message.status().Abort("schema message");
  ipc::DictionaryMemo memo;
  auto schema = ipc::ReadSchema(**schema_message, &memo);
  schema.status().Abort("schema");
  auto batch_offset = reader.Tell();
  batch_offset.status().Abort("tell");
  auto tail = fmt::SliceBuffer(stream, *batch_offset, stream->size() - *batch_offset);

  for (auto _ : state) {
    ipc::BufferReader source(tail);
    auto message = ipc::ReadMessage(&source);
    auto batch = ipc::ReadRecordBatch(**message, *schema, &memo);
    if (!batch.ok()) state.SkipWithError(batch.status().ToString().c_str());
    // The consumer's first touch: the first and last value of a column.
    auto col = std::static_pointer_cast<fmt::Int64Array>((*batch)->column(1));
    benchmark::DoNotOptimize(col->Value(0) + col->Value(col->length() - 1));
  }
  state.counters["body_bytes"] = static_cast<double>(body_bytes);
}
BENCHMARK(BM_OpenBatch)->Arg(1 << 20)->Arg(64 << 20)->Arg(1 << 30)->Unit(benchmark::kMicrosecond);

void BM_MemcpyBody(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  auto src = fmt::AllocateBuffer(static_cast<int64_t>(bytes));
  auto dst = fmt::AllocateBuffer(static_cast<int64_t>(bytes));
  src.status().Abort("src");
  dst.status().Abort("dst");
  std::memset((*src)->mutable_data(), 1, bytes);
  for (auto _ : state) {
    std::memcpy((*dst)->mutable_data(), (*src)->data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_MemcpyBody)->Arg(1 << 20)->Arg(64 << 20)->Arg(1 << 30)->Unit(benchmark::kMicrosecond);

constexpr int64_t kThroughputBody = 16 << 20;

void BM_Write(benchmark::State& state) {
  const auto codec = static_cast<ipc::CompressionType>(state.range(0));
  auto batch = MakeBatch(kThroughputBody);
  int64_t written = 0;
  for (auto _ : state) written = WriteStream(*batch, codec)->size();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kThroughputBody);
  state.counters["ratio"] = static_cast<double>(kThroughputBody) / static_cast<double>(written);
}

void BM_Read(benchmark::State& state) {
  const auto codec = static_cast<ipc::CompressionType>(state.range(0));
  auto stream = WriteStream(*MakeBatch(kThroughputBody), codec);
  for (auto _ : state) {
    auto source = std::make_shared<ipc::BufferReader>(stream);
    auto reader = ipc::RecordBatchStreamReader::Open(source);
    auto batch = (*reader)->ReadNext();
    if (!batch.ok() || *batch == nullptr) state.SkipWithError("read failed");
    benchmark::DoNotOptimize(batch);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kThroughputBody);
}

void CodecArgs(benchmark::internal::Benchmark* b) {
  b->ArgName("codec");  // 0 none, 1 lz4 frame, 2 zstd
  for (auto c : {ipc::CompressionType::kNone, ipc::CompressionType::kLz4Frame,
                 ipc::CompressionType::kZstd}) {
    b->Arg(static_cast<int64_t>(c));
  }
  b->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_Write)->Apply(CodecArgs);
BENCHMARK(BM_Read)->Apply(CodecArgs);

}  // namespace

BENCHMARK_MAIN();
