// Emulated CUDA runtime (jaxgraphops' emulated CUDA platform): the ffi/cuda sources compile
// against this header as host C++ (g++ -x c++ -DJGO_CUDA_EMULATION -Iffi/cuda_emulation) and run
// on the CPU with CUDA's execution model (jgo_emulation/device.h says how). Only what the
// project's kernels use is provided; a kernel that needs more fails to compile here first.
//
// Limits are CUDA's and an H100's: at most 1024 threads per block (z <= 64), grid.y/z <= 65535,
// 48 KiB of dynamic shared memory unless the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize
// was raised, 227 KiB at most.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "jgo_emulation/device.h"
#include "jgo_emulation/types.h"

// ---- language keywords ------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// Shared memory is per block: kernels take dynamic shared memory through jgo::SharedMemory (launch.cuh).
#define __shared__ _Pragma("GCC error \"plain __shared__ is not emulated: use jgo::SharedMemory\"")

// ---- built-in variables ---------------------------------------------------------------
#define threadIdx (::jgo_emulation::Current().thread_idx)
#define blockIdx (::jgo_emulation::Current().block_idx)
#define blockDim (::jgo_emulation::Current().block_dim)
#define gridDim (::jgo_emulation::Current().grid_dim)
constexpr int warpSize = 32;

// ---- synchronisation and warp collectives -------------------------------------------------
#define __syncthreads() ::jgo_emulation::SyncThreads(__FILE__, __LINE__)
#define __syncwarp(...) ::jgo_emulation::SyncWarp(__FILE__, __LINE__, ##__VA_ARGS__)
#define __shfl_sync(...) ::jgo_emulation::ShflSync(__FILE__, __LINE__, ::jgo_emulation::Collective::kShflIdx, __VA_ARGS__)
#define __shfl_up_sync(...) ::jgo_emulation::ShflSync(__FILE__, __LINE__, ::jgo_emulation::Collective::kShflUp, __VA_ARGS__)
#define __shfl_down_sync(...) \
  ::jgo_emulation::ShflSync(__FILE__, __LINE__, ::jgo_emulation::Collective::kShflDown, __VA_ARGS__)
#define __shfl_xor_sync(...) ::jgo_emulation::ShflSync(__FILE__, __LINE__, ::jgo_emulation::Collective::kShflXor, __VA_ARGS__)
#define __ballot_sync(mask, pred) ::jgo_emulation::BallotSync(__FILE__, __LINE__, mask, pred)
#define __any_sync(mask, pred) (::jgo_emulation::BallotSync(__FILE__, __LINE__, mask, pred) != 0u)
#define __all_sync(mask, pred) \
  (::jgo_emulation::BallotSync(__FILE__, __LINE__, mask, pred) == static_cast<unsigned>(mask))

namespace jgo_emulation {
template <typename T>
T ShflSync(const char* file, int line, Collective kind, unsigned mask, T v, int param, int width = warpSize) {
  return Shuffle(kind, mask, v, param, width, file, line);
}
inline unsigned BallotSync(const char* file, int line, unsigned mask, int pred) {
  return static_cast<unsigned>(WarpCollective(Collective::kBallot, mask, pred != 0, 0, warpSize, file, line));
}
inline void SyncWarp(const char* file, int line, unsigned mask = 0xffffffffu) {
  WarpCollective(Collective::kSyncWarp, mask, 0, 0, warpSize, file, line);
}
}  // namespace jgo_emulation

// ---- atomics and memory -----------------------------------------------------------------
template <typename T>
T atomicAdd(T* p, T v) { return ::jgo_emulation::AtomicAdd(p, v); }
template <typename T>
T atomicCAS(T* p, T expected, T desired) { return ::jgo_emulation::AtomicCas(p, expected, desired); }
template <typename T>
T atomicExch(T* p, T v) { return ::jgo_emulation::AtomicExch(p, v); }
template <typename T>
T atomicMax(T* p, T v) { return ::jgo_emulation::AtomicUpdate(p, v, [](T a, T b) { return a < b ? b : a; }); }
template <typename T>
T atomicMin(T* p, T v) { return ::jgo_emulation::AtomicUpdate(p, v, [](T a, T b) { return b < a ? b : a; }); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
template <typename T>
T __ldg(const T* p) { return *p; }
// Cache-hinted loads and stores (through L2 only, streaming past the caches): plain ones here.
template <typename T>
T __ldcg(const T* p) { return *p; }
template <typename T>
void __stcs(T* p, T v) { *p = v; }
inline int __popc(unsigned int v) { return __builtin_popcount(v); }
inline int __ffs(int v) { return __builtin_ffs(v); }

// ---- runtime API ------------------------------------------------------------------------
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
// The error's name and, for the last error raised on this thread, what the emulator saw.
const char* cudaGetErrorString(cudaError_t error);
const char* cudaGetErrorName(cudaError_t error);
cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attr, int value);
template <typename... Params>
cudaError_t cudaFuncSetAttribute(void (*kernel)(Params...), cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* ptr, int value, size_t bytes);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaDeviceSynchronize();
