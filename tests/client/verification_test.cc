// What a consumer checks of a producer's batches in each Verification mode
// (docs/RELIABILITY.md, "Trust between processes"): a producer that sends
// batches whose buffer sizes and first and last offsets are right but whose
// inner offsets, indexes or run ends point elsewhere, and one that rewrites
// a body after the consumer received it. Three subscribers, one per mode,
// read the same channel.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/validate.h"
#include "client_test_util.h"

namespace alkaid::client {
namespace {

using namespace std::chrono_literals;
using format::ArrayData;
using format::ArrayDataPtr;
using testing::Channel;

template <typename T>
std::shared_ptr<format::Buffer> Buf(const std::vector<T>& values) {
  return format::Buffer::CopyOf(std::string_view(reinterpret_cast<const char*>(values.data()),
                                                 values.size() * sizeof(T)))
      .ValueOrDie();
}

std::shared_ptr<format::Buffer> Bytes(std::string_view s) {
  return format::Buffer::CopyOf(s).ValueOrDie();
}

// A 16-byte view of a string longer than 12 bytes: length, prefix, buffer
// index, offset.
std::vector<int32_t> LongView(int32_t length, int32_t buffer_index, int32_t offset) {
  return {length, 0x64636261 /* "abcd" */, buffer_index, offset};
}

struct Case {
  std::string name;
  format::TypePtr type;
  std::function<ArrayDataPtr()> make;
  // Applied to the published array in the region, before the consumers
  // read it (for what the publisher's own layout step would refuse).
  std::function<void(const ArrayData&)> tamper;
};

std::vector<Case> HostileCases() {
  std::vector<Case> cases;
  cases.push_back({"utf8 inner offset", format::utf8(), [] {
                     // First (0) and last (6) offsets fit the 6 data bytes.
                     return ArrayData::Make(
                         format::utf8(), 3,
                         {nullptr, Buf<int32_t>({0, 1 << 30, 5, 6}), Bytes("aabbbc")}, 0);
                   }});
  const auto dict_type = format::dictionary(format::int32(), format::utf8());
  cases.push_back({"dictionary index", dict_type, [dict_type] {
                     auto d = ArrayData::Make(dict_type, 3, {nullptr, Buf<int32_t>({0, 7, 1})}, 0);
                     d->dictionary = ArrayData::Make(
                         format::utf8(), 2, {nullptr, Buf<int32_t>({0, 1, 2}), Bytes("xy")}, 0);
                     return d;
                   }});
  cases.push_back({"view buffer index", format::binary_view(), [] {
                     return ArrayData::Make(
                         format::binary_view(), 1,
                         {nullptr, Buf<int32_t>(LongView(20, 3, 0)), Bytes("abcdefghijklmnopqrst")},
                         0);
                   }});
  cases.push_back({"view offset", format::binary_view(), [] {
                     return ArrayData::Make(format::binary_view(), 1,
                                            {nullptr, Buf<int32_t>(LongView(20, 0, 1 << 30)),
                                             Bytes("abcdefghijklmnopqrst")},
                                            0);
                   }});
  const auto ree_type = format::run_end_encoded(format::int32(), format::int64());
  cases.push_back(
      {"run end", ree_type, [ree_type] {
         // The last run end (5) matches the length; the inner
         // ones are out of order.
         auto ends = ArrayData::Make(format::int32(), 3, {nullptr, Buf<int32_t>({4, 2, 5})}, 0);
         auto values =
             ArrayData::Make(format::int64(), 3, {nullptr, Buf<int64_t>({10, 20, 30})}, 0);
         return ArrayData::Make(ree_type, 5, {}, {ends, values}, 0);
       }});
  const auto lv_type = format::list_view(format::int64());
  cases.push_back(
      {"list view offset", lv_type,
       [lv_type] {
         auto values = ArrayData::Make(format::int64(), 3, {nullptr, Buf<int64_t>({1, 2, 3})}, 0);
         return ArrayData::Make(lv_type, 2, {nullptr, Buf<int32_t>({0, 1}), Buf<int32_t>({2, 1})},
                                {values}, 0);
       },
       [](const ArrayData& d) {
         // Published with offsets 0 and 1; the second becomes 2^30.
         const_cast<int32_t*>(d.GetValues<int32_t>(1))[1] = 1 << 30;
       }});
  return cases;
}

// `d` with every buffer copied into `pool` (a producer's region), as a
// rogue producer would lay it out: PublishCopy would re-base offsets.
ArrayDataPtr IntoPool(const ArrayDataPtr& d, format::MemoryPool* pool) {
  auto out = std::make_shared<ArrayData>(*d);
  for (auto& b : out->buffers) {
    if (b == nullptr) continue;
    auto copy = format::AllocateBuffer(b->size(), pool).ValueOrDie();
    std::memcpy(copy->mutable_data(), b->data(), static_cast<size_t>(b->size()));
    b = std::move(copy);
  }
  for (auto& child : out->child_data) child = IntoPool(child, pool);
  if (out->dictionary != nullptr) out->dictionary = IntoPool(out->dictionary, pool);
  return out;
}

format::SchemaPtr SchemaOf(const format::TypePtr& type) {
  return format::schema({format::field("c", type, false)});
}

struct Readers {
  std::unique_ptr<BatchSubscriber> structure, full, copy;
};

Readers OpenReaders(const std::string& channel, const format::SchemaPtr& schema) {
  Readers r;
  for (auto [mode, out] :
       {std::pair{Verification::kStructure, &r.structure}, std::pair{Verification::kFull, &r.full},
        std::pair{Verification::kPrivateCopy, &r.copy}}) {
    SubscriberOptions options;
    options.verification = mode;
    auto s = BatchSubscriber::Open(channel, schema, options);
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) *out = std::move(*s);
  }
  return r;
}

class VerificationTest : public ::testing::TestWithParam<size_t> {};

// The default mode returns the batch (it does not read values: that is the
// trust it places in the producer); full validation and the private copy
// refuse it; all three go on with the next, honest batch.
TEST_P(VerificationTest, AHostileInnerValueIsCaughtByFullAndPrivateCopyOnly) {
  const Case c = HostileCases()[GetParam()];
  SCOPED_TRACE(c.name);
  const auto schema = SchemaOf(c.type);
  Channel ch;
  shm::ChannelOptions channel_options;
  channel_options.accept_on_publish = false;  // what a schema with dictionaries needs
  ASSERT_OK(ch.Create(1 << 20, channel_options));
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), schema));
  Readers r = OpenReaders(ch.name, schema);
  ASSERT_NE(r.copy, nullptr);

  ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(64 << 10));
  ArrayDataPtr hostile = IntoPool(c.make(), pool.get());
  ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(schema, hostile->length, {hostile}));
  ASSERT_OK(publisher->Publish(*batch, pool.get()));
  if (c.tamper) c.tamper(*hostile);
  // The case passes the structural check and fails the full one.
  ASSERT_OK(format::Validate(*format::MakeArray(hostile)));
  ASSERT_FALSE(format::ValidateFull(*format::MakeArray(hostile)).ok());
  // An empty batch of the type: honest.
  ASSERT_OK_AND_ASSIGN(auto builder, format::MakeBuilder(c.type));
  ASSERT_OK_AND_ASSIGN(auto empty, builder->Finish());
  ASSERT_OK_AND_ASSIGN(auto honest, format::RecordBatch::Make(schema, 0, {empty}));
  ASSERT_OK(publisher->PublishCopy(*honest));

  ASSERT_OK_AND_ASSIGN(ReceivedBatch got, r.structure->Receive(1s));
  ASSERT_NE(got.batch, nullptr);
  EXPECT_EQ(got.batch->num_rows(), hostile->length);
  for (BatchSubscriber* s : {r.full.get(), r.copy.get()}) {
    auto refused = s->Receive(1s);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalid) << refused.status();
  }
  for (BatchSubscriber* s : {r.structure.get(), r.full.get(), r.copy.get()}) {
    ASSERT_OK_AND_ASSIGN(ReceivedBatch next, s->Receive(1s));
    ASSERT_NE(next.batch, nullptr);
    EXPECT_EQ(next.batch->num_rows(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, VerificationTest, ::testing::Range<size_t>(0, 6),
                         [](const ::testing::TestParamInfo<size_t>& param) {
                           std::string n = HostileCases()[param.param].name;
                           for (char& ch : n) {
                             if (ch == ' ') ch = '_';
                           }
                           return n;
                         });

// A producer that rewrites a body after the consumers received it: the
// zero-copy modes read what is there now; the private copy keeps what it
// received and checked.
TEST(VerificationRewriteTest, APrivateCopyIsImmuneToALaterRewrite) {
  const auto schema = SchemaOf(format::int64());
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), schema));
  Readers r = OpenReaders(ch.name, schema);
  ASSERT_NE(r.copy, nullptr);
  ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(64 << 10));
  format::Int64Builder builder(pool.get());
  for (int64_t i = 0; i < 100; ++i) ASSERT_OK(builder.Append(i));
  ASSERT_OK_AND_ASSIGN(auto array, builder.Finish());
  ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(schema, 100, {array}));
  ASSERT_OK(publisher->Publish(*batch, pool.get()));

  std::vector<ReceivedBatch> got;
  for (BatchSubscriber* s : {r.structure.get(), r.full.get(), r.copy.get()}) {
    ASSERT_OK_AND_ASSIGN(ReceivedBatch b, s->Receive(1s));
    ASSERT_NE(b.batch, nullptr);
    got.push_back(std::move(b));
  }
  // The copy holds no block: only the two zero-copy readers do.
  EXPECT_FALSE(got[2].body->Contains(pool->region_data(), 1));
  // The producer still has the region mapped writable: it rewrites it.
  auto* values = const_cast<int64_t*>(array->data()->GetValues<int64_t>(1));
  for (int64_t i = 0; i < 100; ++i) values[i] = -1;
  const auto value = [](const ReceivedBatch& b, int64_t i) {
    return b.batch->column_data(0)->GetValues<int64_t>(1)[i];
  };
  EXPECT_EQ(value(got[0], 42), -1);  // structure: zero-copy
  EXPECT_EQ(value(got[1], 42), -1);  // full: zero-copy, checked before the rewrite
  for (int64_t i = 0; i < 100; ++i) ASSERT_EQ(value(got[2], i), i);
}

}  // namespace
}  // namespace alkaid::client
