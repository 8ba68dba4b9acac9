// Builds a small record batch through the installed headers and library.
#include <cstdio>

#include "alkaid/format/array.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/type.h"

namespace fmt = alkaid::format;

int main() {
  auto values = fmt::AllocateBuffer(3 * sizeof(int32_t));
  if (!values.ok()) return 1;
  auto* v = (*values)->mutable_data_as<int32_t>();
  v[0] = 1;
  v[1] = 2;
  v[2] = 40;
  auto data = fmt::ArrayData::Make(fmt::int32(), 3, {nullptr, *values}, 0);
  auto batch = fmt::RecordBatch::Make(fmt::schema({fmt::field("x", fmt::int32())}), 3, {data});
  if (!batch.ok()) {
    std::fprintf(stderr, "%s\n", batch.status().ToString().c_str());
    return 1;
  }
  auto column = std::static_pointer_cast<fmt::Int32Array>((*batch)->column(0));
  const int sum = column->Value(0) + column->Value(1) + column->Value(2);
  std::printf("sum=%d\n", sum);
  return sum == 43 ? 0 : 1;
}
