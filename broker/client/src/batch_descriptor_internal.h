#pragma once

// Private: what a BatchPublisher puts in a ring slot's inline payload (see
// docs/CLIENT.md). The body region travels as the slot's BlockHandle.

#include <cstdint>
#include <cstring>
#include <span>

namespace alkaid::client::internal {

/// "ALKB" little-endian.
inline constexpr uint32_t kBatchDescriptorMagic = 0x424b4c41U;
inline constexpr uint16_t kBatchDescriptorVersion = 1;
/// The Message flatbuffer follows the body in the region instead of the
/// descriptor.
inline constexpr uint16_t kMetadataInRegion = 1;

/// Fixed part of the slot payload; the metadata follows it when inline.
/// Copied in and out with memcpy: the slot bytes carry no alignment promise.
struct BatchDescriptor {
  uint32_t magic = kBatchDescriptorMagic;
  uint16_t version = kBatchDescriptorVersion;
  uint16_t flags = 0;
  uint64_t body_length = 0;      ///< bytes of the region that form the body
  uint64_t metadata_offset = 0;  ///< kMetadataInRegion: from the region start
  uint32_t metadata_length = 0;  ///< bytes of the Message flatbuffer
  uint32_t reserved = 0;
};
static_assert(sizeof(BatchDescriptor) == 32);

}  // namespace alkaid::client::internal
