// Segments left by an earlier broker of this name (broker_internal.h).

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "alkaid/common/process.h"
#include "alkaid/shm/channel.h"
#include "daemon/broker_internal.h"
#include "daemon/segment_names.h"

namespace alkaid::broker {

using internal::ParseSegmentName;

void Broker::Impl::ScanLeftovers() {
  DIR* dir = ::opendir(options.shm_dir.c_str());
  if (dir == nullptr) {
    Log(LogLevel::kWarn, "cannot list ", options.shm_dir, ": ", ErrnoMessage(errno));
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
  std::map<std::string, Leftover> channels;  // by stem
  for (const auto& n : names) {
    uint32_t pid = 0;
    std::string stem;
    bool is_channel = false;
    if (ParseSegmentName(options.name, n, &stem, &pid, &is_channel) &&
        !::alkaid::ProcessIsGone(pid)) {
      Leftover& l = channels[stem];
      l.pid = pid;
      if (is_channel) l.channel = n;
      continue;
    }
    RemoveLeftover(n);
  }
  const auto now = Clock::now();
  for (auto& [stem, l] : channels) {
    if (l.channel.empty()) {
      // Without its channel the rest is useless (a registry, consumer
      // segments, extensions).
      for (const auto& n : names) {
        if (n.compare(0, stem.size() + 1, stem + ".") == 0) RemoveLeftover(n);
      }
      continue;
    }
    l.since = now;
    Log(LogLevel::kInfo, "keeping segments ", stem, ".* of live pid ", l.pid, " for re-adoption");
    std::string key = l.channel;
    adoptable.emplace(std::move(key), std::move(l));
  }
}

void Broker::Impl::RemoveChannelNames(const std::string& channel) {
  const Status st = shm::RemoveChannel(channel);
  if (st.ok()) {
    Log(LogLevel::kInfo, "removed channel ", channel, " and its registry");
  } else if (st.code() != StatusCode::kKeyError) {
    Log(LogLevel::kWarn, "removing channel ", channel, ": ", st.message());
  }
}

void Broker::Impl::RemoveLeftover(const std::string& n) {
  const std::string path = options.shm_dir + "/" + n;
  if (::unlink(path.c_str()) == 0) {
    Log(LogLevel::kInfo, "removed leftover segment ", n);
  } else if (errno != ENOENT) {
    Log(LogLevel::kWarn, "cannot remove leftover segment ", n, ": ", ErrnoMessage(errno));
  }
}

void Broker::Impl::ExpireAdoptable(bool all) {
  const auto now = Clock::now();
  for (auto it = adoptable.begin(); it != adoptable.end();) {
    const Leftover& l = it->second;
    const bool gone = ::alkaid::ProcessIsGone(l.pid);
    if (all || gone || now - l.since >= options.adopt_timeout) {
      Log(LogLevel::kInfo, "segments of pid ", l.pid, " not re-adopted (",
          all    ? "broker stopping"
          : gone ? "process gone"
                 : "no re-registration in time",
          ")");
      RemoveChannelNames(l.channel);
      it = adoptable.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace alkaid::broker
