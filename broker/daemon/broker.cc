#include "daemon/broker.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "alkaid/common/process.h"
#include "daemon/broker_internal.h"
#include "protocol/paths.h"

namespace alkaid::broker {

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
    if (!ok)
      return Status::Invalid("broker name '", name, "' has a character outside [A-Za-z0-9_-]");
  }
  return Status::OK();
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

}  // namespace

Status Broker::Server::ResolveGroup() {
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

Status Broker::Server::Listen() {
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

void Broker::Server::Send(Connection& c, const p::ServerMessage& message) {
  if (c.closing) return;
  auto encoded = p::EncodeServerMessage(message);
  if (encoded.size() > p::kMaxFrameSize) {
    // The client would refuse the frame and could not resynchronise: a
    // reply becomes a refusal that says why; an event (its schema is at
    // most kMaxSchemaBytes, so it fits) would be dropped, logged.
    Log(LogLevel::kWarn, "pid ", c.pid, ": a ", encoded.size(),
        "-byte message exceeds the control frame maximum of ", p::kMaxFrameSize, " bytes");
    if (message.is_event) return;
    p::ServerMessage refusal;
    refusal.reply.request_id = message.reply.request_id;
    refusal.reply.status = Status::CapacityError("the reply is ", encoded.size(),
                                                 " bytes, more than the control frame maximum of ",
                                                 p::kMaxFrameSize, " bytes");
    encoded = p::EncodeServerMessage(refusal);
  }
  const auto framed = p::Frame(encoded);
  if (c.out.size() + framed.size() > kMaxQueuedOutput) {
    Log(LogLevel::kWarn, "pid ", c.pid, " does not read its replies; disconnecting");
    c.closing = true;
    return;
  }
  c.out.insert(c.out.end(), framed.begin(), framed.end());
  Flush(c);
}

void Broker::Server::Flush(Connection& c) {
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

void Broker::Server::SendReply(Connection& c, p::Reply reply) {
  p::ServerMessage m;
  m.reply = std::move(reply);
  Send(c, m);
}

void Broker::Server::SendError(Connection& c, uint64_t request_id, Status status) {
  p::Reply reply;
  reply.request_id = request_id;
  reply.status = std::move(status);
  SendReply(c, std::move(reply));
}

void Broker::Server::SendEvents(const std::vector<internal::Outbound>& events) {
  for (const auto& e : events) {
    auto it = connections.find(e.conn);
    if (it == connections.end()) continue;
    p::ServerMessage m;
    m.is_event = true;
    m.event = e.event;
    Send(it->second, m);
  }
}

void Broker::Server::Accept() {
  while (true) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        Log(LogLevel::kWarn, "accept: ", ErrnoMessage(errno));
      }
      return;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      Log(LogLevel::kWarn, "SO_PEERCRED: ", ErrnoMessage(errno));
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

void Broker::Server::CloseConnection(int fd, const std::string& why) {
  auto it = connections.find(fd);
  if (it == connections.end()) return;
  const internal::Peer peer = it->second.peer();
  SendEvents(registry->Disconnected(peer, why));
  Log(LogLevel::kDebug, "connection of pid ", peer.pid, " closed: ", why);
  ::close(fd);
  connections.erase(fd);
}

void Broker::Server::ReadFrom(int fd) {
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
    if (!c.version_checked) {
      // The first request says which control protocol the client speaks.
      if (request->version != p::kControlProtocolVersion) {
        ++rejected_frames;
        const Status refusal = Status::Invalid(
            "control protocol version mismatch: the client (pid ", c.pid, ") speaks version ",
            request->version, request->version == 0 ? " (a client from before versions)" : "",
            ", this broker speaks version ", p::kControlProtocolVersion,
            "; use a client and a broker of the same release");
        Log(LogLevel::kWarn, refusal.message(), "; closing the connection");
        SendError(c, request->id, refusal);
        c.closing = true;
        return;
      }
      c.version_checked = true;
    }
    Handle(c, *request);
  }
}

void Broker::Server::Handle(Connection& c, const p::Request& request) {
  Log(LogLevel::kDebug, "pid ", c.pid, ": ", p::RequestTypeName(request.type), " #", request.id);
  internal::Outcome outcome;
  if (request.type == p::RequestType::kGetStats) {
    p::Reply reply = Stats();
    reply.request_id = request.id;
    outcome.reply = std::move(reply);
  } else {
    outcome = registry->Handle(c.peer(), request);
  }
  if (outcome.reply.has_value()) {
    Result<p::Reply>& reply = *outcome.reply;
    if (reply.ok()) {
      SendReply(c, std::move(*reply));
    } else {
      Log(LogLevel::kInfo, "pid ", c.pid, ": ", p::RequestTypeName(request.type),
          " refused: ", reply.status().ToString());
      SendError(c, request.id, reply.status());
    }
  }
  SendEvents(outcome.events);
}

p::Reply Broker::Server::Stats() const {
  p::Reply reply;
  reply.type = p::ReplyType::kStats;
  p::BrokerStats& s = reply.stats;
  s.name = options.name;
  s.pid = static_cast<uint32_t>(::getpid());
  s.uptime_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
  s.connections = static_cast<uint32_t>(connections.size());
  registry->Count(&s);
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

Status Broker::Server::ChooseShmLimit() {
  const std::string& dir = options.shm_dir;
  auto space = internal::StatShmSpace(dir);
  if (!space.ok()) {
    // Without a limit the figures are only informative.
    if (options.shm_limit != uint64_t{0}) return space.status();
    Log(LogLevel::kWarn, "cannot see how much ", dir, " holds: ", space.status().message());
    shm_limit.origin = "--shm-limit 0";
    return Status::OK();
  }
  ALKAID_ASSIGN_OR_RAISE(shm_limit, internal::ChooseShmLimit(options.shm_limit, *space, dir));
  shm_total = space->total;
  using internal::HumanBytes;
  const std::string figures =
      dir + ": " + HumanBytes(space->free) + " free of " + HumanBytes(space->total);
  if (shm_limit.bytes == 0) {
    Log(LogLevel::kInfo, "no shm limit (", shm_limit.origin, "); ", figures);
    return Status::OK();
  }
  Log(LogLevel::kInfo, "shm limit ", HumanBytes(shm_limit.bytes), " (", shm_limit.origin,
      shm_limit.is_default ? "; --shm-limit to change" : "", "); ", figures);
  if (space->free < shm_limit.bytes) {
    // Only the default can get here: what other processes hold is not
    // ours to count, so producers are refused when their segments do not
    // fit in what is left (OutOfMemory from the producer), not before.
    Log(LogLevel::kWarn, "only ", HumanBytes(space->free), " of ", dir,
        " is free: producers whose segments do not fit in it will be refused");
  }
  return Status::OK();
}

void Broker::Server::CheckLiveness() {
  std::vector<int> dead;
  for (const auto& [fd, c] : connections) {
    if (::alkaid::ProcessIsGone(c.pid)) dead.push_back(fd);
  }
  for (int fd : dead) CloseConnection(fd, "process exited");
  leftovers.Expire(false);
  if (registry) registry->ExpireDrains(Clock::now());
}

void Broker::Server::Shutdown() {
  while (!connections.empty()) CloseConnection(connections.begin()->first, "broker stopping");
  // Every consumer went with its connection; whatever is still kept goes.
  if (registry) registry->ExpireDrains(Clock::time_point::max());
  leftovers.Expire(true);
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

Broker::Broker(std::unique_ptr<Server> server) : server_(std::move(server)) {}

Broker::~Broker() { server_->Shutdown(); }

const std::string& Broker::socket_path() const { return server_->socket_path; }

Result<std::unique_ptr<Broker>> Broker::Create(const BrokerOptions& options) {
  ALKAID_RETURN_NOT_OK(ValidateBrokerName(options.name));
  if (options.default_slot_count < 2 ||
      (options.default_slot_count & (options.default_slot_count - 1)) != 0) {
    return Status::Invalid("default slot count ", options.default_slot_count,
                           " is not a power of two >= 2");
  }
  auto server = std::make_unique<Server>(options);
  server->socket_path = options.socket_path.empty() ? p::DefaultSocketPath() : options.socket_path;
  char stamp[32];
  (void)std::snprintf(
      stamp, sizeof(stamp), "%llx",
      static_cast<unsigned long long>(std::chrono::system_clock::now().time_since_epoch().count()));
  server->instance = options.name + "." + stamp;
  ALKAID_RETURN_NOT_OK(server->ResolveGroup());
  if (::pipe2(server->stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status::FromErrno(errno, "pipe2");
  }
  std::unique_ptr<Broker> broker(new Broker(std::move(server)));
  Server& state = *broker->server_;
  // The socket first: a second broker must not remove the first one's
  // segments.
  ALKAID_RETURN_NOT_OK(state.Listen());
  state.leftovers.Scan();
  ALKAID_RETURN_NOT_OK(state.ChooseShmLimit());
  internal::RegistrySettings settings;
  settings.broker_name = options.name;
  settings.socket_path = state.socket_path;
  settings.instance = state.instance;
  settings.default_slot_count = options.default_slot_count;
  settings.default_arena_bytes = options.default_arena_bytes;
  settings.default_max_arena_bytes = options.default_max_arena_bytes;
  settings.shm_limit = state.shm_limit;
  settings.segment_mode = state.have_group ? 0660 : 0600;
  settings.dead_producer_drain = options.dead_producer_drain;
  state.registry =
      std::make_unique<internal::Registry>(std::move(settings), &state.leftovers, state.log);
  state.Log(LogLevel::kInfo, "listening on ", state.socket_path, " (segments named ",
            state.instance, ".*)");
  return broker;
}

void Broker::RequestStop() {
  const char byte = 1;
  const ssize_t n = ::write(server_->stop_pipe[1], &byte, 1);
  (void)n;
}

Status Broker::Run() {
  Server& server = *server_;
  auto next_check = Clock::now() + server.options.liveness_interval;
  std::vector<pollfd> fds;
  std::vector<int> order;
  while (true) {
    fds.clear();
    fds.push_back({server.stop_pipe[0], POLLIN, 0});
    fds.push_back({server.listen_fd, POLLIN, 0});
    for (const auto& [fd, c] : server.connections) {
      short events = POLLIN;
      if (!c.out.empty()) events |= POLLOUT;
      fds.push_back({fd, events, 0});
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(next_check - Clock::now());
    const int timeout = static_cast<int>(std::max<int64_t>(0, left.count()));
    const int r = ::poll(fds.data(), fds.size(), timeout);
    if (r < 0 && errno != EINTR) return Status::FromErrno(errno, "poll");
    if (r > 0) {
      if (fds[0].revents != 0) {
        server.Log(LogLevel::kInfo, "stopping");
        return Status::OK();
      }
      if (fds[1].revents & POLLIN) server.Accept();
      for (std::size_t i = 2; i < fds.size(); ++i) {
        const int fd = fds[i].fd;
        auto it = server.connections.find(fd);
        if (it == server.connections.end()) continue;
        if (fds[i].revents & POLLIN) server.ReadFrom(fd);
        if (fds[i].revents & POLLOUT) server.Flush(it->second);
        if (fds[i].revents & (POLLHUP | POLLERR | POLLNVAL)) it->second.closing = true;
      }
    }
    // Tear down what ended: hang-ups, bad requests, unwritable peers.
    order.clear();
    for (const auto& [fd, c] : server.connections) {
      if (c.closing) order.push_back(fd);
    }
    for (int fd : order) {
      auto it = server.connections.find(fd);
      if (it == server.connections.end()) continue;
      server.Flush(it->second);  // best effort: the error reply of a bad request
      server.CloseConnection(fd, "connection closed");
    }
    if (Clock::now() >= next_check) {
      server.CheckLiveness();
      next_check = Clock::now() + server.options.liveness_interval;
    }
  }
}

}  // namespace alkaid::broker
