#pragma once

// RecordBatch::column's typed arrays, one box per column (record_batch.h).
// Not installed.

#include <atomic>
#include <cstdint>

#include "alkaid/format/array.h"

namespace alkaid::format::internal {

/// A column's typed array, made once and kept.
///
/// A batch that owns what it points to (made by RecordBatch::Make, Slice,
/// WithMetadata) boxes each column the first time column(i) asks
/// (record_batch.cc): the array is an ordinary counted pointer, dropped
/// with the batch. A BatchTemplate graph fills every box when it makes the
/// graph, with a link (a pointer sharing the batch's count without holding
/// it, as the graph's other links) to an array of the graph, or kPerCall
/// for a column it cannot make one of; the graph forgets the links before
/// it goes.
struct ColumnBox {
  enum State : uint8_t {
    kEmpty,    // not boxed yet
    kBoxing,   // a thread is writing `array`
    kReady,    // `array` is the column's array
    kPerCall,  // never boxed: column(i) makes an array per call
  };
  /// Release when it becomes kReady (after `array` is written), acquire
  /// when read: pairs the writer of `array` with its readers.
  std::atomic<uint8_t> state{kEmpty};
  ArrayPtr array;
};

}  // namespace alkaid::format::internal
