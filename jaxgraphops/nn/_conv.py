"""The convolution layers' math as pure functions, shared by the linen, NNX and equinox modules, and their PyG
weight loaders: ``SAGEConv``, ``GraphConv`` (DGL's), ``GCNConv`` (with :func:`gcn_norm`), ``GINConv``,
``GINEConv`` and ``EdgeConv``.

The graph work runs on the public fused ops: neighbourhood reductions on :func:`~jaxgraphops.agg_simple`,
:func:`~jaxgraphops.agg_weighted` and :func:`~jaxgraphops.agg_concat`, per-edge inputs on
:func:`~jaxgraphops.update_efeat`. Kernels are ``[in, out]`` (flax's layout; the equinox modules pass their
``[out, in]`` weights transposed); ``nn`` arguments are callables on row batches ``[rows, F] -> [rows, F']``
(the equinox modules pass their per-row modules vmapped).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import _checks
from ..graph import Graph, check_graph
from ..ops.aggregation import agg_concat, agg_simple, agg_weighted
from ..ops.message_passing import gspmm
from ..ops.update_efeat import update_efeat
from ._common import check_dst_rows, check_features, edge_rows, layer_scope, real_edge_rows, split_pair
from ._graph_utils import add_self_loops as append_self_loops
from ._graph_utils import with_loop_rows
from ._pyg import check_keys, kernels_from_pyg, linear_stack_from_pyg
from ._pyg import array as _array

SAGE_AGGRS = ("mean", "max", "sum", "min")
GRAPH_CONV_NORMS = ("both", "right", "none")
EDGE_CONV_AGGRS = ("max", "sum", "mean")


# -- SAGEConv -------------------------------------------------------------------------------------

def split_sage_input(g: Graph, x):
    """``(x_src, x_dst)`` from SAGEConv's ``x``: an array, or a tuple for a bipartite graph."""
    if isinstance(x, tuple):
        if len(x) != 2:
            raise ValueError(f"SAGEConv: x must be an array or a pair (x_src, x_dst); got a tuple of {len(x)}")
        return x[0], check_dst_rows("SAGEConv", g, x[1])
    if g.n_src != g.n_dst:
        raise ValueError(f"SAGEConv: x must be a pair (x_src, x_dst) for a bipartite graph "
                         f"(n_src={g.n_src}, n_dst={g.n_dst}); got one array")
    return x, x


@layer_scope("SAGEConv")
def sage_conv(g: Graph, x_src, x_dst, neigh_kernel, root_kernel, bias, *, aggr: str, normalize: bool):
    """``aggr_{j->i} x_j @ neigh_kernel + x_i @ root_kernel + bias``, then optionally L2-normalised.

    ``root_kernel`` and ``bias`` may be None (no root term, no bias). The graph work is one
    ``agg_concat`` (or ``agg_simple`` without a root term), followed by one matmul.
    """
    check_graph("SAGEConv", g)
    check_features("SAGEConv", "x_src", x_src, neigh_kernel.shape[0])
    if root_kernel is None:
        h, kernel = agg_simple(g, x_src, reduce=aggr), neigh_kernel
    else:
        check_features("SAGEConv", "x_dst", x_dst, root_kernel.shape[0])
        h = agg_concat(g, x_src, x_dst=x_dst, reduce=aggr)
        kernel = jnp.concatenate([neigh_kernel, root_kernel], axis=0)
    out = h @ kernel
    if bias is not None:
        out = out + bias
    if normalize:  # PyG's F.normalize(out, p=2, dim=-1, eps=1e-12); the scale is constant below eps,
        # so a zero row has finite gradients
        out = out * jax.lax.rsqrt(jnp.maximum(jnp.sum(out * out, axis=-1, keepdims=True), 1e-24))
    return out


def sage_weights_from_pyg(fn: str, state_dict) -> dict:
    """PyG ``SAGEConv`` weights as ``{neigh_kernel, root_kernel?, bias?}`` in ``[in, out]`` layout.

    ``lin_r.weight`` is absent for ``root_weight=False``, ``lin_l.bias`` for ``bias=False``;
    ``project=True`` (a ``lin`` entry) is not supported.
    """
    names = {"lin_l.weight": "neigh_kernel", "lin_r.weight": "root_kernel", "lin_l.bias": "bias"}
    return kernels_from_pyg(fn, state_dict, names, "lin_l.weight")


# -- GraphConv (DGL's) ----------------------------------------------------------------------------

def gcn_edge_weights(g: Graph, dtype):
    """``1 / sqrt(out_degree(src) * in_degree(dst))`` per edge, ``[n_edges]`` (finite: both are >= 1)."""
    out_deg = g.out_degrees().astype(dtype)[g.src]
    in_deg = g.in_degrees().astype(dtype)[g.dst]
    return jax.lax.rsqrt(out_deg * in_deg)


def _transform_first(layer: str, x, kernel) -> bool:
    """Whether the matmul runs before the aggregation (when it shrinks the features, as in DGL); checks
    that ``x`` has the kernel's input width."""
    check_features(layer, "x", x, kernel.shape[0])
    return kernel.shape[0] > kernel.shape[1]


@layer_scope("GraphConv")
def graph_conv(g: Graph, x, kernel, bias, *, norm: str, add_loops: bool):
    """``Â x @ kernel + bias`` with ``Â`` the adjacency (with self loops if ``add_loops``) normalised
    by ``norm``: ``both`` D_in^-1/2 A D_out^-1/2, ``right`` D_in^-1 A (mean), ``none`` A (sum).

    The matmul runs before the aggregation when it shrinks the features, as in DGL.
    """
    check_graph("GraphConv", g)
    transform_first = _transform_first("GraphConv", x, kernel)
    if add_loops:
        g = append_self_loops(g)
    if transform_first:
        x = x @ kernel
    if norm == "both":
        h = agg_weighted(g, x, gcn_edge_weights(g, jnp.result_type(x)), reduce="sum")
    else:
        h = agg_simple(g, x, reduce="mean" if norm == "right" else "sum")
    if not transform_first:
        h = h @ kernel
    return h if bias is None else h + bias


def gcn_weights_from_pyg(fn: str, state_dict) -> dict:
    """PyG ``GCNConv`` weights as ``{kernel, bias?}`` in ``[in, out]`` layout."""
    return kernels_from_pyg(fn, state_dict, {"lin.weight": "kernel", "bias": "bias"}, "lin.weight")


# -- GCNConv (PyG's) ------------------------------------------------------------------------------

def gcn_norm(g: Graph, edge_weight=None, *, improved: bool = False, add_self_loops: bool = True, dtype=None):
    """PyG's ``gcn_norm``: the graph of ``Â = A (+ I)`` and its weights ``D^-1/2 Â D^-1/2``.

    With ``add_self_loops`` (PyG's ``add_remaining_self_loops``) every node gets one loop of weight
    1 (2 with ``improved``); a node that already has a loop keeps that loop's weight when
    ``edge_weight`` is given (the last such loop in edge order), and its existing loop(s) drop out.
    In static shapes: the returned graph is ``g`` with one loop per node appended
    (:func:`jaxgraphops.nn.add_self_loops`), and ``g``'s own loops get weight 0. ``D`` holds the
    weighted in-degrees of ``Â`` (PyG's ``source_to_target`` flow); a node of degree 0 gets factor 0.
    (Without ``edge_weight``, PyG's ``edge_index`` path gives the loops weight 1 even with
    ``improved``; its documentation and its ``SparseTensor`` path say 2, as here.)

    This is also PyG's ``cached=True``: compute ``gcn_norm`` once and apply ``GCNConv`` with
    ``normalize=False`` to its result, ``layer(g_hat, x, w_hat)``; inside ``jit`` the normalisation
    of a fixed graph is otherwise recomputed at every call.

    Args:
      g: a square graph (``n_src == n_dst``).
      edge_weight: ``[n_edges]`` in input edge order, or None (weights 1).
      improved: loops of weight 2 (``A + 2I``).
      add_self_loops: add the loops (else only normalise ``A``).
      dtype: the weights' dtype (default: ``edge_weight``'s, or float32).

    Returns:
      ``(g_hat, w_hat)``: the graph (``n_edges + n`` edges with loops, the added loops last, in node
      order; with padding edges, before them) and its normalised weights ``[g_hat.n_edges]`` in
      ``g_hat``'s edge order.

    >>> import numpy as np, jaxgraphops as jgo
    >>> from jaxgraphops.nn import gcn_norm
    >>> g = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 1]))  # 0 -> 1 and a loop at 1
    >>> g_hat, w = gcn_norm(g)
    >>> g_hat.n_edges, [round(v, 4) for v in w.tolist()]  # the old loop weighs 0, its replacement 1/2
    (4, [0.7071, 0.0, 1.0, 0.5])
    """
    fn = "gcn_norm"
    w, w_loops = gcn_weights(fn, g, edge_weight, improved=improved, add_self_loops=add_self_loops, dtype=dtype)
    return (g, w) if w_loops is None else (append_self_loops(g), with_loop_rows(g, w, w_loops))


def gcn_weights(fn: str, g: Graph, edge_weight, *, improved: bool, add_self_loops: bool, dtype):
    """``(w [n_edges], w_loops [n] or None)``: the normalised weights of ``g``'s edges (0 on its own
    loops when loops are added) and of the added loops (:func:`gcn_norm` without building its graph:
    the layer adds ``w_loops * x`` instead of aggregating over appended loop edges)."""
    check_graph(fn, g)
    _checks.check_bool(fn, "improved", improved)
    _checks.check_bool(fn, "add_self_loops", add_self_loops)
    if g.n_src != g.n_dst:
        raise ValueError(f"{fn}: g must be square (GCN normalises by in-degrees on both sides); got n_src={g.n_src}, "
                         f"n_dst={g.n_dst}")
    if edge_weight is None:
        w = jnp.ones(g.n_edges, dtype or jnp.float32)
    else:
        w = _checks.as_float_array(fn, "edge_weight", edge_weight, g.n_edges, "n_edges")
        if w.ndim != 1:
            raise ValueError(f"{fn}: edge_weight must be [n_edges] = [{g.n_edges}]; got shape {w.shape}")
        w = w.astype(dtype or w.dtype)
    loop_w = None
    if add_self_loops:
        n, fill = g.n_dst, 2.0 if improved else 1.0
        is_loop = (g.src == g.dst) & g.real_edge_mask()
        loop_w = jnp.full(n, fill, w.dtype)
        if edge_weight is not None:  # the last loop of each node (a scatter-max of edge ids: deterministic)
            eids = jnp.arange(g.n_edges, dtype=jnp.int32)
            last = jnp.full(n, -1, jnp.int32).at[jnp.where(is_loop, g.dst, n)].max(eids, mode="drop")
            loop_w = jnp.where(last >= 0, w[jnp.maximum(last, 0)], loop_w)
        w = jnp.where(is_loop, jnp.zeros((), w.dtype), w)
    deg = gspmm(g, e=w[:, None], op="copy_e", reduce="sum")[:, 0]
    if loop_w is not None:
        deg = deg + loop_w
    nonzero = deg != 0
    d = jnp.where(nonzero, jax.lax.rsqrt(jnp.where(nonzero, deg, 1)), 0)  # negative degrees give NaN, as PyG's
    return d[g.src] * w * d[g.dst], None if loop_w is None else d * loop_w * d


@layer_scope("GCNConv")
def gcn_conv(g: Graph, x, kernel, bias, *, edge_weight=None, normalize: bool = True, improved: bool = False,
             add_loops: bool = True):
    """PyG's ``GCNConv``: ``out = Â x @ kernel + bias`` with ``Â`` from :func:`gcn_norm` if
    ``normalize``, else the adjacency weighted by ``edge_weight`` (a plain sum without).

    ``x`` is ``[n_src, F]``; returns ``[n_dst, out]``. The matmul runs first when it shrinks the
    features. The added loops are a diagonal term, ``w_loops * x``, not edges: no graph is built.
    """
    layer = "GCNConv"
    check_graph(layer, g)
    if add_loops and not normalize:
        raise ValueError(f"{layer}: add_self_loops=True needs normalize=True (PyG: self loops are added by the "
                         f"on-the-fly normalisation)")
    x = jnp.asarray(x)
    if x.ndim != 2 or x.shape[0] != g.n_src:
        raise ValueError(f"{layer}: x must be [n_src, F] with n_src={g.n_src}; got shape {x.shape}")
    w_loops = None
    if normalize:
        edge_weight, w_loops = gcn_weights(layer, g, edge_weight, improved=improved, add_self_loops=add_loops,
                                           dtype=jnp.result_type(x, kernel))
    elif edge_weight is not None:
        edge_weight = _checks.as_float_array(layer, "edge_weight", edge_weight, g.n_edges, "n_edges")
    transform_first = _transform_first(layer, x, kernel)
    if transform_first:
        x = x @ kernel
    h = agg_simple(g, x, reduce="sum") if edge_weight is None else agg_weighted(g, x, edge_weight, reduce="sum")
    if w_loops is not None:
        h = h + w_loops[:, None].astype(h.dtype) * x
    if not transform_first:
        h = h @ kernel
    return h if bias is None else h + bias


# -- GIN, GINE, EdgeConv --------------------------------------------------------------------------

@layer_scope("GINConv")
def gin_conv(g: Graph, x, eps, nn):
    """PyG's ``GINConv``: ``out_i = nn((1 + eps) x_i + sum_{j->i} x_j)``.

    ``x`` is ``[n, F]`` (square graph) or a pair ``(x_src [n_src, F], x_dst [n_dst, F])``.
    """
    check_graph("GINConv", g)
    x_src, x_dst = split_pair("GINConv", g, x)
    if x_src.shape[1] != x_dst.shape[1]:
        raise ValueError(f"GINConv: x_src and x_dst must have one width; got {x_src.shape[1]} and {x_dst.shape[1]}")
    return nn(agg_simple(g, x_src, reduce="sum") + (1 + eps) * x_dst)


@layer_scope("GINEConv")
def gine_conv(g: Graph, x, edge_attr, eps, nn, edge_kernel=None, edge_bias=None):
    """PyG's ``GINEConv``: ``out_i = nn((1 + eps) x_i + sum_{j->i} relu(x_j + e_ji))``.

    ``e_ji`` is ``edge_attr [n_edges, D]`` (input edge order), mapped by ``edge_attr @ edge_kernel
    + edge_bias`` (PyG's ``lin``, with ``edge_dim``) when ``edge_kernel`` is given, else used as
    it is (then ``D`` must be ``F``). The padding edges' rows are 0 before the map
    (:func:`~._common.real_edge_rows`): whatever they hold never reaches a gradient.
    """
    layer = "GINEConv"
    check_graph(layer, g)
    x_src, x_dst = split_pair(layer, g, x)
    width = x_src.shape[1]
    if edge_kernel is None:
        e = edge_rows(layer, g, "edge_attr", edge_attr)
        if e.shape[1] != width:
            raise ValueError(f"{layer}: edge_attr must have the node features' width {width} (or give the layer "
                             f"edge_dim); got shape {e.shape}")
    else:
        e = real_edge_rows(g, edge_rows(layer, g, "edge_attr", edge_attr, edge_kernel.shape[0])) @ edge_kernel
        if edge_bias is not None:
            e = e + edge_bias
        check_features(layer, "x", x_src, e.shape[1], "in_features (the edge map's outputs)")
    messages = jax.nn.relu(update_efeat(g, e.astype(jnp.result_type(e, x_src)), x_src, mode="sum"))
    return nn(agg_simple(g, edge_feat=messages, reduce="sum") + (1 + eps) * x_dst)


@layer_scope("EdgeConv")
def edge_conv(g: Graph, x, nn, *, aggr: str = "max"):
    """PyG's ``EdgeConv``: ``out_i = aggr_{j->i} nn([x_i | x_j - x_i])`` (``nn`` maps ``2F`` to ``F'``).

    ``x`` is ``[n, F]`` or a pair ``(x_src, x_dst)``; ``aggr`` is ``max``, ``sum`` or ``mean``; an
    empty neighbourhood gives 0.
    """
    layer = "EdgeConv"
    check_graph(layer, g)
    _checks.check_choice(layer, "aggr", aggr, EDGE_CONV_AGGRS)
    x_src, x_dst = split_pair(layer, g, x)
    f = x_src.shape[1]
    if x_dst.shape[1] != f:
        raise ValueError(f"{layer}: x_src and x_dst must have one width; got {f} and {x_dst.shape[1]}")
    pairs = update_efeat(g, x_src=x_src, x_dst=x_dst, mode="concat")  # [x_j | x_i] per edge
    x_j, x_i = pairs[:, :f], pairs[:, f:]
    return agg_simple(g, edge_feat=nn(jnp.concatenate([x_i, x_j - x_i], axis=-1)), reduce=aggr)


def gin_weights_from_pyg(fn: str, state_dict, *, edge: bool = False) -> dict:
    """PyG ``GINConv`` (``GINEConv`` with ``edge``) weights: ``{"eps": [1], "nn": linear stack,
    "edge_kernel"?: [edge_dim, F], "edge_bias"?: [F]}`` (``lin``, PyG's ``edge_dim``)."""
    layer = "GINEConv" if edge else "GINConv"
    check_keys(fn, layer, state_dict, ("nn",), ("eps",) + (("lin.weight", "lin.bias") if edge else ()), ("eps",))
    eps = _array(state_dict["eps"])
    if eps.shape != (1,):
        raise ValueError(f"{fn}: eps must have shape (1,); got {tuple(eps.shape)}")
    w = {"eps": eps, "nn": linear_stack_from_pyg(fn, state_dict, "nn")}
    if "lin.weight" in state_dict:
        lin = _array(state_dict["lin.weight"])
        if lin.ndim != 2:
            raise ValueError(f"{fn}: lin.weight must be [in_channels, edge_dim]; got shape {tuple(lin.shape)}")
        w["edge_kernel"] = lin.T
        if "lin.bias" in state_dict:
            w["edge_bias"] = _array(state_dict["lin.bias"])
    return w


def edge_conv_weights_from_pyg(fn: str, state_dict) -> dict:
    """PyG ``EdgeConv`` weights: ``{"nn": linear stack}``."""
    check_keys(fn, "EdgeConv", state_dict, ("nn",), ())
    return {"nn": linear_stack_from_pyg(fn, state_dict, "nn")}
