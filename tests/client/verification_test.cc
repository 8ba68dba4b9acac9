// What a consumer checks of a producer's batches in each Verification mode
// (docs/RELIABILITY.md, "Trust between processes"): a producer that sends
// batches whose buffer sizes and first and last offsets are right but whose
// inner offsets, indexes or run ends point elsewhere, and one that rewrites
// a body after the consumer received it. Three subscribers, one per mode,
// read the same channel.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/client/row_channel.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/unsafe_row.h"
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

// The decode cache (BatchSubscriber, "Decode cache"): a batch whose Message
// is byte-equal to one decoded in full before is rebuilt from that batch's
// plan over the new body. The metadata says nothing of the values, so an
// honest batch and a hostile one of the same lengths, null counts and
// buffer sizes share it: the plan must still run the full check on each
// rebuilt batch in kFull and kPrivateCopy. (Shape ids are given to
// fixed-width shapes only, whose values cannot break ValidateFull here;
// dictionary-encoded columns are never replayed from a plan.)
struct SameMetadataCase {
  std::string name;
  format::TypePtr type;
  std::function<ArrayDataPtr()> honest;
  std::function<ArrayDataPtr()> hostile;  // the same sizes, one inner offset far out
};

std::vector<SameMetadataCase> SameMetadataCases() {
  std::vector<SameMetadataCase> cases;
  cases.push_back(
      {"utf8", format::utf8(),
       [] {
         return ArrayData::Make(format::utf8(), 3,
                                {nullptr, Buf<int32_t>({0, 2, 5, 6}), Bytes("aabbbc")}, 0);
       },
       [] {
         return ArrayData::Make(format::utf8(), 3,
                                {nullptr, Buf<int32_t>({0, 1 << 30, 5, 6}), Bytes("aabbbc")}, 0);
       }});
  const auto list_type = format::list(format::int64());
  const auto list_of = [list_type](std::vector<int32_t> offsets) {
    auto values = ArrayData::Make(format::int64(), 3, {nullptr, Buf<int64_t>({1, 2, 3})}, 0);
    return ArrayData::Make(list_type, 2, {nullptr, Buf<int32_t>(offsets)}, {values}, 0);
  };
  cases.push_back({"list", list_type,
                   [list_of] {
                     return list_of({0, 1, 3});
                   },
                   [list_of] {
                     return list_of({0, 1 << 30, 3});
                   }});
  return cases;
}

class VerificationCacheTest : public ::testing::TestWithParam<size_t> {};

// Honest twice (metadata without a shape id is cached when it comes
// again), hostile, honest, all with the same Message bytes: the kStructure
// reader returns the hostile batch (from the cached plan: its values are
// not read); kFull and kPrivateCopy, through Receive and ReceiveInto, refuse
// it naming the field and the offset, and go on with the fourth.
TEST_P(VerificationCacheTest, AHostileBatchWithACachedHonestShapeIsRefused) {
  const SameMetadataCase c = SameMetadataCases()[GetParam()];
  SCOPED_TRACE(c.name);
  const auto schema = SchemaOf(c.type);
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  ASSERT_OK_AND_ASSIGN(auto publisher, BatchPublisher::Create(ch.producer.get(), schema));
  Readers r = OpenReaders(ch.name, schema);
  ASSERT_NE(r.copy, nullptr);
  std::unique_ptr<BatchSubscriber> full_view, copy_view;  // ReceiveInto
  for (auto [mode, out] : {std::pair{Verification::kFull, &full_view},
                           std::pair{Verification::kPrivateCopy, &copy_view}}) {
    SubscriberOptions options;
    options.verification = mode;
    ASSERT_OK_AND_ASSIGN(*out, BatchSubscriber::Open(ch.name, schema, options));
  }

  const auto publish = [&](const ArrayDataPtr& d) {
    ASSERT_OK_AND_ASSIGN(auto pool, publisher->NewPool(64 << 10));
    ArrayDataPtr in_pool = IntoPool(d, pool.get());
    ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(schema, d->length, {in_pool}));
    ASSERT_OK(publisher->Publish(*batch, pool.get()));
  };
  ASSERT_OK(format::ValidateFull(*format::MakeArray(c.honest())));
  ASSERT_OK(format::Validate(*format::MakeArray(c.hostile())));
  ASSERT_FALSE(format::ValidateFull(*format::MakeArray(c.hostile())).ok());
  publish(c.honest());
  publish(c.honest());
  publish(c.hostile());
  publish(c.honest());

  // The default mode: four batches, the third and fourth rebuilt from the
  // plan of the second (the same Message bytes).
  std::vector<ReceivedBatch> got;
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(ReceivedBatch b, r.structure->Receive(1s));
    ASSERT_NE(b.batch, nullptr);
    got.push_back(std::move(b));
  }
  for (int i = 1; i < 4; ++i) ASSERT_TRUE(got[0].metadata->Equals(*got[i].metadata));
  EXPECT_EQ(r.structure->decode_cache_hits(), 2u);
  EXPECT_OK(format::ValidateFull(*got[1].batch));
  EXPECT_FALSE(format::ValidateFull(*got[2].batch).ok());

  for (BatchSubscriber* s : {r.full.get(), r.copy.get()}) {
    SCOPED_TRACE(
        VerificationName(s == r.full.get() ? Verification::kFull : Verification::kPrivateCopy));
    for (int i = 0; i < 2; ++i) {
      ASSERT_OK_AND_ASSIGN(ReceivedBatch honest, s->Receive(1s));
      ASSERT_NE(honest.batch, nullptr);
    }
    EXPECT_EQ(s->decode_cache_hits(), 0u);
    auto refused = s->Receive(1s);
    ASSERT_FALSE(refused.ok()) << "the hostile batch was returned";
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalid) << refused.status();
    EXPECT_NE(refused.status().message().find("field 'c'"), std::string::npos) << refused.status();
    EXPECT_NE(refused.status().message().find("end offset 1073741824 is past the end"),
              std::string::npos)
        << refused.status();
    std::printf("%s, %s -> %s\n", c.name.c_str(), s == r.full.get() ? "full" : "private-copy",
                refused.status().ToString().c_str());
    ASSERT_OK_AND_ASSIGN(ReceivedBatch fourth, s->Receive(1s));
    ASSERT_NE(fourth.batch, nullptr);
    EXPECT_OK(format::ValidateFull(*fourth.batch));
    EXPECT_EQ(s->decode_cache_hits(), 1u);  // the fourth, rebuilt from the plan
  }
  // The deprecated view calls (kept one release) refuse it too.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  for (BatchSubscriber* s : {full_view.get(), copy_view.get()}) {
    BatchView view;
    for (int i = 0; i < 2; ++i) {
      ASSERT_OK(s->ReceiveInto(&view, 1s));
      ASSERT_TRUE(view.valid());
    }
    const Status refused = s->ReceiveInto(&view, 1s);
    ASSERT_FALSE(refused.ok()) << "the hostile batch was filled into the view";
    EXPECT_EQ(refused.code(), StatusCode::kInvalid) << refused;
    ASSERT_OK(s->ReceiveInto(&view, 1s));
    ASSERT_TRUE(view.valid());
    EXPECT_EQ(view.num_rows(), c.honest()->length);
  }
#pragma GCC diagnostic pop
}

INSTANTIATE_TEST_SUITE_P(Columns, VerificationCacheTest,
                         ::testing::Range<size_t>(0, SameMetadataCases().size()),
                         [](const ::testing::TestParamInfo<size_t>& param) {
                           return SameMetadataCases()[param.param].name;
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

// Row topics honour the mode too (RowSubscriber): a row batch whose size
// prefixes are right but whose first row puts its string far outside the
// row. kStructure hands it out (zero-copy; ToRecordBatch refuses it when
// it reads the rows); kFull and kPrivateCopy refuse it naming the row and
// the field; all three go on with the next. The private copy holds no
// block of the channel, the zero-copy readers hold theirs.
TEST(VerificationRowsTest, AHostileRowIsRefusedByFullAndPrivateCopy) {
  const auto schema =
      format::schema({format::field("id", format::int64()), format::field("name", format::utf8())});
  Channel ch;
  ASSERT_OK(ch.Create(1 << 20));
  ASSERT_OK_AND_ASSIGN(auto publisher, RowPublisher::Create(ch.producer.get(), schema));
  const Verification modes[] = {Verification::kStructure, Verification::kFull,
                                Verification::kPrivateCopy};
  std::vector<std::unique_ptr<RowSubscriber>> subscribers;
  for (Verification mode : modes) {
    ASSERT_OK_AND_ASSIGN(auto s, RowSubscriber::Open(ch.name, schema, {}, {}, mode));
    subscribers.push_back(std::move(s));
  }
  format::Int64Builder ids;
  format::StringBuilder names;
  for (int64_t i = 0; i < 2; ++i) {
    ASSERT_OK(ids.Append(i));
    ASSERT_OK(names.Append("name-" + std::to_string(i)));
  }
  ASSERT_OK_AND_ASSIGN(auto id_array, ids.Finish());
  ASSERT_OK_AND_ASSIGN(auto name_array, names.Finish());
  ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(schema, 2, {id_array, name_array}));
  ASSERT_OK_AND_ASSIGN(auto encoded, format::EncodeRowBatch(*batch));
  std::vector<uint8_t> hostile(encoded->data(), encoded->data() + encoded->size());
  // Row 0 starts after its 4-byte size: 8 bytes of null bits, the id's
  // slot, then the name's slot (offset << 32 | size): offset 2^20.
  uint64_t slot = 0;
  std::memcpy(&slot, hostile.data() + 4 + 16, 8);
  slot = (uint64_t{1} << 52) | (slot & 0xffffffffU);
  std::memcpy(hostile.data() + 4 + 16, &slot, 8);
  ASSERT_FALSE(
      format::DecodeRowBatch(
          std::string_view(reinterpret_cast<const char*>(hostile.data()), hostile.size()), schema)
          .ok());

  ASSERT_OK(publisher->PublishRows(*batch));
  ASSERT_OK(publisher->PublishRowBatch(hostile));
  ASSERT_OK(publisher->PublishRows(*batch));

  std::vector<std::vector<ReceivedRows>> kept(3);
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(ReceivedRows rows, subscribers[0]->Receive(1s));
    ASSERT_NE(rows.data, nullptr);
    EXPECT_EQ(rows.num_rows, 2);
    EXPECT_EQ(rows.ToRecordBatch().ok(), i != 1) << "row batch " << i;
    kept[0].push_back(std::move(rows));
  }
  for (size_t m = 1; m < 3; ++m) {
    SCOPED_TRACE(VerificationName(modes[m]));
    ASSERT_OK_AND_ASSIGN(ReceivedRows first, subscribers[m]->Receive(1s));
    ASSERT_NE(first.data, nullptr);
    kept[m].push_back(std::move(first));
    auto refused = subscribers[m]->Receive(1s);
    ASSERT_FALSE(refused.ok()) << "the hostile row batch was handed out";
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalid) << refused.status();
    EXPECT_NE(refused.status().message().find("row 0, field 'name'"), std::string::npos)
        << refused.status();
    std::printf("rows, %s -> %s\n", VerificationName(modes[m]),
                refused.status().ToString().c_str());
    ASSERT_OK_AND_ASSIGN(ReceivedRows third, subscribers[m]->Receive(1s));
    ASSERT_NE(third.data, nullptr);
    ASSERT_OK_AND_ASSIGN(auto decoded, third.ToRecordBatch());
    EXPECT_EQ(decoded->num_rows(), 2);
    kept[m].push_back(std::move(third));
  }
  ch.producer->Poll();
  for (const auto& info : ch.producer->consumers()) {
    for (size_t m = 0; m < 3; ++m) {
      if (info.index != subscribers[m]->consumer().index()) continue;
      // Structure: all three; full: the two it accepted; private copy: none.
      const uint64_t expected[] = {3, 2, 0};
      EXPECT_EQ(info.held_blocks, expected[m]) << VerificationName(modes[m]);
    }
  }
}

}  // namespace
}  // namespace alkaid::client
