"""The convolution layers as ``flax.nnx`` modules: ``SAGEConv``, ``GraphConv``, ``GCNConv``, ``GINConv``,
``GINEConv`` and ``EdgeConv``, with ``from_pyg`` class methods. The math: :mod:`jaxgraphops.nn._conv`.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
from flax import nnx

from ...graph import Graph
from .._common import check_choice, check_layer, in_sizes
from .._conv import (EDGE_CONV_AGGRS, GRAPH_CONV_NORMS, SAGE_AGGRS, edge_conv, edge_conv_weights_from_pyg, gcn_conv,
                     gcn_weights_from_pyg, gin_conv, gin_weights_from_pyg, gine_conv, graph_conv, sage_conv,
                     sage_weights_from_pyg, split_sage_input)
from ._common import Initializer, glorot, lecun, param, promote, sequential, value, with_weights, zeros

__all__ = ["EdgeConv", "GCNConv", "GINConv", "GINEConv", "GraphConv", "SAGEConv"]


class SAGEConv(nnx.Module):
    """GraphSAGE (PyG's ``SAGEConv``): ``out_i = W_l aggr_{j->i} x_j + b + W_r x_i``, the linen
    :class:`jaxgraphops.nn.flax.SAGEConv` as an NNX module.

    Params: ``neigh_kernel [F_src, out_features]``, ``root_kernel [F_dst, out_features]`` (if
    ``root_weight``), ``bias [out_features]`` (if ``use_bias``). The graph work is one fused
    :func:`jaxgraphops.agg_concat`; empty neighbourhoods aggregate to 0.

    Args:
      in_features: ``F``, or ``(F_src, F_dst)`` for a bipartite graph.
      out_features: output features.
      aggr: ``mean``, ``max``, ``sum`` or ``min``, over the incoming edges of each destination.
      root_weight: add ``W_r x_i``.
      use_bias: add ``b`` (PyG's ``bias``).
      normalize: L2-normalise each output row (PyG's ``normalize``).
      kernel_init, bias_init, dtype, param_dtype: as in ``nnx.Linear``.
      rngs: the initialisation's random streams.

    Call ``layer(g, x)``: ``x`` is ``[n_src, F]`` for a square graph, or a pair
    ``(x_src [n_src, F_src], x_dst [n_dst, F_dst])``; returns ``[n_dst, out_features]``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = SAGEConv(4, 8, aggr="max", rngs=nnx.Rngs(0))
    >>> layer(g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    def __init__(self, in_features: int | tuple[int, int], out_features: int, *, aggr: str = "mean",
                 root_weight: bool = True, use_bias: bool = True, normalize: bool = False,
                 kernel_init: Initializer = lecun, bias_init: Initializer = zeros, dtype=None,
                 param_dtype=jnp.float32, rngs: nnx.Rngs):
        check_choice("SAGEConv", "aggr", aggr, SAGE_AGGRS)
        check_layer(self, locals(), skip=("in_features",))
        in_src, in_dst = in_sizes("SAGEConv", in_features)
        self.neigh_kernel = param(kernel_init, rngs, (in_src, out_features), param_dtype)
        self.root_kernel = param(kernel_init, rngs, (in_dst, out_features), param_dtype) if root_weight else None
        self.bias = param(bias_init, rngs, (out_features,), param_dtype) if use_bias else None
        self.aggr, self.normalize, self.dtype = aggr, normalize, dtype

    def __call__(self, g: Graph, x):
        x_src, x_dst = split_sage_input(g, x)
        x_src, x_dst, neigh, root, bias = promote(self.dtype, x_src, x_dst, value(self.neigh_kernel),
                                                  value(self.root_kernel), value(self.bias))
        return sage_conv(g, x_src, x_dst, neigh, root, bias, aggr=self.aggr, normalize=self.normalize)

    @classmethod
    def from_pyg(cls, state_dict, *, aggr: str = "mean", normalize: bool = False, dtype=None,
                 param_dtype=jnp.float32) -> SAGEConv:
        """The layer with the weights of a PyG ``SAGEConv.state_dict()`` (tensors or numpy arrays).

        Sizes, ``root_weight`` and ``use_bias`` follow from the entries (``lin_l.weight``,
        ``lin_l.bias``, ``lin_r.weight``); give PyG's ``aggr`` and ``normalize``.

        >>> import numpy as np
        >>> layer = SAGEConv.from_pyg({"lin_l.weight": np.ones((8, 4)), "lin_r.weight": np.ones((8, 5))})
        >>> layer.root_kernel.shape, layer.bias is None
        ((5, 8), True)
        """
        w = sage_weights_from_pyg("SAGEConv.from_pyg", state_dict)
        in_src, out_features = w["neigh_kernel"].shape
        root = w.get("root_kernel")
        return with_weights(cls, w, (in_src, in_src if root is None else root.shape[0]), out_features, aggr=aggr,
                            root_weight=root is not None, use_bias="bias" in w, normalize=normalize, dtype=dtype,
                             param_dtype=param_dtype)


class GraphConv(nnx.Module):
    """Graph convolution (DGL's ``GraphConv``): ``out = Â x W + b``, the linen
    :class:`jaxgraphops.nn.flax.GraphConv` as an NNX module.

    ``norm="both"``: ``Â = D_in^-1/2 A D_out^-1/2``; ``"right"``: ``D_in^-1 A`` (mean); ``"none"``:
    ``A`` (sum); ``add_self_loops`` uses ``A + I`` (square graphs only). With the defaults this is
    PyG's ``GCNConv`` on graphs without self loops whose in- and out-degrees agree.

    Params: ``kernel [in_features, out_features]``, ``bias [out_features]`` (if ``use_bias``).

    Args:
      in_features, out_features: feature sizes.
      norm: ``both``, ``right`` or ``none``.
      add_self_loops: aggregate over ``A + I`` instead of ``A``.
      use_bias: add ``b``.
      kernel_init, bias_init, dtype, param_dtype, rngs: as in ``nnx.Linear``.

    Call ``layer(g, x)`` with ``x [n_src, in_features]``; returns ``[n_dst, out_features]``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 1, 2]), jnp.array([1, 0, 2, 1]))
    >>> GraphConv(4, 8, rngs=nnx.Rngs(0))(g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    def __init__(self, in_features: int, out_features: int, *, norm: str = "both", add_self_loops: bool = True,
                 use_bias: bool = True, kernel_init: Initializer = glorot, bias_init: Initializer = zeros,
                 dtype=None, param_dtype=jnp.float32, rngs: nnx.Rngs):
        check_choice("GraphConv", "norm", norm, GRAPH_CONV_NORMS)
        check_layer(self, locals())
        self.kernel = param(kernel_init, rngs, (in_features, out_features), param_dtype)
        self.bias = param(bias_init, rngs, (out_features,), param_dtype) if use_bias else None
        self.norm, self.add_self_loops, self.dtype = norm, add_self_loops, dtype

    def __call__(self, g: Graph, x):
        x, kernel, bias = promote(self.dtype, x, value(self.kernel), value(self.bias))
        return graph_conv(g, x, kernel, bias, norm=self.norm, add_loops=self.add_self_loops)

    @classmethod
    def from_pyg(cls, state_dict, *, norm: str = "both", add_self_loops: bool = True, dtype=None,
                 param_dtype=jnp.float32) -> GraphConv:
        """The layer with the weights of a PyG ``GCNConv.state_dict()`` (``lin.weight``, ``bias``).

        >>> import numpy as np
        >>> GraphConv.from_pyg({"lin.weight": np.ones((8, 4)), "bias": np.zeros(8)}).kernel.shape
        (4, 8)
        """
        w = gcn_weights_from_pyg("GraphConv.from_pyg", state_dict)
        return with_weights(cls, w, *w["kernel"].shape, norm=norm, add_self_loops=add_self_loops,
                            use_bias="bias" in w, dtype=dtype, param_dtype=param_dtype)


class GCNConv(nnx.Module):
    """Graph convolution exactly as PyG's ``GCNConv`` (``out = D^-1/2 Â D^-1/2 x W + b``, PyG's self loops
    and ``edge_weight``), the linen :class:`jaxgraphops.nn.flax.GCNConv` as an NNX module.

    Params: ``kernel [in_features, out_features]``, ``bias [out_features]`` (if ``use_bias``).

    Args:
      in_features, out_features: feature sizes.
      improved: self loops of weight 2.
      add_self_loops: add them (None: as ``normalize``, PyG's default; True needs ``normalize``).
      normalize: symmetric normalisation on the fly (off: the weighted sum, e.g. of
        :func:`jaxgraphops.nn.gcn_norm`'s graph and weights computed once).
      use_bias: add ``bias``.
      kernel_init, bias_init, dtype, param_dtype, rngs: as in ``nnx.Linear``.

    Call ``layer(g, x, edge_weight=None)``: ``x [n, in_features]``, ``edge_weight [n_edges]`` in input
    edge order; returns ``[n, out_features]``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2, 2]), jnp.array([1, 2, 1, 2]))
    >>> GCNConv(4, 8, rngs=nnx.Rngs(0))(g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    def __init__(self, in_features: int, out_features: int, *, improved: bool = False,
                 add_self_loops: bool | None = None, normalize: bool = True, use_bias: bool = True,
                 kernel_init: Initializer = glorot, bias_init: Initializer = zeros, dtype=None, param_dtype=jnp.float32,
                 rngs: nnx.Rngs):
        check_layer(self, locals(), nullable=("add_self_loops",))
        self.kernel = param(kernel_init, rngs, (in_features, out_features), param_dtype)
        self.bias = param(bias_init, rngs, (out_features,), param_dtype) if use_bias else None
        self.improved, self.normalize, self.dtype = improved, normalize, dtype
        self.add_self_loops = normalize if add_self_loops is None else add_self_loops

    def __call__(self, g: Graph, x, edge_weight=None):
        x, kernel, bias = promote(self.dtype, x, value(self.kernel), value(self.bias))
        return gcn_conv(g, x, kernel, bias, edge_weight=edge_weight, normalize=self.normalize, improved=self.improved,
                        add_loops=self.add_self_loops)

    @classmethod
    def from_pyg(cls, state_dict, *, improved: bool = False, add_self_loops: bool | None = None,
                 normalize: bool = True, dtype=None, param_dtype=jnp.float32) -> GCNConv:
        """The layer with the weights of a PyG ``GCNConv.state_dict()`` (``lin.weight``, ``bias``); give
        PyG's ``improved``, ``add_self_loops`` and ``normalize``.

        >>> import numpy as np
        >>> GCNConv.from_pyg({"lin.weight": np.ones((8, 4)), "bias": np.zeros(8)}).kernel.shape
        (4, 8)
        """
        w = gcn_weights_from_pyg("GCNConv.from_pyg", state_dict)
        return with_weights(cls, w, *w["kernel"].shape, improved=improved, add_self_loops=add_self_loops,
                            normalize=normalize, use_bias="bias" in w, dtype=dtype, param_dtype=param_dtype)


def _eps(eps: float, train_eps: bool, param_dtype):
    """GIN's epsilon: a param ``[1]`` with ``train_eps``, else the float."""
    return nnx.Param(jnp.full((1,), eps, param_dtype)) if train_eps else float(eps)


def _with_eps(layer: nnx.Module, x):
    """``(x, eps)``: the ``eps`` param (promoted with ``x``) or the float."""
    if not isinstance(layer.eps, nnx.Param):
        return x, layer.eps
    if isinstance(x, tuple):
        *pair, eps = promote(layer.dtype, *x, layer.eps[...])
        return tuple(pair), eps
    return promote(layer.dtype, x, layer.eps[...])


class GINConv(nnx.Module):
    """Graph isomorphism convolution (PyG's ``GINConv``): ``out_i = nn((1 + eps) x_i + sum_{j->i} x_j)``,
    the linen :class:`jaxgraphops.nn.flax.GINConv` as an NNX module.

    The sum is one fused :func:`jaxgraphops.agg_simple`. Params: ``eps [1]`` (with ``train_eps``) and
    ``nn``'s own, under ``nn``.

    Args:
      nn: the update MLP on ``[rows, F]``, an NNX module (e.g. ``nnx.Sequential`` of ``nnx.Linear`` and
        activations) or a function.
      eps: the (initial) epsilon.
      train_eps: make epsilon a param.
      dtype, param_dtype: of ``eps`` (``nn`` has its own).

    Call ``layer(g, x)``: ``x [n, F]`` or a pair ``(x_src, x_dst)`` (bipartite, one width); returns
    ``nn``'s output ``[n_dst, F']``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> rngs = nnx.Rngs(0)
    >>> layer = GINConv(nnx.Sequential(nnx.Linear(4, 16, rngs=rngs), nnx.relu, nnx.Linear(16, 8, rngs=rngs)),
    ...                 train_eps=True)
    >>> layer(g, jnp.ones((3, 4))).shape, layer.eps[...]
    ((3, 8), Array([0.], dtype=float32))
    """

    def __init__(self, nn: Callable, *, eps: float = 0.0, train_eps: bool = False, dtype=None,
                 param_dtype=jnp.float32):
        check_layer(self, locals())
        self.nn, self.eps, self.dtype = nn, _eps(eps, train_eps, param_dtype), dtype

    def __call__(self, g: Graph, x):
        return gin_conv(g, *_with_eps(self, x), self.nn)

    @classmethod
    def from_pyg(cls, state_dict, *, train_eps: bool = False, activation: Callable = nnx.relu, dtype=None,
                 param_dtype=jnp.float32) -> GINConv:
        """The layer with the weights of a PyG ``GINConv.state_dict()`` whose ``nn`` is a
        ``torch.nn.Sequential`` of ``Linear`` layers and activations (or one ``Linear``).

        ``nn`` becomes an ``nnx.Sequential`` with ``nnx.Linear`` layers at the ``Linear`` positions and
        ``activation`` (PyG's ``ReLU`` by default) at the others; give PyG's ``train_eps``.

        >>> import numpy as np
        >>> sd = {"eps": np.zeros(1), "nn.0.weight": np.ones((16, 4)), "nn.0.bias": np.zeros(16),
        ...       "nn.2.weight": np.ones((8, 16)), "nn.2.bias": np.zeros(8)}
        >>> GINConv.from_pyg(sd).nn.layers[2].kernel.shape
        (16, 8)
        """
        w = gin_weights_from_pyg("GINConv.from_pyg", state_dict)
        return cls(sequential(w["nn"], activation, param_dtype), eps=float(w["eps"][0]), train_eps=train_eps,
                   dtype=dtype, param_dtype=param_dtype)


class GINEConv(nnx.Module):
    """GIN with edge features (PyG's ``GINEConv``): ``out_i = nn((1 + eps) x_i + sum_{j->i} relu(x_j + e_ji))``,
    the linen :class:`jaxgraphops.nn.flax.GINEConv` as an NNX module.

    ``e_ji`` is the edge's attribute, mapped to ``F`` features by ``edge_kernel``, ``edge_bias`` (PyG's
    ``lin``) when ``edge_dim`` is set, else it must have ``F`` features already. Params: ``eps [1]``
    (with ``train_eps``), ``edge_kernel [edge_dim, F]`` and ``edge_bias [F]`` (with ``edge_dim``), and
    ``nn``'s own, under ``nn``.

    Args: ``nn``, ``eps``, ``train_eps`` as :class:`GINConv`; ``edge_dim``; ``in_features`` (``F``,
    needed with ``edge_dim``); ``kernel_init``, ``bias_init``, ``dtype``, ``param_dtype`` as in
    ``nnx.Linear``; ``rngs`` (needed with ``edge_dim``).

    Call ``layer(g, x, edge_attr)``: ``x [n, F]`` or a pair, ``edge_attr [n_edges, edge_dim or F]`` in
    input edge order; returns ``[n_dst, F']``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = GINEConv(nnx.Linear(4, 8, rngs=nnx.Rngs(0)), edge_dim=2, in_features=4, rngs=nnx.Rngs(1))
    >>> layer(g, jnp.ones((3, 4)), jnp.ones((3, 2))).shape
    (3, 8)
    """

    def __init__(self, nn: Callable, *, eps: float = 0.0, train_eps: bool = False, edge_dim: int | None = None,
                 in_features: int | None = None, kernel_init: Initializer = lecun, bias_init: Initializer = zeros,
                 dtype=None, param_dtype=jnp.float32, rngs: nnx.Rngs | None = None):
        check_layer(self, locals(), nullable=("in_features",))
        if edge_dim is not None and (in_features is None or rngs is None):
            raise ValueError(f"GINEConv: edge_dim={edge_dim} maps the edge attributes to the node features: give "
                             f"in_features (the nodes' F) and rngs; got in_features={in_features!r}, "
                             f"rngs={'None' if rngs is None else 'given'}")
        self.nn, self.eps, self.dtype = nn, _eps(eps, train_eps, param_dtype), dtype
        on = edge_dim is not None
        self.edge_kernel = param(kernel_init, rngs, (edge_dim, in_features), param_dtype) if on else None
        self.edge_bias = param(bias_init, rngs, (in_features,), param_dtype) if on else None

    def __call__(self, g: Graph, x, edge_attr):
        x, eps = _with_eps(self, x)
        edge_kernel = edge_bias = None
        if self.edge_kernel is not None:
            edge_attr, edge_kernel, edge_bias = promote(self.dtype, edge_attr, self.edge_kernel[...],
                                                        self.edge_bias[...])
        return gine_conv(g, x, edge_attr, eps, self.nn, edge_kernel, edge_bias)

    @classmethod
    def from_pyg(cls, state_dict, *, train_eps: bool = False, activation: Callable = nnx.relu, dtype=None,
                 param_dtype=jnp.float32) -> GINEConv:
        """The layer with the weights of a PyG ``GINEConv.state_dict()``: ``nn`` and ``eps`` as
        :meth:`GINConv.from_pyg`, ``lin`` (PyG's ``edge_dim``) as ``edge_kernel``/``edge_bias``.

        >>> import numpy as np
        >>> sd = {"eps": np.zeros(1), "nn.weight": np.ones((8, 4)), "nn.bias": np.zeros(8),
        ...       "lin.weight": np.ones((4, 2)), "lin.bias": np.zeros(4)}
        >>> GINEConv.from_pyg(sd).edge_kernel.shape
        (2, 4)
        """
        fn = "GINEConv.from_pyg"
        w = gin_weights_from_pyg(fn, state_dict, edge=True)
        options = dict(eps=float(w["eps"][0]), train_eps=train_eps, dtype=dtype, param_dtype=param_dtype)
        nn = sequential(w["nn"], activation, param_dtype)
        if "edge_kernel" not in w:
            return cls(nn, **options)
        if "edge_bias" not in w:
            raise ValueError(f"{fn}: lin.weight without lin.bias; PyG's GINEConv lin has a bias")
        edge_dim, in_features = w["edge_kernel"].shape
        layer = cls(nn, edge_dim=edge_dim, in_features=in_features, rngs=nnx.Rngs(0), **options)
        for name in ("edge_kernel", "edge_bias"):
            getattr(layer, name).set_value(jnp.asarray(w[name], param_dtype))
        return layer


class EdgeConv(nnx.Module):
    """Edge convolution (DGCNN, PyG's ``EdgeConv``): ``out_i = aggr_{j->i} nn([x_i | x_j - x_i])``, the
    linen :class:`jaxgraphops.nn.flax.EdgeConv` as an NNX module.

    Args:
      nn: the edge MLP ``[n_edges, 2F] -> [n_edges, F']`` (an NNX module or a function).
      aggr: ``max`` (PyG's default), ``sum`` or ``mean`` (0 for an empty neighbourhood).

    Call ``layer(g, x)``: ``x [n, F]`` or a pair ``(x_src, x_dst)``; returns ``[n_dst, F']``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> EdgeConv(nnx.Linear(8, 8, rngs=nnx.Rngs(0)))(g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    def __init__(self, nn: Callable, *, aggr: str = "max"):
        check_choice("EdgeConv", "aggr", aggr, EDGE_CONV_AGGRS)
        self.nn, self.aggr = nn, aggr

    def __call__(self, g: Graph, x):
        return edge_conv(g, x, self.nn, aggr=self.aggr)

    @classmethod
    def from_pyg(cls, state_dict, *, aggr: str = "max", activation: Callable = nnx.relu,
                 param_dtype=jnp.float32) -> EdgeConv:
        """The layer with the weights of a PyG ``EdgeConv.state_dict()`` (``nn`` as in :meth:`GINConv.from_pyg`).

        >>> import numpy as np
        >>> EdgeConv.from_pyg({"nn.weight": np.ones((8, 6))}).nn.kernel.shape
        (6, 8)
        """
        w = edge_conv_weights_from_pyg("EdgeConv.from_pyg", state_dict)
        return cls(sequential(w["nn"], activation, param_dtype), aggr=aggr)
