// What an idle topic costs on a broker with default options: N topics,
// each with a default producer (which published one small batch) and a
// consumer (which received it), held in two processes (all producers in
// one, all consumers in the other). Measured twice, with 1 topic and with
// N, so that what the processes cost whatever the topics cancels:
//   - /dev/shm bytes in use (statvfs of /dev/shm) per extra topic;
//   - proportional set size (PSS, /proc/<pid>/smaps_rollup) of the broker
//     and the two processes per extra topic.
//
//   alkaid_idle_topics_bench --socket PATH [--topics N]
//
// The broker at PATH must be running (a default alkaid-broker) and idle.

#include <signal.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/builder.h"

namespace {

using namespace alkaid;
using namespace std::chrono_literals;

uint64_t ShmUsedBytes() {
  struct statvfs vfs {};
  if (::statvfs("/dev/shm", &vfs) != 0) return 0;
  return static_cast<uint64_t>(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
}

// Pss of `pid` in bytes (smaps_rollup's "Pss:" line, in kB).
uint64_t PssBytes(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  std::string key;
  uint64_t kb = 0;
  while (in >> key) {
    if (key == "Pss:") {
      in >> kb;
      return kb * 1024;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return 0;
}

format::SchemaPtr Schema() { return format::schema({format::field("x", format::int64())}); }

// Topics of this run and round only (a broker keeps its topics).
std::string g_round;
std::string TopicName(int i) { return "idle_" + g_round + "_" + std::to_string(i); }

[[noreturn]] void Die(const std::string& what, const Status& st) {
  (void)std::fprintf(stderr, "idle_topics_bench child %d: %s: %s\n", static_cast<int>(::getpid()),
                     what.c_str(), st.ToString().c_str());
  ::_exit(1);
}

// A child: `topics` producers (each publishes one 64-row batch) or
// consumers (each receives one), then a byte on `ready`, then it waits for
// SIGTERM.
[[noreturn]] void RunChild(bool producers, const std::string& socket, int topics, int ready) {
  std::vector<std::unique_ptr<client::Producer>> ps;
  std::vector<std::unique_ptr<client::Consumer>> cs;
  for (int i = 0; i < topics; ++i) {
    if (producers) {
      client::ProducerOptions options;
      options.socket_path = socket;
      auto p = client::Producer::Open(TopicName(i), Schema(), options);
      if (!p.ok()) Die("producer " + TopicName(i), p.status());
      auto pool = (*p)->NewBatchPool(4096);
      if (!pool.ok()) Die("pool", pool.status());
      format::Int64Builder values(pool->get());
      for (int64_t v = 0; v < 64; ++v) (void)values.Append(v);
      auto array = values.Finish();
      if (!array.ok()) Die("finish", array.status());
      auto batch = format::RecordBatch::Make(Schema(), 64, {*array});
      if (!batch.ok()) Die("batch", batch.status());
      const Status st = (*p)->Publish(**batch, pool->get());
      if (!st.ok()) Die("publish", st);
      ps.push_back(std::move(*p));
    } else {
      client::ConsumerOptions options;
      options.socket_path = socket;
      options.wait_for_topic = std::chrono::seconds(60);
      auto c = client::Consumer::Open(TopicName(i), options);
      if (!c.ok()) Die("consumer " + TopicName(i), c.status());
      // Registers on the producer's channel (its Open waits for that),
      // then receives its batch.
      auto batch = (*c)->Next(30s);
      if (!batch.ok() || *batch == nullptr) Die("receive", batch.status());
      cs.push_back(std::move(*c));
    }
  }
  const char byte = 1;
  if (::write(ready, &byte, 1) != 1) ::_exit(2);
  while (true) ::pause();
}

struct Figures {
  uint64_t shm = 0;
  uint64_t pss_broker = 0;
  uint64_t pss_producers = 0;
  uint64_t pss_consumers = 0;
};

// One round with `topics` topics; the broker's pid is `broker`.
Figures Round(const std::string& socket, int broker, int topics) {
  g_round = std::to_string(::getpid()) + "_" + std::to_string(topics);
  const uint64_t shm_before = ShmUsedBytes();
  int consumers_ready[2];
  int producers_ready[2];
  if (::pipe(consumers_ready) != 0 || ::pipe(producers_ready) != 0) ::_exit(1);
  // The consumers wait for their topics (one after the other); the
  // producers create them, each waiting for its consumer to register, so
  // that it gets the batch.
  const int consumer_pid = ::fork();
  if (consumer_pid == 0) RunChild(false, socket, topics, consumers_ready[1]);
  const int producer_pid = ::fork();
  if (producer_pid == 0) RunChild(true, socket, topics, producers_ready[1]);
  char byte;
  if (::read(producers_ready[0], &byte, 1) != 1 || ::read(consumers_ready[0], &byte, 1) != 1) {
    (void)std::fprintf(stderr, "a child failed\n");
    ::_exit(1);
  }
  std::this_thread::sleep_for(1500ms);  // idle: stats reports sent, nothing moving
  Figures f;
  f.shm = ShmUsedBytes() - shm_before;
  f.pss_broker = PssBytes(broker);
  f.pss_producers = PssBytes(producer_pid);
  f.pss_consumers = PssBytes(consumer_pid);
  ::kill(producer_pid, SIGKILL);
  ::kill(consumer_pid, SIGKILL);
  ::waitpid(producer_pid, nullptr, 0);
  ::waitpid(consumer_pid, nullptr, 0);
  for (int fd : {consumers_ready[0], consumers_ready[1], producers_ready[0], producers_ready[1]}) {
    ::close(fd);
  }
  // The broker removes the dead producers' segments (liveness check).
  std::this_thread::sleep_for(1000ms);
  return f;
}

double MiB(double bytes) { return bytes / (1024.0 * 1024.0); }

}  // namespace

int main(int argc, char** argv) try {
  std::string socket;
  int topics = 100;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--socket" && i + 1 < argc) {
      socket = argv[++i];
    } else if (arg == "--topics" && i + 1 < argc) {
      topics = static_cast<int>(std::strtol(argv[++i], nullptr, 10));
    } else {
      (void)std::fprintf(stderr, "usage: %s --socket PATH [--topics N]\n", argv[0]);
      return 2;
    }
  }
  if (topics < 2) return 2;
  auto admin = client::BrokerClient::Connect(socket);
  if (!admin.ok()) {
    (void)std::fprintf(stderr, "%s\n", admin.status().ToString().c_str());
    return 1;
  }
  auto stats = (*admin)->Stats();
  if (!stats.ok()) return 1;
  const int broker = static_cast<int>(stats->pid);
  const Figures one = Round(socket, broker, 1);
  const Figures many = Round(socket, broker, topics);
  const double extra = topics - 1;
  const double shm = (static_cast<double>(many.shm) - static_cast<double>(one.shm)) / extra;
  const double pss =
      (static_cast<double>(many.pss_broker + many.pss_producers + many.pss_consumers) -
       static_cast<double>(one.pss_broker + one.pss_producers + one.pss_consumers)) /
      extra;
  std::printf("topics: 1 and %d (each a default producer and consumer, one 64-row batch)\n",
              topics);
  std::printf("/dev/shm in use: %.2f MiB and %.2f MiB -> %.3f MiB per extra topic\n",
              MiB(static_cast<double>(one.shm)), MiB(static_cast<double>(many.shm)), MiB(shm));
  std::printf(
      "PSS broker %.1f/%.1f MiB, producers %.1f/%.1f MiB, consumers %.1f/%.1f MiB\n",
      MiB(static_cast<double>(one.pss_broker)), MiB(static_cast<double>(many.pss_broker)),
      MiB(static_cast<double>(one.pss_producers)), MiB(static_cast<double>(many.pss_producers)),
      MiB(static_cast<double>(one.pss_consumers)), MiB(static_cast<double>(many.pss_consumers)));
  std::printf("extra PSS (broker + producers + consumers) per extra topic: %.3f MiB\n", MiB(pss));
  return 0;
} catch (const std::exception& e) {
  (void)std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
