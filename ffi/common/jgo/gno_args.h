// Argument decoding, shape checks and bindings of the gno_conv handlers, identical on CPU and CUDA.
//
// jgo_gno_fwd      (csc_offsets, csc_src, csc_eid, f [Ns,Cin], dx [E,d], U [H,d], b_u [H], Vb, w [E] | [0])
//                  -> out [Nd,Cout]                    Vb: matrix [Cin, H+1, Cout], diagonal [C, H+1]
// jgo_gno_bwd_src  (csr_offsets, csr_dst, csr_eid, f, dx, U, b_u, Vb, w, G [Nd,Cout])
//                  -> grad_f [Ns,Cin], grad_Vb        Vb: matrix [Cout, H+1, Cin]; grad_Vb matrix [Cin, Cout, H+1],
//                                                       diagonal [C, H+1]
// jgo_gno_bwd_dst  (csc_offsets, csc_src, csc_eid, f, dx, U, b_u, Vb, w, G)
//                  -> grad_dx [E,d], grad_U [H,d], grad_b_u [H], grad_w [E] | [0]
//                                                      Vb: matrix [Cout, Cin, H+1], diagonal [C, H+1]
// Attributes: diagonal (bool), has_weight (bool). Vb = [V | b_v] in the layout each pass reads
// contiguously (the Python lowering transposes it). Edge-valued arrays are in input edge order.
#pragma once

#include <cstdint>
#include <string>

#include "jgo/args.h"

namespace jgo {

struct GnoArgs {
  int64_t n_src, n_dst, n_edges, c_in, c_out, dim, hidden;
  int64_t n_rows;     // rows of the walked structure (n_dst for the CSC, n_src for the CSR)
  int64_t nbr_bound;  // neighbour ids lie in [0, nbr_bound)
  bool diagonal, has_weight;
  JGO_HD int64_t units() const { return hidden + 1; }  // hidden units plus the constant (bias) unit
};

enum class GnoPass { kFwd, kBwdSrc, kBwdDst };

// Checks everything but the results. `n_dst` comes from the offsets (CSC) or from G (CSR).
inline ffi::ErrorOr<GnoArgs> CheckGno(GnoPass pass, const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& nbr,
                                      const ffi::AnyBuffer& eid, const ffi::AnyBuffer& f, const ffi::AnyBuffer& dx,
                                      const ffi::AnyBuffer& U, const ffi::AnyBuffer& b_u, const ffi::AnyBuffer& Vb,
                                      const ffi::AnyBuffer& w, const ffi::AnyBuffer* G, int64_t c_out_of_out,
                                      bool diagonal, bool has_weight) {
  const char* fn = pass == GnoPass::kFwd      ? "jgo_gno_fwd"
                   : pass == GnoPass::kBwdSrc ? "jgo_gno_bwd_src"
                                              : "jgo_gno_bwd_dst";
  const std::string name(fn);
  GnoArgs a;
  auto view = CheckGraphView(name, offsets, nbr, eid);
  if (view.has_error()) return ffi::Unexpected(view.error());
  const auto ft = f.element_type();
  if (!IsFloatType(ft) || dx.element_type() != ft || U.element_type() != ft || b_u.element_type() != ft ||
      Vb.element_type() != ft || w.element_type() != ft || (G && G->element_type() != ft))
    return Fail(name + ": float operands must share a float32/float64 dtype");
  if (f.dimensions().size() != 2) return Fail(name + ": f must be [n_src, c_in]; got " + ShapeOf(f));
  if (dx.dimensions().size() != 2) return Fail(name + ": dx must be [n_edges, d]; got " + ShapeOf(dx));
  if (U.dimensions().size() != 2) return Fail(name + ": U must be [H, d]; got " + ShapeOf(U));
  a.n_src = f.dimensions()[0];
  a.c_in = f.dimensions()[1];
  a.n_edges = view->n_edges;
  a.dim = dx.dimensions()[1];
  a.hidden = U.dimensions()[0];
  a.n_rows = view->n_rows;
  a.diagonal = diagonal;
  a.has_weight = has_weight;
  if (G) {
    if (G->dimensions().size() != 2) return Fail(name + ": G must be [n_dst, c_out]; got " + ShapeOf(*G));
    a.n_dst = G->dimensions()[0];
    a.c_out = G->dimensions()[1];
  } else {
    a.n_dst = a.n_rows;
    a.c_out = c_out_of_out;
  }
  const bool by_src = pass == GnoPass::kBwdSrc;
  if (a.n_rows != (by_src ? a.n_src : a.n_dst))
    return Fail(name + ": offsets have " + std::to_string(a.n_rows + 1) + " entries for " +
                std::to_string(by_src ? a.n_src : a.n_dst) + (by_src ? " sources" : " destinations"));
  a.nbr_bound = by_src ? a.n_dst : a.n_src;
  if (diagonal && a.c_out != a.c_in)
    return Fail(name + ": the diagonal kernel needs c_out == c_in; got " + std::to_string(a.c_out) + " and " +
                std::to_string(a.c_in));
  if (auto e = CheckShape(fn, "dx", dx, {a.n_edges, a.dim}); e.failure()) return ffi::Unexpected(e);
  if (auto e = CheckShape(fn, "U", U, {a.hidden, a.dim}); e.failure()) return ffi::Unexpected(e);
  if (auto e = CheckShape(fn, "b_u", b_u, {a.hidden}); e.failure()) return ffi::Unexpected(e);
  if (has_weight) {
    if (auto e = CheckShape(fn, "w", w, {a.n_edges}); e.failure()) return ffi::Unexpected(e);
  }
  const int64_t P = a.units();
  ffi::Error e = ffi::Error::Success();
  if (diagonal) e = CheckShape(fn, "Vb", Vb, {a.c_in, P});
  else if (pass == GnoPass::kFwd) e = CheckShape(fn, "Vb", Vb, {a.c_in, P, a.c_out});
  else if (pass == GnoPass::kBwdSrc) e = CheckShape(fn, "Vb", Vb, {a.c_out, P, a.c_in});
  else e = CheckShape(fn, "Vb", Vb, {a.c_out, a.c_in, P});
  if (e.failure()) return ffi::Unexpected(e);
  return a;
}

// Result shapes of the three passes.
inline ffi::Error CheckGnoFwdResult(const GnoArgs& a, const ffi::AnyBuffer& out, ffi::DataType ft) {
  if (out.element_type() != ft) return InvalidArgument("jgo_gno_fwd: out must have the dtype of f");
  return CheckShape("jgo_gno_fwd", "out", out, {a.n_dst, a.c_out});
}

template <typename... Ctx>
auto BindGnoFwd() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csc offsets
      .template Arg<ffi::AnyBuffer>()  // csc sources
      .template Arg<ffi::AnyBuffer>()  // csc edge ids
      .template Arg<ffi::AnyBuffer>()  // f [n_src, c_in]
      .template Arg<ffi::AnyBuffer>()  // dx [E, d]
      .template Arg<ffi::AnyBuffer>()  // U [H, d]
      .template Arg<ffi::AnyBuffer>()  // b_u [H]
      .template Arg<ffi::AnyBuffer>()  // Vb [c_in, H+1, c_out] or [c, H+1]
      .template Arg<ffi::AnyBuffer>()  // w [E] or [0]
      .template Ret<ffi::AnyBuffer>()  // out [n_dst, c_out]
      .template Attr<bool>("diagonal")
      .template Attr<bool>("has_weight");
}

inline ffi::Error CheckGnoBwdSrcResults(const GnoArgs& a, const ffi::AnyBuffer& grad_f, const ffi::AnyBuffer& grad_vb,
                                        ffi::DataType ft) {
  if (grad_f.element_type() != ft || grad_vb.element_type() != ft)
    return InvalidArgument("jgo_gno_bwd_src: results must have the dtype of f");
  if (auto e = CheckShape("jgo_gno_bwd_src", "grad_f", grad_f, {a.n_src, a.c_in}); e.failure()) return e;
  if (a.diagonal) return CheckShape("jgo_gno_bwd_src", "grad_Vb", grad_vb, {a.c_in, a.units()});
  return CheckShape("jgo_gno_bwd_src", "grad_Vb", grad_vb, {a.c_in, a.c_out, a.units()});
}

template <typename... Ctx>
auto BindGnoBwdSrc() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csr offsets
      .template Arg<ffi::AnyBuffer>()  // csr destinations
      .template Arg<ffi::AnyBuffer>()  // csr edge ids
      .template Arg<ffi::AnyBuffer>()  // f [n_src, c_in]
      .template Arg<ffi::AnyBuffer>()  // dx [E, d]
      .template Arg<ffi::AnyBuffer>()  // U [H, d]
      .template Arg<ffi::AnyBuffer>()  // b_u [H]
      .template Arg<ffi::AnyBuffer>()  // Vb [c_out, H+1, c_in] or [c, H+1]
      .template Arg<ffi::AnyBuffer>()  // w [E] or [0]
      .template Arg<ffi::AnyBuffer>()  // G [n_dst, c_out]
      .template Ret<ffi::AnyBuffer>()  // grad_f [n_src, c_in]
      .template Ret<ffi::AnyBuffer>()  // grad_Vb [c_in, c_out, H+1] or [c, H+1]
      .template Attr<bool>("diagonal")
      .template Attr<bool>("has_weight");
}

inline ffi::Error CheckGnoBwdDstResults(const GnoArgs& a, const ffi::AnyBuffer& grad_dx, const ffi::AnyBuffer& grad_u,
                                        const ffi::AnyBuffer& grad_bu, const ffi::AnyBuffer& grad_w,
                                        ffi::DataType ft) {
  if (grad_dx.element_type() != ft || grad_u.element_type() != ft || grad_bu.element_type() != ft ||
      grad_w.element_type() != ft)
    return InvalidArgument("jgo_gno_bwd_dst: results must have the dtype of f");
  const char* fn = "jgo_gno_bwd_dst";
  if (auto e = CheckShape(fn, "grad_dx", grad_dx, {a.n_edges, a.dim}); e.failure()) return e;
  if (auto e = CheckShape(fn, "grad_U", grad_u, {a.hidden, a.dim}); e.failure()) return e;
  if (auto e = CheckShape(fn, "grad_b_u", grad_bu, {a.hidden}); e.failure()) return e;
  if (a.has_weight) return CheckShape(fn, "grad_w", grad_w, {a.n_edges});
  return ffi::Error::Success();
}

template <typename... Ctx>
auto BindGnoBwdDst() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csc offsets
      .template Arg<ffi::AnyBuffer>()  // csc sources
      .template Arg<ffi::AnyBuffer>()  // csc edge ids
      .template Arg<ffi::AnyBuffer>()  // f [n_src, c_in]
      .template Arg<ffi::AnyBuffer>()  // dx [E, d]
      .template Arg<ffi::AnyBuffer>()  // U [H, d]
      .template Arg<ffi::AnyBuffer>()  // b_u [H]
      .template Arg<ffi::AnyBuffer>()  // Vb [c_out, c_in, H+1] or [c, H+1]
      .template Arg<ffi::AnyBuffer>()  // w [E] or [0]
      .template Arg<ffi::AnyBuffer>()  // G [n_dst, c_out]
      .template Ret<ffi::AnyBuffer>()  // grad_dx [E, d]
      .template Ret<ffi::AnyBuffer>()  // grad_U [H, d]
      .template Ret<ffi::AnyBuffer>()  // grad_b_u [H]
      .template Ret<ffi::AnyBuffer>()  // grad_w [E] or [0]
      .template Attr<bool>("diagonal")
      .template Attr<bool>("has_weight");
}

}  // namespace jgo
