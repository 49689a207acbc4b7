"""Pure-JAX oracles of the DimeNet++ triplet aggregation (notes §7.6): they materialise per-triplet
tensors (``T x 42``, ``T x n_emb``), so they serve tests, benchmarks and higher-order derivatives."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from .basis import N_RADIAL, N_SPHERICAL

__all__ = ["agg_edge_to_edge_ref", "fold_first_projection", "legendre_sph", "triplet_cos", "triplet_form"]


def legendre_sph(c):
    """``Y_l(c) = sqrt((2l+1)/4pi) P_l(c)`` for ``l = 0..6``: ``[..., 7]``."""
    p = [jnp.ones_like(c), c]
    for l in range(1, N_SPHERICAL - 1):
        p.append(((2 * l + 1) * c * p[l] - l * p[l - 1]) / (l + 1))
    return jnp.stack([math.sqrt((2 * l + 1) / (4 * math.pi)) * p[l] for l in range(N_SPHERICAL)], axis=-1)


def triplet_cos(vec, e_in, e_out):
    """``cos theta_t = <vec[e_out], vec[e_in]> / (|vec[e_out]| |vec[e_in]|)``: ``[T]``."""
    a, b = vec[e_in], vec[e_out]
    return jnp.sum(a * b, -1) / (jnp.linalg.norm(a, axis=-1) * jnp.linalg.norm(b, axis=-1))


def _projections(vec, sbf_rad, w_a, w_b, e_in, e_out):
    y = legendre_sph(triplet_cos(vec, e_in, e_out))  # [T, 7]
    sbf = (sbf_rad[e_in].reshape(-1, N_SPHERICAL, N_RADIAL) * y[:, :, None]).reshape(-1, N_SPHERICAL * N_RADIAL)
    return (sbf @ w_a) @ w_b.T  # [T, C]


def agg_edge_to_edge_ref(vec, sbf_rad, emb, weights, triplets):
    """``out [E, n_emb]``: the reference of :func:`jaxgraphops.dimenet.agg_edge_to_edge`."""
    e_in, e_out = triplets.pairs()
    k = N_SPHERICAL * N_RADIAL
    proj = _projections(vec, sbf_rad, weights[:k], weights[k:], e_in, e_out)
    return jax.ops.segment_sum(emb[e_in] * proj, e_out, num_segments=vec.shape[0])


def fold_first_projection(sbf_rad, w_a):
    """``A [E, 7 * n_mid]``: ``A[e, l, :] = sum_n sbf_rad[e, l*6+n] W_a[l*6+n, :]``, so that
    ``W_a^T sbf_t = sum_l Y_l(cos theta_t) A[e_in, l, :]``."""
    e, m = sbf_rad.shape[0], w_a.shape[1]
    a = jnp.einsum("eln,lnm->elm", sbf_rad.reshape(e, N_SPHERICAL, N_RADIAL), w_a.reshape(N_SPHERICAL, N_RADIAL, m))
    return a.reshape(e, N_SPHERICAL * m)


def triplet_form(vec, a, emb, w_b, grad, triplets):
    """The scalar ``S = <grad, agg_edge_to_edge(vec, sbf_rad, emb, [w_a; w_b])>`` with
    ``a = fold_first_projection(sbf_rad, w_a)``.

    ``S`` is linear in each of ``a, emb, w_b, grad`` and nonlinear only in ``vec``; the op is
    ``dS/dgrad`` and all its derivatives are derivatives of ``S``.
    """
    e_in, e_out = triplets.pairs()
    y = legendre_sph(triplet_cos(vec, e_in, e_out))  # [T, 7]
    mid = jnp.einsum("tl,tlm->tm", y, a[e_in].reshape(y.shape[0], N_SPHERICAL, -1))
    return jnp.sum(grad[e_out] * emb[e_in] * (mid @ w_b.T))
