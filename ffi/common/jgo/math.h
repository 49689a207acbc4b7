// Per-edge math shared by the CPU and CUDA handlers: message functors, reducers with
// argument tracking, strided broadcast indexing and the segment softmax.
//
// Everything here is header-only and `__host__ __device__` under nvcc, so a CPU test
// exercises the same arithmetic the GPU runs.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#ifdef __CUDACC__
#define JGO_HD __host__ __device__ __forceinline__
#else
#define JGO_HD inline
#endif

namespace jgo {

// Codes shared with jaxgraphops/ops/_primitives.py (_OP_CODE, _REDUCE_CODE, _WALK_TARGET_CODE and the
// mask codes: the FFI attribute values).
enum class Op : int64_t { kCopyNode = 0, kCopyEdge = 1, kAdd = 2, kMul = 3 };
enum class Reduce : int64_t { kSum = 0, kMean = 1, kMax = 2, kMin = 3 };
// Mask for the derivative forms of max/min: an element (row r, feature f) of edge e
// counts only where arg[m, f] == e, with m = the output row (kByRow) or the neighbour
// (kByNbr).
enum class Mask : int64_t { kNone = 0, kByRow = 1, kByNbr = 2 };
// Which row of an operand an edge reads in the edge-wise (SDDMM) kernel, which walks a
// compressed neighbourhood structure: the row being walked, the neighbour, or the edge itself.
enum class Target : int64_t { kRow = 0, kNbr = 1, kEdge = 2 };

// A feature row is viewed as a [d0, d1, d2] block; an operand is read through strides
// (0 on a broadcast axis), so NumPy broadcasting of up to three feature axes needs no copy.
struct Dims3 {
  int64_t d0, d1, d2;
  JGO_HD int64_t size() const { return d0 * d1 * d2; }
};
struct Strides3 {
  int64_t s0, s1, s2;
  JGO_HD int64_t offset(int64_t i0, int64_t i1, int64_t i2) const {
    return i0 * s0 + i1 * s1 + i2 * s2;
  }
  // Offset of the flat (row-major) output index f of a block of dims d.
  JGO_HD int64_t offset_of_flat(int64_t f, const Dims3& d) const {
    const int64_t i2 = f % d.d2;
    const int64_t r = f / d.d2;
    return offset(r / d.d1, r % d.d1, i2);
  }
};

template <Op op>
struct Message;
template <>
struct Message<Op::kCopyNode> {
  static constexpr bool kNode = true, kEdge = false;
  template <typename T>
  JGO_HD static T apply(T a, T) { return a; }
};
template <>
struct Message<Op::kCopyEdge> {
  static constexpr bool kNode = false, kEdge = true;
  template <typename T>
  JGO_HD static T apply(T, T b) { return b; }
};
template <>
struct Message<Op::kAdd> {
  static constexpr bool kNode = true, kEdge = true;
  template <typename T>
  JGO_HD static T apply(T a, T b) { return a + b; }
};
// a * b rounded on its own, never fused with a following addition (nvcc contracts a * b + c into one
// fused multiply-add by default): so a CUDA sum of products has the CPU's bits (message_passing.cc is
// compiled with -ffp-contract=off).
#ifdef __CUDA_ARCH__
JGO_HD float MulRn(float a, float b) { return __fmul_rn(a, b); }
JGO_HD double MulRn(double a, double b) { return __dmul_rn(a, b); }
#else
JGO_HD float MulRn(float a, float b) { return a * b; }
JGO_HD double MulRn(double a, double b) { return a * b; }
#endif

template <>
struct Message<Op::kMul> {
  static constexpr bool kNode = true, kEdge = true;
  template <typename T>
  JGO_HD static T apply(T a, T b) { return MulRn(a, b); }
};

JGO_HD float Exp(float x) { return expf(x); }
JGO_HD double Exp(double x) { return ::exp(x); }

template <typename T>
JGO_HD T Infinity() {
#ifdef __CUDACC__
  return static_cast<T>(INFINITY);
#else
  return std::numeric_limits<T>::infinity();
#endif
}

// Reducers. `arg` is the winning edge id for max/min (-1 while nothing was seen); ties
// keep the first edge visited, and rows are visited in input edge order, so the winner is
// the first maximal (minimal) incoming edge in input order. NaN beats every number and is
// never beaten (np.max's NaN), so the winner of a row holding NaN is its first NaN edge.
template <typename Acc, Reduce R>
struct Reducer;
template <typename Acc>
struct Reducer<Acc, Reduce::kSum> {
  static constexpr bool kArg = false;
  JGO_HD static Acc init() { return Acc(0); }
  template <typename I>
  JGO_HD static void update(Acc& acc, I&, Acc v, I) { acc += v; }
  template <typename I>
  JGO_HD static Acc finalize(Acc acc, I, int64_t) { return acc; }
};
template <typename Acc>
struct Reducer<Acc, Reduce::kMean> {
  static constexpr bool kArg = false;
  JGO_HD static Acc init() { return Acc(0); }
  template <typename I>
  JGO_HD static void update(Acc& acc, I&, Acc v, I) { acc += v; }
  template <typename I>
  JGO_HD static Acc finalize(Acc acc, I, int64_t count) {
    return count > 0 ? acc / static_cast<Acc>(count) : Acc(0);
  }
};
template <typename Acc>
struct Reducer<Acc, Reduce::kMax> {
  static constexpr bool kArg = true;
  JGO_HD static Acc init() { return -Infinity<Acc>(); }
  template <typename I>
  JGO_HD static void update(Acc& acc, I& arg, Acc v, I e) {  // branch-free, so it vectorises
    const bool take = (arg < 0) | ((acc == acc) & !(v <= acc));  // v beats a number when larger or NaN
    acc = take ? v : acc;
    arg = take ? e : arg;
  }
  template <typename I>
  JGO_HD static Acc finalize(Acc acc, I arg, int64_t) { return arg < 0 ? Acc(0) : acc; }
};
template <typename Acc>
struct Reducer<Acc, Reduce::kMin> {
  static constexpr bool kArg = true;
  JGO_HD static Acc init() { return Infinity<Acc>(); }
  template <typename I>
  JGO_HD static void update(Acc& acc, I& arg, Acc v, I e) {  // branch-free, so it vectorises
    const bool take = (arg < 0) | ((acc == acc) & !(v >= acc));  // v beats a number when smaller or NaN
    acc = take ? v : acc;
    arg = take ? e : arg;
  }
  template <typename I>
  JGO_HD static Acc finalize(Acc acc, I arg, int64_t) { return arg < 0 ? Acc(0) : acc; }
};

// The row of an operand of the edge-wise kernel: the walked row, the neighbour, or the edge.
template <typename T>
JGO_HD const T* OperandRow(const T* base, int64_t len, Target t, int64_t row, int64_t nbr, int64_t e) {
  return base + (t == Target::kRow ? row : t == Target::kNbr ? nbr : e) * len;
}

// One message element of edge `e`: op(node[nbr, f], edge[e, f]) under broadcasting.
template <Op op, typename T>
JGO_HD T MessageAt(const T* node_row, const T* edge_row, int64_t node_off, int64_t edge_off) {
  using M = Message<op>;
  const T a = M::kNode ? node_row[node_off] : T(0);
  const T b = M::kEdge ? edge_row[edge_off] : T(0);
  return M::apply(a, b);
}

// One element of the edge-wise kernel: op(a, b), or the sum over the d2 axis of a * b when
// `dot` (the SDDMM dot product). `f01` is the flat index over (d0, d1).
template <Op op, typename T, typename Acc>
JGO_HD Acc EdgeElement(const T* a_row, const T* b_row, const Strides3& as, const Strides3& bs,
                       const Dims3& d, int64_t f01, int64_t i2) {
  const int64_t i0 = f01 / d.d1, i1 = f01 % d.d1;
  return static_cast<Acc>(MessageAt<op, T>(a_row, b_row, as.offset(i0, i1, i2), bs.offset(i0, i1, i2)));
}

// The rules of a softmax over a neighbourhood, shared by every kernel that normalises one: the running
// maximum (a NaN first logit stays; later ones do not displace a number, the sum turns NaN anyway); the
// shift (a row whose maximum is -inf, i.e. of only -inf logits, is shifted by 0); the weight of a logit
// given the shift or the row's log-sum-exp, exactly 0 for a -inf logit (also in a row of only -inf
// logits, never exp(-inf - -inf)); and the inverse of the sum: 0 when nothing was seen (a row without
// edges, or of only -inf logits), NaN for the whole row, as in NumPy, when a logit is NaN or +inf.
template <typename Acc>
JGO_HD Acc SoftmaxMax(Acc m, Acc v) { return v > m ? v : m; }
template <typename Acc>
JGO_HD Acc SoftmaxShift(Acc m) { return m == -Infinity<Acc>() ? Acc(0) : m; }
template <typename T, typename ExpFn>
JGO_HD T SoftmaxWeight(T z, T shift, ExpFn exp_fn) {
  return z == -Infinity<T>() ? T(0) : exp_fn(z - shift);
}
template <typename T>
JGO_HD T SoftmaxInverse(T l) {
  return l != T(0) ? T(1) / l : T(0);
}

// Merges the online-softmax state (m2, l2) of other logits into (m, l) (the running maximum and the sum of
// exp(z - m)): the combine of split rows' (max, sum[, accumulator]) triples, which multiplies the two
// accumulators by scale and scale2. Symmetric in its two states, bit for bit; a state that saw nothing (or
// only -inf) has m = -inf and l = 0 and changes nothing (never exp(-inf - -inf)).
template <typename T, typename ExpFn>
JGO_HD void SoftmaxMerge(T& m, T& l, T m2, T l2, T& scale, T& scale2, ExpFn exp_fn) {
  const T m_new = m2 > m ? m2 : m;
  scale = m == m_new ? T(1) : exp_fn(m - m_new);
  scale2 = m2 == m_new ? T(1) : exp_fn(m2 - m_new);
  l = l * scale + l2 * scale2;
  m = m_new;
}

// The three passes of a softmax of logits[eid[k], h] over positions k in [lo, hi) of a row, in Acc:
// the running maximum from the first logit (lo < hi), the sum of the weights given the shift, and the
// writes given the shift and the inverse sum. SegmentSoftmax runs them over a whole row; a kernel
// that splits a row runs them over slices and merges the maxima and the sums in slice order.
template <typename T, typename Acc, typename I>
JGO_HD Acc SoftmaxSliceMax(const T* logits, const I* eid, int64_t lo, int64_t hi, int64_t h, int64_t n_heads) {
  Acc m = static_cast<Acc>(logits[static_cast<int64_t>(eid[lo]) * n_heads + h]);
  for (int64_t k = lo + 1; k < hi; ++k) {
    m = SoftmaxMax(m, static_cast<Acc>(logits[static_cast<int64_t>(eid[k]) * n_heads + h]));
  }
  return m;
}
template <typename T, typename Acc, typename I>
JGO_HD Acc SoftmaxSliceSum(const T* logits, const I* eid, int64_t lo, int64_t hi, int64_t h, int64_t n_heads,
                           Acc shift) {
  Acc total = Acc(0);
  for (int64_t k = lo; k < hi; ++k) {
    total += Exp(static_cast<Acc>(logits[static_cast<int64_t>(eid[k]) * n_heads + h]) - shift);
  }
  return total;
}
template <typename T, typename Acc, typename I>
JGO_HD void SoftmaxSliceWrite(const T* logits, const I* eid, int64_t lo, int64_t hi, int64_t h, int64_t n_heads,
                              Acc shift, Acc inv, T* out) {
  for (int64_t k = lo; k < hi; ++k) {
    const int64_t i = static_cast<int64_t>(eid[k]) * n_heads + h;
    out[i] = static_cast<T>(Exp(static_cast<Acc>(logits[i]) - shift) * inv);
  }
}

// Numerically stable softmax of logits[eid[k], h] over k in [begin, end), written to
// out[eid[k], h]. Accumulates in Acc. A -inf logit gets weight 0; a row of only -inf logits
// gets 0 everywhere (as a row without edges), not exp(-inf - -inf) = NaN.
template <typename T, typename Acc, typename I>
JGO_HD void SegmentSoftmax(const T* logits, const I* eid, int64_t begin, int64_t end, int64_t h,
                           int64_t n_heads, T* out) {
  if (begin >= end) return;
  const Acc shift = SoftmaxShift(SoftmaxSliceMax<T, Acc, I>(logits, eid, begin, end, h, n_heads));
  const Acc inv = SoftmaxInverse(SoftmaxSliceSum<T, Acc, I>(logits, eid, begin, end, h, n_heads, shift));
  SoftmaxSliceWrite<T, Acc, I>(logits, eid, begin, end, h, n_heads, shift, inv, out);
}

}  // namespace jgo
