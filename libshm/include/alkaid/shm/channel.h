#pragma once

/// \file
/// A channel: one producer, up to `max_consumers` consumers in any
/// processes, every consumer sees every message once, in order; each
/// message may carry a body, a block of the producer's arena that consumers
/// read in place.
///
/// What it costs and why (docs/SHM_LAYOUT.md, "Channel"):
/// - A message is one slot line the producer alone writes: sequence, where
///   the body is, its length, a shape id, and optionally inline bytes.
/// - Nothing on the data path is written by two parties. Block lifetime is
///   kept in the producer's private memory: each consumer returns the blocks
///   it received through a queue in its own segment, which the producer
///   drains when it needs space. No shared read-modify-write per message.
/// - Consumers map the producer's segment read-only: a consumer that writes
///   into a body faults in its own process, and the others go on intact.
/// - Receiving allocates nothing: a ChannelMessage is caller-owned and
///   reused; it holds its body until refilled or reset.
///
/// Slow consumers: kBlockProducer makes Publish wait for the slowest active
/// consumer (up to publish_timeout); kDropOldest overwrites, and the slow
/// consumer alone loses messages and is told how many.
///
/// Crashes: a consumer that dies is noticed by the producer whenever it
/// needs room or space, and in Poll() (pid checks at most every
/// ChannelOptions::liveness_interval), which releases exactly what it held
/// and removes its segment; a consumer that opens may also take over a dead
/// one's registration. Publishing itself makes no pid check (no system call
/// on the data path). A producer that dies leaves its names for
/// RemoveChannel().

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
#include "alkaid/shm/segment.h"

namespace alkaid::shm {

namespace internal {
struct ChannelSlotData;
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
  const std::string& name() const;
  const ChannelOptions& options() const;
  /// Whether the channel segment got huge pages (SegmentOptions::huge_pages).
  bool huge_pages() const;

 private:
  explicit ChannelProducer(std::shared_ptr<internal::ProducerState> impl);
  Status LoanImpl(uint64_t length, ChannelLoan* into);
  Status PublishImpl(std::span<const std::byte> payload, ChannelLoan* body, bool keep,
                     uint64_t user, uint32_t shape);
  std::shared_ptr<internal::ProducerState> impl_;
};

/// Options for ChannelConsumer::Open().
struct ChannelConsumerOptions {
  WaitMode wait_mode = WaitMode::kSpinThenBlock;
  /// Spins before sleeping in kSpinThenBlock.
  uint32_t spin_iterations = 4096;
  /// Start at the oldest message whose body the producer still holds (the
  /// producer decides when it accepts this consumer, at its next Publish or
  /// Poll), instead of the next one published. Exact: no message from there
  /// on is lost with kBlockProducer.
  bool from_oldest = false;
  /// A number the caller tells its consumers apart by, written once into the
  /// consumer's segment and reported by the producer as
  /// ChannelConsumerInfo::token (a broker's client gives each Consumer of
  /// its process its own, so that the broker can tell two consumers of one
  /// process apart). Not checked by anyone: a label, not a credential. 0:
  /// none (what a consumer of an older build reports).
  uint64_t token = 0;
};

class ChannelConsumer;

/// A received body, held: the producer does not reuse its block until this
/// object (and every copy of the view it gave out) is gone. Movable; may be
/// dropped on any thread, also after the consumer is gone (it keeps the
/// consumer's segments mapped).
class ALKAID_EXPORT ChannelBlock {
 public:
  ChannelBlock() = default;
  ~ChannelBlock() { Reset(); }
  ChannelBlock(ChannelBlock&& other) noexcept;
  ChannelBlock& operator=(ChannelBlock&& other) noexcept;
  ChannelBlock(const ChannelBlock&) = delete;
  ChannelBlock& operator=(const ChannelBlock&) = delete;

  /// The body's bytes, read-only (the mapping is PROT_READ).
  std::span<const std::byte> data() const { return data_; }
  bool valid() const { return held_; }
  /// Returns the block to the producer now.
  void Reset();

  struct Returns;  ///< internal: the consumer's return queue

 private:
  friend class ChannelConsumer;
  friend class ChannelMessage;
  std::shared_ptr<Returns> returns_;
  std::span<const std::byte> data_;
  uint32_t descriptor_ = 0;
  uint32_t generation_ = 0;
  bool held_ = false;
};

/// One received message, owned by the caller and meant to be reused: a
/// receive into it returns the body it held before, and fills it without
/// allocating (the inline payload buffer grows once to the largest
/// payload). It keeps its consumer's return queue (and registration) alive
/// until it is Reset() or destroyed, also after the consumer is closed.
class ALKAID_EXPORT ChannelMessage {
 public:
  ChannelMessage() = default;
  ChannelMessage(ChannelMessage&&) noexcept = default;
  ChannelMessage& operator=(ChannelMessage&&) noexcept = default;

  uint64_t sequence() const { return sequence_; }
  /// Inline bytes, copied out of the slot.
  std::span<const std::byte> payload() const {
    return {reinterpret_cast<const std::byte*>(words_.data()), payload_size_};
  }
  /// The body (empty for a message without body).
  std::span<const std::byte> body() const { return body_.data(); }
  bool has_body() const { return body_.valid(); }
  /// Where body() lies (ChannelLoan::offset()): the offset from the start
  /// of its arena's segment data; the bits from 40 up are 0 for the channel
  /// segment, 1 + the extension table's entry for an extension.
  uint64_t body_offset() const { return body_offset_; }
  uint64_t user() const { return user_; }
  uint32_t shape() const { return shape_; }
  /// When the producer published it, CLOCK_REALTIME nanoseconds; 0 unless
  /// the channel stamps (ChannelOptions::stamp_publish_time). As the inline
  /// payload, read after a receive that filled this message (one that found
  /// nothing may have overwritten it).
  uint64_t publish_ns() const { return publish_ns_; }
  /// Messages this consumer lost just before this one (kDropOldest).
  uint64_t lost_before() const { return lost_before_; }
  /// Moves the body out, to be held beyond the next receive.
  ChannelBlock TakeBody() { return std::move(body_); }
  /// The body itself, for a caller that moves it straight into where it is
  /// kept (`Keep(std::move(message.body_block()))`), without the temporary
  /// TakeBody makes.
  ChannelBlock& body_block() { return body_; }
  /// Moves the body into `into`, which first returns the block it held.
  /// Unlike `*into = TakeBody()`, the message keeps its reference to the
  /// consumer's return queue, and `into` keeps its own when it is the same
  /// queue, so a receive loop that hands each body to the same holder
  /// touches no reference count.
  void TakeBodyInto(ChannelBlock* into);
  /// Returns the body now and lets go of the consumer.
  void Reset() { body_.Reset(); }

 private:
  friend class ChannelConsumer;
  std::vector<uint64_t> words_;
  uint32_t payload_size_ = 0;
  uint32_t shape_ = 0;
  uint64_t sequence_ = 0;
  uint64_t lost_before_ = 0;
  uint64_t user_ = 0;
  uint64_t body_offset_ = 0;
  uint64_t publish_ns_ = 0;
  ChannelBlock body_;
};

/// A consumer of a channel, in any process.
///
/// Thread safety: one thread at a time. Received blocks may be used and
/// dropped on any thread and outlive the consumer.
class ALKAID_EXPORT ChannelConsumer {
 public:
  ~ChannelConsumer();  ///< Close()
  ChannelConsumer(const ChannelConsumer&) = delete;
  ChannelConsumer& operator=(const ChannelConsumer&) = delete;

  /// Maps channel `name` read-only and registers: it receives every message
  /// published after Open returns (with from_oldest, from the oldest still
  /// held). KeyError if there is no such channel, CapacityError if every
  /// registration is taken.
  static Result<std::unique_ptr<ChannelConsumer>> Open(std::string_view name,
                                                       const ChannelConsumerOptions& options = {});

  /// Receives the next message into `out` if one is committed (returning
  /// the body `out` held). False if none yet; EndOfStream once the producer
  /// closed and everything was read; Invalid for a slot that names a body
  /// outside the arena, or an extension that is not there or outside it
  /// (the message is skipped); IOError if the producer died. The first
  /// message in an extension maps it (read-only, once); when it finds no
  /// message, the consumer lets go of the extensions the producer released.
  Result<bool> TryReceive(ChannelMessage* out);

  /// As TryReceive, waiting per WaitMode up to `timeout` (TimedOut).
  Status Receive(ChannelMessage* out, std::chrono::nanoseconds timeout);

  /// Copies shape `id`'s bytes into `out`. Invalid for an id out of range
  /// or not written.
  Status ReadShape(uint32_t id, std::vector<std::byte>* out) const;

  /// The consumer's doorbell (made on the first call, closed with the
  /// consumer): a descriptor that turns readable when the producer wakes
  /// this consumer after ArmDoorbell, with a message or its close. For
  /// waiting on many channels from one thread with poll or epoll instead
  /// of Receive's futex. The producer opens it through /proc/<this
  /// pid>/fd, which takes the same user (or CAP_SYS_PTRACE); one that
  /// cannot wakes the futex instead, so a poll should have a timeout.
  /// A dead producer sounds nothing: the pid check is TryReceive's.
  Result<int> DoorbellFd();
  /// Before sleeping on DoorbellFd: reads what it holds and announces the
  /// sleep, so that the producer's next publish or close sounds it. True if
  /// a message (or the end) is there already: receive instead of sleeping.
  /// Receive's own waits end the announcement: arm again after them.
  Result<bool> ArmDoorbell();

  /// Stops receiving. Blocks still held return when dropped; the producer
  /// finishes the registration then. Idempotent.
  void Close();

  /// Registration entry index.
  uint32_t index() const;
  /// Sequence of the next message this consumer reads.
  uint64_t next_sequence() const { return cursor_; }
  /// Messages lost so far (kDropOldest).
  uint64_t lost_count() const { return lost_; }
  /// kDropOldest, the two races the consumer's checks exist for (each such
  /// message is skipped and counted in lost_count()): slots the producer
  /// rewrote while this consumer copied them (the seqlock re-check saw the
  /// change), and slots rewritten after a consistent copy, before the
  /// producer saw this consumer's cursor move (the block is returned).
  uint64_t torn_reads() const { return torn_reads_; }
  uint64_t late_laps() const { return late_laps_; }
  /// Extension segments of the producer's arena this consumer mapped so far
  /// (each once, when a message first named it), and let go of since (the
  /// producer released them).
  uint64_t extensions_mapped() const;
  uint64_t extensions_dropped() const;
  const std::string& name() const;

  struct Impl;

 private:
  explicit ChannelConsumer(std::unique_ptr<Impl> impl);
  Status WaitForData(std::chrono::steady_clock::time_point deadline);
  Result<bool> Accepted();
  bool TakeStart();
  // TryReceive's steps (channel_consumer.cc).
  struct SlotCopy;
  bool ReadSlot(Impl& state, uint64_t c, const internal::ChannelSlotData* slot, uint64_t seq,
                ChannelMessage* out, SlotCopy* copy, Status* problem);
  bool SkipLapped(Impl& state, uint64_t c, uint32_t attempt, uint64_t* write_at_first_lap,
                  ChannelMessage* scratch, Status* problem);
  void Deliver(Impl& state, uint64_t c, const SlotCopy& copy, ChannelMessage* out);
  static Status CheckExtension(Impl& state, uint64_t c, SlotCopy* copy);

  std::unique_ptr<Impl> impl_;
  uint64_t cursor_ = 0;
  uint64_t lost_ = 0;
  uint64_t pending_lost_ = 0;
  uint64_t torn_reads_ = 0;
  uint64_t late_laps_ = 0;
  bool accepted_ = false;
  bool closed_ = false;
};

/// What a dead producer's channel leaves to consumers still reading it
/// (RemoveChannel's `remains`).
struct ChannelRemains {
  /// The ids of the extensions its table lists, whose names were kept: the
  /// caller removes them later (ChannelExtensionName).
  std::vector<uint32_t> extensions;
  /// The pids of the consumers registered on it when it was removed (those
  /// that may still read it, from their own mapping; a pid may be gone).
  std::vector<uint32_t> consumer_pids;
};

/// Removes every name of channel `name`: the channel, its registry, the
/// consumer segments and the extensions it lists. For a producer that died;
/// a live producer removes its names itself. KeyError if the channel segment
/// is not there. With `remains`, the extensions' names stay (a dead
/// producer's consumers may still have to map them) and `*remains` says
/// which, and who was registered.
ALKAID_EXPORT Status RemoveChannel(std::string_view name, ChannelRemains* remains = nullptr);

}  // namespace alkaid::shm
