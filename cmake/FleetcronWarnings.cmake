# fleetcron_warnings(target): the project's warning set, PRIVATE so consumers
# never inherit it. -Werror only when FLEETCRON_WERROR is ON (the test script
# turns it on for both g++ and clang).
function(fleetcron_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                           -Wsign-conversion -Wnon-virtual-dtor -Wold-style-cast)
  # g++ 12 at -O3 reports false -Wrestrict on std::string concatenation
  # inside libstdc++ (GCC bugs 105329, 105651; fixed in 13).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  # Designated initializers (EntryOptions{.key = "k"}) are the intended
  # style; g++ warns about every member they leave to its default.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-missing-field-initializers)
  endif()
  if(FLEETCRON_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
