// CUDA handlers of the neighbourhood reduce: jgo_spmm (over a CSR/CSC) and jgo_pool_sorted (and its
// transpose, jgo_pool_sorted_bwd), on the chunked row-walk engine (chunk_walk.cuh, walk_reduce.cuh). Same
// operands, attributes and results as the CPU twin (cpu/message_passing.cc), same per-edge math
// (jgo/math.h). jgo_sddmm and jgo_edge_softmax, the CPU twin's other two, are cuda/sddmm.cu and
// cuda/edge_softmax.cu (files of their own, so that nvcc compiles the three at once).
//
// No floating-point atomics: every output element is written by one walker, and the partials of a row
// over 256 edges are folded in chunk order. Index arrays stay on the device; instead of validating them
// on the host, the kernels clamp every index into range and skip the edges whose ids were out of it, so
// they never leave a buffer.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/chunk_walk.cuh"
#include "cuda/launch.cuh"
#include "cuda/walk_reduce.cuh"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/math.h"
#include "jgo/pool.h"

namespace jgo {
namespace {

// ---------------------------------------------------------------------------------------
// jgo_spmm: the engine's neighbourhood reduce (walk_reduce.cuh)

template <typename T, typename I>
ffi::Error SpmmTyped(cudaStream_t stream, CudaScratch& scratch, const SpmmArgs& a, ffi::AnyBuffer offsets,
                     ffi::AnyBuffer nbr, ffi::AnyBuffer eid, ffi::AnyBuffer node, ffi::AnyBuffer edge,
                     ffi::AnyBuffer mask_arg, ffi::AnyBuffer out, ffi::AnyBuffer arg_out, bool checked) {
  ReduceProblem<T, I> p;
  p.offsets = offsets.typed_data<I>();
  p.nbr = nbr.typed_data<I>();
  p.eid = eid.typed_data<I>();
  p.node = node.typed_data<T>();
  p.edge = edge.typed_data<T>();
  p.mask_arg = a.mask == Mask::kNone ? nullptr : mask_arg.typed_data<I>();
  p.out = out.typed_data<T>();
  p.arg_out = (a.reduce == Reduce::kMax || a.reduce == Reduce::kMin) ? arg_out.typed_data<I>() : nullptr;
  static_cast<SpmmArgs&>(p) = a;  // the operation and its shape
  constexpr const char* kName = "jgo_spmm";
  if (!checked) {  // offsets out of order may leave rows no walker owns: 0 (and no winning edge) there
    if (auto err = ZeroFill(kName, out.untyped_data(), out.size_bytes(), stream); err.failure()) return err;
    if (p.arg_out != nullptr) {
      if (auto err = Status(kName, cudaMemsetAsync(p.arg_out, 0xff, arg_out.size_bytes(), stream)); err.failure())
        return err;
    }
  }
  return LaunchReduce(kName, stream, scratch, p);
}

ffi::Error SpmmCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                    ffi::AnyBuffer eid, ffi::AnyBuffer node, ffi::AnyBuffer edge, ffi::AnyBuffer mask_arg,
                    ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> arg_out, int64_t op, int64_t reduce,
                    int64_t mask, ffi::Span<const int64_t> dims, ffi::Span<const int64_t> node_strides,
                    ffi::Span<const int64_t> edge_strides, bool checked) {
  auto args = CheckSpmm(offsets, nbr, eid, node, edge, mask_arg, *out, *arg_out, op, reduce, mask, dims,
                        node_strides, edge_strides);
  if (args.has_error()) return args.error();
  return DispatchTypes(out->element_type(), offsets.element_type(), [&](auto t, auto i) {
    return SpmmTyped<decltype(t), decltype(i)>(stream, scratch, *args, offsets, nbr, eid, node, edge, mask_arg, *out,
                                               *arg_out, checked);
  });
}


// ---------------------------------------------------------------------------------------
// jgo_pool_sorted: out[g] = the sum (or mean) of the rows of x [N, F] whose id is g, for never decreasing ids
// (a batch's node-to-graph ids): graph g's rows [lower_bound(g), lower_bound(g + 1)) from one binary search per
// graph, summed by the engine's reduce with position k reading row k (no membership graph, no index array).
// Ids outside [0, n_graphs) belong to no graph. Ids that decrease (a wrong ids_are_sorted) give wrong sums,
// in bounds: the CPU kernel rejects them.

template <typename I>
__global__ void __launch_bounds__(kBlock) GraphOffsetsKernel(const I* __restrict__ ids, int64_t n, int64_t graphs,
                                                             I* __restrict__ offsets) {
  for (int64_t g = ThreadIndex(); g <= graphs; g += ThreadCount()) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = (lo + hi) >> 1;
      if (static_cast<int64_t>(ids[mid]) < g) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    offsets[g] = static_cast<I>(lo);
  }
}

ffi::Error PoolSortedCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer x, ffi::AnyBuffer ids,
                          ffi::Result<ffi::AnyBuffer> out, bool mean) {
  constexpr const char* kName = "jgo_pool_sorted";
  auto args = CheckPoolSorted(x, ids, *out);
  if (args.has_error()) return args.error();
  const PoolArgs a = *args;
  if (a.n == 0) return ZeroFill(kName, out->untyped_data(), out->size_bytes(), stream);
  return DispatchTypes(x.element_type(), ids.element_type(), [&](auto t, auto i) -> ffi::Error {
    using T = decltype(t);
    using I = decltype(i);
    if (a.graphs == 0 || a.width == 0) return ffi::Error::Success();
    if (auto err = EngineSizes(kName, {a.n, a.graphs, a.width}); err.failure()) return err;
    auto mem = ScratchBytes(scratch, static_cast<size_t>((a.graphs + 1) * int64_t(sizeof(I))), 16);
    if (!mem.has_value()) return ffi::Error::Internal("jaxgraphops: jgo_pool_sorted: out of scratch memory");
    I* offsets = static_cast<I*>(*mem);
    const I* graph_ids = ids.typed_data<I>();
    if (auto err = Launch(kName, GraphOffsetsKernel<I>, a.graphs + 1, stream, graph_ids, a.n, a.graphs, offsets);
        err.failure())
      return err;
    ReduceProblem<T, I> p;
    p.offsets = offsets;
    p.node = x.typed_data<T>();
    p.out = out->typed_data<T>();
    p.reduce = mean ? Reduce::kMean : Reduce::kSum;
    p.dims = Dims3{1, 1, a.width};
    p.node_strides = p.edge_strides = FlatStrides();
    p.n_rows = a.graphs;
    p.n_edges = a.n;
    p.nbr_bound = a.n;
    p.node_rows = a.n;
    p.node_len = a.width;
    return LaunchReduce(kName, stream, scratch, p);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_pool_sorted_bwd: out[i] = ct[ids[i]] for an id in [0, n_graphs), 0 for any other: each graph's row of ct
// copied to its nodes (the transpose of jgo_pool_sorted's sum), kInFlight rows' loads before their stores.

// The unit's kInFlight ids from i0 (a multiple of kInFlight), -1 past n: a whole unit of aligned ids in 128-bit
// loads (two for int32), so that its rows' loads all issue once they return; scalar loads otherwise. Scalar loads
// everywhere kept 5-6 rows in flight on the vector path (ptxas interleaved them with the rows' loads).
template <typename I>
__device__ __forceinline__ void LoadUnitIds(const I* __restrict__ ids, int i0, int n, bool aligned,
                                            int64_t (&g)[kInFlight]) {
  if (aligned && i0 + kInFlight <= n) {
    const Vec<I, kInFlight> v = LoadVec<I, kInFlight>(ids + i0);
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) g[u] = static_cast<int64_t>(v.v[u]);
  } else {
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) g[u] = i0 + u < n ? static_cast<int64_t>(ids[i0 + u]) : -1;
  }
}

// gpu-model: engine mlp>=8 vector-if kVector
template <typename T, typename I, bool kVector>
__global__ void __launch_bounds__(kBlock, 1) PoolBwdKernel(PoolArgs a, int group, int tiles, bool stream,
                                                           bool ids_aligned, const T* __restrict__ ct,
                                                           const I* __restrict__ ids, T* __restrict__ out) {
  constexpr int kV = 16 / int(sizeof(T));
  const Walker w = ThisWalker(group);
  const int width = static_cast<int>(a.width), n = static_cast<int>(a.n);
  const int64_t units = (a.n + kInFlight - 1) / kInFlight;
  ForEachWalkerTile<kV, kVector>(units, tiles, width, w, [&](int64_t unit, const auto& lf) {
    const int i0 = static_cast<int>(unit) * kInFlight;
    const LaneRows<kV, kVector, T> rows(ct, width, lf, FlatStrides(), Dims3{1, 1, width}, true);
    int64_t g[kInFlight];  // the ids loaded before the first is compared
    LoadUnitIds(ids, i0, n, ids_aligned, g);
    T x[kInFlight][kV];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
#pragma unroll
      for (int v = 0; v < kV; ++v) x[u][v] = T(0);
      if (g[u] >= 0 && g[u] < a.graphs && (!kVector || lf.ok[0])) rows.Load(static_cast<int>(g[u]), lf.ok, x[u]);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
      if (i0 + u < n) StoreFeatures<kV, kVector>(out + int64_t(i0 + u) * width, lf, x[u], stream);
  });
}

ffi::Error PoolSortedBwdCuda(cudaStream_t stream, ffi::AnyBuffer ct, ffi::AnyBuffer ids,
                             ffi::Result<ffi::AnyBuffer> out) {
  constexpr const char* kName = "jgo_pool_sorted_bwd";
  auto args = CheckPoolSortedBwd(ct, ids, *out);
  if (args.has_error()) return args.error();
  const PoolArgs a = *args;
  if (a.n == 0 || a.width == 0) return ffi::Error::Success();
  if (auto err = EngineSizes(kName, {a.n, a.graphs, a.width}); err.failure()) return err;
  return DispatchTypes(ct.element_type(), ids.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    constexpr int kV = 16 / int(sizeof(T));
    const int group = WalkerLanes(a.width, kV);
    const int tiles = static_cast<int>((a.width + int64_t(group) * kV - 1) / (int64_t(group) * kV));
    const bool vector = a.width % kV == 0 && Aligned(ct.untyped_data()) && Aligned(out->untyped_data());
    const bool stream_out = StreamStores(static_cast<int64_t>(out->size_bytes()));
    const int64_t walkers = (a.n + kInFlight - 1) / kInFlight * tiles;
    return LaunchBlocks(kName, vector ? PoolBwdKernel<T, I, true> : PoolBwdKernel<T, I, false>,
                        WalkerBlocks(walkers, group), 0, stream, a, group, tiles, stream_out,
                        Aligned(ids.untyped_data()), ct.typed_data<T>(), ids.typed_data<I>(), out->typed_data<T>());
  });
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER_NO_TRAITS(Spmm, jgo::SpmmCuda, jgo::BindSpmm<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER_NO_TRAITS(PoolSorted, jgo::PoolSortedCuda, jgo::BindPoolSorted<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER(PoolSortedBwd, jgo::PoolSortedBwdCuda, jgo::BindPoolSortedBwd<jgo::CudaStream>());
