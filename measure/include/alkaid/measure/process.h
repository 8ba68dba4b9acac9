#pragma once

/// \file
/// The processes of a measurement: CPU pinning, forking children that
/// measure, waiting for them, and Ctrl-C. Two spinning processes left on
/// one CPU measure the scheduler's time slice (~4 ms), not the transport:
/// the ping-pongs pin their two sides to two CPUs.

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "alkaid/common/status.h"

namespace alkaid::measure {

/// The CPUs this process may run on, ascending.
std::vector<int> AllowedCpus();

/// Installs a SIGINT/SIGTERM handler that sets Interrupted() (no
/// SA_RESTART, so that blocking reads return EINTR).
void InstallInterruptHandler();
/// Whether SIGINT or SIGTERM reached this process (or RunChildren saw one).
bool Interrupted();

/// What the children of a run share with the parent, in a shared mapping
/// (zero-filled memory is a fresh one): a stop flag and the first error.
struct ChildControl {
  std::atomic<int> stop;  ///< parent -> children: give up now
  std::atomic<int> error_claimed;
  char error[1024];  ///< the first child error, "who: status"
};

/// Whether the children should give up: interrupted, or told to stop.
inline bool Stopping(const ChildControl& control) {
  return Interrupted() || control.stop.load() != 0;
}

/// Records a child's error in `control` (the first one wins).
void ReportChildError(ChildControl* control, const std::string& who, const Status& status);

/// The exit code of a child that ran `body`: 0 if it succeeded, 3 if it
/// failed with Cancelled while the run was stopping, else 1 with the error
/// recorded as `who`'s.
int ChildExitCode(ChildControl* control, const std::string& who, const Status& status);

/// Runs each function in a forked child (pinned to `cpus[i]` when given;
/// the function's return value is the exit code), then waits for all of
/// them. `on_wait` is called about every 200 ms while waiting (progress),
/// or never if null. When a child fails, or on interruption, sets
/// control->stop, gives the children 5 s, then kills what is left. Returns
/// OK if every child exited 0, Cancelled if interrupted, otherwise an
/// IOError with the first child error recorded in `control`.
Status RunChildren(const std::vector<std::function<int()>>& bodies, const std::vector<int>& cpus,
                   ChildControl* control, const std::function<void()>& on_wait);

}  // namespace alkaid::measure
