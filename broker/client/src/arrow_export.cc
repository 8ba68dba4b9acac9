#include "arrow_export_internal.h"

namespace alkaid::client::internal {

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

}  // namespace alkaid::client::internal
