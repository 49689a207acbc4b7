// The dropout operand and attributes of the attention handlers (GAT, GATv2, mha_simple), identical on CPU and
// CUDA: the key, uint32[2] or [0] for no dropout, as the last operand, and the attributes dropout_threshold (i64)
// and dropout_scale (f64) (jgo/attention.h, Dropout).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "jgo/args.h"
#include "jgo/attention.h"

namespace jgo {

// The dropout operand and attributes: key uint32[2] (or [0]: no dropout), 0 <= threshold < 2^32,
// scale >= 1. The key's address is kept, not its words (device memory for the CUDA handlers).
inline ffi::ErrorOr<Dropout> CheckDropout(const char* fn, const ffi::AnyBuffer& key, int64_t threshold,
                                          double scale) {
  if (key.element_type() != ffi::DataType::U32 || (key.element_count() != 0 && key.element_count() != 2))
    return Fail(std::string(fn) + ": dropout_key must be uint32[2], or uint32[0] for no dropout");
  if (threshold < 0 || threshold > 0xFFFFFFFFll || !(scale >= 1.0) || !std::isfinite(scale))
    return Fail(std::string(fn) + ": dropout_threshold must lie in [0, 2^32) and dropout_scale be finite and >= 1; "
                "got " +
                std::to_string(threshold) + " and " + std::to_string(scale));
  Dropout d;
  if (key.element_count() == 2) d.key = static_cast<const uint32_t*>(key.untyped_data());
  d.threshold = static_cast<uint32_t>(threshold);
  d.scale = scale;
  return d;
}

// Sets `args.drop` from the dropout operand and attributes (see CheckDropout).
template <typename Args>
ffi::Error SetDropout(const char* fn, Args& args, const ffi::AnyBuffer& key, int64_t threshold, double scale) {
  auto d = CheckDropout(fn, key, threshold, scale);
  if (d.has_error()) return d.error();
  args.drop = *d;
  return ffi::Error::Success();
}

}  // namespace jgo
