// Cost of handing a 10-column record batch through the Arrow C Data
// Interface (c_data.h): export + release, and import + release (structural
// validation, and full validation), at 1,000 and 1,000,000 rows. Export and
// structural import touch no buffer, so their cost must not depend on the row
// count; full validation reads every offset and string, so it must.
// Baseline in the same run: copying the batch's shared_ptr-held columns
// into a new RecordBatch (RecordBatch::Make over the same ArrayData).
//
//   alkaid_c_data_bench                       Google Benchmark rows
//   alkaid_c_data_bench --callgrind MODE ROWS N
//       runs MODE (export | import | import_full | baseline) N times, each
//       call in a function named CallgrindTarget*, for
//       valgrind --tool=callgrind --toggle-collect='*CallgrindTarget*'

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "alkaid/format/buffer.h"
#include "alkaid/format/c_data.h"
#include "alkaid/format/record_batch.h"
#include "ten_column_batch.h"

namespace af = alkaid::format;

namespace {

using alkaid::bench::TenColumnBatch;

[[gnu::noinline]] void CallgrindTargetExport(const af::RecordBatch& batch) {
  ArrowArray c;
  if (!af::ExportRecordBatch(batch, &c).ok()) std::abort();
  c.release(&c);
}

[[gnu::noinline]] void CallgrindTargetImport(ArrowArray* c, const af::SchemaPtr& schema,
                                             const af::CImportOptions& options) {
  auto batch = af::ImportRecordBatch(c, schema, options);
  if (!batch.ok()) std::abort();
  // The batch (and with it the foreign struct) is released here.
}

[[gnu::noinline]] void CallgrindTargetBaseline(const af::RecordBatch& batch) {
  auto copy = af::RecordBatch::Make(batch.schema(), batch.num_rows(), batch.columns());
  benchmark::DoNotOptimize(copy);
}

af::CImportOptions Structural() {
  af::CImportOptions o;
  o.validate_full = false;
  return o;
}

void BM_ExportRelease(benchmark::State& state) {
  auto batch = TenColumnBatch(state.range(0));
  for (auto _ : state) CallgrindTargetExport(*batch);
}

void ImportBench(benchmark::State& state, const af::CImportOptions& options) {
  auto batch = TenColumnBatch(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    ArrowArray c;
    if (!af::ExportRecordBatch(*batch, &c).ok()) std::abort();
    state.ResumeTiming();
    CallgrindTargetImport(&c, batch->schema(), options);
  }
}
void BM_ImportRelease(benchmark::State& state) { ImportBench(state, Structural()); }
void BM_ImportReleaseValidateFull(benchmark::State& state) { ImportBench(state, {}); }

void BM_BaselineRebuildBatch(benchmark::State& state) {
  auto batch = TenColumnBatch(state.range(0));
  for (auto _ : state) CallgrindTargetBaseline(*batch);
}

BENCHMARK(BM_BaselineRebuildBatch)->Arg(1000)->Arg(1000000);
BENCHMARK(BM_ExportRelease)->Arg(1000)->Arg(1000000);
BENCHMARK(BM_ImportRelease)->Arg(1000)->Arg(1000000);
BENCHMARK(BM_ImportReleaseValidateFull)->Arg(1000)->Arg(1000000);

int RunForCallgrind(const std::string& mode, int64_t rows, int n) {
  auto batch = TenColumnBatch(rows);
  for (int i = 0; i < n; ++i) {
    if (mode == "export") {
      CallgrindTargetExport(*batch);
    } else if (mode == "baseline") {
      CallgrindTargetBaseline(*batch);
    } else if (mode == "import" || mode == "import_full") {
      ArrowArray c;
      if (!af::ExportRecordBatch(*batch, &c).ok()) return 1;
      CallgrindTargetImport(&c, batch->schema(),
                            mode == "import" ? Structural() : af::CImportOptions{});
    } else {
      std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
      return 2;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--callgrind") {
    return RunForCallgrind(argv[2], std::atoll(argv[3]), std::atoi(argv[4]));
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
