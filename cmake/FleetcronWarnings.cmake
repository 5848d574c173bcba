# fleetcron_warnings(target): the project's warning set, PRIVATE so consumers
# never inherit it. -Werror only when FLEETCRON_WERROR is ON (the test script
# turns it on for both g++ and clang).
function(fleetcron_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                                           -Wsign-conversion -Wnon-virtual-dtor -Wold-style-cast)
  if(FLEETCRON_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
