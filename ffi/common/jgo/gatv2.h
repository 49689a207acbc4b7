// GATv2 (mha_gat_v2): the per-element math, the argument checks and the bindings shared by the CPU
// and CUDA handlers (cpu/gatv2.cc, cuda/gatv2.cu).
//
// Per head h and edge e = (j -> i), with t_e = x_src[j,h,:] + x_dst[i,h,:] (+ edge_feat[e,h,:]):
//   z_e   = <a[h], leaky_relu(t_e)>                     logit (t_e is never stored)
//   alpha = exp(z_e - lse[i,h])                         softmax over the in-edges of i
//   out[i,h,:] = sum_e alpha_e x_src[j,h,:]
// Backward with G = d out, delta[i,h] = <G[i,h], out[i,h]> - d lse[i,h]:
//   dz_e  = alpha_e (<G[i,h], x_src[j,h]> - delta[i,h])
//   dt_e  = dz_e a[h] * leaky_relu'(t_e)                (C-vector)
//   grad_x_src[j] += alpha_e G[i] + dt_e,  grad_x_dst[i] += dt_e,  grad_edge_feat[e] = dt_e,
//   grad_a[h] += dz_e leaky_relu(t_e)                   (a per-destination partial, summed by JAX)
//
// jgo_gatv2_fwd     (csc_offsets, csc_src, csc_eid, xs [Ns,H,C], xd [Nd,H,C], a [H,C], ef [E,H,C] | [0])
//                   -> out [Nd,H,C], lse [Nd,H]
// jgo_gatv2_bwd_dst (csc_offsets, csc_src, csc_eid, xs, xd, a, ef, info [Nd,2,H] = (lse, delta), G [Nd,H,C])
//                   -> grad_xd [Nd,H,C], grad_a_rows [Nd,H,C], grad_ef [E,H,C] | [0]
// jgo_gatv2_bwd_src (csr_offsets, csr_dst, csr_eid, xs, xd, a, ef, info, G) -> grad_xs [Ns,H,C]
// Attributes: negative_slope (f64), has_edge (bool). Edge-valued arrays are in input edge order.
#pragma once

#include <cstdint>
#include <string>

#include "jgo/args.h"
#include "jgo/attention.h"
#include "jgo/attention_args.h"

namespace jgo {

// Per-destination row of the GATv2 backward: lse and delta of every head, packed as [2, H].
struct Gatv2Info {
  enum : int { kLse = 0, kDelta = 1, kCount = 2 };
};

// The pre-activation element t = x_src + x_dst (+ edge_feat) (this order everywhere).
template <typename T>
JGO_HD T Gatv2Pre(T xs, T xd, T ef) {
  return xs + xd + ef;
}

// The backward terms of one element of t: dt = dz a leaky'(t) and the weight-gradient term
// dz leaky(t).
template <typename T>
JGO_HD T Gatv2PreGrad(T dz, T a, T t, T slope) {
  return dz * a * LeakyReluGrad(t, slope);
}
template <typename T>
JGO_HD T Gatv2WeightGrad(T dz, T t, T slope) {
  return dz * LeakyRelu(t, slope);
}

// The checks of the three handlers: `by_src` selects the CSR pass (rows = sources). `info` and
// `grad` are null for the forward.
inline ffi::ErrorOr<GatArgs> CheckGatv2(const char* fn, const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& nbr,
                                        const ffi::AnyBuffer& eid, const ffi::AnyBuffer& xs,
                                        const ffi::AnyBuffer& xd, const ffi::AnyBuffer& a,
                                        const ffi::AnyBuffer& ef, const ffi::AnyBuffer* info,
                                        const ffi::AnyBuffer* grad, bool by_src, double slope, bool has_edge) {
  GatArgs r;
  auto view = CheckGraphView(fn, offsets, nbr, eid);
  if (view.has_error()) return ffi::Unexpected(view.error());
  r.storage = xs.element_type();
  r.score = a.element_type();
  if (!StorageFits(r.storage, r.score) || xd.element_type() != r.storage || ef.element_type() != r.storage ||
      (info && info->element_type() != r.score) || (grad && grad->element_type() != r.storage))
    return Fail(std::string(fn) + ": attn_weights and dst_info must be float32/float64 and x_src, x_dst, edge_feat, "
                "grad of their dtype, or bfloat16/float16 with float32 attn_weights");
  auto sd = xs.dimensions();
  auto dd = xd.dimensions();
  if (sd.size() != 3) return Fail(std::string(fn) + ": x_src must be [n_src, H, C]; got " + ShapeOf(xs));
  if (dd.size() != 3) return Fail(std::string(fn) + ": x_dst must be [n_dst, H, C]; got " + ShapeOf(xd));
  r.n_src = sd[0];
  r.heads = sd[1];
  r.dim = sd[2];
  r.n_dst = dd[0];
  if (auto e = SetWalk(fn, r, *view, by_src); e.failure()) return ffi::Unexpected(e);
  r.has_edge = has_edge;
  r.slope = slope;
  if (auto e = CheckShape(fn, "x_dst", xd, {r.n_dst, r.heads, r.dim}); e.failure()) return ffi::Unexpected(e);
  if (auto e = CheckShape(fn, "attn_weights", a, {r.heads, r.dim}); e.failure()) return ffi::Unexpected(e);
  if (has_edge) {
    if (auto e = CheckShape(fn, "edge_feat", ef, {r.n_edges, r.heads, r.dim}); e.failure())
      return ffi::Unexpected(e);
  }
  if (info) {
    if (auto e = CheckShape(fn, "dst_info", *info, {r.n_dst, Gatv2Info::kCount, r.heads}); e.failure())
      return ffi::Unexpected(e);
  }
  if (grad) {
    if (auto e = CheckShape(fn, "grad", *grad, {r.n_dst, r.heads, r.dim}); e.failure()) return ffi::Unexpected(e);
  }
  return r;
}

template <typename... Ctx>
auto BindGatv2Fwd() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csc offsets
      .template Arg<ffi::AnyBuffer>()  // csc sources
      .template Arg<ffi::AnyBuffer>()  // csc edge ids
      .template Arg<ffi::AnyBuffer>()  // x_src [n_src, H, C]
      .template Arg<ffi::AnyBuffer>()  // x_dst [n_dst, H, C]
      .template Arg<ffi::AnyBuffer>()  // attn_weights [H, C]
      .template Arg<ffi::AnyBuffer>()  // edge_feat [E, H, C] or [0]
      .template Arg<ffi::AnyBuffer>()  // dropout key, uint32[2] or [0]
      .template Ret<ffi::AnyBuffer>()  // out [n_dst, H, C]
      .template Ret<ffi::AnyBuffer>()  // lse [n_dst, H]
      .template Attr<double>("negative_slope")
      .template Attr<bool>("has_edge")
      .template Attr<int64_t>("dropout_threshold")
      .template Attr<double>("dropout_scale");
}

template <typename... Ctx>
auto BindGatv2BwdDst() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csc offsets
      .template Arg<ffi::AnyBuffer>()  // csc sources
      .template Arg<ffi::AnyBuffer>()  // csc edge ids
      .template Arg<ffi::AnyBuffer>()  // x_src [n_src, H, C]
      .template Arg<ffi::AnyBuffer>()  // x_dst [n_dst, H, C]
      .template Arg<ffi::AnyBuffer>()  // attn_weights [H, C]
      .template Arg<ffi::AnyBuffer>()  // edge_feat [E, H, C] or [0]
      .template Arg<ffi::AnyBuffer>()  // dst_info [n_dst, 2, H] = (lse, delta)
      .template Arg<ffi::AnyBuffer>()  // grad of out [n_dst, H, C]
      .template Arg<ffi::AnyBuffer>()  // dropout key, uint32[2] or [0]
      .template Ret<ffi::AnyBuffer>()  // grad_x_dst [n_dst, H, C]
      .template Ret<ffi::AnyBuffer>()  // grad_attn_rows [n_dst, H, C] (summed over rows by JAX)
      .template Ret<ffi::AnyBuffer>()  // grad_edge_feat [E, H, C] or [0]
      .template Attr<double>("negative_slope")
      .template Attr<bool>("has_edge")
      .template Attr<int64_t>("dropout_threshold")
      .template Attr<double>("dropout_scale");
}

template <typename... Ctx>
auto BindGatv2BwdSrc() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csr offsets
      .template Arg<ffi::AnyBuffer>()  // csr destinations
      .template Arg<ffi::AnyBuffer>()  // csr edge ids
      .template Arg<ffi::AnyBuffer>()  // x_src [n_src, H, C]
      .template Arg<ffi::AnyBuffer>()  // x_dst [n_dst, H, C]
      .template Arg<ffi::AnyBuffer>()  // attn_weights [H, C]
      .template Arg<ffi::AnyBuffer>()  // edge_feat [E, H, C] or [0]
      .template Arg<ffi::AnyBuffer>()  // dst_info [n_dst, 2, H] = (lse, delta)
      .template Arg<ffi::AnyBuffer>()  // grad of out [n_dst, H, C]
      .template Arg<ffi::AnyBuffer>()  // dropout key, uint32[2] or [0]
      .template Ret<ffi::AnyBuffer>()  // grad_x_src [n_src, H, C]
      .template Attr<double>("negative_slope")
      .template Attr<bool>("has_edge")
      .template Attr<int64_t>("dropout_threshold")
      .template Attr<double>("dropout_scale");
}

}  // namespace jgo
