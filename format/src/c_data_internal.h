#pragma once

// Shared by the C Data Interface export and import (c_data_*.cc).

#include <atomic>
#include <cstdint>

namespace alkaid::format::internal {

/// Field metadata keys carrying an extension type through the interface.
inline constexpr const char* kExtensionNameKey = "ARROW:extension:name";
inline constexpr const char* kExtensionMetadataKey = "ARROW:extension:metadata";

/// Deepest type or array tree exported or imported (as validate.h's limit):
/// a hostile producer's cyclic or absurdly deep tree must not exhaust the
/// stack.
inline constexpr int kCDataMaxDepth = 64;

/// 64 zero bytes on a 64-byte boundary: the address given for a buffer that
/// holds no bytes, so that no consumer ever dereferences NULL.
alignas(64) inline constexpr uint8_t kZeroBytes[64] = {};

}  // namespace alkaid::format::internal

namespace alkaid::format::internal {

/// Where a recycled batch (batch_template.h) keeps the ArrowArray tree of
/// its exports: laid out at its first export and, after each release, filled
/// again by the next one instead of being measured and allocated anew. One
/// per object graph, so one per shape and batch in flight. Busy while an
/// export of the graph is out; a second export at the same time takes the
/// ordinary path.
struct ExportSlot {
  std::atomic<bool> busy{false};
  void* block = nullptr;  // c_data_export.cc's ExportBlock, owned
  /// The graph's batches have numbers of their own (BatchShape::varying):
  /// each export writes the lengths, null counts and offsets again too.
  bool varying = false;

  ExportSlot() = default;
  ExportSlot(const ExportSlot&) = delete;
  ExportSlot& operator=(const ExportSlot&) = delete;
  ~ExportSlot();
};

}  // namespace alkaid::format::internal
