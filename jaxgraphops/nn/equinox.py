"""Equinox graph layers on the fused kernels: ``SAGEConv``, ``GraphConv``, ``GCNConv``, ``GINConv``,
``GINEConv``, ``EdgeConv``, ``GATConv``, ``GATv2Conv``, ``TransformerConv``, ``GNOBlock``, ``RGCNConv``,
``DMPNNEncoder``, ``InteractionNetwork``, the readout ``AttentionalAggregation`` and ``GraphNorm``.

Weights are ``eqx.nn.Linear`` layers (torch's ``[out, in]`` layout; RGCN keeps PyG's own arrays);
``from_pyg`` class methods build a layer from a PyG layer's ``state_dict()``
(``DMPNNEncoder.from_chemprop`` from a Chemprop ``BondMessagePassing``'s). Layers with an MLP take
any per-row equinox module or function (``eqx.nn.MLP``, ``eqx.nn.Sequential``) and vmap it over the
rows; ``from_pyg`` builds PyG's ``torch.nn.Sequential`` as an ``eqx.nn.Sequential``.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from ..graph import Graph
from ._basic import (EDGE_CONV_AGGRS, attentional_aggregation, attentional_aggregation_weights_from_pyg, edge_conv,
                     edge_conv_weights_from_pyg, gcn_conv, gin_conv, gin_weights_from_pyg, gine_conv, graph_norm,
                     graph_norm_weights_from_pyg)
from ._functional import (GRAPH_CONV_NORMS, SAGE_AGGRS, check_choice, check_dropout, check_fill_value,
                          check_output_width,
                          gat_conv, gat_weights_from_pyg, gatv2_conv, gatv2_weights_from_pyg, gcn_weights_from_pyg,
                          graph_conv, sage_conv, sage_weights_from_pyg, split_sage_input, transformer_conv,
                          transformer_weights_from_pyg)
from ._relational import (check_dmpnn_config, check_rgcn_config, dmpnn_encoder, dmpnn_weights_from_chemprop,
                          interaction_network, pyg_glorot, rgcn_config_from_weights, rgcn_conv, rgcn_kernel_shape,
                          rgcn_weights_from_pyg)
from .gno import check_block, gno_block, init_kernel, skip_input

__all__ = ["AttentionalAggregation", "DMPNNEncoder", "EdgeConv", "GATConv", "GATv2Conv", "GCNConv", "GINConv",
           "GINEConv", "GNOBlock", "GraphConv", "GraphNorm", "InteractionNetwork", "RGCNConv", "SAGEConv",
           "TransformerConv"]


class SAGEConv(eqx.Module):
    """GraphSAGE (PyG's ``SAGEConv``): ``out_i = W_l aggr_{j->i} x_j + b + W_r x_i``.

    ``lin_neigh`` holds ``W_l [out, F_src]`` and ``b`` (PyG's ``lin_l``), ``lin_root`` holds
    ``W_r [out, F_dst]`` (PyG's ``lin_r``; None without ``root_weight``). The graph work is one
    fused :func:`jaxgraphops.agg_concat`; empty neighbourhoods aggregate to 0.

    **Arguments:**

    - ``in_features``: ``F``, or ``(F_src, F_dst)`` for a bipartite graph.
    - ``out_features``: output features.
    - ``aggr``: ``mean``, ``max``, ``sum`` or ``min``, over the incoming edges of each destination.
    - ``root_weight``: add ``W_r x_i``.
    - ``use_bias``: add ``b`` (PyG's ``bias``).
    - ``normalize``: L2-normalise each output row (PyG's ``normalize``).
    - ``key``: PRNG key for the initial weights (``eqx.nn.Linear``'s initialisation).

    Call ``layer(g, x)``: ``x`` is ``[n_src, F]`` for a square graph, or a pair
    ``(x_src [n_src, F_src], x_dst [n_dst, F_dst])``; returns ``[n_dst, out_features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = SAGEConv(4, 8, aggr="max", key=jax.random.key(0))
    >>> layer(g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    lin_neigh: eqx.nn.Linear
    lin_root: eqx.nn.Linear | None
    aggr: str = eqx.field(static=True)
    normalize: bool = eqx.field(static=True)

    def __init__(self, in_features: int | tuple[int, int], out_features: int, aggr: str = "mean",
                 root_weight: bool = True, use_bias: bool = True, normalize: bool = False, *,
                 key: jax.Array):
        check_choice("SAGEConv", "aggr", aggr, SAGE_AGGRS)
        in_src, in_dst = in_features if isinstance(in_features, tuple) else (in_features, in_features)
        neigh_key, root_key = jax.random.split(key)
        self.lin_neigh = eqx.nn.Linear(in_src, out_features, use_bias=use_bias, key=neigh_key)
        self.lin_root = eqx.nn.Linear(in_dst, out_features, use_bias=False, key=root_key) if root_weight else None
        self.aggr, self.normalize = aggr, normalize

    def __call__(self, g: Graph, x):
        x_src, x_dst = split_sage_input(g, x)
        root = None if self.lin_root is None else self.lin_root.weight.T
        return sage_conv(g, x_src, x_dst, self.lin_neigh.weight.T, root, self.lin_neigh.bias,
                         aggr=self.aggr, normalize=self.normalize)

    @classmethod
    def from_pyg(cls, state_dict, *, aggr: str = "mean", normalize: bool = False) -> SAGEConv:
        """The layer with the weights of a PyG ``SAGEConv.state_dict()`` (tensors or numpy arrays).

        Sizes, ``root_weight`` and ``use_bias`` follow from the entries (``lin_l.weight``,
        ``lin_l.bias``, ``lin_r.weight``); give PyG's ``aggr`` and ``normalize``.

        >>> import numpy as np
        >>> sd = {"lin_l.weight": np.ones((8, 4)), "lin_r.weight": np.ones((8, 5))}
        >>> layer = SAGEConv.from_pyg(sd, aggr="sum")
        >>> layer.lin_root.weight.shape, layer.lin_neigh.bias is None
        ((8, 5), True)
        """
        w = sage_weights_from_pyg("SAGEConv.from_pyg", state_dict)
        in_src, out_features = w["neigh_kernel"].shape
        root = w.get("root_kernel")
        in_dst = in_src if root is None else root.shape[0]
        layer = cls((in_src, in_dst), out_features, aggr, root_weight=root is not None, use_bias="bias" in w,
                    normalize=normalize, key=jax.random.key(0))
        layer = eqx.tree_at(lambda m: m.lin_neigh.weight, layer, w["neigh_kernel"].T)
        if "bias" in w:
            layer = eqx.tree_at(lambda m: m.lin_neigh.bias, layer, w["bias"])
        if root is not None:
            layer = eqx.tree_at(lambda m: m.lin_root.weight, layer, root.T)
        return layer


class GraphConv(eqx.Module):
    """Graph convolution (DGL's ``GraphConv``): ``out = Â x W + b`` with a normalised adjacency ``Â``.

    ``norm="both"``: ``Â = D_in^-1/2 A D_out^-1/2`` (in-degrees of destinations, out-degrees of
    sources); ``"right"``: ``D_in^-1 A`` (mean); ``"none"``: ``A`` (sum). ``add_self_loops``
    uses ``A + I`` (:func:`jaxgraphops.nn.add_self_loops`; square graphs only), degrees included.
    With the defaults this is PyG's ``GCNConv`` on graphs without self loops whose in- and
    out-degrees agree (e.g. undirected ones); PyG uses in-degrees on both sides and replaces
    existing self loops instead of adding to them: :class:`GCNConv` is PyG's layer exactly.

    ``lin`` holds ``W [out, in]`` (no bias), ``bias`` is ``[out]`` (zeros at first; None
    without ``use_bias``), as PyG's ``lin.weight`` and ``bias``.

    **Arguments:**

    - ``in_features``, ``out_features``: feature sizes.
    - ``norm``: ``both``, ``right`` or ``none``.
    - ``add_self_loops``: aggregate over ``A + I`` instead of ``A``.
    - ``use_bias``: add ``b``.
    - ``key``: PRNG key for the initial weight.

    Call ``layer(g, x)`` with ``x [n_src, in_features]``; returns ``[n_dst, out_features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 1, 2]), jnp.array([1, 0, 2, 1]))
    >>> layer = GraphConv(4, 8, key=jax.random.key(0))
    >>> layer(g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    lin: eqx.nn.Linear
    bias: jax.Array | None
    norm: str = eqx.field(static=True)
    add_self_loops: bool = eqx.field(static=True)

    def __init__(self, in_features: int, out_features: int, norm: str = "both", add_self_loops: bool = True,
                 use_bias: bool = True, *, key: jax.Array):
        check_choice("GraphConv", "norm", norm, GRAPH_CONV_NORMS)
        self.lin = eqx.nn.Linear(in_features, out_features, use_bias=False, key=key)
        self.bias = jnp.zeros(out_features) if use_bias else None
        self.norm, self.add_self_loops = norm, add_self_loops

    def __call__(self, g: Graph, x):
        return graph_conv(g, x, self.lin.weight.T, self.bias, norm=self.norm, add_loops=self.add_self_loops)

    @classmethod
    def from_pyg(cls, state_dict, *, norm: str = "both", add_self_loops: bool = True) -> GraphConv:
        """The layer with the weights of a PyG ``GCNConv.state_dict()`` (``lin.weight``, ``bias``).

        >>> import numpy as np
        >>> GraphConv.from_pyg({"lin.weight": np.ones((8, 4)), "bias": np.zeros(8)}).lin.weight.shape
        (8, 4)
        """
        w = gcn_weights_from_pyg("GraphConv.from_pyg", state_dict)
        in_features, out_features = w["kernel"].shape
        layer = cls(in_features, out_features, norm, add_self_loops, use_bias="bias" in w, key=jax.random.key(0))
        layer = eqx.tree_at(lambda m: m.lin.weight, layer, w["kernel"].T)
        return eqx.tree_at(lambda m: m.bias, layer, w["bias"]) if "bias" in w else layer


class GATConv(eqx.Module):
    """Graph attention (PyG's ``GATConv``) on :func:`jaxgraphops.mha_gat`.

    ``h = W x`` (``[n, H*C]``); per head ``alpha_ji = softmax_j leaky_relu(<a_src, h_j> + <a_dst, h_i>
    (+ <a_edge, W_e e_ji>))`` over the incoming edges of ``i``; ``out_i = sum_j alpha_ji h_j``,
    heads concatenated (``[n_dst, H*C]``) or averaged (``[n_dst, C]``), plus ``bias``.
    With ``add_self_loops`` the graph is PyG's: existing self loops removed, one loop ``i -> i``
    added for every ``i < min(n_src, n_dst)``, whose edge attributes are ``fill_value``
    (``"mean"``: the mean of the node's incoming edge attributes, 0 without any; or a number).
    Attention dropout (PyG's ``dropout``) runs inside the fused kernels, as equinox's ``nn.Dropout``:
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
    heads: int = eqx.field(static=True)
    concat: bool = eqx.field(static=True)
    negative_slope: float = eqx.field(static=True)
    add_self_loops: bool = eqx.field(static=True)
    fill_value: str | float = eqx.field(static=True)
    dropout: float = eqx.field(static=True)
    inference: bool = eqx.field(static=True)

    def __init__(self, in_features: int | tuple[int, int], out_features: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value: str | float = "mean", use_bias: bool = True, residual: bool = False, *,
                 dropout: float = 0.0, inference: bool = False, key: jax.Array):
        check_fill_value("GATConv", fill_value)
        self.dropout, self.inference = check_dropout("GATConv", dropout), inference
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
        self.heads, self.concat, self.negative_slope = heads, concat, float(negative_slope)
        self.add_self_loops, self.fill_value = add_self_loops, fill_value

    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False, *, key=None,
                 inference: bool | None = None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, None)
        if self.lin is not None:
            src_kernel = dst_kernel = self.lin.weight.T
        else:
            src_kernel, dst_kernel = self.lin_src.weight.T, self.lin_dst.weight.T
        return gat_conv(g, x_src, x_dst, src_kernel, dst_kernel, self.att_src, self.att_dst, self.bias,
                        concat=self.concat, negative_slope=self.negative_slope, add_loops=self.add_self_loops,
                        edge_attr=edge_attr, edge_kernel=_kernel(self.lin_edge), att_edge=self.att_edge,
                        fill_value=self.fill_value, return_attention=return_attention_weights,
                        res_kernel=_kernel(self.res), **_attention_dropout(self, "GATConv", key, inference))

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
        layer = cls(in_features, out_features, heads, concat, negative_slope, add_self_loops, edge_dim, fill_value,
                    use_bias="bias" in w, residual="res_kernel" in w, key=jax.random.key(0))
        fields = {"kernel": lambda m: m.lin.weight, "src_kernel": lambda m: m.lin_src.weight,
                  "dst_kernel": lambda m: m.lin_dst.weight, "edge_kernel": lambda m: m.lin_edge.weight,
                  "att_src": lambda m: m.att_src, "att_dst": lambda m: m.att_dst, "att_edge": lambda m: m.att_edge,
                  "res_kernel": lambda m: m.res.weight, "bias": lambda m: m.bias}
        return _load(layer, fields, w)


def _attention_dropout(layer, name: str, key, inference) -> dict:
    """The ``dropout`` and ``dropout_key`` of an attention layer's call (none in inference)."""
    if layer.dropout == 0.0 or (layer.inference if inference is None else inference):
        return {}
    if key is None:
        raise ValueError(f"{name}: key is required for attention dropout (dropout={layer.dropout}) outside "
                         f"inference; pass key=..., or inference=True")
    return {"dropout": layer.dropout, "dropout_key": key}


def _kernel(lin: eqx.nn.Linear | None):
    """``lin``'s weight as an ``[in, out]`` kernel (None for None)."""
    return None if lin is None else lin.weight.T


def _output_params(in_features, out: int, residual: bool, use_bias: bool, key):
    """``(res, bias)`` of an attention layer: PyG's residual ``Linear(F_dst, out)`` and zero bias."""
    in_dst = in_features[1] if isinstance(in_features, tuple) else in_features
    res = eqx.nn.Linear(in_dst, out, use_bias=False, key=key) if residual else None
    return res, (jnp.zeros(out) if use_bias else None)


def _load(layer, fields: dict, w: dict):
    """``layer`` with the arrays ``w`` (``[in, out]`` kernels, transposed here) at ``fields``."""
    for name, value in w.items():
        layer = eqx.tree_at(fields[name], layer, value.T if name.endswith("kernel") else value)
    return layer


class GATv2Conv(eqx.Module):
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
    heads: int = eqx.field(static=True)
    concat: bool = eqx.field(static=True)
    negative_slope: float = eqx.field(static=True)
    add_self_loops: bool = eqx.field(static=True)
    fill_value: str | float = eqx.field(static=True)
    dropout: float = eqx.field(static=True)
    inference: bool = eqx.field(static=True)

    def __init__(self, in_features: int | tuple[int, int], out_features: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value: str | float = "mean", use_bias: bool = True, share_weights: bool = False,
                 residual: bool = False, *, dropout: float = 0.0, inference: bool = False, key: jax.Array):
        check_fill_value("GATv2Conv", fill_value)
        self.dropout, self.inference = check_dropout("GATv2Conv", dropout), inference
        in_src, in_dst = in_features if isinstance(in_features, tuple) else (in_features, in_features)
        width = heads * out_features
        keys = jax.random.split(key, 5)
        self.lin_l = eqx.nn.Linear(in_src, width, use_bias=use_bias, key=keys[0])
        self.lin_r = None if share_weights else eqx.nn.Linear(in_dst, width, use_bias=use_bias, key=keys[1])
        self.att = jax.nn.initializers.glorot_uniform()(keys[2], (1, heads, out_features))
        self.lin_edge = None if edge_dim is None else eqx.nn.Linear(edge_dim, width, use_bias=False, key=keys[3])
        self.res, self.bias = _output_params(in_features, width if concat else out_features, residual, use_bias,
                                             keys[4])
        self.heads, self.concat, self.negative_slope = heads, concat, float(negative_slope)
        self.add_self_loops, self.fill_value = add_self_loops, fill_value

    def __call__(self, g: Graph, x, edge_attr=None, return_attention_weights: bool = False, *, key=None,
                 inference: bool | None = None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, None)
        lin_r = self.lin_l if self.lin_r is None else self.lin_r
        return gatv2_conv(g, x_src, x_dst, self.lin_l.weight.T, self.lin_l.bias, lin_r.weight.T, lin_r.bias,
                          self.att, self.bias, concat=self.concat, negative_slope=self.negative_slope,
                          add_loops=self.add_self_loops, edge_attr=edge_attr, edge_kernel=_kernel(self.lin_edge),
                          fill_value=self.fill_value, return_attention=return_attention_weights,
                          res_kernel=_kernel(self.res), **_attention_dropout(self, "GATv2Conv", key, inference))

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
        layer = cls(in_features, out_features, heads, concat, negative_slope, add_self_loops, edge_dim, fill_value,
                    use_bias=use_bias, share_weights=share_weights, residual="res_kernel" in w,
                    key=jax.random.key(0))
        fields = {"kernel": lambda m: m.lin_l.weight, "kernel_bias": lambda m: m.lin_l.bias,
                  "src_kernel": lambda m: m.lin_l.weight, "src_bias": lambda m: m.lin_l.bias,
                  "dst_kernel": lambda m: m.lin_r.weight, "dst_bias": lambda m: m.lin_r.bias,
                  "att": lambda m: m.att, "edge_kernel": lambda m: m.lin_edge.weight,
                  "res_kernel": lambda m: m.res.weight, "bias": lambda m: m.bias}
        return _load(layer, fields, w)


class TransformerConv(eqx.Module):
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
    heads: int = eqx.field(static=True)
    concat: bool = eqx.field(static=True)
    dropout: float = eqx.field(static=True)
    inference: bool = eqx.field(static=True)

    def __init__(self, in_features: int | tuple[int, int], out_features: int, heads: int = 1, concat: bool = True,
                 beta: bool = False, edge_dim: int | None = None, use_bias: bool = True, root_weight: bool = True,
                 *, dropout: float = 0.0, inference: bool = False, key: jax.Array):
        self.dropout, self.inference = check_dropout("TransformerConv", dropout), inference
        in_src, in_dst = in_features if isinstance(in_features, tuple) else (in_features, in_features)
        width = heads * out_features
        out = width if concat else out_features
        keys = jax.random.split(key, 6)
        self.lin_query = eqx.nn.Linear(in_dst, width, use_bias=use_bias, key=keys[0])
        self.lin_key = eqx.nn.Linear(in_src, width, use_bias=use_bias, key=keys[1])
        self.lin_value = eqx.nn.Linear(in_src, width, use_bias=use_bias, key=keys[2])
        self.lin_edge = None if edge_dim is None else eqx.nn.Linear(edge_dim, width, use_bias=False, key=keys[3])
        self.lin_skip = eqx.nn.Linear(in_dst, out, use_bias=use_bias, key=keys[4]) if root_weight else None
        self.lin_beta = (eqx.nn.Linear(3 * out, 1, use_bias=False, key=keys[5]) if root_weight and beta else None)
        self.heads, self.concat = heads, concat

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
        layer = cls((w["key_kernel"].shape[0], in_dst), width // heads, heads, concat, beta="beta_kernel" in w,
                    edge_dim=w["edge_kernel"].shape[0] if "edge_kernel" in w else None,
                    use_bias="query_bias" in w, root_weight=root_weight, key=jax.random.key(0))
        fields = {}
        for n in ("query", "key", "value", "edge", "skip", "beta"):
            fields[f"{n}_kernel"] = lambda m, n=n: getattr(m, f"lin_{n}").weight
            fields[f"{n}_bias"] = lambda m, n=n: getattr(m, f"lin_{n}").bias
        return _load(layer, fields, w)


class GNOBlock(eqx.Module):
    """A graph-neural-operator block: ``out_i = reduce_{e=(j->i)} K(dx_e) f_j (+ W_skip f_dst_i + b)``.

    The kernel ``K(dx) = V relu(U dx + b_u) + b_v`` is a matrix (``out_features x in_features``)
    or, with ``kernel="diagonal"``, a per-channel scale (``out_features == in_features``); the
    integral is the fused :func:`jaxgraphops.gno_conv` (kappa is never formed).

    Fields: ``U [kernel_width, coord_dim]``, ``b_u``, ``V [P, kernel_width]``, ``b_v [P]``
    (``P = out_features * in_features`` or ``in_features``); ``skip`` an ``eqx.nn.Linear``
    (``skip_features -> out_features``) or None.

    **Arguments:**

    - ``in_features``, ``out_features``: feature sizes ``c_in``, ``c_out``.
    - ``coord_dim``: ``d``, the size of an edge vector.
    - ``kernel_width``: hidden width ``H`` of the kernel MLP.
    - ``kernel``: ``"matrix"`` or ``"diagonal"``.
    - ``reduce``: ``"mean"`` or ``"sum"`` over the in-edges (weighted with ``edge_weight``).
    - ``skip``: add a linear skip connection from the destination features.
    - ``skip_features``: features of ``f_dst`` (default ``in_features``).
    - ``key``: PRNG key.

    Call ``layer(g, f_src, dx, f_dst=None, edge_weight=None)``; returns ``[n_dst, out_features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = GNOBlock(4, 8, 2, kernel_width=16, key=jax.random.key(0))
    >>> layer(g, jnp.ones((3, 4)), jnp.ones((3, 2))).shape
    (3, 8)
    """

    U: jax.Array
    b_u: jax.Array
    V: jax.Array
    b_v: jax.Array
    skip: eqx.nn.Linear | None
    kernel: str = eqx.field(static=True)
    reduce: str = eqx.field(static=True)

    def __init__(self, in_features: int, out_features: int, coord_dim: int, kernel_width: int = 64,
                 kernel: str = "matrix", reduce: str = "mean", skip: bool = True, skip_features: int | None = None,
                 *, key: jax.Array):
        check_block("GNOBlock", in_features, out_features, kernel, reduce, kernel_width)
        k_kernel, k_skip = jax.random.split(key)
        w = init_kernel(k_kernel, coord_dim, kernel_width, in_features, out_features, kernel)
        self.U, self.b_u, self.V, self.b_v = w["U"], w["b_u"], w["V"], w["b_v"]
        self.skip = (eqx.nn.Linear(skip_features or in_features, out_features, key=k_skip) if skip else None)
        self.kernel, self.reduce = kernel, reduce

    def __call__(self, g: Graph, f_src, dx, f_dst=None, edge_weight=None):
        skip_kernel = skip_bias = None
        if self.skip is not None:
            f_dst = skip_input("GNOBlock", g, f_src, f_dst)
            skip_kernel, skip_bias = self.skip.weight.T, self.skip.bias
        return gno_block(g, f_src, dx, self.U, self.b_u, self.V, self.b_v, skip_kernel, skip_bias, f_dst,
                         kernel=self.kernel, reduce=self.reduce, edge_weight=edge_weight)


class RGCNConv(eqx.Module):
    """Relational graph convolution (PyG's ``RGCNConv`` and ``FastRGCNConv``) on :func:`jaxgraphops.agg_hg_basis`.

    ``out_i = x_i root + bias + sum_r sum_{j in N_r(i)} c_{i,r} x_j W_r`` with ``c_{i,r} = 1 / |N_r(i)|``
    (``aggr="mean"``: a mean per relation; a relation absent at ``i`` adds nothing) or 1 (``"add"``,
    ``"sum"``). ``W_r`` is a weight per relation, ``sum_b comp[r, b] weight[b]`` with ``num_bases``, or
    block-diagonal with ``num_blocks`` (float features only). Float features take one fused
    aggregation and one matmul with the stacked weights; node ids (``x`` None: ``arange``, or an
    integer array, PyG's featureless input) read rows of ``W_r`` and ``root`` as embeddings. The
    edge order is free (PyG's ``is_sorted`` only changes its speed).

    Fields as PyG's parameters, in PyG's layout: ``weight [R, F, out]`` (``[B, F, out]`` with
    ``comp [R, B]``; ``[R, nb, F/nb, out/nb]`` with blocks), ``root [F_dst, out]`` (None without
    ``root_weight``), ``bias [out]`` (zeros at first; None without ``use_bias``); PyG's glorot
    initialisation.

    **Arguments:**

    - ``in_features``: ``F``, or ``(F_src, F_dst)`` for a bipartite graph; for node-id input the
      number of node ids (PyG's ``in_channels``).
    - ``out_features``: output features.
    - ``num_relations``: R, the number of edge types.
    - ``num_bases``: B, basis decomposition (None: a full weight per relation).
    - ``aggr``: ``mean``, ``add`` or ``sum``.
    - ``root_weight``, ``use_bias``: PyG's ``root_weight`` and ``bias``.
    - ``num_blocks``: block-diagonal decomposition into this many blocks.
    - ``key``: PRNG key for the initial weights.

    Call ``layer(g, x, edge_types)``: ``x`` is ``[n_src, F]`` features (or a pair ``(x_src, x_dst)``
    for a bipartite graph), integer node ids ``[n_src]`` (or a pair), or None; ``edge_types`` is an
    integer ``[n_edges]`` in input edge order. Returns ``[n_dst, out_features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = RGCNConv(4, 8, num_relations=3, num_bases=2, key=jax.random.key(0))
    >>> layer(g, jnp.ones((3, 4)), jnp.array([0, 2, 1])).shape
    (3, 8)
    """

    weight: jax.Array
    comp: jax.Array | None
    root: jax.Array | None
    bias: jax.Array | None
    aggr: str = eqx.field(static=True)

    def __init__(self, in_features: int | tuple[int, int], out_features: int, num_relations: int,
                 num_bases: int | None = None, aggr: str = "mean", root_weight: bool = True, use_bias: bool = True,
                 num_blocks: int | None = None, *, key: jax.Array):
        check_rgcn_config("RGCNConv", num_relations, num_bases, num_blocks, aggr)
        in_src, in_dst = in_features if isinstance(in_features, tuple) else (in_features, in_features)
        shape = rgcn_kernel_shape("RGCNConv", num_relations, num_bases, num_blocks, in_src, out_features)
        k_weight, k_comp, k_root = jax.random.split(key, 3)
        self.weight = pyg_glorot(k_weight, shape)
        self.comp = None if num_bases is None else pyg_glorot(k_comp, (num_relations, num_bases))
        self.root = pyg_glorot(k_root, (in_dst, out_features)) if root_weight else None
        self.bias = jnp.zeros(out_features) if use_bias else None
        self.aggr = aggr

    def __call__(self, g: Graph, x, edge_types):
        w = {"kernel": self.weight, "comp": self.comp, "root_kernel": self.root, "bias": self.bias}
        return rgcn_conv(g, x, edge_types, {k: v for k, v in w.items() if v is not None}, aggr=self.aggr)

    @classmethod
    def from_pyg(cls, state_dict, *, aggr: str = "mean") -> RGCNConv:
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
        layer = cls(aggr=aggr, **rgcn_config_from_weights(w), key=jax.random.key(0))
        fields = {"kernel": lambda m: m.weight, "comp": lambda m: m.comp, "root_kernel": lambda m: m.root,
                  "bias": lambda m: m.bias}
        for name, value in w.items():
            layer = eqx.tree_at(fields[name], layer, value)
        return layer


class DMPNNEncoder(eqx.Module):
    """Chemprop's directed message-passing encoder (``BondMessagePassing``) on :func:`jaxgraphops.agg_dmpnn`.

    On the bond graph ``g`` (edges = directed bonds), with atom features ``V``, bond features ``E``
    and ``tau`` the activation::

        H0 = W_i([V[src] | E]);  H = tau(H0)
        depth - 1 times:  (undirected: H = (H + H[rev]) / 2)
                          H = tau(H0 + W_h(sum_{e' into src(e)} H[e'] - H[rev(e)]))
        out = tau(W_o([V | sum of H over the bonds into each atom]))
        with atom_descriptors V_d:  out = W_d([out | V_d])

    Dropout is not supported (Chemprop's default is 0).

    Fields as Chemprop's: ``W_i``, ``W_h`` (``eqx.nn.Linear``, biases with ``use_bias``), ``W_o``
    (with a bias), ``W_d`` (with ``d_vd``, else None).

    **Arguments:**

    - ``d_v``, ``d_e``: atom and bond features.
    - ``d_h``: hidden (and output) features.
    - ``depth``: message-passing steps, counting the first (Chemprop's ``depth``).
    - ``undirected``: average each bond state with its reverse before each message.
    - ``use_bias``: biases on ``W_i`` and ``W_h`` (Chemprop's ``bias``).
    - ``d_vd``: atom-descriptor features (None: no ``W_d``).
    - ``activation``: ``tau`` (Chemprop's default ``relu``).
    - ``key``: PRNG key for the initial weights.

    Call ``layer(g, atom_features, bond_features, rev_edge_ids, atom_descriptors=None)``:
    ``atom_features [n_atoms, d_v]``, ``bond_features [n_edges, d_e]`` in ``g``'s edge order,
    ``rev_edge_ids [n_edges]`` the id of each bond's reverse (Chemprop's ``rev_edge_index``; -1 for
    none); returns ``[n_atoms, d_h]`` (``[n_atoms, d_h + d_vd]`` with descriptors).

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 1, 2]), jnp.array([1, 0, 2, 1]))  # bonds 0-1, 1-2
    >>> layer = DMPNNEncoder(5, 2, 16, depth=3, key=jax.random.key(0))
    >>> layer(g, jnp.ones((3, 5)), jnp.ones((4, 2)), jnp.array([1, 0, 3, 2])).shape
    (3, 16)
    """

    W_i: eqx.nn.Linear
    W_h: eqx.nn.Linear
    W_o: eqx.nn.Linear
    W_d: eqx.nn.Linear | None
    depth: int = eqx.field(static=True)
    undirected: bool = eqx.field(static=True)
    activation: Callable = eqx.field(static=True)

    def __init__(self, d_v: int, d_e: int, d_h: int, depth: int = 3, undirected: bool = False,
                 use_bias: bool = False, d_vd: int | None = None, activation: Callable = jax.nn.relu, *,
                 key: jax.Array):
        check_dmpnn_config("DMPNNEncoder", depth, undirected)
        keys = jax.random.split(key, 4)
        self.W_i = eqx.nn.Linear(d_v + d_e, d_h, use_bias=use_bias, key=keys[0])
        self.W_h = eqx.nn.Linear(d_h, d_h, use_bias=use_bias, key=keys[1])
        self.W_o = eqx.nn.Linear(d_v + d_h, d_h, key=keys[2])
        self.W_d = None if d_vd is None else eqx.nn.Linear(d_h + d_vd, d_h + d_vd, key=keys[3])
        self.depth, self.undirected, self.activation = depth, undirected, activation

    def __call__(self, g: Graph, atom_features, bond_features, rev_edge_ids, atom_descriptors=None):
        w = {name: {"kernel": lin.weight.T, "bias": lin.bias} for name, lin in
             (("W_i", self.W_i), ("W_h", self.W_h), ("W_o", self.W_o), ("W_d", self.W_d)) if lin is not None}
        return dmpnn_encoder(g, atom_features, bond_features, rev_edge_ids, w, depth=self.depth,
                             undirected=self.undirected, activation=self.activation,
                             atom_descriptors=atom_descriptors)

    @classmethod
    def from_chemprop(cls, state_dict, *, depth: int = 3, undirected: bool = False,
                      activation: Callable = jax.nn.relu) -> DMPNNEncoder:
        """The layer with the weights of a Chemprop ``BondMessagePassing.state_dict()``.

        Sizes, ``use_bias`` and ``d_vd`` follow from the entries; give Chemprop's ``depth``,
        ``undirected`` and activation. Scaling transforms (``V_d_transform``, ``graph_transform``)
        are not read: apply them to the inputs.

        >>> import numpy as np
        >>> sd = {"W_i.weight": np.ones((16, 7)), "W_h.weight": np.ones((16, 16)), "W_o.weight": np.ones((16, 21)),
        ...       "W_o.bias": np.zeros(16)}
        >>> layer = DMPNNEncoder.from_chemprop(sd, depth=4)
        >>> layer.W_i.weight.shape, layer.W_h.bias is None, layer.W_d is None
        ((16, 7), True, True)
        """
        w = dmpnn_weights_from_chemprop("DMPNNEncoder.from_chemprop", state_dict)
        d_h = w["W_h"]["kernel"].shape[0]
        d_v = w["W_o"]["kernel"].shape[0] - d_h
        d_vd = w["W_d"]["kernel"].shape[0] - d_h if "W_d" in w else None
        layer = cls(d_v, w["W_i"]["kernel"].shape[0] - d_v, d_h, depth, undirected, use_bias="bias" in w["W_i"],
                    d_vd=d_vd, activation=activation, key=jax.random.key(0))
        for name, p in w.items():
            layer = eqx.tree_at(lambda m, n=name: getattr(m, n).weight, layer, p["kernel"].T)
            if "bias" in p:
                layer = eqx.tree_at(lambda m, n=name: getattr(m, n).bias, layer, p["bias"])
        return layer


class InteractionNetwork(eqx.Module):
    """An interaction-network step (MeshGraphNet / GraphCast processor block) on :func:`jaxgraphops.update_efeat`.

    ``e' = edge_mlp([e | x_src[src] | x_dst[dst]])``, ``x' = node_mlp([x_dst | sum_{e into i} e'])``;
    with ``residual`` it returns ``(x_dst + x', e + e')`` (the sum is over ``e'``, before the
    residual), else ``(x', e')``: then it is ``jraph.InteractionNetwork`` with update functions that
    concatenate their inputs.

    **Arguments:**

    - ``edge_mlp``: the edge update on one row, ``[F_e + F_src + F_dst] -> [F_e']`` (an equinox
      module such as ``eqx.nn.MLP``, or any function); it is vmapped over the edges.
    - ``node_mlp``: the node update on one row, ``[F_dst + F_e'] -> [F']``, vmapped over the nodes.
    - ``residual``: add the inputs to the outputs (needs ``F_e' = F_e`` and ``F' = F_dst``).

    Call ``layer(g, nodes, edges)``: ``nodes [n, F]`` for a square graph, or a pair ``(x_src,
    x_dst)`` (bipartite: only the destinations are updated); ``edges [n_edges, F_e]`` in input edge
    order. Returns ``(nodes', edges')``.

    >>> import jax, jax.numpy as jnp, equinox as eqx, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> k1, k2 = jax.random.split(jax.random.key(0))
    >>> layer = InteractionNetwork(eqx.nn.MLP(4 + 8 + 8, 4, 16, 1, key=k1), eqx.nn.MLP(8 + 4, 8, 16, 1, key=k2))
    >>> [a.shape for a in layer(g, jnp.ones((3, 8)), jnp.ones((3, 4)))]
    [(3, 8), (3, 4)]
    """

    edge_mlp: Callable
    node_mlp: Callable
    residual: bool = eqx.field(static=True)

    def __init__(self, edge_mlp: Callable, node_mlp: Callable, residual: bool = True):
        self.edge_mlp, self.node_mlp, self.residual = edge_mlp, node_mlp, residual

    def __call__(self, g: Graph, nodes, edges):
        return interaction_network(g, nodes, edges, jax.vmap(self.edge_mlp), jax.vmap(self.node_mlp),
                                   residual=self.residual)


# -- PyG's common layers: GCNConv, GINConv, GINEConv, EdgeConv, readouts, GraphNorm ---------------

class GCNConv(eqx.Module):
    """Graph convolution exactly as PyG's ``GCNConv``: ``out = D^-1/2 Â D^-1/2 x W^T + b``.

    ``Â`` is the (weighted) adjacency with PyG's remaining self loops (:func:`jaxgraphops.nn.gcn_norm`:
    every node gets one loop of weight 1, 2 with ``improved``; a node with a loop keeps its weight
    when ``edge_weight`` is given) and ``D`` its weighted in-degrees. With ``normalize=False`` the
    layer sums ``edge_weight``-weighted messages as they are: that is how PyG's ``cached=True``
    reads here, ``g_hat, w_hat = gcn_norm(g)`` once, then ``layer(g_hat, x, w_hat)`` with
    ``normalize=False``. The graph work is one fused :func:`jaxgraphops.agg_weighted`.

    Fields as PyG's parameters: ``lin`` (``[out, in]``, no bias), ``bias [out]`` (zeros at first;
    None without ``use_bias``).

    **Arguments:**

    - ``in_features``, ``out_features``: feature sizes.
    - ``improved``: self loops of weight 2.
    - ``add_self_loops``: add them (None: as ``normalize``, PyG's default; True needs ``normalize``).
    - ``normalize``: symmetric normalisation on the fly.
    - ``use_bias``: add ``bias`` (PyG's ``bias``).
    - ``key``: PRNG key for the initial weight (glorot, as PyG's).

    Call ``layer(g, x, edge_weight=None)``: ``x [n, in_features]``, ``edge_weight [n_edges]`` in
    input edge order; returns ``[n, out_features]``.

    >>> import jax, jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2, 2]), jnp.array([1, 2, 1, 2]))
    >>> layer = GCNConv(4, 8, key=jax.random.key(0))
    >>> layer(g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    lin: eqx.nn.Linear
    bias: jax.Array | None
    improved: bool = eqx.field(static=True)
    add_self_loops: bool = eqx.field(static=True)
    normalize: bool = eqx.field(static=True)

    def __init__(self, in_features: int, out_features: int, improved: bool = False, add_self_loops: bool | None = None,
                 normalize: bool = True, use_bias: bool = True, *, key: jax.Array):
        loops = normalize if add_self_loops is None else add_self_loops
        if loops and not normalize:
            raise ValueError("GCNConv: add_self_loops=True needs normalize=True (PyG: self loops are added by the "
                             "on-the-fly normalisation)")
        self.lin = eqx.nn.Linear(in_features, out_features, use_bias=False, key=key)
        self.lin = eqx.tree_at(lambda m: m.weight, self.lin,
                               jax.nn.initializers.glorot_uniform()(key, (out_features, in_features)))
        self.bias = jnp.zeros(out_features) if use_bias else None
        self.improved, self.add_self_loops, self.normalize = improved, loops, normalize

    def __call__(self, g: Graph, x, edge_weight=None):
        return gcn_conv(g, x, self.lin.weight.T, self.bias, edge_weight=edge_weight, normalize=self.normalize,
                        improved=self.improved, add_loops=self.add_self_loops)

    @classmethod
    def from_pyg(cls, state_dict, *, improved: bool = False, add_self_loops: bool | None = None,
                 normalize: bool = True) -> GCNConv:
        """The layer with the weights of a PyG ``GCNConv.state_dict()`` (``lin.weight``, ``bias``);
        give PyG's ``improved``, ``add_self_loops`` and ``normalize``.

        >>> import numpy as np
        >>> GCNConv.from_pyg({"lin.weight": np.ones((8, 4)), "bias": np.zeros(8)}).lin.weight.shape
        (8, 4)
        """
        w = gcn_weights_from_pyg("GCNConv.from_pyg", state_dict)
        in_features, out_features = w["kernel"].shape
        layer = cls(in_features, out_features, improved, add_self_loops, normalize, use_bias="bias" in w,
                    key=jax.random.key(0))
        return _load(layer, {"kernel": lambda m: m.lin.weight, "bias": lambda m: m.bias}, w)


def _rows(module):
    """``module`` (per row, e.g. ``eqx.nn.MLP``) applied to every row of a ``[rows, F]`` array."""
    return None if module is None else jax.vmap(module)


def _sequential(layers: dict, activation: Callable):
    """An ``eqx.nn.Sequential`` of ``Linear`` layers at the indices of a linear stack
    (``linear_stack_from_pyg``) with ``activation`` at the other positions; one ``Linear`` for index None."""
    def linear(p):
        n_in, n_out = p["kernel"].shape
        lin = eqx.nn.Linear(n_in, n_out, use_bias="bias" in p, key=jax.random.key(0))
        lin = eqx.tree_at(lambda m: m.weight, lin, p["kernel"].T)
        return eqx.tree_at(lambda m: m.bias, lin, p["bias"]) if "bias" in p else lin

    if None in layers:
        return linear(layers[None])
    return eqx.nn.Sequential([linear(layers[i]) if i in layers else eqx.nn.Lambda(activation)
                              for i in range(max(layers) + 1)])


class GINConv(eqx.Module):
    """Graph isomorphism convolution (PyG's ``GINConv``): ``out_i = nn((1 + eps) x_i + sum_{j->i} x_j)``.

    The sum is one fused :func:`jaxgraphops.agg_simple`; ``nn`` is vmapped over the rows.

    **Arguments:**

    - ``nn``: the update on one row, ``[F] -> [F']`` (``eqx.nn.MLP``, ``eqx.nn.Sequential``, any function).
    - ``eps``: the (initial) epsilon.
    - ``train_eps``: store epsilon as a ``[1]`` array (trained with the weights), else as a float.

    Call ``layer(g, x)``: ``x [n, F]`` or a pair ``(x_src, x_dst)`` (bipartite, one width); returns
    ``[n_dst, F']``.

    >>> import jax, jax.numpy as jnp, equinox as eqx, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = GINConv(eqx.nn.MLP(4, 8, 16, 1, key=jax.random.key(0)), train_eps=True)
    >>> layer(g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    nn: Callable
    eps: jax.Array | float

    def __init__(self, nn: Callable, eps: float = 0.0, train_eps: bool = False):
        self.nn, self.eps = nn, jnp.full(1, eps, jnp.float32) if train_eps else float(eps)

    def __call__(self, g: Graph, x):
        return gin_conv(g, x, self.eps, _rows(self.nn))

    @classmethod
    def from_pyg(cls, state_dict, *, train_eps: bool = False, activation: Callable = jax.nn.relu) -> GINConv:
        """The layer with the weights of a PyG ``GINConv.state_dict()`` whose ``nn`` is a
        ``torch.nn.Sequential`` of ``Linear`` layers and activations, one ``Linear``, or a PyG
        ``MLP`` with ``norm=None`` (read as ``Sequential(Linear, act, Linear, ...)``).

        ``nn`` becomes an ``eqx.nn.Sequential`` with the ``Linear`` layers at their positions and
        ``activation`` (PyG's ``ReLU`` by default) at the others; give PyG's ``train_eps``.

        >>> import numpy as np
        >>> sd = {"eps": np.full(1, 0.5), "nn.0.weight": np.ones((16, 4)), "nn.2.weight": np.ones((8, 16))}
        >>> layer = GINConv.from_pyg(sd)
        >>> layer.eps, len(layer.nn.layers)
        (0.5, 3)
        """
        w = gin_weights_from_pyg("GINConv.from_pyg", state_dict)
        return cls(_sequential(w["nn"], activation), float(w["eps"][0]), train_eps)


class GINEConv(eqx.Module):
    """GIN with edge features (PyG's ``GINEConv``): ``out_i = nn((1 + eps) x_i + sum_{j->i} relu(x_j + e_ji))``.

    ``e_ji`` is the edge's attribute, mapped to ``F`` features by ``lin`` (PyG's, with ``edge_dim``),
    else it must have ``F`` features already. The per-edge sums are one fused
    :func:`jaxgraphops.update_efeat`, their reduction one :func:`jaxgraphops.agg_simple`.

    **Arguments:**

    - ``nn``, ``eps``, ``train_eps``: as in :class:`GINConv`.
    - ``edge_dim``: the edge attributes' width (None: no ``lin``).
    - ``in_features``: ``F``, ``lin``'s output (needed with ``edge_dim``; PyG reads it off ``nn``).
    - ``key``: PRNG key for ``lin`` (with ``edge_dim``).

    Call ``layer(g, x, edge_attr)``: ``x [n, F]`` or a pair ``(x_src, x_dst)``, ``edge_attr
    [n_edges, edge_dim or F]`` in input edge order; returns ``[n_dst, F']``.

    >>> import jax, jax.numpy as jnp, equinox as eqx, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> k1, k2 = jax.random.split(jax.random.key(0))
    >>> layer = GINEConv(eqx.nn.Linear(4, 8, key=k1), edge_dim=2, in_features=4, key=k2)
    >>> layer(g, jnp.ones((3, 4)), jnp.ones((3, 2))).shape
    (3, 8)
    """

    nn: Callable
    eps: jax.Array | float
    lin: eqx.nn.Linear | None

    def __init__(self, nn: Callable, eps: float = 0.0, train_eps: bool = False, edge_dim: int | None = None,
                 in_features: int | None = None, *, key: jax.Array | None = None):
        self.nn, self.eps = nn, jnp.full(1, eps, jnp.float32) if train_eps else float(eps)
        if edge_dim is None:
            self.lin = None
        elif in_features is None or key is None:
            raise ValueError("GINEConv: edge_dim needs in_features (lin's output width) and key")
        else:
            self.lin = eqx.nn.Linear(edge_dim, in_features, key=key)

    def __call__(self, g: Graph, x, edge_attr):
        bias = None if self.lin is None else self.lin.bias
        return gine_conv(g, x, edge_attr, self.eps, _rows(self.nn), _kernel(self.lin), bias)

    @classmethod
    def from_pyg(cls, state_dict, *, train_eps: bool = False, activation: Callable = jax.nn.relu) -> GINEConv:
        """The layer with the weights of a PyG ``GINEConv.state_dict()``: ``nn`` and ``eps`` as in
        :meth:`GINConv.from_pyg`, ``lin`` (``edge_dim``) from ``lin.weight`` and ``lin.bias``.

        >>> import numpy as np
        >>> sd = {"eps": np.zeros(1), "nn.weight": np.ones((8, 4)), "lin.weight": np.ones((4, 2)),
        ...       "lin.bias": np.zeros(4)}
        >>> GINEConv.from_pyg(sd).lin.weight.shape
        (4, 2)
        """
        w = gin_weights_from_pyg("GINEConv.from_pyg", state_dict, edge=True)
        layer = cls(_sequential(w["nn"], activation), float(w["eps"][0]), train_eps)
        if "edge_kernel" in w:
            p = {"kernel": w["edge_kernel"], **({"bias": w["edge_bias"]} if "edge_bias" in w else {})}
            layer = eqx.tree_at(lambda m: m.lin, layer, _sequential({None: p}, activation),
                                is_leaf=lambda v: v is None)
        return layer


class EdgeConv(eqx.Module):
    """Edge convolution (DGCNN, PyG's ``EdgeConv``): ``out_i = aggr_{j->i} nn([x_i | x_j - x_i])``.

    The per-edge pairs come from one fused :func:`jaxgraphops.update_efeat`, the reduction
    (``max``, ``sum`` or ``mean``; 0 for an empty neighbourhood) from :func:`jaxgraphops.agg_simple`.

    **Arguments:**

    - ``nn``: the edge update on one row, ``[2F] -> [F']``, vmapped over the edges.
    - ``aggr``: ``max`` (PyG's default), ``sum`` or ``mean``.

    Call ``layer(g, x)``: ``x [n, F]`` or a pair ``(x_src, x_dst)``; returns ``[n_dst, F']``.

    >>> import jax, jax.numpy as jnp, equinox as eqx, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 2]), jnp.array([1, 2, 1]))
    >>> layer = EdgeConv(eqx.nn.MLP(8, 8, 16, 1, key=jax.random.key(0)))
    >>> layer(g, jnp.ones((3, 4))).shape
    (3, 8)
    """

    nn: Callable
    aggr: str = eqx.field(static=True)

    def __init__(self, nn: Callable, aggr: str = "max"):
        check_choice("EdgeConv", "aggr", aggr, EDGE_CONV_AGGRS)
        self.nn, self.aggr = nn, aggr

    def __call__(self, g: Graph, x):
        return edge_conv(g, x, _rows(self.nn), aggr=self.aggr)

    @classmethod
    def from_pyg(cls, state_dict, *, aggr: str = "max", activation: Callable = jax.nn.relu) -> EdgeConv:
        """The layer with the weights of a PyG ``EdgeConv.state_dict()`` (``nn`` as in
        :meth:`GINConv.from_pyg`); give PyG's ``aggr`` (its ``"add"`` is ``"sum"``).

        >>> import numpy as np
        >>> EdgeConv.from_pyg({"nn.weight": np.ones((8, 6))}, aggr="mean").nn.weight.shape
        (8, 6)
        """
        w = edge_conv_weights_from_pyg("EdgeConv.from_pyg", state_dict)
        return cls(_sequential(w["nn"], activation), aggr)


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

    def __init__(self, gate_nn: Callable, nn: Callable | None = None):
        self.gate_nn, self.nn = gate_nn, nn

    def __call__(self, x, batch=None, size=None):
        return attentional_aggregation(x, batch, size, _rows(self.gate_nn), _rows(self.nn))

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
        return cls(_sequential(w["gate_nn"], activation), None if nn is None else _sequential(nn, activation))


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

    def __init__(self, in_features: int, eps: float = 1e-5):
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
        layer = cls(w["weight"].shape[0], eps)
        return _load(layer, {k: (lambda m, k=k: getattr(m, k)) for k in w}, w)
