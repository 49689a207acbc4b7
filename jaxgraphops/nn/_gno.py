"""The graph-neural-operator block's math, shared by the linen, NNX and equinox ``GNOBlock``.

``out = gno_conv(g, f_src, dx, U, b_u, V, b_v) (+ f_dst W_skip + b_skip)``: a kernel integral
with the kernel MLP ``V relu(U dx + b_u) + b_v`` (matrix or diagonal) and an optional linear
skip connection from the destination features.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..graph import Graph, check_graph
from ..ops.gno import KERNELS, REDUCES, gno_conv
from ._common import check_choice, check_features, check_options, layer_scope


def check_block(layer: str, c_in: int, c_out: int, kernel: str, reduce: str, width: int, skip: bool) -> None:
    """The block's options: ``kernel``, ``reduce``, ``kernel_width``, ``skip``, and ``c_out == c_in`` for a
    diagonal kernel."""
    check_choice(layer, "kernel", kernel, KERNELS)
    check_choice(layer, "reduce", reduce, REDUCES)
    check_options(layer, kernel_width=width, skip=skip)
    if kernel == "diagonal" and c_in != c_out:
        raise ValueError(f"{layer}: kernel='diagonal' needs as many output as input features; got {c_in} in, "
                         f"{c_out} out")


def kernel_outputs(c_in: int, c_out: int, kernel: str) -> int:
    """Rows of ``V``: ``c_out * c_in`` (matrix) or ``c_in`` (diagonal)."""
    return c_in if kernel == "diagonal" else c_out * c_in


def init_kernel(key, d: int, width: int, c_in: int, c_out: int, kernel: str, dtype=jnp.float32) -> dict:
    """``U [H, d]``, ``b_u [H]``, ``V [P, H]``, ``b_v [P]``: He-normal ``U`` (relu), ``V`` scaled so
    that a message ``K_e f`` has about the variance of ``f``, zero biases."""
    k_u, k_v = jax.random.split(key)
    p = kernel_outputs(c_in, c_out, kernel)
    fan = width * (1 if kernel == "diagonal" else c_in)
    return {"U": jax.random.normal(k_u, (width, d), dtype) * jnp.sqrt(2.0 / d),
            "b_u": jnp.zeros((width,), dtype),
            "V": jax.random.normal(k_v, (p, width), dtype) / jnp.sqrt(fan),
            "b_v": jnp.zeros((p,), dtype)}


def skip_input(layer: str, g: Graph, f_src, f_dst):
    """The input of the skip connection, ``f_dst [n_dst, c_dst]``: ``f_dst``, or ``f_src`` when the
    graph is square."""
    if f_dst is not None:
        if jnp.ndim(f_dst) != 2 or jnp.shape(f_dst)[0] != g.n_dst:
            raise ValueError(f"{layer}: f_dst must be [n_dst={g.n_dst}, c_dst], got shape {jnp.shape(f_dst)}")
        return f_dst
    if g.n_src != g.n_dst:
        raise ValueError(f"{layer}: f_dst is required for the skip connection of a bipartite graph "
                         f"(n_src={g.n_src} != n_dst={g.n_dst})")
    return f_src


@layer_scope("GNOBlock")
def gno_block(g: Graph, f_src, dx, U, b_u, V, b_v, skip_kernel, skip_bias, f_dst, *, kernel: str, reduce: str,
              out_features: int, edge_weight=None):
    """``gno_conv(...) (+ f_dst @ skip_kernel (+ skip_bias))``; ``skip_kernel [c_dst, c_out]`` or None;
    ``out_features`` is ``c_out`` (the inputs' widths are checked against the weights)."""
    layer = "GNOBlock"
    check_graph(layer, g)
    c_in = V.shape[0] if kernel == "diagonal" else V.shape[0] // out_features
    check_features(layer, "f_src", f_src, c_in)
    check_features(layer, "dx", dx, U.shape[1], "coord_dim")
    if skip_kernel is not None:
        check_features(layer, "f_dst", f_dst, skip_kernel.shape[0], "skip_features")
    out = gno_conv(g, f_src, dx, U, b_u, V, b_v, kernel=kernel, reduce=reduce, edge_weight=edge_weight)
    if skip_kernel is not None:
        out = out + jnp.matmul(f_dst, skip_kernel, precision=jax.lax.Precision.HIGHEST)
        if skip_bias is not None:
            out = out + skip_bias
    return out
