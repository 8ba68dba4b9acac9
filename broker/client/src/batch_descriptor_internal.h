#pragma once

// Private: what a BatchPublisher puts in a ring slot's inline payload (see
// docs/CLIENT.md). The body region travels as the slot's BlockHandle.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "alkaid/format/type.h"

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

/// Entries of the publisher's metadata cache and of the subscriber's decode
/// cache (distinct batch shapes remembered per topic).
inline constexpr size_t kShapeCacheEntries = 4;

/// True if every buffer of an array of this type (and of its children) is
/// fixed-width: its IPC metadata and the verdict of format::Validate depend
/// only on the array's structure (length, null count, offset, buffer
/// pointers and sizes, children), never on the values in its buffers. The
/// publisher's metadata cache and the subscriber's decode cache are limited
/// to such types; others (offsets, views, run ends, unions, dictionaries,
/// extensions) are encoded, decoded and validated per message.
inline bool IsStructuralLayout(const format::DataType& type) {
  using format::TypeId;
  const TypeId id = type.id();
  if (id <= TypeId::kFixedSizeBinary) return true;  // null, bool, numbers, temporals, fsb
  if (id == TypeId::kFixedSizeList || id == TypeId::kStruct) {
    for (const auto& f : type.fields()) {
      if (!IsStructuralLayout(*f->type())) return false;
    }
    return true;
  }
  return false;
}

}  // namespace alkaid::client::internal
