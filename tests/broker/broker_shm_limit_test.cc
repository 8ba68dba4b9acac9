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
// that the default producer and consumer work there, their arena growing
// within the limit, or within the memory when there is no limit.

#include <gtest/gtest.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/builder.h"
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
format::SchemaPtr YSchema() { return format::schema({format::field("y", format::int64())}); }

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
  topic.slot_count = 64;
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
  EXPECT_EQ(doc["topics"][0]["arena_bytes"].get<uint64_t>(), 4 * kMiB);
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

// A batch of `rows` int64 values 0, 1, ... built in a pool of `producer`
// (zero-copy: its buffer lies in the producer's arena), published.
Status PublishRows(Producer* producer, int64_t rows) {
  ALKAID_ASSIGN_OR_RAISE(auto pool,
                         producer->NewBatchPool(static_cast<uint64_t>(rows) * 9 + 65536));
  format::Int64Builder values(pool.get());
  ALKAID_RETURN_NOT_OK(values.Reserve(rows));
  for (int64_t i = 0; i < rows; ++i) values.UnsafeAppend(i);
  ALKAID_ASSIGN_OR_RAISE(auto array, values.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto batch, format::RecordBatch::Make(YSchema(), rows, {array}));
  return producer->Publish(*batch, pool.get());
}

// True if `batch` (one int64 column) holds 0, 1, ... and its buffer lies in
// a shared-memory mapping of broker `broker` (zero-copy): `*where` says which.
bool HoldsRowsInPlace(const format::RecordBatch& batch, const std::string& broker,
                      std::string* where) {
  const auto& data = *batch.column_data(0);
  const auto* values = reinterpret_cast<const int64_t*>(data.buffers[1]->data());
  for (int64_t i = 0; i < batch.num_rows(); i += 4093) {
    if (values[i] != i) return false;
  }
  if (values[batch.num_rows() - 1] != batch.num_rows() - 1) return false;
  *where = testing::MappingOf(values);
  return where->rfind("/dev/shm/" + broker + ".", 0) == 0;
}

// A default topic: a 160 MB batch (the example, which a 64 MiB
// arena refused) goes through zero-copy, in an extension of the producer's
// arena the broker granted (counted, shown in `alkaid topics --json`), read
// by the consumer from its mapping of that extension. A batch over the
// topic's maximum is refused naming both sizes; the producer carries on.
TEST_F(BrokerShmLimitTest, ABatchLargerThanTheArenaGoesThroughAnExtension) {
  if (ShmTotalBytes() < 1024 * kMiB) GTEST_SKIP() << "needs 1 GiB of /dev/shm";
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::ProducerOptions options;  // the default topic
  options.socket_path = broker.socket();
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("big", YSchema(), options));
  ASSERT_OK_AND_ASSIGN(auto consumer, client::Consumer::Open("big", testing::ConsumerOn(broker)));
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK_AND_ASSIGN(auto before, admin->Stats());
  EXPECT_LT(before.reserved_bytes, 4 * kMiB) << "an idle default topic holds a few MiB";

  constexpr int64_t kRows = 20'000'000;  // 160 MB
  ASSERT_OK(PublishRows(producer.get(), kRows));
  ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(std::chrono::seconds(10)));
  ASSERT_NE(batch, nullptr);
  ASSERT_EQ(batch->num_rows(), kRows);
  std::string where;
  EXPECT_TRUE(HoldsRowsInPlace(*batch, broker.name(), &where)) << where;
  EXPECT_NE(where.find(".channel.x"), std::string::npos) << where;  // an extension
  ASSERT_OK_AND_ASSIGN(auto grown, admin->Stats());
  EXPECT_GE(grown.reserved_bytes, before.reserved_bytes + uint64_t{kRows} * 8);
  const auto doc = TopicsJson(broker);
  EXPECT_EQ(doc["topics"][0]["shm_bytes"].get<uint64_t>(), grown.reserved_bytes) << doc.dump();
  EXPECT_EQ(doc["topics"][0]["max_arena_bytes"].get<uint64_t>(),
            std::min<uint64_t>(uint64_t{2} << 30, ExpectedDefaultLimit()))
      << doc.dump();

  // Past the topic's maximum: refused, both sizes named.
  const uint64_t max = doc["topics"][0]["max_arena_bytes"].get<uint64_t>();
  auto over = producer->NewBatchPool(max + 1);
  ASSERT_RAISES(kCapacityError, over.status());
  EXPECT_NE(over.status().message().find("a block of "), std::string::npos)  // the region's size
      << over.status().ToString();
  EXPECT_NE(over.status().message().find("maximum of " + std::to_string(max)), std::string::npos)
      << over.status().ToString();
  ASSERT_OK(PublishRows(producer.get(), 1000));
  ASSERT_OK_AND_ASSIGN(auto small, consumer->Next(std::chrono::seconds(10)));
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->num_rows(), 1000);
  batch.reset();
  small.reset();
  ASSERT_OK(producer->Close());
  ASSERT_OK(consumer->Close());
  EXPECT_TRUE(testing::WaitNoSegments(broker.name() + "."));
}

// A topic whose first producer was refused (its arena did not fit the
// limit) is not stuck with that producer's sizes: the next producer's
// sizes apply, and it attaches.
TEST_F(BrokerShmLimitTest, ARefusedProducerLeavesNoTopicStuckWithItsSizes) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start({"--shm-limit", std::to_string(8 * kMiB)}));
  auto refused = Producer::Open("t", XSchema(),
                                testing::ProducerOn(broker, testing::TopicWithArena(64 * kMiB)));
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "of the broker's limit of", refused);
  ASSERT_OK_AND_ASSIGN(auto producer,
                       Producer::Open("t", XSchema(), testing::ProducerOn(broker, {})));
  const auto doc = TopicsJson(broker);
  EXPECT_EQ(doc["topics"][0]["arena_bytes"].get<uint64_t>(), 1 * kMiB) << doc.dump();
  ASSERT_OK(producer->Close());
}

// The broker counts each extension it grants against its limit, and
// refuses one past it (that batch fails naming the limit; the producer goes
// on); a producer's extensions are no longer counted once it is gone.
TEST_F(BrokerShmLimitTest, ExtensionsAreCountedAgainstTheLimitAndRefusedPastIt) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start({"--shm-limit", std::to_string(8 * kMiB)}));
  client::TopicOptions topic;
  topic.max_arena_bytes = 64 * kMiB;  // more than the limit allows: the broker decides
  ASSERT_OK_AND_ASSIGN(auto producer,
                       Producer::Open("t", YSchema(), testing::ProducerOn(broker, topic)));
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK_AND_ASSIGN(auto attached, admin->Stats());
  ASSERT_OK(PublishRows(producer.get(), 400'000));  // 3.2 MB: an extension
  ASSERT_OK_AND_ASSIGN(auto grown, admin->Stats());
  EXPECT_GE(grown.reserved_bytes, attached.reserved_bytes + 3'200'000);
  auto refused = PublishRows(producer.get(), 1'250'000);  // 10 MB
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "does not fit the broker's limit of 8388608 bytes",
                             refused);
  std::cerr << "past the broker's limit: " << refused.ToString() << "\n";
  ASSERT_OK(PublishRows(producer.get(), 1000));
  ASSERT_OK(producer->Close());
  ASSERT_OK_AND_ASSIGN(auto after, admin->Stats());
  EXPECT_EQ(after.reserved_bytes, 0u);
  EXPECT_TRUE(testing::WaitNoSegments(broker.name() + "."));
}

// A producer SIGKILLed while it adds an extension (the name exists, the
// segment is being reserved and prefaulted): the broker, which granted the
// name, removes it with the producer's other names, and stops counting it.
TEST_F(BrokerShmLimitTest, AProducerKilledWhileAddingAnExtensionLeavesNoName) {
  if (ShmTotalBytes() < 2048 * kMiB) GTEST_SKIP() << "needs 2 GiB of /dev/shm";
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  const pid_t child = testing::ForkTestChild();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto producer = Producer::Open("t", YSchema(), testing::ProducerOn(broker, {}));
    if (!producer.ok()) ::_exit(3);
    (void)(*producer)->NewBatchPool(uint64_t{1} << 30);  // a 1 GiB extension: long to make
    ::_exit(4);  // not reached in time: the parent kills us first
  }
  const bool adding = testing::WaitUntil([&] {
    for (const auto& n : ShmNames(broker.name() + ".")) {
      if (n.find(".channel.x") != std::string::npos) return true;
    }
    return false;
  });
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(adding) << "the producer never began its extension";
  EXPECT_TRUE(WIFSIGNALED(status)) << "it finished before the kill: " << status;
  EXPECT_TRUE(testing::WaitNoSegments(broker.name() + "."));
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  EXPECT_TRUE(testing::WaitUntil([&] {
    auto stats = admin->Stats();
    return stats.ok() && stats->reserved_bytes == 0;
  }));
}

// A consumer SIGKILLed while it holds a batch in an extension: the
// producer takes the block back (its Poll checks pids), then releases the
// idle extension: its name goes and the broker stops counting it.
TEST_F(BrokerShmLimitTest, AConsumerKilledHoldingABatchInAnExtensionGivesItBack) {
  if (ShmTotalBytes() < 256 * kMiB) GTEST_SKIP() << "needs 256 MiB of /dev/shm";
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  int held[2];
  ASSERT_EQ(::pipe(held), 0);
  const pid_t child = testing::ForkTestChild();
  ASSERT_GE(child, 0);
  if (child == 0) {
    client::ConsumerOptions options = testing::ConsumerOn(broker);
    options.wait_for_topic = std::chrono::seconds(30);
    auto consumer = client::Consumer::Open("t", options);
    if (!consumer.ok()) ::_exit(3);
    auto batch = (*consumer)->Next(std::chrono::seconds(30));
    if (!batch.ok() || *batch == nullptr) ::_exit(4);
    const char byte = 1;
    if (::write(held[1], &byte, 1) != 1) ::_exit(5);
    while (true) ::pause();  // holding the batch
  }
  ASSERT_OK_AND_ASSIGN(auto producer,
                       Producer::Open("t", YSchema(), testing::ProducerOn(broker, {})));
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  ASSERT_OK_AND_ASSIGN(auto attached, admin->Stats());
  ASSERT_OK(PublishRows(producer.get(), 2'500'000));  // 20 MB: an extension
  char byte = 0;
  ASSERT_EQ(::read(held[0], &byte, 1), 1) << "the consumer did not receive the batch";
  producer->Poll();
  EXPECT_EQ(producer->stats().blocks_live, 1u);
  ASSERT_OK_AND_ASSIGN(auto grown, admin->Stats());
  EXPECT_GT(grown.reserved_bytes, attached.reserved_bytes);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(held[0]);
  ::close(held[1]);
  EXPECT_TRUE(testing::WaitUntil([&] {
    producer->Poll();
    return producer->stats().blocks_live == 0;
  })) << "the killed consumer's block was not taken back";
  EXPECT_TRUE(testing::WaitUntil([&] {
    producer->Poll();
    auto stats = admin->Stats();
    return stats.ok() && stats->reserved_bytes == attached.reserved_bytes;
  })) << "the idle extension was not released";
  for (const auto& n : ShmNames(broker.name() + ".")) {
    EXPECT_EQ(n.find(".channel.x"), std::string::npos) << n << " left";
  }
  ASSERT_OK(producer->Close());
  EXPECT_TRUE(testing::WaitNoSegments(broker.name() + "."));
}

// The tests of a 64 MiB /dev/shm only: the suite's own ctest registration
// leaves them out (tests/broker/CMakeLists.txt); broker_shm_limit_64m runs
// them, in a tmpfs of that size.
using BrokerOn64MiBShmTest = BrokerShmLimitTest;

// 64 MiB /dev/shm only: the default producer and consumer (a 1 MiB arena
// that grows) work within the default limit (32 MiB): a 20 MB batch gets
// an extension; one that would take the arena past what the limit allows
// is refused (the topic's maximum is the limit), and the producer goes on.
TEST_F(BrokerOn64MiBShmTest, DefaultProducerGrowsWithinTheLimit) {
  if (!OnA64MiBShm()) GTEST_SKIP() << "needs a 64 MiB /dev/shm (ctest broker_shm_limit_64m)";
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::ProducerOptions defaults;
  defaults.socket_path = broker.socket();
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", YSchema(), defaults));
  ASSERT_OK_AND_ASSIGN(auto consumer, client::Consumer::Open("t", testing::ConsumerOn(broker)));
  ASSERT_OK(PublishRows(producer.get(), 2'500'000));  // 20 MB
  ASSERT_OK_AND_ASSIGN(auto batch, consumer->Next(std::chrono::seconds(10)));
  ASSERT_NE(batch, nullptr);
  std::string where;
  EXPECT_TRUE(HoldsRowsInPlace(*batch, broker.name(), &where)) << where;
  auto refused = PublishRows(producer.get(), 5'000'000);  // 40 MB: past the 32 MiB maximum
  ASSERT_RAISES_WITH_MESSAGE(kCapacityError, "maximum of 33554432 bytes", refused);
  std::cerr << "past the limit: " << refused.ToString() << "\n";
  batch.reset();
  ASSERT_OK(PublishRows(producer.get(), 1000));
  ASSERT_OK_AND_ASSIGN(auto small, consumer->Next(std::chrono::seconds(10)));
  ASSERT_NE(small, nullptr);
  small.reset();
  ASSERT_OK(producer->Close());
  ASSERT_OK(consumer->Close());
  EXPECT_TRUE(testing::WaitNoSegments(broker.name() + "."));
}

// 64 MiB /dev/shm only: without a limit the memory itself decides. A batch
// whose extension /dev/shm cannot hold fails with OutOfMemory ("/dev/shm is
// full"); the producer carries on with the arena it has, and nothing is
// left behind.
TEST_F(BrokerOn64MiBShmTest, AnExtensionAFullDevShmCannotHoldIsOutOfMemory) {
  if (!OnA64MiBShm()) GTEST_SKIP() << "needs a 64 MiB /dev/shm (ctest broker_shm_limit_64m)";
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start({"--shm-limit", "0"}));
  client::ProducerOptions defaults;
  defaults.socket_path = broker.socket();
  ASSERT_OK_AND_ASSIGN(auto producer, Producer::Open("t", YSchema(), defaults));
  ASSERT_OK_AND_ASSIGN(auto consumer, client::Consumer::Open("t", testing::ConsumerOn(broker)));
  auto refused = PublishRows(producer.get(), 10'000'000);  // 80 MB
  ASSERT_RAISES_WITH_MESSAGE(kOutOfMemory, "/dev/shm is full", refused);
  std::cerr << "an extension /dev/shm cannot hold: " << refused.ToString() << "\n";
  ASSERT_OK(PublishRows(producer.get(), 1000));
  ASSERT_OK_AND_ASSIGN(auto small, consumer->Next(std::chrono::seconds(10)));
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->num_rows(), 1000);
  small.reset();
  EXPECT_TRUE(ShmNames(broker.name() + ".").size() >= 1);
  ASSERT_OK(producer->Close());
  ASSERT_OK(consumer->Close());
  EXPECT_TRUE(testing::WaitNoSegments(broker.name() + "."));
}

}  // namespace
}  // namespace alkaid::broker
