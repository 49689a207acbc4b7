"""gspmm against the pure-JAX reference and literal tables; derivatives of every order."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import check_grads, hub_graph, jit_jacfwd, jit_jacrev, kernel_index_error, kernel_only, random_graph

import jaxgraphops as jgo

OPS = ("copy_u", "copy_e", "u_mul_e", "u_add_e", "u_sub_e", "u_div_e")
REDUCES = ("sum", "mean", "max", "min")


def operands(rng, g, op, fu=(3,), fe=(3,), dtype=np.float32):
    u = rng.normal(size=(g.n_src,) + fu).astype(dtype) if op != "copy_e" else None
    e = rng.normal(size=(g.n_edges,) + fe).astype(dtype) if op != "copy_u" else None
    if op == "u_div_e":
        e = np.sign(e) * (1 + np.abs(e))  # keep away from 0
    return u, e


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matches_reference(x64, rng, op, reduce, index_dtype, dtype):
    for g in (random_graph(rng, index_dtype=index_dtype), random_graph(rng, 6, 6, 30, index_dtype=index_dtype)):
        u, e = operands(rng, g, op, dtype=dtype)
        out = jgo.gspmm(g, u, e, op=op, reduce=reduce)
        ref = jgo.gspmm(g, u, e, op=op, reduce=reduce, impl="xla")
        assert out.dtype == dtype and out.shape == ref.shape
        tol = 1e-6 if dtype == np.float32 else 1e-13
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
        np.testing.assert_array_equal(out[g.n_dst - 1], 0)  # isolated destination


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("reduce", REDUCES)
def test_check_grads_order2(x64, rng, op, reduce):
    g = random_graph(rng, 5, 4, 12)
    u, e = operands(rng, g, op, fu=(2,), fe=(2,), dtype=np.float64)
    args = [x for x in (u, e) if x is not None]

    def f(*xs):
        it = iter(xs)
        uu = next(it) if u is not None else None
        ee = next(it) if e is not None else None
        return jgo.gspmm(g, uu, ee, op=op, reduce=reduce)

    check_grads(f, args, order=2, modes=("fwd", "rev"), eps=1e-4)
    ref = lambda *xs: jnp.sum(f(*xs) ** 2)  # noqa: E731
    ref_xla = lambda *xs: jnp.sum(jgo.gspmm(g, *([None] if u is None else []), *xs, *([None] if e is None else []),  # noqa: E731
                                            op=op, reduce=reduce, impl="xla") ** 2)
    h = jax.jit(jax.hessian(ref, argnums=tuple(range(len(args)))))(*args)
    h_ref = jax.jit(jax.hessian(ref_xla, argnums=tuple(range(len(args)))))(*args)
    jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10), h, h_ref)


@pytest.mark.parametrize("fu,fe", [((2, 3), (2,)), ((2, 3), (2, 1)), ((1, 3), (2, 1)), ((2, 3), ()), ((3,), (2, 3)),
                                   ((2, 1, 3), (1, 4, 1))])
@pytest.mark.parametrize("reduce", ["sum", "max"])
def test_broadcasting(x64, rng, fu, fe, reduce):
    g = random_graph(rng)
    u, e = operands(rng, g, "u_mul_e", fu=fu, fe=fe, dtype=np.float64)
    out = jgo.gspmm(g, u, e, op="u_mul_e", reduce=reduce)
    ref = jgo.gspmm(g, u, e, op="u_mul_e", reduce=reduce, impl="xla")
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
    check_grads(lambda a, b: jgo.gspmm(g, a, b, op="u_mul_e", reduce=reduce), (u, e), order=2,
                              modes=("fwd", "rev"), eps=1e-4)


def test_literal_table():
    # edges (input order): 0:0->1, 1:2->1, 2:1->1 (dup), 3:1->1 (dup), 4:1->0, 5:0->0 (self loop); node 2 isolated
    g = jgo.Graph.from_edges(np.array([0, 2, 1, 1, 1, 0]), np.array([1, 1, 1, 1, 0, 0]), 3, 3)
    u = jnp.array([[1.0], [3.0], [3.0]])
    expected = {"sum": [4.0, 10.0, 0.0], "mean": [2.0, 2.5, 0.0], "max": [3.0, 3.0, 0.0], "min": [1.0, 1.0, 0.0]}
    for reduce, want in expected.items():
        np.testing.assert_array_equal(jgo.gspmm(g, u, op="copy_u", reduce=reduce)[:, 0], want)
    # ties at node 1: edges 1 (from node 2), 2 and 3 (from node 1) all carry 3; edge 1 comes first in
    # input order, so node 2 gets that gradient; node 0's maximum comes from node 1 (edge 4)
    grad = jax.grad(lambda x: jgo.gspmm(g, x, op="copy_u", reduce="max").sum())(u)
    np.testing.assert_array_equal(grad[:, 0], [0.0, 1.0, 1.0])
    e = jnp.array([5.0, 7.0, 7.0, 1.0, 2.0, 2.0])
    ge = jax.grad(lambda w: jgo.gspmm(g, e=w, op="copy_e", reduce="max").sum())(e)
    np.testing.assert_array_equal(ge, [0.0, 1.0, 0.0, 0.0, 1.0, 0.0])  # first of the tied edges only
    ge = jax.grad(lambda w: jgo.gspmm(g, e=w, op="copy_e", reduce="min").sum())(e)
    np.testing.assert_array_equal(ge, [0.0, 0.0, 0.0, 1.0, 1.0, 0.0])


# Node 0 receives edges 0-3 (two NaN messages in feature 0, one in feature 1), node 1 edges 4-5, node 2
# nothing; the orders put different NaN edges first.
NAN_EDGE_ORDERS = [[0, 1, 2, 3, 4, 5], [5, 3, 2, 1, 4, 0], [2, 4, 0, 3, 5, 1]]


@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("order", NAN_EDGE_ORDERS)
def test_max_min_propagate_nan_in_any_edge_order(reduce, order):
    nan = np.nan
    dst = np.array([0, 0, 0, 0, 1, 1])[order]
    e = np.array([[1.0, 2.0], [nan, 5.0], [7.0, nan], [nan, -1.0], [3.0, 4.0], [3.0, -4.0]], np.float32)[order]
    g = jgo.Graph.from_edges(np.arange(6), dst, 6, 3)
    reduce_np, arg_np = (np.max, np.argmax) if reduce == "max" else (np.min, np.argmin)
    want = np.zeros((3, 2), np.float32)
    r = np.arange(1.0, 7.0, dtype=np.float32).reshape(3, 2)  # tells the output elements apart in the gradient
    want_grad = np.zeros_like(e)
    for i in (0, 1):
        edges = np.flatnonzero(dst == i)
        want[i] = reduce_np(e[edges], axis=0)  # NaN if any message is NaN
        win = edges[arg_np(e[edges], axis=0)]  # the first NaN edge, else the first extreme one
        want_grad[win, [0, 1]] = r[i]
    for impl in (None, "xla"):
        spmm = lambda x: jgo.gspmm(g, e=x, op="copy_e", reduce=reduce, impl=impl)  # noqa: E731
        np.testing.assert_array_equal(spmm(e), want)
        np.testing.assert_array_equal(jax.grad(lambda x: jnp.sum(spmm(x) * r))(e), want_grad)
    # through the node operand and a binary op too (edge k comes from node k)
    u, w = e[:, :1] + 1, e[:, 1:]
    want = [reduce_np(u[dst == i] * w[dst == i], axis=0) for i in (0, 1)] + [[0.0]]
    for impl in (None, "xla"):
        np.testing.assert_array_equal(jgo.gspmm(g, u, w, op="u_mul_e", reduce=reduce, impl=impl), want)


def test_empty_neighbourhood_gradients_are_zero():
    g = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 1]), 3, 3)
    u = jnp.array([[1.0], [2.0], [5.0]])
    for reduce in REDUCES:
        out = jgo.gspmm(g, u, op="copy_u", reduce=reduce)
        assert out[0, 0] == 0 and out[2, 0] == 0
        grad = jax.grad(lambda x: jgo.gspmm(g, x, op="copy_u", reduce=reduce)[jnp.array([0, 2])].sum())(u)
        np.testing.assert_array_equal(grad, 0)


@pytest.mark.parametrize("reduce", REDUCES)
def test_zero_edge_graph(reduce):
    g = jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 3, 2)
    u = jnp.ones((3, 4))
    out = jgo.gspmm(g, u, jnp.ones((0,)), op="u_mul_e", reduce=reduce)
    np.testing.assert_array_equal(out, np.zeros((2, 4)))
    gu, ge = jax.grad(lambda a, b: jgo.gspmm(g, a, b, op="u_mul_e", reduce=reduce).sum(), (0, 1))(u, jnp.ones((0,)))
    assert gu.shape == (3, 4) and ge.shape == (0,)
    np.testing.assert_array_equal(gu, 0)


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("features", [(5,), (2, 20)])
def test_heavy_rows_match_reference(rng, reduce, features):
    g, _, _ = hub_graph(rng)
    u, e = operands(rng, g, "u_mul_e", fu=features, fe=features)
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)  # noqa: E731
    for op, args in (("copy_u", (u, None)), ("u_mul_e", (u, e))):
        f = lambda a, b: jgo.gspmm(g, a, b, op=op, reduce=reduce)  # noqa: E731
        r = lambda a, b: jgo.gspmm(g, a, b, op=op, reduce=reduce, impl="xla")  # noqa: E731
        close(f(*args), r(*args))
        # the gradient in u walks the sources' rows (node 3's 600 edges); max/min route it through masks
        ct = rng.normal(size=(g.n_dst,) + features).astype(np.float32)
        grads = lambda fn: jax.vjp(fn, *args)[1](ct)[: 1 if op == "copy_u" else 2]  # noqa: E731
        jax.tree_util.tree_map(close, grads(f), grads(r))


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_heavy_row_ties_and_nans_follow_the_input_order(rng, reduce):
    g, _, dst = hub_graph(rng)
    e = rng.integers(0, 3, (g.n_edges, 2)).astype(np.float32)  # ties everywhere
    hub = np.flatnonzero(dst == 5)
    e[hub[[500, 650]], 0] = np.nan  # the first NaN wins, from any slice of the row
    e[hub[100], 1] = np.nan
    out, vjp = jax.vjp(lambda b: jgo.gspmm(g, None, b, op="copy_e", reduce=reduce), e)
    (grad,) = vjp(jnp.ones_like(out))
    want, want_grad = np.zeros((g.n_dst, 2), np.float32), np.zeros_like(e)
    pick = np.argmax if reduce == "max" else np.argmin
    for v in range(g.n_dst):
        ids = np.flatnonzero(dst == v)  # in input order
        for f in range(2):
            if len(ids):
                vals = e[ids, f]
                w = ids[np.argmax(np.isnan(vals))] if np.isnan(vals).any() else ids[pick(vals)]
                want[v, f], want_grad[w, f] = e[w, f], 1
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(grad, want_grad)


def test_bipartite_matches_reference(rng):
    g = random_graph(rng, n_src=9, n_dst=4, n_edges=20)
    u, e = operands(rng, g, "u_mul_e")
    for reduce in REDUCES:
        np.testing.assert_allclose(jgo.gspmm(g, u, e, op="u_mul_e", reduce=reduce),
                                   jgo.gspmm(g, u, e, op="u_mul_e", reduce=reduce, impl="xla"), rtol=1e-6)
        gk = jax.grad(lambda a: jgo.gspmm(g, a, e, op="u_mul_e", reduce=reduce).sum())(u)
        gr = jax.grad(lambda a: jgo.gspmm(g, a, e, op="u_mul_e", reduce=reduce, impl="xla").sum())(u)
        np.testing.assert_allclose(gk, gr, rtol=1e-6)


@pytest.mark.parametrize("reduce", REDUCES)
def test_transforms(rng, reduce):
    g = random_graph(rng)
    u, e = operands(rng, g, "u_mul_e")
    f = lambda a, b: jgo.gspmm(g, a, b, op="u_mul_e", reduce=reduce)  # noqa: E731
    r = lambda a, b: jgo.gspmm(g, a, b, op="u_mul_e", reduce=reduce, impl="xla")  # noqa: E731
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)  # noqa: E731
    close(jax.jit(f)(u, e), r(u, e))
    for jac in (jit_jacfwd, jit_jacrev):
        jax.tree_util.tree_map(close, jac(f, (0, 1))(u, e), jac(r, (0, 1))(u, e))
    ub, eb = np.stack([u, 2 * u, -u]), np.stack([e, e * 3, e + 1])
    close(jax.vmap(f, (0, None))(ub, e), jax.vmap(r, (0, None))(ub, e))
    close(jax.vmap(f, (None, 0))(u, eb), jax.vmap(r, (None, 0))(u, eb))
    close(jax.vmap(f, (0, 0))(ub, eb), jax.vmap(r, (0, 0))(ub, eb))
    close(jax.vmap(f, (2, None), 1)(np.moveaxis(ub, 0, 2), e), jax.vmap(r, (0, None), 1)(ub, e))
    gf = jax.vmap(jax.grad(lambda a, b: (f(a, b) ** 2).sum()), (0, None))(ub, e)
    gr = jax.vmap(jax.grad(lambda a, b: (r(a, b) ** 2).sum()), (0, None))(ub, e)
    close(gf, gr)


def test_vmap_over_graphs(rng):
    graphs = [random_graph(np.random.default_rng(s)) for s in range(3)]
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *graphs)
    u, e = operands(rng, graphs[0], "u_mul_e")
    out = jax.vmap(lambda g: jgo.gspmm(g, u, e, op="u_mul_e", reduce="max"))(stacked)
    for i, g in enumerate(graphs):
        np.testing.assert_allclose(out[i], jgo.gspmm(g, u, e, op="u_mul_e", reduce="max", impl="xla"), rtol=1e-6)


def test_grad_of_grad_uses_only_library_kernels(rng):
    g = random_graph(rng)
    u, e = operands(rng, g, "u_mul_e")

    def loss(a, b):
        return jnp.sum(jnp.tanh(jgo.gspmm(g, a, b, op="u_mul_e", reduce="sum")) ** 2)

    def outer(a, b):
        ga, gb = jax.grad(loss, (0, 1))(a, b)
        return jnp.sum(ga**2) + jnp.sum(gb**2)

    hlo = jax.jit(jax.grad(outer, (0, 1))).lower(u, e).as_text()
    assert "custom_call_target = \"jgo_spmm\"" in hlo or "@jgo_spmm" in hlo
    assert "jgo_sddmm" in hlo
    assert "scatter" not in hlo and "gather" not in hlo


def test_half_precision_inputs(rng):
    g = random_graph(rng)
    u, e = operands(rng, g, "u_mul_e")
    for dt in (jnp.bfloat16, jnp.float16):
        out = jgo.gspmm(g, u.astype(dt), e.astype(dt), op="u_mul_e", reduce="sum")
        assert out.dtype == dt
        ref = jgo.gspmm(g, u.astype(dt).astype(np.float32), e.astype(dt).astype(np.float32), op="u_mul_e")
        np.testing.assert_allclose(out.astype(np.float32), ref.astype(dt).astype(np.float32), rtol=1e-2, atol=1e-2)


def test_float16_mean_accumulates_in_float32():
    # the kernels sum in float32; a float16 sum would overflow (65504) before the division
    g = jgo.Graph.from_edges(np.array([0, 1, 2]), np.array([0, 0, 0]), 3, 2)
    u = jnp.full((3, 2), 60000.0, jnp.float16)
    for impl in (None, "xla"):
        out = jgo.gspmm(g, u, op="copy_u", reduce="mean", impl=impl)
        assert out.dtype == jnp.float16
        np.testing.assert_array_equal(out, [[60000.0, 60000.0], [0.0, 0.0]])
        np.testing.assert_array_equal(jgo.agg_simple(g, u, reduce="mean", impl=impl), out)
        np.testing.assert_array_equal(jgo.pool(u, np.array([0, 0, 0]), 2, reduce="mean", impl=impl), out)


def test_trace_time_errors(rng):
    g = random_graph(rng)
    u, e = operands(rng, g, "u_mul_e")
    with pytest.raises(ValueError, match="op must be one of"):
        jgo.gspmm(g, u, e, op="u_pow_e")
    with pytest.raises(ValueError, match="reduce must be one of"):
        jgo.gspmm(g, u, e, op="u_mul_e", reduce="prod")
    with pytest.raises(ValueError, match="u must have 7 rows"):
        jgo.gspmm(g, u[:3], e, op="u_mul_e")
    with pytest.raises(ValueError, match="e must have 24 rows"):
        jgo.gspmm(g, u, e[:3], op="u_mul_e")
    with pytest.raises(TypeError, match="u must be a floating-point array"):
        jgo.gspmm(g, np.ones((7, 3), np.int32), op="copy_u")
    with pytest.raises(ValueError, match="needs e"):
        jgo.gspmm(g, u, op="u_mul_e")
    with pytest.raises(ValueError, match="do not broadcast"):
        jgo.gspmm(g, u, np.ones((24, 5), np.float32), op="u_mul_e")
    with pytest.raises(TypeError, match="g must be a jaxgraphops.Graph"):
        jgo.gspmm((np.zeros(3), np.zeros(3)), u, op="copy_u")
    with pytest.raises(ValueError, match="impl must be one of"):
        jgo.gspmm(g, u, op="copy_u", impl="cuda")


def test_out_of_range_index_reaching_the_kernel_is_an_error(rng):
    g = random_graph(rng)
    bad = jgo.Graph(*(jnp.asarray(x) for x in (g.src, g.dst, g.csc_offsets, g.csc_src.at[3].set(99), g.csc_eid,
                                               g.csr_offsets, g.csr_dst, g.csr_eid)), g.n_src, g.n_dst, validate=False)
    bad = kernel_only(bad)  # past the Python check, to the kernels' own
    u = jnp.ones((g.n_src, 2))
    eid = int(g.csc_eid[3])
    with kernel_index_error(f".*edge {eid} has node index 99"):
        out = jgo.gspmm(bad, u, op="copy_u").block_until_ready()
    if jgo.kernel_platform() != "cpu":  # the CUDA kernels skip the edge: the graph without it
        keep = np.arange(g.n_edges) != eid
        without = jgo.Graph.from_edges(np.asarray(g.src)[keep], np.asarray(g.dst)[keep], g.n_src, g.n_dst)
        np.testing.assert_allclose(out, jgo.gspmm(without, u, op="copy_u", impl="xla"))
    # the process survives and keeps working
    np.testing.assert_allclose(jgo.gspmm(g, u, op="copy_u"), jgo.gspmm(g, u, op="copy_u", impl="xla"))


def test_graph_as_jit_argument_and_jvp(rng):
    g = random_graph(rng)
    u, e = operands(rng, g, "u_mul_e")
    f = jax.jit(lambda g, a, b: jgo.gspmm(g, a, b, op="u_mul_e", reduce="mean"))
    np.testing.assert_allclose(f(g, u, e), jgo.gspmm(g, u, e, op="u_mul_e", reduce="mean", impl="xla"), rtol=1e-6)
    du, de = np.ones_like(u), np.ones_like(e)
    out, tangent = jax.jvp(lambda a, b: f(g, a, b), (u, e), (du, de))
    _, tangent_ref = jax.jvp(lambda a, b: jgo.gspmm(g, a, b, op="u_mul_e", reduce="mean", impl="xla"), (u, e), (du, de))
    np.testing.assert_allclose(tangent, tangent_ref, rtol=1e-5, atol=1e-6)


def test_misspelt_options_name_the_function_and_suggest(rng):
    """Issue 19: every op names itself in its errors and suggests the option a typo was meant to be."""
    from jaxgraphops._checks import check_choice, did_you_mean

    g = random_graph(rng)
    u = jnp.ones((g.n_src, 2))
    with pytest.raises(ValueError, match=r"^gspmm: reduce must be one of 'sum', 'mean', 'max', 'min'; got 'summ' "
                                         r"\(did you mean 'sum'\?\)$"):
        jgo.gspmm(g, u, reduce="summ")
    with pytest.raises(ValueError, match=r"gspmm: op must be one of .*; got 'copy_U' \(did you mean 'copy_u'\?\)"):
        jgo.gspmm(g, u, op="copy_U")
    with pytest.raises(ValueError, match=r"gsddmm: lhs_target must be one of 'u', 'v', 'e'; got 'U' "
                                         r"\(did you mean 'u'\?\)"):
        jgo.gsddmm(g, u, u, lhs_target="U")
    with pytest.raises(ValueError, match=r"edge_softmax: impl must be one of None, 'ffi', 'xla'; got 'jax'$"):
        jgo.edge_softmax(g, jnp.ones(g.n_edges), impl="jax")  # nothing close: no suggestion
    assert did_you_mean("maen", ("sum", "mean")) == " (did you mean 'mean'?)"
    assert did_you_mean(3, ("sum",)) == ""
    check_choice("f", "impl", None, (None, "xla"))
    with pytest.raises(ValueError, match=r"^f: reduce must be one of 'sum'; got array\(\[1\]\)$"):
        check_choice("f", "reduce", np.array([1]), ("sum",))


@pytest.mark.parametrize("width", [1, 37, 200, 300])
def test_sums_are_the_csc_order_sums_bit_for_bit(rng, width):
    """The CPU sums (register-blocked, cloned per ISA) are each row's messages added one by one in CSC order,
    products rounded before the add (no fused multiply-add): a float32 NumPy loop gives the same bits,
    for widths that end in every kind of block (16, 8, 4, 2 and 1 vectors, and vectors of 16, 8, 4, 2 and 1
    features)."""
    if jgo.kernel_platform() != "cpu":
        pytest.skip("the CPU kernels' vector blocks of every width (the CUDA kernels' CSC-order bits: "
                    "tests/test_chunk_walk.py)")
    g = random_graph(rng, 9, 7, 60)
    x = rng.normal(size=(9, width)).astype(np.float32)
    w = rng.normal(size=60).astype(np.float32)
    we = rng.normal(size=(60, width)).astype(np.float32)
    src, dst = np.asarray(g.src), np.asarray(g.dst)
    cases = {"copy_u": (x, None, lambda e: x[src[e]]), "copy_e": (None, we, lambda e: we[e]),
             "u_mul_e": (x, w, lambda e: x[src[e]] * w[e]), "u_mul_e per feature": (x, we, lambda e: x[src[e]] * we[e])}
    for name, (u, e, message) in cases.items():
        op = name.split()[0]
        for reduce in ("sum", "mean"):
            want = np.zeros((7, width), np.float32)
            for v in range(7):
                edges = np.flatnonzero(dst == v)  # CSC order: by destination, then input order
                for k in edges:
                    want[v] = want[v] + message(k)
                if reduce == "mean" and edges.size:
                    want[v] = want[v] / np.float32(edges.size)
            got = np.asarray(jgo.gspmm(g, u, e, op=op, reduce=reduce))
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"{name} {reduce}")


def last_level_cache_bytes() -> int:
    """The level-3 cache size the CPU kernels compare outputs with (``ffi/cpu/row_parallel.h``)."""
    try:
        text = Path("/sys/devices/system/cpu/cpu0/cache/index3/size").read_text().strip()
    except OSError:
        return 32 << 20
    return int(text.rstrip("KM")) << {"K": 10, "M": 20}.get(text[-1], 0)


@pytest.mark.parametrize("op", ["copy_u", "copy_e", "u_mul_e"])
def test_outputs_larger_than_the_cache_are_the_csc_order_sums(rng, op):
    """Outputs larger than the last-level cache are written past the caches (non-temporal stores, whole
    rows of 128 features: one block of 16 AVX2 vectors): still each row's messages added in CSC order, the
    same bits as NumPy's float32 sums, for sums and means."""
    if jgo.kernel_platform() != "cpu":
        pytest.skip("the CPU kernels' stores past the host's last-level cache (the CUDA kernels' CSC-order bits: "
                    "tests/test_chunk_walk.py)")
    width, degree = 128, 3
    n = last_level_cache_bytes() // (4 * width) + 1000
    src = rng.integers(0, n, (n, degree))  # the edges of destination v, in input (and CSC) order: v*3 .. v*3+2
    g = jgo.Graph.from_edges(src.ravel(), np.repeat(np.arange(n), degree), n, n)
    x = rng.normal(size=(n, width)).astype(np.float32) if op != "copy_e" else None
    w = {"copy_u": None, "u_mul_e": rng.normal(size=n * degree).astype(np.float32),
         "copy_e": rng.normal(size=(n * degree, width)).astype(np.float32)}[op]
    messages = {"copy_u": lambda k: x[src[:, k]], "copy_e": lambda k: w[k::degree],
                "u_mul_e": lambda k: x[src[:, k]] * w[k::degree, None]}[op]
    want = np.zeros((n, width), np.float32)
    for k in range(degree):
        want = want + messages(k)
    for reduce, expected in (("sum", want), ("mean", want / np.float32(degree))):
        got = np.asarray(jgo.gspmm(g, x, w, op=op, reduce=reduce))
        np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32), err_msg=f"{op} {reduce}")
