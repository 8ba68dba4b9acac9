// Broker restart: a producer and a consumer (separate processes) keep
// exchanging data while the broker is SIGKILLed, both re-register with the
// restarted broker (which re-adopts the producer's segments and removes
// those of a producer that died meanwhile), and a clean shutdown leaves
// /dev/shm clean.

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_primitive.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "protocol/control.h"
#include "protocol/frame.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using client::BrokerClient;
using client::Consumer;
using client::Producer;
using testing::BrokerProcess;
using testing::ReadFile;
using testing::ShmNames;
using namespace std::chrono_literals;

format::SchemaPtr SeqSchema() { return format::schema({format::field("seq", format::int64())}); }

// Creates topics `names` of SeqSchema with 64 slots and a 4 MiB arena.
void CreateSeqTopics(const BrokerProcess& broker, std::initializer_list<const char*> names) {
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  client::TopicOptions topic_options;
  topic_options.slot_count = 64;
  topic_options.arena_bytes = 4 << 20;
  for (const char* name : names) {
    ASSERT_OK(admin->CreateTopic(name, SeqSchema(), topic_options).status());
  }
}

Result<format::RecordBatchPtr> SeqBatch(int64_t seq) {
  format::Int64Builder b;
  ALKAID_RETURN_NOT_OK(b.Append(seq));
  ALKAID_ASSIGN_OR_RAISE(auto a, b.Finish());
  return format::RecordBatch::Make(SeqSchema(), 1, {a});
}

// A bound for a hang, never part of a verdict: the waits below end when
// their condition holds.
constexpr int kHangMs = 30000;

// Waits (up to `ms`, a guard against a hang) for one byte on `fd`.
bool ReadByte(int fd, int ms = kHangMs) {
  pollfd pfd{fd, POLLIN, 0};
  if (::poll(&pfd, 1, ms) != 1) return false;
  char c = 0;
  return ::read(fd, &c, 1) == 1;
}

bool TopicShows(const std::string& socket, const std::string& topic, uint32_t producers,
                uint32_t consumers, int ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < deadline) {
    auto client = BrokerClient::Connect(socket);
    if (client.ok()) {
      auto topics = (*client)->ListTopics();
      if (topics.ok()) {
        for (const auto& t : *topics) {
          if (t.name == topic && t.producers == producers && t.consumers == consumers) {
            return true;
          }
        }
      }
    }
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// Polls `done` until it holds or `limit` passed (a bound for a hang; the
// caller asserts on the condition).
bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds limit = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

std::set<std::string> NamesOfPid(const std::string& broker_name, pid_t pid) {
  std::set<std::string> out;
  for (const auto& n : ShmNames(broker_name + ".")) {
    if (n.find("." + std::to_string(pid) + ".p") != std::string::npos) out.insert(n);
  }
  return out;
}

TEST(BrokerRestartTest, DataFlowsThroughAnOutageAndClientsReRegister) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_NO_FATAL_FAILURE(CreateSeqTopics(broker, {"r", "r2"}));
  // The producer publishes one message every 10 ms until told to stop (a
  // byte on `stop`), which happens once the restarted broker knows it and
  // the consumer again: the outage and restart fall inside its stream
  // however long they take. Each child writes how many messages it
  // published or received on `counts`.
  int progress[2], stop[2], counts[2];
  ASSERT_EQ(::pipe(progress), 0);
  ASSERT_EQ(::pipe(stop), 0);
  ASSERT_EQ(::pipe(counts), 0);
  auto report = [&](int64_t n) { (void)!::write(counts[1], &n, sizeof n); };

  // Consumer: every message exactly once, in order; a byte on `progress`
  // after 20 messages and after 150.
  const pid_t consumer_pid = testing::ForkTestChild();
  if (consumer_pid == 0) {
    client::ConsumerOptions options;
    options.socket_path = broker.socket();
    auto consumer = Consumer::Open("r", options);
    if (!consumer.ok()) ::_exit(10);
    int64_t next = 0;
    while (true) {
      auto batch = (*consumer)->Next(20s);
      if (!batch.ok()) {
        if (batch.status().code() == StatusCode::kEndOfStream) break;
        (void)std::fprintf(stderr, "consumer: %s\n", batch.status().ToString().c_str());
        ::_exit(11);
      }
      const int64_t seq =
          std::static_pointer_cast<format::Int64Array>((*batch)->column(0))->Value(0);
      if (seq != next) {
        (void)std::fprintf(stderr, "consumer: got %lld, expected %lld\n",
                           static_cast<long long>(seq), static_cast<long long>(next));
        ::_exit(12);
      }
      ++next;
      if (next == 20 || next == 150) (void)!::write(progress[1], "c", 1);
    }
    report(next);
    if ((*consumer)->reregistrations() != 1) ::_exit(14);
    ::_exit((*consumer)->Close().ok() ? 0 : 15);
  }
  // The consumer attaches before the producer exists, so that the producer
  // waits for it (wait_for_consumers) and it receives message 0 (a consumer
  // attaching after the producer starts begins at its next message).
  ASSERT_TRUE(TopicShows(broker.socket(), "r", 0, 1, kHangMs)) << "the consumer did not attach";
  // Producer: one message every 10 ms.
  const pid_t producer_pid = testing::ForkTestChild();
  if (producer_pid == 0) {
    client::ProducerOptions options;
    options.socket_path = broker.socket();
    auto producer = Producer::Open("r", SeqSchema(), options);
    if (!producer.ok()) ::_exit(20);
    int64_t seq = 0;
    for (; !ReadByte(stop[0], 0); ++seq) {
      auto batch = SeqBatch(seq);
      if (!batch.ok() || !(*producer)->PublishCopy(**batch).ok()) ::_exit(21);
      std::this_thread::sleep_for(10ms);
    }
    report(seq);
    if ((*producer)->stats().reregistrations != 1) ::_exit(22);
    ::_exit((*producer)->Close().ok() ? 0 : 23);
  }
  // A second producer that dies while the broker is down.
  const pid_t doomed = testing::ForkTestChild();
  if (doomed == 0) {
    client::ProducerOptions options;
    options.socket_path = broker.socket();
    auto producer = Producer::Open("r2", SeqSchema(), options);
    if (!producer.ok()) ::_exit(30);
    while (true) std::this_thread::sleep_for(1s);
  }
  ASSERT_TRUE(TopicShows(broker.socket(), "r", 1, 1, kHangMs));
  ASSERT_TRUE(TopicShows(broker.socket(), "r2", 1, 0, kHangMs));
  ASSERT_TRUE(ReadByte(progress[0])) << "no data before the outage";

  broker.Kill();
  // Data keeps flowing: 130 more messages (> 1 s) arrive without a broker.
  ASSERT_TRUE(ReadByte(progress[0])) << "no data during the outage";
  EXPECT_EQ(NamesOfPid(broker.name(), doomed).size(), 2u);
  ::kill(doomed, SIGKILL);
  EXPECT_EQ(testing::Wait(doomed), -SIGKILL);

  ASSERT_TRUE(broker.Start());
  // Both re-register; the restarted broker knows the topic again with its
  // producer and consumer.
  ASSERT_TRUE(TopicShows(broker.socket(), "r", 1, 1, kHangMs));
  const std::string out = "/tmp/alkaid-test-" + broker.name() + ".topics";
  ASSERT_EQ(
      testing::Wait(testing::Spawn({ALKAID_TOOL_BIN, "topics", "--socket", broker.socket()}, out)),
      0);
  const std::string text = ReadFile(out);
  std::filesystem::remove(out);
  std::istringstream lines(text);
  std::string line;
  bool listed = false;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string name;
    uint32_t producers = 0, consumers = 0;
    fields >> name >> producers >> consumers;
    if (name == "r") listed = producers == 1 && consumers == 1;
  }
  EXPECT_TRUE(listed) << text;
  // The dead producer's segments were not adopted but removed.
  EXPECT_TRUE(NamesOfPid(broker.name(), doomed).empty());
  // The live producer's: its channel and the registry (its consumer removed
  // its own segment's name once the producer had mapped it).
  EXPECT_EQ(NamesOfPid(broker.name(), producer_pid).size(), 2u);

  ASSERT_EQ(::write(stop[1], "s", 1), 1);
  EXPECT_EQ(testing::Wait(producer_pid), 0);
  EXPECT_EQ(testing::Wait(consumer_pid), 0);
  // Every message the producer published arrived, once, in order (the
  // consumer checked the order), across the outage.
  int64_t published = -1, received = -2;
  ASSERT_EQ(::read(counts[0], &published, sizeof published),
            static_cast<ssize_t>(sizeof published));
  ASSERT_EQ(::read(counts[0], &received, sizeof received), static_cast<ssize_t>(sizeof received));
  EXPECT_EQ(published, received);
  EXPECT_GT(published, 150);
  EXPECT_EQ(broker.Stop(), 0);
  EXPECT_TRUE(ShmNames(broker.name() + ".").empty());
  for (int fd : {progress[0], progress[1], stop[0], stop[1], counts[0], counts[1]}) ::close(fd);
}

// One request on a fresh connection, as a client would send it.
Result<protocol::Reply> RawCall(const std::string& socket, protocol::Request request) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return Status::IOError("connect ", socket);
  }
  request.id = 1;
  Status st = protocol::WriteAll(fd, protocol::Frame(protocol::EncodeRequest(request)));
  protocol::FrameAssembler in;
  Result<protocol::Reply> out = Status::IOError("no reply");
  if (st.ok()) {
    auto frame = protocol::ReadFrame(fd, &in, std::chrono::milliseconds(5000));
    if (frame.ok()) {
      auto message = protocol::DecodeServerMessage(*frame);
      if (message.ok()) {
        out = message->reply.status.ok() ? Result<protocol::Reply>(message->reply)
                                         : Result<protocol::Reply>(message->reply.status);
      } else {
        out = message.status();
      }
    } else {
      out = frame.status();
    }
  }
  ::close(fd);
  return out;
}

// A restarted broker hands kept segments only to the process whose pid is
// in their names, forgets names it does not know, and removes kept
// segments nobody claims within --adopt-timeout.
TEST(BrokerRestartTest, OnlyTheOwnerReadoptsItsSegments) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  // The child says when its Open returned: stopped before its ProducerReady
  // was answered, it would fail to open once the broker is gone (and exit).
  int opened[2];
  ASSERT_EQ(::pipe(opened), 0);
  const pid_t child = testing::ForkTestChild();
  if (child == 0) {
    client::ProducerOptions options;
    options.socket_path = broker.socket();
    options.topic.arena_bytes = 1 << 20;
    auto producer = Producer::Open("o", SeqSchema(), options);
    if (!producer.ok()) ::_exit(1);
    const char byte = 1;
    if (::write(opened[1], &byte, 1) != 1) ::_exit(2);
    while (true) std::this_thread::sleep_for(1s);
  }
  // Killed at the end whatever happens.
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (pid <= 0) return;
      ::kill(pid, SIGCONT);
      if (::kill(pid, SIGKILL) == 0) testing::Wait(pid);
    }
  } reaper{child};
  const bool open = ReadByte(opened[0]);
  for (int fd : opened) ::close(fd);
  ASSERT_TRUE(open) << "the producer did not open";
  ASSERT_TRUE(TopicShows(broker.socket(), "o", 1, 0, kHangMs));
  const auto names = NamesOfPid(broker.name(), child);
  ASSERT_EQ(names.size(), 2u);
  // The channel "<stem>.channel" and its registry "<stem>.channel.reg".
  const std::string channel = *names.begin();
  ASSERT_TRUE(channel.ends_with(".channel")) << channel;
  ASSERT_EQ(*names.rbegin(), channel + ".reg");

  // Stopped, the producer cannot re-register: its segments wait for it (an
  // adopt timeout of an hour: the claims below are decided by pid, not by
  // how quickly they come).
  ::kill(child, SIGSTOP);
  broker.Kill();
  ASSERT_TRUE(broker.Start({"--adopt-timeout", "3600"}));
  EXPECT_EQ(NamesOfPid(broker.name(), child).size(), 2u);
  {
    ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
    ASSERT_OK(admin->CreateTopic("o", SeqSchema()).status());
  }
  protocol::Request claim;
  claim.type = protocol::RequestType::kAttachProducer;
  claim.topic = "o";
  claim.channel = channel;
  ASSERT_RAISES_WITH_MESSAGE(kPermissionDenied, "belongs to pid " + std::to_string(child),
                             RawCall(broker.socket(), claim));
  claim.channel = broker.name() + ".1.1.p1.channel";
  ASSERT_RAISES_WITH_MESSAGE(kKeyError, "was not left by an earlier broker",
                             RawCall(broker.socket(), claim));

  // Resumed, the owner re-registers with them.
  ::kill(child, SIGCONT);
  ASSERT_TRUE(TopicShows(broker.socket(), "o", 1, 0, kHangMs));
  EXPECT_EQ(NamesOfPid(broker.name(), child).size(), 2u);

  // Once more, but it stays stopped past --adopt-timeout: the names go
  // (while the owner lives, stopped).
  ::kill(child, SIGSTOP);
  broker.Kill();
  ASSERT_TRUE(broker.Start({"--adopt-timeout", "0.5"}));
  WaitUntil([&] { return NamesOfPid(broker.name(), child).empty(); });
  EXPECT_TRUE(NamesOfPid(broker.name(), child).empty());
  EXPECT_EQ(::kill(child, 0), 0) << "the owner died: the names went for another reason";
  ::kill(child, SIGCONT);
  ::kill(child, SIGKILL);
  EXPECT_EQ(testing::Wait(child), -SIGKILL);
  reaper.pid = -1;
  EXPECT_EQ(broker.Stop(), 0);
  EXPECT_TRUE(ShmNames(broker.name() + ".").empty());
}

// Dead peers are detected while the broker is down (docs/BROKER.md, "Broker
// outage and restart"): with the broker SIGKILLed, a producer process of
// topic "a" and a consumer process of topic "b" (holding 20 batches) are
// SIGKILLed. The consumer of "a" (this process) drains what was committed,
// then gets EndOfStream, "producer gone" (its own pid check); the
// producer of "b" (this process) gets back every block the dead consumer
// held and its registration (its channel's pid check) and publishes on.
// Then the broker restarts: the dead producer's segments are gone once it
// answers, the live producer re-registers, and once it closes nothing of
// the broker's name is left in /dev/shm while the broker is still up.
TEST(BrokerRestartTest, DeadPeersAreDetectedWhileTheBrokerIsDown) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  client::TopicOptions topic_options;
  topic_options.slot_count = 8;
  topic_options.arena_bytes = 1 << 20;
  {
    ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
    ASSERT_OK(admin->CreateTopic("a", SeqSchema(), topic_options).status());
    ASSERT_OK(admin->CreateTopic("b", SeqSchema(), topic_options).status());
  }
  client::ConsumerOptions consumer_options;
  consumer_options.socket_path = broker.socket();
  ASSERT_OK_AND_ASSIGN(auto consumer_a, Consumer::Open("a", consumer_options));
  int events[2];
  ASSERT_EQ(::pipe(events), 0);
  constexpr int64_t kPublishedA = 6;  // within the slots: the producer never waits
  const pid_t producer_a = testing::ForkTestChild();
  if (producer_a == 0) {
    client::ProducerOptions options;
    options.socket_path = broker.socket();
    options.topic = topic_options;
    auto producer = Producer::Open("a", SeqSchema(), options);
    if (!producer.ok()) ::_exit(1);
    for (int64_t i = 0; i < kPublishedA; ++i) {
      auto batch = SeqBatch(i);
      if (!batch.ok() || !(*producer)->PublishCopy(**batch).ok()) ::_exit(2);
    }
    if (::write(events[1], "p", 1) != 1) ::_exit(3);
    while (true) ::pause();
  }
  constexpr int64_t kHeld = 20;
  const pid_t consumer_b = testing::ForkTestChild();
  if (consumer_b == 0) {
    auto consumer = Consumer::Open("b", consumer_options);
    if (!consumer.ok()) ::_exit(1);
    std::vector<format::RecordBatchPtr> held;
    for (int64_t i = 0; i < kHeld; ++i) {
      auto batch = (*consumer)->Next(30s);
      if (!batch.ok()) ::_exit(2);
      held.push_back(*batch);
    }
    if (::write(events[1], "h", 1) != 1) ::_exit(3);
    while (true) ::pause();
  }
  // The first batch of "a" before the outage: looking for it, the consumer
  // learns of the producer and registers (the producer waits for that in
  // Open), so it gets every batch.
  ASSERT_OK_AND_ASSIGN(auto first, consumer_a->Next(30s));
  EXPECT_EQ(std::static_pointer_cast<format::Int64Array>(first->column(0))->Value(0), 0);
  ASSERT_TRUE(ReadByte(events[0], 30000)) << "producer of 'a' did not publish";
  ASSERT_TRUE(testing::WaitForConsumers(broker.socket(), "b", 1));
  client::ProducerOptions producer_options;
  producer_options.socket_path = broker.socket();
  producer_options.topic = topic_options;
  ASSERT_OK_AND_ASSIGN(auto producer_b, Producer::Open("b", SeqSchema(), producer_options));
  for (int64_t i = 0; i < kHeld; ++i) {
    ASSERT_OK_AND_ASSIGN(auto batch, SeqBatch(i));
    ASSERT_OK(producer_b->PublishCopy(*batch));
  }
  ASSERT_TRUE(ReadByte(events[0], 30000)) << "consumer of 'b' did not read";
  producer_b->Poll();
  const uint64_t live_while_held = producer_b->stats().blocks_live;
  EXPECT_GE(live_while_held, static_cast<uint64_t>(kHeld));

  broker.Kill();
  ASSERT_EQ(::kill(producer_a, SIGKILL), 0);
  ASSERT_EQ(::kill(consumer_b, SIGKILL), 0);
  EXPECT_EQ(testing::Wait(producer_a), -SIGKILL);
  EXPECT_EQ(testing::Wait(consumer_b), -SIGKILL);
  ASSERT_FALSE(BrokerClient::Connect(broker.socket()).ok());  // still down

  // The consumer drains what was committed, then learns the producer died.
  for (int64_t i = 1; i < kPublishedA; ++i) {
    ASSERT_OK_AND_ASSIGN(auto batch, consumer_a->Next(10s));
    EXPECT_EQ(std::static_pointer_cast<format::Int64Array>(batch->column(0))->Value(0), i);
  }
  auto end = consumer_a->Next(10s);
  EXPECT_EQ(end.status().code(), StatusCode::kEndOfStream) << end.status();
  EXPECT_NE(end.status().message().find("producer gone"), std::string::npos) << end.status();
  // The producer releases exactly what the dead consumer held, and its
  // registration: it publishes a channel's worth and more with nobody reading.
  EXPECT_TRUE(WaitUntil([&] {
    producer_b->Poll();
    return producer_b->stats().blocks_live <= topic_options.slot_count;
  })) << "blocks live: "
      << producer_b->stats().blocks_live << " (held: " << live_while_held << ")";
  EXPECT_EQ(producer_b->stats().dead_consumers_detached, 1u);
  for (int64_t i = kHeld; i < kHeld + int64_t{2} * topic_options.slot_count; ++i) {
    ASSERT_OK_AND_ASSIGN(auto batch, SeqBatch(i));
    ASSERT_OK(producer_b->PublishCopy(*batch));
  }

  // The broker comes back: the dead producer's names are gone when it
  // answers (its start-up sweep), the live producer re-registers.
  ASSERT_TRUE(broker.Start());
  EXPECT_TRUE(NamesOfPid(broker.name(), producer_a).empty());
  EXPECT_TRUE(WaitUntil([&] { return producer_b->stats().reregistrations >= 1; }));
  EXPECT_TRUE(TopicShows(broker.socket(), "b", 1, 0, 20000));
  ASSERT_OK(consumer_a->Close());
  ASSERT_OK(producer_b->Close());
  consumer_a.reset();
  producer_b.reset();
  // Nothing left, checked while the broker is up (its SIGTERM sweep would
  // hide a leak).
  EXPECT_TRUE(testing::WaitNoSegments(broker.name() + "."))
      << "left: " << ShmNames(broker.name() + ".").size() << " names";
  EXPECT_EQ(broker.Stop(), 0);
  ::close(events[0]);
  ::close(events[1]);
}

// Receives `count` messages with each of `a` and `b`, taking turns with
// TryNext (a consumer registers on a new producer's channel, and
// re-registers with a restarted broker, from its receive calls). False if
// it took longer than kHangMs or a receive failed.
bool ReadBoth(Consumer* a, Consumer* b, int count) {
  int got[2] = {0, 0};
  Consumer* consumers[2] = {a, b};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kHangMs);
  while (got[0] < count || got[1] < count) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    bool any = false;
    for (int k = 0; k < 2; ++k) {
      auto batch = consumers[k]->TryNext();
      if (!batch.ok()) return false;
      if (*batch == nullptr) continue;
      ++got[k];
      any = true;
    }
    if (!any) std::this_thread::sleep_for(1ms);
  }
  return got[0] == count && got[1] == count;
}

// Two consumers of one topic in one process (this one) keep figures of
// their own across a broker restart: each says the same token to the new
// broker as it wrote into its segment on the producer's channel, which the
// producer reports. Both read 10 messages before the outage; after it, the
// first reads 10 more and the second none. The restarted broker shows lag
// 0 and 10 and read bytes all of the producer's and half (docs/BROKER.md,
// "Watching it live").
TEST(BrokerRestartTest, TwoConsumersOfOneProcessKeepTheirOwnFiguresAcrossARestart) {
  BrokerProcess broker;
  ASSERT_TRUE(broker.Start());
  ASSERT_NO_FATAL_FAILURE(CreateSeqTopics(broker, {"pair"}));
  client::ConsumerOptions options;
  options.socket_path = broker.socket();
  ASSERT_OK_AND_ASSIGN(auto first, Consumer::Open("pair", options));
  ASSERT_OK_AND_ASSIGN(auto second, Consumer::Open("pair", options));
  // The producer publishes 10 messages, and 10 more after a byte on `go`;
  // idle, it polls (its reports go out) until a byte on `stop`.
  int go[2], stop[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(stop), 0);
  const pid_t producer_pid = testing::ForkTestChild();
  if (producer_pid == 0) {
    client::ProducerOptions producer_options;
    producer_options.socket_path = broker.socket();
    auto producer = Producer::Open("pair", SeqSchema(), producer_options);
    if (!producer.ok()) ::_exit(20);
    auto publish = [&](int64_t from) {
      for (int64_t seq = from; seq < from + 10; ++seq) {
        auto batch = SeqBatch(seq);
        if (!batch.ok() || !(*producer)->PublishCopy(**batch).ok()) ::_exit(21);
      }
    };
    publish(0);
    while (!ReadByte(go[0], 10)) (*producer)->Poll();
    publish(10);
    while (!ReadByte(stop[0], 10)) (*producer)->Poll();
    if ((*producer)->stats().reregistrations != 1) ::_exit(22);
    ::_exit((*producer)->Close().ok() ? 0 : 23);
  }
  ASSERT_TRUE(ReadBoth(first.get(), second.get(), 10));

  broker.Kill();
  ASSERT_TRUE(broker.Start());
  // Both consumers re-register from their receive calls.
  ASSERT_TRUE(WaitUntil([&] {
    (void)first->TryNext();
    (void)second->TryNext();
    return TopicShows(broker.socket(), "pair", 1, 2, 50);
  })) << "the producer and both consumers did not re-register";
  EXPECT_EQ(first->reregistrations(), 1u);
  EXPECT_EQ(second->reregistrations(), 1u);

  ASSERT_EQ(::write(go[1], "g", 1), 1);
  for (int i = 0; i < 10; ++i) ASSERT_OK(first->Next(20s).status());
  // The topic's own figures (whatever the matching) say when a report shows
  // the end: 20 published, the second's 10 unread bodies held.
  ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
  client::TopicStatus pair;
  ASSERT_TRUE(WaitUntil([&] {
    auto topics = admin->ListTopics();
    if (!topics.ok()) return false;
    for (const auto& t : *topics) {
      if (t.name == "pair") pair = t;
    }
    return pair.published == 20 && pair.held == 10 && pair.consumer_list.size() == 2 &&
           pair.consumer_list[0].reported && pair.consumer_list[1].reported;
  })) << "no report of the end";
  ASSERT_EQ(pair.producer_list.size(), 1u);
  const uint64_t published_bytes = pair.producer_list[0].published_bytes;
  EXPECT_GT(published_bytes, 0u);
  EXPECT_EQ(published_bytes % 20, 0u);  // equal bodies
  auto all = pair.consumer_list[0];
  auto half = pair.consumer_list[1];
  if (all.lag > half.lag) std::swap(all, half);
  EXPECT_EQ(all.pid, static_cast<uint32_t>(::getpid()));
  EXPECT_EQ(half.pid, static_cast<uint32_t>(::getpid()));
  EXPECT_EQ(all.lag, 0u);
  EXPECT_EQ(half.lag, 10u);
  EXPECT_EQ(all.read_bytes, published_bytes);
  EXPECT_EQ(half.read_bytes, published_bytes / 2);
  EXPECT_EQ(all.held_blocks, 0u);
  EXPECT_EQ(half.held_blocks, 10u);

  ASSERT_OK(first->Close());
  ASSERT_OK(second->Close());
  first.reset();
  second.reset();
  ASSERT_EQ(::write(stop[1], "s", 1), 1);
  EXPECT_EQ(testing::Wait(producer_pid), 0);
  EXPECT_TRUE(testing::WaitNoSegments(broker.name() + "."))
      << "left: " << ShmNames(broker.name() + ".").size() << " names";
  EXPECT_EQ(broker.Stop(), 0);
  for (int fd : {go[0], go[1], stop[0], stop[1]}) ::close(fd);
}

}  // namespace
}  // namespace alkaid::broker
