#pragma once

// Starting a real alkaid-broker process for a test: unique socket and name,
// killed (SIGTERM, then SIGKILL) at the end.

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "dead_segments.h"

namespace alkaid::broker::testing {

inline std::string UniqueSuffix() {
  static int counter = 0;
  return std::to_string(::getpid()) + "x" + std::to_string(counter++);
}

/// Names in /dev/shm starting with `prefix`.
inline std::set<std::string> ShmNames(const std::string& prefix) {
  std::set<std::string> out;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (const dirent* e = ::readdir(dir)) {
      const std::string n = e->d_name;
      if (n.rfind(prefix, 0) == 0) out.insert(n);
    }
    ::closedir(dir);
  }
  return out;
}

/// fork() for tests: the child gets SIGKILL when the test process exits, so
/// the child of a failed test (an ASSERT returns before the test kills it)
/// never outlives the test binary, where it would hold ctest's output pipe
/// open until ctest's timeout. Must be called from the main thread (the
/// signal follows the death of the forking thread).
inline pid_t ForkTestChild() {
  const pid_t parent = ::getpid();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(97);  // the test exited before prctl
  }
  return pid;
}

/// In a forked child: replaces the process with `args` (args[0] a path);
/// exits with 127 if that fails.
[[noreturn]] inline void ExecOrExit(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

/// Runs `argv` (argv[0] a path) and returns its pid; its stdout (and
/// stderr) go to the files given, if any.
inline pid_t Spawn(const std::vector<std::string>& args, const std::string& stdout_path = "",
                   const std::string& stderr_path = "") {
  const pid_t pid = ForkTestChild();
  if (pid == 0) {
    if (!stdout_path.empty()) {
      if (std::FILE* f = std::freopen(stdout_path.c_str(), "w", stdout)) (void)f;
    }
    if (!stderr_path.empty()) {
      if (std::FILE* f = std::freopen(stderr_path.c_str(), "w", stderr)) (void)f;
    }
    ExecOrExit(args);
  }
  return pid;
}

/// Exit code of `pid` (waits), or -signal.
/// What Wait returns for a child that was still running at its deadline
/// (it is then killed): a test fails instead of hanging when the mechanism
/// it checks is broken.
constexpr int kStillRunning = -999;

/// The exit code of child `pid` (-signal if killed by one); kStillRunning
/// if it had not ended after `deadline`.
inline int Wait(pid_t pid, std::chrono::milliseconds deadline = std::chrono::seconds(60)) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  int status = 0;
  for (;;) {
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) break;
    if (got != 0) return -1000;
    if (std::chrono::steady_clock::now() >= until) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return kStillRunning;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1001;
}

class BrokerProcess {
 public:
  // The first broker of a test binary sweeps the segments of earlier test
  // binaries' brokers ("bt<pid>x...") whose process is gone: a test that
  // failed by exiting (a hang guard's _Exit) or was killed by ctest's
  // timeout could not remove them, and no later broker has that name.
  BrokerProcess() : BrokerProcess("bt" + UniqueSuffix()) {
    static const bool swept = (alkaid::testing::SweepDeadTestSegments("bt", 'x'), true);
    (void)swept;
  }
  explicit BrokerProcess(std::string name, std::string socket = "")
      : name_(std::move(name)),
        socket_(socket.empty() ? "/tmp/alkaid-test-" + name_ + ".sock" : std::move(socket)) {}
  // A broker killed by SIGKILL could not remove its socket: the last
  // object that ran it does.
  ~BrokerProcess() {
    Stop();
    if (killed_) ::unlink(socket_.c_str());
  }

  /// Starts the broker and waits until it answers a request (up to 5 s):
  /// its socket accepts connections as soon as it listens, before its
  /// start-up work (the sweep of an earlier broker's segments) is done; a
  /// reply comes only after it. With `log_path`, it logs at level info
  /// (its start-up lines included) into that file instead of warnings to
  /// the test's stderr.
  bool Start(std::vector<std::string> extra = {}, const std::string& log_path = "") {
    std::vector<std::string> args = {ALKAID_BROKER_BIN,
                                     "--socket",
                                     socket_,
                                     "--name",
                                     name_,
                                     "--log-level",
                                     log_path.empty() ? "warn" : "info"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = Spawn(args, "", log_path);
    killed_ = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      auto client = client::BrokerClient::Connect(socket_);
      if (client.ok() && (*client)->Stats().ok()) return true;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  /// SIGTERM; returns the exit code.
  int Stop() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    const int code = Wait(pid_);
    pid_ = -1;
    return code;
  }
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    Wait(pid_);
    pid_ = -1;
    killed_ = true;
  }

  const std::string& name() const { return name_; }
  const std::string& socket() const { return socket_; }
  pid_t pid() const { return pid_; }

 private:
  std::string name_;
  std::string socket_;
  pid_t pid_ = -1;
  bool killed_ = false;
};

}  // namespace alkaid::broker::testing
