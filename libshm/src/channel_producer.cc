// The producer side of a channel: the only writer of the channel segment,
// and the only keeper of block lifetimes (in its private memory).

#include <algorithm>
#include <cstring>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "alkaid/common/process.h"
#include "alkaid/shm/channel.h"
#include "channel_internal.h"
#include "channel_layout_internal.h"
#include "free_ranges_internal.h"
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

namespace {

constexpr uint32_t kNoBlock = UINT32_MAX;
constexpr uint32_t kHolderWords = kMaxConsumers / 64;

enum class BlockState : uint8_t { kFree, kCached, kLoaned, kLive };

// A block descriptor, private to the producer. A block is live from its
// publish until the ring's reference is dropped (its slot is overwritten,
// or space is needed and every consumer passed it), every consumer that
// was given it returned it (or was finished or reclaimed), and a loan kept
// across its publish was dropped.
struct Block {
  uint64_t offset = 0;    // payload offset of the first data byte
  uint64_t capacity = 0;  // arena bytes, multiple of 64
  uint32_t generation = 0;
  BlockState state = BlockState::kFree;
  bool ring_ref = false;
  bool loan_ref = false;  // a ChannelLoan still names it
  uint64_t holders[kHolderWords] = {};
  uint32_t next_cached = kNoBlock;  // kCached: next block of its size class
};

bool AnyHolder(const Block& b) {
  for (uint64_t w : b.holders) {
    if (w != 0) return true;
  }
  return false;
}

// Calls f(k) for every set bit k of `words` (kHolderWords of them).
template <typename F>
void ForEachBit(const uint64_t* words, F&& f) {
  for (uint32_t w = 0; w < kHolderWords; ++w) {
    for (uint64_t bits = words[w]; bits != 0; bits &= bits - 1) {
      f(w * 64 + static_cast<uint32_t>(__builtin_ctzll(bits)));
    }
  }
}

bool TestBit(const uint64_t* words, uint32_t k) { return (words[k / 64] >> (k % 64)) & 1; }
void SetBit(uint64_t* words, uint32_t k) { words[k / 64] |= uint64_t{1} << (k % 64); }
void ClearBit(uint64_t* words, uint32_t k) { words[k / 64] &= ~(uint64_t{1} << (k % 64)); }

// Freed blocks of one capacity, kept with their space (LIFO: the most
// recently used, the warmest in the caches, first).
struct SizeClass {
  uint64_t capacity = 0;
  uint32_t head = kNoBlock;
};

// What the producer knows of consumer k.
struct ConsumerState {
  bool accepted = false;
  bool closed = false;               // stopped receiving: not counted for room or new messages
  uint64_t word = 0;                 // its registration word (requested state)
  uint64_t start = 0;                // first sequence it reads
  std::shared_ptr<Segment> segment;  // read-only
  const ConsumerSegHeaderData* header = nullptr;
  const std::atomic<uint64_t>* returns = nullptr;
  uint32_t return_capacity = 0;
  uint32_t return_log2 = 0;
  uint64_t returns_read = 0;
  uint32_t last_woken = 0;  // the waiting episode last woken
};

}  // namespace

struct ChannelLoan::Owner {
  ChannelOptions options;
  std::string name;
  ChannelGeometry geometry;
  std::shared_ptr<Segment> segment;
  std::shared_ptr<Segment> registry;
  ChannelHeaderData* header = nullptr;
  ConsumerControlData* controls = nullptr;
  RegistryHeaderData* reg_header = nullptr;
  RegistrationData* regs = nullptr;

  std::vector<Block> blocks;
  std::vector<uint32_t> free_descriptors;  // LIFO
  std::vector<SizeClass> classes;
  internal::FreeRanges ranges;
  uint32_t next_generation = 1;
  uint64_t blocks_live = 0;

  std::vector<uint32_t> slot_block;  // the block of the message in each slot
  uint64_t next_sequence = 0;
  uint32_t shapes_used = 0;
  bool closed = false;

  std::vector<ConsumerState> consumers;
  uint64_t counted[kHolderWords] = {};   // accepted, not closed: room and new messages
  uint64_t accepted[kHolderWords] = {};  // accepted (closed or not): returns to drain
  // The same sets as index lists (capacity reserved: no allocation), for
  // the loops of the data path.
  std::vector<uint32_t> counted_list;
  std::vector<uint32_t> accepted_list;

  static void ListFrom(const uint64_t* words, std::vector<uint32_t>* list) {
    list->clear();
    ForEachBit(words, [list](uint32_t k) { list->push_back(k); });
  }
  uint32_t counted_count = 0;
  uint64_t min_cursor = 0;  // lower bound of the counted consumers' cursors
  // The registry's `changes` as last handled. consumers() may see a request
  // before its consumer's bump of `changes` (the bump follows the request):
  // it then sets kRegistryUnseen, so that the next poll looks, whatever the
  // counter says.
  mutable uint64_t registry_seen = 0;
  static constexpr uint64_t kRegistryUnseen = ~uint64_t{0};
  // A registration request was seen and left for the next accepting poll
  // (options.accept_on_publish false).
  bool requests_waiting = false;
  Clock::time_point next_liveness = Clock::now();
  ChannelStats stats;

  ChannelSlotData* Slot(uint64_t sequence) const {
    return reinterpret_cast<ChannelSlotData*>(segment->data() + geometry.slots_offset +
                                              (sequence & geometry.mask) * geometry.slot_size);
  }

  // The cursor consumer k reads from next, as far as the producer can tell
  // (its segment starts at 0 until it learns its start).
  uint64_t Cursor(const ConsumerState& c, std::memory_order order) const {
    return std::max(c.header->cursor.load(order), c.start);
  }

  std::string ConsumerSegmentName(uint32_t index, uint64_t word) const {
    return internal::ConsumerSegmentName(name, index, internal::RegTag(word));
  }

  // --- blocks --------------------------------------------------------------

  void FreeBlock(uint32_t d) {
    Block& b = blocks[d];
    --blocks_live;
    for (SizeClass& c : classes) {
      if (c.capacity == b.capacity) {
        b.state = BlockState::kCached;
        b.next_cached = c.head;
        c.head = d;
        return;
      }
    }
    if (classes.size() < 16) {
      classes.push_back({b.capacity, d});
      b.state = BlockState::kCached;
      b.next_cached = kNoBlock;
      return;
    }
    ranges.Add(b.offset, b.capacity);
    b.state = BlockState::kFree;
    free_descriptors.push_back(d);
  }

  void MaybeFree(uint32_t d) {
    Block& b = blocks[d];
    if (b.state == BlockState::kLive && !b.ring_ref && !b.loan_ref && !AnyHolder(b)) {
      FreeBlock(d);
    }
  }

  // Gives the cached blocks' space back to the free ranges (so that it can
  // be carved into other sizes).
  void FlushClasses() {
    for (SizeClass& c : classes) {
      for (uint32_t d = c.head; d != kNoBlock;) {
        Block& b = blocks[d];
        const uint32_t next = b.next_cached;
        ranges.Add(b.offset, b.capacity);
        b.state = BlockState::kFree;
        b.next_cached = kNoBlock;
        free_descriptors.push_back(d);
        d = next;
      }
    }
    classes.clear();
  }

  // A freed block of this capacity, or kNoBlock.
  uint32_t TakeCached(uint64_t capacity) {
    for (SizeClass& c : classes) {
      if (c.capacity == capacity && c.head != kNoBlock) {
        const uint32_t d = c.head;
        c.head = blocks[d].next_cached;
        blocks[d].next_cached = kNoBlock;
        return d;
      }
    }
    return kNoBlock;
  }

  // One attempt: a cached block of this capacity, else carved space.
  uint32_t TryTake(uint64_t capacity) {
    const uint32_t cached = TakeCached(capacity);
    if (cached != kNoBlock) return cached;
    if (free_descriptors.empty()) return kNoBlock;
    auto offset = ranges.Take(capacity);
    if (!offset) return kNoBlock;
    const uint32_t d = free_descriptors.back();
    free_descriptors.pop_back();
    blocks[d].offset = *offset;
    blocks[d].capacity = capacity;
    return d;
  }

  // --- consumers -------------------------------------------------------------

  void Return(uint32_t k, uint32_t d, uint32_t generation) {
    if (d >= blocks.size() || blocks[d].state != BlockState::kLive ||
        blocks[d].generation != generation || !TestBit(blocks[d].holders, k)) {
      ++stats.bogus_returns;  // a duplicate after a lap (kDropOldest), or a buggy consumer
      return;
    }
    ClearBit(blocks[d].holders, k);
    ++stats.returns;
    MaybeFree(d);
  }

  void DrainReturns(uint32_t k) {
    ConsumerState& c = consumers[k];
    if (!c.accepted) return;
    uint64_t pos = c.returns_read;
    const uint64_t mask = c.return_capacity - 1;
    while (true) {
      // Acquire: partner of the consumer's release store of the entry.
      const uint64_t v = c.returns[pos & mask].load(std::memory_order_acquire);
      if ((v & 0xff) != internal::ReturnLap(pos, c.return_log2)) break;
      Return(k, static_cast<uint32_t>(v >> 8) & 0xffffffU, static_cast<uint32_t>(v >> 32));
      ++pos;
    }
    if (pos != c.returns_read) {
      c.returns_read = pos;
      // Release: the consumer reuses the entries below `pos` after its
      // acquire load of this word.
      controls[k].returns_read.store(pos, std::memory_order_release);
    }
  }

  void DrainAllReturns() {
    for (uint32_t k : accepted_list) DrainReturns(k);
  }

  // Forgets consumer k's bit on every block (it died, or finished and
  // claims to hold nothing).
  void ClearHolder(uint32_t k) {
    for (uint32_t d = 0; d < blocks.size(); ++d) {
      if (blocks[d].state == BlockState::kLive && TestBit(blocks[d].holders, k)) {
        ClearBit(blocks[d].holders, k);
        MaybeFree(d);
      }
    }
  }

  void StopCounting(uint32_t k) {
    if (TestBit(counted, k)) {
      ClearBit(counted, k);
      ListFrom(counted, &counted_list);
      --counted_count;
    }
  }

  // Consumer k stops receiving at `cursor`: the messages it has not read
  // are no longer its to return.
  void ReleaseUnread(uint32_t k, uint64_t cursor) {
    const uint64_t first =
        std::max(cursor, next_sequence > geometry.slot_count ? next_sequence - geometry.slot_count
                                                             : uint64_t{0});
    for (uint64_t m = first; m < next_sequence; ++m) {
      const uint32_t d = slot_block[m & geometry.mask];
      if (d != kNoBlock && blocks[d].state == BlockState::kLive && TestBit(blocks[d].holders, k)) {
        ClearBit(blocks[d].holders, k);
        MaybeFree(d);
      }
    }
  }

  void Forget(uint32_t k, uint64_t word) {
    ConsumerState& c = consumers[k];
    const std::string seg_name = ConsumerSegmentName(k, word);
    c = ConsumerState{};
    ClearBit(accepted, k);
    ListFrom(accepted, &accepted_list);
    controls[k].accepted.store(0, std::memory_order_release);
    (void)Segment::Remove(seg_name);  // KeyError if never created: fine
    // Release: partner of the acquire CAS of the next claim of the entry.
    uint64_t expected = regs[k].word.load(std::memory_order_relaxed);
    if (internal::RegPid(expected) == internal::RegPid(word) &&
        internal::RegTag(expected) == internal::RegTag(word)) {
      regs[k].word.compare_exchange_strong(expected, 0, std::memory_order_release,
                                           std::memory_order_relaxed);
    }
  }

  // A consumer that died, or whose entry was taken over: releases exactly
  // what it held.
  void Reclaim(uint32_t k) {
    ConsumerState& c = consumers[k];
    const uint64_t word = c.word;
    if (c.accepted) {
      StopCounting(k);
      ClearHolder(k);
      ++stats.consumers_reclaimed;
    }
    Forget(k, word);
  }

  void Accept(uint32_t k, uint64_t word) {
    const std::string seg_name = ConsumerSegmentName(k, word);
    auto opened = Segment::Open(seg_name, SegmentKind::kChannelConsumer,
                                SegmentOpenOptions{.prefault = true, .read_only = true});
    const ConsumerSegHeaderData* h = nullptr;
    bool ok = opened.ok() && (*opened)->data_size() >= sizeof(ConsumerSegHeaderData);
    if (ok) {
      h = reinterpret_cast<const ConsumerSegHeaderData*>((*opened)->data());
      // Acquire: partner of the consumer's release store of its magic.
      ok = h->magic.load(std::memory_order_acquire) == internal::kConsumerSegMagic &&
           h->layout_version == internal::kChannelLayoutVersion && h->index == k &&
           h->registration == internal::RegWithState(word, internal::kRegClaimed) &&
           h->return_capacity == geometry.return_capacity &&
           (*opened)->data_size() >=
               sizeof(ConsumerSegHeaderData) + uint64_t{geometry.return_capacity} * 8;
    }
    if (!ok) {
      // Not a consumer we can serve (its segment is missing or malformed):
      // free the entry; the consumer sees its registration gone.
      Forget(k, word);
      return;
    }
    ConsumerState& c = consumers[k];
    c.accepted = true;
    c.word = word;
    c.segment = std::move(*opened);
    c.header = h;
    c.returns = reinterpret_cast<const std::atomic<uint64_t>*>(c.segment->data() +
                                                               sizeof(ConsumerSegHeaderData));
    c.return_capacity = geometry.return_capacity;
    c.return_log2 = static_cast<uint32_t>(__builtin_ctz(geometry.return_capacity));
    c.returns_read = 0;
    c.last_woken = 0;
    uint64_t start = next_sequence;
    if (h->from_oldest != 0) {
      // The oldest message from which on every body is still held by the
      // ring: exact, nothing from there on can be gone.
      const uint64_t oldest =
          next_sequence > geometry.slot_count ? next_sequence - geometry.slot_count : 0;
      while (start > oldest) {
        const uint32_t d = slot_block[(start - 1) & geometry.mask];
        const ChannelSlotData* slot = Slot(start - 1);
        const bool has_body = slot->block.load(std::memory_order_relaxed) != 0;
        if (has_body && (d == kNoBlock || !blocks[d].ring_ref)) break;
        --start;
      }
      for (uint64_t m = start; m < next_sequence; ++m) {
        const uint32_t d = slot_block[m & geometry.mask];
        if (d != kNoBlock && blocks[d].ring_ref) SetBit(blocks[d].holders, k);
      }
    }
    c.start = start;
    controls[k].returns_read.store(0, std::memory_order_relaxed);
    controls[k].start.store(start, std::memory_order_relaxed);
    // Release: publishes `start`; partner of the consumer's acquire load.
    controls[k].accepted.store(word, std::memory_order_release);
    SetBit(counted, k);
    SetBit(accepted, k);
    ListFrom(counted, &counted_list);
    ListFrom(accepted, &accepted_list);
    ++counted_count;
    min_cursor = std::min(min_cursor, start);
    ++stats.consumers_accepted;
  }

  // Looks at every registration: new consumers, closed ones, finished ones,
  // entries taken over.
  void ProcessRegistry(bool accepting) {
    for (uint32_t k = 0; k < geometry.max_consumers; ++k) {
      // Acquire: partner of the consumer's release CAS of its entry.
      const uint64_t word = regs[k].word.load(std::memory_order_acquire);
      ConsumerState& c = consumers[k];
      const uint64_t state = internal::RegState(word);
      const bool same = c.accepted && internal::RegPid(word) == internal::RegPid(c.word) &&
                        internal::RegTag(word) == internal::RegTag(c.word);
      if (c.accepted && !same) Reclaim(k);  // its entry was freed and claimed again
      if (!c.accepted) {
        if (state == internal::kRegRequested) {
          if (accepting) {
            Accept(k, word);
          } else {
            requests_waiting = true;  // for the next Poll / AcceptConsumers
          }
        }
        if (state == internal::kRegClosed) Forget(k, word);  // closed before we saw it
        continue;
      }
      if (state == internal::kRegClosed && !c.closed) {
        c.closed = true;
        StopCounting(k);
        ReleaseUnread(k, Cursor(c, std::memory_order_acquire));
      }
      if (c.closed) {
        // Acquire: partner of the release store of kConsumerDone, made after
        // its last return was queued.
        if (c.header->state.load(std::memory_order_acquire) == internal::kConsumerDone) {
          DrainReturns(k);
          ClearHolder(k);  // nothing, for a consumer that returned what it held
          ++stats.consumers_finished;
          Forget(k, c.word);
        }
      }
    }
  }

  // On the data path (Publish, Loan, waits): accepts new consumers only if
  // options.accept_on_publish.
  void PollRegistry() {
    // Acquire: partner of the consumers' release increments.
    const uint64_t changes = reg_header->changes.load(std::memory_order_acquire);
    if (changes == registry_seen) return;
    registry_seen = changes;
    ProcessRegistry(options.accept_on_publish);
  }

  // Poll and AcceptConsumers: accepts every consumer waiting. Returns how
  // many it accepted.
  uint64_t PollRegistryAccepting() {
    const uint64_t before = stats.consumers_accepted;
    // Acquire: partner of the consumers' release increments.
    const uint64_t changes = reg_header->changes.load(std::memory_order_acquire);
    if (changes != registry_seen || requests_waiting) {
      registry_seen = changes;
      requests_waiting = false;
      ProcessRegistry(true);
    }
    return stats.consumers_accepted - before;
  }

  // Reclaims consumers whose process is gone (accepted or not).
  void ReapDead() {
    for (uint32_t k = 0; k < geometry.max_consumers; ++k) {
      const uint64_t word = regs[k].word.load(std::memory_order_acquire);
      if (word == 0 && !consumers[k].accepted) continue;
      const uint32_t pid =
          consumers[k].accepted ? internal::RegPid(consumers[k].word) : internal::RegPid(word);
      if (pid != 0 && ProcessIsGone(pid)) {
        if (consumers[k].accepted) {
          Reclaim(k);
        } else {
          Forget(k, word);
        }
      }
    }
    next_liveness = Clock::now() + options.liveness_interval;
  }

  // Everything that can give space back without a system call: returns,
  // finished consumers, then the ring's references on messages every
  // counted consumer passed. (Dead consumers: ReapDead, when this was not
  // enough.)
  void CollectSpace() {
    TakeReleased();
    ProcessRegistry(options.accept_on_publish);
    DrainAllReturns();
    const uint64_t passed = ScanMinCursor();
    const uint64_t oldest =
        next_sequence > geometry.slot_count ? next_sequence - geometry.slot_count : 0;
    for (uint64_t m = oldest; m < passed; ++m) {
      const uint32_t d = slot_block[m & geometry.mask];
      if (d == kNoBlock) continue;
      slot_block[m & geometry.mask] = kNoBlock;
      blocks[d].ring_ref = false;
      MaybeFree(d);
    }
  }

  // The smallest cursor of the counted consumers (next_sequence if none).
  uint64_t ScanMinCursor() {
    uint64_t m = next_sequence;
    for (uint32_t k : counted_list) {
      // Acquire: partner of the consumer's cursor store, made after it read
      // the slots below it.
      m = std::min(m, Cursor(consumers[k], std::memory_order_acquire));
    }
    min_cursor = m;
    return m;
  }

  // The counted consumer with the smallest cursor, or max_consumers.
  uint32_t Slowest() const {
    uint32_t who = geometry.max_consumers;
    uint64_t least = UINT64_MAX;
    for (uint32_t k = 0; k < geometry.max_consumers; ++k) {
      if (!TestBit(counted, k)) continue;
      const uint64_t c = Cursor(consumers[k], std::memory_order_acquire);
      if (c < least) {
        least = c;
        who = k;
      }
    }
    return who;
  }

  Status WaitForRoom(uint64_t sequence);
  void WakeSleepers();

  // --- loans dropped on any thread -------------------------------------------
  // A dropped loan is pushed onto a lock-free stack (links per descriptor:
  // a block has one loan at a time, so it is on the stack once at most) in
  // this process's memory; the producer thread takes the whole stack when
  // it looks for blocks. Pushers never pop, so a stale head only ever makes
  // a CAS fail.
  std::atomic<uint64_t> released_head{0};  // descriptor + 1, 0: empty
  std::unique_ptr<std::atomic<uint32_t>[]> released_next;
  std::unique_ptr<std::atomic<uint32_t>[]> released_generation;

  void PushReleased(uint32_t d, uint32_t generation) {
    released_generation[d].store(generation, std::memory_order_relaxed);
    uint64_t head = released_head.load(std::memory_order_relaxed);
    do {
      released_next[d].store(static_cast<uint32_t>(head), std::memory_order_relaxed);
      // Release: the two stores above are visible to the producer's acquire
      // exchange that takes the stack.
    } while (!released_head.compare_exchange_weak(head, uint64_t{d} + 1, std::memory_order_release,
                                                  std::memory_order_relaxed));
  }

  void TakeReleased() {
    if (released_head.load(std::memory_order_relaxed) == 0) return;
    // Acquire: partner of the pushers' release CAS.
    uint64_t index = released_head.exchange(0, std::memory_order_acquire);
    while (index != 0) {
      const uint32_t d = static_cast<uint32_t>(index - 1);
      const uint32_t generation = released_generation[d].load(std::memory_order_relaxed);
      index = released_next[d].load(std::memory_order_relaxed);
      Block& b = blocks[d];
      if (b.generation != generation || !b.loan_ref) continue;
      b.loan_ref = false;
      if (b.state == BlockState::kLoaned) {
        b.state = BlockState::kLive;  // so FreeBlock's accounting holds
        FreeBlock(d);
      } else {
        MaybeFree(d);
      }
    }
  }
};

// Waits until message `sequence - slot_count` was passed by every counted
// consumer (kBlockProducer): spins, then sleeps on the slowest consumer's
// cursor word, which it wakes when its cursor crosses our target.
Status ChannelLoan::Owner::WaitForRoom(uint64_t sequence) {
  const uint64_t needed = sequence - geometry.slot_count + 1;  // every cursor must reach this
  const uint32_t resume = std::clamp<uint32_t>(
      options.resume_slots == 0 ? geometry.slot_count / 8 : options.resume_slots, 1,
      geometry.slot_count);
  const uint64_t target = needed + resume - 1;
  const auto start = Clock::now();
  const auto spin_until = start + options.publish_spin;
  const auto deadline = internal::DeadlineAfter(options.publish_timeout);
  while (true) {
    PollRegistry();
    if (ScanMinCursor() >= target) return Status::OK();
    const auto now = Clock::now();
    // A stop is looked at past the spin, between futex waits of at most
    // 1 ms: it is seen within about a millisecond, and a caller that
    // stopped in advance still gets the spin's chance of room.
    const bool timed_out = now >= deadline;
    const bool cancelled = !timed_out && now >= spin_until && options.stop.stop_requested();
    if (timed_out || cancelled) {
      if (min_cursor >= needed) return Status::OK();  // at least one slot freed
      const uint32_t k = Slowest();
      const uint32_t pid = k < geometry.max_consumers ? internal::RegPid(consumers[k].word) : 0;
      if (cancelled) {
        return Status::Cancelled("channel '", name, "': the wait for consumer ", k, " (pid ", pid,
                                 ") to read message ", needed - 1,
                                 " was cancelled (its cursor is at ", min_cursor, ")");
      }
      return Status::TimedOut(
          "channel '", name, "': consumer ", k, " (pid ", pid, ") has not read message ",
          needed - 1, " within ",
          std::chrono::duration_cast<std::chrono::milliseconds>(options.publish_timeout).count(),
          " ms (its cursor is at ", min_cursor, ")");
    }
    if (now < spin_until) {
      internal::CpuRelax();
      continue;
    }
    ReapDead();
    const uint32_t k = Slowest();
    if (k == geometry.max_consumers) continue;
    const std::atomic<uint64_t>& cursor = consumers[k].header->cursor;
    const uint64_t seen = cursor.load(std::memory_order_seq_cst);
    header->space_target.store(target, std::memory_order_relaxed);
    // seq_cst: the Dekker pair with the consumer's seq_cst cursor store
    // followed by its seq_cst load of space_waiting: either it sees us
    // waiting and wakes us, or our reload below sees its new cursor.
    header->space_waiting.store(k + 1, std::memory_order_seq_cst);
    if (std::max(cursor.load(std::memory_order_seq_cst), consumers[k].start) < target) {
      // The futex word is the cursor's low half (little-endian).
      auto* word =
          reinterpret_cast<std::atomic<uint32_t>*>(const_cast<std::atomic<uint64_t>*>(&cursor));
      internal::FutexWait(
          word, static_cast<uint32_t>(seen),
          std::min<Clock::duration>(deadline - Clock::now(), std::chrono::milliseconds(1)));
    }
    header->space_waiting.store(0, std::memory_order_relaxed);
  }
}

void ChannelLoan::Owner::WakeSleepers() {
  bool wake = false;
  for (uint32_t k : counted_list) {
    ConsumerState& c = consumers[k];
    // seq_cst: second half of the Dekker pair with the consumer's seq_cst
    // store of an odd episode before its seq_cst reload of write_sequence.
    const uint32_t episode = c.header->waiting.load(std::memory_order_seq_cst);
    if ((episode & 1) != 0 && episode != c.last_woken) {
      c.last_woken = episode;
      wake = true;
    }
  }
  if (!wake) return;
  // Release: partner of the waiter's acquire load of the futex word.
  header->data_futex.fetch_add(1, std::memory_order_release);
  internal::FutexWakeAll(&header->data_futex);
}

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

ChannelProducer::ChannelProducer(std::shared_ptr<ChannelLoan::Owner> impl)
    : impl_(std::move(impl)) {}

ChannelProducer::~ChannelProducer() {
  Close();
  Owner& state = *impl_;
  for (uint32_t k = 0; k < state.geometry.max_consumers; ++k) {
    // The consumers we accepted (their names as we opened them, whatever
    // the registry says now), and those still waiting to be.
    if (state.consumers[k].segment != nullptr)
      (void)Segment::Remove(state.consumers[k].segment->name());
    const uint64_t word = state.regs[k].word.load(std::memory_order_acquire);
    if (word != 0) (void)Segment::Remove(state.ConsumerSegmentName(k, word));
  }
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
  auto owner = std::make_shared<ChannelLoan::Owner>();
  Owner& state = *owner;
  state.options = options;
  state.name = std::string(name);
  state.geometry = geometry;
  ALKAID_ASSIGN_OR_RAISE(state.segment, Segment::Create(name, geometry.total_size,
                                                        SegmentKind::kChannel, options.segment));
  SegmentOptions reg_options;
  reg_options.access = options.segment.access == SegmentAccess::kOwnerOnly
                           ? SegmentAccess::kOwnerOnly
                           : SegmentAccess::kOwnerAndGroup;
  reg_options.group = options.segment.group;  // consumers of that group register in it
  auto registry = Segment::Create(
      state.name + std::string(internal::kRegistrySuffix),
      sizeof(RegistryHeaderData) + uint64_t{geometry.max_consumers} * sizeof(RegistrationData),
      SegmentKind::kChannelRegistry, reg_options);
  if (!registry.ok()) {
    (void)Segment::Remove(name);
    return registry.status();
  }
  state.registry = std::move(*registry);

  std::byte* base = state.segment->data();
  state.header = reinterpret_cast<ChannelHeaderData*>(base);
  state.controls = reinterpret_cast<ConsumerControlData*>(base + geometry.controls_offset);
  internal::WriteChannelHeader(geometry, state.header);
  state.reg_header = reinterpret_cast<RegistryHeaderData*>(state.registry->data());
  state.regs =
      reinterpret_cast<RegistrationData*>(state.registry->data() + sizeof(RegistryHeaderData));
  state.reg_header->layout_version = internal::kChannelLayoutVersion;
  state.reg_header->max_consumers = geometry.max_consumers;
  // Release: publishes the fields above; partner of the consumers' acquire
  // load of the magic.
  state.reg_header->magic.store(internal::kRegistryMagic, std::memory_order_release);
  state.header->magic.store(internal::kChannelMagic, std::memory_order_release);

  state.blocks.resize(geometry.block_count);
  state.released_next = std::make_unique<std::atomic<uint32_t>[]>(geometry.block_count);
  state.released_generation = std::make_unique<std::atomic<uint32_t>[]>(geometry.block_count);
  state.free_descriptors.reserve(geometry.block_count);
  for (uint32_t i = geometry.block_count; i > 0; --i) state.free_descriptors.push_back(i - 1);
  state.classes.reserve(16);
  state.ranges.Add(geometry.arena_offset, geometry.arena_size);
  state.slot_block.assign(geometry.slot_count, kNoBlock);
  state.consumers.resize(geometry.max_consumers);
  state.counted_list.reserve(geometry.max_consumers);
  state.accepted_list.reserve(geometry.max_consumers);
  return std::unique_ptr<ChannelProducer>(new ChannelProducer(std::move(owner)));
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

Status ChannelProducer::LoanImpl(uint64_t length, ChannelLoan* into) {
  Owner& state = *impl_;
  if (state.closed) return Status::Invalid("channel '", state.name, "' is closed");
  if (length > state.geometry.arena_size) {
    return Status::CapacityError("channel '", state.name, "': a block of ", length,
                                 " bytes does not fit the ", state.geometry.arena_size,
                                 "-byte arena");
  }
  const uint64_t capacity = std::max<uint64_t>(internal::RoundUp(length, 64), 64);
  // A freed block of this size first (the warmest), then returned ones,
  // then new space.
  uint32_t desc = state.TakeCached(capacity);
  if (desc == kNoBlock) {
    state.TakeReleased();
    state.DrainAllReturns();
    desc = state.TakeCached(capacity);
  }
  if (desc == kNoBlock) desc = state.TryTake(capacity);
  const auto deadline =
      desc == kNoBlock ? internal::DeadlineAfter(state.options.space_timeout) : Clock::time_point();
  auto pause = std::chrono::microseconds(20);
  while (desc == kNoBlock) {
    state.CollectSpace();
    desc = state.TryTake(capacity);
    if (desc != kNoBlock) break;
    state.FlushClasses();
    desc = state.TryTake(capacity);
    if (desc != kNoBlock) break;
    // Still nothing: consumers that died may hold it (pid checks).
    state.ReapDead();
    state.CollectSpace();
    desc = state.TryTake(capacity);
    if (desc != kNoBlock) break;
    if (state.options.stop.stop_requested()) {
      return Status::Cancelled("channel '", state.name, "': the wait for space for a ", length,
                               "-byte block was cancelled (", state.ranges.free_bytes(),
                               " bytes free in pieces of at most ", state.ranges.largest(), ", ",
                               state.blocks_live, " blocks live)");
    }
    if (Clock::now() >= deadline) {
      std::string holders;
      for (const ChannelConsumerInfo& c : consumers()) {
        if (c.held_blocks == 0) continue;
        holders += (holders.empty() ? "" : ", ") + std::string("consumer ") +
                   std::to_string(c.index) + " (pid " + std::to_string(c.pid) + ") holds " +
                   std::to_string(c.held_blocks);
      }
      return Status::TimedOut(
          "channel '", state.name, "': no space for a ", length, "-byte block within ",
          std::chrono::duration_cast<std::chrono::milliseconds>(state.options.space_timeout)
              .count(),
          " ms (", state.ranges.free_bytes(), " bytes free in pieces of at most ",
          state.ranges.largest(), ", ", state.blocks_live, " blocks live",
          holders.empty() ? "" : "; " + holders, ")");
    }
    // Consumers return blocks without telling us: look again shortly.
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  Block& b = state.blocks[desc];
  b.state = BlockState::kLoaned;
  b.generation = state.next_generation++;
  if (state.next_generation == 0) state.next_generation = 1;
  b.ring_ref = false;
  b.loan_ref = true;
  std::fill(std::begin(b.holders), std::end(b.holders), 0);
  ++state.blocks_live;
  ChannelLoan& loan = *into;
  if (loan.owner_ != impl_) loan.owner_ = impl_;
  loan.data_ = {state.segment->data() + b.offset, static_cast<std::size_t>(length)};
  loan.offset_ = b.offset;
  loan.descriptor_ = desc;
  loan.generation_ = b.generation;
  loan.held_ = true;
  return Status::OK();
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

Status ChannelProducer::PublishImpl(std::span<const std::byte> payload, ChannelLoan* body,
                                    bool keep, uint64_t user, uint32_t shape) {
  Owner& state = *impl_;
  if (state.closed) return Status::Invalid("channel '", state.name, "' is closed");
  if (body != nullptr && state.blocks[body->descriptor_].state != BlockState::kLoaned) {
    return Status::Invalid("channel '", state.name, "': the loan was published already");
  }
  if (payload.size() > state.geometry.inline_capacity) {
    return Status::Invalid("channel '", state.name, "': inline payload of ", payload.size(),
                           " bytes exceeds the capacity of ", state.geometry.inline_capacity);
  }
  if (shape > state.shapes_used) {
    return Status::Invalid("channel '", state.name, "': shape ", shape, " was not added");
  }
  state.PollRegistry();
  const uint64_t n = state.next_sequence;
  const uint64_t slots = state.geometry.slot_count;
  const bool lapping = n >= slots && state.min_cursor <= n - slots && state.counted_count > 0;
  const bool drop = state.options.policy == SlowConsumerPolicy::kDropOldest;
  if (lapping && !drop && state.ScanMinCursor() <= n - slots) {
    ALKAID_RETURN_NOT_OK(state.WaitForRoom(n));
  }
  ChannelSlotData* slot = state.Slot(n);
  const uint32_t index = static_cast<uint32_t>(n & state.geometry.mask);
  const uint32_t old = state.slot_block[index];
  if (lapping && drop) {
    // seq_cst: the Dekker pair with a consumer's seq_cst cursor store and
    // seq_cst reload of this word: either it sees the overwrite begin (and
    // treats message n - slots as lost, returning its block if it already
    // claimed it), or our load of its cursor below sees it passed it.
    slot->sequence.store(2 * n + 1, std::memory_order_seq_cst);
    const uint64_t m0 = n - slots;
    uint64_t least = n;
    for (uint32_t k : state.counted_list) {
      const uint64_t c = state.Cursor(state.consumers[k], std::memory_order_seq_cst);
      if (c <= m0) {
        ++state.stats.dropped;
        if (old != kNoBlock && TestBit(state.blocks[old].holders, k)) {
          ClearBit(state.blocks[old].holders, k);
        }
        least = std::min(least, m0 + 1);
      } else {
        least = std::min(least, c);
      }
    }
    state.min_cursor = least;
  } else {
    slot->sequence.store(2 * n + 1, std::memory_order_relaxed);
    // Release fence: the odd sequence is visible before any field below
    // (the seqlock writer's half; a lapped reader's re-check sees it).
    std::atomic_thread_fence(std::memory_order_release);
  }
  if (old != kNoBlock) {
    state.slot_block[index] = kNoBlock;
    state.blocks[old].ring_ref = false;
    state.MaybeFree(old);
  }
  uint32_t desc = kNoBlock;
  if (body != nullptr) {
    desc = body->descriptor_;
    Block& b = state.blocks[desc];
    b.state = BlockState::kLive;
    b.ring_ref = true;
    b.loan_ref = keep;
    std::copy(std::begin(state.counted), std::end(state.counted), std::begin(b.holders));
    state.slot_block[index] = desc;
    slot->body_offset.store(b.offset, std::memory_order_relaxed);
    slot->body_length.store(body->data_.size(), std::memory_order_relaxed);
    slot->block.store(internal::PackBlock(desc, b.generation), std::memory_order_relaxed);
  } else {
    slot->body_offset.store(0, std::memory_order_relaxed);
    slot->body_length.store(0, std::memory_order_relaxed);
    slot->block.store(0, std::memory_order_relaxed);
  }
  slot->payload_size.store(static_cast<uint32_t>(payload.size()), std::memory_order_relaxed);
  slot->shape.store(shape, std::memory_order_relaxed);
  slot->user.store(user, std::memory_order_relaxed);
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
  state.next_sequence = n + 1;
  ++state.stats.published;
  // seq_cst: the Dekker pair with a consumer about to sleep (WakeSleepers).
  state.header->write_sequence.store(n + 1, std::memory_order_seq_cst);
  state.WakeSleepers();
  return Status::OK();
}

Result<uint32_t> ChannelProducer::AddShape(std::span<const std::byte> bytes) {
  Owner& state = *impl_;
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

Status ChannelProducer::SetSideband(std::span<const uint64_t> words) {
  Owner& state = *impl_;
  if (words.size() > kSidebandWords) {
    return Status::Invalid("channel '", state.name, "': ", words.size(),
                           " sideband words; at most ", kSidebandWords);
  }
  ChannelHeaderData* h = state.header;
  const uint64_t v = h->sideband_version.load(std::memory_order_relaxed);
  h->sideband_version.store(v + 1, std::memory_order_relaxed);
  // Release fence: the odd version is visible before the words change
  // (partner: the reader's acquire fence before its re-check).
  std::atomic_thread_fence(std::memory_order_release);
  for (std::size_t i = 0; i < kSidebandWords; ++i) {
    h->sideband[i].store(i < words.size() ? words[i] : 0, std::memory_order_relaxed);
  }
  // Release: partner of the reader's acquire load of the even version.
  h->sideband_version.store(v + 2, std::memory_order_release);
  return Status::OK();
}

void ChannelProducer::Poll() {
  Owner& state = *impl_;
  state.TakeReleased();
  state.requests_waiting = true;  // a full pass over the registry
  (void)state.PollRegistryAccepting();
  if (Clock::now() >= state.next_liveness) state.ReapDead();
  state.DrainAllReturns();
}

uint64_t ChannelProducer::AcceptConsumers() { return impl_->PollRegistryAccepting(); }

void ChannelProducer::Close() {
  Owner& state = *impl_;
  if (state.closed) return;
  state.closed = true;
  // Release: partner of the consumers' acquire load before EndOfStream.
  state.header->closed.store(1, std::memory_order_release);
  state.header->data_futex.fetch_add(1, std::memory_order_release);
  internal::FutexWakeAll(&state.header->data_futex);
}

uint64_t ChannelProducer::next_sequence() const { return impl_->next_sequence; }

ChannelStats ChannelProducer::stats() const {
  ChannelStats s = impl_->stats;
  s.blocks_live = impl_->blocks_live;
  uint64_t cached = 0;
  for (const SizeClass& c : impl_->classes) {
    for (uint32_t d = c.head; d != kNoBlock; d = impl_->blocks[d].next_cached) {
      cached += impl_->blocks[d].capacity;
    }
  }
  s.arena_bytes_free = impl_->ranges.free_bytes() + cached;
  return s;
}

std::vector<ChannelConsumerInfo> ChannelProducer::consumers() const {
  const Owner& state = *impl_;
  std::vector<ChannelConsumerInfo> out;
  for (uint32_t k = 0; k < state.geometry.max_consumers; ++k) {
    const ConsumerState& c = state.consumers[k];
    if (!c.accepted) {
      // Acquire: partner of the consumer's release CAS of its entry.
      const uint64_t word = state.regs[k].word.load(std::memory_order_acquire);
      if (internal::RegState(word) != internal::kRegRequested) continue;
      // Whoever saw this request here (e.g. a producer waiting for its
      // consumers before its first publish) expects the next publish to
      // accept it, though its consumer may not have bumped `changes` yet.
      state.registry_seen = Owner::kRegistryUnseen;
      ChannelConsumerInfo waiting;
      waiting.index = k;
      waiting.pid = internal::RegPid(word);
      waiting.accepted = false;
      out.push_back(waiting);
      continue;
    }
    ChannelConsumerInfo info;
    info.index = k;
    info.pid = internal::RegPid(c.word);
    info.closed = c.closed;
    info.cursor = state.Cursor(c, std::memory_order_acquire);
    for (const Block& b : state.blocks) {
      if (b.state == BlockState::kLive && TestBit(b.holders, k)) ++info.held_blocks;
    }
    out.push_back(info);
  }
  return out;
}

const std::string& ChannelProducer::name() const { return impl_->name; }
const ChannelOptions& ChannelProducer::options() const { return impl_->options; }
void ChannelProducer::set_stop(std::stop_token stop) { impl_->options.stop = std::move(stop); }
bool ChannelProducer::huge_pages() const { return impl_->segment->huge_pages(); }

}  // namespace alkaid::shm
