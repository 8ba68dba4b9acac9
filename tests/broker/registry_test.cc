// The broker's registry without a socket (broker/daemon/registry.h): each
// request is handled for a peer, and what the broker would send comes back
// as a reply and events addressed to connections.

#include "daemon/registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/writer.h"
#include "daemon/segment_names.h"
#include "test_util.h"

namespace alkaid::broker::internal {
namespace {

constexpr int kProducerConn = 10;
constexpr int kConsumerConn = 11;
constexpr int kOtherConn = 12;

std::vector<uint8_t> SchemaBytes() {
  auto schema = format::schema({format::field("id", format::int64())});
  auto sink = format::ipc::BufferOutputStream::Create().ValueOrDie();
  auto writer = format::ipc::MakeStreamWriter(sink.get(), schema).ValueOrDie();
  EXPECT_TRUE(writer->Close().ok());
  auto buffer = sink->Finish().ValueOrDie();
  return {buffer->data(), buffer->data() + buffer->size()};
}

class RegistryTest : public ::testing::Test {
 protected:
  RegistryTest()
      : log_("rt", LogLevel::kError),
        // An empty directory: nothing is left over, Claim finds nothing.
        leftovers_(::testing::TempDir(), "rt", std::chrono::seconds(30), std::chrono::seconds(30),
                   log_),
        registry_(Settings(), &leftovers_, log_) {}

  static RegistrySettings Settings() {
    RegistrySettings s;
    s.broker_name = "rt";
    s.socket_path = "/nowhere.sock";
    s.instance = "rt.1";
    s.shm_limit.bytes = 8 << 20;
    s.shm_limit.origin = "a test's";
    return s;
  }

  // Handles `request` for `peer`; the reply must be there and OK.
  p::Reply Ok(const Peer& peer, p::Request request, std::vector<Outbound>* events = nullptr) {
    Outcome out = registry_.Handle(peer, request);
    EXPECT_TRUE(out.reply.has_value());
    if (!out.reply.has_value()) return {};
    EXPECT_TRUE(out.reply->ok()) << out.reply->status().ToString();
    if (events != nullptr) *events = std::move(out.events);
    return out.reply->ok() ? **out.reply : p::Reply{};
  }

  Status Refused(const Peer& peer, p::Request request) {
    Outcome out = registry_.Handle(peer, request);
    EXPECT_TRUE(out.reply.has_value());
    EXPECT_TRUE(out.events.empty());
    return out.reply.has_value() ? out.reply->status() : Status::OK();
  }

  static p::Request Create(const std::string& topic, uint64_t max_arena_bytes = 0) {
    p::Request r;
    r.type = p::RequestType::kCreateTopic;
    r.config.name = topic;
    r.config.schema = SchemaBytes();
    r.config.arena_bytes = 1 << 20;
    r.config.max_arena_bytes = max_arena_bytes;
    return r;
  }
  static p::Request Attach(p::RequestType type, const std::string& topic) {
    p::Request r;
    r.type = type;
    r.topic = topic;
    return r;
  }
  static p::Request About(p::RequestType type, uint64_t id) {
    p::Request r;
    r.type = type;
    r.target_id = id;
    return r;
  }
  // Attaches a producer to topic "t", ready, granted extension 1 of `bytes`;
  // its id.
  uint64_t ReadyProducerWithExtension(uint64_t bytes) {
    const p::Reply attached = Ok(producer_, Attach(p::RequestType::kAttachProducer, "t"));
    Ok(producer_, About(p::RequestType::kProducerReady, attached.attached_id));
    p::Request add = About(p::RequestType::kAddExtension, attached.attached_id);
    add.extension_id = 1;
    add.bytes = bytes;
    Ok(producer_, add);
    return attached.attached_id;
  }
  // Segments the broker counts now.
  uint64_t Segments() {
    p::BrokerStats stats;
    registry_.Count(&stats);
    return stats.segments;
  }

  Peer producer_{kProducerConn, 4242, 1000, 1000};
  Peer consumer_{kConsumerConn, 4343, 1000, 1000};
  Peer other_{kOtherConn, 4444, 1000, 1000};
  Logger log_;
  Leftovers leftovers_;
  Registry registry_;
};

// A producer attaches (its channel named after the broker's instance, its
// pid and id; its sizes reserved), declares itself ready, and the topic's
// consumer is told (ProducerJoined on the consumer's connection) while the
// producer's reply lists that consumer.
TEST_F(RegistryTest, AReadyProducerIsAnnouncedToTheTopicsConsumers) {
  const p::Reply created = Ok(producer_, Create("t"));
  EXPECT_TRUE(created.created);
  EXPECT_EQ(created.config.slot_count, 1024u);  // the default
  const p::Reply consumer = Ok(consumer_, Attach(p::RequestType::kAttachConsumer, "t"));
  EXPECT_TRUE(consumer.producers.empty());

  const p::Reply attached = Ok(producer_, Attach(p::RequestType::kAttachProducer, "t"));
  EXPECT_EQ(attached.channel,
            ProducerSegmentStem("rt.1", 4242, attached.attached_id) + kChannelSuffix);
  EXPECT_EQ(attached.segment_mode, 0600u);
  EXPECT_GE(registry_.reserved_bytes(), uint64_t{1} << 20);

  std::vector<Outbound> events;
  const p::Reply ready =
      Ok(producer_, About(p::RequestType::kProducerReady, attached.attached_id), &events);
  ASSERT_EQ(ready.consumer_list.size(), 1u);
  EXPECT_EQ(ready.consumer_list[0].id, consumer.attached_id);
  EXPECT_EQ(ready.consumer_list[0].pid, 4343u);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].conn, kConsumerConn);
  EXPECT_EQ(events[0].event.type, p::EventType::kProducerJoined);
  EXPECT_EQ(events[0].event.producer.channel, attached.channel);

  // A consumer attaching later finds it in its reply instead.
  const p::Reply late = Ok(other_, Attach(p::RequestType::kAttachConsumer, "t"));
  ASSERT_EQ(late.producers.size(), 1u);
  EXPECT_EQ(late.producers[0].channel, attached.channel);
}

// Two consumers of one process (one pid, a connection each, tokens 1 and 2)
// are each given the figures their producers reported under their own token:
// lag the largest over the producers, the rest summed. Figures without a
// token (a producer of an older build) go to every consumer of that pid, as
// does every figure of the pid to a consumer that gave no token (an older
// client).
TEST_F(RegistryTest, TwoConsumersOfOneProcessAreToldApartByTheirTokens) {
  Ok(producer_, Create("t"));
  const Peer second_conn{kOtherConn + 1, 4343, 1000, 1000};
  p::Request attach_one = Attach(p::RequestType::kAttachConsumer, "t");
  attach_one.token = 1;
  p::Request attach_two = Attach(p::RequestType::kAttachConsumer, "t");
  attach_two.token = 2;
  const uint64_t one = Ok(consumer_, attach_one).attached_id;
  const uint64_t two = Ok(second_conn, attach_two).attached_id;
  const uint64_t old = Ok(other_, Attach(p::RequestType::kAttachConsumer, "t")).attached_id;
  const uint64_t first = ReadyProducerWithExtension(1 << 20);
  const p::Reply second_attached = Ok(producer_, Attach(p::RequestType::kAttachProducer, "t"));
  Ok(producer_, About(p::RequestType::kProducerReady, second_attached.attached_id));

  auto figures = [](uint32_t pid, uint64_t token, uint64_t lag, uint64_t read_bytes) {
    p::ConsumerFigures f;
    f.pid = pid;
    f.token = token;
    f.lag = lag;
    f.drops = lag / 2;
    f.held_blocks = lag + 1;
    f.held_bytes = 64 * (lag + 1);
    f.read_bytes = read_bytes;
    return f;
  };
  p::Request report = About(p::RequestType::kProducerStats, first);
  report.consumer_figures = {figures(4343, 1, 0, 1000), figures(4343, 2, 10, 400),
                             figures(4444, 0, 3, 700)};
  // A report has no reply.
  EXPECT_FALSE(registry_.Handle(producer_, report).reply.has_value());
  report.target_id = second_attached.attached_id;
  report.consumer_figures = {figures(4343, 2, 4, 50), figures(4343, 1, 2, 90),
                             figures(4444, 0, 1, 20)};
  EXPECT_FALSE(registry_.Handle(producer_, report).reply.has_value());

  p::Request list;
  list.type = p::RequestType::kListTopics;
  p::Reply topics = Ok(other_, list);
  ASSERT_EQ(topics.topics.size(), 1u);
  std::map<uint64_t, p::ConsumerStatus> status;
  for (const auto& c : topics.topics[0].consumer_list) status[c.id] = c;
  ASSERT_EQ(status.size(), 3u);
  EXPECT_TRUE(status[one].reported);
  EXPECT_EQ(status[one].lag, 2u);
  EXPECT_EQ(status[one].drops, 0u + 1);
  EXPECT_EQ(status[one].held_blocks, 1u + 3);
  EXPECT_EQ(status[one].held_bytes, 64u * 4);
  EXPECT_EQ(status[one].read_bytes, 1000u + 90);
  EXPECT_EQ(status[two].lag, 10u);
  EXPECT_EQ(status[two].drops, 5u + 2);
  EXPECT_EQ(status[two].held_blocks, 11u + 5);
  EXPECT_EQ(status[two].read_bytes, 400u + 50);
  EXPECT_EQ(status[old].lag, 3u);
  EXPECT_EQ(status[old].read_bytes, 700u + 20);

  // A producer of an older build reports no token: its figures for the pid
  // go to both (their sum, as before tokens), on top of their own.
  report.consumer_figures = {figures(4343, 0, 6, 5)};
  EXPECT_FALSE(registry_.Handle(producer_, report).reply.has_value());
  topics = Ok(other_, list);
  for (const auto& c : topics.topics[0].consumer_list) status[c.id] = c;
  EXPECT_EQ(status[one].lag, 6u);
  EXPECT_EQ(status[one].read_bytes, 1000u + 5);
  EXPECT_EQ(status[two].lag, 10u);
  EXPECT_EQ(status[two].read_bytes, 400u + 5);
  EXPECT_EQ(status[old].lag, 3u);
  EXPECT_EQ(status[old].read_bytes, 700u);
}

// A consumer waiting for a topic becomes one of its consumers when it is
// created, and is told so on its connection (TopicCreated).
TEST_F(RegistryTest, AWaitingConsumerIsWelcomedWhenTheTopicIsCreated) {
  p::Request wait = Attach(p::RequestType::kAttachConsumer, "later");
  wait.wait_for_topic = true;
  const p::Reply pending = Ok(consumer_, wait);
  EXPECT_TRUE(pending.pending);
  p::BrokerStats stats;
  registry_.Count(&stats);
  EXPECT_EQ(stats.topics, 0u);
  EXPECT_EQ(stats.consumers, 1u);

  std::vector<Outbound> events;
  Ok(producer_, Create("later"), &events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].conn, kConsumerConn);
  EXPECT_EQ(events[0].event.type, p::EventType::kTopicCreated);
  EXPECT_EQ(events[0].event.consumer_id, pending.attached_id);
  p::Request list;
  list.type = p::RequestType::kListTopics;
  const p::Reply topics = Ok(other_, list);
  ASSERT_EQ(topics.topics.size(), 1u);
  EXPECT_EQ(topics.topics[0].consumers, 1u);
  EXPECT_TRUE(topics.awaited.empty());
}

// A producer's connection closing removes it: its consumers are told
// (ProducerGone), what it reserved is given back; a consumer's closing tells
// the producers (ConsumerGone).
TEST_F(RegistryTest, AClosedConnectionTakesItsProducersAndConsumersWithIt) {
  Ok(producer_, Create("t"));
  const p::Reply consumer = Ok(consumer_, Attach(p::RequestType::kAttachConsumer, "t"));
  const p::Reply attached = Ok(producer_, Attach(p::RequestType::kAttachProducer, "t"));
  Ok(producer_, About(p::RequestType::kProducerReady, attached.attached_id));

  std::vector<Outbound> gone = registry_.Disconnected(consumer_, "test");
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].conn, kProducerConn);
  EXPECT_EQ(gone[0].event.type, p::EventType::kConsumerGone);
  EXPECT_EQ(gone[0].event.consumer_id, consumer.attached_id);
  EXPECT_EQ(gone[0].event.pid, 4343u);

  Ok(consumer_, Attach(p::RequestType::kAttachConsumer, "t"));
  gone = registry_.Disconnected(producer_, "test");
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].conn, kConsumerConn);
  EXPECT_EQ(gone[0].event.type, p::EventType::kProducerGone);
  EXPECT_EQ(gone[0].event.producer.id, attached.attached_id);
  EXPECT_NE(gone[0].event.reason.find("pid 4242"), std::string::npos) << gone[0].event.reason;
  EXPECT_EQ(registry_.reserved_bytes(), 0u);
  p::BrokerStats stats;
  registry_.Count(&stats);
  EXPECT_EQ(stats.producers, 0u);
  EXPECT_EQ(stats.segments, 0u);
}

// `alkaid topics rm`: refused while a producer is attached (naming its
// pid); once it has gone, the topic is forgotten, its consumers are told
// (TopicRemoved, saying who removed it) and detached, and a producer may
// create it again with another schema. A schema clash on a producer-less
// topic says how to remove it.
TEST_F(RegistryTest, ATopicWithoutProducersIsRemovedAndItsConsumersTold) {
  p::Request rm = Attach(p::RequestType::kRemoveTopic, "t");
  ASSERT_RAISES_WITH_MESSAGE(kKeyError, "no topic 't'", Refused(other_, rm));
  Ok(producer_, Create("t"));
  const p::Reply consumer = Ok(consumer_, Attach(p::RequestType::kAttachConsumer, "t"));
  Ok(producer_, Attach(p::RequestType::kAttachProducer, "t"));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "has 1 producer (pid 4242)", Refused(other_, rm));

  (void)registry_.Disconnected(producer_, "test");
  p::Request other_schema = Create("t");
  other_schema.config.schema = [] {
    auto schema = format::schema({format::field("name", format::utf8())});
    auto sink = format::ipc::BufferOutputStream::Create().ValueOrDie();
    auto writer = format::ipc::MakeStreamWriter(sink.get(), schema).ValueOrDie();
    EXPECT_TRUE(writer->Close().ok());
    auto buffer = sink->Finish().ValueOrDie();
    return std::vector<uint8_t>(buffer->data(), buffer->data() + buffer->size());
  }();
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "it has no producer: `alkaid topics rm t` removes it",
                             Refused(producer_, other_schema));

  std::vector<Outbound> events;
  Ok(other_, rm, &events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].conn, kConsumerConn);
  EXPECT_EQ(events[0].event.type, p::EventType::kTopicRemoved);
  EXPECT_EQ(events[0].event.topic, "t");
  EXPECT_EQ(events[0].event.reason, "removed by pid 4444");
  p::BrokerStats stats;
  registry_.Count(&stats);
  EXPECT_EQ(stats.topics, 0u);
  EXPECT_EQ(stats.consumers, 0u);
  // The consumer is no longer attached: its detach finds nothing.
  p::Request detach = About(p::RequestType::kDetach, consumer.attached_id);
  detach.role = p::Role::kConsumer;
  ASSERT_RAISES_WITH_MESSAGE(kKeyError, "no consumer", Refused(consumer_, detach));
  EXPECT_TRUE(Ok(producer_, other_schema).created);
}

// Requests about what another connection attached, or about what no
// earlier broker left, are refused and change nothing.
TEST_F(RegistryTest, OnlyTheOwningConnectionSpeaksForAProducer) {
  Ok(producer_, Create("t"));
  const p::Reply attached = Ok(producer_, Attach(p::RequestType::kAttachProducer, "t"));
  p::Request detach = About(p::RequestType::kDetach, attached.attached_id);
  detach.role = p::Role::kProducer;
  ASSERT_RAISES_WITH_MESSAGE(kKeyError, "attached through this connection",
                             Refused(other_, detach));
  p::Request claim = Attach(p::RequestType::kAttachProducer, "t");
  claim.channel = "rt.0.4444.p9.channel";
  ASSERT_RAISES_WITH_MESSAGE(kKeyError, "was not left by an earlier broker named 'rt'",
                             Refused(other_, claim));
  ASSERT_RAISES_WITH_MESSAGE(kKeyError, "no topic 'u' on broker 'rt' (/nowhere.sock)",
                             Refused(other_, Attach(p::RequestType::kAttachProducer, "u")));
  p::BrokerStats stats;
  registry_.Count(&stats);
  EXPECT_EQ(stats.producers, 1u);
  std::vector<Outbound> events;
  Ok(producer_, detach, &events);
  registry_.Count(&stats);
  EXPECT_EQ(stats.producers, 0u);
}

// Extensions are counted against the broker's limit (8 MiB here) and the
// topic's maximum (64 MiB), named after the channel, and given back.
TEST_F(RegistryTest, ExtensionsAreCountedAgainstTheLimit) {
  Ok(producer_, Create("t", 64 << 20));
  const p::Reply attached = Ok(producer_, Attach(p::RequestType::kAttachProducer, "t"));
  const uint64_t before = registry_.reserved_bytes();
  p::Request add = About(p::RequestType::kAddExtension, attached.attached_id);
  add.extension_id = 1;
  add.bytes = 2 << 20;
  const p::Reply granted = Ok(producer_, add);
  EXPECT_EQ(granted.extension_name, attached.channel + ".x1");
  EXPECT_EQ(registry_.reserved_bytes(), before + (2 << 20));
  add.extension_id = 2;
  add.bytes = 16 << 20;
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "the broker's limit of 8388608",
                             Refused(producer_, add));
  add.bytes = 62 << 20;
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "past the topic's maximum of 67108864",
                             Refused(producer_, add));
  p::Request release = About(p::RequestType::kReleaseExtension, attached.attached_id);
  release.extension_id = 1;
  const Outcome released = registry_.Handle(producer_, release);
  EXPECT_FALSE(released.reply.has_value());  // a report: no reply
  EXPECT_EQ(registry_.reserved_bytes(), before);
}

// Fixed blocks (AttachProducer.fixed_block_bytes): reserved beside the
// arena (count x bytes rounded up to 64, and the page the area starts on),
// the count resolved to twice the topic's slots when none is asked, granted
// in the reply and listed per producer. An older client's request (no
// field) gets none and reserves what it always did. Beyond the limit:
// CapacityError naming the fixed blocks and what to shrink; a count the
// resolution makes too large for a channel: Invalid.
TEST_F(RegistryTest, FixedBlocksAreGrantedCountedListedAndLimited) {
  Ok(producer_, Create("t"));  // 1024 slots, 1 MiB arenas, 8 MiB limit
  const p::Reply plain = Ok(producer_, Attach(p::RequestType::kAttachProducer, "t"));
  EXPECT_EQ(plain.fixed_block_bytes, 0u);
  EXPECT_EQ(plain.fixed_block_count, 0u);
  const uint64_t one = registry_.reserved_bytes();
  p::Request fixed = Attach(p::RequestType::kAttachProducer, "t");
  fixed.fixed_block_bytes = 500;
  const p::Reply granted = Ok(producer_, fixed);
  EXPECT_EQ(granted.fixed_block_bytes, 512u);
  EXPECT_EQ(granted.fixed_block_count, 2048u);
  EXPECT_EQ(registry_.reserved_bytes(), 2 * one + 2048 * 512 + 4096);
  p::Reply list = Ok(producer_, p::Request{});  // kListTopics
  ASSERT_EQ(list.topics.size(), 1u);
  ASSERT_EQ(list.topics[0].producer_list.size(), 2u);
  for (const auto& pr : list.topics[0].producer_list) {
    const bool is_fixed = pr.id == granted.attached_id;
    EXPECT_EQ(pr.fixed_block_bytes, is_fixed ? 512u : 0u);
    EXPECT_EQ(pr.fixed_block_count, is_fixed ? 2048u : 0u);
    EXPECT_EQ(pr.shm_bytes, is_fixed ? one + 2048 * 512 + 4096 : one);
  }

  // 8 blocks of 1 MiB on top of what is reserved pass the 8 MiB limit.
  fixed.fixed_block_bytes = 1 << 20;
  fixed.fixed_block_count = 8;
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "(8 fixed blocks of 1048576",
                             Refused(producer_, fixed));
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "fewer or smaller fixed blocks",
                             Refused(producer_, fixed));
  // Twice the slots of 1 GiB blocks: more than a channel holds.
  p::Request wide = Create("w");
  wide.config.slot_count = 1 << 19;
  Ok(producer_, wide);
  p::Request huge = Attach(p::RequestType::kAttachProducer, "w");
  huge.fixed_block_bytes = uint64_t{1} << 30;
  ASSERT_RAISES_WITH_MESSAGE(kInvalid, "1048576 fixed blocks of 1073741824 bytes make",
                             Refused(producer_, huge));
  EXPECT_EQ(registry_.reserved_bytes(), 2 * one + 2048 * 512 + 4096);
}

// A producer that dies with extensions: its channel's names go at once,
// its extensions stay (still counted) for the consumers of its topic, each
// of which may not have mapped them yet, until each said it read the
// channel to its end (ProducerDrained, a report: no reply) or went. A
// consumer speaks only for itself.
TEST_F(RegistryTest, ADeadProducersExtensionsAreKeptUntilEachConsumerIsDone) {
  Ok(producer_, Create("t", 64 << 20));
  const p::Reply first = Ok(consumer_, Attach(p::RequestType::kAttachConsumer, "t"));
  const p::Reply second = Ok(other_, Attach(p::RequestType::kAttachConsumer, "t"));
  const uint64_t producer_id = ReadyProducerWithExtension(2 << 20);

  const std::vector<Outbound> gone = registry_.Disconnected(producer_, "test");
  ASSERT_EQ(gone.size(), 2u);
  p::BrokerStats stats;
  registry_.Count(&stats);
  EXPECT_EQ(stats.producers, 0u);
  EXPECT_EQ(stats.segments, 1u);  // the extension, kept
  EXPECT_EQ(registry_.reserved_bytes(), uint64_t{2} << 20);

  p::Request drained = About(p::RequestType::kProducerDrained, first.attached_id);
  drained.producer_id = producer_id;
  // Sent on another consumer's connection: not its to say.
  EXPECT_FALSE(registry_.Handle(other_, drained).reply.has_value());
  EXPECT_EQ(Segments(), 1u);
  const Outcome reported = registry_.Handle(consumer_, drained);
  EXPECT_FALSE(reported.reply.has_value());  // a report: no reply
  EXPECT_TRUE(reported.events.empty());
  EXPECT_EQ(Segments(), 1u);  // the second consumer has not said so yet
  EXPECT_EQ(registry_.reserved_bytes(), uint64_t{2} << 20);

  // The second one goes (its connection closes): nobody is left to read.
  (void)second;
  registry_.Disconnected(other_, "test");
  EXPECT_EQ(Segments(), 0u);
  EXPECT_EQ(registry_.reserved_bytes(), 0u);
}

// A consumer that never says it is done (stopped, stuck) keeps the dead
// producer's extensions only until the bound (RegistrySettings::
// dead_producer_drain, 30 s by default); the broker's stop ends the wait too.
TEST_F(RegistryTest, AKeptExtensionGoesAtTheBoundWhateverTheConsumersDo) {
  Ok(producer_, Create("t", 64 << 20));
  Ok(consumer_, Attach(p::RequestType::kAttachConsumer, "t"));
  for (int round = 0; round < 2; ++round) {
    ReadyProducerWithExtension(1 << 20);
    const auto died = std::chrono::steady_clock::now();
    registry_.Disconnected(producer_, "test");
    registry_.ExpireDrains(died);
    EXPECT_EQ(Segments(), 1u);
    registry_.ExpireDrains(round == 0 ? died + std::chrono::seconds(31)
                                      : std::chrono::steady_clock::time_point::max());
    EXPECT_EQ(Segments(), 0u);
    EXPECT_EQ(registry_.reserved_bytes(), 0u);
  }
}

// Nothing is kept when no consumer can need it: a producer that detached
// (it removed its names itself), one that died with no consumer, or whose
// only consumer said it was done before the death reached the broker (it
// saw the pid gone first), or one that died with no extension.
TEST_F(RegistryTest, NothingIsKeptWhenNoConsumerMayStillMapAnExtension) {
  Ok(producer_, Create("t", 64 << 20));
  // No consumer.
  ReadyProducerWithExtension(1 << 20);
  registry_.Disconnected(producer_, "test");
  EXPECT_EQ(Segments(), 0u);
  // Detached.
  const p::Reply consumer = Ok(consumer_, Attach(p::RequestType::kAttachConsumer, "t"));
  p::Request detach = About(p::RequestType::kDetach, ReadyProducerWithExtension(1 << 20));
  detach.role = p::Role::kProducer;
  Outcome detached = registry_.Handle(producer_, detach);
  ASSERT_TRUE(detached.reply.has_value() && detached.reply->ok());
  EXPECT_EQ(Segments(), 0u);
  // Drained before its death was seen.
  p::Request drained = About(p::RequestType::kProducerDrained, consumer.attached_id);
  drained.producer_id = ReadyProducerWithExtension(1 << 20);
  EXPECT_FALSE(registry_.Handle(consumer_, drained).reply.has_value());
  registry_.Disconnected(producer_, "test");
  EXPECT_EQ(Segments(), 0u);
  // No extension.
  const p::Reply plain = Ok(producer_, Attach(p::RequestType::kAttachProducer, "t"));
  Ok(producer_, About(p::RequestType::kProducerReady, plain.attached_id));
  registry_.Disconnected(producer_, "test");
  EXPECT_EQ(Segments(), 0u);
  EXPECT_EQ(registry_.reserved_bytes(), 0u);
}

}  // namespace
}  // namespace alkaid::broker::internal
