#include "broker_session.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

namespace alkaid::client::internal {

namespace p = broker::protocol;
using Clock = std::chrono::steady_clock;

namespace {
constexpr auto kStatsInterval = std::chrono::milliseconds(500);
// How long the session thread waits for an event (or, while the broker is
// away, sleeps) between its rounds.
constexpr int kThreadWaitMs = 50;
// Longest single wait for the topic's creation between looks at a stop
// request and the deadline.
constexpr auto kAwaitSlice = std::chrono::milliseconds(50);

// Turns a stop request (ConsumerOptions::stop) into a readable eventfd that
// a poll(2) on the broker connection also waits on, so that the request
// wakes the wait at once. Made only where a stop is possible.
class StopWake {
 public:
  explicit StopWake(std::stop_token token)
      : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
        callback_(std::in_place, std::move(token), Wake{fd_}) {}
  ~StopWake() {
    callback_.reset();  // first: a callback running on another thread finishes
    if (fd_ >= 0) ::close(fd_);
  }
  StopWake(const StopWake&) = delete;
  StopWake& operator=(const StopWake&) = delete;

  /// -1 if no eventfd could be made (the caller then looks at the token
  /// between slices).
  int fd() const { return fd_; }

 private:
  struct Wake {
    int fd;
    void operator()() const {
      const uint64_t one = 1;
      if (fd >= 0) (void)!::write(fd, &one, sizeof one);
    }
  };
  int fd_;
  std::optional<std::stop_callback<Wake>> callback_;
};

// Waits up to `timeout` for `other` (if >= 0) to be readable or `wake_fd`
// (if >= 0) to be signalled; true if `other` is readable. Plain sleep when
// neither is given.
bool SleepOrWake(int wake_fd, std::chrono::milliseconds timeout, int other = -1) {
  if (other < 0 && wake_fd < 0) {
    std::this_thread::sleep_for(timeout);
    return false;
  }
  std::array<pollfd, 2> fds{{{other, POLLIN, 0}, {wake_fd, POLLIN, 0}}};
  const int ms = static_cast<int>(std::min<int64_t>(timeout.count(), int64_t{1} << 30));
  const int ready = ::poll(fds.data(), fds.size(), ms);
  return ready > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

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

Status BrokerSession::AwaitTopic(const Register& reattach, Clock::time_point deadline,
                                 std::chrono::milliseconds wait, const std::stop_token& stop,
                                 p::Reply* reply) {
  std::optional<StopWake> wake;
  if (stop.stop_possible()) wake.emplace(stop);
  const int wake_fd = wake ? wake->fd() : -1;
  while (true) {
    if (stop.stop_requested()) {
      return Status::Cancelled("topic '", topic_, "': the wait for it to be created was cancelled");
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      return Status::TimedOut("topic '", topic_, "' was not created within ", wait.count(),
                              " ms (broker at ", connection_->socket_path(), ")");
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    if (lost()) {
      SleepOrWake(wake_fd, std::min<std::chrono::milliseconds>(kReconnectInterval, left));
      if (stop.stop_requested()) continue;
      Status attach_status;  // OK: no attach was sent (still down)
      auto again = Reconnect(
          [&](BrokerConnection& conn) {
            auto r = reattach(conn);
            attach_status = r.status();
            return r;
          },
          /*create_topic=*/false);
      if (!again.ok()) {
        if (attach_status.ok() || attach_status.IsIOError() || attach_status.IsTimedOut()) {
          continue;  // not serving yet
        }
        return attach_status;  // e.g. the topic exists now, with another topic kind
      }
      *reply = std::move(again).ValueOrDie();
      if (!reply->pending) return Status::OK();
      continue;
    }
    const auto slice = std::min<std::chrono::milliseconds>(left, kAwaitSlice);
    // With a stop token: take what is queued or readable now, else wait
    // for the broker or a stop request.
    auto event = connection_->NextEvent(wake_fd >= 0 ? std::chrono::milliseconds(0) : slice);
    if (wake_fd >= 0 && event.ok() && !event->has_value()) {
      (void)SleepOrWake(wake_fd, slice, connection_->fd());
      continue;
    }
    if (!event.ok()) {
      if (connection_->lost()) continue;
      return event.status().WithContext("topic '" + topic_ + "': waiting for it to be created");
    }
    if (!event->has_value()) continue;
    const p::Event& e = **event;
    if (e.type == p::EventType::kTopicCreated && e.topic == topic_ &&
        e.consumer_id == reply->attached_id) {
      reply->pending = false;
      reply->config = e.config;
      reply->producers.clear();  // it has none yet: they attach after creating it
      return Status::OK();
    }
  }
}

Result<p::Reply> BrokerSession::Ready(BrokerConnection& connection, uint64_t id,
                                      std::chrono::milliseconds timeout) {
  p::Request ready;
  ready.type = p::RequestType::kProducerReady;
  ready.target_id = id;
  return connection.Call(std::move(ready), timeout);
}

Result<std::string> BrokerSession::AddExtension(uint32_t id, uint64_t bytes,
                                                std::string offline_name) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (lost()) return offline_name;
  p::Request request;
  request.type = p::RequestType::kAddExtension;
  request.target_id = id_;
  request.extension_id = id;
  request.bytes = bytes;
  auto reply = connection_->Call(std::move(request), kReconnectCallTimeout);
  if (!reply.ok()) {
    if (connection_->lost()) {
      MarkLost();  // the session thread re-registers
      return offline_name;
    }
    return reply.status();
  }
  return std::move(reply->extension_name);
}

void BrokerSession::ReleaseExtension(uint32_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (lost()) return;
  p::Request request;
  request.type = p::RequestType::kReleaseExtension;
  request.target_id = id_;
  request.extension_id = id;
  (void)connection_->Send(std::move(request));
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
