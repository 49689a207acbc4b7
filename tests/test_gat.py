"""mha_gat against the pure-JAX reference and literal cases; derivatives of every order; transforms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import (
    MASK_ORDERS, beyond_int32, check_grads, check_half_precision, check_masked_attention, jit_jacfwd, jit_jacrev,
    kernel_index_error, kernel_only, masked_attention_graph, random_graph, segment_softmax_np,
)

import jaxgraphops as jgo


def inputs(rng, g, heads=2, c=3, edge=False, bipartite=False, dtype=np.float32):
    f = heads * c
    x_src = rng.normal(size=(g.n_src, f)).astype(dtype)
    x_dst = rng.normal(size=(g.n_dst, f)).astype(dtype) if bipartite else None
    ef = rng.normal(size=(g.n_edges, f)).astype(dtype) if edge else None
    a = rng.normal(size=((3 if edge else 2) * f,)).astype(dtype)
    return x_src, a, x_dst, ef


def both(g, x_src, a, **kw):
    return jgo.mha_gat(g, x_src, a, **kw), jgo.mha_gat(g, x_src, a, impl="xla", **kw)


def close(dtype):
    tol = 1e-5 if dtype == np.float32 else 1e-12
    return lambda a, b: np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# ---------------------------------------------------------------------------------------
# literal cases


def test_literal_single_edge_self_loop_and_zero_in_degree():
    # 0 -> 1, 1 -> 1 (self loop); node 0 and node 2 receive nothing
    g = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 1]), 3, 3)
    x = jnp.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    # one head, C=2: a_src = (1, 0), a_dst = (0, 0): z_0 = 1, z_1 = 3 (LeakyReLU of positive logits)
    a = jnp.array([1.0, 0.0, 0.0, 0.0])
    out, alpha = jgo.mha_gat(g, x, a, return_attention=True)
    w = np.exp([1.0, 3.0]) / np.exp([1.0, 3.0]).sum()
    np.testing.assert_allclose(alpha[:, 0], w, rtol=1e-6)
    np.testing.assert_allclose(out, [[0, 0], w[0] * np.array([1.0, 2.0]) + w[1] * np.array([3.0, 4.0]), [0, 0]],
                               rtol=1e-6)
    # negative logits go through the slope: z = -0.2 * 1 and -0.2 * 3
    out_neg, alpha_neg = jgo.mha_gat(g, x, -a, return_attention=True)
    w = np.exp([-0.2, -0.6]) / np.exp([-0.2, -0.6]).sum()
    np.testing.assert_allclose(alpha_neg[:, 0], w, rtol=1e-6)
    # a single in-edge gets all the attention
    g1 = jgo.Graph.from_edges(np.array([2]), np.array([0]), 3, 3)
    out1, alpha1 = jgo.mha_gat(g1, x, a, return_attention=True)
    np.testing.assert_array_equal(alpha1, [[1.0]])
    np.testing.assert_array_equal(out1, [[5.0, 6.0], [0, 0], [0, 0]])


def test_literal_heads_concat_and_mean():
    # two heads of C=1; node 1 receives from 0 and 2
    g = jgo.Graph.from_edges(np.array([0, 2]), np.array([1, 1]), 3, 3)
    x = jnp.array([[1.0, 10.0], [0.0, 0.0], [3.0, 30.0]])
    # head 0 attends uniformly (zero weights); head 1 has z = x_src[j, 1] / 10 (positive: 1 and 3)
    a = jnp.array([0.0, 0.1, 0.0, 0.0])
    out, alpha = jgo.mha_gat(g, x, a, num_heads=2, return_attention=True)
    w1 = np.exp([1.0, 3.0]) / np.exp([1.0, 3.0]).sum()
    np.testing.assert_allclose(alpha, [[0.5, w1[0]], [0.5, w1[1]]], rtol=1e-6)
    head0, head1 = 2.0, w1 @ np.array([10.0, 30.0])
    np.testing.assert_allclose(out, [[0, 0], [head0, head1], [0, 0]], rtol=1e-6)
    mean = jgo.mha_gat(g, x, a, num_heads=2, concat_heads=False)
    np.testing.assert_allclose(mean, [[0], [(head0 + head1) / 2], [0]], rtol=1e-6)


def test_zero_in_degree_gradients_are_zero(rng):
    g = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 1]), 3, 3)
    x, a, _, _ = inputs(rng, g)
    # only the isolated destinations 0 and 2 feed the loss: every gradient is 0
    gx, ga = jax.grad(lambda x, a: jgo.mha_gat(g, x, a, num_heads=2)[jnp.array([0, 2])].sum(), (0, 1))(x, a)
    np.testing.assert_array_equal(gx, 0)
    np.testing.assert_array_equal(ga, 0)


def test_zero_edge_graph(rng):
    g = jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 3, 3)
    x, a, _, ef = inputs(rng, g, edge=True)
    out, alpha = jgo.mha_gat(g, x, a, num_heads=2, edge_feat=ef, return_attention=True)
    np.testing.assert_array_equal(out, np.zeros((3, 6)))
    assert alpha.shape == (0, 2)
    gx = jax.grad(lambda x: jgo.mha_gat(g, x, a, num_heads=2, edge_feat=ef).sum())(x)
    np.testing.assert_array_equal(gx, 0)


@pytest.mark.parametrize("order", MASK_ORDERS)
def test_minus_inf_logits_in_any_edge_order(order):
    """A -inf logit weighs 0 without poisoning its row; a destination whose logits are all -inf is one without
    in-edges. The mask is an edge feature whose score overflows to -inf (finite inputs, finite gradients)."""
    rng = np.random.default_rng(0)
    h, c = 2, 2
    g, src, dst, masked = masked_attention_graph(order)
    x = rng.normal(size=(5, h * c)).astype(np.float32)
    xd = rng.normal(size=(3, h * c)).astype(np.float32)
    ef = 0.1 * rng.normal(size=(5, h, c)).astype(np.float32)
    ef[..., 0] = np.where(masked, -3e38, ef[..., 0])
    ef = ef.reshape(5, h * c)
    a = rng.normal(size=(3, h, c)).astype(np.float32)
    a[2, :, 0] = 10.0  # -3e38 * 10 overflows: the score of a masked edge is -inf
    with np.errstate(over="ignore"):
        s_src, s_dst, s_edge = ((v.reshape(-1, h, c) * a[i]).sum(-1) for i, v in enumerate((x, xd, ef)))
    p = s_src[src] + s_dst[dst] + s_edge
    np.testing.assert_array_equal(np.isneginf(p), masked)
    alpha, _ = segment_softmax_np(np.where(p > 0, p, 0.2 * p), dst, 3)
    want = np.stack([(alpha[dst == i, :, None] * x.reshape(5, h, c)[src[dst == i]]).sum(0) for i in range(3)])

    def op(impl):
        return lambda x, a, xd, ef: jgo.mha_gat(g, x, a, x_dst=xd, num_heads=h, edge_feat=ef, return_attention=True,
                                                impl=impl)

    check_masked_attention(op, [x, a.ravel(), xd, ef], alpha, want.reshape(3, h * c), masked, no_gradient=2)


# ---------------------------------------------------------------------------------------
# parity with the reference


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("edge", [False, True])
@pytest.mark.parametrize("heads", [1, 3])
def test_matches_reference(x64, rng, index_dtype, dtype, edge, heads):
    for g, bip in ((random_graph(rng, index_dtype=index_dtype), True),
                   (random_graph(rng, 8, 8, 40, index_dtype=index_dtype), False)):
        x, a, xd, ef = inputs(rng, g, heads=heads, c=4, edge=edge, bipartite=bip, dtype=dtype)
        for concat in (True, False):
            kw = dict(x_dst=xd, num_heads=heads, concat_heads=concat, edge_feat=ef, return_attention=True,
                      negative_slope=0.1)
            (out, alpha), (ref, ref_alpha) = both(g, x, a, **kw)
            assert out.dtype == dtype and out.shape == ref.shape == (g.n_dst, 4 * heads if concat else 4)
            assert alpha.shape == ref_alpha.shape == (g.n_edges, heads)
            close(dtype)(out, ref)
            close(dtype)(alpha, ref_alpha)
            np.testing.assert_array_equal(out[g.n_dst - 1], 0)  # isolated destination
            # the attention of every destination's in-edges sums to 1 per head
            sums = jax.ops.segment_sum(alpha, g.dst, num_segments=g.n_dst)
            has_in = np.asarray(g.in_degrees()) > 0
            np.testing.assert_allclose(sums[has_in], 1, rtol=1e-5 if dtype == np.float32 else 1e-12)
            np.testing.assert_array_equal(sums[~has_in], 0)


@pytest.mark.parametrize("edge", [False, True])
def test_first_order_gradients_match_reference(x64, rng, edge):
    g = random_graph(rng, 9, 6, 40)
    x, a, xd, ef = inputs(rng, g, heads=2, c=3, edge=edge, bipartite=True, dtype=np.float64)
    args = (x, a, xd) + ((ef,) if edge else ())

    def loss(impl):
        def f(x, a, xd, ef=None):
            out, alpha = jgo.mha_gat(g, x, a, x_dst=xd, num_heads=2, edge_feat=ef, return_attention=True, impl=impl)
            return jnp.sum(jnp.sin(out)) + jnp.sum(jnp.cos(alpha) * jnp.arange(alpha.size).reshape(alpha.shape))
        return f

    argnums = tuple(range(len(args)))
    got = jax.grad(loss(None), argnums)(*args)
    want = jax.grad(loss("xla"), argnums)(*args)
    jax.tree_util.tree_map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-12), got, want)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("edge", [False, True])
def test_half_precision_features(rng, dtype, edge):
    g = random_graph(rng)
    x, a, xd, ef = inputs(rng, g, bipartite=True, edge=edge)

    def op(x, a, xd, ef, impl=None):
        return jgo.mha_gat(g, x, a, x_dst=xd, edge_feat=ef, num_heads=2, impl=impl)

    check_half_precision(op, [x, a, xd, ef], "jgo_gat_fwd", dtype)


# ---------------------------------------------------------------------------------------
# derivatives of every order


@pytest.mark.parametrize("edge", [False, True])
@pytest.mark.parametrize("bipartite", [False, True])
def test_check_grads_order2(x64, rng, edge, bipartite):
    g = random_graph(rng, 5, 5 if not bipartite else 4, 14)
    x, a, xd, ef = inputs(rng, g, heads=2, c=2, edge=edge, bipartite=bipartite, dtype=np.float64)
    args = [x, a] + ([xd] if bipartite else []) + ([ef] if edge else [])

    def f(*vs):
        it = iter(vs)
        x_, a_ = next(it), next(it)
        xd_ = next(it) if bipartite else None
        ef_ = next(it) if edge else None
        out, alpha = jgo.mha_gat(g, x_, a_, x_dst=xd_, num_heads=2, edge_feat=ef_, return_attention=True)
        return out, alpha

    check_grads(f, args, order=2, modes=("fwd", "rev"), eps=1e-4)
    mean = lambda *vs: jgo.mha_gat(g, vs[0], vs[1], x_dst=vs[2] if bipartite else None, num_heads=2,  # noqa: E731
                                   concat_heads=False, edge_feat=vs[-1] if edge else None)
    check_grads(mean, args, order=2, modes=("fwd", "rev"), eps=1e-4)


def test_hessian_matches_reference(x64, rng):
    g = random_graph(rng, 5, 5, 12)
    x, a, _, ef = inputs(rng, g, heads=2, c=2, edge=True, dtype=np.float64)

    def loss(impl):
        return lambda x, a, ef: jnp.sum(jnp.tanh(jgo.mha_gat(g, x, a, num_heads=2, edge_feat=ef, impl=impl)) ** 2)

    h = jax.jit(jax.hessian(loss(None), (0, 1, 2)))(x, a, ef)
    h_ref = jax.jit(jax.hessian(loss("xla"), (0, 1, 2)))(x, a, ef)
    jax.tree_util.tree_map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-9, atol=1e-10), h, h_ref)


def test_reverse_mode_runs_the_fused_backward_kernels(rng):
    g = random_graph(rng, 7, 7, 24)
    x, a, _, ef = inputs(rng, g, edge=True)

    def loss(x, a, ef):
        return jnp.sum(jgo.mha_gat(g, x, a, num_heads=2, edge_feat=ef) ** 2)

    hlo = jax.jit(jax.grad(loss, (0, 1, 2))).lower(x, a, ef).as_text()
    for target in ("jgo_gat_fwd", "jgo_gat_bwd_src", "jgo_gat_bwd_dst"):
        assert f'custom_call_target = "{target}"' in hlo or f"@{target}" in hlo, target
    # nothing of size E x H x C: the composition's spmm/sddmm kernels are not used
    assert "jgo_spmm" not in hlo and "jgo_sddmm" not in hlo


# ---------------------------------------------------------------------------------------
# transforms


def test_jit_jvp_and_jacobians(rng):
    g = random_graph(rng)
    x, a, xd, ef = inputs(rng, g, edge=True, bipartite=True)
    f = lambda x, a, ef: jgo.mha_gat(g, x, a, x_dst=xd, num_heads=2, edge_feat=ef)  # noqa: E731
    r = lambda x, a, ef: jgo.mha_gat(g, x, a, x_dst=xd, num_heads=2, edge_feat=ef, impl="xla")  # noqa: E731
    c = lambda u, v: np.testing.assert_allclose(u, v, rtol=2e-5, atol=2e-5)  # noqa: E731
    c(jax.jit(f)(x, a, ef), r(x, a, ef))
    c(jax.jit(lambda g, x: jgo.mha_gat(g, x, a, x_dst=xd, num_heads=2, edge_feat=ef))(g, x), r(x, a, ef))
    tangents = (np.ones_like(x), np.ones_like(a), np.ones_like(ef))
    c(jax.jvp(f, (x, a, ef), tangents)[1], jax.jvp(r, (x, a, ef), tangents)[1])
    for jac in (jit_jacfwd, jit_jacrev):
        jax.tree_util.tree_map(c, jac(f, (0, 1, 2))(x, a, ef), jac(r, (0, 1, 2))(x, a, ef))


def test_vmap(rng):
    g = random_graph(rng)
    x, a, xd, ef = inputs(rng, g, edge=True, bipartite=True)
    f = lambda x, a, ef: jgo.mha_gat(g, x, a, x_dst=xd, num_heads=2, edge_feat=ef, return_attention=True)  # noqa: E731
    r = lambda x, a, ef: jgo.mha_gat(g, x, a, x_dst=xd, num_heads=2, edge_feat=ef, return_attention=True,  # noqa: E731
                                     impl="xla")
    c = lambda u, v: np.testing.assert_allclose(u, v, rtol=2e-5, atol=2e-5)  # noqa: E731
    xb, ab, eb = np.stack([x, 2 * x, -x]), np.stack([a, -a, a + 1]), np.stack([ef, ef * 3, ef + 1])
    for axes, operands in (((0, None, None), (xb, a, ef)), ((None, 0, None), (x, ab, ef)),
                           ((None, None, 0), (x, a, eb)), ((0, 0, 0), (xb, ab, eb))):
        jax.tree_util.tree_map(c, jax.vmap(f, axes)(*operands), jax.vmap(r, axes)(*operands))
    loss = lambda fn: lambda x, a, ef: jnp.sum(fn(x, a, ef)[0] ** 2)  # noqa: E731
    # grad a sums terms of either sign over every edge: an entry near 0 carries the rounding of the large terms, so
    # its tolerance scales with the gradient's largest entry (an H200's sum order left 2.6e-5 at 0.065, 2026-11-30)
    got, want = (jax.vmap(jax.grad(loss(fn), (0, 1)), (0, 0, None))(xb, ab, ef)[1] for fn in (f, r))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * max(1.0, float(np.abs(want).max())))


def test_vmap_over_graphs(rng):
    graphs = [random_graph(np.random.default_rng(s)) for s in range(3)]
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *graphs)
    x, a, xd, _ = inputs(rng, graphs[0], bipartite=True)
    out = jax.vmap(lambda g: jgo.mha_gat(g, x, a, x_dst=xd, num_heads=2))(stacked)
    for i, g in enumerate(graphs):
        np.testing.assert_allclose(out[i], jgo.mha_gat(g, x, a, x_dst=xd, num_heads=2, impl="xla"), rtol=1e-5,
                                   atol=1e-6)


# ---------------------------------------------------------------------------------------
# errors


def test_trace_time_errors(rng):
    g = random_graph(rng)  # bipartite: 7 sources, 6 destinations
    x, a, xd, ef = inputs(rng, g, bipartite=True, edge=True)
    with pytest.raises(ValueError, match="attn_weights must have shape \\(12,\\)"):
        jgo.mha_gat(g, x, a, x_dst=xd, num_heads=2)
    with pytest.raises(ValueError, match="attn_weights must have shape \\(18,\\)"):
        jgo.mha_gat(g, x, a[:12], x_dst=xd, num_heads=2, edge_feat=ef)
    with pytest.raises(ValueError, match="x_dst is required for a bipartite graph"):
        jgo.mha_gat(g, x, a[:12], num_heads=2)
    with pytest.raises(ValueError, match="x_dst must be"):
        jgo.mha_gat(g, x, a[:12], x_dst=xd[:, :4], num_heads=2)
    with pytest.raises(ValueError, match="edge_feat must have 24 rows"):
        jgo.mha_gat(g, x, a, x_dst=xd, num_heads=2, edge_feat=ef[:3])
    with pytest.raises(ValueError, match="x_src must be"):
        jgo.mha_gat(g, x, a[:12], x_dst=xd, num_heads=4)
    with pytest.raises(ValueError, match="num_heads must be a positive int"):
        jgo.mha_gat(g, x, a[:12], x_dst=xd, num_heads=0)
    with pytest.raises(ValueError, match="x_src must have 7 rows"):
        jgo.mha_gat(g, x[:3], a[:12], x_dst=xd, num_heads=2)
    with pytest.raises(TypeError, match="x_src must be a floating-point array"):
        jgo.mha_gat(g, x.astype(np.int32), a[:12], x_dst=xd, num_heads=2)
    with pytest.raises(ValueError, match="impl must be one of"):
        jgo.mha_gat(g, x, a[:12], x_dst=xd, num_heads=2, impl="cuda")


def test_out_of_range_index_reaching_the_kernel_is_an_error(rng):
    g = random_graph(rng, 7, 7, 24)
    bad = jgo.Graph(*(jnp.asarray(v) for v in (g.src, g.dst, g.csc_offsets, g.csc_src.at[3].set(99), g.csc_eid,
                                               g.csr_offsets, g.csr_dst, g.csr_eid)), g.n_src, g.n_dst, validate=False)
    bad = kernel_only(bad)  # past the Python check, to the kernels' own
    x, a, _, _ = inputs(rng, g)
    eid = int(g.csc_eid[3])
    with kernel_index_error(f".*edge {eid} has node index 99"):
        jgo.mha_gat(bad, x, a, num_heads=2).block_until_ready()
    bad_csr = jgo.Graph(*(jnp.asarray(v) for v in (g.src, g.dst, g.csc_offsets, g.csc_src, g.csc_eid,
                                                   g.csr_offsets, g.csr_dst.at[5].set(-1), g.csr_eid)), g.n_src,
                        g.n_dst, validate=False)
    bad_csr = kernel_only(bad_csr)  # past the Python check, to the kernels' own
    eid = int(g.csr_eid[5])
    with kernel_index_error(f".*edge {eid} has node index -1"):
        jax.grad(lambda x: jgo.mha_gat(bad_csr, x, a, num_heads=2).sum())(x).block_until_ready()
    # the process survives and keeps working
    np.testing.assert_allclose(jgo.mha_gat(g, x, a, num_heads=2), jgo.mha_gat(g, x, a, num_heads=2, impl="xla"),
                               rtol=1e-5, atol=1e-6)


def test_int64_indices_beyond_int32_never_wrap_onto_a_node_or_edge(rng, x64):
    """The CUDA kernels read an int64 graph as its int32 view (ffi/cuda/int32_graph.cuh): a neighbour id of 2^32 + j
    or an edge id of 2^32 + e is out of range there as here, never j or e. The CPU kernels reject it; the CUDA
    kernels skip the edge: the result of the graph without it (the reference's), not that of the graph."""
    g = random_graph(rng, 7, 7, 24, index_dtype=np.int64)
    x, a, _, ef = inputs(rng, g, heads=2, c=4, edge=True)
    bad, without, keep, match = beyond_int32(g)
    with kernel_index_error(match):
        got = jgo.mha_gat(bad, x, a, num_heads=2, edge_feat=ef).block_until_ready()
        want = jgo.mha_gat(without, x, a, num_heads=2, edge_feat=ef[keep], impl="xla")
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert not np.allclose(got, jgo.mha_gat(g, x, a, num_heads=2, edge_feat=ef, impl="xla"))


def test_forward_and_backward_are_bitwise_reproducible(rng):
    """No atomics anywhere: every output element is written by one thread, in a fixed order."""
    g = random_graph(rng, 50, 40, 600)
    x, a, xd, ef = inputs(rng, g, heads=4, c=8, edge=True, bipartite=True)

    def op(x, a, xd, ef):
        return jgo.mha_gat(g, x, a, x_dst=xd, edge_feat=ef, num_heads=4, return_attention=True)

    fwd = jax.jit(op)
    grad = jax.jit(jax.grad(lambda *args: jnp.sum(op(*args)[0] ** 3), (0, 1, 2, 3)))
    first_out, first_grad = fwd(x, a, xd, ef), grad(x, a, xd, ef)
    for _ in range(3):
        jax.tree_util.tree_map(np.testing.assert_array_equal, fwd(x, a, xd, ef), first_out)
        jax.tree_util.tree_map(np.testing.assert_array_equal, grad(x, a, xd, ef), first_grad)
