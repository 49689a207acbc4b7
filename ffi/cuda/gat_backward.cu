// CUDA handlers of the fused GAT's backward, jgo_gat_bwd_dst and jgo_gat_bwd_src (its forward: cuda/gat.cu).
// Same operands, attributes and results as the CPU twin (cpu/gat.cc), same per-edge math (jgo/attention.h),
// same shape checks (jgo/attention_args.h).
//
// Both run on the chunked row-walk engine (cuda/chunk_walk.cuh): chunks of at most 256 edges, a tile of a
// row's heads in one walker, split rows combined in chunk order (no float atomics, the same bits whatever the
// block order). Heads the engine does not take keep a group of lanes per (row, head).
// Index arrays are not validated on the host; edges whose neighbour or edge id is out of range are
// skipped and offsets are clamped into [0, n_edges], so no kernel reads or writes out of bounds. The kernels
// are compiled for int32 indices: an int64 graph reaches them as its int32 view (cuda/int32_graph.cuh).
//
// Compile check (zero warnings), from the repository root, on one line:
//   nvcc -std=c++17 -O3 -Xcompiler -fPIC,-Wall,-Wextra --Werror all-warnings
//     --generate-code=arch=compute_80,code=sm_80 --generate-code=arch=compute_90,code=sm_90
//     -Iffi -Iffi/common -isystem third_party/xla_ffi
//     -DJGO_WITH_CUDA -c ffi/cuda/gat_backward.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/launch.cuh"
#include "cuda/chunk_walk.cuh"
#include "cuda/head_walk.cuh"
#include "cuda/int32_graph.cuh"
#include "cuda/online_softmax.cuh"
#include "cuda/walk_reduce.cuh"
#include "cuda/storage.cuh"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/attention.h"
#include "jgo/attention_args.h"

namespace jgo {
namespace {

// ---------------------------------------------------------------------------------------
// The backward on the engine: jgo_gat_bwd_dst walks the CSC (rows = destinations i), jgo_gat_bwd_src the
// reverse CSR (rows = sources j), each a walker per window of chunks and tile of heads (cuda/head_walk.cuh).
// The row's own operand (G_i, or x_j) stays in registers; per edge the other is gathered, 4 edges at a time
// (their rows and scores: 8 to 20 loads in flight; 8 edges took 112-207 registers, one block an SM, and
// modelled the reverse walk 2.2x slower on the power-law graph), and the dot <G_i,h, x_j,h> is summed over the
// head's lanes by a butterfly. Split rows leave their chunk's sums in scratch and the last to arrive folds them
// in chunk order: no float atomics.
// Heads of more than 32 lanes take the group-per-(row, head) kernels below.

// The reverse walk's split chunks leave [HC | H] partials, padded to 16 bytes (partial_width); the CSC walk's H.
struct GatBwdWalk : HeadWalk {
  int partial_width;
};

// jgo_gat_bwd_dst: grad_s_dst[i,h] = sum_e gp_e,h over the in-edges, grad_s_edge[e,h] = gp_e,h.
// gpu-model: engine mlp>=8 vector-if kVector
template <typename S, typename T, typename I, bool kDrop, bool kEdge, bool kVector>
__global__ void __launch_bounds__(kBlock, 1) GatBwdDstEngineKernel(
    GatBwdWalk a, Dropout drop, T slope, const I* __restrict__ offsets, const I* __restrict__ nbr,
    const I* __restrict__ eid, const S* __restrict__ x, const T* __restrict__ s_src, const T* __restrict__ s_edge,
    const T* __restrict__ dst_info, const S* __restrict__ grad, T* __restrict__ grad_s_dst,
    T* __restrict__ grad_s_edge, SplitScratch split) {
  constexpr int kV = kVector ? 16 / int(sizeof(S)) : 1;
  constexpr int kGroup = kInFlight / 2;
  const Walker w = ThisWalker(a.group);
  const Positions<I, T> pos{nbr, eid, nullptr, a.nbr_bound, a.n_edges, 0};
  ForEachHeadTile<kV, kVector>(a, w, [&](int64_t window, int tile, const auto& lf, bool live, int h, int sub) {
    const LaneRows<kV, kVector, S> rows(x, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> grads(grad, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, a.window_shift, w, [&](const Chunk& c) {
      S g[kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) g[v] = Narrow<S>(T(0));
      grads.Load(c.row, lf.ok, g);
      const T* info = dst_info + int64_t(c.row) * DstInfo::kCount * a.H + h;
      const T sd = info[DstInfo::kSDst * a.H], lse = info[DstInfo::kLse * a.H], delta = info[DstInfo::kDelta * a.H];
      T acc = T(0);
      auto group = [&](const Staged<T> (&s)[kGroup], unsigned bits) {
        S xs[kGroup][kV];
        T ss[kGroup], se[kGroup];
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {  // every load of the group before the first is used
          if (!((bits >> u) & 1u)) continue;
          rows.Load(s[u].j, lf.ok, xs[u]);
          ss[u] = __ldg(s_src + int64_t(s[u].j) * a.H + h);
          se[u] = kEdge ? __ldg(s_edge + int64_t(s[u].e) * a.H + h) : T(0);
        }
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          if (!((bits >> u) & 1u)) continue;
          T dot = T(0);
#pragma unroll
          for (int v = 0; v < kV; ++v)
            if (lf.ok[v]) dot += Widen<T>(g[v]) * Widen<T>(xs[u][v]);
          dot = HeadSum(dot, a.lanes, w);
          const T p = GatPre(ss[u], sd, se[u]);
          const T f = DropoutFactorIf<kDrop, T>(drop, s[u].e, h);
          const T gp = GatLogitGrad(SoftmaxWeight(LeakyRelu(p, slope), lse, ExpFn{}), dot * f, delta, p, slope);
          acc += gp;
          if (kEdge && live && sub == 0) grad_s_edge[int64_t(s[u].e) * a.H + h] = gp;
        }
      };
      WalkPositions<true, true, false, kGroup, kEdge || kDrop>(pos, c.lo, c.hi, w, group);
      if (c.split()) {  // the chunks' sums [slot, H], folded in chunk order by the last to arrive
        const int64_t slot = PartialSlot(c, a.slot_count);
        T* values = static_cast<T*>(split.values);
        if (live && sub == 0) values[slot * a.H + h] = acc;
        if (!ArriveLast(split.counters + SplitCounter(c, a.counter_count, tile), c, w)) return;
        acc = T(0);
#pragma unroll 1
        for (int q = 0; q < c.count && live; ++q) acc += __ldcg(values + (slot - c.index + q) * a.H + h);
      }
      if (live && sub == 0) grad_s_dst[int64_t(c.row) * a.H + h] = acc;
    });
  });
}

// jgo_gat_bwd_src: grad_x[j,h,:] = sum_e alpha_e,h d_e,h G[i,h,:] and grad_s_src[j,h] = sum_e gp_e,h over the
// out-edges (the reverse CSR: rows = sources j, neighbours = destinations i).
// gpu-model: engine mlp>=8 vector-if kVector
template <typename S, typename T, typename I, bool kDrop, bool kEdge, bool kVector>
__global__ void __launch_bounds__(kBlock, 1) GatBwdSrcEngineKernel(
    GatBwdWalk a, Dropout drop, T slope, const I* __restrict__ offsets, const I* __restrict__ nbr,
    const I* __restrict__ eid, const S* __restrict__ x, const T* __restrict__ s_src, const T* __restrict__ s_edge,
    const T* __restrict__ dst_info, const S* __restrict__ grad, S* __restrict__ grad_x, T* __restrict__ grad_s_src,
    SplitScratch split) {
  constexpr int kV = kVector ? 16 / int(sizeof(S)) : 1;
  constexpr int kGroup = kInFlight / 2;
  const Walker w = ThisWalker(a.group);
  const Positions<I, T> pos{nbr, eid, nullptr, a.nbr_bound, a.n_edges, 0};
  const int HI = DstInfo::kCount * a.H;
  ForEachHeadTile<kV, kVector>(a, w, [&](int64_t window, int tile, const auto& lf, bool live, int h, int sub) {
    const LaneRows<kV, kVector, S> rows(x, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    const LaneRows<kV, kVector, S> grads(grad, a.HC, lf, FlatStrides(), Dims3{1, 1, a.HC}, true);
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, a.window_shift, w, [&](const Chunk& c) {
      S xr[kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) xr[v] = Narrow<S>(T(0));
      rows.Load(c.row, lf.ok, xr);
      const T ss = s_src[int64_t(c.row) * a.H + h];
      T acc[kV], acc_s = T(0);
#pragma unroll
      for (int v = 0; v < kV; ++v) acc[v] = T(0);
      auto group = [&](const Staged<T> (&s)[kGroup], unsigned bits) {
        S gs[kGroup][kV];
        T sd[kGroup], lse[kGroup], delta[kGroup], se[kGroup];
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {  // every load of the group before the first is used
          if (!((bits >> u) & 1u)) continue;
          grads.Load(s[u].j, lf.ok, gs[u]);
          const T* info = dst_info + int64_t(s[u].j) * HI + h;
          sd[u] = __ldg(info + DstInfo::kSDst * a.H);
          lse[u] = __ldg(info + DstInfo::kLse * a.H);
          delta[u] = __ldg(info + DstInfo::kDelta * a.H);
          se[u] = kEdge ? __ldg(s_edge + int64_t(s[u].e) * a.H + h) : T(0);
        }
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          if (!((bits >> u) & 1u)) continue;
          T dot = T(0);
#pragma unroll
          for (int v = 0; v < kV; ++v)
            if (lf.ok[v]) dot += Widen<T>(gs[u][v]) * Widen<T>(xr[v]);
          dot = HeadSum(dot, a.lanes, w);
          const T p = GatPre(ss, sd[u], se[u]);
          const T alpha = SoftmaxWeight(LeakyRelu(p, slope), lse[u], ExpFn{});
          const T f = DropoutFactorIf<kDrop, T>(drop, s[u].e, h);
          acc_s += GatLogitGrad(alpha, dot * f, delta[u], p, slope);
          const T weight = alpha * f;
#pragma unroll
          for (int v = 0; v < kV; ++v)
            if (lf.ok[v]) acc[v] += weight * Widen<T>(gs[u][v]);
        }
      };
      WalkPositions<true, true, false, kGroup, kEdge || kDrop>(pos, c.lo, c.hi, w, group);
      if (c.split()) {  // the chunks' sums [slot, HC | H], folded in chunk order by the last to arrive
        const int64_t slot = PartialSlot(c, a.slot_count), width = a.partial_width;
        T* values = static_cast<T*>(split.values);
        StoreFeatures<kV, kVector>(values + slot * width, lf, acc, false);
        if (live && sub == 0) values[slot * width + a.HC + h] = acc_s;
        if (!ArriveLast(split.counters + SplitCounter(c, a.counter_count, tile), c, w)) return;
        acc_s = T(0);
#pragma unroll
        for (int v = 0; v < kV; ++v) acc[v] = T(0);
#pragma unroll 1
        for (int q = 0; q < c.count; ++q) {
          const T* part = values + (slot - c.index + q) * width;
#pragma unroll
          for (int v = 0; v < kV; ++v)
            if (lf.ok[v]) acc[v] += __ldcg(part + lf.f[v]);
          if (live) acc_s += __ldcg(part + a.HC + h);
        }
      }
      S result[kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) result[v] = Narrow<S>(acc[v]);
      StoreFeatures<kV, kVector>(grad_x + int64_t(c.row) * a.HC, lf, result, false);
      if (live && sub == 0) grad_s_src[int64_t(c.row) * a.H + h] = acc_s;
    });
  });
}

template <typename S, typename T>
ffi::Error GatBwdEngine(cudaStream_t stream, CudaScratch& scratch, const GatArgs& g, bool by_src,
                        const Int32Graph& graph, ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_edge,
                        ffi::AnyBuffer dst_info, ffi::AnyBuffer grad, ffi::AnyBuffer out_a, ffi::AnyBuffer out_b,
                        int per_lane) {
  using I = int32_t;
  const char* name = by_src ? "jgo_gat_bwd_src" : "jgo_gat_bwd_dst";
  if (g.n_rows == 0 || g.heads == 0) return ffi::Error::Success();
  auto walk = HeadWalkOf(name, g.n_rows, g.n_edges, g.nbr_bound, g.heads, g.dim, per_lane, 0);
  if (walk.has_error()) return walk.error();
  const int64_t align = 16 / int64_t(sizeof(T));  // a chunk's partials 16-byte aligned, for grad_x's 128-bit stores
  const GatBwdWalk a{*walk, by_src ? static_cast<int>((walk->HC + walk->H + align - 1) / align * align) : walk->H};
  const bool vector = per_lane > 1;
  auto split = SplitScratchFor(name, scratch, stream, g.n_edges, a.partial_width, sizeof(T), false, a.tiles);
  if (split.has_error()) return split.error();
  const T* se = g.has_edge ? s_edge.typed_data<T>() : nullptr;
  const int64_t blocks = WalkerBlocks(a.windows * a.tiles, a.group);
  return WithFlags(g.drop.key != nullptr, g.has_edge, [&](auto drop, auto edge) {
    constexpr bool kDrop = decltype(drop)::value, kEdge = decltype(edge)::value;
    if (by_src) {
      auto kernel = vector ? GatBwdSrcEngineKernel<S, T, I, kDrop, kEdge, true>
                           : GatBwdSrcEngineKernel<S, T, I, kDrop, kEdge, false>;
      return LaunchBlocks(name, kernel, blocks, 0, stream, a, g.drop, static_cast<T>(g.slope), graph.offsets,
                          graph.nbr, graph.eid, Data<const S>(x), s_src.typed_data<T>(), se,
                          dst_info.typed_data<T>(), Data<const S>(grad), Data<S>(out_a), out_b.typed_data<T>(),
                          *split);
    }
    auto kernel = vector ? GatBwdDstEngineKernel<S, T, I, kDrop, kEdge, true>
                         : GatBwdDstEngineKernel<S, T, I, kDrop, kEdge, false>;
    return LaunchBlocks(name, kernel, blocks, 0, stream, a, g.drop, static_cast<T>(g.slope), graph.offsets,
                        graph.nbr, graph.eid, Data<const S>(x), s_src.typed_data<T>(), se,
                        dst_info.typed_data<T>(), Data<const S>(grad), out_a.typed_data<T>(),
                        g.has_edge ? out_b.typed_data<T>() : nullptr, *split);
  });
}

// ---------------------------------------------------------------------------------------
// The backward of heads the engine does not take (C = 0, or more than 32 lanes a head: GatBwdLaneFeatures).
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

template <typename S, typename T>
ffi::Error GatBwdTyped(cudaStream_t stream, CudaScratch& scratch, const GatArgs& a, bool by_src,
                       const Int32Graph& graph, ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_edge,
                       ffi::AnyBuffer dst_info, ffi::AnyBuffer grad, ffi::AnyBuffer out_a, ffi::AnyBuffer out_b) {
  using I = int32_t;
  // An edge skipped for an out-of-range index leaves its grad_s_edge row unwritten: clear it first.
  if (!by_src && a.has_edge && a.n_edges > 0) {
    const cudaError_t err = cudaMemsetAsync(out_b.untyped_data(), 0, sizeof(T) * a.n_edges * a.heads, stream);
    if (err != cudaSuccess)
      return ffi::Error::Internal(std::string("jaxgraphops: jgo_gat_bwd_dst: ") + cudaGetErrorString(err));
  }
  const bool aligned =
      Aligned(x.untyped_data()) && Aligned(grad.untyped_data()) && (!by_src || Aligned(out_a.untyped_data()));
  if (const int per_lane = HeadLaneFeatures<S>(a.dim, aligned); per_lane > 0)
    return GatBwdEngine<S, T>(stream, scratch, a, by_src, graph, x, s_src, s_edge, dst_info, grad, out_a, out_b,
                              per_lane);
  const int group = GroupWidth(a.dim);
  const int64_t threads = a.n_rows * a.heads * group;
  const T* se = a.has_edge ? s_edge.typed_data<T>() : nullptr;
  T* rb = (by_src || a.has_edge) ? out_b.typed_data<T>() : nullptr;
  if (by_src) {
    auto kernel = WithFlags(a.drop.key != nullptr, a.has_edge, [](auto drop, auto edge) {
      return GatBwdSrcKernel<S, T, I, decltype(drop)::value, decltype(edge)::value>;
    });
    return Launch("jgo_gat_bwd_src", kernel, threads, stream, a, graph.offsets, graph.nbr, graph.eid,
                  Data<const S>(x), s_src.typed_data<T>(), se, dst_info.typed_data<T>(),
                  Data<const S>(grad), Data<S>(out_a), rb, group);
  }
  auto kernel = WithFlags(a.drop.key != nullptr, a.has_edge, [](auto drop, auto edge) {
    return GatBwdDstKernel<S, T, I, decltype(drop)::value, decltype(edge)::value>;
  });
  return Launch("jgo_gat_bwd_dst", kernel, threads, stream, a, graph.offsets, graph.nbr, graph.eid,
                Data<const S>(x), s_src.typed_data<T>(), se, dst_info.typed_data<T>(),
                Data<const S>(grad), out_a.typed_data<T>(), rb, group);
}

ffi::Error GatBwd(cudaStream_t stream, CudaScratch& scratch, bool by_src, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                  ffi::AnyBuffer eid, ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_edge,
                  ffi::AnyBuffer dst_info, ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::AnyBuffer out_a,
                  ffi::AnyBuffer out_b, double negative_slope, bool has_edge, int64_t dropout_threshold,
                  double dropout_scale) {
  auto args = CheckGatBwd(offsets, nbr, eid, x, s_src, s_edge, dst_info, grad, out_a, out_b, by_src, negative_slope,
                          has_edge);
  if (args.has_error()) return args.error();
  const char* name = by_src ? "jgo_gat_bwd_src" : "jgo_gat_bwd_dst";
  if (auto e = SetDropout(name, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  auto graph = Int32GraphOf(name, stream, scratch, offsets, nbr, eid);
  if (graph.has_error()) return graph.error();
  return DispatchStorage(args->storage, args->score, [&](auto s, auto t) {
    return GatBwdTyped<decltype(s), decltype(t)>(stream, scratch, *args, by_src, *graph, x, s_src, s_edge, dst_info,
                                                 grad, out_a, out_b);
  });
}

ffi::Error GatBwdDstCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                         ffi::AnyBuffer eid, ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_edge,
                         ffi::AnyBuffer dst_info, ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key,
                         ffi::Result<ffi::AnyBuffer> grad_s_dst, ffi::Result<ffi::AnyBuffer> grad_s_edge,
                         double negative_slope, bool has_edge, int64_t dropout_threshold, double dropout_scale) {
  return GatBwd(stream, scratch, false, offsets, nbr, eid, x, s_src, s_edge, dst_info, grad, dropout_key,
                *grad_s_dst, *grad_s_edge, negative_slope, has_edge, dropout_threshold, dropout_scale);
}

ffi::Error GatBwdSrcCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                         ffi::AnyBuffer eid, ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_edge,
                         ffi::AnyBuffer dst_info, ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key,
                         ffi::Result<ffi::AnyBuffer> grad_x, ffi::Result<ffi::AnyBuffer> grad_s_src,
                         double negative_slope, bool has_edge, int64_t dropout_threshold, double dropout_scale) {
  return GatBwd(stream, scratch, true, offsets, nbr, eid, x, s_src, s_edge, dst_info, grad, dropout_key,
                *grad_x, *grad_s_src, negative_slope, has_edge, dropout_threshold, dropout_scale);
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER_NO_TRAITS(GatBwdDst, jgo::GatBwdDstCuda, jgo::BindGatBwdDst<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER_NO_TRAITS(GatBwdSrc, jgo::GatBwdSrcCuda, jgo::BindGatBwdSrc<jgo::CudaStream, jgo::CudaScratch>());
