// libFuzzer target for the channel (libshm/channel.h) against a hostile
// party on either side of the shared memory:
//
// - a hostile producer: after honest messages, the input's patches are
//   written over the channel segment (header, control lines, slots, shape
//   table; through a writable mapping of our own, since consumers map it
//   read-only). A consumer then opens it, receives and reads the shapes.
//   Every span it hands out must lie inside the segment it mapped (the
//   channel, or the extension of the arena the slot names: one honest
//   message lies in one), and every byte of it is read. After its first
//   receive (the Result TryReceive, which accepts it), the consumer
//   receives by the Result-free one, whose inline way (TryReceiveHot)
//   takes the messages without inline bytes (1 and 2) if their slots check out.
// - hostile consumers: the patches are also written over a consumer's own
//   segment (cursor, return queue) and the registry; the producer then
//   polls, lends and publishes. It must neither crash nor free a block it
//   still lent out.
//
// Input: one byte choosing the targets (bit 0 the channel, 1 the consumer's
// segment, 2 the registry) and the channel's mode (bit 3: fixed blocks),
// then patches of [u32 offset][u8 length][bytes], the offset taken modulo
// the target's size.

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "alkaid/shm/channel.h"
#include "alkaid/shm/segment.h"
#include "channel_layout_internal.h"

namespace shm = alkaid::shm;
using namespace std::chrono_literals;

namespace {

struct Patches {
  const uint8_t* data;
  size_t size;
  size_t pos = 0;

  // Applies every patch to [base, base + n).
  void ApplyTo(std::byte* base, uint64_t n) {
    pos = 0;
    while (pos + 5 <= size && n > 0) {
      uint32_t offset;
      std::memcpy(&offset, data + pos, 4);
      const uint8_t length = data[pos + 4];
      pos += 5;
      const size_t take = std::min<size_t>(length, size - pos);
      const uint64_t at = offset % n;
      const size_t fit = static_cast<size_t>(std::min<uint64_t>(take, n - at));
      std::memcpy(base + at, data + pos, fit);
      pos += take;
    }
  }
};

// Where the channel's extension table is (the header's extensions_offset),
// read before any patch: consumers opened before the patches keep the
// geometry they checked then; one opened after is refused if the header no
// longer adds up.
uint64_t ExtensionTable(const shm::Segment& rw) {
  uint64_t table;
  std::memcpy(&table, rw.data() + offsetof(shm::internal::ChannelHeaderData, extensions_offset), 8);
  return table;
}

// The id in entry `entry` of the extension table at `table` (0 if the
// entry lies outside the segment).
uint32_t ExtensionId(const shm::Segment& rw, uint64_t table, uint64_t entry) {
  using shm::internal::ExtensionEntryData;
  if (table > rw.data_size() || (entry + 1) * sizeof(ExtensionEntryData) > rw.data_size() - table) {
    return 0;
  }
  uint32_t id;
  std::memcpy(&id, rw.data() + table + entry * sizeof(ExtensionEntryData), 4);
  return id;
}

// A received body lies inside the segment its offset names: the channel
// (`rw`'s size, mapped at `bases[0]` in the consumer: the same for all its
// messages) or extension entry k (mapped at bases[k + 1], as big as the
// segment the entry names), and every byte of it can be read.
void CheckBody(const shm::ChannelMessage& message, const std::string& name, const shm::Segment& rw,
               uint64_t table, std::vector<const std::byte*>* bases) {
  const std::span<const std::byte> body = message.body();
  if (body.empty()) return;
  const uint64_t arena = message.body_offset() >> 40;
  const uint64_t local = message.body_offset() & ((uint64_t{1} << 40) - 1);
  uint64_t size = rw.data_size();
  if (arena != 0) {
    const uint32_t id = ExtensionId(rw, table, arena - 1);
    auto ext = shm::Segment::Open(shm::ChannelExtensionName(name, id),
                                  shm::SegmentKind::kChannelExtension);
    if (id == 0 || !ext.ok()) std::abort();  // delivered from an extension that is not there
    size = (*ext)->data_size();
  }
  const std::byte* mapped = body.data() - local;
  if (bases->size() <= arena) bases->resize(arena + 1, nullptr);
  if ((*bases)[arena] == nullptr) (*bases)[arena] = mapped;
  if (mapped != (*bases)[arena] || local > size || body.size() > size - local) std::abort();
  volatile uint8_t sink = 0;
  for (std::byte b : body) sink = sink + static_cast<uint8_t>(b);
  (void)sink;
}

void CheckInside(std::span<const std::byte> span) {
  volatile uint8_t sink = 0;
  for (std::byte b : span) sink = sink + static_cast<uint8_t>(b);
  (void)sink;
}

// The segment of the one consumer registered on channel `name`, found
// through the registration words (RegWord: pid << 32 | tag << 2 | state,
// 64-byte entries after a 128-byte header); null if there is none.
std::shared_ptr<shm::Segment> OwnSegment(const std::string& name, uint32_t max_consumers) {
  auto reg = shm::Segment::Open(name + ".reg", shm::SegmentKind::kChannelRegistry);
  if (!reg.ok()) std::abort();
  for (uint32_t k = 0; k < max_consumers; ++k) {
    uint64_t word;
    std::memcpy(&word, (*reg)->data() + 128 + std::size_t{64} * k, 8);
    if (word == 0) continue;
    const uint32_t tag = static_cast<uint32_t>(word >> 2) & 0x3fffffffU;
    auto seg = shm::Segment::Open(name + ".c" + std::to_string(k) + "." + std::to_string(tag),
                                  shm::SegmentKind::kChannelConsumer);
    if (seg.ok()) return std::move(*seg);
  }
  return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static int run = 0;
  const std::string name =
      "alkaid_fz" + std::to_string(::getpid()) + "_" + std::to_string(run++ % 4);
  (void)shm::RemoveChannel(name);  // a previous run that aborted
  shm::ChannelOptions o;
  o.slot_count = 4;
  o.inline_capacity = 64;
  o.arena_bytes = 16 << 10;
  o.max_blocks = 16;
  o.max_consumers = 2;
  o.shape_count = 2;
  o.shape_bytes = 128;
  o.publish_timeout = 1ms;
  o.publish_spin = 0ms;
  o.space_timeout = 1ms;
  o.liveness_interval = 0ms;
  o.max_arena_bytes = 256 << 10;
  // Bit 3: fixed blocks of 128 bytes, which the first two messages' 100
  // bytes and the later 64-byte loans take (held by a count in the consumer's
  // segment, which the patches below may rewrite).
  if ((data[0] & 8) != 0) {
    o.fixed_block_bytes = 128;
    o.fixed_block_count = 8;
  }
  auto producer = shm::ChannelProducer::Create(name, o);
  if (!producer.ok()) std::abort();
  auto& p = **producer;
  const std::byte shape[40] = {};
  (void)p.AddShape(shape);
  shm::ChannelConsumerOptions co;
  co.wait_mode = shm::WaitMode::kBusyPoll;
  auto honest = shm::ChannelConsumer::Open(name, co);
  if (!honest.ok()) std::abort();
  // Its own segment, mapped while it has a name: a consumer removes the
  // name once it sees the producer accepted it (its first receive).
  auto honest_own = OwnSegment(name, o.max_consumers);
  // The last in an extension of the arena (20 KiB do not fit its 16).
  for (uint64_t i = 0; i < 4; ++i) {
    auto loan = p.Loan(i < 3 ? 100 * std::max<uint64_t>(i, 1) : 20 << 10);
    if (!loan.ok()) std::abort();
    std::memset(loan->data().data(), static_cast<int>(i), loan->data().size());
    const std::byte inline_bytes[9] = {};
    const bool with_inline = i == 0 || i == 3;
    if (!p.Publish(
              with_inline ? std::span<const std::byte>(inline_bytes) : std::span<const std::byte>(),
              std::move(*loan), i, 1)
             .ok()) {
      std::abort();
    }
  }

  const uint8_t targets = data[0];
  Patches patches{data + 1, size - 1};
  auto rw = shm::Segment::Open(name, shm::SegmentKind::kChannel);
  if (!rw.ok()) std::abort();
  const uint64_t table = ExtensionTable(**rw);
  if (targets & 1) patches.ApplyTo((*rw)->data(), (*rw)->data_size());

  // The consumer side against the (possibly) hostile producer.
  {
    auto consumer = shm::ChannelConsumer::Open(name, co);
    shm::ChannelMessage message;
    for (auto* c : {honest->get(), consumer.ok() ? consumer->get() : nullptr}) {
      if (c == nullptr) continue;
      std::vector<const std::byte*> bases;
      for (int i = 0; i < 8; ++i) {
        bool got = false;
        if (i == 0) {
          auto first = c->TryReceive(&message);
          got = first.ok() && *first;
          if (first.ok() && !*first) break;
        } else {
          const alkaid::Status st = c->TryReceive(&message, &got);  // TryReceiveHot first
          if (st.ok() && !got) break;
        }
        if (!got) continue;
        CheckBody(message, name, **rw, table, &bases);
        CheckInside(message.payload());
      }
      std::vector<std::byte> bytes;
      for (uint32_t id = 0; id <= 3; ++id) {
        if (c->ReadShape(id, &bytes).ok()) CheckInside(bytes);
      }
    }
  }

  // The producer side against hostile consumer memory and registrations.
  if (targets & 6) {
    if (targets & 2) {
      // The honest consumer's own segment (its cursor and return queue),
      // mapped before it lost its name.
      if (honest_own != nullptr) patches.ApplyTo(honest_own->data(), honest_own->data_size());
    }
    if (targets & 4) {
      auto reg = shm::Segment::Open(name + ".reg", shm::SegmentKind::kChannelRegistry);
      if (reg.ok()) patches.ApplyTo((*reg)->data(), (*reg)->data_size());
    }
    p.Poll();
    for (uint64_t i = 0; i < 6; ++i) {
      auto loan = p.Loan(64 + 500 * (i % 3));
      if (!loan.ok()) continue;
      // A block the producer lent out is never handed out twice.
      std::memset(loan->data().data(), 0xA5, loan->data().size());
      auto second = p.Loan(64);
      if (second.ok() && second->offset() == loan->offset()) std::abort();
      (void)p.Publish({}, std::move(*loan), i);
    }
    p.Poll();
  }
  honest->reset();
  producer->reset();
  (void)shm::RemoveChannel(name);
  return 0;
}
