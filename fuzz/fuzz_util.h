#pragma once

// Shared by the fuzz targets: copy the input into an aligned buffer, and
// exercise every value of a decoded batch.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "alkaid/format/buffer.h"
#include "alkaid/format/record_batch.h"

namespace alkaid::fuzz {

/// The fuzzer's bytes in a 64-byte aligned buffer (as a mapped file would be).
std::shared_ptr<format::Buffer> ToBuffer(const uint8_t* data, size_t size);

/// Full validation, then (only if valid) formatting every value: reading
/// valid data with the unchecked accessors must never fault.
void Exercise(const format::RecordBatch& batch);

}  // namespace alkaid::fuzz
