// Argument decoding, the id check and the binding of jgo_check_edges, identical on CPU and CUDA.
//
// jgo_check_edges  (src [..., E], dst [..., E]) -> (src, dst)   outputs aliased to the inputs
//
// Graph.from_edges calls it on traced edge lists (under jit), where ids cannot be checked in
// Python: without it a negative id would be grouped into node 0 and an id past the end dropped.
// It fails naming the array, the id, the edge (and the batch row of a vmapped edge list) and the
// range. Attributes: n_src, n_dst.
#pragma once

#include <cstdint>
#include <string>

#include "jgo/args.h"

namespace jgo {

struct EdgeListArgs {
  int64_t count;    // elements of src (and dst): batch rows times edges
  int64_t n_edges;  // the last dimension
  int64_t n_src, n_dst;
};

inline ffi::ErrorOr<EdgeListArgs> CheckEdgeList(const ffi::AnyBuffer& src, const ffi::AnyBuffer& dst,
                                                const ffi::AnyBuffer& src_out, const ffi::AnyBuffer& dst_out,
                                                int64_t n_src, int64_t n_dst) {
  const auto it = src.element_type();
  if (!IsIndexType(it) || dst.element_type() != it || src_out.element_type() != it || dst_out.element_type() != it)
    return Fail("jgo_check_edges: src and dst must share an int32/int64 dtype");
  const auto shape = src.dimensions();
  if (shape.size() == 0 || ShapeOf(dst) != ShapeOf(src) ||
      ShapeOf(src_out) != ShapeOf(src) || ShapeOf(dst_out) != ShapeOf(src))
    return Fail("jgo_check_edges: src, dst and the results must have one shape [..., E]; got " + ShapeOf(src) +
                " and " + ShapeOf(dst));
  if (n_src < 0 || n_dst < 0) return Fail("jgo_check_edges: n_src and n_dst must be >= 0");
  return EdgeListArgs{static_cast<int64_t>(src.element_count()), shape[shape.size() - 1], n_src, n_dst};
}

template <typename I>
JGO_HD bool IdInRange(I id, int64_t n) {
  return id >= 0 && static_cast<int64_t>(id) < n;
}

// The error for the first bad id, at flat position `pos` of array `name` ("src" or "dst").
inline ffi::Error EdgeIdError(const EdgeListArgs& a, const char* name, int64_t id, int64_t pos) {
  const int64_t n = name[0] == 's' ? a.n_src : a.n_dst;
  std::string where = "at edge " + std::to_string(a.n_edges ? pos % a.n_edges : 0);
  if (a.count != a.n_edges) where += " of batch row " + std::to_string(a.n_edges ? pos / a.n_edges : 0);
  return InvalidArgument("Graph.from_edges: " + std::string(name) + " id " + std::to_string(id) + " " + where +
                         " out of range [0, " + std::to_string(n) + ")");
}

template <typename... Ctx>
auto BindCheckEdges() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // src
      .template Arg<ffi::AnyBuffer>()  // dst
      .template Ret<ffi::AnyBuffer>()  // src (aliased)
      .template Ret<ffi::AnyBuffer>()  // dst (aliased)
      .template Attr<int64_t>("n_src")
      .template Attr<int64_t>("n_dst");
}

}  // namespace jgo
