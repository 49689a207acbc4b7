// The C interface of the CUDA plugin library (cmake/cuda-plugin.cmake): its FFI targets as a table of
// {name, handler}, the package version it was built as and the CUDA runtime it links, read with ctypes
// by the plugin package (plugins/cuda13/jaxgraphops_cuda13/__init__.py). No Python C API: one library
// serves every Python version.
#include <cuda_runtime_api.h>

#include "handlers.h"

#define JGO_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
struct Target {
  const char* name;
  XLA_FFI_Handler* handler;
};
#define JGO_CUDA_ENTRY(target, Stem) {#target, Jgo##Stem##Cuda},
constexpr Target kTargets[] = {JGO_TARGETS(JGO_CUDA_ENTRY)};
#undef JGO_CUDA_ENTRY
constexpr int kCount = sizeof(kTargets) / sizeof(kTargets[0]);
}  // namespace

// The version of the package this library was built for (the plugin's, which pins the core's).
JGO_EXPORT const char* jgo_cuda_version() { return JGO_VERSION; }
// CUDART_VERSION of the statically linked CUDA runtime, e.g. 13000.
JGO_EXPORT int jgo_cuda_runtime_version() { return CUDART_VERSION; }
JGO_EXPORT int jgo_cuda_target_count() { return kCount; }
// The i-th target's name and handler; null outside [0, count).
JGO_EXPORT const char* jgo_cuda_target_name(int i) { return i >= 0 && i < kCount ? kTargets[i].name : nullptr; }
JGO_EXPORT void* jgo_cuda_target_handler(int i) {
  return i >= 0 && i < kCount ? reinterpret_cast<void*>(kTargets[i].handler) : nullptr;
}
