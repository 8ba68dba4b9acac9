#pragma once

// The names of a producer's segments, as the broker hands them out and
// finds them again after a restart:
//   <broker name>.<instance>.<pid>.p<id>.ring            the channel
//   <broker name>.<instance>.<pid>.p<id>.ring.reg        its registry
//   <broker name>.<instance>.<pid>.p<id>.ring.c<k>.<tag> its consumers' segments
// (shm::ChannelProducer adds the last two). <instance> is the broker's
// "<name>.<start time in hex>"; the pid lets a restarted broker tell whose
// they are. ".bodies" is the name the protocol still reserves for a body
// segment beside the channel.

#include <cstdint>
#include <string>

namespace alkaid::broker::internal {

// "<instance>.<pid>.p<id>": what a producer's segment names start with.
std::string ProducerSegmentStem(const std::string& instance, uint32_t pid, uint64_t id);

// Parses a segment name of broker `broker_name`: its stem, the producer's
// pid, and whether it is the channel itself ("<stem>.ring"). False for a
// name that is not one of a producer's segments.
bool ParseSegmentName(const std::string& broker_name, const std::string& name, std::string* stem,
                      uint32_t* pid, bool* is_ring);

}  // namespace alkaid::broker::internal
