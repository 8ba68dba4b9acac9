// The consumer side of a channel: reads the producer's segment through a
// read-only mapping and writes only its own segment (cursor, wait
// announcement, close state, returns) and, at open and close, its
// registration entry.

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "alkaid/common/process.h"
#include "alkaid/shm/channel.h"
#include "channel_internal.h"
#include "channel_layout_internal.h"
#include "consumer_returns_internal.h"
#include "doorbell_internal.h"
#include "futex_internal.h"
#include "wait_internal.h"

namespace alkaid::shm {

using internal::ChannelGeometry;
using internal::ChannelHeaderData;
using internal::ChannelSlotData;
using internal::ConsumerControlData;
using internal::ConsumerSegHeaderData;
using internal::RegistrationData;
using internal::RegistryHeaderData;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------
// ChannelConsumer

struct ChannelConsumer::Impl {
  std::string name;
  ChannelGeometry geometry;
  ChannelConsumerOptions options;
  std::shared_ptr<Segment> channel;  // read-only
  std::shared_ptr<Segment> registry;
  const ChannelHeaderData* header = nullptr;
  const ConsumerControlData* control = nullptr;
  RegistrationData* registration = nullptr;
  RegistryHeaderData* reg_header = nullptr;
  ConsumerSegHeaderData* own = nullptr;
  std::shared_ptr<ChannelBlock::Returns> returns;
  uint32_t index = 0;
  uint64_t word = 0;  // our registration word, requested state
  uint32_t producer_pid = 0;
  uint32_t episode = 0;  // waiting episodes: odd while announced
  bool drop = false;
  // kBlockProducer: the cursor in our segment (the producer's flow control)
  // may lag our own by up to flush_every - 1 messages while more are
  // waiting; it is stored once we catch up, every flush_every messages, and
  // before we close (Deliver, Close). With kDropOldest it moves per message
  // (it decides who returns a lapped message's block).
  uint64_t stored_cursor = 0;
  uint64_t flush_every = 1;
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

  const ChannelSlotData* Slot(uint64_t sequence) const {
    return reinterpret_cast<const ChannelSlotData*>(
        channel->data() + geometry.slots_offset + (sequence & geometry.mask) * geometry.slot_size);
  }

  // Stores our cursor and wakes a producer waiting on it for room.
  void StoreCursor(uint64_t cursor) {
    stored_cursor = cursor;
    // seq_cst: the Dekker pair with the producer's seq_cst store of
    // space_waiting before its reload of this cursor (WaitForRoom); with
    // kDropOldest also the pair with its seq_cst odd store when it laps.
    own->cursor.store(cursor, std::memory_order_seq_cst);
    if (header->space_waiting.load(std::memory_order_seq_cst) == index + 1 &&
        cursor >= header->space_target.load(std::memory_order_relaxed)) {
      internal::FutexWakeAll(reinterpret_cast<std::atomic<uint32_t>*>(&own->cursor));
    }
  }

  bool RegistrationLost() const {
    const uint64_t now = registration->word.load(std::memory_order_acquire);
    return internal::RegPid(now) != internal::RegPid(word) ||
           internal::RegTag(now) != internal::RegTag(word);
  }
};

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

ChannelConsumer::ChannelConsumer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

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
  state.producer_pid = state.header->producer_pid;
  state.drop = state.geometry.policy == static_cast<uint32_t>(SlowConsumerPolicy::kDropOldest);
  // A sixteenth of the slots, at most 64: far below the producer's resume
  // hysteresis (an eighth), so a producer waiting for room is woken well
  // before it could wait for a store we put off.
  state.flush_every = state.drop ? 1 : std::clamp<uint64_t>(state.geometry.slot_count / 16, 1, 64);
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
      own_name, sizeof(ConsumerSegHeaderData) + uint64_t{state.geometry.return_capacity} * 8,
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
  // Release: partner of the producer's acquire load of the magic.
  state.own->magic.store(internal::kConsumerSegMagic, std::memory_order_release);

  auto returns = std::make_shared<ChannelBlock::Returns>();
  returns->channel = state.channel;
  returns->registry = state.registry;
  returns->own = std::move(*own);
  returns->header = state.own;
  returns->cells = reinterpret_cast<std::atomic<uint64_t>*>(returns->own->data() +
                                                            sizeof(ConsumerSegHeaderData));
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
  cursor_ = state.control->start.load(std::memory_order_relaxed);
  state.StoreCursor(cursor_);
  accepted_ = true;
  // The producer has mapped our segment: its name is no longer needed,
  // and without it no other process can open the segment (processes of
  // our uid could have written returns into it). Our mapping and the
  // producer's stay; a crash leaves no name behind.
  if (state.returns) (void)Segment::Remove(state.returns->own->name());
  return true;
}

// TryReceive's steps. ReadSlot and Deliver run once per message and are
// forced inline: as calls (ReadSlot, with its error paths, is too large for
// g++ to inline by itself) they cost some 60 instructions a message. Each
// takes the state TryReceive holds, so that none reloads impl_.

// What ReadSlot copied out of a slot.
struct ChannelConsumer::SlotCopy {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t block = 0;  // generation << 32 | descriptor; 0: no body
  uint64_t user = 0;
  uint32_t size = 0;  // inline bytes (copied into the message's words)
  uint32_t shape = 0;
  uint32_t extension = 0;                   // 0: the body is in the channel segment's arena
  const std::byte* in_extension = nullptr;  // else: where, once checked
};

// A body in an extension: maps it the first time, then checks the range
// against the mapping. Off the inlined path: a message in the channel
// segment's arena never comes here.
[[gnu::noinline]] Status ChannelConsumer::CheckExtension(Impl& state, uint64_t c, SlotCopy* copy) {
  const uint64_t arena = copy->offset >> internal::kExtensionShift;
  const uint64_t local = copy->offset & internal::kExtensionOffsetMask;
  if (arena == 0 || arena > state.geometry.extension_count) {
    return Status::Invalid("channel '", state.name, "': message ", c, " names extension ",
                           copy->extension, " in entry ", arena - 1, ", outside the table of ",
                           state.geometry.extension_count);
  }
  const auto k = static_cast<uint32_t>(arena - 1);
  if (state.views[k].id != copy->extension) {
    ALKAID_RETURN_NOT_OK(state.MapExtension(c, k, copy->extension));
  }
  const Impl::ExtensionView& view = state.views[k];
  if (local % 64 != 0 || local > view.size || copy->length > view.size - local) {
    return Status::Invalid("channel '", state.name, "': message ", c, " names a body of ",
                           copy->length, " bytes at offset ", local, " of extension ",
                           copy->extension, ", outside its ", view.size, " bytes");
  }
  copy->in_extension = view.base + local;
  return Status::OK();
}

// Message c's slot showed its committed sequence `seq` (2c+2): copies it
// under that sequence (the seqlock reader's half), checks it, and claims it
// by moving our cursor past it. True: the copy is message c, ours to
// deliver. False: the producer overwrote it meanwhile (kDropOldest; counted
// in torn_reads_ or late_laps_): the caller skips ahead; or, with
// `*problem` set (Invalid), the slot names bytes outside the arena (the
// cursor moves past it; its block is never returned).
[[gnu::always_inline]] inline bool ChannelConsumer::ReadSlot(Impl& state, uint64_t c,
                                                             const ChannelSlotData* slot,
                                                             uint64_t seq, ChannelMessage* out,
                                                             SlotCopy* copy, Status* problem) {
  copy->offset = slot->body_offset.load(std::memory_order_relaxed);
  copy->length = slot->body_length.load(std::memory_order_relaxed);
  copy->block = slot->block.load(std::memory_order_relaxed);
  copy->size = slot->payload_size.load(std::memory_order_relaxed);
  copy->shape = slot->shape.load(std::memory_order_relaxed);
  copy->user = slot->user.load(std::memory_order_relaxed);
  copy->extension = slot->extension.load(std::memory_order_relaxed);
  // Straight into the message, as the inline words: a torn read leaves it
  // to the next read, which rewrites it before it is delivered.
  out->publish_ns_ = slot->publish_ns.load(std::memory_order_relaxed);
  const uint32_t size = copy->size;
  if (size <= state.geometry.inline_capacity && size > 0) {
    const auto* words = reinterpret_cast<const std::atomic<uint64_t>*>(slot + 1);
    const uint32_t nwords = (size + 7) / 8;
    if (out->words_.size() < nwords) out->words_.resize(nwords);
    for (uint32_t i = 0; i < nwords; ++i) {
      out->words_[i] = words[i].load(std::memory_order_relaxed);
    }
  }
  // Acquire fence: partner of the producer's release fence after its odd
  // store; if anything above came from a newer write, the re-check sees
  // the change (the seqlock reader's half).
  std::atomic_thread_fence(std::memory_order_acquire);
  if (slot->sequence.load(std::memory_order_relaxed) != seq) {
    ++torn_reads_;
    return false;
  }
  const uint64_t offset = copy->offset;
  const uint64_t length = copy->length;
  const uint64_t block = copy->block;
  const uint32_t descriptor = static_cast<uint32_t>(block);
  const uint32_t generation = static_cast<uint32_t>(block >> 32);
  // Everything from shared memory is checked before use: a slot naming
  // bytes outside the arena is skipped (and its block never returned).
  if (size > state.geometry.inline_capacity) {
    *problem =
        Status::Invalid("channel '", state.name, "': message ", c, " has ", size,
                        " inline bytes, more than the capacity ", state.geometry.inline_capacity);
  } else if (block != 0 && (descriptor >= state.geometry.block_count || generation == 0)) {
    *problem = Status::Invalid("channel '", state.name, "': message ", c, " names descriptor ",
                               descriptor, " of generation ", generation, " (the channel has ",
                               state.geometry.block_count, " descriptors)");
  } else if (block != 0 && copy->extension != 0) {
    *problem = CheckExtension(state, c, copy);
  } else if (block != 0 &&
             (offset < state.geometry.arena_offset ||
              offset > state.geometry.arena_offset + state.geometry.arena_size ||
              (offset - state.geometry.arena_offset) % 64 != 0 ||
              length > state.geometry.arena_offset + state.geometry.arena_size - offset)) {
    *problem = Status::Invalid("channel '", state.name, "': message ", c, " names a body of ",
                               length, " bytes at offset ", offset, " (descriptor ", descriptor,
                               "), outside the arena [", state.geometry.arena_offset, ", ",
                               state.geometry.arena_offset + state.geometry.arena_size, ")");
  }
  if (!problem->ok()) {
    cursor_ = c + 1;
    state.StoreCursor(cursor_);
    return false;
  }
  if (!state.drop) return true;  // the cursor moves in Deliver
  state.StoreCursor(c + 1);
  if (slot->sequence.load(std::memory_order_seq_cst) != seq) {
    // Lapped after we read a consistent slot: the producer may count the
    // block as ours (it saw our cursor) or not; returning it is right
    // either way (a return it does not expect is ignored).
    if (block != 0) state.returns->Push(descriptor, generation);
    ++late_laps_;
    return false;
  }
  return true;
}

// The producer overwrote messages we had not read (kDropOldest): goes to
// the oldest that may still be intact and counts what was skipped.
//
// Our cursor decides who gives back a lapped message's block: the producer,
// as it overwrites message m, clears our claim on m's block if our cursor is
// at or below m, and leaves it to us (we read m) if it is past. So we move
// past a message we did not read only once its overwrite is finished:
// every message below write_sequence - slot_count was overwritten by a
// message already published (the acquire load of write_sequence makes the
// producer's look at our cursor happen before our store). Message `c`
// itself may be in the middle of its overwrite (the producer stopped
// between its odd store and its look at the cursors): then we stay (false:
// nothing to deliver yet, the caller tries again), or the producer could
// see our cursor past c and keep our claim on its block for ever.
//
// The oldest intact message is also the slot the producer writes next: if
// it laps us again at once, it publishes faster than we read, and each
// further lap in a row (`attempt`, from 0) makes us skip more intact ones
// (1, 2, 4... up to half the slots), or a consumer that lands there could
// be lapped at every try. Those are skipped as if read and dropped at once:
// each claimed by ReadSlot and its block given back.
inline bool ChannelConsumer::SkipLapped(Impl& state, uint64_t c, uint32_t attempt,
                                        uint64_t* write_at_first_lap, ChannelMessage* scratch,
                                        Status* problem) {
  // Acquire: partner of the producer's store of write_sequence.
  const uint64_t w = state.header->write_sequence.load(std::memory_order_acquire);
  if (attempt == 0) *write_at_first_lap = w;
  const uint64_t slots = state.geometry.slot_count;
  const uint64_t overwritten = w >= slots ? w - slots : 0;
  if (overwritten <= c) return false;
  lost_ += overwritten - c;
  pending_lost_ += overwritten - c;
  cursor_ = overwritten;
  state.StoreCursor(overwritten);
  const uint64_t room =
      attempt == 0 ? 0 : std::min(uint64_t{1} << std::min(attempt - 1, 62u), slots / 2);
  for (uint64_t m = overwritten; m < overwritten + room; ++m) {
    const ChannelSlotData* slot = state.Slot(m);
    const uint64_t seq = slot->sequence.load(std::memory_order_acquire);
    if (seq != 2 * m + 2) break;  // lapped already, or not written yet
    SlotCopy copy;
    if (!ReadSlot(state, m, slot, seq, scratch, &copy, problem)) break;
    if (copy.block != 0) {
      state.returns->Push(static_cast<uint32_t>(copy.block),
                          static_cast<uint32_t>(copy.block >> 32));
    }
    ++lost_;
    ++pending_lost_;
    cursor_ = m + 1;
  }
  return true;
}

// Hands message c (ReadSlot's copy, claimed) to `out`. The body `out` held
// goes back; the new one takes its place. The message keeps its reference
// to our return queue across receives.
[[gnu::always_inline]] inline void ChannelConsumer::Deliver(Impl& state, uint64_t c,
                                                            const SlotCopy& copy,
                                                            ChannelMessage* out) {
  cursor_ = c + 1;
  // kBlockProducer: our cursor is stored once we caught up (the next slot
  // not committed yet) or flush_every messages after the last store, so
  // that a consumer behind a fast producer pays one store (and its fence)
  // per flush_every messages rather than per message.
  if (!state.drop &&
      (cursor_ - state.stored_cursor >= state.flush_every ||
       state.Slot(cursor_)->sequence.load(std::memory_order_relaxed) != 2 * cursor_ + 2)) {
    state.StoreCursor(cursor_);
  }
  ChannelBlock& body = out->body_;
  if (body.held_) {
    body.returns_->Push(body.descriptor_, body.generation_);
    body.held_ = false;
  }
  if (copy.block != 0) {
    if (body.returns_ != state.returns) body.returns_ = state.returns;
    body.data_ = {copy.extension == 0 ? state.channel->data() + copy.offset : copy.in_extension,
                  static_cast<std::size_t>(copy.length)};
    body.descriptor_ = static_cast<uint32_t>(copy.block);
    body.generation_ = static_cast<uint32_t>(copy.block >> 32);
    body.held_ = true;
  } else {
    body.data_ = {};
  }
  out->sequence_ = c;
  out->payload_size_ = copy.size;
  out->shape_ = copy.shape;
  out->user_ = copy.user;
  out->body_offset_ = copy.offset;
  out->lost_before_ = pending_lost_;
  pending_lost_ = 0;
}

Result<bool> ChannelConsumer::TryReceive(ChannelMessage* out) {
  Impl& state = *impl_;
  if (closed_) return Status::Invalid("consumer of channel '", state.name, "' is closed");
  if (!accepted_) {
    ALKAID_ASSIGN_OR_RAISE(const bool ok, Accepted());
    if (!ok) return false;
  }
  // Each lap moves us to the oldest message that may still be intact. A
  // producer that goes on publishing can lap us again and again (a consumer
  // preempted between its loads, few slots): after a bounded number of
  // tries we return with nothing yet, and the caller tries again. One that
  // stands still and still shows newer sequences in every slot than its
  // write_sequence allows is corrupt.
  uint64_t write_at_first_lap = 0;
  for (uint32_t attempt = 0; attempt <= state.geometry.slot_count + 1; ++attempt) {
    const uint64_t c = cursor_;
    const ChannelSlotData* slot = state.Slot(c);
    const uint64_t want = 2 * c + 2;
    // Acquire: partner of the producer's release store of the sequence.
    const uint64_t seq = slot->sequence.load(std::memory_order_acquire);
    if (seq < want) {
      if (state.header->closed.load(std::memory_order_acquire) != 0 &&
          state.header->write_sequence.load(std::memory_order_acquire) <= c) {
        return Status::EndOfStream("channel '", state.name, "' closed after ", c, " messages");
      }
      // Looked at when idle only: extensions the producer released (one
      // load of a line written only when the table changes).
      if (state.header->extensions_changed.load(std::memory_order_relaxed) !=
          state.extensions_seen) {
        state.DropReleasedExtensions();
      }
      // Looked at when idle only (one load of a line nobody writes while we
      // are registered): another process rewrote our registration.
      if (state.RegistrationLost()) {
        return Status::Invalid("channel '", state.name, "': registration ", state.index,
                               " is no longer ours (rewritten by another process)");
      }
      return false;
    }
    SlotCopy copy;
    Status problem;
    // Above 2c+2: lapped before we looked.
    if (seq == want && ReadSlot(state, c, slot, seq, out, &copy, &problem)) {
      Deliver(state, c, copy, out);
      return true;
    }
    if (!problem.ok()) return problem;
    if (!SkipLapped(state, c, attempt, &write_at_first_lap, out, &problem)) {
      // The overwrite of message c is not finished: nothing to deliver yet.
      return false;
    }
    if (!problem.ok()) return problem;
  }
  // Acquire: partner of the producer's store of write_sequence.
  if (state.header->write_sequence.load(std::memory_order_acquire) != write_at_first_lap) {
    return false;  // lapped while the producer published on: what was skipped is counted
  }
  return Status::Invalid("channel '", state.name, "': every slot shows a newer message than ",
                         "the one this consumer skipped to (sequence ", cursor_,
                         "): the channel segment is corrupt");
}

Status ChannelConsumer::Receive(ChannelMessage* out, std::chrono::nanoseconds timeout) {
  ALKAID_ASSIGN_OR_RAISE(bool got, TryReceive(out));
  if (got) return Status::OK();
  const auto deadline = internal::DeadlineAfter(timeout);
  ALKAID_RETURN_NOT_OK(WaitForData(deadline));
  while (true) {
    ALKAID_ASSIGN_OR_RAISE(got, TryReceive(out));
    if (got) return Status::OK();
    if (Clock::now() >= deadline) {
      return Status::TimedOut(
          "channel '", impl_->name, "': no message within ",
          std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count(), " ms");
    }
    ALKAID_RETURN_NOT_OK(WaitForData(deadline));
  }
}

// Waits until a message may be there (or the deadline): spins, then sleeps
// on the channel's futex after announcing it in our own segment.
Status ChannelConsumer::WaitForData(Clock::time_point deadline) {
  Impl& state = *impl_;
  const WaitMode mode = state.options.wait_mode;
  auto there = [&] {
    return state.header->write_sequence.load(std::memory_order_seq_cst) > cursor_ ||
           state.header->closed.load(std::memory_order_acquire) != 0;
  };
  if (mode != WaitMode::kBlock) {
    const uint32_t spins = mode == WaitMode::kBusyPoll ? 4096 : state.options.spin_iterations;
    for (uint32_t i = 0; i < spins; ++i) {
      if (there()) return Status::OK();
      internal::CpuRelax();
    }
    if (mode == WaitMode::kBusyPoll) return Status::OK();  // the caller looks again
  }
  const auto now = Clock::now();
  if (now >= deadline) return Status::OK();
  // Acquire: partner of the producer's release increment before waking.
  const uint32_t seen = state.header->data_futex.load(std::memory_order_acquire);
  // A futex sleep: no doorbell for this episode (relaxed, as in ArmDoorbell).
  if (state.doorbell.is_open()) state.own->doorbell.store(0, std::memory_order_relaxed);
  state.episode += 2;
  // seq_cst: the Dekker pair with the producer's seq_cst store of
  // write_sequence before its seq_cst load of this word (WakeSleepers).
  state.own->waiting.store(state.episode | 1, std::memory_order_seq_cst);
  if (!there() && accepted_) {
    // Sleep in slices, so that a producer that died is noticed.
    const auto slice = std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(100));
    internal::FutexWait(const_cast<std::atomic<uint32_t>*>(&state.header->data_futex), seen, slice);
  } else if (!accepted_) {
    // Not accepted yet: the producer accepts us at its next publish and wakes
    // us then only if it counts us, which it does from that publish on.
    internal::FutexWait(const_cast<std::atomic<uint32_t>*>(&state.header->data_futex), seen,
                        std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(1)));
  }
  state.own->waiting.store(state.episode, std::memory_order_relaxed);
  if (!there() && ProcessIsGone(state.producer_pid)) {
    return Status::IOError("channel '", state.name, "': its producer (pid ", state.producer_pid,
                           ") is gone");
  }
  return Status::OK();
}

Result<int> ChannelConsumer::DoorbellFd() {
  Impl& state = *impl_;
  if (!state.doorbell.is_open() && !state.doorbell.Open()) {
    return Status::FromErrno(errno, "channel '" + state.name + "': doorbell pipe");
  }
  return state.doorbell.read_fd();
}

Result<bool> ChannelConsumer::ArmDoorbell() {
  Impl& state = *impl_;
  if (!state.doorbell.is_open()) {
    return Status::Invalid("channel '", state.name, "': no doorbell to arm (DoorbellFd makes it)");
  }
  state.doorbell.Drain();
  // Relaxed: the seq_cst store of the odd episode below publishes it. It
  // tells the producer to sound the doorbell for this episode; WaitForData
  // clears it for a futex sleep.
  state.own->doorbell.store(static_cast<uint32_t>(state.doorbell.write_fd()) + 1,
                            std::memory_order_relaxed);
  state.episode += 2;
  // seq_cst: the Dekker pair with the producer's seq_cst store of
  // write_sequence before its seq_cst load of this word (WakeSleepers), as
  // in WaitForData: either it sees the odd episode and sounds the bell, or we see its
  // message below.
  state.own->waiting.store(state.episode | 1, std::memory_order_seq_cst);
  if (!accepted_) {
    // Not accepted yet, so no message is ours (our cursor is not set: the
    // producer's messages so far would all look new). A producer that
    // accepts us later does so at a publish that counts us and sounds the
    // bell armed above; one that did already set our start.
    Result<bool> accepted = Accepted();
    if (!accepted.ok()) return true;  // the next receive says why
    if (!*accepted) return false;
  }
  return state.header->write_sequence.load(std::memory_order_seq_cst) > cursor_ ||
         state.header->closed.load(std::memory_order_acquire) != 0;
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
  Impl& state = *impl_;
  // The producer releases what we did not read from our stored cursor on:
  // it must be our own.
  if (accepted_ && state.stored_cursor != cursor_) state.StoreCursor(cursor_);
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
