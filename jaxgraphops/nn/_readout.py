"""The readouts' math as pure functions, shared by the linen, NNX and equinox modules, and their PyG weight
loaders: PyG's ``global_{add,mean,max}_pool``, ``AttentionalAggregation`` and ``GraphNorm``, over a
:class:`~jaxgraphops.BatchedGraph`, integer graph ids or one graph.

The sums, means and maxima per graph are one fused :func:`~jaxgraphops.pool` each; the attention readout is an
:func:`~jaxgraphops.edge_softmax` and a :func:`~jaxgraphops.gspmm` over the node-to-graph membership graph
(:func:`~jaxgraphops.ops.aggregation.reduce_by_ids`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..batching import BatchedGraph
from ..ops.aggregation import pool, reduce_by_ids
from ..ops.message_passing import edge_softmax, gspmm
from ._common import layer_scope
from ._pyg import array as _array
from ._pyg import check_keys, linear_stack_from_pyg


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


@layer_scope("AttentionalAggregation")
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
    return reduce_by_ids(fn, ids, n, lambda members: gspmm(members, h, edge_softmax(members, gate), op="u_mul_e",
                                                           reduce="sum"), ids_are_sorted=ids_sorted)


@layer_scope("GraphNorm")
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



def attentional_aggregation_weights_from_pyg(fn: str, state_dict) -> dict:
    """PyG ``AttentionalAggregation`` weights: ``{"gate_nn": linear stack, "nn"?: linear stack}``
    (PyG stores a PyG ``MLP`` as ``gate_mlp`` / ``mlp``, other modules as ``gate_nn`` / ``nn``)."""
    check_keys(fn, "AttentionalAggregation", state_dict, ("gate_nn", "gate_mlp", "nn", "mlp"), ())
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
    check_keys(fn, "GraphNorm", state_dict, (), names, names)
    w = {k: _array(state_dict[k]) for k in names}
    if len({v.shape for v in w.values()}) != 1 or w["weight"].ndim != 1:
        raise ValueError(f"{fn}: weight, bias and mean_scale must be [F] with one F; got shapes "
                         f"{ {k: tuple(v.shape) for k, v in w.items()} }")
    return w
