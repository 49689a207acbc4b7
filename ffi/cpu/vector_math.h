// Small vectorisable math for the CPU attention kernels: a polynomial exp for float (so the
// loops over heads vectorise), and sums and dot products in a fixed order (reproducible).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

// JGO_AVX2_CLONES: row walks may be compiled a second time for AVX2 + FMA (with
// __attribute__((target("avx2,fma")))) and picked at run time with HasAvx2Fma().
#if defined(__x86_64__) && defined(__GNUC__)
#define JGO_AVX2_CLONES 1
#endif

// Row loops and their helpers are marked always-inline so that each clone gets its own copy.
#define JGO_INLINE __attribute__((always_inline)) inline

namespace jgo {

#ifdef JGO_AVX2_CLONES
inline bool HasAvx2Fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}
// AVX-512 with the VL/BW/DQ extensions (x86-64-v4), for row walks compiled a third time with
// JGO_AVX512_TARGET.
inline bool HasAvx512() {
  static const bool has = HasAvx2Fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  return has;
}
#define JGO_AVX2_TARGET __attribute__((target("avx2,fma")))
#define JGO_AVX512_TARGET __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#endif

// exp for the per-head loops: float uses an inline Cephes-style polynomial (about 1 ulp, no
// call, so the loops over heads vectorise); double calls the C library.
inline float CpuExp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);  // exp(-inf) becomes ~1e-38, never 0 * inf
  const float kMagic = 12582912.0f;           // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + kMagic) - kMagic;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // shifted as unsigned: a NaN x reaches here (the clamp keeps it) and makes n + 127 negative, whose
  // signed left shift is undefined; the result is NaN either way (p is NaN)
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}
inline double CpuExp(double x) { return std::exp(x); }

struct CpuExpFn {
  template <typename T>
  T operator()(T x) const { return CpuExp(x); }
};

// <a, b> over n elements with four independent partial sums (a fixed order: reproducible).
template <typename T>
inline T Dot(const T* a, const T* b, int64_t n) {
  T s0 = T(0), s1 = T(0), s2 = T(0), s3 = T(0);
  int64_t c = 0;
  for (; c + 4 <= n; c += 4) {
    s0 += a[c] * b[c];
    s1 += a[c + 1] * b[c + 1];
    s2 += a[c + 2] * b[c + 2];
    s3 += a[c + 3] * b[c + 3];
  }
  for (; c < n; ++c) s0 += a[c] * b[c];
  return (s0 + s1) + (s2 + s3);
}

// Sum of n elements, in the same order as Dot.
template <typename T>
inline T Sum(const T* a, int64_t n) {
  T s0 = T(0), s1 = T(0), s2 = T(0), s3 = T(0);
  int64_t c = 0;
  for (; c + 4 <= n; c += 4) {
    s0 += a[c];
    s1 += a[c + 1];
    s2 += a[c + 2];
    s3 += a[c + 3];
  }
  for (; c < n; ++c) s0 += a[c];
  return (s0 + s1) + (s2 + s3);
}

}  // namespace jgo
