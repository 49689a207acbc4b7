// TransformerConv attention (mha_simple): the per-element math, the argument checks and the
// bindings shared by the CPU and CUDA handlers (cpu/mha_simple.cc, cuda/mha_simple.cu).
//
// Per head h and edge e = (j -> i), with k'_e = k[j,h,:] (+ ef[e,h,:]), v'_e = v[j,h,:] (+ ef[e,h,:]):
//   z_e   = scale <q[i,h,:], k'_e>                    logit (scale = 1 / sqrt(C))
//   alpha = exp(z_e - lse[i,h])                       softmax over the in-edges of i
//   out[i,h,:] = sum_e alpha_e v'_e
// Backward with G = d out, delta[i,h] = <G[i,h], out[i,h]> - d lse[i,h]:
//   ds_e  = alpha_e (<G[i,h], v'_e> - delta[i,h])
//   grad_q[i] += scale ds_e k'_e,  grad_k[j] += scale ds_e q[i],  grad_v[j] += alpha_e G[i],
//   grad_ef[e] = scale ds_e q[i] + alpha_e G[i]
// With attention dropout (factor d_e, jgo/attention.h) out sums alpha_e d_e v'_e, ds_e takes
// d_e <G[i,h], v'_e> and grad_v, grad_ef take alpha_e d_e G[i].
//
// jgo_mha_simple_fwd     (csc_offsets, csc_src, csc_eid, q [Nd,H,C], k [Ns,H,C], v [Ns,H,C], ef [E,H,C] | [0])
//                        -> out [Nd,H,C], lse [Nd,H]
// jgo_mha_simple_bwd_dst (csc_offsets, csc_src, csc_eid, q, k, v, ef, info [Nd,2,H] = (lse, delta), G [Nd,H,C])
//                        -> grad_q [Nd,H,C], grad_ef [E,H,C] | [0]
// jgo_mha_simple_bwd_src (csr_offsets, csr_dst, csr_eid, q, k, v, ef, info, G) -> grad_k [Ns,H,C], grad_v [Ns,H,C]
// Each also takes the dropout key last, with attributes dropout_threshold, dropout_scale (jgo/dropout_args.h).
// Attributes: scale (f64), has_edge (bool). Edge-valued arrays are in input edge order. Features,
// G and the feature results share one storage dtype (float32/float64; on CUDA also bfloat16 and
// float16); lse and info are in the accumulation dtype (float32 for half storage).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "jgo/args.h"
#include "jgo/attention.h"
#include "jgo/dropout_args.h"

namespace jgo {

// Per-destination row of the backward: lse and delta of every head, packed as [2, H].
struct SimpleInfo {
  enum : int { kLse = 0, kDelta = 1, kCount = 2 };
};

struct SimpleArgs {
  int64_t n_src, n_dst, n_edges, heads, dim;
  int64_t n_rows;     // rows of the walked structure (n_dst for the CSC, n_src for the CSR)
  int64_t nbr_bound;  // neighbour ids lie in [0, nbr_bound)
  bool has_edge;
  double scale;
  Dropout drop;
};

// An edge's key or value element: k[j] + ef[e] (v[j] + ef[e]); ef = 0 without edge features.
template <typename T>
JGO_HD T WithEdge(T x, T ef) {
  return x + ef;
}

// The logit of one (edge, head) from the dot product <q[i], k'_e>.
template <typename T>
JGO_HD T SimpleLogit(T dot, T scale) {
  return dot * scale;
}

// d loss / d z_e of one (edge, head): alpha (<G[i], v'_e> - delta[i]).
template <typename T>
JGO_HD T SimpleLogitGrad(T alpha, T dalpha, T delta) {
  return alpha * (dalpha - delta);
}

// The edge-feature gradient element scale ds q[i] + alpha G[i] (its key and value parts).
template <typename T>
JGO_HD T SimpleEdgeGrad(T scale_ds, T q, T alpha, T g) {
  return scale_ds * q + alpha * g;
}

// The dtype of lse and info for features stored as `storage`: float32 for half storage.
inline ffi::DataType SimpleAccType(ffi::DataType storage) {
  return IsHalfType(storage) ? ffi::DataType::F32 : storage;
}

// The checks of the three handlers: `by_src` selects the CSR pass (rows = sources). `info` and
// `grad` are null for the forward. `allow_half`: bfloat16/float16 storage is accepted (CUDA).
inline ffi::ErrorOr<SimpleArgs> CheckMhaSimple(const char* fn, const ffi::AnyBuffer& offsets,
                                               const ffi::AnyBuffer& nbr, const ffi::AnyBuffer& eid,
                                               const ffi::AnyBuffer& q, const ffi::AnyBuffer& k,
                                               const ffi::AnyBuffer& v, const ffi::AnyBuffer& ef,
                                               const ffi::AnyBuffer* info, const ffi::AnyBuffer* grad, bool by_src,
                                               double scale, bool has_edge, bool allow_half) {
  SimpleArgs r;
  auto view = CheckGraphView(fn, offsets, nbr, eid);
  if (view.has_error()) return ffi::Unexpected(view.error());
  const auto ft = q.element_type();
  if (!(IsFloatType(ft) || (allow_half && IsHalfType(ft))))
    return Fail(std::string(fn) + (allow_half ? ": features must be float32, float64, bfloat16 or float16"
                                              : ": features must be float32 or float64"));
  if (k.element_type() != ft || v.element_type() != ft || ef.element_type() != ft ||
      (grad && grad->element_type() != ft))
    return Fail(std::string(fn) + ": query, key, value, edge_feat and grad must share a dtype");
  if (info && info->element_type() != SimpleAccType(ft))
    return Fail(std::string(fn) + ": dst_info must be float32 for half features, else the features' dtype");
  auto qd = q.dimensions();
  auto kd = k.dimensions();
  if (qd.size() != 3) return Fail(std::string(fn) + ": query must be [n_dst, H, C]; got " + ShapeOf(q));
  if (kd.size() != 3) return Fail(std::string(fn) + ": key must be [n_src, H, C]; got " + ShapeOf(k));
  r.n_dst = qd[0];
  r.heads = qd[1];
  r.dim = qd[2];
  r.n_src = kd[0];
  if (auto e = SetWalk(fn, r, *view, by_src); e.failure()) return ffi::Unexpected(e);
  r.has_edge = has_edge;
  r.scale = scale;
  if (auto e = CheckShape(fn, "key", k, {r.n_src, r.heads, r.dim}); e.failure()) return ffi::Unexpected(e);
  if (auto e = CheckShape(fn, "value", v, {r.n_src, r.heads, r.dim}); e.failure()) return ffi::Unexpected(e);
  if (has_edge) {
    if (auto e = CheckShape(fn, "edge_feat", ef, {r.n_edges, r.heads, r.dim}); e.failure())
      return ffi::Unexpected(e);
  }
  if (info) {
    if (auto e = CheckShape(fn, "dst_info", *info, {r.n_dst, SimpleInfo::kCount, r.heads}); e.failure())
      return ffi::Unexpected(e);
  }
  if (grad) {
    if (auto e = CheckShape(fn, "grad", *grad, {r.n_dst, r.heads, r.dim}); e.failure()) return ffi::Unexpected(e);
  }
  return r;
}

// The result checks of each handler (`part`: 0 forward, 1 CSC backward, 2 CSR backward).
inline ffi::Error CheckMhaSimpleResults(const char* fn, const SimpleArgs& a, ffi::DataType ft, int part,
                                        const ffi::AnyBuffer& r0, const ffi::AnyBuffer& r1) {
  const int64_t H = a.heads, C = a.dim;
  if (part == 0) {
    if (auto e = CheckResult(fn, "out", r0, ft, {a.n_dst, H, C}); e.failure()) return e;
    return CheckResult(fn, "lse", r1, SimpleAccType(ft), {a.n_dst, H});
  }
  if (part == 1) {
    if (auto e = CheckResult(fn, "grad_query", r0, ft, {a.n_dst, H, C}); e.failure()) return e;
    if (!a.has_edge) return ffi::Error::Success();
    return CheckResult(fn, "grad_edge_feat", r1, ft, {a.n_edges, H, C});
  }
  if (auto e = CheckResult(fn, "grad_key", r0, ft, {a.n_src, H, C}); e.failure()) return e;
  return CheckResult(fn, "grad_value", r1, ft, {a.n_src, H, C});
}

template <typename... Ctx>
auto BindMhaSimpleFwd() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csc offsets
      .template Arg<ffi::AnyBuffer>()  // csc sources
      .template Arg<ffi::AnyBuffer>()  // csc edge ids
      .template Arg<ffi::AnyBuffer>()  // query [n_dst, H, C]
      .template Arg<ffi::AnyBuffer>()  // key [n_src, H, C]
      .template Arg<ffi::AnyBuffer>()  // value [n_src, H, C]
      .template Arg<ffi::AnyBuffer>()  // edge_feat [E, H, C] or [0]
      .template Arg<ffi::AnyBuffer>()  // dropout key, uint32[2] or [0]
      .template Ret<ffi::AnyBuffer>()  // out [n_dst, H, C]
      .template Ret<ffi::AnyBuffer>()  // lse [n_dst, H] (float32 for half features)
      .template Attr<double>("scale")
      .template Attr<bool>("has_edge")
      .template Attr<int64_t>("dropout_threshold")
      .template Attr<double>("dropout_scale");
}

template <typename... Ctx>
auto BindMhaSimpleBwdDst() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csc offsets
      .template Arg<ffi::AnyBuffer>()  // csc sources
      .template Arg<ffi::AnyBuffer>()  // csc edge ids
      .template Arg<ffi::AnyBuffer>()  // query [n_dst, H, C]
      .template Arg<ffi::AnyBuffer>()  // key [n_src, H, C]
      .template Arg<ffi::AnyBuffer>()  // value [n_src, H, C]
      .template Arg<ffi::AnyBuffer>()  // edge_feat [E, H, C] or [0]
      .template Arg<ffi::AnyBuffer>()  // dst_info [n_dst, 2, H] = (lse, delta)
      .template Arg<ffi::AnyBuffer>()  // grad of out [n_dst, H, C]
      .template Arg<ffi::AnyBuffer>()  // dropout key, uint32[2] or [0]
      .template Ret<ffi::AnyBuffer>()  // grad_query [n_dst, H, C]
      .template Ret<ffi::AnyBuffer>()  // grad_edge_feat [E, H, C] or [0]
      .template Attr<double>("scale")
      .template Attr<bool>("has_edge")
      .template Attr<int64_t>("dropout_threshold")
      .template Attr<double>("dropout_scale");
}

template <typename... Ctx>
auto BindMhaSimpleBwdSrc() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csr offsets
      .template Arg<ffi::AnyBuffer>()  // csr destinations
      .template Arg<ffi::AnyBuffer>()  // csr edge ids
      .template Arg<ffi::AnyBuffer>()  // query [n_dst, H, C]
      .template Arg<ffi::AnyBuffer>()  // key [n_src, H, C]
      .template Arg<ffi::AnyBuffer>()  // value [n_src, H, C]
      .template Arg<ffi::AnyBuffer>()  // edge_feat [E, H, C] or [0]
      .template Arg<ffi::AnyBuffer>()  // dst_info [n_dst, 2, H] = (lse, delta)
      .template Arg<ffi::AnyBuffer>()  // grad of out [n_dst, H, C]
      .template Arg<ffi::AnyBuffer>()  // dropout key, uint32[2] or [0]
      .template Ret<ffi::AnyBuffer>()  // grad_key [n_src, H, C]
      .template Ret<ffi::AnyBuffer>()  // grad_value [n_src, H, C]
      .template Attr<double>("scale")
      .template Attr<bool>("has_edge")
      .template Attr<int64_t>("dropout_threshold")
      .template Attr<double>("dropout_scale");
}

}  // namespace jgo
