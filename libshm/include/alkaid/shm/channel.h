#pragma once

/// \file
/// A channel: one producer, up to `max_consumers` consumers in any
/// processes, every consumer sees every message once, in order; each
/// message may carry a body, a block of the producer's arena that consumers
/// read in place.
///
/// What it costs and why (docs/SHM_LAYOUT.md, "Channel"):
/// - A message is one slot line the producer alone writes: sequence, where
///   the body is, its length, a shape id, and optionally inline bytes.
/// - Nothing on the data path is written by two parties. Block lifetime is
///   kept in the producer's private memory: each consumer returns the blocks
///   it received through a queue in its own segment, which the producer
///   drains when it needs space. No shared read-modify-write per message.
/// - Consumers map the producer's segment read-only: a consumer that writes
///   into a body faults in its own process, and the others go on intact.
/// - Receiving allocates nothing: a ChannelMessage is caller-owned and
///   reused; it holds its body until refilled or reset.
///
/// Slow consumers: kBlockProducer makes Publish wait for the slowest active
/// consumer (up to publish_timeout); kDropOldest overwrites, and the slow
/// consumer alone loses messages and is told how many.
///
/// Crashes: a consumer that dies is noticed by the producer whenever it
/// needs room or space, and in Poll() (pid checks at most every
/// ChannelOptions::liveness_interval), which releases exactly what it held
/// and removes its segment; a consumer that opens may also take over a dead
/// one's registration. Publishing itself makes no pid check (no system call
/// on the data path). A producer that dies leaves its names for
/// RemoveChannel().

#include <cstdint>
#include <string_view>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/status.h"
#include "alkaid/shm/channel_consumer.h"
#include "alkaid/shm/channel_producer.h"

namespace alkaid::shm {

/// What a dead producer's channel leaves to consumers still reading it
/// (RemoveChannel's `remains`).
struct ChannelRemains {
  /// The ids of the extensions its table lists, whose names were kept: the
  /// caller removes them later (ChannelExtensionName).
  std::vector<uint32_t> extensions;
  /// The pids of the consumers registered on it when it was removed (those
  /// that may still read it, from their own mapping; a pid may be gone).
  std::vector<uint32_t> consumer_pids;
};

/// Removes every name of channel `name`: the channel, its registry, the
/// consumer segments and the extensions it lists. For a producer that died;
/// a live producer removes its names itself. KeyError if the channel segment
/// is not there. With `remains`, the extensions' names stay (a dead
/// producer's consumers may still have to map them) and `*remains` says
/// which, and who was registered.
ALKAID_EXPORT Status RemoveChannel(std::string_view name, ChannelRemains* remains = nullptr);

}  // namespace alkaid::shm