"""``flax.linen`` graph layers on the fused kernels: ``SAGEConv``, ``GraphConv``, ``GCNConv``, ``GINConv``,
``GINEConv``, ``EdgeConv``, ``GATConv``, ``GATv2Conv``, ``TransformerConv``, ``GNOBlock``, ``RGCNConv``,
``DMPNNEncoder``, ``InteractionNetwork``, the readout ``AttentionalAggregation`` and ``GraphNorm``, and
PyG (and Chemprop) weight loaders.

Kernels are ``[in, out]`` as in ``flax.linen.Dense``. ``from_pyg_sage`` / ``from_pyg_gcn`` turn a
PyG layer's ``state_dict()`` (``from_pyg_gat``, ``from_pyg_rgcn`` ... too; ``from_chemprop`` a
Chemprop ``BondMessagePassing``'s) into the variables ``{"params": ...}`` that ``Module.apply`` takes.
A PyG layer's MLP (``nn``, ``gate_nn``: a ``torch.nn.Sequential`` of ``Linear`` layers and activations)
loads into ``flax.linen.Sequential`` of ``Dense`` layers at the same positions.

Every layer with parameters of its own takes ``dtype`` (the computation's: inputs and parameters are cast
to it; default None, their promoted dtype) and ``param_dtype`` (the parameters', default float32), as
flax's own layers do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from ..graph import Graph
from ._basic import (attentional_aggregation, attentional_aggregation_weights_from_pyg, edge_conv,
                     edge_conv_weights_from_pyg, gcn_conv, gin_conv, gin_weights_from_pyg, gine_conv, graph_norm,
                     graph_norm_weights_from_pyg)
from ._functional import (GRAPH_CONV_NORMS, SAGE_AGGRS, check_choice, check_dropout, check_fill_value, gat_conv,
                          gat_weights_from_pyg, gatv2_conv, gatv2_weights_from_pyg, gcn_weights_from_pyg, graph_conv,
                          sage_conv, sage_weights_from_pyg, split_sage_input, transformer_conv,
                          transformer_weights_from_pyg)
from ._relational import (check_dmpnn_config, check_rgcn_config, dmpnn_encoder, dmpnn_weights_from_chemprop,
                          interaction_network, pyg_glorot, rgcn_conv, rgcn_inputs, rgcn_kernel_shape,
                          rgcn_weights_from_pyg)
from .gno import check_block, gno_block, init_kernel, kernel_outputs, skip_input

__all__ = ["AttentionalAggregation", "DMPNNEncoder", "EdgeConv", "GATConv", "GATv2Conv", "GCNConv", "GINConv",
           "GINEConv", "GNOBlock", "GraphConv", "GraphNorm", "InteractionNetwork", "RGCNConv", "SAGEConv",
           "TransformerConv", "from_chemprop", "from_pyg_attentional_aggregation", "from_pyg_edgeconv", "from_pyg_gat",
           "from_pyg_gatv2", "from_pyg_gcn", "from_pyg_gin", "from_pyg_gine", "from_pyg_graphnorm", "from_pyg_rgcn",
           "from_pyg_sage", "from_pyg_transformer"]

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
    dtype: Any = None
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, g: Graph, x):
        check_choice("SAGEConv", "aggr", self.aggr, SAGE_AGGRS)
        x_src, x_dst = split_sage_input(g, x)
        neigh = self.param("neigh_kernel", self.kernel_init, (x_src.shape[-1], self.features), self.param_dtype)
        root = (self.param("root_kernel", self.kernel_init, (x_dst.shape[-1], self.features), self.param_dtype)
                if self.root_weight else None)
        bias = self.param("bias", self.bias_init, (self.features,), self.param_dtype) if self.use_bias else None
        x_src, x_dst, neigh, root, bias = _promote(self.dtype, x_src, x_dst, neigh, root, bias)
        return sage_conv(g, x_src, x_dst, neigh, root, bias, aggr=self.aggr, normalize=self.normalize)


class GraphConv(nn.Module):
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
    norm: str = "both"
    add_self_loops: bool = True
    use_bias: bool = True
    kernel_init: Initializer = nn.initializers.glorot_uniform()
    bias_init: Initializer = nn.initializers.zeros_init()
    dtype: Any = None
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, g: Graph, x):
        check_choice("GraphConv", "norm", self.norm, GRAPH_CONV_NORMS)
        kernel = self.param("kernel", self.kernel_init, (x.shape[-1], self.features), self.param_dtype)
        bias = self.param("bias", self.bias_init, (self.features,), self.param_dtype) if self.use_bias else None
        x, kernel, bias = _promote(self.dtype, x, kernel, bias)
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


class GATConv(nn.Module):
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

    features: int
    heads: int = 1
    concat: bool = True
    negative_slope: float = 0.2
    add_self_loops: bool = True
    edge_dim: int | None = None
    fill_value: Any = "mean"
    use_bias: bool = True
    share_weights: bool = True
    residual: bool = False
    dropout: float = 0.0
    deterministic: bool | None = None
    kernel_init: Initializer = nn.initializers.glorot_uniform()
    bias_init: Initializer = nn.initializers.zeros_init()
    dtype: Any = None
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False,
                 deterministic: bool | None = None):
        check_fill_value("GATConv", self.fill_value)
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
         res_kernel) = _promote(self.dtype, x_src, x_dst, edge_attr, src_kernel, dst_kernel, att_src, att_dst, bias,
                                edge_kernel, att_edge, res_kernel)
        return gat_conv(g, x_src, x_dst, src_kernel, dst_kernel, att_src, att_dst, bias, concat=self.concat,
                        negative_slope=self.negative_slope, add_loops=self.add_self_loops, edge_attr=edge_attr,
                        edge_kernel=edge_kernel, att_edge=att_edge, fill_value=self.fill_value,
                        return_attention=return_attention_weights, res_kernel=res_kernel,
                        **_attention_dropout(self, "GATConv", deterministic))


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


def _attention_dropout(layer: nn.Module, name: str, deterministic) -> dict:
    """The ``dropout`` and ``dropout_key`` of an attention layer's call (none when it is deterministic)."""
    rate = check_dropout(name, layer.dropout)
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


class GATv2Conv(nn.Module):
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

    features: int
    heads: int = 1
    concat: bool = True
    negative_slope: float = 0.2
    add_self_loops: bool = True
    edge_dim: int | None = None
    fill_value: Any = "mean"
    use_bias: bool = True
    share_weights: bool = False
    residual: bool = False
    dropout: float = 0.0
    deterministic: bool | None = None
    kernel_init: Initializer = nn.initializers.glorot_uniform()
    bias_init: Initializer = nn.initializers.zeros_init()
    dtype: Any = None
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False,
                 deterministic: bool | None = None):
        check_fill_value("GATv2Conv", self.fill_value)
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
         res_kernel) = _promote(self.dtype, x_src, x_dst, edge_attr, src_kernel, src_bias, dst_kernel, dst_bias, att,
                                bias, edge_kernel, res_kernel)
        return gatv2_conv(g, x_src, x_dst, src_kernel, src_bias, dst_kernel, dst_bias, att, bias,
                          concat=self.concat, negative_slope=self.negative_slope, add_loops=self.add_self_loops,
                          edge_attr=edge_attr, edge_kernel=edge_kernel, fill_value=self.fill_value,
                          return_attention=return_attention_weights, res_kernel=res_kernel,
                          **_attention_dropout(self, "GATv2Conv", deterministic))


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


class TransformerConv(nn.Module):
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

    features: int
    heads: int = 1
    concat: bool = True
    beta: bool = False
    edge_dim: int | None = None
    use_bias: bool = True
    root_weight: bool = True
    dropout: float = 0.0
    deterministic: bool | None = None
    kernel_init: Initializer = nn.initializers.lecun_normal()
    bias_init: Initializer = nn.initializers.zeros_init()
    dtype: Any = None
    param_dtype: Any = jnp.float32

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
        x_src, x_dst, edge_attr, w = _promote(self.dtype, x_src, x_dst, edge_attr, w)
        return transformer_conv(g, x_src, x_dst, w, heads=self.heads, concat=self.concat, edge_attr=edge_attr,
                                return_attention=return_attention_weights,
                                **_attention_dropout(self, "TransformerConv", deterministic))


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
class GNOBlock(nn.Module):
    """A graph-neural-operator block: ``out_i = reduce_{e=(j->i)} K(dx_e) f_j (+ W_skip f_dst_i + b)``.

    The kernel ``K(dx) = V relu(U dx + b_u) + b_v`` is a matrix (``features x c_in``) or, with
    ``kernel="diagonal"``, a per-channel scale (``features == c_in``); the integral is the fused
    :func:`jaxgraphops.gno_conv` (kappa is never formed).

    Params: ``U [kernel_width, d]``, ``b_u``, ``V [P, kernel_width]``, ``b_v [P]`` (``P = features *
    c_in`` or ``c_in``), and ``skip_kernel [c_dst, features]``, ``skip_bias`` with ``skip``.

    Attributes:
      features: output features ``c_out``.
      kernel_width: hidden width ``H`` of the kernel MLP.
      kernel: ``"matrix"`` or ``"diagonal"``.
      reduce: ``"mean"`` or ``"sum"`` over the in-edges (weighted with ``edge_weight``).
      skip: add the linear skip connection ``f_dst W_skip + b_skip``.

    Call ``layer(g, f_src, dx, f_dst=None, edge_weight=None)``: ``f_src [n_src, c_in]``, ``dx [E, d]``
    (:func:`jaxgraphops.edge_vectors`), ``f_dst [n_dst, c_dst]`` for the skip (default ``f_src``,
    square graphs); returns ``[n_dst, features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> f, dx = jnp.ones((3, 4)), jnp.ones((3, 2))
    >>> layer = GNOBlock(8, kernel_width=16)
    >>> variables = layer.init(jax.random.key(0), g, f, dx)
    >>> layer.apply(variables, g, f, dx).shape
    (3, 8)
    """

    features: int
    kernel_width: int = 64
    kernel: str = "matrix"
    reduce: str = "mean"
    skip: bool = True
    dtype: Any = None
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, g: Graph, f_src, dx, f_dst=None, edge_weight=None):
        c_in, d = f_src.shape[-1], dx.shape[-1]
        check_block("GNOBlock", c_in, self.features, self.kernel, self.reduce, self.kernel_width)
        init = lambda name: lambda key, _, dtype: init_kernel(key, d, self.kernel_width, c_in,  # noqa: E731
                                                              self.features, self.kernel, dtype)[name]
        p = kernel_outputs(c_in, self.features, self.kernel)
        U = self.param("U", init("U"), (self.kernel_width, d), self.param_dtype)
        b_u = self.param("b_u", init("b_u"), (self.kernel_width,), self.param_dtype)
        V = self.param("V", init("V"), (p, self.kernel_width), self.param_dtype)
        b_v = self.param("b_v", init("b_v"), (p,), self.param_dtype)
        skip_kernel = skip_bias = None
        if self.skip:
            f_dst = skip_input("GNOBlock", g, f_src, f_dst)
            skip_kernel = self.param("skip_kernel", nn.initializers.lecun_normal(), (f_dst.shape[-1], self.features),
                                     self.param_dtype)
            skip_bias = self.param("skip_bias", nn.initializers.zeros_init(), (self.features,), self.param_dtype)
        f_src, dx, f_dst, edge_weight, U, b_u, V, b_v, skip_kernel, skip_bias = _promote(
            self.dtype, f_src, dx, f_dst, edge_weight, U, b_u, V, b_v, skip_kernel, skip_bias)
        return gno_block(g, f_src, dx, U, b_u, V, b_v, skip_kernel, skip_bias, f_dst, kernel=self.kernel,
                         reduce=self.reduce, edge_weight=edge_weight)


class RGCNConv(nn.Module):
    """Relational graph convolution (PyG's ``RGCNConv`` and ``FastRGCNConv``) on :func:`jaxgraphops.agg_hg_basis`.

    ``out_i = x_i root + bias + sum_r sum_{j in N_r(i)} c_{i,r} x_j W_r`` with ``c_{i,r} = 1 / |N_r(i)|``
    (``aggr="mean"``: a mean per relation; a relation absent at ``i`` adds nothing) or 1 (``"add"``,
    ``"sum"``). ``W_r`` is a weight per relation, ``sum_b comp[r, b] kernel[b]`` with ``num_bases``, or
    block-diagonal with ``num_blocks`` (float features only). Float features take one fused
    aggregation ``[n_dst, (B or R) * F (+ F)]`` and one matmul with the stacked weights; node ids
    (``x`` None: ``arange``, or an integer array, PyG's featureless input) read rows of ``W_r`` and
    ``root`` as embeddings. The edge order is free (PyG's ``is_sorted`` only changes its speed).

    Params (PyG's layout, :func:`from_pyg_rgcn` loads them): ``kernel`` (PyG's ``weight``) ``[R, F,
    features]``, ``[B, F, features]`` with ``comp [R, B]``, or ``[R, nb, F/nb, features/nb]``;
    ``root_kernel [F_dst, features]`` (with ``root_weight``); ``bias [features]`` (with ``use_bias``).

    Attributes:
      features: output features.
      num_relations: R, the number of edge types.
      num_bases: B, basis decomposition (None: a full weight per relation).
      aggr: ``mean``, ``add`` or ``sum``.
      root_weight: add ``x_i root``.
      use_bias: add ``bias``.
      num_blocks: block-diagonal decomposition into this many blocks.
      num_nodes: the number of node ids (the weights' F) for integer node-id input; default
        ``g.n_src`` for ``x=None``.
      dtype: the computation dtype (default: inferred from the inputs and params).
      param_dtype: the dtype of the created params.

    Call ``layer(g, x, edge_types)``: ``x`` is ``[n_src, F]`` features (or a pair ``(x_src [n_src,
    F], x_dst [n_dst, F_dst])`` for a bipartite graph), integer node ids ``[n_src]`` (or a pair), or
    None; ``edge_types`` is an integer ``[n_edges]`` in input edge order. Returns ``[n_dst, features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> x, types = jnp.ones((3, 4)), jnp.array([0, 2, 1])
    >>> layer = RGCNConv(8, num_relations=3, num_bases=2)
    >>> variables = layer.init(jax.random.key(0), g, x, types)
    >>> layer.apply(variables, g, x, types).shape, variables["params"]["kernel"].shape
    ((3, 8), (2, 4, 8))
    """

    features: int
    num_relations: int
    num_bases: int | None = None
    aggr: str = "mean"
    root_weight: bool = True
    use_bias: bool = True
    num_blocks: int | None = None
    num_nodes: int | None = None
    dtype: Any = None
    param_dtype: Any = jnp.float32
    kernel_init: Initializer = pyg_glorot
    bias_init: Initializer = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, g: Graph, x, edge_types):
        name = "RGCNConv"
        check_rgcn_config(name, self.num_relations, self.num_bases, self.num_blocks, self.aggr)
        mode, x_src, x_dst = rgcn_inputs(name, g, x, need_dst=self.root_weight)
        if mode == "ids":
            if self.num_nodes is None and x is not None:
                raise ValueError(f"{name}: num_nodes (the number of node ids) is required for integer node-id input")
            n_src = n_dst = g.n_src if self.num_nodes is None else self.num_nodes
        else:
            n_src, n_dst = x_src.shape[-1], None if x_dst is None else x_dst.shape[-1]
        shape = rgcn_kernel_shape(name, self.num_relations, self.num_bases, self.num_blocks, n_src, self.features)
        w = {"kernel": self.param("kernel", self.kernel_init, shape, self.param_dtype)}
        if self.num_bases is not None:
            w["comp"] = self.param("comp", self.kernel_init, (self.num_relations, self.num_bases), self.param_dtype)
        if self.root_weight:
            w["root_kernel"] = self.param("root_kernel", self.kernel_init, (n_dst, self.features), self.param_dtype)
        if self.use_bias:
            w["bias"] = self.param("bias", self.bias_init, (self.features,), self.param_dtype)
        if mode == "features":
            x_src, x_dst, w = _promote(self.dtype, x_src, x_dst, w)
        else:
            (w,) = _promote(self.dtype, w)
        x = (x_src, x_dst) if self.root_weight else x_src
        return rgcn_conv(g, x, edge_types, w, aggr=self.aggr)


def _promote(dtype, *trees):
    """``trees`` with every array leaf cast to one dtype (``dtype``, or the promoted one), as flax's layers do."""
    leaves, treedef = jax.tree_util.tree_flatten(trees)
    return jax.tree_util.tree_unflatten(treedef, nn.dtypes.promote_dtype(*leaves, dtype=dtype))


def from_pyg_rgcn(state_dict) -> dict:
    """Variables for :class:`RGCNConv` from a PyG ``RGCNConv`` or ``FastRGCNConv`` ``state_dict()``.

    Reads ``weight`` (``[R or B, in, out]``, or ``[R, nb, in/nb, out/nb]`` with blocks), ``comp``
    (with ``num_bases``), ``root`` (with ``root_weight``) and ``bias``, as they are (PyG stores them
    ``[in, out]``); build the flax layer with the same ``num_relations``, ``num_bases``,
    ``num_blocks``, ``aggr``, ``root_weight`` and ``bias``.

    >>> import numpy as np
    >>> sd = {"weight": np.ones((2, 4, 8)), "comp": np.ones((3, 2)), "root": np.ones((4, 8)), "bias": np.zeros(8)}
    >>> from_pyg_rgcn(sd)["params"]["kernel"].shape
    (2, 4, 8)
    """
    return {"params": rgcn_weights_from_pyg("from_pyg_rgcn", state_dict)}


class DMPNNEncoder(nn.Module):
    """Chemprop's directed message-passing encoder (``BondMessagePassing``) on :func:`jaxgraphops.agg_dmpnn`.

    On the bond graph ``g`` (edges = directed bonds), with atom features ``V``, bond features ``E``
    and ``tau`` the activation::

        H0 = W_i([V[src] | E]);  H = tau(H0)
        depth - 1 times:  (undirected: H = (H + H[rev]) / 2)
                          H = tau(H0 + W_h(sum_{e' into src(e)} H[e'] - H[rev(e)]))
        out = tau(W_o([V | sum of H over the bonds into each atom]))
        with atom_descriptors V_d:  out = W_d([out | V_d])

    Dropout is not supported (Chemprop's default is 0).

    Params (``{"kernel": [in, out], "bias"}`` each, as ``flax.linen.Dense``; :func:`from_chemprop`
    loads Chemprop's): ``W_i [d_v + d_e, d_h]``, ``W_h [d_h, d_h]`` (biases with ``use_bias``),
    ``W_o [d_v + d_h, d_h]`` with a bias, and ``W_d [d_h + d_vd, d_h + d_vd]`` with a bias when the
    layer is initialised with ``atom_descriptors``.

    Attributes:
      d_h: hidden (and output) features.
      depth: message-passing steps, counting the first (Chemprop's ``depth``).
      undirected: average each bond state with its reverse before each message.
      use_bias: biases on ``W_i`` and ``W_h`` (Chemprop's ``bias``).
      activation: ``tau`` (Chemprop's default ``relu``).
      dtype, param_dtype: as in ``flax.linen.Dense``.

    Call ``layer(g, atom_features, bond_features, rev_edge_ids, atom_descriptors=None)``:
    ``atom_features [n_atoms, d_v]``, ``bond_features [n_edges, d_e]`` in ``g``'s edge order,
    ``rev_edge_ids [n_edges]`` the id of each bond's reverse (Chemprop's ``rev_edge_index``; -1 for
    none); returns ``[n_atoms, d_h]`` (``[n_atoms, d_h + d_vd]`` with descriptors). Build ``g``
    with ``Graph.from_edge_index(bmg.edge_index, n_atoms)`` from a Chemprop ``BatchMolGraph``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 1, 2]), jnp.array([1, 0, 2, 1]))  # bonds 0-1, 1-2
    >>> atoms, bonds, rev = jnp.ones((3, 5)), jnp.ones((4, 2)), jnp.array([1, 0, 3, 2])
    >>> layer = DMPNNEncoder(16, depth=3)
    >>> variables = layer.init(jax.random.key(0), g, atoms, bonds, rev)
    >>> layer.apply(variables, g, atoms, bonds, rev).shape
    (3, 16)
    """

    d_h: int
    depth: int = 3
    undirected: bool = False
    use_bias: bool = False
    activation: Callable = nn.relu
    dtype: Any = None
    param_dtype: Any = jnp.float32
    kernel_init: Initializer = nn.initializers.lecun_normal()
    bias_init: Initializer = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, g: Graph, atom_features, bond_features, rev_edge_ids, atom_descriptors=None):
        check_dmpnn_config("DMPNNEncoder", self.depth, self.undirected)
        d_v, d_e = atom_features.shape[-1], bond_features.shape[-1]

        def dense(name, n_in, n_out, bias):
            def init(key, n_in, n_out):
                k_w, k_b = jax.random.split(key)
                p = {"kernel": self.kernel_init(k_w, (n_in, n_out), self.param_dtype)}
                return {**p, "bias": self.bias_init(k_b, (n_out,), self.param_dtype)} if bias else p
            return self.param(name, init, n_in, n_out)

        w = {"W_i": dense("W_i", d_v + d_e, self.d_h, self.use_bias), "W_h": dense("W_h", self.d_h, self.d_h,
                                                                                    self.use_bias),
             "W_o": dense("W_o", d_v + self.d_h, self.d_h, True)}
        inputs = [atom_features, bond_features]
        if atom_descriptors is not None:
            n_d = self.d_h + atom_descriptors.shape[-1]
            w["W_d"] = dense("W_d", n_d, n_d, True)
            inputs.append(atom_descriptors)
        *inputs, w = _promote(self.dtype, *inputs, w)
        return dmpnn_encoder(g, inputs[0], inputs[1], rev_edge_ids, w, depth=self.depth, undirected=self.undirected,
                             activation=self.activation, atom_descriptors=inputs[2] if len(inputs) > 2 else None)


def from_chemprop(state_dict) -> dict:
    """Variables for :class:`DMPNNEncoder` from a Chemprop ``BondMessagePassing.state_dict()``.

    Reads ``W_i``, ``W_h`` (with their biases for Chemprop's ``bias=True``: build the layer with
    ``use_bias=True``), ``W_o`` and ``W_d`` (with ``d_vd``: call the layer with ``atom_descriptors``);
    torch's ``[out, in]`` weights become ``[in, out]`` kernels. Build the layer with Chemprop's
    ``d_h``, ``depth`` and ``undirected``. Scaling transforms (``V_d_transform``,
    ``graph_transform``) are not read: apply them to the inputs.

    >>> import numpy as np
    >>> sd = {"W_i.weight": np.ones((16, 7)), "W_h.weight": np.ones((16, 16)), "W_o.weight": np.ones((16, 21)),
    ...       "W_o.bias": np.zeros(16)}
    >>> from_chemprop(sd)["params"]["W_o"]["kernel"].shape  # d_v = 21 - 16 = 5 atom, 2 bond features
    (21, 16)
    """
    return {"params": dmpnn_weights_from_chemprop("from_chemprop", state_dict)}


class InteractionNetwork(nn.Module):
    """An interaction-network step (MeshGraphNet / GraphCast processor block) on :func:`jaxgraphops.update_efeat`.

    ``e' = edge_mlp([e | x_src[src] | x_dst[dst]])``, ``x' = node_mlp([x_dst | sum_{e into i} e'])``;
    with ``residual`` it returns ``(x_dst + x', e + e')`` (the sum is over ``e'``, before the
    residual), else ``(x', e')``: then it is ``jraph.InteractionNetwork`` with update functions that
    concatenate their inputs. The MLPs are any flax modules (or functions) mapping ``[rows, in]``
    to ``[rows, out]``.

    Attributes:
      edge_mlp: the edge update, ``[n_edges, F_e + F_src + F_dst] -> [n_edges, F_e']``.
      node_mlp: the node update, ``[n_dst, F_dst + F_e'] -> [n_dst, F']``.
      residual: add the inputs to the outputs (needs ``F_e' = F_e`` and ``F' = F_dst``).

    Call ``layer(g, nodes, edges)``: ``nodes [n, F]`` for a square graph, or a pair ``(x_src,
    x_dst)`` (bipartite, e.g. GraphCast's grid-to-mesh: only the destinations are updated);
    ``edges [n_edges, F_e]`` in input edge order. Returns ``(nodes', edges')``.

    >>> import jax, jax.numpy as jnp, flax.linen as nn, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = InteractionNetwork(nn.Dense(4), nn.Dense(8))
    >>> nodes, edges = jnp.ones((3, 8)), jnp.ones((3, 4))
    >>> variables = layer.init(jax.random.key(0), g, nodes, edges)
    >>> [a.shape for a in layer.apply(variables, g, nodes, edges)]
    [(3, 8), (3, 4)]
    """

    edge_mlp: Callable
    node_mlp: Callable
    residual: bool = True

    def __call__(self, g: Graph, nodes, edges):
        return interaction_network(g, nodes, edges, self.edge_mlp, self.node_mlp, residual=self.residual)


# -- PyG's common layers: GCNConv, GINConv, GINEConv, EdgeConv, readouts, GraphNorm ---------------

class GCNConv(nn.Module):
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

    features: int
    improved: bool = False
    add_self_loops: bool | None = None
    normalize: bool = True
    use_bias: bool = True
    dtype: Any = None
    param_dtype: Any = jnp.float32
    kernel_init: Initializer = nn.initializers.glorot_uniform()
    bias_init: Initializer = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, g: Graph, x, edge_weight=None):
        kernel = self.param("kernel", self.kernel_init, (jnp.shape(x)[-1], self.features), self.param_dtype)
        bias = self.param("bias", self.bias_init, (self.features,), self.param_dtype) if self.use_bias else None
        x, kernel, bias = _promote(self.dtype, x, kernel, bias)
        loops = self.normalize if self.add_self_loops is None else self.add_self_loops
        return gcn_conv(g, x, kernel, bias, edge_weight=edge_weight, normalize=self.normalize,
                        improved=self.improved, add_loops=loops)


class GINConv(nn.Module):
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
    eps: float = 0.0
    train_eps: bool = False
    dtype: Any = None
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, g: Graph, x):
        return gin_conv(g, *_with_eps(self, x), self.nn)


def _with_eps(layer: nn.Module, x):
    """``(x, eps)``: the ``eps`` param (with ``train_eps``; promoted with ``x``) or the float."""
    if not layer.train_eps:
        return x, layer.eps
    eps = layer.param("eps", nn.initializers.constant(layer.eps), (1,), layer.param_dtype)
    if isinstance(x, tuple):
        *pair, eps = _promote(layer.dtype, *x, eps)
        return tuple(pair), eps
    return _promote(layer.dtype, x, eps)


class GINEConv(nn.Module):
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
    eps: float = 0.0
    train_eps: bool = False
    edge_dim: int | None = None
    dtype: Any = None
    param_dtype: Any = jnp.float32
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
            edge_attr, edge_kernel, edge_bias = _promote(self.dtype, edge_attr, edge_kernel, edge_bias)
        return gine_conv(g, x, edge_attr, eps, self.nn, edge_kernel, edge_bias)


class EdgeConv(nn.Module):
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
    aggr: str = "max"

    def __call__(self, g: Graph, x):
        return edge_conv(g, x, self.nn, aggr=self.aggr)


class AttentionalAggregation(nn.Module):
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
    >>> layer = AttentionalAggregation(nn.Dense(1), nn.Dense(8))
    >>> x, ids = jnp.ones((5, 4)), jnp.array([0, 0, 1, 1, 1])
    >>> variables = layer.init(jax.random.key(0), x, ids, 2)
    >>> layer.apply(variables, x, ids, 2).shape
    (2, 8)
    """

    gate_nn: Callable
    nn: Callable | None = None

    def __call__(self, x, batch=None, size=None):
        return attentional_aggregation(x, batch, size, self.gate_nn, self.nn)


class GraphNorm(nn.Module):
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

    eps: float = 1e-5
    dtype: Any = None
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x, batch=None, size=None):
        f = (jnp.shape(x)[-1],)
        w = {"weight": self.param("weight", nn.initializers.ones_init(), f, self.param_dtype),
             "bias": self.param("bias", nn.initializers.zeros_init(), f, self.param_dtype),
             "mean_scale": self.param("mean_scale", nn.initializers.ones_init(), f, self.param_dtype)}
        x, w = _promote(self.dtype, x, w)
        return graph_norm(x, batch, size, w["weight"], w["bias"], w["mean_scale"], eps=self.eps)


def _dense_stack(layers: dict) -> dict:
    """A linear stack (``linear_stack_from_pyg``) as the params of ``nn.Sequential`` (``layers_<i>``)
    or, for one ``Linear``, of ``nn.Dense``."""
    return layers[None] if None in layers else {f"layers_{i}": p for i, p in layers.items()}


def _gin_variables(fn: str, state_dict, train_eps: bool, edge: bool) -> dict:
    w = gin_weights_from_pyg(fn, state_dict, edge=edge)
    params = {"nn": _dense_stack(w.pop("nn"))}
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
    return {"params": {"nn": _dense_stack(edge_conv_weights_from_pyg("from_pyg_edgeconv", state_dict)["nn"])}}


def from_pyg_attentional_aggregation(state_dict) -> dict:
    """Variables for :class:`AttentionalAggregation` from PyG's ``state_dict()`` (``gate_nn`` and
    ``nn`` each a ``Sequential`` of ``Linear`` layers or one ``Linear``, as in :func:`from_pyg_gin`).

    >>> import numpy as np
    >>> sd = {"gate_nn.weight": np.ones((1, 4)), "gate_nn.bias": np.zeros(1), "nn.weight": np.ones((8, 4))}
    >>> sorted(from_pyg_attentional_aggregation(sd)["params"])
    ['gate_nn', 'nn']
    """
    w = attentional_aggregation_weights_from_pyg("from_pyg_attentional_aggregation", state_dict)
    return {"params": {k: _dense_stack(v) for k, v in w.items()}}


def from_pyg_graphnorm(state_dict) -> dict:
    """Variables for :class:`GraphNorm` from a PyG ``GraphNorm.state_dict()`` (``weight``, ``bias``,
    ``mean_scale``); build the layer with PyG's ``eps``.

    >>> import numpy as np
    >>> sd = {"weight": np.ones(4), "bias": np.zeros(4), "mean_scale": np.ones(4)}
    >>> from_pyg_graphnorm(sd)["params"]["mean_scale"].shape
    (4,)
    """
    return {"params": graph_norm_weights_from_pyg("from_pyg_graphnorm", state_dict)}
