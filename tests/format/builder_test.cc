// Tests of the array builders: the specification's worked examples byte for
// byte, every type through MakeBuilder, memory accounting and errors.

#include "alkaid/format/builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "alkaid/format/compare.h"
#include "test_util.h"

namespace alkaid::format {
namespace {

// ---------------------------------------------------------------------------
// Helpers

template <typename T>
std::vector<T> ValuesOf(const std::shared_ptr<Buffer>& b) {
  std::vector<T> out(static_cast<size_t>(b->size()) / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), b->data(), out.size() * sizeof(T));
  return out;
}

std::vector<uint8_t> BytesOf(const std::shared_ptr<Buffer>& b) {
  return {b->data(), b->data() + b->size()};
}

// Buffers come from the pool: 64-byte aligned, capacity a multiple of 64,
// every byte past size() zero.
void ExpectWellFormed(const std::shared_ptr<Buffer>& b) {
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % kBufferAlignment, 0u);
  EXPECT_EQ(b->capacity() % kBufferAlignment, 0);
  EXPECT_GE(b->capacity(), b->size());
  for (int64_t i = b->size(); i < b->capacity(); ++i) {
    ASSERT_EQ(b->data()[i], 0) << "padding byte " << i << " of a " << b->size() << "-byte buffer";
  }
}

void ExpectAllWellFormed(const ArrayData& d) {
  for (const auto& b : d.buffers) {
    if (b != nullptr) ExpectWellFormed(b);
  }
  for (const auto& c : d.child_data) ExpectAllWellFormed(*c);
  if (d.dictionary) ExpectAllWellFormed(*d.dictionary);
}

template <typename B>
B* As(const std::unique_ptr<ArrayBuilder>& b) {
  auto* out = dynamic_cast<B*>(b.get());
  EXPECT_NE(out, nullptr) << "builder for " << b->type()->ToString() << " has an unexpected class";
  return out;
}
template <typename B>
B* As(ArrayBuilder* b) {
  auto* out = dynamic_cast<B*>(b);
  EXPECT_NE(out, nullptr) << "builder for " << b->type()->ToString() << " has an unexpected class";
  return out;
}

// ---------------------------------------------------------------------------
// Worked examples of the specification

TEST(BuilderSpecExample, Int32WithNull) {
  Int32Builder b;
  ASSERT_OK(b.Append(1));
  ASSERT_OK(b.AppendNull());
  ASSERT_OK(b.Append(2));
  ASSERT_OK(b.Append(4));
  ASSERT_OK(b.Append(8));
  EXPECT_EQ(b.length(), 5);
  EXPECT_EQ(b.null_count(), 1);
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr d, b.FinishData());
  EXPECT_EQ(d->length, 5);
  EXPECT_EQ(d->null_count, 1);
  EXPECT_EQ(d->offset, 0);
  ASSERT_EQ(d->buffers.size(), 2u);
  EXPECT_EQ(BytesOf(d->buffers[0]), std::vector<uint8_t>{0b00011101});
  EXPECT_EQ(ValuesOf<int32_t>(d->buffers[1]), (std::vector<int32_t>{1, 0, 2, 4, 8}));
  EXPECT_EQ(d->buffers[1]->capacity(), 64);
  ExpectAllWellFormed(*d);
  Int32Array a(d);
  EXPECT_TRUE(a.IsNull(1));
  EXPECT_EQ(a.Value(4), 8);
  // The builder is empty and reusable.
  EXPECT_EQ(b.length(), 0);
  EXPECT_EQ(b.null_count(), 0);
}

TEST(BuilderSpecExample, Int32NoNullsOmitsBitmap) {
  Int32Builder b;
  ASSERT_OK(b.AppendValues(std::vector<int32_t>{1, 2, 3, 4, 8}));
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr d, b.FinishData());
  EXPECT_EQ(d->null_count, 0);
  EXPECT_EQ(d->buffers[0], nullptr);
  EXPECT_EQ(ValuesOf<int32_t>(d->buffers[1]), (std::vector<int32_t>{1, 2, 3, 4, 8}));
  ExpectAllWellFormed(*d);
}

TEST(BuilderSpecExample, VarBinary) {
  BinaryBuilder b;
  ASSERT_OK(b.Append("joe"));
  ASSERT_OK(b.AppendNull());
  ASSERT_OK(b.AppendNull());
  ASSERT_OK(b.Append("mark"));
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, b.Finish());
  const ArrayData& d = *a->data();
  EXPECT_EQ(d.null_count, 2);
  EXPECT_EQ(BytesOf(d.buffers[0]), std::vector<uint8_t>{0b00001001});
  EXPECT_EQ(ValuesOf<int32_t>(d.buffers[1]), (std::vector<int32_t>{0, 3, 3, 3, 7}));
  EXPECT_EQ(d.buffers[2]->ToString(), "joemark");
  ExpectAllWellFormed(d);
  const auto& s = static_cast<const BinaryArray&>(*a);
  EXPECT_EQ(s.GetView(0), "joe");
  EXPECT_EQ(s.GetView(3), "mark");
}

TEST(BuilderSpecExample, ListOfInt8) {
  ASSERT_OK_AND_ASSIGN(auto builder, MakeBuilder(list(int8())));
  auto* lb = As<ListBuilder>(builder);
  auto* vb = As<Int8Builder>(lb->value_builder());
  ASSERT_OK(lb->Append());
  ASSERT_OK(vb->AppendValues(std::vector<int8_t>{12, -7, 25}));
  ASSERT_OK(lb->AppendNull());
  ASSERT_OK(lb->Append());
  ASSERT_OK(vb->AppendValues(std::vector<int8_t>{0, -127, 127, 50}));
  ASSERT_OK(lb->Append());
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, builder->Finish());
  const ArrayData& d = *a->data();
  EXPECT_EQ(d.length, 4);
  EXPECT_EQ(d.null_count, 1);
  EXPECT_EQ(BytesOf(d.buffers[0]), std::vector<uint8_t>{0b00001101});
  EXPECT_EQ(ValuesOf<int32_t>(d.buffers[1]), (std::vector<int32_t>{0, 3, 3, 7, 7}));
  ASSERT_EQ(d.child_data.size(), 1u);
  const ArrayData& c = *d.child_data[0];
  EXPECT_EQ(c.length, 7);
  EXPECT_EQ(c.buffers[0], nullptr);
  EXPECT_EQ(ValuesOf<int8_t>(c.buffers[1]), (std::vector<int8_t>{12, -7, 25, 0, -127, 127, 50}));
  ExpectAllWellFormed(d);
  const auto& l = static_cast<const ListArray&>(*a);
  EXPECT_EQ(l.value_length(2), 4);
  EXPECT_EQ(static_cast<const Int8Array&>(*l.value_slice(2)).Value(1), -127);
}

TEST(BuilderSpecExample, ListOfListOfInt8) {
  ASSERT_OK_AND_ASSIGN(auto builder, MakeBuilder(list(list(int8()))));
  auto* outer = As<ListBuilder>(builder);
  auto* inner = As<ListBuilder>(outer->value_builder());
  auto* vals = As<Int8Builder>(inner->value_builder());
  auto add = [&](std::vector<int8_t> v) {
    ASSERT_OK(inner->Append());
    ASSERT_OK(vals->AppendValues(v));
  };
  ASSERT_OK(outer->Append());
  add({1, 2});
  add({3, 4});
  ASSERT_OK(outer->Append());
  add({5, 6, 7});
  ASSERT_OK(inner->AppendNull());
  add({8});
  ASSERT_OK(outer->Append());
  add({9, 10});
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr d, builder->FinishData());
  EXPECT_EQ(d->length, 3);
  EXPECT_EQ(d->buffers[0], nullptr);
  EXPECT_EQ(ValuesOf<int32_t>(d->buffers[1]), (std::vector<int32_t>{0, 2, 5, 6}));
  const ArrayData& in = *d->child_data[0];
  EXPECT_EQ(in.length, 6);
  EXPECT_EQ(in.null_count, 1);
  EXPECT_EQ(BytesOf(in.buffers[0]), std::vector<uint8_t>{0b00110111});
  EXPECT_EQ(ValuesOf<int32_t>(in.buffers[1]), (std::vector<int32_t>{0, 2, 4, 7, 7, 8, 10}));
  EXPECT_EQ(ValuesOf<int8_t>(in.child_data[0]->buffers[1]),
            (std::vector<int8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  ExpectAllWellFormed(*d);
}

TEST(BuilderSpecExample, ListViewOfInt8) {
  ASSERT_OK_AND_ASSIGN(auto builder, MakeBuilder(list_view(int8())));
  auto* lb = As<ListViewBuilder>(builder);
  auto* vb = As<Int8Builder>(lb->value_builder());
  ASSERT_OK(lb->Append());
  ASSERT_OK(vb->AppendValues(std::vector<int8_t>{12, -7, 25}));
  ASSERT_OK(lb->AppendNull());
  ASSERT_OK(lb->Append());
  ASSERT_OK(vb->AppendValues(std::vector<int8_t>{0, -127, 127, 50}));
  ASSERT_OK(lb->Append());
  ASSERT_OK_AND_ASSIGN(ArrayPtr built, builder->Finish());
  const ArrayData& d = *built->data();
  ASSERT_EQ(d.buffers.size(), 3u);
  EXPECT_EQ(BytesOf(d.buffers[0]), std::vector<uint8_t>{0b00001101});
  // The builder lays slots out in order: offsets 0,3,3,7 sizes 3,0,4,0.
  EXPECT_EQ(ValuesOf<int32_t>(d.buffers[1]), (std::vector<int32_t>{0, 3, 3, 7}));
  EXPECT_EQ(ValuesOf<int32_t>(d.buffers[2]), (std::vector<int32_t>{3, 0, 4, 0}));
  ExpectAllWellFormed(d);

  // The specification's layout (offsets 0,7,3,0) means the same array.
  auto child = d.child_data[0];
  auto offsets = Buffer::FromString(std::string("\0\0\0\0\7\0\0\0\3\0\0\0\0\0\0\0", 16));
  auto sizes = Buffer::FromString(std::string("\3\0\0\0\0\0\0\0\4\0\0\0\0\0\0\0", 16));
  auto spec = ArrayData::Make(list_view(int8()), 4, {d.buffers[0], offsets, sizes}, {child}, 1);
  ASSERT_OK(CheckArrayEquals(*MakeArray(spec), *built));
}

TEST(BuilderSpecExample, FixedSizeListOfBytes) {
  ASSERT_OK_AND_ASSIGN(auto builder, MakeBuilder(fixed_size_list(uint8(), 4)));
  auto* fb = As<FixedSizeListBuilder>(builder);
  auto* vb = As<UInt8Builder>(fb->value_builder());
  auto add = [&](std::vector<uint8_t> v) {
    ASSERT_OK(fb->Append());
    ASSERT_OK(vb->AppendValues(v));
  };
  add({192, 168, 0, 12});
  ASSERT_OK(fb->AppendNull());
  add({192, 168, 0, 25});
  add({192, 168, 0, 1});
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, builder->Finish());
  const ArrayData& d = *a->data();
  ASSERT_EQ(d.buffers.size(), 1u);
  EXPECT_EQ(BytesOf(d.buffers[0]), std::vector<uint8_t>{0b00001101});
  const ArrayData& c = *d.child_data[0];
  EXPECT_EQ(c.length, 16);
  EXPECT_EQ(c.buffers[0], nullptr);
  EXPECT_EQ(BytesOf(c.buffers[1]),
            (std::vector<uint8_t>{192, 168, 0, 12, 0, 0, 0, 0, 192, 168, 0, 25, 192, 168, 0, 1}));
  ExpectAllWellFormed(d);
  EXPECT_TRUE(a->IsNull(1));
}

TEST(BuilderSpecExample, StructOfVarBinaryAndInt32) {
  auto type = struct_({field("name", binary()), field("age", int32())});
  ASSERT_OK_AND_ASSIGN(auto builder, MakeBuilder(type));
  auto* sb = As<StructBuilder>(builder);
  auto* name = As<BinaryBuilder>(sb->field_builder(0));
  auto* age = As<Int32Builder>(sb->field_builder(1));
  // [{'joe', 1}, {null, 2}, null, {'mark', 4}] with the hidden child values
  // 'alice' and null of the specification.
  ASSERT_OK(sb->Append());
  ASSERT_OK(name->Append("joe"));
  ASSERT_OK(age->Append(1));
  ASSERT_OK(sb->Append());
  ASSERT_OK(name->AppendNull());
  ASSERT_OK(age->Append(2));
  ASSERT_OK(sb->Append(false));
  ASSERT_OK(name->Append("alice"));
  ASSERT_OK(age->AppendNull());
  ASSERT_OK(sb->Append());
  ASSERT_OK(name->Append("mark"));
  ASSERT_OK(age->Append(4));
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, builder->Finish());
  const ArrayData& d = *a->data();
  EXPECT_EQ(d.length, 4);
  EXPECT_EQ(d.null_count, 1);
  EXPECT_EQ(BytesOf(d.buffers[0]), std::vector<uint8_t>{0b00001011});
  const ArrayData& n = *d.child_data[0];
  EXPECT_EQ(n.null_count, 1);
  EXPECT_EQ(BytesOf(n.buffers[0]), std::vector<uint8_t>{0b00001101});
  EXPECT_EQ(ValuesOf<int32_t>(n.buffers[1]), (std::vector<int32_t>{0, 3, 3, 8, 12}));
  EXPECT_EQ(n.buffers[2]->ToString(), "joealicemark");
  const ArrayData& g = *d.child_data[1];
  EXPECT_EQ(g.null_count, 1);
  EXPECT_EQ(BytesOf(g.buffers[0]), std::vector<uint8_t>{0b00001011});
  EXPECT_EQ(ValuesOf<int32_t>(g.buffers[1]), (std::vector<int32_t>{1, 2, 0, 4}));
  ExpectAllWellFormed(d);
}

TEST(BuilderSpecExample, StructAppendNullFillsChildren) {
  auto type = struct_({field("name", binary()), field("age", int32(), /*nullable=*/false)});
  ASSERT_OK_AND_ASSIGN(auto builder, MakeBuilder(type));
  auto* sb = As<StructBuilder>(builder);
  ASSERT_OK(sb->AppendNulls(2));
  ASSERT_OK(sb->AppendEmptyValue());
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr d, builder->FinishData());
  EXPECT_EQ(d->null_count, 2);
  // Nullable child gets nulls, the non-nullable one empty values.
  EXPECT_EQ(d->child_data[0]->null_count, 2);
  EXPECT_EQ(d->child_data[1]->null_count, 0);
  EXPECT_EQ(d->child_data[1]->buffers[0], nullptr);
  EXPECT_EQ(d->child_data[1]->length, 3);
}

TEST(BuilderSpecExample, DenseUnion) {
  auto type = dense_union({field("f", float32()), field("i", int32())});
  ASSERT_OK_AND_ASSIGN(auto builder, MakeBuilder(type));
  auto* ub = As<DenseUnionBuilder>(builder);
  auto* f = As<FloatBuilder>(ub->child_builder(0));
  auto* i = As<Int32Builder>(ub->child_builder(1));
  ASSERT_OK(ub->Append(0));
  ASSERT_OK(f->Append(1.2f));
  ASSERT_OK(ub->AppendNull());
  ASSERT_OK(ub->Append(0));
  ASSERT_OK(f->Append(3.4f));
  ASSERT_OK(ub->Append(1));
  ASSERT_OK(i->Append(5));
  EXPECT_EQ(builder->null_count(), 0);
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, builder->Finish());
  const ArrayData& d = *a->data();
  EXPECT_EQ(d.length, 4);
  EXPECT_EQ(d.null_count, 0);
  ASSERT_EQ(d.buffers.size(), 2u);
  EXPECT_EQ(BytesOf(d.buffers[0]), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(ValuesOf<int32_t>(d.buffers[1]), (std::vector<int32_t>{0, 1, 2, 0}));
  const ArrayData& fd = *d.child_data[0];
  EXPECT_EQ(fd.length, 3);
  EXPECT_EQ(BytesOf(fd.buffers[0]), std::vector<uint8_t>{0b00000101});
  EXPECT_EQ(ValuesOf<float>(fd.buffers[1]), (std::vector<float>{1.2f, 0.0f, 3.4f}));
  const ArrayData& id = *d.child_data[1];
  EXPECT_EQ(id.length, 1);
  EXPECT_EQ(id.buffers[0], nullptr);
  EXPECT_EQ(ValuesOf<int32_t>(id.buffers[1]), std::vector<int32_t>{5});
  ExpectAllWellFormed(d);
  EXPECT_TRUE(a->IsNull(1));
  EXPECT_FALSE(a->IsNull(3));
}

TEST(BuilderSpecExample, SparseUnion) {
  auto type = sparse_union({field("i", int32()), field("f", float32()), field("s", binary())});
  ASSERT_OK_AND_ASSIGN(auto builder, MakeBuilder(type));
  auto* ub = As<SparseUnionBuilder>(builder);
  auto* i = As<Int32Builder>(ub->child_builder(0));
  auto* f = As<FloatBuilder>(ub->child_builder(1));
  auto* s = As<BinaryBuilder>(ub->child_builder(2));
  ASSERT_OK(ub->Append(0));
  ASSERT_OK(i->Append(5));
  ASSERT_OK(ub->Append(1));
  ASSERT_OK(f->Append(1.2f));
  ASSERT_OK(ub->Append(2));
  ASSERT_OK(s->Append("joe"));
  ASSERT_OK(ub->Append(1));
  ASSERT_OK(f->Append(3.4f));
  ASSERT_OK(ub->Append(0));
  ASSERT_OK(i->Append(4));
  ASSERT_OK(ub->Append(2));
  ASSERT_OK(s->Append("mark"));
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, builder->Finish());
  const ArrayData& d = *a->data();
  EXPECT_EQ(d.length, 6);
  ASSERT_EQ(d.buffers.size(), 1u);
  EXPECT_EQ(BytesOf(d.buffers[0]), (std::vector<uint8_t>{0, 1, 2, 1, 0, 2}));
  for (const auto& c : d.child_data) EXPECT_EQ(c->length, 6);
  EXPECT_EQ(BytesOf(d.child_data[0]->buffers[0]), std::vector<uint8_t>{0b00010001});
  EXPECT_EQ(BytesOf(d.child_data[1]->buffers[0]), std::vector<uint8_t>{0b00001010});
  EXPECT_EQ(BytesOf(d.child_data[2]->buffers[0]), std::vector<uint8_t>{0b00100100});
  EXPECT_EQ(ValuesOf<int32_t>(d.child_data[0]->buffers[1]),
            (std::vector<int32_t>{5, 0, 0, 0, 4, 0}));
  EXPECT_EQ(ValuesOf<float>(d.child_data[1]->buffers[1]),
            (std::vector<float>{0, 1.2f, 0, 3.4f, 0, 0}));
  EXPECT_EQ(ValuesOf<int32_t>(d.child_data[2]->buffers[1]),
            (std::vector<int32_t>{0, 0, 0, 3, 3, 3, 7}));
  EXPECT_EQ(d.child_data[2]->buffers[2]->ToString(), "joemark");
  ExpectAllWellFormed(d);
}

TEST(BuilderSpecExample, DictionaryOfStrings) {
  ASSERT_OK_AND_ASSIGN(auto builder, MakeBuilder(dictionary(int32(), utf8())));
  auto* db = As<DictionaryBuilder>(builder);
  ASSERT_OK(db->Append("foo"));
  ASSERT_OK(db->Append("bar"));
  ASSERT_OK(db->Append("foo"));
  ASSERT_OK(db->Append("bar"));
  ASSERT_OK(db->AppendNull());
  ASSERT_OK(db->Append("baz"));
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, builder->Finish());
  const ArrayData& d = *a->data();
  EXPECT_EQ(d.length, 6);
  EXPECT_EQ(d.null_count, 1);
  EXPECT_EQ(BytesOf(d.buffers[0]), std::vector<uint8_t>{0b00101111});
  EXPECT_EQ(ValuesOf<int32_t>(d.buffers[1]), (std::vector<int32_t>{0, 1, 0, 1, 0, 2}));
  ASSERT_NE(d.dictionary, nullptr);
  const auto& dict =
      static_cast<const StringArray&>(*static_cast<const DictionaryArray&>(*a).dictionary());
  ASSERT_EQ(dict.length(), 3);
  EXPECT_EQ(dict.GetView(0), "foo");
  EXPECT_EQ(dict.GetView(1), "bar");
  EXPECT_EQ(dict.GetView(2), "baz");
  EXPECT_EQ(ValuesOf<int32_t>(d.dictionary->buffers[1]), (std::vector<int32_t>{0, 3, 6, 9}));
  ExpectAllWellFormed(d);
}

TEST(BuilderSpecExample, RunEndEncodedFloat32) {
  ASSERT_OK_AND_ASSIGN(auto builder, MakeBuilder(run_end_encoded(int32(), float32())));
  auto* rb = As<RunEndEncodedBuilder>(builder);
  for (int k = 0; k < 4; ++k) ASSERT_OK(rb->Append(1.0f));
  ASSERT_OK(rb->AppendNull());
  ASSERT_OK(rb->AppendNull());
  ASSERT_OK(rb->Append(2.0f));
  EXPECT_EQ(rb->length(), 7);
  EXPECT_EQ(rb->num_runs(), 3);
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, builder->Finish());
  const ArrayData& d = *a->data();
  EXPECT_EQ(d.length, 7);
  EXPECT_EQ(d.null_count, 0);
  EXPECT_TRUE(d.buffers.empty());
  ASSERT_EQ(d.child_data.size(), 2u);
  EXPECT_EQ(d.child_data[0]->buffers[0], nullptr);
  EXPECT_EQ(ValuesOf<int32_t>(d.child_data[0]->buffers[1]), (std::vector<int32_t>{4, 6, 7}));
  const ArrayData& v = *d.child_data[1];
  EXPECT_EQ(v.length, 3);
  EXPECT_EQ(BytesOf(v.buffers[0]), std::vector<uint8_t>{0b00000101});
  EXPECT_EQ(ValuesOf<float>(v.buffers[1]), (std::vector<float>{1.0f, 0.0f, 2.0f}));
  ExpectAllWellFormed(d);
  EXPECT_TRUE(a->IsNull(5));
  EXPECT_FALSE(a->IsNull(6));
}

TEST(BuilderSpecExample, BinaryViewInlineAndReferenced) {
  BinaryViewBuilder b;
  const std::string long1 = "this is a long string!";     // 22 bytes
  const std::string long2 = "another value of 25 bytes";  // 25 bytes
  ASSERT_OK(b.Append("hello"));
  ASSERT_OK(b.Append(long1));
  ASSERT_OK(b.AppendNull());
  ASSERT_OK(b.Append("exactly12byt"));
  ASSERT_OK(b.Append(long2));
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, b.Finish());
  const ArrayData& d = *a->data();
  ASSERT_EQ(d.buffers.size(), 3u);
  EXPECT_EQ(BytesOf(d.buffers[0]), std::vector<uint8_t>{0b00011011});
  const std::vector<uint8_t> views = BytesOf(d.buffers[1]);
  ASSERT_EQ(views.size(), 5u * 16);
  const std::vector<uint8_t> inline_hello = {5,   0, 0, 0, 'h', 'e', 'l', 'l',
                                             'o', 0, 0, 0, 0,   0,   0,   0};
  EXPECT_EQ(std::vector<uint8_t>(views.begin(), views.begin() + 16), inline_hello);
  const std::vector<uint8_t> ref1 = {22, 0, 0, 0, 't', 'h', 'i', 's', 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(std::vector<uint8_t>(views.begin() + 16, views.begin() + 32), ref1);
  EXPECT_EQ(std::vector<uint8_t>(views.begin() + 32, views.begin() + 48),
            std::vector<uint8_t>(16, 0));
  const std::vector<uint8_t> ref2 = {25, 0, 0, 0, 'a', 'n', 'o', 't', 0, 0, 0, 0, 22, 0, 0, 0};
  EXPECT_EQ(std::vector<uint8_t>(views.begin() + 64, views.begin() + 80), ref2);
  EXPECT_EQ(d.buffers[2]->ToString(), long1 + long2);
  ExpectAllWellFormed(d);
  const auto& v = static_cast<const BinaryViewArray&>(*a);
  EXPECT_EQ(v.GetView(0), "hello");
  EXPECT_EQ(v.GetView(1), long1);
  EXPECT_EQ(v.GetView(3), "exactly12byt");
  EXPECT_EQ(v.GetView(4), long2);
}

// ---------------------------------------------------------------------------
// Per-type behaviour

TEST(BuilderTest, BinaryViewBlocks) {
  StringViewBuilder b(utf8_view(), default_memory_pool(), /*block_size=*/32);
  const std::string v13(13, 'a');
  const std::string w13(13, 'b');
  const std::string x13(13, 'c');
  const std::string big(40, 'z');
  ASSERT_OK(b.Append(v13));  // block 0 at 0
  ASSERT_OK(b.Append(w13));  // block 0 at 13
  ASSERT_OK(b.Append(x13));  // 26 + 13 > 32: block 1 at 0
  ASSERT_OK(b.Append(big));  // larger than a block: its own block 2
  ASSERT_OK(b.Append("short"));
  EXPECT_EQ(b.num_data_buffers(), 3);
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, b.Finish());
  const ArrayData& d = *a->data();
  ASSERT_EQ(d.buffers.size(), 5u);
  EXPECT_EQ(d.buffers[0], nullptr);
  EXPECT_EQ(d.buffers[2]->ToString(), v13 + w13);
  EXPECT_EQ(d.buffers[3]->ToString(), x13);
  EXPECT_EQ(d.buffers[4]->ToString(), big);
  const auto& v = static_cast<const BinaryViewArray&>(*a);
  EXPECT_EQ(v.raw_views()[1].ref.buffer_index, 0);
  EXPECT_EQ(v.raw_views()[1].ref.offset, 13);
  EXPECT_EQ(v.raw_views()[2].ref.buffer_index, 1);
  EXPECT_EQ(v.raw_views()[3].ref.buffer_index, 2);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(v.GetView(i), (std::vector<std::string>{v13, w13, x13, big, "short"}[i]));
  }
  ExpectAllWellFormed(d);
  EXPECT_EQ(a->type()->id(), TypeId::kStringView);
}

TEST(BuilderTest, AllNumericTypesThroughMakeBuilder) {
  const std::vector<TypePtr> types = {int8(),
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
                                      date32(),
                                      date64(),
                                      time32(TimeUnit::kMilli),
                                      time64(TimeUnit::kNano),
                                      timestamp(TimeUnit::kMicro, "UTC"),
                                      duration(TimeUnit::kSecond),
                                      month_interval()};
  for (const auto& t : types) {
    SCOPED_TRACE(t->ToString());
    ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(t));
    auto* fw = As<FixedWidthBuilder>(b);
    ASSERT_NE(fw, nullptr);
    const int w = BitWidth(*t) / 8;
    EXPECT_EQ(fw->byte_width(), w);
    std::vector<uint8_t> value(static_cast<size_t>(w));
    for (int k = 0; k < w; ++k) value[static_cast<size_t>(k)] = static_cast<uint8_t>(k + 1);
    ASSERT_OK(fw->AppendRaw(value.data()));
    ASSERT_OK(fw->AppendNull());
    ASSERT_OK(fw->AppendEmptyValue());
    ASSERT_OK_AND_ASSIGN(ArrayDataPtr d, b->FinishData());
    EXPECT_TRUE(d->type->Equals(*t));
    EXPECT_EQ(d->length, 3);
    EXPECT_EQ(d->null_count, 1);
    EXPECT_EQ(BytesOf(d->buffers[0]), std::vector<uint8_t>{0b101});
    std::vector<uint8_t> expected = value;
    expected.resize(static_cast<size_t>(3 * w), 0);
    EXPECT_EQ(BytesOf(d->buffers[1]), expected);
    ExpectAllWellFormed(*d);
  }
}

TEST(BuilderTest, TypedNumericAndTemporal) {
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(timestamp(TimeUnit::kNano, "UTC")));
  auto* tb = As<Int64Builder>(b);
  ASSERT_OK(tb->Append(1700000000000000000LL));
  const int64_t vals[] = {1, 2, 3};
  const uint8_t valid[] = {1, 0, 1};
  ASSERT_OK(tb->AppendValues(vals, 3, valid));
  EXPECT_EQ(tb->GetValueAt(3), 3);
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, b->Finish());
  EXPECT_EQ(a->type()->ToString(), "timestamp[ns, tz=UTC]");
  const auto& ia = static_cast<const Int64Array&>(*a);
  EXPECT_EQ(ia.Value(0), 1700000000000000000LL);
  EXPECT_TRUE(ia.IsNull(2));
  EXPECT_EQ(ia.Value(3), 3);
  EXPECT_EQ(a->null_count(), 1);

  HalfFloatBuilder h(float16(), default_memory_pool());
  ASSERT_OK(h.Append(0x3C00));  // 1.0
  ASSERT_OK_AND_ASSIGN(ArrayPtr ha, h.Finish());
  EXPECT_EQ(ha->type_id(), TypeId::kHalfFloat);
  EXPECT_EQ(static_cast<const HalfFloatArray&>(*ha).Value(0), 0x3C00);

  DoubleBuilder db;
  ASSERT_OK(db.Append(std::nan("")));
  ASSERT_OK(db.Append(-0.0));
  ASSERT_OK_AND_ASSIGN(ArrayPtr da, db.Finish());
  EXPECT_TRUE(std::isnan(static_cast<const DoubleArray&>(*da).Value(0)));
  EXPECT_TRUE(std::signbit(static_cast<const DoubleArray&>(*da).Value(1)));
}

TEST(BuilderTest, WrongTypeForNumericBuilder) {
  Int32Builder b(int64(), default_memory_pool());
  ASSERT_OK(b.Append(1));
  ASSERT_RAISES(kTypeError, b.Finish());
}

TEST(BuilderTest, Intervals) {
  ASSERT_OK_AND_ASSIGN(auto b1, MakeBuilder(day_time_interval()));
  auto* dt = As<DayTimeIntervalBuilder>(b1);
  ASSERT_OK(dt->Append({3, -500}));
  ASSERT_OK(dt->AppendNull());
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr d1, b1->FinishData());
  EXPECT_EQ(d1->buffers[1]->size(), 16);
  DayTimeInterval v{};
  std::memcpy(&v, d1->buffers[1]->data(), sizeof(v));
  EXPECT_EQ(v, (DayTimeInterval{3, -500}));

  ASSERT_OK_AND_ASSIGN(auto b2, MakeBuilder(month_day_nano_interval()));
  auto* mdn = As<MonthDayNanoIntervalBuilder>(b2);
  ASSERT_OK(mdn->Append({1, 2, -3}));
  ASSERT_OK_AND_ASSIGN(ArrayPtr a2, b2->Finish());
  const auto& fa = static_cast<const FixedSizeBinaryArray&>(*a2);
  EXPECT_EQ(fa.byte_width(), 16);
  MonthDayNanoInterval m{};
  std::memcpy(&m, fa.GetValue(0), sizeof(m));
  EXPECT_EQ(m, (MonthDayNanoInterval{1, 2, -3}));
}

TEST(BuilderTest, NullAndBoolean) {
  ASSERT_OK_AND_ASSIGN(auto nb, MakeBuilder(null()));
  ASSERT_OK(nb->AppendNulls(3));
  ASSERT_OK(nb->AppendEmptyValue());
  EXPECT_EQ(nb->null_count(), 4);
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr nd, nb->FinishData());
  EXPECT_EQ(nd->length, 4);
  EXPECT_EQ(nd->null_count, 4);
  ASSERT_EQ(nd->buffers.size(), 1u);
  EXPECT_EQ(nd->buffers[0], nullptr);

  ASSERT_OK_AND_ASSIGN(auto bb, MakeBuilder(boolean()));
  auto* b = As<BooleanBuilder>(bb);
  ASSERT_OK(b->Append(true));
  ASSERT_OK(b->Append(false));
  ASSERT_OK(b->AppendNull());
  const uint8_t vals[] = {1, 1, 0, 1, 1, 1, 1, 1, 1};
  ASSERT_OK(b->AppendValues(vals, 9));
  ASSERT_OK(b->AppendValues(std::vector<bool>{true}));
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, bb->Finish());
  const ArrayData& d = *a->data();
  EXPECT_EQ(d.length, 13);
  EXPECT_EQ(d.null_count, 1);
  // values: 1 0 0 | 1 1 0 1 1 | 1 1 1 1 1
  EXPECT_EQ(BytesOf(d.buffers[1]), (std::vector<uint8_t>{0b11011001, 0b00011111}));
  EXPECT_EQ(BytesOf(d.buffers[0]), (std::vector<uint8_t>{0b11111011, 0b00011111}));
  const auto& ba = static_cast<const BooleanArray&>(*a);
  EXPECT_TRUE(ba.Value(0));
  EXPECT_FALSE(ba.Value(1));
  EXPECT_TRUE(ba.IsNull(2));
  ExpectAllWellFormed(d);
}

TEST(BuilderTest, ManyNullsAcrossBytes) {
  Int16Builder b;
  ASSERT_OK(b.Append(1));
  ASSERT_OK(b.AppendNulls(20));
  ASSERT_OK(b.Append(2));
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr d, b.FinishData());
  EXPECT_EQ(d->null_count, 20);
  EXPECT_EQ(BytesOf(d->buffers[0]), (std::vector<uint8_t>{0x01, 0x00, 0x20}));
  EXPECT_EQ(d->GetNullCount(), 20);
}

// UnsafeAppend adds a valid slot without writing its validity bit: the bit
// is written by the next call that extends or reads the bitmap. Slots
// appended that way before the first null, between nulls, and after the
// last one all come out valid, across byte boundaries.
TEST(BuilderTest, UnsafeAppendedSlotsAroundNullsAreValid) {
  Int64Builder b;
  ASSERT_OK(b.Reserve(10));
  for (int64_t v = 0; v < 10; ++v) b.UnsafeAppend(v);  // no bitmap yet
  ASSERT_OK(b.AppendNull());                           // slot 10: the bitmap appears
  ASSERT_OK(b.Reserve(5));
  for (int64_t v = 11; v < 16; ++v) b.UnsafeAppend(v);  // bits written later
  ASSERT_OK(b.AppendNulls(2));                          // slots 16, 17
  ASSERT_OK(b.Append(18));
  ASSERT_OK(b.Reserve(7));
  for (int64_t v = 19; v < 26; ++v) b.UnsafeAppend(v);  // written by Finish
  EXPECT_EQ(b.length(), 26);
  EXPECT_EQ(b.null_count(), 3);
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr d, b.FinishData());
  EXPECT_EQ(d->length, 26);
  EXPECT_EQ(d->null_count, 3);
  ASSERT_NE(d->buffers[0], nullptr);
  for (int64_t i = 0; i < 26; ++i) {
    const bool null = i == 10 || i == 16 || i == 17;
    EXPECT_EQ(d->IsNull(i), null) << "slot " << i;
    if (!null) {
      EXPECT_EQ(d->GetValues<int64_t>(1)[i], i) << "slot " << i;
    }
  }
  EXPECT_EQ(d->GetNullCount(), 3);
  // The builder is empty and reusable: no bitmap left over.
  ASSERT_OK(b.Reserve(3));
  for (int64_t v = 0; v < 3; ++v) b.UnsafeAppend(v);
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr e, b.FinishData());
  EXPECT_EQ(e->length, 3);
  EXPECT_EQ(e->null_count, 0);
  EXPECT_EQ(e->buffers[0], nullptr);
}

TEST(BuilderTest, FixedSizeBinary) {
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(fixed_size_binary(3)));
  auto* fb = As<FixedSizeBinaryBuilder>(b);
  ASSERT_OK(fb->Append("abc"));
  ASSERT_OK(fb->AppendNull());
  ASSERT_OK(fb->Append(reinterpret_cast<const uint8_t*>("xyz")));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "value for slot 3 has 2 bytes, expected 3",
                             fb->Append("ab"));
  EXPECT_EQ(fb->length(), 3);
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, b->Finish());
  const auto& fa = static_cast<const FixedSizeBinaryArray&>(*a);
  EXPECT_EQ(fa.GetView(0), "abc");
  EXPECT_EQ(fa.GetView(2), "xyz");
  EXPECT_EQ(a->data()->buffers[1]->ToString(), std::string("abc\0\0\0xyz", 9));
}

std::vector<uint8_t> DecimalBytes(const ArrayData& d, int64_t i, int width) {
  const uint8_t* p = d.buffers[1]->data() + i * width;
  return {p, p + width};
}

TEST(BuilderTest, Decimals) {
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(decimal128(5, 2)));
  auto* db = As<DecimalBuilder>(b);
  ASSERT_OK(db->AppendDecimal("-123.45"));
  ASSERT_OK(db->AppendDecimal("1.5"));
  ASSERT_OK(db->AppendDecimal("+.07"));
  ASSERT_OK(db->AppendDecimal("1.2e1"));
  ASSERT_OK(db->AppendDecimal("0.100"));
  ASSERT_OK(db->AppendUnscaled(99999));
  ASSERT_OK(db->AppendUnscaled(-1));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "scale 2", db->AppendDecimal("1.234"));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "precision 5", db->AppendDecimal("1234.5"));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "more than 5 digits", db->AppendUnscaled(100000));
  ASSERT_RAISES(kInvalid, db->AppendDecimal("12a"));
  ASSERT_RAISES(kInvalid, db->AppendDecimal(""));
  ASSERT_RAISES(kInvalid, db->AppendDecimal("-"));
  ASSERT_RAISES(kInvalid, db->AppendDecimal("1e"));
  EXPECT_EQ(db->length(), 7);
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr d, b->FinishData());
  auto le128 = [](int64_t v) {
    std::vector<uint8_t> out(16, v < 0 ? 0xFF : 0x00);
    for (int k = 0; k < 8; ++k) out[static_cast<size_t>(k)] = static_cast<uint8_t>(v >> (8 * k));
    return out;
  };
  EXPECT_EQ(DecimalBytes(*d, 0, 16), le128(-12345));
  EXPECT_EQ(DecimalBytes(*d, 1, 16), le128(150));
  EXPECT_EQ(DecimalBytes(*d, 2, 16), le128(7));
  EXPECT_EQ(DecimalBytes(*d, 3, 16), le128(1200));
  EXPECT_EQ(DecimalBytes(*d, 4, 16), le128(10));
  EXPECT_EQ(DecimalBytes(*d, 5, 16), le128(99999));
  EXPECT_EQ(DecimalBytes(*d, 6, 16), le128(-1));

  // decimal32 and decimal256 limits.
  DecimalBuilder d32(decimal32(9, 0));
  ASSERT_OK(d32.AppendDecimal("-999999999"));
  ASSERT_RAISES(kInvalid, d32.AppendDecimal("1000000000"));
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr dd32, d32.FinishData());
  int32_t v32;
  std::memcpy(&v32, dd32->buffers[1]->data(), 4);
  EXPECT_EQ(v32, -999999999);

  DecimalBuilder d256(decimal256(76, 0));
  ASSERT_OK(d256.AppendDecimal(std::string(76, '9')));
  ASSERT_OK(d256.AppendDecimal("-" + std::string(76, '9')));
  ASSERT_RAISES(kInvalid, d256.AppendDecimal(std::string(77, '9')));
  ASSERT_OK(d256.AppendDecimal("-1"));
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr dd256, d256.FinishData());
  EXPECT_EQ(DecimalBytes(*dd256, 2, 32), std::vector<uint8_t>(32, 0xFF));
  // 10^76 - 1 and its negation sum to zero.
  const auto p = DecimalBytes(*dd256, 0, 32);
  const auto n = DecimalBytes(*dd256, 1, 32);
  unsigned carry = 0;
  for (size_t k = 0; k < 32; ++k) {
    const unsigned s = p[k] + n[k] + carry;
    EXPECT_EQ(s & 0xFF, 0u) << "byte " << k;
    carry = s >> 8;
  }
  // Negative scale: 1200 at scale -2 is stored as 12.
  DecimalBuilder dneg(decimal64(4, -2));
  ASSERT_OK(dneg.AppendDecimal("1200"));
  ASSERT_RAISES(kInvalid, dneg.AppendDecimal("1250"));
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr ddn, dneg.FinishData());
  int64_t v64;
  std::memcpy(&v64, ddn->buffers[1]->data(), 8);
  EXPECT_EQ(v64, 12);
}

TEST(BuilderTest, LargeBinaryAndStrings) {
  for (const auto& t : {binary(), utf8(), large_binary(), large_utf8()}) {
    SCOPED_TRACE(t->ToString());
    ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(t));
    if (t->id() == TypeId::kLargeBinary || t->id() == TypeId::kLargeString) {
      auto* lb = As<BaseBinaryBuilder<int64_t>>(b);
      ASSERT_OK(lb->AppendValues({"a", "", "bc", "zzz"}, std::vector<uint8_t>{1, 1, 1, 0}.data()));
      ASSERT_OK(lb->AppendEmptyValue());
      EXPECT_EQ(lb->GetView(2), "bc");
      EXPECT_EQ(lb->value_data_length(), 3);
    } else {
      auto* sb = As<BaseBinaryBuilder<int32_t>>(b);
      ASSERT_OK(sb->AppendValues({"a", "", "bc", "zzz"}, std::vector<uint8_t>{1, 1, 1, 0}.data()));
      ASSERT_OK(sb->AppendEmptyValue());
      EXPECT_EQ(sb->GetView(2), "bc");
    }
    ASSERT_OK_AND_ASSIGN(ArrayDataPtr d, b->FinishData());
    EXPECT_TRUE(d->type->Equals(*t));
    EXPECT_EQ(d->length, 5);
    EXPECT_EQ(d->null_count, 1);
    if (t->id() == TypeId::kLargeBinary || t->id() == TypeId::kLargeString) {
      EXPECT_EQ(ValuesOf<int64_t>(d->buffers[1]), (std::vector<int64_t>{0, 1, 1, 3, 3, 3}));
    } else {
      EXPECT_EQ(ValuesOf<int32_t>(d->buffers[1]), (std::vector<int32_t>{0, 1, 1, 3, 3, 3}));
    }
    EXPECT_EQ(d->buffers[2]->ToString(), "abc");
    ExpectAllWellFormed(*d);
  }
}

TEST(BuilderTest, EmptyArraysHaveOneOffset) {
  StringBuilder s;
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr d, s.FinishData());
  EXPECT_EQ(d->length, 0);
  EXPECT_EQ(ValuesOf<int32_t>(d->buffers[1]), std::vector<int32_t>{0});
  ASSERT_NE(d->buffers[2], nullptr);
  EXPECT_EQ(d->buffers[2]->size(), 0);
  ASSERT_OK_AND_ASSIGN(auto lb, MakeBuilder(large_list(int8())));
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr ld, lb->FinishData());
  EXPECT_EQ(ValuesOf<int64_t>(ld->buffers[1]), std::vector<int64_t>{0});
}

TEST(BuilderTest, BinaryOffsetOverflowIsCapacityError) {
  BinaryBuilder b;
  ASSERT_OK(b.Append("x"));
  // Not dereferenced: the size is checked before any byte is read. Read
  // through a volatile, so that the compiler does not see the 2-byte literal
  // behind the views (it warns of the inline append's copy, never taken).
  const char* volatile literal = "x";
  const std::string_view huge(literal, 0);
  const std::string_view too_big(huge.data(), static_cast<size_t>(INT32_MAX));
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "32-bit offsets", b.Append(too_big));
  EXPECT_EQ(b.length(), 1);
  EXPECT_EQ(b.value_data_length(), 1);
  ASSERT_OK(b.Append("y"));
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, b.Finish());
  EXPECT_EQ(static_cast<const BinaryArray&>(*a).GetView(1), "y");

  BinaryViewBuilder v;
  const std::string_view view_too_big(huge.data(), static_cast<size_t>(INT32_MAX) + 1);
  ASSERT_RAISES(kCapacityError, v.Append(view_too_big));
  EXPECT_EQ(v.length(), 0);
}

TEST(BuilderTest, LargeListAndLargeListView) {
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(large_list(utf8())));
  auto* lb = As<LargeListBuilder>(b);
  auto* sb = As<StringBuilder>(lb->value_builder());
  ASSERT_OK(lb->Append());
  ASSERT_OK(sb->Append("a"));
  ASSERT_OK(sb->Append("b"));
  ASSERT_OK(lb->AppendNulls(2));
  ASSERT_OK(lb->AppendEmptyValue());
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr d, b->FinishData());
  EXPECT_EQ(ValuesOf<int64_t>(d->buffers[1]), (std::vector<int64_t>{0, 2, 2, 2, 2}));
  EXPECT_EQ(BytesOf(d->buffers[0]), std::vector<uint8_t>{0b1001});

  ASSERT_OK_AND_ASSIGN(auto vb, MakeBuilder(large_list_view(int16())));
  auto* lvb = As<LargeListViewBuilder>(vb);
  auto* ib = As<Int16Builder>(lvb->value_builder());
  ASSERT_OK(lvb->Append());
  ASSERT_OK(ib->Append(1));
  ASSERT_OK(lvb->AppendNull());
  ASSERT_OK(lvb->Append());
  ASSERT_OK(ib->Append(2));
  ASSERT_OK(ib->Append(3));
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr vd, vb->FinishData());
  EXPECT_EQ(ValuesOf<int64_t>(vd->buffers[1]), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(ValuesOf<int64_t>(vd->buffers[2]), (std::vector<int64_t>{1, 0, 2}));
}

TEST(BuilderTest, ListFromValueBuilderConstructor) {
  ListBuilder lb(std::make_unique<Int32Builder>());
  EXPECT_EQ(lb.type()->ToString(), list(int32())->ToString());
  ASSERT_OK(lb.Append());
  ASSERT_OK(static_cast<Int32Builder*>(lb.value_builder())->Append(3));
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, lb.Finish());
  EXPECT_EQ(a->length(), 1);
  EXPECT_TRUE(a->type()->Equals(list(int32())));
}

TEST(BuilderTest, Map) {
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(map(utf8(), int32())));
  auto* mb = As<MapBuilder>(b);
  auto* keys = As<StringBuilder>(mb->key_builder());
  auto* items = As<Int32Builder>(mb->item_builder());
  ASSERT_OK(mb->Append());
  ASSERT_OK(keys->Append("a"));
  ASSERT_OK(items->Append(1));
  ASSERT_OK(keys->Append("b"));
  ASSERT_OK(items->AppendNull());
  ASSERT_OK(mb->AppendNull());
  ASSERT_OK(mb->Append());
  ASSERT_OK(keys->Append("c"));
  ASSERT_OK(items->Append(3));
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, b->Finish());
  const ArrayData& d = *a->data();
  EXPECT_EQ(ValuesOf<int32_t>(d.buffers[1]), (std::vector<int32_t>{0, 2, 2, 3}));
  const ArrayData& entries = *d.child_data[0];
  EXPECT_EQ(entries.length, 3);
  EXPECT_EQ(entries.null_count, 0);
  EXPECT_EQ(entries.buffers[0], nullptr);
  EXPECT_EQ(entries.type->id(), TypeId::kStruct);
  const auto& m = static_cast<const MapArray&>(*a);
  EXPECT_EQ(static_cast<const StringArray&>(*m.keys()).GetView(2), "c");
  EXPECT_TRUE(m.items()->IsNull(1));
  ExpectAllWellFormed(d);
}

TEST(BuilderTest, ExtensionWrapsStorage) {
  auto uuid = extension("alkaid.uuid", "", fixed_size_binary(16));
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(uuid));
  auto* eb = As<ExtensionBuilder>(b);
  auto* storage = As<FixedSizeBinaryBuilder>(eb->storage_builder());
  ASSERT_OK(storage->Append(std::string(16, 'u')));
  ASSERT_OK(eb->AppendNull());
  EXPECT_EQ(eb->length(), 2);
  EXPECT_EQ(eb->null_count(), 1);
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, b->Finish());
  EXPECT_EQ(a->type_id(), TypeId::kExtension);
  EXPECT_TRUE(a->type()->Equals(*uuid));
  const auto& ea = static_cast<const ExtensionArray&>(*a);
  EXPECT_EQ(static_cast<const FixedSizeBinaryArray&>(*ea.storage()).GetView(0),
            std::string(16, 'u'));
  EXPECT_TRUE(a->IsNull(1));
  EXPECT_EQ(eb->length(), 0);
}

TEST(BuilderTest, UnionWithCustomTypeCodes) {
  auto type = dense_union({field("a", int8()), field("b", utf8())}, {5, 9});
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(type));
  auto* ub = As<DenseUnionBuilder>(b);
  EXPECT_EQ(ub->child_id(9), 1);
  EXPECT_EQ(ub->child_id(0), -1);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "type code 0 (slot 0) is not declared", ub->Append(0));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "[5, 9]", ub->Append(-3));
  ASSERT_OK(ub->Append(9));
  ASSERT_OK(As<StringBuilder>(ub->child_builder(1))->Append("x"));
  ASSERT_OK(ub->AppendEmptyValue());
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, b->Finish());
  const auto& u = static_cast<const UnionArray&>(*a);
  EXPECT_EQ(u.type_code(0), 9);
  EXPECT_EQ(u.type_code(1), 5);
  EXPECT_EQ(u.child_id(0), 1);
  EXPECT_EQ(u.value_offset(1), 0);
}

TEST(BuilderTest, SparseUnionNonNullableSiblingGetsEmptyValue) {
  auto type = sparse_union({field("a", int8(), false), field("b", utf8())});
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(type));
  auto* ub = As<SparseUnionBuilder>(b);
  ASSERT_OK(ub->Append(1));
  ASSERT_OK(As<StringBuilder>(ub->child_builder(1))->Append("x"));
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr d, b->FinishData());
  EXPECT_EQ(d->child_data[0]->null_count, 0);
  EXPECT_EQ(d->child_data[0]->length, 1);
}

TEST(BuilderTest, UnionChildCountMismatch) {
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(dense_union({field("a", int8())})));
  auto* ub = As<DenseUnionBuilder>(b);
  ASSERT_OK(ub->Append(0));  // no child value appended
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "has 0 values but 1 slots select it", b->Finish());
  EXPECT_EQ(b->length(), 0);

  ASSERT_OK_AND_ASSIGN(auto s, MakeBuilder(sparse_union({field("a", int8())})));
  ASSERT_OK(As<SparseUnionBuilder>(s)->Append(0));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "has 0 values, expected 1", s->Finish());
}

TEST(BuilderTest, NestedCombination) {
  // list<struct<tag: dictionary<int8, utf8>, runs: run_end_encoded<int16, int32>>>
  auto inner = struct_(
      {field("tag", dictionary(int8(), utf8())), field("runs", run_end_encoded(int16(), int32()))});
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(list(inner)));
  auto* lb = As<ListBuilder>(b);
  auto* sb = As<StructBuilder>(lb->value_builder());
  auto* tag = As<DictionaryBuilder>(sb->field_builder(0));
  auto* runs = As<RunEndEncodedBuilder>(sb->field_builder(1));
  ASSERT_OK(lb->Append());
  for (int k = 0; k < 3; ++k) {
    ASSERT_OK(sb->Append());
    ASSERT_OK(tag->Append(k % 2 == 0 ? "even" : "odd"));
    ASSERT_OK(runs->Append(int32_t{7}));
  }
  ASSERT_OK(lb->AppendNull());
  ASSERT_OK(lb->Append());
  ASSERT_OK(sb->AppendNull());
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, b->Finish());
  const ArrayData& d = *a->data();
  EXPECT_EQ(ValuesOf<int32_t>(d.buffers[1]), (std::vector<int32_t>{0, 3, 3, 4}));
  const ArrayData& s = *d.child_data[0];
  EXPECT_EQ(s.length, 4);
  EXPECT_EQ(s.null_count, 1);
  const ArrayData& t = *s.child_data[0];
  EXPECT_EQ(ValuesOf<int8_t>(t.buffers[1]), (std::vector<int8_t>{0, 1, 0, 0}));
  EXPECT_EQ(t.null_count, 1);
  EXPECT_EQ(t.dictionary->length, 2);
  const ArrayData& r = *s.child_data[1];
  EXPECT_EQ(r.length, 4);
  // Three equal values merge into one run; the struct's null adds a null run.
  EXPECT_EQ(ValuesOf<int16_t>(r.child_data[0]->buffers[1]), (std::vector<int16_t>{3, 4}));
  ExpectAllWellFormed(d);
}

TEST(BuilderTest, RunEndEncodedDetails) {
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(run_end_encoded(int16(), utf8())));
  auto* rb = As<RunEndEncodedBuilder>(b);
  ASSERT_OK(rb->Append("a", 3));
  ASSERT_OK(rb->Append(std::string_view("a"), 2));
  ASSERT_OK(rb->Append("b"));
  ASSERT_OK(rb->AppendNulls(2));
  ASSERT_OK(rb->AppendNulls(1));
  ASSERT_OK(rb->AppendEmptyValues(2));
  ASSERT_OK(rb->Append("", 1));
  ASSERT_OK(rb->Append("z", 0));  // empty run: nothing
  EXPECT_EQ(rb->length(), 12);
  EXPECT_EQ(rb->num_runs(), 4);
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr d, b->FinishData());
  EXPECT_EQ(ValuesOf<int16_t>(d->child_data[0]->buffers[1]), (std::vector<int16_t>{5, 6, 9, 12}));
  const ArrayData& v = *d->child_data[1];
  EXPECT_EQ(v.length, 4);
  EXPECT_EQ(v.buffers[2]->ToString(), "ab");
  EXPECT_EQ(BytesOf(v.buffers[0]), std::vector<uint8_t>{0b1011});

  // Overflow of int16 run ends.
  ASSERT_OK(rb->Append("x", 32767));
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "max 32767", rb->Append("x", 1));
  ASSERT_RAISES(kCapacityError, rb->AppendNull());
  EXPECT_EQ(rb->length(), 32767);
  rb->Reset();

  // Value types without a byte form go through value_builder() + AppendRun.
  ASSERT_OK_AND_ASSIGN(auto lb, MakeBuilder(run_end_encoded(int64(), list(int8()))));
  auto* rl = As<RunEndEncodedBuilder>(lb);
  ASSERT_RAISES(kTypeError, rl->Append("x"));
  auto* values = As<ListBuilder>(rl->value_builder());
  ASSERT_OK(values->Append());
  ASSERT_OK(As<Int8Builder>(values->value_builder())->Append(1));
  ASSERT_OK(rl->AppendRun(10));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "exactly one new value", rl->AppendRun(1));
  ASSERT_OK(rl->AppendEmptyValue());
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr ld, lb->FinishData());
  EXPECT_EQ(ValuesOf<int64_t>(ld->child_data[0]->buffers[1]), (std::vector<int64_t>{10, 11}));
}

TEST(BuilderTest, DictionaryIndexOverflow) {
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(dictionary(int8(), int32())));
  auto* db = As<DictionaryBuilder>(b);
  for (int32_t k = 0; k < 128; ++k) ASSERT_OK(db->Append(k));
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "index 128", db->Append(int32_t{1000}));
  EXPECT_EQ(db->length(), 128);
  ASSERT_OK(db->Append(int32_t{127}));  // existing values still work
  ASSERT_RAISES(kTypeError, db->Append(1.5));
  ASSERT_RAISES(kTypeError, db->Append(int64_t{1}));
  ASSERT_RAISES(kInvalid, db->Append("abc"));
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr d, b->FinishData());
  EXPECT_EQ(d->dictionary->length, 128);
  EXPECT_EQ(ValuesOf<int8_t>(d->buffers[1]).back(), 127);

  // uint8 indices go to 255.
  ASSERT_OK_AND_ASSIGN(auto u, MakeBuilder(dictionary(uint8(), int16())));
  auto* ud = As<DictionaryBuilder>(u);
  for (int16_t k = 0; k < 256; ++k) ASSERT_OK(ud->Append(k));
  ASSERT_RAISES(kCapacityError, ud->Append(int16_t{-1}));
}

TEST(BuilderTest, DictionaryValueTypes) {
  const std::vector<TypePtr> value_types = {int8(),
                                            uint64(),
                                            float32(),
                                            float64(),
                                            float16(),
                                            date32(),
                                            timestamp(TimeUnit::kMilli),
                                            fixed_size_binary(2),
                                            decimal128(10, 2),
                                            binary(),
                                            large_utf8(),
                                            binary_view(),
                                            utf8_view()};
  for (const auto& vt : value_types) {
    SCOPED_TRACE(vt->ToString());
    ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(dictionary(int16(), vt)));
    auto* db = As<DictionaryBuilder>(b);
    const int w = IsFixedWidth(vt->id()) ? BitWidth(*vt) / 8 : 15;
    const std::string x(static_cast<size_t>(w), 'x');
    const std::string y(static_cast<size_t>(w), 'y');
    ASSERT_OK(db->Append(x));
    ASSERT_OK(db->Append(y));
    ASSERT_OK(db->Append(x));
    ASSERT_OK(db->AppendEmptyValue());
    ASSERT_OK(db->AppendNull());
    ASSERT_OK_AND_ASSIGN(ArrayPtr a, b->Finish());
    const auto& da = static_cast<const DictionaryArray&>(*a);
    EXPECT_EQ(da.GetIndex(0), 0);
    EXPECT_EQ(da.GetIndex(1), 1);
    EXPECT_EQ(da.GetIndex(2), 0);
    EXPECT_EQ(da.GetIndex(3), 2);
    EXPECT_TRUE(a->IsNull(4));
    ASSERT_NE(da.dictionary(), nullptr);
    EXPECT_EQ(da.dictionary()->length(), 3);
    EXPECT_TRUE(da.dictionary()->type()->Equals(*vt));
  }
  ASSERT_RAISES(kTypeError, MakeBuilder(dictionary(int8(), list(int8()))));
  ASSERT_RAISES(kTypeError, MakeBuilder(dictionary(int8(), boolean())));
  DictionaryBuilder bad(dictionary(int8(), struct_({})));
  ASSERT_RAISES(kTypeError, bad.Append("x"));
  ASSERT_RAISES(kTypeError, bad.Finish());
}

TEST(BuilderTest, DictionaryDeltas) {
  DictionaryBuilder b(dictionary(int32(), utf8()));
  ASSERT_OK(b.Append("foo"));
  ASSERT_OK(b.Append("bar"));
  ASSERT_OK_AND_ASSIGN(DictionaryDelta first, b.FinishDelta());
  EXPECT_EQ(first.delta_offset, 0);
  ASSERT_EQ(first.delta->length(), 2);
  EXPECT_EQ(first.array->length(), 2);

  ASSERT_OK(b.Append("bar"));
  ASSERT_OK(b.Append("baz"));
  ASSERT_OK(b.AppendNull());
  ASSERT_OK_AND_ASSIGN(DictionaryDelta second, b.FinishDelta());
  EXPECT_EQ(second.delta_offset, 2);
  ASSERT_EQ(second.delta->length(), 1);
  EXPECT_EQ(static_cast<const StringArray&>(*second.delta).GetView(0), "baz");
  const auto& da = static_cast<const DictionaryArray&>(*second.array);
  EXPECT_EQ(da.GetIndex(0), 1);
  EXPECT_EQ(da.GetIndex(1), 2);
  EXPECT_TRUE(da.IsNull(2));
  EXPECT_EQ(da.dictionary()->length(), 3);

  // Nothing new: an empty delta. Finish also marks entries as sent.
  ASSERT_OK(b.Append("foo"));
  ASSERT_OK_AND_ASSIGN(DictionaryDelta third, b.FinishDelta());
  EXPECT_EQ(third.delta->length(), 0);
  ASSERT_OK(b.Append("qux"));
  ASSERT_OK_AND_ASSIGN(ArrayPtr full, b.Finish());
  EXPECT_EQ(static_cast<const DictionaryArray&>(*full).dictionary()->length(), 4);
  ASSERT_OK_AND_ASSIGN(DictionaryDelta fourth, b.FinishDelta());
  EXPECT_EQ(fourth.delta->length(), 0);
  EXPECT_EQ(fourth.delta_offset, 4);

  b.ResetFull();
  EXPECT_EQ(b.dictionary_length(), 0);
}

TEST(BuilderTest, DictionaryInsertMemoValues) {
  StringBuilder sb;
  ASSERT_OK(sb.Append("x"));
  ASSERT_OK(sb.AppendNull());
  ASSERT_OK(sb.Append("y"));
  ASSERT_OK_AND_ASSIGN(ArrayPtr existing, sb.Finish());

  DictionaryBuilder b(dictionary(int8(), utf8()));
  ASSERT_OK(b.InsertMemoValues(*existing));
  EXPECT_EQ(b.dictionary_length(), 3);
  ASSERT_OK(b.Append("y"));
  ASSERT_OK(b.Append("z"));
  ASSERT_OK_AND_ASSIGN(DictionaryDelta out, b.FinishDelta());
  const auto& da = static_cast<const DictionaryArray&>(*out.array);
  EXPECT_EQ(da.GetIndex(0), 2);
  EXPECT_EQ(da.GetIndex(1), 3);
  EXPECT_EQ(out.delta_offset, 3);
  EXPECT_EQ(out.delta->length(), 1);
  EXPECT_TRUE(da.dictionary()->IsNull(1));

  Int32Builder wrong;
  ASSERT_OK(wrong.Append(1));
  ASSERT_OK_AND_ASSIGN(ArrayPtr ints, wrong.Finish());
  ASSERT_RAISES(kTypeError, b.InsertMemoValues(*ints));
}

TEST(BuilderTest, ResetAndReuse) {
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(list(utf8())));
  auto* lb = As<ListBuilder>(b);
  auto* sb = As<StringBuilder>(lb->value_builder());
  ASSERT_OK(lb->Append());
  ASSERT_OK(sb->Append("first"));
  ASSERT_OK(lb->AppendNull());
  b->Reset();
  EXPECT_EQ(b->length(), 0);
  EXPECT_EQ(sb->length(), 0);
  for (int round = 0; round < 2; ++round) {
    ASSERT_OK(lb->Append());
    ASSERT_OK(sb->Append("r" + std::to_string(round)));
    ASSERT_OK_AND_ASSIGN(ArrayDataPtr d, b->FinishData());
    EXPECT_EQ(d->length, 1);
    EXPECT_EQ(d->null_count, 0);
    EXPECT_EQ(d->buffers[0], nullptr);
    EXPECT_EQ(ValuesOf<int32_t>(d->buffers[1]), (std::vector<int32_t>{0, 1}));
    EXPECT_EQ(d->child_data[0]->buffers[2]->ToString(), "r" + std::to_string(round));
  }
}

TEST(BuilderTest, ReserveAndNegativeCounts) {
  Int64Builder b;
  ASSERT_OK(b.Reserve(100));
  ASSERT_RAISES(kInvalid, b.Reserve(-1));
  ASSERT_RAISES(kInvalid, b.AppendNulls(-1));
  ASSERT_RAISES(kInvalid, b.AppendEmptyValues(-2));
  ASSERT_RAISES(kCapacityError, b.Reserve(std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(b.length(), 0);
}

// AppendEmptyValues of the fixed-width builders, each of its ways: zeros
// after a value without a bitmap (the inline reservation), valid zeros
// after a null (with a bitmap: Reserve's way), a byte width other than 8,
// and a count whose bytes overflow (CapacityError, nothing appended).
TEST(BuilderTest, FixedWidthAppendEmptyValues) {
  Int64Builder b;
  ASSERT_OK(b.Append(7));
  ASSERT_OK(b.AppendEmptyValues(3));
  ASSERT_OK(b.AppendEmptyValues(0));
  EXPECT_EQ(b.length(), 4);
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr plain, b.FinishData());
  EXPECT_EQ(plain->null_count, 0);
  EXPECT_EQ(plain->buffers[0], nullptr);
  EXPECT_EQ(ValuesOf<int64_t>(plain->buffers[1]), (std::vector<int64_t>{7, 0, 0, 0}));

  ASSERT_OK(b.Append(5));
  ASSERT_OK(b.AppendNull());
  ASSERT_OK(b.AppendEmptyValues(2));
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr nulls, b.FinishData());
  EXPECT_EQ(nulls->length, 4);
  EXPECT_EQ(nulls->null_count, 1);
  ASSERT_NE(nulls->buffers[0], nullptr);
  EXPECT_EQ(nulls->buffers[0]->data()[0] & 0x0F, 0x0D);  // valid, null, valid, valid
  EXPECT_EQ(ValuesOf<int64_t>(nulls->buffers[1]), (std::vector<int64_t>{5, 0, 0, 0}));

  FixedSizeBinaryBuilder three(fixed_size_binary(3), default_memory_pool());
  ASSERT_OK(three.Append("abc"));
  ASSERT_OK(three.AppendEmptyValues(2));
  ASSERT_OK_AND_ASSIGN(ArrayDataPtr bytes, three.FinishData());
  EXPECT_EQ(bytes->length, 3);
  EXPECT_EQ(bytes->buffers[1]->size(), 9);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes->buffers[1]->data()), 9),
            std::string("abc\0\0\0\0\0\0", 9));

  ASSERT_RAISES(kCapacityError, b.AppendEmptyValues(std::numeric_limits<int64_t>::max() / 2));
  ASSERT_RAISES(kCapacityError, b.AppendEmptyValues(int64_t{1} << 61));
  EXPECT_EQ(b.length(), 0);
}

// ---------------------------------------------------------------------------
// A builder's bytes: a plain allocation of its pool until Finish, which
// makes the one buffer object that owns them

// The default pool behind a count of the calls and of the bytes lent, that
// fails its allocations when told to.
class CountingPool final : public MemoryPool {
 public:
  Result<uint8_t*> Allocate(int64_t size, int64_t alignment) override {
    ++allocations;
    if (fail) return Status::OutOfMemory("CountingPool: told to fail");
    ALKAID_ASSIGN_OR_RAISE(uint8_t * p, default_memory_pool()->Allocate(size, alignment));
    live += size;
    return p;
  }
  Result<uint8_t*> Reallocate(uint8_t* ptr, int64_t old_size, int64_t new_size,
                              int64_t alignment) override {
    ++reallocations;
    if (fail) return Status::OutOfMemory("CountingPool: told to fail");
    ALKAID_ASSIGN_OR_RAISE(uint8_t * p,
                           default_memory_pool()->Reallocate(ptr, old_size, new_size, alignment));
    live += new_size - old_size;
    return p;
  }
  void Free(uint8_t* ptr, int64_t size, int64_t alignment) override {
    ++frees;
    live -= size;
    default_memory_pool()->Free(ptr, size, alignment);
  }
  int64_t bytes_allocated() const override { return live; }
  int64_t max_memory() const override { return 0; }
  std::string backend_name() const override { return "counting"; }
  using MemoryPool::Allocate;
  using MemoryPool::Free;

  int allocations = 0;
  int reallocations = 0;
  int frees = 0;
  int64_t live = 0;
  bool fail = false;
};

TEST(BuilderMemory, BytesOfABuilderNeverFinishedGoBackToThePool) {
  CountingPool pool;
  {
    Int64Builder b(&pool);
    ASSERT_OK(b.Reserve(100));
    for (int64_t i = 0; i < 100; ++i) b.UnsafeAppend(i);
    EXPECT_EQ(pool.live, 832);  // 800 bytes, padded to 64
  }
  EXPECT_EQ(pool.live, 0);
  EXPECT_EQ(pool.allocations, 1);
  EXPECT_EQ(pool.frees, 1);
}

// A pool whose bytes come from another (its shared owner), as a
// ShmBatchPool's come from its region: a builder takes them, and the
// owner, with MemoryPool::AllocateWithOwner's default, and gives them back
// to the owner.
class FrontPool final : public MemoryPool {
 public:
  Result<uint8_t*> Allocate(int64_t /*size*/, int64_t /*alignment*/) override {
    ++allocations;
    return Status::Invalid("FrontPool: the bytes come from the owner");
  }
  void Free(uint8_t* /*ptr*/, int64_t /*size*/, int64_t /*alignment*/) override { ++frees; }
  int64_t bytes_allocated() const override { return 0; }
  int64_t max_memory() const override { return 0; }
  std::string backend_name() const override { return "front"; }
  std::shared_ptr<MemoryPool> shared_owner() override { return owner; }
  using MemoryPool::Allocate;
  using MemoryPool::Free;

  std::shared_ptr<CountingPool> owner = std::make_shared<CountingPool>();
  int allocations = 0;
  int frees = 0;
};

TEST(BuilderMemory, AllocateWithOwnerTakesTheBytesFromTheSharedOwner) {
  // Without a shared owner: Allocate's bytes, no owner.
  CountingPool plain;
  uint8_t* p = nullptr;
  std::shared_ptr<MemoryPool> owner;
  ASSERT_OK(plain.AllocateWithOwner(100, kBufferAlignment, &p, &owner));
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(owner, nullptr);
  EXPECT_EQ(plain.allocations, 1);
  EXPECT_EQ(plain.live, 100);
  plain.Free(p, 100);
  // With one: its bytes, and the owner handed out.
  FrontPool front;
  ASSERT_OK(front.AllocateWithOwner(100, kBufferAlignment, &p, &owner));
  EXPECT_EQ(owner, front.owner);
  EXPECT_EQ(front.allocations, 0);
  EXPECT_EQ(front.owner->allocations, 1);
  owner->Free(p, 100);
  owner.reset();
  // A failure hands out nothing.
  front.owner->fail = true;
  uint8_t* untouched = nullptr;
  ASSERT_RAISES(kOutOfMemory, front.AllocateWithOwner(100, kBufferAlignment, &untouched, &owner));
  EXPECT_EQ(untouched, nullptr);
  EXPECT_EQ(owner, nullptr);
  front.owner->fail = false;
  // A builder: its bytes from the owner, given back to it when the array goes.
  {
    Int64Builder b(&front);
    ASSERT_OK(b.Reserve(10));
    for (int64_t i = 0; i < 10; ++i) b.UnsafeAppend(i);
    EXPECT_EQ(front.owner->live, 128);
    ASSERT_OK_AND_ASSIGN(auto array, b.Finish());
    EXPECT_EQ(static_cast<const Int64Array&>(*array).Value(9), 9);
  }
  EXPECT_EQ(front.owner->live, 0);
  EXPECT_EQ(front.allocations, 0);
  EXPECT_EQ(front.frees, 0);
}

// NumericBuilder::Reserve's inline way serves a builder without nulls; once
// a null made the bitmap, Reserve reserves its bits too (the appends after
// it write them in the space reserved).
TEST(BuilderMemory, ReserveAfterANullReservesTheBitsToo) {
  CountingPool pool;
  Int64Builder b(&pool);
  ASSERT_OK(b.Reserve(1));
  EXPECT_EQ(pool.live, 64);  // no bitmap
  ASSERT_OK(b.AppendNull());
  EXPECT_EQ(pool.live, 64 + 64);  // the bitmap's first byte, padded
  ASSERT_OK(b.Reserve(1000));
  // 1,001 values (8,008 bytes, padded to 8,064) and 1,001 bits (126 bytes,
  // padded to 128).
  EXPECT_EQ(pool.live, 8064 + 128);
  for (int64_t i = 0; i < 1000; ++i) b.UnsafeAppend(i);
  ASSERT_OK_AND_ASSIGN(auto array, b.Finish());
  const auto& values = static_cast<const Int64Array&>(*array);
  EXPECT_EQ(values.length(), 1001);
  EXPECT_EQ(values.null_count(), 1);
  EXPECT_TRUE(values.IsNull(0));
  for (int64_t i = 1; i < 1001; ++i) ASSERT_EQ(values.Value(i), i - 1);
}

// Reset gives the bytes back; the builder then builds again, and every
// array it finished keeps its own bytes.
TEST(BuilderMemory, ResetAndFinishLeaveTheBuilderReadyForTheNextArray) {
  CountingPool pool;
  Int64Builder b(&pool);
  ASSERT_OK(b.Append(-1));
  b.Reset();
  EXPECT_EQ(pool.live, 0);
  EXPECT_EQ(b.length(), 0);
  std::vector<ArrayPtr> arrays;
  for (int64_t round = 0; round < 3; ++round) {
    ASSERT_OK(b.Reserve(8));
    for (int64_t i = 0; i < 8; ++i) b.UnsafeAppend(round * 100 + i);
    ASSERT_OK(b.AppendNull());
    ASSERT_OK_AND_ASSIGN(auto a, b.Finish());
    EXPECT_EQ(b.length(), 0);
    EXPECT_EQ(b.null_count(), 0);
    arrays.push_back(std::move(a));
  }
  for (int64_t round = 0; round < 3; ++round) {
    const auto& d = *arrays[static_cast<size_t>(round)]->data();
    ASSERT_EQ(d.length, 9);
    EXPECT_EQ(d.null_count, 1);
    ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(d.buffers[0]));
    ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(d.buffers[1]));
    for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(d.GetValues<int64_t>(1)[i], round * 100 + i);
    EXPECT_TRUE(d.IsNull(8));
  }
  EXPECT_GT(pool.live, 0);
  arrays.clear();
  EXPECT_EQ(pool.live, 0);
}

// Finish shrinks the allocation to the padded length (one Reallocate), and
// hands it out in one buffer object: no copy, no second allocation.
TEST(BuilderMemory, FinishShrinksTheAllocationAndCopiesNothing) {
  CountingPool pool;
  Int64Builder b(&pool);
  ASSERT_OK(b.Reserve(1000));
  for (int64_t i = 0; i < 10; ++i) b.UnsafeAppend(i);
  ASSERT_OK_AND_ASSIGN(auto a, b.Finish());
  const auto& values = a->data()->buffers[1];
  EXPECT_EQ(values->size(), 80);
  EXPECT_EQ(values->capacity(), 128);
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(values));
  EXPECT_EQ(pool.allocations, 1);
  EXPECT_EQ(pool.reallocations, 1);
  EXPECT_EQ(pool.live, 128);
  a.reset();
  EXPECT_EQ(pool.live, 0);
}

// A pool that cannot shrink: the buffer goes out at full capacity, its
// size exact and its padding zero.
TEST(BuilderMemory, AFailedShrinkHandsTheBufferOutWhole) {
  CountingPool pool;
  Int64Builder b(&pool);
  ASSERT_OK(b.Reserve(1000));
  for (int64_t i = 0; i < 10; ++i) b.UnsafeAppend(i);
  pool.fail = true;
  ASSERT_OK_AND_ASSIGN(auto a, b.Finish());
  pool.fail = false;
  const auto& values = a->data()->buffers[1];
  EXPECT_EQ(values->size(), 80);
  EXPECT_EQ(values->capacity(), 8000);
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(values));
  EXPECT_EQ(ValuesOf<int64_t>(values), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  a.reset();
  EXPECT_EQ(pool.live, 0);
}

// Growth that fails leaves the builder as it was.
TEST(BuilderMemory, AFailedGrowthLeavesTheBuilderAsItWas) {
  CountingPool pool;
  Int64Builder b(&pool);
  ASSERT_OK(b.Append(7));
  pool.fail = true;
  ASSERT_RAISES(kOutOfMemory, b.Reserve(1000));
  ASSERT_RAISES(kOutOfMemory, b.AppendValues(std::vector<int64_t>(100, 1)));
  pool.fail = false;
  EXPECT_EQ(b.length(), 1);
  ASSERT_OK(b.Append(8));
  ASSERT_OK_AND_ASSIGN(auto a, b.Finish());
  EXPECT_EQ(ValuesOf<int64_t>(a->data()->buffers[1]), (std::vector<int64_t>{7, 8}));
  a.reset();
  EXPECT_EQ(pool.live, 0);
}

// A pool whose memory is never zero (as a recycled region's): each
// allocation comes filled with 0xAB.
class DirtyPool final : public MemoryPool {
 public:
  Result<uint8_t*> Allocate(int64_t size, int64_t alignment) override {
    ALKAID_ASSIGN_OR_RAISE(uint8_t * p, default_memory_pool()->Allocate(size, alignment));
    std::memset(p, 0xAB, static_cast<size_t>(size));
    return p;
  }
  Result<uint8_t*> Reallocate(uint8_t* ptr, int64_t old_size, int64_t new_size,
                              int64_t alignment) override {
    ALKAID_ASSIGN_OR_RAISE(uint8_t * p, Allocate(new_size, alignment));
    std::memcpy(p, ptr, static_cast<size_t>(std::min(old_size, new_size)));
    Free(ptr, old_size, alignment);
    return p;
  }
  void Free(uint8_t* ptr, int64_t size, int64_t alignment) override {
    default_memory_pool()->Free(ptr, size, alignment);
  }
  int64_t bytes_allocated() const override { return 0; }
  int64_t max_memory() const override { return 0; }
  std::string backend_name() const override { return "dirty"; }
  using MemoryPool::Allocate;
  using MemoryPool::Free;
};

// Reserving does not zero (the values overwrite what they cover); every
// buffer a builder finishes has zero padding all the same, on memory that
// was not zero, grown or not, shrunk or not, with or without nulls.
TEST(BuilderMemory, FinishedPaddingIsZeroOnMemoryThatWasNot) {
  DirtyPool pool;
  for (int64_t n : {0, 1, 7, 8, 64, 65, 100}) {
    for (bool nulls : {false, true}) {
      Int32Builder b(&pool);
      ASSERT_OK(b.Reserve(n / 2 + 1));
      for (int64_t i = 0; i < n; ++i) {
        if (nulls && i % 3 == 0) {
          ASSERT_OK(b.AppendNull());
        } else {
          ASSERT_OK(b.Append(static_cast<int32_t>(i)));
        }
      }
      ASSERT_OK_AND_ASSIGN(auto a, b.Finish());
      ASSERT_NO_FATAL_FAILURE(ExpectAllWellFormed(*a->data())) << n << " " << nulls;
      for (int64_t i = 0; i < n; ++i) {
        if (nulls && i % 3 == 0) {
          EXPECT_TRUE(a->IsNull(i));
        } else {
          EXPECT_EQ(static_cast<const Int32Array&>(*a).Value(i), i);
        }
      }
    }
    StringBuilder s(&pool);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_OK(s.Append(std::string(static_cast<size_t>(i % 5), 'x')));
    ASSERT_OK_AND_ASSIGN(auto strings, s.Finish());
    ASSERT_NO_FATAL_FAILURE(ExpectAllWellFormed(*strings->data())) << n;
    internal::BufferBuilder raw(&pool);
    ASSERT_OK(raw.Reserve(1000));
    ASSERT_OK(raw.Append("abc", 3));
    ASSERT_OK_AND_ASSIGN(auto unshrunk, raw.Finish(/*shrink_to_fit=*/false));
    EXPECT_EQ(unshrunk->capacity(), 1024);
    ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(unshrunk));
  }
}

// The growable buffer itself: bytes a writer put past length() within the
// capacity survive growth, a move hands the allocation over and a move
// onto a buffer with bytes gives those back.
// A byte count past what padding to 64 can hold is refused, first bytes or
// not (it would overflow the padded size).
TEST(BuilderMemory, BufferBuilderRefusesMoreThanItCanPad) {
  CountingPool pool;
  internal::BufferBuilder bytes(&pool);
  ASSERT_RAISES(kCapacityError, bytes.Reserve(std::numeric_limits<int64_t>::max()));
  ASSERT_RAISES(kCapacityError, bytes.Reserve(std::numeric_limits<int64_t>::max() - 62));
  EXPECT_EQ(pool.allocations, 0);
  EXPECT_EQ(bytes.mutable_data(), nullptr);
  ASSERT_OK(bytes.Reserve(10));
  bytes.UnsafeAppend("x", 1);
  ASSERT_RAISES(kCapacityError, bytes.Reserve(std::numeric_limits<int64_t>::max() - 63));
  EXPECT_EQ(bytes.capacity(), 64);
  EXPECT_EQ(bytes.length(), 1);
}

TEST(BuilderMemory, BufferBuilderGrowsAndMoves) {
  CountingPool pool;
  internal::BufferBuilder a(&pool);
  ASSERT_OK(a.Append("abc", 3));
  EXPECT_EQ(a.capacity(), 64);
  a.mutable_data()[20] = 7;  // past length(), within the capacity
  ASSERT_OK(a.Reserve(100));
  EXPECT_EQ(a.capacity(), 128);
  EXPECT_EQ(a.length(), 3);
  EXPECT_EQ(a.data()[20], 7);

  internal::BufferBuilder b(std::move(a));
  EXPECT_EQ(a.length(), 0);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.length(), 3);
  internal::BufferBuilder c(&pool);
  ASSERT_OK(c.Append("xy", 2));
  c = std::move(b);  // c's bytes go back
  EXPECT_EQ(pool.frees, 1);
  EXPECT_EQ(pool.live, 128);
  ASSERT_OK_AND_ASSIGN(auto buf, c.Finish());
  EXPECT_EQ(buf->ToString(), "abc");
  EXPECT_EQ(c.length(), 0);
  ASSERT_OK_AND_ASSIGN(auto empty, c.Finish());  // never allocated since: zero length
  EXPECT_EQ(empty->size(), 0);
  buf.reset();
  empty.reset();
  EXPECT_EQ(pool.live, 0);
}

// ---------------------------------------------------------------------------
// Errors

TEST(BuilderErrors, FixedSizeListChildCountMismatch) {
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(fixed_size_list(int32(), 4)));
  auto* fb = As<FixedSizeListBuilder>(b);
  auto* vb = As<Int32Builder>(fb->value_builder());
  ASSERT_OK(fb->Append());
  ASSERT_OK(vb->AppendValues(std::vector<int32_t>{1, 2, 3}));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "slot 0 has 3 child values, expected 4", fb->Append());
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "slot 0 has 3 child values, expected 4", b->Finish());
  EXPECT_EQ(b->length(), 0);
  EXPECT_EQ(vb->length(), 0);
  ASSERT_OK(vb->Append(1));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "no slot was appended", b->Finish());
}

TEST(BuilderErrors, MapNullKey) {
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(map(int32(), utf8())));
  auto* mb = As<MapBuilder>(b);
  auto* keys = As<Int32Builder>(mb->key_builder());
  auto* items = As<StringBuilder>(mb->item_builder());
  ASSERT_OK(mb->Append());
  ASSERT_OK(keys->Append(1));
  ASSERT_OK(items->Append("a"));
  ASSERT_OK(mb->AppendEmptyValue());
  ASSERT_OK(mb->Append());
  ASSERT_OK(keys->Append(2));
  ASSERT_OK(items->Append("b"));
  ASSERT_OK(keys->AppendNull());
  ASSERT_OK(items->Append("c"));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "key of entry 2 (slot 2) is null", b->Finish());
}

TEST(BuilderErrors, MapKeyItemMismatch) {
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(map(int32(), int32())));
  auto* mb = As<MapBuilder>(b);
  ASSERT_OK(mb->Append());
  ASSERT_OK(As<Int32Builder>(mb->key_builder())->Append(1));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "1 keys but 0 items", mb->Append());
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "1 keys but 0 items", b->Finish());
}

TEST(BuilderErrors, StructChildLengthMismatch) {
  ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(struct_({field("a", int8()), field("b", int8())})));
  auto* sb = As<StructBuilder>(b);
  ASSERT_OK(sb->Append());
  ASSERT_OK(As<Int8Builder>(sb->field_builder(0))->Append(1));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "field 'b' (index 1) has 0 values, expected 1", b->Finish());
}

TEST(BuilderErrors, HandAssembledBuilderWithWrongChildType) {
  ListBuilder lb(list(int32()), std::make_unique<Int64Builder>());
  ASSERT_OK(lb.Append());
  ASSERT_RAISES_WITH_MESSAGE(kTypeError, "list value builder produced int64", lb.Finish());
}

TEST(BuilderErrors, MakeBuilderRejectsNull) {
  ASSERT_RAISES(kInvalid, MakeBuilder(nullptr));
  ASSERT_RAISES(kInvalid, MakeBuilder(int8(), nullptr));
}

// ---------------------------------------------------------------------------
// Memory

TEST(BuilderMemory, EverythingReturnsToThePool) {
  SystemMemoryPool pool;
  {
    auto type = struct_({field("s", utf8()), field("l", list(int64())),
                         field("d", dictionary(int16(), binary_view())),
                         field("u", sparse_union({field("x", float64()), field("y", utf8())})),
                         field("r", run_end_encoded(int32(), decimal128(10, 2)))});
    ASSERT_OK_AND_ASSIGN(auto b, MakeBuilder(type, &pool));
    auto* sb = As<StructBuilder>(b);
    std::vector<ArrayPtr> arrays;
    for (int round = 0; round < 3; ++round) {
      for (int k = 0; k < 500; ++k) {
        if (k % 7 == 3) {
          ASSERT_OK(sb->AppendNull());
          continue;
        }
        ASSERT_OK(sb->Append());
        ASSERT_OK(As<StringBuilder>(sb->field_builder(0))->Append(std::string(k % 20, 'q')));
        auto* l = As<ListBuilder>(sb->field_builder(1));
        ASSERT_OK(l->Append());
        ASSERT_OK(As<Int64Builder>(l->value_builder())->Append(k));
        ASSERT_OK(As<DictionaryBuilder>(sb->field_builder(2))
                      ->Append("value number " + std::to_string(k % 11)));
        auto* u = As<SparseUnionBuilder>(sb->field_builder(3));
        ASSERT_OK(u->Append(0));
        ASSERT_OK(As<DoubleBuilder>(u->child_builder(0))->Append(k * 0.5));
        ASSERT_OK(
            As<DecimalBuilder>(As<RunEndEncodedBuilder>(sb->field_builder(4))->value_builder())
                ->AppendUnscaled(k));
        ASSERT_OK(As<RunEndEncodedBuilder>(sb->field_builder(4))->AppendRun(1));
      }
      ASSERT_OK_AND_ASSIGN(ArrayPtr a, b->Finish());
      EXPECT_EQ(a->length(), 500);
      ExpectAllWellFormed(*a->data());
      arrays.push_back(std::move(a));
    }
    EXPECT_GT(pool.bytes_allocated(), 0);
    b.reset();
    EXPECT_GT(pool.bytes_allocated(), 0);  // the arrays still hold their buffers
    arrays.clear();
  }
  EXPECT_EQ(pool.bytes_allocated(), 0);
}

// ResetTo: a flat builder pointed at another pool drops what it holds and
// draws every buffer from that pool from then on (the first pool's bytes
// all back once its arrays go); nested builders refuse.
TEST(BuilderMemory, ResetToPointsABuilderAtAnotherPool) {
  SystemMemoryPool first;
  SystemMemoryPool second;
  Int64Builder ints(&first);
  StringBuilder strings(&first);
  BooleanBuilder bools(&first);
  ASSERT_OK(ints.Append(1));
  ASSERT_OK(strings.Append("dropped"));
  ASSERT_OK(bools.Append(true));
  EXPECT_GT(first.bytes_allocated(), 0);
  ASSERT_OK(ints.ResetTo(&second));
  ASSERT_OK(strings.ResetTo(&second));
  ASSERT_OK(bools.ResetTo(&second));
  EXPECT_EQ(first.bytes_allocated(), 0);
  EXPECT_EQ(ints.length(), 0);
  EXPECT_EQ(ints.memory_pool(), &second);
  ASSERT_OK(ints.Append(7));
  ASSERT_OK(ints.AppendNull());
  ASSERT_OK(strings.Append("kept"));
  ASSERT_OK(bools.Append(false));
  ASSERT_OK_AND_ASSIGN(auto a, ints.Finish());
  ASSERT_OK_AND_ASSIGN(auto s, strings.Finish());
  ASSERT_OK_AND_ASSIGN(auto b, bools.Finish());
  EXPECT_EQ(first.bytes_allocated(), 0);
  EXPECT_GT(second.bytes_allocated(), 0);
  EXPECT_EQ(static_cast<const Int64Array&>(*a).Value(0), 7);
  EXPECT_TRUE(a->IsNull(1));
  EXPECT_EQ(static_cast<const StringArray&>(*s).GetView(0), "kept");
  EXPECT_FALSE(static_cast<const BooleanArray&>(*b).Value(0));
  a.reset();
  s.reset();
  b.reset();
  EXPECT_EQ(second.bytes_allocated(), 0);
  ASSERT_OK_AND_ASSIGN(auto nested, MakeBuilder(struct_({field("x", int64())}), &first));
  ASSERT_RAISES(kNotImplemented, nested->ResetTo(&second));
}

// ResetTo of an empty fixed-width builder (after a Finish, or with only a
// reservation) takes its inline way: the reservation goes back to the old
// pool and every later buffer, validity bitmap included, comes from the new
// one.
TEST(BuilderMemory, ResetToOfAnEmptyBuilderMovesEveryBuffer) {
  SystemMemoryPool first;
  SystemMemoryPool second;
  Int64Builder ints(&first);
  ASSERT_OK(ints.Reserve(100));
  EXPECT_GT(first.bytes_allocated(), 0);
  ASSERT_OK(ints.ResetTo(&second));
  EXPECT_EQ(first.bytes_allocated(), 0);
  EXPECT_EQ(ints.memory_pool(), &second);
  ASSERT_OK(ints.Append(7));
  ASSERT_OK(ints.AppendNull());
  ASSERT_OK_AND_ASSIGN(auto a, ints.Finish());
  EXPECT_EQ(first.bytes_allocated(), 0);
  EXPECT_GT(second.bytes_allocated(), 0);
  // Finished: empty, and pointed back at the first pool inline.
  ASSERT_OK(ints.ResetTo(&first));
  EXPECT_EQ(ints.memory_pool(), &first);
  ASSERT_OK(ints.AppendNull());
  ASSERT_OK(ints.Append(9));
  ASSERT_OK_AND_ASSIGN(auto b, ints.Finish());
  const int64_t in_second = second.bytes_allocated();
  EXPECT_GT(first.bytes_allocated(), 0);
  a.reset();
  EXPECT_EQ(second.bytes_allocated(), 0);
  EXPECT_GT(in_second, 0);
  EXPECT_EQ(b->length(), 2);
  EXPECT_TRUE(b->IsNull(0));
  EXPECT_EQ(static_cast<const Int64Array&>(*b).Value(1), 9);
  b.reset();
  EXPECT_EQ(first.bytes_allocated(), 0);
}

TEST(BuilderMemory, PoolLimitGivesOutOfMemory) {
  SystemMemoryPool pool(1024);
  Int64Builder b(&pool);
  Status st;
  int64_t appended = 0;
  for (int k = 0; k < 10000 && st.ok(); ++k) {
    st = b.Append(k);
    if (st.ok()) ++appended;
  }
  ASSERT_TRUE(st.IsOutOfMemory()) << st.ToString();
  EXPECT_EQ(b.length(), appended);
  EXPECT_GT(appended, 0);
  // The builder is still usable and consistent.
  ASSERT_OK_AND_ASSIGN(ArrayPtr a, b.Finish());
  EXPECT_EQ(a->length(), appended);
  EXPECT_EQ(static_cast<const Int64Array&>(*a).Value(appended - 1), appended - 1);
  a.reset();
  EXPECT_EQ(pool.bytes_allocated(), 0);

  SystemMemoryPool small(512);
  StringBuilder s(&small);
  ASSERT_RAISES(kOutOfMemory, s.Append(std::string(600, 'x')));
  EXPECT_EQ(s.length(), 0);
  ASSERT_OK(s.Append("fits"));

  ASSERT_OK_AND_ASSIGN(auto lb, MakeBuilder(list(utf8()), &small));
  Status lst;
  for (int k = 0; k < 1000 && lst.ok(); ++k) {
    lst = As<ListBuilder>(lb)->Append();
    if (lst.ok()) lst = As<StringBuilder>(As<ListBuilder>(lb)->value_builder())->Append("abcdef");
  }
  EXPECT_TRUE(lst.IsOutOfMemory()) << lst.ToString();
}

}  // namespace
}  // namespace alkaid::format
