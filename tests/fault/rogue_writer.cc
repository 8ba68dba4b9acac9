// alkaid_fault_rogue_writer: plays a rogue producer for hostile_segment_test.
// Opens a topic's ring and body segments by name, like any process allowed
// to map them, and overwrites one committed message with hostile metadata.
//
//   alkaid_fault_rogue_writer RING BODIES SEQUENCE CASE
//
// The slot's seqlock word is left alone, so consumers take the corrupted
// message for a committed one. Exit 0 when the corruption was written,
// 2 on a usage or setup error (printed to stderr).

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "alkaid/shm/segment.h"
#include "batch_descriptor_internal.h"
#include "ring_layout_internal.h"

namespace {

using alkaid::client::internal::BatchDescriptor;
using alkaid::client::internal::kMetadataInRegion;
using alkaid::shm::internal::RingHeaderData;
using alkaid::shm::internal::SlotHeaderData;

int Fail(const std::string& why) {
  std::fprintf(stderr, "alkaid_fault_rogue_writer: %s\n", why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) return Fail("usage: RING BODIES SEQUENCE CASE");
  const std::string ring_name = argv[1];
  const std::string bodies_name = argv[2];
  const uint64_t sequence = std::stoull(argv[3]);
  const std::string_view what = argv[4];

  alkaid::shm::SegmentOpenOptions open_options;
  open_options.prefault = false;
  auto ring = alkaid::shm::Segment::Open(ring_name, alkaid::shm::SegmentKind::kRing, open_options);
  if (!ring.ok()) return Fail(ring.status().ToString());
  auto bodies =
      alkaid::shm::Segment::Open(bodies_name, alkaid::shm::SegmentKind::kBodies, open_options);
  if (!bodies.ok()) return Fail(bodies.status().ToString());

  std::byte* ring_payload = (*ring)->payload();
  const uint64_t ring_size = (*ring)->payload_size();
  // The rogue reads the header it is about to abuse, checking that its own
  // accesses stay inside the mapping.
  if (ring_size < sizeof(RingHeaderData)) return Fail("ring payload too small");
  const auto* header = reinterpret_cast<const RingHeaderData*>(ring_payload);
  const uint64_t slot_count = header->slot_count;
  const uint64_t slot_size = header->slot_size;
  const uint64_t inline_capacity = header->inline_capacity;
  if (slot_count == 0 || (slot_count & (slot_count - 1)) != 0 || slot_size < 64 ||
      header->slots_offset > ring_size || slot_count > (ring_size - header->slots_offset) / slot_size ||
      inline_capacity + sizeof(SlotHeaderData) > slot_size) {
    return Fail("unexpected ring geometry");
  }
  std::byte* slot_bytes = ring_payload + header->slots_offset + (sequence & (slot_count - 1)) * slot_size;
  auto* slot = reinterpret_cast<SlotHeaderData*>(slot_bytes);
  std::byte* inline_payload = slot_bytes + sizeof(SlotHeaderData);
  if (slot->sequence.load() != 2 * sequence + 2) {
    return Fail("slot does not hold committed message " + std::to_string(sequence));
  }
  const uint32_t payload_size = slot->payload_size.load();
  if (payload_size < sizeof(BatchDescriptor) || payload_size > inline_capacity) {
    return Fail("slot payload is not a batch descriptor");
  }
  BatchDescriptor desc;
  std::memcpy(&desc, inline_payload, sizeof(desc));
  auto write_desc = [&] { std::memcpy(inline_payload, &desc, sizeof(desc)); };

  if (what == "slot-payload-size") {
    slot->payload_size.store(0xFFFFFFF0u);
  } else if (what == "slot-no-body") {
    slot->flags.store(0);
  } else if (what == "slot-body-descriptor") {
    slot->body_descriptor.store(0xFFFFFFF0u);
  } else if (what == "slot-body-generation") {
    slot->body_generation.store(slot->body_generation.load() + 7777);
  } else if (what == "slot-body-offset") {
    slot->body_offset.store(uint64_t{1} << 62);
    slot->body_length.store(uint64_t{1} << 62);
  } else if (what == "slot-body-length") {
    slot->body_length.store(slot->body_length.load() + (uint64_t{1} << 33));
  } else if (what == "descriptor-magic") {
    desc.magic = 0xDEADBEEF;
    write_desc();
  } else if (what == "descriptor-body-length") {
    desc.body_length = uint64_t{1} << 40;
    write_desc();
  } else if (what == "descriptor-metadata-in-region") {
    desc.flags = kMetadataInRegion;
    desc.metadata_offset = ~uint64_t{0} - 8;
    desc.metadata_length = 0xFFFFFFFFu;
    write_desc();
  } else if (what == "descriptor-metadata-length") {
    desc.metadata_length = 0xFFFFFF00u;
    write_desc();
  } else if (what == "metadata-garbage") {
    // The inline Message flatbuffer replaced with bytes that point
    // everywhere (0xFF: offsets of -1, lengths of 2^32-1).
    std::memset(inline_payload + sizeof(desc), 0xFF, payload_size - sizeof(desc));
  } else if (what == "metadata-offsets") {
    // The flatbuffer's root offset and the table's vtable offset aimed past
    // the buffer, the rest left intact.
    if (payload_size < sizeof(desc) + 8) return Fail("metadata too short");
    const uint32_t far = 0x7FFFFFF0u;
    std::memcpy(inline_payload + sizeof(desc), &far, 4);
    std::memcpy(inline_payload + sizeof(desc) + 4, &far, 4);
  } else if (what == "body-garbage") {
    // The body bytes (validity bitmaps, offsets, data) overwritten with
    // 0xFF: every utf8 offset becomes -1.
    const uint64_t offset = slot->body_offset.load();
    const uint64_t length = slot->body_length.load();
    if (offset > (*bodies)->payload_size() || length > (*bodies)->payload_size() - offset) {
      return Fail("body outside the body segment");
    }
    std::memset((*bodies)->payload() + offset, 0xFF, length);
  } else {
    return Fail("unknown case '" + std::string(what) + "'");
  }
  return 0;
}
