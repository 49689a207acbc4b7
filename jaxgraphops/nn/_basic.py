"""The math of PyG's common layers as pure functions, shared by the flax and equinox modules.

``GCNConv`` (with :func:`gcn_norm`), ``GINConv``, ``GINEConv``, ``EdgeConv``, the global pools,
``AttentionalAggregation`` and ``GraphNorm``. The graph work runs on the fused ops: neighbourhood
sums and maxima on :func:`~jaxgraphops.gspmm` (``agg_simple``/``agg_weighted``), per-edge inputs on
:func:`~jaxgraphops.update_efeat`, readouts on :func:`~jaxgraphops.pool` and the node-to-graph
membership graph. Kernels are ``[in, out]``; ``nn`` arguments are callables on row batches
``[rows, F] -> [rows, F']`` (the equinox modules pass their per-row modules vmapped). The
``*_from_pyg`` functions read PyG ``state_dict`` entries (tensors or numpy arrays) into that layout.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import _checks
from ..batching import BatchedGraph
from ..graph import Graph
from ..ops._pool_primitives import graph_rows
from ..ops.aggregation import _membership_graph, agg_simple, agg_weighted, pool
from ..ops.message_passing import edge_softmax, gspmm
from ..ops.update_efeat import update_efeat
from ._graph_utils import add_self_loops as append_self_loops
from ._graph_utils import with_loop_rows

EDGE_CONV_AGGRS = ("max", "sum", "mean")


# -- inputs ---------------------------------------------------------------------------------------

def split_pair(layer: str, g: Graph, x):
    """``(x_src, x_dst)`` from ``x``: one array ``[n, F]`` for a square graph, or a pair."""
    if isinstance(x, tuple):
        if len(x) != 2:
            raise ValueError(f"{layer}: x must be an array or a pair (x_src, x_dst); got a tuple of {len(x)}")
        x_src, x_dst = (jnp.asarray(a) for a in x)
    else:
        if g.n_src != g.n_dst:
            raise ValueError(f"{layer}: x must be a pair (x_src, x_dst) for a bipartite graph "
                             f"(n_src={g.n_src}, n_dst={g.n_dst}); got one array")
        x_src = x_dst = jnp.asarray(x)
    for name, a, n in (("x_src" if isinstance(x, tuple) else "x", x_src, g.n_src), ("x_dst", x_dst, g.n_dst)):
        if a.ndim != 2 or a.shape[0] != n:
            raise ValueError(f"{layer}: {name} must be [{n}, F] (one row per node); got shape {a.shape}")
    return x_src, x_dst


def _edge_rows(layer: str, g: Graph, name: str, a, width: int | None = None):
    """``a`` as a float ``[n_edges, D]`` array (``[n_edges]`` is read as ``[n_edges, 1]``)."""
    a = _checks.as_float_array(layer, name, a, g.n_edges, "n_edges")
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or (width is not None and a.shape[1] != width):
        want = f"[{g.n_edges}, {width}]" if width is not None else f"[{g.n_edges}, D]"
        raise ValueError(f"{layer}: {name} must be {want}; got shape {a.shape}")
    return a


# -- GCNConv --------------------------------------------------------------------------------------

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
    return normalized_gcn_graph("gcn_norm", g, edge_weight, improved=improved, add_self_loops=add_self_loops,
                                dtype=dtype)


def normalized_gcn_graph(fn: str, g: Graph, edge_weight, *, improved: bool, add_self_loops: bool, dtype):
    """:func:`gcn_norm` with errors naming ``fn``."""
    w, w_loops = gcn_weights(fn, g, edge_weight, improved=improved, add_self_loops=add_self_loops, dtype=dtype)
    return (g, w) if w_loops is None else (append_self_loops(g), with_loop_rows(g, w, w_loops))


def gcn_weights(fn: str, g: Graph, edge_weight, *, improved: bool, add_self_loops: bool, dtype):
    """``(w [n_edges], w_loops [n] or None)``: the normalised weights of ``g``'s edges (0 on its own
    loops when loops are added) and of the added loops (:func:`gcn_norm` without building its graph:
    the layer adds ``w_loops * x`` instead of aggregating over appended loop edges)."""
    _checks.check_graph(fn, g)
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


def gcn_conv(g: Graph, x, kernel, bias, *, edge_weight=None, normalize: bool = True, improved: bool = False,
             add_loops: bool = True):
    """PyG's ``GCNConv``: ``out = Â x @ kernel + bias`` with ``Â`` from :func:`gcn_norm` if
    ``normalize``, else the adjacency weighted by ``edge_weight`` (a plain sum without).

    ``x`` is ``[n_src, F]``; returns ``[n_dst, out]``. The matmul runs first when it shrinks the
    features. The added loops are a diagonal term, ``w_loops * x``, not edges: no graph is built.
    """
    layer = "GCNConv"
    _checks.check_graph(layer, g)
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
    transform_first = kernel.shape[0] > kernel.shape[1]
    if transform_first:
        x = x @ kernel
    h = agg_simple(g, x, reduce="sum") if edge_weight is None else agg_weighted(g, x, edge_weight, reduce="sum")
    if w_loops is not None:
        h = h + w_loops[:, None].astype(h.dtype) * x
    if not transform_first:
        h = h @ kernel
    return h if bias is None else h + bias


# -- GIN, GINE, EdgeConv --------------------------------------------------------------------------

def gin_conv(g: Graph, x, eps, nn):
    """PyG's ``GINConv``: ``out_i = nn((1 + eps) x_i + sum_{j->i} x_j)``.

    ``x`` is ``[n, F]`` (square graph) or a pair ``(x_src [n_src, F], x_dst [n_dst, F])``.
    """
    _checks.check_graph("GINConv", g)
    x_src, x_dst = split_pair("GINConv", g, x)
    if x_src.shape[1] != x_dst.shape[1]:
        raise ValueError(f"GINConv: x_src and x_dst must have one width; got {x_src.shape[1]} and {x_dst.shape[1]}")
    return nn(agg_simple(g, x_src, reduce="sum") + (1 + eps) * x_dst)


def gine_conv(g: Graph, x, edge_attr, eps, nn, edge_kernel=None, edge_bias=None):
    """PyG's ``GINEConv``: ``out_i = nn((1 + eps) x_i + sum_{j->i} relu(x_j + e_ji))``.

    ``e_ji`` is ``edge_attr [n_edges, D]`` (input edge order), mapped by ``edge_attr @ edge_kernel
    + edge_bias`` (PyG's ``lin``, with ``edge_dim``) when ``edge_kernel`` is given, else used as
    it is (then ``D`` must be ``F``).
    """
    layer = "GINEConv"
    _checks.check_graph(layer, g)
    x_src, x_dst = split_pair(layer, g, x)
    width = x_src.shape[1]
    if edge_kernel is None:
        e = _edge_rows(layer, g, "edge_attr", edge_attr)
        if e.shape[1] != width:
            raise ValueError(f"{layer}: edge_attr must have the node features' width {width} (or give the layer "
                             f"edge_dim); got shape {e.shape}")
    else:
        e = _edge_rows(layer, g, "edge_attr", edge_attr, edge_kernel.shape[0]) @ edge_kernel
        if edge_bias is not None:
            e = e + edge_bias
        if e.shape[1] != width:
            raise ValueError(f"{layer}: the edge map gives {e.shape[1]} features; x has {width}")
    messages = jax.nn.relu(update_efeat(g, e.astype(jnp.result_type(e, x_src)), x_src, mode="sum"))
    return nn(agg_simple(g, edge_feat=messages, reduce="sum") + (1 + eps) * x_dst)


def edge_conv(g: Graph, x, nn, *, aggr: str = "max"):
    """PyG's ``EdgeConv``: ``out_i = aggr_{j->i} nn([x_i | x_j - x_i])`` (``nn`` maps ``2F`` to ``F'``).

    ``x`` is ``[n, F]`` or a pair ``(x_src, x_dst)``; ``aggr`` is ``max``, ``sum`` or ``mean``; an
    empty neighbourhood gives 0.
    """
    layer = "EdgeConv"
    _checks.check_graph(layer, g)
    _checks.check_choice(layer, "aggr", aggr, EDGE_CONV_AGGRS)
    x_src, x_dst = split_pair(layer, g, x)
    f = x_src.shape[1]
    if x_dst.shape[1] != f:
        raise ValueError(f"{layer}: x_src and x_dst must have one width; got {f} and {x_dst.shape[1]}")
    pairs = update_efeat(g, x_src=x_src, x_dst=x_dst, mode="concat")  # [x_j | x_i] per edge
    x_j, x_i = pairs[:, :f], pairs[:, f:]
    return agg_simple(g, edge_feat=nn(jnp.concatenate([x_i, x_j - x_i], axis=-1)), reduce=aggr)


# -- readouts over a batch ------------------------------------------------------------------------

def graph_ids(fn: str, x, batch, size):
    """``(ids, n_graphs, ids_are_sorted)`` of the rows of ``x`` from ``batch``: a
    :class:`~jaxgraphops.BatchedGraph` (its destination nodes' graphs), integer graph ids ``[N]``
    (``size`` graphs; default ``max + 1`` where the ids are concrete), or None (one graph)."""
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"{fn}: x must be [N, F] node features; got shape {x.shape}")
    if size is not None and (isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0):
        raise ValueError(f"{fn}: size must be a non-negative int (the number of graphs) or None; got {size!r}")
    if batch is None:
        return jnp.zeros(x.shape[0], jnp.int32), 1 if size is None else int(size), True
    if isinstance(batch, BatchedGraph):
        if x.shape[0] != batch.graph.n_dst:
            raise ValueError(f"{fn}: x must have one row per node of the batch, [{batch.graph.n_dst}, F]; "
                             f"got shape {x.shape}")
        if size is not None and size != batch.n_graphs:
            raise ValueError(f"{fn}: size={size} disagrees with the batch's n_graphs={batch.n_graphs}")
        return batch.dst_graph_ids, batch.n_graphs, True
    ids = batch if isinstance(batch, jax.Array) else np.asarray(batch)
    if ids.shape != (x.shape[0],) or not jnp.issubdtype(ids.dtype, jnp.integer):
        raise ValueError(f"{fn}: batch must be a BatchedGraph, integer graph ids of shape ({x.shape[0]},) or None; "
                         f"got {getattr(ids, 'dtype', type(batch).__name__)}{tuple(getattr(ids, 'shape', ()))}")
    if size is None:
        if isinstance(ids, jax.core.Tracer):
            raise ValueError(f"{fn}: size (the number of graphs) is required for traced graph ids")
        size = int(np.max(np.asarray(ids))) + 1 if ids.size else 0
    return jnp.asarray(ids), int(size), False


def global_pool(fn: str, x, batch, size, reduce: str):
    """PyG's ``global_{add,mean,max}_pool``: ``[N, F] -> [n_graphs, F]`` (an empty graph gives 0)."""
    ids, n, ids_sorted = graph_ids(fn, x, batch, size)
    return pool(jnp.asarray(x), ids, n, reduce=reduce, ids_are_sorted=ids_sorted)


def global_add_pool(x, batch=None, size=None):
    """PyG's ``global_add_pool``: the sum of each graph's node features, ``[N, F] -> [n_graphs, F]``.

    Args:
      x: node features ``[N, F]``.
      batch: a :class:`~jaxgraphops.BatchedGraph` (``x`` has a row per destination node), integer
        graph ids ``[N]`` (PyG's ``batch`` vector, any order), or None (all nodes in one graph).
      size: the number of graphs (PyG's ``size``); default the batch's ``n_graphs``, or ``max + 1``
        of concrete ids (inside ``jit`` give it).

    Returns:
      ``[n_graphs, F]``; a graph without nodes gets 0. One fused :func:`~jaxgraphops.pool`.

    >>> import jax.numpy as jnp
    >>> from jaxgraphops.nn import global_add_pool
    >>> global_add_pool(jnp.array([[1.], [2.], [4.]]), jnp.array([0, 0, 1]))[:, 0]
    Array([3., 4.], dtype=float32)
    """
    return global_pool("global_add_pool", x, batch, size, "sum")


def global_mean_pool(x, batch=None, size=None):
    """PyG's ``global_mean_pool``: the mean of each graph's node features (0 for an empty graph).

    Arguments as :func:`global_add_pool`.

    >>> import jax.numpy as jnp
    >>> from jaxgraphops.nn import global_mean_pool
    >>> global_mean_pool(jnp.array([[1.], [2.], [4.]]), jnp.array([0, 0, 2]))[:, 0]
    Array([1.5, 0. , 4. ], dtype=float32)
    """
    return global_pool("global_mean_pool", x, batch, size, "mean")


def global_max_pool(x, batch=None, size=None):
    """PyG's ``global_max_pool``: the feature-wise maximum over each graph's nodes (0 for an empty
    graph; the gradient goes to the first maximal node).

    Arguments as :func:`global_add_pool`.

    >>> import jax.numpy as jnp
    >>> from jaxgraphops.nn import global_max_pool
    >>> global_max_pool(jnp.array([[1.], [-2.], [4.]]), jnp.array([0, 0, 1]))[:, 0]
    Array([1., 4.], dtype=float32)
    """
    return global_pool("global_max_pool", x, batch, size, "max")


def attentional_aggregation(x, batch, size, gate_nn, nn=None):
    """PyG's ``AttentionalAggregation``: ``out_b = sum_{i in b} softmax_{i in b}(gate_nn(x)_i) * nn(x)_i``.

    ``gate_nn`` maps ``[N, F]`` to ``[N, 1]`` (one weight per node) or ``[N, F']`` (per feature);
    ``nn`` (None: identity) to ``[N, F']``. The softmax over each graph's nodes is
    :func:`~jaxgraphops.edge_softmax` on the node-to-graph membership graph, the weighted sum a
    ``gspmm``. Returns ``[n_graphs, F']``.
    """
    fn = "AttentionalAggregation"
    ids, n, ids_sorted = graph_ids(fn, x, batch, size)
    gate = gate_nn(x)
    h = x if nn is None else nn(x)
    if gate.ndim != 2 or gate.shape[0] != h.shape[0] or gate.shape[1] not in (1, h.shape[1]):
        raise ValueError(f"{fn}: gate_nn must give [N, 1] or [N, {h.shape[1]}] (nn's width); got {gate.shape}")
    members = _membership_graph(fn, ids, n, ids_sorted)
    return graph_rows(gspmm(members, h, edge_softmax(members, gate), op="u_mul_e", reduce="sum"))


def graph_norm(x, batch, size, weight, bias, mean_scale, *, eps: float):
    """PyG's ``GraphNorm``: ``weight * (x - a * mean_b(x)) / sqrt(mean_b((x - a * mean_b(x))^2) + eps)
    + bias`` with ``a = mean_scale`` and ``mean_b`` the mean over the nodes of each node's graph."""
    fn = "GraphNorm"
    ids, n, ids_sorted = graph_ids(fn, x, batch, size)
    x = jnp.asarray(x)
    for name, p in (("weight", weight), ("bias", bias), ("mean_scale", mean_scale)):
        if p.shape != (x.shape[1],):
            raise ValueError(f"{fn}: {name} must be [{x.shape[1]}] (x's features); got shape {p.shape}")
    mean = pool(x, ids, n, reduce="mean", ids_are_sorted=ids_sorted)
    out = x - mean[ids] * mean_scale
    var = pool(out * out, ids, n, reduce="mean", ids_are_sorted=ids_sorted)
    return weight * out * jax.lax.rsqrt(var + eps)[ids] + bias


# -- PyG weights ----------------------------------------------------------------------------------

def _array(v):
    return jnp.asarray(np.asarray(v))


def linear_stack_from_pyg(fn: str, state_dict, prefix: str) -> dict:
    """The ``Linear`` layers of a torch ``Sequential`` (or one ``Linear``) stored under ``prefix``:
    ``{index: {"kernel": [in, out], "bias"?: [out]}}``, index None for a single ``Linear``.

    A PyG ``MLP`` built with ``norm=None`` (its ``lins.<k>``, an activation after every one but the
    last) reads as the ``Sequential`` with its ``Linear`` layers at positions ``2k``. Only weights and
    biases are read (activations have none); anything else under ``prefix`` (a norm layer's
    statistics) is an error.
    """
    layers: dict = {}
    for key in sorted(k for k in state_dict if k.startswith(prefix + ".")):
        path, _, leaf = key[len(prefix) + 1:].rpartition(".")
        lins = path.startswith("lins.") and path[5:].isdigit()
        index = 2 * int(path[5:]) if lins else int(path) if path.isdigit() else None
        if leaf not in ("weight", "bias") or (path and index is None):
            raise ValueError(f"{fn}: {prefix} must be a torch.nn.Sequential of Linear layers and activations "
                             f"(keys {prefix}.<i>.weight, {prefix}.<i>.bias), one Linear, or a PyG MLP with "
                             f"norm=None; got the key {key!r}")
        layers.setdefault(index, {})[leaf] = _array(state_dict[key])
    if not layers:
        raise ValueError(f"{fn}: state_dict has no {prefix}.* weights")
    if None in layers and len(layers) > 1:
        raise ValueError(f"{fn}: {prefix} mixes a Linear's keys with a Sequential's")
    out = {}
    for index, p in layers.items():
        w, b = p.get("weight"), p.get("bias")
        if w is None or w.ndim != 2 or (b is not None and b.shape != (w.shape[0],)):
            name = prefix if index is None else f"{prefix}.{index}"
            raise ValueError(f"{fn}: {name} must be a Linear with weight [out, in] and bias [out]; got shapes "
                             f"{ {k: tuple(v.shape) for k, v in p.items()} }")
        out[index] = {"kernel": w.T, **({} if b is None else {"bias": b})}
    return out


def _check_keys(fn: str, layer: str, state_dict, prefixes: tuple, keys: tuple, required: tuple = ()) -> None:
    extra = sorted(k for k in state_dict if k not in keys and not k.startswith(tuple(p + "." for p in prefixes)))
    missing = sorted(k for k in required if k not in state_dict)
    if extra or missing:
        allowed = [f"{p}.*" for p in prefixes] + list(keys)
        raise ValueError(f"{fn}: a PyG {layer} state_dict has the keys {allowed} (required: {list(required)}); "
                         f"unexpected {extra}, missing {missing}")


def gin_weights_from_pyg(fn: str, state_dict, *, edge: bool = False) -> dict:
    """PyG ``GINConv`` (``GINEConv`` with ``edge``) weights: ``{"eps": [1], "nn": linear stack,
    "edge_kernel"?: [edge_dim, F], "edge_bias"?: [F]}`` (``lin``, PyG's ``edge_dim``)."""
    layer = "GINEConv" if edge else "GINConv"
    _check_keys(fn, layer, state_dict, ("nn",), ("eps",) + (("lin.weight", "lin.bias") if edge else ()), ("eps",))
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
    _check_keys(fn, "EdgeConv", state_dict, ("nn",), ())
    return {"nn": linear_stack_from_pyg(fn, state_dict, "nn")}


def attentional_aggregation_weights_from_pyg(fn: str, state_dict) -> dict:
    """PyG ``AttentionalAggregation`` weights: ``{"gate_nn": linear stack, "nn"?: linear stack}``
    (PyG stores a PyG ``MLP`` as ``gate_mlp`` / ``mlp``, other modules as ``gate_nn`` / ``nn``)."""
    _check_keys(fn, "AttentionalAggregation", state_dict, ("gate_nn", "gate_mlp", "nn", "mlp"), ())
    w = {}
    for name, mlp_name in (("gate_nn", "gate_mlp"), ("nn", "mlp")):
        stored = [p for p in (name, mlp_name) if any(k.startswith(p + ".") for k in state_dict)]
        if len(stored) > 1:
            raise ValueError(f"{fn}: state_dict has both {name}.* and {mlp_name}.* weights")
        if stored:
            w[name] = linear_stack_from_pyg(fn, state_dict, stored[0])
    if "gate_nn" not in w:
        raise ValueError(f"{fn}: state_dict has no gate_nn.* (or gate_mlp.*) weights")
    return w


def graph_norm_weights_from_pyg(fn: str, state_dict) -> dict:
    """PyG ``GraphNorm`` weights: ``{"weight", "bias", "mean_scale"}``, each ``[F]``."""
    names = ("weight", "bias", "mean_scale")
    _check_keys(fn, "GraphNorm", state_dict, (), names, names)
    w = {k: _array(state_dict[k]) for k in names}
    if len({v.shape for v in w.values()}) != 1 or w["weight"].ndim != 1:
        raise ValueError(f"{fn}: weight, bias and mean_scale must be [F] with one F; got shapes "
                         f"{ {k: tuple(v.shape) for k, v in w.items()} }")
    return w
