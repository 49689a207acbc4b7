// CUDA handlers of the fused GATv2 op: jgo_gatv2_fwd, jgo_gatv2_bwd_dst and jgo_gatv2_bwd_src.
// Same operands, attributes and results as the CPU twin (cpu/gatv2.cc), same math and
// shape checks (jgo/gatv2.h).
//
// Forward and backward run on the chunked row-walk engine (cuda/chunk_walk.cuh, cuda/head_walk.cuh): a walker
// per window of chunks of at most 256 edges and tile of whole heads, 128-bit loads, each gathered row read once
// per edge, split rows combined in chunk order (no float atomics, the same bits whatever the block order).
// Heads the engine does not take (C not a multiple of 16 bytes of S, unaligned operands, or over 32 lanes a
// head) keep a group of lanes per (row, head): the lanes split the C-length logit
// <a, leaky_relu(x_src[j] + x_dst[i] (+ e))> and the dot <G[i], x_src[j]> and share the sums by shuffles; each
// lane accumulates kVec features in registers (wider heads take several chunks, each re-walking the edges).
// Every output element is written by one walker or group: bitwise reproducible. Index arrays are not validated
// on the host; edges whose neighbour or edge id is out of range are skipped and offsets are clamped into
// [0, n_edges]. The kernels are compiled for int32 indices: an int64 graph reaches them as its int32 view
// (cuda/int32_graph.cuh).
//
// Compile check (zero warnings), from the repository root, on one line:
//   nvcc -std=c++17 -O3 -Xcompiler -fPIC,-Wall,-Wextra --Werror all-warnings
//     --generate-code=arch=compute_80,code=sm_80 --generate-code=arch=compute_90,code=sm_90
//     -Iffi -Iffi/common -isystem third_party/xla_ffi
//     -DJGO_WITH_CUDA -c ffi/cuda/gatv2.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
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
#include "jgo/gatv2.h"

namespace jgo {
namespace {

// z = <a, leaky_relu(xs + xd (+ ef))> of one (edge, head), pointers at the head; every lane of
// the group gets the sum.
// The pre-activation t = xs + xd (+ ef) of one element, in T.
template <typename T, bool kEdge, typename S>
__device__ __forceinline__ T Pre(const S* xs, const S* xd, const S* ef, int64_t c) {
  return Gatv2Pre(Widen<T>(xs[c]), Widen<T>(xd[c]), kEdge ? Widen<T>(ef[c]) : T(0));
}

template <typename T, bool kEdge, typename S>
__device__ __forceinline__ T Logit(const S* xs, const S* xd, const S* ef, const T* a, int64_t C, T slope, int lane,
                                   int group, unsigned mask) {
  T z = T(0);
  for (int64_t c = lane; c < C; c += group) z += a[c] * LeakyRelu(Pre<T, kEdge>(xs, xd, ef, c), slope);
  return GroupSum(z, mask, group);
}

template <typename T, typename S>
__device__ __forceinline__ T GroupDot(const S* u, const S* v, int64_t C, int lane, int group, unsigned mask) {
  T d = T(0);
  for (int64_t c = lane; c < C; c += group) d += Widen<T>(u[c]) * Widen<T>(v[c]);
  return GroupSum(d, mask, group);
}

// ---------------------------------------------------------------------------------------
// jgo_gatv2_fwd on the engine: per chunk the row's x_dst stays in registers and the lane's attention weights
// a[h, c] for the whole walk; per edge the x_src row (and edge_feat row) is gathered, kGroup edges at a time
// before the first is used, each edge's logit summed over its head's lanes, then the bucketed online softmax
// (AttendState) accumulates the same x_src values: one read of each gathered row.

// gpu-model: engine mlp>=8
template <typename S, typename T, bool kDrop, bool kEdge>
__global__ void __launch_bounds__(kBlock, 1) FwdEngineKernel(HeadWalk a, Dropout drop, T slope,
                                                             const int* __restrict__ offsets,
                                                             const int* __restrict__ nbr, const int* __restrict__ eid,
                                                             const S* __restrict__ xs, const S* __restrict__ xd,
                                                             const T* __restrict__ attn, const S* __restrict__ ef,
                                                             S* __restrict__ out, T* __restrict__ lse,
                                                             SplitScratch split) {
  constexpr bool kVector = true;  // 128-bit loads: the handler's rows are aligned and C % kV == 0
  constexpr int kV = 16 / int(sizeof(S));
  constexpr int kGroup = kEdge ? kInFlight / 2 : kInFlight;  // 8 rows in flight (x_src, and edge_feat)
  const Walker w = ThisWalker(a.group);
  const Positions<int, T> pos{nbr, eid, nullptr, a.nbr_bound, a.n_edges, 0};
  ForEachHeadTile<kV, kVector>(a, w, [&](int64_t window, int, const auto& lf, bool live, int h, int sub) {
    const LaneRows<kV, kVector, S> src(xs, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> dst(xd, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> edge(ef, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, kEdge);
    T weights[kV];
#pragma unroll
    for (int v = 0; v < kV; ++v) weights[v] = lf.ok[v] ? attn[lf.f[v]] : T(0);
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, a.window_shift, w, [&](const Chunk& c) {
      S d[kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) d[v] = Narrow<S>(T(0));
      dst.Load(c.row, lf.ok, d);
      AttendState<T, kV> st;
      auto group = [&](const Staged<T> (&s)[kGroup], unsigned bits) {
        S x[kGroup][kV], e[kGroup][kV];
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {  // every load of the group before the first is used
          if (!((bits >> u) & 1u)) continue;
          src.Load(s[u].j, lf.ok, x[u]);
          if (kEdge) edge.Load(s[u].e, lf.ok, e[u]);
        }
        T z[kGroup];
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          if (!((bits >> u) & 1u)) continue;
          T part = T(0);
#pragma unroll
          for (int v = 0; v < kV; ++v) {
            const T t = Gatv2Pre(Widen<T>(x[u][v]), Widen<T>(d[v]), kEdge ? Widen<T>(e[u][v]) : T(0));
            if (lf.ok[v]) part += weights[v] * LeakyRelu(t, slope);
          }
          z[u] = HeadSum(part, a.lanes, w);
        }
        st.Rescale(z, bits);
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          if (!((bits >> u) & 1u)) continue;
          st.Add(st.Weigh(z[u]) * DropoutFactorIf<kDrop, T>(drop, s[u].e, h), x[u]);
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
// jgo_gatv2_fwd of heads the engine does not take: a group per (destination, head), one pass with an online
// softmax per chunk.

template <typename S, typename T, typename I, bool kDrop, bool kEdge>
__global__ void FwdKernel(GatArgs g, const I* offsets, const I* nbr, const I* eid, const S* xs, const S* xd,
                          const T* a, const S* ef, S* out, T* lse, int group) {
  const int64_t H = g.heads, C = g.dim, HC = H * C;
  const T slope = static_cast<T>(g.slope);
  const int lane = threadIdx.x % group;
  const unsigned mask = GroupMask(group);
  for (int64_t w = ThreadIndex() / group; w < g.n_rows * H; w += ThreadCount() / group) {
    const int64_t r = w / H, h = w % H;
    const int64_t begin = Clamp(offsets[r], 0, g.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, g.n_edges);
    const S* xdh = xd + r * HC + h * C;
    const T* ah = a + h * C;
    AttendRow<T>(
        nbr, eid, begin, end, g.n_src, g.n_edges, C, lane, group,
        [&](int64_t j, int64_t e) {
          return Logit<T, kEdge>(xs + j * HC + h * C, xdh, kEdge ? ef + e * HC + h * C : nullptr, ah, C, slope, lane,
                                 group, mask);
        },
        [&](int64_t j) { return xs + j * HC + h * C; },
        [&](int64_t e) { return DropoutFactorIf<kDrop, T>(g.drop, e, h); },
        out + r * HC + h * C, lse + r * H + h);
  }
}

// ---------------------------------------------------------------------------------------
// The backward on the engine: jgo_gatv2_bwd_dst walks the CSC (rows = destinations i), jgo_gatv2_bwd_src the
// reverse CSR (rows = sources j). The row's own operands stay in registers (x_dst[i] and G[i], or x_src[j]) with
// the lane's attention weights; per edge the others are gathered, kGroup edges at a time, and the logit and the
// dot <G[i], x_src[j]> are summed over the head's lanes. Split rows leave their chunk's sums in scratch, folded
// in chunk order by the last to arrive.

// jgo_gatv2_bwd_dst: grad_xd[i] = sum_e dt_e, grad_a_rows[i] = sum_e dz_e leaky(t_e), grad_ef[e] = dt_e.
// gpu-model: engine mlp>=8
template <typename S, typename T, bool kDrop, bool kEdge>
__global__ void __launch_bounds__(kBlock, 1) BwdDstEngineKernel(HeadWalk a, Dropout drop, T slope,
                                                                const int* __restrict__ offsets,
                                                                const int* __restrict__ nbr,
                                                                const int* __restrict__ eid, const S* __restrict__ xs,
                                                                const S* __restrict__ xd, const T* __restrict__ attn,
                                                                const S* __restrict__ ef, const T* __restrict__ info,
                                                                const S* __restrict__ grad, S* __restrict__ grad_xd,
                                                                T* __restrict__ grad_a, S* __restrict__ grad_ef,
                                                                SplitScratch split) {
  constexpr bool kVector = true;  // 128-bit loads: the handler's rows are aligned and C % kV == 0
  constexpr int kV = 16 / int(sizeof(S));
  constexpr int kGroup = kInFlight / 2;  // 4 edges: 8 took 143 registers (one block an SM), modelled 2.3x slower
  const Walker w = ThisWalker(a.group);
  const Positions<int, T> pos{nbr, eid, nullptr, a.nbr_bound, a.n_edges, 0};
  const int HI = Gatv2Info::kCount * a.H;
  ForEachHeadTile<kV, kVector>(a, w, [&](int64_t window, int, const auto& lf, bool, int h, int) {
    const LaneRows<kV, kVector, S> src(xs, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> dst(xd, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> grads(grad, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> edge(ef, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, kEdge);
    T weights[kV];
#pragma unroll
    for (int v = 0; v < kV; ++v) weights[v] = lf.ok[v] ? attn[lf.f[v]] : T(0);
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, a.window_shift, w, [&](const Chunk& c) {
      S d[kV], g[kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) d[v] = g[v] = Narrow<S>(T(0));
      dst.Load(c.row, lf.ok, d);
      grads.Load(c.row, lf.ok, g);
      const T lse = info[int64_t(c.row) * HI + Gatv2Info::kLse * a.H + h];
      const T delta = info[int64_t(c.row) * HI + Gatv2Info::kDelta * a.H + h];
      T acc[2][kV];  // grad_x_dst, grad_attn_rows
#pragma unroll
      for (int v = 0; v < kV; ++v) acc[0][v] = acc[1][v] = T(0);
      auto group = [&](const Staged<T> (&s)[kGroup], unsigned bits) {
        S x[kGroup][kV], e[kGroup][kV];
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {  // every load of the group before the first is used
          if (!((bits >> u) & 1u)) continue;
          src.Load(s[u].j, lf.ok, x[u]);
          if (kEdge) edge.Load(s[u].e, lf.ok, e[u]);
        }
        T z[kGroup], dot[kGroup], dz[kGroup];
        auto pre = [&](int u, int v) {
          return Gatv2Pre(Widen<T>(x[u][v]), Widen<T>(d[v]), kEdge ? Widen<T>(e[u][v]) : T(0));
        };
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {  // the group's logits and dots, then their butterflies
          if (!((bits >> u) & 1u)) continue;
          z[u] = dot[u] = T(0);
#pragma unroll
          for (int v = 0; v < kV; ++v) {
            if (lf.ok[v]) {
              z[u] += weights[v] * LeakyRelu(pre(u, v), slope);
              dot[u] += Widen<T>(g[v]) * Widen<T>(x[u][v]);
            }
          }
        }
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          if (!((bits >> u) & 1u)) continue;
          const T alpha = SoftmaxWeight(HeadSum(z[u], a.lanes, w), lse, ExpFn{});
          dz[u] = alpha * (HeadSum(dot[u], a.lanes, w) * DropoutFactorIf<kDrop, T>(drop, s[u].e, h) - delta);
        }
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          if (!((bits >> u) & 1u)) continue;
          S dt[kV];
#pragma unroll
          for (int v = 0; v < kV; ++v) {  // t again (adds): no widened features live across the butterflies
            const T t = pre(u, v), dtv = Gatv2PreGrad(dz[u], weights[v], t, slope);
            acc[0][v] += dtv;
            acc[1][v] += Gatv2WeightGrad(dz[u], t, slope);
            dt[v] = Narrow<S>(dtv);
          }
          if (kEdge) StoreFeatures<kV, kVector>(grad_ef + int64_t(s[u].e) * a.HC, lf, dt, a.stream);
        }
      };
      WalkPositions<true, true, false, kGroup, kEdge || kDrop>(pos, c.lo, c.hi, w, group);
      if (c.split() && !FoldSplitSums(c, split, a.slot_count, a.counter_count, a.HC, lf, w, acc)) return;
      S result[kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) result[v] = Narrow<S>(acc[0][v]);
      StoreFeatures<kV, kVector>(grad_xd + int64_t(c.row) * a.HC, lf, result, false);
      StoreFeatures<kV, kVector>(grad_a + int64_t(c.row) * a.HC, lf, acc[1], false);
    });
  });
}

// jgo_gatv2_bwd_src: grad_xs[j] = sum_e alpha_e d_e G[i] + dt_e over the out-edges.
// The floor of 5 loads in flight is the half instantiations' with edge_feat (2 edges a group, 4 spilled); the
// others keep 8-20.
// gpu-model: engine mlp>=5
template <typename S, typename T, bool kDrop, bool kEdge>
__global__ void __launch_bounds__(kBlock, 1) BwdSrcEngineKernel(HeadWalk a, Dropout drop, T slope,
                                                                const int* __restrict__ offsets,
                                                                const int* __restrict__ nbr,
                                                                const int* __restrict__ eid, const S* __restrict__ xs,
                                                                const S* __restrict__ xd, const T* __restrict__ attn,
                                                                const S* __restrict__ ef, const T* __restrict__ info,
                                                                const S* __restrict__ grad, S* __restrict__ grad_xs,
                                                                SplitScratch split) {
  constexpr bool kVector = true;  // 128-bit loads: the handler's rows are aligned and C % kV == 0
  constexpr int kV = 16 / int(sizeof(S));
  // 8 or 12 rows and 8 scalars in flight (x_dst and G, and edge_feat); half features with edge_feat: 6 and 4 (12
  // spilled at 255 registers)
  constexpr int kGroup = kEdge && sizeof(S) == 2 ? kInFlight / 4 : kInFlight / 2;
  const Walker w = ThisWalker(a.group);
  const Positions<int, T> pos{nbr, eid, nullptr, a.nbr_bound, a.n_edges, 0};
  const int HI = Gatv2Info::kCount * a.H;
  ForEachHeadTile<kV, kVector>(a, w, [&](int64_t window, int, const auto& lf, bool, int h, int) {
    const LaneRows<kV, kVector, S> src(xs, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> dst(xd, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> grads(grad, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> edge(ef, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, kEdge);
    T weights[kV];
#pragma unroll
    for (int v = 0; v < kV; ++v) weights[v] = lf.ok[v] ? attn[lf.f[v]] : T(0);
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, a.window_shift, w, [&](const Chunk& c) {
      S x[kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) x[v] = Narrow<S>(T(0));
      src.Load(c.row, lf.ok, x);
      T acc[1][kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) acc[0][v] = T(0);
      auto group = [&](const Staged<T> (&s)[kGroup], unsigned bits) {
        S d[kGroup][kV], g[kGroup][kV], e[kGroup][kV];
        T lse[kGroup], delta[kGroup];
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {  // every load of the group before the first is used
          if (!((bits >> u) & 1u)) continue;
          dst.Load(s[u].j, lf.ok, d[u]);
          grads.Load(s[u].j, lf.ok, g[u]);
          if (kEdge) edge.Load(s[u].e, lf.ok, e[u]);
          const T* row = info + int64_t(s[u].j) * HI + h;
          lse[u] = __ldg(row + Gatv2Info::kLse * a.H);
          delta[u] = __ldg(row + Gatv2Info::kDelta * a.H);
        }
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          if (!((bits >> u) & 1u)) continue;
          T t[kV], z = T(0), dot = T(0);
#pragma unroll
          for (int v = 0; v < kV; ++v) {
            t[v] = Gatv2Pre(Widen<T>(x[v]), Widen<T>(d[u][v]), kEdge ? Widen<T>(e[u][v]) : T(0));
            if (lf.ok[v]) {
              z += weights[v] * LeakyRelu(t[v], slope);
              dot += Widen<T>(g[u][v]) * Widen<T>(x[v]);
            }
          }
          const T alpha = SoftmaxWeight(HeadSum(z, a.lanes, w), lse[u], ExpFn{});
          const T f = DropoutFactorIf<kDrop, T>(drop, s[u].e, h);
          const T dz = alpha * (HeadSum(dot, a.lanes, w) * f - delta[u]);
#pragma unroll
          for (int v = 0; v < kV; ++v)
            acc[0][v] += alpha * f * Widen<T>(g[u][v]) + Gatv2PreGrad(dz, weights[v], t[v], slope);
        }
      };
      WalkPositions<true, true, false, kGroup, kEdge || kDrop>(pos, c.lo, c.hi, w, group);
      if (c.split() && !FoldSplitSums(c, split, a.slot_count, a.counter_count, a.HC, lf, w, acc)) return;
      S result[kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) result[v] = Narrow<S>(acc[0][v]);
      StoreFeatures<kV, kVector>(grad_xs + int64_t(c.row) * a.HC, lf, result, false);
    });
  });
}

// ---------------------------------------------------------------------------------------
// The backward of heads the engine does not take.
// jgo_gatv2_bwd_dst: a group per (destination i, head h) over the in-edges (CSC):
//   grad_xd[i] = sum_e dt_e,  grad_a_rows[i] = sum_e dz_e leaky(t_e),  grad_ef[e] = dt_e

template <typename S, typename T, typename I, bool kDrop, bool kEdge>
__global__ void BwdDstKernel(GatArgs g, const I* offsets, const I* nbr, const I* eid, const S* xs, const S* xd,
                             const T* a, const S* ef, const T* info, const S* grad, S* grad_xd, T* grad_a,
                             S* grad_ef, int group) {
  const int64_t H = g.heads, C = g.dim, HC = H * C, HI = Gatv2Info::kCount * H;
  const T slope = static_cast<T>(g.slope);
  const int lane = threadIdx.x % group;
  const unsigned mask = GroupMask(group);
  for (int64_t w = ThreadIndex() / group; w < g.n_rows * H; w += ThreadCount() / group) {
    const int64_t r = w / H, h = w % H;
    const int64_t begin = Clamp(offsets[r], 0, g.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, g.n_edges);
    const T lse = info[r * HI + Gatv2Info::kLse * H + h], delta = info[r * HI + Gatv2Info::kDelta * H + h];
    const S* xdh = xd + r * HC + h * C;
    const S* gh = grad + r * HC + h * C;
    const T* ah = a + h * C;
    for (int64_t c0 = 0; c0 < C; c0 += int64_t(kVec) * group) {
      T acc_x[kVec], acc_a[kVec];
#pragma unroll
      for (int v = 0; v < kVec; ++v) acc_x[v] = acc_a[v] = T(0);
      for (int64_t k = begin; k < end; ++k) {
        const int64_t j = nbr[k], e = eid[k];
        if (!InRange(j, g.n_src) || !InRange(e, g.n_edges)) continue;
        const S* xsh = xs + j * HC + h * C;
        const S* efh = kEdge ? ef + e * HC + h * C : nullptr;
        const T z = Logit<T, kEdge>(xsh, xdh, efh, ah, C, slope, lane, group, mask);
        const T alpha = SoftmaxWeight(z, lse, ExpFn{});
        const T f = DropoutFactorIf<kDrop, T>(g.drop, e, h);
        const T dz = alpha * (GroupDot<T>(gh, xsh, C, lane, group, mask) * f - delta);
#pragma unroll
        for (int v = 0; v < kVec; ++v) {
          const int64_t c = c0 + lane + int64_t(v) * group;
          if (c < C) {
            const T t = Pre<T, kEdge>(xsh, xdh, efh, c);
            const T dt = Gatv2PreGrad(dz, ah[c], t, slope);
            acc_x[v] += dt;
            acc_a[v] += Gatv2WeightGrad(dz, t, slope);
            if (kEdge) grad_ef[e * HC + h * C + c] = Narrow<S>(dt);
          }
        }
      }
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        const int64_t c = c0 + lane + int64_t(v) * group;
        if (c < C) {
          grad_xd[r * HC + h * C + c] = Narrow<S>(acc_x[v]);
          grad_a[r * HC + h * C + c] = acc_a[v];
        }
      }
    }
  }
}

// jgo_gatv2_bwd_src: a group per (source j, head h) over the out-edges (reverse CSR):
//   grad_xs[j] = sum_e alpha_e G[i] + dt_e

template <typename S, typename T, typename I, bool kDrop, bool kEdge>
__global__ void BwdSrcKernel(GatArgs g, const I* offsets, const I* nbr, const I* eid, const S* xs, const S* xd,
                             const T* a, const S* ef, const T* info, const S* grad, S* grad_xs, int group) {
  const int64_t H = g.heads, C = g.dim, HC = H * C, HI = Gatv2Info::kCount * H;
  const T slope = static_cast<T>(g.slope);
  const int lane = threadIdx.x % group;
  const unsigned mask = GroupMask(group);
  for (int64_t w = ThreadIndex() / group; w < g.n_rows * H; w += ThreadCount() / group) {
    const int64_t r = w / H, h = w % H;
    const int64_t begin = Clamp(offsets[r], 0, g.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, g.n_edges);
    const S* xsh = xs + r * HC + h * C;
    const T* ah = a + h * C;
    for (int64_t c0 = 0; c0 < C; c0 += int64_t(kVec) * group) {
      T acc[kVec];
#pragma unroll
      for (int v = 0; v < kVec; ++v) acc[v] = T(0);
      for (int64_t k = begin; k < end; ++k) {
        const int64_t i = nbr[k], e = eid[k];
        if (!InRange(i, g.n_dst) || !InRange(e, g.n_edges)) continue;
        const S* xdh = xd + i * HC + h * C;
        const S* gh = grad + i * HC + h * C;
        const S* efh = kEdge ? ef + e * HC + h * C : nullptr;
        const T z = Logit<T, kEdge>(xsh, xdh, efh, ah, C, slope, lane, group, mask);
        const T alpha = SoftmaxWeight(z, info[i * HI + Gatv2Info::kLse * H + h], ExpFn{});
        const T f = DropoutFactorIf<kDrop, T>(g.drop, e, h);
        const T delta = info[i * HI + Gatv2Info::kDelta * H + h];
        const T dz = alpha * (GroupDot<T>(gh, xsh, C, lane, group, mask) * f - delta);
#pragma unroll
        for (int v = 0; v < kVec; ++v) {
          const int64_t c = c0 + lane + int64_t(v) * group;
          if (c < C) {
            const T t = Pre<T, kEdge>(xsh, xdh, efh, c);
            acc[v] += alpha * f * Widen<T>(gh[c]) + Gatv2PreGrad(dz, ah[c], t, slope);
          }
        }
      }
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        const int64_t c = c0 + lane + int64_t(v) * group;
        if (c < C) grad_xs[r * HC + h * C + c] = Narrow<S>(acc[v]);
      }
    }
  }
}

constexpr const char* kFwd = "jgo_gatv2_fwd";
constexpr const char* kBwdDst = "jgo_gatv2_bwd_dst";
constexpr const char* kBwdSrc = "jgo_gatv2_bwd_src";

ffi::Error CudaError(const char* name, cudaError_t err) {
  return ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": " + cudaGetErrorString(err));
}

template <typename S, typename T>
ffi::Error FwdTyped(cudaStream_t stream, CudaScratch& scratch, const GatArgs& g, const Int32Graph& graph,
                    ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef, ffi::AnyBuffer out,
                    ffi::AnyBuffer lse) {
  if (g.n_rows == 0 || g.heads == 0) return ffi::Error::Success();
  const S* edge = g.has_edge ? Data<const S>(ef) : nullptr;
  const bool aligned = Aligned(xs.untyped_data()) && Aligned(xd.untyped_data()) && Aligned(out.untyped_data()) &&
                       (!g.has_edge || Aligned(ef.untyped_data()));
  if (const int per_lane = HeadLaneFeatures<S>(g.dim, aligned); per_lane > 1) {
    auto walk = HeadWalkOf(kFwd, g.n_rows, g.n_edges, g.nbr_bound, g.heads, g.dim, per_lane,
                           static_cast<int64_t>(out.size_bytes()));
    if (walk.has_error()) return walk.error();
    auto split = SplitScratchFor(kFwd, scratch, stream, g.n_edges, 3 * int64_t(walk->HC), sizeof(T), false,
                                 walk->tiles);
    if (split.has_error()) return split.error();
    return WithFlags(g.drop.key != nullptr, g.has_edge, [&](auto drop, auto with_edge) {
      constexpr bool kDrop = decltype(drop)::value, kEdge = decltype(with_edge)::value;
      auto kernel = FwdEngineKernel<S, T, kDrop, kEdge>;
      return LaunchBlocks(kFwd, kernel, WalkerBlocks(walk->windows * walk->tiles, walk->group), 0, stream, *walk,
                          g.drop, static_cast<T>(g.slope), graph.offsets, graph.nbr, graph.eid, Data<const S>(xs),
                          Data<const S>(xd), Data<const T>(a), edge, Data<S>(out), Data<T>(lse), *split);
    });
  }
  using I = int32_t;
  auto kernel = WithFlags(g.drop.key != nullptr, g.has_edge, [](auto drop, auto edge) {
    return FwdKernel<S, T, I, decltype(drop)::value, decltype(edge)::value>;
  });
  return Launch(kFwd, kernel, g.n_rows * g.heads * GroupWidth(g.dim), stream, g, graph.offsets, graph.nbr, graph.eid,
                Data<const S>(xs), Data<const S>(xd), Data<const T>(a), edge, Data<S>(out), Data<T>(lse),
                GroupWidth(g.dim));
}

ffi::Error FwdCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                   ffi::AnyBuffer eid, ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef,
                   ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> lse,
                   double negative_slope, bool has_edge, int64_t dropout_threshold, double dropout_scale) {
  auto args = CheckGatv2(kFwd, offsets, nbr, eid, xs, xd, a, ef, nullptr, nullptr, false, negative_slope, has_edge);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(kFwd, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  const auto ft = args->storage;
  if (auto e = CheckResult(kFwd, "out", *out, ft, {args->n_dst, args->heads, args->dim}); e.failure()) return e;
  if (auto e = CheckResult(kFwd, "lse", *lse, args->score, {args->n_dst, args->heads}); e.failure()) return e;
  auto graph = Int32GraphOf(kFwd, stream, scratch, offsets, nbr, eid);
  if (graph.has_error()) return graph.error();
  return DispatchStorage(args->storage, args->score, [&](auto s, auto t) {
    return FwdTyped<decltype(s), decltype(t)>(stream, scratch, *args, *graph, xs, xd, a, ef, *out, *lse);
  });
}

// The walk of a backward pass on the engine (per_lane > 0, HeadLaneFeatures) and its split-row scratch of `sums`
// partial rows a chunk; out_bytes: the per-edge output's.
template <typename T>
ffi::Error BwdWalk(const char* name, cudaStream_t stream, CudaScratch& scratch, const GatArgs& g, int per_lane,
                   int sums, int64_t out_bytes, HeadWalk& walk, SplitScratch& split, int64_t& blocks) {
  auto w = HeadWalkOf(name, g.n_rows, g.n_edges, g.nbr_bound, g.heads, g.dim, per_lane, out_bytes);
  if (w.has_error()) return w.error();
  auto s = SplitScratchFor(name, scratch, stream, g.n_edges, sums * int64_t(w->HC), sizeof(T), false, w->tiles);
  if (s.has_error()) return s.error();
  walk = *w;
  split = *s;
  blocks = WalkerBlocks(walk.windows * walk.tiles, walk.group);
  return ffi::Error::Success();
}

template <typename S, typename T>
ffi::Error BwdDstTyped(cudaStream_t stream, CudaScratch& scratch, const GatArgs& g, const Int32Graph& graph,
                       ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef, ffi::AnyBuffer info,
                       ffi::AnyBuffer grad, ffi::AnyBuffer grad_xd, ffi::AnyBuffer grad_a, ffi::AnyBuffer grad_ef) {
  S* gef = g.has_edge ? Data<S>(grad_ef) : nullptr;
  // An edge skipped for an out-of-range index leaves its grad_edge_feat row unwritten: clear it first.
  const int64_t ef_bytes = int64_t(sizeof(S)) * g.n_edges * g.heads * g.dim;
  if (gef && ef_bytes > 0) {
    const cudaError_t err = cudaMemsetAsync(gef, 0, static_cast<size_t>(ef_bytes), stream);
    if (err != cudaSuccess) return CudaError(kBwdDst, err);
  }
  if (g.n_rows == 0 || g.heads == 0 || g.dim == 0) return ffi::Error::Success();
  const S* edge = g.has_edge ? Data<const S>(ef) : nullptr;
  const bool aligned = Aligned(xs.untyped_data()) && Aligned(xd.untyped_data()) && Aligned(grad.untyped_data()) &&
                       Aligned(grad_xd.untyped_data()) && Aligned(grad_a.untyped_data()) &&
                       (!g.has_edge || (Aligned(ef.untyped_data()) && Aligned(grad_ef.untyped_data())));
  if (const int per_lane = HeadLaneFeatures<S>(g.dim, aligned); per_lane > 1) {
    HeadWalk walk;
    SplitScratch split;
    int64_t blocks;
    if (auto err = BwdWalk<T>(kBwdDst, stream, scratch, g, per_lane, 2, ef_bytes, walk, split, blocks); err.failure())
      return err;
    return WithFlags(g.drop.key != nullptr, g.has_edge, [&](auto drop, auto with_edge) {
      constexpr bool kDrop = decltype(drop)::value, kEdge = decltype(with_edge)::value;
      auto kernel = BwdDstEngineKernel<S, T, kDrop, kEdge>;
      return LaunchBlocks(kBwdDst, kernel, blocks, 0, stream, walk, g.drop, static_cast<T>(g.slope), graph.offsets,
                          graph.nbr, graph.eid, Data<const S>(xs), Data<const S>(xd), Data<const T>(a), edge,
                          Data<const T>(info), Data<const S>(grad), Data<S>(grad_xd), Data<T>(grad_a), gef, split);
    });
  }
  using I = int32_t;
  auto kernel = WithFlags(g.drop.key != nullptr, g.has_edge, [](auto drop, auto edge) {
    return BwdDstKernel<S, T, I, decltype(drop)::value, decltype(edge)::value>;
  });
  return Launch(kBwdDst, kernel, g.n_rows * g.heads * GroupWidth(g.dim), stream, g, graph.offsets, graph.nbr,
                graph.eid, Data<const S>(xs), Data<const S>(xd), Data<const T>(a), edge, Data<const T>(info),
                Data<const S>(grad), Data<S>(grad_xd), Data<T>(grad_a), gef, GroupWidth(g.dim));
}

template <typename S, typename T>
ffi::Error BwdSrcTyped(cudaStream_t stream, CudaScratch& scratch, const GatArgs& g, const Int32Graph& graph,
                       ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef, ffi::AnyBuffer info,
                       ffi::AnyBuffer grad, ffi::AnyBuffer grad_xs) {
  if (g.n_rows == 0 || g.heads == 0 || g.dim == 0) return ffi::Error::Success();
  const S* edge = g.has_edge ? Data<const S>(ef) : nullptr;
  const bool aligned = Aligned(xs.untyped_data()) && Aligned(xd.untyped_data()) && Aligned(grad.untyped_data()) &&
                       Aligned(grad_xs.untyped_data()) && (!g.has_edge || Aligned(ef.untyped_data()));
  if (const int per_lane = HeadLaneFeatures<S>(g.dim, aligned); per_lane > 1) {
    HeadWalk walk;
    SplitScratch split;
    int64_t blocks;
    if (auto err = BwdWalk<T>(kBwdSrc, stream, scratch, g, per_lane, 1, 0, walk, split, blocks); err.failure())
      return err;
    return WithFlags(g.drop.key != nullptr, g.has_edge, [&](auto drop, auto with_edge) {
      constexpr bool kDrop = decltype(drop)::value, kEdge = decltype(with_edge)::value;
      auto kernel = BwdSrcEngineKernel<S, T, kDrop, kEdge>;
      return LaunchBlocks(kBwdSrc, kernel, blocks, 0, stream, walk, g.drop, static_cast<T>(g.slope), graph.offsets,
                          graph.nbr, graph.eid, Data<const S>(xs), Data<const S>(xd), Data<const T>(a), edge,
                          Data<const T>(info), Data<const S>(grad), Data<S>(grad_xs), split);
    });
  }
  using I = int32_t;
  auto kernel = WithFlags(g.drop.key != nullptr, g.has_edge, [](auto drop, auto edge) {
    return BwdSrcKernel<S, T, I, decltype(drop)::value, decltype(edge)::value>;
  });
  return Launch(kBwdSrc, kernel, g.n_rows * g.heads * GroupWidth(g.dim), stream, g, graph.offsets, graph.nbr,
                graph.eid, Data<const S>(xs), Data<const S>(xd), Data<const T>(a), edge, Data<const T>(info),
                Data<const S>(grad), Data<S>(grad_xs), GroupWidth(g.dim));
}

ffi::Error BwdDstCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                      ffi::AnyBuffer eid, ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef,
                      ffi::AnyBuffer info, ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key,
                      ffi::Result<ffi::AnyBuffer> grad_xd, ffi::Result<ffi::AnyBuffer> grad_a,
                      ffi::Result<ffi::AnyBuffer> grad_ef, double negative_slope, bool has_edge,
                      int64_t dropout_threshold, double dropout_scale) {
  auto args = CheckGatv2(kBwdDst, offsets, nbr, eid, xs, xd, a, ef, &info, &grad, false, negative_slope, has_edge);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(kBwdDst, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  const auto ft = args->storage;
  const int64_t nd = args->n_dst, H = args->heads, C = args->dim;
  if (auto e = CheckResult(kBwdDst, "grad_x_dst", *grad_xd, ft, {nd, H, C}); e.failure()) return e;
  if (auto e = CheckResult(kBwdDst, "grad_attn_rows", *grad_a, args->score, {nd, H, C}); e.failure()) return e;
  if (has_edge) {
    if (auto e = CheckResult(kBwdDst, "grad_edge_feat", *grad_ef, ft, {args->n_edges, H, C}); e.failure())
      return e;
  }
  auto graph = Int32GraphOf(kBwdDst, stream, scratch, offsets, nbr, eid);
  if (graph.has_error()) return graph.error();
  return DispatchStorage(args->storage, args->score, [&](auto s, auto t) {
    return BwdDstTyped<decltype(s), decltype(t)>(stream, scratch, *args, *graph, xs, xd, a, ef, info, grad, *grad_xd,
                                                 *grad_a, *grad_ef);
  });
}

ffi::Error BwdSrcCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                      ffi::AnyBuffer eid, ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef,
                      ffi::AnyBuffer info, ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key,
                      ffi::Result<ffi::AnyBuffer> grad_xs, double negative_slope, bool has_edge,
                      int64_t dropout_threshold, double dropout_scale) {
  auto args = CheckGatv2(kBwdSrc, offsets, nbr, eid, xs, xd, a, ef, &info, &grad, true, negative_slope, has_edge);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(kBwdSrc, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  const auto ft = args->storage;
  if (auto e = CheckResult(kBwdSrc, "grad_x_src", *grad_xs, ft, {args->n_src, args->heads, args->dim});
      e.failure())
    return e;
  auto graph = Int32GraphOf(kBwdSrc, stream, scratch, offsets, nbr, eid);
  if (graph.has_error()) return graph.error();
  return DispatchStorage(args->storage, args->score, [&](auto s, auto t) {
    return BwdSrcTyped<decltype(s), decltype(t)>(stream, scratch, *args, *graph, xs, xd, a, ef, info, grad,
                                                 *grad_xs);
  });
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER_NO_TRAITS(Gatv2Fwd, jgo::FwdCuda, jgo::BindGatv2Fwd<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER_NO_TRAITS(Gatv2BwdDst, jgo::BwdDstCuda, jgo::BindGatv2BwdDst<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER_NO_TRAITS(Gatv2BwdSrc, jgo::BwdSrcCuda, jgo::BindGatv2BwdSrc<jgo::CudaStream, jgo::CudaScratch>());
