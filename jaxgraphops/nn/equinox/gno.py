"""The graph-neural-operator block as an equinox module (``GNOBlock``). The math: :mod:`jaxgraphops.nn._gno`."""

from __future__ import annotations

import equinox as eqx
import jax

from ...graph import Graph
from .._common import check_layer
from .._gno import check_block, gno_block, init_kernel, skip_input

__all__ = ["GNOBlock"]


class GNOBlock(eqx.Module):
    """A graph-neural-operator block: ``out_i = reduce_{e=(j->i)} K(dx_e) f_j (+ W_skip f_dst_i + b)``.

    The kernel ``K(dx) = V relu(U dx + b_u) + b_v`` is a matrix (``out_features x in_features``)
    or, with ``kernel="diagonal"``, a per-channel scale (``out_features == in_features``); the
    integral is the fused :func:`jaxgraphops.gno_conv` (kappa is never formed).

    Fields: ``U [kernel_width, coord_dim]``, ``b_u``, ``V [P, kernel_width]``, ``b_v [P]``
    (``P = out_features * in_features`` or ``in_features``); ``skip`` an ``eqx.nn.Linear``
    (``skip_features -> out_features``) or None.

    **Arguments:**

    - ``in_features``, ``out_features``: feature sizes ``c_in``, ``c_out``.
    - ``coord_dim``: ``d``, the size of an edge vector.
    - ``kernel_width``: hidden width ``H`` of the kernel MLP.
    - ``kernel``: ``"matrix"`` or ``"diagonal"``.
    - ``reduce``: ``"mean"`` or ``"sum"`` over the in-edges (weighted with ``edge_weight``).
    - ``skip``: add a linear skip connection from the destination features.
    - ``skip_features``: features of ``f_dst`` (default ``in_features``).
    - ``key``: PRNG key.

    Call ``layer(g, f_src, dx, f_dst=None, edge_weight=None)``; returns ``[n_dst, out_features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = GNOBlock(4, 8, 2, kernel_width=16, key=jax.random.key(0))
    >>> layer(g, jnp.ones((3, 4)), jnp.ones((3, 2))).shape
    (3, 8)
    """

    U: jax.Array
    b_u: jax.Array
    V: jax.Array
    b_v: jax.Array
    skip: eqx.nn.Linear | None
    kernel: str = eqx.field(static=True)
    reduce: str = eqx.field(static=True)
    out_features: int = eqx.field(static=True)

    def __init__(self, in_features: int, out_features: int, coord_dim: int, *, kernel_width: int = 64,
                 kernel: str = "matrix", reduce: str = "mean", skip: bool = True, skip_features: int | None = None,
                 key: jax.Array):
        check_layer(self, locals())
        check_block("GNOBlock", in_features, out_features, kernel, reduce, kernel_width, skip)
        k_kernel, k_skip = jax.random.split(key)
        w = init_kernel(k_kernel, coord_dim, kernel_width, in_features, out_features, kernel)
        self.U, self.b_u, self.V, self.b_v = w["U"], w["b_u"], w["V"], w["b_v"]
        self.skip = (eqx.nn.Linear(skip_features or in_features, out_features, key=k_skip) if skip else None)
        self.kernel, self.reduce, self.out_features = kernel, reduce, out_features

    def __call__(self, g: Graph, f_src, dx, f_dst=None, edge_weight=None):
        skip_kernel = skip_bias = None
        if self.skip is not None:
            f_dst = skip_input("GNOBlock", g, f_src, f_dst)
            skip_kernel, skip_bias = self.skip.weight.T, self.skip.bias
        return gno_block(g, f_src, dx, self.U, self.b_u, self.V, self.b_v, skip_kernel, skip_bias, f_dst,
                         kernel=self.kernel, reduce=self.reduce, out_features=self.out_features,
                         edge_weight=edge_weight)
