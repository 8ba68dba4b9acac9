// Segments left by an earlier broker of this name (leftovers.h).

#include "daemon/leftovers.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <vector>

#include "alkaid/common/process.h"
#include "alkaid/shm/channel.h"
#include "daemon/segment_names.h"

namespace alkaid::broker::internal {

void RemoveChannelNames(const std::string& channel, const Logger& log,
                        shm::ChannelRemains* remains) {
  const Status st = shm::RemoveChannel(channel, remains);
  if (st.ok()) {
    log(LogLevel::kInfo, "removed channel ", channel, " and its registry");
  } else if (st.code() != StatusCode::kKeyError) {
    log(LogLevel::kWarn, "removing channel ", channel, ": ", st.message());
  }
}

void Leftovers::Scan() {
  DIR* dir = ::opendir(shm_dir_.c_str());
  if (dir == nullptr) {
    log_(LogLevel::kWarn, "cannot list ", shm_dir_, ": ", ErrnoMessage(errno));
    return;
  }
  const std::string prefix = broker_name_ + ".";
  std::vector<std::string> names;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): readdir on our own DIR stream is safe (glibc)
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view n(entry->d_name);
    if (n.size() > prefix.size() && n.substr(0, prefix.size()) == prefix) names.emplace_back(n);
  }
  ::closedir(dir);
  struct Found {
    std::string channel;
    uint32_t pid = 0;
  };
  std::map<std::string, Found> by_stem;
  const auto now = Clock::now();
  for (const auto& n : names) {
    uint32_t pid = 0;
    std::string stem;
    bool is_channel = false;
    if (ParseSegmentName(broker_name_, n, &stem, &pid, &is_channel)) {
      if (!::alkaid::ProcessIsGone(pid)) {
        Found& f = by_stem[stem];
        f.pid = pid;
        if (is_channel) f.channel = n;
        continue;
      }
      if (IsExtensionName(n)) {
        draining_.emplace(n, now);
        continue;
      }
    }
    Remove(n);
  }
  if (!draining_.empty()) {
    log_(LogLevel::kInfo, "keeping ", draining_.size(),
         " extension segments of dead producers for consumers still reading them, at most ",
         drain_timeout_.count(), " ms");
  }
  for (const auto& [stem, f] : by_stem) {
    if (f.channel.empty()) {
      // Without its channel the rest is useless (a registry, consumer
      // segments, extensions).
      for (const auto& n : names) {
        if (n.compare(0, stem.size() + 1, stem + ".") == 0) Remove(n);
      }
      continue;
    }
    log_(LogLevel::kInfo, "keeping segments ", stem, ".* of live pid ", f.pid, " for re-adoption");
    kept_.emplace(f.channel, Kept{f.pid, now});
  }
}

Status Leftovers::Claim(const std::string& channel, uint32_t pid) {
  auto it = kept_.find(channel);
  if (it == kept_.end()) {
    return Status::KeyError("channel '", channel, "' was not left by an earlier broker named '",
                            broker_name_, "' (or was removed since)");
  }
  if (it->second.pid != pid) {
    return Status::PermissionDenied("channel '", channel, "' belongs to pid ", it->second.pid,
                                    ", not to pid ", pid);
  }
  kept_.erase(it);
  return Status::OK();
}

void Leftovers::Remove(const std::string& n) const {
  const std::string path = shm_dir_ + "/" + n;
  if (::unlink(path.c_str()) == 0) {
    log_(LogLevel::kInfo, "removed leftover segment ", n);
  } else if (errno != ENOENT) {
    log_(LogLevel::kWarn, "cannot remove leftover segment ", n, ": ", ErrnoMessage(errno));
  }
}

void Leftovers::Expire(bool all) {
  const auto now = Clock::now();
  for (auto it = kept_.begin(); it != kept_.end();) {
    const Kept& k = it->second;
    const bool gone = ::alkaid::ProcessIsGone(k.pid);
    if (all || gone || now - k.since >= adopt_timeout_) {
      log_(LogLevel::kInfo, "segments of pid ", k.pid, " not re-adopted (",
           all    ? "broker stopping"
           : gone ? "process gone"
                  : "no re-registration in time",
           ")");
      shm::ChannelRemains remains;
      // A dead producer's consumers may still have to map its extensions.
      RemoveChannelNames(it->first, log_, gone && !all ? &remains : nullptr);
      for (uint32_t id : remains.extensions) {
        draining_.emplace(shm::ChannelExtensionName(it->first, id), now);
      }
      it = kept_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = draining_.begin(); it != draining_.end();) {
    if (all || now - it->second >= drain_timeout_) {
      Remove(it->first);
      it = draining_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace alkaid::broker::internal
