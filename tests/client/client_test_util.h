#pragma once

// Helpers shared by the client tests: unique segment names and a
// producer-side fixture (body allocator + ring) that removes its segments.

#include <unistd.h>

#include <memory>
#include <string>

#include "alkaid/shm/body_allocator.h"
#include "alkaid/shm/ring.h"
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

/// A body segment and a ring over it, removed on destruction.
struct Channel {
  std::string bodies_name = UniqueName("b");
  std::string ring_name = UniqueName("r");
  std::unique_ptr<shm::BodyAllocator> bodies;
  std::unique_ptr<shm::RingProducer> ring;

  Status Create(uint64_t arena_bytes, shm::RingOptions options = {}) {
    shm::BodyAllocatorOptions bo;
    bo.wait_timeout = std::chrono::seconds(10);
    ALKAID_ASSIGN_OR_RAISE(bodies, shm::BodyAllocator::Create(bodies_name, arena_bytes, bo));
    ALKAID_ASSIGN_OR_RAISE(ring, shm::RingProducer::Create(ring_name, options, bodies.get()));
    return Status::OK();
  }
  ~Channel() {
    ring.reset();
    bodies.reset();
    (void)shm::Segment::Remove(ring_name);
    (void)shm::Segment::Remove(bodies_name);
  }
};

}  // namespace alkaid::client::testing
