#pragma once

// Helpers for libshm tests: unique segment names, cleanup, payload patterns,
// child processes.

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "alkaid/shm/segment.h"
#include "dead_segments.h"

namespace alkaid::shm::testing {

/// Prefix of every segment a test creates: "alkaid_t<pid>_".
inline std::string TestPrefix() { return "alkaid_t" + std::to_string(::getpid()) + "_"; }

/// Segments in /dev/shm whose name starts with `prefix`.
inline std::vector<std::string> SegmentsWithPrefix(const std::string& prefix) {
  return alkaid::testing::SegmentNames(prefix);
}

/// Fixture: hands out unique names, removes them in TearDown and checks that
/// nothing with this process's prefix is left in /dev/shm. The first name
/// handed out in a process sweeps what crashed test processes left.
class ShmTest : public ::testing::Test {
 protected:
  std::string NewName(const std::string& what = "seg") {
    static const bool swept = (alkaid::testing::SweepDeadTestSegments("alkaid_t"), true);
    (void)swept;
    static std::atomic<int> counter{0};
    std::string name = TestPrefix() + what + "_" + std::to_string(counter.fetch_add(1));
    names_.push_back(name);
    return name;
  }

  void TearDown() override {
    for (const auto& n : names_) (void)Segment::Remove(n);
    EXPECT_TRUE(SegmentsWithPrefix(TestPrefix()).empty())
        << "segments left in /dev/shm: " << SegmentsWithPrefix(TestPrefix()).front();
  }

  std::vector<std::string> names_;
};

/// Fills `out` with a pattern derived from `seed` (xorshift).
inline void FillPattern(uint64_t seed, std::span<std::byte> out) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (auto& b : out) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<std::byte>(x);
  }
}

/// True if `data` holds FillPattern(seed).
inline bool CheckPattern(uint64_t seed, std::span<const std::byte> data) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (auto b : data) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if (b != static_cast<std::byte>(x)) return false;
  }
  return true;
}

/// FNV-1a over bytes.
inline uint64_t Checksum(std::span<const std::byte> data) {
  uint64_t h = 1469598103934665603ULL;
  for (auto b : data) {
    h ^= static_cast<uint8_t>(b);
    h *= 1099511628211ULL;
  }
  return h;
}

/// A message payload: [sequence u64][length u32][pad u32][pattern bytes][checksum u64].
/// Length varies with the sequence between 24 and 24 + max_extra bytes.
inline std::vector<std::byte> MakePayload(uint64_t seq, uint32_t max_extra = 96) {
  const uint32_t extra = static_cast<uint32_t>((seq * 7) % (max_extra + 1));
  std::vector<std::byte> p(16 + extra + 8);
  std::memcpy(p.data(), &seq, 8);
  const uint32_t len = static_cast<uint32_t>(p.size());
  std::memcpy(p.data() + 8, &len, 4);
  FillPattern(seq, std::span(p).subspan(16, extra));
  const uint64_t sum = Checksum(std::span(p).first(16 + extra));
  std::memcpy(p.data() + 16 + extra, &sum, 8);
  return p;
}

/// Checks a payload made by MakePayload; returns the sequence it encodes or
/// UINT64_MAX if it is damaged.
inline uint64_t VerifyPayload(std::span<const std::byte> p) {
  if (p.size() < 24) return UINT64_MAX;
  uint64_t seq;
  uint32_t len;
  std::memcpy(&seq, p.data(), 8);
  std::memcpy(&len, p.data() + 8, 4);
  if (len != p.size()) return UINT64_MAX;
  uint64_t sum;
  std::memcpy(&sum, p.data() + p.size() - 8, 8);
  if (sum != Checksum(p.first(p.size() - 8))) return UINT64_MAX;
  if (!CheckPattern(seq, p.subspan(16, p.size() - 24))) return UINT64_MAX;
  return seq;
}

/// Runs `body` in a child process made with fork(); its return value is the
/// child's exit code (98 if it throws). Returns the child's pid to the parent.
inline pid_t ForkChild(const std::function<int()>& body) {
  const pid_t parent = ::getpid();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Killed when the test process exits: a child of a failed test never
    // outlives it (it would hold ctest's output pipe open).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(97);
    int rc = 99;
    try {
      rc = body();
    } catch (...) {
      rc = 98;
    }
    std::fflush(nullptr);
    ::_exit(rc);
  }
  return pid;
}

/// Waits for `pid`: its exit code, 128 + signal number if a signal ended it,
/// or -1 if it cannot be waited for.
inline int WaitChild(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Reads ShmemPmdMapped of the mapping that contains `address` from
// /proc/self/smaps (kB), or -1.
inline long ShmemPmdMappedKb(const void* address) {
  FILE* f = std::fopen("/proc/self/smaps", "r");
  if (f == nullptr) return -1;
  char line[512];
  bool in_mapping = false;
  long kb = -1;
  const auto a = reinterpret_cast<uintptr_t>(address);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line
      in_mapping = a >= lo && a < hi;
      continue;
    }
    long value = 0;
    if (in_mapping && std::sscanf(line, "ShmemPmdMapped: %ld kB", &value) == 1) {
      kb = value;
      break;
    }
  }
  std::fclose(f);
  return kb;
}

}  // namespace alkaid::shm::testing

/// In a ForkChild body: if `cond` is false, prints the printf-style message
/// with the child's pid to stderr and returns `code` (the exit code).
#define CHILD_CHECK(cond, code, ...)                  \
  do {                                                \
    if (!(cond)) {                                    \
      std::fprintf(stderr, "child %d: ", ::getpid()); \
      std::fprintf(stderr, __VA_ARGS__);              \
      std::fprintf(stderr, "\n");                     \
      return code;                                    \
    }                                                 \
  } while (false)
