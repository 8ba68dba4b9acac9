// The Arrow C Data and C Stream Interfaces (c_data.h): every type and layout
// round trips export -> import without copying, the producer's lifetime
// rules hold (release once, children moved out and released in any order),
// and hostile structs give errors, never crashes.

#include "alkaid/format/c_data.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "alkaid/format/compare.h"
#include "alkaid/format/extension.h"
#include "alkaid/format/validate.h"
#include "ipc/ipc_test_util.h"
#include "raw_array_test_util.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

using testing::Binaries;
using testing::Bools;
using testing::Dict;
using testing::Fixed;
using testing::ListOf;
using testing::ListViewOf;
using testing::Nested;
using testing::Ree;
using testing::Retype;
using testing::Views;

ArrayPtr Ints(const std::vector<std::optional<int32_t>>& v) { return testing::Int32s(v); }
ArrayPtr Strs(const std::vector<std::optional<std::string>>& v, const std::string& lead = "") {
  return testing::Strings(v, lead);
}

// Export `array` with its type, import it back, check it is equal, valid and
// shares the exported memory.
void RoundTripArray(const ArrayPtr& array) {
  SCOPED_TRACE(array->type()->ToString());
  ArrowArray c_array;
  ArrowSchema c_schema;
  ASSERT_OK(ExportArray(*array, &c_array, &c_schema));
  ASSERT_OK_AND_ASSIGN(auto back, ImportArray(&c_array, &c_schema));
  EXPECT_EQ(c_array.release, nullptr);
  EXPECT_EQ(c_schema.release, nullptr);
  ASSERT_OK(ValidateFull(*back));
  ASSERT_TRUE(back->type()->Equals(*array->type(), /*check_metadata=*/true))
      << back->type()->ToString() << " vs " << array->type()->ToString();
  ASSERT_OK(CheckArrayEquals(*array, *back));
  EXPECT_EQ(back->offset(), array->offset());
  // Zero copy: the first present data buffer is the same memory.
  for (size_t i = 0; i < array->data()->buffers.size(); ++i) {
    const auto& b = array->data()->buffers[i];
    if (b == nullptr || b->size() == 0) continue;
    ASSERT_LT(i, back->data()->buffers.size());
    ASSERT_NE(back->data()->buffers[i], nullptr);
    EXPECT_EQ(back->data()->buffers[i]->data(), b->data()) << "buffer " << i;
    break;
  }
}

// Round trip of the array and of every one-slot-shorter slice at both ends.
void RoundTripWithSlices(const ArrayPtr& array) {
  RoundTripArray(array);
  if (array->length() >= 2) {
    RoundTripArray(array->Slice(1));
    RoundTripArray(array->Slice(0, array->length() - 1));
    RoundTripArray(array->Slice(1, 1));
  }
}

TEST(CDataTest, PrimitivesAndTemporal) {
  RoundTripWithSlices(Ints({1, std::nullopt, 3, 4}));
  RoundTripWithSlices(Bools({true, std::nullopt, false, true, true, false, false, true, true}));
  RoundTripWithSlices(Fixed<int8_t>(int8(), {1, -2, std::nullopt}));
  RoundTripWithSlices(Fixed<uint8_t>(uint8(), {1, 2, 3}));
  RoundTripWithSlices(Fixed<int16_t>(int16(), {1, std::nullopt, 3}));
  RoundTripWithSlices(Fixed<uint16_t>(uint16(), {1, 2, 3}));
  RoundTripWithSlices(Fixed<uint32_t>(uint32(), {1, 2, 3}));
  RoundTripWithSlices(Fixed<int64_t>(int64(), {1, std::nullopt, -3}));
  RoundTripWithSlices(Fixed<uint64_t>(uint64(), {1, 2, 3}));
  RoundTripWithSlices(Fixed<uint16_t>(float16(), {0x3c00, 0x4000, std::nullopt}));
  RoundTripWithSlices(Fixed<float>(float32(), {1.5f, std::nullopt, -2.0f}));
  RoundTripWithSlices(Fixed<double>(float64(), {1.5, 2.5, std::nullopt}));
  RoundTripWithSlices(Fixed<int32_t>(date32(), {1, 2, std::nullopt}));
  RoundTripWithSlices(Fixed<int64_t>(date64(), {86400000, std::nullopt, 0}));
  RoundTripWithSlices(Fixed<int32_t>(time32(TimeUnit::kSecond), {1, 2, 3}));
  RoundTripWithSlices(Fixed<int32_t>(time32(TimeUnit::kMilli), {1, 2, 3}));
  RoundTripWithSlices(Fixed<int64_t>(time64(TimeUnit::kMicro), {1, 2, 3}));
  RoundTripWithSlices(Fixed<int64_t>(time64(TimeUnit::kNano), {1, 2, 3}));
  for (TimeUnit u : {TimeUnit::kSecond, TimeUnit::kMilli, TimeUnit::kMicro, TimeUnit::kNano}) {
    RoundTripWithSlices(Fixed<int64_t>(timestamp(u), {1, std::nullopt, 3}));
    RoundTripWithSlices(Fixed<int64_t>(timestamp(u, "Europe/Paris"), {1, 2, 3}));
    RoundTripWithSlices(Fixed<int64_t>(duration(u), {-1, 2, std::nullopt}));
  }
  RoundTripWithSlices(Fixed<int32_t>(month_interval(), {1, 2, std::nullopt}));
  RoundTripWithSlices(Fixed<int64_t>(day_time_interval(), {1, 2, std::nullopt}));
  RoundTripWithSlices(Fixed<MonthDayNanoInterval>(month_day_nano_interval(),
                                                  {MonthDayNanoInterval{1, 2, 3}, std::nullopt}));
}

TEST(CDataTest, Decimals) {
  RoundTripWithSlices(Fixed<int32_t>(decimal32(9, 2), {12345, std::nullopt, -1}));
  RoundTripWithSlices(Fixed<int64_t>(decimal64(18, 3), {12345, std::nullopt, -1}));
  struct D128 {
    uint64_t lo;
    int64_t hi;
  };
  RoundTripWithSlices(Fixed<D128>(decimal128(38, 10), {D128{5, 0}, std::nullopt, D128{7, 0}}));
  struct D256 {
    uint64_t w[4];
  };
  RoundTripWithSlices(Fixed<D256>(decimal256(76, -5), {D256{{1, 0, 0, 0}}, std::nullopt}));
}

TEST(CDataTest, BinaryLike) {
  RoundTripWithSlices(Strs({"a", std::nullopt, "ccc", ""}, "junk"));
  RoundTripWithSlices(Binaries<int32_t>(binary(), {"\x01\x02", std::nullopt, ""}));
  RoundTripWithSlices(Binaries<int64_t>(large_utf8(), {"abc", std::nullopt, "de"}, "xy"));
  RoundTripWithSlices(Binaries<int64_t>(large_binary(), {"abc", "", "de"}));
  RoundTripWithSlices(Strs({"", ""}));  // empty data buffer
  RoundTripWithSlices(Fixed<uint32_t>(fixed_size_binary(4), {1, std::nullopt, 3}));
  const std::vector<std::optional<std::string>> values{"short",
                                                       std::nullopt,
                                                       "a value longer than twelve bytes",
                                                       "another long value here",
                                                       "x",
                                                       "and the third long one"};
  RoundTripWithSlices(Views(utf8_view(), values, 2, "lead"));
  RoundTripWithSlices(Views(binary_view(), values, 1));
  RoundTripWithSlices(Views(utf8_view(), {"tiny", "all", "inline"}, 0));
}

TEST(CDataTest, BinaryViewExportsVariadicSizes) {
  auto array = Views(utf8_view(), {"a value longer than twelve bytes", "b"}, 3, "lead");
  ArrowArray c;
  ASSERT_OK(ExportArray(*array, &c));
  ASSERT_EQ(c.n_buffers, 2 + 3 + 1);
  const auto* sizes = static_cast<const int64_t*>(c.buffers[5]);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(sizes[k], array->data()->buffers[2 + k]->size());
  c.release(&c);
  EXPECT_EQ(c.release, nullptr);
}

TEST(CDataTest, Nested) {
  auto child = Ints({1, 2, 3, 4, 5, 6});
  RoundTripWithSlices(ListOf<int32_t>(list(int32()), {0, 2, 2, 6}, {true, false, true}, child));
  RoundTripWithSlices(
      ListOf<int64_t>(large_list(field("x", int32(), false)), {1, 3, 6}, {true, true}, child));
  RoundTripWithSlices(
      ListViewOf<int32_t>(list_view(int32()), {4, 0, 1}, {2, 0, 3}, {true, false, true}, child));
  RoundTripWithSlices(ListViewOf<int64_t>(large_list_view(int32()), {4, 0, 1}, {2, 6, 3},
                                          {true, true, true}, child));
  RoundTripWithSlices(Nested(fixed_size_list(int32(), 2), {true, false, true}, {child}));
  auto st = struct_({field("a", int32()), field("b", utf8(), false)});
  RoundTripWithSlices(Nested(st, {true, false, true}, {Ints({1, 2, 3}), Strs({"x", "y", "z"})}));
  RoundTripWithSlices(Nested(struct_({}), {true, true}, {}));
  // map<utf8, int32>, keys sorted.
  auto keys = Strs({"k1", "k2", "k3"});
  auto items = Ints({1, std::nullopt, 3});
  auto map_type = map(utf8(), int32(), /*keys_sorted=*/true);
  auto entries = Nested(map_type->field(0)->type(), {true, true, true}, {keys, items});
  RoundTripWithSlices(ListOf<int32_t>(map_type, {0, 1, 1, 3}, {true, false, true}, entries));
}

TEST(CDataTest, UnionsRunEndEncodedNull) {
  auto a = Ints({1, 2, 3});
  auto b = Strs({"x", "y", "z"});
  auto sparse = sparse_union({field("a", int32()), field("b", utf8())}, {5, 9});
  RoundTripWithSlices(testing::SparseUnion(sparse, {5, 9, 5}, {a, b}));
  auto dense = dense_union({field("a", int32()), field("b", utf8())}, {3, 0});
  RoundTripWithSlices(testing::DenseUnion(dense, {3, 0, 0, 3}, {0, 0, 2, 1}, {a, b}));
  RoundTripWithSlices(Ree({2, 3, 7}, Strs({"a", std::nullopt, "c"})));
  auto nulls = MakeArray(ArrayData::Make(null(), 5, {}, 5));
  RoundTripWithSlices(nulls);
}

TEST(CDataTest, Dictionaries) {
  RoundTripWithSlices(Dict(Strs({"a", "b", std::nullopt}), {0, std::nullopt, 2, 1, 1}));
  // Ordered, and nested inside a list.
  auto ordered = Dict(Strs({"lo", "hi"}), {0, 1, 1});
  auto data = std::make_shared<ArrayData>(*ordered->data());
  data->type = dictionary(int8(), utf8(), /*ordered=*/true);
  RoundTripWithSlices(MakeArray(data));
  auto in_list = ListOf<int32_t>(list(data->type), {0, 1, 3}, {true, true}, MakeArray(data));
  RoundTripWithSlices(in_list);
}

TEST(CDataTest, ExportedDictionaryAndFlags) {
  auto type = dictionary(int16(), utf8(), /*ordered=*/true);
  ArrowSchema c;
  ASSERT_OK(ExportField(*field("d", type, /*nullable=*/false), &c));
  EXPECT_STREQ(c.format, "s");
  EXPECT_STREQ(c.name, "d");
  EXPECT_EQ(c.flags, ARROW_FLAG_DICTIONARY_ORDERED);
  ASSERT_NE(c.dictionary, nullptr);
  EXPECT_STREQ(c.dictionary->format, "u");
  c.release(&c);
  ASSERT_OK(ExportType(*timestamp(TimeUnit::kMicro, "UTC"), &c));
  EXPECT_STREQ(c.format, "tsu:UTC");
  EXPECT_EQ(c.flags, ARROW_FLAG_NULLABLE);
  c.release(&c);
  ASSERT_OK(ExportType(*dense_union({field("a", int32()), field("b", utf8())}, {3, 0}), &c));
  EXPECT_STREQ(c.format, "+ud:3,0");
  c.release(&c);
  ASSERT_OK(ExportType(*decimal32(7, 2), &c));
  EXPECT_STREQ(c.format, "d:7,2,32");
  c.release(&c);
  ASSERT_OK(ExportType(*map(utf8(), int32(), true), &c));
  EXPECT_STREQ(c.format, "+m");
  EXPECT_EQ(c.flags, ARROW_FLAG_NULLABLE | ARROW_FLAG_MAP_KEYS_SORTED);
  EXPECT_STREQ(c.children[0]->format, "+s");
  EXPECT_EQ(c.children[0]->flags, 0);
  c.release(&c);
}

TEST(CDataTest, ExtensionTypes) {
  const std::string name = "alkaid.test.c_data_ext";
  auto storage_array = Fixed<uint32_t>(fixed_size_binary(4), {1, std::nullopt, 3});
  auto ext = extension(name, "meta\x01", fixed_size_binary(4));
  auto ext_array = Retype(storage_array, ext);

  // Unregistered: storage type with the extension keys in the field metadata.
  ArrowArray c_array;
  ArrowSchema c_schema;
  ASSERT_OK(ExportArray(*ext_array, &c_array, &c_schema));
  ASSERT_NE(c_schema.metadata, nullptr);
  ArrowSchema copy_schema;
  ASSERT_OK(ExportType(*ext, &copy_schema));
  ASSERT_OK_AND_ASSIGN(FieldPtr f, ImportField(&copy_schema));
  EXPECT_TRUE(f->type()->Equals(*fixed_size_binary(4)));
  ASSERT_NE(f->metadata(), nullptr);
  EXPECT_EQ(f->metadata()->Get("ARROW:extension:name"), name);
  EXPECT_EQ(f->metadata()->Get("ARROW:extension:metadata"), "meta\x01");
  ASSERT_OK_AND_ASSIGN(auto plain, ImportArray(&c_array, &c_schema));
  ASSERT_OK(CheckArrayEquals(*storage_array, *plain));

  // Registered: the extension type comes back.
  ASSERT_OK(RegisterExtensionType(
      name, [name](const TypePtr& storage, const std::string& serialized) -> Result<TypePtr> {
        return extension(name, serialized, storage);
      }));
  RoundTripWithSlices(ext_array);
  // With field metadata beside the extension keys, on a dictionary storage.
  auto dict_array = Dict(Strs({"a", "b"}), {0, 1, 0});
  auto dict_ext = Retype(dict_array, extension(name, "", dict_array->type()));
  RoundTripWithSlices(dict_ext);
  auto sch = schema({field("e", ext, true,
                           std::make_shared<KeyValueMetadata>(
                               std::vector<std::pair<std::string, std::string>>{{"k", "v"}}))});
  ArrowSchema cs;
  ASSERT_OK(ExportSchema(*sch, &cs));
  ASSERT_OK_AND_ASSIGN(auto back, ImportSchema(&cs));
  EXPECT_TRUE(back->Equals(*sch, /*check_metadata=*/true)) << back->ToString();
  ASSERT_OK(UnregisterExtensionType(name));
}

TEST(CDataTest, SchemaMetadataAndNullability) {
  auto md = std::make_shared<KeyValueMetadata>(
      std::vector<std::pair<std::string, std::string>>{{"a", "1"}, {"", ""}, {"b", "x\0y"}});
  auto sch = schema({field("x", int32(), false, md), field("y", list(field("i", utf8(), false))),
                     field("", null())},
                    md);
  ArrowSchema c;
  ASSERT_OK(ExportSchema(*sch, &c));
  EXPECT_STREQ(c.format, "+s");
  EXPECT_EQ(c.flags, 0);
  ASSERT_OK_AND_ASSIGN(auto back, ImportSchema(&c));
  EXPECT_EQ(c.release, nullptr);
  EXPECT_TRUE(back->Equals(*sch, /*check_metadata=*/true)) << back->ToString();
}

// --- Record batches and gold files -------------------------------------------

void RoundTripBatch(const RecordBatch& batch) {
  ArrowArray c_array;
  ArrowSchema c_schema;
  ASSERT_OK(ExportRecordBatch(batch, &c_array, &c_schema));
  ASSERT_OK_AND_ASSIGN(auto back, ImportRecordBatch(&c_array, &c_schema));
  ASSERT_OK(ValidateFull(*back));
  ASSERT_TRUE(back->schema()->Equals(*batch.schema(), /*check_metadata=*/true))
      << back->schema()->ToString() << "\nvs\n"
      << batch.schema()->ToString();
  ASSERT_OK(CheckRecordBatchEquals(batch, *back));
}

class CDataGoldTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CDataGoldTest, ExportImportEqual) {
  ASSERT_OK_AND_ASSIGN(auto bytes,
                       ipc::ReadWholeFile(ipc::testing::GoldPath(GetParam(), ".stream")));
  SchemaPtr schema;
  ASSERT_OK_AND_ASSIGN(auto batches, ipc::testing::ReadStreamBuffer(bytes, &schema));
  ArrowSchema c_schema;
  ASSERT_OK(ExportSchema(*schema, &c_schema));
  ASSERT_OK_AND_ASSIGN(auto schema_back, ImportSchema(&c_schema));
  EXPECT_TRUE(schema_back->Equals(*schema, /*check_metadata=*/true));
  for (size_t i = 0; i < batches.size(); ++i) {
    SCOPED_TRACE("batch " + std::to_string(i));
    RoundTripBatch(*batches[i]);
    const int64_t n = batches[i]->num_rows();
    if (n >= 2) {
      RoundTripBatch(*batches[i]->Slice(1, n - 1));
      RoundTripBatch(*batches[i]->Slice(n / 2, 1));
    }
    for (int c = 0; c < batches[i]->num_columns(); ++c) {
      SCOPED_TRACE("column " + std::to_string(c));
      RoundTripArray(batches[i]->column(c));
    }
  }
  // As a stream.
  ArrowArrayStream stream;
  ASSERT_OK(ExportRecordBatchStream(schema, batches, &stream));
  ASSERT_OK_AND_ASSIGN(auto reader, CStreamReader::Import(&stream));
  EXPECT_EQ(stream.release, nullptr);
  ASSERT_OK_AND_ASSIGN(auto back, reader->ReadAll());
  ASSERT_EQ(back.size(), batches.size());
  for (size_t i = 0; i < back.size(); ++i) ASSERT_OK(CheckRecordBatchEquals(*batches[i], *back[i]));
}

INSTANTIATE_TEST_SUITE_P(Arrow21, CDataGoldTest, ::testing::ValuesIn(ipc::testing::GoldCases()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(CDataTest, GoldCasesPresent) { EXPECT_EQ(ipc::testing::GoldCases().size(), 32u); }

TEST(CDataTest, RecordBatchWithOffsetStructImportsSlicedColumns) {
  auto a = Ints({1, 2, 3, 4});
  auto b = Strs({"a", "b", "c", "d"});
  auto sch = schema({field("a", int32()), field("b", utf8())});
  ASSERT_OK_AND_ASSIGN(auto batch, RecordBatch::Make(sch, 4, std::vector<ArrayPtr>{a, b}));
  ArrowArray c;
  ASSERT_OK(ExportRecordBatch(*batch, &c));
  c.offset = 1;  // a consumer-side view of rows 1..2: the producer keeps ownership
  c.length = 2;
  ASSERT_OK_AND_ASSIGN(auto back, ImportRecordBatch(&c, sch));
  ASSERT_OK(CheckRecordBatchEquals(*batch->Slice(1, 2), *back));
}

// --- Lifetimes ---------------------------------------------------------------

TEST(CDataLifetimeTest, ExportKeepsDataAliveAfterTheSourceIsGone) {
  ArrowArray c;
  {
    auto array = Strs({"alpha", std::nullopt, "gamma"});
    ASSERT_OK(ExportArray(*array, &c));
  }
  ASSERT_OK_AND_ASSIGN(auto back, ImportArray(&c, utf8()));
  ASSERT_OK(CheckArrayEquals(*Strs({"alpha", std::nullopt, "gamma"}), *back));
}

ArrayPtr SampleStruct() {
  auto st =
      struct_({field("a", int32()), field("b", utf8()), field("d", dictionary(int8(), utf8()))});
  return Nested(st, {true, false, true},
                {Ints({1, 2, 3}), Strs({"x", "y", "z"}), Dict(Strs({"p", "q"}), {0, 1, 1})});
}

TEST(CDataLifetimeTest, ChildrenMovedOutOutliveTheirParent) {
  for (bool parent_first : {true, false}) {
    ArrowArray parent;
    ASSERT_OK(ExportArray(*SampleStruct(), &parent));
    ASSERT_EQ(parent.n_children, 3);
    // Move children 1 and 2 out (bitwise copy, mark the original released).
    ArrowArray strings = *parent.children[1];
    parent.children[1]->release = nullptr;
    ArrowArray dict = *parent.children[2];
    parent.children[2]->release = nullptr;
    ArrowArray dict_values = *dict.dictionary;  // and a grandchild out of it
    dict.dictionary->release = nullptr;
    if (parent_first) parent.release(&parent);
    ASSERT_OK_AND_ASSIGN(auto s, ImportArray(&strings, utf8()));
    ASSERT_OK(CheckArrayEquals(*Strs({"x", "y", "z"}), *s));
    ASSERT_OK_AND_ASSIGN(auto v, ImportArray(&dict_values, utf8()));
    ASSERT_OK(CheckArrayEquals(*Strs({"p", "q"}), *v));
    dict.release(&dict);  // its dictionary moved out: only the indices go
    if (!parent_first) parent.release(&parent);
    EXPECT_EQ(parent.release, nullptr);
  }
}

TEST(CDataLifetimeTest, SchemaChildMovedOut) {
  ArrowSchema parent;
  ASSERT_OK(ExportType(*SampleStruct()->type(), &parent));
  ArrowSchema child = *parent.children[2];
  parent.children[2]->release = nullptr;
  parent.release(&parent);
  ASSERT_OK_AND_ASSIGN(auto f, ImportField(&child));
  EXPECT_EQ(f->name(), "d");
  EXPECT_TRUE(f->type()->Equals(*dictionary(int8(), utf8())));
}

// A producer of our own: an int32 array over a vector, counting releases.
struct CountingProducer {
  std::vector<int32_t> values{10, 20, 30, 40};
  std::vector<const void*> buffers{nullptr, values.data()};
  int releases = 0;

  static void Release(ArrowArray* a) {
    ++static_cast<CountingProducer*>(a->private_data)->releases;
    a->release = nullptr;
  }
  ArrowArray Make() {
    ArrowArray a{};
    a.length = static_cast<int64_t>(values.size());
    a.null_count = 0;
    a.n_buffers = 2;
    a.buffers = buffers.data();
    a.release = &Release;
    a.private_data = this;
    return a;
  }
};

TEST(CDataLifetimeTest, ImportCallsReleaseOnceWhenTheLastReferenceGoes) {
  CountingProducer producer;
  ArrowArray c = producer.Make();
  ASSERT_OK_AND_ASSIGN(auto array, ImportArray(&c, int32()));
  EXPECT_EQ(c.release, nullptr);  // moved
  EXPECT_EQ(producer.releases, 0);
  EXPECT_EQ(array->data()->buffers[1]->data(),
            reinterpret_cast<const uint8_t*>(producer.values.data()));  // zero copy
  auto slice = array->Slice(1, 2);
  array.reset();
  EXPECT_EQ(producer.releases, 0);  // the slice still refers to it
  EXPECT_EQ(std::static_pointer_cast<Int32Array>(slice)->Value(0), 20);
  slice.reset();
  EXPECT_EQ(producer.releases, 1);
}

TEST(CDataLifetimeTest, ImportReleasesOnErrorToo) {
  CountingProducer producer;
  ArrowArray c = producer.Make();
  ASSERT_RAISES(kInvalid, ImportArray(&c, utf8()));  // 2 buffers where utf8 needs 3
  EXPECT_EQ(c.release, nullptr);
  EXPECT_EQ(producer.releases, 1);
  // A released struct is refused and not released again.
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "released", ImportArray(&c, int32()));
  EXPECT_EQ(producer.releases, 1);
}

TEST(CDataLifetimeTest, StreamFromAFunction) {
  auto sch = schema({field("a", int32())});
  int calls = 0;
  NextBatchFunction next = [&]() -> Result<RecordBatchPtr> {
    ++calls;
    if (calls == 4) return Status::IOError("the source broke");
    if (calls > 2) return RecordBatchPtr();
    return RecordBatch::Make(sch, 2, std::vector<ArrayPtr>{Ints({calls, calls})});
  };
  ArrowArrayStream stream;
  ASSERT_OK(ExportRecordBatchStream(sch, next, &stream));
  ASSERT_OK_AND_ASSIGN(auto reader, CStreamReader::Import(&stream));
  EXPECT_TRUE(reader->schema()->Equals(*sch));
  ASSERT_OK_AND_ASSIGN(auto all, reader->ReadAll());
  ASSERT_EQ(all.size(), 2u);
  ASSERT_OK(CheckArrayEquals(*Ints({2, 2}), *all[1]->column(0)));
  ASSERT_OK_AND_ASSIGN(auto after, reader->Next());  // stays at the end
  EXPECT_EQ(after, nullptr);

  // An error travels through get_last_error; a wrong schema is refused.
  calls = 3;
  ArrowArrayStream s2;
  ASSERT_OK(ExportRecordBatchStream(sch, next, &s2));
  ArrowArray out;
  EXPECT_EQ(s2.get_next(&s2, &out), EIO);
  EXPECT_NE(std::string(s2.get_last_error(&s2)).find("the source broke"), std::string::npos);
  s2.release(&s2);
  ArrowArrayStream s3;
  ASSERT_OK(ExportRecordBatchStream(schema({field("b", utf8())}), next, &s3));
  calls = 0;
  ASSERT_OK_AND_ASSIGN(auto r3, CStreamReader::Import(&s3));
  ASSERT_RAISES_WITH_MESSAGE(kIOError, "differs", r3->Next());
}

// --- Hostile structs ----------------------------------------------------------

// A hand-made producer whose structs the tests break one field at a time.
struct Hostile {
  std::vector<int32_t> ints{1, 2, 3, 4};
  std::vector<int32_t> offsets{0, 1, 3, 3, 6};
  std::string chars = "abcdef";
  uint8_t validity = 0x0b;  // 1101: slot 2 null
  std::vector<int32_t> six{1, 2, 3, 4, 5, 6};
  std::vector<const void*> buffers;
  std::vector<const void*> child_buffers;
  std::vector<ArrowArray*> child_ptrs;
  ArrowArray child{};
  int releases = 0;

  static void Release(ArrowArray* a) {
    ++static_cast<Hostile*>(a->private_data)->releases;
    a->release = nullptr;
  }
  static void ChildRelease(ArrowArray* a) { a->release = nullptr; }

  ArrowArray Int32Array() {
    buffers = {nullptr, ints.data()};
    return Node(4, 2);
  }
  ArrowArray StringArray() {
    buffers = {&validity, offsets.data(), chars.data()};
    ArrowArray a = Node(4, 3);
    a.null_count = 1;
    return a;
  }
  ArrowArray ListOfInt32() {
    buffers = {nullptr, offsets.data()};
    child_buffers = {nullptr, six.data()};
    child = ArrowArray{};
    child.length = 6;
    child.n_buffers = 2;
    child.buffers = child_buffers.data();
    child.release = &ChildRelease;
    child_ptrs = {&child};
    ArrowArray a = Node(4, 2);
    a.n_children = 1;
    a.children = child_ptrs.data();
    return a;
  }
  ArrowArray Node(int64_t length, int64_t n_buffers) {
    ArrowArray a{};
    a.length = length;
    a.n_buffers = n_buffers;
    a.buffers = buffers.data();
    a.release = &Release;
    a.private_data = this;
    return a;
  }
};

// Every case: an error (never a crash), and the struct released exactly once.
template <typename Mutate>
void ExpectRefused(ArrowArray (Hostile::*make)(), const TypePtr& type, Mutate mutate,
                   const std::string& message) {
  Hostile h;
  ArrowArray c = (h.*make)();
  mutate(c, h);
  auto r = ImportArray(&c, type);
  ASSERT_FALSE(r.ok()) << "accepted: " << message;
  EXPECT_NE(r.status().message().find(message), std::string::npos)
      << "'" << r.status().message() << "' lacks '" << message << "'";
  EXPECT_EQ(h.releases, 1) << message;
  EXPECT_EQ(c.release, nullptr);
}

TEST(CDataHostileTest, ValidStructsAreAccepted) {
  Hostile h;
  ArrowArray c = h.StringArray();
  ASSERT_OK_AND_ASSIGN(auto s, ImportArray(&c, utf8()));
  ASSERT_OK(CheckArrayEquals(*Strs({"a", "bc", std::nullopt, "def"}), *s));
  s.reset();
  c = h.ListOfInt32();
  ASSERT_OK_AND_ASSIGN(auto l, ImportArray(&c, list(int32())));
  EXPECT_EQ(l->length(), 4);
  l.reset();
  EXPECT_EQ(h.releases, 2);
}

TEST(CDataHostileTest, BadArrays) {
  using H = Hostile;
  ExpectRefused(
      &H::Int32Array, int32(), [](ArrowArray& c, H&) { c.length = -1; }, "negative");
  ExpectRefused(
      &H::Int32Array, int32(), [](ArrowArray& c, H&) { c.offset = -3; }, "negative");
  ExpectRefused(
      &H::Int32Array, int32(), [](ArrowArray& c, H&) { c.null_count = -2; }, "null_count");
  ExpectRefused(
      &H::Int32Array, int32(), [](ArrowArray& c, H&) { c.null_count = 5; }, "null_count");
  ExpectRefused(
      &H::Int32Array, int32(),
      [](ArrowArray& c, H&) { c.offset = std::numeric_limits<int64_t>::max(); }, "overflows");
  ExpectRefused(
      &H::Int32Array, int32(),
      [](ArrowArray& c, H&) { c.length = std::numeric_limits<int64_t>::max() / 2; }, "overflows");
  ExpectRefused(
      &H::Int32Array, int32(), [](ArrowArray& c, H&) { c.n_buffers = 1; }, "expected 2");
  ExpectRefused(
      &H::Int32Array, int32(), [](ArrowArray& c, H&) { c.n_buffers = 1 << 30; }, "expected 2");
  ExpectRefused(
      &H::Int32Array, int32(), [](ArrowArray& c, H&) { c.buffers = nullptr; }, "buffers is null");
  ExpectRefused(
      &H::Int32Array, int32(),
      [](ArrowArray& c, H& h) {
        h.buffers[1] = nullptr;
        (void)c;
      },
      "buffer 1 is null");
  ExpectRefused(
      &H::Int32Array, int32(), [](ArrowArray& c, H&) { c.null_count = 1; },
      "validity bitmap is null");
  ExpectRefused(
      &H::Int32Array, int32(), [](ArrowArray& c, H&) { c.n_children = 2; }, "children");
  ExpectRefused(
      &H::Int32Array, dictionary(int32(), utf8()), [](ArrowArray&, H&) {}, "no dictionary");
  ExpectRefused(
      &H::Int32Array, int32(), [](ArrowArray& c, H&) { c.dictionary = &c; }, "has a dictionary");
  // Strings: offsets beyond the data, non-monotonic offsets, wrong null count.
  ExpectRefused(
      &H::StringArray, utf8(), [](ArrowArray&, H& h) { h.offsets[2] = 100; }, "offset");
  ExpectRefused(
      &H::StringArray, utf8(), [](ArrowArray&, H& h) { h.offsets[4] = -6; }, "negative");
  ExpectRefused(
      &H::StringArray, utf8(), [](ArrowArray& c, H&) { c.null_count = 0; }, "null");
  ExpectRefused(
      &H::StringArray, utf8(), [](ArrowArray&, H& h) { h.chars[1] = '\xff'; }, "UTF-8");
  // Lists: child problems.
  ExpectRefused(
      &H::ListOfInt32, list(int32()), [](ArrowArray& c, H&) { c.children = nullptr; },
      "children is null");
  ExpectRefused(
      &H::ListOfInt32, list(int32()), [](ArrowArray&, H& h) { h.child_ptrs[0] = nullptr; },
      "ArrowArray is null");
  ExpectRefused(
      &H::ListOfInt32, list(int32()), [](ArrowArray&, H& h) { h.child.release = nullptr; },
      "released");
  ExpectRefused(
      &H::ListOfInt32, list(int32()), [](ArrowArray&, H& h) { h.child.length = 2; }, "");
  ExpectRefused(
      &H::ListOfInt32, list(int32()), [](ArrowArray& c, H&) { c.n_children = 0; }, "children");
  // A cycle: the child is the list itself.
  ExpectRefused(
      &H::ListOfInt32, list(list(list(int32()))), [](ArrowArray& c, H& h) { h.child_ptrs[0] = &c; },
      "");
}

TEST(CDataHostileTest, BadBinaryViews) {
  std::vector<uint8_t> views(32, 0);
  int32_t size = 20;
  std::memcpy(views.data(), &size, 4);  // slot 0: 20 bytes in buffer 0 at 0
  std::memcpy(views.data() + 4, "aaaa", 4);
  std::string data(20, 'a');
  int64_t sizes[1] = {20};
  const void* buffers[4] = {nullptr, views.data(), data.data(), sizes};
  int releases = 0;
  auto make = [&](int64_t n_buffers) {
    ArrowArray a{};
    a.length = 2;
    a.n_buffers = n_buffers;
    a.buffers = buffers;
    a.private_data = &releases;
    a.release = [](ArrowArray* x) {
      ++*static_cast<int*>(x->private_data);
      x->release = nullptr;
    };
    return a;
  };
  ArrowArray c = make(4);
  ASSERT_OK_AND_ASSIGN(auto ok, ImportArray(&c, utf8_view()));
  EXPECT_EQ(static_cast<const BinaryViewArray&>(*ok).GetView(0), data);
  ok.reset();
  c = make(2);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "at least 3", ImportArray(&c, utf8_view()));
  sizes[0] = -1;
  c = make(4);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "negative size", ImportArray(&c, utf8_view()));
  sizes[0] = 10;  // the view reaches past the buffer
  c = make(4);
  ASSERT_RAISES(kInvalid, ImportArray(&c, utf8_view()));
  buffers[3] = nullptr;
  c = make(4);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "sizes buffer is null", ImportArray(&c, utf8_view()));
  EXPECT_EQ(releases, 5);
}

// A hand-made schema tree whose fields the tests set freely.
struct HostileSchema {
  std::string format = "i";
  std::string name = "f";
  std::string metadata;
  std::vector<ArrowSchema*> child_ptrs;
  std::vector<ArrowSchema> children;
  int releases = 0;

  static void Release(ArrowSchema* s) {
    ++static_cast<HostileSchema*>(s->private_data)->releases;
    s->release = nullptr;
  }
  static void ChildRelease(ArrowSchema* s) { s->release = nullptr; }
  void AddChild(const char* fmt, const char* child_name, int64_t flags = ARROW_FLAG_NULLABLE) {
    ArrowSchema c{};
    c.format = fmt;
    c.name = child_name;
    c.flags = flags;
    c.release = &ChildRelease;
    children.push_back(c);
  }
  ArrowSchema Make() {
    child_ptrs.clear();
    for (auto& c : children) child_ptrs.push_back(&c);
    ArrowSchema s{};
    s.format = format.c_str();
    s.name = name.c_str();
    s.metadata = metadata.empty() ? nullptr : metadata.data();
    s.flags = ARROW_FLAG_NULLABLE;
    s.n_children = static_cast<int64_t>(children.size());
    s.children = children.empty() ? nullptr : child_ptrs.data();
    s.release = &Release;
    s.private_data = this;
    return s;
  }
};

void ExpectBadFormat(const std::string& format, int n_int_children, const std::string& message) {
  HostileSchema h;
  h.format = format;
  for (int i = 0; i < n_int_children; ++i) h.AddChild("i", "c");
  ArrowSchema s = h.Make();
  auto r = ImportType(&s);
  ASSERT_FALSE(r.ok()) << "accepted format '" << format.substr(0, 40) << "'";
  EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().message();
  EXPECT_EQ(h.releases, 1);
  EXPECT_EQ(s.release, nullptr);
}

TEST(CDataHostileTest, BadFormats) {
  ExpectBadFormat("", 0, "empty");
  ExpectBadFormat("x", 0, "unknown format");
  ExpectBadFormat("ii", 0, "unknown format");
  ExpectBadFormat("i", 1, "takes 0 children");
  ExpectBadFormat("d:99,2", 0, "precision");
  ExpectBadFormat("d:10", 0, "unknown format");
  ExpectBadFormat("d:10,2,48", 0, "bit width");
  ExpectBadFormat("d:40,2,128x", 0, "not a number");
  ExpectBadFormat("d:20,2,64", 0, "precision");
  ExpectBadFormat("w:-1", 0, "outside");
  ExpectBadFormat("w:99999999999999999999999999", 0, "out of range");
  ExpectBadFormat("w:", 0, "nothing");
  ExpectBadFormat("tsx:", 0, "time unit");
  ExpectBadFormat("tss", 0, "unknown format");
  ExpectBadFormat("ttx", 0, "time unit");
  ExpectBadFormat("+l", 0, "takes 1 children");
  ExpectBadFormat("+l", 2, "takes 1 children");
  ExpectBadFormat("+w:", 1, "nothing");
  ExpectBadFormat("+us:1,2", 1, "type codes");
  ExpectBadFormat("+ud:1,1", 2, "");
  ExpectBadFormat("+us:200", 1, "outside");
  ExpectBadFormat("+m", 1, "map");
  ExpectBadFormat("+r", 1, "takes 2 children");
  ExpectBadFormat("+q", 0, "unknown format");
  ExpectBadFormat(std::string(1 << 20, 'i'), 0, "longer than");
}

TEST(CDataHostileTest, BadSchemas) {
  {
    HostileSchema h;
    ArrowSchema s = h.Make();
    s.format = nullptr;
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "format string is null", ImportType(&s));
    EXPECT_EQ(h.releases, 1);
  }
  {
    HostileSchema h;
    h.format = "+s";
    ArrowSchema s = h.Make();
    s.n_children = -1;
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "n_children", ImportType(&s));
    EXPECT_EQ(h.releases, 1);
  }
  {
    HostileSchema h;
    h.format = "+s";
    ArrowSchema s = h.Make();
    s.n_children = 3;
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "children is null", ImportType(&s));
    EXPECT_EQ(h.releases, 1);
  }
  {
    HostileSchema h;
    h.format = "+s";
    h.AddChild("i", "a");
    ArrowSchema s = h.Make();
    h.children[0].release = nullptr;
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "released", ImportType(&s));
    EXPECT_EQ(h.releases, 1);
  }
  {
    HostileSchema h;  // a cycle: a child that is its own child
    h.format = "+s";
    h.AddChild("+s", "loop");
    ArrowSchema s = h.Make();
    ArrowSchema* self = &h.children[0];
    h.children[0].n_children = 1;
    h.children[0].children = &self;
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "deeper", ImportType(&s));
    EXPECT_EQ(h.releases, 1);
  }
  {
    HostileSchema h;  // a dictionary whose index is not an integer
    h.format = "u";
    ArrowSchema values{};
    values.format = "u";
    values.release = &HostileSchema::ChildRelease;
    ArrowSchema s = h.Make();
    s.dictionary = &values;
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "not an integer", ImportType(&s));
    EXPECT_EQ(h.releases, 1);
  }
  {
    HostileSchema h;  // negative metadata count
    h.metadata = std::string("\xff\xff\xff\xff", 4);
    ArrowSchema s = h.Make();
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "metadata pair count", ImportType(&s));
    EXPECT_EQ(h.releases, 1);
  }
  {
    HostileSchema h;  // negative key length
    const int32_t md[2] = {1, -5};
    h.metadata.assign(reinterpret_cast<const char*>(md), sizeof(md));
    ArrowSchema s = h.Make();
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "length -5", ImportType(&s));
    EXPECT_EQ(h.releases, 1);
  }
  {
    HostileSchema h;  // not a struct where a schema is expected
    ArrowSchema s = h.Make();
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "'+s'", ImportSchema(&s));
    EXPECT_EQ(h.releases, 1);
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, "released", ImportSchema(&s));
    ASSERT_RAISES(kInvalid, ImportSchema(nullptr));
    EXPECT_EQ(h.releases, 1);
  }
}

TEST(CDataHostileTest, ArrayAndSchemaBothReleasedWhenEitherIsBad) {
  HostileSchema hs;
  hs.format = "x";
  Hostile ha;
  ArrowSchema s = hs.Make();
  ArrowArray a = ha.Int32Array();
  ASSERT_RAISES(kInvalid, ImportArray(&a, &s));
  EXPECT_EQ(hs.releases, 1);
  EXPECT_EQ(ha.releases, 1);
  HostileSchema hs2;
  hs2.format = "x";
  Hostile ha2;
  s = hs2.Make();
  a = ha2.Int32Array();
  ASSERT_RAISES(kInvalid, ImportRecordBatch(&a, &s));
  EXPECT_EQ(hs2.releases, 1);
  EXPECT_EQ(ha2.releases, 1);
}

// --- Buffers exactly as long as the struct's lengths imply -------------------
//
// The C Data Interface carries no buffer sizes: the importer sizes each
// buffer from the type, length and offset, and a binary data buffer from the
// last offset. These structs' buffers are heap blocks of exactly those sizes
// (no slack), so that under AddressSanitizer any read past what the struct
// claims is a report, and each hostile struct must give a clear error first.

// Exact-size heap copies, and the nodes of a hand-made array tree.
struct ExactArrays {
  std::vector<std::unique_ptr<uint8_t[]>> blocks;
  std::vector<std::unique_ptr<std::vector<const void*>>> buffer_lists;
  std::vector<std::unique_ptr<std::vector<ArrowArray*>>> child_lists;
  std::vector<std::unique_ptr<ArrowArray>> nodes;
  int releases = 0;  // of the top-level struct
  int child_releases = 0;

  const void* Copy(const void* data, size_t size) {
    blocks.push_back(std::make_unique<uint8_t[]>(size));
    if (size > 0) std::memcpy(blocks.back().get(), data, size);
    return blocks.back().get();
  }
  template <typename T>
  const void* Copy(const std::vector<T>& v) {
    return Copy(v.data(), v.size() * sizeof(T));
  }
  const void* Copy(const std::string& s) { return Copy(s.data(), s.size()); }

  // A node; its children (if any) are released by nobody but themselves.
  ArrowArray Node(int64_t length, std::vector<const void*> buffers,
                  std::vector<ArrowArray*> children = {}) {
    buffer_lists.push_back(std::make_unique<std::vector<const void*>>(std::move(buffers)));
    child_lists.push_back(std::make_unique<std::vector<ArrowArray*>>(std::move(children)));
    ArrowArray a{};
    a.length = length;
    a.n_buffers = static_cast<int64_t>(buffer_lists.back()->size());
    a.buffers = buffer_lists.back()->data();
    a.n_children = static_cast<int64_t>(child_lists.back()->size());
    a.children = child_lists.back()->empty() ? nullptr : child_lists.back()->data();
    a.private_data = this;
    a.release = [](ArrowArray* x) {
      ++static_cast<ExactArrays*>(x->private_data)->releases;
      x->release = nullptr;
    };
    return a;
  }
  // A child node kept here (its address stays put).
  ArrowArray* Child(int64_t length, std::vector<const void*> buffers) {
    nodes.push_back(std::make_unique<ArrowArray>(Node(length, std::move(buffers))));
    nodes.back()->release = [](ArrowArray* x) {
      ++static_cast<ExactArrays*>(x->private_data)->child_releases;
      x->release = nullptr;
    };
    return nodes.back().get();
  }
  // A utf8 column: offsets and data exactly as given.
  ArrowArray* Utf8(const std::vector<int32_t>& offsets, const std::string& data) {
    return Child(static_cast<int64_t>(offsets.size()) - 1, {nullptr, Copy(offsets), Copy(data)});
  }
};

TEST(CDataExactBuffersTest, ImportReadsNothingPastWhatTheStructsLengthsImply) {
  ExactArrays x;
  // utf8, 8-byte ASCII words included (the checker's word-at-a-time path),
  // from offset 1.
  const std::string chars = "skipabcdefghijkl\xc3\xa9tail";
  ArrowArray s =
      x.Node(3, {nullptr, x.Copy(std::vector<int32_t>{0, 4, 16, 18, 22}), x.Copy(chars)});
  s.offset = 1;
  ASSERT_OK_AND_ASSIGN(auto a, ImportArray(&s, utf8()));
  ASSERT_OK(CheckArrayEquals(*Strs({"abcdefghijkl", "\xc3\xa9", "tail"}), *a));
  a.reset();
  s = x.Node(2, {nullptr, x.Copy(std::vector<int64_t>{0, 4, 16}), x.Copy(chars.substr(0, 16))});
  s.offset = 1;
  s.length = 1;
  ASSERT_OK_AND_ASSIGN(auto large, ImportArray(&s, large_utf8()));
  EXPECT_EQ(static_cast<const LargeStringArray&>(*large).GetView(0), "abcdefghijkl");
  large.reset();
  // A record batch: an int32 and a utf8 column, the validity bitmap one byte.
  const uint8_t valid = 0x05;  // rows 0 and 2
  ArrowArray* ints = x.Child(3, {x.Copy(&valid, 1), x.Copy(std::vector<int32_t>{7, 0, 9})});
  ints->null_count = 1;
  ArrowArray* names = x.Utf8({0, 9, 9, 17}, "abcdefghijklmnopq");
  ArrowArray batch = x.Node(3, {nullptr}, {ints, names});
  auto schema = format::schema({field("i", int32()), field("s", utf8())});
  ASSERT_OK_AND_ASSIGN(auto b, ImportRecordBatch(&batch, schema));
  EXPECT_EQ(b->num_rows(), 3);
  EXPECT_EQ(static_cast<const StringArray&>(*b->column(1)).GetView(2), "jklmnopq");
  b.reset();
  EXPECT_EQ(x.releases, 3);
}

TEST(CDataExactBuffersTest, AnInnerOffsetPastTheDataIsRefusedBeforeAnyValueIsRead) {
  // The last offset says the data buffer holds 5 bytes; slot 0 claims 8 of
  // them (an 8-byte word the UTF-8 checker would read whole): refused
  // before any value is read.
  ExactArrays x;
  ArrowArray s = x.Node(2, {nullptr, x.Copy(std::vector<int32_t>{0, 8, 5}), x.Copy("hello")});
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "end offset 8 is past the end of the 5-byte data buffer",
                             ImportArray(&s, utf8()));
  s = x.Node(2, {nullptr, x.Copy(std::vector<int64_t>{0, 8, 5}), x.Copy("hello")});
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "end offset 8 is past the end of the 5-byte data buffer",
                             ImportArray(&s, large_utf8()));
  // Decreasing offsets, within the data.
  s = x.Node(3, {nullptr, x.Copy(std::vector<int32_t>{0, 4, 2, 5}), x.Copy("hello")});
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "offsets must not decrease", ImportArray(&s, utf8()));
  // In a record batch's column, through ImportRecordBatch's checks.
  ArrowArray batch = x.Node(2, {nullptr}, {x.Utf8({0, 8, 5}, "hello")});
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "end offset 8",
                             ImportRecordBatch(&batch, schema({field("s", utf8())})));
  // Structure-only validation (validate_full = false) reads the first and
  // last offsets only: it accepts these, and the values are the caller's to
  // trust (docs/INTEROP.md, "What an import can check").
  CImportOptions structure_only;
  structure_only.validate_full = false;
  s = x.Node(2, {nullptr, x.Copy(std::vector<int32_t>{0, 8, 5}), x.Copy("hello")});
  ASSERT_OK_AND_ASSIGN(auto trusted, ImportArray(&s, utf8(), structure_only));
  EXPECT_EQ(trusted->data()->buffers[2]->size(), 5);
  trusted.reset();
  EXPECT_EQ(x.releases, 5);
}

TEST(CDataExactBuffersTest, NullBuffersWhereBytesAreNeeded) {
  ExactArrays x;
  const void* offsets = x.Copy(std::vector<int32_t>{0, 2, 5});
  ArrowArray s = x.Node(2, {nullptr, offsets, nullptr});
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "buffer 2 is null but must hold 5 bytes",
                             ImportArray(&s, utf8()));
  s = x.Node(2, {nullptr, nullptr, x.Copy("hello")});
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "buffer 1 is null but must hold 12 bytes",
                             ImportArray(&s, utf8()));
  s = x.Node(2, {nullptr, offsets, x.Copy("hello")});
  s.null_count = 1;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "validity bitmap is null but null_count is 1",
                             ImportArray(&s, utf8()));
  // Where no byte is needed a null buffer is fine: empty strings, an empty
  // array without offsets.
  s = x.Node(2, {nullptr, x.Copy(std::vector<int32_t>{0, 0, 0}), nullptr});
  ASSERT_OK_AND_ASSIGN(auto empties, ImportArray(&s, utf8()));
  ASSERT_OK(CheckArrayEquals(*Strs({"", ""}), *empties));
  empties.reset();
  s = x.Node(0, {nullptr, nullptr, nullptr});
  ASSERT_OK_AND_ASSIGN(auto none, ImportArray(&s, utf8()));
  EXPECT_EQ(none->length(), 0);
  none.reset();
  // A record batch whose column has no values buffer.
  ArrowArray batch = x.Node(2, {nullptr}, {x.Child(2, {nullptr, nullptr})});
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "buffer 1 is null but must hold 8 bytes",
                             ImportRecordBatch(&batch, schema({field("i", int32())})));
  EXPECT_EQ(x.releases, 6);
}

TEST(CDataExactBuffersTest, NegativeAndInconsistentCounts) {
  ExactArrays x;
  const void* offsets = x.Copy(std::vector<int32_t>{0, 2, 5});
  const void* data = x.Copy("hello");
  auto utf8_node = [&] { return x.Node(2, {nullptr, offsets, data}); };
  int expected_releases = 0;
  auto refused = [&](ArrowArray s, const std::string& message) {
    ++expected_releases;
    auto r = ImportArray(&s, utf8());
    ASSERT_FALSE(r.ok()) << "accepted: " << message;
    EXPECT_NE(r.status().message().find(message), std::string::npos)
        << r.status().message() << " lacks " << message;
    EXPECT_EQ(s.release, nullptr);
    EXPECT_EQ(x.releases, expected_releases) << message;
  };
  ArrowArray s = utf8_node();
  s.length = -2;
  refused(s, "length -2 is negative");
  s = utf8_node();
  s.offset = -1;
  refused(s, "offset -1 is negative");
  s = utf8_node();
  s.null_count = -5;
  refused(s, "null_count -5 is outside [-1, length 2]");
  s = utf8_node();
  s.n_buffers = 2;  // one short: the data buffer would not be read
  refused(s, "has 2 buffers, expected 3");
  s = utf8_node();
  s.n_buffers = 4;
  refused(s, "has 4 buffers, expected 3");
  s = utf8_node();
  s.n_buffers = -1;
  refused(s, "has -1 buffers, expected 3");
  s = utf8_node();
  s.n_children = 1;  // children stays null
  refused(s, "has 1 children, expected 0");
  // An offset that makes the last offset's index overflow.
  s = utf8_node();
  s.offset = std::numeric_limits<int64_t>::max() - 1;
  refused(s, "overflows");
  // The first offset negative.
  s = x.Node(2, {nullptr, x.Copy(std::vector<int32_t>{-1, 2, 5}), data});
  refused(s, "offset -1 is negative");
}

TEST(CDataExactBuffersTest, WrongChildCountsInARecordBatch) {
  ExactArrays x;
  auto two = schema({field("i", int32()), field("s", utf8())});
  const void* ints = x.Copy(std::vector<int32_t>{1, 2});
  auto batch = [&](std::vector<ArrowArray*> children) {
    return x.Node(2, {nullptr}, std::move(children));
  };
  ArrowArray b = batch({x.Child(2, {nullptr, ints})});
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "has 1 children, expected 2", ImportRecordBatch(&b, two));
  b = batch({x.Child(2, {nullptr, ints}), x.Utf8({0, 1, 2}, "ab"), x.Utf8({0, 1, 2}, "cd")});
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "has 3 children, expected 2", ImportRecordBatch(&b, two));
  b = batch({x.Child(2, {nullptr, ints}), x.Utf8({0, 1, 2}, "ab")});
  b.children = nullptr;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "children is null", ImportRecordBatch(&b, two));
  b = batch({x.Child(2, {nullptr, ints}), nullptr});
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "ArrowArray is null", ImportRecordBatch(&b, two));
  // A column shorter than the batch: its buffers hold 1 row, not 2.
  b = batch({x.Child(1, {nullptr, x.Copy(std::vector<int32_t>{1})}), x.Utf8({0, 1, 2}, "ab")});
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "has 1 rows, the batch needs 2", ImportRecordBatch(&b, two));
  // The struct with nulls, and with no validity buffer slot at all.
  const uint8_t valid = 0x01;
  b = batch({x.Child(2, {nullptr, ints}), x.Utf8({0, 1, 2}, "ab")});
  b.buffers =
      x.buffer_lists.emplace_back(std::make_unique<std::vector<const void*>>(1, x.Copy(&valid, 1)))
          ->data();
  b.null_count = 1;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "nulls", ImportRecordBatch(&b, two));
  b = batch({x.Child(2, {nullptr, ints}), x.Utf8({0, 1, 2}, "ab")});
  b.n_buffers = 0;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "has 0 buffers, expected 1", ImportRecordBatch(&b, two));
  EXPECT_EQ(x.releases, 7);
  EXPECT_EQ(x.child_releases, 0);  // children are the parent's to release
}

TEST(CDataExactBuffersTest, AMissingReleaseCallbackIsAReleasedStruct) {
  ExactArrays x;
  ArrowArray s = x.Node(2, {nullptr, x.Copy(std::vector<int32_t>{0, 2, 5}), x.Copy("hello")});
  s.release = nullptr;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "released already", ImportArray(&s, utf8()));
  ArrowArray batch = x.Node(2, {nullptr}, {x.Utf8({0, 2, 5}, "hello")});
  batch.release = nullptr;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "released already",
                             ImportRecordBatch(&batch, schema({field("s", utf8())})));
  // A child without one: refused, the parent released.
  ArrowArray* child = x.Utf8({0, 2, 5}, "hello");
  child->release = nullptr;
  batch = x.Node(2, {nullptr}, {child});
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "released",
                             ImportRecordBatch(&batch, schema({field("s", utf8())})));
  EXPECT_EQ(x.releases, 1);
}

}  // namespace
}  // namespace alkaid::format
