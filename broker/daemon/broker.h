#pragma once

/// \file
/// The alkaid-broker daemon as a library: the control plane of Alkaid
/// (docs/BROKER.md). It names the segments of every producer, tracks who is
/// attached to which topic, enforces who may connect, notices dead processes
/// and removes what they leave behind. The data path (channels and their
/// arenas) never passes through it.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "alkaid/common/result.h"
#include "alkaid/common/status.h"

namespace alkaid::broker {

enum class LogLevel : uint8_t { kError = 0, kWarn, kInfo, kDebug };

/// Parses "error", "warn", "info" or "debug".
Result<LogLevel> ParseLogLevel(const std::string& text);

/// Options of a Broker; the defaults serve one user with no flags.
struct BrokerOptions {
  /// Unix socket path. Empty: protocol::DefaultSocketPath().
  std::string socket_path;
  /// Prefix of every segment name this broker hands out ("<name>."), so
  /// that a later broker of the same name finds and removes leftovers.
  /// [A-Za-z0-9_-], 1..64 characters.
  std::string name = "alkaid";
  /// Most bytes of shared memory the broker lets producers reserve.
  /// Unset: half of the size of shm_dir's file system, rounded down to
  /// whole MiB (32 MiB on a 64 MiB /dev/shm). Set: this many bytes, which
  /// must not exceed the free space of shm_dir at start; 0: no limit. The
  /// limit in force and where it came from are logged at start and
  /// reported by GetStats.
  std::optional<uint64_t> shm_limit;
  /// A group (name or number) whose members may connect besides the
  /// broker's own user; segments then get mode 0660. Empty: owner only.
  std::string group;
  LogLevel log_level = LogLevel::kInfo;
  /// How often the pids of connected processes are checked.
  std::chrono::milliseconds liveness_interval{200};
  /// Topic defaults for requests that leave them at 0: slots, each
  /// producer's initial arena (1 MiB; it grows by extensions the broker
  /// grants, AddExtension) and the most that arena may grow to (2 GiB, or
  /// the shm limit if smaller).
  uint32_t default_slot_count = 1024;
  uint64_t default_arena_bytes = uint64_t{1} << 20;
  uint64_t default_max_arena_bytes = uint64_t{2} << 30;
  /// A restarted broker keeps the segments of producers that still run
  /// for them to re-register with (docs/BROKER.md, "Broker restart");
  /// those not re-registered within this time are removed.
  std::chrono::milliseconds adopt_timeout{30000};
  /// A producer that dies leaves committed messages its consumers may not
  /// have read, some in extensions of its arena a consumer maps only when a
  /// message first names it: those names are kept until each consumer of
  /// the topic said it read the channel to its end or went, at most this
  /// long (a stopped consumer must not hold shared memory for ever;
  /// docs/BROKER.md, "A producer's death").
  std::chrono::milliseconds dead_producer_drain{30000};
  /// Directory holding the POSIX shared-memory objects (for the free-space
  /// check and the leftover scan).
  std::string shm_dir = "/dev/shm";
};

/// The daemon. Create() prepares everything (checks, cleanup, listening
/// socket); Run() serves until RequestStop(); the destructor removes every
/// segment name handed out and the socket.
///
/// Thread safety: Run() on one thread; RequestStop() from any thread or a
/// signal handler (it only writes to a pipe).
class Broker {
 public:
  ~Broker();
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  /// Validates the options, chooses the shared-memory limit (an explicit
  /// shm_limit above /dev/shm's free space is OutOfMemory), refuses to
  /// start if another broker answers on the socket (AlreadyExists),
  /// removes a stale socket file and the segments an earlier broker of the
  /// same name left (keeping, for re-adoption, those of producers that
  /// still run), and starts listening.
  static Result<std::unique_ptr<Broker>> Create(const BrokerOptions& options);

  /// Serves clients until RequestStop(). Returns the first fatal error.
  Status Run();

  /// Makes Run() return soon. Async-signal-safe.
  void RequestStop();

  const std::string& socket_path() const;

 private:
  struct Server;  // broker_internal.h
  explicit Broker(std::unique_ptr<Server> server);
  std::unique_ptr<Server> server_;
};

}  // namespace alkaid::broker
