#pragma once

/// \file
/// The producer side of a channel (alkaid/shm/channel.h says what a channel
/// is and costs): its options, counters, ChannelLoan and ChannelProducer.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/shm/delivery.h"
#include "alkaid/shm/producer_hot.h"
#include "alkaid/shm/segment.h"

namespace alkaid::shm {

namespace internal {
struct ProducerState;
}  // namespace internal

/// Where a channel's producer asks before it grows its arena by an
/// extension segment, and says when it let one go. Both are called on the
/// producer thread, inside a Loan (acquire) or a Loan or Poll (release).
struct ChannelExtensions {
  /// Before extension `id` (1, 2, ... never reused by a channel) of `bytes`
  /// bytes is created, under name ChannelExtensionName(channel, id): returns
  /// that name if the extension may be created (the broker names it and
  /// counts it), or the error the loan fails with. Empty: always allowed.
  std::function<Result<std::string>(uint32_t id, uint64_t bytes)> acquire;
  /// After an extension acquired was released and its name removed, or
  /// could not be created after all. Empty: nobody to tell.
  std::function<void(uint32_t id, uint64_t bytes)> release;
};

/// The name of extension `id` of channel `channel`: "<channel>.x<id>".
ALKAID_EXPORT std::string ChannelExtensionName(std::string_view channel, uint32_t id);

/// Options for ChannelProducer::Create().
struct ChannelOptions {
  /// Slots; a power of two, at least 2. Default 1024.
  uint32_t slot_count = 1024;
  /// Inline bytes per slot (rounded up to 64; may be 0). Default 0: the
  /// layer above puts its metadata in the shape table or the body.
  uint32_t inline_capacity = 0;
  /// Consumer registrations, 1..kMaxConsumers. Default 64.
  uint32_t max_consumers = 64;
  SlowConsumerPolicy policy = SlowConsumerPolicy::kBlockProducer;
  /// kBlockProducer: longest wait of Publish for a free slot. Default 1 s.
  std::chrono::nanoseconds publish_timeout = std::chrono::seconds(1);
  /// kBlockProducer: spin this long before sleeping for room. Default 50 µs.
  std::chrono::nanoseconds publish_spin = std::chrono::microseconds(50);
  /// kBlockProducer: once full, wait until the slowest consumer freed this
  /// many slots (0: slot_count / 8), so that the two sides work in batches.
  uint32_t resume_slots = 0;
  /// Bytes of the initial arena, in the channel segment. 0 (default): 1 KiB
  /// per slot, between 256 KiB and 16 MiB (1 MiB for 1024 slots).
  uint64_t arena_bytes = 0;
  /// The most the arena may grow to, the initial arena included: a loan
  /// that does not fit adds an extension segment (ChannelExtensions) of
  /// twice the bytes the arena has, or of the loan's size if larger, up to
  /// this. A value at most the initial arena's: no extensions. Default
  /// 2 GiB.
  uint64_t max_arena_bytes = uint64_t{2} << 30;
  /// An extension in which no block was loaned, published or held for this
  /// long is released (its name removed) by Poll() or a Loan that looks for
  /// space. Default 1 s.
  std::chrono::milliseconds extension_idle{1000};
  /// Asked before each extension is created, told after each is released
  /// (a broker counts them against its limit). Default: none.
  ChannelExtensions extensions;
  /// Most blocks alive at once (descriptor table size); 0: one per 4 KiB of
  /// initial arena or two per slot, whichever is more, between 256 and
  /// 65536. At most 2^24.
  uint32_t max_blocks = 0;
  /// Fixed blocks: bytes of each (rounded up to 64); 0 (the default): none.
  /// A channel with fixed blocks lends a loan of at most this many bytes one
  /// of them, for a writer that loans one size (FixedShapeWriter): a fixed
  /// block is not in the block table and comes back without a return. It is
  /// free again once every consumer's cursor passed its message (with
  /// kDropOldest, or once its slot was overwritten) and no consumer holds it
  /// (a count in the consumer's own segment, no return queue entry). A loan
  /// that finds none free takes a block of the arena as any other loan
  /// (docs/SHM_LAYOUT.md, "Fixed blocks").
  uint64_t fixed_block_bytes = 0;
  /// How many fixed blocks (with fixed_block_bytes); 0: twice slot_count.
  /// At most 2^20. They live in the channel segment, before the arena.
  uint32_t fixed_block_count = 0;
  /// Shape table entries (ChannelProducer::AddShape), at most 1024.
  /// Default 16.
  uint32_t shape_count = 16;
  /// Largest shape (rounded up to 64). Default 4096.
  uint32_t shape_bytes = 4096;
  /// Longest wait of Loan for arena space or a free descriptor. Default 1 s.
  std::chrono::nanoseconds space_timeout = std::chrono::seconds(1);
  /// How often at most Poll() checks the consumers' pids (waits for room
  /// or space always do). Default 200 ms.
  std::chrono::milliseconds liveness_interval{200};
  /// Whether Publish and Loan accept consumers that registered since
  /// (true), or only Poll() and AcceptConsumers() do (false): for a layer
  /// above that must send each new consumer something before its first
  /// message (BatchPublisher replays the current dictionaries). A consumer
  /// starts at the message published after it was accepted.
  bool accept_on_publish = true;
  /// Whether each Publish stamps its slot with the time it publishes
  /// (CLOCK_REALTIME nanoseconds; ChannelMessage::publish_ns()): one clock
  /// read per message (a vDSO call, no system call). Off (the default): no
  /// store and no clock read, one branch on this flag per publish, and
  /// consumers read 0.
  bool stamp_publish_time = false;
  /// The channel segment's mode and pages. Consumers' segments use the same
  /// access mode.
  SegmentOptions segment;
  /// Cancels the producer's waits: once a stop is requested on its
  /// std::stop_source, from any thread, a Publish waiting for room
  /// (kBlockProducer; past publish_spin) or a Loan waiting for space ends
  /// within a millisecond or so with Cancelled, leaving the loan with the
  /// caller as TimedOut does; so does every later wait. Only the waits look at it: a
  /// publish or loan that need not wait goes through. Default: a token
  /// that is never stopped. ChannelProducer::set_stop replaces it.
  std::stop_token stop;
};

/// Counters of a producer (exact; read on the producer thread).
struct ChannelStats {
  uint64_t published = 0;
  uint64_t published_bytes = 0;   ///< the bodies of the messages published
  uint64_t blocks_live = 0;       ///< blocks loaned, in flight or held
  uint64_t arena_bytes_free = 0;  ///< arena bytes in no block
  uint64_t arena_bytes = 0;       ///< the arena's bytes now: the initial arena and every extension
  uint64_t extensions = 0;        ///< extension segments now
  uint64_t extensions_added = 0;  ///< extension segments created so far
  uint64_t extensions_released = 0;  ///< ...and released (no block used them for extension_idle)
  uint64_t returns = 0;              ///< returns drained from consumer queues
  uint64_t bogus_returns = 0;        ///< returns naming no block the consumer held
  uint64_t consumers_accepted = 0;
  uint64_t consumers_finished = 0;   ///< closed, and returned everything
  uint64_t consumers_reclaimed = 0;  ///< died; what they held released
  uint64_t dropped = 0;              ///< kDropOldest: messages overwritten unread by someone
};

/// One consumer as the producer sees it.
struct ChannelConsumerInfo {
  uint32_t index = 0;
  uint32_t pid = 0;
  /// ChannelConsumerOptions::token, as the consumer wrote it (0: none).
  uint64_t token = 0;
  /// False: registered, waiting to be accepted (the rest is 0).
  bool accepted = true;
  bool closed = false;
  uint64_t cursor = 0;
  uint64_t held_blocks = 0;  ///< blocks received and not yet returned (or unread)
  uint64_t held_bytes = 0;   ///< the arena bytes of those blocks
  /// kDropOldest: messages overwritten before it read them, since it was accepted.
  uint64_t dropped = 0;
  /// Body bytes of the channel's messages before its cursor (read, or lost
  /// to kDropOldest), from the channel's first: a running count to take
  /// rates of (ChannelStats::published_bytes less the bodies of the
  /// messages it has yet to read). 0 while not accepted.
  uint64_t read_bytes = 0;
};

class ChannelProducer;
class ChannelWriter;

/// A block of the arena lent to the producer thread to fill, then published
/// by ChannelProducer::Publish: moved in (a sink), or kept, in which case
/// the loan goes on holding the block (read-only from then on) until it is
/// dropped. Dropped unpublished, the block goes back to the arena. A loan
/// keeps the producer's state alive, so it never points into freed memory;
/// it is filled and published on the producer thread, and may be dropped on
/// any thread (the producer takes the block back at its next Loan).
class ALKAID_EXPORT ChannelLoan {
 public:
  ChannelLoan() = default;
  ~ChannelLoan();
  ChannelLoan(ChannelLoan&& other) noexcept;
  ChannelLoan& operator=(ChannelLoan&& other) noexcept;
  ChannelLoan(const ChannelLoan&) = delete;
  ChannelLoan& operator=(const ChannelLoan&) = delete;

  /// The block's bytes: `length` asked for, writable; 64-byte aligned.
  std::span<std::byte> data() const { return data_; }
  bool valid() const { return held_; }
  /// Where data() lies, as consumers see it (ChannelMessage::body_offset()):
  /// the offset from the start of its arena's segment data, and in the bits
  /// from 40 up, 0 for the channel segment or 1 + the extension's entry.
  uint64_t offset() const { return offset_; }
  /// Name of the channel the loan is of (empty for a loan that never was).
  const std::string& channel_name() const;
  /// Lets go of the block: back to the arena if unpublished, else once
  /// consumers returned it. Any thread.
  void Reset();

 private:
  friend class ChannelProducer;
  friend class ChannelWriter;
  std::shared_ptr<internal::ProducerState> owner_;
  std::span<std::byte> data_;
  uint64_t offset_ = 0;
  uint32_t descriptor_ = 0;
  uint32_t generation_ = 0;
  bool held_ = false;
  // Filled by LoanInto: keeps owner_ when published or refilled.
  bool reused_ = false;
};

/// The single producer of a channel; creates its segments.
///
/// Thread safety: every call on one thread at a time (the producer thread);
/// loans are filled and published there and may be dropped anywhere.
class ALKAID_EXPORT ChannelProducer {
 public:
  ~ChannelProducer();  ///< Close(), then removes the channel's names
  ChannelProducer(const ChannelProducer&) = delete;
  ChannelProducer& operator=(const ChannelProducer&) = delete;

  /// Creates channel `name` (segments `name` and `name.reg`; the name must
  /// leave room for the consumer suffixes: at most kMaxSegmentNameLength -
  /// 24 characters). AlreadyExists if taken.
  static Result<std::unique_ptr<ChannelProducer>> Create(std::string_view name,
                                                         const ChannelOptions& options = {});

  /// Lends a block of `length` bytes (0 allowed) of the arena. When no
  /// space is free, drains consumers' returns, then grows the arena by an
  /// extension (up to max_arena_bytes; ChannelExtensions::acquire must
  /// agree), else waits up to space_timeout for space, releasing what dead
  /// consumers held: TimedOut naming who holds the arena. CapacityError if
  /// `length` exceeds max_arena_bytes (both named). A block no arena could
  /// hold whose extension cannot be made fails with that error (OutOfMemory
  /// for a full /dev/shm, or acquire's); the producer carries on with the
  /// arena it has. Allocates no heap memory when a block of the same size
  /// was freed before.
  Result<ChannelLoan> Loan(uint64_t length);
  /// As Loan, into `loan`, which first lets go of the block it held. For a
  /// publish loop that reuses one loan object: such an object keeps its
  /// reference to the producer across loans and publishes (while empty,
  /// too, until it is destroyed or Reset), so the loop touches no reference
  /// count.
  Status LoanInto(uint64_t length, ChannelLoan* loan);

  /// Publishes message `payload` (inline bytes, at most inline_capacity)
  /// with body `body` (which it takes: the producer keeps the block until
  /// every consumer that received it returned it). `user` and `shape` are
  /// carried to consumers as they are (a shape id from AddShape, or 0).
  /// kBlockProducer: TimedOut if the slowest consumer held the slot for
  /// longer than publish_timeout (the loan is then left with the caller).
  /// Invalid after Close, for a loan of another producer, or a payload too
  /// large.
  Status Publish(std::span<const std::byte> payload, ChannelLoan&& body, uint64_t user = 0,
                 uint32_t shape = 0);
  /// Publishes `body` and leaves it with the loan, which goes on holding the
  /// block until dropped (for a caller whose objects still point into it;
  /// nobody may write it any more). Invalid if the loan was published.
  Status Publish(std::span<const std::byte> payload, const ChannelLoan& body, uint64_t user = 0,
                 uint32_t shape = 0);
  /// Publishes a message without body.
  Status Publish(std::span<const std::byte> payload, uint64_t user = 0, uint32_t shape = 0);

  /// A writer of messages of one form (see ChannelWriter): bodies of
  /// `length` bytes, each published with inline bytes `payload` (copied),
  /// user word `user` and shape id `shape`. Checks them once, as Loan and
  /// Publish would (CapacityError for a length past max_arena_bytes,
  /// Invalid for a payload past inline_capacity or a shape not added, or
  /// after Close). The writer uses this producer, which must outlive it.
  Result<ChannelWriter> NewWriter(uint64_t length, std::span<const std::byte> payload,
                                  uint64_t user = 0, uint32_t shape = 0);

  /// Adds `bytes` to the shape table; returns its id (1..shape_count).
  /// Entries never change. CapacityError when the table is full or `bytes`
  /// exceeds shape_bytes.
  Result<uint32_t> AddShape(std::span<const std::byte> bytes);

  /// Accepts new consumers, drains returns, finishes closed consumers and
  /// reclaims dead ones. Publish and Loan do this as needed; call it on an
  /// idle producer so that consumers opened with from_oldest see what the
  /// channel holds, and space held by finished consumers comes back.
  void Poll();

  /// Releases the extensions of the arena no block used for
  /// extension_idle (Poll does it too): for a producer that publishes but
  /// never polls. Looks at most every extension_idle / 4; nothing to do
  /// (one comparison) while the arena has no extension.
  void ReleaseIdleExtensions();
  /// Takes back the blocks the consumers returned and the loans dropped
  /// since (Loan does so only when it finds no cached block), so that
  /// consumers() counts as held only what they still hold: for a report of
  /// held figures. Touches no consumer's registration.
  void CollectReturns();

  /// Accepts the consumers that registered since the last look (one load
  /// of a shared word when none did): each receives from the next message
  /// published (from_oldest: from the oldest still held). Returns how many
  /// were accepted. No liveness checks, no draining.
  uint64_t AcceptConsumers();

  /// Ends the stream: consumers read what was published, then get
  /// EndOfStream. Idempotent.
  void Close();

  /// Replaces ChannelOptions::stop for the waits that begin after this
  /// call. Producer thread, between publishes and loans.
  void set_stop(std::stop_token stop);

  /// Sequence of the next message (= messages published).
  uint64_t next_sequence() const;
  ChannelStats stats() const;
  /// The consumers accepted so far, and those registered and waiting to
  /// be accepted (producer thread). A waiting consumer listed here is
  /// accepted by the next Publish or Loan (accept_on_publish) or
  /// AcceptConsumers, and receives from that message on.
  std::vector<ChannelConsumerInfo> consumers() const;
  /// The same into `*out`, reusing its capacity (no allocation once it has
  /// grown: for a caller that asks on the data path's thread).
  void consumers(std::vector<ChannelConsumerInfo>* out) const;
  const std::string& name() const;
  const ChannelOptions& options() const;
  /// Whether the channel segment got huge pages (SegmentOptions::huge_pages).
  bool huge_pages() const;

 private:
  friend class ChannelWriter;
  explicit ChannelProducer(std::shared_ptr<internal::ProducerState> impl);
  Status LoanImpl(uint64_t length, ChannelLoan* into);
  Status PublishImpl(std::span<const std::byte> payload, ChannelLoan* body, bool keep,
                     uint64_t user, uint32_t shape);
  // The steps of a publish after its checks (channel_producer.cc; PublishImpl,
  // and ChannelWriter, whose checks were made once). A fixed block is lent
  // by ChannelWriter::LendFixed.
  static Status Commit(internal::ProducerState& state, std::span<const std::byte> payload,
                       ChannelLoan* body, bool keep, uint64_t user, uint32_t shape);
  static bool FormFits(const internal::ProducerState& state, std::span<const std::byte> payload,
                       uint32_t shape);
  static Status FormError(const internal::ProducerState& state, std::span<const std::byte> payload,
                          uint32_t shape);
  std::shared_ptr<internal::ProducerState> impl_;
};

/// A producer's writer of messages of one form: bodies of one length, each
/// published with the same inline bytes, user word and shape id (a
/// FixedShapeWriter's). Made by ChannelProducer::NewWriter, which checks
/// those once; a Loan then takes a fixed block (ChannelOptions::
/// fixed_block_bytes) without the checks and size-class search of
/// ChannelProducer::Loan, and a Publish writes the slot without those of
/// ChannelProducer::Publish. Whatever a fixed block does not serve (none
/// free, no fixed blocks, a body larger than they are) goes the general way,
/// with the same results and errors as Loan and Publish.
///
/// Loan and Publish are inline: their common case (a fixed block free at
/// once; a publish with no inline bytes, no time stamp, no registration
/// change, no lap and no consumer to wake) runs in the caller's frame on
/// the producer's hot state (producer_hot.h), the rest out of line.
///
/// Thread safety: the producer thread, like the producer; a block kept by
/// Publish(held) may be dropped on any thread.
class ALKAID_EXPORT ChannelWriter {
 public:
  /// An empty writer: Loan and Publish fail with Invalid.
  ChannelWriter() = default;
  ChannelWriter(ChannelWriter&&) noexcept = default;
  ChannelWriter& operator=(ChannelWriter&&) noexcept = default;
  ChannelWriter(const ChannelWriter&) = delete;
  ChannelWriter& operator=(const ChannelWriter&) = delete;
  ~ChannelWriter() = default;  ///< a block lent and not published goes back

  /// Lends a block of length() bytes (ChannelProducer::Loan's waits and
  /// errors). Invalid while the block lent before was not published.
  [[gnu::always_inline]] Status Loan() {
    uint32_t i;
    if (at_once_ && !loan_.held_ && !hot_->closed && hot_->TakeFixedAtOnce(&i)) {
      LendFixed(*hot_, i, length_, &loan_);
      return Status::OK();
    }
    return LoanGeneral();
  }
  /// The block lent by Loan(), writable until it is published; empty
  /// without one.
  std::span<std::byte> data() const { return loan_.data(); }
  /// Whether a block is lent and not published yet.
  bool loaned() const { return loan_.valid(); }
  /// Where the block lent lies (ChannelLoan::offset()).
  uint64_t offset() const { return loan_.offset(); }
  /// Publishes the block lent, which goes to the channel (the producer
  /// keeps it until every consumer that received it let it go). Invalid
  /// without one, or after Close; kBlockProducer: TimedOut (or Cancelled)
  /// leaves the block lent, and Publish may be retried.
  [[gnu::always_inline]] Status Publish() {
    if (at_once_ && loan_.held_ && loan_.descriptor_ >= hot_->block_count &&
        hot_->PublishesAtOnce()) {
      PublishFixed();
      return Status::OK();
    }
    return PublishGeneral();
  }
  /// As Publish(), and `*held` goes on holding the block, read-only, until
  /// it is dropped or reset (any thread).
  Status Publish(ChannelLoan* held);
  uint64_t length() const { return length_; }

 private:
  friend class ChannelProducer;
  // Fixed block `i` (taken by TakeFixedAtOnce or ProducerState::TakeFixed)
  // lent into `loan`, whose owner is the producer's state: the one way a
  // fixed block is lent (the writer's Loan and ChannelProducer::LoanImpl).
  [[gnu::always_inline]] static void LendFixed(internal::ProducerHot& h, uint32_t i,
                                               uint64_t length, ChannelLoan* loan) {
    internal::FixedBlockRecord& f = h.fixed[i];
    f.loaned = true;
    f.loan_ref = true;
    // In the channel segment, before the arena.
    const uint64_t offset = h.fixed_offset + uint64_t{i} * h.fixed_size;
    loan->data_ = {h.channel_data + offset, static_cast<std::size_t>(length)};
    loan->offset_ = offset;
    loan->generation_ = 0;
    loan->descriptor_ = h.block_count + i;
    loan->held_ = true;
  }
  // Publish's common case, once PublishesAtOnce said so: loan_ holds fixed
  // block descriptor_ - block_count, there are no inline bytes and no time
  // stamp (at_once_). The steps of ChannelProducer::Commit for it.
  [[gnu::always_inline]] void PublishFixed() {
    internal::ProducerHot& h = *hot_;
    const uint64_t n = h.slots.next_sequence;
    const uint64_t index = n & h.mask;
    auto* slot = reinterpret_cast<internal::HotSlotData*>(h.slot_base + index * h.slot_size);
    slot->sequence.store(2 * n + 1, std::memory_order_relaxed);
    // Release fence: the odd sequence is visible before any field below
    // (the seqlock writer's half; a lapped reader's re-check sees it).
    std::atomic_thread_fence(std::memory_order_release);
    const uint32_t desc = loan_.descriptor_;
    const uint32_t i = desc - h.block_count;
    internal::FixedBlockRecord& f = h.fixed[i];
    f.loaned = false;
    f.loan_ref = false;
    f.sequence = n;
    uint32_t at = h.flight_head + h.flight_size;
    if (at >= h.fixed_count) at -= h.fixed_count;
    h.fixed_flight[at] = i;
    ++h.flight_size;
    // The slot's old message had no block or a fixed one (PublishesAtOnce):
    // its entry goes, the new one takes its place.
    h.slots.slot_block[index] = desc;
    const uint64_t length = loan_.data_.size();
    slot->body_offset.store(loan_.offset_, std::memory_order_relaxed);
    slot->body_length.store(length, std::memory_order_relaxed);
    h.published_bytes += length;
    slot->block.store(internal::kHotFixedBlockFlag | i, std::memory_order_relaxed);
    slot->extension.store(0, std::memory_order_relaxed);  // the channel segment
    slot->payload_size.store(0, std::memory_order_relaxed);
    slot->shape.store(shape_, std::memory_order_relaxed);
    slot->user.store(user_, std::memory_order_relaxed);
    // Release: publishes the fields; partner of the consumer's acquire load.
    slot->sequence.store(2 * n + 2, std::memory_order_release);
    loan_.held_ = false;
    loan_.data_ = {};
    h.slots.next_sequence = n + 1;
    ++h.published;
    // seq_cst: the Dekker pair with a consumer about to sleep (AnySleeper).
    h.write_sequence->store(n + 1, std::memory_order_seq_cst);
    if (h.AnySleeper()) WakeSleepers();
  }
  // The general ways, out of line.
  Status LoanGeneral();
  Status PublishGeneral();
  void WakeSleepers();
  Status CommitLent(bool keep);
  ChannelProducer* producer_ = nullptr;
  internal::ProducerHot* hot_ = nullptr;  // producer_'s state (its base), kept by loan_'s owner
  ChannelLoan loan_;                      // its owner set once, and kept across publishes
  std::vector<std::byte> payload_;
  uint64_t length_ = 0;
  uint64_t user_ = 0;
  uint32_t shape_ = 0;
  bool fixed_ = false;  // a body of length_ bytes fits a fixed block
  // Loan and Publish may take their common case: fixed_, no inline bytes,
  // no time stamp (an empty writer: false).
  bool at_once_ = false;
};

}  // namespace alkaid::shm
