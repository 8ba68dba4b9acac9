#include "daemon/broker.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "alkaid/common/process.h"
#include "alkaid/format/ipc/io.h"
#include "alkaid/format/ipc/reader.h"
#include "alkaid/format/unsafe_row.h"
#include "alkaid/shm/channel.h"
#include "alkaid/shm/segment.h"
#include "protocol/control.h"
#include "protocol/frame.h"
#include "protocol/paths.h"

namespace alkaid::broker {

namespace p = protocol;
using Clock = std::chrono::steady_clock;

Result<LogLevel> ParseLogLevel(const std::string& text) {
  if (text == "error") return LogLevel::kError;
  if (text == "warn") return LogLevel::kWarn;
  if (text == "info") return LogLevel::kInfo;
  if (text == "debug") return LogLevel::kDebug;
  return Status::Invalid("log level '", text, "' is not one of error, warn, info, debug");
}

namespace {

constexpr std::size_t kMaxBrokerNameLength = 64;
constexpr std::size_t kMaxConnections = 1024;
// Per connection: more queued output than this means the client does not
// read its socket; it is disconnected rather than letting memory grow.
constexpr std::size_t kMaxQueuedOutput = 8u << 20;

Status ValidateBrokerName(const std::string& name) {
  if (name.empty() || name.size() > kMaxBrokerNameLength) {
    return Status::Invalid("broker name '", name, "' must be 1 to ", kMaxBrokerNameLength,
                           " characters long");
  }
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    if (!ok) return Status::Invalid("broker name '", name, "' has a character outside [A-Za-z0-9_-]");
  }
  return Status::OK();
}

// The text of an errno value (strerror_r: strerror is not thread-safe).
std::string ErrnoText(int err) {
  char buf[256];
  return ::strerror_r(err, buf, sizeof(buf));  // GNU: returns the text, in buf or static
}

std::string FormatBytes(uint64_t bytes) {
  std::ostringstream out;
  out << bytes << " bytes (" << (bytes >> 20) << " MiB)";
  return out.str();
}

Status MakeDirectories(const std::string& dir) {
  if (dir.empty()) return Status::OK();
  std::string prefix;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    prefix = dir.substr(0, pos);
    if (prefix.empty()) continue;
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::FromErrno(errno, "creating directory " + prefix);
    }
  }
  return Status::OK();
}

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

struct Broker::Impl {
  struct Connection {
    int fd = -1;
    uint32_t pid = 0;
    uint32_t uid = 0;
    uint32_t gid = 0;
    p::FrameAssembler in;
    std::vector<uint8_t> out;
    bool closing = false;
    std::set<uint64_t> producers;
    std::set<uint64_t> consumers;
  };
  struct Producer {
    uint64_t id = 0;
    std::string topic;
    int conn = -1;
    uint32_t pid = 0;
    std::string ring;
    std::string bodies;
    uint64_t reserved = 0;
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
    p::PayloadKind kind = p::PayloadKind::kRecordBatch;  // what it expects...
    bool any_kind = false;                               // ...unless any will do
  };
  // A producer's segments left by an earlier broker, kept while the pid in
  // their names runs, for the producer to re-register with.
  struct Leftover {
    std::string ring;
    std::string bodies;
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
  };

  BrokerOptions options;
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
  std::map<std::string, Leftover> adoptable;  // by ring name
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

  // ---- startup ------------------------------------------------------------

  Status ResolveGroup() {
    if (options.group.empty()) return Status::OK();
    char* end = nullptr;
    const unsigned long number = std::strtoul(options.group.c_str(), &end, 10);
    if (end != nullptr && *end == '\0') {
      group_gid = static_cast<gid_t>(number);
    } else {
      struct group entry {};
      struct group* g = nullptr;
      std::vector<char> buf(16384);
      const int err = ::getgrnam_r(options.group.c_str(), &entry, buf.data(), buf.size(), &g);
      if (err != 0) return Status::FromErrno(err, "looking up group '" + options.group + "'");
      if (g == nullptr) return Status::KeyError("group '", options.group, "' does not exist");
      group_gid = g->gr_gid;
    }
    have_group = true;
    return Status::OK();
  }

  // Looks at every shared-memory object named "<name>.*" (left by an
  // earlier broker of this name, or by its producers). A producer's pair
  // "<name>.<instance>.<pid>.p<id>.ring|.bodies" whose pid still runs is
  // kept for re-adoption (the producer re-registers with it); everything
  // else is removed. Running processes that still map removed objects are
  // not affected; only the names go.
  void ScanLeftovers() {
    DIR* dir = ::opendir(options.shm_dir.c_str());
    if (dir == nullptr) {
      Log(LogLevel::kWarn, "cannot list ", options.shm_dir, ": ", ErrnoText(errno));
      return;
    }
    const std::string prefix = options.name + ".";
    std::vector<std::string> names;
    // NOLINTNEXTLINE(concurrency-mt-unsafe): readdir on our own DIR stream is safe (glibc)
    while (const dirent* entry = ::readdir(dir)) {
      const std::string_view n(entry->d_name);
      if (n.size() > prefix.size() && n.substr(0, prefix.size()) == prefix) names.emplace_back(n);
    }
    ::closedir(dir);
    std::map<std::string, Leftover> pairs;  // by stem
    for (const auto& n : names) {
      uint32_t pid = 0;
      std::string stem;
      bool is_ring = false;
      if (ParseSegmentName(n, &stem, &pid, &is_ring) && !::alkaid::ProcessIsGone(pid)) {
        Leftover& l = pairs[stem];
        l.pid = pid;
        if (is_ring) {
          l.ring = n;
        } else if (n.size() > stem.size() + 7 && n.compare(stem.size(), 7, ".bodies") == 0) {
          l.bodies = n;
        }
        continue;
      }
      RemoveLeftover(n);
    }
    const auto now = Clock::now();
    for (auto& [stem, l] : pairs) {
      if (l.ring.empty()) {
        // Without its channel the rest is useless (a registry, consumer
        // segments, a body segment of an older version).
        for (const auto& n : names) {
          if (n.compare(0, stem.size() + 1, stem + ".") == 0) RemoveLeftover(n);
        }
        continue;
      }
      l.since = now;
      Log(LogLevel::kInfo, "keeping segments ", stem, ".* of live pid ", l.pid,
          " for re-adoption");
      std::string key = l.ring;
      adoptable.emplace(std::move(key), std::move(l));
    }
  }

  // "<name>.<instance>.<pid>.p<id>.ring|bodies" -> stem, pid, kind.
  bool ParseSegmentName(const std::string& n, std::string* stem, uint32_t* pid, bool* is_ring) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (true) {
      const std::size_t dot = n.find('.', start);
      parts.push_back(n.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    // A producer's channel is "<stem>.ring", with its registry
    // "<stem>.ring.reg" and its consumers' segments "<stem>.ring.c<k>.<tag>"
    // (shm::ChannelProducer); "<stem>.bodies" is the name the protocol
    // still reserves for a body segment.
    if (parts.size() < 5 || parts[0] != options.name) return false;
    if (parts[4] != "ring" && !(parts[4] == "bodies" && parts.size() == 5)) return false;
    if (parts[3].size() < 2 || parts[3][0] != 'p') return false;
    if (parts[2].empty() || parts[2].size() > 10) return false;
    uint64_t value = 0;
    for (char ch : parts[2]) {
      if (ch < '0' || ch > '9') return false;
      value = value * 10 + static_cast<uint64_t>(ch - '0');
    }
    if (value == 0 || value > 0x7fffffff) return false;
    *pid = static_cast<uint32_t>(value);
    *is_ring = parts[4] == "ring" && parts.size() == 5;
    *stem = parts[0] + "." + parts[1] + "." + parts[2] + "." + parts[3];
    return true;
  }

  // A channel's names: the channel, its registry, the consumer segments the
  // registry lists (shm::RemoveChannel).
  void RemoveChannelNames(const std::string& channel) {
    const Status st = shm::RemoveChannel(channel);
    if (st.ok()) {
      Log(LogLevel::kInfo, "removed channel ", channel, " and its registry");
    } else if (st.code() != StatusCode::kKeyError) {
      Log(LogLevel::kWarn, "removing channel ", channel, ": ", st.message());
    }
  }

  void RemoveLeftover(const std::string& n) {
    const std::string path = options.shm_dir + "/" + n;
    if (::unlink(path.c_str()) == 0) {
      Log(LogLevel::kInfo, "removed leftover segment ", n);
    } else if (errno != ENOENT) {
      Log(LogLevel::kWarn, "cannot remove leftover segment ", n, ": ", ErrnoText(errno));
    }
  }

  // Segments kept for re-adoption whose producer died, or did not
  // re-register within adopt_timeout, are removed.
  void ExpireAdoptable(bool all) {
    const auto now = Clock::now();
    for (auto it = adoptable.begin(); it != adoptable.end();) {
      const Leftover& l = it->second;
      const bool gone = ::alkaid::ProcessIsGone(l.pid);
      if (all || gone || now - l.since >= options.adopt_timeout) {
        Log(LogLevel::kInfo, "segments of pid ", l.pid, " not re-adopted (",
            all ? "broker stopping" : gone ? "process gone" : "no re-registration in time",
            ")");
        RemoveChannelNames(l.ring);
        if (!l.bodies.empty()) RemoveLeftover(l.bodies);
        it = adoptable.erase(it);
      } else {
        ++it;
      }
    }
  }

  Status CheckShmSpace() {
    if (options.shm_limit == 0) return Status::OK();
    struct statvfs vfs {};
    if (::statvfs(options.shm_dir.c_str(), &vfs) != 0) {
      return Status::FromErrno(errno, "statvfs " + options.shm_dir);
    }
    const uint64_t avail = uint64_t{vfs.f_bavail} * uint64_t{vfs.f_frsize};
    if (avail < options.shm_limit) {
      return Status::OutOfMemory(
          options.shm_dir, " has only ", FormatBytes(avail), " free, less than --shm-limit ",
          FormatBytes(options.shm_limit),
          ". In a container, give it a larger /dev/shm (docker run --shm-size=...), or lower "
          "--shm-limit.");
    }
    Log(LogLevel::kInfo, options.shm_dir, ": ", FormatBytes(avail), " free, limit ",
        FormatBytes(options.shm_limit));
    return Status::OK();
  }

  Status Listen() {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_path.size() >= sizeof(addr.sun_path)) {
      return Status::Invalid("socket path '", socket_path, "' is longer than ",
                             sizeof(addr.sun_path) - 1, " bytes");
    }
    std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
    const std::size_t slash = socket_path.rfind('/');
    if (slash != std::string::npos && slash > 0) {
      ALKAID_RETURN_NOT_OK(MakeDirectories(socket_path.substr(0, slash)));
    }
    // Refuse to start twice: if something answers on the path, it is a
    // live broker; if nothing does, the file is stale and goes.
    struct stat st {};
    if (::lstat(socket_path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) {
        return Status::AlreadyExists("'", socket_path, "' exists and is not a socket");
      }
      const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (probe < 0) return Status::FromErrno(errno, "socket");
      const int r = ::connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
      ::close(probe);
      if (r == 0) {
        return Status::AlreadyExists("another broker is already serving ", socket_path);
      }
      Log(LogLevel::kInfo, "removing stale socket ", socket_path);
      if (::unlink(socket_path.c_str()) != 0 && errno != ENOENT) {
        return Status::FromErrno(errno, "unlink stale socket " + socket_path);
      }
    }
    listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listen_fd < 0) return Status::FromErrno(errno, "socket");
    if (::bind(listen_fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      return Status::FromErrno(errno, "bind " + socket_path);
    }
    const mode_t mode = have_group ? 0660 : 0600;
    if (have_group && ::chown(socket_path.c_str(), static_cast<uid_t>(-1), group_gid) != 0) {
      return Status::FromErrno(errno, "chown socket to group " + options.group);
    }
    if (::chmod(socket_path.c_str(), mode) != 0) {
      return Status::FromErrno(errno, "chmod " + socket_path);
    }
    if (::listen(listen_fd, 64) != 0) return Status::FromErrno(errno, "listen");
    return Status::OK();
  }

  // ---- output ---------------------------------------------------------------

  void Send(Connection& c, const p::ServerMessage& message) {
    if (c.closing) return;
    auto payload = p::EncodeServerMessage(message);
    if (payload.size() > p::kMaxFrameSize) {
      // The client would refuse the frame and could not resynchronise: a
      // reply becomes a refusal that says why; an event (its schema is at
      // most kMaxSchemaBytes, so it fits) would be dropped, logged.
      Log(LogLevel::kWarn, "pid ", c.pid, ": a ", payload.size(),
          "-byte message exceeds the control frame maximum of ", p::kMaxFrameSize, " bytes");
      if (message.is_event) return;
      p::ServerMessage refusal;
      refusal.reply.request_id = message.reply.request_id;
      refusal.reply.status = Status::CapacityError(
          "the reply is ", payload.size(), " bytes, more than the control frame maximum of ",
          p::kMaxFrameSize, " bytes");
      payload = p::EncodeServerMessage(refusal);
    }
    const auto framed = p::Frame(payload);
    if (c.out.size() + framed.size() > kMaxQueuedOutput) {
      Log(LogLevel::kWarn, "pid ", c.pid, " does not read its replies; disconnecting");
      c.closing = true;
      return;
    }
    c.out.insert(c.out.end(), framed.begin(), framed.end());
    Flush(c);
  }

  void Flush(Connection& c) {
    while (!c.out.empty()) {
      const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out.erase(c.out.begin(), c.out.begin() + n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.closing = true;  // peer gone; the poll loop tears it down
      return;
    }
  }

  void SendReply(Connection& c, p::Reply reply) {
    p::ServerMessage m;
    m.reply = std::move(reply);
    Send(c, m);
  }

  void SendError(Connection& c, uint64_t request_id, Status status) {
    p::Reply reply;
    reply.request_id = request_id;
    reply.status = std::move(status);
    SendReply(c, std::move(reply));
  }

  void SendEvent(int fd, const p::Event& event) {
    auto it = connections.find(fd);
    if (it == connections.end()) return;
    p::ServerMessage m;
    m.is_event = true;
    m.event = event;
    Send(it->second, m);
  }

  // ---- requests ---------------------------------------------------------------

  Result<p::Reply> CreateTopic(const p::Request& request) {
    p::TopicConfig config = request.config;
    ALKAID_ASSIGN_OR_RAISE(auto schema, DecodeSchema(config.schema, config.name));
    p::Reply reply;
    reply.type = p::ReplyType::kTopic;
    auto it = topics.find(config.name);
    if (config.payload_kind == p::PayloadKind::kUnsafeRow) {
      ALKAID_RETURN_NOT_OK_CTX(format::CheckRowSchema(*schema),
                               "topic '" << config.name << "' (unsafe-row payloads)");
    }
    if (it != topics.end()) {
      if (it->second.config.payload_kind != config.payload_kind) {
        return Status::Invalid("topic '", config.name, "' exists and carries ",
                               p::PayloadKindName(it->second.config.payload_kind),
                               " payloads, not ", p::PayloadKindName(config.payload_kind));
      }
      if (!it->second.schema->Equals(*schema)) {
        return Status::Invalid("topic '", config.name,
                               "' exists with a different schema; existing: ",
                               it->second.schema->ToString(), "; requested: ", schema->ToString());
      }
      reply.config = it->second.config;
      reply.created = false;
      return reply;
    }
    if (config.ring_slots == 0) config.ring_slots = options.default_ring_slots;
    if (config.segment_bytes == 0) config.segment_bytes = options.default_segment_bytes;
    Topic topic;
    topic.config = config;
    topic.schema = std::move(schema);
    Topic& created = topics.emplace(config.name, std::move(topic)).first->second;
    Log(LogLevel::kInfo, "topic '", config.name, "' created (",
        p::PayloadKindName(config.payload_kind), ", ", config.ring_slots, " slots, ",
        FormatBytes(config.segment_bytes), ")");
    WelcomeWaitingConsumers(created);
    reply.config = std::move(config);
    reply.created = true;
    return reply;
  }

  // The consumers that waited for `topic` become its consumers before any
  // producer attaches, so that producers count them and wait for them to
  // register on their rings (ProducerReady's reply), and each learns the
  // topic's config (TopicCreated). One that expects another payload kind is
  // told too (its Open fails) but not kept.
  void WelcomeWaitingConsumers(Topic& topic) {
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
      if (!consumer.any_kind && consumer.kind != topic.config.payload_kind) {
        Log(LogLevel::kInfo, "consumer ", id, " (pid ", consumer.pid, ") waited for '",
            topic.config.name, "' but expects ", p::PayloadKindName(consumer.kind),
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

  Result<Topic*> FindTopic(const std::string& name) {
    auto it = topics.find(name);
    if (it == topics.end()) {
      return Status::KeyError("no topic '", name, "' on broker '", options.name, "' (",
                              socket_path, "); a producer creates it");
    }
    return &it->second;
  }

  // `who` says what the client does with that kind: "this producer
  // publishes", "this consumer expects".
  static Status CheckPayloadKind(const Topic& topic, p::PayloadKind wanted, const char* who) {
    if (topic.config.payload_kind == wanted) return Status::OK();
    return Status::Invalid("topic '", topic.config.name, "' carries ",
                           p::PayloadKindName(topic.config.payload_kind), " payloads; ", who, " ",
                           p::PayloadKindName(wanted));
  }

  Result<p::Reply> AttachProducer(Connection& c, int fd, const p::Request& request) {
    ALKAID_ASSIGN_OR_RAISE(Topic * topic, FindTopic(request.topic));
    ALKAID_RETURN_NOT_OK(CheckPayloadKind(*topic, request.payload_kind, "this producer publishes"));
    const bool readopt = !request.ring.empty();
    auto left = adoptable.end();
    if (readopt) {
      // A producer that outlived a broker restart: it may claim only the
      // segments that carry its own pid in their names.
      left = adoptable.find(request.ring);
      if (left == adoptable.end() ||
          (!left->second.bodies.empty() && left->second.bodies != request.bodies)) {
        return Status::KeyError("segments '", request.ring, "' and '", request.bodies,
                                "' were not left by an earlier broker named '", options.name,
                                "' (or were removed since)");
      }
      if (left->second.pid != c.pid) {
        return Status::PermissionDenied("segments '", request.ring, "' belong to pid ",
                                        left->second.pid, ", not to pid ", c.pid);
      }
    }
    // Ring: slots of inline payload plus headers; a generous estimate.
    const uint64_t ring_estimate = uint64_t{topic->config.ring_slots} * 640 + (64u << 10);
    const uint64_t need = topic->config.segment_bytes + ring_estimate;
    if (!readopt && options.shm_limit != 0 && reserved_bytes + need > options.shm_limit) {
      return Status::CapacityError("attaching a producer to topic '", request.topic, "' needs ",
                                   FormatBytes(need), " of shared memory; ",
                                   FormatBytes(reserved_bytes), " of the broker's limit of ",
                                   FormatBytes(options.shm_limit), " are in use");
    }
    Producer producer;
    producer.id = next_id++;
    producer.topic = request.topic;
    producer.conn = fd;
    producer.pid = c.pid;
    if (readopt) {
      // Already created and mapped by the producer; it keeps them.
      producer.ring = request.ring;
      producer.bodies = request.bodies;
      adoptable.erase(left);
    } else {
      // The pid in the name lets a restarted broker tell whose they are.
      const std::string stem =
          instance + "." + std::to_string(c.pid) + ".p" + std::to_string(producer.id);
      producer.ring = stem + ".ring";
      producer.bodies = stem + ".bodies";
    }
    producer.reserved = need;
    reserved_bytes += need;
    topic->producers.insert(producer.id);
    c.producers.insert(producer.id);
    p::Reply reply;
    reply.type = p::ReplyType::kAttachProducer;
    reply.attached_id = producer.id;
    reply.ring = producer.ring;
    reply.bodies = producer.bodies;
    reply.config = topic->config;
    reply.segment_mode = have_group ? 0660 : 0600;
    reply.consumers = static_cast<uint32_t>(topic->consumers.size());
    Log(LogLevel::kInfo, "producer ", producer.id, " (pid ", c.pid, ") ",
        readopt ? "re-registered with its segments " + producer.ring + " on '"
                : std::string("attached to '"),
        request.topic, "'");
    producers.emplace(producer.id, std::move(producer));
    return reply;
  }

  Result<Producer*> OwnProducer(int fd, uint64_t id) {
    auto it = producers.find(id);
    if (it == producers.end() || it->second.conn != fd) {
      return Status::KeyError("no producer ", id, " attached through this connection");
    }
    return &it->second;
  }

  // Announces the producer to the topic's consumers (ProducerJoined) and
  // replies with exactly those consumers: the producer waits until each has
  // registered on its ring or left (ConsumerGone). Consumers attaching later
  // find the producer in their AttachConsumer reply instead.
  Result<p::Reply> ProducerReady(int fd, const p::Request& request) {
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
    event.producer = {producer->id, producer->pid, producer->ring, producer->bodies};
    for (uint64_t cid : topic.consumers) SendEvent(consumers.at(cid).conn, event);
    return reply;
  }

  Result<p::Reply> AttachConsumer(Connection& c, int fd, const p::Request& request) {
    if (request.wait_for_topic && topics.find(request.topic) == topics.end()) {
      // Attached before the topic exists: it becomes one of the topic's
      // consumers when the topic is created (WelcomeWaitingConsumers).
      Consumer consumer{next_id++, request.topic, fd, c.pid, true, request.payload_kind,
                        request.any_payload_kind};
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
    if (!request.any_payload_kind) {
      ALKAID_RETURN_NOT_OK(
          CheckPayloadKind(*topic, request.payload_kind, "this consumer expects"));
    }
    Consumer consumer{next_id++, request.topic, fd, c.pid, false, request.payload_kind,
                      request.any_payload_kind};
    p::Reply reply;
    reply.type = p::ReplyType::kAttachConsumer;
    reply.attached_id = consumer.id;
    reply.config = topic->config;
    for (uint64_t pid : topic->producers) {
      const Producer& producer = producers.at(pid);
      if (producer.ready) {
        reply.producers.push_back({producer.id, producer.pid, producer.ring, producer.bodies});
      }
    }
    topic->consumers.insert(consumer.id);
    c.consumers.insert(consumer.id);
    Log(LogLevel::kInfo, "consumer ", consumer.id, " (pid ", c.pid, ") attached to '",
        request.topic, "'", request.from_oldest ? " from the oldest message" : "");
    consumers.emplace(consumer.id, std::move(consumer));
    return reply;
  }

  // Forgets a producer, removes its segment names and tells the topic's
  // consumers (who drain what was committed, then see end of stream).
  void RemoveProducer(uint64_t id, const std::string& reason) {
    auto it = producers.find(id);
    if (it == producers.end()) return;
    Producer producer = std::move(it->second);
    producers.erase(it);
    reserved_bytes -= producer.reserved;
    RemoveChannelNames(producer.ring);
    const Status st = shm::Segment::Remove(producer.bodies);  // none since the channel
    if (!st.ok() && st.code() != StatusCode::kKeyError) {
      Log(LogLevel::kWarn, "removing segment ", producer.bodies, ": ", st.message());
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

  void RemoveConsumer(uint64_t id, bool died) {
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
    // Dead: the producers detach its ring registrations (by pid) so that it
    // holds none of them back. Dead or detached: a producer waiting for it
    // to register on its ring (ProducerReady's reply) stops waiting for it.
    p::Event event;
    event.type = p::EventType::kConsumerGone;
    event.topic = consumer.topic;
    event.consumer_id = id;
    event.pid = consumer.pid;
    for (uint64_t pid : topic_it->second.producers) SendEvent(producers.at(pid).conn, event);
    Log(LogLevel::kInfo, "consumer ", id, " of '", consumer.topic, "' ", how);
  }

  Status Detach(int fd, const p::Request& request) {
    if (request.role == p::Role::kProducer) {
      ALKAID_RETURN_NOT_OK(OwnProducer(fd, request.target_id).status());
      RemoveProducer(request.target_id, "producer finished");
      return Status::OK();
    }
    auto it = consumers.find(request.target_id);
    if (it == consumers.end() || it->second.conn != fd) {
      return Status::KeyError("no consumer ", request.target_id,
                              " attached through this connection");
    }
    RemoveConsumer(request.target_id, false);
    return Status::OK();
  }

  p::Reply ListTopics() {
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
        info.depth = std::max(info.depth, producer.depth);
      }
      reply.topics.push_back(std::move(info));
    }
    for (const auto& [name, ids] : awaited) {
      reply.awaited.push_back({name, static_cast<uint32_t>(ids.size())});
    }
    return reply;
  }

  p::Reply Stats() {
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
    s.reserved_bytes = reserved_bytes;
    s.shm_limit = options.shm_limit;
    s.rejected_frames = rejected_frames;
    return reply;
  }

  void Handle(int fd, Connection& c, const p::Request& request) {
    Log(LogLevel::kDebug, "pid ", c.pid, ": ", p::RequestTypeName(request.type), " #",
        request.id);
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
      Log(LogLevel::kInfo, "pid ", c.pid, ": ", p::RequestTypeName(request.type), " refused: ",
          reply.status().ToString());
      SendError(c, request.id, reply.status());
      return;
    }
    reply->request_id = request.id;
    SendReply(c, std::move(*reply));
  }

  // ---- connections --------------------------------------------------------------

  void Accept() {
    while (true) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          Log(LogLevel::kWarn, "accept: ", ErrnoText(errno));
        }
        return;
      }
      ucred cred{};
      socklen_t len = sizeof(cred);
      if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        Log(LogLevel::kWarn, "SO_PEERCRED: ", ErrnoText(errno));
        ::close(fd);
        continue;
      }
      Connection c;
      c.fd = fd;
      c.pid = static_cast<uint32_t>(cred.pid);
      c.uid = cred.uid;
      c.gid = cred.gid;
      const bool allowed = cred.uid == ::geteuid() || (have_group && cred.gid == group_gid);
      if (!allowed || connections.size() >= kMaxConnections) {
        Status why = allowed ? Status::CapacityError("the broker has ", kMaxConnections,
                                                     " connections already")
                             : Status::PermissionDenied(
                                   "uid ", cred.uid, " (gid ", cred.gid, ") may not use broker '",
                                   options.name, "': it serves uid ", ::geteuid(),
                                   have_group ? " and group " + options.group : std::string());
        Log(LogLevel::kWarn, "refused pid ", cred.pid, ": ", why.message());
        SendError(c, 0, std::move(why));
        ::close(fd);
        continue;
      }
      Log(LogLevel::kDebug, "connection from pid ", cred.pid, " uid ", cred.uid);
      connections.emplace(fd, std::move(c));
    }
  }

  void CloseConnection(int fd, const std::string& why) {
    auto it = connections.find(fd);
    if (it == connections.end()) return;
    Connection& c = it->second;
    const std::set<uint64_t> owned_producers = c.producers;
    const std::set<uint64_t> owned_consumers = c.consumers;
    const uint32_t pid = c.pid;
    for (uint64_t id : owned_producers) {
      RemoveProducer(id, "producer gone (pid " + std::to_string(pid) + ": " + why + ")");
    }
    for (uint64_t id : owned_consumers) RemoveConsumer(id, true);
    Log(LogLevel::kDebug, "connection of pid ", pid, " closed: ", why);
    ::close(fd);
    connections.erase(fd);
  }

  void ReadFrom(int fd) {
    Connection& c = connections.at(fd);
    uint8_t chunk[16384];
    while (!c.closing) {
      const ssize_t n = ::recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
      if (n == 0) {
        c.closing = true;
        return;
      }
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) c.closing = true;
        break;
      }
      c.in.Append({chunk, static_cast<std::size_t>(n)});
      if (static_cast<std::size_t>(n) < sizeof(chunk)) break;
    }
    while (!c.closing) {
      auto frame = c.in.Next();
      if (!frame.ok()) {
        // Bad framing cannot be resynchronised: answer, then hang up.
        ++rejected_frames;
        Log(LogLevel::kWarn, "pid ", c.pid, ": ", frame.status().message(),
            "; closing the connection");
        SendError(c, 0, frame.status());
        c.closing = true;
        return;
      }
      if (!frame->has_value()) return;
      auto request = p::DecodeRequest(**frame);
      if (!request.ok()) {
        ++rejected_frames;
        Log(LogLevel::kWarn, "pid ", c.pid, ": ", request.status().message(),
            "; closing the connection");
        SendError(c, 0, request.status());
        c.closing = true;
        return;
      }
      Handle(fd, c, *request);
    }
  }

  void CheckLiveness() {
    std::vector<int> dead;
    for (const auto& [fd, c] : connections) {
      if (::alkaid::ProcessIsGone(c.pid)) dead.push_back(fd);
    }
    for (int fd : dead) CloseConnection(fd, "process exited");
    ExpireAdoptable(false);
  }

  void Shutdown() {
    while (!connections.empty()) CloseConnection(connections.begin()->first, "broker stopping");
    ExpireAdoptable(true);
    if (listen_fd >= 0) {
      ::close(listen_fd);
      listen_fd = -1;
      ::unlink(socket_path.c_str());
    }
    for (int& fd : stop_pipe) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }
};

Broker::Broker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Broker::~Broker() { impl_->Shutdown(); }

const std::string& Broker::socket_path() const { return impl_->socket_path; }

Result<std::unique_ptr<Broker>> Broker::Create(const BrokerOptions& options) {
  ALKAID_RETURN_NOT_OK(ValidateBrokerName(options.name));
  if (options.default_ring_slots < 2 ||
      (options.default_ring_slots & (options.default_ring_slots - 1)) != 0) {
    return Status::Invalid("default ring slots ", options.default_ring_slots,
                           " is not a power of two >= 2");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->socket_path = options.socket_path.empty() ? p::DefaultSocketPath() : options.socket_path;
  char stamp[32];
  (void)std::snprintf(stamp, sizeof(stamp), "%llx",
                static_cast<unsigned long long>(
                    std::chrono::system_clock::now().time_since_epoch().count()));
  impl->instance = options.name + "." + stamp;
  ALKAID_RETURN_NOT_OK(impl->ResolveGroup());
  if (::pipe2(impl->stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status::FromErrno(errno, "pipe2");
  }
  std::unique_ptr<Broker> broker(new Broker(std::move(impl)));
  Impl& d = *broker->impl_;
  // The socket first: a second broker must not remove the first one's
  // segments.
  ALKAID_RETURN_NOT_OK(d.Listen());
  d.ScanLeftovers();
  ALKAID_RETURN_NOT_OK(d.CheckShmSpace());
  d.Log(LogLevel::kInfo, "listening on ", d.socket_path, " (segments named ", d.instance, ".*)");
  return broker;
}

void Broker::RequestStop() {
  const char byte = 1;
  const ssize_t n = ::write(impl_->stop_pipe[1], &byte, 1);
  (void)n;
}

Status Broker::Run() {
  Impl& d = *impl_;
  auto next_check = Clock::now() + d.options.liveness_interval;
  std::vector<pollfd> fds;
  std::vector<int> order;
  while (true) {
    fds.clear();
    fds.push_back({d.stop_pipe[0], POLLIN, 0});
    fds.push_back({d.listen_fd, POLLIN, 0});
    for (const auto& [fd, c] : d.connections) {
      short events = POLLIN;
      if (!c.out.empty()) events |= POLLOUT;
      fds.push_back({fd, events, 0});
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next_check -
                                                                            Clock::now());
    const int timeout = static_cast<int>(std::max<int64_t>(0, left.count()));
    const int r = ::poll(fds.data(), fds.size(), timeout);
    if (r < 0 && errno != EINTR) return Status::FromErrno(errno, "poll");
    if (r > 0) {
      if (fds[0].revents != 0) {
        d.Log(LogLevel::kInfo, "stopping");
        return Status::OK();
      }
      if (fds[1].revents & POLLIN) d.Accept();
      for (std::size_t i = 2; i < fds.size(); ++i) {
        const int fd = fds[i].fd;
        auto it = d.connections.find(fd);
        if (it == d.connections.end()) continue;
        if (fds[i].revents & POLLIN) d.ReadFrom(fd);
        if (fds[i].revents & POLLOUT) d.Flush(it->second);
        if (fds[i].revents & (POLLHUP | POLLERR | POLLNVAL)) it->second.closing = true;
      }
    }
    // Tear down what ended: hang-ups, bad requests, unwritable peers.
    order.clear();
    for (const auto& [fd, c] : d.connections) {
      if (c.closing) order.push_back(fd);
    }
    for (int fd : order) {
      auto it = d.connections.find(fd);
      if (it == d.connections.end()) continue;
      d.Flush(it->second);  // best effort: the error reply of a bad request
      d.CloseConnection(fd, "connection closed");
    }
    if (Clock::now() >= next_check) {
      d.CheckLiveness();
      next_check = Clock::now() + d.options.liveness_interval;
    }
  }
}

}  // namespace alkaid::broker
