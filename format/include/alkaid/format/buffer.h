#pragma once

/// \file
/// Contiguous memory regions holding array data.
///
/// A Buffer is an immutable-by-default view of bytes plus whatever keeps those
/// bytes alive (a pool allocation, a parent buffer, a mapped file, a
/// shared-memory block). Slicing never copies. Buffers are shared through
/// std::shared_ptr and are safe to read from many threads at once.

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "alkaid/common/export.h"
#include "alkaid/common/result.h"
#include "alkaid/format/memory_pool.h"

namespace alkaid::format {

class ALKAID_EXPORT Buffer {
 public:
  /// A view of `size` bytes at `data`, kept alive by `owner` (may be null when
  /// the caller guarantees the memory outlives the buffer).
  Buffer(const uint8_t* data, int64_t size, std::shared_ptr<const void> owner = nullptr)
      : data_(const_cast<uint8_t*>(data)), size_(size), capacity_(size), owner_(std::move(owner)) {}

  /// A zero-copy slice of `parent`: bytes [offset, offset + size). The parent
  /// stays alive as long as the slice. Bounds are the caller's responsibility;
  /// see SliceBufferChecked for untrusted offsets.
  Buffer(std::shared_ptr<Buffer> parent, int64_t offset, int64_t size);

  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  /// A buffer owning a copy of `bytes` (allocated from `pool`).
  static Result<std::shared_ptr<Buffer>> CopyOf(std::string_view bytes,
                                                MemoryPool* pool = default_memory_pool());
  /// A buffer that takes ownership of `s` (no copy of the characters).
  static std::shared_ptr<Buffer> FromString(std::string s);

  const uint8_t* data() const { return data_; }
  /// Writable pointer; only valid when is_mutable().
  uint8_t* mutable_data() { return is_mutable_ ? data_ : nullptr; }
  int64_t size() const { return size_; }
  /// Usable bytes from data(): at least size(), padding included.
  int64_t capacity() const { return capacity_; }
  bool is_mutable() const { return is_mutable_; }
  const std::shared_ptr<Buffer>& parent() const { return parent_; }

  std::string_view view() const {
    return {reinterpret_cast<const char*>(data_), static_cast<size_t>(size_)};
  }
  std::string ToString() const { return std::string(view()); }
  /// The bytes reinterpreted as `T` (size() / sizeof(T) elements).
  template <typename T>
  std::span<const T> span_as() const {
    return {reinterpret_cast<const T*>(data_), static_cast<size_t>(size_) / sizeof(T)};
  }
  template <typename T>
  const T* data_as() const {
    return reinterpret_cast<const T*>(data_);
  }
  template <typename T>
  T* mutable_data_as() {
    return reinterpret_cast<T*>(mutable_data());
  }

  /// Byte-wise equality of the first size() bytes.
  bool Equals(const Buffer& other) const {
    return size_ == other.size_ &&
           (data_ == other.data_ || size_ == 0 ||
            std::memcmp(data_, other.data_, static_cast<size_t>(size_)) == 0);
  }

  /// True if [p, p + n) lies inside this buffer's bytes.
  bool Contains(const void* p, int64_t n) const {
    auto* b = static_cast<const uint8_t*>(p);
    return b >= data_ && n >= 0 && b + n <= data_ + size_;
  }

 protected:
  Buffer() = default;

  uint8_t* data_ = nullptr;
  int64_t size_ = 0;
  int64_t capacity_ = 0;
  bool is_mutable_ = false;
  std::shared_ptr<Buffer> parent_;
  std::shared_ptr<const void> owner_;
};

/// A writable buffer allocated from a MemoryPool that can grow. Capacity is
/// always padded to a multiple of 64 bytes. Memory the buffer acquires is
/// zeroed and shrinking zeroes the bytes cut off, so a buffer whose bytes past
/// size() were never written has zero padding. Bytes a writer puts past
/// size() (within capacity) are kept when the buffer grows. Not thread-safe
/// while being resized.
class ALKAID_EXPORT ResizableBuffer : public Buffer {
 public:
  ~ResizableBuffer() override;

  /// An empty buffer drawing from `pool`.
  static std::unique_ptr<ResizableBuffer> Make(MemoryPool* pool = default_memory_pool());
  /// The same, shared: the object and its reference count in one
  /// allocation, or in the pool's object memory (MemoryPool::object_pool)
  /// without allocating.
  static std::shared_ptr<ResizableBuffer> MakeShared(MemoryPool* pool = default_memory_pool());

  /// Sets size() to `new_size`, growing capacity as needed. New bytes are
  /// zero. With `shrink_to_fit`, releases capacity beyond the padded size.
  Status Resize(int64_t new_size, bool shrink_to_fit = false);
  /// Ensures capacity() >= `capacity` without changing size().
  Status Reserve(int64_t capacity);

  MemoryPool* memory_pool() const { return pool_; }

 protected:
  explicit ResizableBuffer(MemoryPool* pool);
  /// Drawing from `owner` (the pool's shared owner, already taken), or from
  /// `pool` when it is null.
  ResizableBuffer(MemoryPool* pool, std::shared_ptr<MemoryPool> owner);

 private:
  Status Reallocate(int64_t new_capacity);
  // The pool's shared owner, if it has one (MemoryPool::shared_owner):
  // then pool_ is that owner, and the buffer keeps it alive.
  std::shared_ptr<MemoryPool> owner_;
  MemoryPool* pool_;
};

/// A zero-initialised, mutable buffer of `size` bytes (capacity padded to 64).
ALKAID_EXPORT Result<std::shared_ptr<ResizableBuffer>> AllocateBuffer(
    int64_t size, MemoryPool* pool = default_memory_pool());

/// The same, for a caller that writes every one of the `size` bytes: they
/// hold whatever the pool's memory held (a recycled shared-memory region
/// holds an earlier batch of the topic), and only the padding past them up
/// to capacity() is zeroed. Saves the pass over the bytes AllocateBuffer
/// makes, which for a large column is a second write of all of it (Arrow
/// C++'s AllocateBuffer leaves the bytes alike). The buffer grows and
/// shrinks as any ResizableBuffer.
ALKAID_EXPORT Result<std::shared_ptr<ResizableBuffer>> AllocateUninitializedBuffer(
    int64_t size, MemoryPool* pool = default_memory_pool());

/// Zero-copy slice without bounds checks (see Buffer's slice constructor).
ALKAID_EXPORT std::shared_ptr<Buffer> SliceBuffer(std::shared_ptr<Buffer> buffer, int64_t offset,
                                                  int64_t length);

/// Zero-copy slice that fails with IndexError if [offset, offset + length) is
/// not inside `buffer`.
ALKAID_EXPORT Result<std::shared_ptr<Buffer>> SliceBufferChecked(std::shared_ptr<Buffer> buffer,
                                                                 int64_t offset, int64_t length);

}  // namespace alkaid::format
