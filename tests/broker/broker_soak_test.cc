// The soak (label `soak`, not in the default run; CI runs it for a few
// minutes): for ALKAID_SOAK_SECONDS (default 180) a real alkaid-broker and
// producer and consumer child processes on two topics, one per slow-consumer
// policy, while at random moments (ALKAID_SOAK_SEED replays a run's choices)
//
// - producers are SIGKILLed and replaced by new ones;
// - consumers are SIGKILLed and stay dead for a while (their held blocks must
//   come back), or are stopped (SIGSTOP) and resumed later;
// - the broker is SIGKILLed and restarted;
// - /dev/shm is filled to the last byte and freed again (only in a private
//   tmpfs: broker_soak runs this binary through tests/fault/run_in_small_shm.sh,
//   which sets ALKAID_SOAK_FILL_SHM; a publish or an open that meets the full
//   /dev/shm fails with OutOfMemory and is retried).
//
// Each topic has a fast and a slow consumer (it sleeps holding each batch).
// Every message is (producer tag, sequence, padding whose length and bytes
// follow from both): a consumer checks each body it reads. At the end:
//
// - block-producer topic: from each producer it saw, a consumer received
//   consecutive sequences (exactly once, in order) up to the last the
//   producer committed;
// - drop-oldest topic: increasing sequences, each gap exactly the message's
//   lost_before, and the total equal to Consumer::lost(); the same end;
// - no stuck peer; the broker lists exactly the live peers;
// - every block back: once the consumers read everything, each producer sees
//   no body held by a consumer (dead ones included) and at most its slots'
//   own references live;
// - no /dev/shm name of the broker is left, with the broker up and after it
//   stopped.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/array.h"
#include "alkaid/format/builder_binary.h"
#include "alkaid/format/builder_primitive.h"
#include "broker_process.h"
#include "broker_test_util.h"
#include "shm_filler.h"
#include "test_util.h"

namespace alkaid::broker {
namespace {

using alkaid::testing::ShmFiller;
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
constexpr int kTopics = 2;  // 0: kBlockProducer, 1: kDropOldest
constexpr int kProducersPerTopic = 2;
const char* const kTopicNames[kTopics] = {"soak_block", "soak_drop"};
constexpr uint32_t kSlots[kTopics] = {64, 16};
// A slow consumer holds each batch this long before taking the next.
constexpr auto kSlowHold = 2ms;

// Shared with the children (MAP_SHARED before fork).
struct Shared {
  std::atomic<int64_t> published[kMaxTags];  // per producer tag: committed messages
  std::atomic<int64_t> received[kMaxTags];   // per consumer slot
  std::atomic<int64_t> retried[kMaxTags];    // per producer tag: publishes retried
  // Per consumer slot: producers it could not attach to (/dev/shm was full:
  // Next returns that once, and the consumer goes on without that producer).
  std::atomic<int64_t> unattached[kMaxTags];
  // Per consumer slot, for the report of a stuck one: open (1) or not (0),
  // the producers it reads, its last error other than TimedOut.
  std::atomic<int64_t> opened[kMaxTags];
  std::atomic<int64_t> producers_read[kMaxTags];
  std::atomic<int64_t> last_error[kMaxTags];
};

volatile sig_atomic_t g_stop = 0;
void OnTerm(int) { g_stop = 1; }

void InstallTerm() {
  struct sigaction action {};
  action.sa_handler = OnTerm;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
}

[[noreturn]] void Fail(int code, const std::string& what) {
  std::fprintf(stderr, "soak child %d: %s\n", static_cast<int>(::getpid()), what.c_str());
  ::_exit(code);
}

format::SchemaPtr SoakSchema() {
  return format::schema({format::field("producer", format::int64()),
                         format::field("seq", format::int64()),
                         format::field("pad", format::binary())});
}

client::TopicOptions SoakTopic(int topic) {
  client::TopicOptions t;
  t.slot_count = kSlots[topic];
  // A 4 KiB arena that grows: producers are killed, and /dev/shm is full,
  // while they add extensions.
  t.arena_bytes = 4096;
  t.max_arena_bytes = 4 << 20;
  t.policy =
      topic == 0 ? shm::SlowConsumerPolicy::kBlockProducer : shm::SlowConsumerPolicy::kDropOldest;
  return t;
}

// The padding of message (tag, seq): its length and every byte follow from
// both, so a consumer can tell a body that changed under it. Every 50th is
// 100-200 KB, more than the arena has: its loan adds an extension (or fails
// with OutOfMemory while /dev/shm is full).
int64_t PadLength(int64_t tag, int64_t seq) {
  const int64_t mix = tag * 7919 + seq * 31;
  return seq % 50 == 49 ? 100'000 + mix % 100'000 : mix % 3000;
}
uint8_t PadByte(int64_t tag, int64_t seq, int64_t i) {
  return static_cast<uint8_t>((tag * 13 + seq + i) & 0xff);
}

Result<format::RecordBatchPtr> Message(int64_t tag, int64_t seq) {
  format::Int64Builder a, b;
  format::BinaryBuilder pad;
  ALKAID_RETURN_NOT_OK(a.Append(tag));
  ALKAID_RETURN_NOT_OK(b.Append(seq));
  std::string bytes(static_cast<size_t>(PadLength(tag, seq)), '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<char>(PadByte(tag, seq, static_cast<int64_t>(i)));
  }
  ALKAID_RETURN_NOT_OK(pad.Append(bytes));
  ALKAID_ASSIGN_OR_RAISE(auto x, a.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto y, b.Finish());
  ALKAID_ASSIGN_OR_RAISE(auto z, pad.Finish());
  return format::RecordBatch::Make(SoakSchema(), 1, {x, y, z});
}

// A publish may fail, with nothing published, while the consumers hold it
// back (TimedOut) or /dev/shm is full (OutOfMemory): retried.
bool Retryable(const Status& st) {
  return st.code() == StatusCode::kTimedOut || st.code() == StatusCode::kOutOfMemory;
}

// A producer child: opens (retrying while the broker is away or /dev/shm is
// full), publishes (tag, 0), (tag, 1), ... until SIGTERM; then waits until
// the consumers returned every body, writes "count held blocks_live" and
// closes.
[[noreturn]] void RunProducer(const std::string& socket, int topic, int tag, Shared* shared,
                              const std::string& dir) {
  InstallTerm();
  client::ProducerOptions options;
  options.socket_path = socket;
  options.topic = SoakTopic(topic);
  options.publish_timeout = 2s;
  std::unique_ptr<Producer> producer;
  while (producer == nullptr) {
    if (g_stop) ::_exit(0);
    auto opened = Producer::Open(kTopicNames[topic], SoakSchema(), options);
    if (opened.ok()) {
      producer = std::move(*opened);
    } else {
      std::this_thread::sleep_for(20ms);
    }
  }
  std::minstd_rand pace(static_cast<uint32_t>(tag));
  int64_t seq = 0;
  while (!g_stop) {
    auto batch = Message(tag, seq);
    if (!batch.ok()) Fail(2, batch.status().ToString());
    const Status st = producer->PublishCopy(**batch);
    if (!st.ok()) {
      if (!Retryable(st)) Fail(3, "publish " + std::to_string(seq) + ": " + st.ToString());
      shared->retried[tag].fetch_add(1);
      std::this_thread::sleep_for(5ms);
      continue;
    }
    ++seq;
    shared->published[tag].store(seq);
    std::this_thread::sleep_for(std::chrono::microseconds(100 + pace() % 400));
  }
  // Every body back: the consumers (the live ones read to the end; the
  // dead ones' bits are cleared by the channel's pid checks in Poll).
  const auto deadline = Clock::now() + 60s;
  client::ProducerStats stats;
  do {
    producer->Poll();
    stats = producer->stats();
    if (stats.held_by_consumers == 0) break;
    std::this_thread::sleep_for(2ms);
  } while (Clock::now() < deadline);
  const Status st = producer->Close();
  if (!st.ok()) Fail(4, "close: " + st.ToString());
  std::ofstream(dir + "/p" + std::to_string(tag) + ".count")
      << seq << " " << stats.held_by_consumers << " " << stats.blocks_live << "\n";
  ::_exit(0);
}

struct Seen {
  int64_t first = -1;
  int64_t last = -1;
  int64_t batches = 0;
  int64_t gaps = 0;  // messages lost between first and last (drop-oldest: lost_before)
  // Messages skipped because they lay in an extension whose name the broker
  // had removed (its producer was dead) before this consumer mapped it.
  int64_t unmapped = 0;
};

// A gap this soak found, now closed: when a producer died, the broker removed
// its names at once, extensions included, and a consumer that had not mapped
// an extension yet (it maps one when a message first names it) could not read
// the committed messages there ("message N names extension K, which cannot be
// mapped" for each). The broker now keeps them until its consumers read the
// channel to its end (docs/BROKER.md, "A producer's death"). Such messages
// are still counted, so that the end says how many and whose, and any fails
// the soak. The pid of that producer, from the channel name in the error
// (<broker>.<instance>.<pid>.p<id>.channel); 0 if the error is another one.
uint32_t PidOfUnmappableExtension(const Status& st) {
  const std::string& m = st.message();
  if (st.code() != StatusCode::kInvalid || m.find("which cannot be mapped") == std::string::npos ||
      m.find("No such file or directory") == std::string::npos) {
    return 0;
  }
  const size_t channel = m.find(".channel'");
  if (channel == std::string::npos) return 0;
  const size_t p = m.rfind(".p", channel);
  if (p == std::string::npos || p == 0) return 0;
  const size_t dot = m.rfind('.', p - 1);
  if (dot == std::string::npos) return 0;
  const std::string digits = m.substr(dot + 1, p - dot - 1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  return static_cast<uint32_t>(std::stoul(digits));
}

// A consumer child: subscribes (retrying), checks each message's body and
// its sequence against the previous one of its producer, and on SIGTERM
// drains what is there and writes "tag first last batches gaps" lines and
// "lost <lost_before sum> <Consumer::lost()>".
[[noreturn]] void RunConsumer(const std::string& socket, int topic, int slot, bool slow,
                              Shared* shared, const std::string& dir) {
  InstallTerm();
  client::ConsumerOptions options;
  options.socket_path = socket;
  std::unique_ptr<Consumer> consumer;
  while (consumer == nullptr) {
    if (g_stop) ::_exit(0);
    // The topic may be gone with a killed broker: create it (same config).
    if (auto admin = BrokerClient::Connect(socket); admin.ok()) {
      (void)(*admin)->CreateTopic(kTopicNames[topic], SoakSchema(), SoakTopic(topic));
    }
    auto opened = Consumer::Open(kTopicNames[topic], options);
    if (opened.ok()) {
      consumer = std::move(*opened);
    } else {
      std::this_thread::sleep_for(20ms);
    }
  }
  shared->opened[slot].store(1);
  std::map<int64_t, Seen> seen;
  std::map<uint32_t, int64_t> tag_of_pid;
  std::map<int64_t, int64_t> unmappable;  // producer tag (-1: none seen yet) -> messages
  uint64_t lost_before_sum = 0;
  auto take = [&](const format::RecordBatch& batch, const client::BatchOrigin& origin) {
    const int64_t tag = std::static_pointer_cast<format::Int64Array>(batch.column(0))->Value(0);
    const int64_t seq = std::static_pointer_cast<format::Int64Array>(batch.column(1))->Value(0);
    const std::string_view pad =
        std::static_pointer_cast<format::BinaryArray>(batch.column(2))->GetView(0);
    const std::string where = "producer " + std::to_string(tag) + " seq " + std::to_string(seq);
    if (tag < 0 || tag >= kMaxTags || seq < 0) Fail(5, "a message of no producer: " + where);
    if (static_cast<int64_t>(pad.size()) != PadLength(tag, seq)) {
      Fail(5, where + ": padding of " + std::to_string(pad.size()) + " bytes");
    }
    if (slow) std::this_thread::sleep_for(kSlowHold);  // holding the block
    for (size_t i = 0; i < pad.size(); ++i) {
      if (static_cast<uint8_t>(pad[i]) != PadByte(tag, seq, static_cast<int64_t>(i))) {
        Fail(5, where + ": padding byte " + std::to_string(i) + " changed");
      }
    }
    lost_before_sum += origin.lost_before;
    tag_of_pid[origin.producer_pid] = tag;
    Seen& s = seen[tag];
    if (s.first >= 0) {
      const int64_t gap = seq - s.last - 1;
      const auto lost = static_cast<int64_t>(origin.lost_before);
      // Messages of this producer skipped as unmappable since the last one.
      const int64_t skipped = unmappable.count(tag) != 0 ? unmappable[tag] - s.unmapped : 0;
      if (topic == 0 && (lost != 0 || (skipped == 0 ? gap != 0 : gap < 0))) {
        Fail(5, where + " after " + std::to_string(s.last) + " (lost_before " +
                    std::to_string(lost) + ") on a block-producer topic");
      }
      if (topic == 1 && (skipped == 0 ? gap != lost : gap < lost)) {
        Fail(5, where + " after " + std::to_string(s.last) + " but lost_before " +
                    std::to_string(lost));
      }
      s.gaps += skipped == 0 ? gap : lost;
      s.unmapped += skipped;
    } else {
      s.first = seq;
    }
    s.last = seq;
    ++s.batches;
    shared->received[slot].fetch_add(1);
  };
  client::BatchOrigin origin;
  while (!g_stop) {
    auto batch = consumer->Next(100ms, &origin);
    shared->producers_read[slot].store(static_cast<int64_t>(consumer->producer_count()));
    if (batch.ok()) {
      take(**batch, origin);
      continue;
    }
    const StatusCode code = batch.status().code();
    if (code == StatusCode::kTimedOut) continue;
    shared->last_error[slot].store(static_cast<int64_t>(code));
    if (code == StatusCode::kEndOfStream) {  // new producers may still come
      std::this_thread::sleep_for(5ms);
      continue;
    }
    if (code == StatusCode::kOutOfMemory) {
      shared->unattached[slot].fetch_add(1);
      continue;
    }
    if (const uint32_t pid = PidOfUnmappableExtension(batch.status()); pid != 0) {
      auto known = tag_of_pid.find(pid);
      ++unmappable[known == tag_of_pid.end() ? -1 : known->second];
      continue;
    }
    Fail(6, "next: " + batch.status().ToString());
  }
  // Drain what is committed already.
  while (true) {
    auto batch = consumer->Next(0ns, &origin);
    if (!batch.ok()) break;
    take(**batch, origin);
  }
  std::ofstream out(dir + "/c" + std::to_string(slot) + ".seen");
  for (const auto& [tag, s] : seen) {
    // Those skipped after the last message received count too.
    const int64_t unmapped = unmappable.count(tag) != 0 ? unmappable[tag] : 0;
    out << tag << " " << s.first << " " << s.last << " " << s.batches << " " << s.gaps << " "
        << unmapped << "\n";
  }
  for (const auto& [tag, count] : unmappable) {
    if (seen.count(tag) == 0) out << "unmapped " << tag << " " << count << "\n";
  }
  out << "lost " << lost_before_sum << " " << consumer->lost() << "\n";
  out.close();
  (void)consumer->Close();
  ::_exit(0);
}

struct Child {
  int topic = 0;
  int id = 0;  // producer tag or consumer slot
  bool slow = false;
};

TEST(BrokerSoakTest, KillsStallsAndAFullDevShmKeepEveryPromise) {
  const uint64_t seed = static_cast<uint64_t>(
      EnvInt("ALKAID_SOAK_SEED",
             static_cast<int64_t>(Clock::now().time_since_epoch().count() & 0x7fffffff)));
  const int64_t seconds = EnvInt("ALKAID_SOAK_SECONDS", 180);
  bool fill_shm = EnvInt("ALKAID_SOAK_FILL_SHM", 0) != 0;
  if (fill_shm) {
    // Only a small private tmpfs is ever filled, never a host's /dev/shm.
    struct statvfs fs {};
    ASSERT_EQ(::statvfs("/dev/shm", &fs), 0);
    const uint64_t bytes = static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
    ASSERT_LE(bytes, uint64_t{256} << 20) << "ALKAID_SOAK_FILL_SHM is set but /dev/shm is " << bytes
                                          << " bytes: run through tests/fault/run_in_small_shm.sh";
  }
  std::printf("[ soak     ] seed %llu, %lld s, /dev/shm %s (replay: ALKAID_SOAK_SEED=%llu)\n",
              static_cast<unsigned long long>(seed), static_cast<long long>(seconds),
              fill_shm ? "filled and freed" : "not filled", static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  std::mt19937_64 rng(seed);

  void* memory =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  auto* shared = new (memory) Shared();
  BrokerProcess broker("bk" + testing::UniqueSuffix());
  // The leftovers a restarted broker keeps for a while (channels of live
  // producers for re-adoption, extensions of dead ones for their consumers,
  // whom it does not know) are gone within the no-leak check's wait.
  const std::vector<std::string> broker_args = {
      "--shm-limit", "0", "--adopt-timeout", "10", "--dead-producer-drain", "10"};
  ASSERT_TRUE(broker.Start(broker_args));
  const std::string dir = "/tmp/alkaid-test-" + broker.name();
  std::filesystem::create_directories(dir);
  {
    ASSERT_OK_AND_ASSIGN(auto admin, BrokerClient::Connect(broker.socket()));
    for (int t = 0; t < kTopics; ++t) {
      ASSERT_OK(admin->CreateTopic(kTopicNames[t], SoakSchema(), SoakTopic(t)).status());
    }
  }
  ShmFiller filler("soakfill" + std::to_string(::getpid()));

  int next_tag = 0;
  int next_slot = 0;
  std::map<pid_t, Child> producers;
  std::map<pid_t, Child> consumers;
  std::vector<Child> dead_consumers;  // killed, to be replaced later
  std::vector<pid_t> killed_consumer_pids;
  std::set<pid_t> stopped;     // SIGSTOPped consumers
  std::map<int, Child> slots;  // every consumer slot ever
  std::vector<std::string> failures;
  struct KillLeftovers {
    std::map<pid_t, Child>* groups[2];
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
  auto spawn_producer = [&](int topic) {
    Child child{topic, next_tag++, false};
    const pid_t pid = testing::ForkTestChild();
    if (pid == 0) RunProducer(broker.socket(), topic, child.id, shared, dir);
    producers[pid] = child;
  };
  auto spawn_consumer = [&](int topic, bool slow) {
    Child child{topic, next_slot++, slow};
    const pid_t pid = testing::ForkTestChild();
    if (pid == 0) RunConsumer(broker.socket(), topic, child.id, slow, shared, dir);
    consumers[pid] = child;
    slots[child.id] = child;
  };
  for (int t = 0; t < kTopics; ++t) {
    spawn_consumer(t, false);
    spawn_consumer(t, true);
  }
  for (int t = 0; t < kTopics; ++t) {
    for (int i = 0; i < kProducersPerTopic; ++i) spawn_producer(t);
  }
  auto pick = [&](std::map<pid_t, Child>& group) {
    return std::next(group.begin(), static_cast<long>(rng() % group.size()));
  };

  std::map<std::string, int> events;
  // SIGKILLs a producer picked at random and starts another on its topic.
  auto kill_a_producer = [&] {
    auto it = pick(producers);
    const int topic = it->second.topic;
    ::kill(it->first, SIGKILL);
    testing::Wait(it->first);
    producers.erase(it);
    ++events["producer killed"];
    spawn_producer(topic);
  };
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < end && failures.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng() % 350));
    // Nobody may have died on its own (a child's check failed, or it broke).
    for (auto* group : {&producers, &consumers}) {
      for (auto it = group->begin(); it != group->end();) {
        if (auto code = Exited(it->first)) {
          failures.push_back("pid " + std::to_string(it->first) + " (" +
                             (group == &producers ? "producer " : "consumer ") +
                             std::to_string(it->second.id) + ") exited by itself (" +
                             std::to_string(*code) + ")");
          it = group->erase(it);
        } else {
          ++it;
        }
      }
    }
    // Dead consumers come back after a while, stopped ones resume.
    for (auto it = dead_consumers.begin(); it != dead_consumers.end();) {
      if (rng() % 4 == 0) {
        spawn_consumer(it->topic, it->slow);
        it = dead_consumers.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = stopped.begin(); it != stopped.end();) {
      if (rng() % 2 == 0) {
        ::kill(*it, SIGCONT);
        it = stopped.erase(it);
      } else {
        ++it;
      }
    }
    const uint64_t what = rng() % 16;  // 6 of 16: nothing happens
    if (what < 3 && !producers.empty()) {
      kill_a_producer();
    } else if (what < 5 && !consumers.empty()) {
      auto it = pick(consumers);
      ::kill(it->first, SIGKILL);
      testing::Wait(it->first);
      stopped.erase(it->first);
      dead_consumers.push_back(it->second);
      killed_consumer_pids.push_back(it->first);
      consumers.erase(it);
      ++events["consumer killed"];
    } else if (what < 7 && !consumers.empty()) {
      auto it = pick(consumers);
      if (stopped.insert(it->first).second) {
        ::kill(it->first, SIGSTOP);
        ++events["consumer stopped"];
      }
    } else if (what < 8) {
      broker.Kill();
      ++events["broker killed"];
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 100));
      if (!broker.Start(broker_args)) failures.push_back("the broker did not restart");
    } else if (what < 10 && fill_shm) {
      if (filler.full()) {
        filler.Free();
        ++events["/dev/shm freed"];
      } else {
        const int64_t taken = filler.Fill();
        if (taken < 0) failures.push_back("cannot create the filler in /dev/shm");
        ++events["/dev/shm filled"];
      }
    }
  }
  // Calm before the checks: everyone resumes, /dev/shm has room, the dead
  // consumers come back (the blocks they held must have come back already).
  filler.Free();
  for (pid_t pid : stopped) ::kill(pid, SIGCONT);
  stopped.clear();
  for (const Child& dead : dead_consumers) spawn_consumer(dead.topic, dead.slow);
  dead_consumers.clear();
  // One more producer SIGKILLed with the broker up since its last restart:
  // the no-leak check then needs the broker to remove a dead producer's
  // names itself.
  if (failures.empty() && !producers.empty()) kill_a_producer();
  std::string summary;
  for (const auto& [name, count] : events)
    summary += " " + std::to_string(count) + " " + name + ",";
  std::printf("[ soak     ] survived:%s\n", summary.c_str());
  ASSERT_TRUE(failures.empty()) << failures.front();

  // No stuck peer: every live producer and consumer makes progress again
  // (a condition; the bound only ends a hang).
  {
    std::map<int, int64_t> before_p, before_c;
    for (const auto& [pid, c] : producers) before_p[c.id] = shared->published[c.id].load();
    for (const auto& [pid, c] : consumers) before_c[c.id] = shared->received[c.id].load();
    auto stuck = [&] {
      std::vector<std::string> names;
      for (const auto& [pid, c] : producers) {
        if (shared->published[c.id].load() <= before_p[c.id]) {
          names.push_back("producer " + std::to_string(c.id));
        }
      }
      for (const auto& [pid, c] : consumers) {
        if (shared->received[c.id].load() <= before_c[c.id]) {
          names.push_back("consumer " + std::to_string(c.id) + " (pid " + std::to_string(pid) +
                          ", " + kTopicNames[c.topic] + (c.slow ? ", slow" : "") +
                          (shared->opened[c.id].load() != 0 ? ", open" : ", not open") +
                          ", reads " + std::to_string(shared->producers_read[c.id].load()) +
                          " producers, last error code " +
                          std::to_string(shared->last_error[c.id].load()) + ")");
        }
      }
      return names;
    };
    testing::WaitUntil([&] { return stuck().empty(); }, 60s);
    for (const auto& name : stuck()) ADD_FAILURE() << name << " stuck";
  }

  // The broker (restarted many times) lists exactly the live peers.
  std::map<std::string, std::pair<uint32_t, uint32_t>> expected;
  for (const auto& [pid, c] : producers) ++expected[kTopicNames[c.topic]].first;
  for (const auto& [pid, c] : consumers) ++expected[kTopicNames[c.topic]].second;
  std::string listed;
  const bool registered = testing::WaitUntil([&] {
    auto admin = BrokerClient::Connect(broker.socket());
    if (!admin.ok()) return false;
    auto topics = (*admin)->ListTopics();
    if (!topics.ok()) return false;
    listed.clear();
    int matching = 0;
    for (const auto& t : *topics) {
      listed += " " + t.name + ": " + std::to_string(t.producers) + "p " +
                std::to_string(t.consumers) + "c";
      auto want = expected.find(t.name);
      if (want != expected.end() && want->second.first == t.producers &&
          want->second.second == t.consumers) {
        ++matching;
      }
    }
    return matching == static_cast<int>(expected.size());
  });
  EXPECT_TRUE(registered) << "the broker lists" << listed;

  // Stop the producers: each waits until every body is back, then closes
  // (end of stream after its consumers read everything); then the consumers.
  for (const auto& [pid, c] : producers) ::kill(pid, SIGTERM);
  for (const auto& [pid, c] : producers) {
    const auto code = WaitFor(pid, 90s);
    EXPECT_TRUE(code.has_value() && *code == 0)
        << "producer " << c.id << ": " << (code ? std::to_string(*code) : "stuck");
  }
  for (const auto& [pid, c] : consumers) ::kill(pid, SIGTERM);
  for (const auto& [pid, c] : consumers) {
    const auto code = WaitFor(pid, 30s);
    EXPECT_TRUE(code.has_value() && *code == 0)
        << "consumer " << c.id << ": " << (code ? std::to_string(*code) : "stuck");
  }

  // What each producer committed: its final count if it closed (and what
  // it saw held then), what it had published when killed otherwise.
  std::map<int, int64_t> final_count;
  for (const auto& [pid, c] : producers) {
    std::ifstream in(dir + "/p" + std::to_string(c.id) + ".count");
    int64_t count = 0, held = 0, live = 0;
    ASSERT_TRUE(in >> count >> held >> live) << "producer " << c.id << " wrote no count";
    final_count[c.id] = count;
    EXPECT_EQ(held, 0) << "producer " << c.id << " (" << kTopicNames[c.topic]
                       << "): bodies never returned by its consumers; its last message, "
                       << count - 1 << ", has " << PadLength(c.id, count - 1)
                       << " bytes of padding";
    if (held != 0) {
      // A channel tells a dead consumer by its pid (docs/SHM_LAYOUT.md,
      // "Known limitations"): one reused since reads as alive.
      std::string reused;
      for (pid_t dead : killed_consumer_pids) {
        if (::kill(dead, 0) == 0) reused += " " + std::to_string(dead);
      }
      ADD_FAILURE() << "pids of killed consumers that run again (reused):"
                    << (reused.empty() ? " none" : reused);
    }
    EXPECT_LE(live, kSlots[c.topic])
        << "producer " << c.id << ": more blocks live than its slots reference";
  }
  int64_t retried = 0, unattached = 0;
  for (int tag = 0; tag < next_tag; ++tag) retried += shared->retried[tag].load();
  for (int slot = 0; slot < next_slot; ++slot) unattached += shared->unattached[slot].load();
  int streams = 0;
  int streams_with_unmapped = 0;
  int64_t unmapped = 0;
  int64_t batches[kTopics] = {0, 0};
  int64_t gaps = 0;
  for (const auto& [pid, c] : consumers) {
    std::ifstream in(dir + "/c" + std::to_string(c.id) + ".seen");
    ASSERT_TRUE(in.good()) << "consumer " << c.id << " wrote no results";
    std::string word;
    while (in >> word) {
      if (word == "lost") {
        uint64_t sum = 0, lost = 0;
        in >> sum >> lost;
        EXPECT_EQ(sum, lost) << "consumer " << c.id << ": lost_before sum vs lost()";
        continue;
      }
      if (word == "unmapped") {  // of a producer none of whose messages came
        int64_t tag = 0, count = 0;
        in >> tag >> count;
        unmapped += count;
        EXPECT_TRUE(tag == -1 || final_count.count(static_cast<int>(tag)) == 0)
            << "consumer " << c.id << ": " << count << " messages of live producer " << tag
            << " in an extension it could not map";
        continue;
      }
      const int64_t tag = std::stoll(word);
      int64_t first = 0, last = 0, count = 0, gap = 0, skipped = 0;
      in >> first >> last >> count >> gap >> skipped;
      SCOPED_TRACE("consumer " + std::to_string(c.id) + " (" + kTopicNames[c.topic] +
                   "), producer " + std::to_string(tag));
      batches[c.topic] += count;
      gaps += gap;
      unmapped += skipped;
      auto closed = final_count.find(static_cast<int>(tag));
      if (closed != final_count.end()) {
        // A producer that lived to the end: nothing may have been unmappable.
        EXPECT_EQ(skipped, 0) << "messages of a live producer in an extension not mappable";
        EXPECT_EQ(count + gap, last - first + 1);
        EXPECT_EQ(last, closed->second - 1) << "missed the end of a closed producer";
      } else if (skipped == 0) {
        EXPECT_EQ(count + gap, last - first + 1);
        const int64_t committed = shared->published[tag].load();
        EXPECT_TRUE(last == committed - 1 || last == committed)
            << "killed producer committed " << committed << ", consumer ended at " << last;
      } else {
        // A killed producer whose extension went before this consumer mapped
        // it (counted, a failure below): in order, no duplicates, the
        // unmappable ones skipped, from any of them on (the tail too).
        ++streams_with_unmapped;
        EXPECT_LE(count + gap, last - first + 1);
        EXPECT_LE(last, shared->published[tag].load());
      }
      ++streams;
    }
  }
  std::printf(
      "[ soak     ] %d (consumer, producer) streams checked: %lld batches exactly once "
      "(block-producer), %lld in order with %lld counted lost (drop-oldest); %lld publishes "
      "retried; %lld attachments refused for a full /dev/shm; %d producers, %zu consumer "
      "processes\n"
      "[ soak     ] unreadable: %lld messages of killed producers (their extension removed "
      "before it was mapped; must be 0) in %d streams\n",
      streams, static_cast<long long>(batches[0]), static_cast<long long>(batches[1]),
      static_cast<long long>(gaps), static_cast<long long>(retried),
      static_cast<long long>(unattached), next_tag, slots.size(), static_cast<long long>(unmapped),
      streams_with_unmapped);
  EXPECT_GT(batches[0], 0);
  EXPECT_GT(batches[1], 0);
  EXPECT_EQ(unmapped, 0) << "messages of killed producers lost with their extensions, in "
                         << streams_with_unmapped << " streams";

  // No leak, with the broker still up (its SIGTERM sweep would hide one).
  if (!testing::WaitNoSegments(broker.name() + ".")) {
    std::string leaked;
    for (const auto& name : ShmNames(broker.name() + ".")) leaked += " " + name;
    ADD_FAILURE() << "leaked with the broker up:" << leaked;
  }
  EXPECT_EQ(broker.Stop(), 0);
  EXPECT_TRUE(ShmNames(broker.name() + ".").empty());
  EXPECT_TRUE(ShmNames("soakfill").empty());
  std::filesystem::remove_all(dir);
  ::munmap(memory, sizeof(Shared));
}

}  // namespace
}  // namespace alkaid::broker
