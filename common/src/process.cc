#include "alkaid/common/process.h"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace alkaid {

bool ProcessIsGone(uint32_t pid) {
  if (pid == 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) == -1 && errno == ESRCH) return true;
  // A killed child its parent has not reaped yet still answers kill(); its
  // state in /proc/<pid>/stat (after the parenthesised command) is Z or X.
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return false;
  char line[512];
  const std::size_t n = std::fread(line, 1, sizeof(line) - 1, f);
  (void)std::fclose(f);  // read-only: nothing to flush, nothing to report
  line[n] = '\0';
  const char* close = std::strrchr(line, ')');
  if (close == nullptr || close[1] != ' ') return false;
  return close[2] == 'Z' || close[2] == 'X';
}

}  // namespace alkaid
