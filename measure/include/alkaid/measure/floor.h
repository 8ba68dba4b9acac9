#pragma once

/// \file
/// The floors a transport is measured against in the same run, with
/// nothing of Alkaid on their timed path:
/// - the cache-line floor: two processes handing a counter over through one
///   shared cache line (FloorLine), what any shared-memory transport pays
///   at least for a round trip;
/// - the body floor: the same hand-over on a signal line that stands for
///   the transport's slot, carrying the offset of a body of the batch's
///   size that the other side reads (BodyLine), loaned where the
///   transport's allocator would put it (BodyLoans);
/// - the stream floor: bodies handed over in order through a queue of
///   places, one count per side (StreamQueue).
/// Each line lives alone in a page of its own (SharedMapping), mapped
/// before the fork.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/measure/clock.h"
#include "alkaid/measure/shared_mapping.h"
#include "alkaid/shm/channel.h"

namespace alkaid::measure {

/// The cache-line floor's line. Side B says it is ready by storing 1; in
/// round trip k (k >= 1) side A stores 2k and B answers 2k + 1; kQuit
/// tells B to leave. Every store is a release and every load an acquire:
/// each side's store is the partner of the other side's load.
struct alignas(64) FloorLine {
  static constexpr uint64_t kQuit = ~uint64_t{0};

  std::atomic<uint64_t> word;

  /// B: says it is ready.
  void Ready() { word.store(1, std::memory_order_release); }

  /// A: waits for B's Ready; false if `stopping()` turned true first.
  template <typename Stop>
  bool AwaitReady(Stop&& stopping) const {
    while (word.load(std::memory_order_acquire) != 1) {
      if (stopping()) return false;
    }
    return true;
  }

  /// A: round trip k (k >= 1, one more each time); returns half of it in
  /// nanoseconds. Spins on the answer without a stop check: B answers at
  /// once unless it died, and a dead B ends the run anyway.
  int64_t RoundTrip(uint64_t k) {
    const int64_t t0 = NowNs();
    word.store(2 * k, std::memory_order_release);
    while (word.load(std::memory_order_acquire) != 2 * k + 1) {
    }
    return (NowNs() - t0) / 2;
  }

  /// A: B leaves.
  void Quit() { word.store(kQuit, std::memory_order_release); }

  /// B: Ready, then answers every round trip until Quit, or until
  /// `stopping()` turns true while it waits.
  template <typename Stop>
  void Serve(Stop&& stopping) {
    Ready();
    uint64_t seen = 1;
    while (true) {
      uint64_t v;
      while ((v = word.load(std::memory_order_acquire)) == seen) {
        if (stopping()) return;
      }
      if (v == kQuit) return;
      seen = v + 1;
      word.store(seen, std::memory_order_release);
    }
  }
};
static_assert(sizeof(FloorLine) == 64, "the floor is one cache line");

/// The body floor's signal line. A writes the body's place and its id,
/// then stores round trip k (k >= 1) into `ping` (release: publishes the
/// body and the fields; partner of B's acquire load of `ping`); B reads
/// the body and answers with k in `pong` (release; partner of A's acquire
/// load). kQuit in `ping` tells B to leave.
struct alignas(64) BodyLine {
  static constexpr uint64_t kQuit = ~uint64_t{0};

  std::atomic<uint64_t> ping;  ///< A -> B: round trip k >= 1, or kQuit
  std::atomic<uint64_t> pong;  ///< B -> A: the last round trip answered
  uint64_t body_offset;        ///< round trip k's body, from the channel segment's data
  int64_t id;                  ///< what the body holds, for B's check (< 0: a warm-up)

  /// A: hands round trip k over.
  void Send(uint64_t k, uint64_t offset, int64_t body_id) {
    body_offset = offset;
    id = body_id;
    ping.store(k, std::memory_order_release);
  }

  /// A: waits for B's answer to round trip k; false if `stopping()` turned
  /// true first (checked every 1024 spins).
  template <typename Stop>
  bool AwaitAnswer(uint64_t k, Stop&& stopping) const {
    for (uint32_t spins = 1; pong.load(std::memory_order_acquire) != k; ++spins) {
      if ((spins & 1023) == 0 && stopping()) return false;
    }
    return true;
  }

  /// A: B leaves.
  void Quit() { ping.store(kQuit, std::memory_order_release); }

  /// B: waits for the round trip after `seen`; false on kQuit, or if
  /// `stopping()` turned true first.
  template <typename Stop>
  bool AwaitPing(uint64_t seen, uint64_t* k, Stop&& stopping) const {
    while ((*k = ping.load(std::memory_order_acquire)) == seen) {
      if (stopping()) return false;
    }
    return *k != kQuit;
  }

  /// B: answers round trip k.
  void Answer(uint64_t k) { pong.store(k, std::memory_order_release); }
};
static_assert(sizeof(BodyLine) == 64, "the signal is one cache line");

/// StreamQueue's counts, each side's in a line of its own.
struct alignas(64) StreamQueueCounts {
  std::atomic<uint64_t> written{0};  ///< producer: messages written
  uint8_t pad0[56];
  std::atomic<uint64_t> read{0};  ///< consumer: messages read
  uint8_t pad1[56];
  std::atomic<uint64_t> end{~uint64_t{0}};  ///< producer: its count once it ended
  uint8_t pad2[56];
};
static_assert(sizeof(StreamQueueCounts) == 192, "three lines");

/// The stream floor: one producer hands messages 0, 1, ... to one consumer
/// through a queue of `places` places of `place_values` int64 each, in one
/// shared mapping; the producer's count of messages written and the
/// consumer's count of messages read each live in a cache line of their
/// own (a release store per message, the other side's acquire loads). No
/// allocator, slot header, return queue or object: what any shared-memory
/// stream of such bodies pays. Mapped before the fork; each side keeps its
/// last view of the other's count in its own copy of this object.
class StreamQueue {
 public:
  /// What AwaitMessage found.
  enum class Wait { kReady, kEnded, kWaiting };

  /// Maps the counts and the places (IOError with the errno).
  Status Map(uint64_t places, uint64_t place_values);

  /// Producer: the place of message n once the consumer has read message
  /// n - places; null if `stopping()` turned true first (asked every 1024
  /// spins).
  template <typename Stop>
  int64_t* AwaitRoom(uint64_t n, Stop&& stopping) {
    // Acquire: partner of Consumed's release store.
    for (uint32_t spins = 1; n - read_seen_ >= places_; ++spins) {
      read_seen_ = counts_->read.load(std::memory_order_acquire);
      if ((spins & 1023) == 0 && stopping()) return nullptr;
    }
    return Place(n);
  }
  /// Producer: message n is written. Release: publishes its place; partner
  /// of AwaitMessage's acquire load.
  void Written(uint64_t n) { counts_->written.store(n + 1, std::memory_order_release); }
  /// Producer: no message after the first `count`.
  void End(uint64_t count) { counts_->end.store(count, std::memory_order_release); }

  /// Consumer: kReady once message n is written (at Place(n)), kEnded if
  /// the producer ended before it, kWaiting after 1024 spins without either.
  Wait AwaitMessage(uint64_t n) {
    for (uint32_t spins = 0; spins < 1024 && written_seen_ <= n; ++spins) {
      // Acquire: partner of Written's release store.
      written_seen_ = counts_->written.load(std::memory_order_acquire);
      if (written_seen_ > n) break;
      if (counts_->end.load(std::memory_order_acquire) == n) return Wait::kEnded;
    }
    return written_seen_ > n ? Wait::kReady : Wait::kWaiting;
  }
  /// Consumer: message n is read. Release: its place may be written again;
  /// partner of AwaitRoom's acquire load.
  void Consumed(uint64_t n) { counts_->read.store(n + 1, std::memory_order_release); }

  /// Where message n is (or goes).
  int64_t* Place(uint64_t n) const { return values_.get() + (n % places_) * place_values_; }

 private:
  SharedMapping<StreamQueueCounts> counts_;  // pages of their own
  SharedMapping<int64_t> values_;
  uint64_t places_ = 1;
  uint64_t place_values_ = 0;
  uint64_t read_seen_ = 0;     // producer: the consumer's count, as last seen
  uint64_t written_seen_ = 0;  // consumer: the producer's count, as last seen
};

/// Where the body floor's bodies come from: loans of a channel that is
/// never published through, made with the transport's arena options, so
/// that they land where the transport's allocator puts its blocks. The
/// last `held` loans are kept, as the transport keeps the blocks that its
/// consumer has not returned yet. Producer thread only.
class BodyLoans {
 public:
  /// Creates channel `name` (removed when this is dropped).
  static Result<BodyLoans> Create(const std::string& name, const shm::ChannelOptions& options,
                                  std::size_t held);

  /// A block of `bytes` (not held until Hold).
  Result<shm::ChannelLoan> Loan(uint64_t bytes) { return channel_->Loan(bytes); }
  /// Keeps `loan`, dropping the oldest one kept beyond `held`.
  void Hold(shm::ChannelLoan loan);

 private:
  std::unique_ptr<shm::ChannelProducer> channel_;
  std::deque<shm::ChannelLoan> held_loans_;
  std::size_t held_ = 0;
};

}  // namespace alkaid::measure
