# fleetcron_library(TARGET NAME SOURCES...): one of fleetcron's libraries —
# the target fleetcron_<name> with its alias fleetcron::<name>, the installed
# file libfleetcron-<name>, the versioned SONAME, position-independent code,
# hidden symbols (a shared library exports only what include/fleetcron/
# marks FLEETCRON_API), the public headers and the private src/ include
# path, and the warnings.
function(fleetcron_library name)
  set(target fleetcron_${name})
  add_library(${target} ${ARGN})
  add_library(fleetcron::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES
    EXPORT_NAME ${name}
    OUTPUT_NAME fleetcron-${name}
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
    POSITION_INDEPENDENT_CODE ON
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_include_directories(${target}
    PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE
      ${PROJECT_SOURCE_DIR}/src)
  target_compile_features(${target} PUBLIC cxx_std_20)
  fleetcron_warnings(${target})
endfunction()
