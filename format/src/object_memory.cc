// ObjectMemory (object_memory.h): the slots and links are laid out and made
// in pool_object_internal.h (ObjectMemoryAccess); this file makes the
// anchor, opens and releases the memory, and sweeps the memories released
// while something taken from a link was still held.
//
// Reading the anchor's count is a relaxed load followed by an acquire
// fence: every holder's last drop of a pointer sharing the anchor is an
// acq_rel decrement of that count, so whatever it did with the objects (and
// the owner's bytes they point to) happens before the owner's release goes
// on. No pointer into a quiet memory whose owner is gone can appear: taking
// one needs a pointer already held.

#include "alkaid/format/object_memory.h"

#include <unistd.h>

#include <chrono>
#include <mutex>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "pool_object_internal.h"

// Built with ThreadSanitizer (gcc's macro, clang's feature test).
#if defined(__SANITIZE_THREAD__)
#define ALKAID_OM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ALKAID_OM_TSAN 1
#endif
#endif
#ifndef ALKAID_OM_TSAN
#define ALKAID_OM_TSAN 0
#endif

namespace alkaid::format {

using Access = internal::ObjectMemoryAccess;

namespace {

// The anchor's control block, in the memory's own bytes. The anchor's
// count never falls to zero before the memory is destroyed: nothing to do
// then.
template <typename T>
struct AnchorAllocator {
  using value_type = T;
  std::byte* place;
  explicit AnchorAllocator(std::byte* p) : place(p) {}
  template <typename U>
  explicit AnchorAllocator(const AnchorAllocator<U>& o) : place(o.place) {}
  T* allocate(size_t n) {
    static_assert(sizeof(T) <= 64 && alignof(T) <= alignof(std::max_align_t),
                  "the anchor's control block must fit its place");
    if (n != 1) throw std::bad_alloc();
    return static_cast<T*>(static_cast<void*>(place));
  }
  void deallocate(T* /*p*/, size_t /*n*/) noexcept {}
  template <typename U>
  bool operator==(const AnchorAllocator<U>& o) const {
    return place == o.place;
  }
};

struct NoDelete {
  void operator()(void* /*p*/) const {}
};

// Memories released while not quiet, looked at every 20 ms by a thread of
// the library until each is quiet; the thread runs while there are any.
class Sweeper {
 public:
  static Sweeper& Get() {
    // Never destroyed: its thread may outlive static destruction at exit.
    static Sweeper* sweeper = new Sweeper;
    return *sweeper;
  }

  void Watch(const ObjectMemory* m, ObjectMemory::Done done, void* arg) {
    std::lock_guard<std::mutex> lock(mutex_);
    watched_.push_back({m, done, arg});
    if (!running_ || pid_ != ::getpid()) {  // a fork has no thread of ours
      running_ = true;
      pid_ = ::getpid();
      std::thread([this] { Run(); }).detach();
    }
  }

 private:
  struct Entry {
    const ObjectMemory* memory;
    ObjectMemory::Done done;
    void* arg;
  };

  void Run() {
    std::vector<Entry> ready;
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (size_t i = 0; i < watched_.size();) {
          if (watched_[i].memory->Quiet()) {
            ready.push_back(watched_[i]);
            watched_[i] = watched_.back();
            watched_.pop_back();
          } else {
            ++i;
          }
        }
        if (watched_.empty() && ready.empty()) {
          running_ = false;
          return;
        }
      }
      // Outside the lock: `done` may let go of the memory itself.
      for (const Entry& e : ready) e.done(e.arg);
      ready.clear();
    }
  }

  std::mutex mutex_;
  std::vector<Entry> watched_;
  bool running_ = false;
  pid_t pid_ = 0;
};

}  // namespace

ObjectMemory::ObjectMemory()
    : anchor_(static_cast<void*>(this), NoDelete{}, AnchorAllocator<void>(anchor_block_)) {
  for (size_t i = 0; i < kSlots; ++i) ::new (slots_ + i * kSlotBytes) Access::Slot();
}

ObjectMemory::~ObjectMemory() {
  for (size_t i = 0; i < kSlots; ++i) {
    Access::Slot* s = Access::SlotAt(this, i);
    if (s->kind != nullptr) s->destroy(this, s->object);
    s->~Slot();
  }
  anchor_.reset();
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): the first version's signature, kept
void ObjectMemory::Open(std::weak_ptr<void> /*owner*/) {
  next_.store(0, std::memory_order_relaxed);
}

void ObjectMemory::Close() { next_.store(kSlots, std::memory_order_relaxed); }

bool ObjectMemory::Quiet() const {
  const long n = anchor_.use_count();  // NOLINT(google-runtime-int): use_count's type
  // Acquire: pairs with the acq_rel decrement of each holder's last drop.
  std::atomic_thread_fence(std::memory_order_acquire);
#if ALKAID_OM_TSAN
  // ThreadSanitizer does not model a fence: the same pairing through an
  // acq_rel decrement of the count (no holder can appear meanwhile).
  if (n == links_ + 1) std::shared_ptr<void>(anchor_).reset();
#endif
  return n == links_ + 1;
}

void ObjectMemory::Release(Done done, void* arg) {
  Close();
  if (Quiet()) {
    done(arg);
    return;
  }
  Sweeper::Get().Watch(this, done, arg);
}

}  // namespace alkaid::format
