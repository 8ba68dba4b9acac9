#pragma once

// The broker's shared-memory limit (docs/BROKER.md, "Running it", step 3):
// --shm-limit when given, otherwise half of what the file system holding
// the segments (/dev/shm) holds in all, so that the broker starts on a
// container's 64 MiB /dev/shm. Chosen once at start; the choice and where
// it came from are logged and reported by GetStats (`alkaid topics`).

#include <cstdint>
#include <optional>
#include <string>

#include "alkaid/common/result.h"

namespace alkaid::broker::internal {

// The size of the file system holding the shared-memory objects.
struct ShmSpace {
  uint64_t total = 0;  // f_blocks * f_frsize
  uint64_t free = 0;   // f_bavail * f_frsize: what a new segment may still take
};

// statvfs of `dir`. IOError naming `dir` if it fails.
Result<ShmSpace> StatShmSpace(const std::string& dir);

// The limit in force and where it came from.
struct ShmLimit {
  uint64_t bytes = 0;  // 0: no limit
  bool is_default = false;
  // "half of /dev/shm's 64 MiB", "--shm-limit", "--shm-limit 0".
  std::string origin;
};

// The default limit for a file system of `total` bytes: half of it, rounded
// down to whole MiB (to 4 KiB pages below 2 MiB). 0 when `total` is under
// two pages: nothing sensible fits.
uint64_t DefaultShmLimit(uint64_t total);

// The limit to enforce. `explicit_limit` is --shm-limit if it was given
// (0: no limit): it wins, but one larger than `space.free` is refused
// (OutOfMemory naming both figures, `dir` and the container fix). Without
// it, DefaultShmLimit(space.total); a file system too small for any
// default is refused too (OutOfMemory).
Result<ShmLimit> ChooseShmLimit(std::optional<uint64_t> explicit_limit, const ShmSpace& space,
                                const std::string& dir);

// A size for people: "64 MiB", "11.8 GiB", "512 KiB", "100 bytes"; whole
// units without decimals, one decimal otherwise (rounded down).
std::string HumanBytes(uint64_t bytes);

// "<n> bytes (<HumanBytes(n)>)": "67829760 bytes (64.6 MiB)"; "<n> bytes"
// below 1 KiB.
std::string FormatBytes(uint64_t bytes);

}  // namespace alkaid::broker::internal
