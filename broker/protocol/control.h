#pragma once

/// \file
/// The broker's control protocol as plain C++ values (not installed; shared
/// by the daemon and the client library). Encoding and decoding go through
/// the flatbuffers schema broker/fbs/control.fbs, which only control.cc sees.
///
/// Decoding never trusts its input: the flatbuffer is verified (bounded
/// depth and table count), every string is length-checked and every number
/// range-checked, and any failure is an Invalid status naming the field.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "alkaid/common/result.h"
#include "alkaid/common/status.h"

namespace alkaid::broker::protocol {

/// Longest topic name (characters from [A-Za-z0-9._-]).
inline constexpr std::size_t kMaxTopicNameLength = 128;
/// Largest serialized schema accepted in a request.
inline constexpr std::size_t kMaxSchemaBytes = 1 << 20;

/// The control protocol version this build speaks. Every request and reply
/// carries it; the broker checks the first request of a connection, the
/// client the first reply, and either refuses a mismatch naming both
/// versions. 0 is what a peer from before versions sends (the field absent).
/// Raise it when a message changes meaning.
/// Version 2 added ProducerDrained (a version-1 broker could not decode it).
inline constexpr uint32_t kControlProtocolVersion = 2;

/// Fixed blocks of a producer's channel (AttachProducer): the largest block
/// (libshm's bound), the most blocks, and the most bytes of the area (half
/// a segment's largest size, libshm's bound too).
inline constexpr uint64_t kMaxFixedBlockBytes = uint64_t{1} << 30;
inline constexpr uint32_t kMaxFixedBlockCount = uint32_t{1} << 20;
inline constexpr uint64_t kMaxFixedAreaBytes = uint64_t{1} << 39;

/// Checks a request for fixed blocks (`bytes` of each, `count` of them; 0
/// bytes: none; 0 count: the broker's default, twice the slots), for both
/// sides: Invalid naming `where` and the bound for a count without bytes, a
/// block beyond kMaxFixedBlockBytes, more than kMaxFixedBlockCount blocks,
/// or an area (count x bytes rounded up to 64) beyond kMaxFixedAreaBytes.
/// Never overflows.
Status CheckFixedBlocks(uint64_t bytes, uint32_t count, std::string_view where);

/// The bytes of `count` fixed blocks of `bytes` each (rounded up to 64), as
/// the channel lays them out; for values CheckFixedBlocks accepted.
inline uint64_t FixedAreaBytes(uint64_t bytes, uint32_t count) {
  return uint64_t{count} * ((bytes + 63) / 64 * 64);
}

/// What each message body of a topic is.
enum class TopicKind : uint8_t {
  kRecordBatch = 0,  ///< an Arrow-format record batch (IPC Message + body)
  kUnsafeRow = 1,    ///< an UnsafeRow row batch (docs/UNSAFE_ROW.md)
};

/// "record-batch" or "unsafe-row".
const char* TopicKindName(TopicKind kind);
enum class Policy : uint8_t { kBlockProducer = 0, kDropOldest = 1 };
enum class Role : uint8_t { kProducer = 0, kConsumer = 1 };

struct TopicConfig {
  std::string name;
  std::vector<uint8_t> schema;  ///< framed IPC Schema message + end-of-stream
  TopicKind kind = TopicKind::kRecordBatch;
  uint32_t slot_count = 0;   ///< slots of a producer's channel
  uint64_t arena_bytes = 0;  ///< a producer's initial arena
  Policy policy = Policy::kBlockProducer;
  uint64_t max_arena_bytes = 0;     ///< what a producer's arena may grow to
  bool publish_timestamps = false;  ///< producers stamp each message's publish time
};

enum class RequestType : uint8_t {
  kCreateTopic = 1,
  kAttachProducer,
  kProducerReady,
  kAttachConsumer,
  kDetach,
  kListTopics,
  kGetStats,
  kProducerStats,
  kAddExtension,
  kReleaseExtension,
  kRemoveTopic,
  kProducerDrained,
};

/// Name of a request type, for logs and errors.
const char* RequestTypeName(RequestType type);

/// One consumer as a producer's channel sees it (kProducerStats).
struct ConsumerFigures {
  uint32_t pid = 0;
  uint64_t lag = 0;          ///< messages it has yet to read
  uint64_t drops = 0;        ///< messages it lost (kDropOldest)
  uint64_t held_blocks = 0;  ///< bodies received and not returned
  uint64_t held_bytes = 0;   ///< their arena bytes
  /// Body bytes of the messages before its cursor (a running count).
  uint64_t read_bytes = 0;
  /// The token it wrote into its segment (Request::token of its attach);
  /// 0: none (matched by pid alone).
  uint64_t token = 0;
};

/// One request. Which fields matter depends on `type`:
/// kCreateTopic: config; kAttachProducer: topic, kind, channel when
/// re-registering an existing channel, and the fixed blocks wanted
/// (fixed_block_bytes, fixed_block_count); kProducerReady: target_id;
/// kAttachConsumer: topic, from_oldest, kind, wait_for_topic,
/// any_kind, wait_mode, token; kDetach: role, target_id; kProducerStats: target_id,
/// published, depth, drops, held, consumer_figures, arena_bytes, published_bytes; kAddExtension:
/// target_id, extension_id, bytes; kReleaseExtension: target_id, extension_id; kRemoveTopic: topic;
/// kProducerDrained: target_id (the consumer), producer_id or (when 0) channel.
struct Request {
  RequestType type = RequestType::kListTopics;
  uint64_t id = 0;
  /// The version the sender speaks (decoded: what the client sent, 0 if it
  /// sent none).
  uint32_t version = kControlProtocolVersion;
  TopicConfig config;
  std::string topic;
  bool from_oldest = false;
  TopicKind kind = TopicKind::kRecordBatch;
  /// kAttachConsumer: wait for a topic that does not exist yet (the reply
  /// is `pending`, a kTopicCreated event follows) instead of KeyError.
  bool wait_for_topic = false;
  /// kAttachConsumer: accept the topic's topic kind, whichever it is.
  bool any_kind = false;
  std::string
      channel;  ///< kAttachProducer (re-registration), kProducerDrained: an existing channel
  Role role = Role::kProducer;
  uint64_t target_id = 0;
  uint64_t published = 0;
  uint64_t depth = 0;
  uint64_t drops = 0;
  uint64_t held = 0;
  uint32_t extension_id = 0;
  uint64_t bytes = 0;
  uint64_t producer_id = 0;  ///< kProducerDrained: the producer whose channel is done
  /// kAttachConsumer: how the consumer waits: 0 not said (an older client),
  /// else 1 + its shm::WaitMode.
  uint8_t wait_mode = 0;
  /// kAttachConsumer: the token the consumer writes into its segment on
  /// each channel (unique among its process's consumers; 0: none), by which
  /// the producers' ConsumerFigures are matched to it.
  uint64_t token = 0;
  /// kProducerStats: each consumer on the channel, and the arena's size.
  std::vector<ConsumerFigures> consumer_figures;
  uint64_t arena_bytes = 0;
  uint64_t published_bytes = 0;  ///< kProducerStats: body bytes published
  /// kAttachProducer: fixed blocks for the channel (CheckFixedBlocks): bytes
  /// of each, 0 for none; how many, 0 for twice the topic's slots. A
  /// re-registration sends what its channel has.
  uint64_t fixed_block_bytes = 0;
  uint32_t fixed_block_count = 0;
};

struct ProducerInfo {
  uint64_t id = 0;
  uint32_t pid = 0;
  std::string channel;  ///< the name of its channel segment
};

/// A consumer attached to a topic (kProducerReady's reply).
struct ConsumerInfo {
  uint64_t id = 0;
  uint32_t pid = 0;
};

/// Consumers waiting for a topic that does not exist yet.
struct AwaitedTopic {
  std::string name;
  uint32_t consumers = 0;
};

/// A producer of a topic (TopicInfo::producer_list).
struct ProducerStatus {
  uint64_t id = 0;
  uint32_t pid = 0;
  uint32_t uid = 0;
  uint64_t published = 0;  ///< as last reported
  uint64_t depth = 0;      ///< its slowest consumer's lag
  uint64_t drops = 0;
  uint64_t held = 0;
  uint64_t shm_bytes = 0;          ///< its channel and extensions, as the broker counts them
  uint64_t arena_bytes = 0;        ///< its arena now, as last reported
  uint64_t published_bytes = 0;    ///< body bytes published, as last reported
  uint64_t fixed_block_bytes = 0;  ///< its channel's fixed blocks, as granted (0: none)
  uint32_t fixed_block_count = 0;
};

/// A consumer of a topic (TopicInfo::consumer_list): the producers' figures
/// for its pid and token (pid alone where a side has no token), lag the
/// largest, the rest summed over the producers.
struct ConsumerStatus {
  uint64_t id = 0;
  uint32_t pid = 0;
  uint32_t uid = 0;
  uint8_t wait_mode = 0;  ///< as Request::wait_mode: 0 not said, else 1 + shm::WaitMode
  bool reported = false;  ///< a producer reported it
  uint64_t lag = 0;
  uint64_t drops = 0;
  uint64_t held_blocks = 0;
  uint64_t held_bytes = 0;
  uint64_t read_bytes = 0;  ///< ConsumerFigures::read_bytes, summed
};

struct TopicInfo {
  TopicConfig config;
  uint32_t producers = 0;
  uint32_t consumers = 0;
  uint64_t published = 0;
  uint64_t depth = 0;
  uint64_t drops = 0;
  uint64_t held = 0;
  uint64_t shm_bytes = 0;  ///< channels and extensions of its producers
  std::vector<ProducerStatus> producer_list;
  std::vector<ConsumerStatus> consumer_list;
  uint64_t published_bytes = 0;  ///< summed over the producers
};

struct BrokerStats {
  std::string name;
  uint32_t pid = 0;
  uint64_t uptime_ms = 0;
  uint32_t connections = 0;
  uint32_t topics = 0;
  uint32_t producers = 0;
  uint32_t consumers = 0;
  uint32_t segments = 0;
  uint64_t reserved_bytes = 0;
  uint64_t shm_limit = 0;
  uint64_t rejected_frames = 0;
  std::string shm_limit_origin;
  uint64_t shm_total = 0;
  uint64_t shm_free = 0;
};

enum class ReplyType : uint8_t {
  kNone = 0,  ///< status only
  kTopic,
  kAttachProducer,
  kAttachConsumer,
  kTopicList,
  kStats,
  kProducerReady,
  kExtension,
};

/// A reply: always a status; a body of `type` when the status is OK.
struct Reply {
  uint64_t request_id = 0;
  /// The version the broker speaks (decoded: 0 from a broker that sent none).
  uint32_t version = kControlProtocolVersion;
  Status status;
  ReplyType type = ReplyType::kNone;
  TopicConfig config;                   ///< kTopic, kAttachProducer, kAttachConsumer (not pending)
  bool created = false;                 ///< kTopic
  uint64_t attached_id = 0;             ///< kAttachProducer, kAttachConsumer
  std::string channel;                  ///< kAttachProducer
  uint32_t segment_mode = 0600;         ///< kAttachProducer
  std::vector<ProducerInfo> producers;  ///< kAttachConsumer
  /// kAttachConsumer: the topic does not exist yet; the consumer waits for
  /// it (no config, no producers).
  bool pending = false;
  std::vector<ConsumerInfo> consumer_list;  ///< kProducerReady
  std::vector<TopicInfo> topics;            ///< kTopicList
  std::vector<AwaitedTopic> awaited;        ///< kTopicList
  BrokerStats stats;                        ///< kStats
  std::string extension_name;               ///< kExtension
  /// kAttachProducer: the fixed blocks the broker counted for the producer
  /// (bytes rounded up to 64, the count resolved); the producer makes
  /// exactly these. 0 from an older broker: none.
  uint64_t fixed_block_bytes = 0;
  uint32_t fixed_block_count = 0;
};

enum class EventType : uint8_t {
  kProducerJoined = 1,
  kProducerGone,
  kConsumerGone,
  kTopicCreated,
  kTopicRemoved,
};

/// Something the broker tells an attached client without being asked.
struct Event {
  EventType type = EventType::kProducerJoined;
  std::string topic;
  ProducerInfo producer;     ///< kProducerJoined; kProducerGone uses producer.id
  std::string reason;        ///< kProducerGone, kTopicRemoved
  uint64_t consumer_id = 0;  ///< kConsumerGone, kTopicCreated
  uint32_t pid = 0;          ///< kConsumerGone
  TopicConfig config;        ///< kTopicCreated
};

/// What the broker sends: a reply or an event.
struct ServerMessage {
  bool is_event = false;
  Reply reply;
  Event event;
};

/// Checks a topic name: 1..kMaxTopicNameLength characters of [A-Za-z0-9._-],
/// not starting with '.'.
Status ValidateTopicName(const std::string& name);

std::vector<uint8_t> EncodeRequest(const Request& request);
Result<Request> DecodeRequest(std::span<const uint8_t> bytes);

std::vector<uint8_t> EncodeServerMessage(const ServerMessage& message);
Result<ServerMessage> DecodeServerMessage(std::span<const uint8_t> bytes);

}  // namespace alkaid::broker::protocol
