#pragma once

// The shape and bodies the BatchTemplate tests share: an int64 column and a
// list<int32> column over a 192-byte body, and a keeper counting the
// bodies held.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "alkaid/format/array.h"
#include "alkaid/format/batch_template.h"

namespace alkaid::format::testing {

// A body keeper that counts how many bodies are held.
struct Keeper {
  std::atomic<int>* held = nullptr;
  explicit Keeper(std::atomic<int>* h) : held(h) { held->fetch_add(1); }
  Keeper(Keeper&& o) noexcept : held(o.held) { o.held = nullptr; }
  Keeper(const Keeper&) = delete;
  Keeper& operator=(const Keeper&) = delete;
  Keeper& operator=(Keeper&&) = delete;
  ~Keeper() {
    if (held != nullptr) held->fetch_sub(1);
  }
};

inline constexpr int64_t kRows = 4;

// A body: int64 column "a" (4 values at 0), then list<int32> "b": offsets
// (5 int32 at 64), values (8 int32 at 128).
struct Body {
  alignas(64) uint8_t bytes[192] = {};
  explicit Body(int64_t seed) {
    auto* a = reinterpret_cast<int64_t*>(bytes);
    for (int i = 0; i < kRows; ++i) a[i] = seed + i;
    auto* off = reinterpret_cast<int32_t*>(bytes + 64);
    for (int i = 0; i <= kRows; ++i) off[i] = 2 * i;
    auto* v = reinterpret_cast<int32_t*>(bytes + 128);
    for (int i = 0; i < 2 * kRows; ++i) v[i] = static_cast<int32_t>(seed * 100 + i);
  }
};

inline BatchShape Shape() {
  BatchShape s;
  s.schema = schema({field("a", int64(), false), field("b", list(int32()))});
  s.num_rows = kRows;
  s.body_length = 192;
  BatchShape::Node a{int64(), kRows, 0, 0, {{-1, 0}, {0, 32}}, {}};
  BatchShape::Node values{int32(), 2 * kRows, 0, 0, {{-1, 0}, {128, 32}}, {}};
  BatchShape::Node b{list(int32()), kRows, 0, 0, {{-1, 0}, {64, 20}}, {1}};
  s.nodes = {a, values, b};
  s.columns = {0, 2};
  return s;
}

inline void ExpectValues(const RecordBatch& batch, int64_t seed) {
  ASSERT_EQ(batch.num_rows(), kRows);
  auto a = std::static_pointer_cast<Int64Array>(batch.column(0));
  auto b = std::static_pointer_cast<ListArray>(batch.column(1));
  for (int i = 0; i < kRows; ++i) {
    EXPECT_EQ(a->Value(i), seed + i);
    auto slot = std::static_pointer_cast<Int32Array>(b->value_slice(i));
    ASSERT_EQ(slot->length(), 2);
    EXPECT_EQ(slot->Value(1), seed * 100 + 2 * i + 1);
  }
}

}  // namespace alkaid::format::testing
