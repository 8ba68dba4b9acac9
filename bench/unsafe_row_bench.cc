// UnsafeRow benchmarks: encoding a record batch into a row batch and decoding
// it back, for a mixed schema (int32, int64, double, a string, a list of
// int64), beside the columnar path on the same data in the same run (write an
// IPC stream / read it back). Counters: rows/s and bytes/s, where bytes are
// the row batch's size for the row paths and the stream's size for IPC.

#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "alkaid/format/builder.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/ipc/writer.h"
#include "alkaid/format/unsafe_row.h"

namespace {

namespace fmt = alkaid::format;
namespace ipc = alkaid::format::ipc;

constexpr int64_t kRows = 1 << 16;

fmt::RecordBatchPtr MakeBatch() {
  auto schema = fmt::schema({fmt::field("id", fmt::int32()), fmt::field("n", fmt::int64()),
                             fmt::field("x", fmt::float64()), fmt::field("name", fmt::utf8()),
                             fmt::field("tags", fmt::list(fmt::int64()))});
  fmt::Int32Builder id;
  fmt::Int64Builder n;
  fmt::DoubleBuilder x;
  fmt::StringBuilder name;
  fmt::ListBuilder tags(std::make_unique<fmt::Int64Builder>());
  auto* tag_values = static_cast<fmt::Int64Builder*>(tags.value_builder());
  for (int64_t i = 0; i < kRows; ++i) {
    id.Append(static_cast<int32_t>(i)).Abort("id");
    if (i % 10 == 3) {
      n.AppendNull().Abort("n");
    } else {
      n.Append(i * 7919).Abort("n");
    }
    x.Append(static_cast<double>(i) / 3).Abort("x");
    name.Append("customer-" + std::to_string(i % 5000)).Abort("name");
    tags.Append().Abort("tags");
    for (int64_t k = 0; k < i % 5; ++k) tag_values->Append(i + k).Abort("tag");
  }
  std::vector<fmt::ArrayPtr> columns;
  for (fmt::ArrayBuilder* b :
       std::initializer_list<fmt::ArrayBuilder*>{&id, &n, &x, &name, &tags}) {
    auto a = b->Finish();
    a.status().Abort("finish");
    columns.push_back(*a);
  }
  auto batch = fmt::RecordBatch::Make(schema, kRows, columns);
  batch.status().Abort("batch");
  return *batch;
}

const fmt::RecordBatchPtr& Batch() {
  static const fmt::RecordBatchPtr batch = MakeBatch();
  return batch;
}

std::shared_ptr<fmt::Buffer> WriteStream(const fmt::RecordBatch& batch) {
  auto sink = ipc::BufferOutputStream::Create();
  sink.status().Abort("sink");
  auto writer = ipc::MakeStreamWriter(sink->get(), batch.schema(), {});
  writer.status().Abort("writer");
  (*writer)->WriteRecordBatch(batch).Abort("write");
  (*writer)->Close().Abort("close");
  auto out = (*sink)->Finish();
  out.status().Abort("finish");
  return *out;
}

void SetCounters(benchmark::State& state, int64_t bytes) {
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(kRows), benchmark::Counter::kIsIterationInvariantRate);
  state.SetBytesProcessed(state.iterations() * bytes);
}

void BM_RowsEncode(benchmark::State& state) {
  const auto& batch = Batch();
  int64_t bytes = 0;
  for (auto _ : state) {
    auto rows = fmt::EncodeRowBatch(*batch);
    if (!rows.ok()) state.SkipWithError(rows.status().ToString().c_str());
    bytes = (*rows)->size();
    benchmark::DoNotOptimize((*rows)->data());
  }
  SetCounters(state, bytes);
}
BENCHMARK(BM_RowsEncode)->Unit(benchmark::kMillisecond);

void BM_RowsDecode(benchmark::State& state) {
  const auto& batch = Batch();
  auto rows = fmt::EncodeRowBatch(*batch);
  rows.status().Abort("encode");
  for (auto _ : state) {
    auto decoded = fmt::DecodeRowBatch(**rows, batch->schema());
    if (!decoded.ok()) state.SkipWithError(decoded.status().ToString().c_str());
    benchmark::DoNotOptimize(decoded->get());
  }
  SetCounters(state, (*rows)->size());
}
BENCHMARK(BM_RowsDecode)->Unit(benchmark::kMillisecond);

void BM_IpcStreamWrite(benchmark::State& state) {
  const auto& batch = Batch();
  int64_t bytes = 0;
  for (auto _ : state) {
    auto stream = WriteStream(*batch);
    bytes = stream->size();
    benchmark::DoNotOptimize(stream->data());
  }
  SetCounters(state, bytes);
}
BENCHMARK(BM_IpcStreamWrite)->Unit(benchmark::kMillisecond);

void BM_IpcStreamRead(benchmark::State& state) {
  auto stream = WriteStream(*Batch());
  for (auto _ : state) {
    auto source = std::make_shared<ipc::BufferReader>(stream);
    auto reader = ipc::RecordBatchStreamReader::Open(source);
    if (!reader.ok()) state.SkipWithError(reader.status().ToString().c_str());
    auto batch = (*reader)->ReadNext();
    if (!batch.ok()) state.SkipWithError(batch.status().ToString().c_str());
    benchmark::DoNotOptimize(batch->get());
  }
  SetCounters(state, stream->size());
}
BENCHMARK(BM_IpcStreamRead)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
