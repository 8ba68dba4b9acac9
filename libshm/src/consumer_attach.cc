// A consumer's attach and close: Open (its own segment, the registration,
// the read-only mapping of the producer's), acceptance by the producer,
// the extensions of the producer's arena mapped and let go of, the shapes
// read, Close. The data path is channel_consumer.cc.

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "alkaid/common/process.h"
#include "alkaid/shm/channel.h"
#include "channel_internal.h"
#include "channel_layout_internal.h"
#include "consumer_returns_internal.h"
#include "consumer_state_internal.h"

namespace alkaid::shm {

using internal::ChannelHeaderData;
using internal::ConsumerControlData;
using internal::ConsumerSegHeaderData;
using internal::RegistrationData;
using internal::RegistryHeaderData;

Status ChannelConsumer::Impl::MapExtension(uint64_t c, uint32_t k, uint32_t id) {
  // Acquire: partner of the producer's release store of the id, after it
  // created the segment.
  const uint32_t listed = extension_entries[k].id.load(std::memory_order_acquire);
  if (listed != id) {
    return Status::Invalid("channel '", name, "': message ", c, " names extension ", id,
                           " in entry ", k, ", which holds ",
                           listed == 0 ? std::string("none") : std::to_string(listed));
  }
  if (returns->retired.size() >= kMaxRetired) {
    return Status::Invalid("channel '", name, "': message ", c, " names extension ", id, "; ",
                           kMaxRetired, " extensions were mapped and released already");
  }
  SegmentOpenOptions ro;
  ro.read_only = true;
  auto opened = Segment::Open(ChannelExtensionName(name, id), SegmentKind::kChannelExtension, ro);
  if (!opened.ok()) {
    return Status::Invalid("channel '", name, "': message ", c, " names extension ", id,
                           ", which cannot be mapped: ", opened.status().message());
  }
  std::shared_ptr<Segment>& slot = returns->extensions[k];
  if (slot != nullptr) {
    // An extension released before (we had not looked yet): its pages go,
    // its address range stays for whatever may still point there.
    (void)slot->DropPages();
    returns->retired.push_back(std::move(slot));
  }
  slot = std::move(*opened);
  views[k] = {id, slot->data(), slot->data_size()};
  ++extensions_mapped;
  return Status::OK();
}

void ChannelConsumer::Impl::DropReleasedExtensions() {
  // Acquire: partner of the producer's release increment after it emptied
  // an entry.
  extensions_seen = header->extensions_changed.load(std::memory_order_acquire);
  for (uint32_t k = 0; k < geometry.extension_count; ++k) {
    if (views[k].id == 0 ||
        extension_entries[k].id.load(std::memory_order_acquire) == views[k].id) {
      continue;
    }
    // Released: every block of it was returned, so nothing of ours points
    // there (a producer that lies finds zeros, not a fault).
    std::shared_ptr<Segment>& slot = returns->extensions[k];
    (void)slot->DropPages();
    if (returns->retired.size() < kMaxRetired) {
      returns->retired.push_back(std::move(slot));
    } else {
      slot.reset();  // unmapped; only a producer that lies can have us point there
    }
    slot = nullptr;
    views[k] = {};
    ++extensions_dropped;
  }
}

// The hot state from the checked geometry (ConsumerHot, consumer_hot.h).
ChannelConsumer::ChannelConsumer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  Impl& state = *impl_;
  const internal::ChannelGeometry& g = state.geometry;
  state.hot = &hot_;
  hot_.slots = state.slots;
  hot_.mask = g.mask;
  hot_.slot_size = g.slot_size;
  hot_.data = state.data;
  // A sixteenth of the slots, at most 64: far below the producer's resume
  // hysteresis (an eighth), so a producer waiting for room is woken well
  // before it could wait for a store we put off.
  hot_.flush_every = state.drop ? 1 : std::clamp<uint64_t>(g.slot_count / 16, 1, 64);
  hot_.own_cursor = &state.own->cursor;
  hot_.space_waiting = &state.header->space_waiting;
  hot_.space_target = &state.header->space_target;
  hot_.waiter = uint64_t{state.index} + 1;
  hot_.holds = state.holds;
  hot_.fixed_offset = g.fixed_offset;
  hot_.fixed_count = g.fixed_count;
  hot_.hold_index = state.hold_index.get();
  hot_.fixed_size = g.fixed_size;
  hot_.arena_offset = g.arena_offset;
  hot_.arena_end = g.arena_offset + g.arena_size;
  hot_.block_count = g.block_count;
  hot_.returns = state.returns.get();
}

ChannelConsumer::~ChannelConsumer() { Close(); }

Result<std::unique_ptr<ChannelConsumer>> ChannelConsumer::Open(
    std::string_view name, const ChannelConsumerOptions& options) {
  ALKAID_RETURN_NOT_OK(Segment::ValidateName(name));
  if (name.size() + internal::kChannelNameReserve > kMaxSegmentNameLength) {
    return Status::Invalid("channel name '", name, "' is too long");
  }
  auto impl = std::make_unique<Impl>();
  Impl& state = *impl;
  state.name = std::string(name);
  state.options = options;
  SegmentOpenOptions ro;
  ro.read_only = true;
  ALKAID_ASSIGN_OR_RAISE(state.channel, Segment::Open(name, SegmentKind::kChannel, ro));
  if (state.channel->data_size() < sizeof(ChannelHeaderData)) {
    return Status::Invalid("channel '", name, "' is too small for its header");
  }
  state.header = reinterpret_cast<const ChannelHeaderData*>(state.channel->data());
  ALKAID_ASSIGN_OR_RAISE(
      state.geometry, internal::ReadChannelHeader(*state.header, state.channel->data_size(), name));
  state.data = state.channel->data();
  state.slots = state.data + state.geometry.slots_offset;
  state.producer_pid = state.header->producer_pid;
  state.drop = state.geometry.policy == static_cast<uint32_t>(SlowConsumerPolicy::kDropOldest);
  state.extension_entries = reinterpret_cast<const internal::ExtensionEntryData*>(
      state.channel->data() + state.geometry.extensions_offset);

  ALKAID_ASSIGN_OR_RAISE(state.registry,
                         Segment::Open(state.name + std::string(internal::kRegistrySuffix),
                                       SegmentKind::kChannelRegistry));
  if (state.registry->data_size() <
      sizeof(RegistryHeaderData) +
          uint64_t{state.geometry.max_consumers} * sizeof(RegistrationData)) {
    return Status::Invalid("channel '", name, "': its registry is too small");
  }
  state.reg_header = reinterpret_cast<RegistryHeaderData*>(state.registry->data());
  if (state.reg_header->magic.load(std::memory_order_acquire) != internal::kRegistryMagic ||
      state.reg_header->layout_version != internal::kChannelLayoutVersion ||
      state.reg_header->max_consumers != state.geometry.max_consumers) {
    return Status::Invalid("channel '", name, "': its registry does not match the channel");
  }
  auto* regs =
      reinterpret_cast<RegistrationData*>(state.registry->data() + sizeof(RegistryHeaderData));

  // Claim an entry: a free one, else (second pass) one whose process died.
  const uint32_t pid = static_cast<uint32_t>(::getpid());
  const uint32_t tag =
      (state.reg_header->tag_counter.fetch_add(1, std::memory_order_relaxed) + 1) & 0x3fffffffU;
  const uint64_t claimed = internal::RegWord(pid, tag, internal::kRegClaimed);
  uint32_t index = state.geometry.max_consumers;
  for (int pass = 0; pass < 2 && index == state.geometry.max_consumers; ++pass) {
    for (uint32_t k = 0; k < state.geometry.max_consumers; ++k) {
      uint64_t expected = regs[k].word.load(std::memory_order_relaxed);
      if (pass == 0 ? expected != 0
                    : (expected == 0 || !ProcessIsGone(internal::RegPid(expected)))) {
        continue;
      }
      // acq_rel: acquire pairs with the release store that freed the entry;
      // release orders our claim before our later stores.
      if (regs[k].word.compare_exchange_strong(expected, claimed, std::memory_order_acq_rel,
                                               std::memory_order_relaxed)) {
        index = k;
        break;
      }
    }
  }
  if (index == state.geometry.max_consumers) {
    return Status::CapacityError("channel '", name, "': all ", state.geometry.max_consumers,
                                 " consumer registrations are taken");
  }
  state.index = index;
  state.registration = &regs[index];
  auto unclaim = [&] {
    uint64_t expected = claimed;
    state.registration->word.compare_exchange_strong(expected, 0, std::memory_order_release,
                                                     std::memory_order_relaxed);
  };

  const std::string own_name = internal::ConsumerSegmentName(name, index, tag);
  SegmentOptions own_options;
  own_options.access = SegmentAccess::kOwnerAndGroupRead;
  // Readable by the producer: the channel's group (a consumer granted
  // access through that group belongs to it).
  own_options.group = state.channel->group();
  auto own = Segment::Create(
      own_name,
      internal::ConsumerSegmentBytes(state.geometry.return_capacity, state.geometry.fixed_count),
      SegmentKind::kChannelConsumer, own_options);
  if (!own.ok()) {
    unclaim();
    return own.status().WithContext("channel '" + state.name + "': consumer segment");
  }
  state.own = reinterpret_cast<ConsumerSegHeaderData*>((*own)->data());
  state.own->layout_version = internal::kChannelLayoutVersion;
  state.own->index = index;
  state.own->registration = claimed;
  state.own->return_capacity = state.geometry.return_capacity;
  state.own->from_oldest = options.from_oldest ? 1 : 0;
  state.own->token = options.token;
  state.own->fixed_count = state.geometry.fixed_count;
  // Release: partner of the producer's acquire load of the magic.
  state.own->magic.store(internal::kConsumerSegMagic, std::memory_order_release);

  auto returns = std::make_shared<ChannelBlock::Returns>();
  returns->channel = state.channel;
  returns->registry = state.registry;
  returns->own = std::move(*own);
  returns->header = state.own;
  returns->cells = reinterpret_cast<std::atomic<uint64_t>*>(returns->own->data() +
                                                            sizeof(ConsumerSegHeaderData));
  state.holds = reinterpret_cast<std::atomic<uint32_t>*>(
      returns->own->data() + sizeof(ConsumerSegHeaderData) +
      uint64_t{state.geometry.return_capacity} * 8);
  const uint32_t hold_lines_log2 = internal::HoldLinesLog2(state.geometry.fixed_count);
  state.hold_index = std::make_unique<uint32_t[]>(state.geometry.fixed_count);
  for (uint32_t i = 0; i < state.geometry.fixed_count; ++i) {
    state.hold_index[i] = internal::HoldIndex(i, hold_lines_log2);
  }
  returns->capacity = state.geometry.return_capacity;
  returns->capacity_log2 = static_cast<uint32_t>(__builtin_ctz(state.geometry.return_capacity));
  state.control = reinterpret_cast<const ConsumerControlData*>(state.channel->data() +
                                                               state.geometry.controls_offset) +
                  index;
  returns->control = state.control;
  returns->reg_header = state.reg_header;
  state.returns = std::move(returns);

  state.word = internal::RegWord(pid, tag, internal::kRegRequested);
  uint64_t expected = claimed;
  // Release: our segment is complete before the producer sees the request.
  if (!state.registration->word.compare_exchange_strong(
          expected, state.word, std::memory_order_release, std::memory_order_relaxed)) {
    return Status::Invalid("channel '", name, "': registration ", index,
                           " was taken over while opening");
  }
  state.reg_header->changes.fetch_add(1, std::memory_order_release);
  return std::unique_ptr<ChannelConsumer>(new ChannelConsumer(std::move(impl)));
}

// Whether the producer accepted us yet; sets our cursor when it did.
Result<bool> ChannelConsumer::Accepted() {
  Impl& state = *impl_;
  // Acquire: partner of the producer's release store, after `start`.
  if (state.control->accepted.load(std::memory_order_acquire) == state.word) return TakeStart();
  if (state.RegistrationLost()) {
    return Status::Invalid("channel '", state.name, "': the producer refused registration ",
                           state.index, " (its segment did not check out) or reclaimed it");
  }
  // Acquire: partner of the producer's release store of `closed`, which
  // comes after any accept of ours: a producer that accepted us, published
  // and closed while we were between the two loads has accepted us.
  if (state.header->closed.load(std::memory_order_acquire) != 0) {
    if (state.control->accepted.load(std::memory_order_acquire) == state.word) return TakeStart();
    return Status::EndOfStream("channel '", state.name, "' closed");
  }
  return false;
}

// Accepted: where the producer placed us.
bool ChannelConsumer::TakeStart() {
  Impl& state = *impl_;
  hot_.cursor = state.control->start.load(std::memory_order_relaxed);
  state.StoreCursor(hot_.cursor);
  accepted_ = true;
  hot_.ready = !state.drop;  // kDropOldest receives by TryReceive alone
  // The producer has mapped our segment: its name is no longer needed,
  // and without it no other process can open the segment (processes of
  // our uid could have written returns into it). Our mapping and the
  // producer's stay; a crash leaves no name behind.
  if (state.returns) (void)Segment::Remove(state.returns->own->name());
  return true;
}

Status ChannelConsumer::ReadShape(uint32_t id, std::vector<std::byte>* out) const {
  const Impl& state = *impl_;
  if (id == 0 || id > state.geometry.shape_count) {
    return Status::Invalid("channel '", state.name, "': shape ", id, " is out of range 1..",
                           state.geometry.shape_count);
  }
  const auto* entry = reinterpret_cast<const internal::ShapeEntryData*>(
      state.channel->data() + state.geometry.shapes_offset +
      uint64_t{id - 1} * state.geometry.shape_size);
  // Acquire: partner of the producer's release store in AddShape.
  const uint32_t n = entry->size_plus_one.load(std::memory_order_acquire);
  const uint64_t room = state.geometry.shape_size - sizeof(internal::ShapeEntryData);
  if (n == 0 || n - 1 > room) {
    return Status::Invalid("channel '", state.name, "': shape ", id, " is not there");
  }
  const uint32_t size = n - 1;
  out->resize(size);
  const auto* words = reinterpret_cast<const std::atomic<uint64_t>*>(entry + 1);
  for (uint32_t i = 0; i * 8 < size; ++i) {
    const uint64_t w = words[i].load(std::memory_order_relaxed);
    std::memcpy(out->data() + std::size_t{i} * 8, &w, std::min<uint32_t>(8, size - i * 8));
  }
  return Status::OK();
}

void ChannelConsumer::Close() {
  if (closed_) return;
  closed_ = true;
  hot_.ready = false;
  Impl& state = *impl_;
  // The producer releases what we did not read from our stored cursor on:
  // it must be our own.
  if (accepted_ && hot_.stored_cursor != hot_.cursor) state.StoreCursor(hot_.cursor);
  uint64_t expected = state.word;
  // Our own segment says closed first: the producer believes a closed
  // registry entry only over a closed segment (anyone of the channel's
  // group can write the registry; only we write our segment).
  // Release: our last cursor store is visible before the producer sees us
  // closed (it releases what we did not read from there).
  state.own->state.store(internal::kConsumerClosed, std::memory_order_release);
  // Release: the same, for a producer that learns it from the entry.
  state.registration->word.compare_exchange_strong(
      expected, internal::RegWithState(state.word, internal::kRegClosed), std::memory_order_release,
      std::memory_order_relaxed);
  state.reg_header->changes.fetch_add(1, std::memory_order_release);
  state.returns.reset();  // the last held block's return finishes us
}

uint32_t ChannelConsumer::index() const { return impl_->index; }
uint64_t ChannelConsumer::extensions_mapped() const { return impl_->extensions_mapped; }
uint64_t ChannelConsumer::extensions_dropped() const { return impl_->extensions_dropped; }
const std::string& ChannelConsumer::name() const { return impl_->name; }

}  // namespace alkaid::shm
