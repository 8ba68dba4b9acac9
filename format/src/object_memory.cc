// ObjectMemory (object_memory.h): the slots are laid out in
// pool_object_internal.h (ObjectMemoryAccess); this file opens, closes and
// clears them.

#include "alkaid/format/object_memory.h"

#include <new>
#include <utility>

#include "pool_object_internal.h"

namespace alkaid::format {

using Access = internal::ObjectMemoryAccess;

ObjectMemory::ObjectMemory() {
  for (size_t i = 0; i < kSlots; ++i) ::new (slots_ + i * kSlotBytes) Access::Slot();
}

ObjectMemory::~ObjectMemory() {
  for (size_t i = 0; i < kSlots; ++i) {
    Access::Slot* s = Access::SlotAt(this, i);
    if (s->kind != nullptr) s->destroy(s->object);
    s->~Slot();
  }
}

void ObjectMemory::Open(std::weak_ptr<void> owner) {
  owner_ = std::move(owner);
  next_.store(0, std::memory_order_relaxed);
}

void ObjectMemory::Close() {
  owner_.reset();
  next_.store(0, std::memory_order_relaxed);
}

}  // namespace alkaid::format
