#pragma once

// Helpers shared by the broker's integration tests: waiting on what a real
// alkaid-broker (tests/broker/broker_process.h) reports, and reading the
// files its tools write.

#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "alkaid/client/broker_client.h"
#include "broker_process.h"

namespace alkaid::broker::testing {

/// Waits (up to about 5 s) until the broker at `socket` lists `topic` with
/// at least `consumers` consumers. False on a timeout or an error.
inline bool WaitForConsumers(const std::string& socket, const std::string& topic,
                             uint32_t consumers) {
  auto client = client::BrokerClient::Connect(socket);
  if (!client.ok()) return false;
  for (int i = 0; i < 500; ++i) {
    auto topics = (*client)->ListTopics();
    if (!topics.ok()) return false;
    for (const auto& t : *topics) {
      if (t.name == topic && t.consumers >= consumers) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

/// Waits (`tries` times 10 ms at the most) until no /dev/shm object starts
/// with `prefix`; true if none is left.
inline bool WaitNoSegments(const std::string& prefix, int tries = 200) {
  for (int i = 0; i < tries && !ShmNames(prefix).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ShmNames(prefix).empty();
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

}  // namespace alkaid::broker::testing
