// CUDA handlers of the fused GATv2 op: jgo_gatv2_fwd, jgo_gatv2_bwd_dst and jgo_gatv2_bwd_src.
// Same operands, attributes and results as the CPU twin (cpu/gatv2.cc), same math and
// shape checks (jgo/gatv2.h).
//
// The forward runs on the chunked row-walk engine (cuda/chunk_walk.cuh, cuda/head_walk.cuh): a walker per
// window of chunks of at most 256 edges and tile of whole heads, each gathered x_src row read once (128-bit
// loads) for both the logit and the aggregation, split rows combined in chunk order (no float atomics, the same
// bits whatever the block order). Heads the engine does not take (over 32 lanes a head) and the backward keep
// a group of lanes per (row, head): the lanes split the C-length logit <a, leaky_relu(x_src[j] + x_dst[i] (+ e))>
// and the dot <G[i], x_src[j]> and share the sums by shuffles; each lane accumulates kVec features in registers
// (wider heads take several chunks, each re-walking the edges). Every output element is written by one walker
// or group: no atomics, bitwise reproducible. Index arrays are not validated on the host; edges whose
// neighbour or edge id is out of range are skipped and offsets are clamped into [0, n_edges]. The forward's
// kernels are compiled for int32 indices: an int64 graph reaches them as its int32 view (cuda/int32_graph.cuh).
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

// gpu-model: engine mlp>=8 vector-if kVector
template <typename S, typename T, bool kDrop, bool kEdge, bool kVector>
__global__ void __launch_bounds__(kBlock, 1) FwdEngineKernel(HeadWalk a, Dropout drop, T slope,
                                                             const int* __restrict__ offsets,
                                                             const int* __restrict__ nbr, const int* __restrict__ eid,
                                                             const S* __restrict__ xs, const S* __restrict__ xd,
                                                             const T* __restrict__ attn, const S* __restrict__ ef,
                                                             S* __restrict__ out, T* __restrict__ lse,
                                                             SplitScratch split) {
  constexpr int kV = kVector ? 16 / int(sizeof(S)) : 1;
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
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, w, [&](const Chunk& c) {
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
// jgo_gatv2_fwd of heads the engine does not take: a group per (destination, head), one pass with an online softmax per chunk.

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
  using Yes = std::true_type;
  using No = std::false_type;
  const S* edge = g.has_edge ? Data<const S>(ef) : nullptr;
  const bool aligned = Aligned(xs.untyped_data()) && Aligned(xd.untyped_data()) && Aligned(out.untyped_data()) &&
                       (!g.has_edge || Aligned(ef.untyped_data()));
  if (const int per_lane = HeadLaneFeatures<S>(g.dim, aligned); per_lane > 0) {
    auto walk = HeadWalkOf(kFwd, g.n_rows, g.n_edges, g.nbr_bound, g.heads, g.dim, per_lane,
                           static_cast<int64_t>(out.size_bytes()));
    if (walk.has_error()) return walk.error();
    auto split = SplitScratchFor(kFwd, scratch, stream, g.n_edges, 3 * int64_t(walk->HC), sizeof(T), false,
                                 walk->tiles);
    if (split.has_error()) return split.error();
    auto launch = [&](auto drop, auto with_edge) {
      constexpr bool kDrop = decltype(drop)::value, kEdge = decltype(with_edge)::value;
      auto kernel = per_lane > 1 ? FwdEngineKernel<S, T, kDrop, kEdge, true> : FwdEngineKernel<S, T, kDrop, kEdge, false>;
      return LaunchBlocks(kFwd, kernel, WalkerBlocks(walk->windows * walk->tiles, walk->group), 0, stream, *walk,
                          g.drop, static_cast<T>(g.slope), graph.offsets, graph.nbr, graph.eid, Data<const S>(xs),
                          Data<const S>(xd), Data<const T>(a), edge, Data<S>(out), Data<T>(lse), *split);
    };
    return g.has_edge ? (g.drop.key ? launch(Yes{}, Yes{}) : launch(No{}, Yes{}))
                      : (g.drop.key ? launch(Yes{}, No{}) : launch(No{}, No{}));
  }
  using I = int32_t;
  auto kernel = g.has_edge ? (g.drop.key ? FwdKernel<S, T, I, true, true> : FwdKernel<S, T, I, false, true>)
                           : (g.drop.key ? FwdKernel<S, T, I, true, false> : FwdKernel<S, T, I, false, false>);
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

ffi::Error BwdDstCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                      ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef, ffi::AnyBuffer info,
                      ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> grad_xd,
                      ffi::Result<ffi::AnyBuffer> grad_a, ffi::Result<ffi::AnyBuffer> grad_ef, double negative_slope,
                      bool has_edge, int64_t dropout_threshold, double dropout_scale) {
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
  const GatArgs g = *args;
  return DispatchStorage(g.storage, g.score, offsets.element_type(), [&](auto s, auto t, auto i) {
    using S = decltype(s);
    using T = decltype(t);
    using I = decltype(i);
    S* gef = g.has_edge ? Data<S>(*grad_ef) : nullptr;
    // An edge skipped for an out-of-range index leaves its grad_edge_feat row unwritten: clear it first.
    if (g.has_edge && g.n_edges * H * C > 0) {
      const cudaError_t err = cudaMemsetAsync(gef, 0, sizeof(S) * g.n_edges * H * C, stream);
      if (err != cudaSuccess) return CudaError("jgo_gatv2_bwd_dst", err);
    }
    const int group = GroupWidth(g.dim);
    auto kernel = g.has_edge
                      ? (g.drop.key ? BwdDstKernel<S, T, I, true, true> : BwdDstKernel<S, T, I, false, true>)
                      : (g.drop.key ? BwdDstKernel<S, T, I, true, false> : BwdDstKernel<S, T, I, false, false>);
    return Launch("jgo_gatv2_bwd_dst", kernel, g.n_rows * g.heads * group, stream, g, offsets.typed_data<I>(),
                  nbr.typed_data<I>(), eid.typed_data<I>(), Data<const S>(xs), Data<const S>(xd), Data<const T>(a),
                  g.has_edge ? Data<const S>(ef) : nullptr, Data<const T>(info), Data<const S>(grad),
                  Data<S>(*grad_xd), Data<T>(*grad_a), gef, group);
  });
}

ffi::Error BwdSrcCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                      ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef, ffi::AnyBuffer info,
                      ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> grad_xs,
                      double negative_slope, bool has_edge, int64_t dropout_threshold, double dropout_scale) {
  auto args = CheckGatv2(kBwdSrc, offsets, nbr, eid, xs, xd, a, ef, &info, &grad, true, negative_slope, has_edge);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(kBwdSrc, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  const auto ft = args->storage;
  if (auto e = CheckResult(kBwdSrc, "grad_x_src", *grad_xs, ft, {args->n_src, args->heads, args->dim});
      e.failure())
    return e;
  const GatArgs g = *args;
  return DispatchStorage(g.storage, g.score, offsets.element_type(), [&](auto s, auto t, auto i) {
    using S = decltype(s);
    using T = decltype(t);
    using I = decltype(i);
    const int group = GroupWidth(g.dim);
    auto kernel = g.has_edge
                      ? (g.drop.key ? BwdSrcKernel<S, T, I, true, true> : BwdSrcKernel<S, T, I, false, true>)
                      : (g.drop.key ? BwdSrcKernel<S, T, I, true, false> : BwdSrcKernel<S, T, I, false, false>);
    return Launch("jgo_gatv2_bwd_src", kernel, g.n_rows * g.heads * group, stream, g, offsets.typed_data<I>(),
                  nbr.typed_data<I>(), eid.typed_data<I>(), Data<const S>(xs), Data<const S>(xd), Data<const T>(a),
                  g.has_edge ? Data<const S>(ef) : nullptr, Data<const T>(info), Data<const S>(grad),
                  Data<S>(*grad_xs), group);
  });
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER_NO_TRAITS(Gatv2Fwd, jgo::FwdCuda, jgo::BindGatv2Fwd<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER(Gatv2BwdDst, jgo::BwdDstCuda, jgo::BindGatv2BwdDst<jgo::CudaStream>());
JGO_CUDA_HANDLER(Gatv2BwdSrc, jgo::BwdSrcCuda, jgo::BindGatv2BwdSrc<jgo::CudaStream>());
