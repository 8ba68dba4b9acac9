// The control protocol's new fields: topic kinds, producer
// re-registration, consumers waiting for a topic (encode/decode round trips
// and refusals of bad values).

#include <gtest/gtest.h>

#include "protocol/control.h"
#include "test_util.h"

namespace alkaid::broker::protocol {
namespace {

TEST(ControlProtocolTest, TopicKindsRoundTrip) {
  Request create;
  create.type = RequestType::kCreateTopic;
  create.config.name = "rows";
  create.config.schema = {1, 2, 3};
  create.config.kind = TopicKind::kUnsafeRow;
  ASSERT_OK_AND_ASSIGN(auto decoded, DecodeRequest(EncodeRequest(create)));
  EXPECT_EQ(decoded.config.kind, TopicKind::kUnsafeRow);

  Request attach;
  attach.type = RequestType::kAttachConsumer;
  attach.topic = "rows";
  attach.kind = TopicKind::kUnsafeRow;
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(EncodeRequest(attach)));
  EXPECT_EQ(decoded.kind, TopicKind::kUnsafeRow);
  attach.kind = TopicKind::kRecordBatch;
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(EncodeRequest(attach)));
  EXPECT_EQ(decoded.kind, TopicKind::kRecordBatch);

  EXPECT_STREQ(TopicKindName(TopicKind::kRecordBatch), "record-batch");
  EXPECT_STREQ(TopicKindName(TopicKind::kUnsafeRow), "unsafe-row");
}

TEST(ControlProtocolTest, UnknownTopicKindsAreRefused) {
  Request attach;
  attach.type = RequestType::kAttachProducer;
  attach.topic = "t";
  attach.kind = static_cast<TopicKind>(7);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "AttachProducer: unknown payload kind 7",
                             DecodeRequest(EncodeRequest(attach)));
  Request create;
  create.type = RequestType::kCreateTopic;
  create.config.name = "t";
  create.config.schema = {1};
  create.config.kind = static_cast<TopicKind>(200);
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "topic 't': unknown payload kind 200",
                             DecodeRequest(EncodeRequest(create)));
}

TEST(ControlProtocolTest, ProducerReRegistration) {
  Request attach;
  attach.type = RequestType::kAttachProducer;
  attach.topic = "t";
  ASSERT_OK_AND_ASSIGN(auto decoded, DecodeRequest(EncodeRequest(attach)));
  EXPECT_TRUE(decoded.channel.empty());

  attach.channel = "alkaid.18e.42.p3.channel";
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(EncodeRequest(attach)));
  EXPECT_EQ(decoded.channel, attach.channel);

  Request bad = attach;
  bad.channel = "../etc/passwd";
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "channel name", DecodeRequest(EncodeRequest(bad)));
  bad.channel = ".hidden";
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "starts with '.'", DecodeRequest(EncodeRequest(bad)));
}

// Every request and reply carries the control protocol version; a decoded
// one says what the peer sent (0: none, a peer from before versions).
TEST(ControlProtocolTest, TheVersionTravelsBothWays) {
  Request request;
  request.type = RequestType::kListTopics;
  ASSERT_OK_AND_ASSIGN(auto decoded, DecodeRequest(EncodeRequest(request)));
  EXPECT_EQ(decoded.version, kControlProtocolVersion);
  request.version = 0;
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(EncodeRequest(request)));
  EXPECT_EQ(decoded.version, 0u);
  request.version = 77;
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(EncodeRequest(request)));
  EXPECT_EQ(decoded.version, 77u);

  ServerMessage m;
  ASSERT_OK_AND_ASSIGN(auto reply, DecodeServerMessage(EncodeServerMessage(m)));
  EXPECT_EQ(reply.reply.version, kControlProtocolVersion);
  m.reply.version = 0;
  ASSERT_OK_AND_ASSIGN(reply, DecodeServerMessage(EncodeServerMessage(m)));
  EXPECT_EQ(reply.reply.version, 0u);
}

// A consumer's report that it is done with a producer's channel carries
// both ids, or the consumer's and the channel's name.
TEST(ControlProtocolTest, ProducerDrainedNamesTheConsumerAndTheProducer) {
  Request drained;
  drained.type = RequestType::kProducerDrained;
  drained.target_id = 7;
  drained.producer_id = (uint64_t{1} << 40) + 3;
  ASSERT_OK_AND_ASSIGN(auto decoded, DecodeRequest(EncodeRequest(drained)));
  EXPECT_EQ(decoded.type, RequestType::kProducerDrained);
  EXPECT_EQ(decoded.target_id, 7u);
  EXPECT_EQ(decoded.producer_id, (uint64_t{1} << 40) + 3);
  EXPECT_EQ(decoded.channel, "");
  EXPECT_STREQ(RequestTypeName(decoded.type), "ProducerDrained");
  // One that has no id for the producer with this broker names its channel
  // (checked like every segment name).
  drained.producer_id = 0;
  drained.channel = "b.1.42.p3.channel";
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(EncodeRequest(drained)));
  EXPECT_EQ(decoded.producer_id, 0u);
  EXPECT_EQ(decoded.channel, "b.1.42.p3.channel");
  drained.channel = "../etc/passwd";
  ASSERT_RAISES(kInvalid, DecodeRequest(EncodeRequest(drained)));
}

// Removing a topic: the request names it (checked like every topic name),
// the event tells a consumer why.
TEST(ControlProtocolTest, RemovingATopic) {
  Request rm;
  rm.type = RequestType::kRemoveTopic;
  rm.topic = "old.topic";
  ASSERT_OK_AND_ASSIGN(auto decoded, DecodeRequest(EncodeRequest(rm)));
  EXPECT_EQ(decoded.type, RequestType::kRemoveTopic);
  EXPECT_EQ(decoded.topic, "old.topic");
  EXPECT_STREQ(RequestTypeName(decoded.type), "RemoveTopic");
  rm.topic = "no/slash";
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "outside [A-Za-z0-9._-]", DecodeRequest(EncodeRequest(rm)));

  ServerMessage removed;
  removed.is_event = true;
  removed.event.type = EventType::kTopicRemoved;
  removed.event.topic = "old.topic";
  removed.event.reason = "removed by pid 12";
  ASSERT_OK_AND_ASSIGN(auto message, DecodeServerMessage(EncodeServerMessage(removed)));
  ASSERT_TRUE(message.is_event);
  EXPECT_EQ(message.event.type, EventType::kTopicRemoved);
  EXPECT_EQ(message.event.topic, "old.topic");
  EXPECT_EQ(message.event.reason, "removed by pid 12");
}

// A consumer waiting for a topic: the request's flags, the pending reply
// (no config), the TopicCreated event, ProducerReady's list of consumers
// and the awaited topics of a TopicList.
TEST(ControlProtocolTest, WaitingForATopic) {
  Request attach;
  attach.type = RequestType::kAttachConsumer;
  attach.topic = "later";
  ASSERT_OK_AND_ASSIGN(auto decoded, DecodeRequest(EncodeRequest(attach)));
  EXPECT_FALSE(decoded.wait_for_topic);
  EXPECT_FALSE(decoded.any_kind);
  attach.wait_for_topic = true;
  attach.any_kind = true;
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(EncodeRequest(attach)));
  EXPECT_TRUE(decoded.wait_for_topic);
  EXPECT_TRUE(decoded.any_kind);

  ServerMessage pending;
  pending.reply.type = ReplyType::kAttachConsumer;
  pending.reply.attached_id = 7;
  pending.reply.pending = true;
  ASSERT_OK_AND_ASSIGN(auto message, DecodeServerMessage(EncodeServerMessage(pending)));
  EXPECT_TRUE(message.reply.pending);
  EXPECT_EQ(message.reply.attached_id, 7u);
  // Not pending, a config is required.
  ServerMessage attached = pending;
  attached.reply.pending = false;
  attached.reply.config.name = "later";
  ASSERT_OK_AND_ASSIGN(message, DecodeServerMessage(EncodeServerMessage(attached)));
  EXPECT_FALSE(message.reply.pending);
  EXPECT_EQ(message.reply.config.name, "later");

  ServerMessage created;
  created.is_event = true;
  created.event.type = EventType::kTopicCreated;
  created.event.topic = "later";
  created.event.consumer_id = 7;
  created.event.config.name = "later";
  created.event.config.schema = {1, 2};
  created.event.config.kind = TopicKind::kUnsafeRow;
  ASSERT_OK_AND_ASSIGN(message, DecodeServerMessage(EncodeServerMessage(created)));
  ASSERT_TRUE(message.is_event);
  EXPECT_EQ(message.event.type, EventType::kTopicCreated);
  EXPECT_EQ(message.event.consumer_id, 7u);
  EXPECT_EQ(message.event.config.schema, (std::vector<uint8_t>{1, 2}));
  EXPECT_EQ(message.event.config.kind, TopicKind::kUnsafeRow);
  created.event.config.name = "other";
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "TopicCreated for 'later' carries the config of 'other'",
                             DecodeServerMessage(EncodeServerMessage(created)));

  ServerMessage ready;
  ready.reply.type = ReplyType::kProducerReady;
  ready.reply.consumer_list = {{3, 100}, {9, 200}};
  ASSERT_OK_AND_ASSIGN(message, DecodeServerMessage(EncodeServerMessage(ready)));
  EXPECT_EQ(message.reply.type, ReplyType::kProducerReady);
  ASSERT_EQ(message.reply.consumer_list.size(), 2u);
  EXPECT_EQ(message.reply.consumer_list[1].id, 9u);
  EXPECT_EQ(message.reply.consumer_list[1].pid, 200u);

  ServerMessage list;
  list.reply.type = ReplyType::kTopicList;
  list.reply.awaited = {{"later", 4}};
  ASSERT_OK_AND_ASSIGN(message, DecodeServerMessage(EncodeServerMessage(list)));
  ASSERT_EQ(message.reply.awaited.size(), 1u);
  EXPECT_EQ(message.reply.awaited[0].name, "later");
  EXPECT_EQ(message.reply.awaited[0].consumers, 4u);
  list.reply.awaited[0].name = "bad/name";
  ASSERT_RAISES(kInvalid, DecodeServerMessage(EncodeServerMessage(list)));
}

// The broker's figures, with the shared-memory limit, where it came from
// and the size of /dev/shm (what `alkaid topics` shows).
TEST(ControlProtocolTest, StatsCarryTheShmLimitAndItsOrigin) {
  ServerMessage stats;
  stats.reply.type = ReplyType::kStats;
  stats.reply.stats.name = "alkaid";
  stats.reply.stats.reserved_bytes = 1234;
  stats.reply.stats.shm_limit = uint64_t{32} << 20;
  stats.reply.stats.shm_limit_origin = "half of /dev/shm's 64 MiB";
  stats.reply.stats.shm_total = uint64_t{64} << 20;
  stats.reply.stats.shm_free = uint64_t{60} << 20;
  ASSERT_OK_AND_ASSIGN(auto message, DecodeServerMessage(EncodeServerMessage(stats)));
  ASSERT_EQ(message.reply.type, ReplyType::kStats);
  EXPECT_EQ(message.reply.stats.reserved_bytes, 1234u);
  EXPECT_EQ(message.reply.stats.shm_limit, uint64_t{32} << 20);
  EXPECT_EQ(message.reply.stats.shm_limit_origin, "half of /dev/shm's 64 MiB");
  EXPECT_EQ(message.reply.stats.shm_total, uint64_t{64} << 20);
  EXPECT_EQ(message.reply.stats.shm_free, uint64_t{60} << 20);
  // A broker that does not say where its limit came from is still understood.
  stats.reply.stats.shm_limit_origin.clear();
  ASSERT_OK_AND_ASSIGN(message, DecodeServerMessage(EncodeServerMessage(stats)));
  EXPECT_EQ(message.reply.stats.shm_limit_origin, "");
}

// Publish times and byte counts (issue #33): fields at the end of their
// tables, absent (false, 0) from a peer that does not send them.
TEST(ControlProtocolTest, PublishTimestampsAndByteCountsRoundTrip) {
  Request create;
  create.type = RequestType::kCreateTopic;
  create.config.name = "t";
  create.config.schema = {1};
  ASSERT_OK_AND_ASSIGN(auto decoded, DecodeRequest(EncodeRequest(create)));
  EXPECT_FALSE(decoded.config.publish_timestamps);
  create.config.publish_timestamps = true;
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(EncodeRequest(create)));
  EXPECT_TRUE(decoded.config.publish_timestamps);

  Request report;
  report.type = RequestType::kProducerStats;
  report.target_id = 3;
  report.published = 10;
  report.published_bytes = 6400;
  report.consumer_figures.push_back({4242, 1, 0, 2, 128, 6272});
  report.consumer_figures.push_back({4242, 0, 0, 0, 0, 0, 7});
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(EncodeRequest(report)));
  EXPECT_EQ(decoded.published_bytes, 6400u);
  ASSERT_EQ(decoded.consumer_figures.size(), 2u);
  EXPECT_EQ(decoded.consumer_figures[0].read_bytes, 6272u);
  EXPECT_EQ(decoded.consumer_figures[0].held_bytes, 128u);
  // The consumer's token (absent: 0), by which the broker tells two
  // consumers of one process apart.
  EXPECT_EQ(decoded.consumer_figures[0].token, 0u);
  EXPECT_EQ(decoded.consumer_figures[1].token, 7u);
  Request attach;
  attach.type = RequestType::kAttachConsumer;
  attach.topic = "t";
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(EncodeRequest(attach)));
  EXPECT_EQ(decoded.token, 0u);
  attach.token = 0xfedcba9876543210ULL;
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(EncodeRequest(attach)));
  EXPECT_EQ(decoded.token, 0xfedcba9876543210ULL);

  ServerMessage list;
  list.reply.type = ReplyType::kTopicList;
  TopicInfo info;
  info.config = create.config;
  info.published_bytes = 9000;
  info.producer_list.push_back({3, 4241, 1000, 10, 1, 0, 2, 4096, 1 << 20, 6400});
  ConsumerStatus consumer;
  consumer.id = 5;
  consumer.read_bytes = 6272;
  info.consumer_list.push_back(consumer);
  list.reply.topics.push_back(info);
  ASSERT_OK_AND_ASSIGN(auto message, DecodeServerMessage(EncodeServerMessage(list)));
  ASSERT_EQ(message.reply.topics.size(), 1u);
  const TopicInfo& got = message.reply.topics[0];
  EXPECT_TRUE(got.config.publish_timestamps);
  EXPECT_EQ(got.published_bytes, 9000u);
  ASSERT_EQ(got.producer_list.size(), 1u);
  EXPECT_EQ(got.producer_list[0].published_bytes, 6400u);
  EXPECT_EQ(got.producer_list[0].arena_bytes, uint64_t{1} << 20);
  ASSERT_EQ(got.consumer_list.size(), 1u);
  EXPECT_EQ(got.consumer_list[0].read_bytes, 6272u);
}

// Fixed blocks: AttachProducer asks (bytes, count), the reply grants, the
// topic list shows them per producer. Absent (an older peer: flatbuffers
// omits 0, so a request or reply without them is exactly what an older
// build sends) they decode as 0: none asked, none granted. Hostile values
// are refused by the decoder on either side, naming the field.
TEST(ControlProtocolTest, FixedBlocksTravelAndHostileValuesAreRefused) {
  Request attach;
  attach.type = RequestType::kAttachProducer;
  attach.topic = "t";
  const std::vector<uint8_t> old_request = EncodeRequest(attach);
  ASSERT_OK_AND_ASSIGN(auto decoded, DecodeRequest(old_request));
  EXPECT_EQ(decoded.fixed_block_bytes, 0u);
  EXPECT_EQ(decoded.fixed_block_count, 0u);
  attach.fixed_block_bytes = 500;
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(EncodeRequest(attach)));
  EXPECT_EQ(decoded.fixed_block_bytes, 500u);
  EXPECT_EQ(decoded.fixed_block_count, 0u);  // the broker's default
  attach.fixed_block_count = 7;
  const std::vector<uint8_t> new_request = EncodeRequest(attach);
  EXPECT_GT(new_request.size(), old_request.size());
  ASSERT_OK_AND_ASSIGN(decoded, DecodeRequest(new_request));
  EXPECT_EQ(decoded.fixed_block_count, 7u);

  // Hostile requests: a count without bytes, a block or a count beyond the
  // bounds, an area beyond a channel's (no overflow: 2^20 x 2^30).
  const struct {
    uint64_t bytes;
    uint32_t count;
    const char* message;
  } hostile[] = {
      {0, 8, "fixed_block_count 8 without fixed_block_bytes"},
      {(uint64_t{1} << 30) + 1, 1, "at most 1048576 blocks of at most 1073741824 bytes"},
      {64, (uint32_t{1} << 20) + 1, "at most 1048576 blocks"},
      {~uint64_t{0}, ~uint32_t{0}, "at most 1048576 blocks"},
      {uint64_t{1} << 30, uint32_t{1} << 20, "more than a channel's 549755813888"},
  };
  for (const auto& h : hostile) {
    SCOPED_TRACE(std::to_string(h.bytes) + " x " + std::to_string(h.count));
    attach.fixed_block_bytes = h.bytes;
    attach.fixed_block_count = h.count;
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, h.message, DecodeRequest(EncodeRequest(attach)));
    EXPECT_FALSE(CheckFixedBlocks(h.bytes, h.count, "x").ok());
  }

  ServerMessage reply;
  reply.reply.type = ReplyType::kAttachProducer;
  reply.reply.channel = "alkaid.1.p1.channel";
  reply.reply.config.name = "t";
  ASSERT_OK_AND_ASSIGN(auto message, DecodeServerMessage(EncodeServerMessage(reply)));
  EXPECT_EQ(message.reply.fixed_block_bytes, 0u);  // an older broker's: none granted
  reply.reply.fixed_block_bytes = 512;
  reply.reply.fixed_block_count = 2048;
  ASSERT_OK_AND_ASSIGN(message, DecodeServerMessage(EncodeServerMessage(reply)));
  EXPECT_EQ(message.reply.fixed_block_bytes, 512u);
  EXPECT_EQ(message.reply.fixed_block_count, 2048u);
  // A grant must name both (the broker resolves the count), within bounds.
  reply.reply.fixed_block_count = 0;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "grants 0 fixed blocks of 512 bytes",
                             DecodeServerMessage(EncodeServerMessage(reply)));
  reply.reply.fixed_block_bytes = uint64_t{1} << 31;
  reply.reply.fixed_block_count = 2;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "AttachProducerReply: 2 fixed blocks of 2147483648",
                             DecodeServerMessage(EncodeServerMessage(reply)));

  ServerMessage list;
  list.reply.type = ReplyType::kTopicList;
  TopicInfo info;
  info.config.name = "t";
  info.producer_list.push_back({3, 4241, 1000, 10, 1, 0, 2, 4096, 1 << 20, 6400, 512, 2048});
  list.reply.topics.push_back(info);
  ASSERT_OK_AND_ASSIGN(message, DecodeServerMessage(EncodeServerMessage(list)));
  ASSERT_EQ(message.reply.topics.size(), 1u);
  ASSERT_EQ(message.reply.topics[0].producer_list.size(), 1u);
  EXPECT_EQ(message.reply.topics[0].producer_list[0].fixed_block_bytes, 512u);
  EXPECT_EQ(message.reply.topics[0].producer_list[0].fixed_block_count, 2048u);
}

}  // namespace
}  // namespace alkaid::broker::protocol
