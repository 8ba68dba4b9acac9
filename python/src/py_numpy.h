#pragma once

// numpy arrays over a loan's shared buffers. Through numpy's C API when the
// module was built with numpy's headers (ALKAID_NUMPY_C_API: a view costs
// an array object, no call into Python and no argument parsing); through
// numpy.frombuffer otherwise (py_producer.cc). numpy is imported at the
// first loan, never to import alkaid.

#include <nanobind/nanobind.h>

#include <cstdint>

namespace alkaid::python::numpy_c_api {

namespace nb = nanobind;

/// True if numpy's C API is loaded: the first call imports it (the GIL must
/// be held). False if the module was built without numpy's headers, or the
/// running numpy does not offer the API they describe (the import error is
/// cleared: the caller falls back to numpy.frombuffer).
bool Available();

/// A writable, C-contiguous 1-D array of `rows` items of `dtype` (a
/// numpy.dtype) at `data`, which it does not own: its base is `owner`,
/// which it keeps alive. Only after Available() said true; needs the GIL.
nb::object NewView(nb::handle dtype, void* data, int64_t rows, nb::handle owner);

/// Clears the WRITEABLE flag of `array`, an array NewView made (numpy
/// refuses writes through it from then on). Needs the GIL.
void MakeReadOnly(PyObject* array);

}  // namespace alkaid::python::numpy_c_api
