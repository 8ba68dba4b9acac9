// Doorbells: the producer's side (doorbell_internal.h) and the consumer's
// (ChannelConsumer::doorbell_fd, ArmDoorbell in channel_consumer.cc).

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "doorbell_internal.h"

namespace alkaid::shm::internal {

DoorbellWriter& DoorbellWriter::operator=(DoorbellWriter&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    pid_ = other.pid_;
    number_ = other.number_;
    other.fd_ = -1;
    other.pid_ = 0;
    other.number_ = 0;
  }
  return *this;
}

void DoorbellWriter::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  pid_ = 0;
  number_ = 0;
}

bool DoorbellWriter::Sound(uint32_t pid, uint32_t word) {
  if (word == 0) return false;
  if (fd_ < 0 || pid != pid_ || word != number_) {
    Close();
    // O_NONBLOCK: a write into a full pipe fails with EAGAIN instead of
    // waiting. O_RDWR (Linux opens a pipe so without waiting, fifo(7)): we
    // are a reader of the pipe too, so a write never meets a pipe without
    // readers, which raises SIGPIPE and kills the producer's process by
    // default. A consumer that dies with its bell armed leaves exactly such
    // a pipe: its own ends close with it, ours stays open until we let it
    // go; the bytes we write meanwhile fill the pipe (EAGAIN) and go with it.
    const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(word - 1);
    const int fd = ::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    // The number comes from the consumer's segment: write into nothing but
    // a pipe (a consumer naming another of its descriptors gets no byte).
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
      ::close(fd);
      return false;
    }
    fd_ = fd;
    pid_ = pid;
    number_ = word;
  }
  const char byte = 1;
  const ssize_t n = ::write(fd_, &byte, 1);
  return n == 1 || (n < 0 && errno == EAGAIN);
}

DoorbellPipe::~DoorbellPipe() {
  if (read_ >= 0) ::close(read_);
  if (write_ >= 0) ::close(write_);
}

bool DoorbellPipe::Open() {
  if (read_ >= 0) return true;
  int fds[2] = {-1, -1};
  if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return false;
  read_ = fds[0];
  write_ = fds[1];
  return true;
}

void DoorbellPipe::Drain() const {
  char bytes[256];
  while (::read(read_, bytes, sizeof bytes) > 0) {
  }
}

}  // namespace alkaid::shm::internal
