#pragma once

// The pieces of BatchSubscriber, each in its own file:
// - batch_subscriber.cc: receiving, the framing of a message (where its
//   metadata is: a shape id, the slot, or the region after the body), and
//   the decode cache (format::ipc::MessagePlan: a plan per shape id, and a
//   MessagePlanCache for messages without one);
// - dictionary_sync.cc: the dictionaries a subscriber holds, kept in step
//   with the producer's through dictionary messages and replays.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/ipc/message_plan.h"
#include "alkaid/format/ipc/options.h"
#include "alkaid/shm/channel.h"
#include "batch_layout_internal.h"

namespace alkaid::client::internal {

// The body of a received batch: a view of its shared block that holds the
// block (the producer does not reuse it while this lives; the block keeps
// the consumer's mappings). One allocation per message.
class BodyBuffer : public format::Buffer {
 public:
  BodyBuffer(shm::ChannelBlock block, uint64_t length) : block_(std::move(block)) {
    data_ = const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(block_.data().data()));
    size_ = static_cast<int64_t>(length);
    capacity_ = size_;
  }

 private:
  shm::ChannelBlock block_;
};

// The dictionaries of a subscriber whose schema has dictionary-encoded
// fields (docs/CLIENT.md, "Dictionaries"). The producer numbers its
// dictionary state by a generation that every message carries; the state
// held here is good ("synced") while no dictionary message was missed, and
// a replay of every current dictionary restores it after a late start or a
// gap. Batches of a generation not held are skipped and counted as lost.
class DictionarySync {
 public:
  // The schema's dictionary-encoded fields' ids.
  Status Init(const format::Schema& schema);
  // Whether the schema has dictionary-encoded fields at all.
  bool active() const { return active_; }

  // Every message, first: whether the state held survives what came
  // before it (the channel's first message, or a gap with no dictionary
  // message in it).
  void Observe(bool first_message, uint64_t sequence, uint64_t lost_before, uint16_t generation);
  // A replay ended: the replayed dictionaries (or none) are the state of
  // `generation` from now on, unless the state held was good already.
  void EndReplay(uint16_t generation);
  // A record batch of `generation`: whether its dictionaries are the ones
  // held. False counts it as undecodable.
  bool Admit(uint16_t generation);
  // A dictionary message of `generation`: applied when the state is good
  // (an error leaves it unknown until the next replay).
  Status ApplyDictionary(std::span<const std::byte> md, const std::shared_ptr<format::Buffer>& body,
                         uint16_t generation, const format::ipc::IpcReadOptions& options);
  // One replayed dictionary: collected when the state is not good.
  Status ApplyReplay(std::span<const std::byte> md, const std::shared_ptr<format::Buffer>& body,
                     const format::ipc::IpcReadOptions& options);

  // The dictionaries to decode batches with.
  const format::ipc::DictionaryMemo* memo() const { return &memo_; }
  DictionaryStats stats() const;

 private:
  // Decodes DictionaryBatch message `md` over `body` into `into`.
  static Status Apply(std::span<const std::byte> md, const std::shared_ptr<format::Buffer>& body,
                      const format::ipc::IpcReadOptions& options,
                      format::ipc::DictionaryMemo* into);

  // Dictionary-encoded fields' ids (no dictionaries), and the ids with the
  // current dictionaries.
  format::ipc::DictionaryMemo ids_;
  format::ipc::DictionaryMemo memo_;
  bool active_ = false;
  // `memo_` holds the state of generation `generation_` and no dictionary
  // message after it was missed: dictionary messages apply.
  bool synced_ = false;
  uint16_t generation_ = 0;
  // A replay being received (kReplay messages until kReplayEnd).
  bool replaying_ = false;
  format::ipc::DictionaryMemo replay_;
  uint64_t undecodable_ = 0;  // batches skipped for want of dictionaries
  uint64_t applied_ = 0;      // dictionary messages applied
  uint64_t replays_loaded_ = 0;
};

}  // namespace alkaid::client::internal

namespace alkaid::client {

struct BatchSubscriber::Impl {
  using MessagePlan = format::ipc::MessagePlan;

  format::SchemaPtr schema;
  SubscriberOptions options;
  internal::DictionarySync dictionaries;
  // Messages lost or skipped since the last batch returned.
  uint64_t pending_lost = 0;
  bool first_message = true;
  std::unique_ptr<shm::ChannelConsumer> consumer;
  shm::ChannelMessage message;
  // Private copy of shape or region metadata, reused across messages.
  std::vector<std::byte> metadata_scratch;
  // The decode cache: an exact plan per shape id (null: none yet; [0] is
  // always null), and the plans of messages without a shape id.
  std::vector<std::unique_ptr<MessagePlan>> shape_plans;
  std::unique_ptr<format::ipc::MessagePlanCache> plans;
  uint64_t plan_hits = 0;

  std::string Where() const {
    return "channel '" + consumer->name() + "' sequence " + std::to_string(message.sequence());
  }
  // `st` in the context of Where(), out of line (MakeFromPlan's error).
  Status WithWhere(const Status& st) const;

  // The body of a message for decoding: a view that holds the shared
  // block, or with Verification::kPrivateCopy a private copy (the block is
  // returned at once).
  Result<std::shared_ptr<format::Buffer>> BodyOf(shm::ChannelBlock block, uint64_t length) const;
  // The sequence and lost count of the batch the last receive returned
  // (BatchSubscriber::last_sequence, last_lost_before).
  uint64_t last_sequence = 0;
  uint64_t last_lost_before = 0;

  // Makes what the message received holds into `out`: a batch by the plan
  // of its cached shape id (the common case, in a few loads:
  // MakeFromPlan), else whatever Decode makes of it (no batch for a
  // dictionary message or a batch skipped for want of its dictionaries).
  Status Make(ReceivedBatch* out);
  // As Make, the batch alone (the Result-free receive); its way for
  // messages Decode makes.
  Status MakeBatch(format::RecordBatchPtr* out);
  Status DecodeBatchOnly(format::RecordBatchPtr* out);
  // Make's and DecodeBatchOnly's way for messages Decode makes.
  Status DecodeInto(ReceivedBatch* out);
  // The plan of the message received if it is a plain record batch of a
  // cached shape id (Make's common case), else null.
  const MessagePlan* CachedPlan();
  // The batch of the message received into `*batch`, made by `plan` (which
  // took its Message) over `block` (or a private copy of it, with
  // kPrivateCopy); with `full` (whose `batch` is `*batch`), its sequence
  // and lost count, and with `options.with_message` its body and an exact
  // plan's metadata.
  Status MakeFromPlan(const MessagePlan& plan, shm::ChannelBlock&& block,
                      format::RecordBatchPtr* batch, ReceivedBatch* full);
  // MakeFromPlan's way with Verification::kPrivateCopy.
  Status MakeCopyFromPlan(const MessagePlan& plan, shm::ChannelBlock&& block,
                          format::RecordBatchPtr* batch, std::shared_ptr<format::Buffer>* body);
  // Decodes the message received: a batch, or nothing (a dictionary
  // message, a batch skipped for want of its dictionaries).
  Result<ReceivedBatch> Decode();
  Result<ReceivedBatch> DecodeBatch(const internal::UserWord& user, std::span<const std::byte> md,
                                    shm::ChannelBlock block);
  // The next message into `message`, for the four receive calls: `*got`
  // false when none is committed and `wait` is false; with `wait`, one
  // within `deadline` (the channel's Receive, TimedOut after it).
  [[gnu::always_inline]] Status NextMessage(bool wait,
                                            std::chrono::steady_clock::time_point deadline,
                                            bool* got) {
    Status st = consumer->TryReceive(&message, got);
    if (!st.ok() || *got || !wait) return st;
    const auto left =
        std::max(std::chrono::nanoseconds(0), std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                  deadline - std::chrono::steady_clock::now()));
    ALKAID_RETURN_NOT_OK(consumer->Receive(&message, left));
    *got = true;
    return Status::OK();
  }
};

}  // namespace alkaid::client
