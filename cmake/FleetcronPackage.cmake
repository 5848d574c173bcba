# Debian packages with CPack (`cpack -G DEB` in a build directory; the
# package test, tests/install/package_test.sh, builds, installs and removes
# them):
#   fleetcron          the daemon: /usr/bin/fleetcron, its systemd unit, a
#                      default configuration under /etc/fleetcron (conffiles),
#                      the fleetcron system user (postinst), the service
#                      stopped on removal (prerm)
#   libfleetcron<so>   the shared libraries (a shared build: BUILD_SHARED_LIBS=ON)
#   libfleetcron-dev   headers, CMake package, pkg-config files (and the
#                      archives of a static build)
# Shared-library dependencies come from dpkg-shlibdeps (dpkg-dev).
set(FLEETCRON_SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
set(CPACK_PACKAGE_NAME fleetcron)
set(CPACK_PACKAGE_VENDOR "fleetcron")
set(CPACK_PACKAGE_CONTACT "fleetcron developers <fleetcron@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "cron for a fleet: one crontab, N replicas, every fire once")
# /usr whatever prefix the build was configured with (a default configure
# says /usr/local, which a package must not use); the unit's ExecStart is
# written at install time from this prefix.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# A shlibs file and the ldconfig trigger for the shared-library package, so
# a package built against it depends on the right version.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# Our own libraries, for dpkg-shlibdeps to find when it reads the daemon.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
    ${PROJECT_BINARY_DIR}/src/core ${PROJECT_BINARY_DIR}/src/redis ${PROJECT_BINARY_DIR}/src/nats
    ${PROJECT_BINARY_DIR}/src/postgres)
set(CPACK_COMPONENTS_ALL dev)
if(BUILD_SHARED_LIBS)
  list(APPEND CPACK_COMPONENTS_ALL libs)
endif()
if(TARGET fleetcron)
  list(APPEND CPACK_COMPONENTS_ALL daemon)
endif()

set(libs_package libfleetcron${FLEETCRON_SOVERSION})
set(CPACK_DEBIAN_LIBS_PACKAGE_NAME ${libs_package})
set(CPACK_DEBIAN_LIBS_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_LIBS_DESCRIPTION "fleetcron's shared libraries: the scheduler and its Redis, NATS and PostgreSQL coordination")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libfleetcron-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION "fleetcron's headers, CMake package and pkg-config files")
# What the installed CMake package and .pc files ask for (find_dependency,
# Requires.private).
set(dev_depends "libfmt-dev, libhowardhinnant-date-dev, libhiredis-dev, libssl-dev, libnats-dev, libpq-dev, pkg-config")
if(BUILD_SHARED_LIBS)
  set(dev_depends "${libs_package} (= ${PROJECT_VERSION}), ${dev_depends}")
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${dev_depends}")

set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME fleetcron)
set(CPACK_COMPONENT_DAEMON_DESCRIPTION
    "cron for a fleet: every replica runs the same crontab, each fire runs once (Redis, NATS JetStream or PostgreSQL coordination)")
set(CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS "adduser, tzdata")
if(BUILD_SHARED_LIBS)
  set(CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS "${libs_package} (= ${PROJECT_VERSION}), ${CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS}")
endif()
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/postinst ${PROJECT_SOURCE_DIR}/packaging/prerm ${PROJECT_SOURCE_DIR}/packaging/postrm
    ${PROJECT_SOURCE_DIR}/packaging/conffiles)
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
