// Processes of a measurement: pinning, children, signals, CPU time.

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "alkaid/measure/clock.h"
#include "alkaid/measure/process.h"

namespace alkaid::measure {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

void OnInterrupt(int) { g_interrupted = 1; }

// Moves `pid` (0: the caller) to `cpu`; nothing if `cpu` < 0.
void PinTo(int cpu, pid_t pid = 0) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)::sched_setaffinity(pid, sizeof(set), &set);
}

}  // namespace

int64_t ProcessCpuNs() {
  rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  auto ns = [](const timeval& tv) { return int64_t{tv.tv_sec} * 1000000000 + tv.tv_usec * 1000; };
  return ns(usage.ru_utime) + ns(usage.ru_stime);
}

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

void InstallInterruptHandler() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: blocking calls return EINTR
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

bool Interrupted() { return g_interrupted != 0; }

void ReportChildError(ChildControl* control, const std::string& who, const Status& status) {
  if (control->error_claimed.exchange(1) != 0) return;
  const std::string text = who + ": " + status.ToString();
  (void)std::snprintf(control->error, sizeof(control->error), "%s", text.c_str());
}

int ChildExitCode(ChildControl* control, const std::string& who, const Status& status) {
  if (status.ok()) return 0;
  if (status.code() == StatusCode::kCancelled && Stopping(*control)) return 3;
  ReportChildError(control, who, status);
  return 1;
}

Status RunChildren(const std::vector<std::function<int()>>& bodies, const std::vector<int>& cpus,
                   ChildControl* control, const std::function<void()>& on_wait) {
  // SIGCHLD, SIGINT and SIGTERM are taken with sigtimedwait while waiting,
  // so that the parent sleeps until something happens (no polling next to
  // the spinning children).
  sigset_t waited, old_mask;
  sigemptyset(&waited);
  sigaddset(&waited, SIGCHLD);
  sigaddset(&waited, SIGINT);
  sigaddset(&waited, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &waited, &old_mask);

  std::vector<pid_t> pids;
  Status status = Status::OK();
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    (void)std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
      PinTo(i < cpus.size() ? cpus[i] : -1);
      const int code = bodies[i]();
      (void)std::fflush(nullptr);
      ::_exit(code);
    }
    if (pid < 0) {
      status = Status::IOError("fork: ", ErrnoMessage(errno));
      control->stop.store(1);
      break;
    }
    pids.push_back(pid);
  }

  bool stopping = !status.ok();
  int64_t kill_deadline = stopping ? NowNs() + 5'000'000'000 : 0;
  std::string failure;
  std::vector<bool> done(pids.size(), false);
  std::size_t remaining = pids.size();
  while (remaining > 0) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int wstatus = 0;
      const pid_t got = ::waitpid(pids[i], &wstatus, WNOHANG);
      if (got != pids[i]) continue;
      done[i] = true;
      --remaining;
      const bool clean = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
      if (!clean) {
        if (failure.empty()) {
          failure = WIFSIGNALED(wstatus)
                        ? "child process " + std::to_string(pids[i]) + " killed by signal " +
                              std::to_string(WTERMSIG(wstatus))
                        : "child process " + std::to_string(pids[i]) + " exited with code " +
                              std::to_string(WEXITSTATUS(wstatus));
        }
        if (!stopping) {
          stopping = true;
          control->stop.store(1);
          kill_deadline = NowNs() + 5'000'000'000;
        }
      }
    }
    if (remaining == 0) break;
    if (g_interrupted && !stopping) {
      stopping = true;
      control->stop.store(1);
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (!done[i]) ::kill(pids[i], SIGTERM);
      }
      kill_deadline = NowNs() + 5'000'000'000;
    }
    if (stopping && NowNs() > kill_deadline) {
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (!done[i]) ::kill(pids[i], SIGKILL);
      }
      kill_deadline = NowNs() + 60'000'000'000;
    }
    const bool progress = on_wait != nullptr;
    timespec timeout{0, 0};
    if (stopping || progress) {
      timeout.tv_nsec = 200'000'000;
    } else {
      timeout.tv_sec = 1;
    }
    const int sig = ::sigtimedwait(&waited, nullptr, &timeout);
    if (sig == SIGINT || sig == SIGTERM) g_interrupted = 1;
    if (progress) on_wait();
  }
  // Signals that arrived while blocked were taken above; restore the mask.
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);

  if (!status.ok()) return status;
  if (g_interrupted) return Status::Cancelled("interrupted");
  if (!failure.empty()) {
    if (control->error_claimed.load() != 0) return Status::IOError(control->error);
    return Status::IOError(failure);
  }
  return Status::OK();
}

}  // namespace alkaid::measure
