// Argument decoding, validation and bindings shared by the CPU and CUDA handlers.
//
// Shapes and attributes are checked here, identically on both platforms; index *values*
// are checked by the CPU kernels (the CUDA kernels skip out-of-range indices instead, so
// they never read or write out of bounds).
//
// The `checked` attribute of the graph-walking targets says the graph's index values were checked when it
// was built (jaxgraphops.Graph carries the fact through jit): every id in range, the groupings permutations
// of the edges, the padding edges (positions offsets[n_rows]..E) numbered as their positions. The CUDA
// kernels then write every output row themselves instead of zero-filling the output first; they never read
// or write out of bounds either way. The CPU kernels check every index anyway.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "jgo/math.h"
#include "xla/ffi/api/ffi.h"

namespace jgo {
namespace ffi = xla::ffi;

inline ffi::Error InvalidArgument(const std::string& msg) {
  return ffi::Error::InvalidArgument("jaxgraphops: " + msg);
}
// The same error, as the failed value of an ffi::ErrorOr.
inline ffi::Unexpected<ffi::Error> Fail(const std::string& msg) { return ffi::Unexpected(InvalidArgument(msg)); }

namespace detail {
template <typename C, typename... Rest, typename B>
auto WithCtx(B&& b) {
  if constexpr (sizeof...(Rest) == 0) {
    return std::move(b).template Ctx<C>();
  } else {
    return WithCtx<Rest...>(std::move(b).template Ctx<C>());
  }
}
}  // namespace detail

// ffi::Ffi::Bind() with .Ctx<C>() applied for each C in order: the platform's context types (at
// least one), which the binding factories (Bind<Op><Ctx...>()) put before the operands.
template <typename... Ctx>
auto BindWith() {
  return detail::WithCtx<Ctx...>(ffi::Ffi::Bind());
}

// Calls fn(T{}, I{}) with T the float type (float/double) and I the index type (int32/int64) of
// the buffers, so a handler instantiates its typed body once per pair.
template <typename Fn>
ffi::Error DispatchTypes(ffi::DataType float_type, ffi::DataType index_type, Fn&& fn) {
  const bool f64 = float_type == ffi::DataType::F64, i64 = index_type == ffi::DataType::S64;
  if (f64 && i64) return fn(double{}, int64_t{});
  if (f64) return fn(double{}, int32_t{});
  if (i64) return fn(float{}, int64_t{});
  return fn(float{}, int32_t{});
}

inline bool IsIndexType(ffi::DataType t) { return t == ffi::DataType::S32 || t == ffi::DataType::S64; }
inline bool IsFloatType(ffi::DataType t) { return t == ffi::DataType::F32 || t == ffi::DataType::F64; }
inline bool IsHalfType(ffi::DataType t) { return t == ffi::DataType::BF16 || t == ffi::DataType::F16; }
// Features stored as `storage` with scores and accumulation in `score`: the same float32/float64
// type, or bfloat16/float16 storage with float32 scores (the CUDA kernels' mixed precision).
inline bool StorageFits(ffi::DataType storage, ffi::DataType score) {
  return IsFloatType(score) && (storage == score || (IsHalfType(storage) && score == ffi::DataType::F32));
}

inline int64_t Rows(const ffi::AnyBuffer& b) {
  auto d = b.dimensions();
  return d.size() == 0 ? 1 : d[0];
}
inline int64_t RowLength(const ffi::AnyBuffer& b) {
  const int64_t r = Rows(b);
  return r == 0 ? 0 : static_cast<int64_t>(b.element_count()) / r;
}

// The row length strides may reach: unbounded for an unused operand or one with no rows.
inline int64_t Reach(bool used, const ffi::AnyBuffer& b) {
  return (used && Rows(b) > 0) ? RowLength(b) : INT64_MAX;
}

// -- the checking vocabulary of every op header: shapes, dtypes, a graph view ---------------------------------
// Errors name the handler by its FFI target ("jgo_gat_fwd: x must be ..."), the same on every platform.

inline std::string ShapeOf(const ffi::AnyBuffer& b) {
  std::string s = "[";
  auto d = b.dimensions();
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

inline bool HasShape(const ffi::AnyBuffer& b, std::initializer_list<int64_t> shape) {
  auto d = b.dimensions();
  if (d.size() != shape.size()) return false;
  size_t i = 0;
  for (int64_t s : shape) {
    if (d[i++] != s) return false;
  }
  return true;
}

// `b` (the operand `name` of handler `fn`) must have exactly `shape`.
inline ffi::Error CheckShape(const std::string& fn, const char* name, const ffi::AnyBuffer& b,
                             std::initializer_list<int64_t> shape) {
  if (HasShape(b, shape)) return ffi::Error::Success();
  std::string want = "[";
  size_t i = 0;
  for (int64_t s : shape) want += (i++ ? ", " : "") + std::to_string(s);
  return InvalidArgument(fn + ": " + name + " must be " + want + "]; got " + ShapeOf(b));
}

// A result buffer's dtype and shape.
inline ffi::Error CheckResult(const std::string& fn, const char* name, const ffi::AnyBuffer& b, ffi::DataType dtype,
                              std::initializer_list<int64_t> shape) {
  if (b.element_type() != dtype) return InvalidArgument(fn + ": " + name + " has the wrong dtype");
  return CheckShape(fn, name, b, shape);
}

// The compressed structure a handler walks: offsets [n_rows + 1], and per entry a neighbour id and an edge id
// ([n_edges] each), all of one int32/int64 dtype (the CSC or the CSR view of a graph).
struct GraphView {
  ffi::DataType index_type;
  int64_t n_rows, n_edges;
};

inline ffi::ErrorOr<GraphView> CheckGraphView(const std::string& fn, const ffi::AnyBuffer& offsets,
                                              const ffi::AnyBuffer& nbr, const ffi::AnyBuffer& eid) {
  const auto it = offsets.element_type();
  if (!IsIndexType(it) || nbr.element_type() != it || eid.element_type() != it)
    return Fail(fn + ": offsets, neighbours and edge ids must share an int32/int64 dtype");
  if (offsets.element_count() < 1) return Fail(fn + ": offsets must have n_rows + 1 entries");
  const int64_t n_edges = static_cast<int64_t>(nbr.element_count());
  if (static_cast<int64_t>(eid.element_count()) != n_edges)
    return Fail(fn + ": neighbours and edge ids differ in length");
  return GraphView{it, static_cast<int64_t>(offsets.element_count()) - 1, n_edges};
}

// Sets `a.n_rows`, `a.n_edges` and `a.nbr_bound` from the walked view `v` of a graph of `a.n_src` sources and
// `a.n_dst` destinations: its rows are the sources (`by_src`, the CSR; neighbours are destinations) or the
// destinations (the CSC), which the offsets must count.
template <typename Args>
ffi::Error SetWalk(const std::string& fn, Args& a, const GraphView& v, bool by_src) {
  a.n_rows = v.n_rows;
  a.n_edges = v.n_edges;
  a.nbr_bound = by_src ? a.n_dst : a.n_src;
  const int64_t want = by_src ? a.n_src : a.n_dst;
  if (v.n_rows == want) return ffi::Error::Success();
  return InvalidArgument(fn + ": offsets have " + std::to_string(v.n_rows + 1) + " entries for " +
                         std::to_string(want) + (by_src ? " sources" : " destinations"));
}

// -- attributes -----------------------------------------------------------------------------------------------

inline ffi::ErrorOr<Dims3> ReadDims(ffi::Span<const int64_t> v) {
  if (v.size() != 3 || v[0] < 1 || v[1] < 1 || v[2] < 0) return Fail("dims must be 3 sizes");
  return Dims3{v[0], v[1], v[2]};
}
inline ffi::ErrorOr<Strides3> ReadStrides(ffi::Span<const int64_t> v, const Dims3& d, int64_t row_len,
                                          const char* name) {
  if (v.size() != 3 || v[0] < 0 || v[1] < 0 || v[2] < 0) return Fail(std::string(name) + " must be 3 strides");
  Strides3 s{v[0], v[1], v[2]};
  if (d.size() > 0) {
    const int64_t last = s.offset(d.d0 - 1, d.d1 - 1, d.d2 - 1);
    if (last >= row_len) {
      return Fail(std::string(name) + " reach element " + std::to_string(last) +
                             " of a row of length " + std::to_string(row_len));
    }
  }
  return s;
}

// What jgo_spmm and jgo_sddmm check alike: the graph view, their two operands and the output of one
// float32/float64 dtype (`operands` names them in the error), and the feature dims; sets `a.n_rows`, `a.n_edges`
// and `a.dims`. Returns the index dtype.
template <typename Args>
ffi::ErrorOr<ffi::DataType> CheckMessageOperands(const std::string& fn, Args& a, const ffi::AnyBuffer& offsets,
                                                 const ffi::AnyBuffer& nbr, const ffi::AnyBuffer& eid,
                                                 const ffi::AnyBuffer& x, const ffi::AnyBuffer& y,
                                                 const ffi::AnyBuffer& out, const char* operands,
                                                 ffi::Span<const int64_t> dims) {
  auto view = CheckGraphView(fn, offsets, nbr, eid);
  if (view.has_error()) return ffi::Unexpected(view.error());
  const auto ft = out.element_type();
  if (!IsFloatType(ft) || x.element_type() != ft || y.element_type() != ft)
    return Fail(fn + ": " + operands + " must share a float32/float64 dtype");
  a.n_rows = view->n_rows;
  a.n_edges = view->n_edges;
  auto d = ReadDims(dims);
  if (d.has_error()) return ffi::Unexpected(d.error());
  a.dims = *d;
  return view->index_type;
}

// The mask operand of jgo_spmm and jgo_sddmm: [n_dst, F] of the index dtype `it`; a mask by neighbour is read
// through the neighbour ids, which must then lie within its rows.
template <typename Args>
ffi::Error CheckMaskArg(const std::string& fn, Args& a, const ffi::AnyBuffer& mask_arg, ffi::DataType it) {
  if (a.mask == Mask::kNone) return ffi::Error::Success();
  const int64_t F = a.dims.size();
  const int64_t count = static_cast<int64_t>(mask_arg.element_count());
  if (mask_arg.element_type() != it || F == 0 || count % F != 0 || (a.mask == Mask::kByRow && count != a.n_rows * F))
    return InvalidArgument(fn + ": mask arg must be [n_dst, F] of the index dtype");
  if (a.mask == Mask::kByNbr) {
    a.reads_nbr = true;
    a.nbr_bound = std::min(a.nbr_bound, count / F);
  }
  return ffi::Error::Success();
}

// jgo_spmm: out[r, f] = reduce over k in row r of op(node[nbr[k], .], edge[eid[k], .]).
struct SpmmArgs {
  Op op = Op::kCopyNode;
  Reduce reduce = Reduce::kSum;
  Mask mask = Mask::kNone;
  Dims3 dims{1, 1, 0};
  Strides3 node_strides{0, 0, 0}, edge_strides{0, 0, 0};
  int64_t n_rows = 0, n_edges = 0, node_rows = 0, node_len = 0, edge_len = 0;
  int64_t nbr_bound = 0;   // neighbour ids must lie in [0, nbr_bound) (node rows and/or mask rows)
  bool reads_nbr = false;  // whether the kernel reads anything through the neighbour id
  bool reads_eid = false;  // whether it reads edge data or records edge ids (arg outputs, masks)
};

inline ffi::ErrorOr<SpmmArgs> CheckSpmm(const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& nbr,
                                        const ffi::AnyBuffer& eid, const ffi::AnyBuffer& node,
                                        const ffi::AnyBuffer& edge, const ffi::AnyBuffer& mask_arg,
                                        const ffi::AnyBuffer& out, const ffi::AnyBuffer& arg_out, int64_t op,
                                        int64_t reduce, int64_t mask, ffi::Span<const int64_t> dims,
                                        ffi::Span<const int64_t> node_strides,
                                        ffi::Span<const int64_t> edge_strides) {
  SpmmArgs a;
  if (op < 0 || op > 3) return Fail("jgo_spmm: unknown op code " + std::to_string(op));
  if (reduce < 0 || reduce > 3) return Fail("jgo_spmm: unknown reduce code " + std::to_string(reduce));
  if (mask < 0 || mask > 2) return Fail("jgo_spmm: unknown mask code " + std::to_string(mask));
  a.op = static_cast<Op>(op);
  a.reduce = static_cast<Reduce>(reduce);
  a.mask = static_cast<Mask>(mask);
  if (a.mask != Mask::kNone && a.reduce != Reduce::kSum) return Fail("jgo_spmm: masks need reduce=sum");
  auto index_type = CheckMessageOperands("jgo_spmm", a, offsets, nbr, eid, node, edge, out, "node, edge and output",
                                         dims);
  if (index_type.has_error()) return ffi::Unexpected(index_type.error());
  const auto it = *index_type;
  const int64_t F = a.dims.size();
  a.node_rows = Rows(node);
  a.node_len = RowLength(node);
  a.edge_len = RowLength(edge);
  auto ns = ReadStrides(node_strides, a.dims, Reach(a.op != Op::kCopyEdge, node), "node strides");
  if (ns.has_error()) return ffi::Unexpected(ns.error());
  auto es = ReadStrides(edge_strides, a.dims, Reach(a.op != Op::kCopyNode, edge), "edge strides");
  if (es.has_error()) return ffi::Unexpected(es.error());
  a.node_strides = *ns;
  a.edge_strides = *es;
  if (a.op != Op::kCopyNode && Rows(edge) != a.n_edges)
    return Fail("jgo_spmm: edge data has " + std::to_string(Rows(edge)) + " rows for " +
                           std::to_string(a.n_edges) + " edges");
  if (static_cast<int64_t>(out.element_count()) != a.n_rows * F)
    return Fail("jgo_spmm: output has the wrong size");
  const bool want_arg = a.reduce == Reduce::kMax || a.reduce == Reduce::kMin;
  if (want_arg && (arg_out.element_type() != it || static_cast<int64_t>(arg_out.element_count()) != a.n_rows * F))
    return Fail("jgo_spmm: arg output must be [n_rows, F] of the index dtype");
  const bool uses_node = a.op != Op::kCopyEdge;
  a.reads_nbr = uses_node || a.mask == Mask::kByNbr;
  a.reads_eid = a.op != Op::kCopyNode || want_arg || a.mask != Mask::kNone;
  a.nbr_bound = uses_node ? a.node_rows : INT64_MAX;
  if (auto err = CheckMaskArg("jgo_spmm", a, mask_arg, it); err.failure()) return ffi::Unexpected(err);
  return a;
}

template <typename... Ctx>
auto BindSpmm() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // offsets
      .template Arg<ffi::AnyBuffer>()  // neighbours
      .template Arg<ffi::AnyBuffer>()  // edge ids
      .template Arg<ffi::AnyBuffer>()  // node data
      .template Arg<ffi::AnyBuffer>()  // edge data
      .template Arg<ffi::AnyBuffer>()  // mask arg
      .template Ret<ffi::AnyBuffer>()  // out
      .template Ret<ffi::AnyBuffer>()  // arg out
      .template Attr<int64_t>("op")
      .template Attr<int64_t>("reduce")
      .template Attr<int64_t>("mask")
      .template Attr<ffi::Span<const int64_t>>("dims")
      .template Attr<ffi::Span<const int64_t>>("node_strides")
      .template Attr<ffi::Span<const int64_t>>("edge_strides")
      .template Attr<bool>("checked");  // the graph's values were checked (see the top of the file)
}

// jgo_sddmm: out[e, .] = op(lhs[target_l(k), .], rhs[target_r(k), .]) for every position k of a
// compressed structure (e = eid[k]), summed over d2 when dot. Targets: the walked row, the
// neighbour nbr[k], or the edge e.
struct SddmmArgs {
  Op op;
  Target a_target, b_target;
  bool dot;
  Mask mask;
  Dims3 dims;
  Strides3 a_strides, b_strides;
  int64_t n_rows, n_edges, a_rows, b_rows, a_len, b_len;
  int64_t nbr_bound;  // neighbour ids must lie in [0, nbr_bound)
  bool reads_nbr;
};

inline ffi::ErrorOr<SddmmArgs> CheckSddmm(const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& nbr,
                                          const ffi::AnyBuffer& eid, const ffi::AnyBuffer& lhs,
                                          const ffi::AnyBuffer& rhs, const ffi::AnyBuffer& mask_arg,
                                          const ffi::AnyBuffer& out, int64_t op, int64_t a_target,
                                          int64_t b_target, bool dot, int64_t mask, ffi::Span<const int64_t> dims,
                                          ffi::Span<const int64_t> a_strides,
                                          ffi::Span<const int64_t> b_strides) {
  SddmmArgs s;
  if (op < 0 || op > 3) return Fail("jgo_sddmm: unknown op code " + std::to_string(op));
  if (a_target < 0 || a_target > 2 || b_target < 0 || b_target > 2)
    return Fail("jgo_sddmm: targets must be 0 (row), 1 (neighbour) or 2 (edge)");
  if (mask < 0 || mask > 2) return Fail("jgo_sddmm: unknown mask code " + std::to_string(mask));
  s.op = static_cast<Op>(op);
  s.a_target = static_cast<Target>(a_target);
  s.b_target = static_cast<Target>(b_target);
  s.dot = dot;
  s.mask = static_cast<Mask>(mask);
  if (dot && s.op != Op::kMul) return Fail("jgo_sddmm: dot needs op=mul");
  auto index_type = CheckMessageOperands("jgo_sddmm", s, offsets, nbr, eid, lhs, rhs, out, "operands and output",
                                         dims);
  if (index_type.has_error()) return ffi::Unexpected(index_type.error());
  s.a_rows = Rows(lhs);
  s.b_rows = Rows(rhs);
  s.a_len = RowLength(lhs);
  s.b_len = RowLength(rhs);
  const bool use_a = s.op != Op::kCopyEdge, use_b = s.op != Op::kCopyNode;
  auto as = ReadStrides(a_strides, s.dims, Reach(use_a, lhs), "lhs strides");
  if (as.has_error()) return ffi::Unexpected(as.error());
  auto bs = ReadStrides(b_strides, s.dims, Reach(use_b, rhs), "rhs strides");
  if (bs.has_error()) return ffi::Unexpected(bs.error());
  s.a_strides = *as;
  s.b_strides = *bs;
  const struct { bool used; Target t; int64_t rows; const char* name; } operands[] = {
      {use_a, s.a_target, s.a_rows, "lhs"}, {use_b, s.b_target, s.b_rows, "rhs"}};
  s.nbr_bound = INT64_MAX;
  s.reads_nbr = false;
  for (const auto& o : operands) {
    if (!o.used) continue;
    if (o.t == Target::kRow && o.rows != s.n_rows)
      return Fail(std::string("jgo_sddmm: row-target ") + o.name + " needs n_rows rows");
    if (o.t == Target::kEdge && o.rows != s.n_edges)
      return Fail(std::string("jgo_sddmm: edge-target ") + o.name + " needs n_edges rows");
    if (o.t == Target::kNbr) {
      s.reads_nbr = true;
      s.nbr_bound = std::min(s.nbr_bound, o.rows);
    }
  }
  const int64_t F = s.dims.size();
  const int64_t per_edge = dot ? s.dims.d0 * s.dims.d1 : F;
  if (static_cast<int64_t>(out.element_count()) != s.n_edges * per_edge)
    return Fail("jgo_sddmm: output has the wrong size");
  if (auto err = CheckMaskArg("jgo_sddmm", s, mask_arg, *index_type); err.failure()) return ffi::Unexpected(err);
  return s;
}

template <typename... Ctx>
auto BindSddmm() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // offsets
      .template Arg<ffi::AnyBuffer>()  // neighbours
      .template Arg<ffi::AnyBuffer>()  // edge ids
      .template Arg<ffi::AnyBuffer>()  // lhs
      .template Arg<ffi::AnyBuffer>()  // rhs
      .template Arg<ffi::AnyBuffer>()  // mask arg
      .template Ret<ffi::AnyBuffer>()  // out
      .template Attr<int64_t>("op")
      .template Attr<int64_t>("lhs_target")
      .template Attr<int64_t>("rhs_target")
      .template Attr<bool>("dot")
      .template Attr<int64_t>("mask")
      .template Attr<ffi::Span<const int64_t>>("dims")
      .template Attr<ffi::Span<const int64_t>>("lhs_strides")
      .template Attr<ffi::Span<const int64_t>>("rhs_strides")
      .template Attr<bool>("checked");
}

inline ffi::Error CheckSoftmax(const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& eid,
                               const ffi::AnyBuffer& logits, const ffi::AnyBuffer& out) {
  auto view = CheckGraphView("jgo_edge_softmax", offsets, eid, eid);  // the softmax reads no neighbour ids
  if (view.has_error()) return view.error();
  if (!IsFloatType(logits.element_type()) || out.element_type() != logits.element_type())
    return InvalidArgument("jgo_edge_softmax: logits must be float32/float64");
  if (Rows(logits) != view->n_edges || out.element_count() != logits.element_count())
    return InvalidArgument("jgo_edge_softmax: logits must be [n_edges, H]");
  return ffi::Error::Success();
}

template <typename... Ctx>
auto BindEdgeSoftmax() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // offsets (CSC)
      .template Arg<ffi::AnyBuffer>()  // edge ids
      .template Arg<ffi::AnyBuffer>()  // logits
      .template Ret<ffi::AnyBuffer>()
      .template Attr<bool>("checked");
}

}  // namespace jgo
