// The registry of topics, producers and consumers, and the request
// handlers (registry.h).

#include "daemon/registry.h"

#include <algorithm>
#include <chrono>
#include <iterator>

#include <string>
#include <utility>
#include <vector>

#include "alkaid/common/process.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/unsafe_row.h"
#include "alkaid/shm/channel.h"
#include "alkaid/shm/segment.h"
#include "daemon/segment_names.h"
#include "daemon/shm_limit.h"

namespace alkaid::broker::internal {

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

void Registry::ApplyTopicDefaults(p::TopicConfig* config) const {
  if (config->slot_count == 0) config->slot_count = settings_.default_slot_count;
  if (config->arena_bytes == 0) config->arena_bytes = settings_.default_arena_bytes;
  if (config->max_arena_bytes == 0) {
    config->max_arena_bytes = settings_.default_max_arena_bytes;
    // What the limit allows, if less (beside the slots and the initial arena).
    if (settings_.shm_limit.bytes != 0) {
      config->max_arena_bytes = std::min(config->max_arena_bytes, settings_.shm_limit.bytes);
    }
  }
  config->max_arena_bytes = std::max(config->max_arena_bytes, config->arena_bytes);
}

Result<p::Reply> Registry::CreateTopic(const p::Request& request, Outcome* out) {
  p::TopicConfig config = request.config;
  ALKAID_ASSIGN_OR_RAISE(auto schema, DecodeSchema(config.schema, config.name));
  p::Reply reply;
  reply.type = p::ReplyType::kTopic;
  auto it = topics_.find(config.name);
  if (config.kind == p::TopicKind::kUnsafeRow) {
    ALKAID_RETURN_NOT_OK_CTX(format::CheckRowSchema(*schema),
                             "topic '" << config.name << "' (unsafe-row payloads)");
  }
  if (it != topics_.end()) {
    if (it->second.config.kind != config.kind) {
      return Status::Invalid("topic '", config.name, "' exists and carries ",
                             p::TopicKindName(it->second.config.kind), " payloads, not ",
                             p::TopicKindName(config.kind));
    }
    if (!it->second.schema->Equals(*schema)) {
      return Status::Invalid("topic '", config.name, "' exists with a different schema; existing: ",
                             it->second.schema->ToString(), "; requested: ", schema->ToString(),
                             it->second.producers.empty()
                                 ? std::string("; it has no producer: `alkaid topics rm ") +
                                       config.name + "` removes it"
                                 : std::string());
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
      existing.config.publish_timestamps = config.publish_timestamps;
    }
    reply.config = existing.config;
    reply.created = false;
    return reply;
  }
  ApplyTopicDefaults(&config);
  Topic topic;
  topic.config = config;
  topic.schema = std::move(schema);
  Topic& created = topics_.emplace(config.name, std::move(topic)).first->second;
  log_(LogLevel::kInfo, "topic '", config.name, "' created (", p::TopicKindName(config.kind), ", ",
       config.slot_count, " slots, arenas of ", FormatBytes(config.arena_bytes), " growing to ",
       FormatBytes(config.max_arena_bytes), config.publish_timestamps ? ", publish times" : "",
       ")");
  WelcomeWaitingConsumers(created, out);
  reply.config = std::move(config);
  reply.created = true;
  return reply;
}

void Registry::WelcomeWaitingConsumers(Topic& topic, Outcome* out) {
  auto it = awaited_.find(topic.config.name);
  if (it == awaited_.end()) return;
  const std::set<uint64_t> ids = std::move(it->second);
  awaited_.erase(it);
  for (uint64_t id : ids) {
    Consumer& consumer = consumers_.at(id);
    consumer.pending = false;
    p::Event event;
    event.type = p::EventType::kTopicCreated;
    event.topic = topic.config.name;
    event.consumer_id = id;
    event.config = topic.config;
    out->events.push_back({consumer.conn, event});
    if (!consumer.any_kind && consumer.kind != topic.config.kind) {
      log_(LogLevel::kInfo, "consumer ", id, " (pid ", consumer.pid, ") waited for '",
           topic.config.name, "' but expects ", p::TopicKindName(consumer.kind),
           " payloads; dropped");
      if (auto o = owned_.find(consumer.conn); o != owned_.end()) o->second.consumers.erase(id);
      consumers_.erase(id);
      continue;
    }
    topic.consumers.insert(id);
    log_(LogLevel::kInfo, "consumer ", id, " (pid ", consumer.pid, ") attached to '",
         topic.config.name, "', which it waited for");
  }
}

Result<Registry::Topic*> Registry::FindTopic(const std::string& name) {
  auto it = topics_.find(name);
  if (it == topics_.end()) {
    return Status::KeyError("no topic '", name, "' on broker '", settings_.broker_name, "' (",
                            settings_.socket_path, "); a producer creates it");
  }
  return &it->second;
}

Status Registry::CheckTopicKind(const Topic& topic, p::TopicKind wanted, const char* who) {
  if (topic.config.kind == wanted) return Status::OK();
  return Status::Invalid("topic '", topic.config.name, "' carries ",
                         p::TopicKindName(topic.config.kind), " payloads; ", who, " ",
                         p::TopicKindName(wanted));
}

Result<p::Reply> Registry::AttachProducer(const Peer& peer, const p::Request& request) {
  ALKAID_ASSIGN_OR_RAISE(Topic * topic, FindTopic(request.topic));
  ALKAID_RETURN_NOT_OK(CheckTopicKind(*topic, request.kind, "this producer publishes"));
  const bool readopt = !request.channel.empty();
  if (readopt) {
    // A producer that outlived a broker restart: it may claim only the
    // channel that carries its own pid in its name.
    ALKAID_RETURN_NOT_OK(leftovers_->Claim(request.channel, peer.pid));
  }
  // Fixed blocks (docs/SHM_LAYOUT.md), before the arena in the channel
  // segment: rounded as the channel rounds them, the count resolved here
  // (twice the slots, as libshm's default) so that the producer makes
  // exactly what is counted. The decoder checked the values; the resolved
  // count is checked again.
  uint64_t fixed_bytes = 0;
  uint32_t fixed_count = 0;
  if (request.fixed_block_bytes != 0) {
    fixed_bytes = (request.fixed_block_bytes + 63) / 64 * 64;
    fixed_count = request.fixed_block_count != 0
                      ? request.fixed_block_count
                      : static_cast<uint32_t>(std::min<uint64_t>(
                            uint64_t{2} * topic->config.slot_count, p::kMaxFixedBlockCount));
    ALKAID_RETURN_NOT_OK(p::CheckFixedBlocks(
        fixed_bytes, fixed_count, "attaching a producer to topic '" + request.topic + "'"));
  }
  const uint64_t fixed_area = p::FixedAreaBytes(fixed_bytes, fixed_count);
  // The slots (inline payload included) and headers; a generous estimate.
  // The fixed area starts on a page: up to one more.
  const uint64_t slots_estimate = uint64_t{topic->config.slot_count} * 640 + (64u << 10);
  const uint64_t need =
      topic->config.arena_bytes + slots_estimate + (fixed_area != 0 ? fixed_area + 4096 : 0);
  if (!readopt && settings_.shm_limit.bytes != 0 &&
      reserved_bytes_ + need > settings_.shm_limit.bytes) {
    const std::string fixed_part =
        fixed_area == 0 ? std::string()
                        : " (" + std::to_string(fixed_count) + " fixed blocks of " +
                              FormatBytes(fixed_bytes) + ": " + FormatBytes(fixed_area) + ")";
    return Status::CapacityError(
        "attaching a producer to topic '", request.topic, "' needs ", FormatBytes(need), fixed_part,
        " of shared memory; ", FormatBytes(reserved_bytes_), " of the broker's limit of ",
        FormatBytes(settings_.shm_limit.bytes), " (", settings_.shm_limit.origin, ") are in use",
        need > settings_.shm_limit.bytes
            ? std::string(". One producer of this topic needs more than the whole limit: give ") +
                  (fixed_area > topic->config.arena_bytes
                       ? "the producer fewer or smaller fixed blocks "
                         "(ProducerOptions::fixed_block_count, fixed_block_bytes)"
                       : "the topic a smaller arena (TopicOptions::arena_bytes, alkaid publish "
                         "--arena-bytes)") +
                  ", or the broker a larger --shm-limit (in a container, with a larger "
                  "/dev/shm: docker run --shm-size=...)"
            : std::string());
  }
  Producer producer;
  producer.id = next_id_++;
  producer.topic = request.topic;
  producer.conn = peer.conn;
  producer.pid = peer.pid;
  producer.uid = peer.uid;
  if (readopt) {
    // Already created and mapped by the producer; it keeps them.
    producer.channel = request.channel;
  } else {
    // The pid in the name lets a restarted broker tell whose they are.
    const std::string stem = ProducerSegmentStem(settings_.instance, peer.pid, producer.id);
    producer.channel = stem + kChannelSuffix;
  }
  producer.reserved = need;
  producer.fixed_block_bytes = fixed_bytes;
  producer.fixed_block_count = fixed_count;
  reserved_bytes_ += need;
  topic->sized = true;
  topic->producers.insert(producer.id);
  owned_[peer.conn].producers.insert(producer.id);
  p::Reply reply;
  reply.type = p::ReplyType::kAttachProducer;
  reply.attached_id = producer.id;
  reply.channel = producer.channel;
  reply.config = topic->config;
  reply.segment_mode = settings_.segment_mode;
  reply.fixed_block_bytes = fixed_bytes;
  reply.fixed_block_count = fixed_count;
  log_(LogLevel::kInfo, "producer ", producer.id, " (pid ", peer.pid, ") ",
       readopt ? "re-registered with its channel " + producer.channel + " on '"
               : std::string("attached to '"),
       request.topic, "'",
       fixed_count == 0 ? std::string()
                        : " with " + std::to_string(fixed_count) + " fixed blocks of " +
                              FormatBytes(fixed_bytes));
  producers_.emplace(producer.id, std::move(producer));
  return reply;
}

Result<Registry::Producer*> Registry::OwnProducer(int conn, uint64_t id) {
  auto it = producers_.find(id);
  if (it == producers_.end() || it->second.conn != conn) {
    return Status::KeyError("no producer ", id, " attached through this connection");
  }
  return &it->second;
}

Result<p::Reply> Registry::ProducerReady(const Peer& peer, const p::Request& request,
                                         Outcome* out) {
  ALKAID_ASSIGN_OR_RAISE(Producer * producer, OwnProducer(peer.conn, request.target_id));
  const Topic& topic = topics_.at(producer->topic);
  p::Reply reply;
  reply.type = p::ReplyType::kProducerReady;
  for (uint64_t cid : topic.consumers) reply.consumer_list.push_back({cid, consumers_.at(cid).pid});
  if (producer->ready) return reply;
  producer->ready = true;
  p::Event event;
  event.type = p::EventType::kProducerJoined;
  event.topic = producer->topic;
  event.producer = {producer->id, producer->pid, producer->channel};
  for (uint64_t cid : topic.consumers) out->events.push_back({consumers_.at(cid).conn, event});
  return reply;
}

// By pid and token: a process may hold several consumers of one topic, and
// each wrote its own token into its segments. Where either side has none (a
// consumer or a producer of an older build), by pid alone, as before: such
// a process's consumers each show the figures of all of them.
bool Registry::Consumer::Reports(const p::ConsumerFigures& f) const {
  return f.pid == pid && (f.token == 0 || token == 0 || f.token == token);
}

Result<p::Reply> Registry::AttachConsumer(const Peer& peer, const p::Request& request) {
  if (request.wait_for_topic && topics_.find(request.topic) == topics_.end()) {
    // Attached before the topic exists: it becomes one of the topic's
    // consumers when the topic is created (WelcomeWaitingConsumers).
    Consumer consumer{next_id_++,   request.topic,    peer.conn, peer.pid,          true,
                      request.kind, request.any_kind, peer.uid,  request.wait_mode, request.token};
    p::Reply reply;
    reply.type = p::ReplyType::kAttachConsumer;
    reply.attached_id = consumer.id;
    reply.pending = true;
    awaited_[request.topic].insert(consumer.id);
    owned_[peer.conn].consumers.insert(consumer.id);
    log_(LogLevel::kInfo, "consumer ", consumer.id, " (pid ", peer.pid, ") waits for topic '",
         request.topic, "' to be created");
    consumers_.emplace(consumer.id, std::move(consumer));
    return reply;
  }
  ALKAID_ASSIGN_OR_RAISE(Topic * topic, FindTopic(request.topic));
  if (!request.any_kind) {
    ALKAID_RETURN_NOT_OK(CheckTopicKind(*topic, request.kind, "this consumer expects"));
  }
  Consumer consumer{next_id_++,   request.topic,    peer.conn, peer.pid,          false,
                    request.kind, request.any_kind, peer.uid,  request.wait_mode, request.token};
  p::Reply reply;
  reply.type = p::ReplyType::kAttachConsumer;
  reply.attached_id = consumer.id;
  reply.config = topic->config;
  for (uint64_t pid : topic->producers) {
    const Producer& producer = producers_.at(pid);
    if (producer.ready) {
      reply.producers.push_back({producer.id, producer.pid, producer.channel});
    }
  }
  topic->consumers.insert(consumer.id);
  owned_[peer.conn].consumers.insert(consumer.id);
  log_(LogLevel::kInfo, "consumer ", consumer.id, " (pid ", peer.pid, ") attached to '",
       request.topic, "'", request.from_oldest ? " from the oldest message" : "");
  consumers_.emplace(consumer.id, std::move(consumer));
  return reply;
}

void Registry::RemoveProducer(uint64_t id, const std::string& reason, bool died,
                              std::vector<Outbound>* events) {
  auto it = producers_.find(id);
  if (it == producers_.end()) return;
  Producer producer = std::move(it->second);
  producers_.erase(it);
  auto topic_it = topics_.find(producer.topic);
  // Who may still have to map its extensions, if it died: the consumers of
  // the topic (a ready producer was announced to each), but for any that
  // said they were done with its channel already; and the processes
  // registered on its channel that this broker does not know as such (they
  // registered before a broker restart and have not subscribed again yet, or
  // did, but the producer died before it was announced again).
  Draining drain;
  shm::ChannelRemains remains;
  RemoveChannelNames(producer.channel, log_, died ? &remains : nullptr);
  if (died) {
    std::set<uint32_t> known;
    if (producer.ready && topic_it != topics_.end()) {
      for (uint64_t cid : topic_it->second.consumers) {
        known.insert(consumers_.at(cid).pid);
        if (producer.drained_by.count(cid) == 0) drain.consumers.insert(cid);
      }
    }
    for (uint32_t pid : remains.consumer_pids) {
      if (known.count(pid) == 0 && !::alkaid::ProcessIsGone(pid)) drain.pids.insert(pid);
    }
  }
  // Those the table lists and those granted (one being added may be missing
  // from the table; one made uncounted while the broker was away is missing
  // from the grants, and counted as 0 bytes).
  drain.extensions = producer.extensions;
  for (uint32_t ext : remains.extensions) drain.extensions.emplace(ext, 0);
  if (drain.done() || drain.extensions.empty()) {
    reserved_bytes_ -= producer.reserved;
    for (const auto& [ext, bytes] : drain.extensions) {
      (void)shm::Segment::Remove(shm::ChannelExtensionName(producer.channel, ext));
    }
  } else {
    for (const auto& [ext, bytes] : producer.extensions) drain.bytes += bytes;
    reserved_bytes_ -= producer.reserved - drain.bytes;
    drain.topic = producer.topic;
    drain.channel = producer.channel;
    drain.deadline = std::chrono::steady_clock::now() + settings_.dead_producer_drain;
    log_(LogLevel::kInfo, "producer ", id, " of '", producer.topic, "' died with ",
         drain.extensions.size(), " extensions (", FormatBytes(drain.bytes), "): kept for its ",
         drain.consumers.size(), " consumers",
         drain.pids.empty() ? std::string()
                            : " and " + std::to_string(drain.pids.size()) +
                                  " processes registered on its channel before this broker knew "
                                  "them",
         " to read, at most ", settings_.dead_producer_drain.count(), " ms");
    draining_.emplace(id, std::move(drain));
  }
  if (auto o = owned_.find(producer.conn); o != owned_.end()) o->second.producers.erase(id);
  if (topic_it == topics_.end()) return;
  Topic& topic = topic_it->second;
  topic.producers.erase(id);
  topic.finished_published += producer.published;
  topic.finished_published_bytes += producer.published_bytes;
  topic.finished_drops += producer.drops;
  if (producer.ready) {
    p::Event event;
    event.type = p::EventType::kProducerGone;
    event.topic = producer.topic;
    event.producer.id = id;
    event.reason = reason;
    for (uint64_t cid : topic.consumers) events->push_back({consumers_.at(cid).conn, event});
  }
  log_(LogLevel::kInfo, "producer ", id, " of '", producer.topic, "' removed: ", reason);
}

namespace {

// The entry of `by_id` (producers by id) a ProducerDrained names: by id, or,
// from a consumer that has no id for the producer with this broker (it
// subscribed again after a broker restart), by channel.
template <typename Map>
typename Map::iterator FindNamedProducer(Map& by_id, const p::Request& request) {
  if (request.producer_id != 0) return by_id.find(request.producer_id);
  if (request.channel.empty()) return by_id.end();
  return std::find_if(by_id.begin(), by_id.end(),
                      [&](const auto& e) { return e.second.channel == request.channel; });
}

}  // namespace

void Registry::ProducerDrained(const Peer& peer, const p::Request& request) {
  const uint64_t cid = request.target_id;
  auto consumer = consumers_.find(cid);
  if (consumer == consumers_.end() || consumer->second.conn != peer.conn) return;
  const Consumer& c = consumer->second;
  if (auto live = FindNamedProducer(producers_, request); live != producers_.end()) {
    // Its death has not reached us yet (the consumer saw its pid gone
    // first), or it closed: not to be waited for.
    if (live->second.topic == c.topic) live->second.drained_by.insert(cid);
    return;
  }
  auto it = FindNamedProducer(draining_, request);
  if (it == draining_.end() || it->second.topic != c.topic) return;
  it->second.consumers.erase(cid);
  it->second.pids.erase(c.pid);
  if (it->second.done()) EndDrain(it, "its consumers read it to the end");
}

void Registry::ForgetDrainingConsumer(uint64_t id) {
  for (auto it = draining_.begin(); it != draining_.end();) {
    auto next = std::next(it);
    if (it->second.consumers.erase(id) != 0 && it->second.done()) {
      EndDrain(it, "its consumers read it to the end or went");
    }
    it = next;
  }
}

void Registry::EndDrain(std::map<uint64_t, Draining>::iterator it, const char* why) {
  const Draining& drain = it->second;
  for (const auto& [ext, bytes] : drain.extensions) {
    (void)shm::Segment::Remove(shm::ChannelExtensionName(drain.channel, ext));
  }
  reserved_bytes_ -= drain.bytes;
  log_(LogLevel::kInfo, "extensions of dead producer ", it->first, " of '", drain.topic,
       "' removed: ", why);
  draining_.erase(it);
}

void Registry::ExpireDrains(std::chrono::steady_clock::time_point now) {
  for (auto it = draining_.begin(); it != draining_.end();) {
    auto next = std::next(it);
    Draining& drain = it->second;
    const bool waited_for_pids = !drain.pids.empty();
    std::erase_if(drain.pids, [](uint32_t pid) { return ::alkaid::ProcessIsGone(pid); });
    if (now >= drain.deadline) {
      EndDrain(it, now == std::chrono::steady_clock::time_point::max()
                       ? "the broker stops"
                       : "not read to the end in time by every consumer");
    } else if (waited_for_pids && drain.done()) {
      EndDrain(it, "its consumers read it to the end or exited");
    }
    it = next;
  }
}

void Registry::RemoveConsumer(uint64_t id, bool died, std::vector<Outbound>* events) {
  auto it = consumers_.find(id);
  if (it == consumers_.end()) return;
  Consumer consumer = std::move(it->second);
  consumers_.erase(it);
  if (auto o = owned_.find(consumer.conn); o != owned_.end()) o->second.consumers.erase(id);
  const char* how = died ? "gone (process exited or connection lost)" : "detached";
  if (consumer.pending) {
    auto waiting = awaited_.find(consumer.topic);
    if (waiting != awaited_.end()) {
      waiting->second.erase(id);
      if (waiting->second.empty()) awaited_.erase(waiting);
    }
    log_(LogLevel::kInfo, "consumer ", id, " waiting for '", consumer.topic, "' ", how);
    return;
  }
  auto topic_it = topics_.find(consumer.topic);
  if (topic_it == topics_.end()) return;
  topic_it->second.consumers.erase(id);
  ForgetDrainingConsumer(id);
  // Dead: the producers detach its registrations (by pid) so that it
  // holds none of them back. Dead or detached: a producer waiting for it
  // to register on its channel (ProducerReady's reply) stops waiting for it.
  p::Event event;
  event.type = p::EventType::kConsumerGone;
  event.topic = consumer.topic;
  event.consumer_id = id;
  event.pid = consumer.pid;
  for (uint64_t pid : topic_it->second.producers) {
    events->push_back({producers_.at(pid).conn, event});
  }
  log_(LogLevel::kInfo, "consumer ", id, " of '", consumer.topic, "' ", how);
}

Result<p::Reply> Registry::AddExtension(const Peer& peer, const p::Request& request) {
  ALKAID_ASSIGN_OR_RAISE(Producer * producer, OwnProducer(peer.conn, request.target_id));
  const Topic& topic = topics_.at(producer->topic);
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
  if (settings_.shm_limit.bytes != 0 &&
      reserved_bytes_ + request.bytes > settings_.shm_limit.bytes) {
    return Status::CapacityError(
        "topic '", producer->topic, "': an extension of ", FormatBytes(request.bytes),
        " of a producer's arena does not fit the broker's limit of ",
        FormatBytes(settings_.shm_limit.bytes), " (", settings_.shm_limit.origin, "), of which ",
        FormatBytes(reserved_bytes_), " are in use");
  }
  producer->extensions.emplace(request.extension_id, request.bytes);
  producer->reserved += request.bytes;
  reserved_bytes_ += request.bytes;
  log_(LogLevel::kDebug, "producer ", producer->id, " of '", producer->topic, "': extension ",
       request.extension_id, " of ", FormatBytes(request.bytes));
  p::Reply reply;
  reply.type = p::ReplyType::kExtension;
  reply.extension_name = shm::ChannelExtensionName(producer->channel, request.extension_id);
  return reply;
}

void Registry::ReleaseExtension(const Peer& peer, const p::Request& request) {
  auto producer = OwnProducer(peer.conn, request.target_id);
  if (!producer.ok()) return;
  auto it = (*producer)->extensions.find(request.extension_id);
  if (it == (*producer)->extensions.end()) return;
  // The producer removed the name; a second removal costs nothing and
  // covers one that did not.
  (void)shm::Segment::Remove(shm::ChannelExtensionName((*producer)->channel, it->first));
  (*producer)->reserved -= it->second;
  reserved_bytes_ -= it->second;
  (*producer)->extensions.erase(it);
}

Status Registry::Detach(const Peer& peer, const p::Request& request, Outcome* out) {
  if (request.role == p::Role::kProducer) {
    ALKAID_RETURN_NOT_OK(OwnProducer(peer.conn, request.target_id).status());
    RemoveProducer(request.target_id, "producer finished", false, &out->events);
    return Status::OK();
  }
  auto it = consumers_.find(request.target_id);
  if (it == consumers_.end() || it->second.conn != peer.conn) {
    return Status::KeyError("no consumer ", request.target_id, " attached through this connection");
  }
  RemoveConsumer(request.target_id, false, &out->events);
  return Status::OK();
}

Status Registry::RemoveTopic(const Peer& peer, const p::Request& request, Outcome* out) {
  ALKAID_ASSIGN_OR_RAISE(Topic * topic, FindTopic(request.topic));
  if (!topic->producers.empty()) {
    std::string pids;
    for (uint64_t id : topic->producers) {
      pids += (pids.empty() ? "" : ", ") + std::to_string(producers_.at(id).pid);
    }
    return Status::Invalid("topic '", request.topic, "' has ", topic->producers.size(),
                           topic->producers.size() == 1 ? " producer" : " producers", " (pid ",
                           pids, "); a topic is removed once its producers have closed");
  }
  const std::string reason = "removed by pid " + std::to_string(peer.pid);
  for (uint64_t id : topic->consumers) {
    auto it = consumers_.find(id);
    if (it == consumers_.end()) continue;
    p::Event event;
    event.type = p::EventType::kTopicRemoved;
    event.topic = request.topic;
    event.consumer_id = id;
    event.reason = reason;
    out->events.push_back({it->second.conn, event});
    if (auto o = owned_.find(it->second.conn); o != owned_.end()) o->second.consumers.erase(id);
    consumers_.erase(it);
    ForgetDrainingConsumer(id);
  }
  log_(LogLevel::kInfo, "topic '", request.topic, "' ", reason, " (", topic->consumers.size(),
       topic->consumers.size() == 1 ? " consumer" : " consumers", " told)");
  topics_.erase(request.topic);
  return Status::OK();
}

p::Reply Registry::ListTopics() const {
  p::Reply reply;
  reply.type = p::ReplyType::kTopicList;
  // Schemas are listed while their sum stays within kMaxSchemaBytes, so
  // that the reply fits one frame; later topics go without theirs
  // (docs/BROKER.md, "Control protocol").
  std::size_t schema_budget = p::kMaxSchemaBytes;
  for (const auto& [name, topic] : topics_) {
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
    info.published_bytes = topic.finished_published_bytes;
    info.drops = topic.finished_drops;
    for (uint64_t id : topic.producers) {
      const Producer& producer = producers_.at(id);
      info.published += producer.published;
      info.published_bytes += producer.published_bytes;
      info.drops += producer.drops;
      info.held += producer.held;
      info.shm_bytes += producer.reserved;
      info.depth = std::max(info.depth, producer.depth);
      info.producer_list.push_back(
          {producer.id, producer.pid, producer.uid, producer.published, producer.depth,
           producer.drops, producer.held, producer.reserved, producer.arena_bytes,
           producer.published_bytes, producer.fixed_block_bytes, producer.fixed_block_count});
    }
    // Each consumer with what the producers' channels last said of it: by
    // pid and token, so two consumers of one process each get their own.
    for (uint64_t id : topic.consumers) {
      const Consumer& consumer = consumers_.at(id);
      p::ConsumerStatus status;
      status.id = consumer.id;
      status.pid = consumer.pid;
      status.uid = consumer.uid;
      status.wait_mode = consumer.wait_mode;
      for (uint64_t producer_id : topic.producers) {
        for (const auto& f : producers_.at(producer_id).consumer_figures) {
          if (!consumer.Reports(f)) continue;
          status.reported = true;
          status.lag = std::max(status.lag, f.lag);
          status.drops += f.drops;
          status.held_blocks += f.held_blocks;
          status.held_bytes += f.held_bytes;
          status.read_bytes += f.read_bytes;
        }
      }
      info.consumer_list.push_back(status);
    }
    for (const auto& [id, drain] : draining_) {
      if (drain.topic == name) info.shm_bytes += drain.bytes;
    }
    reply.topics.push_back(std::move(info));
  }
  for (const auto& [name, ids] : awaited_) {
    reply.awaited.push_back({name, static_cast<uint32_t>(ids.size())});
  }
  return reply;
}

void Registry::Count(p::BrokerStats* stats) const {
  stats->topics = static_cast<uint32_t>(topics_.size());
  stats->producers = static_cast<uint32_t>(producers_.size());
  stats->consumers = static_cast<uint32_t>(consumers_.size());
  stats->segments = static_cast<uint32_t>(2 * (producers_.size() + leftovers_->size()) +
                                          leftovers_->extensions_kept());
  for (const auto& [id, producer] : producers_) {
    stats->segments += static_cast<uint32_t>(producer.extensions.size());
  }
  for (const auto& [id, drain] : draining_) {
    stats->segments += static_cast<uint32_t>(drain.extensions.size());
  }
  stats->reserved_bytes = reserved_bytes_;
}

std::vector<Outbound> Registry::Disconnected(const Peer& peer, const std::string& why) {
  std::vector<Outbound> events;
  auto it = owned_.find(peer.conn);
  if (it == owned_.end()) return events;
  const Owned owned = std::move(it->second);
  owned_.erase(it);
  for (uint64_t id : owned.producers) {
    RemoveProducer(id, "producer gone (pid " + std::to_string(peer.pid) + ": " + why + ")", true,
                   &events);
  }
  for (uint64_t id : owned.consumers) RemoveConsumer(id, true, &events);
  return events;
}

Outcome Registry::Handle(const Peer& peer, const p::Request& request) {
  Outcome out;
  Result<p::Reply> reply = p::Reply{};
  switch (request.type) {
    case p::RequestType::kCreateTopic:
      reply = CreateTopic(request, &out);
      break;
    case p::RequestType::kAttachProducer:
      reply = AttachProducer(peer, request);
      break;
    case p::RequestType::kProducerReady:
      reply = ProducerReady(peer, request, &out);
      break;
    case p::RequestType::kAttachConsumer:
      reply = AttachConsumer(peer, request);
      break;
    case p::RequestType::kDetach: {
      const Status st = Detach(peer, request, &out);
      if (!st.ok()) reply = st;
      break;
    }
    case p::RequestType::kListTopics:
      reply = ListTopics();
      break;
    case p::RequestType::kRemoveTopic: {
      const Status st = RemoveTopic(peer, request, &out);
      if (!st.ok()) reply = st;
      break;
    }
    case p::RequestType::kGetStats:
      // The server's (it adds what only it knows): here, only the counts.
      reply = Status::Invalid("GetStats is answered by the server");
      break;
    case p::RequestType::kAddExtension:
      reply = AddExtension(peer, request);
      break;
    case p::RequestType::kReleaseExtension:
      // A report, not a question: no reply.
      ReleaseExtension(peer, request);
      return out;
    case p::RequestType::kProducerDrained:
      // A report, not a question: no reply.
      ProducerDrained(peer, request);
      return out;
    case p::RequestType::kProducerStats: {
      // A report, not a question: no reply.
      auto producer = OwnProducer(peer.conn, request.target_id);
      if (producer.ok()) {
        (*producer)->published = request.published;
        (*producer)->depth = request.depth;
        (*producer)->drops = request.drops;
        (*producer)->held = request.held;
        (*producer)->arena_bytes = request.arena_bytes;
        (*producer)->published_bytes = request.published_bytes;
        (*producer)->consumer_figures = request.consumer_figures;
      }
      return out;
    }
  }
  if (reply.ok()) reply->request_id = request.id;
  out.reply = std::move(reply);
  return out;
}

}  // namespace alkaid::broker::internal
