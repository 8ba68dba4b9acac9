#include "daemon/shm_limit.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <iterator>

#include <string>
#include "alkaid/common/status.h"

namespace alkaid::broker::internal {

namespace {

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kPage = 4 * kKiB;

}  // namespace

Result<ShmSpace> StatShmSpace(const std::string& dir) {
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) return Status::FromErrno(errno, "statvfs " + dir);
  ShmSpace space;
  space.total = uint64_t{vfs.f_blocks} * uint64_t{vfs.f_frsize};
  space.free = uint64_t{vfs.f_bavail} * uint64_t{vfs.f_frsize};
  return space;
}

uint64_t DefaultShmLimit(uint64_t total) {
  const uint64_t half = total / 2;
  const uint64_t unit = half >= kMiB ? kMiB : kPage;
  return half / unit * unit;
}

Result<ShmLimit> ChooseShmLimit(std::optional<uint64_t> explicit_limit, const ShmSpace& space,
                                const std::string& dir) {
  ShmLimit out;
  if (explicit_limit.has_value()) {
    out.bytes = *explicit_limit;
    if (out.bytes == 0) {
      out.origin = "--shm-limit 0";
      return out;
    }
    if (space.free < out.bytes) {
      return Status::OutOfMemory(
          dir, " has only ", FormatBytes(space.free), " free, less than --shm-limit ",
          FormatBytes(out.bytes),
          ". In a container, give it a larger /dev/shm (docker run --shm-size=...), or lower "
          "--shm-limit (without it the limit is half of ",
          dir, "'s size).");
    }
    out.origin = "--shm-limit";
    return out;
  }
  out.bytes = DefaultShmLimit(space.total);
  out.is_default = true;
  if (out.bytes == 0) {
    return Status::OutOfMemory(dir, " holds only ", FormatBytes(space.total),
                               ": too small for any segment. In a container, give it a larger "
                               "/dev/shm (docker run --shm-size=...).");
  }
  out.origin = "half of " + dir + "'s " + HumanBytes(space.total);
  return out;
}

std::string HumanBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < kKiB) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  uint64_t unit = kKiB;
  std::size_t u = 0;
  while (u + 1 < std::size(kUnits) && bytes / unit >= 1024) {
    unit <<= 10;
    ++u;
  }
  std::string text = std::to_string(bytes / unit);
  if (bytes % unit != 0) {
    // One decimal, rounded down: never more than what there is.
    text += "." + std::to_string(bytes % unit * 10 / unit);
  }
  return text + " " + kUnits[u];
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  return std::to_string(bytes) + " bytes (" + HumanBytes(bytes) + ")";
}

}  // namespace alkaid::broker::internal
