#include "alkaid/client/row_channel.h"

#include <cstring>
#include <span>
#include <string_view>
#include <utility>

#include "alkaid/format/unsafe_row.h"
#include "row_record_internal.h"

namespace alkaid::client {

using internal::RowBatchRecord;

namespace {

// Owner of a received block (which keeps the consumer's mappings).
struct RowBodyOwner {
  shm::ChannelBlock block;
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

Result<std::unique_ptr<RowPublisher>> RowPublisher::Create(shm::ChannelProducer* channel,
                                                           format::SchemaPtr schema) {
  if (channel == nullptr || schema == nullptr) {
    return Status::Invalid("RowPublisher: null channel or schema");
  }
  ALKAID_RETURN_NOT_OK(format::CheckRowSchema(*schema));
  if (channel->options().inline_capacity < sizeof(RowBatchRecord)) {
    return Status::Invalid("RowPublisher: channel '", channel->name(), "' has ",
                           channel->options().inline_capacity,
                           " inline bytes per slot, less than a row batch record");
  }
  return std::unique_ptr<RowPublisher>(new RowPublisher(channel, std::move(schema)));
}

Status RowPublisher::PublishRows(const format::RecordBatch& batch) {
  if (!batch.schema()->Equals(*schema_)) {
    return Status::Invalid("RowPublisher: the batch's schema ", batch.schema()->ToString(),
                           " is not the topic's ", schema_->ToString());
  }
  // Sized first, then encoded straight into the block: no private copy of
  // the rows, no memcpy of the body.
  ALKAID_ASSIGN_OR_RAISE(int64_t size, format::EncodedRowBatchSize(batch));
  ALKAID_ASSIGN_OR_RAISE(shm::ChannelLoan loan, channel_->Loan(static_cast<uint64_t>(size)));
  const std::span<std::byte> bytes = loan.data();
  ALKAID_ASSIGN_OR_RAISE(
      int64_t written,
      format::EncodeRowBatchInto(
          batch, std::span<uint8_t>(reinterpret_cast<uint8_t*>(bytes.data()), bytes.size())));
  if (written != size) {
    return Status::Invalid("RowPublisher: the row batch was sized at ", size,
                           " bytes but encoded into ", written);
  }
  return Publish(&loan, static_cast<uint64_t>(size), batch.num_rows());
}

Status RowPublisher::PublishRowBatch(std::span<const uint8_t> row_batch) {
  const std::string_view view(reinterpret_cast<const char*>(row_batch.data()), row_batch.size());
  ALKAID_ASSIGN_OR_RAISE(auto rows, format::SplitRowBatch(view));
  // The caller's bytes live elsewhere: this is the one copy of the path.
  ALKAID_ASSIGN_OR_RAISE(shm::ChannelLoan loan, channel_->Loan(row_batch.size()));
  if (!row_batch.empty()) std::memcpy(loan.data().data(), row_batch.data(), row_batch.size());
  ALKAID_RETURN_NOT_OK(Publish(&loan, row_batch.size(), static_cast<int64_t>(rows.size())));
  copied_bytes_ += row_batch.size();
  return Status::OK();
}

Status RowPublisher::Publish(shm::ChannelLoan* loan, uint64_t body_length, int64_t num_rows) {
  RowBatchRecord record;
  record.body_length = body_length;
  record.num_rows = static_cast<uint64_t>(num_rows);
  std::byte payload[sizeof(RowBatchRecord)];
  std::memcpy(payload, &record, sizeof(record));
  // On success the channel takes the loan; on error the caller drops it
  // (back to the arena).
  return channel_->Publish(payload, std::move(*loan));
}

// ---- RowSubscriber ---------------------------------------------------------------

struct RowSubscriber::Impl {
  format::SchemaPtr schema;
  std::vector<int> columns;
  Verification verification = Verification::kStructure;
  std::unique_ptr<shm::ChannelConsumer> consumer;
  shm::ChannelMessage message;
};

RowSubscriber::RowSubscriber(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RowSubscriber::~RowSubscriber() = default;

Result<std::unique_ptr<RowSubscriber>> RowSubscriber::Open(
    std::string_view channel_name, format::SchemaPtr schema, std::vector<int> columns,
    const shm::ChannelConsumerOptions& options, Verification verification) {
  if (schema == nullptr) return Status::Invalid("RowSubscriber: null schema");
  ALKAID_RETURN_NOT_OK(format::CheckRowSchema(*schema));
  auto impl = std::make_unique<Impl>();
  impl->schema = std::move(schema);
  impl->columns = std::move(columns);
  impl->verification = verification;
  ALKAID_ASSIGN_OR_RAISE(impl->consumer, shm::ChannelConsumer::Open(channel_name, options));
  return std::unique_ptr<RowSubscriber>(new RowSubscriber(std::move(impl)));
}

const shm::ChannelConsumer& RowSubscriber::consumer() const { return *impl_->consumer; }
uint64_t RowSubscriber::last_publish_ns() const { return impl_->message.publish_ns(); }
shm::ChannelConsumer& RowSubscriber::mutable_consumer() { return *impl_->consumer; }

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
  shm::ChannelMessage& m = d.message;
  const auto where = [&] {
    return "channel '" + d.consumer->name() + "' message " + std::to_string(m.sequence());
  };
  const auto payload = m.payload();
  if (payload.size() < sizeof(RowBatchRecord)) {
    return Status::Invalid(where(), ": inline payload of ", payload.size(),
                           " bytes is shorter than a row batch record (32)");
  }
  RowBatchRecord record;
  std::memcpy(&record, payload.data(), sizeof(record));
  if (record.magic != internal::kRowRecordMagic || record.version != internal::kRowRecordVersion ||
      record.flags != 0) {
    return Status::Invalid(where(), ": not a row batch record (magic ", record.magic, ", version ",
                           record.version, ", flags ", record.flags, ")");
  }
  if (!m.has_body()) return Status::Invalid(where(), ": row batch message without a body");
  const uint64_t block_length = m.body().size();
  if (record.body_length > block_length) {
    return Status::Invalid(where(), ": row batch of ", record.body_length,
                           " bytes does not fit its ", block_length, "-byte block");
  }
  ReceivedRows out;
  if (d.verification == Verification::kPrivateCopy) {
    // A producer that rewrites the block while we copy only changes what
    // the copy holds; the copy is what gets checked and read.
    shm::ChannelBlock block = m.TakeBody();
    const std::span<const std::byte> body = block.data().first(record.body_length);
    ALKAID_ASSIGN_OR_RAISE(out.data, format::Buffer::CopyOf(std::string_view(
                                         reinterpret_cast<const char*>(body.data()), body.size())));
  } else {
    auto owner = std::make_shared<RowBodyOwner>();
    owner->block = m.TakeBody();
    const auto* bytes = reinterpret_cast<const uint8_t*>(owner->block.data().data());
    out.data =
        std::make_shared<format::Buffer>(bytes, static_cast<int64_t>(record.body_length), owner);
  }
  // The size prefixes are read once here; in shared memory the producer
  // could still change the bytes later, which is why every decode checks
  // them again.
  ALKAID_ASSIGN_OR_RAISE(auto rows, out.Rows());
  if (rows.size() != record.num_rows) {
    return Status::Invalid(where(), ": the record announces ", record.num_rows,
                           " rows, the row batch holds ", rows.size());
  }
  if (d.verification != Verification::kStructure) {
    // The full check is a decode: it reads and checks every row.
    const Status decoded = format::DecodeRowBatch(*out.data, d.schema).status();
    if (!decoded.ok()) return decoded.WithContext(where());
  }
  out.num_rows = static_cast<int64_t>(rows.size());
  out.row_schema = d.schema;
  out.columns = d.columns;
  out.sequence = m.sequence();
  out.lost_before = m.lost_before();
  return out;
}

}  // namespace alkaid::client
