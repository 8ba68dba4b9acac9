#pragma once

// Private: doorbells, the pollable side of a channel's wake-up
// (docs/SHM_LAYOUT.md, "Doorbells"). A consumer that waits with poll/epoll
// instead of the futex makes a pipe and publishes the number of its write
// end in its segment; the producer opens that end through
// /proc/<consumer pid>/fd/<n> and writes a byte whenever it wakes the
// consumer. No name is created, so nothing is left behind.

#include <cstdint>

namespace alkaid::shm::internal {

/// The producer's end of one consumer's doorbell: opened on the first
/// sound, kept while the consumer keeps the same number, closed with it.
/// Producer thread only.
class DoorbellWriter {
 public:
  DoorbellWriter() = default;
  ~DoorbellWriter() { Close(); }
  DoorbellWriter(DoorbellWriter&& other) noexcept
      : fd_(other.fd_), pid_(other.pid_), number_(other.number_) {
    other.fd_ = -1;
    other.pid_ = 0;
    other.number_ = 0;
  }
  DoorbellWriter& operator=(DoorbellWriter&& other) noexcept;
  DoorbellWriter(const DoorbellWriter&) = delete;
  DoorbellWriter& operator=(const DoorbellWriter&) = delete;

  /// Writes a byte into the doorbell `word` (ConsumerSegHeaderData::doorbell)
  /// of the consumer process `pid` names. False if it could not (no such
  /// descriptor, not a pipe, no permission to open /proc/<pid>/fd): the
  /// caller then wakes the futex as for any sleeper. A full pipe counts as
  /// rung (the consumer has bytes to read already).
  bool Sound(uint32_t pid, uint32_t word);
  void Close();

 private:
  int fd_ = -1;
  uint32_t pid_ = 0;
  uint32_t number_ = 0;  // the doorbell word fd_ was opened for
};

/// The consumer's end: a pipe, both ends kept (the write end, whose number
/// the segment publishes, is what the producer reopens; holding it also
/// keeps the read end from ever reporting a hang-up). Non-blocking, closed
/// with the consumer.
class DoorbellPipe {
 public:
  DoorbellPipe() = default;
  ~DoorbellPipe();
  DoorbellPipe(const DoorbellPipe&) = delete;
  DoorbellPipe& operator=(const DoorbellPipe&) = delete;

  /// Makes the pipe (once); false with errno set if it could not.
  bool Open();
  bool is_open() const { return read_ >= 0; }
  int read_fd() const { return read_; }
  int write_fd() const { return write_; }
  /// Reads every byte rung so far.
  void Drain() const;

 private:
  int read_ = -1;
  int write_ = -1;
};

}  // namespace alkaid::shm::internal
