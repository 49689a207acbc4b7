// The graph readout over never decreasing graph ids (jgo_pool_sorted and its transpose jgo_pool_sorted_bwd):
// the argument checks and the bindings shared by the CPU and CUDA handlers (cpu/message_passing.cc,
// cuda/message_passing.cu).
//
// jgo_pool_sorted      (x [N, ...], ids [N]) -> out [n_graphs, ...]   attribute: mean (bool)
// jgo_pool_sorted_bwd  (ct [n_graphs, ...], ids [N]) -> out [N, ...]
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "jgo/args.h"

namespace jgo {

struct PoolArgs {
  int64_t n, width, graphs;  // nodes, elements per row, graphs
};

inline ffi::ErrorOr<PoolArgs> CheckPoolSorted(const ffi::AnyBuffer& x, const ffi::AnyBuffer& ids,
                                              const ffi::AnyBuffer& out) {
  if (!IsFloatType(x.element_type()) || out.element_type() != x.element_type() || !IsIndexType(ids.element_type()))
    return Fail("jgo_pool_sorted: x and the result must be float32/float64 and ids int32/int64");
  const int64_t N = static_cast<int64_t>(ids.element_count());
  if (ids.dimensions().size() != 1 || Rows(x) != N)
    return Fail("jgo_pool_sorted: ids must be [N] for x [N, ...] with N = " + std::to_string(Rows(x)));
  const int64_t F = N == 0 ? RowLength(out) : static_cast<int64_t>(x.element_count()) / N;
  const int64_t G = Rows(out);
  if (static_cast<int64_t>(out.element_count()) != G * F)
    return Fail("jgo_pool_sorted: the result must be [n_graphs, ...] with x's row shape");
  return PoolArgs{N, F, G};
}

inline ffi::ErrorOr<PoolArgs> CheckPoolSortedBwd(const ffi::AnyBuffer& ct, const ffi::AnyBuffer& ids,
                                                 const ffi::AnyBuffer& out) {
  if (!IsFloatType(ct.element_type()) || out.element_type() != ct.element_type() || !IsIndexType(ids.element_type()))
    return Fail("jgo_pool_sorted_bwd: ct and the result must be float32/float64 and ids int32/int64");
  const int64_t N = static_cast<int64_t>(ids.element_count()), G = Rows(ct);
  if (ids.dimensions().size() != 1 || Rows(out) != N)
    return Fail("jgo_pool_sorted_bwd: ids must be [N] for the result [N, ...] with N = " + std::to_string(Rows(out)));
  const auto cd = ct.dimensions(), od = out.dimensions();
  if (cd.size() != od.size() || cd.size() == 0 || !std::equal(cd.begin() + 1, cd.end(), od.begin() + 1))
    return Fail("jgo_pool_sorted_bwd: ct must be [n_graphs, ...] with the result's row shape");
  int64_t F = 1;
  for (size_t k = 1; k < od.size(); ++k) F *= od[k];
  return PoolArgs{N, F, G};
}

template <typename... Ctx>
auto BindPoolSorted() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()  // x [N, ...]
      .template Arg<ffi::AnyBuffer>()  // ids [N], never decreasing
      .template Ret<ffi::AnyBuffer>()  // out [n_graphs, ...]
      .template Attr<bool>("mean");
}

template <typename... Ctx>
auto BindPoolSortedBwd() {
  return BindWith<Ctx...>()
      .template Arg<ffi::AnyBuffer>()   // ct [n_graphs, ...]
      .template Arg<ffi::AnyBuffer>()   // ids [N]
      .template Ret<ffi::AnyBuffer>();  // out [N, ...]
}

}  // namespace jgo
