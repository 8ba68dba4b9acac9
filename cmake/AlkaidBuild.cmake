# Compiler settings shared by every Alkaid target.

# Warnings: the build is kept warning-free; CI turns them into errors.
# Not enabled: -Wnull-dereference, whose g++ 12 -O2 path analysis reports
# dereferences on paths the code has already excluded (e.g. a freshly
# allocated mutable buffer's mutable_data()); ASan/UBSan catch real ones.
function(alkaid_target_defaults target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
    -Wunused -Woverloaded-virtual -Wimplicit-fallthrough
    -Wno-missing-field-initializers)
  if(ALKAID_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# Sanitizers apply to everything built in the tree, including tests.
if(ALKAID_SANITIZE)
  string(REPLACE ";" "," _alkaid_san "${ALKAID_SANITIZE}")
  add_compile_options(-fsanitize=${_alkaid_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_alkaid_san})
endif()

if(ALKAID_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "ALKAID_BUILD_FUZZERS needs clang (libFuzzer)")
  endif()
  # UBSan findings abort, so the fuzzer records them as crashes.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# Adds a library target NAME (exported as Alkaid::EXPORT_NAME) from SOURCES,
# with public headers in <dir>/include.
function(alkaid_add_library name export_name)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  add_library(${name} ${ARG_SOURCES})
  add_library(Alkaid::${export_name} ALIAS ${name})
  set_target_properties(${name} PROPERTIES
    EXPORT_NAME ${export_name}
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${name} PUBLIC cxx_std_20)
  if(NOT BUILD_SHARED_LIBS)
    target_compile_definitions(${name} PUBLIC ALKAID_STATIC)
  endif()
  alkaid_target_defaults(${name})
  set_property(GLOBAL APPEND PROPERTY ALKAID_INSTALL_TARGETS ${name})
endfunction()
