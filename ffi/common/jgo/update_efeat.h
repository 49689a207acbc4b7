// The MeshGraphNet / GraphCast edge-update input (update_efeat), shared by cpu/update_efeat.cc and
// cuda/update_efeat.cu: the per-edge math, the argument checks both platforms run, the bindings.
//
// Edge e = (src[e] -> dst[e]) in input edge order; each part may be absent:
//   concat: out[e] = [edge_feat[e] | x_src[src[e]] | x_dst[dst[e]]]         [E, Fe + Fs + Fd]
//   sum:    out[e] =  edge_feat[e] + x_src[src[e]] + x_dst[dst[e]]           [E, F], summed left to right
// Backward, with G = d loss / d out and each part's column block col (concat: its offset; sum: 0):
//   grad_edge_feat[e] = G[e, col : col + Fe] (0 at the padding edges), and, without atomics,
//   grad_x_src[u] = sum over the out-edges e of u of G[e, col : col + Fs]   (reverse CSR)
//   grad_x_dst[v] = sum over the in-edges e of v of G[e, col : col + Fd]    (CSC)
//
// jgo_update_efeat_fwd      (src [E], dst [E], edge_feat [E,Fe] | [0], x_src [n_src,Fs] | [0],
//                            x_dst [n_dst,Fd] | [0]) -> out [E,F]
//                            attributes: sum, has_edge, has_src, has_dst (bool)
// jgo_update_efeat_bwd_src  (csr_offsets [n_src+1], csr_eid [E], G [E,F]) -> grad_x_src [n_src,Fs]
// jgo_update_efeat_bwd_dst  (csc_offsets [n_dst+1], csc_eid [E], G [E,F]) -> grad_x_dst [n_dst,Fd]
// jgo_update_efeat_bwd_edge (csc_offsets [n_dst+1], G [E,F]) -> grad_edge_feat [E,Fe]
//                            attribute (all three): col (int64), the first column of the part's block in G
// The edge pass is a kernel, not a slice XLA would fuse with G's producer: such a fusion reads the
// forward's output again, keeps it alive and so makes XLA write G to a fresh buffer instead of over
// the output (measured: 150 ms of page faults for a 540 MB G on 2 cores).
// An absent part is an empty [0] array and its has_ flag false; src (dst) is read only with x_src
// (x_dst), and then every id must lie in [0, rows of x_src (x_dst)): the CPU kernels reject others,
// the CUDA kernels write 0 for the part of such an edge (they never read out of bounds).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "jgo/args.h"

namespace jgo {

// Bits of the parts present, in output order.
enum EfeatPart : int { kEfeatEdge = 1, kEfeatSrc = 2, kEfeatDst = 4 };

struct EfeatArgs {
  int64_t n_edges, f_edge, f_src, f_dst, width;  // width: the output row length
  int64_t n_rows;                                 // rows of the CSC whose offsets end where the real edges do
  int64_t n_src_rows, n_dst_rows;                 // rows of x_src / x_dst (0 when absent)
  int parts;                                      // EfeatPart bits
  bool sum;
  // The first output column of each part's block (all 0 when summing).
  JGO_HD int64_t col_src() const { return sum ? 0 : f_edge; }
  JGO_HD int64_t col_dst() const { return sum ? 0 : f_edge + f_src; }
};

// One output element of the sum mode: the present parts added left to right (edge, src, dst), as
// the reference does, so the first present part is not added to a 0 (which would turn -0 into +0).
template <int kParts, typename T>
JGO_HD T EfeatSum(const T* edge_row, const T* src_row, const T* dst_row, int64_t c) {
  if constexpr (kParts == kEfeatEdge) return edge_row[c];
  else if constexpr (kParts == kEfeatSrc) return src_row[c];
  else if constexpr (kParts == kEfeatDst) return dst_row[c];
  else if constexpr (kParts == (kEfeatEdge | kEfeatSrc)) return edge_row[c] + src_row[c];
  else if constexpr (kParts == (kEfeatEdge | kEfeatDst)) return edge_row[c] + dst_row[c];
  else if constexpr (kParts == (kEfeatSrc | kEfeatDst)) return src_row[c] + dst_row[c];
  else return (edge_row[c] + src_row[c]) + dst_row[c];
}

// The same from the values already read: the present parts' values in output order (edge, src, dst) in
// v[0..], added left to right.
template <int kParts, typename T>
JGO_HD T EfeatSumOf(const T (&v)[3]) {
  constexpr int kCount = ((kParts & kEfeatEdge) != 0) + ((kParts & kEfeatSrc) != 0) + ((kParts & kEfeatDst) != 0);
  if constexpr (kCount == 1) return v[0];
  else if constexpr (kCount == 2) return v[0] + v[1];
  else return (v[0] + v[1]) + v[2];
}

// Calls fn(std::integral_constant<int, parts>{}) for the parts present (1 .. 7).
template <typename Fn>
decltype(auto) DispatchEfeatParts(int parts, Fn&& fn) {
  switch (parts) {
    case 1: return fn(std::integral_constant<int, 1>{});
    case 2: return fn(std::integral_constant<int, 2>{});
    case 3: return fn(std::integral_constant<int, 3>{});
    case 4: return fn(std::integral_constant<int, 4>{});
    case 5: return fn(std::integral_constant<int, 5>{});
    case 6: return fn(std::integral_constant<int, 6>{});
    default: return fn(std::integral_constant<int, 7>{});
  }
}

// Checks the forward's operands and result.
inline ffi::ErrorOr<EfeatArgs> CheckEfeatFwd(const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& src,
                                             const ffi::AnyBuffer& dst,
                                             const ffi::AnyBuffer& edge_feat, const ffi::AnyBuffer& x_src,
                                             const ffi::AnyBuffer& x_dst, const ffi::AnyBuffer& out, bool sum,
                                             bool has_edge, bool has_src, bool has_dst) {
  const char* fn = "jgo_update_efeat_fwd";
  const std::string name(fn);
  EfeatArgs a{};
  a.sum = sum;
  a.parts = (has_edge ? kEfeatEdge : 0) | (has_src ? kEfeatSrc : 0) | (has_dst ? kEfeatDst : 0);
  if (a.parts == 0) return Fail(name + ": at least one of edge_feat, x_src, x_dst must be present");
  const auto it = src.element_type();
  if (!IsIndexType(it) || dst.element_type() != it || offsets.element_type() != it)
    return Fail(name + ": offsets, src and dst must share an int32/int64 dtype");
  if (offsets.dimensions().size() != 1 || offsets.element_count() < 1)
    return Fail(name + ": offsets must be [n_dst + 1]; got " + ShapeOf(offsets));
  a.n_rows = static_cast<int64_t>(offsets.element_count()) - 1;
  const auto ft = out.element_type();
  if (!IsFloatType(ft) || edge_feat.element_type() != ft || x_src.element_type() != ft ||
      x_dst.element_type() != ft)
    return Fail(name + ": float operands and the output must share a float32/float64 dtype");
  if (src.dimensions().size() != 1) return Fail(name + ": src must be [n_edges]; got " + ShapeOf(src));
  a.n_edges = src.dimensions()[0];
  if (auto e = CheckShape(fn, "dst", dst, {a.n_edges}); e.failure()) return ffi::Unexpected(e);
  const struct { bool has; const ffi::AnyBuffer* b; const char* what; int64_t* width; int64_t* rows; } ops[] = {
      {has_edge, &edge_feat, "edge_feat", &a.f_edge, nullptr},
      {has_src, &x_src, "x_src", &a.f_src, &a.n_src_rows},
      {has_dst, &x_dst, "x_dst", &a.f_dst, &a.n_dst_rows}};
  int64_t common = -1;
  for (const auto& o : ops) {
    if (!o.has) {
      if (o.b->element_count() != 0) return Fail(name + ": absent " + o.what + " must be an empty [0] array");
      continue;
    }
    if (o.b->dimensions().size() != 2) return Fail(name + ": " + o.what + " must be 2-D; got " + ShapeOf(*o.b));
    *o.width = o.b->dimensions()[1];
    if (o.rows) *o.rows = o.b->dimensions()[0];
    else if (o.b->dimensions()[0] != a.n_edges)
      return Fail(name + ": edge_feat must have n_edges=" + std::to_string(a.n_edges) + " rows; got " +
                  ShapeOf(*o.b));
    if (sum && common >= 0 && *o.width != common)
      return Fail(name + ": the summed parts must have one width; got " + std::to_string(common) + " and " +
                  std::to_string(*o.width));
    common = *o.width;
  }
  a.width = sum ? common : a.f_edge + a.f_src + a.f_dst;
  if (auto e = CheckShape(fn, "out", out, {a.n_edges, a.width}); e.failure()) return ffi::Unexpected(e);
  return a;
}

template <typename... Ctx>
auto BindEfeatFwd() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // CSC offsets [n_dst + 1]: the edges from offsets[n_dst] on are padding
      .template Arg<ffi::AnyBuffer>()  // src [E]
      .template Arg<ffi::AnyBuffer>()  // dst [E]
      .template Arg<ffi::AnyBuffer>()  // edge_feat [E, Fe] or [0]
      .template Arg<ffi::AnyBuffer>()  // x_src [n_src, Fs] or [0]
      .template Arg<ffi::AnyBuffer>()  // x_dst [n_dst, Fd] or [0]
      .template Ret<ffi::AnyBuffer>()  // out [E, F]
      .template Attr<bool>("sum")
      .template Attr<bool>("has_edge")
      .template Attr<bool>("has_src")
      .template Attr<bool>("has_dst");
}

// The backward passes: rows of the walked structure reduce a column block of G.
struct EfeatBwdArgs {
  int64_t n_rows, n_edges, g_width, col, width;
};

inline ffi::ErrorOr<EfeatBwdArgs> CheckEfeatBwd(const char* fn, const ffi::AnyBuffer& offsets,
                                                const ffi::AnyBuffer& eid, const ffi::AnyBuffer& G,
                                                const ffi::AnyBuffer& grad, int64_t col) {
  const std::string name(fn);
  EfeatBwdArgs a{};
  const auto it = offsets.element_type();
  if (!IsIndexType(it) || eid.element_type() != it) return Fail(name + ": offsets and edge ids must share an int32/int64 dtype");
  if (!IsFloatType(G.element_type()) || grad.element_type() != G.element_type())
    return Fail(name + ": G and the gradient must share a float32/float64 dtype");
  if (offsets.dimensions().size() != 1 || offsets.element_count() < 1)
    return Fail(name + ": offsets must be [n_rows + 1]; got " + ShapeOf(offsets));
  if (eid.dimensions().size() != 1) return Fail(name + ": edge ids must be [n_edges]; got " + ShapeOf(eid));
  a.n_rows = static_cast<int64_t>(offsets.element_count()) - 1;
  a.n_edges = eid.dimensions()[0];
  if (G.dimensions().size() != 2 || G.dimensions()[0] != a.n_edges)
    return Fail(name + ": G must be [n_edges=" + std::to_string(a.n_edges) + ", F]; got " + ShapeOf(G));
  a.g_width = G.dimensions()[1];
  if (grad.dimensions().size() != 2 || grad.dimensions()[0] != a.n_rows)
    return Fail(name + ": the gradient must be [n_rows=" + std::to_string(a.n_rows) + ", width]; got " +
                ShapeOf(grad));
  a.width = grad.dimensions()[1];
  a.col = col;
  if (col < 0 || col > a.g_width || a.width > a.g_width - col)
    return Fail(name + ": columns [" + std::to_string(col) + ", " + std::to_string(col + a.width) +
                ") do not fit in G's " + std::to_string(a.g_width));
  return a;
}

template <typename... Ctx>
auto BindEfeatBwd() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // offsets [n_rows + 1] (CSR for bwd_src, CSC for bwd_dst)
      .template Arg<ffi::AnyBuffer>()  // edge ids [E]
      .template Arg<ffi::AnyBuffer>()  // G [E, F]
      .template Ret<ffi::AnyBuffer>()  // grad [n_rows, width]
      .template Attr<int64_t>("col");
}

// The edge pass: grad[e] = G[e, col : col + width] for the real edges e < offsets[n_rows], 0 after.
inline ffi::ErrorOr<EfeatBwdArgs> CheckEfeatBwdEdge(const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& G,
                                                    const ffi::AnyBuffer& grad, int64_t col) {
  const std::string name("jgo_update_efeat_bwd_edge");
  EfeatBwdArgs a{};
  if (!IsIndexType(offsets.element_type())) return Fail(name + ": offsets must be int32/int64");
  if (!IsFloatType(G.element_type()) || grad.element_type() != G.element_type())
    return Fail(name + ": G and the gradient must share a float32/float64 dtype");
  if (offsets.dimensions().size() != 1 || offsets.element_count() < 1)
    return Fail(name + ": offsets must be [n_rows + 1]; got " + ShapeOf(offsets));
  a.n_rows = static_cast<int64_t>(offsets.element_count()) - 1;
  if (G.dimensions().size() != 2) return Fail(name + ": G must be [n_edges, F]; got " + ShapeOf(G));
  a.n_edges = G.dimensions()[0];
  a.g_width = G.dimensions()[1];
  if (grad.dimensions().size() != 2 || grad.dimensions()[0] != a.n_edges)
    return Fail(name + ": the gradient must be [n_edges=" + std::to_string(a.n_edges) + ", width]; got " +
                ShapeOf(grad));
  a.width = grad.dimensions()[1];
  a.col = col;
  if (col < 0 || col > a.g_width || a.width > a.g_width - col)
    return Fail(name + ": columns [" + std::to_string(col) + ", " + std::to_string(col + a.width) +
                ") do not fit in G's " + std::to_string(a.g_width));
  return a;
}

template <typename... Ctx>
auto BindEfeatBwdEdge() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // CSC offsets [n_dst + 1]: the edges from offsets[n_dst] on are padding
      .template Arg<ffi::AnyBuffer>()  // G [E, F]
      .template Ret<ffi::AnyBuffer>()  // grad_edge_feat [E, Fe]
      .template Attr<int64_t>("col");
}

}  // namespace jgo
