"""agg_simple, agg_weighted, agg_concat and pool against the pure-JAX reference and literal tables."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import check_grads, random_graph

import jaxgraphops as jgo

REDUCES = ("sum", "mean", "max", "min")


def _inputs(rng, g, dtype, f=3, fe=2):
    x = rng.normal(size=(g.n_src, f)).astype(dtype)
    w = (rng.uniform(0.5, 2.0, size=g.n_edges) * rng.choice([-1, 1], size=g.n_edges)).astype(dtype)
    ef = rng.normal(size=(g.n_edges, fe)).astype(dtype)
    x_dst = rng.normal(size=(g.n_dst, 4)).astype(dtype)
    return x, w, ef, x_dst


def _functions(g, x_dst, r):
    """Each op under reduction ``r``, with all float inputs as positional arguments."""
    return {
        "agg_simple n2n": lambda x, w, ef, impl=None: jgo.agg_simple(g, x, reduce=r, impl=impl),
        "agg_simple e2n": lambda x, w, ef, impl=None: jgo.agg_simple(g, edge_feat=ef, reduce=r, impl=impl),
        "agg_simple n2n_e2n": lambda x, w, ef, impl=None: jgo.agg_simple(g, x, ef, reduce=r, impl=impl),
        "agg_weighted": lambda x, w, ef, impl=None: jgo.agg_weighted(g, x, w, reduce=r, impl=impl),
        "agg_concat": lambda x, w, ef, impl=None: jgo.agg_concat(g, x, x_dst=x_dst, reduce=r, impl=impl),
        "agg_concat weighted+edge": lambda x, w, ef, impl=None: jgo.agg_concat(
            g, x, x_dst=x_dst, edge_feat=ef, edge_weight=w, reduce=r, impl=impl),
    }


@pytest.fixture(params=REDUCES)
def reduce(request):
    return request.param


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matches_reference(x64, rng, reduce, index_dtype, dtype):
    g = random_graph(rng, index_dtype=index_dtype)
    x, w, ef, x_dst = _inputs(rng, g, dtype)
    for name, f in _functions(g, x_dst, reduce).items():
        out, ref = f(x, w, ef), f(x, w, ef, impl="xla")
        assert out.dtype == dtype and out.shape == ref.shape, name
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol, err_msg=name)


def test_check_grads_order2(x64, rng, reduce):
    g = random_graph(rng, 5, 4, 12)
    x, w, ef, x_dst = _inputs(rng, g, np.float64)
    for name, f in _functions(g, x_dst, reduce).items():
        check_grads(f, (x, w, ef), order=2, modes=("fwd", "rev"), eps=1e-4)
        ref = jax.grad(lambda *a: jnp.sum(f(*a, impl="xla") ** 2), (0, 1, 2))(x, w, ef)
        got = jax.grad(lambda *a: jnp.sum(f(*a) ** 2), (0, 1, 2))(x, w, ef)
        jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name),
                               got, ref)


def test_pool(x64, rng, reduce):
    ids = np.array([0, 0, 0, 2, 2, 3, 3, 3, 3])  # graph 1 and graph 4 have no nodes
    x = rng.normal(size=(9, 3))
    out = jgo.pool(x, ids, 5, reduce=reduce)
    np.testing.assert_allclose(out, jgo.pool(x, ids, 5, reduce=reduce, impl="xla"), rtol=1e-13)
    np.testing.assert_array_equal(out[1], 0)
    np.testing.assert_array_equal(out[4], 0)
    np.testing.assert_array_equal(jgo.pool(x, ids, 5, reduce=reduce, ids_are_sorted=True), out)
    check_grads(lambda x: jgo.pool(x, ids, 5, reduce=reduce), (x,), order=2, modes=("fwd", "rev"))
    unsorted = np.array([3, 0, 2, 0, 3, 3, 2, 0, 3])
    np.testing.assert_allclose(jgo.pool(x, unsorted, 5, reduce=reduce),
                               jgo.pool(x, unsorted, 5, reduce=reduce, impl="xla"), rtol=1e-13)
    traced = jax.jit(lambda x, i: jgo.pool(x, i, 5, reduce=reduce))(x, ids)
    np.testing.assert_allclose(traced, out, rtol=1e-13)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_pool_sorted_ids_one_pass(x64, rng, reduce):
    """Sorted graph ids, sum and mean: the one-pass readout (jgo_pool_sorted on the CPU) against the reference
    and a NumPy loop, with empty graphs, several feature axes, a graph of one node, derivatives of order two
    in both modes, vmap over features and over ids, and the kernel in the lowered HLO."""
    ids = np.array([0, 0, 2, 2, 2, 3, 6, 6], np.int32)  # graphs 1, 4, 5 and 7 empty; graph 3 has one node
    x = rng.normal(size=(8, 2, 3))
    want = np.zeros((8, 2, 3))
    for g in range(8):
        if (ids == g).any():
            want[g] = x[ids == g].sum(0) / ((ids == g).sum() if reduce == "mean" else 1)
    fn = lambda x, i=ids: jgo.pool(x, i, 8, reduce=reduce, ids_are_sorted=True)  # noqa: E731
    np.testing.assert_allclose(fn(x), want, rtol=1e-13, atol=1e-15)
    check_grads(fn, (x,), order=2, modes=("fwd", "rev"))
    xb = np.stack([x, -2 * x, x + 1])
    idb = np.stack([ids, np.sort(rng.integers(0, 8, 8)).astype(np.int32), np.zeros(8, np.int32)])
    ref = lambda x, i: jgo.pool(x, i, 8, reduce=reduce, impl="xla")  # noqa: E731
    np.testing.assert_allclose(jax.vmap(fn)(xb), jax.vmap(lambda x: ref(x, ids))(xb), rtol=1e-13)
    np.testing.assert_allclose(jax.vmap(fn)(xb, idb), jax.vmap(ref)(xb, idb), rtol=1e-13)
    hlo = jax.jit(jax.grad(lambda x: jnp.sum(fn(x) ** 2))).lower(x).as_text()
    if jgo.kernel_platform() == "cpu":
        assert "@jgo_pool_sorted(" in hlo and "@jgo_pool_sorted_bwd(" in hlo
    # half precision is summed in float32
    h = jnp.asarray(x[:, 0], jnp.bfloat16)
    np.testing.assert_allclose(np.asarray(fn(h), np.float32), np.asarray(ref(h, ids), np.float32), rtol=1e-2)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_sorted_bounds_match_numpys_search(x64, rng, index_dtype):
    """The bounds of sorted graph ids (pool's mean, the membership graph) against np.searchsorted: ids outside
    [0, n), no ids, one graph, every graph empty; jitted, where the platform's lowering runs (the CPU's while
    loop, the unrolled search of a GPU and of the emulated one, which has no while loop)."""
    from jaxgraphops.ops._pool_primitives import sorted_bounds

    cases = [np.sort(rng.integers(-2, 9, 40)), np.zeros(0, np.int64), np.zeros(5, np.int64), np.full(3, 9),
             np.array([-1, -1]), np.arange(7)]
    for ids in cases:
        ids = np.asarray(ids, index_dtype)
        for n in (0, 1, 7):
            got = jax.jit(sorted_bounds, static_argnums=1)(jnp.asarray(ids), n)
            assert got.dtype == index_dtype
            np.testing.assert_array_equal(got, np.searchsorted(ids, np.arange(n + 1), side="left"))
    hlo = jax.jit(sorted_bounds, static_argnums=1).lower(jnp.asarray(cases[0], index_dtype), 7).compile().as_text()
    cpu_loop = jax.default_backend() == "cpu" and jgo.kernel_platform() != "cuda-emulation"
    assert (" while(" in hlo) == cpu_loop, hlo


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_pool_sorted_bwd_copies_each_graphs_row_to_its_nodes(x64, rng, index_dtype):
    """pool's transpose (jgo_pool_sorted_bwd on the CPU): a literal table with ids outside [0, n_graphs), NaN and
    inf rows, no graphs and no nodes; several feature axes against a NumPy loop; derivatives of order two in
    both modes (its own transpose is pool); vmap over ct and over ids; the kernel reached by pool's gradient."""
    from jaxgraphops.ops._pool_primitives import _bwd_xla, pool_sorted_bwd_p

    bwd = jax.jit(pool_sorted_bwd_p.bind)
    ct = jnp.array([[1.0, 2.0], [np.nan, np.inf], [5.0, -6.0]])
    ids = jnp.array([-1, 0, 0, 1, 2, 2, 3, 7], index_dtype)
    want = [[0, 0], [1, 2], [1, 2], [np.nan, np.inf], [5, -6], [5, -6], [0, 0], [0, 0]]
    for fn in (bwd, _bwd_xla):
        np.testing.assert_array_equal(fn(ct, ids), np.array(want))
        np.testing.assert_array_equal(fn(jnp.zeros((0, 2)), ids[:3]), np.zeros((3, 2)))  # no graphs
        assert fn(ct, ids[:0]).shape == (0, 2)  # no nodes
    sorted_ids = jnp.asarray(np.sort(rng.integers(-1, 6, 12)), index_dtype)
    c3 = rng.normal(size=(5, 2, 3))
    loop = np.stack([c3[i] if 0 <= i < 5 else np.zeros((2, 3)) for i in np.asarray(sorted_ids)])
    np.testing.assert_array_equal(bwd(c3, sorted_ids), loop)
    check_grads(lambda c: pool_sorted_bwd_p.bind(c, sorted_ids), (c3,), order=2, modes=("fwd", "rev"))
    cb = np.stack([c3, -c3, c3 + 1])
    idb = jnp.stack([sorted_ids, jnp.sort(sorted_ids[::-1] * 0 + 2), sorted_ids])
    np.testing.assert_array_equal(jax.vmap(lambda c: bwd(c, sorted_ids))(cb), np.stack([bwd(c, sorted_ids) for c in cb]))
    np.testing.assert_array_equal(jax.vmap(bwd)(cb, idb), np.stack([_bwd_xla(c, i) for c, i in zip(cb, idb)]))
    inside = jnp.clip(sorted_ids, 0, 4)
    hlo = jax.jit(jax.grad(lambda x: jnp.sum(jgo.pool(x, inside, 5, ids_are_sorted=True) ** 2))).lower(
        jnp.ones((12, 2))).as_text()
    if jgo.kernel_platform() == "cpu":
        assert "@jgo_pool_sorted_bwd(" in hlo


def test_pool_sorted_bwd_rejects_a_cotangent_of_another_row_shape():
    """The CPU handler checks what it is given (an FFI call that bypasses the primitive's shapes)."""
    if jgo.kernel_platform() != "cpu":
        pytest.skip("the check is the CPU handler's: the kernels on this platform are not the CPU's")
    call = jax.ffi.ffi_call("jgo_pool_sorted_bwd", jax.ShapeDtypeStruct((4, 3), jnp.float32))
    with pytest.raises(jax.errors.JaxRuntimeError,
                       match=r"pool_sorted_bwd: ct must be \[n_graphs, \.\.\.\] with the result's row shape"):
        jax.block_until_ready(jax.jit(call)(jnp.ones((2, 2), jnp.float32), jnp.zeros(4, jnp.int32)))


def test_pool_sorted_ids_that_decrease_are_an_error_on_the_cpu(rng):
    """A wrong ids_are_sorted=True promise (only visible when the computation runs) is an error from the CPU
    kernel, not a wrong readout; unsorted ids without the promise are pooled as usual."""
    x, ids = jnp.ones((5, 2)), jnp.array([0, 1, 2, 1, 2])
    f = jax.jit(lambda x, i: jgo.pool(x, i, 3, reduce="mean", ids_are_sorted=True))
    if jgo.kernel_platform() == "cpu":
        with pytest.raises(jax.errors.JaxRuntimeError,
                           match=r"pool: graph_ids must never decrease \(ids_are_sorted=True\); graph_ids\[3\] = 1 "
                                 r"follows 2"):
            jax.block_until_ready(f(x, ids))
    np.testing.assert_allclose(jgo.pool(x, ids, 3, reduce="mean"), jgo.pool(x, ids, 3, reduce="mean", impl="xla"))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_pool_traced_ids_outside_the_graphs_belong_to_none(rng, reduce):
    """Unsorted traced ids below 0 or from n_graphs on add to no graph, as in the reference's segment
    reduction (the membership graph puts them after every graph's nodes), values and gradients; the
    documented behaviour (pool's docstring, issue 34) where concrete ids are an error."""
    x = jnp.asarray(rng.normal(size=(7, 2)), jnp.float32)
    ids = jnp.array([2, -1, 0, 5, -3, 0, 1])
    with pytest.raises(ValueError, match=r"pool: graph_ids\[1\] = -1 is out of range \[0, 3\)"):
        jgo.pool(x, ids, 3, reduce=reduce)
    f = jax.jit(lambda x, i: jgo.pool(x, i, 3, reduce=reduce))
    ref = lambda x, i: jgo.pool(x, i, 3, reduce=reduce, impl="xla")  # noqa: E731
    np.testing.assert_allclose(f(x, ids), ref(x, ids), rtol=1e-6)
    grad = jax.jit(jax.grad(lambda x, i: jnp.sum(jgo.pool(x, i, 3, reduce=reduce) ** 2)))(x, ids)
    np.testing.assert_allclose(grad, jax.grad(lambda x: jnp.sum(ref(x, ids) ** 2))(x), rtol=1e-6)
    np.testing.assert_array_equal(grad[jnp.array([1, 3, 4])], 0)


def test_pool_sorted_ids_outside_the_graphs_belong_to_none(rng):
    """Traced ids below 0 or from n_graphs on (not checkable in Python) add to no graph, as in the reference's
    segment sum, and get zero gradients."""
    x = jnp.asarray(rng.normal(size=(6, 2)), jnp.float32)
    ids = jnp.array([-1, 0, 0, 1, 3, 3])
    f = jax.jit(lambda x, i: jgo.pool(x, i, 3, ids_are_sorted=True))
    np.testing.assert_allclose(f(x, ids), jgo.pool(x, ids, 3, impl="xla"), rtol=1e-6)
    grad = jax.jit(jax.grad(lambda x, i: jnp.sum(jgo.pool(x, i, 3, ids_are_sorted=True) ** 2)))(x, ids)
    np.testing.assert_array_equal(grad[jnp.array([0, 4, 5])], 0)
    np.testing.assert_allclose(grad[1:4], 2 * np.asarray(f(x, ids))[np.array([0, 0, 1])], rtol=1e-6)


def test_literal_tables():
    # edges: 0:0->1 (w 1), 1:1->1 (w 3), 2:2->2 (self loop, w 2), 3:0->2 (w -2); node 0 receives nothing
    g = jgo.Graph.from_edges(np.array([0, 1, 2, 0]), np.array([1, 1, 2, 2]), 3, 3)
    x = jnp.array([[2.0], [4.0], [8.0]])
    w = jnp.array([1.0, 3.0, 2.0, -2.0])
    expected = {
        "sum": [0.0, 14.0, 12.0],
        "mean": [0.0, 3.5, 0.0],  # node 2: weights sum to 0 -> 0
        "max": [0.0, 12.0, 16.0],
        "min": [0.0, 2.0, -4.0],
    }
    for reduce, want in expected.items():
        np.testing.assert_array_equal(jgo.agg_weighted(g, x, w, reduce=reduce)[:, 0], want)
    # zero weight sum: zero gradients from that destination, for x and for w
    gx, gw = jax.grad(lambda x, w: jgo.agg_weighted(g, x, w, reduce="mean")[2, 0], (0, 1))(x, w)
    np.testing.assert_array_equal(gx, 0)
    np.testing.assert_array_equal(gw, 0)
    # mean gradient in w: <G, x_src - y> / W  (node 1: y = 3.5, W = 4)
    gw = jax.grad(lambda w: jgo.agg_weighted(g, x, w, reduce="mean")[1, 0])(w)
    np.testing.assert_allclose(gw, [(2 - 3.5) / 4, (4 - 3.5) / 4, 0, 0])
    np.testing.assert_array_equal(jgo.agg_concat(g, x, reduce="max"), [[0, 2], [4, 4], [8, 8]])
    np.testing.assert_array_equal(jgo.agg_simple(g, x, jnp.ones((4, 2)), reduce="sum"),
                                  [[0, 0, 0], [6, 2, 2], [10, 2, 2]])
    # ties: both in-edges of node 1 carry 5; the first in input order (edge 0, from node 0) wins
    tie = jnp.array([[5.0], [5.0], [1.0]])
    grad = jax.grad(lambda x: jgo.agg_simple(g, x, reduce="max")[1, 0])(tie)
    np.testing.assert_array_equal(grad[:, 0], [1.0, 0.0, 0.0])


@pytest.mark.parametrize("order", [[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [1, 3, 0, 4, 2]])
@pytest.mark.parametrize("r", ["max", "min"])
def test_max_min_propagate_nan_in_any_edge_order(order, r):
    # node 0 receives edges 0-2 (NaN messages on edges 0 and 2 in feature 0), node 1 edges 3-4; edge k comes from
    # node k, so the orders change which NaN edge comes first
    nan = np.nan
    dst = np.array([0, 0, 0, 1, 1])[order]
    x = np.array([[nan, 1.0], [2.0, -3.0], [nan, 4.0], [5.0, 6.0], [-7.0, 8.0]], np.float32)[order]
    w = np.array([1.0, 2.0, -1.0, 0.5, 3.0], np.float32)[order]
    ef = x[:, ::-1] - 1
    g = jgo.Graph.from_edges(np.arange(5), dst, 5, 3)
    reduce_np, arg_np = (np.max, np.argmax) if r == "max" else (np.min, np.argmin)

    def agg(m):  # np.max / np.min per destination: NaN if any message is NaN; 0 without messages
        return np.stack([reduce_np(m[dst == i], axis=0) for i in (0, 1)] + [np.zeros(m.shape[1], np.float32)])

    def grad_w(coef):  # d sum(agg(w x) * coef) / dw: the first NaN edge (else the first extreme) of each element
        grad = np.zeros_like(w)
        for i in (0, 1):
            edges = np.flatnonzero(dst == i)
            for f, k in enumerate(edges[arg_np(w[edges, None] * x[edges], axis=0)]):
                grad[k] += coef[i, f] * x[k, f]
        return grad

    coef = np.arange(1.0, 7.0, dtype=np.float32).reshape(3, 2)
    weighted = lambda x, w, ef, impl=None: jgo.agg_weighted(g, x, w, reduce=r, impl=impl)  # noqa: E731
    simple = lambda x, w, ef, impl=None: jgo.agg_simple(g, x, ef, reduce=r, impl=impl)  # noqa: E731
    concat = lambda x, w, ef, impl=None: jgo.agg_concat(g, x, x_dst=x[:3], edge_feat=ef, edge_weight=w,  # noqa: E731
                                                         reduce=r, impl=impl)
    cases = {"agg_simple": (simple, np.concatenate([agg(x), agg(ef)], axis=1)),
             "agg_weighted": (weighted, agg(w[:, None] * x)),
             "agg_concat": (concat, np.concatenate([agg(w[:, None] * x), agg(ef), x[:3]], axis=1))}
    for name, (fn, want) in cases.items():
        np.testing.assert_array_equal(fn(x, w, ef), want, err_msg=name)
        np.testing.assert_array_equal(fn(x, w, ef, impl="xla"), want, err_msg=name)
        c = np.resize(coef, want.shape)
        loss = lambda impl: lambda *a: jnp.sum(fn(*a, impl=impl) * c)  # noqa: E731
        (gx, gw, gef), (rx, rw, ref) = (jax.grad(loss(impl), (0, 1, 2))(x, w, ef) for impl in (None, "xla"))
        np.testing.assert_array_equal(gx, rx, err_msg=name)
        np.testing.assert_array_equal(gef, ref, err_msg=name)
        # the weight of a losing NaN edge gets exactly 0, never 0 * NaN (the reference recomputes the winning message
        # from the winning edge's operands)
        if name != "agg_simple":
            np.testing.assert_array_equal(gw, grad_w(c), err_msg=name)
            np.testing.assert_array_equal(rw, grad_w(c), err_msg=name)


def test_zero_edge_graph(reduce):
    g = jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 3, 2)
    x = jnp.ones((3, 2))
    assert jgo.agg_weighted(g, x, jnp.ones(0), reduce=reduce).shape == (2, 2)
    np.testing.assert_array_equal(jgo.agg_concat(g, x, x_dst=2 * x[:2], reduce=reduce), [[0, 0, 2, 2]] * 2)
    gx = jax.grad(lambda x: jgo.agg_weighted(g, x, jnp.ones(0), reduce=reduce).sum())(x)
    np.testing.assert_array_equal(gx, 0)


def test_first_order_reverse_runs_the_fused_kernels(rng):
    g = random_graph(rng)
    x, w, ef, x_dst = _inputs(rng, g, np.float32)
    for reduce in REDUCES:
        loss = lambda x, w: jnp.sum(jgo.agg_concat(g, x, x_dst=x_dst, edge_weight=w, reduce=reduce) ** 2)  # noqa: E731
        hlo = jax.jit(jax.grad(loss, (0, 1))).lower(x, w).as_text()
        assert hlo.count("jgo_spmm") >= 2 and "jgo_sddmm" in hlo, reduce
        assert "scatter" not in hlo, reduce


def test_errors(rng):
    g = random_graph(rng)
    x = np.ones((g.n_src, 3), np.float32)
    with pytest.raises(ValueError, match="give x, edge_feat or both"):
        jgo.agg_simple(g)
    with pytest.raises(ValueError, match="edge_weight must have 24 rows"):
        jgo.agg_weighted(g, x, np.ones(5, np.float32))
    with pytest.raises(ValueError, match=r"edge_weight must be \[n_edges\]"):
        jgo.agg_weighted(g, x, np.ones((24, 2), np.float32))
    with pytest.raises(ValueError, match="x_dst is required for a bipartite graph"):
        jgo.agg_concat(g, x)
    with pytest.raises(ValueError, match="reduce must be one of"):
        jgo.pool(x, np.zeros(7, np.int32), 1, reduce="prod")
    with pytest.raises(ValueError, match="graph_ids must be an integer array"):
        jgo.pool(x, np.zeros(3, np.int32), 1)
    with pytest.raises(ValueError, match="out of range"):
        jgo.pool(x, np.full(7, 4, np.int32), 2)
    # concrete jax ids closed over by a jitted function: the same error, not a staged read of the bad id
    bad = jnp.array([-1, 0, 0, 1, 1, 1, 1])
    for sorted_ids in (False, True):
        with pytest.raises(ValueError, match=r"pool: graph_ids\[0\] = -1 is out of range \[0, 2\)"):
            jax.jit(lambda x, s=sorted_ids: jgo.pool(x, bad, 2, ids_are_sorted=s))(x)


# ---------------------------------------------------------------------------------------
# clear errors (issue 19)


@pytest.mark.parametrize("impl", [None, "xla"])
def test_features_of_the_wrong_rank(rng, impl):
    """Rank-3 features used to surface raw jnp.concatenate / broadcasting errors; now each function names
    itself and the argument."""
    g = random_graph(rng, 7, 7, 24)
    x3, x2, w = jnp.ones((7, 2, 3)), jnp.ones((7, 3)), jnp.ones(24)
    with pytest.raises(ValueError, match=r"agg_concat: x must be \[n_src, F\] \(rank 2\); got shape \(7, 2, 3\)"):
        jgo.agg_concat(g, x3, impl=impl)
    with pytest.raises(ValueError, match=r"agg_concat: x_dst must be \[n_dst, Fd\] \(rank 2\)"):
        jgo.agg_concat(g, x2, x_dst=x3, impl=impl)
    with pytest.raises(ValueError, match=r"agg_concat: edge_feat must be \[n_edges, Fe\] \(rank 2\)"):
        jgo.agg_concat(g, x2, edge_feat=jnp.ones((24, 2, 2)), impl=impl)
    with pytest.raises(ValueError, match=r"agg_weighted: x must be \[n_src, F\] \(rank 2\)"):
        jgo.agg_weighted(g, x3, w, impl=impl)
    with pytest.raises(ValueError, match=r"agg_simple: x must be \[n_src, F\] \(rank 2\)"):
        jgo.agg_simple(g, x3, jnp.ones((24, 2)), impl=impl)
    with pytest.raises(ValueError, match=r"agg_concat: x_dst must have 7 rows"):
        jgo.agg_concat(g, x2, x_dst=jnp.ones((8, 3)), impl=impl)


def test_errors_name_the_function_and_suggest_options(rng):
    g = random_graph(rng)
    x = jnp.ones((g.n_src, 3))
    with pytest.raises(ValueError, match=r"agg_simple: reduce must be one of .*; got 'maxx' \(did you mean 'max'\?\)"):
        jgo.agg_simple(g, x, reduce="maxx")
    with pytest.raises(ValueError, match=r"agg_weighted: impl must be one of None, 'ffi', 'xla'; got 'XLA' "
                                         r"\(did you mean 'xla'\?\)"):
        jgo.agg_weighted(g, x, jnp.ones(g.n_edges), impl="XLA")
    with pytest.raises(ValueError, match=r"agg_concat: reduce must be one of .*\(did you mean 'mean'\?\)"):
        jgo.agg_concat(g, x, x_dst=jnp.ones((g.n_dst, 1)), reduce="mena")
    with pytest.raises(ValueError, match=r"pool: impl must be one of None, 'ffi', 'xla'; got 'xl' "
                                         r"\(did you mean 'xla'\?\)"):
        jgo.pool(x, jnp.zeros(g.n_src, jnp.int32), 1, impl="xl")
    with pytest.raises(TypeError, match=r"pool: x must be a floating-point array; got dtype int32"):
        jgo.pool(jnp.ones((3, 2), jnp.int32), jnp.zeros(3, jnp.int32), 1)


@pytest.mark.parametrize("impl", [None, "xla"])
def test_weighted_mean_where_the_weights_sum_to_zero(impl):
    """Where the in-edge weights sum to 0 the weighted mean is 0, unless a message is NaN: 0 x inf is NaN, as
    in every other reduce (the reference gave 0 there; found by the fuzzer, seed 22018). Oracle: the table."""
    g = jgo.Graph.from_edges(np.array([0, 1, 2, 2, 2]), np.array([0, 1, 2, 2, 3]), 3, 4)
    x = jnp.array([[-np.inf, 1.0], [np.nan, 2.0], [3.0, 4.0]])
    w = jnp.array([0.0, 0.0, 1.0, -1.0, 0.0])  # node 0: 0 x -inf; node 1: 0 x NaN; node 2: x2 - x2; node 3: 0 x x2
    out = np.asarray(jgo.agg_weighted(g, x, w, reduce="mean", impl=impl))
    np.testing.assert_array_equal(out, [[np.nan, 0], [np.nan, 0], [0, 0], [0, 0]])
