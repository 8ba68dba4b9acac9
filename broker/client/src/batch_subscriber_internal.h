#pragma once

// The pieces of BatchSubscriber, each in its own file:
// - batch_subscriber.cc: receiving, and the framing of a message (where its
//   metadata is: a shape id, the slot, or the region after the body);
// - decode_plan.cc: the decode cache (a batch's shape, made again over the
//   next bodies with the same metadata by a format::BatchTemplate);
// - dictionary_sync.cc: the dictionaries a subscriber holds, kept in step
//   with the producer's through dictionary messages and replays.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "alkaid/client/batch_subscriber.h"
#include "alkaid/format/batch_template.h"
#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/ipc/message_template.h"
#include "alkaid/format/ipc/options.h"
#include "alkaid/format/shape_validator.h"
#include "alkaid/format/validate.h"
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

// What decoding one Message flatbuffer produced, kept so that the next
// message of the same shape is made without verifying, parsing or
// validating its metadata again: the shape of the batch (types, lengths,
// null counts, offsets, and where each buffer lies in the body) is a
// function of the metadata bytes, the body length, the schema and the read
// options, all unchanged. The plan's BatchTemplate makes the batches,
// zero-copy over each new body and, in steady state, without allocating.
//
// Safety: the bytes compared are the subscriber's private copy (the region
// metadata is copied out of shared memory first), and the shape's buffers
// were checked to lie inside the body when it was recorded.
struct DecodePlan {
  // The key: a shape id of the channel's table (0: none), or the verified
  // private copy of the metadata bytes with the body length.
  uint32_t shape_id = 0;
  std::shared_ptr<format::Buffer> metadata;
  uint64_t body_length = 0;
  std::shared_ptr<format::BatchTemplate> batches;
  // Validate must run on every batch made (its verdict reads values); with
  // `checker`, only the values it reads are read again (not with
  // validate_full, which reads them all).
  bool validate_each = true;
  std::shared_ptr<const format::ShapeValidator> checker;

  // Validates a batch the plan made, as `read` asks.
  Status Check(const format::RecordBatch& batch, const format::ipc::IpcReadOptions& read) const {
    if (!validate_each) return Status::OK();
    if (read.validate_full) return format::ValidateFull(batch);
    return checker != nullptr ? checker->Validate(batch) : format::Validate(batch);
  }

  bool Matches(std::span<const std::byte> md, uint64_t body) const {
    return shape_id == 0 && body == body_length &&
           static_cast<int64_t>(md.size()) == metadata->size() &&
           (md.empty() || std::memcmp(md.data(), metadata->data(), md.size()) == 0);
  }

  // Records `data` (a node of a batch decoded from `body`) into `shape`;
  // false if it cannot be replayed (a buffer outside the body: decompressed
  // or re-aligned copies; dictionaries).
  static bool Record(const format::ArrayData& data, const format::Buffer& body,
                     format::BatchShape* shape, uint32_t* index);
};

// A plan for batches of one structure whose numbers vary (a batch with a
// variable-width column has lengths and buffer ranges of its own nearly
// every time, so a plan keyed by the metadata's bytes never hits): the
// Message template the metadata matches (the same bytes but for the
// numbers; format::ipc::RecordBatchMessageTemplate), and how the Message's
// numbers map onto the BatchTemplate's shape. Per batch, the numbers are
// read and checked as the reader checks them (each buffer inside the body,
// each node's null count within its length, each column of the batch's
// length), the batch is made over the body and validated in full, as the
// verification mode asks (DecodeBatch validates a decoded batch alike).
//
// The layouts covered are those whose Message nodes and buffers follow the
// type's layout one for one (no dictionary, union, run-end encoding, view
// or null type); a batch whose numbers do not fit the plan (a validity
// bitmap present where the plan has none, or the reverse; a buffer not
// 8-aligned) is decoded in full.
struct VaryingPlan {
  using Message = format::ipc::RecordBatchMessageTemplate;
  Message message;
  std::shared_ptr<format::BatchTemplate> batches;
  // Per Message node (pre-order): its node in the shape, and whether the
  // shape has its validity bitmap (1), has none (0: the null count must
  // stay 0) or its layout has none (-1: so must the null count).
  std::vector<uint32_t> node_of;
  std::vector<int8_t> validity;
  // Per Message buffer: its index among the shape's present buffers (the
  // order of BatchTemplate::Numbers::buffers), or -1 (an absent bitmap).
  std::vector<int32_t> slot_of;
  // The Message node of each column.
  std::vector<uint32_t> roots;
  // Per batch: the numbers read, and the template's.
  std::vector<Message::Node> read_nodes;
  std::vector<Message::Range> read_buffers;
  std::vector<format::BatchTemplate::Numbers::Node> nodes;
  std::vector<format::BatchShape::Node::BufferRange> buffers;

  explicit VaryingPlan(Message m) : message(std::move(m)) {}

  // A plan from `batch` (decoded in full from `body` and `metadata`, a
  // verified Message the template came from); null if it cannot be one.
  static std::unique_ptr<VaryingPlan> Make(const format::RecordBatch& batch,
                                           const format::Buffer& body, Message message,
                                           const format::SchemaPtr& schema);
  // Whether every field of `schema` has a layout a plan covers.
  static bool Covers(const format::Schema& schema);
  // Reads the numbers of `md` (a Message the template matches) into
  // `numbers`; false when they do not fit the plan, or would not pass the
  // reader's checks (the Message is then decoded in full, which says why).
  bool Take(const uint8_t* md, uint64_t body_length, format::BatchTemplate::Numbers* numbers);
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
  using DecodePlan = internal::DecodePlan;

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
  // The decode cache: plans by shape id (shape_plans[id] - 1 indexes
  // `plans`, 0: none) and, for messages without a shape id, the last
  // kShapeCacheEntries distinct ones decoded in full that came at least
  // twice (a batch with variable-width columns has metadata of its own
  // nearly every time: a plan for it would be made and never used).
  std::vector<DecodePlan> plans;
  std::vector<uint32_t> shape_plans;
  size_t next_victim = 0;  // round-robin replacement of the latter
  // The metadata of the last kShapeCacheEntries messages without a shape id
  // that no plan matched, to tell which come again.
  std::vector<std::shared_ptr<format::Buffer>> recent_metadata;
  size_t next_recent = 0;
  uint64_t plan_hits = 0;
  // Plans of varying numbers (internal::VaryingPlan), for messages without
  // a shape id: the last kShapeCacheEntries structures decoded in full
  // twice; the structure of the last such message decoded in full, to tell
  // when one comes again; whether the schema's layouts allow such plans.
  std::vector<std::unique_ptr<internal::VaryingPlan>> varying;
  size_t next_varying = 0;
  std::optional<format::ipc::RecordBatchMessageTemplate> last_structure;
  bool varying_possible = false;

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
  const DecodePlan* CachedPlan();
  // The batch of the message received into `*batch`, made by `plan` over
  // `block` (or a private copy of it, with kPrivateCopy) and validated as
  // the plan says; with `full` (whose `batch` is `*batch`), its sequence
  // and lost count, and with `options.with_message` its body and metadata.
  Status MakeFromPlan(const DecodePlan& plan, shm::ChannelBlock&& block,
                      format::RecordBatchPtr* batch, ReceivedBatch* full);
  // MakeFromPlan's way with Verification::kPrivateCopy.
  Status MakeCopyFromPlan(const DecodePlan& plan, shm::ChannelBlock&& block,
                          format::RecordBatchPtr* batch, std::shared_ptr<format::Buffer>* body);
  // Decodes the message received: a batch, or nothing (a dictionary
  // message, a batch skipped for want of its dictionaries).
  Result<ReceivedBatch> Decode();
  Result<ReceivedBatch> DecodeBatch(const internal::UserWord& user, std::span<const std::byte> md,
                                    shm::ChannelBlock block);
  // Makes the batch of the message received (metadata `md`, without a
  // shape id) by a varying plan it matches: true, or its error; false
  // leaves it to a full decode (`block` untouched).
  Result<bool> TryVarying(const internal::UserWord& user, std::span<const std::byte> md,
                          shm::ChannelBlock* block, ReceivedBatch* out);
  // After a full decode of `batch` (metadata `md`, without a shape id):
  // makes a varying plan once its structure came twice in a row.
  void RememberVarying(const format::RecordBatch& batch, const format::Buffer& body,
                       std::span<const std::byte> md);
  // The cached plan of the message received, or null.
  const DecodePlan* FindPlan(std::span<const std::byte> md, uint64_t body_length) const;
  // True if `metadata` (of a message without a shape id that no plan
  // matched) came recently; otherwise notes it and returns false.
  bool SeenBefore(const std::shared_ptr<format::Buffer>& metadata);
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
  // Remembers the shape of `batch`, decoded in full from `body`.
  void Remember(const format::RecordBatch& batch, const format::Buffer& body,
                std::shared_ptr<format::Buffer> metadata, uint64_t body_length);
};

}  // namespace alkaid::client
