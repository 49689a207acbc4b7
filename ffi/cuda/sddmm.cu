// CUDA handler of the edge-wise binary op / dot, jgo_sddmm, on the chunked row-walk engine (chunk_walk.cuh).
// Same operands, attributes and results as the CPU twin (cpu/message_passing.cc), same per-edge math
// (jgo/math.h).
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
// jgo_sddmm on the engine: the chunk walk writes the output row of each position's edge once (no
// reduction, and no hub: a chunk has at most 256 edges). Host side, the operands become P and Q
// (add and mul commute, bit for bit): P is read per edge through the position's row, neighbour or edge
// id; Q, when used, either per chunk (kQRow: the walked row's, loaded once) or per edge like P. Lanes
// over the features, or, for a dot product, over the d2 axis with a fixed butterfly tree per output element,
// the sums of a group of edges reduced together (GroupSumScatter: log2(G) shuffles for the group, not per edge).
// An edge whose ids are out of range gets a row of 0 (the output is zeroed first on graphs not checked).

enum class SddmmForm : int { kCopy, kAdd, kMul, kDot };

struct SddmmWalk {
  int n_rows, n_edges, F, F01, axis, group, tiles, nbr_bound, p_len, q_len;
  Target p_source, q_source;
  Dims3 dims;
  Strides3 p_strides, q_strides;
  bool stream, tail;  // tail: write the padding edges' zeros (a checked graph: no zero fill first)
  int window_shift;  // windows of 2^window_shift coordinates (WindowShift)
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
      ForEachTailPosition(offsets, s.n_rows, s.n_edges, window, s.window_shift, [&](int k) {
        [[maybe_unused]] const T zero[kV] = {};  // not kDot
        if constexpr (kDot) {
          for (int f01 = w.lane; f01 < s.F01; f01 += s.group) out[int64_t(k) * s.F01 + f01] = T(0);  // one tile
        } else {
          StoreFeatures<kV, kVector>(out + int64_t(k) * s.F, lf, zero, s.stream);
        }
      });
    }
    ForEachChunk(offsets, s.n_rows, s.n_edges, window, s.window_shift, w, [&](const Chunk& c) {
      [[maybe_unused]] T qr[kV] = {};  // kQRow only
      if constexpr (kQRow && !kDot) qs.Load(c.row, lf.ok, qr);
      [[maybe_unused]] int64_t row_mask[kV];  // kByRow only
      if constexpr (M == Mask::kByRow && !kDot) {
#pragma unroll
        for (int v = 0; v < kV; ++v) row_mask[v] = lf.ok[v] ? mask_arg[int64_t(c.row) * s.F + lf.f[v]] : -2;
      }
      WalkPositions<true, true, false, kGroup>(pos, c.lo, c.hi, w, [&](const Staged<T> (&st)[kGroup],
                                                                        unsigned bits) {
        if constexpr (!kDot) {
          T pv[kGroup][kV], qv[kGroup][kV];
          [[maybe_unused]] I mv[kGroup][kV];  // masked only
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
            auto store = [&](int e, T total) {
              T* o = out + int64_t(e) * s.F01 + f01;
              if (s.stream) {
                __stcs(o, total);
              } else {
                *o = total;
              }
            };
            if (kVector || w.group >= kGroup) {  // the vector path's walkers have at least kInFlight lanes
              // the group's kGroup sums at once, edge u's held by lanes u * stride ..., the first storing it
              const T total = GroupSumScatter<kGroup>(part, w.mask, w.group);
              const int stride = w.group / kGroup, u = w.lane / stride;
              if (((bits >> u) & 1u) && w.lane == u * stride) {
                int e = st[0].e;
#pragma unroll
                for (int i = 1; i < kGroup; ++i) e = i == u ? st[i].e : e;
                store(e, total);
              }
            } else {  // a narrow strided walker: one sum at a time
#pragma unroll
              for (int u = 0; u < kGroup; ++u) {
                const T total = GroupSum(part[u], w.mask, w.group);
                if (((bits >> u) & 1u) && w.lane == 0) store(st[u].e, total);
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
  // a dot's walker on the vector path has at least kInFlight lanes (GroupSumScatter; the lanes past the axis hold
  // +0 and add nothing, and the lanes before it hold what they held: the same bits)
  w.group = s.dot && vector ? std::max(WalkerLanes(w.axis, kV), kInFlight) : WalkerLanes(w.axis, kV);
  w.tiles = s.dot ? 1 : static_cast<int>((w.axis + int64_t(w.group) * kV - 1) / (int64_t(w.group) * kV));
  w.stream = StreamStores(static_cast<int64_t>(out.size_bytes()));
  w.tail = checked;
  w.window_shift = WindowShift(s.n_rows, s.n_edges, int64_t(w.tiles) * w.group);
  w.windows = Windows(s.n_rows, s.n_edges, w.window_shift);
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

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER(Sddmm, jgo::SddmmCuda, jgo::BindSddmm<jgo::CudaStream>());
