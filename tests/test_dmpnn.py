"""agg_dmpnn (Chemprop's directed bond message) against hand-computed tables, a NumPy loop over a
real molecule's bond graph and the reference; derivatives of every order; transforms; errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import check_grads, kernel_index_error, kernel_only

import jaxgraphops as jgo
from jaxgraphops.ops._dmpnn_primitives import DMPNN
from jaxgraphops.ops._primitive_utils import graph_arrays


def numpy_dmpnn(src, dst, n, h, rev, concat_own=False):
    """The definition, one edge at a time."""
    h = np.asarray(h, np.float64)
    m = np.zeros_like(h)
    for e in range(len(src)):
        for x in range(len(src)):
            if dst[x] == src[e]:
                m[e] += h[x]
        if rev[e] >= 0:
            m[e] -= h[rev[e]]
    return np.concatenate([m, h], axis=1) if concat_own else m


def bond_graph(bonds, n_atoms, index_dtype=None):
    """Chemprop's layout: bond i gives edges 2i = a -> b and 2i + 1 = b -> a, reverse e ^ 1."""
    src = np.array([x for a, b in bonds for x in (a, b)])
    dst = np.array([x for a, b in bonds for x in (b, a)])
    rev = np.arange(len(src)) ^ 1
    return jgo.Graph.from_edges(src, dst, n_atoms, n_atoms, index_dtype=index_dtype), src, dst, rev


def random_bond_graph(rng, n=12, pairs=25, singles=6, loops=3, index_dtype=None):
    """Random directed bonds in shuffled input order: reverse pairs, edges without a reverse (-1),
    self loops that are their own reverse, and one atom without in-edges (n - 1)."""
    a = rng.integers(0, n - 1, pairs)
    b = (a + rng.integers(1, n - 1, pairs)) % (n - 1)
    src = np.concatenate([a, b, rng.integers(0, n, singles), rng.integers(0, n - 1, loops)])
    dst = np.concatenate([b, a, rng.integers(0, n - 1, singles), src[2 * pairs + singles:]])
    rev = np.concatenate([np.arange(pairs, 2 * pairs), np.arange(pairs), np.full(singles, -1),
                          np.arange(2 * pairs + singles, 2 * pairs + singles + loops)])
    perm = rng.permutation(len(src))  # edge k of the new order is old edge perm[k]
    inv = np.argsort(perm)
    new_rev = np.where(rev[perm] >= 0, inv[np.maximum(rev[perm], 0)], -1)
    g = jgo.Graph.from_edges(src[perm], dst[perm], n, n, index_dtype=index_dtype)
    return g, src[perm], dst[perm], new_rev


def close(dtype):
    tol = 2e-5 if dtype == np.float32 else 1e-12
    return lambda a, b: np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# ---------------------------------------------------------------------------------------
# literal cases

# 0: 0 -> 1 (rev 1), 1: 1 -> 0 (rev 0), 2: 1 -> 2 (no reverse), 3: 3 -> 3 (a self loop, its own
# reverse), 4: 4 -> 0 and 5: 4 -> 2, each other's "reverse" (any involution is allowed); node 4
# has no in-edges. h = 1, 2, 4, ... so that every sum is unique.
LITERAL_SRC, LITERAL_DST = np.array([0, 1, 1, 3, 4, 4]), np.array([1, 0, 2, 3, 0, 2])
LITERAL_REV = np.array([1, 0, -1, 3, 5, 4])
# S = (h1 + h4, h0, h2 + h5, h3, 0) = (18, 1, 36, 8, 0)
LITERAL_M = np.array([18 - 2, 1 - 1, 1, 8 - 8, 0 - 32, 0 - 16], np.float64)
# G = 1 everywhere: T = out-degrees (1, 2, 0, 1, 2); grad_h[x] = T[dst x] - [rev x != -1]
LITERAL_GRAD = np.array([2 - 1, 1 - 1, 0, 1 - 1, 1 - 1, 0 - 1], np.float64)


@pytest.mark.parametrize("concat_own", [False, True])
def test_literal_table(concat_own):
    g = jgo.Graph.from_edges(LITERAL_SRC, LITERAL_DST, 5, 5)
    h = jnp.asarray(np.stack([2.0 ** np.arange(6), -100 * 2.0 ** np.arange(6)], axis=1), jnp.float32)
    out = jgo.agg_dmpnn(g, h, LITERAL_REV, concat_own=concat_own)
    want = np.stack([LITERAL_M, -100 * LITERAL_M], axis=1)
    if concat_own:
        want = np.concatenate([want, h], axis=1)
    np.testing.assert_array_equal(out, want)
    grad = jax.grad(lambda h: jnp.sum(jgo.agg_dmpnn(g, h, LITERAL_REV, concat_own=concat_own)))(h)
    np.testing.assert_array_equal(grad, np.stack([LITERAL_GRAD, LITERAL_GRAD], axis=1) + concat_own)


ETHANOL_BONDS = [(0, 1), (1, 2), (0, 3), (0, 4), (0, 5), (1, 6), (1, 7), (2, 8)]  # C0 C1 O2, H3-H8


@pytest.mark.parametrize("concat_own", [False, True])
def test_ethanol_against_a_numpy_loop(rng, concat_own):
    g, src, dst, rev = bond_graph(ETHANOL_BONDS, 9)
    h = rng.normal(size=(16, 5)).astype(np.float32)
    out = jgo.agg_dmpnn(g, h, rev, concat_own=concat_own)
    np.testing.assert_allclose(out, numpy_dmpnn(src, dst, 9, h, rev, concat_own), rtol=1e-5, atol=1e-5)
    # a hydrogen has one bond: its only in-edge is the reverse of its out-edge, so m = 0 exactly
    from_h = np.flatnonzero(src >= 3)
    np.testing.assert_array_equal(np.asarray(out)[from_h, :5], 0)
    # the C0 -> C1 message is the sum of the three C-H bonds into C0
    np.testing.assert_allclose(out[0, :5], h[5] + h[7] + h[9], rtol=1e-6)
    w = rng.normal(size=out.shape).astype(np.float32)
    grad = jax.grad(lambda h: jnp.sum(jgo.agg_dmpnn(g, h, rev, concat_own=concat_own) * w))(h)
    jac = np.stack([numpy_dmpnn(src, dst, 9, np.eye(16)[:, [k]], rev, concat_own)[:, 0] for k in range(16)], 1)
    np.testing.assert_allclose(grad, jac.T @ w[:, :5] + (w[:, 5:] if concat_own else 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("concat_own", [False, True])
def test_graph_without_edges(concat_own):
    g = jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 3, 3)
    h = jnp.zeros((0, 4))
    out = jgo.agg_dmpnn(g, h, np.zeros(0, np.int32), concat_own=concat_own)
    assert out.shape == (0, 8 if concat_own else 4)
    grad = jax.grad(lambda h: jnp.sum(jgo.agg_dmpnn(g, h, np.zeros(0, np.int32), concat_own=concat_own)))(h)
    assert grad.shape == (0, 4)


def test_zero_width_features():
    g, _, _, rev = bond_graph(ETHANOL_BONDS, 9)
    assert jgo.agg_dmpnn(g, jnp.zeros((16, 0)), rev).shape == (16, 0)
    assert jgo.agg_dmpnn(g, jnp.zeros((16, 0)), rev, concat_own=True).shape == (16, 0)


def test_nan_and_inf_propagate_like_the_reference():
    # edge 1 = 1 -> 0 is the reverse of edge 0 = 0 -> 1 and the only edge into node 0
    g = jgo.Graph.from_edges(LITERAL_SRC, LITERAL_DST, 5, 5)
    h = np.ones((6, 4), np.float32)
    h[1] = [np.inf, -np.inf, np.nan, 1.0]  # S[0] = h[1]: m[0] = S[0] - h[1] = inf - inf = NaN, ...
    h[4, 0] = np.inf  # S[0] = h[1] + h[4]: m[0, 0] = (inf + inf) - inf = NaN; m[5, 0] = 0 - inf = -inf
    h[2, 3] = np.inf  # S[2] = h[2] + h[5]: nobody leaves node 2; m[2] has no reverse: S[1] = h[0]
    out = np.asarray(jgo.agg_dmpnn(g, h, LITERAL_REV))
    ref = np.asarray(jgo.agg_dmpnn(g, h, LITERAL_REV, impl="xla"))
    np.testing.assert_array_equal(out, ref)  # NaN where NaN, inf where inf, and equal elsewhere
    assert np.isnan(out[0, :3]).all() and out[0, 3] == (1.0 + 1.0) - 1.0
    assert out[5, 0] == -np.inf and np.isnan(out[4, :]).sum() == 0


# ---------------------------------------------------------------------------------------
# the reference on random bond graphs


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("concat_own", [False, True])
def test_matches_reference(x64, rng, index_dtype, dtype, concat_own):
    g, src, dst, rev = random_bond_graph(rng, index_dtype=index_dtype)
    h = rng.normal(size=(g.n_edges, 7)).astype(dtype)
    f = lambda h: jgo.agg_dmpnn(g, h, rev, concat_own=concat_own)  # noqa: E731
    r = lambda h: jgo.agg_dmpnn(g, h, rev, concat_own=concat_own, impl="xla")  # noqa: E731
    out = f(h)
    assert out.dtype == dtype
    close(dtype)(out, r(h))
    close(dtype)(out, numpy_dmpnn(src, dst, g.n_src, h, rev, concat_own))
    w = rng.normal(size=out.shape).astype(dtype)
    close(dtype)(jax.grad(lambda h: jnp.sum(f(h) * w))(h), jax.grad(lambda h: jnp.sum(r(h) * w))(h))


def test_larger_graph_matches_reference(rng):
    g, _, _, rev = random_bond_graph(rng, n=3000, pairs=20000, singles=2000, loops=100)
    h = rng.normal(size=(g.n_edges, 40)).astype(np.float32)
    f = lambda h: jgo.agg_dmpnn(g, h, rev, concat_own=True)  # noqa: E731
    r = lambda h: jgo.agg_dmpnn(g, h, rev, concat_own=True, impl="xla")  # noqa: E731
    c = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)  # noqa: E731
    c(f(h), r(h))
    w = rng.normal(size=(g.n_edges, 80)).astype(np.float32)
    c(jax.grad(lambda h: jnp.sum(f(h) * w))(h), jax.grad(lambda h: jnp.sum(r(h) * w))(h))


def test_rev_dtype_may_differ_from_the_graph(rng):
    g, _, _, rev = random_bond_graph(rng, index_dtype=np.int32)
    h = rng.normal(size=(g.n_edges, 3)).astype(np.float32)
    with jax.enable_x64(True):
        out = jax.jit(lambda r: jgo.agg_dmpnn(g, h, r))(jnp.asarray(rev, jnp.int64))
        close(np.float32)(out, jgo.agg_dmpnn(g, h, rev, impl="xla"))
        bad = np.asarray(rev, np.int64)
        bad[3] = 2 ** 32 + 1  # would wrap to 1 in int32: must stay out of range
        with kernel_index_error(".*rev_edge_ids\\[3\\] = .* out of range"):
            jax.jit(lambda r: jgo.agg_dmpnn(g, h, r))(jnp.asarray(bad)).block_until_ready()


def test_half_precision_computes_in_float32(rng):
    g, _, _, rev = random_bond_graph(rng)
    h = rng.normal(size=(g.n_edges, 4)).astype(np.float32)
    for dtype in (jnp.bfloat16, jnp.float16):
        hh = jnp.asarray(h, dtype)
        out = jgo.agg_dmpnn(g, hh, rev)
        assert out.dtype == dtype
        want = jgo.agg_dmpnn(g, np.asarray(hh, np.float32), rev, impl="xla")
        np.testing.assert_allclose(np.asarray(out, np.float32), want, rtol=2e-2, atol=5e-2)
        grad = jax.grad(lambda x: jnp.sum(jgo.agg_dmpnn(g, x, rev).astype(jnp.float32)))(hh)
        assert grad.dtype == dtype


# ---------------------------------------------------------------------------------------
# derivatives


@pytest.mark.parametrize("concat_own", [False, True])
def test_check_grads_order2(x64, rng, concat_own):
    g, _, _, rev = random_bond_graph(rng)
    h = rng.normal(size=(g.n_edges, 3))
    f = lambda h: jnp.sin(jgo.agg_dmpnn(g, h, rev, concat_own=concat_own))  # noqa: E731
    check_grads(f, (h,), order=2, modes=("fwd", "rev"))


def test_hessian_matches_reference(x64, rng):
    g, _, _, rev = random_bond_graph(rng, n=6, pairs=6, singles=2, loops=1)
    h = rng.normal(size=(g.n_edges, 2))
    loss = lambda impl: lambda h: jnp.sum(jnp.sin(jgo.agg_dmpnn(g, h, rev, concat_own=True, impl=impl)) ** 2)  # noqa: E731
    np.testing.assert_allclose(jax.jit(jax.hessian(loss(None)))(h), jax.jit(jax.hessian(loss("xla")))(h),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("concat_own", [False, True])
def test_reverse_mode_runs_the_fused_backward_kernel(rng, concat_own):
    g, _, _, rev = random_bond_graph(rng)
    h = rng.normal(size=(g.n_edges, 5)).astype(np.float32)
    loss = lambda h: jnp.sum(jgo.agg_dmpnn(g, h, rev, concat_own=concat_own) ** 2)  # noqa: E731
    hlo = jax.jit(jax.grad(loss)).lower(h).as_text()
    for target in ("jgo_dmpnn_fwd", "jgo_dmpnn_bwd"):
        assert f'custom_call_target = "{target}"' in hlo or f"@{target}" in hlo, target
    assert "scatter" not in hlo  # no segment_sum: the node sums are the kernels'
    fwd_only = jax.jit(loss).lower(h).as_text()
    assert "jgo_dmpnn_fwd" in fwd_only and "jgo_dmpnn_bwd" not in fwd_only


def test_backward_is_deterministic(rng):
    g, _, _, rev = random_bond_graph(rng, n=400, pairs=3000, singles=200, loops=20)
    h = rng.normal(size=(g.n_edges, 33)).astype(np.float32)
    grad = jax.jit(jax.grad(lambda h: jnp.sum(jgo.agg_dmpnn(g, h, rev, concat_own=True) ** 3)))
    first = grad(h)
    for _ in range(3):
        np.testing.assert_array_equal(grad(h), first)


# ---------------------------------------------------------------------------------------
# transforms


def test_jit_jvp_and_jacobians(rng):
    g, _, _, rev = random_bond_graph(rng)
    h = rng.normal(size=(g.n_edges, 3)).astype(np.float32)
    f = lambda h: jgo.agg_dmpnn(g, h, rev, concat_own=True)  # noqa: E731
    r = lambda h: jgo.agg_dmpnn(g, h, rev, concat_own=True, impl="xla")  # noqa: E731
    c = lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-5)  # noqa: E731
    c(jax.jit(f)(h), r(h))
    c(jax.jit(lambda g, h, rev: jgo.agg_dmpnn(g, h, rev, concat_own=True))(g, h, jnp.asarray(rev)), r(h))
    c(jax.jvp(f, (h,), (np.ones_like(h),))[1], jax.jvp(r, (h,), (np.ones_like(h),))[1])
    c(jax.jacfwd(f)(h), jax.jacfwd(r)(h))
    c(jax.jacrev(f)(h), jax.jacrev(r)(h))


def test_vmap(rng):
    g, _, _, rev = random_bond_graph(rng)
    h = rng.normal(size=(3, g.n_edges, 4)).astype(np.float32)
    c = lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-5)  # noqa: E731
    f = lambda h, rev: jgo.agg_dmpnn(g, h, rev, concat_own=True)  # noqa: E731
    r = lambda h, rev: jgo.agg_dmpnn(g, h, rev, concat_own=True, impl="xla")  # noqa: E731
    c(jax.vmap(f, (0, None))(h, rev), jax.vmap(r, (0, None))(h, rev))
    revs = np.stack([rev, np.full_like(rev, -1), rev])  # a batch of reverse indices too
    c(jax.vmap(f)(h, revs), jax.vmap(r)(h, revs))
    loss = lambda fn: lambda h, rev: jnp.sum(fn(h, rev) ** 2)  # noqa: E731
    c(jax.vmap(jax.grad(loss(f)))(h, revs), jax.vmap(jax.grad(loss(r)))(h, revs))


def test_vmap_over_graphs(rng):
    parts = [bond_graph(ETHANOL_BONDS, 9), bond_graph([(b, a) for a, b in ETHANOL_BONDS], 9)]
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *[p[0] for p in parts])
    h = rng.normal(size=(16, 3)).astype(np.float32)
    out = jax.vmap(lambda g: jgo.agg_dmpnn(g, h, parts[0][3]))(stacked)
    for i, (g, src, dst, rev) in enumerate(parts):
        np.testing.assert_allclose(out[i], numpy_dmpnn(src, dst, 9, h, rev), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------
# errors


def test_trace_time_errors(rng):
    g, _, _, rev = bond_graph(ETHANOL_BONDS, 9)
    h = np.zeros((16, 3), np.float32)
    with pytest.raises(ValueError, match=r"agg_dmpnn: rev_edge_ids\[2\] = 16 is out of range \[-1, 16\)"):
        jgo.agg_dmpnn(g, h, np.where(np.arange(16) == 2, 16, rev))
    with pytest.raises(ValueError, match=r"rev_edge_ids\[0\] = -2 is out of range"):
        jgo.agg_dmpnn(g, h, np.where(np.arange(16) == 0, -2, rev))
    broken = rev.copy()
    broken[0] = 2  # 0 -> 2, but rev[2] = 3
    with pytest.raises(ValueError, match=r"agg_dmpnn: rev_edge_ids must be an involution .*rev_edge_ids\[0\] = 2 "
                                         r"but rev_edge_ids\[2\] = 3"):
        jgo.agg_dmpnn(g, h, broken)
    one_way = rev.copy()
    one_way[1] = -1  # edge 0 names 1 as its reverse, but 1 has none
    with pytest.raises(ValueError, match="must be an involution"):
        jgo.agg_dmpnn(g, h, one_way)
    with pytest.raises(ValueError, match="must be an involution"):  # also for impl="xla"
        jgo.agg_dmpnn(g, h, one_way, impl="xla")
    with pytest.raises(TypeError, match="agg_dmpnn: rev_edge_ids must be an integer array"):
        jgo.agg_dmpnn(g, h, rev.astype(np.float32))
    with pytest.raises(ValueError, match=r"agg_dmpnn: rev_edge_ids must have shape \[n_edges\]"):
        jgo.agg_dmpnn(g, h, rev[:5])
    with pytest.raises(ValueError, match="agg_dmpnn: h must have 16 rows"):
        jgo.agg_dmpnn(g, h[:4], rev)
    with pytest.raises(ValueError, match=r"agg_dmpnn: h must be \[n_edges, D\]"):
        jgo.agg_dmpnn(g, h[:, 0], rev)
    with pytest.raises(TypeError, match="agg_dmpnn: h must be a floating-point array"):
        jgo.agg_dmpnn(g, h.astype(np.int32), rev)
    with pytest.raises(ValueError, match="agg_dmpnn: g must be a square graph"):
        jgo.agg_dmpnn(jgo.Graph.from_edges(np.array([0]), np.array([1]), 1, 2), np.zeros((1, 2)), np.array([-1]))
    with pytest.raises(ValueError, match="impl must be one of"):
        jgo.agg_dmpnn(g, h, rev, impl="cuda")


@pytest.mark.parametrize("concat_own", [False, True])
def test_invalid_rev_under_jit(rng, concat_own):
    """Traced: the CPU kernels raise (forward and backward); the CUDA kernels make the rows of the
    offending edges NaN (edge 5's entry out of range, and edge 4, whose reverse 5 does not name it back)."""
    g, _, _, rev = bond_graph(ETHANOL_BONDS, 9)
    h = rng.normal(size=(16, 3)).astype(np.float32)
    f = jax.jit(lambda h, r: jgo.agg_dmpnn(g, h, r, concat_own=concat_own))
    grad = jax.jit(jax.grad(lambda h, r: jnp.sum(jgo.agg_dmpnn(g, h, r, concat_own=concat_own))))
    cases = [(np.where(np.arange(16) == 5, 99, rev), r"rev_edge_ids\[5\] = 99 is out of range \[-1, 16\)", [4, 5]),
             (np.where(np.arange(16) == 5, -7, rev), r"rev_edge_ids\[5\] = -7 is out of range", [4, 5]),
             (np.where(np.arange(16) == 1, -1, rev),
              r"rev_edge_ids must be an involution .*rev_edge_ids\[0\] = 1 but rev_edge_ids\[1\] = -1", [0])]
    for bad, message, rows in cases:
        bad = jnp.asarray(bad, jnp.int32)
        with kernel_index_error(f".*agg_dmpnn \\(jgo_dmpnn_fwd\\): {message}"):
            out = np.asarray(f(h, bad))
            assert np.isnan(out[rows, :3]).all()  # the CUDA kernels' answer
            others = np.setdiff1d(np.arange(16), rows)
            assert not np.isnan(out[others]).any()
        with kernel_index_error(f".*agg_dmpnn \\(jgo_dmpnn_(fwd|bwd)\\): {message}"):
            grad(h, bad).block_until_ready()
        # the backward kernel alone
        G = jnp.ones((16, 6 if concat_own else 3))
        bwd = jax.jit(lambda h, r, G: DMPNN.vjp.bind(*graph_arrays(g), h, r, G, concat_own=concat_own, part="edges"))
        with kernel_index_error(f".*agg_dmpnn \\(jgo_dmpnn_bwd\\): {message}"):
            grad_h = np.asarray(bwd(h, bad, G)[0])
            assert np.isnan(grad_h[rows]).all()


def test_malformed_graph_reaching_the_kernel_is_an_error(rng):
    g, _, _, rev = bond_graph(ETHANOL_BONDS, 9)
    h = rng.normal(size=(16, 3)).astype(np.float32)
    arrays = [jnp.asarray(getattr(g, n)) for n in ("src", "dst", "csc_offsets", "csc_src", "csc_eid", "csr_offsets",
                                                   "csr_dst", "csr_eid")]
    arrays[4] = arrays[4].at[3].set(99)
    bad = kernel_only(jgo.Graph(*arrays, g.n_src, g.n_dst, validate=False))
    with kernel_index_error(".*dmpnn_fwd \\(CSC\\).*edge id 99"):
        jgo.agg_dmpnn(bad, h, rev).block_until_ready()
    arrays = [jnp.asarray(getattr(g, n)) for n in ("src", "dst", "csc_offsets", "csc_src", "csc_eid", "csr_offsets",
                                                   "csr_dst", "csr_eid")]
    arrays[7] = arrays[7].at[0].set(-4)
    bad = kernel_only(jgo.Graph(*arrays, g.n_src, g.n_dst, validate=False))
    with kernel_index_error(".*dmpnn_(fwd|bwd) \\(CSR\\).*edge id -4"):
        jax.grad(lambda x: jnp.sum(jgo.agg_dmpnn(bad, x, rev)))(h).block_until_ready()


def test_misspelt_options_are_suggested(rng):
    g, _, _, rev = bond_graph(ETHANOL_BONDS, 9)
    with pytest.raises(ValueError, match="did you mean 'xla'"):
        jgo.agg_dmpnn(g, np.zeros((16, 2), np.float32), rev, impl="XLA")
