"""The convolution layers as equinox modules: ``SAGEConv``, ``GraphConv``, ``GCNConv``, ``GINConv``, ``GINEConv``
and ``EdgeConv``, with ``from_pyg`` class methods. The math: :mod:`jaxgraphops.nn._conv`.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from ...graph import Graph
from .._common import check_choice, check_layer, in_sizes
from .._conv import (EDGE_CONV_AGGRS, GRAPH_CONV_NORMS, SAGE_AGGRS, edge_conv, edge_conv_weights_from_pyg, gcn_conv,
                     gcn_weights_from_pyg, gin_conv, gin_weights_from_pyg, gine_conv, graph_conv, sage_conv,
                     sage_weights_from_pyg, split_sage_input)
from ._common import kernel, load, rows, sequential

__all__ = ["EdgeConv", "GCNConv", "GINConv", "GINEConv", "GraphConv", "SAGEConv"]


class SAGEConv(eqx.Module):
    """GraphSAGE (PyG's ``SAGEConv``): ``out_i = W_l aggr_{j->i} x_j + b + W_r x_i``.

    ``lin_neigh`` holds ``W_l [out, F_src]`` and ``b`` (PyG's ``lin_l``), ``lin_root`` holds
    ``W_r [out, F_dst]`` (PyG's ``lin_r``; None without ``root_weight``). The graph work is one
    fused :func:`jaxgraphops.agg_concat`; empty neighbourhoods aggregate to 0.

    **Arguments:**

    - ``in_features``: ``F``, or ``(F_src, F_dst)`` for a bipartite graph.
    - ``out_features``: output features.
    - ``aggr``: ``mean``, ``max``, ``sum`` or ``min``, over the incoming edges of each destination.
    - ``root_weight``: add ``W_r x_i``.
    - ``use_bias``: add ``b`` (PyG's ``bias``).
    - ``normalize``: L2-normalise each output row (PyG's ``normalize``).
    - ``key``: PRNG key for the initial weights (``eqx.nn.Linear``'s initialisation).

    Call ``layer(g, x)``: ``x`` is ``[n_src, F]`` for a square graph, or a pair
    ``(x_src [n_src, F_src], x_dst [n_dst, F_dst])``; returns ``[n_dst, out_features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = SAGEConv(4, 8, aggr="max", key=jax.random.key(0))
    >>> layer(g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    lin_neigh: eqx.nn.Linear
    lin_root: eqx.nn.Linear | None
    aggr: str = eqx.field(static=True)
    normalize: bool = eqx.field(static=True)

    def __init__(self, in_features: int | tuple[int, int], out_features: int, *, aggr: str = "mean",
                 root_weight: bool = True, use_bias: bool = True, normalize: bool = False, key: jax.Array):
        check_choice("SAGEConv", "aggr", aggr, SAGE_AGGRS)
        check_layer(self, locals(), skip=("in_features",))
        in_src, in_dst = in_sizes("SAGEConv", in_features)
        neigh_key, root_key = jax.random.split(key)
        self.lin_neigh = eqx.nn.Linear(in_src, out_features, use_bias=use_bias, key=neigh_key)
        self.lin_root = eqx.nn.Linear(in_dst, out_features, use_bias=False, key=root_key) if root_weight else None
        self.aggr, self.normalize = aggr, normalize

    def __call__(self, g: Graph, x):
        x_src, x_dst = split_sage_input(g, x)
        root = None if self.lin_root is None else self.lin_root.weight.T
        return sage_conv(g, x_src, x_dst, self.lin_neigh.weight.T, root, self.lin_neigh.bias,
                         aggr=self.aggr, normalize=self.normalize)

    @classmethod
    def from_pyg(cls, state_dict, *, aggr: str = "mean", normalize: bool = False) -> SAGEConv:
        """The layer with the weights of a PyG ``SAGEConv.state_dict()`` (tensors or numpy arrays).

        Sizes, ``root_weight`` and ``use_bias`` follow from the entries (``lin_l.weight``,
        ``lin_l.bias``, ``lin_r.weight``); give PyG's ``aggr`` and ``normalize``.

        >>> import numpy as np
        >>> sd = {"lin_l.weight": np.ones((8, 4)), "lin_r.weight": np.ones((8, 5))}
        >>> layer = SAGEConv.from_pyg(sd, aggr="sum")
        >>> layer.lin_root.weight.shape, layer.lin_neigh.bias is None
        ((8, 5), True)
        """
        w = sage_weights_from_pyg("SAGEConv.from_pyg", state_dict)
        in_src, out_features = w["neigh_kernel"].shape
        root = w.get("root_kernel")
        in_dst = in_src if root is None else root.shape[0]
        layer = cls((in_src, in_dst), out_features, aggr=aggr, root_weight=root is not None, use_bias="bias" in w,
                    normalize=normalize, key=jax.random.key(0))
        layer = eqx.tree_at(lambda m: m.lin_neigh.weight, layer, w["neigh_kernel"].T)
        if "bias" in w:
            layer = eqx.tree_at(lambda m: m.lin_neigh.bias, layer, w["bias"])
        if root is not None:
            layer = eqx.tree_at(lambda m: m.lin_root.weight, layer, root.T)
        return layer


class GraphConv(eqx.Module):
    """Graph convolution (DGL's ``GraphConv``): ``out = Â x W + b`` with ``Â`` the adjacency normalised by
    ``norm`` (``both``, ``right``, ``none``), the linen :class:`jaxgraphops.nn.flax.GraphConv` (where ``norm`` and
    how it differs from PyG's :class:`GCNConv` are described) as an equinox module.

    ``lin`` holds ``W [out, in]`` (no bias), ``bias`` is ``[out]`` (zeros at first; None
    without ``use_bias``), as PyG's ``lin.weight`` and ``bias``.

    **Arguments:**

    - ``in_features``, ``out_features``: feature sizes.
    - ``norm``: ``both``, ``right`` or ``none``.
    - ``add_self_loops``: aggregate over ``A + I`` instead of ``A``.
    - ``use_bias``: add ``b``.
    - ``key``: PRNG key for the initial weight.

    Call ``layer(g, x)`` with ``x [n_src, in_features]``; returns ``[n_dst, out_features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 1, 2]), jnp.array([1, 0, 2, 1]))
    >>> layer = GraphConv(4, 8, key=jax.random.key(0))
    >>> layer(g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    lin: eqx.nn.Linear
    bias: jax.Array | None
    norm: str = eqx.field(static=True)
    add_self_loops: bool = eqx.field(static=True)

    def __init__(self, in_features: int, out_features: int, *, norm: str = "both", add_self_loops: bool = True,
                 use_bias: bool = True, key: jax.Array):
        check_choice("GraphConv", "norm", norm, GRAPH_CONV_NORMS)
        check_layer(self, locals())
        self.lin = eqx.nn.Linear(in_features, out_features, use_bias=False, key=key)
        self.bias = jnp.zeros(out_features) if use_bias else None
        self.norm, self.add_self_loops = norm, add_self_loops

    def __call__(self, g: Graph, x):
        return graph_conv(g, x, self.lin.weight.T, self.bias, norm=self.norm, add_loops=self.add_self_loops)

    @classmethod
    def from_pyg(cls, state_dict, *, norm: str = "both", add_self_loops: bool = True) -> GraphConv:
        """The layer with the weights of a PyG ``GCNConv.state_dict()`` (``lin.weight``, ``bias``).

        >>> import numpy as np
        >>> GraphConv.from_pyg({"lin.weight": np.ones((8, 4)), "bias": np.zeros(8)}).lin.weight.shape
        (8, 4)
        """
        w = gcn_weights_from_pyg("GraphConv.from_pyg", state_dict)
        in_features, out_features = w["kernel"].shape
        layer = cls(in_features, out_features, norm=norm, add_self_loops=add_self_loops, use_bias="bias" in w,
                    key=jax.random.key(0))
        layer = eqx.tree_at(lambda m: m.lin.weight, layer, w["kernel"].T)
        return eqx.tree_at(lambda m: m.bias, layer, w["bias"]) if "bias" in w else layer


class GCNConv(eqx.Module):
    """Graph convolution exactly as PyG's ``GCNConv``: ``out = D^-1/2 Â D^-1/2 x W^T + b``, the linen
    :class:`jaxgraphops.nn.flax.GCNConv` (PyG's self loops and edge weights; its ``cached=True`` as
    :func:`jaxgraphops.nn.gcn_norm` once, then ``normalize=False``) as an equinox module.

    Fields as PyG's parameters: ``lin`` (``[out, in]``, no bias), ``bias [out]`` (zeros at first;
    None without ``use_bias``).

    **Arguments:**

    - ``in_features``, ``out_features``: feature sizes.
    - ``improved``: self loops of weight 2.
    - ``add_self_loops``: add them (None: as ``normalize``, PyG's default; True needs ``normalize``).
    - ``normalize``: symmetric normalisation on the fly.
    - ``use_bias``: add ``bias`` (PyG's ``bias``).
    - ``key``: PRNG key for the initial weight (glorot, as PyG's).

    Call ``layer(g, x, edge_weight=None)``: ``x [n, in_features]``, ``edge_weight [n_edges]`` in
    input edge order; returns ``[n, out_features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2, 2]), jnp.array([1, 2, 1, 2]))
    >>> layer = GCNConv(4, 8, key=jax.random.key(0))
    >>> layer(g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    lin: eqx.nn.Linear
    bias: jax.Array | None
    improved: bool = eqx.field(static=True)
    add_self_loops: bool = eqx.field(static=True)
    normalize: bool = eqx.field(static=True)

    def __init__(self, in_features: int, out_features: int, *, improved: bool = False,
                 add_self_loops: bool | None = None, normalize: bool = True, use_bias: bool = True, key: jax.Array):
        check_layer(self, locals(), nullable=("add_self_loops",))
        loops = normalize if add_self_loops is None else add_self_loops
        if loops and not normalize:
            raise ValueError("GCNConv: add_self_loops=True needs normalize=True (PyG: self loops are added by the "
                             "on-the-fly normalisation)")
        self.lin = eqx.nn.Linear(in_features, out_features, use_bias=False, key=key)
        self.lin = eqx.tree_at(lambda m: m.weight, self.lin,
                               jax.nn.initializers.glorot_uniform()(key, (out_features, in_features)))
        self.bias = jnp.zeros(out_features) if use_bias else None
        self.improved, self.add_self_loops, self.normalize = improved, loops, normalize

    def __call__(self, g: Graph, x, edge_weight=None):
        return gcn_conv(g, x, self.lin.weight.T, self.bias, edge_weight=edge_weight, normalize=self.normalize,
                        improved=self.improved, add_loops=self.add_self_loops)

    @classmethod
    def from_pyg(cls, state_dict, *, improved: bool = False, add_self_loops: bool | None = None,
                 normalize: bool = True) -> GCNConv:
        """The layer with the weights of a PyG ``GCNConv.state_dict()`` (``lin.weight``, ``bias``);
        give PyG's ``improved``, ``add_self_loops`` and ``normalize``.

        >>> import numpy as np
        >>> GCNConv.from_pyg({"lin.weight": np.ones((8, 4)), "bias": np.zeros(8)}).lin.weight.shape
        (8, 4)
        """
        w = gcn_weights_from_pyg("GCNConv.from_pyg", state_dict)
        in_features, out_features = w["kernel"].shape
        layer = cls(in_features, out_features, improved=improved, add_self_loops=add_self_loops, normalize=normalize,
                    use_bias="bias" in w,
                    key=jax.random.key(0))
        return load(layer, {"kernel": lambda m: m.lin.weight, "bias": lambda m: m.bias}, w)


class GINConv(eqx.Module):
    """Graph isomorphism convolution (PyG's ``GINConv``): ``out_i = nn((1 + eps) x_i + sum_{j->i} x_j)``.

    The sum is one fused :func:`jaxgraphops.agg_simple`; ``nn`` is vmapped over the rows.

    **Arguments:**

    - ``nn``: the update on one row, ``[F] -> [F']`` (``eqx.nn.MLP``, ``eqx.nn.Sequential``, any function).
    - ``eps``: the (initial) epsilon.
    - ``train_eps``: store epsilon as a ``[1]`` array (trained with the weights), else as a float.

    Call ``layer(g, x)``: ``x [n, F]`` or a pair ``(x_src, x_dst)`` (bipartite, one width); returns
    ``[n_dst, F']``.

    >>> import jax, jax.numpy as jnp, equinox as eqx, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = GINConv(eqx.nn.MLP(4, 8, 16, 1, key=jax.random.key(0)), train_eps=True)
    >>> layer(g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    nn: Callable
    eps: jax.Array | float

    def __init__(self, nn: Callable, *, eps: float = 0.0, train_eps: bool = False):
        check_layer(self, locals())
        self.nn, self.eps = nn, jnp.full(1, eps, jnp.float32) if train_eps else float(eps)

    def __call__(self, g: Graph, x):
        return gin_conv(g, x, self.eps, rows(self.nn))

    @classmethod
    def from_pyg(cls, state_dict, *, train_eps: bool = False, activation: Callable = jax.nn.relu) -> GINConv:
        """The layer with the weights of a PyG ``GINConv.state_dict()`` whose ``nn`` is a
        ``torch.nn.Sequential`` of ``Linear`` layers and activations, one ``Linear``, or a PyG
        ``MLP`` with ``norm=None`` (read as ``Sequential(Linear, act, Linear, ...)``).

        ``nn`` becomes an ``eqx.nn.Sequential`` with the ``Linear`` layers at their positions and
        ``activation`` (PyG's ``ReLU`` by default) at the others; give PyG's ``train_eps``.

        >>> import numpy as np
        >>> sd = {"eps": np.full(1, 0.5), "nn.0.weight": np.ones((16, 4)), "nn.2.weight": np.ones((8, 16))}
        >>> layer = GINConv.from_pyg(sd)
        >>> layer.eps, len(layer.nn.layers)
        (0.5, 3)
        """
        w = gin_weights_from_pyg("GINConv.from_pyg", state_dict)
        return cls(sequential(w["nn"], activation), eps=float(w["eps"][0]), train_eps=train_eps)


class GINEConv(eqx.Module):
    """GIN with edge features (PyG's ``GINEConv``): ``out_i = nn((1 + eps) x_i + sum_{j->i} relu(x_j + e_ji))``.

    ``e_ji`` is the edge's attribute, mapped to ``F`` features by ``lin`` (PyG's, with ``edge_dim``),
    else it must have ``F`` features already. The per-edge sums are one fused
    :func:`jaxgraphops.update_efeat`, their reduction one :func:`jaxgraphops.agg_simple`.

    **Arguments:**

    - ``nn``, ``eps``, ``train_eps``: as in :class:`GINConv`.
    - ``edge_dim``: the edge attributes' width (None: no ``lin``).
    - ``in_features``: ``F``, ``lin``'s output (needed with ``edge_dim``; PyG reads it off ``nn``).
    - ``key``: PRNG key for ``lin`` (with ``edge_dim``).

    Call ``layer(g, x, edge_attr)``: ``x [n, F]`` or a pair ``(x_src, x_dst)``, ``edge_attr
    [n_edges, edge_dim or F]`` in input edge order; returns ``[n_dst, F']``.

    >>> import jax, jax.numpy as jnp, equinox as eqx, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> k1, k2 = jax.random.split(jax.random.key(0))
    >>> layer = GINEConv(eqx.nn.Linear(4, 8, key=k1), edge_dim=2, in_features=4, key=k2)
    >>> layer(g, jnp.ones((3, 4)), jnp.ones((3, 2))).shape
    (3, 8)
    """

    nn: Callable
    eps: jax.Array | float
    lin: eqx.nn.Linear | None

    def __init__(self, nn: Callable, *, eps: float = 0.0, train_eps: bool = False, edge_dim: int | None = None,
                 in_features: int | None = None, key: jax.Array | None = None):
        check_layer(self, locals(), nullable=("in_features",))
        self.nn, self.eps = nn, jnp.full(1, eps, jnp.float32) if train_eps else float(eps)
        if edge_dim is None:
            self.lin = None
        elif in_features is None or key is None:
            raise ValueError("GINEConv: edge_dim needs in_features (lin's output width) and key")
        else:
            self.lin = eqx.nn.Linear(edge_dim, in_features, key=key)

    def __call__(self, g: Graph, x, edge_attr):
        bias = None if self.lin is None else self.lin.bias
        return gine_conv(g, x, edge_attr, self.eps, rows(self.nn), kernel(self.lin), bias)

    @classmethod
    def from_pyg(cls, state_dict, *, train_eps: bool = False, activation: Callable = jax.nn.relu) -> GINEConv:
        """The layer with the weights of a PyG ``GINEConv.state_dict()``: ``nn`` and ``eps`` as in
        :meth:`GINConv.from_pyg`, ``lin`` (``edge_dim``) from ``lin.weight`` and ``lin.bias``.

        >>> import numpy as np
        >>> sd = {"eps": np.zeros(1), "nn.weight": np.ones((8, 4)), "lin.weight": np.ones((4, 2)),
        ...       "lin.bias": np.zeros(4)}
        >>> GINEConv.from_pyg(sd).lin.weight.shape
        (4, 2)
        """
        w = gin_weights_from_pyg("GINEConv.from_pyg", state_dict, edge=True)
        layer = cls(sequential(w["nn"], activation), eps=float(w["eps"][0]), train_eps=train_eps)
        if "edge_kernel" in w:
            p = {"kernel": w["edge_kernel"], **({"bias": w["edge_bias"]} if "edge_bias" in w else {})}
            layer = eqx.tree_at(lambda m: m.lin, layer, sequential({None: p}, activation),
                                is_leaf=lambda v: v is None)
        return layer


class EdgeConv(eqx.Module):
    """Edge convolution (DGCNN, PyG's ``EdgeConv``): ``out_i = aggr_{j->i} nn([x_i | x_j - x_i])``.

    The per-edge pairs come from one fused :func:`jaxgraphops.update_efeat`, the reduction
    (``max``, ``sum`` or ``mean``; 0 for an empty neighbourhood) from :func:`jaxgraphops.agg_simple`.

    **Arguments:**

    - ``nn``: the edge update on one row, ``[2F] -> [F']``, vmapped over the edges.
    - ``aggr``: ``max`` (PyG's default), ``sum`` or ``mean``.

    Call ``layer(g, x)``: ``x [n, F]`` or a pair ``(x_src, x_dst)``; returns ``[n_dst, F']``.

    >>> import jax, jax.numpy as jnp, equinox as eqx, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = EdgeConv(eqx.nn.MLP(8, 8, 16, 1, key=jax.random.key(0)))
    >>> layer(g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    nn: Callable
    aggr: str = eqx.field(static=True)

    def __init__(self, nn: Callable, *, aggr: str = "max"):
        check_choice("EdgeConv", "aggr", aggr, EDGE_CONV_AGGRS)
        self.nn, self.aggr = nn, aggr

    def __call__(self, g: Graph, x):
        return edge_conv(g, x, rows(self.nn), aggr=self.aggr)

    @classmethod
    def from_pyg(cls, state_dict, *, aggr: str = "max", activation: Callable = jax.nn.relu) -> EdgeConv:
        """The layer with the weights of a PyG ``EdgeConv.state_dict()`` (``nn`` as in
        :meth:`GINConv.from_pyg`); give PyG's ``aggr`` (its ``"add"`` is ``"sum"``).

        >>> import numpy as np
        >>> EdgeConv.from_pyg({"nn.weight": np.ones((8, 6))}, aggr="mean").nn.weight.shape
        (8, 6)
        """
        w = edge_conv_weights_from_pyg("EdgeConv.from_pyg", state_dict)
        return cls(sequential(w["nn"], activation), aggr=aggr)
