#pragma once

// The broker's state and its pieces (docs/ARCHITECTURE.md, "The broker"):
// - broker.cc: the socket (listening, accepting with peer credentials,
//   reading requests, writing replies and events), liveness, shutdown;
// - requests.cc: the registry of topics, producers and consumers, and the
//   handler of each request;
// - leftovers.cc: segments left by an earlier broker: removed, or kept for
//   a producer that still runs to re-adopt;
// - segment_names.cc: the names of a producer's segments, built and parsed;
// - shm_limit.cc: the shared-memory limit, from --shm-limit or /dev/shm's
//   size.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "alkaid/common/result.h"
#include "alkaid/common/status.h"
#include "alkaid/format/type.h"
#include "daemon/broker.h"
#include "daemon/shm_limit.h"
#include "protocol/control.h"
#include "protocol/frame.h"

namespace alkaid::broker {

namespace p = protocol;

namespace internal {

// "<n> bytes (<HumanBytes(n)>)": "67829760 bytes (64.6 MiB)"; "<n> bytes"
// below 1 KiB.
std::string FormatBytes(uint64_t bytes);

}  // namespace internal

struct Broker::Impl {
  using Clock = std::chrono::steady_clock;

  struct Connection {
    int fd = -1;
    uint32_t pid = 0;
    uint32_t uid = 0;
    uint32_t gid = 0;
    p::FrameAssembler in;
    std::vector<uint8_t> out;
    bool closing = false;
    // Its first request named our control protocol version.
    bool version_checked = false;
    std::set<uint64_t> producers;
    std::set<uint64_t> consumers;
  };
  struct Producer {
    uint64_t id = 0;
    std::string topic;
    int conn = -1;
    uint32_t pid = 0;
    std::string channel;    // the name of its channel segment
    uint64_t reserved = 0;  // its channel and extensions, counted in reserved_bytes
    // The extensions of its arena it was granted (id -> bytes), named
    // "<channel>.x<id>".
    std::map<uint32_t, uint64_t> extensions;
    bool ready = false;
    uint64_t published = 0, depth = 0, drops = 0, held = 0;
  };
  struct Consumer {
    uint64_t id = 0;
    std::string topic;
    int conn = -1;
    uint32_t pid = 0;
    // Waiting for its topic to be created (listed in `awaited`, not yet in
    // the topic's consumers).
    bool pending = false;
    p::TopicKind kind = p::TopicKind::kRecordBatch;  // what it expects...
    bool any_kind = false;                           // ...unless any will do
  };
  // A producer's channel left by an earlier broker, kept while the pid in
  // its name runs, for the producer to re-register with.
  struct Leftover {
    std::string channel;
    uint32_t pid = 0;
    Clock::time_point since;
  };
  struct Topic {
    p::TopicConfig config;
    format::SchemaPtr schema;
    std::set<uint64_t> producers;
    std::set<uint64_t> consumers;
    uint64_t finished_published = 0;  // messages of producers already gone
    uint64_t finished_drops = 0;
    // Whether a producer ever attached. Until one did, the sizes (slots,
    // arena, maximum) follow the latest CreateTopic: a producer refused for
    // its sizes leaves no topic stuck with them.
    bool sized = false;
  };

  BrokerOptions options;
  // The limit in force (options.shm_limit, or the default from shm_dir's
  // size) and the size of shm_dir's file system, both taken at start.
  internal::ShmLimit shm_limit;
  uint64_t shm_total = 0;
  std::string socket_path;
  std::string instance;  // "<name>.<hex start time>": prefix of segment names
  int listen_fd = -1;
  int stop_pipe[2] = {-1, -1};
  bool have_group = false;
  gid_t group_gid = 0;
  Clock::time_point started = Clock::now();
  std::map<int, Connection> connections;
  std::map<uint64_t, Producer> producers;
  std::map<uint64_t, Consumer> consumers;
  std::map<std::string, Topic> topics;
  // Consumers waiting for a topic that does not exist yet, by topic name.
  std::map<std::string, std::set<uint64_t>> awaited;
  std::map<std::string, Leftover> adoptable;  // by channel name
  uint64_t next_id = 1;
  uint64_t reserved_bytes = 0;
  uint64_t rejected_frames = 0;

  template <typename... Args>
  void Log(LogLevel level, Args&&... args) {
    if (level > options.log_level) return;
    static const char* kNames[] = {"error", "warn", "info", "debug"};
    std::ostringstream line;
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::localtime_r(&now, &tm);
    char stamp[32];
    if (std::strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm) == 0) stamp[0] = '\0';
    line << stamp << " alkaid-broker[" << options.name << "] " << kNames[static_cast<int>(level)]
         << ": ";
    (line << ... << args);
    line << '\n';
    const std::string text = line.str();
    (void)std::fwrite(text.data(), 1, text.size(), stderr);  // nowhere to report a failure
    (void)std::fflush(stderr);
  }

  // ---- the socket, liveness and shutdown (broker.cc) -------------------------

  Status ResolveGroup();

  Status Listen();

  void Send(Connection& c, const p::ServerMessage& message);

  void Flush(Connection& c);

  void SendReply(Connection& c, p::Reply reply);

  void SendError(Connection& c, uint64_t request_id, Status status);

  void SendEvent(int fd, const p::Event& event);

  void Accept();

  void CloseConnection(int fd, const std::string& why);

  void ReadFrom(int fd);

  void CheckLiveness();

  void Shutdown();

  // ---- leftovers of an earlier broker (leftovers.cc) -------------------------

  // Looks at every shared-memory object named "<name>.*" (left by an
  // earlier broker of this name, or by its producers). A producer's channel
  // "<name>.<instance>.<pid>.p<id>.channel" (".ring" from the previous
  // release), with the segments named after it, whose pid still runs is
  // kept for re-adoption (the producer re-registers with it); everything
  // else is removed. Running processes that still map removed objects are
  // not affected; only the names go.
  void ScanLeftovers();

  // A channel's names: the channel, its registry, the consumer segments the
  // registry lists (shm::RemoveChannel).
  void RemoveChannelNames(const std::string& channel);

  void RemoveLeftover(const std::string& n);

  // Segments kept for re-adoption whose producer died, or did not
  // re-register within adopt_timeout, are removed.
  void ExpireAdoptable(bool all);

  // Chooses shm_limit (internal::ChooseShmLimit) from statvfs of shm_dir
  // and says which limit is in force and where it came from.
  Status ChooseShmLimit();

  // ---- the registry and the requests (requests.cc) ---------------------------

  // Fills what a CreateTopic left at 0 with the broker's defaults (the
  // maximum within shm_limit), and keeps the maximum at least the arena.
  void ApplyTopicDefaults(p::TopicConfig* config) const;

  Result<p::Reply> CreateTopic(const p::Request& request);

  // The consumers that waited for `topic` become its consumers before any
  // producer attaches, so that producers count them and wait for them to
  // register on their channels (ProducerReady's reply), and each learns the
  // topic's config (TopicCreated). One that expects another topic kind is
  // told too (its Open fails) but not kept.
  void WelcomeWaitingConsumers(Topic& topic);

  Result<Topic*> FindTopic(const std::string& name);

  // `who` says what the client does with that kind: "this producer
  // publishes", "this consumer expects".
  static Status CheckTopicKind(const Topic& topic, p::TopicKind wanted, const char* who);

  Result<p::Reply> AttachProducer(Connection& c, int fd, const p::Request& request);

  Result<Producer*> OwnProducer(int fd, uint64_t id);

  // Announces the producer to the topic's consumers (ProducerJoined) and
  // replies with exactly those consumers: the producer waits until each has
  // registered on its channel or left (ConsumerGone). Consumers attaching later
  // find the producer in their AttachConsumer reply instead.
  Result<p::Reply> ProducerReady(int fd, const p::Request& request);

  Result<p::Reply> AttachConsumer(Connection& c, int fd, const p::Request& request);

  // Forgets a producer, removes its segment names and tells the topic's
  // consumers (who drain what was committed, then see end of stream).
  void RemoveProducer(uint64_t id, const std::string& reason);

  void RemoveConsumer(uint64_t id, bool died);

  // A producer's extension of its arena: granted if the broker's limit
  // allows it (the reply names it), or released (its name removed, its
  // bytes no longer counted).
  Result<p::Reply> AddExtension(int fd, const p::Request& request);
  void ReleaseExtension(int fd, const p::Request& request);

  Status Detach(int fd, const p::Request& request);

  p::Reply ListTopics();

  p::Reply Stats();

  void Handle(int fd, Connection& c, const p::Request& request);
};

}  // namespace alkaid::broker
