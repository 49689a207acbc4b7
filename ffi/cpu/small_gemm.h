// Register-blocked small matrix products for the CPU kernels' per-row work. Written with the
// GCC/Clang vector extensions on 32-byte vectors: one ymm register each in the AVX2 clones, a pair
// of xmm registers on baseline x86-64, NEON registers on ARM.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/vector_math.h"

namespace jgo {

template <typename T>
struct Vec {
  typedef T type __attribute__((vector_size(32)));
  static constexpr int64_t kLanes = 32 / sizeof(T);
};

// n rounded up to whole vectors of T.
template <typename T>
constexpr int64_t RoundUpToVec(int64_t n) {
  return (n + Vec<T>::kLanes - 1) / Vec<T>::kLanes * Vec<T>::kLanes;
}

// <a, b> over n elements, n a multiple of Vec<T>::kLanes: lane-wise partial sums, then the lanes
// in order (reproducible).
template <typename T>
JGO_INLINE T VecDot(const T* a, const T* b, int64_t n) {
  using V = typename Vec<T>::type;
  V s = {};
  for (int64_t i = 0; i < n; i += Vec<T>::kLanes) {
    V x, y;
    std::memcpy(&x, a + i, sizeof(V));
    std::memcpy(&y, b + i, sizeof(V));
    s += x * y;
  }
  T r = s[0];
  for (int64_t i = 1; i < Vec<T>::kLanes; ++i) r += s[i];
  return r;
}

// One block of C: C[m * ldc + n] (+)= sum_{l < L} A[m * sm + l * sl] B[l * ldb + n] for m < MR and
// n < NV vectors (+= if add, else =). The MR x NV accumulators stay in registers over the loop over
// l; each step loads NV vectors of B and broadcasts MR elements of A.
template <int MR, int NV, typename T>
JGO_INLINE void GemmBlock(int64_t L, const T* A, int64_t sm, int64_t sl, const T* B, int64_t ldb, T* C, int64_t ldc,
                          bool add) {
  using V = typename Vec<T>::type;
  constexpr int64_t W = Vec<T>::kLanes;
  V acc[MR][NV] = {};
  if (add) {
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
      for (int n = 0; n < NV; ++n) std::memcpy(&acc[m][n], C + m * ldc + n * W, sizeof(V));
    }
  }
  for (int64_t l = 0; l < L; ++l) {
    V b[NV];
#pragma GCC unroll 4
    for (int n = 0; n < NV; ++n) std::memcpy(&b[n], B + l * ldb + n * W, sizeof(V));
#pragma GCC unroll 4
    for (int m = 0; m < MR; ++m) {
      const T s = A[m * sm + l * sl];
#pragma GCC unroll 4
      for (int n = 0; n < NV; ++n) acc[m][n] += s * b[n];
    }
  }
#pragma GCC unroll 4
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
    for (int n = 0; n < NV; ++n) std::memcpy(C + m * ldc + n * W, &acc[m][n], sizeof(V));
  }
}

template <int MR, typename T>
JGO_INLINE void GemmRows(int64_t nv, int64_t L, const T* A, int64_t sm, int64_t sl, const T* B, int64_t ldb, T* C,
                         int64_t ldc, bool add) {
  if (nv == 3) GemmBlock<MR, 3>(L, A, sm, sl, B, ldb, C, ldc, add);
  else if (nv == 2) GemmBlock<MR, 2>(L, A, sm, sl, B, ldb, C, ldc, add);
  else GemmBlock<MR, 1>(L, A, sm, sl, B, ldb, C, ldc, add);
}

// C[m * ldc + n] (+)= sum_{l < L} A[m * sm + l * sl] B[l * ldb + n] for m < M and n < N (+= if add,
// else =), N a multiple of Vec<T>::kLanes, in blocks of up to 4 rows by 3 vectors. Every element
// of C is summed over l in order (reproducible).
template <typename T>
JGO_INLINE void Gemm(int64_t M, int64_t N, int64_t L, const T* A, int64_t sm, int64_t sl, const T* B, int64_t ldb,
                     T* C, int64_t ldc, bool add) {
  constexpr int64_t W = Vec<T>::kLanes;
  for (int64_t v0 = 0, nv = N / W; v0 < nv;) {
    const int64_t blocks = (nv - v0 + 2) / 3;
    const int64_t v = (nv - v0 + blocks - 1) / blocks;  // even blocks: 4 vectors -> 2 + 2, 8 -> 3 + 3 + 2
    for (int64_t m = 0; m < M; m += 4) {
      const T* a = A + m * sm;
      const T* b = B + v0 * W;
      T* c = C + m * ldc + v0 * W;
      switch (std::min<int64_t>(4, M - m)) {
        case 4: GemmRows<4>(v, L, a, sm, sl, b, ldb, c, ldc, add); break;
        case 3: GemmRows<3>(v, L, a, sm, sl, b, ldb, c, ldc, add); break;
        case 2: GemmRows<2>(v, L, a, sm, sl, b, ldb, c, ldc, add); break;
        default: GemmRows<1>(v, L, a, sm, sl, b, ldb, c, ldc, add); break;
      }
    }
    v0 += v;
  }
}

}  // namespace jgo
