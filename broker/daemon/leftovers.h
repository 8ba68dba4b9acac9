#pragma once

// Segments left by an earlier broker of this name (docs/BROKER.md, "Start"):
// removed, or kept for a producer that still runs to re-adopt its channel.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "alkaid/common/status.h"
#include "daemon/log.h"

namespace alkaid::broker::internal {

// A channel's names: the channel, its registry, the consumer segments the
// registry lists (shm::RemoveChannel). A name already gone is no error.
void RemoveChannelNames(const std::string& channel, const Logger& log);

/// Thread safety: one thread (the broker's).
class Leftovers {
 public:
  Leftovers(std::string shm_dir, std::string broker_name, std::chrono::milliseconds adopt_timeout,
            const Logger& log)
      : shm_dir_(std::move(shm_dir)),
        broker_name_(std::move(broker_name)),
        adopt_timeout_(adopt_timeout),
        log_(log) {}

  // Looks at every shared-memory object named "<name>.*" (left by an
  // earlier broker of this name, or by its producers). A producer's channel
  // "<name>.<instance>.<pid>.p<id>.channel" (".ring" from the previous
  // release), with the segments named after it, whose pid still runs is
  // kept for re-adoption (the producer re-registers with it); everything
  // else is removed. Running processes that still map removed objects are
  // not affected; only the names go.
  void Scan();

  // Hands channel `channel` over to its producer, process `pid`, which
  // re-registers with it: it is no longer a leftover. KeyError if no such
  // channel is kept, PermissionDenied if it carries another pid.
  Status Claim(const std::string& channel, uint32_t pid);

  // Channels whose producer died, or did not re-register within the adopt
  // timeout (all of them with `all`), are removed.
  void Expire(bool all);

  // Channels kept for re-adoption.
  std::size_t size() const { return kept_.size(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Kept {
    uint32_t pid = 0;
    Clock::time_point since;
  };

  void Remove(const std::string& name) const;

  std::string shm_dir_;
  std::string broker_name_;
  std::chrono::milliseconds adopt_timeout_;
  const Logger& log_;
  std::map<std::string, Kept> kept_;  // by channel name
};

}  // namespace alkaid::broker::internal
