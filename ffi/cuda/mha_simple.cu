// CUDA handlers of the fused TransformerConv attention op (mha_simple): jgo_mha_simple_fwd,
// jgo_mha_simple_bwd_dst and jgo_mha_simple_bwd_src. Same operands, attributes and results as the
// CPU twin (cpu/mha_simple.cc), same math and shape checks (jgo/mha_simple.h).
//
// Features are stored as float32, float64, bfloat16 or float16 (the kernels are templated on the
// storage type S); scores, softmax statistics and accumulators are float32 for half storage, else
// S (the accumulation type A), and lse / dst_info are stored in A.
//
// A group of lanes (a power of two <= 32 covering C) owns one (row, head): the lanes split the
// C-length dot products <q, k + ef> and <G, v + ef> and share the sums by shuffles; adjacent groups
// take adjacent heads of a row, so gathered rows are read coalesced. Each lane accumulates kVec
// features in registers (wider heads take several chunks, each re-walking the edges). Every
// output element is written by one group: no atomics, bitwise reproducible. Index arrays are not
// validated on the host; edges whose neighbour or edge id is out of range are skipped and offsets
// are clamped into [0, n_edges], so no kernel reads or writes out of bounds.
//
// Compile check (zero warnings), from the repository root, on one line:
//   nvcc -std=c++17 -O3 -Xcompiler -fPIC,-Wall,-Wextra --Werror all-warnings
//     --generate-code=arch=compute_80,code=sm_80 --generate-code=arch=compute_90,code=sm_90
//     -Iffi -Iffi/common -isystem third_party/xla_ffi
//     -DJGO_WITH_CUDA -c ffi/cuda/mha_simple.cu
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/launch.cuh"
#include "cuda/online_softmax.cuh"
#include "cuda/storage.cuh"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/attention.h"
#include "jgo/mha_simple.h"

namespace jgo {
namespace {

// Element c of an edge's key or value row x[c] (+ ef[c]), in the accumulation type.
template <typename S, bool kEdge>
__device__ __forceinline__ Compute<S> EdgeElement(const S* x, const S* ef, int64_t c) {
  return WithEdge(Widen<Compute<S>>(x[c]), kEdge ? Widen<Compute<S>>(ef[c]) : Compute<S>(0));
}

// <a, b (+ ef)> over the C features of one head, split over the lanes of the group; every lane
// gets the sum.
template <typename S, bool kEdge>
__device__ __forceinline__ Compute<S> HeadDot(const S* a, const S* b, const S* ef, int64_t C, int lane, int group,
                                          unsigned mask) {
  Compute<S> d = Compute<S>(0);
  for (int64_t c = lane; c < C; c += group) d += Widen<Compute<S>>(a[c]) * EdgeElement<S, kEdge>(b, ef, c);
  return GroupSum(d, mask, group);
}

template <typename S>
__device__ __forceinline__ const S* HeadRow(const S* base, int64_t row, int64_t HC, int64_t h, int64_t C) {
  return base + row * HC + h * C;
}

// ---------------------------------------------------------------------------------------
// jgo_mha_simple_fwd: a group per (destination, head), one pass over the in-edges with an online
// softmax per chunk of kVec * group features.

template <typename S, typename I, bool kDrop, bool kEdge>
__global__ void FwdKernel(SimpleArgs g, const I* offsets, const I* nbr, const I* eid, const S* q, const S* k,
                          const S* v, const S* ef, S* out, Compute<S>* lse, int group) {
  using A = Compute<S>;
  const int64_t H = g.heads, C = g.dim, HC = H * C;
  const A scale = static_cast<A>(g.scale);
  const int lane = threadIdx.x % group;
  const unsigned mask = GroupMask(group);
  for (int64_t w = ThreadIndex() / group; w < g.n_rows * H; w += ThreadCount() / group) {
    const int64_t r = w / H, h = w % H;
    const int64_t begin = Clamp(offsets[r], 0, g.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, g.n_edges);
    const S* qh = HeadRow(q, r, HC, h, C);
    for (int64_t c0 = 0; c0 < C || c0 == 0; c0 += int64_t(kVec) * group) {
      A acc[kVec];
#pragma unroll
      for (int u = 0; u < kVec; ++u) acc[u] = A(0);
      A m = -Infinity<A>(), l = A(0);
      for (int64_t p = begin; p < end; ++p) {
        const int64_t j = nbr[p], e = eid[p];
        if (!InRange(j, g.n_src) || !InRange(e, g.n_edges)) continue;
        const S* efh = kEdge ? HeadRow(ef, e, HC, h, C) : nullptr;
        const A z = SimpleLogit(HeadDot<S, kEdge>(qh, HeadRow(k, j, HC, h, C), efh, C, lane, group, mask), scale);
        A sc, wt;
        OnlineSoftmaxStep(m, l, z, sc, wt, ExpFn{});
        wt *= DropoutFactorIf<kDrop, A>(g.drop, e, h);
        const S* vh = HeadRow(v, j, HC, h, C);
#pragma unroll
        for (int u = 0; u < kVec; ++u) {
          const int64_t c = c0 + lane + int64_t(u) * group;
          acc[u] = acc[u] * sc + (c < C ? wt * EdgeElement<S, kEdge>(vh, efh, c) : A(0));
        }
      }
      const A inv = SoftmaxInverse(l);
#pragma unroll
      for (int u = 0; u < kVec; ++u) {
        const int64_t c = c0 + lane + int64_t(u) * group;
        if (c < C) out[r * HC + h * C + c] = Narrow<S>(acc[u] * inv);
      }
      if (c0 == 0 && lane == 0) lse[r * H + h] = SoftmaxLse(m, l);
      if (C == 0) break;
    }
  }
}

// ---------------------------------------------------------------------------------------
// jgo_mha_simple_bwd_dst: a group per (destination i, head h) over the in-edges (CSC):
//   grad_q[i] = sum_e scale ds_e k'_e,   grad_ef[e] = scale ds_e q[i] + alpha_e G[i]

template <typename S, typename I, bool kDrop, bool kEdge>
__global__ void BwdDstKernel(SimpleArgs g, const I* offsets, const I* nbr, const I* eid, const S* q, const S* k,
                             const S* v, const S* ef, const Compute<S>* info, const S* grad, S* grad_q, S* grad_ef,
                             int group) {
  using A = Compute<S>;
  const int64_t H = g.heads, C = g.dim, HC = H * C, HI = SimpleInfo::kCount * H;
  const A scale = static_cast<A>(g.scale);
  const int lane = threadIdx.x % group;
  const unsigned mask = GroupMask(group);
  for (int64_t w = ThreadIndex() / group; w < g.n_rows * H; w += ThreadCount() / group) {
    const int64_t r = w / H, h = w % H;
    const int64_t begin = Clamp(offsets[r], 0, g.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, g.n_edges);
    const A lse = info[r * HI + SimpleInfo::kLse * H + h], delta = info[r * HI + SimpleInfo::kDelta * H + h];
    const S* qh = HeadRow(q, r, HC, h, C);
    const S* gh = HeadRow(grad, r, HC, h, C);
    for (int64_t c0 = 0; c0 < C; c0 += int64_t(kVec) * group) {
      A acc[kVec];
#pragma unroll
      for (int u = 0; u < kVec; ++u) acc[u] = A(0);
      for (int64_t p = begin; p < end; ++p) {
        const int64_t j = nbr[p], e = eid[p];
        if (!InRange(j, g.n_src) || !InRange(e, g.n_edges)) continue;
        const S* kh = HeadRow(k, j, HC, h, C);
        const S* efh = kEdge ? HeadRow(ef, e, HC, h, C) : nullptr;
        const A z = SimpleLogit(HeadDot<S, kEdge>(qh, kh, efh, C, lane, group, mask), scale);
        const A f = DropoutFactorIf<kDrop, A>(g.drop, e, h);
        const A alpha = SoftmaxWeight(z, lse, ExpFn{});
        const A dalpha = f * HeadDot<S, kEdge>(gh, HeadRow(v, j, HC, h, C), efh, C, lane, group, mask);
        const A sds = scale * SimpleLogitGrad(alpha, dalpha, delta);
#pragma unroll
        for (int u = 0; u < kVec; ++u) {
          const int64_t c = c0 + lane + int64_t(u) * group;
          if (c < C) {
            acc[u] += sds * EdgeElement<S, kEdge>(kh, efh, c);
            if (kEdge)
              grad_ef[e * HC + h * C + c] =
                  Narrow<S>(SimpleEdgeGrad(sds, Widen<Compute<S>>(qh[c]), alpha * f, Widen<Compute<S>>(gh[c])));
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kVec; ++u) {
        const int64_t c = c0 + lane + int64_t(u) * group;
        if (c < C) grad_q[r * HC + h * C + c] = Narrow<S>(acc[u]);
      }
    }
  }
}

// jgo_mha_simple_bwd_src: a group per (source j, head h) over the out-edges (reverse CSR):
//   grad_k[j] = sum_e scale ds_e q[i],   grad_v[j] = sum_e alpha_e G[i]

template <typename S, typename I, bool kDrop, bool kEdge>
__global__ void BwdSrcKernel(SimpleArgs g, const I* offsets, const I* nbr, const I* eid, const S* q, const S* k,
                             const S* v, const S* ef, const Compute<S>* info, const S* grad, S* grad_k, S* grad_v,
                             int group) {
  using A = Compute<S>;
  const int64_t H = g.heads, C = g.dim, HC = H * C, HI = SimpleInfo::kCount * H;
  const A scale = static_cast<A>(g.scale);
  const int lane = threadIdx.x % group;
  const unsigned mask = GroupMask(group);
  for (int64_t w = ThreadIndex() / group; w < g.n_rows * H; w += ThreadCount() / group) {
    const int64_t r = w / H, h = w % H;
    const int64_t begin = Clamp(offsets[r], 0, g.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, g.n_edges);
    const S* kh = HeadRow(k, r, HC, h, C);
    const S* vh = HeadRow(v, r, HC, h, C);
    for (int64_t c0 = 0; c0 < C; c0 += int64_t(kVec) * group) {
      A acc_k[kVec], acc_v[kVec];
#pragma unroll
      for (int u = 0; u < kVec; ++u) acc_k[u] = acc_v[u] = A(0);
      for (int64_t p = begin; p < end; ++p) {
        const int64_t i = nbr[p], e = eid[p];
        if (!InRange(i, g.n_dst) || !InRange(e, g.n_edges)) continue;
        const S* qh = HeadRow(q, i, HC, h, C);
        const S* gh = HeadRow(grad, i, HC, h, C);
        const S* efh = kEdge ? HeadRow(ef, e, HC, h, C) : nullptr;
        const A z = SimpleLogit(HeadDot<S, kEdge>(qh, kh, efh, C, lane, group, mask), scale);
        const A f = DropoutFactorIf<kDrop, A>(g.drop, e, h);
        const A alpha = SoftmaxWeight(z, info[i * HI + SimpleInfo::kLse * H + h], ExpFn{});
        const A dalpha = f * HeadDot<S, kEdge>(gh, vh, efh, C, lane, group, mask);
        const A sds = scale * SimpleLogitGrad(alpha, dalpha, info[i * HI + SimpleInfo::kDelta * H + h]);
#pragma unroll
        for (int u = 0; u < kVec; ++u) {
          const int64_t c = c0 + lane + int64_t(u) * group;
          if (c < C) {
            acc_k[u] += sds * Widen<Compute<S>>(qh[c]);
            acc_v[u] += alpha * f * Widen<Compute<S>>(gh[c]);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kVec; ++u) {
        const int64_t c = c0 + lane + int64_t(u) * group;
        if (c < C) {
          grad_k[r * HC + h * C + c] = Narrow<S>(acc_k[u]);
          grad_v[r * HC + h * C + c] = Narrow<S>(acc_v[u]);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Handlers

constexpr const char* kFwd = "jgo_mha_simple_fwd";
constexpr const char* kBwdDst = "jgo_mha_simple_bwd_dst";
constexpr const char* kBwdSrc = "jgo_mha_simple_bwd_src";

ffi::Error FwdCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                   ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v, ffi::AnyBuffer ef, ffi::AnyBuffer dropout_key,
                   ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> lse, double scale, bool has_edge,
                   int64_t dropout_threshold, double dropout_scale) {
  auto args = CheckMhaSimple(kFwd, offsets, nbr, eid, q, k, v, ef, nullptr, nullptr, false, scale, has_edge, true);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(kFwd, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  const auto ft = q.element_type();
  if (auto e = CheckMhaSimpleResults(kFwd, *args, ft, 0, *out, *lse); e.failure()) return e;
  const SimpleArgs g = *args;
  return DispatchStorage(ft, SimpleAccType(ft), offsets.element_type(), [&](auto s, auto, auto i) {
    using S = decltype(s);
    using I = decltype(i);
    const int group = GroupWidth(g.dim);
    auto kernel = g.has_edge
                      ? (g.drop.key ? FwdKernel<S, I, true, true> : FwdKernel<S, I, false, true>)
                      : (g.drop.key ? FwdKernel<S, I, true, false> : FwdKernel<S, I, false, false>);
    return Launch("jgo_mha_simple_fwd", kernel, g.n_rows * g.heads * group, stream, g, Data<const I>(offsets),
                  Data<const I>(nbr), Data<const I>(eid), Data<const S>(q), Data<const S>(k), Data<const S>(v),
                  g.has_edge ? Data<const S>(ef) : nullptr, Data<S>(*out), Data<Compute<S>>(*lse), group);
  });
}

ffi::Error BwdDstCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                      ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v, ffi::AnyBuffer ef, ffi::AnyBuffer info,
                      ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> grad_q,
                      ffi::Result<ffi::AnyBuffer> grad_ef, double scale, bool has_edge, int64_t dropout_threshold,
                      double dropout_scale) {
  auto args = CheckMhaSimple(kBwdDst, offsets, nbr, eid, q, k, v, ef, &info, &grad, false, scale, has_edge, true);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(kBwdDst, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  const auto ft = q.element_type();
  if (auto e = CheckMhaSimpleResults(kBwdDst, *args, ft, 1, *grad_q, *grad_ef); e.failure()) return e;
  const SimpleArgs g = *args;
  return DispatchStorage(ft, SimpleAccType(ft), offsets.element_type(), [&](auto s, auto, auto i) {
    using S = decltype(s);
    using I = decltype(i);
    S* gef = g.has_edge ? Data<S>(*grad_ef) : nullptr;
    // An edge skipped for an out-of-range index leaves its grad_edge_feat row unwritten: clear it first.
    const int64_t ef_count = g.n_edges * g.heads * g.dim;
    if (g.has_edge && ef_count > 0) {
      const cudaError_t err = cudaMemsetAsync(gef, 0, sizeof(S) * ef_count, stream);
      if (err != cudaSuccess)
        return ffi::Error::Internal(std::string("jaxgraphops: jgo_mha_simple_bwd_dst: ") + cudaGetErrorString(err));
    }
    const int group = GroupWidth(g.dim);
    auto kernel = g.has_edge
                      ? (g.drop.key ? BwdDstKernel<S, I, true, true> : BwdDstKernel<S, I, false, true>)
                      : (g.drop.key ? BwdDstKernel<S, I, true, false> : BwdDstKernel<S, I, false, false>);
    return Launch("jgo_mha_simple_bwd_dst", kernel, g.n_rows * g.heads * group, stream, g, Data<const I>(offsets),
                  Data<const I>(nbr), Data<const I>(eid), Data<const S>(q), Data<const S>(k), Data<const S>(v),
                  g.has_edge ? Data<const S>(ef) : nullptr, Data<const Compute<S>>(info), Data<const S>(grad),
                  Data<S>(*grad_q), gef, group);
  });
}

ffi::Error BwdSrcCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                      ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v, ffi::AnyBuffer ef, ffi::AnyBuffer info,
                      ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> grad_k,
                      ffi::Result<ffi::AnyBuffer> grad_v, double scale, bool has_edge, int64_t dropout_threshold,
                      double dropout_scale) {
  auto args = CheckMhaSimple(kBwdSrc, offsets, nbr, eid, q, k, v, ef, &info, &grad, true, scale, has_edge, true);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(kBwdSrc, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  const auto ft = q.element_type();
  if (auto e = CheckMhaSimpleResults(kBwdSrc, *args, ft, 2, *grad_k, *grad_v); e.failure()) return e;
  const SimpleArgs g = *args;
  return DispatchStorage(ft, SimpleAccType(ft), offsets.element_type(), [&](auto s, auto, auto i) {
    using S = decltype(s);
    using I = decltype(i);
    const int group = GroupWidth(g.dim);
    auto kernel = g.has_edge
                      ? (g.drop.key ? BwdSrcKernel<S, I, true, true> : BwdSrcKernel<S, I, false, true>)
                      : (g.drop.key ? BwdSrcKernel<S, I, true, false> : BwdSrcKernel<S, I, false, false>);
    return Launch("jgo_mha_simple_bwd_src", kernel, g.n_rows * g.heads * group, stream, g, Data<const I>(offsets),
                  Data<const I>(nbr), Data<const I>(eid), Data<const S>(q), Data<const S>(k), Data<const S>(v),
                  g.has_edge ? Data<const S>(ef) : nullptr, Data<const Compute<S>>(info), Data<const S>(grad),
                  Data<S>(*grad_k), Data<S>(*grad_v), group);
  });
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER(MhaSimpleFwd, jgo::FwdCuda, jgo::BindMhaSimpleFwd<jgo::CudaStream>());
JGO_CUDA_HANDLER(MhaSimpleBwdDst, jgo::BwdDstCuda, jgo::BindMhaSimpleBwdDst<jgo::CudaStream>());
JGO_CUDA_HANDLER(MhaSimpleBwdSrc, jgo::BwdSrcCuda, jgo::BindMhaSimpleBwdSrc<jgo::CudaStream>());
