"""mha_simple against the pure-JAX reference and hand-computed cases; derivatives of every order; transforms."""

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import (
    MASK_ORDERS, beyond_int32, check_grads, check_half_precision, check_masked_attention, jit_jacfwd, jit_jacrev,
    kernel_index_error, kernel_only, masked_attention_graph, random_graph, segment_softmax_np,
)

import jaxgraphops as jgo


def inputs(rng, g, heads=2, c=3, edge=False, dtype=np.float32):
    f = heads * c
    q = rng.normal(size=(g.n_dst, f)).astype(dtype)
    k = rng.normal(size=(g.n_src, f)).astype(dtype)
    v = rng.normal(size=(g.n_src, f)).astype(dtype)
    ef = rng.normal(size=(g.n_edges, f)).astype(dtype) if edge else None
    return q, k, v, ef


def both(g, q, k, v, **kw):
    return jgo.mha_simple(g, q, k, v, **kw), jgo.reference.mha_simple(g, q, k, v, **kw)


def close(dtype):
    tol = 1e-5 if dtype == np.float32 else 1e-12
    return lambda a, b: np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def softmax(z):
    w = np.exp(z - np.max(z))
    return w / w.sum()


# ---------------------------------------------------------------------------------------
# literal cases


def test_literal_single_edge_self_loop_and_zero_in_degree():
    # one head, C = 4 (scale 1/2); node 1 receives from 0 and from itself; 0 and 2 receive nothing
    g = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 1]), 3, 3)
    q = np.array([[9.0, 9, 9, 9], [1, 0, 2, 0], [9, 9, 9, 9]], np.float32)
    k = np.array([[2.0, 0, 1, 0], [0, 5, 0, 5], [7, 7, 7, 7]], np.float32)
    v = np.array([[1.0, 2, 3, 4], [-1, 0, 1, 0], [5, 5, 5, 5]], np.float32)
    out, alpha = jgo.mha_simple(g, q, k, v, return_attention=True)
    # logits <q[1], k[j]> / 2: (1*2 + 2*1) / 2 = 2 and (0 + 0) / 2 = 0
    w = np.array([np.exp(2.0), 1.0]) / (np.exp(2.0) + 1.0)
    np.testing.assert_allclose(alpha[:, 0], w, rtol=1e-6)
    np.testing.assert_allclose(out, [[0, 0, 0, 0], w[0] * v[0] + w[1] * v[1], [0, 0, 0, 0]], rtol=1e-6)
    # a single in-edge gets all the attention, whatever the logit
    g1 = jgo.Graph.from_edges(np.array([2]), np.array([0]), 3, 3)
    out1, alpha1 = jgo.mha_simple(g1, q, k, v, return_attention=True)
    np.testing.assert_array_equal(alpha1, [[1.0]])
    np.testing.assert_array_equal(out1, [[5, 5, 5, 5], [0, 0, 0, 0], [0, 0, 0, 0]])
    # with an edge feature, the single edge's value is v[2] + ef[0]
    ef = np.array([[1.0, -2, 3, -4]], np.float32)
    out1e = jgo.mha_simple(g1, q, k, v, edge_feat=ef)
    np.testing.assert_array_equal(out1e[0], [6, 3, 8, 1])


def test_literal_heads_concat_mean_and_edge_feat():
    # two heads of C = 1 (scale 1); node 1 receives from sources 0 and 2 of a bipartite graph
    g = jgo.Graph.from_edges(np.array([0, 2]), np.array([1, 1]), 3, 2)
    q = np.array([[0.0, 0.0], [1.0, 2.0]], np.float32)
    k = np.array([[0.0, 1.0], [5.0, 5.0], [np.log(3.0), 0.0]], np.float32)
    v = np.array([[4.0, 10.0], [0.0, 0.0], [8.0, 30.0]], np.float32)
    out, alpha = jgo.mha_simple(g, q, k, v, num_heads=2, return_attention=True)
    # head 0: logits 0 and log 3 -> 1/4, 3/4; head 1: logits 2 and 0
    w1 = softmax(np.array([2.0, 0.0]))
    np.testing.assert_allclose(alpha, [[0.25, w1[0]], [0.75, w1[1]]], rtol=1e-6)
    head0, head1 = 0.25 * 4 + 0.75 * 8, w1 @ np.array([10.0, 30.0])
    np.testing.assert_allclose(out, [[0, 0], [head0, head1]], rtol=1e-6)
    mean = jgo.mha_simple(g, q, k, v, num_heads=2, concat_heads=False)
    np.testing.assert_allclose(mean, [[0], [(head0 + head1) / 2]], rtol=1e-6)
    # edge features add to key and value: ef on edge 0 makes head 0's logits log 3 and log 3
    ef = np.array([[np.log(3.0), 0.0], [0.0, -2.0]], np.float32)
    out_e, alpha_e = jgo.mha_simple(g, q, k, v, num_heads=2, edge_feat=ef, return_attention=True)
    w1e = softmax(np.array([2.0, -4.0]))  # head 1: <2, 1 + 0> = 2 and <2, 0 - 2> = -4
    np.testing.assert_allclose(alpha_e, [[0.5, w1e[0]], [0.5, w1e[1]]], rtol=1e-6)
    np.testing.assert_allclose(out_e[1], [0.5 * (4 + np.log(3.0)) + 0.5 * 8, w1e @ np.array([10.0, 28.0])],
                               rtol=1e-6)


def test_zero_in_degree_gradients_are_zero(rng):
    g = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 1]), 3, 3)
    q, k, v, ef = inputs(rng, g, edge=True)
    grads = jax.grad(lambda q, k, v, ef: jgo.mha_simple(g, q, k, v, num_heads=2, edge_feat=ef)[jnp.array([0, 2])]
                     .sum(), (0, 1, 2, 3))(q, k, v, ef)
    for gr in grads:
        np.testing.assert_array_equal(gr, 0)


def test_zero_edge_graph(rng):
    g = jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 3, 3)
    q, k, v, ef = inputs(rng, g, edge=True)
    out, alpha = jgo.mha_simple(g, q, k, v, num_heads=2, edge_feat=ef, return_attention=True)
    np.testing.assert_array_equal(out, np.zeros((3, 6)))
    assert alpha.shape == (0, 2)
    grads = jax.grad(lambda q, k, v: jgo.mha_simple(g, q, k, v, num_heads=2, edge_feat=ef).sum(), (0, 1, 2))(q, k, v)
    for gr in grads:
        np.testing.assert_array_equal(gr, 0)


@pytest.mark.parametrize("order", MASK_ORDERS)
def test_minus_inf_logits_in_any_edge_order(order):
    """A -inf logit weighs 0 without poisoning its row; a destination whose logits are all -inf is one without
    in-edges. The mask is an edge feature of -3e38 whose logit overflows to -inf (finite inputs and gradients)."""
    rng = np.random.default_rng(0)
    h, c = 2, 2
    g, src, dst, masked = masked_attention_graph(order)
    ef = 0.1 * rng.normal(size=(5, h, c)).astype(np.float32)
    ef[..., 0] = np.where(masked, -3e38, ef[..., 0])
    q = rng.normal(size=(3, h, c)).astype(np.float32)
    q[:, :, 0] = 10.0  # 10 * -3e38 overflows
    k = rng.normal(size=(5, h, c)).astype(np.float32)
    v = rng.normal(size=(5, h, c)).astype(np.float32)
    with np.errstate(over="ignore"):
        z = (q[dst] * (k[src] + ef)).sum(-1) / np.sqrt(c)
    np.testing.assert_array_equal(np.isneginf(z), masked)
    alpha, _ = segment_softmax_np(z, dst, 3)
    want = np.stack([(alpha[dst == i, :, None] * (v[src] + ef)[dst == i]).sum(0) for i in range(3)]).reshape(3, h * c)
    args = [x.reshape(x.shape[0], -1) for x in (q, k, v, ef)]

    def op(impl):
        return lambda q, k, v, ef: jgo.mha_simple(g, q, k, v, num_heads=h, edge_feat=ef, return_attention=True,
                                                  impl=impl)

    check_masked_attention(op, args, alpha, want, masked, no_gradient=0)


# ---------------------------------------------------------------------------------------
# parity with the reference


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("edge", [False, True])
@pytest.mark.parametrize("heads", [1, 3])
def test_matches_reference(x64, rng, index_dtype, dtype, edge, heads):
    for g in (random_graph(rng, index_dtype=index_dtype), random_graph(rng, 8, 8, 40, index_dtype=index_dtype)):
        q, k, v, ef = inputs(rng, g, heads=heads, c=5, edge=edge, dtype=dtype)
        for concat in (True, False):
            kw = dict(num_heads=heads, concat_heads=concat, edge_feat=ef, return_attention=True)
            (out, alpha), (ref, ref_alpha) = both(g, q, k, v, **kw)
            assert out.dtype == alpha.dtype == dtype
            assert out.shape == ref.shape == (g.n_dst, 5 * heads if concat else 5)
            assert alpha.shape == ref_alpha.shape == (g.n_edges, heads)
            close(dtype)(out, ref)
            close(dtype)(alpha, ref_alpha)
            np.testing.assert_array_equal(out[g.n_dst - 1], 0)  # isolated destination
            sums = jax.ops.segment_sum(alpha, g.dst, num_segments=g.n_dst)
            has_in = np.asarray(g.in_degrees()) > 0
            np.testing.assert_allclose(sums[has_in], 1, rtol=1e-5 if dtype == np.float32 else 1e-12)
            np.testing.assert_array_equal(sums[~has_in], 0)


@pytest.mark.parametrize("c", [1, 16, 37])
def test_wide_and_narrow_heads_match_reference(rng, c):
    g = random_graph(rng, 30, 20, 200)
    q, k, v, ef = inputs(rng, g, heads=2, c=c, edge=True)
    (out, alpha), (ref, ref_alpha) = both(g, q, k, v, num_heads=2, edge_feat=ef, return_attention=True)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(alpha, ref_alpha, rtol=2e-5, atol=2e-5)


def test_impl_xla_is_the_reference(rng):
    g = random_graph(rng)
    q, k, v, ef = inputs(rng, g, edge=True)
    kw = dict(num_heads=2, edge_feat=ef, return_attention=True)
    # bit for bit on the CPU; on a GPU the jitted program's fused kernels contract multiply-adds into FMAs that
    # the eager reference's one-op kernels do not (an ulp apart: seen on an H200, 2026-11-30)
    same = (np.testing.assert_array_equal if jax.default_backend() == "cpu"
            else lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7))
    jax.tree_util.tree_map(same, jgo.mha_simple(g, q, k, v, impl="xla", **kw),
                           jgo.reference.mha_simple(g, q, k, v, **kw))


@pytest.mark.parametrize("edge", [False, True])
@pytest.mark.parametrize("bipartite", [False, True])
def test_first_order_gradients_match_reference(x64, rng, edge, bipartite):
    g = random_graph(rng, 9, 6 if bipartite else 9, 40)
    q, k, v, ef = inputs(rng, g, heads=2, c=3, edge=edge, dtype=np.float64)

    def loss(fn):
        def f(q, k, v, ef=None):
            out, alpha = fn(g, q, k, v, num_heads=2, edge_feat=ef, return_attention=True)
            return jnp.sum(jnp.sin(out)) + jnp.sum(jnp.cos(alpha) * jnp.arange(alpha.size).reshape(alpha.shape))
        return f

    args = (q, k, v) + ((ef,) if edge else ())
    argnums = tuple(range(len(args)))
    got = jax.grad(loss(jgo.mha_simple), argnums)(*args)
    want = jax.grad(loss(jgo.reference.mha_simple), argnums)(*args)
    jax.tree_util.tree_map(lambda u, w: np.testing.assert_allclose(u, w, rtol=1e-10, atol=1e-12), got, want)


def test_float32_gradients_match_reference(rng):
    g = random_graph(rng, 40, 30, 300)
    q, k, v, ef = inputs(rng, g, heads=4, c=8, edge=True)

    def loss(fn):
        return lambda q, k, v, ef: jnp.sum(fn(g, q, k, v, num_heads=4, edge_feat=ef) ** 2)

    got = jax.grad(loss(jgo.mha_simple), (0, 1, 2, 3))(q, k, v, ef)
    want = jax.grad(loss(jgo.reference.mha_simple), (0, 1, 2, 3))(q, k, v, ef)
    jax.tree_util.tree_map(lambda u, w: np.testing.assert_allclose(u, w, rtol=1e-4, atol=1e-4), got, want)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("edge", [False, True])
def test_half_precision_features(rng, dtype, edge):
    g = random_graph(rng)
    q, k, v, ef = inputs(rng, g, edge=edge)

    def op(q, k, v, ef, impl=None):
        return jgo.mha_simple(g, q, k, v, edge_feat=ef, num_heads=2, impl=impl)

    check_half_precision(op, [q, k, v, ef], "jgo_mha_simple_fwd", dtype)


# ---------------------------------------------------------------------------------------
# derivatives of every order


@pytest.mark.parametrize("edge", [False, True])
@pytest.mark.parametrize("bipartite", [False, True])
def test_check_grads_order2(x64, rng, edge, bipartite):
    g = random_graph(rng, 5, 4 if bipartite else 5, 14)
    q, k, v, ef = inputs(rng, g, heads=2, c=2, edge=edge, dtype=np.float64)
    args = [q, k, v] + ([ef] if edge else [])

    def f(*xs):
        return jgo.mha_simple(g, *xs[:3], num_heads=2, edge_feat=xs[3] if edge else None, return_attention=True)

    def mean(*xs):
        return jgo.mha_simple(g, *xs[:3], num_heads=2, concat_heads=False, edge_feat=xs[3] if edge else None)

    check_grads(f, args, order=2, modes=("fwd", "rev"), eps=1e-4)
    check_grads(mean, args, order=2, modes=("fwd", "rev"), eps=1e-4)


def test_hessian_matches_reference(x64, rng):
    g = random_graph(rng, 5, 4, 12)
    q, k, v, ef = inputs(rng, g, heads=2, c=2, edge=True, dtype=np.float64)

    def loss(fn):
        return lambda q, k, v, ef: jnp.sum(jnp.tanh(fn(g, q, k, v, num_heads=2, edge_feat=ef)) ** 2)

    h = jax.jit(jax.hessian(loss(jgo.mha_simple), (0, 1, 2, 3)))(q, k, v, ef)
    h_ref = jax.jit(jax.hessian(loss(jgo.reference.mha_simple), (0, 1, 2, 3)))(q, k, v, ef)
    jax.tree_util.tree_map(lambda u, w: np.testing.assert_allclose(u, w, rtol=1e-9, atol=1e-10), h, h_ref)


@pytest.mark.parametrize("edge", [False, True])
def test_reverse_mode_runs_the_fused_backward_kernels(rng, edge):
    g = random_graph(rng, 7, 6, 24)
    q, k, v, ef = inputs(rng, g, edge=edge)

    def loss(q, k, v, ef):
        return jnp.sum(jgo.mha_simple(g, q, k, v, num_heads=2, edge_feat=ef) ** 2)

    argnums = (0, 1, 2, 3) if edge else (0, 1, 2)
    hlo = jax.jit(jax.grad(loss, argnums)).lower(q, k, v, ef).as_text()
    for target in ("jgo_mha_simple_fwd", "jgo_mha_simple_bwd_src", "jgo_mha_simple_bwd_dst"):
        assert f'custom_call_target = "{target}"' in hlo or f"@{target}" in hlo, target
    # nothing of size E x H x C: the composition's spmm/sddmm kernels are not used
    assert "jgo_spmm" not in hlo and "jgo_sddmm" not in hlo
    # only the key/value gradients: the CSR pass alone; only the query gradient: the CSC pass alone
    hlo_kv = jax.jit(jax.grad(loss, (1, 2))).lower(q, k, v, ef).as_text()
    assert "jgo_mha_simple_bwd_src" in hlo_kv and "jgo_mha_simple_bwd_dst" not in hlo_kv
    hlo_q = jax.jit(jax.grad(loss)).lower(q, k, v, ef).as_text()
    assert "jgo_mha_simple_bwd_dst" in hlo_q and "jgo_mha_simple_bwd_src" not in hlo_q


def test_int64_indices_beyond_int32_never_wrap_onto_a_node_or_edge(rng, x64):
    """A neighbour id of 2^32 + j or an edge id of 2^32 + e (conftest.beyond_int32): the CPU kernels reject it, the
    CUDA kernels skip the edge (the reference's result on the graph without it, not that on the graph)."""
    g = random_graph(rng, 7, 7, 24, index_dtype=np.int64)
    q, k, v, ef = inputs(rng, g, heads=2, c=4, edge=True)
    bad, without, keep, match = beyond_int32(g)
    with kernel_index_error(match):
        got = jgo.mha_simple(bad, q, k, v, num_heads=2, edge_feat=ef).block_until_ready()
        want = jgo.mha_simple(without, q, k, v, num_heads=2, edge_feat=ef[keep], impl="xla")
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert not np.allclose(got, jgo.mha_simple(g, q, k, v, num_heads=2, edge_feat=ef, impl="xla"))


def test_forward_and_backward_are_bitwise_reproducible(rng):
    g = random_graph(rng, 50, 40, 600)
    q, k, v, ef = inputs(rng, g, heads=4, c=8, edge=True)
    fwd = jax.jit(lambda q, k, v, ef: jgo.mha_simple(g, q, k, v, num_heads=4, edge_feat=ef, return_attention=True))
    grad = jax.jit(jax.grad(lambda q, k, v, ef: jnp.sum(jgo.mha_simple(g, q, k, v, num_heads=4,
                                                                       edge_feat=ef) ** 3), (0, 1, 2, 3)))
    first_out, first_grad = fwd(q, k, v, ef), grad(q, k, v, ef)
    for _ in range(3):
        jax.tree_util.tree_map(np.testing.assert_array_equal, fwd(q, k, v, ef), first_out)
        jax.tree_util.tree_map(np.testing.assert_array_equal, grad(q, k, v, ef), first_grad)


def test_large_graph_uses_threads_and_matches_reference(rng):
    # big enough to split rows over several pool tasks
    g = random_graph(rng, 3000, 2000, 40000)
    q, k, v, ef = inputs(rng, g, heads=4, c=8, edge=True)
    f = lambda fn: jax.jit(jax.value_and_grad(  # noqa: E731
        lambda q, k, v, ef: jnp.sum(jnp.sin(fn(g, q, k, v, num_heads=4, edge_feat=ef))), (0, 1, 2, 3)))
    got, want = f(jgo.mha_simple)(q, k, v, ef), f(jgo.reference.mha_simple)(q, k, v, ef)
    jax.tree_util.tree_map(lambda u, w: np.testing.assert_allclose(u, w, rtol=2e-4, atol=2e-4), got, want)


# ---------------------------------------------------------------------------------------
# transforms


def test_jit_jvp_and_jacobians(rng):
    g = random_graph(rng)
    q, k, v, ef = inputs(rng, g, edge=True)
    f = lambda q, k, v, ef: jgo.mha_simple(g, q, k, v, num_heads=2, edge_feat=ef)  # noqa: E731
    r = lambda q, k, v, ef: jgo.reference.mha_simple(g, q, k, v, num_heads=2, edge_feat=ef)  # noqa: E731
    c = lambda u, w: np.testing.assert_allclose(u, w, rtol=2e-5, atol=2e-5)  # noqa: E731
    args = (q, k, v, ef)
    c(jax.jit(f)(*args), r(*args))
    c(jax.jit(lambda g, q: jgo.mha_simple(g, q, k, v, num_heads=2, edge_feat=ef))(g, q), r(*args))
    tangents = tuple(np.ones_like(x) for x in args)
    c(jax.jvp(f, args, tangents)[1], jax.jvp(r, args, tangents)[1])
    for jac in (jit_jacfwd, jit_jacrev):
        jax.tree_util.tree_map(c, jac(f, (0, 1, 2, 3))(*args), jac(r, (0, 1, 2, 3))(*args))


def test_vmap(rng):
    g = random_graph(rng)
    q, k, v, ef = inputs(rng, g, edge=True)
    f = lambda q, k, v, ef: jgo.mha_simple(g, q, k, v, num_heads=2, edge_feat=ef,  # noqa: E731
                                           return_attention=True)
    r = lambda q, k, v, ef: jgo.reference.mha_simple(g, q, k, v, num_heads=2, edge_feat=ef,  # noqa: E731
                                                     return_attention=True)
    c = lambda u, w: np.testing.assert_allclose(u, w, rtol=2e-5, atol=2e-5)  # noqa: E731
    batched = tuple(np.stack([x, 2 * x, -x]) for x in (q, k, v, ef))
    plain = (q, k, v, ef)
    for axes in ((0, None, None, None), (None, 0, None, None), (None, None, 0, None), (None, None, None, 0),
                 (0, 0, 0, 0)):
        ops = tuple(b if ax == 0 else p for ax, b, p in zip(axes, batched, plain))
        jax.tree_util.tree_map(c, jax.vmap(f, axes)(*ops), jax.vmap(r, axes)(*ops))
    loss = lambda fn: lambda q, k, v, ef: jnp.sum(fn(q, k, v, ef)[0] ** 2)  # noqa: E731
    for axes in ((0, None, 0, None), (None, 0, None, 0)):
        ops = tuple(b if ax == 0 else p for ax, b, p in zip(axes, batched, plain))
        jax.tree_util.tree_map(c, jax.vmap(jax.grad(loss(f), (0, 1, 2, 3)), axes)(*ops),
                               jax.vmap(jax.grad(loss(r), (0, 1, 2, 3)), axes)(*ops))


def test_vmap_over_graphs(rng):
    graphs = [random_graph(np.random.default_rng(s)) for s in range(3)]
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *graphs)
    q, k, v, _ = inputs(rng, graphs[0])
    out = jax.vmap(lambda g: jgo.mha_simple(g, q, k, v, num_heads=2))(stacked)
    for i, g in enumerate(graphs):
        np.testing.assert_allclose(out[i], jgo.reference.mha_simple(g, q, k, v, num_heads=2), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------
# errors


def test_trace_time_errors(rng):
    g = random_graph(rng)  # bipartite: 7 sources, 6 destinations, 24 edges
    q, k, v, ef = inputs(rng, g, edge=True)
    with pytest.raises(ValueError, match="mha_simple: query must be \\[n_dst, num_heads \\* C\\] = \\[6, 6\\]"):
        jgo.mha_simple(g, q[:, :4], k, v, num_heads=2)
    with pytest.raises(ValueError, match="mha_simple: query must have 6 rows"):
        jgo.mha_simple(g, k, k, v, num_heads=2)
    with pytest.raises(ValueError, match="mha_simple: value must be"):
        jgo.mha_simple(g, q, k, v[:, :4], num_heads=2)
    with pytest.raises(ValueError, match="mha_simple: value must have 7 rows"):
        jgo.mha_simple(g, q, k, v[:3], num_heads=2)
    with pytest.raises(ValueError, match="mha_simple: edge_feat must have 24 rows"):
        jgo.mha_simple(g, q, k, v, num_heads=2, edge_feat=ef[:3])
    with pytest.raises(ValueError, match="mha_simple: edge_feat must be"):
        jgo.mha_simple(g, q, k, v, num_heads=2, edge_feat=ef[:, :2])
    with pytest.raises(ValueError, match="mha_simple: key must be \\[n_src, num_heads \\* C\\] with num_heads=4"):
        jgo.mha_simple(g, q, k, v, num_heads=4)
    with pytest.raises(ValueError, match="num_heads must be a positive int"):
        jgo.mha_simple(g, q, k, v, num_heads=0)
    with pytest.raises(ValueError, match="mha_simple: key must have 7 rows"):
        jgo.mha_simple(g, q, k[:3], v, num_heads=2)
    with pytest.raises(TypeError, match="mha_simple: value must be a floating-point array"):
        jgo.mha_simple(g, q, k, v.astype(np.int32), num_heads=2)
    with pytest.raises(TypeError, match="mha_simple: g must be a jaxgraphops.Graph"):
        jgo.mha_simple((g.src, g.dst), q, k, v, num_heads=2)
    with pytest.raises(ValueError, match="impl must be one of"):
        jgo.mha_simple(g, q, k, v, num_heads=2, impl="cuda")


def test_out_of_range_index_reaching_the_kernel_is_an_error(rng):
    g = random_graph(rng, 7, 7, 24)
    q, k, v, _ = inputs(rng, g)

    def corrupt(field, pos, value):
        arrays = {n: jnp.asarray(getattr(g, n)) for n in ("src", "dst", "csc_offsets", "csc_src", "csc_eid",
                                                             "csr_offsets", "csr_dst", "csr_eid")}
        arrays[field] = arrays[field].at[pos].set(value)
        return kernel_only(jgo.Graph(*arrays.values(), g.n_src, g.n_dst, validate=False))  # to the kernels' own checks

    bad = corrupt("csc_src", 3, 99)
    eid = int(g.csc_eid[3])
    with kernel_index_error(f".*mha_simple_fwd: edge {eid} has node index 99"):
        jgo.mha_simple(bad, q, k, v, num_heads=2).block_until_ready()
    bad_csr = corrupt("csr_dst", 5, -1)
    eid = int(g.csr_eid[5])
    with kernel_index_error(f".*mha_simple_bwd_src: edge {eid} has node index -1"):
        jax.grad(lambda k: jgo.mha_simple(bad_csr, q, k, v, num_heads=2).sum())(k).block_until_ready()
    bad_eid = corrupt("csc_eid", 0, 24)
    with kernel_index_error(".*mha_simple_fwd: edge id 24 at position 0 is out of range"):
        jgo.mha_simple(bad_eid, q, k, v, num_heads=2).block_until_ready()
    # the process survives and keeps working
    np.testing.assert_allclose(jgo.mha_simple(g, q, k, v, num_heads=2),
                               jgo.reference.mha_simple(g, q, k, v, num_heads=2), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------
# threading


@pytest.mark.skipif(jgo.kernel_platform() != "cpu", reason="a deadlock of the CPU kernels on XLA's thread pool; "
                    "the CUDA handlers do not use it (and emulated, this graph takes minutes)")
def test_concurrent_backward_passes_do_not_deadlock(rng):
    # XLA runs independent kernels at the same time on its intra-op pool (here the CSC and CSR
    # backward passes, next to the parallel elementwise product); each kernel splits its rows over
    # that pool, and one waiting for a task queued behind another waiting kernel used to deadlock
    n, e, heads, c = 10_000, 200_000, 8, 16
    g = jgo.Graph.from_edges(rng.integers(0, n, e), rng.integers(0, n, e), n, n)
    x = jnp.asarray(rng.normal(size=(n, heads * c)).astype(np.float32))
    a = jnp.asarray(1 + rng.normal(size=heads * c).astype(np.float32) / 4)
    step = jax.jit(jax.value_and_grad(lambda x, a: jnp.sum(jgo.mha_simple(g, x, x * a, x, num_heads=heads) ** 2),
                                      (0, 1)))
    results = []

    def run():
        for _ in range(40):
            results.append(jax.block_until_ready(step(x, a)))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive(), f"the kernels deadlocked after {len(results)} steps"
    jax.tree_util.tree_map(np.testing.assert_array_equal, results[-1], results[0])


def test_attention_weights_of_an_infinite_query_with_edge_features():
    """An infinite query meets ``key + edge_feat`` in one dot, also in the returned attention weights: with
    ``key = -1`` and ``edge_feat = 2`` the logit is ``-inf``, weight 0, not ``-inf * -1 + -inf * 2 = NaN``
    (long fuzz profile, seed 23675). Oracle: the reference and the hand-computed weights."""
    g = jgo.Graph.from_edges(np.array([0, 1]), np.array([0, 0]), 2, 1)
    q = jnp.array([[-np.inf, 0.0]])
    k = jnp.array([[-1.0, 0.0], [1.0, 0.0]])
    ef = jnp.array([[2.0, 0.0], [-3.0, 0.0]])  # k + ef: [1, 0] (logit -inf) and [-2, 0] (logit +inf)
    v = jnp.ones((2, 2))
    for impl in (None, "xla"):
        _, alpha = jgo.mha_simple(g, q, k, v, edge_feat=ef, return_attention=True, impl=impl)
        np.testing.assert_array_equal(np.asarray(alpha)[:, 0], [np.nan, np.nan], err_msg=str(impl))  # a +inf logit
    ef = jnp.array([[2.0, 0.0], [0.5, 0.0]])  # k + ef: [1, 0] and [1.5, 0]: both logits -inf, weights 0
    for impl in (None, "xla"):
        _, alpha = jgo.mha_simple(g, q, k, v, edge_feat=ef, return_attention=True, impl=impl)
        np.testing.assert_array_equal(np.asarray(alpha)[:, 0], [0, 0], err_msg=str(impl))


@pytest.mark.parametrize("impl", [None, "xla"])
def test_attention_weights_of_an_empty_graph(impl):
    """No nodes, no edges: ``[0, H*C]`` outputs and ``[0, H]`` weights (the reference's reshape of 0 rows once
    divided by zero: the long fuzz's seeds 28130-33379)."""
    g = jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 0, 0)
    q = jnp.zeros((0, 6))
    out, alpha = jgo.mha_simple(g, q, q, q, num_heads=2, return_attention=True, impl=impl)
    assert out.shape == (0, 6) and alpha.shape == (0, 2)
