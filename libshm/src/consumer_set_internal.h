#pragma once

// Private: the consumers of a channel as its producer knows them: the
// registry (each entry's requests, closes and take-overs), acceptance,
// finishing closed consumers, reaping dead ones, forgetting an entry, and
// draining the return queues into the block table. Private memory; every
// call is made on the producer thread (ChannelProducer's calls, through
// ProducerState). Shared memory it touches: the registry (read, and one CAS
// to free an entry), the producer's control line per consumer (it alone
// writes it), and each accepted consumer's segment (mapped read-only:
// cursor, waiting episode, state, return queue). The protocol is in
// docs/SHM_LAYOUT.md ("Registration, acceptance, close").

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alkaid/shm/channel.h"
#include "alkaid/shm/producer_hot.h"
#include "alkaid/shm/segment.h"
#include "block_table_internal.h"
#include "channel_internal.h"
#include "channel_layout_internal.h"
#include "doorbell_internal.h"

namespace alkaid::shm::internal {

/// What the producer knows of consumer k.
struct ConsumerState {
  bool accepted = false;
  bool closed = false;               // stopped receiving: not counted for room or new messages
  uint64_t word = 0;                 // its registration word (requested state)
  uint64_t start = 0;                // first sequence it reads
  uint64_t token = 0;                // what its segment said at acceptance (0: none)
  std::shared_ptr<Segment> segment;  // read-only
  const ConsumerSegHeaderData* header = nullptr;
  const std::atomic<uint64_t>* returns = nullptr;
  const std::atomic<uint32_t>* holds = nullptr;  // fixed_count hold counts
  uint32_t return_capacity = 0;
  uint32_t return_log2 = 0;
  uint64_t returns_read = 0;
  uint32_t last_woken = 0;  // the waiting episode last woken
  DoorbellWriter doorbell;  // its doorbell, once rung
  uint64_t dropped = 0;     // kDropOldest: messages overwritten before it read them

  /// The cursor it reads from next, as far as the producer can tell (its
  /// segment starts at 0 until it learns its start). `order` is the
  /// caller's: each names its partner.
  uint64_t Cursor(std::memory_order order) const {
    return std::max(header->cursor.load(order), start);
  }
};

/// What the consumer set counted (ChannelStats' fields of the same names).
struct ConsumerCounts {
  uint64_t returns = 0;
  uint64_t bogus_returns = 0;
  uint64_t consumers_accepted = 0;
  uint64_t consumers_finished = 0;
  uint64_t consumers_reclaimed = 0;
};

/// The consumer registrations of one channel, from the producer's side.
/// The block table and the slot record (SlotRecord, producer_hot.h) are
/// the caller's, passed to the calls that change holders. What the data
/// path reads of the set (the registry's count as handled, the cursors'
/// bound, the counted consumers' `waiting` words and the accepted ones'
/// hold counts) it keeps in the producer's hot state (`hot`), which it
/// alone writes those of.
class ConsumerSet {
 public:
  ConsumerSet(const ChannelGeometry& geometry, std::string channel, const ChannelOptions& options,
              std::byte* channel_data, std::byte* registry_data, ProducerHot* hot);

  const ConsumerState& operator[](uint32_t k) const { return consumers_[k]; }
  ConsumerState& operator[](uint32_t k) { return consumers_[k]; }

  /// The counted consumers (accepted, not closed: room and new messages),
  /// as bit words (holders of a new message) and as a list, and how many.
  const uint64_t* counted() const { return counted_; }
  const std::vector<uint32_t>& counted_list() const { return counted_list_; }
  /// The accepted consumers, closed ones too (their holds still count).
  const std::vector<uint32_t>& accepted_list() const { return accepted_list_; }
  uint32_t counted_count() const { return hot_->counted_count; }

  /// A lower bound of the counted consumers' cursors (kept up to date by
  /// ScanMinCursor, Accept, and the producer's overwrite with kDropOldest).
  uint64_t min_cursor() const { return hot_->min_cursor; }
  void set_min_cursor(uint64_t cursor) { hot_->min_cursor = cursor; }

  const ConsumerCounts& counts() const { return counts_; }

  /// On the data path (Publish, Loan, waits): one acquire load of the
  /// registry's `changes` when nothing changed; else looks at every entry,
  /// accepting new consumers only if options.accept_on_publish.
  void PollRegistry(BlockTable& blocks, const SlotRecord& slots) {
    // Acquire: partner of the consumers' release increments.
    const uint64_t changes = reg_header_->changes.load(std::memory_order_acquire);
    if (changes == hot_->registry_seen) return;
    hot_->registry_seen = changes;
    ProcessRegistry(accept_on_publish_, blocks, slots);
  }

  /// Poll and AcceptConsumers: accepts every consumer waiting. Returns how
  /// many it accepted.
  uint64_t PollRegistryAccepting(BlockTable& blocks, const SlotRecord& slots);

  /// Looks at every registration: new consumers, closed ones, finished
  /// ones, entries taken over.
  void ProcessRegistry(bool accepting, BlockTable& blocks, const SlotRecord& slots);

  /// The next PollRegistryAccepting makes a full pass over the registry,
  /// whatever `changes` says.
  void LookAtEveryEntry() { requests_waiting_ = true; }

  /// Reclaims consumers whose process is gone (accepted or not).
  void ReapDead(BlockTable& blocks);
  /// When a liveness check is next due (Poll; options.liveness_interval
  /// after the last ReapDead).
  std::chrono::steady_clock::time_point next_liveness() const { return next_liveness_; }

  /// Drains consumer k's return queue into the block table.
  void DrainReturns(uint32_t k, BlockTable& blocks) {
    ConsumerState& c = consumers_[k];
    if (!c.accepted) return;
    uint64_t pos = c.returns_read;
    const uint64_t mask = c.return_capacity - 1;
    while (true) {
      // Acquire: partner of the consumer's release store of the entry.
      const uint64_t v = c.returns[pos & mask].load(std::memory_order_acquire);
      if ((v & 0xff) != ReturnLap(pos, c.return_log2)) break;
      if (blocks.Return(k, static_cast<uint32_t>(v >> 8) & 0xffffffU,
                        static_cast<uint32_t>(v >> 32))) {
        ++counts_.returns;
      } else {
        ++counts_.bogus_returns;  // a duplicate after a lap (kDropOldest), or a buggy consumer
      }
      ++pos;
    }
    if (pos != c.returns_read) {
      c.returns_read = pos;
      // Release: the consumer reuses the entries below `pos` after its
      // acquire load of this word.
      controls_[k].returns_read.store(pos, std::memory_order_release);
    }
  }

  /// Drains every accepted consumer's queue (closed ones too).
  void DrainAllReturns(BlockTable& blocks) {
    for (uint32_t k : accepted_list_) DrainReturns(k, blocks);
  }

  /// The smallest cursor of the counted consumers (`next_sequence` if
  /// none); also the new min_cursor().
  uint64_t ScanMinCursor(uint64_t next_sequence) {
    uint64_t m = next_sequence;
    for (uint32_t k : counted_list_) {
      // Acquire: partner of the consumer's cursor store, made after it read
      // the slots below it.
      m = std::min(m, consumers_[k].Cursor(std::memory_order_acquire));
    }
    hot_->min_cursor = m;
    return m;
  }

  /// The counted consumer with the smallest cursor, or max_consumers.
  uint32_t Slowest() const;

  /// The consumers accepted, and those registered and waiting (ChannelProducer::consumers()).
  std::vector<ChannelConsumerInfo> Describe(const BlockTable& blocks) const;
  /// The same into `*out`, reusing its capacity.
  void Describe(const BlockTable& blocks, std::vector<ChannelConsumerInfo>* out) const;

  /// Removes the segment names of the consumers accepted (as opened,
  /// whatever the registry says now) and of those still waiting (the
  /// producer's destructor).
  void RemoveSegments() const;

 private:
  std::string SegmentName(uint32_t index, uint64_t word) const {
    return ConsumerSegmentName(channel_, index, RegTag(word));
  }
  static void ListFrom(const uint64_t* words, std::vector<uint32_t>* list) {
    list->clear();
    ForEachBit(words, [list](uint32_t k) { list->push_back(k); });
  }
  // The lists and the hot state's words from the bit sets, after a change.
  void ListsChanged();

  void Accept(uint32_t k, uint64_t word, BlockTable& blocks, const SlotRecord& slots);
  void StopCounting(uint32_t k);
  // Consumer k stops receiving at `cursor`: the messages it has not read
  // are no longer its to return.
  void ReleaseUnread(uint32_t k, uint64_t cursor, BlockTable& blocks, const SlotRecord& slots);
  // Frees entry k (registration word `word`) and forgets what we knew.
  void Forget(uint32_t k, uint64_t word);
  // A consumer that died, or whose entry was taken over: releases exactly
  // what it held.
  void Reclaim(uint32_t k, BlockTable& blocks);
  // Entry k of a live accepted consumer shows `seen`, which it did not
  // write: the consumer's own word is put back.
  void RestoreForged(uint32_t k, uint64_t seen);

  ChannelGeometry geometry_;
  std::string channel_;
  bool accept_on_publish_;
  std::chrono::milliseconds liveness_interval_;
  std::byte* channel_data_;  // the slots, read at acceptance
  ConsumerControlData* controls_;
  RegistryHeaderData* reg_header_;
  RegistrationData* regs_;

  std::vector<ConsumerState> consumers_;
  uint64_t counted_[kHolderWords] = {};   // accepted, not closed: room and new messages
  uint64_t accepted_[kHolderWords] = {};  // accepted (closed or not): returns to drain
  // The same sets as index lists (capacity reserved: no allocation), for
  // the loops of the data path.
  std::vector<uint32_t> counted_list_;
  std::vector<uint32_t> accepted_list_;
  // The producer's hot state: counted_count, min_cursor, the words of the
  // counted and accepted consumers, and registry_seen, the registry's
  // `changes` as last handled. Describe() may see a request before its
  // consumer's bump of `changes` (the bump follows the request): it then
  // sets kRegistryUnseen there, so that the next poll looks, whatever the
  // counter says.
  ProducerHot* hot_;
  static constexpr uint64_t kRegistryUnseen = ~uint64_t{0};
  // A registration request was seen and left for the next accepting poll
  // (options.accept_on_publish false).
  bool requests_waiting_ = false;
  std::chrono::steady_clock::time_point next_liveness_ = std::chrono::steady_clock::now();
  ConsumerCounts counts_;
};

}  // namespace alkaid::shm::internal
