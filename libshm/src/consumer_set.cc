// The producer's consumer set: registration, acceptance, finishing, reaping
// and forgetting (the data path's calls are inline in the header).

#include "consumer_set_internal.h"

#include <algorithm>
#include <array>
#include <span>
#include <utility>

#include "alkaid/common/process.h"

namespace alkaid::shm::internal {

ConsumerSet::ConsumerSet(const ChannelGeometry& geometry, std::string channel,
                         const ChannelOptions& options, std::byte* channel_data,
                         std::byte* registry_data, ProducerHot* hot)
    : geometry_(geometry),
      channel_(std::move(channel)),
      accept_on_publish_(options.accept_on_publish),
      liveness_interval_(options.liveness_interval),
      channel_data_(channel_data),
      controls_(reinterpret_cast<ConsumerControlData*>(channel_data + geometry.controls_offset)),
      reg_header_(reinterpret_cast<RegistryHeaderData*>(registry_data)),
      regs_(reinterpret_cast<RegistrationData*>(registry_data + sizeof(RegistryHeaderData))),
      consumers_(geometry.max_consumers),
      hot_(hot) {
  counted_list_.reserve(geometry.max_consumers);
  accepted_list_.reserve(geometry.max_consumers);
}

uint64_t ConsumerSet::PollRegistryAccepting(BlockTable& blocks, const SlotRecord& slots) {
  const uint64_t before = counts_.consumers_accepted;
  // Acquire: partner of the consumers' release increments.
  const uint64_t changes = reg_header_->changes.load(std::memory_order_acquire);
  if (changes != hot_->registry_seen || requests_waiting_) {
    hot_->registry_seen = changes;
    requests_waiting_ = false;
    ProcessRegistry(true, blocks, slots);
  }
  return counts_.consumers_accepted - before;
}

void ConsumerSet::ProcessRegistry(bool accepting, BlockTable& blocks, const SlotRecord& slots) {
  for (uint32_t k = 0; k < geometry_.max_consumers; ++k) {
    // Acquire: partner of the consumer's release CAS of its entry.
    const uint64_t word = regs_[k].word.load(std::memory_order_acquire);
    ConsumerState& c = consumers_[k];
    const uint64_t state = RegState(word);
    const bool same =
        c.accepted && RegPid(word) == RegPid(c.word) && RegTag(word) == RegTag(c.word);
    if (c.accepted && !same) {
      // The entry no longer names the consumer we accepted. Only its death
      // lets another take or free the entry (a claimer's second pass, a
      // reaper); while its process lives the change is a forgery by another
      // process that can write the registry: the consumer keeps what it
      // holds and its entry is put back.
      if (ProcessIsGone(RegPid(c.word))) {
        Reclaim(k, blocks);  // its entry was freed and claimed again
      } else {
        RestoreForged(k, word);
      }
    }
    if (!c.accepted) {
      if (state == kRegRequested) {
        if (accepting) {
          Accept(k, word, blocks, slots);
        } else {
          requests_waiting_ = true;  // for the next Poll / AcceptConsumers
        }
      }
      if (state == kRegClosed) Forget(k, word);  // closed before we saw it
      continue;
    }
    // Whether it closed is read from its own segment, which only it writes
    // (it says so there before it closes its entry; acquire: partner of
    // that release store, after its last cursor store). An entry closed
    // over an open segment was closed by another process.
    const bool own_closed = c.header->state.load(std::memory_order_acquire) != kConsumerOpen;
    if (same && state == kRegClosed && !own_closed) RestoreForged(k, word);
    if (own_closed && !c.closed) {
      c.closed = true;
      StopCounting(k);
      ReleaseUnread(k, c.Cursor(std::memory_order_acquire), blocks, slots);
    }
    if (c.closed) {
      // Acquire: partner of the release store of kConsumerDone, made after
      // its last return was queued.
      if (c.header->state.load(std::memory_order_acquire) == kConsumerDone) {
        DrainReturns(k, blocks);
        blocks.DropHolderEverywhere(k);  // nothing, for a consumer that returned what it held
        ++counts_.consumers_finished;
        Forget(k, c.word);
      }
    }
  }
}

void ConsumerSet::Accept(uint32_t k, uint64_t word, BlockTable& blocks, const SlotRecord& slots) {
  const std::string seg_name = SegmentName(k, word);
  auto opened = Segment::Open(seg_name, SegmentKind::kChannelConsumer,
                              SegmentOpenOptions{.prefault = true, .read_only = true});
  const ConsumerSegHeaderData* h = nullptr;
  bool ok = opened.ok() && (*opened)->data_size() >= sizeof(ConsumerSegHeaderData);
  if (ok) {
    h = reinterpret_cast<const ConsumerSegHeaderData*>((*opened)->data());
    // Acquire: partner of the consumer's release store of its magic.
    ok = h->magic.load(std::memory_order_acquire) == kConsumerSegMagic &&
         h->layout_version == kChannelLayoutVersion && h->index == k &&
         h->registration == RegWithState(word, kRegClaimed) &&
         h->return_capacity == geometry_.return_capacity &&
         h->fixed_count == geometry_.fixed_count &&
         (*opened)->data_size() >=
             ConsumerSegmentBytes(geometry_.return_capacity, geometry_.fixed_count);
  }
  if (!ok) {
    // Not a consumer we can serve (its segment is missing or malformed):
    // free the entry; the consumer sees its registration gone.
    Forget(k, word);
    return;
  }
  ConsumerState& c = consumers_[k];
  c.accepted = true;
  c.word = word;
  c.segment = std::move(*opened);
  c.header = h;
  c.returns = reinterpret_cast<const std::atomic<uint64_t>*>(c.segment->data() +
                                                             sizeof(ConsumerSegHeaderData));
  c.holds = reinterpret_cast<const std::atomic<uint32_t>*>(
      c.segment->data() + sizeof(ConsumerSegHeaderData) + uint64_t{geometry_.return_capacity} * 8);
  c.return_capacity = geometry_.return_capacity;
  c.return_log2 = static_cast<uint32_t>(__builtin_ctz(geometry_.return_capacity));
  c.returns_read = 0;
  c.last_woken = 0;
  c.dropped = 0;
  // Line 0 is immutable once the magic is stored (acquired above): copied
  // once, as the geometry is, never read from the segment again.
  c.token = h->token;
  const uint64_t next = slots.next_sequence;
  uint64_t start = next;
  if (h->from_oldest != 0) {
    // The oldest message from which on every body is still held by its
    // slot: exact, nothing from there on can be gone.
    const uint64_t oldest = next > geometry_.slot_count ? next - geometry_.slot_count : 0;
    while (start > oldest) {
      const uint32_t d = slots.slot_block[(start - 1) & geometry_.mask];
      const auto* slot = reinterpret_cast<const ChannelSlotData*>(
          channel_data_ + geometry_.slots_offset +
          ((start - 1) & geometry_.mask) * geometry_.slot_size);
      const bool has_body = slot->block.load(std::memory_order_relaxed) != 0;
      // A fixed block the slot still names carries its message: the
      // producer clears the slot's entry when it frees the block (and does
      // not free it before this consumer, counted from now on, passes it).
      const bool intact = d != kNoBlock && (d >= geometry_.block_count || blocks[d].slot_ref);
      if (has_body && !intact) break;
      --start;
    }
    for (uint64_t m = start; m < next; ++m) {
      const uint32_t d = slots.slot_block[m & geometry_.mask];
      if (d != kNoBlock && d < geometry_.block_count && blocks[d].slot_ref) {
        SetBit(blocks[d].holders, k);
      }
    }
  }
  c.start = start;
  controls_[k].returns_read.store(0, std::memory_order_relaxed);
  controls_[k].start.store(start, std::memory_order_relaxed);
  // Release: publishes `start`; partner of the consumer's acquire load.
  controls_[k].accepted.store(word, std::memory_order_release);
  SetBit(counted_, k);
  SetBit(accepted_, k);
  ListsChanged();
  hot_->min_cursor = std::min(hot_->min_cursor, start);
  ++counts_.consumers_accepted;
}

void ConsumerSet::ListsChanged() {
  ListFrom(counted_, &counted_list_);
  ListFrom(accepted_, &accepted_list_);
  ProducerHot& hot = *hot_;
  hot.counted_count = static_cast<uint32_t>(counted_list_.size());
  for (uint32_t j = 0; j < hot.counted_count; ++j) {
    hot.counted_waiting[j] = &consumers_[counted_list_[j]].header->waiting;
  }
  hot.accepted_count = static_cast<uint32_t>(accepted_list_.size());
  for (uint32_t j = 0; j < hot.accepted_count; ++j) {
    hot.accepted_holds[j] = consumers_[accepted_list_[j]].holds;
  }
}

void ConsumerSet::StopCounting(uint32_t k) {
  if (TestBit(counted_, k)) {
    ClearBit(counted_, k);
    ListsChanged();
  }
}

void ConsumerSet::ReleaseUnread(uint32_t k, uint64_t cursor, BlockTable& blocks,
                                const SlotRecord& slots) {
  const uint64_t next = slots.next_sequence;
  const uint64_t first =
      std::max(cursor, next > geometry_.slot_count ? next - geometry_.slot_count : uint64_t{0});
  for (uint64_t m = first; m < next; ++m) {
    const uint32_t d = slots.slot_block[m & geometry_.mask];
    if (d != kNoBlock && d < geometry_.block_count) blocks.DropHolder(d, k);
  }
}

void ConsumerSet::Forget(uint32_t k, uint64_t word) {
  ConsumerState& c = consumers_[k];
  const std::string seg_name = SegmentName(k, word);
  c = ConsumerState{};
  ClearBit(accepted_, k);
  ListsChanged();
  controls_[k].accepted.store(0, std::memory_order_release);
  (void)Segment::Remove(seg_name);  // KeyError if never created: fine
  // Release: partner of the acquire CAS of the next claim of the entry.
  uint64_t expected = regs_[k].word.load(std::memory_order_relaxed);
  if (RegPid(expected) == RegPid(word) && RegTag(expected) == RegTag(word)) {
    regs_[k].word.compare_exchange_strong(expected, 0, std::memory_order_release,
                                          std::memory_order_relaxed);
  }
}

void ConsumerSet::RestoreForged(uint32_t k, uint64_t seen) {
  // Release: as the consumer's own stores of its entry.
  regs_[k].word.compare_exchange_strong(seen, consumers_[k].word, std::memory_order_release,
                                        std::memory_order_relaxed);
}

void ConsumerSet::Reclaim(uint32_t k, BlockTable& blocks) {
  ConsumerState& c = consumers_[k];
  const uint64_t word = c.word;
  if (c.accepted) {
    StopCounting(k);
    blocks.DropHolderEverywhere(k);
    ++counts_.consumers_reclaimed;
  }
  Forget(k, word);
}

void ConsumerSet::ReapDead(BlockTable& blocks) {
  for (uint32_t k = 0; k < geometry_.max_consumers; ++k) {
    const uint64_t word = regs_[k].word.load(std::memory_order_acquire);
    if (word == 0 && !consumers_[k].accepted) continue;
    const uint32_t pid = consumers_[k].accepted ? RegPid(consumers_[k].word) : RegPid(word);
    if (pid != 0 && ProcessIsGone(pid)) {
      if (consumers_[k].accepted) {
        Reclaim(k, blocks);
      } else {
        Forget(k, word);
      }
    }
  }
  next_liveness_ = std::chrono::steady_clock::now() + liveness_interval_;
}

uint32_t ConsumerSet::Slowest() const {
  uint32_t who = geometry_.max_consumers;
  uint64_t least = UINT64_MAX;
  for (uint32_t k = 0; k < geometry_.max_consumers; ++k) {
    if (!TestBit(counted_, k)) continue;
    const uint64_t c = consumers_[k].Cursor(std::memory_order_acquire);
    if (c < least) {
      least = c;
      who = k;
    }
  }
  return who;
}

std::vector<ChannelConsumerInfo> ConsumerSet::Describe(const BlockTable& blocks) const {
  std::vector<ChannelConsumerInfo> out;
  Describe(blocks, &out);
  return out;
}

void ConsumerSet::Describe(const BlockTable& blocks, std::vector<ChannelConsumerInfo>* into) const {
  std::vector<ChannelConsumerInfo>& out = *into;
  out.clear();
  // What each consumer holds, from one pass over the block table (a table
  // of up to 65,536 descriptors, one line each, read once per report).
  std::array<uint64_t, kMaxConsumers> held;
  std::array<uint64_t, kMaxConsumers> held_bytes;
  blocks.HeldByEach(std::span(held).first(geometry_.max_consumers),
                    std::span(held_bytes).first(geometry_.max_consumers));
  for (uint32_t k = 0; k < geometry_.max_consumers; ++k) {
    const ConsumerState& c = consumers_[k];
    if (!c.accepted) {
      // Acquire: partner of the consumer's release CAS of its entry.
      const uint64_t word = regs_[k].word.load(std::memory_order_acquire);
      if (RegState(word) != kRegRequested) continue;
      // Whoever saw this request here (e.g. a producer waiting for its
      // consumers before its first publish) expects the next publish to
      // accept it, though its consumer may not have bumped `changes` yet.
      hot_->registry_seen = kRegistryUnseen;
      ChannelConsumerInfo waiting;
      waiting.index = k;
      waiting.pid = RegPid(word);
      waiting.accepted = false;
      out.push_back(waiting);
      continue;
    }
    ChannelConsumerInfo info;
    info.index = k;
    info.pid = RegPid(c.word);
    info.token = c.token;
    info.closed = c.closed;
    info.cursor = c.Cursor(std::memory_order_acquire);
    info.held_blocks = held[k];
    info.held_bytes = held_bytes[k];
    info.dropped = c.dropped;
    out.push_back(info);
  }
}

void ConsumerSet::RemoveSegments() const {
  for (uint32_t k = 0; k < geometry_.max_consumers; ++k) {
    if (consumers_[k].segment != nullptr) (void)Segment::Remove(consumers_[k].segment->name());
    const uint64_t word = regs_[k].word.load(std::memory_order_acquire);
    if (word != 0) (void)Segment::Remove(SegmentName(k, word));
  }
}

}  // namespace alkaid::shm::internal
