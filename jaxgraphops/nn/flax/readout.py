"""The readouts as ``flax.linen`` modules: ``AttentionalAggregation``, ``GraphNorm``, and their PyG weight loaders
(``from_pyg_attentional_aggregation``, ``from_pyg_graphnorm``). The math: :mod:`jaxgraphops.nn._readout`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import flax.linen as nn
import jax.numpy as jnp

from .._readout import (attentional_aggregation, attentional_aggregation_weights_from_pyg, graph_norm,
                        graph_norm_weights_from_pyg)
from ._common import Layer, ParamLayer, dense_stack, promote

__all__ = ["AttentionalAggregation", "GraphNorm", "from_pyg_attentional_aggregation", "from_pyg_graphnorm"]


class AttentionalAggregation(Layer):
    """Attention readout (PyG's ``AttentionalAggregation``): ``out_b = sum_{i in b} a_i nn(x_i)``
    with ``a = softmax`` over the nodes of each graph ``b`` of ``gate_nn(x)``.

    The softmax is :func:`jaxgraphops.edge_softmax` on the node-to-graph membership graph and the
    sum a fused :func:`jaxgraphops.gspmm`. ``gate_nn`` gives ``[N, 1]`` (or ``[N, F']``, a gate
    per feature); ``nn`` (None: identity) ``[N, F']``. :func:`from_pyg_attentional_aggregation`
    loads PyG's weights (params under ``gate_nn`` and ``nn``).

    Call ``layer(x, batch=None, size=None)``: ``x [N, F]`` node features; ``batch`` a
    :class:`jaxgraphops.BatchedGraph`, integer graph ids ``[N]`` (``size`` graphs, default ``max +
    1`` for concrete ids; required inside ``jit``) or None (one graph). Returns ``[n_graphs, F']``.

    >>> import jax, jax.numpy as jnp, flax.linen as nn
    >>> layer = AttentionalAggregation(nn.Dense(1), nn=nn.Dense(8))
    >>> x, ids = jnp.ones((5, 4)), jnp.array([0, 0, 1, 1, 1])
    >>> variables = layer.init(jax.random.key(0), x, ids, 2)
    >>> layer.apply(variables, x, ids, 2).shape
    (2, 8)
    """

    gate_nn: Callable
    _: dataclasses.KW_ONLY
    nn: Callable | None = None

    def __call__(self, x, batch=None, size=None):
        return attentional_aggregation(x, batch, size, self.gate_nn, self.nn)


class GraphNorm(ParamLayer):
    """Graph normalisation (PyG's ``GraphNorm``), per graph of a batch:
    ``weight * (x - mean_scale * mean) / sqrt(var + eps) + bias``, where ``mean`` is the mean of the
    graph's node features and ``var`` the mean of the squared shifted features (fused :func:`jaxgraphops.pool`).

    Params: ``weight`` (ones), ``bias`` (zeros), ``mean_scale`` (ones), each ``[F]``;
    :func:`from_pyg_graphnorm` loads PyG's.

    Attributes:
      eps: added to the variance.
      dtype, param_dtype: as in ``flax.linen.LayerNorm``.

    Call ``layer(x, batch=None, size=None)`` as :class:`AttentionalAggregation`; returns ``[N, F]``.

    >>> import jax, jax.numpy as jnp
    >>> x, ids = jnp.arange(8.0).reshape(4, 2), jnp.array([0, 0, 1, 1])
    >>> variables = GraphNorm().init(jax.random.key(0), x, ids)
    >>> GraphNorm().apply(variables, x, ids)[:, 0].round(3)
    Array([-1.,  1., -1.,  1.], dtype=float32)
    """

    _: dataclasses.KW_ONLY
    eps: float = 1e-5

    @nn.compact
    def __call__(self, x, batch=None, size=None):
        f = (jnp.shape(x)[-1],)
        w = {"weight": self.param("weight", nn.initializers.ones_init(), f, self.param_dtype),
             "bias": self.param("bias", nn.initializers.zeros_init(), f, self.param_dtype),
             "mean_scale": self.param("mean_scale", nn.initializers.ones_init(), f, self.param_dtype)}
        x, w = promote(self.dtype, x, w)
        return graph_norm(x, batch, size, w["weight"], w["bias"], w["mean_scale"], eps=self.eps)


def from_pyg_attentional_aggregation(state_dict) -> dict:
    """Variables for :class:`AttentionalAggregation` from PyG's ``state_dict()`` (``gate_nn`` and
    ``nn`` each a ``Sequential`` of ``Linear`` layers or one ``Linear``, as in :func:`from_pyg_gin`).

    >>> import numpy as np
    >>> sd = {"gate_nn.weight": np.ones((1, 4)), "gate_nn.bias": np.zeros(1), "nn.weight": np.ones((8, 4))}
    >>> sorted(from_pyg_attentional_aggregation(sd)["params"])
    ['gate_nn', 'nn']
    """
    w = attentional_aggregation_weights_from_pyg("from_pyg_attentional_aggregation", state_dict)
    return {"params": {k: dense_stack(v) for k, v in w.items()}}


def from_pyg_graphnorm(state_dict) -> dict:
    """Variables for :class:`GraphNorm` from a PyG ``GraphNorm.state_dict()`` (``weight``, ``bias``,
    ``mean_scale``); build the layer with PyG's ``eps``.

    >>> import numpy as np
    >>> sd = {"weight": np.ones(4), "bias": np.zeros(4), "mean_scale": np.ones(4)}
    >>> from_pyg_graphnorm(sd)["params"]["mean_scale"].shape
    (4,)
    """
    return {"params": graph_norm_weights_from_pyg("from_pyg_graphnorm", state_dict)}
