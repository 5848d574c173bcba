# Install rules: headers, the libraries, the exported CMake package
# (find_package(fleetcron [COMPONENTS redis nats postgres]) -> fleetcron::core and
# the components' targets, each component in an export set of its own, so
# a core-only consumer needs neither hiredis nor libnats) and pkg-config
# files. The build tree exports the same package (fleetcron_DIR=<build>).
include(CMakePackageConfigHelpers)

set(FLEETCRON_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/fleetcron)

# Components (the Debian packages of cmake/FleetcronPackage.cmake): libs
# (the shared libraries), dev (headers, archives, CMake and pkg-config
# files), daemon (the program, its unit and default configuration).
install(DIRECTORY include/fleetcron DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
        PATTERN redis EXCLUDE PATTERN nats EXCLUDE PATTERN postgres EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/include/fleetcron/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fleetcron COMPONENT dev)
set(FLEETCRON_COMPONENTS "")
foreach(part core redis nats postgres)
  if(NOT TARGET fleetcron_${part})
    continue()
  endif()
  if(part STREQUAL "core")
    set(export fleetcronTargets)
  else()
    set(export fleetcron_${part}Targets)
    list(APPEND FLEETCRON_COMPONENTS ${part})
    install(DIRECTORY include/fleetcron/${part} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fleetcron COMPONENT dev)
  endif()
  install(TARGETS fleetcron_${part} EXPORT ${export}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT libs NAMELINK_COMPONENT dev
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT ${export} NAMESPACE fleetcron:: DESTINATION ${FLEETCRON_CMAKE_DIR} COMPONENT dev)
  export(EXPORT ${export} NAMESPACE fleetcron:: FILE ${PROJECT_BINARY_DIR}/${export}.cmake)
endforeach()

configure_package_config_file(cmake/fleetcronConfig.cmake.in
  ${PROJECT_BINARY_DIR}/fleetcronConfig.cmake
  INSTALL_DESTINATION ${FLEETCRON_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fleetcronConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fleetcronConfig.cmake ${PROJECT_BINARY_DIR}/fleetcronConfigVersion.cmake
        DESTINATION ${FLEETCRON_CMAKE_DIR} COMPONENT dev)

# date has no .pc file, so its flags are written out. A static library
# also needs its private dependencies on the link line.
if(BUILD_SHARED_LIBS)
  set(FLEETCRON_PC_LIBS_PRIVATE "-ldate-tz -lfmt")
  set(FLEETCRON_PC_LIBS_EXTRA "")
  set(FLEETCRON_PC_REDIS_LIBS_EXTRA "")
  set(FLEETCRON_PC_NATS_LIBS_EXTRA "")
  set(FLEETCRON_PC_POSTGRES_LIBS_EXTRA "")
else()
  set(FLEETCRON_PC_LIBS_PRIVATE "")
  set(FLEETCRON_PC_LIBS_EXTRA "-ldate-tz -lfmt -pthread")
  set(FLEETCRON_PC_REDIS_LIBS_EXTRA "-lhiredis -lssl -lcrypto -lfmt")
  set(FLEETCRON_PC_NATS_LIBS_EXTRA "-lnats -lfmt")
  set(FLEETCRON_PC_POSTGRES_LIBS_EXTRA "-lpq -lfmt")
endif()
# Relative, so the package works wherever --prefix puts it.
file(RELATIVE_PATH FLEETCRON_PC_PREFIX_FROM_PCDIR
     /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" FLEETCRON_PC_PREFIX_FROM_PCDIR "${FLEETCRON_PC_PREFIX_FROM_PCDIR}")
configure_file(cmake/fleetcron.pc.in ${PROJECT_BINARY_DIR}/fleetcron.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/fleetcron.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
foreach(component IN LISTS FLEETCRON_COMPONENTS)
  configure_file(cmake/fleetcron-${component}.pc.in ${PROJECT_BINARY_DIR}/fleetcron-${component}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/fleetcron-${component}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
          COMPONENT dev)
endforeach()

include(cmake/FleetcronPackage.cmake)
