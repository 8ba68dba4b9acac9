#include "broker_session.h"

#include <poll.h>

#include <utility>

namespace alkaid::client::internal {

namespace p = broker::protocol;
using Clock = std::chrono::steady_clock;

namespace {
constexpr auto kStatsInterval = std::chrono::milliseconds(500);
// How long the session thread waits for an event (or, while the broker is
// away, sleeps) between its rounds.
constexpr int kThreadWaitMs = 50;
}  // namespace

BrokerSession::BrokerSession(std::string topic, Role role, std::string socket_path,
                             std::unique_ptr<BrokerConnection> connection)
    : topic_(std::move(topic)),
      role_(role),
      socket_path_(std::move(socket_path)),
      connection_(std::move(connection)) {}

BrokerSession::~BrokerSession() { StopThread(); }

Result<std::unique_ptr<BrokerSession>> BrokerSession::Connect(std::string topic, Role role,
                                                              const std::string& socket_path) {
  ALKAID_ASSIGN_OR_RAISE(auto connection, BrokerConnection::Connect(socket_path));
  return std::unique_ptr<BrokerSession>(
      new BrokerSession(std::move(topic), role, socket_path, std::move(connection)));
}

Status BrokerSession::CreateTopic(p::TopicConfig config, std::chrono::milliseconds timeout) {
  p::Request create;
  create.type = p::RequestType::kCreateTopic;
  create.config = std::move(config);
  return connection_->Call(std::move(create), timeout).status();
}

Result<p::Reply> BrokerSession::Attach(BrokerConnection& connection, p::Request attach,
                                       std::chrono::milliseconds timeout) {
  return connection.Call(std::move(attach), timeout);
}

void BrokerSession::Attached(const p::Reply& reply) {
  id_ = reply.attached_id;
  config_ = reply.config;
}

Result<p::Reply> BrokerSession::Ready(BrokerConnection& connection, uint64_t id,
                                      std::chrono::milliseconds timeout) {
  p::Request ready;
  ready.type = p::RequestType::kProducerReady;
  ready.target_id = id;
  return connection.Call(std::move(ready), timeout);
}

Status BrokerSession::Detach() {
  if (lost()) return Status::OK();
  p::Request detach;
  detach.type = p::RequestType::kDetach;
  detach.role = role_ == Role::kProducer ? p::Role::kProducer : p::Role::kConsumer;
  detach.target_id = id_;
  Status st = connection_->Call(std::move(detach), std::chrono::seconds(2)).status();
  // A broker that went away meanwhile is not an error: we clean up alone.
  if (!st.ok() && st.code() != StatusCode::kIOError) return st;
  return Status::OK();
}

Result<p::Reply> BrokerSession::Reconnect(const Register& reg, bool create_topic) {
  ALKAID_ASSIGN_OR_RAISE(auto connection, BrokerConnection::Connect(socket_path_));
  if (create_topic) {
    p::Request create;
    create.type = p::RequestType::kCreateTopic;
    create.config = config_;
    ALKAID_RETURN_NOT_OK(connection->Call(std::move(create), kReconnectCallTimeout).status());
  }
  ALKAID_ASSIGN_OR_RAISE(p::Reply reply, reg(*connection));
  connection_ = std::move(connection);
  id_ = reply.attached_id;
  broker_lost_.store(false, std::memory_order_relaxed);
  return reply;
}

void BrokerSession::ReportStats() {
  p::Request request;
  request.type = p::RequestType::kProducerStats;
  request.target_id = id_;
  if (fill_stats_) fill_stats_(request);
  if (!connection_->Send(std::move(request)).ok()) MarkLost();
}

void BrokerSession::StartThread(Register reg, std::function<void(p::Request&)> fill_stats) {
  fill_stats_ = std::move(fill_stats);
  thread_ = std::thread([this, reg = std::move(reg)] { ThreadLoop(reg); });
}

void BrokerSession::StopThread() {
  stop_.store(true, std::memory_order_release);  // partner: the acquire in ThreadLoop
  if (thread_.joinable()) thread_.join();
}

// The session thread: the only user of the connection while it runs,
// besides the producer thread's extension requests (both under mutex_).
void BrokerSession::ThreadLoop(const Register& reg) {
  auto next_stats = Clock::now() + kStatsInterval;
  // Acquire: partner of the release in StopThread.
  while (!stop_.load(std::memory_order_acquire)) {
    if (!broker_lost()) {
      // Events are read under the lock without waiting, the wait for more
      // is outside it. A consumer gone (ConsumerGone) is reclaimed by the
      // channel on the producer thread: when it needs room or space, and
      // in Poll.
      int fd = -1;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        bool any = false;
        if (!PumpEvents([&any](const p::Event&) { any = true; }).ok()) {
          MarkLost();  // data keeps flowing; only the control plane is gone
        } else if (!any) {
          fd = connection_->fd();
        }
      }
      if (fd >= 0) {
        pollfd pfd{fd, POLLIN, 0};
        (void)::poll(&pfd, 1, kThreadWaitMs);
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(kThreadWaitMs));
      if (!reregistering_stopped_ && ReconnectDue(Clock::now())) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (Reconnect(reg, /*create_topic=*/true).ok()) CountReregistration();
      }
    }
    const auto now = Clock::now();
    if (!broker_lost() && now >= next_stats) {
      std::lock_guard<std::mutex> lock(mutex_);
      ReportStats();
      next_stats = now + kStatsInterval;
    }
  }
}

}  // namespace alkaid::client::internal
