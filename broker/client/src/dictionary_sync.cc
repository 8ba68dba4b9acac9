// The dictionaries of a BatchSubscriber (batch_subscriber_internal.h).

#include <string_view>

#include "alkaid/format/ipc/message.h"
#include "alkaid/format/ipc/reader.h"
#include "batch_subscriber_internal.h"

namespace alkaid::client::internal {

Status DictionarySync::Init(const format::Schema& schema) {
  ALKAID_RETURN_NOT_OK(ids_.AssignIds(schema));
  memo_ = ids_;
  active_ = ids_.num_fields() > 0;
  return Status::OK();
}

void DictionarySync::Observe(bool first_message, uint64_t sequence, uint64_t lost_before,
                             uint16_t generation) {
  if (!active_) return;
  if (first_message) {
    // From the channel's first message on, the empty state is the state.
    synced_ = sequence == 0;
    generation_ = 0;
  } else if (lost_before > 0 && synced_) {
    // The state stays good if no dictionary message was among the lost:
    // the generation moves by one per dictionary message, and fewer than
    // 2^15 were lost.
    synced_ = lost_before <= UserWord::kGenerationMask && generation == generation_;
  }
}

void DictionarySync::EndReplay(uint16_t generation) {
  if (active_ && !synced_) {
    memo_ = replaying_ ? std::move(replay_) : ids_;
    generation_ = generation;
    synced_ = true;
    ++replays_loaded_;
  }
  replaying_ = false;
}

bool DictionarySync::Admit(uint16_t generation) {
  if (!active_ || (synced_ && generation == generation_)) return true;
  ++undecodable_;
  return false;
}

Status DictionarySync::ApplyDictionary(std::span<const std::byte> md,
                                       const std::shared_ptr<format::Buffer>& body,
                                       uint16_t generation,
                                       const format::ipc::IpcReadOptions& options) {
  if (!synced_) return Status::OK();  // a replay follows
  Status st = Apply(md, body, options, &memo_);
  if (!st.ok()) {
    // The state is unknown from here: the next replay restores it.
    synced_ = false;
    return st;
  }
  generation_ = generation;
  ++applied_;
  return Status::OK();
}

Status DictionarySync::ApplyReplay(std::span<const std::byte> md,
                                   const std::shared_ptr<format::Buffer>& body,
                                   const format::ipc::IpcReadOptions& options) {
  if (synced_) return Status::OK();  // not for us
  if (!replaying_) {
    replay_ = ids_;
    replaying_ = true;
  }
  Status st = Apply(md, body, options, &replay_);
  if (!st.ok()) replaying_ = false;
  return st;
}

DictionaryStats DictionarySync::stats() const {
  DictionaryStats s;
  s.messages_applied = applied_;
  s.replays_loaded = replays_loaded_;
  s.undecodable_batches = undecodable_;
  return s;
}

Status DictionarySync::Apply(std::span<const std::byte> md,
                             const std::shared_ptr<format::Buffer>& body,
                             const format::ipc::IpcReadOptions& options,
                             format::ipc::DictionaryMemo* into) {
  ALKAID_ASSIGN_OR_RAISE(auto metadata, format::Buffer::CopyOf(std::string_view(
                                            reinterpret_cast<const char*>(md.data()), md.size())));
  auto decoded = format::ipc::Message::Open(std::move(metadata), body, options);
  Status st = decoded.status();
  if (st.ok() && (*decoded)->type() != format::ipc::MessageType::kDictionaryBatch) {
    st = Status::Invalid("message flagged as a dictionary is a ",
                         format::ipc::MessageTypeName((*decoded)->type()));
  }
  if (st.ok()) st = format::ipc::ReadDictionary(**decoded, into, options).status();
  return st;
}

}  // namespace alkaid::client::internal
