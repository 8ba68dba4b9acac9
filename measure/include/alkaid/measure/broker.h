#pragma once

/// \file
/// A broker of a measurement's own: `alkaid-broker` started on a private
/// socket, in a directory of its own, with segment names of its own, and
/// stopped (its leftovers removed) when the measurement ends.

#include <sys/types.h>

#include <string>

#include "alkaid/common/status.h"

namespace alkaid::measure {

/// A broker this process starts and stops. Its socket lies in a fresh
/// directory /tmp/<prefix>.XXXXXX and its segments are named
/// <prefix><pid>.*; it dies with the process that started it.
class PrivateBroker {
 public:
  PrivateBroker() = default;
  PrivateBroker(const PrivateBroker&) = delete;
  PrivateBroker& operator=(const PrivateBroker&) = delete;
  ~PrivateBroker() { Stop(); }

  /// Starts `binary` (empty: $ALKAID_BROKER_BIN, else alkaid-broker next to
  /// the running executable, in the build tree beside it (tools/alkaid or
  /// bench -> broker/daemon), else on PATH) and waits, at most 10 s,
  /// until it accepts connections. `who` names the caller in messages.
  Status Start(const std::string& prefix, const std::string& who, std::string binary = "");

  /// Stops the broker (SIGTERM, SIGKILL after 5 s), which unlinks its
  /// socket and every segment it handed out, then removes whatever is
  /// left: the directory, and /dev/shm objects of its name.
  void Stop();

  const std::string& socket() const { return socket_; }
  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }

 private:
  pid_t pid_ = -1;
  std::string dir_;
  std::string socket_;
  std::string name_;
};

}  // namespace alkaid::measure
