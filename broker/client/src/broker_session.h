#pragma once

// One client's session with the broker: the connection, registration
// (create the topic, attach, ready, detach), the event pump, pid liveness
// checks, reconnection with re-registration after a broker outage, and,
// for a producer, the session's own thread that does the last two and
// reports the producer's figures. Producer and Consumer (and RowProducer,
// RowConsumer) are data-path facades over a session plus a publisher or
// subscribers: they say what registering means for their role and what to
// do with an event; the session does the rest. Internal to the client
// library.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "connection_internal.h"

namespace alkaid::client::internal {

/// A check that runs at most once per `interval` (pid liveness, reconnect
/// attempts, retries).
class Every {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Every(Clock::duration interval) : interval_(interval) {}
  /// True, and the next time is `interval` from `now`, if due at `now`.
  bool Due(Clock::time_point now) {
    if (now < next_) return false;
    next_ = now + interval_;
    return true;
  }

 private:
  Clock::duration interval_;
  Clock::time_point next_{};  // due at once
};

/// Thread safety: a consumer's session is used by the consumer's thread
/// alone. A producer's is shared by the producer thread (registration
/// before the session thread starts; AddExtension and ReleaseExtension;
/// ReportStats and Detach after StopThread) and the session thread (the
/// event pump, re-registration and stats reports); the two take turns on
/// the connection under a mutex.
/// broker_lost() and reregistrations() may be read on any thread.
class BrokerSession {
 public:
  enum class Role : uint8_t { kProducer, kConsumer };

  /// Registers again on `connection` (a new one, to whichever broker now
  /// answers): the role's attach (and ready). Returns the attach reply.
  using Register = std::function<Result<broker::protocol::Reply>(BrokerConnection&)>;

  ~BrokerSession();
  BrokerSession(const BrokerSession&) = delete;
  BrokerSession& operator=(const BrokerSession&) = delete;

  /// Connects to the broker at `socket_path` (empty: DefaultBrokerSocket())
  /// for `topic` in `role`.
  static Result<std::unique_ptr<BrokerSession>> Connect(std::string topic, Role role,
                                                        const std::string& socket_path);

  // ---- registration -------------------------------------------------------

  /// Creates the topic (or finds it as `config` says it is).
  Status CreateTopic(broker::protocol::TopicConfig config,
                     std::chrono::milliseconds timeout = std::chrono::seconds(10));
  /// Sends `attach` (kAttachProducer or kAttachConsumer) on `connection`
  /// and returns the reply.
  static Result<broker::protocol::Reply> Attach(
      BrokerConnection& connection, broker::protocol::Request attach,
      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  /// What an attach reply made us: id() and config(), which a
  /// re-registration sends back.
  void Attached(const broker::protocol::Reply& reply);
  /// Consumers, after an attach reply that is `pending` (the topic does
  /// not exist yet; we are registered as waiting for it): waits until the
  /// broker says it was created (TopicCreated for our id) and fills
  /// `*reply` as a non-pending attach reply would be. If the broker goes
  /// away meanwhile, reconnects every kReconnectInterval and attaches again
  /// with `reattach`; a topic created in between is then joined as it is.
  /// TimedOut at `deadline` (saying `wait`), Cancelled once `stop` is
  /// requested (a stop wakes the wait at once).
  Status AwaitTopic(const Register& reattach, std::chrono::steady_clock::time_point deadline,
                    std::chrono::milliseconds wait, const std::stop_token& stop,
                    broker::protocol::Reply* reply);
  /// Producers: ProducerReady for producer `id` on `connection`.
  static Result<broker::protocol::Reply> Ready(
      BrokerConnection& connection, uint64_t id,
      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  /// Producers, on the producer thread inside a loan
  /// (shm::ChannelExtensions::acquire): asks the broker for extension `id`
  /// (`bytes`) of the arena and returns its name; the broker's refusal (its
  /// limit, the topic's maximum) fails the loan. While the broker is away
  /// data keeps flowing: returns `offline_name`, and a request that finds
  /// the broker gone marks the session lost (the session thread
  /// re-registers).
  Result<std::string> AddExtension(uint32_t id, uint64_t bytes, std::string offline_name);
  /// Producers (shm::ChannelExtensions::release): extension `id` is gone;
  /// the broker stops counting it. Nothing while the broker is away.
  void ReleaseExtension(uint32_t id);
  /// Leaves the topic (Detach of id() in our role). A broker gone meanwhile
  /// is not an error; a lost session sends nothing.
  Status Detach();

  // ---- events, liveness and reconnection ----------------------------------

  /// Calls `on_event` for each event queued or readable now, without
  /// waiting. An error when the connection failed (lost() once the broker
  /// hung up); OK with nothing done while lost.
  template <typename OnEvent>
  Status PumpEvents(OnEvent&& on_event) {
    while (!lost()) {
      auto event = connection_->NextEvent(std::chrono::milliseconds(0));
      if (!event.ok()) return event.status();
      if (!event->has_value()) return Status::OK();
      on_event(**event);
    }
    return Status::OK();
  }

  /// Whether it is time to look at the peers' pids again (at most every
  /// kPidCheckInterval).
  bool PidCheckDue(std::chrono::steady_clock::time_point now) { return pid_check_.Due(now); }

  /// Whether a lost session may try Reconnect again (at most every
  /// kReconnectInterval).
  bool ReconnectDue(std::chrono::steady_clock::time_point now) { return reconnect_.Due(now); }
  /// After an outage: connects again, re-creates the topic with config()
  /// when `create_topic` (so that this works whether the topic's other
  /// clients re-registered already or not), then `reg`. On success adopts
  /// the new connection and the reply's id and is no longer lost. Returns
  /// `reg`'s reply; an error from the connect, the creation or `reg` (the
  /// session stays lost).
  Result<broker::protocol::Reply> Reconnect(const Register& reg, bool create_topic);
  /// Counts a successful re-registration (Reconnect also reconnects a
  /// consumer still waiting for its topic, which is no re-registration).
  void CountReregistration() { reregistrations_.fetch_add(1, std::memory_order_relaxed); }

  /// The connection hung up (or a request on it failed): we keep working
  /// without the broker until Reconnect succeeds.
  void MarkLost() { broker_lost_.store(true, std::memory_order_relaxed); }

  // ---- the session thread (producers) -------------------------------------

  /// Starts the session thread: it pumps events (ignoring them: a consumer
  /// gone is reclaimed by the channel on the producer thread), re-registers
  /// with `reg` after an outage until the broker refuses us
  /// (StopReregistering), and every 500 ms reports the figures `fill_stats`
  /// puts in a kProducerStats request (fill_stats runs on the session
  /// thread).
  void StartThread(Register reg, std::function<void(broker::protocol::Request&)> fill_stats);
  /// Stops and joins the session thread (idempotent).
  void StopThread();
  /// Sends one kProducerStats report now (the producer thread, after
  /// StopThread: the final count).
  void ReportStats();
  /// Said by a Register the broker refused for good (it does not have our
  /// segments): the session thread stops trying. Session thread.
  void StopReregistering() { reregistering_stopped_ = true; }

  // ---- state --------------------------------------------------------------

  /// True once the broker went away, until a reconnection succeeds. Any
  /// thread (a hint there); exact on the session's own thread.
  bool broker_lost() const { return broker_lost_.load(std::memory_order_relaxed); }
  /// As broker_lost, or the connection has seen the hang-up already.
  bool lost() const { return broker_lost() || connection_->lost(); }
  BrokerConnection& connection() { return *connection_; }
  /// The connection's descriptor to wait on, -1 when lost.
  int fd() const { return lost() ? -1 : connection_->fd(); }
  /// Our id with the current broker (a restarted broker numbers anew).
  uint64_t id() const { return id_; }
  /// The topic's configuration as the broker has it.
  const broker::protocol::TopicConfig& config() const { return config_; }
  const std::string& topic() const { return topic_; }
  const std::string& socket_path() const { return socket_path_; }
  uint64_t reregistrations() const { return reregistrations_.load(std::memory_order_relaxed); }

 private:
  BrokerSession(std::string topic, Role role, std::string socket_path,
                std::unique_ptr<BrokerConnection> connection);
  void ThreadLoop(const Register& reg);

  std::string topic_;
  Role role_;
  std::string socket_path_;  // as given (empty: the default), for reconnecting
  std::unique_ptr<BrokerConnection> connection_;
  std::mutex mutex_;
  uint64_t id_ = 0;
  broker::protocol::TopicConfig config_;
  std::atomic<bool> broker_lost_{false};
  std::atomic<uint64_t> reregistrations_{0};
  Every pid_check_{kPidCheckInterval};
  Every reconnect_{kReconnectInterval};
  bool reregistering_stopped_ = false;  // the session thread's
  std::function<void(broker::protocol::Request&)> fill_stats_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
};

}  // namespace alkaid::client::internal
