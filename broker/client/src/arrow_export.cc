#include "arrow_export_internal.h"

#include <new>
#include <utility>

namespace alkaid::client::internal {

namespace {

// What the wrapped release needs: the format library's own callback and
// data (put back into the struct before they run), and the count.
struct CountedRelease {
  void (*release)(ArrowArray*);
  void* private_data;
  std::shared_ptr<ExportCounter> counter;
};

void ReleaseCounted(ArrowArray* array) {
  auto* counted = static_cast<CountedRelease*>(array->private_data);
  array->release = counted->release;
  array->private_data = counted->private_data;
  array->release(array);  // marks `array` released
  counted->counter->Unreserve();
  delete counted;
}

}  // namespace

Status ExportCounter::Reserve(const char* what) {
  const uint64_t before = held.fetch_add(1, std::memory_order_relaxed);
  if (max_held != 0 && before >= max_held) {
    held.fetch_sub(1, std::memory_order_relaxed);
    refused.fetch_add(1, std::memory_order_relaxed);
    return Status::CapacityError(what, ": ", max_held,
                                 " exported batches are held already (the foreign side has not "
                                 "released them; ConsumerOptions::max_exported_batches)");
  }
  return Status::OK();
}

Status CountRelease(ArrowArray* array, std::shared_ptr<ExportCounter> counter) {
  auto* counted = new (std::nothrow) CountedRelease{array->release, array->private_data, nullptr};
  if (counted == nullptr) {
    array->release(array);
    counter->Unreserve();
    return Status::OutOfMemory("counting an exported batch");
  }
  counter->total.fetch_add(1, std::memory_order_relaxed);
  counted->counter = std::move(counter);
  array->release = ReleaseCounted;
  array->private_data = counted;
  return Status::OK();
}

}  // namespace alkaid::client::internal
