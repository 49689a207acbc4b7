"""The graph-neural-operator block as a ``flax.nnx`` module (``GNOBlock``). The math: :mod:`jaxgraphops.nn._gno`."""

from __future__ import annotations

import jax.numpy as jnp
from flax import nnx

from ...graph import Graph
from .._common import check_layer
from .._gno import check_block, gno_block, init_kernel, skip_input
from ._common import lecun, param, promote, value, zeros

__all__ = ["GNOBlock"]


class GNOBlock(nnx.Module):
    """A graph-neural-operator block ``out_i = reduce_{e=(j->i)} K(dx_e) f_j (+ f_dst_i W_skip + b)``,
    the linen :class:`jaxgraphops.nn.flax.GNOBlock` as an NNX module.

    The kernel ``K(dx) = V relu(U dx + b_u) + b_v`` is a matrix (``out_features x in_features``) or,
    with ``kernel="diagonal"``, a per-channel scale (``out_features == in_features``); the integral
    is the fused :func:`jaxgraphops.gno_conv` (kappa is never formed).

    Params: ``U [kernel_width, coord_dim]``, ``b_u``, ``V [P, kernel_width]``, ``b_v [P]`` (``P =
    out_features * in_features`` or ``in_features``); ``skip_kernel [skip_features, out_features]``
    and ``skip_bias`` with ``skip``.

    Args:
      in_features, out_features: ``c_in``, ``c_out``.
      coord_dim: ``d``, the size of an edge vector.
      kernel_width: hidden width of the kernel MLP.
      kernel: ``"matrix"`` or ``"diagonal"``.
      reduce: ``"mean"`` or ``"sum"`` over the in-edges (weighted with ``edge_weight``).
      skip: add the linear skip connection.
      skip_features: features of ``f_dst`` (default ``in_features``).
      dtype, param_dtype, rngs: as in ``nnx.Linear``.

    Call ``layer(g, f_src, dx, f_dst=None, edge_weight=None)``: ``f_src [n_src, c_in]``, ``dx [E, d]``,
    ``f_dst [n_dst, skip_features]`` for the skip (default ``f_src``, square graphs); returns
    ``[n_dst, out_features]``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> GNOBlock(4, 8, 2, kernel_width=16, rngs=nnx.Rngs(0))(g, jnp.ones((3, 4)), jnp.ones((3, 2))).shape
    (3, 8)
    """

    def __init__(self, in_features: int, out_features: int, coord_dim: int, *, kernel_width: int = 64,
                 kernel: str = "matrix", reduce: str = "mean", skip: bool = True, skip_features: int | None = None,
                 dtype=None, param_dtype=jnp.float32, rngs: nnx.Rngs):
        check_layer(self, locals())
        check_block("GNOBlock", in_features, out_features, kernel, reduce, kernel_width, skip)
        w = init_kernel(rngs.params(), coord_dim, kernel_width, in_features, out_features, kernel, param_dtype)
        self.U, self.b_u, self.V, self.b_v = (nnx.Param(w[k]) for k in ("U", "b_u", "V", "b_v"))
        self.skip_kernel = (param(lecun, rngs, (skip_features or in_features, out_features), param_dtype)
                            if skip else None)
        self.skip_bias = param(zeros, rngs, (out_features,), param_dtype) if skip else None
        self.kernel, self.reduce, self.out_features, self.dtype = kernel, reduce, out_features, dtype

    def __call__(self, g: Graph, f_src, dx, f_dst=None, edge_weight=None):
        if self.skip_kernel is not None:
            f_dst = skip_input("GNOBlock", g, f_src, f_dst)
        params = [value(p) for p in (self.U, self.b_u, self.V, self.b_v, self.skip_kernel, self.skip_bias)]
        f_src, dx, f_dst, edge_weight, params = promote(self.dtype, f_src, dx, f_dst, edge_weight, params)
        return gno_block(g, f_src, dx, *params, f_dst, kernel=self.kernel, reduce=self.reduce,
                         out_features=self.out_features, edge_weight=edge_weight)
