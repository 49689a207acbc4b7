// CPU handlers of the graph neural operator (gno_conv): the fused forward jgo_gno_fwd (CSC) and
// its two atomic-free backward passes, jgo_gno_bwd_src over the reverse CSR (grad f, grad Vb) and
// jgo_gno_bwd_dst over the CSC (grad dx, U, b_u, w). Per-edge math: jgo/gno.h.
//
// Nothing of size E x c_out x c_in (kappa) is formed: per edge the kernel MLP is evaluated into a
// few hundred bytes of scratch and its outer product with the gathered row is accumulated into a
// per-row [features, H+1] block; blocks of kTile rows are then contracted with Vb, so each
// Vb row is read once per tile. Parameter gradients are accumulated per task and summed in task
// order (reproducible for a given thread count).
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu/row_parallel.h"
#include "cpu/vector_math.h"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/gno.h"
#include "jgo/gno_args.h"

namespace jgo {
namespace {

constexpr int64_t kTile = 8;  // rows contracted with Vb together

// The row loops and their helpers are inlined into two copies, one for the baseline ISA and one
// for AVX2 + FMA, picked at run time (RunRows below); the loops over features vectorise in both.
#define JGO_INLINE __attribute__((always_inline)) inline

// acc[c * P + k] += x[c] * h[k] for c < n, k < P.
template <typename T>
JGO_INLINE void AddOuter(T* __restrict__ acc, const T* __restrict__ x, int64_t n, const T* __restrict__ h,
                         int64_t P) {
  for (int64_t c = 0; c < n; ++c) {
    const T s = x[c];
    T* row = acc + c * P;
    for (int64_t k = 0; k < P; ++k) row[k] += s * h[k];
  }
}

// y[0:n] += s * x[0:n].
template <typename T>
JGO_INLINE void Axpy(T* __restrict__ y, T s, const T* __restrict__ x, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] += s * x[c];
}

// The kernel MLP of one edge: pre[k] = U[k] dx + b_u[k], h[k] = relu(pre[k]) (k < H), h[H] = 1.
template <typename T>
JGO_INLINE void EdgeHidden(int64_t H, int64_t d, const T* U, const T* b_u, const T* dx, T* pre, T* h) {
  for (int64_t k = 0; k < H; ++k) {
    pre[k] = GnoPre(U + k * d, b_u[k], dx, d);
    h[k] = GnoHidden(pre[k]);
  }
  h[H] = T(1);
}

// The number of tasks for rows of `row_len` work per edge (as ForRowChunks in row_parallel.h).
inline int64_t TaskCount(ffi::ThreadPool& pool, int64_t n_rows, int64_t n_edges, int64_t row_len) {
  const int64_t total = n_edges + n_rows;
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  return std::max<int64_t>(1, std::min<int64_t>(threads, total * std::max<int64_t>(1, row_len) / kMinWorkPerTask));
}

// Runs body(task, r0, r1) over chunks of equal work (edges + rows), one per task.
template <typename I, typename Body>
void RunTasks(ffi::ThreadPool& pool, int64_t n_tasks, const I* offsets, int64_t n_rows, int64_t n_edges, Body&& body) {
  const int64_t total = n_edges + n_rows;
  ParallelFor(pool, n_tasks, [&](int64_t t) {
    body(t, RowAtWork(offsets, n_rows, total * t / n_tasks), RowAtWork(offsets, n_rows, total * (t + 1) / n_tasks));
  });
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

// ---------------------------------------------------------------------------------------
// jgo_gno_fwd: A_r[c, k] = sum_e w_e f_j[c] h~_e[k] per destination, then out_r = Vb . A_r.

template <typename T, typename I, bool kWeight, bool kDiag>
JGO_INLINE void GnoFwdRows(const GnoArgs& a, const I* offsets, const I* nbr, const I* eid, const T* f, const T* dx,
                           const T* U, const T* b_u, const T* Vb, const T* w, T* out, int64_t r0, int64_t r1) {
  const int64_t Cin = a.c_in, Cout = a.c_out, H = a.hidden, P = a.units(), d = a.dim, Q = Cin * P;
  std::vector<T> acc(kTile * Q), pre(H), h(P), xw(Cin);
  const int64_t last = offsets[r1];
  for (int64_t t0 = r0; t0 < r1; t0 += kTile) {
    const int64_t t1 = std::min(t0 + kTile, r1);
    std::fill(acc.begin(), acc.begin() + (t1 - t0) * Q, T(0));
    for (int64_t r = t0; r < t1; ++r) {
      T* A = acc.data() + (r - t0) * Q;
      for (int64_t k = offsets[r], end = offsets[r + 1]; k < end; ++k) {
        PrefetchEdge(a, nbr, eid, f, Cin, dx, k, last);
        const int64_t j = nbr[k], e = eid[k];
        EdgeHidden(H, d, U, b_u, dx + e * d, pre.data(), h.data());
        const T we = kWeight ? w[e] : T(1);
        const T* fj = f + j * Cin;
        for (int64_t c = 0; c < Cin; ++c) xw[c] = we * fj[c];
        AddOuter(A, xw.data(), Cin, h.data(), P);
      }
    }
    for (int64_t r = t0; r < t1; ++r) {
      T* o = out + r * Cout;
      const T* A = acc.data() + (r - t0) * Q;
      if (kDiag) {
        for (int64_t c = 0; c < Cin; ++c) o[c] = Dot(Vb + c * P, A + c * P, P);
      } else {
        std::fill(o, o + Cout, T(0));
      }
    }
    if (!kDiag) {
      for (int64_t q = 0; q < Q; ++q) {
        const T* v = Vb + q * Cout;
        for (int64_t r = t0; r < t1; ++r) Axpy(out + r * Cout, acc[(r - t0) * Q + q], v, Cout);
      }
    }
  }
}

struct FwdRows {
  template <typename T, typename I, bool kWeight, bool kDiag, typename... Args>
  JGO_INLINE static void run(const GnoArgs* a, Args... args) { GnoFwdRows<T, I, kWeight, kDiag>(*a, args...); }
};

// Calls Rows::run<T, I, kWeight, kDiag>(args...) compiled for AVX2 + FMA where the CPU has them.
template <typename Rows, typename T, typename I, bool kWeight, bool kDiag, typename... Args>
void RunBaseline(Args... args) {
  Rows::template run<T, I, kWeight, kDiag>(args...);
}
#ifdef JGO_AVX2_CLONES
template <typename Rows, typename T, typename I, bool kWeight, bool kDiag, typename... Args>
__attribute__((target("avx2,fma"))) void RunAvx2(Args... args) {
  Rows::template run<T, I, kWeight, kDiag>(args...);
}
#endif
template <typename Rows, typename T, typename I, bool kWeight, bool kDiag, typename... Args>
void RunRows(Args... args) {
#ifdef JGO_AVX2_CLONES
  if (HasAvx2Fma()) return RunAvx2<Rows, T, I, kWeight, kDiag>(args...);
#endif
  RunBaseline<Rows, T, I, kWeight, kDiag>(args...);
}

// Calls fn(std::integral_constant<bool, weight>, std::integral_constant<bool, diagonal>).
template <typename Fn>
void DispatchFlags(bool weight, bool diagonal, Fn&& fn) {
  if (weight) {
    if (diagonal) fn(std::true_type{}, std::true_type{}); else fn(std::true_type{}, std::false_type{});
  } else {
    if (diagonal) fn(std::false_type{}, std::true_type{}); else fn(std::false_type{}, std::false_type{});
  }
}

template <typename T, typename I>
ffi::Error GnoFwdTyped(ffi::ThreadPool& pool, const GnoArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                       ffi::AnyBuffer eid, ffi::AnyBuffer f, ffi::AnyBuffer dx, ffi::AnyBuffer U, ffi::AnyBuffer b_u,
                       ffi::AnyBuffer Vb, ffi::AnyBuffer w, ffi::AnyBuffer out) {
  const I* o = offsets.typed_data<I>();
  const I* n = nbr.typed_data<I>();
  const I* e = eid.typed_data<I>();
  if (auto err = CheckCompressed(o, n, e, a.n_rows, a.n_edges, a.nbr_bound, true, "gno_fwd"); err.failure()) return err;
  const T *fd = f.typed_data<T>(), *xd = dx.typed_data<T>(), *ud = U.typed_data<T>(), *bd = b_u.typed_data<T>();
  const T* vd = Vb.typed_data<T>();
  const T* wd = a.has_weight ? w.typed_data<T>() : nullptr;
  T* od = out.typed_data<T>();
  const int64_t tasks = TaskCount(pool, a.n_rows, a.n_edges, a.c_in * a.units());
  RunTasks(pool, tasks, o, a.n_rows, a.n_edges, [&](int64_t, int64_t r0, int64_t r1) {
    DispatchFlags(a.has_weight, a.diagonal, [&](auto weight, auto diag) {
      RunRows<FwdRows, T, I, decltype(weight)::value, decltype(diag)::value>(&a, o, n, e, fd, xd, ud, bd, vd, wd, od,
                                                                             r0, r1);
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

template <typename T, typename I, bool kWeight, bool kDiag>
JGO_INLINE void GnoBwdSrcRows(const GnoArgs& a, const I* offsets, const I* nbr, const I* eid, const T* f,
                              const T* dx, const T* U, const T* b_u, const T* Vb, const T* w, const T* G,
                              T* grad_f, T* grad_vb, int64_t r0, int64_t r1) {
  const int64_t Cin = a.c_in, Cout = a.c_out, H = a.hidden, P = a.units(), d = a.dim, Q = Cout * P;
  std::vector<T> acc(kTile * Q), pre(H), h(P), xw(Cout);
  const int64_t last = offsets[r1];
  for (int64_t t0 = r0; t0 < r1; t0 += kTile) {
    const int64_t t1 = std::min(t0 + kTile, r1);
    std::fill(acc.begin(), acc.begin() + (t1 - t0) * Q, T(0));
    for (int64_t r = t0; r < t1; ++r) {
      T* B = acc.data() + (r - t0) * Q;
      for (int64_t k = offsets[r], end = offsets[r + 1]; k < end; ++k) {
        PrefetchEdge(a, nbr, eid, G, Cout, dx, k, last);
        const int64_t i = nbr[k], e = eid[k];
        EdgeHidden(H, d, U, b_u, dx + e * d, pre.data(), h.data());
        const T we = kWeight ? w[e] : T(1);
        const T* gi = G + i * Cout;
        for (int64_t o = 0; o < Cout; ++o) xw[o] = we * gi[o];
        AddOuter(B, xw.data(), Cout, h.data(), P);
      }
    }
    for (int64_t r = t0; r < t1; ++r) {
      T* gf = grad_f + r * Cin;
      const T* B = acc.data() + (r - t0) * Q;
      if (kDiag) {
        const T* fr = f + r * Cin;
        for (int64_t c = 0; c < Cin; ++c) {
          gf[c] = Dot(Vb + c * P, B + c * P, P);
          Axpy(grad_vb + c * P, fr[c], B + c * P, P);
        }
      } else {
        std::fill(gf, gf + Cin, T(0));
      }
    }
    if (!kDiag) {  // grad_Vb[c] += sum_r f[r, c] B_r: each grad_Vb row stays in cache across the tile
      for (int64_t c = 0; c < Cin; ++c) {
        for (int64_t r = t0; r < t1; ++r) Axpy(grad_vb + c * Q, f[r * Cin + c], acc.data() + (r - t0) * Q, Q);
      }
    }
    if (!kDiag) {
      for (int64_t q = 0; q < Q; ++q) {
        const T* v = Vb + q * Cin;
        for (int64_t r = t0; r < t1; ++r) Axpy(grad_f + r * Cin, acc[(r - t0) * Q + q], v, Cin);
      }
    }
  }
}

struct BwdSrcRows {
  template <typename T, typename I, bool kWeight, bool kDiag, typename... Args>
  JGO_INLINE static void run(const GnoArgs* a, Args... args) { GnoBwdSrcRows<T, I, kWeight, kDiag>(*a, args...); }
};

// ---------------------------------------------------------------------------------------
// jgo_gno_bwd_dst, over the in-edges of each destination i (CSC):
//   Q_i[c, k] = sum_o G_i[o] Vb[o, c, k],  t_e = f_j . Q_i,  grad_w_e = <h~_e, t_e>,
//   ga_e = w_e t_e relu'(a_e),  grad_dx_e = U^T ga_e,  grad_U += ga_e dx_e^T,  grad_b_u += ga_e

template <typename T, typename I, bool kWeight, bool kDiag>
JGO_INLINE void GnoBwdDstRows(const GnoArgs& a, const I* offsets, const I* nbr, const I* eid, const T* f,
                              const T* dx, const T* U, const T* b_u, const T* Vb, const T* w, const T* G,
                              T* grad_dx, T* grad_u, T* grad_bu, T* grad_w, int64_t r0, int64_t r1) {
  const int64_t Cin = a.c_in, Cout = a.c_out, H = a.hidden, P = a.units(), d = a.dim, Q = Cin * P;
  std::vector<T> qs(kTile * Q), pre(H), h(P), t(P), ga(H);
  const int64_t last = offsets[r1];
  for (int64_t t0 = r0; t0 < r1; t0 += kTile) {
    const int64_t t1 = std::min(t0 + kTile, r1);
    if (kDiag) {
      for (int64_t r = t0; r < t1; ++r) {
        T* q = qs.data() + (r - t0) * Q;
        for (int64_t c = 0; c < Cin; ++c) {
          const T g = G[r * Cout + c];
          for (int64_t k = 0; k < P; ++k) q[c * P + k] = g * Vb[c * P + k];
        }
      }
    } else {
      std::fill(qs.begin(), qs.begin() + (t1 - t0) * Q, T(0));
      for (int64_t o = 0; o < Cout; ++o) {
        const T* v = Vb + o * Q;
        for (int64_t r = t0; r < t1; ++r) Axpy(qs.data() + (r - t0) * Q, G[r * Cout + o], v, Q);
      }
    }
    for (int64_t r = t0; r < t1; ++r) {
      const T* q = qs.data() + (r - t0) * Q;
      for (int64_t k = offsets[r], end = offsets[r + 1]; k < end; ++k) {
        PrefetchEdge(a, nbr, eid, f, Cin, dx, k, last);
        const int64_t j = nbr[k], e = eid[k];
        const T* dxe = dx + e * d;
        EdgeHidden(H, d, U, b_u, dxe, pre.data(), h.data());
        std::fill(t.begin(), t.end(), T(0));
        const T* fj = f + j * Cin;
        for (int64_t c = 0; c < Cin; ++c) Axpy(t.data(), fj[c], q + c * P, P);
        const T we = kWeight ? w[e] : T(1);
        if (kWeight) grad_w[e] = Dot(h.data(), t.data(), P);
        for (int64_t u = 0; u < H; ++u) ga[u] = GnoPreGrad(we, t[u], pre[u]);
        T* gdx = grad_dx + e * d;
        for (int64_t m = 0; m < d; ++m) gdx[m] = T(0);
        for (int64_t u = 0; u < H; ++u) {
          const T g = ga[u];
          grad_bu[u] += g;
          for (int64_t m = 0; m < d; ++m) {
            gdx[m] += U[u * d + m] * g;
            grad_u[u * d + m] += g * dxe[m];
          }
        }
      }
    }
  }
}

struct BwdDstRows {
  template <typename T, typename I, bool kWeight, bool kDiag, typename... Args>
  JGO_INLINE static void run(const GnoArgs* a, Args... args) { GnoBwdDstRows<T, I, kWeight, kDiag>(*a, args...); }
};

template <typename T, typename I>
ffi::Error GnoBwdTyped(ffi::ThreadPool& pool, const GnoArgs& a, bool by_src, ffi::AnyBuffer offsets,
                       ffi::AnyBuffer nbr, ffi::AnyBuffer eid, ffi::AnyBuffer f, ffi::AnyBuffer dx, ffi::AnyBuffer U,
                       ffi::AnyBuffer b_u, ffi::AnyBuffer Vb, ffi::AnyBuffer w, ffi::AnyBuffer G,
                       ffi::AnyBuffer* results) {
  const I* o = offsets.typed_data<I>();
  const I* n = nbr.typed_data<I>();
  const I* e = eid.typed_data<I>();
  if (auto err = CheckCompressed(o, n, e, a.n_rows, a.n_edges, a.nbr_bound, true, by_src ? "gno_bwd_src" : "gno_bwd_dst");
      err.failure())
    return err;
  const T *fd = f.typed_data<T>(), *xd = dx.typed_data<T>(), *ud = U.typed_data<T>(), *bd = b_u.typed_data<T>();
  const T *vd = Vb.typed_data<T>(), *gd = G.typed_data<T>();
  const T* wd = a.has_weight ? w.typed_data<T>() : nullptr;
  const int64_t P = a.units();
  const int64_t row_len = (by_src ? a.c_out : a.c_in) * P;
  const int64_t tasks = TaskCount(pool, a.n_rows, a.n_edges, row_len);
  // Per-task partial parameter gradients, summed in task order below.
  const int64_t part_len = by_src ? static_cast<int64_t>(results[1].element_count()) : a.hidden * (a.dim + 1);
  std::vector<T> partial(tasks * part_len, T(0));
  RunTasks(pool, tasks, o, a.n_rows, a.n_edges, [&](int64_t task, int64_t r0, int64_t r1) {
    T* part = partial.data() + task * part_len;
    if (by_src) {
      T* gf = results[0].typed_data<T>();
      DispatchFlags(a.has_weight, a.diagonal, [&](auto weight, auto diag) {
        RunRows<BwdSrcRows, T, I, decltype(weight)::value, decltype(diag)::value>(&a, o, n, e, fd, xd, ud, bd, vd, wd,
                                                                                  gd, gf, part, r0, r1);
      });
    } else {
      T* gdx = results[0].typed_data<T>();
      T* gw = a.has_weight ? results[3].typed_data<T>() : nullptr;
      T* gbu = part + a.hidden * a.dim;
      DispatchFlags(a.has_weight, a.diagonal, [&](auto weight, auto diag) {
        RunRows<BwdDstRows, T, I, decltype(weight)::value, decltype(diag)::value>(&a, o, n, e, fd, xd, ud, bd, vd, wd,
                                                                                  gd, gdx, part, gbu, gw, r0, r1);
      });
    }
  });
  std::vector<T> total(part_len, T(0));
  for (int64_t task = 0; task < tasks; ++task) Axpy(total.data(), T(1), partial.data() + task * part_len, part_len);
  if (by_src) {
    std::copy(total.begin(), total.end(), results[1].typed_data<T>());
  } else {
    std::copy(total.begin(), total.begin() + a.hidden * a.dim, results[1].typed_data<T>());
    std::copy(total.begin() + a.hidden * a.dim, total.end(), results[2].typed_data<T>());
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

using AnyBuf = xla::ffi::AnyBuffer;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JgoGnoFwdCpu, jgo::GnoFwdCpu,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .Arg<AnyBuf>()  // csc offsets
                                  .Arg<AnyBuf>()  // csc sources
                                  .Arg<AnyBuf>()  // csc edge ids
                                  .Arg<AnyBuf>()  // f [n_src, c_in]
                                  .Arg<AnyBuf>()  // dx [E, d]
                                  .Arg<AnyBuf>()  // U [H, d]
                                  .Arg<AnyBuf>()  // b_u [H]
                                  .Arg<AnyBuf>()  // Vb [c_in, H+1, c_out] or [c, H+1]
                                  .Arg<AnyBuf>()  // w [E] or [0]
                                  .Ret<AnyBuf>()  // out [n_dst, c_out]
                                  .Attr<bool>("diagonal")
                                  .Attr<bool>("has_weight"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JgoGnoBwdSrcCpu, jgo::GnoBwdSrcCpu,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .Arg<AnyBuf>()  // csr offsets
                                  .Arg<AnyBuf>()  // csr destinations
                                  .Arg<AnyBuf>()  // csr edge ids
                                  .Arg<AnyBuf>()  // f [n_src, c_in]
                                  .Arg<AnyBuf>()  // dx [E, d]
                                  .Arg<AnyBuf>()  // U [H, d]
                                  .Arg<AnyBuf>()  // b_u [H]
                                  .Arg<AnyBuf>()  // Vb [c_out, H+1, c_in] or [c, H+1]
                                  .Arg<AnyBuf>()  // w [E] or [0]
                                  .Arg<AnyBuf>()  // G [n_dst, c_out]
                                  .Ret<AnyBuf>()  // grad_f [n_src, c_in]
                                  .Ret<AnyBuf>()  // grad_Vb [c_in, c_out, H+1] or [c, H+1]
                                  .Attr<bool>("diagonal")
                                  .Attr<bool>("has_weight"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JgoGnoBwdDstCpu, jgo::GnoBwdDstCpu,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .Arg<AnyBuf>()  // csc offsets
                                  .Arg<AnyBuf>()  // csc sources
                                  .Arg<AnyBuf>()  // csc edge ids
                                  .Arg<AnyBuf>()  // f [n_src, c_in]
                                  .Arg<AnyBuf>()  // dx [E, d]
                                  .Arg<AnyBuf>()  // U [H, d]
                                  .Arg<AnyBuf>()  // b_u [H]
                                  .Arg<AnyBuf>()  // Vb [c_out, c_in, H+1] or [c, H+1]
                                  .Arg<AnyBuf>()  // w [E] or [0]
                                  .Arg<AnyBuf>()  // G [n_dst, c_out]
                                  .Ret<AnyBuf>()  // grad_dx [E, d]
                                  .Ret<AnyBuf>()  // grad_U [H, d]
                                  .Ret<AnyBuf>()  // grad_b_u [H]
                                  .Ret<AnyBuf>()  // grad_w [E] or [0]
                                  .Attr<bool>("diagonal")
                                  .Attr<bool>("has_weight"));
