// CPU handlers of the DimeNet++ triplet aggregation: components of one Hessian-vector product of
// the triplet form S (jgo/dimenet.h), in two atomic-free passes.
//
//   jgo_dimenet_in   walks the triplets grouped by e_in: the components for vec[e_in], A, emb
//                    and W_b, and per triplet the coefficients (gamma, dgamma) of the vec[e_out]
//                    term, written at the triplet's position in the e_out grouping.
//   jgo_dimenet_out  walks the triplets grouped by e_out: the grad component (the forward when
//                    the direction is emb) and the vec[e_out] term from those coefficients.
//
// The C x M work per triplet is a rank-1 update of a per-row accumulator along C (vectorised,
// applied in pairs): Q1[m,:] += mid[m] dX[a] + dmid[m] X[a] (e_out pass; dG, G for the e_in pass) and
// Q2[m,:] += mid[m] X[a] when dW_b is present; the row's result, sum_m W_b^T[m] * Q1[m] +
// dW_b^T[m] * Q2[m], and the row's W_b term X[a] * Q1 + dX[a] * Q2 are formed once per row.
// Nothing triplet-sized is materialised but two coefficients per triplet. W_b is a reduction over
// all triplets: each chunk of rows sums into its own partial, and the partials are added in chunk
// order; the chunks depend on the problem size only (ReductionChunks, cpu/row_parallel.h), so W_b
// is bitwise the same on any number of threads.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/handler.h"
#include "cpu/row_parallel.h"
#include "cpu/vector_math.h"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/dimenet.h"
#include "jgo/dimenet_args.h"

namespace jgo {
namespace {

// Validates a triplet grouping: offsets from 0 to T, never decreasing; neighbours in [0, E);
// positions (if given) a permutation of [0, T), so every coefficient is written exactly once.
template <typename I>
ffi::Error CheckGrouping(const char* what, const I* offsets, const I* nbr, const I* pos, int64_t E, int64_t T) {
  if (offsets[0] != 0 || static_cast<int64_t>(offsets[E]) != T)
    return InvalidArgument(std::string(what) + ": triplet offsets must start at 0 and end at n_triplets");
  for (int64_t r = 0; r < E; ++r)
    if (offsets[r + 1] < offsets[r]) return InvalidArgument(std::string(what) + ": triplet offsets decrease");
  std::vector<bool> seen(pos ? T : 0);
  for (int64_t k = 0; k < T; ++k) {
    if (nbr[k] < 0 || static_cast<int64_t>(nbr[k]) >= E)
      return InvalidArgument(std::string(what) + ": triplet edge " + std::to_string(static_cast<int64_t>(nbr[k])) +
                             " out of range " + Range(0, E));
    if (!pos) continue;
    const int64_t q = pos[k];
    if (q < 0 || q >= T) return InvalidArgument(std::string(what) + ": triplet position out of range");
    if (seen[q])
      return InvalidArgument(std::string(what) + ": triplet position " + std::to_string(q) +
                             " appears twice: in_pos must be a permutation of " + Range(0, T));
    seen[q] = true;
  }
  return ffi::Error::Success();
}

// The unit vector and inverse length of every edge vector.
template <typename T>
std::vector<EdgeDir<T>> Directions(ffi::ThreadPool& pool, const T* vec, int64_t E) {
  std::vector<EdgeDir<T>> dirs(E);
  const int64_t n_tasks = std::max<int64_t>(1, std::min<int64_t>(pool.num_threads(), 16 * E / kMinWorkPerTask));
  ParallelFor(pool, n_tasks, [&](int64_t t) {
    for (int64_t e = E * t / n_tasks; e < E * (t + 1) / n_tasks; ++e) dirs[e] = DirOf(vec + 3 * e);
  });
  return dirs;
}

// q[m, :] += s[m] * row[:] for m < M (rows of length C).
template <typename T, int kM>
JGO_DN_INLINE void RankOne(T* __restrict q, const T* s, const T* __restrict row, int64_t M, int64_t C) {
  const int64_t m_n = kM > 0 ? kM : M;
  for (int64_t m = 0; m < m_n; ++m) {
    const T sm = s[m];
    T* __restrict qm = q + m * C;
    for (int64_t c = 0; c < C; ++c) qm[c] += sm * row[c];
  }
}

// q[m, :] += s0[m] * r0[:] + s1[m] * r1[:]: one pass over q for two updates.
template <typename T, int kM>
JGO_DN_INLINE void RankTwo(T* __restrict q, const T* s0, const T* __restrict r0, const T* s1, const T* __restrict r1,
                           int64_t M, int64_t C) {
  const int64_t m_n = kM > 0 ? kM : M;
  for (int64_t m = 0; m < m_n; ++m) {
    const T a = s0[m], b = s1[m];
    T* __restrict qm = q + m * C;
    for (int64_t c = 0; c < C; ++c) qm[c] += a * r0[c] + b * r1[c];
  }
}

// Rank-one updates of q, applied two at a time (the accumulator q, M x C, is read and written
// once per pair); `pending` holds the M coefficients of an update waiting for its partner.
template <typename T, int kM>
struct PairedUpdates {
  T* q;
  T* pending;
  const T* pending_row;
  int64_t M, C;

  JGO_DN_INLINE void Add(const T* s, const T* row) {
    if (pending_row == nullptr) {
      for (int64_t m = 0; m < (kM > 0 ? kM : M); ++m) pending[m] = s[m];
      pending_row = row;
      return;
    }
    RankTwo<T, kM>(q, pending, pending_row, s, row, M, C);
    pending_row = nullptr;
  }
  JGO_DN_INLINE void Flush() {
    if (pending_row) RankOne<T, kM>(q, pending, pending_row, M, C);
    pending_row = nullptr;
  }
};

// out[:] = sum_m wt[m, :] * q1[m, :] (+ dwt[m, :] * q2[m, :]).
template <typename T, int kM>
JGO_DN_INLINE void Contract(T* __restrict out, const T* wt, const T* q1, const T* dwt, const T* q2, int64_t M, int64_t C) {
  const int64_t m_n = kM > 0 ? kM : M;
  std::fill(out, out + C, T(0));
  for (int64_t m = 0; m < m_n; ++m) {
    for (int64_t c = 0; c < C; ++c) out[c] += wt[m * C + c] * q1[m * C + c];
    if (dwt)
      for (int64_t c = 0; c < C; ++c) out[c] += dwt[m * C + c] * q2[m * C + c];
  }
}

template <typename T, typename I, int kM>
JGO_DN_INLINE void InRows(const DimenetArgs& a, const DimenetOperands<T>& o, const DimenetPlan& p, const EdgeDir<T>* dirs,
                          const I* offsets, const I* nbr, const I* pos, T* gvec, T* ga, T* gemb, T* coef, T* pwb,
                          int64_t r0, int64_t r1) {
  const int64_t C = a.C, M = a.M, out = a.outputs;
  const bool want_q1 = (out & (kOutEmb | kOutWb)) != 0;
  const bool want_q2 = o.grad && (((out & kOutEmb) && o.dwb) || ((out & kOutWb) && o.demb));
  const bool want_h = (out & (kOutA | kOutVec)) != 0;
  const bool want_vec = (out & kOutVec) != 0;
  const int order = (want_vec || p.dvec ? 1 : 0) + (want_vec && p.dvec ? 1 : 0);
  std::vector<T> storage(6 * M + (want_q1 ? M * C : 0) + (want_q2 ? M * C : 0)), features(2 * C);
  Triplet<T, kM> t;
  t.Bind(storage.data(), M);
  t.features = features.data();
  T* q1 = storage.data() + 6 * M;
  T* q2 = q1 + (want_q1 ? M * C : 0);
  PairedUpdates<T, kM> u1{q1, storage.data() + 4 * M, nullptr, M, C}, u2{q2, storage.data() + 5 * M, nullptr, M, C};
  const int64_t MC = M * C;
  for (int64_t r = r0; r < r1; ++r) {
    T* gv = gvec ? gvec + 3 * r : nullptr;
    T* gar = ga ? ga + kSpherical * M * r : nullptr;
    if (gv) std::fill(gv, gv + 3, T(0));
    if (gar) std::fill(gar, gar + kSpherical * M, T(0));
    if (want_q1) std::fill(q1, q1 + MC, T(0));
    if (want_q2) std::fill(q2, q2 + MC, T(0));
    const int64_t end = offsets[r + 1];
    if (offsets[r] == end) {  // no triplets: an empty sum, never W_b x 0 (NaN where W_b or emb is not finite)
      if (gemb) std::fill(gemb + C * r, gemb + C * (r + 1), T(0));
      continue;
    }
    for (int64_t k = offsets[r]; k < end; ++k) {
      const int64_t b = nbr[k];
      if (k + kPrefetchDistance < end && o.grad) PrefetchRow(o.grad + C * nbr[k + kPrefetchDistance], C);
      if (k + kPrefetchDistance < end && o.dgrad) PrefetchRow(o.dgrad + C * nbr[k + kPrefetchDistance], C);
      t.Angular(o, p, r, b, dirs[r], dirs[b], order);
      if (want_q1 || want_q2) t.Project(o, p, r);
      const T* g = o.grad ? o.grad + C * b : nullptr;
      const T* dg = o.dgrad ? o.dgrad + C * b : nullptr;
      if (want_q1) {
        if (dg) u1.Add(t.mid, dg);
        if (g && p.dmid) u1.Add(t.dmid, g);
      }
      if (want_q2) u2.Add(t.mid, g);
      if (!want_h) continue;
      t.Backproject(o, p, r, b);
      if (gar) {
        for (int l = 0; l < kSpherical; ++l) {
          T* gl = gar + l * M;
          for (int64_t m = 0; m < M; ++m) gl[m] += t.dy[l] * t.h[m] + t.y[l] * t.dh[m];
        }
      }
      if (gv) {
        for (int i = 0; i < 3; ++i) gv[i] += t.dgamma * t.angle.ga[i] + (p.dvec ? t.gamma * t.angle.dga[i] : T(0));
        T* cf = coef + 2 * static_cast<int64_t>(pos[k]);
        cf[0] = t.gamma;
        cf[1] = t.dgamma;
      }
    }
    u1.Flush();
    u2.Flush();
    if (gemb) Contract<T, kM>(gemb + C * r, o.wbt, q1, want_q2 && o.dwb ? o.dwbt : nullptr, q2, M, C);
    if (pwb) {
      const T* x = o.emb ? o.emb + C * r : nullptr;
      const T* dx = o.demb ? o.demb + C * r : nullptr;
      for (int64_t c = 0; c < C; ++c) {
        T* w = pwb + c * M;
        for (int64_t m = 0; m < M; ++m)
          w[m] += (x ? x[c] * q1[m * C + c] : T(0)) + (dx && want_q2 ? dx[c] * q2[m * C + c] : T(0));
      }
    }
  }
}

template <typename T, typename I, int kM>
JGO_DN_INLINE void OutRows(const DimenetArgs& a, const DimenetOperands<T>& o, const DimenetPlan& p,
                           const EdgeDir<T>* dirs, const I* offsets, const I* nbr, const T* coef, T* gout, T* gvec,
                           int64_t r0, int64_t r1) {
  const int64_t C = a.C, M = a.M, MC = M * C;
  const bool want_q2 = gout && o.dwb && o.emb;
  std::vector<T> storage(6 * M + (gout ? MC : 0) + (want_q2 ? MC : 0));
  Triplet<T, kM> t;
  t.Bind(storage.data(), M);
  T* q1 = storage.data() + 6 * M;
  T* q2 = q1 + (gout ? MC : 0);
  PairedUpdates<T, kM> u1{q1, storage.data() + 4 * M, nullptr, M, C}, u2{q2, storage.data() + 5 * M, nullptr, M, C};
  for (int64_t r = r0; r < r1; ++r) {
    T* gv = gvec ? gvec + 3 * r : nullptr;
    if (gv) std::fill(gv, gv + 3, T(0));
    if (gout) std::fill(q1, q1 + MC, T(0));
    if (want_q2) std::fill(q2, q2 + MC, T(0));
    const int64_t end = offsets[r + 1];
    if (offsets[r] == end) {  // no triplets: an empty sum, never W_b x 0 (as on CUDA and in the reference)
      if (gout) std::fill(gout + C * r, gout + C * (r + 1), T(0));
      continue;
    }
    for (int64_t k = offsets[r]; k < end; ++k) {
      const int64_t e_in = nbr[k];
      if (k + kPrefetchDistance < end) {
        const int64_t ahead = nbr[k + kPrefetchDistance];
        PrefetchRow(o.a + kSpherical * M * ahead, kSpherical * M);
        if (o.emb) PrefetchRow(o.emb + C * ahead, C);
        if (o.demb) PrefetchRow(o.demb + C * ahead, C);
      }
      if (gout) t.Angular(o, p, e_in, r, dirs[e_in], dirs[r], p.dvec ? 1 : 0);
      else AngleOf(dirs[e_in], dirs[r], p.dvec ? o.dvec + 3 * e_in : nullptr, p.dvec ? o.dvec + 3 * r : nullptr, t.angle);
      if (gout) {
        t.Project(o, p, e_in);
        const T* x = o.emb ? o.emb + C * e_in : nullptr;
        const T* dx = o.demb ? o.demb + C * e_in : nullptr;
        if (dx) u1.Add(t.mid, dx);
        if (x && p.dmid) u1.Add(t.dmid, x);
        if (want_q2) u2.Add(t.mid, x);
      }
      if (gv) {
        const T gamma = coef[2 * k], dgamma = coef[2 * k + 1];
        for (int i = 0; i < 3; ++i) gv[i] += dgamma * t.angle.gb[i] + (p.dvec ? gamma * t.angle.dgb[i] : T(0));
      }
    }
    u1.Flush();
    u2.Flush();
    if (gout) Contract<T, kM>(gout + C * r, o.wbt, q1, want_q2 ? o.dwbt : nullptr, q2, M, C);
  }
}

// The row walks compiled twice: for the x86-64 baseline and, where the CPU has them, for AVX2
// with FMA (chosen at run time; about 2x faster on the C x M updates).
#ifdef JGO_AVX2_CLONES
template <typename T, typename I, int kM, typename... Args>
__attribute__((target("avx2,fma"))) void InRowsAvx2(Args... args) {
  InRows<T, I, kM>(args...);
}
template <typename T, typename I, int kM, typename... Args>
__attribute__((target("avx2,fma"))) void OutRowsAvx2(Args... args) {
  OutRows<T, I, kM>(args...);
}
#endif

template <typename T, typename I, int kM, typename... Args>
void InRowsDispatch(Args... args) {
#ifdef JGO_AVX2_CLONES
  if (HasAvx2Fma()) return InRowsAvx2<T, I, kM>(args...);
#endif
  InRows<T, I, kM>(args...);
}
template <typename T, typename I, int kM, typename... Args>
void OutRowsDispatch(Args... args) {
#ifdef JGO_AVX2_CLONES
  if (HasAvx2Fma()) return OutRowsAvx2<T, I, kM>(args...);
#endif
  OutRows<T, I, kM>(args...);
}

// The row walks read int32 indices (Int32Indices: an int64 grouping is narrowed to an int32 copy, a pass over
// 2 T + E indices against the walks' C x M work per triplet).
using Index = int32_t;

template <typename T>
ffi::Error InTyped(ffi::ThreadPool& pool, const DimenetArgs& a, const Index* offsets, const Index* nbr,
                   const Index* pos, const ffi::AnyBuffer* ops, ffi::AnyBuffer* res) {
  using I = Index;
  const DimenetOperands<T> o = OperandsOf<T>(ops, a);
  const DimenetPlan p = MakePlan(o);
  const std::vector<EdgeDir<T>> dirs = Directions(pool, o.vec, a.E);
  const int64_t C = a.C, M = a.M, out = a.outputs;
  T* gvec = (out & kOutVec) ? res[0].typed_data<T>() : nullptr;
  T* ga = (out & kOutA) ? res[1].typed_data<T>() : nullptr;
  T* gemb = (out & kOutEmb) ? res[2].typed_data<T>() : nullptr;
  T* coef = (out & kOutVec) ? res[4].typed_data<T>() : nullptr;
  const bool want_wb = (out & kOutWb) != 0;
  // W_b sums over every row: its chunks depend on the problem size only (not on the pool), and
  // their partials are added in chunk order, so it is bitwise the same on any number of threads.
  const int64_t n_chunks = ReductionChunks(a.E + a.T, 2 * C * M, C * M);
  std::vector<T> partials(want_wb ? n_chunks * C * M : 0, T(0));
  ForEachRowChunk(pool, n_chunks, offsets, a.E, [&](int64_t chunk, int64_t r0, int64_t r1) {
    T* pwb = want_wb ? partials.data() + chunk * C * M : nullptr;
    if (M == 8) InRowsDispatch<T, I, 8>(a, o, p, dirs.data(), offsets, nbr, pos, gvec, ga, gemb, coef, pwb, r0, r1);
    else InRowsDispatch<T, I, 0>(a, o, p, dirs.data(), offsets, nbr, pos, gvec, ga, gemb, coef, pwb, r0, r1);
  });
  if (want_wb) {
    T* wb = res[3].typed_data<T>();
    std::fill(wb, wb + C * M, T(0));
    for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
      const T* pw = partials.data() + chunk * C * M;
      for (int64_t i = 0; i < C * M; ++i) wb[i] += pw[i];
    }
  }
  return ffi::Error::Success();
}

template <typename T>
ffi::Error OutTyped(ffi::ThreadPool& pool, const DimenetArgs& a, const Index* offsets, const Index* nbr,
                    const ffi::AnyBuffer* ops, const T* coef, T* gout, T* gvec) {
  using I = Index;
  const DimenetOperands<T> o = OperandsOf<T>(ops, a);
  const DimenetPlan p = MakePlan(o);
  const std::vector<EdgeDir<T>> dirs = Directions(pool, o.vec, a.E);
  ForRowChunks(pool, offsets, a.E, gout ? a.C * a.M : 8, [&](int64_t r0, int64_t r1) {
    if (a.M == 8) OutRowsDispatch<T, I, 8>(a, o, p, dirs.data(), offsets, nbr, coef, gout, gvec, r0, r1);
    else OutRowsDispatch<T, I, 0>(a, o, p, dirs.data(), offsets, nbr, coef, gout, gvec, r0, r1);
  });
  return ffi::Error::Success();
}

ffi::Error DimenetInCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer pos,
                        ffi::AnyBuffer vec, ffi::AnyBuffer A, ffi::AnyBuffer emb, ffi::AnyBuffer wb, ffi::AnyBuffer wbt,
                        ffi::AnyBuffer grad, ffi::AnyBuffer dvec, ffi::AnyBuffer dA, ffi::AnyBuffer demb,
                        ffi::AnyBuffer dwb, ffi::AnyBuffer dwbt, ffi::AnyBuffer dgrad, ffi::Result<ffi::AnyBuffer> r_vec,
                        ffi::Result<ffi::AnyBuffer> r_a, ffi::Result<ffi::AnyBuffer> r_emb,
                        ffi::Result<ffi::AnyBuffer> r_wb, ffi::Result<ffi::AnyBuffer> r_coef, int64_t outputs) {
  const ffi::AnyBuffer ops[kDimenetOperands] = {vec, A, emb, wb, wbt, grad, dvec, dA, demb, dwb, dwbt, dgrad};
  auto args = CheckDimenet("jgo_dimenet_in", offsets, nbr, ops, outputs);
  if (args.has_error()) return args.error();
  const DimenetArgs& a = *args;
  ffi::AnyBuffer res[5] = {*r_vec, *r_a, *r_emb, *r_wb, *r_coef};
  if (auto err = CheckDimenetIn(a, offsets, pos, vec, res); err.failure()) return err;
  return DispatchTypes(vec.element_type(), offsets.element_type(), [&](auto t, auto i) {
    using I = decltype(i);
    const I *o = offsets.typed_data<I>(), *n = nbr.typed_data<I>(), *q = pos.typed_data<I>();
    if (auto err = CheckGrouping("jgo_dimenet_in", o, n, q, a.E, a.T); err.failure()) return err;
    if (auto err = Int32Indices::Fit("jgo_dimenet_in", std::max(a.E, a.T)); err.failure()) return err;
    Int32Indices narrow;
    return InTyped<decltype(t)>(pool, a, narrow(o, a.E + 1), narrow(n, a.T), narrow(q, a.T), ops, res);
  });
}

ffi::Error DimenetOutCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer vec,
                         ffi::AnyBuffer A, ffi::AnyBuffer emb, ffi::AnyBuffer wb, ffi::AnyBuffer wbt,
                         ffi::AnyBuffer grad, ffi::AnyBuffer dvec, ffi::AnyBuffer dA, ffi::AnyBuffer demb,
                         ffi::AnyBuffer dwb, ffi::AnyBuffer dwbt, ffi::AnyBuffer dgrad, ffi::AnyBuffer coef,
                         ffi::Result<ffi::AnyBuffer> r_grad, ffi::Result<ffi::AnyBuffer> r_vec, int64_t outputs) {
  const ffi::AnyBuffer ops[kDimenetOperands] = {vec, A, emb, wb, wbt, grad, dvec, dA, demb, dwb, dwbt, dgrad};
  auto args = CheckDimenet("jgo_dimenet_out", offsets, nbr, ops, outputs);
  if (args.has_error()) return args.error();
  const DimenetArgs& a = *args;
  if (auto err = CheckDimenetOut(a, vec, coef, *r_grad, *r_vec); err.failure()) return err;
  const bool want_vec = (outputs & kOutVec) != 0, want_grad = (outputs & kOutGrad) != 0;
  return DispatchTypes(vec.element_type(), offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    const I *o = offsets.typed_data<I>(), *n = nbr.typed_data<I>();
    if (auto err = CheckGrouping<I>("jgo_dimenet_out", o, n, nullptr, a.E, a.T); err.failure()) return err;
    if (auto err = Int32Indices::Fit("jgo_dimenet_out", std::max(a.E, a.T)); err.failure()) return err;
    Int32Indices narrow;
    return OutTyped<T>(pool, a, narrow(o, a.E + 1), narrow(n, a.T), ops, want_vec ? coef.typed_data<T>() : nullptr,
                       want_grad ? r_grad->typed_data<T>() : nullptr, want_vec ? r_vec->typed_data<T>() : nullptr);
  });
}

}  // namespace
}  // namespace jgo

JGO_CPU_HANDLER(DimenetIn, jgo::DimenetInCpu, jgo::BindDimenetIn<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(DimenetOut, jgo::DimenetOutCpu, jgo::BindDimenetOut<xla::ffi::ThreadPool>());
