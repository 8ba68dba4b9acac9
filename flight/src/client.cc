#include "alkaid/flight/client.h"

#include <fstream>
#include <sstream>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "alkaid/format/ipc/dictionary_tracker.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/ipc/writer.h"
#include "flight_data_internal.h"

namespace alkaid::flight {

namespace ipc = format::ipc;
namespace pb = internal::pb;

bool IsFlightUri(const std::string& s) {
  return s.starts_with("grpc://") || s.starts_with("grpc+tls://");
}

Result<FlightUri> ParseFlightUri(const std::string& uri) {
  FlightUri out;
  std::string_view rest = uri;
  if (rest.starts_with("grpc://")) {
    rest.remove_prefix(7);
  } else if (rest.starts_with("grpc+tls://")) {
    out.tls = true;
    rest.remove_prefix(11);
  } else {
    return Status::Invalid("'", uri, "' is not grpc://HOST:PORT/TOPIC or grpc+tls://...");
  }
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 == rest.size()) {
    return Status::Invalid("'", uri, "' names no topic (grpc://HOST:PORT/TOPIC)");
  }
  out.address = std::string(rest.substr(0, slash));
  out.topic = std::string(rest.substr(slash + 1));
  const auto colon = out.address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == out.address.size()) {
    return Status::Invalid("'", uri, "': '", out.address, "' is not HOST:PORT");
  }
  return out;
}

namespace {

void Authorize(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
}

class Reader final : public FlightReader {
 public:
  Reader(std::unique_ptr<grpc::ClientContext> context,
         std::unique_ptr<grpc::ClientReader<pb::FlightData>> reader)
      : context_(std::move(context)), reader_(std::move(reader)) {}
  ~Reader() override {
    if (!finished_) {
      context_->TryCancel();
      (void)reader_->Finish();
    }
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Reads the schema message.
  Status Start() {
    auto data = std::make_shared<pb::FlightData>();
    if (!reader_->Read(data.get())) return Finish("DoGet ended before the schema");
    ALKAID_ASSIGN_OR_RAISE(auto message, internal::FlightDataToMessage(data));
    if (message->type() != ipc::MessageType::kSchema) {
      return Status::Invalid("DoGet: the first message is not the schema");
    }
    ALKAID_ASSIGN_OR_RAISE(schema_, ipc::ReadSchema(*message, &memo_));
    return Status::OK();
  }

  const format::SchemaPtr& schema() const override { return schema_; }

  Result<format::RecordBatchPtr> Next() override {
    while (true) {
      if (finished_) return format::RecordBatchPtr{};
      auto data = std::make_shared<pb::FlightData>();
      if (!reader_->Read(data.get())) {
        ALKAID_RETURN_NOT_OK(Finish("DoGet"));
        return format::RecordBatchPtr{};
      }
      const uint64_t lost = internal::ParseLostMetadata(data->app_metadata());
      ALKAID_ASSIGN_OR_RAISE(auto message, internal::FlightDataToMessage(data));
      switch (message->type()) {
        case ipc::MessageType::kDictionaryBatch:
          ALKAID_RETURN_NOT_OK(ipc::ReadDictionary(*message, &memo_).status());
          break;
        case ipc::MessageType::kRecordBatch:
          lost_before_ = lost;
          return ipc::ReadRecordBatch(*message, schema_, &memo_);
        case ipc::MessageType::kSchema:
          return Status::Invalid("DoGet: a second schema message");
      }
    }
  }

  uint64_t lost_before() const override { return lost_before_; }
  void Cancel() override { context_->TryCancel(); }

 private:
  Status Finish(const char* what) {
    finished_ = true;
    return internal::FromGrpc(reader_->Finish(), what);
  }

  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReader<pb::FlightData>> reader_;
  ipc::DictionaryMemo memo_;
  format::SchemaPtr schema_;
  uint64_t lost_before_ = 0;
  bool finished_ = false;
};

class Writer final : public FlightWriter {
 public:
  Writer(std::unique_ptr<grpc::ClientContext> context,
         std::unique_ptr<grpc::ClientReaderWriter<pb::FlightData, pb::PutResult>> stream,
         format::SchemaPtr schema, const ipc::DictionaryMemo& ids)
      : context_(std::move(context)),
        stream_(std::move(stream)),
        schema_(std::move(schema)),
        tracker_(ids, {}) {}
  ~Writer() override {
    if (!closed_) {
      context_->TryCancel();
      (void)stream_->Finish();
    }
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  Status Send(pb::FlightData* data) {
    if (!stream_->Write(*data)) {
      // The server ended the call: its status says why.
      closed_ = true;
      Status status = internal::FromGrpc(stream_->Finish(), "DoPut");
      return status.ok() ? Status::IOError("DoPut: the server closed the stream") : status;
    }
    return Status::OK();
  }

  Status Write(const format::RecordBatch& batch) override {
    if (closed_) return Status::Invalid("DoPut: the stream is closed");
    const ipc::IpcWriteOptions options = internal::FlightWriteOptions();
    ALKAID_ASSIGN_OR_RAISE(auto changes, tracker_.Diff(batch));
    for (const auto& change : changes) {
      if (change.values != nullptr) {
        ALKAID_ASSIGN_OR_RAISE(auto payload, ipc::GetDictionaryPayload(change.id, change.is_delta,
                                                                       change.values, options));
        pb::FlightData data;
        ALKAID_RETURN_NOT_OK(internal::PayloadToFlightData(payload, &data));
        ALKAID_RETURN_NOT_OK(Send(&data));
      }
      ALKAID_RETURN_NOT_OK(tracker_.Commit(change));
    }
    ALKAID_ASSIGN_OR_RAISE(auto payload, ipc::GetRecordBatchPayload(batch, options));
    pb::FlightData data;
    ALKAID_RETURN_NOT_OK(internal::PayloadToFlightData(payload, &data));
    return Send(&data);
  }

  Status Close() override {
    if (closed_) return Status::OK();
    closed_ = true;
    stream_->WritesDone();
    pb::PutResult result;
    while (stream_->Read(&result)) {
    }
    return internal::FromGrpc(stream_->Finish(), "DoPut");
  }

 private:
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::FlightData, pb::PutResult>> stream_;
  format::SchemaPtr schema_;
  ipc::DictionaryTracker tracker_;
  bool closed_ = false;
};

}  // namespace

struct FlightClient::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::FlightService::Stub> stub;
  std::string token;
  std::string address;
};

FlightClient::FlightClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FlightClient::~FlightClient() = default;

Result<std::unique_ptr<FlightClient>> FlightClient::Connect(const std::string& address, bool tls,
                                                            const FlightClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (tls) {
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_roots_file.empty()) {
      std::ifstream in(options.tls_roots_file, std::ios::binary);
      if (!in) return Status::IOError("TLS roots '", options.tls_roots_file, "' cannot be read");
      std::ostringstream text;
      text << in.rdbuf();
      ssl.pem_root_certs = text.str();
    }
    credentials = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options.tls_server_name);
    }
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  auto impl = std::make_unique<Impl>();
  impl->channel = grpc::CreateCustomChannel(address, credentials, args);
  impl->stub = pb::FlightService::NewStub(impl->channel);
  impl->token = options.token;
  impl->address = address;
  return std::unique_ptr<FlightClient>(new FlightClient(std::move(impl)));
}

Result<std::vector<FlightTopic>> FlightClient::ListTopics() {
  grpc::ClientContext context;
  Authorize(&context, impl_->token);
  pb::Criteria criteria;
  auto reader = impl_->stub->ListFlights(&context, criteria);
  std::vector<FlightTopic> topics;
  pb::FlightInfo info;
  Status first_error;
  while (reader->Read(&info)) {
    FlightTopic topic;
    if (info.flight_descriptor().path_size() > 0) topic.name = info.flight_descriptor().path(0);
    auto schema = internal::DeserializeSchema(info.schema());
    if (!schema.ok()) {
      if (first_error.ok()) first_error = schema.status();
      continue;
    }
    topic.schema = *schema;
    topics.push_back(std::move(topic));
  }
  ALKAID_RETURN_NOT_OK(internal::FromGrpc(reader->Finish(), "ListFlights"));
  ALKAID_RETURN_NOT_OK(first_error);
  return topics;
}

Result<std::unique_ptr<FlightReader>> FlightClient::Subscribe(const std::string& topic,
                                                              bool from_oldest) {
  auto context = std::make_unique<grpc::ClientContext>();
  Authorize(context.get(), impl_->token);
  pb::Ticket ticket;
  ticket.set_ticket(internal::MakeTicket(topic, from_oldest));
  auto stream = impl_->stub->DoGet(context.get(), ticket);
  auto reader = std::make_unique<Reader>(std::move(context), std::move(stream));
  ALKAID_RETURN_NOT_OK(reader->Start());
  return std::unique_ptr<FlightReader>(std::move(reader));
}

Result<std::unique_ptr<FlightWriter>> FlightClient::Publish(const std::string& topic,
                                                            const format::SchemaPtr& schema) {
  auto context = std::make_unique<grpc::ClientContext>();
  Authorize(context.get(), impl_->token);
  auto stream = impl_->stub->DoPut(context.get());
  ipc::DictionaryMemo ids;
  ALKAID_RETURN_NOT_OK(ids.AssignIds(*schema));
  const ipc::IpcWriteOptions options = internal::FlightWriteOptions();
  ALKAID_ASSIGN_OR_RAISE(auto payload, ipc::GetSchemaPayload(*schema, ids, options));
  pb::FlightData first;
  first.mutable_flight_descriptor()->set_type(pb::FlightDescriptor::PATH);
  first.mutable_flight_descriptor()->add_path(topic);
  ALKAID_RETURN_NOT_OK(internal::PayloadToFlightData(payload, &first));
  auto writer = std::make_unique<Writer>(std::move(context), std::move(stream), schema, ids);
  ALKAID_RETURN_NOT_OK(writer->Send(&first));
  return std::unique_ptr<FlightWriter>(std::move(writer));
}

}  // namespace alkaid::flight
