#pragma once

// Objects made over a pool's buffers in the pool's object memory
// (MemoryPool::object_memory, or the older MemoryPool::object_pool): a
// builder's buffer objects, the array data and array it finishes, the record
// batch made of them. Not installed.

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "alkaid/format/array_data.h"
#include "alkaid/format/memory_pool.h"
#include "alkaid/format/object_memory.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/type_fwd.h"

namespace alkaid::format::internal {

/// The slots of an ObjectMemory (object_memory.h): each holds one object,
/// its reference count (a control block made by std::shared_ptr's
/// constructor with our deleter and allocator, placed in the slot) and, while
/// the object lives, a strong reference to the memory's owner.
///
/// A slot's object is parked, not freed, when its count falls to zero: an
/// ArrayData or RecordBatch lets go of what it points to and keeps its
/// vectors' capacity (kind stays set, and the next object of that type made
/// in the slot takes it back); any other object is destroyed (kind null).
struct ObjectMemoryAccess {
  // libstdc++'s _Sp_counted_deleter with a one-pointer deleter and
  // allocator is 32 bytes (checked at compile time in SlotAllocator).
  static constexpr size_t kCountBytes = 48;

  struct Slot {
    const void* kind = nullptr;        // type of the object kept here, or null
    void (*destroy)(void*) = nullptr;  // destroys it (parked)
    std::shared_ptr<void> hold;        // the owner, while the object lives
    alignas(16) std::byte count[kCountBytes];
    alignas(16) std::byte object[ObjectMemory::kSlotBytes - 80];
  };
  static_assert(sizeof(Slot) == ObjectMemory::kSlotBytes, "a slot fills its place");
  static_assert(offsetof(Slot, count) == 32 && offsetof(Slot, object) == 80);

  static Slot* SlotAt(ObjectMemory* m, size_t i) {
    return std::launder(reinterpret_cast<Slot*>(m->slots_ + i * ObjectMemory::kSlotBytes));
  }

  // A tag per type, for Slot::kind (every object memory object is made by
  // code of this library: one address per type).
  template <typename T>
  static const void* Kind() {
    static const char tag = 0;
    return &tag;
  }
  template <typename T>
  static void Destroy(void* p) {
    static_cast<T*>(p)->~T();
  }

  // Whether a T is parked (kept constructed, emptied) or destroyed.
  template <typename T>
  static constexpr bool kParks = std::is_same_v<T, ArrayData> || std::is_same_v<T, RecordBatch>;

  static void Park(ArrayData* d) {
    d->type.reset();
    d->length = 0;
    d->null_count = 0;
    d->offset = 0;
    d->buffers.clear();  // keeps the capacity
    d->child_data.clear();
    d->dictionary.reset();
  }
  static void Park(RecordBatch* b) {
    b->schema_.reset();
    b->num_rows_ = 0;
    b->columns_.clear();  // keeps the capacity
    b->metadata_.reset();
    b->export_slot_ = nullptr;
  }

  // The object's count fell to zero: park or destroy it. Its slot is let
  // go with the count's memory (SlotAllocator::deallocate).
  template <typename T>
  struct SlotDeleter {
    Slot* slot;
    void operator()(T* p) const {
      if constexpr (kParks<T>) {
        Park(p);
      } else {
        p->~T();
        slot->kind = nullptr;
      }
    }
  };

  // The count's memory: the slot. Freeing it lets go of the owner (last:
  // the slot may be taken again, on another thread, once the owner's count
  // falls to zero).
  template <typename U>
  struct SlotAllocator {
    using value_type = U;
    Slot* slot;
    explicit SlotAllocator(Slot* s) : slot(s) {}
    template <typename V>
    explicit SlotAllocator(const SlotAllocator<V>& o) : slot(o.slot) {}
    U* allocate(size_t n) {
      static_assert(sizeof(U) <= kCountBytes && alignof(U) <= 16,
                    "a reference count must fit its place in the slot");
      if (n != 1) throw std::bad_alloc();
      return static_cast<U*>(static_cast<void*>(slot->count));
    }
    void deallocate(U* /*p*/, size_t /*n*/) noexcept {
      std::shared_ptr<void> last = std::move(slot->hold);
    }
    template <typename V>
    bool operator==(const SlotAllocator<V>& o) const {
      return slot == o.slot;
    }
  };

  /// A T in the next slot of `m`: the one parked there if it is a T
  /// (`refill` gives it its contents), else a new one (`construct`, a
  /// placement new at the address given). Null when `m` has no slot left,
  /// a T does not fit one, or `m` is not open: the caller makes the object
  /// elsewhere.
  template <typename T, typename Construct, typename Refill>
  static std::shared_ptr<T> MakeWith(ObjectMemory* m, Construct&& construct, Refill&& refill) {
    if constexpr (sizeof(T) > sizeof(Slot::object) || alignof(T) > 16) {
      return nullptr;
    } else {
      // Relaxed: each slot goes to one maker; the objects reach other
      // threads by the usual means.
      const size_t i = m->next_.fetch_add(1, std::memory_order_relaxed);
      if (i >= ObjectMemory::kSlots) return nullptr;
      std::shared_ptr<void> hold = m->owner_.lock();
      if (hold == nullptr) return nullptr;
      Slot* s = SlotAt(m, i);
      T* obj = nullptr;
      if (s->kind == Kind<T>()) {
        obj = std::launder(reinterpret_cast<T*>(s->object));
        refill(obj);
      } else {
        if (s->kind != nullptr) s->destroy(s->object);
        s->kind = nullptr;
        obj = construct(static_cast<void*>(s->object));
        s->kind = Kind<T>();
        s->destroy = &Destroy<T>;
      }
      s->hold = std::move(hold);
      return std::shared_ptr<T>(obj, SlotDeleter<T>{s}, SlotAllocator<T>(s));
    }
  }

  /// A new T made with `args` in the next slot of `m` (null as MakeWith).
  template <typename T, typename... Args>
  static std::shared_ptr<T> Make(ObjectMemory* m, Args&&... args) {
    static_assert(!kParks<T>, "parked types are made with MakeWith");
    return MakeWith<T>(
        m, [&](void* at) { return ::new (at) T(std::forward<Args>(args)...); }, [](T*) {});
  }

  /// A record batch of `schema` and `num_rows` rows whose columns `fill`
  /// appends to the (empty) vector it is given. `schema` is moved into the
  /// batch when one is made, and left as it was when none is (null).
  template <typename Fill>
  static std::shared_ptr<RecordBatch> MakeBatch(ObjectMemory* m, SchemaPtr& schema,
                                                int64_t num_rows, Fill&& fill) {
    return MakeWith<RecordBatch>(
        m,
        [&](void* at) {
          auto* b = ::new (at) RecordBatch(RecordBatch::Key{}, std::move(schema), num_rows, {});
          fill(&b->columns_);
          return b;
        },
        [&](RecordBatch* b) {
          b->schema_ = std::move(schema);
          b->num_rows_ = num_rows;
          fill(&b->columns_);
        });
  }
};

/// Allocates from a pool's object memory, and holds the pool (its
/// object_pool()): a shared_ptr made with it keeps the pool, and with it the
/// memory, until the reference count itself is freed (libstdc++ frees a
/// control block through a copy of its allocator, destroyed after).
template <typename T>
struct PoolObjectAllocator {
  using value_type = T;
  std::shared_ptr<MemoryPool> pool;

  explicit PoolObjectAllocator(std::shared_ptr<MemoryPool> p) : pool(std::move(p)) {}
  template <typename U>
  explicit PoolObjectAllocator(const PoolObjectAllocator<U>& o) : pool(o.pool) {}

  T* allocate(size_t n) { return static_cast<T*>(pool->AllocateObject(n * sizeof(T), alignof(T))); }
  void deallocate(T* p, size_t n) noexcept { pool->FreeObject(p, n * sizeof(T), alignof(T)); }
  template <typename U>
  bool operator==(const PoolObjectAllocator<U>& o) const {
    return pool == o.pool;
  }
};

/// A `T` made with `args` in the object memory of `pool`: its ObjectMemory
/// if it has one with a slot left, else its object_pool(), else (null, or a
/// pool with neither) the heap, as std::make_shared.
template <typename T, typename... Args>
std::shared_ptr<T> MakePoolObject(MemoryPool* pool, Args&&... args) {
  if (pool != nullptr) {
    if (ObjectMemory* m = pool->object_memory()) {
      if constexpr (!ObjectMemoryAccess::kParks<T>) {
        if (auto p = ObjectMemoryAccess::Make<T>(m, std::forward<Args>(args)...)) return p;
      }
    }
    if (std::shared_ptr<MemoryPool> objects = pool->object_pool()) {
      return std::allocate_shared<T>(PoolObjectAllocator<T>(std::move(objects)),
                                     std::forward<Args>(args)...);
    }
  }
  return std::make_shared<T>(std::forward<Args>(args)...);
}

/// ArrayData::Make's array data, in the object memory of `pool`, with the
/// `N` buffers moved in (a parked array data keeps its vector: no
/// allocation).
template <size_t N>
ArrayDataPtr MakeArrayData(MemoryPool* pool, TypePtr type, int64_t length,
                           std::shared_ptr<Buffer> (&&buffers)[N], int64_t null_count) {
  const auto fill = [&](ArrayData* d) {
    d->type = std::move(type);
    d->length = length;
    d->null_count = null_count;
    d->buffers.reserve(N);
    for (auto& b : buffers) d->buffers.push_back(std::move(b));
    return d;
  };
  if (pool != nullptr) {
    if (ObjectMemory* m = pool->object_memory()) {
      auto d = ObjectMemoryAccess::MakeWith<ArrayData>(
          m, [&](void* at) { return fill(::new (at) ArrayData()); }, fill);
      if (d != nullptr) return d;
    }
  }
  auto d = MakePoolObject<ArrayData>(pool);
  fill(d.get());
  return d;
}

/// The buffer a builder hands out (BufferBuilder::Finish): it takes
/// `data`, an allocation of `capacity` bytes (a multiple of 64, zero past
/// `size`) from `owner` (the pool's shared owner, which it keeps) or, when
/// that is null, from `pool`, and gives it back when it goes. Made in the
/// object memory of `pool`, as ResizableBuffer::MakeShared.
std::shared_ptr<Buffer> AdoptBuiltBytes(MemoryPool* pool, std::shared_ptr<MemoryPool> owner,
                                        uint8_t* data, int64_t size, int64_t capacity);

/// The pool of a buffer a builder made (ResizableBuffer::MakeShared, or
/// AdoptBuiltBytes as BufferBuilder does), or null for any other buffer.
MemoryPool* BuiltBufferPool(const Buffer& buffer);

/// MakeArray's typed array, in the object memory of `pool`.
ArrayPtr MakeArrayIn(ArrayDataPtr data, MemoryPool* pool);

}  // namespace alkaid::format::internal
