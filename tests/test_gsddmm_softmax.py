"""gsddmm and edge_softmax against the pure-JAX reference and literal tables."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import check_grads, hub_graph, kernel_index_error, random_graph, repeated_edge_id

import jaxgraphops as jgo

SDDMM_OPS = ("dot", "add", "sub", "mul", "div")
TARGETS = ("u", "v", "e")


def rows(g, target):
    return {"u": g.n_src, "v": g.n_dst, "e": g.n_edges}[target]


def sddmm_operands(rng, g, op, lt, rt, fl=(2, 3), fr=(2, 3), dtype=np.float64):
    lhs = rng.normal(size=(rows(g, lt),) + fl).astype(dtype)
    rhs = rng.normal(size=(rows(g, rt),) + fr).astype(dtype)
    if op == "div":
        rhs = np.sign(rhs) * (1 + np.abs(rhs))
    return lhs, rhs


@pytest.mark.parametrize("op", SDDMM_OPS)
@pytest.mark.parametrize("lt", TARGETS)
@pytest.mark.parametrize("rt", TARGETS)
def test_gsddmm_matches_reference_and_grads(x64, rng, op, lt, rt):
    g = random_graph(rng, 5, 4, 10)
    lhs, rhs = sddmm_operands(rng, g, op, lt, rt)
    f = lambda a, b: jgo.gsddmm(g, a, b, op=op, lhs_target=lt, rhs_target=rt)  # noqa: E731
    ref = jgo.gsddmm(g, lhs, rhs, op=op, lhs_target=lt, rhs_target=rt, impl="xla")
    np.testing.assert_allclose(f(lhs, rhs), ref, rtol=1e-13, atol=1e-13)
    check_grads(f, (lhs, rhs), order=2, modes=("fwd", "rev"), eps=1e-4)


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fl,fr", [((4,), (4,)), ((2, 4), (2, 1)), ((2, 4), (2,)), ((), ()), ((3, 1, 4), (1, 2, 4))])
def test_gsddmm_shapes_and_dtypes(x64, rng, index_dtype, dtype, fl, fr):
    g = random_graph(rng, index_dtype=index_dtype)
    lhs, rhs = sddmm_operands(rng, g, "mul", "u", "v", fl, fr, dtype)
    for op in ("mul", "add") + (("dot",) if fl else ()):
        out = jgo.gsddmm(g, lhs, rhs, op=op)
        ref = jgo.gsddmm(g, lhs, rhs, op=op, impl="xla")
        assert out.dtype == dtype and out.shape == ref.shape
        np.testing.assert_allclose(out, ref, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


def test_gsddmm_literal():
    g = jgo.Graph.from_edges(np.array([0, 1, 1]), np.array([1, 0, 1]), 2, 2)
    x = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(jgo.gsddmm(g, x, x, op="dot"), [11.0, 11.0, 25.0])
    np.testing.assert_array_equal(jgo.gsddmm(g, x, x, op="sub"), [[-2.0, -2.0], [2.0, 2.0], [0.0, 0.0]])
    w = jnp.array([1.0, 2.0, 4.0])
    np.testing.assert_array_equal(jgo.gsddmm(g, x, w, op="mul", rhs_target="e")[:, 0], [1.0, 6.0, 12.0])


def test_gsddmm_errors(rng):
    g = random_graph(rng)
    x = np.ones((g.n_src, 3), np.float32)
    with pytest.raises(ValueError, match="lhs_target must be one of"):
        jgo.gsddmm(g, x, x, lhs_target="src")
    with pytest.raises(ValueError, match="rhs must have 6 rows"):
        jgo.gsddmm(g, x, x, rhs_target="v")
    with pytest.raises(ValueError, match="op must be one of"):
        jgo.gsddmm(g, x, x, op="max", rhs_target="u")
    with pytest.raises(ValueError, match="needs a feature axis"):
        jgo.gsddmm(g, x[:, 0], x[:, 0], op="dot", rhs_target="u")


@pytest.mark.parametrize("case", ["finite", "-inf", "nan", "all -inf"])
@pytest.mark.parametrize("heads", [(), (3,)])
def test_edge_softmax_of_a_heavy_row(rng, case, heads):
    g, _, dst = hub_graph(rng)  # node 5: 700 in-edges, three chunks in the CUDA kernels
    logits = 4 * rng.normal(size=(g.n_edges,) + heads).astype(np.float32)
    hub = np.flatnonzero(dst == 5)
    if case == "-inf":
        logits[hub[1::3]] = -np.inf  # weight 0
    elif case == "nan":
        logits[hub[600]] = np.nan  # late in the row: the whole row is NaN
    elif case == "all -inf":
        logits[hub] = -np.inf  # an empty row: 0
    y = jgo.edge_softmax(g, logits)
    np.testing.assert_allclose(y, jgo.edge_softmax(g, logits, impl="xla"), rtol=1e-5, atol=1e-7)
    if case in ("finite", "-inf"):
        ct = rng.normal(size=logits.shape).astype(np.float32)
        grad = lambda impl: jax.vjp(lambda z: jgo.edge_softmax(g, z, impl=impl), logits)[1](ct)[0]  # noqa: E731
        # y (ct - sum_row y ct): the 700-term float32 sum, added in another order (chunks, XLA's segment sum),
        # differs by ~1e-7 and cancels against ct
        np.testing.assert_allclose(grad(None), grad("xla"), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_edge_softmax(x64, rng, shape, index_dtype):
    g = random_graph(rng, index_dtype=index_dtype)
    logits = rng.normal(size=(g.n_edges,) + shape) * 3
    y = jgo.edge_softmax(g, logits)
    np.testing.assert_allclose(y, jgo.edge_softmax(g, logits, impl="xla"), rtol=1e-13, atol=1e-15)
    sums = jax.ops.segment_sum(y, g.dst, num_segments=g.n_dst)
    has_edges = np.asarray(g.in_degrees()) > 0
    np.testing.assert_allclose(np.asarray(sums)[has_edges], 1.0, rtol=1e-13)
    check_grads(lambda x: jgo.edge_softmax(g, x), (logits,), order=2, modes=("fwd", "rev"))
    lb = np.stack([logits, 2 * logits])
    np.testing.assert_allclose(jax.vmap(lambda x: jgo.edge_softmax(g, x))(lb),
                               jax.vmap(lambda x: jgo.edge_softmax(g, x, impl="xla"))(lb), rtol=1e-13)


def test_edge_softmax_is_stable_and_literal():
    g = jgo.Graph.from_edges(np.array([0, 1, 2, 0]), np.array([2, 2, 0, 1]), 3, 3)
    y = jgo.edge_softmax(g, jnp.array([1000.0, 1000.0, -1000.0, 3.0]))
    np.testing.assert_array_equal(y, [0.5, 0.5, 1.0, 1.0])
    y = jgo.edge_softmax(g, jnp.array([0.0, np.log(3.0), 7.0, 7.0]))
    np.testing.assert_allclose(y, [0.25, 0.75, 1.0, 1.0], rtol=1e-6)


@pytest.mark.parametrize("order", [[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 0, 4, 1, 3]])
def test_edge_softmax_minus_inf_logits_in_any_edge_order(order):
    # node 0 receives edges 0-2 (edge 0 masked in head 0), node 1 edges 3-4 (all masked in head 0), node 2 nothing
    inf = np.inf
    dst = np.array([0, 0, 0, 1, 1])[order]
    logits = np.array([[-inf, 0.5], [1.0, -2.0], [3.0, 0.0], [-inf, 1.0], [-inf, -inf]], np.float32)[order]
    g = jgo.Graph.from_edges(np.arange(5), dst, 5, 3)
    want = np.zeros_like(logits)
    for i in (0, 1):
        for h in (0, 1):
            z = logits[dst == i, h]
            if np.isfinite(z).any():  # a row of only -inf logits gets 0, as a row without edges
                want[dst == i, h] = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    coef = np.arange(10.0, dtype=np.float32).reshape(5, 2)
    grads = []
    for impl in (None, "xla"):
        np.testing.assert_allclose(jgo.edge_softmax(g, logits, impl=impl), want, rtol=1e-6, atol=1e-7)
        grads.append(jax.grad(lambda z: jnp.sum(jgo.edge_softmax(g, z, impl=impl) * coef))(logits))
    assert np.isfinite(grads[0]).all()
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(grads[0][np.isneginf(logits)], 0)


def test_edge_ids_that_are_not_a_permutation():
    """No output element is left unwritten: the CPU kernels reject such a graph, the CUDA kernels zero the
    outputs first (the missing edge gets 0; the repeated one gets one of its two rows' values, which one is
    unspecified)."""
    rng = np.random.default_rng(0)
    bad, missing = repeated_edge_id(random_graph(rng))
    x, y = rng.normal(size=(bad.n_src, 3)), rng.normal(size=(bad.n_dst, 3))
    logits = rng.normal(size=(bad.n_edges, 2))
    for target, op in (("sddmm", lambda: jgo.gsddmm(bad, x, y, op="add")),
                       ("sddmm", lambda: jgo.gsddmm(bad, x, y, op="dot")),
                       ("edge_softmax", lambda: jgo.edge_softmax(bad, logits))):
        with kernel_index_error(f".*{target}: edge id 0 appears twice .*csc_eid and csr_eid must be permutations"):
            out = op().block_until_ready()
        if jgo.kernel_platform() != "cpu":
            np.testing.assert_array_equal(out[missing], 0)
            assert np.isfinite(out).all()


def test_zero_edge_graph():
    g = jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 3, 2)
    x, y = jnp.ones((3, 4)), jnp.ones((2, 4))
    assert jgo.gsddmm(g, x, y, op="dot").shape == (0,)
    gx = jax.grad(lambda a: jgo.gsddmm(g, a, y, op="mul").sum())(x)
    np.testing.assert_array_equal(gx, 0)
    assert jgo.edge_softmax(g, jnp.zeros((0, 2))).shape == (0, 2)
    assert jax.grad(lambda z: jgo.edge_softmax(g, z).sum())(jnp.zeros((0,))).shape == (0,)
