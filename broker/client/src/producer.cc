#include "alkaid/client/producer.h"

#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <stop_token>
#include <thread>

#include "alkaid/client/batch_publisher.h"
#include "alkaid/client/row_channel.h"
#include "alkaid/client/row_producer.h"
#include "alkaid/common/process.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/ipc/dictionary.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/unsafe_row.h"
#include "alkaid/shm/channel.h"
#include "alkaid/shm/segment.h"
#include "broker_session.h"
#include "connection_internal.h"

namespace alkaid::client {

namespace p = broker::protocol;
using Clock = std::chrono::steady_clock;

namespace {
using internal::kReconnectCallTimeout;
// Once the broker is lost, consumers that were not told of us yet cannot
// be: Open waits at most this much longer for the others to register.
constexpr auto kWaitAfterBrokerLoss = std::chrono::milliseconds(2000);

// True if every process in `awaited` (consumer id -> pid) has at least as
// many registrations on the channel (accepted or waiting) as it has
// awaited consumers.
bool AllRegistered(const std::map<uint64_t, uint32_t>& awaited,
                   const std::vector<shm::ChannelConsumerInfo>& registered) {
  std::map<uint32_t, uint32_t> needed;  // pid -> consumers
  for (const auto& [id, pid] : awaited) ++needed[pid];
  for (const auto& c : registered) {
    auto it = needed.find(c.pid);
    if (!c.closed && it != needed.end() && it->second > 0) --it->second;
  }
  for (const auto& [pid, left] : needed) {
    if (left > 0) return false;
  }
  return true;
}
}  // namespace

// A producer: its broker session (broker_session.h) and what it publishes
// through: Producer uses `publisher` (record batches), RowProducer
// `row_publisher` (row batches).
struct internal::ProducerImpl {
  std::string topic;
  format::SchemaPtr schema;
  ProducerOptions options;
  std::unique_ptr<internal::BrokerSession> session;
  // The channel's name, as the broker handed it out (sent back when
  // re-registering).
  std::string channel_name;
  std::unique_ptr<shm::ChannelProducer> channel;
  std::unique_ptr<BatchPublisher> publisher;    // Producer's
  std::unique_ptr<RowPublisher> row_publisher;  // RowProducer's
  TopicKind kind = TopicKind::kRecordBatch;

  std::atomic<uint64_t> published{0};
  std::atomic<uint64_t> dead_detached{0};
  std::atomic<uint64_t> blocks_live{0};
  std::atomic<uint64_t> arena_bytes_free{0};
  // The session thread asks (stats_wanted), the producer thread answers at
  // its next publish (the channel is the producer thread's alone).
  std::atomic<bool> stats_wanted{false};
  std::atomic<uint64_t> depth{0};
  std::atomic<uint64_t> drops{0};
  std::atomic<uint64_t> held{0};             // bodies consumers hold (UpdateStats)
  std::atomic<uint64_t> arena_bytes{0};      // the arena now, extensions included (UpdateStats)
  std::atomic<uint64_t> published_bytes{0};  // body bytes published (UpdateStats)
  // Each consumer on the channel, as UpdateStats last saw it: written by the
  // producer thread, sent by the session thread (FillStats), under the mutex.
  std::mutex consumer_figures_mutex;
  std::vector<p::ConsumerFigures> consumer_figures;
  // UpdateStats' own, reused: a publish that answers the session's ask
  // allocates nothing once they have grown.
  std::vector<shm::ChannelConsumerInfo> consumers_seen;
  std::vector<p::ConsumerFigures> figures_made;
  std::atomic<uint64_t> arrow_zero_copy{0};
  std::atomic<uint64_t> arrow_copied{0};
  // The channel's fixed blocks, as the broker granted them (0: none); sent
  // again when re-registering, so that a restarted broker counts them.
  uint64_t fixed_block_bytes = 0;
  uint32_t fixed_block_count = 0;
  bool closed = false;

  ~ProducerImpl() {
    if (session) session->StopThread();
    publisher.reset();
    row_publisher.reset();
    channel.reset();
  }

  // The channel object stays (pools, loans and writers may still refer to
  // it; they fail cleanly on a closed channel) until the producer goes.
  void RemoveNames() {
    if (!channel_name.empty()) (void)shm::RemoveChannel(channel_name);
  }

  // Producer thread: the figures the session thread reports, when it asked
  // (the test inline: every publish makes it; the work out of line).
  void UpdateStats() {
    if (stats_wanted.load(std::memory_order_relaxed)) UpdateStatsNow();
  }
  [[gnu::noinline]] void UpdateStatsNow() {
    stats_wanted.store(false, std::memory_order_relaxed);
    // Returned blocks are drained lazily (when a loan finds no cached
    // block): without this a consumer that keeps up would show up to a lap
    // of slots as held.
    channel->CollectReturns();
    const uint64_t end = channel->next_sequence();
    uint64_t min_cursor = end;
    uint64_t held_blocks = 0;
    channel->consumers(&consumers_seen);
    figures_made.clear();
    for (const auto& c : consumers_seen) {
      if (c.accepted && !c.closed) min_cursor = std::min(min_cursor, c.cursor);
      held_blocks += c.held_blocks;
      if (c.accepted) {
        figures_made.push_back({c.pid, c.closed ? 0 : end - std::min(c.cursor, end), c.dropped,
                                c.held_blocks, c.held_bytes, c.read_bytes, c.token});
      }
    }
    {
      std::lock_guard<std::mutex> lock(consumer_figures_mutex);
      consumer_figures.swap(figures_made);
    }
    held.store(held_blocks, std::memory_order_relaxed);
    depth.store(end - std::min(min_cursor, end), std::memory_order_relaxed);
    const shm::ChannelStats counters = channel->stats();
    drops.store(counters.dropped, std::memory_order_relaxed);
    dead_detached.store(counters.consumers_reclaimed, std::memory_order_relaxed);
    blocks_live.store(counters.blocks_live, std::memory_order_relaxed);
    arena_bytes_free.store(counters.arena_bytes_free, std::memory_order_relaxed);
    arena_bytes.store(counters.arena_bytes, std::memory_order_relaxed);
    published_bytes.store(counters.published_bytes, std::memory_order_relaxed);
    // Extensions of the arena nothing used for a while go back (a producer
    // that publishes may never Poll).
    channel->ReleaseIdleExtensions();
  }

  // Session thread: what a kProducerStats report says; asks the producer
  // thread for fresh figures for the next one.
  void FillStats(p::Request& request) {
    request.published = published.load(std::memory_order_relaxed);
    request.depth = depth.load(std::memory_order_relaxed);
    request.drops = drops.load(std::memory_order_relaxed);
    request.held = held.load(std::memory_order_relaxed);
    request.arena_bytes = arena_bytes.load(std::memory_order_relaxed);
    request.published_bytes = published_bytes.load(std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(consumer_figures_mutex);
      request.consumer_figures = consumer_figures;
    }
    stats_wanted.store(true, std::memory_order_relaxed);
  }

  // Session thread, after a broker outage: registers again with whichever
  // broker now answers on the socket, keeping our segments.
  Result<p::Reply> Reregister(internal::BrokerConnection& conn) {
    p::Request attach;
    attach.type = p::RequestType::kAttachProducer;
    attach.topic = topic;
    attach.kind = internal::ToProtocol(kind);
    attach.channel = channel_name;
    attach.fixed_block_bytes = fixed_block_bytes;
    attach.fixed_block_count = fixed_block_count;
    auto reply = internal::BrokerSession::Attach(conn, std::move(attach), kReconnectCallTimeout);
    if (!reply.ok()) {
      // The broker does not have our segments (stopped cleanly, or we were
      // too late): consumers that attach from now on cannot find us.
      if (reply.status().code() == StatusCode::kKeyError ||
          reply.status().code() == StatusCode::kPermissionDenied) {
        session->StopReregistering();
      }
      return reply;
    }
    ALKAID_RETURN_NOT_OK(
        internal::BrokerSession::Ready(conn, reply->attached_id, kReconnectCallTimeout).status());
    return reply;
  }

  // Open, before the session thread starts: the consumers the broker
  // announced us to (ProducerReady's reply) register on our channel when
  // they next look for data. Waits until each has registered or left the
  // topic (ConsumerGone, or its process is gone), so that they see our
  // first message; at most `timeout`. Cancelled once options.stop is
  // requested (looked at every ms or so).
  Status WaitForConsumers(const p::Reply& ready, std::chrono::milliseconds timeout) {
    std::map<uint64_t, uint32_t> awaited;  // consumer id -> pid
    for (const auto& c : ready.consumer_list) awaited.emplace(c.id, c.pid);
    auto deadline = internal::DeadlineAfter(timeout);
    bool lost = false;
    while (true) {
      (void)session->PumpEvents([&awaited](const p::Event& e) {
        if (e.type == p::EventType::kConsumerGone) awaited.erase(e.consumer_id);
      });
      const auto now = Clock::now();
      if (session->lost() && !lost) {
        lost = true;
        deadline = std::min(deadline, now + kWaitAfterBrokerLoss);
      }
      if (session->PidCheckDue(now)) {
        std::erase_if(awaited, [](const auto& entry) { return ProcessIsGone(entry.second); });
      }
      const auto registered = channel->consumers();
      uint32_t active = 0;
      for (const auto& c : registered) active += c.closed ? 0 : 1;
      if (AllRegistered(awaited, registered)) return Status::OK();
      if (now >= deadline) return Status::OK();
      if (options.stop.stop_requested()) {
        return Status::Cancelled("topic '", topic, "': the wait for ", awaited.size(),
                                 " consumers to register was cancelled (", active, " registered)");
      }
      // A ConsumerGone wakes us at once; registrations are looked at every ms.
      pollfd pfd{session->fd(), POLLIN, 0};
      (void)::poll(&pfd, 1, 1);
    }
  }
};

namespace {

Status CloseProducer(internal::ProducerImpl& impl);

// Producer::Open and RowProducer::Open: a producer of `kind` (whatever
// options.topic.kind says).
Result<std::unique_ptr<internal::ProducerImpl>> OpenProducer(const std::string& topic,
                                                             format::SchemaPtr schema,
                                                             const ProducerOptions& options,
                                                             TopicKind kind) {
  ALKAID_RETURN_NOT_OK(p::ValidateTopicName(topic));
  ALKAID_RETURN_NOT_OK(p::CheckFixedBlocks(options.fixed_block_bytes, options.fixed_block_count,
                                           "topic '" + topic + "': ProducerOptions"));
  ALKAID_ASSIGN_OR_RAISE(auto schema_bytes, internal::SerializeSchema(schema));
  auto impl = std::make_unique<internal::ProducerImpl>();
  impl->topic = topic;
  impl->schema = schema;
  impl->options = options;
  impl->options.topic.kind = kind;
  impl->kind = kind;
  if (impl->kind == TopicKind::kUnsafeRow) {
    ALKAID_RETURN_NOT_OK_CTX(format::CheckRowSchema(*schema),
                             "topic '" << topic << "' (unsafe-row payloads)");
  }
  ALKAID_ASSIGN_OR_RAISE(impl->session,
                         internal::BrokerSession::Connect(
                             topic, internal::BrokerSession::Role::kProducer, options.socket_path));
  internal::BrokerSession& session = *impl->session;
  ALKAID_RETURN_NOT_OK(session.CreateTopic(
      internal::MakeTopicConfig(topic, std::move(schema_bytes), impl->options.topic)));

  p::Request attach;
  attach.type = p::RequestType::kAttachProducer;
  attach.topic = topic;
  attach.kind = internal::ToProtocol(impl->kind);
  attach.fixed_block_bytes = options.fixed_block_bytes;
  attach.fixed_block_count = options.fixed_block_count;
  ALKAID_ASSIGN_OR_RAISE(auto reply,
                         internal::BrokerSession::Attach(session.connection(), std::move(attach)));
  session.Attached(reply);
  impl->channel_name = reply.channel;
  // Exactly what the broker counted: none from a broker of an earlier
  // release (it ignores the request's fields), none unless asked. A grant
  // other than what was asked (the size rounded up to 64; the count, or
  // any when 0 left it to the broker) is refused: the segment would not be
  // what the broker's figures describe.
  if (options.fixed_block_bytes != 0 && reply.fixed_block_bytes != 0) {
    if (reply.fixed_block_bytes != (options.fixed_block_bytes + 63) / 64 * 64 ||
        (options.fixed_block_count != 0 && reply.fixed_block_count != options.fixed_block_count)) {
      return Status::Invalid("topic '", topic, "': the broker granted ", reply.fixed_block_count,
                             " fixed blocks of ", reply.fixed_block_bytes, " bytes for ",
                             options.fixed_block_count, " of ", options.fixed_block_bytes,
                             " asked");
    }
    impl->fixed_block_bytes = reply.fixed_block_bytes;
    impl->fixed_block_count = reply.fixed_block_count;
  }

  p::Reply ready_reply;
  auto setup = [&]() -> Status {
    shm::ChannelOptions channel_options;
    channel_options.segment.access = reply.segment_mode == 0660
                                         ? shm::SegmentAccess::kOwnerAndGroupRead
                                         : shm::SegmentAccess::kOwnerOnly;
    if (reply.segment_mode == 0660) {
      // The broker grants a group (--group) and gave its socket to it: so
      // are the segments, or members other than this user could not map
      // them (a root producer's would be root's group).
      struct stat socket_stat {};
      if (::stat(session.connection().socket_path().c_str(), &socket_stat) == 0) {
        channel_options.segment.group = socket_stat.st_gid;
      }
    }
    channel_options.segment.huge_pages = options.huge_pages;
    channel_options.arena_bytes = reply.config.arena_bytes;
    channel_options.max_arena_bytes = reply.config.max_arena_bytes;
    internal::ProducerImpl* self = impl.get();
    // While the broker is away, an extension is made under the name the
    // broker would give, uncounted: a restarted broker sweeps it by the
    // channel's table, or by its prefix if we die.
    channel_options.extensions.acquire = [self](uint32_t id, uint64_t bytes) {
      return self->session->AddExtension(id, bytes,
                                         shm::ChannelExtensionName(self->channel_name, id));
    };
    channel_options.extensions.release = [self](uint32_t id, uint64_t /*bytes*/) {
      self->session->ReleaseExtension(id);
    };
    channel_options.slot_count = reply.config.slot_count;
    channel_options.fixed_block_bytes = impl->fixed_block_bytes;
    channel_options.fixed_block_count = impl->fixed_block_count;
    channel_options.stamp_publish_time = reply.config.publish_timestamps;
    channel_options.policy = reply.config.policy == p::Policy::kDropOldest
                                 ? shm::SlowConsumerPolicy::kDropOldest
                                 : shm::SlowConsumerPolicy::kBlockProducer;
    channel_options.publish_timeout = options.publish_timeout;
    channel_options.space_timeout = options.publish_timeout;
    channel_options.stop = options.stop;
    // Room inline for the Message of a batch of a new shape (most fit);
    // batches of a shape seen before send a shape id and nothing inline.
    channel_options.inline_capacity = 448;
    channel_options.shape_count = 64;
    // Dictionary replays reach each new consumer before its first batch
    // (BatchPublisher accepts consumers itself). Row batches carry their
    // dictionaries' values and RowPublisher replays nothing: the channel
    // accepts consumers on publish, or a row topic with dictionary fields
    // would never deliver a batch.
    format::ipc::DictionaryMemo ids;
    ALKAID_RETURN_NOT_OK(ids.AssignIds(*schema));
    channel_options.accept_on_publish =
        impl->kind == TopicKind::kUnsafeRow || ids.num_fields() == 0;
    ALKAID_ASSIGN_OR_RAISE(impl->channel,
                           shm::ChannelProducer::Create(reply.channel, channel_options));
    // UpdateStats' vectors at their largest from the start: a publish that
    // answers the session's ask for figures never allocates.
    const uint32_t most = impl->channel->options().max_consumers;
    impl->consumers_seen.reserve(most);
    impl->figures_made.reserve(most);
    impl->consumer_figures.reserve(most);
    if (impl->kind == TopicKind::kUnsafeRow) {
      ALKAID_ASSIGN_OR_RAISE(impl->row_publisher,
                             RowPublisher::Create(impl->channel.get(), schema));
    } else {
      ALKAID_ASSIGN_OR_RAISE(impl->publisher, BatchPublisher::Create(impl->channel.get(), schema));
    }
    ALKAID_ASSIGN_OR_RAISE(ready_reply,
                           internal::BrokerSession::Ready(session.connection(), session.id()));
    return Status::OK();
  };
  const Status st = setup();
  if (!st.ok()) {
    impl->publisher.reset();
    impl->row_publisher.reset();
    impl->RemoveNames();
    return st;
  }

  // Consumers already subscribed learn of us through the broker and register
  // on our channel: wait for them, so that they see our first batch.
  const Status waited = impl->WaitForConsumers(ready_reply, options.wait_for_consumers);
  if (!waited.ok()) {
    // Detach and remove the channel, as Close does (nothing was published,
    // so there is nothing to drain).
    (void)CloseProducer(*impl);
    return waited;
  }
  internal::ProducerImpl* raw = impl.get();
  session.StartThread([raw](internal::BrokerConnection& conn) { return raw->Reregister(conn); },
                      [raw](p::Request& request) { raw->FillStats(request); });
  return impl;
}

[[gnu::noinline, gnu::cold]] Status ProducerClosed(const internal::ProducerImpl& impl) {
  return Status::Invalid("producer of '", impl.topic, "' is closed");
}

// The refusal's formatting out of line: the calls that check (every
// NewBatchPool and Publish) keep a small frame.
Status CheckOpen(const internal::ProducerImpl& impl) {
  if (impl.closed) return ProducerClosed(impl);
  return Status::OK();
}

// Publish's failure given the topic as context, out of the publish calls'
// frames.
[[gnu::noinline, gnu::cold]] Status PublishFailed(Status st, const std::string& topic) {
  ALKAID_RETURN_NOT_OK_CTX(st, "topic '" << topic << "'");
  return st;
}

// Publish's and PublishCopy's end, given what their publisher said: the
// stats when asked, the topic named on a failure, a success counted.
[[gnu::always_inline]] inline Status Published(internal::ProducerImpl& impl, Status st) {
  impl.UpdateStats();
  if (!st.ok()) return PublishFailed(std::move(st), impl.topic);
  impl.published.fetch_add(1, std::memory_order_relaxed);
  return st;
}

}  // namespace

Producer::Producer(std::unique_ptr<internal::ProducerImpl> impl) : impl_(std::move(impl)) {}

Producer::~Producer() { (void)Close(); }

Result<std::unique_ptr<Producer>> Producer::Open(const std::string& topic, format::SchemaPtr schema,
                                                 const ProducerOptions& options) {
  ALKAID_ASSIGN_OR_RAISE(auto impl,
                         OpenProducer(topic, std::move(schema), options, TopicKind::kRecordBatch));
  return std::unique_ptr<Producer>(new Producer(std::move(impl)));
}

Result<std::unique_ptr<ShmBatchPool>> Producer::NewBatchPool(uint64_t region_bytes) {
  ALKAID_RETURN_NOT_OK(CheckOpen(*impl_));
  return impl_->publisher->NewPool(region_bytes);
}

// A writer's publish counts as the Producer's (Producer::Publish's order:
// the figures asked for, then the count).
void internal::WriterPublished(ProducerImpl* producer) {
  producer->UpdateStats();
  producer->published.fetch_add(1, std::memory_order_relaxed);
}

Result<std::unique_ptr<FixedShapeWriter>> Producer::NewFixedShapeWriter(
    const format::RecordBatch& prototype, const ShmBatchPool& pool,
    const FixedShapeWriterOptions& options) {
  ALKAID_RETURN_NOT_OK(CheckOpen(*impl_));
  auto writer = impl_->publisher->NewFixedShapeWriter(prototype, pool, options);
  if (!writer.ok()) return writer.status().WithContext("topic '" + impl_->topic + "'");
  (*writer)->producer_ = impl_.get();
  (*writer)->UpdatePlainPublish();
  return writer;
}

namespace {

// The values' bytes of each column of a batch of `rows` rows of `schema`
// (every column fixed-width: NotImplemented naming the first other), and
// the body they make, each padded to 64 (at least 64) as the pool lays
// them out: an upper bound of the writer's body_length().
Result<uint64_t> FixedShapeColumnBytes(const format::Schema& schema, int64_t rows,
                                       std::vector<int64_t>* bytes) {
  constexpr int64_t kMaxRows = int64_t{1} << 40;  // no product below overflows
  if (rows < 0 || rows > kMaxRows) {
    return Status::Invalid("NewFixedShapeWriter: ", rows, " rows (0 to 2^40)");
  }
  uint64_t body = 0;
  for (int i = 0; i < schema.num_fields(); ++i) {
    const format::DataType& type = *schema.field(i)->type();
    const format::DataTypeLayout& layout = type.layout();
    if (!format::IsFixedWidth(type.id()) || layout.buffers.size() != 2 || !layout.has_validity) {
      return Status::NotImplemented("NewFixedShapeWriter(rows): column ", i, " ('",
                                    schema.field(i)->name(), "') has type ", type.ToString(),
                                    ", not a fixed-width one; build a prototype batch instead");
    }
    const format::DataTypeLayout::BufferSpec& values = layout.buffers[1];
    const int64_t n = values.kind == format::DataTypeLayout::BufferKind::kBitmap
                          ? (rows + 7) / 8
                          : rows * values.byte_width;
    if (bytes != nullptr) bytes->push_back(n);
    body += std::max<uint64_t>((static_cast<uint64_t>(n) + 63) / 64 * 64, 64);
  }
  return body;
}

}  // namespace

Result<uint64_t> Producer::FixedShapeBodyBytes(const format::Schema& schema, int64_t rows) {
  ALKAID_ASSIGN_OR_RAISE(const uint64_t body, FixedShapeColumnBytes(schema, rows, nullptr));
  return std::max<uint64_t>(body, 64);  // a writer's region is at least a line
}

uint64_t Producer::fixed_block_bytes() const { return impl_->fixed_block_bytes; }
uint32_t Producer::fixed_block_count() const { return impl_->fixed_block_count; }

Result<std::unique_ptr<FixedShapeWriter>> Producer::NewFixedShapeWriter(
    int64_t rows, const FixedShapeWriterOptions& options) {
  ALKAID_RETURN_NOT_OK(CheckOpen(*impl_));
  const format::Schema& schema = *impl_->schema;
  std::vector<int64_t> bytes;
  ALKAID_ASSIGN_OR_RAISE(const uint64_t body, FixedShapeColumnBytes(schema, rows, &bytes));
  // At least one line more: a block has a distinct offset.
  const uint64_t region = body + 64;
  ALKAID_ASSIGN_OR_RAISE(auto pool, NewBatchPool(region));
  std::vector<format::ArrayDataPtr> columns;
  columns.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    // Zeroed: what Begin(Fill::kPrototype) copies.
    ALKAID_ASSIGN_OR_RAISE(auto values, format::AllocateBuffer(bytes[i], pool.get()));
    columns.push_back(format::ArrayData::Make(schema.field(static_cast<int>(i))->type(), rows,
                                              {nullptr, std::move(values)}, 0));
  }
  ALKAID_ASSIGN_OR_RAISE(auto prototype,
                         format::RecordBatch::Make(impl_->schema, rows, std::move(columns)));
  // The prototype's region goes back to the arena with `pool`.
  return NewFixedShapeWriter(*prototype, *pool, options);
}

Status Producer::Publish(const format::RecordBatch& batch, ShmBatchPool* pool) {
  ALKAID_RETURN_NOT_OK(CheckOpen(*impl_));
  return Published(*impl_, impl_->publisher->Publish(batch, pool));
}

Status Producer::PublishCopy(const format::RecordBatch& batch) {
  ALKAID_RETURN_NOT_OK(CheckOpen(*impl_));
  return Published(*impl_, impl_->publisher->PublishCopy(batch));
}

namespace {

// True if every buffer of `data` (children and dictionary included) lies in
// `pool`'s region.
bool LiesIn(const format::ArrayData& data, const ShmBatchPool& pool) {
  for (const auto& b : data.buffers) {
    if (b != nullptr && b->size() > 0 &&
        !pool.Contains(b->data(), static_cast<uint64_t>(b->size()))) {
      return false;
    }
  }
  for (const auto& child : data.child_data) {
    if (child != nullptr && !LiesIn(*child, pool)) return false;
  }
  return data.dictionary == nullptr || LiesIn(*data.dictionary, pool);
}

bool LiesIn(const format::RecordBatch& batch, const ShmBatchPool& pool) {
  for (int i = 0; i < batch.num_columns(); ++i) {
    if (!LiesIn(*batch.column_data(i), pool)) return false;
  }
  return true;
}

}  // namespace

// In place when the buffers lie in an unpublished pool and Publish can send
// them from there; one copy otherwise. Publish refuses a layout it cannot
// send in place (a slice needing re-basing) with Invalid before the batch
// goes out, leaving the pool sealed and unpublished.
Status Producer::PublishImported(const format::RecordBatch& batch, ShmBatchPool* pool) {
  if (pool != nullptr && !pool->sealed() && LiesIn(batch, *pool)) {
    Status st = Publish(batch, pool);
    if (st.ok()) {
      impl_->arrow_zero_copy.fetch_add(1, std::memory_order_relaxed);
      return st;
    }
    if (!st.IsInvalid()) return st;  // e.g. TimedOut: the caller may retry
  }
  ALKAID_RETURN_NOT_OK(PublishCopy(batch));
  impl_->arrow_copied.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

Status Producer::PublishArrowArray(ArrowArray* array, ArrowSchema* schema, ShmBatchPool* pool,
                                   const format::CImportOptions& options) {
  Result<format::RecordBatchPtr> batch =
      schema != nullptr ? format::ImportRecordBatch(array, schema, options)
                        : format::ImportRecordBatch(array, impl_->schema, options);
  if (!batch.ok()) {
    return batch.status().WithContext("topic '" + impl_->topic + "': importing an ArrowArray");
  }
  return PublishImported(**batch, pool);
}

Result<uint64_t> Producer::PublishArrowStream(ArrowArrayStream* stream,
                                              std::span<ShmBatchPool* const> pools,
                                              const format::CImportOptions& options) {
  ALKAID_ASSIGN_OR_RAISE(auto reader, format::CStreamReader::Import(stream, options));
  std::vector<ShmBatchPool*> unused(pools.begin(), pools.end());
  uint64_t published = 0;
  while (true) {
    auto batch = reader->Next();
    if (!batch.ok()) {
      return batch.status().WithContext("topic '" + impl_->topic + "': the stream's batch " +
                                        std::to_string(published));
    }
    if (*batch == nullptr) return published;
    ShmBatchPool* pool = nullptr;
    for (auto& candidate : unused) {
      if (candidate != nullptr && !candidate->sealed() && LiesIn(**batch, *candidate)) {
        pool = candidate;
        candidate = nullptr;
        break;
      }
    }
    ALKAID_RETURN_NOT_OK(PublishImported(**batch, pool));
    ++published;
  }
}

// ---- what Producer and RowProducer share ----------------------------------

namespace {

Status CloseProducer(internal::ProducerImpl& impl) {
  if (impl.closed) return Status::OK();
  impl.closed = true;
  Status cancelled;  // the drain's, returned once the rest is done
  if (impl.channel) {
    impl.channel->Close();
    // Consumers read what was published; one that dies meanwhile is
    // reclaimed by Poll and stops holding us up.
    const uint64_t end = impl.channel->next_sequence();  // batches and dictionary messages
    const auto deadline = Clock::now() + impl.options.drain_timeout;
    while (Clock::now() < deadline) {
      impl.channel->Poll();
      const std::vector<shm::ChannelConsumerInfo> consumers = impl.channel->consumers();
      const shm::ChannelConsumerInfo* behind = nullptr;
      for (const auto& c : consumers) {
        if (c.accepted && !c.closed && c.cursor < end) behind = &c;
      }
      if (behind == nullptr) break;
      if (impl.options.stop.stop_requested()) {
        cancelled = Status::Cancelled("topic '", impl.topic,
                                      "': closed, but the wait for the consumers to read the ", end,
                                      " messages published was cancelled (consumer ", behind->index,
                                      ", pid ", behind->pid, ", at ", behind->cursor, ")");
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    impl.stats_wanted.store(true, std::memory_order_relaxed);
    impl.UpdateStats();
  }
  impl.session->StopThread();
  Status status;
  if (!impl.session->lost()) {
    impl.session->ReportStats();  // the final count, for `alkaid topics`
    status = impl.session->Detach();
  }
  impl.RemoveNames();
  return status.ok() ? cancelled : status;
}

void SetStop(internal::ProducerImpl& impl, std::stop_token stop) {
  if (impl.channel != nullptr) impl.channel->set_stop(stop);
  impl.options.stop = std::move(stop);
}

void PollProducer(internal::ProducerImpl& impl) {
  if (impl.closed || impl.channel == nullptr) return;
  impl.channel->Poll();
  impl.stats_wanted.store(true, std::memory_order_relaxed);
  impl.UpdateStats();
}

ProducerStats StatsOf(const internal::ProducerImpl& impl) {
  ProducerStats s;
  s.published = impl.published.load();
  if (impl.publisher) s.copied_bytes = impl.publisher->stats().copied_bytes;
  if (impl.row_publisher) s.copied_bytes = impl.row_publisher->copied_bytes();
  s.reregistrations = impl.session->reregistrations();
  s.dead_consumers_detached = impl.dead_detached.load();
  s.blocks_live = impl.blocks_live.load();
  s.arena_bytes_free = impl.arena_bytes_free.load();
  s.arrow_zero_copy = impl.arrow_zero_copy.load(std::memory_order_relaxed);
  s.arrow_copied = impl.arrow_copied.load(std::memory_order_relaxed);
  s.held_by_consumers = impl.held.load(std::memory_order_relaxed);
  return s;
}

bool HugePages(const internal::ProducerImpl& impl) {
  return impl.channel != nullptr && impl.channel->huge_pages();
}

}  // namespace

Status Producer::Close() { return CloseProducer(*impl_); }
void Producer::set_stop(std::stop_token stop) { SetStop(*impl_, std::move(stop)); }
const std::string& Producer::topic() const { return impl_->topic; }
const format::SchemaPtr& Producer::schema() const { return impl_->schema; }
bool Producer::broker_lost() const { return impl_->session->broker_lost(); }
bool Producer::huge_pages() const { return HugePages(*impl_); }
void Producer::Poll() { PollProducer(*impl_); }
ProducerStats Producer::stats() const { return StatsOf(*impl_); }

// ---- RowProducer --------------------------------------------------------------

RowProducer::RowProducer(std::unique_ptr<internal::ProducerImpl> impl) : impl_(std::move(impl)) {}

RowProducer::~RowProducer() { (void)Close(); }

Result<std::unique_ptr<RowProducer>> RowProducer::Open(const std::string& topic,
                                                       format::SchemaPtr schema,
                                                       const ProducerOptions& options) {
  ALKAID_ASSIGN_OR_RAISE(auto impl,
                         OpenProducer(topic, std::move(schema), options, TopicKind::kUnsafeRow));
  return std::unique_ptr<RowProducer>(new RowProducer(std::move(impl)));
}

Status RowProducer::PublishRows(const format::RecordBatch& batch) {
  ALKAID_RETURN_NOT_OK(CheckOpen(*impl_));
  impl_->UpdateStats();
  ALKAID_RETURN_NOT_OK_CTX(impl_->row_publisher->PublishRows(batch),
                           "topic '" << impl_->topic << "'");
  impl_->published.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

Status RowProducer::PublishRowBatch(std::span<const uint8_t> row_batch) {
  ALKAID_RETURN_NOT_OK(CheckOpen(*impl_));
  impl_->UpdateStats();
  ALKAID_RETURN_NOT_OK_CTX(impl_->row_publisher->PublishRowBatch(row_batch),
                           "topic '" << impl_->topic << "'");
  impl_->published.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

Status RowProducer::Close() { return CloseProducer(*impl_); }
void RowProducer::set_stop(std::stop_token stop) { SetStop(*impl_, std::move(stop)); }
const std::string& RowProducer::topic() const { return impl_->topic; }
const format::SchemaPtr& RowProducer::schema() const { return impl_->schema; }
bool RowProducer::broker_lost() const { return impl_->session->broker_lost(); }
bool RowProducer::huge_pages() const { return HugePages(*impl_); }
void RowProducer::Poll() { PollProducer(*impl_); }
ProducerStats RowProducer::stats() const { return StatsOf(*impl_); }

}  // namespace alkaid::client
