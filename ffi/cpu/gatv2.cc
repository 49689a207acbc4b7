// CPU handlers of the fused GATv2 op (mha_gat_v2): the one-pass forward (jgo_gatv2_fwd) and its
// two atomic-free backward passes (jgo_gatv2_bwd_dst over the CSC, jgo_gatv2_bwd_src over the
// reverse CSR). Math and argument checks: jgo/gatv2.h, shared with cuda/gatv2.cu.
//
// The logit of an edge needs the C-vector t = x_src[j] + x_dst[i] (+ edge_feat[e]) of each head:
// it is computed into a per-thread scratch row of H*C elements and never written out, so nothing
// of size E x H x C is stored (the edge-feature gradient, an output, excepted). The forward keeps
// an online softmax per head; the backward recomputes the attention from the log-sum-exp. Every
// output element is owned by one row (the weight gradient is a per-destination partial, summed
// by jgo_rows_dot in a fixed order), so results are bitwise the same on any number of threads.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/handler.h"
#include "cpu/online_softmax.h"
#include "cpu/row_parallel.h"
#include "cpu/vector_math.h"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/attention.h"
#include "jgo/gatv2.h"

namespace jgo {
namespace {

// The logits of one edge: t = xs + xd (+ ef) over H*C elements, w = a * leaky_relu(t) and
// z[h] = sum_c w[h, c]. The forward and both backward passes call this one function, so the
// recomputed attention matches the forward's bit for bit.
template <typename T, bool kEdge>
inline void EdgeLogitsV2(const T* xs, const T* xd, const T* ef, const T* a, T slope, int64_t H, int64_t C, T* t,
                         T* w, T* z) {
  const int64_t HC = H * C;
  for (int64_t k = 0; k < HC; ++k) {
    t[k] = Gatv2Pre(xs[k], xd[k], kEdge ? ef[k] : T(0));
    w[k] = a[k] * LeakyRelu(t[k], slope);
  }
  for (int64_t h = 0; h < H; ++h) z[h] = Sum(w + h * C, C);
}

// Scratch rows of one task: t, w [H*C] and the per-head logits, weights, logit gradients and dropout factors.
template <typename T>
struct Scratch {
  std::vector<T> buf;
  T *t, *w, *z, *wt, *dz, *f;
  Scratch(int64_t H, int64_t C) : buf(2 * H * C + 4 * H) {
    t = buf.data();
    w = t + H * C;
    z = w + H * C;
    wt = z + H;
    dz = wt + H;
    f = dz + H;
  }
};

constexpr const char* kFwd = "jgo_gatv2_fwd";
constexpr const char* kBwdDst = "jgo_gatv2_bwd_dst";
constexpr const char* kBwdSrc = "jgo_gatv2_bwd_src";

// ---------------------------------------------------------------------------------------
// jgo_gatv2_fwd: one pass over the in-edges of each destination with an online softmax per head.

template <typename T, bool kEdge>
void FwdRows(const GatArgs& g, Indices offsets, Indices nbr, Indices eid, const T* xs, const T* xd, const T* a,
             const T* ef, T* out, T* lse, int64_t r0, int64_t r1) {
  const int64_t H = g.heads, C = g.dim, HC = H * C;
  const T slope = static_cast<T>(g.slope);
  Scratch<T> s(H, C);
  OnlineSoftmaxRow<T> row(H, C);
  const int64_t last = offsets[r1];
  for (int64_t r = r0; r < r1; ++r) {
    row.Begin();
    const T* xdr = xd + r * HC;
    const int64_t end = offsets[r + 1];
    for (int64_t k = offsets[r]; k < end; ++k) {
      if (k + kPrefetchDistance < last) {
        const int64_t q = k + kPrefetchDistance;
        PrefetchRow(xs + static_cast<int64_t>(nbr[q]) * HC, HC);
        if (kEdge) PrefetchRow(ef + static_cast<int64_t>(eid[q]) * HC, HC);
      }
      const T* xr = xs + static_cast<int64_t>(nbr[k]) * HC;
      EdgeLogitsV2<T, kEdge>(xr, xdr, kEdge ? ef + static_cast<int64_t>(eid[k]) * HC : nullptr, a, slope, H, C, s.t,
                             s.w, s.z);
      row.Add(s.z, xr, EdgeDropout(g.drop, static_cast<int64_t>(eid[k]), H, s.f));
    }
    row.End(out + r * HC, lse + r * H);
  }
}

// ---------------------------------------------------------------------------------------
// jgo_gatv2_bwd_dst: over the in-edges of each destination i (CSC):
//   grad_xd[i] = sum_e dt_e,  grad_a_rows[i] = sum_e dz_e leaky(t_e),  grad_ef[e] = dt_e

template <typename T, bool kEdge>
void BwdDstRows(const GatArgs& g, Indices offsets, Indices nbr, Indices eid, const T* xs, const T* xd,
                const T* a, const T* ef, const T* info, const T* grad, T* grad_xd, T* grad_a, T* grad_ef,
                int64_t r0, int64_t r1) {
  const int64_t H = g.heads, C = g.dim, HC = H * C, HI = Gatv2Info::kCount * H;
  const T slope = static_cast<T>(g.slope);
  Scratch<T> s(H, C);
  const int64_t last = offsets[r1];
  for (int64_t r = r0; r < r1; ++r) {
    T* gxd = grad_xd + r * HC;
    T* gar = grad_a + r * HC;
    std::fill(gxd, gxd + HC, T(0));
    std::fill(gar, gar + HC, T(0));
    const T *lse = info + r * HI + Gatv2Info::kLse * H, *delta = info + r * HI + Gatv2Info::kDelta * H;
    const T* gr = grad + r * HC;
    const T* xdr = xd + r * HC;
    const int64_t end = offsets[r + 1];
    for (int64_t k = offsets[r]; k < end; ++k) {
      if (k + kPrefetchDistance < last) {
        const int64_t q = k + kPrefetchDistance;
        PrefetchRow(xs + static_cast<int64_t>(nbr[q]) * HC, HC);
        if (kEdge) PrefetchRow(ef + static_cast<int64_t>(eid[q]) * HC, HC);
      }
      const int64_t e = eid[k];
      const T* xr = xs + static_cast<int64_t>(nbr[k]) * HC;
      EdgeLogitsV2<T, kEdge>(xr, xdr, kEdge ? ef + e * HC : nullptr, a, slope, H, C, s.t, s.w, s.z);
      const T* fe = EdgeDropout(g.drop, e, H, s.f);
      for (int64_t h = 0; h < H; ++h) {
        const T alpha = SoftmaxWeight(s.z[h], lse[h], CpuExpFn{});
        const T dalpha = Dot(gr + h * C, xr + h * C, C);
        s.dz[h] = alpha * ((fe ? dalpha * fe[h] : dalpha) - delta[h]);
      }
      T* gef = kEdge ? grad_ef + e * HC : nullptr;
      for (int64_t h = 0; h < H; ++h) {
        const T dz = s.dz[h];
        const T *th = s.t + h * C, *ah = a + h * C;
        T *gxh = gxd + h * C, *gah = gar + h * C;
        for (int64_t c = 0; c < C; ++c) {
          const T dt = Gatv2PreGrad(dz, ah[c], th[c], slope);
          gxh[c] += dt;
          gah[c] += Gatv2WeightGrad(dz, th[c], slope);
          if (kEdge) gef[h * C + c] = dt;
        }
      }
    }
  }
}

// jgo_gatv2_bwd_src: over the out-edges of each source j (reverse CSR):
//   grad_xs[j] = sum_e alpha_e G[i] + dt_e

template <typename T, bool kEdge>
void BwdSrcRows(const GatArgs& g, Indices offsets, Indices nbr, Indices eid, const T* xs, const T* xd,
                const T* a, const T* ef, const T* info, const T* grad, T* grad_xs, int64_t r0, int64_t r1) {
  const int64_t H = g.heads, C = g.dim, HC = H * C, HI = Gatv2Info::kCount * H;
  const T slope = static_cast<T>(g.slope);
  Scratch<T> s(H, C);
  const int64_t last = offsets[r1];
  for (int64_t r = r0; r < r1; ++r) {
    T* gx = grad_xs + r * HC;
    std::fill(gx, gx + HC, T(0));
    const T* xr = xs + r * HC;
    const int64_t end = offsets[r + 1];
    for (int64_t k = offsets[r]; k < end; ++k) {
      if (k + kPrefetchDistance < last) {
        const int64_t q = k + kPrefetchDistance, iq = nbr[q];
        PrefetchRow(xd + iq * HC, HC);
        PrefetchRow(grad + iq * HC, HC);
        PrefetchRow(info + iq * HI, HI);
        if (kEdge) PrefetchRow(ef + static_cast<int64_t>(eid[q]) * HC, HC);
      }
      const int64_t i = nbr[k], e = eid[k];
      const T* gr = grad + i * HC;
      const T *lse = info + i * HI + Gatv2Info::kLse * H, *delta = info + i * HI + Gatv2Info::kDelta * H;
      EdgeLogitsV2<T, kEdge>(xr, xd + i * HC, kEdge ? ef + e * HC : nullptr, a, slope, H, C, s.t, s.w, s.z);
      const T* fe = EdgeDropout(g.drop, e, H, s.f);
      for (int64_t h = 0; h < H; ++h) {
        const T alpha = SoftmaxWeight(s.z[h], lse[h], CpuExpFn{});
        const T dalpha = Dot(gr + h * C, xr + h * C, C);
        s.wt[h] = fe ? alpha * fe[h] : alpha;
        s.dz[h] = alpha * ((fe ? dalpha * fe[h] : dalpha) - delta[h]);
      }
      for (int64_t h = 0; h < H; ++h) {
        const T dz = s.dz[h], alpha = s.wt[h];
        const T *th = s.t + h * C, *ah = a + h * C, *gh = gr + h * C;
        T* gxh = gx + h * C;
        for (int64_t c = 0; c < C; ++c) gxh[c] += alpha * gh[c] + Gatv2PreGrad(dz, ah[c], th[c], slope);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Handlers

template <typename T, typename I>
ffi::Error FwdTyped(ffi::ThreadPool& pool, const GatArgs& g, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                    ffi::AnyBuffer eid, ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef,
                    ffi::AnyBuffer out, ffi::AnyBuffer lse) {
  const I *o = offsets.typed_data<I>(), *n = nbr.typed_data<I>(), *e = eid.typed_data<I>();
  if (auto err = CheckCompressed(pool, o, n, e, g.n_rows, g.n_edges, g.nbr_bound, true, kFwd);
      err.failure()) return err;
  const T *xsd = xs.typed_data<T>(), *xdd = xd.typed_data<T>(), *ad = a.typed_data<T>();
  const T* efd = g.has_edge ? ef.typed_data<T>() : nullptr;
  T *od = out.typed_data<T>(), *ld = lse.typed_data<T>();
  ForRowChunks(pool, o, g.n_rows, g.heads * g.dim, [&](int64_t r0, int64_t r1) {
    if (g.has_edge) FwdRows<T, true>(g, o, n, e, xsd, xdd, ad, efd, od, ld, r0, r1);
    else FwdRows<T, false>(g, o, n, e, xsd, xdd, ad, efd, od, ld, r0, r1);
  });
  return ffi::Error::Success();
}

ffi::Error FwdCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                  ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef, ffi::AnyBuffer dropout_key,
                  ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> lse, double negative_slope,
                  bool has_edge, int64_t dropout_threshold, double dropout_scale) {
  auto args = CheckGatv2(kFwd, offsets, nbr, eid, xs, xd, a, ef, nullptr, nullptr, false, negative_slope, has_edge);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(kFwd, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  if (auto e = RequireCpuStorage(kFwd, *args); e.failure()) return e;
  const auto ft = args->storage;
  if (auto e = CheckResult(kFwd, "out", *out, ft, {args->n_dst, args->heads, args->dim}); e.failure()) return e;
  if (auto e = CheckResult(kFwd, "lse", *lse, args->score, {args->n_dst, args->heads}); e.failure()) return e;
  return DispatchTypes(ft, offsets.element_type(), [&](auto t, auto i) {
    return FwdTyped<decltype(t), decltype(i)>(pool, *args, offsets, nbr, eid, xs, xd, a, ef, *out, *lse);
  });
}

template <typename T, typename I>
ffi::Error BwdDstTyped(ffi::ThreadPool& pool, const GatArgs& g, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                       ffi::AnyBuffer eid, ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef,
                       ffi::AnyBuffer info, ffi::AnyBuffer grad, ffi::AnyBuffer grad_xd, ffi::AnyBuffer grad_a,
                       ffi::AnyBuffer grad_ef) {
  const I *o = offsets.typed_data<I>(), *n = nbr.typed_data<I>(), *e = eid.typed_data<I>();
  if (auto err = CheckCompressed(pool, o, n, e, g.n_rows, g.n_edges, g.nbr_bound, true, kBwdDst);
      err.failure()) return err;
  const T *xsd = xs.typed_data<T>(), *xdd = xd.typed_data<T>(), *ad = a.typed_data<T>();
  const T *inf = info.typed_data<T>(), *gd = grad.typed_data<T>();
  const T* efd = g.has_edge ? ef.typed_data<T>() : nullptr;
  T *gxd = grad_xd.typed_data<T>(), *gad = grad_a.typed_data<T>();
  T* gef = g.has_edge ? grad_ef.typed_data<T>() : nullptr;
  ForRowChunks(pool, o, g.n_rows, g.heads * g.dim, [&](int64_t r0, int64_t r1) {
    if (g.has_edge) BwdDstRows<T, true>(g, o, n, e, xsd, xdd, ad, efd, inf, gd, gxd, gad, gef, r0, r1);
    else BwdDstRows<T, false>(g, o, n, e, xsd, xdd, ad, efd, inf, gd, gxd, gad, gef, r0, r1);
  });
  ZeroPaddingEdges(o, e, g.n_rows, g.n_edges, g.heads * g.dim, gef);
  return ffi::Error::Success();
}

ffi::Error BwdDstCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                     ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef, ffi::AnyBuffer info,
                     ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> grad_xd,
                     ffi::Result<ffi::AnyBuffer> grad_a, ffi::Result<ffi::AnyBuffer> grad_ef, double negative_slope,
                     bool has_edge, int64_t dropout_threshold, double dropout_scale) {
  auto args = CheckGatv2(kBwdDst, offsets, nbr, eid, xs, xd, a, ef, &info, &grad, false, negative_slope, has_edge);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(kBwdDst, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  if (auto e = RequireCpuStorage(kBwdDst, *args); e.failure()) return e;
  const auto ft = args->storage;
  const int64_t nd = args->n_dst, H = args->heads, C = args->dim;
  if (auto e = CheckResult(kBwdDst, "grad_x_dst", *grad_xd, ft, {nd, H, C}); e.failure()) return e;
  if (auto e = CheckResult(kBwdDst, "grad_attn_rows", *grad_a, args->score, {nd, H, C}); e.failure()) return e;
  if (has_edge) {
    if (auto e = CheckResult(kBwdDst, "grad_edge_feat", *grad_ef, ft, {args->n_edges, H, C}); e.failure())
      return e;
  }
  return DispatchTypes(ft, offsets.element_type(), [&](auto t, auto i) {
    return BwdDstTyped<decltype(t), decltype(i)>(pool, *args, offsets, nbr, eid, xs, xd, a, ef, info, grad, *grad_xd,
                                                 *grad_a, *grad_ef);
  });
}

template <typename T, typename I>
ffi::Error BwdSrcTyped(ffi::ThreadPool& pool, const GatArgs& g, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                       ffi::AnyBuffer eid, ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef,
                       ffi::AnyBuffer info, ffi::AnyBuffer grad, ffi::AnyBuffer grad_xs) {
  const I *o = offsets.typed_data<I>(), *n = nbr.typed_data<I>(), *e = eid.typed_data<I>();
  if (auto err = CheckCompressed(pool, o, n, e, g.n_rows, g.n_edges, g.nbr_bound, true, kBwdSrc);
      err.failure()) return err;
  const T *xsd = xs.typed_data<T>(), *xdd = xd.typed_data<T>(), *ad = a.typed_data<T>();
  const T *inf = info.typed_data<T>(), *gd = grad.typed_data<T>();
  const T* efd = g.has_edge ? ef.typed_data<T>() : nullptr;
  T* gxs = grad_xs.typed_data<T>();
  ForRowChunks(pool, o, g.n_rows, g.heads * g.dim, [&](int64_t r0, int64_t r1) {
    if (g.has_edge) BwdSrcRows<T, true>(g, o, n, e, xsd, xdd, ad, efd, inf, gd, gxs, r0, r1);
    else BwdSrcRows<T, false>(g, o, n, e, xsd, xdd, ad, efd, inf, gd, gxs, r0, r1);
  });
  return ffi::Error::Success();
}

ffi::Error BwdSrcCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                     ffi::AnyBuffer xs, ffi::AnyBuffer xd, ffi::AnyBuffer a, ffi::AnyBuffer ef, ffi::AnyBuffer info,
                     ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> grad_xs,
                     double negative_slope, bool has_edge, int64_t dropout_threshold, double dropout_scale) {
  auto args = CheckGatv2(kBwdSrc, offsets, nbr, eid, xs, xd, a, ef, &info, &grad, true, negative_slope, has_edge);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(kBwdSrc, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  if (auto e = RequireCpuStorage(kBwdSrc, *args); e.failure()) return e;
  const auto ft = args->storage;
  if (auto e = CheckResult(kBwdSrc, "grad_x_src", *grad_xs, ft, {args->n_src, args->heads, args->dim});
      e.failure())
    return e;
  return DispatchTypes(ft, offsets.element_type(), [&](auto t, auto i) {
    return BwdSrcTyped<decltype(t), decltype(i)>(pool, *args, offsets, nbr, eid, xs, xd, a, ef, info, grad,
                                                 *grad_xs);
  });
}

}  // namespace
}  // namespace jgo

JGO_CPU_HANDLER(Gatv2Fwd, jgo::FwdCpu, jgo::BindGatv2Fwd<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(Gatv2BwdDst, jgo::BwdDstCpu, jgo::BindGatv2BwdDst<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(Gatv2BwdSrc, jgo::BwdSrcCpu, jgo::BindGatv2BwdSrc<xla::ffi::ThreadPool>());
