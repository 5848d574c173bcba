# Install rules: headers, the library, the exported CMake package
# (find_package(fleetcron) -> fleetcron::core) and a pkg-config file.
include(CMakePackageConfigHelpers)

set(FLEETCRON_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/fleetcron)

install(TARGETS fleetcron_core fleetcron_redis fleetcron_nats EXPORT fleetcronTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/fleetcron DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/include/fleetcron/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fleetcron)
install(EXPORT fleetcronTargets NAMESPACE fleetcron:: DESTINATION ${FLEETCRON_CMAKE_DIR})

configure_package_config_file(cmake/fleetcronConfig.cmake.in
  ${PROJECT_BINARY_DIR}/fleetcronConfig.cmake
  INSTALL_DESTINATION ${FLEETCRON_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fleetcronConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fleetcronConfig.cmake ${PROJECT_BINARY_DIR}/fleetcronConfigVersion.cmake
        DESTINATION ${FLEETCRON_CMAKE_DIR})

# date has no .pc file, so its flags are written out. A static library
# also needs its private dependencies on the link line.
if(BUILD_SHARED_LIBS)
  set(FLEETCRON_PC_LIBS_PRIVATE "-ldate-tz -lfmt")
  set(FLEETCRON_PC_LIBS_EXTRA "")
  set(FLEETCRON_PC_REDIS_LIBS_EXTRA "")
  set(FLEETCRON_PC_NATS_LIBS_EXTRA "")
else()
  set(FLEETCRON_PC_LIBS_PRIVATE "")
  set(FLEETCRON_PC_LIBS_EXTRA "-ldate-tz -lfmt -pthread")
  set(FLEETCRON_PC_REDIS_LIBS_EXTRA "-lhiredis -lfmt")
  set(FLEETCRON_PC_NATS_LIBS_EXTRA "-lnats -lfmt")
endif()
# Relative, so the package works wherever --prefix puts it.
file(RELATIVE_PATH FLEETCRON_PC_PREFIX_FROM_PCDIR
     /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" FLEETCRON_PC_PREFIX_FROM_PCDIR "${FLEETCRON_PC_PREFIX_FROM_PCDIR}")
configure_file(cmake/fleetcron.pc.in ${PROJECT_BINARY_DIR}/fleetcron.pc @ONLY)
configure_file(cmake/fleetcron-redis.pc.in ${PROJECT_BINARY_DIR}/fleetcron-redis.pc @ONLY)
configure_file(cmake/fleetcron-nats.pc.in ${PROJECT_BINARY_DIR}/fleetcron-nats.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/fleetcron.pc ${PROJECT_BINARY_DIR}/fleetcron-redis.pc
              ${PROJECT_BINARY_DIR}/fleetcron-nats.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
