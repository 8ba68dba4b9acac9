#include "daemon/metrics.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>
#include <cerrno>
#include <sstream>
#include <thread>

namespace alkaid::broker {

namespace {

bool IsLoopback(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr v4{};
  return ::inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

// A label value as the exposition format wants it: \, " and newline escaped.
std::string Escape(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// One metric family: HELP and TYPE once, then its samples.
class Family {
 public:
  Family(std::ostringstream* out, const char* name, const char* type, const char* help)
      : out_(out), name_(name) {
    *out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void Sample(uint64_t value) { *out_ << name_ << ' ' << value << '\n'; }
  void Sample(double value) { *out_ << name_ << ' ' << value << '\n'; }
  void Topic(const std::string& topic, uint64_t value) {
    *out_ << name_ << "{topic=\"" << Escape(topic) << "\"} " << value << '\n';
  }
  // A producer's or consumer's sample: its topic, its id (the broker's,
  // unique while it is attached) and its process.
  void Peer(const std::string& topic, uint64_t id, uint32_t pid, uint64_t value) {
    *out_ << name_ << "{topic=\"" << Escape(topic) << "\",id=\"" << id << "\",pid=\"" << pid
          << "\"} " << value << '\n';
  }

 private:
  std::ostringstream* out_;
  const char* name_;
};

// A per-producer or per-consumer family: its name, type and help, and the
// figure of each one's status it samples.
template <typename PeerStatus>
struct Series {
  const char* name;
  const char* type;
  const char* help;
  uint64_t PeerStatus::*figure;
};

}  // namespace

Result<MetricsAddress> ParseMetricsAddress(const std::string& text, bool allow_remote) {
  MetricsAddress address;
  std::string port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Status::Invalid("--metrics '", text, "': expected [ADDRESS]:PORT");
    }
    address.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return Status::Invalid("--metrics '", text, "': expected HOST:PORT (e.g. 127.0.0.1:9464)");
    }
    address.host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) < 1 ||
      std::stoi(port) > 65535) {
    return Status::Invalid("--metrics '", text, "': the port must be 1 to 65535");
  }
  address.port = std::stoi(port);
  if (!allow_remote && !IsLoopback(address.host)) {
    return Status::Invalid("--metrics '", text, "': ", address.host,
                           " is not a loopback address; the metrics are served to this machine "
                           "only unless --metrics-allow-remote is given");
  }
  return address;
}

std::string FormatMetrics(const client::BrokerStatus& b,
                          const std::vector<client::TopicStatus>& topics,
                          const std::vector<client::AwaitedTopic>& awaited) {
  std::ostringstream out;
  Family(&out, "alkaid_broker_uptime_seconds", "gauge", "Seconds since the broker started.")
      .Sample(static_cast<double>(b.uptime_ms) / 1000.0);
  Family(&out, "alkaid_broker_connections", "gauge",
         "Clients connected to the broker's socket (producers, consumers, tools).")
      .Sample(uint64_t{b.connections});
  Family(&out, "alkaid_broker_producers", "gauge", "Producers attached, all topics.")
      .Sample(uint64_t{b.producers});
  Family(&out, "alkaid_broker_consumers", "gauge", "Consumers attached, all topics.")
      .Sample(uint64_t{b.consumers});
  Family(&out, "alkaid_broker_segments", "gauge", "Shared-memory segments the broker named.")
      .Sample(uint64_t{b.segments});
  Family(&out, "alkaid_broker_shm_in_use_bytes", "gauge",
         "Bytes of shared memory the producers hold (arenas and channels).")
      .Sample(b.reserved_bytes);
  Family(&out, "alkaid_broker_shm_limit_bytes", "gauge",
         "Most bytes of shared memory producers may hold together; 0: no limit.")
      .Sample(b.shm_limit);
  Family(&out, "alkaid_broker_shm_free_bytes", "gauge", "Free bytes of /dev/shm.")
      .Sample(b.shm_free);
  Family(&out, "alkaid_broker_rejected_frames_total", "counter",
         "Control frames the broker refused (malformed or oversized).")
      .Sample(b.rejected_frames);
  Family published(&out, "alkaid_topic_published_batches_total", "counter",
                   "Batches published to the topic, as its producers last reported (every "
                   "500 ms).");
  for (const auto& t : topics) published.Topic(t.name, t.published);
  Family published_bytes(&out, "alkaid_topic_published_bytes_total", "counter",
                         "Body bytes published to the topic, as its producers last reported "
                         "(rate() of it: the topic's bytes per second).");
  for (const auto& t : topics) published_bytes.Topic(t.name, t.published_bytes);
  Family dropped(&out, "alkaid_topic_dropped_batches_total", "counter",
                 "Batches slow consumers lost to overwrites (drop-oldest topics).");
  for (const auto& t : topics) dropped.Topic(t.name, t.drops);
  Family lag(&out, "alkaid_topic_lag_batches", "gauge",
             "Batches the slowest consumer has yet to read, largest over the producers.");
  for (const auto& t : topics) lag.Topic(t.name, t.depth);
  Family held(&out, "alkaid_topic_held_batches", "gauge",
              "Batch bodies the consumers hold, read or not (a body two consumers hold counts "
              "twice).");
  for (const auto& t : topics) held.Topic(t.name, t.held);
  Family producers(&out, "alkaid_topic_producers", "gauge", "Producers attached to the topic.");
  for (const auto& t : topics) producers.Topic(t.name, t.producers);
  Family consumers(&out, "alkaid_topic_consumers", "gauge", "Consumers attached to the topic.");
  for (const auto& t : topics) consumers.Topic(t.name, t.consumers);
  Family arena(&out, "alkaid_topic_arena_bytes", "gauge",
               "Arena bytes of the topic's producers (segment size times producers).");
  for (const auto& t : topics) arena.Topic(t.name, t.arena_bytes * t.producers);
  Family waiting(&out, "alkaid_topic_waiting_consumers", "gauge",
                 "Consumers waiting for a topic that is not created yet.");
  for (const auto& a : awaited) waiting.Topic(a.name, a.consumers);

  // Each producer and consumer (labels topic, id, pid), from the figures
  // the producers report every 500 ms; a consumer no producer reported yet
  // has no samples.
  auto per_producer = [&](const char* name, const char* type, const char* help,
                          uint64_t client::TopicProducerStatus::*figure) {
    Family family(&out, name, type, help);
    for (const auto& t : topics) {
      for (const auto& p : t.producer_list) family.Peer(t.name, p.id, p.pid, p.*figure);
    }
  };
  auto per_consumer = [&](const char* name, const char* type, const char* help,
                          uint64_t client::TopicConsumerStatus::*figure) {
    Family family(&out, name, type, help);
    for (const auto& t : topics) {
      for (const auto& c : t.consumer_list) {
        if (c.reported) family.Peer(t.name, c.id, c.pid, c.*figure);
      }
    }
  };
  static constexpr Series<client::TopicProducerStatus> kProducerSeries[] = {
      {"alkaid_producer_published_batches_total", "counter",
       "Batches the producer published, as it last reported.",
       &client::TopicProducerStatus::published},
      {"alkaid_producer_published_bytes_total", "counter",
       "Body bytes the producer published, as it last reported.",
       &client::TopicProducerStatus::published_bytes},
      {"alkaid_producer_arena_bytes", "gauge",
       "The producer's arena now: the initial arena and every extension.",
       &client::TopicProducerStatus::arena_bytes},
  };
  static constexpr Series<client::TopicConsumerStatus> kConsumerSeries[] = {
      {"alkaid_consumer_lag_batches", "gauge",
       "Batches the consumer has yet to read, the largest over the topic's producers.",
       &client::TopicConsumerStatus::lag},
      {"alkaid_consumer_dropped_batches_total", "counter",
       "Batches the consumer lost to overwrites (drop-oldest topics).",
       &client::TopicConsumerStatus::drops},
      {"alkaid_consumer_read_bytes_total", "counter",
       "Body bytes of the messages before the consumer's cursor (read, or lost to "
       "overwrites), summed over the topic's producers, as they last reported.",
       &client::TopicConsumerStatus::read_bytes},
      {"alkaid_consumer_held_batches", "gauge",
       "Batch bodies the consumer holds (received and not released).",
       &client::TopicConsumerStatus::held_blocks},
      {"alkaid_consumer_held_bytes", "gauge", "Arena bytes of the batch bodies the consumer holds.",
       &client::TopicConsumerStatus::held_bytes},
  };
  for (const auto& s : kProducerSeries) per_producer(s.name, s.type, s.help, s.figure);
  for (const auto& s : kConsumerSeries) per_consumer(s.name, s.type, s.help, s.figure);
  return out.str();
}

struct MetricsServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::string socket_path;
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const MetricsAddress& address,
                                                            const std::string& socket_path) {
  auto impl = std::make_unique<Impl>();
  impl->socket_path = socket_path;
  // One thread answers: scrapes come every few seconds.
  impl->server.new_task_queue = [] { return new httplib::ThreadPool(1); };
  Impl* raw = impl.get();
  impl->server.Get("/metrics", [raw](const httplib::Request&, httplib::Response& res) {
    auto broker = client::BrokerClient::Connect(raw->socket_path);
    Status st = broker.status();
    if (st.ok()) {
      auto topics = (*broker)->ListTopics();
      auto awaited = (*broker)->ListAwaitedTopics();
      auto stats = (*broker)->Stats();
      st = !topics.ok() ? topics.status() : !awaited.ok() ? awaited.status() : stats.status();
      if (st.ok()) {
        res.set_content(FormatMetrics(*stats, *topics, *awaited),
                        "text/plain; version=0.0.4; charset=utf-8");
        return;
      }
    }
    res.status = 503;
    res.set_content("alkaid-broker: " + st.ToString() + "\n", "text/plain; charset=utf-8");
  });
  impl->server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("alkaid-broker: the metrics are at /metrics\n", "text/plain; charset=utf-8");
  });
  // The system's reason for a refusal (httplib says only that it failed):
  // a probe bind with the same options.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string where = address.host + ":" + std::to_string(address.port);
  if (const int rc =
          ::getaddrinfo(address.host.c_str(), std::to_string(address.port).c_str(), &hints, &found);
      rc != 0) {
    return Status::IOError("--metrics ", where, ": ", ::gai_strerror(rc));
  }
  int probe_errno = 0;
  const int fd = ::socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  if (fd >= 0) {
    const int yes = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0) probe_errno = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (probe_errno != 0) {
    return Status::FromErrno(probe_errno, "--metrics " + where + ": cannot listen");
  }
  if (!impl->server.bind_to_port(address.host, address.port)) {
    return Status::IOError("--metrics ", where, ": cannot listen");
  }
  impl->thread = std::thread([raw] { raw->server.listen_after_bind(); });
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace alkaid::broker
