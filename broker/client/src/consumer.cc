#include "alkaid/client/consumer.h"

#include <poll.h>

#include <algorithm>
#include <set>

#include "alkaid/client/batch_subscriber.h"
#include "connection_internal.h"

namespace alkaid::client {

namespace p = broker::protocol;
using Clock = std::chrono::steady_clock;

namespace {
constexpr auto kPidCheckInterval = std::chrono::milliseconds(200);
// Longest single wait on one ring, so that broker events and pid checks
// are looked at several times a second.
constexpr auto kWaitSlice = std::chrono::milliseconds(50);
}  // namespace

struct Consumer::Impl {
  struct Subscription {
    uint64_t producer_id = 0;
    uint32_t pid = 0;
    std::unique_ptr<BatchSubscriber> subscriber;
    bool gone = false;  // the producer is known to be gone: drain, then drop
    std::string reason;
  };

  std::string topic;
  format::SchemaPtr schema;
  ConsumerOptions options;
  std::unique_ptr<internal::BrokerConnection> connection;
  uint64_t consumer_id = 0;
  std::vector<Subscription> subs;
  std::set<uint64_t> finished;  // producer ids seen and done
  std::size_t round_robin = 0;
  bool seen_producer = false;
  std::string end_reason;
  uint64_t lost = 0;
  Clock::time_point next_pid_check = Clock::now();
  bool closed = false;

  void Subscribe(const p::ProducerInfo& info) {
    if (finished.count(info.id) != 0) return;
    for (const auto& s : subs) {
      if (s.producer_id == info.id) return;
    }
    seen_producer = true;
    SubscriberOptions sub_options;
    sub_options.consumer.wait_mode = options.wait_mode;
    auto subscriber = BatchSubscriber::Open(info.ring, info.bodies, schema, sub_options);
    if (!subscriber.ok()) {
      // Its segments are gone already: the producer finished in between.
      finished.insert(info.id);
      end_reason = "producer " + std::to_string(info.id) + " finished before we could attach (" +
                   subscriber.status().message() + ")";
      return;
    }
    Subscription s;
    s.producer_id = info.id;
    s.pid = info.pid;
    s.subscriber = std::move(*subscriber);
    subs.push_back(std::move(s));
  }

  void MarkGone(uint64_t producer_id, const std::string& reason) {
    for (auto& s : subs) {
      if (s.producer_id == producer_id && !s.gone) {
        s.gone = true;
        s.reason = reason;
      }
    }
  }

  void PumpEvents() {
    while (connection && !connection->lost()) {
      auto event = connection->NextEvent(std::chrono::milliseconds(0));
      if (!event.ok() || !event->has_value()) return;
      const p::Event& e = **event;
      if (e.topic != topic) continue;
      if (e.type == p::EventType::kProducerJoined) Subscribe(e.producer);
      if (e.type == p::EventType::kProducerGone) MarkGone(e.producer.id, e.reason);
    }
  }

  // Works without the broker: a producer whose process is gone is drained.
  void CheckPids() {
    const auto now = Clock::now();
    if (now < next_pid_check) return;
    next_pid_check = now + kPidCheckInterval;
    for (auto& s : subs) {
      if (!s.gone && internal::ProcessIsGone(s.pid)) {
        s.gone = true;
        s.reason = "producer gone (pid " + std::to_string(s.pid) + " exited)";
      }
    }
  }

  void Finish(std::size_t index, std::string reason) {
    finished.insert(subs[index].producer_id);
    end_reason = std::move(reason);
    subs.erase(subs.begin() + static_cast<std::ptrdiff_t>(index));
    if (round_robin > index) --round_robin;
  }

  // Interprets one receive attempt on subs[index]. Returns a batch, null
  // (nothing there; the subscription may have been dropped), or an error
  // for a bad message.
  Result<format::RecordBatchPtr> Take(std::size_t index, Result<ReceivedBatch> result) {
    if (result.ok()) {
      if (result->batch != nullptr) {
        lost += result->lost_before;
        round_robin = index + 1;
        return std::move(result->batch);
      }
      if (subs[index].gone) Finish(index, subs[index].reason);  // drained
      return format::RecordBatchPtr();
    }
    switch (result.status().code()) {
      case StatusCode::kTimedOut:
        if (subs[index].gone) Finish(index, subs[index].reason);
        return format::RecordBatchPtr();
      case StatusCode::kEndOfStream:
        Finish(index, "every producer finished");
        return format::RecordBatchPtr();
      case StatusCode::kCancelled:
        Finish(index, "detached from producer " + std::to_string(subs[index].producer_id) +
                          "'s ring (" + result.status().message() + ")");
        return format::RecordBatchPtr();
      default:
        return result.status();  // that message is skipped; the next call goes on
    }
  }

  Result<format::RecordBatchPtr> PollOnce() {
    PumpEvents();
    CheckPids();
    const std::size_t n = subs.size();
    for (std::size_t k = 0; k < n && !subs.empty(); ++k) {
      const std::size_t index = (round_robin + k) % subs.size();
      const std::size_t before = subs.size();
      ALKAID_ASSIGN_OR_RAISE(auto batch, Take(index, subs[index].subscriber->TryReceive()));
      if (batch != nullptr) return batch;
      if (subs.size() != before) --k;  // the entry at `index` is a new one now
    }
    if (subs.empty() && seen_producer) {
      return Status::EndOfStream("topic '", topic, "': ", end_reason);
    }
    return format::RecordBatchPtr();
  }
};

Consumer::Consumer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Consumer::~Consumer() { (void)Close(); }

Result<std::unique_ptr<Consumer>> Consumer::Open(const std::string& topic,
                                                 const ConsumerOptions& options) {
  ALKAID_RETURN_NOT_OK(p::ValidateTopicName(topic));
  if (options.from_oldest) {
    return Status::NotImplemented(
        "subscribing from the oldest held batch: libshm's RingConsumer registers at the current "
        "write position only");
  }
  if (!options.columns.empty()) {
    return Status::NotImplemented("subscribing to a subset of columns");
  }
  auto impl = std::make_unique<Impl>();
  impl->topic = topic;
  impl->options = options;
  ALKAID_ASSIGN_OR_RAISE(impl->connection,
                         internal::BrokerConnection::Connect(options.socket_path));
  p::Request attach;
  attach.type = p::RequestType::kAttachConsumer;
  attach.topic = topic;
  attach.from_oldest = options.from_oldest;
  ALKAID_ASSIGN_OR_RAISE(auto reply, impl->connection->Call(std::move(attach)));
  impl->consumer_id = reply.attached_id;
  auto schema = internal::DeserializeSchema(reply.config.schema);
  if (!schema.ok()) {
    return schema.status().WithContext("topic '" + topic + "': the broker's schema");
  }
  impl->schema = *schema;
  for (const auto& producer : reply.producers) impl->Subscribe(producer);
  return std::unique_ptr<Consumer>(new Consumer(std::move(impl)));
}

Result<format::RecordBatchPtr> Consumer::TryNext() {
  if (impl_->closed) return Status::Invalid("consumer of '", impl_->topic, "' is closed");
  return impl_->PollOnce();
}

Result<format::RecordBatchPtr> Consumer::Next(std::chrono::nanoseconds timeout) {
  Impl& d = *impl_;
  if (d.closed) return Status::Invalid("consumer of '", d.topic, "' is closed");
  const auto deadline = Clock::now() + timeout;
  while (true) {
    ALKAID_ASSIGN_OR_RAISE(auto batch, d.PollOnce());
    if (batch != nullptr) return batch;
    const auto now = Clock::now();
    if (now >= deadline) {
      return Status::TimedOut("topic '", d.topic, "': no batch within ",
                              std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count(),
                              " ms");
    }
    const auto slice = std::min<Clock::duration>(deadline - now, kWaitSlice);
    if (d.subs.size() == 1 && !d.subs[0].gone) {
      // One ring: sleep on it (futex), so a batch wakes us at once.
      ALKAID_ASSIGN_OR_RAISE(batch, d.Take(0, d.subs[0].subscriber->Receive(slice)));
      if (batch != nullptr) return batch;
    } else {
      // None or several rings: wake for broker events, look again soon.
      const auto wait = d.subs.empty() ? slice : std::min<Clock::duration>(
                                                     slice, std::chrono::milliseconds(1));
      pollfd pfd{d.connection->lost() ? -1 : d.connection->fd(), POLLIN, 0};
      (void)::poll(&pfd, 1,
                   static_cast<int>(std::max<int64_t>(
                       1, std::chrono::duration_cast<std::chrono::milliseconds>(wait).count())));
    }
  }
}

Status Consumer::Close() {
  Impl& d = *impl_;
  if (d.closed) return Status::OK();
  d.closed = true;
  d.subs.clear();  // each RingConsumer detaches from its ring
  if (d.connection && !d.connection->lost()) {
    p::Request detach;
    detach.type = p::RequestType::kDetach;
    detach.role = p::Role::kConsumer;
    detach.target_id = d.consumer_id;
    const Status st = d.connection->Call(std::move(detach), std::chrono::seconds(2)).status();
    if (!st.ok() && st.code() != StatusCode::kIOError) return st;
  }
  return Status::OK();
}

const std::string& Consumer::topic() const { return impl_->topic; }
const format::SchemaPtr& Consumer::schema() const { return impl_->schema; }
std::size_t Consumer::producer_count() const { return impl_->subs.size(); }
uint64_t Consumer::lost() const { return impl_->lost; }

}  // namespace alkaid::client
