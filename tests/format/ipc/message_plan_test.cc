// MessagePlan and MessagePlanCache (message_plan.h), and the stream readers'
// use of them: a Message that differs from a plan in any number or byte is
// refused by it (and so decoded in full, which says what is wrong), the
// batches a plan makes equal those a full decode makes, and what is never
// planned (dictionaries, compressed bodies, unaligned bodies) is not.

#include "alkaid/format/ipc/message_plan.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "alkaid/format/compare.h"
#include "alkaid/format/ipc/message_template.h"
#include "ipc_test_util.h"
#include "test_util.h"

namespace alkaid::format::ipc {
namespace {

using testing::Buf;
using testing::DictColumn;
using testing::Int32s;
using testing::Strings;
using testing::WriteBatches;
using Kind = MessagePlan::Kind;

SchemaPtr IntAndString() { return schema({field("x", int32()), field("s", utf8())}); }

RecordBatchPtr Batch(const std::vector<int32_t>& x, const std::vector<std::string>& s) {
  return *RecordBatch::Make(IntAndString(), static_cast<int64_t>(x.size()),
                            std::vector<ArrayDataPtr>{Int32s(x), Strings(s)});
}

// The framed Message of `batch`, read back (metadata and body).
std::unique_ptr<Message> Encode(const RecordBatch& batch, const IpcWriteOptions& o = {}) {
  auto payload = GetRecordBatchPayload(batch, o).ValueOrDie();
  auto sink = BufferOutputStream::Create().ValueOrDie();
  (void)WriteIpcPayload(payload, o, sink.get()).ValueOrDie();
  BufferReader reader(sink->Finish().ValueOrDie());
  return ReadMessage(&reader).ValueOrDie();
}

std::span<const uint8_t> Bytes(const Buffer& b) {
  return {b.data(), static_cast<size_t>(b.size())};
}

// A plan of `kind` from the full decode of `m`.
std::unique_ptr<MessagePlan> PlanOf(Kind kind, const Message& m, const SchemaPtr& s,
                                    const IpcReadOptions& o = {}) {
  auto batch = ReadRecordBatch(m, s, nullptr, o).ValueOrDie();
  return MessagePlan::Make(kind, *batch, *m.body(), Bytes(*m.metadata()), o);
}

// A private, aligned copy of `b`.
std::shared_ptr<Buffer> Copy(const Buffer& b) {
  return Buffer::CopyOf(std::string_view(reinterpret_cast<const char*>(b.data()),
                                         static_cast<size_t>(b.size())))
      .ValueOrDie();
}

TEST(MessagePlanTest, AnExactPlanTakesItsOwnBytesOnlyAndMakesTheirBatch) {
  auto first = Batch({1, 2, 3}, {"a", "bc", ""});
  auto m = Encode(*first);
  auto plan = PlanOf(Kind::kExact, *m, IntAndString());
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->kind(), Kind::kExact);
  EXPECT_EQ(plan->body_length(), m->body_length());
  std::vector<uint8_t> md(m->metadata()->data(), m->metadata()->data() + m->metadata()->size());
  EXPECT_TRUE(plan->Take(md, m->body_length()));
  EXPECT_FALSE(plan->Take(md, m->body_length() + 8));  // another body length
  std::vector<uint8_t> shorter(md.begin(), md.end() - 1);
  EXPECT_FALSE(plan->Take(shorter, m->body_length()));
  for (size_t i = 0; i < md.size(); i += 7) {  // any byte changed
    md[i] ^= 0x40;
    EXPECT_FALSE(plan->Take(md, m->body_length())) << "byte " << i;
    md[i] ^= 0x40;
  }
  // The batch of another body of the same Message: its values.
  auto body = Copy(*m->body());
  auto decoded = ReadRecordBatch(*m, IntAndString(), nullptr).ValueOrDie();
  const int64_t at = decoded->column_data(0)->buffers[1]->data() - m->body()->data();
  const int32_t seven = 7;
  std::memcpy(body->mutable_data() + at + 4, &seven, 4);
  RecordBatchPtr made;
  ASSERT_OK(plan->MakeBatch(body->data(), std::shared_ptr<Buffer>(body), &made));
  ASSERT_OK(CheckRecordBatchEquals(*Batch({1, 7, 3}, {"a", "bc", ""}), *made));
  // A later body whose string offsets run past the characters is refused
  // as the reader refuses it (the structural Validate's words).
  const int64_t offsets = decoded->column_data(1)->buffers[1]->data() - m->body()->data();
  const int32_t far = 1000;
  std::memcpy(body->mutable_data() + offsets + 12, &far, 4);
  ASSERT_RAISES(kInvalid, plan->MakeBatch(body->data(), std::shared_ptr<Buffer>(body), &made));
}

TEST(MessagePlanTest, WhatIsNeverPlanned) {
  // Dictionary-encoded columns.
  auto dict_schema = schema({field("d", dictionary(int32(), utf8()))});
  auto with_dict = *RecordBatch::Make(
      dict_schema, 2, std::vector<ArrayDataPtr>{DictColumn({0, 1}, Strings({"a", "b"}))});
  auto dm = Encode(*with_dict);
  DictionaryMemo memo;
  ASSERT_OK(memo.AssignIds(*dict_schema));
  ASSERT_OK(memo.AddDictionary(0, Strings({"a", "b"}), false, false).status());
  auto decoded = ReadRecordBatch(*dm, dict_schema, &memo).ValueOrDie();
  for (Kind kind : {Kind::kExact, Kind::kVarying}) {
    EXPECT_EQ(MessagePlan::Make(kind, *decoded, *dm->body(), Bytes(*dm->metadata()), {}), nullptr);
  }
  EXPECT_FALSE(MessagePlan::CanVary(*dict_schema));
  EXPECT_FALSE(MessagePlan::CanVary(*schema({field("n", null())})));
  EXPECT_TRUE(MessagePlan::CanVary(*IntAndString()));

  // Compressed bodies, even one whose every buffer is stored as it is (and
  // so decodes into slices of the body, as an uncompressed one does).
  IpcWriteOptions o;
  o.compression = CompressionType::kZstd;
  o.min_space_savings = 1.0;
  auto cm = Encode(*Batch({1, 2}, {"x", "y"}), o);
  auto cb = ReadRecordBatch(*cm, IntAndString(), nullptr).ValueOrDie();
  ASSERT_TRUE(cm->body()->Contains(cb->column_data(0)->buffers[1]->data(), 8));
  for (Kind kind : {Kind::kExact, Kind::kVarying}) {
    EXPECT_EQ(MessagePlan::Make(kind, *cb, *cm->body(), Bytes(*cm->metadata()), {}), nullptr);
  }

  // A batch whose buffers are not in the body given (a re-aligned copy).
  auto m = Encode(*Batch({1}, {"z"}));
  auto b = ReadRecordBatch(*m, IntAndString(), nullptr).ValueOrDie();
  auto elsewhere = Copy(*m->body());
  EXPECT_EQ(MessagePlan::Make(Kind::kExact, *b, *elsewhere, Bytes(*m->metadata()), {}), nullptr);
}

// A varying plan takes a Message of its structure with new numbers, and
// refuses each number a reader would refuse (or could not take zero-copy).
TEST(MessagePlanTest, AVaryingPlanChecksEveryNumber) {
  auto m = Encode(*Batch({1, 2, 3}, {"a", "bc", ""}));
  auto plan = PlanOf(Kind::kVarying, *m, IntAndString());
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->kind(), Kind::kVarying);
  EXPECT_EQ(plan->message(), nullptr);

  // An honest Message of other numbers: taken, and made into its batch.
  auto second = Batch({4, 5, 6, 7, 8}, {"dd", "", "eee", "f", "gggg"});
  auto m2 = Encode(*second);
  ASSERT_TRUE(plan->Take(Bytes(*m2->metadata()), m2->body_length()));
  RecordBatchPtr made;
  ASSERT_OK(plan->MakeBatch(m2->body()->data(), std::shared_ptr<Buffer>(m2->body()), &made));
  ASSERT_OK(CheckRecordBatchEquals(*second, *made));

  // Its numbers, each changed in turn.
  auto t = RecordBatchMessageTemplate::FromMessage(Bytes(*m2->metadata())).ValueOrDie();
  ASSERT_EQ(t.num_nodes(), 2u);
  ASSERT_EQ(t.num_buffers(), 5u);
  int64_t length = 0;
  int64_t body = 0;
  RecordBatchMessageTemplate::Node nodes[2];
  RecordBatchMessageTemplate::Range ranges[5];
  std::vector<uint8_t> md(t.size());
  t.Read(Bytes(*m2->metadata()).data(), &length, &body, nodes, ranges);
  auto taken = [&](int64_t len, int64_t body_length, int64_t message_body) {
    t.Fill(len, message_body, nodes, ranges, md.data());
    return plan->Take(md, body_length);
  };
  ASSERT_TRUE(taken(length, body, body));
  EXPECT_FALSE(taken(-1, body, body)) << "a negative row count";
  EXPECT_FALSE(taken(length + 1, body, body)) << "columns shorter than the batch";
  EXPECT_FALSE(taken(length, body + 8, body)) << "the Message's body length is not the body's";
  struct NodeCase {
    size_t node;
    RecordBatchMessageTemplate::Node numbers;
    const char* what;
  };
  for (const NodeCase& c :
       {NodeCase{0, {-1, 0}, "negative length"}, NodeCase{0, {5, -1}, "negative null count"},
        NodeCase{0, {5, 6}, "more nulls than rows"},
        NodeCase{0, {5, 1}, "nulls without the bitmap the plan has none of"},
        NodeCase{1, {4, 0}, "a column of another length"}}) {
    const auto saved = nodes[c.node];
    nodes[c.node] = c.numbers;
    EXPECT_FALSE(taken(length, body, body)) << c.what;
    nodes[c.node] = saved;
  }
  struct RangeCase {
    size_t buffer;
    RecordBatchMessageTemplate::Range range;
    const char* what;
  };
  for (const RangeCase& c :
       {RangeCase{1, {-8, 8}, "a negative offset"}, RangeCase{1, {0, -1}, "a negative length"},
        RangeCase{1, {body - 8, 16}, "past the body"},
        RangeCase{1, {INT64_MAX - 4, 8}, "an overflowing end"},
        RangeCase{4, {4, 1}, "an offset the reader would re-align"},
        RangeCase{0, {body, 8}, "an absent bitmap past the body"}}) {
    const auto saved = ranges[c.buffer];
    ranges[c.buffer] = c.range;
    EXPECT_FALSE(taken(length, body, body)) << c.what;
    ranges[c.buffer] = saved;
  }
  // A byte outside the numbers (the custom metadata, a type) changed.
  ASSERT_TRUE(taken(length, body, body));
  for (size_t i = 0; i < md.size(); ++i) {
    md[i] ^= 0x01;
    std::vector<uint8_t> again = md;
    int64_t l2 = 0;
    int64_t b2 = 0;
    RecordBatchMessageTemplate::Node n2[2];
    RecordBatchMessageTemplate::Range r2[5];
    t.Read(again.data(), &l2, &b2, n2, r2);
    const bool number_changed = l2 != length || b2 != body ||
                                std::memcmp(n2, nodes, sizeof(n2)) != 0 ||
                                std::memcmp(r2, ranges, sizeof(r2)) != 0;
    if (!number_changed) {
      EXPECT_FALSE(plan->Take(md, body)) << "byte " << i;
    }
    md[i] ^= 0x01;
  }
  // Numbers that pass the checks over values that do not: refused by the
  // validation a decoded batch gets (a last string offset past the
  // characters).
  ASSERT_TRUE(taken(length, body, body));
  auto bad = Copy(*m2->body());
  const int32_t far = 1000;
  std::memcpy(bad->mutable_data() + ranges[3].offset + 4 * length, &far, 4);
  ASSERT_RAISES(kInvalid, plan->MakeBatch(bad->data(), std::shared_ptr<Buffer>(bad), &made));
}

// A plan validates as the reader was asked to: with validate_full but not
// validate_decimal_precision, decimals beyond their precision pass, the
// first batch as every later one.
TEST(MessagePlanTest, PlansValidateAsTheReaderWasAsked) {
  auto s = schema({field("d", decimal128(3, 0))});
  std::vector<int64_t> words = {123456, 0, 7, 0};  // 123456 has 6 digits
  auto column = ArrayData::Make(decimal128(3, 0), 2, {nullptr, Buf(words)}, 0);
  auto batch = *RecordBatch::Make(s, 2, std::vector<ArrayDataPtr>{column});
  auto m = Encode(*batch);
  IpcReadOptions o;
  o.validate_full = true;
  ASSERT_RAISES(kInvalid, ReadRecordBatch(*m, s, nullptr, o));
  o.validate_decimal_precision = false;
  for (Kind kind : {Kind::kExact, Kind::kVarying}) {
    auto plan = PlanOf(kind, *m, s, o);
    ASSERT_NE(plan, nullptr);
    ASSERT_TRUE(plan->Take(Bytes(*m->metadata()), m->body_length()));
    RecordBatchPtr made;
    ASSERT_OK(plan->MakeBatch(m->body()->data(), std::shared_ptr<Buffer>(m->body()), &made));
    ASSERT_OK(CheckRecordBatchEquals(*batch, *made));
  }
}

TEST(MessagePlanCacheTest, ExactPlansForRepeatsVaryingPlansForStructures) {
  IpcReadOptions o;
  MessagePlanCache cache(*IntAndString(), o);
  auto learn = [&](const Message& m) {
    auto b = ReadRecordBatch(m, IntAndString(), nullptr, o).ValueOrDie();
    cache.Learn(*b, *m.body(), Bytes(*m.metadata()));
  };
  auto a = Encode(*Batch({1, 2}, {"a", "b"}));
  auto b = Encode(*Batch({1, 2, 3}, {"a", "b", "c"}));
  auto c = Encode(*Batch({9}, {"zz"}));
  EXPECT_EQ(cache.Find(Bytes(*a->metadata()), a->body_length()), nullptr);
  learn(*a);
  EXPECT_EQ(cache.Find(Bytes(*a->metadata()), a->body_length()), nullptr);  // seen once
  learn(*b);  // the same structure twice in a row: a varying plan
  MessagePlan* p = cache.Find(Bytes(*c->metadata()), c->body_length());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->kind(), Kind::kVarying);
  learn(*a);  // seen before: an exact plan, found first
  p = cache.Find(Bytes(*a->metadata()), a->body_length());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->kind(), Kind::kExact);
  // Another structure (custom metadata) is nobody's.
  auto d = Encode(*Batch({1, 2}, {"a", "b"})
                       ->WithMetadata(std::make_shared<KeyValueMetadata>(
                           std::vector<std::pair<std::string, std::string>>{{"k", "v"}})));
  EXPECT_EQ(cache.Find(Bytes(*d->metadata()), d->body_length()), nullptr);

  // A schema with a dictionary: never a plan.
  auto dict_schema = schema({field("x", int32()), field("d", dictionary(int32(), utf8()))});
  MessagePlanCache none(*dict_schema, o);
  for (int i = 0; i < 3; ++i) none.Learn(*Batch({1}, {"a"}), *a->body(), Bytes(*a->metadata()));
  EXPECT_EQ(none.Find(Bytes(*a->metadata()), a->body_length()), nullptr);
}

// ---- the stream readers ------------------------------------------------------

// Reads `bytes` with a RecordBatchStreamReader and with a StreamDecoder fed
// whole; both give `expected`, and the decoder's planned count.
int64_t ReadBoth(const std::shared_ptr<Buffer>& bytes, const std::vector<RecordBatchPtr>& expected,
                 const IpcReadOptions& o = {}) {
  BufferReader source(bytes);
  auto reader = RecordBatchStreamReader::Open(&source, o).ValueOrDie();
  auto all = reader->ReadAll().ValueOrDie();
  const int64_t planned = reader->stats().num_planned_record_batches;
  reader.reset();  // the batches outlive their reader
  EXPECT_EQ(all.size(), expected.size());
  for (size_t i = 0; i < all.size() && i < expected.size(); ++i) {
    SCOPED_TRACE("batch " + std::to_string(i));
    EXPECT_OK(CheckRecordBatchEquals(*expected[i], *all[i]));
  }
  auto listener = std::make_shared<CollectListener>();
  StreamDecoder decoder(listener, o);
  EXPECT_OK(decoder.Consume(bytes));
  EXPECT_OK(decoder.Finish());
  EXPECT_EQ(decoder.stats().num_planned_record_batches, planned);
  EXPECT_EQ(listener->batches().size(), expected.size());
  for (size_t i = 0; i < listener->batches().size() && i < expected.size(); ++i) {
    SCOPED_TRACE("batch " + std::to_string(i));
    EXPECT_OK(CheckRecordBatchEquals(*expected[i], *listener->batches()[i]));
  }
  return planned;
}

TEST(StreamPlansTest, RepeatedShapesArePlannedAndChangesDecodedInFull) {
  std::vector<RecordBatchPtr> batches;
  for (int i = 0; i < 4; ++i) batches.push_back(Batch({1, 2}, {"a", "b"}));  // repeats
  for (int i = 0; i < 4; ++i) {                                              // new numbers
    batches.push_back(Batch(std::vector<int32_t>(static_cast<size_t>(i + 3), i),
                            std::vector<std::string>(static_cast<size_t>(i + 3), "xy")));
  }
  // Nulls: a validity bitmap where the plans have none; then a structure
  // of its own (custom metadata) twice.
  auto with_nulls = ArrayData::Make(
      int32(), 2, {Buf(std::vector<uint8_t>{1}), Buf(std::vector<int32_t>{5, 0})}, 1);
  batches.push_back(*RecordBatch::Make(IntAndString(), 2,
                                       std::vector<ArrayDataPtr>{with_nulls, Strings({"n", ""})}));
  auto meta = std::make_shared<KeyValueMetadata>(
      std::vector<std::pair<std::string, std::string>>{{"k", "v"}});
  batches.push_back(Batch({1, 2}, {"a", "b"})->WithMetadata(meta));
  batches.push_back(Batch({1, 2}, {"a", "b"})->WithMetadata(meta));
  batches.push_back(Batch({1, 2}, {"a", "b"}));  // back to the first
  ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(IntAndString(), batches, {}, false));
  // Planned: repeats 3 and 4 (the exact plan the second made), the four
  // new numbers (the varying plan the second made too), the last (exact);
  // the batch with nulls and the first of its own structure are not.
  EXPECT_EQ(ReadBoth(bytes, batches), 2 + 4 + 1);
  IpcReadOptions full;
  full.validate_full = true;
  EXPECT_EQ(ReadBoth(bytes, batches, full), 7);
}

TEST(StreamPlansTest, DictionariesCompressedAndUnalignedBodiesAreNeverPlanned) {
  auto dict_schema = schema({field("x", int32()), field("d", dictionary(int32(), utf8()))});
  std::vector<RecordBatchPtr> with_dict;
  for (int i = 0; i < 4; ++i) {
    with_dict.push_back(*RecordBatch::Make(
        dict_schema, 2,
        std::vector<ArrayDataPtr>{Int32s({1, 2}), DictColumn({0, 1}, Strings({"a", "b"}))}));
  }
  // A delta: the same indices' Message, new dictionary values after it.
  with_dict.push_back(*RecordBatch::Make(
      dict_schema, 2,
      std::vector<ArrayDataPtr>{Int32s({1, 2}), DictColumn({2, 1}, Strings({"a", "b", "c"}))}));
  ASSERT_OK_AND_ASSIGN(auto dict_bytes, WriteBatches(dict_schema, with_dict, {}, false));
  EXPECT_EQ(ReadBoth(dict_bytes, with_dict), 0);

  std::vector<RecordBatchPtr> same(5, Batch({1, 2, 3}, {"a", "b", "c"}));
  for (auto codec : {CompressionType::kLz4Frame, CompressionType::kZstd}) {
    for (double savings : {-1.0, 1.0}) {  // every buffer compressed / stored as it is
      IpcWriteOptions o;
      o.compression = codec;
      if (savings >= 0) o.min_space_savings = savings;
      ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(IntAndString(), same, o, false));
      EXPECT_EQ(ReadBoth(bytes, same), 0);
    }
  }

  // The same stream at an odd address: each body is copied to align it.
  ASSERT_OK_AND_ASSIGN(auto bytes, WriteBatches(IntAndString(), same, {}, false));
  ASSERT_OK_AND_ASSIGN(auto shifted, AllocateBuffer(bytes->size() + 1));
  std::memcpy(shifted->mutable_data() + 1, bytes->data(), static_cast<size_t>(bytes->size()));
  auto odd = SliceBuffer(std::shared_ptr<Buffer>(std::move(shifted)), 1, bytes->size());
  auto listener = std::make_shared<CollectListener>();
  StreamDecoder decoder(listener);
  ASSERT_OK(decoder.Consume(odd));
  ASSERT_OK(decoder.Finish());
  EXPECT_EQ(decoder.stats().num_planned_record_batches, 0);
  ASSERT_EQ(listener->batches().size(), same.size());
  for (const auto& b : listener->batches()) ASSERT_OK(CheckRecordBatchEquals(*same[0], *b));
  // Aligned, the same stream is planned from its third batch.
  EXPECT_EQ(ReadBoth(bytes, same), 3);

  // A Message of a planned shape whose body comes at an odd address: made
  // by the full decode (its copy), not by the plan over the odd body.
  auto payload = GetRecordBatchPayload(*same[0]).ValueOrDie();
  auto sink = BufferOutputStream::Create().ValueOrDie();
  ASSERT_OK(WriteIpcPayload(payload, {}, sink.get()));
  auto framed = sink->Finish().ValueOrDie();
  ASSERT_OK_AND_ASSIGN(auto room, AllocateBuffer(framed->size() + 1));
  std::memcpy(room->mutable_data() + 1, framed->data(), static_cast<size_t>(framed->size()));
  auto odd_message = SliceBuffer(std::shared_ptr<Buffer>(std::move(room)), 1, framed->size());
  auto mixed = std::make_shared<CollectListener>();
  StreamDecoder planned(mixed);
  ASSERT_OK(planned.Consume(SliceBuffer(bytes, 0, bytes->size() - 8)));  // without the EOS
  ASSERT_EQ(planned.stats().num_planned_record_batches, 3);
  ASSERT_OK(planned.Consume(odd_message));
  EXPECT_EQ(planned.stats().num_planned_record_batches, 3);
  ASSERT_EQ(mixed->batches().size(), same.size() + 1);
  ASSERT_OK(CheckRecordBatchEquals(*same[0], *mixed->batches().back()));
  for (int c = 0; c < 2; ++c) {
    for (const auto& b : mixed->batches().back()->column_data(c)->buffers) {
      if (b != nullptr) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % 8, 0u);
      }
    }
  }
}

// A Message of a planned structure with numbers a reader refuses is decoded
// in full and refused with the reader's own words.
TEST(StreamPlansTest, AHostileMessageOfAPlannedShapeIsRefusedAsBefore) {
  auto one = Batch({1, 2}, {"a", "b"});
  auto m = Encode(*one);
  auto t = RecordBatchMessageTemplate::FromMessage(Bytes(*m->metadata())).ValueOrDie();
  int64_t length = 0;
  int64_t body = 0;
  RecordBatchMessageTemplate::Node nodes[2];
  RecordBatchMessageTemplate::Range ranges[5];
  t.Read(m->metadata()->data(), &length, &body, nodes, ranges);
  ranges[4].length = body;  // the characters run past the body
  std::vector<uint8_t> hostile(t.size());
  t.Fill(length, body, nodes, ranges, hostile.data());

  ASSERT_OK_AND_ASSIGN(auto honest, WriteBatches(IntAndString(), {one, one, one}, {}, false));
  // The honest stream without its end-of-stream marker, then the hostile
  // Message framed as the writer frames one.
  std::string stream(honest->view().substr(0, static_cast<size_t>(honest->size()) - 8));
  const int32_t framed = static_cast<int32_t>((hostile.size() + 7) / 8 * 8);
  const uint32_t marker = kIpcContinuationToken;
  stream.append(reinterpret_cast<const char*>(&marker), 4);
  stream.append(reinterpret_cast<const char*>(&framed), 4);
  stream.append(reinterpret_cast<const char*>(hostile.data()), hostile.size());
  stream.append(static_cast<size_t>(framed) - hostile.size(), '\0');
  stream.append(reinterpret_cast<const char*>(m->body()->data()),
                static_cast<size_t>(m->body()->size()));
  BufferReader source(Buffer::FromString(stream));
  ASSERT_OK_AND_ASSIGN(auto reader, RecordBatchStreamReader::Open(&source));
  for (int i = 0; i < 3; ++i) ASSERT_OK(reader->ReadNext());
  EXPECT_EQ(reader->stats().num_planned_record_batches, 1);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "outside the", reader->ReadNext());
  // The incremental decoder, which tries its plans before it makes a
  // Message, refuses it alike.
  auto listener = std::make_shared<CollectListener>();
  StreamDecoder decoder(listener);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "outside the", decoder.Consume(Buffer::FromString(stream)));
  EXPECT_EQ(listener->batches().size(), 3u);
  EXPECT_EQ(decoder.stats().num_planned_record_batches, 1);
  EXPECT_EQ(decoder.stats().num_messages, 5);  // the schema, three batches, the hostile one
}

// A Message of a planned shape whose body is garbage (its offsets) is taken
// by the plan and refused by the plan's validation; the decoder says which
// Message it was, as the full decode does.
TEST(StreamPlansTest, AGarbageBodyOfAPlannedShapeIsRefusedInContext) {
  auto one = Batch({1, 2}, {"a", "b"});
  auto m = Encode(*one);
  ASSERT_OK_AND_ASSIGN(auto honest, WriteBatches(IntAndString(), {one, one, one}, {}, false));
  std::string stream(honest->view().substr(0, static_cast<size_t>(honest->size()) - 8));
  const std::string_view md = m->metadata()->view();
  const int32_t framed = static_cast<int32_t>((md.size() + 7) / 8 * 8);
  const uint32_t marker = kIpcContinuationToken;
  stream.append(reinterpret_cast<const char*>(&marker), 4);
  stream.append(reinterpret_cast<const char*>(&framed), 4);
  stream.append(md);
  stream.append(static_cast<size_t>(framed) - md.size(), '\0');
  stream.append(static_cast<size_t>(m->body()->size()), '\xff');  // offsets of -1
  auto listener = std::make_shared<CollectListener>();
  StreamDecoder decoder(listener);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "message #4 (record batch)",
                             decoder.Consume(Buffer::FromString(stream)));
  EXPECT_EQ(listener->batches().size(), 3u);
  EXPECT_EQ(decoder.stats().num_messages, 5);
  EXPECT_EQ(decoder.stats().num_planned_record_batches, 1);
}

}  // namespace
}  // namespace alkaid::format::ipc
