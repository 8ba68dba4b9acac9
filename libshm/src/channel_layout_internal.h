#pragma once

// Private: shared-memory layout of a channel (see docs/SHM_LAYOUT.md,
// "Channel"). Three kinds of segment, each written by one party:
//
//   <name>          the producer's: header, one control line per consumer,
//                   slots, shape table, arena. Consumers map it read-only.
//   <name>.reg      the registrations: a consumer claims an entry (one CAS)
//                   when it opens and marks it when it closes; the producer
//                   frees it. Touched only at open and close.
//   <name>.c<k>.<t> consumer k's own: its cursor, its wait announcement, its
//                   close state and its return queue. The producer maps it
//                   read-only.
//
// Nothing on the data path is written by two parties: the producer writes
// slots and its control lines, each consumer its own segment.

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "alkaid/shm/channel.h"
#include "alkaid/shm/hot_slot.h"
#include "layout_internal.h"

namespace alkaid::shm::internal {

/// "ALKCHAN1", "ALKCREG1", "ALKCCON1" as little-endian 64-bit integers.
inline constexpr uint64_t kChannelMagic = 0x314e4148434b4c41ULL;
inline constexpr uint64_t kRegistryMagic = 0x31474552434b4c41ULL;
inline constexpr uint64_t kConsumerSegMagic = 0x314e4f43434b4c41ULL;
/// 2: the arena grows by extension segments (ExtensionEntryData, the slot's
/// `extension`). 3: fixed blocks (the header's `fixed_*` fields, the
/// consumer segment's hold counts after its return queue; a slot's block
/// word with kFixedBlockFlag). 4: `closed` moved from line 2 (the
/// producer's per-publish line) to line 5 (written only when the extension
/// table changes and at close), so that a consumer's look for the end when
/// it finds nothing does not read the line the producer writes at every
/// publish. 5: a consumer's hold counts interleaved over whole lines
/// (HoldIndex: consecutive fixed blocks in different lines; the area is
/// HoldAreaBytes), so that the producer's look at the count of the block it
/// lends next is not in the line the consumer changes at every message.
inline constexpr uint32_t kChannelLayoutVersion = 5;

/// A slot's block word names fixed block i (ChannelOptions::fixed_block_bytes)
/// as descriptor kFixedBlockFlag | i, generation 0: such a block is not in the
/// producer's block table and is never returned through the return queue; a
/// consumer holds it by its hold count (ConsumerSegHeaderData, after the
/// return queue) instead.
inline constexpr uint32_t kFixedBlockFlag = uint32_t{1} << 31;
/// Fixed blocks a channel may have, at most.
inline constexpr uint32_t kMaxFixedBlocks = uint32_t{1} << 20;

/// Entries of a channel's extension table: extension segments mapped at
/// once, at most (with the channel segment's own, 64 arenas: one bit each
/// in a word).
inline constexpr uint32_t kMaxExtensions = 63;
/// A body's offset (ChannelSlotData::body_offset, a block's offset in the
/// producer's table) names its arena in the bits from kExtensionShift up: 0
/// the channel segment's own arena, k + 1 the extension in table entry k;
/// the bits below are the offset in that arena's segment data (segments are
/// at most kMaxSegmentSize = 2^40 bytes).
inline constexpr uint32_t kExtensionShift = 40;
inline constexpr uint64_t kExtensionOffsetMask = (uint64_t{1} << kExtensionShift) - 1;
/// The most ChannelOptions::max_arena_bytes may say (a sanity bound).
inline constexpr uint64_t kMaxArena = uint64_t{1} << 40;

/// Channel header: immutable geometry, then one line per writer role.
struct alignas(kCacheLineSize) ChannelHeaderData {
  // --- lines 0-1: immutable after creation. `magic` is stored last
  // (release) by ChannelProducer::Create; ChannelConsumer::Open loads it
  // (acquire, partner) before reading the rest.
  std::atomic<uint64_t> magic;
  uint32_t layout_version;
  uint32_t policy;           ///< SlowConsumerPolicy
  uint32_t slot_count;       ///< power of two
  uint32_t slot_size;        ///< 64 + inline_capacity
  uint32_t inline_capacity;  ///< multiple of 64
  uint32_t max_consumers;
  uint32_t block_count;      ///< block descriptors (live blocks at most)
  uint32_t return_capacity;  ///< entries per consumer return queue, power of two
  uint32_t shape_count;      ///< entries of the shape table
  uint32_t shape_size;       ///< bytes per shape entry: 64-byte header + inline_capacity
  uint32_t producer_pid;     ///< the producer; consumers check it is alive
  uint32_t extension_count;  ///< entries of the extension table (kMaxExtensions)
  uint64_t controls_offset;  ///< from the payload start
  uint64_t slots_offset;
  uint64_t shapes_offset;
  uint64_t arena_offset;  ///< the initial arena, in this segment
  uint64_t arena_size;
  uint64_t extensions_offset;  ///< the extension table
  uint64_t arena_max;          ///< the most the arena may grow to, extensions included
  /// Fixed blocks (layout 3): `fixed_count` blocks of `fixed_size` bytes
  /// (a multiple of 64) from `fixed_offset` (page-aligned, before the
  /// arena); 0 blocks: none (`fixed_offset` is then the arena's).
  uint64_t fixed_offset;
  uint32_t fixed_count;
  uint32_t fixed_size;

  // --- line 2: the producer, per publish; nothing else on it.
  /// Messages committed. Stored (seq_cst) after each slot commit. Read by
  /// consumers when they were lapped, when the stream is closed (its last
  /// message), when they wait for data (WaitForData, ArmDoorbell), never by
  /// a receive that finds nothing on an open stream.
  std::atomic<uint64_t> write_sequence;
  uint8_t pad2[kCacheLineSize - 8];

  // --- line 3: the consumers' futex. The producer bumps it (release) and
  // FUTEX_WAKEs when a consumer announced it sleeps (ConsumerSegHeaderData::
  // waiting); consumers FUTEX_WAIT on it (read-only mapping: waiting needs
  // read access only).
  std::atomic<uint32_t> data_futex;
  uint8_t pad3[kCacheLineSize - 4];

  // --- line 4: the producer's wait for room (kBlockProducer). Non-zero while
  // it waits: 1 + the index of the consumer whose cursor it waits on, and
  // the sequence that cursor must reach. A consumer whose cursor crosses it
  // FUTEX_WAKEs its own cursor word.
  std::atomic<uint64_t> space_waiting;
  std::atomic<uint64_t> space_target;
  uint8_t pad4[kCacheLineSize - 16];

  // --- line 5: what changes rarely, and a consumer that finds no message
  // looks at. `extensions_changed`: the producer bumps it (release) after
  // each extension table entry it fills or empties; a consumer compares it
  // (acquire) with the value it last saw, and lets go of the extensions the
  // producer released.
  std::atomic<uint64_t> extensions_changed;
  /// 1 once the producer closed the stream (release; consumers acquire).
  /// Layout 4: on line 2 before, where every receive that found nothing
  /// (a consumer that keeps up: once per message) pulled the line the
  /// producer's next publish stores into.
  std::atomic<uint32_t> closed;
  uint8_t pad5[kCacheLineSize - 12];
};
ALKAID_SHM_PLAIN_DATA(ChannelHeaderData, 6 * kCacheLineSize);
static_assert(offsetof(ChannelHeaderData, closed) == 5 * kCacheLineSize + 8,
              "layout 4: `closed` is on line 5, not on write_sequence's line");
static_assert(offsetof(ChannelHeaderData, fixed_offset) == 112 &&
                  offsetof(ChannelHeaderData, write_sequence) == 2 * kCacheLineSize,
              "the fixed blocks' fields fill what was line 1's padding");

/// The producer's line about consumer k (it alone writes it).
struct alignas(kCacheLineSize) ConsumerControlData {
  /// The registration word of the consumer the producer accepted in entry
  /// k, or 0. Stored (release) after `start`; the consumer acquires it.
  std::atomic<uint64_t> accepted;
  /// The first sequence the consumer reads.
  std::atomic<uint64_t> start;
  /// Entries of the consumer's return queue the producer has consumed.
  /// Stored (release) after draining; partner of the consumer's acquire
  /// load when its queue looks full.
  std::atomic<uint64_t> returns_read;
  uint8_t pad[kCacheLineSize - 24];
};
ALKAID_SHM_PLAIN_DATA(ConsumerControlData, kCacheLineSize);

/// Slot header: everything a consumer reads to learn of a message, in one
/// line. The inline payload follows as 64-bit atomic words. Its fields are
/// HotSlotData's (alkaid/shm/hot_slot.h, where they are declared once, for
/// the inline receive and publish too); this type pads them to the line.
struct alignas(kCacheLineSize) ChannelSlotData : HotSlotData {};
ALKAID_SHM_PLAIN_DATA(ChannelSlotData, kCacheLineSize);
static_assert(kHotFixedBlockFlag == kFixedBlockFlag);
static_assert(offsetof(ChannelSlotData, extension) == 48 &&
                  offsetof(ChannelSlotData, publish_ns) == 56,
              "the slot's fields keep the offsets of layout version 2");

/// Shape table entry header; the bytes follow as 64-bit words. Written once
/// by the producer before any message refers to it (release store of
/// `size_plus_one`), never changed after.
struct alignas(kCacheLineSize) ShapeEntryData {
  std::atomic<uint32_t> size_plus_one;  ///< 0: unused
  uint8_t pad[kCacheLineSize - 4];
};
ALKAID_SHM_PLAIN_DATA(ShapeEntryData, kCacheLineSize);

/// One entry of the extension table: an extension segment of the arena,
/// "<channel>.x<id>" (ChannelExtensionName). The producer stores `size`,
/// then `id` (release) once the segment exists and is complete; it stores
/// `id` 0 (release) before it removes the name. A consumer that meets a slot
/// naming an id it has not mapped loads `id` (acquire) and maps the segment.
struct alignas(kCacheLineSize) ExtensionEntryData {
  std::atomic<uint32_t> id;  ///< 0: unused
  uint32_t reserved;
  std::atomic<uint64_t> size;  ///< bytes of the segment's data
  uint8_t pad[kCacheLineSize - 16];
};
ALKAID_SHM_PLAIN_DATA(ExtensionEntryData, kCacheLineSize);

// --- registry segment ------------------------------------------------------

/// Registration states (low two bits of a registration word).
inline constexpr uint64_t kRegFree = 0;
inline constexpr uint64_t kRegClaimed = 1;    ///< the consumer is creating its segment
inline constexpr uint64_t kRegRequested = 2;  ///< its segment is ready; the producer accepts it
inline constexpr uint64_t kRegClosed = 3;     ///< it stopped receiving; the producer finishes it

constexpr uint64_t RegWord(uint32_t pid, uint32_t tag, uint64_t state) {
  return (uint64_t{pid} << 32) | (uint64_t{tag & 0x3fffffffU} << 2) | state;
}
constexpr uint32_t RegPid(uint64_t word) { return static_cast<uint32_t>(word >> 32); }
constexpr uint32_t RegTag(uint64_t word) { return static_cast<uint32_t>(word >> 2) & 0x3fffffffU; }
constexpr uint64_t RegState(uint64_t word) { return word & 3; }
constexpr uint64_t RegWithState(uint64_t word, uint64_t state) {
  return (word & ~uint64_t{3}) | state;
}

struct alignas(kCacheLineSize) RegistryHeaderData {
  // line 0: immutable.
  std::atomic<uint64_t> magic;
  uint32_t layout_version;
  uint32_t max_consumers;
  uint8_t pad0[kCacheLineSize - 16];
  // line 1: bumped by consumers (release) after a state change the producer
  // must act on; the producer compares it with the value it last handled
  // (acquire), one load per publish.
  std::atomic<uint64_t> changes;
  /// Tags for registration words, so a reused entry never shows an old word.
  std::atomic<uint32_t> tag_counter;
  uint8_t pad1[kCacheLineSize - 12];
};
ALKAID_SHM_PLAIN_DATA(RegistryHeaderData, 2 * kCacheLineSize);

struct alignas(kCacheLineSize) RegistrationData {
  /// RegWord(pid, tag, state). A consumer claims a free entry with a CAS
  /// (acq_rel), moves it claimed -> requested -> closed; the producer (or
  /// a reclaimer, for a dead consumer) stores 0 (release) when done.
  std::atomic<uint64_t> word;
  uint8_t pad[kCacheLineSize - 8];
};
ALKAID_SHM_PLAIN_DATA(RegistrationData, kCacheLineSize);

// --- consumer segment ------------------------------------------------------

/// Consumer close states (ConsumerSegHeaderData::state).
inline constexpr uint32_t kConsumerOpen = 0;
inline constexpr uint32_t kConsumerClosed = 1;  ///< receives no more; may still hold blocks
inline constexpr uint32_t kConsumerDone = 2;    ///< holds nothing; every return is queued

struct alignas(kCacheLineSize) ConsumerSegHeaderData {
  // line 0: immutable.
  std::atomic<uint64_t> magic;
  uint32_t layout_version;
  uint32_t index;            ///< its registration entry
  uint64_t registration;     ///< RegWord(pid, tag, kRegClaimed)
  uint32_t return_capacity;  ///< power of two
  uint32_t from_oldest;      ///< 1: start at the oldest message still held
  /// ChannelConsumerOptions::token: the number the consumer's owner tells
  /// its consumers apart by (a broker's client: one per Consumer in its
  /// process), which the producer reports with the consumer's figures. It
  /// lives in what was padding: 0 ("none") in older segments, so the
  /// layout version stays (docs/COMPATIBILITY.md).
  uint64_t token;
  /// Hold counts after the return queue (layout 3): the channel's
  /// fixed_count, 32-bit each (the area rounded up to 64 bytes).
  uint32_t fixed_count;
  uint8_t pad0[kCacheLineSize - 44];
  // line 1: the cursor, next sequence to read. Stored by the consumer
  // (release; seq_cst with kDropOldest, see docs); the producer loads it
  // when it needs room. Its low half is the futex word a producer waiting
  // for room sleeps on.
  std::atomic<uint64_t> cursor;
  uint8_t pad1[kCacheLineSize - 8];
  // line 2: 1 while the consumer is about to sleep on the channel's
  // data_futex (seq_cst store; the producer's seq_cst load after its
  // write_sequence store is the Dekker partner).
  std::atomic<uint32_t> waiting;
  // How the consumer sleeps in its current episode: 1 + the number of its
  // doorbell pipe's write end in its process (poll/epoll on the read end),
  // or 0 (the futex). Stored by the consumer (relaxed) before its seq_cst
  // store of an odd `waiting`, which orders it for the producer (whose
  // seq_cst load of `waiting` comes first). A producer waking a sleeper
  // with a doorbell writes a byte into it instead of the futex wake
  // (docs/SHM_LAYOUT.md, "Doorbells"). It lives in what was padding: 0 in
  // older segments.
  std::atomic<uint32_t> doorbell;
  uint8_t pad2[kCacheLineSize - 8];
  // line 3: close state (kConsumerOpen/Closed/Done), stored with release.
  std::atomic<uint32_t> state;
  uint8_t pad3[kCacheLineSize - 4];
  // then: std::atomic<uint64_t> returns[return_capacity], one per returned
  // block: ReturnWord(lap, descriptor, generation);
  // then: std::atomic<uint32_t> holds[HoldAreaBytes(fixed_count) / 4]: at
  // HoldIndex(i, HoldLinesLog2(fixed_count)) (version 5), how many of the
  // consumer's holders hold fixed block i (0 or 1 from an honest consumer).
  // Incremented by the consumer thread when it claims a message with that
  // block (seq_cst, before the cursor store that passes it), decremented
  // (release) by whichever thread lets go of the body. The producer reuses a
  // fixed block only when every accepted consumer's count is 0 and every
  // counted consumer's cursor passed its message (or, with kDropOldest, its
  // slot was overwritten): docs/SHM_LAYOUT.md, "Fixed blocks".
};
ALKAID_SHM_PLAIN_DATA(ConsumerSegHeaderData, 4 * kCacheLineSize);
static_assert(offsetof(ConsumerSegHeaderData, from_oldest) == 28 &&
                  offsetof(ConsumerSegHeaderData, token) == 32 &&
                  offsetof(ConsumerSegHeaderData, fixed_count) == 40 &&
                  offsetof(ConsumerSegHeaderData, cursor) == kCacheLineSize,
              "the consumer segment's fields keep the offsets of layout version 2");

/// A return queue entry: the block's generation and descriptor, and which
/// lap of the queue it was written in (1..128: never 0, so a zero word is
/// never taken for an entry, and different in consecutive laps, so an
/// entry of the previous lap is not either). `capacity_log2`: the queue
/// holds 2^capacity_log2 entries.
constexpr uint64_t ReturnLap(uint64_t position, uint32_t capacity_log2) {
  return ((position >> capacity_log2) & 0x7f) + 1;
}
constexpr uint64_t ReturnWord(uint64_t lap, uint32_t descriptor, uint32_t generation) {
  return (uint64_t{generation} << 32) | (uint64_t{descriptor & 0xffffffU} << 8) | lap;
}

/// Packs a block's identity for a slot: 0 means no body.
constexpr uint64_t PackBlock(uint32_t descriptor, uint32_t generation) {
  return (uint64_t{generation} << 32) | descriptor;
}

/// Bytes of a consumer's hold counts: none without fixed blocks, else
/// 2^HoldLinesLog2(fixed_count) lines of kHoldsPerLine counts.
constexpr uint64_t HoldAreaBytes(uint32_t fixed_count) {
  return fixed_count == 0 ? 0 : kCacheLineSize << HoldLinesLog2(fixed_count);
}
static_assert(kHoldsPerLine * sizeof(uint32_t) == kCacheLineSize);
static_assert(HoldAreaBytes(0) == 0 && HoldAreaBytes(1) == 64 && HoldAreaBytes(16) == 64 &&
                  HoldAreaBytes(17) == 128 && HoldAreaBytes(2048) == 8192 &&
                  HoldAreaBytes(2049) == 16384 && HoldAreaBytes(kMaxFixedBlocks) == 4194304,
              "hold areas: whole lines, a power of two of them, at most twice the counts");
// Block i's count: line i mod 2^log2, word i >> log2 (layout version 5):
// consecutive blocks in consecutive lines, every index inside the area.
static_assert(HoldIndex(0, 7) == 0 && HoldIndex(1, 7) == 16 && HoldIndex(127, 7) == 127 * 16 &&
                  HoldIndex(128, 7) == 1 && HoldIndex(2047, 7) == 2047 && HoldIndex(5, 0) == 5 &&
                  HoldIndex(kMaxFixedBlocks - 1, HoldLinesLog2(kMaxFixedBlocks)) ==
                      kMaxFixedBlocks - 1,
              "the hold counts' places of layout version 5");

/// Bytes of a consumer segment's data: header, return queue, hold counts.
constexpr uint64_t ConsumerSegmentBytes(uint32_t return_capacity, uint32_t fixed_count) {
  return sizeof(ConsumerSegHeaderData) + uint64_t{return_capacity} * 8 + HoldAreaBytes(fixed_count);
}

}  // namespace alkaid::shm::internal
