// A loop of random SIGKILLs (default 200; ALKAID_STRESS_KILLS scales it,
// ALKAID_STRESS_SEED replays a run): producers, consumers and the broker
// itself are killed at random moments and replaced, while every message
// carries (producer tag, sequence number). At the end:
//
// - every consumer that survived received, from each producer it saw,
//   consecutive sequence numbers (nothing lost, nothing twice, in order),
//   up to the last message that producer committed (its final count if it
//   was closed, the count it had published when killed otherwise);
// - no peer is stuck: every live producer and consumer still makes
//   progress before the end, and every one stops when asked;
// - the broker lists exactly the live producers and consumers (every
//   survivor re-registered after the broker's restarts);
// - no /dev/shm object of the broker is left while it is still up (every
//   producer closed, or was removed by the broker when it died), nor after
//   its clean shutdown.
//
// Slow-consumer policy: kBlockProducer (no message may be dropped). A consumer killed
// while holding a received batch leaves that block's holder bit set; the
// producers' channels notice the dead pid when they wait for room or space
// (and in Poll) and release exactly what it held, so a dead consumer never
// holds a producer back (shown exactly by
// ChannelReclaimsExactlyWhatAKilledConsumerHeld and HeldBatchesTest).

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_primitive.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using client::BrokerClient;
using client::Consumer;
using client::Producer;
using testing::BrokerProcess;
using testing::EnvInt;
using testing::Exited;
using testing::ShmNames;
using testing::WaitFor;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kMaxTags = 4096;
constexpr int kProducers = 2;
constexpr int kConsumers = 3;
const char* const kTopic = "stress";

// Shared with the children (MAP_SHARED before fork): per producer tag the
// messages it has published (committed), per consumer slot how many
// messages it has received.
struct Shared {
  std::atomic<int64_t> published[kMaxTags];
  std::atomic<int64_t> received[kMaxTags];
};

volatile sig_atomic_t g_stop = 0;
void OnTerm(int) { g_stop = 1; }

format::SchemaPtr StressSchema() {
  return format::schema(
      {format::field("producer", format::int64()), format::field("seq", format::int64())});
}

client::TopicOptions StressTopic() {
  client::TopicOptions t;
  t.slot_count = 256;
  // A 4 KiB arena that grows (up to 16 MiB) as messages are in flight:
  // producers are killed while they add extensions too.
  t.arena_bytes = 4096;
  t.max_arena_bytes = 16 << 20;
  t.policy = shm::SlowConsumerPolicy::kBlockProducer;
  return t;
}

Result<format::RecordBatchPtr> Message(int64_t tag, int64_t seq) {
  format::Int64Builder a, b;
  ALKAID_RETURN_NOT_OK(a.Append(tag));
  ALKAID_RETURN_NOT_OK(b.Append(seq));
  ALKAID_ASSIGN_OR_RAISE(auto x, a.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto y, b.Finish());
  return format::RecordBatch::Make(StressSchema(), 1, {x, y});
}

void InstallTerm() {
  struct sigaction action {};
  action.sa_handler = OnTerm;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
}

[[noreturn]] void Fail(int code, const std::string& what) {
  std::fprintf(stderr, "stress child %d: %s\n", static_cast<int>(::getpid()), what.c_str());
  ::_exit(code);
}

// A producer child: opens (retrying while the broker is away), publishes
// (tag, 0), (tag, 1), ... until SIGTERM, closes, writes its final count.
[[noreturn]] void RunProducer(const std::string& socket, int tag, Shared* shared,
                              const std::string& dir) {
  InstallTerm();
  client::ProducerOptions options;
  options.socket_path = socket;
  options.topic = StressTopic();
  options.publish_timeout = 10s;
  std::unique_ptr<Producer> producer;
  while (producer == nullptr) {
    if (g_stop) ::_exit(0);
    auto opened = Producer::Open(kTopic, StressSchema(), options);
    if (opened.ok()) {
      producer = std::move(*opened);
    } else {
      std::this_thread::sleep_for(20ms);
    }
  }
  int64_t seq = 0;
  while (!g_stop) {
    auto batch = Message(tag, seq);
    if (!batch.ok()) Fail(2, batch.status().ToString());
    const Status st = producer->PublishCopy(**batch);
    if (!st.ok()) Fail(3, "publish " + std::to_string(seq) + ": " + st.ToString());
    ++seq;
    shared->published[tag].store(seq);
    std::this_thread::sleep_for(500us);
  }
  const Status st = producer->Close();
  if (!st.ok()) Fail(4, "close: " + st.ToString());
  std::ofstream(dir + "/p" + std::to_string(tag) + ".count") << seq << "\n";
  ::_exit(0);
}

struct Seen {
  int64_t first = -1;
  int64_t last = -1;
};

// A consumer child: subscribes (retrying), checks every message against
// the previous one of the same producer, and on SIGTERM drains what is
// there and writes "tag first last" lines.
[[noreturn]] void RunConsumer(const std::string& socket, int slot, Shared* shared,
                              const std::string& dir) {
  InstallTerm();
  client::ConsumerOptions options;
  options.socket_path = socket;
  std::unique_ptr<Consumer> consumer;
  while (consumer == nullptr) {
    if (g_stop) ::_exit(0);
    // The topic may be gone with a killed broker: create it (same config).
    if (auto admin = BrokerClient::Connect(socket); admin.ok()) {
      (void)(*admin)->CreateTopic(kTopic, StressSchema(), StressTopic());
    }
    auto opened = Consumer::Open(kTopic, options);
    if (opened.ok()) {
      consumer = std::move(*opened);
    } else {
      std::this_thread::sleep_for(20ms);
    }
  }
  std::map<int64_t, Seen> seen;
  auto take = [&](const format::RecordBatch& batch) {
    const int64_t tag = std::static_pointer_cast<format::Int64Array>(batch.column(0))->Value(0);
    const int64_t seq = std::static_pointer_cast<format::Int64Array>(batch.column(1))->Value(0);
    Seen& s = seen[tag];
    if (s.first < 0) {
      s.first = seq;
    } else if (seq != s.last + 1) {
      Fail(5, "producer " + std::to_string(tag) + ": got " + std::to_string(seq) + " after " +
                  std::to_string(s.last));
    }
    s.last = seq;
    shared->received[slot].fetch_add(1);
  };
  while (!g_stop) {
    auto batch = consumer->Next(100ms);
    if (batch.ok()) {
      take(**batch);
      continue;
    }
    const StatusCode code = batch.status().code();
    if (code == StatusCode::kTimedOut) continue;
    if (code == StatusCode::kEndOfStream) {  // new producers may still come
      std::this_thread::sleep_for(5ms);
      continue;
    }
    Fail(6, "next: " + batch.status().ToString());
  }
  // Drain what is committed already.
  while (true) {
    auto batch = consumer->TryNext();
    if (!batch.ok() || *batch == nullptr) break;
    take(**batch);
  }
  std::ofstream out(dir + "/c" + std::to_string(slot) + ".seen");
  for (const auto& [tag, s] : seen) out << tag << " " << s.first << " " << s.last << "\n";
  out.close();
  (void)consumer->Close();
  ::_exit(0);
}

TEST(BrokerStressTest, RandomSigkillsKeepExactlyOnceInOrder) {
  const uint64_t seed = static_cast<uint64_t>(
      EnvInt("ALKAID_STRESS_SEED",
             static_cast<int64_t>(Clock::now().time_since_epoch().count() & 0x7fffffff)));
  const int64_t kills = EnvInt("ALKAID_STRESS_KILLS", 200);
  std::printf("[ stress   ] seed %llu, %lld kills (replay: ALKAID_STRESS_SEED=%llu)\n",
              static_cast<unsigned long long>(seed), static_cast<long long>(kills),
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  std::mt19937_64 rng(seed);

  void* memory =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  auto* shared = new (memory) Shared();
  BrokerProcess broker("bs" + testing::UniqueSuffix());
  ASSERT_TRUE(
      broker.Start({"--shm-limit", "0", "--adopt-timeout", "10", "--dead-producer-drain", "10"}));
  const std::string dir = "/tmp/alkaid-test-" + broker.name();
  std::filesystem::create_directories(dir);
  {
    ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
    ASSERT_OK(admin->CreateTopic(kTopic, StressSchema(), StressTopic()).status());
  }

  int next_tag = 0;
  int next_slot = 0;
  std::map<pid_t, int> producers;  // pid -> tag
  std::map<pid_t, int> consumers;  // pid -> slot
  std::vector<std::string> failures;
  // However the test ends (a failed ASSERT returns early), no child is left
  // running: a leftover would hold ctest's output pipe open until its
  // timeout. waitpid(WNOHANG) returns 0 only for a child of ours still
  // running; reaped or not ours, it is left alone.
  struct KillLeftovers {
    std::map<pid_t, int>* groups[2];
    ~KillLeftovers() {
      for (auto* group : groups) {
        for (const auto& entry : *group) {
          if (::waitpid(entry.first, nullptr, WNOHANG) == 0) {
            ::kill(entry.first, SIGKILL);
            ::waitpid(entry.first, nullptr, 0);
          }
        }
      }
    }
  } kill_leftovers{{&producers, &consumers}};
  auto spawn_producer = [&] {
    const int tag = next_tag++;
    const pid_t pid = testing::ForkTestChild();
    if (pid == 0) RunProducer(broker.socket(), tag, shared, dir);
    producers[pid] = tag;
  };
  auto spawn_consumer = [&] {
    const int slot = next_slot++;
    const pid_t pid = testing::ForkTestChild();
    if (pid == 0) RunConsumer(broker.socket(), slot, shared, dir);
    consumers[pid] = slot;
  };
  for (int i = 0; i < kConsumers; ++i) spawn_consumer();
  for (int i = 0; i < kProducers; ++i) spawn_producer();

  std::map<std::string, int> killed;
  std::set<int> killed_consumer_slots;
  for (int64_t k = 0; k < kills && failures.empty(); ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 130));
    // Nobody may have died on its own.
    for (auto* group : {&producers, &consumers}) {
      for (auto it = group->begin(); it != group->end();) {
        if (auto code = Exited(it->first)) {
          failures.push_back("pid " + std::to_string(it->first) + " exited by itself (" +
                             std::to_string(*code) + ")");
          it = group->erase(it);
        } else {
          ++it;
        }
      }
    }
    const uint64_t pick = rng() % 10;
    if (pick < 4 && !producers.empty()) {
      auto it = std::next(producers.begin(), static_cast<long>(rng() % producers.size()));
      ::kill(it->first, SIGKILL);
      testing::Wait(it->first);
      producers.erase(it);
      ++killed["producer"];
      spawn_producer();
    } else if (pick < 8 && !consumers.empty()) {
      auto it = std::next(consumers.begin(), static_cast<long>(rng() % consumers.size()));
      ::kill(it->first, SIGKILL);
      testing::Wait(it->first);
      killed_consumer_slots.insert(it->second);
      consumers.erase(it);
      ++killed["consumer"];
      spawn_consumer();
    } else {
      broker.Kill();
      ++killed["broker"];
      // Down for a random moment, then back.
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 100));
      if (!broker.Start(
              {"--shm-limit", "0", "--adopt-timeout", "10", "--dead-producer-drain", "10"})) {
        failures.push_back("the broker did not restart");
      }
    }
  }
  // One more producer SIGKILLed, with the broker up since its last restart:
  // the no-leak check below then needs the broker to remove a dead
  // producer's names itself (a restarted broker would also sweep leftovers).
  if (failures.empty() && !producers.empty()) {
    auto it = std::next(producers.begin(), static_cast<long>(rng() % producers.size()));
    ::kill(it->first, SIGKILL);
    testing::Wait(it->first);
    producers.erase(it);
    ++killed["producer"];
    spawn_producer();
  }
  std::printf("[ stress   ] killed %d producers, %d consumers, the broker %d times\n",
              killed["producer"], killed["consumer"], killed["broker"]);
  ASSERT_TRUE(failures.empty()) << failures.front();

  // No stuck peer: every live producer and consumer makes progress again
  // (a condition, polled; the bound only ends a hang).
  {
    std::map<int, int64_t> before_p, before_c;
    for (const auto& [pid, tag] : producers) before_p[tag] = shared->published[tag].load();
    for (const auto& [pid, slot] : consumers) before_c[slot] = shared->received[slot].load();
    const auto deadline = Clock::now() + 60s;
    auto stuck = [&] {
      std::vector<std::string> names;
      for (const auto& [pid, tag] : producers) {
        if (shared->published[tag].load() <= before_p[tag]) {
          names.push_back("producer " + std::to_string(tag));
        }
      }
      for (const auto& [pid, slot] : consumers) {
        if (shared->received[slot].load() <= before_c[slot]) {
          names.push_back("consumer " + std::to_string(slot));
        }
      }
      return names;
    };
    while (!stuck().empty() && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
    for (const auto& name : stuck()) ADD_FAILURE() << name << " stuck";
  }

  // The broker (restarted many times) knows exactly the live peers again:
  // every survivor re-registered, no dead one lingers.
  bool registered = false;
  for (int i = 0; i < 250 && !registered; ++i) {
    if (auto admin = BrokerClient::Connect(broker.socket()); admin.ok()) {
      if (auto topics = (*admin)->ListTopics(); topics.ok()) {
        for (const auto& t : *topics) {
          registered = registered || (t.name == kTopic && t.producers == producers.size() &&
                                      t.consumers == consumers.size());
        }
      }
    }
    if (!registered) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(registered) << "the broker does not list " << producers.size() << " producers and "
                          << consumers.size() << " consumers";

  // Stop producers (each closes: end of stream after its consumers read
  // everything), then consumers.
  for (const auto& [pid, tag] : producers) ::kill(pid, SIGTERM);
  for (const auto& [pid, tag] : producers) {
    const auto code = WaitFor(pid, 15s);
    EXPECT_TRUE(code.has_value() && *code == 0)
        << "producer " << tag << ": " << (code ? std::to_string(*code) : "stuck");
  }
  for (const auto& [pid, slot] : consumers) ::kill(pid, SIGTERM);
  for (const auto& [pid, slot] : consumers) {
    const auto code = WaitFor(pid, 15s);
    EXPECT_TRUE(code.has_value() && *code == 0)
        << "consumer " << slot << ": " << (code ? std::to_string(*code) : "stuck");
  }

  // What each producer committed: its final count if it closed, what it
  // had published when killed otherwise (the one in flight may have been
  // committed too).
  std::map<int, int64_t> final_count;
  for (int tag = 0; tag < next_tag; ++tag) {
    std::ifstream in(dir + "/p" + std::to_string(tag) + ".count");
    int64_t count = 0;
    if (in >> count) final_count[tag] = count;
  }
  int checked = 0;
  int64_t messages = 0;
  for (const auto& [pid, slot] : consumers) {
    std::ifstream in(dir + "/c" + std::to_string(slot) + ".seen");
    ASSERT_TRUE(in.good()) << "consumer " << slot << " wrote no results";
    int64_t tag = 0, first = 0, last = 0;
    while (in >> tag >> first >> last) {
      SCOPED_TRACE("consumer " + std::to_string(slot) + ", producer " + std::to_string(tag));
      messages += last - first + 1;
      auto closed = final_count.find(static_cast<int>(tag));
      if (closed != final_count.end()) {
        EXPECT_EQ(last, closed->second - 1) << "missed the end of a closed producer";
      } else {
        const int64_t committed = shared->published[tag].load();
        EXPECT_TRUE(last == committed - 1 || last == committed)
            << "killed producer committed " << committed << ", consumer ended at " << last;
      }
      ++checked;
    }
  }
  std::printf("[ stress   ] %d (consumer, producer) streams checked, %lld messages\n", checked,
              static_cast<long long>(messages));
  EXPECT_GT(checked, 0);

  // No leak, while the broker is still up (its SIGTERM sweep would hide
  // one): every producer closed or was removed by the broker when it died,
  // and with it the segments of its consumers, dead ones included.
  if (!testing::WaitNoSegments(broker.name() + ".")) {
    std::string leaked;
    for (const auto& name : ShmNames(broker.name() + ".")) leaked += " " + name;
    ADD_FAILURE() << "leaked with the broker up:" << leaked;
  }
  EXPECT_EQ(broker.Stop(), 0);
  EXPECT_TRUE(ShmNames(broker.name() + ".").empty());
  std::filesystem::remove_all(dir);
  ::munmap(memory, sizeof(Shared));
}

}  // namespace
}  // namespace alkaid::broker
