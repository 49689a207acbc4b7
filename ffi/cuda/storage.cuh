// Mixed precision of the CUDA kernels: features stored as S (float, double, __nv_bfloat16,
// __half) are widened to the compute type T (float for the half types, else S) when read and
// narrowed back when written; scores, softmax statistics and sums stay in T.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/launch.cuh"
#include "jgo/args.h"

namespace jgo {
inline namespace JGO_CUDA_PLATFORM {

// The compute type of a storage type: float for the half types, else the type itself.
template <typename S>
struct ComputeOf {
  using type = S;
};
template <>
struct ComputeOf<__half> {
  using type = float;
};
template <>
struct ComputeOf<__nv_bfloat16> {
  using type = float;
};
template <typename S>
using Compute = typename ComputeOf<S>::type;

template <typename T, typename S>
__device__ __forceinline__ T Widen(S v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ float Widen<float, __half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float Widen<float, __nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename S, typename T>
__device__ __forceinline__ S Narrow(T v) {
  return static_cast<S>(v);
}
template <>
__device__ __forceinline__ __half Narrow<__half, float>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 Narrow<__nv_bfloat16, float>(float v) {
  return __float2bfloat16_rn(v);
}

// The buffer's data as T* (also for the CUDA half types, which the FFI's typed_data does not know).
template <typename T>
T* Data(const ffi::AnyBuffer& b) {
  return static_cast<T*>(b.untyped_data());
}

// Calls fn(S{}, T{}, I{}) for a storage/score dtype pair accepted by StorageFits and an index
// dtype (int32/int64).
template <typename Fn>
ffi::Error DispatchStorage(ffi::DataType storage, ffi::DataType score, ffi::DataType index, Fn&& fn) {
  return DispatchTypes(score, index, [&](auto t, auto i) -> ffi::Error {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>) {
      if (storage == ffi::DataType::BF16) return fn(__nv_bfloat16{}, t, i);
      if (storage == ffi::DataType::F16) return fn(__half{}, t, i);
    }
    return fn(t, t, i);
  });
}

// The same for kernels compiled for int32 indices only (an int64 graph reaches them as its int32 view:
// cuda/int32_graph.cuh): fn(S{}, T{}).
template <typename Fn>
ffi::Error DispatchStorage(ffi::DataType storage, ffi::DataType score, Fn&& fn) {
  return DispatchStorage(storage, score, ffi::DataType::S32, [&](auto s, auto t, auto) { return fn(s, t); });
}

}  // namespace JGO_CUDA_PLATFORM
}  // namespace jgo
