#pragma once

// Cleanup of what crashed test processes left in /dev/shm. Test binaries
// name their segments "<family><pid>_..." and remove them in their
// fixtures; a binary that crashes cannot, so the next one sweeps the names
// of processes that no longer run.

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace alkaid::testing {

/// /dev/shm objects whose name starts with `prefix`.
inline std::vector<std::string> SegmentNames(const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(dir)) {
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) out.emplace_back(e->d_name);
    }
    ::closedir(dir);
  }
  return out;
}

/// Removes the /dev/shm objects named `family` + pid + `after_pid` + "..."
/// whose process is gone: what an earlier test binary that crashed could
/// not clean up. Objects of running processes (another test binary) are
/// left alone.
inline void SweepDeadTestSegments(const std::string& family, char after_pid = '_') {
  for (const std::string& name : SegmentNames(family)) {
    const std::size_t end = name.find(after_pid, family.size());
    if (end == std::string::npos || end == family.size()) continue;
    const std::string digits = name.substr(family.size(), end - family.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) {
      continue;
    }
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) {
      ::unlink(("/dev/shm/" + name).c_str());
    }
  }
}

}  // namespace alkaid::testing
