// Argument decoding, validation and bindings shared by the CPU and CUDA handlers.
//
// Shapes and attributes are checked here, identically on both platforms; index *values*
// are checked by the CPU kernels (the CUDA kernels skip out-of-range indices instead, so
// they never read or write out of bounds).
#pragma once

#include <algorithm>
#include <cstdint>
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

// jgo_spmm: out[r, f] = reduce over k in row r of op(node[nbr[k], .], edge[eid[k], .]).
struct SpmmArgs {
  Op op;
  Reduce reduce;
  Mask mask;
  Dims3 dims;
  Strides3 node_strides, edge_strides;
  int64_t n_rows, n_edges, node_rows, node_len, edge_len;
  int64_t nbr_bound;  // neighbour ids must lie in [0, nbr_bound) (node rows and/or mask rows)
  bool reads_nbr;     // whether the kernel reads anything through the neighbour id
  bool reads_eid;     // whether it reads edge data or records edge ids (arg outputs, masks)
};

inline ffi::ErrorOr<SpmmArgs> CheckSpmm(const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& nbr,
                                        const ffi::AnyBuffer& eid, const ffi::AnyBuffer& node,
                                        const ffi::AnyBuffer& edge, const ffi::AnyBuffer& mask_arg,
                                        const ffi::AnyBuffer& out, const ffi::AnyBuffer& arg_out, int64_t op,
                                        int64_t reduce, int64_t mask, ffi::Span<const int64_t> dims,
                                        ffi::Span<const int64_t> node_strides,
                                        ffi::Span<const int64_t> edge_strides) {
  SpmmArgs a;
  if (op < 0 || op > 3) return Fail("spmm: unknown op code " + std::to_string(op));
  if (reduce < 0 || reduce > 3) return Fail("spmm: unknown reduce code " + std::to_string(reduce));
  if (mask < 0 || mask > 2) return Fail("spmm: unknown mask code " + std::to_string(mask));
  a.op = static_cast<Op>(op);
  a.reduce = static_cast<Reduce>(reduce);
  a.mask = static_cast<Mask>(mask);
  if (a.mask != Mask::kNone && a.reduce != Reduce::kSum) return Fail("spmm: masks need reduce=sum");
  const auto it = offsets.element_type();
  if (!IsIndexType(it) || nbr.element_type() != it || eid.element_type() != it)
    return Fail("spmm: offsets, neighbours and edge ids must share an int32/int64 dtype");
  if (!IsFloatType(out.element_type()) || node.element_type() != out.element_type() ||
      edge.element_type() != out.element_type())
    return Fail("spmm: node, edge and output must share a float32/float64 dtype");
  if (offsets.element_count() < 1) return Fail("spmm: offsets must have n_rows + 1 entries");
  a.n_rows = static_cast<int64_t>(offsets.element_count()) - 1;
  a.n_edges = static_cast<int64_t>(nbr.element_count());
  if (static_cast<int64_t>(eid.element_count()) != a.n_edges)
    return Fail("spmm: neighbours and edge ids differ in length");
  auto d = ReadDims(dims);
  if (d.has_error()) return ffi::Unexpected(d.error());
  a.dims = *d;
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
    return Fail("spmm: edge data has " + std::to_string(Rows(edge)) + " rows for " +
                           std::to_string(a.n_edges) + " edges");
  if (static_cast<int64_t>(out.element_count()) != a.n_rows * F)
    return Fail("spmm: output has the wrong size");
  const bool want_arg = a.reduce == Reduce::kMax || a.reduce == Reduce::kMin;
  if (want_arg && (arg_out.element_type() != it || static_cast<int64_t>(arg_out.element_count()) != a.n_rows * F))
    return Fail("spmm: arg output must be [n_rows, F] of the index dtype");
  const bool uses_node = a.op != Op::kCopyEdge;
  a.reads_nbr = uses_node || a.mask == Mask::kByNbr;
  a.reads_eid = a.op != Op::kCopyNode || want_arg || a.mask != Mask::kNone;
  a.nbr_bound = uses_node ? a.node_rows : INT64_MAX;
  if (a.mask != Mask::kNone) {
    const int64_t count = static_cast<int64_t>(mask_arg.element_count());
    if (mask_arg.element_type() != it || F == 0 || count % F != 0 ||
        (a.mask == Mask::kByRow && count != a.n_rows * F))
      return Fail("spmm: mask arg must be [n_dst, F] of the index dtype");
    if (a.mask == Mask::kByNbr) a.nbr_bound = std::min(a.nbr_bound, count / F);
  }
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
      .template Attr<ffi::Span<const int64_t>>("edge_strides");
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
  if (op < 0 || op > 3) return Fail("sddmm: unknown op code " + std::to_string(op));
  if (a_target < 0 || a_target > 2 || b_target < 0 || b_target > 2)
    return Fail("sddmm: targets must be 0 (row), 1 (neighbour) or 2 (edge)");
  if (mask < 0 || mask > 2) return Fail("sddmm: unknown mask code " + std::to_string(mask));
  s.op = static_cast<Op>(op);
  s.a_target = static_cast<Target>(a_target);
  s.b_target = static_cast<Target>(b_target);
  s.dot = dot;
  s.mask = static_cast<Mask>(mask);
  if (dot && s.op != Op::kMul) return Fail("sddmm: dot needs op=mul");
  const auto it = offsets.element_type();
  if (!IsIndexType(it) || nbr.element_type() != it || eid.element_type() != it)
    return Fail("sddmm: offsets, neighbours and edge ids must share an int32/int64 dtype");
  if (!IsFloatType(out.element_type()) || lhs.element_type() != out.element_type() ||
      rhs.element_type() != out.element_type())
    return Fail("sddmm: operands and output must share a float32/float64 dtype");
  if (offsets.element_count() < 1) return Fail("sddmm: offsets must have n_rows + 1 entries");
  s.n_rows = static_cast<int64_t>(offsets.element_count()) - 1;
  s.n_edges = static_cast<int64_t>(nbr.element_count());
  if (static_cast<int64_t>(eid.element_count()) != s.n_edges) return Fail("sddmm: neighbours and edge ids differ in length");
  auto d = ReadDims(dims);
  if (d.has_error()) return ffi::Unexpected(d.error());
  s.dims = *d;
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
    if (o.t == Target::kRow && o.rows != s.n_rows) return Fail(std::string("sddmm: row-target ") + o.name + " needs n_rows rows");
    if (o.t == Target::kEdge && o.rows != s.n_edges) return Fail(std::string("sddmm: edge-target ") + o.name + " needs n_edges rows");
    if (o.t == Target::kNbr) {
      s.reads_nbr = true;
      s.nbr_bound = std::min(s.nbr_bound, o.rows);
    }
  }
  const int64_t F = s.dims.size();
  const int64_t per_edge = dot ? s.dims.d0 * s.dims.d1 : F;
  if (static_cast<int64_t>(out.element_count()) != s.n_edges * per_edge) return Fail("sddmm: output has the wrong size");
  if (s.mask != Mask::kNone) {
    const int64_t count = static_cast<int64_t>(mask_arg.element_count());
    if (mask_arg.element_type() != it || F == 0 || count % F != 0 ||
        (s.mask == Mask::kByRow && count != s.n_rows * F))
      return Fail("sddmm: mask arg must be [n_dst, F] of the index dtype");
    if (s.mask == Mask::kByNbr) {
      s.reads_nbr = true;
      s.nbr_bound = std::min(s.nbr_bound, count / F);
    }
  }
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
      .template Attr<ffi::Span<const int64_t>>("rhs_strides");
}

inline ffi::Error CheckSoftmax(const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& eid,
                               const ffi::AnyBuffer& logits, const ffi::AnyBuffer& out) {
  if (!IsIndexType(offsets.element_type()) || eid.element_type() != offsets.element_type())
    return InvalidArgument("edge_softmax: offsets and edge ids must share an int32/int64 dtype");
  if (!IsFloatType(logits.element_type()) || out.element_type() != logits.element_type())
    return InvalidArgument("edge_softmax: logits must be float32/float64");
  if (offsets.element_count() < 1) return InvalidArgument("edge_softmax: offsets must have n_dst + 1 entries");
  if (Rows(logits) != static_cast<int64_t>(eid.element_count()) || out.element_count() != logits.element_count())
    return InvalidArgument("edge_softmax: logits must be [n_edges, H]");
  return ffi::Error::Success();
}

template <typename... Ctx>
auto BindEdgeSoftmax() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // offsets (CSC)
      .template Arg<ffi::AnyBuffer>()  // edge ids
      .template Arg<ffi::AnyBuffer>()  // logits
      .template Ret<ffi::AnyBuffer>();
}

}  // namespace jgo
