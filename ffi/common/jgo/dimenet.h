// Per-triplet math of the DimeNet++ triplet aggregation, shared by the CPU and CUDA handlers
// (cpu/dimenet.cc, cuda/dimenet.cu).
//
// A triplet t = (a = e_in = k->j, b = e_out = j->i) with C = n_emb, M = n_mid:
//   c_t    = <vec[a], vec[b]> / (|vec[a]| |vec[b]|),   Y_l = sqrt((2l+1)/4pi) P_l(c_t), l = 0..6
//   q_t[s] = R[a,s] Y_{s/6}(c_t)     (s < 42)          mid_t = W_a^T q_t   (M)
//   out[b] += X[a] (.) W_b mid_t                                            (C)
// Everything the kernels compute is a derivative of the scalar
//   S = sum_t <G[b], X[a] (.) W_b W_a^T q_t>,
// which is linear in each of R, X, W_a, W_b, G and nonlinear only in vec (through c_t). The
// kernels evaluate one Hessian-vector product H(u) u' of S at u = (vec, R, X, W_a, W_b, G) in the
// direction u' = (dvec, dR, dX, dW_a, dW_b, dG); an absent operand (nullptr) is zero. Forward and
// first-order gradients are special cases (see jaxgraphops/dimenet/_primitives.py). Per triplet:
//   u = G[b] (.) X[a]   h = W_b^T u   k = W_a h       gamma = sum_s R[a,s] Y'_l k[s]
//   du = dG[b] (.) X[a] + G[b] (.) dX[a]   dh = W_b^T du + dW_b^T u   dk = W_a dh + dW_a h
//   dY = Y' dc   dq = dR[a] (.) Y + R[a] (.) dY   dmid = W_a^T dq + dW_a^T q
//   d gamma = sum_s (dR[a,s] Y'_l k[s] + R[a,s] Y''_l dc k[s] + R[a,s] Y'_l dk[s])
// and the components of H u':
//   G:   X'[a] (.) proj + X[a] (.) dproj        (proj = W_b mid, dproj = W_b dmid + dW_b mid)
//   X:   dG[b] (.) proj + G[b] (.) dproj        R: dY_l k + Y_l dk
//   W_a: dq (x) h + q (x) dh                    W_b: du (x) mid + u (x) dmid
//   vec[a]: dgamma dc/dvec[a] + gamma d(dc/dvec[a]),   vec[b] likewise.
#pragma once

#include <cmath>
#include <cstdint>

#include "jgo/math.h"

namespace jgo {

constexpr int kSpherical = 7, kRadial = 6, kBasis = kSpherical * kRadial;

// Bits of the `outputs` attribute: which components of H u' a call computes.
enum DimenetOutput : int64_t {
  kOutVec = 1, kOutSbf = 2, kOutEmb = 4, kOutWa = 8, kOutWb = 16, kOutGrad = 32,
};

template <typename T>
struct DimenetOperands {
  const T *vec, *sbf, *emb, *wa, *wb, *grad;          // primal u; emb and grad may be null
  const T *dvec, *dsbf, *demb, *dwa, *dwb, *dgrad;    // direction u'; any may be null
  int64_t C, M;
};

// Which per-triplet terms exist (their inputs are present) and are needed.
struct DimenetPlan {
  bool dvec, dq, dmid, h, dh, dk, mid, coef;
};

template <typename T>
JGO_HD DimenetPlan MakePlan(const DimenetOperands<T>& o, int64_t outputs) {
  DimenetPlan p;
  p.dvec = o.dvec != nullptr;
  p.dq = o.dsbf != nullptr || p.dvec;
  p.dmid = p.dq || o.dwa != nullptr;
  p.h = o.grad != nullptr && o.emb != nullptr;
  p.dh = (o.dgrad != nullptr && o.emb != nullptr) || (o.grad != nullptr && o.demb != nullptr) ||
         (o.dwb != nullptr && p.h);
  p.dk = p.dh || (o.dwa != nullptr && p.h);
  p.mid = (outputs & (kOutGrad | kOutEmb | kOutWb)) != 0;
  p.coef = (outputs & kOutVec) != 0;
  return p;
}

// The angle of a triplet, the gradients of c in vec[a] and vec[b] and, with a direction
// (dva, dvb), the directional derivatives dc, dga, dgb of c, ga and gb.
template <typename T>
struct TripletAngle {
  T c, dc, ga[3], gb[3], dga[3], dgb[3];
};

template <typename T>
JGO_HD void AngleOf(const T* va, const T* vb, const T* dva, const T* dvb, bool with_direction, TripletAngle<T>& g) {
  const T A = sqrt(va[0] * va[0] + va[1] * va[1] + va[2] * va[2]);
  const T B = sqrt(vb[0] * vb[0] + vb[1] * vb[1] + vb[2] * vb[2]);
  T ah[3], bh[3];
  for (int i = 0; i < 3; ++i) {
    ah[i] = va[i] / A;
    bh[i] = vb[i] / B;
  }
  g.c = ah[0] * bh[0] + ah[1] * bh[1] + ah[2] * bh[2];
  for (int i = 0; i < 3; ++i) {
    g.ga[i] = (bh[i] - g.c * ah[i]) / A;
    g.gb[i] = (ah[i] - g.c * bh[i]) / B;
  }
  g.dc = T(0);
  if (!with_direction) return;
  const T dA = ah[0] * dva[0] + ah[1] * dva[1] + ah[2] * dva[2];
  const T dB = bh[0] * dvb[0] + bh[1] * dvb[1] + bh[2] * dvb[2];
  T dah[3], dbh[3];
  for (int i = 0; i < 3; ++i) {
    dah[i] = (dva[i] - ah[i] * dA) / A;
    dbh[i] = (dvb[i] - bh[i] * dB) / B;
    g.dc += g.ga[i] * dva[i] + g.gb[i] * dvb[i];
  }
  for (int i = 0; i < 3; ++i) {
    g.dga[i] = (dbh[i] - g.dc * ah[i] - g.c * dah[i] - g.ga[i] * dA) / A;
    g.dgb[i] = (dah[i] - g.dc * bh[i] - g.c * dbh[i] - g.gb[i] * dB) / B;
  }
}

// Y_l(c), Y_l'(c), Y_l''(c) for l = 0..6 (Legendre recurrences, then the normalisation).
template <typename T>
JGO_HD void SphericalY(T c, T* y, T* y1, T* y2) {
  T p[kSpherical], p1[kSpherical], p2[kSpherical];
  p[0] = T(1), p[1] = c;
  p1[0] = T(0), p1[1] = T(1);
  p2[0] = T(0), p2[1] = T(0);
  for (int l = 1; l < kSpherical - 1; ++l) {
    p[l + 1] = (T(2 * l + 1) * c * p[l] - T(l) * p[l - 1]) / T(l + 1);
    p1[l + 1] = p1[l - 1] + T(2 * l + 1) * p[l];
    p2[l + 1] = p2[l - 1] + T(2 * l + 1) * p1[l];
  }
  for (int l = 0; l < kSpherical; ++l) {
    const T n = static_cast<T>(sqrt((2.0 * l + 1.0) / (4.0 * 3.14159265358979323846)));
    y[l] = n * p[l];
    y1[l] = n * p1[l];
    y2[l] = n * p2[l];
  }
}

// Per-triplet intermediates; the M-sized ones live in caller-provided scratch (4 M values).
template <typename T>
struct TripletTerms {
  TripletAngle<T> angle;
  T y[kSpherical], y1[kSpherical], y2[kSpherical];
  T q[kBasis], dq[kBasis], k[kBasis], dk[kBasis];
  T *mid, *dmid, *h, *dh;  // [M] each
  T gamma, dgamma;
};

template <typename T>
JGO_HD void BindScratch(TripletTerms<T>& t, T* scratch, int64_t M) {
  t.mid = scratch;
  t.dmid = scratch + M;
  t.h = scratch + 2 * M;
  t.dh = scratch + 3 * M;
}

// The geometry and the spherical part (everything that depends on vec).
template <typename T>
JGO_HD void TripletAngular(const DimenetOperands<T>& o, const DimenetPlan& p, int64_t a, int64_t b,
                           TripletTerms<T>& t) {
  AngleOf(o.vec + 3 * a, o.vec + 3 * b, p.dvec ? o.dvec + 3 * a : nullptr, p.dvec ? o.dvec + 3 * b : nullptr, p.dvec,
          t.angle);
  SphericalY(t.angle.c, t.y, t.y1, t.y2);
}

// The projections of a triplet whose angular part is in t: q, mid (and their directional
// derivatives), and, for the gradient-type outputs, h, k, gamma (and theirs).
template <typename T>
JGO_HD void TripletCore(const DimenetOperands<T>& o, const DimenetPlan& p, int64_t a, int64_t b, bool backward,
                        TripletTerms<T>& t) {
  const int64_t C = o.C, M = o.M;
  const T* r = o.sbf + kBasis * a;
  const T* dr = o.dsbf ? o.dsbf + kBasis * a : nullptr;
  for (int s = 0; s < kBasis; ++s) {
    const int l = s / kRadial;
    t.q[s] = r[s] * t.y[l];
    if (p.dq) t.dq[s] = (dr ? dr[s] * t.y[l] : T(0)) + (p.dvec ? r[s] * t.y1[l] * t.angle.dc : T(0));
  }
  if (p.mid || backward) {
    for (int64_t m = 0; m < M; ++m) t.mid[m] = T(0), t.dmid[m] = T(0);
    for (int s = 0; s < kBasis; ++s) {
      const T* w = o.wa + s * M;
      const T qs = t.q[s];
      for (int64_t m = 0; m < M; ++m) t.mid[m] += w[m] * qs;
      if (p.dq) {
        const T dqs = t.dq[s];
        for (int64_t m = 0; m < M; ++m) t.dmid[m] += w[m] * dqs;
      }
      if (o.dwa) {
        const T* dw = o.dwa + s * M;
        for (int64_t m = 0; m < M; ++m) t.dmid[m] += dw[m] * qs;
      }
    }
  }
  if (!backward) return;
  for (int64_t m = 0; m < M; ++m) t.h[m] = T(0), t.dh[m] = T(0);
  if (p.h || p.dh) {
    const T* x = o.emb ? o.emb + C * a : nullptr;
    const T* dx = o.demb ? o.demb + C * a : nullptr;
    const T* g = o.grad ? o.grad + C * b : nullptr;
    const T* dg = o.dgrad ? o.dgrad + C * b : nullptr;
    for (int64_t c = 0; c < C; ++c) {
      const T u = p.h ? g[c] * x[c] : T(0);
      const T du = (dg && x ? dg[c] * x[c] : T(0)) + (g && dx ? g[c] * dx[c] : T(0));
      const T* w = o.wb + c * M;
      if (p.h)
        for (int64_t m = 0; m < M; ++m) t.h[m] += w[m] * u;
      for (int64_t m = 0; m < M; ++m) t.dh[m] += w[m] * du;
      if (o.dwb && p.h) {
        const T* dw = o.dwb + c * M;
        for (int64_t m = 0; m < M; ++m) t.dh[m] += dw[m] * u;
      }
    }
  }
  t.gamma = T(0), t.dgamma = T(0);
  const T* r1 = o.sbf + kBasis * a;
  for (int s = 0; s < kBasis; ++s) {
    const T* w = o.wa + s * M;
    T ks = T(0), dks = T(0);
    for (int64_t m = 0; m < M; ++m) {
      ks += w[m] * t.h[m];
      dks += w[m] * t.dh[m];
    }
    if (o.dwa && p.h) {
      const T* dw = o.dwa + s * M;
      for (int64_t m = 0; m < M; ++m) dks += dw[m] * t.h[m];
    }
    t.k[s] = ks;
    t.dk[s] = dks;
    if (p.coef) {
      const int l = s / kRadial;
      t.gamma += r1[s] * t.y1[l] * ks;
      t.dgamma += r1[s] * (t.y1[l] * dks + t.y2[l] * t.angle.dc * ks) + (dr ? dr[s] * t.y1[l] * ks : T(0));
    }
  }
}

// proj[c] = <W_b[c], mid> and dproj[c] = <W_b[c], dmid> + <dW_b[c], mid>.
template <typename T>
JGO_HD void ProjOf(const DimenetOperands<T>& o, const DimenetPlan& p, const TripletTerms<T>& t, int64_t c, T& proj,
                   T& dproj) {
  const T* w = o.wb + c * o.M;
  proj = T(0), dproj = T(0);
  for (int64_t m = 0; m < o.M; ++m) {
    proj += w[m] * t.mid[m];
    if (p.dmid) dproj += w[m] * t.dmid[m];
  }
  if (o.dwb) {
    const T* dw = o.dwb + c * o.M;
    for (int64_t m = 0; m < o.M; ++m) dproj += dw[m] * t.mid[m];
  }
}

}  // namespace jgo
