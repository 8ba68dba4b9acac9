#include "daemon/segment_names.h"

#include <string_view>
#include <vector>

namespace alkaid::broker::internal {

std::string ProducerSegmentStem(const std::string& instance, uint32_t pid, uint64_t id) {
  return instance + "." + std::to_string(pid) + ".p" + std::to_string(id);
}

bool ParseSegmentName(const std::string& broker_name, const std::string& name, std::string* stem,
                      uint32_t* pid, bool* is_channel) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (parts.size() < 5 || parts[0] != broker_name) return false;
  // parts[4]: kChannelSuffix or kLegacyChannelSuffix without the dot.
  if (parts[4] != "channel" && parts[4] != "ring") return false;
  if (parts[3].size() < 2 || parts[3][0] != 'p') return false;
  if (parts[2].empty() || parts[2].size() > 10) return false;
  uint64_t value = 0;
  for (char ch : parts[2]) {
    if (ch < '0' || ch > '9') return false;
    value = value * 10 + static_cast<uint64_t>(ch - '0');
  }
  if (value == 0 || value > 0x7fffffff) return false;
  *pid = static_cast<uint32_t>(value);
  *is_channel = parts.size() == 5;
  *stem = parts[0] + "." + parts[1] + "." + parts[2] + "." + parts[3];
  return true;
}

bool IsExtensionName(const std::string& name) {
  const std::size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0) return false;
  const std::string_view last = std::string_view(name).substr(dot + 1);
  if (last.size() < 2 || last.size() > 11 || last[0] != 'x' || last[1] == '0') return false;
  for (char ch : last.substr(1)) {
    if (ch < '0' || ch > '9') return false;
  }
  const std::size_t before = name.rfind('.', dot - 1);
  if (before == std::string::npos) return false;
  const std::string_view owner = std::string_view(name).substr(before, dot - before);
  return owner == kChannelSuffix || owner == kLegacyChannelSuffix;
}

}  // namespace alkaid::broker::internal
