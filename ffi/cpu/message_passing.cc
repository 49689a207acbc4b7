// CPU handlers of the generic message-passing kernels: jgo_spmm (neighbourhood reduce over a
// CSR/CSC), jgo_sddmm (edge-wise binary op / dot) and jgo_edge_softmax.
//
// Rows are split into chunks of equal work run on XLA's intra-op thread pool; the rows gathered
// through the index arrays are prefetched ahead across row boundaries, which is what makes these
// loops beat XLA's gather + scatter (cpu/row_parallel.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/handler.h"
#include "cpu/row_parallel.h"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/math.h"

namespace jgo {
namespace {

// ---------------------------------------------------------------------------------------
// jgo_spmm

template <typename T, typename I, Op op, Reduce R, Mask M>
void SpmmRows(const SpmmArgs& a, const I* offsets, const I* nbr, const I* eid, const T* node, const T* edge,
              const I* mask_arg, T* out, I* arg_out, int64_t r0, int64_t r1) {
  using Red = Reducer<T, R>;
  using Msg = Message<op>;
  const Dims3 d = a.dims;
  const int64_t F = d.size();
  const Strides3 ns = a.node_strides, es = a.edge_strides;
  std::vector<T> acc(F);
  std::vector<I> arg(F);
  I unused_arg = -1;
  const int64_t last = offsets[r1];
  for (int64_t r = r0; r < r1; ++r) {
    std::fill(acc.begin(), acc.end(), Red::init());
    if (Red::kArg) std::fill(arg.begin(), arg.end(), I(-1));
    const int64_t begin = offsets[r], end = offsets[r + 1];
    for (int64_t k = begin; k < end; ++k) {
      if (k + kPrefetchDistance < last) {
        const int64_t j = nbr[k + kPrefetchDistance];
        if (Msg::kNode) PrefetchRow(node + j * a.node_len, a.node_len);
        if (Msg::kEdge) PrefetchRow(edge + static_cast<int64_t>(eid[k + kPrefetchDistance]) * a.edge_len, a.edge_len);
        if (M == Mask::kByNbr) PrefetchRow(mask_arg + j * F, F);
      }
      const I e = eid[k];
      const T* node_row = node + static_cast<int64_t>(nbr[k]) * a.node_len;
      const T* edge_row = edge + static_cast<int64_t>(e) * a.edge_len;
      const I* mask_row = M == Mask::kByRow ? mask_arg + r * F
                          : M == Mask::kByNbr ? mask_arg + static_cast<int64_t>(nbr[k]) * F
                                              : nullptr;
      int64_t f = 0;
      for (int64_t i0 = 0; i0 < d.d0; ++i0) {
        for (int64_t i1 = 0; i1 < d.d1; ++i1, f += d.d2) {
          const T* np = node_row + i0 * ns.s0 + i1 * ns.s1;
          const T* ep = edge_row + i0 * es.s0 + i1 * es.s1;
          T* ap = acc.data() + f;
          I* gp = arg.data() + f;
          auto accumulate = [&](auto message_at) {
            for (int64_t i2 = 0; i2 < d.d2; ++i2) {
              T v = message_at(i2);
              if constexpr (M != Mask::kNone) v = mask_row[f + i2] == e ? v : T(0);  // masks come with sums
              if constexpr (Red::kArg) Red::update(ap[i2], gp[i2], v, e); else Red::update(ap[i2], unused_arg, v, e);
            }
          };
          // The common layouts get a loop the compiler can vectorise.
          if (ns.s2 == 1 && es.s2 == 0) {
            const T eb = Msg::kEdge ? ep[0] : T(0);
            accumulate([&](int64_t i2) { return Msg::apply(Msg::kNode ? np[i2] : T(0), eb); });
          } else if (ns.s2 == 1 && es.s2 == 1) {
            accumulate([&](int64_t i2) { return Msg::apply(Msg::kNode ? np[i2] : T(0), Msg::kEdge ? ep[i2] : T(0)); });
          } else {
            accumulate([&](int64_t i2) { return MessageAt<op, T>(np, ep, i2 * ns.s2, i2 * es.s2); });
          }
        }
      }
    }
    T* out_row = out + r * F;
    for (int64_t g = 0; g < F; ++g) out_row[g] = Red::finalize(acc[g], Red::kArg ? arg[g] : I(-1), end - begin);
    if (Red::kArg) std::copy(arg.begin(), arg.end(), arg_out + r * F);
  }
}

template <typename T, typename I, Op op, Reduce R, Mask M>
void SpmmParallel(ffi::ThreadPool& pool, const SpmmArgs& a, const I* offsets, const I* nbr, const I* eid,
                  const T* node, const T* edge, const I* mask_arg, T* out, I* arg_out) {
  ForRowChunks(pool, offsets, a.n_rows, a.n_edges, a.dims.size(), [&](int64_t r0, int64_t r1) {
    SpmmRows<T, I, op, R, M>(a, offsets, nbr, eid, node, edge, mask_arg, out, arg_out, r0, r1);
  });
}

template <typename T, typename I, Op op>
ffi::Error SpmmDispatchReduce(ffi::ThreadPool& pool, const SpmmArgs& a, const I* offsets, const I* nbr,
                              const I* eid, const T* node, const T* edge, const I* mask_arg, T* out, I* arg_out) {
#define JGO_SPMM(R, M) SpmmParallel<T, I, op, R, M>(pool, a, offsets, nbr, eid, node, edge, mask_arg, out, arg_out)
  switch (a.mask) {
    case Mask::kByRow: JGO_SPMM(Reduce::kSum, Mask::kByRow); return ffi::Error::Success();
    case Mask::kByNbr: JGO_SPMM(Reduce::kSum, Mask::kByNbr); return ffi::Error::Success();
    case Mask::kNone: break;
  }
  switch (a.reduce) {
    case Reduce::kSum: JGO_SPMM(Reduce::kSum, Mask::kNone); break;
    case Reduce::kMean: JGO_SPMM(Reduce::kMean, Mask::kNone); break;
    case Reduce::kMax: JGO_SPMM(Reduce::kMax, Mask::kNone); break;
    case Reduce::kMin: JGO_SPMM(Reduce::kMin, Mask::kNone); break;
  }
#undef JGO_SPMM
  return ffi::Error::Success();
}

template <typename T, typename I>
ffi::Error SpmmTyped(ffi::ThreadPool& pool, const SpmmArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                     ffi::AnyBuffer eid, ffi::AnyBuffer node, ffi::AnyBuffer edge, ffi::AnyBuffer mask_arg,
                     ffi::AnyBuffer out, ffi::AnyBuffer arg_out) {
  const I* o = offsets.typed_data<I>();
  const I* n = nbr.typed_data<I>();
  const I* e = eid.typed_data<I>();
  if (auto err = CheckCompressed(o, n, e, a.n_rows, a.n_edges, a.nbr_bound, a.reads_nbr, "spmm"); err.failure())
    return err;
  const I* m = a.mask == Mask::kNone ? nullptr : mask_arg.typed_data<I>();
  I* arg = (a.reduce == Reduce::kMax || a.reduce == Reduce::kMin) ? arg_out.typed_data<I>() : nullptr;
  const T* nd = node.typed_data<T>();
  const T* ed = edge.typed_data<T>();
  T* od = out.typed_data<T>();
  switch (a.op) {
    case Op::kCopyNode: return SpmmDispatchReduce<T, I, Op::kCopyNode>(pool, a, o, n, e, nd, ed, m, od, arg);
    case Op::kCopyEdge: return SpmmDispatchReduce<T, I, Op::kCopyEdge>(pool, a, o, n, e, nd, ed, m, od, arg);
    case Op::kAdd: return SpmmDispatchReduce<T, I, Op::kAdd>(pool, a, o, n, e, nd, ed, m, od, arg);
    case Op::kMul: return SpmmDispatchReduce<T, I, Op::kMul>(pool, a, o, n, e, nd, ed, m, od, arg);
  }
  return InvalidArgument("spmm: unknown op");
}

ffi::Error SpmmCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                   ffi::AnyBuffer node, ffi::AnyBuffer edge, ffi::AnyBuffer mask_arg,
                   ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> arg_out, int64_t op, int64_t reduce,
                   int64_t mask, ffi::Span<const int64_t> dims, ffi::Span<const int64_t> node_strides,
                   ffi::Span<const int64_t> edge_strides) {
  auto args = CheckSpmm(offsets, nbr, eid, node, edge, mask_arg, *out, *arg_out, op, reduce, mask, dims,
                        node_strides, edge_strides);
  if (args.has_error()) return args.error();
  return DispatchTypes(out->element_type(), offsets.element_type(), [&](auto t, auto i) {
    return SpmmTyped<decltype(t), decltype(i)>(pool, *args, offsets, nbr, eid, node, edge, mask_arg, *out, *arg_out);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_sddmm

template <typename T, typename I, Op op, bool kDot, Mask M>
void SddmmRows(const SddmmArgs& s, const I* offsets, const I* nbr, const I* eid, const T* lhs, const T* rhs,
               const I* mask_arg, T* out, int64_t r0, int64_t r1) {
  using Msg = Message<op>;
  const Dims3 d = s.dims;
  const int64_t F = d.size(), F01 = d.d0 * d.d1;
  const int64_t last = offsets[r1];
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t end = offsets[r + 1];
    for (int64_t k = offsets[r]; k < end; ++k) {
      if (k + kPrefetchDistance < last) {
        const int64_t p = k + kPrefetchDistance, j = nbr[p], e = eid[p];
        if (Msg::kNode && s.a_target != Target::kRow) PrefetchRow(OperandRow(lhs, s.a_len, s.a_target, r, j, e), s.a_len);
        if (Msg::kEdge && s.b_target != Target::kRow) PrefetchRow(OperandRow(rhs, s.b_len, s.b_target, r, j, e), s.b_len);
        if (M == Mask::kByNbr) PrefetchRow(mask_arg + j * F, F);
      }
      const int64_t j = nbr[k], e = eid[k];
      const T* a_row = OperandRow(lhs, s.a_len, s.a_target, r, j, e);
      const T* b_row = OperandRow(rhs, s.b_len, s.b_target, r, j, e);
      const I* mask_row = M == Mask::kByRow ? mask_arg + r * F : M == Mask::kByNbr ? mask_arg + j * F : nullptr;
      for (int64_t f01 = 0; f01 < F01; ++f01) {
        if (kDot) {
          T acc = T(0);
          for (int64_t i2 = 0; i2 < d.d2; ++i2) {
            const T v = EdgeElement<op, T, T>(a_row, b_row, s.a_strides, s.b_strides, d, f01, i2);
            acc += (M == Mask::kNone || mask_row[f01 * d.d2 + i2] == e) ? v : T(0);
          }
          out[e * F01 + f01] = acc;
        } else {
          T* o = out + e * F + f01 * d.d2;
          for (int64_t i2 = 0; i2 < d.d2; ++i2) {
            const bool keep = M == Mask::kNone || mask_row[f01 * d.d2 + i2] == e;
            o[i2] = keep ? EdgeElement<op, T, T>(a_row, b_row, s.a_strides, s.b_strides, d, f01, i2) : T(0);
          }
        }
      }
    }
  }
}

template <typename T, typename I, Op op, bool kDot, Mask M>
void SddmmParallel(ffi::ThreadPool& pool, const SddmmArgs& s, const I* offsets, const I* nbr, const I* eid,
                   const T* lhs, const T* rhs, const I* mask_arg, T* out) {
  ForRowChunks(pool, offsets, s.n_rows, s.n_edges, s.dims.size(), [&](int64_t r0, int64_t r1) {
    SddmmRows<T, I, op, kDot, M>(s, offsets, nbr, eid, lhs, rhs, mask_arg, out, r0, r1);
  });
}

template <typename T, typename I, Mask M>
void SddmmDispatchOp(ffi::ThreadPool& pool, const SddmmArgs& s, const I* offsets, const I* nbr, const I* eid,
                     const T* lhs, const T* rhs, const I* mask_arg, T* out) {
#define JGO_SDDMM(OP, DOT) SddmmParallel<T, I, OP, DOT, M>(pool, s, offsets, nbr, eid, lhs, rhs, mask_arg, out)
  if (s.dot) {
    JGO_SDDMM(Op::kMul, true);
    return;
  }
  switch (s.op) {
    case Op::kCopyNode: JGO_SDDMM(Op::kCopyNode, false); break;
    case Op::kCopyEdge: JGO_SDDMM(Op::kCopyEdge, false); break;
    case Op::kAdd: JGO_SDDMM(Op::kAdd, false); break;
    case Op::kMul: JGO_SDDMM(Op::kMul, false); break;
  }
#undef JGO_SDDMM
}

template <typename T, typename I>
ffi::Error SddmmTyped(ffi::ThreadPool& pool, const SddmmArgs& s, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                      ffi::AnyBuffer eid, ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::AnyBuffer mask_arg,
                      ffi::AnyBuffer out) {
  const I* o = offsets.typed_data<I>();
  const I* n = nbr.typed_data<I>();
  const I* e = eid.typed_data<I>();
  if (auto err = CheckCompressed(o, n, e, s.n_rows, s.n_edges, s.nbr_bound, s.reads_nbr, "sddmm"); err.failure())
    return err;
  const T* a = lhs.typed_data<T>();
  const T* b = rhs.typed_data<T>();
  const I* m = s.mask == Mask::kNone ? nullptr : mask_arg.typed_data<I>();
  T* od = out.typed_data<T>();
  switch (s.mask) {
    case Mask::kNone: SddmmDispatchOp<T, I, Mask::kNone>(pool, s, o, n, e, a, b, m, od); break;
    case Mask::kByRow: SddmmDispatchOp<T, I, Mask::kByRow>(pool, s, o, n, e, a, b, m, od); break;
    case Mask::kByNbr: SddmmDispatchOp<T, I, Mask::kByNbr>(pool, s, o, n, e, a, b, m, od); break;
  }
  return ffi::Error::Success();
}

ffi::Error SddmmCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                    ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::AnyBuffer mask_arg, ffi::Result<ffi::AnyBuffer> out,
                    int64_t op, int64_t lhs_target, int64_t rhs_target, bool dot, int64_t mask,
                    ffi::Span<const int64_t> dims, ffi::Span<const int64_t> lhs_strides,
                    ffi::Span<const int64_t> rhs_strides) {
  auto args = CheckSddmm(offsets, nbr, eid, lhs, rhs, mask_arg, *out, op, lhs_target, rhs_target, dot, mask, dims,
                         lhs_strides, rhs_strides);
  if (args.has_error()) return args.error();
  return DispatchTypes(out->element_type(), offsets.element_type(), [&](auto t, auto i) {
    return SddmmTyped<decltype(t), decltype(i)>(pool, *args, offsets, nbr, eid, lhs, rhs, mask_arg, *out);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_edge_softmax

template <typename T, typename I>
ffi::Error SoftmaxTyped(ffi::ThreadPool& pool, ffi::AnyBuffer offsets, ffi::AnyBuffer eid, ffi::AnyBuffer logits,
                        ffi::AnyBuffer out) {
  const I* o = offsets.typed_data<I>();
  const I* e = eid.typed_data<I>();
  const int64_t n_rows = static_cast<int64_t>(offsets.element_count()) - 1;
  const int64_t n_edges = static_cast<int64_t>(eid.element_count());
  const int64_t heads = n_edges == 0 ? 1 : static_cast<int64_t>(logits.element_count()) / n_edges;
  if (auto err = CheckCompressed(o, e, e, n_rows, n_edges, 0, false, "edge_softmax"); err.failure()) return err;
  const T* x = logits.typed_data<T>();
  T* y = out.typed_data<T>();
  ForRowChunks(pool, o, n_rows, n_edges, heads, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t h = 0; h < heads; ++h) SegmentSoftmax<T, T, I>(x, e, o[r], o[r + 1], h, heads, y);
  });
  return ffi::Error::Success();
}

ffi::Error EdgeSoftmaxCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer eid, ffi::AnyBuffer logits,
                          ffi::Result<ffi::AnyBuffer> out) {
  if (auto err = CheckSoftmax(offsets, eid, logits, *out); err.failure()) return err;
  return DispatchTypes(logits.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return SoftmaxTyped<decltype(t), decltype(i)>(pool, offsets, eid, logits, *out);
  });
}

}  // namespace
}  // namespace jgo

JGO_CPU_HANDLER(Spmm, jgo::SpmmCpu, jgo::BindSpmm<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(Sddmm, jgo::SddmmCpu, jgo::BindSddmm<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(EdgeSoftmax, jgo::EdgeSoftmaxCpu, jgo::BindEdgeSoftmax<xla::ffi::ThreadPool>());
