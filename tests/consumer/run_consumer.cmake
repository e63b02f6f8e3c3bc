# cmake -P script for the consumer test (see CMakeLists.txt). Fails on the first failing step.
cmake_minimum_required(VERSION 3.25)

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "consumer test step failed (${rc}): ${cmd}")
  endif()
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(app_build ${WORK_DIR}/build)
file(REMOVE_RECURSE ${WORK_DIR})

step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
if(NOT EXISTS ${prefix}/include/streamrt/streamrt.hpp)
  message(FATAL_ERROR "install did not put the headers under ${prefix}/include")
endif()
step(${CMAKE_COMMAND} -S ${APP_DIR} -B ${app_build} -G ${GENERATOR}
  -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_PREFIX_PATH=${prefix}
  # Only the install prefix may provide streamrt: never this source or build tree.
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
  -DWITH_MPI=${WITH_MPI})
step(${CMAKE_COMMAND} --build ${app_build})
execute_process(COMMAND ${app_build}/streamrt_consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the consumer program failed (${rc})")
endif()
# The optional component streamrt::mpi, on one rank under the build's launcher.
if(WITH_MPI)
  set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
  set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
  execute_process(COMMAND ${MPIEXEC} -n 1 ${app_build}/streamrt_mpi_consumer RESULT_VARIABLE rc
    OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the streamrt::mpi consumer program failed (${rc})")
  endif()
endif()
