#include "alkaid/common/process.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace alkaid {

bool ProcessIsGone(uint32_t pid) {
  if (pid == 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) == -1 && errno == ESRCH) return true;
  // A killed child its parent has not reaped yet still answers kill(); its
  // state in /proc/<pid>/stat (after the parenthesised command) is Z or X.
  // No heap memory: callers check liveness on their data paths' slow ends.
  char path[32];
  (void)std::snprintf(path, sizeof(path), "/proc/%u/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char line[512];
  ssize_t n;
  do {
    n = ::read(fd, line, sizeof(line) - 1);
  } while (n < 0 && errno == EINTR);
  (void)::close(fd);  // read-only: nothing to report
  if (n <= 0) return false;
  line[n] = '\0';
  const char* close = std::strrchr(line, ')');
  if (close == nullptr || close[1] != ' ') return false;
  return close[2] == 'Z' || close[2] == 'X';
}

}  // namespace alkaid
