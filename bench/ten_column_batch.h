#pragma once

// The 10-column batch the C Data Interface benches export, import and
// receive: 7 fixed-width columns, bool, utf8 (ASCII, 0..7 bytes) and
// list<int32>, every buffer filled; its size grows with `rows` only.

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "alkaid/format/array_data.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/type.h"

namespace alkaid::bench {

namespace af = alkaid::format;

inline std::shared_ptr<af::Buffer> Filled(int64_t size, uint8_t seed) {
  auto b = af::AllocateBuffer(size).ValueOrDie();
  for (int64_t i = 0; i < size; ++i) b->mutable_data()[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

inline af::ArrayDataPtr FixedColumn(af::TypePtr type, int64_t rows, int width, uint8_t seed) {
  return af::ArrayData::Make(std::move(type), rows, {nullptr, Filled(rows * width, seed)}, 0);
}

inline af::RecordBatchPtr TenColumnBatch(int64_t rows) {
  std::vector<af::ArrayDataPtr> cols;
  cols.push_back(FixedColumn(af::int8(), rows, 1, 1));
  cols.push_back(FixedColumn(af::int16(), rows, 2, 2));
  cols.push_back(FixedColumn(af::int32(), rows, 4, 3));
  cols.push_back(FixedColumn(af::int64(), rows, 8, 4));
  cols.push_back(FixedColumn(af::float32(), rows, 4, 5));
  cols.push_back(FixedColumn(af::float64(), rows, 8, 6));
  cols.push_back(FixedColumn(af::timestamp(af::TimeUnit::kMicro, "UTC"), rows, 8, 7));
  cols.push_back(af::ArrayData::Make(af::boolean(), rows, {nullptr, Filled((rows + 7) / 8, 8)}, 0));
  {
    auto offsets = af::AllocateBuffer((rows + 1) * 4).ValueOrDie();
    auto* o = offsets->mutable_data_as<int32_t>();
    o[0] = 0;
    for (int64_t i = 0; i < rows; ++i) o[i + 1] = o[i] + static_cast<int32_t>(i % 8);
    auto chars = af::AllocateBuffer(o[rows]).ValueOrDie();
    std::memset(chars->mutable_data(), 'a', static_cast<size_t>(o[rows]));
    cols.push_back(af::ArrayData::Make(af::utf8(), rows, {nullptr, offsets, chars}, 0));
  }
  {
    auto offsets = af::AllocateBuffer((rows + 1) * 4).ValueOrDie();
    auto* o = offsets->mutable_data_as<int32_t>();
    for (int64_t i = 0; i <= rows; ++i) o[i] = static_cast<int32_t>(2 * i);
    auto values = FixedColumn(af::int32(), 2 * rows, 4, 9);
    cols.push_back(
        af::ArrayData::Make(af::list(af::int32()), rows, {nullptr, offsets}, {values}, 0));
  }
  af::FieldVector fields;
  for (size_t i = 0; i < cols.size(); ++i) {
    fields.push_back(af::field("c" + std::to_string(i), cols[i]->type));
  }
  return af::RecordBatch::Make(af::schema(fields), rows, std::move(cols)).ValueOrDie();
}

}  // namespace alkaid::bench
