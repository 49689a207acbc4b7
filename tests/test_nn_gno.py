"""GNOBlock (flax and equinox) against gno_conv with the layer's own parameters."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_graph

import jaxgraphops as jgo
from jaxgraphops.nn import equinox as eqx_nn
from jaxgraphops.nn import flax as flax_nn

TOL = dict(rtol=1e-5, atol=1e-5)


def problem(rng, bipartite=False):
    g = random_graph(rng, 7, 6 if bipartite else 7, 30)
    f = rng.normal(size=(g.n_src, 3)).astype(np.float32)
    dx = rng.normal(size=(g.n_edges, 2)).astype(np.float32)
    f_dst = rng.normal(size=(g.n_dst, 5)).astype(np.float32) if bipartite else None
    return g, f, dx, f_dst


@pytest.mark.parametrize("kernel,features", [("matrix", 4), ("diagonal", 3)])
@pytest.mark.parametrize("skip", [False, True])
def test_flax_block_is_gno_conv_plus_skip(rng, kernel, features, skip):
    g, f, dx, f_dst = problem(rng, bipartite=True)
    w = rng.uniform(0.5, 1.0, g.n_edges).astype(np.float32)
    layer = flax_nn.GNOBlock(features, kernel_width=6, kernel=kernel, reduce="sum", skip=skip)
    variables = layer.init(jax.random.key(0), g, f, dx, f_dst)
    p = variables["params"]
    assert p["U"].shape == (6, 2) and p["V"].shape == ((features * 3 if kernel == "matrix" else 3), 6)
    out = layer.apply(variables, g, f, dx, f_dst, edge_weight=w)
    expect = jgo.gno_conv(g, f, dx, p["U"], p["b_u"], p["V"], p["b_v"], kernel=kernel, reduce="sum", edge_weight=w,
                          impl="xla")
    if skip:
        expect = expect + f_dst @ np.asarray(p["skip_kernel"]) + p["skip_bias"]
    np.testing.assert_allclose(out, expect, **TOL)
    grads = jax.grad(lambda v: jnp.sum(layer.apply(v, g, f, dx, f_dst) ** 2))(variables)
    assert all(np.isfinite(x).all() for x in jax.tree_util.tree_leaves(grads))


@pytest.mark.parametrize("kernel,features", [("matrix", 4), ("diagonal", 3)])
def test_equinox_block_is_gno_conv_plus_skip(rng, kernel, features):
    g, f, dx, _ = problem(rng)
    layer = eqx_nn.GNOBlock(3, features, 2, kernel_width=5, kernel=kernel, key=jax.random.key(1))
    out = jax.jit(lambda m, f, dx: m(g, f, dx))(layer, f, dx)
    expect = jgo.gno_conv(g, f, dx, layer.U, layer.b_u, layer.V, layer.b_v, kernel=kernel, impl="xla")
    expect = expect + f @ np.asarray(layer.skip.weight).T + layer.skip.bias
    np.testing.assert_allclose(out, expect, **TOL)


def test_flax_and_equinox_agree_with_the_same_weights(rng):
    g, f, dx, _ = problem(rng)
    eqx_layer = eqx_nn.GNOBlock(3, 2, 2, kernel_width=4, key=jax.random.key(2))
    flax_layer = flax_nn.GNOBlock(2, kernel_width=4)
    params = {"U": eqx_layer.U, "b_u": eqx_layer.b_u, "V": eqx_layer.V, "b_v": eqx_layer.b_v,
              "skip_kernel": eqx_layer.skip.weight.T, "skip_bias": eqx_layer.skip.bias}
    np.testing.assert_allclose(flax_layer.apply({"params": params}, g, f, dx), eqx_layer(g, f, dx), **TOL)


def test_layer_errors(rng):
    g, f, dx, _ = problem(rng, bipartite=True)
    with pytest.raises(ValueError, match="kernel='diagonal' needs as many output as input features"):
        eqx_nn.GNOBlock(3, 4, 2, kernel="diagonal", key=jax.random.key(0))
    with pytest.raises(ValueError, match="kernel must be one of"):
        eqx_nn.GNOBlock(3, 4, 2, kernel="full", key=jax.random.key(0))
    with pytest.raises(ValueError, match="kernel_width must be a positive int"):
        flax_nn.GNOBlock(4, kernel_width=0).init(jax.random.key(0), g, f, dx, f[:6])
    with pytest.raises(ValueError, match="f_dst is required for the skip connection of a bipartite graph"):
        flax_nn.GNOBlock(4).init(jax.random.key(0), g, f, dx)
    # a skip input with the wrong number of rows (found by the fuzzer, seed 9438: a broadcasting error before)
    with pytest.raises(ValueError, match=rf"GNOBlock: f_dst must be \[n_dst={g.n_dst}, c_dst\], got shape \(5, 3\)"):
        flax_nn.GNOBlock(4).init(jax.random.key(0), g, f, dx, jnp.ones((5, 3)))
    layer = eqx_nn.GNOBlock(3, 4, 2, skip_features=3, key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"GNOBlock: f_dst must be \[n_dst="):
        layer(g, f, dx, jnp.ones((g.n_dst + 1, 3)))
