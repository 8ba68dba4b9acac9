#include "alkaid/format/compare.h"

#include "alkaid/format/pretty_print.h"
#include "alkaid/format/record_batch.h"

namespace alkaid::format {

// Interim implementation: compares the single-line text form of each slot.
Status CheckArrayEquals(const Array& expected, const Array& actual, const EqualOptions& options) {
  if (!expected.type()->Equals(*actual.type(), options.check_metadata)) {
    return Status::Invalid("type: expected ", expected.type()->ToString(), ", got ",
                           actual.type()->ToString());
  }
  if (expected.length() != actual.length()) {
    return Status::Invalid("length: expected ", expected.length(), ", got ", actual.length());
  }
  for (int64_t i = 0; i < expected.length(); ++i) {
    std::string e = FormatValue(expected, i);
    std::string a = FormatValue(actual, i);
    if (e != a) return Status::Invalid("slot ", i, ": expected ", e, ", got ", a);
  }
  return Status::OK();
}

bool ArrayEquals(const Array& a, const Array& b, const EqualOptions& options) {
  return CheckArrayEquals(a, b, options).ok();
}

Status CheckRecordBatchEquals(const RecordBatch& expected, const RecordBatch& actual,
                              const EqualOptions& options) {
  if (expected.num_rows() != actual.num_rows()) {
    return Status::Invalid("num_rows: expected ", expected.num_rows(), ", got ",
                           actual.num_rows());
  }
  if (!expected.schema()->Equals(*actual.schema(), options.check_metadata)) {
    return Status::Invalid("schema: expected ", expected.schema()->ToString(), ", got ",
                           actual.schema()->ToString());
  }
  for (int i = 0; i < expected.num_columns(); ++i) {
    Status st = CheckArrayEquals(*expected.column(i), *actual.column(i), options);
    if (!st.ok()) {
      return Status::Invalid("column '", expected.schema()->field(i)->name(), "' (", i,
                             "): ", st.message());
    }
  }
  return Status::OK();
}

}  // namespace alkaid::format
