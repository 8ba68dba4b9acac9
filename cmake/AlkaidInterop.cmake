# Finds Arrow C++ for the interop tests (tests/interop, ctest label
# `interop`): the headers and shared library that pyarrow's wheel ships, in
# the project's virtual environment (.venv, made by scripts/install-deps.sh
# with the pins of python/requirements-dev.txt).
#
#   ALKAID_INTEROP         AUTO (default): build the interop tests when the
#                          Python below imports pyarrow (and the build is not
#                          a ThreadSanitizer one: libarrow is not
#                          instrumented); ON: the same, failing if it cannot;
#                          OFF: never. With CI=true (ALKAID_CI) AUTO is ON,
#                          except in a ThreadSanitizer build.
#   ALKAID_INTEROP_PYTHON  the Python to ask (default: <source>/.venv/bin/python)
#
# Defines the imported target alkaid_arrow_cpp and sets ALKAID_INTEROP_ENABLED;
# also alkaid_arrow_compute (Arrow's compute kernels, libarrow_compute, a
# library of its own since Arrow 21) when the wheel ships it, and then sets
# ALKAID_ARROW_COMPUTE_ENABLED.
set(ALKAID_INTEROP AUTO CACHE STRING "Build the Arrow C++ interop tests: AUTO, ON or OFF")
set_property(CACHE ALKAID_INTEROP PROPERTY STRINGS AUTO ON OFF)
set(ALKAID_INTEROP_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
    "Python whose pyarrow provides Arrow C++ for the interop tests")

set(ALKAID_INTEROP_ENABLED OFF)
set(_why "")
set(_required OFF)  # a reason below fails configure instead of a message
if(ALKAID_INTEROP STREQUAL "OFF")
  set(_why "ALKAID_INTEROP=OFF")
elseif("thread" IN_LIST ALKAID_SANITIZE)
  set(_why "a ThreadSanitizer build cannot use the uninstrumented libarrow")
elseif(NOT EXISTS "${ALKAID_INTEROP_PYTHON}")
  set(_why "no ${ALKAID_INTEROP_PYTHON}; scripts/install-deps.sh makes it")
  set(_required ${ALKAID_CI})
else()
  execute_process(
    COMMAND "${ALKAID_INTEROP_PYTHON}" -c
            "import pyarrow as pa; print(pa.__version__); print(pa.get_include()); print(pa.get_library_dirs()[0])"
    OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _rc EQUAL 0)
    set(_why "${ALKAID_INTEROP_PYTHON} cannot import pyarrow")
    set(_required ${ALKAID_CI})
  else()
    string(REPLACE "\n" ";" _lines "${_out}")
    list(GET _lines 0 _pa_version)
    list(GET _lines 1 _pa_include)
    list(GET _lines 2 _pa_libdir)
    # The wheel ships libarrow.so.<major><minor> without the unversioned
    # symlink: link the versioned file itself.
    file(GLOB _pa_lib "${_pa_libdir}/libarrow.so.[0-9]*")
    list(FILTER _pa_lib EXCLUDE REGEX "\\.so\\.[0-9]+\\.[0-9]")
    if(NOT _pa_lib OR NOT EXISTS "${_pa_include}/arrow/c/bridge.h")
      set(_why "pyarrow ${_pa_version} in ${_pa_libdir} has no libarrow.so.N or no headers")
      set(_required ${ALKAID_CI})
    else()
      list(GET _pa_lib 0 _pa_lib)
    endif()
  endif()
endif()

if(_why STREQUAL "")
  add_library(alkaid_arrow_cpp SHARED IMPORTED GLOBAL)
  # The wheel is built with the C++11 string ABI (_GLIBCXX_USE_CXX11_ABI=1,
  # GCC's default) and needs C++17 at least; Alkaid is C++20. Its headers
  # are SYSTEM so that our warning flags do not apply to them.
  set_target_properties(alkaid_arrow_cpp PROPERTIES
    IMPORTED_LOCATION "${_pa_lib}"
    INTERFACE_INCLUDE_DIRECTORIES "${_pa_include}"
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${_pa_include}"
    INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1")
  set(ALKAID_INTEROP_ENABLED ON)
  set(ALKAID_ARROW_COMPUTE_ENABLED OFF)
  file(GLOB _pa_compute "${_pa_libdir}/libarrow_compute.so.[0-9]*")
  list(FILTER _pa_compute EXCLUDE REGEX "\\.so\\.[0-9]+\\.[0-9]")
  if(_pa_compute AND EXISTS "${_pa_include}/arrow/compute/api.h")
    list(GET _pa_compute 0 _pa_compute)
    add_library(alkaid_arrow_compute SHARED IMPORTED GLOBAL)
    set_target_properties(alkaid_arrow_compute PROPERTIES
      IMPORTED_LOCATION "${_pa_compute}"
      INTERFACE_LINK_LIBRARIES alkaid_arrow_cpp)
    set(ALKAID_ARROW_COMPUTE_ENABLED ON)
  endif()
  message(STATUS "Arrow C++ interop tests: built, against pyarrow ${_pa_version} (${_pa_lib})")
elseif(ALKAID_INTEROP STREQUAL "ON" OR (_required AND ALKAID_INTEROP STREQUAL "AUTO"))
  message(FATAL_ERROR "ALKAID_INTEROP=${ALKAID_INTEROP} (CI=${ALKAID_CI}) but Arrow C++ is not "
                      "usable: ${_why}")
else()
  message(STATUS "Arrow C++ interop tests (label interop): not built (${_why})")
endif()
