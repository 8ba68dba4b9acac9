#include "alkaid/client/broker_client.h"

#include "connection_internal.h"

namespace alkaid::client {

namespace p = broker::protocol;

const char* TopicKindName(TopicKind kind) { return p::TopicKindName(internal::ToProtocol(kind)); }

struct BrokerClient::Impl {
  std::unique_ptr<internal::BrokerConnection> connection;
};

BrokerClient::BrokerClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BrokerClient::~BrokerClient() = default;

Result<std::unique_ptr<BrokerClient>> BrokerClient::Connect(const std::string& socket_path) {
  auto impl = std::make_unique<Impl>();
  ALKAID_ASSIGN_OR_RAISE(impl->connection, internal::BrokerConnection::Connect(socket_path));
  return std::unique_ptr<BrokerClient>(new BrokerClient(std::move(impl)));
}

Result<bool> BrokerClient::CreateTopic(const std::string& name, const format::SchemaPtr& schema,
                                       const TopicOptions& options) {
  ALKAID_RETURN_NOT_OK(p::ValidateTopicName(name));
  ALKAID_ASSIGN_OR_RAISE(auto bytes, internal::SerializeSchema(schema));
  p::Request request;
  request.type = p::RequestType::kCreateTopic;
  request.config = internal::MakeTopicConfig(name, std::move(bytes), options);
  ALKAID_ASSIGN_OR_RAISE(auto reply, impl_->connection->Call(std::move(request)));
  return reply.created;
}

Status BrokerClient::RemoveTopic(const std::string& name) {
  ALKAID_RETURN_NOT_OK(p::ValidateTopicName(name));
  p::Request request;
  request.type = p::RequestType::kRemoveTopic;
  request.topic = name;
  return impl_->connection->Call(std::move(request)).status();
}

Result<std::vector<TopicStatus>> BrokerClient::ListTopics() {
  p::Request request;
  request.type = p::RequestType::kListTopics;
  ALKAID_ASSIGN_OR_RAISE(auto reply, impl_->connection->Call(std::move(request)));
  std::vector<TopicStatus> out;
  for (const auto& t : reply.topics) {
    TopicStatus status;
    status.name = t.config.name;
    auto schema = internal::DeserializeSchema(t.config.schema);
    if (schema.ok()) status.schema = *schema;
    status.slot_count = t.config.slot_count;
    status.arena_bytes = t.config.arena_bytes;
    status.max_arena_bytes = t.config.max_arena_bytes;
    status.policy = t.config.policy == p::Policy::kDropOldest
                        ? shm::SlowConsumerPolicy::kDropOldest
                        : shm::SlowConsumerPolicy::kBlockProducer;
    status.kind =
        t.config.kind == p::TopicKind::kUnsafeRow ? TopicKind::kUnsafeRow : TopicKind::kRecordBatch;
    status.producers = t.producers;
    status.consumers = t.consumers;
    status.published = t.published;
    status.depth = t.depth;
    status.drops = t.drops;
    status.held = t.held;
    status.shm_bytes = t.shm_bytes;
    status.publish_timestamps = t.config.publish_timestamps;
    status.published_bytes = t.published_bytes;
    for (const auto& pr : t.producer_list) {
      status.producer_list.push_back({pr.id, pr.pid, pr.uid, pr.published, pr.depth, pr.drops,
                                      pr.held, pr.shm_bytes, pr.arena_bytes, pr.published_bytes,
                                      pr.fixed_block_bytes, pr.fixed_block_count});
    }
    for (const auto& c : t.consumer_list) {
      TopicConsumerStatus consumer;
      consumer.id = c.id;
      consumer.pid = c.pid;
      consumer.uid = c.uid;
      if (c.wait_mode >= 1 && c.wait_mode <= 3) {
        consumer.wait_mode = static_cast<shm::WaitMode>(c.wait_mode - 1);
      }
      consumer.reported = c.reported;
      consumer.lag = c.lag;
      consumer.drops = c.drops;
      consumer.held_blocks = c.held_blocks;
      consumer.held_bytes = c.held_bytes;
      consumer.read_bytes = c.read_bytes;
      status.consumer_list.push_back(consumer);
    }
    // The previous release's names (deprecated, broker_client.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    status.ring_slots = status.slot_count;
    status.segment_bytes = status.arena_bytes;
    status.max_segment_bytes = status.max_arena_bytes;
#pragma GCC diagnostic pop
    out.push_back(std::move(status));
  }
  return out;
}

Result<std::vector<AwaitedTopic>> BrokerClient::ListAwaitedTopics() {
  p::Request request;
  request.type = p::RequestType::kListTopics;
  ALKAID_ASSIGN_OR_RAISE(auto reply, impl_->connection->Call(std::move(request)));
  std::vector<AwaitedTopic> out;
  for (const auto& a : reply.awaited) out.push_back({a.name, a.consumers});
  return out;
}

Result<BrokerStatus> BrokerClient::Stats() {
  p::Request request;
  request.type = p::RequestType::kGetStats;
  ALKAID_ASSIGN_OR_RAISE(auto reply, impl_->connection->Call(std::move(request)));
  const p::BrokerStats& s = reply.stats;
  BrokerStatus out;
  out.name = s.name;
  out.pid = s.pid;
  out.uptime_ms = s.uptime_ms;
  out.connections = s.connections;
  out.topics = s.topics;
  out.producers = s.producers;
  out.consumers = s.consumers;
  out.segments = s.segments;
  out.reserved_bytes = s.reserved_bytes;
  out.shm_limit = s.shm_limit;
  out.rejected_frames = s.rejected_frames;
  out.shm_limit_origin = s.shm_limit_origin;
  out.shm_total = s.shm_total;
  out.shm_free = s.shm_free;
  return out;
}

}  // namespace alkaid::client
