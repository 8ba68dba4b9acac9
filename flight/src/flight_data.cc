#include "flight_data_internal.h"

#include <cstring>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"

namespace alkaid::flight::internal {

namespace ipc = format::ipc;

ipc::IpcWriteOptions FlightWriteOptions() {
  ipc::IpcWriteOptions options;
  options.alignment = 8;
  options.extension_metadata_namespace = "ARROW";
  return options;
}

Result<std::string> SerializeSchema(const format::Schema& schema) {
  ipc::DictionaryMemo ids;
  ALKAID_RETURN_NOT_OK(ids.AssignIds(schema));
  const ipc::IpcWriteOptions options = FlightWriteOptions();
  ALKAID_ASSIGN_OR_RAISE(auto payload, ipc::GetSchemaPayload(schema, ids, options));
  ALKAID_ASSIGN_OR_RAISE(auto sink, ipc::BufferOutputStream::Create());
  ALKAID_RETURN_NOT_OK(ipc::WriteIpcPayload(payload, options, sink.get()).status());
  ALKAID_ASSIGN_OR_RAISE(auto bytes, sink->Finish());
  return bytes->ToString();
}

Result<format::SchemaPtr> DeserializeSchema(const std::string& bytes) {
  ipc::BufferReader reader(format::Buffer::FromString(bytes));
  ALKAID_ASSIGN_OR_RAISE(auto message, ipc::ReadMessage(&reader));
  if (message == nullptr || message->type() != ipc::MessageType::kSchema) {
    return Status::Invalid("schema bytes: no encapsulated Schema message");
  }
  ipc::DictionaryMemo memo;
  return ipc::ReadSchema(*message, &memo);
}

Status PayloadToFlightData(const ipc::IpcPayload& payload, pb::FlightData* out) {
  out->set_data_header(payload.metadata == nullptr ? std::string() : payload.metadata->ToString());
  std::string* body = out->mutable_data_body();
  body->assign(static_cast<size_t>(payload.body_length), '\0');
  int64_t offset = 0;
  for (size_t i = 0; i < payload.body_buffers.size(); ++i) {
    const auto& buffer = payload.body_buffers[i];
    if (!payload.body_offsets.empty()) offset = payload.body_offsets[i];
    const int64_t size = buffer == nullptr ? 0 : buffer->size();
    if (offset < 0 || offset + size > payload.body_length) {
      return Status::Invalid("body buffer ", i, " at ", offset, " (", size,
                             " bytes) ends past the ", payload.body_length, "-byte body");
    }
    if (size > 0) std::memcpy(body->data() + offset, buffer->data(), static_cast<size_t>(size));
    if (payload.body_offsets.empty()) {
      const int64_t a = payload.alignment > 0 ? payload.alignment : 8;
      offset += (size + a - 1) / a * a;
    }
  }
  return Status::OK();
}

Result<std::unique_ptr<ipc::Message>> FlightDataToMessage(
    const std::shared_ptr<pb::FlightData>& data) {
  if (data->data_header().empty()) {
    return Status::Invalid("FlightData without data_header (no IPC message)");
  }
  const std::string& header = data->data_header();
  const std::string& body = data->data_body();
  // Both views keep the whole FlightData alive: no byte is copied.
  auto metadata = std::make_shared<format::Buffer>(reinterpret_cast<const uint8_t*>(header.data()),
                                                   static_cast<int64_t>(header.size()), data);
  auto body_buffer = std::make_shared<format::Buffer>(reinterpret_cast<const uint8_t*>(body.data()),
                                                      static_cast<int64_t>(body.size()), data);
  return ipc::Message::Open(std::move(metadata), std::move(body_buffer));
}

PutDecoder::PutDecoder(int64_t max_message_bytes) : max_message_bytes_(max_message_bytes) {
  options_.max_decompressed_size = max_message_bytes;
}

Status PutDecoder::CheckSize(const pb::FlightData& data) const {
  const auto check = [this](const char* part, size_t size) {
    if (size <= static_cast<uint64_t>(max_message_bytes_)) return Status::OK();
    return Status::Invalid("the message's ", part, " is ", size,
                           " bytes, over the server's limit of ", max_message_bytes_,
                           " bytes (--max-message-bytes)");
  };
  ALKAID_RETURN_NOT_OK(check("data_header", data.data_header().size()));
  return check("data_body", data.data_body().size());
}

Status PutDecoder::Start(const std::shared_ptr<pb::FlightData>& first) {
  ALKAID_RETURN_NOT_OK(CheckSize(*first));
  ALKAID_ASSIGN_OR_RAISE(auto message, FlightDataToMessage(first));
  if (message->type() != ipc::MessageType::kSchema) {
    return Status::Invalid("the first message is a ", ipc::MessageTypeName(message->type()),
                           " message, not the schema");
  }
  ALKAID_ASSIGN_OR_RAISE(schema_, ipc::ReadSchema(*message, &memo_, options_));
  return Status::OK();
}

Result<format::RecordBatchPtr> PutDecoder::Next(const std::shared_ptr<pb::FlightData>& data) {
  if (schema_ == nullptr) return Status::Invalid("a message before the schema");
  ALKAID_RETURN_NOT_OK(CheckSize(*data));
  ALKAID_ASSIGN_OR_RAISE(auto message, FlightDataToMessage(data));
  switch (message->type()) {
    case ipc::MessageType::kDictionaryBatch:
      ALKAID_RETURN_NOT_OK(ipc::ReadDictionary(*message, &memo_, options_).status());
      return format::RecordBatchPtr();
    case ipc::MessageType::kRecordBatch:
      return ipc::ReadRecordBatch(*message, schema_, &memo_, options_);
    case ipc::MessageType::kSchema:
      break;
  }
  return Status::Invalid("a second schema message");
}

namespace {
constexpr std::string_view kOldest = "oldest/";
constexpr std::string_view kLive = "live/";
}  // namespace

std::string MakeTicket(const std::string& topic, bool from_oldest) {
  return std::string(from_oldest ? kOldest : kLive) + topic;
}

Result<ParsedTicket> ParseTicket(const std::string& ticket) {
  ParsedTicket parsed;
  std::string_view t = ticket;
  if (t.starts_with(kOldest)) {
    parsed.from_oldest = true;
    t.remove_prefix(kOldest.size());
  } else if (t.starts_with(kLive)) {
    t.remove_prefix(kLive.size());
  } else {
    return Status::Invalid("ticket '", ticket, "' is not oldest/TOPIC or live/TOPIC");
  }
  if (t.empty()) return Status::Invalid("ticket '", ticket, "' names no topic");
  parsed.topic = std::string(t);
  return parsed;
}

Result<std::string> DescriptorTopic(const pb::FlightDescriptor& descriptor) {
  if (descriptor.type() != pb::FlightDescriptor::PATH || descriptor.path_size() != 1 ||
      descriptor.path(0).empty()) {
    return Status::Invalid(
        "flight descriptor must be a PATH of one element, the topic's name (got type ",
        static_cast<int>(descriptor.type()), ", ", descriptor.path_size(), " path elements)");
  }
  return descriptor.path(0);
}

grpc::Status ToGrpc(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (status.code()) {
    case StatusCode::kKeyError:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case StatusCode::kInvalid:
    case StatusCode::kTypeError:
    case StatusCode::kIndexError:
    case StatusCode::kSerializationError:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case StatusCode::kPermissionDenied:
      code = grpc::StatusCode::PERMISSION_DENIED;
      break;
    case StatusCode::kAlreadyExists:
      code = grpc::StatusCode::ALREADY_EXISTS;
      break;
    case StatusCode::kTimedOut:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    case StatusCode::kIOError:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case StatusCode::kCancelled:
      code = grpc::StatusCode::CANCELLED;
      break;
    case StatusCode::kNotImplemented:
      code = grpc::StatusCode::UNIMPLEMENTED;
      break;
    case StatusCode::kCapacityError:
    case StatusCode::kOutOfMemory:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    default:
      break;
  }
  return {code, status.ToString()};
}

Status FromGrpc(const grpc::Status& status, const char* call) {
  if (status.ok()) return Status::OK();
  const auto code = status.error_code();
  StatusCode ours = StatusCode::kIOError;
  switch (code) {
    case grpc::StatusCode::NOT_FOUND:
      ours = StatusCode::kKeyError;
      break;
    case grpc::StatusCode::INVALID_ARGUMENT:
      ours = StatusCode::kInvalid;
      break;
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      ours = StatusCode::kPermissionDenied;
      break;
    case grpc::StatusCode::CANCELLED:
      ours = StatusCode::kCancelled;
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      ours = StatusCode::kTimedOut;
      break;
    default:
      break;
  }
  const char* names[] = {"OK",
                         "CANCELLED",
                         "UNKNOWN",
                         "INVALID_ARGUMENT",
                         "DEADLINE_EXCEEDED",
                         "NOT_FOUND",
                         "ALREADY_EXISTS",
                         "PERMISSION_DENIED",
                         "RESOURCE_EXHAUSTED",
                         "FAILED_PRECONDITION",
                         "ABORTED",
                         "OUT_OF_RANGE",
                         "UNIMPLEMENTED",
                         "INTERNAL",
                         "UNAVAILABLE",
                         "DATA_LOSS",
                         "UNAUTHENTICATED"};
  const int index = static_cast<int>(code);
  const char* name = index >= 0 && index <= 16 ? names[index] : "UNKNOWN";
  return Status::FromArgs(ours, call, ": ", name, ": ", status.error_message());
}

std::string LostMetadata(uint64_t lost_before) {
  return nlohmann::json{{"lost_before", lost_before}}.dump();
}

uint64_t ParseLostMetadata(const std::string& app_metadata) {
  if (app_metadata.empty()) return 0;
  const auto json = nlohmann::json::parse(app_metadata, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return 0;
  const auto it = json.find("lost_before");
  if (it == json.end() || !it->is_number_unsigned()) return 0;
  return it->get<uint64_t>();
}

std::string PublishedMetadata(uint64_t published) {
  return nlohmann::json{{"published", published}}.dump();
}

}  // namespace alkaid::flight::internal
