# One include probe (tests/source/CMakeLists.txt): compiles a file holding `#include "HEADER"`
# with the include path INCLUDES, as a layer's sources are compiled, and fails unless the outcome
# is EXPECT ("compiles" or "refused").
# Usage: cmake -DCXX=... -DINCLUDES=dir1|dir2 -DHEADER=cpu/cpu_backend.hpp -DEXPECT=refused -DWORK=dir
#        -P probe_include.cmake
file(MAKE_DIRECTORY ${WORK})
string(MAKE_C_IDENTIFIER "${HEADER}" name)
set(probe ${WORK}/${name}.cpp)
file(WRITE ${probe} "#include \"${HEADER}\"\n")
set(flags -std=c++20 -fsyntax-only)
string(REPLACE "|" ";" INCLUDES "${INCLUDES}")
foreach(dir IN LISTS INCLUDES)
  list(APPEND flags -I${dir})
endforeach()
execute_process(COMMAND ${CXX} ${flags} ${probe} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out)
if(rc EQUAL 0)
  set(outcome compiles)
else()
  set(outcome refused)
endif()
# Refused must mean "not on the include path", not some other error in the header.
if(outcome STREQUAL refused AND NOT out MATCHES "No such file or directory|file not found")
  set(outcome "failed for another reason")
endif()
if(NOT outcome STREQUAL EXPECT)
  message(FATAL_ERROR "#include \"${HEADER}\" ${outcome} with ${INCLUDES}; expected: ${EXPECT}\n${out}")
endif()
message(STATUS "#include \"${HEADER}\": ${outcome}, as expected")
