#pragma once

/// \file
/// ObjectMemory: the object graph of one recycled pool's batch, linked once
/// and kept with the pool's memory for its next use.
///
/// A producer that builds each batch in a fresh region of shared memory
/// (client::ShmBatchPool) makes the same handful of objects per batch: a
/// buffer object per buffer a builder finishes, an ArrayData and a typed
/// Array per array, and the RecordBatch made of them. A pool with an
/// ObjectMemory (MemoryPool::object_memory) has them made here instead, in
/// the order they are made, one per slot of a fixed block of memory: the
/// producer-side twin of BatchTemplate's graphs.
///
/// One count for the whole batch: the owner's. None of these objects has a
/// reference count of its own. A pointer to one that a builder or
/// RecordBatch::Make hands out shares the count of the pool's owner (the
/// region, its MemoryPool::shared_owner, which the builder already holds
/// for the bytes), and so does every pointer copied from a link between
/// them (`batch->columns()`, `data->buffers[1]`, a slice, an export): a
/// column kept after its batch and pool went holds the owner as the batch
/// did. The links themselves (a batch's columns, an array data's buffers,
/// an array's data) point into the owner's count without holding it (see
/// Open), so they never keep the owner, and they are made once: the next
/// use of the memory that makes the same objects in the same order finds
/// each link in place and only fills in lengths and addresses.
///
/// So the owner's count falls to zero exactly when nothing made here is
/// held, on whichever thread drops the last pointer; the owner then lets go
/// of its bytes and may Open the memory for its next use at once. There is
/// no sweep and no thread.
///
/// A buffer object made here gives nothing back when its batch goes (it has
/// no count of its own): the owner gives back the bytes of all its buffers
/// when its count falls to zero, as a region's bump allocator does. A pool
/// offers an ObjectMemory only on that condition.
///
/// An object whose links would leave the memory (an array data of buffers
/// from another pool, a batch of columns made elsewhere, an array class that
/// keeps more than its data) and every object past the last slot are made
/// on the heap, with counts of their own (that hold the owner through their
/// pointers), as without an ObjectMemory.
///
/// The objects of a use are shared, immutable as any Arrow object: a caller
/// must not assign to the links of an object it was handed (an ArrayData's
/// `buffers`, `child_data` or `dictionary`); copy the ArrayData first.
///
/// Thread safety: objects are made on one thread at a time per use (the
/// builders of one batch; a lock-free cursor) and may be dropped on any
/// thread; Open and Close are for the owner alone.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "alkaid/common/export.h"

namespace alkaid::format {

namespace internal {
struct ObjectMemoryAccess;
}  // namespace internal

class ALKAID_EXPORT ObjectMemory {
 public:
  /// Slots, and bytes per slot (an object; a larger object is made on the
  /// heap). A column built with a builder takes three slots (its buffer
  /// object, array data and array), a batch one.
  static constexpr size_t kSlots = 24;
  static constexpr size_t kSlotBytes = 256;

  ObjectMemory();
  /// Destroys the objects. Nothing made here may be held (the owner's count
  /// of the last use has fallen to zero, or the memory was never opened).
  ~ObjectMemory();
  ObjectMemory(const ObjectMemory&) = delete;
  ObjectMemory& operator=(const ObjectMemory&) = delete;

  /// Starts a use owned by `owner`: objects are made from the first slot
  /// again, and every pointer handed out for them or copied from their
  /// links shares `owner`'s count. Not kept: the links hold its control
  /// block's address, uncounted, so the owner's count must live at that
  /// address until it falls to zero (a count made in the owner's own block,
  /// as ShmBatchPool's, serves every use: the links stay valid from one use
  /// to the next; an owner of another control block than the last use's
  /// has the objects made afresh). Call only when nothing of the last use
  /// is held (its owner's count fell to zero).
  template <typename T>
  void Open(const std::shared_ptr<T>& owner) {
    static_assert(sizeof(owner) == sizeof(std::shared_ptr<void>), "a pointer and a count");
    // The same bits as the last use's owner (a count made at the same place
    // for the same object, as a region's): the links stay, nothing to
    // change but the cursor (relaxed: the makers run on threads the owner
    // handed the pool to).
    if (std::memcmp(static_cast<const void*>(&owner_), static_cast<const void*>(&owner),
                    sizeof(owner_)) == 0) {
      next_.store(0, std::memory_order_relaxed);
      return;
    }
    Begin(&owner, !owner.owner_before(owner_) && !owner_.owner_before(owner));
  }

  /// Ends the use: nothing more is made here. Call it when the owner's count
  /// falls to zero (nothing made here is held then), or earlier to stop
  /// making objects here.
  void Close() { next_.store(kSlots, std::memory_order_relaxed); }

 private:
  friend struct internal::ObjectMemoryAccess;

  // Open's work for an owner of other bits than the last use's: `owner` is
  // a std::shared_ptr<T>, whose bits are kept in owner_; `same_owner`, the
  // count it shares is the last use's.
  void Begin(const void* owner, bool same_owner);
  // Destroys every object (their links are forgotten, not dropped).
  void DestroyAll();

  // The next slot (the makers of one use).
  std::atomic<size_t> next_{kSlots};
  // The owner of the current (or last) use as the links hold it: its bits,
  // without a count of its own (never destroyed as a shared_ptr).
  std::shared_ptr<void> owner_;
  alignas(std::max_align_t) std::byte slots_[kSlots * kSlotBytes];
};

}  // namespace alkaid::format
