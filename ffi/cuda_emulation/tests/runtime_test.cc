// Tests of the emulated CUDA runtime itself (not of the project's kernels): thread coordinates,
// barriers, every shuffle mode against PTX's definition, ballots, shared memory, atomics, launch
// limits and the misuse it must report. Built and run by tests/test_cuda_emulation.py:
//   g++ -std=c++17 -Iffi/cuda_emulation ffi/cuda_emulation/tests/runtime_test.cc ffi/cuda_emulation/emulation.cc
// Prints one line per check and "N passed, M failed".
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_fp16.h"
#include "cuda_bf16.h"
#include "cuda_runtime.h"

namespace {

int passed = 0, failed = 0;

void Check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  (ok ? passed : failed)++;
}

// The error of the last launch, with the emulator's message.
std::string LaunchError() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}
bool Mentions(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

__global__ void Coordinates(int* out) {
  const int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int b = blockIdx.x + gridDim.x * blockIdx.y;
  out[b * blockDim.x * blockDim.y * blockDim.z + t] = b * 1000 + t;
}

// Each thread writes its slot, then after the barrier reads its neighbour's: wrong without a
// real barrier (the neighbour has not run yet).
__global__ void Rotate(const float* in, float* out, int n) {
  float* s = static_cast<float*>(::jgo_emulation::DynamicShared());
  const int t = threadIdx.x;
  s[t] = in[blockIdx.x * n + t];
  __syncthreads();
  out[blockIdx.x * n + t] = s[(t + 1) % n];
}

__global__ void RotateNoBarrier(const float* in, float* out, int n) {
  float* s = static_cast<float*>(::jgo_emulation::DynamicShared());
  const int t = threadIdx.x;
  s[t] = in[blockIdx.x * n + t];
  out[blockIdx.x * n + t] = s[(t + 1) % n];
}

__global__ void Shuffles(int mode, int param, int width, int* out) {
  const int lane = threadIdx.x;
  int v = 0;
  switch (mode) {
    case 0: v = __shfl_sync(0xffffffffu, lane * 10, param, width); break;
    case 1: v = __shfl_up_sync(0xffffffffu, lane * 10, param, width); break;
    case 2: v = __shfl_down_sync(0xffffffffu, lane * 10, param, width); break;
    default: v = __shfl_xor_sync(0xffffffffu, lane * 10, param, width); break;
  }
  out[lane] = v;
}

// Groups of 8 lanes each sum their values with their own mask, a different number of times.
__global__ void GroupSums(double* out) {
  const int lane = threadIdx.x % 32, group = 8;
  const unsigned mask = 0xffu << (lane / group * group);
  double total = 0;
  for (int round = 0; round <= lane / group; ++round) {
    double v = lane + round;
    for (int off = group / 2; off > 0; off /= 2) v += __shfl_xor_sync(mask, v, off, group);
    total += v;
  }
  out[threadIdx.x] = total;
}

__global__ void Ballot(unsigned* out) { out[threadIdx.x] = __ballot_sync(0xffffffffu, threadIdx.x % 3 == 0); }

__global__ void WrongMask(int* out) {  // lane 0 names lanes 0-1, lane 1 names lanes 0-3
  const unsigned mask = threadIdx.x == 0 ? 0x3u : 0xfu;
  if (threadIdx.x < 4) out[threadIdx.x] = __shfl_xor_sync(mask, int(threadIdx.x), 1, 2);
}

__global__ void MaskNamesExitedLane(int* out) {
  if (threadIdx.x == 1) return;
  if (threadIdx.x == 0) out[0] = __shfl_xor_sync(0x3u, 5, 1);
}

__global__ void DivergentBarrier(int* out) {
  if (threadIdx.x % 2) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

__global__ void BarrierAfterExit(int* out) {
  if (threadIdx.x == 0) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void PastShared(int n) {
  int* s = static_cast<int*>(::jgo_emulation::DynamicShared());
  if (threadIdx.x == 0) s[n] = 1;
}

__global__ void Counter(int* c, double* d) {
  atomicAdd(c, 1);
  atomicAdd(d, 0.5);
  atomicMax(c + 1, int(blockIdx.x * blockDim.x + threadIdx.x));
}

// Blocks in flight interleave at barriers: each block adds its id into one shared global slot
// over two phases; with interleaving the other block's write lands in between.
__global__ void SharedScratchRace(int* scratch, int* out) {
  if (threadIdx.x == 0) *scratch = blockIdx.x;
  __syncthreads();
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = *scratch;
}

int PtxSource(int mode, int lane, int b, int width) {  // PTX ISA, shfl.sync
  const int seg = (32 - width) & 0x1f, c = mode == 1 ? 0 : 0x1f;
  const int max_lane = (lane & seg) | (c & ~seg), min_lane = lane & seg;
  int j = lane;
  bool p = false;
  if (mode == 0) { j = min_lane | (b & ~seg); p = j <= max_lane; }
  if (mode == 1) { j = lane - b; p = j >= max_lane; }
  if (mode == 2) { j = lane + b; p = j <= max_lane; }
  if (mode == 3) { j = lane ^ b; p = j <= max_lane; }
  return p ? j : lane;
}

void TestCoordinates() {
  std::vector<int> out(2 * 3 * 4 * 2 * 3, -1);
  ::jgo_emulation::LaunchKernel("Coordinates", Coordinates, dim3(2, 3), dim3(4, 2, 3), 0, nullptr, out.data());
  bool ok = LaunchError().empty();
  for (int b = 0; b < 6; ++b)
    for (int t = 0; t < 24; ++t) ok &= out[b * 24 + t] == b * 1000 + t;
  Check(ok, "threadIdx/blockIdx/blockDim/gridDim over a 2-D grid of 3-D blocks");
}

void TestBarrier() {
  const int n = 64, blocks = 5;
  std::vector<float> in(n * blocks), out(n * blocks);
  for (int i = 0; i < n * blocks; ++i) in[i] = float(i);
  ::jgo_emulation::LaunchKernel("Rotate", Rotate, dim3(blocks), dim3(n), n * sizeof(float), nullptr, in.data(), out.data(), n);
  bool ok = LaunchError().empty();
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < n; ++t) ok &= out[b * n + t] == in[b * n + (t + 1) % n];
  Check(ok, "__syncthreads is a barrier over the block's shared memory");
  ::jgo_emulation::LaunchKernel("RotateNoBarrier", RotateNoBarrier, dim3(blocks), dim3(n), n * sizeof(float), nullptr, in.data(),
                                out.data(), n);
  Check(LaunchError().empty() && std::isnan(out[0]), "without the barrier, a thread reads uninitialised (NaN) shared memory");
}

void TestShuffles() {
  bool ok = true;
  for (int mode = 0; mode < 4; ++mode)
    for (int width : {1, 2, 4, 8, 16, 32})
      for (int b : {0, 1, 3, 5, 8, 17, 31}) {
        std::vector<int> out(32, -1);
        ::jgo_emulation::LaunchKernel("Shuffles", Shuffles, dim3(1), dim3(32), 0, nullptr, mode, b, width, out.data());
        ok &= LaunchError().empty();
        for (int lane = 0; lane < 32; ++lane) ok &= out[lane] == PtxSource(mode, lane, b, width) * 10;
      }
  Check(ok, "__shfl_sync/_up/_down/_xor follow PTX shfl.sync for every width");
  std::vector<double> sums(64);
  ::jgo_emulation::LaunchKernel("GroupSums", GroupSums, dim3(1), dim3(64), 0, nullptr, sums.data());
  ok = LaunchError().empty();
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32, g0 = lane / 8 * 8;
    double want = 0;
    for (int round = 0; round <= lane / 8; ++round)
      for (int k = g0; k < g0 + 8; ++k) want += k + round;
    ok &= sums[t] == want;
  }
  Check(ok, "partial masks: groups of 8 lanes shuffle independently, a different number of times");
  std::vector<unsigned> ballots(64);
  ::jgo_emulation::LaunchKernel("Ballot", Ballot, dim3(1), dim3(64), 0, nullptr, ballots.data());
  unsigned want0 = 0, want1 = 0;
  for (int t = 0; t < 32; ++t) want0 |= (t % 3 == 0 ? 1u : 0u) << t;
  for (int t = 32; t < 64; ++t) want1 |= (t % 3 == 0 ? 1u : 0u) << (t - 32);
  Check(LaunchError().empty() && ballots[0] == want0 && ballots[40] == want1, "__ballot_sync");
}

void TestMisuse() {
  std::vector<int> out(64);
  ::jgo_emulation::LaunchKernel("WrongMask", WrongMask, dim3(1), dim3(32), 0, nullptr, out.data());
  std::string e = LaunchError();
  Check(Mentions(e, "disagree") || Mentions(e, "does not name"), "lanes that disagree on the mask fail: " + e);
  ::jgo_emulation::LaunchKernel("MaskNamesExitedLane", MaskNamesExitedLane, dim3(1), dim3(32), 0, nullptr, out.data());
  e = LaunchError();
  Check(Mentions(e, "exited"), "a mask naming a lane that exited fails: " + e);
  ::jgo_emulation::LaunchKernel("DivergentBarrier", DivergentBarrier, dim3(1), dim3(64), 0, nullptr, out.data());
  e = LaunchError();
  Check(Mentions(e, "divergent __syncthreads"), "__syncthreads at two call sites fails: " + e);
  ::jgo_emulation::LaunchKernel("BarrierAfterExit", BarrierAfterExit, dim3(1), dim3(64), 0, nullptr, out.data());
  e = LaunchError();
  Check(Mentions(e, "divergent barrier"), "a barrier some threads exited before fails: " + e);
  ::jgo_emulation::LaunchKernel("PastShared", PastShared, dim3(1), dim3(32), 64 * sizeof(int), nullptr, 64);
  e = LaunchError();
  Check(Mentions(e, "wrote past"), "a write past the dynamic shared memory fails: " + e);
}

void TestLimits() {
  std::vector<int> out(1 << 16);
  ::jgo_emulation::LaunchKernel("Coordinates", Coordinates, dim3(1), dim3(1025), 0, nullptr, out.data());
  Check(Mentions(LaunchError(), "invalid configuration"), "more than 1024 threads per block is rejected");
  ::jgo_emulation::LaunchKernel("Coordinates", Coordinates, dim3(1, 65536), dim3(1), 0, nullptr, out.data());
  Check(Mentions(LaunchError(), "invalid configuration"), "grid.y above 65535 is rejected");
  ::jgo_emulation::LaunchKernel("PastShared", PastShared, dim3(1), dim3(32), 64 << 10, nullptr, 0);
  Check(Mentions(LaunchError(), "above the kernel's limit"), "64 KiB of dynamic shared memory needs the attribute");
  Check(cudaFuncSetAttribute(PastShared, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10) == cudaSuccess,
        "raising the attribute to 64 KiB");
  ::jgo_emulation::LaunchKernel("PastShared", PastShared, dim3(1), dim3(32), 64 << 10, nullptr, 0);
  Check(LaunchError().empty(), "64 KiB launches after raising the attribute");
  Check(cudaFuncSetAttribute(PastShared, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 << 10) ==
            cudaErrorInvalidValue && !LaunchError().empty(),
        "the attribute cannot exceed 227 KiB");
}

void TestAtomicsAndBlocks() {
  int counter[2] = {0, -1};
  double d = 0;
  ::jgo_emulation::LaunchKernel("Counter", Counter, dim3(7), dim3(96), 0, nullptr, counter, &d);
  Check(LaunchError().empty() && counter[0] == 7 * 96 && d == 7 * 96 * 0.5 && counter[1] == 7 * 96 - 1,
        "atomicAdd (int, double) and atomicMax");
  int scratch = -1, out[4] = {-1, -1, -1, -1};
  ::jgo_emulation::LaunchKernel("SharedScratchRace", SharedScratchRace, dim3(4), dim3(32), 0, nullptr, &scratch, out);
  Check(LaunchError().empty() && (out[0] != 0 || out[2] != 2),
        "blocks in flight interleave at barriers (a race between blocks changes the result)");
}

void TestHalf() {
  bool ok = true;
  const float cases[] = {0.f, -0.f, 1.f, -2.5f, 65504.f, 65519.f, 65520.f, 1e-8f, 5.960464477539063e-08f,
                         2.9802322387695312e-08f, 6.1035156e-05f, 3.14159265f, INFINITY, -INFINITY};
  const unsigned short want[] = {0x0000, 0x8000, 0x3c00, 0xc100, 0x7bff, 0x7bff, 0x7c00, 0x0000, 0x0001,
                                 0x0000, 0x0400, 0x4248, 0x7c00, 0xfc00};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) ok &= __float2half_rn(cases[i]).__x == want[i];
  for (unsigned b = 0; b < 0x7c00; ++b) ok &= __float2half_rn(__half2float(__half{static_cast<unsigned short>(b)})).__x == b;
  ok &= std::isnan(__half2float(__float2half_rn(NAN)));
  Check(ok, "float <-> half: round to nearest even, subnormals, overflow, round trip of every finite half");
  ok = __float2bfloat16_rn(1.f).__x == 0x3f80 && __float2bfloat16_rn(1.00390625f).__x == 0x3f80 &&
       __float2bfloat16_rn(1.01171875f).__x == 0x3f82 && std::isnan(__bfloat162float(__float2bfloat16_rn(NAN))) &&
       __bfloat162float(__nv_bfloat16{0x4049}) == 3.140625f;
  Check(ok, "float <-> bfloat16: round to nearest even, NaN stays NaN");
}

}  // namespace

int main() {
  TestCoordinates();
  TestBarrier();
  TestShuffles();
  TestMisuse();
  TestLimits();
  TestAtomicsAndBlocks();
  TestHalf();
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
