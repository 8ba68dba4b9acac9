#pragma once

/// \file
/// Length-prefixed framing on a stream socket: a little-endian uint32 byte
/// count, then that many bytes. Frames larger than kMaxFrameSize are refused
/// before anything is allocated for them.

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "alkaid/common/result.h"
#include "alkaid/common/status.h"

namespace alkaid::broker::protocol {

/// Largest frame either side accepts (a schema of 1 MiB plus headroom).
inline constexpr uint32_t kMaxFrameSize = (1u << 20) + (64u << 10);

/// Accumulates bytes read from a socket and cuts them into frames.
class FrameAssembler {
 public:
  explicit FrameAssembler(uint32_t max_frame = kMaxFrameSize) : max_frame_(max_frame) {}

  /// Appends bytes as they arrived.
  void Append(std::span<const uint8_t> bytes);

  /// The next complete frame's message (moved out, without its length
  /// prefix), nullopt if incomplete, Invalid if the announced length is 0
  /// or exceeds the maximum (the stream cannot be resynchronised: close the
  /// connection).
  Result<std::optional<std::vector<uint8_t>>> Next();

  /// Bytes buffered and not yet returned.
  std::size_t buffered() const { return data_.size() - start_; }

 private:
  uint32_t max_frame_;
  std::vector<uint8_t> data_;
  std::size_t start_ = 0;
};

/// Prepends the length prefix to `message`.
std::vector<uint8_t> Frame(std::span<const uint8_t> message);

/// Writes all of `bytes` to blocking or non-blocking socket `fd` (waiting
/// with poll for room), without SIGPIPE. IOError on failure.
Status WriteAll(int fd, std::span<const uint8_t> bytes);

/// Reads one frame from `fd`, waiting up to `timeout` (negative: forever).
/// TimedOut if nothing complete arrived in time, IOError("connection closed")
/// at end of stream, Invalid for a bad length.
Result<std::vector<uint8_t>> ReadFrame(int fd, FrameAssembler* assembler,
                                       std::chrono::milliseconds timeout);
/// As ReadFrame, but nothing in time is an empty optional rather than
/// TimedOut: a poll that finds nothing (a client's routine look at its
/// connection) builds no Status and allocates nothing.
Result<std::optional<std::vector<uint8_t>>> TryReadFrame(int fd, FrameAssembler* assembler,
                                                         std::chrono::milliseconds timeout);

}  // namespace alkaid::broker::protocol
