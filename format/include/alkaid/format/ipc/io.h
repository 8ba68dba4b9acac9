#pragma once

/// \file
/// Byte sources and sinks for the IPC readers and writers.
///
/// Every operation returns a Status or Result; system errors become IOError
/// naming the path (or descriptor) and strerror. None of these classes is
/// thread-safe unless stated: one thread uses a stream at a time.
/// RandomAccessFile::ReadAt on BufferReader and MemoryMappedFile is safe from
/// several threads.

#include <cstdint>
#include <memory>
#include <string>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/buffer.h"
#include "alkaid/format/memory_pool.h"

namespace alkaid::format::ipc {

/// A sequential byte sink.
class ALKAID_EXPORT OutputStream {
 public:
  virtual ~OutputStream() = default;
  /// Writes all `n` bytes (or fails).
  virtual Status Write(const void* data, int64_t n) = 0;
  Status Write(const Buffer& buffer) { return Write(buffer.data(), buffer.size()); }
  /// Bytes written so far.
  virtual Result<int64_t> Tell() const = 0;
  virtual Status Flush() { return Status::OK(); }
  /// Flushes and releases the sink; further writes fail. Idempotent.
  virtual Status Close() = 0;
  virtual bool closed() const = 0;
};

/// A sequential byte source.
class ALKAID_EXPORT InputStream {
 public:
  virtual ~InputStream() = default;
  /// Reads up to `n` bytes into `out`; returns the count, 0 at end of input.
  /// Reads fewer than `n` only at end of input.
  virtual Result<int64_t> Read(int64_t n, void* out) = 0;
  /// Reads up to `n` bytes into a buffer (shorter only at end of input). For
  /// in-memory sources the buffer is a zero-copy slice.
  virtual Result<std::shared_ptr<Buffer>> Read(int64_t n) = 0;
  /// Bytes consumed so far.
  virtual Result<int64_t> Tell() const = 0;
  virtual Status Close() = 0;
};

/// A source with random access and a known size.
class ALKAID_EXPORT RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  /// Up to `n` bytes at `position` (fewer only past the end). In-memory and
  /// mapped sources return zero-copy slices that keep the source alive.
  /// IndexError for a negative position or length.
  virtual Result<std::shared_ptr<Buffer>> ReadAt(int64_t position, int64_t n) = 0;
  virtual Result<int64_t> GetSize() = 0;
};

/// Writes into a growing ResizableBuffer from a MemoryPool.
class ALKAID_EXPORT BufferOutputStream : public OutputStream {
 public:
  static Result<std::shared_ptr<BufferOutputStream>> Create(
      int64_t initial_capacity = 4096, MemoryPool* pool = default_memory_pool());
  ~BufferOutputStream() override;

  Status Write(const void* data, int64_t n) override;
  using OutputStream::Write;
  Result<int64_t> Tell() const override { return position_; }
  Status Close() override;
  bool closed() const override { return buffer_ == nullptr; }
  /// Closes the stream and returns the bytes written (size = Tell()).
  Result<std::shared_ptr<Buffer>> Finish();

 private:
  BufferOutputStream() = default;
  std::shared_ptr<ResizableBuffer> buffer_;
  int64_t position_ = 0;
};

/// Writes to a file descriptor, retrying on EINTR and short writes.
class ALKAID_EXPORT FileOutputStream : public OutputStream {
 public:
  /// Creates or truncates (or, with `append`, appends to) `path`.
  static Result<std::shared_ptr<FileOutputStream>> Open(const std::string& path,
                                                        bool append = false);
  /// Writes to an open descriptor; closes it on Close() only if `owns_fd`.
  static Result<std::shared_ptr<FileOutputStream>> FromDescriptor(int fd, bool owns_fd = false);
  ~FileOutputStream() override;

  Status Write(const void* data, int64_t n) override;
  using OutputStream::Write;
  Result<int64_t> Tell() const override { return position_; }
  Status Flush() override;
  Status Close() override;
  bool closed() const override { return fd_ < 0; }

 private:
  FileOutputStream(int fd, bool owns_fd, std::string name)
      : fd_(fd), owns_fd_(owns_fd), name_(std::move(name)) {}
  int fd_;
  bool owns_fd_;
  std::string name_;
  int64_t position_ = 0;
};

/// Reads a file descriptor sequentially (a file, a pipe, stdin).
class ALKAID_EXPORT FileInputStream : public InputStream {
 public:
  static Result<std::shared_ptr<FileInputStream>> Open(const std::string& path,
                                                       MemoryPool* pool = default_memory_pool());
  /// Reads an open descriptor; closes it on Close() only if `owns_fd`.
  static Result<std::shared_ptr<FileInputStream>> FromDescriptor(
      int fd, bool owns_fd = false, MemoryPool* pool = default_memory_pool());
  /// Standard input (descriptor 0, not closed).
  static Result<std::shared_ptr<FileInputStream>> Stdin(MemoryPool* pool = default_memory_pool());
  ~FileInputStream() override;

  Result<int64_t> Read(int64_t n, void* out) override;
  Result<std::shared_ptr<Buffer>> Read(int64_t n) override;
  Result<int64_t> Tell() const override { return position_; }
  Status Close() override;

 private:
  FileInputStream(int fd, bool owns_fd, std::string name, MemoryPool* pool)
      : fd_(fd), owns_fd_(owns_fd), name_(std::move(name)), pool_(pool) {}
  int fd_;
  bool owns_fd_;
  std::string name_;
  MemoryPool* pool_;
  int64_t position_ = 0;
};

/// Reads a Buffer, copying nothing: Read(n) and ReadAt return slices.
class ALKAID_EXPORT BufferReader : public InputStream, public RandomAccessFile {
 public:
  explicit BufferReader(std::shared_ptr<Buffer> buffer) : buffer_(std::move(buffer)) {}

  Result<int64_t> Read(int64_t n, void* out) override;
  Result<std::shared_ptr<Buffer>> Read(int64_t n) override;
  Result<int64_t> Tell() const override { return position_; }
  Status Close() override { return Status::OK(); }
  Result<std::shared_ptr<Buffer>> ReadAt(int64_t position, int64_t n) override;
  Result<int64_t> GetSize() override { return buffer_->size(); }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }

 private:
  std::shared_ptr<Buffer> buffer_;
  int64_t position_ = 0;
};

/// A read-only memory mapping of a whole file. ReadAt returns slices of the
/// mapping that keep it mapped; the file may be closed meanwhile.
class ALKAID_EXPORT MemoryMappedFile : public RandomAccessFile {
 public:
  static Result<std::shared_ptr<MemoryMappedFile>> Open(const std::string& path);
  ~MemoryMappedFile() override;

  Result<std::shared_ptr<Buffer>> ReadAt(int64_t position, int64_t n) override;
  Result<int64_t> GetSize() override { return size_; }
  /// The whole mapping as one buffer.
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }

 private:
  MemoryMappedFile() = default;
  std::shared_ptr<Buffer> buffer_;
  int64_t size_ = 0;
};

/// Reads an entire file into memory (for tests and tools).
ALKAID_EXPORT Result<std::shared_ptr<Buffer>> ReadWholeFile(
    const std::string& path, MemoryPool* pool = default_memory_pool());

}  // namespace alkaid::format::ipc
