// Argument decoding, shape checks and bindings of the attention handlers, identical on CPU and CUDA.
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

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "jgo/args.h"
#include "jgo/attention.h"

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

namespace detail {
inline bool HasShape(const ffi::AnyBuffer& b, std::initializer_list<int64_t> shape) {
  auto d = b.dimensions();
  if (d.size() != shape.size()) return false;
  size_t i = 0;
  for (int64_t s : shape) {
    if (d[i++] != s) return false;
  }
  return true;
}
inline std::string ShapeOf(const ffi::AnyBuffer& b) {
  std::string s = "[";
  auto d = b.dimensions();
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}
inline ffi::Error Expect(const char* fn, const char* name, const ffi::AnyBuffer& b,
                         std::initializer_list<int64_t> shape) {
  if (HasShape(b, shape)) return ffi::Error::Success();
  std::string want = "[";
  size_t i = 0;
  for (int64_t s : shape) want += (i++ ? ", " : "") + std::to_string(s);
  return InvalidArgument(std::string(fn) + ": " + name + " must be " + want + "]; got " + ShapeOf(b));
}
}  // namespace detail

// Checks a result buffer's dtype (`dtype`: the storage or the score dtype) and shape.
inline ffi::Error CheckResult(const char* fn, const char* name, const ffi::AnyBuffer& b, ffi::DataType dtype,
                              std::initializer_list<int64_t> shape) {
  if (b.element_type() != dtype) return InvalidArgument(std::string(fn) + ": " + name + " has the wrong dtype");
  return detail::Expect(fn, name, b, shape);
}

// The dropout operand and attributes: key uint32[2] (or [0]: no dropout), 0 <= threshold < 2^32,
// scale >= 1. The key's address is kept, not its words (device memory for the CUDA handlers).
inline ffi::ErrorOr<Dropout> CheckDropout(const char* fn, const ffi::AnyBuffer& key, int64_t threshold,
                                          double scale) {
  if (key.element_type() != ffi::DataType::U32 || (key.element_count() != 0 && key.element_count() != 2))
    return Fail(std::string(fn) + ": dropout_key must be uint32[2], or uint32[0] for no dropout");
  if (threshold < 0 || threshold > 0xFFFFFFFFll || !(scale >= 1.0) || !std::isfinite(scale))
    return Fail(std::string(fn) + ": dropout_threshold must lie in [0, 2^32) and dropout_scale be finite and >= 1; "
                "got " +
                std::to_string(threshold) + " and " + std::to_string(scale));
  Dropout d;
  if (key.element_count() == 2) d.key = static_cast<const uint32_t*>(key.untyped_data());
  d.threshold = static_cast<uint32_t>(threshold);
  d.scale = scale;
  return d;
}

// Sets `args.drop` from the dropout operand and attributes (see CheckDropout).
template <typename Args>
ffi::Error SetDropout(const char* fn, Args& args, const ffi::AnyBuffer& key, int64_t threshold, double scale) {
  auto d = CheckDropout(fn, key, threshold, scale);
  if (d.has_error()) return d.error();
  args.drop = *d;
  return ffi::Error::Success();
}

// The checks common to the three handlers. `by_src` selects the CSR (rows = sources,
// neighbours = destinations) instead of the CSC.
inline ffi::ErrorOr<GatArgs> CheckGatCommon(const char* fn, const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& nbr,
                                            const ffi::AnyBuffer& eid, const ffi::AnyBuffer& x,
                                            const ffi::AnyBuffer& s_src, const ffi::AnyBuffer& s_edge,
                                            int64_t n_dst, bool by_src, double slope, bool has_edge) {
  GatArgs a;
  const auto it = offsets.element_type();
  if (!IsIndexType(it) || nbr.element_type() != it || eid.element_type() != it)
    return Fail(std::string(fn) + ": offsets, neighbours and edge ids must share an int32/int64 dtype");
  a.storage = x.element_type();
  a.score = s_src.element_type();
  if (!StorageFits(a.storage, a.score) || s_edge.element_type() != a.score)
    return Fail(std::string(fn) + ": scores must be float32/float64 and features of their dtype, or bfloat16/float16 "
                "features with float32 scores");
  auto xd = x.dimensions();
  if (xd.size() != 3) return Fail(std::string(fn) + ": x must be [n_src, H, C]; got " + detail::ShapeOf(x));
  a.n_src = xd[0];
  a.heads = xd[1];
  a.dim = xd[2];
  a.n_dst = n_dst;
  if (offsets.element_count() < 1) return Fail(std::string(fn) + ": offsets must have n_rows + 1 entries");
  a.n_rows = static_cast<int64_t>(offsets.element_count()) - 1;
  a.n_edges = static_cast<int64_t>(nbr.element_count());
  if (static_cast<int64_t>(eid.element_count()) != a.n_edges)
    return Fail(std::string(fn) + ": neighbours and edge ids differ in length");
  if (a.n_rows != (by_src ? a.n_src : a.n_dst))
    return Fail(std::string(fn) + ": offsets have " + std::to_string(a.n_rows + 1) + " entries for " +
                std::to_string(by_src ? a.n_src : a.n_dst) + (by_src ? " sources" : " destinations"));
  a.nbr_bound = by_src ? a.n_dst : a.n_src;
  a.has_edge = has_edge;
  a.slope = slope;
  if (auto e = detail::Expect(fn, "s_src", s_src, {a.n_src, a.heads}); e.failure()) return ffi::Unexpected(e);
  if (has_edge) {
    if (auto e = detail::Expect(fn, "s_edge", s_edge, {a.n_edges, a.heads}); e.failure()) return ffi::Unexpected(e);
  }
  return a;
}

inline ffi::ErrorOr<GatArgs> CheckGatFwd(const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& nbr,
                                         const ffi::AnyBuffer& eid, const ffi::AnyBuffer& x,
                                         const ffi::AnyBuffer& s_src, const ffi::AnyBuffer& s_dst,
                                         const ffi::AnyBuffer& s_edge, const ffi::AnyBuffer& out,
                                         const ffi::AnyBuffer& lse, double slope, bool has_edge) {
  const char* fn = "gat_fwd";
  const int64_t n_dst = static_cast<int64_t>(offsets.element_count()) - 1;
  auto a = CheckGatCommon(fn, offsets, nbr, eid, x, s_src, s_edge, n_dst, false, slope, has_edge);
  if (a.has_error()) return a;
  if (s_dst.element_type() != a->score || lse.element_type() != a->score || out.element_type() != a->storage)
    return Fail(std::string(fn) + ": s_dst and lse must have the dtype of s_src, out that of x");
  if (auto e = detail::Expect(fn, "s_dst", s_dst, {a->n_dst, a->heads}); e.failure()) return ffi::Unexpected(e);
  if (auto e = detail::Expect(fn, "out", out, {a->n_dst, a->heads, a->dim}); e.failure()) return ffi::Unexpected(e);
  if (auto e = detail::Expect(fn, "lse", lse, {a->n_dst, a->heads}); e.failure()) return ffi::Unexpected(e);
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
  const char* fn = by_src ? "gat_bwd_src" : "gat_bwd_dst";
  auto dd = dst_info.dimensions();
  if (dd.size() != 3) return Fail(std::string(fn) + ": dst_info must be [n_dst, 3, H]; got " + detail::ShapeOf(dst_info));
  auto a = CheckGatCommon(fn, offsets, nbr, eid, x, s_src, s_edge, dd[0], by_src, slope, has_edge);
  if (a.has_error()) return a;
  const auto a_type = by_src ? a->storage : a->score;  // grad_x, or grad_s_dst
  if (dst_info.element_type() != a->score || grad.element_type() != a->storage || out_a.element_type() != a_type ||
      out_b.element_type() != a->score)
    return Fail(std::string(fn) + ": dst_info and the score gradients must have the dtype of s_src, grad and "
                "grad_x that of x");
  if (auto e = detail::Expect(fn, "dst_info", dst_info, {a->n_dst, DstInfo::kCount, a->heads}); e.failure())
    return ffi::Unexpected(e);
  if (auto e = detail::Expect(fn, "grad", grad, {a->n_dst, a->heads, a->dim}); e.failure()) return ffi::Unexpected(e);
  if (by_src) {
    if (auto e = detail::Expect(fn, "grad_x", out_a, {a->n_src, a->heads, a->dim}); e.failure())
      return ffi::Unexpected(e);
    if (auto e = detail::Expect(fn, "grad_s_src", out_b, {a->n_src, a->heads}); e.failure())
      return ffi::Unexpected(e);
  } else {
    if (auto e = detail::Expect(fn, "grad_s_dst", out_a, {a->n_dst, a->heads}); e.failure())
      return ffi::Unexpected(e);
    if (has_edge) {
      if (auto e = detail::Expect(fn, "grad_s_edge", out_b, {a->n_edges, a->heads}); e.failure())
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
