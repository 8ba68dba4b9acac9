// The broker's shared-memory limit through a real alkaid-broker: by
// default half of /dev/shm's size, said in its start message and in
// `alkaid topics` (table and --json) with the bytes its producers hold;
// --shm-limit (command line or --config file) wins.
//
// ctest runs this binary twice: on the host's /dev/shm
// (alkaid_broker_shm_limit_test.*), and through
// tests/fault/run_in_small_shm.sh in a private mount namespace with a
// 64 MiB tmpfs over /dev/shm, Docker's default (broker_shm_limit_64m, with
// ALKAID_EXPECT_SHM_BYTES=67108864): there the broker must start with a
// 32 MiB limit and say so, and the tests marked "64 MiB /dev/shm only" show
// what a producer with the default 64 MiB arena gets.

#include <gtest/gtest.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/type.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using client::BrokerClient;
using client::Producer;
using testing::BrokerProcess;
using testing::ReadFile;
using testing::ShmNames;

constexpr uint64_t kMiB = uint64_t{1} << 20;

uint64_t ShmTotalBytes() {
  struct statvfs vfs {};
  if (::statvfs("/dev/shm", &vfs) != 0) return 0;
  return static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
}

// Half of /dev/shm, rounded down to whole MiB: what the broker's default
// must be (docs/BROKER.md), computed here on its own.
uint64_t ExpectedDefaultLimit() { return ShmTotalBytes() / 2 / kMiB * kMiB; }

bool OnA64MiBShm() { return ShmTotalBytes() == 64 * kMiB; }

format::SchemaPtr XSchema() { return format::schema({format::field("x", format::int32())}); }

class BrokerShmLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Run under run_in_small_shm.sh: make sure the mount really happened.
    if (const char* want = std::getenv("ALKAID_EXPECT_SHM_BYTES")) {
      ASSERT_EQ(ShmTotalBytes(), std::stoull(want))
          << "/dev/shm is not the tmpfs run_in_small_shm.sh should have mounted";
    }
    ASSERT_GE(ShmTotalBytes(), 2 * kMiB);
    log_ = "/tmp/alkaid-test-shm-limit-" + testing::UniqueSuffix() + ".log";
  }
  void TearDown() override { ::unlink(log_.c_str()); }

  // `alkaid topics [--json]` on `broker`: its stdout.
  static std::string Topics(const BrokerProcess& broker, bool json) {
    const std::string out = "/tmp/alkaid-test-" + broker.name() + ".topics";
    std::vector<std::string> args = {ALKAID_TOOL_BIN, "topics", "--socket", broker.socket()};
    if (json) args.emplace_back("--json");
    const int code = testing::Wait(testing::Spawn(args, out));
    std::string text = ReadFile(out);
    ::unlink(out.c_str());
    EXPECT_EQ(code, 0) << text;
    return text;
  }

  static nlohmann::json TopicsJson(const BrokerProcess& broker) {
    const std::string text = Topics(broker, true);
    auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(doc.is_discarded()) << "not JSON: " << text;
    return doc;
  }

  std::string log_;
};

// No --shm-limit: half of /dev/shm, said at start, and the same figures
// from `alkaid topics --json` and GetStats.
TEST_F(BrokerShmLimitTest, DefaultIsHalfOfDevShmAndSaidAtStart) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start({}, log_));
  const std::string log = ReadFile(log_);
  const auto line = log.find("shm limit ");
  ASSERT_NE(line, std::string::npos) << log;
  const std::string said = log.substr(line, log.find('\n', line) - line);
  EXPECT_NE(said.find("(half of /dev/shm's "), std::string::npos) << said;
  EXPECT_NE(said.find("; --shm-limit to change)"), std::string::npos) << said;
  if (OnA64MiBShm()) {
    EXPECT_EQ(said.rfind("shm limit 32 MiB (half of /dev/shm's 64 MiB; --shm-limit to change); "
                         "/dev/shm: 64 MiB free of 64 MiB",
                         0),
              0u)
        << said;
  }
  std::cerr << "broker said: " << said << "\n";

  const auto doc = TopicsJson(broker);
  ASSERT_TRUE(doc.contains("broker")) << doc.dump();
  const auto& b = doc["broker"];
  EXPECT_EQ(b["shm_limit_bytes"].get<uint64_t>(), ExpectedDefaultLimit()) << doc.dump();
  EXPECT_EQ(b["shm_limit_origin"].get<std::string>().rfind("half of /dev/shm's ", 0), 0u)
      << doc.dump();
  EXPECT_EQ(b["shm_in_use_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(b["shm_total_bytes"].get<uint64_t>(), ShmTotalBytes());
  EXPECT_LE(b["shm_free_bytes"].get<uint64_t>(), ShmTotalBytes());
  EXPECT_TRUE(doc["topics"].is_array() && doc["topics"].empty()) << doc.dump();

  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK_AND_ASSIGN(auto stats, admin->Stats());
  EXPECT_EQ(stats.shm_limit, ExpectedDefaultLimit());
  EXPECT_EQ(stats.shm_limit_origin, b["shm_limit_origin"].get<std::string>());
}

// What a producer holds is counted against the limit and shown, in the
// table's summary line and in --json, as `alkaid topics` sees it.
TEST_F(BrokerShmLimitTest, TopicsShowsTheLimitAndTheBytesInUse) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::TopicOptions topic = testing::TopicWithArena(4 * kMiB);
  topic.ring_slots = 64;
  ASSERT_OK_AND_ASSIGN(auto producer,
                       Producer::Open("t", XSchema(), testing::ProducerOn(broker, topic)));
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK_AND_ASSIGN(auto stats, admin->Stats());
  EXPECT_GT(stats.reserved_bytes, 4 * kMiB);  // the arena and the channel's slots

  const auto doc = TopicsJson(broker);
  EXPECT_EQ(doc["broker"]["shm_in_use_bytes"].get<uint64_t>(), stats.reserved_bytes) << doc.dump();
  EXPECT_EQ(doc["broker"]["shm_limit_bytes"].get<uint64_t>(), ExpectedDefaultLimit());
  ASSERT_EQ(doc["topics"].size(), 1u) << doc.dump();
  EXPECT_EQ(doc["topics"][0]["name"], "t");
  EXPECT_EQ(doc["topics"][0]["producers"], 1);
  EXPECT_EQ(doc["topics"][0]["segment_bytes"].get<uint64_t>(), 4 * kMiB);
  EXPECT_EQ(doc["topics"][0]["kind"], "record-batch");

  // The table, a blank line, then the summary.
  const std::string text = Topics(broker, false);
  const auto blank = text.find("\n\n");
  ASSERT_NE(blank, std::string::npos) << text;
  EXPECT_NE(text.substr(0, blank).find("\nt "), std::string::npos) << text;
  const std::string summary = text.substr(blank + 2);
  EXPECT_EQ(summary.rfind("shm limit ", 0), 0u) << text;
  EXPECT_NE(summary.find("(half of /dev/shm's "), std::string::npos) << text;
  EXPECT_NE(summary.find(" in use by producers; /dev/shm: "), std::string::npos) << text;
  if (OnA64MiBShm()) {
    EXPECT_EQ(summary.rfind("shm limit 32 MiB (half of /dev/shm's 64 MiB), 4.", 0), 0u) << text;
  }
  ASSERT_OK(producer->Close());
}

// --shm-limit wins over the default, from the command line and from a
// --config file, and says so.
TEST_F(BrokerShmLimitTest, AnExplicitLimitWins) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start({"--shm-limit", std::to_string(8 * kMiB)}, log_));
  EXPECT_NE(ReadFile(log_).find("shm limit 8 MiB (--shm-limit); /dev/shm: "), std::string::npos)
      << ReadFile(log_);
  auto doc = TopicsJson(broker);
  EXPECT_EQ(doc["broker"]["shm_limit_bytes"].get<uint64_t>(), 8 * kMiB);
  EXPECT_EQ(doc["broker"]["shm_limit_origin"], "--shm-limit");
  EXPECT_EQ(broker.Stop(), 0);

  const std::string config = log_ + ".toml";
  {
    std::ofstream out(config);
    out << "shm-limit = " << 6 * kMiB << "\n";
  }
  BrokerProcess configured;
  ASSERT_TRUE(configured.Start({"--config", config}));
  ::unlink(config.c_str());
  doc = TopicsJson(configured);
  EXPECT_EQ(doc["broker"]["shm_limit_bytes"].get<uint64_t>(), 6 * kMiB);
  EXPECT_EQ(doc["broker"]["shm_limit_origin"], "--shm-limit");

  BrokerProcess unlimited;
  ASSERT_TRUE(unlimited.Start({"--shm-limit", "0"}, log_));
  EXPECT_NE(ReadFile(log_).find("no shm limit (--shm-limit 0)"), std::string::npos)
      << ReadFile(log_);
  doc = TopicsJson(unlimited);
  EXPECT_EQ(doc["broker"]["shm_limit_bytes"].get<uint64_t>(), 0u);
}

// 64 MiB /dev/shm only: a producer with the default arena (64 MiB) does not
// fit the default limit (32 MiB); the broker refuses it before any segment
// exists, saying why and what to change. One with a 16 MiB arena attaches.
TEST_F(BrokerShmLimitTest, DefaultArenaOnA64MiBShmIsRefusedWithAClearMessage) {
  if (!OnA64MiBShm()) GTEST_SKIP() << "needs a 64 MiB /dev/shm (ctest broker_shm_limit_64m)";
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::ProducerOptions defaults;  // the default arena
  defaults.socket_path = broker.socket();
  auto refused = Producer::Open("big", XSchema(), defaults);
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError,
                             "of the broker's limit of 33554432 bytes (32 MiB) (half of "
                             "/dev/shm's 64 MiB) are in use",
                             refused);
  EXPECT_NE(refused.status().message().find("smaller arena (TopicOptions::segment_bytes"),
            std::string::npos)
      << refused.status().ToString();
  std::cerr << "a default producer gets: " << refused.status().ToString() << "\n";
  EXPECT_TRUE(ShmNames(broker.name() + ".").empty());

  client::TopicOptions topic = testing::TopicWithArena(16 * kMiB);
  ASSERT_OK_AND_ASSIGN(auto producer,
                       Producer::Open("small", XSchema(), testing::ProducerOn(broker, topic)));
  ASSERT_OK(producer->Close());
}

// 64 MiB /dev/shm only: without a limit the memory itself decides; the
// default arena and its channel do not fit in 64 MiB, and the producer's
// segment creation says so (OutOfMemory, "/dev/shm is full"), leaving
// nothing behind.
TEST_F(BrokerShmLimitTest, DefaultArenaOnA64MiBShmWithoutALimitIsOutOfMemory) {
  if (!OnA64MiBShm()) GTEST_SKIP() << "needs a 64 MiB /dev/shm (ctest broker_shm_limit_64m)";
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start({"--shm-limit", "0"}));
  client::ProducerOptions defaults;
  defaults.socket_path = broker.socket();
  auto refused = Producer::Open("big", XSchema(), defaults);
  ASSERT_RAISES_WITH_MESSAGE(kOutOfMemory, "/dev/shm is full", refused);
  std::cerr << "without a limit, a default producer gets: " << refused.status().ToString() << "\n";
  EXPECT_TRUE(ShmNames(broker.name() + ".").empty());
}

}  // namespace
}  // namespace alkaid::broker
