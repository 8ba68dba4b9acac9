// alkaid_fault_rogue_writer: plays a rogue producer for hostile_segment_test.
// Opens a topic's channel segment by name, like any process allowed to map
// it for writing, and overwrites one committed message with hostile fields.
//
//   alkaid_fault_rogue_writer CHANNEL SEQUENCE CASE
//
// The slot's sequence word is left alone, so consumers take the corrupted
// message for a committed one. Exit 0 when the corruption was written,
// 2 on a usage or setup error (printed to stderr).

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <string_view>

#include "alkaid/shm/segment.h"
#include "batch_layout_internal.h"
#include "channel_layout_internal.h"

namespace {

using alkaid::client::internal::RegionMetadata;
using alkaid::client::internal::UserWord;
using alkaid::shm::internal::ChannelHeaderData;
using alkaid::shm::internal::ChannelSlotData;

int Fail(const std::string& why) {
  std::fprintf(stderr, "alkaid_fault_rogue_writer: %s\n", why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return Fail("usage: CHANNEL SEQUENCE CASE");
  const std::string channel_name = argv[1];
  const uint64_t sequence = std::stoull(argv[2]);
  const std::string_view what = argv[3];

  alkaid::shm::SegmentOpenOptions open_options;
  open_options.prefault = false;
  auto channel =
      alkaid::shm::Segment::Open(channel_name, alkaid::shm::SegmentKind::kChannel, open_options);
  if (!channel.ok()) return Fail(channel.status().ToString());

  std::byte* payload = (*channel)->data();
  const uint64_t size = (*channel)->data_size();
  // The rogue reads the header it is about to abuse, checking that its own
  // accesses stay inside the mapping.
  if (size < sizeof(ChannelHeaderData)) return Fail("channel payload too small");
  const auto* header = reinterpret_cast<const ChannelHeaderData*>(payload);
  const uint64_t slot_count = header->slot_count;
  const uint64_t slot_size = header->slot_size;
  const uint64_t inline_capacity = header->inline_capacity;
  if (slot_count == 0 || (slot_count & (slot_count - 1)) != 0 || slot_size < 64 ||
      header->slots_offset > size || slot_count > (size - header->slots_offset) / slot_size ||
      inline_capacity + sizeof(ChannelSlotData) > slot_size) {
    return Fail("unexpected channel geometry");
  }
  std::byte* slot_bytes =
      payload + header->slots_offset + (sequence & (slot_count - 1)) * slot_size;
  auto* slot = reinterpret_cast<ChannelSlotData*>(slot_bytes);
  std::byte* inline_payload = slot_bytes + sizeof(ChannelSlotData);
  if (slot->sequence.load() != 2 * sequence + 2) {
    return Fail("slot does not hold committed message " + std::to_string(sequence));
  }
  const uint32_t payload_size = slot->payload_size.load();
  UserWord user = UserWord::Unpack(slot->user.load());
  auto write_user = [&] { slot->user.store(user.Pack()); };

  if (what == "slot-payload-size") {
    slot->payload_size.store(0xFFFFFFF0u);
  } else if (what == "slot-no-body") {
    slot->block.store(0);
  } else if (what == "slot-body-offset") {
    slot->body_offset.store(uint64_t{1} << 62);
    slot->body_length.store(uint64_t{1} << 62);
  } else if (what == "slot-body-length") {
    slot->body_length.store(slot->body_length.load() + (uint64_t{1} << 33));
  } else if (what == "slot-extension-missing") {
    // The body said to lie in an extension of the arena that the channel's
    // extension table does not hold (entry 0, an id never granted).
    slot->extension.store(123456789u);
    slot->body_offset.store(uint64_t{1} << alkaid::shm::internal::kExtensionShift);
  } else if (what == "slot-extension-entry") {
    // An extension entry far outside the table.
    slot->extension.store(1);
    slot->body_offset.store(uint64_t{200} << alkaid::shm::internal::kExtensionShift);
  } else if (what == "slot-shape") {
    slot->shape.store(0xFFFFu);
  } else if (what == "user-kind") {
    user.kind = 200;
    write_user();
  } else if (what == "user-body-length") {
    user.body_length = uint64_t{1} << 39;
    write_user();
  } else if (what == "user-metadata-in-region") {
    // The flag set over an inline Message: its bytes are not a record.
    user.metadata_in_region = true;
    write_user();
  } else if (what == "region-metadata-outside" || what == "region-metadata-in-body") {
    // A well-formed region-metadata record whose place is not after the
    // body inside the block: far past its end, or over the body itself.
    if (inline_capacity < sizeof(RegionMetadata)) return Fail("no room for a record");
    RegionMetadata where;
    where.offset = what == "region-metadata-outside" ? uint64_t{1} << 40 : 0;
    where.length = 200;
    std::memcpy(inline_payload, &where, sizeof(where));
    slot->payload_size.store(sizeof(where));
    user.metadata_in_region = true;
    write_user();
  } else if (what == "metadata-garbage") {
    // The inline Message flatbuffer replaced with bytes that point
    // everywhere (0xFF: offsets of -1, lengths of 2^32-1).
    if (payload_size == 0 || payload_size > inline_capacity) return Fail("no inline metadata");
    std::memset(inline_payload, 0xFF, payload_size);
  } else if (what == "metadata-offsets") {
    // The flatbuffer's root offset and the table's vtable offset aimed past
    // the buffer, the rest left intact.
    if (payload_size < 8 || payload_size > inline_capacity) return Fail("metadata too short");
    const uint32_t far = 0x7FFFFFF0u;
    std::memcpy(inline_payload, &far, 4);
    std::memcpy(inline_payload + 4, &far, 4);
  } else if (what == "body-garbage") {
    // The body bytes (validity bitmaps, offsets, data) overwritten with
    // pseudo-random bytes (a fixed seed: the same garbage each run): offsets
    // of every size and sign, some in range, most not.
    const uint64_t offset = slot->body_offset.load();
    const uint64_t length = slot->body_length.load();
    if (offset > size || length > size - offset) return Fail("body outside the channel");
    std::mt19937_64 garbage(0x5EEDB0D1u);
    for (uint64_t i = 0; i < length; ++i) {
      payload[offset + i] = static_cast<std::byte>(garbage() >> 56);
    }
  } else {
    return Fail("unknown case '" + std::string(what) + "'");
  }
  return 0;
}
