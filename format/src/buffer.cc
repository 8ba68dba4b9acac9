#include "alkaid/format/buffer.h"

#include <algorithm>
#include <typeinfo>

#include "pool_object_internal.h"

namespace alkaid::format {

Buffer::Buffer(std::shared_ptr<Buffer> parent, int64_t offset, int64_t size)
    : data_(parent->data_ + offset),
      size_(size),
      capacity_(size),
      is_mutable_(parent->is_mutable_),
      parent_(std::move(parent)) {}

Result<std::shared_ptr<Buffer>> Buffer::CopyOf(std::string_view bytes, MemoryPool* pool) {
  ALKAID_ASSIGN_OR_RAISE(auto buf, AllocateBuffer(static_cast<int64_t>(bytes.size()), pool));
  if (!bytes.empty()) std::memcpy(buf->mutable_data(), bytes.data(), bytes.size());
  return std::shared_ptr<Buffer>(std::move(buf));
}

std::shared_ptr<Buffer> Buffer::FromString(std::string s) {
  auto holder = std::make_shared<std::string>(std::move(s));
  auto* data = reinterpret_cast<const uint8_t*>(holder->data());
  auto size = static_cast<int64_t>(holder->size());
  return std::make_shared<Buffer>(data, size, std::move(holder));
}

ResizableBuffer::ResizableBuffer(MemoryPool* pool) : ResizableBuffer(pool, pool->shared_owner()) {}

ResizableBuffer::ResizableBuffer(MemoryPool* pool, std::shared_ptr<MemoryPool> owner)
    : owner_(std::move(owner)), pool_(owner_ != nullptr ? owner_.get() : pool) {
  is_mutable_ = true;
}

ResizableBuffer::~ResizableBuffer() {
  if (data_ != nullptr) pool_->Free(data_, capacity_, kBufferAlignment);
}

std::unique_ptr<ResizableBuffer> ResizableBuffer::Make(MemoryPool* pool) {
  return std::unique_ptr<ResizableBuffer>(new ResizableBuffer(pool));
}

namespace {

// ResizableBuffer's constructor is not public: MakeShared's object.
struct SharedResizableBuffer final : ResizableBuffer {
  explicit SharedResizableBuffer(MemoryPool* pool) : ResizableBuffer(pool) {}
  SharedResizableBuffer(MemoryPool* pool, std::shared_ptr<MemoryPool> owner)
      : ResizableBuffer(pool, std::move(owner)) {}
  // Takes `data`, an allocation of `capacity` bytes from the pool, as its
  // bytes (AdoptBuiltBytes).
  void Adopt(uint8_t* data, int64_t size, int64_t capacity) {
    data_ = data;
    size_ = size;
    capacity_ = capacity;
  }
};

}  // namespace

std::shared_ptr<ResizableBuffer> ResizableBuffer::MakeShared(MemoryPool* pool) {
  return internal::MakePoolObject<SharedResizableBuffer>(pool, pool);
}

namespace internal {

std::shared_ptr<Buffer> AdoptBuiltBytes(MemoryPool* pool, std::shared_ptr<MemoryPool> owner,
                                        uint8_t* data, int64_t size, int64_t capacity) {
  if (owner != nullptr) {
    if (ObjectMemory* m = pool->object_memory()) {
      bool reused = false;
      GraphBuffer* b = ObjectMemoryAccess::Take<GraphBuffer>(
          m, &reused, [m](void* at) { return ::new (at) GraphBuffer(m); });
      if (b != nullptr) {
        // The owner, not `pool` (which may go first): its object memory is
        // the same.
        b->Point(owner.get(), data, size, capacity);
        return std::shared_ptr<Buffer>(std::move(owner), b);
      }
    }
  }
  auto buffer = MakePoolObject<SharedResizableBuffer>(pool, pool, std::move(owner));
  buffer->Adopt(data, size, capacity);
  return buffer;
}

MemoryPool* BuiltBufferPool(const Buffer& buffer) {
  // Type comparisons, not a dynamic_cast: the classes are final.
  if (typeid(buffer) == typeid(GraphBuffer)) {
    return static_cast<const GraphBuffer&>(buffer).memory_pool();
  }
  if (typeid(buffer) != typeid(SharedResizableBuffer)) return nullptr;
  return static_cast<const SharedResizableBuffer&>(buffer).memory_pool();
}

}  // namespace internal

Status ResizableBuffer::Reallocate(int64_t new_capacity) {
  const bool fresh = data_ == nullptr;
  if (fresh) {
    ALKAID_ASSIGN_OR_RAISE(data_, pool_->Allocate(new_capacity, kBufferAlignment));
  } else {
    ALKAID_ASSIGN_OR_RAISE(data_,
                           pool_->Reallocate(data_, capacity_, new_capacity, kBufferAlignment));
  }
  // Only memory this call acquired is zeroed: bytes a writer put past size()
  // within the old capacity survive growth.
  const int64_t kept = fresh ? 0 : std::min(capacity_, new_capacity);
  if (new_capacity > kept) {
    std::memset(data_ + kept, 0, static_cast<size_t>(new_capacity - kept));
  }
  capacity_ = new_capacity;
  return Status::OK();
}

Status ResizableBuffer::Reserve(int64_t capacity) {
  if (capacity < 0) return Status::Invalid("negative buffer capacity ", capacity);
  if (capacity <= capacity_ && data_ != nullptr) return Status::OK();
  // Grow geometrically so appending stays amortised O(1).
  int64_t target =
      std::max(PaddedLength(capacity), std::min<int64_t>(capacity_ * 2, INT64_MAX / 2));
  return Reallocate(PaddedLength(target));
}

Status ResizableBuffer::Resize(int64_t new_size, bool shrink_to_fit) {
  if (new_size < 0) return Status::Invalid("negative buffer size ", new_size);
  if (new_size > capacity_ || data_ == nullptr) {
    ALKAID_RETURN_NOT_OK(Reserve(new_size));
  } else if (new_size < size_) {
    std::memset(data_ + new_size, 0, static_cast<size_t>(size_ - new_size));
  }
  if (shrink_to_fit && PaddedLength(new_size) < capacity_) {
    ALKAID_RETURN_NOT_OK(Reallocate(PaddedLength(new_size)));
  }
  size_ = new_size;
  return Status::OK();
}

Result<std::shared_ptr<ResizableBuffer>> AllocateBuffer(int64_t size, MemoryPool* pool) {
  std::shared_ptr<ResizableBuffer> buf = ResizableBuffer::MakeShared(pool);
  ALKAID_RETURN_NOT_OK(buf->Resize(size));
  return buf;
}

Result<std::shared_ptr<ResizableBuffer>> AllocateUninitializedBuffer(int64_t size,
                                                                     MemoryPool* pool) {
  if (size < 0) return Status::Invalid("negative buffer size ", size);
  if (size > INT64_MAX - kBufferAlignment) {
    return Status::CapacityError("a buffer of ", size, " bytes");
  }
  std::shared_ptr<ResizableBuffer> buf = ResizableBuffer::MakeShared(pool);
  const int64_t capacity = PaddedLength(size);
  MemoryPool* from = buf->memory_pool();
  ALKAID_ASSIGN_OR_RAISE(uint8_t * data, from->Allocate(capacity, kBufferAlignment));
  std::memset(data + size, 0, static_cast<size_t>(capacity - size));
  static_cast<SharedResizableBuffer&>(*buf).Adopt(data, size, capacity);
  return buf;
}

std::shared_ptr<Buffer> SliceBuffer(std::shared_ptr<Buffer> buffer, int64_t offset,
                                    int64_t length) {
  return std::make_shared<Buffer>(std::move(buffer), offset, length);
}

Result<std::shared_ptr<Buffer>> SliceBufferChecked(std::shared_ptr<Buffer> buffer, int64_t offset,
                                                   int64_t length) {
  if (buffer == nullptr) return Status::Invalid("slicing a null buffer");
  if (offset < 0 || length < 0 || offset > buffer->size() || length > buffer->size() - offset) {
    return Status::IndexError("slice [", offset, ", ", offset, " + ", length,
                              ") is outside a buffer of ", buffer->size(), " bytes");
  }
  return SliceBuffer(std::move(buffer), offset, length);
}

}  // namespace alkaid::format
