"""The graph-neural-operator block shared by the flax and equinox layers (``GNOBlock``).

``out = gno_conv(g, f_src, dx, U, b_u, V, b_v) (+ f_dst W_skip + b_skip)``: a kernel integral
with the kernel MLP ``V relu(U dx + b_u) + b_v`` (matrix or diagonal) and an optional linear
skip connection from the destination features.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._checks import check_graph
from ..graph import Graph
from ..ops.gno import KERNELS, REDUCES, gno_conv
from ._functional import check_choice


def check_block(layer: str, c_in: int, c_out: int, kernel: str, reduce: str, width: int) -> None:
    check_choice(layer, "kernel", kernel, KERNELS)
    check_choice(layer, "reduce", reduce, REDUCES)
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"{layer}: kernel_width must be a positive int; got {width!r}")
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


def gno_block(g: Graph, f_src, dx, U, b_u, V, b_v, skip_kernel, skip_bias, f_dst, *, kernel: str, reduce: str,
              edge_weight=None):
    """``gno_conv(...) (+ f_dst @ skip_kernel (+ skip_bias))``; ``skip_kernel [c_dst, c_out]`` or None."""
    check_graph("GNOBlock", g)
    out = gno_conv(g, f_src, dx, U, b_u, V, b_v, kernel=kernel, reduce=reduce, edge_weight=edge_weight)
    if skip_kernel is not None:
        out = out + jnp.matmul(f_dst, skip_kernel, precision=jax.lax.Precision.HIGHEST)
        if skip_bias is not None:
            out = out + skip_bias
    return out
