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
//
// A row of more than kHeavyRow edges (the hubs of a power-law graph: 13,012 in-edges of one node
// in the peer report's graph, whose walk by one group took 18.8 ms on an H100 while the whole
// kernel over a uniform graph of 1.6M edges took 0.33 ms) is left to a second launch, one block
// per heavy row: the block's groups reduce contiguous slices of the row, and the first group
// merges their partial states in slice order through shared memory. Deterministic, no atomics,
// and the same result as one walk for max/min (the first NaN, else the first extreme, in k
// order); a sum's terms are added in another order (slices, then their partials).

constexpr int64_t kHeavyRow = 256;

// The blocks of a launch over the heavy rows: one per heavy row, of which there are at most
// n_edges / (kHeavyRow + 1), and at most 2048; they stride over the rows, each reading the offsets
// of its rows.
inline int64_t HeavyBlocks(int64_t n_rows, int64_t n_edges) {
  return std::min({n_rows, n_edges / (kHeavyRow + 1), int64_t{2048}});
}

// Launches `light` over `threads` threads (the rows of at most kHeavyRow edges), then, unless there are
// no threads, `heavy` over HeavyBlocks blocks with `heavy_shared` bytes of shared memory; same arguments.
template <typename... Params, typename... Args>
ffi::Error LaunchRowsAndHeavyRows(const char* name, void (*light)(Params...), void (*heavy)(Params...),
                                  int64_t threads, int64_t n_rows, int64_t n_edges, size_t heavy_shared,
                                  cudaStream_t stream, Args... args) {
  if (auto err = Launch(name, light, threads, stream, args...); err.failure()) return err;
  return LaunchBlocks(name, heavy, threads == 0 ? 0 : HeavyBlocks(n_rows, n_edges), heavy_shared, stream, args...);
}

// The reduction of feature f over positions [lo, hi) of row r into (acc, arg), edges skipped as
// described at the top of the file.
template <typename T, typename I, Op op, Reduce R, Mask M>
__device__ __forceinline__ void WalkRow(const SpmmArgs& a, int64_t r, int64_t f, int64_t lo, int64_t hi,
                                        const I* nbr, const I* eid, const T* node, const T* edge,
                                        const I* mask_arg, T& acc, I& arg) {
  using Red = Reducer<T, R>;
  constexpr bool kNeedNbr = Message<op>::kNode || M == Mask::kByNbr;
  const int64_t F = a.dims.size();
  const int64_t node_off = a.node_strides.offset_of_flat(f, a.dims);
  const int64_t edge_off = a.edge_strides.offset_of_flat(f, a.dims);
  const int64_t row_mask = M == Mask::kByRow ? static_cast<int64_t>(mask_arg[r * F + f]) : -1;
  for (int64_t k = lo; k < hi; ++k) {
    const I e = eid[k];
    const int64_t j = kNeedNbr ? static_cast<int64_t>(nbr[k]) : 0;
    if (!InRange(e, a.n_edges) || (kNeedNbr && !InRange(j, a.nbr_bound))) continue;
    if (M == Mask::kByRow && row_mask != e) continue;
    if (M == Mask::kByNbr && mask_arg[j * F + f] != e) continue;
    const T v = MessageAt<op, T>(node + j * a.node_len, edge + static_cast<int64_t>(e) * a.edge_len,
                                 node_off, edge_off);
    Red::update(acc, arg, v, e);
  }
}

// kHeavy false: the rows of at most kHeavyRow edges, a group of lanes each. kHeavy true: the other
// rows, a block each (kBlock threads; dynamic shared memory for kBlock values and arguments).
template <typename T, typename I, Op op, Reduce R, Mask M, bool kHeavy>
__global__ void SpmmKernel(SpmmArgs a, const I* offsets, const I* nbr, const I* eid, const T* node,
                           const T* edge, const I* mask_arg, T* out, I* arg_out, int group) {
  using Red = Reducer<T, R>;
  const int64_t F = a.dims.size();
  const int lane = threadIdx.x % group;
  if (!kHeavy) {
    for (int64_t r = ThreadIndex() / group; r < a.n_rows; r += ThreadCount() / group) {
      const int64_t begin = Clamp(offsets[r], 0, a.n_edges);
      const int64_t end = Clamp(offsets[r + 1], begin, a.n_edges);
      if (end - begin > kHeavyRow) continue;
      for (int64_t f = lane; f < F; f += group) {
        T acc = Red::init();
        I arg = I(-1);
        WalkRow<T, I, op, R, M>(a, r, f, begin, end, nbr, eid, node, edge, mask_arg, acc, arg);
        out[r * F + f] = Red::finalize(acc, arg, end - begin);
        if (Red::kArg) arg_out[r * F + f] = arg;
      }
    }
    return;
  }
  T* part = SharedMemory<T>();                              // [blockDim.x]
  I* part_arg = reinterpret_cast<I*>(part + blockDim.x);  // [blockDim.x]
  const int slice = threadIdx.x / group, slices = blockDim.x / group;
  for (int64_t r = blockIdx.x; r < a.n_rows; r += gridDim.x) {
    const int64_t begin = Clamp(offsets[r], 0, a.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, a.n_edges);
    if (end - begin <= kHeavyRow) continue;  // the same for the whole block: it reaches every barrier
    const int64_t len = (end - begin + slices - 1) / slices;
    const int64_t lo = Clamp(begin + slice * len, begin, end), hi = Clamp(lo + len, lo, end);
    for (int64_t f0 = 0; f0 < F; f0 += group) {
      const int64_t f = f0 + lane;
      T acc = Red::init();
      I arg = I(-1);
      if (f < F) WalkRow<T, I, op, R, M>(a, r, f, lo, hi, nbr, eid, node, edge, mask_arg, acc, arg);
      part[threadIdx.x] = acc;
      part_arg[threadIdx.x] = arg;
      __syncthreads();
      if (slice == 0 && f < F) {
        for (int q = 1; q < slices; ++q) {
          const I q_arg = part_arg[q * group + lane];
          if (Red::kArg && q_arg < 0) continue;  // a slice without a candidate
          Red::update(acc, arg, part[q * group + lane], q_arg);
        }
        out[r * F + f] = Red::finalize(acc, arg, end - begin);
        if (Red::kArg) arg_out[r * F + f] = arg;
      }
      __syncthreads();  // the partials are read before the next features overwrite them
    }
  }
}

template <typename T, typename I>
using SpmmKernelFn = void (*)(SpmmArgs, const I*, const I*, const I*, const T*, const T*, const I*, T*, I*, int);

template <typename T, typename I, Op op, bool kHeavy>
SpmmKernelFn<T, I> PickSpmmReduce(const SpmmArgs& a) {
  switch (a.mask) {
    case Mask::kByRow: return SpmmKernel<T, I, op, Reduce::kSum, Mask::kByRow, kHeavy>;
    case Mask::kByNbr: return SpmmKernel<T, I, op, Reduce::kSum, Mask::kByNbr, kHeavy>;
    case Mask::kNone: break;
  }
  switch (a.reduce) {
    case Reduce::kMean: return SpmmKernel<T, I, op, Reduce::kMean, Mask::kNone, kHeavy>;
    case Reduce::kMax: return SpmmKernel<T, I, op, Reduce::kMax, Mask::kNone, kHeavy>;
    case Reduce::kMin: return SpmmKernel<T, I, op, Reduce::kMin, Mask::kNone, kHeavy>;
    case Reduce::kSum: break;
  }
  return SpmmKernel<T, I, op, Reduce::kSum, Mask::kNone, kHeavy>;
}

template <typename T, typename I, bool kHeavy>
SpmmKernelFn<T, I> PickSpmm(const SpmmArgs& a) {
  switch (a.op) {
    case Op::kCopyNode: return PickSpmmReduce<T, I, Op::kCopyNode, kHeavy>(a);
    case Op::kCopyEdge: return PickSpmmReduce<T, I, Op::kCopyEdge, kHeavy>(a);
    case Op::kAdd: return PickSpmmReduce<T, I, Op::kAdd, kHeavy>(a);
    case Op::kMul: break;
  }
  return PickSpmmReduce<T, I, Op::kMul, kHeavy>(a);
}

template <typename T, typename I>
ffi::Error SpmmTyped(cudaStream_t stream, const SpmmArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                     ffi::AnyBuffer eid, ffi::AnyBuffer node, ffi::AnyBuffer edge, ffi::AnyBuffer mask_arg,
                     ffi::AnyBuffer out, ffi::AnyBuffer arg_out) {
  const int64_t F = a.dims.size();
  const int group = GroupWidth(F);
  const I* m = a.mask == Mask::kNone ? nullptr : mask_arg.typed_data<I>();
  I* arg = (a.reduce == Reduce::kMax || a.reduce == Reduce::kMin) ? arg_out.typed_data<I>() : nullptr;
  return LaunchRowsAndHeavyRows("jgo_spmm", PickSpmm<T, I, false>(a), PickSpmm<T, I, true>(a),
                                F == 0 ? 0 : a.n_rows * group, a.n_rows, a.n_edges, kBlock * (sizeof(T) + sizeof(I)),
                                stream, a, offsets.typed_data<I>(), nbr.typed_data<I>(), eid.typed_data<I>(),
                                node.typed_data<T>(), edge.typed_data<T>(), m, out.typed_data<T>(), arg, group);
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
// jgo_sddmm: a group of lanes per walked row, as in spmm, and a block per heavy row (more than
// kHeavyRow edges), whose groups take contiguous slices of it (every output is one edge's: nothing
// to merge). The lanes stride over the features of each edge (coalesced rows), or, for a dot
// product, over d2 with a shuffle reduction. An edge whose neighbour or edge id is out of range is
// skipped; its output (zeroed first) stays 0.

// The outputs of positions [lo, hi) of row r.
template <typename T, typename I, Op op, bool kDot, Mask M>
__device__ __forceinline__ void SddmmPositions(const SddmmArgs& s, int64_t r, int64_t lo, int64_t hi, const I* nbr,
                                               const I* eid, const T* lhs, const T* rhs, const I* mask_arg, T* out,
                                               int group) {
  const Dims3 d = s.dims;
  const int64_t F = d.size(), F01 = d.d0 * d.d1;
  const int lane = threadIdx.x % group;
  // Groups of one warp walk different rows, so a shuffle names only the lanes of its group;
  // those share every loop bound and all reach it.
  const unsigned group_mask = GroupMask(group);
  for (int64_t k = lo; k < hi; ++k) {
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

// kHeavy false: the rows of at most kHeavyRow edges, a group of lanes each; kHeavy true: the other
// rows, a block each.
template <typename T, typename I, Op op, bool kDot, Mask M, bool kHeavy>
__global__ void SddmmKernel(SddmmArgs s, const I* offsets, const I* nbr, const I* eid, const T* lhs, const T* rhs,
                            const I* mask_arg, T* out, int group) {
  const int64_t first = kHeavy ? blockIdx.x : ThreadIndex() / group;
  const int64_t stride = kHeavy ? gridDim.x : ThreadCount() / group;
  const int slice = threadIdx.x / group, slices = blockDim.x / group;
  for (int64_t r = first; r < s.n_rows; r += stride) {
    const int64_t begin = Clamp(offsets[r], 0, s.n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, s.n_edges);
    if ((end - begin > kHeavyRow) != kHeavy) continue;
    if (!kHeavy) {
      SddmmPositions<T, I, op, kDot, M>(s, r, begin, end, nbr, eid, lhs, rhs, mask_arg, out, group);
      continue;
    }
    const int64_t len = (end - begin + slices - 1) / slices;
    const int64_t lo = Clamp(begin + slice * len, begin, end);
    SddmmPositions<T, I, op, kDot, M>(s, r, lo, Clamp(lo + len, lo, end), nbr, eid, lhs, rhs, mask_arg, out, group);
  }
}

template <typename T, typename I>
using SddmmKernelFn = void (*)(SddmmArgs, const I*, const I*, const I*, const T*, const T*, const I*, T*, int);

template <typename T, typename I, Mask M, bool kHeavy>
SddmmKernelFn<T, I> PickSddmmOp(const SddmmArgs& s) {
  if (s.dot) return SddmmKernel<T, I, Op::kMul, true, M, kHeavy>;
  switch (s.op) {
    case Op::kCopyNode: return SddmmKernel<T, I, Op::kCopyNode, false, M, kHeavy>;
    case Op::kCopyEdge: return SddmmKernel<T, I, Op::kCopyEdge, false, M, kHeavy>;
    case Op::kAdd: return SddmmKernel<T, I, Op::kAdd, false, M, kHeavy>;
    case Op::kMul: break;
  }
  return SddmmKernel<T, I, Op::kMul, false, M, kHeavy>;
}

template <typename T, typename I, bool kHeavy>
SddmmKernelFn<T, I> PickSddmm(const SddmmArgs& s) {
  switch (s.mask) {
    case Mask::kByRow: return PickSddmmOp<T, I, Mask::kByRow, kHeavy>(s);
    case Mask::kByNbr: return PickSddmmOp<T, I, Mask::kByNbr, kHeavy>(s);
    case Mask::kNone: break;
  }
  return PickSddmmOp<T, I, Mask::kNone, kHeavy>(s);
}

template <typename T, typename I>
ffi::Error SddmmTyped(cudaStream_t stream, const SddmmArgs& s, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                      ffi::AnyBuffer eid, ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::AnyBuffer mask_arg,
                      ffi::AnyBuffer out) {
  const int64_t F = s.dims.size();
  const int group = GroupWidth(s.dot ? s.dims.d2 : F);
  const I* m = s.mask == Mask::kNone ? nullptr : mask_arg.typed_data<I>();
  if (auto err = ZeroFill("jgo_sddmm", out.untyped_data(), out.size_bytes(), stream); err.failure()) return err;
  return LaunchRowsAndHeavyRows("jgo_sddmm", PickSddmm<T, I, false>(s), PickSddmm<T, I, true>(s),
                                F == 0 ? 0 : s.n_rows * group, s.n_rows, s.n_edges, 0, stream, s,
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
// jgo_edge_softmax: one thread per (row, head); adjacent threads take adjacent heads of a row. A
// heavy row (more than kHeavyRow edges) gets a block instead (HeavyEdgeSoftmaxKernel). A row
// holding an out-of-range edge id is skipped: its outputs (zeroed first) stay 0.

template <typename T, typename I>
__global__ void EdgeSoftmaxKernel(const I* offsets, const I* eid, const T* logits, T* out, int64_t n_rows,
                                  int64_t n_edges, int64_t n_heads) {
  for (int64_t i = ThreadIndex(); i < n_rows * n_heads; i += ThreadCount()) {
    const int64_t r = i / n_heads, h = i % n_heads;
    const int64_t begin = Clamp(offsets[r], 0, n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, n_edges);
    if (end - begin > kHeavyRow) continue;
    bool valid = true;
    for (int64_t k = begin; k < end && valid; ++k) valid = InRange(eid[k], n_edges);
    if (valid) SegmentSoftmax<T, T, I>(logits, eid, begin, end, h, n_heads, out);
  }
}

// The first thread's merge of the block's partials `part` (after a barrier), given back to every
// thread: merge(part[0], part[1], ...) in thread order.
template <typename V, typename Merge>
__device__ V MergeInBlock(V* part, V mine, Merge merge) {
  part[threadIdx.x] = mine;
  __syncthreads();
  if (threadIdx.x == 0) {
    V total = part[0];
    for (unsigned q = 1; q < blockDim.x; ++q) total = merge(total, part[q]);
    part[0] = total;
  }
  __syncthreads();
  const V total = part[0];
  __syncthreads();  // part[0] is read before the next merge overwrites it
  return total;
}

// A block per heavy row: for each head, the threads take contiguous slices of the row and run
// SegmentSoftmax's three passes (jgo/math.h) over them; the maxima (each slice started at its first
// logit, so the row's first logit starts the merge, as in SegmentSoftmax) and then the sums are
// merged in thread order.
// Shared memory: kBlock values of T and kBlock ints.
template <typename T, typename I>
__global__ void HeavyEdgeSoftmaxKernel(const I* offsets, const I* eid, const T* logits, T* out, int64_t n_rows,
                                       int64_t n_edges, int64_t n_heads) {
  T* part = SharedMemory<T>();
  int* flags = reinterpret_cast<int*>(part + blockDim.x);
  for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x) {
    const int64_t begin = Clamp(offsets[r], 0, n_edges);
    const int64_t end = Clamp(offsets[r + 1], begin, n_edges);
    if (end - begin <= kHeavyRow) continue;  // the same for the whole block: it reaches every barrier
    const int64_t len = (end - begin + blockDim.x - 1) / blockDim.x;
    const int64_t lo = Clamp(begin + threadIdx.x * len, begin, end), hi = Clamp(lo + len, lo, end);
    int ok = 1;
    for (int64_t k = lo; k < hi; ++k) ok &= InRange(eid[k], n_edges) ? 1 : 0;
    if (!MergeInBlock(flags, ok, [](int a, int b) { return a & b; })) continue;
    for (int64_t h = 0; h < n_heads; ++h) {
      const T m = lo < hi ? SoftmaxSliceMax<T, T, I>(logits, eid, lo, hi, h, n_heads) : -Infinity<T>();
      const T shift = SoftmaxShift(MergeInBlock(part, m, [](T a, T b) { return SoftmaxMax(a, b); }));
      const T total = SoftmaxSliceSum<T, T, I>(logits, eid, lo, hi, h, n_heads, shift);
      const T inv = SoftmaxInverse(MergeInBlock(part, total, [](T a, T b) { return a + b; }));
      SoftmaxSliceWrite<T, T, I>(logits, eid, lo, hi, h, n_heads, shift, inv, out);
    }
  }
}

template <typename T, typename I>
ffi::Error SoftmaxTyped(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer eid, ffi::AnyBuffer logits,
                        ffi::AnyBuffer out) {
  const int64_t n_rows = static_cast<int64_t>(offsets.element_count()) - 1;
  const int64_t n_edges = static_cast<int64_t>(eid.element_count());
  const int64_t heads = n_edges == 0 ? 1 : static_cast<int64_t>(logits.element_count()) / n_edges;
  if (auto err = ZeroFill("jgo_edge_softmax", out.untyped_data(), out.size_bytes(), stream); err.failure()) return err;
  return LaunchRowsAndHeavyRows("jgo_edge_softmax", EdgeSoftmaxKernel<T, I>, HeavyEdgeSoftmaxKernel<T, I>,
                                n_edges == 0 ? 0 : n_rows * heads, n_rows, n_edges, kBlock * (sizeof(T) + sizeof(int)),
                                stream, offsets.typed_data<I>(), eid.typed_data<I>(), logits.typed_data<T>(),
                                out.typed_data<T>(), n_rows, n_edges, heads);
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
