# cmake --install: headers, libraries and a relocatable CMake package so that
# find_package(Alkaid CONFIG) gives Alkaid::common, Alkaid::format, ...
include(CMakePackageConfigHelpers)

get_property(_alkaid_targets GLOBAL PROPERTY ALKAID_INSTALL_TARGETS)
install(TARGETS ${_alkaid_targets}
  EXPORT AlkaidTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# Public headers only: *_internal.h and generated flatbuffers code never ship.
foreach(_dir common format libshm broker/client capi)
  if(EXISTS ${PROJECT_SOURCE_DIR}/${_dir}/include/alkaid)
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${_dir}/include/alkaid
      DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
      FILES_MATCHING PATTERN "*.h" PATTERN "*_internal.h" EXCLUDE)
  endif()
endforeach()

set(_alkaid_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Alkaid)
install(EXPORT AlkaidTargets NAMESPACE Alkaid:: DESTINATION ${_alkaid_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/AlkaidConfig.cmake.in
  ${PROJECT_BINARY_DIR}/AlkaidConfig.cmake
  INSTALL_DESTINATION ${_alkaid_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/AlkaidConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/AlkaidConfig.cmake ${PROJECT_BINARY_DIR}/AlkaidConfigVersion.cmake
  DESTINATION ${_alkaid_cmake_dir})
