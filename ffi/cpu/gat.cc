// CPU handlers of the attention family: the fused multi-head GAT forward (jgo_gat_fwd) and its
// two atomic-free backward passes (jgo_gat_bwd_dst over the CSC, jgo_gat_bwd_src over the
// reverse CSR). The per-edge math lives in jgo/attention.h, shared with cuda/gat.cu.
//
// Nothing of size E x H x C is written: the forward keeps one accumulator row per destination
// and an online softmax per head (FlashAttention's running max and normaliser), and writes the
// output and the per-(destination, head) log-sum-exp; the backward recomputes the attention
// weights from it. Every output element is owned by one row, so results are bitwise
// reproducible run to run.
//
// Rows are split into chunks of equal work run on XLA's intra-op thread pool, and gathered rows
// are prefetched ahead across row boundaries (cpu/row_parallel.h).
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
#include "jgo/attention_args.h"

namespace jgo {
namespace {

// The per-head logits of one edge: p = s_src[j] + s_dst[i] (+ s_edge[e]), z = leaky_relu(p).
template <typename T, bool kEdge>
inline void EdgeLogits(const T* ss, const T* sd, const T* se, T slope, int64_t H, T* p, T* z) {
  for (int64_t h = 0; h < H; ++h) {
    p[h] = GatPre(ss[h], sd[h], kEdge ? se[h] : T(0));
    z[h] = LeakyRelu(p[h], slope);
  }
}

// ---------------------------------------------------------------------------------------
// jgo_gat_fwd: one pass over the in-edges of each destination with an online softmax per head.

template <typename T, bool kEdge>
void GatFwdRows(const GatArgs& a, Indices offsets, Indices nbr, Indices eid, const T* x, const T* s_src,
                const T* s_dst, const T* s_edge, T* out, T* lse, int64_t r0, int64_t r1) {
  const int64_t H = a.heads, C = a.dim, HC = H * C;
  const T slope = static_cast<T>(a.slope);
  OnlineSoftmaxRow<T> row(H, C);
  std::vector<T> scratch(3 * H);
  T *p = scratch.data(), *z = p + H, *f = z + H;
  const int64_t last = offsets[r1];
  for (int64_t r = r0; r < r1; ++r) {
    row.Begin();
    const T* sd = s_dst + r * H;
    const int64_t end = offsets[r + 1];
    for (int64_t k = offsets[r]; k < end; ++k) {
      if (k + kPrefetchDistance < last) {
        const int64_t q = k + kPrefetchDistance, jq = nbr[q];
        PrefetchRow(x + jq * HC, HC);
        PrefetchRow(s_src + jq * H, H);
        if (kEdge) PrefetchRow(s_edge + static_cast<int64_t>(eid[q]) * H, H);
      }
      const int64_t j = nbr[k];
      EdgeLogits<T, kEdge>(s_src + j * H, sd, kEdge ? s_edge + static_cast<int64_t>(eid[k]) * H : nullptr, slope, H,
                           p, z);
      row.Add(z, x + j * HC, EdgeDropout(a.drop, static_cast<int64_t>(eid[k]), H, f));
    }
    row.End(out + r * HC, lse + r * H);
  }
}

template <typename T, typename I>
ffi::Error GatFwdTyped(ffi::ThreadPool& pool, const GatArgs& a, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr,
                       ffi::AnyBuffer eid, ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_dst,
                       ffi::AnyBuffer s_edge, ffi::AnyBuffer out, ffi::AnyBuffer lse) {
  const I* o = offsets.typed_data<I>();
  const I* n = nbr.typed_data<I>();
  const I* e = eid.typed_data<I>();
  if (auto err = CheckCompressed(pool, o, n, e, a.n_rows, a.n_edges, a.nbr_bound, true, "jgo_gat_fwd");
      err.failure()) return err;
  const T *xd = x.typed_data<T>(), *ss = s_src.typed_data<T>(), *sd = s_dst.typed_data<T>();
  const T* se = a.has_edge ? s_edge.typed_data<T>() : nullptr;
  T *od = out.typed_data<T>(), *ld = lse.typed_data<T>();
  ForRowChunks(pool, o, a.n_rows, a.heads * a.dim, [&](int64_t r0, int64_t r1) {
    if (a.has_edge) GatFwdRows<T, true>(a, o, n, e, xd, ss, sd, se, od, ld, r0, r1);
    else GatFwdRows<T, false>(a, o, n, e, xd, ss, sd, se, od, ld, r0, r1);
  });
  return ffi::Error::Success();
}

ffi::Error GatFwdCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                     ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_dst, ffi::AnyBuffer s_edge,
                     ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> lse,
                     double negative_slope, bool has_edge, int64_t dropout_threshold, double dropout_scale) {
  auto args = CheckGatFwd(offsets, nbr, eid, x, s_src, s_dst, s_edge, *out, *lse, negative_slope, has_edge);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout("jgo_gat_fwd", *args, dropout_key, dropout_threshold, dropout_scale); e.failure()) return e;
  if (auto e = RequireCpuStorage("jgo_gat_fwd", *args); e.failure()) return e;
  return DispatchTypes(x.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return GatFwdTyped<decltype(t), decltype(i)>(pool, *args, offsets, nbr, eid, x, s_src, s_dst, s_edge, *out,
                                                 *lse);
  });
}

// ---------------------------------------------------------------------------------------
// jgo_gat_bwd_dst: over the in-edges of each destination i (CSC):
//   grad_s_dst[i,h] = sum_e gp_e,h      grad_s_edge[e,h] = gp_e,h

template <typename T, bool kEdge>
void GatBwdDstRows(const GatArgs& a, Indices offsets, Indices nbr, Indices eid, const T* x, const T* s_src,
                   const T* s_edge, const T* dst_info, const T* grad, T* grad_s_dst, T* grad_s_edge, int64_t r0,
                   int64_t r1) {
  const int64_t H = a.heads, C = a.dim, HC = H * C;
  const T slope = static_cast<T>(a.slope);
  std::vector<T> scratch(5 * H);
  T *acc = scratch.data(), *p = acc + H, *z = p + H, *dot = z + H, *f = dot + H;
  const int64_t last = offsets[r1];
  for (int64_t r = r0; r < r1; ++r) {
    std::fill(acc, acc + H, T(0));
    const T* info = dst_info + r * DstInfo::kCount * H;
    const T *sd = info + DstInfo::kSDst * H, *lse = info + DstInfo::kLse * H, *delta = info + DstInfo::kDelta * H;
    const T* g = grad + r * HC;
    const int64_t end = offsets[r + 1];
    for (int64_t k = offsets[r]; k < end; ++k) {
      if (k + kPrefetchDistance < last) {
        const int64_t q = k + kPrefetchDistance, jq = nbr[q];
        PrefetchRow(x + jq * HC, HC);
        PrefetchRow(s_src + jq * H, H);
        if (kEdge) PrefetchRow(s_edge + static_cast<int64_t>(eid[q]) * H, H);
      }
      const int64_t j = nbr[k], e = eid[k];
      const T* xr = x + j * HC;
      EdgeLogits<T, kEdge>(s_src + j * H, sd, kEdge ? s_edge + e * H : nullptr, slope, H, p, z);
      for (int64_t h = 0; h < H; ++h) dot[h] = Dot(g + h * C, xr + h * C, C);
      if (const T* fe = EdgeDropout(a.drop, e, H, f))
        for (int64_t h = 0; h < H; ++h) dot[h] *= fe[h];
      T* gse = kEdge ? grad_s_edge + e * H : nullptr;
      for (int64_t h = 0; h < H; ++h) {
        const T gp = GatLogitGrad(SoftmaxWeight(z[h], lse[h], CpuExpFn{}), dot[h], delta[h], p[h], slope);
        acc[h] += gp;
        if (kEdge) gse[h] = gp;
      }
    }
    std::copy(acc, acc + H, grad_s_dst + r * H);
  }
}

// jgo_gat_bwd_src: over the out-edges of each source j (reverse CSR):
//   grad_x[j,h,:] = sum_e alpha_e,h G[i,h,:]      grad_s_src[j,h] = sum_e gp_e,h

template <typename T, bool kEdge>
void GatBwdSrcRows(const GatArgs& a, Indices offsets, Indices nbr, Indices eid, const T* x, const T* s_src,
                   const T* s_edge, const T* dst_info, const T* grad, T* grad_x, T* grad_s_src, int64_t r0,
                   int64_t r1) {
  const int64_t H = a.heads, C = a.dim, HC = H * C, HI = DstInfo::kCount * H;
  const T slope = static_cast<T>(a.slope);
  std::vector<T> scratch(6 * H);
  T *acc = scratch.data(), *p = acc + H, *z = p + H, *dot = z + H, *alpha = dot + H, *f = alpha + H;
  const int64_t last = offsets[r1];
  for (int64_t r = r0; r < r1; ++r) {
    std::fill(acc, acc + H, T(0));
    T* gx = grad_x + r * HC;
    std::fill(gx, gx + HC, T(0));
    const T* xr = x + r * HC;
    const T* ss = s_src + r * H;
    const int64_t end = offsets[r + 1];
    for (int64_t k = offsets[r]; k < end; ++k) {
      if (k + kPrefetchDistance < last) {
        const int64_t q = k + kPrefetchDistance, iq = nbr[q];
        PrefetchRow(grad + iq * HC, HC);
        PrefetchRow(dst_info + iq * HI, HI);
        if (kEdge) PrefetchRow(s_edge + static_cast<int64_t>(eid[q]) * H, H);
      }
      const int64_t i = nbr[k], e = eid[k];
      const T* g = grad + i * HC;
      const T* info = dst_info + i * HI;
      const T *lse = info + DstInfo::kLse * H, *delta = info + DstInfo::kDelta * H;
      EdgeLogits<T, kEdge>(ss, info + DstInfo::kSDst * H, kEdge ? s_edge + e * H : nullptr, slope, H, p, z);
      for (int64_t h = 0; h < H; ++h) dot[h] = Dot(g + h * C, xr + h * C, C);
      const T* fe = EdgeDropout(a.drop, e, H, f);
      for (int64_t h = 0; h < H; ++h) {
        alpha[h] = SoftmaxWeight(z[h], lse[h], CpuExpFn{});
        if (fe) {
          dot[h] *= fe[h];
          acc[h] += GatLogitGrad(alpha[h], dot[h], delta[h], p[h], slope);
          alpha[h] *= fe[h];  // the weight of G in grad_x
        } else {
          acc[h] += GatLogitGrad(alpha[h], dot[h], delta[h], p[h], slope);
        }
      }
      for (int64_t h = 0; h < H; ++h) {
        const T* gh = g + h * C;
        T* gxh = gx + h * C;
        const T ah = alpha[h];
        for (int64_t c = 0; c < C; ++c) gxh[c] += ah * gh[c];
      }
    }
    std::copy(acc, acc + H, grad_s_src + r * H);
  }
}

template <typename T, typename I>
ffi::Error GatBwdTyped(ffi::ThreadPool& pool, const GatArgs& a, bool by_src, ffi::AnyBuffer offsets,
                       ffi::AnyBuffer nbr, ffi::AnyBuffer eid, ffi::AnyBuffer x, ffi::AnyBuffer s_src,
                       ffi::AnyBuffer s_edge, ffi::AnyBuffer dst_info, ffi::AnyBuffer grad, ffi::AnyBuffer out_a,
                       ffi::AnyBuffer out_b) {
  const I* o = offsets.typed_data<I>();
  const I* n = nbr.typed_data<I>();
  const I* e = eid.typed_data<I>();
  if (auto err = CheckCompressed(pool, o, n, e, a.n_rows, a.n_edges, a.nbr_bound, true,
                                 by_src ? "jgo_gat_bwd_src" : "jgo_gat_bwd_dst");
      err.failure())
    return err;
  const T *xd = x.typed_data<T>(), *ss = s_src.typed_data<T>(), *di = dst_info.typed_data<T>();
  const T* gd = grad.typed_data<T>();
  const T* se = a.has_edge ? s_edge.typed_data<T>() : nullptr;
  T* ra = out_a.typed_data<T>();
  T* rb = (by_src || a.has_edge) ? out_b.typed_data<T>() : nullptr;
  ForRowChunks(pool, o, a.n_rows, a.heads * a.dim, [&](int64_t r0, int64_t r1) {
    if (by_src) {
      if (a.has_edge) GatBwdSrcRows<T, true>(a, o, n, e, xd, ss, se, di, gd, ra, rb, r0, r1);
      else GatBwdSrcRows<T, false>(a, o, n, e, xd, ss, se, di, gd, ra, rb, r0, r1);
    } else {
      if (a.has_edge) GatBwdDstRows<T, true>(a, o, n, e, xd, ss, se, di, gd, ra, rb, r0, r1);
      else GatBwdDstRows<T, false>(a, o, n, e, xd, ss, se, di, gd, ra, rb, r0, r1);
    }
  });
  if (!by_src) ZeroPaddingEdges(o, e, a.n_rows, a.n_edges, a.heads, rb);  // grad_s_edge
  return ffi::Error::Success();
}

ffi::Error GatBwd(ffi::ThreadPool& pool, bool by_src, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                  ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_edge, ffi::AnyBuffer dst_info,
                  ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::AnyBuffer out_a, ffi::AnyBuffer out_b,
                  double negative_slope, bool has_edge, int64_t dropout_threshold, double dropout_scale) {
  auto args = CheckGatBwd(offsets, nbr, eid, x, s_src, s_edge, dst_info, grad, out_a, out_b, by_src, negative_slope,
                          has_edge);
  if (args.has_error()) return args.error();
  if (auto e = SetDropout(by_src ? "jgo_gat_bwd_src" : "jgo_gat_bwd_dst", *args, dropout_key, dropout_threshold,
                          dropout_scale);
      e.failure())
    return e;
  if (auto e = RequireCpuStorage(by_src ? "jgo_gat_bwd_src" : "jgo_gat_bwd_dst", *args); e.failure()) return e;
  return DispatchTypes(x.element_type(), offsets.element_type(), [&](auto t, auto i) {
    return GatBwdTyped<decltype(t), decltype(i)>(pool, *args, by_src, offsets, nbr, eid, x, s_src, s_edge, dst_info,
                                                 grad, out_a, out_b);
  });
}

ffi::Error GatBwdDstCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                        ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_edge, ffi::AnyBuffer dst_info,
                        ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> grad_s_dst,
                        ffi::Result<ffi::AnyBuffer> grad_s_edge, double negative_slope, bool has_edge,
                        int64_t dropout_threshold, double dropout_scale) {
  return GatBwd(pool, false, offsets, nbr, eid, x, s_src, s_edge, dst_info, grad, dropout_key, *grad_s_dst,
                *grad_s_edge, negative_slope, has_edge, dropout_threshold, dropout_scale);
}

ffi::Error GatBwdSrcCpu(ffi::ThreadPool pool, ffi::AnyBuffer offsets, ffi::AnyBuffer nbr, ffi::AnyBuffer eid,
                        ffi::AnyBuffer x, ffi::AnyBuffer s_src, ffi::AnyBuffer s_edge, ffi::AnyBuffer dst_info,
                        ffi::AnyBuffer grad, ffi::AnyBuffer dropout_key, ffi::Result<ffi::AnyBuffer> grad_x,
                        ffi::Result<ffi::AnyBuffer> grad_s_src, double negative_slope, bool has_edge,
                        int64_t dropout_threshold, double dropout_scale) {
  return GatBwd(pool, true, offsets, nbr, eid, x, s_src, s_edge, dst_info, grad, dropout_key, *grad_x,
                *grad_s_src, negative_slope, has_edge, dropout_threshold, dropout_scale);
}

}  // namespace
}  // namespace jgo

JGO_CPU_HANDLER(GatFwd, jgo::GatFwdCpu, jgo::BindGatFwd<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(GatBwdDst, jgo::GatBwdDstCpu, jgo::BindGatBwdDst<xla::ffi::ThreadPool>());
JGO_CPU_HANDLER(GatBwdSrc, jgo::GatBwdSrcCpu, jgo::BindGatBwdSrc<xla::ffi::ThreadPool>());
