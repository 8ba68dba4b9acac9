#include "alkaid/shm/ring.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "alkaid/common/process.h"
#include "futex_internal.h"
#include "ring_layout_internal.h"
#include "wait_internal.h"

namespace alkaid::shm {

using internal::ConsumerData;
using internal::ConsumerWord;
using internal::kCacheLineSize;
using internal::kConsumerActive;
using internal::kConsumerClaimed;
using internal::kConsumerDetached;
using internal::kConsumerStateMask;
using internal::kRingLayoutVersion;
using internal::kRingMagic;
using internal::kSlotHasBody;
using internal::RingHeaderData;
using internal::RoundUp;
using internal::SlotCommitted;
using internal::SlotHeaderData;
using internal::SlotWriting;

namespace {

// Validated geometry of a ring; computed from RingOptions by the producer
// and from the (untrusted) header by consumers, then kept in private memory
// so later corruption of the header cannot move any access out of bounds.
struct Geometry {
  uint32_t slot_count = 0;
  uint32_t slot_size = 0;
  uint32_t inline_capacity = 0;
  uint32_t max_consumers = 0;
  uint64_t consumers_offset = 0;
  uint64_t slots_offset = 0;
  uint64_t payload_size = 0;
};

Result<Geometry> ComputeGeometry(uint32_t slot_count, uint32_t inline_capacity,
                                 uint32_t max_consumers, std::string_view name) {
  if (slot_count < 2 || slot_count > kMaxSlots || !internal::IsPowerOfTwo(slot_count)) {
    return Status::Invalid("ring '", name, "': slot count ", slot_count,
                           " must be a power of two between 2 and ", kMaxSlots);
  }
  if (inline_capacity > kMaxInlinePayload) {
    return Status::Invalid("ring '", name, "': inline capacity ", inline_capacity,
                           " exceeds the limit of ", kMaxInlinePayload, " bytes");
  }
  if (max_consumers < 1 || max_consumers > kMaxConsumers) {
    return Status::Invalid("ring '", name, "': max_consumers ", max_consumers,
                           " must be between 1 and ", kMaxConsumers);
  }
  Geometry g;
  g.slot_count = slot_count;
  g.inline_capacity = static_cast<uint32_t>(RoundUp(inline_capacity, kCacheLineSize));
  g.slot_size = static_cast<uint32_t>(sizeof(SlotHeaderData)) + g.inline_capacity;
  g.max_consumers = max_consumers;
  g.consumers_offset = sizeof(RingHeaderData);
  g.slots_offset = g.consumers_offset + uint64_t{max_consumers} * sizeof(ConsumerData);
  g.payload_size = g.slots_offset + uint64_t{slot_count} * g.slot_size;
  return g;
}

// Pointers into one process's mapping of a ring, plus its geometry.
struct RingView {
  std::shared_ptr<Segment> segment;
  Geometry g;
  uint64_t mask = 0;
  RingHeaderData* header = nullptr;
  ConsumerData* consumers = nullptr;
  std::byte* slots = nullptr;

  void Init(std::shared_ptr<Segment> seg, const Geometry& geometry) {
    segment = std::move(seg);
    g = geometry;
    mask = g.slot_count - 1;
    header = reinterpret_cast<RingHeaderData*>(segment->payload());
    consumers = reinterpret_cast<ConsumerData*>(segment->payload() + g.consumers_offset);
    slots = segment->payload() + g.slots_offset;
  }
  // Index is masked: always inside the slot array.
  SlotHeaderData* Slot(uint64_t sequence) const {
    return reinterpret_cast<SlotHeaderData*>(slots + (sequence & mask) * g.slot_size);
  }
  static std::atomic<uint64_t>* Words(SlotHeaderData* slot) {
    return reinterpret_cast<std::atomic<uint64_t>*>(reinterpret_cast<std::byte*>(slot) +
                                                    sizeof(SlotHeaderData));
  }
};

uint32_t StateOf(uint64_t word) { return static_cast<uint32_t>(word) & kConsumerStateMask; }
uint32_t TagOf(uint64_t word) { return static_cast<uint32_t>(word) >> 2; }
using internal::ConsumerPid;

// Frees registration `c` if it is force-detached and its owner's process is
// gone: nobody can store into it any more. Returns true if it was freed.
bool FreeIfOwnerGone(internal::ConsumerData& c) {
  uint64_t word = c.state.load(std::memory_order_acquire);
  if (StateOf(word) != kConsumerDetached) return false;
  // The pid is part of the word, written by the claim itself.
  if (!::alkaid::ProcessIsGone(ConsumerPid(word))) return false;
  // Release: partner of the acquire CAS of the next Attach.
  return c.state.compare_exchange_strong(word, 0, std::memory_order_release,
                                         std::memory_order_relaxed);
}

// Checks a ring segment's header (written by a process we do not trust)
// and returns the geometry it implies; from then on only this private copy
// is used.
Result<Geometry> CheckRingHeader(const Segment& seg) {
  const std::string& name = seg.name();
  const Segment* segment = &seg;
  if (segment->payload_size() < sizeof(RingHeaderData)) {
    return Status::Invalid("ring '", name, "': payload of ", segment->payload_size(),
                           " bytes cannot hold the ring header");
  }
  const auto* h = reinterpret_cast<const RingHeaderData*>(segment->payload());
  // Acquire: partner of the release store of `magic` in RingProducer::Create.
  const uint64_t magic = h->magic.load(std::memory_order_acquire);
  if (magic != kRingMagic) {
    return Status::Invalid("ring '", name, "': ring magic 0x", std::hex, magic,
                           " at payload offset 0, expected 0x", kRingMagic,
                           " (not initialised yet, or not a ring)");
  }
  if (h->layout_version != kRingLayoutVersion) {
    return Status::Invalid("ring '", name, "': layout version ", h->layout_version,
                           ", this build reads ", kRingLayoutVersion);
  }
  // Recompute the geometry from the header's counts and insist that every
  // derived field matches and fits: from here on only the private copy is
  // used.
  auto geometry = ComputeGeometry(h->slot_count, h->inline_capacity, h->max_consumers, name);
  if (!geometry.ok()) {
    return geometry.status().WithContext("ring header is corrupt");
  }
  const Geometry g = *geometry;
  if (h->inline_capacity != g.inline_capacity || h->slot_size != g.slot_size ||
      h->consumers_offset != g.consumers_offset || h->slots_offset != g.slots_offset ||
      g.payload_size > segment->payload_size()) {
    return Status::Invalid("ring '", name, "': header geometry (slot size ", h->slot_size,
                           ", consumers at ", h->consumers_offset, ", slots at ", h->slots_offset,
                           ", ", g.payload_size, " bytes needed) does not match a ",
                           segment->payload_size(), "-byte segment");
  }
  if (h->policy != static_cast<uint32_t>(SlowConsumerPolicy::kBlockProducer) &&
      h->policy != static_cast<uint32_t>(SlowConsumerPolicy::kDropOldest)) {
    return Status::Invalid("ring '", name, "': unknown slow-consumer policy ", h->policy);
  }
  return g;
}

// Wakes the consumers blocked in WaitForData, if any announced itself. The
// plain load keeps the publish path free of read-modify-writes; the
// exchange makes one wake-up system call per sleeping episode rather than
// one per message while the sleepers are being scheduled.
void WakeConsumers(RingHeaderData* h) {
  // seq_cst load: second half of the Dekker pair (see Publish / Close).
  if (h->data_waiters.load(std::memory_order_seq_cst) == 0) return;
  if (h->data_waiters.exchange(0, std::memory_order_seq_cst) == 0) return;
  // Release: partner of the consumer's load of the futex word before it
  // announced itself; a wake after that load changes the word, so its
  // FUTEX_WAIT returns at once.
  h->data_futex.fetch_add(1, std::memory_order_release);
  internal::FutexWakeAll(&h->data_futex);
}

// Wakes a producer blocked in WaitForRoom. Release increment: partner of the
// producer's load of the futex word before it sleeps (it re-scans after).
void WakeProducer(RingHeaderData* h) {
  h->space_futex.fetch_add(1, std::memory_order_release);
  internal::FutexWakeAll(&h->space_futex);
}

}  // namespace

// ---------------------------------------------------------------------------
// RingProducer

struct RingProducer::Impl {
  RingView v;
  SlowConsumerPolicy policy = SlowConsumerPolicy::kBlockProducer;
  BodyAllocator* bodies = nullptr;
  // Producer reference held for the body of the message in each slot
  // (invalid handle: none). Producer-private.
  std::vector<BlockHandle> held;
  // Bodies of messages below this sequence have been released.
  uint64_t release_cursor = 0;
  // Lower bound of every active consumer's cursor, from the last scan.
  // Consumers attached since then start at or above the write sequence the
  // scan saw (see Attach), so it stays a lower bound.
  uint64_t cached_min = 0;
  bool closed = false;

  // Smallest cursor among active consumers, or `next` if none. Cursors above
  // `next` (impossible unless corrupt) are ignored.
  uint64_t ScanMinCursor(uint64_t next, uint32_t* slowest = nullptr) const {
    // seq_cst fence: pairs with the seq_cst store+fence in Attach (Dekker):
    // either we see the new consumer as active, or it sees the write sequence
    // we stored before this fence and starts at or above it.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    uint64_t min = next;
    for (uint32_t i = 0; i < v.g.max_consumers; ++i) {
      // Acquire: partner of the seq_cst store of kConsumerActive in Attach
      // (makes its initial cursor visible) and of the release CAS in Detach.
      if (StateOf(v.consumers[i].state.load(std::memory_order_acquire)) != kConsumerActive) {
        continue;
      }
      // Acquire: partner of the consumer's release store of its cursor, so
      // its reads of the slots below happen before we overwrite them.
      const uint64_t c = v.consumers[i].cursor.load(std::memory_order_acquire);
      if (c < min) {
        min = c;
        if (slowest != nullptr) *slowest = i;
      }
    }
    return min;
  }

  void ReleaseHeld(uint64_t sequence) {
    BlockHandle& h = held[sequence & v.mask];
    if (h.valid()) {
      // Only fails on corrupted shared state, which the allocator reports
      // by quarantining the block; the ring has nothing to add.
      (void)bodies->Release(h);
      h = {};
    }
  }

  void ReleaseBodiesBelow(uint64_t limit, uint64_t next) {
    if (bodies == nullptr) return;
    uint64_t m = std::max(release_cursor, next > v.g.slot_count ? next - v.g.slot_count : 0);
    for (; m < limit; ++m) ReleaseHeld(m);
    release_cursor = std::max(release_cursor, limit);
  }
};

RingProducer::RingProducer(std::unique_ptr<Impl> impl, const RingOptions& options)
    : impl_(std::move(impl)), options_(options) {}

RingProducer::~RingProducer() {
  Close();
  if (impl_->bodies != nullptr) {
    impl_->bodies->SetReclaimCallback(nullptr);
    for (uint64_t m = 0; m < impl_->v.g.slot_count; ++m) impl_->ReleaseHeld(m);
  }
}

Result<uint64_t> RingProducer::PayloadSizeFor(const RingOptions& options) {
  ALKAID_ASSIGN_OR_RAISE(Geometry g, ComputeGeometry(options.slot_count, options.inline_capacity,
                                                     options.max_consumers, "(options)"));
  return g.payload_size;
}

Result<std::unique_ptr<RingProducer>> RingProducer::Create(std::string_view name,
                                                           const RingOptions& options,
                                                           BodyAllocator* bodies) {
  ALKAID_ASSIGN_OR_RAISE(Geometry g, ComputeGeometry(options.slot_count, options.inline_capacity,
                                                     options.max_consumers, name));
  if (options.policy != SlowConsumerPolicy::kBlockProducer &&
      options.policy != SlowConsumerPolicy::kDropOldest) {
    return Status::Invalid("ring '", name, "': unknown slow-consumer policy ",
                           static_cast<uint32_t>(options.policy));
  }
  if (options.publish_timeout.count() < 0) {
    return Status::Invalid("ring '", name, "': negative publish_timeout");
  }
  ALKAID_ASSIGN_OR_RAISE(
      auto segment, Segment::Create(name, g.payload_size, SegmentKind::kRing, options.segment));
  auto impl = std::make_unique<Impl>();
  impl->v.Init(segment, g);
  impl->policy = options.policy;
  impl->bodies = bodies;
  impl->held.assign(g.slot_count, BlockHandle{});

  // The segment is zero-filled: every consumer entry is free, every slot
  // has sequence 0 (never written). Fill in the immutable line and publish.
  auto* h = new (segment->payload()) RingHeaderData();
  h->layout_version = kRingLayoutVersion;
  h->policy = static_cast<uint32_t>(options.policy);
  h->slot_count = g.slot_count;
  h->slot_size = g.slot_size;
  h->inline_capacity = g.inline_capacity;
  h->max_consumers = g.max_consumers;
  h->consumers_offset = g.consumers_offset;
  h->slots_offset = g.slots_offset;
  h->producer_pid = static_cast<uint32_t>(::getpid());
  // Release: publishes the header; partner of the acquire load of `magic`
  // in RingConsumer::Open.
  h->magic.store(kRingMagic, std::memory_order_release);

  RingOptions stored = options;
  stored.inline_capacity = g.inline_capacity;
  std::unique_ptr<RingProducer> producer(new RingProducer(std::move(impl), stored));
  if (bodies != nullptr) {
    RingProducer* self = producer.get();
    bodies->SetReclaimCallback([self] { self->ReleaseConsumedBodies(); });
  }
  return producer;
}

Status RingProducer::Publish(std::span<const std::byte> payload) {
  return PublishImpl(payload, nullptr, false);
}

Status RingProducer::Publish(std::span<const std::byte> payload, WritableBlock& body) {
  if (impl_->bodies == nullptr) {
    return Status::Invalid("ring '", name(),
                           "': Publish with a WritableBlock needs the BodyAllocator at Create");
  }
  if (!body.valid()) return Status::Invalid("ring '", name(), "': Publish of an empty block");
  const BlockHandle handle = body.handle();
  ALKAID_RETURN_NOT_OK(PublishImpl(payload, &handle, true));
  (void)body.Detach();  // the ring holds the producer's reference now
  return Status::OK();
}

Status RingProducer::PublishDescriptor(std::span<const std::byte> payload,
                                       const BlockHandle& body) {
  return PublishImpl(payload, &body, false);
}

Status RingProducer::PublishImpl(std::span<const std::byte> payload, const BlockHandle* body,
                                 bool owned) {
  Impl& d = *impl_;
  const RingView& v = d.v;
  if (d.closed) return Status::Invalid("ring '", name(), "': Publish after Close");
  if (payload.size() > v.g.inline_capacity) {
    return Status::Invalid("ring '", name(), "': payload of ", payload.size(),
                           " bytes exceeds the inline capacity of ", v.g.inline_capacity, " bytes");
  }
  const uint64_t n = next_sequence_;
  const uint64_t slot_count = v.g.slot_count;
  SlotHeaderData* slot = v.Slot(n);

  if (n >= slot_count && d.policy == SlowConsumerPolicy::kBlockProducer) {
    // The slot still holds message n - slot_count; every active consumer
    // must have passed it.
    const uint64_t previous = n - slot_count;
    if (d.cached_min <= previous) {
      d.cached_min = d.ScanMinCursor(n);
      if (d.cached_min <= previous) ALKAID_RETURN_NOT_OK(WaitForRoom(n));
    }
  }

  // Seqlock write. Relaxed store of the odd value, then a release fence:
  // partner of the reader's acquire fence, so a reader that sees any of the
  // writes below also sees the odd value when it re-checks.
  slot->sequence.store(SlotWriting(n), std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);

  // The previous occupant is gone from the ring now; our reference to its
  // body is dropped after the fence on purpose: a consumer whose Acquire
  // fails because of this release is guaranteed (release fence here,
  // acquire fence in the reader) to see the changed sequence and count the
  // message as lost rather than report corruption. It is dropped after the
  // commit and the announcement, too: giving the block back to the
  // allocator (its free lists) is the slowest part of a publish and nobody
  // waits for it.
  BlockHandle previous_body;
  if (n >= slot_count && d.bodies != nullptr) {
    previous_body = std::exchange(d.held[(n - slot_count) & v.mask], BlockHandle{});
    d.release_cursor = std::max(d.release_cursor, n - slot_count + 1);
  }

  slot->payload_size.store(static_cast<uint32_t>(payload.size()), std::memory_order_relaxed);
  if (body != nullptr) {
    slot->flags.store(kSlotHasBody, std::memory_order_relaxed);
    slot->body_offset.store(body->offset, std::memory_order_relaxed);
    slot->body_length.store(body->length, std::memory_order_relaxed);
    slot->body_generation.store(body->generation, std::memory_order_relaxed);
    slot->body_descriptor.store(body->descriptor, std::memory_order_relaxed);
  } else {
    slot->flags.store(0, std::memory_order_relaxed);
    slot->body_offset.store(0, std::memory_order_relaxed);
    slot->body_length.store(0, std::memory_order_relaxed);
    slot->body_generation.store(0, std::memory_order_relaxed);
    slot->body_descriptor.store(0, std::memory_order_relaxed);
  }
  // Payload as 64-bit relaxed atomic words: a reader may copy the slot while
  // we overwrite it (kDropOldest); atomic words make that a detected retry
  // instead of a data race.
  std::atomic<uint64_t>* words = RingView::Words(slot);
  const std::size_t full = payload.size() / 8;
  const std::byte* src = payload.data();
  for (std::size_t i = 0; i < full; ++i) {
    uint64_t w;
    std::memcpy(&w, src + 8 * i, 8);
    words[i].store(w, std::memory_order_relaxed);
  }
  if (const std::size_t rest = payload.size() % 8; rest != 0) {
    uint64_t w = 0;
    std::memcpy(&w, src + 8 * full, rest);
    words[full].store(w, std::memory_order_relaxed);
  }
  // Release: commits the slot; partner of the consumer's acquire load of
  // the slot sequence.
  slot->sequence.store(SlotCommitted(n), std::memory_order_release);
  if (owned) d.held[n & v.mask] = *body;
  next_sequence_ = n + 1;

  // seq_cst store, then seq_cst load of data_waiters: Dekker pairing with
  // the consumer's seq_cst store of data_waiters followed by its seq_cst
  // load of write_sequence. Either we see its announcement and wake it, or
  // it sees this sequence and does not sleep. No syscall unless a consumer
  // announced itself.
  v.header->write_sequence.store(n + 1, std::memory_order_seq_cst);
  WakeConsumers(v.header);
  // Only fails on corrupted shared state, which the allocator reports by
  // quarantining the block; the ring has nothing to add.
  if (previous_body.valid()) (void)d.bodies->Release(previous_body);
  return Status::OK();
}

Status RingProducer::WaitForRoom(uint64_t n) {
  Impl& d = *impl_;
  const RingView& v = d.v;
  const uint64_t slot_count = v.g.slot_count;
  const uint64_t previous = n - slot_count;
  // Hysteresis: wait until every active consumer has freed `resume` slots,
  // not just one, so that a full ring does not degenerate into the producer
  // and the consumer trading one slot (and its cache lines) at a time.
  // target <= n: a consumer can always get there by reading what is already
  // in the ring.
  const uint64_t resume = std::clamp<uint64_t>(
      options_.resume_slots == 0 ? slot_count / 8 : options_.resume_slots, 1, slot_count);
  const uint64_t target = previous + resume;
  const auto start = internal::SteadyClock::now();
  const auto deadline = internal::DeadlineAfter(options_.publish_timeout);
  const auto spin_until =
      options_.publish_spin >= options_.publish_timeout ? deadline : start + options_.publish_spin;
  uint32_t slowest = 0;
  d.cached_min = d.ScanMinCursor(n, &slowest);

  // Phase 1: spin. Watch only the slowest consumer's cursor (one cache
  // line); rescan everybody when it reaches the target.
  uint32_t spins = 0;
  while (d.cached_min < target) {
    internal::CpuRelax();
    // Acquire: partner of the consumer's cursor store, as in ScanMinCursor.
    if (v.consumers[slowest].cursor.load(std::memory_order_acquire) >= target ||
        (++spins & 63) == 0) {
      d.cached_min = d.ScanMinCursor(n, &slowest);
      if ((spins & 63) == 0 && internal::SteadyClock::now() >= spin_until) break;
    }
  }

  // Phase 2: block on the space futex until a consumer crossing the target
  // wakes us (or a detach does).
  RingHeaderData* h = v.header;
  while (d.cached_min < target) {
    const auto now = internal::SteadyClock::now();
    if (now >= deadline) break;
    // seq_cst: the target must be visible to any consumer that sees the
    // announcement below (its seq_cst loads come later in the total order).
    h->space_target.store(target, std::memory_order_seq_cst);
    // Read the futex word before announcing: a wake after this load
    // changes it, so FUTEX_WAIT returns at once instead of missing it.
    const uint32_t word = h->space_futex.load(std::memory_order_seq_cst);
    // seq_cst increment, then the seq_cst fence at the start of the scan:
    // Dekker pair with the consumer's seq_cst cursor store followed by its
    // seq_cst load of space_waiters.
    h->space_waiters.fetch_add(1, std::memory_order_seq_cst);
    d.cached_min = d.ScanMinCursor(n, &slowest);
    if (d.cached_min < target) internal::FutexWait(&h->space_futex, word, deadline - now);
    // Relaxed: only a hint for the consumers; no data is published by it.
    h->space_waiters.fetch_sub(1, std::memory_order_relaxed);
    d.cached_min = d.ScanMinCursor(n, &slowest);
  }
  if (d.cached_min > previous) return Status::OK();
  const ConsumerData& c = v.consumers[slowest];
  return Status::TimedOut(
      "ring '", name(), "': publish of sequence ", n, " timed out after ",
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.publish_timeout).count(),
      " ms: consumer ", slowest, " (pid ", ConsumerPid(c.state.load(std::memory_order_relaxed)),
      ") is still at sequence ", d.cached_min, ", ", n - d.cached_min, " messages behind in a ",
      slot_count, "-slot ring");
}

void RingProducer::ReleaseConsumedBodies() {
  Impl& d = *impl_;
  if (d.bodies == nullptr) return;
  const uint64_t min = d.ScanMinCursor(next_sequence_);
  d.cached_min = std::max(d.cached_min, min);
  d.ReleaseBodiesBelow(min, next_sequence_);
}

Status RingProducer::SetSideband(std::span<const uint64_t> words) {
  if (words.size() > kSidebandWords) {
    return Status::Invalid("ring '", name(), "': a sideband holds ", kSidebandWords, " words, not ",
                           words.size());
  }
  RingHeaderData* h = impl_->v.header;
  // Seqlock write (see RingHeaderData): odd version, release fence, words,
  // even version with release. Only this thread writes the sideband.
  const uint64_t version = h->sideband_version.load(std::memory_order_relaxed);
  h->sideband_version.store(version + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (size_t i = 0; i < kSidebandWords; ++i) {
    h->sideband[i].store(i < words.size() ? words[i] : 0, std::memory_order_relaxed);
  }
  h->sideband_version.store(version + 2, std::memory_order_release);
  return Status::OK();
}

void RingProducer::Close() {
  Impl& d = *impl_;
  if (d.closed) return;
  d.closed = true;
  // seq_cst: same Dekker pairing as write_sequence in Publish; consumers
  // load `closed` with seq_cst after announcing themselves as waiters.
  d.v.header->closed.store(1, std::memory_order_seq_cst);
  WakeConsumers(d.v.header);
}

Status RingProducer::DetachConsumer(uint32_t id) {
  const RingView& v = impl_->v;
  if (id >= v.g.max_consumers) {
    return Status::IndexError("ring '", name(), "': consumer id ", id, " is out of range [0, ",
                              v.g.max_consumers, ")");
  }
  ConsumerData& c = v.consumers[id];
  uint64_t word = c.state.load(std::memory_order_relaxed);
  do {
    if (StateOf(word) != kConsumerActive) {
      return Status::KeyError("ring '", name(), "': consumer ", id, " is not active");
    }
    // Release: partner of the acquire load of the state in ScanMinCursor.
    // (seq_cst, also pairing with WaitForRoom's announcement like a cursor
    // store, for the wake below.)
    // The entry is not freed but marked detached (same tag): its owner may
    // be alive and about to store its cursor; see kConsumerDetached.
  } while (!c.state.compare_exchange_weak(
      word, ConsumerWord(ConsumerPid(word), TagOf(word), kConsumerDetached),
      std::memory_order_seq_cst, std::memory_order_relaxed));
  // A detached consumer blocked in Receive should find out now, and a
  // producer thread blocked for room may have been waiting for it.
  v.header->data_futex.fetch_add(1, std::memory_order_release);
  internal::FutexWakeAll(&v.header->data_futex);
  if (v.header->space_waiters.load(std::memory_order_seq_cst) != 0) WakeProducer(v.header);
  // A dead owner will never acknowledge: free the entry now.
  (void)FreeIfOwnerGone(c);
  return Status::OK();
}

std::vector<ConsumerInfoGuess> RingProducer::ConsumersGuess() const {
  const RingView& v = impl_->v;
  std::vector<ConsumerInfoGuess> out;
  out.reserve(v.g.max_consumers);
  for (uint32_t i = 0; i < v.g.max_consumers; ++i) {
    const ConsumerData& c = v.consumers[i];
    ConsumerInfoGuess info;
    info.id = i;
    // Relaxed: a monitoring snapshot, no ordering promised (hence "Guess").
    const uint64_t word = c.state.load(std::memory_order_relaxed);
    const uint32_t state = StateOf(word);
    info.active = state == kConsumerActive;
    info.detached = state == kConsumerDetached;
    info.pid = ConsumerPid(word);
    info.cursor = c.cursor.load(std::memory_order_relaxed);
    info.lost = c.lost.load(std::memory_order_relaxed);
    out.push_back(info);
  }
  return out;
}

const std::string& RingProducer::name() const { return impl_->v.segment->name(); }
const std::shared_ptr<Segment>& RingProducer::segment() const { return impl_->v.segment; }

// ---------------------------------------------------------------------------
// RingConsumer

struct RingConsumer::Impl {
  RingView v;
  SlowConsumerPolicy policy = SlowConsumerPolicy::kBlockProducer;
  uint64_t my_word = 0;  // ConsumerWord(pid, tag, kConsumerActive)
  // write_sequence at attach: messages below it were published before this
  // consumer existed (read only with ConsumerOptions::from_oldest).
  uint64_t attach_sequence = 0;

  ConsumerData& me(uint32_t id) const { return v.consumers[id]; }
};

RingConsumer::RingConsumer(std::unique_ptr<Impl> impl, uint32_t id, uint64_t cursor,
                           const ConsumerOptions& options)
    : impl_(std::move(impl)), id_(id), cursor_(cursor), options_(options) {}

RingConsumer::~RingConsumer() { Detach(); }

Result<std::unique_ptr<RingConsumer>> RingConsumer::Open(std::string_view name,
                                                         const ConsumerOptions& options) {
  ALKAID_ASSIGN_OR_RAISE(auto segment, Segment::Open(name, SegmentKind::kRing));
  return Open(std::move(segment), options);
}

Result<std::unique_ptr<RingConsumer>> RingConsumer::Open(std::shared_ptr<Segment> segment,
                                                         const ConsumerOptions& options) {
  if (segment == nullptr) return Status::Invalid("RingConsumer::Open: null segment");
  const std::string name = segment->name();
  if (segment->kind() != SegmentKind::kRing) {
    return Status::Invalid("segment '", name, "' is a ", SegmentKindName(segment->kind()),
                           " segment, not a ring");
  }
  ALKAID_ASSIGN_OR_RAISE(const Geometry g, CheckRingHeader(*segment));
  const auto* h = reinterpret_cast<const RingHeaderData*>(segment->payload());
  auto impl = std::make_unique<Impl>();
  impl->policy = static_cast<SlowConsumerPolicy>(h->policy);
  impl->v.Init(std::move(segment), g);
  const RingView& v = impl->v;
  RingHeaderData* header = v.header;

  // Claim a free registration; the claim records our pid.
  const uint32_t pid = static_cast<uint32_t>(::getpid());
  const uint32_t tag =
      (header->attach_counter.fetch_add(1, std::memory_order_relaxed) + 1) & 0x3fffffffU;
  uint32_t id = v.g.max_consumers;
  // Second pass only if the first found nothing: free the registrations of
  // force-detached consumers whose processes are gone, then retry.
  for (int pass = 0; pass < 2 && id == v.g.max_consumers; ++pass) {
    for (uint32_t i = 0; i < v.g.max_consumers; ++i) {
      if (pass == 1 && !FreeIfOwnerGone(v.consumers[i])) continue;
      uint64_t expected = 0;
      // acq_rel: acquire pairs with the release CAS of a previous Detach of
      // this entry; release orders our claim before our later stores.
      if (v.consumers[i].state.compare_exchange_strong(
              expected, ConsumerWord(pid, tag, kConsumerClaimed), std::memory_order_acq_rel,
              std::memory_order_relaxed)) {
        id = i;
        break;
      }
    }
  }
  if (id == v.g.max_consumers) {
    return Status::CapacityError("ring '", name, "': all ", v.g.max_consumers,
                                 " consumer registrations are taken");
  }
  ConsumerData& me = v.consumers[id];
  me.lost.store(0, std::memory_order_relaxed);
  // Acquire: partner of the producer's seq_cst store of write_sequence.
  const uint64_t w0 = header->write_sequence.load(std::memory_order_acquire);
  me.cursor.store(w0, std::memory_order_relaxed);
  const uint64_t active = ConsumerWord(pid, tag, kConsumerActive);
  // seq_cst store then seq_cst fence, paired with the seq_cst fence in the
  // producer's ScanMinCursor (Dekker): if the producer's scan misses us, the
  // load below sees the write sequence that scan was made at, and we start
  // there, above every slot the producer may overwrite on the basis of that
  // scan. The store also releases the cursor stored above.
  me.state.store(active, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const uint64_t w1 = header->write_sequence.load(std::memory_order_seq_cst);
  // from_oldest: start at the oldest slot that may still hold a message.
  // Messages from w1 on are guaranteed as above; older ones are delivered
  // if still intact when read, else counted as lost (the producer's cached
  // lower bound of the cursors is at most w1, so it may overwrite only
  // slots below w1 before it rescans and sees this cursor).
  const uint64_t start = options.from_oldest ? (w1 > v.g.slot_count ? w1 - v.g.slot_count : 0) : w1;
  // Release: partner of the acquire load of the cursor in ScanMinCursor.
  me.cursor.store(start, std::memory_order_release);
  impl->my_word = active;
  impl->attach_sequence = w1;
  return std::unique_ptr<RingConsumer>(new RingConsumer(std::move(impl), id, start, options));
}

void RingConsumer::Detach() {
  if (detached_) return;
  detached_ = true;
  ReleaseRegistration();
  // A producer blocked for room may have been waiting for us alone. The
  // seq_cst CAS above and this seq_cst load pair with the producer's
  // announcement like a cursor store does (see TryReceive).
  if (impl_->v.header->space_waiters.load(std::memory_order_seq_cst) != 0) {
    WakeProducer(impl_->v.header);
  }
}

void RingConsumer::ReleaseRegistration() {
  std::atomic<uint64_t>& state = impl_->me(id_).state;
  uint64_t expected = impl_->my_word;
  // seq_cst (release semantics): partner of the acquire load of the state
  // in ScanMinCursor and of the acquire CAS of the next Attach; seq_cst also
  // for the Dekker pair with a waiting producer (see Detach).
  if (state.compare_exchange_strong(expected, 0, std::memory_order_seq_cst,
                                    std::memory_order_relaxed)) {
    return;
  }
  // Force-detached: the entry waited for us to stop writing it. We are
  // done with it now (this thread makes no more stores to it); free it.
  // Fails harmlessly if it is no longer ours at all.
  expected = ConsumerWord(ConsumerPid(impl_->my_word), TagOf(impl_->my_word), kConsumerDetached);
  state.compare_exchange_strong(expected, 0, std::memory_order_release, std::memory_order_relaxed);
}

uint32_t RingConsumer::inline_capacity() const { return impl_->v.g.inline_capacity; }

Result<std::array<uint64_t, kSidebandWords>> RingConsumer::ReadSideband() const {
  const RingHeaderData* h = impl_->v.header;
  std::array<uint64_t, kSidebandWords> words{};
  // A write takes a few stores; a version that stays odd for this long
  // belongs to a producer that stopped (or never finishes) writing.
  constexpr int kAttempts = 1000;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    // Acquire: partner of the release store of the even version.
    const uint64_t before = h->sideband_version.load(std::memory_order_acquire);
    if ((before & 1) == 0) {
      for (size_t i = 0; i < kSidebandWords; ++i) {
        words[i] = h->sideband[i].load(std::memory_order_relaxed);
      }
      // Acquire fence: the word loads above happen before the re-check;
      // partner of the producer's release fence after its odd store.
      std::atomic_thread_fence(std::memory_order_acquire);
      if (h->sideband_version.load(std::memory_order_relaxed) == before) return words;
    }
    if (attempt >= 16) ::usleep(1);
  }
  return Status::TimedOut("ring '", name(), "': the producer's sideband stayed mid-write");
}
const std::string& RingConsumer::name() const { return impl_->v.segment->name(); }

Result<bool> RingConsumer::TryReceive(RingMessage* out) {
  Impl& d = *impl_;
  const RingView& v = d.v;
  ConsumerData& me = d.me(id_);
  if (detached_ || me.state.load(std::memory_order_relaxed) != d.my_word) {
    // Relaxed: best-effort check of our own registration, no partner; the
    // producer never waits for a consumer it detached. A late cursor store
    // after a force-detach that this check missed lands in our own entry,
    // which stays reserved (kConsumerDetached) until we free it here.
    if (!detached_) {
      detached_ = true;
      ReleaseRegistration();
    }
    return Status::Cancelled("ring '", name(), "': consumer ", id_, " was detached");
  }
  if (out->words_.size() * 8 < v.g.inline_capacity) out->words_.resize(v.g.inline_capacity / 8);

  while (true) {
    const uint64_t c = cursor_;
    SlotHeaderData* slot = v.Slot(c);
    // Acquire: partner of the producer's release store of SlotCommitted(c).
    const uint64_t s1 = slot->sequence.load(std::memory_order_acquire);
    if (s1 < SlotCommitted(c)) {
      // Not committed yet (or being written).
      // Acquire: partner of the seq_cst store in Close.
      if (v.header->closed.load(std::memory_order_acquire) != 0 &&
          c >= v.header->write_sequence.load(std::memory_order_acquire)) {
        return Status::EndOfStream("ring '", name(), "' was closed after ", c, " messages");
      }
      return false;
    }
    bool overwritten = s1 != SlotCommitted(c);
    bool released_before_attach = false;
    bool acquire_failed = false;
    Status problem;
    BlockRef ref;
    BlockHandle handle;
    uint32_t size = 0;
    if (!overwritten) {
      // Relaxed reads inside the seqlock; validated by the re-check below.
      size = slot->payload_size.load(std::memory_order_relaxed);
      const uint32_t flags = slot->flags.load(std::memory_order_relaxed);
      if ((flags & kSlotHasBody) != 0) {
        handle.offset = slot->body_offset.load(std::memory_order_relaxed);
        handle.length = slot->body_length.load(std::memory_order_relaxed);
        handle.generation = slot->body_generation.load(std::memory_order_relaxed);
        handle.descriptor = slot->body_descriptor.load(std::memory_order_relaxed);
      }
      if (size > v.g.inline_capacity) {
        problem = Status::Invalid("ring '", name(), "': slot ", c & v.mask, " (sequence ", c,
                                  ") records a payload of ", size,
                                  " bytes, more than the inline capacity ", v.g.inline_capacity);
      } else {
        std::atomic<uint64_t>* words = RingView::Words(slot);
        const uint32_t nwords = (size + 7) / 8;
        for (uint32_t i = 0; i < nwords; ++i) {
          out->words_[i] = words[i].load(std::memory_order_relaxed);
        }
        if (handle.valid() && options_.bodies != nullptr) {
          auto acquired = options_.bodies->Acquire(handle);
          if (acquired.ok()) {
            ref = std::move(acquired).ValueOrDie();
          } else if (c < d.attach_sequence && acquired.status().code() == StatusCode::kKeyError) {
            // A message older than our attach (from_oldest) whose body the
            // producer already released because every consumer that existed
            // had read it: gone, not corrupt. Counted as lost below.
            released_before_attach = true;
          } else {
            acquire_failed = true;
            problem = acquired.status().WithContext("ring '" + name() + "': sequence " +
                                                    std::to_string(c) + ": body");
          }
        }
      }
      // Acquire fence: partner of the producer's release fence after it
      // stored an odd sequence; if anything we read above came from a newer
      // write, the re-check sees the change.
      std::atomic_thread_fence(std::memory_order_acquire);
      overwritten = slot->sequence.load(std::memory_order_relaxed) != s1;
    }
    if (!overwritten && released_before_attach) {
      lost_ += 1;
      pending_lost_ += 1;
      cursor_ = c + 1;
      me.lost.store(lost_, std::memory_order_relaxed);  // diagnostics, no partner
      // seq_cst as for a delivered message (release semantics + Dekker half).
      me.cursor.store(cursor_, std::memory_order_seq_cst);
      continue;
    }
    if (overwritten) {
      // Only with kDropOldest (or a detached consumer): the producer lapped
      // us. Skip to the oldest message that may still be intact (w - slots:
      // if the producer is overwriting it right now, the next attempt sees
      // that and skips again) and count everything skipped.
      if (acquire_failed) ++stale_acquires_;  // the handle was stale: a lap under us
      ref.Release();
      // Acquire: partner of the producer's seq_cst store of write_sequence.
      const uint64_t w = v.header->write_sequence.load(std::memory_order_acquire);
      uint64_t next = w > v.g.slot_count ? w - v.g.slot_count : 0;
      next = std::max(next, c + 1);
      lost_ += next - c;
      pending_lost_ += next - c;
      cursor_ = next;
      me.lost.store(lost_, std::memory_order_relaxed);  // diagnostics, no partner
      // Release: partner of the acquire load of the cursor in ScanMinCursor.
      me.cursor.store(next, std::memory_order_release);
      continue;
    }
    // The slot was stable while we read it: consume the message.
    cursor_ = c + 1;
    // seq_cst (release semantics): our reads of the slot happen before the
    // producer, having loaded this cursor with acquire in ScanMinCursor,
    // overwrites it. seq_cst because it is also the store half of the Dekker
    // pair with the producer's announcement in WaitForRoom.
    me.cursor.store(cursor_, std::memory_order_seq_cst);
    // seq_cst load: the other half. Zero unless the producer waits for room,
    // so the fast path makes no system call.
    if (v.header->space_waiters.load(std::memory_order_seq_cst) != 0) {
      const uint64_t target = v.header->space_target.load(std::memory_order_seq_cst);
      // Wake only when crossing the target: one wake-up per consumer and
      // waiting episode, not one per message.
      if (c < target && cursor_ >= target) WakeProducer(v.header);
    }
    if (!problem.ok()) {
      // Corrupt slot or unusable body: report it once and move past it, so
      // one bad message cannot wedge the consumer.
      return problem;
    }
    out->size_ = size;
    out->sequence_ = c;
    out->lost_before_ = pending_lost_;
    pending_lost_ = 0;
    out->body_handle_ = handle;
    out->body_ = std::move(ref);  // drops the previous message's body reference
    return true;
  }
}

Status RingConsumer::WaitForData(std::chrono::steady_clock::time_point deadline) {
  RingHeaderData* h = impl_->v.header;
  // Read the futex word first (acquire semantics: partner of the
  // producer's release increment before FUTEX_WAKE), so that any wake after
  // our announcement changes it.
  const uint32_t word = h->data_futex.load(std::memory_order_seq_cst);
  // Announce ourselves. seq_cst store, then seq_cst loads: Dekker pairing
  // with the producer's seq_cst store of write_sequence (or closed) followed
  // by its seq_cst load of data_waiters. The producer clears the flag when
  // it wakes the sleepers; a consumer that goes back to sleep sets it again.
  h->data_waiters.store(1, std::memory_order_seq_cst);
  const bool ready = h->write_sequence.load(std::memory_order_seq_cst) > cursor_ ||
                     h->closed.load(std::memory_order_seq_cst) != 0 ||
                     impl_->me(id_).state.load(std::memory_order_relaxed) != impl_->my_word;
  if (!ready) {
    const auto now = internal::SteadyClock::now();
    if (now < deadline) internal::FutexWait(&h->data_futex, word, deadline - now);
  }
  return Status::OK();
}

Status RingConsumer::Receive(RingMessage* out, std::chrono::nanoseconds timeout) {
  // Fast path first: a message that is already there costs no clock read.
  {
    ALKAID_ASSIGN_OR_RAISE(bool got, TryReceive(out));
    if (got) return Status::OK();
  }
  const auto deadline = internal::DeadlineAfter(timeout);
  uint32_t spins = 0;
  while (true) {
    ALKAID_ASSIGN_OR_RAISE(bool got, TryReceive(out));
    if (got) return Status::OK();
    const bool spin =
        options_.wait_mode == WaitMode::kBusyPoll ||
        (options_.wait_mode == WaitMode::kSpinThenBlock && spins < options_.spin_iterations);
    if (spin) {
      internal::CpuRelax();
      ++spins;
      // Read the clock only now and then: it is not free.
      if ((spins & 255) == 0 && internal::SteadyClock::now() >= deadline) break;
      continue;
    }
    if (internal::SteadyClock::now() >= deadline) break;
    ALKAID_RETURN_NOT_OK(WaitForData(deadline));
  }
  return Status::TimedOut("ring '", name(), "': no message for consumer ", id_, " within ",
                          std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count(),
                          " ms (waiting for sequence ", cursor_, ")");
}

// ---------------------------------------------------------------------------
// Cleanup after a dead consumer

Result<DeadConsumerReport> ReclaimDeadConsumer(const std::shared_ptr<Segment>& ring,
                                               const std::shared_ptr<Segment>& bodies,
                                               uint32_t consumer_id, uint32_t pid) {
  if (ring == nullptr) return Status::Invalid("ReclaimDeadConsumer: null ring segment");
  if (ring->kind() != SegmentKind::kRing) {
    return Status::Invalid("segment '", ring->name(), "' is a ", SegmentKindName(ring->kind()),
                           " segment, not a ring");
  }
  ALKAID_ASSIGN_OR_RAISE(const Geometry g, CheckRingHeader(*ring));
  if (consumer_id != kAnyConsumer && consumer_id >= g.max_consumers) {
    return Status::IndexError("ring '", ring->name(), "': consumer id ", consumer_id,
                              " is out of range [0, ", g.max_consumers, ")");
  }
  if (pid == 0) return Status::Invalid("ReclaimDeadConsumer: pid 0");
  if (!::alkaid::ProcessIsGone(pid)) {
    return Status::Invalid("ring '", ring->name(), "': process ", pid,
                           " is still running; only a dead consumer is reclaimed");
  }
  RingView v;
  v.Init(ring, g);
  DeadConsumerReport report;
  const uint32_t first = consumer_id == kAnyConsumer ? 0 : consumer_id;
  const uint32_t last = consumer_id == kAnyConsumer ? g.max_consumers : consumer_id + 1;
  for (uint32_t id = first; id < last; ++id) {
    ConsumerData& c = v.consumers[id];
    // Acquire: partner of the claim CAS and of the seq_cst store that made
    // the entry active; the pid is part of the word the claim wrote.
    uint64_t word = c.state.load(std::memory_order_acquire);
    if (StateOf(word) == 0) continue;
    if (ConsumerPid(word) != pid) {
      if (consumer_id == kAnyConsumer) continue;
      return Status::Invalid("ring '", ring->name(), "': consumer ", id,
                             " is registered by process ", ConsumerPid(word), ", not ", pid);
    }
    // The owner is dead, so it stores nothing more into the entry: free it
    // at once whatever its state (claimed, active or detached). seq_cst
    // (release semantics): partner of the acquire CAS of the next Attach;
    // also pairs with a waiting producer's announcement like a detach.
    if (c.state.compare_exchange_strong(word, 0, std::memory_order_seq_cst,
                                        std::memory_order_relaxed)) {
      ++report.registrations_freed;
    }
  }
  if (report.registrations_freed > 0 &&
      v.header->space_waiters.load(std::memory_order_seq_cst) != 0) {
    WakeProducer(v.header);
  }
  if (bodies != nullptr) {
    ALKAID_ASSIGN_OR_RAISE(auto reader, BodyReader::Open(bodies));
    const DeadHolderReport held = reader->ReclaimDeadHolders(pid);
    report.holders_reclaimed = held.holders_reclaimed;
    report.references_released = held.references_released;
  }
  return report;
}

}  // namespace alkaid::shm
