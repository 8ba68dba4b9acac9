#include "alkaid/client/consumer.h"

#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <set>
#include <string_view>
#include <utility>

#include "alkaid/client/batch_subscriber.h"
#include "alkaid/client/row_consumer.h"
#include "alkaid/common/process.h"
#include "alkaid/format/unsafe_row.h"
#include "broker_session.h"
#include "connection_internal.h"
#include "export_counter_internal.h"

namespace alkaid::client {

namespace p = broker::protocol;
using Clock = std::chrono::steady_clock;

namespace {
using internal::kReconnectCallTimeout;
using internal::kReconnectInterval;
// Longest single wait on one channel, so that broker events and pid checks
// are looked at several times a second.
constexpr auto kWaitSlice = std::chrono::milliseconds(50);
// Receive attempts in a row before broker events are looked at anyway.
constexpr uint32_t kMaintainEvery = 1024;
// While nothing is waiting, broker events are looked at this often at most,
// as an idle consumer's waits (kWaitSlice) look at them: a caller that
// polls (TryNext in a loop, Next right after the previous batch) must not
// make system calls at the moment a message is due, and one woken every
// few hundred microseconds must not make them in every other wait (at 1 ms
// the pong of a 16 MiB ping-pong, whose pings come every ~600 us, looked at
// the broker socket in every other gap, and its next answer paid about
// 90 ns for the system call's footprint: docs/PERFORMANCE.md, ping16b).
constexpr auto kMaintainInterval = kWaitSlice;
// A Next that finds nothing waits this long on its channel before it may
// maintain: the next message is often due at once (the second message of a
// burst, a ping right after its warm-up), and a consumer that was idle for
// more than kMaintainInterval would otherwise make its system calls exactly
// then. Only a consumer that stays idle pays for the checks, in its wait.
constexpr auto kIdleBeforeMaintain = std::chrono::microseconds(100);

// Each consumer of this process its own token (1, 2, ...), which it writes
// into its segment on every producer's channel and tells the broker at
// attach: the producers report their figures with it, so that the broker
// tells two consumers of one process apart (docs/BROKER.md, "Watching it
// live"). Kept across broker restarts (a channel's segment keeps what it
// was opened with); a forked child counts on from its parent's count under
// another pid, so (pid, token) stays unique.
std::atomic<uint64_t> next_consumer_token{1};

// What one receive attempt gave: a batch or a row batch (or nothing).
// Filled in place down the receive calls (each takes an Item*), so that a
// batch is moved once, from its subscriber into the caller's Item. A row
// batch says its sequence and losses itself; a batch's subscriber says
// them of its last message (Take, FillOrigin).
struct Item {
  format::RecordBatchPtr batch;
  ReceivedRows rows;
  bool empty() const { return batch == nullptr && rows.data == nullptr; }
};

// A row subscriber's receive into `*rows`, as a batch subscriber's is.
Status Into(Result<ReceivedRows>&& received, ReceivedRows* rows) {
  if (received.ok()) *rows = std::move(*received);
  return received.status();
}

// Consumer::WaitFd's epoll set: the doorbell of every producer's channel
// and the broker connection, brought up to date by each ArmWait.
struct WaitSet {
  int epoll = -1;
  std::vector<int> fds;  // registered
  WaitSet() = default;
  WaitSet(const WaitSet&) = delete;
  WaitSet& operator=(const WaitSet&) = delete;
  ~WaitSet() {
    if (epoll >= 0) ::close(epoll);
  }
  // Registers exactly `want` (closed descriptors left the set by
  // themselves).
  void Sync(const std::vector<int>& want) {
    for (int fd : fds) {
      if (std::find(want.begin(), want.end(), fd) == want.end()) {
        (void)::epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nullptr);
      }
    }
    for (int fd : want) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = fd;
      if (::epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &ev) != 0 && errno == EEXIST) {
        (void)::epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &ev);
      }
    }
    fds = want;
  }
};

}  // namespace

// Everything of a consumer but what it returns: Consumer takes record
// batches from it (rows converted), RowConsumer row batches.
struct internal::ConsumerImpl {
  struct Subscription {
    uint64_t producer_id = 0;  // as the current broker knows it (0: it does not)
    uint32_t pid = 0;
    std::string channel;                       // identifies the producer across broker restarts
    std::unique_ptr<BatchSubscriber> batches;  // kRecordBatch
    std::unique_ptr<RowSubscriber> rows;       // kUnsafeRow
    bool gone = false;                         // the producer is known to be gone: drain, then drop
    std::string reason;

    // Batches by the subscriber's batch-only calls: no Result, no
    // ReceivedBatch.
    Status TryReceive(Item* out) {
      return batches ? batches->TryReceive(&out->batch) : Into(rows->TryReceive(), &out->rows);
    }
    Status Receive(std::chrono::nanoseconds timeout, Item* out) {
      return batches ? batches->Receive(&out->batch, timeout)
                     : Into(rows->Receive(timeout), &out->rows);
    }
  };

  std::string topic;
  format::SchemaPtr topic_schema;
  format::SchemaPtr schema;  // of what Next returns
  std::vector<int> columns;  // projection; empty: all
  TopicKind kind = TopicKind::kRecordBatch;
  // A RowConsumer: row batches are handed out as rows, not decoded.
  bool returns_rows = false;
  ConsumerOptions options;
  // Ours among this process's consumers (next_consumer_token).
  const uint64_t token = next_consumer_token.fetch_add(1, std::memory_order_relaxed);
  std::unique_ptr<internal::BrokerSession> session;
  std::vector<Subscription> subs;
  WaitSet wait_set;                // made by WaitFd
  std::set<std::string> finished;  // channels of producers seen and done
  std::size_t round_robin = 0;
  uint32_t since_maintain = 0;                     // receive attempts since Maintain()
  Clock::time_point next_maintain = Clock::now();  // when an empty poll maintains
  bool attached = false;                           // the first attach's producers are subscribed
  bool seen_producer = false;
  std::string end_reason;
  // The broker removed the topic (alkaid topics rm): we are no longer
  // attached; what was received before is read, then the end, saying so.
  std::string removed;
  Status attach_error;  // a producer we could not attach to, for Next to say
  // Producers we could not attach to for want of shared memory (/dev/shm
  // full: our consumer segment could not be created): tried again when
  // maintaining, at most every kReconnectInterval, until attached or gone.
  std::vector<p::ProducerInfo> attach_later;
  internal::Every attach_retry{kReconnectInterval};
  // Channels read to their end while the broker was away (ReportDrained).
  std::vector<std::string> unreported_drains;
  uint64_t lost = 0;
  bool closed = false;
  // Batches exported to foreign code (ExportBatch, ExportStream); shared
  // with their release callbacks.
  std::shared_ptr<internal::ExportCounter> exports;

  void Subscribe(const p::ProducerInfo& info) {
    if (finished.count(info.channel) != 0) return;
    for (auto& s : subs) {
      if (s.channel == info.channel) {
        s.producer_id = info.id;  // re-registered with a restarted broker
        return;
      }
    }
    seen_producer = true;
    Subscription s{info.id, info.pid, info.channel};
    SubscriberOptions sub_options;  // its `consumer` part for a row channel too
    sub_options.consumer.wait_mode = options.wait_mode;
    // Only on request, and only for the producers there at attach: a channel's
    // messages older than our registration are delivered only if still
    // intact when read, so reading them could leave a gap after the first
    // one delivered. Producers that join later wait for the consumers
    // already attached (ProducerOptions::wait_for_consumers) instead.
    sub_options.consumer.from_oldest = options.from_oldest && !attached;
    sub_options.consumer.token = token;
    sub_options.verification = options.verification;
    sub_options.with_message = false;  // Next returns the batch alone
    Status st;
    if (kind == TopicKind::kUnsafeRow) {
      // A Consumer decodes every row batch it returns (ToBatch), which reads
      // and checks every row: the full check is that decode, done once
      // there (its kPrivateCopy copy too). A RowConsumer hands the rows out:
      // the subscriber checks them as the mode says.
      const Verification rows_checked =
          returns_rows ? options.verification : Verification::kStructure;
      auto r = RowSubscriber::Open(info.channel, topic_schema, columns, sub_options.consumer,
                                   rows_checked);
      if (r.ok()) s.rows = std::move(*r);
      st = r.status();
    } else {
      auto r = BatchSubscriber::Open(info.channel, topic_schema, sub_options);
      if (r.ok()) s.batches = std::move(*r);
      st = r.status();
    }
    if (!st.ok()) {
      const std::string cannot = "topic '" + topic + "': cannot attach to producer " +
                                 std::to_string(info.id) + " (pid " + std::to_string(info.pid) +
                                 ")";
      if (st.code() == StatusCode::kOutOfMemory) {
        // Not an end: the space may come back. Said once, as below; the
        // batches the producer publishes until we attach are not ours.
        if (std::none_of(attach_later.begin(), attach_later.end(),
                         [&](const auto& later) { return later.channel == info.channel; })) {
          attach_later.push_back(info);
          attach_error = st.WithContext(cannot + " yet, retrying");
        }
        return;
      }
      finished.insert(info.channel);
      if (st.code() == StatusCode::kKeyError) {
        // Its segments are gone already: the producer finished in between.
        end_reason = "producer " + std::to_string(info.id) + " finished before we could attach (" +
                     st.message() + ")";
        return;
      }
      // Anything else (permissions, a damaged header) is an error, not an
      // end: the producer may well be running and publishing. The next
      // Next/TryNext returns it once; the other producers go on.
      end_reason = "cannot attach to producer " + std::to_string(info.id);
      attach_error = st.WithContext(cannot);
      return;
    }
    subs.push_back(std::move(s));
  }

  void MarkGone(uint64_t producer_id, const std::string& reason) {
    if (producer_id == 0) return;  // the broker's ids start at 1
    bool subscribed = false;
    for (auto& s : subs) {
      if (s.producer_id != producer_id) continue;
      subscribed = true;
      if (!s.gone) s.reason = reason;
      s.gone = true;
    }
    // Not reading its channel (never attached, or done with it already):
    // nothing of it is ours to wait for.
    if (!subscribed) ReportDrained(producer_id, "");
  }

  // Tells the broker we are done with producer `producer_id`'s channel: if
  // the producer died, the broker keeps its arena's extensions until every
  // consumer that may still map one said so or went (docs/BROKER.md, "A
  // producer's death"). Once per channel, when it ends, never per batch.
  // A producer we have no id for with this broker (we subscribed again after
  // a broker restart, and it died before it was announced to us) is named
  // by its channel.
  // Reports made while the broker is away are sent to the next one, by
  // channel (the ids were the old broker's).
  void ReportDrained(uint64_t producer_id, const std::string& channel) {
    if ((producer_id == 0 && channel.empty()) || session == nullptr) return;
    if (session->lost()) {
      if (!channel.empty()) unreported_drains.push_back(channel);
      return;
    }
    p::Request request;
    request.type = p::RequestType::kProducerDrained;
    request.target_id = session->id();
    request.producer_id = producer_id;
    if (producer_id == 0) request.channel = channel;
    (void)session->connection().Send(std::move(request));
  }

  // Sends our attach request on `conn`. Before the first attach completed
  // (Open), it may wait for the topic and take any topic kind, as the
  // options say; a re-subscription names the topic's kind.
  Result<p::Reply> Attach(internal::BrokerConnection& conn, std::chrono::milliseconds timeout) {
    p::Request attach;
    attach.type = p::RequestType::kAttachConsumer;
    attach.topic = topic;
    attach.from_oldest = options.from_oldest;
    attach.kind = internal::ToProtocol(kind);
    attach.wait_mode = static_cast<uint8_t>(1 + static_cast<uint8_t>(options.wait_mode));
    attach.token = token;
    if (!attached) {
      attach.wait_for_topic = options.wait_for_topic.count() > 0;
      attach.any_kind = !options.kind.has_value();
    }
    return internal::BrokerSession::Attach(conn, std::move(attach), timeout);
  }

  // After a broker outage: subscribe again with whichever broker now
  // answers (the session re-creates the topic with the config we know, so
  // that this works whether our producers re-registered already or not).
  void TryReregister() {
    if (!removed.empty() || !session->ReconnectDue(Clock::now())) return;
    auto reply = session->Reconnect(
        [this](internal::BrokerConnection& conn) { return Attach(conn, kReconnectCallTimeout); },
        /*create_topic=*/true);
    if (!reply.ok()) return;
    session->CountReregistration();
    // Producer ids are the broker's: those of the one that went mean
    // nothing to this one (which may have given them to other producers).
    // A producer that re-registered gets its new id back here or with its
    // ProducerJoined; one that did not (dead) has none.
    for (auto& s : subs) s.producer_id = 0;
    for (const auto& producer : reply->producers) Subscribe(producer);
    for (const auto& channel : std::exchange(unreported_drains, {})) ReportDrained(0, channel);
  }

  void PumpEvents() {
    if (session->lost()) TryReregister();
    (void)session->PumpEvents([this](const p::Event& e) {
      if (e.topic != topic) return;
      if (e.type == p::EventType::kProducerJoined) Subscribe(e.producer);
      if (e.type == p::EventType::kProducerGone) MarkGone(e.producer.id, e.reason);
      if (e.type == p::EventType::kTopicRemoved) removed = "the topic was " + e.reason;
    });
  }

  // Works without the broker: a producer whose process is gone is drained.
  void CheckPids() {
    if (!session->PidCheckDue(Clock::now())) return;
    for (auto& s : subs) {
      if (!s.gone && ProcessIsGone(s.pid)) {
        s.gone = true;
        s.reason = "producer gone (pid " + std::to_string(s.pid) + " exited)";
      }
    }
  }

  void Finish(std::size_t index, std::string reason) {
    finished.insert(subs[index].channel);
    ReportDrained(subs[index].producer_id, subs[index].channel);
    end_reason = std::move(reason);
    subs.erase(subs.begin() + static_cast<std::ptrdiff_t>(index));
    if (round_robin > index) --round_robin;
  }

  // Interprets one receive attempt on subs[index] (`received`, which
  // filled `*out` when it found something). OK with `*out` empty when
  // nothing was there (the subscription may have been dropped); an error
  // for a bad message.
  Status Take(std::size_t index, const Status& received, Item* out) {
    const Subscription& sub = subs[index];  // until Finish drops it
    if (received.ok()) {
      if (!out->empty()) {
        lost += sub.batches ? sub.batches->last_lost_before() : out->rows.lost_before;
        round_robin = index + 1;
      } else if (sub.gone) {
        Finish(index, sub.reason);  // drained
      }
      return Status::OK();
    }
    switch (received.code()) {
      case StatusCode::kTimedOut:
        if (sub.gone) Finish(index, sub.reason);
        return Status::OK();
      case StatusCode::kEndOfStream:
        Finish(index, "every producer finished");
        return Status::OK();
      case StatusCode::kIOError:
        // The channel saw its producer die.
        Finish(index, "producer gone: producer " +
                          (sub.producer_id != 0 ? std::to_string(sub.producer_id)
                                                : "of pid " + std::to_string(sub.pid)) +
                          " (" + received.message() + ")");
        return Status::OK();
      default:
        return received;  // that message is skipped; the next call goes on
    }
  }

  // Attaches to the producers a full /dev/shm kept us from (attach_later);
  // forgets those that are gone.
  void RetryAttach() {
    if (attach_later.empty() || !attach_retry.Due(Clock::now())) return;
    for (const auto& info : std::exchange(attach_later, {})) {
      if (ProcessIsGone(info.pid)) continue;
      const Status said = attach_error;
      Subscribe(info);  // lists it in attach_later again if still short of space
      // Said once, at the first failure: a retry that fails again says nothing.
      if (!attach_later.empty() && attach_later.back().channel == info.channel) {
        attach_error = said;
      }
    }
  }

  // Looks at broker events and producer pids. Out of line: the receive
  // path (PollOnce) stays as small as it was before the session's event
  // pump became inlinable into it (measured: 3 instructions per batch).
  [[gnu::noinline]] void Maintain() {
    PumpEvents();
    RetryAttach();
    CheckPids();
    since_maintain = 0;
    next_maintain = Clock::now() + kMaintainInterval;
  }

  // One receive attempt on each channel, round robin from the last one served.
  Status TryChannels(Item* out) {
    const std::size_t n = subs.size();
    for (std::size_t k = 0; k < n && !subs.empty(); ++k) {
      const std::size_t index = (round_robin + k) % subs.size();
      const std::size_t before = subs.size();
      ALKAID_RETURN_NOT_OK(Take(index, subs[index].TryReceive(out), out));
      if (!out->empty()) return Status::OK();
      if (subs.size() != before) --k;  // the entry at `index` is a new one now
    }
    return Status::OK();
  }

  // One receive attempt. The data path makes no system call: broker events
  // (a poll(2) on the socket) and producer pids are looked at when no
  // message is waiting, at most every kMaintainInterval, and at least every
  // kMaintainEvery messages under load so that a producer joining a busy
  // topic is still picked up. (Maintaining on every empty poll put two
  // system calls exactly where a ping-pong's next message arrives.) Without
  // `maintain_if_due`, an empty poll does not maintain for the interval
  // either (Next's first attempt, see kIdleBeforeMaintain). `direct`: the
  // attempt on subs[0] that Consumer::Next's direct way made (NextOf),
  // which gave no batch, stands for the receive (its count included).
  // `*out` is left empty when nothing came.
  Status PollOnce(Item* out, bool maintain_if_due = true, const Status* direct = nullptr) {
    if (direct != nullptr || (!subs.empty() && ++since_maintain < kMaintainEvery)) {
      ALKAID_RETURN_NOT_OK(direct != nullptr ? Take(0, *direct, out) : TryChannels(out));
      if (!out->empty() || !maintain_if_due || Clock::now() < next_maintain) return Status::OK();
    }
    Maintain();
    if (!attach_error.ok()) return std::exchange(attach_error, Status::OK());
    ALKAID_RETURN_NOT_OK(TryChannels(out));
    if (!out->empty()) return Status::OK();
    if (subs.empty() && attach_later.empty() && (seen_producer || !removed.empty())) {
      return Status::EndOfStream("topic '", topic, "': ", removed.empty() ? end_reason : removed);
    }
    return Status::OK();
  }

  // Every receive of Consumer and RowConsumer but Next's direct way: one
  // attempt (PollOnce, `direct` as there), then, if `wait` and it found
  // nothing, the wait up to `timeout`. A waiting call's first attempt does
  // not maintain (kIdleBeforeMaintain), and the clock is read only once it
  // found nothing: a stream that keeps up pays no clock read per batch.
  Status NextItem(bool wait, std::chrono::nanoseconds timeout, Item* out,
                  const Status* direct = nullptr) {
    if (closed) return Status::Invalid("consumer of '", topic, "' is closed");
    ALKAID_RETURN_NOT_OK(PollOnce(out, /*maintain_if_due=*/!wait, direct));
    if (!wait || !out->empty()) return Status::OK();
    return WaitItem(timeout, out);
  }

  // NextItem after its first attempt found nothing: waits for an item up
  // to `timeout`, maintaining as PollOnce does.
  Status WaitItem(std::chrono::nanoseconds timeout, Item* out) {
    const auto deadline = Clock::now() + timeout;
    Clock::duration longest_wait = kIdleBeforeMaintain;  // the first wait
    while (true) {
      const auto now = Clock::now();
      if (now >= deadline) {
        // A last attempt, which maintains when due: a caller of Next with
        // no time to wait (a TryNext loop by another name) still sees
        // broker events and producers going away.
        ALKAID_RETURN_NOT_OK(PollOnce(out));
        if (!out->empty()) return Status::OK();
        return Status::TimedOut(
            "topic '", topic, "': nothing within ",
            std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count(), " ms");
      }
      const auto slice = std::min<Clock::duration>(deadline - now, longest_wait);
      longest_wait = kWaitSlice;
      if (subs.size() == 1 && !subs[0].gone) {
        // One channel: sleep on it (futex), so a message wakes us at once.
        ALKAID_RETURN_NOT_OK(Take(0, subs[0].Receive(slice, out), out));
        if (!out->empty()) return Status::OK();
      } else {
        // None or several channels: wake for broker events, look again soon
        // (in 1 ms, or at the slice's end if there is no channel).
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(slice).count();
        pollfd pfd{session->fd(), POLLIN, 0};
        (void)::poll(&pfd, 1, subs.empty() ? static_cast<int>(std::max<int64_t>(1, ms)) : 1);
      }
      ALKAID_RETURN_NOT_OK(PollOnce(out));
      if (!out->empty()) return Status::OK();
    }
  }

  // Consumer::Next's common case (NextOf): a record batch topic read whole,
  // on one channel. Set at open; the channel count is looked at per call.
  bool next_direct = false;

  // Consumer::Next (`wait`) and TryNext but for a batch their direct way
  // took: NextItem after that way's attempt (`direct`) or instead of it
  // (null), the batch converted and its origin said. Out of line: NextOf's
  // frame stays that of its direct way.
  [[gnu::noinline]] Result<format::RecordBatchPtr> NextBatch(bool wait,
                                                             std::chrono::nanoseconds timeout,
                                                             const Status* direct,
                                                             BatchOrigin* origin) {
    Item item;
    ALKAID_RETURN_NOT_OK(NextItem(wait, timeout, &item, direct));
    if (item.empty()) return format::RecordBatchPtr();
    FillOrigin(origin, &item.rows);
    return ToBatch(item);
  }

  // Where the batch just taken came from, into `*origin` if given: Take()
  // and NextOf leave round_robin just past its subscription, whose
  // subscriber's last message is still the one it came from (a row batch,
  // `*rows`, says its own numbers).
  void FillOrigin(BatchOrigin* origin, const ReceivedRows* rows) const {
    if (origin == nullptr || round_robin == 0 || round_robin > subs.size()) return;
    const Subscription& sub = subs[round_robin - 1];
    origin->producer_id = sub.producer_id;
    origin->producer_pid = sub.pid;
    origin->sequence = sub.batches ? sub.batches->last_sequence() : rows->sequence;
    origin->lost_before = sub.batches ? sub.batches->last_lost_before() : rows->lost_before;
    origin->publish_ns = sub.batches ? sub.batches->last_publish_ns() : sub.rows->last_publish_ns();
  }

  // Consumer::ArmWait: every channel's doorbell armed, the set brought up
  // to date; true if a message may be there already.
  Result<bool> ArmWait() {
    if (closed) return Status::Invalid("consumer of '", topic, "' is closed");
    if (wait_set.epoll < 0) return Status::Invalid("topic '", topic, "': no WaitFd to arm");
    bool ready = false;
    std::vector<int> want;
    for (Subscription& sub : subs) {
      if (sub.gone) {
        ready = true;  // the next receive drains and drops it
        continue;
      }
      shm::ChannelConsumer& channel =
          sub.batches ? sub.batches->mutable_consumer() : sub.rows->mutable_consumer();
      ALKAID_ASSIGN_OR_RAISE(const int fd, channel.DoorbellFd());
      ALKAID_ASSIGN_OR_RAISE(const bool there, channel.ArmDoorbell());
      ready = ready || there;
      want.push_back(fd);
    }
    if (!session->lost()) want.push_back(session->connection().fd());
    wait_set.Sync(want);
    return ready;
  }

  // A record batch, restricted to the chosen columns (zero-copy: the same
  // column data, a narrower schema), or a row batch decoded into one: the
  // decode checks every row (what kFull asks); with kPrivateCopy the rows
  // are copied out of shared memory first, so that the producer cannot
  // change them while they are decoded.
  Result<format::RecordBatchPtr> ToBatch(Item& item) const {
    if (item.batch != nullptr && columns.empty()) return std::move(item.batch);
    if (item.batch != nullptr) {
      std::vector<format::ArrayDataPtr> kept;
      kept.reserve(columns.size());
      for (int index : columns) kept.push_back(item.batch->column_data(index));
      return format::RecordBatch::Make(schema, item.batch->num_rows(), std::move(kept));
    }
    if (options.verification == Verification::kPrivateCopy && item.rows.data != nullptr) {
      const format::Buffer& shared = *item.rows.data;
      ALKAID_ASSIGN_OR_RAISE(item.rows.data, format::Buffer::CopyOf(std::string_view(
                                                 reinterpret_cast<const char*>(shared.data()),
                                                 static_cast<size_t>(shared.size()))));
    }
    return item.rows.ToRecordBatch();
  }
};

namespace {

// Consumer::Open and RowConsumer::Open: a consumer that expects `kind`
// (std::nullopt: any); `returns_rows` for a RowConsumer.
Result<std::unique_ptr<internal::ConsumerImpl>> OpenConsumer(const std::string& topic,
                                                             const ConsumerOptions& given,
                                                             std::optional<TopicKind> kind,
                                                             bool returns_rows) {
  ALKAID_RETURN_NOT_OK(p::ValidateTopicName(topic));
  auto impl = std::make_unique<internal::ConsumerImpl>();
  impl->topic = topic;
  impl->returns_rows = returns_rows;
  impl->options = given;
  impl->options.kind = kind;
  const ConsumerOptions& options = impl->options;
  impl->exports = internal::ExportCounter::Make(options.max_exported_batches);
  impl->kind = options.kind.value_or(TopicKind::kRecordBatch);
  const auto topic_deadline = internal::DeadlineAfter(options.wait_for_topic);
  ALKAID_ASSIGN_OR_RAISE(impl->session,
                         internal::BrokerSession::Connect(
                             topic, internal::BrokerSession::Role::kConsumer, options.socket_path));
  ALKAID_ASSIGN_OR_RAISE(p::Reply reply,
                         impl->Attach(impl->session->connection(), std::chrono::seconds(10)));
  if (reply.pending) {
    ALKAID_RETURN_NOT_OK(impl->session->AwaitTopic(
        [&impl](internal::BrokerConnection& conn) {
          return impl->Attach(conn, kReconnectCallTimeout);
        },
        topic_deadline, options.wait_for_topic, options.stop, &reply));
  }
  // The broker refuses another kind at attach, but a topic we waited for is
  // announced whatever its kind.
  const TopicKind topic_kind = internal::FromProtocol(reply.config.kind);
  if (options.kind.has_value() && *options.kind != topic_kind) {
    return Status::Invalid("topic '", topic, "' carries ", TopicKindName(topic_kind),
                           " payloads; this consumer expects ", TopicKindName(*options.kind));
  }
  impl->kind = topic_kind;
  impl->session->Attached(reply);
  auto schema = internal::DeserializeSchema(reply.config.schema);
  if (!schema.ok()) {
    return schema.status().WithContext("topic '" + topic + "': the broker's schema");
  }
  impl->topic_schema = *schema;
  // What Next returns: rows decode to RowOutputSchema (no dictionaries).
  format::SchemaPtr full = impl->topic_schema;
  if (impl->kind == TopicKind::kUnsafeRow) {
    ALKAID_ASSIGN_OR_RAISE(full, format::RowOutputSchema(*impl->topic_schema));
  }
  impl->schema = full;
  if (!options.columns.empty()) {
    format::FieldVector fields;
    for (const auto& name : options.columns) {
      const int index = full->GetFieldIndex(name);
      if (index < 0) {
        std::string names;
        for (const auto& f : full->fields()) names += (names.empty() ? "" : ", ") + f->name();
        return Status::KeyError("topic '", topic, "' has no column '", name, "'; its columns are ",
                                names);
      }
      if (std::find(impl->columns.begin(), impl->columns.end(), index) != impl->columns.end()) {
        return Status::Invalid("topic '", topic, "': column '", name, "' is asked for twice");
      }
      impl->columns.push_back(index);
      fields.push_back(full->field(index));
    }
    impl->schema = format::schema(std::move(fields), full->metadata());
  }
  impl->next_direct = impl->kind == TopicKind::kRecordBatch && impl->columns.empty();
  for (const auto& producer : reply.producers) impl->Subscribe(producer);
  impl->attached = true;
  return impl;
}

Status CloseConsumer(internal::ConsumerImpl& impl) {
  if (impl.closed) return Status::OK();
  impl.closed = true;
  impl.subs.clear();  // each ChannelConsumer closes its registration
  // A removed topic's consumers were detached by the broker already.
  if (impl.session && impl.removed.empty()) return impl.session->Detach();
  return Status::OK();
}

ConsumerStats StatsOf(const internal::ConsumerImpl& impl) {
  const internal::ExportCounter& e = *impl.exports;
  return {.lost = impl.lost,
          .reregistrations = impl.session->reregistrations(),
          .exported_held = e.held.load(std::memory_order_relaxed),
          .exported_total = e.total.load(std::memory_order_relaxed),
          .exports_refused = e.refused.load(std::memory_order_relaxed)};
}

}  // namespace

Consumer::Consumer(std::unique_ptr<internal::ConsumerImpl> impl) : impl_(std::move(impl)) {}

Consumer::~Consumer() { (void)Close(); }

Result<std::unique_ptr<Consumer>> Consumer::Open(const std::string& topic,
                                                 const ConsumerOptions& options) {
  ALKAID_ASSIGN_OR_RAISE(auto impl,
                         OpenConsumer(topic, options, options.kind, /*returns_rows=*/false));
  return std::unique_ptr<Consumer>(new Consumer(std::move(impl)));
}

Status Consumer::NextInto(BatchView* view, std::chrono::nanoseconds timeout) {
  if (view == nullptr) return Status::Invalid("Consumer::NextInto: null view");
  if (impl_->kind != TopicKind::kRecordBatch) {
    return Status::Invalid("Consumer::NextInto: topic '", impl_->topic,
                           "' carries unsafe-row payloads (RowConsumer::NextRows reads them)");
  }
  if (!impl_->columns.empty()) {
    return Status::Invalid("Consumer::NextInto: a column subset is given (Next projects it)");
  }
  BatchOrigin origin;
  ALKAID_ASSIGN_OR_RAISE(auto batch, Next(timeout, &origin));
  *view = BatchView(std::move(batch), origin.sequence, origin.lost_before);
  return Status::OK();
}

namespace {

// Consumer::Next (`wait`, folded where inlined) and TryNext, with an origin
// or without (nullptr, folded too). First the common case: one channel of
// record batches read whole (next_direct), a batch there. Its receive
// fills the Result returned (every return names it, so it is built in the
// caller's place: no Item, no moves between them) and is what PollOnce's
// attempt would do (the maintenance count included); anything else (no
// batch, an error, the channel ending, several channels, row topics, a
// column subset, a closed consumer) goes on in NextBatch.
[[gnu::always_inline]] inline Result<format::RecordBatchPtr> NextOf(
    internal::ConsumerImpl& impl, bool wait, std::chrono::nanoseconds timeout,
    BatchOrigin* origin) {
  Result<format::RecordBatchPtr> result{format::RecordBatchPtr()};
  if (impl.next_direct && impl.subs.size() == 1 && ++impl.since_maintain < kMaintainEvery) {
    BatchSubscriber& sub = *impl.subs.front().batches;
    Status st = sub.TryReceive(&*result);
    if (st.ok() && *result != nullptr) {
      impl.lost += sub.last_lost_before();
      impl.round_robin = 1;
      if (origin != nullptr) impl.FillOrigin(origin, nullptr);
      return result;
    }
    result = impl.NextBatch(wait, timeout, &st, origin);
    return result;
  }
  result = impl.NextBatch(wait, timeout, nullptr, origin);
  return result;
}

}  // namespace

Result<format::RecordBatchPtr> Consumer::Next(std::chrono::nanoseconds timeout,
                                              BatchOrigin* origin) {
  return NextOf(*impl_, /*wait=*/true, timeout, origin);
}

Result<format::RecordBatchPtr> Consumer::TryNext(BatchOrigin* origin) {
  return NextOf(*impl_, /*wait=*/false, std::chrono::nanoseconds(0), origin);
}

// Without an origin: its own copy of the steps, not a call of the above
// (its frame cost `Next` 8 instructions a batch).
Result<format::RecordBatchPtr> Consumer::Next(std::chrono::nanoseconds timeout) {
  return NextOf(*impl_, /*wait=*/true, timeout, nullptr);
}

Result<format::RecordBatchPtr> Consumer::TryNext() { return TryNext(nullptr); }

Status Consumer::Close() { return CloseConsumer(*impl_); }

Result<int> Consumer::WaitFd() {
  if (impl_->wait_set.epoll < 0) {
    const int fd = ::epoll_create1(EPOLL_CLOEXEC);
    if (fd < 0) return Status::FromErrno(errno, "topic '" + impl_->topic + "': epoll_create1");
    impl_->wait_set.epoll = fd;
  }
  return impl_->wait_set.epoll;
}

Result<bool> Consumer::ArmWait() { return impl_->ArmWait(); }

const std::string& Consumer::topic() const { return impl_->topic; }
const format::SchemaPtr& Consumer::schema() const { return impl_->schema; }
const format::SchemaPtr& Consumer::topic_schema() const { return impl_->topic_schema; }
TopicKind Consumer::kind() const { return impl_->kind; }
bool Consumer::publish_timestamps() const { return impl_->session->config().publish_timestamps; }
uint64_t Consumer::reregistrations() const { return impl_->session->reregistrations(); }
std::size_t Consumer::producer_count() const { return impl_->subs.size(); }
uint64_t Consumer::lost() const { return impl_->lost; }

ConsumerStats Consumer::stats() const { return StatsOf(*impl_); }

const std::shared_ptr<internal::ExportCounter>& internal::ExportsOf(const ConsumerImpl& impl) {
  return impl.exports;
}

// ---- RowConsumer -----------------------------------------------------------------

RowConsumer::RowConsumer(std::unique_ptr<internal::ConsumerImpl> impl) : impl_(std::move(impl)) {}

RowConsumer::~RowConsumer() { (void)Close(); }

Result<std::unique_ptr<RowConsumer>> RowConsumer::Open(const std::string& topic,
                                                       const ConsumerOptions& options) {
  ALKAID_ASSIGN_OR_RAISE(
      auto impl, OpenConsumer(topic, options, TopicKind::kUnsafeRow, /*returns_rows=*/true));
  return std::unique_ptr<RowConsumer>(new RowConsumer(std::move(impl)));
}

Result<ReceivedRows> RowConsumer::NextRows(std::chrono::nanoseconds timeout) {
  Item item;
  ALKAID_RETURN_NOT_OK(impl_->NextItem(/*wait=*/true, timeout, &item));
  return std::move(item.rows);
}

Result<ReceivedRows> RowConsumer::TryNextRows() {
  Item item;
  ALKAID_RETURN_NOT_OK(impl_->NextItem(/*wait=*/false, std::chrono::nanoseconds(0), &item));
  return std::move(item.rows);
}

Status RowConsumer::Close() { return CloseConsumer(*impl_); }
const std::string& RowConsumer::topic() const { return impl_->topic; }
const format::SchemaPtr& RowConsumer::schema() const { return impl_->schema; }
const format::SchemaPtr& RowConsumer::topic_schema() const { return impl_->topic_schema; }
uint64_t RowConsumer::reregistrations() const { return impl_->session->reregistrations(); }
std::size_t RowConsumer::producer_count() const { return impl_->subs.size(); }
uint64_t RowConsumer::lost() const { return impl_->lost; }
ConsumerStats RowConsumer::stats() const { return StatsOf(*impl_); }

}  // namespace alkaid::client
