// Chemprop's directed bond message (agg_dmpnn): the per-row math, the argument checks and the
// bindings shared by the CPU and CUDA handlers (cpu/dmpnn.cc, cuda/dmpnn.cu).
//
// Edges are directed bonds e = (v -> w) of a square graph (n_src == n_dst), h [E, D] in input
// edge order, rev [E] the input-order id of each edge's reverse (-1: none). Forward:
//   S[v] = sum_{e' into v} h[e']                  (the CSC walk of v)
//   m[e] = S[v] - h[rev e]   (= S[v] if rev e = -1)   for every e out of v (the CSR walk of v)
//   out[e] = m[e], or [m[e] | h[e]] with concat_own
// Backward with G = d out (its m block G_m = G[:, :D]), for rev an involution on its defined
// entries (rev[rev[e]] == e wherever rev[e] != -1, so that rev^-1 = rev):
//   T[u] = sum_{e out of u} G_m[e]                (the CSR walk of u)
//   grad_h[x] = (T[u] - G_m[rev x]) (+ G[x, D:2D])   for every x into u (the CSC walk of u)
// Both are one pass, the backward being the forward on the reverse graph: per node, the sum over
// one grouping stays in registers (CUDA) or a row buffer (CPU) and is written to the edges of the
// other grouping, so no [n, D] buffer and no atomics. S - h[rev e] is formed after the whole sum,
// as the reference does (inf - inf = NaN where an infinite h[e'] is also the subtracted reverse).
//
// jgo_dmpnn_fwd  (csc_offsets, csc_eid, csr_offsets, csr_eid, rev [E], h [E, D]) -> out [E, D | 2D]
// jgo_dmpnn_bwd  (csr_offsets, csr_eid, csc_offsets, csc_eid, rev [E], G [E, D | 2D]) -> grad_h [E, D]
// Attribute: concat_own (bool). The first grouping is summed ("in"), the second written ("out").
//
// Index checks: the CPU kernels reject malformed groupings and a rev_edge_ids outside [-1, E) or
// not an involution (an error naming rev_edge_ids). The CUDA kernels clamp offsets and skip edge
// ids out of range; an edge whose rev entry is out of range or breaks the involution gets a NaN
// row (its m block, or its gradient), so an invalid rev never passes silently.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "jgo/args.h"

namespace jgo {

struct DmpnnArgs {
  int64_t n_nodes, n_edges, dim;
  int64_t in_len, out_len;  // row lengths of the read (h or G) and written (out or grad_h) arrays
  bool concat_own;
};

enum class DmpnnPass { kFwd, kBwd };

// Whether edge e's reverse entry r is valid: -1, or in range with rev[r] == e.
template <typename I>
JGO_HD bool DmpnnRevValid(const I* rev, int64_t n_edges, int64_t e) {
  const int64_t r = rev[e];
  if (r == -1) return true;
  return r >= 0 && r < n_edges && static_cast<int64_t>(rev[r]) == e;
}

// One element of a written row: the node's sum minus the reverse edge's element (none: -1).
template <typename T>
JGO_HD T DmpnnMessage(T sum, T reverse, bool has_reverse) {
  return has_reverse ? sum - reverse : sum;
}

template <typename T>
JGO_HD T DmpnnPoison() {
#ifdef __CUDACC__
  return static_cast<T>(NAN);
#else
  return std::numeric_limits<T>::quiet_NaN();
#endif
}

inline ffi::ErrorOr<DmpnnArgs> CheckDmpnn(DmpnnPass pass, const ffi::AnyBuffer& in_offsets,
                                          const ffi::AnyBuffer& in_eid, const ffi::AnyBuffer& out_offsets,
                                          const ffi::AnyBuffer& out_eid, const ffi::AnyBuffer& rev,
                                          const ffi::AnyBuffer& x, const ffi::AnyBuffer& y, bool concat_own) {
  const std::string fn = pass == DmpnnPass::kFwd ? "jgo_dmpnn_fwd" : "jgo_dmpnn_bwd";
  const auto it = in_offsets.element_type();
  if (!IsIndexType(it) || in_eid.element_type() != it || out_offsets.element_type() != it ||
      out_eid.element_type() != it || rev.element_type() != it)
    return Fail(fn + ": offsets, edge ids and rev_edge_ids must share an int32/int64 dtype");
  const auto ft = x.element_type();
  if (!IsFloatType(ft) || y.element_type() != ft) return Fail(fn + ": features must share a float32/float64 dtype");
  if (in_offsets.element_count() < 1 || in_offsets.element_count() != out_offsets.element_count())
    return Fail(fn + ": both groupings need n_nodes + 1 offsets (a square graph); got " +
                std::to_string(in_offsets.element_count()) + " and " + std::to_string(out_offsets.element_count()));
  DmpnnArgs a;
  a.n_nodes = static_cast<int64_t>(in_offsets.element_count()) - 1;
  a.n_edges = static_cast<int64_t>(in_eid.element_count());
  a.concat_own = concat_own;
  if (static_cast<int64_t>(out_eid.element_count()) != a.n_edges ||
      static_cast<int64_t>(rev.element_count()) != a.n_edges)
    return Fail(fn + ": edge ids and rev_edge_ids differ in length");
  const auto& h_like = pass == DmpnnPass::kFwd ? x : y;  // [E, D]
  if (h_like.dimensions().size() != 2 || h_like.dimensions()[0] != a.n_edges)
    return Fail(fn + ": " + (pass == DmpnnPass::kFwd ? "h" : "grad_h") + " must be [n_edges, D]; got " +
                ShapeOf(h_like));
  a.dim = h_like.dimensions()[1];
  const int64_t wide = concat_own ? 2 * a.dim : a.dim;
  const auto& g_like = pass == DmpnnPass::kFwd ? y : x;  // [E, D | 2D]
  if (auto e = CheckShape(fn.c_str(), pass == DmpnnPass::kFwd ? "out" : "G", g_like, {a.n_edges, wide});
      e.failure())
    return ffi::Unexpected(e);
  a.in_len = x.dimensions()[1];
  a.out_len = y.dimensions()[1];
  return a;
}

template <typename... Ctx>
auto BindDmpnn() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // offsets of the summed grouping (fwd: CSC, bwd: CSR)
      .template Arg<ffi::AnyBuffer>()  // its edge ids
      .template Arg<ffi::AnyBuffer>()  // offsets of the written grouping (fwd: CSR, bwd: CSC)
      .template Arg<ffi::AnyBuffer>()  // its edge ids
      .template Arg<ffi::AnyBuffer>()  // rev [E]
      .template Arg<ffi::AnyBuffer>()  // h [E, D] (fwd) or G [E, D | 2D] (bwd)
      .template Ret<ffi::AnyBuffer>()  // out [E, D | 2D] (fwd) or grad_h [E, D] (bwd)
      .template Attr<bool>("concat_own")
      .template Attr<bool>("checked");  // the graph's values were checked (jgo/args.h)
}

}  // namespace jgo
