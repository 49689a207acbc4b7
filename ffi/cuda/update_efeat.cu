// CUDA handlers of the edge-update input (update_efeat): jgo_update_efeat_fwd,
// jgo_update_efeat_bwd_src, jgo_update_efeat_bwd_dst and jgo_update_efeat_bwd_edge. Same operands, attributes and results as
// the CPU twin (cpu/update_efeat.cc), same math and checks (jgo/update_efeat.h).
//
// Forward: a group of lanes (up to a warp) per edge in input edge order, the lanes striding over the
// output row part by part, so the writes of whole output rows are coalesced and adjacent lanes read
// adjacent elements of the gathered node rows; the ids are read once per edge. Backward: a
// group of lanes per row of the walked structure (reverse CSR or CSC), the lanes striding over the
// block's columns (coalesced reads of G rows), no atomics; the edge pass, a group of lanes per edge
// copying its block of G. An edge whose node id (forward) or edge
// id (backward) is out of range contributes 0 and offsets are clamped, so no kernel reads or writes
// out of bounds.
//
// Compile check (zero warnings), from the repository root, on one line:
//   nvcc -std=c++17 -O3 -Xcompiler -fPIC -Xcompiler -Wall,-Wextra --Werror all-warnings
//     --generate-code=arch=compute_90,code=sm_90
//     -Iffi -Iffi/common -isystem third_party/xla_ffi
//     -DJGO_WITH_CUDA -c ffi/cuda/update_efeat.cu
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/launch.cuh"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/update_efeat.h"

namespace jgo {
namespace {

// ---------------------------------------------------------------------------------------
// jgo_update_efeat_fwd

template <typename T, typename I, int kParts, bool kSum>
__global__ void EfeatFwdKernel(EfeatArgs a, const I* offsets, const I* src, const I* dst, const T* ef, const T* xs,
                               const T* xd, T* out, int group) {
  constexpr bool kE = (kParts & kEfeatEdge) != 0, kS = (kParts & kEfeatSrc) != 0, kD = (kParts & kEfeatDst) != 0;
  const int64_t W = a.width, Fe = a.f_edge, Fs = a.f_src, Fd = a.f_dst;
  const int lane = threadIdx.x % group;
  const int64_t real = Clamp(offsets[a.n_rows], 0, a.n_edges);  // the edges from here on are padding: rows of 0
  for (int64_t e = ThreadIndex() / group; e < a.n_edges; e += ThreadCount() / group) {
    if (e >= real) {
      for (int64_t c = lane; c < W; c += group) out[e * W + c] = T(0);
      continue;
    }
    const int64_t j = kS ? static_cast<int64_t>(src[e]) : 0;
    const int64_t v = kD ? static_cast<int64_t>(dst[e]) : 0;
    const bool s_ok = !kS || InRange(j, a.n_src_rows), d_ok = !kD || InRange(v, a.n_dst_rows);
    const T* er = kE ? ef + e * Fe : nullptr;
    const T* sr = kS && s_ok ? xs + j * Fs : nullptr;
    const T* dr = kD && d_ok ? xd + v * Fd : nullptr;
    T* o = out + e * W;
    if constexpr (kSum) {
      // An edge with an out-of-range node id sums to 0 (nothing is read out of bounds).
      for (int64_t c = lane; c < W; c += group) o[c] = s_ok && d_ok ? EfeatSum<kParts>(er, sr, dr, c) : T(0);
    } else {
      if constexpr (kE) {
        for (int64_t c = lane; c < Fe; c += group) o[c] = er[c];
        o += Fe;
      }
      if constexpr (kS) {
        for (int64_t c = lane; c < Fs; c += group) o[c] = s_ok ? sr[c] : T(0);
        o += Fs;
      }
      if constexpr (kD) {
        for (int64_t c = lane; c < Fd; c += group) o[c] = d_ok ? dr[c] : T(0);
      }
    }
  }
}

template <typename T, typename I>
ffi::Error EfeatFwdTyped(cudaStream_t stream, const EfeatArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer src,
                         ffi::AnyBuffer dst, ffi::AnyBuffer edge_feat, ffi::AnyBuffer x_src, ffi::AnyBuffer x_dst,
                         ffi::AnyBuffer out) {
  const T* ef = (a.parts & kEfeatEdge) ? edge_feat.typed_data<T>() : nullptr;
  const T* xs = (a.parts & kEfeatSrc) ? x_src.typed_data<T>() : nullptr;
  const T* xd = (a.parts & kEfeatDst) ? x_dst.typed_data<T>() : nullptr;
  return DispatchEfeatParts(a.parts, [&](auto parts) {
    constexpr int P = decltype(parts)::value;
    auto kernel = a.sum ? EfeatFwdKernel<T, I, P, true> : EfeatFwdKernel<T, I, P, false>;
    const int group = GroupWidth(a.width);
    return Launch("jgo_update_efeat_fwd", kernel, a.width == 0 ? 0 : a.n_edges * group, stream, a,
                  offsets.typed_data<I>(), src.typed_data<I>(), dst.typed_data<I>(), ef, xs, xd, out.typed_data<T>(),
                  group);
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
// jgo_update_efeat_bwd_src / _bwd_dst: grad[r] = sum over the edges e of row r of G[e, col : col + width]

template <typename T, typename I>
__global__ void EfeatBwdKernel(EfeatBwdArgs a, const I* offsets, const I* eid, const T* G, T* grad, int group) {
  const int lane = threadIdx.x % group;
  const int64_t W = a.width, F = a.g_width;
  for (int64_t r = ThreadIndex() / group; r < a.n_rows; r += ThreadCount() / group) {
    const int64_t begin = Clamp(offsets[r], 0, a.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, a.n_edges);
    for (int64_t c = lane; c < W; c += group) {
      T acc = T(0);
      for (int64_t k = begin; k < end; ++k) {
        const int64_t e = eid[k];
        if (InRange(e, a.n_edges)) acc += G[e * F + a.col + c];
      }
      grad[r * W + c] = acc;
    }
  }
}

ffi::Error EfeatBwd(cudaStream_t stream, const char* name, ffi::AnyBuffer offsets, ffi::AnyBuffer eid,
                    ffi::AnyBuffer G, ffi::AnyBuffer grad, int64_t col) {
  auto args = CheckEfeatBwd(name, offsets, eid, G, grad, col);
  if (args.has_error()) return args.error();
  const EfeatBwdArgs a = *args;
  const int group = GroupWidth(a.width);
  return DispatchTypes(G.element_type(), offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    return Launch(name, EfeatBwdKernel<T, I>, a.width == 0 ? 0 : a.n_rows * group, stream, a,
                  offsets.typed_data<I>(), eid.typed_data<I>(), G.typed_data<T>(), grad.typed_data<T>(), group);
  });
}

ffi::Error EfeatBwdSrcCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer eid, ffi::AnyBuffer G,
                           ffi::Result<ffi::AnyBuffer> grad, int64_t col) {
  return EfeatBwd(stream, "jgo_update_efeat_bwd_src", offsets, eid, G, *grad, col);
}

ffi::Error EfeatBwdDstCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer eid, ffi::AnyBuffer G,
                           ffi::Result<ffi::AnyBuffer> grad, int64_t col) {
  return EfeatBwd(stream, "jgo_update_efeat_bwd_dst", offsets, eid, G, *grad, col);
}

// ---------------------------------------------------------------------------------------
// jgo_update_efeat_bwd_edge: grad[e] = G[e, col : col + width] for the real edges, 0 at the padding edges

template <typename T, typename I>
__global__ void EfeatBwdEdgeKernel(EfeatBwdArgs a, const I* offsets, const T* G, T* grad, int group) {
  const int lane = threadIdx.x % group;
  const int64_t W = a.width, F = a.g_width;
  const int64_t real = Clamp(offsets[a.n_rows], 0, a.n_edges);
  for (int64_t e = ThreadIndex() / group; e < a.n_edges; e += ThreadCount() / group) {
    for (int64_t c = lane; c < W; c += group) grad[e * W + c] = e < real ? G[e * F + a.col + c] : T(0);
  }
}

ffi::Error EfeatBwdEdgeCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer G,
                            ffi::Result<ffi::AnyBuffer> grad, int64_t col) {
  auto args = CheckEfeatBwdEdge(offsets, G, *grad, col);
  if (args.has_error()) return args.error();
  const EfeatBwdArgs a = *args;
  const int group = GroupWidth(a.width);
  return DispatchTypes(G.element_type(), offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    return Launch("jgo_update_efeat_bwd_edge", EfeatBwdEdgeKernel<T, I>, a.width == 0 ? 0 : a.n_edges * group,
                  stream, a, offsets.typed_data<I>(), G.typed_data<T>(), grad->typed_data<T>(), group);
  });
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER(UpdateEfeatFwd, jgo::EfeatFwdCuda, jgo::BindEfeatFwd<jgo::CudaStream>());
JGO_CUDA_HANDLER(UpdateEfeatBwdSrc, jgo::EfeatBwdSrcCuda, jgo::BindEfeatBwd<jgo::CudaStream>());
JGO_CUDA_HANDLER(UpdateEfeatBwdDst, jgo::EfeatBwdDstCuda, jgo::BindEfeatBwd<jgo::CudaStream>());
JGO_CUDA_HANDLER(UpdateEfeatBwdEdge, jgo::EfeatBwdEdgeCuda, jgo::BindEfeatBwdEdge<jgo::CudaStream>());
