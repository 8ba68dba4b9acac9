#include "alkaid/format/ipc/io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace alkaid::format::ipc {

namespace {

Status ErrnoStatus(int err, const std::string& what, const std::string& name) {
  return Status::IOError(what, " '", name, "': ", ErrnoMessage(err));
}

Status CheckReadArgs(int64_t position, int64_t n) {
  if (position < 0) return Status::IndexError("read at negative position ", position);
  if (n < 0) return Status::IndexError("read of negative length ", n);
  return Status::OK();
}

}  // namespace

// ---------------------------------------------------------------------------
// BufferOutputStream

Result<std::shared_ptr<BufferOutputStream>> BufferOutputStream::Create(int64_t initial_capacity,
                                                                       MemoryPool* pool) {
  std::shared_ptr<BufferOutputStream> out(new BufferOutputStream());
  out->buffer_ = ResizableBuffer::Make(pool);
  ALKAID_RETURN_NOT_OK(out->buffer_->Reserve(std::max<int64_t>(initial_capacity, 0)));
  return out;
}

BufferOutputStream::~BufferOutputStream() = default;

Status BufferOutputStream::Write(const void* data, int64_t n) {
  if (buffer_ == nullptr) return Status::IOError("write to a closed BufferOutputStream");
  if (n < 0) return Status::Invalid("write of negative length ", n);
  if (n == 0) return Status::OK();
  if (position_ + n > buffer_->capacity()) {
    const int64_t want = std::max(position_ + n, buffer_->capacity() * 2);
    ALKAID_RETURN_NOT_OK(buffer_->Reserve(want));
  }
  ALKAID_RETURN_NOT_OK(buffer_->Resize(position_ + n));
  std::memcpy(buffer_->mutable_data() + position_, data, static_cast<size_t>(n));
  position_ += n;
  return Status::OK();
}

Status BufferOutputStream::Close() {
  buffer_.reset();
  return Status::OK();
}

Result<std::shared_ptr<Buffer>> BufferOutputStream::Finish() {
  if (buffer_ == nullptr) return Status::IOError("Finish on a closed BufferOutputStream");
  ALKAID_RETURN_NOT_OK(buffer_->Resize(position_));
  std::shared_ptr<Buffer> out = std::move(buffer_);
  buffer_.reset();
  return out;
}

// ---------------------------------------------------------------------------
// FileOutputStream

Result<std::shared_ptr<FileOutputStream>> FileOutputStream::Open(const std::string& path,
                                                                 bool append) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
  int fd;
  do {
    fd = ::open(path.c_str(), flags, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoStatus(errno, "cannot open for writing", path);
  std::shared_ptr<FileOutputStream> out(new FileOutputStream(fd, true, path));
  if (append) {
    struct stat st;
    if (::fstat(fd, &st) == 0) out->position_ = st.st_size;
  }
  return out;
}

Result<std::shared_ptr<FileOutputStream>> FileOutputStream::FromDescriptor(int fd, bool owns_fd) {
  if (fd < 0) return Status::Invalid("invalid file descriptor ", fd);
  return std::shared_ptr<FileOutputStream>(
      new FileOutputStream(fd, owns_fd, "fd " + std::to_string(fd)));
}

FileOutputStream::~FileOutputStream() { (void)Close(); }

Status FileOutputStream::Write(const void* data, int64_t n) {
  if (fd_ < 0) return Status::IOError("write to closed file '", name_, "'");
  if (n < 0) return Status::Invalid("write of negative length ", n);
  auto* p = static_cast<const uint8_t*>(data);
  int64_t left = n;
  while (left > 0) {
    const size_t chunk = static_cast<size_t>(std::min<int64_t>(left, int64_t{1} << 30));
    ssize_t w = ::write(fd_, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "write failed on", name_);
    }
    p += w;
    left -= w;
    position_ += w;
  }
  return Status::OK();
}

Status FileOutputStream::Flush() { return Status::OK(); }

Status FileOutputStream::Close() {
  if (fd_ < 0) return Status::OK();
  int fd = fd_;
  fd_ = -1;
  if (owns_fd_ && ::close(fd) != 0 && errno != EINTR) {
    return ErrnoStatus(errno, "close failed on", name_);
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------
// FileInputStream

Result<std::shared_ptr<FileInputStream>> FileInputStream::Open(const std::string& path,
                                                               MemoryPool* pool) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  return std::shared_ptr<FileInputStream>(new FileInputStream(fd, true, path, pool));
}

Result<std::shared_ptr<FileInputStream>> FileInputStream::FromDescriptor(int fd, bool owns_fd,
                                                                         MemoryPool* pool) {
  if (fd < 0) return Status::Invalid("invalid file descriptor ", fd);
  return std::shared_ptr<FileInputStream>(
      new FileInputStream(fd, owns_fd, "fd " + std::to_string(fd), pool));
}

Result<std::shared_ptr<FileInputStream>> FileInputStream::Stdin(MemoryPool* pool) {
  return std::shared_ptr<FileInputStream>(new FileInputStream(0, false, "<stdin>", pool));
}

FileInputStream::~FileInputStream() { (void)Close(); }

Result<int64_t> FileInputStream::Read(int64_t n, void* out) {
  if (fd_ < 0) return Status::IOError("read from closed file '", name_, "'");
  if (n < 0) return Status::IndexError("read of negative length ", n);
  auto* p = static_cast<uint8_t*>(out);
  int64_t got = 0;
  while (got < n) {
    const size_t chunk = static_cast<size_t>(std::min<int64_t>(n - got, int64_t{1} << 30));
    ssize_t r = ::read(fd_, p + got, chunk);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "read failed on", name_);
    }
    if (r == 0) break;
    got += r;
  }
  position_ += got;
  return got;
}

Result<std::shared_ptr<Buffer>> FileInputStream::Read(int64_t n) {
  if (n < 0) return Status::IndexError("read of negative length ", n);
  // Grow in steps so that a hostile length never allocates more than twice
  // what the source really holds.
  auto buffer = ResizableBuffer::Make(pool_);
  int64_t got = 0;
  while (got < n) {
    const int64_t step = std::min<int64_t>(n - got, std::max<int64_t>(got, 1 << 16));
    ALKAID_RETURN_NOT_OK(buffer->Resize(got + step));
    ALKAID_ASSIGN_OR_RAISE(int64_t r, Read(step, buffer->mutable_data() + got));
    got += r;
    if (r < step) break;
  }
  ALKAID_RETURN_NOT_OK(buffer->Resize(got));
  return std::shared_ptr<Buffer>(std::move(buffer));
}

Status FileInputStream::Close() {
  if (fd_ < 0) return Status::OK();
  int fd = fd_;
  fd_ = -1;
  if (owns_fd_ && ::close(fd) != 0 && errno != EINTR) {
    return ErrnoStatus(errno, "close failed on", name_);
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------
// BufferReader

Result<int64_t> BufferReader::Read(int64_t n, void* out) {
  if (n < 0) return Status::IndexError("read of negative length ", n);
  const int64_t k = std::min(n, buffer_->size() - position_);
  if (k > 0) std::memcpy(out, buffer_->data() + position_, static_cast<size_t>(k));
  position_ += k;
  return k;
}

Result<std::shared_ptr<Buffer>> BufferReader::Read(int64_t n) {
  if (n < 0) return Status::IndexError("read of negative length ", n);
  const int64_t k = std::min(n, buffer_->size() - position_);
  auto out = SliceBuffer(buffer_, position_, k);
  position_ += k;
  return out;
}

Result<std::shared_ptr<Buffer>> BufferReader::ReadAt(int64_t position, int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckReadArgs(position, n));
  if (position > buffer_->size()) {
    return Status::IndexError("read at ", position, " past the end of a ", buffer_->size(),
                              "-byte buffer");
  }
  return SliceBuffer(buffer_, position, std::min(n, buffer_->size() - position));
}

// ---------------------------------------------------------------------------
// MemoryMappedFile

namespace {

struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr != nullptr && size > 0) ::munmap(addr, size);
  }
};

}  // namespace

Result<std::shared_ptr<MemoryMappedFile>> MemoryMappedFile::Open(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "cannot stat", path);
  }
  std::shared_ptr<MemoryMappedFile> file(new MemoryMappedFile());
  file->size_ = st.st_size;
  auto mapping = std::make_shared<Mapping>();
  if (st.st_size > 0) {
    void* addr = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return ErrnoStatus(err, "cannot map", path);
    }
    mapping->addr = addr;
    mapping->size = static_cast<size_t>(st.st_size);
  }
  ::close(fd);
  static const uint8_t kEmpty[8] = {};
  const uint8_t* data = mapping->addr ? static_cast<const uint8_t*>(mapping->addr) : kEmpty;
  file->buffer_ = std::make_shared<Buffer>(data, file->size_, mapping);
  return file;
}

MemoryMappedFile::~MemoryMappedFile() = default;

Result<std::shared_ptr<Buffer>> MemoryMappedFile::ReadAt(int64_t position, int64_t n) {
  ALKAID_RETURN_NOT_OK(CheckReadArgs(position, n));
  if (position > size_) {
    return Status::IndexError("read at ", position, " past the end of a ", size_,
                              "-byte mapped file");
  }
  return SliceBuffer(buffer_, position, std::min(n, size_ - position));
}

Result<std::shared_ptr<Buffer>> ReadWholeFile(const std::string& path, MemoryPool* pool) {
  ALKAID_ASSIGN_OR_RAISE(auto in, FileInputStream::Open(path, pool));
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "cannot stat", path);
  ALKAID_ASSIGN_OR_RAISE(auto buf, in->Read(static_cast<int64_t>(st.st_size)));
  ALKAID_RETURN_NOT_OK(in->Close());
  return buf;
}

}  // namespace alkaid::format::ipc
