"""The MeshGraphNet / GraphCast edge-update input ``update_efeat``."""

from __future__ import annotations

from .. import reference
from .._checks import as_float_array, check_choice
from ..graph import Graph, check_graph
from ._primitive_utils import compute_dtype, graph_arrays
from ._public_op import public_op
from ._update_efeat_primitives import update_efeat as _update_efeat
from .message_passing import IMPLS

MODES = ("concat", "sum")


def _check_operands(fn, g, edge_feat, x_src, x_dst, mode):
    if edge_feat is None and x_src is None and x_dst is None:
        raise ValueError(f"{fn}: at least one of edge_feat, x_src, x_dst must be given; all three are None")
    checked = []
    for name, x, rows, rows_name in (("edge_feat", edge_feat, g.n_edges, "n_edges"), ("x_src", x_src, g.n_src, "n_src"),
                                     ("x_dst", x_dst, g.n_dst, "n_dst")):
        if x is not None:
            x = as_float_array(fn, name, x, rows, rows_name)
            if x.ndim != 2:
                raise ValueError(f"{fn}: {name} must be 2-D [{rows_name}, features]; got shape {x.shape}")
        checked.append(x)
    if mode == "sum":
        widths = {name: x.shape[1] for name, x in zip(("edge_feat", "x_src", "x_dst"), checked) if x is not None}
        if len(set(widths.values())) > 1:
            listed = ", ".join(f"{name} has {w}" for name, w in widths.items())
            raise ValueError(f"{fn}: mode='sum' needs the present parts to have one feature width; {listed}")
    return checked


@public_op
def update_efeat(g: Graph, edge_feat=None, x_src=None, x_dst=None, *, mode: str = "concat", impl: str | None = None):
    """The edge-update input of MeshGraphNet / GraphCast / an interaction network, per edge in input order.

    For edge ``e = (src_e -> dst_e)``:

    - ``mode="concat"``: ``out[e] = [edge_feat[e] | x_src[src_e] | x_dst[dst_e]]``, ``[n_edges, Fe + Fs + Fd]``;
    - ``mode="sum"``: ``out[e] = edge_feat[e] + x_src[src_e] + x_dst[dst_e]`` (added left to right), ``[n_edges, F]``.

    Each part is optional (an absent one is dropped) but one must be given. On a graph that is not
    bipartite, pass the same node array as ``x_src`` and ``x_dst``. One fused pass over the edges
    writes whole output rows; the backward reduces the node gradients without atomics, over the
    reverse CSR for ``x_src`` and the CSC for ``x_dst`` (``edge_feat``'s gradient, the cotangent's
    edge block, is copied by a kernel too). Differentiable in every present input, to every order.

    A pure gather, concatenation or sum: NaN and Inf propagate exactly as in the reference
    (``impl="xla"``), element by element (in ``"sum"`` mode ``inf + -inf`` is NaN, as IEEE says),
    and reach only the rows of the edges that read them.

    Args:
      g: the graph.
      edge_feat: edge features ``[n_edges, Fe]`` in input edge order, or None.
      x_src: source node features ``[n_src, Fs]``, or None.
      x_dst: destination node features ``[n_dst, Fd]``, or None.
      mode: ``"concat"`` or ``"sum"`` (the present parts must then have one width).
      impl: None or ``"ffi"`` for the fused kernels, ``"xla"`` for the pure-JAX reference.

    Returns:
      ``[n_edges, Fe + Fs + Fd]`` (concat) or ``[n_edges, F]`` (sum), in input edge order; ``[0, F]``
      for a graph without edges. Half precision is computed in float32.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 1]))
    >>> x = jnp.array([[1.0], [2.0]])
    >>> jgo.update_efeat(g, jnp.array([[10.0], [20.0]]), x, x)
    Array([[10.,  1.,  2.],
           [20.,  2.,  2.]], dtype=float32)
    >>> jgo.update_efeat(g, x_src=x, x_dst=x, mode="sum")
    Array([[3.],
           [4.]], dtype=float32)
    """
    fn = "update_efeat"
    check_graph(fn, g)
    check_choice(fn, "mode", mode, MODES)
    check_choice(fn, "impl", impl, IMPLS)
    edge_feat, x_src, x_dst = _check_operands(fn, g, edge_feat, x_src, x_dst, mode)
    if impl == "xla":
        return reference.update_efeat(g, edge_feat, x_src, x_dst, mode=mode)
    dtype, work = compute_dtype(edge_feat, x_src, x_dst)
    ops = [None if x is None else x.astype(work) for x in (edge_feat, x_src, x_dst)]
    return _update_efeat(graph_arrays(g), *ops, summed=mode == "sum").astype(dtype)
