// CPU handlers of the fused TransformerConv attention op (mha_simple): the one-pass forward
// (jgo_mha_simple_fwd) and its two atomic-free backward passes (jgo_mha_simple_bwd_dst over the
// CSC, jgo_mha_simple_bwd_src over the reverse CSR). Math and argument checks:
// jgo/mha_simple.h, shared with cuda/mha_simple.cu.
//
// The key and value rows of an edge with edge features (k[j] + ef[e], v[j] + ef[e]) are formed in
// a per-thread scratch row of H*C elements and never written out, so nothing of size E x H x C is
// stored (the edge-feature gradient, an output, excepted). The forward keeps an online softmax per
// head; the backward recomputes the attention from the log-sum-exp with the same logit function.
// Every output element is owned by one row, so results are bitwise reproducible run to run.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/handler.h"
#include "cpu/online_softmax.h"
#include "cpu/row_parallel.h"
#include "cpu/vector_math.h"
#include "handlers.h"
#include "jgo/args.h"
#include "jgo/attention.h"
#include "jgo/mha_simple.h"

namespace jgo {
namespace {

// An edge's key or value row: `x` itself, or x + ef formed in `scratch` (H*C elements).
template <typename T, bool kEdge>
inline const T* EdgeRow(const T* x, const T* ef, int64_t HC, T* scratch) {
  if (!kEdge) return x;
  for (int64_t k = 0; k < HC; ++k) scratch[k] = WithEdge(x[k], ef[k]);
  return scratch;
}

// z[h] = scale <a[h], b[h]> for every head, through the products `prod` (H*C scratch) summed per
// head in a fixed order. The forward and both backward passes compute the logits with this one
// function, so the recomputed attention matches the forward's bit for bit.
template <typename T>
inline void HeadDots(const T* a, const T* b, int64_t H, int64_t C, T* prod, T* z) {
  const int64_t HC = H * C;
  for (int64_t k = 0; k < HC; ++k) prod[k] = a[k] * b[k];
  for (int64_t h = 0; h < H; ++h) z[h] = Sum(prod + h * C, C);
}

// Scratch rows of one task: key, value, products [H*C] and the per-head logits, dot products,
// weights, scaled logit gradients and dropout factors.
template <typename T>
struct Scratch {
  std::vector<T> buf;
  T *key, *val, *prod;
  T *z, *dot, *wt, *scale, *f;
  Scratch(int64_t H, int64_t C) : buf(3 * H * C + 5 * H) {
    key = buf.data();
    val = key + H * C;
    prod = val + H * C;
    z = prod + H * C;
    dot = z + H;
    wt = dot + H;
    scale = wt + H;
    f = scale + H;
  }
};

constexpr const char* kFwd = "jgo_mha_simple_fwd";
constexpr const char* kBwdDst = "jgo_mha_simple_bwd_dst";
constexpr const char* kBwdSrc = "jgo_mha_simple_bwd_src";

// ---------------------------------------------------------------------------------------
// jgo_mha_simple_fwd: one pass over the in-edges of each destination with an online softmax per head.

template <typename T, bool kEdge>
void FwdRows(const SimpleArgs& g, Indices offsets, Indices nbr, Indices eid, const T* q, const T* k, const T* v,
             const T* ef, T* out, T* lse, int64_t r0, int64_t r1) {
  const int64_t H = g.heads, C = g.dim, HC = H * C;
  const T scale = static_cast<T>(g.scale);
  Scratch<T> s(H, C);
  OnlineSoftmaxRow<T> row(H, C);
  const int64_t last = offsets[r1];
  for (int64_t r = r0; r < r1; ++r) {
    row.Begin();
    const T* qr = q + r * HC;
    const int64_t end = offsets[r + 1];
    for (int64_t p = offsets[r]; p < end; ++p) {
      if (p + kPrefetchDistance < last) {
        const int64_t ahead = p + kPrefetchDistance, j = nbr[ahead];
        PrefetchRow(k + j * HC, HC);
        PrefetchRow(v + j * HC, HC);
        if (kEdge) PrefetchRow(ef + static_cast<int64_t>(eid[ahead]) * HC, HC);
      }
      const int64_t j = nbr[p];
      const T* efr = kEdge ? ef + static_cast<int64_t>(eid[p]) * HC : nullptr;
      HeadDots(qr, EdgeRow<T, kEdge>(k + j * HC, efr, HC, s.key), H, C, s.prod, s.z);
      for (int64_t h = 0; h < H; ++h) s.z[h] = SimpleLogit(s.z[h], scale);
      row.Add(s.z, EdgeRow<T, kEdge>(v + j * HC, efr, HC, s.val),
              EdgeDropout(g.drop, static_cast<int64_t>(eid[p]), H, s.f));
    }
    row.End(out + r * HC, lse + r * H);
  }
}

// ---------------------------------------------------------------------------------------
// jgo_mha_simple_bwd_dst: over the in-edges of each destination i (CSC):
//   grad_q[i] = sum_e scale ds_e k'_e,   grad_ef[e] = scale ds_e q[i] + alpha_e G[i]

template <typename T, bool kEdge>
void BwdDstRows(const SimpleArgs& g, Indices offsets, Indices nbr, Indices eid, const T* q, const T* k,
                const T* v, const T* ef, const T* info, const T* grad, T* grad_q, T* grad_ef, int64_t r0,
                int64_t r1) {
  const int64_t H = g.heads, C = g.dim, HC = H * C, HI = SimpleInfo::kCount * H;
  const T scale = static_cast<T>(g.scale);
  Scratch<T> s(H, C);
  T *alpha = s.wt, *sds = s.scale;
  const int64_t last = offsets[r1];
  for (int64_t r = r0; r < r1; ++r) {
    T* gq = grad_q + r * HC;
    std::fill(gq, gq + HC, T(0));
    const T *lse = info + r * HI + SimpleInfo::kLse * H, *delta = info + r * HI + SimpleInfo::kDelta * H;
    const T *qr = q + r * HC, *gr = grad + r * HC;
    const int64_t end = offsets[r + 1];
    for (int64_t p = offsets[r]; p < end; ++p) {
      if (p + kPrefetchDistance < last) {
        const int64_t ahead = p + kPrefetchDistance, j = nbr[ahead];
        PrefetchRow(k + j * HC, HC);
        PrefetchRow(v + j * HC, HC);
        if (kEdge) PrefetchRow(ef + static_cast<int64_t>(eid[ahead]) * HC, HC);
      }
      const int64_t j = nbr[p], e = eid[p];
      const T* efr = kEdge ? ef + e * HC : nullptr;
      const T* kr = EdgeRow<T, kEdge>(k + j * HC, efr, HC, s.key);
      HeadDots(qr, kr, H, C, s.prod, s.z);
      HeadDots(gr, EdgeRow<T, kEdge>(v + j * HC, efr, HC, s.val), H, C, s.prod, s.dot);
      const T* fe = EdgeDropout(g.drop, e, H, s.f);
      for (int64_t h = 0; h < H; ++h) {
        alpha[h] = SoftmaxWeight(SimpleLogit(s.z[h], scale), lse[h], CpuExpFn{});
        sds[h] = scale * SimpleLogitGrad(alpha[h], fe ? s.dot[h] * fe[h] : s.dot[h], delta[h]);
        if (fe) alpha[h] *= fe[h];  // the weight of G in grad_v and grad_ef
      }
      for (int64_t h = 0; h < H; ++h) {
        const T sh = sds[h];
        const T* kh = kr + h * C;
        T* gqh = gq + h * C;
        for (int64_t c = 0; c < C; ++c) gqh[c] += sh * kh[c];
      }
      if (kEdge) {
        T* gef = grad_ef + e * HC;
        for (int64_t h = 0; h < H; ++h) {
          const T sh = sds[h], ah = alpha[h];
          for (int64_t c = 0; c < C; ++c) gef[h * C + c] = SimpleEdgeGrad(sh, qr[h * C + c], ah, gr[h * C + c]);
        }
      }
    }
  }
}

// jgo_mha_simple_bwd_src: over the out-edges of each source j (reverse CSR):
//   grad_k[j] = sum_e scale ds_e q[i],   grad_v[j] = sum_e alpha_e G[i]

template <typename T, bool kEdge>
void BwdSrcRows(const SimpleArgs& g, Indices offsets, Indices nbr, Indices eid, const T* q, const T* k,
                const T* v, const T* ef, const T* info, const T* grad, T* grad_k, T* grad_v, int64_t r0,
                int64_t r1) {
  const int64_t H = g.heads, C = g.dim, HC = H * C, HI = SimpleInfo::kCount * H;
  const T scale = static_cast<T>(g.scale);
  Scratch<T> s(H, C);
  T *alpha = s.wt, *sds = s.scale;
  const int64_t last = offsets[r1];
  for (int64_t r = r0; r < r1; ++r) {
    T *gk = grad_k + r * HC, *gv = grad_v + r * HC;
    std::fill(gk, gk + HC, T(0));
    std::fill(gv, gv + HC, T(0));
    const T *kj = k + r * HC, *vj = v + r * HC;
    const int64_t end = offsets[r + 1];
    for (int64_t p = offsets[r]; p < end; ++p) {
      if (p + kPrefetchDistance < last) {
        const int64_t ahead = p + kPrefetchDistance, i = nbr[ahead];
        PrefetchRow(q + i * HC, HC);
        PrefetchRow(grad + i * HC, HC);
        PrefetchRow(info + i * HI, HI);
        if (kEdge) PrefetchRow(ef + static_cast<int64_t>(eid[ahead]) * HC, HC);
      }
      const int64_t i = nbr[p], e = eid[p];
      const T* efr = kEdge ? ef + e * HC : nullptr;
      const T *qi = q + i * HC, *gi = grad + i * HC;
      const T *lse = info + i * HI + SimpleInfo::kLse * H, *delta = info + i * HI + SimpleInfo::kDelta * H;
      HeadDots(qi, EdgeRow<T, kEdge>(kj, efr, HC, s.key), H, C, s.prod, s.z);
      HeadDots(gi, EdgeRow<T, kEdge>(vj, efr, HC, s.val), H, C, s.prod, s.dot);
      const T* fe = EdgeDropout(g.drop, e, H, s.f);
      for (int64_t h = 0; h < H; ++h) {
        alpha[h] = SoftmaxWeight(SimpleLogit(s.z[h], scale), lse[h], CpuExpFn{});
        sds[h] = scale * SimpleLogitGrad(alpha[h], fe ? s.dot[h] * fe[h] : s.dot[h], delta[h]);
        if (fe) alpha[h] *= fe[h];  // the weight of G in grad_v and grad_ef
      }
      for (int64_t h = 0; h < H; ++h) {
        const T sh = sds[h], ah = alpha[h];
        const T *qh = qi + h * C, *gh = gi + h * C;
        T *gkh = gk + h * C, *gvh = gv + h * C;
        for (int64_t c = 0; c < C; ++c) {
          gkh[c] += sh * qh[c];
          gvh[c] += ah * gh[c];
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Handlers

// The row walk `rows` over chunks of the rows; `edge_out` (if any): the pass's edge-valued result
// [E, H, C], 0 at the padding edges.
template <typename T, typename I, typename Rows>
ffi::Error RunRows(ffi::ThreadPool& pool, const SimpleArgs& g, const char* fn, ffi::AnyBuffer offsets,
                   ffi::AnyBuffer nbr, ffi::AnyBuffer eid, Rows rows, T* edge_out = nullptr) {
  const I *o = offsets.typed_data<I>(), *n = nbr.typed_data<I>(), *e = eid.typed_data<I>();
  if (auto err = CheckCompressed(pool, o, n, e, g.n_rows, g.n_edges, g.nbr_bound, true, fn); err.failure()) return err;
  ForRowChunks(pool, o, g.n_rows, g.heads * g.dim, [&](int64_t r0, int64_t r1) { rows(o, n, e, r0, r1); });
  ZeroPaddingEdges(o, e, g.n_rows, g.n_edges, g.heads * g.dim, edge_out);
  return ffi::Error::Success();
}

template <typename T>
const T* EdgeData(const SimpleArgs& g, ffi::AnyBuffer& ef) {
  return g.has_edge ? ef.typed_data<T>() : nullptr;
}

ffi::Error FwdCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                  ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v, ffi::AnyBuffer ef, ffi::AnyBuffer dropout_key,
                  ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> lse, double scale, bool has_edge,
                  int64_t dropout_threshold, double dropout_scale) {
  auto args = CheckMhaSimple(kFwd, offsets, nbr, eid, q, k, v, ef, nullptr, nullptr, false, scale, has_edge, false);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(kFwd, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  const auto ft = q.element_type();
  if (auto e = CheckMhaSimpleResults(kFwd, *args, ft, 0, *out, *lse); e.failure()) return e;
  const SimpleArgs g = *args;
  return DispatchTypes(ft, offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    const T *qd = q.typed_data<T>(), *kd = k.typed_data<T>(), *vd = v.typed_data<T>(), *efd = EdgeData<T>(g, ef);
    T *od = out->typed_data<T>(), *ld = lse->typed_data<T>();
    return RunRows<T, I>(pool, g, kFwd, offsets, nbr, eid, [&](const I* o, const I* n, const I* e, int64_t r0,
                                                               int64_t r1) {
      if (g.has_edge) FwdRows<T, true>(g, o, n, e, qd, kd, vd, efd, od, ld, r0, r1);
      else FwdRows<T, false>(g, o, n, e, qd, kd, vd, efd, od, ld, r0, r1);
    });
  });
}

ffi::Error BwdDstCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                     ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v, ffi::AnyBuffer ef, ffi::AnyBuffer info,
                     ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> grad_q,
                     ffi::Result<ffi::AnyBuffer> grad_ef, double scale, bool has_edge, int64_t dropout_threshold,
                     double dropout_scale) {
  auto args = CheckMhaSimple(kBwdDst, offsets, nbr, eid, q, k, v, ef, &info, &grad, false, scale, has_edge, false);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(kBwdDst, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  const auto ft = q.element_type();
  if (auto e = CheckMhaSimpleResults(kBwdDst, *args, ft, 1, *grad_q, *grad_ef); e.failure()) return e;
  const SimpleArgs g = *args;
  return DispatchTypes(ft, offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    const T *qd = q.typed_data<T>(), *kd = k.typed_data<T>(), *vd = v.typed_data<T>(), *efd = EdgeData<T>(g, ef);
    const T *inf = info.typed_data<T>(), *gd = grad.typed_data<T>();
    T* gqd = grad_q->typed_data<T>();
    T* gef = g.has_edge ? grad_ef->typed_data<T>() : nullptr;
    return RunRows<T, I>(pool, g, kBwdDst, offsets, nbr, eid, [&](const I* o, const I* n, const I* e, int64_t r0,
                                                                  int64_t r1) {
      if (g.has_edge) BwdDstRows<T, true>(g, o, n, e, qd, kd, vd, efd, inf, gd, gqd, gef, r0, r1);
      else BwdDstRows<T, false>(g, o, n, e, qd, kd, vd, efd, inf, gd, gqd, gef, r0, r1);
    }, gef);
  });
}

ffi::Error BwdSrcCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                     ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v, ffi::AnyBuffer ef, ffi::AnyBuffer info,
                     ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> grad_k,
                     ffi::Result<ffi::AnyBuffer> grad_v, double scale, bool has_edge, int64_t dropout_threshold,
                     double dropout_scale) {
  auto args = CheckMhaSimple(kBwdSrc, offsets, nbr, eid, q, k, v, ef, &info, &grad, true, scale, has_edge, false);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(kBwdSrc, *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  const auto ft = q.element_type();
  if (auto e = CheckMhaSimpleResults(kBwdSrc, *args, ft, 2, *grad_k, *grad_v); e.failure()) return e;
  const SimpleArgs g = *args;
  return DispatchTypes(ft, offsets.element_type(), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    const T *qd = q.typed_data<T>(), *kd = k.typed_data<T>(), *vd = v.typed_data<T>(), *efd = EdgeData<T>(g, ef);
    const T *inf = info.typed_data<T>(), *gd = grad.typed_data<T>();
    T *gkd = grad_k->typed_data<T>(), *gvd = grad_v->typed_data<T>();
    return RunRows<T, I>(pool, g, kBwdSrc, offsets, nbr, eid, [&](const I* o, const I* n, const I* e, int64_t r0,
                                                                  int64_t r1) {
      if (g.has_edge) BwdSrcRows<T, true>(g, o, n, e, qd, kd, vd, efd, inf, gd, gkd, gvd, r0, r1);
      else BwdSrcRows<T, false>(g, o, n, e, qd, kd, vd, efd, inf, gd, gkd, gvd, r0, r1);
    });
  });
}

}  // namespace
}  // namespace jgo

JGO_CPU_HANDLER(MhaSimpleFwd, jgo::FwdCpu, jgo::BindMhaSimpleFwd<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(MhaSimpleBwdDst, jgo::BwdDstCpu, jgo::BindMhaSimpleBwdDst<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(MhaSimpleBwdSrc, jgo::BwdSrcCpu, jgo::BindMhaSimpleBwdSrc<xla::ffi::ThreadPool>());
