#pragma once

// The broker's pieces (docs/ARCHITECTURE.md, "The broker"):
// - broker.cc: the server, Broker::Server: the socket (listening, accepting
//   with peer credentials, framing requests, checking the first one's
//   protocol version, writing replies and events), liveness, shutdown;
// - registry.cc: topics, producers and consumers, and the handler of each
//   request, for a peer, without a socket (registry.h);
// - leftovers.cc: segments left by an earlier broker: removed, or kept for
//   a producer that still runs to re-adopt (leftovers.h);
// - segment_names.cc: the names of a producer's segments, built and parsed;
// - shm_limit.cc: the shared-memory limit, from --shm-limit or /dev/shm's
//   size.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "daemon/broker.h"
#include "daemon/leftovers.h"
#include "daemon/log.h"
#include "daemon/registry.h"
#include "daemon/shm_limit.h"
#include "protocol/control.h"
#include "protocol/frame.h"

namespace alkaid::broker {

namespace p = protocol;

// The server: accepts connections, frames what they send into requests for
// the registry, and sends the registry's replies and events.
struct Broker::Server {
  using Clock = std::chrono::steady_clock;

  struct Connection {
    int fd = -1;
    uint32_t pid = 0;
    uint32_t uid = 0;
    uint32_t gid = 0;
    p::FrameAssembler in;
    std::vector<uint8_t> out;
    bool closing = false;
    // Its first request named our control protocol version.
    bool version_checked = false;

    internal::Peer peer() const { return {fd, pid, uid, gid}; }
  };

  explicit Server(const BrokerOptions& o)
      : options(o),
        log(o.name, o.log_level),
        leftovers(o.shm_dir, o.name, o.adopt_timeout, o.dead_producer_drain, log) {}

  BrokerOptions options;
  internal::Logger log;
  internal::Leftovers leftovers;
  // Made once the shm limit is chosen (Create).
  std::unique_ptr<internal::Registry> registry;
  // The limit in force (options.shm_limit, or the default from shm_dir's
  // size) and the size of shm_dir's file system, both taken at start.
  internal::ShmLimit shm_limit;
  uint64_t shm_total = 0;
  std::string socket_path;
  std::string instance;  // "<name>.<hex start time>": prefix of segment names
  int listen_fd = -1;
  int stop_pipe[2] = {-1, -1};
  bool have_group = false;
  gid_t group_gid = 0;
  Clock::time_point started = Clock::now();
  std::map<int, Connection> connections;
  uint64_t rejected_frames = 0;

  template <typename... Args>
  void Log(LogLevel level, Args&&... args) {
    log(level, std::forward<Args>(args)...);
  }

  Status ResolveGroup();

  Status Listen();

  // Chooses shm_limit (internal::ChooseShmLimit) from statvfs of shm_dir
  // and says which limit is in force and where it came from.
  Status ChooseShmLimit();

  void Send(Connection& c, const p::ServerMessage& message);

  void Flush(Connection& c);

  void SendReply(Connection& c, p::Reply reply);

  void SendError(Connection& c, uint64_t request_id, Status status);

  void SendEvents(const std::vector<internal::Outbound>& events);

  void Accept();

  void CloseConnection(int fd, const std::string& why);

  void ReadFrom(int fd);

  // One request of connection `c`, to the registry (GetStats here).
  void Handle(Connection& c, const p::Request& request);

  p::Reply Stats() const;

  void CheckLiveness();

  void Shutdown();
};

}  // namespace alkaid::broker
