"""``agg_edge_to_edge``: the fused DimeNet++ triplet aggregation (notes §7.3)."""

from __future__ import annotations

import jax.numpy as jnp

from ..ops._primitive_utils import unread_rows_filled
from ..ops._public_op import public_op
from ..ops._rows_primitives import rows_matmul
from .._checks import check_choice
from ._primitives import aggregate
from .basis import N_RADIAL, N_SPHERICAL
from .reference import agg_edge_to_edge_ref
from .triplets import Triplets

_K = N_SPHERICAL * N_RADIAL


def _fold_first_projection(sbf_rad, w_a):
    """``reference.fold_first_projection`` (``A [E, 7 * n_mid]``) whose gradient for ``W_a``, a
    sum over all edges, is the fixed-order ``rows_dot`` (bitwise the same on any thread count)."""
    e, m = sbf_rad.shape[0], w_a.shape[1]
    a = rows_matmul(sbf_rad.reshape(e, N_SPHERICAL, N_RADIAL), w_a.reshape(N_SPHERICAL, N_RADIAL, m))
    return a.reshape(e, N_SPHERICAL * m)


def _float(name, x, shape):
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"agg_edge_to_edge: {name} must be a floating-point array, got dtype {x.dtype}")
    if x.ndim != len(shape) or any(want is not None and got != want for got, want in zip(x.shape, shape)):
        dims = ", ".join("?" if w is None else str(w) for w in shape)
        raise ValueError(f"agg_edge_to_edge: {name} must be [{dims}], got shape {x.shape}")
    return x


@public_op
def agg_edge_to_edge(vec, sbf_rad, emb, weights, triplets: Triplets, *, impl: str | None = None):
    """The triplet (edge-to-edge) aggregation of a DimeNet++ interaction block.

    For every triplet ``t = (e_in = k->j, e_out = j->i)`` (``k != i``) of ``triplets``::

        cos theta_t = <vec[e_out], vec[e_in]> / (|vec[e_out]| |vec[e_in]|)
        sbf_t[l*6+n] = sbf_rad[e_in, l*6+n] Y_l(cos theta_t),   Y_l = sqrt((2l+1)/4pi) P_l
        out[e_out] += emb[e_in] * (W_b (W_a^T sbf_t)),          W_a = weights[:42], W_b = weights[42:]

    Args:
      vec: ``[E, 3]`` edge vectors ``pos[src] - pos[dst]`` (non-zero).
      sbf_rad: ``[E, 42]`` radial part of the spherical basis (``radial_basis``).
      emb: ``[E, n_emb]`` edge embeddings.
      weights: ``[42 + n_emb, n_mid]``.
      triplets: from :func:`triplets` of the graph whose edges index the rows.
      impl: None (fused kernels) or ``"xla"`` (the pure-JAX reference).

    Returns ``out [E, n_emb]`` in the common float dtype (half precision is computed in float32).
    Differentiable to any order in every float argument (fused kernels up to the second order; on
    GPU for ``n_mid <= 32``, beyond which the pure-JAX composition runs).

    >>> import jax.numpy as jnp, numpy as np, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(np.array([0, 1, 1, 2]), np.array([1, 0, 2, 1]))
    >>> vec = jnp.array([[-1., 0, 0], [1, 0, 0], [0, -1, 0], [0, 1, 0]])
    >>> out = jgo.dimenet.agg_edge_to_edge(vec, jnp.ones((4, 42)), jnp.ones((4, 8)), jnp.ones((50, 2)),
    ...                                    jgo.dimenet.triplets(g))
    >>> out.shape
    (4, 8)
    """
    if not isinstance(triplets, Triplets):
        raise TypeError(f"agg_edge_to_edge: triplets must be a Triplets (jgo.dimenet.triplets), got {type(triplets).__name__}")
    check_choice("agg_edge_to_edge", "impl", impl, (None, "xla"))
    e = triplets.n_edges
    vec = _float("vec", vec, (e, 3))
    sbf_rad = _float("sbf_rad", sbf_rad, (e, _K))
    emb = _float("emb", emb, (e, None))
    weights = _float("weights", weights, (_K + emb.shape[1], None))
    dtype = jnp.result_type(vec, sbf_rad, emb, weights)
    work = jnp.float32 if dtype in (jnp.float16, jnp.bfloat16) else dtype  # half precision computed in float32
    vec, sbf_rad, emb, weights = (x.astype(work) for x in (vec, sbf_rad, emb, weights))
    if impl == "xla":
        return agg_edge_to_edge_ref(vec, sbf_rad, emb, weights, triplets).astype(dtype)
    # an edge that is no triplet's e_in (a padding edge) enters W_a's projection as 0: its junk, NaN included,
    # would reach W_a's gradient (a sum over every row) as 0 * NaN
    sbf_rad = unread_rows_filled(sbf_rad, jnp.diff(triplets.in_offsets) > 0)
    return aggregate(triplets.arrays(), vec, _fold_first_projection(sbf_rad, weights[:_K]), emb,
                     weights[_K:]).astype(dtype)
