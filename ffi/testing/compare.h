// Comparing a replayed call's results with the recorded ones.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "testing/case_io.h"

namespace jgo::testing {

// Elements a and b of a result agree when |a - b| <= atol + rtol * max(|a|, |b|, scale), with scale
// the largest finite magnitude in the expected result, or when both are NaN; types other than
// f32/f64 must agree bitwise. The scale keeps sums that cancel from failing on rounding alone: builds
// at -O1 (the sanitizers') and -O2 or more differ in the FMAs they contract (ffi/cpu's AVX2+FMA
// clones), and a small sum of large terms keeps only their absolute error.
struct Tolerance {
  double rtol_f32, atol_f32, rtol_f64, atol_f64;
};
// The recorded platform's handler again, built with other optimisation flags.
inline constexpr Tolerance kReplayTolerance = {1e-6, 0, 1e-12, 0};
// The other platform's handler.
inline constexpr Tolerance kCrossTolerance = {1e-4, 1e-5, 1e-10, 1e-10};

// The first difference between the results and the expected ones, or nothing: a shape or type
// that differs, an element still holding the sentinel (case_io.h) where the expected one does not
// (an unwritten output), or values that do not agree.
std::optional<std::string> CompareResults(const std::vector<HostBuffer>& got, const std::vector<HostBuffer>& want,
                                          const Tolerance& tol);

}  // namespace jgo::testing
