#pragma once

// A /dev/shm object that takes every byte left, for the tests of a full
// /dev/shm (the soak, tests/fault/small_shm_test.cc), which run in a
// private tmpfs.

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <utility>

namespace alkaid::testing {

// Fills /dev/shm (a private tmpfs) with one object until no byte is left,
// and frees it again. The name is not the broker's: its leftover sweep must
// not take it.
class ShmFiller {
 public:
  explicit ShmFiller(std::string name) : path_("/dev/shm/" + std::move(name)) {}
  ~ShmFiller() { Free(); }
  bool full() const { return fd_ >= 0; }
  // Reserves 1 MiB after 1 MiB, then 4 KiB pages, until the tmpfs refuses.
  // Returns the bytes taken.
  int64_t Fill() {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd_ < 0) return -1;
    int64_t size = 0;
    for (const int64_t step : {int64_t{1} << 20, int64_t{4096}}) {
      while (::posix_fallocate(fd_, size, step) == 0) size += step;
    }
    return size;
  }
  void Free() {
    if (fd_ < 0) return;
    ::close(fd_);
    ::unlink(path_.c_str());
    fd_ = -1;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace alkaid::testing
