// CPU handlers of the DimeNet++ triplet aggregation: one Hessian-vector product of the triplet
// form S (jgo/dimenet.h) in two atomic-free passes.
//
//   jgo_dimenet_in   walks the triplets grouped by e_in: the components of H u' for vec[e_in],
//                    sbf_rad, emb, W_a and W_b, and the per-triplet coefficients (gamma, dgamma)
//                    of the vec[e_out] term, written at the triplet's e_out-grouped position.
//   jgo_dimenet_out  walks the triplets grouped by e_out: the grad component (the forward when
//                    u' = emb) and the vec[e_out] term from those coefficients.
//
// Nothing triplet-sized is materialised but the two coefficients per triplet. W_a and W_b are
// reductions over all triplets: each task sums its rows into its own partial, and the partials
// are added in task order (reproducible for a given thread count).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/row_parallel.h"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/dimenet.h"
#include "jgo/dimenet_args.h"

namespace jgo {
namespace {

// Validates a triplet grouping: offsets from 0 to T, never decreasing; neighbours in [0, E);
// positions (if given) in [0, T).
template <typename I>
ffi::Error CheckGrouping(const char* what, const I* offsets, const I* nbr, const I* pos, int64_t E, int64_t T) {
  if (offsets[0] != 0 || static_cast<int64_t>(offsets[E]) != T)
    return InvalidArgument(std::string(what) + ": triplet offsets must start at 0 and end at n_triplets");
  for (int64_t r = 0; r < E; ++r)
    if (offsets[r + 1] < offsets[r]) return InvalidArgument(std::string(what) + ": triplet offsets decrease");
  for (int64_t k = 0; k < T; ++k) {
    if (nbr[k] < 0 || static_cast<int64_t>(nbr[k]) >= E)
      return InvalidArgument(std::string(what) + ": triplet edge " + std::to_string(static_cast<int64_t>(nbr[k])) +
                             " out of range " + Range(0, E));
    if (pos && (pos[k] < 0 || static_cast<int64_t>(pos[k]) >= T))
      return InvalidArgument(std::string(what) + ": triplet position out of range");
  }
  return ffi::Error::Success();
}

// Splits rows into chunks of about equal work (triplets + rows) and runs body(task, r0, r1).
template <typename I, typename Body>
int64_t RunChunks(ffi::ThreadPool& pool, const I* offsets, int64_t E, int64_t T, int64_t cost, Body&& body) {
  const int64_t total = T + E;
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  const int64_t n_tasks = std::max<int64_t>(1, std::min<int64_t>(threads, total * cost / kMinWorkPerTask));
  ParallelFor(pool, n_tasks, [&](int64_t t) {
    body(t, RowAtWork(offsets, E, total * t / n_tasks), RowAtWork(offsets, E, total * (t + 1) / n_tasks));
  });
  return n_tasks;
}

template <typename T, typename I>
ffi::Error InTyped(ffi::ThreadPool& pool, const DimenetArgs& a, const I* offsets, const I* nbr, const I* pos,
                   const ffi::AnyBuffer* ops, ffi::AnyBuffer* res) {
  if (auto err = CheckGrouping("dimenet_in", offsets, nbr, pos, a.E, a.T); err.failure()) return err;
  const DimenetOperands<T> o = OperandsOf<T>(ops, a);
  const DimenetPlan p = MakePlan(o, a.outputs);
  const int64_t C = a.C, M = a.M, out = a.outputs;
  const bool backward = (out & (kOutSbf | kOutVec | kOutWa)) != 0 || ((out & kOutWb) && (p.h || p.dh));
  T* gvec = (out & kOutVec) ? res[0].typed_data<T>() : nullptr;
  T* gsbf = (out & kOutSbf) ? res[1].typed_data<T>() : nullptr;
  T* gemb = (out & kOutEmb) ? res[2].typed_data<T>() : nullptr;
  T* coef = (out & kOutVec) ? res[5].typed_data<T>() : nullptr;
  const bool want_w = (out & (kOutWa | kOutWb)) != 0;
  const int64_t n_w = kBasis * M + C * M;
  const int64_t max_tasks = std::max<int64_t>(1, pool.num_threads());
  std::vector<T> partials(want_w ? max_tasks * n_w : 0, T(0));
  const int64_t n_tasks = RunChunks(pool, offsets, a.E, a.T, C * M, [&](int64_t task, int64_t r0, int64_t r1) {
    std::vector<T> scratch(4 * M);
    TripletTerms<T> t;
    BindScratch(t, scratch.data(), M);
    T* pwa = want_w ? partials.data() + task * n_w : nullptr;
    T* pwb = want_w ? pwa + kBasis * M : nullptr;
    for (int64_t r = r0; r < r1; ++r) {
      T* gv = gvec ? gvec + 3 * r : nullptr;
      T* gs = gsbf ? gsbf + kBasis * r : nullptr;
      T* ge = gemb ? gemb + C * r : nullptr;
      if (gv) std::fill(gv, gv + 3, T(0));
      if (gs) std::fill(gs, gs + kBasis, T(0));
      if (ge) std::fill(ge, ge + C, T(0));
      const T* x = o.emb ? o.emb + C * r : nullptr;
      const T* dx = o.demb ? o.demb + C * r : nullptr;
      for (int64_t k = offsets[r]; k < offsets[r + 1]; ++k) {
        const int64_t b = nbr[k];
        TripletAngular(o, p, r, b, t);
        TripletCore(o, p, r, b, backward, t);
        const T* g = o.grad ? o.grad + C * b : nullptr;
        const T* dg = o.dgrad ? o.dgrad + C * b : nullptr;
        if (ge) {
          for (int64_t c = 0; c < C; ++c) {
            T proj, dproj;
            ProjOf(o, p, t, c, proj, dproj);
            ge[c] += (dg ? dg[c] * proj : T(0)) + (g ? g[c] * dproj : T(0));
          }
        }
        if (gs) {
          for (int s = 0; s < kBasis; ++s) {
            const int l = s / kRadial;
            gs[s] += (p.dvec ? t.y1[l] * t.angle.dc * t.k[s] : T(0)) + t.y[l] * t.dk[s];
          }
        }
        if (gv) {
          for (int i = 0; i < 3; ++i) gv[i] += t.dgamma * t.angle.ga[i] + (p.dvec ? t.gamma * t.angle.dga[i] : T(0));
          T* cf = coef + 2 * static_cast<int64_t>(pos[k]);
          cf[0] = t.gamma;
          cf[1] = t.dgamma;
        }
        if (out & kOutWa) {
          for (int s = 0; s < kBasis; ++s) {
            T* w = pwa + s * M;
            const T dqs = p.dq ? t.dq[s] : T(0), qs = t.q[s];
            for (int64_t m = 0; m < M; ++m) w[m] += dqs * t.h[m] + qs * t.dh[m];
          }
        }
        if ((out & kOutWb) && (p.h || p.dh)) {
          for (int64_t c = 0; c < C; ++c) {
            const T u = p.h ? g[c] * x[c] : T(0);
            const T du = (dg && x ? dg[c] * x[c] : T(0)) + (g && dx ? g[c] * dx[c] : T(0));
            T* w = pwb + c * M;
            for (int64_t m = 0; m < M; ++m) w[m] += du * t.mid[m] + (p.dmid ? u * t.dmid[m] : T(0));
          }
        }
      }
    }
  });
  if (want_w) {
    T* wa = (out & kOutWa) ? res[3].typed_data<T>() : nullptr;
    T* wb = (out & kOutWb) ? res[4].typed_data<T>() : nullptr;
    if (wa) std::fill(wa, wa + kBasis * M, T(0));
    if (wb) std::fill(wb, wb + C * M, T(0));
    for (int64_t task = 0; task < n_tasks; ++task) {
      const T* pw = partials.data() + task * n_w;
      if (wa)
        for (int64_t i = 0; i < kBasis * M; ++i) wa[i] += pw[i];
      if (wb)
        for (int64_t i = 0; i < C * M; ++i) wb[i] += pw[kBasis * M + i];
    }
  }
  return ffi::Error::Success();
}

template <typename T, typename I>
ffi::Error OutTyped(ffi::ThreadPool& pool, const DimenetArgs& a, const I* offsets, const I* nbr,
                    const ffi::AnyBuffer* ops, const T* coef, ffi::AnyBuffer* res) {
  if (auto err = CheckGrouping<I>("dimenet_out", offsets, nbr, nullptr, a.E, a.T); err.failure()) return err;
  const DimenetOperands<T> o = OperandsOf<T>(ops, a);
  const DimenetPlan p = MakePlan(o, a.outputs);
  const int64_t C = a.C, M = a.M;
  T* gout = (a.outputs & kOutGrad) ? res[0].typed_data<T>() : nullptr;
  T* gvec = (a.outputs & kOutVec) ? res[1].typed_data<T>() : nullptr;
  RunChunks(pool, offsets, a.E, a.T, gout ? C * M : 4, [&](int64_t, int64_t r0, int64_t r1) {
    std::vector<T> scratch(4 * M);
    TripletTerms<T> t;
    BindScratch(t, scratch.data(), M);
    for (int64_t r = r0; r < r1; ++r) {
      T* go = gout ? gout + C * r : nullptr;
      T* gv = gvec ? gvec + 3 * r : nullptr;
      if (go) std::fill(go, go + C, T(0));
      if (gv) std::fill(gv, gv + 3, T(0));
      for (int64_t k = offsets[r]; k < offsets[r + 1]; ++k) {
        const int64_t e_in = nbr[k];
        TripletAngular(o, p, e_in, r, t);
        if (go) {
          TripletCore(o, p, e_in, r, false, t);
          const T* x = o.emb ? o.emb + C * e_in : nullptr;
          const T* dx = o.demb ? o.demb + C * e_in : nullptr;
          for (int64_t c = 0; c < C; ++c) {
            T proj, dproj;
            ProjOf(o, p, t, c, proj, dproj);
            go[c] += (dx ? dx[c] * proj : T(0)) + (x ? x[c] * dproj : T(0));
          }
        }
        if (gv) {
          const T gamma = coef[2 * k], dgamma = coef[2 * k + 1];
          for (int i = 0; i < 3; ++i) gv[i] += dgamma * t.angle.gb[i] + (p.dvec ? gamma * t.angle.dgb[i] : T(0));
        }
      }
    }
  });
  return ffi::Error::Success();
}

ffi::Error DimenetInCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer pos,
                        ffi::AnyBuffer vec, ffi::AnyBuffer sbf, ffi::AnyBuffer emb, ffi::AnyBuffer wa, ffi::AnyBuffer wb,
                        ffi::AnyBuffer grad, ffi::AnyBuffer dvec, ffi::AnyBuffer dsbf, ffi::AnyBuffer demb,
                        ffi::AnyBuffer dwa, ffi::AnyBuffer dwb, ffi::AnyBuffer dgrad,
                        ffi::Result<ffi::AnyBuffer> r_vec, ffi::Result<ffi::AnyBuffer> r_sbf,
                        ffi::Result<ffi::AnyBuffer> r_emb, ffi::Result<ffi::AnyBuffer> r_wa,
                        ffi::Result<ffi::AnyBuffer> r_wb, ffi::Result<ffi::AnyBuffer> r_coef, int64_t outputs) {
  const ffi::AnyBuffer ops[12] = {vec, sbf, emb, wa, wb, grad, dvec, dsbf, demb, dwa, dwb, dgrad};
  auto args = CheckDimenet("dimenet_in", offsets, nbr, ops, outputs);
  if (args.has_error()) return args.error();
  const DimenetArgs& a = *args;
  if (pos.element_type() != offsets.element_type() || static_cast<int64_t>(pos.element_count()) != a.T)
    return InvalidArgument("dimenet_in: positions must be [n_triplets] of the index dtype");
  ffi::AnyBuffer res[6] = {*r_vec, *r_sbf, *r_emb, *r_wa, *r_wb, *r_coef};
  const int64_t sizes[6] = {3 * a.E, kBasis * a.E, a.C * a.E, kBasis * a.M, a.C * a.M, 2 * a.T};
  const int64_t bits[6] = {kOutVec, kOutSbf, kOutEmb, kOutWa, kOutWb, kOutVec};
  const char* names[6] = {"vec", "sbf_rad", "emb", "W_a", "W_b", "coef"};
  for (int i = 0; i < 6; ++i)
    if (auto err = CheckResult("dimenet_in", names[i], res[i], (outputs & bits[i]) != 0, sizes[i], vec.element_type());
        err.failure())
      return err;
  return DispatchTypes(vec.element_type(), offsets.element_type(), [&](auto t, auto i) {
    using I = decltype(i);
    return InTyped<decltype(t), I>(pool, a, offsets.typed_data<I>(), nbr.typed_data<I>(), pos.typed_data<I>(), ops,
                                   res);
  });
}

ffi::Error DimenetOutCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer vec,
                         ffi::AnyBuffer sbf, ffi::AnyBuffer emb, ffi::AnyBuffer wa, ffi::AnyBuffer wb,
                         ffi::AnyBuffer grad, ffi::AnyBuffer dvec, ffi::AnyBuffer dsbf, ffi::AnyBuffer demb,
                         ffi::AnyBuffer dwa, ffi::AnyBuffer dwb, ffi::AnyBuffer dgrad, ffi::AnyBuffer coef,
                         ffi::Result<ffi::AnyBuffer> r_grad, ffi::Result<ffi::AnyBuffer> r_vec, int64_t outputs) {
  const ffi::AnyBuffer ops[12] = {vec, sbf, emb, wa, wb, grad, dvec, dsbf, demb, dwa, dwb, dgrad};
  auto args = CheckDimenet("dimenet_out", offsets, nbr, ops, outputs);
  if (args.has_error()) return args.error();
  const DimenetArgs& a = *args;
  if ((outputs & ~(kOutGrad | kOutVec)) != 0) return InvalidArgument("dimenet_out: computes only grad and vec");
  const bool want_vec = (outputs & kOutVec) != 0;
  if (coef.element_type() != vec.element_type() || static_cast<int64_t>(coef.element_count()) != (want_vec ? 2 * a.T : 0))
    return InvalidArgument("dimenet_out: coef must be [n_triplets, 2] when vec is requested");
  ffi::AnyBuffer res[2] = {*r_grad, *r_vec};
  if (auto err = CheckResult("dimenet_out", "grad", res[0], (outputs & kOutGrad) != 0, a.C * a.E, vec.element_type());
      err.failure())
    return err;
  if (auto err = CheckResult("dimenet_out", "vec", res[1], want_vec, 3 * a.E, vec.element_type()); err.failure())
    return err;
  return DispatchTypes(vec.element_type(), offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    return OutTyped<T, I>(pool, a, offsets.typed_data<I>(), nbr.typed_data<I>(), ops,
                          want_vec ? coef.typed_data<T>() : nullptr, res);
  });
}

}  // namespace
}  // namespace jgo

using AnyBuf = xla::ffi::AnyBuffer;

XLA_FFI_DEFINE_HANDLER_SYMBOL(JgoDimenetInCpu, jgo::DimenetInCpu,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .Arg<AnyBuf>()  // in_offsets [E+1]
                                  .Arg<AnyBuf>()  // in_out [T]
                                  .Arg<AnyBuf>()  // in_pos [T]
                                  .Arg<AnyBuf>()  // vec [E,3]
                                  .Arg<AnyBuf>()  // sbf_rad [E,42]
                                  .Arg<AnyBuf>()  // emb [E,C] or [0]
                                  .Arg<AnyBuf>()  // W_a [42,M]
                                  .Arg<AnyBuf>()  // W_b [C,M]
                                  .Arg<AnyBuf>()  // grad [E,C] or [0]
                                  .Arg<AnyBuf>()  // direction: vec
                                  .Arg<AnyBuf>()  // direction: sbf_rad
                                  .Arg<AnyBuf>()  // direction: emb
                                  .Arg<AnyBuf>()  // direction: W_a
                                  .Arg<AnyBuf>()  // direction: W_b
                                  .Arg<AnyBuf>()  // direction: grad
                                  .Ret<AnyBuf>()  // vec component, e_in part [E,3] or [0]
                                  .Ret<AnyBuf>()  // sbf_rad component [E,42] or [0]
                                  .Ret<AnyBuf>()  // emb component [E,C] or [0]
                                  .Ret<AnyBuf>()  // W_a component [42,M] or [0]
                                  .Ret<AnyBuf>()  // W_b component [C,M] or [0]
                                  .Ret<AnyBuf>()  // coef [T,2] or [0]
                                  .Attr<int64_t>("outputs"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JgoDimenetOutCpu, jgo::DimenetOutCpu,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .Arg<AnyBuf>()  // out_offsets [E+1]
                                  .Arg<AnyBuf>()  // out_in [T]
                                  .Arg<AnyBuf>()  // vec
                                  .Arg<AnyBuf>()  // sbf_rad
                                  .Arg<AnyBuf>()  // emb
                                  .Arg<AnyBuf>()  // W_a
                                  .Arg<AnyBuf>()  // W_b
                                  .Arg<AnyBuf>()  // grad
                                  .Arg<AnyBuf>()  // direction: vec
                                  .Arg<AnyBuf>()  // direction: sbf_rad
                                  .Arg<AnyBuf>()  // direction: emb
                                  .Arg<AnyBuf>()  // direction: W_a
                                  .Arg<AnyBuf>()  // direction: W_b
                                  .Arg<AnyBuf>()  // direction: grad
                                  .Arg<AnyBuf>()  // coef [T,2] or [0]
                                  .Ret<AnyBuf>()  // grad component [E,C] or [0]
                                  .Ret<AnyBuf>()  // vec component, e_out part [E,3] or [0]
                                  .Attr<int64_t>("outputs"));
