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
/// One count for the whole batch. None of these objects has a reference
/// count of its own: a pointer to one that a builder or RecordBatch::Make
/// hands out shares the count of the pool's owner (the region, its
/// MemoryPool::shared_owner, which the builder already holds for the
/// bytes). The links between them (a batch's columns, an array data's
/// buffers, an array's data) share a second count, the memory's *anchor*,
/// and are made once: the next use of the memory that makes the same
/// objects in the same order finds each link in place and only fills in
/// lengths and addresses. A pointer copied from a link (`batch->columns()`,
/// `data->buffers[1]`) shares the anchor.
///
/// When the owner's last holder goes, the owner calls Release: if nothing
/// holds the anchor but the links themselves (*quiet*), the memory is idle
/// at once; otherwise something copied from a link is still held (a column
/// kept after its batch and pool went), and a library thread looks again
/// every 20 ms and finishes the release once the memory is quiet. Either
/// way the owner's memory (the region's bytes the objects point to) is
/// let go only then, on whatever thread: every pointer taken from a batch
/// owns what it points to.
///
/// A buffer object made here gives nothing back when its batch goes (it has
/// no count of its own): the owner gives back the bytes of all its buffers
/// when its count falls to zero and Release's `done` runs, as a region's
/// bump allocator does. A pool offers an ObjectMemory only on that
/// condition.
///
/// An object whose links would leave the memory (an array data of buffers
/// from another pool, a batch of columns made elsewhere) and every object
/// past the last slot are made on the heap, with counts of their own, as
/// without an ObjectMemory.
///
/// A weak_ptr taken from one of these objects (rather than from the pool's
/// owner) does not expire with the batch: it may lock onto the object of a
/// later batch made in the same slot.
///
/// Thread safety: objects are made on one thread at a time per use (the
/// builders of one batch; a lock-free cursor) and may be dropped on any
/// thread; Open and Release are for the owner alone.

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
  /// Slots, and bytes per slot (an object; a larger object is made on the
  /// heap). A column built with a builder takes three slots (its buffer
  /// object, array data and array), a batch one.
  static constexpr size_t kSlots = 24;
  static constexpr size_t kSlotBytes = 256;

  ObjectMemory();
  /// Destroys the objects. The memory must be idle (quiet, not pinned by
  /// Release).
  ~ObjectMemory();
  ObjectMemory(const ObjectMemory&) = delete;
  ObjectMemory& operator=(const ObjectMemory&) = delete;

  /// Starts a use: objects are made from the first slot again. `owner` is
  /// not kept (the objects share the owner's count through the pointers
  /// their makers pass in: see the file comment); kept for the callers of
  /// the first version of this class.
  void Open(std::weak_ptr<void> owner = {});

  /// What Release calls once the memory is idle.
  using Done = void (*)(void* arg);
  /// Ends the use, for an owner whose last holder is gone: nothing more is
  /// made here, and `done(arg)` is called once nothing made here is held:
  /// before Release returns if the memory is quiet, else on a library
  /// thread, within about 20 ms of the last pointer taken from a link
  /// going. The owner keeps what the objects point to until then.
  void Release(Done done, void* arg);

  /// Deprecated: Release. Ends the use at once; only for a caller that
  /// knows no object made here is held any more (Quiet()).
  void Close();

  /// True if nothing holds an object made here but the memory's own links.
  /// Exact once the owner's last holder is gone (no new pointer can
  /// appear); a snapshot before that.
  bool Quiet() const;

 private:
  friend struct internal::ObjectMemoryAccess;

  // The next slot (the makers of one use).
  std::atomic<size_t> next_{kSlots};
  // Links the objects hold (each shares anchor_): the anchor's count is
  // links_ + 1 when quiet. Written by the makers while the owner is held.
  long links_ = 0;  // NOLINT(google-runtime-int): std::shared_ptr::use_count's type
  std::shared_ptr<void> anchor_;
  alignas(std::max_align_t) std::byte anchor_block_[64];
  alignas(std::max_align_t) std::byte slots_[kSlots * kSlotBytes];
};

}  // namespace alkaid::format
