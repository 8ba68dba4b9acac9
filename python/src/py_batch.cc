#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "py_common.h"
#include "py_types.h"

namespace alkaid::python {

namespace {

// Every buffer of `data` and its children and dictionary: (address, size).
void CollectBuffers(const format::ArrayData& data,
                    std::vector<std::pair<uintptr_t, int64_t>>* out) {
  for (const auto& buffer : data.buffers) {
    if (buffer != nullptr && buffer->size() > 0) {
      out->emplace_back(reinterpret_cast<uintptr_t>(buffer->data()), buffer->size());
    }
  }
  for (const auto& child : data.child_data) CollectBuffers(*child, out);
  if (data.dictionary != nullptr) CollectBuffers(*data.dictionary, out);
}

// A one-batch ArrowArrayStream over `batch` (for consumers that only take
// streams, e.g. DuckDB's replacement scans).
nb::object OneBatchStream(const format::RecordBatchPtr& batch) {
  ArrowArrayStream stream;
  Check(format::ExportRecordBatchStream(batch->schema(), std::vector{batch}, &stream));
  return StreamCapsule(&stream);
}

}  // namespace

const format::RecordBatch& PyBatch::Get() const {
  if (batch == nullptr) {
    ThrowStatus(Status::Invalid("this batch was released (Batch.release())"));
  }
  return *batch;
}

void BindTypes(nb::module_& m) {
  nb::class_<PySchema>(m, "Schema",
                       "The schema of a topic: field names, types, nullability and metadata.\n\n"
                       "Implements ``__arrow_c_schema__``: ``pyarrow.schema(s)`` and other Arrow "
                       "libraries read it without a copy.")
      .def(
          "__arrow_c_schema__", [](const PySchema& self) { return SchemaCapsule(*self.schema); },
          "Exports the schema as an ``arrow_schema`` PyCapsule (Arrow PyCapsule protocol).")
      .def_prop_ro(
          "names",
          [](const PySchema& self) {
            std::vector<std::string> names;
            for (const auto& f : self.schema->fields()) names.push_back(f->name());
            return names;
          },
          "The field names, in order.")
      .def(
          "__len__", [](const PySchema& self) { return self.schema->num_fields(); },
          "The number of fields.")
      .def(
          "__eq__",
          [](const PySchema& self, nb::handle other) {
            if (!nb::hasattr(other, "__arrow_c_schema__")) return false;
            return self.schema->Equals(*SchemaFromObject(other));
          },
          nb::arg("other").none(),
          "True if `other` (any object with ``__arrow_c_schema__``) has the same fields.")
      .def(
          "to_pyarrow",
          [](nb::handle self) { return nb::module_::import_("pyarrow").attr("schema")(self); },
          "The schema as a pyarrow.Schema (needs pyarrow).")
      .def("__str__", [](const PySchema& self) { return self.schema->ToString(); })
      .def("__repr__", [](const PySchema& self) {
        return "alkaid.Schema(" + self.schema->ToString(false) + ")";
      });

  nb::class_<PyBatch>(
      m, "Batch",
      "A record batch received from a topic, zero-copy: its buffers lie in the producer's shared "
      "memory.\n\n"
      "Implements ``__arrow_c_array__``, ``__arrow_c_schema__`` and ``__arrow_c_stream__`` (a "
      "stream of this one batch), so pyarrow, polars, DuckDB and nanoarrow take it without a "
      "copy. The producer's block stays held while this object, or anything that imported it, "
      "is alive; it returns to the producer when the last of them is gone, on any thread, also "
      "after the consumer was closed.")
      .def_prop_ro(
          "num_rows", [](const PyBatch& self) { return self.Get().num_rows(); },
          "The number of rows.")
      .def_prop_ro(
          "num_columns", [](const PyBatch& self) { return self.Get().num_columns(); },
          "The number of columns.")
      .def_prop_ro(
          "schema", [](const PyBatch& self) { return PySchema{self.Get().schema()}; },
          "The batch's schema.")
      .def(
          "__len__", [](const PyBatch& self) { return self.Get().num_rows(); },
          "The number of rows.")
      .def(
          "__arrow_c_array__",
          [](const PyBatch& self, nb::handle /*requested_schema*/) {
            self.Get();  // refuses a released batch
            return BatchCapsules(self.batch);
          },
          nb::arg("requested_schema").none() = nb::none(),
          "Exports the batch as an (``arrow_schema``, ``arrow_array``) pair of PyCapsules: a "
          "struct array whose children are the columns, pointing into shared memory. "
          "`requested_schema` is ignored (the batch has one representation).")
      .def(
          "__arrow_c_schema__",
          [](const PyBatch& self) { return SchemaCapsule(*self.Get().schema()); },
          "Exports the batch's schema as an ``arrow_schema`` PyCapsule.")
      .def(
          "__arrow_c_stream__",
          [](const PyBatch& self, nb::handle /*requested_schema*/) {
            self.Get();
            return OneBatchStream(self.batch);
          },
          nb::arg("requested_schema").none() = nb::none(),
          "Exports a stream of this one batch as an ``arrow_array_stream`` PyCapsule.")
      .def(
          "to_pyarrow",
          [](nb::handle self) {
            return nb::module_::import_("pyarrow").attr("record_batch")(self);
          },
          "The batch as a pyarrow.RecordBatch over the same shared buffers, no copy (needs "
          "pyarrow). It holds the producer's block on its own.")
      .def(
          "release", [](PyBatch& self) { self.batch.reset(); },
          "Drops this object's reference to the shared memory now instead of when it is "
          "garbage-collected. Arrays imported from it stay valid (they hold their own "
          "reference); any later use of this object raises InvalidError.")
      .def_prop_ro(
          "released", [](const PyBatch& self) { return self.batch == nullptr; },
          "True after release().")
      .def_prop_ro(
          "publish_ns", [](const PyBatch& self) { return self.publish_ns; },
          "When the producer published the batch: nanoseconds since the epoch "
          "(CLOCK_REALTIME, as ``time.time_ns()``); 0 unless the topic stamps publish times "
          "(``Producer(..., publish_timestamps=True)`` created it, or ``alkaid publish "
          "--timestamps``).")
      .def(
          "buffer_addresses",
          [](const PyBatch& self) {
            std::vector<std::pair<uintptr_t, int64_t>> out;
            for (const auto& column : self.Get().columns()) CollectBuffers(*column, &out);
            return out;
          },
          "(address, size) of every non-empty buffer of every column (children and "
          "dictionaries included), in column order: where the data lies, to check that "
          "another library reads these very bytes.")
      .def("__repr__", [](const PyBatch& self) {
        if (self.batch == nullptr) return std::string("alkaid.Batch(released)");
        return "alkaid.Batch(" + std::to_string(self.batch->num_rows()) + " rows, " +
               self.batch->schema()->ToString(false) + ")";
      });
}

}  // namespace alkaid::python
