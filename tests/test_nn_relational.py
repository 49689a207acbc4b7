"""RGCNConv, DMPNNEncoder and InteractionNetwork (flax and equinox) against direct pure-jnp loops:
outputs, jit, gradients of params and inputs, loaders, errors."""

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import check_grads

import jaxgraphops as jgo
from jaxgraphops.nn import equinox as eqx_nn
from jaxgraphops.nn import flax as flax_nn

FRAMEWORKS = ("flax", "equinox")
TOL = {"rtol": 1e-5, "atol": 1e-5}


def features(rng, *shape):
    return jnp.asarray(rng.normal(size=shape), jnp.float32)


def assert_trees_close(a, b, **tol):
    """Same structure, leaves close (the gradients of one layer through two paths)."""
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        assert np.isfinite(np.asarray(x)).all()
        np.testing.assert_allclose(x, y, **(tol or TOL))


# == DMPNNEncoder =================================================================================

def bond_graph(rng, n_atoms=9, n_bonds=10, unpaired=2):
    """Directed bonds in shuffled order: ``n_bonds`` bonds in both directions, ``unpaired`` edges
    without a reverse (``rev = -1``); the last atom has no bond."""
    i, j = np.triu_indices(n_atoms - 1, k=1)
    pick = rng.choice(i.size, n_bonds + unpaired, replace=False)
    a, b = i[pick], j[pick]
    src = np.concatenate([a[:n_bonds], b[:n_bonds], a[n_bonds:]])
    dst = np.concatenate([b[:n_bonds], a[:n_bonds], b[n_bonds:]])
    rev = np.concatenate([np.arange(n_bonds) + n_bonds, np.arange(n_bonds), -np.ones(unpaired, int)])
    perm = rng.permutation(src.size)
    inv = np.argsort(perm)
    rev = np.where(rev[perm] >= 0, inv[np.maximum(rev[perm], 0)], -1)
    return jgo.Graph.from_edges(src[perm], dst[perm], n_atoms, n_atoms), rev


def ref_dmpnn(g, atoms, bonds, rev, w, depth, undirected, act=jax.nn.relu, descriptors=None):
    """Chemprop's BondMessagePassing.forward, written with segment sums (an edge with ``rev = -1``
    subtracts nothing and is its own reverse)."""
    src, dst, n = g.src, g.dst, g.n_dst
    has_rev = (rev >= 0)[:, None]

    def rev_rows(h):
        return jnp.where(has_rev, h[np.maximum(rev, 0)], 0)

    def dense(x, p):
        return x @ p["kernel"] + p.get("bias", 0)

    h0 = dense(jnp.concatenate([atoms[src], bonds], axis=1), w["W_i"])
    h = act(h0)
    for _ in range(depth - 1):
        if undirected:
            h = jnp.where(has_rev, (h + rev_rows(h)) / 2, h)
        m = jax.ops.segment_sum(h, dst, n)[src] - rev_rows(h)
        h = act(h0 + dense(m, w["W_h"]))
    out = act(dense(jnp.concatenate([atoms, jax.ops.segment_sum(h, dst, n)], axis=1), w["W_o"]))
    if descriptors is not None:
        out = dense(jnp.concatenate([out, descriptors], axis=1), w["W_d"])
    return out


def chemprop_state_dict(rng, d_v, d_e, d_h, bias=False, d_vd=None):
    """Random weights named and laid out as Chemprop's ``BondMessagePassing.state_dict()``."""
    shapes = {"W_i": (d_h, d_v + d_e), "W_h": (d_h, d_h), "W_o": (d_h, d_v + d_h)}
    if d_vd:
        shapes["W_d"] = (d_h + d_vd, d_h + d_vd)
    sd = {}
    for name, shape in shapes.items():
        sd[f"{name}.weight"] = (rng.normal(size=shape) / np.sqrt(shape[1])).astype(np.float32)
        if bias or name in ("W_o", "W_d"):
            sd[f"{name}.bias"] = rng.normal(size=shape[0]).astype(np.float32) * 0.1
    return sd


def chemprop_kernels(sd):
    w = {}
    for k, v in sd.items():
        name, kind = k.split(".")
        w.setdefault(name, {})["kernel" if kind == "weight" else "bias"] = jnp.asarray(v.T if kind == "weight" else v)
    return w


def dmpnn_layer(framework, sd, *, depth=3, undirected=False, activation=jax.nn.relu):
    """``(apply(params, g, V, E, rev, V_d=None), params, kernels(params))``: kernels as ``chemprop_kernels``."""
    if framework == "flax":
        layer = flax_nn.DMPNNEncoder(sd["W_h.weight"].shape[0], depth=depth, undirected=undirected,
                                     use_bias="W_i.bias" in sd, activation=activation)
        return layer.apply, flax_nn.from_chemprop(sd), lambda p: p["params"]
    layer = eqx_nn.DMPNNEncoder.from_chemprop(sd, depth=depth, undirected=undirected, activation=activation)

    def kernels(m):
        return {n: {"kernel": lin.weight.T, **({} if lin.bias is None else {"bias": lin.bias})}
                for n, lin in (("W_i", m.W_i), ("W_h", m.W_h), ("W_o", m.W_o), ("W_d", m.W_d)) if lin is not None}

    return lambda m, *args: m(*args), layer, kernels


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("undirected", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("depth", [1, 3])
def test_dmpnn_matches_reference(rng, framework, undirected, bias, depth):
    g, rev = bond_graph(rng)
    atoms, bonds = features(rng, 9, 5), features(rng, g.n_edges, 3)
    sd = chemprop_state_dict(rng, 5, 3, 8, bias)
    apply, params, _ = dmpnn_layer(framework, sd, depth=depth, undirected=undirected)
    out = apply(params, g, atoms, bonds, rev)
    assert out.shape == (9, 8) and out.dtype == jnp.float32
    np.testing.assert_allclose(out, ref_dmpnn(g, atoms, bonds, rev, chemprop_kernels(sd), depth, undirected), **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("undirected", [False, True])
def test_dmpnn_jit_and_grads(rng, framework, undirected):
    g, rev = bond_graph(rng)
    atoms, bonds, vd = features(rng, 9, 5), features(rng, g.n_edges, 3), features(rng, 9, 2)
    sd = chemprop_state_dict(rng, 5, 3, 8, bias=True, d_vd=2)
    apply, params, kernels = dmpnn_layer(framework, sd, undirected=undirected, activation=jnp.tanh)
    r = features(rng, 9, 10)
    np.testing.assert_allclose(jax.jit(apply)(params, g, atoms, bonds, rev, vd),
                               apply(params, g, atoms, bonds, rev, vd), **TOL)

    def loss(p, v, e, d):
        return jnp.sum(apply(p, g, v, e, rev, d) * r)

    def ref_loss(w, v, e, d):
        return jnp.sum(ref_dmpnn(g, v, e, rev, w, 3, undirected, jnp.tanh, d) * r)

    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)))(params, atoms, bonds, vd)
    ref = jax.grad(ref_loss, argnums=(0, 1, 2, 3))(chemprop_kernels(sd), atoms, bonds, vd)
    assert_trees_close(kernels(grads[0]), ref[0])
    assert_trees_close(grads[1:], ref[1:])


def test_dmpnn_check_grads_float64(x64, rng):
    g, rev = bond_graph(rng, 6, 4, 1)
    layer = eqx_nn.DMPNNEncoder(3, 2, 4, depth=3, undirected=True, use_bias=True, activation=jnp.tanh,
                                key=jax.random.key(1))
    layer = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, layer)
    atoms = jnp.asarray(rng.normal(size=(6, 3)))
    bonds = jnp.asarray(rng.normal(size=(g.n_edges, 2)))
    check_grads(lambda m, v, e: m(g, v, e, rev), (layer, atoms, bonds), order=2, modes=("fwd", "rev"))


def test_dmpnn_flax_and_equinox_identical_and_init(rng):
    g, rev = bond_graph(rng)
    atoms, bonds = features(rng, 9, 5), features(rng, g.n_edges, 3)
    sd = chemprop_state_dict(rng, 5, 3, 8, bias=True)
    a, b = (dmpnn_layer(f, sd, undirected=True) for f in FRAMEWORKS)
    np.testing.assert_array_equal(a[0](a[1], g, atoms, bonds, rev), b[0](b[1], g, atoms, bonds, rev))

    params = flax_nn.DMPNNEncoder(8).init(jax.random.key(0), g, atoms, bonds, rev, features(rng, 9, 2))["params"]
    shapes = jax.tree_util.tree_map(jnp.shape, params)
    assert shapes == {"W_i": {"kernel": (8, 8)}, "W_h": {"kernel": (8, 8)}, "W_o": {"kernel": (13, 8), "bias": (8,)},
                      "W_d": {"kernel": (10, 10), "bias": (10,)}}
    layer = eqx_nn.DMPNNEncoder(5, 3, 8, use_bias=True, key=jax.random.key(0))
    assert (layer.W_i.weight.shape, layer.W_h.bias.shape, layer.W_o.weight.shape, layer.W_d) == ((8, 8), (8,),
                                                                                                 (8, 13), None)


def test_dmpnn_dtype(rng):
    g, rev = bond_graph(rng)
    atoms, bonds = features(rng, 9, 5), features(rng, g.n_edges, 3)
    layer = flax_nn.DMPNNEncoder(8, dtype=jnp.bfloat16)
    variables = layer.init(jax.random.key(0), g, atoms, bonds, rev)
    assert jax.tree_util.tree_leaves(variables)[0].dtype == jnp.float32
    out = layer.apply(variables, g, atoms, bonds, rev)
    assert out.dtype == jnp.bfloat16
    ref = flax_nn.DMPNNEncoder(8).apply(variables, g, atoms, bonds, rev)
    np.testing.assert_allclose(out.astype(jnp.float32), ref, rtol=0.05, atol=0.05)


def test_dmpnn_errors(rng):
    g, rev = bond_graph(rng)
    atoms, bonds = features(rng, 9, 5), features(rng, g.n_edges, 3)
    sd = chemprop_state_dict(rng, 5, 3, 8)
    layer = eqx_nn.DMPNNEncoder.from_chemprop(sd)
    with pytest.raises(ValueError, match="DMPNNEncoder: the weights take 5 atom and 3 bond features.*got 4 and 3"):
        layer(g, atoms[:, :4], bonds, rev)
    with pytest.raises(ValueError, match=r"DMPNNEncoder: bond_features must have 22 rows"):
        layer(g, atoms, bonds[:-1], rev)
    with pytest.raises(ValueError, match=r"DMPNNEncoder: rev_edge_ids must be an integer array \[n_edges\]"):
        layer(g, atoms, bonds, rev[:-1])
    with pytest.raises(ValueError, match="agg_dmpnn: rev_edge_ids must be an involution"):
        layer(g, atoms, bonds, np.roll(rev, 1))
    with pytest.raises(ValueError, match="DMPNNEncoder: g must be the square bond graph"):
        layer(jgo.Graph.from_edges(g.src, g.dst, 9, 10), atoms, bonds, rev)
    with pytest.raises(ValueError, match="DMPNNEncoder: atom_descriptors are given, but the layer has no"):
        layer(g, atoms, bonds, rev, features(rng, 9, 2))
    with pytest.raises(ValueError, match="DMPNNEncoder: depth must be a positive int; got 0"):
        eqx_nn.DMPNNEncoder(5, 3, 8, depth=0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="DMPNNEncoder: depth must be a positive int"):
        flax_nn.DMPNNEncoder(8, depth=2.5).init(jax.random.key(0), g, atoms, bonds, rev)


def test_chemprop_loader_errors(rng):
    sd = chemprop_state_dict(rng, 5, 3, 8, bias=True)
    with pytest.raises(ValueError, match=r"from_chemprop: state_dict must have the keys .*'W_o.bias'"):
        flax_nn.from_chemprop({k: v for k, v in sd.items() if k != "W_o.bias"})
    with pytest.raises(ValueError, match="apply them to the features before the call"):
        eqx_nn.DMPNNEncoder.from_chemprop({**sd, "V_d_transform.mean": np.zeros((1, 2))})
    with pytest.raises(ValueError, match="from_chemprop: W_i.bias and W_h.bias must both be present"):
        flax_nn.from_chemprop({k: v for k, v in sd.items() if k != "W_h.bias"})
    with pytest.raises(ValueError, match="from_chemprop: shapes do not fit Chemprop's"):
        flax_nn.from_chemprop({**sd, "W_h.weight": np.ones((8, 7))})
    with pytest.raises(ValueError, match="DMPNNEncoder.from_chemprop: shapes do not fit"):
        eqx_nn.DMPNNEncoder.from_chemprop({**sd, "W_o.bias": np.ones(7)})


# == RGCNConv =====================================================================================

def relational_graph(rng, n_src=9, n_dst=9, n_edges=40, n_rel=4):
    """Random edges (a duplicate, a self loop); destinations ``n_dst - 2`` and ``n_dst - 1`` receive
    none; relation ``n_rel - 1`` is absent, relation 0 only reaches the even destinations."""
    src = rng.integers(0, n_src, n_edges)
    dst = rng.integers(0, n_dst - 2, n_edges)
    src[1], dst[1] = src[0], dst[0]
    src[2] = dst[2]
    types = rng.integers(0, n_rel - 1, n_edges)
    types[(types == 0) & (dst % 2 == 1)] = 1
    return jgo.Graph.from_edges(src, dst, n_src, n_dst), types


def pyg_rgcn_state_dict(rng, n_rel, in_src, out, *, num_bases=None, num_blocks=None, in_dst=None, root=True,
                        bias=True):
    """Random weights named and laid out as PyG's ``RGCNConv.state_dict()``."""
    if num_blocks:
        shape = (n_rel, num_blocks, in_src // num_blocks, out // num_blocks)
    else:
        shape = (num_bases or n_rel, in_src, out)
    sd = {"weight": rng.normal(size=shape).astype(np.float32) / np.sqrt(in_src)}
    if num_bases:
        sd["comp"] = rng.normal(size=(n_rel, num_bases)).astype(np.float32)
    if root:
        sd["root"] = rng.normal(size=(in_dst or in_src, out)).astype(np.float32) / np.sqrt(in_src)
    if bias:
        sd["bias"] = rng.normal(size=out).astype(np.float32)
    return sd


def relation_weights(w):
    """The dense ``W_r [R, F, out]`` of PyG's weights: bases combined, blocks on the diagonal."""
    kernel = w["weight"]
    if "comp" in w:
        return jnp.einsum("rb,bio->rio", w["comp"], kernel)
    if kernel.ndim == 4:
        return jnp.stack([jax.scipy.linalg.block_diag(*kernel[r]) for r in range(kernel.shape[0])])
    return kernel


def ref_rgcn(g, x_src, x_dst, types, w, aggr, ids=False):
    """PyG's RGCNConv loop: one propagation per relation (a mean within each), summed; ``ids``: node
    ids pick rows of the weights."""
    weights = relation_weights(w)
    out = 0
    for r in range(weights.shape[0]):
        m = types == r
        msgs = weights[r][x_src[g.src[m]]] if ids else x_src[g.src[m]] @ weights[r]
        h = jax.ops.segment_sum(msgs, g.dst[m], g.n_dst)
        if aggr == "mean":
            h = h / jnp.maximum(jax.ops.segment_sum(jnp.ones(int(m.sum())), g.dst[m], g.n_dst), 1)[:, None]
        out = out + h
    if "root" in w:
        out = out + (w["root"][x_dst] if ids else x_dst @ w["root"])
    return out + w["bias"] if "bias" in w else out


def rgcn_layer(framework, sd, *, aggr="mean", num_nodes=None):
    """``(apply(params, g, x, types), params, pyg_named(params))``."""
    if framework == "flax":
        comp, weight = sd.get("comp"), sd["weight"]
        layer = flax_nn.RGCNConv(weight.shape[1] * weight.shape[3] if weight.ndim == 4 else weight.shape[2],
                                 weight.shape[0] if comp is None else comp.shape[0],
                                 num_bases=None if comp is None else comp.shape[1], aggr=aggr,
                                 root_weight="root" in sd, use_bias="bias" in sd,
                                 num_blocks=weight.shape[1] if weight.ndim == 4 else None, num_nodes=num_nodes)
        names = {"kernel": "weight", "comp": "comp", "root_kernel": "root", "bias": "bias"}
        return layer.apply, flax_nn.from_pyg_rgcn(sd), lambda p: {names[k]: v for k, v in p["params"].items()}
    layer = eqx_nn.RGCNConv.from_pyg(sd, aggr=aggr)
    return (lambda m, *args: m(*args), layer,
            lambda m: {k: getattr(m, k) for k in ("weight", "comp", "root", "bias") if getattr(m, k) is not None})


RGCN_CONFIGS = [{}, {"num_bases": 2}, {"num_blocks": 2}, {"root": False}, {"bias": False},
                {"num_bases": 3, "root": False, "bias": False}]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("aggr", ["mean", "add", "sum"])
@pytest.mark.parametrize("config", RGCN_CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()) or "full")
def test_rgcn_matches_reference(rng, framework, aggr, config):
    g, types = relational_graph(rng)
    x = features(rng, 9, 6)
    sd = pyg_rgcn_state_dict(rng, 4, 6, 8, **config)
    apply, params, _ = rgcn_layer(framework, sd, aggr=aggr)
    out = apply(params, g, x, types)
    assert out.shape == (9, 8) and out.dtype == jnp.float32
    np.testing.assert_allclose(out, ref_rgcn(g, x, x, types, sd, aggr), **TOL)
    if "root" not in config:  # nodes without in-edges get exactly their root term and bias
        np.testing.assert_allclose(out[-2:], ref_rgcn(g, x, x, types, {**sd, "weight": 0 * sd["weight"]}, aggr)[-2:],
                                   **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("in_dst", [6, 3])  # the own block in the fused aggregation / a separate root matmul
def test_rgcn_bipartite(rng, framework, in_dst):
    g, types = relational_graph(rng, 10, 7, 30)
    x_src, x_dst = features(rng, 10, 6), features(rng, 7, in_dst)
    sd = pyg_rgcn_state_dict(rng, 4, 6, 5, num_bases=2, in_dst=in_dst)
    apply, params, _ = rgcn_layer(framework, sd)
    np.testing.assert_allclose(apply(params, g, (x_src, x_dst), types), ref_rgcn(g, x_src, x_dst, types, sd, "mean"),
                               **TOL)
    with pytest.raises(ValueError, match="RGCNConv: x must be a pair"):
        apply(params, g, x_src, types)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("num_bases", [None, 2])
@pytest.mark.parametrize("aggr", ["mean", "add"])
def test_rgcn_node_ids(rng, framework, num_bases, aggr):
    """PyG's featureless input: ``x=None`` is ``arange``; integer ids pick rows of the weights."""
    g, types = relational_graph(rng)
    sd = pyg_rgcn_state_dict(rng, 4, 9, 5, num_bases=num_bases)
    apply, params, _ = rgcn_layer(framework, sd, aggr=aggr, num_nodes=9)
    nodes = np.arange(9)
    np.testing.assert_allclose(apply(params, g, None, types), ref_rgcn(g, nodes, nodes, types, sd, aggr, ids=True),
                               **TOL)
    ids = rng.integers(0, 9, 9)
    np.testing.assert_allclose(apply(params, g, jnp.asarray(ids), types),
                               ref_rgcn(g, ids, ids, types, sd, aggr, ids=True), **TOL)
    bip, bip_types = relational_graph(rng, 9, 6, 20)
    ids_dst = rng.integers(0, 9, 6)
    np.testing.assert_allclose(apply(params, bip, (ids, ids_dst), bip_types),
                               ref_rgcn(bip, ids, ids_dst, bip_types, sd, aggr, ids=True), **TOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("config", [{}, {"num_bases": 2}, {"num_blocks": 3}], ids=["full", "bases", "blocks"])
def test_rgcn_jit_and_grads(rng, framework, config):
    g, types = relational_graph(rng)
    x = features(rng, 9, 6)
    sd = pyg_rgcn_state_dict(rng, 4, 6, 6, **config)
    apply, params, named = rgcn_layer(framework, sd)
    np.testing.assert_allclose(jax.jit(apply)(params, g, x, types), apply(params, g, x, types), **TOL)
    r = features(rng, 9, 6)
    grads = jax.jit(jax.grad(lambda p, x: jnp.sum(jnp.tanh(apply(p, g, x, types)) * r), argnums=(0, 1)))(params, x)
    ref = jax.grad(lambda w, x: jnp.sum(jnp.tanh(ref_rgcn(g, x, x, types, w, "mean")) * r), argnums=(0, 1))(
        {k: jnp.asarray(v) for k, v in sd.items()}, x)
    assert_trees_close(named(grads[0]), ref[0])
    assert_trees_close(grads[1], ref[1])


def test_rgcn_node_ids_grads(rng):
    g, types = relational_graph(rng)
    sd = pyg_rgcn_state_dict(rng, 4, 9, 5, num_bases=2)
    apply, params, named = rgcn_layer("equinox", sd)
    nodes = np.arange(9)
    grads = jax.grad(lambda p: jnp.sum(apply(p, g, None, types) ** 2))(params)
    ref = jax.grad(lambda w: jnp.sum(ref_rgcn(g, nodes, nodes, types, w, "mean", ids=True) ** 2))(
        {k: jnp.asarray(v) for k, v in sd.items()})
    assert_trees_close(named(grads), ref)


@pytest.mark.parametrize("num_bases", [None, 2])
def test_rgcn_check_grads_float64(x64, rng, num_bases):
    g, types = relational_graph(rng, 6, 6, 14, 3)
    layer = eqx_nn.RGCNConv(3, 2, 3, num_bases=num_bases, key=jax.random.key(0))
    layer = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, layer)
    x = jnp.asarray(rng.normal(size=(6, 3)))
    check_grads(lambda m, x: jnp.tanh(m(g, x, types)), (layer, x), order=2, modes=("fwd", "rev"))


def test_rgcn_flax_and_equinox_identical_and_init(rng):
    g, types = relational_graph(rng)
    x = features(rng, 9, 6)
    sd = pyg_rgcn_state_dict(rng, 4, 6, 8, num_bases=2)
    (fa, fp, _), (ea, ep, _) = (rgcn_layer(f, sd) for f in FRAMEWORKS)
    np.testing.assert_array_equal(fa(fp, g, x, types), ea(ep, g, x, types))

    key = jax.random.key(0)
    for kw, shapes in [({"num_bases": 2}, {"kernel": (2, 6, 8), "comp": (4, 2), "root_kernel": (6, 8), "bias": (8,)}),
                       ({"num_blocks": 2, "root_weight": False, "use_bias": False}, {"kernel": (4, 2, 3, 4)})]:
        params = flax_nn.RGCNConv(8, 4, **kw).init(key, g, x, types)["params"]
        assert jax.tree_util.tree_map(jnp.shape, params) == shapes
        for name, p in params.items():  # PyG's glorot over the last two axes; zero bias
            limit = np.sqrt(6 / sum(p.shape[-2:])) if name != "bias" else 0
            assert 0 < np.abs(p).max() <= limit if limit else np.all(p == 0)
    layer = eqx_nn.RGCNConv((6, 3), 8, 4, num_bases=2, key=key)
    assert (layer.weight.shape, layer.comp.shape, layer.root.shape, layer.bias.shape) == ((2, 6, 8), (4, 2), (3, 8),
                                                                                          (8,))
    params = flax_nn.RGCNConv(5, 4).init(key, g, None, types)["params"]  # featureless: one row per node
    assert params["kernel"].shape == (4, 9, 5) and params["root_kernel"].shape == (9, 5)


def test_rgcn_dtype(rng):
    g, types = relational_graph(rng)
    x = features(rng, 9, 6)
    layer = flax_nn.RGCNConv(8, 4, num_bases=2, dtype=jnp.bfloat16)
    variables = layer.init(jax.random.key(0), g, x, types)
    assert variables["params"]["kernel"].dtype == jnp.float32
    out = layer.apply(variables, g, x, types)
    assert out.dtype == jnp.bfloat16
    ref = flax_nn.RGCNConv(8, 4, num_bases=2).apply(variables, g, x, types)
    np.testing.assert_allclose(out.astype(jnp.float32), ref, rtol=0.05, atol=0.05)


def test_rgcn_errors(rng):
    g, types = relational_graph(rng)
    x = features(rng, 9, 6)
    key = jax.random.key(0)
    layer = eqx_nn.RGCNConv(6, 8, 4, key=key)
    with pytest.raises(ValueError, match=r"RGCNConv: aggr must be one of 'mean', 'add', 'sum'; got 'max'"):
        eqx_nn.RGCNConv(6, 8, 4, aggr="max", key=key)
    with pytest.raises(ValueError, match="RGCNConv: num_bases and num_blocks cannot both be set"):
        flax_nn.RGCNConv(8, 4, num_bases=2, num_blocks=2).init(key, g, x, types)
    with pytest.raises(ValueError, match="RGCNConv: num_blocks=4 must divide the input and output features"):
        eqx_nn.RGCNConv(6, 8, 4, num_blocks=4, key=key)
    with pytest.raises(ValueError, match="RGCNConv: num_relations must be a positive int; got 0"):
        eqx_nn.RGCNConv(6, 8, 0, key=key)
    with pytest.raises(ValueError, match=r"RGCNConv: edge_types\[3\] = 4 is out of range \[0, num_relations=4\)"):
        layer(g, x, np.where(np.arange(g.n_edges) == 3, 4, types))
    with pytest.raises(TypeError, match="RGCNConv: edge_types must be an integer array"):
        layer(g, x, types.astype(np.float32))
    with pytest.raises(ValueError, match=r"RGCNConv: edge_types must be \[n_edges\]"):
        layer(g, x, types[:-1])
    with pytest.raises(ValueError, match="RGCNConv: x_src has 5 features, but the layer's weights take 6 .*build the "
                                         "layer with in_features for 5 features"):
        layer(g, x[:, :5], types)
    with pytest.raises(ValueError, match=r"RGCNConv: x must have 9 rows \(n_src\)"):
        layer(g, x[:-1], types)
    with pytest.raises(TypeError, match="RGCNConv: x_src and x_dst must both be float features or both node ids"):
        layer(g, (x, np.arange(9)), types)
    with pytest.raises(ValueError, match=r"RGCNConv: x_src\[0\] = 9 is out of range \[0, 6\)"):
        layer(g, np.full(9, 9), types)
    with pytest.raises(ValueError, match="RGCNConv: block-diagonal decomposition .* needs float features"):
        eqx_nn.RGCNConv(6, 8, 4, num_blocks=2, key=key)(g, np.arange(9) % 6, types)
    with pytest.raises(ValueError, match="RGCNConv: num_nodes .* is required for integer node-id input"):
        flax_nn.RGCNConv(8, 4).init(key, g, np.arange(9), types)
    with pytest.raises(ValueError, match="from_pyg_rgcn: state_dict must have the key 'weight'"):
        flax_nn.from_pyg_rgcn({"root": np.ones((6, 8))})
    with pytest.raises(ValueError, match="RGCNConv.from_pyg: comp must be"):
        eqx_nn.RGCNConv.from_pyg({"weight": np.ones((2, 6, 8)), "comp": np.ones((4, 3))})
    with pytest.raises(ValueError, match="from_pyg_rgcn: weight must be"):
        flax_nn.from_pyg_rgcn({"weight": np.ones((6, 8))})


# == InteractionNetwork ===========================================================================

class MLP(nn.Module):
    """Dense layers with relu between them."""

    sizes: tuple

    @nn.compact
    def __call__(self, x):
        for i, size in enumerate(self.sizes):
            x = nn.Dense(size)(x)
            x = nn.relu(x) if i < len(self.sizes) - 1 else x
        return x


def ref_interaction(g, x_src, x_dst, edges, edge_fn, node_fn, residual):
    new_edges = edge_fn(jnp.concatenate([edges, x_src[g.src], x_dst[g.dst]], axis=1))
    new_nodes = node_fn(jnp.concatenate([x_dst, jax.ops.segment_sum(new_edges, g.dst, g.n_dst)], axis=1))
    return (x_dst + new_nodes, edges + new_edges) if residual else (new_nodes, new_edges)


def interaction_layer(framework, rng, f_e, f_src, f_dst, f_e_out, f_out, residual):
    """``(apply(params, g, nodes, edges), params, edge_fn(params), node_fn(params))``: the MLPs as batched functions."""
    if framework == "flax":
        edge_mlp, node_mlp = MLP((16, f_e_out)), MLP((16, f_out))
        layer = flax_nn.InteractionNetwork(edge_mlp, node_mlp, residual=residual)
        key_e, key_n = jax.random.split(jax.random.key(int(rng.integers(1 << 30))))
        params = {"params": {"edge_mlp": edge_mlp.init(key_e, jnp.ones((1, f_e + f_src + f_dst)))["params"],
                             "node_mlp": node_mlp.init(key_n, jnp.ones((1, f_dst + f_e_out)))["params"]}}
        return (layer.apply, params, lambda p: lambda m: edge_mlp.apply({"params": p["params"]["edge_mlp"]}, m),
                lambda p: lambda m: node_mlp.apply({"params": p["params"]["node_mlp"]}, m))
    key_e, key_n = jax.random.split(jax.random.key(int(rng.integers(1 << 30))))
    layer = eqx_nn.InteractionNetwork(eqx.nn.MLP(f_e + f_src + f_dst, f_e_out, 16, 1, key=key_e),
                                      eqx.nn.MLP(f_dst + f_e_out, f_out, 16, 1, key=key_n), residual=residual)
    params, static = eqx.partition(layer, eqx.is_array)  # the arrays, for jax.jit and jax.grad

    def module(p):
        return eqx.combine(p, static)

    return (lambda p, *args: module(p)(*args), params, lambda p: jax.vmap(module(p).edge_mlp),
            lambda p: jax.vmap(module(p).node_mlp))


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("residual", [True, False])
def test_interaction_matches_reference(rng, framework, residual):
    g = relational_graph(rng)[0]
    nodes, edges = features(rng, 9, 5), features(rng, g.n_edges, 4)
    apply, params, edge_fn, node_fn = interaction_layer(framework, rng, 4, 5, 5, 4 if residual else 3,
                                                        5 if residual else 7, residual)
    out = apply(params, g, nodes, edges)
    ref = ref_interaction(g, nodes, nodes, edges, edge_fn(params), node_fn(params), residual)
    assert [o.shape for o in out] == [(9, 5 if residual else 7), (g.n_edges, 4 if residual else 3)]
    assert_trees_close(out, ref)
    assert_trees_close(jax.jit(apply)(params, g, nodes, edges), ref)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_interaction_bipartite(rng, framework):
    g = relational_graph(rng, 10, 6, 25)[0]
    x_src, x_dst, edges = features(rng, 10, 3), features(rng, 6, 5), features(rng, g.n_edges, 4)
    apply, params, edge_fn, node_fn = interaction_layer(framework, rng, 4, 3, 5, 4, 5, True)
    assert_trees_close(apply(params, g, (x_src, x_dst), edges),
                       ref_interaction(g, x_src, x_dst, edges, edge_fn(params), node_fn(params), True))
    with pytest.raises(ValueError, match="InteractionNetwork: nodes must be a pair"):
        apply(params, g, x_src, edges)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_interaction_grads(rng, framework):
    g = relational_graph(rng)[0]
    nodes, edges = features(rng, 9, 5), features(rng, g.n_edges, 4)
    apply, params, edge_fn, node_fn = interaction_layer(framework, rng, 4, 5, 5, 4, 5, True)
    r_n, r_e = features(rng, 9, 5), features(rng, g.n_edges, 4)

    def loss(p, x, e):
        out_n, out_e = apply(p, g, x, e)
        return jnp.sum(jnp.tanh(out_n) * r_n) + jnp.sum(jnp.tanh(out_e) * r_e)

    def ref_loss(p, x, e):
        out_n, out_e = ref_interaction(g, x, x, e, edge_fn(p), node_fn(p), True)
        return jnp.sum(jnp.tanh(out_n) * r_n) + jnp.sum(jnp.tanh(out_e) * r_e)

    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(params, nodes, edges)
    assert_trees_close(grads, jax.grad(ref_loss, argnums=(0, 1, 2))(params, nodes, edges))


def test_interaction_check_grads_float64(x64, rng):
    g = relational_graph(rng, 6, 6, 14)[0]
    w_e = jnp.asarray(rng.normal(size=(3 + 2 + 2, 3)) / np.sqrt(7))
    w_n = jnp.asarray(rng.normal(size=(2 + 3, 2)) / np.sqrt(5))

    def f(w_e, w_n, x, e):
        layer = eqx_nn.InteractionNetwork(lambda m: jnp.tanh(m @ w_e), lambda m: jnp.tanh(m @ w_n))
        return layer(g, x, e)

    x, e = jnp.asarray(rng.normal(size=(6, 2))), jnp.asarray(rng.normal(size=(g.n_edges, 3)))
    check_grads(f, (w_e, w_n, x, e), order=2, modes=("fwd", "rev"))


def test_interaction_errors(rng):
    g = relational_graph(rng)[0]
    nodes, edges = features(rng, 9, 5), features(rng, g.n_edges, 4)
    identity = eqx_nn.InteractionNetwork(lambda m: m[:3], lambda m: m)  # edge width 4 -> 3
    with pytest.raises(ValueError, match=r"InteractionNetwork: residual=True adds node_mlp's output"):
        identity(g, nodes, edges)
    with pytest.raises(ValueError, match=r"InteractionNetwork: edges must have 40 rows \(n_edges\)"):
        identity(g, nodes, edges[:-1])
    with pytest.raises(ValueError, match=r"InteractionNetwork: edge_mlp must return \[n_edges, F\]"):
        flax_nn.InteractionNetwork(lambda m: m[:-1], lambda m: m).apply({}, g, nodes, edges)
    with pytest.raises(TypeError, match="InteractionNetwork: residual must be a bool"):
        flax_nn.InteractionNetwork(lambda m: m, lambda m: m, residual="yes").apply({}, g, nodes, edges)


# == the fused kernels run ========================================================================

def test_training_steps_run_the_fused_kernels(rng):
    """A gradient step of each layer lowers to the fused forward and backward kernels, without scatters
    (Chemprop's and PyG's scatter-adds of ``[E, F]`` messages are gone)."""
    if jgo.kernel_platform() == "xla":
        pytest.skip("no fused kernels on this platform (JGO_KERNELS=xla)")

    def targets(fn, *args):
        hlo = jax.jit(jax.grad(fn, argnums=tuple(range(len(args))))).lower(*args).as_text()
        assert "scatter" not in hlo
        return {t for t in ("jgo_hg_basis_fwd", "jgo_hg_basis_norm", "jgo_hg_basis_bwd_src", "jgo_dmpnn_fwd",
                            "jgo_dmpnn_bwd", "jgo_update_efeat_fwd", "jgo_update_efeat_bwd_src",
                            "jgo_update_efeat_bwd_dst", "jgo_update_efeat_bwd_edge")
                if f'custom_call_target = "{t}"' in hlo or f"@{t}" in hlo}

    g, rev = bond_graph(rng)
    atoms, bonds = features(rng, 9, 5), features(rng, g.n_edges, 3)
    apply, params, _ = dmpnn_layer("flax", chemprop_state_dict(rng, 5, 3, 8))
    assert targets(lambda p, v, e: jnp.sum(apply(p, g, v, e, rev) ** 2), params, atoms, bonds) == {
        "jgo_dmpnn_fwd", "jgo_dmpnn_bwd", "jgo_update_efeat_fwd", "jgo_update_efeat_bwd_src",
        "jgo_update_efeat_bwd_edge"}

    g, types = relational_graph(rng)
    x = features(rng, 9, 6)
    for config in ({"num_bases": 2}, {"num_blocks": 2}):
        apply, params, _ = rgcn_layer("flax", pyg_rgcn_state_dict(rng, 4, 6, 8, **config))
        assert targets(lambda p, x, apply=apply: jnp.sum(apply(p, g, x, types) ** 2), params, x) == {
            "jgo_hg_basis_fwd", "jgo_hg_basis_norm", "jgo_hg_basis_bwd_src"}

    nodes, edges = features(rng, 9, 5), features(rng, g.n_edges, 4)
    apply, params, _, _ = interaction_layer("flax", rng, 4, 5, 5, 4, 5, True)
    assert targets(lambda p, x, e: sum(jnp.sum(o ** 2) for o in apply(p, g, x, e)), params, nodes, edges) == {
        "jgo_update_efeat_fwd", "jgo_update_efeat_bwd_src", "jgo_update_efeat_bwd_dst", "jgo_update_efeat_bwd_edge"}
