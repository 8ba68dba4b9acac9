// alkaid top / hz: what flows right now (docs/BROKER.md, "Watching it live").
//
// top: snapshots of the broker's figures (ListTopics, GetStats) an interval
// apart; rates are the differences. A full-screen view in plain ANSI (the
// alternate screen, a raw terminal; works over SSH and in tmux), or one
// JSON document with --once --json.
//
// hz: a consumer of one topic that counts what arrives per window.

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "alkaid/client/broker_client.h"
#include "alkaid/client/consumer.h"
#include "commands.h"
#include "output.h"

namespace alkaid::tools {

namespace {

using Clock = std::chrono::steady_clock;

struct Snapshot {
  Clock::time_point at;
  client::BrokerStatus broker;
  std::vector<client::TopicStatus> topics;
  std::vector<client::AwaitedTopic> awaited;
};

Result<Snapshot> Take(client::BrokerClient& broker) {
  Snapshot s;
  s.at = Clock::now();
  ALKAID_ASSIGN_OR_RAISE(s.topics, broker.ListTopics());
  ALKAID_ASSIGN_OR_RAISE(s.awaited, broker.ListAwaitedTopics());
  ALKAID_ASSIGN_OR_RAISE(s.broker, broker.Stats());
  return s;
}

// One topic's line: its figures now and its rates since the last snapshot.
struct TopicRow {
  const client::TopicStatus* topic = nullptr;
  uint64_t published_delta = 0;
  uint64_t drops_delta = 0;
  uint64_t bytes_delta = 0;
  double batches_per_s = 0;
  double drops_per_s = 0;
  double mb_per_s = 0;  // body bytes published, in 10^6 bytes per second
};

// The growth of a running count between two snapshots: 0 if it went back
// (a restarted broker, a producer replaced).
uint64_t Delta(uint64_t now, uint64_t before) { return now >= before ? now - before : 0; }

double PerSecond(uint64_t delta, double seconds) {
  return seconds > 0 ? static_cast<double>(delta) / seconds : 0;
}

std::vector<TopicRow> Rows(const Snapshot& before, const Snapshot& now) {
  const double seconds = std::chrono::duration<double>(now.at - before.at).count();
  std::vector<TopicRow> rows;
  for (const auto& t : now.topics) {
    TopicRow row;
    row.topic = &t;
    for (const auto& b : before.topics) {
      if (b.name != t.name) continue;
      // Counters restart with a restarted broker: no negative rates.
      row.published_delta = Delta(t.published, b.published);
      row.drops_delta = Delta(t.drops, b.drops);
      row.bytes_delta = Delta(t.published_bytes, b.published_bytes);
    }
    row.batches_per_s = PerSecond(row.published_delta, seconds);
    row.drops_per_s = PerSecond(row.drops_delta, seconds);
    row.mb_per_s = PerSecond(row.bytes_delta, seconds) / 1e6;
    rows.push_back(row);
  }
  // Sorted by lag, then by name.
  std::stable_sort(rows.begin(), rows.end(), [](const TopicRow& a, const TopicRow& b) {
    if (a.topic->depth != b.topic->depth) return a.topic->depth > b.topic->depth;
    return a.topic->name < b.topic->name;
  });
  return rows;
}

// What one producer or consumer did between the snapshots (0 for one the
// earlier snapshot did not have).
struct PartRates {
  uint64_t published_delta = 0;  // a producer's batches
  uint64_t bytes_delta = 0;      // a producer's bodies published, a consumer's read
  double batches_per_s = 0;
  double mb_per_s = 0;  // 10^6 bytes per second
};

const client::TopicStatus* FindTopic(const Snapshot& s, const std::string& name) {
  for (const auto& t : s.topics) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

PartRates ProducerRates(const Snapshot& before, const Snapshot& now, const std::string& topic,
                        const client::TopicProducerStatus& producer) {
  PartRates r;
  if (const auto* t = FindTopic(before, topic); t != nullptr) {
    for (const auto& p : t->producer_list) {
      if (p.id != producer.id) continue;
      r.published_delta = Delta(producer.published, p.published);
      r.bytes_delta = Delta(producer.published_bytes, p.published_bytes);
    }
  }
  const double seconds = std::chrono::duration<double>(now.at - before.at).count();
  r.batches_per_s = PerSecond(r.published_delta, seconds);
  r.mb_per_s = PerSecond(r.bytes_delta, seconds) / 1e6;
  return r;
}

PartRates ConsumerRates(const Snapshot& before, const Snapshot& now, const std::string& topic,
                        const client::TopicConsumerStatus& consumer) {
  PartRates r;
  if (const auto* t = FindTopic(before, topic); t != nullptr) {
    for (const auto& c : t->consumer_list) {
      if (c.id == consumer.id) r.bytes_delta = Delta(consumer.read_bytes, c.read_bytes);
    }
  }
  const double seconds = std::chrono::duration<double>(now.at - before.at).count();
  r.mb_per_s = PerSecond(r.bytes_delta, seconds) / 1e6;
  return r;
}

// As the Python binding and ConsumerOptions say it; "-" if not said.
const char* WaitModeName(const std::optional<shm::WaitMode>& mode) {
  if (!mode) return "-";
  switch (*mode) {
    case shm::WaitMode::kBusyPoll:
      return "spin";
    case shm::WaitMode::kBlock:
      return "block";
    case shm::WaitMode::kSpinThenBlock:
      return "spin-then-block";
  }
  return "-";
}

const char* PolicyName(shm::SlowConsumerPolicy policy) {
  return policy == shm::SlowConsumerPolicy::kDropOldest ? "drop-oldest" : "block-producer";
}

std::string Fixed(double value, int decimals) {
  char text[64];
  (void)std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string Bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t u = 0;
  while (u + 1 < std::size(kUnits) && bytes >= 1024) {
    bytes /= 1024;
    ++u;
  }
  return Fixed(bytes, u == 0 ? 0 : 1) + " " + kUnits[u];
}

nlohmann::ordered_json ToJson(const Snapshot& before, const Snapshot& now) {
  nlohmann::ordered_json doc;
  const auto& b = now.broker;
  doc["interval_s"] = std::chrono::duration<double>(now.at - before.at).count();
  doc["broker"] = {{"name", b.name},
                   {"pid", b.pid},
                   {"uptime_ms", b.uptime_ms},
                   {"connections", b.connections},
                   {"topics", b.topics},
                   {"producers", b.producers},
                   {"consumers", b.consumers},
                   {"segments", b.segments},
                   {"shm_in_use_bytes", b.reserved_bytes},
                   {"shm_limit_bytes", b.shm_limit},
                   {"shm_free_bytes", b.shm_free},
                   {"shm_total_bytes", b.shm_total},
                   {"rejected_frames", b.rejected_frames}};
  auto topics = nlohmann::ordered_json::array();
  for (const auto& row : Rows(before, now)) {
    const auto& t = *row.topic;
    topics.push_back({{"name", t.name},
                      {"kind", client::TopicKindName(t.kind)},
                      {"policy", PolicyName(t.policy)},
                      {"producers", t.producers},
                      {"consumers", t.consumers},
                      {"published", t.published},
                      {"published_in_interval", row.published_delta},
                      {"batches_per_s", row.batches_per_s},
                      {"published_bytes", t.published_bytes},
                      {"published_bytes_in_interval", row.bytes_delta},
                      {"mb_per_s", row.mb_per_s},
                      {"publish_timestamps", t.publish_timestamps},
                      {"depth", t.depth},
                      {"drops", t.drops},
                      {"drops_in_interval", row.drops_delta},
                      {"drops_per_s", row.drops_per_s},
                      {"held", t.held},
                      {"slot_count", t.slot_count},
                      {"arena_bytes", t.arena_bytes},
                      // The previous release's keys, deprecated (deprecated_keys).
                      {"ring_slots", t.slot_count},
                      {"segment_bytes", t.arena_bytes}});
    auto producer_list = nlohmann::ordered_json::array();
    for (const auto& p : t.producer_list) {
      const PartRates r = ProducerRates(before, now, t.name, p);
      producer_list.push_back({{"id", p.id},
                               {"pid", p.pid},
                               {"uid", p.uid},
                               {"published", p.published},
                               {"published_in_interval", r.published_delta},
                               {"batches_per_s", r.batches_per_s},
                               {"published_bytes", p.published_bytes},
                               {"published_bytes_in_interval", r.bytes_delta},
                               {"mb_per_s", r.mb_per_s},
                               {"depth", p.depth},
                               {"drops", p.drops},
                               {"held", p.held},
                               {"arena_bytes", p.arena_bytes},
                               {"fixed_block_bytes", p.fixed_block_bytes},
                               {"fixed_block_count", p.fixed_block_count},
                               {"shm_bytes", p.shm_bytes}});
    }
    auto consumer_list = nlohmann::ordered_json::array();
    for (const auto& c : t.consumer_list) {
      const PartRates r = ConsumerRates(before, now, t.name, c);
      consumer_list.push_back({{"id", c.id},
                               {"pid", c.pid},
                               {"uid", c.uid},
                               {"wait_mode", WaitModeName(c.wait_mode)},
                               {"reported", c.reported},
                               {"lag", c.lag},
                               {"drops", c.drops},
                               {"held_blocks", c.held_blocks},
                               {"held_bytes", c.held_bytes},
                               {"read_bytes", c.read_bytes},
                               {"read_bytes_in_interval", r.bytes_delta},
                               {"mb_per_s", r.mb_per_s}});
    }
    topics.back()["producer_list"] = std::move(producer_list);
    topics.back()["consumer_list"] = std::move(consumer_list);
  }
  doc["topics"] = std::move(topics);
  // Old key -> new key, for one release (docs/BROKER.md).
  doc["deprecated_keys"] = {{"ring_slots", "slot_count"}, {"segment_bytes", "arena_bytes"}};
  auto awaited = nlohmann::ordered_json::array();
  for (const auto& a : now.awaited)
    awaited.push_back({{"name", a.name}, {"consumers", a.consumers}});
  doc["awaited"] = std::move(awaited);
  return doc;
}

// ---- the full-screen view ----------------------------------------------------------

constexpr int kMinColumns = 80;
constexpr int kMinRows = 8;

std::atomic<bool> g_quit{false};
void OnQuitSignal(int /*sig*/) { g_quit.store(true); }

// The terminal in raw mode on the alternate screen; restored on scope exit.
class Screen {
 public:
  static Result<std::unique_ptr<Screen>> Open() {
    if (::isatty(STDIN_FILENO) == 0 || ::isatty(STDOUT_FILENO) == 0) {
      return Status::Invalid(
          "the full-screen view needs a terminal; for scripts: alkaid top --once --json");
    }
    std::unique_ptr<Screen> screen(new Screen());
    ALKAID_RETURN_NOT_OK(screen->CheckSize());
    if (::tcgetattr(STDIN_FILENO, &screen->saved_) != 0) {
      return Status::FromErrno(errno, "cannot read the terminal's settings");
    }
    termios raw = screen->saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    (void)::tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    screen->raw_ = true;
    std::cout << "\x1b[?1049h\x1b[?25l" << std::flush;  // alternate screen, no cursor
    return screen;
  }
  ~Screen() {
    std::cout << "\x1b[?25h\x1b[?1049l" << std::flush;
    if (raw_) (void)::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  int columns() const { return columns_; }
  int rows() const { return rows_; }

  // Re-reads the size (a resize); Invalid if below the minimum.
  Status CheckSize() {
    winsize ws{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0) {
      return Status::Invalid("cannot read the terminal's size");
    }
    columns_ = ws.ws_col;
    rows_ = ws.ws_row;
    if (columns_ < kMinColumns || rows_ < kMinRows) {
      return Status::Invalid("the terminal is ", columns_, "x", rows_,
                             "; alkaid top needs at least ", kMinColumns, "x", kMinRows,
                             " (or use --once --json)");
    }
    return Status::OK();
  }

 private:
  Screen() = default;
  termios saved_{};
  bool raw_ = false;
  int columns_ = 0;
  int rows_ = 0;
};

enum class Key { kNone, kQuit, kUp, kDown, kEnter, kRight, kLeft };

// Keys pressed within `timeout` (the first one only; arrows are ESC [ A-D).
Key ReadKey(std::chrono::milliseconds timeout) {
  pollfd pfd{STDIN_FILENO, POLLIN, 0};
  if (::poll(&pfd, 1, static_cast<int>(timeout.count())) <= 0) return Key::kNone;
  char buf[16];
  const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
  if (n <= 0) return Key::kNone;
  if (buf[0] == 'q' || buf[0] == 'Q') return Key::kQuit;
  if (buf[0] == '\n' || buf[0] == '\r' || buf[0] == ' ') return Key::kEnter;
  if (buf[0] == 'k') return Key::kUp;
  if (buf[0] == 'j') return Key::kDown;
  if (n >= 3 && buf[0] == '\x1b' && buf[1] == '[') {
    if (buf[2] == 'A') return Key::kUp;
    if (buf[2] == 'B') return Key::kDown;
    if (buf[2] == 'C') return Key::kRight;
    if (buf[2] == 'D') return Key::kLeft;
  }
  return Key::kNone;
}

std::string Pad(std::string text, size_t width, bool right) {
  if (text.size() > width) text.resize(width);
  const std::string fill(width - text.size(), ' ');
  return right ? fill + text : text + fill;
}

// The expanded topic's producers and consumers, one line each: what the
// broker knows of them (pid, uid; a consumer's wait mode) and what the
// producers last reported (a consumer's figures are its producers' view of it).
void AppendParticipants(const Snapshot& before, const Snapshot& now, const client::TopicStatus& t,
                        std::vector<std::string>* lines) {
  lines->push_back("      " + Pad("PRODUCER", 8, false) + Pad("PID", 8, true) +
                   Pad("UID", 7, true) + Pad("BATCH/S", 9, true) + Pad("MB/S", 8, true) +
                   Pad("PUBLISHED", 11, true) + Pad("LAG", 8, true) + Pad("HELD", 7, true) +
                   "  ARENA");
  for (const auto& p : t.producer_list) {
    const PartRates r = ProducerRates(before, now, t.name, p);
    lines->push_back(
        "      " + Pad("p" + std::to_string(p.id), 8, false) + Pad(std::to_string(p.pid), 8, true) +
        Pad(std::to_string(p.uid), 7, true) + Pad(Fixed(r.batches_per_s, 1), 9, true) +
        Pad(Fixed(r.mb_per_s, 2), 8, true) + Pad(std::to_string(p.published), 11, true) +
        Pad(std::to_string(p.depth), 8, true) + Pad(std::to_string(p.held), 7, true) + "  " +
        Bytes(static_cast<double>(p.arena_bytes)) +
        (p.fixed_block_count == 0 ? std::string()
                                  : " + " + std::to_string(p.fixed_block_count) + " fixed x " +
                                        Bytes(static_cast<double>(p.fixed_block_bytes))));
  }
  lines->push_back("      " + Pad("CONSUMER", 8, false) + Pad("PID", 8, true) +
                   Pad("UID", 6, true) + Pad("MB/S", 8, true) + Pad("LAG", 9, true) +
                   Pad("DROPS", 8, true) + Pad("HELD", 7, true) + Pad("HELD B", 10, true) +
                   "  WAIT");
  for (const auto& c : t.consumer_list) {
    const std::string unreported = "-";
    const PartRates r = ConsumerRates(before, now, t.name, c);
    lines->push_back(
        "      " + Pad("c" + std::to_string(c.id), 8, false) + Pad(std::to_string(c.pid), 8, true) +
        Pad(std::to_string(c.uid), 6, true) +
        Pad(c.reported ? Fixed(r.mb_per_s, 2) : unreported, 8, true) +
        Pad(c.reported ? std::to_string(c.lag) : unreported, 9, true) +
        Pad(c.reported ? std::to_string(c.drops) : unreported, 8, true) +
        Pad(c.reported ? std::to_string(c.held_blocks) : unreported, 7, true) +
        Pad(c.reported ? Bytes(static_cast<double>(c.held_bytes)) : unreported, 10, true) + "  " +
        WaitModeName(c.wait_mode));
  }
}

// The screen as lines (at most `rows`, each at most `columns` wide).
std::vector<std::string> Render(const Snapshot& before, const Snapshot& now, size_t selected,
                                bool expanded, int columns, int rows) {
  std::vector<std::string> lines;
  const auto& b = now.broker;
  lines.push_back("alkaid top  broker '" + b.name + "' pid " + std::to_string(b.pid) + "  up " +
                  std::to_string(b.uptime_ms / 1000) + " s  clients " +
                  std::to_string(b.connections) + "  producers " + std::to_string(b.producers) +
                  "  consumers " + std::to_string(b.consumers));
  lines.push_back("shm " + Bytes(static_cast<double>(b.reserved_bytes)) + " in use" +
                  (b.shm_limit != 0 ? " of " + Bytes(static_cast<double>(b.shm_limit)) : "") +
                  "  /dev/shm free " + Bytes(static_cast<double>(b.shm_free)) +
                  "   q: quit  arrows: select, expand");
  lines.push_back("");
  lines.push_back("  " + Pad("TOPIC", 24, false) + Pad("PROD", 5, true) + Pad("CONS", 5, true) +
                  Pad("BATCH/S", 10, true) + Pad("MB/S", 8, true) + Pad("PUBLISHED", 11, true) +
                  Pad("LAG", 8, true) + Pad("DROPS", 8, true) + Pad("HELD", 7, true) + "  POLICY");
  const auto table = Rows(before, now);
  for (size_t i = 0; i < table.size(); ++i) {
    const auto& row = table[i];
    const auto& t = *row.topic;
    const bool on = i == selected;
    std::string line =
        (on ? "> " : "  ") + Pad(t.name, 24, false) + Pad(std::to_string(t.producers), 5, true) +
        Pad(std::to_string(t.consumers), 5, true) + Pad(Fixed(row.batches_per_s, 1), 10, true) +
        Pad(Fixed(row.mb_per_s, 2), 8, true) + Pad(std::to_string(t.published), 11, true) +
        Pad(std::to_string(t.depth), 8, true) + Pad(std::to_string(t.drops), 8, true) +
        Pad(std::to_string(t.held), 7, true) + "  " + PolicyName(t.policy);
    lines.push_back(std::move(line));
    if (on && expanded) {
      lines.push_back("      kind " + std::string(client::TopicKindName(t.kind)) + ", " +
                      std::to_string(t.slot_count) + " slots, arena " +
                      Bytes(static_cast<double>(t.arena_bytes)) + " per producer, drops " +
                      Fixed(row.drops_per_s, 1) + "/s, " +
                      std::to_string(t.schema ? t.schema->num_fields() : 0) + " columns");
      AppendParticipants(before, now, t, &lines);
    }
  }
  for (const auto& a : now.awaited) {
    lines.push_back("  " + Pad(a.name, 24, false) + Pad("0", 5, true) +
                    Pad(std::to_string(a.consumers), 5, true) + "   (waiting to be created)");
  }
  if (table.empty() && now.awaited.empty()) lines.push_back("  (no topics)");
  for (auto& line : lines) {
    if (line.size() > static_cast<size_t>(columns)) line.resize(static_cast<size_t>(columns));
  }
  if (lines.size() > static_cast<size_t>(rows)) lines.resize(static_cast<size_t>(rows));
  return lines;
}

int RunTopScreen(client::BrokerClient& broker, const TopOptions& options) {
  auto opened = Screen::Open();
  if (!opened.ok()) return ReportError("top", opened.status());
  std::unique_ptr<Screen> screen = std::move(*opened);
  struct sigaction sa {};
  sa.sa_handler = OnQuitSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  const auto interval = std::chrono::milliseconds(std::llround(options.interval_seconds * 1000));
  auto before = Take(broker);
  if (!before.ok()) return ReportError("top", before.status());
  Snapshot previous = std::move(*before);
  Snapshot current = previous;
  size_t selected = 0;
  bool expanded = false;
  auto next = Clock::now();
  while (!g_quit.load()) {
    if (Clock::now() >= next) {
      auto snap = Take(broker);
      if (!snap.ok()) {
        screen.reset();
        return ReportError("top", snap.status());
      }
      previous = std::move(current);
      current = std::move(*snap);
      next = Clock::now() + interval;
    }
    const Status size = screen->CheckSize();
    if (!size.ok()) {
      screen.reset();
      return ReportError("top", size);
    }
    const size_t count = current.topics.size();
    if (count > 0 && selected >= count) selected = count - 1;
    std::ostringstream out;
    out << "\x1b[H\x1b[2J";
    const auto lines =
        Render(previous, current, selected, expanded, screen->columns(), screen->rows());
    for (size_t i = 0; i < lines.size(); ++i) {
      out << lines[i] << (i + 1 < lines.size() ? "\r\n" : "");
    }
    std::cout << out.str() << std::flush;
    const auto wait =
        std::max(std::chrono::milliseconds(1),
                 std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()));
    switch (ReadKey(wait)) {
      case Key::kQuit:
        g_quit.store(true);
        break;
      case Key::kUp:
        if (selected > 0) --selected;
        break;
      case Key::kDown:
        if (selected + 1 < count) ++selected;
        break;
      case Key::kEnter:
        expanded = !expanded;
        break;
      case Key::kRight:
        expanded = true;
        break;
      case Key::kLeft:
        expanded = false;
        break;
      case Key::kNone:
        break;
    }
  }
  return kExitOk;
}

}  // namespace

int RunTop(const TopOptions& options) {
  auto broker = client::BrokerClient::Connect(options.socket);
  if (!broker.ok()) return ReportError("top", broker.status());
  if (!options.once) return RunTopScreen(**broker, options);
  auto before = Take(**broker);
  if (!before.ok()) return ReportError("top", before.status());
  std::this_thread::sleep_for(
      std::chrono::milliseconds(std::llround(options.interval_seconds * 1000)));
  auto now = Take(**broker);
  if (!now.ok()) return ReportError("top", now.status());
  if (options.json) {
    std::cout << ToJson(*before, *now)
                     .dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
              << "\n";
    return kExitOk;
  }
  for (const auto& line : Render(*before, *now, static_cast<size_t>(-1), false, 1 << 20, 1 << 20)) {
    std::cout << line << "\n";
  }
  return kExitOk;
}

// ---- hz ------------------------------------------------------------------------------

namespace {

// Bytes of the buffers a batch references (a dictionary counted once per
// column that points at it).
int64_t BufferBytes(const format::ArrayData& data) {
  int64_t total = 0;
  for (const auto& buffer : data.buffers) {
    if (buffer != nullptr) total += buffer->size();
  }
  for (const auto& child : data.child_data) total += BufferBytes(*child);
  if (data.dictionary != nullptr) total += BufferBytes(*data.dictionary);
  return total;
}

int64_t RealtimeNs() {
  timespec ts{};
  (void)::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A duration in the unit that suits it: "850 ns", "41.2 us", "12.3 ms", "1.20 s".
std::string Duration(int64_t ns) {
  const double v = static_cast<double>(ns);
  if (ns > -1000 && ns < 1000) return std::to_string(ns) + " ns";
  if (ns > -1000000 && ns < 1000000) return Fixed(v / 1e3, 1) + " us";
  if (ns > -1000000000 && ns < 1000000000) return Fixed(v / 1e6, 1) + " ms";
  return Fixed(v / 1e9, 2) + " s";
}

// "latency p50 .., p90 .., p99 .., max ..": publish-to-receive over the
// window's batches (the element of rank floor(q * n) of the sorted
// samples, as measure::Quantile).
std::string LatencyPercentiles(std::vector<int64_t>* samples) {
  std::sort(samples->begin(), samples->end());
  const auto at = [&](double q) {
    const auto rank = static_cast<size_t>(q * static_cast<double>(samples->size()));
    return (*samples)[std::min(samples->size() - 1, rank)];
  };
  return "latency p50 " + Duration(at(0.50)) + ", p90 " + Duration(at(0.90)) + ", p99 " +
         Duration(at(0.99)) + ", max " + Duration(samples->back());
}

}  // namespace

int RunHz(const HzOptions& options) {
  std::atomic<bool>& quit = g_quit;
  struct sigaction sa {};
  sa.sa_handler = OnQuitSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  client::ConsumerOptions co;
  co.socket_path = options.socket;
  co.kind = std::nullopt;
  co.wait_for_topic = std::chrono::milliseconds::max();
  auto consumer = client::Consumer::Open(options.topic, co);
  if (!consumer.ok()) return ReportError("hz", consumer.status());
  const bool stamped = (*consumer)->publish_timestamps();
  if (!stamped) {
    std::cout << "'" << options.topic
              << "': publish times: not stamped (create the topic with --timestamps)\n"
              << std::flush;
  }
  // Publish-to-receive latency of each batch of the window (stamped topics).
  std::vector<int64_t> latencies;
  const auto window = std::chrono::milliseconds(std::llround(options.window_seconds * 1000));
  int64_t windows = 0;
  uint64_t lost_before = 0;
  while (!quit.load() && (options.windows < 0 || windows < options.windows)) {
    const auto start = Clock::now();
    const auto end = start + window;
    int64_t batches = 0;
    int64_t rows = 0;
    int64_t bytes = 0;
    latencies.clear();
    bool ended = false;
    while (!quit.load()) {
      const auto now = Clock::now();
      if (now >= end) break;
      client::BatchOrigin origin;
      auto batch = (*consumer)->Next(
          std::min<Clock::duration>(end - now, std::chrono::milliseconds(100)), &origin);
      const int64_t receive_ns = RealtimeNs();
      if (!batch.ok()) {
        if (batch.status().IsTimedOut()) continue;
        if (batch.status().code() == StatusCode::kEndOfStream) {
          ended = true;
          break;
        }
        std::cerr << "alkaid hz: " << batch.status().message() << "\n";
        continue;
      }
      ++batches;
      // A producer of an earlier release does not stamp (0).
      if (stamped && origin.publish_ns != 0) {
        latencies.push_back(receive_ns - static_cast<int64_t>(origin.publish_ns));
      }
      rows += (*batch)->num_rows();
      for (const auto& column : (*batch)->columns()) bytes += BufferBytes(*column);
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const uint64_t lost = (*consumer)->lost() - lost_before;
    lost_before = (*consumer)->lost();
    std::cout << "'" << options.topic << "': " << Fixed(batches / seconds, 1) << " batches/s, "
              << Fixed(rows / seconds, 1) << " rows/s, " << Bytes(bytes / seconds) << "/s";
    if (batches > 0) {
      std::cout << "; per batch " << Fixed(static_cast<double>(rows) / batches, 1) << " rows, "
                << Bytes(static_cast<double>(bytes) / batches);
    }
    if (!latencies.empty()) std::cout << "; " << LatencyPercentiles(&latencies);
    std::cout << "; " << batches << " batches in " << Fixed(seconds, 2) << " s";
    if (lost > 0) std::cout << ", " << lost << " lost";
    std::cout << "\n" << std::flush;
    ++windows;
    if (ended) break;
  }
  (void)(*consumer)->Close();
  return kExitOk;
}

}  // namespace alkaid::tools
