// CPU handlers of the graph neural operator (gno_conv): the fused forward jgo_gno_fwd (CSC) and
// its two atomic-free backward passes, jgo_gno_bwd_src over the reverse CSR (grad f, grad Vb) and
// jgo_gno_bwd_dst over the CSC (grad dx, U, b_u, w). Per-edge math: jgo/gno.h.
//
// Nothing of size E x c_out x c_in (kappa) is formed. A row's edges are taken in chunks of up to
// kChunk: their gathered (weighted) feature rows X [n, features] and hidden layers [n, Hp] go to
// scratch, and the per-edge outer products summed over the chunk are one small matrix product
// (X^T times the hidden layers, cpu/small_gemm.h) whose accumulators stay in registers. The
// per-row [features, units] blocks are contracted with Vb per row (diagonal) or per tile of kTile
// rows (matrix, again a small matrix product). Parameter gradients are accumulated per range of
// rows and summed in range order; the ranges depend on the problem size only, not on the thread
// count (ReductionChunks, cpu/row_parallel.h), so the sums are bitwise the same on any number of
// threads.
//
// Units are stored padded to whole vectors: the H hidden units, zeros up to Hp (H rounded up to
// whole vectors), then the bias unit at Hp, Ps = Hp + 1 in all. Vb, U and b_u are repacked into
// these layouts once per call (Packed). The pre-activations of a chunk, a_e = U dx_e + b_u (GnoPre),
// are the small product [1, dx_e] . [b_u; U^T], summed in GnoPre's order.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu/handler.h"
#include "cpu/row_parallel.h"
#include "cpu/small_gemm.h"
#include "cpu/vector_math.h"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/gno.h"
#include "jgo/gno_args.h"

namespace jgo {
namespace {

constexpr int64_t kTile = 8;    // rows contracted with Vb together (matrix kernel)
constexpr int64_t kChunk = 64;  // edges gathered into scratch at a time

// y[0:n] += s * x[0:n].
template <typename T>
JGO_INLINE void Axpy(T* __restrict__ y, T s, const T* __restrict__ x, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] += s * x[c];
}

// The weights in the padded unit layout: ub = [b_u; U^T] [d + 1, Hp], and vb = Vb with its unit
// axis padded to Ps and, where a row loop multiplies by it, its feature rows to ld elements.
template <typename T>
struct Packed {
  int64_t Hp, Ps, ld;
  std::vector<T> ub, vb;
};

// dst[r * rs + u' * us + x] = src[(r * P + u) * X + x] for r < R, units u < P = H + 1 and x < X,
// with u' the padded index of unit u.
template <typename T>
void PackUnits(const T* src, int64_t R, int64_t X, int64_t H, int64_t Hp, T* dst, int64_t rs, int64_t us) {
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t u = 0; u <= H; ++u) {
      const T* s = src + (r * (H + 1) + u) * X;
      std::copy(s, s + X, dst + r * rs + (u < H ? u : Hp) * us);
    }
  }
}

// dst[r * P + u] = src[r * rs + u'] for r < R and units u < P = H + 1 (the inverse of PackUnits).
template <typename T>
void UnpackUnits(const T* src, int64_t R, int64_t H, int64_t Hp, int64_t rs, T* dst) {
  for (int64_t r = 0; r < R; ++r) {
    std::copy(src + r * rs, src + r * rs + H, dst + r * (H + 1));
    dst[r * (H + 1) + H] = src[r * rs + Hp];
  }
}

// Vb in the layout of each pass (gno_args.h), padded: diagonal [C, Ps]; matrix forward
// [c_in, Ps, ld = c_out padded]; bwd_src [c_out, Ps, ld = c_in padded]; bwd_dst [c_out, ld] with
// [c_in, Ps] in each row and ld = c_in Ps padded.
template <typename T>
Packed<T> Pack(const GnoArgs& a, GnoPass pass, const T* U, const T* b_u, const T* Vb) {
  const int64_t H = a.hidden, d = a.dim, Cin = a.c_in, Cout = a.c_out;
  Packed<T> p;
  p.Hp = RoundUpToVec<T>(H);
  p.Ps = p.Hp + 1;
  p.ub.assign((d + 1) * p.Hp, T(0));
  for (int64_t k = 0; k < H; ++k) {
    p.ub[k] = b_u[k];
    for (int64_t m = 0; m < d; ++m) p.ub[(1 + m) * p.Hp + k] = U[k * d + m];
  }
  if (a.diagonal) {
    p.ld = p.Ps;
    p.vb.assign(Cin * p.Ps, T(0));
    PackUnits(Vb, Cin, 1, H, p.Hp, p.vb.data(), p.Ps, 1);
  } else if (pass != GnoPass::kBwdDst) {
    const int64_t R = pass == GnoPass::kFwd ? Cin : Cout, X = pass == GnoPass::kFwd ? Cout : Cin;
    p.ld = RoundUpToVec<T>(X);
    p.vb.assign(R * p.Ps * p.ld, T(0));
    PackUnits(Vb, R, X, H, p.Hp, p.vb.data(), p.Ps * p.ld, p.ld);
  } else {
    p.ld = RoundUpToVec<T>(Cin * p.Ps);
    p.vb.assign(Cout * p.ld, T(0));
    for (int64_t o = 0; o < Cout; ++o)
      PackUnits(Vb + o * Cin * (H + 1), Cin, 1, H, p.Hp, p.vb.data() + o * p.ld, p.Ps, 1);
  }
  return p;
}

template <typename T, typename I>
inline void PrefetchEdge(const GnoArgs& a, const I* nbr, const I* eid, const T* rows, int64_t row_len, const T* dx,
                         int64_t k, int64_t last) {
  if (k + kPrefetchDistance < last) {
    const int64_t q = k + kPrefetchDistance;
    PrefetchRow(rows + static_cast<int64_t>(nbr[q]) * row_len, row_len);
    PrefetchRow(dx + static_cast<int64_t>(eid[q]) * a.dim, a.dim);
  }
}

// Scratch for a chunk of edges: gathered rows x [kChunk, len] and their sum, [1, dx_e] rows
// x1 [kChunk, d + 1], and hidden units h [kChunk, Hp].
template <typename T>
struct ChunkScratch {
  std::vector<T> x, sum, x1, h;
  ChunkScratch(const GnoArgs& a, const Packed<T>& p, int64_t len)
      : x(kChunk * len), sum(len), x1(kChunk * (a.dim + 1)), h(kChunk * p.Hp) {}
};

// Edges k0 .. k0 + n - 1 of a row (edge l = k - k0): x[l] = w_e rows[nbr[k]] (len elements; w_e = 1
// where w is null or kUnweighted), sum += x[l], x1[l] = [1, dx_e], and h[l] = the pre-activations
// U dx_e + b_u (0 in the padding). The weights are a run-time choice of the forward and jgo_gno_bwd_src
// passes, not a template parameter (a product by 1 is exact): only jgo_gno_bwd_dst, whose weighted form
// does more per edge, is compiled for each (kWeight). That cut this file's compile time by a quarter at
// the same speed; a run-time choice there too would cut it by half but slowed the unweighted pass 2x.
template <typename T, typename I, int kVec, bool kUnweighted = false>
JGO_INLINE void GatherEdges(const GnoArgs& a, const Packed<T>& p, const I* nbr, const I* eid, const T* rows,
                            int64_t len, const T* dx, const T* w, int64_t k0, int64_t n, int64_t last,
                            ChunkScratch<T>& s) {
  const int64_t d = a.dim;
  for (int64_t l = 0; l < n; ++l) {
    PrefetchEdge(a, nbr, eid, rows, len, dx, k0 + l, last);
    const int64_t e = eid[k0 + l];
    const T we = !kUnweighted && w ? w[e] : T(1);
    const T* src = rows + static_cast<int64_t>(nbr[k0 + l]) * len;
    T* xl = s.x.data() + l * len;
    for (int64_t c = 0; c < len; ++c) {
      xl[c] = we * src[c];
      s.sum[c] += xl[c];
    }
    T* x1 = s.x1.data() + l * (d + 1);
    x1[0] = T(1);
    for (int64_t m = 0; m < d; ++m) x1[1 + m] = dx[e * d + m];
  }
  Gemm<kVec>(n, p.Hp, d + 1, s.x1.data(), d + 1, 1, p.ub.data(), p.Hp, s.h.data(), p.Hp, false);
}

// <a, b> over the Ps stored units.
template <int kVec, typename T>
JGO_INLINE T UnitDot(const Packed<T>& p, const T* a, const T* b) {
  return VecDot<kVec>(a, b, p.Hp) + a[p.Hp] * b[p.Hp];
}

// A[c, u] = sum_e w_e rows[nbr_e][c] h~_e[u] over the edges of row r (A: [len, Ps], zeroed by the
// caller): the hidden units chunk by chunk, the bias unit (h~ = 1) from the sums of the rows.
template <typename T, typename I, int kVec>
JGO_INLINE void RowOuter(const GnoArgs& a, const Packed<T>& p, const I* offsets, const I* nbr, const I* eid,
                         const T* rows, int64_t len, const T* dx, const T* w, int64_t r, int64_t last,
                         ChunkScratch<T>& s, T* A) {
  std::fill(s.sum.begin(), s.sum.end(), T(0));
  for (int64_t k0 = offsets[r], end = offsets[r + 1]; k0 < end; k0 += kChunk) {
    const int64_t n = std::min(kChunk, end - k0);
    GatherEdges<T, I, kVec>(a, p, nbr, eid, rows, len, dx, w, k0, n, last, s);
    T* h = s.h.data();
    for (int64_t q = 0; q < n * p.Hp; ++q) h[q] = GnoHidden(h[q]);
    Gemm<kVec>(len, p.Hp, n, s.x.data(), 1, len, h, p.Hp, A, p.Ps, true);  // A[c, k] += sum_l x[l, c] h[l, k]
  }
  for (int64_t c = 0; c < len; ++c) A[c * p.Ps + p.Hp] = s.sum[c];
}

// ---------------------------------------------------------------------------------------
// jgo_gno_fwd: A_r[c, k] = sum_e w_e f_j[c] h~_e[k] per destination, then out_r = Vb . A_r.

template <typename T, typename I, bool kDiag, int kVec>
JGO_INLINE void GnoFwdRows(const GnoArgs& a, const Packed<T>& p, const I* offsets, const I* nbr, const I* eid,
                           const T* f, const T* dx, const T* w, T* out, int64_t r0, int64_t r1) {
  const int64_t Cin = a.c_in, Cout = a.c_out, Ps = p.Ps, Q = Cin * Ps, ld = p.ld;
  std::vector<T> acc(kTile * Q), o(kDiag ? 0 : kTile * ld);
  ChunkScratch<T> s(a, p, Cin);
  const int64_t last = offsets[r1];
  for (int64_t t0 = r0; t0 < r1; t0 += kTile) {
    const int64_t t1 = std::min(t0 + kTile, r1);
    std::fill(acc.begin(), acc.begin() + (t1 - t0) * Q, T(0));
    for (int64_t r = t0; r < t1; ++r) {
      T* A = acc.data() + (r - t0) * Q;
      RowOuter<T, I, kVec>(a, p, offsets, nbr, eid, f, Cin, dx, w, r, last, s, A);
      if constexpr (kDiag) {  // out_r[c] = <Vb[c], A_r[c]>
        for (int64_t c = 0; c < Cin; ++c) out[r * Cout + c] = UnitDot<kVec>(p, p.vb.data() + c * Ps, A + c * Ps);
      }
    }
    if constexpr (!kDiag) {  // out_r[o] = sum_{c,u} A_r[c, u] Vb[c, u, o] for the tile's rows
      Gemm<kVec>(t1 - t0, ld, Q, acc.data(), Q, 1, p.vb.data(), ld, o.data(), ld, false);
      for (int64_t r = t0; r < t1; ++r) std::copy_n(o.data() + (r - t0) * ld, Cout, out + r * Cout);
    }
  }
}

struct FwdRows {
  template <typename T, typename I, bool kDiag, int kVec, typename... Args>
  JGO_INLINE static void run(const GnoArgs* a, const Packed<T>* p, Args... args) {
    GnoFwdRows<T, I, kDiag, kVec>(*a, *p, args...);
  }
};

// Calls Rows::run<T, I, kDiag, kVec>(args...) compiled for AVX2 + FMA on 32-byte vectors
// where the CPU has them, else for the baseline ISA on 16-byte vectors.
template <typename Rows, typename T, typename I, bool kDiag, typename... Args>
void RunBaseline(Args... args) {
  Rows::template run<T, I, kDiag, 16>(args...);
}
#ifdef JGO_AVX2_CLONES
template <typename Rows, typename T, typename I, bool kDiag, typename... Args>
__attribute__((target("avx2,fma"))) void RunAvx2(Args... args) {
  Rows::template run<T, I, kDiag, 32>(args...);
}
#endif
template <typename Rows, typename T, typename I, bool kDiag, typename... Args>
void RunRows(Args... args) {
#ifdef JGO_AVX2_CLONES
  if (HasAvx2Fma()) return RunAvx2<Rows, T, I, kDiag>(args...);
#endif
  RunBaseline<Rows, T, I, kDiag>(args...);
}

// Calls fn(std::integral_constant<bool, diagonal>).
template <typename Fn>
void DispatchDiagonal(bool diagonal, Fn&& fn) {
  if (diagonal) fn(std::true_type{}); else fn(std::false_type{});
}

// The row walks read int32 indices (Int32Indices: an int64 structure is narrowed to an int32 copy, a pass over
// 2 E + n_rows indices against the walks' GEMMs per edge).
using Index = int32_t;

template <typename T, typename I>
ffi::Error GnoFwdTyped(ffi::ThreadPool& pool, const GnoArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                       ffi::AnyBuffer eid, ffi::AnyBuffer f, ffi::AnyBuffer dx, ffi::AnyBuffer U, ffi::AnyBuffer b_u,
                       ffi::AnyBuffer Vb, ffi::AnyBuffer w, ffi::AnyBuffer out) {
  const I* o = offsets.typed_data<I>();
  const I* n = nbr.typed_data<I>();
  const I* e = eid.typed_data<I>();
  if (auto err = CheckCompressed(pool, o, n, e, a.n_rows, a.n_edges, a.nbr_bound, true, "jgo_gno_fwd");
      err.failure()) return err;
  if (auto err = Int32Indices::Fit("jgo_gno_fwd", std::max({a.n_edges, a.n_rows, a.nbr_bound})); err.failure())
    return err;
  Int32Indices narrow;
  const Index *o32 = narrow(o, a.n_rows + 1), *n32 = narrow(n, a.n_edges), *e32 = narrow(e, a.n_edges);
  const T *fd = f.typed_data<T>(), *xd = dx.typed_data<T>();
  const T* wd = a.has_weight ? w.typed_data<T>() : nullptr;
  T* od = out.typed_data<T>();
  const Packed<T> p = Pack(a, GnoPass::kFwd, U.typed_data<T>(), b_u.typed_data<T>(), Vb.typed_data<T>());
  ForRowChunks(pool, o, a.n_rows, a.c_in * a.units(), [&](int64_t r0, int64_t r1) {
    DispatchDiagonal(a.diagonal, [&](auto diag) {
      RunRows<FwdRows, T, Index, decltype(diag)::value>(&a, &p, o32, n32, e32, fd, xd, wd, od, r0, r1);
    });
  });
  return ffi::Error::Success();
}

ffi::Error GnoFwdCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                     ffi::AnyBuffer f, ffi::AnyBuffer dx, ffi::AnyBuffer U, ffi::AnyBuffer b_u, ffi::AnyBuffer Vb,
                     ffi::AnyBuffer w, ffi::Result<ffi::AnyBuffer> out, bool diagonal, bool has_weight) {
  const auto od = out->dimensions();
  const int64_t c_out = od.size() == 2 ? od[1] : -1;
  auto args = CheckGno(GnoPass::kFwd, offsets, nbr, eid, f, dx, U, b_u, Vb, w, nullptr, c_out, diagonal, has_weight);
  if (args.has_error()) return args.error();
  if (auto err = CheckGnoFwdResult(*args, *out, f.element_type()); err.failure()) return err;
  return DispatchTypes(f.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return GnoFwdTyped<decltype(t), decltype(i)>(pool, *args, offsets, nbr, eid, f, dx, U, b_u, Vb, w, *out);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_gno_bwd_src, over the out-edges of each source j (reverse CSR):
//   B_j[o, k] = sum_e w_e G_i[o] h~_e[k],   grad_f[j] = Vb . B_j,   grad_Vb[c, o, k] += f_j[c] B_j[o, k]
// grad_Vb is accumulated padded: diagonal [C, Ps], matrix [c_in, GradVbRow] with [c_out, Ps] in each row.

template <typename T>
int64_t GradVbRow(const GnoArgs& a, const Packed<T>& p) {
  return a.diagonal ? p.Ps : RoundUpToVec<T>(a.c_out * p.Ps);
}

template <typename T, typename I, bool kDiag, int kVec>
JGO_INLINE void GnoBwdSrcRows(const GnoArgs& a, const Packed<T>& p, const I* offsets, const I* nbr, const I* eid,
                              const T* f, const T* dx, const T* w, const T* G, T* grad_f, T* grad_vb, int64_t r0,
                              int64_t r1) {
  const int64_t Cin = a.c_in, Cout = a.c_out, Ps = p.Ps, Q = Cout * Ps, Qs = RoundUpToVec<T>(Q), ld = p.ld;
  std::vector<T> acc(kTile * Qs), o(kDiag ? 0 : kTile * ld);
  ChunkScratch<T> s(a, p, Cout);
  const int64_t last = offsets[r1];
  for (int64_t t0 = r0; t0 < r1; t0 += kTile) {
    const int64_t t1 = std::min(t0 + kTile, r1);
    std::fill(acc.begin(), acc.begin() + (t1 - t0) * Qs, T(0));
    for (int64_t r = t0; r < t1; ++r) {
      T* B = acc.data() + (r - t0) * Qs;
      RowOuter<T, I, kVec>(a, p, offsets, nbr, eid, G, Cout, dx, w, r, last, s, B);
      if constexpr (kDiag) {  // grad_f[r, c] = <Vb[c], B_r[c]>,  grad_Vb[c] += f[r, c] B_r[c]
        for (int64_t c = 0; c < Cin; ++c) {
          grad_f[r * Cin + c] = UnitDot<kVec>(p, p.vb.data() + c * Ps, B + c * Ps);
          Axpy(grad_vb + c * Ps, f[r * Cin + c], B + c * Ps, Ps);
        }
      }
    }
    if constexpr (!kDiag) {
      // grad_f[r, c] = sum_{o,u} B_r[o, u] Vb[o, u, c] for the tile's rows
      Gemm<kVec>(t1 - t0, ld, Q, acc.data(), Qs, 1, p.vb.data(), ld, o.data(), ld, false);
      for (int64_t r = t0; r < t1; ++r) std::copy_n(o.data() + (r - t0) * ld, Cin, grad_f + r * Cin);
      // grad_Vb[c] += sum_r f[r, c] B_r
      Gemm<kVec>(Cin, Qs, t1 - t0, f + t0 * Cin, 1, Cin, acc.data(), Qs, grad_vb, Qs, true);
    }
  }
}

struct BwdSrcRows {
  template <typename T, typename I, bool kDiag, int kVec, typename... Args>
  JGO_INLINE static void run(const GnoArgs* a, const Packed<T>* p, Args... args) {
    GnoBwdSrcRows<T, I, kDiag, kVec>(*a, *p, args...);
  }
};

// ---------------------------------------------------------------------------------------
// jgo_gno_bwd_dst, over the in-edges of each destination i (CSC):
//   Q_i[c, k] = sum_o G_i[o] Vb[o, c, k],  t_e = f_j . Q_i,  grad_w_e = <h~_e, t_e>,
//   ga_e = w_e t_e relu'(a_e),  grad_dx_e = U^T ga_e,  grad_U += ga_e dx_e^T,  grad_b_u += ga_e
// [grad_b_u; grad_U^T] is accumulated padded, [d + 1, Hp] (the layout of Packed::ub).

template <typename T, typename I, bool kWeight, bool kDiag, int kVec>
JGO_INLINE void GnoBwdDstRows(const GnoArgs& a, const Packed<T>& p, const I* offsets, const I* nbr, const I* eid,
                              const T* f, const T* dx, const T* w, const T* G, T* grad_dx, T* grad_ub, T* grad_w,
                              int64_t r0, int64_t r1) {
  const int64_t Cin = a.c_in, Cout = a.c_out, Hp = p.Hp, Ps = p.Ps, d = a.dim, Qs = kDiag ? Cin * Ps : p.ld;
  std::vector<T> qs(kTile * Qs), t(kChunk * Hp), h(Hp), qb(Cin);
  ChunkScratch<T> s(a, p, Cin);
  const int64_t last = offsets[r1];
  for (int64_t t0 = r0; t0 < r1; t0 += kTile) {
    const int64_t t1 = std::min(t0 + kTile, r1);
    if constexpr (kDiag) {  // Q_r[c, u] = G[r, c] Vb[c, u]
      for (int64_t r = t0; r < t1; ++r) {
        for (int64_t c = 0; c < Cin; ++c) {
          const T g = G[r * Cout + c];
          for (int64_t u = 0; u < Ps; ++u) qs[(r - t0) * Qs + c * Ps + u] = g * p.vb[c * Ps + u];
        }
      }
    } else {  // Q_r[c, u] = sum_o G[r, o] Vb[o, c, u] for the tile's rows
      Gemm<kVec>(t1 - t0, Qs, Cout, G + t0 * Cout, Cout, 1, p.vb.data(), Qs, qs.data(), Qs, false);
    }
    for (int64_t r = t0; r < t1; ++r) {
      const T* q = qs.data() + (r - t0) * Qs;
      if constexpr (kWeight) {
        for (int64_t c = 0; c < Cin; ++c) qb[c] = q[c * Ps + Hp];  // the bias unit's column of Q_r
      }
      for (int64_t k0 = offsets[r], end = offsets[r + 1]; k0 < end; k0 += kChunk) {
        const int64_t n = std::min(kChunk, end - k0);
        GatherEdges<T, I, kVec, true>(a, p, nbr, eid, f, Cin, dx, nullptr, k0, n, last, s);  // x = f_j, unweighted
        const T* x = s.x.data();
        const T* pre = s.h.data();
        Gemm<kVec>(n, Hp, Cin, x, Cin, 1, q, Ps, t.data(), Hp, false);  // t[l, k] = <f_j, Q_r[:, k]>, hidden units
        for (int64_t l = 0; l < n; ++l) {
          const int64_t e = eid[k0 + l];
          const T* pl = pre + l * Hp;
          T* tl = t.data() + l * Hp;
          if constexpr (kWeight) {  // grad_w_e = <h_e, t_e> + <f_j, Q_r[:, bias]>
            for (int64_t k = 0; k < Hp; ++k) h[k] = GnoHidden(pl[k]);
            grad_w[e] = VecDot<kVec>(h.data(), tl, Hp) + Dot(x + l * Cin, qb.data(), Cin);
          }
          const T we = kWeight ? w[e] : T(1);
          for (int64_t k = 0; k < Hp; ++k) tl[k] = GnoPreGrad(we, tl[k], pl[k]);  // t becomes ga
          for (int64_t m = 0; m < d; ++m) grad_dx[e * d + m] = VecDot<kVec>(p.ub.data() + (1 + m) * Hp, tl, Hp);
        }
        // grad_ub[m, k] += sum_l x1[l, m] ga[l, k]
        Gemm<kVec>(d + 1, Hp, n, s.x1.data(), 1, d + 1, t.data(), Hp, grad_ub, Hp, true);
      }
    }
  }
}

template <bool kWeight>
struct BwdDstRows {
  template <typename T, typename I, bool kDiag, int kVec, typename... Args>
  JGO_INLINE static void run(const GnoArgs* a, const Packed<T>* p, Args... args) {
    GnoBwdDstRows<T, I, kWeight, kDiag, kVec>(*a, *p, args...);
  }
};

template <typename T, typename I>
ffi::Error GnoBwdTyped(ffi::ThreadPool& pool, const GnoArgs& a, bool by_src, ffi::AnyBuffer offsets,
                       ffi::AnyBuffer nbr, ffi::AnyBuffer eid, ffi::AnyBuffer f, ffi::AnyBuffer dx, ffi::AnyBuffer U,
                       ffi::AnyBuffer b_u, ffi::AnyBuffer Vb, ffi::AnyBuffer w, ffi::AnyBuffer G,
                       ffi::AnyBuffer* results) {
  const I* o = offsets.typed_data<I>();
  const I* n = nbr.typed_data<I>();
  const I* e = eid.typed_data<I>();
  if (auto err = CheckCompressed(pool, o, n, e, a.n_rows, a.n_edges, a.nbr_bound, true,
                                 by_src ? "jgo_gno_bwd_src" : "jgo_gno_bwd_dst");
      err.failure())
    return err;
  if (auto err = Int32Indices::Fit(by_src ? "jgo_gno_bwd_src" : "jgo_gno_bwd_dst",
                                   std::max({a.n_edges, a.n_rows, a.nbr_bound}));
      err.failure())
    return err;
  Int32Indices narrow;
  const Index *o32 = narrow(o, a.n_rows + 1), *n32 = narrow(n, a.n_edges), *e32 = narrow(e, a.n_edges);
  const T *fd = f.typed_data<T>(), *xd = dx.typed_data<T>(), *gd = G.typed_data<T>();
  const T* wd = a.has_weight ? w.typed_data<T>() : nullptr;
  const Packed<T> p = Pack(a, by_src ? GnoPass::kBwdSrc : GnoPass::kBwdDst, U.typed_data<T>(), b_u.typed_data<T>(),
                           Vb.typed_data<T>());
  const int64_t row_len = (by_src ? a.c_out : a.c_in) * a.units();
  // Per-chunk partial parameter gradients (padded), summed in chunk order below; the chunks
  // depend on the problem size only (ReductionChunks), so the sums do not depend on the pool.
  const int64_t part_len = by_src ? a.c_in * GradVbRow(a, p) : (a.dim + 1) * p.Hp;
  const int64_t chunks = ReductionChunks(a.n_rows + a.n_edges, row_len, part_len);
  std::vector<T> partial(chunks * part_len, T(0));
  ForEachRowChunk(pool, chunks, o, a.n_rows, [&](int64_t chunk, int64_t r0, int64_t r1) {
    T* part = partial.data() + chunk * part_len;
    if (by_src) {
      T* gf = results[0].typed_data<T>();
      DispatchDiagonal(a.diagonal, [&](auto diag) {
        RunRows<BwdSrcRows, T, Index, decltype(diag)::value>(&a, &p, o32, n32, e32, fd, xd, wd, gd, gf, part, r0, r1);
      });
    } else {
      T* gdx = results[0].typed_data<T>();
      T* gw = a.has_weight ? results[3].typed_data<T>() : nullptr;
      DispatchDiagonal(a.diagonal, [&](auto diag) {
        if (a.has_weight) {
          RunRows<BwdDstRows<true>, T, Index, decltype(diag)::value>(&a, &p, o32, n32, e32, fd, xd, wd, gd, gdx, part,
                                                                     gw, r0, r1);
        } else {
          RunRows<BwdDstRows<false>, T, Index, decltype(diag)::value>(&a, &p, o32, n32, e32, fd, xd, wd, gd, gdx,
                                                                      part, gw, r0, r1);
        }
      });
    }
  });
  if (!by_src) {  // grad_dx [E, d] and grad_w [E]
    ZeroPaddingEdges(o, e, a.n_rows, a.n_edges, a.dim, results[0].typed_data<T>());
    if (a.has_weight) ZeroPaddingEdges(o, e, a.n_rows, a.n_edges, 1, results[3].typed_data<T>());
  }
  std::vector<T> total(part_len, T(0));
  for (int64_t chunk = 0; chunk < chunks; ++chunk)
    Axpy(total.data(), T(1), partial.data() + chunk * part_len, part_len);
  if (by_src) {  // grad_Vb: diagonal [C, P], matrix [c_in, c_out, P]
    T* gvb = results[1].typed_data<T>();
    const int64_t rs = GradVbRow(a, p), R = a.diagonal ? 1 : a.c_in, per = a.diagonal ? a.c_in : a.c_out;
    for (int64_t c = 0; c < R; ++c)
      UnpackUnits(total.data() + c * rs, per, a.hidden, p.Hp, p.Ps, gvb + c * per * a.units());
  } else {  // grad_U [H, d] and grad_b_u [H] from [grad_b_u; grad_U^T]
    T* gu = results[1].typed_data<T>();
    T* gbu = results[2].typed_data<T>();
    for (int64_t k = 0; k < a.hidden; ++k) {
      gbu[k] = total[k];
      for (int64_t m = 0; m < a.dim; ++m) gu[k * a.dim + m] = total[(1 + m) * p.Hp + k];
    }
  }
  return ffi::Error::Success();
}

ffi::Error GnoBwdSrcCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                        ffi::AnyBuffer f, ffi::AnyBuffer dx, ffi::AnyBuffer U, ffi::AnyBuffer b_u, ffi::AnyBuffer Vb,
                        ffi::AnyBuffer w, ffi::AnyBuffer G, ffi::Result<ffi::AnyBuffer> grad_f,
                        ffi::Result<ffi::AnyBuffer> grad_vb, bool diagonal, bool has_weight) {
  auto args = CheckGno(GnoPass::kBwdSrc, offsets, nbr, eid, f, dx, U, b_u, Vb, w, &G, 0, diagonal, has_weight);
  if (args.has_error()) return args.error();
  if (auto err = CheckGnoBwdSrcResults(*args, *grad_f, *grad_vb, f.element_type()); err.failure()) return err;
  ffi::AnyBuffer results[] = {*grad_f, *grad_vb};
  return DispatchTypes(f.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return GnoBwdTyped<decltype(t), decltype(i)>(pool, *args, true, offsets, nbr, eid, f, dx, U, b_u, Vb, w, G,
                                                 results);
  });
}

ffi::Error GnoBwdDstCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                        ffi::AnyBuffer f, ffi::AnyBuffer dx, ffi::AnyBuffer U, ffi::AnyBuffer b_u, ffi::AnyBuffer Vb,
                        ffi::AnyBuffer w, ffi::AnyBuffer G, ffi::Result<ffi::AnyBuffer> grad_dx,
                        ffi::Result<ffi::AnyBuffer> grad_u, ffi::Result<ffi::AnyBuffer> grad_bu,
                        ffi::Result<ffi::AnyBuffer> grad_w, bool diagonal, bool has_weight) {
  auto args = CheckGno(GnoPass::kBwdDst, offsets, nbr, eid, f, dx, U, b_u, Vb, w, &G, 0, diagonal, has_weight);
  if (args.has_error()) return args.error();
  if (auto err = CheckGnoBwdDstResults(*args, *grad_dx, *grad_u, *grad_bu, *grad_w, f.element_type()); err.failure())
    return err;
  ffi::AnyBuffer results[] = {*grad_dx, *grad_u, *grad_bu, *grad_w};
  return DispatchTypes(f.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return GnoBwdTyped<decltype(t), decltype(i)>(pool, *args, false, offsets, nbr, eid, f, dx, U, b_u, Vb, w, G,
                                                 results);
  });
}

}  // namespace
}  // namespace jgo

JGO_CPU_HANDLER(GnoFwd, jgo::GnoFwdCpu, jgo::BindGnoFwd<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(GnoBwdSrc, jgo::GnoBwdSrcCpu, jgo::BindGnoBwdSrc<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(GnoBwdDst, jgo::GnoBwdDstCpu, jgo::BindGnoBwdDst<xla::ffi::ThreadPool>());
