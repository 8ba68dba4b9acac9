// A tiny shared library for tests/interop/pyarrow_import_test.py: fills
// ArrowArray/ArrowSchema/ArrowArrayStream structs the Python side allocated
// (ctypes) with an Alkaid batch, for pyarrow's _import_from_c.

#include <cstdint>

#include "alkaid/common/export.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/c_data.h"

namespace af = alkaid::format;

namespace {

af::SchemaPtr Schema() {
  return af::schema({af::field("id", af::int64()), af::field("name", af::utf8())});
}

// ids first..first+rows-1, names "n<id>" (every third one null).
alkaid::Result<af::RecordBatchPtr> Batch(int64_t first, int64_t rows) {
  af::Int64Builder ids;
  af::StringBuilder names;
  for (int64_t i = first; i < first + rows; ++i) {
    ALKAID_RETURN_NOT_OK(ids.Append(i));
    ALKAID_RETURN_NOT_OK(i % 3 == 0 ? names.AppendNull() : names.Append("n" + std::to_string(i)));
  }
  ALKAID_ASSIGN_OR_RAISE(auto a, ids.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto b, names.Finish());
  return af::RecordBatch::Make(Schema(), rows, {a, b});
}

}  // namespace

extern "C" {

// 0 on success.
ALKAID_EXPORT int alkaid_test_export_batch(ArrowArray* array, ArrowSchema* schema, int64_t rows) {
  auto batch = Batch(0, rows);
  if (!batch.ok()) return 1;
  return af::ExportRecordBatch(**batch, array, schema).ok() ? 0 : 2;
}

// A stream of `batches` batches of `rows` rows, ids counting on.
ALKAID_EXPORT int alkaid_test_export_stream(ArrowArrayStream* stream, int64_t batches,
                                            int64_t rows) {
  std::vector<af::RecordBatchPtr> all;
  for (int64_t b = 0; b < batches; ++b) {
    auto batch = Batch(b * rows, rows);
    if (!batch.ok()) return 1;
    all.push_back(*batch);
  }
  return af::ExportRecordBatchStream(Schema(), std::move(all), stream).ok() ? 0 : 2;
}

}  // extern "C"
