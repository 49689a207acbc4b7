"""The relational layers against their peers with the same weights: DMPNNEncoder against Chemprop's
BondMessagePassing on real molecules, RGCNConv against PyG's RGCNConv and FastRGCNConv, and
InteractionNetwork against jraph's InteractionNetwork; outputs and gradients (float32, 1e-5)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo
from jaxgraphops.nn import equinox as eqx_nn
from jaxgraphops.nn import flax as flax_nn

FRAMEWORKS = ("flax", "equinox")
TOL = {"rtol": 1e-5, "atol": 1e-5}

# Small molecules of QM9's kind (and caffeine): single atoms without bonds, rings, charges, triple bonds.
SMILES = ["C", "N", "O", "C#C", "C#N", "C=O", "CC", "CO", "CCO", "CC#N", "CC=O", "NC=O", "CC(C)O", "OCC=O",
          "O=C1CC1", "c1ccccc1", "c1ccncc1", "CC(=O)O", "[NH4+]", "CN1C=NC2=C1C(=O)N(C(=O)N2C)C"]


def _torch():
    return pytest.importorskip("torch", reason="torch not installed (pip install torch)")


def state_dict(module):
    return {k: v.detach().numpy() for k, v in module.state_dict().items()}


# == DMPNNEncoder vs Chemprop =====================================================================

def chemprop_batch():
    """A Chemprop ``BatchMolGraph`` of ``SMILES`` built with Chemprop's default featurizer."""
    pytest.importorskip("chemprop", reason="chemprop not installed (pip install chemprop)")
    from chemprop.data import BatchMolGraph
    from chemprop.featurizers import SimpleMoleculeMolGraphFeaturizer
    from rdkit import Chem

    featurizer = SimpleMoleculeMolGraphFeaturizer()
    return BatchMolGraph([featurizer(Chem.MolFromSmiles(s)) for s in SMILES])


def chemprop_encoder(seed, **kw):
    from chemprop.nn import BondMessagePassing

    torch = _torch()
    torch.manual_seed(seed)
    return BondMessagePassing(**kw).eval()  # torch's default initialisation: every weight and bias non-zero


def ours_dmpnn(framework, sd, *, depth, undirected, activation=jax.nn.relu):
    """``(apply(params, g, V, E, rev, V_d), params, to_torch_grads(d_params))`` with the grads named as Chemprop's."""
    if framework == "flax":
        layer = flax_nn.DMPNNEncoder(sd["W_h.weight"].shape[0], depth=depth, undirected=undirected,
                                     use_bias="W_i.bias" in sd, activation=activation)

        def named(d):
            return {f"{n}.{'weight' if k == 'kernel' else k}": (v.T if k == "kernel" else v)
                    for n, p in d["params"].items() for k, v in p.items()}

        return layer.apply, flax_nn.from_chemprop(sd), named
    layer = eqx_nn.DMPNNEncoder.from_chemprop(sd, depth=depth, undirected=undirected, activation=activation)

    def named(d):
        return {f"{n}.{k}": getattr(getattr(d, n), k) for n in ("W_i", "W_h", "W_o", "W_d") if getattr(d, n)
                for k in ("weight", "bias") if getattr(getattr(d, n), k) is not None}

    return lambda m, *args: m(*args), layer, named


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("undirected", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_chemprop_bond_message_passing(framework, undirected, bias):
    torch = _torch()
    bmg = chemprop_batch()
    module = chemprop_encoder(0, d_h=300, depth=3, undirected=undirected, bias=bias)
    sd = state_dict(module)
    n_atoms = bmg.V.shape[0]
    g = jgo.Graph.from_edge_index(bmg.edge_index.numpy(), n_atoms)
    V, E, rev = bmg.V.numpy(), bmg.E.numpy(), bmg.rev_edge_index.numpy()
    r = np.random.default_rng(0).normal(size=(n_atoms, 300)).astype(np.float32)

    bmg.V.requires_grad_(True)
    bmg.E.requires_grad_(True)
    t_out = module(bmg)
    (t_out * torch.tensor(r)).sum().backward()

    apply, params, named = ours_dmpnn(framework, sd, depth=3, undirected=undirected)
    out, vjp = jax.vjp(lambda p, v, e: apply(p, g, v, e, rev), params, V, E)
    d_params, d_v, d_e = vjp(jnp.asarray(r))
    np.testing.assert_allclose(out, t_out.detach().numpy(), **TOL)
    np.testing.assert_allclose(d_v, bmg.V.grad.numpy(), **TOL)
    np.testing.assert_allclose(d_e, bmg.E.grad.numpy(), **TOL)
    d_params = named(d_params)
    assert set(d_params) == set(sd)
    for name, p in module.named_parameters():
        np.testing.assert_allclose(d_params[name], p.grad.numpy(), err_msg=name, **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_chemprop_descriptors_tanh_depth5(framework):
    """Atom descriptors (Chemprop's ``d_vd``, the ``W_d`` layer), another activation, another depth."""
    torch = _torch()
    bmg = chemprop_batch()
    module = chemprop_encoder(1, d_h=64, depth=5, undirected=True, bias=True, d_vd=4, activation="tanh")
    n_atoms = bmg.V.shape[0]
    V_d = np.random.default_rng(1).normal(size=(n_atoms, 4)).astype(np.float32)
    with torch.no_grad():
        expected = module(bmg, torch.tensor(V_d)).numpy()
    apply, params, _ = ours_dmpnn(framework, state_dict(module), depth=5, undirected=True, activation=jnp.tanh)
    g = jgo.Graph.from_edge_index(bmg.edge_index.numpy(), n_atoms)
    out = apply(params, g, bmg.V.numpy(), bmg.E.numpy(), bmg.rev_edge_index.numpy(), V_d)
    assert out.shape == (n_atoms, 68)
    np.testing.assert_allclose(out, expected, **TOL)


# == RGCNConv vs PyG ==============================================================================

def pyg_graph(seed, n_src=12, n_dst=12, n_edges=50, n_rel=4):
    """Random edges (duplicates, self loops); destinations ``n_dst - 2``, ``n_dst - 1`` receive none;
    relation ``n_rel - 1`` occurs nowhere and relation 0 only at even destinations."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n_src, n_edges), rng.integers(0, n_dst - 2, n_edges)
    types = rng.integers(0, n_rel - 1, n_edges)
    types[(types == 0) & (dst % 2 == 1)] = 1
    return np.stack([src, dst]), types


def pyg_rgcn(cls_name, seed, in_channels, out, n_rel, **kw):
    pytest.importorskip("torch_geometric", reason="torch_geometric not installed (pip install torch-geometric)")
    import torch_geometric.nn as pyg_nn

    torch = _torch()
    torch.manual_seed(seed)
    module = getattr(pyg_nn, cls_name)(in_channels, out, n_rel, **kw)
    if module.bias is not None:
        torch.nn.init.normal_(module.bias)  # PyG initialises it to 0: make it count
    return module


def ours_rgcn(framework, sd, aggr, *, num_nodes=None):
    if framework == "equinox":
        layer = eqx_nn.RGCNConv.from_pyg(sd, aggr=aggr)
        return layer, lambda m, *args: m(*args), lambda d: {k: getattr(d, k) for k in sd}
    weight, comp = sd["weight"], sd.get("comp")
    blocks = weight.shape[1] if weight.ndim == 4 else None
    n_rel, n_bases = (weight.shape[0], None) if comp is None else comp.shape
    out = weight.shape[1] * weight.shape[3] if blocks else weight.shape[2]
    layer = flax_nn.RGCNConv(out, n_rel, num_bases=n_bases, aggr=aggr, root_weight="root" in sd,
                             use_bias="bias" in sd, num_blocks=blocks, num_nodes=num_nodes)
    names = {"weight": "kernel", "comp": "comp", "root": "root_kernel", "bias": "bias"}
    return flax_nn.from_pyg_rgcn(sd), layer.apply, lambda d: {k: d["params"][names[k]] for k in sd}


def compare_rgcn(module, framework, aggr, g, edge_index, types, xs, r, *, num_nodes=None):
    """Outputs, input gradients (float inputs) and weight gradients of ``sum(out * r)``, ours against PyG's."""
    torch = _torch()
    txs = [None if x is None else torch.tensor(x, requires_grad=np.issubdtype(x.dtype, np.floating)) for x in xs]
    tx = txs[0] if len(txs) == 1 else tuple(txs)
    t_out = module(tx, torch.tensor(edge_index), torch.tensor(types))
    (t_out * torch.tensor(r)).sum().backward()

    params, apply, named = ours_rgcn(framework, state_dict(module), aggr, num_nodes=num_nodes)
    floats = [i for i, x in enumerate(xs) if x is not None and np.issubdtype(x.dtype, np.floating)]

    def f(p, *fx):
        full = list(xs)
        for i, x in zip(floats, fx):
            full[i] = x
        return apply(p, g, full[0] if len(full) == 1 else tuple(full), types)

    out, vjp = jax.vjp(f, params, *[jnp.asarray(xs[i]) for i in floats])
    d_params, *d_xs = vjp(jnp.asarray(r))
    np.testing.assert_allclose(out, t_out.detach().numpy(), **TOL)
    for i, d in zip(floats, d_xs):
        np.testing.assert_allclose(d, txs[i].grad.numpy(), err_msg=f"x[{i}]", **TOL)
    d_params = named(d_params)
    for name, p in module.named_parameters():
        np.testing.assert_allclose(d_params[name], p.grad.numpy(), err_msg=name, **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("cls_name", ["RGCNConv", "FastRGCNConv"])
@pytest.mark.parametrize("num_bases", [None, 2])
@pytest.mark.parametrize("aggr", ["mean", "add"])
@pytest.mark.parametrize("root_weight", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_pyg_rgcn(framework, cls_name, num_bases, aggr, root_weight, bias):
    edge_index, types = pyg_graph(0)
    g = jgo.Graph.from_edge_index(edge_index, 12)
    rng = np.random.default_rng(1)
    x, r = rng.normal(size=(12, 6)).astype(np.float32), rng.normal(size=(12, 8)).astype(np.float32)
    module = pyg_rgcn(cls_name, 0, 6, 8, 4, num_bases=num_bases, aggr=aggr, root_weight=root_weight, bias=bias)
    compare_rgcn(module, framework, aggr, g, edge_index, types, [x], r)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("cls_name", ["RGCNConv", "FastRGCNConv"])
@pytest.mark.parametrize("aggr", ["mean", "add"])
def test_pyg_rgcn_blocks_and_bipartite(framework, cls_name, aggr):
    """Block-diagonal weights (PyG's ``num_blocks``); a bipartite graph with ``(x_src, x_dst)`` of two widths."""
    edge_index, types = pyg_graph(2)
    g = jgo.Graph.from_edge_index(edge_index, 12)
    rng = np.random.default_rng(3)
    x, r = rng.normal(size=(12, 6)).astype(np.float32), rng.normal(size=(12, 4)).astype(np.float32)
    module = pyg_rgcn(cls_name, 2, 6, 4, 4, num_blocks=2, aggr=aggr)
    compare_rgcn(module, framework, aggr, g, edge_index, types, [x], r)

    edge_index, types = pyg_graph(4, 10, 7, 30)
    g = jgo.Graph.from_edges(edge_index[0], edge_index[1], 10, 7)
    x_src, x_dst = rng.normal(size=(10, 6)).astype(np.float32), rng.normal(size=(7, 3)).astype(np.float32)
    module = pyg_rgcn(cls_name, 4, (6, 3), 5, 4, num_bases=3, aggr=aggr)
    compare_rgcn(module, framework, aggr, g, edge_index, types, [x_src, x_dst], rng.normal(size=(7, 5)).astype(
        np.float32))


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("cls_name", ["RGCNConv", "FastRGCNConv"])
@pytest.mark.parametrize("num_bases", [None, 2])
@pytest.mark.parametrize("aggr", ["mean", "add"])
def test_pyg_rgcn_featureless(framework, cls_name, num_bases, aggr):
    """``x=None``: the weights' rows are the nodes' embeddings (PyG's ``in_channels`` = number of nodes)."""
    edge_index, types = pyg_graph(5)
    g = jgo.Graph.from_edge_index(edge_index, 12)
    r = np.random.default_rng(5).normal(size=(12, 8)).astype(np.float32)
    module = pyg_rgcn(cls_name, 5, 12, 8, 4, num_bases=num_bases, aggr=aggr)
    compare_rgcn(module, framework, aggr, g, edge_index, types, [None], r)


# == InteractionNetwork vs jraph ==================================================================

def _jraph():
    return pytest.importorskip("jraph", reason="jraph not installed (pip install jraph)")


def flax_mlp(sizes):
    import flax.linen as nn

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            for i, size in enumerate(sizes):
                x = nn.Dense(size)(x)
                x = nn.relu(x) if i < len(sizes) - 1 else x
            return x

    return MLP()


def mesh_graph(seed, n=15, n_edges=60):
    """A jraph GraphsTuple and our Graph over the same edges (the last node receives nothing)."""
    jraph = _jraph()
    rng = np.random.default_rng(seed)
    senders, receivers = rng.integers(0, n, n_edges), rng.integers(0, n - 1, n_edges)
    nodes, edges = rng.normal(size=(n, 6)).astype(np.float32), rng.normal(size=(n_edges, 5)).astype(np.float32)
    graphs = jraph.GraphsTuple(nodes=jnp.asarray(nodes), edges=jnp.asarray(edges), senders=jnp.asarray(senders),
                               receivers=jnp.asarray(receivers), n_node=jnp.array([n]), n_edge=jnp.array([n_edges]),
                               globals=None)
    return graphs, jgo.Graph.from_jraph(graphs)


def jraph_network(edge_fn, node_fn):
    """jraph's InteractionNetwork whose update functions concatenate their inputs."""
    return _jraph().InteractionNetwork(
        update_edge_fn=lambda e, s, r: edge_fn(jnp.concatenate([e, s, r], axis=1)),
        update_node_fn=lambda n, received: node_fn(jnp.concatenate([n, received], axis=1)))


@pytest.mark.parametrize("residual", [False, True])
def test_jraph_interaction_network_flax(residual):
    graphs, g = mesh_graph(0)
    edge_mlp, node_mlp = flax_mlp((16, 5)), flax_mlp((16, 6))
    layer = flax_nn.InteractionNetwork(edge_mlp, node_mlp, residual=residual)
    params = layer.init(jax.random.key(0), g, graphs.nodes, graphs.edges)

    def peer(p, nodes, edges):
        net = jraph_network(lambda m: edge_mlp.apply({"params": p["params"]["edge_mlp"]}, m),
                            lambda m: node_mlp.apply({"params": p["params"]["node_mlp"]}, m))
        out = net(graphs._replace(nodes=nodes, edges=edges))
        if residual:  # ours = jraph's step + the inputs, computed by hand
            return nodes + out.nodes, edges + out.edges
        return out.nodes, out.edges

    compare_interaction(lambda p, x, e: layer.apply(p, g, x, e), peer, params, graphs)


@pytest.mark.parametrize("residual", [False, True])
def test_jraph_interaction_network_equinox(residual):
    import equinox as eqx

    graphs, g = mesh_graph(1)
    k_e, k_n = jax.random.split(jax.random.key(1))
    layer = eqx_nn.InteractionNetwork(eqx.nn.MLP(5 + 6 + 6, 5, 16, 2, key=k_e), eqx.nn.MLP(6 + 5, 6, 16, 2, key=k_n),
                                      residual=residual)
    params, static = eqx.partition(layer, eqx.is_array)

    def peer(p, nodes, edges):
        m = eqx.combine(p, static)
        out = jraph_network(jax.vmap(m.edge_mlp), jax.vmap(m.node_mlp))(graphs._replace(nodes=nodes, edges=edges))
        return (nodes + out.nodes, edges + out.edges) if residual else (out.nodes, out.edges)

    compare_interaction(lambda p, x, e: eqx.combine(p, static)(g, x, e), peer, params, graphs)


def compare_interaction(ours, peer, params, graphs):
    """Outputs and the gradients (params, nodes, edges) of a scalar loss, ours against the peer's; jitted."""
    rng = np.random.default_rng(7)
    r_n, r_e = (jnp.asarray(rng.normal(size=a.shape), jnp.float32) for a in (graphs.nodes, graphs.edges))

    def loss(f):
        return lambda p, x, e: sum(jnp.sum(jnp.tanh(o) * r) for o, r in zip(f(p, x, e), (r_n, r_e)))

    args = (params, graphs.nodes, graphs.edges)
    for a, b in zip(jax.jit(ours)(*args), peer(*args)):
        np.testing.assert_allclose(a, b, **TOL)
    ours_grads = jax.jit(jax.grad(loss(ours), argnums=(0, 1, 2)))(*args)
    peer_grads = jax.grad(loss(peer), argnums=(0, 1, 2))(*args)
    for a, b in zip(jax.tree_util.tree_leaves(ours_grads), jax.tree_util.tree_leaves(peer_grads)):
        np.testing.assert_allclose(a, b, **TOL)
