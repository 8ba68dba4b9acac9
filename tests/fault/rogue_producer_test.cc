// What consumers check of a producer's values in each Verification mode
// (docs/RELIABILITY.md, "Trust between processes"), where users choose it:
// `client::Consumer` (ConsumerOptions::verification) and `alkaid subscribe`
// (--validate full, --private-copy), through a real broker, against a rogue
// producer process (alkaid_fault_rogue_producer: three batches, the second
// one's utf8 offsets corrupted in place in its pool before Publish, first
// and last offsets left right).

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/format/array.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/validate.h"
#include "broker_test_util.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using client::Consumer;
using client::Verification;
using testing::AwaitingConsumers;
using testing::BrokerProcess;
using testing::ReadFile;
using testing::Spawn;
using testing::Wait;
using testing::WaitUntil;
using namespace std::chrono_literals;

// What the rogue producer publishes.
format::SchemaPtr RogueSchema() {
  return format::schema(
      {format::field("id", format::int64()), format::field("name", format::utf8())});
}

// The error a full check gives for the hostile batch names the column, the
// slot and the offset.
void ExpectNamesTheOffset(const Status& st) {
  EXPECT_EQ(st.code(), StatusCode::kInvalid) << st;
  EXPECT_NE(st.message().find("field 'name'"), std::string::npos) << st;
  EXPECT_NE(st.message().find("slot 0: end offset 1073741824 is past the end of the 21-byte data"),
            std::string::npos)
      << st;
}

int64_t FirstId(const format::RecordBatch& batch) {
  return std::static_pointer_cast<format::Int64Array>(batch.column(0))->Value(0);
}

// Runs `args` with stderr into `stderr_path`; returns its pid.
pid_t SpawnWithStderr(const std::vector<std::string>& args, const std::string& stderr_path) {
  const pid_t pid = testing::ForkTestChild();
  if (pid == 0) {
    if (std::FILE* f = std::freopen(stderr_path.c_str(), "w", stderr)) (void)f;
    testing::ExecOrExit(args);
  }
  return pid;
}

class RogueProducerTest : public testing::BrokerWithDirTest {
 protected:
  pid_t SpawnRogue(const std::string& topic) {
    return Spawn({ALKAID_ROGUE_PRODUCER_BIN, broker_.socket(), topic});
  }
};

// What one consumer got: each Next's result until the end of the stream
// (at most `limit` calls).
std::vector<Result<format::RecordBatchPtr>> ReadAll(Consumer* consumer, int limit) {
  std::vector<Result<format::RecordBatchPtr>> got;
  while (static_cast<int>(got.size()) < limit) {
    got.push_back(consumer->Next(30s));
    if (got.back().status().IsEndOfStream() || got.back().status().IsTimedOut()) break;
  }
  return got;
}

// Three consumers attached before the rogue producer joins, one per mode,
// each reading on its own thread (a consumer registers with a new producer
// in Next): kStructure returns the hostile batch (its values are the
// producer's word); kFull and kPrivateCopy refuse it with Invalid naming
// the column, slot and offset, and go on with the next batch, then the end
// of the stream.
TEST_F(RogueProducerTest, ConsumerRefusesTheHostileBatchInFullAndPrivateCopy) {
  {
    ASSERT_OK_AND_ASSIGN(auto admin, client::BrokerClient::Connect(broker_.socket()));
    ASSERT_OK(admin->CreateTopic("rogue", RogueSchema(), testing::TopicWithArena()).status());
  }
  const Verification modes[] = {Verification::kStructure, Verification::kFull,
                                Verification::kPrivateCopy};
  std::vector<std::unique_ptr<Consumer>> consumers;
  for (Verification mode : modes) {
    client::ConsumerOptions options = testing::ConsumerOn(broker_);
    options.verification = mode;
    ASSERT_OK_AND_ASSIGN(auto consumer, Consumer::Open("rogue", options));
    consumers.push_back(std::move(consumer));
  }
  std::vector<std::vector<Result<format::RecordBatchPtr>>> got(consumers.size());
  std::vector<std::thread> readers;
  for (size_t i = 0; i < consumers.size(); ++i) {
    readers.emplace_back([&, i] { got[i] = ReadAll(consumers[i].get(), 5); });
  }
  const pid_t rogue = SpawnRogue("rogue");
  for (auto& t : readers) t.join();
  EXPECT_EQ(Wait(rogue), 0);

  for (size_t i = 0; i < consumers.size(); ++i) {
    SCOPED_TRACE(client::VerificationName(modes[i]));
    const auto& results = got[i];
    ASSERT_EQ(results.size(), 4u);  // three batches (or two and an error), the end
    EXPECT_TRUE(results[3].status().IsEndOfStream()) << results[3].status();
    ASSERT_OK(results[0].status());
    EXPECT_EQ(FirstId(**results[0]), 0);
    ASSERT_OK(results[2].status());
    EXPECT_EQ(FirstId(**results[2]), 200);
    EXPECT_OK(format::ValidateFull(**results[2]));
    if (modes[i] == Verification::kStructure) {
      // The lie, intact.
      ASSERT_OK(results[1].status());
      EXPECT_EQ(FirstId(**results[1]), 100);
      ExpectNamesTheOffset(format::ValidateFull(**results[1]));
    } else {
      ASSERT_FALSE(results[1].ok()) << "the hostile batch was returned";
      ExpectNamesTheOffset(results[1].status());
      std::printf("%s -> %s\n", client::VerificationName(modes[i]),
                  results[1].status().ToString().c_str());
    }
  }
}

// `alkaid subscribe` started before the topic exists, once per mode: the
// default writes all three batches and exits 0; --validate full and
// --private-copy write the first, then exit 1 with the error naming the
// column, slot and offset.
TEST_F(RogueProducerTest, AlkaidSubscribeRefusesTheHostileBatchWithFullOrPrivateCopy) {
  const std::vector<std::vector<std::string>> flags = {
      {}, {"--validate", "full"}, {"--private-copy"}};
  std::vector<pid_t> subscribers;
  for (size_t i = 0; i < flags.size(); ++i) {
    std::vector<std::string> args = {ALKAID_TOOL_BIN,
                                     "subscribe",
                                     "rogue",
                                     "--out",
                                     dir_ + "/out" + std::to_string(i),
                                     "--timeout",
                                     "60",
                                     "--socket",
                                     broker_.socket()};
    args.insert(args.end(), flags[i].begin(), flags[i].end());
    subscribers.push_back(SpawnWithStderr(args, dir_ + "/err" + std::to_string(i)));
  }
  ASSERT_TRUE(WaitUntil([&] { return AwaitingConsumers(broker_.socket(), "rogue") == 3; }));
  const pid_t rogue = SpawnRogue("rogue");

  EXPECT_EQ(Wait(subscribers[0]), 0) << ReadFile(dir_ + "/err0");
  for (size_t i = 1; i < flags.size(); ++i) {
    SCOPED_TRACE(flags[i].back());
    const int code = Wait(subscribers[i]);
    const std::string why = ReadFile(dir_ + "/err" + std::to_string(i));
    EXPECT_EQ(code, 1) << why;
    std::printf("%s -> %s", flags[i].back().c_str(), why.c_str());
    EXPECT_NE(why.find("alkaid subscribe"), std::string::npos) << why;
    EXPECT_NE(why.find("field 'name'"), std::string::npos) << why;
    EXPECT_NE(why.find("end offset 1073741824 is past the end"), std::string::npos) << why;
  }
  EXPECT_EQ(Wait(rogue), 0);

  // What each wrote: a stream of the batches it accepted.
  const std::vector<std::vector<int64_t>> expected = {{0, 100, 200}, {0}, {0}};
  for (size_t i = 0; i < flags.size(); ++i) {
    ASSERT_OK_AND_ASSIGN(auto input,
                         format::ipc::FileInputStream::Open(dir_ + "/out" + std::to_string(i)));
    ASSERT_OK_AND_ASSIGN(auto reader, format::ipc::RecordBatchStreamReader::Open(input));
    ASSERT_OK_AND_ASSIGN(auto batches, reader->ReadAll());
    std::vector<int64_t> firsts;
    for (const auto& b : batches) firsts.push_back(FirstId(*b));
    EXPECT_EQ(firsts, expected[i]) << "subscriber " << i;
  }
}

}  // namespace
}  // namespace alkaid::broker
