// Per-edge attention math shared by the CPU and CUDA handlers of the attention family (cpu/gat.cc,
// gatv2.cc, mha_simple.cc and their CUDA twins): the activation of the logits and its derivative,
// the online (single-pass) softmax of FlashAttention, and the per-edge backward terms.
//
// GAT (mha_gat), per head h and edge e = (j -> i):
//   p_e   = s_src[j,h] + s_dst[i,h] (+ s_edge[e,h])       pre-activation logit
//   z_e   = leaky_relu(p_e)                              logit
//   alpha = exp(z_e - lse[i,h])                          softmax over the in-edges of i
//   out[i,h,:] = sum_e alpha_e x[j,h,:]
// Backward with G = d out, delta[i,h] = <G[i,h], out[i,h]> - d lse[i,h]:
//   gp_e = alpha_e (<G[i,h], x[j,h]> - delta[i,h]) leaky_relu'(p_e)
//   d s_src[j] += gp_e, d s_dst[i] += gp_e, d s_edge[e] = gp_e, d x[j,h,:] += alpha_e G[i,h,:]
//
// Attention dropout (all three ops): the normalised weight alpha_e of (edge e, head h) is
// multiplied by a factor d_e = keep_e / (1 - rate) (DropoutFactor), a pure function of the key, e
// (input edge order) and h. The softmax's normaliser and lse are those of the undropped logits, so
// out[i] = sum_e alpha_e d_e v_e and, with G and delta as above (delta = <G, out> - d lse keeps its
// form), the backward only scales the value terms: dalpha_e = d_e <G[i,h], v_e>, d v_e += alpha_e d_e G.
#pragma once

#include <cmath>
#include <cstdint>

#include "jgo/math.h"
#include "jgo/philox.h"

namespace jgo {

JGO_HD float Log(float x) { return logf(x); }
JGO_HD double Log(double x) { return ::log(x); }

// LeakyReLU and its derivative; the derivative at 0 is the negative slope (PyTorch's choice).
template <typename T>
JGO_HD T LeakyRelu(T p, T slope) {
  return p > T(0) ? p : slope * p;
}
template <typename T>
JGO_HD T LeakyReluGrad(T p, T slope) {
  return p > T(0) ? T(1) : slope;
}

// GAT pre-activation p = s_src + s_dst (+ s_edge) and logit z = leaky_relu(p) of one (edge, head).
template <typename T>
JGO_HD T GatPre(T s_src, T s_dst, T s_edge) {
  return s_src + s_dst + s_edge;
}
template <typename T>
JGO_HD T GatLogit(T s_src, T s_dst, T s_edge, T slope) {
  return LeakyRelu(GatPre(s_src, s_dst, s_edge), slope);
}

// One step of the online softmax of one (destination, head), branch-free so that a loop over
// heads vectorises: the running maximum m and normaliser l take logit z; `scale` is the factor
// the accumulator must be multiplied by before adding `weight` times the new value. Before the
// first logit m = -inf and l = 0 (exp(-inf) = 0, or a denormal-sized factor with an exp that
// clamps its argument: either way the empty accumulator stays 0). A -inf logit weighs exactly 0,
// so while every logit seen is -inf, m stays -inf and the row stays empty (never exp(-inf - -inf)).
template <typename T, typename ExpFn>
JGO_HD void OnlineSoftmaxStep(T& m, T& l, T z, T& scale, T& weight, ExpFn exp_fn) {
  const T m_new = z > m ? z : m;
  scale = m == m_new ? T(1) : exp_fn(m - m_new);
  weight = z == -Infinity<T>() ? T(0) : exp_fn(z - m_new);
  l = l * scale + weight;
  m = m_new;
}

// The log-sum-exp m + log(l) of the logits (0 when nothing was seen; NaN for a NaN l, so the
// attention weights of such a row are NaN as in NumPy).
template <typename T>
JGO_HD T SoftmaxLse(T m, T l) {
  return l != T(0) ? m + Log(l) : T(0);
}

// d loss / d p_e of one (edge, head): alpha (dalpha - delta) leaky_relu'(p).
template <typename T>
JGO_HD T GatLogitGrad(T alpha, T dalpha, T delta, T p, T slope) {
  return alpha * (dalpha - delta) * LeakyReluGrad(p, slope);
}

// The dropout of one op call: the key's two words (nullptr: no dropout, every factor is 1), an
// edge-head pair is kept when the first Philox-4x32-10 word of the counter (h, e_lo, e_hi,
// kDropoutStream) is >= threshold = floor(rate * 2^32), and a kept weight is multiplied by
// scale = 1 / (1 - rate). jaxgraphops/reference.py (attention_dropout_factor) has the same bits.
struct Dropout {
  const uint32_t* key = nullptr;  // host memory for the CPU handlers, device memory for the CUDA ones
  uint32_t threshold = 0;
  double scale = 1.0;
};

constexpr uint32_t kDropoutStream = 0x64726F70u;  // "drop": the counter's last word

template <typename T>
JGO_HD T DropoutFactor(const Dropout& d, int64_t e, int64_t h) {
  if (d.key == nullptr) return T(1);
  const uint64_t u = static_cast<uint64_t>(e);
  const Philox4 r = Philox4x32(static_cast<uint32_t>(h), static_cast<uint32_t>(u), static_cast<uint32_t>(u >> 32),
                               kDropoutStream, d.key[0], d.key[1]);
  return r.v[0] >= d.threshold ? static_cast<T>(d.scale) : T(0);
}

// DropoutFactor where the kernel is instantiated with dropout (kDrop), else 1 with no random numbers: the
// CUDA kernels without dropout are the kernels from before dropout, registers included.
template <bool kDrop, typename T>
JGO_HD T DropoutFactorIf(const Dropout& d, int64_t e, int64_t h) {
  if constexpr (kDrop) {
    return DropoutFactor<T>(d, e, h);
  } else {
    return T(1);
  }
}

// Per-destination row of the backward pass: s_dst, lse and delta of every head, packed as
// [3, H] so that one gathered row serves an edge.
struct DstInfo {
  enum : int { kSDst = 0, kLse = 1, kDelta = 2, kCount = 3 };
};

}  // namespace jgo
