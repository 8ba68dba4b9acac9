// The registry of topics, producers and consumers, and the request
// handlers (broker_internal.h).

#include <string>
#include <utility>
#include <vector>

#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/unsafe_row.h"
#include "alkaid/shm/channel.h"
#include "alkaid/shm/segment.h"
#include "daemon/broker_internal.h"
#include "daemon/segment_names.h"

namespace alkaid::broker {

using internal::FormatBytes;

namespace {

Result<format::SchemaPtr> DecodeSchema(const std::vector<uint8_t>& bytes,
                                       const std::string& topic) {
  auto buffer = std::make_shared<format::Buffer>(bytes.data(), static_cast<int64_t>(bytes.size()));
  format::ipc::BufferReader input(buffer);
  auto reader = format::ipc::RecordBatchStreamReader::Open(&input);
  if (!reader.ok()) {
    return Status::Invalid("topic '", topic, "': the schema is not a valid IPC schema message: ",
                           reader.status().message());
  }
  return (*reader)->schema();
}

}  // namespace

void Broker::Impl::ApplyTopicDefaults(p::TopicConfig* config) const {
  if (config->slot_count == 0) config->slot_count = options.default_slot_count;
  if (config->arena_bytes == 0) config->arena_bytes = options.default_arena_bytes;
  if (config->max_arena_bytes == 0) {
    config->max_arena_bytes = options.default_max_arena_bytes;
    // What the limit allows, if less (beside the slots and the initial arena).
    if (shm_limit.bytes != 0) {
      config->max_arena_bytes = std::min(config->max_arena_bytes, shm_limit.bytes);
    }
  }
  config->max_arena_bytes = std::max(config->max_arena_bytes, config->arena_bytes);
}

Result<p::Reply> Broker::Impl::CreateTopic(const p::Request& request) {
  p::TopicConfig config = request.config;
  ALKAID_ASSIGN_OR_RAISE(auto schema, DecodeSchema(config.schema, config.name));
  p::Reply reply;
  reply.type = p::ReplyType::kTopic;
  auto it = topics.find(config.name);
  if (config.kind == p::TopicKind::kUnsafeRow) {
    ALKAID_RETURN_NOT_OK_CTX(format::CheckRowSchema(*schema),
                             "topic '" << config.name << "' (unsafe-row payloads)");
  }
  if (it != topics.end()) {
    if (it->second.config.kind != config.kind) {
      return Status::Invalid("topic '", config.name, "' exists and carries ",
                             p::TopicKindName(it->second.config.kind), " payloads, not ",
                             p::TopicKindName(config.kind));
    }
    if (!it->second.schema->Equals(*schema)) {
      return Status::Invalid("topic '", config.name, "' exists with a different schema; existing: ",
                             it->second.schema->ToString(), "; requested: ", schema->ToString());
    }
    Topic& existing = it->second;
    if (!existing.sized && existing.producers.empty()) {
      // No producer ever attached (one may have been refused for these
      // sizes): the latest request's sizes apply.
      ApplyTopicDefaults(&config);
      existing.config.slot_count = config.slot_count;
      existing.config.arena_bytes = config.arena_bytes;
      existing.config.max_arena_bytes = config.max_arena_bytes;
      existing.config.policy = config.policy;
    }
    reply.config = existing.config;
    reply.created = false;
    return reply;
  }
  ApplyTopicDefaults(&config);
  Topic topic;
  topic.config = config;
  topic.schema = std::move(schema);
  Topic& created = topics.emplace(config.name, std::move(topic)).first->second;
  Log(LogLevel::kInfo, "topic '", config.name, "' created (", p::TopicKindName(config.kind), ", ",
      config.slot_count, " slots, arenas of ", FormatBytes(config.arena_bytes), " growing to ",
      FormatBytes(config.max_arena_bytes), ")");
  WelcomeWaitingConsumers(created);
  reply.config = std::move(config);
  reply.created = true;
  return reply;
}

void Broker::Impl::WelcomeWaitingConsumers(Topic& topic) {
  auto it = awaited.find(topic.config.name);
  if (it == awaited.end()) return;
  const std::set<uint64_t> ids = std::move(it->second);
  awaited.erase(it);
  for (uint64_t id : ids) {
    Consumer& consumer = consumers.at(id);
    consumer.pending = false;
    p::Event event;
    event.type = p::EventType::kTopicCreated;
    event.topic = topic.config.name;
    event.consumer_id = id;
    event.config = topic.config;
    SendEvent(consumer.conn, event);
    if (!consumer.any_kind && consumer.kind != topic.config.kind) {
      Log(LogLevel::kInfo, "consumer ", id, " (pid ", consumer.pid, ") waited for '",
          topic.config.name, "' but expects ", p::TopicKindName(consumer.kind),
          " payloads; dropped");
      auto conn = connections.find(consumer.conn);
      if (conn != connections.end()) conn->second.consumers.erase(id);
      consumers.erase(id);
      continue;
    }
    topic.consumers.insert(id);
    Log(LogLevel::kInfo, "consumer ", id, " (pid ", consumer.pid, ") attached to '",
        topic.config.name, "', which it waited for");
  }
}

Result<Broker::Impl::Topic*> Broker::Impl::FindTopic(const std::string& name) {
  auto it = topics.find(name);
  if (it == topics.end()) {
    return Status::KeyError("no topic '", name, "' on broker '", options.name, "' (", socket_path,
                            "); a producer creates it");
  }
  return &it->second;
}

Status Broker::Impl::CheckTopicKind(const Topic& topic, p::TopicKind wanted, const char* who) {
  if (topic.config.kind == wanted) return Status::OK();
  return Status::Invalid("topic '", topic.config.name, "' carries ",
                         p::TopicKindName(topic.config.kind), " payloads; ", who, " ",
                         p::TopicKindName(wanted));
}

Result<p::Reply> Broker::Impl::AttachProducer(Connection& c, int fd, const p::Request& request) {
  ALKAID_ASSIGN_OR_RAISE(Topic * topic, FindTopic(request.topic));
  ALKAID_RETURN_NOT_OK(CheckTopicKind(*topic, request.kind, "this producer publishes"));
  const bool readopt = !request.channel.empty();
  auto left = adoptable.end();
  if (readopt) {
    // A producer that outlived a broker restart: it may claim only the
    // channel that carries its own pid in its name.
    left = adoptable.find(request.channel);
    if (left == adoptable.end()) {
      return Status::KeyError("channel '", request.channel,
                              "' was not left by an earlier broker named '", options.name,
                              "' (or was removed since)");
    }
    if (left->second.pid != c.pid) {
      return Status::PermissionDenied("channel '", request.channel, "' belongs to pid ",
                                      left->second.pid, ", not to pid ", c.pid);
    }
  }
  // The slots (inline payload included) and headers; a generous estimate.
  const uint64_t slots_estimate = uint64_t{topic->config.slot_count} * 640 + (64u << 10);
  const uint64_t need = topic->config.arena_bytes + slots_estimate;
  if (!readopt && shm_limit.bytes != 0 && reserved_bytes + need > shm_limit.bytes) {
    return Status::CapacityError(
        "attaching a producer to topic '", request.topic, "' needs ", FormatBytes(need),
        " of shared memory; ", FormatBytes(reserved_bytes), " of the broker's limit of ",
        FormatBytes(shm_limit.bytes), " (", shm_limit.origin, ") are in use",
        need > shm_limit.bytes
            ? ". One producer of this topic needs more than the whole limit: give the topic a "
              "smaller arena (TopicOptions::arena_bytes, alkaid publish --arena-bytes), or "
              "the broker a larger --shm-limit (in a container, with a larger /dev/shm: docker "
              "run --shm-size=...)"
            : "");
  }
  Producer producer;
  producer.id = next_id++;
  producer.topic = request.topic;
  producer.conn = fd;
  producer.pid = c.pid;
  if (readopt) {
    // Already created and mapped by the producer; it keeps them.
    producer.channel = request.channel;
    adoptable.erase(left);
  } else {
    // The pid in the name lets a restarted broker tell whose they are.
    const std::string stem = internal::ProducerSegmentStem(instance, c.pid, producer.id);
    producer.channel = stem + internal::kChannelSuffix;
  }
  producer.reserved = need;
  reserved_bytes += need;
  topic->sized = true;
  topic->producers.insert(producer.id);
  c.producers.insert(producer.id);
  p::Reply reply;
  reply.type = p::ReplyType::kAttachProducer;
  reply.attached_id = producer.id;
  reply.channel = producer.channel;
  reply.config = topic->config;
  reply.segment_mode = have_group ? 0660 : 0600;
  Log(LogLevel::kInfo, "producer ", producer.id, " (pid ", c.pid, ") ",
      readopt ? "re-registered with its channel " + producer.channel + " on '"
              : std::string("attached to '"),
      request.topic, "'");
  producers.emplace(producer.id, std::move(producer));
  return reply;
}

Result<Broker::Impl::Producer*> Broker::Impl::OwnProducer(int fd, uint64_t id) {
  auto it = producers.find(id);
  if (it == producers.end() || it->second.conn != fd) {
    return Status::KeyError("no producer ", id, " attached through this connection");
  }
  return &it->second;
}

Result<p::Reply> Broker::Impl::ProducerReady(int fd, const p::Request& request) {
  ALKAID_ASSIGN_OR_RAISE(Producer * producer, OwnProducer(fd, request.target_id));
  const Topic& topic = topics.at(producer->topic);
  p::Reply reply;
  reply.type = p::ReplyType::kProducerReady;
  for (uint64_t cid : topic.consumers) reply.consumer_list.push_back({cid, consumers.at(cid).pid});
  if (producer->ready) return reply;
  producer->ready = true;
  p::Event event;
  event.type = p::EventType::kProducerJoined;
  event.topic = producer->topic;
  event.producer = {producer->id, producer->pid, producer->channel};
  for (uint64_t cid : topic.consumers) SendEvent(consumers.at(cid).conn, event);
  return reply;
}

Result<p::Reply> Broker::Impl::AttachConsumer(Connection& c, int fd, const p::Request& request) {
  if (request.wait_for_topic && topics.find(request.topic) == topics.end()) {
    // Attached before the topic exists: it becomes one of the topic's
    // consumers when the topic is created (WelcomeWaitingConsumers).
    Consumer consumer{next_id++, request.topic, fd, c.pid, true, request.kind, request.any_kind};
    p::Reply reply;
    reply.type = p::ReplyType::kAttachConsumer;
    reply.attached_id = consumer.id;
    reply.pending = true;
    awaited[request.topic].insert(consumer.id);
    c.consumers.insert(consumer.id);
    Log(LogLevel::kInfo, "consumer ", consumer.id, " (pid ", c.pid, ") waits for topic '",
        request.topic, "' to be created");
    consumers.emplace(consumer.id, std::move(consumer));
    return reply;
  }
  ALKAID_ASSIGN_OR_RAISE(Topic * topic, FindTopic(request.topic));
  if (!request.any_kind) {
    ALKAID_RETURN_NOT_OK(CheckTopicKind(*topic, request.kind, "this consumer expects"));
  }
  Consumer consumer{next_id++, request.topic, fd, c.pid, false, request.kind, request.any_kind};
  p::Reply reply;
  reply.type = p::ReplyType::kAttachConsumer;
  reply.attached_id = consumer.id;
  reply.config = topic->config;
  for (uint64_t pid : topic->producers) {
    const Producer& producer = producers.at(pid);
    if (producer.ready) {
      reply.producers.push_back({producer.id, producer.pid, producer.channel});
    }
  }
  topic->consumers.insert(consumer.id);
  c.consumers.insert(consumer.id);
  Log(LogLevel::kInfo, "consumer ", consumer.id, " (pid ", c.pid, ") attached to '", request.topic,
      "'", request.from_oldest ? " from the oldest message" : "");
  consumers.emplace(consumer.id, std::move(consumer));
  return reply;
}

void Broker::Impl::RemoveProducer(uint64_t id, const std::string& reason) {
  auto it = producers.find(id);
  if (it == producers.end()) return;
  Producer producer = std::move(it->second);
  producers.erase(it);
  reserved_bytes -= producer.reserved;
  RemoveChannelNames(producer.channel);
  // Extensions the channel's table did not list (being added or released
  // when the producer died) go by the names granted.
  for (const auto& [ext, bytes] : producer.extensions) {
    (void)shm::Segment::Remove(shm::ChannelExtensionName(producer.channel, ext));
  }
  auto conn = connections.find(producer.conn);
  if (conn != connections.end()) conn->second.producers.erase(id);
  auto topic_it = topics.find(producer.topic);
  if (topic_it == topics.end()) return;
  Topic& topic = topic_it->second;
  topic.producers.erase(id);
  topic.finished_published += producer.published;
  topic.finished_drops += producer.drops;
  if (producer.ready) {
    p::Event event;
    event.type = p::EventType::kProducerGone;
    event.topic = producer.topic;
    event.producer.id = id;
    event.reason = reason;
    for (uint64_t cid : topic.consumers) SendEvent(consumers.at(cid).conn, event);
  }
  Log(LogLevel::kInfo, "producer ", id, " of '", producer.topic, "' removed: ", reason);
}

void Broker::Impl::RemoveConsumer(uint64_t id, bool died) {
  auto it = consumers.find(id);
  if (it == consumers.end()) return;
  Consumer consumer = std::move(it->second);
  consumers.erase(it);
  auto conn = connections.find(consumer.conn);
  if (conn != connections.end()) conn->second.consumers.erase(id);
  const char* how = died ? "gone (process exited or connection lost)" : "detached";
  if (consumer.pending) {
    auto waiting = awaited.find(consumer.topic);
    if (waiting != awaited.end()) {
      waiting->second.erase(id);
      if (waiting->second.empty()) awaited.erase(waiting);
    }
    Log(LogLevel::kInfo, "consumer ", id, " waiting for '", consumer.topic, "' ", how);
    return;
  }
  auto topic_it = topics.find(consumer.topic);
  if (topic_it == topics.end()) return;
  topic_it->second.consumers.erase(id);
  // Dead: the producers detach its registrations (by pid) so that it
  // holds none of them back. Dead or detached: a producer waiting for it
  // to register on its channel (ProducerReady's reply) stops waiting for it.
  p::Event event;
  event.type = p::EventType::kConsumerGone;
  event.topic = consumer.topic;
  event.consumer_id = id;
  event.pid = consumer.pid;
  for (uint64_t pid : topic_it->second.producers) SendEvent(producers.at(pid).conn, event);
  Log(LogLevel::kInfo, "consumer ", id, " of '", consumer.topic, "' ", how);
}

Result<p::Reply> Broker::Impl::AddExtension(int fd, const p::Request& request) {
  ALKAID_ASSIGN_OR_RAISE(Producer * producer, OwnProducer(fd, request.target_id));
  const Topic& topic = topics.at(producer->topic);
  if (producer->extensions.count(request.extension_id) != 0) {
    return Status::Invalid("producer ", producer->id, " was granted extension ",
                           request.extension_id, " already");
  }
  uint64_t extended = 0;
  for (const auto& [id, bytes] : producer->extensions) extended += bytes;
  if (topic.config.arena_bytes + extended + request.bytes > topic.config.max_arena_bytes) {
    return Status::CapacityError("topic '", producer->topic, "': an extension of ",
                                 FormatBytes(request.bytes),
                                 " would take the arena past the topic's maximum of ",
                                 FormatBytes(topic.config.max_arena_bytes), " (it has ",
                                 FormatBytes(topic.config.arena_bytes + extended), ")");
  }
  if (shm_limit.bytes != 0 && reserved_bytes + request.bytes > shm_limit.bytes) {
    return Status::CapacityError(
        "topic '", producer->topic, "': an extension of ", FormatBytes(request.bytes),
        " of a producer's arena does not fit the broker's limit of ", FormatBytes(shm_limit.bytes),
        " (", shm_limit.origin, "), of which ", FormatBytes(reserved_bytes), " are in use");
  }
  producer->extensions.emplace(request.extension_id, request.bytes);
  producer->reserved += request.bytes;
  reserved_bytes += request.bytes;
  Log(LogLevel::kDebug, "producer ", producer->id, " of '", producer->topic, "': extension ",
      request.extension_id, " of ", FormatBytes(request.bytes));
  p::Reply reply;
  reply.type = p::ReplyType::kExtension;
  reply.extension_name = shm::ChannelExtensionName(producer->channel, request.extension_id);
  return reply;
}

void Broker::Impl::ReleaseExtension(int fd, const p::Request& request) {
  auto producer = OwnProducer(fd, request.target_id);
  if (!producer.ok()) return;
  auto it = (*producer)->extensions.find(request.extension_id);
  if (it == (*producer)->extensions.end()) return;
  // The producer removed the name; a second removal costs nothing and
  // covers one that did not.
  (void)shm::Segment::Remove(shm::ChannelExtensionName((*producer)->channel, it->first));
  (*producer)->reserved -= it->second;
  reserved_bytes -= it->second;
  (*producer)->extensions.erase(it);
}

Status Broker::Impl::Detach(int fd, const p::Request& request) {
  if (request.role == p::Role::kProducer) {
    ALKAID_RETURN_NOT_OK(OwnProducer(fd, request.target_id).status());
    RemoveProducer(request.target_id, "producer finished");
    return Status::OK();
  }
  auto it = consumers.find(request.target_id);
  if (it == consumers.end() || it->second.conn != fd) {
    return Status::KeyError("no consumer ", request.target_id, " attached through this connection");
  }
  RemoveConsumer(request.target_id, false);
  return Status::OK();
}

p::Reply Broker::Impl::ListTopics() {
  p::Reply reply;
  reply.type = p::ReplyType::kTopicList;
  // Schemas are listed while their sum stays within kMaxSchemaBytes, so
  // that the reply fits one frame; later topics go without theirs
  // (docs/BROKER.md, "Control protocol").
  std::size_t schema_budget = p::kMaxSchemaBytes;
  for (const auto& [name, topic] : topics) {
    p::TopicInfo info;
    info.config = topic.config;
    if (info.config.schema.size() <= schema_budget) {
      schema_budget -= info.config.schema.size();
    } else {
      info.config.schema.clear();
    }
    info.producers = static_cast<uint32_t>(topic.producers.size());
    info.consumers = static_cast<uint32_t>(topic.consumers.size());
    info.published = topic.finished_published;
    info.drops = topic.finished_drops;
    for (uint64_t id : topic.producers) {
      const Producer& producer = producers.at(id);
      info.published += producer.published;
      info.drops += producer.drops;
      info.held += producer.held;
      info.shm_bytes += producer.reserved;
      info.depth = std::max(info.depth, producer.depth);
    }
    reply.topics.push_back(std::move(info));
  }
  for (const auto& [name, ids] : awaited) {
    reply.awaited.push_back({name, static_cast<uint32_t>(ids.size())});
  }
  return reply;
}

p::Reply Broker::Impl::Stats() {
  p::Reply reply;
  reply.type = p::ReplyType::kStats;
  p::BrokerStats& s = reply.stats;
  s.name = options.name;
  s.pid = static_cast<uint32_t>(::getpid());
  s.uptime_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
  s.connections = static_cast<uint32_t>(connections.size());
  s.topics = static_cast<uint32_t>(topics.size());
  s.producers = static_cast<uint32_t>(producers.size());
  s.consumers = static_cast<uint32_t>(consumers.size());
  s.segments = static_cast<uint32_t>(2 * (producers.size() + adoptable.size()));
  for (const auto& [id, producer] : producers) {
    s.segments += static_cast<uint32_t>(producer.extensions.size());
  }
  s.reserved_bytes = reserved_bytes;
  s.shm_limit = shm_limit.bytes;
  s.shm_limit_origin = shm_limit.origin;
  s.shm_total = shm_total;
  // Free now, whoever holds the rest (figures only: nothing is decided on them).
  if (auto space = internal::StatShmSpace(options.shm_dir); space.ok()) {
    s.shm_total = space->total;
    s.shm_free = space->free;
  }
  s.rejected_frames = rejected_frames;
  return reply;
}

void Broker::Impl::Handle(int fd, Connection& c, const p::Request& request) {
  Log(LogLevel::kDebug, "pid ", c.pid, ": ", p::RequestTypeName(request.type), " #", request.id);
  Result<p::Reply> reply = p::Reply{};
  switch (request.type) {
    case p::RequestType::kCreateTopic:
      reply = CreateTopic(request);
      break;
    case p::RequestType::kAttachProducer:
      reply = AttachProducer(c, fd, request);
      break;
    case p::RequestType::kProducerReady:
      reply = ProducerReady(fd, request);
      break;
    case p::RequestType::kAttachConsumer:
      reply = AttachConsumer(c, fd, request);
      break;
    case p::RequestType::kDetach: {
      const Status st = Detach(fd, request);
      if (!st.ok()) reply = st;
      break;
    }
    case p::RequestType::kListTopics:
      reply = ListTopics();
      break;
    case p::RequestType::kGetStats:
      reply = Stats();
      break;
    case p::RequestType::kAddExtension:
      reply = AddExtension(fd, request);
      break;
    case p::RequestType::kReleaseExtension:
      // A report, not a question: no reply.
      ReleaseExtension(fd, request);
      return;
    case p::RequestType::kProducerStats: {
      // A report, not a question: no reply.
      auto producer = OwnProducer(fd, request.target_id);
      if (producer.ok()) {
        (*producer)->published = request.published;
        (*producer)->depth = request.depth;
        (*producer)->drops = request.drops;
        (*producer)->held = request.held;
      }
      return;
    }
  }
  if (!reply.ok()) {
    Log(LogLevel::kInfo, "pid ", c.pid, ": ", p::RequestTypeName(request.type),
        " refused: ", reply.status().ToString());
    SendError(c, request.id, reply.status());
    return;
  }
  reply->request_id = request.id;
  SendReply(c, std::move(*reply));
}

}  // namespace alkaid::broker
