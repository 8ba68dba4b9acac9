#include "alkaid/client/batch_subscriber.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/ipc/io.h"
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
  // The batch's own custom metadata (part of the metadata bytes compared).
  format::MetadataPtr batch_metadata;
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

// Longest wait in Open for a pending dictionary snapshot (SyncAtAttach).
constexpr auto kAttachSnapshotWait = std::chrono::milliseconds(250);

struct BatchSubscriber::Impl {
  format::SchemaPtr schema;
  SubscriberOptions options;
  // Dictionary-encoded fields' ids (no dictionaries), and the ids with the
  // current dictionaries (docs/CLIENT.md, "Dictionaries").
  format::ipc::DictionaryMemo ids;
  format::ipc::DictionaryMemo memo;
  bool has_dictionaries = false;
  // `memo` holds the dictionary state of epoch `dictionary_epoch` and no
  // message after it was missed: dictionary messages from the ring apply.
  bool dictionaries_synced = false;
  uint64_t dictionary_epoch = 0;
  uint64_t undecodable = 0;          // batches skipped for want of dictionaries
  uint64_t dictionary_messages = 0;  // dictionary messages applied from the ring
  uint64_t snapshots_loaded = 0;
  // Messages lost or skipped since the last batch returned.
  uint64_t pending_lost = 0;
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

  Status ApplyDictionaryMessage(std::span<const std::byte> md,
                                const std::shared_ptr<format::Buffer>& body);
  Result<bool> LoadSnapshot(uint64_t epoch);
  Status UseSnapshot(shm::BlockRef ref, const internal::SnapshotHeader& header);
  Result<internal::SnapshotHeader> ReadSnapshotHeader(const shm::BlockRef& ref,
                                                      const shm::BlockHandle& handle,
                                                      uint64_t epoch) const;
  void SyncAtAttach();
};

// A dictionary message from the ring, in order: applied to the state if the
// state is that of every message before it.
Status BatchSubscriber::Impl::ApplyDictionaryMessage(std::span<const std::byte> md,
                                                     const std::shared_ptr<format::Buffer>& body) {
  const uint64_t sequence = message.sequence();
  if (!dictionaries_synced || sequence < dictionary_epoch) {
    // Unknown state (a late start or a gap: the next batch loads the
    // snapshot), or already part of the snapshot loaded.
    return Status::OK();
  }
  ALKAID_ASSIGN_OR_RAISE(
      auto metadata,
      format::Buffer::CopyOf(std::string_view(reinterpret_cast<const char*>(md.data()),
                                              md.size())));
  auto decoded = format::ipc::Message::Open(std::move(metadata), body, options.read);
  Status st = decoded.status();
  if (st.ok() && (*decoded)->type() != format::ipc::MessageType::kDictionaryBatch) {
    st = Status::Invalid("message flagged as a dictionary is a ",
                         format::ipc::MessageTypeName((*decoded)->type()));
  }
  if (st.ok()) st = format::ipc::ReadDictionary(**decoded, &memo, options.read).status();
  if (!st.ok()) {
    // The state is unknown from here: the next batch reloads the snapshot.
    dictionaries_synced = false;
    return st.WithContext(Where());
  }
  dictionary_epoch = sequence + 1;
  ++dictionary_messages;
  return Status::OK();
}

// The header of the snapshot block `ref` (named by `handle`), checked
// against the epoch it was announced with and the block's size.
Result<internal::SnapshotHeader> BatchSubscriber::Impl::ReadSnapshotHeader(
    const shm::BlockRef& ref, const shm::BlockHandle& handle, uint64_t epoch) const {
  const std::span<const std::byte> bytes = ref.data();
  internal::SnapshotHeader header;
  if (bytes.size() < sizeof(header)) {
    return Status::Invalid(Where(), ": dictionary snapshot block of ", bytes.size(),
                           " bytes is shorter than its header");
  }
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (header.magic != internal::kSnapshotMagic || header.epoch != epoch ||
      header.messages_length > bytes.size() - sizeof(header)) {
    return Status::Invalid(Where(), ": dictionary snapshot at offset ", handle.offset,
                           " is corrupt (magic 0x", std::hex, header.magic, std::dec,
                           ", epoch ", header.epoch, " where ", epoch, " was announced, ",
                           header.messages_length, " bytes of messages in a ", bytes.size(),
                           "-byte block)");
  }
  return header;
}

// Loads the dictionary state of epoch `epoch` from the producer's
// snapshots (the newest is announced in the ring's sideband; older ones
// that batches in the ring may still need are chained behind it). True if
// the state is now that of `epoch`; false if no snapshot of that epoch is
// left (the producer changed its dictionaries since and released it, or
// has not written one). Errors: a snapshot that is not one.
Result<bool> BatchSubscriber::Impl::LoadSnapshot(uint64_t epoch) {
  constexpr int kSidebandAttempts = 8;
  for (int attempt = 0; attempt < kSidebandAttempts; ++attempt) {
    ALKAID_ASSIGN_OR_RAISE(auto words, consumer->ReadSideband());
    const auto sideband = internal::DictionarySideband::FromWords(words);
    if (!sideband.block.valid() || sideband.epoch < epoch) return false;
    shm::BlockHandle handle = sideband.block;
    uint64_t handle_epoch = sideband.epoch;
    // Newest first; epochs strictly decrease, so the walk ends.
    for (size_t hop = 0; hop <= internal::kKeptSnapshots; ++hop) {
      auto ref = reader->Acquire(handle);
      if (!ref.ok()) {
        if (ref.status().code() != StatusCode::kKeyError) {
          return ref.status().WithContext(Where() + ": dictionary snapshot");
        }
        if (hop > 0) return false;  // an older snapshot, released
        break;                      // the newest was replaced meanwhile: read again
      }
      ALKAID_ASSIGN_OR_RAISE(const internal::SnapshotHeader header,
                             ReadSnapshotHeader(*ref, handle, handle_epoch));
      if (header.epoch == epoch) {
        ALKAID_RETURN_NOT_OK(UseSnapshot(std::move(ref).ValueOrDie(), header));
        return true;
      }
      if (header.epoch < epoch || header.previous_generation == 0 ||
          header.previous_epoch >= header.epoch) {
        return false;
      }
      handle = header.previous();
      handle_epoch = header.previous_epoch;
    }
    if (attempt + 1 == kSidebandAttempts) break;
  }
  return false;
}

// Right after registering on the ring: the producer's newest snapshot is
// the state of every message this reader will see, unless dictionary
// messages are being published that it does not cover yet (`pending`).
// Then, or if the snapshot cannot be used, the first batch loads one.
void BatchSubscriber::Impl::SyncAtAttach() {
  // The producer writes the snapshot right after its dictionary messages;
  // only a producer descheduled (or dead) in between keeps it pending for
  // long. Past the deadline the first batch loads a snapshot instead.
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + kAttachSnapshotWait;
  while (true) {
    auto words = consumer->ReadSideband();
    if (!words.ok()) return;
    const auto sideband = internal::DictionarySideband::FromWords(*words);
    if (!sideband.pending) {
      if (!sideband.block.valid()) {
        // No dictionary was ever published: the empty state is the state.
        dictionaries_synced = true;
        dictionary_epoch = 0;
        return;
      }
      auto ref = reader->Acquire(sideband.block);
      if (!ref.ok()) return;
      auto header = ReadSnapshotHeader(*ref, sideband.block, sideband.epoch);
      if (header.ok()) (void)UseSnapshot(std::move(ref).ValueOrDie(), *header);
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return;
    if (now - start < std::chrono::milliseconds(1)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

// Replaces the dictionary state with the snapshot in `ref`.
Status BatchSubscriber::Impl::UseSnapshot(shm::BlockRef ref,
                                          const internal::SnapshotHeader& header) {
  const uint64_t end = sizeof(header) + header.messages_length;
  // The dictionaries point into the block (zero-copy), which stays
  // referenced while any of them lives.
  auto block = std::make_shared<BodyBuffer>(reader, std::move(ref), end);
  format::ipc::BufferReader input(std::make_shared<format::Buffer>(
      block, static_cast<int64_t>(sizeof(header)), static_cast<int64_t>(header.messages_length)));
  format::ipc::DictionaryMemo loaded = ids;
  int64_t count = 0;
  while (true) {
    auto next = format::ipc::ReadMessage(&input, options.read);
    if (!next.ok()) return next.status().WithContext(Where() + ": dictionary snapshot");
    if (*next == nullptr) break;
    if ((*next)->type() != format::ipc::MessageType::kDictionaryBatch) {
      return Status::Invalid(Where(), ": dictionary snapshot holds a ",
                             format::ipc::MessageTypeName((*next)->type()), " message");
    }
    if (++count > ids.num_fields()) {
      return Status::Invalid(Where(), ": dictionary snapshot holds more than ",
                             ids.num_fields(), " dictionaries");
    }
    auto update = format::ipc::ReadDictionary(**next, &loaded, options.read);
    if (!update.ok()) return update.status().WithContext(Where() + ": dictionary snapshot");
  }
  memo = std::move(loaded);
  dictionary_epoch = header.epoch;
  dictionaries_synced = true;
  ++snapshots_loaded;
  return Status::OK();
}

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
  ALKAID_RETURN_NOT_OK(impl->ids.AssignIds(*impl->schema));
  impl->memo = impl->ids;
  impl->has_dictionaries = impl->ids.num_fields() > 0;
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
  // Reading from the first message ever published, the empty state is the
  // right one; otherwise the producer's snapshot is.
  impl->dictionaries_synced = impl->consumer->next_sequence() == 0;
  if (impl->has_dictionaries && !impl->dictionaries_synced) impl->SyncAtAttach();
  return std::unique_ptr<BatchSubscriber>(new BatchSubscriber(std::move(impl)));
}

const format::SchemaPtr& BatchSubscriber::schema() const { return impl_->schema; }
const shm::RingConsumer& BatchSubscriber::consumer() const { return *impl_->consumer; }
uint64_t BatchSubscriber::decode_cache_hits() const { return impl_->plan_hits; }

DictionaryStats BatchSubscriber::dictionary_stats() const {
  DictionaryStats s;
  s.messages_applied = impl_->dictionary_messages;
  s.snapshots_loaded = impl_->snapshots_loaded;
  s.undecodable_batches = impl_->undecodable;
  return s;
}

Result<ReceivedBatch> BatchSubscriber::Receive(std::chrono::nanoseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left = std::max(std::chrono::nanoseconds(0),
                               std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   deadline - std::chrono::steady_clock::now()));
    ALKAID_RETURN_NOT_OK(impl_->consumer->Receive(&impl_->message, left));
    ALKAID_ASSIGN_OR_RAISE(auto out, Decode());
    // A dictionary message, or a batch skipped for want of its
    // dictionaries: not for the caller.
    if (out.batch != nullptr) return out;
  }
}

Result<ReceivedBatch> BatchSubscriber::TryReceive() {
  while (true) {
    ALKAID_ASSIGN_OR_RAISE(bool got, impl_->consumer->TryReceive(&impl_->message));
    if (!got) return ReceivedBatch{};
    ALKAID_ASSIGN_OR_RAISE(auto out, Decode());
    if (out.batch != nullptr) return out;
  }
}

Result<ReceivedBatch> BatchSubscriber::Decode() {
  Impl& d = *impl_;
  shm::RingMessage& m = d.message;
  if (m.lost_before() > 0) {
    // Counted before anything can fail, so that a bad message right after
    // a gap does not hide it; a dictionary message may have been among the
    // lost.
    d.dictionaries_synced = false;
    d.pending_lost += m.lost_before();
  }
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
  if ((desc.flags & internal::kDictionaryMessage) != 0) {
    if (!d.has_dictionaries) {
      return Status::Invalid(d.Where(), ": a dictionary message, but the schema has no "
                             "dictionary-encoded field");
    }
    ALKAID_RETURN_NOT_OK(d.ApplyDictionaryMessage(md, body));
    return out;  // no batch
  }
  if (d.has_dictionaries &&
      !(d.dictionaries_synced && desc.dictionary_epoch == d.dictionary_epoch)) {
    ALKAID_ASSIGN_OR_RAISE(bool loaded, d.LoadSnapshot(desc.dictionary_epoch));
    if (!loaded) {
      // Its dictionaries are gone (replaced since): counted as lost, like
      // a message the ring dropped.
      ++d.undecodable;
      ++d.pending_lost;
      return out;
    }
  }
  out.sequence = m.sequence();
  out.lost_before = d.pending_lost;
  d.pending_lost = 0;
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
    if (hit->batch_metadata != nullptr) *batch = (*batch)->WithMetadata(hit->batch_metadata);
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
  plan.batch_metadata = (*batch)->metadata();
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
