// Argument decoding, shape checks and bindings of GAT's handlers (and the argument struct GATv2 shares),
// identical on CPU and CUDA.
//
// jgo_gat_fwd      (csc_offsets, csc_src, csc_eid, x [Ns,H,C], s_src [Ns,H], s_dst [Nd,H],
//                   s_edge [E,H] | [0]) -> out [Nd,H,C], lse [Nd,H]
// jgo_gat_bwd_dst  (csc_offsets, csc_src, csc_eid, x, s_src, s_edge, dst_info [Nd,3,H], G [Nd,H,C])
//                   -> grad_s_dst [Nd,H], grad_s_edge [E,H] | [0]
// jgo_gat_bwd_src  (csr_offsets, csr_dst, csr_eid, x, s_src, s_edge, dst_info, G)
//                   -> grad_x [Ns,H,C], grad_s_src [Ns,H]
// Every handler of the attention family (GAT, GATv2, mha_simple) also takes the dropout key, uint32[2]
// or [0] for no dropout, as its last operand, and the attributes dropout_threshold (i64) and
// dropout_scale (f64) (jgo/attention.h, Dropout).
// Attributes: negative_slope (f64), has_edge (bool). Edge-valued arrays are in input edge order.
#pragma once

#include <cstdint>
#include <string>

#include "jgo/args.h"
#include "jgo/attention.h"
#include "jgo/dropout_args.h"

namespace jgo {

struct GatArgs {
  int64_t n_src, n_dst, n_edges, heads, dim;
  int64_t n_rows;     // rows of the walked structure (n_dst for the CSC, n_src for the CSR)
  int64_t nbr_bound;  // neighbour ids lie in [0, nbr_bound)
  bool has_edge;
  double slope;
  ffi::DataType storage, score;  // of the feature arrays, and of the scores (see StorageFits)
  Dropout drop;
};

// The checks common to the three handlers. `by_src` selects the CSR (rows = sources,
// neighbours = destinations) instead of the CSC.
inline ffi::ErrorOr<GatArgs> CheckGatCommon(const char* fn, const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& nbr,
                                            const ffi::AnyBuffer& eid, const ffi::AnyBuffer& x,
                                            const ffi::AnyBuffer& s_src, const ffi::AnyBuffer& s_edge,
                                            int64_t n_dst, bool by_src, double slope, bool has_edge) {
  GatArgs a;
  auto view = CheckGraphView(fn, offsets, nbr, eid);
  if (view.has_error()) return ffi::Unexpected(view.error());
  a.storage = x.element_type();
  a.score = s_src.element_type();
  if (!StorageFits(a.storage, a.score) || s_edge.element_type() != a.score)
    return Fail(std::string(fn) + ": scores must be float32/float64 and features of their dtype, or bfloat16/float16 "
                "features with float32 scores");
  auto xd = x.dimensions();
  if (xd.size() != 3) return Fail(std::string(fn) + ": x must be [n_src, H, C]; got " + ShapeOf(x));
  a.n_src = xd[0];
  a.heads = xd[1];
  a.dim = xd[2];
  a.n_dst = n_dst;
  if (auto e = SetWalk(fn, a, *view, by_src); e.failure()) return ffi::Unexpected(e);
  a.has_edge = has_edge;
  a.slope = slope;
  if (auto e = CheckShape(fn, "s_src", s_src, {a.n_src, a.heads}); e.failure()) return ffi::Unexpected(e);
  if (has_edge) {
    if (auto e = CheckShape(fn, "s_edge", s_edge, {a.n_edges, a.heads}); e.failure()) return ffi::Unexpected(e);
  }
  return a;
}

inline ffi::ErrorOr<GatArgs> CheckGatFwd(const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& nbr,
                                         const ffi::AnyBuffer& eid, const ffi::AnyBuffer& x,
                                         const ffi::AnyBuffer& s_src, const ffi::AnyBuffer& s_dst,
                                         const ffi::AnyBuffer& s_edge, const ffi::AnyBuffer& out,
                                         const ffi::AnyBuffer& lse, double slope, bool has_edge) {
  const char* fn = "jgo_gat_fwd";
  const int64_t n_dst = static_cast<int64_t>(offsets.element_count()) - 1;
  auto a = CheckGatCommon(fn, offsets, nbr, eid, x, s_src, s_edge, n_dst, false, slope, has_edge);
  if (a.has_error()) return a;
  if (s_dst.element_type() != a->score || lse.element_type() != a->score || out.element_type() != a->storage)
    return Fail(std::string(fn) + ": s_dst and lse must have the dtype of s_src, out that of x");
  if (auto e = CheckShape(fn, "s_dst", s_dst, {a->n_dst, a->heads}); e.failure()) return ffi::Unexpected(e);
  if (auto e = CheckShape(fn, "out", out, {a->n_dst, a->heads, a->dim}); e.failure()) return ffi::Unexpected(e);
  if (auto e = CheckShape(fn, "lse", lse, {a->n_dst, a->heads}); e.failure()) return ffi::Unexpected(e);
  return a;
}

template <typename... Ctx>
auto BindGatFwd() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csc offsets
      .template Arg<ffi::AnyBuffer>()  // csc sources
      .template Arg<ffi::AnyBuffer>()  // csc edge ids
      .template Arg<ffi::AnyBuffer>()  // x [n_src, H, C]
      .template Arg<ffi::AnyBuffer>()  // s_src [n_src, H]
      .template Arg<ffi::AnyBuffer>()  // s_dst [n_dst, H]
      .template Arg<ffi::AnyBuffer>()  // s_edge [E, H] or [0]
      .template Arg<ffi::AnyBuffer>()  // dropout key, uint32[2] or [0]
      .template Ret<ffi::AnyBuffer>()  // out [n_dst, H, C]
      .template Ret<ffi::AnyBuffer>()  // lse [n_dst, H]
      .template Attr<double>("negative_slope")
      .template Attr<bool>("has_edge")
      .template Attr<int64_t>("dropout_threshold")
      .template Attr<double>("dropout_scale");
}

// Both backward handlers: `by_src` is the CSR pass (grad_x, grad_s_src), else the CSC pass
// (grad_s_dst, grad_s_edge). `out_a` and `out_b` are the two results in that order.
inline ffi::ErrorOr<GatArgs> CheckGatBwd(const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& nbr,
                                         const ffi::AnyBuffer& eid, const ffi::AnyBuffer& x,
                                         const ffi::AnyBuffer& s_src, const ffi::AnyBuffer& s_edge,
                                         const ffi::AnyBuffer& dst_info, const ffi::AnyBuffer& grad,
                                         const ffi::AnyBuffer& out_a, const ffi::AnyBuffer& out_b, bool by_src,
                                         double slope, bool has_edge) {
  const char* fn = by_src ? "jgo_gat_bwd_src" : "jgo_gat_bwd_dst";
  auto dd = dst_info.dimensions();
  if (dd.size() != 3) return Fail(std::string(fn) + ": dst_info must be [n_dst, 3, H]; got " + ShapeOf(dst_info));
  auto a = CheckGatCommon(fn, offsets, nbr, eid, x, s_src, s_edge, dd[0], by_src, slope, has_edge);
  if (a.has_error()) return a;
  const auto a_type = by_src ? a->storage : a->score;  // grad_x, or grad_s_dst
  if (dst_info.element_type() != a->score || grad.element_type() != a->storage || out_a.element_type() != a_type ||
      out_b.element_type() != a->score)
    return Fail(std::string(fn) + ": dst_info and the score gradients must have the dtype of s_src, grad and "
                "grad_x that of x");
  if (auto e = CheckShape(fn, "dst_info", dst_info, {a->n_dst, DstInfo::kCount, a->heads}); e.failure())
    return ffi::Unexpected(e);
  if (auto e = CheckShape(fn, "grad", grad, {a->n_dst, a->heads, a->dim}); e.failure()) return ffi::Unexpected(e);
  if (by_src) {
    if (auto e = CheckShape(fn, "grad_x", out_a, {a->n_src, a->heads, a->dim}); e.failure())
      return ffi::Unexpected(e);
    if (auto e = CheckShape(fn, "grad_s_src", out_b, {a->n_src, a->heads}); e.failure())
      return ffi::Unexpected(e);
  } else {
    if (auto e = CheckShape(fn, "grad_s_dst", out_a, {a->n_dst, a->heads}); e.failure())
      return ffi::Unexpected(e);
    if (has_edge) {
      if (auto e = CheckShape(fn, "grad_s_edge", out_b, {a->n_edges, a->heads}); e.failure())
        return ffi::Unexpected(e);
    }
  }
  return a;
}

template <typename... Ctx>
auto BindGatBwdDst() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csc offsets
      .template Arg<ffi::AnyBuffer>()  // csc sources
      .template Arg<ffi::AnyBuffer>()  // csc edge ids
      .template Arg<ffi::AnyBuffer>()  // x [n_src, H, C]
      .template Arg<ffi::AnyBuffer>()  // s_src [n_src, H]
      .template Arg<ffi::AnyBuffer>()  // s_edge [E, H] or [0]
      .template Arg<ffi::AnyBuffer>()  // dst_info [n_dst, 3, H]
      .template Arg<ffi::AnyBuffer>()  // grad of out [n_dst, H, C]
      .template Arg<ffi::AnyBuffer>()  // dropout key, uint32[2] or [0]
      .template Ret<ffi::AnyBuffer>()  // grad_s_dst [n_dst, H]
      .template Ret<ffi::AnyBuffer>()  // grad_s_edge [E, H] or [0]
      .template Attr<double>("negative_slope")
      .template Attr<bool>("has_edge")
      .template Attr<int64_t>("dropout_threshold")
      .template Attr<double>("dropout_scale");
}

template <typename... Ctx>
auto BindGatBwdSrc() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csr offsets
      .template Arg<ffi::AnyBuffer>()  // csr destinations
      .template Arg<ffi::AnyBuffer>()  // csr edge ids
      .template Arg<ffi::AnyBuffer>()  // x [n_src, H, C]
      .template Arg<ffi::AnyBuffer>()  // s_src [n_src, H]
      .template Arg<ffi::AnyBuffer>()  // s_edge [E, H] or [0]
      .template Arg<ffi::AnyBuffer>()  // dst_info [n_dst, 3, H]
      .template Arg<ffi::AnyBuffer>()  // grad of out [n_dst, H, C]
      .template Arg<ffi::AnyBuffer>()  // dropout key, uint32[2] or [0]
      .template Ret<ffi::AnyBuffer>()  // grad_x [n_src, H, C]
      .template Ret<ffi::AnyBuffer>()  // grad_s_src [n_src, H]
      .template Attr<double>("negative_slope")
      .template Attr<bool>("has_edge")
      .template Attr<int64_t>("dropout_threshold")
      .template Attr<double>("dropout_scale");
}

// The CPU kernels compute in the features' own float32/float64 (the lowering converts half
// precision to float32 before the call).
inline ffi::Error RequireCpuStorage(const char* fn, const GatArgs& a) {
  if (a.storage == a.score) return ffi::Error::Success();
  return InvalidArgument(std::string(fn) + ": the CPU kernels take float32/float64 features of the scores' dtype");
}

}  // namespace jgo
