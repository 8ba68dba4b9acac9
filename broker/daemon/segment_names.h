#pragma once

// The names of a producer's segments, as the broker hands them out and
// finds them again after a restart:
//   <broker name>.<instance>.<pid>.p<id>.channel            the channel
//   <broker name>.<instance>.<pid>.p<id>.channel.reg        its registry
//   <broker name>.<instance>.<pid>.p<id>.channel.c<k>.<tag> its consumers' segments
//   <broker name>.<instance>.<pid>.p<id>.channel.x<id>      its arena's extensions
// (shm::ChannelProducer adds the last three). <instance> is the broker's
// "<name>.<start time in hex>"; the pid lets a restarted broker tell whose
// they are. A broker of the previous release named the channel
// "<stem>.ring" (kLegacyChannelSuffix): the sweep of leftovers knows both.

#include <cstdint>
#include <string>

namespace alkaid::broker::internal {

// What a producer's channel name ends with, after its stem.
inline constexpr const char* kChannelSuffix = ".channel";
// The same, as the previous release named it (deprecated: known to the
// sweep of leftovers for one release, never handed out).
inline constexpr const char* kLegacyChannelSuffix = ".ring";

// "<instance>.<pid>.p<id>": what a producer's segment names start with.
std::string ProducerSegmentStem(const std::string& instance, uint32_t pid, uint64_t id);

// Parses a segment name of broker `broker_name`, in either form: its stem,
// the producer's pid, and whether it is the channel itself ("<stem>.channel"
// or "<stem>.ring"). False for a name that is not one of a producer's
// segments.
bool ParseSegmentName(const std::string& broker_name, const std::string& name, std::string* stem,
                      uint32_t* pid, bool* is_channel);

// Whether a name ParseSegmentName accepted is an extension of an arena
// ("<channel>.x<id>", id from 1).
bool IsExtensionName(const std::string& name);

}  // namespace alkaid::broker::internal
