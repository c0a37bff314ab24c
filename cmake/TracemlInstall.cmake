# Installs the library, the CLI and a relocatable CMake package so that users
# can write find_package(traceml CONFIG) and link traceml::traceml.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/traceml DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS traceml_core EXPORT tracemlTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS traceml_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT tracemlTargets NAMESPACE traceml:: FILE tracemlTargets.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/traceml)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tracemlConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/tracemlConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/traceml)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tracemlConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tracemlConfig.cmake ${PROJECT_BINARY_DIR}/tracemlConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/TracemlTorchCheck.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/traceml)

# traceml::torch, when LibTorch was found, joins the same export set. It names
# LibTorch's `torch` target without finding it, so a consumer of
# traceml::traceml alone needs no LibTorch; one that links traceml::torch calls
# find_package(Torch) as any LibTorch project does.
if(TARGET traceml_torch)
  install(TARGETS traceml_torch EXPORT tracemlTargets)
endif()
