// Batches received from a topic handed out through the Arrow C Data and C
// Stream Interfaces (Consumer::ExportBatch, Consumer::ExportStream), and
// published from them (Producer::PublishArrowArray, PublishArrowStream),
// with a real alkaid-broker. Alkaid's own importer plays the foreign side
// here; tests/interop does the same against Arrow C++.

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/c_data.h"
#include "alkaid/format/compare.h"
#include "alkaid/format/validate.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using client::Consumer;
using client::Producer;
using testing::BrokerProcess;
using testing::ConsumerOn;
using testing::ProducerOn;
using namespace std::chrono_literals;

format::SchemaPtr TwoColumns() {
  return format::schema(
      {format::field("id", format::int64()), format::field("name", format::utf8())});
}

// Rows [first, first + rows) built in `pool` (null: the heap).
Result<format::RecordBatchPtr> MakeBatch(int64_t first, int64_t rows,
                                         format::MemoryPool* pool = nullptr) {
  if (pool == nullptr) pool = format::default_memory_pool();
  format::Int64Builder ids(pool);
  format::StringBuilder names(pool);
  for (int64_t i = first; i < first + rows; ++i) {
    ALKAID_RETURN_NOT_OK(ids.Append(i));
    ALKAID_RETURN_NOT_OK(names.Append("row " + std::to_string(i)));
  }
  ALKAID_ASSIGN_OR_RAISE(auto a, ids.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto b, names.Finish());
  return format::RecordBatch::Make(TwoColumns(), rows, {a, b});
}

Status PublishInPlace(Producer* producer, int64_t first, int64_t rows) {
  ALKAID_ASSIGN_OR_RAISE(auto pool, producer->NewBatchPool(64 * 1024));
  ALKAID_ASSIGN_OR_RAISE(auto batch, MakeBatch(first, rows, pool.get()));
  return producer->Publish(*batch, pool.get());
}

// Polls the producer until its consumers hold `held` bodies (about 5 s).
bool WaitHeld(Producer* producer, uint64_t held) {
  for (int i = 0; i < 500; ++i) {
    producer->Poll();
    if (producer->stats().held_by_consumers == held) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// Every buffer address of an exported array tree lies in a mapping of
// /dev/shm/<prefix>*.
void ExpectInShm(const ArrowArray& array, const std::string& prefix) {
  for (int64_t i = 0; i < array.n_buffers; ++i) {
    if (array.buffers[i] == nullptr) continue;
    EXPECT_EQ(testing::MappingOf(array.buffers[i]).rfind("/dev/shm/" + prefix, 0), 0u)
        << "buffer " << i << " at " << array.buffers[i] << " is in '"
        << testing::MappingOf(array.buffers[i]) << "'";
  }
  for (int64_t i = 0; i < array.n_children; ++i) ExpectInShm(*array.children[i], prefix);
}

TEST(BrokerArrowExportTest, ExportedBatchPointsIntoTheSegmentAndReleasesAnywhere) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", TwoColumns(), ProducerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("t", ConsumerOn(broker)));
  for (int64_t b = 0; b < 3; ++b) ASSERT_OK(PublishInPlace(producer.get(), b * 10, 10));

  std::vector<ArrowArray> arrays(3);
  ArrowSchema schema;
  for (int b = 0; b < 3; ++b) {
    ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(5s));
    ASSERT_OK(consumer->ExportBatch(*batch, &arrays[b], b == 0 ? &schema : nullptr));
    ASSERT_EQ(arrays[b].n_children, 2);
    ExpectInShm(arrays[b], broker.name() + ".");
    // Zero-copy: the exported values are the received batch's.
    EXPECT_EQ(arrays[b].children[0]->buffers[1], batch->column_data(0)->buffers[1]->data());
  }
  // Only the exported structs hold the blocks now.
  EXPECT_EQ(consumer->stats().exported_held, 3u);
  EXPECT_EQ(consumer->stats().exported_total, 3u);
  ASSERT_TRUE(WaitHeld(producer.get(), 3));

  // Imported back (the foreign side): the values are right.
  ArrowArray first = arrays[0];  // moved (bitwise), as the interface allows
  arrays[0].release = nullptr;
  ASSERT_OK_AND_ASSIGN(auto back, format::ImportRecordBatch(&first, &schema));
  ASSERT_OK_AND_ASSIGN(auto expected, MakeBatch(0, 10));
  EXPECT_TRUE(back->Equals(*expected));
  back.reset();  // released: one block back
  EXPECT_EQ(consumer->stats().exported_held, 2u);
  ASSERT_TRUE(WaitHeld(producer.get(), 2));

  // The consumer goes; the last two are released on another thread.
  consumer.reset();
  std::thread other([&] {
    arrays[1].release(&arrays[1]);
    arrays[2].release(&arrays[2]);
  });
  other.join();
  EXPECT_EQ(arrays[2].release, nullptr);
  ASSERT_TRUE(WaitHeld(producer.get(), 0));
  ASSERT_OK(producer->Close());
}

TEST(BrokerArrowExportTest, CapOnExportedBatches) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", TwoColumns(), ProducerOn(broker)));
  client::ConsumerOptions options = ConsumerOn(broker);
  options.max_exported_batches = 2;
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("t", options));
  for (int64_t b = 0; b < 3; ++b) ASSERT_OK(PublishInPlace(producer.get(), b * 10, 10));
  ArrowArray held[3];
  format::RecordBatchPtr batches[3];
  for (int b = 0; b < 3; ++b) {
    ASSERT_OK_AND_ASSIGN(batches[b], consumer->Next(5s));
  }
  ASSERT_OK(consumer->ExportBatch(*batches[0], &held[0]));
  ASSERT_OK(consumer->ExportBatch(*batches[1], &held[1]));
  held[2].release = nullptr;
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "max_exported_batches",
                             consumer->ExportBatch(*batches[2], &held[2]));
  EXPECT_EQ(held[2].release, nullptr);  // untouched
  EXPECT_EQ(consumer->stats().exports_refused, 1u);
  held[0].release(&held[0]);
  ASSERT_OK(consumer->ExportBatch(*batches[2], &held[2]));
  EXPECT_EQ(consumer->stats().exported_held, 2u);
  EXPECT_EQ(consumer->stats().exported_total, 3u);
  held[1].release(&held[1]);
  held[2].release(&held[2]);
  EXPECT_EQ(consumer->stats().exported_held, 0u);
}

// An export that fails gives its place under max_exported_batches back and
// counts nothing: ExportBatch (consumer_export.cc's ExportCounted) takes the
// place before exporting, so each error after it must drop it. Both ways
// an export fails after the place is taken: the columns refused (a column
// with a buffer missing), and the columns exported but the schema refused
// (an extension type stored as another extension, which the arrays export
// through to its storage but the schema cannot name), where the exported
// columns are released without their release notice.
TEST(BrokerArrowExportTest, AFailedExportGivesItsPlaceBack) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", TwoColumns(), ProducerOn(broker)));
  client::ConsumerOptions options = ConsumerOn(broker);
  options.max_exported_batches = 1;
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("t", options));
  ASSERT_OK(PublishInPlace(producer.get(), 0, 10));
  ASSERT_OK_AND_ASSIGN(auto received, consumer->Next(5s));

  // An int64 column with its validity bitmap but no values buffer.
  ASSERT_OK_AND_ASSIGN(
      auto short_of_a_buffer,
      format::RecordBatch::Make(format::schema({format::field("v", format::int64())}), 4,
                                {format::ArrayData::Make(format::int64(), 4, {nullptr}, 0)}));
  // Four int32 values as an extension over an extension over int32.
  const auto inner = format::extension("alkaid.test.inner", "", format::int32());
  const auto outer = format::extension("alkaid.test.outer", "", inner);
  format::Int32Builder values;
  for (int32_t v = 0; v < 4; ++v) ASSERT_OK(values.Append(v));
  ASSERT_OK_AND_ASSIGN(auto storage, values.Finish());
  auto outer_data = std::make_shared<format::ArrayData>(*storage->data());
  outer_data->type = outer;
  ASSERT_OK_AND_ASSIGN(
      auto unnamable,
      format::RecordBatch::Make(format::schema({format::field("e", outer)}), 4, {outer_data}));

  // ExportBatch of `batch` by reference and by pointer: each refused as
  // `expect_refusal` checks, nothing made, nothing held or counted after it.
  const auto refused_both_ways = [&](const format::RecordBatchPtr& batch,
                                     const auto& expect_refusal, const char* what) {
    for (const bool by_reference : {true, false}) {
      ArrowArray array{};
      ArrowSchema schema{};
      expect_refusal(by_reference ? consumer->ExportBatch(*batch, &array, &schema)
                                  : consumer->ExportBatch(batch, &array, &schema));
      const std::string after =
          std::string(what) + (by_reference ? ", by reference" : ", by pointer");
      EXPECT_EQ(array.release, nullptr) << after;
      EXPECT_EQ(schema.release, nullptr) << after;
      EXPECT_EQ(consumer->stats().exported_held, 0u) << after;
      EXPECT_EQ(consumer->stats().exported_total, 0u) << after;
      EXPECT_EQ(consumer->stats().exports_refused, 0u) << after;
    }
  };
  for (int round = 0; round < 2; ++round) {  // the place is given back each time
    refused_both_ways(
        short_of_a_buffer,
        [](const Status& st) { ASSERT_RAISES_WITH_MESSAGE(kInvalid, "buffers", st); },
        "a column refused");
    refused_both_ways(
        unnamable,
        [](const Status& st) {
          ASSERT_RAISES_WITH_MESSAGE(kNotImplemented, "another extension", st);
        },
        "the schema refused");
  }
  // Without its schema the same batch exports (to its storage) and counts.
  ArrowArray exported{};
  ASSERT_OK(consumer->ExportBatch(unnamable, &exported, nullptr));
  EXPECT_EQ(consumer->stats().exported_held, 1u);
  exported.release(&exported);
  EXPECT_EQ(consumer->stats().exported_held, 0u);
  // The one place is free: the received batch exports.
  ASSERT_OK(consumer->ExportBatch(received, &exported, nullptr));
  EXPECT_EQ(consumer->stats().exported_held, 1u);
  EXPECT_EQ(consumer->stats().exported_total, 2u);
  exported.release(&exported);
  EXPECT_EQ(consumer->stats().exported_held, 0u);
  received.reset();
  ASSERT_OK(producer->Close());
}

TEST(BrokerArrowExportTest, StreamOfTheTopicUntilEndOfStream) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", TwoColumns(), ProducerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("t", ConsumerOn(broker)));
  // Nothing published yet: a bounded get_next times out with the message.
  {
    ArrowArrayStream stream;
    client::StreamExportOptions options;
    options.batch_timeout = 20ms;
    ASSERT_OK(consumer->ExportStream(&stream, options));
    ArrowArray array;
    EXPECT_NE(stream.get_next(&stream, &array), 0);
    EXPECT_NE(std::string(stream.get_last_error(&stream)).find("nothing within"), std::string::npos)
        << stream.get_last_error(&stream);
    // Each batch the stream hands out is counted until released, also after
    // the stream is gone.
    for (int64_t b = 0; b < 2; ++b) ASSERT_OK(PublishInPlace(producer.get(), 100 + b, 1));
    ArrowArray first;
    ArrowArray second;
    ASSERT_EQ(stream.get_next(&stream, &first), 0) << stream.get_last_error(&stream);
    ASSERT_EQ(stream.get_next(&stream, &second), 0) << stream.get_last_error(&stream);
    EXPECT_EQ(consumer->stats().exported_held, 2u);
    EXPECT_EQ(consumer->stats().exported_total, 2u);
    first.release(&first);
    EXPECT_EQ(consumer->stats().exported_held, 1u);
    stream.release(&stream);
    EXPECT_EQ(stream.release, nullptr);
    EXPECT_EQ(consumer->stats().exported_held, 1u);
    second.release(&second);
    EXPECT_EQ(consumer->stats().exported_held, 0u);
  }
  for (int64_t b = 0; b < 4; ++b) ASSERT_OK(PublishInPlace(producer.get(), b * 10, 10));
  // Close waits for the consumer to read everything: on another thread.
  Status closed;
  std::thread closer([&] { closed = producer->Close(); });
  // The stream owns the consumer from here.
  ArrowArrayStream stream;
  ASSERT_OK(Consumer::ExportStream(std::move(consumer), &stream));
  ASSERT_OK_AND_ASSIGN(auto reader, format::CStreamReader::Import(&stream));
  EXPECT_TRUE(reader->schema()->Equals(*TwoColumns()));
  auto all = reader->ReadAll();  // up to the end of stream
  closer.join();
  ASSERT_OK(closed);
  ASSERT_OK_AND_ASSIGN(auto batches, std::move(all));
  ASSERT_EQ(batches.size(), 4u);
  for (int64_t b = 0; b < 4; ++b) {
    ASSERT_OK_AND_ASSIGN(auto expected, MakeBatch(b * 10, 10));
    EXPECT_TRUE(batches[static_cast<size_t>(b)]->Equals(*expected)) << b;
  }
  reader.reset();  // releases the stream and closes the consumer
  batches.clear();
}

TEST(BrokerArrowExportTest, PublishFromTheCDataInterface) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", TwoColumns(), ProducerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("t", ConsumerOn(broker)));
  // Built in a pool of the producer, handed over as C structs: no copy.
  {
    ASSERT_OK_AND_ASSIGN(auto pool, producer->NewBatchPool(64 * 1024));
    ASSERT_OK_AND_ASSIGN(auto batch, MakeBatch(0, 10, pool.get()));
    ArrowArray array;
    ArrowSchema schema;
    ASSERT_OK(format::ExportRecordBatch(*batch, &array, &schema));
    batch.reset();
    ASSERT_OK(producer->PublishArrowArray(&array, &schema, pool.get()));
    EXPECT_EQ(array.release, nullptr);
  }
  EXPECT_EQ(producer->stats().arrow_zero_copy, 1u);
  EXPECT_EQ(producer->stats().copied_bytes, 0u);
  // From the heap, without a schema: one copy.
  {
    ASSERT_OK_AND_ASSIGN(auto batch, MakeBatch(10, 10));
    ArrowArray array;
    ASSERT_OK(format::ExportRecordBatch(*batch, &array));
    ASSERT_OK(producer->PublishArrowArray(&array, nullptr));
  }
  EXPECT_EQ(producer->stats().arrow_copied, 1u);
  EXPECT_GT(producer->stats().copied_bytes, 0u);
  // In the pool but sliced: Publish cannot send it in place; one copy.
  {
    ASSERT_OK_AND_ASSIGN(auto pool, producer->NewBatchPool(64 * 1024));
    ASSERT_OK_AND_ASSIGN(auto batch, MakeBatch(9, 11, pool.get()));
    ArrowArray array;
    ASSERT_OK(format::ExportRecordBatch(*batch->Slice(1, 10), &array));
    ASSERT_OK(producer->PublishArrowArray(&array, nullptr, pool.get()));
  }
  EXPECT_EQ(producer->stats().arrow_zero_copy, 1u);
  EXPECT_EQ(producer->stats().arrow_copied, 2u);
  // A stream: the batch built in a pool goes in place, the others copied.
  {
    ASSERT_OK_AND_ASSIGN(auto pool, producer->NewBatchPool(64 * 1024));
    ASSERT_OK_AND_ASSIGN(auto heap1, MakeBatch(20, 10));
    ASSERT_OK_AND_ASSIGN(auto in_pool, MakeBatch(30, 10, pool.get()));
    ASSERT_OK_AND_ASSIGN(auto heap2, MakeBatch(40, 10));
    ArrowArrayStream stream;
    ASSERT_OK(format::ExportRecordBatchStream(TwoColumns(), {heap1, in_pool, heap2}, &stream));
    client::ShmBatchPool* pools[] = {pool.get()};
    ASSERT_OK_AND_ASSIGN(uint64_t n, producer->PublishArrowStream(&stream, pools));
    EXPECT_EQ(n, 3u);
  }
  EXPECT_EQ(producer->stats().arrow_zero_copy, 2u);
  EXPECT_EQ(producer->stats().arrow_copied, 4u);
  // A schema that is not the topic's is refused, the structs released.
  {
    auto other = format::schema({format::field("x", format::int32())});
    format::Int32Builder xs;
    ASSERT_OK(xs.Append(1));
    ASSERT_OK_AND_ASSIGN(auto col, xs.Finish());
    ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(other, 1, {col}));
    ArrowArray array;
    ArrowSchema schema;
    ASSERT_OK(format::ExportRecordBatch(*batch, &array, &schema));
    ASSERT_RAISES(kInvalid, producer->PublishArrowArray(&array, &schema));
    EXPECT_EQ(array.release, nullptr);
    EXPECT_EQ(schema.release, nullptr);
  }
  for (int64_t b = 0; b < 6; ++b) {
    ASSERT_OK_AND_ASSIGN(auto got, consumer->Next(5s));
    // The sliced batch went out third: rows 10..19 again.
    ASSERT_OK_AND_ASSIGN(auto expected, MakeBatch(b < 2 ? b * 10 : b == 2 ? 10 : (b - 1) * 10, 10));
    EXPECT_TRUE(got->Equals(*expected)) << b;
  }
  ASSERT_OK(producer->Close());
}

// A struct array that passes Validate (buffer sizes, first and last
// offsets) but not ValidateFull (an inner utf8 offset points past the
// data): PublishArrowArray refuses it with the default import options,
// releases the structs and publishes nothing; the consumer's next batch is
// the next good one. With validate_full = false (for producers the caller
// trusts) the same struct is published, and only a full check finds it.
TEST(BrokerArrowExportTest, PublishArrowArrayRefusesWhatOnlyValidateFullCatches) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", TwoColumns(), ProducerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("t", ConsumerOn(broker)));
  // Exports rows [0, 3) with the second utf8 offset set to 1000 (the
  // strings' data is 15 bytes: "row 0row 1row 2").
  auto export_hostile = [](ArrowArray* array, ArrowSchema* schema) {
    ASSERT_OK_AND_ASSIGN(auto batch, MakeBatch(0, 3));
    ASSERT_OK(format::ExportRecordBatch(*batch, array, schema));
    ASSERT_EQ(array->n_children, 2);
    auto* offsets = static_cast<int32_t*>(const_cast<void*>(array->children[1]->buffers[1]));
    ASSERT_EQ(offsets[3], 15);
    offsets[1] = 1000;
    ASSERT_OK(format::Validate(*batch));
    ASSERT_RAISES(kInvalid, format::ValidateFull(*batch));
  };
  {
    ArrowArray array;
    ArrowSchema schema;
    ASSERT_NO_FATAL_FAILURE(export_hostile(&array, &schema));
    Status st = producer->PublishArrowArray(&array, &schema);
    ASSERT_RAISES(kInvalid, st);
    EXPECT_NE(st.message().find("importing an ArrowArray"), std::string::npos) << st.ToString();
    EXPECT_EQ(array.release, nullptr);
    EXPECT_EQ(schema.release, nullptr);
  }
  EXPECT_EQ(producer->stats().published, 0u);
  EXPECT_EQ(producer->stats().arrow_copied + producer->stats().arrow_zero_copy, 0u);
  {
    ASSERT_OK_AND_ASSIGN(auto batch, MakeBatch(100, 3));
    ArrowArray array;
    ASSERT_OK(format::ExportRecordBatch(*batch, &array));
    ASSERT_OK(producer->PublishArrowArray(&array, nullptr));
  }
  ASSERT_OK_AND_ASSIGN(auto first, consumer->Next(5s));
  ASSERT_OK_AND_ASSIGN(auto expected, MakeBatch(100, 3));
  EXPECT_TRUE(first->Equals(*expected)) << "the refused batch reached the consumer";
  // Validate only: the caller vouches for the values, and the batch goes out.
  {
    ArrowArray array;
    ArrowSchema schema;
    ASSERT_NO_FATAL_FAILURE(export_hostile(&array, &schema));
    format::CImportOptions trusting;
    trusting.validate_full = false;
    ASSERT_OK(producer->PublishArrowArray(&array, &schema, nullptr, trusting));
  }
  ASSERT_OK_AND_ASSIGN(auto second, consumer->Next(5s));
  ASSERT_OK(format::Validate(*second));
  ASSERT_RAISES(kInvalid, format::ValidateFull(*second));
  ASSERT_OK(producer->Close());
}

// `alkaid topics` (ListTopics) shows the bodies consumers hold, exported
// ones included, as the producers report them.
TEST(BrokerArrowExportTest, TopicsShowHeldBatches) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto admin, client::BrokerClient::Connect(broker.socket()));
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", TwoColumns(), ProducerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("t", ConsumerOn(broker)));
  ASSERT_OK(PublishInPlace(producer.get(), 0, 10));
  ASSERT_OK(PublishInPlace(producer.get(), 10, 10));
  ArrowArray a, b;
  {
    ASSERT_OK_AND_ASSIGN(auto first, consumer->Next(5s));
    ASSERT_OK(consumer->ExportBatch(*first, &a));
    ASSERT_OK_AND_ASSIGN(auto second, consumer->Next(5s));
    ASSERT_OK(consumer->ExportBatch(*second, &b));
  }
  auto listed_held = [&](uint64_t want) {
    for (int i = 0; i < 300; ++i) {
      producer->Poll();
      auto topics = admin->ListTopics();
      if (topics.ok() && topics->size() == 1 && (*topics)[0].held == want) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  };
  EXPECT_TRUE(listed_held(2));
  const std::string out = "/tmp/alkaid-topics-" + broker.name() + ".txt";
  const pid_t tool = testing::Spawn({ALKAID_TOOL_BIN, "topics", "--socket", broker.socket()}, out);
  ASSERT_EQ(testing::Wait(tool), 0);
  const std::string text = testing::ReadFile(out);
  ::unlink(out.c_str());
  EXPECT_NE(text.find("HELD"), std::string::npos) << text;
  a.release(&a);
  b.release(&b);
  EXPECT_TRUE(listed_held(0));
  ASSERT_OK(producer->Close());
}

}  // namespace
}  // namespace alkaid::broker
