// RGCN's relational aggregation (agg_hg_basis): the per-edge math, the argument checks and the
// bindings shared by the CPU and CUDA handlers (cpu/hg_basis.cc, cuda/hg_basis.cu).
//
// Edge e = (j -> i) of type t = types[e] in [0, R), weight w_e (the per-relation mean's
// 1 / |{e' into i : types[e'] = t}|, or 1), source row x_j [D]:
//   with comp [R, B]: out_i[b, :] += w_e comp[t, b] x_j        (K = B blocks of D)
//   without comp:     out_i[t, :] += w_e x_j                   (K = R blocks of D; no one-hot comp)
//   concat_own:       out_i[K, :]  = own_i                     (the destination's own features, last)
// Backward with G_i = d loss / d out_i ([K + own, D]):
//   grad_x_j = sum_{e out of j} w_e sum_b comp[t, b] G_i[b]    (without comp: w_e G_i[t])
//   grad_comp[t, b] = sum_e w_e <G_i[b], x_j>
// (the own block's gradient is G_i[K], a slice taken in Python).
//
// jgo_hg_basis_norm    (csc_offsets, csc_src, csc_eid, types [E]) -> w [E]
// jgo_hg_basis_fwd     (csc_offsets, csc_src, csc_eid, x [Ns,D], types [E], comp [R,B] | [0], w [E] | [0],
//                       own [Nd,D] | [0]) -> out [Nd, K*D (+ D)]
// jgo_hg_basis_bwd_src (csr_offsets, csr_dst, csr_eid, x, types, comp, w, G [Nd, K*D (+ D)])
//                      -> grad_x [Ns,D], grad_comp [R,B] | [0]
// Attributes: n_edge_types (int64 R), has_comp, has_norm, concat_own (bool; norm: none). types share
// the index dtype of the graph arrays; edge-valued arrays are in input edge order.
//
// Index values: the CPU handlers reject an edge type outside [0, R) (INVALID_ARGUMENT naming
// edge_types, the edge and the type); the CUDA handlers skip such an edge (it contributes nothing,
// its w is 0), never reading or writing out of bounds.
#pragma once

#include <cstdint>
#include <string>

#include "jgo/args.h"

namespace jgo {

struct HgBasisArgs {
  int64_t n_src, n_dst, n_edges, dim, n_types, n_bases;
  int64_t blocks;     // K: n_bases with comp, n_types without
  int64_t width;      // columns of out / G: K * dim (+ dim with concat_own)
  int64_t n_rows;     // rows of the walked structure (n_dst for the CSC, n_src for the CSR)
  int64_t nbr_bound;  // neighbour ids lie in [0, nbr_bound)
  bool has_comp, has_norm, concat_own;
};

// The coefficient of basis b for an edge of type t with weight w: w comp[t, b].
template <typename T>
JGO_HD T HgBasisCoef(const T* comp, int64_t n_bases, int64_t t, int64_t b, T w) {
  return w * comp[t * n_bases + b];
}

// The normalisation weight of an edge whose destination has `count` in-edges of its type.
template <typename T>
JGO_HD T HgBasisNorm(int64_t count) {
  return T(1) / T(count);
}

enum class HgBasisPass { kNorm, kFwd, kBwdSrc };

inline const char* HgBasisName(HgBasisPass pass) {
  return pass == HgBasisPass::kNorm  ? "jgo_hg_basis_norm"
         : pass == HgBasisPass::kFwd ? "jgo_hg_basis_fwd"
                                     : "jgo_hg_basis_bwd_src";
}

// The index checks of the structure and the shapes of the operands (everything but the results).
// `x`, `comp`, `w`, `own` and `G` are null where the pass takes none.
inline ffi::ErrorOr<HgBasisArgs> CheckHgBasis(HgBasisPass pass, const ffi::AnyBuffer& offsets,
                                              const ffi::AnyBuffer& nbr, const ffi::AnyBuffer& eid,
                                              const ffi::AnyBuffer* x, const ffi::AnyBuffer& types,
                                              const ffi::AnyBuffer* comp, const ffi::AnyBuffer* w,
                                              const ffi::AnyBuffer* own, const ffi::AnyBuffer* G, int64_t n_types,
                                              bool has_comp, bool has_norm, bool concat_own) {
  const char* fn = HgBasisName(pass);
  const std::string name(fn);
  HgBasisArgs a{};
  auto view = CheckGraphView(name, offsets, nbr, eid);
  if (view.has_error()) return ffi::Unexpected(view.error());
  if (types.element_type() != view->index_type)
    return Fail(name + ": edge types must have the index arrays' int32/int64 dtype");
  if (n_types < 1) return Fail(name + ": n_edge_types must be >= 1; got " + std::to_string(n_types));
  a.n_rows = view->n_rows;
  a.n_edges = view->n_edges;
  a.n_types = n_types;
  a.has_comp = has_comp;
  a.has_norm = has_norm;
  a.concat_own = concat_own;
  if (auto e = CheckShape(fn, "edge_types", types, {a.n_edges}); e.failure()) return ffi::Unexpected(e);
  if (pass == HgBasisPass::kNorm) {
    a.n_dst = a.n_rows;
    a.nbr_bound = INT64_MAX;
    return a;
  }
  const auto ft = x->element_type();
  if (!IsFloatType(ft) || comp->element_type() != ft || w->element_type() != ft ||
      (own && own->element_type() != ft) || (G && G->element_type() != ft))
    return Fail(name + ": float operands must share a float32/float64 dtype");
  if (x->dimensions().size() != 2) return Fail(name + ": x must be [n_src, D]; got " + ShapeOf(*x));
  a.n_src = x->dimensions()[0];
  a.dim = x->dimensions()[1];
  if (has_comp) {
    if (comp->dimensions().size() != 2 || comp->dimensions()[0] != n_types || comp->dimensions()[1] < 1)
      return Fail(name + ": comp must be [n_edge_types=" + std::to_string(n_types) + ", n_bases >= 1]; got " +
                  ShapeOf(*comp));
    a.n_bases = comp->dimensions()[1];
  } else {
    a.n_bases = 0;
  }
  a.blocks = has_comp ? a.n_bases : n_types;
  a.width = (a.blocks + (concat_own ? 1 : 0)) * a.dim;
  if (has_norm) {
    if (auto e = CheckShape(fn, "w", *w, {a.n_edges}); e.failure()) return ffi::Unexpected(e);
  }
  if (pass == HgBasisPass::kFwd) {
    a.n_dst = a.n_rows;
    a.nbr_bound = a.n_src;
    if (concat_own) {
      if (auto e = CheckShape(fn, "own", *own, {a.n_dst, a.dim}); e.failure()) return ffi::Unexpected(e);
    }
    return a;
  }
  if (G->dimensions().size() != 2 || G->dimensions()[1] != a.width)
    return Fail(name + ": G must be [n_dst, " + std::to_string(a.width) + "]; got " + ShapeOf(*G));
  a.n_dst = G->dimensions()[0];
  if (a.n_rows != a.n_src)
    return Fail(name + ": offsets have " + std::to_string(a.n_rows + 1) + " entries for " + std::to_string(a.n_src) +
                " sources");
  a.nbr_bound = a.n_dst;
  return a;
}

template <typename... Ctx>
auto BindHgBasisNorm() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csc offsets
      .template Arg<ffi::AnyBuffer>()  // csc sources
      .template Arg<ffi::AnyBuffer>()  // csc edge ids
      .template Arg<ffi::AnyBuffer>()  // edge types [E]
      .template Ret<ffi::AnyBuffer>()  // w [E]
      .template Attr<int64_t>("n_edge_types");
}

template <typename... Ctx>
auto BindHgBasisFwd() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csc offsets
      .template Arg<ffi::AnyBuffer>()  // csc sources
      .template Arg<ffi::AnyBuffer>()  // csc edge ids
      .template Arg<ffi::AnyBuffer>()  // x [n_src, D]
      .template Arg<ffi::AnyBuffer>()  // edge types [E]
      .template Arg<ffi::AnyBuffer>()  // comp [R, B] or [0]
      .template Arg<ffi::AnyBuffer>()  // w [E] or [0]
      .template Arg<ffi::AnyBuffer>()  // own [n_dst, D] or [0]
      .template Ret<ffi::AnyBuffer>()  // out [n_dst, K*D (+D)]
      .template Attr<int64_t>("n_edge_types")
      .template Attr<bool>("has_comp")
      .template Attr<bool>("has_norm")
      .template Attr<bool>("concat_own");
}

template <typename... Ctx>
auto BindHgBasisBwdSrc() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // csr offsets
      .template Arg<ffi::AnyBuffer>()  // csr destinations
      .template Arg<ffi::AnyBuffer>()  // csr edge ids
      .template Arg<ffi::AnyBuffer>()  // x [n_src, D]
      .template Arg<ffi::AnyBuffer>()  // edge types [E]
      .template Arg<ffi::AnyBuffer>()  // comp [R, B] or [0]
      .template Arg<ffi::AnyBuffer>()  // w [E] or [0]
      .template Arg<ffi::AnyBuffer>()  // G [n_dst, K*D (+D)]
      .template Ret<ffi::AnyBuffer>()  // grad_x [n_src, D]
      .template Ret<ffi::AnyBuffer>()  // grad_comp [R, B] or [0]
      .template Attr<int64_t>("n_edge_types")
      .template Attr<bool>("has_comp")
      .template Attr<bool>("has_norm")
      .template Attr<bool>("concat_own");
}

inline ffi::Error CheckHgBasisNormResult(const HgBasisArgs& a, const ffi::AnyBuffer& w) {
  if (!IsFloatType(w.element_type())) return InvalidArgument("jgo_hg_basis_norm: w must be float32/float64");
  return CheckShape("jgo_hg_basis_norm", "w", w, {a.n_edges});
}

inline ffi::Error CheckHgBasisFwdResult(const HgBasisArgs& a, const ffi::AnyBuffer& out, ffi::DataType ft) {
  return CheckResult("jgo_hg_basis_fwd", "out", out, ft, {a.n_dst, a.width});
}

inline ffi::Error CheckHgBasisBwdSrcResults(const HgBasisArgs& a, const ffi::AnyBuffer& grad_x,
                                            const ffi::AnyBuffer& grad_comp, ffi::DataType ft) {
  if (auto e = CheckResult("jgo_hg_basis_bwd_src", "grad_x", grad_x, ft, {a.n_src, a.dim}); e.failure()) return e;
  if (a.has_comp) return CheckResult("jgo_hg_basis_bwd_src", "grad_comp", grad_comp, ft, {a.n_types, a.n_bases});
  return CheckResult("jgo_hg_basis_bwd_src", "grad_comp", grad_comp, ft, {0});
}

}  // namespace jgo
