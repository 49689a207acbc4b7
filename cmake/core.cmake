# The core package's module, jaxgraphops._ext: the CPU handlers, and with JGO_CUDA_EMULATION=ON the
# emulated CUDA handlers. No CUDA compiler is looked for.

# JGO_CUDA_EMULATION: also compile the CUDA handlers as host C++ against the emulated CUDA runtime
# (ffi/cuda_emulation), a third platform selected at import with JGO_KERNELS=cuda-emulation: a
# development and CI option, off in the published wheels.
option(JGO_CUDA_EMULATION "Build the emulated CUDA handlers (CUDA sources as host C++)" OFF)

# The CPU kernels are a library of their own, compiled at -O3 for their vectorised loops; the module around
# them (ffi/module.cc) is a few capsules.
add_library(jgo_cpu STATIC ${JGO_CPU_SOURCES})
set_target_properties(jgo_cpu PROPERTIES POSITION_INDEPENDENT_CODE ON CXX_VISIBILITY_PRESET hidden)
jgo_handler_includes(jgo_cpu)
target_compile_options(jgo_cpu PRIVATE -O3 -Wall -Wextra -Wno-unused-parameter)
# The headers every kernel file includes, parsed once into a precompiled header (about 0.5 s CPU less per file).
# Not under ccache, which would refuse to cache a compile that uses one (unless told pch_defines,time_macros).
if(NOT CMAKE_CXX_COMPILER_LAUNCHER MATCHES "ccache")
  target_precompile_headers(jgo_cpu PRIVATE <algorithm> <cstdint> <string> <vector> ffi/cpu/handler.h
                            ffi/cpu/row_parallel.h ffi/handlers.h ffi/common/jgo/args.h)
endif()
# The attention kernels' per-head loops (branch-free online softmax, LeakyReLU) vectorise only
# when floating-point traps may be ignored; results are unchanged.
set_source_files_properties(ffi/cpu/gat.cc ffi/cpu/gatv2.cc ffi/cpu/mha_simple.cc PROPERTIES COMPILE_OPTIONS
                            -fno-trapping-math)
# The message-passing sums are compiled for AVX-512 and AVX2 + FMA too (chosen at run time): without
# contracting w * x + acc into fused multiply-adds, each clone computes the bits of the baseline. Without
# trapping math, edge_softmax's per-head loops vectorise (with it, each exp stays behind its -inf test's
# branch: 3.7x slower at 8 heads).
set_source_files_properties(ffi/cpu/message_passing.cc PROPERTIES COMPILE_OPTIONS "-ffp-contract=off;-fno-trapping-math")

# The module, on the plain CPython C API (no binding library to compile). For the stable-ABI wheel
# (pyproject.toml: wheel.py-api = "cp312", on Python 3.12 and later) scikit-build-core sets
# SKBUILD_SABI_VERSION: then the limited API of that version; SKBUILD_SOABI names the suffix either way
# (abi3, or this interpreter's cpython-3XX-...).
add_library(_ext MODULE ffi/module.cc)
set_target_properties(_ext PROPERTIES PREFIX "" SUFFIX ".${SKBUILD_SOABI}${CMAKE_SHARED_MODULE_SUFFIX}"
                                      CXX_VISIBILITY_PRESET hidden)
jgo_handler_includes(_ext)
target_link_libraries(_ext PRIVATE Python::Module jgo_cpu)
if(SKBUILD_SABI_VERSION)
  string(REPLACE "." ";" sabi "${SKBUILD_SABI_VERSION}")
  list(GET sabi 0 sabi_major)
  list(GET sabi 1 sabi_minor)
  math(EXPR limited_api "(${sabi_major} << 24) | (${sabi_minor} << 16)" OUTPUT_FORMAT HEXADECIMAL)
  target_compile_definitions(_ext PRIVATE Py_LIMITED_API=${limited_api})
endif()
target_link_options(_ext PRIVATE -Wl,--exclude-libs,ALL)  # the kernels' symbols stay inside

if(JGO_CUDA_EMULATION)
  # Each .cu is compiled as C++ through a one-line wrapper (a .cu source is CUDA to CMake).
  set(emulated_sources ffi/cuda_emulation/emulation.cc ffi/testing/record.cc ffi/testing/case_io.cc
      ffi/testing/ffi_host.cc)
  foreach(cu ${JGO_CUDA_SOURCES})
    get_filename_component(stem ${cu} NAME_WE)
    set(wrapper ${CMAKE_CURRENT_BINARY_DIR}/cuda_emulation/${stem}.cc)
    file(GENERATE OUTPUT ${wrapper} CONTENT "#include \"${CMAKE_CURRENT_SOURCE_DIR}/${cu}\"\n")
    list(APPEND emulated_sources ${wrapper})
  endforeach()
  add_library(jgo_cuda_emulation STATIC ${emulated_sources})
  set_target_properties(jgo_cuda_emulation PROPERTIES POSITION_INDEPENDENT_CODE ON CXX_VISIBILITY_PRESET hidden)
  jgo_handler_includes(jgo_cuda_emulation ffi/cuda_emulation)
  target_compile_definitions(jgo_cuda_emulation PRIVATE JGO_CUDA_EMULATION JGO_WITH_CUDA_EMULATION)
  target_compile_options(jgo_cuda_emulation PRIVATE -O2 -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas)
  target_link_libraries(_ext PRIVATE jgo_cuda_emulation)
  target_compile_definitions(_ext PRIVATE JGO_WITH_CUDA_EMULATION)
  message(STATUS "jaxgraphops: CPU handlers and the emulated CUDA handlers")
else()
  message(STATUS "jaxgraphops: CPU handlers")
endif()

install(TARGETS _ext LIBRARY DESTINATION jaxgraphops)
