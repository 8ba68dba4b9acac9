#pragma once

/// \file
/// The consumer side of a channel (alkaid/shm/channel.h says what a channel
/// is and costs): its options, ChannelBlock, ChannelMessage and
/// ChannelConsumer.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/shm/consumer_hot.h"
#include "alkaid/shm/delivery.h"
#include "alkaid/shm/segment.h"

namespace alkaid::shm {

namespace internal {
struct ChannelSlotData;
}  // namespace internal

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
  /// Returns the block to the producer now, and lets go of the consumer.
  void Reset();
  /// Takes the block `from` holds, after returning the one this holds.
  /// Unlike a move, both keep their reference to the consumer's return
  /// queue (copied only if it differs), so a holder that takes block after
  /// block of one consumer touches no reference count: the steady state of
  /// a batch's keeper (format::BatchTemplate keeps one per object graph).
  void TakeFrom(ChannelBlock* from) {
    if (from == this) return;
    if (held_) Release();
    if (!from->held_) {
      data_ = {};
      return;
    }
    // A copy of the pointer, not a move: both keep the queue, so neither
    // the next receive into `from` nor the next hand-over changes the count.
    if (returns_ != from->returns_) returns_ = from->returns_;
    data_ = from->data_;
    hold_ = from->hold_;
    descriptor_ = from->descriptor_;
    generation_ = from->generation_;
    held_ = true;
    from->data_ = {};
    from->held_ = false;
  }
  /// Returns the block to the producer now, but keeps the reference to the
  /// consumer (its queue and mappings) for the next TakeFrom. Any thread.
  /// A fixed block's hold count drops inline; a table block's return is
  /// queued out of line.
  void Release() {
    if (held_ && hold_ != nullptr) {
      internal::DropHold(hold_);
      held_ = false;
      data_ = {};
      return;
    }
    ReleaseGeneral();
  }

  struct Returns;  ///< internal: the consumer's return queue

 private:
  friend class ChannelConsumer;
  friend class ChannelMessage;
  // Release's other cases: a table block's return, or nothing held.
  void ReleaseGeneral();
  std::shared_ptr<Returns> returns_;
  std::span<const std::byte> data_;
  // A fixed block: its hold count in the consumer's segment, decremented
  // when it is let go (no return queue entry). Null: a block of the table.
  std::atomic<uint32_t>* hold_ = nullptr;
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
  /// As TryReceive above, without the Result: `*got` says whether a message
  /// was received into `out`, the status is TryReceive's error (`*got` is
  /// then false). For a receive loop that tests both anyway (the Result's
  /// making and unmaking cost it a few instructions a message). Inline: its
  /// common case (TryReceiveHot) runs in the caller's frame, the rest out
  /// of line.
  [[gnu::always_inline]] Status TryReceive(ChannelMessage* out, bool* got) {
    if (TryReceiveHot(out)) {
      *got = true;
      return Status::OK();
    }
    return TryReceiveGeneral(out, got);
  }

  /// TryReceive's common case, inline in the caller's frame (the
  /// Result-free TryReceive tries it first; the Result one and Receive
  /// never do): true if it received the next message into `out`, exactly
  /// as the out-of-line receive would have. It takes only a message
  /// committed at the cursor, read consistently, with a body in a fixed
  /// block or in the channel segment's arena that passes every check the
  /// out-of-line receive makes of it, and no inline bytes, on a
  /// kBlockProducer channel whose producer accepted this consumer. False,
  /// touching nothing, for anything else (nothing there, a lap, an
  /// extension, a slot the out-of-line receive refuses, the end of the
  /// stream): that receive then handles it as ever.
  [[gnu::always_inline]] bool TryReceiveHot(ChannelMessage* out);

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
  uint64_t next_sequence() const { return hot_.cursor; }
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
  Status TryReceiveImpl(ChannelMessage* out, bool* got);
  // The Result-free TryReceive's way for what TryReceiveHot does not take.
  Status TryReceiveGeneral(ChannelMessage* out, bool* got);
  static Status CheckExtension(Impl& state, uint64_t c, SlotCopy copy, const std::byte** where);
  // TryReceiveHot's first body into a message: the queue's reference.
  void AdoptReturns(ChannelBlock* body);

  std::unique_ptr<Impl> impl_;
  // The receive's hot state (the cursor among it): TryReceiveHot reads it
  // in the caller's frame; the out-of-line calls keep it.
  internal::ConsumerHot hot_;
  uint64_t lost_ = 0;
  uint64_t pending_lost_ = 0;
  uint64_t torn_reads_ = 0;
  uint64_t late_laps_ = 0;
  bool accepted_ = false;
  bool closed_ = false;
};

[[gnu::always_inline]] inline bool ChannelConsumer::TryReceiveHot(ChannelMessage* out) {
  internal::ConsumerHot& h = hot_;
  if (!h.ready) return false;
  const uint64_t c = h.cursor;
  const internal::HotSlotData* slot = h.Slot(c);
  // Acquire: partner of the producer's release store of the sequence.
  const uint64_t seq = slot->sequence.load(std::memory_order_acquire);
  if (seq != 2 * c + 2) return false;
  const uint64_t offset = slot->body_offset.load(std::memory_order_relaxed);
  const uint64_t length = slot->body_length.load(std::memory_order_relaxed);
  const uint64_t block = slot->block.load(std::memory_order_relaxed);
  const uint32_t size = slot->payload_size.load(std::memory_order_relaxed);
  const uint32_t shape = slot->shape.load(std::memory_order_relaxed);
  const uint64_t user = slot->user.load(std::memory_order_relaxed);
  const uint32_t extension = slot->extension.load(std::memory_order_relaxed);
  const uint64_t publish_ns = slot->publish_ns.load(std::memory_order_relaxed);
  // Acquire fence: partner of the producer's release fence after its odd
  // store; a copy that mixes two writes sees the sequence changed (the
  // seqlock reader's half). The out-of-line receive then reads it again.
  std::atomic_thread_fence(std::memory_order_acquire);
  if (slot->sequence.load(std::memory_order_relaxed) != seq) return false;
  // The out-of-line receive's checks of the slot's numbers (ReadSlot),
  // each refusal left to it: it reads the slot again and says what is wrong.
  if (size != 0 || block == 0 || extension != 0) return false;
  const auto descriptor = static_cast<uint32_t>(block);
  const auto generation = static_cast<uint32_t>(block >> 32);
  std::atomic<uint32_t>* hold = nullptr;
  if ((descriptor & internal::kHotFixedBlockFlag) != 0) {
    // A fixed block: exactly where block i lies, in the channel segment.
    const uint32_t i = descriptor & ~internal::kHotFixedBlockFlag;
    if (i >= h.fixed_count || offset != h.fixed_offset + uint64_t{i} * h.fixed_size ||
        length > h.fixed_size) {
      return false;
    }
    hold = h.holds + h.hold_index[i];
    // Held from here, before our cursor passes its message. kBlockProducer:
    // a load and a store (ReadSlot says why no other thread changes the
    // count now); the cursor store that passes the message publishes it.
    hold->store(hold->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  } else if (descriptor >= h.block_count || generation == 0 || offset < h.arena_offset ||
             offset > h.arena_end || (offset - h.arena_offset) % 64 != 0 ||
             length > h.arena_end - offset) {
    return false;
  }
  // Claimed: our cursor moves past it, stored once we caught up or every
  // flush_every messages (as the out-of-line receive's Deliver).
  h.cursor = c + 1;
  if (c + 1 - h.stored_cursor >= h.flush_every ||
      h.Slot(c + 1)->sequence.load(std::memory_order_relaxed) != 2 * c + 4) {
    h.StoreCursor(c + 1);
  }
  ChannelBlock& body = out->body_;
  if (body.held_) body.Release();
  if (body.returns_.get() != h.returns) AdoptReturns(&body);
  body.data_ = {h.data + offset, static_cast<std::size_t>(length)};
  body.hold_ = hold;
  body.descriptor_ = descriptor;
  body.generation_ = generation;
  body.held_ = true;
  out->sequence_ = c;
  out->payload_size_ = 0;
  out->shape_ = shape;
  out->user_ = user;
  out->body_offset_ = offset;
  out->publish_ns_ = publish_ns;
  out->lost_before_ = pending_lost_;
  pending_lost_ = 0;
  return true;
}

}  // namespace alkaid::shm
