// CUDA handlers of RGCN's relational aggregation: jgo_hg_basis_norm, jgo_hg_basis_fwd and
// jgo_hg_basis_bwd_src. Same operands, attributes and results as the CPU twin (cpu/hg_basis.cc),
// same per-edge math and shape checks (jgo/hg_basis.h).
//
// The forward and the backward run on the chunked row-walk engine (cuda/chunk_walk.cuh): the forward
// accumulates a row's K x D output blocks in registers, kHgBlocks at a time, and writes them once; the
// backward walks the reverse CSR with grad_x_j in registers and writes each edge's dots w_e <G_i[b], x_j>
// once, which a second pass sums per edge type in edge order (per block of edges, then over the blocks in
// order): no floating-point atomics, no per-edge read-modify-write of global memory, bitwise reproducible.
// The per-relation counts of jgo_hg_basis_norm are integer atomics in a per-warp array of R counters
// (touched only at the row's types, reset after the row; a block's, for rows of more than kHgWideRow
// in-edges): no [n_dst, R] table.
//
// Index values: edges whose neighbour id, edge id or edge type is out of range are skipped (they
// contribute nothing; w of an edge with a bad type is 0) and offsets are clamped, so no kernel
// reads or writes out of bounds. The CPU handlers reject them instead.
//
// Compile check (zero warnings), from the repository root, on one line:
//   nvcc -std=c++17 -O3 -Xcompiler -fPIC -Xcompiler -Wall,-Wextra --Werror all-warnings
//     --generate-code=arch=compute_90,code=sm_90
//     -Iffi -Iffi/common -isystem third_party/xla_ffi
//     -DJGO_WITH_CUDA -c ffi/cuda/hg_basis.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/chunk_walk.cuh"
#include "cuda/launch.cuh"
#include "cuda/walk_reduce.cuh"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/hg_basis.h"

namespace jgo {
namespace {

constexpr int64_t kHgMaxBlocks = 1024;
constexpr int64_t kHgWideBlocks = 132;  // blocks of the norm's wide rows: about one per multiprocessor
constexpr int64_t kHgScratchElements = int64_t(1) << 22;  // bounds the norm's per-warp counters

// The walk of one structure by groups of `width` lanes: group index, lane, and the first row and the
// stride of the group's grid-stride loop.
struct GroupWalk {
  int width;
  int64_t lane, worker, workers;
};

__device__ __forceinline__ GroupWalk Walk(int width) {
  const int64_t groups = blockDim.x / width;
  GroupWalk w;
  w.width = width;
  w.lane = threadIdx.x % width;
  w.worker = blockIdx.x * groups + threadIdx.x / width;
  w.workers = gridDim.x * groups;
  return w;
}

// out[i] = sum_{p < parts} part[p * len + i] for i < len: partials reduced in a fixed order.
template <typename T>
__global__ void HgSumPartialsKernel(const T* part, int64_t parts, int64_t len, T* out) {
  for (int64_t i = ThreadIndex(); i < len; i += ThreadCount()) {
    T s = T(0);
    for (int64_t p = 0; p < parts; ++p) s += part[p * len + i];
    out[i] = s;
  }
}

// Scratch of `count` elements of T, zeroed on the stream.
template <typename T>
ffi::ErrorOr<T*> ZeroScratch(CudaScratch& scratch, int64_t count, cudaStream_t stream, const char* name) {
  if (count == 0) return static_cast<T*>(nullptr);
  auto p = ScratchBytes(scratch, sizeof(T) * count, alignof(T));
  if (!p.has_value())
    return ffi::Unexpected(ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": out of scratch memory"));
  if (cudaMemsetAsync(*p, 0, sizeof(T) * count, stream) != cudaSuccess)
    return ffi::Unexpected(ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": cudaMemsetAsync failed"));
  return static_cast<T*>(*p);
}

// Blocks for `rows` rows walked by groups of `width` lanes, at most kHgMaxBlocks, and few enough that
// the groups' scratch (`per_group` elements each) stays under kHgScratchElements (at least one block).
inline int64_t HgBlocks(int64_t rows, int width, int64_t per_group) {
  const int64_t groups = kBlock / width;
  int64_t blocks = std::min<int64_t>((rows + groups - 1) / groups, kHgMaxBlocks);
  if (per_group > 0) blocks = std::min<int64_t>(blocks, std::max<int64_t>(1, kHgScratchElements / (groups * per_group)));
  return std::max<int64_t>(blocks, rows > 0 ? 1 : 0);
}

// ---------------------------------------------------------------------------------------
// jgo_hg_basis_norm: one warp per destination row, a block per row of more than kHgWideRow in-edges; R counters
// per warp or block

constexpr int64_t kHgWideRow = 1024;

// The three passes of `threads` threads (this one: `lane`) over positions [begin, end) of a row: count the row's
// types, write each edge's weight 1 / count, reset the counts; `sync` orders each pass before the next.
template <typename T, typename I, typename Sync>
__device__ __forceinline__ void NormRow(const HgBasisArgs& a, int64_t begin, int64_t end, int64_t lane,
                                        int64_t threads, const I* eid, const I* types, T* w, int* count, Sync sync) {
  for (int pass = 0; pass < 3; ++pass) {
    for (int64_t k = begin + lane; k < end; k += threads) {
      const int64_t e = eid[k];
      if (!InRange(e, a.n_edges)) continue;
      const int64_t t = types[e];
      if (!InRange(t, a.n_types)) continue;
      if (pass == 1) {
        w[e] = HgBasisNorm<T>(count[t]);
      } else {
        atomicAdd(count + t, pass == 0 ? 1 : -1);
      }
    }
    sync();
  }
}

template <typename T, typename I>
__global__ void HgNormKernel(HgBasisArgs a, const I* offsets, const I* eid, const I* types, T* w, int* counters) {
  const GroupWalk g = Walk(kWarp);
  const unsigned mask = GroupMask(kWarp);
  int* count = counters + g.worker * a.n_types;
  for (int64_t r = g.worker; r < a.n_rows; r += g.workers) {
    const int64_t begin = Clamp(offsets[r], 0, a.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, a.n_edges);
    if (end - begin > kHgWideRow) continue;  // HgNormWideKernel's
    NormRow(a, begin, end, g.lane, kWarp, eid, types, w, count, [&] { __syncwarp(mask); });
  }
}

// The rows of more than kHgWideRow in-edges, a block each: each block's threads look at 256 rows at once and list
// the wide ones in shared memory ([kBlock + 1] ints), then walk them one after the other.
template <typename T, typename I>
__global__ void HgNormWideKernel(HgBasisArgs a, const I* offsets, const I* eid, const I* types, T* w, int* counters) {
  int* wide = SharedMemory<int>();  // [0]: how many; [1 + q]: the q-th wide row's place among the 256
  int* count = counters + int64_t(blockIdx.x) * a.n_types;
  for (int64_t r0 = int64_t(blockIdx.x) * blockDim.x; r0 < a.n_rows; r0 += int64_t(gridDim.x) * blockDim.x) {
    if (threadIdx.x == 0) wide[0] = 0;
    __syncthreads();
    const int64_t r = r0 + threadIdx.x;
    if (r < a.n_rows) {
      const int64_t begin = Clamp(offsets[r], 0, a.n_edges);
      if (Clamp(offsets[r + 1], begin, a.n_edges) - begin > kHgWideRow) wide[1 + atomicAdd(wide, 1)] = threadIdx.x;
    }
    __syncthreads();
    const int n_wide = wide[0];
    for (int q = 0; q < n_wide; ++q) {  // each row's weights are exact integer counts: any order of rows
      const int64_t row = r0 + wide[1 + q];
      const int64_t begin = Clamp(offsets[row], 0, a.n_edges);
      const int64_t end = Clamp(offsets[row + 1], begin, a.n_edges);
      NormRow(a, begin, end, threadIdx.x, blockDim.x, eid, types, w, count, [] { __syncthreads(); });
    }
    __syncthreads();  // every thread has read wide[] before the next round resets it
  }
}

ffi::Error HgBasisNormCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                           ffi::AnyBuffer eid, ffi::AnyBuffer types, ffi::Result<ffi::AnyBuffer> w, int64_t n_types) {
  const char* name = "jgo_hg_basis_norm";
  auto args = CheckHgBasis(HgBasisPass::kNorm, offsets, nbr, eid, nullptr, types, nullptr, nullptr, nullptr, nullptr,
                           n_types, false, true, false);
  if (args.has_error()) return args.error();
  const HgBasisArgs& a = *args;
  if (auto err = CheckHgBasisNormResult(a, *w); err.failure()) return err;
  // edges skipped (bad edge id or type) keep w = 0
  if (auto err = ZeroFill(name, w->untyped_data(), w->size_bytes(), stream); err.failure()) return err;
  const int64_t blocks = HgBlocks(a.n_rows, kWarp, a.n_types);
  if (blocks == 0) return ffi::Error::Success();
  const int64_t wide_blocks = std::min<int64_t>(HgBlocks(a.n_rows, kBlock, a.n_types), kHgWideBlocks);
  auto counters = ZeroScratch<int>(scratch, (blocks * (kBlock / kWarp) + wide_blocks) * a.n_types, stream, name);
  if (counters.has_error()) return counters.error();
  int* wide_counters = *counters + blocks * (kBlock / kWarp) * a.n_types;
  return DispatchTypes(w->element_type(), offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    auto err = LaunchBlocks(name, HgNormKernel<T, I>, blocks, 0, stream, a, offsets.typed_data<I>(),
                            eid.typed_data<I>(), types.typed_data<I>(), w->typed_data<T>(), *counters);
    if (err.failure() || a.n_edges <= kHgWideRow) return err;
    return LaunchBlocks(name, HgNormWideKernel<T, I>, wide_blocks, (kBlock + 1) * sizeof(int), stream, a,
                        offsets.typed_data<I>(), eid.typed_data<I>(), types.typed_data<I>(), w->typed_data<T>(),
                        wide_counters);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_hg_basis_fwd on the engine (cuda/chunk_walk.cuh): a walker per window of chunks of the CSC, feature tile and
// pass over kHgBlocks of the K output blocks. The chunk's blocks accumulate in registers in position order (a row
// of at most 256 edges has the bits of a serial walk; a split row's chunks leave partials folded in chunk order);
// each edge's x row is gathered once per pass (one 128-bit load per lane on the vector path), with its type and
// its coefficients, 8 edges at a time (4 with comp, whose kHgBlocks coefficients an edge are loads too);
// every output row is written once, by one walker.

constexpr int kHgBlocks = 8;  // output blocks a walker accumulates per pass

// A walk of agg_hg_basis on the engine, forward (the CSC) or backward (the reverse CSR): sizes in 32 bits
// (EngineSizes), walkers of `group` lanes over `tiles` feature tiles, and the forward's `passes` over the blocks.
struct HgWalk {
  int n_rows, n_edges, D, K, B, R, group, tiles, passes, nbr_bound, width;
  bool own, stream;
  int window_shift;  // windows of 2^window_shift coordinates (WindowShift)
  int64_t windows, slot_count, counter_count;
};

// The walk of a pass (`forward`: HgFwdKernel's) over `a` whose output (written past the caches when larger than
// L2) has `out_bytes`.
inline HgWalk HgWalkOf(const HgBasisArgs& a, int kV, int64_t out_bytes, bool forward) {
  HgWalk wk;
  wk.n_rows = static_cast<int>(a.n_rows);
  wk.n_edges = static_cast<int>(a.n_edges);
  wk.D = static_cast<int>(a.dim);
  wk.K = static_cast<int>(a.blocks);
  wk.B = static_cast<int>(a.n_bases);
  wk.R = static_cast<int>(a.n_types);
  wk.group = WalkerLanes(a.dim, kV);
  wk.tiles = static_cast<int>((a.dim + int64_t(wk.group) * kV - 1) / (int64_t(wk.group) * kV));
  wk.passes = static_cast<int>((a.blocks + kHgBlocks - 1) / kHgBlocks);
  wk.nbr_bound = static_cast<int>(a.nbr_bound);
  wk.width = static_cast<int>(a.width);
  wk.own = a.concat_own;
  wk.stream = StreamStores(out_bytes);
  wk.window_shift = WindowShift(a.n_rows, a.n_edges, int64_t(forward ? wk.passes : 1) * wk.tiles * wk.group);
  wk.windows = Windows(a.n_rows, a.n_edges, wk.window_shift);
  wk.slot_count = SplitScratch::SlotCount(a.n_edges);
  wk.counter_count = SplitScratch::CounterCount(a.n_edges);
  return wk;
}

// The instantiation of a kernel template over (comp, norm, vector) that a call needs: kernel_of(comp, norm, vector)
// receives std::true_type or std::false_type for each.
template <typename KernelOf>
auto PickHgKernel(const HgBasisArgs& a, bool vector, KernelOf kernel_of) {
  auto with = [&](auto comp, auto norm) {
    return vector ? kernel_of(comp, norm, std::true_type{}) : kernel_of(comp, norm, std::false_type{});
  };
  return WithFlags(a.has_comp, a.has_norm, with);
}

// gpu-model: engine mlp>=8 vector-if kVector
template <typename T, typename I, bool kComp, bool kNorm, bool kVector>
__global__ void __launch_bounds__(kBlock, 1) HgFwdKernel(HgWalk a, const I* __restrict__ offsets,
                                                         const I* __restrict__ nbr, const I* __restrict__ eid,
                                                         const T* __restrict__ x, const I* __restrict__ types,
                                                         const T* __restrict__ comp, const T* __restrict__ w,
                                                         const T* __restrict__ own, T* __restrict__ out,
                                                         SplitScratch split) {
  constexpr int kV = 16 / int(sizeof(T));
  constexpr int kGroup = kComp ? kInFlight / 2 : kInFlight;  // with comp: kHgBlocks coefficients an edge too
  const Walker wk = ThisWalker(a.group);
  const Positions<I, T> pos{nbr, eid, w, a.nbr_bound, a.n_edges, 1};
  const int64_t kd = int64_t(a.K) * a.D;
  ForEachWalkerTile<kV, kVector>(a.windows * a.passes, a.tiles, a.D, wk, [&](int64_t unit, const auto& lf) {
    const uint32_t window = static_cast<uint32_t>(unit) / static_cast<uint32_t>(a.passes);
    const int pass = static_cast<int>(static_cast<uint32_t>(unit) - window * static_cast<uint32_t>(a.passes));
    const int b0 = pass * kHgBlocks;
    const LaneRows<kV, kVector, T> xs(x, a.D, lf, FlatStrides(), Dims3{1, 1, a.D}, true);
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, a.window_shift, wk, [&](const Chunk& c) {
      T acc[kHgBlocks][kV];
#pragma unroll
      for (int b = 0; b < kHgBlocks; ++b)
#pragma unroll
        for (int v = 0; v < kV; ++v) acc[b][v] = T(0);
      auto group = [&](const Staged<T> (&s)[kGroup], unsigned bits) {
        T rows[kGroup][kV];
        I type[kGroup];
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {  // every gather of the group before the first is used (the types with them:
          if (!((bits >> u) & 1u)) continue;  // staged with the ids instead, they cost the forward 8% in the model)
          xs.Load(s[u].j, lf.ok, rows[u]);
          type[u] = types[s[u].e];
        }
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {
          const bool counts = ((bits >> u) & 1u) && InBound(type[u], a.R);  // an edge of a bad type: skipped
          const int t = counts ? static_cast<int>(type[u]) : 0;
          const T we = kNorm ? s[u].s : T(1);
#pragma unroll
          for (int b = 0; b < kHgBlocks; ++b) {
            if constexpr (kComp) {
              const T coef = HgBasisCoef(comp, a.B, t, Min(b0 + b, a.K - 1), we);
              if (counts) {
#pragma unroll
                for (int v = 0; v < kV; ++v) acc[b][v] += coef * rows[u][v];
              }
            } else if (counts && t == b0 + b) {  // an edge adds to its type's block only
#pragma unroll
              for (int v = 0; v < kV; ++v) acc[b][v] += we * rows[u][v];
            }
          }
        }
      };
      WalkPositions<true, true, kNorm, kGroup>(pos, c.lo, c.hi, wk, group);
      const int blocks = Min(kHgBlocks, a.K - b0);
      if (c.split()) {
        const int64_t slot = PartialSlot(c, a.slot_count);
        T* values = static_cast<T*>(split.values);
#pragma unroll
        for (int b = 0; b < kHgBlocks; ++b)
          if (b < blocks) StoreFeatures<kV, kVector>(values + slot * kd + int64_t(b0 + b) * a.D, lf, acc[b], false);
        if (!ArriveLast(split.counters + SplitCounter(c, a.counter_count, lf.tile * a.passes + pass), c, wk)) return;
#pragma unroll 1
        for (int q = 0; q < c.count; ++q) {  // the row's partials, in chunk order
          const T* part = values + (slot - c.index + q) * kd + int64_t(b0) * a.D;
#pragma unroll
          for (int b = 0; b < kHgBlocks; ++b) {
#pragma unroll
            for (int v = 0; v < kV; ++v) {
              if (b >= blocks || !lf.ok[v]) continue;
              const T p = __ldcg(part + int64_t(b) * a.D + lf.f[v]);
              acc[b][v] = q == 0 ? p : acc[b][v] + p;
            }
          }
        }
      }
      T* o = out + int64_t(c.row) * a.width;
#pragma unroll
      for (int b = 0; b < kHgBlocks; ++b)
        if (b < blocks) StoreFeatures<kV, kVector>(o + int64_t(b0 + b) * a.D, lf, acc[b], a.stream);
      if (a.own && pass == 0) {  // the destination's own features after the K blocks
        T mine[kV];
        LaneRows<kV, kVector, T>(own, a.D, lf, FlatStrides(), Dims3{1, 1, a.D}, true).Load(c.row, lf.ok, mine);
        StoreFeatures<kV, kVector>(o + kd, lf, mine, a.stream);
      }
    });
  });
}

template <typename T, typename I>
ffi::Error HgFwdTyped(cudaStream_t stream, CudaScratch& scratch, const HgBasisArgs& a, ffi::AnyBuffer offsets,
                      ffi::AnyBuffer nbr, ffi::AnyBuffer eid, ffi::AnyBuffer x, ffi::AnyBuffer types,
                      ffi::AnyBuffer comp, ffi::AnyBuffer w, ffi::AnyBuffer own, ffi::AnyBuffer out) {
  constexpr int kV = 16 / int(sizeof(T));
  const char* name = "jgo_hg_basis_fwd";
  // offsets out of order may leave rows no walker owns: 0 there (the handler has no `checked` attribute yet)
  if (auto err = ZeroFill(name, out.untyped_data(), out.size_bytes(), stream); err.failure()) return err;
  if (a.dim == 0 || a.n_rows == 0) return ffi::Error::Success();
  if (auto err = EngineSizes(name, {a.n_rows, a.n_edges, a.n_src, a.n_types, a.width}); err.failure()) return err;
  const HgWalk wk = HgWalkOf(a, kV, static_cast<int64_t>(out.size_bytes()), true);
  if (auto err = EngineSizes(name, {wk.windows * wk.passes * wk.tiles}); err.failure()) return err;
  const bool vector = a.dim % kV == 0 && Aligned(x.untyped_data()) && Aligned(out.untyped_data()) &&
                      (!a.concat_own || Aligned(own.untyped_data()));
  auto split = SplitScratchFor(name, scratch, stream, a.n_edges, a.blocks * a.dim, sizeof(T), false,
                               int64_t(wk.tiles) * wk.passes);
  if (split.has_error()) return split.error();
  auto kernel = PickHgKernel(a, vector, [](auto comp_, auto norm_, auto vector_) {
    return HgFwdKernel<T, I, decltype(comp_)::value, decltype(norm_)::value, decltype(vector_)::value>;
  });
  return LaunchBlocks(name, kernel, WalkerBlocks(wk.windows * wk.passes * wk.tiles, wk.group), 0, stream, wk,
                      offsets.typed_data<I>(), nbr.typed_data<I>(), eid.typed_data<I>(), x.typed_data<T>(),
                      types.typed_data<I>(), a.has_comp ? comp.typed_data<T>() : nullptr,
                      a.has_norm ? w.typed_data<T>() : nullptr, a.concat_own ? own.typed_data<T>() : nullptr,
                      out.typed_data<T>(), *split);
}

ffi::Error HgBasisFwdCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                          ffi::AnyBuffer x, ffi::AnyBuffer types, ffi::AnyBuffer comp, ffi::AnyBuffer w,
                          ffi::AnyBuffer own, ffi::Result<ffi::AnyBuffer> out, int64_t n_types, bool has_comp,
                          bool has_norm, bool concat_own) {
  auto args = CheckHgBasis(HgBasisPass::kFwd, offsets, nbr, eid, &x, types, &comp, &w, &own, nullptr, n_types,
                           has_comp, has_norm, concat_own);
  if (args.has_error()) return args.error();
  if (auto err = CheckHgBasisFwdResult(*args, *out, x.element_type()); err.failure()) return err;
  return DispatchTypes(x.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return HgFwdTyped<decltype(t), decltype(i)>(stream, scratch, *args, offsets, nbr, eid, x, types, comp, w, own,
                                                *out);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_hg_basis_bwd_src on the engine, over the reverse CSR (rows: sources j; positions: their out-edges to i):
//   grad_x_j = sum_e w_e sum_b comp[t, b] G_i[b]   (without comp: w_e G_i[t]),   dot[e, b] = w_e <G_i[b], x_j>
// A walker per window of chunks and feature tile accumulates grad_x_j in registers (every G block of an edge
// gathered before the first is used; a split row's partials folded in chunk order) and writes each edge's dots once, in its feature tile's slice [tiles, E, K]
// of scratch; grad_comp[t, b] = the sum of the dots of the edges of type t, in edge order (HgCompPartialsKernel
// per block of kHgEdgeBlock edges, then HgSumPartialsKernel over the blocks in order). No floating-point atomics,
// no read-modify-write of global memory per edge.

// MLP floor 5, measured (nvcc 13.0, sm_90, 2026-11-29; 8-65 in float32 and without comp): float64 with comp on the
// vector path keeps 5 loads in flight (the G blocks of 2 edges, 8 each, are gathered at once in the source). 8 there
// is open work (issue 33).
// gpu-model: engine mlp>=5 vector-if kVector
template <typename T, typename I, bool kComp, bool kNorm, bool kVector>
__global__ void __launch_bounds__(kBlock, 1) HgBwdSrcKernel(HgWalk a, const I* __restrict__ offsets,
                                                            const I* __restrict__ nbr, const I* __restrict__ eid,
                                                            const T* __restrict__ x, const I* __restrict__ types,
                                                            const T* __restrict__ comp, const T* __restrict__ w,
                                                            const T* __restrict__ G, T* __restrict__ grad_x,
                                                            T* __restrict__ dots, SplitScratch split) {
  constexpr int kV = 16 / int(sizeof(T));
  constexpr int kGroup = kComp ? 2 : kInFlight;  // with comp: up to kHgBlocks gathers an edge
  const Walker wk = ThisWalker(a.group);
  const Positions<I, T> pos{nbr, eid, w, a.nbr_bound, a.n_edges, 1, types, a.R};  // types staged with the ids
  ForEachWalkerTile<kV, kVector>(a.windows, a.tiles, a.D, wk, [&](int64_t window, const auto& lf) {
    const LaneRows<kV, kVector, T> gs(G, a.width, lf, FlatStrides(), Dims3{1, 1, a.D}, true);
    const LaneRows<kV, kVector, T> xs(x, a.D, lf, FlatStrides(), Dims3{1, 1, a.D}, kComp);
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, a.window_shift, wk, [&](const Chunk& c) {
      T acc[kV], xr[kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) acc[v] = xr[v] = T(0);
      if constexpr (kComp) {
        T own[kV];
        xs.Load(c.row, lf.ok, own);
#pragma unroll
        for (int v = 0; v < kV; ++v) xr[v] = lf.ok[v] ? own[v] : T(0);
      }
      auto group = [&](const Staged<T> (&s)[kGroup], unsigned bits) {
        if constexpr (!kComp) {  // one block an edge: its type's
          T g[kGroup][kV];
#pragma unroll
          for (int u = 0; u < kGroup; ++u)
            if (((bits >> u) & 1u) && s[u].t >= 0) gs.LoadAt(s[u].j, s[u].t * a.D, lf.ok, g[u]);
#pragma unroll
          for (int u = 0; u < kGroup; ++u) {
            if (!((bits >> u) & 1u) || s[u].t < 0) continue;
            const T we = kNorm ? s[u].s : T(1);
#pragma unroll
            for (int v = 0; v < kV; ++v) acc[v] += we * g[u][v];
          }
        } else {
#pragma unroll 1
          for (int b0 = 0; b0 < a.K; b0 += kHgBlocks) {
            T g[kGroup][kHgBlocks][kV];
#pragma unroll
            for (int u = 0; u < kGroup; ++u)
#pragma unroll
              for (int b = 0; b < kHgBlocks; ++b)
                if (((bits >> u) & 1u) && b0 + b < a.K) gs.LoadAt(s[u].j, (b0 + b) * a.D, lf.ok, g[u][b]);
#pragma unroll
            for (int u = 0; u < kGroup; ++u) {
              if (!((bits >> u) & 1u)) continue;  // uniform in the walker: the shuffles below see every lane
              const bool counts = s[u].t >= 0;  // an edge of a bad type: no gradient, dots of 0
              const int t = counts ? s[u].t : 0;
              const T we = kNorm ? s[u].s : T(1);
#pragma unroll
              for (int b = 0; b < kHgBlocks; ++b) {
                if (b0 + b >= a.K) break;
                const T coef = HgBasisCoef(comp, a.B, t, b0 + b, we);
                T dot = T(0);
#pragma unroll
                for (int v = 0; v < kV; ++v) {
                  if (counts) acc[v] += coef * g[u][b][v];
                  dot += lf.ok[v] ? g[u][b][v] * xr[v] : T(0);
                }
                dot = GroupSum(dot, wk.mask, wk.group);
                if (wk.lane == 0)  // this feature tile's part of the edge's dot
                  dots[(int64_t(lf.tile) * a.n_edges + s[u].e) * a.K + b0 + b] = counts ? we * dot : T(0);
              }
            }
          }
        }
      };
      WalkPositions<true, true, kNorm, kGroup, true, false, true>(pos, c.lo, c.hi, wk, group);
      if (c.split()) {
        const int64_t slot = PartialSlot(c, a.slot_count);
        T* values = static_cast<T*>(split.values);
        StoreFeatures<kV, kVector>(values + slot * a.D, lf, acc, false);
        if (!ArriveLast(split.counters + SplitCounter(c, a.counter_count, lf.tile), c, wk)) return;
#pragma unroll 1
        for (int q = 0; q < c.count; ++q) {  // the row's partials, in chunk order
#pragma unroll
          for (int v = 0; v < kV; ++v) {
            if (!lf.ok[v]) continue;
            const T part = __ldcg(values + (slot - c.index + q) * a.D + lf.f[v]);
            acc[v] = q == 0 ? part : acc[v] + part;
          }
        }
      }
      StoreFeatures<kV, kVector>(grad_x + int64_t(c.row) * a.D, lf, acc, a.stream);
    });
  });
}

constexpr int64_t kHgEdgeBlock = 2048;  // edges of a block of grad_comp's partials

// part[p, q] for the edges [p kHgEdgeBlock, (p + 1) kHgEdgeBlock) and pair q = t K + b: the sum, in edge order, of
// dot[e, b] over the block's edges of type t (each dot the sum of its feature tiles' parts, in tile order). A warp
// per (block, 32 pairs), a lane per pair.
template <typename T, typename I>
__global__ void HgCompPartialsKernel(int64_t n_edges, int K, int R, int tiles, const I* __restrict__ types,
                                     const T* __restrict__ dots, int64_t blocks, T* __restrict__ part) {
  const int64_t pairs = int64_t(R) * K, pair_tiles = (pairs + kWarp - 1) / kWarp;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int64_t warps = ThreadCount() / kWarp;
  for (int64_t id = ThreadIndex() / kWarp; id < blocks * pair_tiles; id += warps) {
    const int64_t p = id / pair_tiles;
    const int64_t q = (id - p * pair_tiles) * kWarp + lane;
    const bool live = q < pairs;
    const int64_t t = live ? q / K : -1, b = live ? q - t * K : 0;
    const int64_t e1 = Min(n_edges, (p + 1) * kHgEdgeBlock);
    T sum = T(0);
    for (int64_t e = p * kHgEdgeBlock; e < e1; ++e) {
      if (static_cast<int64_t>(types[e]) != t) continue;
      T d = T(0);
      for (int i = 0; i < tiles; ++i) d += dots[(i * n_edges + e) * K + b];
      sum += d;
    }
    if (live) part[p * pairs + q] = sum;
  }
}

template <typename T, typename I>
ffi::Error HgBwdSrcTyped(cudaStream_t stream, CudaScratch& scratch, const HgBasisArgs& a, ffi::AnyBuffer offsets,
                         ffi::AnyBuffer nbr, ffi::AnyBuffer eid, ffi::AnyBuffer x, ffi::AnyBuffer types,
                         ffi::AnyBuffer comp, ffi::AnyBuffer w, ffi::AnyBuffer G, ffi::AnyBuffer grad_x,
                         ffi::AnyBuffer grad_comp) {
  constexpr int kV = 16 / int(sizeof(T));
  const char* name = "jgo_hg_basis_bwd_src";
  // offsets out of order may leave rows no walker owns: 0 there (the handler has no `checked` attribute yet)
  if (auto err = ZeroFill(name, grad_x.untyped_data(), grad_x.size_bytes(), stream); err.failure()) return err;
  T* gc = a.has_comp ? grad_comp.typed_data<T>() : nullptr;
  if (a.dim == 0 || a.n_rows == 0 || a.n_edges == 0)
    return gc ? ZeroFill(name, gc, grad_comp.size_bytes(), stream) : ffi::Error::Success();
  if (auto err = EngineSizes(name, {a.n_rows, a.n_edges, a.n_dst, a.n_types, a.width}); err.failure()) return err;
  const HgWalk wk = HgWalkOf(a, kV, static_cast<int64_t>(grad_x.size_bytes()), false);
  if (auto err = EngineSizes(name, {wk.windows * wk.tiles}); err.failure()) return err;
  auto split = SplitScratchFor(name, scratch, stream, a.n_edges, a.dim, sizeof(T), false, wk.tiles);
  if (split.has_error()) return split.error();
  const bool vector = a.dim % kV == 0 && a.width % kV == 0 && Aligned(x.untyped_data()) &&
                      Aligned(G.untyped_data()) && Aligned(grad_x.untyped_data());
  const int64_t dot_count = a.has_comp ? int64_t(wk.tiles) * a.n_edges * a.blocks : 0;
  auto dots = ZeroScratch<T>(scratch, dot_count, stream, name);  // edges no walk reaches: dots of 0
  if (dots.has_error()) return dots.error();
  auto kernel = PickHgKernel(a, vector, [](auto comp_, auto norm_, auto vector_) {
    return HgBwdSrcKernel<T, I, decltype(comp_)::value, decltype(norm_)::value, decltype(vector_)::value>;
  });
  auto err = LaunchBlocks(name, kernel, WalkerBlocks(wk.windows * wk.tiles, wk.group), 0, stream, wk,
                          offsets.typed_data<I>(), nbr.typed_data<I>(), eid.typed_data<I>(), x.typed_data<T>(),
                          types.typed_data<I>(), a.has_comp ? comp.typed_data<T>() : nullptr,
                          a.has_norm ? w.typed_data<T>() : nullptr, G.typed_data<T>(), grad_x.typed_data<T>(),
                          *dots, *split);
  if (err.failure() || !a.has_comp) return err;
  const int64_t pairs = a.n_types * a.blocks, edge_blocks = (a.n_edges + kHgEdgeBlock - 1) / kHgEdgeBlock;
  auto partials = ZeroScratch<T>(scratch, edge_blocks * pairs, stream, name);
  if (partials.has_error()) return partials.error();
  const int64_t warps = edge_blocks * ((pairs + kWarp - 1) / kWarp);
  err = LaunchBlocks(name, HgCompPartialsKernel<T, I>, std::min<int64_t>((warps * kWarp + kBlock - 1) / kBlock,
                                                                          kMaxBlocks),
                     0, stream, a.n_edges, wk.K, wk.R, wk.tiles, static_cast<const I*>(types.typed_data<I>()),
                     static_cast<const T*>(*dots), edge_blocks, *partials);
  if (err.failure()) return err;
  return Launch(name, HgSumPartialsKernel<T>, pairs, stream, static_cast<const T*>(*partials), edge_blocks, pairs,
                gc);
}

ffi::Error HgBasisBwdSrcCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                             ffi::AnyBuffer eid, ffi::AnyBuffer x, ffi::AnyBuffer types, ffi::AnyBuffer comp,
                             ffi::AnyBuffer w, ffi::AnyBuffer G, ffi::Result<ffi::AnyBuffer> grad_x,
                             ffi::Result<ffi::AnyBuffer> grad_comp, int64_t n_types, bool has_comp, bool has_norm,
                             bool concat_own) {
  auto args = CheckHgBasis(HgBasisPass::kBwdSrc, offsets, nbr, eid, &x, types, &comp, &w, nullptr, &G, n_types,
                           has_comp, has_norm, concat_own);
  if (args.has_error()) return args.error();
  if (auto err = CheckHgBasisBwdSrcResults(*args, *grad_x, *grad_comp, x.element_type()); err.failure()) return err;
  return DispatchTypes(x.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return HgBwdSrcTyped<decltype(t), decltype(i)>(stream, scratch, *args, offsets, nbr, eid, x, types, comp, w, G,
                                                   *grad_x, *grad_comp);
  });
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER_NO_TRAITS(HgBasisNorm, jgo::HgBasisNormCuda, jgo::BindHgBasisNorm<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER_NO_TRAITS(HgBasisFwd, jgo::HgBasisFwdCuda, jgo::BindHgBasisFwd<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER_NO_TRAITS(HgBasisBwdSrc, jgo::HgBasisBwdSrcCuda, jgo::BindHgBasisBwdSrc<jgo::CudaStream, jgo::CudaScratch>());
