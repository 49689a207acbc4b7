// CUDA handlers of the fused GATv2 op: jgo_gatv2_fwd, jgo_gatv2_bwd_dst and jgo_gatv2_bwd_src.
// Same operands, attributes and results as the CPU twin (cpu/attention_v2.cc), same math and
// shape checks (jgo/attention_v2.h).
//
// A group of lanes (a power of two <= 32 covering C) owns one (row, head): the lanes split the
// C-length logit <a, leaky_relu(x_src[j] + x_dst[i] (+ e))> and the dot <G[i], x_src[j]> and
// share the sums by shuffles; each lane accumulates kVec features in registers (wider heads take
// several chunks, each re-walking the edges). Every output element is written by one group: no
// atomics, bitwise reproducible. Index arrays are not validated on the host; edges whose
// neighbour or edge id is out of range are skipped and offsets are clamped into [0, n_edges].
//
// Compile check (zero warnings), from the repository root, on one line:
//   nvcc -std=c++17 -O3 -Xcompiler -fPIC,-Wall,-Wextra --Werror all-warnings
//     --generate-code=arch=compute_80,code=sm_80 --generate-code=arch=compute_90,code=sm_90
//     -Iffi -Iffi/common -isystem $(python -c 'import jax.ffi;print(jax.ffi.include_dir())')
//     -DJGO_WITH_CUDA -c ffi/cuda/attention_v2.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/launch.cuh"
#include "cuda/online_softmax.cuh"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/attention.h"
#include "jgo/attention_v2.h"

namespace jgo {
namespace {

// z = <a, leaky_relu(xs + xd (+ ef))> of one (edge, head), pointers at the head; every lane of
// the group gets the sum.
template <typename T, bool kEdge>
__device__ __forceinline__ T Logit(const T* xs, const T* xd, const T* ef, const T* a, int64_t C, T slope, int lane,
                                   int group, unsigned mask) {
  T z = T(0);
  for (int64_t c = lane; c < C; c += group) z += a[c] * LeakyRelu(Gatv2Pre(xs[c], xd[c], kEdge ? ef[c] : T(0)), slope);
  return GroupSum(z, mask, group);
}

template <typename T>
__device__ __forceinline__ T GroupDot(const T* u, const T* v, int64_t C, int lane, int group, unsigned mask) {
  T d = T(0);
  for (int64_t c = lane; c < C; c += group) d += u[c] * v[c];
  return GroupSum(d, mask, group);
}

// ---------------------------------------------------------------------------------------
// jgo_gatv2_fwd: a group per (destination, head), one pass with an online softmax per chunk.

template <typename T, typename I, bool kEdge>
__global__ void FwdKernel(GatArgs g, const I* offsets, const I* nbr, const I* eid, const T* xs, const T* xd,
                          const T* a, const T* ef, T* out, T* lse, int group) {
  const int64_t H = g.heads, C = g.dim, HC = H * C;
  const T slope = static_cast<T>(g.slope);
  const int lane = threadIdx.x % group;
  const unsigned mask = GroupMask(group);
  for (int64_t w = ThreadIndex() / group; w < g.n_rows * H; w += ThreadCount() / group) {
    const int64_t r = w / H, h = w % H;
    const int64_t begin = Clamp(offsets[r], 0, g.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, g.n_edges);
    const T* xdh = xd + r * HC + h * C;
    const T* ah = a + h * C;
    AttendRow<T>(
        nbr, eid, begin, end, g.n_src, g.n_edges, C, lane, group,
        [&](int64_t j, int64_t e) {
          return Logit<T, kEdge>(xs + j * HC + h * C, xdh, kEdge ? ef + e * HC + h * C : nullptr, ah, C, slope, lane,
                                 group, mask);
        },
        [&](int64_t j) { return xs + j * HC + h * C; }, out + r * HC + h * C, lse + r * H + h);
  }
}

// ---------------------------------------------------------------------------------------
// jgo_gatv2_bwd_dst: a group per (destination i, head h) over the in-edges (CSC):
//   grad_xd[i] = sum_e dt_e,  grad_a_rows[i] = sum_e dz_e leaky(t_e),  grad_ef[e] = dt_e

template <typename T, typename I, bool kEdge>
__global__ void BwdDstKernel(GatArgs g, const I* offsets, const I* nbr, const I* eid, const T* xs, const T* xd,
                             const T* a, const T* ef, const T* info, const T* grad, T* grad_xd, T* grad_a,
                             T* grad_ef, int group) {
  const int64_t H = g.heads, C = g.dim, HC = H * C, HI = Gatv2Info::kCount * H;
  const T slope = static_cast<T>(g.slope);
  const int lane = threadIdx.x % group;
  const unsigned mask = GroupMask(group);
  for (int64_t w = ThreadIndex() / group; w < g.n_rows * H; w += ThreadCount() / group) {
    const int64_t r = w / H, h = w % H;
    const int64_t begin = Clamp(offsets[r], 0, g.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, g.n_edges);
    const T lse = info[r * HI + Gatv2Info::kLse * H + h], delta = info[r * HI + Gatv2Info::kDelta * H + h];
    const T* xdh = xd + r * HC + h * C;
    const T* gh = grad + r * HC + h * C;
    const T* ah = a + h * C;
    for (int64_t c0 = 0; c0 < C; c0 += int64_t(kVec) * group) {
      T acc_x[kVec], acc_a[kVec];
#pragma unroll
      for (int v = 0; v < kVec; ++v) acc_x[v] = acc_a[v] = T(0);
      for (int64_t k = begin; k < end; ++k) {
        const int64_t j = nbr[k], e = eid[k];
        if (!InRange(j, g.n_src) || !InRange(e, g.n_edges)) continue;
        const T* xsh = xs + j * HC + h * C;
        const T* efh = kEdge ? ef + e * HC + h * C : nullptr;
        const T z = Logit<T, kEdge>(xsh, xdh, efh, ah, C, slope, lane, group, mask);
        const T alpha = SoftmaxWeight(z, lse);
        const T dz = alpha * (GroupDot(gh, xsh, C, lane, group, mask) - delta);
#pragma unroll
        for (int v = 0; v < kVec; ++v) {
          const int64_t c = c0 + lane + int64_t(v) * group;
          if (c < C) {
            const T t = Gatv2Pre(xsh[c], xdh[c], kEdge ? efh[c] : T(0));
            const T dt = Gatv2PreGrad(dz, ah[c], t, slope);
            acc_x[v] += dt;
            acc_a[v] += Gatv2WeightGrad(dz, t, slope);
            if (kEdge) grad_ef[e * HC + h * C + c] = dt;
          }
        }
      }
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        const int64_t c = c0 + lane + int64_t(v) * group;
        if (c < C) {
          grad_xd[r * HC + h * C + c] = acc_x[v];
          grad_a[r * HC + h * C + c] = acc_a[v];
        }
      }
    }
  }
}

// jgo_gatv2_bwd_src: a group per (source j, head h) over the out-edges (reverse CSR):
//   grad_xs[j] = sum_e alpha_e G[i] + dt_e

template <typename T, typename I, bool kEdge>
__global__ void BwdSrcKernel(GatArgs g, const I* offsets, const I* nbr, const I* eid, const T* xs, const T* xd,
                             const T* a, const T* ef, const T* info, const T* grad, T* grad_xs, int group) {
  const int64_t H = g.heads, C = g.dim, HC = H * C, HI = Gatv2Info::kCount * H;
  const T slope = static_cast<T>(g.slope);
  const int lane = threadIdx.x % group;
  const unsigned mask = GroupMask(group);
  for (int64_t w = ThreadIndex() / group; w < g.n_rows * H; w += ThreadCount() / group) {
    const int64_t r = w / H, h = w % H;
    const int64_t begin = Clamp(offsets[r], 0, g.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, g.n_edges);
    const T* xsh = xs + r * HC + h * C;
    const T* ah = a + h * C;
    for (int64_t c0 = 0; c0 < C; c0 += int64_t(kVec) * group) {
      T acc[kVec];
#pragma unroll
      for (int v = 0; v < kVec; ++v) acc[v] = T(0);
      for (int64_t k = begin; k < end; ++k) {
        const int64_t i = nbr[k], e = eid[k];
        if (!InRange(i, g.n_dst) || !InRange(e, g.n_edges)) continue;
        const T* xdh = xd + i * HC + h * C;
        const T* gh = grad + i * HC + h * C;
        const T* efh = kEdge ? ef + e * HC + h * C : nullptr;
        const T z = Logit<T, kEdge>(xsh, xdh, efh, ah, C, slope, lane, group, mask);
        const T alpha = SoftmaxWeight(z, info[i * HI + Gatv2Info::kLse * H + h]);
        const T dz = alpha * (GroupDot(gh, xsh, C, lane, group, mask) - info[i * HI + Gatv2Info::kDelta * H + h]);
#pragma unroll
        for (int v = 0; v < kVec; ++v) {
          const int64_t c = c0 + lane + int64_t(v) * group;
          if (c < C) {
            const T t = Gatv2Pre(xsh[c], xdh[c], kEdge ? efh[c] : T(0));
            acc[v] += alpha * gh[c] + Gatv2PreGrad(dz, ah[c], t, slope);
          }
        }
      }
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        const int64_t c = c0 + lane + int64_t(v) * group;
        if (c < C) grad_xs[r * HC + h * C + c] = acc[v];
      }
    }
  }
}

constexpr const char* kFwd = "gatv2_fwd";
constexpr const char* kBwdDst = "gatv2_bwd_dst";
constexpr const char* kBwdSrc = "gatv2_bwd_src";

ffi::Error CudaError(const char* name, cudaError_t err) {
  return ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": " + cudaGetErrorString(err));
}

ffi::Error FwdCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                   ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef,
                   ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> lse, double negative_slope,
                   bool has_edge) {
  auto args = CheckGatv2(kFwd, offsets, nbr, eid, xs, xd, a, ef, nullptr, nullptr, false, negative_slope, has_edge);
  if (args.has_error()) return args.error();
  const auto ft = xs.element_type();
  if (auto e = CheckGatv2Result(kFwd, "out", *out, ft, {args->n_dst, args->heads, args->dim}); e.failure()) return e;
  if (auto e = CheckGatv2Result(kFwd, "lse", *lse, ft, {args->n_dst, args->heads}); e.failure()) return e;
  const GatArgs g = *args;
  return DispatchTypes(ft, offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    const int group = GroupWidth(g.dim);
    auto kernel = g.has_edge ? FwdKernel<T, I, true> : FwdKernel<T, I, false>;
    return Launch("jgo_gatv2_fwd", kernel, g.n_rows * g.heads * group, stream, g, offsets.typed_data<I>(),
                  nbr.typed_data<I>(), eid.typed_data<I>(), xs.typed_data<T>(), xd.typed_data<T>(), a.typed_data<T>(),
                  g.has_edge ? ef.typed_data<T>() : nullptr, out->typed_data<T>(), lse->typed_data<T>(), group);
  });
}

ffi::Error BwdDstCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                      ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef, ffi::AnyBuffer info,
                      ffi::AnyBuffer grad, ffi::Result<ffi::AnyBuffer> grad_xd, ffi::Result<ffi::AnyBuffer> grad_a,
                      ffi::Result<ffi::AnyBuffer> grad_ef, double negative_slope, bool has_edge) {
  auto args = CheckGatv2(kBwdDst, offsets, nbr, eid, xs, xd, a, ef, &info, &grad, false, negative_slope, has_edge);
  if (args.has_error()) return args.error();
  const auto ft = xs.element_type();
  const int64_t nd = args->n_dst, H = args->heads, C = args->dim;
  if (auto e = CheckGatv2Result(kBwdDst, "grad_x_dst", *grad_xd, ft, {nd, H, C}); e.failure()) return e;
  if (auto e = CheckGatv2Result(kBwdDst, "grad_attn_rows", *grad_a, ft, {nd, H, C}); e.failure()) return e;
  if (has_edge) {
    if (auto e = CheckGatv2Result(kBwdDst, "grad_edge_feat", *grad_ef, ft, {args->n_edges, H, C}); e.failure())
      return e;
  }
  const GatArgs g = *args;
  return DispatchTypes(ft, offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    T* gef = g.has_edge ? grad_ef->typed_data<T>() : nullptr;
    // An edge skipped for an out-of-range index leaves its grad_edge_feat row unwritten: clear it first.
    if (g.has_edge && g.n_edges * H * C > 0) {
      const cudaError_t err = cudaMemsetAsync(gef, 0, sizeof(T) * g.n_edges * H * C, stream);
      if (err != cudaSuccess) return CudaError("jgo_gatv2_bwd_dst", err);
    }
    const int group = GroupWidth(g.dim);
    auto kernel = g.has_edge ? BwdDstKernel<T, I, true> : BwdDstKernel<T, I, false>;
    return Launch("jgo_gatv2_bwd_dst", kernel, g.n_rows * g.heads * group, stream, g, offsets.typed_data<I>(),
                  nbr.typed_data<I>(), eid.typed_data<I>(), xs.typed_data<T>(), xd.typed_data<T>(), a.typed_data<T>(),
                  g.has_edge ? ef.typed_data<T>() : nullptr, info.typed_data<T>(), grad.typed_data<T>(),
                  grad_xd->typed_data<T>(), grad_a->typed_data<T>(), gef, group);
  });
}

ffi::Error BwdSrcCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                      ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef, ffi::AnyBuffer info,
                      ffi::AnyBuffer grad, ffi::Result<ffi::AnyBuffer> grad_xs, double negative_slope,
                      bool has_edge) {
  auto args = CheckGatv2(kBwdSrc, offsets, nbr, eid, xs, xd, a, ef, &info, &grad, true, negative_slope, has_edge);
  if (args.has_error()) return args.error();
  const auto ft = xs.element_type();
  if (auto e = CheckGatv2Result(kBwdSrc, "grad_x_src", *grad_xs, ft, {args->n_src, args->heads, args->dim});
      e.failure())
    return e;
  const GatArgs g = *args;
  return DispatchTypes(ft, offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    const int group = GroupWidth(g.dim);
    auto kernel = g.has_edge ? BwdSrcKernel<T, I, true> : BwdSrcKernel<T, I, false>;
    return Launch("jgo_gatv2_bwd_src", kernel, g.n_rows * g.heads * group, stream, g, offsets.typed_data<I>(),
                  nbr.typed_data<I>(), eid.typed_data<I>(), xs.typed_data<T>(), xd.typed_data<T>(), a.typed_data<T>(),
                  g.has_edge ? ef.typed_data<T>() : nullptr, info.typed_data<T>(), grad.typed_data<T>(),
                  grad_xs->typed_data<T>(), group);
  });
}

}  // namespace
}  // namespace jgo

using AnyBuf = xla::ffi::AnyBuffer;
using Stream = xla::ffi::PlatformStream<cudaStream_t>;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JgoGatv2FwdCuda, jgo::FwdCuda,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<Stream>()
                                  .Arg<AnyBuf>()  // csc offsets
                                  .Arg<AnyBuf>()  // csc sources
                                  .Arg<AnyBuf>()  // csc edge ids
                                  .Arg<AnyBuf>()  // x_src [n_src, H, C]
                                  .Arg<AnyBuf>()  // x_dst [n_dst, H, C]
                                  .Arg<AnyBuf>()  // attn_weights [H, C]
                                  .Arg<AnyBuf>()  // edge_feat [E, H, C] or [0]
                                  .Ret<AnyBuf>()  // out [n_dst, H, C]
                                  .Ret<AnyBuf>()  // lse [n_dst, H]
                                  .Attr<double>("negative_slope")
                                  .Attr<bool>("has_edge"),
                              {xla::ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(JgoGatv2BwdDstCuda, jgo::BwdDstCuda,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<Stream>()
                                  .Arg<AnyBuf>()  // csc offsets
                                  .Arg<AnyBuf>()  // csc sources
                                  .Arg<AnyBuf>()  // csc edge ids
                                  .Arg<AnyBuf>()  // x_src [n_src, H, C]
                                  .Arg<AnyBuf>()  // x_dst [n_dst, H, C]
                                  .Arg<AnyBuf>()  // attn_weights [H, C]
                                  .Arg<AnyBuf>()  // edge_feat [E, H, C] or [0]
                                  .Arg<AnyBuf>()  // dst_info [n_dst, 2, H] = (lse, delta)
                                  .Arg<AnyBuf>()  // grad of out [n_dst, H, C]
                                  .Ret<AnyBuf>()  // grad_x_dst [n_dst, H, C]
                                  .Ret<AnyBuf>()  // grad_attn_rows [n_dst, H, C]
                                  .Ret<AnyBuf>()  // grad_edge_feat [E, H, C] or [0]
                                  .Attr<double>("negative_slope")
                                  .Attr<bool>("has_edge"),
                              {xla::ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(JgoGatv2BwdSrcCuda, jgo::BwdSrcCuda,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<Stream>()
                                  .Arg<AnyBuf>()  // csr offsets
                                  .Arg<AnyBuf>()  // csr destinations
                                  .Arg<AnyBuf>()  // csr edge ids
                                  .Arg<AnyBuf>()  // x_src [n_src, H, C]
                                  .Arg<AnyBuf>()  // x_dst [n_dst, H, C]
                                  .Arg<AnyBuf>()  // attn_weights [H, C]
                                  .Arg<AnyBuf>()  // edge_feat [E, H, C] or [0]
                                  .Arg<AnyBuf>()  // dst_info [n_dst, 2, H] = (lse, delta)
                                  .Arg<AnyBuf>()  // grad of out [n_dst, H, C]
                                  .Ret<AnyBuf>()  // grad_x_src [n_src, H, C]
                                  .Attr<double>("negative_slope")
                                  .Attr<bool>("has_edge"),
                              {xla::ffi::Traits::kCmdBufferCompatible});
