// Result comparison (compare.h).
#include "testing/compare.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace jgo::testing {
namespace {

template <typename T>
T Load(const HostBuffer& b, int64_t i) {
  T v;
  std::memcpy(&v, b.bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}

bool Agree(double a, double b, double scale, double rtol, double atol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b || std::abs(a - b) <= atol + rtol * std::max({std::abs(a), std::abs(b), scale});
}

// The largest finite magnitude in a f32/f64 buffer (0 for other types).
double Scale(const HostBuffer& b) {
  double scale = 0;
  for (int64_t i = 0; i < b.elements(); ++i) {
    const double v = b.dtype == XLA_FFI_DataType_F32 ? Load<float>(b, i)
                     : b.dtype == XLA_FFI_DataType_F64 ? Load<double>(b, i)
                                                       : 0;
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  }
  return scale;
}

std::string Format(const HostBuffer& b, int64_t i) {
  char s[64];
  switch (b.dtype) {
    case XLA_FFI_DataType_F32: std::snprintf(s, sizeof(s), "%.9g", Load<float>(b, i)); break;
    case XLA_FFI_DataType_F64: std::snprintf(s, sizeof(s), "%.17g", Load<double>(b, i)); break;
    case XLA_FFI_DataType_S32: std::snprintf(s, sizeof(s), "%" PRId32, Load<int32_t>(b, i)); break;
    case XLA_FFI_DataType_S64: std::snprintf(s, sizeof(s), "%" PRId64, Load<int64_t>(b, i)); break;
    default: {
      const size_t width = ByteWidth(b.dtype);
      int n = std::snprintf(s, sizeof(s), "0x");
      for (size_t k = width; k-- > 0;)  // most significant byte first (little-endian host)
        n += std::snprintf(s + n, sizeof(s) - n, "%02x", static_cast<unsigned char>(b.bytes[i * width + k]));
    }
  }
  return s;
}

bool ElementsAgree(const HostBuffer& got, const HostBuffer& want, int64_t i, double scale, const Tolerance& tol) {
  const size_t width = ByteWidth(got.dtype);
  if (std::memcmp(got.bytes.data() + i * width, want.bytes.data() + i * width, width) == 0) return true;
  switch (got.dtype) {
    case XLA_FFI_DataType_F32:
      return Agree(Load<float>(got, i), Load<float>(want, i), scale, tol.rtol_f32, tol.atol_f32);
    case XLA_FFI_DataType_F64:
      return Agree(Load<double>(got, i), Load<double>(want, i), scale, tol.rtol_f64, tol.atol_f64);
    default:
      return false;
  }
}

}  // namespace

std::optional<std::string> CompareResults(const std::vector<HostBuffer>& got, const std::vector<HostBuffer>& want,
                                          const Tolerance& tol) {
  if (got.size() != want.size()) return "a different number of results";
  for (size_t r = 0; r < got.size(); ++r) {
    const HostBuffer &g = got[r], &w = want[r];
    const std::string at = "result " + std::to_string(r);
    if (g.dtype != w.dtype || g.dims != w.dims) return at + ": a different type or shape";
    const double scale = Scale(w);
    for (int64_t i = 0; i < g.elements(); ++i) {
      const std::string element = at + " element " + std::to_string(i) + " of " + std::to_string(g.elements());
      if (IsSentinel(g.dtype, g.bytes.data(), i) && !IsSentinel(w.dtype, w.bytes.data(), i))
        return element + ": not written (recorded " + Format(w, i) + ")";
      if (!ElementsAgree(g, w, i, scale, tol)) return element + ": got " + Format(g, i) + ", want " + Format(w, i);
    }
  }
  return std::nullopt;
}

}  // namespace jgo::testing
