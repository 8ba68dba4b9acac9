#pragma once

// Objects made over a pool's buffers in the pool's object memory
// (MemoryPool::object_memory, or the older MemoryPool::object_pool): a
// builder's buffer objects, the array data and array it finishes, the record
// batch made of them. Not installed.

#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "alkaid/format/array.h"
#include "alkaid/format/array_data.h"
#include "alkaid/format/builder_base.h"
#include "alkaid/format/memory_pool.h"
#include "alkaid/format/object_memory.h"
#include "alkaid/format/record_batch.h"
#include "alkaid/format/type_fwd.h"

namespace alkaid::format::internal {

/// A builder's buffer made in a pool's object memory (AdoptBuiltBytes): its
/// bytes belong to the owner's region and go with it, so the object has
/// nothing of its own to give back.
class GraphBuffer final : public Buffer {
 public:
  explicit GraphBuffer(ObjectMemory* memory) : memory_(memory) { is_mutable_ = true; }
  /// The object memory the buffer object was made in.
  ObjectMemory* memory() const { return memory_; }
  void Point(MemoryPool* pool, uint8_t* data, int64_t size, int64_t capacity) {
    pool_ = pool;
    data_ = data;
    size_ = size;
    capacity_ = capacity;
  }
  MemoryPool* memory_pool() const { return pool_; }

 private:
  ObjectMemory* memory_;
  MemoryPool* pool_ = nullptr;
};

/// The slots of an ObjectMemory (object_memory.h): each holds one object
/// (kind says of which type, or null), made in the order the makers ask,
/// and kept from one use to the next with its links.
///
/// A link (a shared_ptr inside one of these objects to another of them)
/// shares the owner's control block without holding a count of it: its
/// bits are the object's address and the control block's (Uncounted), it
/// is ended by overwriting it (Forget), never by its destructor or an
/// assignment, and a copy of it is an ordinary counted pointer. Link makes
/// and unmakes them, and leaves one that already points where it should.
/// An object is linked only to objects of the same memory: one whose links
/// would leave it is made on the heap by its maker instead, so that no
/// object of the memory holds a count of anything that could hold the
/// memory's owner (which would keep it from ever going).
///
/// That a shared_ptr's bits may be copied, and an empty one's bits written
/// over it, without its count changing, holds for every standard library
/// we build with (a pointer and a control block pointer: checked below and
/// by ObjectMemoryTest.LinksHoldNoCount).
struct ObjectMemoryAccess {
  struct Slot {
    const void* kind = nullptr;                       // type of the object here, or null
    void (*destroy)(ObjectMemory*, void*) = nullptr;  // forgets its links and destroys it
    // A typed array: the object as an Array, the type id it was made for
    // (MakeTypedArray's choice of class) and whether its class keeps
    // nothing but its data (FinishFlat takes only those). Else null.
    Array* array = nullptr;
    int32_t array_type = -1;
    bool plain_array = false;
    alignas(16) std::byte object[ObjectMemory::kSlotBytes - 32];
  };
  static_assert(sizeof(Slot) == ObjectMemory::kSlotBytes, "a slot fills its place");
  static_assert(sizeof(ArrayData) <= sizeof(Slot::object) &&
                    sizeof(RecordBatch) <= sizeof(Slot::object),
                "array data and batches fit a slot");
  static_assert(sizeof(std::shared_ptr<Buffer>) == 2 * sizeof(void*),
                "a shared_ptr is a pointer and a control block pointer");

  static Slot* SlotAt(ObjectMemory* m, size_t i) {
    return std::launder(reinterpret_cast<Slot*>(m->slots_ + i * ObjectMemory::kSlotBytes));
  }
  /// True if `p` is an object of `m`.
  static bool Owns(const ObjectMemory* m, const void* p) {
    const auto* b = static_cast<const std::byte*>(p);
    return b >= m->slots_ && b < m->slots_ + sizeof(m->slots_);
  }

  // A tag per type, for Slot::kind (every object of a memory is made by
  // code of this library: one address per type).
  template <typename T>
  static const void* Kind() {
    static const char tag = 0;
    return &tag;
  }

  /// Ends `p` without a decrement of its count: for a link (which holds
  /// none). `p` is empty after.
  template <typename T>
  static void Forget(std::shared_ptr<T>& p) {
    ::new (static_cast<void*>(&p)) std::shared_ptr<T>();
  }
  /// A link to `to` in the owner's control block, holding no count.
  template <typename T>
  static std::shared_ptr<T> Uncounted(const ObjectMemory* m, T* to) {
    std::shared_ptr<void> owner;
    std::memcpy(static_cast<void*>(&owner), static_cast<const void*>(&m->owner_), sizeof(owner));
    // The aliasing move: the bits go over, no count changes; `owner` is empty.
    return std::shared_ptr<T>(std::move(owner), to);
  }

  /// Points `link` at `to` (an object of `m`, or null).
  template <typename T>
  static void Link(ObjectMemory* m, std::shared_ptr<T>& link, T* to) {
    if (link.get() == to) return;
    Forget(link);
    if (to != nullptr) link = Uncounted(m, to);  // moved: `link` was empty
  }
  template <typename T>
  static void UnlinkAll(std::vector<std::shared_ptr<T>>& links) {
    for (auto& l : links) Forget(l);
    links.clear();  // empty pointers: nothing to drop
  }
  static void Unlink(ArrayData* d) {
    UnlinkAll(d->buffers);
    UnlinkAll(d->child_data);
    Forget(d->dictionary);
  }
  static void Unlink(RecordBatch* b) { UnlinkAll(b->columns_); }
  // data() is the array's own member.
  static void Unlink(Array* a) { Forget(const_cast<ArrayDataPtr&>(a->data())); }
  static void Unlink(Buffer* /*b*/) {}

  template <typename T>
  static void Destroy(ObjectMemory* /*m*/, void* p) {
    T* obj = static_cast<T*>(p);
    Unlink(obj);
    obj->~T();
  }

  /// The next slot of `m` for a T: the T left there by the last use
  /// (`*reused` set), or a new one made by `construct(address)` in place of
  /// whatever was there. Null when `m` has no slot left (or is not open) or
  /// a T does not fit one: the caller makes the object elsewhere.
  template <typename T, typename Construct>
  static T* Take(ObjectMemory* m, bool* reused, Construct&& construct, Slot** slot = nullptr) {
    if constexpr (sizeof(T) > sizeof(Slot::object) || alignof(T) > 16) {
      return nullptr;
    } else {
      // Relaxed: each slot goes to one maker; the objects reach other
      // threads by the usual means.
      const size_t i = m->next_.fetch_add(1, std::memory_order_relaxed);
      if (i >= ObjectMemory::kSlots) return nullptr;
      Slot* s = SlotAt(m, i);
      if (slot != nullptr) *slot = s;
      if (s->kind == Kind<T>()) {
        *reused = true;
        return std::launder(reinterpret_cast<T*>(s->object));
      }
      if (s->kind != nullptr) s->destroy(m, s->object);
      s->kind = nullptr;
      s->array = nullptr;
      s->array_type = -1;
      s->plain_array = false;
      T* obj = construct(static_cast<void*>(s->object));
      s->kind = Kind<T>();
      s->destroy = &Destroy<T>;
      *reused = false;
      return obj;
    }
  }

  /// Takes the next `n` slots of `m` for a maker that looks at them before
  /// it knows it will use them (FinishFlat, MakeLinkedBatch): a maker on
  /// another thread then cannot write them meanwhile. False if fewer are
  /// left (or `m` is not open).
  static bool Claim(ObjectMemory* m, size_t n, size_t* first) {
    size_t i = m->next_.load(std::memory_order_relaxed);
    // Relaxed, as Take: the slots go to this maker alone.
    do {
      if (i > ObjectMemory::kSlots - n) return false;
    } while (!m->next_.compare_exchange_weak(i, i + n, std::memory_order_relaxed));
    *first = i;
    return true;
  }
  /// Gives back the `n` slots Claim took at `first`, if no maker took a
  /// slot after them meanwhile; else they stay unused in this use (their
  /// objects and links as they were).
  static void Unclaim(ObjectMemory* m, size_t n, size_t first) {
    size_t expected = first + n;
    m->next_.compare_exchange_strong(expected, first, std::memory_order_relaxed);
  }

  /// The array data of `type`, `length`, `null_count` and the N `buffers`
  /// (each an object of `m`, or null; at least one not null) in the next
  /// slot of `m`, handed out sharing the count of the first buffer pointer
  /// (moved from). Null, the buffers untouched, when there is no slot.
  template <size_t N>
  static ArrayDataPtr MakeArrayData(ObjectMemory* m, const TypePtr& type, int64_t length,
                                    std::shared_ptr<Buffer> (&buffers)[N], int64_t null_count) {
    bool reused = false;
    ArrayData* d = Take<ArrayData>(m, &reused, [](void* at) { return ::new (at) ArrayData(); });
    if (d == nullptr) return nullptr;
    if (d->type != type) d->type = type;
    d->length = length;
    d->null_count = null_count;
    d->offset = 0;
    if (d->buffers.size() != N) {
      UnlinkAll(d->buffers);
      d->buffers.resize(N);
    }
    if (!d->child_data.empty()) UnlinkAll(d->child_data);
    if (d->dictionary != nullptr) Forget(d->dictionary);
    std::shared_ptr<Buffer>* owner = nullptr;
    for (size_t k = 0; k < N; ++k) {
      Link(m, d->buffers[k], buffers[k].get());
      if (owner == nullptr && buffers[k] != nullptr) owner = &buffers[k];
    }
    return ArrayDataPtr(std::move(*owner), d);
  }

  /// A record batch of `schema` and `num_rows` rows over the `n` column
  /// data `column(i)` (objects of `m`), in the next slot of `m`, handed out
  /// sharing the count of `owner`. `schema` is moved in when a batch is
  /// made. Null when there is no slot.
  template <typename Owner, typename Column>
  static std::shared_ptr<RecordBatch> MakeBatch(ObjectMemory* m, SchemaPtr& schema,
                                                int64_t num_rows, size_t n, Owner&& owner,
                                                Column&& column) {
    bool reused = false;
    RecordBatch* b = Take<RecordBatch>(m, &reused, [](void* at) {
      auto* made = ::new (at) RecordBatch(RecordBatch::Key{}, nullptr, 0, {});
      // Reused with the memory: a boxed column would hold the owner.
      made->box_per_call_ = true;
      return made;
    });
    if (b == nullptr) return nullptr;
    if (b->schema_ != schema) b->schema_ = std::move(schema);
    b->num_rows_ = num_rows;
    if (b->metadata_ != nullptr) b->metadata_.reset();
    b->export_slot_ = nullptr;
    if (b->columns_.size() != n) {
      UnlinkAll(b->columns_);
      b->columns_.resize(n);
    }
    for (size_t i = 0; i < n; ++i) Link(m, b->columns_[i], column(i));
    return std::shared_ptr<RecordBatch>(std::forward<Owner>(owner), b);
  }

  /// MakeBatch for the `n` typed arrays `columns` when the next slot's batch
  /// is already linked to their data (the block's last batch of this shape)
  /// and of `schema` itself: only the row count is filled in. Checks what
  /// RecordBatch::Make's checks could find changed since that batch was
  /// made with the same schema object: each column's row count, and its
  /// type (the very field type's object; another equal one takes the
  /// general path). The links only ever point into `m`: equal links prove
  /// the columns are objects of `m`. Null, nothing taken, otherwise (the
  /// general path then checks and says what is wrong).
  [[gnu::always_inline]] static std::shared_ptr<RecordBatch> MakeLinkedBatch(
      ObjectMemory* m, const SchemaPtr& schema, int64_t num_rows, size_t n,
      const ArrayPtr* columns) {
    size_t i = 0;
    if (schema == nullptr || num_rows < 0 || !Claim(m, 1, &i)) return nullptr;
    Slot* s = SlotAt(m, i);
    bool linked = s->kind == Kind<RecordBatch>();
    auto* b = linked ? std::launder(reinterpret_cast<RecordBatch*>(s->object)) : nullptr;
    linked = linked && b->schema_ == schema && b->columns_.size() == n;
    const FieldVector& fields = schema->fields();
    for (size_t k = 0; k < n && linked; ++k) {
      const ArrayData* d = columns[k] == nullptr ? nullptr : columns[k]->data().get();
      linked = d != nullptr && b->columns_[k].get() == d && d->length == num_rows &&
               d->type == fields[k]->type();
    }
    if (!linked) {
      Unclaim(m, 1, i);
      return nullptr;
    }
    b->num_rows_ = num_rows;
    if (b->metadata_ != nullptr) b->metadata_.reset();
    b->export_slot_ = nullptr;
    return std::shared_ptr<RecordBatch>(columns[0], b);
  }

  /// The object memory whose buffer object is the first buffer of `data`,
  /// or null.
  static ObjectMemory* MemoryOf(const ArrayData* data) {
    for (const auto& b : data->buffers) {
      if (b == nullptr) continue;
      // A type comparison, not a dynamic_cast: the class is final.
      const Buffer& buffer = *b;
      if (typeid(buffer) != typeid(GraphBuffer)) return nullptr;
      return static_cast<const GraphBuffer&>(buffer).memory();
    }
    return nullptr;
  }

  /// The typed array T over `data` (an object of `m`), in the next slot of
  /// `m`, handed out sharing `data`'s count (moved from). Null when there
  /// is no slot.
  template <typename T>
  static ArrayPtr MakeArray(ObjectMemory* m, ArrayDataPtr& data) {
    // An array class with no members of its own keeps nothing derived from
    // its data: the one of the last use serves if it has the same data. A
    // fixed-size binary array keeps its byte width too, and is made again.
    // Any other class may keep pointers made from its data (children, a
    // dictionary, a storage array), whose counts would hold the owner: not
    // made here.
    constexpr bool kPlain = sizeof(T) == sizeof(Array);
    if constexpr (!kPlain && !(std::is_base_of_v<FixedSizeBinaryArray, T> &&
                               sizeof(T) == sizeof(FixedSizeBinaryArray))) {
      return nullptr;
    } else {
      ArrayData* d = data.get();
      bool reused = false;
      Slot* s = nullptr;
      T* a = Take<T>(
          m, &reused, [&](void* at) { return ::new (at) T(Uncounted(m, d)); }, &s);
      if (a == nullptr) return nullptr;
      if (reused && (!kPlain || a->data().get() != d)) {
        Destroy<T>(m, a);
        a = ::new (static_cast<void*>(a)) T(Uncounted(m, d));
      }
      s->array = a;
      s->array_type = static_cast<int32_t>(d->type->id());
      s->plain_array = kPlain;
      return ArrayPtr(std::move(data), a);
    }
  }

  /// A fixed-width array of `type` and `length` values without nulls over
  /// the bytes of `values`, made of the next three slots of `m` when they
  /// hold what the general path made there for the block's last batch of
  /// this shape (its buffer object, an array data linked to it alone, a
  /// plain array of the type's class linked to that): only the lengths
  /// and addresses are filled in, and the array is handed out sharing the
  /// bytes' owner. Null, `values` untouched, otherwise (Finish then takes
  /// the general path, which makes and links them).
  [[gnu::always_inline]] static ArrayPtr FinishFlat(ObjectMemory* m, const TypePtr& type,
                                                    int64_t length, BufferBuilder* values) {
    size_t i = 0;
    if (!Claim(m, 3, &i)) return nullptr;
    Slot* s0 = SlotAt(m, i);
    Slot* s1 = SlotAt(m, i + 1);
    Slot* s2 = SlotAt(m, i + 2);
    if (s0->kind != Kind<GraphBuffer>() || s1->kind != Kind<ArrayData>() || !s2->plain_array ||
        s2->array_type != static_cast<int32_t>(type->id())) {
      Unclaim(m, 3, i);
      return nullptr;
    }
    auto* buffer = std::launder(reinterpret_cast<GraphBuffer*>(s0->object));
    auto* d = std::launder(reinterpret_cast<ArrayData*>(s1->object));
    Array* a = s2->array;
    if (d->buffers.size() != 2 || d->buffers[0] != nullptr || d->buffers[1].get() != buffer ||
        !d->child_data.empty() || d->dictionary != nullptr || a->data().get() != d) {
      Unclaim(m, 3, i);
      return nullptr;
    }
    BufferBuilder::Bytes bytes = values->TakeBytes();
    buffer->Point(bytes.owner.get(), bytes.data, bytes.size, bytes.capacity);
    if (d->type != type) d->type = type;  // the same type id: the same array class
    d->length = length;
    d->null_count = 0;
    d->offset = 0;
    return ArrayPtr(std::move(bytes.owner), a);
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

/// A `T` made with `args` for objects over the buffers of `pool`: in its
/// object_pool() if it has one, else (null, or a pool without) on the heap,
/// as std::make_shared. (The graph of a pool's ObjectMemory is made by
/// MakeArrayData, AdoptBuiltBytes, MakeArrayIn and RecordBatch::Make.)
template <typename T, typename... Args>
std::shared_ptr<T> MakePoolObject(MemoryPool* pool, Args&&... args) {
  if (pool != nullptr) {
    if (std::shared_ptr<MemoryPool> objects = pool->object_pool()) {
      return std::allocate_shared<T>(PoolObjectAllocator<T>(std::move(objects)),
                                     std::forward<Args>(args)...);
    }
  }
  return std::make_shared<T>(std::forward<Args>(args)...);
}

/// ArrayData::Make's array data for a builder of `pool`, with the `N`
/// buffers moved in: in the object memory of `pool` when every buffer is
/// one of its objects (AdoptBuiltBytes), linked once per shape; else
/// as MakePoolObject.
template <size_t N>
ArrayDataPtr MakeArrayData(MemoryPool* pool, const TypePtr& type, int64_t length,
                           std::shared_ptr<Buffer> (&&buffers)[N], int64_t null_count) {
  if (pool != nullptr) {
    if (ObjectMemory* m = pool->object_memory()) {
      bool any = false;
      bool inside = true;
      for (const auto& b : buffers) {
        if (b == nullptr) continue;
        any = true;
        inside = inside && ObjectMemoryAccess::Owns(m, b.get());
      }
      if (any && inside) {
        auto d = ObjectMemoryAccess::MakeArrayData(m, type, length, buffers, null_count);
        if (d != nullptr) return d;
      }
    }
  }
  auto d = MakePoolObject<ArrayData>(pool);
  d->type = type;
  d->length = length;
  d->null_count = null_count;
  d->buffers.reserve(N);
  for (auto& b : buffers) d->buffers.push_back(std::move(b));
  return d;
}

/// The buffer a builder hands out (BufferBuilder::Finish): it takes
/// `data`, an allocation of `capacity` bytes (a multiple of 64, zero past
/// `size`) from `owner` (the pool's shared owner, which it keeps) or, when
/// that is null, from `pool`. In the object memory of the pool when it
/// has one and `owner` (whose count the buffer then shares: the bytes go
/// with the owner's region); else a ResizableBuffer of its own that gives
/// the bytes back when it goes.
std::shared_ptr<Buffer> AdoptBuiltBytes(MemoryPool* pool, std::shared_ptr<MemoryPool> owner,
                                        uint8_t* data, int64_t size, int64_t capacity);

/// The pool of a buffer a builder made (ResizableBuffer::MakeShared, or
/// AdoptBuiltBytes as BufferBuilder does), or null for any other buffer.
MemoryPool* BuiltBufferPool(const Buffer& buffer);

/// MakeArray's typed array, in the object memory of `pool` when `data` is
/// one of its objects; else as MakePoolObject.
ArrayPtr MakeArrayIn(ArrayDataPtr data, MemoryPool* pool);

}  // namespace alkaid::format::internal
