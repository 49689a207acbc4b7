// CUDA handler of the softmax over each row's edges, jgo_edge_softmax, on the chunked row-walk engine
// (chunk_walk.cuh). Same operands and results as the CPU twin (cpu/message_passing.cc).
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

namespace jgo {
namespace {

// ---------------------------------------------------------------------------------------
// jgo_edge_softmax on the engine: lanes over a chunk's edges (a walker of G lanes, G from the graph's
// average degree), the heads kV at a time (128-bit loads where H allows). Each lane runs an online softmax
// over its edges, positions lo + lane + G t in order, kInFlight at a time: the group's maximum first, then one
// rescale of its sum per group (an exp per logit, not two); the walker's lanes merge
// their (max, sum) pairs by a butterfly in a fixed tree (the merge is symmetric, so every lane holds the
// same bits) and write exp(z - max) / sum in one pass. A split row's chunks leave their (max, sum) per head
// in scratch; the last to arrive folds them in chunk order into the row's shift and inverse sum, and a
// second launch over those chunks writes their weights. An edge whose id is out of range is skipped.

struct SoftmaxWalk {
  int n_rows, n_edges, H, group;
  bool stream, tail;  // tail: write the padding edges' zeros (a checked graph: no zero fill first)
  int window_shift;  // windows of 2^window_shift coordinates (WindowShift)
  int64_t windows, slot_count, counter_count;
};

// Where a split row's chunk left its state: positions [lo, hi), the row's counter (lo < 0: no chunk).
struct SplitChunk {
  int lo, hi, counter;
};

struct ExpOf {
  template <typename T>
  __device__ T operator()(T x) const { return Exp(x); }
};

// Calls fn(t, e, live) for this lane's edges among positions [lo, hi) of a walker of `group` lanes, kInFlight
// at a time, each with its clamped edge id (live: in the chunk and in range).
template <typename I, typename Fn>
__device__ __forceinline__ void ForLaneEdges(const I* __restrict__ eid, int lo, int hi, int n_edges, const Walker& w,
                                             Fn fn) {
  for (int kb = lo + w.lane; kb < hi; kb += w.group * kInFlight) {
    int e[kInFlight];
    bool live[kInFlight];
#pragma unroll
    for (int t = 0; t < kInFlight; ++t) {
      const int k = kb + t * w.group;
      const int64_t raw = k < hi ? static_cast<int64_t>(eid[k]) : -1;
      e[t] = ClampIndex(raw, n_edges);
      live[t] = k < hi && raw == e[t];
    }
    fn(e, live);
  }
}

// The lane's kV heads from h0 of the logits (or weights) row of edge e.
template <int kV, typename T>
__device__ __forceinline__ void LoadHeads(const T* __restrict__ x, int e, int H, int h0, T (&z)[kV]) {
  if constexpr (kV > 1) {
    const Vec<T, kV> v = LoadVec<T, kV>(x + int64_t(e) * H + h0);
#pragma unroll
    for (int i = 0; i < kV; ++i) z[i] = v.v[i];
  } else {
    z[0] = __ldg(x + int64_t(e) * H + h0);
  }
}

// Writes the weights of heads [h0, h0 + kV) of the edges of positions [lo, hi): exp(z - shift) * inv.
template <int kV, typename T, typename I>
__device__ __forceinline__ void WriteSoftmax(const I* __restrict__ eid, const T* __restrict__ logits,
                                             T* __restrict__ out, int lo, int hi, const SoftmaxWalk& a, int h0,
                                             const T (&shift)[kV], const T (&inv)[kV], const Walker& w) {
  ForLaneEdges(eid, lo, hi, a.n_edges, w, [&](const int (&e)[kInFlight], const bool (&live)[kInFlight]) {
    T z[kInFlight][kV];
#pragma unroll
    for (int t = 0; t < kInFlight; ++t)
      if (live[t]) LoadHeads<kV>(logits, e[t], a.H, h0, z[t]);
#pragma unroll
    for (int t = 0; t < kInFlight; ++t) {
      if (!live[t]) continue;
      Vec<T, kV> y;
#pragma unroll
      for (int v = 0; v < kV; ++v) y.v[v] = SoftmaxWeight(z[t][v], shift[v], ExpOf{}) * inv[v];
      StoreVec<T, kV>(out + int64_t(e[t]) * a.H + h0, y, a.stream);
    }
  });
}

// MLP floor 6, measured (nvcc 13.0, sm_90, 2026-11-29, every instantiation): a lane's 8 edge ids are
// loaded one by one and its first logit load (aligned: 128 bits, else scalar, chosen per edge) issued
// after the 6th. 8 is open work (issue 32): the ids staged before the loop, the alignment chosen once.
// gpu-model: engine mlp>=6 vector-if kV>1
template <typename T, typename I, int kV>
__global__ void __launch_bounds__(kBlock, 1) EdgeSoftmaxKernel(SoftmaxWalk a, const I* __restrict__ offsets,
                                                               const I* __restrict__ eid, const T* __restrict__ logits,
                                                               T* __restrict__ out, SplitScratch split,
                                                               SplitChunk* __restrict__ chunks, T* __restrict__ stats) {
  const Walker w = ThisWalker(a.group);
  ForEachWalker(a.windows, a.group, [&](int64_t window) {
    if (a.tail) {
      ForEachTailPosition(offsets, a.n_rows, a.n_edges, window, a.window_shift, [&](int k) {
        for (int h = w.lane; h < a.H; h += w.group) out[int64_t(k) * a.H + h] = T(0);
      });
    }
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, a.window_shift, w, [&](const Chunk& c) {
      const int64_t slot = PartialSlot(c, a.slot_count);
      for (int h0 = 0; h0 < a.H; h0 += kV) {
        T m[kV], l[kV];
#pragma unroll
        for (int v = 0; v < kV; ++v) {
          m[v] = -Infinity<T>();
          l[v] = T(0);
        }
        ForLaneEdges(eid, c.lo, c.hi, a.n_edges, w, [&](const int (&e)[kInFlight], const bool (&live)[kInFlight]) {
          T z[kInFlight][kV];
#pragma unroll
          for (int t = 0; t < kInFlight; ++t)
            if (live[t]) LoadHeads<kV>(logits, e[t], a.H, h0, z[t]);
#pragma unroll
          for (int v = 0; v < kV; ++v) {  // the group's maximum, then one rescale of the sum per group
            T mg = m[v], sum = T(0);
#pragma unroll
            for (int t = 0; t < kInFlight; ++t)
              if (live[t]) mg = SoftmaxMax(mg, z[t][v]);
#pragma unroll
            for (int t = 0; t < kInFlight; ++t)
              if (live[t]) sum += SoftmaxWeight(z[t][v], mg, ExpOf{});
            l[v] = l[v] * (mg == m[v] ? T(1) : Exp(m[v] - mg)) + sum;
            m[v] = mg;
          }
        });
        for (int offset = w.group / 2; offset > 0; offset /= 2) {
#pragma unroll
          for (int v = 0; v < kV; ++v) {
            const T m2 = __shfl_xor_sync(w.mask, m[v], offset, w.group);
            const T l2 = __shfl_xor_sync(w.mask, l[v], offset, w.group);
            T scale, scale2;
            SoftmaxMerge(m[v], l[v], m2, l2, scale, scale2, ExpOf{});
          }
        }
        if (!c.split()) {
          T shift[kV], inv[kV];
#pragma unroll
          for (int v = 0; v < kV; ++v) {
            shift[v] = SoftmaxShift(m[v]);
            inv[v] = SoftmaxInverse(l[v]);
          }
          WriteSoftmax<kV>(eid, logits, out, c.lo, c.hi, a, h0, shift, inv, w);
        } else if (w.lane == 0) {
          T* state = static_cast<T*>(split.values) + slot * 2 * a.H;
#pragma unroll
          for (int v = 0; v < kV; ++v) {
            state[h0 + v] = m[v];
            state[a.H + h0 + v] = l[v];
          }
        }
      }
      if (!c.split()) return;
      const int64_t counter = SplitCounter(c, a.counter_count, 0);  // one walker per chunk: every head
      if (w.lane == 0) chunks[slot] = SplitChunk{c.lo, c.hi, static_cast<int>(counter)};
      if (!ArriveLast(split.counters + counter, c, w)) return;
      for (int h = w.lane; h < a.H; h += w.group) {  // the row's state, folded in chunk order
        T m = -Infinity<T>(), l = T(0);
        for (int q = 0; q < c.count; ++q) {
          const T* state = static_cast<const T*>(split.values) + (slot - c.index + q) * 2 * a.H;
          T scale, scale2;
          SoftmaxMerge(m, l, __ldcg(state + h), __ldcg(state + a.H + h), scale, scale2, ExpOf{});
        }
        stats[counter * 2 * a.H + h] = SoftmaxShift(m);
        stats[counter * 2 * a.H + a.H + h] = SoftmaxInverse(l);
      }
    });
  });
}

// The weights of the split rows' chunks, after EdgeSoftmaxKernel left their rows' shift and inverse sum.
// MLP floor 6 (6-7 measured, nvcc 13.0, sm_90, 2026-11-29): EdgeSoftmaxKernel's per-lane edge loop.
// gpu-model: engine mlp>=6 vector-if kV>1
template <typename T, typename I, int kV>
__global__ void __launch_bounds__(kBlock, 1) SplitSoftmaxKernel(SoftmaxWalk a, const I* __restrict__ eid,
                                                                const T* __restrict__ logits, T* __restrict__ out,
                                                                const SplitChunk* __restrict__ chunks,
                                                                const T* __restrict__ stats) {
  const Walker w = ThisWalker(a.group);
  ForEachWalker(a.slot_count, a.group, [&](int64_t slot) {
    const SplitChunk c = chunks[slot];
    if (c.lo < 0) return;
    for (int h0 = 0; h0 < a.H; h0 += kV) {
      T shift[kV], inv[kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) {
        shift[v] = stats[int64_t(c.counter) * 2 * a.H + h0 + v];
        inv[v] = stats[int64_t(c.counter) * 2 * a.H + a.H + h0 + v];
      }
      WriteSoftmax<kV>(eid, logits, out, c.lo, c.hi, a, h0, shift, inv, w);
    }
  });
}

template <typename T, typename I>
ffi::Error SoftmaxTyped(cudaStream_t stream, CudaScratch& scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer eid,
                        ffi::AnyBuffer logits, ffi::AnyBuffer out, bool checked) {
  constexpr const char* kName = "jgo_edge_softmax";
  constexpr int kV = 16 / int(sizeof(T));
  const int64_t n_rows = static_cast<int64_t>(offsets.element_count()) - 1;
  const int64_t n_edges = static_cast<int64_t>(eid.element_count());
  const int64_t heads = n_edges == 0 ? 1 : static_cast<int64_t>(logits.element_count()) / n_edges;
  if (!checked || n_rows == 0) {  // edge ids that are no permutation may leave rows no position names: 0 there
    if (auto err = ZeroFill(kName, out.untyped_data(), out.size_bytes(), stream); err.failure()) return err;
  }
  if (n_edges == 0 || heads == 0 || n_rows == 0) return ffi::Error::Success();
  if (auto err = EngineSizes(kName, {n_rows, n_edges, heads}); err.failure()) return err;
  SoftmaxWalk a;
  a.n_rows = static_cast<int>(n_rows);
  a.n_edges = static_cast<int>(n_edges);
  a.H = static_cast<int>(heads);
  a.group = std::max(4, GroupWidth((n_edges + n_rows - 1) / n_rows));  // lanes over a row's edges
  a.stream = StreamStores(static_cast<int64_t>(out.size_bytes()));
  a.tail = checked;
  a.window_shift = WindowShift(n_rows, n_edges, a.group);
  a.windows = Windows(n_rows, n_edges, a.window_shift);
  a.slot_count = SplitScratch::SlotCount(n_edges);
  a.counter_count = SplitScratch::CounterCount(n_edges);
  const bool vector = heads % kV == 0 && Aligned(logits.untyped_data()) && Aligned(out.untyped_data());
  // scratch: (max, sum) per head of each split chunk, the chunks' places, and each split row's (shift, 1 / sum)
  auto split = SplitScratchFor(kName, scratch, stream, n_edges, 2 * heads, sizeof(T), false, 1);
  if (split.has_error()) return split.error();
  SplitChunk* chunks = nullptr;
  T* stats = nullptr;
  if (SplitScratch::Needed(n_edges)) {
    const int64_t chunk_bytes = a.slot_count * int64_t(sizeof(SplitChunk));
    const int64_t stat_bytes = a.counter_count * 2 * heads * int64_t(sizeof(T));
    auto mem = ScratchBytes(scratch, static_cast<size_t>(chunk_bytes + stat_bytes), 256);
    if (!mem.has_value()) return ffi::Error::Internal("jaxgraphops: jgo_edge_softmax: out of scratch memory");
    chunks = static_cast<SplitChunk*>(*mem);
    stats = reinterpret_cast<T*>(static_cast<char*>(*mem) + chunk_bytes);
    const size_t bytes = static_cast<size_t>(chunk_bytes);
    if (auto err = Status(kName, cudaMemsetAsync(chunks, 0xff, bytes, stream)); err.failure()) return err;
  }
  auto first = vector ? EdgeSoftmaxKernel<T, I, kV> : EdgeSoftmaxKernel<T, I, 1>;
  if (auto err = LaunchBlocks(kName, first, WalkerBlocks(a.windows, a.group), 0, stream, a, offsets.typed_data<I>(),
                              eid.typed_data<I>(), logits.typed_data<T>(), out.typed_data<T>(), *split, chunks, stats);
      err.failure())
    return err;
  if (chunks == nullptr) return ffi::Error::Success();
  auto second = vector ? SplitSoftmaxKernel<T, I, kV> : SplitSoftmaxKernel<T, I, 1>;
  return LaunchBlocks(kName, second, WalkerBlocks(a.slot_count, a.group), 0, stream, a, eid.typed_data<I>(),
                      logits.typed_data<T>(), out.typed_data<T>(), static_cast<const SplitChunk*>(chunks),
                      static_cast<const T*>(stats));
}

ffi::Error EdgeSoftmaxCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer eid,
                           ffi::AnyBuffer logits, ffi::Result<ffi::AnyBuffer> out, bool checked) {
  if (auto err = CheckSoftmax(offsets, eid, logits, *out); err.failure()) return err;
  return DispatchTypes(logits.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return SoftmaxTyped<decltype(t), decltype(i)>(stream, scratch, offsets, eid, logits, *out, checked);
  });
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER_NO_TRAITS(EdgeSoftmax, jgo::EdgeSoftmaxCuda,
                           jgo::BindEdgeSoftmax<jgo::CudaStream, jgo::CudaScratch>());
