// Receiving batches (batch_subscriber_internal.h says where the other
// pieces of BatchSubscriber are): the receive calls, and the framing of a
// message (where its metadata is, what kind it is).

#include "alkaid/client/batch_subscriber.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "alkaid/format/ipc/message.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/validate.h"
#include "batch_subscriber_internal.h"

namespace alkaid::client {

using internal::MessageKind;
using internal::RegionMetadata;
using internal::UserWord;

const char* VerificationName(Verification v) {
  switch (v) {
    case Verification::kStructure:
      return "structure";
    case Verification::kFull:
      return "full";
    case Verification::kPrivateCopy:
      return "private-copy";
  }
  return "?";
}

Result<std::shared_ptr<format::Buffer>> BatchSubscriber::Impl::BodyOf(shm::ChannelBlock block,
                                                                      uint64_t length) const {
  if (options.verification != Verification::kPrivateCopy) {
    return std::make_shared<internal::BodyBuffer>(std::move(block), length);
  }
  // A producer that rewrites the block while we copy only changes what the
  // copy holds; the copy is what gets validated and read.
  ALKAID_ASSIGN_OR_RAISE(auto copy, format::AllocateBuffer(static_cast<int64_t>(length)));
  if (length > 0) std::memcpy(copy->mutable_data(), block.data().data(), length);
  block.Reset();
  return std::shared_ptr<format::Buffer>(std::move(copy));
}

BatchSubscriber::BatchSubscriber(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BatchSubscriber::~BatchSubscriber() = default;

Result<std::unique_ptr<BatchSubscriber>> BatchSubscriber::Open(std::string_view channel_name,
                                                               format::SchemaPtr schema,
                                                               const SubscriberOptions& options) {
  if (schema == nullptr) return Status::Invalid("BatchSubscriber: null schema");
  auto impl = std::make_unique<Impl>();
  impl->schema = std::move(schema);
  impl->options = options;
  if (options.verification != Verification::kStructure) impl->options.read.validate_full = true;
  ALKAID_RETURN_NOT_OK(impl->dictionaries.Init(*impl->schema));
  ALKAID_ASSIGN_OR_RAISE(impl->consumer,
                         shm::ChannelConsumer::Open(channel_name, options.consumer));
  return std::unique_ptr<BatchSubscriber>(new BatchSubscriber(std::move(impl)));
}

const format::SchemaPtr& BatchSubscriber::schema() const { return impl_->schema; }
const shm::ChannelConsumer& BatchSubscriber::consumer() const { return *impl_->consumer; }
uint64_t BatchSubscriber::decode_cache_hits() const { return impl_->plan_hits; }

DictionaryStats BatchSubscriber::dictionary_stats() const { return impl_->dictionaries.stats(); }

Result<ReceivedBatch> BatchSubscriber::Receive(std::chrono::nanoseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left =
        std::max(std::chrono::nanoseconds(0), std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                  deadline - std::chrono::steady_clock::now()));
    ALKAID_RETURN_NOT_OK(impl_->consumer->Receive(&impl_->message, left));
    ALKAID_ASSIGN_OR_RAISE(auto out, impl_->Decode());
    // A dictionary message, or a batch skipped for want of its
    // dictionaries: not for the caller.
    if (out.batch != nullptr) return out;
  }
}

Result<ReceivedBatch> BatchSubscriber::TryReceive() {
  while (true) {
    ALKAID_ASSIGN_OR_RAISE(bool got, impl_->consumer->TryReceive(&impl_->message));
    if (!got) return ReceivedBatch{};
    ALKAID_ASSIGN_OR_RAISE(auto out, impl_->Decode());
    if (out.batch != nullptr) return out;
  }
}

Result<ReceivedBatch> BatchSubscriber::Impl::Decode(BatchView* view, bool* filled) {
  shm::ChannelMessage& m = message;
  const UserWord user = UserWord::Unpack(m.user());
  dictionaries.Observe(first_message, m.sequence(), m.lost_before(), user.dictionary_generation);
  first_message = false;
  // Counted before anything can fail, so that a bad message right after a
  // gap does not hide it.
  pending_lost += m.lost_before();
  if (user.kind > internal::kMaxMessageKind) {
    return Status::Invalid(Where(), ": unknown message kind ", static_cast<int>(user.kind));
  }
  const auto kind = static_cast<MessageKind>(user.kind);
  if (kind == MessageKind::kReplayEnd) {
    dictionaries.EndReplay(user.dictionary_generation);
    return ReceivedBatch{};
  }
  // Error context is built only on the error paths (Where()).
  shm::ChannelBlock block = m.TakeBody();
  if (!block.valid()) return Status::Invalid(Where(), ": message carries no body block");
  const std::span<const std::byte> region = block.data();
  if (user.body_length > region.size()) {
    return Status::Invalid(Where(), ": body of ", user.body_length, " bytes exceeds its ",
                           region.size(), "-byte block");
  }
  // The metadata is used only from private memory: inline metadata was
  // copied out of the slot by the channel; shape and region metadata are
  // copied out of shared memory here, before they are compared or verified,
  // so the producer cannot change them between verification and use.
  std::span<const std::byte> md;
  const auto payload = m.payload();
  if (m.shape() != 0) {
    if (user.metadata_in_region || !payload.empty()) {
      return Status::Invalid(Where(), ": a shape id and other metadata");
    }
    // Cached plans need no bytes (DecodeBatch looks the id up first).
  } else if (user.metadata_in_region) {
    RegionMetadata where;
    if (payload.size() != sizeof(where)) {
      return Status::Invalid(Where(), ": region metadata record of ", payload.size(), " bytes (",
                             sizeof(where), " expected)");
    }
    std::memcpy(&where, payload.data(), sizeof(where));
    if (where.offset > region.size() || where.length > region.size() - where.offset ||
        where.offset < user.body_length) {
      return Status::Invalid(Where(), ": metadata at region offset ", where.offset, " with length ",
                             where.length, " is not inside the ", region.size(),
                             "-byte block after the ", user.body_length, "-byte body");
    }
    metadata_scratch.resize(where.length);
    if (where.length > 0) {
      std::memcpy(metadata_scratch.data(), region.data() + where.offset, where.length);
    }
    md = metadata_scratch;
  } else {
    md = payload;
  }
  if (kind == MessageKind::kRecordBatch) {
    if (!dictionaries.Admit(user.dictionary_generation)) {
      // Its dictionaries are not known here (a replay will come): counted
      // as lost, like a message the channel dropped.
      ++pending_lost;
      return ReceivedBatch{};
    }
    return DecodeBatch(user, md, std::move(block), view, filled);
  }
  // A dictionary message or a replayed dictionary.
  ALKAID_ASSIGN_OR_RAISE(auto body, BodyOf(std::move(block), user.body_length));
  if (!dictionaries.active()) {
    return Status::Invalid(Where(),
                           ": a dictionary message, but the schema has no "
                           "dictionary-encoded field");
  }
  if (kind == MessageKind::kDictionary) {
    Status st = dictionaries.ApplyDictionary(md, body, user.dictionary_generation, options.read);
    if (!st.ok()) return st.WithContext(Where());
    return ReceivedBatch{};
  }
  Status st = dictionaries.ApplyReplay(md, body, options.read);
  if (!st.ok()) return st.WithContext(Where() + ": dictionary replay");
  return ReceivedBatch{};
}

bool BatchSubscriber::Impl::TryFillFast(BatchView* view) {
  const shm::ChannelMessage& m = message;
  const uint64_t word = m.user();
  const uint32_t shape = m.shape();
  if (dictionaries.active() || shape == 0 || shape >= shape_plans.size() ||
      !UserWord::IsPlainRecordBatch(word) || !m.payload().empty() || !m.has_body()) {
    return false;
  }
  const std::optional<DecodePlan>& plan = shape_plans[shape];
  const uint64_t body_length = word & UserWord::kLengthMask;
  if (!plan.has_value() || plan->validate_each || plan->body_length != body_length ||
      body_length > m.body().size()) {
    return false;
  }
  first_message = false;
  const uint64_t lost_before = pending_lost + m.lost_before();
  pending_lost = 0;
  ++plan_hits;
  BatchView& v = *view;
  v.body_.reset();
  v.batch_.reset();
  message.TakeBodyInto(&v.block_);
  FillFromPlan(*plan, body_length, view, lost_before);
  return true;
}

Result<ReceivedBatch> BatchSubscriber::Impl::DecodeBatch(const UserWord& user,
                                                         std::span<const std::byte> md,
                                                         shm::ChannelBlock block, BatchView* view,
                                                         bool* filled) {
  ReceivedBatch out;
  out.sequence = message.sequence();
  const uint64_t lost_before = pending_lost;
  out.lost_before = lost_before;
  const uint32_t shape = message.shape();
  const DecodePlan* hit = nullptr;
  if (shape != 0) {
    if (shape < shape_plans.size() && shape_plans[shape].has_value()) {
      hit = &*shape_plans[shape];
      if (hit->body_length != user.body_length) {
        return Status::Invalid(Where(), ": shape ", shape, " has a body of ", hit->body_length,
                               " bytes, the message says ", user.body_length);
      }
    } else {
      // First use of this shape: its bytes, copied once.
      Status st = consumer->ReadShape(shape, &metadata_scratch);
      if (!st.ok()) return st.WithContext(Where());
      md = metadata_scratch;
    }
  } else {
    for (const DecodePlan& p : plans) {
      if (p.Matches(md, user.body_length)) {
        hit = &p;
        break;
      }
    }
  }
  if (hit != nullptr && view != nullptr && !hit->validate_each) {
    // Into the caller's view: nothing allocated.
    pending_lost = 0;
    ++plan_hits;
    view->Reset();
    view->block_ = std::move(block);
    FillFromPlan(*hit, user.body_length, view, lost_before);
    *filled = true;
    return out;
  }
  ALKAID_ASSIGN_OR_RAISE(std::shared_ptr<format::Buffer> body,
                         BodyOf(std::move(block), user.body_length));
  pending_lost = 0;
  if (hit != nullptr) {
    // Same metadata as a message already verified, decoded and validated:
    // replay its shape over this body.
    std::vector<format::ArrayDataPtr> columns;
    columns.reserve(hit->columns.size());
    for (size_t root : hit->columns) columns.push_back(hit->Build(root, body));
    auto batch = format::RecordBatch::Make(schema, hit->num_rows, std::move(columns));
    if (!batch.ok()) return batch.status().WithContext(Where());
    if (hit->batch_metadata != nullptr) *batch = (*batch)->WithMetadata(hit->batch_metadata);
    if (hit->validate_each) {
      Status st =
          options.read.validate_full ? format::ValidateFull(**batch) : format::Validate(**batch);
      if (!st.ok()) return st.WithContext(Where());
    }
    ++plan_hits;
    out.batch = std::move(batch).ValueOrDie();
    out.metadata = hit->metadata;
    out.body = std::move(body);
    if (view != nullptr) {
      FillFromBatch(std::move(out.batch), view, lost_before);
      *filled = true;
      return ReceivedBatch{};
    }
    return out;
  }

  ALKAID_ASSIGN_OR_RAISE(auto metadata, format::Buffer::CopyOf(std::string_view(
                                            reinterpret_cast<const char*>(md.data()), md.size())));
  auto decoded = format::ipc::Message::Open(metadata, body);
  if (!decoded.ok()) return decoded.status().WithContext(Where());
  if ((*decoded)->type() != format::ipc::MessageType::kRecordBatch) {
    return Status::Invalid(Where(), ": message is not a record batch");
  }
  if ((*decoded)->body_length() != static_cast<int64_t>(user.body_length)) {
    return Status::Invalid(Where(), ": the Message says a body of ", (*decoded)->body_length(),
                           " bytes, the slot ", user.body_length);
  }
  auto batch = format::ipc::ReadRecordBatch(**decoded, schema, dictionaries.memo(), options.read);
  if (!batch.ok()) return batch.status().WithContext(Where());

  // Remember the shape for the next messages (schemas are fixed per topic,
  // so a producer publishing batches of one shape hits this every time).
  DecodePlan plan;
  plan.metadata = metadata;
  plan.body_length = user.body_length;
  plan.num_rows = (*batch)->num_rows();
  plan.batch_metadata = (*batch)->metadata();
  plan.validate_each = options.read.validate_full;
  bool replayable = true;
  for (int i = 0; i < (*batch)->num_columns() && replayable; ++i) {
    const auto& col = (*batch)->column_data(i);
    size_t root = 0;
    replayable = plan.Record(*col, *body, &root);
    plan.columns.push_back(root);
    if (!internal::IsStructuralLayout(*col->type)) plan.validate_each = true;
  }
  if (replayable) {
    if (shape != 0) {
      if (shape_plans.size() <= shape) shape_plans.resize(shape + 1);
      shape_plans[shape] = std::move(plan);
    } else if (plans.size() < internal::kShapeCacheEntries) {
      plans.push_back(std::move(plan));
    } else {
      plans[next_victim] = std::move(plan);
      next_victim = (next_victim + 1) % internal::kShapeCacheEntries;
    }
  }

  out.batch = std::move(batch).ValueOrDie();
  out.metadata = std::move(metadata);
  out.body = std::move(body);
  if (view != nullptr) {
    FillFromBatch(std::move(out.batch), view, lost_before);
    *filled = true;
    return ReceivedBatch{};
  }
  return out;
}

Status BatchSubscriber::ReceiveInto(BatchView* view, std::chrono::nanoseconds timeout) {
  if (view == nullptr) return Status::Invalid("BatchSubscriber::ReceiveInto: null view");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left =
        std::max(std::chrono::nanoseconds(0), std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                  deadline - std::chrono::steady_clock::now()));
    ALKAID_RETURN_NOT_OK(impl_->consumer->Receive(&impl_->message, left));
    if (impl_->TryFillFast(view)) return Status::OK();
    bool filled = false;
    ALKAID_RETURN_NOT_OK(impl_->Decode(view, &filled).status());
    if (filled) return Status::OK();
  }
}

Result<bool> BatchSubscriber::TryReceiveInto(BatchView* view) {
  if (view == nullptr) return Status::Invalid("BatchSubscriber::TryReceiveInto: null view");
  while (true) {
    ALKAID_ASSIGN_OR_RAISE(bool got, impl_->consumer->TryReceive(&impl_->message));
    if (!got) return false;
    if (impl_->TryFillFast(view)) return true;
    bool filled = false;
    ALKAID_RETURN_NOT_OK(impl_->Decode(view, &filled).status());
    if (filled) return true;
  }
}

}  // namespace alkaid::client
