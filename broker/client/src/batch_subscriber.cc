// Receiving batches (batch_subscriber_internal.h says where the other
// pieces of BatchSubscriber are): the receive calls, and the framing of a
// message (where its metadata is, what kind it is).

#include "alkaid/client/batch_subscriber.h"

#include <cstring>
#include <span>
#include <string>
#include <utility>

#include "alkaid/format/ipc/message.h"
#include "alkaid/format/ipc/reader.h"
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
  impl->plans = std::make_unique<format::ipc::MessagePlanCache>(*impl->schema, impl->options.read);
  impl->shape_plans.resize(1);  // shape id 0 is no shape: CachedPlan finds no plan there
  ALKAID_ASSIGN_OR_RAISE(impl->consumer,
                         shm::ChannelConsumer::Open(channel_name, options.consumer));
  return std::unique_ptr<BatchSubscriber>(new BatchSubscriber(std::move(impl)));
}

const format::SchemaPtr& BatchSubscriber::schema() const { return impl_->schema; }
uint64_t BatchSubscriber::last_publish_ns() const { return impl_->message.publish_ns(); }
const shm::ChannelConsumer& BatchSubscriber::consumer() const { return *impl_->consumer; }
shm::ChannelConsumer& BatchSubscriber::mutable_consumer() { return *impl_->consumer; }
uint64_t BatchSubscriber::decode_cache_hits() const { return impl_->plan_hits; }

DictionaryStats BatchSubscriber::dictionary_stats() const { return impl_->dictionaries.stats(); }

// The private copy's way (kPrivateCopy), out of MakeFromPlan's frame: the
// batch over a copy of the body (not validated yet).
[[gnu::noinline]] Status BatchSubscriber::Impl::MakeCopyFromPlan(
    const MessagePlan& plan, shm::ChannelBlock&& block, format::RecordBatchPtr* batch,
    std::shared_ptr<format::Buffer>* body) {
  ALKAID_ASSIGN_OR_RAISE(auto copy,
                         BodyOf(std::move(block), message.user() & UserWord::kLengthMask));
  const uint8_t* base = copy->data();
  if (body != nullptr) *body = copy;
  *batch = plan.Instantiate(base, std::move(copy));
  return Status::OK();
}

// Forced inline into its callers (the cached shape id of Make and
// MakeBatch, DecodeBatch's cached metadata): a frame of its own cost some
// 30 instructions a batch.
[[gnu::always_inline]] inline Status BatchSubscriber::Impl::MakeFromPlan(
    const MessagePlan& plan, shm::ChannelBlock&& block, format::RecordBatchPtr* batch,
    ReceivedBatch* full) {
  last_sequence = message.sequence();
  last_lost_before = pending_lost;
  const bool with_message = full != nullptr && options.with_message;
  if (full != nullptr) {
    full->sequence = last_sequence;
    full->lost_before = last_lost_before;
  }
  std::shared_ptr<format::Buffer>* body = with_message ? &full->body : nullptr;
  if (options.verification == Verification::kPrivateCopy) {
    ALKAID_RETURN_NOT_OK(MakeCopyFromPlan(plan, std::move(block), batch, body));
  } else {
    const auto* base = reinterpret_cast<const uint8_t*>(block.data().data());
    *batch = plan.Instantiate(base, std::move(block), body);
  }
  if (plan.validates()) {
    Status st = plan.Validate(**batch);
    if (!st.ok()) return WithWhere(st);
  }
  pending_lost = 0;
  ++plan_hits;
  if (with_message) full->metadata = plan.message();
  return Status::OK();
}

// The plan of the message received when it is the common case: a plain
// record batch of a cached shape id, in a schema without dictionaries, its
// body as long as the plan's (the same batch as Decode would make, only the
// framing is skipped; Decode reports what is wrong). Null otherwise.
[[gnu::always_inline]] inline const format::ipc::MessagePlan* BatchSubscriber::Impl::CachedPlan() {
  const shm::ChannelMessage& m = message;
  const uint64_t word = m.user();
  const uint32_t shape = m.shape();
  if (shape < shape_plans.size() && shape_plans[shape] != nullptr &&  // [0]: none
      UserWord::IsPlainRecordBatch(word) && !dictionaries.active() && m.payload().empty() &&
      m.has_body()) {
    const MessagePlan& plan = *shape_plans[shape];
    const uint64_t body_length = word & UserWord::kLengthMask;
    if (static_cast<uint64_t>(plan.body_length()) == body_length &&
        body_length <= m.body().size()) {
      first_message = false;
      pending_lost += m.lost_before();
      return &plan;
    }
  }
  return nullptr;
}

Status BatchSubscriber::Impl::Make(ReceivedBatch* out) {
  if (const MessagePlan* plan = CachedPlan(); plan != nullptr) {
    return MakeFromPlan(*plan, std::move(message.body_block()), &out->batch, out);
  }
  return DecodeInto(out);
}

// Make's general way: Decode, and the batch's numbers for last_sequence().
Status BatchSubscriber::Impl::DecodeInto(ReceivedBatch* out) {
  ALKAID_ASSIGN_OR_RAISE(*out, Decode());
  if (out->batch != nullptr) {
    last_sequence = out->sequence;
    last_lost_before = out->lost_before;
  }
  return Status::OK();
}

// Inlined into the batch-only receive calls (a frame of its own cost some
// 20 instructions a batch); the rest out of line.
[[gnu::always_inline]] inline Status BatchSubscriber::Impl::MakeBatch(format::RecordBatchPtr* out) {
  if (const MessagePlan* plan = CachedPlan(); plan != nullptr) {
    return MakeFromPlan(*plan, std::move(message.body_block()), out, nullptr);
  }
  return DecodeBatchOnly(out);
}

[[gnu::noinline]] Status BatchSubscriber::Impl::DecodeBatchOnly(format::RecordBatchPtr* out) {
  ReceivedBatch full;
  ALKAID_RETURN_NOT_OK(DecodeInto(&full));
  *out = std::move(full.batch);
  return Status::OK();
}

// Receive and TryReceive fill the ReceivedBatch inside the Result they
// return (every return names `result`, so it is built in the caller's
// place): a batch of a cached shape is not moved from a local into the
// Result and destroyed there. A message made into nothing (a dictionary
// message, a batch skipped for want of its dictionaries) is not for the
// caller: the loops go on to the next.
Result<ReceivedBatch> BatchSubscriber::Receive(std::chrono::nanoseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Result<ReceivedBatch> result{ReceivedBatch{}};
  ReceivedBatch& out = *result;
  while (true) {
    bool got = false;
    Status st = impl_->NextMessage(/*wait=*/true, deadline, &got);
    if (st.ok()) st = impl_->Make(&out);
    if (!st.ok()) {
      result = std::move(st);
      return result;
    }
    if (out.batch != nullptr) return result;
  }
}

Result<ReceivedBatch> BatchSubscriber::TryReceive() {
  Result<ReceivedBatch> result{ReceivedBatch{}};
  ReceivedBatch& out = *result;
  while (true) {
    bool got = false;
    Status st = impl_->NextMessage(/*wait=*/false, {}, &got);
    if (st.ok() && !got) return result;
    if (st.ok()) st = impl_->Make(&out);
    if (!st.ok()) {
      result = std::move(st);
      return result;
    }
    if (out.batch != nullptr) return result;
  }
}

// Errors of the receive calls, out of line: their formatting kept out of
// the receive's frame.
[[gnu::noinline, gnu::cold]] static Status NullBatchPointer(const char* call) {
  return Status::Invalid("BatchSubscriber::", call, ": null batch pointer");
}

[[gnu::noinline, gnu::cold]] Status BatchSubscriber::Impl::WithWhere(const Status& st) const {
  return st.WithContext(Where());
}

// The batch-only calls: on an error `*batch` is emptied (a batch made and
// then refused by its validation is not handed out).
Status BatchSubscriber::TryReceive(format::RecordBatchPtr* batch) {
  if (batch == nullptr) return NullBatchPointer("TryReceive");
  while (true) {
    bool got = false;
    Status st = impl_->NextMessage(/*wait=*/false, {}, &got);
    if (st.ok() && !got) {
      batch->reset();
      return Status::OK();
    }
    if (st.ok()) st = impl_->MakeBatch(batch);
    if (!st.ok()) {
      batch->reset();
      return st;
    }
    if (*batch != nullptr) return Status::OK();
  }
}

Status BatchSubscriber::Receive(format::RecordBatchPtr* batch, std::chrono::nanoseconds timeout) {
  if (batch == nullptr) return NullBatchPointer("Receive");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    bool got = false;
    Status st = impl_->NextMessage(/*wait=*/true, deadline, &got);
    if (st.ok()) st = impl_->MakeBatch(batch);
    if (!st.ok()) {
      batch->reset();
      return st;
    }
    if (*batch != nullptr) return Status::OK();
  }
}

uint64_t BatchSubscriber::last_sequence() const { return impl_->last_sequence; }
uint64_t BatchSubscriber::last_lost_before() const { return impl_->last_lost_before; }

Result<ReceivedBatch> BatchSubscriber::Impl::Decode() {
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
    return DecodeBatch(user, md, std::move(block));
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

static Result<std::shared_ptr<format::Buffer>> CopyOf(std::span<const std::byte> md) {
  return format::Buffer::CopyOf(
      std::string_view(reinterpret_cast<const char*>(md.data()), md.size()));
}

Result<ReceivedBatch> BatchSubscriber::Impl::DecodeBatch(const UserWord& user,
                                                         std::span<const std::byte> md,
                                                         shm::ChannelBlock block) {
  ReceivedBatch out;
  out.sequence = message.sequence();
  out.lost_before = pending_lost;
  const uint32_t shape = message.shape();
  const auto body_length = static_cast<int64_t>(user.body_length);
  const MessagePlan* hit = nullptr;
  if (shape != 0) {
    if (shape < shape_plans.size()) hit = shape_plans[shape].get();
    if (hit != nullptr && hit->body_length() != body_length) {
      return Status::Invalid(Where(), ": shape ", shape, " has a body of ", hit->body_length(),
                             " bytes, the message says ", user.body_length);
    }
  } else {
    hit = plans->Find({reinterpret_cast<const uint8_t*>(md.data()), md.size()}, body_length);
  }
  if (hit != nullptr) {
    // A Message of a shape decoded before: the plan makes the batch over
    // this body. A varying plan keeps no Message: with_message gets this one.
    ALKAID_RETURN_NOT_OK(MakeFromPlan(*hit, std::move(block), &out.batch, &out));
    if (options.with_message && out.metadata == nullptr) {
      ALKAID_ASSIGN_OR_RAISE(out.metadata, CopyOf(md));
    }
    return out;
  }
  if (shape != 0) {
    // First use of this shape: its bytes, copied once.
    Status st = consumer->ReadShape(shape, &metadata_scratch);
    if (!st.ok()) return st.WithContext(Where());
    md = metadata_scratch;
  }
  ALKAID_ASSIGN_OR_RAISE(std::shared_ptr<format::Buffer> body,
                         BodyOf(std::move(block), user.body_length));
  pending_lost = 0;
  ALKAID_ASSIGN_OR_RAISE(auto metadata, CopyOf(md));
  auto decoded = format::ipc::Message::Open(metadata, body);
  if (!decoded.ok()) return decoded.status().WithContext(Where());
  if ((*decoded)->type() != format::ipc::MessageType::kRecordBatch) {
    return Status::Invalid(Where(), ": message is not a record batch");
  }
  if ((*decoded)->body_length() != body_length) {
    return Status::Invalid(Where(), ": the Message says a body of ", (*decoded)->body_length(),
                           " bytes, the slot ", user.body_length);
  }
  auto batch = format::ipc::ReadRecordBatch(**decoded, schema, dictionaries.memo(), options.read);
  if (!batch.ok()) return batch.status().WithContext(Where());
  // Remember the shape for the next messages (schemas are fixed per topic,
  // so a producer publishing batches of one shape hits this every time):
  // a shape id's at once, other metadata as the cache sees fit.
  const std::span<const uint8_t> verified(metadata->data(), static_cast<size_t>(metadata->size()));
  if (shape == 0) {
    plans->Learn(**batch, *body, verified);
  } else if (!dictionaries.active()) {
    if (shape_plans.size() <= shape) shape_plans.resize(shape + 1);
    shape_plans[shape] =
        MessagePlan::Make(MessagePlan::Kind::kExact, **batch, *body, verified, options.read);
  }
  out.batch = std::move(batch).ValueOrDie();
  out.metadata = std::move(metadata);
  out.body = std::move(body);
  return out;
}

Status BatchSubscriber::ReceiveInto(BatchView* view, std::chrono::nanoseconds timeout) {
  if (view == nullptr) return Status::Invalid("BatchSubscriber::ReceiveInto: null view");
  ALKAID_ASSIGN_OR_RAISE(auto got, Receive(timeout));
  *view = BatchView(std::move(got.batch), got.sequence, got.lost_before);
  return Status::OK();
}

Result<bool> BatchSubscriber::TryReceiveInto(BatchView* view) {
  if (view == nullptr) return Status::Invalid("BatchSubscriber::TryReceiveInto: null view");
  ALKAID_ASSIGN_OR_RAISE(auto got, TryReceive());
  if (got.batch == nullptr) return false;
  *view = BatchView(std::move(got.batch), got.sequence, got.lost_before);
  return true;
}

}  // namespace alkaid::client
