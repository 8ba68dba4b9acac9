#include "alkaid/client/row_channel.h"

#include <cstring>
#include <utility>

#include "alkaid/format/unsafe_row.h"
#include "row_descriptor_internal.h"

namespace alkaid::client {

using internal::RowDescriptor;

namespace {

// Owner of a received block: the reference, and the reader (hence the
// mapping) it must not outlive. Destroyed in reverse order: reference first.
struct RowBodyOwner {
  std::shared_ptr<shm::BodyReader> reader;
  shm::BlockRef ref;
};

std::string_view AsView(const format::Buffer& buffer) {
  return {reinterpret_cast<const char*>(buffer.data()), static_cast<std::size_t>(buffer.size())};
}

}  // namespace

// ---- ReceivedRows ------------------------------------------------------------

Result<std::vector<std::string_view>> ReceivedRows::Rows() const {
  if (data == nullptr) return Status::Invalid("ReceivedRows: no data");
  return format::SplitRowBatch(AsView(*data));
}

Result<format::RecordBatchPtr> ReceivedRows::ToRecordBatch(format::MemoryPool* pool) const {
  if (data == nullptr) return Status::Invalid("ReceivedRows: no data");
  ALKAID_ASSIGN_OR_RAISE(auto batch, format::DecodeRowBatch(*data, row_schema, pool));
  if (columns.empty()) return batch;
  format::FieldVector fields;
  std::vector<format::ArrayDataPtr> kept;
  for (int index : columns) {
    if (index < 0 || index >= batch->num_columns()) {
      return Status::IndexError("ReceivedRows: column index ", index, " outside the ",
                                batch->num_columns(), " columns");
    }
    fields.push_back(batch->schema()->field(index));
    kept.push_back(batch->column_data(index));
  }
  return format::RecordBatch::Make(format::schema(std::move(fields), batch->schema()->metadata()),
                                   batch->num_rows(), std::move(kept));
}

// ---- RowPublisher --------------------------------------------------------------

RowPublisher::~RowPublisher() = default;

Result<std::unique_ptr<RowPublisher>> RowPublisher::Create(shm::RingProducer* ring,
                                                           shm::BodyAllocator* bodies,
                                                           format::SchemaPtr schema) {
  if (ring == nullptr || bodies == nullptr || schema == nullptr) {
    return Status::Invalid("RowPublisher: null ring, body allocator or schema");
  }
  ALKAID_RETURN_NOT_OK(format::CheckRowSchema(*schema));
  if (ring->options().inline_capacity < sizeof(RowDescriptor)) {
    return Status::Invalid("RowPublisher: ring '", ring->name(), "' has ",
                           ring->options().inline_capacity,
                           " inline bytes per slot, less than a row descriptor");
  }
  return std::unique_ptr<RowPublisher>(new RowPublisher(ring, bodies, std::move(schema)));
}

Status RowPublisher::PublishRows(const format::RecordBatch& batch) {
  if (!batch.schema()->Equals(*schema_)) {
    return Status::Invalid("RowPublisher: the batch's schema ", batch.schema()->ToString(),
                           " is not the topic's ", schema_->ToString());
  }
  // Sized first, then encoded straight into the block: no private copy of
  // the rows, no memcpy of the body.
  ALKAID_ASSIGN_OR_RAISE(int64_t size, format::EncodedRowBatchSize(batch));
  ALKAID_ASSIGN_OR_RAISE(shm::WritableBlock block, bodies_->Allocate(static_cast<uint64_t>(size)));
  const std::span<std::byte> bytes = block.data();
  ALKAID_ASSIGN_OR_RAISE(
      int64_t written,
      format::EncodeRowBatchInto(
          batch, std::span<uint8_t>(reinterpret_cast<uint8_t*>(bytes.data()), bytes.size())));
  if (written != size) {
    return Status::Invalid("RowPublisher: the row batch was sized at ", size,
                           " bytes but encoded into ", written);
  }
  return Publish(block, static_cast<uint64_t>(size), batch.num_rows());
}

Status RowPublisher::PublishRowBatch(std::span<const uint8_t> row_batch) {
  const std::string_view view(reinterpret_cast<const char*>(row_batch.data()), row_batch.size());
  ALKAID_ASSIGN_OR_RAISE(auto rows, format::SplitRowBatch(view));
  // The caller's bytes live elsewhere: this is the one copy of the path.
  ALKAID_ASSIGN_OR_RAISE(shm::WritableBlock block, bodies_->Allocate(row_batch.size()));
  if (!row_batch.empty()) std::memcpy(block.data().data(), row_batch.data(), row_batch.size());
  ALKAID_RETURN_NOT_OK(Publish(block, row_batch.size(), static_cast<int64_t>(rows.size())));
  copied_bytes_ += row_batch.size();
  return Status::OK();
}

Status RowPublisher::Publish(shm::WritableBlock& block, uint64_t body_length, int64_t num_rows) {
  RowDescriptor descriptor;
  descriptor.body_length = body_length;
  descriptor.num_rows = static_cast<uint64_t>(num_rows);
  std::byte payload[sizeof(RowDescriptor)];
  std::memcpy(payload, &descriptor, sizeof(descriptor));
  // On success the ring owns the producer reference; on error `block`
  // still holds it and the caller drops it.
  return ring_->Publish(payload, block);
}

// ---- RowSubscriber ---------------------------------------------------------------

struct RowSubscriber::Impl {
  format::SchemaPtr schema;
  std::vector<int> columns;
  // Before the consumer: its messages hold references through the reader.
  std::shared_ptr<shm::BodyReader> reader;
  std::unique_ptr<shm::RingConsumer> consumer;
  shm::RingMessage message;
};

RowSubscriber::RowSubscriber(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RowSubscriber::~RowSubscriber() = default;

Result<std::unique_ptr<RowSubscriber>> RowSubscriber::Open(std::string_view ring_name,
                                                           std::string_view bodies_name,
                                                           format::SchemaPtr schema,
                                                           std::vector<int> columns,
                                                           const shm::ConsumerOptions& options) {
  if (schema == nullptr) return Status::Invalid("RowSubscriber: null schema");
  ALKAID_RETURN_NOT_OK(format::CheckRowSchema(*schema));
  auto impl = std::make_unique<Impl>();
  impl->schema = std::move(schema);
  impl->columns = std::move(columns);
  ALKAID_ASSIGN_OR_RAISE(std::unique_ptr<shm::BodyReader> reader,
                         shm::BodyReader::Open(bodies_name));
  impl->reader = std::move(reader);
  shm::ConsumerOptions co = options;
  co.bodies = impl->reader.get();
  ALKAID_ASSIGN_OR_RAISE(impl->consumer, shm::RingConsumer::Open(ring_name, co));
  return std::unique_ptr<RowSubscriber>(new RowSubscriber(std::move(impl)));
}

const shm::RingConsumer& RowSubscriber::consumer() const { return *impl_->consumer; }

Result<ReceivedRows> RowSubscriber::Receive(std::chrono::nanoseconds timeout) {
  ALKAID_RETURN_NOT_OK(impl_->consumer->Receive(&impl_->message, timeout));
  return Decode();
}

Result<ReceivedRows> RowSubscriber::TryReceive() {
  ALKAID_ASSIGN_OR_RAISE(bool got, impl_->consumer->TryReceive(&impl_->message));
  if (!got) return ReceivedRows{};
  return Decode();
}

Result<ReceivedRows> RowSubscriber::Decode() {
  Impl& d = *impl_;
  shm::RingMessage& m = d.message;
  const auto where = [&] { return "ring '" + d.consumer->name() + "' message " +
                                  std::to_string(m.sequence()); };
  const auto payload = m.payload();
  if (payload.size() < sizeof(RowDescriptor)) {
    return Status::Invalid(where(), ": inline payload of ", payload.size(),
                           " bytes is shorter than a row descriptor (32)");
  }
  RowDescriptor descriptor;
  std::memcpy(&descriptor, payload.data(), sizeof(descriptor));
  if (descriptor.magic != internal::kRowDescriptorMagic ||
      descriptor.version != internal::kRowDescriptorVersion || descriptor.flags != 0) {
    return Status::Invalid(where(), ": not a row batch descriptor (magic ", descriptor.magic,
                           ", version ", descriptor.version, ", flags ", descriptor.flags, ")");
  }
  if (!m.body().valid()) return Status::Invalid(where(), ": row batch message without a body");
  const uint64_t block_length = m.body().data().size();
  if (descriptor.body_length > block_length) {
    return Status::Invalid(where(), ": row batch of ", descriptor.body_length,
                           " bytes does not fit its ", block_length, "-byte block");
  }
  auto owner = std::make_shared<RowBodyOwner>();
  owner->reader = d.reader;
  owner->ref = m.TakeBody();
  const auto* bytes = reinterpret_cast<const uint8_t*>(owner->ref.data().data());
  ReceivedRows out;
  out.data = std::make_shared<format::Buffer>(bytes, static_cast<int64_t>(descriptor.body_length),
                                              owner);
  // The size prefixes are read once here; the producer could still change
  // the bytes later, which is why every decode checks them again.
  ALKAID_ASSIGN_OR_RAISE(auto rows, out.Rows());
  if (rows.size() != descriptor.num_rows) {
    return Status::Invalid(where(), ": the descriptor announces ", descriptor.num_rows,
                           " rows, the row batch holds ", rows.size());
  }
  out.num_rows = static_cast<int64_t>(rows.size());
  out.row_schema = d.schema;
  out.columns = d.columns;
  out.sequence = m.sequence();
  out.lost_before = m.lost_before();
  return out;
}

}  // namespace alkaid::client
