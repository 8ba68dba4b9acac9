// Batches whose Message numbers change from batch to batch (variable-width
// columns): the publisher fills the schema's Message template
// (PublishStats::metadata_filled) and the subscriber makes them by a plan of
// varying numbers (BatchSubscriber, format::ipc::MessagePlan). What is
// received must equal what was sent in every verification mode, and a
// Message of the plan's structure with numbers a reader refuses must be
// refused as a full decode refuses it.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_nested.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/c_data.h"
#include "alkaid/format/ipc/message_template.h"
#include "alkaid/format/validate.h"
#include "batch_layout_internal.h"
#include "client_test_util.h"

namespace alkaid::client {
namespace {

using namespace std::chrono_literals;
using format::ipc::RecordBatchMessageTemplate;
using testing::Channel;

// Every layout the template covers on the publishing side (fixed width,
// booleans, strings, large strings, structs) and one it leaves to the full
// encoding but the subscriber's plan covers (a list).
format::SchemaPtr MixedSchema() {
  return format::schema({
      format::field("id", format::int64()),
      format::field("name", format::utf8()),
      format::field("flag", format::boolean(), false),
      format::field("big", format::large_utf8()),
      format::field("pair", format::struct_({format::field("a", format::int32()),
                                             format::field("b", format::binary())})),
  });
}

format::SchemaPtr WithList() {
  auto fields = MixedSchema()->fields();
  fields.push_back(format::field("tags", format::list(format::utf8())));
  return format::schema(fields);
}

// Batch k of `schema` (MixedSchema or WithList) in `pool`: 1 + (7k mod 23)
// rows, strings of lengths that change with k and the row; nulls in every
// nullable column when k is a multiple of 3, none otherwise (the validity
// bitmaps come and go, so the subscriber needs a plan for each).
Result<format::RecordBatchPtr> MixedBatch(format::MemoryPool* pool, const format::SchemaPtr& schema,
                                          int64_t k) {
  const int64_t rows = 1 + (7 * k) % 23;
  const bool nulls = k % 3 == 0;
  const std::string letters(200, 'q');
  const auto text = [&](int64_t r) {
    return std::string_view(letters).substr(0, (k + 3 * r) % 41);
  };
  format::Int64Builder id(pool);
  format::StringBuilder name(pool);
  format::BooleanBuilder flag(pool);
  format::LargeStringBuilder big(pool);
  std::vector<std::unique_ptr<format::ArrayBuilder>> pair_fields;
  pair_fields.push_back(std::make_unique<format::Int32Builder>(pool));
  pair_fields.push_back(std::make_unique<format::BinaryBuilder>(pool));
  format::StructBuilder pair(schema->field(4)->type(), std::move(pair_fields), pool);
  format::ListBuilder tags(format::list(format::utf8()),
                           std::make_unique<format::StringBuilder>(pool), pool);
  for (int64_t r = 0; r < rows; ++r) {
    const bool null = nulls && r % 4 == 1;
    ALKAID_RETURN_NOT_OK(null ? id.AppendNull() : id.Append(k * 1000 + r));
    ALKAID_RETURN_NOT_OK(null ? name.AppendNull() : name.Append(text(r)));
    ALKAID_RETURN_NOT_OK(flag.Append((k + r) % 2 == 0));
    ALKAID_RETURN_NOT_OK(null ? big.AppendNull() : big.Append(text(r + 1)));
    if (null) {
      ALKAID_RETURN_NOT_OK(pair.AppendNull());
    } else {
      ALKAID_RETURN_NOT_OK(pair.Append());
      ALKAID_RETURN_NOT_OK(static_cast<format::Int32Builder*>(pair.field_builder(0))
                               ->Append(static_cast<int32_t>(r)));
      ALKAID_RETURN_NOT_OK(
          static_cast<format::BinaryBuilder*>(pair.field_builder(1))->Append(text(r + 2)));
    }
    ALKAID_RETURN_NOT_OK(tags.Append(!null));
    for (int64_t t = 0; !null && t < (k + r) % 3; ++t) {
      ALKAID_RETURN_NOT_OK(
          static_cast<format::StringBuilder*>(tags.value_builder())->Append(text(t)));
    }
  }
  std::vector<format::ArrayPtr> columns;
  for (format::ArrayBuilder* b :
       std::initializer_list<format::ArrayBuilder*>{&id, &name, &flag, &big, &pair, &tags}) {
    ALKAID_ASSIGN_OR_RAISE(auto a, b->Finish());
    columns.push_back(std::move(a));
  }
  columns.resize(static_cast<size_t>(schema->num_fields()));
  return format::RecordBatch::Make(schema, rows, columns);
}

class VaryingPlanTest : public ::testing::TestWithParam<bool> {};

// 60 batches of new numbers each, received by a subscriber of each
// verification mode: every batch equals the one sent, the publisher filled
// the template for all of them (without the list), and each subscriber
// made all but the full decodes of each structure's first two by a plan.
TEST_P(VaryingPlanTest, BatchesOfNewNumbersArriveIntactInEveryMode) {
  const bool list = GetParam();
  const auto schema = list ? WithList() : MixedSchema();
  Channel ch;
  ASSERT_OK(ch.Create(4 << 20));
  ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
  std::vector<std::unique_ptr<BatchSubscriber>> subs;
  for (Verification mode :
       {Verification::kStructure, Verification::kFull, Verification::kPrivateCopy}) {
    SubscriberOptions options;
    options.verification = mode;
    ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(ch.name, schema, options));
    subs.push_back(std::move(sub));
  }
  constexpr int64_t kBatches = 60;
  for (int64_t k = 0; k < kBatches; ++k) {
    ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(64 << 10));
    ASSERT_OK_AND_ASSIGN(auto batch, MixedBatch(pool.get(), schema, k));
    ASSERT_OK(format::ValidateFull(*batch));
    ASSERT_OK(pub->Publish(*batch, pool.get()));
    for (auto& sub : subs) {
      ASSERT_OK_AND_ASSIGN(auto got, sub->Receive(1s));
      ASSERT_NE(got.batch, nullptr);
      ASSERT_TRUE(got.batch->Equals(*batch)) << "batch " << k << ":\n"
                                             << got.batch->ToString() << "\nsent:\n"
                                             << batch->ToString();
      ASSERT_NE(got.metadata, nullptr);
      ASSERT_NE(got.body, nullptr);
      // Exported through the C Data Interface (the export parked in the
      // batch's graph takes this batch's numbers) and imported back.
      ArrowArray exported;
      ASSERT_OK(format::ExportRecordBatch(got.batch, &exported));
      got = {};
      ASSERT_OK_AND_ASSIGN(auto imported, format::ImportRecordBatch(&exported, schema));
      ASSERT_TRUE(imported->Equals(*batch)) << "batch " << k << " exported:\n"
                                            << imported->ToString();
    }
  }
  // The list is not a layout the publisher's template covers: encoded in
  // full each time, with the same structure, which the plans take alike.
  EXPECT_EQ(pub->stats().metadata_filled, list ? 0u : static_cast<uint64_t>(kBatches));
  for (auto& sub : subs) {
    // Two structures (bitmaps or none), each decoded in full twice.
    EXPECT_EQ(sub->decode_cache_hits(), static_cast<uint64_t>(kBatches - 4));
  }
}

INSTANTIATE_TEST_SUITE_P(Lists, VaryingPlanTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "WithAList" : "FilledByThePublisher";
                         });

// The same batches in private memory, published with PublishCopy: laid
// out as the IPC writer would, with the template filled (none of them
// repeats the one before, so none goes by a shape id), and received equal.
TEST(VaryingPlanCopyTest, CopiedBatchesOfNewNumbersFillTheTemplate) {
  const auto schema = MixedSchema();
  Channel ch;
  ASSERT_OK(ch.Create(4 << 20));
  ASSERT_OK_AND_ASSIGN(auto pub, BatchPublisher::Create(ch.producer.get(), schema));
  SubscriberOptions options;
  options.verification = Verification::kFull;
  ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(ch.name, schema, options));
  constexpr int64_t kBatches = 30;
  for (int64_t k = 0; k < kBatches; ++k) {
    ASSERT_OK_AND_ASSIGN(auto batch, MixedBatch(format::default_memory_pool(), schema, k));
    ASSERT_OK(pub->PublishCopy(*batch));
    ASSERT_OK_AND_ASSIGN(auto got, sub->Receive(1s));
    ASSERT_NE(got.batch, nullptr);
    ASSERT_TRUE(got.batch->Equals(*batch)) << "batch " << k;
  }
  EXPECT_EQ(pub->stats().copied_batches, static_cast<uint64_t>(kBatches));
  EXPECT_EQ(pub->stats().metadata_filled, static_cast<uint64_t>(kBatches));
  EXPECT_EQ(pub->stats().metadata_reused, 0u);
  EXPECT_EQ(sub->decode_cache_hits(), static_cast<uint64_t>(kBatches - 4));
}

// A strings-only topic for the hostile cases: one utf8 column.
struct StringTopic {
  Channel ch;
  format::SchemaPtr schema = format::schema({format::field("s", format::utf8(), false)});
  std::unique_ptr<BatchPublisher> pub;

  void Open() {
    ASSERT_OK(ch.Create(1 << 20));
    ASSERT_OK_AND_ASSIGN(pub, BatchPublisher::Create(ch.producer.get(), schema));
  }
  void PublishHonest(int64_t rows, int64_t width) {
    ASSERT_OK_AND_ASSIGN(auto pool, pub->NewPool(8192));
    format::StringBuilder b(pool.get());
    const std::string value(static_cast<size_t>(width), 'h');
    for (int64_t r = 0; r < rows; ++r) ASSERT_OK(b.Append(value));
    ASSERT_OK_AND_ASSIGN(auto a, b.Finish());
    ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(schema, rows, {a}));
    ASSERT_OK(pub->Publish(*batch, pool.get()));
  }
  // A message as a hostile producer could write it: `md` inline over a
  // block of `body` bytes of 'h'.
  Status Send(const std::vector<uint8_t>& md, uint64_t body) {
    internal::UserWord user;
    user.body_length = body;
    ALKAID_ASSIGN_OR_RAISE(auto loan, ch.producer->Loan(body));
    std::memset(loan.data().data(), 'h', loan.data().size());
    return ch.producer->Publish(std::as_bytes(std::span(md.data(), md.size())), std::move(loan),
                                user.Pack(), 0);
  }
};

// After two honest batches (the plan is made), Messages of the plan's
// structure whose numbers a reader refuses: each is refused with the full
// decode's error (the plan leaves them to it), nothing is read out of
// bounds, and an honest batch after them is made by the plan again.
TEST(VaryingPlanHostileTest, NumbersAReaderRefusesAreRefused) {
  StringTopic t;
  ASSERT_NO_FATAL_FAILURE(t.Open());
  SubscriberOptions options;
  options.with_message = true;
  ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(t.ch.name, t.schema, options));
  ASSERT_NO_FATAL_FAILURE(t.PublishHonest(4, 5));
  ASSERT_NO_FATAL_FAILURE(t.PublishHonest(6, 3));
  ReceivedBatch second;
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(second, sub->Receive(1s));
    ASSERT_NE(second.batch, nullptr);
  }
  EXPECT_EQ(sub->decode_cache_hits(), 0u);
  const std::span<const uint8_t> honest(second.metadata->data(),
                                        static_cast<size_t>(second.metadata->size()));
  ASSERT_OK_AND_ASSIGN(auto tmpl, RecordBatchMessageTemplate::FromMessage(honest));
  ASSERT_EQ(tmpl.num_nodes(), 1u);
  ASSERT_EQ(tmpl.num_buffers(), 3u);
  int64_t rows = 0;
  int64_t body = 0;
  RecordBatchMessageTemplate::Node node;
  RecordBatchMessageTemplate::Range ranges[3];
  tmpl.Read(honest.data(), &rows, &body, &node, ranges);
  ASSERT_EQ(rows, 6);
  ASSERT_EQ(node.length, 6);

  struct Case {
    const char* what;
    int64_t rows;
    RecordBatchMessageTemplate::Node node;
    int64_t data_offset;  // the values buffer's
    int64_t data_length;
    const char* error;
  };
  const Case cases[] = {
      {"values past the body", 6, {6, 0}, ranges[2].offset, body, "outside the"},
      {"values at a negative offset", 6, {6, 0}, -64, ranges[2].length, "outside the"},
      {"an offset that overflows", 6, {6, 0}, INT64_MAX - 4, 16, "outside the"},
      {"more nulls than rows", 6, {6, 7}, ranges[2].offset, ranges[2].length, "null count 7"},
      {"a column shorter than the batch",
       7,
       {6, 0},
       ranges[2].offset,
       ranges[2].length,
       "column has length 6, the batch 7"},
      {"a negative length", -1, {-1, 0}, ranges[2].offset, ranges[2].length, "negative length"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    RecordBatchMessageTemplate::Range bad[3] = {
        ranges[0], ranges[1], {c.data_offset, c.data_length}};
    std::vector<uint8_t> md(tmpl.size());
    tmpl.Fill(c.rows, body, &c.node, bad, md.data());
    ASSERT_TRUE(tmpl.Matches(md));
    ASSERT_OK(t.Send(md, static_cast<uint64_t>(body)));
    auto refused = sub->Receive(1s);
    ASSERT_FALSE(refused.ok()) << "returned " << refused->batch->ToString();
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalid) << refused.status();
    EXPECT_NE(refused.status().ToString().find(c.error), std::string::npos) << refused.status();
  }
  EXPECT_EQ(sub->decode_cache_hits(), 0u);
  ASSERT_NO_FATAL_FAILURE(t.PublishHonest(9, 2));
  ASSERT_OK_AND_ASSIGN(auto after, sub->Receive(1s));
  ASSERT_NE(after.batch, nullptr);
  EXPECT_EQ(after.batch->num_rows(), 9);
  EXPECT_EQ(sub->decode_cache_hits(), 1u);
}

// Honest values twice, then a batch of new numbers whose inner offset lies
// far out (the Message says nothing of it), then honest again: the
// kStructure subscriber returns it from the plan (its values are not read),
// kFull and kPrivateCopy refuse it naming the field and the offset, as for
// a plan keyed by the Message's bytes (VerificationCacheTest), and make the
// next batch by the plan.
TEST(VaryingPlanHostileTest, AHostileInnerOffsetIsCaughtByFullAndPrivateCopy) {
  StringTopic t;
  ASSERT_NO_FATAL_FAILURE(t.Open());
  std::vector<std::unique_ptr<BatchSubscriber>> subs;
  for (Verification mode :
       {Verification::kStructure, Verification::kFull, Verification::kPrivateCopy}) {
    SubscriberOptions options;
    options.verification = mode;
    ASSERT_OK_AND_ASSIGN(auto sub, BatchSubscriber::Open(t.ch.name, t.schema, options));
    subs.push_back(std::move(sub));
  }
  ASSERT_NO_FATAL_FAILURE(t.PublishHonest(3, 2));
  ASSERT_NO_FATAL_FAILURE(t.PublishHonest(5, 4));
  {
    // Four rows, their offsets 0, 2^30, 3, 5: the first and last offsets,
    // all Validate reads of them, are right.
    ASSERT_OK_AND_ASSIGN(auto pool, t.pub->NewPool(8192));
    format::StringBuilder b(pool.get());
    for (const char* v : {"ab", "c", "de", "f"}) ASSERT_OK(b.Append(v));
    ASSERT_OK_AND_ASSIGN(auto a, b.Finish());
    auto offsets = a->data()->buffers[1];
    const int32_t far = 1 << 30;
    std::memcpy(offsets->mutable_data() + 4, &far, 4);
    ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(t.schema, 4, {a}));
    ASSERT_OK(t.pub->Publish(*batch, pool.get()));
  }
  ASSERT_NO_FATAL_FAILURE(t.PublishHonest(7, 1));
  EXPECT_EQ(t.pub->stats().metadata_filled, 4u);
  for (size_t i = 0; i < subs.size(); ++i) {
    BatchSubscriber& s = *subs[i];
    SCOPED_TRACE(i);
    for (int k = 0; k < 2; ++k) {
      ASSERT_OK_AND_ASSIGN(auto honest, s.Receive(1s));
      ASSERT_NE(honest.batch, nullptr);
    }
    auto third = s.Receive(1s);
    if (i == 0) {
      ASSERT_OK(third.status());
      EXPECT_FALSE(format::ValidateFull(*third->batch).ok());
    } else {
      ASSERT_FALSE(third.ok()) << "the hostile batch was returned";
      EXPECT_NE(third.status().message().find("field 's'"), std::string::npos) << third.status();
      EXPECT_NE(third.status().message().find("1073741824"), std::string::npos) << third.status();
    }
    ASSERT_OK_AND_ASSIGN(auto fourth, s.Receive(1s));
    ASSERT_NE(fourth.batch, nullptr);
    EXPECT_EQ(fourth.batch->num_rows(), 7);
    EXPECT_OK(format::ValidateFull(*fourth.batch));
    EXPECT_EQ(s.decode_cache_hits(), i == 0 ? 2u : 1u);
  }
}

}  // namespace
}  // namespace alkaid::client
