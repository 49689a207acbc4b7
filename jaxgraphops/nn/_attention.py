"""The attention layers' math as pure functions, shared by the linen, NNX and equinox modules, and their PyG
weight loaders: PyG's ``GATConv``, ``GATv2Conv`` and ``TransformerConv`` on the fused
:func:`~jaxgraphops.mha_gat`, :func:`~jaxgraphops.mha_gat_v2` and :func:`~jaxgraphops.mha_simple`.

Kernels are ``[in, out]``; ``att*`` vectors PyG's ``[1, H, C]``. With ``add_loops`` the graph is PyG's after
``remove_self_loops`` and ``add_self_loops`` (:func:`gat_graph`, static shapes). Edge attributes are projected
densely (``edge_attr @ edge_kernel``) after the padding edges' rows are set to 0
(:func:`~._common.real_edge_rows`): whatever a padding row holds never reaches a weight gradient.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..graph import Graph, check_graph
from ..ops.attention import mha_gat, mha_gat_v2, mha_simple
from ._common import check_features, dst_features, edge_rows, layer_scope, real_edge_rows
from ._pyg import array as _array


# -- GATConv --------------------------------------------------------------------------------------

def _group_of_entry(offsets, n_entries: int):
    n_groups = offsets.shape[0] - 1
    return jnp.repeat(jnp.arange(n_groups, dtype=offsets.dtype), jnp.diff(offsets), total_repeat_length=n_entries)


def gat_graph(g: Graph) -> Graph:
    """PyG's ``remove_self_loops`` then ``add_self_loops`` with static shapes (works inside ``jit``).

    Returns a graph with ``n_src`` sources, ``n_dst + 1`` destinations and ``E + m`` edges,
    ``m = min(n_src, n_dst)``: ``g``'s real edges, except that a self loop of ``g`` is redirected to the
    extra destination ``n_dst`` (where it no longer takes part in any real node's softmax: PyG removes it),
    then the new loops ``i -> i``, then ``g``'s padding edges (:class:`~jaxgraphops.Graph`), still padding:
    with ``R`` real edges, edge ``e < R`` is edge ``e`` of ``g``, edge ``R + i`` the loop of node ``i``, edge
    ``R + m + p`` padding edge ``R + p`` of ``g`` (:func:`gat_edge_order` maps edge arrays between the two
    orders). No sorting: the groupings are moved with prefix sums.
    """
    idx = g.index_dtype
    n_e, n_dst, m = g.n_edges, g.n_dst, min(g.n_src, g.n_dst)
    real = g.csc_offsets[-1]  # R: the padding edges (ids and grouping positions from R on) move past the loops
    nodes = jnp.arange(m, dtype=idx)
    loop_eids = (real + nodes).astype(idx)
    k = jnp.arange(n_e, dtype=idx)
    padding = k >= real

    def new_eid(eid):
        return jnp.where(eid < real, eid, eid + m).astype(idx)

    # CSC: drop the self loops from their groups, append the new loop to groups < m, move the dropped entries
    # into the new last group n_dst, and the padding entries past it.
    grp = _group_of_entry(g.csc_offsets, n_e)
    keep = (g.csc_src != grp) & ~padding
    keep_i = keep.astype(idx)
    kept_before = jnp.cumsum(keep_i) - keep_i  # exclusive prefix count of kept entries
    dropped_before = k - kept_before  # the self loops before a real position
    kept_per_group = jax.ops.segment_sum(keep_i, grp, n_dst)
    counts = kept_per_group + (jnp.arange(n_dst, dtype=idx) < m).astype(idx)
    offsets = jnp.concatenate([jnp.zeros(1, idx), jnp.cumsum(counts).astype(idx)])
    # kept_before at the start of each group (an empty group's start index may be n_e)
    kept_at_start = jnp.concatenate([kept_before, jnp.sum(keep_i, keepdims=True)])[g.csc_offsets[:-1]]
    pos = jnp.where(keep, offsets[grp] + kept_before - kept_at_start[grp],
                    jnp.where(padding, k + m, offsets[n_dst] + dropped_before))
    loop_pos = offsets[:m] + kept_per_group[:m]
    csc_offsets = jnp.concatenate([offsets, (real + m).astype(idx)[None]])

    def scatter(values, extra):
        return jnp.zeros(n_e + m, idx).at[pos].set(values).at[loop_pos].set(extra)

    csc = (csc_offsets, scatter(g.csc_src, nodes), scatter(new_eid(g.csc_eid), loop_eids))

    # CSR: the groups keep their entries (self loops now point at n_dst); the new loop is appended
    # to the groups < m; the padding entries stay after every group.
    grp = _group_of_entry(g.csr_offsets, n_e)
    csr_dst = jnp.where((g.csr_dst == grp) & ~padding, jnp.asarray(n_dst, idx), g.csr_dst)
    shift = jnp.minimum(jnp.arange(g.n_src + 1, dtype=idx), m)
    old_pos = k + jnp.where(padding, m, shift[grp])
    loop_pos = g.csr_offsets[1:m + 1] + nodes
    new = jnp.zeros(n_e + m, idx)
    csr = (g.csr_offsets + shift, new.at[old_pos].set(csr_dst).at[loop_pos].set(nodes),
           new.at[old_pos].set(new_eid(g.csr_eid)).at[loop_pos].set(loop_eids))

    order, _ = gat_edge_order(g)
    src = jnp.concatenate([g.src, nodes])[order]
    dst = jnp.concatenate([jnp.where((g.src == g.dst) & ~padding, jnp.asarray(n_dst, idx), g.dst), nodes])[order]
    out = Graph(src, dst, *csc, *csr, g.n_src, n_dst + 1, validate=False)
    out._checked = g._checked  # valid if g is
    return out


def gat_edge_order(g: Graph):
    """``(order, back)``, ``[E + m]`` each: an array over ``g``'s edges then the ``m`` added loops, ``a``, in the
    edge order of :func:`gat_graph` is ``a[order]``; an array in that order, ``b``, back is ``b[back]``."""
    n_e, m = g.n_edges, min(g.n_src, g.n_dst)
    real = g.csc_offsets[-1]
    j = jnp.arange(n_e + m, dtype=g.index_dtype)
    order = jnp.where(j < real, j, jnp.where(j < real + m, n_e + j - real, j - m))
    back = jnp.where(j < n_e, jnp.where(j < real, j, j + m), real + j - n_e)
    return order, back


def gat_loop_attr(g: Graph, edge_attr, fill_value):
    """The self loops' edge attributes ``[m, D]``: PyG's ``fill_value`` ``"mean"`` (mean of the
    attributes of each node's incoming non-loop edges, 0 without any), or a constant."""
    m = min(g.n_src, g.n_dst)
    if isinstance(fill_value, str):
        not_loop = (g.src != g.dst) & (g.dst < m) & g.real_edge_mask()
        seg = jnp.where(not_loop, g.dst, m)  # loops and edges into nodes >= m go to a dropped segment
        total = jax.ops.segment_sum(edge_attr, seg, m + 1)[:m]
        count = jax.ops.segment_sum(not_loop.astype(edge_attr.dtype), seg, m + 1)[:m]
        return total / jnp.maximum(count, 1)[:, None]
    return jnp.full((m, edge_attr.shape[1]), fill_value, edge_attr.dtype)


def _edge_features(layer: str, g: Graph, edge_attr, edge_kernel, *, add_loops: bool, fill_value):
    """``edge_attr @ edge_kernel`` (``[E (+ m), H*C]``, in :func:`gat_graph`'s edge order with ``add_loops``; 0 at
    the padding edges), or None for a layer without ``edge_dim``; checks ``edge_attr`` (``[E]`` is read as
    ``[E, 1]``)."""
    if edge_kernel is None:
        if edge_attr is not None:
            raise ValueError(f"{layer}: edge_attr given to a layer without edge_dim")
        return None
    if edge_attr is None:
        raise ValueError(f"{layer}: edge_attr is required when the layer has edge_dim")
    edge_attr = real_edge_rows(g, edge_rows(layer, g, "edge_attr", edge_attr, edge_kernel.shape[0]))
    if add_loops:
        loops = gat_loop_attr(g, edge_attr, fill_value).astype(edge_attr.dtype)
        edge_attr = jnp.concatenate([edge_attr, loops])[gat_edge_order(g)[0]]
    return edge_attr @ edge_kernel


def _gat_family(op, g: Graph, h_src, h_dst, attn, edge_feat, *, heads: int, concat: bool,
                negative_slope: float, add_loops: bool, return_attention: bool, dropout: float = 0.0,
                dropout_key=None):
    """Runs ``op`` (``mha_gat`` or ``mha_gat_v2``) on PyG's graph (``gat_graph`` if ``add_loops``), with
    attention dropout ``dropout`` keyed by ``dropout_key``; returns ``out`` or ``(out, alpha)`` with the
    removed loops' weights set to 0."""
    h_dst = h_dst[: g.n_dst]
    back = gat_edge_order(g)[1] if add_loops and return_attention else None
    if add_loops:
        g = gat_graph(g)
        h_dst = jnp.concatenate([h_dst, jnp.zeros((1, h_dst.shape[1]), h_dst.dtype)])
    res = op(g, h_src, h_dst, attn, num_heads=heads, concat_heads=concat, negative_slope=negative_slope,
             edge_feat=edge_feat, return_attention=return_attention, dropout_rate=dropout, dropout_key=dropout_key)
    out, alpha = res if return_attention else (res, None)
    if add_loops:
        out = out[:-1]
        if return_attention:
            alpha = jnp.where((g.dst == g.n_dst - 1)[:, None], jnp.zeros((), alpha.dtype), alpha)[back]
    return out, alpha


def _check_inputs(layer: str, x_src, x_dst, src_kernel, dst_kernel) -> None:
    """The node features have the widths of the kernels that project them (``in_features`` or its pair)."""
    pair = x_dst is not x_src
    check_features(layer, "x_src" if pair else "x", x_src, src_kernel.shape[0])
    check_features(layer, "x_dst" if pair else "x", x_dst, dst_kernel.shape[0], "in_features[1]" if pair else
                   "in_features")


def _add_skip(out, x_dst, res_kernel, bias):
    """``out (+ x_dst @ res_kernel) (+ bias)``: PyG's ``residual`` and ``bias``."""
    if res_kernel is not None:
        out = out + x_dst[: out.shape[0]] @ res_kernel
    return out if bias is None else out + bias


@layer_scope("GATConv")
def gat_conv(g: Graph, x_src, x_dst, src_kernel, dst_kernel, att_src, att_dst, bias, *, concat: bool,
             negative_slope: float, add_loops: bool, edge_attr=None, edge_kernel=None, att_edge=None,
             fill_value="mean", return_attention: bool = False, res_kernel=None, dropout: float = 0.0,
             dropout_key=None):
    """PyG's ``GATConv`` with ``[in, out]`` kernels and PyG's ``att_* [1, H, C]``.

    ``dst_kernel`` is applied to ``x_dst``; ``x_dst`` None means ``x_src`` (square graphs).
    ``edge_kernel``/``att_edge`` None: no edge features; ``res_kernel`` None: no residual.
    Returns ``out`` or ``(out, alpha)`` with ``alpha [E + m, H]``: ``g``'s edges in input order
    (0 for a self loop of ``g`` when ``add_loops``, as PyG removes those), then the
    ``m = min(n_src, n_dst)`` added loops. ``dropout``: PyG's attention dropout (rate), drawn from
    ``dropout_key`` (required when it is > 0; pass 0 for evaluation); ``alpha`` is then the dropped weights.
    """
    check_graph("GATConv", g)
    heads = att_src.shape[-2]
    x_dst_in = x_dst
    x_dst = dst_features("GATConv", g, x_src, x_dst)
    _check_inputs("GATConv", x_src, x_dst, src_kernel, dst_kernel)
    h_src = x_src @ src_kernel
    h_dst = h_src if x_dst_in is None and dst_kernel is src_kernel else x_dst @ dst_kernel
    edge_feat = _edge_features("GATConv", g, edge_attr, edge_kernel, add_loops=add_loops, fill_value=fill_value)
    parts = [att_src, att_dst] + ([] if edge_feat is None else [att_edge])
    out, alpha = _gat_family(
        lambda g, hs, hd, a, **kw: mha_gat(g, hs, a, x_dst=hd, **kw), g, h_src, h_dst,
        jnp.concatenate([a.reshape(-1) for a in parts]), edge_feat, heads=heads, concat=concat,
        negative_slope=negative_slope, add_loops=add_loops, return_attention=return_attention, dropout=dropout,
        dropout_key=dropout_key)
    out = _add_skip(out, x_dst, res_kernel, bias)
    return (out, alpha) if return_attention else out


@layer_scope("GATv2Conv")
def gatv2_conv(g: Graph, x_src, x_dst, src_kernel, src_bias, dst_kernel, dst_bias, att, bias, *, concat: bool,
               negative_slope: float, add_loops: bool, edge_attr=None, edge_kernel=None, fill_value="mean",
               return_attention: bool = False, res_kernel=None, dropout: float = 0.0, dropout_key=None):
    """PyG's ``GATv2Conv``: ``x_l = x_src @ src_kernel + src_bias`` (PyG's ``lin_l``),
    ``x_r = x_dst @ dst_kernel + dst_bias`` (``lin_r``), ``att [1, H, C]``; biases may be None.

    Same graph handling, dropout and return values as :func:`gat_conv`.
    """
    check_graph("GATv2Conv", g)
    heads = att.shape[-2]
    x_dst_in = x_dst
    x_dst = dst_features("GATv2Conv", g, x_src, x_dst)
    _check_inputs("GATv2Conv", x_src, x_dst, src_kernel, dst_kernel)

    def linear(x, kernel, b):
        h = x @ kernel
        return h if b is None else h + b

    h_src = linear(x_src, src_kernel, src_bias)
    shared = x_dst_in is None and dst_kernel is src_kernel and dst_bias is src_bias
    h_dst = h_src if shared else linear(x_dst, dst_kernel, dst_bias)
    edge_feat = _edge_features("GATv2Conv", g, edge_attr, edge_kernel, add_loops=add_loops, fill_value=fill_value)
    out, alpha = _gat_family(mha_gat_v2, g, h_src, h_dst, att.reshape(-1), edge_feat, heads=heads,
                             concat=concat, negative_slope=negative_slope, add_loops=add_loops,
                             return_attention=return_attention, dropout=dropout, dropout_key=dropout_key)
    out = _add_skip(out, x_dst, res_kernel, bias)
    return (out, alpha) if return_attention else out


def _attention_weights_from_pyg(fn: str, layer: str, state_dict, names: dict, required: set, att: str) -> dict:
    """The entries of a PyG attention layer's ``state_dict`` renamed by ``names``: ``[in, out]``
    kernels (torch's ``*.weight`` transposed), ``att* [1, H, C]`` and biases as they are.

    Checks that the keys hold ``required``, stay within ``names``, and that every shape fits the
    ``heads`` and ``out_channels`` read from ``att``.
    """
    keys = set(state_dict)
    if not required <= keys or not keys <= set(names):
        raise ValueError(f"{fn}: state_dict must have the keys {sorted(required)} and may have "
                         f"{sorted(set(names) - required)} (PyG {layer}); got {sorted(keys)}")
    arrays = {k: _array(state_dict[k]) for k in keys}
    a = arrays[att]
    if a.ndim != 3 or a.shape[0] != 1:
        raise ValueError(f"{fn}: {att} must be [1, heads, out_channels]; got shape {tuple(a.shape)}")
    heads, c = a.shape[1:]
    width = heads * c
    for k, v in sorted(arrays.items()):
        if k.startswith("att"):
            ok = v.shape == a.shape
        elif k.endswith("weight"):  # res (PyG's residual) and lin_skip may map to C outputs
            ok = v.ndim == 2 and v.shape[0] in ((width, c) if k.startswith(("res", "lin_skip")) else (width,))
        else:
            ok = v.shape in ((width,), (c,))
        if not ok:
            raise ValueError(f"{fn}: {k} has shape {tuple(v.shape)}, which does not fit heads={heads}, "
                             f"out_channels={c}")
    return {names[k]: (v.T if k.endswith("weight") else v) for k, v in arrays.items()}


def check_output_width(fn: str, w: dict, heads: int, c: int, concat: bool) -> None:
    """``bias`` and ``res_kernel`` of loaded weights must have ``H*C`` outputs (``C`` if not ``concat``)."""
    out = heads * c if concat else c
    for k in ("bias", "res_kernel"):
        if k in w and w[k].shape[-1] != out:
            raise ValueError(f"{fn}: {k} has shape {tuple(w[k].shape)}, which does not fit concat={concat} "
                             f"with heads={heads}, out_channels={c}")


def gat_weights_from_pyg(fn: str, state_dict) -> dict:
    """PyG ``GATConv`` weights as ``{kernel | src_kernel + dst_kernel, att_src, att_dst,
    edge_kernel?, att_edge?, res_kernel?, bias?}``: ``[in, out]`` kernels, ``att_* [1, H, C]``."""
    names = {"lin.weight": "kernel", "lin_src.weight": "src_kernel", "lin_dst.weight": "dst_kernel",
             "att_src": "att_src", "att_dst": "att_dst", "lin_edge.weight": "edge_kernel", "att_edge": "att_edge",
             "res.weight": "res_kernel", "bias": "bias"}
    keys = set(state_dict)
    lins = {"lin.weight"} if "lin.weight" in keys else {"lin_src.weight", "lin_dst.weight"}
    required = {"att_src", "att_dst"} | lins
    if "lin_edge.weight" in keys or "att_edge" in keys:
        required |= {"lin_edge.weight", "att_edge"}
    names = {k: v for k, v in names.items() if k in required or k in ("res.weight", "bias")}
    return _attention_weights_from_pyg(fn, "GATConv", state_dict, names, required, "att_src")


def gatv2_weights_from_pyg(fn: str, state_dict, *, share_weights: bool) -> dict:
    """PyG ``GATv2Conv`` weights as ``{src_kernel, src_bias?, dst_kernel, dst_bias?, att,
    edge_kernel?, res_kernel?, bias?}`` (``[in, out]`` kernels, ``att [1, H, C]``); with
    ``share_weights`` ``kernel`` and ``kernel_bias?`` instead of the src/dst pairs (PyG then
    stores the one ``lin_l`` under ``lin_r`` too: both must agree)."""
    names = {"lin_l.weight": "src_kernel", "lin_l.bias": "src_bias", "lin_r.weight": "dst_kernel",
             "lin_r.bias": "dst_bias", "att": "att", "lin_edge.weight": "edge_kernel", "res.weight": "res_kernel",
             "bias": "bias"}
    required = {"lin_l.weight", "lin_r.weight", "att"}
    w = _attention_weights_from_pyg(fn, "GATv2Conv", state_dict, names, required, "att")
    if ("src_bias" in w) != ("dst_bias" in w):
        raise ValueError(f"{fn}: lin_l.bias and lin_r.bias must both be present or both absent")
    if not share_weights:
        return w
    for k in ("kernel", "bias"):
        src, dst = w.pop(f"src_{k}", None), w.pop(f"dst_{k}", None)
        if src is None:
            continue
        if src.shape != dst.shape or not bool(jnp.all(src == dst)):
            raise ValueError(f"{fn}: share_weights=True needs lin_l and lin_r to be the same weights "
                             f"(PyG's share_weights=True); they differ")
        w["kernel" if k == "kernel" else "kernel_bias"] = src
    return w


# -- TransformerConv ------------------------------------------------------------------------------

TRANSFORMER_PYG_NAMES = {
    "lin_query.weight": "query_kernel", "lin_query.bias": "query_bias", "lin_key.weight": "key_kernel",
    "lin_key.bias": "key_bias", "lin_value.weight": "value_kernel", "lin_value.bias": "value_bias",
    "lin_edge.weight": "edge_kernel", "lin_skip.weight": "skip_kernel", "lin_skip.bias": "skip_bias",
    "lin_beta.weight": "beta_kernel"}


def _affine(x, w: dict, name: str):
    h = x @ w[f"{name}_kernel"]
    bias = w.get(f"{name}_bias")
    return h if bias is None else h + bias


@layer_scope("TransformerConv")
def transformer_conv(g: Graph, x_src, x_dst, w: dict, *, heads: int, concat: bool, edge_attr=None,
                     return_attention: bool = False, dropout: float = 0.0, dropout_key=None):
    """PyG's ``TransformerConv`` from ``[in, out]`` kernels and biases in ``w``:
    ``query/key/value_kernel`` (+ ``_bias``), ``edge_kernel`` (edge_dim), ``skip_kernel``
    (+ ``skip_bias``; root weight) and ``beta_kernel [3 * out, 1]`` (beta gate).

    ``out_i = sum_j alpha_ij (v_j (+ W_e e_ij))`` with ``alpha_ij = softmax_j <q_i, k_j (+ W_e e_ij)>
    / sqrt(C)`` (:func:`jaxgraphops.mha_simple`), then ``+ x_i W_skip`` or the beta-gated mix
    ``b x_i W_skip + (1 - b) out``, ``b = sigmoid([out, x_r, out - x_r] W_beta)``.
    ``dropout``: PyG's attention dropout (rate) on ``alpha``, drawn from ``dropout_key`` (required when it
    is > 0). Returns ``out [n_dst, H*C or C]`` or ``(out, alpha [E, H])`` (input edge order; with dropout the
    dropped weights, where PyG returns them before dropout).
    """
    check_graph("TransformerConv", g)
    x_dst = dst_features("TransformerConv", g, x_src, x_dst)
    _check_inputs("TransformerConv", x_src, x_dst, w["key_kernel"], w["query_kernel"])
    edge_feat = _edge_features("TransformerConv", g, edge_attr, w.get("edge_kernel"), add_loops=False,
                               fill_value=None)
    res = mha_simple(g, _affine(x_dst[: g.n_dst], w, "query"), _affine(x_src, w, "key"), _affine(x_src, w, "value"),
                     num_heads=heads, concat_heads=concat, edge_feat=edge_feat, return_attention=return_attention,
                     dropout_rate=dropout, dropout_key=dropout_key)
    out, alpha = res if return_attention else (res, None)
    if "skip_kernel" in w:
        x_r = _affine(x_dst[: g.n_dst], w, "skip")
        if "beta_kernel" in w:
            b = jax.nn.sigmoid(jnp.concatenate([out, x_r, out - x_r], axis=-1) @ w["beta_kernel"])
            out = b * x_r + (1 - b) * out
        else:
            out = out + x_r
    return (out, alpha) if return_attention else out


def transformer_weights_from_pyg(fn: str, state_dict, *, heads: int, concat: bool, root_weight: bool) -> dict:
    """PyG ``TransformerConv`` weights as the ``w`` of :func:`transformer_conv` (``[in, out]``).

    PyG keeps ``lin_skip`` even with ``root_weight=False``; it is dropped then. ``heads`` and
    ``concat`` are PyG's (the state_dict holds ``H*C`` only).
    """
    keys = set(state_dict)
    required = {"lin_query.weight", "lin_key.weight", "lin_value.weight"}
    if root_weight:
        required.add("lin_skip.weight")
    if not required <= keys or not keys <= set(TRANSFORMER_PYG_NAMES):
        raise ValueError(f"{fn}: state_dict must have the keys {sorted(required)} and may have "
                         f"{sorted(set(TRANSFORMER_PYG_NAMES) - required)} (PyG TransformerConv); got {sorted(keys)}")
    if not root_weight:
        keys = {k for k in keys if not k.startswith(("lin_skip", "lin_beta"))}
    arrays = {k: _array(state_dict[k]) for k in keys}
    width = arrays["lin_query.weight"].shape[0]
    if isinstance(heads, bool) or not isinstance(heads, (int, np.integer)) or heads < 1 or width % heads:
        raise ValueError(f"{fn}: heads must be a positive int dividing the {width} outputs of lin_query; got {heads!r}")
    out = width if concat else width // heads
    in_dst = arrays["lin_query.weight"].shape[1]
    expected = {"lin_query": (width, in_dst), "lin_key": (width, None), "lin_value": (width, None),
                "lin_edge": (width, None), "lin_skip": (out, in_dst), "lin_beta": (1, 3 * out)}
    for k, v in sorted(arrays.items()):
        rows, cols = expected[k.split(".")[0]]
        ok = (v.ndim == 2 and v.shape[0] == rows and cols in (None, v.shape[1]) if k.endswith("weight")
              else v.shape == (rows,))
        if not ok:
            raise ValueError(f"{fn}: {k} has shape {tuple(v.shape)}, which does not fit heads={heads}, "
                             f"concat={concat} and lin_query.weight {tuple(arrays['lin_query.weight'].shape)}")
    with_bias = {k.split(".")[0] for k in keys if k.endswith("bias")}
    if with_bias and with_bias != {k.split(".")[0] for k in keys if k.endswith("weight")} - {"lin_edge", "lin_beta"}:
        raise ValueError(f"{fn}: lin_query, lin_key, lin_value (and lin_skip) must all have a bias or none "
                         f"(PyG's bias); got biases for {sorted(with_bias)}")
    if arrays["lin_key.weight"].shape != arrays["lin_value.weight"].shape:
        raise ValueError(f"{fn}: lin_key.weight and lin_value.weight must have one shape; got "
                         f"{tuple(arrays['lin_key.weight'].shape)} and {tuple(arrays['lin_value.weight'].shape)}")
    return {TRANSFORMER_PYG_NAMES[k]: (v.T if k.endswith("weight") else v) for k, v in arrays.items()}
