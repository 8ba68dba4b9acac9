#include "daemon/shm_limit.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <iterator>

#include "alkaid/common/status.h"
#include "daemon/broker_internal.h"

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

}  // namespace alkaid::broker::internal

namespace alkaid::broker {

Status Broker::Impl::ChooseShmLimit() {
  const std::string& dir = options.shm_dir;
  auto space = internal::StatShmSpace(dir);
  if (!space.ok()) {
    // Without a limit the figures are only informative.
    if (options.shm_limit != uint64_t{0}) return space.status();
    Log(LogLevel::kWarn, "cannot see how much ", dir, " holds: ", space.status().message());
    shm_limit.origin = "--shm-limit 0";
    return Status::OK();
  }
  ALKAID_ASSIGN_OR_RAISE(shm_limit, internal::ChooseShmLimit(options.shm_limit, *space, dir));
  shm_total = space->total;
  using internal::HumanBytes;
  const std::string figures =
      dir + ": " + HumanBytes(space->free) + " free of " + HumanBytes(space->total);
  if (shm_limit.bytes == 0) {
    Log(LogLevel::kInfo, "no shm limit (", shm_limit.origin, "); ", figures);
    return Status::OK();
  }
  Log(LogLevel::kInfo, "shm limit ", HumanBytes(shm_limit.bytes), " (", shm_limit.origin,
      shm_limit.is_default ? "; --shm-limit to change" : "", "); ", figures);
  if (space->free < shm_limit.bytes) {
    // Only the default can get here: what other processes hold is not
    // ours to count, so producers are refused when their segments do not
    // fit in what is left (OutOfMemory from the producer), not before.
    Log(LogLevel::kWarn, "only ", HumanBytes(space->free), " of ", dir,
        " is free: producers whose segments do not fit in it will be refused");
  }
  return Status::OK();
}

}  // namespace alkaid::broker
