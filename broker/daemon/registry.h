#pragma once

// The broker's registry (docs/BROKER.md): topics, producers, consumers,
// the consumers awaiting a topic, and the shared memory reserved for
// producers. It knows no socket: each request is handled for a Peer (the
// connection it came on and its credentials) and gives back the reply and
// the events to send to other connections; the server (broker.cc) frames
// and sends them. tests/broker/registry_test.cc drives it directly.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "alkaid/common/result.h"
#include "alkaid/format/type.h"
#include "daemon/leftovers.h"
#include "daemon/log.h"
#include "daemon/shm_limit.h"
#include "protocol/control.h"

namespace alkaid::broker::internal {

namespace p = protocol;

// Who sent a request: the connection (the server's key for it) and the
// peer's credentials (SO_PEERCRED).
struct Peer {
  int conn = -1;
  uint32_t pid = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
};

// An event for the client on connection `conn`.
struct Outbound {
  int conn = -1;
  p::Event event;
};

// What a request gives: a reply (none for a report: ProducerStats,
// ReleaseExtension, ProducerDrained) and events for other connections, to
// be sent in order.
struct Outcome {
  std::optional<Result<p::Reply>> reply;
  std::vector<Outbound> events;
};

// The registry's settings, fixed at the broker's start.
struct RegistrySettings {
  std::string broker_name;
  std::string socket_path;  // named in errors
  std::string instance;     // "<name>.<hex start time>": prefix of segment names
  uint32_t default_slot_count = 1024;
  uint64_t default_arena_bytes = uint64_t{1} << 20;
  uint64_t default_max_arena_bytes = uint64_t{2} << 30;
  ShmLimit shm_limit;
  uint32_t segment_mode = 0600;  // of producers' segments (0660 with a group)
  // How long a dead producer's extensions are kept at most for its
  // consumers to read them (BrokerOptions::dead_producer_drain).
  std::chrono::milliseconds dead_producer_drain{30000};
};

/// Thread safety: one thread (the broker's).
class Registry {
 public:
  // `leftovers` (channels an earlier broker left, for re-registration) and
  // `log` must outlive the registry.
  Registry(RegistrySettings settings, Leftovers* leftovers, const Logger& log)
      : settings_(std::move(settings)), leftovers_(leftovers), log_(log) {}

  // Handles every request but GetStats (the server's: see Count).
  Outcome Handle(const Peer& peer, const p::Request& request);

  // The connection of `peer` closed (`why`): its producers are removed
  // (their names too, but for extensions their consumers may still need:
  // see Draining) and its consumers are gone, as if they died.
  std::vector<Outbound> Disconnected(const Peer& peer, const std::string& why);

  // Removes the extensions of dead producers kept past `now` (their
  // consumers did not all say they were done in time). The broker calls it
  // with its liveness checks, and with time_point::max() when it stops.
  void ExpireDrains(std::chrono::steady_clock::time_point now);

  // Figures for GetStats: topics, producers, consumers, segments (two a
  // channel, kept leftovers included, plus extensions, those kept for
  // draining included), reserved bytes.
  void Count(p::BrokerStats* stats) const;

  uint64_t reserved_bytes() const { return reserved_bytes_; }

 private:
  struct Producer {
    uint64_t id = 0;
    std::string topic;
    int conn = -1;
    uint32_t pid = 0;
    std::string channel;    // the name of its channel segment
    uint64_t reserved = 0;  // its channel and extensions, counted in reserved_bytes_
    // The extensions of its arena it was granted (id -> bytes), named
    // "<channel>.x<id>".
    std::map<uint32_t, uint64_t> extensions;
    bool ready = false;
    uint32_t uid = 0;
    uint64_t published = 0, depth = 0, drops = 0, held = 0;
    uint64_t arena_bytes = 0;
    uint64_t published_bytes = 0;  // body bytes, as last reported
    // Its channel's fixed blocks, as granted at attach (0: none).
    uint64_t fixed_block_bytes = 0;
    uint32_t fixed_block_count = 0;
    // Its consumers as its channel last saw them (ProducerStats), by pid
    // and token.
    std::vector<p::ConsumerFigures> consumer_figures;
    // Consumers that said they were done with its channel (ProducerDrained)
    // before its death reached us: not waited for if it died.
    std::set<uint64_t> drained_by;
  };
  // A dead producer's extensions, kept after its channel's names went: a
  // consumer maps an extension only when a message first names it, so one
  // that had not read that far would find the name gone and lose what the
  // producer committed there. Kept until each consumer of the topic at the
  // death said it is done with the channel (ProducerDrained), or went, and
  // each process registered on the channel that this broker does not know
  // as such a consumer (one that registered before a broker restart and has
  // not subscribed again yet) said so or exited; or until `deadline` (a
  // stopped consumer must not hold /dev/shm for ever). Still counted in
  // reserved_bytes_: the memory is still there.
  struct Draining {
    std::string topic;
    std::string channel;
    std::map<uint32_t, uint64_t> extensions;  // id -> bytes, as granted
    uint64_t bytes = 0;
    std::set<uint64_t> consumers;  // still reading it
    std::set<uint32_t> pids;       // registered on it, not known here as consumers
    std::chrono::steady_clock::time_point deadline;
    bool done() const { return consumers.empty() && pids.empty(); }
  };
  struct Consumer {
    uint64_t id = 0;
    std::string topic;
    int conn = -1;
    uint32_t pid = 0;
    // Waiting for its topic to be created (listed in `awaited_`, not yet in
    // the topic's consumers).
    bool pending = false;
    p::TopicKind kind = p::TopicKind::kRecordBatch;  // what it expects...
    bool any_kind = false;                           // ...unless any will do
    uint32_t uid = 0;
    uint8_t wait_mode = 0;  // shm::WaitMode, as the consumer said at attach
    // What it writes into its segment on each channel, unique among its
    // process's consumers (0: an older client, none): the producers'
    // figures are matched to it by pid and token (Reports).
    uint64_t token = 0;
    // Whether the producers' figures `f` are this consumer's.
    bool Reports(const p::ConsumerFigures& f) const;
  };
  struct Topic {
    p::TopicConfig config;
    format::SchemaPtr schema;
    std::set<uint64_t> producers;
    std::set<uint64_t> consumers;
    uint64_t finished_published = 0;        // messages of producers already gone
    uint64_t finished_published_bytes = 0;  // and their body bytes
    uint64_t finished_drops = 0;
    // Whether a producer ever attached. Until one did, the sizes (slots,
    // arena, maximum) follow the latest CreateTopic: a producer refused for
    // its sizes leaves no topic stuck with them.
    bool sized = false;
  };
  // What each connection attached.
  struct Owned {
    std::set<uint64_t> producers;
    std::set<uint64_t> consumers;
  };

  // Fills what a CreateTopic left at 0 with the broker's defaults (the
  // maximum within the shm limit), and keeps the maximum at least the arena.
  void ApplyTopicDefaults(p::TopicConfig* config) const;

  Result<p::Reply> CreateTopic(const p::Request& request, Outcome* out);

  // The consumers that waited for `topic` become its consumers before any
  // producer attaches, so that producers count them and wait for them to
  // register on their channels (ProducerReady's reply), and each learns the
  // topic's config (TopicCreated). One that expects another topic kind is
  // told too (its Open fails) but not kept.
  void WelcomeWaitingConsumers(Topic& topic, Outcome* out);

  Result<Topic*> FindTopic(const std::string& name);

  // `who` says what the client does with that kind: "this producer
  // publishes", "this consumer expects".
  static Status CheckTopicKind(const Topic& topic, p::TopicKind wanted, const char* who);

  Result<p::Reply> AttachProducer(const Peer& peer, const p::Request& request);

  Result<Producer*> OwnProducer(int conn, uint64_t id);

  // Announces the producer to the topic's consumers (ProducerJoined) and
  // replies with exactly those consumers: the producer waits until each has
  // registered on its channel or left (ConsumerGone). Consumers attaching
  // later find the producer in their AttachConsumer reply instead.
  Result<p::Reply> ProducerReady(const Peer& peer, const p::Request& request, Outcome* out);

  Result<p::Reply> AttachConsumer(const Peer& peer, const p::Request& request);

  // Forgets a producer, removes its segment names and tells the topic's
  // consumers (who drain what was committed, then see end of stream). A
  // producer that `died` with extensions and consumers keeps its extensions'
  // names until they are done (Draining); one that detached removed them.
  void RemoveProducer(uint64_t id, const std::string& reason, bool died,
                      std::vector<Outbound>* events);

  // ProducerDrained: consumer request.target_id (of this connection) is
  // done with producer request.producer_id's channel, or, when it does not
  // know the producer's id here (it subscribed again after a broker restart,
  // and the producer died before it did), with channel request.channel.
  void ProducerDrained(const Peer& peer, const p::Request& request);
  // Consumer `id` no longer reads any dead producer's channel (it said so,
  // went, or its topic was removed): drains left with no consumer end.
  void ForgetDrainingConsumer(uint64_t id);
  // Removes the names of a dead producer's extensions kept for draining
  // and stops counting them.
  void EndDrain(std::map<uint64_t, Draining>::iterator it, const char* why);

  void RemoveConsumer(uint64_t id, bool died, std::vector<Outbound>* events);

  // A producer's extension of its arena: granted if the broker's limit
  // allows it (the reply names it), or released (its name removed, its
  // bytes no longer counted).
  Result<p::Reply> AddExtension(const Peer& peer, const p::Request& request);
  void ReleaseExtension(const Peer& peer, const p::Request& request);

  Status Detach(const Peer& peer, const p::Request& request, Outcome* out);
  // `alkaid topics rm`: a topic without producers is forgotten; its
  // consumers are detached and told (TopicRemoved), so that their Next ends.
  // Refused, naming them, while producers are attached.
  Status RemoveTopic(const Peer& peer, const p::Request& request, Outcome* out);

  p::Reply ListTopics() const;

  RegistrySettings settings_;
  Leftovers* leftovers_;
  const Logger& log_;
  std::map<int, Owned> owned_;  // by connection
  std::map<uint64_t, Producer> producers_;
  std::map<uint64_t, Consumer> consumers_;
  std::map<std::string, Topic> topics_;
  // Consumers waiting for a topic that does not exist yet, by topic name.
  std::map<std::string, std::set<uint64_t>> awaited_;
  // Dead producers' extensions kept for their consumers, by producer id.
  std::map<uint64_t, Draining> draining_;
  uint64_t next_id_ = 1;
  uint64_t reserved_bytes_ = 0;
};

}  // namespace alkaid::broker::internal
