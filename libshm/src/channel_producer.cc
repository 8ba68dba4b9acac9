// The producer side of a channel: ChannelLoan and ChannelProducer, the only
// writer of the channel segment. What it keeps is a ProducerState
// (producer_state_internal.h): the block table, the consumer set, the slots
// and the flow control. Loan and Publish, the data path, are here, with the
// inline parts of those they call.

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "alkaid/shm/channel.h"
#include "channel_internal.h"
#include "channel_layout_internal.h"
#include "futex_internal.h"
#include "producer_state_internal.h"

namespace alkaid::shm {

using internal::BlockState;
using internal::ChannelGeometry;
using internal::ChannelHeaderData;
using internal::ChannelSlotData;
using internal::ClearBit;
using internal::kNoBlock;
using internal::ProducerState;
using internal::RegistrationData;
using internal::RegistryHeaderData;
using internal::TestBit;

// The inline publish writes a fixed block's word as kHotFixedBlockFlag | i
// (hot_slot.h), as PackBlock would.
static_assert(internal::PackBlock(internal::kFixedBlockFlag | 5, 0) ==
              (internal::kHotFixedBlockFlag | 5));
// ProducerHot::PublishesAtOnce takes an entry of at least block_count for
// no block or a fixed one.
static_assert(kNoBlock == UINT32_MAX);

// ---------------------------------------------------------------------------
// ChannelLoan

ChannelLoan::~ChannelLoan() { Reset(); }

ChannelLoan::ChannelLoan(ChannelLoan&& other) noexcept
    : owner_(std::move(other.owner_)),
      data_(std::exchange(other.data_, {})),
      offset_(std::exchange(other.offset_, 0)),
      descriptor_(other.descriptor_),
      generation_(other.generation_),
      held_(std::exchange(other.held_, false)),
      reused_(std::exchange(other.reused_, false)) {}

ChannelLoan& ChannelLoan::operator=(ChannelLoan&& other) noexcept {
  if (this != &other) {
    Reset();
    owner_ = std::move(other.owner_);
    data_ = std::exchange(other.data_, {});
    offset_ = std::exchange(other.offset_, 0);
    descriptor_ = other.descriptor_;
    generation_ = other.generation_;
    held_ = std::exchange(other.held_, false);
    reused_ = std::exchange(other.reused_, false);
  }
  return *this;
}

const std::string& ChannelLoan::channel_name() const {
  static const std::string kNone;
  return owner_ != nullptr ? owner_->name : kNone;
}

void ChannelLoan::Reset() {
  if (held_) owner_->PushReleased(descriptor_, generation_);
  held_ = false;
  reused_ = false;
  owner_.reset();
  data_ = {};
}

// ---------------------------------------------------------------------------
// ChannelProducer

ChannelProducer::ChannelProducer(std::shared_ptr<ProducerState> impl) : impl_(std::move(impl)) {}

ChannelProducer::~ChannelProducer() {
  Close();
  ProducerState& state = *impl_;
  state.consumers.RemoveSegments();
  state.RemoveExtensionNames();
  // Loans may keep the state; nothing may call whoever granted extensions
  // any more.
  state.options.extensions = {};
  (void)Segment::Remove(state.name + std::string(internal::kRegistrySuffix));
  (void)Segment::Remove(state.name);
}

Result<std::unique_ptr<ChannelProducer>> ChannelProducer::Create(std::string_view name,
                                                                 const ChannelOptions& options) {
  ALKAID_RETURN_NOT_OK(Segment::ValidateName(name));
  if (name.size() + internal::kChannelNameReserve > kMaxSegmentNameLength) {
    return Status::Invalid("channel name '", name, "' is ", name.size(),
                           " characters long; at most ",
                           kMaxSegmentNameLength - internal::kChannelNameReserve,
                           " leave room for its consumers' segment names");
  }
  ALKAID_ASSIGN_OR_RAISE(ChannelGeometry geometry, internal::ComputeChannelGeometry(options));
  ALKAID_ASSIGN_OR_RAISE(
      std::shared_ptr<Segment> segment,
      Segment::Create(name, geometry.total_size, SegmentKind::kChannel, options.segment));
  SegmentOptions reg_options;
  reg_options.access = options.segment.access == SegmentAccess::kOwnerOnly
                           ? SegmentAccess::kOwnerOnly
                           : SegmentAccess::kOwnerAndGroup;
  reg_options.group = options.segment.group;  // consumers of that group register in it
  auto registry = Segment::Create(
      std::string(name) + std::string(internal::kRegistrySuffix),
      sizeof(RegistryHeaderData) + uint64_t{geometry.max_consumers} * sizeof(RegistrationData),
      SegmentKind::kChannelRegistry, reg_options);
  if (!registry.ok()) {
    (void)Segment::Remove(name);
    return registry.status();
  }

  auto* header = reinterpret_cast<ChannelHeaderData*>(segment->data());
  internal::WriteChannelHeader(geometry, header);
  auto* reg_header = reinterpret_cast<RegistryHeaderData*>((*registry)->data());
  reg_header->layout_version = internal::kChannelLayoutVersion;
  reg_header->max_consumers = geometry.max_consumers;
  // Release: publishes the fields above; partner of the consumers' acquire
  // load of the magic.
  reg_header->magic.store(internal::kRegistryMagic, std::memory_order_release);
  header->magic.store(internal::kChannelMagic, std::memory_order_release);

  auto owner = std::make_shared<ProducerState>(options, std::string(name), geometry,
                                               std::move(segment), std::move(*registry));
  return std::unique_ptr<ChannelProducer>(new ChannelProducer(std::move(owner)));
}

// LoanImpl and PublishImpl are forced inline into their few callers (the
// public Loan and Publish calls): as calls of their own they cost a second
// frame and Status hand-over per message.
[[gnu::always_inline]] inline Status ChannelProducer::LoanImpl(uint64_t length, ChannelLoan* into) {
  ProducerState& state = *impl_;
  if (state.closed) return Status::Invalid("channel '", state.name, "' is closed");
  if (length > state.geometry.arena_max) {
    return Status::CapacityError("channel '", state.name, "': a block of ", length,
                                 " bytes exceeds the arena's maximum of ", state.geometry.arena_max,
                                 " bytes",
                                 state.geometry.arena_max == state.geometry.arena_size
                                     ? " (it does not grow)"
                                     : " (ChannelOptions::max_arena_bytes; a broker topic's "
                                       "max_arena_bytes)");
  }
  const uint64_t capacity = std::max<uint64_t>(internal::RoundUp(length, 64), 64);
  // A fixed block if it fits one; else a freed block of this size first
  // (the warmest), then returned ones, then new space.
  uint32_t desc = capacity <= state.geometry.fixed_size ? state.TakeFixed() : kNoBlock;
  if (desc == kNoBlock) {
    desc = state.blocks.TakeCached(capacity);
    if (desc == kNoBlock) {
      state.TakeReleased();
      state.consumers.DrainAllReturns(state.blocks);
      desc = state.blocks.TakeCached(capacity);
    }
    if (desc == kNoBlock) desc = state.blocks.TryTake(capacity);
    if (desc == kNoBlock) {
      ALKAID_ASSIGN_OR_RAISE(desc, state.WaitForSpace(length, capacity));
    }
  }
  ChannelLoan& loan = *into;
  if (loan.owner_ != impl_) loan.owner_ = impl_;
  if (state.IsFixed(desc)) {
    ChannelWriter::LendFixed(state, desc - state.geometry.block_count, length, &loan);
    return Status::OK();
  }
  state.blocks.Lend(desc);
  const internal::Block& b = state.blocks[desc];
  loan.data_ = {state.Address(b.offset), static_cast<std::size_t>(length)};
  loan.offset_ = b.offset;
  loan.generation_ = b.generation;
  loan.descriptor_ = desc;
  loan.held_ = true;
  return Status::OK();
}

Result<ChannelLoan> ChannelProducer::Loan(uint64_t length) {
  ChannelLoan loan;
  ALKAID_RETURN_NOT_OK(LoanImpl(length, &loan));
  return loan;
}

Status ChannelProducer::LoanInto(uint64_t length, ChannelLoan* loan) {
  if (loan == nullptr) return Status::Invalid("channel '", impl_->name, "': null loan");
  if (loan->held_) {
    if (loan->owner_ == impl_) {
      impl_->PushReleased(loan->descriptor_, loan->generation_);
      loan->held_ = false;
      loan->data_ = {};
    } else {
      loan->Reset();
    }
  }
  ALKAID_RETURN_NOT_OK(LoanImpl(length, loan));
  loan->reused_ = true;
  return Status::OK();
}

namespace {

// Publish's overwrite of message n - slot_count with kDropOldest (n is
// being written into `slot`, whose message's block was `old`): out of line,
// so that the common path keeps a small frame.
[[gnu::noinline]] void LapForDropOldest(ProducerState& state, ChannelSlotData* slot, uint64_t n,
                                        uint32_t old) {
  // seq_cst: the Dekker pair with a consumer's seq_cst cursor store and
  // seq_cst reload of this word: either it sees the overwrite begin (and
  // treats message n - slots as lost, returning its block if it already
  // claimed it), or our load of its cursor below sees it passed it.
  slot->sequence.store(2 * n + 1, std::memory_order_seq_cst);
  const uint64_t m0 = n - state.geometry.slot_count;
  uint64_t least = n;
  for (uint32_t k : state.consumers.counted_list()) {
    const uint64_t c = state.consumers[k].Cursor(std::memory_order_seq_cst);
    if (c <= m0) {
      ++state.stats.dropped;
      ++state.consumers[k].dropped;
      if (old != kNoBlock && TestBit(state.blocks[old].holders, k)) {
        ClearBit(state.blocks[old].holders, k);
      }
      least = std::min(least, m0 + 1);
    } else {
      least = std::min(least, c);
    }
  }
  state.consumers.set_min_cursor(least);
}

}  // namespace

// Publish's steps once its checks passed: the channel is open, `body` (if
// any) is a loan of this producer not published yet, `payload` fits a slot
// and `shape` was added.
[[gnu::always_inline]] inline Status ChannelProducer::Commit(ProducerState& state,
                                                             std::span<const std::byte> payload,
                                                             ChannelLoan* body, bool keep,
                                                             uint64_t user, uint32_t shape) {
  state.PollRegistry();
  const uint64_t n = state.slots.next_sequence;
  const uint64_t slots = state.geometry.slot_count;
  const bool lapping = n >= slots && state.consumers.min_cursor() <= n - slots &&
                       state.consumers.counted_count() > 0;
  const bool drop = state.options.policy == SlowConsumerPolicy::kDropOldest;
  if (lapping && !drop && state.consumers.ScanMinCursor(n) <= n - slots) {
    ALKAID_RETURN_NOT_OK(state.WaitForRoom(n));
  }
  ChannelSlotData* slot = state.Slot(n);
  const uint32_t index = static_cast<uint32_t>(n & state.geometry.mask);
  const uint32_t old = state.slots.slot_block[index];
  // A fixed block's holders are not bits: its slot's entry alone goes.
  const bool old_fixed = old != kNoBlock && state.IsFixed(old);
  if (lapping && drop) {
    LapForDropOldest(state, slot, n, old_fixed ? kNoBlock : old);
  } else {
    slot->sequence.store(2 * n + 1, std::memory_order_relaxed);
    // Release fence: the odd sequence is visible before any field below
    // (the seqlock writer's half; a lapped reader's re-check sees it).
    std::atomic_thread_fence(std::memory_order_release);
  }
  if (old != kNoBlock) {
    state.slots.slot_block[index] = kNoBlock;
    if (!old_fixed) state.blocks.DropSlotRef(old);
  }
  if (body != nullptr) {
    const uint32_t desc = body->descriptor_;
    uint64_t word;
    uint32_t arena = 0;  // a fixed block is in the channel segment
    if (state.IsFixed(desc)) {
      const uint32_t i = desc - state.geometry.block_count;
      ProducerState::FixedBlock& f = state.fixed[i];
      f.loaned = false;
      f.loan_ref = keep;
      f.sequence = n;
      state.PushFlight(i);
      word = internal::PackBlock(internal::kFixedBlockFlag | i, 0);
    } else {
      state.blocks.Publish(desc, keep, state.consumers.counted());
      word = internal::PackBlock(desc, body->generation_);
      arena = state.ArenaId(body->offset_);
    }
    state.slots.slot_block[index] = desc;
    slot->body_offset.store(body->offset_, std::memory_order_relaxed);
    slot->body_length.store(body->data_.size(), std::memory_order_relaxed);
    state.published_bytes += body->data_.size();
    slot->block.store(word, std::memory_order_relaxed);
    slot->extension.store(arena, std::memory_order_relaxed);
  } else {
    slot->body_offset.store(0, std::memory_order_relaxed);
    slot->body_length.store(0, std::memory_order_relaxed);
    slot->block.store(0, std::memory_order_relaxed);
    slot->extension.store(0, std::memory_order_relaxed);
  }
  slot->payload_size.store(static_cast<uint32_t>(payload.size()), std::memory_order_relaxed);
  slot->shape.store(shape, std::memory_order_relaxed);
  slot->user.store(user, std::memory_order_relaxed);
  if (state.options.stamp_publish_time) {
    slot->publish_ns.store(internal::RealtimeNs(), std::memory_order_relaxed);
  }
  if (!payload.empty()) {
    auto* words = reinterpret_cast<std::atomic<uint64_t>*>(slot + 1);
    const std::size_t full = payload.size() / 8;
    for (std::size_t i = 0; i < full; ++i) {
      uint64_t w;
      std::memcpy(&w, payload.data() + i * 8, 8);
      words[i].store(w, std::memory_order_relaxed);
    }
    if (payload.size() % 8 != 0) {
      uint64_t w = 0;
      std::memcpy(&w, payload.data() + full * 8, payload.size() % 8);
      words[full].store(w, std::memory_order_relaxed);
    }
  }
  // Release: publishes the fields; partner of the consumer's acquire load.
  slot->sequence.store(2 * n + 2, std::memory_order_release);
  if (body != nullptr && !keep) {
    body->held_ = false;
    body->data_ = {};
    if (!body->reused_) body->owner_.reset();
  }
  state.slots.next_sequence = n + 1;
  ++state.published;
  // seq_cst: the Dekker pair with a consumer about to sleep (WakeSleepers).
  state.header->write_sequence.store(n + 1, std::memory_order_seq_cst);
  state.WakeSleepers();
  return Status::OK();
}

// The checks of a message's form, Publish's and NewWriter's: its inline
// bytes fit a slot and its shape id was added. FormError says which failed,
// out of line (its formatting kept out of the publish's frame).
[[gnu::always_inline]] inline bool ChannelProducer::FormFits(const ProducerState& state,
                                                             std::span<const std::byte> payload,
                                                             uint32_t shape) {
  return payload.size() <= state.geometry.inline_capacity && shape <= state.shapes_used;
}

[[gnu::noinline, gnu::cold]] Status ChannelProducer::FormError(const ProducerState& state,
                                                               std::span<const std::byte> payload,
                                                               uint32_t shape) {
  if (payload.size() > state.geometry.inline_capacity) {
    return Status::Invalid("channel '", state.name, "': inline payload of ", payload.size(),
                           " bytes exceeds the capacity of ", state.geometry.inline_capacity);
  }
  return Status::Invalid("channel '", state.name, "': shape ", shape, " was not added");
}

[[gnu::always_inline]] inline Status ChannelProducer::PublishImpl(
    std::span<const std::byte> payload, ChannelLoan* body, bool keep, uint64_t user,
    uint32_t shape) {
  ProducerState& state = *impl_;
  if (state.closed) return Status::Invalid("channel '", state.name, "' is closed");
  if (body != nullptr && (state.IsFixed(body->descriptor_)
                              ? !state.fixed[body->descriptor_ - state.geometry.block_count].loaned
                              : state.blocks[body->descriptor_].state != BlockState::kLoaned)) {
    return Status::Invalid("channel '", state.name, "': the loan was published already");
  }
  if (!FormFits(state, payload, shape)) return FormError(state, payload, shape);
  return Commit(state, payload, body, keep, user, shape);
}

Status ChannelProducer::Publish(std::span<const std::byte> payload, ChannelLoan&& body,
                                uint64_t user, uint32_t shape) {
  if (!body.held_ || body.owner_ != impl_) {
    return Status::Invalid("channel '", impl_->name, "': the loan is ",
                           body.valid() ? "from another channel" : "empty");
  }
  return PublishImpl(payload, &body, /*keep=*/false, user, shape);
}

Status ChannelProducer::Publish(std::span<const std::byte> payload, const ChannelLoan& body,
                                uint64_t user, uint32_t shape) {
  if (!body.held_ || body.owner_ != impl_) {
    return Status::Invalid("channel '", impl_->name, "': the loan is ",
                           body.valid() ? "from another channel" : "empty");
  }
  return PublishImpl(payload, const_cast<ChannelLoan*>(&body), /*keep=*/true, user, shape);
}

Status ChannelProducer::Publish(std::span<const std::byte> payload, uint64_t user, uint32_t shape) {
  return PublishImpl(payload, nullptr, /*keep=*/false, user, shape);
}

Result<ChannelWriter> ChannelProducer::NewWriter(uint64_t length,
                                                 std::span<const std::byte> payload, uint64_t user,
                                                 uint32_t shape) {
  ProducerState& state = *impl_;
  if (state.closed) return Status::Invalid("channel '", state.name, "' is closed");
  if (length > state.geometry.arena_max) {
    return Status::CapacityError("channel '", state.name, "': a block of ", length,
                                 " bytes exceeds the arena's maximum of ", state.geometry.arena_max,
                                 " bytes");
  }
  if (!FormFits(state, payload, shape)) return FormError(state, payload, shape);
  ChannelWriter w;
  w.producer_ = this;
  w.hot_ = &state;
  w.loan_.owner_ = impl_;
  w.loan_.reused_ = true;  // Publish keeps the owner
  w.payload_.assign(payload.begin(), payload.end());
  w.length_ = length;
  w.user_ = user;
  w.shape_ = shape;
  w.fixed_ = std::max<uint64_t>(internal::RoundUp(length, 64), 64) <= state.geometry.fixed_size;
  w.at_once_ = w.fixed_ && payload.empty() && !state.options.stamp_publish_time;
  return w;
}

// ---------------------------------------------------------------------------
// ChannelWriter

// Loan's general way (all of it, its common case included).
Status ChannelWriter::LoanGeneral() {
  if (hot_ == nullptr) return Status::Invalid("ChannelWriter: empty (not made by NewWriter)");
  auto& state = static_cast<ProducerState&>(*hot_);
  if (loan_.held_) {
    return Status::Invalid("channel '", state.name, "': the block lent before (offset ",
                           loan_.offset_, ") was not published");
  }
  if (fixed_ && !state.closed) {
    const uint32_t desc = state.TakeFixed();
    if (desc != kNoBlock) {
      LendFixed(state, desc - state.geometry.block_count, length_, &loan_);
      return Status::OK();
    }
  }
  // No fixed block: the general way (which looks for one again first).
  return producer_->LoanInto(length_, &loan_);
}

// Both Publish calls: the block lent by Loan (and not published since) is
// ours; the rest of Publish's checks were NewWriter's.
[[gnu::always_inline]] inline Status ChannelWriter::CommitLent(bool keep) {
  if (!loan_.held_) {
    return Status::Invalid("ChannelWriter::Publish: nothing to publish (no block is lent)");
  }
  auto& state = static_cast<ProducerState&>(*hot_);
  if (state.closed) return Status::Invalid("channel '", state.name, "' is closed");
  return ChannelProducer::Commit(state, payload_, &loan_, keep, user_, shape_);
}

Status ChannelWriter::PublishGeneral() { return CommitLent(/*keep=*/false); }

void ChannelWriter::WakeSleepers() { static_cast<ProducerState&>(*hot_).WakeSleepers(); }

Status ChannelWriter::Publish(ChannelLoan* held) {
  if (held == nullptr) return Status::Invalid("ChannelWriter::Publish: null loan");
  ALKAID_RETURN_NOT_OK(CommitLent(/*keep=*/true));
  // The published loan goes to `held`; ours keeps its owner for the next.
  std::shared_ptr<ProducerState> owner = loan_.owner_;
  *held = std::move(loan_);
  loan_.owner_ = std::move(owner);
  loan_.reused_ = true;
  return Status::OK();
}

Result<uint32_t> ChannelProducer::AddShape(std::span<const std::byte> bytes) {
  ProducerState& state = *impl_;
  if (state.shapes_used >= state.geometry.shape_count) {
    return Status::CapacityError("channel '", state.name, "': all ", state.geometry.shape_count,
                                 " shapes are taken");
  }
  if (bytes.size() > state.geometry.shape_size - sizeof(internal::ShapeEntryData)) {
    return Status::CapacityError(
        "channel '", state.name, "': a shape of ", bytes.size(), " bytes exceeds the ",
        state.geometry.shape_size - sizeof(internal::ShapeEntryData), "-byte entries");
  }
  auto* entry = reinterpret_cast<internal::ShapeEntryData*>(
      state.segment->data() + state.geometry.shapes_offset +
      uint64_t{state.shapes_used} * state.geometry.shape_size);
  auto* words = reinterpret_cast<std::atomic<uint64_t>*>(entry + 1);
  for (std::size_t i = 0; i * 8 < bytes.size(); ++i) {
    uint64_t w = 0;
    std::memcpy(&w, bytes.data() + i * 8, std::min<std::size_t>(8, bytes.size() - i * 8));
    words[i].store(w, std::memory_order_relaxed);
  }
  // Release: partner of the consumer's acquire load in ReadShape.
  entry->size_plus_one.store(static_cast<uint32_t>(bytes.size()) + 1, std::memory_order_release);
  return ++state.shapes_used;
}

void ChannelProducer::Poll() {
  ProducerState& state = *impl_;
  state.TakeReleased();
  state.consumers.LookAtEveryEntry();
  (void)state.consumers.PollRegistryAccepting(state.blocks, state.slots);
  if (std::chrono::steady_clock::now() >= state.consumers.next_liveness()) {
    state.consumers.ReapDead(state.blocks);
  }
  state.consumers.DrainAllReturns(state.blocks);
  state.ReleaseIdleExtensions(/*force=*/false);
}

void ChannelProducer::ReleaseIdleExtensions() { impl_->ReleaseIdleExtensions(/*force=*/false); }

void ChannelProducer::CollectReturns() {
  impl_->TakeReleased();
  impl_->consumers.DrainAllReturns(impl_->blocks);
}

uint64_t ChannelProducer::AcceptConsumers() {
  return impl_->consumers.PollRegistryAccepting(impl_->blocks, impl_->slots);
}

void ChannelProducer::Close() {
  ProducerState& state = *impl_;
  if (state.closed) return;
  state.closed = true;
  // Release: partner of the consumers' acquire load before EndOfStream.
  state.header->closed.store(1, std::memory_order_release);
  state.header->data_futex.fetch_add(1, std::memory_order_release);
  internal::FutexWakeAll(&state.header->data_futex);
  // Doorbells too, whatever their episode: the end is news for every one.
  for (uint32_t k : state.consumers.counted_list()) {
    internal::ConsumerState& c = state.consumers[k];
    const uint32_t bell = c.header->doorbell.load(std::memory_order_acquire);
    if (bell != 0) (void)c.doorbell.Sound(internal::RegPid(c.word), bell);
  }
}

uint64_t ChannelProducer::next_sequence() const { return impl_->slots.next_sequence; }

ChannelStats ChannelProducer::stats() const {
  const ProducerState& state = *impl_;
  ChannelStats s = state.stats;
  s.published = state.published;
  s.published_bytes = state.published_bytes;
  const internal::ConsumerCounts& counts = state.consumers.counts();
  s.returns = counts.returns;
  s.bogus_returns = counts.bogus_returns;
  s.consumers_accepted = counts.consumers_accepted;
  s.consumers_finished = counts.consumers_finished;
  s.consumers_reclaimed = counts.consumers_reclaimed;
  // Fixed blocks not known free: loaned, in flight or held.
  s.blocks_live = state.blocks.blocks_live() + (state.geometry.fixed_count - state.fixed_free_top);
  s.arena_bytes_free = state.blocks.free_bytes();
  s.arena_bytes = state.arena_bytes;
  for (const auto& e : state.extensions) s.extensions += e.id != 0 ? 1 : 0;
  return s;
}

std::vector<ChannelConsumerInfo> ChannelProducer::consumers() const {
  std::vector<ChannelConsumerInfo> out;
  consumers(&out);
  return out;
}

void ChannelProducer::consumers(std::vector<ChannelConsumerInfo>* into) const {
  const ProducerState& state = *impl_;
  std::vector<ChannelConsumerInfo>& out = *into;
  state.consumers.Describe(state.blocks, &out);
  if (state.geometry.fixed_count != 0) {
    for (ChannelConsumerInfo& c : out) {
      if (!c.accepted) continue;
      const uint64_t held = state.FixedHeldBy(c.index);
      c.held_blocks += held;
      c.held_bytes += held * state.geometry.fixed_size;
    }
  }
  // Bytes read: every body published, less those the slots still hold of
  // the messages from the consumer's cursor on (older ones were
  // overwritten: lost to it, counted as passed).
  const uint64_t end = state.slots.next_sequence;
  const uint64_t oldest = end > state.geometry.slot_count ? end - state.geometry.slot_count : 0;
  for (ChannelConsumerInfo& c : out) {
    if (!c.accepted) continue;
    uint64_t unread = 0;
    for (uint64_t s = std::max(c.cursor, oldest); s < end; ++s) {
      unread += state.Slot(s)->body_length.load(std::memory_order_relaxed);
    }
    c.read_bytes = state.published_bytes - std::min(unread, state.published_bytes);
  }
}

const std::string& ChannelProducer::name() const { return impl_->name; }
const ChannelOptions& ChannelProducer::options() const { return impl_->options; }
void ChannelProducer::set_stop(std::stop_token stop) { impl_->options.stop = std::move(stop); }
bool ChannelProducer::huge_pages() const { return impl_->segment->huge_pages(); }

}  // namespace alkaid::shm
