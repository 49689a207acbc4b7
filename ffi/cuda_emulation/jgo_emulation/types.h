// The CUDA runtime types the emulation shares between its headers: dim3, uint3, the 8- and 16-byte
// vector types the kernels move raw bits in (uint2, uint4), cudaError_t, cudaStream_t and the
// function-attribute and device-attribute enums.
#pragma once

struct uint3 {
  unsigned int x, y, z;
};

struct alignas(8) uint2 {
  unsigned int x, y;
};

struct alignas(16) uint4 {
  unsigned int x, y, z, w;
};

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};

enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
};

typedef struct CUstream_st* cudaStream_t;

enum cudaFuncAttribute : int { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

enum cudaDeviceAttr : int {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrL2CacheSize = 38,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};

enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
