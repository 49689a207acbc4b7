// CUDA handlers of the fused TransformerConv attention op (mha_simple): jgo_mha_simple_fwd,
// jgo_mha_simple_bwd_dst and jgo_mha_simple_bwd_src. Same operands, attributes and results as the
// CPU twin (cpu/mha_simple.cc), same math and shape checks (jgo/mha_simple.h).
//
// Features are stored as float32, float64, bfloat16 or float16 (the kernels are templated on the
// storage type S); scores, softmax statistics and accumulators are float32 for half storage, else
// S (the accumulation type A), and lse / dst_info are stored in A.
//
// Forward and backward run on the chunked row-walk engine (cuda/chunk_walk.cuh, cuda/head_walk.cuh): a walker
// per window of chunks of at most 256 edges and tile of whole heads, 128-bit loads, each edge's rows gathered
// together, split rows combined in chunk order (no float atomics, the same bits whatever the block order).
// Heads the engine does not take (C not a multiple of 16 bytes of S, unaligned operands, or over 32 lanes a
// head) keep a group of lanes (a power of two <= 32 covering C) per (row, head): the lanes split the C-length
// dot products <q, k + ef> and <G, v + ef> and share the sums by shuffles; adjacent groups take adjacent heads
// of a row, so gathered rows are read coalesced. Each lane accumulates kVec features in registers (wider heads
// take several chunks, each re-walking the edges). Every output element is written by one walker or group:
// bitwise reproducible. Index arrays are not validated on the host; edges whose neighbour or edge id is out of
// range are skipped and offsets are clamped into [0, n_edges], so no kernel reads or writes out of bounds. The
// kernels are compiled for int32 indices: an int64 graph reaches them as its int32 view (cuda/int32_graph.cuh).
//
// Compile check (zero warnings), from the repository root, on one line:
//   nvcc -std=c++17 -O3 -Xcompiler -fPIC,-Wall,-Wextra --Werror all-warnings
//     --generate-code=arch=compute_80,code=sm_80 --generate-code=arch=compute_90,code=sm_90
//     -Iffi -Iffi/common -isystem third_party/xla_ffi
//     -DJGO_WITH_CUDA -c ffi/cuda/mha_simple.cu
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include "cuda/chunk_walk.cuh"
#include "cuda/head_walk.cuh"
#include "cuda/int32_graph.cuh"
#include "cuda/launch.cuh"
#include "cuda/online_softmax.cuh"
#include "cuda/storage.cuh"
#include "cuda/walk_reduce.cuh"
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
// jgo_mha_simple_fwd on the engine: per chunk the row's query stays in registers; per edge the key and value
// rows (and the edge_feat row) are gathered, kGroup edges at a time before the first is used, each edge's logit
// summed over its head's lanes, then the bucketed online softmax (AttendState) accumulates the values.

// gpu-model: engine mlp>=8
template <typename S, bool kDrop, bool kEdge>
__global__ void __launch_bounds__(kBlock, 1) FwdEngineKernel(HeadWalk a, Dropout drop, Compute<S> scale,
                                                             const int* __restrict__ offsets,
                                                             const int* __restrict__ nbr, const int* __restrict__ eid,
                                                             const S* __restrict__ q, const S* __restrict__ k,
                                                             const S* __restrict__ v, const S* __restrict__ ef,
                                                             S* __restrict__ out, Compute<S>* __restrict__ lse,
                                                             SplitScratch split) {
  using A = Compute<S>;
  constexpr bool kVector = true;  // 128-bit loads: the handler's rows are aligned and C % kV == 0
  constexpr int kV = 16 / int(sizeof(S));
  constexpr int kGroup = kInFlight / 2;  // 8 or 12 rows in flight (key and value, and edge_feat)
  const Walker w = ThisWalker(a.group);
  const Positions<int, A> pos{nbr, eid, nullptr, a.nbr_bound, a.n_edges, 0};
  ForEachHeadTile<kV, kVector>(a, w, [&](int64_t window, int, const auto& lf, bool live, int h, int sub) {
    const LaneRows<kV, kVector, S> queries(q, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> keys(k, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> values(v, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> edge(ef, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, kEdge);
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, a.window_shift, w, [&](const Chunk& c) {
      S qr[kV];
#pragma unroll
      for (int u = 0; u < kV; ++u) qr[u] = Narrow<S>(A(0));
      queries.Load(c.row, lf.ok, qr);
      AttendState<A, kV> st;
      auto group = [&](const Staged<A> (&s)[kGroup], unsigned bits) {
        S ks[kGroup][kV], vs[kGroup][kV], es[kGroup][kV];
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {  // every load of the group before the first is used
          if (!((bits >> u) & 1u)) continue;
          keys.Load(s[u].j, lf.ok, ks[u]);
          values.Load(s[u].j, lf.ok, vs[u]);
          if (kEdge) edge.Load(s[u].e, lf.ok, es[u]);
        }
        A z[kGroup];
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          if (!((bits >> u) & 1u)) continue;
          A dot = A(0);
#pragma unroll
          for (int f = 0; f < kV; ++f)
            if (lf.ok[f]) dot += Widen<A>(qr[f]) * WithEdge(Widen<A>(ks[u][f]), kEdge ? Widen<A>(es[u][f]) : A(0));
          z[u] = SimpleLogit(HeadSum(dot, a.lanes, w), scale);
        }
        st.Rescale(z, bits);
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          if (!((bits >> u) & 1u)) continue;
          A value[kV];
#pragma unroll
          for (int f = 0; f < kV; ++f) value[f] = WithEdge(Widen<A>(vs[u][f]), kEdge ? Widen<A>(es[u][f]) : A(0));
          st.Add(st.Weigh(z[u]) * DropoutFactorIf<kDrop, A>(drop, s[u].e, h), value);
        }
      };
      WalkPositions<true, true, false, kGroup, kEdge || kDrop>(pos, c.lo, c.hi, w, group);
      if (c.split() && !st.FoldSplit(c, split, a.slot_count, a.counter_count, a.HC, lf, w)) return;
      S result[kV];
      st.Result(result);
      StoreFeatures<kV, kVector>(out + int64_t(c.row) * a.HC, lf, result, a.stream);
      if (live && sub == 0) lse[int64_t(c.row) * a.H + h] = SoftmaxLse(st.m, st.l);
    });
  });
}

// ---------------------------------------------------------------------------------------
// jgo_mha_simple_fwd of heads the engine does not take: a group per (destination, head), one pass over the
// in-edges with an online softmax per chunk of kVec * group features.

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
// The backward on the engine: jgo_mha_simple_bwd_dst walks the CSC (rows = destinations i), jgo_mha_simple_bwd_src
// the reverse CSR (rows = sources j). The row's own operands stay in registers (q_i and G_i, or k_j and v_j); per
// edge the others are gathered, 4 edges at a time, and the two dots <q_i, k'_e> and <G_i, v'_e> are summed over
// the head's lanes. Split rows leave their chunk's sums in scratch, folded in chunk order by the last to arrive.

// jgo_mha_simple_bwd_dst: grad_q[i] = sum_e scale ds_e k'_e, grad_ef[e] = scale ds_e q[i] + alpha_e d_e G[i].
// gpu-model: engine mlp>=8
template <typename S, bool kDrop, bool kEdge>
__global__ void __launch_bounds__(kBlock, 1) BwdDstEngineKernel(HeadWalk a, Dropout drop, Compute<S> scale,
                                                                const int* __restrict__ offsets,
                                                                const int* __restrict__ nbr,
                                                                const int* __restrict__ eid, const S* __restrict__ q,
                                                                const S* __restrict__ k, const S* __restrict__ v,
                                                                const S* __restrict__ ef,
                                                                const Compute<S>* __restrict__ info,
                                                                const S* __restrict__ grad, S* __restrict__ grad_q,
                                                                S* __restrict__ grad_ef, SplitScratch split) {
  using A = Compute<S>;
  constexpr bool kVector = true;  // 128-bit loads: the handler's rows are aligned and C % kV == 0
  constexpr int kV = 16 / int(sizeof(S));
  constexpr int kGroup = kInFlight / 2;  // 8 or 12 rows in flight (key and value, and edge_feat)
  const Walker w = ThisWalker(a.group);
  const Positions<int, A> pos{nbr, eid, nullptr, a.nbr_bound, a.n_edges, 0};
  const int HI = SimpleInfo::kCount * a.H;
  ForEachHeadTile<kV, kVector>(a, w, [&](int64_t window, int, const auto& lf, bool, int h, int) {
    const LaneRows<kV, kVector, S> queries(q, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> grads(grad, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> keys(k, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> values(v, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> edge(ef, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, kEdge);
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, a.window_shift, w, [&](const Chunk& c) {
      S qr[kV], gr[kV];
#pragma unroll
      for (int f = 0; f < kV; ++f) qr[f] = gr[f] = Narrow<S>(A(0));
      queries.Load(c.row, lf.ok, qr);
      grads.Load(c.row, lf.ok, gr);
      const A lse = info[int64_t(c.row) * HI + SimpleInfo::kLse * a.H + h];
      const A delta = info[int64_t(c.row) * HI + SimpleInfo::kDelta * a.H + h];
      A acc[1][kV];
#pragma unroll
      for (int f = 0; f < kV; ++f) acc[0][f] = A(0);
      auto group = [&](const Staged<A> (&s)[kGroup], unsigned bits) {
        S ks[kGroup][kV], vs[kGroup][kV], es[kGroup][kV];
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {  // every load of the group before the first is used
          if (!((bits >> u) & 1u)) continue;
          keys.Load(s[u].j, lf.ok, ks[u]);
          values.Load(s[u].j, lf.ok, vs[u]);
          if (kEdge) edge.Load(s[u].e, lf.ok, es[u]);
        }
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          if (!((bits >> u) & 1u)) continue;
          A kk[kV], dz = A(0), dg = A(0);
#pragma unroll
          for (int f = 0; f < kV; ++f) {
            const A e = kEdge ? Widen<A>(es[u][f]) : A(0);
            kk[f] = WithEdge(Widen<A>(ks[u][f]), e);
            if (lf.ok[f]) {
              dz += Widen<A>(qr[f]) * kk[f];
              dg += Widen<A>(gr[f]) * WithEdge(Widen<A>(vs[u][f]), e);
            }
          }
          const A alpha = SoftmaxWeight(SimpleLogit(HeadSum(dz, a.lanes, w), scale), lse, ExpFn{});
          const A d = DropoutFactorIf<kDrop, A>(drop, s[u].e, h);
          const A sds = scale * SimpleLogitGrad(alpha, d * HeadSum(dg, a.lanes, w), delta);
#pragma unroll
          for (int f = 0; f < kV; ++f) acc[0][f] += sds * kk[f];
          if constexpr (kEdge) {
            S ge[kV];
#pragma unroll
            for (int f = 0; f < kV; ++f)
              ge[f] = Narrow<S>(SimpleEdgeGrad(sds, Widen<A>(qr[f]), alpha * d, Widen<A>(gr[f])));
            StoreFeatures<kV, kVector>(grad_ef + int64_t(s[u].e) * a.HC, lf, ge, a.stream);
          }
        }
      };
      WalkPositions<true, true, false, kGroup, kEdge || kDrop>(pos, c.lo, c.hi, w, group);
      if (c.split() && !FoldSplitSums(c, split, a.slot_count, a.counter_count, a.HC, lf, w, acc)) return;
      S result[kV];
#pragma unroll
      for (int f = 0; f < kV; ++f) result[f] = Narrow<S>(acc[0][f]);
      StoreFeatures<kV, kVector>(grad_q + int64_t(c.row) * a.HC, lf, result, false);
    });
  });
}

// jgo_mha_simple_bwd_src: grad_k[j] = sum_e scale ds_e q[i], grad_v[j] = sum_e alpha_e d_e G[i] over the out-edges.
// gpu-model: engine mlp>=8
template <typename S, bool kDrop, bool kEdge>
__global__ void __launch_bounds__(kBlock, 1) BwdSrcEngineKernel(HeadWalk a, Dropout drop, Compute<S> scale,
                                                                const int* __restrict__ offsets,
                                                                const int* __restrict__ nbr,
                                                                const int* __restrict__ eid, const S* __restrict__ q,
                                                                const S* __restrict__ k, const S* __restrict__ v,
                                                                const S* __restrict__ ef,
                                                                const Compute<S>* __restrict__ info,
                                                                const S* __restrict__ grad, S* __restrict__ grad_k,
                                                                S* __restrict__ grad_v, SplitScratch split) {
  using A = Compute<S>;
  constexpr bool kVector = true;  // 128-bit loads: the handler's rows are aligned and C % kV == 0
  constexpr int kV = 16 / int(sizeof(S));
  constexpr int kGroup = kInFlight / 2;  // 8 or 12 rows and 8 scalars in flight (q_i and G_i, and edge_feat)
  const Walker w = ThisWalker(a.group);
  const Positions<int, A> pos{nbr, eid, nullptr, a.nbr_bound, a.n_edges, 0};
  const int HI = SimpleInfo::kCount * a.H;
  ForEachHeadTile<kV, kVector>(a, w, [&](int64_t window, int, const auto& lf, bool, int h, int) {
    const LaneRows<kV, kVector, S> queries(q, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> grads(grad, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> keys(k, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> values(v, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> edge(ef, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, kEdge);
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, a.window_shift, w, [&](const Chunk& c) {
      S kr[kV], vr[kV];
#pragma unroll
      for (int f = 0; f < kV; ++f) kr[f] = vr[f] = Narrow<S>(A(0));
      keys.Load(c.row, lf.ok, kr);
      values.Load(c.row, lf.ok, vr);
      A acc[2][kV];  // grad_k, grad_v
#pragma unroll
      for (int f = 0; f < kV; ++f) acc[0][f] = acc[1][f] = A(0);
      auto group = [&](const Staged<A> (&s)[kGroup], unsigned bits) {
        S qs[kGroup][kV], gs[kGroup][kV], es[kGroup][kV];
        A lse[kGroup], delta[kGroup];
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {  // every load of the group before the first is used
          if (!((bits >> u) & 1u)) continue;
          queries.Load(s[u].j, lf.ok, qs[u]);
          grads.Load(s[u].j, lf.ok, gs[u]);
          if (kEdge) edge.Load(s[u].e, lf.ok, es[u]);
          const Compute<S>* row = info + int64_t(s[u].j) * HI + h;
          lse[u] = __ldg(row + SimpleInfo::kLse * a.H);
          delta[u] = __ldg(row + SimpleInfo::kDelta * a.H);
        }
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          if (!((bits >> u) & 1u)) continue;
          A dz = A(0), dg = A(0);
#pragma unroll
          for (int f = 0; f < kV; ++f) {
            const A e = kEdge ? Widen<A>(es[u][f]) : A(0);
            if (lf.ok[f]) {
              dz += Widen<A>(qs[u][f]) * WithEdge(Widen<A>(kr[f]), e);
              dg += Widen<A>(gs[u][f]) * WithEdge(Widen<A>(vr[f]), e);
            }
          }
          const A alpha = SoftmaxWeight(SimpleLogit(HeadSum(dz, a.lanes, w), scale), lse[u], ExpFn{});
          const A d = DropoutFactorIf<kDrop, A>(drop, s[u].e, h);
          const A sds = scale * SimpleLogitGrad(alpha, d * HeadSum(dg, a.lanes, w), delta[u]);
#pragma unroll
          for (int f = 0; f < kV; ++f) {
            acc[0][f] += sds * Widen<A>(qs[u][f]);
            acc[1][f] += alpha * d * Widen<A>(gs[u][f]);
          }
        }
      };
      WalkPositions<true, true, false, kGroup, kEdge || kDrop>(pos, c.lo, c.hi, w, group);
      if (c.split() && !FoldSplitSums(c, split, a.slot_count, a.counter_count, a.HC, lf, w, acc)) return;
      S rk[kV], rv[kV];
#pragma unroll
      for (int f = 0; f < kV; ++f) {
        rk[f] = Narrow<S>(acc[0][f]);
        rv[f] = Narrow<S>(acc[1][f]);
      }
      StoreFeatures<kV, kVector>(grad_k + int64_t(c.row) * a.HC, lf, rk, false);
      StoreFeatures<kV, kVector>(grad_v + int64_t(c.row) * a.HC, lf, rv, false);
    });
  });
}

// ---------------------------------------------------------------------------------------
// The backward of heads the engine does not take.
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

template <typename S>
ffi::Error FwdTyped(cudaStream_t stream, CudaScratch& scratch, const SimpleArgs& g, const Int32Graph& graph,
                    ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v, ffi::AnyBuffer ef, ffi::AnyBuffer out,
                    ffi::AnyBuffer lse) {
  using A = Compute<S>;
  if (g.n_rows == 0 || g.heads == 0) return ffi::Error::Success();
  const S* edge = g.has_edge ? Data<const S>(ef) : nullptr;
  const bool aligned = Aligned(q.untyped_data()) && Aligned(k.untyped_data()) && Aligned(v.untyped_data()) &&
                       Aligned(out.untyped_data()) && (!g.has_edge || Aligned(ef.untyped_data()));
  if (const int per_lane = HeadLaneFeatures<S>(g.dim, aligned); per_lane > 1) {
    auto walk = HeadWalkOf(kFwd, g.n_rows, g.n_edges, g.nbr_bound, g.heads, g.dim, per_lane,
                           static_cast<int64_t>(out.size_bytes()));
    if (walk.has_error()) return walk.error();
    auto split = SplitScratchFor(kFwd, scratch, stream, g.n_edges, 3 * int64_t(walk->HC), sizeof(A), false,
                                 walk->tiles);
    if (split.has_error()) return split.error();
    return WithFlags(g.drop.key != nullptr, g.has_edge, [&](auto drop, auto with_edge) {
      constexpr bool kDrop = decltype(drop)::value, kEdge = decltype(with_edge)::value;
      auto kernel = FwdEngineKernel<S, kDrop, kEdge>;
      return LaunchBlocks(kFwd, kernel, WalkerBlocks(walk->windows * walk->tiles, walk->group), 0, stream, *walk,
                          g.drop, static_cast<A>(g.scale), graph.offsets, graph.nbr, graph.eid, Data<const S>(q),
                          Data<const S>(k), Data<const S>(v), edge, Data<S>(out), Data<A>(lse), *split);
    });
  }
  using I = int32_t;
  auto kernel = WithFlags(g.drop.key != nullptr, g.has_edge, [](auto drop, auto edge) {
    return FwdKernel<S, I, decltype(drop)::value, decltype(edge)::value>;
  });
  return Launch(kFwd, kernel, g.n_rows * g.heads * GroupWidth(g.dim), stream, g, graph.offsets, graph.nbr, graph.eid,
                Data<const S>(q), Data<const S>(k), Data<const S>(v), edge, Data<S>(out), Data<A>(lse),
                GroupWidth(g.dim));
}

ffi::Error FwdCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                   ffi::AnyBuffer eid, ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v, ffi::AnyBuffer ef,
                   ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> lse,
                   double scale, bool has_edge, int64_t dropout_threshold, double dropout_scale) {
  auto args = CheckMhaSimple(kFwd, offsets, nbr, eid, q, k, v, ef, nullptr, nullptr, false, scale, has_edge, true);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(kFwd, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  const auto ft = q.element_type();
  if (auto e = CheckMhaSimpleResults(kFwd, *args, ft, 0, *out, *lse); e.failure()) return e;
  auto graph = Int32GraphOf(kFwd, stream, scratch, offsets, nbr, eid);
  if (graph.has_error()) return graph.error();
  return DispatchStorage(ft, SimpleAccType(ft), [&](auto s, auto) {
    return FwdTyped<decltype(s)>(stream, scratch, *args, *graph, q, k, v, ef, *out, *lse);
  });
}

// Both backward passes (by_src: the reverse CSR's, out_a = grad_k and out_b = grad_v; else the CSC's, out_a =
// grad_q and out_b = grad_ef) on the engine, or the group-per-(row, head) kernels for heads it does not take.
template <typename S>
ffi::Error BwdTyped(cudaStream_t stream, CudaScratch& scratch, const SimpleArgs& g, bool by_src,
                    const Int32Graph& graph, ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v, ffi::AnyBuffer ef,
                    ffi::AnyBuffer info, ffi::AnyBuffer grad, ffi::AnyBuffer out_a, ffi::AnyBuffer out_b) {
  using A = Compute<S>;
  const char* name = by_src ? kBwdSrc : kBwdDst;
  S* gef = !by_src && g.has_edge ? Data<S>(out_b) : nullptr;
  // An edge skipped for an out-of-range index leaves its grad_edge_feat row unwritten: clear it first.
  const int64_t ef_count = g.n_edges * g.heads * g.dim;
  if (gef && ef_count > 0) {
    const cudaError_t err = cudaMemsetAsync(gef, 0, sizeof(S) * ef_count, stream);
    if (err != cudaSuccess)
      return ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": " + cudaGetErrorString(err));
  }
  if (g.n_rows == 0 || g.heads == 0 || g.dim == 0) return ffi::Error::Success();
  const S* edge = g.has_edge ? Data<const S>(ef) : nullptr;
  const bool aligned = Aligned(q.untyped_data()) && Aligned(k.untyped_data()) && Aligned(v.untyped_data()) &&
                       Aligned(grad.untyped_data()) && Aligned(out_a.untyped_data()) &&
                       (!g.has_edge || Aligned(ef.untyped_data())) && (!by_src || Aligned(out_b.untyped_data()));
  const auto args = std::make_tuple(Data<const S>(q), Data<const S>(k), Data<const S>(v), edge,
                                    Data<const A>(info), Data<const S>(grad), Data<S>(out_a),
                                    by_src ? Data<S>(out_b) : gef);
  if (const int per_lane = HeadLaneFeatures<S>(g.dim, aligned); per_lane > 1) {
    auto walk = HeadWalkOf(name, g.n_rows, g.n_edges, g.nbr_bound, g.heads, g.dim, per_lane,
                           gef ? int64_t(sizeof(S)) * ef_count : 0);
    if (walk.has_error()) return walk.error();
    auto split = SplitScratchFor(name, scratch, stream, g.n_edges, (by_src ? 2 : 1) * int64_t(walk->HC), sizeof(A),
                                 false, walk->tiles);
    if (split.has_error()) return split.error();
    const int64_t blocks = WalkerBlocks(walk->windows * walk->tiles, walk->group);
    return WithFlags(g.drop.key != nullptr, g.has_edge, [&](auto drop, auto with_edge) {
      constexpr bool kDrop = decltype(drop)::value, kEdge = decltype(with_edge)::value;
      auto kernel = by_src ? BwdSrcEngineKernel<S, kDrop, kEdge> : BwdDstEngineKernel<S, kDrop, kEdge>;
      return std::apply(
          [&](auto... ptrs) {
            return LaunchBlocks(name, kernel, blocks, 0, stream, *walk, g.drop, static_cast<A>(g.scale),
                                graph.offsets, graph.nbr, graph.eid, ptrs..., *split);
          },
          args);
    });
  }
  using I = int32_t;
  auto kernel = WithFlags(g.drop.key != nullptr, g.has_edge, [&](auto drop, auto with_edge) {
    constexpr bool kDrop = decltype(drop)::value, kEdge = decltype(with_edge)::value;
    return by_src ? BwdSrcKernel<S, I, kDrop, kEdge> : BwdDstKernel<S, I, kDrop, kEdge>;
  });
  return std::apply(
      [&](auto... ptrs) {
        return Launch(name, kernel, g.n_rows * g.heads * GroupWidth(g.dim), stream, g, graph.offsets, graph.nbr,
                      graph.eid, ptrs..., GroupWidth(g.dim));
      },
      args);
}

ffi::Error Bwd(cudaStream_t stream, CudaScratch& scratch, bool by_src, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
               ffi::AnyBuffer eid, ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v, ffi::AnyBuffer ef,
               ffi::AnyBuffer info, ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::AnyBuffer out_a,
               ffi::AnyBuffer out_b, double scale, bool has_edge, int64_t dropout_threshold, double dropout_scale) {
  const char* name = by_src ? kBwdSrc : kBwdDst;
  auto args = CheckMhaSimple(name, offsets, nbr, eid, q, k, v, ef, &info, &grad, by_src, scale, has_edge, true);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(name, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  const auto ft = q.element_type();
  if (auto e = CheckMhaSimpleResults(name, *args, ft, by_src ? 2 : 1, out_a, out_b); e.failure()) return e;
  auto graph = Int32GraphOf(name, stream, scratch, offsets, nbr, eid);
  if (graph.has_error()) return graph.error();
  return DispatchStorage(ft, SimpleAccType(ft), [&](auto s, auto) {
    return BwdTyped<decltype(s)>(stream, scratch, *args, by_src, *graph, q, k, v, ef, info, grad, out_a, out_b);
  });
}

ffi::Error BwdDstCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                      ffi::AnyBuffer eid, ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v, ffi::AnyBuffer ef,
                      ffi::AnyBuffer info, ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key,
                      ffi::Result<ffi::AnyBuffer> grad_q, ffi::Result<ffi::AnyBuffer> grad_ef, double scale,
                      bool has_edge, int64_t dropout_threshold, double dropout_scale) {
  return Bwd(stream, scratch, false, offsets, nbr, eid, q, k, v, ef, info, grad, dropout_key, *grad_q, *grad_ef, scale,
             has_edge, dropout_threshold, dropout_scale);
}

ffi::Error BwdSrcCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                      ffi::AnyBuffer eid, ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v, ffi::AnyBuffer ef,
                      ffi::AnyBuffer info, ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key,
                      ffi::Result<ffi::AnyBuffer> grad_k, ffi::Result<ffi::AnyBuffer> grad_v, double scale,
                      bool has_edge, int64_t dropout_threshold, double dropout_scale) {
  return Bwd(stream, scratch, true, offsets, nbr, eid, q, k, v, ef, info, grad, dropout_key, *grad_k, *grad_v, scale,
             has_edge, dropout_threshold, dropout_scale);
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER_NO_TRAITS(MhaSimpleFwd, jgo::FwdCuda, jgo::BindMhaSimpleFwd<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER_NO_TRAITS(MhaSimpleBwdDst, jgo::BwdDstCuda,
                           jgo::BindMhaSimpleBwdDst<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER_NO_TRAITS(MhaSimpleBwdSrc, jgo::BwdSrcCuda,
                           jgo::BindMhaSimpleBwdSrc<jgo::CudaStream, jgo::CudaScratch>());
