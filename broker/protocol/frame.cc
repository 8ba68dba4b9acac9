#include "protocol/frame.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace alkaid::broker::protocol {

void FrameAssembler::Append(std::span<const uint8_t> bytes) {
  // Compact once the consumed prefix dominates, so the buffer stays small.
  if (start_ > 0 && start_ >= data_.size() / 2) {
    data_.erase(data_.begin(), data_.begin() + static_cast<std::ptrdiff_t>(start_));
    start_ = 0;
  }
  data_.insert(data_.end(), bytes.begin(), bytes.end());
}

Result<std::optional<std::vector<uint8_t>>> FrameAssembler::Next() {
  const std::size_t have = data_.size() - start_;
  if (have < 4) return std::optional<std::vector<uint8_t>>();
  const uint8_t* p = data_.data() + start_;
  const uint32_t length =
      uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
  if (length == 0) return Status::Invalid("control frame: zero length prefix");
  if (length > max_frame_) {
    return Status::Invalid("control frame: length prefix ", length, " exceeds the maximum of ",
                           max_frame_, " bytes");
  }
  if (have - 4 < length) return std::optional<std::vector<uint8_t>>();
  std::vector<uint8_t> frame(p + 4, p + 4 + length);
  start_ += 4 + std::size_t{length};
  if (start_ == data_.size()) {
    data_.clear();
    start_ = 0;
  }
  return std::optional<std::vector<uint8_t>>(std::move(frame));
}

std::vector<uint8_t> Frame(std::span<const uint8_t> message) {
  std::vector<uint8_t> out(4 + message.size());
  const auto n = static_cast<uint32_t>(message.size());
  out[0] = static_cast<uint8_t>(n);
  out[1] = static_cast<uint8_t>(n >> 8);
  out[2] = static_cast<uint8_t>(n >> 16);
  out[3] = static_cast<uint8_t>(n >> 24);
  if (!message.empty()) std::memcpy(out.data() + 4, message.data(), message.size());
  return out;
}

Status WriteAll(int fd, std::span<const uint8_t> bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pfd{fd, POLLOUT, 0};
      if (::poll(&pfd, 1, 1000) < 0 && errno != EINTR) {
        return Status::FromErrno(errno, "control socket: poll for writing");
      }
      continue;
    }
    return Status::FromErrno(errno, "control socket: send");
  }
  return Status::OK();
}

Result<std::optional<std::vector<uint8_t>>> TryReadFrame(int fd, FrameAssembler* assembler,
                                                         std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  uint8_t chunk[4096];
  while (true) {
    ALKAID_ASSIGN_OR_RAISE(auto frame, assembler->Next());
    if (frame.has_value()) return frame;
    int wait_ms = -1;
    if (timeout.count() >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      wait_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    // Polls at least once, so a zero timeout still picks up what arrived.
    pollfd pfd{fd, POLLIN, 0};
    const int r = ::poll(&pfd, 1, wait_ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "control socket: poll");
    }
    if (r == 0) {
      if (wait_ms >= 0) return std::optional<std::vector<uint8_t>>();
      continue;
    }
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n == 0) return Status::IOError("control socket: connection closed by the broker");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return Status::FromErrno(errno, "control socket: recv");
    }
    assembler->Append({chunk, static_cast<std::size_t>(n)});
  }
}

Result<std::vector<uint8_t>> ReadFrame(int fd, FrameAssembler* assembler,
                                       std::chrono::milliseconds timeout) {
  ALKAID_ASSIGN_OR_RAISE(auto frame, TryReadFrame(fd, assembler, timeout));
  if (!frame.has_value()) return Status::TimedOut("nothing from the broker in time");
  return std::move(*frame);
}

}  // namespace alkaid::broker::protocol
