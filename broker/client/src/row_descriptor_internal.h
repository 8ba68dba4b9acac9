#pragma once

// The inline payload of a channel slot carrying an UnsafeRow row batch
// (docs/CLIENT.md, "Row topics"). Host byte order: producer and consumers
// share a machine.

#include <cstdint>

namespace alkaid::client::internal {

inline constexpr uint32_t kRowDescriptorMagic = 0x524b4c41;  // "ALKR" little-endian
inline constexpr uint16_t kRowDescriptorVersion = 1;

struct RowDescriptor {
  uint32_t magic = kRowDescriptorMagic;
  uint16_t version = kRowDescriptorVersion;
  uint16_t flags = 0;        // none defined; must be 0
  uint64_t body_length = 0;  // bytes of the block that form the row batch
  uint64_t num_rows = 0;
  uint64_t reserved = 0;
};
static_assert(sizeof(RowDescriptor) == 32, "the row descriptor is 32 bytes");

}  // namespace alkaid::client::internal
