#pragma once

// The broker's log lines: "<time> alkaid-broker[<name>] <level>: <text>" on
// stderr, at or above a level.

#include <cstdio>
#include <ctime>
#include <sstream>
#include <string>
#include <utility>

#include "daemon/broker.h"

namespace alkaid::broker::internal {

class Logger {
 public:
  Logger(std::string name, LogLevel level) : name_(std::move(name)), level_(level) {}

  template <typename... Args>
  void operator()(LogLevel level, Args&&... args) const {
    if (level > level_) return;
    static const char* kNames[] = {"error", "warn", "info", "debug"};
    std::ostringstream line;
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::localtime_r(&now, &tm);
    char stamp[32];
    if (std::strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm) == 0) stamp[0] = '\0';
    line << stamp << " alkaid-broker[" << name_ << "] " << kNames[static_cast<int>(level)] << ": ";
    (line << ... << std::forward<Args>(args));
    line << '\n';
    const std::string text = line.str();
    (void)std::fwrite(text.data(), 1, text.size(), stderr);  // nowhere to report a failure
    (void)std::fflush(stderr);
  }

 private:
  std::string name_;
  LogLevel level_;
};

}  // namespace alkaid::broker::internal
