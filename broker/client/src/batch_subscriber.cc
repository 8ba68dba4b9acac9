#include "alkaid/client/batch_subscriber.h"

#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/ipc/message.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/validate.h"
#include "batch_descriptor_internal.h"

namespace alkaid::client {

using internal::BatchDescriptor;

namespace {

// The body of a received batch: a view of its shared block that holds the
// block reference, and the reader (hence the segment mapping) it must not
// outlive. One allocation per message. Members are destroyed in reverse
// order: the reference first.
class BodyBuffer : public format::Buffer {
 public:
  BodyBuffer(std::shared_ptr<shm::BodyReader> reader, shm::BlockRef ref, uint64_t length)
      : reader_(std::move(reader)), ref_(std::move(ref)) {
    data_ = const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(ref_.data().data()));
    size_ = static_cast<int64_t>(length);
    capacity_ = size_;
  }

 private:
  std::shared_ptr<shm::BodyReader> reader_;
  shm::BlockRef ref_;
};

}  // namespace

// What decoding one Message flatbuffer produced, kept so that the next
// message with byte-identical metadata (and the same body length) is
// rebuilt without verifying, parsing or validating its metadata again: the
// shape of the batch (types, lengths, null counts, offsets, and where each
// buffer lies in the body) is a function of those bytes, the body length,
// the schema and the read options, all unchanged.
//
// Safety: the bytes compared are the subscriber's private copy (the region
// metadata is copied out of shared memory first), and the plan's buffers
// were checked to lie inside the body when it was built.
struct DecodePlan {
  struct Buffer {
    bool present = false;
    int64_t offset = 0;  // from the body start
    int64_t size = 0;
  };
  struct Node {
    format::TypePtr type;
    int64_t length = 0;
    int64_t null_count = 0;
    int64_t offset = 0;
    std::vector<Buffer> buffers;
    std::vector<size_t> children;  // indexes into nodes
  };

  std::shared_ptr<format::Buffer> metadata;  // verified private copy
  uint64_t body_length = 0;
  int64_t num_rows = 0;
  std::vector<Node> nodes;
  std::vector<size_t> columns;  // root node per column
  // Validate must run on every rebuilt batch (its verdict reads values).
  bool validate_each = true;

  bool Matches(std::span<const std::byte> md, uint64_t body) const {
    return metadata != nullptr && body == body_length &&
           static_cast<int64_t>(md.size()) == metadata->size() &&
           (md.empty() || std::memcmp(md.data(), metadata->data(), md.size()) == 0);
  }

  // Records `data` (a node of a batch decoded from `body`); false if it
  // cannot be replayed (a buffer outside the body: decompressed or
  // re-aligned copies; dictionaries).
  bool Record(const format::ArrayData& data, const format::Buffer& body, size_t* index) {
    if (data.dictionary != nullptr || data.null_count < 0) return false;
    Node node;
    node.type = data.type;
    node.length = data.length;
    node.null_count = data.null_count;
    node.offset = data.offset;
    for (const auto& b : data.buffers) {
      Buffer pb;
      if (b != nullptr) {
        if (!body.Contains(b->data(), b->size())) return false;
        pb.present = true;
        pb.offset = b->data() - body.data();
        pb.size = b->size();
      }
      node.buffers.push_back(pb);
    }
    for (const auto& child : data.child_data) {
      if (child == nullptr) return false;
      size_t c = 0;
      if (!Record(*child, body, &c)) return false;
      node.children.push_back(c);
    }
    *index = nodes.size();
    nodes.push_back(std::move(node));
    return true;
  }

  format::ArrayDataPtr Build(size_t index, const std::shared_ptr<format::Buffer>& body) const {
    const Node& n = nodes[index];
    auto d = std::make_shared<format::ArrayData>();
    d->type = n.type;
    d->length = n.length;
    d->null_count = n.null_count;
    d->offset = n.offset;
    d->buffers.reserve(n.buffers.size());
    for (const Buffer& b : n.buffers) {
      d->buffers.push_back(b.present ? std::make_shared<format::Buffer>(body, b.offset, b.size)
                                     : nullptr);
    }
    if (!n.children.empty()) {
      d->child_data.reserve(n.children.size());
      for (size_t c : n.children) d->child_data.push_back(Build(c, body));
    }
    return d;
  }
};

struct BatchSubscriber::Impl {
  format::SchemaPtr schema;
  SubscriberOptions options;
  format::ipc::DictionaryMemo memo;  // no dictionaries: empty
  // Declared before the consumer: the consumer's messages hold references
  // through the reader, so it must go last.
  std::shared_ptr<shm::BodyReader> reader;
  std::unique_ptr<shm::RingConsumer> consumer;
  shm::RingMessage message;
  // Private copy of region metadata, reused across messages.
  std::vector<std::byte> metadata_scratch;
  // The shapes of the last few distinct messages decoded in full.
  std::vector<DecodePlan> plans;
  size_t next_victim = 0;  // round-robin replacement once full
  uint64_t plan_hits = 0;

  std::string Where() const {
    return "ring '" + consumer->name() + "' sequence " + std::to_string(message.sequence());
  }
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
uint64_t BatchSubscriber::decode_cache_hits() const { return impl_->plan_hits; }

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
  // Error context is built only on the error paths (d.Where()).
  shm::BlockRef ref = m.TakeBody();
  if (!ref.valid()) {
    return Status::Invalid(d.Where(), ": message carries no body block");
  }
  const auto payload = m.payload();
  if (payload.size() < sizeof(BatchDescriptor)) {
    return Status::Invalid(d.Where(), ": slot payload of ", payload.size(),
                           " bytes is shorter than a batch descriptor (",
                           sizeof(BatchDescriptor), ")");
  }
  BatchDescriptor desc;
  std::memcpy(&desc, payload.data(), sizeof(desc));
  if (desc.magic != internal::kBatchDescriptorMagic ||
      desc.version != internal::kBatchDescriptorVersion) {
    return Status::Invalid(d.Where(), ": not a batch descriptor (magic 0x", std::hex,
                           desc.magic, std::dec, ", version ", desc.version, ")");
  }
  const std::span<const std::byte> block = ref.data();
  if (desc.body_length > block.size()) {
    return Status::Invalid(d.Where(), ": body of ", desc.body_length, " bytes exceeds its ",
                           block.size(), "-byte block");
  }
  // The metadata is used only from private memory: the inline metadata was
  // copied out of the slot by the ring; region metadata is copied out of
  // the shared block here, before it is compared or verified, so the
  // producer cannot change it between verification and use.
  std::span<const std::byte> md;
  if ((desc.flags & internal::kMetadataInRegion) != 0) {
    if (desc.metadata_offset > block.size() ||
        desc.metadata_length > block.size() - desc.metadata_offset ||
        desc.metadata_offset < desc.body_length) {
      return Status::Invalid(d.Where(), ": metadata at region offset ", desc.metadata_offset,
                             " with length ", desc.metadata_length, " is not inside the ",
                             block.size(), "-byte block after the ", desc.body_length,
                             "-byte body");
    }
    d.metadata_scratch.resize(desc.metadata_length);
    if (desc.metadata_length > 0) {
      std::memcpy(d.metadata_scratch.data(), block.data() + desc.metadata_offset,
                  desc.metadata_length);
    }
    md = d.metadata_scratch;
  } else {
    if (desc.metadata_length > payload.size() - sizeof(BatchDescriptor)) {
      return Status::Invalid(d.Where(), ": inline metadata of ", desc.metadata_length,
                             " bytes exceeds the ", payload.size() - sizeof(BatchDescriptor),
                             " bytes after the descriptor");
    }
    md = payload.subspan(sizeof(BatchDescriptor), desc.metadata_length);
  }
  auto body = std::make_shared<BodyBuffer>(d.reader, std::move(ref), desc.body_length);

  ReceivedBatch out;
  out.sequence = m.sequence();
  out.lost_before = m.lost_before();
  const DecodePlan* hit = nullptr;
  for (const DecodePlan& p : d.plans) {
    if (p.Matches(md, desc.body_length)) {
      hit = &p;
      break;
    }
  }
  if (hit != nullptr) {
    // Same metadata bytes and body length as a message already verified,
    // decoded and validated: replay its shape over this body.
    std::vector<format::ArrayDataPtr> columns;
    columns.reserve(hit->columns.size());
    for (size_t root : hit->columns) columns.push_back(hit->Build(root, body));
    auto batch = format::RecordBatch::Make(d.schema, hit->num_rows, std::move(columns));
    if (!batch.ok()) return batch.status().WithContext(d.Where());
    if (hit->validate_each) {
      Status st = d.options.read.validate_full ? format::ValidateFull(**batch)
                                               : format::Validate(**batch);
      if (!st.ok()) return st.WithContext(d.Where());
    }
    ++d.plan_hits;
    out.batch = std::move(batch).ValueOrDie();
    out.metadata = hit->metadata;
    out.body = std::move(body);
    return out;
  }

  ALKAID_ASSIGN_OR_RAISE(
      auto metadata,
      format::Buffer::CopyOf(std::string_view(reinterpret_cast<const char*>(md.data()),
                                              md.size())));
  auto message = format::ipc::Message::Open(metadata, body);
  if (!message.ok()) return message.status().WithContext(d.Where());
  if ((*message)->type() != format::ipc::MessageType::kRecordBatch) {
    return Status::Invalid(d.Where(), ": message is not a record batch");
  }
  auto batch = format::ipc::ReadRecordBatch(**message, d.schema, &d.memo, d.options.read);
  if (!batch.ok()) return batch.status().WithContext(d.Where());

  // Remember the shape for the next messages (schemas are fixed per topic,
  // so a producer publishing batches of one shape hits this every time).
  DecodePlan plan;
  plan.metadata = metadata;
  plan.body_length = desc.body_length;
  plan.num_rows = (*batch)->num_rows();
  plan.validate_each = d.options.read.validate_full;
  bool replayable = true;
  for (int i = 0; i < (*batch)->num_columns() && replayable; ++i) {
    const auto& col = (*batch)->column_data(i);
    size_t root = 0;
    replayable = plan.Record(*col, *body, &root);
    plan.columns.push_back(root);
    if (!internal::IsStructuralLayout(*col->type)) plan.validate_each = true;
  }
  if (replayable) {
    if (d.plans.size() < internal::kShapeCacheEntries) {
      d.plans.push_back(std::move(plan));
    } else {
      d.plans[d.next_victim] = std::move(plan);
      d.next_victim = (d.next_victim + 1) % internal::kShapeCacheEntries;
    }
  }

  out.batch = std::move(batch).ValueOrDie();
  out.metadata = std::move(metadata);
  out.body = std::move(body);
  return out;
}

}  // namespace alkaid::client
