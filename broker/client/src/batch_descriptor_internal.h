#pragma once

// Private: what a BatchPublisher puts in a ring slot's inline payload (see
// docs/CLIENT.md). The body region travels as the slot's BlockHandle.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "alkaid/format/type.h"
#include "alkaid/shm/body_allocator.h"

namespace alkaid::client::internal {

/// "ALKB" little-endian.
inline constexpr uint32_t kBatchDescriptorMagic = 0x424b4c41U;
inline constexpr uint16_t kBatchDescriptorVersion = 2;
/// The Message flatbuffer follows the body in the region instead of the
/// descriptor.
inline constexpr uint16_t kMetadataInRegion = 1;
/// The message is a DictionaryBatch (else a RecordBatch).
inline constexpr uint16_t kDictionaryMessage = 2;

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
  /// Record batches of a schema with dictionary-encoded fields: the ring
  /// sequence that follows the last dictionary message published before
  /// this batch, naming the dictionary state the batch decodes with (see
  /// docs/CLIENT.md, "Dictionaries"). 0 otherwise.
  uint64_t dictionary_epoch = 0;
};
static_assert(sizeof(BatchDescriptor) == 40);

/// A block handle as four words' worth of fields.
inline std::array<uint64_t, 2> PackHandle(const shm::BlockHandle& h) {
  return {h.offset, (static_cast<uint64_t>(h.generation) << 32) | h.descriptor};
}

/// The ring sideband of a topic with dictionaries (RingProducer::SetSideband):
/// the newest dictionary snapshot block of the producer's body segment and
/// the epoch it describes. `pending` is set while the producer publishes
/// dictionary messages the snapshot does not describe yet; when it is clear,
/// the snapshot covers every dictionary message published so far.
struct DictionarySideband {
  shm::BlockHandle block;  ///< generation 0: no snapshot yet
  uint64_t epoch = 0;
  bool pending = false;

  static constexpr uint64_t kPendingBit = uint64_t{1} << 63;

  std::array<uint64_t, 4> ToWords() const {
    const auto h = PackHandle(block);
    return {h[0], h[1], block.length | (pending ? kPendingBit : 0), epoch};
  }
  static DictionarySideband FromWords(const std::array<uint64_t, 4>& w) {
    DictionarySideband s;
    s.block.offset = w[0];
    s.block.generation = static_cast<uint32_t>(w[1] >> 32);
    s.block.descriptor = static_cast<uint32_t>(w[1]);
    s.block.length = w[2] & ~kPendingBit;
    s.pending = (w[2] & kPendingBit) != 0;
    s.epoch = w[3];
    return s;
  }
};

/// "ALKDSNAP" little-endian.
inline constexpr uint64_t kSnapshotMagic = 0x50414e53444b4c41ULL;

/// Head of a dictionary snapshot block: the state of every dictionary at
/// `epoch` (one whole DictionaryBatch message per id, framed like an IPC
/// stream without schema, nested dictionaries first) follows it. Snapshots
/// of earlier epochs that batches still in the ring may carry are chained
/// through `previous` (generation 0: none kept), newest first, epochs
/// strictly decreasing.
struct SnapshotHeader {
  uint64_t magic = kSnapshotMagic;
  uint64_t epoch = 0;
  uint64_t messages_length = 0;  ///< bytes of messages after the header
  uint64_t previous_offset = 0;
  uint64_t previous_length = 0;
  uint32_t previous_generation = 0;
  uint32_t previous_descriptor = 0;
  uint64_t previous_epoch = 0;
  uint64_t reserved = 0;

  shm::BlockHandle previous() const {
    return {previous_offset, previous_length, previous_generation, previous_descriptor};
  }
};
static_assert(sizeof(SnapshotHeader) == 64);

/// Snapshots a producer keeps besides the newest (older ones are released
/// once no batch of their epoch can be left in the ring, or beyond this
/// count).
inline constexpr size_t kKeptSnapshots = 8;

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
