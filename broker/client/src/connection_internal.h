#pragma once

// A client's connection to the broker: synchronous requests and replies,
// with the events the broker pushes in between queued for the caller.
// Internal to the client library.

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/type.h"
#include "protocol/control.h"
#include "protocol/frame.h"

namespace alkaid::client::internal {

/// Thread safety: one thread at a time.
class BrokerConnection {
 public:
  ~BrokerConnection();

  /// Connects to `socket_path` (empty: DefaultBrokerSocket()).
  static Result<std::unique_ptr<BrokerConnection>> Connect(const std::string& socket_path);

  /// Sends `request` (its id is assigned here) and waits up to `timeout`
  /// for its reply; returns the reply's status as an error if not OK.
  Result<broker::protocol::Reply> Call(
      broker::protocol::Request request,
      std::chrono::milliseconds timeout = std::chrono::seconds(10));

  /// Sends a request that has no reply.
  Status Send(broker::protocol::Request request);

  /// The next event: queued, or read within `timeout` (0: no wait).
  /// nullopt if none; IOError once the broker hung up.
  Result<std::optional<broker::protocol::Event>> NextEvent(std::chrono::milliseconds timeout);

  const std::string& socket_path() const { return socket_path_; }
  int fd() const { return fd_; }
  bool lost() const { return lost_; }

 private:
  BrokerConnection(int fd, std::string path) : fd_(fd), socket_path_(std::move(path)) {}
  Result<broker::protocol::ServerMessage> ReadMessage(std::chrono::milliseconds timeout);

  int fd_;
  std::string socket_path_;
  broker::protocol::FrameAssembler in_;
  std::deque<broker::protocol::Event> events_;
  uint64_t next_id_ = 1;
  bool lost_ = false;
  bool version_checked_ = false;  // the first reply named our protocol version
};

/// The schema as one framed IPC Schema message plus end-of-stream.
Result<std::vector<uint8_t>> SerializeSchema(const format::SchemaPtr& schema);
/// The inverse (dictionary-encoded fields keep their ids and index types).
Result<format::SchemaPtr> DeserializeSchema(const std::vector<uint8_t>& bytes);

/// How often producers and consumers check their peers' pids, so that a
/// dead peer is noticed within this long with or without a broker.
inline constexpr auto kPidCheckInterval = std::chrono::milliseconds(200);
/// How often a client whose broker went away tries to re-register, and how
/// long each re-registration call may take.
inline constexpr auto kReconnectInterval = std::chrono::milliseconds(200);
inline constexpr auto kReconnectCallTimeout = std::chrono::milliseconds(2000);

inline broker::protocol::TopicKind ToProtocol(TopicKind kind) {
  return kind == TopicKind::kUnsafeRow ? broker::protocol::TopicKind::kUnsafeRow
                                       : broker::protocol::TopicKind::kRecordBatch;
}

inline TopicKind FromProtocol(broker::protocol::TopicKind kind) {
  return kind == broker::protocol::TopicKind::kUnsafeRow ? TopicKind::kUnsafeRow
                                                         : TopicKind::kRecordBatch;
}

/// Now plus `wait`, saturating: a wait of milliseconds::max() never ends.
inline std::chrono::steady_clock::time_point DeadlineAfter(std::chrono::milliseconds wait) {
  using Clock = std::chrono::steady_clock;
  const auto now = Clock::now();
  if (wait.count() <= 0) return now;
  if (wait >=
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now)) {
    return Clock::time_point::max();
  }
  return now + wait;
}

broker::protocol::TopicConfig MakeTopicConfig(const std::string& topic, std::vector<uint8_t> schema,
                                              const TopicOptions& options);

}  // namespace alkaid::client::internal
