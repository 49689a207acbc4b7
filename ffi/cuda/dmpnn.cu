// CUDA handlers of Chemprop's directed bond message (agg_dmpnn): jgo_dmpnn_fwd and jgo_dmpnn_bwd.
// Same operands, attribute and results as the CPU twin (cpu/dmpnn.cc), same math and checks
// (jgo/dmpnn.h).
//
// One kernel serves both passes (the backward is the forward on the reverse graph). On the chunked row-walk
// engine (chunk_walk.cuh): walkers over the chunks of the summed grouping, lanes over the D columns (kV per
// lane in 128-bit loads). A node of at most 256 summed edges adds them in position order (the CPU's bits) and,
// when it has at most 256 written edges too, writes them itself from registers: out[e] = S - x[rev e] (plus
// the own block), no [n, D] buffer. A node of more summed edges leaves one partial per chunk, which the last
// of its chunks to finish folds in chunk order (no floating-point atomics); a node of more written edges
// leaves its sum in scratch memory, and a second launch over the written grouping's chunks writes its edges,
// at most 256 per walker. Offsets are clamped and edge ids out of range skipped, so no kernel reads or writes
// out of bounds; the result is zero-filled first, for the rows a malformed grouping never names, unless the
// graph was checked (jgo/args.h: then the kernel writes the padding edges' zeros itself). An edge whose
// rev entry lies outside [-1, E) or breaks the involution (rev[rev[e]] != e) gets NaN in its written block:
// the CUDA kernels cannot raise.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/chunk_walk.cuh"
#include "cuda/launch.cuh"
#include "cuda/walk_reduce.cuh"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/dmpnn.h"

namespace jgo {
namespace {

struct DmpnnWalk {
  int n_nodes, n_edges, D, group, tiles, in_len, out_len;
  bool stream, tail;  // tail: write the padding edges' zeros (a checked graph: no zero fill first)
  int window_shift;  // windows of 2^window_shift coordinates (WindowShift)
  int64_t windows, slot_count, counter_count;
};

// The sums of the nodes whose written edges a second launch writes: one row per key floor(out_begin / 256),
// which such nodes (more than 256 written edges) never share; `pending` says whether any node left one.
template <typename T>
struct DmpnnSums {
  T* rows;
  int* pending;
};

__device__ __forceinline__ int64_t SumKey(int out_begin) { return out_begin >> kChunkShift; }

// Writes the edges of positions [lo, hi) of the written grouping of a node whose sum (the lane's columns) is
// `sum`: out[e] = S - x[rev e], or NaN for an invalid rev entry, with the own block (forward: h[e] copied after
// it; backward: G's own block added). kInFlight rev entries, then their rows, are loaded before any store.
template <bool kFwd, bool kOwn, bool kVector, int kV, typename T, typename I>
__device__ __forceinline__ void WriteMessages(const DmpnnWalk& a, const LaneFeatures<kV, kVector>& lf,
                                              const LaneRows<kV, kVector, T>& xs, const LaneRows<kV, kVector, T>& owns,
                                              const T (&sum)[kV], int lo, int hi, const I* __restrict__ out_eid,
                                              const I* __restrict__ rev, T* __restrict__ y, const Walker& w) {
  constexpr int kGroup = kOwn ? kInFlight / 2 : kInFlight;
  const Positions<I, T> pos{nullptr, out_eid, nullptr, 0, a.n_edges, 0};
  WalkPositions<false, true, false, kGroup>(pos, lo, hi, w, [&](const Staged<T> (&st)[kGroup], unsigned bits) {
    I raw[kGroup];
    int r[kGroup];
    unsigned has = 0, valid = 0;
#pragma unroll
    for (int u = 0; u < kGroup; ++u) raw[u] = (bits >> u) & 1u ? rev[st[u].e] : I(-1);
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {  // rev[e] = -1, or in range with rev[rev[e]] == e (DmpnnRevValid)
      const bool in = InBound(raw[u], a.n_edges);
      r[u] = in ? static_cast<int>(raw[u]) : 0;
      has |= unsigned(in) << u;
      valid |= unsigned(raw[u] == I(-1) || (in && rev[r[u]] == static_cast<I>(st[u].e))) << u;
    }
    T back[kGroup][kV], own[kGroup][kV];
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
      if (!((bits >> u) & 1u)) continue;
      if ((has >> u) & 1u) xs.Load(r[u], lf.ok, back[u]);
      if constexpr (kOwn) owns.Load(st[u].e, lf.ok, own[u]);
    }
#pragma unroll
    for (int u = 0; u < kGroup; ++u) {
      if (!((bits >> u) & 1u)) continue;
      T m[kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) {
        m[v] = (valid >> u) & 1u ? DmpnnMessage(sum[v], (has >> u) & 1u ? back[u][v] : T(0), (has >> u) & 1u)
                                 : DmpnnPoison<T>();
        if constexpr (kOwn && !kFwd) m[v] += own[u][v];  // G's own block
      }
      T* row = y + int64_t(st[u].e) * a.out_len;
      StoreFeatures<kV, kVector>(row, lf, m, a.stream);
      if constexpr (kOwn && kFwd) StoreFeatures<kV, kVector>(row + a.D, lf, own[u], a.stream);  // [m | h]
    }
  });
}

// The rows of x the kernels read: its first D columns (h, or G's m block), and the own block (forward: h itself;
// backward: G's columns [D, 2D)).
template <bool kFwd, int kV, bool kVector, typename T>
__device__ __forceinline__ LaneRows<kV, kVector, T> OwnRows(const DmpnnWalk& a, const T* x,
                                                            const LaneFeatures<kV, kVector>& lf) {
  return LaneRows<kV, kVector, T>(kFwd ? x : x + a.D, a.in_len, lf, FlatStrides(), Dims3{1, 1, a.D}, true);
}

// MLP floor 2, measured (nvcc 13.0, sm_90, 2026-11-29; 8-32 in float32): float64 on the vector path keeps
// 2 loads in flight with int64 ids, 3 with int32 ids and the own block, 7 without. 8 there is open work
// (issue 32).
// gpu-model: engine mlp>=2 vector-if kVector
template <typename T, typename I, bool kFwd, bool kOwn, bool kVector>
__global__ void __launch_bounds__(kBlock, 1) DmpnnKernel(DmpnnWalk a, const I* __restrict__ in_off,
                                                         const I* __restrict__ in_eid, const I* __restrict__ out_off,
                                                         const I* __restrict__ out_eid, const I* __restrict__ rev,
                                                         const T* __restrict__ x, T* __restrict__ y, SplitScratch split,
                                                         DmpnnSums<T> sums) {
  constexpr int kV = 16 / int(sizeof(T));
  const Walker w = ThisWalker(a.group);
  const Positions<I, T> pos{nullptr, in_eid, nullptr, 0, a.n_edges, 0};
  ForEachWalkerTile<kV, kVector>(a.windows, a.tiles, a.D, w, [&](int64_t window, const auto& lf) {
    const LaneRows<kV, kVector, T> xs(x, a.in_len, lf, FlatStrides(), Dims3{1, 1, a.D}, true);
    const LaneRows<kV, kVector, T> owns = OwnRows<kFwd>(a, x, lf);
    if (a.tail) {
      ForEachTailPosition(out_off, a.n_nodes, a.n_edges, window, a.window_shift, [&](int k) {
        const T zero[kV] = {};
        for (int col = 0; col < a.out_len; col += a.D)
          StoreFeatures<kV, kVector>(y + int64_t(k) * a.out_len + col, lf, zero, a.stream);
      });
    }
    ForEachChunk(in_off, a.n_nodes, a.n_edges, window, a.window_shift, w, [&](const Chunk& c) {
      T acc[kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) acc[v] = T(0);
      WalkPositions<false, true, false, kInFlight>(pos, c.lo, c.hi, w, [&](const Staged<T> (&st)[kInFlight],
                                                                           unsigned bits) {
        T rows[kInFlight][kV];
#pragma unroll
        for (int u = 0; u < kInFlight; ++u)
          if ((bits >> u) & 1u) xs.Load(st[u].e, lf.ok, rows[u]);
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) {
          if (!((bits >> u) & 1u)) continue;
#pragma unroll
          for (int v = 0; v < kV; ++v) acc[v] += rows[u][v];
        }
      });
      if (c.split()) {
        const int64_t slot = PartialSlot(c, a.slot_count);
        T* values = static_cast<T*>(split.values);
        StoreFeatures<kV, kVector>(values + slot * a.D, lf, acc, false);
        if (!ArriveLast(split.counters + SplitCounter(c, a.counter_count, lf.tile), c, w)) return;
#pragma unroll 1
        for (int q = 0; q < c.count; ++q) {  // the node's partials, in chunk order
#pragma unroll
          for (int v = 0; v < kV; ++v) {
            if (!lf.ok[v]) continue;
            const T part = __ldcg(values + (slot - c.index + q) * a.D + lf.f[v]);
            acc[v] = q == 0 ? part : acc[v] + part;
          }
        }
      }
      const int o0 = ClampIndex(out_off[c.row], a.n_edges + 1);
      const int o1 = Max(o0, ClampIndex(out_off[c.row + 1], a.n_edges + 1));
      if (o1 - o0 <= kChunk) {
        WriteMessages<kFwd, kOwn>(a, lf, xs, owns, acc, o0, o1, out_eid, rev, y, w);
        return;
      }
      StoreFeatures<kV, kVector>(sums.rows + Min<int64_t>(SumKey(o0), a.counter_count - 1) * a.D, lf, acc, false);
      if (w.lane == 0) atomicExch(sums.pending, 1);
    });
  });
}

// The written edges of the nodes that left their sums to DmpnnKernel's scratch: the chunks of the written
// grouping, at most 256 edges a walker.
// MLP floor 2, measured (nvcc 13.0, sm_90, 2026-11-29; 8-32 in float32): float64 on the vector path keeps
// 2-3 loads in flight (2 with int64 ids). 8 there is open work (issue 32).
// gpu-model: engine mlp>=2 vector-if kVector
template <typename T, typename I, bool kFwd, bool kOwn, bool kVector>
__global__ void __launch_bounds__(kBlock, 1) DmpnnWideKernel(DmpnnWalk a, const I* __restrict__ out_off,
                                                             const I* __restrict__ out_eid, const I* __restrict__ rev,
                                                             const T* __restrict__ x, T* __restrict__ y,
                                                             DmpnnSums<T> sums) {
  constexpr int kV = 16 / int(sizeof(T));
  if (*sums.pending == 0) return;  // no node of more than 256 written edges: every walker returns here
  const Walker w = ThisWalker(a.group);
  ForEachWalkerTile<kV, kVector>(a.windows, a.tiles, a.D, w, [&](int64_t window, const auto& lf) {
    const LaneRows<kV, kVector, T> xs(x, a.in_len, lf, FlatStrides(), Dims3{1, 1, a.D}, true);
    const LaneRows<kV, kVector, T> owns = OwnRows<kFwd>(a, x, lf);
    ForEachChunk(out_off, a.n_nodes, a.n_edges, window, a.window_shift, w, [&](const Chunk& c) {
      if (c.end - c.begin <= kChunk) return;  // written by DmpnnKernel
      T sum[kV] = {};
      const int key = static_cast<int>(Min<int64_t>(SumKey(c.begin), a.counter_count - 1));
#pragma unroll
      for (int v = 0; v < kV; ++v)
        if (lf.ok[v]) sum[v] = __ldcg(sums.rows + int64_t(key) * a.D + lf.f[v]);
      WriteMessages<kFwd, kOwn>(a, lf, xs, owns, sum, c.lo, c.hi, out_eid, rev, y, w);
    });
  });
}

template <typename T, typename I>
ffi::Error DmpnnTyped(cudaStream_t stream, CudaScratch& scratch, DmpnnPass pass, const DmpnnArgs& a,
                      ffi::AnyBuffer in_offsets, ffi::AnyBuffer in_eid, ffi::AnyBuffer out_offsets,
                      ffi::AnyBuffer out_eid, ffi::AnyBuffer rev, ffi::AnyBuffer x, ffi::AnyBuffer y, bool checked) {
  constexpr int kV = 16 / int(sizeof(T));
  const bool fwd = pass == DmpnnPass::kFwd;
  const char* name = fwd ? "jgo_dmpnn_fwd" : "jgo_dmpnn_bwd";
  if (!checked || a.n_nodes == 0) {  // groupings that are no permutation may leave rows unnamed: 0 there
    if (auto err = ZeroFill(name, y.untyped_data(), y.size_bytes(), stream); err.failure()) return err;
  }
  if (a.dim == 0 || a.n_nodes == 0) return ffi::Error::Success();
  if (auto err = EngineSizes(name, {a.n_nodes, a.n_edges, a.in_len, a.out_len}); err.failure()) return err;
  DmpnnWalk w;
  w.n_nodes = static_cast<int>(a.n_nodes);
  w.n_edges = static_cast<int>(a.n_edges);
  w.D = static_cast<int>(a.dim);
  w.in_len = static_cast<int>(a.in_len);
  w.out_len = static_cast<int>(a.out_len);
  w.group = WalkerLanes(a.dim, kV);
  w.tiles = static_cast<int>((a.dim + int64_t(w.group) * kV - 1) / (int64_t(w.group) * kV));
  w.stream = StreamStores(static_cast<int64_t>(y.size_bytes()));
  w.tail = checked;
  w.window_shift = WindowShift(a.n_nodes, a.n_edges, int64_t(w.tiles) * w.group);
  w.windows = Windows(a.n_nodes, a.n_edges, w.window_shift);
  w.slot_count = SplitScratch::SlotCount(a.n_edges);
  w.counter_count = SplitScratch::CounterCount(a.n_edges);
  if (auto err = EngineSizes(name, {w.windows * w.tiles}); err.failure()) return err;
  const bool vector = a.dim % kV == 0 && a.in_len % kV == 0 && a.out_len % kV == 0 && Aligned(x.untyped_data()) &&
                      Aligned(y.untyped_data());
  auto split = SplitScratchFor(name, scratch, stream, a.n_edges, a.dim, sizeof(T), false, w.tiles);
  if (split.has_error()) return split.error();
  DmpnnSums<T> sums{nullptr, nullptr};
  if (SplitScratch::Needed(a.n_edges)) {
    const int64_t bytes = w.counter_count * a.dim * int64_t(sizeof(T));
    auto mem = ScratchBytes(scratch, static_cast<size_t>(bytes + 256), 256);
    if (!mem.has_value()) return ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": out of scratch memory");
    sums.pending = static_cast<int*>(*mem);
    sums.rows = reinterpret_cast<T*>(static_cast<char*>(*mem) + 256);
    if (auto err = Status(name, cudaMemsetAsync(sums.pending, 0, sizeof(int), stream)); err.failure()) return err;
  }
  auto pick = [&](auto kernel_of) { return WithFlags(fwd, a.concat_own, kernel_of); };
  const I* io = in_offsets.typed_data<I>();
  const I* ie = in_eid.typed_data<I>();
  const I* oo = out_offsets.typed_data<I>();
  const I* oe = out_eid.typed_data<I>();
  const I* rv = rev.typed_data<I>();
  const T* xd = x.typed_data<T>();
  T* yd = y.typed_data<T>();
  const int64_t blocks = WalkerBlocks(w.windows * w.tiles, w.group);
  auto err = pick([&](auto f, auto o) {
    constexpr bool F = decltype(f)::value, O = decltype(o)::value;
    return LaunchBlocks(name, vector ? DmpnnKernel<T, I, F, O, true> : DmpnnKernel<T, I, F, O, false>, blocks, 0,
                        stream, w, io, ie, oo, oe, rv, xd, yd, *split, sums);
  });
  if (err.failure() || sums.pending == nullptr) return err;
  return pick([&](auto f, auto o) {
    constexpr bool F = decltype(f)::value, O = decltype(o)::value;
    return LaunchBlocks(name, vector ? DmpnnWideKernel<T, I, F, O, true> : DmpnnWideKernel<T, I, F, O, false>, blocks,
                        0, stream, w, oo, oe, rv, xd, yd, static_cast<DmpnnSums<T>>(sums));
  });
}

ffi::Error Dmpnn(DmpnnPass pass, cudaStream_t stream, CudaScratch& scratch, ffi::AnyBuffer in_offsets,
                 ffi::AnyBuffer in_eid, ffi::AnyBuffer out_offsets, ffi::AnyBuffer out_eid, ffi::AnyBuffer rev,
                 ffi::AnyBuffer x, ffi::AnyBuffer y, bool concat_own, bool checked) {
  auto args = CheckDmpnn(pass, in_offsets, in_eid, out_offsets, out_eid, rev, x, y, concat_own);
  if (args.has_error()) return args.error();
  return DispatchTypes(x.element_type(), in_offsets.element_type(), [&](auto t, auto i) {
    return DmpnnTyped<decltype(t), decltype(i)>(stream, scratch, pass, *args, in_offsets, in_eid, out_offsets, out_eid,
                                                rev, x, y, checked);
  });
}

ffi::Error DmpnnFwdCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer in_offsets, ffi::AnyBuffer in_eid,
                        ffi::AnyBuffer out_offsets, ffi::AnyBuffer out_eid, ffi::AnyBuffer rev, ffi::AnyBuffer h,
                        ffi::Result<ffi::AnyBuffer> out, bool concat_own, bool checked) {
  return Dmpnn(DmpnnPass::kFwd, stream, scratch, in_offsets, in_eid, out_offsets, out_eid, rev, h, *out, concat_own,
               checked);
}

ffi::Error DmpnnBwdCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer in_offsets, ffi::AnyBuffer in_eid,
                        ffi::AnyBuffer out_offsets, ffi::AnyBuffer out_eid, ffi::AnyBuffer rev, ffi::AnyBuffer G,
                        ffi::Result<ffi::AnyBuffer> grad_h, bool concat_own, bool checked) {
  return Dmpnn(DmpnnPass::kBwd, stream, scratch, in_offsets, in_eid, out_offsets, out_eid, rev, G, *grad_h, concat_own,
               checked);
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER_NO_TRAITS(DmpnnFwd, jgo::DmpnnFwdCuda, jgo::BindDmpnn<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER_NO_TRAITS(DmpnnBwd, jgo::DmpnnBwdCuda, jgo::BindDmpnn<jgo::CudaStream, jgo::CudaScratch>());
