#pragma once

/// \file
/// ObjectMemory: where the objects made over one recycled pool's buffers
/// live, and are kept for the pool's next use.
///
/// A producer that builds each batch in a fresh region of shared memory
/// (client::ShmBatchPool) makes the same handful of objects per batch: a
/// buffer object per buffer a builder grows, an ArrayData and a typed Array
/// per array it finishes, and the RecordBatch made of them. A pool with an
/// ObjectMemory (MemoryPool::object_memory) has them made here instead of on
/// the heap: each in a slot of a fixed block of memory, with its reference
/// count in the slot too. When the last pointer to an object goes, the
/// object is parked in its slot rather than freed: an ArrayData or a
/// RecordBatch lets go of everything it points to but keeps its vectors'
/// capacity; any other object is destroyed. When the pool's region is used
/// again, the objects made in the same order as the last time take the same
/// slots back: a batch of the same shape as the one before costs no heap
/// allocation and no constructor of a vector.
///
/// Each object holds the owner given to Open (the pool's region) while any
/// pointer to it lives, on whatever thread it is dropped: a batch, column or
/// buffer outlives the pool handle and the builder that made it.
///
/// Objects that do not fit in the block are made on the heap (as without an
/// ObjectMemory).
///
/// Thread safety: objects may be made on any thread while the owner is
/// open (a lock-free cursor) and dropped on any thread; Open and Close are
/// for the owner alone, with no object of this memory alive (Close is
/// called once the owner's last holder is gone).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "alkaid/common/export.h"

namespace alkaid::format {

namespace internal {
struct ObjectMemoryAccess;
}  // namespace internal

class ALKAID_EXPORT ObjectMemory {
 public:
  /// Slots, and bytes per slot (an object and its reference count; a
  /// larger object is made on the heap). A column built with a builder
  /// takes three slots (its buffer object, array data and array), a batch
  /// one.
  static constexpr size_t kSlots = 24;
  static constexpr size_t kSlotBytes = 256;

  ObjectMemory();
  /// Destroys the parked objects. No object made here may be alive.
  ~ObjectMemory();
  ObjectMemory(const ObjectMemory&) = delete;
  ObjectMemory& operator=(const ObjectMemory&) = delete;

  /// Starts a use: objects made from now on hold `owner` (a strong
  /// reference each, taken from this weak one) while they live.
  void Open(std::weak_ptr<void> owner);
  /// Ends the use: every object made since Open is gone (parked). The next
  /// Open makes its objects in the same slots again, from the first.
  void Close();

 private:
  friend struct internal::ObjectMemoryAccess;

  std::weak_ptr<void> owner_;
  // The next slot (taken by any thread while open).
  std::atomic<size_t> next_{0};
  alignas(std::max_align_t) std::byte slots_[kSlots * kSlotBytes];
};

}  // namespace alkaid::format
