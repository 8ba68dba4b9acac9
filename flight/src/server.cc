#include "alkaid/flight/server.h"

#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/impl/service_type.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/method_handler.h>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "alkaid/client/producer.h"
#include "alkaid/format/ipc/dictionary_tracker.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/ipc/writer.h"
#include "alkaid/format/unsafe_row.h"
#include "auth_internal.h"
#include "flight_data_internal.h"
#include "payload_serialization_internal.h"

namespace alkaid::flight {

namespace ipc = format::ipc;
using internal::pb::FlightData;

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  return false;
}

namespace {

// "HOST:PORT" or "[V6]:PORT" to the host, brackets removed.
Result<std::string> ListenHost(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size()) {
    return Status::Invalid("--listen '", listen, "' is not HOST:PORT");
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

Result<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError(what, " '", path, "' cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

enum class Access : uint8_t { kList, kRead, kWrite };

// How often a DoGet waiting for data looks whether its client is still
// there.
constexpr auto kPollInterval = std::chrono::milliseconds(100);
// How often CancelWatch looks at the calls it watches.
constexpr auto kCancelPoll = std::chrono::milliseconds(10);

// Turns "the client went away" into a stop request for the DoGets waiting
// for their topic (ConsumerOptions::stop). gRPC's sync API has no callback
// for it, only ServerContext::IsCancelled (thread-safe), so one thread
// looks at every watched call each kCancelPoll, and only while there is
// one: an idle server, or one whose DoGets all stream, runs nothing.
class CancelWatch {
  struct Entry {
    const grpc::ServerContext* context;
    std::stop_source source;
  };

 public:
  CancelWatch() : thread_([this](const std::stop_token& stop) { Run(stop); }) {}
  ~CancelWatch() {
    thread_.request_stop();
    changed_.notify_all();
  }
  CancelWatch(const CancelWatch&) = delete;
  CancelWatch& operator=(const CancelWatch&) = delete;

  /// While alive, a stop is requested on token() once `context`'s call is
  /// cancelled (the client went away or the server shuts down).
  class Scope {
   public:
    Scope(CancelWatch* watch, const grpc::ServerContext* context) : watch_(watch) {
      const std::lock_guard lock(watch_->mutex_);
      entry_ = watch_->watched_.insert(watch_->watched_.end(), Entry{context, {}});
      token_ = entry_->source.get_token();
      watch_->changed_.notify_all();
    }
    ~Scope() {
      const std::lock_guard lock(watch_->mutex_);
      watch_->watched_.erase(entry_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    const std::stop_token& token() const { return token_; }

   private:
    CancelWatch* watch_;
    std::list<CancelWatch::Entry>::iterator entry_;
    std::stop_token token_;
  };

 private:
  void Run(const std::stop_token& stop) {
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested()) {
      if (watched_.empty()) {
        changed_.wait(lock, stop, [this] { return !watched_.empty(); });
        continue;
      }
      for (auto& entry : watched_) {
        if (entry.context->IsCancelled()) entry.source.request_stop();
      }
      changed_.wait_for(lock, stop, kCancelPoll, [] { return false; });
    }
  }

  std::mutex mutex_;
  std::condition_variable_any changed_;
  std::list<Entry> watched_;
  std::jthread thread_;  // last: stopped and joined before the rest goes
};

using internal::FlightPayload;
namespace pb = internal::pb;

// The FlightService, registered method by method as the generated
// FlightService::Service would, except that DoGet sends FlightPayload
// (payload_serialization_internal.h: bodies by reference) instead of the
// generated FlightData. DoExchange, DoAction and ListActions are not
// offered: gRPC answers UNIMPLEMENTED.
class Service final : public grpc::Service {
 public:
  Service(std::string socket, std::optional<internal::TokenTable> tokens, bool spin_wait,
          int64_t max_message_bytes)
      : socket_(std::move(socket)),
        tokens_(std::move(tokens)),
        spin_wait_(spin_wait),
        max_message_bytes_(max_message_bytes) {
    using grpc::internal::RpcMethod;
    using grpc::internal::RpcServiceMethod;
    AddMethod(new RpcServiceMethod(
        "/arrow.flight.protocol.FlightService/Handshake", RpcMethod::BIDI_STREAMING,
        new grpc::internal::BidiStreamingHandler<Service, pb::HandshakeRequest,
                                                 pb::HandshakeResponse>(
            [](Service* s, grpc::ServerContext* c,
               grpc::ServerReaderWriter<pb::HandshakeResponse, pb::HandshakeRequest>* stream) {
              return s->Handshake(c, stream);
            },
            this)));
    AddMethod(new RpcServiceMethod(
        "/arrow.flight.protocol.FlightService/ListFlights", RpcMethod::SERVER_STREAMING,
        new grpc::internal::ServerStreamingHandler<Service, pb::Criteria, pb::FlightInfo>(
            [](Service* s, grpc::ServerContext* c, const pb::Criteria* r,
               grpc::ServerWriter<pb::FlightInfo>* w) { return s->ListFlights(c, r, w); },
            this)));
    AddMethod(new RpcServiceMethod(
        "/arrow.flight.protocol.FlightService/GetFlightInfo", RpcMethod::NORMAL_RPC,
        new grpc::internal::RpcMethodHandler<Service, pb::FlightDescriptor, pb::FlightInfo>(
            [](Service* s, grpc::ServerContext* c, const pb::FlightDescriptor* r,
               pb::FlightInfo* out) { return s->GetFlightInfo(c, r, out); },
            this)));
    AddMethod(new RpcServiceMethod(
        "/arrow.flight.protocol.FlightService/GetSchema", RpcMethod::NORMAL_RPC,
        new grpc::internal::RpcMethodHandler<Service, pb::FlightDescriptor, pb::SchemaResult>(
            [](Service* s, grpc::ServerContext* c, const pb::FlightDescriptor* r,
               pb::SchemaResult* out) { return s->GetSchema(c, r, out); },
            this)));
    AddMethod(new RpcServiceMethod(
        "/arrow.flight.protocol.FlightService/DoGet", RpcMethod::SERVER_STREAMING,
        new grpc::internal::ServerStreamingHandler<Service, pb::Ticket, FlightPayload>(
            [](Service* s, grpc::ServerContext* c, const pb::Ticket* r,
               grpc::ServerWriter<FlightPayload>* w) { return s->DoGet(c, r, w); },
            this)));
    AddMethod(new RpcServiceMethod(
        "/arrow.flight.protocol.FlightService/DoPut", RpcMethod::BIDI_STREAMING,
        new grpc::internal::BidiStreamingHandler<Service, pb::FlightData, pb::PutResult>(
            [](Service* s, grpc::ServerContext* c,
               grpc::ServerReaderWriter<pb::PutResult, pb::FlightData>* stream) {
              return s->DoPut(c, stream);
            },
            this)));
  }

  grpc::Status Handshake(grpc::ServerContext* context,
                         grpc::ServerReaderWriter<internal::pb::HandshakeResponse,
                                                  internal::pb::HandshakeRequest>* stream) {
    // Tokens travel in the authorization header of every call; the
    // handshake only checks it, so a client that starts with one learns
    // early that its token is refused.
    const internal::TokenGrant* grant = nullptr;
    if (auto status = Authenticate(*context, &grant); !status.ok()) return status;
    internal::pb::HandshakeRequest request;
    while (stream->Read(&request)) {
      internal::pb::HandshakeResponse response;
      response.set_protocol_version(request.protocol_version());
      if (!stream->Write(response)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status ListFlights(grpc::ServerContext* context, const internal::pb::Criteria* /*criteria*/,
                           grpc::ServerWriter<internal::pb::FlightInfo>* writer) {
    const internal::TokenGrant* grant = nullptr;
    if (auto status = Authenticate(*context, &grant); !status.ok()) return status;
    auto topics = ListTopics();
    if (!topics.ok()) return internal::ToGrpc(topics.status());
    for (const auto& topic : *topics) {
      if (grant != nullptr && !internal::TokenTable::MayRead(*grant, topic.name)) continue;
      internal::pb::FlightInfo info;
      if (auto st = FillInfo(topic, &info); !st.ok()) return internal::ToGrpc(st);
      if (!writer->Write(info)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status GetFlightInfo(grpc::ServerContext* context,
                             const internal::pb::FlightDescriptor* descriptor,
                             internal::pb::FlightInfo* info) {
    auto topic = internal::DescriptorTopic(*descriptor);
    if (!topic.ok()) return internal::ToGrpc(topic.status());
    if (auto status = Authorize(*context, *topic, Access::kRead); !status.ok()) return status;
    auto found = FindTopic(*topic);
    if (!found.ok()) return internal::ToGrpc(found.status());
    return internal::ToGrpc(FillInfo(*found, info));
  }

  grpc::Status GetSchema(grpc::ServerContext* context,
                         const internal::pb::FlightDescriptor* descriptor,
                         internal::pb::SchemaResult* result) {
    auto topic = internal::DescriptorTopic(*descriptor);
    if (!topic.ok()) return internal::ToGrpc(topic.status());
    if (auto status = Authorize(*context, *topic, Access::kRead); !status.ok()) return status;
    auto found = FindTopic(*topic);
    if (!found.ok()) return internal::ToGrpc(found.status());
    auto schema = ServedSchema(*found);
    if (!schema.ok()) return internal::ToGrpc(schema.status());
    auto bytes = internal::SerializeSchema(**schema);
    if (!bytes.ok()) return internal::ToGrpc(bytes.status());
    result->set_schema(std::move(*bytes));
    return grpc::Status::OK;
  }

  grpc::Status DoGet(grpc::ServerContext* context, const internal::pb::Ticket* ticket,
                     grpc::ServerWriter<FlightPayload>* writer) {
    auto parsed = internal::ParseTicket(ticket->ticket());
    if (!parsed.ok()) return internal::ToGrpc(parsed.status());
    if (auto status = Authorize(*context, parsed->topic, Access::kRead); !status.ok()) {
      return status;
    }
    return internal::ToGrpc(Stream(*context, *parsed, writer));
  }

  grpc::Status DoPut(grpc::ServerContext* context,
                     grpc::ServerReaderWriter<internal::pb::PutResult, FlightData>* stream) {
    auto first = std::make_shared<FlightData>();
    if (!stream->Read(first.get())) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "DoPut: the stream carried no message"};
    }
    if (!first->has_flight_descriptor()) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "DoPut: the first message carries no flight descriptor (the topic)"};
    }
    auto topic = internal::DescriptorTopic(first->flight_descriptor());
    if (!topic.ok()) return internal::ToGrpc(topic.status());
    if (auto status = Authorize(*context, *topic, Access::kWrite); !status.ok()) return status;
    return internal::ToGrpc(Ingest(*context, *topic, first, stream));
  }

 private:
  grpc::Status Authenticate(const grpc::ServerContext& context,
                            const internal::TokenGrant** grant) const {
    *grant = nullptr;
    if (!tokens_) return grpc::Status::OK;
    const auto& metadata = context.client_metadata();
    const auto it = metadata.find("authorization");
    if (it == metadata.end()) {
      return {grpc::StatusCode::UNAUTHENTICATED, "no 'authorization: Bearer TOKEN' header"};
    }
    *grant = tokens_->Find(std::string(it->second.data(), it->second.size()));
    if (*grant == nullptr) {
      return {grpc::StatusCode::UNAUTHENTICATED, "the bearer token is not valid"};
    }
    return grpc::Status::OK;
  }

  grpc::Status Authorize(const grpc::ServerContext& context, const std::string& topic,
                         Access access) const {
    const internal::TokenGrant* grant = nullptr;
    if (auto status = Authenticate(context, &grant); !status.ok()) return status;
    if (grant == nullptr) return grpc::Status::OK;
    const bool allowed = access == Access::kWrite ? internal::TokenTable::MayWrite(*grant, topic)
                                                  : internal::TokenTable::MayRead(*grant, topic);
    if (!allowed) {
      return {grpc::StatusCode::PERMISSION_DENIED,
              std::string("this token may not ") + (access == Access::kWrite ? "write" : "read") +
                  " topic '" + topic + "'"};
    }
    return grpc::Status::OK;
  }

  Result<std::vector<client::TopicStatus>> ListTopics() const {
    ALKAID_ASSIGN_OR_RAISE(auto broker, client::BrokerClient::Connect(socket_));
    return broker->ListTopics();
  }

  Result<client::TopicStatus> FindTopic(const std::string& name) const {
    ALKAID_ASSIGN_OR_RAISE(auto topics, ListTopics());
    for (auto& topic : topics) {
      if (topic.name == name) return std::move(topic);
    }
    return Status::KeyError("the broker has no topic '", name, "'");
  }

  // The schema DoGet sends for `topic`: an unsafe-row topic's batches are
  // read as format::RowOutputSchema (dictionary columns decoded to their
  // values), so that is what FlightInfo and GetSchema say too.
  static Result<format::SchemaPtr> ServedSchema(const client::TopicStatus& topic) {
    if (topic.kind == client::TopicKind::kUnsafeRow) {
      return format::RowOutputSchema(*topic.schema);
    }
    return topic.schema;
  }

  static Status FillInfo(const client::TopicStatus& topic, internal::pb::FlightInfo* info) {
    ALKAID_ASSIGN_OR_RAISE(auto served, ServedSchema(topic));
    ALKAID_ASSIGN_OR_RAISE(auto schema, internal::SerializeSchema(*served));
    info->set_schema(std::move(schema));
    auto* descriptor = info->mutable_flight_descriptor();
    descriptor->set_type(internal::pb::FlightDescriptor::PATH);
    descriptor->add_path(topic.name);
    // First endpoint: from the oldest batch held, then live; second: live.
    // No location: the endpoints are served by this server.
    info->add_endpoint()->mutable_ticket()->set_ticket(internal::MakeTicket(topic.name, true));
    info->add_endpoint()->mutable_ticket()->set_ticket(internal::MakeTicket(topic.name, false));
    info->set_total_records(-1);  // a live topic has no total
    info->set_total_bytes(-1);
    info->set_ordered(true);
    return Status::OK();
  }

  // DoGet: a Consumer for the call's lifetime; the schema, then per batch
  // the dictionary messages it needs and the batch.
  Status Stream(grpc::ServerContext& context, const internal::ParsedTicket& ticket,
                grpc::ServerWriter<FlightPayload>* writer) const {
    client::ConsumerOptions options;
    options.socket_path = socket_;
    options.from_oldest = ticket.from_oldest;
    options.kind = std::nullopt;
    // The consumer sleeps on the channel's futex unless told to spin
    // (FlightServerOptions::spin_wait): the spin of kSpinThenBlock took
    // most of the bridge's CPU (docs/FLIGHT.md, "Figures").
    options.wait_mode = spin_wait_ ? shm::WaitMode::kSpinThenBlock : shm::WaitMode::kBlock;
    // A topic that does not exist yet is waited for, as `alkaid subscribe`
    // does: the broker makes this consumer one of the topic's when it is
    // created, so it gets every batch from the first. A client that goes
    // away cancels the wait (CancelWatch).
    options.wait_for_topic = std::chrono::milliseconds::max();
    std::unique_ptr<client::Consumer> consumer;
    {
      const CancelWatch::Scope watched(&cancel_watch_, &context);
      options.stop = watched.token();
      auto opened = client::Consumer::Open(ticket.topic, options);
      if (!opened.ok()) {
        if (opened.status().code() == StatusCode::kCancelled) {
          return Status::Cancelled("DoGet: the client went away while waiting for topic '",
                                   ticket.topic, "'");
        }
        return opened.status();
      }
      consumer = std::move(*opened);
    }
    const format::SchemaPtr& schema = consumer->schema();
    const ipc::IpcWriteOptions write_options = internal::FlightWriteOptions();
    ipc::DictionaryMemo ids;
    ALKAID_RETURN_NOT_OK(ids.AssignIds(*schema));
    {
      FlightPayload data;
      ALKAID_ASSIGN_OR_RAISE(data.ipc, ipc::GetSchemaPayload(*schema, ids, write_options));
      if (!writer->Write(data)) return Status::Cancelled("DoGet: the client went away");
    }
    ipc::DictionaryTracker tracker(ids, {});
    uint64_t lost_seen = 0;
    while (true) {
      if (context.IsCancelled()) return Status::Cancelled("DoGet: the client went away");
      auto next = consumer->Next(kPollInterval);
      if (!next.ok()) {
        if (next.status().IsTimedOut()) continue;
        if (next.status().IsEndOfStream()) return Status::OK();
        return next.status();
      }
      const format::RecordBatchPtr& batch = *next;
      if (batch == nullptr) continue;
      ALKAID_ASSIGN_OR_RAISE(auto changes, tracker.Diff(*batch));
      for (const auto& change : changes) {
        if (change.values != nullptr) {
          FlightPayload data;
          ALKAID_ASSIGN_OR_RAISE(data.ipc, ipc::GetDictionaryPayload(change.id, change.is_delta,
                                                                     change.values, write_options));
          if (!writer->Write(data)) return Status::Cancelled("DoGet: the client went away");
        }
        ALKAID_RETURN_NOT_OK(tracker.Commit(change));
      }
      // The payload's body buffers are slices of the batch's: they point
      // into the producer's shared memory and hold its block until gRPC has
      // written them.
      FlightPayload data;
      ALKAID_ASSIGN_OR_RAISE(data.ipc, ipc::GetRecordBatchPayload(*batch, write_options));
      const uint64_t lost = consumer->lost();
      if (lost != lost_seen) {
        data.app_metadata = internal::LostMetadata(lost - lost_seen);
        lost_seen = lost;
      }
      if (!writer->Write(data)) return Status::Cancelled("DoGet: the client went away");
    }
  }

  // DoPut: a Producer created with the schema of the first message; each
  // record batch is decoded (dictionaries applied) and published, copied
  // once into the producer's shared memory.
  Status Ingest(grpc::ServerContext& context, const std::string& topic,
                const std::shared_ptr<FlightData>& first,
                grpc::ServerReaderWriter<internal::pb::PutResult, FlightData>* stream) const {
    internal::PutDecoder decoder(max_message_bytes_);
    ALKAID_RETURN_NOT_OK_CTX(decoder.Start(first), "DoPut into '" << topic << "'");
    client::ProducerOptions options;
    options.socket_path = socket_;
    // Refused (Invalid) if the topic exists with another schema: nothing
    // is published.
    ALKAID_ASSIGN_OR_RAISE(auto producer, client::Producer::Open(topic, decoder.schema(), options));
    uint64_t published = 0;
    while (true) {
      auto data = std::make_shared<FlightData>();
      if (!stream->Read(data.get())) break;
      if (context.IsCancelled()) break;
      auto next = decoder.Next(data);
      ALKAID_RETURN_NOT_OK_CTX(next.status(), "DoPut into '" << topic << "'");
      const format::RecordBatchPtr& batch = *next;
      if (batch == nullptr) continue;  // a dictionary batch, applied
      ALKAID_RETURN_NOT_OK_CTX(producer->PublishCopy(*batch), "DoPut into '" << topic << "'");
      // One PutResult per published batch, as Arrow's clients read them
      // (pyarrow: do_put's metadata reader): {"published": N}.
      internal::pb::PutResult result;
      result.set_app_metadata(internal::PublishedMetadata(++published));
      if (!stream->Write(result)) break;  // the client went away
    }
    if (context.IsCancelled()) {
      // The client went away mid-stream: what it sent is published; the
      // stream ends for the consumers as if it had closed.
      (void)producer->Close();
      return Status::Cancelled("DoPut: the client went away");
    }
    return producer->Close();
  }

  std::string socket_;
  std::optional<internal::TokenTable> tokens_;
  bool spin_wait_;
  int64_t max_message_bytes_;  // FlightServerOptions::max_message_bytes
  mutable CancelWatch cancel_watch_;
};

}  // namespace

struct FlightServer::Impl {
  std::unique_ptr<Service> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::once_flag shutdown_once;
};

FlightServer::FlightServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

FlightServer::~FlightServer() {
  Shutdown();
  Wait();
}

Result<std::unique_ptr<FlightServer>> FlightServer::Start(const FlightServerOptions& options) {
  ALKAID_ASSIGN_OR_RAISE(const std::string host, ListenHost(options.listen));
  std::optional<internal::TokenTable> tokens;
  if (!options.tokens_file.empty()) {
    ALKAID_ASSIGN_OR_RAISE(tokens, internal::TokenTable::Load(options.tokens_file));
  } else if (!IsLoopbackHost(host)) {
    return Status::PermissionDenied("refusing to listen on '", options.listen,
                                    "' without a token file (--tokens): only loopback "
                                    "addresses may be served unauthenticated");
  }
  if (options.max_message_bytes <= 0) {
    return Status::Invalid("the DoPut message limit (--max-message-bytes) must be positive, got ",
                           options.max_message_bytes);
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return Status::Invalid("TLS needs both a certificate (--tls-cert) and a key (--tls-key)");
  }
  std::shared_ptr<grpc::ServerCredentials> credentials;
  if (!options.tls_cert_file.empty()) {
    grpc::SslServerCredentialsOptions ssl;
    ALKAID_ASSIGN_OR_RAISE(auto cert, ReadFile(options.tls_cert_file, "TLS certificate"));
    ALKAID_ASSIGN_OR_RAISE(auto key, ReadFile(options.tls_key_file, "TLS key"));
    ssl.pem_key_cert_pairs.push_back({std::move(key), std::move(cert)});
    credentials = grpc::SslServerCredentials(ssl);
  } else {
    credentials = grpc::InsecureServerCredentials();
  }
  auto impl = std::make_unique<Impl>();
  std::string socket =
      options.broker_socket.empty() ? client::DefaultBrokerSocket() : options.broker_socket;
  impl->service = std::make_unique<Service>(std::move(socket), std::move(tokens), options.spin_wait,
                                            options.max_message_bytes);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, credentials, &impl->port);
  builder.RegisterService(impl->service.get());
  // A batch may be larger than gRPC's default 4 MiB. Up to twice the limit
  // (header and body) plus 1 MiB (descriptor, app_metadata, framing) reaches
  // PutDecoder, which names the limit; gRPC itself refuses more.
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  const int64_t limit = std::min(options.max_message_bytes, kIntMax);  // 2 * limit: no overflow
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min(kIntMax, 2 * limit + (int64_t{1} << 20))));
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return Status::IOError("cannot listen on '", options.listen,
                           "' (address in use, not local, or a bad TLS certificate or key)");
  }
  return std::unique_ptr<FlightServer>(new FlightServer(std::move(impl)));
}

int FlightServer::port() const { return impl_->port; }

void FlightServer::Wait() { impl_->server->Wait(); }

void FlightServer::Shutdown() {
  std::call_once(impl_->shutdown_once, [this] {
    // Calls still running (live DoGet streams) are cancelled after a second.
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  });
}

}  // namespace alkaid::flight
