"""The attention layers as equinox modules: ``GATConv``, ``GATv2Conv`` and ``TransformerConv``, with ``from_pyg``
class methods. The math: :mod:`jaxgraphops.nn._attention`.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp

from ...graph import Graph
from .._attention import (check_output_width, gat_conv, gat_weights_from_pyg, gatv2_conv, gatv2_weights_from_pyg,
                          transformer_conv, transformer_weights_from_pyg)
from .._common import check_layer, in_sizes
from ._common import kernel, load

__all__ = ["GATConv", "GATv2Conv", "TransformerConv"]


class _Attention(eqx.Module):
    """The options an attention layer keeps (static fields, set by :func:`_setup`)."""

    heads: int = eqx.field(static=True)
    concat: bool = eqx.field(static=True)
    dropout: float = eqx.field(static=True)
    inference: bool = eqx.field(static=True)


class _GATFamily(_Attention):
    """The options :class:`GATConv` and :class:`GATv2Conv` keep besides :class:`_Attention`'s."""

    negative_slope: float = eqx.field(static=True)
    add_self_loops: bool = eqx.field(static=True)
    fill_value: str | float = eqx.field(static=True)


class GATConv(_GATFamily):
    """Graph attention (PyG's ``GATConv``) on :func:`jaxgraphops.mha_gat`: the linen
    :class:`jaxgraphops.nn.flax.GATConv` (its math, PyG's self-loop handling and ``fill_value``) as an equinox
    module. Attention dropout (PyG's ``dropout``) runs inside the fused kernels, as equinox's ``nn.Dropout``:
    with ``dropout`` > 0 and not ``inference`` (a field, or the call's argument) the call needs ``key``.

    Fields as PyG's parameters: ``lin`` (``[H*C, in]``, no bias; None for a pair
    ``in_features``, which uses ``lin_src`` and ``lin_dst``), ``att_src``, ``att_dst [1, H, C]``,
    ``lin_edge`` and ``att_edge`` (with ``edge_dim``), ``res`` (``[H*C, F_dst]``, ``[C, F_dst]``
    if not ``concat``; with ``residual``), ``bias`` ``[H*C]`` (``[C]`` if not ``concat``; zeros at
    first; None without ``use_bias``).

    **Arguments:**

    - ``in_features``: ``F`` (one ``lin`` for sources and destinations), or ``(F_src, F_dst)``
      (``lin_src`` and ``lin_dst``).
    - ``out_features``: ``C``, output features per head.
    - ``heads``: ``H``.
    - ``concat``: concatenate the heads, else average them.
    - ``negative_slope``: of the LeakyReLU on the logits.
    - ``add_self_loops``: PyG's self-loop handling above.
    - ``edge_dim``: edge-attribute size (None: no edge features).
    - ``fill_value``: ``"mean"`` or a number, the added loops' edge attributes.
    - ``use_bias``: add ``bias`` (PyG's ``bias``).
    - ``residual``: add ``res(x_dst)`` (PyG's ``residual``).
    - ``dropout``: the attention dropout rate, in ``[0, 1)``.
    - ``inference``: no dropout (a static field, so that ``jax.grad`` takes the layer as it is:
      ``eqx.nn.inference_mode`` does not reach it; pass ``inference=True`` to the call instead).
    - ``key``: PRNG key for the initial weights (glorot for the attention vectors).

    Call ``layer(g, x, edge_attr=None, return_attention_weights=False, *, key=None, inference=None)``:
    ``key`` draws the dropout mask; ``x`` is ``[n_src, F]`` for a square graph, or a pair
    ``(x_src, x_dst)``; ``edge_attr [n_edges, edge_dim]``. Returns
    ``out``, or ``(out, alpha)`` with ``alpha [n_edges + m, H]``: the weights of ``g``'s edges
    in input order (0 for a self loop of ``g`` that ``add_self_loops`` removed), then those of
    the ``m`` added loops in node order; with dropout, the weights after dropout.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = GATConv(4, 8, heads=2, key=jax.random.key(0))
    >>> layer(g, jnp.ones((3, 4))).shape
    (3, 16)
    """

    lin: eqx.nn.Linear | None
    lin_src: eqx.nn.Linear | None
    lin_dst: eqx.nn.Linear | None
    att_src: jax.Array
    att_dst: jax.Array
    lin_edge: eqx.nn.Linear | None
    att_edge: jax.Array | None
    res: eqx.nn.Linear | None
    bias: jax.Array | None

    def __init__(self, in_features: int | tuple[int, int], out_features: int, *, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value: str | float = "mean", use_bias: bool = True, residual: bool = False,
                 dropout: float = 0.0, inference: bool = False, key: jax.Array):
        _setup(self, locals())
        width = heads * out_features
        keys = jax.random.split(key, 7)
        if isinstance(in_features, tuple):
            self.lin = None
            self.lin_src = eqx.nn.Linear(in_features[0], width, use_bias=False, key=keys[0])
            self.lin_dst = eqx.nn.Linear(in_features[1], width, use_bias=False, key=keys[1])
        else:
            self.lin = eqx.nn.Linear(in_features, width, use_bias=False, key=keys[0])
            self.lin_src = self.lin_dst = None
        glorot = jax.nn.initializers.glorot_uniform()
        self.att_src = glorot(keys[2], (1, heads, out_features))
        self.att_dst = glorot(keys[3], (1, heads, out_features))
        if edge_dim is None:
            self.lin_edge = self.att_edge = None
        else:
            self.lin_edge = eqx.nn.Linear(edge_dim, width, use_bias=False, key=keys[4])
            self.att_edge = glorot(keys[5], (1, heads, out_features))
        self.res, self.bias = _output_params(in_features, width if concat else out_features, residual, use_bias,
                                             keys[6])

    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False, *, key=None,
                 inference: bool | None = None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, None)
        if self.lin is not None:
            src_kernel = dst_kernel = self.lin.weight.T
        else:
            src_kernel, dst_kernel = self.lin_src.weight.T, self.lin_dst.weight.T
        return gat_conv(g, x_src, x_dst, src_kernel, dst_kernel, self.att_src, self.att_dst, self.bias,
                        concat=self.concat, negative_slope=self.negative_slope, add_loops=self.add_self_loops,
                        edge_attr=edge_attr, edge_kernel=kernel(self.lin_edge), att_edge=self.att_edge,
                        fill_value=self.fill_value, return_attention=return_attention_weights,
                        res_kernel=kernel(self.res), **_attention_dropout(self, "GATConv", key, inference))

    @classmethod
    def from_pyg(cls, state_dict, *, concat: bool = True, negative_slope: float = 0.2, add_self_loops: bool = True,
                 fill_value: str | float = "mean") -> GATConv:
        """The layer with the weights of a PyG ``GATConv.state_dict()`` (tensors or numpy arrays).

        Sizes, heads, a pair ``in_channels`` (``lin_src``/``lin_dst``), ``edge_dim``, ``residual``
        and ``bias`` follow from the entries; give PyG's ``concat``, ``negative_slope``,
        ``add_self_loops`` and ``fill_value``.

        >>> import numpy as np
        >>> sd = {"lin.weight": np.ones((8, 4)), "att_src": np.ones((1, 2, 4)), "att_dst": np.ones((1, 2, 4))}
        >>> layer = GATConv.from_pyg(sd)
        >>> layer.lin.weight.shape, layer.heads, layer.bias is None
        ((8, 4), 2, True)
        """
        w = gat_weights_from_pyg("GATConv.from_pyg", state_dict)
        _, heads, out_features = w["att_src"].shape
        in_features = (w["kernel"].shape[0] if "kernel" in w
                       else (w["src_kernel"].shape[0], w["dst_kernel"].shape[0]))
        edge_dim = w["edge_kernel"].shape[0] if "edge_kernel" in w else None
        check_output_width("GATConv.from_pyg", w, heads, out_features, concat)
        layer = cls(in_features, out_features, heads=heads, concat=concat, negative_slope=negative_slope,
                    add_self_loops=add_self_loops, edge_dim=edge_dim, fill_value=fill_value, use_bias="bias" in w,
                    residual="res_kernel" in w, key=jax.random.key(0))
        fields = {"kernel": lambda m: m.lin.weight, "src_kernel": lambda m: m.lin_src.weight,
                  "dst_kernel": lambda m: m.lin_dst.weight, "edge_kernel": lambda m: m.lin_edge.weight,
                  "att_src": lambda m: m.att_src, "att_dst": lambda m: m.att_dst, "att_edge": lambda m: m.att_edge,
                  "res_kernel": lambda m: m.res.weight, "bias": lambda m: m.bias}
        return load(layer, fields, w)


def _setup(layer: _Attention, args: dict) -> tuple[int, int]:
    """Checks an attention layer's constructor arguments ``args`` (its ``locals()``), sets its static fields from
    them and returns ``(F_src, F_dst)``."""
    check_layer(layer, args, skip=("in_features",))
    for field in dataclasses.fields(layer):
        if field.metadata.get("static"):
            setattr(layer, field.name, args[field.name])
    return in_sizes(type(layer).__name__, args["in_features"])


def _attention_dropout(layer, name: str, key, inference) -> dict:
    """The ``dropout`` and ``dropout_key`` of an attention layer's call (none in inference)."""
    if layer.dropout == 0.0 or (layer.inference if inference is None else inference):
        return {}
    if key is None:
        raise ValueError(f"{name}: key is required for attention dropout (dropout={layer.dropout}) outside "
                         f"inference; pass key=..., or inference=True")
    return {"dropout": layer.dropout, "dropout_key": key}


def _output_params(in_features, out: int, residual: bool, use_bias: bool, key):
    """``(res, bias)`` of an attention layer: PyG's residual ``Linear(F_dst, out)`` and zero bias."""
    in_dst = in_features[1] if isinstance(in_features, tuple) else in_features
    res = eqx.nn.Linear(in_dst, out, use_bias=False, key=key) if residual else None
    return res, (jnp.zeros(out) if use_bias else None)


class GATv2Conv(_GATFamily):
    """Graph attention v2 (PyG's ``GATv2Conv``) on :func:`jaxgraphops.mha_gat_v2`.

    ``x_l = W_l x_src + b_l``, ``x_r = W_r x_dst + b_r`` (``[n, H*C]``); per head ``alpha_ji =
    softmax_j <a, leaky_relu(x_l[j] + x_r[i] (+ W_e e_ji))>`` over the incoming edges of ``i``;
    ``out_i = sum_j alpha_ji x_l[j]``, heads concatenated (``[n_dst, H*C]``) or averaged
    (``[n_dst, C]``), plus the residual and ``bias``. Self loops and ``fill_value`` as in
    :class:`GATConv`, and so is attention dropout (``dropout``, ``inference``).

    Fields as PyG's parameters: ``lin_l``, ``lin_r`` (``[H*C, in]`` with biases if ``use_bias``;
    ``lin_r`` None with ``share_weights``: ``lin_l`` serves both), ``att [1, H, C]``,
    ``lin_edge`` (with ``edge_dim``), ``res`` (with ``residual``), ``bias``.

    **Arguments:** ``in_features`` (``F`` or ``(F_src, F_dst)``), ``out_features`` (``C``),
    ``heads``, ``concat``, ``negative_slope``, ``add_self_loops``, ``edge_dim``, ``fill_value``,
    ``use_bias`` (PyG's ``bias``), ``share_weights``, ``residual``, ``dropout``: PyG's options;
    ``inference``, ``key`` as in :class:`GATConv`.

    Call ``layer(g, x, edge_attr=None, return_attention_weights=False, *, key=None, inference=None)`` as
    :class:`GATConv`.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = GATv2Conv(4, 8, heads=2, key=jax.random.key(0))
    >>> layer(g, jnp.ones((3, 4))).shape
    (3, 16)
    """

    lin_l: eqx.nn.Linear
    lin_r: eqx.nn.Linear | None
    att: jax.Array
    lin_edge: eqx.nn.Linear | None
    res: eqx.nn.Linear | None
    bias: jax.Array | None

    def __init__(self, in_features: int | tuple[int, int], out_features: int, *, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value: str | float = "mean", use_bias: bool = True, share_weights: bool = False,
                 residual: bool = False, dropout: float = 0.0, inference: bool = False, key: jax.Array):
        in_src, in_dst = _setup(self, locals())
        width = heads * out_features
        keys = jax.random.split(key, 5)
        self.lin_l = eqx.nn.Linear(in_src, width, use_bias=use_bias, key=keys[0])
        self.lin_r = None if share_weights else eqx.nn.Linear(in_dst, width, use_bias=use_bias, key=keys[1])
        self.att = jax.nn.initializers.glorot_uniform()(keys[2], (1, heads, out_features))
        self.lin_edge = None if edge_dim is None else eqx.nn.Linear(edge_dim, width, use_bias=False, key=keys[3])
        self.res, self.bias = _output_params(in_features, width if concat else out_features, residual, use_bias,
                                             keys[4])

    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False, *, key=None,
                 inference: bool | None = None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, None)
        lin_r = self.lin_l if self.lin_r is None else self.lin_r
        return gatv2_conv(g, x_src, x_dst, self.lin_l.weight.T, self.lin_l.bias, lin_r.weight.T, lin_r.bias,
                          self.att, self.bias, concat=self.concat, negative_slope=self.negative_slope,
                          add_loops=self.add_self_loops, edge_attr=edge_attr, edge_kernel=kernel(self.lin_edge),
                          fill_value=self.fill_value, return_attention=return_attention_weights,
                          res_kernel=kernel(self.res), **_attention_dropout(self, "GATv2Conv", key, inference))

    @classmethod
    def from_pyg(cls, state_dict, *, concat: bool = True, negative_slope: float = 0.2, add_self_loops: bool = True,
                 fill_value: str | float = "mean", share_weights: bool = False) -> GATv2Conv:
        """The layer with the weights of a PyG ``GATv2Conv.state_dict()`` (tensors or numpy arrays).

        Sizes, heads, ``edge_dim``, ``residual`` and ``bias`` follow from the entries; give PyG's
        ``concat``, ``negative_slope``, ``add_self_loops``, ``fill_value`` and ``share_weights``.

        >>> import numpy as np
        >>> sd = {"lin_l.weight": np.ones((8, 4)), "lin_r.weight": np.ones((8, 5)), "att": np.ones((1, 2, 4))}
        >>> layer = GATv2Conv.from_pyg(sd)
        >>> layer.lin_r.weight.shape, layer.heads, layer.bias is None
        ((8, 5), 2, True)
        """
        fn = "GATv2Conv.from_pyg"
        w = gatv2_weights_from_pyg(fn, state_dict, share_weights=share_weights)
        _, heads, out_features = w["att"].shape
        src = w["kernel" if share_weights else "src_kernel"]
        in_features = src.shape[0] if share_weights else (src.shape[0], w["dst_kernel"].shape[0])
        edge_dim = w["edge_kernel"].shape[0] if "edge_kernel" in w else None
        check_output_width(fn, w, heads, out_features, concat)
        use_bias = ("kernel_bias" if share_weights else "src_bias") in w
        if use_bias != ("bias" in w):
            raise ValueError(f"{fn}: the linear layers' biases and 'bias' must both be present or both absent "
                             f"(PyG's bias)")
        layer = cls(in_features, out_features, heads=heads, concat=concat, negative_slope=negative_slope,
                    add_self_loops=add_self_loops, edge_dim=edge_dim, fill_value=fill_value, use_bias=use_bias,
                    share_weights=share_weights, residual="res_kernel" in w, key=jax.random.key(0))
        fields = {"kernel": lambda m: m.lin_l.weight, "kernel_bias": lambda m: m.lin_l.bias,
                  "src_kernel": lambda m: m.lin_l.weight, "src_bias": lambda m: m.lin_l.bias,
                  "dst_kernel": lambda m: m.lin_r.weight, "dst_bias": lambda m: m.lin_r.bias,
                  "att": lambda m: m.att, "edge_kernel": lambda m: m.lin_edge.weight,
                  "res_kernel": lambda m: m.res.weight, "bias": lambda m: m.bias}
        return load(layer, fields, w)


class TransformerConv(_Attention):
    """Graph transformer attention (PyG's ``TransformerConv``) on :func:`jaxgraphops.mha_simple`.

    ``q = W_q x_dst + b_q``, ``k = W_k x_src + b_k``, ``v = W_v x_src + b_v`` (``[n, H*C]``); per head
    ``alpha_ij = softmax_j <q_i, k_j (+ W_e e_ij)> / sqrt(C)`` over the incoming edges of ``i`` and
    ``out_i = sum_j alpha_ij (v_j (+ W_e e_ij))``, heads concatenated (``[n_dst, H*C]``) or averaged
    (``[n_dst, C]``); with ``root_weight`` plus ``W_skip x_i + b_skip``, or with ``beta`` the gate
    ``b x_r + (1 - b) out``, ``b = sigmoid(W_beta [out, x_r, out - x_r])``. No self loops are added
    (as in PyG). Attention dropout (``dropout``, ``inference``) as in :class:`GATConv` (``alpha`` is
    returned after dropout, where PyG returns it before).

    Fields as PyG's parameters: ``lin_query``, ``lin_key``, ``lin_value`` (biases with
    ``use_bias``), ``lin_edge`` (with ``edge_dim``, no bias), ``lin_skip`` (with ``root_weight``),
    ``lin_beta`` (with ``beta``, no bias).

    **Arguments:** ``in_features`` (``F`` or ``(F_src, F_dst)``), ``out_features`` (``C``),
    ``heads``, ``concat``, ``beta``, ``edge_dim``, ``use_bias`` (PyG's ``bias``), ``root_weight``,
    ``dropout``: PyG's options; ``inference``, ``key``.

    Call ``layer(g, x, edge_attr=None, return_attention_weights=False, *, key=None, inference=None)``:
    ``x`` is ``[n_src, F]`` for a square graph, or a pair ``(x_src, x_dst)``; returns ``out`` or
    ``(out, alpha [n_edges, H])``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = TransformerConv(4, 8, heads=2, key=jax.random.key(0))
    >>> layer(g, jnp.ones((3, 4))).shape
    (3, 16)
    """

    lin_query: eqx.nn.Linear
    lin_key: eqx.nn.Linear
    lin_value: eqx.nn.Linear
    lin_edge: eqx.nn.Linear | None
    lin_skip: eqx.nn.Linear | None
    lin_beta: eqx.nn.Linear | None

    def __init__(self, in_features: int | tuple[int, int], out_features: int, *, heads: int = 1, concat: bool = True,
                 beta: bool = False, edge_dim: int | None = None, use_bias: bool = True, root_weight: bool = True,
                 dropout: float = 0.0, inference: bool = False, key: jax.Array):
        in_src, in_dst = _setup(self, locals())
        width = heads * out_features
        out = width if concat else out_features
        keys = jax.random.split(key, 6)
        self.lin_query = eqx.nn.Linear(in_dst, width, use_bias=use_bias, key=keys[0])
        self.lin_key = eqx.nn.Linear(in_src, width, use_bias=use_bias, key=keys[1])
        self.lin_value = eqx.nn.Linear(in_src, width, use_bias=use_bias, key=keys[2])
        self.lin_edge = None if edge_dim is None else eqx.nn.Linear(edge_dim, width, use_bias=False, key=keys[3])
        self.lin_skip = eqx.nn.Linear(in_dst, out, use_bias=use_bias, key=keys[4]) if root_weight else None
        self.lin_beta = (eqx.nn.Linear(3 * out, 1, use_bias=False, key=keys[5]) if root_weight and beta else None)

    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False, *, key=None,
                 inference: bool | None = None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, None)
        w = {}
        for name in ("query", "key", "value", "edge", "skip", "beta"):
            lin = getattr(self, f"lin_{name}")
            if lin is not None:
                w[f"{name}_kernel"] = lin.weight.T
                if lin.bias is not None:
                    w[f"{name}_bias"] = lin.bias
        return transformer_conv(g, x_src, x_dst, w, heads=self.heads, concat=self.concat, edge_attr=edge_attr,
                                return_attention=return_attention_weights,
                                **_attention_dropout(self, "TransformerConv", key, inference))

    @classmethod
    def from_pyg(cls, state_dict, *, heads: int, concat: bool = True, root_weight: bool = True) -> TransformerConv:
        """The layer with the weights of a PyG ``TransformerConv.state_dict()`` (tensors or numpy arrays).

        Give PyG's ``heads``, ``concat`` and ``root_weight``; sizes, ``edge_dim``, ``beta`` and
        ``bias`` follow from the entries.

        >>> import numpy as np
        >>> sd = {f"lin_{n}.weight": np.ones((8, 4)) for n in ("query", "key", "value", "skip")}
        >>> layer = TransformerConv.from_pyg(sd, heads=2)
        >>> layer.lin_query.weight.shape, layer.lin_beta is None
        ((8, 4), True)
        """
        w = transformer_weights_from_pyg("TransformerConv.from_pyg", state_dict, heads=heads, concat=concat,
                                         root_weight=root_weight)
        width, in_dst = w["query_kernel"].shape[1], w["query_kernel"].shape[0]
        layer = cls((w["key_kernel"].shape[0], in_dst), width // heads, heads=heads, concat=concat,
                    beta="beta_kernel" in w,
                    edge_dim=w["edge_kernel"].shape[0] if "edge_kernel" in w else None,
                    use_bias="query_bias" in w, root_weight=root_weight, key=jax.random.key(0))
        fields = {}
        for n in ("query", "key", "value", "edge", "skip", "beta"):
            fields[f"{n}_kernel"] = lambda m, n=n: getattr(m, f"lin_{n}").weight
            fields[f"{n}_bias"] = lambda m, n=n: getattr(m, f"lin_{n}").bias
        return load(layer, fields, w)
