// Register-blocked small matrix products for the CPU kernels' per-row work, written with the
// GCC/Clang vector extensions on vectors of kVec bytes: 16 (SSE2 or NEON registers) in baseline
// code, 32 (ymm registers) in the AVX2 clones. Rows that these products read or write are padded
// to whole multiples of the widest vector (RoundUpToVec), so one layout serves both widths.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/vector_math.h"

namespace jgo {

template <typename T, int kVec>
struct Vec {
  typedef T type __attribute__((vector_size(kVec)));
  static constexpr int64_t kLanes = kVec / sizeof(T);
};

// n rounded up to whole 32-byte vectors of T.
template <typename T>
constexpr int64_t RoundUpToVec(int64_t n) {
  constexpr int64_t W = Vec<T, 32>::kLanes;
  return (n + W - 1) / W * W;
}

// <a, b> over n elements, n a multiple of RoundUpToVec's vectors: lane-wise partial sums, then the
// lanes in order (reproducible).
template <int kVec, typename T>
JGO_INLINE T VecDot(const T* a, const T* b, int64_t n) {
  using V = typename Vec<T, kVec>::type;
  V s = {};
  for (int64_t i = 0; i < n; i += Vec<T, kVec>::kLanes) {
    V x, y;
    std::memcpy(&x, a + i, sizeof(V));
    std::memcpy(&y, b + i, sizeof(V));
    s += x * y;
  }
  T r = s[0];
  for (int64_t i = 1; i < Vec<T, kVec>::kLanes; ++i) r += s[i];
  return r;
}

// One block of C: C[m * ldc + n] (+)= sum_{l < L} A[m * sm + l * sl] B[l * ldb + n] for m < MR and
// n < NV vectors (+= if add, else =). The MR x NV accumulators stay in registers over the loop over
// l; each step loads NV vectors of B and broadcasts MR elements of A.
template <int MR, int NV, int kVec, typename T>
JGO_INLINE void GemmBlock(int64_t L, const T* A, int64_t sm, int64_t sl, const T* B, int64_t ldb, T* C, int64_t ldc,
                          bool add) {
  using V = typename Vec<T, kVec>::type;
  constexpr int64_t W = Vec<T, kVec>::kLanes;
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

template <int MR, int kVec, typename T>
JGO_INLINE void GemmRows(int64_t nv, int64_t L, const T* A, int64_t sm, int64_t sl, const T* B, int64_t ldb, T* C,
                         int64_t ldc, bool add) {
  if (nv == 3) GemmBlock<MR, 3, kVec>(L, A, sm, sl, B, ldb, C, ldc, add);
  else if (nv == 2) GemmBlock<MR, 2, kVec>(L, A, sm, sl, B, ldb, C, ldc, add);
  else GemmBlock<MR, 1, kVec>(L, A, sm, sl, B, ldb, C, ldc, add);
}

// C[m * ldc + n] (+)= sum_{l < L} A[m * sm + l * sl] B[l * ldb + n] for m < M and n < N (+= if add,
// else =), N a multiple of RoundUpToVec's vectors, in blocks of up to 4 rows by 3 vectors. Every
// element of C is summed over l in order (reproducible).
template <int kVec, typename T>
JGO_INLINE void GemmBlocks(int64_t M, int64_t N, int64_t L, const T* A, int64_t sm, int64_t sl, const T* B,
                           int64_t ldb, T* C, int64_t ldc, bool add) {
  constexpr int64_t W = Vec<T, kVec>::kLanes;
  for (int64_t v0 = 0, nv = N / W; v0 < nv;) {
    const int64_t blocks = (nv - v0 + 2) / 3;
    const int64_t v = (nv - v0 + blocks - 1) / blocks;  // even blocks: 4 vectors -> 2 + 2, 8 -> 3 + 3 + 2
    for (int64_t m = 0; m < M; m += 4) {
      const T* a = A + m * sm;
      const T* b = B + v0 * W;
      T* c = C + m * ldc + v0 * W;
      switch (std::min<int64_t>(4, M - m)) {
        case 4: GemmRows<4, kVec>(v, L, a, sm, sl, b, ldb, c, ldc, add); break;
        case 3: GemmRows<3, kVec>(v, L, a, sm, sl, b, ldb, c, ldc, add); break;
        case 2: GemmRows<2, kVec>(v, L, a, sm, sl, b, ldb, c, ldc, add); break;
        default: GemmRows<1, kVec>(v, L, a, sm, sl, b, ldb, c, ldc, add); break;
      }
    }
    v0 += v;
  }
}

// GemmBlocks compiled once per element type and ISA, out of line: the 12 unrolled blocks are the bulk of a
// row walk's code, and inlined into every row walk (element type x index type x pass x ISA) they made the
// GNO kernels' file the longest compile of the build. A call per chunk of edges costs nothing measurable.
template <typename T>
__attribute__((noinline)) void GemmBaseline(int64_t M, int64_t N, int64_t L, const T* A, int64_t sm, int64_t sl,
                                            const T* B, int64_t ldb, T* C, int64_t ldc, bool add) {
  GemmBlocks<16>(M, N, L, A, sm, sl, B, ldb, C, ldc, add);
}
#ifdef JGO_AVX2_CLONES
template <typename T>
__attribute__((noinline)) JGO_AVX2_TARGET void GemmAvx2(int64_t M, int64_t N, int64_t L, const T* A, int64_t sm,
                                                        int64_t sl, const T* B, int64_t ldb, T* C, int64_t ldc,
                                                        bool add) {
  GemmBlocks<32>(M, N, L, A, sm, sl, B, ldb, C, ldc, add);
}
#endif

// GemmBlocks on vectors of kVec bytes: 32 from the AVX2 clones, 16 from baseline code.
template <int kVec, typename T>
JGO_INLINE void Gemm(int64_t M, int64_t N, int64_t L, const T* A, int64_t sm, int64_t sl, const T* B, int64_t ldb,
                     T* C, int64_t ldc, bool add) {
#ifdef JGO_AVX2_CLONES
  if constexpr (kVec == 32) return GemmAvx2(M, N, L, A, sm, sl, B, ldb, C, ldc, add);
#endif
  static_assert(kVec == 16 || kVec == 32, "Gemm: vectors of 16 or 32 bytes");
  if constexpr (kVec == 16) GemmBaseline(M, N, L, A, sm, sl, B, ldb, C, ldc, add);
}

}  // namespace jgo
