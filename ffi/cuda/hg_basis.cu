// CUDA handlers of RGCN's relational aggregation: jgo_hg_basis_norm, jgo_hg_basis_fwd and
// jgo_hg_basis_bwd_src. Same operands, attributes and results as the CPU twin (cpu/hg_basis.cc),
// same per-edge math and shape checks (jgo/hg_basis.h).
//
// The forward runs on the chunked row-walk engine (cuda/chunk_walk.cuh): a row's K x D output blocks
// accumulate in registers, kHgBlocks at a time, and are written once. The backward: a group of lanes
// (GroupWidth(D) <= 32, so its reductions are warp shuffles) walks one source row at a time of the
// reverse CSR, grid-stride, lane l owning the features d = l, l + g, ...; it accumulates grad_x_j in
// registers and each group's grad_comp partial [R, B] in its own slice of XLA scratch memory, reduced
// over groups in a fixed order by a second kernel: no floating-point atomics, bitwise reproducible.
// The per-relation counts of jgo_hg_basis_norm are integer atomics in a per-warp array of R counters
// (touched only at the row's types, reset after the row): no [n_dst, R] table.
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
constexpr int64_t kHgScratchElements = int64_t(1) << 22;  // bounds the per-group partials and counters

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

__device__ __forceinline__ bool ValidEdge(int64_t j, int64_t bound, int64_t e, int64_t n_edges, int64_t t,
                                          int64_t n_types) {
  return InRange(j, bound) && InRange(e, n_edges) && InRange(t, n_types);
}

// out[i] = sum_{p < parts} part[p * len + i] for i < len: the fixed-order reduction of per-group partials.
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
  auto p = scratch.Allocate(sizeof(T) * count, alignof(T));
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
// jgo_hg_basis_norm: one warp per destination row, counters[R] per warp

template <typename T, typename I>
__global__ void HgNormKernel(HgBasisArgs a, const I* offsets, const I* eid, const I* types, T* w, int* counters) {
  const GroupWalk g = Walk(kWarp);
  const unsigned mask = GroupMask(kWarp);
  int* count = counters + g.worker * a.n_types;
  for (int64_t r = g.worker; r < a.n_rows; r += g.workers) {
    const int64_t begin = Clamp(offsets[r], 0, a.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, a.n_edges);
    for (int64_t k = begin + g.lane; k < end; k += kWarp) {
      const int64_t e = eid[k];
      if (!InRange(e, a.n_edges)) continue;
      const int64_t t = types[e];
      if (InRange(t, a.n_types)) atomicAdd(count + t, 1);
    }
    __syncwarp(mask);
    for (int64_t k = begin + g.lane; k < end; k += kWarp) {
      const int64_t e = eid[k];
      if (!InRange(e, a.n_edges)) continue;
      const int64_t t = types[e];
      if (InRange(t, a.n_types)) w[e] = HgBasisNorm<T>(count[t]);
    }
    __syncwarp(mask);
    for (int64_t k = begin + g.lane; k < end; k += kWarp) {
      const int64_t e = eid[k];
      if (!InRange(e, a.n_edges)) continue;
      const int64_t t = types[e];
      if (InRange(t, a.n_types)) atomicAdd(count + t, -1);
    }
    __syncwarp(mask);
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
  auto counters = ZeroScratch<int>(scratch, blocks * (kBlock / kWarp) * a.n_types, stream, name);
  if (counters.has_error()) return counters.error();
  return DispatchTypes(w->element_type(), offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    return LaunchBlocks(name, HgNormKernel<T, I>, blocks, 0, stream, a, offsets.typed_data<I>(), eid.typed_data<I>(),
                        types.typed_data<I>(), w->typed_data<T>(), *counters);
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

struct HgFwdWalk {
  int n_rows, n_edges, D, K, B, R, group, tiles, passes, nbr_bound, width;
  bool own, stream;
  int64_t windows, slot_count, counter_count;
};

// gpu-model: engine mlp>=8 vector-if kVector
template <typename T, typename I, bool kComp, bool kNorm, bool kVector>
__global__ void __launch_bounds__(kBlock, 1) HgFwdKernel(HgFwdWalk a, const I* __restrict__ offsets,
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
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, wk, [&](const Chunk& c) {
      T acc[kHgBlocks][kV];
#pragma unroll
      for (int b = 0; b < kHgBlocks; ++b)
#pragma unroll
        for (int v = 0; v < kV; ++v) acc[b][v] = T(0);
      auto group = [&](const Staged<T> (&s)[kGroup], unsigned bits) {
        T rows[kGroup][kV];
        I type[kGroup];
#pragma unroll
        for (int u = 0; u < kGroup; ++u) {  // every gather of the group before the first is used
          if (!((bits >> u) & 1u)) continue;
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
  HgFwdWalk wk;
  wk.n_rows = static_cast<int>(a.n_rows);
  wk.n_edges = static_cast<int>(a.n_edges);
  wk.D = static_cast<int>(a.dim);
  wk.K = static_cast<int>(a.blocks);
  wk.B = static_cast<int>(a.n_bases);
  wk.R = static_cast<int>(a.n_types);
  wk.group = WalkerLanes(a.dim, kV);
  wk.tiles = static_cast<int>((a.dim + int64_t(wk.group) * kV - 1) / (int64_t(wk.group) * kV));
  wk.passes = static_cast<int>((a.blocks + kHgBlocks - 1) / kHgBlocks);
  wk.nbr_bound = static_cast<int>(a.n_src);
  wk.width = static_cast<int>(a.width);
  wk.own = a.concat_own;
  wk.stream = StreamStores(static_cast<int64_t>(out.size_bytes()));
  wk.windows = Windows(a.n_rows, a.n_edges);
  wk.slot_count = SplitScratch::SlotCount(a.n_edges);
  wk.counter_count = SplitScratch::CounterCount(a.n_edges);
  if (auto err = EngineSizes(name, {wk.windows * wk.passes * wk.tiles}); err.failure()) return err;
  const bool vector = a.dim % kV == 0 && Aligned(x.untyped_data()) && Aligned(out.untyped_data()) &&
                      (!a.concat_own || Aligned(own.untyped_data()));
  auto split = SplitScratchFor(name, scratch, stream, a.n_edges, a.blocks * a.dim, sizeof(T), false,
                               int64_t(wk.tiles) * wk.passes);
  if (split.has_error()) return split.error();
  auto pick = [&](auto comp_, auto norm_) {
    constexpr bool C = decltype(comp_)::value, N = decltype(norm_)::value;
    return vector ? HgFwdKernel<T, I, C, N, true> : HgFwdKernel<T, I, C, N, false>;
  };
  using Yes = std::true_type;
  using No = std::false_type;
  auto kernel = a.has_comp ? (a.has_norm ? pick(Yes{}, Yes{}) : pick(Yes{}, No{}))
                           : (a.has_norm ? pick(No{}, Yes{}) : pick(No{}, No{}));
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
// jgo_hg_basis_bwd_src: a group per source row (reverse CSR), lanes over the features
//   grad_x_j = sum_e w_e sum_b comp[t, b] G_i[b],   part[t, b] += w_e <G_i[b], x_j>   (group sum)

template <typename T, typename I, bool kComp, bool kNorm>
__global__ void HgBwdSrcKernel(HgBasisArgs a, int width, const I* offsets, const I* nbr, const I* eid, const T* x,
                               const I* types, const T* comp, const T* w, const T* G, T* grad_x, T* partials) {
  const GroupWalk g = Walk(width);
  const unsigned mask = GroupMask(width);
  const int64_t D = a.dim, B = a.n_bases, W = a.width;
  T* part = kComp ? partials + g.worker * a.n_types * B : nullptr;
  for (int64_t r = g.worker; r < a.n_rows; r += g.workers) {
    const T* xr = x + r * D;
    const int64_t begin = Clamp(offsets[r], 0, a.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, a.n_edges);
    // lane l accumulates features l, l + width, ... in turn: the row in chunks of `width`
    for (int64_t d0 = 0; d0 < D; d0 += width) {
      const int64_t d = d0 + g.lane;
      const bool live = d < D;
      const T xd = live ? xr[d] : T(0);
      T gx = T(0);
      for (int64_t k = begin; k < end; ++k) {
        const int64_t i = nbr[k], e = eid[k];
        const int64_t t = InRange(e, a.n_edges) ? static_cast<int64_t>(types[e]) : -1;
        if (!ValidEdge(i, a.n_dst, e, a.n_edges, t, a.n_types)) continue;
        const T we = kNorm ? w[e] : T(1);
        const T* Gi = G + i * W;
        if (kComp) {
          for (int64_t b = 0; b < B; ++b) {
            const T gb = live ? Gi[b * D + d] : T(0);
            gx += HgBasisCoef(comp, B, t, b, we) * gb;
            const T dot = GroupSum(gb * xd, mask, width);
            if (g.lane == 0) part[t * B + b] += we * dot;
          }
        } else if (live) {
          gx += we * Gi[t * D + d];
        }
      }
      if (live) grad_x[r * D + d] = gx;
    }
  }
}

template <typename T, typename I>
ffi::Error HgBwdSrcTyped(cudaStream_t stream, CudaScratch& scratch, const HgBasisArgs& a, ffi::AnyBuffer offsets,
                         ffi::AnyBuffer nbr, ffi::AnyBuffer eid, ffi::AnyBuffer x, ffi::AnyBuffer types,
                         ffi::AnyBuffer comp, ffi::AnyBuffer w, ffi::AnyBuffer G, ffi::AnyBuffer grad_x,
                         ffi::AnyBuffer grad_comp) {
  const char* name = "jgo_hg_basis_bwd_src";
  const int width = GroupWidth(a.dim);
  const int64_t part_len = a.has_comp ? a.n_types * a.n_bases : 0;
  const int64_t blocks = HgBlocks(a.n_rows, width, part_len);
  const int64_t workers = blocks * (kBlock / width);
  T* gc = a.has_comp ? grad_comp.typed_data<T>() : nullptr;
  if (blocks == 0) return gc ? ZeroFill(name, gc, grad_comp.size_bytes(), stream) : ffi::Error::Success();
  auto partials = ZeroScratch<T>(scratch, workers * part_len, stream, name);
  if (partials.has_error()) return partials.error();
  auto kernel = a.has_comp ? (a.has_norm ? HgBwdSrcKernel<T, I, true, true> : HgBwdSrcKernel<T, I, true, false>)
                           : (a.has_norm ? HgBwdSrcKernel<T, I, false, true> : HgBwdSrcKernel<T, I, false, false>);
  auto err = LaunchBlocks(name, kernel, blocks, 0, stream, a, width, offsets.typed_data<I>(), nbr.typed_data<I>(),
                          eid.typed_data<I>(), x.typed_data<T>(), types.typed_data<I>(),
                          a.has_comp ? comp.typed_data<T>() : nullptr, a.has_norm ? w.typed_data<T>() : nullptr,
                          G.typed_data<T>(), grad_x.typed_data<T>(), *partials);
  if (err.failure() || !a.has_comp) return err;
  return Launch(name, HgSumPartialsKernel<T>, part_len, stream, static_cast<const T*>(*partials), workers, part_len,
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
