"""The graph neural operator: ``edge_vectors`` and the fused kernel integral ``gno_conv``."""

from __future__ import annotations

import jax.numpy as jnp

from .. import reference
from .._checks import as_float_array, check_choice
from ..graph import Graph, check_graph
from ._gno_primitives import gno
from ._primitive_utils import compute_dtype, graph_arrays, unread_rows_filled
from ._public_op import public_op
from .message_passing import IMPLS, gspmm

KERNELS = ("matrix", "diagonal")
REDUCES = ("sum", "mean")


@public_op
def edge_vectors(g: Graph, pos_src, pos_dst=None):
    """Edge geometry ``dx_e = pos_dst[dst_e] - pos_src[src_e]``, ``[n_edges, d]`` in input edge order.

    ``pos_src [n_src, d]``; ``pos_dst [n_dst, d]`` defaults to ``pos_src`` (needs ``n_src == n_dst``).
    A plain gather, differentiable in both positions. A hand-built graph with out-of-range ids is an
    error outside ``jit``; inside ``jit`` the gather clamps them, as every JAX gather does (see
    :class:`~jaxgraphops.Graph`).

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 0]))
    >>> jgo.edge_vectors(g, jnp.array([[0.0, 0.0], [1.0, 2.0]]))
    Array([[ 1.,  2.],
           [-1., -2.]], dtype=float32)
    """
    fn = "edge_vectors"
    check_graph(fn, g)
    pos_src = as_float_array(fn, "pos_src", pos_src, g.n_src, "n_src")
    if pos_dst is None:
        if g.n_src != g.n_dst:
            raise ValueError(f"{fn}: pos_dst is required for a bipartite graph (n_src={g.n_src} != n_dst={g.n_dst})")
        pos_dst = pos_src
    pos_dst = as_float_array(fn, "pos_dst", pos_dst, g.n_dst, "n_dst")
    if pos_src.ndim != 2 or pos_dst.shape[1:] != pos_src.shape[1:]:
        raise ValueError(f"{fn}: pos_src and pos_dst must be [n, d] with one d; got {pos_src.shape} and {pos_dst.shape}")
    return reference.edge_vectors(g, pos_src, pos_dst)


def _check_shape(fn, name, x, shape, what):
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"{fn}: {name} must be a floating-point array; got dtype {x.dtype}")
    if x.shape != shape:
        raise ValueError(f"{fn}: {name} must be {what} = {shape}; got shape {x.shape}")
    return x


def _check_operands(fn, g, f_src, dx, U, b_u, V, b_v, kernel, edge_weight):
    f_src = as_float_array(fn, "f_src", f_src, g.n_src, "n_src")
    if f_src.ndim != 2:
        raise ValueError(f"{fn}: f_src must be [n_src, c_in]; got shape {f_src.shape}")
    dx = as_float_array(fn, "dx", dx, g.n_edges, "n_edges")
    if dx.ndim != 2:
        raise ValueError(f"{fn}: dx must be [n_edges, d]; got shape {dx.shape}")
    U = jnp.asarray(U)
    if U.ndim != 2:
        raise ValueError(f"{fn}: U must be [H, d]; got shape {U.shape}")
    hidden, d, c_in = U.shape[0], dx.shape[1], f_src.shape[1]
    U = _check_shape(fn, "U", U, (hidden, d), "[H, d]")
    b_u = _check_shape(fn, "b_u", b_u, (hidden,), "[H]")
    V = jnp.asarray(V)
    if kernel == "matrix" and c_in == 0:
        raise ValueError(f"{fn}: f_src has no features (shape {f_src.shape}); kernel='matrix' reads c_out from "
                         f"V [c_out * c_in, H], which needs c_in >= 1 (kernel='diagonal' takes c_in = 0)")
    if kernel == "diagonal":
        V = _check_shape(fn, "V", V, (c_in, hidden), "[c_in, H] for kernel='diagonal'")
    elif V.ndim != 2 or V.shape[1] != hidden or V.shape[0] == 0 or V.shape[0] % max(c_in, 1) != 0:
        raise ValueError(f"{fn}: V must be [c_out * c_in, H] with c_in={c_in}, H={hidden} for kernel='matrix'; "
                         f"got shape {V.shape}")
    V = _check_shape(fn, "V", V, V.shape, "[c_out * c_in, H]")
    b_v = _check_shape(fn, "b_v", b_v, (V.shape[0],), "[c_out * c_in]" if kernel == "matrix" else "[c_in]")
    if edge_weight is not None:
        edge_weight = _check_shape(fn, "edge_weight", edge_weight, (g.n_edges,), "[n_edges]")
    return f_src, dx, U, b_u, V, b_v, edge_weight


def normalise(g: Graph, total, reduce, edge_weight):
    """The weighted sum at each destination turned into the requested reduction."""
    if reduce == "sum":
        return total
    if edge_weight is None:
        count = g.in_degrees().astype(total.dtype)
        return total / jnp.maximum(count, 1)[:, None]
    # the fused sum (no scatter: XLA's scatter-add on a GPU is atomic, its order varies run to run)
    weight_sum = gspmm(g, e=edge_weight, op="copy_e", reduce="sum")[:, None]
    safe = jnp.where(weight_sum == 0, 1, weight_sum)
    return jnp.where(weight_sum == 0, 0, total / safe)


@public_op
def gno_conv(g: Graph, f_src, dx, U, b_u, V, b_v, *, kernel: str = "matrix", reduce: str = "mean",
             edge_weight=None, impl: str | None = None):
    """The graph-neural-operator kernel integral ``out_i = reduce_{e=(j->i)} K(dx_e) f_j``.

    Per edge the kernel is a one-hidden-layer MLP of the edge geometry,
    ``kappa_e = V relu(U dx_e + b_u) + b_v``:

    - ``kernel="matrix"``: ``K_e = kappa_e.reshape(c_out, c_in)`` (row-major), message ``K_e @ f_src[j]``
      (PyG's ``NNConv`` with ``root_weight=False, bias=False``, the GKN kernel).
    - ``kernel="diagonal"``: message ``kappa_e * f_src[j]`` (neuraloperator's ``IntegralTransform``
      with ``transform_type="linear"`` and a kernel on ``dx``).

    The fused kernels never form kappa (``E x c_out x c_in`` numbers for the matrix kernel). Per
    destination they accumulate ``A_i = sum_e w_e f_j (x) [relu(U dx_e + b_u), 1]`` (``c_in (H+1)``
    numbers, ``c_in (H+1)`` FMAs per edge) and contract it with ``[V | b_v]`` once per row
    (``c_out c_in (H+1)`` FMAs per row instead of ``c_out c_in H`` per edge). The backward passes
    do the same over the reverse CSR (gradients of ``f_src``, ``V``, ``b_v``) and the CSC
    (``dx``, ``U``, ``b_u``, ``edge_weight``), without atomics.

    Args:
      g: the graph; messages flow ``src -> dst``.
      f_src: source features ``[n_src, c_in]``.
      dx: edge geometry ``[n_edges, d]`` in input edge order, e.g. :func:`edge_vectors`.
      U, b_u: first kernel layer, ``[H, d]`` and ``[H]``.
      V, b_v: second kernel layer: ``[c_out * c_in, H]`` and ``[c_out * c_in]`` (matrix) or
        ``[c_in, H]`` and ``[c_in]`` (diagonal, ``c_out = c_in``).
      kernel: ``"matrix"`` or ``"diagonal"``.
      reduce: ``"sum"`` or ``"mean"`` over the in-edges. With ``edge_weight`` the sum is
        ``sum_e w_e m_e`` (quadrature) and the mean divides it by ``sum_e w_e`` (as ``agg_weighted``).
      edge_weight: optional ``[n_edges]`` weights in input edge order.
      impl: None or ``"ffi"`` for the fused kernels, ``"xla"`` for the pure-JAX reference.

    Returns:
      ``[n_dst, c_out]``; 0 (and zero gradients) for a destination without in-edges (or with
      zero total weight under a weighted mean). Half precision is computed in float32.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 1]))
    >>> f = jnp.array([[1.0], [2.0]])
    >>> dx = jnp.array([[1.0], [-1.0]])
    >>> U, b_u = jnp.array([[1.0]]), jnp.zeros(1)          # h_e = relu(dx_e): 1 and 0
    >>> V, b_v = jnp.array([[3.0]]), jnp.array([1.0])      # kappa_e = 3 h_e + 1: 4 and 1
    >>> jgo.gno_conv(g, f, dx, U, b_u, V, b_v, reduce="sum")  # node 1: 4 * 1 + 1 * 2
    Array([[0.],
           [6.]], dtype=float32)
    """
    fn = "gno_conv"
    check_graph(fn, g)
    check_choice(fn, "kernel", kernel, KERNELS)
    check_choice(fn, "reduce", reduce, REDUCES)
    check_choice(fn, "impl", impl, IMPLS)
    f_src, dx, U, b_u, V, b_v, edge_weight = _check_operands(fn, g, f_src, dx, U, b_u, V, b_v, kernel, edge_weight)
    if impl == "xla":
        return reference.gno_conv(g, f_src, dx, U, b_u, V, b_v, kernel=kernel, reduce=reduce, edge_weight=edge_weight)
    dtype, work = compute_dtype(f_src, dx, U, b_u, V, b_v, edge_weight)
    ga = graph_arrays(g)
    # the backward kernels add f_src[j] (x) (its out-edges' sum) into V's gradient per source: a source without
    # out-edges (padding) enters as 0, so that its junk, NaN included, does not reach the gradient (0 * NaN)
    f_src = unread_rows_filled(f_src, ga.rows_read("src"))
    ops = [x.astype(work) for x in (f_src, dx, U, b_u, V, b_v)]
    w = None if edge_weight is None else edge_weight.astype(work)
    total = gno(ga, *ops, w, diagonal=kernel == "diagonal")
    return normalise(g, total, reduce, w).astype(dtype)
