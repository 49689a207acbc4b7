// CUDA handlers of the attention family: jgo_gat_fwd, jgo_gat_bwd_dst and jgo_gat_bwd_src. Same
// operands, attributes and results as the CPU twin (cpu/gat.cc), same per-edge math
// (jgo/attention.h), same shape checks (jgo/attention_args.h).
//
// A group of lanes (a power of two <= 32 covering C) owns one (row, head); adjacent groups take
// adjacent heads of a row, so the gathered feature rows are read coalesced. Every output element
// is written by one group: no atomics, bitwise reproducible. Index arrays are not validated on
// the host; edges whose neighbour or edge id is out of range are skipped and offsets are clamped
// into [0, n_edges], so no kernel reads or writes out of bounds.
//
// Compile check (zero warnings), from the repository root, on one line:
//   nvcc -std=c++17 -O3 -Xcompiler -fPIC,-Wall,-Wextra --Werror all-warnings
//     --generate-code=arch=compute_80,code=sm_80 --generate-code=arch=compute_90,code=sm_90
//     -Iffi -Iffi/common -isystem third_party/xla_ffi
//     -DJGO_WITH_CUDA -c ffi/cuda/gat.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/launch.cuh"
#include "cuda/online_softmax.cuh"
#include "cuda/storage.cuh"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/attention.h"
#include "jgo/attention_args.h"

namespace jgo {
namespace {


// ---------------------------------------------------------------------------------------
// jgo_gat_fwd: a group per (destination, head), one pass over the in-edges with an online
// softmax; each lane accumulates kVec features in registers (C > kVec * group: several chunks,
// each re-walking the edges).

template <typename S, typename T, typename I, bool kDrop, bool kEdge>
__global__ void GatFwdKernel(GatArgs a, const I* offsets, const I* nbr, const I* eid, const S* x, const T* s_src,
                             const T* s_dst, const T* s_edge, S* out, T* lse, int group) {
  const int64_t H = a.heads, C = a.dim, HC = H * C;
  const T slope = static_cast<T>(a.slope);
  const int lane = threadIdx.x % group;
  for (int64_t w = ThreadIndex() / group; w < a.n_rows * H; w += ThreadCount() / group) {
    const int64_t r = w / H, h = w % H;
    const int64_t begin = Clamp(offsets[r], 0, a.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, a.n_edges);
    const T sd = s_dst[r * H + h];
    AttendRow<T>(
        nbr, eid, begin, end, a.n_src, a.n_edges, C, lane, group,
        [&](int64_t j, int64_t e) { return GatLogit(s_src[j * H + h], sd, kEdge ? s_edge[e * H + h] : T(0), slope); },
        [&](int64_t j) { return x + j * HC + h * C; },
        [&](int64_t e) { return DropoutFactorIf<kDrop, T>(a.drop, e, h); },
        out + r * HC + h * C, lse + r * H + h);
  }
}

template <typename S, typename T, typename I>
ffi::Error GatFwdTyped(cudaStream_t stream, const GatArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                       ffi::AnyBuffer eid, ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_dst,
                       ffi::AnyBuffer s_edge, ffi::AnyBuffer out, ffi::AnyBuffer lse) {
  const int group = GroupWidth(a.dim);
  auto kernel = a.has_edge
                    ? (a.drop.key ? GatFwdKernel<S, T, I, true, true> : GatFwdKernel<S, T, I, false, true>)
                    : (a.drop.key ? GatFwdKernel<S, T, I, true, false> : GatFwdKernel<S, T, I, false, false>);
  return Launch("jgo_gat_fwd", kernel, a.n_rows * a.heads * group, stream, a, offsets.typed_data<I>(),
                nbr.typed_data<I>(), eid.typed_data<I>(), Data<const S>(x), s_src.typed_data<T>(),
                s_dst.typed_data<T>(), a.has_edge ? s_edge.typed_data<T>() : nullptr, Data<S>(out),
                lse.typed_data<T>(), group);
}

ffi::Error GatFwdCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                      ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_dst, ffi::AnyBuffer s_edge,
                      ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> lse,
                      double negative_slope, bool has_edge, int64_t dropout_threshold, double dropout_scale) {
  auto args = CheckGatFwd(offsets, nbr, eid, x, s_src, s_dst, s_edge, *out, *lse, negative_slope, has_edge);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout("jgo_gat_fwd", *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  return DispatchStorage(args->storage, args->score, offsets.element_type(), [&](auto s, auto t, auto i) {
    return GatFwdTyped<decltype(s), decltype(t), decltype(i)>(stream, *args, offsets, nbr, eid, x, s_src, s_dst,
                                                              s_edge, *out, *lse);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_gat_bwd_dst: a group per (destination i, head h) over the in-edges (CSC):
//   grad_s_dst[i,h] = sum_e gp_e,h      grad_s_edge[e,h] = gp_e,h
// The lanes split the dot product <G[i,h], x[j,h]> and share its sum.

template <typename S, typename T, typename I, bool kDrop, bool kEdge>
__global__ void GatBwdDstKernel(GatArgs a, const I* offsets, const I* nbr, const I* eid, const S* x, const T* s_src,
                                const T* s_edge, const T* dst_info, const S* grad, T* grad_s_dst, T* grad_s_edge,
                                int group) {
  const int64_t H = a.heads, C = a.dim, HC = H * C;
  const T slope = static_cast<T>(a.slope);
  const int lane = threadIdx.x % group;
  const unsigned mask = GroupMask(group);
  for (int64_t w = ThreadIndex() / group; w < a.n_rows * H; w += ThreadCount() / group) {
    const int64_t r = w / H, h = w % H;
    const int64_t begin = Clamp(offsets[r], 0, a.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, a.n_edges);
    const T* info = dst_info + r * DstInfo::kCount * H;
    const T sd = info[DstInfo::kSDst * H + h], lse = info[DstInfo::kLse * H + h];
    const T delta = info[DstInfo::kDelta * H + h];
    const S* g = grad + r * HC + h * C;
    T acc = T(0);
    for (int64_t k = begin; k < end; ++k) {
      const int64_t j = nbr[k], e = eid[k];
      if (!InRange(j, a.n_src) || !InRange(e, a.n_edges)) continue;
      const S* xh = x + j * HC + h * C;
      T dot = T(0);
      for (int64_t c = lane; c < C; c += group) dot += Widen<T>(g[c]) * Widen<T>(xh[c]);
      dot = GroupSum(dot, mask, group);
      const T p = GatPre(s_src[j * H + h], sd, kEdge ? s_edge[e * H + h] : T(0));
      const T f = DropoutFactorIf<kDrop, T>(a.drop, e, h);
      const T gp = GatLogitGrad(SoftmaxWeight(LeakyRelu(p, slope), lse, ExpFn{}), dot * f, delta, p, slope);
      acc += gp;
      if (kEdge && lane == 0) grad_s_edge[e * H + h] = gp;
    }
    if (lane == 0) grad_s_dst[r * H + h] = acc;
  }
}

// jgo_gat_bwd_src: a group per (source j, head h) over the out-edges (reverse CSR):
//   grad_x[j,h,:] = sum_e alpha_e,h G[i,h,:]      grad_s_src[j,h] = sum_e gp_e,h

template <typename S, typename T, typename I, bool kDrop, bool kEdge>
__global__ void GatBwdSrcKernel(GatArgs a, const I* offsets, const I* nbr, const I* eid, const S* x, const T* s_src,
                                const T* s_edge, const T* dst_info, const S* grad, S* grad_x, T* grad_s_src,
                                int group) {
  const int64_t H = a.heads, C = a.dim, HC = H * C, HI = DstInfo::kCount * H;
  const T slope = static_cast<T>(a.slope);
  const int lane = threadIdx.x % group;
  const unsigned mask = GroupMask(group);
  for (int64_t w = ThreadIndex() / group; w < a.n_rows * H; w += ThreadCount() / group) {
    const int64_t r = w / H, h = w % H;
    const int64_t begin = Clamp(offsets[r], 0, a.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, a.n_edges);
    const S* xh = x + r * HC + h * C;
    const T ss = s_src[r * H + h];
    for (int64_t c0 = 0; c0 < C || c0 == 0; c0 += int64_t(kVec) * group) {
      T acc[kVec];
#pragma unroll
      for (int v = 0; v < kVec; ++v) acc[v] = T(0);
      T acc_s = T(0);
      for (int64_t k = begin; k < end; ++k) {
        const int64_t i = nbr[k], e = eid[k];
        if (!InRange(i, a.n_dst) || !InRange(e, a.n_edges)) continue;
        const S* gh = grad + i * HC + h * C;
        const T* info = dst_info + i * HI;
        T dot = T(0);
        for (int64_t c = lane; c < C; c += group) dot += Widen<T>(gh[c]) * Widen<T>(xh[c]);
        dot = GroupSum(dot, mask, group);
        const T p = GatPre(ss, info[DstInfo::kSDst * H + h], kEdge ? s_edge[e * H + h] : T(0));
        const T alpha = SoftmaxWeight(LeakyRelu(p, slope), info[DstInfo::kLse * H + h], ExpFn{});
        const T f = DropoutFactorIf<kDrop, T>(a.drop, e, h);
        acc_s += GatLogitGrad(alpha, dot * f, info[DstInfo::kDelta * H + h], p, slope);
#pragma unroll
        for (int v = 0; v < kVec; ++v) {
          const int64_t c = c0 + lane + int64_t(v) * group;
          if (c < C) acc[v] += alpha * f * Widen<T>(gh[c]);
        }
      }
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        const int64_t c = c0 + lane + int64_t(v) * group;
        if (c < C) grad_x[r * HC + h * C + c] = Narrow<S>(acc[v]);
      }
      if (c0 == 0 && lane == 0) grad_s_src[r * H + h] = acc_s;
      if (C == 0) break;
    }
  }
}

template <typename S, typename T, typename I>
ffi::Error GatBwdTyped(cudaStream_t stream, const GatArgs& a, bool by_src, ffi::AnyBuffer offsets,
                       ffi::AnyBuffer nbr, ffi::AnyBuffer eid, ffi::AnyBuffer x, ffi::AnyBuffer s_src,
                       ffi::AnyBuffer s_edge, ffi::AnyBuffer dst_info, ffi::AnyBuffer grad, ffi::AnyBuffer out_a,
                       ffi::AnyBuffer out_b) {
  const int group = GroupWidth(a.dim);
  const int64_t threads = a.n_rows * a.heads * group;
  const T* se = a.has_edge ? s_edge.typed_data<T>() : nullptr;
  T* rb = (by_src || a.has_edge) ? out_b.typed_data<T>() : nullptr;
  if (by_src) {
    auto kernel = a.has_edge
                      ? (a.drop.key ? GatBwdSrcKernel<S, T, I, true, true> : GatBwdSrcKernel<S, T, I, false, true>)
                      : (a.drop.key ? GatBwdSrcKernel<S, T, I, true, false> : GatBwdSrcKernel<S, T, I, false, false>);
    return Launch("jgo_gat_bwd_src", kernel, threads, stream, a, offsets.typed_data<I>(), nbr.typed_data<I>(),
                  eid.typed_data<I>(), Data<const S>(x), s_src.typed_data<T>(), se, dst_info.typed_data<T>(),
                  Data<const S>(grad), Data<S>(out_a), rb, group);
  }
  auto kernel = a.has_edge
                    ? (a.drop.key ? GatBwdDstKernel<S, T, I, true, true> : GatBwdDstKernel<S, T, I, false, true>)
                    : (a.drop.key ? GatBwdDstKernel<S, T, I, true, false> : GatBwdDstKernel<S, T, I, false, false>);
  // An edge skipped for an out-of-range index leaves its grad_s_edge row unwritten: clear it first.
  if (a.has_edge && a.n_edges > 0) {
    const cudaError_t err = cudaMemsetAsync(rb, 0, sizeof(T) * a.n_edges * a.heads, stream);
    if (err != cudaSuccess)
      return ffi::Error::Internal(std::string("jaxgraphops: jgo_gat_bwd_dst: ") + cudaGetErrorString(err));
  }
  return Launch("jgo_gat_bwd_dst", kernel, threads, stream, a, offsets.typed_data<I>(), nbr.typed_data<I>(),
                eid.typed_data<I>(), Data<const S>(x), s_src.typed_data<T>(), se, dst_info.typed_data<T>(),
                Data<const S>(grad), out_a.typed_data<T>(), rb, group);
}

ffi::Error GatBwd(cudaStream_t stream, bool by_src, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                  ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_edge, ffi::AnyBuffer dst_info,
                  ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::AnyBuffer out_a, ffi::AnyBuffer out_b,
                  double negative_slope, bool has_edge, int64_t dropout_threshold, double dropout_scale) {
  auto args = CheckGatBwd(offsets, nbr, eid, x, s_src, s_edge, dst_info, grad, out_a, out_b, by_src, negative_slope,
                          has_edge);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(by_src ? "jgo_gat_bwd_src" : "jgo_gat_bwd_dst", *args, dropout_key, dropout_threshold,
                          dropout_scale);
      e.failure())
    return e;
  return DispatchStorage(args->storage, args->score, offsets.element_type(), [&](auto s, auto t, auto i) {
    return GatBwdTyped<decltype(s), decltype(t), decltype(i)>(stream, *args, by_src, offsets, nbr, eid, x, s_src,
                                                              s_edge, dst_info, grad, out_a, out_b);
  });
}

ffi::Error GatBwdDstCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                         ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_edge, ffi::AnyBuffer dst_info,
                         ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> grad_s_dst,
                         ffi::Result<ffi::AnyBuffer> grad_s_edge, double negative_slope, bool has_edge,
                         int64_t dropout_threshold, double dropout_scale) {
  return GatBwd(stream, false, offsets, nbr, eid, x, s_src, s_edge, dst_info, grad, dropout_key,
                *grad_s_dst, *grad_s_edge, negative_slope, has_edge, dropout_threshold, dropout_scale);
}

ffi::Error GatBwdSrcCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                         ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_edge, ffi::AnyBuffer dst_info,
                         ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> grad_x,
                         ffi::Result<ffi::AnyBuffer> grad_s_src, double negative_slope, bool has_edge,
                         int64_t dropout_threshold, double dropout_scale) {
  return GatBwd(stream, true, offsets, nbr, eid, x, s_src, s_edge, dst_info, grad, dropout_key,
                *grad_x, *grad_s_src, negative_slope, has_edge, dropout_threshold, dropout_scale);
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER(GatFwd, jgo::GatFwdCuda, jgo::BindGatFwd<jgo::CudaStream>());
JGO_CUDA_HANDLER(GatBwdDst, jgo::GatBwdDstCuda, jgo::BindGatBwdDst<jgo::CudaStream>());
JGO_CUDA_HANDLER(GatBwdSrc, jgo::GatBwdSrcCuda, jgo::BindGatBwdSrc<jgo::CudaStream>());
