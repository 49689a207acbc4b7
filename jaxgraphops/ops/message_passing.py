"""Generic message passing: ``gspmm``, ``gsddmm`` and ``edge_softmax`` (DGL's semantics).

Edges are directed ``src -> dst``; reductions happen at ``dst``; edge-valued arrays are in the
input edge order of the Graph.
"""

from __future__ import annotations

import numpy as np

from .. import reference
from .._checks import as_float_array, check_choice
from .._layout import align_ranks
from ..graph import Graph, check_graph
from ._primitive_utils import compute_dtype, graph_arrays, unread_rows_filled
from ._primitives import sddmm, softmax, spmm
from ._public_op import public_op

SPMM_OPS = ("copy_u", "copy_e", "u_mul_e", "u_add_e", "u_sub_e", "u_div_e")
REDUCES = ("sum", "mean", "max", "min")
SDDMM_OPS = ("dot", "add", "sub", "mul", "div")
TARGETS = {"u": "src", "v": "dst", "e": "edge"}
IMPLS = (None, "ffi", "xla")


@public_op
def gspmm(g: Graph, u=None, e=None, *, op: str = "copy_u", reduce: str = "sum", impl: str | None = None):
    """Generalised sparse-dense product: ``out[v] = reduce_{e=(s->v)} op(u[s], e[e])``.

    Args:
      g: the graph.
      u: source-node features ``[n_src, ...]`` (ops that read ``u``).
      e: edge features ``[n_edges, ...]`` in input edge order (ops that read ``e``). Feature
        shapes broadcast; a lower-rank operand gets trailing unit axes first (``e [E, H]``
        with ``u [N, H, F]`` is one weight per head), else leading ones (NumPy).
      op: ``copy_u``, ``copy_e``, ``u_mul_e``, ``u_add_e``, ``u_sub_e`` or ``u_div_e``.
      reduce: ``sum``, ``mean``, ``max`` or ``min``. An empty neighbourhood gives 0 (and zero
        gradients). max/min send the whole gradient to the first maximal (minimal) incoming
        edge in input edge order; a NaN message makes its output element NaN (as ``np.max``)
        and gets the gradient (the first NaN edge). Half precision is accumulated in float32.
      impl: None or ``"ffi"`` for the fused kernels, ``"xla"`` for the pure-JAX reference.

    Returns:
      ``[n_dst, *broadcast feature shape]``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> jgo.gspmm(g, jnp.array([[1.], [2.], [4.]]), op="copy_u", reduce="sum")[:, 0]
    Array([0., 5., 2.], dtype=float32)
    """
    fn = "gspmm"
    check_graph(fn, g)
    check_choice(fn, "op", op, SPMM_OPS)
    check_choice(fn, "reduce", reduce, REDUCES)
    check_choice(fn, "impl", impl, IMPLS)
    reads_u, reads_e = op != "copy_e", op != "copy_u"
    for name, x, needed in (("u", u, reads_u), ("e", e, reads_e)):
        if needed and x is None:
            raise ValueError(f"{fn}: op={op!r} needs {name}")
        if not needed and x is not None:
            raise ValueError(f"{fn}: op={op!r} does not read {name}; pass {name}=None")
    u = as_float_array(fn, "u", u, g.n_src, "n_src") if reads_u else None
    e = as_float_array(fn, "e", e, g.n_edges, "n_edges") if reads_e else None
    if impl == "xla":
        return reference.gspmm(g, u, e, op=op, reduce=reduce)
    dtype, work = compute_dtype(u, e)
    if reads_u and reads_e:
        fu, fe = align_ranks(u.shape[1:], e.shape[1:], f"{fn}: u and e")
        u, e = u.reshape((u.shape[0],) + fu), e.reshape((e.shape[0],) + fe)
        out_shape = np.broadcast_shapes(fu, fe)
    else:
        out_shape = (u if reads_u else e).shape[1:]
    u = u.astype(work) if u is not None else None
    e = e.astype(work) if e is not None else None
    if op == "u_sub_e":
        e = -e
    elif op == "u_div_e":
        e = 1 / unread_rows_filled(e, graph_arrays(g).rows_read("edge"), 1)  # no 1/0 from a padding row
    kernel_op = {"copy_u": "copy_lhs", "copy_e": "copy_rhs", "u_mul_e": "mul", "u_div_e": "mul"}.get(op, "add")
    out, _ = spmm(graph_arrays(g), u, e, op=kernel_op, reduce=reduce, out_shape=tuple(out_shape))
    return out.astype(dtype)


@public_op
def gsddmm(g: Graph, lhs, rhs, *, op: str = "dot", lhs_target: str = "u", rhs_target: str = "v",
           impl: str | None = None):
    """Generalised sampled dense-dense product: ``out[e] = op(lhs[t_l(e)], rhs[t_r(e)])``.

    Args:
      g: the graph.
      lhs, rhs: features of the source nodes (target ``u``, ``[n_src, ...]``), destination
        nodes (``v``, ``[n_dst, ...]``) or edges (``e``, ``[n_edges, ...]``). Feature shapes
        broadcast as in :func:`gspmm`.
      op: ``dot`` (reduces the last feature axis), ``add``, ``sub``, ``mul`` or ``div``.
      lhs_target, rhs_target: ``u``, ``v`` or ``e``.
      impl: None or ``"ffi"`` for the fused kernels, ``"xla"`` for the pure-JAX reference.

    Returns:
      ``[n_edges, *broadcast feature shape]`` in input edge order (``dot`` drops the last axis).

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 0]))
    >>> x = jnp.array([[1., 2.], [3., 4.]])
    >>> jgo.gsddmm(g, x, x, op="dot")
    Array([11., 11.], dtype=float32)
    """
    fn = "gsddmm"
    check_graph(fn, g)
    check_choice(fn, "op", op, SDDMM_OPS)
    check_choice(fn, "lhs_target", lhs_target, tuple(TARGETS))
    check_choice(fn, "rhs_target", rhs_target, tuple(TARGETS))
    check_choice(fn, "impl", impl, IMPLS)
    rows = {"u": (g.n_src, "n_src"), "v": (g.n_dst, "n_dst"), "e": (g.n_edges, "n_edges")}
    lhs = as_float_array(fn, "lhs", lhs, *rows[lhs_target])
    rhs = as_float_array(fn, "rhs", rhs, *rows[rhs_target])
    if impl == "xla":
        return reference.gsddmm(g, lhs, rhs, op=op, lhs_target=lhs_target, rhs_target=rhs_target)
    fl, fr = align_ranks(lhs.shape[1:], rhs.shape[1:], f"{fn}: lhs and rhs")
    out_shape = tuple(np.broadcast_shapes(fl, fr))
    if op == "dot" and not out_shape:
        raise ValueError(f"{fn}: op='dot' needs a feature axis to reduce; got lhs {lhs.shape}, rhs {rhs.shape}")
    dtype, work = compute_dtype(lhs, rhs)
    lhs = lhs.reshape((lhs.shape[0],) + fl).astype(work)
    rhs = rhs.reshape((rhs.shape[0],) + fr).astype(work)
    if op == "sub":
        rhs = -rhs
    elif op == "div":
        rhs = 1 / unread_rows_filled(rhs, graph_arrays(g).rows_read(TARGETS[rhs_target]), 1)  # no 1/0 unread
    kernel_op = "add" if op in ("add", "sub") else "mul"
    out = sddmm(graph_arrays(g), lhs, rhs, op=kernel_op, lhs_target=TARGETS[lhs_target],
                rhs_target=TARGETS[rhs_target], out_shape=out_shape, dot=op == "dot")
    return out.astype(dtype)


@public_op
def edge_softmax(g: Graph, logits, *, impl: str | None = None):
    """Softmax of edge logits over the incoming edges of each destination.

    Args:
      g: the graph.
      logits: ``[n_edges]`` or ``[n_edges, H, ...]`` in input edge order.
      impl: None or ``"ffi"`` for the fused kernel, ``"xla"`` for the pure-JAX reference.

    Returns:
      Attention weights of the shape of ``logits``; the weights of the in-edges of every
      destination (per head) sum to 1. Numerically stable (the maximum is subtracted). A
      ``-inf`` logit gets weight 0; a destination whose logits are all ``-inf`` gets 0 weights; a
      NaN or ``+inf`` logit makes its destination's weights NaN, as NumPy (``docs/semantics.md``).

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([2, 2, 0]))
    >>> jgo.edge_softmax(g, jnp.array([0., 0., 5.]))
    Array([0.5, 0.5, 1. ], dtype=float32)
    """
    fn = "edge_softmax"
    check_graph(fn, g)
    check_choice(fn, "impl", impl, IMPLS)
    logits = as_float_array(fn, "logits", logits, g.n_edges, "n_edges")
    if impl == "xla":
        return reference.edge_softmax(g, logits)
    dtype, work = compute_dtype(logits)
    return softmax(graph_arrays(g), logits.astype(work)).astype(dtype)
