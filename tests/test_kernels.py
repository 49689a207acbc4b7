"""The kernel primitives against their pure-JAX lowering (the fallback where no handler exists)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import kernel_index_error, random_graph, repeated_edge_id, segment_softmax_np

import jaxgraphops as jgo
from jaxgraphops.ops import _primitives as prim
from jaxgraphops.ops._primitive_utils import graph_arrays
from jaxgraphops.ops._primitives import sddmm, spmm


def _dummy(dtype):
    return jnp.zeros((0,), dtype)


@pytest.mark.parametrize("op", prim.OPS)
@pytest.mark.parametrize("reduce,masked", [("sum", False), ("mean", False), ("max", False), ("min", False),
                                           ("sum", True)])
@pytest.mark.parametrize("reverse", [False, True])
def test_spmm_primitive_matches_fallback(rng, op, reduce, masked, reverse):
    g = random_graph(rng, 7, 6, 30)
    ga = graph_arrays(g)
    n_nbr = g.n_dst if reverse else g.n_src
    n_rows = g.n_src if reverse else g.n_dst
    node = rng.normal(size=(n_nbr, 2, 3)).astype(np.float32) if prim.uses_lhs(op) else _dummy(np.float32)
    edge = rng.normal(size=(g.n_edges, 2, 1)).astype(np.float32) if prim.uses_rhs(op) else _dummy(np.float32)
    # a mask indexed by destination; pick a random in-edge per (dst, feature), -1 for none
    mask = rng.integers(-1, g.n_edges, size=(g.n_dst, 2, 3)).astype(np.int32) if masked else _dummy(np.int32)
    params = dict(op=op, reduce=reduce, reverse=reverse, masked=masked, out_shape=(2, 3))
    out, arg = prim.spmm_p.bind(*ga, node, edge, mask, **params)
    ref_out, ref_arg = prim.spmm_xla(*ga, node, edge, mask, **params)
    assert out.shape == (n_rows, 2, 3)
    np.testing.assert_allclose(out, ref_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(arg, ref_arg)


SDDMM_VARIANTS = [(op, False) for op in prim.OPS] + [("mul", True)]  # (op, dot): dot needs op=mul


@pytest.mark.parametrize("op,dot", SDDMM_VARIANTS)
@pytest.mark.parametrize("lt,rt", list(itertools.product(("src", "dst", "edge"), repeat=2)))
@pytest.mark.parametrize("masked", [False, True])
def test_sddmm_primitive_matches_fallback(rng, op, dot, lt, rt, masked):
    g = random_graph(rng, 7, 6, 30)
    ga = graph_arrays(g)
    lhs = rng.normal(size=(prim.rows_of(lt, ga), 2, 3)).astype(np.float32)
    rhs = rng.normal(size=(prim.rows_of(rt, ga), 1, 3)).astype(np.float32)
    mask = rng.integers(-1, g.n_edges, size=(g.n_dst, 2, 3)).astype(np.int32) if masked else _dummy(np.int32)
    params = dict(op=op, lhs_target=lt, rhs_target=rt, dot=dot, masked=masked, out_shape=(2, 3))
    args = (*ga, lhs if prim.uses_lhs(op) else _dummy(np.float32), rhs if prim.uses_rhs(op) else _dummy(np.float32), mask)
    np.testing.assert_allclose(prim.sddmm_p.bind(*args, **params), prim.sddmm_xla(*args, **params), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["spmm", "spmm reverse", "sddmm"])
def test_int64_mask_ids_beyond_int32_never_match_an_edge(rng, x64, kind):
    """The CPU walks read int64 structures as int32 copies; a mask id of 2^32 + e (or -2^32 + e) must not wrap
    onto edge e: it matches no edge, as in the fallback."""
    g = random_graph(rng, 7, 6, 30, index_dtype=np.int64)
    ga = graph_arrays(g)
    ids = rng.integers(-1, g.n_edges, size=(g.n_dst, 2, 3))
    wide = ids + np.where(rng.random(ids.shape) < 0.5, 1, -1) * (np.int64(1) << 32)
    mask = np.where(rng.random(ids.shape) < 0.5, ids, wide).astype(np.int64)
    assert (mask != ids).any() and (mask == ids).any()
    if kind == "sddmm":
        lhs = rng.normal(size=(g.n_src, 2, 3))
        rhs = rng.normal(size=(g.n_dst, 2, 3))
        params = dict(op="mul", lhs_target="src", rhs_target="dst", dot=False, masked=True, out_shape=(2, 3))
        got, want = prim.sddmm_p.bind(*ga, lhs, rhs, mask, **params), prim.sddmm_xla(*ga, lhs, rhs, mask, **params)
    else:
        reverse = kind == "spmm reverse"
        node = rng.normal(size=(g.n_dst if reverse else g.n_src, 2, 3))
        params = dict(op="copy_lhs", reduce="sum", reverse=reverse, masked=True, out_shape=(2, 3))
        got = prim.spmm_p.bind(*ga, node, _dummy(np.float64), mask, **params)[0]
        want = prim.spmm_xla(*ga, node, _dummy(np.float64), mask, **params)[0]
    np.testing.assert_array_equal(got, want)
    assert np.any(np.asarray(want) != 0)


def test_softmax_primitive_matches_fallback(rng):
    g = random_graph(rng)
    logits = rng.normal(size=(g.n_edges, 4)).astype(np.float32)
    ga = graph_arrays(g)
    np.testing.assert_allclose(prim.softmax_p.bind(*ga, logits), prim.softmax_xla(*ga, logits), rtol=1e-6)


def test_layouts_beyond_three_axes_are_broadcast_explicitly(rng):
    g = random_graph(rng)
    ga = graph_arrays(g)
    node = rng.normal(size=(g.n_src, 2, 1, 3, 1)).astype(np.float32)
    edge = rng.normal(size=(g.n_edges, 1, 4, 1, 5)).astype(np.float32)
    out, _ = spmm(ga, node, edge, op="mul", out_shape=(2, 4, 3, 5))
    ref = jgo.gspmm(g, node, edge, op="u_mul_e", impl="xla")
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    dot = sddmm(ga, node, edge, op="mul", lhs_target="src", rhs_target="edge", out_shape=(2, 4, 3, 5), dot=True)
    np.testing.assert_allclose(dot, (node[g.src] * edge).sum(-1), rtol=1e-5, atol=1e-6)


def test_first_order_backward_runs_the_kernels(rng):
    g = random_graph(rng)
    x = rng.normal(size=(g.n_src, 4)).astype(np.float32)
    w = rng.normal(size=(g.n_edges,)).astype(np.float32)
    for reduce in ("sum", "max"):
        loss = lambda x, w: jnp.sum(jgo.gspmm(g, x, w, op="u_mul_e", reduce=reduce) ** 2)  # noqa: E731
        hlo = jax.jit(jax.grad(loss, (0, 1))).lower(x, w).as_text()
        assert hlo.count("jgo_spmm") >= 2 and "jgo_sddmm" in hlo  # forward, reverse reduce, edge product
        assert "scatter" not in hlo


def test_cuda_lowering():
    g = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 0]))
    f = jax.jit(lambda x: jgo.gspmm(g, x, op="copy_u"))
    text = f.trace(jnp.ones((2, 3))).lower(lowering_platforms=("cuda",)).as_text()
    assert ("jgo_spmm" in text) == jgo.with_cuda()


NO_KEY = jnp.zeros((0,), jnp.uint32)  # the dropout key operand of the attention primitives, absent


@pytest.mark.parametrize("edge", [False, True])
def test_attention_forward_primitives_match_fallback(rng, edge):
    """The fused forward of each attention primitive against its pure-JAX lowering."""
    from jaxgraphops.ops import _gat_primitives as gat
    from jaxgraphops.ops import _mha_simple_primitives as simple
    from jaxgraphops.ops import _gatv2_primitives as v2

    g = random_graph(rng, 7, 6, 30)
    ga = graph_arrays(g)
    h, c = 2, 3
    f = lambda *s: jnp.asarray(rng.normal(size=s).astype(np.float32))  # noqa: E731
    ef = f(g.n_edges, h, c) if edge else _dummy(jnp.float32)
    cases = [
        (gat.GAT.fwd, gat.GAT.op.forward, (f(7, h, c), f(7, h), f(6, h), f(g.n_edges, h) if edge else ef),
         dict(negative_slope=0.2, has_edge=edge)),
        (v2.GATV2.fwd, v2.GATV2.op.forward, (f(7, h, c), f(6, h, c), f(h, c), ef),
         dict(negative_slope=0.2, has_edge=edge)),
        (simple.MHA_SIMPLE.fwd, simple.MHA_SIMPLE.op.forward, (f(6, h, c), f(7, h, c), f(7, h, c), ef),
         dict(scale=c ** -0.5, has_edge=edge)),
    ]
    for p, fallback, args, params in cases:
        params = dict(params, dropout_rate=0.0)  # the attention families are keyed: no key, no dropout
        got = jax.jit(lambda *a, p=p, params=params: p.bind(*ga, NO_KEY, *a, **params))(*args)
        want = jax.jit(lambda *a, fallback=fallback, params=params: fallback(ga, NO_KEY, *a, **params))(*args)
        for u, v in zip(got, want):
            np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-5, err_msg=p.name)


@pytest.mark.parametrize("order", [[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [1, 3, 0, 4, 2]])
def test_attention_primitives_with_minus_inf_logits(order):
    """Each fused attention primitive with -inf logits (edge 0 in head 0; every in-edge of node 1): out, lse and
    the VJP of the kernels against the pure-JAX lowering and NumPy; lse is 0 where all logits are -inf."""
    from jaxgraphops.ops import _gat_primitives as gat
    from jaxgraphops.ops import _mha_simple_primitives as simple
    from jaxgraphops.ops import _gatv2_primitives as v2

    rng = np.random.default_rng(0)
    h, c = 2, 3
    masked = np.array([[True, False], [False, False], [False, False], [True, True], [True, True]])[order]
    src, dst = np.arange(5)[order], np.array([0, 0, 0, 1, 1])[order]
    g = jgo.Graph.from_edges(src, dst, 5, 3)
    ga = graph_arrays(g)
    f = lambda *s: rng.normal(size=s).astype(np.float32)  # noqa: E731
    ef = np.where(masked[..., None] & (np.arange(c) == 0), np.float32(-3e38), 0.1 * f(5, h, c))
    x, s_src, s_dst, s_edge = f(5, h, c), f(5, h), f(3, h), np.where(masked, -np.inf, f(5, h)).astype(np.float32)
    xs, xd, a = f(5, h, c), f(3, h, c), np.concatenate([np.full((h, 1), 10, np.float32), f(h, c - 1)], axis=1)
    q, k, v = np.concatenate([np.full((3, h, 1), 10, np.float32), f(3, h, c - 1)], axis=2), f(5, h, c), f(5, h, c)
    leaky = lambda t: np.where(t > 0, t, 0.2 * t)  # noqa: E731
    with np.errstate(over="ignore"):
        cases = [  # (primitive, pure-JAX lowering, operands, params, logits)
            (gat.GAT.fwd, gat.GAT.op.forward, (x, s_src, s_dst, s_edge), dict(negative_slope=0.2, has_edge=True),
             leaky(s_src[src] + s_dst[dst] + s_edge)),
            (v2.GATV2.fwd, v2.GATV2.op.forward, (xs, xd, a, ef), dict(negative_slope=0.2, has_edge=True),
             (leaky(xs[src] + xd[dst] + ef) * a).sum(-1)),
            (simple.MHA_SIMPLE.fwd, simple.MHA_SIMPLE.op.forward, (q, k, v, ef), dict(scale=c ** -0.5, has_edge=True),
             (q[dst] * (k[src] + ef)).sum(-1) * c ** -0.5),
        ]
    cts = (0.1 * np.abs(f(3, h, c)), f(3, h))  # small cotangents of out keep <G, v + ef> finite
    for p, fallback, args, params, z in cases:
        np.testing.assert_array_equal(np.isneginf(z), masked, err_msg=p.name)
        params = dict(params, dropout_rate=0.0)  # the attention families are keyed: no key, no dropout
        fused = jax.jit(lambda *a, p=p, params=params: tuple(p.bind(*ga, NO_KEY, *a, **params)))
        composed = jax.jit(lambda *a, fallback=fallback, params=params: tuple(fallback(ga, NO_KEY, *a, **params)))
        (out, lse), vjp = jax.vjp(fused, *args)
        (ref_out, ref_lse), ref_vjp = jax.vjp(composed, *args)
        np.testing.assert_allclose(out, ref_out, rtol=1e-5, atol=1e-5, err_msg=p.name)
        np.testing.assert_allclose(lse, segment_softmax_np(z, dst, 3)[1], rtol=1e-5, atol=1e-6, err_msg=p.name)
        np.testing.assert_allclose(lse, ref_lse, rtol=1e-5, atol=1e-6, err_msg=p.name)
        np.testing.assert_array_equal(lse[1:], 0)  # all -inf, and no in-edges
        np.testing.assert_array_equal(out[1:], 0)
        for u, w in zip(vjp(cts), ref_vjp(cts)):
            assert np.isfinite(u).all(), p.name
            np.testing.assert_allclose(u, w, rtol=1e-4, atol=1e-4, err_msg=p.name)


def test_edge_gradients_with_edge_ids_that_are_not_a_permutation():
    """Edge ids in range but not a permutation (a hand-built Graph): the CPU kernels reject them, and the CUDA
    kernels leave no edge-valued output unwritten (the missing edge's gradients are 0; the rest depends on which
    of the repeated edge's two rows wrote its forward value, which is unspecified)."""
    rng = np.random.default_rng(0)
    bad, missing = repeated_edge_id(random_graph(rng, 7, 7, 24))
    f = lambda *s: jnp.asarray(rng.normal(size=s).astype(np.float32))  # noqa: E731
    x, y, z, ef, a2, a3 = f(7, 6), f(7, 6), f(7, 6), f(24, 6), f(6), f(18)
    gno = (f(7, 3), f(24, 2), f(4, 2), f(4), f(6, 4), f(6), jnp.abs(f(24)))
    grads = {  # the edge-valued gradients, written by the CSC backward kernels
        "mha_gat": lambda: jax.grad(lambda e: jgo.mha_gat(bad, x, a3, num_heads=2, edge_feat=e).sum())(ef),
        "mha_gat_v2": lambda: jax.grad(lambda e: jgo.mha_gat_v2(bad, x, y, a2, num_heads=2, edge_feat=e).sum())(ef),
        "mha_simple": lambda: jax.grad(lambda e: jgo.mha_simple(bad, x, y, z, num_heads=2, edge_feat=e).sum())(ef),
        "gno_conv": lambda: jax.grad(lambda *a: jgo.gno_conv(bad, *a[:6], edge_weight=a[6], reduce="sum").sum(),
                                     (1, 6))(*gno),
    }
    for name, grad in grads.items():
        with kernel_index_error(".*edge id 0 appears twice .*csc_eid and csr_eid must be permutations"):
            got = jax.block_until_ready(grad())
        if jgo.kernel_platform() != "cpu":
            for u in jax.tree_util.tree_leaves(got):
                np.testing.assert_array_equal(u[missing], 0, err_msg=name)
                assert np.isfinite(u).all(), name
