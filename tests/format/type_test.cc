#include "alkaid/format/type.h"

#include "test_util.h"

namespace alkaid::format {
namespace {

TEST(TypeTest, ToStringCoversParameters) {
  EXPECT_EQ(int32()->ToString(), "int32");
  EXPECT_EQ(timestamp(TimeUnit::kMicro, "UTC")->ToString(), "timestamp[us, tz=UTC]");
  EXPECT_EQ(decimal128(10, 2)->ToString(), "decimal128(10, 2)");
  EXPECT_EQ(list(int8())->ToString(), "list<item: int8>");
  EXPECT_EQ(fixed_size_list(uint8(), 4)->ToString(), "fixed_size_list<item: uint8>[4]");
  EXPECT_EQ(map(utf8(), int64(), true)->ToString(), "map<string, int64, keys_sorted>");
  EXPECT_EQ(dense_union({field("f", float32()), field("i", int32())}, {5, 7})->ToString(),
            "dense_union<f: float=5, i: int32=7>");
  EXPECT_EQ(run_end_encoded(int32(), float32())->ToString(),
            "run_end_encoded<run_ends: int32, values: float>");
}

TEST(TypeTest, EqualityComparesParametersAndChildren) {
  EXPECT_TRUE(list(int8())->Equals(list(int8())));
  EXPECT_FALSE(list(int8())->Equals(list(int16())));
  EXPECT_FALSE(list(int8())->Equals(large_list(int8())));
  EXPECT_FALSE(list(field("a", int8()))->Equals(list(field("b", int8()))));
  EXPECT_FALSE(timestamp(TimeUnit::kMicro)->Equals(timestamp(TimeUnit::kMicro, "UTC")));
  EXPECT_FALSE(decimal128(10, 2)->Equals(decimal128(10, 3)));
  EXPECT_FALSE(
      sparse_union({field("a", int8())}, {1})->Equals(sparse_union({field("a", int8())}, {2})));
  EXPECT_FALSE(map(utf8(), int8(), true)->Equals(map(utf8(), int8(), false)));
  EXPECT_FALSE(dictionary(int8(), utf8())->Equals(dictionary(int16(), utf8())));
  EXPECT_FALSE(dictionary(int8(), utf8(), true)->Equals(dictionary(int8(), utf8(), false)));
  EXPECT_FALSE(extension("a", "", int8())->Equals(extension("a", "x", int8())));
  // Map child names are conventional and do not take part in equality.
  auto renamed = MapType::Make(
      field("some_entries",
            struct_({field("some_key", utf8(), false), field("some_value", int8())}), false));
  ASSERT_TRUE(renamed.ok());
  EXPECT_TRUE(map(utf8(), int8())->Equals(*renamed));
  EXPECT_FALSE(map(utf8(), int16())->Equals(*renamed));
  auto md = std::make_shared<KeyValueMetadata>();
  md->Append("k", "v");
  auto with = struct_({field("a", int8(), true, md)});
  auto without = struct_({field("a", int8())});
  EXPECT_TRUE(with->Equals(without));
  EXPECT_FALSE(with->Equals(without, /*check_metadata=*/true));
}

TEST(TypeTest, FactoriesValidateParameters) {
  ASSERT_RAISES(kInvalid, DecimalType::Make(128, 39, 0));
  ASSERT_RAISES(kInvalid, DecimalType::Make(32, 10, 0));
  ASSERT_RAISES(kInvalid, DecimalType::Make(100, 5, 0));
  ASSERT_OK(DecimalType::Make(256, 76, 10));
  ASSERT_RAISES(kTypeError, DictionaryType::Make(utf8(), utf8()));
  ASSERT_RAISES(kTypeError, RunEndEncodedType::Make(int8(), utf8()));
  ASSERT_RAISES(kTypeError, UnionType::Make({field("a", int8()), field("b", int8())}, {1, 1},
                                            UnionMode::kDense));
  ASSERT_RAISES(kTypeError, UnionType::Make({field("a", int8())}, {-3}, UnionMode::kSparse));
  ASSERT_RAISES(kTypeError, MapType::Make(field("entries", struct_({field("k", utf8())}), false)));
}

TEST(TypeTest, LayoutsFollowTheSpecBufferTable) {
  using K = DataTypeLayout::BufferKind;
  EXPECT_EQ(null()->layout().buffers.size(), 1u);
  EXPECT_FALSE(null()->layout().has_validity);
  EXPECT_EQ(utf8()->layout().buffers.size(), 3u);
  EXPECT_EQ(large_utf8()->layout().buffers[1].byte_width, 8);
  EXPECT_TRUE(binary_view()->layout().variadic);
  EXPECT_EQ(list_view(int8())->layout().buffers.size(), 3u);
  EXPECT_EQ(fixed_size_list(int8(), 2)->layout().buffers.size(), 1u);
  EXPECT_EQ(sparse_union({field("a", int8())})->layout().buffers.size(), 1u);
  EXPECT_EQ(dense_union({field("a", int8())})->layout().buffers.size(), 2u);
  EXPECT_EQ(dictionary(int16(), utf8())->layout().buffers[1].byte_width, 2);
  EXPECT_TRUE(run_end_encoded(int16(), utf8())->layout().buffers.empty());
  EXPECT_EQ(boolean()->layout().buffers[1].kind, K::kBitmap);
  EXPECT_EQ(month_day_nano_interval()->layout().buffers[1].byte_width, 16);
  EXPECT_EQ(decimal256(40, 2)->layout().buffers[1].byte_width, 32);
}

TEST(SchemaTest, LookupAndMetadata) {
  auto md = std::make_shared<KeyValueMetadata>(
      std::vector<std::pair<std::string, std::string>>{{"a", "1"}, {"b", "2"}});
  auto s = schema({field("x", int32(), false), field("y", utf8())}, md);
  EXPECT_EQ(s->GetFieldIndex("y"), 1);
  EXPECT_EQ(s->GetFieldIndex("z"), -1);
  EXPECT_EQ(s->metadata()->Get("b"), "2");
  EXPECT_FALSE(s->metadata()->Get("c").has_value());
  EXPECT_EQ(s->metadata()->Without({"a"})->size(), 1u);
  EXPECT_TRUE(s->Equals(*schema(s->fields())));
  auto reordered = std::make_shared<KeyValueMetadata>(
      std::vector<std::pair<std::string, std::string>>{{"b", "2"}, {"a", "1"}});
  EXPECT_TRUE(md->Equals(*reordered));
  EXPECT_FALSE(md->Equals(KeyValueMetadata({{"a", "1"}, {"b", "3"}})));
  EXPECT_FALSE(s->Equals(*schema(s->fields()), /*check_metadata=*/true));
  EXPECT_NE(s->ToString().find("x: int32 not null"), std::string::npos);
}

}  // namespace
}  // namespace alkaid::format
