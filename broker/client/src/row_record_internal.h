#pragma once

// The inline payload of a channel slot carrying an UnsafeRow row batch
// (docs/CLIENT.md, "Row topics"). Host byte order: producer and consumers
// share a machine.

#include <cstdint>

namespace alkaid::client::internal {

inline constexpr uint32_t kRowRecordMagic = 0x524b4c41;  // "ALKR" little-endian
inline constexpr uint16_t kRowRecordVersion = 1;

struct RowBatchRecord {
  uint32_t magic = kRowRecordMagic;
  uint16_t version = kRowRecordVersion;
  uint16_t flags = 0;        // none defined; must be 0
  uint64_t body_length = 0;  // bytes of the block that form the row batch
  uint64_t num_rows = 0;
  uint64_t reserved = 0;
};
static_assert(sizeof(RowBatchRecord) == 32, "the row batch record is 32 bytes");

}  // namespace alkaid::client::internal
