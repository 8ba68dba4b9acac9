// Arrays from the builders pass full validation, for every type.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "alkaid/format/builder.h"
#include "alkaid/format/validate.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

std::vector<TypePtr> AllTypes() {
  return {
      null(),
      boolean(),
      int8(),
      int16(),
      int32(),
      int64(),
      uint8(),
      uint16(),
      uint32(),
      uint64(),
      float16(),
      float32(),
      float64(),
      decimal32(9, 2),
      decimal64(18, 3),
      decimal128(38, 10),
      decimal256(76, 0),
      date32(),
      date64(),
      time32(TimeUnit::kSecond),
      time64(TimeUnit::kMicro),
      timestamp(TimeUnit::kNano, "Europe/Paris"),
      duration(TimeUnit::kMilli),
      month_interval(),
      day_time_interval(),
      month_day_nano_interval(),
      fixed_size_binary(5),
      binary(),
      utf8(),
      large_binary(),
      large_utf8(),
      binary_view(),
      utf8_view(),
      list(int32()),
      large_list(utf8()),
      list_view(float64()),
      large_list_view(binary()),
      fixed_size_list(int16(), 3),
      map(utf8(), list(int8())),
      struct_({field("a", int8()), field("b", utf8(), false)}),
      sparse_union({field("x", int32()), field("y", utf8())}, {3, 7}),
      dense_union({field("x", int32()), field("y", list(utf8()))}),
      dictionary(int16(), utf8()),
      dictionary(uint8(), decimal128(10, 2)),
      run_end_encoded(int16(), utf8()),
      run_end_encoded(int64(), struct_({field("p", int8())})),
      extension("alkaid.test", "meta", list(int32())),
      list(struct_({field("m", map(int32(), dense_union({field("z", boolean())})))})),
  };
}

TEST(BuilderValidate, EmptyValuesAndNullsOfEveryType) {
  for (const auto& type : AllTypes()) {
    SCOPED_TRACE(type->ToString());
    ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(type));
    ASSERT_OK(b->AppendEmptyValue());
    ASSERT_OK(b->AppendNull());
    ASSERT_OK(b->AppendEmptyValues(3));
    ASSERT_OK(b->AppendNulls(2));
    ASSERT_OK(b->AppendEmptyValue());
    EXPECT_EQ(b->length(), 8);
    ASSERT_OK_AND_ASSIGN(ArrayPtr a, b->Finish());
    EXPECT_EQ(a->length(), 8);
    EXPECT_EQ(a->offset(), 0);
    EXPECT_TRUE(a->type()->Equals(*type));
    ASSERT_OK(ValidateFull(*a));
    // Logical nulls where AppendNull put them.
    EXPECT_TRUE(a->IsNull(1));
    EXPECT_TRUE(a->IsNull(5));
    if (type->id() != TypeId::kNull) {
      EXPECT_FALSE(a->IsNull(0));
      EXPECT_FALSE(a->IsNull(7));
    }
    // An empty builder finishes to a valid empty array.
    ASSERT_OK_AND_ASSIGN(ArrayPtr empty, b->Finish());
    EXPECT_EQ(empty->length(), 0);
    ASSERT_OK(ValidateFull(*empty));
  }
}

TEST(BuilderValidate, RealValues) {
  // Strings spread over several view blocks.
  StringViewBuilder views(utf8_view(), default_memory_pool(), 64);
  for (int k = 0; k < 50; ++k) {
    if (k % 9 == 0) {
      ASSERT_OK(views.AppendNull());
    } else {
      ASSERT_OK(views.Append(std::string(static_cast<size_t>(k), static_cast<char>('a' + k % 26))));
    }
  }
  ASSERT_OK_AND_ASSIGN(ArrayPtr va, views.Finish());
  ASSERT_OK(ValidateFull(*va));
  EXPECT_GT(static_cast<const BinaryViewArray&>(*va).num_data_buffers(), 5);

  // Decimals at full precision.
  DecimalBuilder dec(decimal128(38, 4));
  ASSERT_OK(dec.AppendDecimal("-" + std::string(34, '9') + ".9999"));
  ASSERT_OK(dec.AppendDecimal("0.0001"));
  ASSERT_OK_AND_ASSIGN(ArrayPtr da, dec.Finish());
  ASSERT_OK(ValidateFull(*da));

  // Map with several entries and a null slot.
  ASSERT_OK_AND_ASSIGN(auto mb, MakeBuilder(map(utf8(), int64())));
  auto* m = static_cast<MapBuilder*>(mb.get());
  for (int k = 0; k < 10; ++k) {
    if (k == 4) {
      ASSERT_OK(m->AppendNull());
      continue;
    }
    ASSERT_OK(m->Append());
    for (int e = 0; e < k % 3; ++e) {
      ASSERT_OK(static_cast<StringBuilder*>(m->key_builder())->Append("k" + std::to_string(e)));
      ASSERT_OK(static_cast<Int64Builder*>(m->item_builder())->Append(e));
    }
  }
  ASSERT_OK_AND_ASSIGN(ArrayPtr ma, mb->Finish());
  ASSERT_OK(ValidateFull(*ma));

  // Dictionary with deltas: every finished array is valid on its own.
  DictionaryBuilder dict(dictionary(int8(), large_utf8()));
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < 20; ++k) ASSERT_OK(dict.Append("w" + std::to_string((k * 7 + round) % 13)));
    ASSERT_OK(dict.AppendNull());
    ASSERT_OK_AND_ASSIGN(DictionaryDelta out, dict.FinishDelta());
    ASSERT_OK(ValidateFull(*out.array));
    ASSERT_OK(ValidateFull(*out.delta));
  }

  // Run-end encoded with merged runs.
  ASSERT_OK_AND_ASSIGN(auto rb, MakeBuilder(run_end_encoded(int32(), float64())));
  auto* r = static_cast<RunEndEncodedBuilder*>(rb.get());
  for (int k = 0; k < 100; ++k) {
    if (k % 10 < 3) {
      ASSERT_OK(r->AppendNull());
    } else {
      ASSERT_OK(r->Append(static_cast<double>(k / 10)));
    }
  }
  EXPECT_EQ(r->num_runs(), 20);
  ASSERT_OK_AND_ASSIGN(ArrayPtr ra, rb->Finish());
  ASSERT_OK(ValidateFull(*ra));
}

}  // namespace
}  // namespace alkaid::format
