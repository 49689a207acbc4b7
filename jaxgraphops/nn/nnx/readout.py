"""The readouts as ``flax.nnx`` modules: ``AttentionalAggregation`` and ``GraphNorm``, with ``from_pyg`` class
methods. The math: :mod:`jaxgraphops.nn._readout`.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
from flax import nnx

from .._common import check_layer
from .._readout import (attentional_aggregation, attentional_aggregation_weights_from_pyg, graph_norm,
                        graph_norm_weights_from_pyg)
from ._common import load_variables, promote, sequential

__all__ = ["AttentionalAggregation", "GraphNorm"]


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
    >>> layer = AttentionalAggregation(nnx.Linear(4, 1, rngs=rngs), nn=nnx.Linear(4, 8, rngs=rngs))
    >>> layer(jnp.ones((5, 4)), jnp.array([0, 0, 1, 1, 1]), 2).shape
    (2, 8)
    """

    def __init__(self, gate_nn: Callable, *, nn: Callable | None = None):
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
        gate_nn, nn = (None if k not in w else sequential(w[k], activation, param_dtype) for k in ("gate_nn", "nn"))
        return cls(gate_nn, nn=nn)


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

    def __init__(self, num_features: int, *, eps: float = 1e-5, dtype=None, param_dtype=jnp.float32):
        check_layer(self, locals())
        f = (num_features,)
        self.weight = nnx.Param(jnp.ones(f, param_dtype))
        self.bias = nnx.Param(jnp.zeros(f, param_dtype))
        self.mean_scale = nnx.Param(jnp.ones(f, param_dtype))
        self.eps, self.dtype = eps, dtype

    def __call__(self, x, batch=None, size=None):
        x, w, b, a = promote(self.dtype, x, self.weight[...], self.bias[...], self.mean_scale[...])
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
        return load_variables(cls(w["weight"].shape[0], eps=eps, dtype=dtype, param_dtype=param_dtype), {"params": w})
