#pragma once

// Segments left by an earlier broker of this name (docs/BROKER.md, "Start"):
// removed, or kept for a producer that still runs to re-adopt its channel.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "alkaid/common/status.h"
#include "daemon/log.h"

namespace alkaid::shm {
struct ChannelRemains;
}  // namespace alkaid::shm

namespace alkaid::broker::internal {

// A channel's names: the channel, its registry, the consumer segments the
// registry lists and the extensions its table lists (shm::RemoveChannel),
// but for the extensions with `remains`, which says which it kept and who
// was registered. A name already gone is no error.
void RemoveChannelNames(const std::string& channel, const Logger& log,
                        shm::ChannelRemains* remains = nullptr);

/// Thread safety: one thread (the broker's).
class Leftovers {
 public:
  // `drain_timeout`: how long the extensions of a dead producer are kept
  // for consumers still reading its channel (BrokerOptions::
  // dead_producer_drain).
  Leftovers(std::string shm_dir, std::string broker_name, std::chrono::milliseconds adopt_timeout,
            std::chrono::milliseconds drain_timeout, const Logger& log)
      : shm_dir_(std::move(shm_dir)),
        broker_name_(std::move(broker_name)),
        adopt_timeout_(adopt_timeout),
        drain_timeout_(drain_timeout),
        log_(log) {}

  // Looks at every shared-memory object named "<name>.*" (left by an
  // earlier broker of this name, or by its producers). A producer's channel
  // "<name>.<instance>.<pid>.p<id>.channel" (".ring" from the previous
  // release), with the segments named after it, whose pid still runs is
  // kept for re-adoption (the producer re-registers with it). The
  // extensions of a producer that died ("<channel>.x<id>") are kept for the
  // drain timeout: consumers that outlived the earlier broker may still be
  // reading its channel, and map an extension only when a message first
  // names it (this broker does not know them, so only time ends the wait).
  // Everything else is removed. Running processes that still map removed
  // objects are not affected; only the names go.
  void Scan();

  // Hands channel `channel` over to its producer, process `pid`, which
  // re-registers with it: it is no longer a leftover. KeyError if no such
  // channel is kept, PermissionDenied if it carries another pid.
  Status Claim(const std::string& channel, uint32_t pid);

  // Channels whose producer did not re-register within the adopt timeout
  // are removed; those whose producer died too, but for their extensions,
  // kept for the drain timeout as Scan's. Kept extensions past the drain
  // timeout are removed. With `all` (the broker stops) everything kept is
  // removed.
  void Expire(bool all);

  // Channels kept for re-adoption.
  std::size_t size() const { return kept_.size(); }
  // Extensions of dead producers kept for their consumers.
  std::size_t extensions_kept() const { return draining_.size(); }

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
  std::chrono::milliseconds drain_timeout_;
  const Logger& log_;
  std::map<std::string, Kept> kept_;  // by channel name
  // Extension names of dead producers, and since when they are kept.
  std::map<std::string, Clock::time_point> draining_;
};

}  // namespace alkaid::broker::internal
