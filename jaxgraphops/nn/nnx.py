"""``flax.nnx`` graph layers on the fused kernels: ``SAGEConv``, ``GraphConv``, ``GCNConv``, ``GINConv``,
``GINEConv``, ``EdgeConv``, ``GATConv``, ``GATv2Conv``, ``TransformerConv``, ``GNOBlock``, ``RGCNConv``,
``DMPNNEncoder``, ``InteractionNetwork``, ``AttentionalAggregation``, ``GraphNorm`` and the
``DimeNetPlusPlus`` model.

They compute what the ``flax.linen`` layers of :mod:`jaxgraphops.nn.flax` compute, with the same
functions (``jaxgraphops.nn._functional``, ``_basic``, ``_relational``, ``gno``, ``_dimenet``), and hold
the same params under the same names (``[in, out]`` kernels; an ``nnx.Sequential`` MLP names its layers
``layers/<i>`` where linen's ``nn.Sequential`` has ``layers_<i>``), created eagerly: a constructor takes the input
sizes (``in_features``, as ``nnx.Linear``), ``rngs`` and, like ``nnx.Linear``, ``dtype`` (of the
computation; None: the inputs' and params' promoted dtype) and ``param_dtype``. ``X.from_pyg(state_dict)``
(``DMPNNEncoder.from_chemprop``) builds a layer with a PyG (Chemprop) layer's weights, read by the
linen loaders' conversion; :func:`load_variables` copies a linen layer's variables into an NNX layer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx, traverse_util
from flax.nnx.nn.dtypes import promote_dtype

from ..dimenet.basis import N_RADIAL, N_SPHERICAL
from ..graph import Graph
from ._basic import (attentional_aggregation, attentional_aggregation_weights_from_pyg, edge_conv,
                     edge_conv_weights_from_pyg, gcn_conv, gin_conv, gin_weights_from_pyg, gine_conv, graph_norm,
                     graph_norm_weights_from_pyg)
from ._dimenet import dimenet_pp, energy_and_forces
from ._dimenet_weights import dimenet_weights_from_pyg
from ._functional import (GRAPH_CONV_NORMS, SAGE_AGGRS, check_choice, check_dropout, check_fill_value,
                          check_output_width,
                          gat_conv, gat_weights_from_pyg, gatv2_conv, gatv2_weights_from_pyg, gcn_weights_from_pyg,
                          graph_conv, sage_conv, sage_weights_from_pyg, split_sage_input, transformer_conv,
                          transformer_weights_from_pyg)
from ._relational import (check_dmpnn_config, check_rgcn_config, dmpnn_encoder, dmpnn_weights_from_chemprop,
                          interaction_network, pyg_glorot, rgcn_config_from_weights, rgcn_conv, rgcn_inputs,
                          rgcn_kernel_shape, rgcn_weights_from_pyg)
from .gno import check_block, gno_block, init_kernel, skip_input

__all__ = ["AttentionalAggregation", "DMPNNEncoder", "DimeNetPlusPlus", "EdgeConv", "GATConv", "GATv2Conv", "GCNConv",
           "GINConv", "GINEConv", "GNOBlock", "GraphConv", "GraphNorm", "InteractionNetwork", "RGCNConv", "SAGEConv",
           "TransformerConv", "load_variables"]

Initializer = Callable[..., Any]
_lecun = nnx.initializers.lecun_normal()
_glorot = nnx.initializers.glorot_uniform()
_zeros = nnx.initializers.zeros_init()


# -- helpers ----------------------------------------------------------------------------------------

def _is_size(n) -> bool:
    return isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_)) and n > 0


def _size(layer: str, name: str, n) -> int:
    """``n``, checked to be a positive int."""
    if not _is_size(n):
        raise ValueError(f"{layer}: {name} must be a positive int; got {n!r}")
    return int(n)


def _sizes(layer: str, in_features) -> tuple[int, int]:
    """``(F_src, F_dst)`` from ``in_features``: one positive int, or a pair of them."""
    pair = in_features if isinstance(in_features, tuple) else (in_features, in_features)
    if len(pair) != 2 or not all(_is_size(n) for n in pair):
        raise ValueError(f"{layer}: in_features must be a positive int or a pair (F_src, F_dst) of them; "
                         f"got {in_features!r}")
    return int(pair[0]), int(pair[1])


def _param(init: Initializer, rngs: nnx.Rngs, shape: tuple[int, ...], dtype) -> nnx.Param:
    return nnx.Param(init(rngs.params(), shape, dtype))


def _value(p):
    """A param's array, or None."""
    return None if p is None else p[...]


def _promote(dtype, *trees):
    """``trees`` with every array leaf cast to one dtype (``dtype``, or the promoted one), as ``nnx.Linear`` does."""
    leaves, treedef = jax.tree_util.tree_flatten(trees)
    return jax.tree_util.tree_unflatten(treedef, promote_dtype(tuple(leaves), dtype=dtype))


def _as_mapping(tree):
    """``tree`` with its lists as dicts keyed by position (as NNX states hold ``nnx.List`` items)."""
    if isinstance(tree, (list, tuple)):
        return {i: _as_mapping(v) for i, v in enumerate(tree)}
    return {k: _as_mapping(v) for k, v in tree.items()} if isinstance(tree, dict) else tree


def load_variables(layer: nnx.Module, variables: dict) -> nnx.Module:
    """Sets ``layer``'s params in place from a linen layer's variables (``{"params": ...}``) and returns it.

    The NNX and linen layers of this package name their params alike, so this moves weights, such as those of a
    checkpoint or of a ``from_pyg_*`` loader, between the two; an MLP given as ``nnx.Sequential`` holds its layers under
    ``layers/<i>`` (linen's ``nn.Sequential``: ``layers_<i>``), and lists of params stand for ``nnx.List``
    items. Names and shapes must match exactly; the arrays are cast to the params' dtypes.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> from jaxgraphops.nn import flax as linen_layers
    >>> g, x = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1])), jnp.ones((3, 4))
    >>> variables = linen_layers.SAGEConv(8).init(jax.random.key(0), g, x)
    >>> layer = load_variables(SAGEConv(4, 8, rngs=nnx.Rngs(1)), variables)
    >>> bool(jnp.allclose(layer(g, x), linen_layers.SAGEConv(8).apply(variables, g, x)))
    True
    """
    name = f"load_variables({type(layer).__name__})"
    if not isinstance(variables, dict) or set(variables) != {"params"}:
        raise ValueError(f"{name}: variables must be a dict {{'params': ...}}; got "
                         f"{sorted(variables) if isinstance(variables, dict) else type(variables).__name__}")
    params = _as_mapping(variables["params"])
    state = nnx.state(layer, nnx.Param)
    have = {tuple(str(k) for k in path): tuple(var.shape) for path, var in nnx.to_flat_state(state)}
    given = {tuple(str(k) for k in path): tuple(np.shape(v)) for path, v in traverse_util.flatten_dict(params).items()}
    if have != given:
        def fmt(d):
            return {"/".join(k): v for k, v in sorted(d.items())}
        raise ValueError(f"{name}: the params must have the layer's names and shapes {fmt(have)}; got {fmt(given)}")
    nnx.replace_by_pure_dict(state, params,
                             replace_fn=lambda var, v: var.replace(jnp.asarray(v, var.dtype)))
    nnx.update(layer, state)
    return layer


def _with_weights(cls, params: dict, *args, **kwargs):
    """``cls(*args, **kwargs)`` holding ``params`` (built abstractly: no initialisation is computed)."""
    layer = nnx.eval_shape(lambda: cls(*args, **kwargs, rngs=nnx.Rngs(0)))
    return load_variables(layer, {"params": params})


# -- SAGEConv, GraphConv --------------------------------------------------------------------------

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

    def __init__(self, in_features: int | tuple[int, int], out_features: int, aggr: str = "mean",
                 root_weight: bool = True, use_bias: bool = True, normalize: bool = False, *,
                 kernel_init: Initializer = _lecun, bias_init: Initializer = _zeros, dtype=None,
                 param_dtype=jnp.float32, rngs: nnx.Rngs):
        check_choice("SAGEConv", "aggr", aggr, SAGE_AGGRS)
        in_src, in_dst = _sizes("SAGEConv", in_features)
        self.neigh_kernel = _param(kernel_init, rngs, (in_src, out_features), param_dtype)
        self.root_kernel = _param(kernel_init, rngs, (in_dst, out_features), param_dtype) if root_weight else None
        self.bias = _param(bias_init, rngs, (out_features,), param_dtype) if use_bias else None
        self.aggr, self.normalize, self.dtype = aggr, normalize, dtype

    def __call__(self, g: Graph, x):
        x_src, x_dst = split_sage_input(g, x)
        x_src, x_dst, neigh, root, bias = _promote(self.dtype, x_src, x_dst, _value(self.neigh_kernel),
                                                   _value(self.root_kernel), _value(self.bias))
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
        return _with_weights(cls, w, (in_src, in_src if root is None else root.shape[0]), out_features, aggr,
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

    def __init__(self, in_features: int, out_features: int, norm: str = "both", add_self_loops: bool = True,
                 use_bias: bool = True, *, kernel_init: Initializer = _glorot, bias_init: Initializer = _zeros,
                 dtype=None, param_dtype=jnp.float32, rngs: nnx.Rngs):
        check_choice("GraphConv", "norm", norm, GRAPH_CONV_NORMS)
        in_features = _size("GraphConv", "in_features", in_features)
        self.kernel = _param(kernel_init, rngs, (in_features, out_features), param_dtype)
        self.bias = _param(bias_init, rngs, (out_features,), param_dtype) if use_bias else None
        self.norm, self.add_self_loops, self.dtype = norm, add_self_loops, dtype

    def __call__(self, g: Graph, x):
        x, kernel, bias = _promote(self.dtype, x, _value(self.kernel), _value(self.bias))
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
        return _with_weights(cls, w, *w["kernel"].shape, norm, add_self_loops, use_bias="bias" in w, dtype=dtype,
                             param_dtype=param_dtype)


# -- PyG's GCNConv, GIN, EdgeConv, readouts -------------------------------------------------------

def _sequential(layers: dict, activation: Callable, param_dtype) -> nnx.Module:
    """The ``nnx.Sequential`` of a linear stack (``linear_stack_from_pyg``): ``nnx.Linear`` layers at its
    indices, ``activation`` at the other positions; one ``nnx.Linear`` for index None."""
    def linear(p):
        return _with_weights(nnx.Linear, p, *p["kernel"].shape, use_bias="bias" in p, param_dtype=param_dtype)

    if None in layers:
        return linear(layers[None])
    return nnx.Sequential(*[linear(layers[i]) if i in layers else activation for i in range(max(layers) + 1)])


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

    def __init__(self, in_features: int, out_features: int, improved: bool = False, add_self_loops: bool | None = None,
                 normalize: bool = True, use_bias: bool = True, *, kernel_init: Initializer = _glorot,
                 bias_init: Initializer = _zeros, dtype=None, param_dtype=jnp.float32, rngs: nnx.Rngs):
        in_features = _size("GCNConv", "in_features", in_features)
        self.kernel = _param(kernel_init, rngs, (in_features, out_features), param_dtype)
        self.bias = _param(bias_init, rngs, (out_features,), param_dtype) if use_bias else None
        self.improved, self.normalize, self.dtype = improved, normalize, dtype
        self.add_self_loops = normalize if add_self_loops is None else add_self_loops

    def __call__(self, g: Graph, x, edge_weight=None):
        x, kernel, bias = _promote(self.dtype, x, _value(self.kernel), _value(self.bias))
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
        return _with_weights(cls, w, *w["kernel"].shape, improved, add_self_loops, normalize, use_bias="bias" in w,
                             dtype=dtype, param_dtype=param_dtype)


def _eps(eps: float, train_eps: bool, param_dtype):
    """GIN's epsilon: a param ``[1]`` with ``train_eps``, else the float."""
    return nnx.Param(jnp.full((1,), eps, param_dtype)) if train_eps else float(eps)


def _with_eps(layer: nnx.Module, x):
    """``(x, eps)``: the ``eps`` param (promoted with ``x``) or the float."""
    if not isinstance(layer.eps, nnx.Param):
        return x, layer.eps
    if isinstance(x, tuple):
        *pair, eps = _promote(layer.dtype, *x, layer.eps[...])
        return tuple(pair), eps
    return _promote(layer.dtype, x, layer.eps[...])


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

    def __init__(self, nn: Callable, eps: float = 0.0, train_eps: bool = False, *, dtype=None,
                 param_dtype=jnp.float32):
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
        return cls(_sequential(w["nn"], activation, param_dtype), float(w["eps"][0]), train_eps, dtype=dtype,
                   param_dtype=param_dtype)


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

    def __init__(self, nn: Callable, eps: float = 0.0, train_eps: bool = False, edge_dim: int | None = None,
                 in_features: int | None = None, *, kernel_init: Initializer = _lecun, bias_init: Initializer = _zeros,
                 dtype=None, param_dtype=jnp.float32, rngs: nnx.Rngs | None = None):
        if edge_dim is not None and (in_features is None or rngs is None):
            raise ValueError(f"GINEConv: edge_dim={edge_dim} maps the edge attributes to the node features: give "
                             f"in_features (the nodes' F) and rngs; got in_features={in_features!r}, "
                             f"rngs={'None' if rngs is None else 'given'}")
        self.nn, self.eps, self.dtype = nn, _eps(eps, train_eps, param_dtype), dtype
        on = edge_dim is not None
        self.edge_kernel = _param(kernel_init, rngs, (edge_dim, _size("GINEConv", "in_features", in_features)),
                                  param_dtype) if on else None
        self.edge_bias = _param(bias_init, rngs, (in_features,), param_dtype) if on else None

    def __call__(self, g: Graph, x, edge_attr):
        x, eps = _with_eps(self, x)
        edge_kernel = edge_bias = None
        if self.edge_kernel is not None:
            edge_attr, edge_kernel, edge_bias = _promote(self.dtype, edge_attr, self.edge_kernel[...],
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
        nn = _sequential(w["nn"], activation, param_dtype)
        if "edge_kernel" not in w:
            return cls(nn, float(w["eps"][0]), train_eps, dtype=dtype, param_dtype=param_dtype)
        if "edge_bias" not in w:
            raise ValueError(f"{fn}: lin.weight without lin.bias; PyG's GINEConv lin has a bias")
        layer = cls(nn, float(w["eps"][0]), train_eps, *w["edge_kernel"].shape, dtype=dtype,
                    param_dtype=param_dtype, rngs=nnx.Rngs(0))
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

    def __init__(self, nn: Callable, aggr: str = "max"):
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
        return cls(_sequential(w["nn"], activation, param_dtype), aggr)


class AttentionalAggregation(nnx.Module):
    """Attention readout (PyG's ``AttentionalAggregation``): ``out_b = sum_{i in b} a_i nn(x_i)`` with
    ``a = softmax`` of ``gate_nn(x)`` over the nodes of each graph ``b``, the linen
    :class:`jaxgraphops.nn.flax.AttentionalAggregation` as an NNX module.

    Args:
      gate_nn: ``[N, F] -> [N, 1]`` (or ``[N, F']``, a gate per feature), an NNX module or a function.
      nn: ``[N, F] -> [N, F']`` (None: identity).

    Call ``layer(x, batch=None, size=None)``: ``x [N, F]``; ``batch`` a :class:`jaxgraphops.BatchedGraph`,
    integer graph ids ``[N]`` (``size`` graphs; required inside ``jit``) or None (one graph). Returns
    ``[n_graphs, F']``.

    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> rngs = nnx.Rngs(0)
    >>> layer = AttentionalAggregation(nnx.Linear(4, 1, rngs=rngs), nnx.Linear(4, 8, rngs=rngs))
    >>> layer(jnp.ones((5, 4)), jnp.array([0, 0, 1, 1, 1]), 2).shape
    (2, 8)
    """

    def __init__(self, gate_nn: Callable, nn: Callable | None = None):
        self.gate_nn, self.nn = gate_nn, nn

    def __call__(self, x, batch=None, size=None):
        return attentional_aggregation(x, batch, size, self.gate_nn, self.nn)

    @classmethod
    def from_pyg(cls, state_dict, *, activation: Callable = nnx.relu,
                 param_dtype=jnp.float32) -> AttentionalAggregation:
        """The readout with the weights of PyG's ``AttentionalAggregation.state_dict()`` (``gate_nn`` and
        ``nn`` each as in :meth:`GINConv.from_pyg`).

        >>> import numpy as np
        >>> sd = {"gate_nn.weight": np.ones((1, 4)), "gate_nn.bias": np.zeros(1), "nn.weight": np.ones((8, 4))}
        >>> AttentionalAggregation.from_pyg(sd).nn.kernel.shape
        (4, 8)
        """
        w = attentional_aggregation_weights_from_pyg("AttentionalAggregation.from_pyg", state_dict)
        return cls(*(None if k not in w else _sequential(w[k], activation, param_dtype) for k in ("gate_nn", "nn")))


class GraphNorm(nnx.Module):
    """Graph normalisation (PyG's ``GraphNorm``), per graph of a batch: ``weight * (x - mean_scale * mean) /
    sqrt(var + eps) + bias``, the linen :class:`jaxgraphops.nn.flax.GraphNorm` as an NNX module.

    Params: ``weight`` (ones), ``bias`` (zeros), ``mean_scale`` (ones), each ``[num_features]``.

    Args:
      num_features: ``F``.
      eps: added to the variance.
      dtype, param_dtype: as in ``nnx.LayerNorm``.

    Call ``layer(x, batch=None, size=None)`` as :class:`AttentionalAggregation`; returns ``[N, F]``.

    >>> import jax.numpy as jnp
    >>> x, ids = jnp.arange(8.0).reshape(4, 2), jnp.array([0, 0, 1, 1])
    >>> GraphNorm(2)(x, ids)[:, 0].round(3)
    Array([-1.,  1., -1.,  1.], dtype=float32)
    """

    def __init__(self, num_features: int, eps: float = 1e-5, *, dtype=None, param_dtype=jnp.float32):
        f = (_size("GraphNorm", "num_features", num_features),)
        self.weight = nnx.Param(jnp.ones(f, param_dtype))
        self.bias = nnx.Param(jnp.zeros(f, param_dtype))
        self.mean_scale = nnx.Param(jnp.ones(f, param_dtype))
        self.eps, self.dtype = eps, dtype

    def __call__(self, x, batch=None, size=None):
        x, w, b, a = _promote(self.dtype, x, self.weight[...], self.bias[...], self.mean_scale[...])
        return graph_norm(x, batch, size, w, b, a, eps=self.eps)

    @classmethod
    def from_pyg(cls, state_dict, *, eps: float = 1e-5, dtype=None, param_dtype=jnp.float32) -> GraphNorm:
        """The layer with the weights of a PyG ``GraphNorm.state_dict()`` (``weight``, ``bias``,
        ``mean_scale``); give PyG's ``eps``.

        >>> import numpy as np
        >>> GraphNorm.from_pyg({"weight": np.ones(4), "bias": np.zeros(4), "mean_scale": np.ones(4)}).bias.shape
        (4,)
        """
        w = graph_norm_weights_from_pyg("GraphNorm.from_pyg", state_dict)
        return load_variables(cls(w["weight"].shape[0], eps, dtype=dtype, param_dtype=param_dtype), {"params": w})


# -- attention ------------------------------------------------------------------------------------

def _output_params(layer: nnx.Module, in_dst: int, out: int, use_bias: bool, residual: bool, kernel_init,
                   bias_init, param_dtype, rngs) -> None:
    """An attention layer's ``bias [out]`` and ``res_kernel [F_dst, out]`` (None when not used)."""
    layer.bias = _param(bias_init, rngs, (out,), param_dtype) if use_bias else None
    layer.res_kernel = _param(kernel_init, rngs, (in_dst, out), param_dtype) if residual else None


def _attention_kernel_sizes(layer: str, in_features, share_weights: bool) -> tuple[int, int]:
    in_src, in_dst = _sizes(layer, in_features)
    if share_weights and in_src != in_dst:
        raise ValueError(f"{layer}: share_weights=True applies one kernel to sources and destinations, so their "
                         f"features must agree; got in_features={in_features!r} (use share_weights=False)")
    return in_src, in_dst


def _dropout_state(layer: nnx.Module, name: str, dropout: float, deterministic: bool | None, rngs: nnx.Rngs):
    """An attention layer's dropout attributes, as ``nnx.Dropout``'s: the rate, ``deterministic`` (set by
    ``model.eval()``/``model.train()``) and a forked ``"dropout"`` stream of ``rngs`` (none without dropout)."""
    layer.dropout, layer.deterministic = check_dropout(name, dropout), deterministic
    layer.dropout_rngs = rngs["dropout"].fork() if layer.dropout > 0 else nnx.data(None)


def _dropout_args(layer: nnx.Module, name: str, deterministic: bool | None, rngs) -> dict:
    """The ``dropout`` and ``dropout_key`` of an attention layer's call (none when it is deterministic): the
    call's ``deterministic`` over the layer's, the call's ``rngs`` (``nnx.Rngs``, a stream or a key) over the
    layer's stream."""
    deterministic = layer.deterministic if deterministic is None else deterministic
    if layer.dropout == 0.0 or deterministic:
        return {}
    stream = layer.dropout_rngs if rngs is None else rngs
    if stream is None:
        raise ValueError(f"{name}: dropout={layer.dropout} with deterministic=False needs rngs, at construction or "
                         f"in the call (or call with deterministic=True, or model.eval())")
    key = stream["dropout"]() if isinstance(stream, nnx.Rngs) else stream() if callable(stream) else stream
    return {"dropout": layer.dropout, "dropout_key": key}


class GATConv(nnx.Module):
    """Graph attention (PyG's ``GATConv``) on :func:`jaxgraphops.mha_gat`, the linen
    :class:`jaxgraphops.nn.flax.GATConv` as an NNX module.

    ``h = x W`` (``[n, H*C]``); per head ``alpha_ji = softmax_j leaky_relu(<a_src, h_j> + <a_dst, h_i>
    (+ <a_edge, W_e e_ji>))`` over the incoming edges of ``i``; ``out_i = sum_j alpha_ji h_j``, heads
    concatenated (``[n_dst, H*C]``) or averaged (``[n_dst, C]``), plus ``bias``. With
    ``add_self_loops`` the graph is PyG's (existing loops removed, one loop per node ``i <
    min(n_src, n_dst)`` added, its edge attributes ``fill_value``). Attention dropout as in linen.

    Params: ``kernel [F, H*C]`` (PyG's ``lin``; with ``share_weights=False`` ``src_kernel [F_src,
    H*C]`` and ``dst_kernel [F_dst, H*C]``), ``att_src``, ``att_dst [1, H, C]``, with ``edge_dim``
    ``edge_kernel [edge_dim, H*C]`` and ``att_edge [1, H, C]``, ``bias [H*C]`` (``[C]`` if not
    ``concat``) with ``use_bias``, ``res_kernel [F_dst, H*C or C]`` with ``residual``.

    Args:
      in_features: ``F``, or ``(F_src, F_dst)`` (with ``share_weights=False`` if they differ).
      out_features: ``C``, output features per head.
      heads, concat, negative_slope, add_self_loops, edge_dim, fill_value: PyG's options.
      use_bias: PyG's ``bias``.
      share_weights: one ``kernel`` for sources and destinations (PyG's int ``in_channels``).
      residual: add ``x_dst @ res_kernel`` (PyG's ``residual``).
      kernel_init, bias_init, dtype, param_dtype, rngs: as in ``nnx.Linear`` (``kernel_init`` also
        initialises the attention vectors).
      dropout: attention dropout (PyG's ``dropout``), inside the fused kernels; its key comes from the
        ``"dropout"`` stream of ``rngs`` (forked at construction, or the call's ``rngs``).
      deterministic: no dropout; ``model.eval()`` sets it and ``model.train()`` clears it, as for
        ``nnx.Dropout``; the call's ``deterministic`` takes precedence.

    Call ``layer(g, x, edge_attr=None, return_attention_weights=False, deterministic=None, rngs=None)``:
    ``x`` is ``[n_src, F]`` or a pair ``(x_src, x_dst)``, ``edge_attr [n_edges, edge_dim]``. Returns
    ``out``, or ``(out, alpha [n_edges + m, H])``: ``g``'s edges in input order (0 for a removed self
    loop), then the ``m`` added loops; with dropout, the weights after dropout.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = GATConv(4, 8, heads=2, rngs=nnx.Rngs(0))
    >>> out, alpha = layer(g, jnp.ones((3, 4)), return_attention_weights=True)
    >>> out.shape, alpha.shape
    ((3, 16), (6, 2))
    """

    def __init__(self, in_features: int | tuple[int, int], out_features: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value: Any = "mean", use_bias: bool = True, share_weights: bool = True,
                 residual: bool = False, *, dropout: float = 0.0, deterministic: bool | None = False,
                 kernel_init: Initializer = _glorot, bias_init: Initializer = _zeros, dtype=None,
                 param_dtype=jnp.float32, rngs: nnx.Rngs):
        check_fill_value("GATConv", fill_value)
        _dropout_state(self, "GATConv", dropout, deterministic, rngs)
        in_src, in_dst = _attention_kernel_sizes("GATConv", in_features, share_weights)
        width = heads * out_features

        def param(shape):
            return _param(kernel_init, rngs, shape, param_dtype)

        self.kernel = param((in_src, width)) if share_weights else None
        self.src_kernel = None if share_weights else param((in_src, width))
        self.dst_kernel = None if share_weights else param((in_dst, width))
        self.att_src, self.att_dst = param((1, heads, out_features)), param((1, heads, out_features))
        self.edge_kernel = None if edge_dim is None else param((edge_dim, width))
        self.att_edge = None if edge_dim is None else param((1, heads, out_features))
        _output_params(self, in_dst, width if concat else out_features, use_bias, residual, kernel_init, bias_init,
                       param_dtype, rngs)
        self.concat, self.negative_slope, self.add_self_loops = concat, negative_slope, add_self_loops
        self.fill_value, self.dtype = fill_value, dtype

    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False,
                 deterministic: bool | None = None, rngs=None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, None)
        names = ("kernel", "src_kernel", "dst_kernel", "att_src", "att_dst", "edge_kernel", "att_edge", "bias",
                 "res_kernel")
        x_src, x_dst, edge_attr, p = _promote(self.dtype, x_src, x_dst, edge_attr,
                                              {n: _value(getattr(self, n)) for n in names})
        src_kernel, dst_kernel = ((p["kernel"], p["kernel"]) if p["kernel"] is not None
                                  else (p["src_kernel"], p["dst_kernel"]))
        return gat_conv(g, x_src, x_dst, src_kernel, dst_kernel, p["att_src"], p["att_dst"], p["bias"],
                        concat=self.concat, negative_slope=self.negative_slope, add_loops=self.add_self_loops,
                        edge_attr=edge_attr, edge_kernel=p["edge_kernel"], att_edge=p["att_edge"],
                        fill_value=self.fill_value, return_attention=return_attention_weights,
                        res_kernel=p["res_kernel"], **_dropout_args(self, "GATConv", deterministic, rngs))

    @classmethod
    def from_pyg(cls, state_dict, *, concat: bool = True, negative_slope: float = 0.2, add_self_loops: bool = True,
                 fill_value: Any = "mean", dtype=None, param_dtype=jnp.float32) -> GATConv:
        """The layer with the weights of a PyG ``GATConv.state_dict()`` (tensors or numpy arrays).

        Sizes, heads, ``share_weights`` (``lin`` or ``lin_src``/``lin_dst``), ``edge_dim``, ``residual``
        and ``bias`` follow from the entries; give PyG's ``concat``, ``negative_slope``,
        ``add_self_loops`` and ``fill_value``.

        >>> import numpy as np
        >>> sd = {"lin.weight": np.ones((8, 4)), "att_src": np.ones((1, 2, 4)), "att_dst": np.ones((1, 2, 4))}
        >>> layer = GATConv.from_pyg(sd)
        >>> layer.kernel.shape, layer.att_src.shape, layer.bias is None
        ((4, 8), (1, 2, 4), True)
        """
        fn = "GATConv.from_pyg"
        w = gat_weights_from_pyg(fn, state_dict)
        _, heads, out_features = w["att_src"].shape
        share = "kernel" in w
        in_features = w["kernel"].shape[0] if share else (w["src_kernel"].shape[0], w["dst_kernel"].shape[0])
        check_output_width(fn, w, heads, out_features, concat)
        return _with_weights(cls, w, in_features, out_features, heads, concat, negative_slope, add_self_loops,
                             w["edge_kernel"].shape[0] if "edge_kernel" in w else None, fill_value,
                             use_bias="bias" in w, share_weights=share, residual="res_kernel" in w, dtype=dtype,
                             param_dtype=param_dtype)


class GATv2Conv(nnx.Module):
    """Graph attention v2 (PyG's ``GATv2Conv``) on :func:`jaxgraphops.mha_gat_v2`, the linen
    :class:`jaxgraphops.nn.flax.GATv2Conv` as an NNX module.

    ``x_l = x_src W_l + b_l``, ``x_r = x_dst W_r + b_r``; per head ``alpha_ji = softmax_j <a,
    leaky_relu(x_l[j] + x_r[i] (+ W_e e_ji))>``; ``out_i = sum_j alpha_ji x_l[j]``, heads concatenated
    or averaged, plus the residual and ``bias``. Self loops and ``fill_value`` as in :class:`GATConv`.

    Params: ``src_kernel [F_src, H*C]``, ``src_bias``, ``dst_kernel [F_dst, H*C]``, ``dst_bias`` (PyG's
    ``lin_l``/``lin_r``; with ``share_weights`` one ``kernel`` and ``kernel_bias``; biases with
    ``use_bias``), ``att [1, H, C]``, ``edge_kernel [edge_dim, H*C]`` with ``edge_dim``,
    ``res_kernel`` with ``residual``, ``bias [H*C]`` (``[C]`` if not ``concat``) with ``use_bias``.

    Args: ``in_features`` (``F`` or ``(F_src, F_dst)``), ``out_features`` (``C``), then PyG's
    ``heads``, ``concat``, ``negative_slope``, ``add_self_loops``, ``edge_dim``, ``fill_value``,
    ``use_bias`` (``bias``), ``share_weights``, ``residual``; ``kernel_init``, ``bias_init``,
    ``dtype``, ``param_dtype``, ``rngs`` as in ``nnx.Linear``; ``dropout``, ``deterministic`` as in
    :class:`GATConv`.

    Call ``layer(g, x, edge_attr=None, return_attention_weights=False, deterministic=None, rngs=None)`` as
    :class:`GATConv`.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = GATv2Conv(4, 8, heads=2, edge_dim=3, rngs=nnx.Rngs(0))
    >>> layer(g, jnp.ones((3, 4)), jnp.ones((3, 3))).shape
    (3, 16)
    """

    def __init__(self, in_features: int | tuple[int, int], out_features: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value: Any = "mean", use_bias: bool = True, share_weights: bool = False,
                 residual: bool = False, *, dropout: float = 0.0, deterministic: bool | None = False,
                 kernel_init: Initializer = _glorot, bias_init: Initializer = _zeros, dtype=None,
                 param_dtype=jnp.float32, rngs: nnx.Rngs):
        check_fill_value("GATv2Conv", fill_value)
        _dropout_state(self, "GATv2Conv", dropout, deterministic, rngs)
        in_src, in_dst = _attention_kernel_sizes("GATv2Conv", in_features, share_weights)
        width = heads * out_features

        def linear(n_in, on):
            return ((_param(kernel_init, rngs, (n_in, width), param_dtype) if on else None),
                    (_param(bias_init, rngs, (width,), param_dtype) if on and use_bias else None))

        self.kernel, self.kernel_bias = linear(in_src, share_weights)
        self.src_kernel, self.src_bias = linear(in_src, not share_weights)
        self.dst_kernel, self.dst_bias = linear(in_dst, not share_weights)
        self.att = _param(kernel_init, rngs, (1, heads, out_features), param_dtype)
        self.edge_kernel = None if edge_dim is None else _param(kernel_init, rngs, (edge_dim, width), param_dtype)
        _output_params(self, in_dst, width if concat else out_features, use_bias, residual, kernel_init, bias_init,
                       param_dtype, rngs)
        self.concat, self.negative_slope, self.add_self_loops = concat, negative_slope, add_self_loops
        self.fill_value, self.dtype = fill_value, dtype

    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False,
                 deterministic: bool | None = None, rngs=None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, None)
        names = ("kernel", "kernel_bias", "src_kernel", "src_bias", "dst_kernel", "dst_bias", "att", "edge_kernel",
                 "bias", "res_kernel")
        x_src, x_dst, edge_attr, p = _promote(self.dtype, x_src, x_dst, edge_attr,
                                              {n: _value(getattr(self, n)) for n in names})
        if p["kernel"] is not None:
            src = dst = (p["kernel"], p["kernel_bias"])
        else:
            src, dst = (p["src_kernel"], p["src_bias"]), (p["dst_kernel"], p["dst_bias"])
        return gatv2_conv(g, x_src, x_dst, *src, *dst, p["att"], p["bias"], concat=self.concat,
                          negative_slope=self.negative_slope, add_loops=self.add_self_loops, edge_attr=edge_attr,
                          edge_kernel=p["edge_kernel"], fill_value=self.fill_value,
                          return_attention=return_attention_weights, res_kernel=p["res_kernel"],
                          **_dropout_args(self, "GATv2Conv", deterministic, rngs))

    @classmethod
    def from_pyg(cls, state_dict, *, concat: bool = True, negative_slope: float = 0.2, add_self_loops: bool = True,
                 fill_value: Any = "mean", share_weights: bool = False, dtype=None,
                 param_dtype=jnp.float32) -> GATv2Conv:
        """The layer with the weights of a PyG ``GATv2Conv.state_dict()`` (tensors or numpy arrays).

        Sizes, heads, ``edge_dim``, ``residual`` and ``bias`` follow from the entries; give PyG's
        ``concat``, ``negative_slope``, ``add_self_loops``, ``fill_value`` and ``share_weights``.

        >>> import numpy as np
        >>> sd = {"lin_l.weight": np.ones((8, 4)), "lin_r.weight": np.ones((8, 5)), "att": np.ones((1, 2, 4))}
        >>> layer = GATv2Conv.from_pyg(sd)
        >>> layer.dst_kernel.shape, layer.bias is None
        ((5, 8), True)
        """
        fn = "GATv2Conv.from_pyg"
        w = gatv2_weights_from_pyg(fn, state_dict, share_weights=share_weights)
        _, heads, out_features = w["att"].shape
        src = w["kernel" if share_weights else "src_kernel"]
        in_features = src.shape[0] if share_weights else (src.shape[0], w["dst_kernel"].shape[0])
        check_output_width(fn, w, heads, out_features, concat)
        use_bias = ("kernel_bias" if share_weights else "src_bias") in w
        if use_bias != ("bias" in w):
            raise ValueError(f"{fn}: the linear layers' biases and 'bias' must both be present or both absent "
                             f"(PyG's bias)")
        return _with_weights(cls, w, in_features, out_features, heads, concat, negative_slope, add_self_loops,
                             w["edge_kernel"].shape[0] if "edge_kernel" in w else None, fill_value,
                             use_bias=use_bias, share_weights=share_weights, residual="res_kernel" in w, dtype=dtype,
                             param_dtype=param_dtype)


_TRANSFORMER_LINEAR = ("query", "key", "value", "edge", "skip", "beta")


class TransformerConv(nnx.Module):
    """Graph transformer attention (PyG's ``TransformerConv``) on :func:`jaxgraphops.mha_simple`, the
    linen :class:`jaxgraphops.nn.flax.TransformerConv` as an NNX module.

    ``q = x_dst W_q + b_q``, ``k = x_src W_k + b_k``, ``v = x_src W_v + b_v``; per head ``alpha_ij =
    softmax_j <q_i, k_j (+ W_e e_ij)> / sqrt(C)``, ``out_i = sum_j alpha_ij (v_j (+ W_e e_ij))``, heads
    concatenated or averaged; with ``root_weight`` plus ``x_i W_skip + b_skip``, or with ``beta`` the
    gate ``b x_r + (1 - b) out``, ``b = sigmoid([out, x_r, out - x_r] W_beta)``. No self loops; attention
    dropout (``dropout``, ``deterministic``) as in :class:`GATConv` (``alpha`` is returned after dropout,
    where PyG returns it before).

    Params: ``query_kernel [F_dst, H*C]``, ``key_kernel``, ``value_kernel [F_src, H*C]`` and their
    ``*_bias`` (with ``use_bias``), ``edge_kernel [edge_dim, H*C]`` (with ``edge_dim``),
    ``skip_kernel [F_dst, H*C or C]`` and ``skip_bias`` (with ``root_weight``), ``beta_kernel [3 *
    (H*C or C), 1]`` (with ``beta``).

    Args: ``in_features`` (``F`` or ``(F_src, F_dst)``), ``out_features`` (``C``), then PyG's
    ``heads``, ``concat``, ``beta``, ``edge_dim``, ``use_bias`` (``bias``), ``root_weight``;
    ``kernel_init``, ``bias_init``, ``dtype``, ``param_dtype``, ``rngs`` as in ``nnx.Linear``.

    Call ``layer(g, x, edge_attr=None, return_attention_weights=False, deterministic=None, rngs=None)``;
    returns ``out`` or ``(out, alpha [n_edges, H])``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> TransformerConv(4, 8, heads=2, beta=True, rngs=nnx.Rngs(0))(g, jnp.ones((3, 4))).shape
    (3, 16)
    """

    def __init__(self, in_features: int | tuple[int, int], out_features: int, heads: int = 1, concat: bool = True,
                 beta: bool = False, edge_dim: int | None = None, use_bias: bool = True, root_weight: bool = True, *,
                 dropout: float = 0.0, deterministic: bool | None = False, kernel_init: Initializer = _lecun,
                 bias_init: Initializer = _zeros, dtype=None, param_dtype=jnp.float32, rngs: nnx.Rngs):
        in_src, in_dst = _sizes("TransformerConv", in_features)
        _dropout_state(self, "TransformerConv", dropout, deterministic, rngs)
        width = heads * out_features
        out = width if concat else out_features
        shapes = {"query": (in_dst, width, use_bias), "key": (in_src, width, use_bias),
                  "value": (in_src, width, use_bias), "edge": None if edge_dim is None else (edge_dim, width, False),
                  "skip": (in_dst, out, use_bias) if root_weight else None,
                  "beta": (3 * out, 1, False) if root_weight and beta else None}
        for name in _TRANSFORMER_LINEAR:  # (in, out, bias) of each linear map, None where it is absent
            spec = shapes[name]
            setattr(self, f"{name}_kernel", None if spec is None else _param(kernel_init, rngs, spec[:2], param_dtype))
            setattr(self, f"{name}_bias", _param(bias_init, rngs, spec[1:2], param_dtype) if spec and spec[2] else None)
        self.heads, self.concat, self.dtype = heads, concat, dtype

    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False,
                 deterministic: bool | None = None, rngs=None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, None)
        names = [f"{n}_{k}" for n in _TRANSFORMER_LINEAR for k in ("kernel", "bias")]
        w = {n: getattr(self, n)[...] for n in names if getattr(self, n) is not None}
        x_src, x_dst, edge_attr, w = _promote(self.dtype, x_src, x_dst, edge_attr, w)
        return transformer_conv(g, x_src, x_dst, w, heads=self.heads, concat=self.concat, edge_attr=edge_attr,
                                return_attention=return_attention_weights,
                                **_dropout_args(self, "TransformerConv", deterministic, rngs))

    @classmethod
    def from_pyg(cls, state_dict, *, heads: int, concat: bool = True, root_weight: bool = True, dtype=None,
                 param_dtype=jnp.float32) -> TransformerConv:
        """The layer with the weights of a PyG ``TransformerConv.state_dict()`` (tensors or numpy arrays).

        Give PyG's ``heads``, ``concat`` and ``root_weight`` (the state_dict holds ``H*C`` only, and
        ``lin_skip`` even without ``root_weight``); sizes, ``edge_dim``, ``beta`` and ``bias`` follow
        from the entries.

        >>> import numpy as np
        >>> sd = {f"lin_{n}.weight": np.ones((8, 4)) for n in ("query", "key", "value", "skip")}
        >>> layer = TransformerConv.from_pyg(sd, heads=2)
        >>> layer.query_kernel.shape, layer.beta_kernel is None
        ((4, 8), True)
        """
        w = transformer_weights_from_pyg("TransformerConv.from_pyg", state_dict, heads=heads, concat=concat,
                                         root_weight=root_weight)
        in_dst, width = w["query_kernel"].shape
        return _with_weights(cls, w, (w["key_kernel"].shape[0], in_dst), width // heads, heads, concat,
                             beta="beta_kernel" in w,
                             edge_dim=w["edge_kernel"].shape[0] if "edge_kernel" in w else None,
                             use_bias="query_bias" in w, root_weight=root_weight, dtype=dtype,
                             param_dtype=param_dtype)


# -- GNOBlock -------------------------------------------------------------------------------------

class GNOBlock(nnx.Module):
    """A graph-neural-operator block ``out_i = reduce_{e=(j->i)} K(dx_e) f_j (+ f_dst_i W_skip + b)``,
    the linen :class:`jaxgraphops.nn.flax.GNOBlock` as an NNX module.

    The kernel ``K(dx) = V relu(U dx + b_u) + b_v`` is a matrix (``out_features x in_features``) or,
    with ``kernel="diagonal"``, a per-channel scale (``out_features == in_features``); the integral
    is the fused :func:`jaxgraphops.gno_conv` (kappa is never formed).

    Params: ``U [kernel_width, coord_dim]``, ``b_u``, ``V [P, kernel_width]``, ``b_v [P]`` (``P =
    out_features * in_features`` or ``in_features``); ``skip_kernel [skip_features, out_features]``
    and ``skip_bias`` with ``skip``.

    Args:
      in_features, out_features: ``c_in``, ``c_out``.
      coord_dim: ``d``, the size of an edge vector.
      kernel_width: hidden width of the kernel MLP.
      kernel: ``"matrix"`` or ``"diagonal"``.
      reduce: ``"mean"`` or ``"sum"`` over the in-edges (weighted with ``edge_weight``).
      skip: add the linear skip connection.
      skip_features: features of ``f_dst`` (default ``in_features``).
      dtype, param_dtype, rngs: as in ``nnx.Linear``.

    Call ``layer(g, f_src, dx, f_dst=None, edge_weight=None)``: ``f_src [n_src, c_in]``, ``dx [E, d]``,
    ``f_dst [n_dst, skip_features]`` for the skip (default ``f_src``, square graphs); returns
    ``[n_dst, out_features]``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> GNOBlock(4, 8, 2, kernel_width=16, rngs=nnx.Rngs(0))(g, jnp.ones((3, 4)), jnp.ones((3, 2))).shape
    (3, 8)
    """

    def __init__(self, in_features: int, out_features: int, coord_dim: int, kernel_width: int = 64,
                 kernel: str = "matrix", reduce: str = "mean", skip: bool = True, skip_features: int | None = None, *,
                 dtype=None, param_dtype=jnp.float32, rngs: nnx.Rngs):
        check_block("GNOBlock", in_features, out_features, kernel, reduce, kernel_width)
        w = init_kernel(rngs.params(), coord_dim, kernel_width, in_features, out_features, kernel, param_dtype)
        self.U, self.b_u, self.V, self.b_v = (nnx.Param(w[k]) for k in ("U", "b_u", "V", "b_v"))
        self.skip_kernel = (_param(_lecun, rngs, (skip_features or in_features, out_features), param_dtype)
                            if skip else None)
        self.skip_bias = _param(_zeros, rngs, (out_features,), param_dtype) if skip else None
        self.kernel, self.reduce, self.dtype = kernel, reduce, dtype

    def __call__(self, g: Graph, f_src, dx, f_dst=None, edge_weight=None):
        if self.skip_kernel is not None:
            f_dst = skip_input("GNOBlock", g, f_src, f_dst)
        params = [_value(p) for p in (self.U, self.b_u, self.V, self.b_v, self.skip_kernel, self.skip_bias)]
        f_src, dx, f_dst, edge_weight, params = _promote(self.dtype, f_src, dx, f_dst, edge_weight, params)
        return gno_block(g, f_src, dx, *params, f_dst, kernel=self.kernel, reduce=self.reduce, edge_weight=edge_weight)


# -- relational layers ----------------------------------------------------------------------------

class RGCNConv(nnx.Module):
    """Relational graph convolution (PyG's ``RGCNConv`` and ``FastRGCNConv``) on
    :func:`jaxgraphops.agg_hg_basis`, the linen :class:`jaxgraphops.nn.flax.RGCNConv` as an NNX module.

    ``out_i = x_i root + bias + sum_r sum_{j in N_r(i)} c_{i,r} x_j W_r`` with ``c_{i,r} = 1 / |N_r(i)|``
    (``aggr="mean"``) or 1 (``"add"``, ``"sum"``); ``W_r`` per relation, ``sum_b comp[r, b] kernel[b]``
    with ``num_bases``, or block-diagonal with ``num_blocks`` (float features only). Node ids (``x``
    None: ``arange``, or an integer array, PyG's featureless input) read rows of ``W_r`` and ``root``.

    Params (PyG's layout): ``kernel`` ``[R, F, out]``, ``[B, F, out]`` with ``comp [R, B]``, or ``[R,
    nb, F/nb, out/nb]``; ``root_kernel [F_dst, out]`` (with ``root_weight``); ``bias [out]`` (with
    ``use_bias``).

    Args:
      in_features: ``F``, or ``(F_src, F_dst)``; for node-id input the number of node ids (PyG's
        ``in_channels``).
      out_features: output features.
      num_relations, num_bases, aggr, root_weight, use_bias (``bias``), num_blocks: PyG's options.
      kernel_init, bias_init, dtype, param_dtype, rngs: as in ``nnx.Linear`` (default: PyG's glorot).

    Call ``layer(g, x, edge_types)``: ``x`` float features ``[n_src, F]`` (or a pair), integer node
    ids ``[n_src]`` (or a pair), or None; ``edge_types`` integer ``[n_edges]`` in input edge order.
    Returns ``[n_dst, out_features]``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = RGCNConv(4, 8, num_relations=3, num_bases=2, rngs=nnx.Rngs(0))
    >>> layer(g, jnp.ones((3, 4)), jnp.array([0, 2, 1])).shape, layer.kernel.shape
    ((3, 8), (2, 4, 8))
    """

    def __init__(self, in_features: int | tuple[int, int], out_features: int, num_relations: int,
                 num_bases: int | None = None, aggr: str = "mean", root_weight: bool = True, use_bias: bool = True,
                 num_blocks: int | None = None, *, kernel_init: Initializer = pyg_glorot,
                 bias_init: Initializer = _zeros, dtype=None, param_dtype=jnp.float32, rngs: nnx.Rngs):
        name = "RGCNConv"
        check_rgcn_config(name, num_relations, num_bases, num_blocks, aggr)
        in_src, in_dst = _sizes(name, in_features)
        shape = rgcn_kernel_shape(name, num_relations, num_bases, num_blocks, in_src, out_features)
        self.kernel = _param(kernel_init, rngs, shape, param_dtype)
        self.comp = None if num_bases is None else _param(kernel_init, rngs, (num_relations, num_bases), param_dtype)
        self.root_kernel = _param(kernel_init, rngs, (in_dst, out_features), param_dtype) if root_weight else None
        self.bias = _param(bias_init, rngs, (out_features,), param_dtype) if use_bias else None
        self.aggr, self.dtype = aggr, dtype

    def __call__(self, g: Graph, x, edge_types):
        root = self.root_kernel is not None
        mode, x_src, x_dst = rgcn_inputs("RGCNConv", g, x, need_dst=root)
        w = {n: getattr(self, n)[...] for n in ("kernel", "comp", "root_kernel", "bias")
             if getattr(self, n) is not None}
        if mode == "features":
            x_src, x_dst, w = _promote(self.dtype, x_src, x_dst, w)
        else:
            (w,) = _promote(self.dtype, w)
        return rgcn_conv(g, (x_src, x_dst) if root else x_src, edge_types, w, aggr=self.aggr)

    @classmethod
    def from_pyg(cls, state_dict, *, aggr: str = "mean", dtype=None, param_dtype=jnp.float32) -> RGCNConv:
        """The layer with the weights of a PyG ``RGCNConv`` or ``FastRGCNConv`` ``state_dict()``.

        Sizes, ``num_relations``, ``num_bases``, ``num_blocks``, ``root_weight`` and ``bias`` follow
        from the entries (``weight``, ``comp``, ``root``, ``bias``); give PyG's ``aggr``.

        >>> import numpy as np
        >>> sd = {"weight": np.ones((2, 4, 8)), "comp": np.ones((3, 2)), "root": np.ones((4, 8))}
        >>> layer = RGCNConv.from_pyg(sd, aggr="add")
        >>> layer.comp.shape, layer.bias is None
        ((3, 2), True)
        """
        w = rgcn_weights_from_pyg("RGCNConv.from_pyg", state_dict)
        return _with_weights(cls, w, aggr=aggr, dtype=dtype, param_dtype=param_dtype, **rgcn_config_from_weights(w))


class DMPNNEncoder(nnx.Module):
    """Chemprop's directed message-passing encoder (``BondMessagePassing``) on :func:`jaxgraphops.agg_dmpnn`,
    the linen :class:`jaxgraphops.nn.flax.DMPNNEncoder` as an NNX module.

    On the bond graph ``g`` (edges = directed bonds), with atom features ``V``, bond features ``E``
    and ``tau`` the activation::

        H0 = W_i([V[src] | E]);  H = tau(H0)
        depth - 1 times:  (undirected: H = (H + H[rev]) / 2)
                          H = tau(H0 + W_h(sum_{e' into src(e)} H[e'] - H[rev(e)]))
        out = tau(W_o([V | sum of H over the bonds into each atom]))
        with atom_descriptors V_d:  out = W_d([out | V_d])

    Params: ``W_i``, ``W_h`` (``nnx.Linear``, biases with ``use_bias``), ``W_o`` (with a bias), ``W_d``
    (with ``d_vd``; else None), each ``kernel [in, out]`` and ``bias`` as the linen layer's.

    Args:
      d_v, d_e: atom and bond features.
      d_h: hidden (and output) features.
      depth: message-passing steps, counting the first (Chemprop's ``depth``).
      undirected: average each bond state with its reverse before each message.
      use_bias: biases on ``W_i`` and ``W_h`` (Chemprop's ``bias``).
      d_vd: atom-descriptor features (None: no ``W_d``).
      activation: ``tau`` (Chemprop's default ``relu``).
      kernel_init, bias_init, dtype, param_dtype, rngs: as in ``nnx.Linear``.

    Call ``layer(g, atom_features, bond_features, rev_edge_ids, atom_descriptors=None)``:
    ``atom_features [n_atoms, d_v]``, ``bond_features [n_edges, d_e]`` in ``g``'s edge order,
    ``rev_edge_ids [n_edges]`` (Chemprop's ``rev_edge_index``; -1 for none); returns ``[n_atoms, d_h]``
    (``[n_atoms, d_h + d_vd]`` with descriptors).

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 1, 2]), jnp.array([1, 0, 2, 1]))  # bonds 0-1, 1-2
    >>> layer = DMPNNEncoder(5, 2, 16, depth=3, rngs=nnx.Rngs(0))
    >>> layer(g, jnp.ones((3, 5)), jnp.ones((4, 2)), jnp.array([1, 0, 3, 2])).shape
    (3, 16)
    """

    def __init__(self, d_v: int, d_e: int, d_h: int, depth: int = 3, undirected: bool = False,
                 use_bias: bool = False, d_vd: int | None = None, activation: Callable = nnx.relu, *,
                 kernel_init: Initializer = _lecun, bias_init: Initializer = _zeros, dtype=None,
                 param_dtype=jnp.float32, rngs: nnx.Rngs):
        check_dmpnn_config("DMPNNEncoder", depth, undirected)

        def linear(n_in, n_out, bias):
            return nnx.Linear(n_in, n_out, use_bias=bias, kernel_init=kernel_init, bias_init=bias_init,
                              param_dtype=param_dtype, rngs=rngs)

        self.W_i = linear(d_v + d_e, d_h, use_bias)
        self.W_h = linear(d_h, d_h, use_bias)
        self.W_o = linear(d_v + d_h, d_h, True)
        self.W_d = None if d_vd is None else linear(d_h + d_vd, d_h + d_vd, True)
        self.depth, self.undirected, self.activation, self.dtype = depth, undirected, activation, dtype

    def __call__(self, g: Graph, atom_features, bond_features, rev_edge_ids, atom_descriptors=None):
        w = {name: {"kernel": lin.kernel[...], "bias": _value(lin.bias)}
             for name, lin in (("W_i", self.W_i), ("W_h", self.W_h), ("W_o", self.W_o), ("W_d", self.W_d))
             if lin is not None}
        atoms, bonds, descriptors, w = _promote(self.dtype, atom_features, bond_features, atom_descriptors, w)
        return dmpnn_encoder(g, atoms, bonds, rev_edge_ids, w, depth=self.depth, undirected=self.undirected,
                             activation=self.activation, atom_descriptors=descriptors)

    @classmethod
    def from_chemprop(cls, state_dict, *, depth: int = 3, undirected: bool = False,
                      activation: Callable = nnx.relu, dtype=None, param_dtype=jnp.float32) -> DMPNNEncoder:
        """The layer with the weights of a Chemprop ``BondMessagePassing.state_dict()``.

        Sizes, ``use_bias`` and ``d_vd`` follow from the entries; give Chemprop's ``depth``,
        ``undirected`` and activation. Scaling transforms (``V_d_transform``, ``graph_transform``) are
        not read: apply them to the inputs.

        >>> import numpy as np
        >>> sd = {"W_i.weight": np.ones((16, 7)), "W_h.weight": np.ones((16, 16)), "W_o.weight": np.ones((16, 21)),
        ...       "W_o.bias": np.zeros(16)}
        >>> layer = DMPNNEncoder.from_chemprop(sd, depth=4)
        >>> layer.W_i.kernel.shape, layer.W_h.bias is None, layer.W_d is None
        ((7, 16), True, True)
        """
        w = dmpnn_weights_from_chemprop("DMPNNEncoder.from_chemprop", state_dict)
        d_h = w["W_h"]["kernel"].shape[0]
        d_v = w["W_o"]["kernel"].shape[0] - d_h
        return _with_weights(cls, w, d_v, w["W_i"]["kernel"].shape[0] - d_v, d_h, depth, undirected,
                             use_bias="bias" in w["W_i"],
                             d_vd=w["W_d"]["kernel"].shape[0] - d_h if "W_d" in w else None,
                             activation=activation, dtype=dtype, param_dtype=param_dtype)


class InteractionNetwork(nnx.Module):
    """An interaction-network step (MeshGraphNet / GraphCast processor block) on
    :func:`jaxgraphops.update_efeat`, the linen :class:`jaxgraphops.nn.flax.InteractionNetwork` as an NNX module.

    ``e' = edge_mlp([e | x_src[src] | x_dst[dst]])``, ``x' = node_mlp([x_dst | sum_{e into i} e'])``;
    with ``residual`` it returns ``(x_dst + x', e + e')``, else ``(x', e')`` (jraph's
    ``InteractionNetwork`` with concatenating update functions).

    Args:
      edge_mlp: the edge update, an NNX module (or a function) ``[n_edges, F_e + F_src + F_dst] ->
        [n_edges, F_e']``.
      node_mlp: the node update, ``[n_dst, F_dst + F_e'] -> [n_dst, F']``.
      residual: add the inputs to the outputs (needs ``F_e' = F_e`` and ``F' = F_dst``).

    Call ``layer(g, nodes, edges)``: ``nodes [n, F]`` or a pair ``(x_src, x_dst)`` (only the
    destinations are updated), ``edges [n_edges, F_e]`` in input edge order; returns ``(nodes', edges')``.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> from flax import nnx
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> rngs = nnx.Rngs(0)
    >>> layer = InteractionNetwork(nnx.Linear(4 + 8 + 8, 4, rngs=rngs), nnx.Linear(8 + 4, 8, rngs=rngs))
    >>> [a.shape for a in layer(g, jnp.ones((3, 8)), jnp.ones((3, 4)))]
    [(3, 8), (3, 4)]
    """

    def __init__(self, edge_mlp: Callable, node_mlp: Callable, residual: bool = True):
        self.edge_mlp, self.node_mlp, self.residual = edge_mlp, node_mlp, residual

    def __call__(self, g: Graph, nodes, edges):
        return interaction_network(g, nodes, edges, self.edge_mlp, self.node_mlp, residual=self.residual)


# -- DimeNet++ ------------------------------------------------------------------------------------

class _Params(nnx.Module):
    """A group of DimeNet++ params named as PyG's submodules (read as a dict by ``_dimenet.dimenet_pp``)."""

    def __init__(self, **children):
        for name, child in children.items():
            setattr(self, name, nnx.List(child) if isinstance(child, list) else child)


def _embedding_init(key, shape, dtype=jnp.float32):
    """PyG's ``uniform(-sqrt(3), sqrt(3))`` (unit variance)."""
    return jax.random.uniform(key, shape, dtype, -(3**0.5), 3**0.5)


def _dimenet_params(hidden: int, out_emb: int, int_emb: int, basis_emb: int, num_blocks: int, out_channels: int,
                    num_before_skip: int, num_after_skip: int, num_output_layers: int, param_dtype,
                    rngs: nnx.Rngs) -> dict:
    """DimeNet++'s params, initialised as the linen model's (lecun-normal kernels, zero biases, a zero last
    output layer, PyG's embeddings)."""
    def lin(n_in, n_out, bias=True, init=_lecun):
        return nnx.Linear(n_in, n_out, use_bias=bias, kernel_init=init, param_dtype=param_dtype, rngs=rngs)

    def residual():
        return _Params(lin1=lin(hidden, hidden), lin2=lin(hidden, hidden))

    def interaction():
        return _Params(lin_ji=lin(hidden, hidden), lin_kj=lin(hidden, hidden),
                       lin_rbf1=lin(N_RADIAL, basis_emb, False), lin_rbf2=lin(basis_emb, hidden, False),
                       lin_down=lin(hidden, int_emb, False),
                       sbf_weights=_param(_lecun, rngs, (N_SPHERICAL * N_RADIAL + int_emb, basis_emb), param_dtype),
                       lin_up=lin(int_emb, hidden, False),
                       layers_before_skip=[residual() for _ in range(num_before_skip)], lin=lin(hidden, hidden),
                       layers_after_skip=[residual() for _ in range(num_after_skip)])

    def output():
        return _Params(lin_rbf=lin(N_RADIAL, hidden, False), lin_up=lin(hidden, out_emb, False),
                       lins=[lin(out_emb, out_emb) for _ in range(num_output_layers)],
                       lin=lin(out_emb, out_channels, False, nnx.initializers.zeros))

    emb = nnx.Embed(95, hidden, embedding_init=_embedding_init, param_dtype=param_dtype, rngs=rngs)
    return {"freq": nnx.Param(jnp.pi * jnp.arange(1, N_RADIAL + 1, dtype=param_dtype)),
            "emb": _Params(emb=emb, lin_rbf=lin(N_RADIAL, hidden), lin=lin(3 * hidden, hidden)),
            "interaction_blocks": nnx.List([interaction() for _ in range(num_blocks)]),
            "output_blocks": nnx.List([output() for _ in range(num_blocks + 1)])}


class DimeNetPlusPlus(nnx.Module):
    """DimeNet++ energy model (PyG's ``DimeNetPlusPlus``), the linen
    :class:`jaxgraphops.nn.dimenet_flax.DimeNetPlusPlus` as an NNX module.

    ``num_spherical = 7``, ``num_radial = 6``, ``envelope_exponent = 5``, one residual layer before the
    skip and two after; the triplet step of every interaction block is the fused
    :func:`jaxgraphops.dimenet.agg_edge_to_edge`. Params are named as PyG's modules: ``freq``, ``emb``
    (``emb``, ``lin_rbf``, ``lin``), ``interaction_blocks[i]`` (``lin_ji``, ``lin_kj``, ``lin_rbf1``,
    ``lin_rbf2``, ``lin_down``, ``sbf_weights`` (PyG's ``lin_sbf1.weight.T`` above ``lin_sbf2.weight``),
    ``lin_up``, ``layers_before_skip``, ``lin``, ``layers_after_skip``), ``output_blocks[i]``
    (``lin_rbf``, ``lin_up``, ``lins``, ``lin``).

    Args: ``hidden``, ``out_emb``, ``int_emb``, ``basis_emb``, ``num_blocks``, ``out_channels``,
    ``cutoff``, ``act``, ``num_before_skip``, ``num_after_skip``, ``num_output_layers``: PyG's options
    (``hidden_channels``, ``out_emb_channels``, ``int_emb_size``, ``basis_emb_size``, ...); ``impl``
    (None: fused kernels; ``"xla"``: the pure-JAX reference of the triplet step); ``dtype``,
    ``param_dtype``, ``rngs`` as in ``nnx.Linear``. :meth:`from_pyg` loads PyG's weights.

    Call ``model(z [N], pos [N, 3], g, shifts [E, 3], triplets, batch [N], n_graphs)``: edges ``j -> i``
    of ``g`` with vectors ``pos[j] + shifts - pos[i]``, ``triplets`` from
    :func:`jaxgraphops.dimenet.triplets`; returns ``[n_graphs, out_channels]``.
    :meth:`energy_and_forces` also returns the forces.

    >>> import jax.numpy as jnp, numpy as np, jaxgraphops as jgo
    >>> from flax import nnx
    >>> pos = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1.2, 0]])
    >>> g, shifts, batch = jgo.dimenet.radius_graph_pbc([(pos, None, None)], 3.0)
    >>> t = jgo.dimenet.triplets(g)
    >>> model = DimeNetPlusPlus(hidden=16, out_emb=16, int_emb=8, basis_emb=4, num_blocks=1, cutoff=3.0,
    ...                         rngs=nnx.Rngs(0))
    >>> energies, forces = model.energy_and_forces(jnp.array([1, 6, 8]), pos, g, shifts, t, batch, 1)
    >>> energies.shape, forces.shape
    ((1,), (3, 3))
    """

    def __init__(self, hidden: int = 128, out_emb: int = 256, int_emb: int = 64, basis_emb: int = 8,
                 num_blocks: int = 4, out_channels: int = 1, cutoff: float = 5.0, act: Callable = nnx.swish,
                 impl: str | None = None, num_before_skip: int = 1, num_after_skip: int = 2,
                 num_output_layers: int = 3, *, dtype=None, param_dtype=jnp.float32, rngs: nnx.Rngs):
        for name, value in _dimenet_params(hidden, out_emb, int_emb, basis_emb, num_blocks, out_channels,
                                           num_before_skip, num_after_skip, num_output_layers, param_dtype,
                                           rngs).items():
            setattr(self, name, value)
        self.cutoff, self.act, self.impl, self.dtype = cutoff, act, impl, dtype

    def __call__(self, z, pos, g: Graph, shifts, triplets, batch, n_graphs: int):
        pos, params = _promote(self.dtype, jnp.asarray(pos), nnx.to_pure_dict(nnx.state(self, nnx.Param)))
        return dimenet_pp(params, z, pos, g, shifts, triplets, batch, n_graphs, cutoff=self.cutoff, act=self.act,
                          impl=self.impl)

    @classmethod
    def from_pyg(cls, state_dict, *, cutoff: float = 5.0, act: Callable = nnx.swish, impl: str | None = None,
                 dtype=None, param_dtype=jnp.float32) -> DimeNetPlusPlus:
        """The model with the weights of a PyG ``DimeNetPlusPlus.state_dict()`` (tensors or numpy arrays).

        The sizes and layer counts follow from the entries (the mapping of
        :func:`jaxgraphops.nn.dimenet_flax.from_pyg_dimenet`); give PyG's ``cutoff`` and ``act`` (PyG's
        default ``"swish"`` is ``nnx.swish``). PyG's model must have ``num_spherical=7``,
        ``num_radial=6`` (checked) and ``envelope_exponent=5``.

        >>> import numpy as np
        >>> DimeNetPlusPlus.from_pyg({"rbf.freq": np.pi * np.arange(1.0, 7.0)})
        Traceback (most recent call last):
        ...
        ValueError: from_pyg_dimenet: state_dict has no 'emb.emb.weight' (expected PyG's DimeNetPlusPlus.state_dict())
        """
        config, params = dimenet_weights_from_pyg(state_dict)
        return _with_weights(cls, params, cutoff=cutoff, act=act, impl=impl, dtype=dtype, param_dtype=param_dtype,
                             **config)

    def energy_and_forces(self, z, pos, g: Graph, shifts, triplets, batch, n_graphs: int):
        """``(energies [n_graphs], forces [N, 3] = -dE/dpos)`` of a model with one output channel."""
        return energy_and_forces(lambda p: self(z, p, g, shifts, triplets, batch, n_graphs), jnp.asarray(pos))
