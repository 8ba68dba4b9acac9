#pragma once

// Private: how a BatchPublisher lays a batch out in a channel message (see
// docs/SHM_LAYOUT.md, "Batches on a channel").

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "alkaid/format/type.h"

namespace alkaid::client::internal {

// How a BatchPublisher uses a channel message (shm::ChannelProducer):
// - body: the region (a loan of the channel's arena) holding the message
//   body from its start, and after it the Message flatbuffer when that is
//   in the region;
// - shape: the id of the shape-table entry holding the Message flatbuffer
//   (a batch of a shape published before), or 0;
// - inline payload: the Message flatbuffer when shape is 0 and it fits, or
//   a RegionMetadata record when it is in the region, or nothing;
// - user: the UserWord below.
// A message of a cached shape is then one slot line: nothing inline.

/// The kinds of message.
enum class MessageKind : uint8_t {
  kRecordBatch = 0,
  /// A DictionaryBatch (delta or replacement) that batches after it use.
  kDictionary = 1,
  /// A whole current dictionary, for consumers that do not know the state:
  /// consumers accepted since the last batch, or after a gap. Consumers
  /// that know the state skip it.
  kReplay = 2,
  /// After the replay messages (none if no dictionary was sent yet): the
  /// state is complete.
  kReplayEnd = 3,
};
inline constexpr uint8_t kMaxMessageKind = 3;

/// The channel message's user word.
struct UserWord {
  static constexpr int kLengthBits = 40;  // bodies up to 1 TiB
  static constexpr uint64_t kLengthMask = (uint64_t{1} << kLengthBits) - 1;
  static constexpr int kKindShift = 40;  // 8 bits
  static constexpr int kInRegionShift = 48;
  static constexpr int kGenerationShift = 49;  // 15 bits
  static constexpr uint64_t kGenerationMask = (uint64_t{1} << 15) - 1;

  uint64_t body_length = 0;  ///< bytes of the region that form the body
  uint8_t kind = 0;          ///< a MessageKind (checked by the reader)
  /// The Message flatbuffer lies in the region (a RegionMetadata inline).
  bool metadata_in_region = false;
  /// Schemas with dictionary-encoded fields: how many dictionary messages
  /// (kDictionary) the publisher sent before this message, modulo 2^15.
  /// A consumer that lost fewer than 2^15 messages and finds the same
  /// generation as before the gap missed no dictionary change.
  uint16_t dictionary_generation = 0;

  uint64_t Pack() const {
    return (body_length & kLengthMask) | (uint64_t{kind} << kKindShift) |
           (uint64_t{metadata_in_region} << kInRegionShift) |
           ((uint64_t{dictionary_generation} & kGenerationMask) << kGenerationShift);
  }
  /// Whether `w` is a record batch with its metadata not in the region and
  /// dictionary generation 0: everything above the body length as Pack
  /// writes it for such a batch. One compare (the consumer's fast path).
  static constexpr bool IsPlainRecordBatch(uint64_t w) {
    return (w >> kLengthBits) == (uint64_t{static_cast<uint8_t>(MessageKind::kRecordBatch)}
                                  << (kKindShift - kLengthBits));
  }
  static UserWord Unpack(uint64_t w) {
    UserWord u;
    u.body_length = w & kLengthMask;
    u.kind = static_cast<uint8_t>(w >> kKindShift);
    u.metadata_in_region = ((w >> kInRegionShift) & 1) != 0;
    u.dictionary_generation = static_cast<uint16_t>((w >> kGenerationShift) & kGenerationMask);
    return u;
  }
};

/// Inline payload of a message whose Message flatbuffer is in the region.
/// Copied in and out with memcpy.
struct RegionMetadata {
  uint64_t offset = 0;  ///< from the region start, at or after the body
  uint64_t length = 0;
};
static_assert(sizeof(RegionMetadata) == 16);

/// True if every buffer of an array of this type (and of its children) is
/// fixed-width: its IPC metadata and the verdict of format::Validate depend
/// only on the array's structure (length, null count, offset, buffer
/// pointers and sizes, children), never on the values in its buffers. The
/// publisher's metadata cache is limited to such types; others (offsets,
/// views, run ends, unions, dictionaries, extensions) are encoded per
/// message.
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
