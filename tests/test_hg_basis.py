"""agg_hg_basis (RGCN's relational aggregation) against hand-computed tables, a NumPy loop and the
reference; derivatives of every order; the fused kernels on the HLO; transforms; errors."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import check_grads, check_vmap, jit_jacfwd, jit_jacrev, kernel_only, random_graph

import jaxgraphops as jgo


def close(dtype):
    tol = 2e-5 if dtype == np.float32 else 1e-12
    return lambda a, b: np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def problem(rng, g, R=3, B=2, D=4, dtype=np.float64, comp=True):
    """(x, edge_types, comp, x_dst) of a random problem on g; comp None when not comp."""
    cast = lambda a: np.asarray(a, dtype)  # noqa: E731
    return (cast(rng.normal(size=(g.n_src, D))), rng.integers(0, R, g.n_edges),
            cast(rng.normal(size=(R, B))) if comp else None, cast(rng.normal(size=(g.n_dst, D))))


def agg(g, R, comp_on=True, own=None, norm=False, impl=None):
    """``f(x, comp, x_dst)`` over fixed edge types (given later by ``bind``); own: None, "x" or "x_dst"."""
    def bind(types):
        def f(x, comp=None, x_dst=None):
            return jgo.agg_hg_basis(g, x, types, comp if comp_on else None, n_edge_types=R,
                                    x_dst=x_dst if own == "x_dst" else None, concat_own=own is not None,
                                    norm_by_dst_degree=norm, impl=impl)
        return f
    return bind


def numpy_loop(src, dst, n_dst, x, types, comp, R, norm, own):
    """The definition, one edge at a time."""
    D = x.shape[1]
    K = R if comp is None else comp.shape[1]
    out = np.zeros((n_dst, K * D + (D if own is not None else 0)))
    count = {}
    for s, d, t in zip(src, dst, types):
        count[(d, t)] = count.get((d, t), 0) + 1
    for s, d, t in zip(src, dst, types):
        w = 1.0 / count[(d, t)] if norm else 1.0
        if comp is None:
            out[d, t * D:(t + 1) * D] += w * x[s]
        else:
            for b in range(K):
                out[d, b * D:(b + 1) * D] += comp[t, b] * w * x[s]
    if own is not None:
        out[:, K * D:] = own
    return out


# ---------------------------------------------------------------------------------------
# literal tables


def literal_graph():
    # node 0 <- 1 (type 0), 2 (type 1), 3 (type 1); node 1 <- 0 (type 1); node 2 <- 3 (type 0), 3 (type 0)
    # node 3 receives nothing; relation 1 is absent at node 2, relation 0 at node 1
    src = np.array([1, 2, 3, 0, 3, 3])
    dst = np.array([0, 0, 0, 1, 2, 2])
    types = np.array([0, 1, 1, 1, 0, 0])
    return jgo.Graph.from_edges(src, dst, 4, 4), types


X = np.array([[1.0, -1.0], [2.0, 0.5], [4.0, 3.0], [8.0, -2.0]])


def test_literal_without_comp_by_hand():
    g, types = literal_graph()
    out = jgo.agg_hg_basis(g, X, types, n_edge_types=2)
    np.testing.assert_allclose(out, [[2.0, 0.5, 12.0, 1.0],   # type 0: x1; type 1: x2 + x3
                                     [0.0, 0.0, 1.0, -1.0],   # type 0 absent: 0 block; type 1: x0
                                     [16.0, -4.0, 0.0, 0.0],  # type 0: x3 twice (duplicate edge); type 1 absent
                                     [0.0, 0.0, 0.0, 0.0]])   # empty neighbourhood
    mean = jgo.agg_hg_basis(g, X, types, n_edge_types=2, norm_by_dst_degree=True)
    np.testing.assert_allclose(mean, [[2.0, 0.5, 6.0, 0.5],
                                      [0.0, 0.0, 1.0, -1.0],
                                      [8.0, -2.0, 0.0, 0.0],
                                      [0.0, 0.0, 0.0, 0.0]])  # no division by zero anywhere
    assert np.isfinite(np.asarray(mean)).all()


def test_literal_with_comp_and_own_by_hand():
    g, types = literal_graph()
    comp = np.array([[1.0, 0.0, 2.0], [3.0, 1.0, -1.0]])  # R = 2, B = 3
    out = jgo.agg_hg_basis(g, X, types, comp, n_edge_types=2, concat_own=True)
    t0 = np.array([[2.0, 0.5], [0.0, 0.0], [16.0, -4.0], [0.0, 0.0]])  # per-type sums from the table above
    t1 = np.array([[12.0, 1.0], [1.0, -1.0], [0.0, 0.0], [0.0, 0.0]])
    want = np.concatenate([t0 + 3 * t1, t1, 2 * t0 - t1, X], axis=1)
    np.testing.assert_allclose(out, want)
    np.testing.assert_allclose(out[1], [3.0, -3.0, 1.0, -1.0, -1.0, 1.0, 2.0, 0.5])  # written out for node 1
    x_dst = -X[::-1]
    mean = jgo.agg_hg_basis(g, X, types, comp, n_edge_types=2, concat_own=True, x_dst=x_dst, norm_by_dst_degree=True)
    t0m, t1m = t0 / [[1], [1], [2], [1]], t1 / [[2], [1], [1], [1]]
    np.testing.assert_allclose(mean, np.concatenate([t0m + 3 * t1m, t1m, 2 * t0m - t1m, x_dst], axis=1))


def test_matches_numpy_loop(x64, rng):
    g = random_graph(rng, 11, 9, 70)
    x, types, comp, x_dst = problem(rng, g, R=4, B=3, D=5)
    for c, norm in itertools.product([None, comp], [False, True]):
        got = jgo.agg_hg_basis(g, x, types, c, n_edge_types=4, concat_own=True, x_dst=x_dst, norm_by_dst_degree=norm)
        want = numpy_loop(np.asarray(g.src), np.asarray(g.dst), g.n_dst, x, types, c, 4, norm, x_dst)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("comp_on", [False, True])
@pytest.mark.parametrize("norm", [False, True])
def test_graph_without_edges(comp_on, norm):
    g = jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 3, 2)
    x, comp = jnp.ones((3, 2)), jnp.ones((4, 3))
    f = lambda x, comp, impl=None: jgo.agg_hg_basis(g, x, np.zeros(0, np.int32), comp if comp_on else None,  # noqa
                                                    n_edge_types=4, concat_own=True, norm_by_dst_degree=norm,
                                                    impl=impl)
    out = f(x, comp)
    width = (3 if comp_on else 4) * 2
    np.testing.assert_array_equal(out, np.concatenate([np.zeros((2, width)), np.ones((2, 2))], axis=1))
    np.testing.assert_array_equal(f(x, comp, "xla"), out)
    gx, gc = jax.grad(lambda x, c: jnp.sum(f(x, c)[:, :width] ** 2), (0, 1))(x, comp)
    np.testing.assert_array_equal(gx, 0)
    np.testing.assert_array_equal(gc, 0)


def test_one_type_and_one_basis(x64, rng):
    g = random_graph(rng)
    x = rng.normal(size=(g.n_src, 3))
    types = np.zeros(g.n_edges, np.int64)
    plain = jgo.gspmm(g, x, op="copy_u", reduce="sum")
    np.testing.assert_allclose(jgo.agg_hg_basis(g, x, types, n_edge_types=1), plain, rtol=1e-12)
    np.testing.assert_allclose(jgo.agg_hg_basis(g, x, types, n_edge_types=1, norm_by_dst_degree=True),
                               jgo.gspmm(g, x, op="copy_u", reduce="mean"), rtol=1e-12)
    np.testing.assert_allclose(jgo.agg_hg_basis(g, x, types, np.array([[2.5]]), n_edge_types=1), 2.5 * plain,
                               rtol=1e-12)
    # B = 1 with several types: one block, each edge weighted by its type's coefficient
    types3 = rng.integers(0, 3, g.n_edges)
    comp = np.array([[1.0], [-2.0], [0.5]])
    want = jgo.gspmm(g, x, comp[types3, 0], op="u_mul_e", reduce="sum")
    np.testing.assert_allclose(jgo.agg_hg_basis(g, x, types3, comp, n_edge_types=3), want, rtol=1e-12)


def test_bipartite(x64, rng):
    g = random_graph(rng, 9, 4, 30)  # more sources than destinations
    x, types, comp, x_dst = problem(rng, g, R=3, B=2, D=3)
    for c, own in itertools.product([None, comp], [None, "x", "x_dst"]):
        f = agg(g, 3, c is not None, own, norm=True)(types)
        r = agg(g, 3, c is not None, own, norm=True, impl="xla")(types)
        close(np.float64)(f(x, c, x_dst), r(x, c, x_dst))
    np.testing.assert_allclose(jgo.agg_hg_basis(g, x, types, n_edge_types=3, concat_own=True)[:, -3:], x[:4])
    gt = random_graph(rng, 3, 5, 12)  # fewer sources than destinations: x[:n_dst] does not exist
    with pytest.raises(ValueError, match="agg_hg_basis: concat_own without x_dst takes x\\[:n_dst\\].*pass x_dst"):
        jgo.agg_hg_basis(gt, np.ones((3, 2)), np.zeros(12, np.int32), n_edge_types=1, concat_own=True)
    out = jgo.agg_hg_basis(gt, np.ones((3, 2)), np.zeros(12, np.int32), n_edge_types=1, concat_own=True,
                           x_dst=np.full((5, 2), 7.0))
    np.testing.assert_array_equal(out[:, 2:], 7.0)


# ---------------------------------------------------------------------------------------
# reference parity: every option combination x int32/int64 x float32/float64


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("comp_on", [False, True])
@pytest.mark.parametrize("norm", [False, True])
@pytest.mark.parametrize("own", [None, "x", "x_dst"])
def test_matches_reference(x64, rng, index_dtype, dtype, comp_on, norm, own):
    g = random_graph(rng, 9, 8, 60, index_dtype=index_dtype)
    x, types, comp, x_dst = problem(rng, g, R=4, B=3, D=5, dtype=dtype)
    types = types.astype(index_dtype)
    f, r = agg(g, 4, comp_on, own, norm)(types), agg(g, 4, comp_on, own, norm, "xla")(types)
    out = f(x, comp, x_dst)
    K = 3 if comp_on else 4
    assert out.dtype == dtype and out.shape == (8, (K + (own is not None)) * 5)
    close(dtype)(out, r(x, comp, x_dst))
    # first-order gradients of every input run the fused backward kernel
    loss = lambda fn: lambda *a: jnp.sum(jnp.sin(fn(*a)))  # noqa: E731
    grads = jax.grad(loss(f), (0, 1, 2))(x, comp, x_dst)
    grads_ref = jax.grad(loss(r), (0, 1, 2))(x, comp, x_dst)
    jax.tree_util.tree_map(close(dtype), grads, grads_ref)


def test_larger_sizes_match_reference(rng):
    # several tasks and reduction chunks, many types, features not a multiple of the vector width
    g = random_graph(rng, 3000, 2500, 40000)
    x, types, comp, _ = problem(rng, g, R=13, B=5, D=37, dtype=np.float32)
    for c in (None, comp):
        f, r = agg(g, 13, c is not None, norm=True)(types), agg(g, 13, c is not None, norm=True, impl="xla")(types)
        np.testing.assert_allclose(f(x, c), r(x, c), rtol=1e-4, atol=1e-4)
        loss = lambda fn: lambda *a: jnp.sum(fn(*a) ** 2)  # noqa: E731
        got, want = jax.grad(loss(f), (0, 1))(x, c), jax.grad(loss(r), (0, 1))(x, c)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-3)
        if c is not None:
            np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("comp_on", [False, True])
def test_nan_and_inf_propagate_like_the_reference(x64, rng, comp_on):
    g = random_graph(rng, 7, 6, 24)
    x, types, comp, _ = problem(rng, g, R=3, B=2, D=3)
    x[int(g.src[4])] = [np.nan, np.inf, 1.0]
    comp[int(types[7])] = [np.inf, 0.0]
    f, r = agg(g, 3, comp_on, norm=True)(types), agg(g, 3, comp_on, norm=True, impl="xla")(types)
    out, ref = np.asarray(f(x, comp)), np.asarray(r(x, comp))
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(out), np.isinf(ref))
    finite = np.isfinite(ref)
    np.testing.assert_allclose(out[finite], ref[finite], rtol=1e-12)
    assert np.isnan(out).any() and finite.any()


def test_half_precision_computes_in_float32(rng):
    g = random_graph(rng)
    x, types, comp, _ = problem(rng, g, dtype=np.float32)
    out = jgo.agg_hg_basis(g, x.astype(np.float16), types, comp.astype(np.float16), n_edge_types=3)
    assert out.dtype == np.float16
    ref = jgo.agg_hg_basis(g, x.astype(np.float16).astype(np.float32), types,
                           comp.astype(np.float16).astype(np.float32), n_edge_types=3, impl="xla")
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=1e-2, atol=1e-2)


# ---------------------------------------------------------------------------------------
# derivatives


@pytest.mark.parametrize("comp_on", [False, True])
@pytest.mark.parametrize("norm", [False, True])
@pytest.mark.parametrize("own", [None, "x", "x_dst"])
def test_check_grads_order2(x64, rng, comp_on, norm, own):
    g = random_graph(rng, 6, 5, 16)
    x, types, comp, x_dst = problem(rng, g, R=3, B=2, D=2)
    f = agg(g, 3, comp_on, own, norm)(types)
    if comp_on and own == "x_dst":
        args, fn = (x, comp, x_dst), f
    elif comp_on:
        args, fn = (x, comp), f
    elif own == "x_dst":
        args, fn = (x, x_dst), lambda x, x_dst: f(x, None, x_dst)
    else:
        args, fn = (x,), f
    check_grads(fn, args, order=2, modes=("fwd", "rev"), eps=1e-5)


def test_hessian_matches_reference(x64, rng):
    g = random_graph(rng, 6, 5, 16)
    x, types, comp, x_dst = problem(rng, g, R=3, B=2, D=2)

    def loss(impl):
        f = agg(g, 3, True, "x_dst", True, impl)(types)
        return lambda *a: jnp.sum(jnp.tanh(f(*a)) ** 2)

    h = jax.jit(jax.hessian(loss(None), (0, 1, 2)))(x, comp, x_dst)
    h_ref = jax.jit(jax.hessian(loss("xla"), (0, 1, 2)))(x, comp, x_dst)
    jax.tree_util.tree_map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-9, atol=1e-10), h, h_ref)


@pytest.mark.parametrize("comp_on", [False, True])
def test_reverse_mode_runs_the_fused_backward_kernel(rng, comp_on):
    g = random_graph(rng)
    x, types, comp, x_dst = problem(rng, g, R=3, B=2, D=4, dtype=np.float32)
    f = agg(g, 3, comp_on, "x_dst", True)(types)
    loss = lambda *a: jnp.sum(f(*a) ** 2)  # noqa: E731
    hlo = jax.jit(jax.grad(loss, (0, 1, 2))).lower(x, comp, x_dst).as_text()
    for target in ("jgo_hg_basis_norm", "jgo_hg_basis_fwd", "jgo_hg_basis_bwd_src"):
        assert f'custom_call_target = "{target}"' in hlo or f"@{target}" in hlo, target
    assert hlo.count("jgo_hg_basis_bwd_src") >= 1
    # neither the [E, B*D] per-edge terms nor a gather of x by edge nor a scatter is formed
    assert f"tensor<{g.n_edges}x{2 * 4}xf32>" not in hlo and f"tensor<{g.n_edges}x4xf32>" not in hlo
    assert "scatter" not in hlo
    # without norm the weights are not computed
    hlo_plain = jax.jit(jax.grad(lambda x: jnp.sum(agg(g, 3, comp_on)(types)(x, comp) ** 2))).lower(x).as_text()
    assert "jgo_hg_basis_bwd_src" in hlo_plain and "jgo_hg_basis_norm" not in hlo_plain


def test_backward_is_deterministic(rng):
    g = random_graph(rng, 2000, 2000, 30000)
    x, types, comp, _ = problem(rng, g, R=6, B=3, D=16, dtype=np.float32)
    grad = jax.jit(jax.grad(lambda x, c: jnp.sum(agg(g, 6, True, norm=True)(types)(x, c) ** 3), (0, 1)))
    first = grad(x, comp)
    for _ in range(3):
        jax.tree_util.tree_map(np.testing.assert_array_equal, grad(x, comp), first)


# ---------------------------------------------------------------------------------------
# transforms


def test_jit_jvp_and_jacobians(rng):
    g = random_graph(rng)
    x, types, comp, x_dst = problem(rng, g, dtype=np.float32)
    f, r = agg(g, 3, True, "x_dst", True)(types), agg(g, 3, True, "x_dst", True, "xla")(types)
    c = lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-5)  # noqa: E731
    c(jax.jit(f)(x, comp, x_dst), r(x, comp, x_dst))
    # the graph and the edge types traced too
    jitted = jax.jit(lambda g, t, x: jgo.agg_hg_basis(g, x, t, comp, n_edge_types=3, norm_by_dst_degree=True))
    c(jitted(g, types, x), agg(g, 3, True, norm=True, impl="xla")(types)(x, comp))
    tangents = tuple(np.ones_like(a) for a in (x, comp, x_dst))
    c(jax.jvp(f, (x, comp, x_dst), tangents)[1], jax.jvp(r, (x, comp, x_dst), tangents)[1])
    for jac in (jit_jacfwd, jit_jacrev):
        jax.tree_util.tree_map(c, jac(f, (0, 1, 2))(x, comp, x_dst), jac(r, (0, 1, 2))(x, comp, x_dst))


@pytest.mark.parametrize("comp_on", [False, True])
def test_vmap(rng, comp_on):
    g = random_graph(rng)
    x, types, comp, x_dst = problem(rng, g, dtype=np.float32)
    f, r = agg(g, 3, comp_on, "x_dst", True)(types), agg(g, 3, comp_on, "x_dst", True, "xla")(types)
    args = (x, comp if comp_on else np.zeros((3, 2), np.float32), x_dst)
    c = lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-5)  # noqa: E731
    check_vmap(f, r, args, c, lambda fn: lambda *a: jnp.sum(fn(*a) ** 2))
    # a batch of edge typings over one graph
    tb = np.stack([types, (types + 1) % 3])
    got = jax.vmap(lambda t: jgo.agg_hg_basis(g, x, t, comp if comp_on else None, n_edge_types=3,
                                              norm_by_dst_degree=True))(tb)
    for i in range(2):
        c(got[i], agg(g, 3, comp_on, norm=True, impl="xla")(tb[i])(x, comp))


def test_vmap_over_graphs(rng):
    graphs = [random_graph(np.random.default_rng(s)) for s in range(3)]
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *graphs)
    x, types, comp, _ = problem(rng, graphs[0], dtype=np.float32)
    out = jax.vmap(lambda g: jgo.agg_hg_basis(g, x, types, comp, n_edge_types=3, norm_by_dst_degree=True))(stacked)
    for i, g in enumerate(graphs):
        np.testing.assert_allclose(out[i], agg(g, 3, True, norm=True, impl="xla")(types)(x, comp), rtol=1e-5,
                                   atol=1e-5)


# ---------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("impl", [None, "xla"])
def test_bad_edge_types_are_errors_where_concrete(rng, impl):
    g = random_graph(rng)
    x, types, comp, _ = problem(rng, g, dtype=np.float32)
    for bad in (-1, 3):
        t = types.copy()
        t[5] = bad
        with pytest.raises(ValueError, match=f"agg_hg_basis: edge_types\\[5\\] = {bad} is out of range "
                                             "\\[0, n_edge_types=3\\)"):
            jgo.agg_hg_basis(g, x, t, comp, n_edge_types=3, impl=impl)


@pytest.mark.parametrize("norm", [False, True])
@pytest.mark.parametrize("comp_on", [False, True])
def test_bad_edge_types_under_jit(rng, norm, comp_on):
    """Traced types reach the kernels: the CPU kernels fail with an error naming edge_types; the CUDA
    kernels (real or emulated) and the pure-JAX fallback give the edge no contribution."""
    g = random_graph(rng)
    x, types, comp, _ = problem(rng, g, dtype=np.float32)
    c = comp if comp_on else None
    f = jax.jit(lambda t, x, c: jgo.agg_hg_basis(g, x, t, c, n_edge_types=3, norm_by_dst_degree=norm))
    bad = types.copy()
    bad[5] = 7
    if jgo.kernel_platform() == "cpu":
        which = "hg_basis_norm" if norm else "hg_basis_fwd"
        with pytest.raises(jax.errors.JaxRuntimeError,
                           match=f"INVALID_ARGUMENT: .*{which}: edge_types\\[5\\] = 7 is out of range \\[0, 3\\)"):
            f(bad, x, c).block_until_ready()
        with pytest.raises(jax.errors.JaxRuntimeError, match="INVALID_ARGUMENT: .*edge_types\\[5\\] = 7"):
            jax.grad(lambda x: jnp.sum(f(bad, x, c)))(x).block_until_ready()
        return
    # without edge 5
    keep = np.arange(g.n_edges) != 5
    g5 = jgo.Graph.from_edges(np.asarray(g.src)[keep], np.asarray(g.dst)[keep], g.n_src, g.n_dst)
    want = jgo.agg_hg_basis(g5, x, types[keep], c, n_edge_types=3, norm_by_dst_degree=norm, impl="xla")
    np.testing.assert_allclose(f(bad, x, c), want, rtol=1e-5, atol=1e-5)
    gx = jax.grad(lambda x: jnp.sum(f(bad, x, c) ** 2))(x)
    want_gx = jax.grad(lambda x: jnp.sum(jgo.agg_hg_basis(g5, x, types[keep], c, n_edge_types=3,
                                                          norm_by_dst_degree=norm, impl="xla") ** 2))(x)
    np.testing.assert_allclose(gx, want_gx, rtol=1e-5, atol=1e-5)


def test_int64_types_on_an_int32_graph_stay_out_of_range(x64, rng):
    g = random_graph(rng, index_dtype=np.int32)
    x, types, comp, _ = problem(rng, g, dtype=np.float32)
    bad = types.astype(np.int64)
    bad[3] = 2 ** 32 + 1  # would wrap to 1 in int32
    f = jax.jit(lambda t: jgo.agg_hg_basis(g, x, t, comp, n_edge_types=3))
    if jgo.kernel_platform() == "cpu":
        with pytest.raises(jax.errors.JaxRuntimeError, match="edge_types\\[3\\] = -1 is out of range"):
            f(bad).block_until_ready()
    else:
        keep = np.arange(g.n_edges) != 3
        g3 = jgo.Graph.from_edges(np.asarray(g.src)[keep], np.asarray(g.dst)[keep], g.n_src, g.n_dst)
        np.testing.assert_allclose(f(bad), jgo.agg_hg_basis(g3, x, types[keep], comp, n_edge_types=3), rtol=1e-5)


def test_out_of_range_node_reaching_the_kernel_is_an_error(rng):
    from conftest import kernel_index_error
    g = random_graph(rng, 7, 7, 24)
    x, types, comp, _ = problem(rng, g, dtype=np.float32)
    bad = jgo.Graph(*(jnp.asarray(v) for v in (g.src, g.dst, g.csc_offsets, g.csc_src.at[3].set(99), g.csc_eid,
                                               g.csr_offsets, g.csr_dst, g.csr_eid)), g.n_src, g.n_dst, validate=False)
    with kernel_index_error(".*hg_basis_fwd.*node index 99"):
        jgo.agg_hg_basis(kernel_only(bad), x, types, comp, n_edge_types=3).block_until_ready()


def test_trace_time_errors(rng):
    g = random_graph(rng)  # 7 sources, 6 destinations, 24 edges
    x, types, comp, x_dst = problem(rng, g, dtype=np.float32)
    call = lambda **kw: jgo.agg_hg_basis(**{**dict(g=g, x=x, edge_types=types, comp=comp, n_edge_types=3), **kw})  # noqa
    with pytest.raises(ValueError, match="agg_hg_basis: n_edge_types must be a static int >= 1; got 0"):
        call(n_edge_types=0)
    with pytest.raises(ValueError, match="n_edge_types must be a static int"):
        call(n_edge_types=3.0)
    with pytest.raises(ValueError, match="agg_hg_basis: x must have 7 rows"):
        call(x=x[:3])
    with pytest.raises(TypeError, match="agg_hg_basis: x must be a floating-point array"):
        call(x=x.astype(np.int32))
    with pytest.raises(TypeError, match="agg_hg_basis: edge_types must be an integer array"):
        call(edge_types=types.astype(np.float32))
    with pytest.raises(ValueError, match="agg_hg_basis: edge_types must be \\[n_edges\\] = \\(24,\\)"):
        call(edge_types=types[:5])
    with pytest.raises(ValueError, match="agg_hg_basis: comp must be \\[n_edge_types, n_bases\\] = \\[3, B >= 1\\]"):
        call(comp=comp[:2])
    with pytest.raises(ValueError, match="comp must be"):
        call(comp=np.zeros((3, 0), np.float32))
    with pytest.raises(ValueError, match="agg_hg_basis: x_dst is only used with concat_own=True"):
        call(x_dst=x_dst)
    with pytest.raises(ValueError, match="agg_hg_basis: x_dst must have 6 rows"):
        call(x_dst=x_dst[:2], concat_own=True)
    with pytest.raises(ValueError, match="agg_hg_basis: x_dst must be \\[n_dst, D\\]"):
        call(x_dst=x_dst[:, :2], concat_own=True)
    with pytest.raises(TypeError, match="agg_hg_basis: concat_own must be a bool"):
        call(concat_own="yes")
    with pytest.raises(TypeError, match="agg_hg_basis: norm_by_dst_degree must be a bool"):
        call(norm_by_dst_degree=1)
    with pytest.raises(ValueError, match="agg_hg_basis: impl must be one of"):
        call(impl="cuda")
    with pytest.raises(TypeError, match="agg_hg_basis: g must be a jaxgraphops.Graph"):
        call(g=None)
