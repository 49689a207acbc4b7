// CUDA helpers shared by the handlers: grid-stride indexing, lane groups, shared memory, the FFI
// contexts and the one checked launch every kernel goes through.
//
// With JGO_CUDA_EMULATION the same sources compile as host C++ against ffi/cuda_emulation (the
// emulated CUDA platform); the launch statement, the dynamic shared memory accessor and the two
// context types below are the only places where the two builds differ.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "xla/ffi/api/ffi.h"

#ifdef JGO_CUDA_EMULATION
#include "jgo_emulation/ffi_context.h"
#define JGO_CUDA_PLATFORM cuda_emulation
#else
#define JGO_CUDA_PLATFORM cuda
#endif

namespace jgo {
namespace ffi = xla::ffi;
// The real and the emulated helpers live in one extension: distinct namespaces keep their
// definitions apart.
inline namespace JGO_CUDA_PLATFORM {

// The FFI contexts of the CUDA handlers: the stream, and scratch memory.
#ifdef JGO_CUDA_EMULATION
using CudaStream = ::jgo_emulation::StreamContext;
using CudaScratch = ::jgo_emulation::HostScratch;
#else
using CudaStream = ffi::PlatformStream<cudaStream_t>;
using CudaScratch = ffi::ScratchAllocator;
#endif

// XLA's FFI scratch allocator refuses alignments over 16 bytes (kMaxAlignment of XLA's DeviceMemory_Allocate; the
// emulated allocator refuses them too): ScratchBytes asks for 16 and rounds a larger alignment up inside an
// allocation grown by the difference. Every handler's scratch memory comes through it.
constexpr size_t kScratchMaxAlignment = 16;
inline std::optional<void*> ScratchBytes(CudaScratch& scratch, size_t bytes, size_t alignment) {
  const size_t extra = alignment > kScratchMaxAlignment ? alignment - kScratchMaxAlignment : 0;
  auto mem = scratch.Allocate(bytes + extra, std::min(alignment, kScratchMaxAlignment));
  if (!mem.has_value()) return std::nullopt;
  const uintptr_t p = reinterpret_cast<uintptr_t>(*mem);
  return reinterpret_cast<void*>((p + alignment - 1) / alignment * alignment);
}

constexpr int kBlock = 256;              // threads per block, a multiple of the warp size
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride loops cover the rest
constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr size_t kDefaultSharedBytes = 48 << 10;  // dynamic shared memory without opting in

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

// Sums of kN values over the lanes of a group of at least kN lanes (mask from GroupMask), scattered: returns
// the sum of value lane / (group / kN), held by every lane of the group that shares that quotient. The sums'
// bits are GroupSum's (the same tree: at each level a lane adds its partner's value to its own), in log2(group)
// shuffles for all kN values, not kN log2(group): at each of the first log2(kN) levels a lane keeps half of
// its values (the upper half where its lane bit is set) and sends the other half to its partner. Unrolled (at
// most log2(kWarp) levels), so that no loop of shuffles hides from the cost cards.
template <int kN, typename T>
__device__ __forceinline__ T GroupSumScatter(T (&v)[kN], unsigned mask, int group) {
  static_assert(kN > 0 && kN <= kWarp && (kN & (kN - 1)) == 0, "a power of two of values, at most a warp's");
  int offset = group / 2;
#pragma unroll
  for (int half = kN / 2; half > 0; half /= 2, offset /= 2) {
    const bool upper = (threadIdx.x & offset) != 0;
#pragma unroll
    for (int i = 0; i < half; ++i) {
      const T send = upper ? v[i] : v[i + half];
      const T keep = upper ? v[i + half] : v[i];
      v[i] = keep + __shfl_xor_sync(mask, send, offset, group);
    }
  }
  T total = v[0];
#pragma unroll
  for (int level = kN; level < kWarp; level *= 2, offset /= 2)
    if (offset > 0) total += __shfl_xor_sync(mask, total, offset, group);
  return total;
}

// The block's dynamic shared memory (the launch's `shared_bytes`), as T*.
template <typename T>
__device__ __forceinline__ T* SharedMemory() {
#ifdef JGO_CUDA_EMULATION
  return static_cast<T*>(::jgo_emulation::DynamicShared());
#else
  extern __shared__ __align__(16) unsigned char jgo_dynamic_shared[];
  return reinterpret_cast<T*>(jgo_dynamic_shared);
#endif
}

// The FFI error of a failed CUDA runtime call in handler `name` (success for cudaSuccess).
inline ffi::Error Status(const char* name, cudaError_t err) {
  if (err == cudaSuccess) return ffi::Error::Success();
  return ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": " + cudaGetErrorString(err));
}

// Launches kernel on `blocks` blocks of kBlock threads with `shared_bytes` of dynamic shared memory
// (raising the kernel's limit when above 48 KiB) and reports a failed launch.
template <typename... Params, typename... Args>
ffi::Error LaunchBlocks(const char* name, void (*kernel)(Params...), int64_t blocks, size_t shared_bytes,
                        cudaStream_t stream, Args... args) {
  if (blocks == 0) return ffi::Error::Success();
  cudaError_t err = cudaSuccess;
  if (shared_bytes > kDefaultSharedBytes)
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes));
  if (err == cudaSuccess) {
#ifdef JGO_CUDA_EMULATION
    ::jgo_emulation::LaunchKernel(name, kernel, dim3(static_cast<unsigned>(blocks)), dim3(kBlock), shared_bytes, stream,
                                  args...);
#else
    kernel<<<static_cast<unsigned>(blocks), kBlock, shared_bytes, stream>>>(args...);
#endif
  }
  const cudaError_t last = cudaGetLastError();  // also clears a failed attribute's error
  return Status(name, err == cudaSuccess ? last : err);
}

// Zeroes `bytes` bytes at `data` on the stream: the output elements a kernel may leave unwritten
// (those of edges it skips for an out-of-range index, or that no edge id names).
inline ffi::Error ZeroFill(const char* name, void* data, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return ffi::Error::Success();
  return Status(name, cudaMemsetAsync(data, 0, bytes, stream));
}

// f(a, b) with two run-time flags as compile-time ones (std::true_type or std::false_type arguments, read as
// `decltype(a)::value`): the four instantiations of a kernel template chosen in one place, e.g.
//   WithFlags(has_dropout, has_edge, [&](auto drop, auto edge) {
//     return Launch(name, K<T, decltype(drop)::value, decltype(edge)::value>, threads, stream, ...); });
template <typename F>
decltype(auto) WithFlags(bool a, bool b, F&& f) {
  using Yes = std::true_type;
  using No = std::false_type;
  return a ? (b ? f(Yes{}, Yes{}) : f(Yes{}, No{})) : (b ? f(No{}, Yes{}) : f(No{}, No{}));
}

// Launches kernel over `threads` threads (none when 0), grid-stride beyond kMaxBlocks blocks.
template <typename... Params, typename... Args>
ffi::Error Launch(const char* name, void (*kernel)(Params...), int64_t threads, cudaStream_t stream, Args... args) {
  return LaunchBlocks(name, kernel, std::min<int64_t>((threads + kBlock - 1) / kBlock, kMaxBlocks), 0, stream, args...);
}

}  // namespace JGO_CUDA_PLATFORM
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
