#pragma once

// Counting the batches a consumer hands to foreign code through the Arrow C
// Data / C Stream Interface (Consumer::ExportBatch, Consumer::ExportStream):
// each exported struct's release notice (format::ExportRecordBatch's
// on_release) gives the batch back to the count. Private to the client
// library.

#include <atomic>
#include <cstdint>
#include <memory>

#include "alkaid/common/status.h"

namespace alkaid::client::internal {

/// Batches exported by one consumer and not yet released by the foreign
/// side. Shared by the consumer and every exported struct it counted, so a
/// release after the consumer is gone still finds it. Every counter is a
/// plain tally that publishes no other memory, so each access is relaxed:
/// the buffers themselves are kept alive by shared ownership (the block's
/// return goes through the channel's own queue), not by this count.
struct ExportCounter {
  /// For one export: takes one place under max_held (0: no limit) and one
  /// reference, both given back by Drop (the export's release notice, or
  /// the caller if the export did not happen). CapacityError naming the
  /// limit if every place is taken (counted in `refused`; nothing taken).
  Status Hold(const char* what);
  void Drop() {
    held.fetch_sub(1, std::memory_order_relaxed);
    Unref();
  }

  /// A counter shared by the consumer (the returned shared_ptr, all of
  /// whose copies count as one reference) and by each export that holds a
  /// raw pointer after Hold(), so that an export's release callback is a
  /// plain pointer (std::function keeps it without allocating).
  static std::shared_ptr<ExportCounter> Make(uint64_t cap) {
    return std::shared_ptr<ExportCounter>(new ExportCounter(cap),
                                          [](ExportCounter* c) { c->Unref(); });
  }

  const uint64_t max_held;
  std::atomic<uint64_t> held{0};
  std::atomic<uint64_t> total{0};  ///< exported, ever
  std::atomic<uint64_t> refused{0};

 private:
  explicit ExportCounter(uint64_t cap) : max_held(cap) {}
  ~ExportCounter() = default;
  void Unref() {
    // Acq_rel: the last one sees every other holder's use before deleting.
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  std::atomic<int64_t> refs{1};
};

struct ConsumerImpl;
/// The counter of a consumer's exports (consumer.cc, for consumer_export.cc).
const std::shared_ptr<ExportCounter>& ExportsOf(const ConsumerImpl& impl);

}  // namespace alkaid::client::internal
