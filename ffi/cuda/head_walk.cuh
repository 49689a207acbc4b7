// The attention kernels' walk on the chunked row-walk engine (cuda/chunk_walk.cuh): a walker per window of
// chunks and tile of whole heads, and the bucketed online softmax of a chunk's edges with the fold of a split
// row's (acc, m, l) triples in chunk order. Under GAT's backward (cuda/gat_backward.cu), GATv2's forward
// (cuda/gatv2.cu) and TransformerConv's (cuda/mha_simple.cu); GAT's forward shares the softmax (cuda/gat.cu).
//
// Heads: each of a row's H heads of C features takes L lanes (a power of two covering C / kV), a lane kV adjacent
// features of its head: kV = 16 bytes of the feature type, one 128-bit load per gathered row, where C % kV == 0
// and the operands are 16-byte aligned, else one feature a lane. A walker holds 32 / L heads (fewer if H is
// smaller), so a head's dot products are butterflies over its own L lanes (HeadSum: the same bits on each of
// them) and a lane keeps one softmax state, its head's. Heads of more than 32 lanes are not taken
// (HeadLaneFeatures returns 0): their ops keep a group of lanes per (row, head).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/chunk_walk.cuh"
#include "cuda/launch.cuh"
#include "cuda/online_softmax.cuh"
#include "cuda/walk_reduce.cuh"
#include "jgo/math.h"

namespace jgo {
inline namespace JGO_CUDA_PLATFORM {

// A walk of a grouping's chunks by tiles of whole heads: `heads` heads of `lanes` lanes a walker, `tiles`
// walkers a window; stream: the outputs are written past the caches.
struct HeadWalk {
  int n_rows, n_edges, nbr_bound, H, C, HC, group, lanes, heads, tiles;
  bool stream;
  int window_shift;  // windows of 2^window_shift coordinates (WindowShift)
  int64_t windows, slot_count, counter_count;
};

// The features a lane takes: 16 bytes of S where C divides into them and the rows are aligned (128-bit loads),
// else 1; 0 where the engine does not take the heads (C = 0, or over 32 lanes a head).
template <typename S>
int HeadLaneFeatures(int64_t C, bool aligned) {
  constexpr int kV = 16 / int(sizeof(S));
  const int per_lane = C % kV == 0 && aligned ? kV : 1;
  return C > 0 && C <= 32 * int64_t(per_lane) ? per_lane : 0;
}

// The walk of n_rows rows over n_edges positions (neighbours below nbr_bound) by heads of C features, per_lane
// features a lane (HeadLaneFeatures > 0), outputs of out_bytes; an error where a size is beyond 32 bits.
inline ffi::ErrorOr<HeadWalk> HeadWalkOf(const char* name, int64_t n_rows, int64_t n_edges, int64_t nbr_bound,
                                         int64_t H, int64_t C, int per_lane, int64_t out_bytes) {
  if (auto err = EngineSizes(name, {n_rows, n_edges, nbr_bound, H * C}); err.failure())
    return ffi::Unexpected(std::move(err));
  HeadWalk a;
  a.n_rows = static_cast<int>(n_rows);
  a.n_edges = static_cast<int>(n_edges);
  a.nbr_bound = static_cast<int>(nbr_bound);
  a.H = static_cast<int>(H);
  a.C = static_cast<int>(C);
  a.HC = a.H * a.C;
  a.lanes = GroupWidth((C + per_lane - 1) / per_lane);
  a.group = std::min<int>(kWarp, GroupWidth(int64_t(a.lanes) * H));
  a.heads = a.group / a.lanes;
  a.tiles = static_cast<int>((H + a.heads - 1) / a.heads);
  a.stream = StreamStores(out_bytes);
  a.window_shift = WindowShift(n_rows, n_edges, int64_t(a.tiles) * a.group);
  a.windows = Windows(n_rows, n_edges, a.window_shift);
  a.slot_count = SplitScratch::SlotCount(n_edges);
  a.counter_count = SplitScratch::CounterCount(n_edges);
  if (auto err = EngineSizes(name, {a.windows * a.tiles}); err.failure()) return ffi::Unexpected(std::move(err));
  return a;
}

// This lane's head (live: < H) and its features f[v] = head * C + sub * kV + v (ok: inside the head).
template <int kV, bool kVector>
__device__ __forceinline__ LaneFeatures<kV, kVector> HeadFeatures(const HeadWalk& a, int tile, const Walker& w,
                                                                  int& head, int& sub) {
  LaneFeatures<kV, kVector> lf(0, 1, tile, 0);
  sub = w.lane & (a.lanes - 1);
  head = tile * a.heads + w.lane / a.lanes;
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    lf.f[v] = head * a.C + sub * kV + v;
    lf.ok[v] = head < a.H && sub * kV + v < a.C;
  }
  return lf;
}

// Calls fn(window, tile, lf, live, h, sub) for this thread's walkers: the walker's window of chunks and tile of
// heads, this lane's features, whether its head is one (< H), the head (0 if not) and the lane's place in it.
template <int kV, bool kVector, typename Fn>
__device__ __forceinline__ void ForEachHeadTile(const HeadWalk& a, const Walker& w, Fn fn) {
  ForEachWalker(a.windows * a.tiles, a.group, [&](int64_t id) {
    int64_t window;
    int tile, head, sub;
    WindowAndTile(id, a.tiles, window, tile);
    const auto lf = HeadFeatures<kV, kVector>(a, tile, w, head, sub);
    fn(window, tile, lf, head < a.H, head < a.H ? head : 0, sub);
  });
}

// The sum of v over the `lanes` lanes of this lane's head (a butterfly: every lane gets the same bits).
template <typename T>
__device__ __forceinline__ T HeadSum(T v, int lanes, const Walker& w) {
  for (int offset = lanes / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(w.mask, v, offset, w.group);
  return v;
}

// ---------------------------------------------------------------------------------------
// The online softmax of one chunk's edges, a bucket of kGroup edges at a time

// A lane's softmax state over the edges seen: the running maximum m, the sum l of exp(z - m) and the weighted sum
// acc of its kV features' values.
template <typename T, int kV>
struct AttendState {
  T m, l, acc[kV];

  __device__ AttendState() : m(-Infinity<T>()), l(T(0)) {
#pragma unroll
    for (int v = 0; v < kV; ++v) acc[v] = T(0);
  }

  // Takes a bucket's logits (those of the edges in `bits`): their maximum, then one rescale of l and acc
  // (an exp per logit, not two, and one rescale a bucket).
  template <int kGroup>
  __device__ __forceinline__ void Rescale(const T (&z)[kGroup], unsigned bits) {
    T mg = m;
#pragma unroll
    for (int u = 0; u < kGroup; ++u)
      if ((bits >> u) & 1u) mg = SoftmaxMax(mg, z[u]);
    const T scale = mg == m ? T(1) : Exp(m - mg);
    m = mg;
    l *= scale;
#pragma unroll
    for (int v = 0; v < kV; ++v) acc[v] *= scale;
  }

  // The softmax weight of logit z (after Rescale of its bucket), added to l.
  __device__ __forceinline__ T Weigh(T z) {
    const T weight = SoftmaxWeight(z, m, ExpFn{});
    l += weight;
    return weight;
  }

  // acc += weight * x (x in any storage type).
  template <typename X>
  __device__ __forceinline__ void Add(T weight, const X (&x)[kV]) {
#pragma unroll
    for (int v = 0; v < kV; ++v) acc[v] += weight * Widen<T>(x[v]);
  }

  // A split chunk: leaves (acc, m, l) per feature in its slot ([acc | m | l], `width` features each) and arrives at
  // the row's counter; true on the walker that arrives last, whose state is then the fold of the row's chunks in
  // chunk order (the same bits whatever the block order).
  template <bool kVector>
  __device__ bool FoldSplit(const Chunk& c, const SplitScratch& split, int64_t slot_count, int64_t counter_count,
                            int width, const LaneFeatures<kV, kVector>& lf, const Walker& w) {
    const int64_t slot = PartialSlot(c, slot_count), width3 = 3 * int64_t(width);
    T* values = static_cast<T*>(split.values);
    T ms[kV], ls[kV];
#pragma unroll
    for (int v = 0; v < kV; ++v) {
      ms[v] = m;
      ls[v] = l;
    }
    StoreFeatures<kV, kVector>(values + slot * width3, lf, acc, false);
    StoreFeatures<kV, kVector>(values + slot * width3 + width, lf, ms, false);
    StoreFeatures<kV, kVector>(values + slot * width3 + 2 * width, lf, ls, false);
    if (!ArriveLast(split.counters + SplitCounter(c, counter_count, lf.tile), c, w)) return false;
    *this = AttendState();
#pragma unroll 1
    for (int p = 0; p < c.count && lf.ok[0]; ++p) {  // the row's chunks, in order
      const T* part = values + (slot - c.index + p) * width3;
      T scale, scale2;
      SoftmaxMerge(m, l, __ldcg(part + width + lf.f[0]), __ldcg(part + 2 * width + lf.f[0]), scale, scale2, ExpFn{});
#pragma unroll
      for (int v = 0; v < kV; ++v) acc[v] = acc[v] * scale + __ldcg(part + lf.f[v]) * scale2;
    }
    return true;
  }

  // The row's normalised values, in storage type S.
  template <typename S>
  __device__ __forceinline__ void Result(S (&out)[kV]) const {
    const T inv = SoftmaxInverse(l);
#pragma unroll
    for (int v = 0; v < kV; ++v) out[v] = Narrow<S>(acc[v] * inv);
  }
};

// ---------------------------------------------------------------------------------------
// Split rows' sums

// A split chunk's kN accumulators of the lane's kV features: left in its slot ([kN x width] values), then the
// arrival at the row's counter; true on the walker that arrives last, whose accumulators then hold the sums of
// the row's chunks, added in chunk order (the same bits whatever the block order).
template <int kN, int kV, bool kVector, typename T>
__device__ bool FoldSplitSums(const Chunk& c, const SplitScratch& split, int64_t slot_count, int64_t counter_count,
                              int width, const LaneFeatures<kV, kVector>& lf, const Walker& w, T (&acc)[kN][kV]) {
  const int64_t slot = PartialSlot(c, slot_count), stride = kN * int64_t(width);
  T* values = static_cast<T*>(split.values);
#pragma unroll
  for (int n = 0; n < kN; ++n) StoreFeatures<kV, kVector>(values + slot * stride + n * width, lf, acc[n], false);
  if (!ArriveLast(split.counters + SplitCounter(c, counter_count, lf.tile), c, w)) return false;
#pragma unroll
  for (int n = 0; n < kN; ++n)
#pragma unroll
    for (int v = 0; v < kV; ++v) acc[n][v] = T(0);
#pragma unroll 1
  for (int p = 0; p < c.count; ++p) {  // the row's chunks, in order
    const T* part = values + (slot - c.index + p) * stride;
#pragma unroll
    for (int n = 0; n < kN; ++n)
#pragma unroll
      for (int v = 0; v < kV; ++v)
        if (lf.ok[v]) acc[n][v] += __ldcg(part + n * width + lf.f[v]);
  }
  return true;
}

}  // namespace JGO_CUDA_PLATFORM
}  // namespace jgo
