#include "protocol/control.h"

#include <flatbuffers/flatbuffers.h>

#include <string_view>

#include "protocol/control_fbs_internal.h"

namespace alkaid::broker::protocol {

namespace fb = ::alkaid::broker::fbs;

namespace {

// Bounds applied to every decoded field.
constexpr std::size_t kMaxSegmentNameLength = 200;
constexpr std::size_t kMaxMessageLength = std::size_t{64} * 1024;
constexpr std::size_t kMaxListEntries = 100000;
constexpr uint32_t kMaxSlots = uint32_t{1} << 24;
constexpr uint64_t kMinArenaBytes = 4096;
constexpr uint64_t kMaxArenaBytes = uint64_t{1} << 40;

flatbuffers::Verifier::Options VerifierOptions() {
  flatbuffers::Verifier::Options options;
  options.max_depth = 16;
  options.max_tables = 200000;
  return options;
}

// ---- encoding -------------------------------------------------------------

flatbuffers::Offset<fb::TopicConfig> EncodeConfig(flatbuffers::FlatBufferBuilder& fbb,
                                                  const TopicConfig& c) {
  auto name = fbb.CreateString(c.name);
  auto schema = fbb.CreateVector(c.schema);
  return fb::CreateTopicConfig(
      fbb, name, schema, static_cast<fb::PayloadKind>(c.kind), c.slot_count, c.arena_bytes,
      static_cast<fb::SlowConsumerPolicy>(c.policy), c.max_arena_bytes, c.publish_timestamps);
}

flatbuffers::Offset<fb::ProducerInfo> EncodeProducer(flatbuffers::FlatBufferBuilder& fbb,
                                                     const ProducerInfo& p) {
  auto channel = fbb.CreateString(p.channel);
  return fb::CreateProducerInfo(fbb, p.id, p.pid, channel);
}

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::ConsumerFigures>>>
EncodeConsumerFigures(flatbuffers::FlatBufferBuilder& fbb,
                      const std::vector<ConsumerFigures>& figures) {
  std::vector<flatbuffers::Offset<fb::ConsumerFigures>> out;
  out.reserve(figures.size());
  for (const auto& c : figures) {
    out.push_back(fb::CreateConsumerFigures(fbb, c.pid, c.lag, c.drops, c.held_blocks, c.held_bytes,
                                            c.read_bytes, c.token));
  }
  return fbb.CreateVector(out);
}

std::vector<uint8_t> Finish(flatbuffers::FlatBufferBuilder& fbb) {
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

// ---- decoding -------------------------------------------------------------

Result<std::string> GetString(const flatbuffers::String* s, std::string_view what,
                              std::size_t max_length, bool required) {
  if (s == nullptr) {
    if (required) return Status::Invalid("control message: ", what, " is missing");
    return std::string();
  }
  if (s->size() > max_length) {
    return Status::Invalid("control message: ", what, " is ", s->size(),
                           " bytes long, more than the maximum of ", max_length);
  }
  return s->str();
}

Status CheckSegmentName(const std::string& name, std::string_view what) {
  if (name.empty()) return Status::Invalid("control message: ", what, " is empty");
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
    if (!ok) return Status::Invalid("control message: ", what, " '", name, "' has a bad character");
  }
  if (name[0] == '.') return Status::Invalid("control message: ", what, " starts with '.'");
  return Status::OK();
}

Result<TopicKind> DecodeTopicKind(fb::PayloadKind kind, const std::string& where) {
  switch (kind) {
    case fb::PayloadKind::RecordBatch:
      return TopicKind::kRecordBatch;
    case fb::PayloadKind::UnsafeRow:
      return TopicKind::kUnsafeRow;
  }
  return Status::Invalid("control message: ", where, ": unknown payload kind ",
                         static_cast<int>(kind));
}

Result<TopicConfig> DecodeConfig(const fb::TopicConfig* c, std::string_view where) {
  if (c == nullptr) return Status::Invalid("control message: ", where, ".config is missing");
  TopicConfig out;
  ALKAID_ASSIGN_OR_RAISE(out.name, GetString(c->name(), "topic name", kMaxTopicNameLength, true));
  ALKAID_RETURN_NOT_OK(ValidateTopicName(out.name));
  if (c->schema() != nullptr) {
    if (c->schema()->size() > kMaxSchemaBytes) {
      return Status::Invalid("control message: schema of topic '", out.name, "' is ",
                             c->schema()->size(), " bytes, more than the maximum of ",
                             kMaxSchemaBytes);
    }
    out.schema.assign(c->schema()->begin(), c->schema()->end());
  }
  ALKAID_ASSIGN_OR_RAISE(out.kind, DecodeTopicKind(c->payload_kind(), "topic '" + out.name + "'"));
  const uint32_t slots = c->slot_count();
  if (slots != 0 && (slots < 2 || slots > kMaxSlots || (slots & (slots - 1)) != 0)) {
    return Status::Invalid("control message: topic '", out.name, "': slot_count ", slots,
                           " is not a power of two in [2, ", kMaxSlots, "]");
  }
  out.slot_count = slots;
  const uint64_t bytes = c->arena_bytes();
  if (bytes != 0 && (bytes < kMinArenaBytes || bytes > kMaxArenaBytes)) {
    return Status::Invalid("control message: topic '", out.name, "': arena_bytes ", bytes,
                           " is outside [", kMinArenaBytes, ", ", kMaxArenaBytes, "]");
  }
  out.arena_bytes = bytes;
  const uint64_t max_bytes = c->max_arena_bytes();
  if (max_bytes != 0 && (max_bytes < kMinArenaBytes || max_bytes > kMaxArenaBytes)) {
    return Status::Invalid("control message: topic '", out.name, "': max_arena_bytes ", max_bytes,
                           " is outside [", kMinArenaBytes, ", ", kMaxArenaBytes, "]");
  }
  out.max_arena_bytes = max_bytes;
  out.publish_timestamps = c->publish_timestamps();
  switch (c->policy()) {
    case fb::SlowConsumerPolicy::BlockProducer:
      out.policy = Policy::kBlockProducer;
      break;
    case fb::SlowConsumerPolicy::DropOldest:
      out.policy = Policy::kDropOldest;
      break;
    default:
      return Status::Invalid("control message: topic '", out.name,
                             "': unknown slow-consumer policy ", static_cast<int>(c->policy()));
  }
  return out;
}

Result<ProducerInfo> DecodeProducer(const fb::ProducerInfo* p) {
  if (p == nullptr) return Status::Invalid("control message: producer entry is missing");
  ProducerInfo out;
  out.id = p->id();
  out.pid = p->pid();
  ALKAID_ASSIGN_OR_RAISE(out.channel,
                         GetString(p->channel(), "channel name", kMaxSegmentNameLength, true));
  ALKAID_RETURN_NOT_OK(CheckSegmentName(out.channel, "channel name"));
  return out;
}

Result<std::string> DecodeTopic(const flatbuffers::String* s) {
  ALKAID_ASSIGN_OR_RAISE(std::string topic, GetString(s, "topic", kMaxTopicNameLength, true));
  ALKAID_RETURN_NOT_OK(ValidateTopicName(topic));
  return topic;
}

Result<Reply> DecodeReply(const fb::Reply* r) {
  Reply out;
  out.request_id = r->request_id();
  out.version = r->version();
  if (r->code() > static_cast<uint8_t>(StatusCode::kUnknown)) {
    return Status::Invalid("control reply: unknown status code ", static_cast<int>(r->code()));
  }
  ALKAID_ASSIGN_OR_RAISE(std::string message,
                         GetString(r->message(), "reply message", kMaxMessageLength, false));
  const auto code = static_cast<StatusCode>(r->code());
  if (code != StatusCode::kOk) {
    out.status = Status(code, message.empty() ? std::string("(no message)") : message);
    return out;
  }
  if (r->body_type() != fb::ReplyBody::NONE && r->body() == nullptr) {
    return Status::Invalid("control reply: the body is missing");
  }
  switch (r->body_type()) {
    case fb::ReplyBody::NONE:
      out.type = ReplyType::kNone;
      break;
    case fb::ReplyBody::TopicReply: {
      const auto* b = r->body_as_TopicReply();
      out.type = ReplyType::kTopic;
      ALKAID_ASSIGN_OR_RAISE(out.config, DecodeConfig(b->config(), "TopicReply"));
      out.created = b->created();
      break;
    }
    case fb::ReplyBody::AttachProducerReply: {
      const auto* b = r->body_as_AttachProducerReply();
      out.type = ReplyType::kAttachProducer;
      out.attached_id = b->producer_id();
      ALKAID_ASSIGN_OR_RAISE(out.channel,
                             GetString(b->channel(), "channel name", kMaxSegmentNameLength, true));
      ALKAID_RETURN_NOT_OK(CheckSegmentName(out.channel, "channel name"));
      ALKAID_ASSIGN_OR_RAISE(out.config, DecodeConfig(b->config(), "AttachProducerReply"));
      if (b->segment_mode() != 0600 && b->segment_mode() != 0660) {
        return Status::Invalid("control reply: segment mode ", b->segment_mode(),
                               " is neither 0600 nor 0660");
      }
      out.segment_mode = b->segment_mode();
      out.fixed_block_bytes = b->fixed_block_bytes();
      out.fixed_block_count = b->fixed_block_count();
      ALKAID_RETURN_NOT_OK(CheckFixedBlocks(out.fixed_block_bytes, out.fixed_block_count,
                                            "control reply: AttachProducerReply"));
      // The broker resolves the count (twice the slots when none was asked).
      if ((out.fixed_block_bytes == 0) != (out.fixed_block_count == 0)) {
        return Status::Invalid("control reply: AttachProducerReply grants ", out.fixed_block_count,
                               " fixed blocks of ", out.fixed_block_bytes, " bytes");
      }
      break;
    }
    case fb::ReplyBody::AttachConsumerReply: {
      const auto* b = r->body_as_AttachConsumerReply();
      out.type = ReplyType::kAttachConsumer;
      out.attached_id = b->consumer_id();
      out.pending = b->pending();
      // A pending consumer's topic does not exist yet: no config, no
      // producers (whatever the message says there is ignored).
      if (out.pending) break;
      ALKAID_ASSIGN_OR_RAISE(out.config, DecodeConfig(b->config(), "AttachConsumerReply"));
      if (b->producers() != nullptr) {
        if (b->producers()->size() > kMaxListEntries) {
          return Status::Invalid("control reply: too many producers");
        }
        for (const auto* p : *b->producers()) {
          ALKAID_ASSIGN_OR_RAISE(auto info, DecodeProducer(p));
          out.producers.push_back(std::move(info));
        }
      }
      break;
    }
    case fb::ReplyBody::TopicList: {
      const auto* b = r->body_as_TopicList();
      out.type = ReplyType::kTopicList;
      if (b->topics() != nullptr) {
        if (b->topics()->size() > kMaxListEntries) {
          return Status::Invalid("control reply: too many topics");
        }
        for (const auto* t : *b->topics()) {
          if (t == nullptr) return Status::Invalid("control reply: null topic entry");
          TopicInfo info;
          ALKAID_ASSIGN_OR_RAISE(info.config, DecodeConfig(t->config(), "TopicInfo"));
          info.producers = t->producers();
          info.consumers = t->consumers();
          info.published = t->published();
          info.depth = t->depth();
          info.drops = t->drops();
          info.held = t->held();
          info.shm_bytes = t->shm_bytes();
          info.published_bytes = t->published_bytes();
          if (t->producer_list() != nullptr) {
            if (t->producer_list()->size() > kMaxListEntries) {
              return Status::Invalid("control reply: too many producers in a topic");
            }
            for (const auto* p : *t->producer_list()) {
              if (p == nullptr) return Status::Invalid("control reply: null producer status");
              info.producer_list.push_back(ProducerStatus{
                  p->id(), p->pid(), p->uid(), p->published(), p->depth(), p->drops(), p->held(),
                  p->shm_bytes(), p->arena_bytes(), p->published_bytes(), p->fixed_block_bytes(),
                  p->fixed_block_count()});
            }
          }
          if (t->consumer_list() != nullptr) {
            if (t->consumer_list()->size() > kMaxListEntries) {
              return Status::Invalid("control reply: too many consumers in a topic");
            }
            for (const auto* c : *t->consumer_list()) {
              if (c == nullptr) return Status::Invalid("control reply: null consumer status");
              info.consumer_list.push_back(ConsumerStatus{
                  c->id(), c->pid(), c->uid(), c->wait_mode(), c->reported(), c->lag(), c->drops(),
                  c->held_blocks(), c->held_bytes(), c->read_bytes()});
            }
          }
          out.topics.push_back(std::move(info));
        }
      }
      if (b->awaited() != nullptr) {
        if (b->awaited()->size() > kMaxListEntries) {
          return Status::Invalid("control reply: too many awaited topics");
        }
        for (const auto* a : *b->awaited()) {
          if (a == nullptr) return Status::Invalid("control reply: null awaited topic entry");
          AwaitedTopic awaited;
          ALKAID_ASSIGN_OR_RAISE(awaited.name, DecodeTopic(a->name()));
          awaited.consumers = a->consumers();
          out.awaited.push_back(std::move(awaited));
        }
      }
      break;
    }
    case fb::ReplyBody::ProducerReadyReply: {
      const auto* b = r->body_as_ProducerReadyReply();
      out.type = ReplyType::kProducerReady;
      if (b->consumers() != nullptr) {
        if (b->consumers()->size() > kMaxListEntries) {
          return Status::Invalid("control reply: too many consumers");
        }
        for (const auto* c : *b->consumers()) {
          if (c == nullptr) return Status::Invalid("control reply: null consumer entry");
          out.consumer_list.push_back({c->id(), c->pid()});
        }
      }
      break;
    }
    case fb::ReplyBody::ExtensionGranted: {
      out.type = ReplyType::kExtension;
      ALKAID_ASSIGN_OR_RAISE(out.extension_name,
                             GetString(r->body_as_ExtensionGranted()->name(), "extension name",
                                       kMaxSegmentNameLength, true));
      ALKAID_RETURN_NOT_OK(CheckSegmentName(out.extension_name, "extension name"));
      break;
    }
    case fb::ReplyBody::BrokerStats: {
      const auto* b = r->body_as_BrokerStats();
      out.type = ReplyType::kStats;
      ALKAID_ASSIGN_OR_RAISE(out.stats.name,
                             GetString(b->name(), "broker name", kMaxSegmentNameLength, false));
      out.stats.pid = b->pid();
      out.stats.uptime_ms = b->uptime_ms();
      out.stats.connections = b->connections();
      out.stats.topics = b->topics();
      out.stats.producers = b->producers();
      out.stats.consumers = b->consumers();
      out.stats.segments = b->segments();
      out.stats.reserved_bytes = b->reserved_bytes();
      out.stats.shm_limit = b->shm_limit();
      out.stats.rejected_frames = b->rejected_frames();
      ALKAID_ASSIGN_OR_RAISE(
          out.stats.shm_limit_origin,
          GetString(b->shm_limit_origin(), "shm limit origin", kMaxMessageLength, false));
      out.stats.shm_total = b->shm_total();
      out.stats.shm_free = b->shm_free();
      break;
    }
    default:
      return Status::Invalid("control reply: unknown body type ", static_cast<int>(r->body_type()));
  }
  return out;
}

Result<Event> DecodeEvent(const fb::Event* e) {
  Event out;
  if (e->body() == nullptr) return Status::Invalid("control event: the body is missing");
  switch (e->body_type()) {
    case fb::EventBody::ProducerJoined: {
      const auto* b = e->body_as_ProducerJoined();
      out.type = EventType::kProducerJoined;
      ALKAID_ASSIGN_OR_RAISE(out.topic, DecodeTopic(b->topic()));
      ALKAID_ASSIGN_OR_RAISE(out.producer, DecodeProducer(b->producer()));
      break;
    }
    case fb::EventBody::ProducerGone: {
      const auto* b = e->body_as_ProducerGone();
      out.type = EventType::kProducerGone;
      ALKAID_ASSIGN_OR_RAISE(out.topic, DecodeTopic(b->topic()));
      out.producer.id = b->producer_id();
      ALKAID_ASSIGN_OR_RAISE(out.reason,
                             GetString(b->reason(), "reason", kMaxMessageLength, false));
      break;
    }
    case fb::EventBody::ConsumerGone: {
      const auto* b = e->body_as_ConsumerGone();
      out.type = EventType::kConsumerGone;
      ALKAID_ASSIGN_OR_RAISE(out.topic, DecodeTopic(b->topic()));
      out.consumer_id = b->consumer_id();
      out.pid = b->pid();
      break;
    }
    case fb::EventBody::TopicCreated: {
      const auto* b = e->body_as_TopicCreated();
      out.type = EventType::kTopicCreated;
      ALKAID_ASSIGN_OR_RAISE(out.topic, DecodeTopic(b->topic()));
      out.consumer_id = b->consumer_id();
      ALKAID_ASSIGN_OR_RAISE(out.config, DecodeConfig(b->config(), "TopicCreated"));
      if (out.config.name != out.topic) {
        return Status::Invalid("control event: TopicCreated for '", out.topic,
                               "' carries the config of '", out.config.name, "'");
      }
      break;
    }
    case fb::EventBody::TopicRemoved: {
      const auto* b = e->body_as_TopicRemoved();
      out.type = EventType::kTopicRemoved;
      ALKAID_ASSIGN_OR_RAISE(out.topic, DecodeTopic(b->topic()));
      ALKAID_ASSIGN_OR_RAISE(out.reason,
                             GetString(b->reason(), "reason", kMaxMessageLength, false));
      break;
    }
    default:
      return Status::Invalid("control event: unknown body type ", static_cast<int>(e->body_type()));
  }
  return out;
}

}  // namespace

const char* TopicKindName(TopicKind kind) {
  switch (kind) {
    case TopicKind::kRecordBatch:
      return "record-batch";
    case TopicKind::kUnsafeRow:
      return "unsafe-row";
  }
  return "?";
}

const char* RequestTypeName(RequestType type) {
  switch (type) {
    case RequestType::kCreateTopic:
      return "CreateTopic";
    case RequestType::kAttachProducer:
      return "AttachProducer";
    case RequestType::kProducerReady:
      return "ProducerReady";
    case RequestType::kAttachConsumer:
      return "AttachConsumer";
    case RequestType::kDetach:
      return "Detach";
    case RequestType::kListTopics:
      return "ListTopics";
    case RequestType::kGetStats:
      return "GetStats";
    case RequestType::kProducerStats:
      return "ProducerStats";
    case RequestType::kAddExtension:
      return "AddExtension";
    case RequestType::kReleaseExtension:
      return "ReleaseExtension";
    case RequestType::kRemoveTopic:
      return "RemoveTopic";
    case RequestType::kProducerDrained:
      return "ProducerDrained";
  }
  return "?";
}

Status CheckFixedBlocks(uint64_t bytes, uint32_t count, std::string_view where) {
  if (bytes == 0) {
    if (count == 0) return Status::OK();
    return Status::Invalid(where, ": fixed_block_count ", count,
                           " without fixed_block_bytes (0: no fixed blocks)");
  }
  if (bytes > kMaxFixedBlockBytes || count > kMaxFixedBlockCount) {
    return Status::Invalid(where, ": ", count, " fixed blocks of ", bytes, " bytes; at most ",
                           kMaxFixedBlockCount, " blocks of at most ", kMaxFixedBlockBytes,
                           " bytes");
  }
  // Both bounded above: the product is below 2^51.
  if (FixedAreaBytes(bytes, count) > kMaxFixedAreaBytes) {
    return Status::Invalid(where, ": ", count, " fixed blocks of ", bytes, " bytes make ",
                           FixedAreaBytes(bytes, count), " bytes, more than a channel's ",
                           kMaxFixedAreaBytes);
  }
  return Status::OK();
}

Status ValidateTopicName(const std::string& name) {
  if (name.empty()) return Status::Invalid("topic name is empty");
  if (name.size() > kMaxTopicNameLength) {
    return Status::Invalid("topic name is ", name.size(), " characters long, more than ",
                           kMaxTopicNameLength);
  }
  if (name[0] == '.') return Status::Invalid("topic name '", name, "' starts with '.'");
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
    if (!ok) {
      return Status::Invalid("topic name '", name, "' has a character outside [A-Za-z0-9._-]");
    }
  }
  return Status::OK();
}

std::vector<uint8_t> EncodeRequest(const Request& r) {
  flatbuffers::FlatBufferBuilder fbb(256);
  fb::RequestBody type = fb::RequestBody::NONE;
  flatbuffers::Offset<void> body;
  switch (r.type) {
    case RequestType::kCreateTopic:
      type = fb::RequestBody::CreateTopic;
      body = fb::CreateCreateTopic(fbb, EncodeConfig(fbb, r.config)).Union();
      break;
    case RequestType::kAttachProducer:
      type = fb::RequestBody::AttachProducer;
      body = fb::CreateAttachProducer(fbb, fbb.CreateString(r.topic),
                                      static_cast<fb::PayloadKind>(r.kind),
                                      r.channel.empty() ? flatbuffers::Offset<flatbuffers::String>()
                                                        : fbb.CreateString(r.channel),
                                      r.fixed_block_bytes, r.fixed_block_count)
                 .Union();
      break;
    case RequestType::kProducerReady:
      type = fb::RequestBody::ProducerReady;
      body = fb::CreateProducerReady(fbb, r.target_id).Union();
      break;
    case RequestType::kAttachConsumer:
      type = fb::RequestBody::AttachConsumer;
      body = fb::CreateAttachConsumer(fbb, fbb.CreateString(r.topic), r.from_oldest,
                                      static_cast<fb::PayloadKind>(r.kind), r.wait_for_topic,
                                      r.any_kind, r.wait_mode, r.token)
                 .Union();
      break;
    case RequestType::kDetach:
      type = fb::RequestBody::Detach;
      body = fb::CreateDetach(fbb, static_cast<fb::DetachRole>(r.role), r.target_id).Union();
      break;
    case RequestType::kListTopics:
      type = fb::RequestBody::ListTopics;
      body = fb::CreateListTopics(fbb).Union();
      break;
    case RequestType::kGetStats:
      type = fb::RequestBody::GetStats;
      body = fb::CreateGetStats(fbb).Union();
      break;
    case RequestType::kProducerStats:
      type = fb::RequestBody::ProducerStats;
      body = fb::CreateProducerStats(fbb, r.target_id, r.published, r.depth, r.drops, r.held,
                                     EncodeConsumerFigures(fbb, r.consumer_figures), r.arena_bytes,
                                     r.published_bytes)
                 .Union();
      break;
    case RequestType::kAddExtension:
      type = fb::RequestBody::AddExtension;
      body = fb::CreateAddExtension(fbb, r.target_id, r.extension_id, r.bytes).Union();
      break;
    case RequestType::kReleaseExtension:
      type = fb::RequestBody::ReleaseExtension;
      body = fb::CreateReleaseExtension(fbb, r.target_id, r.extension_id).Union();
      break;
    case RequestType::kRemoveTopic:
      type = fb::RequestBody::RemoveTopic;
      body = fb::CreateRemoveTopic(fbb, fbb.CreateString(r.topic)).Union();
      break;
    case RequestType::kProducerDrained:
      type = fb::RequestBody::ProducerDrained;
      body =
          fb::CreateProducerDrained(fbb, r.target_id, r.producer_id,
                                    r.channel.empty() ? flatbuffers::Offset<flatbuffers::String>()
                                                      : fbb.CreateString(r.channel))
              .Union();
      break;
  }
  fbb.Finish(fb::CreateRequest(fbb, r.id, type, body, r.version));
  return Finish(fbb);
}

Result<Request> DecodeRequest(std::span<const uint8_t> bytes) {
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), VerifierOptions());
  if (!fb::VerifyRequestBuffer(verifier)) {
    return Status::Invalid("control request: ", bytes.size(),
                           " bytes that are not a valid Request flatbuffer");
  }
  const fb::Request* r = fb::GetRequest(bytes.data());
  Request out;
  out.id = r->id();
  out.version = r->version();
  // A union whose type is set but whose table is absent verifies; refuse it.
  if (r->body() == nullptr) return Status::Invalid("control request: the body is missing");
  switch (r->body_type()) {
    case fb::RequestBody::CreateTopic: {
      out.type = RequestType::kCreateTopic;
      ALKAID_ASSIGN_OR_RAISE(out.config,
                             DecodeConfig(r->body_as_CreateTopic()->config(), "CreateTopic"));
      if (out.config.schema.empty()) {
        return Status::Invalid("control request: CreateTopic '", out.config.name,
                               "' has no schema");
      }
      break;
    }
    case fb::RequestBody::AttachProducer: {
      out.type = RequestType::kAttachProducer;
      const auto* b = r->body_as_AttachProducer();
      ALKAID_ASSIGN_OR_RAISE(out.topic, DecodeTopic(b->topic()));
      ALKAID_ASSIGN_OR_RAISE(out.kind, DecodeTopicKind(b->payload_kind(), "AttachProducer"));
      ALKAID_ASSIGN_OR_RAISE(out.channel,
                             GetString(b->channel(), "channel name", kMaxSegmentNameLength, false));
      if (!out.channel.empty()) {
        ALKAID_RETURN_NOT_OK(CheckSegmentName(out.channel, "channel name"));
      }
      out.fixed_block_bytes = b->fixed_block_bytes();
      out.fixed_block_count = b->fixed_block_count();
      ALKAID_RETURN_NOT_OK(CheckFixedBlocks(out.fixed_block_bytes, out.fixed_block_count,
                                            "control request: AttachProducer"));
      break;
    }
    case fb::RequestBody::ProducerReady:
      out.type = RequestType::kProducerReady;
      out.target_id = r->body_as_ProducerReady()->producer_id();
      break;
    case fb::RequestBody::AttachConsumer: {
      out.type = RequestType::kAttachConsumer;
      const auto* b = r->body_as_AttachConsumer();
      ALKAID_ASSIGN_OR_RAISE(out.topic, DecodeTopic(b->topic()));
      out.from_oldest = b->from_oldest();
      ALKAID_ASSIGN_OR_RAISE(out.kind, DecodeTopicKind(b->payload_kind(), "AttachConsumer"));
      out.wait_for_topic = b->wait_for_topic();
      out.any_kind = b->any_payload_kind();
      out.wait_mode = b->wait_mode();
      out.token = b->token();
      break;
    }
    case fb::RequestBody::Detach: {
      out.type = RequestType::kDetach;
      const auto* b = r->body_as_Detach();
      if (b->role() != fb::DetachRole::Producer && b->role() != fb::DetachRole::Consumer) {
        return Status::Invalid("control request: Detach with unknown role ",
                               static_cast<int>(b->role()));
      }
      out.role = static_cast<Role>(b->role());
      out.target_id = b->id();
      break;
    }
    case fb::RequestBody::ListTopics:
      out.type = RequestType::kListTopics;
      break;
    case fb::RequestBody::GetStats:
      out.type = RequestType::kGetStats;
      break;
    case fb::RequestBody::ProducerStats: {
      out.type = RequestType::kProducerStats;
      const auto* b = r->body_as_ProducerStats();
      out.target_id = b->producer_id();
      out.published = b->published();
      out.depth = b->depth();
      out.drops = b->drops();
      out.held = b->held();
      out.arena_bytes = b->arena_bytes();
      out.published_bytes = b->published_bytes();
      if (b->consumers() != nullptr) {
        if (b->consumers()->size() > kMaxListEntries) {
          return Status::Invalid("control request: ProducerStats with too many consumers");
        }
        for (const auto* c : *b->consumers()) {
          if (c == nullptr) return Status::Invalid("control request: null consumer figures");
          out.consumer_figures.push_back(ConsumerFigures{c->pid(), c->lag(), c->drops(),
                                                         c->held_blocks(), c->held_bytes(),
                                                         c->read_bytes(), c->token()});
        }
      }
      break;
    }
    case fb::RequestBody::AddExtension: {
      out.type = RequestType::kAddExtension;
      const auto* b = r->body_as_AddExtension();
      out.target_id = b->producer_id();
      out.extension_id = b->id();
      out.bytes = b->bytes();
      if (out.extension_id == 0 || out.bytes == 0 || out.bytes > kMaxArenaBytes) {
        return Status::Invalid("control request: AddExtension ", out.extension_id, " of ",
                               out.bytes, " bytes (an id from 1, 1 to ", kMaxArenaBytes, " bytes)");
      }
      break;
    }
    case fb::RequestBody::ReleaseExtension: {
      out.type = RequestType::kReleaseExtension;
      const auto* b = r->body_as_ReleaseExtension();
      out.target_id = b->producer_id();
      out.extension_id = b->id();
      break;
    }
    case fb::RequestBody::RemoveTopic: {
      out.type = RequestType::kRemoveTopic;
      ALKAID_ASSIGN_OR_RAISE(out.topic, DecodeTopic(r->body_as_RemoveTopic()->topic()));
      break;
    }
    case fb::RequestBody::ProducerDrained: {
      out.type = RequestType::kProducerDrained;
      const auto* b = r->body_as_ProducerDrained();
      out.target_id = b->consumer_id();
      out.producer_id = b->producer_id();
      ALKAID_ASSIGN_OR_RAISE(out.channel,
                             GetString(b->channel(), "channel name", kMaxSegmentNameLength, false));
      if (!out.channel.empty()) ALKAID_RETURN_NOT_OK(CheckSegmentName(out.channel, "channel name"));
      break;
    }
    default:
      return Status::Invalid("control request: unknown or missing request body (type ",
                             static_cast<int>(r->body_type()), ")");
  }
  return out;
}

std::vector<uint8_t> EncodeServerMessage(const ServerMessage& m) {
  flatbuffers::FlatBufferBuilder fbb(256);
  if (m.is_event) {
    const Event& e = m.event;
    fb::EventBody type = fb::EventBody::NONE;
    flatbuffers::Offset<void> body;
    auto topic = fbb.CreateString(e.topic);
    switch (e.type) {
      case EventType::kProducerJoined:
        type = fb::EventBody::ProducerJoined;
        body = fb::CreateProducerJoined(fbb, topic, EncodeProducer(fbb, e.producer)).Union();
        break;
      case EventType::kProducerGone:
        type = fb::EventBody::ProducerGone;
        body =
            fb::CreateProducerGone(fbb, topic, e.producer.id, fbb.CreateString(e.reason)).Union();
        break;
      case EventType::kConsumerGone:
        type = fb::EventBody::ConsumerGone;
        body = fb::CreateConsumerGone(fbb, topic, e.consumer_id, e.pid).Union();
        break;
      case EventType::kTopicCreated:
        type = fb::EventBody::TopicCreated;
        body =
            fb::CreateTopicCreated(fbb, topic, e.consumer_id, EncodeConfig(fbb, e.config)).Union();
        break;
      case EventType::kTopicRemoved:
        type = fb::EventBody::TopicRemoved;
        body = fb::CreateTopicRemoved(fbb, topic, fbb.CreateString(e.reason)).Union();
        break;
    }
    auto event = fb::CreateEvent(fbb, type, body);
    fbb.Finish(fb::CreateServerMessage(fbb, fb::ServerBody::Event, event.Union()));
    return Finish(fbb);
  }
  const Reply& r = m.reply;
  fb::ReplyBody type = fb::ReplyBody::NONE;
  flatbuffers::Offset<void> body;
  if (r.status.ok()) {
    switch (r.type) {
      case ReplyType::kNone:
        break;
      case ReplyType::kTopic:
        type = fb::ReplyBody::TopicReply;
        body = fb::CreateTopicReply(fbb, EncodeConfig(fbb, r.config), r.created).Union();
        break;
      case ReplyType::kAttachProducer: {
        type = fb::ReplyBody::AttachProducerReply;
        auto channel = fbb.CreateString(r.channel);
        auto config = EncodeConfig(fbb, r.config);
        body = fb::CreateAttachProducerReply(fbb, r.attached_id, channel, config, r.segment_mode,
                                             r.fixed_block_bytes, r.fixed_block_count)
                   .Union();
        break;
      }
      case ReplyType::kAttachConsumer: {
        type = fb::ReplyBody::AttachConsumerReply;
        if (r.pending) {
          body = fb::CreateAttachConsumerReply(fbb, r.attached_id, 0, 0, true).Union();
          break;
        }
        auto config = EncodeConfig(fbb, r.config);
        std::vector<flatbuffers::Offset<fb::ProducerInfo>> producers;
        for (const auto& p : r.producers) producers.push_back(EncodeProducer(fbb, p));
        auto vec = fbb.CreateVector(producers);
        body = fb::CreateAttachConsumerReply(fbb, r.attached_id, config, vec).Union();
        break;
      }
      case ReplyType::kTopicList: {
        type = fb::ReplyBody::TopicList;
        std::vector<flatbuffers::Offset<fb::TopicInfo>> topics;
        for (const auto& t : r.topics) {
          auto config = EncodeConfig(fbb, t.config);
          std::vector<flatbuffers::Offset<fb::ProducerStatus>> producer_list;
          for (const auto& p : t.producer_list) {
            producer_list.push_back(fb::CreateProducerStatus(
                fbb, p.id, p.pid, p.uid, p.published, p.depth, p.drops, p.held, p.shm_bytes,
                p.arena_bytes, p.published_bytes, p.fixed_block_bytes, p.fixed_block_count));
          }
          std::vector<flatbuffers::Offset<fb::ConsumerStatus>> consumer_list;
          for (const auto& c : t.consumer_list) {
            consumer_list.push_back(
                fb::CreateConsumerStatus(fbb, c.id, c.pid, c.uid, c.wait_mode, c.reported, c.lag,
                                         c.drops, c.held_blocks, c.held_bytes, c.read_bytes));
          }
          auto producer_vec = fbb.CreateVector(producer_list);
          auto consumer_vec = fbb.CreateVector(consumer_list);
          topics.push_back(fb::CreateTopicInfo(fbb, config, t.producers, t.consumers, t.published,
                                               t.depth, t.drops, t.held, t.shm_bytes, producer_vec,
                                               consumer_vec, t.published_bytes));
        }
        auto topic_vec = fbb.CreateVector(topics);
        std::vector<flatbuffers::Offset<fb::AwaitedTopic>> awaited;
        for (const auto& a : r.awaited) {
          awaited.push_back(fb::CreateAwaitedTopic(fbb, fbb.CreateString(a.name), a.consumers));
        }
        body = fb::CreateTopicList(fbb, topic_vec, fbb.CreateVector(awaited)).Union();
        break;
      }
      case ReplyType::kProducerReady: {
        type = fb::ReplyBody::ProducerReadyReply;
        std::vector<flatbuffers::Offset<fb::ConsumerInfo>> consumers;
        for (const auto& c : r.consumer_list) {
          consumers.push_back(fb::CreateConsumerInfo(fbb, c.id, c.pid));
        }
        body = fb::CreateProducerReadyReply(fbb, fbb.CreateVector(consumers)).Union();
        break;
      }
      case ReplyType::kStats: {
        type = fb::ReplyBody::BrokerStats;
        const BrokerStats& s = r.stats;
        body = fb::CreateBrokerStats(fbb, fbb.CreateString(s.name), s.pid, s.uptime_ms,
                                     s.connections, s.topics, s.producers, s.consumers, s.segments,
                                     s.reserved_bytes, s.shm_limit, s.rejected_frames,
                                     fbb.CreateString(s.shm_limit_origin), s.shm_total, s.shm_free)
                   .Union();
        break;
      }
      case ReplyType::kExtension:
        type = fb::ReplyBody::ExtensionGranted;
        body = fb::CreateExtensionGranted(fbb, fbb.CreateString(r.extension_name)).Union();
        break;
    }
  }
  std::string message = r.status.ok() ? std::string() : r.status.message();
  if (message.size() > kMaxMessageLength) message.resize(kMaxMessageLength);
  auto msg = fbb.CreateString(message);
  auto reply = fb::CreateReply(fbb, r.request_id, static_cast<uint8_t>(r.status.code()), msg, type,
                               body, r.version);
  fbb.Finish(fb::CreateServerMessage(fbb, fb::ServerBody::Reply, reply.Union()));
  return Finish(fbb);
}

Result<ServerMessage> DecodeServerMessage(std::span<const uint8_t> bytes) {
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), VerifierOptions());
  if (!verifier.VerifyBuffer<fb::ServerMessage>(nullptr)) {
    return Status::Invalid("control message from the broker: ", bytes.size(),
                           " bytes that are not a valid ServerMessage flatbuffer");
  }
  const auto* m = flatbuffers::GetRoot<fb::ServerMessage>(bytes.data());
  ServerMessage out;
  if (m->body() == nullptr) {
    return Status::Invalid("control message from the broker: the body is missing");
  }
  if (m->body_type() == fb::ServerBody::Reply) {
    ALKAID_ASSIGN_OR_RAISE(out.reply, DecodeReply(m->body_as_Reply()));
    return out;
  }
  if (m->body_type() == fb::ServerBody::Event) {
    out.is_event = true;
    ALKAID_ASSIGN_OR_RAISE(out.event, DecodeEvent(m->body_as_Event()));
    return out;
  }
  return Status::Invalid("control message from the broker: unknown body type ",
                         static_cast<int>(m->body_type()));
}

}  // namespace alkaid::broker::protocol
