"""The convolution layers as ``flax.linen`` modules: ``SAGEConv``, ``GraphConv``, ``GCNConv``, ``GINConv``,
``GINEConv``, ``EdgeConv``, and their PyG weight loaders (``from_pyg_sage``, ``from_pyg_gcn``, ``from_pyg_gin``,
``from_pyg_gine``, ``from_pyg_edgeconv``). The math: :mod:`jaxgraphops.nn._conv`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import flax.linen as nn
import jax.numpy as jnp

from ...graph import Graph
from .._common import check_choice
from .._conv import (GRAPH_CONV_NORMS, SAGE_AGGRS, edge_conv, edge_conv_weights_from_pyg, gcn_conv,
                     gcn_weights_from_pyg, gin_conv, gin_weights_from_pyg, gine_conv, graph_conv, sage_conv,
                     sage_weights_from_pyg, split_sage_input)
from ._common import Initializer, Layer, ParamLayer, dense_stack, promote

__all__ = ["EdgeConv", "GCNConv", "GINConv", "GINEConv", "GraphConv", "SAGEConv", "from_pyg_edgeconv", "from_pyg_gcn",
           "from_pyg_gin", "from_pyg_gine", "from_pyg_sage"]


class SAGEConv(ParamLayer):
    """GraphSAGE (PyG's ``SAGEConv``): ``out_i = W_l aggr_{j->i} x_j + b + W_r x_i``.

    Params: ``neigh_kernel [F_src, features]``, ``root_kernel [F_dst, features]`` (if
    ``root_weight``), ``bias [features]`` (if ``use_bias``). The graph work is one fused
    :func:`jaxgraphops.agg_concat`; empty neighbourhoods aggregate to 0.

    Attributes:
      features: output features.
      aggr: ``mean``, ``max``, ``sum`` or ``min``, over the incoming edges of each destination.
      root_weight: add ``W_r x_i``.
      use_bias: add ``b`` (PyG's ``bias``).
      normalize: L2-normalise each output row (PyG's ``normalize``).

    Call ``layer(g, x)``: ``x`` is ``[n_src, F]`` for a square graph, or a pair
    ``(x_src [n_src, F_src], x_dst [n_dst, F_dst])``; returns ``[n_dst, features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> x = jnp.ones((3, 4))
    >>> layer = SAGEConv(8, aggr="max")
    >>> variables = layer.init(jax.random.key(0), g, x)
    >>> layer.apply(variables, g, x).shape
    (3, 8)
    """

    features: int
    _: dataclasses.KW_ONLY
    aggr: str = "mean"
    root_weight: bool = True
    use_bias: bool = True
    normalize: bool = False
    kernel_init: Initializer = nn.initializers.lecun_normal()
    bias_init: Initializer = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, g: Graph, x):
        check_choice("SAGEConv", "aggr", self.aggr, SAGE_AGGRS)
        x_src, x_dst = split_sage_input(g, x)
        neigh = self.param("neigh_kernel", self.kernel_init, (x_src.shape[-1], self.features), self.param_dtype)
        root = (self.param("root_kernel", self.kernel_init, (x_dst.shape[-1], self.features), self.param_dtype)
                if self.root_weight else None)
        bias = self.param("bias", self.bias_init, (self.features,), self.param_dtype) if self.use_bias else None
        x_src, x_dst, neigh, root, bias = promote(self.dtype, x_src, x_dst, neigh, root, bias)
        return sage_conv(g, x_src, x_dst, neigh, root, bias, aggr=self.aggr, normalize=self.normalize)


class GraphConv(ParamLayer):
    """Graph convolution (DGL's ``GraphConv``): ``out = Â x W + b`` with a normalised adjacency ``Â``.

    ``norm="both"``: ``Â = D_in^-1/2 A D_out^-1/2`` (in-degrees of destinations, out-degrees of
    sources); ``"right"``: ``D_in^-1 A`` (mean); ``"none"``: ``A`` (sum). ``add_self_loops``
    uses ``A + I`` (:func:`jaxgraphops.nn.add_self_loops`; square graphs only), degrees included.
    With the defaults this is PyG's ``GCNConv`` on graphs without self loops whose in- and
    out-degrees agree (e.g. undirected ones); PyG uses in-degrees on both sides and replaces
    existing self loops instead of adding to them: :class:`GCNConv` is PyG's layer exactly.

    Params: ``kernel [F, features]``, ``bias [features]`` (if ``use_bias``).

    Attributes:
      features: output features.
      norm: ``both``, ``right`` or ``none``.
      add_self_loops: aggregate over ``A + I`` instead of ``A``.
      use_bias: add ``b``.

    Call ``layer(g, x)`` with ``x [n_src, F]``; returns ``[n_dst, features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 1, 2]), jnp.array([1, 0, 2, 1]))
    >>> x = jnp.ones((3, 4))
    >>> layer = GraphConv(8)
    >>> variables = layer.init(jax.random.key(0), g, x)
    >>> layer.apply(variables, g, x).shape
    (3, 8)
    """

    features: int
    _: dataclasses.KW_ONLY
    norm: str = "both"
    add_self_loops: bool = True
    use_bias: bool = True
    kernel_init: Initializer = nn.initializers.glorot_uniform()
    bias_init: Initializer = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, g: Graph, x):
        check_choice("GraphConv", "norm", self.norm, GRAPH_CONV_NORMS)
        kernel = self.param("kernel", self.kernel_init, (x.shape[-1], self.features), self.param_dtype)
        bias = self.param("bias", self.bias_init, (self.features,), self.param_dtype) if self.use_bias else None
        x, kernel, bias = promote(self.dtype, x, kernel, bias)
        return graph_conv(g, x, kernel, bias, norm=self.norm, add_loops=self.add_self_loops)


def from_pyg_sage(state_dict) -> dict:
    """Variables for :class:`SAGEConv` from a PyG ``SAGEConv.state_dict()`` (tensors or numpy arrays).

    Reads ``lin_l.weight``, ``lin_l.bias`` (if PyG's ``bias``) and ``lin_r.weight`` (if
    ``root_weight``); build the flax layer with the same ``aggr``, ``root_weight``, ``bias``
    and ``normalize``.

    >>> import numpy as np
    >>> sd = {"lin_l.weight": np.ones((8, 4)), "lin_l.bias": np.zeros(8), "lin_r.weight": np.ones((8, 4))}
    >>> variables = from_pyg_sage(sd)
    >>> variables["params"]["neigh_kernel"].shape
    (4, 8)
    """
    return {"params": sage_weights_from_pyg("from_pyg_sage", state_dict)}


def from_pyg_gcn(state_dict) -> dict:
    """Variables for :class:`GraphConv` from a PyG ``GCNConv.state_dict()`` (``lin.weight``, ``bias``).

    >>> import numpy as np
    >>> from_pyg_gcn({"lin.weight": np.ones((8, 4)), "bias": np.zeros(8)})["params"]["kernel"].shape
    (4, 8)
    """
    return {"params": gcn_weights_from_pyg("from_pyg_gcn", state_dict)}


class GCNConv(ParamLayer):
    """Graph convolution exactly as PyG's ``GCNConv``: ``out = D^-1/2 Â D^-1/2 x W + b``.

    ``Â`` is the (weighted) adjacency with PyG's remaining self loops (:func:`jaxgraphops.nn.gcn_norm`:
    every node gets one loop of weight 1, 2 with ``improved``; a node with a loop keeps its weight
    when ``edge_weight`` is given) and ``D`` its weighted in-degrees. With ``normalize=False`` the
    layer sums ``edge_weight``-weighted messages as they are: that is how PyG's ``cached=True``
    reads here, ``g_hat, w_hat = gcn_norm(g)`` once, then ``layer(g_hat, x, w_hat)`` with
    ``normalize=False``. The graph work is one fused :func:`jaxgraphops.agg_weighted`.

    Params: ``kernel [F, features]`` (PyG's ``lin.weight`` transposed), ``bias [features]`` (if
    ``use_bias``); :func:`from_pyg_gcn` loads PyG's.

    Attributes:
      features: output features.
      improved: self loops of weight 2.
      add_self_loops: add them (None: as ``normalize``, PyG's default; True needs ``normalize``).
      normalize: symmetric normalisation on the fly.
      use_bias: add ``bias``.
      dtype, param_dtype: as in ``flax.linen.Dense``.

    Call ``layer(g, x, edge_weight=None)``: ``x [n, F]``, ``edge_weight [n_edges]`` in input edge
    order; returns ``[n, features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2, 2]), jnp.array([1, 2, 1, 2]))
    >>> layer = GCNConv(8)
    >>> variables = layer.init(jax.random.key(0), g, jnp.ones((3, 4)))
    >>> layer.apply(variables, g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    NULLABLE = ("add_self_loops",)

    features: int
    _: dataclasses.KW_ONLY
    improved: bool = False
    add_self_loops: bool | None = None
    normalize: bool = True
    use_bias: bool = True
    kernel_init: Initializer = nn.initializers.glorot_uniform()
    bias_init: Initializer = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, g: Graph, x, edge_weight=None):
        kernel = self.param("kernel", self.kernel_init, (jnp.shape(x)[-1], self.features), self.param_dtype)
        bias = self.param("bias", self.bias_init, (self.features,), self.param_dtype) if self.use_bias else None
        x, kernel, bias = promote(self.dtype, x, kernel, bias)
        loops = self.normalize if self.add_self_loops is None else self.add_self_loops
        return gcn_conv(g, x, kernel, bias, edge_weight=edge_weight, normalize=self.normalize,
                        improved=self.improved, add_loops=loops)


class GINConv(ParamLayer):
    """Graph isomorphism convolution (PyG's ``GINConv``): ``out_i = nn((1 + eps) x_i + sum_{j->i} x_j)``.

    The sum is one fused :func:`jaxgraphops.agg_simple`. ``nn`` is any flax module (or function)
    on ``[rows, F]``, typically an MLP; as ``nn.Sequential([nn.Dense(h), nn.relu, nn.Dense(out)])``
    it holds the weights of PyG's ``Sequential(Linear, ReLU, Linear)`` (:func:`from_pyg_gin`).

    Params: ``eps [1]`` (with ``train_eps``) and ``nn``'s own, under ``nn``.

    Attributes:
      nn: the update MLP.
      eps: the (initial) epsilon.
      train_eps: make epsilon a param.
      dtype, param_dtype: of ``eps`` (``nn`` has its own).

    Call ``layer(g, x)``: ``x [n, F]``, or a pair ``(x_src, x_dst)`` (bipartite, one width);
    returns ``nn``'s output ``[n_dst, F']``.

    >>> import jax, jax.numpy as jnp, flax.linen as nn, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = GINConv(nn.Sequential([nn.Dense(16), nn.relu, nn.Dense(8)]), train_eps=True)
    >>> variables = layer.init(jax.random.key(0), g, jnp.ones((3, 4)))
    >>> layer.apply(variables, g, jnp.ones((3, 4))).shape, variables["params"]["eps"]
    ((3, 8), Array([0.], dtype=float32))
    """

    nn: Callable
    _: dataclasses.KW_ONLY
    eps: float = 0.0
    train_eps: bool = False

    @nn.compact
    def __call__(self, g: Graph, x):
        return gin_conv(g, *_with_eps(self, x), self.nn)


def _with_eps(layer: nn.Module, x):
    """``(x, eps)``: the ``eps`` param (with ``train_eps``; promoted with ``x``) or the float."""
    if not layer.train_eps:
        return x, layer.eps
    eps = layer.param("eps", nn.initializers.constant(layer.eps), (1,), layer.param_dtype)
    if isinstance(x, tuple):
        *pair, eps = promote(layer.dtype, *x, eps)
        return tuple(pair), eps
    return promote(layer.dtype, x, eps)


class GINEConv(ParamLayer):
    """GIN with edge features (PyG's ``GINEConv``): ``out_i = nn((1 + eps) x_i + sum_{j->i} relu(x_j + e_ji))``.

    ``e_ji`` is the edge's attribute, mapped to ``F`` features by PyG's ``lin`` (``edge_kernel``,
    ``edge_bias``) when ``edge_dim`` is set, else it must have ``F`` features already. The
    per-edge sums are one fused :func:`jaxgraphops.update_efeat`, their reduction one
    :func:`jaxgraphops.agg_simple`. ``nn`` as in :class:`GINConv`; :func:`from_pyg_gine` loads PyG's.

    Params: ``eps [1]`` (with ``train_eps``), ``edge_kernel [edge_dim, F]`` and ``edge_bias [F]``
    (with ``edge_dim``), and ``nn``'s own, under ``nn``.

    Attributes: ``nn``, ``eps``, ``train_eps``, ``edge_dim``, ``dtype``, ``param_dtype``.

    Call ``layer(g, x, edge_attr)``: ``x [n, F]`` or a pair ``(x_src, x_dst)``, ``edge_attr
    [n_edges, edge_dim or F]`` in input edge order; returns ``[n_dst, F']``.

    >>> import jax, jax.numpy as jnp, flax.linen as nn, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = GINEConv(nn.Dense(8), edge_dim=2)
    >>> variables = layer.init(jax.random.key(0), g, jnp.ones((3, 4)), jnp.ones((3, 2)))
    >>> layer.apply(variables, g, jnp.ones((3, 4)), jnp.ones((3, 2))).shape
    (3, 8)
    """

    nn: Callable
    _: dataclasses.KW_ONLY
    eps: float = 0.0
    train_eps: bool = False
    edge_dim: int | None = None
    kernel_init: Initializer = nn.initializers.lecun_normal()
    bias_init: Initializer = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, g: Graph, x, edge_attr):
        x, eps = _with_eps(self, x)
        edge_kernel = edge_bias = None
        if self.edge_dim is not None:
            width = jnp.shape(x[0] if isinstance(x, tuple) else x)[-1]
            edge_kernel = self.param("edge_kernel", self.kernel_init, (self.edge_dim, width), self.param_dtype)
            edge_bias = self.param("edge_bias", self.bias_init, (width,), self.param_dtype)
            edge_attr, edge_kernel, edge_bias = promote(self.dtype, edge_attr, edge_kernel, edge_bias)
        return gine_conv(g, x, edge_attr, eps, self.nn, edge_kernel, edge_bias)


class EdgeConv(Layer):
    """Edge convolution (DGCNN, PyG's ``EdgeConv``): ``out_i = aggr_{j->i} nn([x_i | x_j - x_i])``.

    The per-edge pairs come from one fused :func:`jaxgraphops.update_efeat`, the reduction
    (``max``, ``sum`` or ``mean``; 0 for an empty neighbourhood) from :func:`jaxgraphops.agg_simple`.
    ``nn`` maps ``[n_edges, 2F]`` to ``[n_edges, F']``; :func:`from_pyg_edgeconv` loads PyG's.

    Attributes:
      nn: the edge MLP (its params under ``nn``).
      aggr: ``max`` (PyG's default), ``sum`` or ``mean``.

    Call ``layer(g, x)``: ``x [n, F]`` or a pair ``(x_src, x_dst)``; returns ``[n_dst, F']``.

    >>> import jax, jax.numpy as jnp, flax.linen as nn, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = EdgeConv(nn.Dense(8))
    >>> variables = layer.init(jax.random.key(0), g, jnp.ones((3, 4)))
    >>> layer.apply(variables, g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    nn: Callable
    _: dataclasses.KW_ONLY
    aggr: str = "max"

    def __call__(self, g: Graph, x):
        return edge_conv(g, x, self.nn, aggr=self.aggr)


def _gin_variables(fn: str, state_dict, train_eps: bool, edge: bool) -> dict:
    w = gin_weights_from_pyg(fn, state_dict, edge=edge)
    params = {"nn": dense_stack(w.pop("nn"))}
    eps = w.pop("eps")
    if train_eps:
        params["eps"] = eps
    return {"params": {**params, **w}}


def from_pyg_gin(state_dict, *, train_eps: bool = False) -> dict:
    """Variables for :class:`GINConv` from a PyG ``GINConv.state_dict()`` whose ``nn`` is a
    ``torch.nn.Sequential`` of ``Linear`` layers and activations, one ``Linear``, or a PyG ``MLP``
    with ``norm=None`` (read as ``Sequential(Linear, act, Linear, ...)``).

    ``nn.<i>.weight`` / ``.bias`` become ``nn.layers_<i>``'s ``kernel`` / ``bias``: build the layer
    with ``nn.Sequential`` of ``nn.Dense`` at the same positions (activations between), or
    ``nn.Dense`` for one ``Linear``. ``eps`` is a param with ``train_eps``; without, build the
    layer with ``eps=float(state_dict["eps"][0])``.

    >>> import numpy as np
    >>> sd = {"eps": np.zeros(1), "nn.0.weight": np.ones((16, 4)), "nn.0.bias": np.zeros(16),
    ...       "nn.2.weight": np.ones((8, 16)), "nn.2.bias": np.zeros(8)}
    >>> sorted(from_pyg_gin(sd, train_eps=True)["params"]), sorted(from_pyg_gin(sd)["params"]["nn"])
    (['eps', 'nn'], ['layers_0', 'layers_2'])
    """
    return _gin_variables("from_pyg_gin", state_dict, train_eps, edge=False)


def from_pyg_gine(state_dict, *, train_eps: bool = False) -> dict:
    """Variables for :class:`GINEConv` from a PyG ``GINEConv.state_dict()``: ``nn`` and ``eps`` as
    :func:`from_pyg_gin`; ``lin.weight`` / ``lin.bias`` (PyG's ``edge_dim``) become ``edge_kernel``
    / ``edge_bias``: build the layer with the same ``edge_dim``.

    >>> import numpy as np
    >>> sd = {"eps": np.zeros(1), "nn.weight": np.ones((8, 4)), "nn.bias": np.zeros(8),
    ...       "lin.weight": np.ones((4, 2)), "lin.bias": np.zeros(4)}
    >>> from_pyg_gine(sd)["params"]["edge_kernel"].shape
    (2, 4)
    """
    return _gin_variables("from_pyg_gine", state_dict, train_eps, edge=True)


def from_pyg_edgeconv(state_dict) -> dict:
    """Variables for :class:`EdgeConv` from a PyG ``EdgeConv.state_dict()`` (``nn`` as in :func:`from_pyg_gin`).

    >>> import numpy as np
    >>> from_pyg_edgeconv({"nn.weight": np.ones((8, 6))})["params"]["nn"]["kernel"].shape
    (6, 8)
    """
    return {"params": {"nn": dense_stack(edge_conv_weights_from_pyg("from_pyg_edgeconv", state_dict)["nn"])}}
