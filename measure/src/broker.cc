// A broker of a measurement's own (broker.h).

#include "alkaid/measure/broker.h"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

namespace alkaid::measure {

namespace {

std::string ExecutableDir() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  path[n] = '\0';
  std::string s(path);
  const auto slash = s.rfind('/');
  return slash == std::string::npos ? "." : s.substr(0, slash);
}

bool IsExecutable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

// Whether something accepts connections on the Unix socket `path`.
bool Accepts(const std::string& path) {
  sockaddr_un address{};
  if (path.size() >= sizeof(address.sun_path)) return false;
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return ok;
}

// alkaid-broker: $ALKAID_BROKER_BIN, next to the running executable, in the
// build tree beside it (tools/alkaid or bench -> broker/daemon), then on
// PATH; empty if none is found.
std::string FindBrokerBinary() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read once at startup; nothing here calls setenv
  if (const char* env = std::getenv("ALKAID_BROKER_BIN"); env != nullptr && *env != '\0') {
    return IsExecutable(env) ? env : "";
  }
  const std::string dir = ExecutableDir();
  for (const std::string& candidate :
       {dir + "/alkaid-broker", dir + "/../../broker/daemon/alkaid-broker"}) {
    if (IsExecutable(candidate)) return candidate;
  }
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read once at startup; nothing here calls setenv
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::istringstream entries(path);
    for (std::string entry; std::getline(entries, entry, ':');) {
      if (entry.empty()) continue;
      std::string candidate = entry + "/alkaid-broker";
      if (IsExecutable(candidate)) return candidate;
    }
  }
  return "";
}

}  // namespace

Status PrivateBroker::Start(const std::string& prefix, const std::string& who, std::string binary) {
  if (binary.empty()) binary = FindBrokerBinary();
  if (binary.empty()) {
    return Status::IOError(
        "no broker is reachable and alkaid-broker was found neither next to this program nor "
        "on PATH (set ALKAID_BROKER_BIN, or start one and pass --socket)");
  }
  std::string dir_template = "/tmp/" + prefix + ".XXXXXX";
  if (::mkdtemp(dir_template.data()) == nullptr) {
    return Status::IOError("mkdtemp ", dir_template, ": ", ErrnoMessage(errno));
  }
  dir_ = dir_template;
  socket_ = dir_ + "/broker.sock";
  name_ = prefix + std::to_string(::getpid());
  // The limit must fit in /dev/shm's free space (the broker checks).
  uint64_t limit = uint64_t{1} << 30;
  struct statvfs vfs;
  if (::statvfs("/dev/shm", &vfs) == 0) {
    const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    limit = std::min(limit, free_bytes / 10 * 9);
  }
  const std::string limit_text = std::to_string(limit);
  (void)std::fflush(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) return Status::IOError("fork: ", ErrnoMessage(errno));
  if (pid_ == 0) {
    // Its own process group: Ctrl-C reaches the measuring processes, and
    // the broker is stopped after them. It dies with us regardless.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    sigset_t none;
    sigemptyset(&none);
    ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
    const char* argv[] = {binary.c_str(), "--socket",    socket_.c_str(),    "--name",
                          name_.c_str(),  "--shm-limit", limit_text.c_str(), "--log-level",
                          "error",        nullptr};
    ::execv(binary.c_str(), const_cast<char* const*>(argv));
    // No allocation between fork and exit: GNU strerror_r into a stack buffer.
    char reason[128];
    (void)std::fprintf(stderr, "%s: exec %s: %s\n", who.c_str(), binary.c_str(),
                       ::strerror_r(errno, reason, sizeof(reason)));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (true) {
    if (Accepts(socket_)) break;
    int wstatus = 0;
    if (::waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      return Status::IOError("alkaid-broker (", binary, ") exited with code ",
                             WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus),
                             " before answering on ", socket_);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::IOError("alkaid-broker (", binary, ") did not answer on ", socket_,
                             " within 10 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  (void)std::fprintf(stderr, "%s: started %s (pid %d) on %s\n", who.c_str(), binary.c_str(),
                     static_cast<int>(pid_), socket_.c_str());
  return Status::OK();
}

void PrivateBroker::Stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (::waitpid(pid_, nullptr, WNOHANG) != pid_) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
  }
  if (!name_.empty()) {
    if (DIR* shm = ::opendir("/dev/shm"); shm != nullptr) {
      const std::string prefix = name_ + ".";
      // NOLINTNEXTLINE(concurrency-mt-unsafe): readdir on a DIR stream of our own
      while (dirent* entry = ::readdir(shm)) {
        if (std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0) {
          ::unlink(("/dev/shm/" + std::string(entry->d_name)).c_str());
        }
      }
      ::closedir(shm);
    }
  }
  if (!dir_.empty()) {
    ::unlink(socket_.c_str());
    ::rmdir(dir_.c_str());
    dir_.clear();
  }
}

}  // namespace alkaid::measure
