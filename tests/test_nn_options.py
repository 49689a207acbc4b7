"""Every layer in every framework: sizes positional and every option keyword-only (PyG's positional order is a
TypeError, not a silent mix-up), options checked at construction, the ``jgo.nn.<Layer>`` named scope in the
lowered HLO, a clear error for inputs of the wrong width, and padding edges whose rows hold NaN never reaching
a weight gradient.

Oracles: the signatures written out here by hand (``POSITIONAL``); the error messages' words; the HLO text; the
same layer on the unpadded graph (``jaxgraphops.pad`` adds padding nodes and edges that every op ignores)."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo

eqx = pytest.importorskip("equinox", reason="equinox not installed: the layers need it")
flax = pytest.importorskip("flax", reason="flax not installed: the layers need it")

import flax.linen as linen  # noqa: E402
from flax import nnx  # noqa: E402

from jaxgraphops.nn import equinox as eqx_nn  # noqa: E402
from jaxgraphops.nn import flax as linen_nn  # noqa: E402
from jaxgraphops.nn import nnx as nnx_nn  # noqa: E402

FRAMEWORKS = {"flax": linen_nn, "nnx": nnx_nn, "equinox": eqx_nn}
LAYERS = ("SAGEConv", "GraphConv", "GCNConv", "GINConv", "GINEConv", "EdgeConv", "GATConv", "GATv2Conv",
          "TransformerConv", "GNOBlock", "RGCNConv", "DMPNNEncoder", "InteractionNetwork", "AttentionalAggregation",
          "GraphNorm", "DimeNetPlusPlus")
# the positional parameters of each layer: its sizes and the modules it cannot do without, nothing else
_IN_OUT = ("in_features", "out_features")
POSITIONAL = {
    "flax": {"SAGEConv": ("features",), "GraphConv": ("features",), "GCNConv": ("features",), "GINConv": ("nn",),
             "GINEConv": ("nn",), "EdgeConv": ("nn",), "GATConv": ("features",), "GATv2Conv": ("features",),
             "TransformerConv": ("features",), "GNOBlock": ("features",), "RGCNConv": ("features", "num_relations"),
             "DMPNNEncoder": ("d_h",), "InteractionNetwork": ("edge_mlp", "node_mlp"),
             "AttentionalAggregation": ("gate_nn",), "GraphNorm": (), "DimeNetPlusPlus": ()},
    "nnx": {"SAGEConv": _IN_OUT, "GraphConv": _IN_OUT, "GCNConv": _IN_OUT, "GINConv": ("nn",), "GINEConv": ("nn",),
            "EdgeConv": ("nn",), "GATConv": _IN_OUT, "GATv2Conv": _IN_OUT, "TransformerConv": _IN_OUT,
            "GNOBlock": _IN_OUT + ("coord_dim",), "RGCNConv": _IN_OUT + ("num_relations",),
            "DMPNNEncoder": ("d_v", "d_e", "d_h"), "InteractionNetwork": ("edge_mlp", "node_mlp"),
            "AttentionalAggregation": ("gate_nn",), "GraphNorm": ("num_features",), "DimeNetPlusPlus": ()},
}
POSITIONAL["equinox"] = {**POSITIONAL["nnx"], "GraphNorm": ("in_features",)}


def _parameters(cls):
    """``cls``'s constructor parameters without ``self`` (linen's ``parent`` and ``name`` included)."""
    return [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]


def test_every_layer_is_exported_in_every_framework():
    for framework, module in FRAMEWORKS.items():
        assert set(LAYERS) <= set(module.__all__), (framework, set(LAYERS) - set(module.__all__))


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_sizes_positional_every_option_keyword_only(framework):
    """Every layer: the positional parameters are exactly its sizes (and required modules), in this order, none
    with a default; every parameter with a default is keyword-only."""
    for name in LAYERS:
        params = _parameters(getattr(FRAMEWORKS[framework], name))
        positional = tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                           and p.default is p.empty)
        assert positional == POSITIONAL[framework][name], (framework, name, positional)
        loose = [p.name for p in params if p.default is not p.empty and p.kind is not p.KEYWORD_ONLY]
        assert not loose, f"{framework} {name}: options that may be given by position: {loose}"


def test_pyg_positional_order_is_a_type_error():
    """A straight port of PyG's ``GATConv(16, 8, 4, True, 0.2, 0.6)`` (heads, concat, negative_slope, dropout)
    would set ``add_self_loops=0.6``: it is a TypeError in every framework, and so is any option given by
    position."""
    with pytest.raises(TypeError):
        linen_nn.GATConv(16, 8, 4, True, 0.2, 0.6)
    with pytest.raises(TypeError):
        nnx_nn.GATConv(16, 8, 4, True, 0.2, 0.6, rngs=nnx.Rngs(0))
    with pytest.raises(TypeError):
        eqx_nn.GATConv(16, 8, 4, True, 0.2, 0.6, key=jax.random.key(0))
    with pytest.raises(TypeError):
        nnx_nn.SAGEConv(16, 8, "max", rngs=nnx.Rngs(0))
    with pytest.raises(TypeError):
        eqx_nn.RGCNConv(16, 8, 3, 2, key=jax.random.key(0))
    with pytest.raises(TypeError):
        linen_nn.DimeNetPlusPlus(128, 1, 4)


# -- construction: the required arguments of every layer, and its options checked -------------------

def _mlp(framework, n_in, n_out):
    if framework == "flax":
        return linen.Dense(n_out)
    if framework == "nnx":
        return nnx.Linear(n_in, n_out, rngs=nnx.Rngs(0))
    return eqx.nn.Linear(n_in, n_out, key=jax.random.key(0))


def _required(framework, name):
    """``(args, kwargs)`` that build ``name`` in ``framework`` for 3 input (2 edge, 2 coordinate) features and 4
    output features, with ``rngs`` / ``key`` where the framework takes them."""
    kw = {"flax": {}, "nnx": {"rngs": nnx.Rngs(0)}, "equinox": {"key": jax.random.key(0)}}[framework]
    modules = {"GINConv": ((3, 4),), "GINEConv": ((3, 4),), "EdgeConv": ((6, 4),), "AttentionalAggregation": ((3, 1),),
               "InteractionNetwork": ((2 + 3 + 3, 2), (3 + 2, 3))}
    if name in modules:
        return tuple(_mlp(framework, *io) for io in modules[name]), (kw if name == "GINEConv" else {})
    if name == "DimeNetPlusPlus":
        return (), dict(hidden=8, out_emb=8, int_emb=4, basis_emb=2, num_blocks=1, cutoff=3.0, **kw)
    if framework == "flax":
        return {"RGCNConv": (4, 2), "GraphNorm": ()}.get(name, (4,)), kw
    if name == "GraphNorm":
        return (3,), {}
    return {"GNOBlock": (3, 4, 2), "RGCNConv": (3, 4, 2), "DMPNNEncoder": (3, 2, 4)}.get(name, (3, 4)), kw


def _build(framework, name, **options):
    args, kw = _required(framework, name)
    return getattr(FRAMEWORKS[framework], name)(*args, **{**kw, **options})


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_every_bool_option_is_checked(framework):
    """Every option whose default is a bool, in every layer: 0.5 is a TypeError naming the layer and the option
    (``add_self_loops=0.6`` is the PyG trap's value)."""
    checked = 0
    for name in LAYERS:
        cls = getattr(FRAMEWORKS[framework], name)
        for p in _parameters(cls):
            if isinstance(p.default, bool):
                with pytest.raises(TypeError, match=rf"{name}: {p.name} must be a bool; got 0\.6"):
                    _build(framework, name, **{p.name: 0.6})
                checked += 1
    assert checked >= 30, checked


BAD_OPTIONS = [  # (layer, option, value, error, message)
    ("GATConv", "heads", 0, ValueError, "GATConv: heads must be a positive int; got 0"),
    ("GATConv", "dropout", 1.0, ValueError, r"GATConv: dropout must be a float in \[0, 1\); got 1.0"),
    ("GATv2Conv", "negative_slope", float("nan"), ValueError, "GATv2Conv: negative_slope must be a finite float"),
    ("GATv2Conv", "fill_value", [1.0], TypeError, "GATv2Conv: fill_value must be 'mean' or a number"),
    ("TransformerConv", "edge_dim", 0, ValueError, "TransformerConv: edge_dim must be None or a positive int"),
    ("GNOBlock", "kernel_width", 2.5, ValueError, "GNOBlock: kernel_width must be a positive int"),
    ("RGCNConv", "num_bases", -1, ValueError, "RGCNConv: num_bases must be None or a positive int"),
    ("DMPNNEncoder", "depth", 0, ValueError, "DMPNNEncoder: depth must be a positive int; got 0"),
    ("GINConv", "eps", "0.1", ValueError, "GINConv: eps must be a finite float"),
    ("GraphNorm", "eps", float("inf"), ValueError, "GraphNorm: eps must be a finite float"),
    ("DimeNetPlusPlus", "cutoff", -1.0, ValueError, "DimeNetPlusPlus: cutoff must be a positive float"),
]


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_range_checks_name_the_layer_and_option(framework):
    for name, option, value, error, message in BAD_OPTIONS:
        with pytest.raises(error, match=message):
            _build(framework, name, **{option: value})


# -- calls: scope, widths, padding --------------------------------------------------------------------

N = 5
BONDS = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (1, 3)]
SRC = np.array([a for a, b in BONDS for a, b in ((a, b), (b, a))])
DST = np.array([b for a, b in BONDS for a, b in ((a, b), (b, a))])
E = SRC.size
REV = np.arange(E) ^ 1  # each bond's two directions are neighbours


def _inputs(name, g, width=3, n_edges=E, nodes=N):
    """The call arguments after the layer of ``name`` (an equinox or NNX layer built by ``_required``)."""
    r = np.random.default_rng(0)
    x = jnp.asarray(r.normal(size=(nodes, width)), jnp.float32)
    e = jnp.asarray(r.normal(size=(n_edges, 2)), jnp.float32)
    if name in ("AttentionalAggregation", "GraphNorm"):
        return (x, jnp.zeros(nodes, jnp.int32), 1)
    if name == "DimeNetPlusPlus":
        pos = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1.2, 0]])
        dg, shifts, batch = jgo.dimenet.radius_graph_pbc([(pos, None, None)], 3.0)
        return (jnp.array([1, 6, 8]), pos, dg, shifts, jgo.dimenet.triplets(dg), batch, 1)
    extra = {"GINEConv": (e,), "GATConv": (e,), "GATv2Conv": (e,), "TransformerConv": (e,), "InteractionNetwork": (e,),
             "GNOBlock": (e,), "RGCNConv": (jnp.asarray(np.arange(n_edges) % 2),), "DMPNNEncoder": (e, REV)}
    return (g, x, *extra.get(name, ()))


def _edge_options(name):
    return {"edge_dim": 2} | ({"in_features": 3} if name == "GINEConv" else {}) if name in (
        "GINEConv", "GATConv", "GATv2Conv", "TransformerConv") else {}


def test_calls_run_in_the_layer_scope():
    """The lowered HLO of every layer's call names ``jgo.nn.<Layer>`` (the shared math runs in
    ``jax.named_scope``; equinox layers, and one linen layer for the framework modules)."""
    g = jgo.Graph.from_edges(SRC, DST, N, N)
    for name in LAYERS:
        layer = _build("equinox", name, **_edge_options(name))
        args = _inputs(name, g)
        text = jax.jit(lambda *a, layer=layer: layer(*a), static_argnums=(len(args) - 1,) if name in (
            "AttentionalAggregation", "GraphNorm", "DimeNetPlusPlus") else ()).lower(*args).as_text(debug_info=True)
        assert f"jgo.nn.{name}" in text, name
    layer = linen_nn.GATConv(4, heads=2)
    x = jnp.ones((N, 3))
    variables = layer.init(jax.random.key(0), g, x)
    assert "jgo.nn.GATConv" in jax.jit(layer.apply).lower(variables, g, x).as_text(debug_info=True)


WIDTH_ERRORS = [  # (layer, the constructor argument the error names)
    ("SAGEConv", "in_features"), ("GraphConv", "in_features"), ("GCNConv", "in_features"),
    ("GINEConv", "in_features"), ("GATConv", "in_features"), ("GATv2Conv", "in_features"),
    ("TransformerConv", "in_features"), ("GNOBlock", "in_features"), ("RGCNConv", "in_features"),
    ("DMPNNEncoder", "d_v")]


@pytest.mark.parametrize("framework", ["nnx", "equinox"])
def test_wrong_in_features_names_the_layer_the_argument_and_the_fix(framework):
    """A layer built for 3 input features called with 4: a ValueError naming the layer, the input, the
    constructor argument and what to build instead (not an XLA ``dot_general`` shape error)."""
    g = jgo.Graph.from_edges(SRC, DST, N, N)
    for name, argument in WIDTH_ERRORS:
        layer = _build(framework, name, **_edge_options(name))
        with pytest.raises(ValueError, match=rf"^{name}: .*{argument}.*build (the layer|it) with {argument}.*4"):
            layer(*_inputs(name, g, width=4))


PADDED_LAYERS = ("GATConv", "GATv2Conv", "TransformerConv", "GINEConv", "DMPNNEncoder", "InteractionNetwork")


def _padding_loss(layer, g, x, e, extra):
    """A loss over the real nodes (and, for ``InteractionNetwork``, the real edges) of ``layer(g, x, e, *extra)``."""
    out = layer(g, x, e, *extra)
    nodes, edges = out if isinstance(out, tuple) else (out, None)
    total = jnp.sum(jnp.sin(nodes[:N]))
    return total if edges is None else total + jnp.sum(jnp.sin(edges[:E]))


def test_padding_edges_holding_nan_never_reach_a_gradient():
    """The layers that project edge features densely (and ``InteractionNetwork``, whose edge MLP reads them through
    ``update_efeat``), on a padded graph whose padding edges' rows hold NaN (and padding node rows 0, as
    ``pad_batch`` writes): the loss over the real nodes and every weight gradient are
    those of the unpadded graph (finite), and the gradient to the padding edges' rows is 0."""
    g = jgo.Graph.from_edges(SRC, DST, N, N)
    padded = jgo.pad(g, N + 1, N + 1, E + 3)
    for name in PADDED_LAYERS:
        layer = _build("equinox", name, **_edge_options(name))
        _, x, e, *extra = _inputs(name, g)
        x_pad, e_pad = jnp.concatenate([x, jnp.zeros((1, 3))]), jnp.concatenate([e, jnp.full((3, 2), jnp.nan)])
        extra_pad = [np.concatenate([REV, [-1, -1, -1]])] if name == "DMPNNEncoder" else extra
        want, want_grads = eqx.filter_value_and_grad(_padding_loss)(layer, g, x, e, extra)
        got, got_grads = eqx.filter_value_and_grad(_padding_loss)(layer, padded, x_pad, e_pad, extra_pad)
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=name)
        for w, gw in zip(jax.tree_util.tree_leaves(want_grads), jax.tree_util.tree_leaves(got_grads)):
            assert np.isfinite(np.asarray(gw)).all(), f"{name}: a weight gradient is not finite"
            np.testing.assert_allclose(gw, w, rtol=1e-4, atol=1e-5, err_msg=name)
        d_edges = jax.grad(lambda e: _padding_loss(layer, padded, x_pad, e, extra_pad))(e_pad)
        np.testing.assert_array_equal(d_edges[E:], 0, err_msg=f"{name}: gradient to the padding edges' rows")


def test_gat_self_loops_keep_padding_edges_apart():
    """``GATConv``/``GATv2Conv`` replace the self loops (PyG's remove and add self loops) on a padded graph with a
    real self loop at a node whose features are NaN: the padding edges stay padding (they used to share the removed
    loops' dropped softmax row, so the NaN reached the padding node's gradient). Oracle: the unpadded graph, whose
    real outputs, gradients and attention weights (real edges, then the added loops) the padded graph must give;
    0 at the padding node's gradient and the padding edges' weights."""
    n, loop = N + 1, N  # node N: a self loop only, NaN features
    g = jgo.Graph.from_edges(np.append(SRC, loop), np.append(DST, loop), n, n)
    padded = jgo.pad(g, n + 1, n + 1, E + 4)
    x = jnp.asarray(np.random.default_rng(1).normal(size=(n, 3)), jnp.float32).at[loop].set(jnp.nan)
    e = jnp.asarray(np.random.default_rng(2).normal(size=(E + 1, 2)), jnp.float32)
    x_pad, e_pad = jnp.concatenate([x, jnp.zeros((1, 3))]), jnp.concatenate([e, jnp.ones((3, 2))])
    for name in ("GATConv", "GATv2Conv"):
        layer = _build("equinox", name, edge_dim=2, heads=2)

        def loss(x, g, e):
            return jnp.sum(jnp.sin(layer(g, x, e)[:N]))  # the real nodes the NaN node does not reach

        want, want_dx = jax.value_and_grad(loss)(x, g, e)
        got, got_dx = jax.value_and_grad(loss)(x_pad, padded, e_pad)
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=name)
        np.testing.assert_allclose(got_dx[:N], want_dx[:N], rtol=1e-4, atol=1e-6, err_msg=name)
        assert got_dx[n].tolist() == [0.0, 0.0, 0.0], f"{name}: the padding node's gradient {got_dx[n]}"
        _, alpha = layer(g, x, e, True)
        _, alpha_pad = layer(padded, x_pad, e_pad, True)
        m, n_e = n, E + 1  # the unpadded graph's loops and edges; the padded one has E + 4 edges, n + 1 loops
        np.testing.assert_allclose(alpha_pad[:n_e], alpha[:n_e], rtol=1e-5, err_msg=name)
        np.testing.assert_array_equal(alpha_pad[n_e:E + 4], 0, err_msg=f"{name}: padding edges' weights")
        np.testing.assert_allclose(alpha_pad[E + 4:E + 4 + m], alpha[n_e:], rtol=1e-5, err_msg=name)
