#pragma once

// The Python-visible value types: Schema and Batch (a received record
// batch, zero-copy over shared memory).

#include <nanobind/nanobind.h>

#include "alkaid/format/record_batch.h"

namespace alkaid::python {

namespace nb = nanobind;

/// alkaid.Schema: an immutable schema with __arrow_c_schema__.
struct PySchema {
  format::SchemaPtr schema;
};

/// alkaid.Batch: a record batch received from a topic. Its buffers are the
/// producer's shared memory, held (with the producer's block) until this
/// object and every export of it are gone. Thread-safe: read-only.
struct PyBatch {
  format::RecordBatchPtr batch;  // null after release()
  uint64_t publish_ns = 0;       // BatchOrigin::publish_ns (0: not stamped)
  const format::RecordBatch& Get() const;
};

void BindTypes(nb::module_& m);

}  // namespace alkaid::python
