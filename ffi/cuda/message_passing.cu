// CUDA handlers of the generic message-passing kernels: jgo_spmm (neighbourhood reduce over a
// CSR/CSC), jgo_sddmm (edge-wise binary op / dot) and jgo_edge_softmax, all on the chunked row-walk
// engine (chunk_walk.cuh). Same operands, attributes and results as the CPU twin (cpu/message_passing.cc),
// same per-edge math (jgo/math.h).
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
#include "cuda/cusparse_spmm.cuh"
#include "cuda/launch.cuh"
#include "cuda/walk_reduce.cuh"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/math.h"
#include "jgo/pool.h"

namespace jgo {
namespace {

// ---------------------------------------------------------------------------------------
// jgo_spmm: the engine's neighbourhood reduce (walk_reduce.cuh)

template <typename T, typename I>
ffi::Error SpmmTyped(cudaStream_t stream, CudaScratch& scratch, const SpmmArgs& a, ffi::AnyBuffer offsets,
                     ffi::AnyBuffer nbr, ffi::AnyBuffer eid, ffi::AnyBuffer node, ffi::AnyBuffer edge,
                     ffi::AnyBuffer mask_arg, ffi::AnyBuffer out, ffi::AnyBuffer arg_out, bool checked) {
  ReduceProblem<T, I> p;
  p.offsets = offsets.typed_data<I>();
  p.nbr = nbr.typed_data<I>();
  p.eid = eid.typed_data<I>();
  p.node = node.typed_data<T>();
  p.edge = edge.typed_data<T>();
  p.mask_arg = a.mask == Mask::kNone ? nullptr : mask_arg.typed_data<I>();
  p.out = out.typed_data<T>();
  p.arg_out = (a.reduce == Reduce::kMax || a.reduce == Reduce::kMin) ? arg_out.typed_data<I>() : nullptr;
  static_cast<SpmmArgs&>(p) = a;  // the operation and its shape
  constexpr const char* kName = "jgo_spmm";
  bool ran = false;
  if (auto err = MaybeCusparse(kName, stream, scratch, p, checked, ran); err.failure() || ran) return err;
  if (!checked) {  // offsets out of order may leave rows no walker owns: 0 (and no winning edge) there
    if (auto err = ZeroFill(kName, out.untyped_data(), out.size_bytes(), stream); err.failure()) return err;
    if (p.arg_out != nullptr) {
      if (auto err = Status(kName, cudaMemsetAsync(p.arg_out, 0xff, arg_out.size_bytes(), stream)); err.failure())
        return err;
    }
  }
  return LaunchReduce(kName, stream, scratch, p);
}

ffi::Error SpmmCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                    ffi::AnyBuffer eid, ffi::AnyBuffer node, ffi::AnyBuffer edge, ffi::AnyBuffer mask_arg,
                    ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> arg_out, int64_t op, int64_t reduce,
                    int64_t mask, ffi::Span<const int64_t> dims, ffi::Span<const int64_t> node_strides,
                    ffi::Span<const int64_t> edge_strides, bool checked) {
  auto args = CheckSpmm(offsets, nbr, eid, node, edge, mask_arg, *out, *arg_out, op, reduce, mask, dims,
                        node_strides, edge_strides);
  if (args.has_error()) return args.error();
  return DispatchTypes(out->element_type(), offsets.element_type(), [&](auto t, auto i) {
    return SpmmTyped<decltype(t), decltype(i)>(stream, scratch, *args, offsets, nbr, eid, node, edge, mask_arg, *out,
                                               *arg_out, checked);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_sddmm on the engine: the chunk walk writes the output row of each position's edge once (no
// reduction, and no hub: a chunk has at most 256 edges). Host side, the operands become P and Q
// (add and mul commute, bit for bit): P is read per edge through the position's row, neighbour or edge
// id; Q, when used, either per chunk (kQRow: the walked row's, loaded once) or per edge like P. Lanes
// over the features, or, for a dot product, over the d2 axis with a fixed butterfly per output element.
// An edge whose ids are out of range gets a row of 0 (the output is zeroed first on graphs not checked).

enum class SddmmForm : int { kCopy, kAdd, kMul, kDot };

struct SddmmWalk {
  int n_rows, n_edges, F, F01, axis, group, tiles, nbr_bound, p_len, q_len;
  Target p_source, q_source;
  Dims3 dims;
  Strides3 p_strides, q_strides;
  bool stream, tail;  // tail: write the padding edges' zeros (a checked graph: no zero fill first)
  int64_t windows;
};

// The row of an operand that edge (row, j, e) reads.
__device__ __forceinline__ int SourceRow(Target t, int row, int j, int e) {
  return t == Target::kRow ? row : t == Target::kNbr ? j : e;
}

// MLP floor 2, measured (nvcc 13.0, sm_90, 2026-11-29): 8-65 loads in flight except the float64 dot on the
// vector path (2 in all four of its instantiations). Raising that to 8 is open work (issue 32).
// gpu-model: engine mlp>=2 vector-if kVector
template <typename T, typename I, SddmmForm K, Mask M, bool kVector, bool kQRow>
__global__ void __launch_bounds__(kBlock, 1) SddmmKernel(SddmmWalk s, const I* __restrict__ offsets,
                                                         const I* __restrict__ nbr, const I* __restrict__ eid,
                                                         const T* __restrict__ p, const T* __restrict__ q,
                                                         const I* __restrict__ mask_arg, T* __restrict__ out) {
  constexpr int kV = 16 / int(sizeof(T));
  constexpr bool kQ = K != SddmmForm::kCopy;
  constexpr bool kQEdge = kQ && !kQRow;  // Q gathered per edge too
  constexpr bool kDot = K == SddmmForm::kDot;
  constexpr int kGroup = kQEdge ? kInFlight / 2 : kInFlight;
  const Walker w = ThisWalker(s.group);
  const Positions<I, T> pos{nbr, eid, nullptr, s.nbr_bound, s.n_edges, 0};
  auto combine = [](T a, T b) {
    if constexpr (K == SddmmForm::kAdd) return Message<Op::kAdd>::apply(a, b);
    else if constexpr (K == SddmmForm::kCopy) return a;
    else return Message<Op::kMul>::apply(a, b);
  };
  // the lane's place on the lane axis: the features, or d2 for a dot product
  const int width = kDot ? s.group * kV : s.F;
  ForEachWalkerTile<kV, kVector>(s.windows, s.tiles, width, w, [&](int64_t window, const auto& lf) {
    const Dims3 flat{1, 1, s.F};
    const LaneRows<kV, kVector, T> ps(p, s.p_len, lf, s.p_strides, s.dims, !kDot);
    const LaneRows<kV, kVector, T> qs(q, s.q_len, lf, s.q_strides, s.dims, kQ && !kDot);
    const LaneRows<kV, kVector, I> masks(mask_arg, s.F, lf, Strides3{0, 0, 1}, flat, M == Mask::kByNbr && !kDot);
    if (s.tail) {
      ForEachTailPosition(offsets, s.n_rows, s.n_edges, window, [&](int k) {
        const T zero[kV] = {};
        if constexpr (kDot) {
          for (int f01 = w.lane; f01 < s.F01; f01 += s.group) out[int64_t(k) * s.F01 + f01] = T(0);  // one tile
        } else {
          StoreFeatures<kV, kVector>(out + int64_t(k) * s.F, lf, zero, s.stream);
        }
      });
    }
    ForEachChunk(offsets, s.n_rows, s.n_edges, window, w, [&](const Chunk& c) {
      T qr[kV] = {};
      if constexpr (kQRow && !kDot) qs.Load(c.row, lf.ok, qr);
      int64_t row_mask[kV];
      if constexpr (M == Mask::kByRow && !kDot) {
#pragma unroll
        for (int v = 0; v < kV; ++v) row_mask[v] = lf.ok[v] ? mask_arg[int64_t(c.row) * s.F + lf.f[v]] : -2;
      }
      WalkPositions<true, true, false, kGroup>(pos, c.lo, c.hi, w, [&](const Staged<T> (&st)[kGroup],
                                                                        unsigned bits) {
        if constexpr (!kDot) {
          T pv[kGroup][kV], qv[kGroup][kV];
          I mv[kGroup][kV];
#pragma unroll
          for (int u = 0; u < kGroup; ++u) {  // every load of the group before the first is used
            if (!((bits >> u) & 1u)) continue;
            ps.Load(SourceRow(s.p_source, c.row, st[u].j, st[u].e), lf.ok, pv[u]);
            if constexpr (kQEdge) qs.Load(SourceRow(s.q_source, c.row, st[u].j, st[u].e), lf.ok, qv[u]);
            if constexpr (M == Mask::kByNbr) masks.Load(st[u].j, lf.ok, mv[u]);
          }
#pragma unroll
          for (int u = 0; u < kGroup; ++u) {
            if (!((bits >> u) & 1u)) continue;
            T r[kV];
#pragma unroll
            for (int v = 0; v < kV; ++v) {
              r[v] = combine(pv[u][v], kQRow ? qr[v] : qv[u][v]);
              if constexpr (M != Mask::kNone) {
                const int64_t winner = M == Mask::kByRow ? row_mask[v] : static_cast<int64_t>(mv[u][v]);
                if (winner != st[u].e) r[v] = T(0);
              }
            }
            StoreFeatures<kV, kVector>(out + int64_t(st[u].e) * s.F, lf, r, s.stream);
          }
        } else {
          // out[e, f01] = sum over d2 of P * Q: the group's loads for one f01 (and d2 tile) at a time, a fixed
          // butterfly over the walker's lanes per edge
          int i0 = 0, i1 = 0;
          for (int f01 = 0; f01 < s.F01; ++f01) {
            const int64_t pb = i0 * s.p_strides.s0 + i1 * s.p_strides.s1;
            const int64_t qb = i0 * s.q_strides.s0 + i1 * s.q_strides.s1;
            T part[kGroup] = {};
            for (int t0 = 0; t0 < s.axis; t0 += s.group * kV) {  // a d2 longer than the walker's lanes cover
              bool in[kV];
              int po[kV], qo[kV];
#pragma unroll
              for (int v = 0; v < kV; ++v) {
                const int i2 = t0 + lf.f[v];
                in[v] = i2 < s.axis;
                po[v] = int(pb + i2 * s.p_strides.s2);
                qo[v] = int(qb + i2 * s.q_strides.s2);
              }
              T pv[kGroup][kV], qv[kGroup][kV];
#pragma unroll
              for (int u = 0; u < kGroup; ++u) {
                if (!((bits >> u) & 1u)) continue;
                const T* pr = ps.Row(SourceRow(s.p_source, c.row, st[u].j, st[u].e));
                const T* qrow = qs.Row(SourceRow(s.q_source, c.row, st[u].j, st[u].e));
                if constexpr (kVector) {
                  if (in[0]) {
                    const Vec<T, kV> x = LoadVec<T, kV>(pr + po[0]), y = LoadVec<T, kV>(qrow + qo[0]);
#pragma unroll
                    for (int v = 0; v < kV; ++v) {
                      pv[u][v] = x.v[v];
                      qv[u][v] = y.v[v];
                    }
                  }
                } else {
#pragma unroll
                  for (int v = 0; v < kV; ++v) {
                    if (!in[v]) continue;
                    pv[u][v] = __ldg(pr + po[v]);
                    qv[u][v] = __ldg(qrow + qo[v]);
                  }
                }
              }
#pragma unroll
              for (int u = 0; u < kGroup; ++u) {
                if (!((bits >> u) & 1u)) continue;
#pragma unroll
                for (int v = 0; v < kV; ++v) {
                  bool keep = in[v];
                  if constexpr (M != Mask::kNone) {
                    const int64_t m = M == Mask::kByRow ? c.row : st[u].j;
                    keep = keep && mask_arg[m * s.F + int64_t(f01) * s.axis + t0 + lf.f[v]] == st[u].e;
                  }
                  if (keep) part[u] += Message<Op::kMul>::apply(pv[u][v], qv[u][v]);
                }
              }
            }
#pragma unroll
            for (int u = 0; u < kGroup; ++u) {
              const T total = GroupSum(part[u], w.mask, w.group);
              if (((bits >> u) & 1u) && w.lane == 0) {
                T* o = out + int64_t(st[u].e) * s.F01 + f01;
                if (s.stream) {
                  __stcs(o, total);
                } else {
                  *o = total;
                }
              }
            }
            if (++i1 == s.dims.d1) {
              i1 = 0;
              ++i0;
            }
          }
        }
      });
    });
  });
}

template <typename T, typename I>
using SddmmKernelFn = void (*)(SddmmWalk, const I*, const I*, const I*, const T*, const T*, const I*, T*);

template <typename T, typename I, SddmmForm K, Mask M>
SddmmKernelFn<T, I> PickSddmmPath(bool vector, bool q_row) {
  if constexpr (M != Mask::kNone) {  // the derivative forms of max/min: the strided path only
    return q_row ? SddmmKernel<T, I, K, M, false, true> : SddmmKernel<T, I, K, M, false, false>;
  } else if constexpr (K == SddmmForm::kCopy) {
    return vector ? SddmmKernel<T, I, K, M, true, false> : SddmmKernel<T, I, K, M, false, false>;
  } else {
    if (vector) return q_row ? SddmmKernel<T, I, K, M, true, true> : SddmmKernel<T, I, K, M, true, false>;
    return q_row ? SddmmKernel<T, I, K, M, false, true> : SddmmKernel<T, I, K, M, false, false>;
  }
}

template <typename T, typename I, Mask M>
SddmmKernelFn<T, I> PickSddmmForm(SddmmForm form, bool vector, bool q_row) {
  switch (form) {
    case SddmmForm::kCopy: return PickSddmmPath<T, I, SddmmForm::kCopy, M>(vector, q_row);
    case SddmmForm::kAdd: return PickSddmmPath<T, I, SddmmForm::kAdd, M>(vector, q_row);
    case SddmmForm::kMul: return PickSddmmPath<T, I, SddmmForm::kMul, M>(vector, q_row);
    case SddmmForm::kDot: break;
  }
  return PickSddmmPath<T, I, SddmmForm::kDot, M>(vector, q_row);
}

template <typename T, typename I>
ffi::Error SddmmTyped(cudaStream_t stream, const SddmmArgs& s, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                      ffi::AnyBuffer eid, ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::AnyBuffer mask_arg,
                      ffi::AnyBuffer out, bool checked) {
  constexpr const char* kName = "jgo_sddmm";
  constexpr int kV = 16 / int(sizeof(T));
  const int64_t F = s.dims.size();
  if (!checked) {  // edge ids that are no permutation may leave rows no position names: 0 there
    if (auto err = ZeroFill(kName, out.untyped_data(), out.size_bytes(), stream); err.failure()) return err;
  }
  if (F == 0 || s.n_edges == 0) return ffi::Error::Success();
  if (auto err = EngineSizes(kName, {s.n_rows, s.n_edges, F, s.a_len, s.b_len, s.a_rows, s.b_rows}); err.failure())
    return err;
  // P and Q: the used operands, Q the walked row's where one is (add and mul commute)
  const bool use_a = s.op != Op::kCopyEdge, use_b = s.op != Op::kCopyNode;
  const bool swap = !use_a || (use_b && s.a_target == Target::kRow && s.b_target != Target::kRow);
  const ffi::AnyBuffer& pb = swap ? rhs : lhs;
  const ffi::AnyBuffer& qb = swap ? lhs : rhs;
  SddmmWalk w;
  w.p_source = swap ? s.b_target : s.a_target;
  w.q_source = swap ? s.a_target : s.b_target;
  w.p_strides = swap ? s.b_strides : s.a_strides;
  w.q_strides = swap ? s.a_strides : s.b_strides;
  w.p_len = static_cast<int>(swap ? s.b_len : s.a_len);
  w.q_len = static_cast<int>(swap ? s.a_len : s.b_len);
  const SddmmForm form = s.dot ? SddmmForm::kDot
                         : !(use_a && use_b) ? SddmmForm::kCopy
                         : s.op == Op::kAdd ? SddmmForm::kAdd : SddmmForm::kMul;
  const bool q_row = form != SddmmForm::kCopy && w.q_source == Target::kRow;
  w.n_rows = static_cast<int>(s.n_rows);
  w.n_edges = static_cast<int>(s.n_edges);
  w.F = static_cast<int>(F);
  w.F01 = static_cast<int>(s.dims.d0 * s.dims.d1);
  w.axis = static_cast<int>(s.dot ? s.dims.d2 : F);
  w.dims = s.dims;
  w.nbr_bound = static_cast<int>(std::min<int64_t>(s.nbr_bound, kMaxIndex));
  auto contiguous = [&](const Strides3& st, int len, const ffi::AnyBuffer& b) {
    const bool lanes_flat = s.dot ? (s.dims.d2 == 1 || st.s2 == 1) && st.s1 % kV == 0 && st.s0 % kV == 0
                                  : Contiguous(st, s.dims);
    return lanes_flat && len % kV == 0 && Aligned(b.untyped_data());
  };
  const bool vector = w.axis % kV == 0 && contiguous(w.p_strides, w.p_len, pb) &&
                      (form == SddmmForm::kCopy || contiguous(w.q_strides, w.q_len, qb)) &&
                      Aligned(out.untyped_data());
  w.group = WalkerLanes(w.axis, kV);
  w.tiles = s.dot ? 1 : static_cast<int>((w.axis + int64_t(w.group) * kV - 1) / (int64_t(w.group) * kV));
  w.stream = StreamStores(static_cast<int64_t>(out.size_bytes()));
  w.tail = checked;
  w.windows = Windows(s.n_rows, s.n_edges);
  const I* m = s.mask == Mask::kNone ? nullptr : mask_arg.typed_data<I>();
  SddmmKernelFn<T, I> kernel;
  switch (s.mask) {
    case Mask::kByRow: kernel = PickSddmmForm<T, I, Mask::kByRow>(form, false, q_row); break;
    case Mask::kByNbr: kernel = PickSddmmForm<T, I, Mask::kByNbr>(form, false, q_row); break;
    default: kernel = PickSddmmForm<T, I, Mask::kNone>(form, vector, q_row); break;
  }
  return LaunchBlocks(kName, kernel, WalkerBlocks(w.windows * w.tiles, w.group), 0, stream, w, offsets.typed_data<I>(),
                      nbr.typed_data<I>(), eid.typed_data<I>(), pb.typed_data<T>(), qb.typed_data<T>(), m,
                      out.typed_data<T>());
}

ffi::Error SddmmCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                     ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::AnyBuffer mask_arg, ffi::Result<ffi::AnyBuffer> out,
                     int64_t op, int64_t lhs_target, int64_t rhs_target, bool dot, int64_t mask,
                     ffi::Span<const int64_t> dims, ffi::Span<const int64_t> lhs_strides,
                     ffi::Span<const int64_t> rhs_strides, bool checked) {
  auto args = CheckSddmm(offsets, nbr, eid, lhs, rhs, mask_arg, *out, op, lhs_target, rhs_target, dot, mask, dims,
                         lhs_strides, rhs_strides);
  if (args.has_error()) return args.error();
  return DispatchTypes(out->element_type(), offsets.element_type(), [&](auto t, auto i) {
    return SddmmTyped<decltype(t), decltype(i)>(stream, *args, offsets, nbr, eid, lhs, rhs, mask_arg, *out, checked);
  });
}

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
      ForEachTailPosition(offsets, a.n_rows, a.n_edges, window, [&](int k) {
        for (int h = w.lane; h < a.H; h += w.group) out[int64_t(k) * a.H + h] = T(0);
      });
    }
    ForEachChunk(offsets, a.n_rows, a.n_edges, window, w, [&](const Chunk& c) {
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
  a.windows = Windows(n_rows, n_edges);
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
    auto mem = scratch.Allocate(static_cast<size_t>(chunk_bytes + stat_bytes), 256);
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

// ---------------------------------------------------------------------------------------
// jgo_pool_sorted: out[g] = the sum (or mean) of the rows of x [N, F] whose id is g, for never decreasing ids
// (a batch's node-to-graph ids): graph g's rows [lower_bound(g), lower_bound(g + 1)) from one binary search per
// graph, summed by the engine's reduce with position k reading row k (no membership graph, no index array).
// Ids outside [0, n_graphs) belong to no graph. Ids that decrease (a wrong ids_are_sorted) give wrong sums,
// in bounds: the CPU kernel rejects them.

template <typename I>
__global__ void __launch_bounds__(kBlock) GraphOffsetsKernel(const I* __restrict__ ids, int64_t n, int64_t graphs,
                                                             I* __restrict__ offsets) {
  for (int64_t g = ThreadIndex(); g <= graphs; g += ThreadCount()) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = (lo + hi) >> 1;
      if (static_cast<int64_t>(ids[mid]) < g) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    offsets[g] = static_cast<I>(lo);
  }
}

ffi::Error PoolSortedCuda(cudaStream_t stream, CudaScratch scratch, ffi::AnyBuffer x, ffi::AnyBuffer ids,
                          ffi::Result<ffi::AnyBuffer> out, bool mean) {
  constexpr const char* kName = "jgo_pool_sorted";
  auto args = CheckPoolSorted(x, ids, *out);
  if (args.has_error()) return args.error();
  const PoolArgs a = *args;
  if (a.n == 0) return ZeroFill(kName, out->untyped_data(), out->size_bytes(), stream);
  return DispatchTypes(x.element_type(), ids.element_type(), [&](auto t, auto i) -> ffi::Error {
    using T = decltype(t);
    using I = decltype(i);
    if (a.graphs == 0 || a.width == 0) return ffi::Error::Success();
    if (auto err = EngineSizes(kName, {a.n, a.graphs, a.width}); err.failure()) return err;
    auto mem = scratch.Allocate(static_cast<size_t>((a.graphs + 1) * int64_t(sizeof(I))), 16);
    if (!mem.has_value()) return ffi::Error::Internal("jaxgraphops: jgo_pool_sorted: out of scratch memory");
    I* offsets = static_cast<I*>(*mem);
    const I* graph_ids = ids.typed_data<I>();
    if (auto err = Launch(kName, GraphOffsetsKernel<I>, a.graphs + 1, stream, graph_ids, a.n, a.graphs, offsets);
        err.failure())
      return err;
    ReduceProblem<T, I> p;
    p.offsets = offsets;
    p.node = x.typed_data<T>();
    p.out = out->typed_data<T>();
    p.reduce = mean ? Reduce::kMean : Reduce::kSum;
    p.dims = Dims3{1, 1, a.width};
    p.node_strides = p.edge_strides = FlatStrides();
    p.n_rows = a.graphs;
    p.n_edges = a.n;
    p.nbr_bound = a.n;
    p.node_rows = a.n;
    p.node_len = a.width;
    return LaunchReduce(kName, stream, scratch, p);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_pool_sorted_bwd: out[i] = ct[ids[i]] for an id in [0, n_graphs), 0 for any other: each graph's row of ct
// copied to its nodes (the transpose of jgo_pool_sorted's sum), kInFlight rows' loads before their stores.

// MLP floor 5, measured (nvcc 13.0, sm_90, 2026-11-29): on the vector path ptxas interleaves the ids' loads
// with the rows' 128-bit loads (5-6 in flight; the scalar path keeps 16-32). 8 there is open work (issue 32).
// gpu-model: engine mlp>=5 vector-if kVector
template <typename T, typename I, bool kVector>
__global__ void __launch_bounds__(kBlock, 1) PoolBwdKernel(PoolArgs a, int group, int tiles, bool stream,
                                                           const T* __restrict__ ct, const I* __restrict__ ids,
                                                           T* __restrict__ out) {
  constexpr int kV = 16 / int(sizeof(T));
  const Walker w = ThisWalker(group);
  const int width = static_cast<int>(a.width), n = static_cast<int>(a.n);
  const int64_t units = (a.n + kInFlight - 1) / kInFlight;
  ForEachWalkerTile<kV, kVector>(units, tiles, width, w, [&](int64_t unit, const auto& lf) {
    const int i0 = static_cast<int>(unit) * kInFlight;
    const LaneRows<kV, kVector, T> rows(ct, width, lf, FlatStrides(), Dims3{1, 1, width}, true);
    int64_t g[kInFlight];  // the ids loaded before the first is compared
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) g[u] = i0 + u < n ? static_cast<int64_t>(ids[i0 + u]) : -1;
    T x[kInFlight][kV];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
#pragma unroll
      for (int v = 0; v < kV; ++v) x[u][v] = T(0);
      if (g[u] >= 0 && g[u] < a.graphs && (!kVector || lf.ok[0])) rows.Load(static_cast<int>(g[u]), lf.ok, x[u]);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
      if (i0 + u < n) StoreFeatures<kV, kVector>(out + int64_t(i0 + u) * width, lf, x[u], stream);
  });
}

ffi::Error PoolSortedBwdCuda(cudaStream_t stream, ffi::AnyBuffer ct, ffi::AnyBuffer ids,
                             ffi::Result<ffi::AnyBuffer> out) {
  constexpr const char* kName = "jgo_pool_sorted_bwd";
  auto args = CheckPoolSortedBwd(ct, ids, *out);
  if (args.has_error()) return args.error();
  const PoolArgs a = *args;
  if (a.n == 0 || a.width == 0) return ffi::Error::Success();
  if (auto err = EngineSizes(kName, {a.n, a.graphs, a.width}); err.failure()) return err;
  return DispatchTypes(ct.element_type(), ids.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    constexpr int kV = 16 / int(sizeof(T));
    const int group = WalkerLanes(a.width, kV);
    const int tiles = static_cast<int>((a.width + int64_t(group) * kV - 1) / (int64_t(group) * kV));
    const bool vector = a.width % kV == 0 && Aligned(ct.untyped_data()) && Aligned(out->untyped_data());
    const bool stream_out = StreamStores(static_cast<int64_t>(out->size_bytes()));
    const int64_t walkers = (a.n + kInFlight - 1) / kInFlight * tiles;
    return LaunchBlocks(kName, vector ? PoolBwdKernel<T, I, true> : PoolBwdKernel<T, I, false>,
                        WalkerBlocks(walkers, group), 0, stream, a, group, tiles, stream_out, ct.typed_data<T>(),
                        ids.typed_data<I>(), out->typed_data<T>());
  });
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER_NO_TRAITS(Spmm, jgo::SpmmCuda, jgo::BindSpmm<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER(Sddmm, jgo::SddmmCuda, jgo::BindSddmm<jgo::CudaStream>());
JGO_CUDA_HANDLER_NO_TRAITS(EdgeSoftmax, jgo::EdgeSoftmaxCuda,
                           jgo::BindEdgeSoftmax<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER_NO_TRAITS(PoolSorted, jgo::PoolSortedCuda, jgo::BindPoolSorted<jgo::CudaStream, jgo::CudaScratch>());
JGO_CUDA_HANDLER(PoolSortedBwd, jgo::PoolSortedBwdCuda, jgo::BindPoolSortedBwd<jgo::CudaStream>());
