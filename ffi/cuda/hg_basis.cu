// CUDA handlers of RGCN's relational aggregation: jgo_hg_basis_norm, jgo_hg_basis_fwd and
// jgo_hg_basis_bwd_src. Same operands, attributes and results as the CPU twin (cpu/hg_basis.cc),
// same per-edge math and shape checks (jgo/hg_basis.h).
//
// A group of lanes (GroupWidth(D) <= 32, so its reductions are warp shuffles) walks one row at a
// time, grid-stride; lane l owns the features d = l, l + g, ... of the row, so reads of x and G
// rows are coalesced and every output element has one writer. The forward accumulates straight
// into the destination's output row (its [K, D] block, each element owned by one lane); the
// backward accumulates grad_x_j in registers and each group's grad_comp partial [R, B] in its own
// slice of XLA scratch memory, reduced over groups in a fixed order by a second kernel: no
// floating-point atomics, bitwise reproducible. The per-relation counts of jgo_hg_basis_norm are
// integer atomics in a per-warp array of R counters (touched only at the row's types, reset after
// the row): no [n_dst, R] table.
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

#include "cuda/launch.cuh"
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
// jgo_hg_basis_fwd: a group per destination row, lanes over the features

template <typename T, typename I, bool kComp, bool kNorm>
__global__ void HgFwdKernel(HgBasisArgs a, int width, const I* offsets, const I* nbr, const I* eid, const T* x,
                            const I* types, const T* comp, const T* w, const T* own, T* out) {
  const GroupWalk g = Walk(width);
  const int64_t D = a.dim, B = a.n_bases, KD = a.blocks * D;
  for (int64_t r = g.worker; r < a.n_rows; r += g.workers) {
    T* o = out + r * a.width;
    // lane l owns the elements of features d = l, l + width, ... in every block (no barrier needed)
    for (int64_t d = g.lane; d < D; d += width) {
      for (int64_t q = d; q < KD; q += D) o[q] = T(0);
    }
    const int64_t begin = Clamp(offsets[r], 0, a.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, a.n_edges);
    for (int64_t k = begin; k < end; ++k) {
      const int64_t j = nbr[k], e = eid[k];
      const int64_t t = InRange(e, a.n_edges) ? static_cast<int64_t>(types[e]) : -1;
      if (!ValidEdge(j, a.n_src, e, a.n_edges, t, a.n_types)) continue;
      const T we = kNorm ? w[e] : T(1);
      const T* xj = x + j * D;
      for (int64_t d = g.lane; d < D; d += width) {
        const T v = xj[d];
        if (kComp) {
          for (int64_t b = 0; b < B; ++b) o[b * D + d] += HgBasisCoef(comp, B, t, b, we) * v;
        } else {
          o[t * D + d] += we * v;
        }
      }
    }
    if (a.concat_own) {
      for (int64_t d = g.lane; d < D; d += width) o[KD + d] = own[r * D + d];
    }
  }
}

template <typename T, typename I>
ffi::Error HgFwdTyped(cudaStream_t stream, const HgBasisArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                      ffi::AnyBuffer eid, ffi::AnyBuffer x, ffi::AnyBuffer types, ffi::AnyBuffer comp,
                      ffi::AnyBuffer w, ffi::AnyBuffer own, ffi::AnyBuffer out) {
  const int width = GroupWidth(a.dim);
  const int64_t blocks = HgBlocks(a.n_rows, width, 0);
  auto kernel = a.has_comp ? (a.has_norm ? HgFwdKernel<T, I, true, true> : HgFwdKernel<T, I, true, false>)
                           : (a.has_norm ? HgFwdKernel<T, I, false, true> : HgFwdKernel<T, I, false, false>);
  return LaunchBlocks("jgo_hg_basis_fwd", kernel, blocks, 0, stream, a, width, offsets.typed_data<I>(),
                      nbr.typed_data<I>(), eid.typed_data<I>(), x.typed_data<T>(), types.typed_data<I>(),
                      a.has_comp ? comp.typed_data<T>() : nullptr, a.has_norm ? w.typed_data<T>() : nullptr,
                      a.concat_own ? own.typed_data<T>() : nullptr, out.typed_data<T>());
}

ffi::Error HgBasisFwdCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                          ffi::AnyBuffer x, ffi::AnyBuffer types, ffi::AnyBuffer comp, ffi::AnyBuffer w,
                          ffi::AnyBuffer own, ffi::Result<ffi::AnyBuffer> out, int64_t n_types, bool has_comp,
                          bool has_norm, bool concat_own) {
  auto args = CheckHgBasis(HgBasisPass::kFwd, offsets, nbr, eid, &x, types, &comp, &w, &own, nullptr, n_types,
                           has_comp, has_norm, concat_own);
  if (args.has_error()) return args.error();
  if (auto err = CheckHgBasisFwdResult(*args, *out, x.element_type()); err.failure()) return err;
  return DispatchTypes(x.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return HgFwdTyped<decltype(t), decltype(i)>(stream, *args, offsets, nbr, eid, x, types, comp, w, own, *out);
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
JGO_CUDA_HANDLER(HgBasisFwd, jgo::HgBasisFwdCuda, jgo::BindHgBasisFwd<jgo::CudaStream>());
JGO_CUDA_HANDLER_NO_TRAITS(HgBasisBwdSrc, jgo::HgBasisBwdSrcCuda, jgo::BindHgBasisBwdSrc<jgo::CudaStream, jgo::CudaScratch>());
