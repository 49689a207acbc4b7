// The engine's neighbourhood reduce (chunk_walk.cuh): ReduceKernel and its launcher LaunchReduce, under
// jgo_spmm (every op, reduction, mask and broadcast), pool's segment sums and update_efeat's row sums.
//
// out[r, f] = reduce over the positions k of row r of op(node[nbr[k], f], edge[eid[k], f]), the operands read
// through their strides (NumPy broadcasting of up to three feature axes), as jgo_spmm defines it (jgo/args.h);
// a null nbr makes position k read node row k (pool). A walker of G lanes covers a window of chunks and a tile
// of G * kV features. Each chunk's edges are reduced in position order, so a row of at most 256 edges has the
// bits of a serial walk (the CPU's: products rounded before they are added, jgo/math.h MulRn); a split row's
// chunks leave partials that the last of them folds in chunk order (max/min: the first NaN, else the first
// extreme in position order, as one walk would find). Every output row is written once, by one walker.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/chunk_walk.cuh"
#include "cuda/launch.cuh"
#include "jgo/args.h"
#include "jgo/math.h"

namespace jgo {
inline namespace JGO_CUDA_PLATFORM {

// How the walk reads an operand's features: kVector, contiguous and 16-byte aligned (kV per lane in one
// 128-bit load); else through its strides (broadcasting), kV scalar loads per lane at offsets computed
// once per walker; kStagedEdge: the edge operand is one value per edge (a weight), read by the lane that
// stages the edge and handed to the others with its indices.
struct ReduceWalk {
  int n_rows, n_edges, F, group, tiles, nbr_bound, node_len, edge_len;
  Dims3 dims;
  Strides3 node_strides, edge_strides;
  bool mean, stream;
  int window_shift;  // windows of 2^window_shift coordinates (WindowShift)
  int64_t windows, slot_count, counter_count;
};

// This lane's features f[v] (valid where ok[v]) of tile `tile`: kV adjacent ones on the vector path, every
// group-th one on the strided path.
template <int kV, bool kVector>
struct LaneFeatures {
  int f[kV];
  bool ok[kV];
  int tile;  // the walker's feature tile

  __device__ LaneFeatures(int F, int group, int tile, int lane) : tile(tile) {
    const int f0 = tile * group * kV + (kVector ? lane * kV : lane);
#pragma unroll
    for (int v = 0; v < kV; ++v) {
      f[v] = kVector ? f0 + v : f0 + v * group;
      ok[v] = f[v] < F;
    }
  }
};

// The walker `id` of a launch over units x tiles: its unit (a window of chunks, a group of edges) and feature tile
// (32-bit division: a launch has fewer than 2^31 walkers, EngineSizes).
__device__ __forceinline__ void WindowAndTile(int64_t id, int tiles, int64_t& unit, int& tile) {
  const uint32_t i = static_cast<uint32_t>(id);
  unit = tiles == 1 ? i : i / static_cast<uint32_t>(tiles);
  tile = tiles == 1 ? 0 : static_cast<int>(i - static_cast<uint32_t>(unit) * static_cast<uint32_t>(tiles));
}

// Calls fn(unit, lf) for this thread's walkers of a launch over `units` units times `tiles` tiles of `width`
// features: the walker's unit and this lane's features in its tile.
template <int kV, bool kVector, typename Fn>
__device__ __forceinline__ void ForEachWalkerTile(int64_t units, int tiles, int width, const Walker& w, Fn fn) {
  ForEachWalker(units * tiles, w.group, [&](int64_t id) {
    int64_t unit;
    int tile;
    WindowAndTile(id, tiles, unit, tile);
    fn(unit, LaneFeatures<kV, kVector>(width, w.group, tile, w.lane));
  });
}

// Strides3::offset_of_flat of feature f in 32-bit arithmetic (the engine's sizes are below 2^31): no 64-bit
// division on the device.
__device__ __forceinline__ int FlatOffset(const Strides3& s, const Dims3& d, int f) {
  const uint32_t d1 = static_cast<uint32_t>(d.d1), d2 = static_cast<uint32_t>(d.d2), u = static_cast<uint32_t>(f);
  const uint32_t r = u / d2, i0 = r / d1;
  return static_cast<int>(i0 * s.s0 + (r - i0 * d1) * s.s1 + (u - r * d2) * s.s2);
}

// An operand's rows as this lane reads them: on the vector path `base` points at the lane's first feature
// and a row's kV values are one 128-bit load; on the strided path at the data, with the lane's element
// offsets in a row (through the strides, computed once per walker). A row's address is one 32 x 32 -> 64-bit
// multiply-add of the row id and the row's bytes (IMAD.WIDE.U32).
template <int kV, bool kVector, typename X>
struct LaneRows {
  const char* base;
  uint32_t row_bytes;
  int off[kV];

  __device__ LaneRows(const X* data, int row_len, const LaneFeatures<kV, kVector>& lf, const Strides3& st,
                      const Dims3& dims, bool used)
      : base(reinterpret_cast<const char*>(data + (kVector && lf.ok[0] && used ? lf.f[0] : 0))),
        row_bytes(static_cast<uint32_t>(row_len) * uint32_t(sizeof(X))) {
#pragma unroll
    for (int v = 0; v < kV; ++v)
      off[v] = kVector || !lf.ok[v] || !used ? 0 : FlatOffset(st, dims, lf.f[v]);
  }

  __device__ __forceinline__ const X* Row(int row) const {
    return reinterpret_cast<const X*>(base + MulWide(static_cast<uint32_t>(row), row_bytes));
  }

  // The lane's values of row `row` (the caller predicates the call on the edge counting); LoadAt: of the row's
  // elements from `col` on (a block of a wider row, aligned like the row on the vector path).
  __device__ __forceinline__ void Load(int row, const bool (&ok)[kV], X (&out)[kV]) const { LoadAt(row, 0, ok, out); }

  __device__ __forceinline__ void LoadAt(int row, int col, const bool (&ok)[kV], X (&out)[kV]) const {
    const X* r = Row(row) + col;
    if constexpr (kVector) {
      const Vec<X, kV> x = LoadVec<X, kV>(r);
#pragma unroll
      for (int v = 0; v < kV; ++v) out[v] = x.v[v];
    } else {
#pragma unroll
      for (int v = 0; v < kV; ++v)
        if (ok[v]) out[v] = __ldg(r + off[v]);
    }
  }
};

// Stores the lane's kV values at row[f[v]] (one 128-bit store on the vector path).
template <int kV, bool kVector, typename X>
__device__ __forceinline__ void StoreFeatures(X* __restrict__ row, const LaneFeatures<kV, kVector>& lf,
                                              const X (&x)[kV], bool stream) {
  if constexpr (kVector) {
    Vec<X, kV> out;
#pragma unroll
    for (int v = 0; v < kV; ++v) out.v[v] = x[v];
    if (lf.ok[0]) StoreVec<X, kV>(row + lf.f[0], out, stream);
  } else {
#pragma unroll
    for (int v = 0; v < kV; ++v) {
      if (!lf.ok[v]) continue;
      if (stream) {
        __stcs(row + lf.f[v], x[v]);
      } else {
        row[lf.f[v]] = x[v];
      }
    }
  }
}

// kByPosition: position k reads node row k (pool; no neighbour array).
// MLP floor 7, measured (nvcc 13.0, sm_90, 2026-12-01; 8-48 in most instantiations): the unmasked copy
// sums' gather loop (a lane stages its 8 ids with 8 scalar loads, then 8 128-bit gathers) keeps 7 in
// flight, float32 and float64. 8 there is open work (issue 32). Pool's by-position walk stages nothing (row
// k is position k): 8 in its whole groups, 7 in a chunk's last group (masked).
// gpu-model: engine mlp>=7 vector-if kVector
template <typename T, typename I, Op op, Reduce R, Mask M, bool kVector, bool kStagedEdge, bool kByPosition = false>
__global__ void __launch_bounds__(kBlock, 1) ReduceKernel(ReduceWalk a, const I* __restrict__ offsets,
                                                          const I* __restrict__ nbr, const I* __restrict__ eid,
                                                          const T* __restrict__ node, const T* __restrict__ edge,
                                                          const I* __restrict__ mask_arg, T* __restrict__ out,
                                                          I* __restrict__ arg_out, SplitScratch split) {
  constexpr int kV = 16 / int(sizeof(T));
  using Msg = Message<op>;
  using Red = Reducer<T, R>;
  constexpr bool kEdgeRows = Msg::kEdge && !kStagedEdge;
  constexpr bool kNbr = Msg::kNode || M == Mask::kByNbr;
  constexpr bool kEid = Msg::kEdge || Red::kArg || M != Mask::kNone;
  constexpr bool kEidOut = kEdgeRows || Red::kArg || M != Mask::kNone;  // a staged weight needs its id only to load
  constexpr int kGathers = int(Msg::kNode) + int(kEdgeRows) + int(M == Mask::kByNbr);
  constexpr int kGroup = kGathers > 1 ? kInFlight / 2 : kInFlight;
  static_assert(!kByPosition || (op == Op::kCopyNode && !kEid), "by position: a copy_u sum or mean, unmasked");
  const Walker w = ThisWalker(a.group);
  const Positions<I, T> pos{nbr, eid, edge, a.nbr_bound, a.n_edges, a.edge_len};
  ForEachWalkerTile<kV, kVector>(a.windows, a.tiles, a.F, w, [&](int64_t window, const auto& lf) {
    const LaneRows<kV, kVector, T> nodes(node, a.node_len, lf, a.node_strides, a.dims, Msg::kNode);
    const LaneRows<kV, kVector, T> edges(edge, a.edge_len, lf, a.edge_strides, a.dims, kEdgeRows);
    const LaneRows<kV, kVector, I> masks(mask_arg, a.F, lf, Strides3{0, 0, 1}, Dims3{1, 1, a.F}, M == Mask::kByNbr);
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, a.window_shift, w, [&](const Chunk& c) {
      T acc[kV];
      int arg[kV];
      [[maybe_unused]] int64_t row_mask[kV];  // kByRow only
#pragma unroll
      for (int v = 0; v < kV; ++v) {
        acc[v] = Red::init();
        arg[v] = -1;
        if constexpr (M == Mask::kByRow) row_mask[v] = lf.ok[v] ? mask_arg[int64_t(c.row) * a.F + lf.f[v]] : -2;
      }
      auto group = [&](const Staged<T> (&s)[kGroup], unsigned bits) {
        T xs[kGroup][kV], ys[kGroup][kV];
        [[maybe_unused]] I ms[kGroup][kV];  // masked only
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {  // every load of the group before the first is used
          if (!((bits >> u) & 1u)) continue;
          if constexpr (Msg::kNode) nodes.Load(s[u].j, lf.ok, xs[u]);
          if constexpr (kEdgeRows) edges.Load(s[u].e, lf.ok, ys[u]);
          if constexpr (M == Mask::kByNbr) masks.Load(s[u].j, lf.ok, ms[u]);
        }
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          if (!((bits >> u) & 1u)) continue;
#pragma unroll
          for (int v = 0; v < kV; ++v) {
            const T b = kStagedEdge ? s[u].s : kEdgeRows ? ys[u][v] : T(0);
            const T m = Msg::apply(Msg::kNode ? xs[u][v] : T(0), b);
            if constexpr (M == Mask::kNone) {
              Red::update(acc[v], arg[v], m, s[u].e);
            } else {
              const int64_t winner = M == Mask::kByRow ? row_mask[v] : static_cast<int64_t>(ms[u][v]);
              if (winner == s[u].e) acc[v] += m;
            }
          }
        }
      };
      WalkPositions<kNbr, kEid, kStagedEdge, kGroup, kEidOut, kByPosition>(pos, c.lo, c.hi, w, group);
      if (c.split()) {
        const int64_t slot = PartialSlot(c, a.slot_count);
        T* values = static_cast<T*>(split.values);
        int* args = static_cast<int*>(split.args);
        StoreFeatures<kV, kVector>(values + slot * a.F, lf, acc, false);
        if constexpr (Red::kArg) StoreFeatures<kV, kVector>(args + slot * a.F, lf, arg, false);
        if (!ArriveLast(split.counters + SplitCounter(c, a.counter_count, lf.tile), c, w)) return;
#pragma unroll 1
        for (int q = 0; q < c.count; ++q) {  // the row's partials, in chunk order
          const int64_t at = (slot - c.index + q) * a.F;
#pragma unroll
          for (int v = 0; v < kV; ++v) {
            if (!lf.ok[v]) continue;
            const T part = __ldcg(values + at + lf.f[v]);
            const int part_arg = Red::kArg ? __ldcg(args + at + lf.f[v]) : 0;
            if (q == 0) {
              acc[v] = part;
              arg[v] = part_arg;
            } else if (!Red::kArg) {
              acc[v] += part;
            } else if (part_arg >= 0) {
              Red::update(acc[v], arg[v], part, part_arg);
            }
          }
        }
      }
      T result[kV];
      I result_arg[kV];
      const int count = c.end - c.begin;
#pragma unroll
      for (int v = 0; v < kV; ++v) {
        result[v] = a.mean ? (count > 0 ? acc[v] / static_cast<T>(count) : T(0)) : Red::finalize(acc[v], arg[v], count);
        result_arg[v] = static_cast<I>(arg[v]);
      }
      StoreFeatures<kV, kVector>(out + int64_t(c.row) * a.F, lf, result, a.stream);
      if constexpr (Red::kArg) StoreFeatures<kV, kVector>(arg_out + int64_t(c.row) * a.F, lf, result_arg, a.stream);
    });
  });
}

template <typename T, typename I>
using ReduceKernelFn = void (*)(ReduceWalk, const I*, const I*, const I*, const T*, const T*, const I*, T*, I*,
                              SplitScratch);

// The kernel of a reduce and mask: the vector path where both operands allow it, else the strided one.
template <typename T, typename I, Op op, Reduce R, Mask M>
ReduceKernelFn<T, I> PickReducePath(bool vector, bool staged_edge) {
  if constexpr (Message<op>::kNode && Message<op>::kEdge) {
    if (vector && staged_edge) return ReduceKernel<T, I, op, R, M, true, true>;
  }
  return vector ? ReduceKernel<T, I, op, R, M, true, false> : ReduceKernel<T, I, op, R, M, false, false>;
}

template <typename T, typename I, Op op>
ReduceKernelFn<T, I> PickReduceMode(Reduce reduce, Mask mask, bool vector, bool staged_edge) {
  switch (mask) {
    case Mask::kByRow: return PickReducePath<T, I, op, Reduce::kSum, Mask::kByRow>(vector, staged_edge);
    case Mask::kByNbr: return PickReducePath<T, I, op, Reduce::kSum, Mask::kByNbr>(vector, staged_edge);
    case Mask::kNone: break;
  }
  switch (reduce) {
    case Reduce::kMax: return PickReducePath<T, I, op, Reduce::kMax, Mask::kNone>(vector, staged_edge);
    case Reduce::kMin: return PickReducePath<T, I, op, Reduce::kMin, Mask::kNone>(vector, staged_edge);
    case Reduce::kSum:
    case Reduce::kMean: break;  // a mean is the sum divided at the end
  }
  return PickReducePath<T, I, op, Reduce::kSum, Mask::kNone>(vector, staged_edge);
}

template <typename T, typename I>
ReduceKernelFn<T, I> PickReduce(Op op, Reduce reduce, Mask mask, bool vector, bool staged_edge) {
  switch (op) {
    case Op::kCopyNode: return PickReduceMode<T, I, Op::kCopyNode>(reduce, mask, vector, false);
    case Op::kCopyEdge: return PickReduceMode<T, I, Op::kCopyEdge>(reduce, mask, vector, false);
    case Op::kAdd: return PickReduceMode<T, I, Op::kAdd>(reduce, mask, vector, staged_edge);
    case Op::kMul: break;
  }
  return PickReduceMode<T, I, Op::kMul>(reduce, mask, vector, staged_edge);
}


// Whether strides read a row's F features contiguously from its first element (no broadcasting).
inline bool Contiguous(const Strides3& s, const Dims3& d) {
  return (d.d2 == 1 || s.s2 == 1) && (d.d1 == 1 || s.s1 == d.d2) && (d.d0 == 1 || s.s0 == d.d1 * d.d2);
}
inline bool Aligned(const void* data) { return reinterpret_cast<uintptr_t>(data) % 16 == 0; }

// One neighbourhood reduce (see the top of the file): the grouping (nbr null: position k reads node row k, for a
// copy_u sum or mean without mask),
// the operands with their row lengths and strides over dims, an optional mask (jgo/math.h), the outputs.
template <typename T, typename I>
struct ReduceProblem : SpmmArgs {  // the operation and its shape, and the device pointers
  const I* offsets = nullptr;
  const I* nbr = nullptr;
  const I* eid = nullptr;
  const T* node = nullptr;
  const T* edge = nullptr;
  const I* mask_arg = nullptr;
  T* out = nullptr;
  I* arg_out = nullptr;  // max/min: the winning edge ids
};

// The strides of a row of F contiguous features viewed as dims [1, 1, F].
JGO_HD Strides3 FlatStrides() { return Strides3{0, 0, 1}; }

// Launches the ReduceKernel pick(vector, staged_edge) returns over the problem's windows and feature tiles, with
// the scratch of its split rows. A file compiles the kernels its pick names: LaunchReduce's, every one jgo_spmm
// may run; LaunchCopyEdgeSum's, the two of a copy_e sum.
template <typename T, typename I, typename Pick>
ffi::Error LaunchReduceWith(const char* name, cudaStream_t stream, CudaScratch& scratch, const ReduceProblem<T, I>& p,
                            Pick pick) {
  constexpr int kV = 16 / int(sizeof(T));
  const int64_t F = p.dims.size();
  if (F == 0 || p.n_rows == 0) return ffi::Error::Success();
  if (auto err = EngineSizes(name, {p.n_rows, p.n_edges, F, p.node_len, p.edge_len, p.node_rows}); err.failure())
    return err;
  const bool uses_node = p.op != Op::kCopyEdge, uses_edge = p.op != Op::kCopyNode;
  const bool staged_edge = uses_edge && uses_node && p.edge_strides.s0 == 0 && p.edge_strides.s1 == 0 &&
                           p.edge_strides.s2 == 0;
  auto rows_fit = [&](const Strides3& s, int64_t len, const void* data) {
    return Contiguous(s, p.dims) && len % kV == 0 && Aligned(data);
  };
  const bool vector = F % kV == 0 && (!uses_node || rows_fit(p.node_strides, p.node_len, p.node)) &&
                      (!uses_edge || staged_edge || rows_fit(p.edge_strides, p.edge_len, p.edge)) && Aligned(p.out) &&
                      (p.mask == Mask::kNone || Aligned(p.mask_arg));
  ReduceWalk w;
  w.n_rows = static_cast<int>(p.n_rows);
  w.n_edges = static_cast<int>(p.n_edges);
  w.F = static_cast<int>(F);
  w.group = WalkerLanes(F, kV);
  w.tiles = static_cast<int>((F + int64_t(w.group) * kV - 1) / (int64_t(w.group) * kV));
  w.nbr_bound = static_cast<int>(std::min<int64_t>(p.nbr_bound, kMaxIndex));
  w.node_len = static_cast<int>(p.node_len);
  w.edge_len = static_cast<int>(p.edge_len);
  w.dims = p.dims;
  w.node_strides = p.node_strides;
  w.edge_strides = p.edge_strides;
  w.mean = p.reduce == Reduce::kMean;
  w.stream = StreamStores(p.n_rows * F * int64_t(sizeof(T)));
  w.window_shift = WindowShift(p.n_rows, p.n_edges, int64_t(w.tiles) * w.group);
  w.windows = Windows(p.n_rows, p.n_edges, w.window_shift);
  if (auto err = EngineSizes(name, {w.windows * w.tiles}); err.failure()) return err;
  const bool want_arg = p.reduce == Reduce::kMax || p.reduce == Reduce::kMin;
  auto split = SplitScratchFor(name, scratch, stream, p.n_edges, F, sizeof(T), want_arg, w.tiles);
  if (split.has_error()) return split.error();
  w.slot_count = SplitScratch::SlotCount(p.n_edges);
  w.counter_count = SplitScratch::CounterCount(p.n_edges);
  const ReduceKernelFn<T, I> kernel = pick(vector, staged_edge);
  return LaunchBlocks(name, kernel,
                      WalkerBlocks(w.windows * w.tiles, w.group), 0, stream, w, p.offsets, p.nbr, p.eid, p.node, p.edge,
                      p.mask_arg, p.out, want_arg ? p.arg_out : nullptr, *split);
}

// Any reduce of jgo_spmm, or pool's (nbr null: position k reads row k, a copy_u sum or mean without mask).
template <typename T, typename I>
ffi::Error LaunchReduce(const char* name, cudaStream_t stream, CudaScratch& scratch, const ReduceProblem<T, I>& p) {
  return LaunchReduceWith(name, stream, scratch, p, [&](bool vector, bool staged_edge) -> ReduceKernelFn<T, I> {
    if (p.nbr == nullptr) {
      return vector ? ReduceKernel<T, I, Op::kCopyNode, Reduce::kSum, Mask::kNone, true, false, true>
                    : ReduceKernel<T, I, Op::kCopyNode, Reduce::kSum, Mask::kNone, false, false, true>;
    }
    return PickReduce<T, I>(p.op, p.reduce, p.mask, vector, staged_edge);
  });
}

// p as a copy_e sum without mask (its op, reduction and mask set so): the kernels PickReduce gives it, no other.
template <typename T, typename I>
ffi::Error LaunchCopyEdgeSum(const char* name, cudaStream_t stream, CudaScratch& scratch, ReduceProblem<T, I> p) {
  p.op = Op::kCopyEdge;
  p.reduce = Reduce::kSum;
  p.mask = Mask::kNone;
  return LaunchReduceWith(name, stream, scratch, p, [](bool vector, bool) {
    return PickReducePath<T, I, Op::kCopyEdge, Reduce::kSum, Mask::kNone>(vector, false);
  });
}

}  // namespace JGO_CUDA_PLATFORM
}  // namespace jgo
