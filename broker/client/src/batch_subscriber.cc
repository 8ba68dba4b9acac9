#include "alkaid/client/batch_subscriber.h"

#include <cstring>
#include <utility>

#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/ipc/message.h"
#include "alkaid/format/ipc/reader.h"
#include "batch_descriptor_internal.h"

namespace alkaid::client {

using internal::BatchDescriptor;

namespace {

// Owner of a received body: the block reference, and the reader (hence the
// segment mapping) it must not outlive. Members are destroyed in reverse
// order: the reference first.
struct BodyOwner {
  std::shared_ptr<shm::BodyReader> reader;
  shm::BlockRef ref;
};

}  // namespace

struct BatchSubscriber::Impl {
  format::SchemaPtr schema;
  SubscriberOptions options;
  format::ipc::DictionaryMemo memo;  // no dictionaries: empty
  // Declared before the consumer: the consumer's messages hold references
  // through the reader, so it must go last.
  std::shared_ptr<shm::BodyReader> reader;
  std::unique_ptr<shm::RingConsumer> consumer;
  shm::RingMessage message;
};

BatchSubscriber::BatchSubscriber(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BatchSubscriber::~BatchSubscriber() = default;

Result<std::unique_ptr<BatchSubscriber>> BatchSubscriber::Open(std::string_view ring_name,
                                                               std::string_view bodies_name,
                                                               format::SchemaPtr schema,
                                                               const SubscriberOptions& options) {
  ALKAID_ASSIGN_OR_RAISE(auto bodies, shm::Segment::Open(bodies_name, shm::SegmentKind::kBodies));
  ALKAID_ASSIGN_OR_RAISE(auto ring, shm::Segment::Open(ring_name, shm::SegmentKind::kRing));
  return Open(std::move(ring), std::move(bodies), std::move(schema), options);
}

Result<std::unique_ptr<BatchSubscriber>> BatchSubscriber::Open(
    std::shared_ptr<shm::Segment> ring, std::shared_ptr<shm::Segment> bodies,
    format::SchemaPtr schema, const SubscriberOptions& options) {
  if (schema == nullptr) return Status::Invalid("BatchSubscriber: null schema");
  auto impl = std::make_unique<Impl>();
  impl->schema = std::move(schema);
  impl->options = options;
  ALKAID_RETURN_NOT_OK(impl->memo.AssignIds(*impl->schema));
  if (impl->memo.num_fields() > 0) {
    return Status::NotImplemented("BatchSubscriber: schema has ", impl->memo.num_fields(),
                                  " dictionary-encoded field(s); dictionary exchange belongs "
                                  "to the broker");
  }
  ALKAID_ASSIGN_OR_RAISE(std::unique_ptr<shm::BodyReader> reader,
                         shm::BodyReader::Open(std::move(bodies)));
  impl->reader = std::move(reader);
  shm::ConsumerOptions co = options.consumer;
  co.bodies = impl->reader.get();
  ALKAID_ASSIGN_OR_RAISE(impl->consumer, shm::RingConsumer::Open(std::move(ring), co));
  if (impl->consumer->inline_capacity() < sizeof(BatchDescriptor)) {
    return Status::Invalid("BatchSubscriber: ring '", impl->consumer->name(), "' has ",
                           impl->consumer->inline_capacity(),
                           " inline bytes per slot, less than a batch descriptor");
  }
  return std::unique_ptr<BatchSubscriber>(new BatchSubscriber(std::move(impl)));
}

const format::SchemaPtr& BatchSubscriber::schema() const { return impl_->schema; }
const shm::RingConsumer& BatchSubscriber::consumer() const { return *impl_->consumer; }

Result<ReceivedBatch> BatchSubscriber::Receive(std::chrono::nanoseconds timeout) {
  ALKAID_RETURN_NOT_OK(impl_->consumer->Receive(&impl_->message, timeout));
  return Decode();
}

Result<ReceivedBatch> BatchSubscriber::TryReceive() {
  ALKAID_ASSIGN_OR_RAISE(bool got, impl_->consumer->TryReceive(&impl_->message));
  if (!got) return ReceivedBatch{};
  return Decode();
}

Result<ReceivedBatch> BatchSubscriber::Decode() {
  Impl& d = *impl_;
  shm::RingMessage& m = d.message;
  const std::string where =
      "ring '" + d.consumer->name() + "' sequence " + std::to_string(m.sequence());
  auto owner = std::make_shared<BodyOwner>();
  owner->reader = d.reader;
  owner->ref = m.TakeBody();
  if (!owner->ref.valid()) {
    return Status::Invalid(where, ": message carries no body block");
  }
  const auto payload = m.payload();
  if (payload.size() < sizeof(BatchDescriptor)) {
    return Status::Invalid(where, ": slot payload of ", payload.size(),
                           " bytes is shorter than a batch descriptor (",
                           sizeof(BatchDescriptor), ")");
  }
  BatchDescriptor desc;
  std::memcpy(&desc, payload.data(), sizeof(desc));
  if (desc.magic != internal::kBatchDescriptorMagic ||
      desc.version != internal::kBatchDescriptorVersion) {
    return Status::Invalid(where, ": not a batch descriptor (magic 0x", std::hex, desc.magic,
                           std::dec, ", version ", desc.version, ")");
  }
  const std::span<const std::byte> block = owner->ref.data();
  if (desc.body_length > block.size()) {
    return Status::Invalid(where, ": body of ", desc.body_length, " bytes exceeds its ",
                           block.size(), "-byte block");
  }
  // The metadata is copied out of shared memory before it is verified, so
  // the producer cannot change it between verification and use.
  std::shared_ptr<format::Buffer> metadata;
  if ((desc.flags & internal::kMetadataInRegion) != 0) {
    if (desc.metadata_offset > block.size() ||
        desc.metadata_length > block.size() - desc.metadata_offset ||
        desc.metadata_offset < desc.body_length) {
      return Status::Invalid(where, ": metadata at region offset ", desc.metadata_offset,
                             " with length ", desc.metadata_length, " is not inside the ",
                             block.size(), "-byte block after the ", desc.body_length,
                             "-byte body");
    }
    ALKAID_ASSIGN_OR_RAISE(
        metadata, format::Buffer::CopyOf(std::string_view(
                      reinterpret_cast<const char*>(block.data() + desc.metadata_offset),
                      desc.metadata_length)));
  } else {
    if (desc.metadata_length > payload.size() - sizeof(BatchDescriptor)) {
      return Status::Invalid(where, ": inline metadata of ", desc.metadata_length,
                             " bytes exceeds the ", payload.size() - sizeof(BatchDescriptor),
                             " bytes after the descriptor");
    }
    ALKAID_ASSIGN_OR_RAISE(
        metadata,
        format::Buffer::CopyOf(std::string_view(
            reinterpret_cast<const char*>(payload.data() + sizeof(BatchDescriptor)),
            desc.metadata_length)));
  }
  const auto* body_data = reinterpret_cast<const uint8_t*>(block.data());
  auto body = std::make_shared<format::Buffer>(body_data, static_cast<int64_t>(desc.body_length),
                                               std::shared_ptr<const void>(owner));
  auto message = format::ipc::Message::Open(metadata, body);
  if (!message.ok()) return message.status().WithContext(where);
  if ((*message)->type() != format::ipc::MessageType::kRecordBatch) {
    return Status::Invalid(where, ": message is not a record batch");
  }
  auto batch = format::ipc::ReadRecordBatch(**message, d.schema, &d.memo, d.options.read);
  if (!batch.ok()) return batch.status().WithContext(where);
  ReceivedBatch out;
  out.batch = std::move(batch).ValueOrDie();
  out.metadata = std::move(metadata);
  out.body = std::move(body);
  out.sequence = m.sequence();
  out.lost_before = m.lost_before();
  return out;
}

}  // namespace alkaid::client
