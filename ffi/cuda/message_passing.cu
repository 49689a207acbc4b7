// CUDA handlers of the generic message-passing kernels: jgo_spmm (neighbourhood reduce over a
// CSR/CSC), jgo_sddmm (edge-wise binary op / dot) and jgo_edge_softmax. Same operands,
// attributes and results as the CPU twin (cpu/message_passing.cc), same per-edge math (jgo/math.h).
//
// No atomics: every output element is owned by one thread (or one lane group). Index arrays stay
// on the device; instead of validating them on the host, the kernels skip edges whose neighbour
// or edge id is out of range and clamp offsets into [0, n_edges], so they never leave a buffer.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/launch.cuh"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/math.h"

namespace jgo {
namespace {

// ---------------------------------------------------------------------------------------
// jgo_spmm: a group of `group` lanes per row, the lanes striding over the features so the
// reads of a gathered row are coalesced; edges are visited in increasing k (argmax ties).

template <typename T, typename I, Op op, Reduce R, Mask M>
__global__ void SpmmKernel(SpmmArgs a, const I* offsets, const I* nbr, const I* eid, const T* node,
                           const T* edge, const I* mask_arg, T* out, I* arg_out, int group) {
  using Red = Reducer<T, R>;
  constexpr bool kNeedNbr = Message<op>::kNode || M == Mask::kByNbr;
  const int64_t F = a.dims.size();
  const int lane = threadIdx.x % group;
  for (int64_t r = ThreadIndex() / group; r < a.n_rows; r += ThreadCount() / group) {
    const int64_t begin = Clamp(offsets[r], 0, a.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, a.n_edges);
    for (int64_t f = lane; f < F; f += group) {
      const int64_t node_off = a.node_strides.offset_of_flat(f, a.dims);
      const int64_t edge_off = a.edge_strides.offset_of_flat(f, a.dims);
      const int64_t row_mask = M == Mask::kByRow ? static_cast<int64_t>(mask_arg[r * F + f]) : -1;
      T acc = Red::init();
      I arg = I(-1);
      for (int64_t k = begin; k < end; ++k) {
        const I e = eid[k];
        const int64_t j = kNeedNbr ? static_cast<int64_t>(nbr[k]) : 0;
        if (!InRange(e, a.n_edges) || (kNeedNbr && !InRange(j, a.nbr_bound))) continue;
        if (M == Mask::kByRow && row_mask != e) continue;
        if (M == Mask::kByNbr && mask_arg[j * F + f] != e) continue;
        const T v = MessageAt<op, T>(node + j * a.node_len, edge + static_cast<int64_t>(e) * a.edge_len,
                                     node_off, edge_off);
        Red::update(acc, arg, v, e);
      }
      out[r * F + f] = Red::finalize(acc, arg, end - begin);
      if (Red::kArg) arg_out[r * F + f] = arg;
    }
  }
}

template <typename T, typename I>
using SpmmKernelFn = void (*)(SpmmArgs, const I*, const I*, const I*, const T*, const T*, const I*, T*, I*, int);

template <typename T, typename I, Op op>
SpmmKernelFn<T, I> PickSpmmReduce(const SpmmArgs& a) {
  switch (a.mask) {
    case Mask::kByRow: return SpmmKernel<T, I, op, Reduce::kSum, Mask::kByRow>;
    case Mask::kByNbr: return SpmmKernel<T, I, op, Reduce::kSum, Mask::kByNbr>;
    case Mask::kNone: break;
  }
  switch (a.reduce) {
    case Reduce::kMean: return SpmmKernel<T, I, op, Reduce::kMean, Mask::kNone>;
    case Reduce::kMax: return SpmmKernel<T, I, op, Reduce::kMax, Mask::kNone>;
    case Reduce::kMin: return SpmmKernel<T, I, op, Reduce::kMin, Mask::kNone>;
    case Reduce::kSum: break;
  }
  return SpmmKernel<T, I, op, Reduce::kSum, Mask::kNone>;
}

template <typename T, typename I>
SpmmKernelFn<T, I> PickSpmm(const SpmmArgs& a) {
  switch (a.op) {
    case Op::kCopyNode: return PickSpmmReduce<T, I, Op::kCopyNode>(a);
    case Op::kCopyEdge: return PickSpmmReduce<T, I, Op::kCopyEdge>(a);
    case Op::kAdd: return PickSpmmReduce<T, I, Op::kAdd>(a);
    case Op::kMul: break;
  }
  return PickSpmmReduce<T, I, Op::kMul>(a);
}

template <typename T, typename I>
ffi::Error SpmmTyped(cudaStream_t stream, const SpmmArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                     ffi::AnyBuffer eid, ffi::AnyBuffer node, ffi::AnyBuffer edge, ffi::AnyBuffer mask_arg,
                     ffi::AnyBuffer out, ffi::AnyBuffer arg_out) {
  const int64_t F = a.dims.size();
  const int group = GroupWidth(F);
  const I* m = a.mask == Mask::kNone ? nullptr : mask_arg.typed_data<I>();
  I* arg = (a.reduce == Reduce::kMax || a.reduce == Reduce::kMin) ? arg_out.typed_data<I>() : nullptr;
  return Launch("jgo_spmm", PickSpmm<T, I>(a), F == 0 ? 0 : a.n_rows * group, stream, a, offsets.typed_data<I>(),
                nbr.typed_data<I>(), eid.typed_data<I>(), node.typed_data<T>(), edge.typed_data<T>(), m,
                out.typed_data<T>(), arg, group);
}

ffi::Error SpmmCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                    ffi::AnyBuffer node, ffi::AnyBuffer edge, ffi::AnyBuffer mask_arg,
                    ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> arg_out, int64_t op, int64_t reduce,
                    int64_t mask, ffi::Span<const int64_t> dims, ffi::Span<const int64_t> node_strides,
                    ffi::Span<const int64_t> edge_strides) {
  auto args = CheckSpmm(offsets, nbr, eid, node, edge, mask_arg, *out, *arg_out, op, reduce, mask, dims,
                        node_strides, edge_strides);
  if (args.has_error()) return args.error();
  return DispatchTypes(out->element_type(), offsets.element_type(), [&](auto t, auto i) {
    return SpmmTyped<decltype(t), decltype(i)>(stream, *args, offsets, nbr, eid, node, edge, mask_arg, *out, *arg_out);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_sddmm: a group of lanes per walked row, as in spmm. The lanes stride over the features of
// each edge (coalesced rows), or, for a dot product, over d2 with a shuffle reduction. An edge
// whose neighbour or edge id is out of range is skipped; its output (zeroed first) stays 0.

template <typename T, typename I, Op op, bool kDot, Mask M>
__global__ void SddmmKernel(SddmmArgs s, const I* offsets, const I* nbr, const I* eid, const T* lhs, const T* rhs,
                            const I* mask_arg, T* out, int group) {
  const Dims3 d = s.dims;
  const int64_t F = d.size(), F01 = d.d0 * d.d1;
  const int lane = threadIdx.x % group;
  const int64_t groups = ThreadCount() / group;
  // Groups of one warp walk different rows, so a shuffle names only the lanes of its group;
  // those share every loop bound and all reach it.
  const unsigned group_mask = GroupMask(group);
  for (int64_t r = ThreadIndex() / group; r < s.n_rows; r += groups) {
    const int64_t begin = Clamp(offsets[r], 0, s.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, s.n_edges);
    for (int64_t k = begin; k < end; ++k) {
      const int64_t j = nbr[k], e = eid[k];
      if (!InRange(e, s.n_edges) || (s.reads_nbr && !InRange(j, s.nbr_bound))) continue;
      const T* a_row = OperandRow(lhs, s.a_len, s.a_target, r, j, e);
      const T* b_row = OperandRow(rhs, s.b_len, s.b_target, r, j, e);
      const I* mask_row = M == Mask::kByRow ? mask_arg + r * F : M == Mask::kByNbr ? mask_arg + j * F : nullptr;
      if (kDot) {
        for (int64_t f01 = 0; f01 < F01; ++f01) {
          T acc = T(0);
          for (int64_t i2 = lane; i2 < d.d2; i2 += group) {
            if (M != Mask::kNone && mask_row[f01 * d.d2 + i2] != e) continue;
            acc += EdgeElement<op, T, T>(a_row, b_row, s.a_strides, s.b_strides, d, f01, i2);
          }
          acc = GroupSum(acc, group_mask, group);
          if (lane == 0) out[e * F01 + f01] = acc;
        }
      } else {
        for (int64_t f = lane; f < F; f += group) {
          const bool keep = M == Mask::kNone || mask_row[f] == e;
          out[e * F + f] = keep ? EdgeElement<op, T, T>(a_row, b_row, s.a_strides, s.b_strides, d, f / d.d2, f % d.d2)
                                : T(0);
        }
      }
    }
  }
}

template <typename T, typename I>
using SddmmKernelFn = void (*)(SddmmArgs, const I*, const I*, const I*, const T*, const T*, const I*, T*, int);

template <typename T, typename I, Mask M>
SddmmKernelFn<T, I> PickSddmmOp(const SddmmArgs& s) {
  if (s.dot) return SddmmKernel<T, I, Op::kMul, true, M>;
  switch (s.op) {
    case Op::kCopyNode: return SddmmKernel<T, I, Op::kCopyNode, false, M>;
    case Op::kCopyEdge: return SddmmKernel<T, I, Op::kCopyEdge, false, M>;
    case Op::kAdd: return SddmmKernel<T, I, Op::kAdd, false, M>;
    case Op::kMul: break;
  }
  return SddmmKernel<T, I, Op::kMul, false, M>;
}

template <typename T, typename I>
SddmmKernelFn<T, I> PickSddmm(const SddmmArgs& s) {
  switch (s.mask) {
    case Mask::kByRow: return PickSddmmOp<T, I, Mask::kByRow>(s);
    case Mask::kByNbr: return PickSddmmOp<T, I, Mask::kByNbr>(s);
    case Mask::kNone: break;
  }
  return PickSddmmOp<T, I, Mask::kNone>(s);
}

template <typename T, typename I>
ffi::Error SddmmTyped(cudaStream_t stream, const SddmmArgs& s, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                      ffi::AnyBuffer eid, ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::AnyBuffer mask_arg,
                      ffi::AnyBuffer out) {
  const int64_t F = s.dims.size();
  const int group = GroupWidth(s.dot ? s.dims.d2 : F);
  const I* m = s.mask == Mask::kNone ? nullptr : mask_arg.typed_data<I>();
  if (auto err = ZeroFill("jgo_sddmm", out.untyped_data(), out.size_bytes(), stream); err.failure()) return err;
  return Launch("jgo_sddmm", PickSddmm<T, I>(s), F == 0 ? 0 : s.n_rows * group, stream, s,
                offsets.typed_data<I>(), nbr.typed_data<I>(), eid.typed_data<I>(), lhs.typed_data<T>(),
                rhs.typed_data<T>(), m, out.typed_data<T>(), group);
}

ffi::Error SddmmCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                     ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::AnyBuffer mask_arg, ffi::Result<ffi::AnyBuffer> out,
                     int64_t op, int64_t lhs_target, int64_t rhs_target, bool dot, int64_t mask,
                     ffi::Span<const int64_t> dims, ffi::Span<const int64_t> lhs_strides,
                     ffi::Span<const int64_t> rhs_strides) {
  auto args = CheckSddmm(offsets, nbr, eid, lhs, rhs, mask_arg, *out, op, lhs_target, rhs_target, dot, mask, dims,
                         lhs_strides, rhs_strides);
  if (args.has_error()) return args.error();
  return DispatchTypes(out->element_type(), offsets.element_type(), [&](auto t, auto i) {
    return SddmmTyped<decltype(t), decltype(i)>(stream, *args, offsets, nbr, eid, lhs, rhs, mask_arg, *out);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_edge_softmax: one thread per (row, head); adjacent threads take adjacent heads of a row.
// A row holding an out-of-range edge id is skipped: its outputs (zeroed first) stay 0.

template <typename T, typename I>
__global__ void EdgeSoftmaxKernel(const I* offsets, const I* eid, const T* logits, T* out, int64_t n_rows,
                                  int64_t n_edges, int64_t n_heads) {
  for (int64_t i = ThreadIndex(); i < n_rows * n_heads; i += ThreadCount()) {
    const int64_t r = i / n_heads, h = i % n_heads;
    const int64_t begin = Clamp(offsets[r], 0, n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, n_edges);
    bool valid = true;
    for (int64_t k = begin; k < end && valid; ++k) valid = InRange(eid[k], n_edges);
    if (valid) SegmentSoftmax<T, T, I>(logits, eid, begin, end, h, n_heads, out);
  }
}

template <typename T, typename I>
ffi::Error SoftmaxTyped(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer eid, ffi::AnyBuffer logits,
                        ffi::AnyBuffer out) {
  const int64_t n_rows = static_cast<int64_t>(offsets.element_count()) - 1;
  const int64_t n_edges = static_cast<int64_t>(eid.element_count());
  const int64_t heads = n_edges == 0 ? 1 : static_cast<int64_t>(logits.element_count()) / n_edges;
  if (auto err = ZeroFill("jgo_edge_softmax", out.untyped_data(), out.size_bytes(), stream); err.failure()) return err;
  return Launch("jgo_edge_softmax", EdgeSoftmaxKernel<T, I>, n_edges == 0 ? 0 : n_rows * heads, stream,
                offsets.typed_data<I>(), eid.typed_data<I>(), logits.typed_data<T>(), out.typed_data<T>(), n_rows,
                n_edges, heads);
}

ffi::Error EdgeSoftmaxCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer eid, ffi::AnyBuffer logits,
                           ffi::Result<ffi::AnyBuffer> out) {
  if (auto err = CheckSoftmax(offsets, eid, logits, *out); err.failure()) return err;
  return DispatchTypes(logits.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return SoftmaxTyped<decltype(t), decltype(i)>(stream, offsets, eid, logits, *out);
  });
}

}  // namespace
}  // namespace jgo

JGO_CUDA_HANDLER(Spmm, jgo::SpmmCuda, jgo::BindSpmm<jgo::CudaStream>());
JGO_CUDA_HANDLER(Sddmm, jgo::SddmmCuda, jgo::BindSddmm<jgo::CudaStream>());
JGO_CUDA_HANDLER(EdgeSoftmax, jgo::EdgeSoftmaxCuda, jgo::BindEdgeSoftmax<jgo::CudaStream>());
