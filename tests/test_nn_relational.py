"""RGCNConv, DMPNNEncoder and InteractionNetwork (flax and equinox) against direct pure-jnp loops:
outputs, jit, gradients of params and inputs, loaders, errors."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

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
        layer = flax_nn.DMPNNEncoder(sd["W_h.weight"].shape[0], depth, undirected, use_bias="W_i.bias" in sd,
                                     activation=activation)
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
