// CUDA handlers of the edge-update input (update_efeat): jgo_update_efeat_fwd, jgo_update_efeat_bwd_src,
// jgo_update_efeat_bwd_dst and jgo_update_efeat_bwd_edge. Same operands, attributes and results as the CPU
// twin (cpu/update_efeat.cc), same math and checks (jgo/update_efeat.h).
//
// Forward: edge-parallel in input edge order, a walker of lanes (chunk_walk.cuh) over the output rows of
// kInFlight edges, kV columns per lane in 128-bit loads where every part's width allows: the edges' node ids,
// then every row load, then the stores (pointers __restrict__); the E x W output goes past the caches when
// it is larger than L2. Backward: the row sums over the reverse CSR (CSC) are the engine's neighbourhood reduce
// of G's column block (walk_reduce.cuh: chunks of at most 256 edges, a split row's partials folded in chunk
// order); the edge pass copies G's block the forward's way. An edge whose node id (forward) or edge id
// (backward) is out of range contributes 0 and offsets are clamped, so no kernel reads or writes out of bounds.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/chunk_walk.cuh"
#include "cuda/launch.cuh"
#include "cuda/walk_reduce.cuh"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/update_efeat.h"

namespace jgo {
namespace {

// ---------------------------------------------------------------------------------------
// jgo_update_efeat_fwd

// The output columns [0, width) of edge rows, kV per lane: a walker of `group` lanes takes kInFlight edges of
// one tile of group * kV columns.
struct EdgeRowsWalk {
  int n_edges, width, group, tiles;
  bool stream;
};

// Where one of a lane's output columns comes from: the part's rows (data, length, which id indexes them:
// kEfeatEdge, kEfeatSrc or kEfeatDst) and the column in them.
template <typename T>
struct EfeatSource {
  const T* data;
  int len, which, col;
};

template <typename T>
__device__ __forceinline__ EfeatSource<T> EfeatColumn(const EfeatArgs& args, const T* ef, const T* xs, const T* xd,
                                                      int c, int part) {
  const int Fe = int(args.f_edge), Fs = int(args.f_src), Fd = int(args.f_dst);
  if (part == kEfeatEdge) return {ef, Fe, kEfeatEdge, c};
  if (part == kEfeatSrc) return {xs, Fs, kEfeatSrc, args.sum ? c : c - Fe};
  return {xd, Fd, kEfeatDst, args.sum ? c : c - Fe - Fs};
}

// Edges per walker: kInFlight, or half as many when each output value sums two or three parts (the loads in
// flight stay at least kInFlight, the registers holding them do not triple).
__host__ __device__ constexpr int EfeatEdges(int parts, bool sum) {
  const int count = ((parts & kEfeatEdge) != 0) + ((parts & kEfeatSrc) != 0) + ((parts & kEfeatDst) != 0);
  return sum && count > 1 ? kInFlight / 2 : kInFlight;
}

// MLP floor 6, measured (nvcc 13.0, sm_90, 2026-11-29; 8-48 elsewhere): 6 in five float64 sums of several
// parts on the vector path (kInFlight / 2 edges a pass, EdgesPerPass). 8 there is open work (issue 32).
// gpu-model: engine mlp>=6 vector-if kVector
template <typename T, typename I, int kParts, bool kSum, bool kVector>
__global__ void __launch_bounds__(kBlock, 1) EfeatFwdKernel(EdgeRowsWalk a, EfeatArgs args,
                                                            const I* __restrict__ offsets, const I* __restrict__ src,
                                                            const I* __restrict__ dst, const T* __restrict__ ef,
                                                            const T* __restrict__ xs, const T* __restrict__ xd,
                                                            T* __restrict__ out) {
  constexpr int kV = 16 / int(sizeof(T));
  constexpr bool kE = (kParts & kEfeatEdge) != 0, kS = (kParts & kEfeatSrc) != 0, kD = (kParts & kEfeatDst) != 0;
  constexpr int kSources = kSum ? int(kE) + int(kS) + int(kD) : 1;  // rows read per output value
  constexpr int kEdges = EfeatEdges(kParts, kSum);
  const Walker w = ThisWalker(a.group);
  const int real = ClampIndex(offsets[args.n_rows], a.n_edges + 1);  // the edges after it are padding: rows of 0
  const int64_t units = (int64_t(a.n_edges) + kEdges - 1) / kEdges;
  ForEachWalkerTile<kV, kVector>(units, a.tiles, a.width, w, [&](int64_t unit, const auto& lf) {
    const int e0 = static_cast<int>(unit) * kEdges;
    // each value's sources: concat, the one part holding its column ([edge | src | dst]); sum, every part
    EfeatSource<T> from[kV][kSources];
#pragma unroll
    for (int v = 0; v < kV; ++v) {
      const int c = lf.f[v];
      [[maybe_unused]] const int Fe = int(args.f_edge), Fs = int(args.f_src);  // concat only
      if constexpr (kSum) {
        int q = 0;
        if constexpr (kE) from[v][q++] = EfeatColumn(args, ef, xs, xd, c, kEfeatEdge);
        if constexpr (kS) from[v][q++] = EfeatColumn(args, ef, xs, xd, c, kEfeatSrc);
        if constexpr (kD) from[v][q++] = EfeatColumn(args, ef, xs, xd, c, kEfeatDst);
      } else {
        const int part = kE && c < Fe ? kEfeatEdge : kS && c < Fe + Fs ? kEfeatSrc : kEfeatDst;
        from[v][0] = EfeatColumn(args, ef, xs, xd, c, part);
      }
    }
    int ids[kEdges][3];
    unsigned live = 0, ok_bits[3] = {0, 0, 0};  // per part: the edge's id for it is in range
#pragma unroll
    for (int u = 0; u < kEdges; ++u) {  // the edges' node ids, then every row load, then the stores
      const int e = e0 + u;
      const bool here = e < real;
      live |= unsigned(e < a.n_edges) << u;
      const int64_t j = kS && here ? static_cast<int64_t>(src[e]) : 0;
      const int64_t v = kD && here ? static_cast<int64_t>(dst[e]) : 0;
      ids[u][0] = here ? e : 0;
      ids[u][1] = ClampIndex(j, static_cast<int>(args.n_src_rows));
      ids[u][2] = ClampIndex(v, static_cast<int>(args.n_dst_rows));
      ok_bits[0] |= unsigned(here) << u;
      ok_bits[1] |= unsigned(here && (!kS || j == ids[u][1])) << u;
      ok_bits[2] |= unsigned(here && (!kD || v == ids[u][2])) << u;
    }
    T x[kEdges][kSources][kV];
#pragma unroll
    for (int u = 0; u < kEdges; ++u) {
#pragma unroll
      for (int q = 0; q < kSources; ++q) {
#pragma unroll
        for (int v = 0; v < (kVector ? 1 : kV); ++v) {
          const EfeatSource<T>& s = from[v][q];
          const int slot = s.which == kEfeatEdge ? 0 : s.which == kEfeatSrc ? 1 : 2;
          const bool ok = lf.ok[v] && ((ok_bits[slot] >> u) & 1u) && (!kSum || ((ok_bits[1] & ok_bits[2]) >> u) & 1u);
          const T* row = s.data + static_cast<uint64_t>(static_cast<uint32_t>(ids[u][slot])) * uint32_t(s.len) + s.col;
          if constexpr (kVector) {
            Vec<T, kV> y{};
            if (ok) y = LoadVec<T, kV>(row);
#pragma unroll
            for (int i = 0; i < kV; ++i) x[u][q][i] = y.v[i];
          } else {
            x[u][q][v] = ok ? __ldg(row) : T(0);
          }
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kEdges; ++u) {
      if (!((live >> u) & 1u)) continue;
      T r[kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) {
        if constexpr (kSum) {
          T parts[3] = {};
#pragma unroll
          for (int q = 0; q < kSources; ++q) parts[q] = x[u][q][v];
          r[v] = EfeatSumOf<kParts>(parts);
        } else {
          r[v] = x[u][0][v];
        }
      }
      StoreFeatures<kV, kVector>(out + int64_t(e0 + u) * a.width, lf, r, a.stream);
    }
  });
}

template <typename T, typename I>
ffi::Error EfeatFwdTyped(cudaStream_t stream, const EfeatArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer src,
                         ffi::AnyBuffer dst, ffi::AnyBuffer edge_feat, ffi::AnyBuffer x_src, ffi::AnyBuffer x_dst,
                         ffi::AnyBuffer out) {
  constexpr const char* kName = "jgo_update_efeat_fwd";
  constexpr int kV = 16 / int(sizeof(T));
  if (a.width == 0 || a.n_edges == 0) return ffi::Error::Success();
  if (auto err = EngineSizes(kName, {a.n_edges, a.width, a.n_src_rows, a.n_dst_rows}); err.failure()) return err;
  const T* ef = (a.parts & kEfeatEdge) ? edge_feat.typed_data<T>() : nullptr;
  const T* xs = (a.parts & kEfeatSrc) ? x_src.typed_data<T>() : nullptr;
  const T* xd = (a.parts & kEfeatDst) ? x_dst.typed_data<T>() : nullptr;
  const bool vector = a.f_edge % kV == 0 && a.f_src % kV == 0 && a.f_dst % kV == 0 && Aligned(ef) && Aligned(xs) &&
                      Aligned(xd) && Aligned(out.untyped_data());
  EdgeRowsWalk w;
  w.n_edges = static_cast<int>(a.n_edges);
  w.width = static_cast<int>(a.width);
  w.group = WalkerLanes(a.width, kV);
  w.tiles = static_cast<int>((a.width + int64_t(w.group) * kV - 1) / (int64_t(w.group) * kV));
  w.stream = StreamStores(static_cast<int64_t>(out.size_bytes()));
  return DispatchEfeatParts(a.parts, [&](auto parts) {
    constexpr int P = decltype(parts)::value;
    auto kernel = WithFlags(a.sum, vector, [](auto sum, auto vector) {
      return EfeatFwdKernel<T, I, P, decltype(sum)::value, decltype(vector)::value>;
    });
    const int edges = a.sum ? EfeatEdges(P, true) : EfeatEdges(P, false);
    const int64_t walkers = (a.n_edges + edges - 1) / edges * w.tiles;
    if (auto err = EngineSizes(kName, {walkers}); err.failure()) return err;
    return LaunchBlocks(kName, kernel, WalkerBlocks(walkers, w.group), 0, stream, w, a, offsets.typed_data<I>(),
                        src.typed_data<I>(), dst.typed_data<I>(), ef, xs, xd, out.typed_data<T>());
  });
}

ffi::Error EfeatFwdCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer src, ffi::AnyBuffer dst,
                        ffi::AnyBuffer edge_feat, ffi::AnyBuffer x_src, ffi::AnyBuffer x_dst,
                        ffi::Result<ffi::AnyBuffer> out, bool sum, bool has_edge, bool has_src, bool has_dst) {
  auto args = CheckEfeatFwd(offsets, src, dst, edge_feat, x_src, x_dst, *out, sum, has_edge, has_src, has_dst);
  if (args.has_error()) return args.error();
  return DispatchTypes(out->element_type(), src.element_type(), [&](auto t, auto i) {
    return EfeatFwdTyped<decltype(t), decltype(i)>(stream, *args, offsets, src, dst, edge_feat, x_src, x_dst, *out);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_update_efeat_bwd_src / _bwd_dst: grad[r] = sum over the edges e of row r of G[e, col : col + width], the
// engine's neighbourhood reduce of G's column block (a copy_e sum)

ffi::Error EfeatBwd(cudaStream_t stream, CudaScratch& scratch, const char* name, ffi::AnyBuffer offsets,
                    ffi::AnyBuffer eid, ffi::AnyBuffer G, ffi::AnyBuffer grad, int64_t col) {
  auto args = CheckEfeatBwd(name, offsets, eid, G, grad, col);
  if (args.has_error()) return args.error();
  const EfeatBwdArgs a = *args;
  return DispatchTypes(G.element_type(), offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    ReduceProblem<T, I> p;
    p.offsets = offsets.typed_data<I>();
    p.nbr = eid.typed_data<I>();  // a copy_e sum reads no neighbour
    p.eid = eid.typed_data<I>();
    p.edge = G.typed_data<T>() + a.col;
    p.out = grad.typed_data<T>();
    p.dims = Dims3{1, 1, a.width};
    p.node_strides = p.edge_strides = FlatStrides();
    p.n_rows = a.n_rows;
    p.n_edges = a.n_edges;
    p.edge_len = a.g_width;
    return LaunchCopyEdgeSum(name, stream, scratch, p);
  });
}

ffi::Error EfeatBwdSrcCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer eid,
                           ffi::AnyBuffer G, ffi::Result<ffi::AnyBuffer> grad, int64_t col) {
  return EfeatBwd(stream, scratch, "jgo_update_efeat_bwd_src", offsets, eid, G, *grad, col);
}

ffi::Error EfeatBwdDstCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer eid,
                           ffi::AnyBuffer G, ffi::Result<ffi::AnyBuffer> grad, int64_t col) {
  return EfeatBwd(stream, scratch, "jgo_update_efeat_bwd_dst", offsets, eid, G, *grad, col);
}

// ---------------------------------------------------------------------------------------
// jgo_update_efeat_bwd_edge: grad[e] = G[e, col : col + width] for the real edges, 0 at the padding edges, the
// forward's way (kInFlight edges' loads before their stores)

// gpu-model: engine mlp>=8 vector-if kVector
template <typename T, typename I, bool kVector>
__global__ void __launch_bounds__(kBlock, 1) EfeatBwdEdgeKernel(EdgeRowsWalk a, EfeatBwdArgs args,
                                                                const I* __restrict__ offsets, const T* __restrict__ G,
                                                                T* __restrict__ grad) {
  constexpr int kV = 16 / int(sizeof(T));
  const Walker w = ThisWalker(a.group);
  const int real = ClampIndex(offsets[args.n_rows], a.n_edges + 1);
  const int64_t units = (int64_t(a.n_edges) + kInFlight - 1) / kInFlight;
  ForEachWalkerTile<kV, kVector>(units, a.tiles, a.width, w, [&](int64_t unit, const auto& lf) {
    const int e0 = static_cast<int>(unit) * kInFlight;
    const LaneRows<kV, kVector, T> rows(G + args.col, static_cast<int>(args.g_width), lf, FlatStrides(),
                                        Dims3{1, 1, a.width}, true);
    T x[kInFlight][kV];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
#pragma unroll
      for (int v = 0; v < kV; ++v) x[u][v] = T(0);
      if (e0 + u < real && (!kVector || lf.ok[0])) rows.Load(e0 + u, lf.ok, x[u]);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
      if (e0 + u < a.n_edges) StoreFeatures<kV, kVector>(grad + int64_t(e0 + u) * a.width, lf, x[u], a.stream);
  });
}

ffi::Error EfeatBwdEdgeCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer G,
                            ffi::Result<ffi::AnyBuffer> grad, int64_t col) {
  constexpr const char* kName = "jgo_update_efeat_bwd_edge";
  auto args = CheckEfeatBwdEdge(offsets, G, *grad, col);
  if (args.has_error()) return args.error();
  const EfeatBwdArgs a = *args;
  if (a.width == 0 || a.n_edges == 0) return ffi::Error::Success();
  if (auto err = EngineSizes(kName, {a.n_edges, a.g_width}); err.failure()) return err;
  return DispatchTypes(G.element_type(), offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    constexpr int kV = 16 / int(sizeof(T));
    EdgeRowsWalk w;
    w.n_edges = static_cast<int>(a.n_edges);
    w.width = static_cast<int>(a.width);
    w.group = WalkerLanes(a.width, kV);
    w.tiles = static_cast<int>((a.width + int64_t(w.group) * kV - 1) / (int64_t(w.group) * kV));
    w.stream = StreamStores(static_cast<int64_t>(grad->size_bytes()));
    const bool vector = a.width % kV == 0 && a.col % kV == 0 && a.g_width % kV == 0 && Aligned(G.untyped_data()) &&
                        Aligned(grad->untyped_data());
    const int64_t walkers = (a.n_edges + kInFlight - 1) / kInFlight * w.tiles;
    return LaunchBlocks(kName, vector ? EfeatBwdEdgeKernel<T, I, true> : EfeatBwdEdgeKernel<T, I, false>,
                        WalkerBlocks(walkers, w.group), 0, stream, w, a, offsets.typed_data<I>(), G.typed_data<T>(),
                        grad->typed_data<T>());
  });
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER(UpdateEfeatFwd, jgo::EfeatFwdCuda, jgo::BindEfeatFwd<jgo::CudaStream>());
JGO_CUDA_HANDLER_NO_TRAITS(UpdateEfeatBwdSrc, jgo::EfeatBwdSrcCuda,
                           jgo::BindEfeatBwd<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER_NO_TRAITS(UpdateEfeatBwdDst, jgo::EfeatBwdDstCuda,
                           jgo::BindEfeatBwd<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER(UpdateEfeatBwdEdge, jgo::EfeatBwdEdgeCuda, jgo::BindEfeatBwdEdge<jgo::CudaStream>());
