// The previous release, met from this one: a client and a broker of
// different control protocol versions refuse each other naming both
// versions; a consumer refuses a producer whose channel has another layout
// version, naming both, and reads the topic's other producers; the
// deprecated C++ names still work; a restarted broker keeps a live
// producer's channel under either form of its name (docs/COMPATIBILITY.md).

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/format/type.h"
#include "alkaid/shm/channel.h"
#include "alkaid/shm/segment.h"
#include "broker_process.h"
#include "channel_layout_internal.h"
#include "daemon/segment_names.h"
#include "protocol/control.h"
#include "protocol/frame.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using client::BrokerClient;
using testing::BrokerProcess;
using testing::ShmNames;
using namespace std::chrono_literals;

format::SchemaPtr IdSchema() { return format::schema({format::field("id", format::int64())}); }

// A broker of another control protocol version, on `path`: answers the
// first request of one connection with an OK reply that names `version`.
// (The one peer of the tests that is not the real broker: a broker of an
// earlier release cannot be built from this tree.)
class OtherVersionBroker {
 public:
  OtherVersionBroker(std::string path, uint32_t version) : path_(std::move(path)) {
    ::unlink(path_.c_str());
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    ok_ = listen_fd_ >= 0 &&
          ::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 &&
          ::listen(listen_fd_, 1) == 0;
    if (!ok_) return;
    thread_ = std::thread([this, version] {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      protocol::FrameAssembler in;
      auto frame = protocol::ReadFrame(fd, &in, std::chrono::milliseconds(10000));
      if (frame.ok()) {
        auto request = protocol::DecodeRequest(*frame);
        if (request.ok()) {
          protocol::ServerMessage m;
          m.reply.request_id = request->id;
          m.reply.version = version;
          m.reply.type = protocol::ReplyType::kTopicList;
          (void)protocol::WriteAll(fd, protocol::Frame(protocol::EncodeServerMessage(m)));
        }
      }
      ::close(fd);
    });
  }
  ~OtherVersionBroker() {
    if (thread_.joinable()) thread_.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    ::unlink(path_.c_str());
  }
  bool ok() const { return ok_; }

 private:
  std::string path_;
  int listen_fd_ = -1;
  bool ok_ = false;
  std::thread thread_;
};

// A broker of this protocol version that grants fixed blocks as it likes,
// on `path`: answers one connection's requests as the real broker would for
// one producer (its topic, its attach with channel `channel`, its ready, its
// detach; reports unanswered), granting `bytes` x `count` fixed blocks
// whatever was asked. Granting none is what a broker of the release before
// fixed blocks does: it does not know the request's fields and its reply
// has none.
class GrantingBroker {
 public:
  GrantingBroker(std::string path, std::string channel, uint64_t bytes, uint32_t count)
      : path_(std::move(path)) {
    ::unlink(path_.c_str());
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    ok_ = listen_fd_ >= 0 &&
          ::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 &&
          ::listen(listen_fd_, 1) == 0;
    if (!ok_) return;
    thread_ = std::thread([this, channel, bytes, count] {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      protocol::FrameAssembler in;
      protocol::TopicConfig config;
      while (true) {
        auto frame = protocol::ReadFrame(fd, &in, std::chrono::milliseconds(30000));
        if (!frame.ok()) break;
        auto request = protocol::DecodeRequest(*frame);
        if (!request.ok()) break;
        protocol::ServerMessage m;
        m.reply.request_id = request->id;
        switch (request->type) {
          case protocol::RequestType::kCreateTopic:
            config = request->config;
            config.slot_count = 64;
            config.arena_bytes = config.max_arena_bytes = 1 << 20;
            m.reply.type = protocol::ReplyType::kTopic;
            m.reply.config = config;
            m.reply.created = true;
            break;
          case protocol::RequestType::kAttachProducer:
            asked_bytes_ = request->fixed_block_bytes;
            m.reply.type = protocol::ReplyType::kAttachProducer;
            m.reply.attached_id = 1;
            m.reply.channel = channel;
            m.reply.config = config;
            m.reply.fixed_block_bytes = bytes;
            m.reply.fixed_block_count = count;
            break;
          case protocol::RequestType::kProducerReady:
            m.reply.type = protocol::ReplyType::kProducerReady;
            break;
          case protocol::RequestType::kProducerStats:
            continue;  // a report: no reply
          default:
            break;  // OK, no body (Detach)
        }
        if (!protocol::WriteAll(fd, protocol::Frame(protocol::EncodeServerMessage(m))).ok()) break;
      }
      ::close(fd);
    });
  }
  ~GrantingBroker() {
    if (thread_.joinable()) thread_.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    ::unlink(path_.c_str());
  }
  bool ok() const { return ok_; }
  // What the producer asked for (valid once its Open returned).
  uint64_t asked_bytes() const { return asked_bytes_; }

 private:
  std::string path_;
  int listen_fd_ = -1;
  bool ok_ = false;
  std::atomic<uint64_t> asked_bytes_{0};
  std::thread thread_;
};

// A producer that asks for fixed blocks from a broker that grants none (a
// broker of the release before them, which ignores the request's fields)
// makes none, as the broker counted none, and publishes through the arena;
// one whose broker grants other blocks than it asked for refuses them,
// naming both, rather than make a segment the broker's figures do not
// describe.
TEST(CompatibilityTest, AProducerMakesExactlyTheFixedBlocksItsBrokerGranted) {
  const auto schema = format::schema({format::field("v", format::int64(), false)});
  struct Case {
    uint64_t bytes;
    uint32_t count;
    bool opens;
  };
  for (const Case c : {Case{0, 0, true}, Case{512, 16, true}, Case{uint64_t{1} << 30, 512, false},
                       Case{512, 17, false}}) {
    SCOPED_TRACE(std::to_string(c.bytes) + " x " + std::to_string(c.count));
    const std::string suffix = testing::UniqueSuffix();
    const std::string path = "/tmp/alkaid-test-gb" + suffix + ".sock";
    const std::string channel = "alkaid-test-gb" + suffix + ".p1.channel";
    std::optional<GrantingBroker> broker(std::in_place, path, channel, c.bytes, c.count);
    ASSERT_TRUE(broker->ok());
    client::ProducerOptions po;
    po.socket_path = path;
    po.fixed_block_bytes = 500;
    po.fixed_block_count = 16;
    po.wait_for_consumers = 0ms;
    auto producer = client::Producer::Open("t", schema, po);
    EXPECT_EQ(broker->asked_bytes(), 500u);
    if (!c.opens) {
      ASSERT_RAISES_WITH_MESSAGE(kInvalid,
                                 "the broker granted " + std::to_string(c.count) +
                                     " fixed blocks of " + std::to_string(c.bytes) +
                                     " bytes for 16 of 500",
                                 producer);
      broker.reset();
      EXPECT_TRUE(ShmNames(channel).empty());
      continue;
    }
    ASSERT_OK(producer.status());
    EXPECT_EQ((*producer)->fixed_block_bytes(), c.bytes);
    EXPECT_EQ((*producer)->fixed_block_count(), c.count);
    ASSERT_OK_AND_ASSIGN(auto writer, (*producer)->NewFixedShapeWriter(64));
    for (int i = 0; i < 40; ++i) {
      ASSERT_OK(writer->Begin());
      ASSERT_OK(writer->Publish());
    }
    writer.reset();
    ASSERT_OK((*producer)->Close());
    producer->reset();
    broker.reset();
    EXPECT_TRUE(ShmNames(channel).empty());
  }
}

// A broker from before versions sends none (0); a later one another
// number. The client refuses the first reply naming both versions, and
// the connection is done with.
TEST(CompatibilityTest, AClientRefusesABrokerOfAnotherProtocolVersion) {
  for (uint32_t version : {0u, 77u}) {
    SCOPED_TRACE(version);
    const std::string path = "/tmp/alkaid-test-ov" + testing::UniqueSuffix() + ".sock";
    OtherVersionBroker broker(path, version);
    ASSERT_TRUE(broker.ok());
    ASSERT_OK_AND_ASSIGN(auto client, BrokerClient::Connect(path));
    const std::string both =
        "control protocol version mismatch: the broker at " + path + " speaks version " +
        std::to_string(version) + (version == 0 ? " (a broker from before versions)" : "") +
        ", this client speaks version " + std::to_string(protocol::kControlProtocolVersion);
    ASSERT_RAISES_WITH_MESSAGE(kInvalid, both, client->ListTopics());
    ASSERT_RAISES_WITH_MESSAGE(kIOError, "hung up", client->ListTopics());
  }
}

Result<format::RecordBatchPtr> IdBatch(int64_t id) {
  format::Int64Builder b;
  ALKAID_RETURN_NOT_OK(b.Append(id));
  ALKAID_ASSIGN_OR_RAISE(auto a, b.Finish());
  return format::RecordBatch::Make(IdSchema(), 1, {a});
}

// Two producers on one topic, one of them as a producer of a release with
// another channel layout would leave its channel (the header's
// layout_version set to 1, the layout before extension segments). Both
// speak this control protocol, so the broker, which never maps a channel,
// accepts both. The consumer refuses that producer's channel, once, naming
// the producer, its pid and both layout versions, and receives the other
// producer's batches.
TEST(CompatibilityTest, AConsumerRefusesAChannelOfAnotherLayoutVersion) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::ProducerOptions producer_options;
  producer_options.socket_path = broker.socket();
  ASSERT_OK_AND_ASSIGN(auto other, client::Producer::Open("t", IdSchema(), producer_options));
  ASSERT_OK_AND_ASSIGN(auto current, client::Producer::Open("t", IdSchema(), producer_options));
  std::string other_channel;
  for (const auto& n : ShmNames(broker.name() + ".")) {
    if (n.size() > 11 && n.compare(n.size() - 11, 11, ".p1.channel") == 0) other_channel = n;
  }
  ASSERT_FALSE(other_channel.empty()) << "no channel of producer 1";
  ASSERT_OK_AND_ASSIGN(auto segment, shm::Segment::Open(other_channel, shm::SegmentKind::kChannel));
  auto* header = reinterpret_cast<shm::internal::ChannelHeaderData*>(segment->data());
  ASSERT_EQ(header->layout_version, shm::internal::kChannelLayoutVersion);
  header->layout_version = 1;

  client::ConsumerOptions consumer_options;
  consumer_options.socket_path = broker.socket();
  ASSERT_OK_AND_ASSIGN(auto consumer, client::Consumer::Open("t", consumer_options));
  ASSERT_RAISES_WITH_MESSAGE(kInvalid,
                             "topic 't': cannot attach to producer 1 (pid " +
                                 std::to_string(::getpid()) + "): channel '" + other_channel +
                                 "' has layout version 1; this build reads " +
                                 std::to_string(shm::internal::kChannelLayoutVersion),
                             consumer->Next(10s));
  for (int64_t id = 0; id < 3; ++id) {
    ASSERT_OK_AND_ASSIGN(auto batch, IdBatch(id));
    ASSERT_OK(current->PublishCopy(*batch));
    ASSERT_OK_AND_ASSIGN(auto received, consumer->Next(10s));
    EXPECT_TRUE(received->Equals(*batch)) << "batch " << id;
  }
  header->layout_version = shm::internal::kChannelLayoutVersion;
  ASSERT_OK(consumer->Close());
  ASSERT_OK(current->Close());
  ASSERT_OK(other->Close());
  EXPECT_EQ(broker.Stop(), 0);
  EXPECT_TRUE(ShmNames(broker.name() + ".").empty());
}

// TopicOptions' and TopicStatus' previous names (deprecated for one
// release): written, they set the topic; read, they say what the new names
// say. The new names win where both are set.
TEST(CompatibilityTest, TheDeprecatedTopicNamesStillWork) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_OK_AND_ASSIGN(auto client, BrokerClient::Connect(broker.socket()));
  client::TopicOptions old_names;
  client::TopicOptions both;
  both.slot_count = 32;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  old_names.ring_slots = 16;
  old_names.segment_bytes = 256 << 10;
  old_names.max_segment_bytes = 4 << 20;
  both.ring_slots = 8;
#pragma GCC diagnostic pop
  ASSERT_OK(client->CreateTopic("old", IdSchema(), old_names).status());
  ASSERT_OK(client->CreateTopic("both", IdSchema(), both).status());
  ASSERT_OK_AND_ASSIGN(auto topics, client->ListTopics());
  ASSERT_EQ(topics.size(), 2u);
  for (const auto& t : topics) {
    SCOPED_TRACE(t.name);
    const bool old = t.name == "old";
    EXPECT_EQ(t.slot_count, old ? 16u : 32u);
    if (old) {
      EXPECT_EQ(t.arena_bytes, 256u << 10);
      EXPECT_EQ(t.max_arena_bytes, 4u << 20);
    }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    EXPECT_EQ(t.ring_slots, t.slot_count);
    EXPECT_EQ(t.segment_bytes, t.arena_bytes);
    EXPECT_EQ(t.max_segment_bytes, t.max_arena_bytes);
#pragma GCC diagnostic pop
  }
  client::ProducerOptions options;
  options.socket_path = broker.socket();
  ASSERT_OK_AND_ASSIGN(auto producer, client::Producer::Open("old", IdSchema(), options));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  EXPECT_EQ(producer->body_segment_huge_pages(), producer->huge_pages());
#pragma GCC diagnostic pop
  ASSERT_OK(producer->Close());
}

// A restarted broker keeps the channel of a producer that still runs for it
// to re-register with, whichever form its name has: "<stem>.channel", or
// "<stem>.ring" from a broker of the previous release. Stopped, the broker
// removes both (nobody re-registered).
TEST(CompatibilityTest, LeftoverChannelsOfBothFormsAreKeptForTheirLiveProducer) {
  BrokerProcess broker;
  const std::string stem = broker.name() + ".old." + std::to_string(::getpid());
  const std::string current = stem + ".p1" + internal::kChannelSuffix;
  const std::string legacy = stem + ".p2" + internal::kLegacyChannelSuffix;
  ASSERT_OK_AND_ASSIGN(auto a, shm::ChannelProducer::Create(current));
  ASSERT_OK_AND_ASSIGN(auto b, shm::ChannelProducer::Create(legacy));
  ASSERT_EQ(ShmNames(stem).size(), 4u);  // the channels and their registries

  ASSERT_TRUE(broker.Start({"--adopt-timeout", "3600"}));
  EXPECT_EQ(ShmNames(stem),
            (std::set<std::string>{current, current + ".reg", legacy, legacy + ".reg"}));
  EXPECT_EQ(broker.Stop(), 0);
  EXPECT_TRUE(ShmNames(stem).empty());
}

}  // namespace
}  // namespace alkaid::broker
