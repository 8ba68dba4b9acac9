#pragma once

/// \file
/// A broadcast ring in shared memory: one producer, up to `max_consumers`
/// consumers, every consumer sees every message once, in order.
///
/// Each slot holds a sequence word, an inline payload of up to
/// RingOptions::inline_capacity bytes (the broker puts a flatbuffer Message
/// there) and an optional BlockHandle naming a body in the producer's body
/// segment. Publish and receive use atomics only: no lock and, in busy-poll
/// mode, no system call. A slot being written is never visible: the slot's
/// sequence word works as a seqlock (see docs/SHM_LAYOUT.md).
///
/// Slow consumers: with SlowConsumerPolicy::kBlockProducer the producer
/// waits (up to a timeout) until the slowest active consumer frees the slot
/// it needs; with kDropOldest it overwrites, and the slow consumer alone
/// loses the oldest messages and is told how many (RingMessage::lost_before()).

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/shm/body_allocator.h"
#include "alkaid/shm/delivery.h"
#include "alkaid/shm/segment.h"

namespace alkaid::shm {

/// Options for RingProducer::Create().
struct RingOptions {
  /// Number of slots; a power of two, at least 2. Default 1024.
  uint32_t slot_count = 1024;
  /// Bytes of inline payload per slot (rounded up to 64). Default 512.
  uint32_t inline_capacity = 512;
  /// Consumer registrations in the header, 1..kMaxConsumers. Default 64.
  uint32_t max_consumers = 64;
  /// Default: block the producer.
  SlowConsumerPolicy policy = SlowConsumerPolicy::kBlockProducer;
  /// kBlockProducer: longest wait for a free slot before Publish gives
  /// TimedOut. Default 1 s.
  std::chrono::nanoseconds publish_timeout = std::chrono::seconds(1);
  /// kBlockProducer: how long a producer that finds the ring full spins
  /// before it sleeps on a futex (which a consumer then has to wake with a
  /// system call). Default 50 µs.
  std::chrono::nanoseconds publish_spin = std::chrono::microseconds(50);
  /// kBlockProducer: once the ring is full, the producer waits until every
  /// active consumer has freed this many slots (at least one, at most the
  /// ring) rather than one, so that producer and consumers work in batches
  /// instead of handing each slot back and forth. 0 (default) means
  /// slot_count / 8. Publish still succeeds at the timeout if at least one
  /// slot was freed.
  uint32_t resume_slots = 0;
  /// Permissions of the ring segment.
  SegmentOptions segment;
};

/// Options for RingConsumer::Open().
struct ConsumerOptions {
  WaitMode wait_mode = WaitMode::kSpinThenBlock;
  /// Spins before blocking in kSpinThenBlock. Default 4096 (a few µs).
  uint32_t spin_iterations = 4096;
  /// When set, Receive() takes a reference on each message's body through
  /// this reader (RingMessage::body()), so the body outlives the slot. Must
  /// outlive the consumer and the messages it fills. Without it, a body is
  /// only guaranteed alive until the consumer receives its next message.
  const BodyReader* bodies = nullptr;
  /// Start from the oldest message still in the ring instead of the next
  /// one published. Every message published after Open() returns is
  /// received as usual; older ones are received if still intact when read
  /// (a slot the producer overwrote meanwhile, or one whose body it already
  /// released, is skipped and counted in lost_before()). Default false.
  bool from_oldest = false;
};

/// One received message, owned by the consumer that filled it. Reuse one
/// object across Receive() calls to avoid allocations.
class ALKAID_EXPORT RingMessage {
 public:
  RingMessage() = default;
  RingMessage(RingMessage&&) noexcept = default;
  RingMessage& operator=(RingMessage&&) noexcept = default;

  /// The message's sequence number (0 for the first message of the ring).
  uint64_t sequence() const { return sequence_; }
  /// The inline payload, copied out of the slot.
  std::span<const std::byte> payload() const {
    return {reinterpret_cast<const std::byte*>(words_.data()), size_};
  }
  /// Where the body is, or an invalid handle for a message without body.
  const BlockHandle& body_handle() const { return body_handle_; }
  /// The body, if the consumer has a BodyReader and the message has a body.
  const BlockRef& body() const { return body_; }
  /// Moves the body reference out (to keep it beyond the next Receive).
  BlockRef TakeBody() { return std::move(body_); }
  /// Messages this consumer lost just before this one (kDropOldest only).
  uint64_t lost_before() const { return lost_before_; }

 private:
  friend class RingConsumer;
  std::vector<uint64_t> words_;
  uint32_t size_ = 0;
  uint64_t sequence_ = 0;
  uint64_t lost_before_ = 0;
  BlockHandle body_handle_;
  BlockRef body_;
};

/// Snapshot of one consumer registration, for monitoring and for finding
/// dead consumers. Fields are read separately and may be mutually stale.
struct ConsumerInfoGuess {
  uint32_t id = 0;
  bool active = false;
  /// Force-detached by DetachConsumer() while its process may still run:
  /// not counted, not yet reusable (see DetachConsumer()).
  bool detached = false;
  uint32_t pid = 0;
  uint64_t cursor = 0;  ///< next sequence it will read
  uint64_t lost = 0;    ///< messages it lost so far
};

/// The single producer of a ring; creates the ring segment.
///
/// Thread safety: Publish, Close and ReleaseConsumedBodies must be called
/// from one thread at a time (the producer thread). DetachConsumer and the
/// Guess accessors may be called from any thread.
class ALKAID_EXPORT RingProducer {
 public:
  ~RingProducer();
  RingProducer(const RingProducer&) = delete;
  RingProducer& operator=(const RingProducer&) = delete;

  /// Creates ring segment `name`. If `bodies` is given, the ring manages the
  /// producer references of published bodies (Publish(payload, block)) and
  /// installs a reclaim callback on `bodies` so that a full body segment
  /// first drops references to messages every consumer has passed. `bodies`
  /// must outlive the producer.
  static Result<std::unique_ptr<RingProducer>> Create(std::string_view name,
                                                      const RingOptions& options,
                                                      BodyAllocator* bodies = nullptr);

  /// Bytes of shared memory a ring with `options` uses (segment payload).
  static Result<uint64_t> PayloadSizeFor(const RingOptions& options);

  /// Publishes a message without body. Invalid if the payload exceeds
  /// inline_capacity; TimedOut if (kBlockProducer) a slow active consumer
  /// held the slot for longer than publish_timeout; Invalid after Close().
  Status Publish(std::span<const std::byte> payload);

  /// Publishes a message whose body is `body`. The ring takes over the
  /// producer's reference and drops it once every active consumer has
  /// passed the message (or the slot is overwritten). Needs `bodies` at
  /// creation. On error the block is left with the caller.
  Status Publish(std::span<const std::byte> payload, WritableBlock& body);

  /// Publishes a message carrying `body` as a plain descriptor; the ring
  /// does not manage its lifetime.
  Status PublishDescriptor(std::span<const std::byte> payload, const BlockHandle& body);

  /// Drops the producer references of bodies of messages that every active
  /// consumer has passed. Called automatically when the body segment is full.
  void ReleaseConsumedBodies();

  /// Marks the end of the stream: consumers get EndOfStream once they have
  /// read every message. Wakes blocked consumers.
  void Close();

  /// Deactivates consumer `id` (e.g. one whose process died), so it no
  /// longer holds the producer back. IndexError for an id out of range,
  /// KeyError if inactive.
  ///
  /// If the consumer's process is gone, its registration is freed at once.
  /// Otherwise it is marked detached and stays reserved until the consumer
  /// notices (Cancelled on its next call, or its destructor), so that a
  /// cursor store it makes in the meantime can never land in a registration
  /// given to a new consumer. A detached registration whose process has
  /// died since is freed when an Open() finds no free one. Producer and
  /// consumers must share a pid namespace (pids are compared).
  Status DetachConsumer(uint32_t id);

  /// Stores `words` (at most kSidebandWords; the rest become 0) in the
  /// ring's sideband: a few words beside the message stream that consumers
  /// read atomically as a whole (RingConsumer::ReadSideband), e.g. where
  /// the state a late joiner needs is kept. Wait-free; not ordered with
  /// messages except that a consumer that received a message published
  /// after this call reads these words or newer ones. Invalid if `words`
  /// is too long.
  Status SetSideband(std::span<const uint64_t> words);

  /// Sequence number the next Publish will use (= messages published).
  uint64_t next_sequence() const { return next_sequence_; }
  /// Registrations, active or not. Racy snapshot.
  std::vector<ConsumerInfoGuess> ConsumersGuess() const;
  const std::string& name() const;
  /// The ring's segment, as mapped by the producer.
  const std::shared_ptr<Segment>& segment() const;
  const RingOptions& options() const { return options_; }

 private:
  struct Impl;
  RingProducer(std::unique_ptr<Impl> impl, const RingOptions& options);
  Status PublishImpl(std::span<const std::byte> payload, const BlockHandle* body, bool owned);
  Status WaitForRoom(uint64_t sequence);

  std::unique_ptr<Impl> impl_;
  RingOptions options_;
  uint64_t next_sequence_ = 0;
};

/// A consumer of a ring, in any process; registers itself at Open().
///
/// Thread safety: one thread at a time per RingConsumer (each consumer has
/// its own cursor; use one RingConsumer per consuming thread).
class ALKAID_EXPORT RingConsumer {
 public:
  ~RingConsumer();  ///< detaches
  RingConsumer(const RingConsumer&) = delete;
  RingConsumer& operator=(const RingConsumer&) = delete;

  /// Opens ring `name` and registers a consumer. It receives every message
  /// published after Open() returns (and possibly a few published during
  /// it; with ConsumerOptions::from_oldest, also the older ones still in
  /// the ring). CapacityError if all registrations are taken.
  static Result<std::unique_ptr<RingConsumer>> Open(std::string_view name,
                                                    const ConsumerOptions& options = {});

  /// Same, through an existing mapping of the ring (e.g.
  /// RingProducer::segment() for a consumer thread in the producer's
  /// process).
  static Result<std::unique_ptr<RingConsumer>> Open(std::shared_ptr<Segment> segment,
                                                    const ConsumerOptions& options = {});

  /// Receives the next message if one is committed. Returns false when none
  /// is available yet; EndOfStream once the producer closed the ring and
  /// everything was read; Cancelled if this consumer was detached.
  Result<bool> TryReceive(RingMessage* out);

  /// Receives the next message, waiting per WaitMode up to `timeout`
  /// (TimedOut). Same errors as TryReceive.
  Status Receive(RingMessage* out, std::chrono::nanoseconds timeout);

  /// Reads the producer's sideband (RingProducer::SetSideband): the words
  /// as one consistent set, all 0 if never set. Retries while a write is in
  /// progress; TimedOut if the sideband stays mid-write for about a
  /// millisecond (a producer that died while writing it, or a hostile one).
  Result<std::array<uint64_t, kSidebandWords>> ReadSideband() const;

  /// Stops holding the producer back; further receives give Cancelled.
  void Detach();

  uint32_t id() const { return id_; }
  /// Sequence of the next message this consumer will read.
  uint64_t next_sequence() const { return cursor_; }
  /// Messages lost so far (kDropOldest).
  uint64_t lost_count() const { return lost_; }
  /// Of those, messages whose body handle this consumer copied from a slot
  /// the producer overwrote before the body was acquired, and whose acquire
  /// failed (the block was released or reused): the lapped-mid-read race,
  /// handled by skipping. Diagnostics (the stress tests assert it happened).
  uint64_t stale_acquires() const { return stale_acquires_; }
  uint32_t inline_capacity() const;
  const std::string& name() const;

 private:
  struct Impl;
  RingConsumer(std::unique_ptr<Impl> impl, uint32_t id, uint64_t cursor,
               const ConsumerOptions& options);
  Status WaitForData(std::chrono::steady_clock::time_point deadline);
  // Frees our registration (active, or force-detached and waiting for us).
  void ReleaseRegistration();

  std::unique_ptr<Impl> impl_;
  uint32_t id_;
  uint64_t cursor_;
  uint64_t lost_ = 0;
  uint64_t pending_lost_ = 0;
  uint64_t stale_acquires_ = 0;
  bool detached_ = false;
  ConsumerOptions options_;
};

/// ReclaimDeadConsumer(): every registration of the process.
inline constexpr uint32_t kAnyConsumer = UINT32_MAX;

/// What ReclaimDeadConsumer() did.
struct DeadConsumerReport {
  /// Ring registrations of the dead process that were freed (0 if already
  /// free).
  uint32_t registrations_freed = 0;
  /// Body-segment holder entries of the dead process that were freed.
  uint32_t holders_reclaimed = 0;
  /// Block references (holder bits) they still held, now released.
  uint64_t references_released = 0;
};

/// Releases everything a consumer whose process died held, from any process
/// (the broker): frees its registration `consumer_id` of `ring` (active,
/// force-detached, or left `claimed` by a death during RingConsumer::Open),
/// so it no longer holds the producer back and can be reused, and, if
/// `bodies` is given, releases exactly the block references its readers
/// held (BodyReader::ReclaimDeadHolders(pid)), so the producer reuses that
/// space. Safe whatever the consumer was doing when it died: every
/// reference and the registration are single words, set or not.
///
/// `pid` is the dead consumer's process id: Invalid if the registration
/// belongs to another pid or the process is still running (kill(pid, 0)
/// does not fail with ESRCH); IndexError for an id out of range; an
/// already free registration is left alone (the body references are still
/// reclaimed). Pids must be in the caller's pid namespace. With
/// `consumer_id` = kAnyConsumer, every registration of `pid` is freed (none
/// is not an error).
ALKAID_EXPORT Result<DeadConsumerReport> ReclaimDeadConsumer(const std::shared_ptr<Segment>& ring,
                                                             const std::shared_ptr<Segment>& bodies,
                                                             uint32_t consumer_id, uint32_t pid);

}  // namespace alkaid::shm
