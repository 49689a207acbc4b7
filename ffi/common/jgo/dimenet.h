// Per-triplet math of the DimeNet++ triplet aggregation, shared by the CPU and CUDA handlers
// (cpu/dimenet.cc, cuda/dimenet.cu).
//
// The first projection is folded per edge (in JAX): A[e,l,:] = sum_n sbf_rad[e,l*6+n] W_a[l*6+n,:],
// so W_a^T (sbf_rad[a] * Y) = sum_l Y_l A[a,l,:]. A triplet t = (a = e_in = k->j, b = e_out = j->i),
// C = n_emb, M = n_mid:
//   c_t   = <vec[a], vec[b]> / (|vec[a]| |vec[b]|),   Y_l = sqrt((2l+1)/4pi) P_l(c_t), l = 0..6
//   mid_t = sum_l Y_l A[a,l,:]   (M)        out[b] += X[a] (.) W_b mid_t   (C)
// Everything the kernels compute is a derivative of the scalar
//   S = sum_t <G[b], X[a] (.) W_b mid_t> = sum_t <h_t, mid_t>,   h_t = W_b^T (G[b] (.) X[a]),
// which is linear in each of A, X, W_b, G and nonlinear only in vec (through c_t). A kernel call
// evaluates components of one Hessian-vector product H(u) u' of S at u = (vec, A, X, W_b, G) in
// the direction u' = (dvec, dA, dX, dW_b, dG); an absent operand (nullptr) is zero. The forward
// and first-order gradients are special cases (jaxgraphops/dimenet/_primitives.py). Per triplet:
//   u = G[b] (.) X[a]    du = dG[b] (.) X[a] + G[b] (.) dX[a]
//   h = W_b^T u          dh = W_b^T du + dW_b^T u
//   dY = Y' dc           dmid = sum_l (dY_l A[a,l] + Y_l dA[a,l])
//   proj = W_b mid       dproj = W_b dmid + dW_b mid
//   gamma = dS_t/dc = sum_l Y'_l <A[a,l], h>
//   dgamma = sum_l (Y''_l dc <A[a,l], h> + Y'_l <dA[a,l], h> + Y'_l <A[a,l], dh>)
// and the components of H u':
//   G[b]: dX[a] (.) proj + X[a] (.) dproj       X[a]: dG[b] (.) proj + G[b] (.) dproj
//   A[a,l,:]: dY_l h + Y_l dh                   W_b: du (x) mid + u (x) dmid
//   vec[a]: dgamma dc/dvec[a] + gamma d(dc/dvec[a]),   vec[b] likewise.
#pragma once

#include <cmath>
#include <cstdint>

#include "jgo/math.h"

// Forced inlining, so the CPU kernels' ISA-specific clones (cpu/dimenet.cc) compile this math
// for their instruction set.
#ifdef __CUDACC__
#define JGO_DN_INLINE __host__ __device__ __forceinline__
#else
#define JGO_DN_INLINE inline __attribute__((always_inline))
#endif


namespace jgo {

constexpr int kSpherical = 7;

// Bits of the `outputs` attribute: which components of H u' a call computes.
enum DimenetOutput : int64_t { kOutVec = 1, kOutA = 2, kOutEmb = 4, kOutWb = 8, kOutGrad = 16 };

// Row-major operands; wbt/dwbt are W_b^T and dW_b^T ([M, C]) for loops that run along C.
template <typename T>
struct DimenetOperands {
  const T *vec, *a, *emb, *wb, *wbt, *grad;         // the point u; emb and grad may be null
  const T *dvec, *da, *demb, *dwb, *dwbt, *dgrad;   // the direction u'; any may be null
  int64_t C, M;
};

// Which per-triplet terms exist (their inputs are present).
struct DimenetPlan {
  bool dvec, dmid, h, dh;
};

template <typename T>
JGO_DN_INLINE DimenetPlan MakePlan(const DimenetOperands<T>& o) {
  DimenetPlan p;
  p.dvec = o.dvec != nullptr;
  p.dmid = p.dvec || o.da != nullptr;
  p.h = o.grad != nullptr && o.emb != nullptr;
  p.dh = (o.dgrad != nullptr && o.emb != nullptr) || (o.grad != nullptr && o.demb != nullptr) ||
         (o.dwb != nullptr && p.h);
  return p;
}

// An edge vector as its unit vector and inverse length.
template <typename T>
struct EdgeDir {
  T u[3], inv;
};

template <typename T>
JGO_DN_INLINE EdgeDir<T> DirOf(const T* v) {
  EdgeDir<T> d;
  d.inv = T(1) / sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  for (int i = 0; i < 3; ++i) d.u[i] = v[i] * d.inv;
  return d;
}

// The angle of a triplet, the gradients ga, gb of c in vec[a] and vec[b] and, with a direction
// (dva, dvb), the directional derivatives dc, dga, dgb.
template <typename T>
struct TripletAngle {
  T c, dc, ga[3], gb[3], dga[3], dgb[3];
};

template <typename T>
JGO_DN_INLINE void AngleOf(const EdgeDir<T>& da, const EdgeDir<T>& db, const T* dva, const T* dvb,
                           TripletAngle<T>& g) {
  const T *ah = da.u, *bh = db.u;
  g.c = ah[0] * bh[0] + ah[1] * bh[1] + ah[2] * bh[2];
  for (int i = 0; i < 3; ++i) {
    g.ga[i] = (bh[i] - g.c * ah[i]) * da.inv;
    g.gb[i] = (ah[i] - g.c * bh[i]) * db.inv;
  }
  g.dc = T(0);
  if (dva == nullptr) {
    for (int i = 0; i < 3; ++i) g.dga[i] = T(0), g.dgb[i] = T(0);
    return;
  }
  const T dA = ah[0] * dva[0] + ah[1] * dva[1] + ah[2] * dva[2];
  const T dB = bh[0] * dvb[0] + bh[1] * dvb[1] + bh[2] * dvb[2];
  T dah[3], dbh[3];
  for (int i = 0; i < 3; ++i) {
    dah[i] = (dva[i] - ah[i] * dA) * da.inv;
    dbh[i] = (dvb[i] - bh[i] * dB) * db.inv;
    g.dc += g.ga[i] * dva[i] + g.gb[i] * dvb[i];
  }
  for (int i = 0; i < 3; ++i) {
    g.dga[i] = (dbh[i] - g.dc * ah[i] - g.c * dah[i] - g.ga[i] * dA) * da.inv;
    g.dgb[i] = (dah[i] - g.dc * bh[i] - g.c * dbh[i] - g.gb[i] * dB) * db.inv;
  }
}

// sqrt((2l+1)/(4 pi)), the normalisation of Y_l.
JGO_DN_INLINE double YNorm(int l) {
  switch (l) {
    case 0: return 0.28209479177387814;
    case 1: return 0.4886025119029199;
    case 2: return 0.6307831305050401;
    case 3: return 0.7463526651802308;
    case 4: return 0.8462843753216345;
    case 5: return 0.9356025796273888;
    default: return 1.0171072362820548;
  }
}

// Y_l(c) and, up to `order`, Y_l'(c) and Y_l''(c) for l = 0..6 (Legendre recurrences with
// constant coefficients once the fixed-length loops are unrolled, then the normalisation).
template <typename T>
JGO_DN_INLINE void SphericalY(T c, int order, T* y, T* y1, T* y2) {
  T p[kSpherical], p1[kSpherical], p2[kSpherical];
  p[0] = T(1), p[1] = c;
  p1[0] = T(0), p1[1] = T(1);
  p2[0] = T(0), p2[1] = T(0);
  for (int l = 1; l < kSpherical - 1; ++l) {
    p[l + 1] = static_cast<T>((2.0 * l + 1.0) / (l + 1.0)) * c * p[l] - static_cast<T>(l / (l + 1.0)) * p[l - 1];
    if (order > 0) p1[l + 1] = p1[l - 1] + T(2 * l + 1) * p[l];
    if (order > 1) p2[l + 1] = p2[l - 1] + T(2 * l + 1) * p1[l];
  }
  for (int l = 0; l < kSpherical; ++l) {
    const T n = static_cast<T>(YNorm(l));
    y[l] = n * p[l];
    y1[l] = order > 0 ? n * p1[l] : T(0);
    y2[l] = order > 1 ? n * p2[l] : T(0);
  }
}

// out[m] += sum_c w[c, m] s[c] for a fixed M, in four independent register accumulators.
template <int kM, typename T>
JGO_DN_INLINE void AccumulateRows(const T* __restrict__ w, const T* __restrict__ s, int64_t C, T* out) {
  T a0[kM], a1[kM], a2[kM], a3[kM];
  for (int m = 0; m < kM; ++m) a0[m] = a1[m] = a2[m] = a3[m] = T(0);
  int64_t c = 0;
  for (; c + 4 <= C; c += 4) {
    const T *w0 = w + c * kM, *w1 = w0 + kM, *w2 = w1 + kM, *w3 = w2 + kM;
    const T s0 = s[c], s1 = s[c + 1], s2 = s[c + 2], s3 = s[c + 3];
    for (int m = 0; m < kM; ++m) {
      a0[m] += w0[m] * s0;
      a1[m] += w1[m] * s1;
      a2[m] += w2[m] * s2;
      a3[m] += w3[m] * s3;
    }
  }
  for (; c < C; ++c)
    for (int m = 0; m < kM; ++m) a0[m] += w[c * kM + m] * s[c];
  for (int m = 0; m < kM; ++m) out[m] += (a0[m] + a1[m]) + (a2[m] + a3[m]);
}

// Per-triplet terms; the M-sized vectors point into caller storage (4 M values, see Bind).
// kM > 0 fixes n_mid at compile time (the loops over M unroll and vectorise).
template <typename T, int kM>
struct Triplet {
  TripletAngle<T> angle;
  T y[kSpherical], y1[kSpherical], y2[kSpherical], dy[kSpherical];
  T *mid, *dmid, *h, *dh;
  T gamma, dgamma;
  int64_t M;
  T* features = nullptr;  // optional [2 C] scratch: u and du precomputed in vectorisable loops

  JGO_DN_INLINE void Bind(T* storage, int64_t m) {
    M = kM > 0 ? kM : m;
    mid = storage, dmid = storage + M, h = storage + 2 * M, dh = storage + 3 * M;
  }
  JGO_DN_INLINE int64_t Mid() const { return kM > 0 ? kM : M; }

  // The angle from the directions of vec[a] and vec[b], and its spherical functions up to the
  // derivative `order` (1 for a direction in vec or a vec output, 2 for both).
  JGO_DN_INLINE void Angular(const DimenetOperands<T>& o, const DimenetPlan& p, int64_t a, int64_t b,
                             const EdgeDir<T>& da, const EdgeDir<T>& db, int order) {
    AngleOf(da, db, p.dvec ? o.dvec + 3 * a : nullptr, p.dvec ? o.dvec + 3 * b : nullptr, angle);
    SphericalY(angle.c, order, y, y1, y2);
    for (int l = 0; l < kSpherical; ++l) dy[l] = p.dvec ? y1[l] * angle.dc : T(0);
  }

  // mid and dmid (dmid has no dW_b term: dproj = W_b dmid + dW_b mid).
  JGO_DN_INLINE void Project(const DimenetOperands<T>& o, const DimenetPlan& p, int64_t a) {
    if constexpr (kM > 0) {
      T ml[kM], dml[kM];
      ProjectInto(o, p, a, ml, dml);
      for (int m = 0; m < kM; ++m) mid[m] = ml[m], dmid[m] = dml[m];
    } else {
      ProjectInto(o, p, a, mid, dmid);
    }
  }

  JGO_DN_INLINE void ProjectInto(const DimenetOperands<T>& o, const DimenetPlan& p, int64_t a, T* ml, T* dml) const {
    const int64_t m_n = Mid();
    const T* ar = o.a + kSpherical * m_n * a;
    const T* dar = o.da ? o.da + kSpherical * m_n * a : nullptr;
    for (int64_t m = 0; m < m_n; ++m) ml[m] = T(0), dml[m] = T(0);
    // One loop per term (no branch inside), so each vectorises along M.
    for (int l = 0; l < kSpherical; ++l)
      for (int64_t m = 0; m < m_n; ++m) ml[m] += y[l] * ar[l * m_n + m];
    if (p.dvec)
      for (int l = 0; l < kSpherical; ++l)
        for (int64_t m = 0; m < m_n; ++m) dml[m] += dy[l] * ar[l * m_n + m];
    if (dar)
      for (int l = 0; l < kSpherical; ++l)
        for (int64_t m = 0; m < m_n; ++m) dml[m] += y[l] * dar[l * m_n + m];
  }

  // h and dh over the C features, then gamma and dgamma.
  JGO_DN_INLINE void Backproject(const DimenetOperands<T>& o, const DimenetPlan& p, int64_t a, int64_t b) {
    if constexpr (kM > 0) {
      T hl[kM], dhl[kM];
      BackprojectInto(o, p, a, b, hl, dhl);
      for (int m = 0; m < kM; ++m) h[m] = hl[m], dh[m] = dhl[m];
    } else {
      BackprojectInto(o, p, a, b, h, dh);
    }
    const int64_t m_n = Mid();
    const T* ar = o.a + kSpherical * m_n * a;
    const T* dar = o.da ? o.da + kSpherical * m_n * a : nullptr;
    gamma = T(0), dgamma = T(0);
    for (int l = 0; l < kSpherical; ++l) {
      const T* al = ar + l * m_n;
      T ah = T(0), adh = T(0), dah = T(0);
      for (int64_t m = 0; m < m_n; ++m) {
        ah += al[m] * h[m];
        adh += al[m] * dh[m];
      }
      if (dar && p.h)
        for (int64_t m = 0; m < m_n; ++m) dah += dar[l * m_n + m] * h[m];
      gamma += y1[l] * ah;
      dgamma += y2[l] * angle.dc * ah + y1[l] * (dah + adh);
    }
  }

  // h = W_b^T u and dh = W_b^T du + dW_b^T u, into hl, dhl. With kM > 0 the sums over C run in
  // kLanes independent accumulators (registers), so consecutive FMAs do not wait on each other.
  static constexpr int kLanes = kM > 0 ? 4 : 1;
  JGO_DN_INLINE void BackprojectInto(const DimenetOperands<T>& o, const DimenetPlan& p, int64_t a, int64_t b, T* hl,
                                     T* dhl) const {
    const int64_t m_n = Mid(), C = o.C;
    constexpr int kW = kM > 0 ? kM : 1;
    T h4[kLanes][kW], dh4[kLanes][kW];
    for (int j = 0; j < kLanes; ++j)
      for (int m = 0; m < kW; ++m) h4[j][m] = T(0), dh4[j][m] = T(0);
    for (int64_t m = 0; m < m_n; ++m) hl[m] = T(0), dhl[m] = T(0);
    if (!p.h && !p.dh) return;
    const T* x = o.emb ? o.emb + C * a : nullptr;
    const T* dx = o.demb ? o.demb + C * a : nullptr;
    const T* g = o.grad ? o.grad + C * b : nullptr;
    const T* dg = o.dgrad ? o.dgrad + C * b : nullptr;
    const bool du_g = dg && x, du_x = g && dx;
    auto step = [&](int64_t c, T u, T du, T* hj, T* dhj) {
      const T* w = o.wb + c * m_n;
      if (p.h) {
        for (int64_t m = 0; m < m_n; ++m) hj[m] += w[m] * u;
        if (o.dwb) {
          const T* dw = o.dwb + c * m_n;
          for (int64_t m = 0; m < m_n; ++m) dhj[m] += dw[m] * u;
        }
      }
      if (du_g || du_x)
        for (int64_t m = 0; m < m_n; ++m) dhj[m] += w[m] * du;
    };
    auto u_of = [&](int64_t c) { return p.h ? g[c] * x[c] : T(0); };
    auto du_of = [&](int64_t c) { return (du_g ? dg[c] * x[c] : T(0)) + (du_x ? g[c] * dx[c] : T(0)); };
    if constexpr (kM > 0) {
      if (features) {  // contiguous u, du, then register-blocked sums over C
        T *ub = features, *dub = features + C;
        for (int64_t c = 0; c < C; ++c) ub[c] = u_of(c), dub[c] = du_of(c);
        if (p.h) AccumulateRows<kM>(o.wb, ub, C, hl);
        if (p.h && o.dwb) AccumulateRows<kM>(o.dwb, ub, C, dhl);
        if (du_g || du_x) AccumulateRows<kM>(o.wb, dub, C, dhl);
        return;
      }
      int64_t c = 0;
      for (; c + kLanes <= C; c += kLanes)
        for (int j = 0; j < kLanes; ++j) step(c + j, u_of(c + j), du_of(c + j), h4[j], dh4[j]);
      for (; c < C; ++c) step(c, u_of(c), du_of(c), h4[0], dh4[0]);
      for (int m = 0; m < kM; ++m) {
        hl[m] = (h4[0][m] + h4[1][m]) + (h4[2][m] + h4[3][m]);
        dhl[m] = (dh4[0][m] + dh4[1][m]) + (dh4[2][m] + dh4[3][m]);
      }
    } else {
      for (int64_t c = 0; c < C; ++c) step(c, u_of(c), du_of(c), hl, dhl);
    }
  }
};

}  // namespace jgo
