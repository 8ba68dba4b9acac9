// `alkaid latency`: child processes, shared memory, signals.

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <system_error>

#include "alkaid/format/array.h"
#include "latency_internal.h"

namespace alkaid::tools::latency {

volatile std::sig_atomic_t g_interrupted = 0;

namespace {

void OnInterrupt(int) { g_interrupted = 1; }

}  // namespace

void InstallInterruptHandler() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: blocking calls return EINTR
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

SharedBlock::~SharedBlock() {
  if (shared_ != nullptr) {
    shared_->~Shared();
    ::munmap(shared_, sizeof(Shared));
  }
}

Status SharedBlock::Map() {
  void* mem =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    return Status::IOError("mmap of ", sizeof(Shared), " shared bytes: ", ErrnoMessage(errno));
  }
  // Fresh anonymous memory is zero-filled: every counter and histogram is
  // empty already; the placement new only starts the objects' lifetimes.
  shared_ = new (mem) Shared;
  return Status::OK();
}

void ReportChildError(Shared* shared, const std::string& who, const Status& status) {
  if (shared->error_claimed.exchange(1) != 0) return;
  const std::string text = who + ": " + status.ToString();
  (void)std::snprintf(shared->error, sizeof(shared->error), "%s", text.c_str());
}

void PinToCpu(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)::sched_setaffinity(0, sizeof(set), &set);
}

Status FirstLast(const format::RecordBatch& batch, int64_t* first, int64_t* last) {
  if (batch.num_columns() != 1 || batch.num_rows() < 1) {
    return Status::Invalid("received a batch of ", batch.num_columns(), " columns and ",
                           batch.num_rows(), " rows; expected 1 column and at least 1 row");
  }
  // column() makes a new Array object: keep it alive while it is read.
  const auto column = std::static_pointer_cast<format::Int64Array>(batch.column(0));
  *first = column->Value(0);
  *last = column->Value(batch.num_rows() - 1);
  return Status::OK();
}

Status FirstLast(const client::BatchView& batch, int64_t* first, int64_t* last) {
  if (batch.num_columns() != 1 || batch.num_rows() < 1 ||
      batch.column(0).type->id() != format::TypeId::kInt64) {
    return Status::Invalid("received a batch of ", batch.num_columns(), " columns and ",
                           batch.num_rows(), " rows; expected 1 int64 column and at least 1 row");
  }
  const auto values = batch.Values<int64_t>(0);
  *first = values.front();
  *last = values.back();
  return Status::OK();
}

int64_t ResidentBytes(int pid) {
  if (pid <= 0) return 0;
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/statm").c_str(), "r");
  if (f == nullptr) return 0;
  // statm: "size resident shared text lib data dt", in pages.
  char text[256] = {};
  const bool read = std::fgets(text, sizeof(text), f) != nullptr;
  (void)std::fclose(f);  // read-only: nothing to lose on close
  if (!read) return 0;
  char* end = nullptr;
  (void)std::strtoll(text, &end, 10);  // size: skipped
  if (end == text) return 0;
  const char* const second = end;
  const long long resident = std::strtoll(second, &end, 10);
  if (end == second) return 0;
  return resident * ::sysconf(_SC_PAGESIZE);
}

int64_t SegmentBytes(const std::string& prefix) {
  if (prefix.empty()) return 0;
  int64_t total = 0;
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return 0;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): readdir on a DIR stream of our own
  while (dirent* entry = ::readdir(dir)) {
    if (std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    struct stat st;
    if (::stat(("/dev/shm/" + std::string(entry->d_name)).c_str(), &st) == 0) {
      total += static_cast<int64_t>(st.st_blocks) * 512;
    }
  }
  ::closedir(dir);
  return total;
}

Status RunChildren(const std::vector<std::function<int()>>& bodies, const std::vector<int>& cpus,
                   Shared* shared, const std::function<void()>& on_wait) {
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
      PinToCpu(i < cpus.size() ? cpus[i] : -1);
      const int code = bodies[i]();
      (void)std::fflush(nullptr);
      ::_exit(code);
    }
    if (pid < 0) {
      status = Status::IOError("fork: ", ErrnoMessage(errno));
      shared->stop.store(1);
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
          shared->stop.store(1);
          kill_deadline = NowNs() + 5'000'000'000;
        }
      }
    }
    if (remaining == 0) break;
    if (g_interrupted && !stopping) {
      stopping = true;
      shared->stop.store(1);
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
    if (shared->error_claimed.load() != 0) return Status::IOError(shared->error);
    return Status::IOError(failure);
  }
  return Status::OK();
}

}  // namespace alkaid::tools::latency
