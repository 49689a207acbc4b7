// The forward walk of the fused attention kernels for heads the engine does not take (over 32 lanes a head:
// cuda/head_walk.cuh): one (destination row, head) handled by a group of lanes with an online softmax over its
// in-edges (GATv2's). kVec also serves TransformerConv's and the backward kernels of such heads; ExpFn every
// attention kernel.
#pragma once

#include <cstdint>

#include "cuda/launch.cuh"
#include "cuda/storage.cuh"
#include "jgo/attention.h"

namespace jgo {
inline namespace JGO_CUDA_PLATFORM {

constexpr int kVec = 4;  // features held in registers per lane; wider heads take several chunks

struct ExpFn {
  template <typename T>
  __device__ T operator()(T x) const { return Exp(x); }
};

// Attention of one (row, head) over the in-edges [begin, end): logit(j, e) gives the logit of
// the edge from j (the same value on every lane of the group), and the softmax-weighted rows
// x_head(j)[0, C) (storage type S) are summed in T into out_rh[0, C); lse_rh gets the
// log-sum-exp (0 for no edges). factor(e) multiplies the normalised weight of edge e (attention
// dropout, jgo/attention.h; 1 without): the normaliser takes the undropped weights.
// Each lane accumulates kVec features in registers; C > kVec * group takes several chunks,
// each re-walking the edges. Edges whose neighbour or edge id is out of range are skipped.
template <typename T, typename I, typename Logit, typename Row, typename Factor, typename S>
__device__ void AttendRow(const I* nbr, const I* eid, int64_t begin, int64_t end, int64_t n_src, int64_t n_edges,
                          int64_t C, int lane, int group, Logit logit, Row x_head, Factor factor, S* out_rh,
                          T* lse_rh) {
  for (int64_t c0 = 0; c0 < C || c0 == 0; c0 += int64_t(kVec) * group) {
    T acc[kVec];
#pragma unroll
    for (int v = 0; v < kVec; ++v) acc[v] = T(0);
    T m = -Infinity<T>(), l = T(0);
    for (int64_t k = begin; k < end; ++k) {
      const int64_t j = nbr[k], e = eid[k];
      if (!InRange(j, n_src) || !InRange(e, n_edges)) continue;
      T scale, weight;
      OnlineSoftmaxStep(m, l, logit(j, e), scale, weight, ExpFn{});
      weight *= factor(e);
      const S* xh = x_head(j);
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        const int64_t c = c0 + lane + int64_t(v) * group;
        acc[v] = acc[v] * scale + (c < C ? weight * Widen<T>(xh[c]) : T(0));
      }
    }
    const T inv = SoftmaxInverse(l);
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const int64_t c = c0 + lane + int64_t(v) * group;
      if (c < C) out_rh[c] = Narrow<S>(acc[v] * inv);
    }
    if (c0 == 0 && lane == 0) *lse_rh = SoftmaxLse(m, l);
    if (C == 0) break;
  }
}

}  // namespace JGO_CUDA_PLATFORM
}  // namespace jgo
