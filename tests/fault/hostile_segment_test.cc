// Fault injection in shared memory: a real broker, producer and consumer of
// a topic, and a rogue process (alkaid_fault_rogue_writer) that maps the
// topic's channel segment and overwrites one committed message with
// hostile metadata: out-of-range slot fields, body handles, descriptor
// lengths and offsets, garbage flatbuffer bytes, garbage body bytes.
// The consumer must return an error for exactly that message, deliver the
// messages around it intact, and never crash or read out of bounds (this
// test runs under ASan in the asan-ubsan suite).

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/shm/segment.h"
#include "broker_process.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using client::Consumer;
using client::Producer;
using testing::BrokerProcess;
using testing::ShmNames;
using testing::Spawn;
using testing::Wait;
using namespace std::chrono_literals;

format::SchemaPtr RowSchema() {
  return format::schema(
      {format::field("id", format::int64()), format::field("name", format::utf8())});
}

Result<format::RecordBatchPtr> Rows(int64_t first) {
  format::Int64Builder ids;
  format::StringBuilder names;
  for (int64_t i = 0; i < 20; ++i) {
    ALKAID_RETURN_NOT_OK(ids.Append(first + i));
    ALKAID_RETURN_NOT_OK(names.Append("name-" + std::to_string(first + i)));
  }
  ALKAID_ASSIGN_OR_RAISE(auto id_array, ids.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto name_array, names.Finish());
  return format::RecordBatch::Make(RowSchema(), 20, {id_array, name_array});
}

void ExpectRows(const format::RecordBatch& batch, int64_t first) {
  ASSERT_EQ(batch.num_rows(), 20);
  auto ids = std::static_pointer_cast<format::Int64Array>(batch.column(0));
  auto names = std::static_pointer_cast<format::StringArray>(batch.column(1));
  for (int64_t i = 0; i < 20; ++i) {
    ASSERT_EQ(ids->Value(i), first + i);
    ASSERT_EQ(names->GetView(i), "name-" + std::to_string(first + i));
  }
}

class HostileSegmentTest : public ::testing::TestWithParam<std::string> {};

// The case's checks, receiving with Next or (`try_next`) with TryNext: the
// messages are there before the first receive.
void RejectsOnlyTheCorruptedMessage(const std::string& param, bool try_next) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::ProducerOptions po;
  po.socket_path = broker.socket();
  po.topic.arena_bytes = 4 << 20;
  po.topic.slot_count = 64;
  po.drain_timeout = 500ms;
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("hostile", RowSchema(), po));
  client::ConsumerOptions co;
  co.socket_path = broker.socket();
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("hostile", co));
  for (int64_t b = 0; b < 3; ++b) {
    ASSERT_OK_AND_ASSIGN(auto batch, Rows(b * 100));
    ASSERT_OK(producer->PublishCopy(*batch));
  }

  std::string channel;
  for (const auto& name : ShmNames(broker.name())) {
    if (name.ends_with(".channel")) channel = name;
  }
  ASSERT_FALSE(channel.empty()) << "the topic's channel not found in /dev/shm";
  ASSERT_EQ(Wait(Spawn({ALKAID_ROGUE_BIN, channel, "1", param})), 0)
      << "the rogue writer could not corrupt message 1 (see its stderr)";

  const auto take = [&]() -> Result<format::RecordBatchPtr> {
    if (!try_next) return consumer->Next(5s);
    return consumer->TryNext();
  };
  ASSERT_OK_AND_ASSIGN(auto first, take());
  ASSERT_NE(first, nullptr);
  ExpectRows(*first, 0);
  auto bad = take();
  ASSERT_FALSE(bad.ok()) << param << ": the corrupted message was accepted";
  EXPECT_FALSE(bad.status().IsTimedOut()) << bad.status().ToString();
  EXPECT_FALSE(bad.status().IsEndOfStream()) << bad.status().ToString();
  std::printf("%s -> %s\n", param.c_str(), bad.status().ToString().c_str());
  ASSERT_OK_AND_ASSIGN(auto third, take());
  ASSERT_NE(third, nullptr);
  ExpectRows(*third, 200);
  // The batches stay readable after the consumer and producer are gone.
  ASSERT_OK(consumer->Close());
  (void)producer->Close();  // the producer's own accounting may report the damage
  ExpectRows(*first, 0);
}

TEST_P(HostileSegmentTest, ConsumerRejectsOnlyTheCorruptedMessage) {
  RejectsOnlyTheCorruptedMessage(GetParam(), /*try_next=*/false);
}

TEST_P(HostileSegmentTest, TryNextRejectsOnlyTheCorruptedMessage) {
  RejectsOnlyTheCorruptedMessage(GetParam(), /*try_next=*/true);
}

// A producer's channel a consumer cannot attach to for another reason than
// its being gone (here a damaged header; permissions would be another) is
// an error Next returns once, naming the producer, not an end of stream:
// that producer may well be running and publishing.
TEST(HostileSegmentAttachTest, AChannelThatCannotBeAttachedIsAnErrorNotAnEnd) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::ProducerOptions po;
  po.socket_path = broker.socket();
  po.topic.arena_bytes = 4 << 20;
  po.drain_timeout = 500ms;
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("damaged", RowSchema(), po));
  std::string channel;
  for (const auto& name : ShmNames(broker.name())) {
    if (name.ends_with(".channel")) channel = name;
  }
  ASSERT_FALSE(channel.empty()) << "the topic's channel not found in /dev/shm";
  ASSERT_OK_AND_ASSIGN(auto segment, shm::Segment::Open(channel, shm::SegmentKind::kChannel));
  // The channel header's first word is its magic number.
  auto* magic = reinterpret_cast<uint64_t*>(segment->data());
  const uint64_t intact = *magic;
  *magic = ~intact;

  client::ConsumerOptions co;
  co.socket_path = broker.socket();
  ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("damaged", co));
  auto attached = consumer->Next(5s);
  ASSERT_FALSE(attached.ok());
  EXPECT_FALSE(attached.status().IsEndOfStream()) << attached.status().ToString();
  EXPECT_FALSE(attached.status().IsTimedOut()) << attached.status().ToString();
  EXPECT_NE(attached.status().message().find("cannot attach to producer"), std::string::npos)
      << attached.status().ToString();
  std::printf("damaged channel -> %s\n", attached.status().ToString().c_str());
  // Said once: the consumer has no other producer, so its stream ends.
  auto after = consumer->Next(1s);
  ASSERT_FALSE(after.ok());
  EXPECT_TRUE(after.status().IsEndOfStream()) << after.status().ToString();

  *magic = intact;
  ASSERT_OK(consumer->Close());
  ASSERT_OK(producer->Close());
}

INSTANTIATE_TEST_SUITE_P(Cases, HostileSegmentTest,
                         ::testing::Values("slot-payload-size", "slot-no-body", "slot-body-offset",
                                           "slot-extension-missing", "slot-extension-entry",
                                           "slot-body-length", "slot-shape", "user-kind",
                                           "user-body-length", "user-metadata-in-region",
                                           "region-metadata-outside", "region-metadata-in-body",
                                           "metadata-garbage", "metadata-offsets", "body-garbage"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace alkaid::broker
