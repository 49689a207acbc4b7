"""Attention dropout inside the fused attention kernels (mha_gat, mha_gat_v2, mha_simple).

Oracles: the pure-JAX reference (``jaxgraphops.reference``) with the same mask, whose random words are
checked against Philox-4x32-10's published answers (Random123's kat_vectors); the undropped op (rate 0,
and the expectation over keys, within a bound derived from the mask's variance); a binomial bound on the
kept fraction; numerical derivatives (``check_grads``). Run with ``JGO_KERNELS=cuda-emulation`` the same
tests compare the emulated CUDA handlers with the reference.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import check_grads, random_graph

import jaxgraphops as jgo
from jaxgraphops import _philox

HEADS, C = 2, 3
RATE = 0.3


def _inputs(rng, g, edge, dtype=np.float64):
    width = HEADS * C
    x = rng.normal(size=(g.n_src, width)).astype(dtype)
    xd = rng.normal(size=(g.n_dst, width)).astype(dtype)
    ef = rng.normal(size=(g.n_edges, width)).astype(dtype) if edge else None
    return x, xd, ef


def _call(op, g, x, xd, ef, rng, **kw):
    """``op`` on ``(x, xd, ef)`` with attention weights drawn from ``rng``; kw goes to the op."""
    width = HEADS * C
    if op == "gat":
        a = rng.normal(size=((3 if ef is not None else 2) * width,)).astype(x.dtype)
        return lambda x, xd, ef, **more: jgo.mha_gat(g, x, a, x_dst=xd, num_heads=HEADS, edge_feat=ef, **kw, **more)
    if op == "gatv2":
        a = rng.normal(size=(width,)).astype(x.dtype)
        return lambda x, xd, ef, **more: jgo.mha_gat_v2(g, x, xd, a, num_heads=HEADS, edge_feat=ef, **kw, **more)
    return lambda x, xd, ef, **more: jgo.mha_simple(g, xd, x, x * 0.5, num_heads=HEADS, edge_feat=ef, **kw, **more)


OPS = ("gat", "gatv2", "simple")


def _setup(rng, op, edge, **kw):
    g = random_graph(rng, 7, 6, 24)
    x, xd, ef = _inputs(rng, g, edge)
    return g, (x, xd, ef), _call(op, g, x, xd, ef, rng, **kw)


# ---------------------------------------------------------------------------------------
# the mask


def test_philox_known_answers():
    """The pure-JAX Philox-4x32-10 (the kernels' twin, which the reference and the compositions draw from) reproduces Random123's known-answer vectors."""
    cases = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
             ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
             ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
              (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for counter, key, want in cases:
        words = _philox.philox4x32(tuple(jnp.uint32(c) for c in counter), jnp.uint32(key[0]), jnp.uint32(key[1]))
        assert tuple(int(w) for w in words) == want


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_keep_fraction_is_binomial(rate):
    """Over E*H = 400,000 (edge, head) pairs the kept fraction is 1 - rate within 5 binomial standard
    deviations (sqrt(p (1 - p) / n) <= 8e-4), and every factor is 0 or exactly 1 / (1 - rate)."""
    n_edges, heads = 100_000, 4
    f = np.asarray(_philox.attention_dropout_factor(jnp.array([7, 11], jnp.uint32), n_edges, heads, rate,
                                                    jnp.float64 if jax.config.x64_enabled else jnp.float32))
    scale = np.float32(1 / (1 - rate)) if f.dtype == np.float32 else 1 / (1 - rate)
    assert set(np.unique(f).tolist()) <= {0.0, float(scale)}
    kept = (f != 0).mean()
    n = n_edges * heads
    assert abs(kept - (1 - rate)) < 5 * np.sqrt(rate * (1 - rate) / n)
    # heads and edges are not correlated: each head keeps its own share
    for h in range(heads):
        assert abs((f[:, h] != 0).mean() - (1 - rate)) < 5 * np.sqrt(rate * (1 - rate) / n_edges)


# ---------------------------------------------------------------------------------------
# forward


@pytest.mark.parametrize("op", OPS)
def test_rate_zero_is_no_dropout(rng, op):
    """Rate 0 is the op without dropout, bit for bit, and lowers to the same program (no key operand, no
    dropout work); the key is then ignored."""
    _, (x, xd, ef), f = _setup(rng, op, edge=True)
    plain = jax.jit(lambda x, xd, ef: f(x, xd, ef, return_attention=True))
    zero = jax.jit(lambda x, xd, ef: f(x, xd, ef, return_attention=True, dropout_rate=0.0,
                                       dropout_key=jax.random.key(1)))
    for u, v in zip(plain(x, xd, ef), zero(x, xd, ef)):
        np.testing.assert_array_equal(u, v)
    assert plain.lower(x, xd, ef).as_text() == zero.lower(x, xd, ef).as_text()


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("edge", [False, True])
def test_kernel_matches_reference_with_the_same_mask(x64, rng, op, edge):
    """The fused kernels (CPU, or emulated CUDA) and impl="xla" against the reference with the same key: out and
    the returned attention, which is the undropped attention times the reference's factors."""
    g, (x, xd, ef), f = _setup(rng, op, edge)
    key = jax.random.key(3)
    out, alpha = f(x, xd, ef, return_attention=True, dropout_rate=RATE, dropout_key=key)
    out_x, alpha_x = f(x, xd, ef, return_attention=True, dropout_rate=RATE, dropout_key=key, impl="xla")
    _, alpha0 = f(x, xd, ef, return_attention=True, impl="xla")
    factors = _philox.attention_dropout_factor(jax.random.key_data(key), g.n_edges, HEADS, RATE, jnp.float64)
    np.testing.assert_allclose(alpha_x, alpha0 * factors, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(alpha, alpha_x, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out, out_x, rtol=1e-12, atol=1e-13)
    # out is the sum of the dropped weights times the values (the weights returned are the ones used)
    values = np.asarray(x if op != "simple" else 0.5 * x).reshape(g.n_src, HEADS, C)[np.asarray(g.src)]
    if op == "simple" and edge:
        values = values + np.asarray(ef).reshape(g.n_edges, HEADS, C)
    want = np.zeros((g.n_dst, HEADS, C))
    np.add.at(want, np.asarray(g.dst), np.asarray(alpha)[..., None] * values)
    np.testing.assert_allclose(np.asarray(out), want.reshape(g.n_dst, HEADS * C), rtol=1e-12, atol=1e-13)
    assert (np.asarray(factors) == 0).any() and (np.asarray(factors) != 0).any()


@pytest.mark.parametrize("op", OPS)
def test_fixed_key_reproducible_and_keys_differ(rng, op):
    """The same key gives the same result (also under jit, also for a raw PRNGKey with the same words); another
    key another mask."""
    _, (x, xd, _), f = _setup(rng, op, edge=False)
    x, xd = x.astype(np.float32), xd.astype(np.float32)
    run = lambda key: f(x, xd, None, return_attention=True, dropout_rate=RATE, dropout_key=key)  # noqa: E731
    out, alpha = run(jax.random.key(5))
    out2, alpha2 = jax.jit(run)(jax.random.key(5))
    np.testing.assert_array_equal(out, out2)  # the kernel's result, bit for bit
    # the returned weights are recomputed by XLA, whose fusions may round differently under jit: same mask
    np.testing.assert_array_equal(np.asarray(alpha) == 0, np.asarray(alpha2) == 0)
    np.testing.assert_allclose(alpha, alpha2, rtol=1e-6)
    np.testing.assert_array_equal(alpha, run(jax.random.key_data(jax.random.key(5)))[1])
    assert not np.array_equal(np.asarray(alpha) == 0, np.asarray(run(jax.random.key(6))[1]) == 0)


@pytest.mark.parametrize("op", OPS)
def test_mean_over_keys_is_no_dropout(x64, rng, op):
    """E[out'] = out: with independent masks, Var(out'[i,h,c]) = p / (1 - p) sum_e alpha_e^2 v_e[c]^2, so the
    mean over K = 4000 keys lies within 5 standard errors of the undropped output at every element (each
    element fails with probability 6e-7 for a Gaussian mean; the keys are fixed, so the test is
    deterministic). The keys run under vmap (element by element: the mask is keyed by the head)."""
    g, (x, xd, ef), f = _setup(rng, op, edge=True)
    out0, alpha0 = f(x, xd, ef, return_attention=True)
    keys = jax.random.split(jax.random.key(0), 4000)
    outs = jax.jit(jax.vmap(lambda k: f(x, xd, ef, dropout_rate=RATE, dropout_key=k)))(keys)
    values = np.asarray(x if op != "simple" else 0.5 * x).reshape(g.n_src, HEADS, C)[np.asarray(g.src)]
    if op == "simple":
        values = values + np.asarray(ef).reshape(g.n_edges, HEADS, C)
    var = np.zeros((g.n_dst, HEADS, C))
    np.add.at(var, np.asarray(g.dst), (np.asarray(alpha0)[..., None] * values) ** 2 * RATE / (1 - RATE))
    bound = 5 * np.sqrt(var.reshape(g.n_dst, HEADS * C) / keys.shape[0]) + 1e-12
    assert np.all(np.abs(np.asarray(outs).mean(axis=0) - np.asarray(out0)) <= bound)


# ---------------------------------------------------------------------------------------
# derivatives and transforms


@pytest.mark.parametrize("op", OPS)
def test_check_grads_at_a_fixed_key(x64, rng, op):
    """Order-2 derivatives in both modes with a fixed mask: the fused backward kernels at first order, the
    compositions with the same mask above."""
    _, (x, xd, ef), f = _setup(rng, op, edge=True)
    key = jax.random.key(2)
    fn = lambda x, xd, ef: f(x, xd, ef, dropout_rate=RATE, dropout_key=key)  # noqa: E731
    check_grads(fn, (x, xd, ef), order=2, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("op", OPS)
def test_gradients_match_the_reference(x64, rng, op):
    """First-order gradients of the fused kernels against JAX's gradient of the reference with the same mask."""
    g, (x, xd, ef), f = _setup(rng, op, edge=True)
    key = jax.random.key(4)
    w = rng.normal(size=(g.n_dst, HEADS * C))
    for impl in (None, "xla"):
        loss = lambda x, xd, ef, impl=impl: jnp.sum(  # noqa: E731
            w * f(x, xd, ef, dropout_rate=RATE, dropout_key=key, impl=impl))
        if impl is None:
            got = jax.grad(loss, (0, 1, 2))(x, xd, ef)
        else:
            want = jax.grad(loss, (0, 1, 2))(x, xd, ef)
    for u, v in zip(got, want):
        np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("op, targets", [("gat", ("jgo_gat_bwd_src", "jgo_gat_bwd_dst")),
                                         ("gatv2", ("jgo_gatv2_bwd_src", "jgo_gatv2_bwd_dst")),
                                         ("simple", ("jgo_mha_simple_bwd_src", "jgo_mha_simple_bwd_dst"))])
def test_reverse_mode_runs_the_fused_backward_kernels(rng, op, targets):
    """First-order reverse mode with dropout runs the fused backward kernels, not the E x H x C compositions."""
    _, (x, xd, ef), f = _setup(rng, op, edge=True)
    x, xd, ef = (v.astype(np.float32) for v in (x, xd, ef))
    loss = lambda x, xd, ef: jnp.sum(f(x, xd, ef, dropout_rate=RATE, dropout_key=jax.random.key(0)) ** 2)  # noqa: E731
    hlo = jax.jit(jax.grad(loss, (0, 1, 2))).lower(x, xd, ef).as_text()
    for target in targets:
        assert f'custom_call_target = "{target}"' in hlo or f"@{target}" in hlo, target
    assert "jgo_spmm" not in hlo and "jgo_sddmm" not in hlo


@pytest.mark.parametrize("op", OPS)
def test_vmap_over_features_uses_one_mask(rng, op):
    """vmap over features with one key equals the op per batch element (the same mask for each)."""
    _, (x, xd, _), f = _setup(rng, op, edge=False)
    xs = np.stack([x, 2 * x, -x]).astype(np.float32)
    xd = xd.astype(np.float32)
    key = jax.random.key(9)
    batched = jax.vmap(lambda x: f(x, xd, None, dropout_rate=RATE, dropout_key=key))(xs)
    for b in range(xs.shape[0]):
        np.testing.assert_allclose(batched[b], f(xs[b], xd, None, dropout_rate=RATE, dropout_key=key),
                                   rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("op", OPS)
def test_bad_dropout_arguments(rng, op):
    _, (x, xd, _), f = _setup(rng, op, edge=False)
    name = {"gat": "mha_gat", "gatv2": "mha_gat_v2", "simple": "mha_simple"}[op]
    key = jax.random.key(0)
    for rate in (1.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match=rf"{name}: dropout_rate must lie in \[0, 1\); got"):
            f(x, xd, None, dropout_rate=rate, dropout_key=key)
    for rate in (True, "0.1", jnp.float32(0.1)):
        with pytest.raises(TypeError, match=f"{name}: dropout_rate must be a Python float"):
            f(x, xd, None, dropout_rate=rate, dropout_key=key)
    with pytest.raises(ValueError, match=f"{name}: dropout_key .* is required when dropout_rate > 0; got None"):
        f(x, xd, None, dropout_rate=0.2)
    with pytest.raises(TypeError, match=f"{name}: dropout_key must be a JAX PRNG key"):
        f(x, xd, None, dropout_rate=0.2, dropout_key=np.array([1, 2, 3], np.uint32))
    with pytest.raises(ValueError, match=f"{name}: dropout_key must be a single PRNG key"):
        f(x, xd, None, dropout_rate=0.2, dropout_key=jax.random.split(key, 2))


# ---------------------------------------------------------------------------------------
# layers


def _layer_graph():
    return jgo.Graph.from_edges(np.array([0, 1, 2, 3, 4, 0, 2]), np.array([1, 2, 1, 0, 3, 4, 4]))


@pytest.mark.parametrize("name", ["GATConv", "GATv2Conv", "TransformerConv"])
def test_flax_layers_take_dropout_like_nn_dropout(rng, name):
    """flax: ``deterministic`` gives the undropped layer; otherwise the key comes from the "dropout" stream (same
    stream, same result), and every returned weight is the undropped one times 0 or 1 / (1 - rate)."""
    flax_nn = pytest.importorskip("jaxgraphops.nn.flax", reason="needs flax")
    g, x = _layer_graph(), jnp.asarray(rng.normal(size=(5, 4)), jnp.float32)
    layer = getattr(flax_nn, name)(3, heads=2, dropout=0.5)
    variables = layer.init(jax.random.key(0), g, x, deterministic=True)
    plain, alpha0 = getattr(flax_nn, name)(3, heads=2).apply(variables, g, x, return_attention_weights=True)
    out, _ = layer.apply(variables, g, x, return_attention_weights=True, deterministic=True)
    np.testing.assert_array_equal(out, plain)
    run = lambda k: layer.apply(variables, g, x, return_attention_weights=True, deterministic=False,  # noqa: E731
                                rngs={"dropout": k})
    out1, alpha1 = run(jax.random.key(1))
    np.testing.assert_array_equal(out1, run(jax.random.key(1))[0])
    ratio = np.asarray(alpha1)[np.asarray(alpha0) > 0] / np.asarray(alpha0)[np.asarray(alpha0) > 0]
    assert np.all(np.isclose(ratio, 0) | np.isclose(ratio, 2.0, rtol=1e-5)) and np.isclose(ratio, 0).any()
    with pytest.raises(ValueError, match=f"{name}: dropout must be a float in \\[0, 1\\); got 1.0"):
        getattr(flax_nn, name)(3, dropout=1.0).init(jax.random.key(0), g, x, deterministic=True)


@pytest.mark.parametrize("name", ["GATConv", "GATv2Conv", "TransformerConv"])
def test_equinox_layers_take_dropout_and_a_key(rng, name):
    """equinox: ``inference`` (field or call argument) gives the undropped layer; with a key the weights are the
    undropped ones times the reference's factors of that key; no key is an error."""
    pytest.importorskip("equinox", reason="needs equinox")
    from jaxgraphops.nn import equinox as eqx_nn

    g, x = _layer_graph(), jnp.asarray(rng.normal(size=(5, 4)), jnp.float32)
    layer = getattr(eqx_nn, name)(4, 3, heads=2, dropout=0.25, key=jax.random.key(0))
    plain = getattr(eqx_nn, name)(4, 3, heads=2, key=jax.random.key(0))
    out0, alpha0 = plain(g, x, return_attention_weights=True)
    np.testing.assert_array_equal(layer(g, x, inference=True), out0)
    np.testing.assert_array_equal(getattr(eqx_nn, name)(4, 3, heads=2, dropout=0.25, inference=True,
                                                        key=jax.random.key(0))(g, x), out0)
    key = jax.random.key(7)
    _, alpha = layer(g, x, return_attention_weights=True, key=key)
    factors = _philox.attention_dropout_factor(jax.random.key_data(key), alpha0.shape[0], 2, 0.25)
    np.testing.assert_allclose(alpha, alpha0 * factors, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match=f"{name}: key is required for attention dropout"):
        layer(g, x)
    with pytest.raises(ValueError, match=f"{name}: dropout must be a float in \\[0, 1\\); got -0.5"):
        getattr(eqx_nn, name)(4, 3, dropout=-0.5, key=jax.random.key(0))


@pytest.mark.parametrize("name", ["GATConv", "GATv2Conv", "TransformerConv"])
def test_nnx_layers_take_dropout_like_nnx_dropout(rng, name):
    """NNX, with the linen layer's weights: ``eval()`` gives the undropped layer; with a key (the call's ``rngs``)
    the weights are the undropped ones times the reference's factors of that key; ``train()`` draws from the
    layer's forked stream, which advances from call to call."""
    pytest.importorskip("flax", reason="needs flax")
    from flax import nnx

    from jaxgraphops.nn import flax as flax_nn
    from jaxgraphops.nn import nnx as nnx_nn

    g, x = _layer_graph(), jnp.asarray(rng.normal(size=(5, 4)), jnp.float32)
    linen = getattr(flax_nn, name)(3, heads=2, dropout=0.5)
    variables = linen.init(jax.random.key(0), g, x, deterministic=True)
    layer = nnx_nn.load_variables(getattr(nnx_nn, name)(4, 3, heads=2, dropout=0.5, rngs=nnx.Rngs(0)), variables)
    out0, alpha0 = linen.apply(variables, g, x, return_attention_weights=True, deterministic=True)
    layer.eval()
    np.testing.assert_allclose(layer(g, x), out0, rtol=1e-6, atol=1e-6)
    key = jax.random.key(7)
    _, alpha = layer(g, x, return_attention_weights=True, deterministic=False, rngs=key)
    factors = _philox.attention_dropout_factor(jax.random.key_data(key), alpha0.shape[0], 2, 0.5)
    np.testing.assert_allclose(alpha, alpha0 * factors, rtol=1e-6, atol=1e-7)
    layer.train()
    first, second = layer(g, x), layer(g, x)
    assert not np.allclose(first, out0) and not np.allclose(first, second)
    with pytest.raises(ValueError, match=f"{name}: dropout must be a float in \\[0, 1\\); got 1.0"):
        getattr(nnx_nn, name)(4, 3, dropout=1.0, rngs=nnx.Rngs(0))
