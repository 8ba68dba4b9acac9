// Units of a measurement program's command line and tables, and the memory
// figures it samples.

#include "alkaid/measure/text.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace alkaid::measure {

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// "64", "4096", "64K", "1M", "16M" (binary units).
bool ParseSize(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 12) return false;
  int64_t value = std::stoll(text.substr(0, digits));
  const std::string unit = text.substr(digits);
  if (unit == "K" || unit == "k" || unit == "KiB") {
    value <<= 10;
  } else if (unit == "M" || unit == "MiB") {
    value <<= 20;
  } else if (unit == "G" || unit == "GiB") {
    value <<= 30;
  } else if (!unit.empty() && unit != "B") {
    return false;
  }
  *out = value;
  return true;
}

std::string FormatNs(double ns) {
  char text[32];
  if (ns < 1e3) {
    (void)std::snprintf(text, sizeof(text), "%.0f ns", ns);
  } else if (ns < 1e6) {
    (void)std::snprintf(text, sizeof(text), "%.2f us", ns / 1e3);
  } else if (ns < 1e9) {
    (void)std::snprintf(text, sizeof(text), "%.2f ms", ns / 1e6);
  } else {
    (void)std::snprintf(text, sizeof(text), "%.2f s", ns / 1e9);
  }
  return text;
}

// A difference: "+1.20 us", "-35 ns".
std::string FormatSignedNs(int64_t ns) {
  return (ns < 0 ? "-" : "+") + FormatNs(static_cast<double>(ns < 0 ? -ns : ns));
}

std::string FormatBytes(int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

int64_t ResidentBytes(int pid) {
  if (pid <= 0) return 0;
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/statm").c_str(), "r");
  if (f == nullptr) return 0;
  // statm: "size resident shared text lib data dt", in pages.
  char text[256] = {};
  const bool read = std::fgets(text, sizeof(text), f) != nullptr;
  (void)std::fclose(f);  // read-only: nothing to lose on close
  if (!read) return 0;
  char* end = nullptr;
  (void)std::strtoll(text, &end, 10);  // size: skipped
  if (end == text) return 0;
  const char* const second = end;
  const long long resident = std::strtoll(second, &end, 10);
  if (end == second) return 0;
  return resident * ::sysconf(_SC_PAGESIZE);
}

int64_t SegmentBytes(const std::string& prefix) {
  if (prefix.empty()) return 0;
  int64_t total = 0;
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return 0;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): readdir on a DIR stream of our own
  while (dirent* entry = ::readdir(dir)) {
    if (std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    struct stat st;
    if (::stat(("/dev/shm/" + std::string(entry->d_name)).c_str(), &st) == 0) {
      total += static_cast<int64_t>(st.st_blocks) * 512;
    }
  }
  ::closedir(dir);
  return total;
}

}  // namespace alkaid::measure
