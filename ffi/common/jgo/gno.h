// Per-edge math of the graph neural operator (gno_conv), shared by cpu/gno.cc and cuda/gno.cu.
//
// Edge e = (j -> i) with geometry dx_e [d], source features f_j [c_in] and weight w_e:
//   a_e = U dx_e + b_u [H],   h_e = relu(a_e),   h~_e = [h_e, 1]   (the constant unit carries b_v)
//   kappa_e = V h_e + b_v = Vb h~_e,   Vb = [V | b_v]
//   matrix:   out_i[o] = sum_e w_e sum_{c,k} Vb[o, c, k] h~_e[k] f_j[c]   (Vb viewed [c_out, c_in, H+1])
//   diagonal: out_i[c] = sum_e w_e sum_k     Vb[c, k]    h~_e[k] f_j[c]   (Vb viewed [c, H+1])
// The kernels never form kappa_e. They accumulate per destination the outer product
//   A_i[c, k] = sum_e w_e f_j[c] h~_e[k]                    ([c_in, H+1]; per edge c_in (H+1) FMAs)
// and contract it with Vb once per row (matrix: c_out c_in (H+1) FMAs per row; diagonal: c (H+1)).
// The naive per-edge cost of the matrix kernel is c_out c_in H, so this wins whenever a row has
// more than about one edge.
//
// Backward, with G_i = d loss / d out_i (of the weighted sum):
//   grad_f[j][c] = sum_{o,k} Vb[o, c, k] B_j[o, k],   B_j[o, k] = sum_{e out of j} w_e G_i[o] h~_e[k]   (reverse CSR)
//   grad_Vb[o, c, k] = sum_j f_j[c] B_j[o, k]
//   t_e[k] = sum_c f_j[c] Q_i[c, k],  Q_i[c, k] = sum_o G_i[o] Vb[o, c, k]   (CSC; diagonal: Q_i[c,k] = G_i[c] Vb[c,k])
//   grad_w_e = <h~_e, t_e>,   ga_e[k] = w_e t_e[k] relu'(a_e[k])   (k < H)
//   grad_dx_e = U^T ga_e,   grad_U = sum_e ga_e dx_e^T,   grad_b_u = sum_e ga_e
#pragma once

#include <cstdint>

#include "jgo/math.h"

namespace jgo {

// The pre-activation a_k = <U[k], dx> + b_u[k] of hidden unit k.
template <typename T>
JGO_HD T GnoPre(const T* u_row, T b, const T* dx, int64_t d) {
  T a = b;
  for (int64_t m = 0; m < d; ++m) a += u_row[m] * dx[m];
  return a;
}

// The hidden unit relu(a) (0 at a = 0; NaN at NaN, as jax.nn.relu).
template <typename T>
JGO_HD T GnoHidden(T a) {
  return a < T(0) ? T(0) : a;
}

// d loss / d a_k = w t_k relu'(a_k); relu'(0) = relu'(NaN) = 0 (jax.nn.relu's derivative).
template <typename T>
JGO_HD T GnoPreGrad(T w, T t, T a) {
  return a > T(0) ? w * t : T(0);
}

}  // namespace jgo
