// A measurement's rows as a table and as JSON.

#include "alkaid/measure/report.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "alkaid/measure/text.h"

namespace alkaid::measure {

namespace {

const Measurement* Find(const std::vector<Measurement>& all, const std::string& transport,
                        int64_t size) {
  for (const auto& m : all) {
    if (m.transport == transport && m.payload_bytes == size) return &m;
  }
  return nullptr;
}

std::string Ns(int64_t ns) { return FormatNs(static_cast<double>(ns)); }

double MiB(int64_t bytes) { return static_cast<double>(bytes) / 1048576.0; }

nlohmann::ordered_json Row(const Measurement& m) {
  nlohmann::ordered_json r;
  r["transport"] = m.transport;
  if (!m.layer.empty()) r["layer"] = m.layer;
  r["mode"] = m.mode;
  if (!m.wait.empty()) r["wait"] = m.wait;
  r["pattern"] = m.pattern;
  if (!m.writer.empty()) r["writer"] = m.writer;
  if (m.transport == "alkaid") r["timestamps"] = m.timestamps;
  r["payload_bytes"] = m.payload_bytes;
  r["consumers"] = m.consumers;
  r["samples"] = m.summary.samples;
  // Percentiles: null where nothing was timed one by one (inproc).
  const auto ns = [&](int64_t v) { return m.histogram ? nlohmann::ordered_json(v) : nullptr; };
  r["p50_ns"] = ns(m.summary.p50_ns);
  r["p90_ns"] = ns(m.summary.p90_ns);
  r["p99_ns"] = ns(m.summary.p99_ns);
  r["p999_ns"] = ns(m.summary.p999_ns);
  r["max_ns"] = ns(m.summary.max_ns);
  r["mean_ns"] = m.summary.mean_ns;
  r["msgs_per_s"] = m.msgs_per_s;
  if (m.has_idle) {
    r["idle_cpu_ns"] = m.idle_cpu_ns;
    r["idle_wall_ns"] = m.idle_wall_ns;
  }
  if (!m.memory.empty()) {
    nlohmann::ordered_json memory = nlohmann::ordered_json::array();
    for (const auto& sample : m.memory) {
      memory.push_back({{"after_messages", sample.messages},
                        {"producer_rss_bytes", sample.producer_rss},
                        {"consumer_rss_bytes", sample.consumer_rss},
                        {"broker_rss_bytes", sample.broker_rss},
                        {"segments_bytes", sample.segments_bytes}});
    }
    r["memory"] = std::move(memory);
  }
  if (m.paired.pairs > 0) {
    r["paired"] = {{"pairs", m.paired.pairs},
                   {"p50_64B_ns", m.paired.p50_64_ns},
                   {"diff_p50_ns", m.paired.diff_p50_ns},
                   {"diff_lo_ns", m.paired.diff_lo_ns},
                   {"diff_hi_ns", m.paired.diff_hi_ns}};
  }
  return r;
}

}  // namespace

void PrintRows(std::ostream& out, const std::vector<Measurement>& all, int64_t size,
               const std::vector<std::string>& baselines) {
  char line[512];
  (void)std::snprintf(line, sizeof(line), "%-9s %10s %10s %10s %10s %10s %9s %12s", "transport",
                      "p50", "p90", "p99", "p99.9", "max", "samples", "msgs/s");
  out << line;
  for (const auto& b : baselines) {
    (void)std::snprintf(line, sizeof(line), " %11s %11s", ("p50/" + b).c_str(),
                        ("p99/" + b).c_str());
    out << line;
  }
  out << "\n";
  for (const auto& m : all) {
    if (m.payload_bytes != size) continue;
    const auto& s = m.summary;
    (void)std::snprintf(line, sizeof(line), "%-9s %10s %10s %10s %10s %10s %9llu %12.0f",
                        m.transport.c_str(), Ns(s.p50_ns).c_str(), Ns(s.p90_ns).c_str(),
                        Ns(s.p99_ns).c_str(), Ns(s.p999_ns).c_str(), Ns(s.max_ns).c_str(),
                        static_cast<unsigned long long>(s.samples), m.msgs_per_s);
    out << line;
    for (const auto& b : baselines) {
      const Measurement* base = Find(all, b, size);
      if (base == nullptr || base->summary.p50_ns <= 0 || base->summary.p99_ns <= 0) {
        (void)std::snprintf(line, sizeof(line), " %11s %11s", "-", "-");
      } else {
        (void)std::snprintf(
            line, sizeof(line), " %10.2fx %10.2fx",
            static_cast<double>(s.p50_ns) / static_cast<double>(base->summary.p50_ns),
            static_cast<double>(s.p99_ns) / static_cast<double>(base->summary.p99_ns));
      }
      out << line;
    }
    out << "\n";
  }
  const Measurement* alkaid = Find(all, "alkaid", size);
  if (alkaid != nullptr && alkaid->paired.pairs > 0) {
    const auto& p = alkaid->paired;
    out << "paired with 64 B (" << p.pairs << " pairs in the same processes): p50 "
        << Ns(alkaid->summary.p50_ns) << " against " << Ns(p.p50_64_ns) << "; difference ("
        << FormatBytes(size) << " - 64 B) median " << FormatSignedNs(p.diff_p50_ns)
        << ", 95% interval [" << FormatSignedNs(p.diff_lo_ns) << ", "
        << FormatSignedNs(p.diff_hi_ns) << "]\n";
  }
  // What alkaid adds to handing over the same body without it.
  const Measurement* body = Find(all, "body", size);
  if (alkaid != nullptr && body != nullptr && body->summary.samples > 0) {
    out << "overhead over body floor: "
        << FormatSignedNs(alkaid->summary.p50_ns - body->summary.p50_ns) << " (p50), "
        << FormatSignedNs(alkaid->summary.p99_ns - body->summary.p99_ns) << " (p99)\n";
  }
  for (const auto& m : all) {
    if (m.payload_bytes != size) continue;
    for (const auto& sample : m.memory) {
      (void)std::snprintf(line, sizeof(line),
                          "memory after %lld batches: RSS producer %.1f MiB, consumer %.1f MiB, "
                          "broker %.1f MiB; broker segments %.1f MiB in /dev/shm\n",
                          static_cast<long long>(sample.messages), MiB(sample.producer_rss),
                          MiB(sample.consumer_rss), MiB(sample.broker_rss),
                          MiB(sample.segments_bytes));
      out << line;
    }
    if (!m.has_idle || m.idle_wall_ns <= 0) continue;
    (void)std::snprintf(
        line, sizeof(line),
        "idle: the %s consumer used %.3f ms of CPU over %.0f ms without data (%.2f%% of "
        "a core)\n",
        m.mode.c_str(), static_cast<double>(m.idle_cpu_ns) / 1e6,
        static_cast<double>(m.idle_wall_ns) / 1e6,
        100.0 * static_cast<double>(m.idle_cpu_ns) / static_cast<double>(m.idle_wall_ns));
    out << line;
  }
  out.flush();
}

Status WriteJson(const std::string& path, const std::vector<Measurement>& all,
                 const std::vector<int>& cpus) {
  nlohmann::ordered_json doc;
  doc["results"] = nlohmann::ordered_json::array();
  for (const auto& m : all) doc["results"].push_back(Row(m));
  double load[3] = {0, 0, 0};
  (void)::getloadavg(load, 3);
  doc["host"] = {{"cpus_online", ::sysconf(_SC_NPROCESSORS_ONLN)},
                 {"pinned_cpus", cpus},
                 {"loadavg", {load[0], load[1], load[2]}}};
  const std::string text = doc.dump(2) + "\n";
  if (path == "-") {
    std::cout << text;
    std::cout.flush();
    return std::cout ? Status::OK() : Status::IOError("writing the JSON to stdout failed");
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file || !(file << text) || !file.flush()) {
    return Status::IOError("cannot write the JSON to '", path, "'");
  }
  return Status::OK();
}

}  // namespace alkaid::measure
