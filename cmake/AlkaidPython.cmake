# The Python module alkaid._alkaid (python/, built with nanobind).
#
#   ALKAID_PYTHON   AUTO (default): build it in the build tree when the Python
#                   below has nanobind and the build is neither a sanitizer
#                   nor a fuzzing one (an instrumented extension would need
#                   the sanitizer runtime preloaded into the interpreter, so
#                   the asan-ubsan and tsan stages of CI do not build or run
#                   the Python tests); ON: the same, failing if it cannot;
#                   OFF: never. With CI=true (ALKAID_CI) AUTO is ON,
#                   except in a sanitizer or fuzzing build.
#   ALKAID_PYTHON_EXECUTABLE  the Python to build for (default:
#                   <source>/.venv/bin/python, made by scripts/install-deps.sh)
#
# A pip install (python/pyproject.toml, scikit-build-core: SKBUILD is set)
# builds it for the interpreter pip runs, installs module and programs into
# the wheel, and nothing else.
#
# Sets ALKAID_PYTHON_ENABLED and ALKAID_PYTHON_EXECUTABLE.
set(ALKAID_PYTHON AUTO CACHE STRING "Build the Python module: AUTO, ON or OFF")
set_property(CACHE ALKAID_PYTHON PROPERTY STRINGS AUTO ON OFF)
set(ALKAID_PYTHON_EXECUTABLE "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
    "Python (with nanobind) to build the module for")

set(ALKAID_PYTHON_ENABLED OFF)
set(_why "")
set(_required OFF)  # a reason below fails configure instead of a message
if(SKBUILD)
  set(ALKAID_PYTHON_EXECUTABLE "${Python_EXECUTABLE}")
  if(NOT ALKAID_PYTHON_EXECUTABLE)
    set(ALKAID_PYTHON_EXECUTABLE "${PYTHON_EXECUTABLE}")
  endif()
elseif(ALKAID_PYTHON STREQUAL "OFF")
  set(_why "ALKAID_PYTHON=OFF")
elseif(ALKAID_SANITIZE OR ALKAID_BUILD_FUZZERS)
  set(_why "a sanitizer or fuzzing build: the interpreter is not instrumented")
elseif(NOT EXISTS "${ALKAID_PYTHON_EXECUTABLE}")
  set(_why "no ${ALKAID_PYTHON_EXECUTABLE}; scripts/install-deps.sh makes it")
  set(_required ${ALKAID_CI})
endif()

if(_why STREQUAL "")
  execute_process(
    COMMAND "${ALKAID_PYTHON_EXECUTABLE}" -m nanobind --cmake_dir
    OUTPUT_VARIABLE _nb_dir RESULT_VARIABLE _rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _rc EQUAL 0)
    set(_why "${ALKAID_PYTHON_EXECUTABLE} has no nanobind")
    set(_required ${ALKAID_CI})
  endif()
endif()

if(_why STREQUAL "")
  set(Python_EXECUTABLE "${ALKAID_PYTHON_EXECUTABLE}")
  find_package(Python 3.9 REQUIRED COMPONENTS Interpreter Development.Module)
  list(APPEND CMAKE_PREFIX_PATH "${_nb_dir}")
  find_package(nanobind CONFIG REQUIRED)
  set(ALKAID_PYTHON_ENABLED ON)
  message(STATUS "Python module: built for ${ALKAID_PYTHON_EXECUTABLE} (Python ${Python_VERSION})")
elseif(ALKAID_PYTHON STREQUAL "ON" OR (_required AND ALKAID_PYTHON STREQUAL "AUTO"))
  message(FATAL_ERROR "ALKAID_PYTHON=${ALKAID_PYTHON} (CI=${ALKAID_CI}) but: ${_why}")
else()
  message(STATUS "Python module: not built (${_why})")
endif()
