"""update_efeat (the MeshGraphNet / GraphCast edge-update input) against hand-computed tables and the
reference; derivatives of every order; the fused backward kernels on the HLO; transforms; NaN/Inf;
errors."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import check_grads, check_vmap, jit_jacfwd, jit_jacrev, kernel_index_error, kernel_only, random_graph

import jaxgraphops as jgo

# every combination of present parts: (edge_feat, x_src, x_dst)
COMBOS = [c for c in itertools.product([False, True], repeat=3) if any(c)]


def close(dtype):
    tol = 1e-6 if dtype == np.float32 else 1e-13
    return lambda a, b: np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def operands(rng, g, combo, widths=(3, 4, 2), dtype=np.float64):
    """(edge_feat, x_src, x_dst), None where ``combo`` says absent."""
    shapes = ((g.n_edges, widths[0]), (g.n_src, widths[1]), (g.n_dst, widths[2]))
    return tuple(np.asarray(rng.normal(size=s), dtype) if has else None for s, has in zip(shapes, combo))


def by_definition(g, edge_feat, x_src, x_dst, mode):
    """NumPy, edge by edge, from the definition."""
    src, dst = np.asarray(g.src), np.asarray(g.dst)
    rows = []
    for e in range(g.n_edges):
        parts = [p for p in (None if edge_feat is None else edge_feat[e], None if x_src is None else x_src[src[e]],
                             None if x_dst is None else x_dst[dst[e]]) if p is not None]
        rows.append(np.concatenate(parts) if mode == "concat" else sum(parts[1:], parts[0]))
    return np.stack(rows)


# ---------------------------------------------------------------------------------------
# literal cases


def literal_graph(index_dtype=np.int32):
    # 0 -> 1, 2 -> 1 twice (duplicate), 1 -> 1 (self loop); nodes 0 and 2 receive nothing, node 3 has no edge
    return jgo.Graph.from_edges(np.array([0, 2, 2, 1]), np.array([1, 1, 1, 1]), 4, 4, index_dtype=index_dtype)


X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
EF = np.array([[10.0], [20.0], [30.0], [40.0]])


@pytest.mark.parametrize("impl", [None, "xla"])
def test_literal_concat_by_hand(impl):
    g = literal_graph()
    out = jgo.update_efeat(g, EF, X, X, impl=impl)
    np.testing.assert_array_equal(out, [[10, 1, 2, 3, 4], [20, 5, 6, 3, 4], [30, 5, 6, 3, 4], [40, 3, 4, 3, 4]])
    # cotangent C[e] = (e + 1) * [1, 10, 100, 1000, 10000]
    C = np.arange(1.0, 5.0)[:, None] * np.array([1.0, 10.0, 100.0, 1000.0, 10000.0])
    g_ef, g_xs, g_xd = jax.grad(lambda *a: jnp.sum(jgo.update_efeat(g, *a, impl=impl) * C), (0, 1, 2))(EF, X, X)
    np.testing.assert_array_equal(g_ef, [[1.0], [2.0], [3.0], [4.0]])
    # sources: node 0 edge 0, node 1 edge 3, node 2 edges 1 and 2, node 3 none
    np.testing.assert_array_equal(g_xs, [[10, 100], [40, 400], [50, 500], [0, 0]])
    # destinations: node 1 all four edges, the others none
    np.testing.assert_array_equal(g_xd, [[0, 0], [10000, 100000], [0, 0], [0, 0]])


@pytest.mark.parametrize("impl", [None, "xla"])
def test_literal_sum_by_hand(impl):
    g = literal_graph()
    ef = np.array([[0.5, 0.25], [1.0, 1.0], [2.0, 2.0], [0.0, -1.0]])
    out = jgo.update_efeat(g, ef, X, 10 * X, mode="sum", impl=impl)
    np.testing.assert_array_equal(out, [[31.5, 42.25], [36, 47], [37, 48], [33, 43]])
    C = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    g_ef, g_xs, g_xd = jax.grad(lambda *a: jnp.sum(jgo.update_efeat(g, *a, mode="sum", impl=impl) * C),
                                (0, 1, 2))(ef, X, 10 * X)
    np.testing.assert_array_equal(g_ef, C)
    np.testing.assert_array_equal(g_xs, [[1, 2], [7, 8], [8, 10], [0, 0]])
    np.testing.assert_array_equal(g_xd, [[0, 0], [16, 20], [0, 0], [0, 0]])


@pytest.mark.parametrize("impl", [None, "xla"])
def test_literal_bipartite(impl):
    # 3 sources, 2 destinations: 0 -> 1, 2 -> 0, 2 -> 1; source 1 sends nothing
    g = jgo.Graph.from_edges(np.array([0, 2, 2]), np.array([1, 0, 1]), 3, 2)
    xs = np.array([[1.0], [2.0], [3.0]])
    xd = np.array([[-1.0, -2.0], [-3.0, -4.0]])
    np.testing.assert_array_equal(jgo.update_efeat(g, x_src=xs, x_dst=xd, impl=impl),
                                  [[1, -3, -4], [3, -1, -2], [3, -3, -4]])
    np.testing.assert_array_equal(jgo.update_efeat(g, x_dst=xd, impl=impl), [[-3, -4], [-1, -2], [-3, -4]])
    C = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    g_xs, g_xd = jax.grad(lambda a, b: jnp.sum(jgo.update_efeat(g, x_src=a, x_dst=b, impl=impl) * C), (0, 1))(xs, xd)
    np.testing.assert_array_equal(g_xs, [[1], [0], [11]])
    np.testing.assert_array_equal(g_xd, [[5, 6], [10, 12]])


@pytest.mark.parametrize("mode", ["concat", "sum"])
@pytest.mark.parametrize("combo", COMBOS)
def test_every_absent_part_combination(x64, rng, combo, mode):
    g = random_graph(rng, 7, 6, 24)
    args = operands(rng, g, combo, widths=(3, 3, 3) if mode == "sum" else (3, 4, 2))
    want = by_definition(g, *args, mode)
    width = sum(a.shape[1] for a in args if a is not None) if mode == "concat" else 3
    for impl in (None, "xla"):
        out = jgo.update_efeat(g, *args, mode=mode, impl=impl)
        assert out.shape == (24, width)
        np.testing.assert_array_equal(out, want)
    # gradients of the present parts agree with the reference's
    present = tuple(k for k in range(3) if combo[k])
    coef = rng.normal(size=want.shape)

    def loss(impl):
        def f(*xs):
            full = list(args)
            for k, x in zip(present, xs):
                full[k] = x
            return jnp.sum(jgo.update_efeat(g, *full, mode=mode, impl=impl) * coef)
        return f

    xs = tuple(args[k] for k in present)
    got = jax.grad(loss(None), tuple(range(len(xs))))(*xs)
    want_grads = jax.grad(loss("xla"), tuple(range(len(xs))))(*xs)
    jax.tree_util.tree_map(close(np.float64), got, want_grads)


@pytest.mark.parametrize("mode", ["concat", "sum"])
@pytest.mark.parametrize("impl", [None, "xla"])
def test_graph_without_edges(mode, impl):
    g = jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 3, 2)
    ef, xs, xd = jnp.zeros((0, 2)), jnp.ones((3, 2)), jnp.ones((2, 2))
    out = jgo.update_efeat(g, ef, xs, xd, mode=mode, impl=impl)
    assert out.shape == (0, 6 if mode == "concat" else 2)
    grads = jax.grad(lambda *a: jnp.sum(jgo.update_efeat(g, *a, mode=mode, impl=impl) ** 2), (0, 1, 2))(ef, xs, xd)
    assert [x.shape for x in grads] == [(0, 2), (3, 2), (2, 2)]
    for x in grads:
        np.testing.assert_array_equal(x, 0)


def test_nodes_without_edges_get_zero_gradients(rng):
    g = random_graph(rng, 7, 6, 24)  # destination 5 never receives an edge
    senders = set(np.asarray(g.src).tolist())
    ef, xs, xd = operands(rng, g, (True, True, True))
    grads = jax.grad(lambda *a: jnp.sum(jnp.sin(jgo.update_efeat(g, *a))), (1, 2))(ef, xs, xd)
    np.testing.assert_array_equal(grads[1][5], 0)
    for u in set(range(7)) - senders:
        np.testing.assert_array_equal(grads[0][u], 0)
    assert np.all(np.asarray(grads[1][:5]) != 0)


# ---------------------------------------------------------------------------------------
# reference parity


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["concat", "sum"])
def test_matches_reference(x64, rng, index_dtype, dtype, mode):
    g = random_graph(rng, 9, 8, 60, index_dtype=index_dtype)
    args = operands(rng, g, (True, True, True), widths=(5, 5, 5) if mode == "sum" else (3, 5, 4), dtype=dtype)
    out = jgo.update_efeat(g, *args, mode=mode)
    ref = jgo.update_efeat(g, *args, mode=mode, impl="xla")
    assert out.dtype == dtype and out.shape == ref.shape
    np.testing.assert_array_equal(out, ref)  # copies and the same additions in the same order: bit for bit
    loss = lambda impl: lambda *a: jnp.sum(jnp.sin(jgo.update_efeat(g, *a, mode=mode, impl=impl)))  # noqa: E731
    grads = jax.grad(loss(None), (0, 1, 2))(*args)
    grads_ref = jax.grad(loss("xla"), (0, 1, 2))(*args)
    jax.tree_util.tree_map(close(dtype), grads, grads_ref)


@pytest.mark.parametrize("mode", ["concat", "sum"])
def test_larger_sizes_match_reference(rng, mode):
    # several forward ranges and backward row chunks
    g = random_graph(rng, 3000, 2000, 40000)
    args = operands(rng, g, (True, True, True), widths=(8, 8, 8) if mode == "sum" else (4, 8, 6), dtype=np.float32)
    np.testing.assert_array_equal(jgo.update_efeat(g, *args, mode=mode),
                                  jgo.update_efeat(g, *args, mode=mode, impl="xla"))
    coef = rng.normal(size=(g.n_edges, 8 if mode == "sum" else 18)).astype(np.float32)
    loss = lambda impl: lambda *a: jnp.sum(jgo.update_efeat(g, *a, mode=mode, impl=impl) * coef)  # noqa: E731
    grads = jax.jit(jax.grad(loss(None), (0, 1, 2)))(*args)
    grads_ref = jax.jit(jax.grad(loss("xla"), (0, 1, 2)))(*args)
    jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5), grads, grads_ref)


def test_same_node_array_for_both_ends(x64, rng):
    g = random_graph(rng, 6, 6, 20)
    x = rng.normal(size=(6, 3))
    f = lambda impl: lambda x: jnp.sum(jgo.update_efeat(g, x_src=x, x_dst=x, impl=impl) ** 2)  # noqa: E731
    close(np.float64)(jax.grad(f(None))(x), jax.grad(f("xla"))(x))
    check_grads(f(None), (x,), order=2, modes=("fwd", "rev"))


def test_half_precision_computes_in_float32(rng):
    g = random_graph(rng)
    args = [x.astype(np.float16) for x in operands(rng, g, (True, True, True), widths=(3, 3, 3), dtype=np.float32)]
    for mode in ("concat", "sum"):
        out = jgo.update_efeat(g, *args, mode=mode)
        assert out.dtype == np.float16
        np.testing.assert_array_equal(out, jgo.update_efeat(g, *args, mode=mode, impl="xla"))


# ---------------------------------------------------------------------------------------
# NaN and Inf


@pytest.mark.parametrize("mode", ["concat", "sum"])
def test_nan_and_inf_propagate_like_the_reference(x64, rng, mode):
    g = random_graph(rng, 7, 6, 24)
    ef, xs, xd = operands(rng, g, (True, True, True), widths=(2, 2, 2))
    e = 4
    u, v = int(g.src[e]), int(g.dst[e])
    ef[e, 0] = np.nan
    xs[u, 0] = np.inf
    xd[v, 0] = -np.inf  # the sum of edges from u into v: inf + -inf = NaN
    xs[u, 1] = -np.inf
    out = jgo.update_efeat(g, ef, xs, xd, mode=mode)
    ref = jgo.update_efeat(g, ef, xs, xd, mode=mode, impl="xla")
    np.testing.assert_array_equal(out, ref)  # NaN where the reference has NaN, the same infinities
    out = np.asarray(out)
    if mode == "sum":
        assert np.isnan(out[e, 0]) and out[e, 1] == -np.inf
    else:
        assert np.isnan(out[e, 0]) and out[e, 2] == np.inf and out[e, 3] == -np.inf and out[e, 4] == -np.inf
    # the rows of edges that read none of them are finite
    touched = (np.arange(24) == e) | (np.asarray(g.src) == u) | (np.asarray(g.dst) == v)
    assert np.isfinite(out[~touched]).all()
    # a NaN cotangent on one edge reaches its source's and destination's gradients only
    ct = np.ones_like(out)
    ct[e] = np.nan
    got = jax.vjp(lambda *a: jgo.update_efeat(g, *a, mode=mode), ef, xs, xd)[1](ct)
    want = jax.vjp(lambda *a: jgo.update_efeat(g, *a, mode=mode, impl="xla"), ef, xs, xd)[1](ct)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert np.isnan(got[1][u]).all() and np.isfinite(np.delete(np.asarray(got[1]), u, axis=0)).all()
    assert np.isnan(got[2][v]).all() and np.isfinite(np.delete(np.asarray(got[2]), v, axis=0)).all()


def test_sum_keeps_negative_zero(rng):
    # -0 + -0 = -0: the kernel adds the present parts, not 0 + the parts
    g = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 0]))
    x = -np.zeros((2, 3))
    for impl in (None, "xla"):
        out = np.asarray(jgo.update_efeat(g, x_src=x, x_dst=x, mode="sum", impl=impl))
        assert np.signbit(out).all(), impl
        assert np.signbit(np.asarray(jgo.update_efeat(g, x_src=x, mode="sum", impl=impl))).all()


# ---------------------------------------------------------------------------------------
# derivatives


@pytest.mark.parametrize("mode", ["concat", "sum"])
@pytest.mark.parametrize("combo", [(True, True, True), (False, True, True), (True, False, True), (True, True, False)])
def test_check_grads_order2(x64, rng, mode, combo):
    g = random_graph(rng, 5, 4, 12)
    args = operands(rng, g, combo, widths=(2, 2, 2) if mode == "sum" else (2, 3, 1))
    present = [k for k in range(3) if combo[k]]

    def f(*xs):
        full = [None, None, None]
        for k, x in zip(present, xs):
            full[k] = x
        return jnp.tanh(jgo.update_efeat(g, *full, mode=mode)) ** 2  # non-linear so second order matters

    check_grads(f, tuple(args[k] for k in present), order=2, modes=("fwd", "rev"), eps=1e-5)


def test_hessian_matches_reference(x64, rng):
    g = random_graph(rng, 5, 4, 12)
    args = operands(rng, g, (True, True, True), widths=(2, 2, 2))

    def loss(impl):
        return lambda *a: jnp.sum(jnp.tanh(jgo.update_efeat(g, *a, mode="sum", impl=impl)) ** 2)

    h = jax.jit(jax.hessian(loss(None), (0, 1, 2)))(*args)
    h_ref = jax.jit(jax.hessian(loss("xla"), (0, 1, 2)))(*args)
    jax.tree_util.tree_map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-12), h, h_ref)


@pytest.mark.parametrize("mode", ["concat", "sum"])
def test_reverse_mode_runs_the_fused_backward_kernels(rng, mode):
    g = random_graph(rng)
    args = operands(rng, g, (True, True, True), widths=(3, 3, 3), dtype=np.float32)
    loss = lambda *a: jnp.sum(jgo.update_efeat(g, *a, mode=mode) ** 2)  # noqa: E731

    def targets(fn):
        hlo = jax.jit(fn).lower(*args).as_text()
        return {t for t in ("jgo_update_efeat_fwd", "jgo_update_efeat_bwd_src", "jgo_update_efeat_bwd_dst",
                            "jgo_update_efeat_bwd_edge") if f'custom_call_target = "{t}"' in hlo or f"@{t}" in hlo}

    assert targets(jax.grad(loss, (0, 1, 2))) == {"jgo_update_efeat_fwd", "jgo_update_efeat_bwd_src",
                                                   "jgo_update_efeat_bwd_dst", "jgo_update_efeat_bwd_edge"}
    # no scatter in the backward: the node gradients are the kernels' reductions
    assert "scatter" not in jax.jit(jax.grad(loss, (0, 1, 2))).lower(*args).as_text()
    # only the passes needed run
    assert targets(jax.grad(loss, 1)) == {"jgo_update_efeat_fwd", "jgo_update_efeat_bwd_src"}
    assert targets(jax.grad(loss, 2)) == {"jgo_update_efeat_fwd", "jgo_update_efeat_bwd_dst"}
    assert targets(jax.grad(loss, 0)) == {"jgo_update_efeat_fwd", "jgo_update_efeat_bwd_edge"}


# ---------------------------------------------------------------------------------------
# transforms


def test_jit_jvp_and_jacobians(rng):
    g = random_graph(rng)
    args = operands(rng, g, (True, True, True), dtype=np.float32)
    f = lambda *a: jgo.update_efeat(g, *a)  # noqa: E731
    r = lambda *a: jgo.update_efeat(g, *a, impl="xla")  # noqa: E731
    c = close(np.float32)
    c(jax.jit(f)(*args), r(*args))
    c(jax.jit(lambda g, *a: jgo.update_efeat(g, *a))(g, *args), r(*args))  # the graph traced
    tangents = tuple(np.ones_like(x) for x in args)
    c(jax.jvp(f, args, tangents)[1], jax.jvp(r, args, tangents)[1])
    for jac in (jit_jacfwd, jit_jacrev):
        jax.tree_util.tree_map(c, jac(f, (0, 1, 2))(*args), jac(r, (0, 1, 2))(*args))


@pytest.mark.parametrize("mode", ["concat", "sum"])
def test_vmap(rng, mode):
    g = random_graph(rng)
    args = operands(rng, g, (True, True, True), widths=(3, 3, 3), dtype=np.float32)
    f = lambda *a: jgo.update_efeat(g, *a, mode=mode)  # noqa: E731
    r = lambda *a: jgo.update_efeat(g, *a, mode=mode, impl="xla")  # noqa: E731
    check_vmap(f, r, args, close(np.float32), lambda fn: lambda *a: jnp.sum(jnp.sin(fn(*a))))


def test_vmap_over_graphs(rng):
    graphs = [random_graph(np.random.default_rng(s)) for s in range(3)]
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *graphs)
    args = operands(rng, graphs[0], (True, True, True), dtype=np.float32)
    out = jax.vmap(lambda g: jgo.update_efeat(g, *args))(stacked)
    grads = jax.vmap(lambda g: jax.grad(lambda xs: jnp.sum(jgo.update_efeat(g, args[0], xs, args[2]) ** 2))(args[1]))(
        stacked)
    for i, g in enumerate(graphs):
        close(np.float32)(out[i], jgo.update_efeat(g, *args, impl="xla"))
        want = jax.grad(lambda xs: jnp.sum(jgo.update_efeat(g, args[0], xs, args[2], impl="xla") ** 2))(args[1])
        close(np.float32)(grads[i], want)


# ---------------------------------------------------------------------------------------
# errors


def test_trace_time_errors(rng):
    g = random_graph(rng)  # 7 sources, 6 destinations, 24 edges
    ef, xs, xd = operands(rng, g, (True, True, True), dtype=np.float32)
    with pytest.raises(ValueError, match="update_efeat: at least one of edge_feat, x_src, x_dst must be given"):
        jgo.update_efeat(g)
    with pytest.raises(ValueError, match="update_efeat: edge_feat must have 24 rows"):
        jgo.update_efeat(g, ef[:5], xs, xd)
    with pytest.raises(ValueError, match="update_efeat: x_src must have 7 rows"):
        jgo.update_efeat(g, ef, xs[:6], xd)
    with pytest.raises(ValueError, match="update_efeat: x_dst must have 6 rows"):
        jgo.update_efeat(g, ef, xs, xs)
    with pytest.raises(ValueError, match=r"update_efeat: x_src must be 2-D \[n_src, features\]"):
        jgo.update_efeat(g, x_src=xs[:, 0])
    with pytest.raises(ValueError, match="update_efeat: mode='sum' needs the present parts to have one feature width; "
                                         "edge_feat has 3, x_src has 4, x_dst has 2"):
        jgo.update_efeat(g, ef, xs, xd, mode="sum")
    with pytest.raises(ValueError, match=r"update_efeat: mode must be one of 'concat', 'sum'; got 'cat' "
                                         r"\(did you mean 'concat'\?\)"):
        jgo.update_efeat(g, ef, mode="cat")
    with pytest.raises(ValueError, match="update_efeat: impl must be one of"):
        jgo.update_efeat(g, ef, impl="cuda")
    with pytest.raises(TypeError, match="update_efeat: x_dst must be a floating-point array"):
        jgo.update_efeat(g, x_dst=xd.astype(np.int32))
    with pytest.raises(TypeError, match="update_efeat: g must be a jaxgraphops.Graph"):
        jgo.update_efeat(None, ef)


def test_out_of_range_index_reaching_the_kernel_is_an_error(rng):
    # sizes no other test uses: a primitive already compiled for these shapes would run on JAX's C++ fast path,
    # which raises the kernel's INVALID_ARGUMENT as a ValueError instead of the JaxRuntimeError expected here
    g = random_graph(rng, 7, 6, 29)
    ef, xs, xd = operands(rng, g, (True, True, True), dtype=np.float32)
    arrays = {n: jnp.asarray(getattr(g, n)) for n in ("src", "dst", "csc_offsets", "csc_src", "csc_eid", "csr_offsets",
                                                      "csr_dst", "csr_eid")}

    def graph(**bad):
        return kernel_only(jgo.Graph(**{**arrays, **bad}, n_src=g.n_src, n_dst=g.n_dst, validate=False))

    bad_src = graph(src=arrays["src"].at[3].set(99))
    with kernel_index_error(".*update_efeat_fwd: edge 3 has src node index 99, out of range \\[0, 7\\)"):
        jgo.update_efeat(bad_src, ef, xs, xd).block_until_ready()
    jgo.update_efeat(bad_src, ef, None, xd).block_until_ready()  # src is not read without x_src
    bad_dst = graph(dst=arrays["dst"].at[0].set(-1))
    with kernel_index_error(".*update_efeat_fwd: edge 0 has dst node index -1"):
        jgo.update_efeat(bad_dst, x_dst=xd, mode="sum").block_until_ready()
    bad_csr = graph(csr_eid=arrays["csr_eid"].at[2].set(40))
    with kernel_index_error(".*update_efeat_bwd_src.*edge id 40"):
        jax.grad(lambda x: jnp.sum(jgo.update_efeat(bad_csr, ef, x, xd)))(xs).block_until_ready()
    bad_csc = graph(csc_offsets=arrays["csc_offsets"].at[2].set(30))
    with kernel_index_error(".*update_efeat_bwd_dst.*offsets"):
        jax.grad(lambda x: jnp.sum(jgo.update_efeat(bad_csc, ef, xs, x)))(xd).block_until_ready()


def test_edge_pass_copies_g_block_and_checks_where_the_real_edges_end(rng):
    """The edge pass (``jgo_update_efeat_bwd_edge``, grad edge_feat), called as the backward calls it: G's block
    at ``col`` for the edges before ``offsets[-1]``, 0 after; offsets ending outside ``[0, E]`` are rejected by
    the CPU kernel (the CUDA kernel clamps them to E)."""
    if jgo.kernel_platform() == "xla":
        pytest.skip("no fused kernels on this platform (JGO_KERNELS=xla)")
    G = jnp.asarray(rng.normal(size=(11, 7)).astype(np.float32))

    def edge_pass(offsets, col=2, width=3):
        call = jax.ffi.ffi_call("jgo_update_efeat_bwd_edge", jax.ShapeDtypeStruct((11, width), jnp.float32))
        return np.asarray(call(jnp.asarray(offsets, jnp.int32), G, col=np.int64(col)))

    expected = np.asarray(G)[:, 2:5].copy()
    np.testing.assert_array_equal(edge_pass([0, 4, 11]), expected)
    expected[8:] = 0  # the last three edges are padding
    np.testing.assert_array_equal(edge_pass([0, 3, 8]), expected)
    rejected = (ValueError, jax.errors.JaxRuntimeError)  # eager calls raise the former, compiled ones the latter
    if jgo.kernel_platform() == "cpu":
        with pytest.raises(rejected, match="update_efeat_bwd_edge: the offsets end at 12, out of range \\[0, 12\\)"):
            edge_pass([0, 4, 12])
    else:
        np.testing.assert_array_equal(edge_pass([0, 4, 12]), np.asarray(G)[:, 2:5])
    with pytest.raises(rejected, match="update_efeat_bwd_edge: columns \\[5, 8\\) do not fit in G's 7"):
        edge_pass([0, 4, 11], col=5)
