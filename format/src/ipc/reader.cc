#include "alkaid/format/ipc/reader.h"

#include <cstring>
#include <deque>
#include <mutex>
#include <span>
#include <sstream>
#include <utility>

#include "alkaid/format/ipc/message_plan.h"
#include "alkaid/format/validate.h"
#include "compression_internal.h"
#include "metadata_internal.h"
#include "util_internal.h"

namespace alkaid::format::ipc {

using internal::BufferMeta;
using internal::FieldNodeMeta;
using internal::RecordBatchMeta;

namespace {

std::string FieldLabel(const std::string& dotted) { return "field '" + dotted + "'"; }

// Rebuilds arrays from the FieldNodes and Buffers of one record batch (or
// dictionary batch) body, in the pre-order the format specifies.
class ArrayLoader {
 public:
  ArrayLoader(const RecordBatchMeta& meta, std::shared_ptr<Buffer> body, MetadataVersion version,
              const DictionaryMemo* memo, const IpcReadOptions& options)
      : meta_(meta), body_(std::move(body)), version_(version), memo_(memo), options_(options) {}

  Result<ArrayDataPtr> Load(const Field& field, FieldPath* path, const std::string& dotted,
                            int depth) {
    if (depth > options_.max_recursion_depth) {
      return Status::Invalid(FieldLabel(dotted), ": nesting deeper than max_recursion_depth (",
                             options_.max_recursion_depth, ")");
    }
    // The null type's null count is its length, whatever the field node
    // says: some writers put -1 there, which Arrow C++ reads too.
    const bool null_type = StorageType(*field.type()).id() == TypeId::kNull;
    ALKAID_ASSIGN_OR_RAISE(FieldNodeMeta node, NextNode(dotted, null_type));
    auto data = std::make_shared<ArrayData>();
    data->type = field.type();
    data->length = node.length;
    data->null_count = node.null_count;
    const DataType* storage = &StorageType(*field.type());
    if (storage->id() == TypeId::kDictionary) {
      if (memo_ == nullptr) {
        return Status::Invalid(FieldLabel(dotted), ": dictionary-encoded but no dictionaries");
      }
      auto id = memo_->GetId(*path);
      if (!id.ok()) return id.status().WithContext(FieldLabel(dotted));
      auto dict = memo_->GetDictionary(*id);
      if (!dict.ok()) {
        return Status::Invalid(FieldLabel(dotted), ": dictionary id ", *id,
                               " has not been read before this batch");
      }
      data->dictionary = *dict;
      storage = static_cast<const DictionaryType*>(storage)->index_type().get();
    }
    const TypeId id = storage->id();
    switch (id) {
      case TypeId::kNull:
        // V5 writes no buffers for the null type.
        data->null_count = node.length;
        data->buffers = {nullptr};
        break;
      case TypeId::kSparseUnion:
      case TypeId::kDenseUnion: {
        if (version_ < MetadataVersion::kV5) {
          ALKAID_RETURN_NOT_OK(NextBuffer(dotted, "validity (pre-V5 union)").status());
        }
        data->null_count = 0;
        ALKAID_ASSIGN_OR_RAISE(auto codes, NextBuffer(dotted, "type ids"));
        data->buffers.push_back(std::move(codes));
        if (id == TypeId::kDenseUnion) {
          ALKAID_ASSIGN_OR_RAISE(auto offsets, NextBuffer(dotted, "offsets"));
          data->buffers.push_back(std::move(offsets));
        }
        break;
      }
      case TypeId::kRunEndEncoded:
        data->null_count = 0;
        break;
      default: {
        const DataTypeLayout& layout = storage->layout();
        for (size_t i = 0; i < layout.buffers.size(); ++i) {
          ALKAID_ASSIGN_OR_RAISE(auto buf, NextBuffer(dotted, i == 0 ? "validity" : "data"));
          if (i == 0 && layout.has_validity && node.null_count == 0) buf = nullptr;
          data->buffers.push_back(std::move(buf));
        }
        if (layout.variadic) {
          if (variadic_index_ >= meta_.variadic_counts.size()) {
            return Status::Invalid(FieldLabel(dotted), ": view type but the message lists only ",
                                   meta_.variadic_counts.size(), " variadic buffer counts");
          }
          const int64_t count = meta_.variadic_counts[variadic_index_++];
          const int64_t left = static_cast<int64_t>(meta_.buffers.size() - buffer_index_);
          if (count < 0 || count > left) {
            return Status::Invalid(FieldLabel(dotted), ": variadic buffer count ", count,
                                   " but only ", left, " buffers remain");
          }
          for (int64_t i = 0; i < count; ++i) {
            ALKAID_ASSIGN_OR_RAISE(auto buf, NextBuffer(dotted, "variadic data"));
            data->buffers.push_back(std::move(buf));
          }
        }
        break;
      }
    }
    if (node.null_count != 0 && data->null_count != node.null_count && id != TypeId::kNull) {
      return Status::Invalid(FieldLabel(dotted), ": null count ", node.null_count,
                             " for a type without validity bitmap");
    }
    for (int i = 0; i < storage->num_fields(); ++i) {
      const Field& child = *storage->field(i);
      path->push_back(i);
      auto child_data = Load(child, path, dotted + "." + child.name(), depth + 1);
      path->pop_back();
      ALKAID_RETURN_NOT_OK(child_data);
      data->child_data.push_back(*std::move(child_data));
    }
    return data;
  }

  Status CheckAllConsumed(const char* what) const {
    if (node_index_ != meta_.nodes.size()) {
      return Status::Invalid(what, " has ", meta_.nodes.size(), " field nodes, the schema uses ",
                             node_index_);
    }
    if (buffer_index_ != meta_.buffers.size()) {
      return Status::Invalid(what, " has ", meta_.buffers.size(), " buffers, the schema uses ",
                             buffer_index_);
    }
    if (variadic_index_ != meta_.variadic_counts.size()) {
      return Status::Invalid(what, " has ", meta_.variadic_counts.size(),
                             " variadic buffer counts, the schema uses ", variadic_index_);
    }
    return Status::OK();
  }

 private:
  Result<FieldNodeMeta> NextNode(const std::string& dotted, bool null_type) {
    if (node_index_ >= meta_.nodes.size()) {
      return Status::Invalid(FieldLabel(dotted), ": needs field node #", node_index_,
                             " but the message has only ", meta_.nodes.size());
    }
    FieldNodeMeta n = meta_.nodes[node_index_++];
    if (null_type && n.length >= 0) n.null_count = n.length;
    if (n.length < 0 || n.null_count < 0 || n.null_count > n.length) {
      return Status::Invalid(FieldLabel(dotted), ": field node #", node_index_ - 1, " has length ",
                             n.length, " and null count ", n.null_count);
    }
    return n;
  }

  Result<std::shared_ptr<Buffer>> NextBuffer(const std::string& dotted, const char* kind) {
    const size_t index = buffer_index_;
    if (index >= meta_.buffers.size()) {
      return Status::Invalid(FieldLabel(dotted), ": needs buffer #", index, " (", kind,
                             ") but the message has only ", meta_.buffers.size());
    }
    ++buffer_index_;
    const BufferMeta b = meta_.buffers[index];
    int64_t end;
    if (b.offset < 0 || b.length < 0 || internal::AddOverflows(b.offset, b.length, &end) ||
        end > body_->size()) {
      return Status::Invalid("buffer ", index, " (", kind, ") of ", FieldLabel(dotted), " spans [",
                             b.offset, ", +", b.length, "), outside the ", body_->size(),
                             "-byte body");
    }
    if (b.length == 0) return SliceBuffer(body_, b.offset, 0);
    if (meta_.compression == CompressionType::kNone) {
      return internal::EnsureAligned(SliceBuffer(body_, b.offset, b.length), 8, options_.pool);
    }
    if (b.length < 8) {
      return Status::Invalid("compressed buffer ", index, " (", kind, ") of ", FieldLabel(dotted),
                             " is ", b.length, " bytes, shorter than its length prefix");
    }
    const uint8_t* p = body_->data() + b.offset;
    const int64_t uncompressed = internal::LoadInt64LE(p);
    if (uncompressed == -1) {
      return internal::EnsureAligned(SliceBuffer(body_, b.offset + 8, b.length - 8), 8,
                                     options_.pool);
    }
    if (uncompressed < 0 || uncompressed > options_.max_decompressed_size) {
      return Status::Invalid("compressed buffer ", index, " (", kind, ") of ", FieldLabel(dotted),
                             " declares ", uncompressed, " uncompressed bytes (limit ",
                             options_.max_decompressed_size, ")");
    }
    ALKAID_ASSIGN_OR_RAISE(auto out, AllocateBuffer(uncompressed, options_.pool));
    Status st = internal::Decompress(meta_.compression, p + 8, b.length - 8, out->mutable_data(),
                                     uncompressed);
    if (!st.ok()) {
      return st.WithContext("buffer " + std::to_string(index) + " of " + FieldLabel(dotted));
    }
    return std::shared_ptr<Buffer>(std::move(out));
  }

  const RecordBatchMeta& meta_;
  std::shared_ptr<Buffer> body_;
  MetadataVersion version_;
  const DictionaryMemo* memo_;
  const IpcReadOptions& options_;
  size_t node_index_ = 0;
  size_t buffer_index_ = 0;
  size_t variadic_index_ = 0;
};

Status CheckType(const Message& message, MessageType expected) {
  if (message.type() != expected) {
    return Status::Invalid("expected a ", MessageTypeName(expected), " message, got a ",
                           MessageTypeName(message.type()), " message");
  }
  return Status::OK();
}

Result<std::shared_ptr<Buffer>> AlignedBody(const Message& message, const IpcReadOptions& o) {
  return internal::EnsureAligned(message.body(), 8, o.pool);
}

}  // namespace

Result<SchemaPtr> ReadSchema(const Message& message, DictionaryMemo* memo,
                             const IpcReadOptions& options) {
  ALKAID_RETURN_NOT_OK(CheckType(message, MessageType::kSchema));
  DictionaryMemo scratch;
  return internal::GetSchema(message.metadata()->data(), memo ? memo : &scratch,
                             options.max_recursion_depth);
}

Result<RecordBatchPtr> ReadRecordBatch(const Message& message, const SchemaPtr& schema,
                                       const DictionaryMemo* memo, const IpcReadOptions& options) {
  ALKAID_RETURN_NOT_OK(CheckType(message, MessageType::kRecordBatch));
  if (schema == nullptr) return Status::Invalid("ReadRecordBatch: schema is null");
  ALKAID_ASSIGN_OR_RAISE(RecordBatchMeta meta,
                         internal::GetRecordBatch(message.metadata()->data()));
  ALKAID_ASSIGN_OR_RAISE(auto body, AlignedBody(message, options));
  ArrayLoader loader(meta, std::move(body), message.version(), memo, options);
  std::vector<ArrayDataPtr> columns;
  columns.reserve(static_cast<size_t>(schema->num_fields()));
  FieldPath path;
  for (int i = 0; i < schema->num_fields(); ++i) {
    path.assign(1, i);
    const Field& f = *schema->field(i);
    ALKAID_ASSIGN_OR_RAISE(auto col, loader.Load(f, &path, f.name(), 1));
    if (col->length != meta.length) {
      return Status::Invalid(FieldLabel(f.name()), ": column has length ", col->length,
                             ", the batch ", meta.length);
    }
    columns.push_back(std::move(col));
  }
  ALKAID_RETURN_NOT_OK(loader.CheckAllConsumed("record batch"));
  ALKAID_ASSIGN_OR_RAISE(auto batch, RecordBatch::Make(schema, meta.length, std::move(columns)));
  if (message.custom_metadata() != nullptr) batch = batch->WithMetadata(message.custom_metadata());
  FullValidationOptions full;
  full.decimal_precision = options.validate_decimal_precision;
  ALKAID_RETURN_NOT_OK(options.validate_full ? ValidateFull(*batch, full) : Validate(*batch));
  return batch;
}

Result<DictionaryUpdate> ReadDictionary(const Message& message, DictionaryMemo* memo,
                                        const IpcReadOptions& options, bool allow_replacement) {
  ALKAID_RETURN_NOT_OK(CheckType(message, MessageType::kDictionaryBatch));
  if (memo == nullptr) return Status::Invalid("ReadDictionary: memo is null");
  ALKAID_ASSIGN_OR_RAISE(auto meta, internal::GetDictionaryBatch(message.metadata()->data()));
  auto value_type = memo->GetValueType(meta.id);
  if (!value_type.ok()) {
    return Status::Invalid("dictionary batch for id ", meta.id,
                           ", which no field of the schema uses");
  }
  ALKAID_ASSIGN_OR_RAISE(FieldPath path, memo->GetFirstPath(meta.id));
  ALKAID_ASSIGN_OR_RAISE(auto body, AlignedBody(message, options));
  ArrayLoader loader(meta.data, std::move(body), message.version(), memo, options);
  const std::string label = "dictionary " + std::to_string(meta.id);
  Field field(label, *value_type);
  ALKAID_ASSIGN_OR_RAISE(auto values, loader.Load(field, &path, label, 1));
  if (values->length != meta.data.length) {
    return Status::Invalid(label, ": values have length ", values->length, ", the batch says ",
                           meta.data.length);
  }
  ALKAID_RETURN_NOT_OK(loader.CheckAllConsumed("dictionary batch"));
  // Dictionaries are always fully validated: deltas concatenate them, which
  // reads their offsets, and every batch's indices point into them.
  FullValidationOptions full;
  full.decimal_precision = options.validate_decimal_precision;
  ALKAID_RETURN_NOT_OK(ValidateFull(*values, label, full));
  return memo->AddDictionary(meta.id, std::move(values), meta.is_delta, allow_replacement,
                             options.pool);
}

// ---------------------------------------------------------------------------
// Listeners

Status StreamListener::OnSchema(const SchemaPtr&) { return Status::OK(); }
Status StreamListener::OnEndOfStream() { return Status::OK(); }

Status CollectListener::OnSchema(const SchemaPtr& schema) {
  schema_ = schema;
  return Status::OK();
}
Status CollectListener::OnRecordBatch(RecordBatchPtr batch) {
  batches_.push_back(std::move(batch));
  return Status::OK();
}
Status CollectListener::OnEndOfStream() {
  ended_ = true;
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Shared handling of the messages of a stream

namespace {

class StreamState {
 public:
  explicit StreamState(const IpcReadOptions& options) : options_(options) {}

  // Returns the decoded batch for record batch messages, null otherwise.
  Result<RecordBatchPtr> Process(const Message& message) {
    const int64_t index = stats_.num_messages++;
    auto r = ProcessImpl(message);
    if (!r.ok()) return InContext(r.status(), index, message.type());
    return r;
  }

  // A Message that StreamDecoder verified (`metadata`) with its `body`: if
  // it is a record batch Message a plan takes, its batch, counted and in
  // context as Process does, with no Message made (nor verified again);
  // else null (Process it).
  Result<RecordBatchPtr> ProcessPlanned(const Buffer& metadata,
                                        const std::shared_ptr<Buffer>& body) {
    if (plans_ == nullptr || body == nullptr) return RecordBatchPtr();
    const std::span<const uint8_t> bytes(metadata.data(), static_cast<size_t>(metadata.size()));
    const int64_t index = stats_.num_messages;
    auto batch = MakePlanned(bytes, body);
    if (!batch.ok()) {
      ++stats_.num_messages;
      return InContext(batch.status(), index, MessageType::kRecordBatch);
    }
    if (*batch != nullptr) {
      ++stats_.num_messages;
      ++stats_.num_record_batches;
    }
    return batch;
  }

  const SchemaPtr& schema() const { return schema_; }
  const DictionaryMemo& memo() const { return memo_; }
  const ReadStats& stats() const { return stats_; }

 private:
  Result<RecordBatchPtr> ProcessImpl(const Message& message) {
    if (schema_ == nullptr) {
      if (message.type() != MessageType::kSchema) {
        return Status::Invalid("the stream must start with a schema message");
      }
      ALKAID_ASSIGN_OR_RAISE(schema_, ReadSchema(message, &memo_, options_));
      plans_ = std::make_unique<MessagePlanCache>(*schema_, options_);
      return RecordBatchPtr();
    }
    switch (message.type()) {
      case MessageType::kSchema:
        return Status::Invalid("a second schema message in one stream");
      case MessageType::kDictionaryBatch: {
        ALKAID_ASSIGN_OR_RAISE(auto update, ReadDictionary(message, &memo_, options_, true));
        ++stats_.num_dictionary_batches;
        if (update == DictionaryUpdate::kDelta) ++stats_.num_dictionary_deltas;
        if (update == DictionaryUpdate::kReplacement) ++stats_.num_replaced_dictionaries;
        return RecordBatchPtr();
      }
      case MessageType::kRecordBatch: {
        ALKAID_ASSIGN_OR_RAISE(auto batch, ReadBatch(message));
        ++stats_.num_record_batches;
        return batch;
      }
    }
    return Status::Invalid("unknown message type");
  }

  // An error of message #`index` (of `type`), as Process and
  // ProcessPlanned say it.
  static Status InContext(const Status& error, int64_t index, MessageType type) {
    std::ostringstream ss;
    ss << "message #" << index << " (" << MessageTypeName(type) << ")";
    return error.WithContext(ss.str());
  }

  // A record batch: by the plan of a Message of its shape read before
  // (message_plan.h), else decoded in full (and learned from).
  Result<RecordBatchPtr> ReadBatch(const Message& message) {
    const Buffer& md = *message.metadata();
    const std::span<const uint8_t> bytes(md.data(), static_cast<size_t>(md.size()));
    const std::shared_ptr<Buffer>& body = message.body();
    ALKAID_ASSIGN_OR_RAISE(auto batch, MakePlanned(bytes, body));
    if (batch != nullptr) return batch;
    ALKAID_ASSIGN_OR_RAISE(batch, ReadRecordBatch(message, schema_, &memo_, options_));
    // A body out of 8-byte alignment is copied by the full decode: no plan.
    if (internal::IsAligned(body->data(), 8)) plans_->Learn(*batch, *body, bytes);
    return batch;
  }

  // The batch of the record batch Message `bytes` over `body` by the plan
  // that takes it, or null.
  Result<RecordBatchPtr> MakePlanned(std::span<const uint8_t> bytes,
                                     const std::shared_ptr<Buffer>& body) {
    if (!internal::IsAligned(body->data(), 8)) return RecordBatchPtr();
    MessagePlan* plan = plans_->Find(bytes, body->size());
    if (plan == nullptr) return RecordBatchPtr();
    RecordBatchPtr batch;
    ALKAID_RETURN_NOT_OK(plan->MakeBatch(body->data(), std::shared_ptr<Buffer>(body), &batch));
    ++stats_.num_planned_record_batches;
    return batch;
  }

  IpcReadOptions options_;
  SchemaPtr schema_;
  DictionaryMemo memo_;
  // Made with the schema.
  std::unique_ptr<MessagePlanCache> plans_;
  ReadStats stats_;
};

}  // namespace

// ---------------------------------------------------------------------------
// StreamDecoder

class StreamDecoder::Impl {
 public:
  Impl(std::shared_ptr<StreamListener> listener, IpcReadOptions options)
      : listener_(std::move(listener)), options_(options), state_(options) {}

  Status Consume(std::shared_ptr<Buffer> buffer) {
    if (!error_.ok()) return Status::Invalid("decoder stopped after an error: ", error_.message());
    if (buffer == nullptr || buffer->size() == 0) return Status::OK();
    if (phase_ == Phase::kEnded) {
      error_ = Status::Invalid("data after the end-of-stream marker");
      return error_;
    }
    available_ += buffer->size();
    chunks_.push_back(std::move(buffer));
    Status st = Drive();
    if (!st.ok()) error_ = st;
    return st;
  }

  int64_t next_required_size() const {
    if (phase_ == Phase::kEnded) return 0;
    return std::max<int64_t>(need_ - available_, 0);
  }

  Status Finish() const {
    if (!error_.ok()) return error_;
    if (phase_ == Phase::kEnded) return Status::OK();
    if (phase_ == Phase::kPrefix && available_ == 0) return Status::OK();
    return Status::Invalid("stream truncated: input ended inside a message (", available_, " of ",
                           need_, " bytes present)");
  }

  const StreamState& state() const { return state_; }

 private:
  enum class Phase { kPrefix, kLength, kMetadata, kBody, kEnded };

  Status Drive() {
    while (phase_ != Phase::kEnded && available_ >= need_) {
      ALKAID_ASSIGN_OR_RAISE(auto bytes, Take(need_));
      ALKAID_RETURN_NOT_OK(Step(std::move(bytes)));
    }
    if (phase_ == Phase::kEnded && available_ > 0) {
      return Status::Invalid("data after the end-of-stream marker");
    }
    return Status::OK();
  }

  Status OnLength(int32_t length) {
    if (length == 0) {
      phase_ = Phase::kEnded;
      need_ = 0;
      return listener_->OnEndOfStream();
    }
    if (length < 0) {
      return Status::Invalid("message #", state_.stats().num_messages, ": metadata length ", length,
                             " is negative");
    }
    phase_ = Phase::kMetadata;
    need_ = length;
    return Status::OK();
  }

  Status Step(std::shared_ptr<Buffer> bytes) {
    switch (phase_) {
      case Phase::kPrefix: {
        if (internal::LoadUInt32LE(bytes->data()) == kIpcContinuationToken) {
          phase_ = Phase::kLength;
          need_ = 4;
          return Status::OK();
        }
        return OnLength(internal::LoadInt32LE(bytes->data()));  // legacy framing
      }
      case Phase::kLength:
        return OnLength(internal::LoadInt32LE(bytes->data()));
      case Phase::kMetadata: {
        ALKAID_ASSIGN_OR_RAISE(metadata_,
                               internal::EnsureAligned(std::move(bytes), 8, options_.pool));
        auto info = internal::VerifyMessage(metadata_->data(), metadata_->size(),
                                            options_.max_recursion_depth);
        if (!info.ok()) {
          return info.status().WithContext("message #" +
                                           std::to_string(state_.stats().num_messages));
        }
        if (info->body_length == 0) return Deliver(nullptr);
        phase_ = Phase::kBody;
        need_ = info->body_length;
        return Status::OK();
      }
      case Phase::kBody:
        return Deliver(std::move(bytes));
      case Phase::kEnded:
        break;
    }
    return Status::Invalid("data after the end-of-stream marker");
  }

  Status Deliver(std::shared_ptr<Buffer> body) {
    phase_ = Phase::kPrefix;
    need_ = 4;
    ALKAID_ASSIGN_OR_RAISE(auto batch, state_.ProcessPlanned(*metadata_, body));
    if (batch == nullptr) {
      // No plan took it: a Message, of the metadata Step verified (its
      // fixed part read again, not verified again).
      ALKAID_ASSIGN_OR_RAISE(auto info, internal::ReadMessageInfo(metadata_->data()));
      ALKAID_ASSIGN_OR_RAISE(
          auto message,
          internal::MessageAccess::Make(std::move(metadata_), std::move(body), std::move(info)));
      const bool had_schema = state_.schema() != nullptr;
      ALKAID_ASSIGN_OR_RAISE(batch, state_.Process(*message));
      if (!had_schema && state_.schema() != nullptr) {
        ALKAID_RETURN_NOT_OK(listener_->OnSchema(state_.schema()));
      }
    }
    if (batch != nullptr) ALKAID_RETURN_NOT_OK(listener_->OnRecordBatch(std::move(batch)));
    return Status::OK();
  }

  // Removes the first `n` bytes (n <= available_) from the pending chunks:
  // a zero-copy slice when they lie in one chunk, else a copy.
  Result<std::shared_ptr<Buffer>> Take(int64_t n) {
    auto& front = chunks_.front();
    const int64_t in_front = front->size() - front_offset_;
    std::shared_ptr<Buffer> out;
    if (in_front >= n) {
      out = SliceBuffer(front, front_offset_, n);
      front_offset_ += n;
      if (front_offset_ == front->size()) {
        chunks_.pop_front();
        front_offset_ = 0;
      }
    } else {
      ALKAID_ASSIGN_OR_RAISE(auto copy, AllocateBuffer(n, options_.pool));
      int64_t pos = 0;
      while (pos < n) {
        auto& c = chunks_.front();
        const int64_t k = std::min(n - pos, c->size() - front_offset_);
        std::memcpy(copy->mutable_data() + pos, c->data() + front_offset_, static_cast<size_t>(k));
        pos += k;
        front_offset_ += k;
        if (front_offset_ == c->size()) {
          chunks_.pop_front();
          front_offset_ = 0;
        }
      }
      out = std::move(copy);
    }
    available_ -= n;
    return out;
  }

  std::shared_ptr<StreamListener> listener_;
  IpcReadOptions options_;
  StreamState state_;
  std::deque<std::shared_ptr<Buffer>> chunks_;
  int64_t front_offset_ = 0;
  int64_t available_ = 0;
  Phase phase_ = Phase::kPrefix;
  int64_t need_ = 4;
  std::shared_ptr<Buffer> metadata_;  // verified (Step, kMetadata)
  Status error_;
};

StreamDecoder::StreamDecoder(std::shared_ptr<StreamListener> listener, IpcReadOptions options)
    : impl_(std::make_unique<Impl>(std::move(listener), options)) {}
StreamDecoder::~StreamDecoder() = default;

Status StreamDecoder::Consume(const uint8_t* data, int64_t size) {
  if (size < 0) return Status::Invalid("Consume: negative size ", size);
  if (size == 0) return Status::OK();
  ALKAID_ASSIGN_OR_RAISE(auto copy,
                         Buffer::CopyOf(std::string_view(reinterpret_cast<const char*>(data),
                                                         static_cast<size_t>(size))));
  return impl_->Consume(std::move(copy));
}
Status StreamDecoder::Consume(std::shared_ptr<Buffer> buffer) {
  return impl_->Consume(std::move(buffer));
}
int64_t StreamDecoder::next_required_size() const { return impl_->next_required_size(); }
SchemaPtr StreamDecoder::schema() const { return impl_->state().schema(); }
const DictionaryMemo& StreamDecoder::dictionary_memo() const { return impl_->state().memo(); }
ReadStats StreamDecoder::stats() const { return impl_->state().stats(); }
Status StreamDecoder::Finish() { return impl_->Finish(); }

// ---------------------------------------------------------------------------
// RecordBatchStreamReader

namespace {

class StreamReaderImpl : public RecordBatchStreamReader {
 public:
  StreamReaderImpl(InputStream* stream, std::shared_ptr<InputStream> owned,
                   const IpcReadOptions& options)
      : stream_(stream), owned_(std::move(owned)), options_(options), state_(options) {}

  Status Init() {
    ALKAID_ASSIGN_OR_RAISE(auto message, Next());
    if (message == nullptr) return Status::Invalid("empty stream: no schema message");
    return state_.Process(*message).status();
  }

  const SchemaPtr& schema() const override { return state_.schema(); }

  Result<RecordBatchPtr> ReadNext() override {
    if (ended_) return RecordBatchPtr();
    while (true) {
      ALKAID_ASSIGN_OR_RAISE(auto message, Next());
      if (message == nullptr) {
        ended_ = true;
        return RecordBatchPtr();
      }
      ALKAID_ASSIGN_OR_RAISE(auto batch, state_.Process(*message));
      if (batch != nullptr) return batch;
    }
  }

  const DictionaryMemo& dictionary_memo() const override { return state_.memo(); }
  ReadStats stats() const override { return state_.stats(); }

 private:
  Result<std::unique_ptr<Message>> Next() {
    auto r = ReadMessage(stream_, options_);
    if (!r.ok()) {
      return r.status().WithContext("message #" + std::to_string(state_.stats().num_messages));
    }
    return r;
  }

  InputStream* stream_;
  std::shared_ptr<InputStream> owned_;
  IpcReadOptions options_;
  StreamState state_;
  bool ended_ = false;
};

}  // namespace

Result<std::unique_ptr<RecordBatchStreamReader>> RecordBatchStreamReader::Open(
    InputStream* stream, const IpcReadOptions& options) {
  if (stream == nullptr) return Status::Invalid("RecordBatchStreamReader: stream is null");
  auto reader = std::make_unique<StreamReaderImpl>(stream, nullptr, options);
  ALKAID_RETURN_NOT_OK(reader->Init());
  return std::unique_ptr<RecordBatchStreamReader>(std::move(reader));
}

Result<std::unique_ptr<RecordBatchStreamReader>> RecordBatchStreamReader::Open(
    std::shared_ptr<InputStream> stream, const IpcReadOptions& options) {
  if (stream == nullptr) return Status::Invalid("RecordBatchStreamReader: stream is null");
  InputStream* raw = stream.get();
  auto reader = std::make_unique<StreamReaderImpl>(raw, std::move(stream), options);
  ALKAID_RETURN_NOT_OK(reader->Init());
  return std::unique_ptr<RecordBatchStreamReader>(std::move(reader));
}

Result<std::vector<RecordBatchPtr>> RecordBatchStreamReader::ReadAll() {
  std::vector<RecordBatchPtr> out;
  while (true) {
    ALKAID_ASSIGN_OR_RAISE(auto batch, ReadNext());
    if (batch == nullptr) return out;
    out.push_back(std::move(batch));
  }
}

// ---------------------------------------------------------------------------
// RecordBatchFileReader

namespace {
constexpr std::string_view kAlkaidMagic = "ALKAID1";
constexpr std::string_view kArrowMagic = "ARROW1";
}  // namespace

struct RecordBatchFileReader::Impl {
  std::shared_ptr<RandomAccessFile> file;
  IpcReadOptions options;
  FileMagic magic = FileMagic::kAlkaid;
  internal::FooterMeta footer;
  DictionaryMemo memo;

  Status Open() {
    ALKAID_ASSIGN_OR_RAISE(int64_t size, file->GetSize());
    if (size < 8 + 4 + 6) {
      return Status::Invalid("not an IPC file: ", size, " bytes is too small");
    }
    ALKAID_ASSIGN_OR_RAISE(auto tail, file->ReadAt(size - 11, 11));
    if (tail->size() != 11) return Status::IOError("short read of the file trailer");
    std::string_view tv = tail->view();
    int64_t magic_len;
    if (tv.substr(11 - kAlkaidMagic.size()) == kAlkaidMagic) {
      magic = FileMagic::kAlkaid;
      magic_len = static_cast<int64_t>(kAlkaidMagic.size());
    } else if (tv.substr(11 - kArrowMagic.size()) == kArrowMagic) {
      magic = FileMagic::kArrow;
      magic_len = static_cast<int64_t>(kArrowMagic.size());
    } else {
      return Status::Invalid("not an IPC file: no trailing 'ALKAID1' or 'ARROW1' magic");
    }
    const std::string_view expected = magic == FileMagic::kAlkaid ? kAlkaidMagic : kArrowMagic;
    ALKAID_ASSIGN_OR_RAISE(auto head, file->ReadAt(0, 8));
    if (head->size() != 8 || head->view().substr(0, expected.size()) != expected) {
      return Status::Invalid("not an IPC file: the leading magic is not '", expected, "'");
    }
    const int32_t footer_len =
        internal::LoadInt32LE(reinterpret_cast<const uint8_t*>(tv.data()) + 11 - magic_len - 4);
    const int64_t footer_end = size - magic_len - 4;
    if (footer_len <= 0 || footer_len > footer_end - 8) {
      return Status::Invalid("file footer length ", footer_len, " does not fit the ", size,
                             "-byte file");
    }
    ALKAID_ASSIGN_OR_RAISE(auto footer_buf, file->ReadAt(footer_end - footer_len, footer_len));
    if (footer_buf->size() != footer_len) return Status::IOError("short read of the footer");
    ALKAID_ASSIGN_OR_RAISE(footer_buf, internal::EnsureAligned(footer_buf, 8, options.pool));
    ALKAID_ASSIGN_OR_RAISE(footer, internal::ReadFooter(footer_buf->data(), footer_buf->size(),
                                                        &memo, options.max_recursion_depth));
    for (size_t i = 0; i < footer.dictionaries.size(); ++i) {
      Status st = ReadDictionaryBlock(footer.dictionaries[i]);
      if (!st.ok()) return st.WithContext("dictionary block " + std::to_string(i));
    }
    if (!footer.version_in_footer) {
      // An old writer's footer: the file's version is its messages' (each
      // of which is checked when read).
      const std::vector<internal::BlockMeta>& blocks =
          footer.record_batches.empty() ? footer.dictionaries : footer.record_batches;
      if (!blocks.empty()) {
        ALKAID_ASSIGN_OR_RAISE(auto first, ReadBlock(blocks.front()));
        footer.version = first->version();
      } else {
        footer.version = MetadataVersion::kV4;  // no message: the oldest we read
      }
    }
    return Status::OK();
  }

  Result<std::unique_ptr<Message>> ReadBlock(const internal::BlockMeta& block) const {
    return ReadMessage(file.get(), block.offset, block.metadata_length, block.body_length, options);
  }

  Status ReadDictionaryBlock(const internal::BlockMeta& block) {
    ALKAID_ASSIGN_OR_RAISE(auto message, ReadBlock(block));
    return ReadDictionary(*message, &memo, options, /*allow_replacement=*/false).status();
  }
};

RecordBatchFileReader::RecordBatchFileReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RecordBatchFileReader::~RecordBatchFileReader() = default;

Result<std::shared_ptr<RecordBatchFileReader>> RecordBatchFileReader::Open(
    std::shared_ptr<RandomAccessFile> file, const IpcReadOptions& options) {
  if (file == nullptr) return Status::Invalid("RecordBatchFileReader: file is null");
  auto impl = std::make_unique<Impl>();
  impl->file = std::move(file);
  impl->options = options;
  ALKAID_RETURN_NOT_OK(impl->Open());
  return std::shared_ptr<RecordBatchFileReader>(new RecordBatchFileReader(std::move(impl)));
}

const SchemaPtr& RecordBatchFileReader::schema() const { return impl_->footer.schema; }
int RecordBatchFileReader::num_record_batches() const {
  return static_cast<int>(impl_->footer.record_batches.size());
}
int RecordBatchFileReader::num_dictionaries() const {
  return static_cast<int>(impl_->footer.dictionaries.size());
}
FileMagic RecordBatchFileReader::magic() const { return impl_->magic; }
MetadataVersion RecordBatchFileReader::version() const { return impl_->footer.version; }
const MetadataPtr& RecordBatchFileReader::footer_metadata() const {
  return impl_->footer.custom_metadata;
}
const DictionaryMemo& RecordBatchFileReader::dictionary_memo() const { return impl_->memo; }

Result<RecordBatchPtr> RecordBatchFileReader::ReadRecordBatch(int i) const {
  if (i < 0 || i >= num_record_batches()) {
    return Status::IndexError("record batch ", i, " out of range: the file has ",
                              num_record_batches());
  }
  auto read = [&]() -> Result<RecordBatchPtr> {
    ALKAID_ASSIGN_OR_RAISE(auto message,
                           impl_->ReadBlock(impl_->footer.record_batches[static_cast<size_t>(i)]));
    return ipc::ReadRecordBatch(*message, impl_->footer.schema, &impl_->memo, impl_->options);
  };
  auto r = read();
  if (!r.ok()) return r.status().WithContext("record batch " + std::to_string(i));
  return r;
}

}  // namespace alkaid::format::ipc
