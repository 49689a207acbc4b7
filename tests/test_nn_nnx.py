"""The flax.nnx layers against the linen layers with the same weights (1e-6), against PyG and Chemprop
through their loaders (1e-5, float32), under nnx.jit / nnx.grad (every param gets a gradient, equal to
linen's), dtypes and errors. The docstring examples run in test_docstrings.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_graph

import jaxgraphops as jgo

pytest.importorskip("flax", reason="flax not installed: the NNX layers need it")

import flax.linen as linen  # noqa: E402
from flax import nnx  # noqa: E402

from jaxgraphops.nn import flax as linen_nn  # noqa: E402
from jaxgraphops.nn import nnx as nnx_nn  # noqa: E402

SAME = dict(rtol=1e-6, atol=1e-6)
PEER = dict(rtol=1e-5, atol=1e-5)


def feats(rng, *shape):
    return jnp.asarray(rng.normal(size=shape), jnp.float32)


def bond_graph():
    """Six bonds in both directions (a ring of four, a tail of two) among 7 atoms; atom 6 has none."""
    bonds = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [1, 4], [4, 5]])
    n = len(bonds)
    g = jgo.Graph.from_edges(np.concatenate([bonds[:, 0], bonds[:, 1]]), np.concatenate([bonds[:, 1], bonds[:, 0]]),
                             7, 7)
    return g, np.concatenate([np.arange(n) + n, np.arange(n)])


def case(name, rng):
    """``(linen layer, NNX layer, call args, call kwargs)`` of one configuration."""
    sq, bi = random_graph(rng, 8, 8, 30), random_graph(rng, 9, 6, 25)
    x, x6, xs, xd = feats(rng, 8, 5), feats(rng, 8, 6), feats(rng, 9, 5), feats(rng, 6, 3)
    ea = feats(rng, sq.n_edges, 3)
    types = jnp.asarray(rng.integers(0, 3, sq.n_edges))
    r = nnx.Rngs(1)
    if name == "sage-max":
        return linen_nn.SAGEConv(7, aggr="max"), nnx_nn.SAGEConv(5, 7, aggr="max", rngs=r), (sq, x), {}
    if name == "sage-bipartite-normalize":
        return (linen_nn.SAGEConv(7, aggr="min", normalize=True, use_bias=False),
                nnx_nn.SAGEConv((5, 3), 7, aggr="min", normalize=True, use_bias=False, rngs=r), (bi, (xs, xd)), {})
    if name == "sage-no-root":
        return (linen_nn.SAGEConv(7, root_weight=False), nnx_nn.SAGEConv(5, 7, root_weight=False, rngs=r), (sq, x),
                {})
    if name == "graph-conv":
        return linen_nn.GraphConv(7), nnx_nn.GraphConv(5, 7, rngs=r), (sq, x), {}
    if name == "graph-conv-right-bipartite":
        return (linen_nn.GraphConv(7, norm="right", add_self_loops=False),
                nnx_nn.GraphConv(5, 7, norm="right", add_self_loops=False, rngs=r), (bi, xs), {})
    if name == "gat-edges-residual":
        return (linen_nn.GATConv(4, heads=2, edge_dim=3, residual=True),
                nnx_nn.GATConv(5, 4, heads=2, edge_dim=3, residual=True, rngs=r), (sq, x, ea),
                {"return_attention_weights": True})
    if name == "gat-bipartite-mean":
        return (linen_nn.GATConv(4, heads=3, concat=False, share_weights=False, negative_slope=0.1),
                nnx_nn.GATConv((5, 3), 4, heads=3, concat=False, share_weights=False, negative_slope=0.1, rngs=r),
                (bi, (xs, xd)), {})
    if name == "gatv2-shared-edges":
        kw = dict(heads=2, edge_dim=3, share_weights=True, residual=True, fill_value=0.5)
        return linen_nn.GATv2Conv(4, **kw), nnx_nn.GATv2Conv(5, 4, **kw, rngs=r), (sq, x, ea), {
            "return_attention_weights": True}
    if name == "gatv2-bipartite":
        kw = dict(heads=2, add_self_loops=False, concat=False)
        return linen_nn.GATv2Conv(4, **kw), nnx_nn.GATv2Conv((5, 3), 4, **kw, rngs=r), (bi, (xs, xd)), {}
    if name == "transformer-beta-edges":
        kw = dict(heads=2, beta=True, edge_dim=3)
        return linen_nn.TransformerConv(4, **kw), nnx_nn.TransformerConv(5, 4, **kw, rngs=r), (sq, x, ea), {
            "return_attention_weights": True}
    if name == "transformer-bipartite":
        kw = dict(heads=2, concat=False, use_bias=False)
        return linen_nn.TransformerConv(4, **kw), nnx_nn.TransformerConv((5, 3), 4, **kw, rngs=r), (bi, (xs, xd)), {}
    if name == "gno-matrix-bipartite":
        dx, w = feats(rng, bi.n_edges, 2), jnp.asarray(rng.uniform(0.5, 1, bi.n_edges), jnp.float32)
        return (linen_nn.GNOBlock(4, kernel_width=6, reduce="sum"),
                nnx_nn.GNOBlock(5, 4, 2, kernel_width=6, reduce="sum", skip_features=3, rngs=r), (bi, xs, dx, xd),
                {"edge_weight": w})
    if name == "gno-diagonal":
        return (linen_nn.GNOBlock(5, kernel_width=6, kernel="diagonal"),
                nnx_nn.GNOBlock(5, 5, 2, kernel_width=6, kernel="diagonal", rngs=r), (sq, x, feats(rng, sq.n_edges, 2)),
                {})
    if name == "rgcn-bases":
        return (linen_nn.RGCNConv(6, 3, num_bases=2), nnx_nn.RGCNConv(5, 6, 3, num_bases=2, rngs=r), (sq, x, types),
                {})
    if name == "rgcn-blocks-sum":
        return (linen_nn.RGCNConv(4, 3, aggr="sum", num_blocks=2),
                nnx_nn.RGCNConv(6, 4, 3, aggr="sum", num_blocks=2, rngs=r), (sq, x6, types), {})
    if name == "rgcn-node-ids":
        return linen_nn.RGCNConv(6, 3), nnx_nn.RGCNConv(8, 6, 3, rngs=r), (sq, None, types), {}
    if name == "dmpnn-descriptors":
        g, rev = bond_graph()
        kw = dict(depth=3, undirected=True, use_bias=True, activation=jnp.tanh)
        return (linen_nn.DMPNNEncoder(8, **kw), nnx_nn.DMPNNEncoder(5, 3, 8, d_vd=2, **kw, rngs=r),
                (g, feats(rng, 7, 5), feats(rng, g.n_edges, 3), rev, feats(rng, 7, 2)), {})
    if name == "interaction-network":
        edges = feats(rng, sq.n_edges, 4)
        return (linen_nn.InteractionNetwork(linen.Dense(4), linen.Dense(5)),
                nnx_nn.InteractionNetwork(nnx.Linear(4 + 5 + 5, 4, rngs=r), nnx.Linear(5 + 4, 5, rngs=r)),
                (sq, x, edges), {})
    if name == "gcn-conv-weighted":
        w = jnp.asarray(rng.uniform(0.5, 2, sq.n_edges), jnp.float32)
        return linen_nn.GCNConv(7, improved=True), nnx_nn.GCNConv(5, 7, improved=True, rngs=r), (sq, x, w), {}
    if name == "gin-mlp-train-eps":
        mlp = nnx.Sequential(nnx.Linear(5, 16, rngs=r), nnx.relu, nnx.Linear(16, 8, rngs=r))
        return (linen_nn.GINConv(linen.Sequential([linen.Dense(16), linen.relu, linen.Dense(8)]), eps=0.1,
                                 train_eps=True), nnx_nn.GINConv(mlp, eps=0.1, train_eps=True), (sq, x), {})
    if name == "gine-edge-dim":
        return (linen_nn.GINEConv(linen.Dense(8), eps=0.2, edge_dim=3),
                nnx_nn.GINEConv(nnx.Linear(5, 8, rngs=r), eps=0.2, edge_dim=3, in_features=5, rngs=r), (sq, x, ea), {})
    if name == "edge-conv-mean-bipartite":
        return (linen_nn.EdgeConv(linen.Dense(8), aggr="mean"),
                nnx_nn.EdgeConv(nnx.Linear(10, 8, rngs=r), aggr="mean"), (bi, (xs, feats(rng, 6, 5))), {})
    ids = jnp.asarray(np.repeat([0, 1, 2], [3, 5, 0]))  # graph 2 is empty
    if name == "attentional-aggregation":
        return (linen_nn.AttentionalAggregation(linen.Dense(1), nn=linen.Dense(6)),
                nnx_nn.AttentionalAggregation(nnx.Linear(5, 1, rngs=r), nn=nnx.Linear(5, 6, rngs=r)), (x,),
                {"batch": ids, "size": 3})
    if name == "graph-norm":
        return linen_nn.GraphNorm(eps=1e-3), nnx_nn.GraphNorm(5, eps=1e-3), (x,), {"batch": ids, "size": 3}
    raise KeyError(name)


CASES = ["sage-max", "sage-bipartite-normalize", "sage-no-root", "graph-conv", "graph-conv-right-bipartite",
         "gat-edges-residual", "gat-bipartite-mean", "gatv2-shared-edges", "gatv2-bipartite", "transformer-beta-edges",
         "transformer-bipartite", "gno-matrix-bipartite", "gno-diagonal", "rgcn-bases", "rgcn-blocks-sum",
         "rgcn-node-ids", "dmpnn-descriptors", "interaction-network", "gcn-conv-weighted", "gin-mlp-train-eps",
         "gine-edge-dim", "edge-conv-mean-bipartite", "attentional-aggregation", "graph-norm"]


def nnx_names(params):
    """linen params named as NNX's: ``nn.Sequential``'s ``layers_<i>`` are ``nnx.Sequential``'s ``layers/<i>``."""
    if not isinstance(params, dict):
        return params
    out = {}
    for k, v in params.items():
        if k.startswith("layers_"):
            out.setdefault("layers", {})[int(k[len("layers_"):])] = nnx_names(v)
        else:
            out[k] = nnx_names(v)
    return out


def loaded(name, rng):
    """The linen layer, its variables (initialised, then perturbed: no zero biases, no unit scales), the NNX
    layer holding them, the call's args and kwargs."""
    linen_layer, layer, args, kwargs = case(name, rng)
    variables = linen_layer.init(jax.random.key(0), *args, **kwargs)
    variables = jax.tree_util.tree_map(lambda v: v + 0.1 * jnp.asarray(rng.normal(size=v.shape), v.dtype), variables)
    return linen_layer, variables, nnx_nn.load_variables(layer, nnx_names(variables)), args, kwargs


def assert_trees_close(a, b, tol):
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_allclose(x, y, **tol)


@pytest.mark.parametrize("name", CASES)
def test_nnx_equals_linen_with_the_same_weights(rng, name):
    linen_layer, variables, layer, args, kwargs = loaded(name, rng)
    assert_trees_close(layer(*args, **kwargs), linen_layer.apply(variables, *args, **kwargs), SAME)


@pytest.mark.parametrize("name", CASES)
def test_nnx_jit_and_grad_reach_every_param(rng, name):
    """nnx.jit equals the eager call; nnx.grad of a loss gives every param a non-zero gradient equal to
    linen's gradient with respect to the same variables."""
    linen_layer, variables, layer, args, kwargs = loaded(name, rng)
    out = layer(*args, **kwargs)
    weights = [jnp.asarray(rng.normal(size=o.shape), o.dtype) for o in jax.tree_util.tree_leaves(out)]

    def loss(outputs):
        return sum(jnp.sum(jnp.tanh(o) * w) for o, w in zip(jax.tree_util.tree_leaves(outputs), weights, strict=True))

    assert_trees_close(nnx.jit(lambda m, a: m(*a, **kwargs))(layer, args), out, SAME)
    grads = nnx.jit(nnx.grad(lambda m, a: loss(m(*a, **kwargs))))(layer, args)
    grads = nnx.to_pure_dict(nnx.state(grads, nnx.Param))
    expect = nnx_names(jax.grad(lambda v: loss(linen_layer.apply(v, *args, **kwargs)))(variables)["params"])
    assert_trees_close(jax.tree_util.tree_map(np.asarray, grads), expect, PEER)
    for path, g in jax.tree_util.tree_leaves_with_path(grads):
        assert np.isfinite(g).all() and np.any(g != 0), f"{name}: no gradient reaches {jax.tree_util.keystr(path)}"


def test_dtype_and_param_dtype(rng):
    g, x = random_graph(rng, 8, 8, 30), feats(rng, 8, 5)
    layer = nnx_nn.SAGEConv(5, 7, dtype=jnp.bfloat16, rngs=nnx.Rngs(0))
    assert layer.neigh_kernel.dtype == jnp.float32
    out = layer(g, x)
    assert out.dtype == jnp.bfloat16
    full = nnx_nn.SAGEConv(5, 7, rngs=nnx.Rngs(0))
    np.testing.assert_allclose(out.astype(jnp.float32), full(g, x), rtol=0.05, atol=0.05)
    half = nnx_nn.GATConv(5, 4, heads=2, param_dtype=jnp.bfloat16, rngs=nnx.Rngs(0))
    assert {p.dtype for p in jax.tree_util.tree_leaves(nnx.state(half, nnx.Param))} == {jnp.dtype(jnp.bfloat16)}
    assert half(g, x.astype(jnp.bfloat16)).dtype == jnp.bfloat16


def test_errors(rng):
    g, x = random_graph(rng, 8, 8, 30), feats(rng, 8, 5)
    r = nnx.Rngs(0)
    with pytest.raises(ValueError, match=r"SAGEConv: in_features must be a positive int or a pair"):
        nnx_nn.SAGEConv((5, 3, 2), 7, rngs=r)
    with pytest.raises(ValueError, match=r"GraphConv: in_features must be a positive int; got \(5, 3\)"):
        nnx_nn.GraphConv((5, 3), 7, rngs=r)
    with pytest.raises(ValueError, match="GraphNorm: num_features must be a positive int; got 0"):
        nnx_nn.GraphNorm(0)
    with pytest.raises(ValueError, match="GINEConv: edge_dim=3 maps the edge attributes to the node features"):
        nnx_nn.GINEConv(nnx.Linear(5, 8, rngs=r), edge_dim=3)
    with pytest.raises(ValueError, match="SAGEConv: aggr must be one of"):
        nnx_nn.SAGEConv(5, 7, aggr="avg", rngs=r)
    with pytest.raises(ValueError, match="GATConv: share_weights=True applies one kernel.*use share_weights=False"):
        nnx_nn.GATConv((5, 3), 4, rngs=r)
    with pytest.raises(ValueError, match="GATv2Conv: fill_value must be one of"):
        nnx_nn.GATv2Conv(5, 4, fill_value="max", rngs=r)
    with pytest.raises(ValueError, match="GNOBlock: kernel='diagonal' needs as many output as input features"):
        nnx_nn.GNOBlock(5, 4, 2, kernel="diagonal", rngs=r)
    with pytest.raises(ValueError, match="RGCNConv: num_bases and num_blocks cannot both be set"):
        nnx_nn.RGCNConv(6, 4, 3, num_bases=2, num_blocks=2, rngs=r)
    with pytest.raises(ValueError, match="DMPNNEncoder: depth must be a positive int"):
        nnx_nn.DMPNNEncoder(5, 3, 8, depth=0, rngs=r)
    with pytest.raises(ValueError, match="SAGEConv: x must be a pair"):
        nnx_nn.SAGEConv(5, 7, rngs=r)(random_graph(rng, 8, 6, 20), x)
    variables = linen_nn.SAGEConv(7, root_weight=False).init(jax.random.key(0), g, x)
    with pytest.raises(ValueError, match=r"load_variables\(SAGEConv\): the params must have the layer's names"):
        nnx_nn.load_variables(nnx_nn.SAGEConv(5, 7, rngs=r), variables)
    with pytest.raises(ValueError, match=r"load_variables\(GraphConv\): variables must be a dict \{'params'"):
        nnx_nn.load_variables(nnx_nn.GraphConv(5, 7, rngs=r), variables["params"])
    with pytest.raises(ValueError, match="SAGEConv.from_pyg: state_dict must have the key 'lin_l.weight'"):
        nnx_nn.SAGEConv.from_pyg({"lin_r.weight": np.ones((7, 5))})
    with pytest.raises(ValueError, match="GATv2Conv.from_pyg: the linear layers' biases and 'bias' must both"):
        nnx_nn.GATv2Conv.from_pyg({"lin_l.weight": np.ones((8, 4)), "lin_r.weight": np.ones((8, 4)),
                                   "att": np.ones((1, 2, 4)), "bias": np.zeros(8)})
    with pytest.raises(ValueError, match="DMPNNEncoder.from_chemprop: state_dict must have the keys"):
        nnx_nn.DMPNNEncoder.from_chemprop({"W_i.weight": np.ones((8, 8))})


# -- peers through the NNX loaders ----------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch", reason="torch not installed (pip install torch)")


def _pyg():
    _torch()
    pytest.importorskip("torch_geometric", reason="torch_geometric not installed (pip install torch-geometric)")
    import torch_geometric.nn as pyg_nn

    return pyg_nn


def state_dict(module):
    return {k: v.detach().numpy() for k, v in module.state_dict().items()}


def randomize(module):
    """Non-zero biases and larger attention vectors, so that every parameter counts."""
    torch = _torch()
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("bias") or name.startswith("att"):
                p.normal_()


def compare_with_torch(torch_fn, our_fn, xs, rng):
    """Outputs (and attention weights) of both, and the gradients of ``sum(out * r)`` with respect to ``xs``."""
    torch = _torch()
    txs = [torch.tensor(np.asarray(x), requires_grad=True) for x in xs]
    t_out = torch_fn(*txs)
    r = rng.normal(size=tuple(t_out.shape)).astype(np.float32)
    (t_out * torch.tensor(r)).sum().backward()
    out, vjp = jax.vjp(our_fn, *[jnp.asarray(x) for x in xs])
    np.testing.assert_allclose(out, t_out.detach().numpy(), **PEER)
    for x, t, d in zip(xs, txs, vjp(jnp.asarray(r)), strict=True):
        np.testing.assert_allclose(d, np.zeros_like(x) if t.grad is None else t.grad.numpy(), **PEER)


def pyg_graph(rng, n_src, n_dst, n_edges, loops=True):
    """Random edges (a duplicate; two self loops if ``loops``); destination ``n_dst - 1`` receives none."""
    src, dst = rng.integers(0, n_src, n_edges), rng.integers(0, n_dst - 1, n_edges)
    src[1], dst[1] = src[0], dst[0]
    if loops:
        src[2], dst[2], src[5], dst[5] = 3, 3, 4, 4
    return np.stack([src, dst])


@pytest.mark.parametrize("aggr", ["mean", "max"])
def test_pyg_sage(rng, aggr):
    pyg_nn, torch = _pyg(), _torch()
    torch.manual_seed(0)
    ei = pyg_graph(rng, 10, 7, 30, loops=False)
    g = jgo.Graph.from_edges(ei[0], ei[1], 10, 7)
    pyg = pyg_nn.SAGEConv((4, 3), 5, aggr=aggr, normalize=True)
    randomize(pyg)
    layer = nnx_nn.SAGEConv.from_pyg(state_dict(pyg), aggr=aggr, normalize=True)
    compare_with_torch(lambda a, b: pyg((a, b), torch.tensor(ei), size=(10, 7)), lambda a, b: layer(g, (a, b)),
                       [feats(rng, 10, 4), feats(rng, 7, 3)], rng)


def test_pyg_gcn(rng):
    pyg_nn, torch = _pyg(), _torch()
    torch.manual_seed(1)
    i, j = np.triu_indices(11, k=1)
    keep = rng.choice(i.size, 20, replace=False)
    # undirected, without self loops; node 11 alone
    ei = np.concatenate([np.stack([i[keep], j[keep]]), np.stack([j[keep], i[keep]])], axis=1)
    g = jgo.Graph.from_edge_index(ei, 12)
    pyg = pyg_nn.GCNConv(5, 7)
    randomize(pyg)
    layer = nnx_nn.GraphConv.from_pyg(state_dict(pyg))
    compare_with_torch(lambda a: pyg(a, torch.tensor(ei)), lambda a: layer(g, a), [feats(rng, 12, 5)], rng)


def test_pyg_gat_with_attention_weights(rng):
    pyg_nn, torch = _pyg(), _torch()
    torch.manual_seed(2)
    n = 10
    ei = pyg_graph(rng, n, n, 35)
    g = jgo.Graph.from_edge_index(ei, n)
    pyg = pyg_nn.GATConv(5, 3, heads=2, edge_dim=2, residual=True, fill_value=0.5)
    randomize(pyg)
    layer = nnx_nn.GATConv.from_pyg(state_dict(pyg), fill_value=0.5)
    ti = torch.tensor(ei)
    x, ea = feats(rng, n, 5), feats(rng, ei.shape[1], 2)
    compare_with_torch(lambda a, e: pyg(a, ti, e), lambda a, e: layer(g, a, e), [x, ea], rng)
    _, (t_ei, t_alpha) = pyg(torch.tensor(np.asarray(x)), ti, torch.tensor(np.asarray(ea)),
                             return_attention_weights=True)
    _, alpha = layer(g, x, ea, return_attention_weights=True)
    kept = np.concatenate([ei[0] != ei[1], np.ones(n, bool)])  # PyG drops g's self loops, then appends its own
    np.testing.assert_array_equal(t_ei.numpy(), np.concatenate([ei, np.stack([np.arange(n)] * 2)], axis=1)[:, kept])
    np.testing.assert_allclose(np.asarray(alpha)[kept], t_alpha.detach().numpy(), **PEER)


def test_pyg_gat_bipartite(rng):
    pyg_nn, torch = _pyg(), _torch()
    torch.manual_seed(3)
    ei = pyg_graph(rng, 10, 7, 30)
    g = jgo.Graph.from_edges(ei[0], ei[1], 10, 7)
    pyg = pyg_nn.GATConv((4, 3), 5, heads=2, concat=False)
    randomize(pyg)
    layer = nnx_nn.GATConv.from_pyg(state_dict(pyg), concat=False)
    compare_with_torch(lambda a, b: pyg((a, b), torch.tensor(ei), size=(10, 7)), lambda a, b: layer(g, (a, b)),
                       [feats(rng, 10, 4), feats(rng, 7, 3)], rng)


@pytest.mark.parametrize("share_weights", [False, True])
def test_pyg_gatv2(rng, share_weights):
    pyg_nn, torch = _pyg(), _torch()
    torch.manual_seed(4)
    n = 9
    ei = pyg_graph(rng, n, n, 30)
    g = jgo.Graph.from_edge_index(ei, n)
    pyg = pyg_nn.GATv2Conv(5, 3, heads=2, edge_dim=2, share_weights=share_weights, residual=True)
    randomize(pyg)
    layer = nnx_nn.GATv2Conv.from_pyg(state_dict(pyg), share_weights=share_weights)
    ti = torch.tensor(ei)
    compare_with_torch(lambda a, e: pyg(a, ti, e), lambda a, e: layer(g, a, e),
                       [feats(rng, n, 5), feats(rng, ei.shape[1], 2)], rng)


@pytest.mark.parametrize("kw", [dict(beta=True), dict(root_weight=False, concat=False)], ids=["beta", "no-root"])
def test_pyg_transformer(rng, kw):
    pyg_nn, torch = _pyg(), _torch()
    torch.manual_seed(5)
    ei = pyg_graph(rng, 10, 7, 30)
    g = jgo.Graph.from_edges(ei[0], ei[1], 10, 7)
    pyg = pyg_nn.TransformerConv((4, 3), 5, heads=2, edge_dim=2, **kw)
    randomize(pyg)
    layer = nnx_nn.TransformerConv.from_pyg(state_dict(pyg), heads=2, concat=kw.get("concat", True),
                                            root_weight=kw.get("root_weight", True))
    ti = torch.tensor(ei)
    compare_with_torch(lambda a, b, e: pyg((a, b), ti, e), lambda a, b, e: layer(g, (a, b), e),
                       [feats(rng, 10, 4), feats(rng, 7, 3), feats(rng, ei.shape[1], 2)], rng)


@pytest.mark.parametrize("cls_name,kw", [("RGCNConv", dict(num_bases=2)), ("FastRGCNConv", dict(num_blocks=2)),
                                         ("RGCNConv", dict(aggr="add", root_weight=False))])
def test_pyg_rgcn(rng, cls_name, kw):
    pyg_nn, torch = _pyg(), _torch()
    torch.manual_seed(6)
    ei = pyg_graph(rng, 12, 12, 50)
    types = rng.integers(0, 3, ei.shape[1])
    g = jgo.Graph.from_edge_index(ei, 12)
    pyg = getattr(pyg_nn, cls_name)(6, 8, 4, **kw)
    randomize(pyg)
    layer = nnx_nn.RGCNConv.from_pyg(state_dict(pyg), aggr=kw.get("aggr", "mean"))
    tt = torch.tensor(types)
    compare_with_torch(lambda a: pyg(a, torch.tensor(ei), tt), lambda a: layer(g, a, types), [feats(rng, 12, 6)], rng)


def test_chemprop_dmpnn(rng):
    torch = _torch()
    pytest.importorskip("chemprop", reason="chemprop not installed (pip install chemprop)")
    from chemprop.data import BatchMolGraph
    from chemprop.featurizers import SimpleMoleculeMolGraphFeaturizer
    from chemprop.nn import BondMessagePassing
    from rdkit import Chem

    featurizer = SimpleMoleculeMolGraphFeaturizer()
    bmg = BatchMolGraph([featurizer(Chem.MolFromSmiles(s)) for s in ("C", "CCO", "c1ccncc1", "CC(=O)O", "[NH4+]")])
    torch.manual_seed(7)
    module = BondMessagePassing(d_h=32, depth=3, undirected=True, bias=True).eval()
    layer = nnx_nn.DMPNNEncoder.from_chemprop(state_dict(module), depth=3, undirected=True)
    g = jgo.Graph.from_edge_index(bmg.edge_index.numpy(), bmg.V.shape[0])
    rev = bmg.rev_edge_index.numpy()

    def torch_fn(v, e):
        bmg.V, bmg.E = v, e
        return module(bmg)

    compare_with_torch(torch_fn, lambda v, e: layer(g, v, e, rev), [bmg.V.numpy(), bmg.E.numpy()], rng)


def test_pyg_gcn_conv_weighted_with_loops(rng):
    pyg_nn, torch = _pyg(), _torch()
    torch.manual_seed(8)
    ei = pyg_graph(rng, 10, 10, 35)  # self loops, a duplicate, a node without in-edges
    g = jgo.Graph.from_edge_index(ei, 10)
    pyg = pyg_nn.GCNConv(5, 7, improved=True)
    randomize(pyg)
    layer = nnx_nn.GCNConv.from_pyg(state_dict(pyg), improved=True)
    # edge weights as constants: where a node has two loops, PyG keeps the last one's weight but its index
    # assignment also sends a gradient to the discarded one (ours: 0, as that weight changes nothing)
    ti, w = torch.tensor(ei), rng.uniform(0.5, 2, ei.shape[1]).astype(np.float32)
    compare_with_torch(lambda a: pyg(a, ti, torch.tensor(w)), lambda a: layer(g, a, w), [feats(rng, 10, 5)], rng)


def test_pyg_gin_gine_and_edge_conv(rng):
    pyg_nn, torch = _pyg(), _torch()
    torch.manual_seed(9)
    ei = pyg_graph(rng, 10, 10, 35)
    g, ti = jgo.Graph.from_edge_index(ei, 10), torch.tensor(ei)
    x, ea = feats(rng, 10, 5), feats(rng, ei.shape[1], 3)
    seq = torch.nn.Sequential
    gin = pyg_nn.GINConv(seq(torch.nn.Linear(5, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8)), train_eps=True)
    with torch.no_grad():
        gin.eps.fill_(0.3)
    layer = nnx_nn.GINConv.from_pyg(state_dict(gin), train_eps=True)
    compare_with_torch(lambda a: gin(a, ti), lambda a: layer(g, a), [x], rng)
    gine = pyg_nn.GINEConv(seq(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8)), eps=0.2, edge_dim=3)
    layer = nnx_nn.GINEConv.from_pyg(state_dict(gine), activation=jnp.tanh)
    compare_with_torch(lambda a, e: gine(a, ti, e), lambda a, e: layer(g, a, e), [x, ea], rng)
    conv = pyg_nn.EdgeConv(seq(torch.nn.Linear(10, 8), torch.nn.ReLU(), torch.nn.Linear(8, 6)), aggr="max")
    layer = nnx_nn.EdgeConv.from_pyg(state_dict(conv), aggr="max")
    compare_with_torch(lambda a: conv(a, ti), lambda a: layer(g, a), [x], rng)


def test_pyg_readouts(rng):
    _pyg()
    torch = _torch()
    from torch_geometric.nn import GraphNorm
    from torch_geometric.nn.aggr import AttentionalAggregation

    torch.manual_seed(10)
    ids = np.repeat([0, 1, 2, 3], [4, 1, 0, 6])  # graph 2 is empty
    x = feats(rng, ids.size, 5)
    tids = torch.tensor(ids)
    agg = AttentionalAggregation(torch.nn.Linear(5, 1), torch.nn.Linear(5, 6))
    layer = nnx_nn.AttentionalAggregation.from_pyg(state_dict(agg))
    compare_with_torch(lambda a: agg(a, tids, dim_size=4), lambda a: layer(a, ids, 4), [x], rng)
    norm = GraphNorm(5)
    randomize(norm)
    with torch.no_grad():
        norm.weight.normal_()
        norm.mean_scale.uniform_(0.5, 1.5)
    layer = nnx_nn.GraphNorm.from_pyg(state_dict(norm))
    keep = ids != 1  # PyG's variance of a one-node graph is 0: its rows are bias only, compared too
    compare_with_torch(lambda a: norm(a, tids, 4)[torch.tensor(keep)], lambda a: layer(a, ids, 4)[keep], [x], rng)


# -- DimeNet++ ------------------------------------------------------------------------------------

def dimenet_problem(rng, counts):
    """A PyG-named random DimeNet++ state_dict and a batch (a molecule, a periodic cell), as
    test_dimenet_equinox.py builds them."""
    pytest.importorskip("equinox", reason="equinox not installed: test_dimenet_equinox.py's helpers import it")
    from test_dimenet_equinox import CUTOFF, SIZES, inputs, pyg_state_dict

    return pyg_state_dict(rng, **SIZES, **counts), inputs(rng), CUTOFF


@pytest.mark.parametrize("counts", [{}, {"before": 0, "after": 1, "lins": 2}], ids=["pyg-defaults", "other-depths"])
def test_dimenet_matches_linen_with_the_same_weights(rng, counts):
    from jaxgraphops.nn.flax import energy_and_forces, from_pyg_dimenet

    sd, args, cutoff = dimenet_problem(rng, counts)
    linen_model, variables = from_pyg_dimenet(sd, cutoff=cutoff)
    model = nnx_nn.DimeNetPlusPlus.from_pyg(sd, cutoff=cutoff)
    expected = linen_model.apply(variables, *args)
    got = nnx.jit(lambda m, *a: m(*a), static_argnums=7)(model, *args)
    assert float(jnp.abs(expected).min()) > 1e-3
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6 * float(jnp.abs(expected).max()))
    if counts:
        return
    e_linen, f_linen = energy_and_forces(*from_pyg_dimenet(_first_output_sd(sd), cutoff=cutoff), *args)
    e, f = nnx_nn.DimeNetPlusPlus.from_pyg(_first_output_sd(sd), cutoff=cutoff).energy_and_forces(*args)
    np.testing.assert_allclose(e, e_linen, rtol=1e-6, atol=1e-6 * float(jnp.abs(e_linen).max()))
    np.testing.assert_allclose(f, f_linen, rtol=1e-5, atol=1e-5 * float(jnp.abs(f_linen).max()))


def _first_output_sd(sd):
    """``sd`` with one output channel (the first)."""
    return {k: v[:1] if k.startswith("output_blocks") and k.endswith(".lin.weight") else v for k, v in sd.items()}


def test_dimenet_grad_of_an_energy_and_force_loss_reaches_every_param(rng):
    """Training on forces: nnx.grad of a loss of energies and forces (a second derivative through the fused
    kernels) gives every param a finite, non-zero gradient, the same as with the pure-JAX triplet step."""
    sd, args, cutoff = dimenet_problem(rng, {})
    sd = _first_output_sd(sd)
    models = [nnx_nn.DimeNetPlusPlus.from_pyg(sd, cutoff=cutoff, impl=impl) for impl in (None, "xla")]

    def loss(m):
        e, f = m.energy_and_forces(*args)
        return jnp.sum(e**2) + jnp.sum(f**2)

    grads = [nnx.to_pure_dict(nnx.state(nnx.jit(nnx.grad(loss))(m), nnx.Param)) for m in models]
    assert_trees_close(grads[0], grads[1], {"rtol": 2e-4, "atol": 2e-5})
    for path, g in jax.tree_util.tree_leaves_with_path(grads[0]):
        assert np.isfinite(g).all() and np.any(g != 0), f"no gradient reaches {jax.tree_util.keystr(path)}"


def test_a_two_layer_model_trains_with_nnx_optimizer(rng):
    """nnx.Optimizer over a model of two layers (GATConv then SAGEConv) takes jitted steps that fit a target."""
    optax = pytest.importorskip("optax", reason="optax not installed (pip install optax)")

    class Model(nnx.Module):
        def __init__(self, rngs):
            self.gat = nnx_nn.GATConv(5, 4, heads=2, rngs=rngs)
            self.sage = nnx_nn.SAGEConv(8, 3, rngs=rngs)

        def __call__(self, g, x):
            return self.sage(g, jax.nn.elu(self.gat(g, x)))

    g, x, y = random_graph(rng, 12, 12, 40), feats(rng, 12, 5), feats(rng, 12, 3)
    model = Model(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    @nnx.jit
    def step(model, optimizer, g, x, y):
        loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(g, x) - y) ** 2))(model)
        optimizer.update(model, grads)
        return loss

    losses = [float(step(model, optimizer, g, x, y)) for _ in range(60)]
    assert losses[-1] < 0.5 * losses[0], losses[::10]


def test_dimenet_load_variables_takes_the_linen_models_params(rng):
    """The linen DimeNet++ and the NNX one name their params alike: load_variables moves model.init's params (made
    non-trivial) into the NNX model, which then computes what the linen model computes."""
    from jaxgraphops.nn.flax import DimeNetPlusPlus as LinenDimeNet

    _, args, cutoff = dimenet_problem(rng, {})
    sizes = {"hidden": 16, "out_emb": 12, "int_emb": 8, "basis_emb": 4, "num_blocks": 2, "out_channels": 2,
             "num_before_skip": 2, "num_after_skip": 1, "num_output_layers": 1, "cutoff": cutoff}
    linen_model = LinenDimeNet(**sizes)
    variables = linen_model.init(jax.random.key(0), *args)
    variables = jax.tree_util.tree_map(lambda p: p + 0.1 * jax.random.normal(jax.random.key(1), p.shape), variables)
    model = nnx_nn.load_variables(nnx_nn.DimeNetPlusPlus(**sizes, rngs=nnx.Rngs(2)), variables)
    expected = linen_model.apply(variables, *args)
    assert float(jnp.abs(expected).min()) > 1e-3
    np.testing.assert_allclose(model(*args), expected, rtol=1e-6, atol=1e-6 * float(jnp.abs(expected).max()))
