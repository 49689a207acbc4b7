// Shape checks and bindings of the DimeNet++ triplet handlers, shared by the CPU and CUDA twins.
//
// Float operands, the point then the direction: vec [E,3], A [E,7*M], emb [E,C] or [0],
// W_b [C,M], W_b^T [M,C], grad [E,C] or [0]; the direction has the same shapes or is [0] (absent;
// the direction of W_b and W_b^T are both present or both absent).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "jgo/args.h"
#include "jgo/dimenet.h"

namespace jgo {

constexpr int kDimenetOperands = 12;

struct DimenetArgs {
  int64_t E, T, C, M, outputs;
};

// Validates the float operands of either pass and returns the sizes; `nbr` is the pass's
// neighbour array (its length is the number of triplets).
inline ffi::ErrorOr<DimenetArgs> CheckDimenet(const char* what, const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& nbr,
                                              const ffi::AnyBuffer* ops, int64_t outputs) {
  DimenetArgs a;
  const std::string w(what);
  const auto it = offsets.element_type();
  if (!IsIndexType(it) || nbr.element_type() != it) return Fail(w + ": triplet index arrays must share an int32/int64 dtype");
  const auto ft = ops[0].element_type();
  if (!IsFloatType(ft)) return Fail(w + ": vec must be float32/float64");
  for (int i = 0; i < kDimenetOperands; ++i)
    if (ops[i].element_type() != ft) return Fail(w + ": all float operands must share vec's dtype");
  a.E = static_cast<int64_t>(offsets.element_count()) - 1;
  a.T = static_cast<int64_t>(nbr.element_count());
  if (a.E < 0) return Fail(w + ": offsets must have n_edges + 1 entries");
  const auto wb_dims = ops[3].dimensions();
  if (wb_dims.size() != 2) return Fail(w + ": W_b must be [n_emb, n_mid]");
  a.C = wb_dims[0];
  a.M = wb_dims[1];
  const int64_t sizes[6] = {3 * a.E, kSpherical * a.M * a.E, a.C * a.E, a.C * a.M, a.C * a.M, a.C * a.E};
  const char* names[6] = {"vec", "A", "emb", "W_b", "W_b^T", "grad"};
  for (int i = 0; i < kDimenetOperands; ++i) {
    const int k = i % 6;
    const bool may_be_absent = i >= 6 || k == 2 || k == 5;
    const int64_t n = static_cast<int64_t>(ops[i].element_count());
    if (n == 0 && may_be_absent) continue;
    if (n != sizes[k])
      return Fail(w + ": " + (i >= 6 ? "the direction of " : "") + names[k] + " has " + std::to_string(n) +
                  " elements, expected " + std::to_string(sizes[k]));
  }
  if ((ops[9].element_count() == 0) != (ops[10].element_count() == 0))
    return Fail(w + ": the directions of W_b and W_b^T must both be given or both be absent");
  if (outputs < 0 || outputs > 31) return Fail(w + ": unknown output bits " + std::to_string(outputs));
  a.outputs = outputs;
  return a;
}

// A result is either requested (its full size) or a [0] placeholder.
inline ffi::Error CheckRequested(const char* what, const char* name, const ffi::AnyBuffer& r, bool requested,
                                 int64_t size, ffi::DataType dtype) {
  const int64_t n = static_cast<int64_t>(r.element_count());
  if (r.element_type() != dtype || n != (requested ? size : 0))
    return InvalidArgument(std::string(what) + ": result " + name + " has the wrong size or dtype");
  return ffi::Error::Success();
}

// jgo_dimenet_in past CheckDimenet: no grad output, positions [n_triplets] of the index dtype, and its results
// `res` (vec, A, emb, W_b, coef) each requested or [0].
inline ffi::Error CheckDimenetIn(const DimenetArgs& a, const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& pos,
                                 const ffi::AnyBuffer& vec, const ffi::AnyBuffer* res) {
  if ((a.outputs & kOutGrad) != 0)
    return InvalidArgument("jgo_dimenet_in: the grad component is computed by jgo_dimenet_out");
  if (pos.element_type() != offsets.element_type() || static_cast<int64_t>(pos.element_count()) != a.T)
    return InvalidArgument("jgo_dimenet_in: positions must be [n_triplets] of the index dtype");
  const int64_t sizes[5] = {3 * a.E, kSpherical * a.M * a.E, a.C * a.E, a.C * a.M, 2 * a.T};
  const int64_t bits[5] = {kOutVec, kOutA, kOutEmb, kOutWb, kOutVec};
  const char* names[5] = {"vec", "A", "emb", "W_b", "coef"};
  for (int i = 0; i < 5; ++i) {
    const bool requested = (a.outputs & bits[i]) != 0;
    if (auto err = CheckRequested("jgo_dimenet_in", names[i], res[i], requested, sizes[i], vec.element_type());
        err.failure())
      return err;
  }
  return ffi::Error::Success();
}

// jgo_dimenet_out past CheckDimenet: only grad and vec outputs, coef [n_triplets, 2] when vec is requested, and
// its results each requested or [0].
inline ffi::Error CheckDimenetOut(const DimenetArgs& a, const ffi::AnyBuffer& vec, const ffi::AnyBuffer& coef,
                                  const ffi::AnyBuffer& r_grad, const ffi::AnyBuffer& r_vec) {
  if ((a.outputs & ~(kOutGrad | kOutVec)) != 0) return InvalidArgument("jgo_dimenet_out: computes only grad and vec");
  const bool want_vec = (a.outputs & kOutVec) != 0, want_grad = (a.outputs & kOutGrad) != 0;
  const auto ft = vec.element_type();
  if (coef.element_type() != ft || static_cast<int64_t>(coef.element_count()) != (want_vec ? 2 * a.T : 0))
    return InvalidArgument("jgo_dimenet_out: coef must be [n_triplets, 2] when vec is requested");
  if (auto err = CheckRequested("jgo_dimenet_out", "grad", r_grad, want_grad, a.C * a.E, ft); err.failure())
    return err;
  return CheckRequested("jgo_dimenet_out", "vec", r_vec, want_vec, 3 * a.E, ft);
}

template <typename T>
DimenetOperands<T> OperandsOf(const ffi::AnyBuffer* ops, const DimenetArgs& a) {
  auto ptr = [&](int i) -> const T* { return ops[i].element_count() ? ops[i].typed_data<T>() : nullptr; };
  return DimenetOperands<T>{ptr(0), ptr(1), ptr(2), ptr(3), ptr(4),  ptr(5),
                            ptr(6), ptr(7), ptr(8), ptr(9), ptr(10), ptr(11), a.C, a.M};
}

namespace detail {
// b followed by the last N of the float operands: the point u then the direction u' (absent: [0]),
// each vec [E,3], A [E,7*M], emb [E,C], W_b [C,M], W_b^T [M,C], grad [E,C].
template <int N = kDimenetOperands, typename B>
auto WithDimenetOperands(B&& b) {
  if constexpr (N == 1) {
    return std::move(b).template Arg<ffi::AnyBuffer>();
  } else {
    return WithDimenetOperands<N - 1>(std::move(b).template Arg<ffi::AnyBuffer>());
  }
}
}  // namespace detail

template <typename... Ctx>
auto BindDimenetIn() {
  auto indices = BindWith<Ctx...>()
                     .template Arg<ffi::AnyBuffer>()   // in_offsets [E+1]
                     .template Arg<ffi::AnyBuffer>()   // in_out [T]
                     .template Arg<ffi::AnyBuffer>();  // in_pos [T]
  return detail::WithDimenetOperands(std::move(indices))
      .template Ret<ffi::AnyBuffer>()  // vec component, e_in part [E,3] or [0]
      .template Ret<ffi::AnyBuffer>()  // A component [E,7*M] or [0]
      .template Ret<ffi::AnyBuffer>()  // emb component [E,C] or [0]
      .template Ret<ffi::AnyBuffer>()  // W_b component [C,M] or [0]
      .template Ret<ffi::AnyBuffer>()  // coef [T,2] or [0]
      .template Attr<int64_t>("outputs");
}

template <typename... Ctx>
auto BindDimenetOut() {
  auto indices = BindWith<Ctx...>()
                     .template Arg<ffi::AnyBuffer>()   // out_offsets [E+1]
                     .template Arg<ffi::AnyBuffer>();  // out_in [T]
  return detail::WithDimenetOperands(std::move(indices))
      .template Arg<ffi::AnyBuffer>()  // coef [T,2] or [0]
      .template Ret<ffi::AnyBuffer>()  // grad component [E,C] or [0]
      .template Ret<ffi::AnyBuffer>()  // vec component, e_out part [E,3] or [0]
      .template Attr<int64_t>("outputs");
}

}  // namespace jgo
