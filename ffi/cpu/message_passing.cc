// CPU handlers of the generic message-passing kernels: jgo_spmm (neighbourhood reduce over a
// CSR/CSC), jgo_sddmm (edge-wise binary op / dot) and jgo_edge_softmax.
//
// Rows are split into chunks of equal work run on XLA's intra-op thread pool; the rows gathered
// through the index arrays are prefetched ahead across row boundaries, which is what makes these
// loops beat XLA's gather + scatter (cpu/row_parallel.h).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu/handler.h"
#include "cpu/row_parallel.h"
#include "cpu/vector_math.h"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/math.h"
#include "jgo/pool.h"

namespace jgo {
namespace {

// ---------------------------------------------------------------------------------------
// jgo_spmm

// The row walks that read int32 indices (Index: an int64 structure is narrowed to int32 copies first, a pass over
// 2 E + n_rows indices, and a mask's n_rows x F, against an edge's row of F elements) are spmm's generic ones and
// sddmm's; the sums' register-blocked walks read the structure as it is.
using Index = int32_t;

// The largest count a walk indexes: rows, edges, or neighbours where it reads through them (the ids it does not read
// are not checked, and narrowed to whatever they become).
template <typename Args>
int64_t WalkBound(const Args& a) {
  return std::max({a.n_rows, a.n_edges, a.reads_nbr ? a.nbr_bound : 0});
}

// mean (with R = kSum): the sums divided by the row's edge count (one compiled walk for both). kMasked (sums
// only): a message element counts where the mask row holds the edge's id; the mask row is the row's (mask_nbr
// null: Mask::kByRow) or that of the neighbour id mask_nbr[k] (Mask::kByNbr), chosen per edge at run time.
// Not inlined: the int32 walk is compiled once, not into the callers of both index types.
template <typename T, typename I, Op op, Reduce R, bool kMasked>
__attribute__((noinline)) void SpmmRows(const SpmmArgs& a, const I* offsets, const I* nbr, const I* eid, const T* node,
                                        const T* edge, const I* mask_arg, const I* mask_nbr, T* out, I* arg_out,
                                        bool mean, int64_t r0, int64_t r1) {
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
        if (kMasked && mask_nbr) PrefetchRow(mask_arg + static_cast<int64_t>(mask_nbr[k + kPrefetchDistance]) * F, F);
      }
      const I e = eid[k];
      const T* node_row = node + static_cast<int64_t>(nbr[k]) * a.node_len;
      const T* edge_row = edge + static_cast<int64_t>(e) * a.edge_len;
      const I* mask_row = kMasked ? mask_arg + (mask_nbr ? static_cast<int64_t>(mask_nbr[k]) : r) * F : nullptr;
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
              if constexpr (kMasked) v = mask_row[f + i2] == e ? v : T(0);  // masks come with sums
              if constexpr (Red::kArg) Red::update(ap[i2], gp[i2], v, e); else Red::update(ap[i2], unused_arg, v, e);
            }
          };
          // The common layouts get a loop the compiler can vectorise (one for a message that reads no edge).
          if (ns.s2 == 1 && (es.s2 == 0 || !Msg::kEdge)) {
            const T eb = Msg::kEdge ? ep[0] : T(0);
            accumulate([&](int64_t i2) { return Msg::apply(Msg::kNode ? np[i2] : T(0), eb); });
          } else if (Msg::kEdge && ns.s2 == 1 && es.s2 == 1) {
            accumulate([&](int64_t i2) { return Msg::apply(Msg::kNode ? np[i2] : T(0), Msg::kEdge ? ep[i2] : T(0)); });
          } else {
            accumulate([&](int64_t i2) { return MessageAt<op, T>(np, ep, i2 * ns.s2, i2 * es.s2); });
          }
        }
      }
    }
    T* out_row = out + r * F;
    for (int64_t g = 0; g < F; ++g)
      out_row[g] = mean ? Reducer<T, Reduce::kMean>::finalize(acc[g], I(-1), end - begin)
                        : Red::finalize(acc[g], Red::kArg ? arg[g] : I(-1), end - begin);
    if (Red::kArg) std::copy(arg.begin(), arg.end(), arg_out + r * F);
  }
}

// The common sums and means, walked with register-resident accumulators: a message read as whole
// contiguous rows (node features, edge features, or a node row times one weight per edge), reduced in
// blocks of features, each block summed over the row's edges in CSC order: the generic walk's sums, bit
// for bit (w * x + acc is not contracted into a fused multiply-add: cmake/core.cmake).
// kConsecutiveNodes: the rows of a row are consecutive node rows, [offsets[r], offsets[r + 1]) (pool). (Edge
// rows are summed as node rows: SpmmTyped passes copy_e as copy_u of the edge array through the edge ids.)
enum class RowForm { kGeneric, kNode, kNodeTimesWeight, kNodeTimesEdge, kConsecutiveNodes };

inline bool IsContiguous(const Strides3& s, const Dims3& d) {
  return (d.d2 == 1 || s.s2 == 1) && (d.d1 == 1 || s.s1 == d.d2) && (d.d0 == 1 || s.s0 == d.d1 * d.d2);
}

template <Op op>
RowForm FormOf(const SpmmArgs& a) {
  const Dims3 d = a.dims;
  const bool node = a.node_len == d.size() && IsContiguous(a.node_strides, d);
  const bool edge = a.edge_len == d.size() && IsContiguous(a.edge_strides, d);
  const bool weight = a.edge_len == 1;
  if (op == Op::kCopyNode && node) return RowForm::kNode;
  if (op == Op::kMul && node && weight) return RowForm::kNodeTimesWeight;
  if (op == Op::kMul && node && edge) return RowForm::kNodeTimesEdge;
  return RowForm::kGeneric;
}

// Sums (or means) of rows r0..r1 over kRegs vectors of kBytes (kRegs * kBytes / sizeof(T) features) from
// feature f0, of a message of form K; the accumulators are vector registers (GCC's vector extensions,
// compiled for the ISA of the calling clone). kBytes == sizeof(T): one feature. mean: the sums divided by
// the row's edge count. stream: rows of whole cache lines written with non-temporal stores (StreamRows).
template <typename T, typename I, RowForm K, int kBytes, int kRegs>
JGO_INLINE void SumBlock(const I* offsets, const I* nbr, const I* eid, const T* node, const T* edge, T* out,
                         int64_t F, int64_t f0, bool mean, bool stream, int64_t r0, int64_t r1) {
  typedef T V __attribute__((vector_size(kBytes)));
  constexpr int64_t kLanes = kBytes / sizeof(T), kF = kLanes * kRegs;
  const int64_t last = offsets[r1];
  for (int64_t r = r0; r < r1; ++r) {
    V acc[kRegs];
    for (int q = 0; q < kRegs; ++q) acc[q] = V{} + T(0);
    const int64_t begin = offsets[r], end = offsets[r + 1];
    for (int64_t k = begin; k < end; ++k) {
      if (K != RowForm::kConsecutiveNodes && k + kPrefetchDistance < last) {  // consecutive rows stream
        const int64_t p = k + kPrefetchDistance;
        PrefetchRow(node + static_cast<int64_t>(nbr[p]) * F + f0, kF);
        if constexpr (K == RowForm::kNodeTimesEdge) PrefetchRow(edge + static_cast<int64_t>(eid[p]) * F + f0, kF);
        if constexpr (K == RowForm::kNodeTimesWeight)  // a weight per edge, in input order: a gather too
          __builtin_prefetch(edge + eid[p], 0, 1);
      }
      const T* x = K == RowForm::kConsecutiveNodes ? node + k * F + f0 : node + static_cast<int64_t>(nbr[k]) * F + f0;
      const T* y = K == RowForm::kNode || K == RowForm::kConsecutiveNodes ? nullptr
                   : K == RowForm::kNodeTimesWeight ? edge + static_cast<int64_t>(eid[k])
                                                    : edge + static_cast<int64_t>(eid[k]) * F + f0;
      for (int q = 0; q < kRegs; ++q) {
        V a, b;
        std::memcpy(&a, x + q * kLanes, sizeof(V));
        if constexpr (K == RowForm::kNodeTimesEdge) std::memcpy(&b, y + q * kLanes, sizeof(V));
        if constexpr (K == RowForm::kNode || K == RowForm::kConsecutiveNodes) acc[q] += a;
        else if constexpr (K == RowForm::kNodeTimesWeight) acc[q] += a * y[0];
        else acc[q] += a * b;
      }
    }
    T* o = out + r * F + f0;
    if (mean)
      for (int q = 0; q < kRegs; ++q)
        for (int64_t i = 0; i < kLanes; ++i)
          acc[q][i] = Reducer<T, Reduce::kMean>::finalize(acc[q][i], I(-1), end - begin);
    if constexpr (kBytes >= 16 && (kF * sizeof(T)) % kCacheLine == 0) {
      if (stream) {
        for (int q = 0; q < kRegs; ++q) StreamStore(o + q * kLanes, acc[q]);
        continue;
      }
    }
    for (int q = 0; q < kRegs; ++q) std::memcpy(o + q * kLanes, &acc[q], sizeof(V));
  }
}

// The last features [f0, F) of rows r0..r1, fewer than two vectors of kVecBytes: one vector of kVecBytes if
// they fill it, then the rest with vectors of half the size.
template <typename T, typename I, RowForm K, int kVecBytes>
JGO_INLINE void SumRowsTail(const I* offsets, const I* nbr, const I* eid, const T* node, const T* edge, T* out,
                            int64_t F, int64_t f0, bool mean, bool stream, int64_t r0, int64_t r1) {
  constexpr int64_t kVec = kVecBytes / sizeof(T);
  if (f0 + kVec <= F) {
    SumBlock<T, I, K, kVecBytes, 1>(offsets, nbr, eid, node, edge, out, F, f0, mean, stream, r0, r1);
    f0 += kVec;
  }
  if constexpr (kVecBytes > static_cast<int>(sizeof(T))) {
    if (f0 < F) SumRowsTail<T, I, K, kVecBytes / 2>(offsets, nbr, eid, node, edge, out, F, f0, mean, stream, r0, r1);
  }
}

// Features [f0, F) of rows r0..r1 in as few passes over the rows as the registers allow: blocks of 16, 8, 4,
// 2 and 1 vectors of kVecBytes (16 hold F = 128 floats in AVX2's 16 registers: one pass where 8 took two,
// 2x faster on an RCM-ordered mesh), then the rest (fewer features than a vector) with vectors of half the size.
// (No lambdas in code compiled per ISA: a lambda is a function of its own, compiled for the baseline.)
template <typename T, typename I, RowForm K, int kVecBytes>
JGO_INLINE void SumRowsBlocked(const I* offsets, const I* nbr, const I* eid, const T* node, const T* edge, T* out,
                               int64_t F, int64_t f0, bool mean, bool stream, int64_t r0, int64_t r1) {
  constexpr int64_t kVec = kVecBytes / sizeof(T);
  for (; f0 + 16 * kVec <= F; f0 += 16 * kVec)
    SumBlock<T, I, K, kVecBytes, 16>(offsets, nbr, eid, node, edge, out, F, f0, mean, stream, r0, r1);
  if (f0 + 8 * kVec <= F) {
    SumBlock<T, I, K, kVecBytes, 8>(offsets, nbr, eid, node, edge, out, F, f0, mean, stream, r0, r1);
    f0 += 8 * kVec;
  }
  if (f0 + 4 * kVec <= F) {
    SumBlock<T, I, K, kVecBytes, 4>(offsets, nbr, eid, node, edge, out, F, f0, mean, stream, r0, r1);
    f0 += 4 * kVec;
  }
  if (f0 + 2 * kVec <= F) {
    SumBlock<T, I, K, kVecBytes, 2>(offsets, nbr, eid, node, edge, out, F, f0, mean, stream, r0, r1);
    f0 += 2 * kVec;
  }
  if (f0 < F) SumRowsTail<T, I, K, kVecBytes>(offsets, nbr, eid, node, edge, out, F, f0, mean, stream, r0, r1);
}

template <typename T, typename I, RowForm K>
void SumRowsBaseline(const I* offsets, const I* nbr, const I* eid, const T* node, const T* edge, T* out, int64_t F,
                     bool mean, bool stream, int64_t r0, int64_t r1) {
  SumRowsBlocked<T, I, K, 16>(offsets, nbr, eid, node, edge, out, F, 0, mean, stream, r0, r1);
}
#ifdef JGO_AVX2_CLONES
template <typename T, typename I, RowForm K>
JGO_AVX2_TARGET void SumRowsAvx2(const I* offsets, const I* nbr, const I* eid, const T* node, const T* edge, T* out,
                                 int64_t F, bool mean, bool stream, int64_t r0, int64_t r1) {
  SumRowsBlocked<T, I, K, 32>(offsets, nbr, eid, node, edge, out, F, 0, mean, stream, r0, r1);
}
template <typename T, typename I, RowForm K>
JGO_AVX512_TARGET void SumRowsAvx512(const I* offsets, const I* nbr, const I* eid, const T* node, const T* edge,
                                     T* out, int64_t F, bool mean, bool stream, int64_t r0, int64_t r1) {
  SumRowsBlocked<T, I, K, 64>(offsets, nbr, eid, node, edge, out, F, 0, mean, stream, r0, r1);
}
#endif

// The row walk for the CPU it runs on: AVX-512, AVX2 + FMA or the x86-64 baseline. mean: the sums
// divided by the row's edge count.
template <typename T, typename I, RowForm K>
void SumRows(const I* offsets, const I* nbr, const I* eid, const T* node, const T* edge, T* out, int64_t F,
             bool mean, bool stream, int64_t r0, int64_t r1) {
#ifdef JGO_AVX2_CLONES
  if (HasAvx512()) return SumRowsAvx512<T, I, K>(offsets, nbr, eid, node, edge, out, F, mean, stream, r0, r1);
  if (HasAvx2Fma()) return SumRowsAvx2<T, I, K>(offsets, nbr, eid, node, edge, out, F, mean, stream, r0, r1);
#endif
  SumRowsBaseline<T, I, K>(offsets, nbr, eid, node, edge, out, F, mean, stream, r0, r1);
}

// mean (with R = kSum): the sums divided by the row's edge count. kMasked, mask_nbr: SpmmRows.
// mask_len: mask_arg's element count.
template <typename T, typename I, Op op, Reduce R, bool kMasked>
ffi::Error SpmmParallel(ffi::ThreadPool& pool, const SpmmArgs& a, const I* offsets, const I* nbr, const I* eid,
                        const T* node, const T* edge, const I* mask_arg, const I* mask_nbr, int64_t mask_len, T* out,
                        I* arg_out, bool mean) {
  const int64_t F = a.dims.size();
  if constexpr (!kMasked && R == Reduce::kSum && op != Op::kAdd) {
    const RowForm form = FormOf<op>(a);
    const bool stream = StreamRows(out, a.n_rows, F * static_cast<int64_t>(sizeof(T)));
    auto sum = [&](auto k) {
      ForRowChunks(pool, offsets, a.n_rows, F, [&](int64_t r0, int64_t r1) {
        SumRows<T, I, decltype(k)::value>(offsets, nbr, eid, node, edge, out, F, mean, stream, r0, r1);
        if (stream) StreamFence();
      });
    };
    switch (form) {
      case RowForm::kNode: sum(std::integral_constant<RowForm, RowForm::kNode>{}); return ffi::Error::Success();
      case RowForm::kNodeTimesWeight:
        sum(std::integral_constant<RowForm, RowForm::kNodeTimesWeight>{});
        return ffi::Error::Success();
      case RowForm::kNodeTimesEdge:
        sum(std::integral_constant<RowForm, RowForm::kNodeTimesEdge>{});
        return ffi::Error::Success();
      case RowForm::kGeneric: case RowForm::kConsecutiveNodes: break;
    }
  }
  // The generic walks read int32 indices (Index): an int64 structure's are narrowed first, and the arguments of a
  // max or min widened after.
  if (auto err = Int32Indices::Fit("jgo_spmm", WalkBound(a)); err.failure()) return err;
  Int32Indices narrow;
  const Index *o32 = narrow(offsets, a.n_rows + 1), *n32 = narrow(nbr, a.n_edges);
  const Index* e32 = eid == nbr ? n32 : narrow(eid, a.n_edges);  // copy_e walks the edge ids as neighbour ids
  const Index* m32 = kMasked ? narrow.EdgeIds(mask_arg, mask_len, a.n_edges) : nullptr;
  const Index* mn32 = !mask_nbr ? nullptr : mask_nbr == nbr ? n32 : narrow(mask_nbr, a.n_edges);
  std::vector<Index> wide_arg(std::is_same_v<I, Index> || !arg_out ? 0 : a.n_rows * F);
  Index* arg32 = wide_arg.empty() ? reinterpret_cast<Index*>(arg_out) : wide_arg.data();
  ForRowChunks(pool, o32, a.n_rows, F, [&](int64_t r0, int64_t r1) {
    SpmmRows<T, Index, op, R, kMasked>(a, o32, n32, e32, node, edge, m32, mn32, out, arg32, mean, r0, r1);
  });
  std::copy(wide_arg.begin(), wide_arg.end(), arg_out);
  return ffi::Error::Success();
}

// mask_nbr: the neighbour ids of Mask::kByNbr's mask rows (null for Mask::kByRow and Mask::kNone).
template <typename T, typename I, Op op>
ffi::Error SpmmDispatchReduce(ffi::ThreadPool& pool, const SpmmArgs& a, const I* offsets, const I* nbr,
                              const I* eid, const T* node, const T* edge, const I* mask_arg, const I* mask_nbr,
                              int64_t mask_len, T* out, I* arg_out) {
#define JGO_SPMM(R, masked, mean)                                                                                  \
  SpmmParallel<T, I, op, R, masked>(pool, a, offsets, nbr, eid, node, edge, mask_arg, mask_nbr, mask_len, out, arg_out, \
                                    mean)
  if (a.mask != Mask::kNone) return JGO_SPMM(Reduce::kSum, true, false);  // masks come with sums
  switch (a.reduce) {  // a mean is a sum divided at the end: the same compiled walks
    case Reduce::kSum: return JGO_SPMM(Reduce::kSum, false, false);
    case Reduce::kMean: return JGO_SPMM(Reduce::kSum, false, true);
    case Reduce::kMax: return JGO_SPMM(Reduce::kMax, false, false);
    case Reduce::kMin: return JGO_SPMM(Reduce::kMin, false, false);
  }
#undef JGO_SPMM
  return InvalidArgument("jgo_spmm: unknown reduce");
}

template <typename T, typename I>
ffi::Error SpmmTyped(ffi::ThreadPool& pool, const SpmmArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                     ffi::AnyBuffer eid, ffi::AnyBuffer node, ffi::AnyBuffer edge, ffi::AnyBuffer mask_arg,
                     ffi::AnyBuffer out, ffi::AnyBuffer arg_out) {
  const I* o = offsets.typed_data<I>();
  const I* n = nbr.typed_data<I>();
  const I* e = eid.typed_data<I>();
  if (auto err = CheckCompressed(pool, o, n, e, a.n_rows, a.n_edges, a.nbr_bound, a.reads_nbr, "jgo_spmm", a.reads_eid);
      err.failure())
    return err;
  const I* m = a.mask == Mask::kNone ? nullptr : mask_arg.typed_data<I>();
  I* arg = (a.reduce == Reduce::kMax || a.reduce == Reduce::kMin) ? arg_out.typed_data<I>() : nullptr;
  const T* nd = node.typed_data<T>();
  const T* ed = edge.typed_data<T>();
  T* od = out.typed_data<T>();
  const I* mn = a.mask == Mask::kByNbr ? n : nullptr;
  const int64_t ml = m ? static_cast<int64_t>(mask_arg.element_count()) : 0;
  switch (a.op) {
    case Op::kCopyNode: return SpmmDispatchReduce<T, I, Op::kCopyNode>(pool, a, o, n, e, nd, ed, m, mn, ml, od, arg);
    case Op::kCopyEdge: {  // the edge rows, walked as node rows whose neighbour ids are the edge ids
      SpmmArgs b = a;
      b.node_strides = a.edge_strides;
      b.node_len = a.edge_len;
      return SpmmDispatchReduce<T, I, Op::kCopyNode>(pool, b, o, e, e, ed, ed, m, mn, ml, od, arg);
    }
    case Op::kAdd: return SpmmDispatchReduce<T, I, Op::kAdd>(pool, a, o, n, e, nd, ed, m, mn, ml, od, arg);
    case Op::kMul: return SpmmDispatchReduce<T, I, Op::kMul>(pool, a, o, n, e, nd, ed, m, mn, ml, od, arg);
  }
  return InvalidArgument("jgo_spmm: unknown op");
}

ffi::Error SpmmCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                   ffi::AnyBuffer node, ffi::AnyBuffer edge, ffi::AnyBuffer mask_arg,
                   ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> arg_out, int64_t op, int64_t reduce,
                   int64_t mask, ffi::Span<const int64_t> dims, ffi::Span<const int64_t> node_strides,
                   ffi::Span<const int64_t> edge_strides, bool /*checked: every index is checked here anyway*/) {
  auto args = CheckSpmm(offsets, nbr, eid, node, edge, mask_arg, *out, *arg_out, op, reduce, mask, dims,
                        node_strides, edge_strides);
  if (args.has_error()) return args.error();
  return DispatchTypes(out->element_type(), offsets.element_type(), [&](auto t, auto i) {
    return SpmmTyped<decltype(t), decltype(i)>(pool, *args, offsets, nbr, eid, node, edge, mask_arg, *out, *arg_out);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_pool_sorted: out[g] = the sum (or mean) of the rows of x [N, F] whose id is g, for ids sorted
// in increasing order (a batch's node-to-graph ids); ids outside [0, G) belong to no graph. Graph g's rows
// are [lower_bound(g), lower_bound(g + 1)): SumRows over consecutive rows, split by work on the pool.
// Ids that decrease are an error (the Python promise ids_are_sorted=True was wrong).

template <typename T, typename I>
ffi::Error PoolSortedTyped(ffi::ThreadPool& pool, const T* x, const I* ids, T* out, int64_t N, int64_t F, int64_t G,
                           bool mean) {
  // One pass over the ids gives both the check and graph g's rows [offsets[g], offsets[g + 1]): a row k
  // where the id rises from a to b starts graphs a + 1..b (clamped to [0, G]), so each offset is written by
  // exactly one row (or by the ends) and the chunks never write the same one.
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const int64_t n_tasks = std::clamp<int64_t>(N / kMinWorkPerTask, 1, threads);
  std::vector<int64_t> offsets(G + 1), first_down(n_tasks, -1);
  auto clamp = [G](int64_t id) { return std::clamp<int64_t>(id, -1, G); };
  ParallelFor(pool, n_tasks, [&](int64_t t) {
    const int64_t k0 = N * t / n_tasks, k1 = N * (t + 1) / n_tasks;
    if (t == 0)
      for (int64_t g = 0; g <= clamp(ids[0]); ++g) offsets[g] = 0;
    if (t == n_tasks - 1)
      for (int64_t g = std::max<int64_t>(clamp(ids[N - 1]) + 1, 0); g <= G; ++g) offsets[g] = N;
    for (int64_t k = std::max<int64_t>(k0, 1); k < k1; ++k) {
      const int64_t a = ids[k - 1], b = ids[k];
      if (b < a) {
        first_down[t] = k;
        return;
      }
      for (int64_t g = std::max<int64_t>(clamp(a) + 1, 0), g1 = clamp(b); g <= g1; ++g) offsets[g] = k;
    }
  });
  for (int64_t k : first_down) {
    if (k >= 0)
      return InvalidArgument("pool: graph_ids must never decrease (ids_are_sorted=True); graph_ids[" +
                             std::to_string(k) + "] = " + std::to_string(static_cast<int64_t>(ids[k])) +
                             " follows " + std::to_string(static_cast<int64_t>(ids[k - 1])));
  }
  // ForRowChunks splits by offsets[r] + r up to offsets[G] + G: rows before offsets[0] (ids below 0) count as
  // graph 0's work, which only shifts the split
  ForRowChunks(pool, offsets.data(), G, F, [&](int64_t r0, int64_t r1) {
    SumRows<T, int64_t, RowForm::kConsecutiveNodes>(offsets.data(), nullptr, nullptr, x, nullptr, out, F, mean,
                                                    /*stream=*/false, r0, r1);
  });
  return ffi::Error::Success();
}

ffi::Error PoolSortedCpu(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::AnyBuffer ids, ffi::Result<ffi::AnyBuffer> out,
                         bool mean) {
  auto args = CheckPoolSorted(x, ids, *out);
  if (args.has_error()) return args.error();
  const int64_t N = args->n, F = args->width, G = args->graphs;
  if (N == 0) {
    std::fill_n(static_cast<char*>(out->untyped_data()), out->size_bytes(), 0);
    return ffi::Error::Success();
  }
  return DispatchTypes(x.element_type(), ids.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    return PoolSortedTyped<T, I>(pool, x.typed_data<T>(), ids.typed_data<I>(), out->typed_data<T>(), N, F, G, mean);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_pool_sorted_bwd: out[i] = ct[ids[i]] for an id in [0, G), 0 for any other: each graph's row of
// ct [G, F] copied to its nodes, the transpose of jgo_pool_sorted's sum (a mean's division is the
// caller's). Reads the ids once and writes each output row once; rows split over the pool.

template <typename T, typename I>
void PoolSortedBwdTyped(ffi::ThreadPool& pool, const T* ct, const I* ids, T* out, int64_t N, int64_t F, int64_t G) {
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const int64_t n_tasks = std::clamp<int64_t>(N * std::max<int64_t>(F, 1) / kMinWorkPerTask, 1, threads);
  ParallelFor(pool, n_tasks, [&](int64_t t) {
    for (int64_t i = N * t / n_tasks, i1 = N * (t + 1) / n_tasks; i < i1; ++i) {
      const int64_t g = static_cast<int64_t>(ids[i]);
      if (g >= 0 && g < G) std::memcpy(out + i * F, ct + g * F, F * sizeof(T));
      else std::fill_n(out + i * F, F, T(0));
    }
  });
}

ffi::Error PoolSortedBwdCpu(ffi::ThreadPool pool, ffi::AnyBuffer ct, ffi::AnyBuffer ids,
                            ffi::Result<ffi::AnyBuffer> out) {
  auto args = CheckPoolSortedBwd(ct, ids, *out);
  if (args.has_error()) return args.error();
  const int64_t N = args->n, F = args->width, G = args->graphs;
  return DispatchTypes(ct.element_type(), ids.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    PoolSortedBwdTyped<T, I>(pool, ct.typed_data<T>(), ids.typed_data<I>(), out->typed_data<T>(), N, F, G);
    return ffi::Error::Success();
  });
}

// ---------------------------------------------------------------------------------------
// jgo_sddmm

// kMasked: an element is kept where the mask row, the row's or (mask_by_nbr) the neighbour's, holds the edge's id.
template <typename T, typename I, Op op, bool kDot, bool kMasked>
void SddmmRows(const SddmmArgs& s, const I* offsets, const I* nbr, const I* eid, const T* lhs, const T* rhs,
               const I* mask_arg, bool mask_by_nbr, T* out, int64_t r0, int64_t r1) {
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
        if (kMasked && mask_by_nbr) PrefetchRow(mask_arg + j * F, F);
      }
      const int64_t j = nbr[k], e = eid[k];
      const T* a_row = OperandRow(lhs, s.a_len, s.a_target, r, j, e);
      const T* b_row = OperandRow(rhs, s.b_len, s.b_target, r, j, e);
      const I* mask_row = kMasked ? mask_arg + (mask_by_nbr ? j : r) * F : nullptr;
      for (int64_t f01 = 0; f01 < F01; ++f01) {
        if (kDot) {
          T acc = T(0);
          for (int64_t i2 = 0; i2 < d.d2; ++i2) {
            const T v = EdgeElement<op, T, T>(a_row, b_row, s.a_strides, s.b_strides, d, f01, i2);
            acc += (!kMasked || mask_row[f01 * d.d2 + i2] == e) ? v : T(0);
          }
          out[e * F01 + f01] = acc;
        } else {
          T* o = out + e * F + f01 * d.d2;
          for (int64_t i2 = 0; i2 < d.d2; ++i2) {
            const bool keep = !kMasked || mask_row[f01 * d.d2 + i2] == e;
            o[i2] = keep ? EdgeElement<op, T, T>(a_row, b_row, s.a_strides, s.b_strides, d, f01, i2) : T(0);
          }
        }
      }
    }
  }
}

template <typename T, typename I, Op op, bool kDot, bool kMasked>
void SddmmParallel(ffi::ThreadPool& pool, const SddmmArgs& s, const I* offsets, const I* nbr, const I* eid,
                   const T* lhs, const T* rhs, const I* mask_arg, T* out) {
  const bool by_nbr = s.mask == Mask::kByNbr;
  ForRowChunks(pool, offsets, s.n_rows, s.dims.size(), [&](int64_t r0, int64_t r1) {
    SddmmRows<T, I, op, kDot, kMasked>(s, offsets, nbr, eid, lhs, rhs, mask_arg, by_nbr, out, r0, r1);
  });
}

// Not inlined: the int32 walks are compiled once, not into the callers of both index types.
template <typename T, typename I, bool kMasked>
__attribute__((noinline)) void SddmmDispatchOp(ffi::ThreadPool& pool, const SddmmArgs& s, const I* offsets,
                                               const I* nbr, const I* eid, const T* lhs, const T* rhs,
                                               const I* mask_arg, T* out) {
#define JGO_SDDMM(OP, DOT) SddmmParallel<T, I, OP, DOT, kMasked>(pool, s, offsets, nbr, eid, lhs, rhs, mask_arg, out)
  if (s.dot) {
    JGO_SDDMM(Op::kMul, true);
    return;
  }
  switch (s.op) {
    case Op::kCopyNode: JGO_SDDMM(Op::kCopyNode, false); break;
    case Op::kCopyEdge: {  // the right operand, as the left one of copy_lhs
      SddmmArgs b = s;
      std::swap(b.a_target, b.b_target);
      std::swap(b.a_strides, b.b_strides);
      std::swap(b.a_len, b.b_len);
      SddmmParallel<T, I, Op::kCopyNode, false, kMasked>(pool, b, offsets, nbr, eid, rhs, lhs, mask_arg, out);
      break;
    }
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
  if (auto err = CheckCompressed(pool, o, n, e, s.n_rows, s.n_edges, s.nbr_bound, s.reads_nbr, "jgo_sddmm");
      err.failure())
    return err;
  const T* a = lhs.typed_data<T>();
  const T* b = rhs.typed_data<T>();
  const I* m = s.mask == Mask::kNone ? nullptr : mask_arg.typed_data<I>();
  T* od = out.typed_data<T>();
  // The walks read int32 indices (Index): an int64 structure's are narrowed first.
  if (auto err = Int32Indices::Fit("jgo_sddmm", WalkBound(s)); err.failure()) return err;
  Int32Indices narrow;
  const Index *o32 = narrow(o, s.n_rows + 1), *n32 = narrow(n, s.n_edges), *e32 = narrow(e, s.n_edges);
  if (s.mask == Mask::kNone)
    SddmmDispatchOp<T, Index, false>(pool, s, o32, n32, e32, a, b, nullptr, od);
  else
    SddmmDispatchOp<T, Index, true>(pool, s, o32, n32, e32, a, b,
                                    narrow.EdgeIds(m, static_cast<int64_t>(mask_arg.element_count()), s.n_edges), od);
  ZeroPaddingEdges(o, e, s.n_rows, s.n_edges, s.dot ? s.dims.d0 * s.dims.d1 : s.dims.size(), od);
  return ffi::Error::Success();
}

ffi::Error SddmmCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                    ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::AnyBuffer mask_arg, ffi::Result<ffi::AnyBuffer> out,
                    int64_t op, int64_t lhs_target, int64_t rhs_target, bool dot, int64_t mask,
                    ffi::Span<const int64_t> dims, ffi::Span<const int64_t> lhs_strides,
                    ffi::Span<const int64_t> rhs_strides, bool /*checked: every index is checked here anyway*/) {
  auto args = CheckSddmm(offsets, nbr, eid, lhs, rhs, mask_arg, *out, op, lhs_target, rhs_target, dot, mask, dims,
                         lhs_strides, rhs_strides);
  if (args.has_error()) return args.error();
  return DispatchTypes(out->element_type(), offsets.element_type(), [&](auto t, auto i) {
    return SddmmTyped<decltype(t), decltype(i)>(pool, *args, offsets, nbr, eid, lhs, rhs, mask_arg, *out);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_edge_softmax

// The softmax of kH heads [h0, h0 + kH) of every row r0..r1 (SegmentSoftmax's rules, jgo/math.h): the
// heads of an edge are contiguous, so each pass over a row's edges reads a short vector per edge. The
// first pass (the maximum) is the first touch of the row's logits and outputs, prefetched ahead across
// rows; the weights (CpuExp: vectorised over the heads) are computed for the sum and again for the
// output, which is written once.
template <typename T, int kH>
JGO_INLINE void SoftmaxHeads(Indices offsets, Indices eid, const T* logits, T* out, int64_t heads, int64_t h0,
                             int64_t r0, int64_t r1) {
  const int64_t last = offsets[r1];
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t begin = offsets[r], end = offsets[r + 1];
    if (begin == end) continue;
    T m[kH], total[kH] = {};
    const T* first = logits + static_cast<int64_t>(eid[begin]) * heads + h0;
    for (int h = 0; h < kH; ++h) m[h] = first[h];
    for (int64_t k = begin; k < end; ++k) {  // the first touch of the row's logits and outputs: prefetched
      if (k + kPrefetchDistance < last) {
        const int64_t ahead = static_cast<int64_t>(eid[k + kPrefetchDistance]) * heads + h0;
        PrefetchRow(logits + ahead, kH);
        __builtin_prefetch(out + ahead, 1, 1);
      }
      const T* z = logits + static_cast<int64_t>(eid[k]) * heads + h0;
      for (int h = 0; h < kH; ++h) m[h] = SoftmaxMax(m[h], z[h]);
    }
    for (int h = 0; h < kH; ++h) m[h] = SoftmaxShift(m[h]);
    for (int64_t k = begin; k < end; ++k) {
      const T* z = logits + static_cast<int64_t>(eid[k]) * heads + h0;
      for (int h = 0; h < kH; ++h) total[h] += SoftmaxWeight(z[h], m[h], CpuExpFn{});
    }
    for (int h = 0; h < kH; ++h) total[h] = SoftmaxInverse(total[h]);
    for (int64_t k = begin; k < end; ++k) {  // the weight that was summed, times the inverse: written once
      const int64_t i = static_cast<int64_t>(eid[k]) * heads + h0;
      for (int h = 0; h < kH; ++h) out[i + h] = SoftmaxWeight(logits[i + h], m[h], CpuExpFn{}) * total[h];
    }
  }
}

// Every head of rows r0..r1: groups of 16, 8, 4, 2 and 1 heads. (No lambdas in code compiled per ISA: a
// lambda is a function of its own, compiled for the baseline.)
template <typename T>
JGO_INLINE void SoftmaxRowsAnyIsa(Indices offsets, Indices eid, const T* logits, T* out, int64_t heads, int64_t r0,
                                  int64_t r1) {
  int64_t h0 = 0;
  for (; h0 + 16 <= heads; h0 += 16) SoftmaxHeads<T, 16>(offsets, eid, logits, out, heads, h0, r0, r1);
  if (h0 + 8 <= heads) {
    SoftmaxHeads<T, 8>(offsets, eid, logits, out, heads, h0, r0, r1);
    h0 += 8;
  }
  if (h0 + 4 <= heads) {
    SoftmaxHeads<T, 4>(offsets, eid, logits, out, heads, h0, r0, r1);
    h0 += 4;
  }
  if (h0 + 2 <= heads) {
    SoftmaxHeads<T, 2>(offsets, eid, logits, out, heads, h0, r0, r1);
    h0 += 2;
  }
  if (h0 < heads) SoftmaxHeads<T, 1>(offsets, eid, logits, out, heads, h0, r0, r1);
}

#ifdef JGO_AVX2_CLONES
template <typename T>
JGO_AVX512_TARGET void SoftmaxRowsAvx512(Indices offsets, Indices eid, const T* logits, T* out, int64_t heads,
                                         int64_t r0, int64_t r1) {
  SoftmaxRowsAnyIsa<T>(offsets, eid, logits, out, heads, r0, r1);
}
template <typename T>
JGO_AVX2_TARGET void SoftmaxRowsAvx2(Indices offsets, Indices eid, const T* logits, T* out, int64_t heads, int64_t r0,
                                     int64_t r1) {
  SoftmaxRowsAnyIsa<T>(offsets, eid, logits, out, heads, r0, r1);
}
#endif

// The row walk for the CPU it runs on, compiled once for both index types (Indices: a branch per index read
// against the exps of an edge's heads).
template <typename T>
void SoftmaxRows(Indices offsets, Indices eid, const T* logits, T* out, int64_t heads, int64_t r0, int64_t r1) {
#ifdef JGO_AVX2_CLONES
  if (HasAvx512()) return SoftmaxRowsAvx512<T>(offsets, eid, logits, out, heads, r0, r1);
  if (HasAvx2Fma()) return SoftmaxRowsAvx2<T>(offsets, eid, logits, out, heads, r0, r1);
#endif
  SoftmaxRowsAnyIsa<T>(offsets, eid, logits, out, heads, r0, r1);
}

template <typename T, typename I>
ffi::Error SoftmaxTyped(ffi::ThreadPool& pool, ffi::AnyBuffer offsets, ffi::AnyBuffer eid, ffi::AnyBuffer logits,
                        ffi::AnyBuffer out) {
  const I* o = offsets.typed_data<I>();
  const I* e = eid.typed_data<I>();
  const int64_t n_rows = static_cast<int64_t>(offsets.element_count()) - 1;
  const int64_t n_edges = static_cast<int64_t>(eid.element_count());
  const int64_t heads = n_edges == 0 ? 1 : static_cast<int64_t>(logits.element_count()) / n_edges;
  if (auto err = CheckCompressed(pool, o, e, e, n_rows, n_edges, 0, false, "jgo_edge_softmax"); err.failure())
    return err;
  const T* x = logits.typed_data<T>();
  T* y = out.typed_data<T>();
  ForRowChunks(pool, o, n_rows, heads, [&](int64_t r0, int64_t r1) {
    SoftmaxRows<T>(o, e, x, y, heads, r0, r1);
  });
  ZeroPaddingEdges(o, e, n_rows, n_edges, heads, y);
  return ffi::Error::Success();
}

ffi::Error EdgeSoftmaxCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer eid, ffi::AnyBuffer logits,
                          ffi::Result<ffi::AnyBuffer> out, bool /*checked: every index is checked here anyway*/) {
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
JGO_CPU_HANDLER(PoolSorted, jgo::PoolSortedCpu, jgo::BindPoolSorted<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(PoolSortedBwd, jgo::PoolSortedBwdCpu, jgo::BindPoolSortedBwd<xla::ffi::ThreadPool>());
