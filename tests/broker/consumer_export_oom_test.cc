// Consumer::ExportStream's batch that cannot be handed out, through a real
// alkaid-broker: the stream took a place under
// ConsumerOptions::max_exported_batches for it before Consumer::Next, and
// the export then fails (the ArrowArray tree's block cannot be allocated).
// The stream must give the place back, count nothing, and say why through
// get_last_error. A received batch of the consumer's own schema is refused
// by nothing else, so the failure is injected: this executable replaces the
// nothrow operator new (tests/support/counting_new.h), which only the
// export's block uses, and which the sanitizers' runtimes define
// themselves: builds without sanitizers only.

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/c_data.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "counting_new.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using client::Consumer;
using client::Producer;
using testing::BrokerProcess;
using namespace std::chrono_literals;

constexpr int64_t kRows = 8;

format::SchemaPtr OneColumn() { return format::schema({format::field("v", format::int64())}); }

// Values first, first + 1, ..., built in a pool of the producer and
// published in place.
Status PublishFrom(Producer* producer, int64_t first) {
  ALKAID_ASSIGN_OR_RAISE(auto pool, producer->NewBatchPool(4096));
  format::Int64Builder values(pool.get());
  for (int64_t r = 0; r < kRows; ++r) ALKAID_RETURN_NOT_OK(values.Append(first + r));
  ALKAID_ASSIGN_OR_RAISE(auto column, values.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto batch, format::RecordBatch::Make(OneColumn(), kRows, {column}));
  return producer->Publish(*batch, pool.get());
}

// The first value of an exported batch's only column.
int64_t FirstValue(const ArrowArray& array) {
  return static_cast<const int64_t*>(array.children[0]->buffers[1])[array.children[0]->offset];
}

TEST(ConsumerExportOomTest, AStreamBatchThatCannotBeExportedGivesItsPlaceBackAndSaysWhy) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto producer,
                       Producer::Open("t", OneColumn(), testing::ProducerOn(broker)));
  client::ConsumerOptions options = testing::ConsumerOn(broker);
  options.max_exported_batches = 2;
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("t", options));
  for (int64_t b = 0; b < 3; ++b) ASSERT_OK(PublishFrom(producer.get(), b * 100));

  ArrowArrayStream stream{};
  client::StreamExportOptions stream_options;
  stream_options.batch_timeout = 5s;
  ASSERT_OK(consumer->ExportStream(&stream, stream_options));
  ArrowArray first{};
  ASSERT_EQ(stream.get_next(&stream, &first), 0) << stream.get_last_error(&stream);
  EXPECT_EQ(FirstValue(first), 0);
  EXPECT_EQ(consumer->stats().exported_held, 1u);

  // The second batch is received, but its tree cannot be allocated (the
  // first is still held, so it cannot reuse that one's): refused and
  // dropped, which the stream says.
  ArrowArray refused{};
  counting_new::t_refuse_nothrow = true;
  const int rc = stream.get_next(&stream, &refused);
  counting_new::t_refuse_nothrow = false;
  EXPECT_EQ(rc, ENOMEM);
  EXPECT_EQ(refused.release, nullptr);
  const char* error = stream.get_last_error(&stream);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("exporting an array"), std::string::npos) << error;
  EXPECT_EQ(consumer->stats().exported_held, 1u) << "the refused batch kept its place";
  EXPECT_EQ(consumer->stats().exported_total, 1u);

  // Its place is free again: with two allowed, the third batch comes (had
  // the refused one kept its place, this would be a CapacityError).
  ArrowArray third{};
  ASSERT_EQ(stream.get_next(&stream, &third), 0) << stream.get_last_error(&stream);
  EXPECT_EQ(FirstValue(third), 200);
  EXPECT_EQ(consumer->stats().exported_held, 2u);
  EXPECT_EQ(consumer->stats().exported_total, 2u);
  EXPECT_EQ(consumer->stats().exports_refused, 0u);

  first.release(&first);
  third.release(&third);
  EXPECT_EQ(consumer->stats().exported_held, 0u);
  stream.release(&stream);
  ASSERT_OK(consumer->Close());
  ASSERT_OK(producer->Close());
}

}  // namespace
}  // namespace alkaid::broker
