"""The kernel primitives against their pure-JAX lowering (the fallback where no handler exists)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_graph

import jaxgraphops as jgo
from jaxgraphops.ops import _primitives as prim
from jaxgraphops.ops._calls import graph_arrays, sddmm, spmm


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


@pytest.mark.parametrize("edge", [False, True])
def test_attention_forward_primitives_match_fallback(rng, edge):
    """The fused forward of each attention primitive against its pure-JAX lowering."""
    from jaxgraphops.ops import _attention_primitives as gat
    from jaxgraphops.ops import _attention_simple_primitives as simple
    from jaxgraphops.ops import _attention_v2_primitives as v2

    g = random_graph(rng, 7, 6, 30)
    ga = graph_arrays(g)
    h, c = 2, 3
    f = lambda *s: jnp.asarray(rng.normal(size=s).astype(np.float32))  # noqa: E731
    ef = f(g.n_edges, h, c) if edge else _dummy(jnp.float32)
    cases = [
        (gat.gat_fwd_p, gat.gat_fwd_xla, (f(7, h, c), f(7, h), f(6, h), f(g.n_edges, h) if edge else ef),
         dict(negative_slope=0.2, has_edge=edge)),
        (v2.gatv2_fwd_p, v2.gatv2_fwd_xla, (f(7, h, c), f(6, h, c), f(h, c), ef),
         dict(negative_slope=0.2, has_edge=edge)),
        (simple.mha_simple_fwd_p, simple.mha_simple_fwd_xla, (f(6, h, c), f(7, h, c), f(7, h, c), ef),
         dict(scale=c ** -0.5, has_edge=edge)),
    ]
    for p, fallback, args, params in cases:
        got = jax.jit(lambda *a, p=p, params=params: p.bind(*ga, *a, **params))(*args)
        want = jax.jit(lambda *a, fallback=fallback, params=params: fallback(*ga, *a, **params))(*args)
        for u, v in zip(got, want):
            np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-5, err_msg=p.name)
