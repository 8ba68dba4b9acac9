#pragma once

/// \file
/// How a measurement program reads sizes and writes times, sizes and the
/// memory it looks at: the units of its command line and of its tables.

#include <cstdint>
#include <string>
#include <vector>

namespace alkaid::measure {

/// The non-empty items of a comma-separated list.
std::vector<std::string> SplitCommas(const std::string& text);

/// "64", "4096", "64K", "1M", "16M", "1G" (binary units; "KiB", "B" too);
/// false if `text` is none of these.
bool ParseSize(const std::string& text, int64_t* out);

/// "35 ns", "1.20 us", "4.00 ms", "2.50 s".
std::string FormatNs(double ns);
/// A difference: "+1.20 us", "-35 ns".
std::string FormatSignedNs(int64_t ns);
/// "64 B", "4 KiB", "16 MiB" (bytes when not a whole KiB).
std::string FormatBytes(int64_t bytes);

/// Resident bytes of process `pid` (/proc/PID/statm; 0 if unknown).
int64_t ResidentBytes(int pid);
/// Bytes allocated to the /dev/shm objects whose names start with `prefix`
/// (0 for an empty prefix).
int64_t SegmentBytes(const std::string& prefix);

}  // namespace alkaid::measure
