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

#include "handlers.h"
#include "jgo/args.h"
#include "jgo/math.h"

namespace jgo {
namespace {

constexpr int kBlock = 256;              // threads per block, a multiple of the warp size
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride loops cover the rest
constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ int64_t ThreadIndex() { return blockIdx.x * int64_t(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ int64_t ThreadCount() { return gridDim.x * int64_t(blockDim.x); }
__device__ __forceinline__ bool InRange(int64_t i, int64_t n) { return i >= 0 && i < n; }
__device__ __forceinline__ int64_t Clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

// Lanes that share one row (spmm) or one dot product (sddmm): a power of two <= 32 covering n,
// so small feature sizes do not leave most of a warp idle.
int GroupWidth(int64_t n) {
  int g = 1;
  while (g < kWarp && g < n) g *= 2;
  return g;
}

// Launches kernel over `threads` threads (none when 0) and reports a failed launch.
template <typename... Params, typename... Args>
ffi::Error Launch(const char* name, void (*kernel)(Params...), int64_t threads, cudaStream_t stream, Args... args) {
  if (threads == 0) return ffi::Error::Success();
  const int64_t blocks = std::min<int64_t>((threads + kBlock - 1) / kBlock, kMaxBlocks);
  kernel<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(args...);
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return ffi::Error::Success();
  return ffi::Error::Internal(std::string("jaxgraphops: ") + name + ": " + cudaGetErrorString(err));
}

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
  const bool f64 = out->element_type() == ffi::DataType::F64;
  const bool i64 = offsets.element_type() == ffi::DataType::S64;
  if (f64 && i64) return SpmmTyped<double, int64_t>(stream, *args, offsets, nbr, eid, node, edge, mask_arg, *out, *arg_out);
  if (f64) return SpmmTyped<double, int32_t>(stream, *args, offsets, nbr, eid, node, edge, mask_arg, *out, *arg_out);
  if (i64) return SpmmTyped<float, int64_t>(stream, *args, offsets, nbr, eid, node, edge, mask_arg, *out, *arg_out);
  return SpmmTyped<float, int32_t>(stream, *args, offsets, nbr, eid, node, edge, mask_arg, *out, *arg_out);
}

// ---------------------------------------------------------------------------------------
// jgo_sddmm: one thread per output element; the dot form gives each (edge, f01) a group of
// lanes striding over d2, summed with shuffles. An edge whose rows are out of range gets 0.

// Row of an operand read by edge e: 0 when the operand is unused, -1 when out of range.
template <typename I>
__device__ __forceinline__ int64_t OperandRow(Target t, bool used, const I* src, const I* dst, int64_t e,
                                              int64_t rows) {
  if (!used) return 0;
  const int64_t i = t == Target::kSrc ? static_cast<int64_t>(src[e])
                    : t == Target::kDst ? static_cast<int64_t>(dst[e])
                                        : e;
  return InRange(i, rows) ? i : -1;
}

// Whether edge e can be read; sets the operand rows and the mask row.
template <typename I, bool kUseA, bool kUseB, bool kMasked>
__device__ __forceinline__ bool EdgeRows(const SddmmArgs& s, const I* src, const I* dst, int64_t e, int64_t& ra,
                                         int64_t& rb, int64_t& rm) {
  ra = OperandRow(s.a_target, kUseA, src, dst, e, s.a_rows);
  rb = OperandRow(s.b_target, kUseB, src, dst, e, s.b_rows);
  rm = kMasked ? static_cast<int64_t>(dst[e]) : 0;
  return ra >= 0 && rb >= 0 && (!kMasked || InRange(rm, s.mask_rows));
}

template <typename T, typename I, Op op, bool kMasked>
__global__ void SddmmKernel(SddmmArgs s, const I* src, const I* dst, const T* lhs, const T* rhs, const I* mask_arg,
                            T* out) {
  using Msg = Message<op>;
  const int64_t F = s.dims.size();
  for (int64_t i = ThreadIndex(); i < s.n_edges * F; i += ThreadCount()) {
    const int64_t e = i / F, f = i % F;
    int64_t ra, rb, rm;
    T v = T(0);
    if (EdgeRows<I, Msg::kNode, Msg::kEdge, kMasked>(s, src, dst, e, ra, rb, rm) &&
        (!kMasked || mask_arg[rm * F + f] == e)) {
      v = MessageAt<op, T>(lhs + ra * s.a_len, rhs + rb * s.b_len, s.a_strides.offset_of_flat(f, s.dims),
                           s.b_strides.offset_of_flat(f, s.dims));
    }
    out[i] = v;
  }
}

template <typename T, typename I, bool kMasked>
__global__ void SddmmDotKernel(SddmmArgs s, const I* src, const I* dst, const T* lhs, const T* rhs,
                               const I* mask_arg, T* out, int group) {
  const Dims3 d = s.dims;
  const int64_t F = d.size(), F01 = d.d0 * d.d1, total = s.n_edges * F01;
  const int lane = threadIdx.x % group;
  const int64_t per_warp = kWarp / group;
  // The loop bound is uniform over a warp, so every lane reaches the shuffles.
  for (int64_t base = ThreadIndex() / kWarp * per_warp; base < total; base += ThreadCount() / kWarp * per_warp) {
    const int64_t item = base + (threadIdx.x % kWarp) / group;  // = e * F01 + f01
    const int64_t e = item / F01, f01 = item % F01;
    T acc = T(0);
    int64_t ra, rb, rm;
    if (item < total && EdgeRows<I, true, true, kMasked>(s, src, dst, e, ra, rb, rm)) {
      for (int64_t i2 = lane; i2 < d.d2; i2 += group) {
        if (kMasked && mask_arg[rm * F + f01 * d.d2 + i2] != e) continue;
        acc += EdgeElement<Op::kMul, T, T>(lhs + ra * s.a_len, rhs + rb * s.b_len, s.a_strides, s.b_strides, d,
                                           f01, i2);
      }
    }
    for (int offset = group / 2; offset > 0; offset /= 2) acc += __shfl_down_sync(kFullMask, acc, offset, group);
    if (lane == 0 && item < total) out[item] = acc;
  }
}

template <typename T, typename I>
using SddmmKernelFn = void (*)(SddmmArgs, const I*, const I*, const T*, const T*, const I*, T*);

template <typename T, typename I, bool kMasked>
SddmmKernelFn<T, I> PickSddmm(Op op) {
  switch (op) {
    case Op::kCopyNode: return SddmmKernel<T, I, Op::kCopyNode, kMasked>;
    case Op::kCopyEdge: return SddmmKernel<T, I, Op::kCopyEdge, kMasked>;
    case Op::kAdd: return SddmmKernel<T, I, Op::kAdd, kMasked>;
    case Op::kMul: break;
  }
  return SddmmKernel<T, I, Op::kMul, kMasked>;
}

template <typename T, typename I>
ffi::Error SddmmTyped(cudaStream_t stream, const SddmmArgs& s, ffi::AnyBuffer src, ffi::AnyBuffer dst,
                      ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::AnyBuffer mask_arg, ffi::AnyBuffer out) {
  const I* sp = src.typed_data<I>();
  const I* dp = dst.typed_data<I>();
  const T* a = lhs.typed_data<T>();
  const T* b = rhs.typed_data<T>();
  const I* m = s.masked ? mask_arg.typed_data<I>() : nullptr;
  T* o = out.typed_data<T>();
  if (s.dot) {
    const int group = GroupWidth(s.dims.d2);
    return Launch("jgo_sddmm", s.masked ? SddmmDotKernel<T, I, true> : SddmmDotKernel<T, I, false>,
                  s.n_edges * s.dims.d0 * s.dims.d1 * group, stream, s, sp, dp, a, b, m, o, group);
  }
  return Launch("jgo_sddmm", s.masked ? PickSddmm<T, I, true>(s.op) : PickSddmm<T, I, false>(s.op),
                s.n_edges * s.dims.size(), stream, s, sp, dp, a, b, m, o);
}

ffi::Error SddmmCuda(cudaStream_t stream, ffi::AnyBuffer src, ffi::AnyBuffer dst, ffi::AnyBuffer lhs,
                     ffi::AnyBuffer rhs, ffi::AnyBuffer mask_arg, ffi::Result<ffi::AnyBuffer> out, int64_t op,
                     int64_t lhs_target, int64_t rhs_target, bool dot, bool masked, ffi::Span<const int64_t> dims,
                     ffi::Span<const int64_t> lhs_strides, ffi::Span<const int64_t> rhs_strides) {
  auto args = CheckSddmm(src, dst, lhs, rhs, mask_arg, *out, op, lhs_target, rhs_target, dot, masked, dims,
                         lhs_strides, rhs_strides);
  if (args.has_error()) return args.error();
  const bool f64 = out->element_type() == ffi::DataType::F64;
  const bool i64 = src.element_type() == ffi::DataType::S64;
  if (f64 && i64) return SddmmTyped<double, int64_t>(stream, *args, src, dst, lhs, rhs, mask_arg, *out);
  if (f64) return SddmmTyped<double, int32_t>(stream, *args, src, dst, lhs, rhs, mask_arg, *out);
  if (i64) return SddmmTyped<float, int64_t>(stream, *args, src, dst, lhs, rhs, mask_arg, *out);
  return SddmmTyped<float, int32_t>(stream, *args, src, dst, lhs, rhs, mask_arg, *out);
}

// ---------------------------------------------------------------------------------------
// jgo_edge_softmax: one thread per (row, head); adjacent threads take adjacent heads of a row.
// A row holding an out-of-range edge id is left unwritten.

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
  return Launch("jgo_edge_softmax", EdgeSoftmaxKernel<T, I>, n_edges == 0 ? 0 : n_rows * heads, stream,
                offsets.typed_data<I>(), eid.typed_data<I>(), logits.typed_data<T>(), out.typed_data<T>(), n_rows,
                n_edges, heads);
}

ffi::Error EdgeSoftmaxCuda(cudaStream_t stream, ffi::AnyBuffer offsets, ffi::AnyBuffer eid, ffi::AnyBuffer logits,
                           ffi::Result<ffi::AnyBuffer> out) {
  if (auto err = CheckSoftmax(offsets, eid, logits, *out); err.failure()) return err;
  const bool f64 = logits.element_type() == ffi::DataType::F64;
  const bool i64 = offsets.element_type() == ffi::DataType::S64;
  if (f64 && i64) return SoftmaxTyped<double, int64_t>(stream, offsets, eid, logits, *out);
  if (f64) return SoftmaxTyped<double, int32_t>(stream, offsets, eid, logits, *out);
  if (i64) return SoftmaxTyped<float, int64_t>(stream, offsets, eid, logits, *out);
  return SoftmaxTyped<float, int32_t>(stream, offsets, eid, logits, *out);
}

}  // namespace
}  // namespace jgo

using AnyBuf = xla::ffi::AnyBuffer;
using I64Span = xla::ffi::Span<const int64_t>;
using Stream = xla::ffi::PlatformStream<cudaStream_t>;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JgoSpmmCuda, jgo::SpmmCuda,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<Stream>()
                                  .Arg<AnyBuf>()  // offsets
                                  .Arg<AnyBuf>()  // neighbours
                                  .Arg<AnyBuf>()  // edge ids
                                  .Arg<AnyBuf>()  // node data
                                  .Arg<AnyBuf>()  // edge data
                                  .Arg<AnyBuf>()  // mask arg
                                  .Ret<AnyBuf>()  // out
                                  .Ret<AnyBuf>()  // arg out
                                  .Attr<int64_t>("op")
                                  .Attr<int64_t>("reduce")
                                  .Attr<int64_t>("mask")
                                  .Attr<I64Span>("dims")
                                  .Attr<I64Span>("node_strides")
                                  .Attr<I64Span>("edge_strides"),
                              {xla::ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(JgoSddmmCuda, jgo::SddmmCuda,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<Stream>()
                                  .Arg<AnyBuf>()  // src
                                  .Arg<AnyBuf>()  // dst
                                  .Arg<AnyBuf>()  // lhs
                                  .Arg<AnyBuf>()  // rhs
                                  .Arg<AnyBuf>()  // mask arg
                                  .Ret<AnyBuf>()  // out
                                  .Attr<int64_t>("op")
                                  .Attr<int64_t>("lhs_target")
                                  .Attr<int64_t>("rhs_target")
                                  .Attr<bool>("dot")
                                  .Attr<bool>("masked")
                                  .Attr<I64Span>("dims")
                                  .Attr<I64Span>("lhs_strides")
                                  .Attr<I64Span>("rhs_strides"),
                              {xla::ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(JgoEdgeSoftmaxCuda, jgo::EdgeSoftmaxCuda,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<Stream>()
                                  .Arg<AnyBuf>()  // offsets (CSC)
                                  .Arg<AnyBuf>()  // edge ids
                                  .Arg<AnyBuf>()  // logits
                                  .Ret<AnyBuf>(),
                              {xla::ffi::Traits::kCmdBufferCompatible});
