"""The cugraph-ops aggregation family: ``agg_simple``, ``agg_weighted``, ``agg_concat``, ``pool``.

Each is one or two passes of the fused neighbourhood-reduce kernel (``gspmm``); their
derivatives of every order come from the kernel primitives' rules.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import reference
from .._checks import as_float_array, check_choice
from ..graph import Graph, check_graph
from ._pool_primitives import graph_rows, membership_graph, pool_sorted
from ._primitive_utils import HALF_TYPES
from ._public_op import public_op
from .message_passing import IMPLS, REDUCES, gspmm


def _weight_vector(fn, g, edge_weight):
    w = as_float_array(fn, "edge_weight", edge_weight, g.n_edges, "n_edges")
    if w.ndim != 1:
        raise ValueError(f"{fn}: edge_weight must be [n_edges]; got shape {w.shape}")
    return w


def _features(fn, name, x, rows, rows_name, cols="F"):
    """``x [rows, F]``: a floating-point array of rank 2 (the aggregation family's feature layout)."""
    x = as_float_array(fn, name, x, rows, rows_name)
    if x.ndim != 2:
        raise ValueError(f"{fn}: {name} must be [{rows_name}, {cols}] (rank 2); got shape {x.shape}")
    return x


def _safe_inverse(d):
    """1 / d where d != 0, else 0, with zero derivatives where d == 0 (any order)."""
    nonzero = d != 0
    return jnp.where(nonzero, 1 / jnp.where(nonzero, d, 1), 0)


@public_op
def agg_simple(g: Graph, x=None, edge_feat=None, *, reduce: str = "sum", impl: str | None = None):
    """Aggregates source-node features, edge features, or both, at each destination.

    Args:
      g: the graph.
      x: source-node features ``[n_src, F]`` (node-to-node).
      edge_feat: edge features ``[n_edges, Fe]`` in input edge order (edge-to-node).
      reduce: ``sum``, ``mean``, ``max`` or ``min`` (empty neighbourhoods give 0; max/min
        propagate NaN as ``np.max`` does, see :func:`gspmm`).
      impl: None for the fused kernels, ``"xla"`` for the pure-JAX reference.

    Returns:
      ``[n_dst, F]``, ``[n_dst, Fe]``, or ``[n_dst, F + Fe]`` (``[node | edge]``) when both are given.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 1]))
    >>> jgo.agg_simple(g, jnp.array([[1.], [3.]]), jnp.array([[5.], [7.]]), reduce="max")
    Array([[0., 0.],
           [3., 7.]], dtype=float32)
    """
    fn = "agg_simple"
    check_graph(fn, g)
    check_choice(fn, "reduce", reduce, REDUCES)
    check_choice(fn, "impl", impl, IMPLS)
    if x is None and edge_feat is None:
        raise ValueError(f"{fn}: give x, edge_feat or both")
    x = None if x is None else _features(fn, "x", x, g.n_src, "n_src")
    edge_feat = None if edge_feat is None else _features(fn, "edge_feat", edge_feat, g.n_edges, "n_edges", "Fe")
    if impl == "xla":
        return reference.agg_simple(g, x, edge_feat, reduce=reduce)
    parts = []
    if x is not None:
        parts.append(gspmm(g, x, op="copy_u", reduce=reduce, impl=impl))
    if edge_feat is not None:
        parts.append(gspmm(g, e=edge_feat, op="copy_e", reduce=reduce, impl=impl))
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=-1)


@public_op
def agg_weighted(g: Graph, x, edge_weight, *, reduce: str = "sum", impl: str | None = None):
    """Aggregates weighted messages ``w_e * x[src_e]`` at each destination.

    ``mean`` divides by the sum of the incoming weights (cugraph-ops' ``node_degree``), not by
    the number of edges; a destination whose weights sum to 0 gets 0 and zero gradients.
    ``max``/``min`` reduce the weighted messages.

    Args:
      g: the graph.
      x: source-node features ``[n_src, F]``.
      edge_weight: ``[n_edges]`` in input edge order.
      reduce: ``sum``, ``mean``, ``max`` or ``min``.
      impl: None for the fused kernels, ``"xla"`` for the pure-JAX reference.

    Returns:
      ``[n_dst, F]``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 1]))
    >>> jgo.agg_weighted(g, jnp.array([[2.], [4.]]), jnp.array([1., 3.]), reduce="mean")[:, 0]
    Array([0. , 3.5], dtype=float32)
    """
    fn = "agg_weighted"
    check_graph(fn, g)
    check_choice(fn, "reduce", reduce, REDUCES)
    check_choice(fn, "impl", impl, IMPLS)
    x = _features(fn, "x", x, g.n_src, "n_src")
    w = _weight_vector(fn, g, edge_weight)
    if impl == "xla":
        return reference.agg_weighted(g, x, w, reduce=reduce)
    if reduce != "mean":
        return gspmm(g, x, w, op="u_mul_e", reduce=reduce, impl=impl)
    x = jnp.asarray(x)
    dtype = jnp.result_type(x, w)
    if dtype in HALF_TYPES:  # the sums in float32, as the kernels accumulate them: a float16 sum may overflow
        x, w = x.astype(jnp.float32), w.astype(jnp.float32)
    total = gspmm(g, x, w, op="u_mul_e", reduce="sum", impl=impl)
    weight_sum = gspmm(g, e=w, op="copy_e", reduce="sum", impl=impl)
    return (total * _safe_inverse(weight_sum)[:, None].astype(total.dtype)).astype(dtype)


@public_op
def agg_concat(g: Graph, x, *, x_dst=None, edge_feat=None, edge_weight=None, reduce: str = "sum",
               impl: str | None = None):
    """The aggregate of the neighbours followed by the destination's own features (SAGEConv's input).

    Returns ``[agg(x) | agg(edge_feat) | x_dst]``; ``agg(x)`` is weighted by ``edge_weight`` when
    given (as in :func:`agg_weighted`); edge features are aggregated unweighted.

    Args:
      g: the graph.
      x: source-node features ``[n_src, F]``.
      x_dst: destination features ``[n_dst, Fd]``; defaults to ``x[:n_dst]`` for a non-bipartite
        graph and is required for a bipartite one.
      edge_feat: optional edge features ``[n_edges, Fe]``.
      edge_weight: optional ``[n_edges]`` weights of the node messages.
      reduce: ``sum``, ``mean``, ``max`` or ``min``.
      impl: None for the fused kernels, ``"xla"`` for the pure-JAX reference.

    Returns:
      ``[n_dst, F (+ Fe) + Fd]``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1]), jnp.array([1, 1]))
    >>> jgo.agg_concat(g, jnp.array([[2.], [4.]]), reduce="mean")
    Array([[0., 2.],
           [3., 4.]], dtype=float32)
    """
    fn = "agg_concat"
    check_graph(fn, g)
    check_choice(fn, "reduce", reduce, REDUCES)
    check_choice(fn, "impl", impl, IMPLS)
    x = _features(fn, "x", x, g.n_src, "n_src")
    if x_dst is None:
        if g.n_src != g.n_dst:
            raise ValueError(f"{fn}: x_dst is required for a bipartite graph (n_src={g.n_src}, n_dst={g.n_dst})")
        x_dst = x[: g.n_dst]
    x_dst = _features(fn, "x_dst", x_dst, g.n_dst, "n_dst", "Fd")
    if edge_feat is not None:
        edge_feat = _features(fn, "edge_feat", edge_feat, g.n_edges, "n_edges", "Fe")
    if edge_weight is not None:
        edge_weight = _weight_vector(fn, g, edge_weight)
    if impl == "xla":
        return reference.agg_concat(g, x, x_dst=x_dst, edge_feat=edge_feat, edge_weight=edge_weight, reduce=reduce)
    if edge_weight is None:
        agg = agg_simple(g, x, edge_feat, reduce=reduce, impl=impl)
    else:
        agg = agg_weighted(g, x, edge_weight, reduce=reduce, impl=impl)
        if edge_feat is not None:
            agg = jnp.concatenate([agg, agg_simple(g, edge_feat=edge_feat, reduce=reduce, impl=impl)], axis=-1)
    return jnp.concatenate([agg, x_dst.astype(agg.dtype)], axis=-1)


def _pool_ids_checked(x=None, graph_ids=None, n_graphs=None, *_, impl=None, **__):
    """pool's check of concrete graph ids, before its traced body (which checks their type and shape); not for
    ``impl="xla"``, whose ids outside the graphs belong to none."""
    ids = np.asarray(graph_ids)
    if impl != "xla" and isinstance(n_graphs, int) and ids.ndim == 1 and np.issubdtype(ids.dtype, np.integer):
        _check_graph_ids("pool", ids, n_graphs)


@public_op(checks=_pool_ids_checked)
def pool(x, graph_ids, n_graphs: int, *, reduce: str = "sum", ids_are_sorted: bool = False,
         impl: str | None = None):
    """Graph readout: reduces node features ``x [N, F]`` into ``[n_graphs, F]`` by graph id.

    Args:
      x: node features ``[N, F]``.
      graph_ids: ``[N]`` integer graph id of each node (e.g. ``jgo.batch(...).dst_graph_ids``). Concrete ids
        outside ``[0, n_graphs)`` are a ValueError naming the first. Traced ids (inside ``jit``) cannot be
        checked: a node whose id is outside ``[0, n_graphs)`` belongs to no graph (it adds to no row, and its
        gradient is 0), as in ``jax.ops.segment_sum``; the kernels and the reference agree, on every platform.
      n_graphs: number of graphs (static).
      reduce: ``sum``, ``mean``, ``max`` or ``min``; a graph without nodes gets 0.
      ids_are_sorted: promise that ``graph_ids`` never decrease (as after ``jgo.batch``), which
        skips a sort and makes ``sum`` and ``mean`` one pass over ``x``. A wrong promise is an error
        for those on the CPU (``graph_ids must never decrease``, when the computation runs) and gives
        wrong results otherwise.
      impl: None for the fused kernels, ``"xla"`` for the pure-JAX reference.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> jgo.pool(jnp.array([[1.], [2.], [4.]]), jnp.array([0, 0, 1]), 3, reduce="mean")[:, 0]
    Array([1.5, 4. , 0. ], dtype=float32)
    """
    fn = "pool"
    check_choice(fn, "reduce", reduce, REDUCES)
    check_choice(fn, "impl", impl, IMPLS)
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"{fn}: x must be a floating-point array; got dtype {x.dtype}")
    if x.ndim == 0:
        raise ValueError(f"{fn}: x must be [N, ...]; got a scalar")
    ids = jnp.asarray(graph_ids)
    if ids.shape != (x.shape[0],) or not jnp.issubdtype(ids.dtype, jnp.integer):
        raise ValueError(f"{fn}: graph_ids must be an integer array of shape ({x.shape[0]},); got "
                         f"{ids.dtype}{tuple(ids.shape)}")
    if not isinstance(n_graphs, int) or n_graphs < 0:
        raise ValueError(f"{fn}: n_graphs must be a non-negative int; got {n_graphs!r}")
    if impl == "xla":
        return reference.pool(x, ids, n_graphs, reduce=reduce)
    if ids_are_sorted and reduce in ("sum", "mean"):  # one pass over x
        _check_graph_ids(fn, ids, n_graphs)
        ids = ids.astype(jnp.int64 if ids.dtype == jnp.int64 else jnp.int32)
        work = jnp.float32 if x.dtype in HALF_TYPES else x.dtype  # half precision summed in float32
        return pool_sorted(x.astype(work), ids, n_graphs, mean=reduce == "mean").astype(x.dtype)
    return reduce_by_ids(fn, ids, n_graphs, lambda members: gspmm(members, x, op="copy_u", reduce=reduce, impl=impl),
                         ids_are_sorted=ids_are_sorted)


def reduce_by_ids(fn: str, graph_ids, n_graphs: int, reduce_members, *, ids_are_sorted: bool = False):
    """``[n_graphs, ...]``: ``reduce_members(members)`` of the graph ``members`` of edges node -> its graph, for a
    readout by graph ids that is more than one reduction (what :func:`pool` does with one ``gspmm``; PyG's
    ``AttentionalAggregation`` is an ``edge_softmax`` and a ``gspmm`` over ``members``).

    ``members`` has the ``N`` nodes as sources and as its edges (edge ``i`` is node ``i``: edge-valued arrays
    are node-valued ones), and ``n_graphs + 2`` destinations: graph ``b`` is destination ``b + 1``, the first
    and the last collect the ids below 0 and from ``n_graphs`` on, and are dropped from the result.
    ``graph_ids [N]`` (integer) are checked where concrete, the error naming ``fn``; ``ids_are_sorted`` as in
    :func:`pool`.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from jaxgraphops.ops.aggregation import reduce_by_ids
    >>> x, ids = jnp.array([[1.0], [3.0], [5.0]]), jnp.array([0, 0, 1])
    >>> reduce_by_ids("mean", ids, 2, lambda m: jgo.gspmm(m, x, reduce="mean"))[:, 0]
    Array([2., 5.], dtype=float32)
    """
    ids = jnp.asarray(graph_ids)
    _check_graph_ids(fn, ids, n_graphs)
    return graph_rows(reduce_members(membership_graph(ids, n_graphs, ids_are_sorted)))


def _check_graph_ids(fn, ids, n_graphs):
    if not isinstance(ids, jax.core.Tracer):
        values = np.asarray(ids)  # read on the host: indexing a jax array inside a trace would stage it
        bad = np.flatnonzero((values < 0) | (values >= n_graphs))
        if bad.size:
            raise ValueError(f"{fn}: graph_ids[{bad[0]}] = {int(values[bad[0]])} is out of range [0, {n_graphs})")
