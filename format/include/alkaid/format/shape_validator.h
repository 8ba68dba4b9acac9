#pragma once

/// \file
/// ShapeValidator: format::Validate for many batches of one shape, at the
/// cost of the few values it reads.
///
/// The structural Validate (validate.h) of a batch depends on its shape
/// (types, lengths, offsets, null counts, buffer sizes) and on a few values:
/// the first and last offset of each binary and list array, the last run
/// end of each run-end encoded one. Batches made by a BatchTemplate share
/// one shape, which was validated once; for them only those values change.

#include <cstdint>
#include <memory>
#include <vector>

#include "alkaid/common/export.h"
#include "alkaid/common/status.h"
#include "alkaid/format/record_batch.h"

namespace alkaid::format {

/// Validates batches that have the shape of a prototype. Immutable once
/// made; any number of threads may use it.
class ALKAID_EXPORT ShapeValidator {
 public:
  /// A validator for batches shaped like `prototype`, which the caller has
  /// validated. Null if the structural verdict of some array of the shape
  /// reads other values (a dictionary-encoded array): validate those
  /// batches with Validate.
  static std::unique_ptr<ShapeValidator> Make(const RecordBatch& prototype);

  /// Validate(batch)'s verdict for a batch of the prototype's shape: OK, or
  /// Validate's own error. Reads a few values per binary, list and run-end
  /// encoded array; the result for a batch of another shape is undefined.
  Status Validate(const RecordBatch& batch) const;
  /// Whether Validate reads any value (false: every batch of the shape
  /// passes, and need not be validated at all).
  bool reads_values() const { return !checks_.empty(); }

  /// One value-dependent check: where the array is (a column, then child
  /// indexes), and what is read there.
  struct Check {
    enum class Kind : uint8_t { kOffsets, kRunEnd };
    Kind kind = Kind::kOffsets;
    uint8_t width = 4;  ///< bytes of an offset or run end
    uint32_t column = 0;
    std::vector<uint32_t> children;
    int64_t first_at = 0;  ///< kOffsets: index of the first offset
    int64_t last_at = 0;   ///< index of the last offset / run end
    int64_t bound = 0;     ///< kOffsets: the last offset's upper bound; kRunEnd: its lower bound
  };

 private:
  explicit ShapeValidator(std::vector<Check> checks) : checks_(std::move(checks)) {}
  std::vector<Check> checks_;
};

}  // namespace alkaid::format
