"""The graph-neural-operator block as a ``flax.linen`` module (``GNOBlock``). The math: :mod:`jaxgraphops.nn._gno`."""

from __future__ import annotations

import dataclasses

import flax.linen as nn

from ...graph import Graph
from .._gno import check_block, gno_block, init_kernel, kernel_outputs, skip_input
from ._common import ParamLayer, promote

__all__ = ["GNOBlock"]


class GNOBlock(ParamLayer):
    """A graph-neural-operator block: ``out_i = reduce_{e=(j->i)} K(dx_e) f_j (+ W_skip f_dst_i + b)``.

    The kernel ``K(dx) = V relu(U dx + b_u) + b_v`` is a matrix (``features x c_in``) or, with
    ``kernel="diagonal"``, a per-channel scale (``features == c_in``); the integral is the fused
    :func:`jaxgraphops.gno_conv` (kappa is never formed).

    Params: ``U [kernel_width, d]``, ``b_u``, ``V [P, kernel_width]``, ``b_v [P]`` (``P = features *
    c_in`` or ``c_in``), and ``skip_kernel [c_dst, features]``, ``skip_bias`` with ``skip``.

    Attributes:
      features: output features ``c_out``.
      kernel_width: hidden width ``H`` of the kernel MLP.
      kernel: ``"matrix"`` or ``"diagonal"``.
      reduce: ``"mean"`` or ``"sum"`` over the in-edges (weighted with ``edge_weight``).
      skip: add the linear skip connection ``f_dst W_skip + b_skip``.

    Call ``layer(g, f_src, dx, f_dst=None, edge_weight=None)``: ``f_src [n_src, c_in]``, ``dx [E, d]``
    (:func:`jaxgraphops.edge_vectors`), ``f_dst [n_dst, c_dst]`` for the skip (default ``f_src``,
    square graphs); returns ``[n_dst, features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> f, dx = jnp.ones((3, 4)), jnp.ones((3, 2))
    >>> layer = GNOBlock(8, kernel_width=16)
    >>> variables = layer.init(jax.random.key(0), g, f, dx)
    >>> layer.apply(variables, g, f, dx).shape
    (3, 8)
    """

    features: int
    _: dataclasses.KW_ONLY
    kernel_width: int = 64
    kernel: str = "matrix"
    reduce: str = "mean"
    skip: bool = True

    @nn.compact
    def __call__(self, g: Graph, f_src, dx, f_dst=None, edge_weight=None):
        c_in, d = f_src.shape[-1], dx.shape[-1]
        check_block("GNOBlock", c_in, self.features, self.kernel, self.reduce, self.kernel_width, self.skip)
        init = lambda name: lambda key, _, dtype: init_kernel(key, d, self.kernel_width, c_in,  # noqa: E731
                                                              self.features, self.kernel, dtype)[name]
        p = kernel_outputs(c_in, self.features, self.kernel)
        U = self.param("U", init("U"), (self.kernel_width, d), self.param_dtype)
        b_u = self.param("b_u", init("b_u"), (self.kernel_width,), self.param_dtype)
        V = self.param("V", init("V"), (p, self.kernel_width), self.param_dtype)
        b_v = self.param("b_v", init("b_v"), (p,), self.param_dtype)
        skip_kernel = skip_bias = None
        if self.skip:
            f_dst = skip_input("GNOBlock", g, f_src, f_dst)
            skip_kernel = self.param("skip_kernel", nn.initializers.lecun_normal(), (f_dst.shape[-1], self.features),
                                     self.param_dtype)
            skip_bias = self.param("skip_bias", nn.initializers.zeros_init(), (self.features,), self.param_dtype)
        f_src, dx, f_dst, edge_weight, U, b_u, V, b_v, skip_kernel, skip_bias = promote(
            self.dtype, f_src, dx, f_dst, edge_weight, U, b_u, V, b_v, skip_kernel, skip_bias)
        return gno_block(g, f_src, dx, U, b_u, V, b_v, skip_kernel, skip_bias, f_dst, kernel=self.kernel,
                         reduce=self.reduce, out_features=self.features,
                         edge_weight=edge_weight)
