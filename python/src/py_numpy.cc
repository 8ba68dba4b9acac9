#include "py_numpy.h"

#ifdef ALKAID_NUMPY_C_API
// The only file that includes numpy's headers: its API table
// (PyArray_API) is this file's own, filled by _import_array.
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#endif

namespace alkaid::python::numpy_c_api {

#ifdef ALKAID_NUMPY_C_API

bool Available() {
  // 0: not tried yet, 1: loaded, -1: failed. Read and written with the GIL.
  static int state = 0;
  if (state == 0) {
    if (_import_array() < 0) {
      PyErr_Clear();
      state = -1;
    } else {
      state = 1;
    }
  }
  return state == 1;
}

nb::object NewView(nb::handle dtype, void* data, int64_t rows, nb::handle owner) {
  npy_intp dims[1] = {static_cast<npy_intp>(rows)};
  auto* descr = reinterpret_cast<PyArray_Descr*>(dtype.ptr());
  Py_INCREF(descr);  // PyArray_NewFromDescr takes a reference
  PyObject* array =
      PyArray_NewFromDescr(&PyArray_Type, descr, 1, dims, nullptr, data, NPY_ARRAY_CARRAY, nullptr);
  if (array == nullptr) throw nb::python_error();
  nb::object result = nb::steal(array);
  Py_INCREF(owner.ptr());  // PyArray_SetBaseObject takes a reference, also when it fails
  if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(array), owner.ptr()) < 0) {
    throw nb::python_error();
  }
  return result;
}

void MakeReadOnly(PyObject* array) {
  PyArray_CLEARFLAGS(reinterpret_cast<PyArrayObject*>(array), NPY_ARRAY_WRITEABLE);
}

#else

bool Available() { return false; }

nb::object NewView(nb::handle /*dtype*/, void* /*data*/, int64_t /*rows*/, nb::handle /*owner*/) {
  throw nb::type_error("alkaid was built without numpy's headers");
}

void MakeReadOnly(PyObject* /*array*/) {}

#endif

}  // namespace alkaid::python::numpy_c_api
