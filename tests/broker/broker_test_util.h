#pragma once

// Helpers shared by the broker's integration tests: waiting on what a real
// alkaid-broker (tests/broker/broker_process.h) reports, and reading the
// files its tools write.

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/client/topic.h"
#include "broker_process.h"

namespace alkaid::broker::testing {

// A pipe between the test and a child process: one byte per event (a read
// returns 0 once the writer is gone, so a dead child ends a wait).
struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() { (void)!::pipe(fds); }
  ~Pipe() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  void Put(char c) { (void)!::write(fds[1], &c, 1); }
  char Get() {
    char c = 0;
    return ::read(fds[0], &c, 1) == 1 ? c : 0;
  }
  // True if a byte is there to Get.
  bool Readable() {
    pollfd p{fds[0], POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  }
};

/// Polls `done` every 2 ms until it holds or `limit` passed. The limit
/// bounds a hang; it is not part of a verdict (the caller asserts on the
/// condition).
inline bool WaitUntil(const std::function<bool()>& done,
                      std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

/// A topic with an arena of `bytes` per producer (the broker's default is
/// larger than most tests need).
inline client::TopicOptions TopicWithArena(uint64_t bytes = 4 << 20) {
  client::TopicOptions topic;
  topic.arena_bytes = bytes;
  return topic;
}

/// Options of a producer on `broker`; a topic it creates gets `topic`.
inline client::ProducerOptions ProducerOn(const BrokerProcess& broker,
                                          client::TopicOptions topic = TopicWithArena()) {
  client::ProducerOptions options;
  options.socket_path = broker.socket();
  options.topic = topic;
  return options;
}

/// Options of a consumer on `broker`, the rest as default.
inline client::ConsumerOptions ConsumerOn(const BrokerProcess& broker) {
  client::ConsumerOptions options;
  options.socket_path = broker.socket();
  return options;
}

/// Consumers the broker at `socket` lists as waiting for `topic` to be
/// created (0 if none, or on an error).
inline uint32_t AwaitingConsumers(const std::string& socket, const std::string& topic) {
  auto client = client::BrokerClient::Connect(socket);
  if (!client.ok()) return 0;
  auto awaited = (*client)->ListAwaitedTopics();
  if (!awaited.ok()) return 0;
  for (const auto& a : *awaited) {
    if (a.name == topic) return a.consumers;
  }
  return 0;
}

/// Waits until the broker at `socket` lists `topic` with at least
/// `consumers` consumers (WaitUntil's guard bounds a hang). False if it
/// never did, or on an error.
inline bool WaitForConsumers(const std::string& socket, const std::string& topic,
                             uint32_t consumers) {
  auto client = client::BrokerClient::Connect(socket);
  if (!client.ok()) return false;
  bool found = false;
  WaitUntil([&] {
    auto topics = (*client)->ListTopics();
    if (!topics.ok()) return true;  // the broker is gone: no use waiting
    for (const auto& t : *topics) {
      if (t.name == topic && t.consumers >= consumers) found = true;
    }
    return found;
  });
  return found;
}

/// Waits until no /dev/shm object starts with `prefix`; true if none is
/// left. The wait is bounded by WaitUntil's guard against a hang (30 s), not
/// by a time the verdict depends on.
inline bool WaitNoSegments(const std::string& prefix) {
  return WaitUntil([&] { return ShmNames(prefix).empty(); });
}

/// The file mapped at `address` in this process (/proc/self/maps), e.g.
/// "/dev/shm/<broker>.<segment>"; "" if the address is not in a file mapping.
inline std::string MappingOf(const void* address) {
  const auto a = reinterpret_cast<uintptr_t>(address);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode, path;
    fields >> range >> perms >> offset >> dev >> inode >> path;
    const auto dash = range.find('-');
    if (dash == std::string::npos) continue;
    const uintptr_t lo = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t hi = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (a >= lo && a < hi) return path;
  }
  return "";
}

/// The whole text of the file at `path` ("" if it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// A test with a broker of its own and a scratch directory named after it;
/// at the end the directory is removed, the broker stopped, and no segment
/// of the broker's may be left in /dev/shm.
class BrokerWithDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(broker_.Start());
    dir_ = "/tmp/alkaid-test-" + broker_.name();
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    broker_.Stop();
    EXPECT_TRUE(ShmNames(broker_.name() + ".").empty());
  }

  BrokerProcess broker_;
  std::string dir_;
};

// An integer from the environment (seeds, lengths of the stress and soak
// runs), `fallback` when unset or empty.
inline int64_t EnvInt(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  return std::strtoll(value, nullptr, 10);
}

// Exit status of child `pid` if it has exited (reaped; minus the signal
// that killed it), nullopt if it runs.
inline std::optional<int> Exited(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) != pid) return std::nullopt;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return -WTERMSIG(status);
}

// Waits up to `limit` for child `pid`; SIGKILLs it after that. nullopt if
// it had to be killed (stuck).
inline std::optional<int> WaitFor(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto code = Exited(pid)) return code;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  Wait(pid);
  return std::nullopt;
}

}  // namespace alkaid::broker::testing
