// CUDA helpers shared by the handlers: grid-stride indexing, lane groups, a checked launch and the
// handler definition.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "xla/ffi/api/ffi.h"

namespace jgo {
namespace ffi = xla::ffi;

// The context types of the CUDA handlers.
using CudaStream = ffi::PlatformStream<cudaStream_t>;
using CudaScratch = ffi::ScratchAllocator;

constexpr int kBlock = 256;              // threads per block, a multiple of the warp size
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride loops cover the rest
constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ int64_t ThreadIndex() { return blockIdx.x * int64_t(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ int64_t ThreadCount() { return gridDim.x * int64_t(blockDim.x); }
__device__ __forceinline__ bool InRange(int64_t i, int64_t n) { return i >= 0 && i < n; }
__device__ __forceinline__ int64_t Clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

// Lanes that share one row or one dot product: a power of two <= 32 covering n, so small feature
// sizes do not leave most of a warp idle.
inline int GroupWidth(int64_t n) {
  int g = 1;
  while (g < kWarp && g < n) g *= 2;
  return g;
}

// The shuffle mask of the group of `group` lanes holding this thread (groups never straddle a
// warp). Groups of one warp may walk different rows, so a shuffle must name only its group.
__device__ __forceinline__ unsigned GroupMask(int group) {
  return group == kWarp ? kFullMask : ((1u << group) - 1u) << ((threadIdx.x % kWarp) / group * group);
}

// Sum over the lanes of a group (mask from GroupMask), returned to every lane.
template <typename T>
__device__ __forceinline__ T GroupSum(T v, unsigned mask, int group) {
  for (int offset = group / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(mask, v, offset, group);
  return v;
}

// Launches kernel over `threads` threads (none when 0) and reports a failed launch.
template <typename... Params, typename... Args>
ffi::Error Launch(const char* name, void (*kernel)(Params...), int64_t threads, cudaStream_t stream, Args... args) {
  if (threads == 0) return ffi::Error::Success();
  const int64_t blocks = std::min<int64_t>((threads + kBlock - 1) / kBlock, kMaxBlocks);
  kernel<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(args...);
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return ffi::Error::Success();
  return ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": " + cudaGetErrorString(err));
}

}  // namespace jgo

// The handler symbol of a target: Jgo<Stem>Cuda, or Jgo<Stem>CudaEmulation where these files are
// compiled as host C++ (-DJGO_CUDA_EMULATION).
#ifdef JGO_CUDA_EMULATION
#define JGO_CUDA_SYMBOL(Stem) Jgo##Stem##CudaEmulation
#else
#define JGO_CUDA_SYMBOL(Stem) Jgo##Stem##Cuda
#endif

// Defines the handler symbol JGO_CUDA_SYMBOL(Stem) of `impl`, command-buffer compatible. `...` is its
// binding: a jgo::Bind<Op> factory given jgo::CudaStream (and jgo::CudaScratch, hence the variadic).
#define JGO_CUDA_HANDLER(Stem, impl, ...) \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(JGO_CUDA_SYMBOL(Stem), impl, (__VA_ARGS__), {xla::ffi::Traits::kCmdBufferCompatible})
// The same without traits (the gno and dimenet handlers).
#define JGO_CUDA_HANDLER_NO_TRAITS(Stem, impl, ...) \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(JGO_CUDA_SYMBOL(Stem), impl, (__VA_ARGS__))
