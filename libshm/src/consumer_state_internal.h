#pragma once

// Private: what a ChannelConsumer keeps (ChannelConsumer::Impl), shared by
// its attach and close (consumer_attach.cc) and its data path
// (channel_consumer.cc).

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "alkaid/shm/channel.h"
#include "channel_layout_internal.h"
#include "consumer_returns_internal.h"
#include "doorbell_internal.h"
#include "futex_internal.h"

namespace alkaid::shm {

struct ChannelConsumer::Impl {
  std::string name;
  internal::ChannelGeometry geometry;
  ChannelConsumerOptions options;
  std::shared_ptr<Segment> channel;  // read-only
  // channel->data() and its slots: the data path's base addresses, kept
  // here so that each message does not reach them through the segment.
  const std::byte* data = nullptr;
  const std::byte* slots = nullptr;
  std::shared_ptr<Segment> registry;
  const internal::ChannelHeaderData* header = nullptr;
  const internal::ConsumerControlData* control = nullptr;
  internal::RegistrationData* registration = nullptr;
  internal::RegistryHeaderData* reg_header = nullptr;
  internal::ConsumerSegHeaderData* own = nullptr;
  std::shared_ptr<ChannelBlock::Returns> returns;
  // Our hold counts of the fixed blocks, in our segment (returns keeps it).
  std::atomic<uint32_t>* holds = nullptr;
  // Where fixed block i's count lies among them (HoldIndex), per block.
  std::unique_ptr<uint32_t[]> hold_index;
  uint32_t index = 0;
  uint64_t word = 0;  // our registration word, requested state
  uint32_t producer_pid = 0;
  uint32_t episode = 0;  // waiting episodes: odd while announced
  bool drop = false;
  // The receive's hot state, in the ChannelConsumer (its cursor, the
  // stored cursor and flush_every, the bounds a slot is checked against).
  internal::ConsumerHot* hot = nullptr;
  internal::DoorbellPipe doorbell;  // made by DoorbellFd

  // The extensions mapped (returns->extensions), as the data path looks
  // them up: by table entry, the id mapped there (0: none), where, how big.
  struct ExtensionView {
    uint32_t id = 0;
    const std::byte* base = nullptr;
    uint64_t size = 0;
  };
  std::array<ExtensionView, internal::kMaxExtensions> views;
  const internal::ExtensionEntryData* extension_entries = nullptr;
  uint64_t extensions_seen = 0;  // header->extensions_changed when last looked at
  uint64_t extensions_mapped = 0;
  uint64_t extensions_dropped = 0;
  // Retired extensions kept at most (a producer that adds and releases
  // extensions without end makes us map no more).
  static constexpr std::size_t kMaxRetired = 4096;

  // Maps extension `id` in table entry `k` (message `c` names it).
  Status MapExtension(uint64_t c, uint32_t k, uint32_t id);
  // Lets go of the mappings of extensions the producer released.
  void DropReleasedExtensions();

  const internal::ChannelSlotData* Slot(uint64_t sequence) const {
    return reinterpret_cast<const internal::ChannelSlotData*>(slots + (sequence & geometry.mask) *
                                                                          geometry.slot_size);
  }

  // Stores our cursor and wakes a producer waiting on it for room.
  void StoreCursor(uint64_t cursor) { hot->StoreCursor(cursor); }

  bool RegistrationLost() const {
    const uint64_t now = registration->word.load(std::memory_order_acquire);
    return internal::RegPid(now) != internal::RegPid(word) ||
           internal::RegTag(now) != internal::RegTag(word);
  }
};

}  // namespace alkaid::shm
