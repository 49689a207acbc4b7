// Shape checks of the DimeNet++ triplet handlers, shared by the CPU and CUDA twins.
//
// Operands: vec [E,3], sbf [E,42], emb [E,C] or [0], wa [42,M], wb [C,M], grad [E,C] or [0], and
// the direction (dvec, dsbf, demb, dwa, dwb, dgrad) of the same shapes or [0] (absent).
#pragma once

#include <cstdint>
#include <string>

#include "jgo/args.h"
#include "jgo/dimenet.h"

namespace jgo {

struct DimenetArgs {
  int64_t E, T, C, M, outputs;
};

inline bool Absent(const ffi::AnyBuffer& b) { return b.element_count() == 0; }

// Validates the float operands of either pass and returns the sizes. `n_triplets` is the
// length of the pass's neighbour array.
inline ffi::ErrorOr<DimenetArgs> CheckDimenet(const char* what, const ffi::AnyBuffer& offsets, const ffi::AnyBuffer& nbr,
                                              const ffi::AnyBuffer* ops, int64_t outputs) {
  DimenetArgs a;
  const std::string w(what);
  const auto it = offsets.element_type();
  if (!IsIndexType(it) || nbr.element_type() != it) return Fail(w + ": triplet index arrays must share an int32/int64 dtype");
  const auto ft = ops[0].element_type();
  if (!IsFloatType(ft)) return Fail(w + ": vec must be float32/float64");
  for (int i = 0; i < 12; ++i)
    if (ops[i].element_type() != ft) return Fail(w + ": all float operands must share vec's dtype");
  a.E = static_cast<int64_t>(offsets.element_count()) - 1;
  a.T = static_cast<int64_t>(nbr.element_count());
  if (a.E < 0) return Fail(w + ": offsets must have n_edges + 1 entries");
  const auto wa_dims = ops[3].dimensions(), wb_dims = ops[4].dimensions();
  if (wa_dims.size() != 2 || wa_dims[0] != kBasis) return Fail(w + ": W_a must be [42, n_mid]");
  if (wb_dims.size() != 2 || wb_dims[1] != wa_dims[1]) return Fail(w + ": W_b must be [n_emb, n_mid]");
  a.M = wa_dims[1];
  a.C = wb_dims[0];
  const int64_t row_len[6] = {3, kBasis, a.C, kBasis * a.M, a.C * a.M, a.C};
  const int64_t rows[6] = {a.E, a.E, a.E, 1, 1, a.E};
  const char* names[6] = {"vec", "sbf_rad", "emb", "W_a", "W_b", "grad"};
  for (int i = 0; i < 12; ++i) {
    const bool may_be_absent = i >= 6 || i == 2 || i == 5;
    const int64_t n = static_cast<int64_t>(ops[i].element_count());
    if (n == 0 && may_be_absent) continue;
    if (n != rows[i % 6] * row_len[i % 6])
      return Fail(w + ": " + (i >= 6 ? "the direction of " : "") + names[i % 6] + " has " + std::to_string(n) +
                  " elements, expected " + std::to_string(rows[i % 6] * row_len[i % 6]));
  }
  if (outputs < 0 || outputs > 63) return Fail(w + ": unknown output bits " + std::to_string(outputs));
  a.outputs = outputs;
  return a;
}

// A result is either requested (its full shape) or a [0] placeholder.
inline ffi::Error CheckResult(const char* what, const char* name, const ffi::AnyBuffer& r, bool requested,
                              int64_t size, ffi::DataType dtype) {
  const int64_t n = static_cast<int64_t>(r.element_count());
  if (r.element_type() != dtype || n != (requested ? size : 0))
    return InvalidArgument(std::string(what) + ": result " + name + " has the wrong size or dtype");
  return ffi::Error::Success();
}

template <typename T>
DimenetOperands<T> OperandsOf(const ffi::AnyBuffer* ops, const DimenetArgs& a) {
  auto ptr = [&](int i) -> const T* { return ops[i].element_count() ? ops[i].typed_data<T>() : nullptr; };
  return DimenetOperands<T>{ptr(0), ptr(1), ptr(2),  ptr(3),  ptr(4),  ptr(5),
                            ptr(6), ptr(7), ptr(8), ptr(9), ptr(10), ptr(11), a.C, a.M};
}

}  // namespace jgo
