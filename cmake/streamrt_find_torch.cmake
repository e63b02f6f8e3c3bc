# streamrt_find_torch(<python>): the torch that <python> imports, for building _streamrt_torch
# against it. Sets, in the caller's scope:
#   STREAMRT_TORCH_FOUND         whether its C++ headers and libraries are there
#   STREAMRT_TORCH_WHY           why not, when not found (for the configure message)
#   STREAMRT_TORCH_VERSION       torch.__version__ (the extension refuses to load beside another)
#   STREAMRT_TORCH_DIR           the torch package folder
#   STREAMRT_TORCH_INCLUDE_DIRS  its include folders
#   STREAMRT_TORCH_LIBRARIES     libtorch_python, libtorch, libtorch_cpu, libc10
#   STREAMRT_TORCH_CXX11_ABI     0 or 1, as torch was built (its C++ types cross the boundary)
#   STREAMRT_TORCH_CXX_STANDARD  what its headers need: 17 for torch 1.x (they predate C++20), 20
#                                for torch 2.x (recent 2.x headers use concepts and <=>)
# Asking the interpreter (not searching the system) keeps the headers, the libraries and the
# torch imported at run time one and the same: Debian's python3-torch 1.13 links its include
# folder to libtorch-dev's /usr/include, PyPI's torch 2.x ships both inside the wheel.
function(streamrt_find_torch python)
  set(STREAMRT_TORCH_FOUND FALSE PARENT_SCOPE)
  execute_process(
    COMMAND ${python} -c
      "import os, torch; print(os.path.dirname(torch.__file__)); print(torch.__version__); print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    set(STREAMRT_TORCH_WHY "${python} cannot import torch" PARENT_SCOPE)
    return()
  endif()
  string(REPLACE "\n" ";" out "${out}")
  list(GET out 0 dir)
  list(GET out 1 version)
  list(GET out 2 abi)
  # streamrt.torch refuses older torches at import (python/streamrt/_torch_compat.py): say so here.
  if(version VERSION_LESS 1.13)
    set(STREAMRT_TORCH_WHY "torch ${version} is older than 1.13, the oldest streamrt.torch supports"
        PARENT_SCOPE)
    return()
  endif()
  set(include ${dir}/include)
  if(NOT EXISTS ${include}/torch/csrc/jit/python/pybind_utils.h)
    # Said for both kinds of torch: Debian splits the headers off, PyPI's wheels carry them.
    set(STREAMRT_TORCH_WHY "torch ${version} at ${dir} has no C++ headers (Debian: install \
libtorch-dev; a torch wheel from PyPI ships them in torch/include)" PARENT_SCOPE)
    return()
  endif()
  set(libs)
  foreach(name torch_python torch torch_cpu c10)
    # Not find_library: its cached answer would outlive a change of interpreter.
    set(lib ${dir}/lib/lib${name}.so)
    if(NOT EXISTS ${lib})
      set(STREAMRT_TORCH_WHY "torch ${version} at ${dir} has no lib${name}.so" PARENT_SCOPE)
      return()
    endif()
    list(APPEND libs ${lib})
  endforeach()
  set(STREAMRT_TORCH_FOUND TRUE PARENT_SCOPE)
  set(STREAMRT_TORCH_VERSION ${version} PARENT_SCOPE)
  set(STREAMRT_TORCH_DIR ${dir} PARENT_SCOPE)
  set(STREAMRT_TORCH_INCLUDE_DIRS ${include} ${include}/torch/csrc/api/include PARENT_SCOPE)
  set(STREAMRT_TORCH_LIBRARIES ${libs} PARENT_SCOPE)
  set(STREAMRT_TORCH_CXX11_ABI ${abi} PARENT_SCOPE)
  if(version VERSION_LESS 2)
    set(STREAMRT_TORCH_CXX_STANDARD 17 PARENT_SCOPE)
  else()
    set(STREAMRT_TORCH_CXX_STANDARD 20 PARENT_SCOPE)
  endif()
endfunction()
