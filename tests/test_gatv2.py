"""mha_gat_v2 against the pure-JAX reference and literal cases; derivatives of every order; transforms."""

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
    a = rng.normal(size=(f,)).astype(dtype)
    return x_src, x_dst, a, ef


def both(g, x_src, x_dst, a, **kw):
    return jgo.mha_gat_v2(g, x_src, x_dst, a, **kw), jgo.mha_gat_v2(g, x_src, x_dst, a, impl="xla", **kw)


def close(dtype):
    tol = 1e-5 if dtype == np.float32 else 1e-12
    return lambda a, b: np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def leaky(t, slope=0.2):
    return np.where(t > 0, t, slope * t)


# ---------------------------------------------------------------------------------------
# literal cases


def test_literal_single_edge_self_loop_and_zero_in_degree():
    # 0 -> 1, 1 -> 1 (self loop); nodes 0 and 2 receive nothing
    g = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 1]), 3, 3)
    x = np.array([[1.0, -2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    a = np.array([1.0, 0.5], np.float32)
    out, alpha = jgo.mha_gat_v2(g, x, None, a, return_attention=True)
    z = np.array([a @ leaky(x[0] + x[1]), a @ leaky(x[1] + x[1])])
    w = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    np.testing.assert_allclose(alpha[:, 0], w, rtol=1e-6)
    np.testing.assert_allclose(out, [[0, 0], w[0] * x[0] + w[1] * x[1], [0, 0]], rtol=1e-6)
    # the LeakyReLU acts per element before the dot product: here x[0] + x[1] = (4, 2) > 0 and
    # x_dst = (-10, 0) makes (-6, -2) < 0 for edge 0 -> 1
    xd = np.array([[0.0, 0.0], [-10.0, -2.0], [0.0, 0.0]], np.float32)
    out2, alpha2 = jgo.mha_gat_v2(g, x, xd, a, negative_slope=0.1, return_attention=True)
    z2 = np.array([a @ leaky(x[0] + xd[1], 0.1), a @ leaky(x[1] + xd[1], 0.1)])
    w2 = np.exp(z2) / np.exp(z2).sum()
    np.testing.assert_allclose(alpha2[:, 0], w2, rtol=1e-6)
    np.testing.assert_allclose(out2[1], w2[0] * x[0] + w2[1] * x[1], rtol=1e-6)
    # a single in-edge gets all the attention
    g1 = jgo.Graph.from_edges(np.array([2]), np.array([0]), 3, 3)
    out1, alpha1 = jgo.mha_gat_v2(g1, x, None, a, return_attention=True)
    np.testing.assert_array_equal(alpha1, [[1.0]])
    np.testing.assert_array_equal(out1, [[5.0, 6.0], [0, 0], [0, 0]])


def test_literal_heads_concat_and_mean_and_edge_feat():
    # two heads of C=1; node 1 receives from 0 and 2
    g = jgo.Graph.from_edges(np.array([0, 2]), np.array([1, 1]), 3, 3)
    x = np.array([[1.0, 10.0], [0.0, 0.0], [3.0, 30.0]], np.float32)
    # head 0 attends uniformly (zero weight); head 1 has z = 0.1 * leaky(x_src[j, 1] + x_dst[1, 1]) = 1 and 3
    a = np.array([0.0, 0.1], np.float32)
    out, alpha = jgo.mha_gat_v2(g, x, None, a, num_heads=2, return_attention=True)
    w1 = np.exp([1.0, 3.0]) / np.exp([1.0, 3.0]).sum()
    np.testing.assert_allclose(alpha, [[0.5, w1[0]], [0.5, w1[1]]], rtol=1e-6)
    head0, head1 = 2.0, w1 @ np.array([10.0, 30.0])
    np.testing.assert_allclose(out, [[0, 0], [head0, head1], [0, 0]], rtol=1e-6)
    mean = jgo.mha_gat_v2(g, x, None, a, num_heads=2, concat_heads=False)
    np.testing.assert_allclose(mean, [[0], [(head0 + head1) / 2], [0]], rtol=1e-6)
    # edge features add inside the activation: +20 on edge 0 (head 1) makes both logits 3
    ef = np.array([[0.0, 20.0], [0.0, 0.0]], np.float32)
    out_e, alpha_e = jgo.mha_gat_v2(g, x, None, a, num_heads=2, edge_feat=ef, return_attention=True)
    np.testing.assert_allclose(alpha_e, [[0.5, 0.5], [0.5, 0.5]], rtol=1e-6)
    np.testing.assert_allclose(out_e[1], [2.0, 20.0], rtol=1e-6)


def test_zero_in_degree_gradients_are_zero(rng):
    g = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 1]), 3, 3)
    x, _, a, _ = inputs(rng, g)
    xd = rng.normal(size=x.shape).astype(np.float32)
    grads = jax.grad(lambda x, xd, a: jgo.mha_gat_v2(g, x, xd, a, num_heads=2)[jnp.array([0, 2])].sum(),
                     (0, 1, 2))(x, xd, a)
    for gr in grads:
        np.testing.assert_array_equal(gr, 0)


def test_zero_edge_graph(rng):
    g = jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 3, 3)
    x, _, a, ef = inputs(rng, g, edge=True)
    out, alpha = jgo.mha_gat_v2(g, x, None, a, num_heads=2, edge_feat=ef, return_attention=True)
    np.testing.assert_array_equal(out, np.zeros((3, 6)))
    assert alpha.shape == (0, 2)
    gx, ga = jax.grad(lambda x, a: jgo.mha_gat_v2(g, x, None, a, num_heads=2, edge_feat=ef).sum(), (0, 1))(x, a)
    np.testing.assert_array_equal(gx, 0)
    np.testing.assert_array_equal(ga, 0)


@pytest.mark.parametrize("order", MASK_ORDERS)
def test_minus_inf_logits_in_any_edge_order(order):
    """A -inf logit weighs 0 without poisoning its row; a destination whose logits are all -inf is one without
    in-edges. The mask is an edge feature of -3e38 whose logit overflows to -inf (finite inputs and gradients)."""
    rng = np.random.default_rng(0)
    h, c = 2, 2
    g, src, dst, masked = masked_attention_graph(order)
    ef = 0.1 * rng.normal(size=(5, h, c)).astype(np.float32)
    ef[..., 0] = np.where(masked, -3e38, ef[..., 0])
    xs = rng.normal(size=(5, h, c)).astype(np.float32)
    xd = rng.normal(size=(3, h, c)).astype(np.float32)
    a = rng.normal(size=(h, c)).astype(np.float32)
    a[:, 0] = 10.0  # 10 * leaky_relu(-3e38) overflows
    with np.errstate(over="ignore"):
        z = (leaky(xs[src] + xd[dst] + ef) * a).sum(-1)
    np.testing.assert_array_equal(np.isneginf(z), masked)
    alpha, _ = segment_softmax_np(z, dst, 3)
    want = np.stack([(alpha[dst == i, :, None] * xs[src[dst == i]]).sum(0) for i in range(3)]).reshape(3, h * c)
    args = [xs.reshape(5, h * c), xd.reshape(3, h * c), a.ravel(), ef.reshape(5, h * c)]

    def op(impl):
        return lambda xs, xd, a, ef: jgo.mha_gat_v2(g, xs, xd, a, num_heads=h, edge_feat=ef, return_attention=True,
                                                    impl=impl)

    check_masked_attention(op, args, alpha, want, masked, no_gradient=1)


# ---------------------------------------------------------------------------------------
# parity with the reference


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("edge", [False, True])
@pytest.mark.parametrize("heads", [1, 3])
def test_matches_reference(x64, rng, index_dtype, dtype, edge, heads):
    for g, bip in ((random_graph(rng, index_dtype=index_dtype), True),
                   (random_graph(rng, 8, 8, 40, index_dtype=index_dtype), False)):
        x, xd, a, ef = inputs(rng, g, heads=heads, c=5, edge=edge, bipartite=bip, dtype=dtype)
        for concat in (True, False):
            kw = dict(num_heads=heads, concat_heads=concat, edge_feat=ef, return_attention=True, negative_slope=0.1)
            (out, alpha), (ref, ref_alpha) = both(g, x, xd, a, **kw)
            assert out.dtype == dtype and out.shape == ref.shape == (g.n_dst, 5 * heads if concat else 5)
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
    x, xd, a, ef = inputs(rng, g, heads=2, c=c, edge=True, bipartite=True)
    (out, alpha), (ref, ref_alpha) = both(g, x, xd, a, num_heads=2, edge_feat=ef, return_attention=True)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(alpha, ref_alpha, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("edge", [False, True])
@pytest.mark.parametrize("bipartite", [False, True])
def test_first_order_gradients_match_reference(x64, rng, edge, bipartite):
    g = random_graph(rng, 9, 6 if bipartite else 9, 40)
    x, xd, a, ef = inputs(rng, g, heads=2, c=3, edge=edge, bipartite=bipartite, dtype=np.float64)

    def loss(impl):
        def f(x, a, xd=None, ef=None):
            out, alpha = jgo.mha_gat_v2(g, x, xd, a, num_heads=2, edge_feat=ef, return_attention=True, impl=impl)
            return jnp.sum(jnp.sin(out)) + jnp.sum(jnp.cos(alpha) * jnp.arange(alpha.size).reshape(alpha.shape))
        return f

    args = (x, a, xd, ef)
    argnums = tuple(i for i, v in enumerate(args) if v is not None)
    got = jax.grad(loss(None), argnums)(*args)
    want = jax.grad(loss("xla"), argnums)(*args)
    jax.tree_util.tree_map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-12), got, want)


def test_float32_gradients_match_reference(rng):
    g = random_graph(rng, 40, 30, 300)
    x, xd, a, ef = inputs(rng, g, heads=4, c=8, edge=True, bipartite=True)

    def loss(impl):
        return lambda x, xd, a, ef: jnp.sum(jgo.mha_gat_v2(g, x, xd, a, num_heads=4, edge_feat=ef, impl=impl) ** 2)

    got = jax.grad(loss(None), (0, 1, 2, 3))(x, xd, a, ef)
    want = jax.grad(loss("xla"), (0, 1, 2, 3))(x, xd, a, ef)
    jax.tree_util.tree_map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-4), got, want)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("edge", [False, True])
def test_half_precision_features(rng, dtype, edge):
    g = random_graph(rng)
    x, xd, a, ef = inputs(rng, g, bipartite=True, edge=edge)

    def op(x, xd, a, ef, impl=None):
        return jgo.mha_gat_v2(g, x, xd, a, edge_feat=ef, num_heads=2, impl=impl)

    check_half_precision(op, [x, xd, a, ef], "jgo_gatv2_fwd", dtype)


# ---------------------------------------------------------------------------------------
# derivatives of every order


@pytest.mark.parametrize("edge", [False, True])
@pytest.mark.parametrize("bipartite", [False, True])
def test_check_grads_order2(x64, rng, edge, bipartite):
    g = random_graph(rng, 5, 5 if not bipartite else 4, 14)
    x, xd, a, ef = inputs(rng, g, heads=2, c=2, edge=edge, bipartite=bipartite, dtype=np.float64)
    args = [x, a] + ([xd] if bipartite else []) + ([ef] if edge else [])

    def unpack(vs):
        it = iter(vs)
        x_, a_ = next(it), next(it)
        return x_, (next(it) if bipartite else None), a_, (next(it) if edge else None)

    def f(*vs):
        x_, xd_, a_, ef_ = unpack(vs)
        return jgo.mha_gat_v2(g, x_, xd_, a_, num_heads=2, edge_feat=ef_, return_attention=True)

    def mean(*vs):
        x_, xd_, a_, ef_ = unpack(vs)
        return jgo.mha_gat_v2(g, x_, xd_, a_, num_heads=2, concat_heads=False, edge_feat=ef_)

    check_grads(f, args, order=2, modes=("fwd", "rev"), eps=1e-4)
    check_grads(mean, args, order=2, modes=("fwd", "rev"), eps=1e-4)


def test_hessian_matches_reference(x64, rng):
    g = random_graph(rng, 5, 4, 12)
    x, xd, a, ef = inputs(rng, g, heads=2, c=2, edge=True, bipartite=True, dtype=np.float64)

    def loss(impl):
        return lambda x, xd, a, ef: jnp.sum(jnp.tanh(jgo.mha_gat_v2(g, x, xd, a, num_heads=2, edge_feat=ef,
                                                                    impl=impl)) ** 2)

    h = jax.jit(jax.hessian(loss(None), (0, 1, 2, 3)))(x, xd, a, ef)
    h_ref = jax.jit(jax.hessian(loss("xla"), (0, 1, 2, 3)))(x, xd, a, ef)
    jax.tree_util.tree_map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-9, atol=1e-10), h, h_ref)


@pytest.mark.parametrize("edge", [False, True])
def test_reverse_mode_runs_the_fused_backward_kernels(rng, edge):
    g = random_graph(rng, 7, 6, 24)
    x, xd, a, ef = inputs(rng, g, edge=edge, bipartite=True)

    def loss(x, xd, a, ef):
        return jnp.sum(jgo.mha_gat_v2(g, x, xd, a, num_heads=2, edge_feat=ef) ** 2)

    argnums = (0, 1, 2, 3) if edge else (0, 1, 2)
    hlo = jax.jit(jax.grad(loss, argnums)).lower(x, xd, a, ef).as_text()
    for target in ("jgo_gatv2_fwd", "jgo_gatv2_bwd_src", "jgo_gatv2_bwd_dst"):
        assert f'custom_call_target = "{target}"' in hlo or f"@{target}" in hlo, target
    # nothing of size E x H x C: the composition's spmm/sddmm kernels are not used
    assert "jgo_spmm" not in hlo and "jgo_sddmm" not in hlo
    # only the source gradient: the CSR pass alone
    hlo_x = jax.jit(jax.grad(loss)).lower(x, xd, a, ef).as_text()
    assert "jgo_gatv2_bwd_src" in hlo_x and "jgo_gatv2_bwd_dst" not in hlo_x


def test_large_graph_uses_threads_and_matches_reference(rng):
    # big enough to split rows over several pool tasks
    g = random_graph(rng, 3000, 2000, 40000)
    x, xd, a, ef = inputs(rng, g, heads=4, c=8, edge=True, bipartite=True)
    f = lambda impl: jax.jit(jax.value_and_grad(  # noqa: E731
        lambda x, xd, a, ef: jnp.sum(jnp.sin(jgo.mha_gat_v2(g, x, xd, a, num_heads=4, edge_feat=ef, impl=impl))),
        (0, 1, 2, 3)))
    got, want = f(None)(x, xd, a, ef), f("xla")(x, xd, a, ef)
    jax.tree_util.tree_map(lambda u, v: np.testing.assert_allclose(u, v, rtol=2e-4, atol=2e-4), got, want)


# ---------------------------------------------------------------------------------------
# transforms


def test_jit_jvp_and_jacobians(rng):
    g = random_graph(rng)
    x, xd, a, ef = inputs(rng, g, edge=True, bipartite=True)
    f = lambda x, xd, a, ef: jgo.mha_gat_v2(g, x, xd, a, num_heads=2, edge_feat=ef)  # noqa: E731
    r = lambda x, xd, a, ef: jgo.mha_gat_v2(g, x, xd, a, num_heads=2, edge_feat=ef, impl="xla")  # noqa: E731
    c = lambda u, v: np.testing.assert_allclose(u, v, rtol=2e-5, atol=2e-5)  # noqa: E731
    args = (x, xd, a, ef)
    c(jax.jit(f)(*args), r(*args))
    c(jax.jit(lambda g, x: jgo.mha_gat_v2(g, x, xd, a, num_heads=2, edge_feat=ef))(g, x), r(*args))
    tangents = tuple(np.ones_like(v) for v in args)
    c(jax.jvp(f, args, tangents)[1], jax.jvp(r, args, tangents)[1])
    for jac in (jit_jacfwd, jit_jacrev):
        jax.tree_util.tree_map(c, jac(f, (0, 1, 2, 3))(*args), jac(r, (0, 1, 2, 3))(*args))


def test_vmap(rng):
    g = random_graph(rng)
    x, xd, a, ef = inputs(rng, g, edge=True, bipartite=True)
    f = lambda x, xd, a, ef: jgo.mha_gat_v2(g, x, xd, a, num_heads=2, edge_feat=ef,  # noqa: E731
                                            return_attention=True)
    r = lambda x, xd, a, ef: jgo.mha_gat_v2(g, x, xd, a, num_heads=2, edge_feat=ef,  # noqa: E731
                                            return_attention=True, impl="xla")
    c = lambda u, v: np.testing.assert_allclose(u, v, rtol=2e-5, atol=2e-5)  # noqa: E731
    xb, xdb, ab, eb = (np.stack([v, 2 * v, -v]) for v in (x, xd, a, ef))
    for axes, operands in (((0, None, None, None), (xb, xd, a, ef)), ((None, 0, None, None), (x, xdb, a, ef)),
                           ((None, None, 0, None), (x, xd, ab, ef)), ((None, None, None, 0), (x, xd, a, eb)),
                           ((0, 0, 0, 0), (xb, xdb, ab, eb))):
        jax.tree_util.tree_map(c, jax.vmap(f, axes)(*operands), jax.vmap(r, axes)(*operands))
    loss = lambda fn: lambda x, xd, a, ef: jnp.sum(fn(x, xd, a, ef)[0] ** 2)  # noqa: E731
    for axes in ((0, None, 0, None), (None, 0, None, 0)):
        ops = tuple(b if ax == 0 else v for ax, b, v in zip(axes, (xb, xdb, ab, eb), (x, xd, a, ef)))
        jax.tree_util.tree_map(c, jax.vmap(jax.grad(loss(f), (0, 1, 2, 3)), axes)(*ops),
                               jax.vmap(jax.grad(loss(r), (0, 1, 2, 3)), axes)(*ops))


def test_vmap_over_graphs(rng):
    graphs = [random_graph(np.random.default_rng(s)) for s in range(3)]
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *graphs)
    x, xd, a, _ = inputs(rng, graphs[0], bipartite=True)
    out = jax.vmap(lambda g: jgo.mha_gat_v2(g, x, xd, a, num_heads=2))(stacked)
    for i, g in enumerate(graphs):
        np.testing.assert_allclose(out[i], jgo.mha_gat_v2(g, x, xd, a, num_heads=2, impl="xla"), rtol=1e-5,
                                   atol=1e-6)


# ---------------------------------------------------------------------------------------
# errors


def test_trace_time_errors(rng):
    g = random_graph(rng)  # bipartite: 7 sources, 6 destinations
    x, xd, a, ef = inputs(rng, g, bipartite=True, edge=True)
    with pytest.raises(ValueError, match="mha_gat_v2: attn_weights must have shape \\(6,\\)"):
        jgo.mha_gat_v2(g, x, xd, np.concatenate([a, a]), num_heads=2)
    with pytest.raises(TypeError, match="attn_weights must be a floating-point array"):
        jgo.mha_gat_v2(g, x, xd, a.astype(np.int32), num_heads=2)
    with pytest.raises(ValueError, match="x_dst is required for a bipartite graph"):
        jgo.mha_gat_v2(g, x, None, a, num_heads=2)
    with pytest.raises(ValueError, match="x_dst must be"):
        jgo.mha_gat_v2(g, x, xd[:, :4], a, num_heads=2)
    with pytest.raises(ValueError, match="edge_feat must have 24 rows"):
        jgo.mha_gat_v2(g, x, xd, a, num_heads=2, edge_feat=ef[:3])
    with pytest.raises(ValueError, match="x_src must be"):
        jgo.mha_gat_v2(g, x, xd, a, num_heads=4)
    with pytest.raises(ValueError, match="num_heads must be a positive int"):
        jgo.mha_gat_v2(g, x, xd, a, num_heads=0)
    with pytest.raises(ValueError, match="x_src must have 7 rows"):
        jgo.mha_gat_v2(g, x[:3], xd, a, num_heads=2)
    with pytest.raises(TypeError, match="x_src must be a floating-point array"):
        jgo.mha_gat_v2(g, x.astype(np.int32), xd, a, num_heads=2)
    with pytest.raises(ValueError, match="impl must be one of"):
        jgo.mha_gat_v2(g, x, xd, a, num_heads=2, impl="cuda")


def test_out_of_range_index_reaching_the_kernel_is_an_error(rng):
    g = random_graph(rng, 7, 7, 24)
    bad = jgo.Graph(*(jnp.asarray(v) for v in (g.src, g.dst, g.csc_offsets, g.csc_src.at[3].set(99), g.csc_eid,
                                               g.csr_offsets, g.csr_dst, g.csr_eid)), g.n_src, g.n_dst, validate=False)
    bad = kernel_only(bad)  # past the Python check, to the kernels' own
    x, _, a, _ = inputs(rng, g)
    eid = int(g.csc_eid[3])
    with kernel_index_error(f".*gatv2_fwd: edge {eid} has node index 99"):
        jgo.mha_gat_v2(bad, x, None, a, num_heads=2).block_until_ready()
    bad_csr = jgo.Graph(*(jnp.asarray(v) for v in (g.src, g.dst, g.csc_offsets, g.csc_src, g.csc_eid,
                                                   g.csr_offsets, g.csr_dst.at[5].set(-1), g.csr_eid)), g.n_src,
                        g.n_dst, validate=False)
    bad_csr = kernel_only(bad_csr)  # past the Python check, to the kernels' own
    eid = int(g.csr_eid[5])
    with kernel_index_error(f".*gatv2_bwd_src: edge {eid} has node index -1"):
        jax.grad(lambda x: jgo.mha_gat_v2(bad_csr, x, None, a, num_heads=2).sum())(x).block_until_ready()
    # the process survives and keeps working
    np.testing.assert_allclose(jgo.mha_gat_v2(g, x, None, a, num_heads=2),
                               jgo.mha_gat_v2(g, x, None, a, num_heads=2, impl="xla"), rtol=1e-5, atol=1e-6)


def test_int64_indices_beyond_int32_never_wrap_onto_a_node_or_edge(rng, x64):
    """A neighbour id of 2^32 + j or an edge id of 2^32 + e (conftest.beyond_int32): the CPU kernels reject it, the
    CUDA kernels skip the edge (the reference's result on the graph without it, not that on the graph)."""
    g = random_graph(rng, 7, 7, 24, index_dtype=np.int64)
    x, xd, a, ef = inputs(rng, g, heads=2, c=4, edge=True, bipartite=True)
    bad, without, keep, match = beyond_int32(g)
    with kernel_index_error(match):
        got = jgo.mha_gat_v2(bad, x, xd, a, num_heads=2, edge_feat=ef).block_until_ready()
        want = jgo.mha_gat_v2(without, x, xd, a, num_heads=2, edge_feat=ef[keep], impl="xla")
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert not np.allclose(got, jgo.mha_gat_v2(g, x, xd, a, num_heads=2, edge_feat=ef, impl="xla"))


def test_forward_and_backward_are_bitwise_reproducible(rng):
    """No atomics anywhere: every output element is written by one thread, in a fixed order."""
    g = random_graph(rng, 50, 40, 600)
    x, xd, a, ef = inputs(rng, g, heads=4, c=8, edge=True, bipartite=True)

    def op(x, xd, a, ef):
        return jgo.mha_gat_v2(g, x, xd, a, edge_feat=ef, num_heads=4, return_attention=True)

    fwd = jax.jit(op)
    grad = jax.jit(jax.grad(lambda *args: jnp.sum(op(*args)[0] ** 3), (0, 1, 2, 3)))
    first_out, first_grad = fwd(x, xd, a, ef), grad(x, xd, a, ef)
    for _ in range(3):
        jax.tree_util.tree_map(np.testing.assert_array_equal, fwd(x, xd, a, ef), first_out)
        jax.tree_util.tree_map(np.testing.assert_array_equal, grad(x, xd, a, ef), first_grad)
