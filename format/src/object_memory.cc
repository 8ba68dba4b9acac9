// ObjectMemory (object_memory.h): the slots and links are laid out and made
// in pool_object_internal.h (ObjectMemoryAccess); this file opens and ends
// the uses and destroys the objects.
//
// The links share the owner's count without holding it, so the owner's
// count is the whole batch's: when it falls to zero nothing made here is
// held (every pointer to an object here, handed out or copied from a link,
// shares it) and the owner finishes its release on that thread. Its last
// drop is an acq_rel decrement (std::shared_ptr's), so whatever any holder
// did with the objects happens before the owner lets go of them.

#include "alkaid/format/object_memory.h"

#include <cstring>
#include <new>

#include "pool_object_internal.h"

namespace alkaid::format {

using Access = internal::ObjectMemoryAccess;

ObjectMemory::ObjectMemory() {
  for (size_t i = 0; i < kSlots; ++i) ::new (slots_ + i * kSlotBytes) Access::Slot();
}

ObjectMemory::~ObjectMemory() {
  DestroyAll();
  for (size_t i = 0; i < kSlots; ++i) Access::SlotAt(this, i)->~Slot();
  Access::Forget(owner_);  // its bits only: it holds no count
}

void ObjectMemory::DestroyAll() {
  for (size_t i = 0; i < kSlots; ++i) {
    Access::Slot* s = Access::SlotAt(this, i);
    if (s->kind != nullptr) s->destroy(this, s->object);
    s->kind = nullptr;
    s->array = nullptr;
    s->array_type = -1;
    s->plain_array = false;
  }
}

void ObjectMemory::Begin(const void* owner, bool same_owner) {
  // Another owner's bits than the last use's (Open took the same bits'
  // way). Links into another control block than the new owner's would
  // hand out pointers of the wrong count: the objects are made afresh.
  if (!same_owner) DestroyAll();
  Access::Forget(owner_);
  std::memcpy(static_cast<void*>(&owner_), owner, sizeof(owner_));
  // Relaxed: the makers run on threads the owner handed the pool to.
  next_.store(0, std::memory_order_relaxed);
}

}  // namespace alkaid::format
