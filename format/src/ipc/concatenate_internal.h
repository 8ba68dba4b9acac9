#pragma once

// Private: concatenation of arrays, used to apply dictionary deltas.

#include <vector>

#include "alkaid/common/result.h"
#include "alkaid/format/array_data.h"
#include "alkaid/format/memory_pool.h"

namespace alkaid::format::ipc::internal {

/// Concatenates arrays of one type into a single array with new buffers from
/// `pool` (slice offsets applied, offsets re-based, view buffer indices and
/// dense union offsets shifted). Every type is supported; for dictionary
/// arrays the indices are concatenated and the last input's dictionary kept
/// (dictionaries only grow by deltas). The inputs must be valid.
Result<ArrayDataPtr> Concatenate(const std::vector<ArrayDataPtr>& arrays, MemoryPool* pool);

}  // namespace alkaid::format::ipc::internal
