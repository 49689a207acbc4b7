# The CUDA plugin package (plugins/cuda13/pyproject.toml): the CUDA handlers in a plain shared library,
# lib<JGO_CUDA_LIBRARY>.so, exporting only the C table of ffi/cuda_plugin.cc. It has no Python C API,
# so one wheel (tag py3-none) serves every Python; the CUDA runtime is linked statically, so it needs
# no system CUDA, only the driver (which JAX's CUDA plugin needs too).

# The package the library goes into (jaxgraphops_cuda13) and the CUDA major version it is for: the
# toolkit found must be that version.
set(JGO_CUDA_MAJOR "" CACHE STRING "The CUDA major version the plugin package is for (e.g. 13)")
if(NOT JGO_CUDA_MAJOR)
  message(FATAL_ERROR "JGO_COMPONENT=cuda-plugin needs JGO_CUDA_MAJOR (plugins/cuda<major>/pyproject.toml sets it)")
endif()

# The GPU code: one PTX, for compute_80, from which ptxas makes the A100 (sm_80) and H100 (sm_90) images and
# which later GPUs compile when they load it, so that nvcc's front end (cicc: 161 of the 220 CPU-s of
# ffi/cuda/message_passing.cu with a PTX per architecture) runs once per file. The kernels use nothing past
# sm_80; the sm_90 SASS made from it is the same as from compute_90's PTX for 8 of the 11 files (nvcc 13.0,
# 2026-11-29); in gat.cu, gatv2.cu and mha_simple.cu it differs in how a bfloat16 widens to float (a PRMT where
# compute_90 has an IMAD.U32), with 0, 8 and 16 instructions more of 72k, 92k and 87k.
# A CMAKE_CUDA_ARCHITECTURES given on the command line replaces it.
set(JGO_CUDA_GENCODE "arch=compute_80,code=[sm_80,sm_90,compute_80]")
if(DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(JGO_CUDA_GENCODE "")
  set(JGO_CUDA_TARGETS "${CMAKE_CUDA_ARCHITECTURES}")
else()
  set(CMAKE_CUDA_ARCHITECTURES OFF)
  set(JGO_CUDA_TARGETS "${JGO_CUDA_GENCODE}")
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
if(NOT CUDAToolkit_VERSION_MAJOR STREQUAL JGO_CUDA_MAJOR)
  message(FATAL_ERROR "jaxgraphops-cuda${JGO_CUDA_MAJOR} needs the CUDA ${JGO_CUDA_MAJOR} toolkit; found "
                      "${CUDAToolkit_VERSION} (${CMAKE_CUDA_COMPILER}): set CUDACXX to its nvcc")
endif()
if(NOT SKBUILD_PROJECT_VERSION_FULL)
  message(FATAL_ERROR "JGO_COMPONENT=cuda-plugin is built by scikit-build-core "
                      "(pip wheel plugins/cuda${JGO_CUDA_MAJOR}), which passes the version the library reports")
endif()

# The kernels: an object library, so that every handler lands in the shared library.
add_library(jgo_cuda_kernels OBJECT ${JGO_CUDA_SOURCES})
set_target_properties(jgo_cuda_kernels PROPERTIES POSITION_INDEPENDENT_CODE ON CUDA_STANDARD 17
                                                  CUDA_VISIBILITY_PRESET hidden)
jgo_handler_includes(jgo_cuda_kernels)
target_compile_definitions(jgo_cuda_kernels PRIVATE JGO_WITH_CUDA)
# Uncompressed GPU images (nvcc compresses large ones by default): the cubins stay readable by nvdisasm and
# tools/ptxas_reports.py (CI's cost cards read the plugin's own build), the driver loads them without a
# decompression step, and the wheel's zip compresses them anyway.
target_compile_options(jgo_cuda_kernels PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-no-compress>)
if(JGO_CUDA_GENCODE)
  target_compile_options(jgo_cuda_kernels PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--generate-code=${JGO_CUDA_GENCODE}>)
endif()

set(library jgo_cuda${JGO_CUDA_MAJOR})
add_library(jgo_cuda_plugin SHARED ffi/cuda_plugin.cc $<TARGET_OBJECTS:jgo_cuda_kernels>)
set_target_properties(jgo_cuda_plugin PROPERTIES OUTPUT_NAME ${library} CXX_VISIBILITY_PRESET hidden)
jgo_handler_includes(jgo_cuda_plugin)
target_compile_definitions(jgo_cuda_plugin PRIVATE JGO_WITH_CUDA JGO_VERSION="${SKBUILD_PROJECT_VERSION_FULL}")
target_compile_options(jgo_cuda_plugin PRIVATE -Wall -Wextra)
# Only the table is exported (the CUDA runtime's symbols stay inside), and every symbol must resolve
# at link time: a handler missing from ffi/cuda fails the build, not the import.
set(exports ${CMAKE_CURRENT_BINARY_DIR}/cuda_plugin.map)
file(WRITE ${exports} "{ global: jgo_cuda_*; local: *; };\n")
target_link_options(jgo_cuda_plugin PRIVATE -Wl,--version-script=${exports} -Wl,-z,defs)
set_property(TARGET jgo_cuda_plugin APPEND PROPERTY LINK_DEPENDS ${exports})
target_link_libraries(jgo_cuda_plugin PRIVATE CUDA::cudart_static)
message(STATUS "jaxgraphops: CUDA plugin lib${library}.so for ${JGO_CUDA_TARGETS} "
               "(CUDA ${CUDAToolkit_VERSION})")

install(TARGETS jgo_cuda_plugin LIBRARY DESTINATION jaxgraphops_cuda${JGO_CUDA_MAJOR})
