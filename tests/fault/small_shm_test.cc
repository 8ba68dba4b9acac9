// Fault injection: /dev/shm too small. Run by run_in_small_shm.sh, which
// mounts a private 4 MiB tmpfs over /dev/shm (ctest test fault_small_shm).
// Creating segments and topics bigger than that must fail with a clear
// OutOfMemory ("/dev/shm is full") and never with SIGBUS; the broker must
// refuse to start when --shm-limit exceeds the free space.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_primitive.h"
#include "alkaid/shm/channel.h"
#include "alkaid/shm/segment.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "shm_filler.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using alkaid::testing::ShmFiller;
using client::Producer;
using testing::BrokerProcess;
using testing::ShmNames;
using testing::UniqueSuffix;
using testing::Wait;

constexpr uint64_t kMiB = uint64_t{1} << 20;

uint64_t ShmTotalBytes() {
  struct statvfs vfs {};
  if (::statvfs("/dev/shm", &vfs) != 0) return 0;
  return static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
}

class SmallShmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const uint64_t total = ShmTotalBytes();
    ASSERT_GT(total, 0u);
    ASSERT_LE(total, 16 * kMiB) << "/dev/shm is " << total
                                << " bytes: run this test through run_in_small_shm.sh";
  }
};

TEST_F(SmallShmTest, SegmentBiggerThanShmIsOutOfMemory) {
  const std::string name = "alkaid_fault_big" + UniqueSuffix();
  auto segment = shm::Segment::Create(name, 16 * kMiB, shm::SegmentKind::kRaw);
  ASSERT_FALSE(segment.ok());
  EXPECT_TRUE(segment.status().IsOutOfMemory()) << segment.status().ToString();
  EXPECT_NE(segment.status().message().find("/dev/shm is full"), std::string::npos)
      << segment.status().ToString();
  EXPECT_NE(segment.status().message().find(name), std::string::npos)
      << "the error should name the segment: " << segment.status().ToString();
  EXPECT_TRUE(ShmNames(name).empty()) << "a failed Create left its name behind";
}

TEST_F(SmallShmTest, SegmentThatFitsWorksAndTheNextOneDoesNot) {
  const std::string first = "alkaid_fault_fit" + UniqueSuffix();
  const std::string second = "alkaid_fault_over" + UniqueSuffix();
  ASSERT_OK_AND_ASSIGN(auto segment, shm::Segment::Create(first, 3 * kMiB, shm::SegmentKind::kRaw));
  // Every page is usable: no SIGBUS when touching all of it.
  std::memset(segment->data(), 0x5A, segment->data_size());
  auto over = shm::Segment::Create(second, 2 * kMiB, shm::SegmentKind::kRaw);
  ASSERT_FALSE(over.ok());
  EXPECT_TRUE(over.status().IsOutOfMemory()) << over.status().ToString();
  EXPECT_TRUE(ShmNames(second).empty());
  segment.reset();
  ASSERT_OK(shm::Segment::Remove(first));
}

TEST_F(SmallShmTest, ChannelBiggerThanShmIsOutOfMemory) {
  const std::string name = "alkaid_fault_channel" + UniqueSuffix();
  shm::ChannelOptions options;
  options.arena_bytes = 32 * kMiB;
  auto channel = shm::ChannelProducer::Create(name, options);
  ASSERT_FALSE(channel.ok());
  EXPECT_TRUE(channel.status().IsOutOfMemory()) << channel.status().ToString();
  EXPECT_TRUE(ShmNames(name).empty()) << "a failed Create left a name of the channel behind";
}

// alkaid-broker with a --shm-limit above the free space of /dev/shm: exit
// code 1 and a message that names the limit and the free space.
TEST_F(SmallShmTest, BrokerRefusesALimitAboveFreeSpace) {
  const std::string suffix = UniqueSuffix();
  const std::string socket = "/tmp/alkaid-fault-" + suffix + ".sock";
  const std::string log = "/tmp/alkaid-fault-" + suffix + ".err";
  const pid_t pid = testing::ForkTestChild();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) ::dup2(fd, 2);
    ::execl(ALKAID_BROKER_BIN, ALKAID_BROKER_BIN, "--socket", socket.c_str(), "--name",
            ("fault" + suffix).c_str(), "--shm-limit", "67108864", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  const int code = Wait(pid);
  std::ifstream in(log);
  const std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::unlink(log.c_str());
  EXPECT_EQ(code, 1) << "stderr: " << err;
  EXPECT_NE(err.find("/dev/shm"), std::string::npos) << err;
  EXPECT_NE(err.find("cannot start"), std::string::npos) << err;
  EXPECT_EQ(::access(socket.c_str(), F_OK), -1) << "the refused broker left its socket";
}

// A broker that accepts the topic (no limit of its own), and a producer
// whose body segment cannot fit: Producer::Open fails with OutOfMemory, no
// segment is left behind, and the broker keeps serving.
TEST_F(SmallShmTest, ProducerWithSegmentBiggerThanShmFailsCleanly) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start({"--shm-limit", "0"}));
  client::ProducerOptions po;
  po.socket_path = broker.socket();
  po.topic.arena_bytes = 32 * kMiB;
  auto schema = format::schema({format::field("x", format::int32())});
  auto producer = Producer::Open("big", schema, po);
  ASSERT_FALSE(producer.ok());
  EXPECT_TRUE(producer.status().IsOutOfMemory()) << producer.status().ToString();
  EXPECT_NE(producer.status().message().find("/dev/shm is full"), std::string::npos)
      << producer.status().ToString();
  EXPECT_TRUE(ShmNames(broker.name()).empty()) << "segments left after the failed Open";

  // A topic that fits still works on the same broker.
  po.topic.arena_bytes = 1 * kMiB;
  po.topic.slot_count = 16;
  ASSERT_OK_AND_ASSIGN(auto small, Producer::Open("small", schema, po));
  ASSERT_OK(small->Close());
  EXPECT_EQ(::kill(broker.pid(), 0), 0);
}

// The broker's own accounting: --shm-limit below the free space, and a
// topic above the limit is refused by the broker before any segment exists.
TEST_F(SmallShmTest, BrokerLimitRefusesATopicAboveIt) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start({"--shm-limit", "2097152"}));
  client::ProducerOptions po;
  po.socket_path = broker.socket();
  po.topic.arena_bytes = 3 * kMiB;
  auto producer = Producer::Open("over", format::schema({format::field("x", format::int32())}), po);
  ASSERT_FALSE(producer.ok());
  EXPECT_NE(producer.status().message().find("limit"), std::string::npos)
      << producer.status().ToString();
  EXPECT_TRUE(ShmNames(broker.name()).empty());
}

// A producer of topic "full" (64 KiB arena, 16 slots) that waits for no
// consumer: the full-/dev/shm consumer tests' producer.
Result<std::unique_ptr<Producer>> OpenSmallProducer(const BrokerProcess& broker,
                                                    const std::shared_ptr<format::Schema>& schema) {
  client::ProducerOptions po;
  po.socket_path = broker.socket();
  po.topic.arena_bytes = 64 << 10;
  po.topic.slot_count = 16;
  po.wait_for_consumers = std::chrono::milliseconds(0);
  return Producer::Open("full", schema, po);
}

// A consumer that cannot attach to a producer because /dev/shm is full (its
// own segment cannot be created) is told once, and attaches once there is
// room again: it then receives what the producer publishes. (Found by the
// soak, tests/broker/broker_soak_test.cc: before, such a consumer gave up on
// the producer for good and received nothing from it.)
TEST_F(SmallShmTest, AConsumerKeptFromAProducerByAFullDevShmAttachesOnceThereIsRoom) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start({"--shm-limit", "0"}));
  auto schema = format::schema({format::field("x", format::int32())});
  ASSERT_OK_AND_ASSIGN(auto producer, OpenSmallProducer(broker, schema));

  // /dev/shm filled to its last page.
  ShmFiller full("alkaid_fault_fill" + UniqueSuffix());  // freed at the end of its scope too
  ASSERT_GE(full.Fill(), 0);
  client::ConsumerOptions co;
  co.socket_path = broker.socket();
  auto consumer = client::Consumer::Open("full", co);
  if (consumer.ok()) {
    // Told once, naming the producer.
    auto first = (*consumer)->Next(std::chrono::milliseconds(500));
    ASSERT_FALSE(first.ok());
    EXPECT_TRUE(first.status().IsOutOfMemory()) << first.status().ToString();
    EXPECT_NE(first.status().message().find("cannot attach to producer"), std::string::npos)
        << first.status().ToString();
  }
  full.Free();
  if (!consumer.ok()) GTEST_FAIL() << "Consumer::Open: " << consumer.status().ToString();

  // Room again: the producer publishes until the consumer receives (a
  // condition; the bound only ends a hang).
  format::Int32Builder b;
  ASSERT_OK(b.Append(7));
  ASSERT_OK_AND_ASSIGN(auto column, b.Finish());
  ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(schema, 1, {column}));
  bool received = false;
  Status last;  // the consumer's last answer other than TimedOut
  testing::WaitUntil([&] {
    const Status published = producer->PublishCopy(*batch);
    if (!published.ok()) {
      last = published;
      return true;
    }
    auto next = (*consumer)->Next(std::chrono::milliseconds(10));
    if (next.ok()) {
      received = true;
      EXPECT_EQ(std::static_pointer_cast<format::Int32Array>((*next)->column(0))->Value(0), 7);
    } else if (!next.status().IsTimedOut()) {
      last = next.status();
    }
    return received;
  });
  EXPECT_TRUE(received) << "the consumer never attached to the producer; last: " << last.ToString();
  ASSERT_OK((*consumer)->Close());
  ASSERT_OK(producer->Close());
  EXPECT_EQ(broker.Stop(), 0);
  EXPECT_TRUE(ShmNames(broker.name()).empty());
}

// The same consumer while /dev/shm stays full: it retries the attach every
// 200 ms (the consumer's RetryAttach, when it maintains) and fails each
// time. It said so once: every later Next in the wait times out as it
// should, never says OutOfMemory again, never hangs, and the failed
// attaches leave no segment behind (its own segment cannot be created;
// nothing half-made stays). Closed while still kept out, it leaves nothing
// either; a second consumer attaches once there is room.
TEST_F(SmallShmTest, AConsumerKeptOutByAFullDevShmRetriesQuietlyAndLeavesNothing) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start({"--shm-limit", "0"}));
  auto schema = format::schema({format::field("x", format::int32())});
  ASSERT_OK_AND_ASSIGN(auto producer, OpenSmallProducer(broker, schema));
  const std::set<std::string> before = ShmNames(broker.name());
  ASSERT_FALSE(before.empty());

  ShmFiller full("alkaid_fault_fill" + UniqueSuffix());  // freed at the end of its scope too
  ASSERT_GE(full.Fill(), 0);
  client::ConsumerOptions co;
  co.socket_path = broker.socket();
  auto consumer = client::Consumer::Open("full", co);
  int out_of_memory = 0;
  int timed_out = 0;
  Status other;
  if (consumer.ok()) {
    // Well past five retries (200 ms apart), each Next bounded.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    while (std::chrono::steady_clock::now() < until) {
      const auto asked = std::chrono::steady_clock::now();
      auto next = (*consumer)->Next(std::chrono::milliseconds(100));
      EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(2))
          << "a Next of 100 ms did not return in time";
      ASSERT_FALSE(next.ok()) << "a batch with nothing published";
      if (next.status().IsOutOfMemory()) {
        ++out_of_memory;
        EXPECT_NE(next.status().message().find("retrying"), std::string::npos)
            << next.status().ToString();
      } else if (next.status().IsTimedOut()) {
        ++timed_out;
      } else {
        other = next.status();
      }
      EXPECT_EQ(ShmNames(broker.name()), before) << "a failed attach left a segment";
    }
    EXPECT_OK((*consumer)->Close());
    EXPECT_EQ(ShmNames(broker.name()), before) << "the closed consumer left a segment";
  }
  full.Free();
  if (!consumer.ok()) GTEST_FAIL() << "Consumer::Open: " << consumer.status().ToString();
  EXPECT_EQ(out_of_memory, 1) << "told once, at the first failure";
  EXPECT_GE(timed_out, 3);  // bounded waits that ended (about 14 unless the machine crawls)
  EXPECT_TRUE(other.ok()) << other.ToString();

  // Room again: a new consumer attaches and receives.
  ASSERT_OK_AND_ASSIGN(auto second, client::Consumer::Open("full", co));
  format::Int32Builder b;
  ASSERT_OK(b.Append(7));
  ASSERT_OK_AND_ASSIGN(auto column, b.Finish());
  ASSERT_OK_AND_ASSIGN(auto batch, format::RecordBatch::Make(schema, 1, {column}));
  ASSERT_OK(producer->PublishCopy(*batch));
  ASSERT_OK_AND_ASSIGN(auto got, second->Next(std::chrono::seconds(5)));
  EXPECT_EQ(got->num_rows(), 1);
  got.reset();
  ASSERT_OK(second->Close());
  ASSERT_OK(producer->Close());
  EXPECT_EQ(broker.Stop(), 0);
  EXPECT_TRUE(ShmNames(broker.name()).empty());
}

}  // namespace
}  // namespace alkaid::broker
