// CPU handlers of RGCN's relational aggregation (agg_hg_basis): the per-relation mean weights
// jgo_hg_basis_norm (CSC), the fused forward jgo_hg_basis_fwd (CSC) and the atomic-free backward
// jgo_hg_basis_bwd_src over the reverse CSR (grad x and grad comp). Per-edge math: jgo/hg_basis.h.
//
// Forward: a destination's output row [K, D] is the accumulator: per in-edge, B axpys of the
// gathered x row (w_e comp[t, b] x_j into block b), or one axpy into block t without comp (no
// one-hot comp: R times less work than a dense [R, R] comp would cost). Rows of x are prefetched
// ahead across row boundaries (cpu/row_parallel.h).
//
// Weights: w_e = 1 / |{e' into dst(e) : type e' = type e}| is computed once per call of the op
// (jgo_hg_basis_norm) in O(E): per destination row the types of its edges are counted in a
// per-task array of R counters (touched only at the row's types, reset after the row), so no
// [n_dst, R] table is formed whatever R is; the forward and backward read w_e per edge.
//
// Backward: per source, its out-edges' rows G_i ([K + own, D], gathered) give grad_x_j (axpys) and
// <G_i[b], x_j> for grad_comp[t, b], accumulated per chunk of rows and summed in chunk order;
// the chunks depend on the problem size only (ReductionChunks), so grad_comp is bitwise the same on
// any number of threads.
//
// Edge types outside [0, R) are rejected (INVALID_ARGUMENT naming edge_types) before any row is
// computed.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu/handler.h"
#include "cpu/row_parallel.h"
#include "cpu/vector_math.h"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/hg_basis.h"

namespace jgo {
namespace {

// y[0:n] += s * x[0:n].
template <typename T>
JGO_INLINE void Axpy(T* __restrict__ y, T s, const T* __restrict__ x, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] += s * x[c];
}

// <a, b> over n elements, eight partial sums in a fixed order.
template <typename T>
JGO_INLINE T Dot8(const T* __restrict__ a, const T* __restrict__ b, int64_t n) {
  T s[8] = {};
  int64_t c = 0;
  for (; c + 8 <= n; c += 8) {
    for (int l = 0; l < 8; ++l) s[l] += a[c + l] * b[c + l];
  }
  for (; c < n; ++c) s[0] += a[c] * b[c];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// Prefetches what edge position q reads through its edge id: its type and, with kNorm, its weight
// (edge-valued arrays are in input order, so these reads are random where the structure is).
template <bool kNorm, typename T, typename I>
JGO_INLINE void PrefetchEdgeData(const I* eid, const I* types, const T* w, int64_t q, int64_t last) {
  if (q < last) {
    const int64_t e = eid[q];
    __builtin_prefetch(types + e, 0, 1);
    if (kNorm) __builtin_prefetch(w + e, 0, 1);
  }
}

// The first edge whose type lies outside [0, R), as an INVALID_ARGUMENT error naming edge_types: the real
// edges, [0, n_edges) in input order (the padding edges after them are never read).
template <typename I>
ffi::Error CheckTypes(const I* types, int64_t n_edges, int64_t n_types, const char* what) {
  for (int64_t e = 0; e < n_edges; ++e) {
    const int64_t t = types[e];
    if (t < 0 || t >= n_types)
      return InvalidArgument(std::string(what) + ": edge_types[" + std::to_string(e) + "] = " + std::to_string(t) +
                             " is out of range " + Range(0, n_types) + " (n_edge_types=" + std::to_string(n_types) +
                             ")");
  }
  return ffi::Error::Success();
}

// Handler `what`'s walk (CheckCompressed) and the edge types of its real edges (CheckTypes); `reads_nbr` when the
// walk reads through the neighbour ids (not the norm pass).
template <typename I>
ffi::Error CheckTypedWalk(ffi::ThreadPool& pool, const HgBasisArgs& a, const I* o, const I* n, const I* eid,
                          const I* types, bool reads_nbr, const char* what) {
  if (auto err = CheckCompressed(pool, o, n, eid, a.n_rows, a.n_edges, reads_nbr ? a.nbr_bound : 0, reads_nbr, what);
      err.failure())
    return err;
  return CheckTypes(types, o[a.n_rows], a.n_types, what);
}

// ---------------------------------------------------------------------------------------
// jgo_hg_basis_norm: w_e = 1 / (in-edges of dst(e) with the type of e)

template <typename T, typename I>
ffi::Error NormTyped(ffi::ThreadPool& pool, const HgBasisArgs& a, const I* o, const I* n, const I* eid,
                     const I* types, T* w) {
  if (auto err = CheckTypedWalk(pool, a, o, n, eid, types, false, "jgo_hg_basis_norm"); err.failure()) return err;
  ForRowChunks(pool, o, a.n_rows, 1, [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> count(a.n_types, 0);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t begin = o[r], end = o[r + 1];
      for (int64_t k = begin; k < end; ++k) {
        PrefetchEdgeData<true>(eid, types, w, k + 2 * kPrefetchDistance, a.n_edges);
        ++count[types[eid[k]]];
      }
      for (int64_t k = begin; k < end; ++k) w[eid[k]] = HgBasisNorm<T>(count[types[eid[k]]]);
      for (int64_t k = begin; k < end; ++k) count[types[eid[k]]] = 0;
    }
  });
  ZeroPaddingEdges(o, eid, a.n_rows, a.n_edges, 1, w);
  return ffi::Error::Success();
}

ffi::Error HgBasisNormCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                          ffi::AnyBuffer types, ffi::Result<ffi::AnyBuffer> w, int64_t n_types) {
  auto args = CheckHgBasis(HgBasisPass::kNorm, offsets, nbr, eid, nullptr, types, nullptr, nullptr, nullptr, nullptr,
                           n_types, false, true, false);
  if (args.has_error()) return args.error();
  if (auto err = CheckHgBasisNormResult(*args, *w); err.failure()) return err;
  return DispatchTypes(w->element_type(), offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    return NormTyped<T, I>(pool, *args, offsets.typed_data<I>(), nbr.typed_data<I>(), eid.typed_data<I>(),
                           types.typed_data<I>(), w->typed_data<T>());
  });
}

// The forward's and backward's row walks read int32 indices (Int32Indices: an int64 structure is narrowed to an int32
// copy, a pass over 3 E + n_rows indices against B axpys of D per edge, or one); the norm pass's walk reads them as
// they are.
using Index = int32_t;

// The largest count the walks index: rows, edges, neighbours or edge types.
inline int64_t WalkBound(const HgBasisArgs& a) { return std::max({a.n_rows, a.n_edges, a.nbr_bound, a.n_types}); }

// ---------------------------------------------------------------------------------------
// jgo_hg_basis_fwd

template <typename T, typename I, bool kComp, bool kNorm>
JGO_INLINE void FwdRows(const HgBasisArgs& a, const I* offsets, const I* nbr, const I* eid, const T* x,
                        const I* types, const T* comp, const T* w, const T* own, T* out, int64_t r0, int64_t r1) {
  const int64_t D = a.dim, B = a.n_bases, W = a.width, KD = a.blocks * D;
  const int64_t last = offsets[r1];
  for (int64_t r = r0; r < r1; ++r) {
    T* o = out + r * W;
    std::fill(o, o + KD, T(0));
    for (int64_t k = offsets[r], end = offsets[r + 1]; k < end; ++k) {
      if (k + kPrefetchDistance < last) PrefetchRow(x + static_cast<int64_t>(nbr[k + kPrefetchDistance]) * D, D);
      PrefetchEdgeData<kNorm>(eid, types, w, k + kPrefetchDistance, last);
      const int64_t e = eid[k], t = types[e];
      const T we = kNorm ? w[e] : T(1);
      const T* xj = x + static_cast<int64_t>(nbr[k]) * D;
      if constexpr (kComp) {
        for (int64_t b = 0; b < B; ++b) Axpy(o + b * D, HgBasisCoef(comp, B, t, b, we), xj, D);
      } else {
        Axpy(o + t * D, we, xj, D);
      }
    }
    if (a.concat_own) std::copy(own + r * D, own + (r + 1) * D, o + KD);
  }
}

struct FwdRowsOp {
  template <typename T, typename I, bool kComp, bool kNorm, typename... Args>
  JGO_INLINE static void run(Args... args) {
    FwdRows<T, I, kComp, kNorm>(args...);
  }
};

// Calls Rows::run<T, I, kComp, kNorm>(args...) compiled for AVX2 + FMA where the CPU has them.
template <typename Rows, typename T, typename I, bool kComp, bool kNorm, typename... Args>
void RunBaseline(Args... args) {
  Rows::template run<T, I, kComp, kNorm>(args...);
}
#ifdef JGO_AVX2_CLONES
template <typename Rows, typename T, typename I, bool kComp, bool kNorm, typename... Args>
__attribute__((target("avx2,fma"))) void RunAvx2(Args... args) {
  Rows::template run<T, I, kComp, kNorm>(args...);
}
#endif
template <typename Rows, typename T, typename I, bool kComp, bool kNorm, typename... Args>
void RunRows(Args... args) {
#ifdef JGO_AVX2_CLONES
  if (HasAvx2Fma()) return RunAvx2<Rows, T, I, kComp, kNorm>(args...);
#endif
  RunBaseline<Rows, T, I, kComp, kNorm>(args...);
}

// Calls fn(std::integral_constant<bool, comp>, std::integral_constant<bool, norm>).
template <typename Fn>
void DispatchFlags(bool comp, bool norm, Fn&& fn) {
  if (comp) {
    if (norm) fn(std::true_type{}, std::true_type{}); else fn(std::true_type{}, std::false_type{});
  } else {
    if (norm) fn(std::false_type{}, std::true_type{}); else fn(std::false_type{}, std::false_type{});
  }
}

template <typename T, typename I>
ffi::Error FwdTyped(ffi::ThreadPool& pool, const HgBasisArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                    ffi::AnyBuffer eid, ffi::AnyBuffer x, ffi::AnyBuffer types, ffi::AnyBuffer comp, ffi::AnyBuffer w,
                    ffi::AnyBuffer own, ffi::AnyBuffer out) {
  const I *o = offsets.typed_data<I>(), *n = nbr.typed_data<I>(), *e = eid.typed_data<I>();
  const I* ty = types.typed_data<I>();
  if (auto err = CheckTypedWalk(pool, a, o, n, e, ty, true, "jgo_hg_basis_fwd"); err.failure()) return err;
  if (auto err = Int32Indices::Fit("jgo_hg_basis_fwd", WalkBound(a)); err.failure()) return err;
  Int32Indices narrow;
  const Index *o32 = narrow(o, a.n_rows + 1), *n32 = narrow(n, a.n_edges), *e32 = narrow(e, a.n_edges);
  const Index* ty32 = narrow(ty, a.n_edges);
  const T* xd = x.typed_data<T>();
  const T* cd = a.has_comp ? comp.typed_data<T>() : nullptr;
  const T* wd = a.has_norm ? w.typed_data<T>() : nullptr;
  const T* od = a.concat_own ? own.typed_data<T>() : nullptr;
  T* res = out.typed_data<T>();
  const int64_t row_work = std::max<int64_t>(1, a.has_comp ? a.n_bases * a.dim : a.dim);
  ForRowChunks(pool, o, a.n_rows, row_work, [&](int64_t r0, int64_t r1) {
    DispatchFlags(a.has_comp, a.has_norm, [&](auto c, auto nm) {
      RunRows<FwdRowsOp, T, Index, decltype(c)::value, decltype(nm)::value>(a, o32, n32, e32, xd, ty32, cd, wd, od, res,
                                                                            r0, r1);
    });
  });
  return ffi::Error::Success();
}

ffi::Error HgBasisFwdCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                         ffi::AnyBuffer x, ffi::AnyBuffer types, ffi::AnyBuffer comp, ffi::AnyBuffer w,
                         ffi::AnyBuffer own, ffi::Result<ffi::AnyBuffer> out, int64_t n_types, bool has_comp,
                         bool has_norm, bool concat_own) {
  auto args = CheckHgBasis(HgBasisPass::kFwd, offsets, nbr, eid, &x, types, &comp, &w, &own, nullptr, n_types,
                           has_comp, has_norm, concat_own);
  if (args.has_error()) return args.error();
  if (auto err = CheckHgBasisFwdResult(*args, *out, x.element_type()); err.failure()) return err;
  return DispatchTypes(x.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return FwdTyped<decltype(t), decltype(i)>(pool, *args, offsets, nbr, eid, x, types, comp, w, own, *out);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_hg_basis_bwd_src, over the out-edges of each source j (reverse CSR):
//   grad_x_j = sum_e w_e sum_b comp[t, b] G_i[b],   part[t, b] += w_e <G_i[b], x_j>

template <typename T, typename I, bool kComp, bool kNorm>
JGO_INLINE void BwdSrcRows(const HgBasisArgs& a, const I* offsets, const I* nbr, const I* eid, const T* x,
                           const I* types, const T* comp, const T* w, const T* G, T* grad_x, T* part, int64_t r0,
                           int64_t r1) {
  const int64_t D = a.dim, B = a.n_bases, W = a.width;
  const int64_t last = offsets[r1];
  const int64_t fetch = kComp ? B * D : D;  // what an edge reads of its G row (all of it with comp)
  for (int64_t r = r0; r < r1; ++r) {
    T* gx = grad_x + r * D;
    std::fill(gx, gx + D, T(0));
    const T* xr = x + r * D;
    for (int64_t k = offsets[r], end = offsets[r + 1]; k < end; ++k) {
      // types two distances ahead, so that the type a G row's block needs is in cache one distance ahead
      PrefetchEdgeData<kNorm>(eid, types, w, k + (kComp ? 1 : 2) * kPrefetchDistance, last);
      if (k + kPrefetchDistance < last) {
        const int64_t q = k + kPrefetchDistance;
        const int64_t off = kComp ? 0 : static_cast<int64_t>(types[eid[q]]) * D;
        PrefetchRow(G + static_cast<int64_t>(nbr[q]) * W + off, fetch);
      }
      const int64_t e = eid[k], t = types[e];
      const T we = kNorm ? w[e] : T(1);
      const T* Gi = G + static_cast<int64_t>(nbr[k]) * W;
      if constexpr (kComp) {
        for (int64_t b = 0; b < B; ++b) {
          const T* gb = Gi + b * D;
          Axpy(gx, HgBasisCoef(comp, B, t, b, we), gb, D);
          part[t * B + b] += we * Dot8(gb, xr, D);
        }
      } else {
        Axpy(gx, we, Gi + t * D, D);
      }
    }
  }
}

struct BwdSrcRowsOp {
  template <typename T, typename I, bool kComp, bool kNorm, typename... Args>
  JGO_INLINE static void run(Args... args) {
    BwdSrcRows<T, I, kComp, kNorm>(args...);
  }
};

template <typename T, typename I>
ffi::Error BwdSrcTyped(ffi::ThreadPool& pool, const HgBasisArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                       ffi::AnyBuffer eid, ffi::AnyBuffer x, ffi::AnyBuffer types, ffi::AnyBuffer comp,
                       ffi::AnyBuffer w, ffi::AnyBuffer G, ffi::AnyBuffer grad_x, ffi::AnyBuffer grad_comp) {
  const I *o = offsets.typed_data<I>(), *n = nbr.typed_data<I>(), *e = eid.typed_data<I>();
  const I* ty = types.typed_data<I>();
  if (auto err = CheckTypedWalk(pool, a, o, n, e, ty, true, "jgo_hg_basis_bwd_src"); err.failure()) return err;
  if (auto err = Int32Indices::Fit("jgo_hg_basis_bwd_src", WalkBound(a)); err.failure()) return err;
  Int32Indices narrow;
  const Index *o32 = narrow(o, a.n_rows + 1), *n32 = narrow(n, a.n_edges), *e32 = narrow(e, a.n_edges);
  const Index* ty32 = narrow(ty, a.n_edges);
  T* gx = grad_x.typed_data<T>();
  const T* gd = G.typed_data<T>();
  const T* xd = x.typed_data<T>();
  const T* cd = a.has_comp ? comp.typed_data<T>() : nullptr;
  const T* wd = a.has_norm ? w.typed_data<T>() : nullptr;
  const int64_t row_work = std::max<int64_t>(1, a.has_comp ? 2 * a.n_bases * a.dim : a.dim);
  if (!a.has_comp) {
    ForRowChunks(pool, o, a.n_rows, row_work, [&](int64_t r0, int64_t r1) {
      DispatchFlags(false, a.has_norm, [&](auto c, auto nm) {
        RunRows<BwdSrcRowsOp, T, Index, decltype(c)::value, decltype(nm)::value>(a, o32, n32, e32, xd, ty32, cd, wd, gd,
                                                                                  gx, static_cast<T*>(nullptr), r0, r1);
      });
    });
    return ffi::Error::Success();
  }
  // Per-chunk partial grad_comp, summed in chunk order below; the chunks depend on the problem
  // size only (ReductionChunks), so the sums do not depend on the pool.
  const int64_t part_len = a.n_types * a.n_bases;
  const int64_t chunks = ReductionChunks(a.n_rows + a.n_edges, row_work, part_len);
  std::vector<T> partial(chunks * part_len, T(0));
  ForEachRowChunk(pool, chunks, o, a.n_rows, [&](int64_t chunk, int64_t r0, int64_t r1) {
    T* part = partial.data() + chunk * part_len;
    DispatchFlags(true, a.has_norm, [&](auto c, auto nm) {
      RunRows<BwdSrcRowsOp, T, Index, decltype(c)::value, decltype(nm)::value>(a, o32, n32, e32, xd, ty32, cd, wd, gd,
                                                                                gx, part, r0, r1);
    });
  });
  T* gc = grad_comp.typed_data<T>();
  std::fill(gc, gc + part_len, T(0));
  for (int64_t chunk = 0; chunk < chunks; ++chunk) Axpy(gc, T(1), partial.data() + chunk * part_len, part_len);
  return ffi::Error::Success();
}

ffi::Error HgBasisBwdSrcCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                            ffi::AnyBuffer x, ffi::AnyBuffer types, ffi::AnyBuffer comp, ffi::AnyBuffer w,
                            ffi::AnyBuffer G, ffi::Result<ffi::AnyBuffer> grad_x,
                            ffi::Result<ffi::AnyBuffer> grad_comp, int64_t n_types, bool has_comp, bool has_norm,
                            bool concat_own) {
  auto args = CheckHgBasis(HgBasisPass::kBwdSrc, offsets, nbr, eid, &x, types, &comp, &w, nullptr, &G, n_types,
                           has_comp, has_norm, concat_own);
  if (args.has_error()) return args.error();
  if (auto err = CheckHgBasisBwdSrcResults(*args, *grad_x, *grad_comp, x.element_type()); err.failure()) return err;
  return DispatchTypes(x.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return BwdSrcTyped<decltype(t), decltype(i)>(pool, *args, offsets, nbr, eid, x, types, comp, w, G, *grad_x,
                                                 *grad_comp);
  });
}

}  // namespace
}  // namespace jgo

JGO_CPU_HANDLER(HgBasisNorm, jgo::HgBasisNormCpu, jgo::BindHgBasisNorm<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(HgBasisFwd, jgo::HgBasisFwdCpu, jgo::BindHgBasisFwd<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(HgBasisBwdSrc, jgo::HgBasisBwdSrcCpu, jgo::BindHgBasisBwdSrc<xla::ffi::ThreadPool>());
