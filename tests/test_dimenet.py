"""jgo.dimenet.triplets and agg_edge_to_edge: a hand-computed case, parity with the pure-JAX
reference (values, first and second derivatives, float64 to 1e-10), every derivative mode of
order two, dtypes, jit, vmap, the fused second-order HLO and bad input."""

import itertools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import check_grads, kernel_index_error

import jaxgraphops as jgo
from jaxgraphops.dimenet import Triplets, agg_edge_to_edge, triplets
from jaxgraphops.dimenet.reference import agg_edge_to_edge_ref


def molecule(rng, n_nodes=9, n_edges=40, index_dtype=None):
    """A random directed multigraph without self loops and its edge vectors pos[src] - pos[dst]."""
    src, dst = rng.integers(0, n_nodes, n_edges), rng.integers(0, n_nodes, n_edges)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    src[1], dst[1] = src[0], dst[0]  # a duplicate edge
    g = jgo.Graph.from_edges(src, dst, n_nodes, n_nodes, index_dtype=index_dtype)
    pos = rng.normal(size=(n_nodes, 3))
    return g, pos[src] - pos[dst]


def operands(rng, n_edges, n_emb=5, n_mid=3, dtype=np.float64):
    sbf = rng.normal(size=(n_edges, 42))
    emb = rng.normal(size=(n_edges, n_emb))
    w = rng.normal(size=(42 + n_emb, n_mid)) / 4
    return tuple(jnp.asarray(a, dtype) for a in (sbf, emb, w))


def assert_close(got, want, rtol):
    """Agreement to ``rtol`` relative to the largest reference entry (for sums with cancellation)."""
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        scale = max(float(jnp.max(jnp.abs(w))), 1e-30)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=rtol * scale)


# ---------------------------------------------------------------------------------------
# triplets


def brute_force_triplets(src, dst):
    return sorted((a, b) for a, b in itertools.product(range(len(src)), repeat=2)
                  if dst[a] == src[b] and src[a] != dst[b])


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_triplets_match_brute_force(rng, x64, index_dtype):
    g, _ = molecule(rng, index_dtype=index_dtype)
    t = triplets(g)
    src, dst = np.asarray(g.src), np.asarray(g.dst)
    e_in, e_out = (np.asarray(a) for a in t.pairs())
    assert sorted(zip(e_in.tolist(), e_out.tolist())) == brute_force_triplets(src, dst)
    assert t.n_triplets == len(e_in) and t.n_edges == g.n_edges and t.out_in.dtype == np.dtype(index_dtype)
    # The e_in grouping lists the same triplets, each with its position in the e_out grouping.
    in_counts = np.diff(np.asarray(t.in_offsets))
    in_rows = np.repeat(np.arange(g.n_edges), in_counts)
    pos = np.asarray(t.in_pos)
    np.testing.assert_array_equal(e_in[pos], in_rows)
    np.testing.assert_array_equal(e_out[pos], np.asarray(t.in_out))


def test_triplets_small_literal():
    # 0 -> 1 -> 2 and back: the only triplets are 0->1->2 and 2->1->0.
    g = jgo.Graph.from_edges(np.array([0, 1, 2, 1]), np.array([1, 2, 1, 0]))
    e_in, e_out = triplets(g).pairs()
    assert list(zip(np.asarray(e_in).tolist(), np.asarray(e_out).tolist())) == [(0, 1), (2, 3)]


def test_triplets_bad_input():
    with pytest.raises(ValueError, match="square"):
        triplets(jgo.Graph.from_edges(np.array([0]), np.array([1]), 3, 2))
    g = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 0]))
    with pytest.raises(TypeError, match="concrete"):
        jax.jit(lambda g: triplets(g).out_in)(g)


# ---------------------------------------------------------------------------------------
# agg_edge_to_edge: a case computed by hand


def legendre_closed_form(c):
    """P_0..P_6 from their closed forms (independent of the recurrences in the op and reference)."""
    return np.array([1, c, (3 * c**2 - 1) / 2, (5 * c**3 - 3 * c) / 2, (35 * c**4 - 30 * c**2 + 3) / 8,
                     (63 * c**5 - 70 * c**3 + 15 * c) / 8, (231 * c**6 - 315 * c**4 + 105 * c**2 - 5) / 16])


def test_literal_case(x64):
    # Nodes 0 (0,0,0), 1 (1,0,0), 2 (2,1,0); edges e0 = 0->1, e1 = 1->2, e2 = 2->1, e3 = 1->0.
    # Triplets (e0 -> e1) and (e2 -> e3); both angles have cos = 1/sqrt(2).
    pos = np.array([[0.0, 0, 0], [1, 0, 0], [2, 1, 0]])
    src, dst = np.array([0, 1, 2, 1]), np.array([1, 2, 1, 0])
    vec = pos[src] - pos[dst]
    t = triplets(jgo.Graph.from_edges(src, dst))
    rng = np.random.default_rng(3)
    sbf, emb, w = (np.asarray(a) for a in operands(rng, 4, n_emb=3, n_mid=2))
    y = np.sqrt((2 * np.arange(7) + 1) / (4 * np.pi)) * legendre_closed_form(1 / np.sqrt(2))
    expected = np.zeros((4, 3))
    for e_in, e_out in ((0, 1), (2, 3)):
        sbf_t = sbf[e_in] * np.repeat(y, 6)
        expected[e_out] = emb[e_in] * (w[42:] @ (w[:42].T @ sbf_t))
    out = agg_edge_to_edge(vec, sbf, emb, w, t)
    np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)


# ---------------------------------------------------------------------------------------
# parity with the reference


def energy(impl, t):
    return lambda vec, sbf, emb, w: jnp.sum(jnp.tanh(agg_edge_to_edge(vec, sbf, emb, w, t, impl=impl)))


def force_loss(impl, t):
    """A loss on "forces" d energy / d vec: its gradient is a second derivative of the op."""
    def loss(vec, sbf, emb, w):
        forces = jax.grad(energy(impl, t), argnums=(0, 1, 2))(vec, sbf, emb, w)
        return sum(jnp.sum(f**2) for f in forces) + energy(impl, t)(vec, sbf, emb, w)
    return loss


@pytest.mark.parametrize("n_emb,n_mid", [(5, 3), (16, 8), (1, 1)])
def test_reference_parity_float64(rng, x64, n_emb, n_mid):
    g, vec = molecule(rng)
    t = triplets(g)
    args = (jnp.asarray(vec), *operands(rng, g.n_edges, n_emb, n_mid))
    assert_close(agg_edge_to_edge(*args, t), agg_edge_to_edge_ref(*args, t), 1e-12)
    argnums = (0, 1, 2, 3)
    assert_close(jax.grad(energy(None, t), argnums)(*args), jax.grad(energy("xla", t), argnums)(*args), 1e-10)
    assert_close(jax.grad(force_loss(None, t), argnums)(*args), jax.grad(force_loss("xla", t), argnums)(*args), 1e-10)
    # Forward-over-reverse Hessian-vector products in every input.
    tangents = tuple(jnp.asarray(rng.normal(size=a.shape)) for a in args)

    def hvp(impl):
        return jax.jvp(jax.grad(energy(impl, t), argnums), args, tangents)[1]

    assert_close(hvp(None), hvp("xla"), 1e-10)


def test_check_grads_every_input(rng, x64):
    g, vec = molecule(rng, n_nodes=6, n_edges=16)
    t = triplets(g)
    args = (jnp.asarray(vec), *operands(rng, g.n_edges, 3, 2))
    check_grads(lambda *a: agg_edge_to_edge(*a, t), args, order=2, modes=("fwd", "rev"))


def test_third_order_matches_reference(rng, x64):
    g, vec = molecule(rng, n_nodes=6, n_edges=16)
    t = triplets(g)
    args = (jnp.asarray(vec), *operands(rng, g.n_edges, 3, 2))
    d3 = {impl: jax.grad(lambda v: jnp.sum(jax.grad(lambda v: jnp.sum(jax.grad(energy(impl, t))(v, *args[1:])**2))(v)))(
        args[0]) for impl in (None, "xla")}
    assert_close(d3[None], d3["xla"], 1e-9)


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_float32_and_index_dtypes(rng, x64, index_dtype):
    g, vec = molecule(rng, index_dtype=index_dtype)
    t = triplets(g)
    args64 = (jnp.asarray(vec), *operands(rng, g.n_edges, 8, 8))
    args32 = tuple(a.astype(jnp.float32) for a in args64)
    out = agg_edge_to_edge(*args32, t)
    assert out.dtype == jnp.float32
    assert_close(out, agg_edge_to_edge_ref(*args64, t), 1e-5)
    assert_close(jax.grad(energy(None, t), (0, 1, 2, 3))(*args32), jax.grad(energy("xla", t), (0, 1, 2, 3))(*args64),
                 1e-4)


def test_jit_vmap_and_empty(rng):
    g, vec = molecule(rng)
    t = triplets(g)
    sbf, emb, w = operands(rng, g.n_edges, 4, 2, np.float32)
    vec = jnp.asarray(vec, jnp.float32)
    f = jax.jit(lambda v, e: agg_edge_to_edge(v, sbf, e, w, t))
    assert_close(f(vec, emb), agg_edge_to_edge_ref(vec, sbf, emb, w, t), 1e-5)
    embs = jnp.stack([emb, 2 * emb + 1])
    assert_close(jax.vmap(f, (None, 0))(vec, embs), jnp.stack([agg_edge_to_edge_ref(vec, sbf, e, w, t) for e in embs]),
                 1e-5)
    # A graph with edges but no triplets gives zeros.
    g0 = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 0]))
    t0 = triplets(g0)
    assert t0.n_triplets == 0
    out = agg_edge_to_edge(vec[:2], sbf[:2], emb[:2], w, t0)
    np.testing.assert_array_equal(out, np.zeros((2, 4)))


def test_edge_without_triplets_is_an_empty_sum_also_with_non_finite_operands(rng):
    """An edge without triplets is an empty sum on every path: its output is 0 where W_b holds a NaN, and its
    infinite embedding adds nothing to the gradient of W_b (the CPU kernels contracted each row's triplet sum
    with W_b also for an empty row: NaN x 0; long fuzz profile, seed 32335, and the sanitizer replay of the
    CUDA handlers' call). The edges with triplets get NaN. Oracle: the definition and the reference."""
    g = jgo.Graph.from_edges(np.array([0, 1, 1, 2, 3]), np.array([1, 0, 2, 1, 4]))  # 3 -> 4: no triplet
    t = triplets(g)
    vec = jnp.asarray(rng.normal(size=(g.n_edges, 3)), jnp.float32)
    sbf, emb, w = operands(rng, g.n_edges, 2, 3, np.float32)
    lonely = np.asarray(t.out_offsets[1:] == t.out_offsets[:-1])  # no triplet ends on the edge
    starts_none = np.asarray(t.in_offsets[1:] == t.in_offsets[:-1])  # no triplet starts on it
    assert lonely.any() and not lonely.all() and starts_none.any()
    w_nan = w.at[-1, 0].set(np.nan)  # in W_b
    emb_inf = emb.at[np.flatnonzero(starts_none)].set(np.inf)

    def w_grad(impl):
        return jax.grad(lambda w_: agg_edge_to_edge(vec, sbf, emb_inf, w_, t, impl=impl).sum())(w)

    for impl in (None, "xla"):
        out = np.asarray(agg_edge_to_edge(vec, sbf, emb, w_nan, t, impl=impl))
        np.testing.assert_array_equal(out[lonely], 0, err_msg=str(impl))
        assert np.isnan(out[~lonely]).any(axis=1).all(), impl
        assert np.isfinite(w_grad(impl)).all(), impl
    np.testing.assert_allclose(w_grad(None), w_grad("xla"), rtol=1e-5, atol=1e-6)


def test_force_training_step_runs_fused_kernels(rng):
    """grad of a loss on d energy / d vec lowers to the fused kernels, with no triplet-sized gather/scatter."""
    g, vec = molecule(rng, n_nodes=12, n_edges=90)
    t = triplets(g)
    args = (jnp.asarray(vec, jnp.float32), *operands(rng, g.n_edges, 4, 2, np.float32))
    hlo = jax.jit(jax.grad(force_loss(None, t), (1, 2, 3))).lower(*args).as_text()
    assert hlo.count("jgo_dimenet_in") >= 3 and hlo.count("jgo_dimenet_out") >= 2
    big = [line for line in hlo.splitlines()
           if re.search(r"gather|scatter", line) and re.search(rf"\b{t.n_triplets}x", line)]
    assert not big, big[:3]
    # The reference does gather triplet-sized tensors (the check above can fail).
    hlo_ref = jax.jit(jax.grad(force_loss("xla", t), (1, 2, 3))).lower(*args).as_text()
    assert any(re.search(r"gather", line) and f"{t.n_triplets}x" in line for line in hlo_ref.splitlines())


def test_bad_inputs(rng):
    g, vec = molecule(rng)
    t = triplets(g)
    sbf, emb, w = operands(rng, g.n_edges, 4, 2, np.float32)
    vec = jnp.asarray(vec, jnp.float32)
    with pytest.raises(ValueError, match="vec must be"):
        agg_edge_to_edge(vec[:, :2], sbf, emb, w, t)
    with pytest.raises(ValueError, match="sbf_rad must be"):
        agg_edge_to_edge(vec, sbf[:, :40], emb, w, t)
    with pytest.raises(ValueError, match="weights must be"):
        agg_edge_to_edge(vec, sbf, emb, w[:-1], t)
    with pytest.raises(TypeError, match="emb must be a floating"):
        agg_edge_to_edge(vec, sbf, emb.astype(jnp.int32), w, t)
    with pytest.raises(TypeError, match="triplets must be a Triplets"):
        agg_edge_to_edge(vec, sbf, emb, w, g)
    with pytest.raises(ValueError, match="impl"):
        agg_edge_to_edge(vec, sbf, emb, w, t, impl="cuda")
    bad = Triplets(t.out_offsets, t.out_in.at[0].set(10_000), t.in_offsets, t.in_out, t.in_pos, t.n_edges, t.n_triplets)
    with kernel_index_error(".*out of range"):
        jax.block_until_ready(agg_edge_to_edge(vec, sbf, emb, w, bad))
    # positions in range but not a permutation: rejected on the CPU; the CUDA kernels zero the coefficients first,
    # so the one no triplet names is 0 and the forces are finite (which of the two triplets' coefficients lands
    # on the repeated position is unspecified)
    bad_pos = Triplets(t.out_offsets, t.out_in, t.in_offsets, t.in_out, t.in_pos.at[1].set(t.in_pos[0]), t.n_edges,
                       t.n_triplets)
    forces = lambda: jax.grad(energy(None, bad_pos))(vec, sbf, emb, w)  # noqa: E731
    with kernel_index_error(".*triplet position .* appears twice: in_pos must be a permutation"):
        first = jax.block_until_ready(forces())
    if jgo.kernel_platform() != "cpu":
        assert np.isfinite(first).all()


def test_cuda_lowering_uses_kernels_up_to_32_middle_features():
    """Lowered for CUDA (no GPU needed): the kernels where they hold n_mid in registers, else the
    composition; the kernels only in a build with the CUDA handlers."""
    g = jgo.Graph.from_edges(np.array([0, 1, 1, 2]), np.array([1, 0, 2, 1]))
    t = jgo.dimenet.triplets(g)
    vec = jnp.array([[-1.0, 0, 0], [1, 0, 0], [0, -1, 0], [0, 1, 0]])
    for n_mid in (8, 32, 33):
        def f(v, w):
            return jgo.dimenet.agg_edge_to_edge(v, jnp.ones((4, 42)), jnp.ones((4, 8)), w, t)

        hlo = jax.jit(f).trace(vec, jnp.ones((50, n_mid))).lower(lowering_platforms=("cuda",)).as_text()
        assert ("@jgo_dimenet_" in hlo) == (jgo.with_cuda() and n_mid <= 32), n_mid


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_half_precision_is_computed_in_float32(rng, dtype):
    """Half-precision inputs used to reach the CPU kernels and fail there (``dimenet_out: vec must be
    float32/float64``); they are computed in float32, as the other ops do, and come back in their dtype."""
    g, vec = molecule(rng)
    t = triplets(g)
    sbf, emb, w = operands(rng, g.n_edges, dtype=np.float32)
    half = [jnp.asarray(a).astype(dtype) for a in (vec, sbf, emb, w)]
    wide = [a.astype(jnp.float32) for a in half]
    for impl in (None, "xla"):
        out = agg_edge_to_edge(*half, t, impl=impl)
        assert out.dtype == dtype
        want = agg_edge_to_edge_ref(*wide, t).astype(dtype)
        np.testing.assert_allclose(np.asarray(out, np.float32), np.asarray(want, np.float32), rtol=2e-2, atol=2e-2)
    grad = jax.grad(lambda e: jnp.sum(agg_edge_to_edge(half[0], half[1], e, half[3], t).astype(jnp.float32)))(half[2])
    assert grad.dtype == dtype


def test_misspelt_impl_is_suggested(rng):
    g, vec = molecule(rng)
    sbf, emb, w = operands(rng, g.n_edges, dtype=np.float32)
    with pytest.raises(ValueError, match=r"agg_edge_to_edge: impl must be one of None, 'xla'; got 'XLA' "
                                         r"\(did you mean 'xla'\?\)"):
        agg_edge_to_edge(vec, sbf, emb, w, triplets(g), impl="XLA")
