// Kernels that declare themselves engine kernels, for tests/test_gpu_model.py: the cost cards' check
// (benchmarks/gpu_model/cards.py) passes GatherRows128 (128-bit gathers; nvcc 13 keeps 6 loads in flight) and
// fails GatherRowsScalar (32-bit gathers of a float row); GatherRowsEither<kVector> passes with its scalar
// path (!kVector) held to the MLP floor only; ScaleRows declares nothing and is not checked.

__device__ __forceinline__ void GatherWide(const float4* __restrict__ x, const int* __restrict__ idx,
                                           float4* __restrict__ out, int n, int row_vectors) {
  const int lane = threadIdx.x % 32, row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int k = 0; k + 8 <= n; k += 8) {
    float4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = x[idx[k + u] * row_vectors + lane];  // the gather
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      acc.x += v[u].x;
      acc.y += v[u].y;
      acc.z += v[u].z;
      acc.w += v[u].w;
    }
  }
  out[row * row_vectors + lane] = acc;
}

__device__ __forceinline__ void GatherScalar(const float* x, const int* idx, float* out, int n, int row_floats) {
  const int lane = threadIdx.x % 32, row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  float acc = 0.f;
  for (int k = 0; k < n; ++k) acc += x[idx[k] * row_floats + lane];
  out[row * row_floats + lane] = acc;
}

// gpu-model: engine mlp>=4
__global__ void GatherRows128(const float4* __restrict__ x, const int* __restrict__ idx, float4* __restrict__ out,
                              int n, int row_vectors) {
  GatherWide(x, idx, out, n, row_vectors);
}

// gpu-model: engine mlp>=4
__global__ void GatherRowsScalar(const float* x, const int* idx, float* out, int n, int row_floats) {
  GatherScalar(x, idx, out, n, row_floats);
}

// gpu-model: engine mlp>=1 vector-if kVector
template <bool kVector>
__global__ void GatherRowsEither(const float* x, const int* idx, float* out, int n, int row_floats) {
  if constexpr (kVector) {
    GatherWide(reinterpret_cast<const float4*>(x), idx, reinterpret_cast<float4*>(out), n, row_floats / 4);
  } else {
    GatherScalar(x, idx, out, n, row_floats);
  }
}
template __global__ void GatherRowsEither<true>(const float*, const int*, float*, int, int);
template __global__ void GatherRowsEither<false>(const float*, const int*, float*, int, int);

__global__ void ScaleRows(const float* x, float* out, float alpha, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = alpha * x[i];
}
