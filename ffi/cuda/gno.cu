// CUDA handlers of the graph neural operator: jgo_gno_fwd, jgo_gno_bwd_src and jgo_gno_bwd_dst.
// Same operands, attributes and results as the CPU twin (cpu/gno.cc), same per-edge math
// (jgo/gno.h), same shape checks (jgo/gno_args.h).
//
// A block walks rows (grid-stride over at most kGnoBlocks blocks). Per edge the block evaluates
// the kernel MLP into shared memory (one hidden unit per thread) and adds the outer product of
// the gathered row with it to the row's [features, H+1] accumulator, which lives in a per-block
// slice of XLA scratch memory (each element owned by one thread); the row is then contracted
// with Vb, threads reading Vb rows coalesced. kappa is never formed. Parameter gradients are
// accumulated in per-block partial sums and reduced over blocks in a fixed order by a second
// kernel: no floating-point atomics, bitwise reproducible. Edges whose neighbour or edge id is
// out of range are skipped and offsets are clamped, so no kernel reads or writes out of bounds.
//
// Compile check (zero warnings), from the repository root, on one line:
//   nvcc -std=c++17 -O3 -Xcompiler -fPIC -Xcompiler -Wall,-Wextra --Werror all-warnings
//     --generate-code=arch=compute_80,code=sm_80 --generate-code=arch=compute_90,code=sm_90
//     -Iffi -Iffi/common -isystem third_party/xla_ffi
//     -DJGO_WITH_CUDA -c ffi/cuda/gno.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/launch.cuh"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/gno.h"
#include "jgo/gno_args.h"

namespace jgo {
namespace {

constexpr int64_t kGnoBlocks = 256;  // blocks per pass: bounds the per-block scratch

// y[o] (= or +=) sum_q W[q * N + o] acc[q] for o < N, by the whole block: thread groups split q,
// lanes of a group take adjacent o (coalesced reads of W), partial sums meet in `red` [blockDim].
template <typename T>
__device__ void BlockContract(const T* acc, int64_t Q, const T* W, int64_t N, T* y, T* red) {
  const int64_t lanes = N < blockDim.x ? N : blockDim.x;
  const int64_t groups = blockDim.x / lanes;
  const int64_t g = threadIdx.x / lanes, l = threadIdx.x % lanes;
  for (int64_t o0 = 0; o0 < N; o0 += lanes) {
    const int64_t o = o0 + l;
    T s = T(0);
    if (g < groups && o < N) {
      for (int64_t q = g; q < Q; q += groups) s += W[q * N + o] * acc[q];
    }
    red[threadIdx.x] = s;
    __syncthreads();
    if (g == 0 && o < N) {
      T t = T(0);
      for (int64_t gg = 0; gg < groups; ++gg) t += red[gg * lanes + l];
      y[o] = t;
    }
    __syncthreads();
  }
}

// The kernel MLP of edge e into shared memory: pre[u], hs[u] = relu(pre[u]) (u < H), hs[H] = 1.
template <typename T>
__device__ void BlockHidden(const GnoArgs& a, const T* U, const T* b_u, const T* dxe, T* pre, T* hs) {
  for (int64_t u = threadIdx.x; u < a.hidden; u += blockDim.x) {
    pre[u] = GnoPre(U + u * a.dim, b_u[u], dxe, a.dim);
    hs[u] = GnoHidden(pre[u]);
  }
  if (threadIdx.x == 0) hs[a.hidden] = T(1);
}

// acc[q] += xs[q / P] hs[q % P] for q < n * P (each q owned by one thread).
template <typename T>
__device__ void BlockOuter(T* acc, const T* xs, int64_t n, const T* hs, int64_t P) {
  for (int64_t q = threadIdx.x; q < n * P; q += blockDim.x) acc[q] += xs[q / P] * hs[q % P];
}

// out[i] = sum_{b < blocks} part[b * stride + i] for i < len: the fixed-order reduction of
// per-block partials.
template <typename T>
__global__ void SumPartialsKernel(const T* part, int64_t blocks, int64_t stride, int64_t len, T* out) {
  for (int64_t i = ThreadIndex(); i < len; i += ThreadCount()) {
    T s = T(0);
    for (int64_t b = 0; b < blocks; ++b) s += part[b * stride + i];
    out[i] = s;
  }
}

// Per-block scratch of `count` elements of T, zeroed on the stream.
template <typename T>
ffi::ErrorOr<T*> Scratch(CudaScratch& scratch, int64_t count, cudaStream_t stream, const char* name) {
  if (count == 0) return static_cast<T*>(nullptr);
  auto p = ScratchBytes(scratch, sizeof(T) * count, alignof(T));
  if (!p.has_value()) return ffi::Unexpected(ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": out of scratch memory"));
  if (cudaMemsetAsync(*p, 0, sizeof(T) * count, stream) != cudaSuccess)
    return ffi::Unexpected(ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": cudaMemsetAsync failed"));
  return static_cast<T*>(*p);
}

inline int64_t Blocks(int64_t rows) { return std::min<int64_t>(rows, kGnoBlocks); }

// Elements of the per-block vectors of a pass over rows with `features` gathered features:
// pre-activations [H], hidden units [H+1], their gradients or the row [H+1], the row or G
// [features], and the partial sums of BlockContract [kBlock].
__host__ __device__ inline int64_t VectorLength(const GnoArgs& a, int64_t features) {
  return a.hidden + 2 * a.units() + features + kBlock;
}

// The per-block vectors: dynamic shared memory, or this block's slice of `global` when they do not
// fit in it (hidden widths of thousands).
template <typename T>
__device__ __forceinline__ T* BlockVectors(T* global, int64_t len) {
  return global ? global + blockIdx.x * len : SharedMemory<T>();
}

// ---------------------------------------------------------------------------------------
// jgo_gno_fwd: A_i[c, k] = sum_e w_e f_j[c] h~_e[k], out_i = Vb . A_i

template <typename T, typename I, bool kWeight, bool kDiag>
__global__ void GnoFwdKernel(GnoArgs a, const I* offsets, const I* nbr, const I* eid, const T* f, const T* dx,
                             const T* U, const T* b_u, const T* Vb, const T* w, T* out, T* work, T* vecs) {
  const int64_t P = a.units(), Cin = a.c_in, Q = Cin * P;
  T* pre = BlockVectors(vecs, VectorLength(a, Cin));
  T* hs = pre + a.hidden;
  T* xs = hs + P;
  T* red = xs + Cin;
  T* A = work + blockIdx.x * Q;
  for (int64_t r = blockIdx.x; r < a.n_rows; r += gridDim.x) {
    for (int64_t q = threadIdx.x; q < Q; q += blockDim.x) A[q] = T(0);
    const int64_t begin = Clamp(offsets[r], 0, a.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, a.n_edges);
    for (int64_t k = begin; k < end; ++k) {
      const int64_t j = nbr[k], e = eid[k];
      if (!InRange(j, a.n_src) || !InRange(e, a.n_edges)) continue;
      __syncthreads();  // the previous edge's pre/hs/xs are consumed
      BlockHidden(a, U, b_u, dx + e * a.dim, pre, hs);
      const T we = kWeight ? w[e] : T(1);
      for (int64_t c = threadIdx.x; c < Cin; c += blockDim.x) xs[c] = we * f[j * Cin + c];
      __syncthreads();
      BlockOuter(A, xs, Cin, hs, P);
    }
    __syncthreads();  // A is complete
    if (kDiag) {
      for (int64_t c = threadIdx.x; c < Cin; c += blockDim.x) {
        T s = T(0);
        for (int64_t u = 0; u < P; ++u) s += Vb[c * P + u] * A[c * P + u];
        out[r * Cin + c] = s;
      }
      __syncthreads();
    } else {
      BlockContract(A, Q, Vb, a.c_out, out + r * a.c_out, red);
    }
  }
}

// Where a pass keeps its per-block vectors: shared memory (`shared_bytes` > 0) when the device's
// opt-in maximum per block allows, else global scratch (`global`).
template <typename T>
struct Vectors {
  T* global;
  size_t shared_bytes;
};

template <typename T>
ffi::ErrorOr<Vectors<T>> PlaceVectors(CudaScratch& scratch, int64_t blocks, int64_t len, cudaStream_t stream,
                                      const char* name) {
  int device = 0, max_shared = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&max_shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess)
    return ffi::Unexpected(ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": no device attributes"));
  const size_t bytes = sizeof(T) * len;
  if (bytes <= static_cast<size_t>(max_shared)) return Vectors<T>{nullptr, bytes};
  auto global = Scratch<T>(scratch, blocks * len, stream, name);
  if (global.has_error()) return ffi::Unexpected(global.error());
  return Vectors<T>{*global, 0};
}

template <typename T, typename I>
ffi::Error GnoFwdTyped(cudaStream_t stream, CudaScratch& scratch, const GnoArgs& a, ffi::AnyBuffer offsets,
                       ffi::AnyBuffer nbr, ffi::AnyBuffer eid, ffi::AnyBuffer f, ffi::AnyBuffer dx, ffi::AnyBuffer U,
                       ffi::AnyBuffer b_u, ffi::AnyBuffer Vb, ffi::AnyBuffer w, ffi::AnyBuffer out) {
  const int64_t blocks = Blocks(a.n_rows);
  auto work = Scratch<T>(scratch, blocks * a.c_in * a.units(), stream, "jgo_gno_fwd");
  if (work.has_error()) return work.error();
  auto vecs = PlaceVectors<T>(scratch, blocks, VectorLength(a, a.c_in), stream, "jgo_gno_fwd");
  if (vecs.has_error()) return vecs.error();
  auto kernel = WithFlags(a.has_weight, a.diagonal, [](auto has_weight, auto diagonal) {
    return GnoFwdKernel<T, I, decltype(has_weight)::value, decltype(diagonal)::value>;
  });
  return LaunchBlocks("jgo_gno_fwd", kernel, blocks, vecs->shared_bytes, stream, a, offsets.typed_data<I>(),
                      nbr.typed_data<I>(), eid.typed_data<I>(), f.typed_data<T>(), dx.typed_data<T>(),
                      U.typed_data<T>(), b_u.typed_data<T>(), Vb.typed_data<T>(),
                      a.has_weight ? w.typed_data<T>() : nullptr, out.typed_data<T>(), *work, vecs->global);
}

ffi::Error GnoFwdCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                      ffi::AnyBuffer eid, ffi::AnyBuffer f, ffi::AnyBuffer dx, ffi::AnyBuffer U, ffi::AnyBuffer b_u,
                      ffi::AnyBuffer Vb, ffi::AnyBuffer w, ffi::Result<ffi::AnyBuffer> out, bool diagonal,
                      bool has_weight) {
  const auto od = out->dimensions();
  const int64_t c_out = od.size() == 2 ? od[1] : -1;
  auto args = CheckGno(GnoPass::kFwd, offsets, nbr, eid, f, dx, U, b_u, Vb, w, nullptr, c_out, diagonal, has_weight);
  if (args.has_error()) return args.error();
  if (auto err = CheckGnoFwdResult(*args, *out, f.element_type()); err.failure()) return err;
  return DispatchTypes(f.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return GnoFwdTyped<decltype(t), decltype(i)>(stream, scratch, *args, offsets, nbr, eid, f, dx, U, b_u, Vb, w,
                                                 *out);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_gno_bwd_src, over the out-edges of each source j (reverse CSR):
//   B_j[o, k] = sum_e w_e G_i[o] h~_e[k],  grad_f[j] = Vb . B_j,  grad_Vb[c, o, k] += f_j[c] B_j[o, k]

template <typename T, typename I, bool kWeight, bool kDiag>
__global__ void GnoBwdSrcKernel(GnoArgs a, const I* offsets, const I* nbr, const I* eid, const T* f, const T* dx,
                                const T* U, const T* b_u, const T* Vb, const T* w, const T* G, T* grad_f, T* work,
                                T* part_vb, T* vecs) {
  const int64_t P = a.units(), Cin = a.c_in, Cout = a.c_out, Q = Cout * P;
  const int64_t L = kDiag ? Q : Cin * Q;
  T* pre = BlockVectors(vecs, VectorLength(a, Cout));
  T* hs = pre + a.hidden;
  T* xs = hs + P;
  T* red = xs + Cout;
  T* B = work + blockIdx.x * Q;
  T* part = part_vb + blockIdx.x * L;
  for (int64_t r = blockIdx.x; r < a.n_rows; r += gridDim.x) {
    for (int64_t q = threadIdx.x; q < Q; q += blockDim.x) B[q] = T(0);
    const int64_t begin = Clamp(offsets[r], 0, a.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, a.n_edges);
    for (int64_t k = begin; k < end; ++k) {
      const int64_t i = nbr[k], e = eid[k];
      if (!InRange(i, a.n_dst) || !InRange(e, a.n_edges)) continue;
      __syncthreads();
      BlockHidden(a, U, b_u, dx + e * a.dim, pre, hs);
      const T we = kWeight ? w[e] : T(1);
      for (int64_t o = threadIdx.x; o < Cout; o += blockDim.x) xs[o] = we * G[i * Cout + o];
      __syncthreads();
      BlockOuter(B, xs, Cout, hs, P);
    }
    __syncthreads();
    const T* fr = f + r * Cin;
    if (kDiag) {
      for (int64_t c = threadIdx.x; c < Cin; c += blockDim.x) {
        T s = T(0);
        for (int64_t u = 0; u < P; ++u) s += Vb[c * P + u] * B[c * P + u];
        grad_f[r * Cin + c] = s;
      }
      for (int64_t q = threadIdx.x; q < Q; q += blockDim.x) part[q] += fr[q / P] * B[q];
      __syncthreads();
    } else {
      BlockContract(B, Q, Vb, Cin, grad_f + r * Cin, red);
      for (int64_t x = threadIdx.x; x < L; x += blockDim.x) part[x] += fr[x / Q] * B[x % Q];
      __syncthreads();
    }
  }
}

// ---------------------------------------------------------------------------------------
// jgo_gno_bwd_dst, over the in-edges of each destination i (CSC):
//   Q_i[c, k] = sum_o G_i[o] Vb[o, c, k],  t_e = f_j . Q_i,  grad_w_e = <h~_e, t_e>,
//   ga_e = w_e t_e relu'(a_e),  grad_dx_e = U^T ga_e,  grad_U += ga_e dx_e^T,  grad_b_u += ga_e

template <typename T, typename I, bool kWeight, bool kDiag>
__global__ void GnoBwdDstKernel(GnoArgs a, const I* offsets, const I* nbr, const I* eid, const T* f, const T* dx,
                                const T* U, const T* b_u, const T* Vb, const T* w, const T* G, T* grad_dx, T* grad_w,
                                T* work, T* part_u, T* vecs) {
  const int64_t H = a.hidden, P = a.units(), Cin = a.c_in, Cout = a.c_out, Q = Cin * P, d = a.dim;
  T* pre = BlockVectors(vecs, VectorLength(a, Cin));
  T* hs = pre + H;
  T* ts = hs + P;
  T* fs = ts + P;
  T* Qi = work + blockIdx.x * Q;
  T* part = part_u + blockIdx.x * H * (d + 1);  // grad_U [H, d] then grad_b_u [H]
  for (int64_t r = blockIdx.x; r < a.n_rows; r += gridDim.x) {
    __syncthreads();  // the previous row's Qi is consumed
    for (int64_t q = threadIdx.x; q < Q; q += blockDim.x) {
      T s = T(0);
      if (kDiag) {
        s = G[r * Cin + q / P] * Vb[q];
      } else {
        for (int64_t o = 0; o < Cout; ++o) s += G[r * Cout + o] * Vb[o * Q + q];
      }
      Qi[q] = s;
    }
    const int64_t begin = Clamp(offsets[r], 0, a.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, a.n_edges);
    for (int64_t k = begin; k < end; ++k) {
      const int64_t j = nbr[k], e = eid[k];
      if (!InRange(j, a.n_src) || !InRange(e, a.n_edges)) continue;
      const T* dxe = dx + e * d;
      __syncthreads();  // Qi is written; the previous edge's shared values are consumed
      BlockHidden(a, U, b_u, dxe, pre, hs);
      for (int64_t c = threadIdx.x; c < Cin; c += blockDim.x) fs[c] = f[j * Cin + c];
      __syncthreads();
      for (int64_t u = threadIdx.x; u < P; u += blockDim.x) {
        T t = T(0);
        for (int64_t c = 0; c < Cin; ++c) t += fs[c] * Qi[c * P + u];
        ts[u] = t;
      }
      __syncthreads();
      const T we = kWeight ? w[e] : T(1);
      for (int64_t u = threadIdx.x; u < H; u += blockDim.x) {
        const T g = GnoPreGrad(we, ts[u], pre[u]);
        pre[u] = g;  // pre now holds ga
        for (int64_t m = 0; m < d; ++m) part[u * d + m] += g * dxe[m];
        part[H * d + u] += g;
      }
      if (kWeight && threadIdx.x == 0) {
        T s = T(0);
        for (int64_t u = 0; u < P; ++u) s += hs[u] * ts[u];
        grad_w[e] = s;
      }
      __syncthreads();
      for (int64_t m = threadIdx.x; m < d; m += blockDim.x) {
        T s = T(0);
        for (int64_t u = 0; u < H; ++u) s += U[u * d + m] * pre[u];
        grad_dx[e * d + m] = s;
      }
    }
  }
}

template <typename T, typename I>
ffi::Error GnoBwdTyped(cudaStream_t stream, CudaScratch& scratch, const GnoArgs& a, bool by_src,
                       ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid, ffi::AnyBuffer f,
                       ffi::AnyBuffer dx, ffi::AnyBuffer U, ffi::AnyBuffer b_u, ffi::AnyBuffer Vb, ffi::AnyBuffer w,
                       ffi::AnyBuffer G, ffi::AnyBuffer* results) {
  const char* name = by_src ? "jgo_gno_bwd_src" : "jgo_gno_bwd_dst";
  const int64_t blocks = Blocks(a.n_rows), P = a.units();
  const int64_t row_len = (by_src ? a.c_out : a.c_in) * P;
  const int64_t part_len = by_src ? static_cast<int64_t>(results[1].element_count()) : a.hidden * (a.dim + 1);
  auto work = Scratch<T>(scratch, blocks * row_len, stream, name);
  if (work.has_error()) return work.error();
  auto part = Scratch<T>(scratch, std::max<int64_t>(blocks, 1) * part_len, stream, name);
  if (part.has_error()) return part.error();
  auto vecs = PlaceVectors<T>(scratch, blocks, VectorLength(a, by_src ? a.c_out : a.c_in), stream, name);
  if (vecs.has_error()) return vecs.error();
  const I *o = offsets.typed_data<I>(), *n = nbr.typed_data<I>(), *e = eid.typed_data<I>();
  const T *fd = f.typed_data<T>(), *xd = dx.typed_data<T>(), *ud = U.typed_data<T>(), *bd = b_u.typed_data<T>();
  const T *vd = Vb.typed_data<T>(), *gd = G.typed_data<T>();
  const T* wd = a.has_weight ? w.typed_data<T>() : nullptr;
  ffi::Error err = ffi::Error::Success();
  if (by_src) {
    auto kernel = WithFlags(a.has_weight, a.diagonal, [](auto has_weight, auto diagonal) {
      return GnoBwdSrcKernel<T, I, decltype(has_weight)::value, decltype(diagonal)::value>;
    });
    err = LaunchBlocks(name, kernel, blocks, vecs->shared_bytes, stream, a, o, n, e, fd, xd, ud, bd, vd, wd, gd,
                       results[0].typed_data<T>(), *work, *part, vecs->global);
    if (err.failure()) return err;
    return Launch(name, SumPartialsKernel<T>, part_len, stream, static_cast<const T*>(*part), blocks, part_len,
                  part_len, results[1].typed_data<T>());
  }
  // Edges skipped as out of range leave their grad_dx / grad_w rows unwritten: zero them first.
  T* gw = a.has_weight ? results[3].typed_data<T>() : nullptr;
  if (cudaMemsetAsync(results[0].untyped_data(), 0, results[0].size_bytes(), stream) != cudaSuccess ||
      (gw && cudaMemsetAsync(gw, 0, results[3].size_bytes(), stream) != cudaSuccess))
    return ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": cudaMemsetAsync failed");
  auto kernel = WithFlags(a.has_weight, a.diagonal, [](auto has_weight, auto diagonal) {
    return GnoBwdDstKernel<T, I, decltype(has_weight)::value, decltype(diagonal)::value>;
  });
  err = LaunchBlocks(name, kernel, blocks, vecs->shared_bytes, stream, a, o, n, e, fd, xd, ud, bd, vd, wd, gd,
                     results[0].typed_data<T>(), gw, *work, *part, vecs->global);
  if (err.failure()) return err;
  const T* parts = *part;
  err = Launch(name, SumPartialsKernel<T>, a.hidden * a.dim, stream, parts, blocks, part_len, a.hidden * a.dim,
               results[1].typed_data<T>());
  if (err.failure()) return err;
  return Launch(name, SumPartialsKernel<T>, a.hidden, stream, parts + a.hidden * a.dim, blocks, part_len, a.hidden,
                results[2].typed_data<T>());
}

ffi::Error GnoBwdSrcCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets,
                         ffi::AnyBuffer nbr, ffi::AnyBuffer eid, ffi::AnyBuffer f, ffi::AnyBuffer dx, ffi::AnyBuffer U,
                         ffi::AnyBuffer b_u, ffi::AnyBuffer Vb, ffi::AnyBuffer w, ffi::AnyBuffer G,
                         ffi::Result<ffi::AnyBuffer> grad_f, ffi::Result<ffi::AnyBuffer> grad_vb, bool diagonal,
                         bool has_weight) {
  auto args = CheckGno(GnoPass::kBwdSrc, offsets, nbr, eid, f, dx, U, b_u, Vb, w, &G, 0, diagonal, has_weight);
  if (args.has_error()) return args.error();
  if (auto err = CheckGnoBwdSrcResults(*args, *grad_f, *grad_vb, f.element_type()); err.failure()) return err;
  ffi::AnyBuffer results[] = {*grad_f, *grad_vb};
  return DispatchTypes(f.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return GnoBwdTyped<decltype(t), decltype(i)>(stream, scratch, *args, true, offsets, nbr, eid, f, dx, U, b_u, Vb, w,
                                                 G, results);
  });
}

ffi::Error GnoBwdDstCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets,
                         ffi::AnyBuffer nbr, ffi::AnyBuffer eid, ffi::AnyBuffer f, ffi::AnyBuffer dx, ffi::AnyBuffer U,
                         ffi::AnyBuffer b_u, ffi::AnyBuffer Vb, ffi::AnyBuffer w, ffi::AnyBuffer G,
                         ffi::Result<ffi::AnyBuffer> grad_dx, ffi::Result<ffi::AnyBuffer> grad_u,
                         ffi::Result<ffi::AnyBuffer> grad_bu, ffi::Result<ffi::AnyBuffer> grad_w, bool diagonal,
                         bool has_weight) {
  auto args = CheckGno(GnoPass::kBwdDst, offsets, nbr, eid, f, dx, U, b_u, Vb, w, &G, 0, diagonal, has_weight);
  if (args.has_error()) return args.error();
  if (auto err = CheckGnoBwdDstResults(*args, *grad_dx, *grad_u, *grad_bu, *grad_w, f.element_type()); err.failure())
    return err;
  ffi::AnyBuffer results[] = {*grad_dx, *grad_u, *grad_bu, *grad_w};
  return DispatchTypes(f.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return GnoBwdTyped<decltype(t), decltype(i)>(stream, scratch, *args, false, offsets, nbr, eid, f, dx, U, b_u, Vb,
                                                 w, G, results);
  });
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER_NO_TRAITS(GnoFwd, jgo::GnoFwdCuda, jgo::BindGnoFwd<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER_NO_TRAITS(GnoBwdSrc, jgo::GnoBwdSrcCuda, jgo::BindGnoBwdSrc<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER_NO_TRAITS(GnoBwdDst, jgo::GnoBwdDstCuda, jgo::BindGnoBwdDst<jgo::CudaStream, jgo::CudaScratch>());
