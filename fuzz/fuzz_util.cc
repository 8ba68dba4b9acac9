#include "fuzz_util.h"

#include <cstring>

#include "alkaid/format/pretty_print.h"
#include "alkaid/format/validate.h"

namespace alkaid::fuzz {

std::shared_ptr<format::Buffer> ToBuffer(const uint8_t* data, size_t size) {
  auto buffer = format::AllocateBuffer(static_cast<int64_t>(size));
  if (!buffer.ok()) return nullptr;
  if (size > 0) std::memcpy((*buffer)->mutable_data(), data, size);
  return *std::move(buffer);
}

void Exercise(const format::RecordBatch& batch) {
  if (!format::ValidateFull(batch).ok()) return;
  for (int c = 0; c < batch.num_columns(); ++c) {
    auto column = batch.column(c);
    for (int64_t i = 0; i < column->length(); ++i) {
      (void)format::FormatValue(*column, i);
    }
  }
}

}  // namespace alkaid::fuzz
