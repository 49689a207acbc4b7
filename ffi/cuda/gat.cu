// CUDA handler of the fused GAT's forward, jgo_gat_fwd (its backward: cuda/gat_backward.cu, a file of its own
// so that nvcc compiles the two at once). Same operands, attributes and results as the CPU twin (cpu/gat.cc),
// same per-edge math (jgo/attention.h), same shape checks (jgo/attention_args.h).
//
// It runs on the chunked row-walk engine (cuda/chunk_walk.cuh): chunks of at most 256 edges, every head of a
// row in one walker, split rows combined in chunk order (no float atomics, the same bits whatever the block
// order).
// Index arrays are not validated on the host; edges whose neighbour or edge id is out of range are
// skipped and offsets are clamped into [0, n_edges], so no kernel reads or writes out of bounds. The kernels
// are compiled for int32 indices: an int64 graph reaches them as its int32 view (cuda/int32_graph.cuh).
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
#include <type_traits>

#include "cuda/launch.cuh"
#include "cuda/chunk_walk.cuh"
#include "cuda/head_walk.cuh"
#include "cuda/int32_graph.cuh"
#include "cuda/walk_reduce.cuh"
#include "cuda/storage.cuh"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/attention.h"
#include "jgo/attention_args.h"

namespace jgo {
namespace {


// ---------------------------------------------------------------------------------------
// jgo_gat_fwd on the engine (cuda/chunk_walk.cuh): a walker of G lanes per window of chunks of the CSC and
// tile of G * kV features of a row's H x C outputs: kV = 16 bytes of the feature type per lane, one 128-bit
// gather per lane per edge, where C % kV == 0 (a lane's features then lie in one head); else one feature per
// lane (the strided path: 32-bit loads, up to 32 features a tile). Each edge's indices are staged once for
// all the heads; kGroup = 8 edges at a time: their rows and scores are loaded before the first is used,
// their logits computed, then the group's maximum and one rescale of the accumulators per group (the
// bucketed online softmax: an exp per logit, not two). A row of at most 256 edges is walked in position
// order by one walker and written once; a split row's chunks leave (acc, m, l) per feature in scratch, and
// the last to arrive merges them in chunk order. A lane keeps one softmax state: its features' head's.

struct GatWalk {
  int n_rows, n_edges, n_src, H, C, width, group, tiles;
  bool values, stream;  // values: C > 0 (else the walk computes lse only, over one feature per head)
  int window_shift;  // windows of 2^window_shift coordinates (WindowShift)
  int64_t windows, slot_count, counter_count;
};

// gpu-model: engine mlp>=8 vector-if kVector
template <typename S, typename T, typename I, bool kDrop, bool kEdge, bool kVector>
__global__ void __launch_bounds__(kBlock, 1) GatFwdKernel(GatWalk a, Dropout drop, T slope,
                                                          const I* __restrict__ offsets, const I* __restrict__ nbr,
                                                          const I* __restrict__ eid, const S* __restrict__ x,
                                                          const T* __restrict__ s_src, const T* __restrict__ s_dst,
                                                          const T* __restrict__ s_edge, S* __restrict__ out,
                                                          T* __restrict__ lse, SplitScratch split) {
  constexpr int kV = kVector ? 16 / int(sizeof(S)) : 1;
  constexpr int kGroup = kInFlight;
  const Walker w = ThisWalker(a.group);
  const Positions<I, T> pos{nbr, eid, nullptr, a.n_src, a.n_edges, 0};
  const int C = a.values ? a.C : 1;
  ForEachWalkerTile<kV, kVector>(a.windows, a.tiles, a.width, w, [&](int64_t window, const auto& lf) {
    const LaneRows<kV, kVector, S> rows(x, a.width, lf, FlatStrides(), Dims3{1, 1, a.width}, a.values);
    const int head = lf.ok[0] ? lf.f[0] / C : 0;
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, a.window_shift, w, [&](const Chunk& c) {
      const T sd = s_dst[int64_t(c.row) * a.H + head];
      AttendState<T, kV> st;
      auto group = [&](const Staged<T> (&s)[kGroup], unsigned bits) {
        S xs[kGroup][kV];
        T z[kGroup];
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {  // every load of the group before the first is used
          if (!((bits >> u) & 1u)) continue;
          if (a.values) rows.Load(s[u].j, lf.ok, xs[u]);
          const T se = kEdge ? __ldg(s_edge + int64_t(s[u].e) * a.H + head) : T(0);
          z[u] = GatLogit(__ldg(s_src + int64_t(s[u].j) * a.H + head), sd, se, slope);
        }
        st.Rescale(z, bits);
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          if (!((bits >> u) & 1u)) continue;
          const T weight = st.Weigh(z[u]);
          if (a.values) st.Add(weight * DropoutFactorIf<kDrop, T>(drop, s[u].e, head), xs[u]);
        }
      };
      WalkPositions<true, true, false, kGroup>(pos, c.lo, c.hi, w, group);
      if (c.split() && !st.FoldSplit(c, split, a.slot_count, a.counter_count, a.width, lf, w)) return;
      S result[kV];
      st.Result(result);
      if (a.values) StoreFeatures<kV, kVector>(out + int64_t(c.row) * a.width, lf, result, a.stream);
      if (lf.ok[0] && lf.f[0] % C == 0) lse[int64_t(c.row) * a.H + head] = SoftmaxLse(st.m, st.l);  // head's lane 0
    });
  });
}

template <typename S, typename T>
ffi::Error GatFwdTyped(cudaStream_t stream, CudaScratch& scratch, const GatArgs& g, const Int32Graph& graph,
                       ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_dst, ffi::AnyBuffer s_edge,
                       ffi::AnyBuffer out, ffi::AnyBuffer lse) {
  using I = int32_t;
  constexpr const char* kName = "jgo_gat_fwd";
  if (g.n_rows == 0 || g.heads == 0) return ffi::Error::Success();
  GatWalk a;
  a.values = g.dim > 0;
  const int64_t width = a.values ? g.heads * g.dim : g.heads;
  const bool vector = a.values && g.dim % (16 / int(sizeof(S))) == 0 && Aligned(x.untyped_data()) &&
                      Aligned(out.untyped_data());
  if (auto err = EngineSizes(kName, {g.n_rows, g.n_edges, g.n_src, width}); err.failure()) return err;
  a.n_rows = static_cast<int>(g.n_rows);
  a.n_edges = static_cast<int>(g.n_edges);
  a.n_src = static_cast<int>(std::min<int64_t>(g.nbr_bound, kMaxIndex));
  a.H = static_cast<int>(g.heads);
  a.C = static_cast<int>(g.dim);
  a.width = static_cast<int>(width);
  const int per_lane = vector ? 16 / int(sizeof(S)) : 1;
  a.group = WalkerLanes(width, per_lane);
  a.tiles = static_cast<int>((width + int64_t(a.group) * per_lane - 1) / (int64_t(a.group) * per_lane));
  a.stream = StreamStores(static_cast<int64_t>(out.size_bytes()));
  a.window_shift = WindowShift(g.n_rows, g.n_edges, int64_t(a.tiles) * a.group);
  a.windows = Windows(g.n_rows, g.n_edges, a.window_shift);
  a.slot_count = SplitScratch::SlotCount(g.n_edges);
  a.counter_count = SplitScratch::CounterCount(g.n_edges);
  if (auto err = EngineSizes(kName, {a.windows * a.tiles}); err.failure()) return err;
  auto split = SplitScratchFor(kName, scratch, stream, g.n_edges, 3 * width, sizeof(T), false, a.tiles);
  if (split.has_error()) return split.error();
  auto kernel = WithFlags(g.drop.key != nullptr, g.has_edge, [&](auto drop, auto edge) {
    constexpr bool kDrop = decltype(drop)::value, kEdge = decltype(edge)::value;
    return vector ? GatFwdKernel<S, T, I, kDrop, kEdge, true> : GatFwdKernel<S, T, I, kDrop, kEdge, false>;
  });
  return LaunchBlocks(kName, kernel, WalkerBlocks(a.windows * a.tiles, a.group), 0, stream, a, g.drop,
                      static_cast<T>(g.slope), graph.offsets, graph.nbr, graph.eid, Data<const S>(x),
                      s_src.typed_data<T>(), s_dst.typed_data<T>(), g.has_edge ? s_edge.typed_data<T>() : nullptr,
                      Data<S>(out), lse.typed_data<T>(), *split);
}

ffi::Error GatFwdCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                      ffi::AnyBuffer eid, ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_dst,
                      ffi::AnyBuffer s_edge, ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> out,
                      ffi::Result<ffi::AnyBuffer> lse, double negative_slope, bool has_edge,
                      int64_t dropout_threshold, double dropout_scale) {
  auto args = CheckGatFwd(offsets, nbr, eid, x, s_src, s_dst, s_edge, *out, *lse, negative_slope, has_edge);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout("jgo_gat_fwd", *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  auto graph = Int32GraphOf("jgo_gat_fwd", stream, scratch, offsets, nbr, eid);
  if (graph.has_error()) return graph.error();
  return DispatchStorage(args->storage, args->score, [&](auto s, auto t) {
    return GatFwdTyped<decltype(s), decltype(t)>(stream, scratch, *args, *graph, x, s_src, s_dst, s_edge, *out, *lse);
  });
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER_NO_TRAITS(GatFwd, jgo::GatFwdCuda, jgo::BindGatFwd<jgo::CudaStream, jgo::CudaScratch>());
