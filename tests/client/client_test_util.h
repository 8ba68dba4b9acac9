#pragma once

// Helpers shared by the client tests: unique segment names and a
// producer-side fixture (a channel) that removes its names.

#include <unistd.h>

#include <memory>
#include <string>

#include "alkaid/shm/channel.h"
#include "alkaid/shm/segment.h"
#include "dead_segments.h"
#include "test_util.h"

namespace alkaid::client::testing {

inline std::string UniqueName(const std::string& what) {
  // The first name of a process sweeps what crashed test processes left.
  static const bool swept = (alkaid::testing::SweepDeadTestSegments("alkaid_ct"), true);
  (void)swept;
  static int counter = 0;
  return "alkaid_ct" + std::to_string(::getpid()) + "_" + what + std::to_string(counter++);
}

/// A channel (the producer side), removed on destruction.
struct Channel {
  std::string name = UniqueName("ch");
  std::unique_ptr<shm::ChannelProducer> producer;

  /// `options.arena_bytes` becomes `arena_bytes`; an unset inline capacity
  /// becomes 448 (what Producer uses); waits for space up to 10 s.
  Status Create(uint64_t arena_bytes, shm::ChannelOptions options = {}) {
    options.arena_bytes = arena_bytes;
    if (options.inline_capacity == 0) options.inline_capacity = 448;
    options.space_timeout = std::chrono::seconds(10);
    ALKAID_ASSIGN_OR_RAISE(producer, shm::ChannelProducer::Create(name, options));
    return Status::OK();
  }
  ~Channel() {
    producer.reset();
    (void)shm::RemoveChannel(name);
  }
};

}  // namespace alkaid::client::testing
