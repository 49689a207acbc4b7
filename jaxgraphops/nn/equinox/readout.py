"""The readouts as equinox modules: ``AttentionalAggregation`` and ``GraphNorm``, with ``from_pyg`` class methods.
The math: :mod:`jaxgraphops.nn._readout`.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from .._common import check_layer
from .._readout import (attentional_aggregation, attentional_aggregation_weights_from_pyg, graph_norm,
                        graph_norm_weights_from_pyg)
from ._common import load, rows, sequential

__all__ = ["AttentionalAggregation", "GraphNorm"]


class AttentionalAggregation(eqx.Module):
    """Attention readout (PyG's ``AttentionalAggregation``): ``out_b = sum_{i in b} a_i nn(x_i)``
    with ``a = softmax`` over the nodes of each graph ``b`` of ``gate_nn(x)``.

    The softmax is :func:`jaxgraphops.edge_softmax` on the node-to-graph membership graph and the
    sum a fused :func:`jaxgraphops.gspmm`.

    **Arguments:**

    - ``gate_nn``: one row ``[F] -> [1]`` (or ``[F']``, a gate per feature), vmapped over the nodes.
    - ``nn``: one row ``[F] -> [F']`` (None: identity).

    Call ``layer(x, batch=None, size=None)``: ``x [N, F]``; ``batch`` a
    :class:`jaxgraphops.BatchedGraph`, integer graph ids ``[N]`` (``size`` graphs, default ``max +
    1`` for concrete ids; required inside ``jit``) or None (one graph). Returns ``[n_graphs, F']``.

    >>> import jax, jax.numpy as jnp, equinox as eqx
    >>> layer = AttentionalAggregation(eqx.nn.Linear(4, 1, key=jax.random.key(0)))
    >>> layer(jnp.ones((5, 4)), jnp.array([0, 0, 1, 1, 1]), 2).shape
    (2, 4)
    """

    gate_nn: Callable
    nn: Callable | None

    def __init__(self, gate_nn: Callable, *, nn: Callable | None = None):
        self.gate_nn, self.nn = gate_nn, nn

    def __call__(self, x, batch=None, size=None):
        return attentional_aggregation(x, batch, size, rows(self.gate_nn), rows(self.nn))

    @classmethod
    def from_pyg(cls, state_dict, *, activation: Callable = jax.nn.relu) -> AttentionalAggregation:
        """The layer with the weights of a PyG ``AttentionalAggregation.state_dict()`` (``gate_nn``
        and ``nn`` as in :meth:`GINConv.from_pyg`).

        >>> import numpy as np
        >>> layer = AttentionalAggregation.from_pyg({"gate_nn.weight": np.ones((1, 4))})
        >>> layer.gate_nn.weight.shape, layer.nn is None
        ((1, 4), True)
        """
        w = attentional_aggregation_weights_from_pyg("AttentionalAggregation.from_pyg", state_dict)
        nn = w.get("nn")
        return cls(sequential(w["gate_nn"], activation), nn=None if nn is None else sequential(nn, activation))


class GraphNorm(eqx.Module):
    """Graph normalisation (PyG's ``GraphNorm``), per graph of a batch:
    ``weight * (x - mean_scale * mean) / sqrt(var + eps) + bias``, where ``mean`` is the mean of the
    graph's node features and ``var`` the mean of the squared shifted features (fused :func:`jaxgraphops.pool`).

    Fields as PyG's parameters: ``weight`` (ones), ``bias`` (zeros), ``mean_scale`` (ones), each ``[F]``.

    **Arguments:**

    - ``in_features``: ``F``.
    - ``eps``: added to the variance.

    Call ``layer(x, batch=None, size=None)`` as :class:`AttentionalAggregation`; returns ``[N, F]``.

    >>> import jax.numpy as jnp
    >>> GraphNorm(2)(jnp.arange(8.0).reshape(4, 2), jnp.array([0, 0, 1, 1]))[:, 0].round(3)
    Array([-1.,  1., -1.,  1.], dtype=float32)
    """

    weight: jax.Array
    bias: jax.Array
    mean_scale: jax.Array
    eps: float = eqx.field(static=True)

    def __init__(self, in_features: int, *, eps: float = 1e-5):
        check_layer(self, locals())
        self.weight, self.bias, self.mean_scale = jnp.ones(in_features), jnp.zeros(in_features), jnp.ones(in_features)
        self.eps = float(eps)

    def __call__(self, x, batch=None, size=None):
        return graph_norm(x, batch, size, self.weight, self.bias, self.mean_scale, eps=self.eps)

    @classmethod
    def from_pyg(cls, state_dict, *, eps: float = 1e-5) -> GraphNorm:
        """The layer with the weights of a PyG ``GraphNorm.state_dict()``; give PyG's ``eps``.

        >>> import numpy as np
        >>> GraphNorm.from_pyg({"weight": np.ones(4), "bias": np.zeros(4), "mean_scale": np.ones(4)}).weight.shape
        (4,)
        """
        w = graph_norm_weights_from_pyg("GraphNorm.from_pyg", state_dict)
        layer = cls(w["weight"].shape[0], eps=eps)
        return load(layer, {k: (lambda m, k=k: getattr(m, k)) for k in w}, w)
