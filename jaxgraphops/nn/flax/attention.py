"""The attention layers as ``flax.linen`` modules: ``GATConv``, ``GATv2Conv``, ``TransformerConv``, and their
PyG weight loaders (``from_pyg_gat``, ``from_pyg_gatv2``, ``from_pyg_transformer``). The math:
:mod:`jaxgraphops.nn._attention`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn

from ...graph import Graph
from .._attention import (gat_conv, gat_weights_from_pyg, gatv2_conv, gatv2_weights_from_pyg, transformer_conv,
                          transformer_weights_from_pyg)
from ._common import Initializer, ParamLayer, promote

__all__ = ["GATConv", "GATv2Conv", "TransformerConv", "from_pyg_gat", "from_pyg_gatv2", "from_pyg_transformer"]


class _Attention(ParamLayer):
    """The fields every attention layer has (PyG's options of the same names; ``deterministic`` as
    ``flax.linen.Dropout``'s)."""

    features: int
    _: dataclasses.KW_ONLY
    heads: int = 1
    concat: bool = True
    edge_dim: int | None = None
    use_bias: bool = True
    dropout: float = 0.0
    deterministic: bool | None = None
    bias_init: Initializer = nn.initializers.zeros_init()


class _GATFamily(_Attention):
    """The fields of :class:`GATConv` and :class:`GATv2Conv` besides :class:`_Attention`'s."""

    _: dataclasses.KW_ONLY
    negative_slope: float = 0.2
    add_self_loops: bool = True
    fill_value: Any = "mean"
    share_weights: bool = True
    residual: bool = False
    kernel_init: Initializer = nn.initializers.glorot_uniform()


class GATConv(_GATFamily):
    """Graph attention (PyG's ``GATConv``) on :func:`jaxgraphops.mha_gat`.

    ``h = x W`` (``[n, H*C]``); per head ``alpha_ji = softmax_j leaky_relu(<a_src, h_j> + <a_dst, h_i>
    (+ <a_edge, W_e e_ji>))`` over the incoming edges of ``i``; ``out_i = sum_j alpha_ji h_j``,
    heads concatenated (``[n_dst, H*C]``) or averaged (``[n_dst, C]``), plus ``bias``.
    With ``add_self_loops`` the graph is PyG's: existing self loops removed, one loop ``i -> i``
    added for every ``i < min(n_src, n_dst)``, whose edge attributes are ``fill_value``
    (``"mean"``: the mean of the node's incoming edge attributes, 0 without any; or a number).
    Attention dropout (PyG's ``dropout``) runs inside the fused kernels, as flax's ``nn.Dropout``:
    with ``dropout`` > 0 and ``deterministic`` False (an attribute or a call argument) the mask's key
    comes from ``make_rng("dropout")`` (``apply(..., rngs={"dropout": key})``).

    Params: ``kernel [F, H*C]`` (PyG's ``lin``; with ``share_weights=False`` ``src_kernel [F_src,
    H*C]`` and ``dst_kernel [F_dst, H*C]``, PyG's ``lin_src``/``lin_dst`` for a pair
    ``in_channels``), ``att_src``, ``att_dst [1, H, C]``, with ``edge_dim`` ``edge_kernel
    [edge_dim, H*C]`` and ``att_edge [1, H, C]``, and ``bias`` ``[H*C]`` (``[C]`` if not
    ``concat``) if ``use_bias``, ``res_kernel [F_dst, H*C]`` (``[F_dst, C]``) if ``residual``.
    :func:`from_pyg_gat` loads PyG's weights.

    Attributes:
      features: ``C``, output features per head.
      heads: ``H``.
      concat: concatenate the heads, else average them.
      negative_slope: of the LeakyReLU on the logits.
      add_self_loops: PyG's self-loop handling above.
      edge_dim: edge-attribute size (None: no edge features).
      fill_value: ``"mean"`` or a number, the added loops' edge attributes.
      use_bias: add ``bias`` (PyG's ``bias``).
      share_weights: one ``kernel`` for sources and destinations (PyG's int ``in_channels``).
      residual: add ``x_dst @ res_kernel`` (PyG's ``residual``).
      dropout: the attention dropout rate, in ``[0, 1)``.
      deterministic: no dropout (None: the call's ``deterministic`` decides).

    Call ``layer(g, x, edge_attr=None, return_attention_weights=False, deterministic=None)``: ``x`` is
    ``[n_src, F]`` for a square graph, or a pair ``(x_src, x_dst)``; ``edge_attr [n_edges, edge_dim]``.
    Returns ``out``, or ``(out, alpha)`` with ``alpha [n_edges + m, H]``: the weights of ``g``'s edges
    in input order (0 for a self loop of ``g`` that ``add_self_loops`` removed), then those of
    the ``m`` added loops in node order (PyG's order of edges after its loop handling, with the
    removed loops in place); with dropout, the weights after dropout.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> x = jnp.ones((3, 4))
    >>> layer = GATConv(8, heads=2)
    >>> variables = layer.init(jax.random.key(0), g, x)
    >>> out, alpha = layer.apply(variables, g, x, return_attention_weights=True)
    >>> out.shape, alpha.shape
    ((3, 16), (6, 2))
    """

    _: dataclasses.KW_ONLY  # no fields of its own: keeps linen's parent and name keyword-only

    @nn.compact
    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False,
                 deterministic: bool | None = None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, None)
        width = self.heads * self.features
        if self.share_weights:
            src_kernel = dst_kernel = self.param("kernel", self.kernel_init, (x_src.shape[-1], width),
                                                 self.param_dtype)
        else:
            src_kernel = self.param("src_kernel", self.kernel_init, (x_src.shape[-1], width), self.param_dtype)
            dst_kernel = self.param("dst_kernel", self.kernel_init,
                                    ((x_src if x_dst is None else x_dst).shape[-1], width), self.param_dtype)
        att_shape = (1, self.heads, self.features)
        att_src = self.param("att_src", self.kernel_init, att_shape, self.param_dtype)
        att_dst = self.param("att_dst", self.kernel_init, att_shape, self.param_dtype)
        edge_kernel = att_edge = None
        if self.edge_dim is not None:
            edge_kernel = self.param("edge_kernel", self.kernel_init, (self.edge_dim, width), self.param_dtype)
            att_edge = self.param("att_edge", self.kernel_init, att_shape, self.param_dtype)
        bias, res_kernel = _output_params(self, x_src if x_dst is None else x_dst, width)
        (x_src, x_dst, edge_attr, src_kernel, dst_kernel, att_src, att_dst, bias, edge_kernel, att_edge,
         res_kernel) = promote(self.dtype, x_src, x_dst, edge_attr, src_kernel, dst_kernel, att_src, att_dst, bias,
                                edge_kernel, att_edge, res_kernel)
        return gat_conv(g, x_src, x_dst, src_kernel, dst_kernel, att_src, att_dst, bias, concat=self.concat,
                        negative_slope=self.negative_slope, add_loops=self.add_self_loops, edge_attr=edge_attr,
                        edge_kernel=edge_kernel, att_edge=att_edge, fill_value=self.fill_value,
                        return_attention=return_attention_weights, res_kernel=res_kernel,
                        **_attention_dropout(self, deterministic))


def from_pyg_gat(state_dict) -> dict:
    """Variables for :class:`GATConv` from a PyG ``GATConv.state_dict()`` (tensors or numpy arrays).

    Reads ``lin.weight`` (or ``lin_src.weight`` and ``lin_dst.weight``: build the layer with
    ``share_weights=False``), ``att_src``, ``att_dst``, ``lin_edge.weight`` and ``att_edge`` (with
    PyG's ``edge_dim``), ``res.weight`` (with ``residual``) and ``bias``; build the flax layer with
    the same ``heads``, ``concat``, ``negative_slope``, ``add_self_loops``, ``edge_dim``,
    ``residual`` and ``bias``.

    >>> import numpy as np
    >>> sd = {"lin.weight": np.ones((8, 4)), "att_src": np.ones((1, 2, 4)), "att_dst": np.ones((1, 2, 4)),
    ...       "bias": np.zeros(8)}
    >>> from_pyg_gat(sd)["params"]["kernel"].shape
    (4, 8)
    """
    return {"params": gat_weights_from_pyg("from_pyg_gat", state_dict)}


def _attention_dropout(layer: nn.Module, deterministic) -> dict:
    """The ``dropout`` and ``dropout_key`` of an attention layer's call (none when it is deterministic)."""
    rate = float(layer.dropout)
    if rate == 0.0 or nn.merge_param("deterministic", layer.deterministic, deterministic):
        return {}
    return {"dropout": rate, "dropout_key": layer.make_rng("dropout")}


def _output_params(layer: nn.Module, x_dst, width: int):
    """The ``bias`` and ``res_kernel`` params of an attention layer (None when not used)."""
    out = width if layer.concat else layer.features
    bias = layer.param("bias", layer.bias_init, (out,), layer.param_dtype) if layer.use_bias else None
    res = (layer.param("res_kernel", layer.kernel_init, (x_dst.shape[-1], out), layer.param_dtype)
           if layer.residual else None)
    return bias, res


class GATv2Conv(_GATFamily):
    """Graph attention v2 (PyG's ``GATv2Conv``) on :func:`jaxgraphops.mha_gat_v2`.

    ``x_l = x_src W_l + b_l``, ``x_r = x_dst W_r + b_r`` (``[n, H*C]``); per head ``alpha_ji =
    softmax_j <a, leaky_relu(x_l[j] + x_r[i] (+ W_e e_ji))>`` over the incoming edges of ``i``;
    ``out_i = sum_j alpha_ji x_l[j]``, heads concatenated (``[n_dst, H*C]``) or averaged
    (``[n_dst, C]``), plus the residual and ``bias``. Self loops and ``fill_value`` as in
    :class:`GATConv`, and so is attention dropout (``dropout``, ``deterministic``).

    Params: ``src_kernel [F_src, H*C]``, ``src_bias [H*C]``, ``dst_kernel [F_dst, H*C]``,
    ``dst_bias [H*C]`` (PyG's ``lin_l``/``lin_r``; with ``share_weights`` one ``kernel`` and
    ``kernel_bias``; the biases only with ``use_bias``), ``att [1, H, C]``, ``edge_kernel
    [edge_dim, H*C]`` with ``edge_dim``, ``res_kernel [F_dst, H*C]`` (``[F_dst, C]`` if not
    ``concat``) with ``residual``, ``bias [H*C]`` (``[C]``) with ``use_bias``.
    :func:`from_pyg_gatv2` loads PyG's weights.

    Attributes: ``features`` (``C``), ``heads``, ``concat``, ``negative_slope``,
    ``add_self_loops``, ``edge_dim``, ``fill_value``, ``use_bias``, ``share_weights``,
    ``residual``, ``dropout``: PyG's options of the same names (``use_bias`` is PyG's ``bias``);
    ``deterministic`` as in :class:`GATConv`.

    Call ``layer(g, x, edge_attr=None, return_attention_weights=False, deterministic=None)`` as
    :class:`GATConv`.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> x = jnp.ones((3, 4))
    >>> layer = GATv2Conv(8, heads=2, edge_dim=3)
    >>> variables = layer.init(jax.random.key(0), g, x, jnp.ones((3, 3)))
    >>> layer.apply(variables, g, x, jnp.ones((3, 3))).shape
    (3, 16)
    """

    _: dataclasses.KW_ONLY
    share_weights: bool = False

    @nn.compact
    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False,
                 deterministic: bool | None = None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, None)
        width = self.heads * self.features

        def linear(kernel_name, bias_name, n_in):
            kernel = self.param(kernel_name, self.kernel_init, (n_in, width), self.param_dtype)
            bias = self.param(bias_name, self.bias_init, (width,), self.param_dtype) if self.use_bias else None
            return kernel, bias

        if self.share_weights:
            src_kernel, src_bias = linear("kernel", "kernel_bias", x_src.shape[-1])
            dst_kernel, dst_bias = src_kernel, src_bias
        else:
            src_kernel, src_bias = linear("src_kernel", "src_bias", x_src.shape[-1])
            dst_kernel, dst_bias = linear("dst_kernel", "dst_bias", (x_src if x_dst is None else x_dst).shape[-1])
        att = self.param("att", self.kernel_init, (1, self.heads, self.features), self.param_dtype)
        edge_kernel = (None if self.edge_dim is None else
                       self.param("edge_kernel", self.kernel_init, (self.edge_dim, width), self.param_dtype))
        bias, res_kernel = _output_params(self, x_src if x_dst is None else x_dst, width)
        (x_src, x_dst, edge_attr, src_kernel, src_bias, dst_kernel, dst_bias, att, bias, edge_kernel,
         res_kernel) = promote(self.dtype, x_src, x_dst, edge_attr, src_kernel, src_bias, dst_kernel, dst_bias, att,
                                bias, edge_kernel, res_kernel)
        return gatv2_conv(g, x_src, x_dst, src_kernel, src_bias, dst_kernel, dst_bias, att, bias,
                          concat=self.concat, negative_slope=self.negative_slope, add_loops=self.add_self_loops,
                          edge_attr=edge_attr, edge_kernel=edge_kernel, fill_value=self.fill_value,
                          return_attention=return_attention_weights, res_kernel=res_kernel,
                          **_attention_dropout(self, deterministic))


def from_pyg_gatv2(state_dict, *, share_weights: bool = False) -> dict:
    """Variables for :class:`GATv2Conv` from a PyG ``GATv2Conv.state_dict()`` (tensors or numpy arrays).

    Reads ``lin_l.*``, ``lin_r.*``, ``att``, ``lin_edge.weight`` (with ``edge_dim``),
    ``res.weight`` (with ``residual``) and ``bias``; build the flax layer with PyG's options
    (``share_weights`` here and in the layer as in PyG).

    >>> import numpy as np
    >>> lin = {"lin_l.weight": np.ones((8, 4)), "lin_r.weight": np.ones((8, 4))}
    >>> from_pyg_gatv2({**lin, "att": np.ones((1, 2, 4))}, share_weights=True)["params"]["kernel"].shape
    (4, 8)
    """
    return {"params": gatv2_weights_from_pyg("from_pyg_gatv2", state_dict, share_weights=share_weights)}


class TransformerConv(_Attention):
    """Graph transformer attention (PyG's ``TransformerConv``) on :func:`jaxgraphops.mha_simple`.

    ``q = x_dst W_q + b_q``, ``k = x_src W_k + b_k``, ``v = x_src W_v + b_v`` (``[n, H*C]``); per head
    ``alpha_ij = softmax_j <q_i, k_j (+ W_e e_ij)> / sqrt(C)`` over the incoming edges of ``i`` and
    ``out_i = sum_j alpha_ij (v_j (+ W_e e_ij))``, heads concatenated (``[n_dst, H*C]``) or averaged
    (``[n_dst, C]``); with ``root_weight`` plus ``x_i W_skip + b_skip``, or with ``beta`` the gate
    ``b x_r + (1 - b) out``, ``b = sigmoid([out, x_r, out - x_r] W_beta)``. No self loops are added
    (as in PyG). Attention dropout (``dropout``, ``deterministic``) as in :class:`GATConv` (``alpha`` is
    returned after dropout, where PyG returns it before).

    Params: ``query_kernel [F_dst, H*C]``, ``key_kernel``, ``value_kernel [F_src, H*C]`` and
    their ``*_bias [H*C]`` (with ``use_bias``), ``edge_kernel [edge_dim, H*C]`` (with
    ``edge_dim``), ``skip_kernel [F_dst, H*C or C]`` and ``skip_bias`` (with ``root_weight``),
    ``beta_kernel [3 * (H*C or C), 1]`` (with ``beta``). :func:`from_pyg_transformer` loads PyG's weights.

    Attributes: ``features`` (``C``), ``heads``, ``concat``, ``beta``, ``edge_dim``, ``use_bias``
    (PyG's ``bias``), ``root_weight``, ``dropout``: PyG's options; ``deterministic``.

    Call ``layer(g, x, edge_attr=None, return_attention_weights=False, deterministic=None)``: ``x`` is
    ``[n_src, F]`` for a square graph, or a pair ``(x_src, x_dst)``; returns ``out`` or
    ``(out, alpha [n_edges, H])``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> x = jnp.ones((3, 4))
    >>> layer = TransformerConv(8, heads=2, beta=True)
    >>> variables = layer.init(jax.random.key(0), g, x)
    >>> layer.apply(variables, g, x).shape
    (3, 16)
    """

    _: dataclasses.KW_ONLY
    beta: bool = False
    root_weight: bool = True
    kernel_init: Initializer = nn.initializers.lecun_normal()

    @nn.compact
    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False,
                 deterministic: bool | None = None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, None)
        in_dst = (x_src if x_dst is None else x_dst).shape[-1]
        width = self.heads * self.features
        out = width if self.concat else self.features
        w = {}

        def dense(name, n_in, n_out, bias):
            w[f"{name}_kernel"] = self.param(f"{name}_kernel", self.kernel_init, (n_in, n_out), self.param_dtype)
            if bias:
                w[f"{name}_bias"] = self.param(f"{name}_bias", self.bias_init, (n_out,), self.param_dtype)

        dense("query", in_dst, width, self.use_bias)
        dense("key", x_src.shape[-1], width, self.use_bias)
        dense("value", x_src.shape[-1], width, self.use_bias)
        if self.edge_dim is not None:
            dense("edge", self.edge_dim, width, False)
        if self.root_weight:
            dense("skip", in_dst, out, self.use_bias)
            if self.beta:
                dense("beta", 3 * out, 1, False)
        x_src, x_dst, edge_attr, w = promote(self.dtype, x_src, x_dst, edge_attr, w)
        return transformer_conv(g, x_src, x_dst, w, heads=self.heads, concat=self.concat, edge_attr=edge_attr,
                                return_attention=return_attention_weights,
                                **_attention_dropout(self, deterministic))


def from_pyg_transformer(state_dict, *, heads: int, concat: bool = True, root_weight: bool = True) -> dict:
    """Variables for :class:`TransformerConv` from a PyG ``TransformerConv.state_dict()``.

    Give PyG's ``heads``, ``concat`` and ``root_weight`` (the state_dict holds ``H*C`` only, and
    ``lin_skip`` even without ``root_weight``); build the flax layer with the same options.

    >>> import numpy as np
    >>> lin = {f"lin_{n}.weight": np.ones((8, 4)) for n in ("query", "key", "value", "skip")}
    >>> from_pyg_transformer(lin, heads=2)["params"]["query_kernel"].shape
    (4, 8)
    """
    return {"params": transformer_weights_from_pyg("from_pyg_transformer", state_dict, heads=heads, concat=concat,
                                                   root_weight=root_weight)}
