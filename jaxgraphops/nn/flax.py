"""``flax.linen`` graph layers on the fused kernels: ``SAGEConv``, ``GraphConv``, and PyG weight loaders.

Kernels are ``[in, out]`` as in ``flax.linen.Dense``. ``from_pyg_sage`` / ``from_pyg_gcn`` turn a
PyG layer's ``state_dict()`` into the variables ``{"params": ...}`` that ``Module.apply`` takes.
"""

from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn

from ..graph import Graph
from ._functional import (GRAPH_CONV_NORMS, SAGE_AGGRS, check_choice, gcn_weights_from_pyg, graph_conv,
                          sage_conv, sage_weights_from_pyg, split_sage_input)

__all__ = ["GraphConv", "SAGEConv", "from_pyg_gcn", "from_pyg_sage"]

Initializer = Callable[..., Any]


class SAGEConv(nn.Module):
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
        neigh = self.param("neigh_kernel", self.kernel_init, (x_src.shape[-1], self.features))
        root = self.param("root_kernel", self.kernel_init, (x_dst.shape[-1], self.features)) if self.root_weight else None
        bias = self.param("bias", self.bias_init, (self.features,)) if self.use_bias else None
        return sage_conv(g, x_src, x_dst, neigh, root, bias, aggr=self.aggr, normalize=self.normalize)


class GraphConv(nn.Module):
    """Graph convolution (DGL's ``GraphConv``): ``out = Â x W + b`` with a normalised adjacency ``Â``.

    ``norm="both"``: ``Â = D_in^-1/2 A D_out^-1/2`` (in-degrees of destinations, out-degrees of
    sources); ``"right"``: ``D_in^-1 A`` (mean); ``"none"``: ``A`` (sum). ``add_self_loops``
    uses ``A + I`` (:func:`jaxgraphops.nn.add_self_loops`; square graphs only), degrees included.
    With the defaults this is PyG's ``GCNConv`` on graphs without self loops whose in- and
    out-degrees agree (e.g. undirected ones); PyG uses in-degrees on both sides and replaces
    existing self loops instead of adding to them.

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
    norm: str = "both"
    add_self_loops: bool = True
    use_bias: bool = True
    kernel_init: Initializer = nn.initializers.glorot_uniform()
    bias_init: Initializer = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, g: Graph, x):
        check_choice("GraphConv", "norm", self.norm, GRAPH_CONV_NORMS)
        kernel = self.param("kernel", self.kernel_init, (x.shape[-1], self.features))
        bias = self.param("bias", self.bias_init, (self.features,)) if self.use_bias else None
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
