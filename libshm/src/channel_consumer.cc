// The consumer side of a channel: reads the producer's segment through a
// read-only mapping and writes only its own segment (cursor, wait
// announcement, close state, returns) and, at open and close, its
// registration entry. This file is its data path (TryReceive and the
// waits); attach and close are consumer_attach.cc.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <string>

#include "alkaid/common/process.h"
#include "alkaid/shm/channel.h"
#include "channel_internal.h"
#include "channel_layout_internal.h"
#include "consumer_returns_internal.h"
#include "consumer_state_internal.h"
#include "doorbell_internal.h"
#include "futex_internal.h"
#include "wait_internal.h"

namespace alkaid::shm {

using internal::ChannelSlotData;
using Clock = std::chrono::steady_clock;

void internal::WakeRoomWaiter(std::atomic<uint64_t>* cursor) {
  internal::FutexWakeAll(reinterpret_cast<std::atomic<uint32_t>*>(cursor));
}

// TryReceiveHot's first body into a message (or one of another consumer's).
void ChannelConsumer::AdoptReturns(ChannelBlock* body) { body->returns_ = impl_->returns; }

// TryReceive's steps. ReadSlot and Deliver run once per message and are
// forced inline: as calls (ReadSlot, with its error paths, is too large for
// g++ to inline by itself) they cost some 60 instructions a message. Each
// takes the state TryReceive holds, so that none reloads impl_.

// What ReadSlot copied out of a slot. The fields read from the slot have
// no initializers: ReadSlot writes each first (zeroing them too cost the
// receive a few instructions a message).
struct ChannelConsumer::SlotCopy {
  uint64_t offset;
  uint64_t length;
  uint64_t block;  // generation << 32 | descriptor; 0: no body
  uint64_t user;
  uint32_t size;  // inline bytes (copied into the message's words)
  uint32_t shape;
  uint32_t extension;                       // 0: the body is in the channel segment's arena
  const std::byte* in_extension = nullptr;  // else: where, once checked
  std::atomic<uint32_t>* hold = nullptr;    // a fixed block: our hold count of it, taken
};

// A body in an extension: maps it the first time, then checks the range
// against the mapping. Off the inlined path: a message in the channel
// segment's arena never comes here.
// Takes the copy by value and says where through `*where`, so that the
// caller's copy never has its address taken and stays in registers.
[[gnu::noinline]] Status ChannelConsumer::CheckExtension(Impl& state, uint64_t c,
                                                         const SlotCopy copy_value,
                                                         const std::byte** where) {
  const SlotCopy* copy = &copy_value;
  const uint64_t arena = copy->offset >> internal::kExtensionShift;
  const uint64_t local = copy->offset & internal::kExtensionOffsetMask;
  if (arena == 0 || arena > state.geometry.extension_count) {
    return Status::Invalid("channel '", state.name, "': message ", c, " names extension ",
                           copy->extension, " in entry ", arena - 1, ", outside the table of ",
                           state.geometry.extension_count);
  }
  const auto k = static_cast<uint32_t>(arena - 1);
  if (state.views[k].id != copy->extension) {
    ALKAID_RETURN_NOT_OK(state.MapExtension(c, k, copy->extension));
  }
  const Impl::ExtensionView& view = state.views[k];
  if (local % 64 != 0 || local > view.size || copy->length > view.size - local) {
    return Status::Invalid("channel '", state.name, "': message ", c, " names a body of ",
                           copy->length, " bytes at offset ", local, " of extension ",
                           copy->extension, ", outside its ", view.size, " bytes");
  }
  *where = view.base + local;
  return Status::OK();
}

// ReadSlot's and TryReceive's errors, out of line: their formatting kept
// out of the receive's frame (as calls inlined there, their arguments' set-up
// made the frame save more registers).
[[gnu::noinline, gnu::cold]] static Status TooManyInlineBytes(const ChannelConsumer::Impl& state,
                                                              uint64_t c, uint32_t size) {
  return Status::Invalid("channel '", state.name, "': message ", c, " has ", size,
                         " inline bytes, more than the capacity ", state.geometry.inline_capacity);
}

[[gnu::noinline, gnu::cold]] static Status BadFixedBlock(const ChannelConsumer::Impl& state,
                                                         uint64_t c, uint32_t i, uint64_t offset,
                                                         uint64_t length, uint32_t extension) {
  return Status::Invalid("channel '", state.name, "': message ", c, " names fixed block ", i,
                         " at offset ", offset, " (", length, " bytes, extension ", extension,
                         "); the channel has ", state.geometry.fixed_count, " of ",
                         state.geometry.fixed_size, " bytes from offset ",
                         state.geometry.fixed_offset);
}

[[gnu::noinline, gnu::cold]] static Status BadDescriptor(const ChannelConsumer::Impl& state,
                                                         uint64_t c, uint32_t descriptor,
                                                         uint32_t generation) {
  return Status::Invalid("channel '", state.name, "': message ", c, " names descriptor ",
                         descriptor, " of generation ", generation, " (the channel has ",
                         state.geometry.block_count, " descriptors)");
}

[[gnu::noinline, gnu::cold]] static Status BadArenaRange(const ChannelConsumer::Impl& state,
                                                         uint64_t c, uint64_t offset,
                                                         uint64_t length, uint32_t descriptor) {
  return Status::Invalid("channel '", state.name, "': message ", c, " names a body of ", length,
                         " bytes at offset ", offset, " (descriptor ", descriptor,
                         "), outside the arena [", state.geometry.arena_offset, ", ",
                         state.geometry.arena_offset + state.geometry.arena_size, ")");
}

[[gnu::noinline, gnu::cold]] static Status ClosedError(const ChannelConsumer::Impl& state) {
  return Status::Invalid("consumer of channel '", state.name, "' is closed");
}

// Message c's slot showed its committed sequence `seq` (2c+2): copies it
// under that sequence (the seqlock reader's half), checks it, and claims it
// by moving our cursor past it. True: the copy is message c, ours to
// deliver. False: the producer overwrote it meanwhile (kDropOldest; counted
// in torn_reads_ or late_laps_): the caller skips ahead; or, with
// `*problem` set (Invalid), the slot names bytes outside the arena (the
// cursor moves past it; its block is never returned).
[[gnu::always_inline]] inline bool ChannelConsumer::ReadSlot(Impl& state, uint64_t c,
                                                             const ChannelSlotData* slot,
                                                             uint64_t seq, ChannelMessage* out,
                                                             SlotCopy* copy, Status* problem) {
  copy->offset = slot->body_offset.load(std::memory_order_relaxed);
  copy->length = slot->body_length.load(std::memory_order_relaxed);
  copy->block = slot->block.load(std::memory_order_relaxed);
  copy->size = slot->payload_size.load(std::memory_order_relaxed);
  copy->shape = slot->shape.load(std::memory_order_relaxed);
  copy->user = slot->user.load(std::memory_order_relaxed);
  copy->extension = slot->extension.load(std::memory_order_relaxed);
  // Straight into the message, as the inline words: a torn read leaves it
  // to the next read, which rewrites it before it is delivered.
  out->publish_ns_ = slot->publish_ns.load(std::memory_order_relaxed);
  const uint32_t size = copy->size;
  if (size <= state.geometry.inline_capacity && size > 0) {
    const auto* words = reinterpret_cast<const std::atomic<uint64_t>*>(slot + 1);
    const uint32_t nwords = (size + 7) / 8;
    if (out->words_.size() < nwords) out->words_.resize(nwords);
    for (uint32_t i = 0; i < nwords; ++i) {
      out->words_[i] = words[i].load(std::memory_order_relaxed);
    }
  }
  // Acquire fence: partner of the producer's release fence after its odd
  // store; if anything above came from a newer write, the re-check sees
  // the change (the seqlock reader's half).
  std::atomic_thread_fence(std::memory_order_acquire);
  if (slot->sequence.load(std::memory_order_relaxed) != seq) {
    ++torn_reads_;
    return false;
  }
  const uint64_t offset = copy->offset;
  const uint64_t length = copy->length;
  const uint64_t block = copy->block;
  const uint32_t descriptor = static_cast<uint32_t>(block);
  const uint32_t generation = static_cast<uint32_t>(block >> 32);
  // Everything from shared memory is checked before use: a slot naming
  // bytes outside the arena is skipped (and its block never returned).
  if (size > state.geometry.inline_capacity) {
    *problem = TooManyInlineBytes(state, c, size);
  } else if (block != 0 && (descriptor & internal::kFixedBlockFlag) != 0) {
    // A fixed block: exactly where block i lies, in the channel segment.
    const uint32_t i = descriptor & ~internal::kFixedBlockFlag;
    if (i >= state.geometry.fixed_count || copy->extension != 0 ||
        offset != state.geometry.FixedBlockOffset(i) || length > state.geometry.fixed_size) {
      *problem = BadFixedBlock(state, c, i, offset, length, copy->extension);
    } else {
      copy->hold = state.holds + hot_.hold_index[i];
    }
  } else if (block != 0 && (descriptor >= state.geometry.block_count || generation == 0)) {
    *problem = BadDescriptor(state, c, descriptor, generation);
  } else if (block != 0 && copy->extension != 0) {
    const std::byte* where = nullptr;
    *problem = CheckExtension(state, c, *copy, &where);
    copy->in_extension = where;
  } else if (block != 0 &&
             (offset < state.geometry.arena_offset ||
              offset > state.geometry.arena_offset + state.geometry.arena_size ||
              (offset - state.geometry.arena_offset) % 64 != 0 ||
              length > state.geometry.arena_offset + state.geometry.arena_size - offset)) {
    *problem = BadArenaRange(state, c, offset, length, descriptor);
  }
  if (!problem->ok()) {
    hot_.cursor = c + 1;
    state.StoreCursor(hot_.cursor);
    return false;
  }
  // A fixed block is held from here, before our cursor passes its message.
  if (copy->hold != nullptr) {
    if (state.drop) {
      // seq_cst: the first of the Dekker trio below.
      copy->hold->fetch_add(1, std::memory_order_seq_cst);
    } else {
      // kBlockProducer: a load and a store, no locked instruction. No other
      // thread changes this count now: its last decrement (for the block's
      // previous message) happened before the producer saw the count at 0
      // and lent the block again, which happened before our acquire load of
      // this message's sequence. The cursor store that passes this message
      // (release) publishes the increment to the producer, which looks at
      // the count only after it saw that cursor (acquire). A producer that
      // lends a held block again garbles only its own count.
      copy->hold->store(copy->hold->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
  }
  if (!state.drop) return true;  // the cursor moves in Deliver
  state.StoreCursor(c + 1);
  if (slot->sequence.load(std::memory_order_seq_cst) != seq) {
    // Lapped after we read a consistent slot: the producer may count the
    // block as ours (it saw our cursor, or our hold) or not; giving it back
    // is right either way (a return it does not expect is ignored).
    if (block != 0)
      ChannelBlock::Returns::LetGo(state.returns.get(), descriptor, generation, copy->hold);
    ++late_laps_;
    return false;
  }
  return true;
}

// The producer overwrote messages we had not read (kDropOldest): goes to
// the oldest that may still be intact and counts what was skipped.
//
// Our cursor decides who gives back a lapped message's block: the producer,
// as it overwrites message m, clears our claim on m's block if our cursor is
// at or below m, and leaves it to us (we read m) if it is past. So we move
// past a message we did not read only once its overwrite is finished:
// every message below write_sequence - slot_count was overwritten by a
// message already published (the acquire load of write_sequence makes the
// producer's look at our cursor happen before our store). Message `c`
// itself may be in the middle of its overwrite (the producer stopped
// between its odd store and its look at the cursors): then we stay (false:
// nothing to deliver yet, the caller tries again), or the producer could
// see our cursor past c and keep our claim on its block for ever.
//
// The oldest intact message is also the slot the producer writes next: if
// it laps us again at once, it publishes faster than we read, and each
// further lap in a row (`attempt`, from 0) makes us skip more intact ones
// (1, 2, 4... up to half the slots), or a consumer that lands there could
// be lapped at every try. Those are skipped as if read and dropped at once:
// each claimed by ReadSlot and its block given back.
inline bool ChannelConsumer::SkipLapped(Impl& state, uint64_t c, uint32_t attempt,
                                        uint64_t* write_at_first_lap, ChannelMessage* scratch,
                                        Status* problem) {
  // Acquire: partner of the producer's store of write_sequence.
  const uint64_t w = state.header->write_sequence.load(std::memory_order_acquire);
  if (attempt == 0) *write_at_first_lap = w;
  const uint64_t slots = state.geometry.slot_count;
  const uint64_t overwritten = w >= slots ? w - slots : 0;
  if (overwritten <= c) return false;
  lost_ += overwritten - c;
  pending_lost_ += overwritten - c;
  hot_.cursor = overwritten;
  state.StoreCursor(overwritten);
  const uint64_t room =
      attempt == 0 ? 0 : std::min(uint64_t{1} << std::min(attempt - 1, 62u), slots / 2);
  for (uint64_t m = overwritten; m < overwritten + room; ++m) {
    const ChannelSlotData* slot = state.Slot(m);
    const uint64_t seq = slot->sequence.load(std::memory_order_acquire);
    if (seq != 2 * m + 2) break;  // lapped already, or not written yet
    SlotCopy copy;
    if (!ReadSlot(state, m, slot, seq, scratch, &copy, problem)) break;
    if (copy.block != 0) {
      ChannelBlock::Returns::LetGo(state.returns.get(), static_cast<uint32_t>(copy.block),
                                   static_cast<uint32_t>(copy.block >> 32), copy.hold);
    }
    ++lost_;
    ++pending_lost_;
    hot_.cursor = m + 1;
  }
  return true;
}

// Hands message c (ReadSlot's copy, claimed) to `out`. The body `out` held
// goes back; the new one takes its place. The message keeps its reference
// to our return queue across receives.
[[gnu::always_inline]] inline void ChannelConsumer::Deliver(Impl& state, uint64_t c,
                                                            const SlotCopy& copy,
                                                            ChannelMessage* out) {
  hot_.cursor = c + 1;
  // kBlockProducer: our cursor is stored once we caught up (the next slot
  // not committed yet) or flush_every messages after the last store, so
  // that a consumer behind a fast producer pays one store (and its fence)
  // per flush_every messages rather than per message.
  if (!state.drop &&
      (hot_.cursor - hot_.stored_cursor >= hot_.flush_every ||
       state.Slot(hot_.cursor)->sequence.load(std::memory_order_relaxed) != 2 * hot_.cursor + 2)) {
    state.StoreCursor(hot_.cursor);
  }
  ChannelBlock& body = out->body_;
  if (body.held_) {
    body.Release();
  }
  if (copy.block != 0) {
    if (body.returns_ != state.returns) body.returns_ = state.returns;
    body.data_ = {copy.extension == 0 ? state.data + copy.offset : copy.in_extension,
                  static_cast<std::size_t>(copy.length)};
    body.hold_ = copy.hold;
    body.descriptor_ = static_cast<uint32_t>(copy.block);
    body.generation_ = static_cast<uint32_t>(copy.block >> 32);
    body.held_ = true;
  } else {
    body.data_ = {};
  }
  out->sequence_ = c;
  out->payload_size_ = copy.size;
  out->shape_ = copy.shape;
  out->user_ = copy.user;
  out->body_offset_ = copy.offset;
  out->lost_before_ = pending_lost_;
  pending_lost_ = 0;
}

// TryReceive found no message committed at `c`: the end of the stream,
// or what is looked at when idle (extensions released, the registration).
// Out of line: its errors' formatting kept out of the receive's frame.
[[gnu::noinline]] static Status Idle(ChannelConsumer::Impl& state, uint64_t c) {
  if (state.header->closed.load(std::memory_order_acquire) != 0 &&
      state.header->write_sequence.load(std::memory_order_acquire) <= c) {
    return Status::EndOfStream("channel '", state.name, "' closed after ", c, " messages");
  }
  // Looked at when idle only: extensions the producer released (one load
  // of a line written only when the table changes).
  if (state.header->extensions_changed.load(std::memory_order_relaxed) != state.extensions_seen) {
    state.DropReleasedExtensions();
  }
  // Looked at when idle only (one load of a line nobody writes while we
  // are registered): another process rewrote our registration.
  if (state.RegistrationLost()) {
    return Status::Invalid("channel '", state.name, "': registration ", state.index,
                           " is no longer ours (rewritten by another process)");
  }
  return Status::OK();
}

// Both TryReceive calls' body, forced inline into them.
[[gnu::always_inline]] inline Status ChannelConsumer::TryReceiveImpl(ChannelMessage* out,
                                                                     bool* got) {
  *got = false;
  Impl& state = *impl_;
  if (closed_) return ClosedError(state);
  if (!accepted_) {
    ALKAID_ASSIGN_OR_RAISE(const bool ok, Accepted());
    if (!ok) return Status::OK();
  }
  // Each lap moves us to the oldest message that may still be intact. A
  // producer that goes on publishing can lap us again and again (a consumer
  // preempted between its loads, few slots): after a bounded number of
  // tries we return with nothing yet, and the caller tries again. One that
  // stands still and still shows newer sequences in every slot than its
  // write_sequence allows is corrupt.
  uint64_t write_at_first_lap = 0;
  for (uint32_t attempt = 0; attempt <= state.geometry.slot_count + 1; ++attempt) {
    const uint64_t c = hot_.cursor;
    const ChannelSlotData* slot = state.Slot(c);
    const uint64_t want = 2 * c + 2;
    // Acquire: partner of the producer's release store of the sequence.
    const uint64_t seq = slot->sequence.load(std::memory_order_acquire);
    if (seq < want) return Idle(state, c);
    SlotCopy copy;
    Status problem;
    // Above 2c+2: lapped before we looked.
    if (seq == want && ReadSlot(state, c, slot, seq, out, &copy, &problem)) {
      Deliver(state, c, copy, out);
      *got = true;
      return Status::OK();
    }
    if (!problem.ok()) return problem;
    if (!SkipLapped(state, c, attempt, &write_at_first_lap, out, &problem)) {
      // The overwrite of message c is not finished: nothing to deliver yet.
      return Status::OK();
    }
    if (!problem.ok()) return problem;
  }
  // Acquire: partner of the producer's store of write_sequence.
  if (state.header->write_sequence.load(std::memory_order_acquire) != write_at_first_lap) {
    return Status::OK();  // lapped while the producer published on: what was skipped is counted
  }
  return Status::Invalid("channel '", state.name, "': every slot shows a newer message than ",
                         "the one this consumer skipped to (sequence ", hot_.cursor,
                         "): the channel segment is corrupt");
}

Result<bool> ChannelConsumer::TryReceive(ChannelMessage* out) {
  bool got = false;
  Status st = TryReceiveImpl(out, &got);
  if (!st.ok()) return st;
  return got;
}

Status ChannelConsumer::TryReceiveGeneral(ChannelMessage* out, bool* got) {
  return TryReceiveImpl(out, got);
}

Status ChannelConsumer::Receive(ChannelMessage* out, std::chrono::nanoseconds timeout) {
  ALKAID_ASSIGN_OR_RAISE(bool got, TryReceive(out));
  if (got) return Status::OK();
  const auto deadline = internal::DeadlineAfter(timeout);
  ALKAID_RETURN_NOT_OK(WaitForData(deadline));
  while (true) {
    ALKAID_ASSIGN_OR_RAISE(got, TryReceive(out));
    if (got) return Status::OK();
    if (Clock::now() >= deadline) {
      return Status::TimedOut(
          "channel '", impl_->name, "': no message within ",
          std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count(), " ms");
    }
    ALKAID_RETURN_NOT_OK(WaitForData(deadline));
  }
}

// Waits until a message may be there (or the deadline): spins, then sleeps
// on the channel's futex after announcing it in our own segment.
Status ChannelConsumer::WaitForData(Clock::time_point deadline) {
  Impl& state = *impl_;
  const WaitMode mode = state.options.wait_mode;
  auto there = [&] {
    return state.header->write_sequence.load(std::memory_order_seq_cst) > hot_.cursor ||
           state.header->closed.load(std::memory_order_acquire) != 0;
  };
  if (mode != WaitMode::kBlock) {
    const uint32_t spins = mode == WaitMode::kBusyPoll ? 4096 : state.options.spin_iterations;
    for (uint32_t i = 0; i < spins; ++i) {
      if (there()) return Status::OK();
      internal::CpuRelax();
    }
    if (mode == WaitMode::kBusyPoll) return Status::OK();  // the caller looks again
  }
  const auto now = Clock::now();
  if (now >= deadline) return Status::OK();
  // Acquire: partner of the producer's release increment before waking.
  const uint32_t seen = state.header->data_futex.load(std::memory_order_acquire);
  // A futex sleep: no doorbell for this episode (relaxed, as in ArmDoorbell).
  if (state.doorbell.is_open()) state.own->doorbell.store(0, std::memory_order_relaxed);
  state.episode += 2;
  // seq_cst: the Dekker pair with the producer's seq_cst store of
  // write_sequence before its seq_cst load of this word (WakeSleepers).
  state.own->waiting.store(state.episode | 1, std::memory_order_seq_cst);
  if (!there() && accepted_) {
    // Sleep in slices, so that a producer that died is noticed.
    const auto slice = std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(100));
    internal::FutexWait(const_cast<std::atomic<uint32_t>*>(&state.header->data_futex), seen, slice);
  } else if (!accepted_) {
    // Not accepted yet: the producer accepts us at its next publish and wakes
    // us then only if it counts us, which it does from that publish on.
    internal::FutexWait(const_cast<std::atomic<uint32_t>*>(&state.header->data_futex), seen,
                        std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(1)));
  }
  state.own->waiting.store(state.episode, std::memory_order_relaxed);
  if (!there() && ProcessIsGone(state.producer_pid)) {
    return Status::IOError("channel '", state.name, "': its producer (pid ", state.producer_pid,
                           ") is gone");
  }
  return Status::OK();
}

Result<int> ChannelConsumer::DoorbellFd() {
  Impl& state = *impl_;
  if (!state.doorbell.is_open() && !state.doorbell.Open()) {
    return Status::FromErrno(errno, "channel '" + state.name + "': doorbell pipe");
  }
  return state.doorbell.read_fd();
}

Result<bool> ChannelConsumer::ArmDoorbell() {
  Impl& state = *impl_;
  if (!state.doorbell.is_open()) {
    return Status::Invalid("channel '", state.name, "': no doorbell to arm (DoorbellFd makes it)");
  }
  state.doorbell.Drain();
  // Relaxed: the seq_cst store of the odd episode below publishes it. It
  // tells the producer to sound the doorbell for this episode; WaitForData
  // clears it for a futex sleep.
  state.own->doorbell.store(static_cast<uint32_t>(state.doorbell.write_fd()) + 1,
                            std::memory_order_relaxed);
  state.episode += 2;
  // seq_cst: the Dekker pair with the producer's seq_cst store of
  // write_sequence before its seq_cst load of this word (WakeSleepers), as
  // in WaitForData: either it sees the odd episode and sounds the bell, or we see its
  // message below.
  state.own->waiting.store(state.episode | 1, std::memory_order_seq_cst);
  if (!accepted_) {
    // Not accepted yet, so no message is ours (our cursor is not set: the
    // producer's messages so far would all look new). A producer that
    // accepts us later does so at a publish that counts us and sounds the
    // bell armed above; one that did already set our start.
    Result<bool> accepted = Accepted();
    if (!accepted.ok()) return true;  // the next receive says why
    if (!*accepted) return false;
  }
  return state.header->write_sequence.load(std::memory_order_seq_cst) > hot_.cursor ||
         state.header->closed.load(std::memory_order_acquire) != 0;
}

}  // namespace alkaid::shm
