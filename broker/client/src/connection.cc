#include "connection_internal.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/ipc/writer.h"
#include "protocol/paths.h"

namespace alkaid::client {

std::string DefaultBrokerSocket() { return broker::protocol::ClientSocketPath(); }

namespace internal {

namespace p = broker::protocol;

BrokerConnection::~BrokerConnection() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<BrokerConnection>> BrokerConnection::Connect(
    const std::string& socket_path) {
  const std::string path = socket_path.empty() ? DefaultBrokerSocket() : socket_path;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return Status::Invalid("broker socket path '", path, "' is too long");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "socket");
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::IOError(Status::FromErrno(err, "cannot reach the broker at " + path).message(),
                           " (is alkaid-broker running? set ", p::kSocketEnvVar,
                           " or --socket to its socket)");
  }
  return std::unique_ptr<BrokerConnection>(new BrokerConnection(fd, path));
}

Result<p::ServerMessage> BrokerConnection::ReadMessage(std::chrono::milliseconds timeout) {
  auto frame = p::ReadFrame(fd_, &in_, timeout);
  if (!frame.ok()) {
    if (frame.status().code() == StatusCode::kIOError) lost_ = true;
    return frame.status();
  }
  return p::DecodeServerMessage(*frame);
}

Result<p::Reply> BrokerConnection::Call(p::Request request, std::chrono::milliseconds timeout) {
  if (lost_) return Status::IOError("the broker at ", socket_path_, " hung up");
  request.id = next_id_++;
  const auto framed = p::Frame(p::EncodeRequest(request));
  const Status sent = p::WriteAll(fd_, framed);
  if (!sent.ok()) {
    // A broker that refuses a connection (PermissionDenied, too many
    // connections) replies at once and hangs up, so our write may fail:
    // its reason is more useful than "broken pipe".
    auto refusal = ReadMessage(std::chrono::milliseconds(200));
    lost_ = true;
    if (refusal.ok() && !refusal->is_event && !refusal->reply.status.ok()) {
      return refusal->reply.status;
    }
    return sent;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return Status::TimedOut("no reply from the broker at ", socket_path_, " to ",
                              p::RequestTypeName(request.type));
    }
    ALKAID_ASSIGN_OR_RAISE(auto message, ReadMessage(left));
    if (message.is_event) {
      events_.push_back(std::move(message.event));
      continue;
    }
    // id 0: the broker refused the connection or the frame itself.
    if (message.reply.request_id != request.id && message.reply.request_id != 0) continue;
    // A broker that refuses our version says so (naming both) and hangs up.
    if (!message.reply.status.ok()) return message.reply.status;
    if (!version_checked_) {
      // The first reply says which control protocol the broker speaks.
      if (message.reply.version != p::kControlProtocolVersion) {
        lost_ = true;
        return Status::Invalid("control protocol version mismatch: the broker at ", socket_path_,
                               " speaks version ", message.reply.version,
                               message.reply.version == 0 ? " (a broker from before versions)" : "",
                               ", this client speaks version ", p::kControlProtocolVersion,
                               "; use a client and a broker of the same release");
      }
      version_checked_ = true;
    }
    return std::move(message.reply);
  }
}

Status BrokerConnection::Send(p::Request request) {
  if (lost_) return Status::IOError("the broker at ", socket_path_, " hung up");
  request.id = next_id_++;
  return p::WriteAll(fd_, p::Frame(p::EncodeRequest(request)));
}

Result<std::optional<p::Event>> BrokerConnection::NextEvent(std::chrono::milliseconds timeout) {
  if (!events_.empty()) {
    p::Event event = std::move(events_.front());
    events_.pop_front();
    return std::optional<p::Event>(std::move(event));
  }
  if (lost_) return Status::IOError("the broker at ", socket_path_, " hung up");
  // Nothing in time is the routine case (a look between batches): no Status
  // is made for it.
  auto frame = p::TryReadFrame(fd_, &in_, timeout);
  if (!frame.ok()) {
    if (frame.status().code() == StatusCode::kIOError) lost_ = true;
    return frame.status();
  }
  if (!frame->has_value()) return std::optional<p::Event>();
  ALKAID_ASSIGN_OR_RAISE(auto message, p::DecodeServerMessage(**frame));
  if (!message.is_event) return std::optional<p::Event>();  // a stray reply
  return std::optional<p::Event>(std::move(message.event));
}

Result<std::vector<uint8_t>> SerializeSchema(const format::SchemaPtr& schema) {
  ALKAID_ASSIGN_OR_RAISE(auto sink, format::ipc::BufferOutputStream::Create());
  if (schema == nullptr) return Status::Invalid("the schema is null");
  ALKAID_ASSIGN_OR_RAISE(auto writer, format::ipc::MakeStreamWriter(sink.get(), schema));
  ALKAID_RETURN_NOT_OK(writer->Close());
  ALKAID_ASSIGN_OR_RAISE(auto buffer, sink->Finish());
  // Refused here, before a frame the broker would refuse (and hang up on)
  // is sent: the broker's limit, named (docs/BROKER.md, "Untrusted input").
  if (static_cast<std::size_t>(buffer->size()) > p::kMaxSchemaBytes) {
    return Status::Invalid("the schema (", schema->num_fields(), " fields) serializes to ",
                           buffer->size(), " bytes, more than the broker's maximum of ",
                           p::kMaxSchemaBytes, " bytes (kMaxSchemaBytes)");
  }
  return std::vector<uint8_t>(buffer->data(), buffer->data() + buffer->size());
}

Result<format::SchemaPtr> DeserializeSchema(const std::vector<uint8_t>& bytes) {
  auto buffer = std::make_shared<format::Buffer>(bytes.data(), static_cast<int64_t>(bytes.size()));
  format::ipc::BufferReader input(buffer);
  ALKAID_ASSIGN_OR_RAISE(auto reader, format::ipc::RecordBatchStreamReader::Open(&input));
  return reader->schema();
}

p::TopicConfig MakeTopicConfig(const std::string& topic, std::vector<uint8_t> schema,
                               const TopicOptions& options) {
  p::TopicConfig config;
  config.name = topic;
  config.schema = std::move(schema);
  config.kind = ToProtocol(options.kind);
  config.slot_count = options.slot_count;
  config.arena_bytes = options.arena_bytes;
  config.max_arena_bytes = options.max_arena_bytes;
  config.publish_timestamps = options.publish_timestamps;
  // The previous release's names, deprecated: honoured where the new ones
  // are left at 0 (topic.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  if (config.slot_count == 0) config.slot_count = options.ring_slots;
  if (config.arena_bytes == 0) config.arena_bytes = options.segment_bytes;
  if (config.max_arena_bytes == 0) config.max_arena_bytes = options.max_segment_bytes;
#pragma GCC diagnostic pop
  config.policy = options.policy == shm::SlowConsumerPolicy::kDropOldest
                      ? p::Policy::kDropOldest
                      : p::Policy::kBlockProducer;
  return config;
}

}  // namespace internal
}  // namespace alkaid::client
