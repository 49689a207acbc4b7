"""gno_conv and edge_vectors against hand-computed cases and the materialising reference;
derivatives of every order; transforms; errors; radius_graph / knn_graph against brute force."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import check_grads, check_vmap, jit_jacfwd, jit_jacrev, kernel_index_error, kernel_only, random_graph

import jaxgraphops as jgo

KERNEL_FLAGS = [("matrix", False), ("matrix", True), ("diagonal", False), ("diagonal", True)]


def params(rng, g, d=2, hidden=4, c_in=3, c_out=2, kernel="matrix", weighted=False, dtype=np.float64):
    """(f, dx, U, b_u, V, b_v, w) of a random problem on g."""
    p = c_in if kernel == "diagonal" else c_out * c_in
    cast = lambda x: np.asarray(x, dtype)  # noqa: E731
    return (cast(rng.normal(size=(g.n_src, c_in))), cast(rng.normal(size=(g.n_edges, d))),
            cast(rng.normal(size=(hidden, d))), cast(rng.normal(size=hidden)), cast(rng.normal(size=(p, hidden))),
            cast(rng.normal(size=p)), cast(rng.uniform(0.2, 2.0, g.n_edges)) if weighted else None)


def conv(g, kernel, reduce, impl=None):
    return lambda f, dx, U, b_u, V, b_v, w=None: jgo.gno_conv(g, f, dx, U, b_u, V, b_v, kernel=kernel, reduce=reduce,
                                                             edge_weight=w, impl=impl)


def close(dtype):
    tol = 3e-4 if dtype == np.float32 else 1e-11
    return lambda a, b: np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# ---------------------------------------------------------------------------------------
# literal cases


def test_literal_matrix_kernel_by_hand():
    # edges 0 -> 1 (dx = (1, 0)) and 2 -> 1 (dx = (0, -1)); nodes 0 and 2 receive nothing
    g = jgo.Graph.from_edges(np.array([0, 2]), np.array([1, 1]), 3, 3)
    f = jnp.array([[1.0, 2.0], [0.0, 0.0], [3.0, -1.0]])
    dx = jnp.array([[1.0, 0.0], [0.0, -1.0]])
    U = jnp.array([[1.0, 0.0], [0.0, 1.0]])  # h_e = relu(dx_e): (1, 0) and (0, 0)
    b_u = jnp.zeros(2)
    # kappa_e = V h_e + b_v viewed (c_out=1, c_in=2): edge 0: (2, 1) + (0, 1) = (2, 2); edge 1: b_v = (0, 1)
    V = jnp.array([[2.0, 5.0], [1.0, 7.0]])
    b_v = jnp.array([0.0, 1.0])
    msg0 = 2 * 1.0 + 2 * 2.0  # K_0 f_0
    msg1 = 0 * 3.0 + 1 * -1.0  # K_1 f_2
    out = jgo.gno_conv(g, f, dx, U, b_u, V, b_v, reduce="sum")
    np.testing.assert_allclose(out, [[0.0], [msg0 + msg1], [0.0]], rtol=1e-6)
    mean = jgo.gno_conv(g, f, dx, U, b_u, V, b_v, reduce="mean")
    np.testing.assert_allclose(mean, [[0.0], [(msg0 + msg1) / 2], [0.0]], rtol=1e-6)
    w = jnp.array([0.5, 3.0])
    np.testing.assert_allclose(jgo.gno_conv(g, f, dx, U, b_u, V, b_v, reduce="sum", edge_weight=w),
                               [[0.0], [0.5 * msg0 + 3.0 * msg1], [0.0]], rtol=1e-6)
    np.testing.assert_allclose(jgo.gno_conv(g, f, dx, U, b_u, V, b_v, reduce="mean", edge_weight=w),
                               [[0.0], [(0.5 * msg0 + 3.0 * msg1) / 3.5], [0.0]], rtol=1e-6)


def test_literal_diagonal_kernel_by_hand():
    g = jgo.Graph.from_edges(np.array([0, 1, 1]), np.array([1, 0, 0]), 2, 2)
    f = jnp.array([[1.0, -2.0], [4.0, 3.0]])
    dx = jnp.array([[2.0], [-1.0], [0.5]])
    U, b_u = jnp.array([[1.0]]), jnp.array([0.0])  # h = relu(dx): 2, 0, 0.5
    V, b_v = jnp.array([[1.0], [-1.0]]), jnp.array([1.0, 2.0])  # kappa = (h + 1, 2 - h)
    kappa = np.array([[3.0, 0.0], [1.0, 2.0], [1.5, 1.5]])
    node0 = kappa[1] * [4.0, 3.0] + kappa[2] * [4.0, 3.0]
    node1 = kappa[0] * [1.0, -2.0]
    out = jgo.gno_conv(g, f, dx, U, b_u, V, b_v, kernel="diagonal", reduce="sum")
    np.testing.assert_allclose(out, [node0, node1], rtol=1e-6)
    np.testing.assert_allclose(jgo.gno_conv(g, f, dx, U, b_u, V, b_v, kernel="diagonal"), [node0 / 2, node1],
                               rtol=1e-6)


def test_edge_vectors_by_hand_and_gradient():
    g = jgo.Graph.from_edges(np.array([0, 1, 1]), np.array([1, 0, 1]), 2, 2)
    pos = jnp.array([[0.0, 1.0], [2.0, 5.0]])
    np.testing.assert_array_equal(jgo.edge_vectors(g, pos), [[2.0, 4.0], [-2.0, -4.0], [0.0, 0.0]])
    gb = jgo.Graph.from_edges(np.array([0, 1]), np.array([0, 0]), 2, 1)
    np.testing.assert_array_equal(jgo.edge_vectors(gb, pos, jnp.array([[1.0, 1.0]])), [[1.0, 0.0], [-1.0, -4.0]])
    grad = jax.grad(lambda p: jnp.sum(jgo.edge_vectors(g, p)[:, 0] * jnp.array([1.0, 2.0, 3.0])))(pos)
    np.testing.assert_array_equal(grad, [[-1.0 + 2.0, 0.0], [1.0 - 2.0 + 3.0 - 3.0, 0.0]])


def test_empty_graph_and_isolated_destinations(rng):
    g = jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 3, 2)
    f, dx, U, b_u, V, b_v, _ = params(rng, g, dtype=np.float32)
    out = jgo.gno_conv(g, f, dx, U, b_u, V, b_v)
    np.testing.assert_array_equal(out, np.zeros((2, 2)))
    grads = jax.grad(lambda *a: jnp.sum(jgo.gno_conv(g, *a) ** 2), tuple(range(6)))(f, dx, U, b_u, V, b_v)
    for x in grads:
        np.testing.assert_array_equal(x, 0)


# ---------------------------------------------------------------------------------------
# reference parity


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("kernel,weighted", KERNEL_FLAGS)
def test_matches_reference(x64, rng, index_dtype, dtype, reduce, kernel, weighted):
    g = random_graph(rng, 9, 8, 60, index_dtype=index_dtype)
    args = params(rng, g, d=3, hidden=6, c_in=4, c_out=3, kernel=kernel, weighted=weighted, dtype=dtype)
    out = conv(g, kernel, reduce)(*args)
    assert out.dtype == dtype and out.shape == (8, 4 if kernel == "diagonal" else 3)
    close(dtype)(out, conv(g, kernel, reduce, "xla")(*args))
    # first-order gradients of every input run the fused backward kernels
    loss = lambda fn: lambda *a: jnp.sum(jnp.sin(fn(*a)))  # noqa: E731
    n = 7 if weighted else 6
    grads = jax.grad(loss(conv(g, kernel, reduce)), tuple(range(n)))(*args[:n])
    grads_ref = jax.grad(loss(conv(g, kernel, reduce, "xla")), tuple(range(n)))(*args[:n])
    jax.tree_util.tree_map(close(dtype), grads, grads_ref)


def test_larger_sizes_match_reference(rng):
    # several row tiles and tasks, c_out != c_in, wide hidden layer
    g = random_graph(rng, 300, 200, 5000)
    args = params(rng, g, d=2, hidden=37, c_in=5, c_out=7, weighted=True, dtype=np.float32)
    f = conv(g, "matrix", "mean")
    np.testing.assert_allclose(f(*args), conv(g, "matrix", "mean", "xla")(*args), rtol=1e-4, atol=1e-4)
    loss = lambda fn: lambda *a: jnp.sum(fn(*a) ** 2)  # noqa: E731
    grads = jax.grad(loss(f), tuple(range(7)))(*args)
    grads_ref = jax.grad(loss(conv(g, "matrix", "mean", "xla")), tuple(range(7)))(*args)
    jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-3), grads, grads_ref)


@pytest.mark.parametrize("kernel,weighted", KERNEL_FLAGS)
def test_nan_in_dx_propagates_like_the_reference(x64, rng, kernel, weighted):
    # relu(NaN) = NaN in the kernel MLP, as jax.nn.relu: the rows the edge reaches are NaN, nothing else
    g = random_graph(rng, 7, 6, 24)
    args = params(rng, g, kernel=kernel, weighted=weighted)
    args = list(args if weighted else args[:6])
    args[1][5, 0] = np.nan
    i = int(g.dst[5])
    out, ref = conv(g, kernel, "mean")(*args), conv(g, kernel, "mean", "xla")(*args)
    np.testing.assert_allclose(out, ref, rtol=1e-11, atol=1e-11)
    assert np.isnan(out[i]).all() and not np.isnan(np.delete(np.asarray(out), i, axis=0)).any()
    # linear in out, so the cotangent stays finite; relu'(NaN) = 0, and NaN where the chain rule gives it
    coef = rng.uniform(0.5, 1.5, size=out.shape)
    loss = lambda impl: lambda *a: jnp.sum(conv(g, kernel, "mean", impl)(*a) * coef)  # noqa: E731
    got = jax.grad(loss(None), tuple(range(len(args))))(*args)
    want = jax.grad(loss("xla"), tuple(range(len(args))))(*args)
    jax.tree_util.tree_map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-10), got, want)
    assert np.isfinite(got[1]).all()


def test_half_precision_computes_in_float32(rng):
    g = random_graph(rng)
    args = [x.astype(np.float16) for x in params(rng, g, dtype=np.float32)[:6]]
    out = conv(g, "matrix", "mean")(*args)
    assert out.dtype == np.float16
    ref = conv(g, "matrix", "mean", "xla")(*[x.astype(np.float32) for x in args])
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=1e-2, atol=1e-2)


# ---------------------------------------------------------------------------------------
# derivatives


@pytest.mark.parametrize("kernel,weighted", KERNEL_FLAGS)
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_check_grads_order2(x64, rng, kernel, weighted, reduce):
    g = random_graph(rng, 5, 4, 12)
    args = params(rng, g, d=2, hidden=3, c_in=2, c_out=2, kernel=kernel, weighted=weighted)
    args = args if weighted else args[:6]
    check_grads(conv(g, kernel, reduce), args, order=2, modes=("fwd", "rev"), eps=1e-5)


def test_hessian_matches_reference(x64, rng):
    g = random_graph(rng, 5, 4, 12)
    args = params(rng, g, d=2, hidden=3, c_in=2, c_out=2, weighted=True)

    def loss(impl):
        return lambda *a: jnp.sum(jnp.tanh(conv(g, "matrix", "mean", impl)(*a)) ** 2)

    h = jax.jit(jax.hessian(loss(None), tuple(range(7))))(*args)
    h_ref = jax.jit(jax.hessian(loss("xla"), tuple(range(7))))(*args)
    jax.tree_util.tree_map(lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-9, atol=1e-10), h, h_ref)


def test_position_gradients_through_edge_vectors(x64, rng):
    g = random_graph(rng, 6, 6, 20)
    f, _, U, b_u, V, b_v, _ = params(rng, g)
    pos = rng.normal(size=(6, 2))

    def energy(impl):
        return lambda p: jnp.sum(conv(g, "matrix", "sum", impl)(f, jgo.edge_vectors(g, p), U, b_u, V, b_v) ** 2)

    np.testing.assert_allclose(jax.grad(energy(None))(pos), jax.grad(energy("xla"))(pos), rtol=1e-10, atol=1e-12)
    check_grads(energy(None), (pos,), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("kernel", ["matrix", "diagonal"])
def test_reverse_mode_runs_the_fused_backward_kernels(rng, kernel):
    g = random_graph(rng)
    args = params(rng, g, kernel=kernel, weighted=True, dtype=np.float32)
    loss = lambda *a: jnp.sum(conv(g, kernel, "mean")(*a) ** 2)  # noqa: E731
    hlo = jax.jit(jax.grad(loss, tuple(range(7)))).lower(*args).as_text()
    for target in ("jgo_gno_fwd", "jgo_gno_bwd_src", "jgo_gno_bwd_dst"):
        assert f'custom_call_target = "{target}"' in hlo or f"@{target}" in hlo, target
    # kappa [E, c_out * c_in] is never formed: no dot produces a tensor with E rows and P columns
    p = args[4].shape[0]
    assert f"tensor<{g.n_edges}x{p}xf32>" not in hlo
    # only the parameters needed run: grad of f alone needs only the CSR pass
    hlo_f = jax.jit(jax.grad(loss)).lower(*args).as_text()
    assert "jgo_gno_bwd_src" in hlo_f and "jgo_gno_bwd_dst" not in hlo_f


def test_backward_is_deterministic(rng):
    g = random_graph(rng, 200, 200, 3000)
    args = params(rng, g, hidden=16, c_in=8, c_out=8, weighted=True, dtype=np.float32)
    grad = jax.jit(jax.grad(lambda *a: jnp.sum(conv(g, "matrix", "mean")(*a) ** 3), tuple(range(7))))
    first = grad(*args)
    for _ in range(3):
        jax.tree_util.tree_map(np.testing.assert_array_equal, grad(*args), first)


# ---------------------------------------------------------------------------------------
# transforms


def test_jit_jvp_and_jacobians(rng):
    g = random_graph(rng)
    args = params(rng, g, weighted=True, dtype=np.float32)
    f, r = conv(g, "matrix", "mean"), conv(g, "matrix", "mean", "xla")
    c = lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-4)  # noqa: E731
    c(jax.jit(f)(*args), r(*args))
    c(jax.jit(lambda g, x: conv(g, "matrix", "mean")(x, *args[1:]))(g, args[0]), r(*args))
    tangents = tuple(np.ones_like(x) for x in args)
    c(jax.jvp(f, args, tangents)[1], jax.jvp(r, args, tangents)[1])
    for jac in (jit_jacfwd, jit_jacrev):
        jax.tree_util.tree_map(c, jac(f, (0, 1, 4, 6))(*args), jac(r, (0, 1, 4, 6))(*args))


@pytest.mark.parametrize("kernel", ["matrix", "diagonal"])
def test_vmap(rng, kernel):
    g = random_graph(rng)
    args = params(rng, g, kernel=kernel, weighted=True, dtype=np.float32)
    f, r = conv(g, kernel, "mean"), conv(g, kernel, "mean", "xla")
    c = lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-4)  # noqa: E731
    check_vmap(f, r, args, c, lambda fn: lambda *a: jnp.sum(fn(*a) ** 2), argnums=(0, 1, 4))


def test_vmap_over_graphs(rng):
    graphs = [random_graph(np.random.default_rng(s)) for s in range(3)]
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *graphs)
    f, dx, U, b_u, V, b_v, w = params(rng, graphs[0], weighted=True, dtype=np.float32)
    out = jax.vmap(lambda g: conv(g, "matrix", "mean")(f, dx, U, b_u, V, b_v, w))(stacked)
    for i, g in enumerate(graphs):
        np.testing.assert_allclose(out[i], conv(g, "matrix", "mean", "xla")(f, dx, U, b_u, V, b_v, w), rtol=1e-4,
                                   atol=1e-4)


# ---------------------------------------------------------------------------------------
# errors


def test_trace_time_errors(rng):
    g = random_graph(rng)  # 7 sources, 6 destinations, 24 edges
    f, dx, U, b_u, V, b_v, _ = params(rng, g, dtype=np.float32)
    with pytest.raises(ValueError, match="kernel must be one of"):
        jgo.gno_conv(g, f, dx, U, b_u, V, b_v, kernel="full")
    with pytest.raises(ValueError, match="reduce must be one of"):
        jgo.gno_conv(g, f, dx, U, b_u, V, b_v, reduce="max")
    with pytest.raises(ValueError, match="f_src must have 7 rows"):
        jgo.gno_conv(g, f[:3], dx, U, b_u, V, b_v)
    with pytest.raises(ValueError, match="dx must have 24 rows"):
        jgo.gno_conv(g, f, dx[:5], U, b_u, V, b_v)
    with pytest.raises(ValueError, match="U must be"):
        jgo.gno_conv(g, f, dx, U[:, :1], b_u, V, b_v)
    with pytest.raises(ValueError, match="b_u must be"):
        jgo.gno_conv(g, f, dx, U, b_u[:2], V, b_v)
    with pytest.raises(ValueError, match="V must be \\[c_out \\* c_in, H\\]"):
        jgo.gno_conv(g, f, dx, U, b_u, V[:5], b_v)
    with pytest.raises(ValueError, match="V must be \\[c_in, H\\]"):
        jgo.gno_conv(g, f, dx, U, b_u, V, b_v, kernel="diagonal")
    with pytest.raises(ValueError, match="b_v must be"):
        jgo.gno_conv(g, f, dx, U, b_u, V, b_v[:3])
    with pytest.raises(ValueError, match="edge_weight must be"):
        jgo.gno_conv(g, f, dx, U, b_u, V, b_v, edge_weight=np.ones(5, np.float32))
    with pytest.raises(TypeError, match="f_src must be a floating-point array"):
        jgo.gno_conv(g, f.astype(np.int32), dx, U, b_u, V, b_v)
    with pytest.raises(TypeError, match="g must be a jaxgraphops.Graph"):
        jgo.gno_conv(None, f, dx, U, b_u, V, b_v)
    with pytest.raises(ValueError, match="pos_dst is required for a bipartite graph"):
        jgo.edge_vectors(g, np.zeros((7, 2)))
    with pytest.raises(ValueError, match="pos_src must have 7 rows"):
        jgo.edge_vectors(g, np.zeros((6, 2)), np.zeros((6, 2)))


def test_out_of_range_index_reaching_the_kernel_is_an_error(rng):
    g = random_graph(rng, 7, 7, 24)
    args = params(rng, g, dtype=np.float32)[:6]
    bad = jgo.Graph(*(jnp.asarray(v) for v in (g.src, g.dst, g.csc_offsets, g.csc_src.at[3].set(99), g.csc_eid,
                                               g.csr_offsets, g.csr_dst, g.csr_eid)), g.n_src, g.n_dst, validate=False)
    bad = kernel_only(bad)  # past the Python check, to the kernels' own
    with kernel_index_error(".*gno_fwd.*node index 99"):
        conv(bad, "matrix", "sum")(*args).block_until_ready()
    bad_csr = jgo.Graph(*(jnp.asarray(v) for v in (g.src, g.dst, g.csc_offsets, g.csc_src, g.csc_eid,
                                                   g.csr_offsets, g.csr_dst.at[0].set(-4), g.csr_eid)), g.n_src, g.n_dst,
                        validate=False)
    bad_csr = kernel_only(bad_csr)  # past the Python check, to the kernels' own
    with kernel_index_error(".*gno_bwd_src.*node index -4"):
        jax.grad(lambda x: jnp.sum(conv(bad_csr, "matrix", "sum")(x, *args[1:])))(args[0]).block_until_ready()


# ---------------------------------------------------------------------------------------
# neighbour graphs against brute force


def brute_force_radius(src, dst, r):
    dist = np.sqrt(((dst[:, None, :] - src[None, :, :]) ** 2).sum(-1))
    i, j = np.nonzero(dist <= r)  # row-major: grouped by destination, sources increasing
    return j, i


@pytest.mark.parametrize("bipartite", [False, True])
def test_radius_graph_matches_brute_force(rng, bipartite):
    src = rng.uniform(size=(300, 2))
    dst = rng.uniform(size=(150, 2)) if bipartite else None
    g = jgo.radius_graph(src, dst, 0.1)
    j, i = brute_force_radius(src, src if dst is None else dst, 0.1)
    if not bipartite:  # one point set: no self loops by default (PyG's loop=False)
        j, i = j[j != i], i[j != i]
    np.testing.assert_array_equal(g.src, j)
    np.testing.assert_array_equal(g.dst, i)
    assert (g.n_src, g.n_dst) == (300, 150 if bipartite else 300)


def test_radius_and_knn_graphs_leave_out_self_loops_unless_asked():
    """Issue 34: ``radius_graph`` kept every point's self loop with no way to leave it out, where PyG's defaults to
    ``loop=False``: a force or direction from ``pos[src] - pos[dst]`` was NaN at distance 0. Both builders take
    ``loop`` now, False by default (PyG's); ``loop=True`` keeps the old graphs (a GNO's ball around each point)."""
    pos = np.array([[0.0, 0.0], [0.5, 0.0], [0.0, 0.6], [3.0, 3.0]])
    g = jgo.radius_graph(pos, None, 1.0)
    assert sorted(zip(g.src.tolist(), g.dst.tolist())) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    vec = jgo.edge_vectors(g, jnp.asarray(pos, jnp.float32))
    assert np.all(np.linalg.norm(vec, axis=1) > 0)  # no zero-length edge: finite unit vectors and 1/r
    loops = jgo.radius_graph(pos, None, 1.0, loop=True)
    assert sorted(zip(loops.src.tolist(), loops.dst.tolist())) == sorted(
        [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1), (0, 0), (1, 1), (2, 2), (3, 3)])
    near = jgo.radius_graph(pos, None, 1.0, max_num_neighbors=1)  # the nearest other point within r
    assert near.src.tolist() == [1, 0, 0] and near.dst.tolist() == [0, 1, 2]
    k = jgo.knn_graph(pos, None, 2)  # the two nearest other points
    assert k.src.tolist() == [1, 2, 0, 2, 0, 1, 1, 2] and k.dst.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    k_loops = jgo.knn_graph(pos, None, 2, loop=True)  # the point itself and its nearest other point
    assert k_loops.src.tolist() == [0, 1, 0, 1, 0, 2, 2, 3]
    dup = jgo.knn_graph(np.zeros((4, 2)), None, 2)  # all at distance 0: never the point itself
    assert (np.asarray(dup.src) != np.asarray(dup.dst)).all() and dup.n_edges == 8


def test_radius_graph_max_num_neighbors_keeps_the_nearest(rng):
    src, dst = rng.uniform(size=(200, 3)), rng.uniform(size=(40, 3))
    g = jgo.radius_graph(src, dst, 0.4, max_num_neighbors=5, index_dtype=np.int32)
    dist = np.sqrt(((dst[:, None] - src[None]) ** 2).sum(-1))
    gs, gd = np.asarray(g.src), np.asarray(g.dst)
    for i in range(40):
        inside = np.flatnonzero(dist[i] <= 0.4)
        expect = np.sort(inside[np.argsort(dist[i, inside], kind="stable")[:5]])
        np.testing.assert_array_equal(gs[gd == i], expect)


def test_knn_graph_matches_brute_force(rng):
    src, dst = rng.uniform(size=(120, 2)), rng.uniform(size=(30, 2))
    g = jgo.knn_graph(src, dst, 4)
    dist = ((dst[:, None] - src[None]) ** 2).sum(-1)
    expect = np.sort(np.argsort(dist, axis=1)[:, :4], axis=1).ravel()
    np.testing.assert_array_equal(g.src, expect)
    np.testing.assert_array_equal(g.dst, np.repeat(np.arange(30), 4))
    self_g = jgo.knn_graph(src, None, 1, loop=True)  # every point is its own nearest neighbour
    np.testing.assert_array_equal(self_g.src, np.arange(120))
    others = jgo.knn_graph(src, None, 3)  # loop=False: the 3 nearest other points
    dist = ((src[:, None] - src[None]) ** 2).sum(-1)
    np.fill_diagonal(dist, np.inf)
    np.testing.assert_array_equal(others.src, np.sort(np.argsort(dist, axis=1)[:, :3], axis=1).ravel())


def test_neighbor_errors():
    with pytest.raises(ValueError, match="r must be a finite number"):
        jgo.radius_graph(np.zeros((3, 2)), None, -1.0)
    with pytest.raises(ValueError, match="same dimension d"):
        jgo.radius_graph(np.zeros((3, 2)), np.zeros((3, 3)), 1.0)
    with pytest.raises(ValueError, match="max_num_neighbors must be a positive int"):
        jgo.radius_graph(np.zeros((3, 2)), None, 1.0, max_num_neighbors=0)
    with pytest.raises(ValueError, match="k=4 exceeds the number of source points"):
        jgo.knn_graph(np.zeros((3, 2)), None, 4, loop=True)
    with pytest.raises(ValueError, match=r"knn_graph: k=3 exceeds the number of other points \(loop=False"):
        jgo.knn_graph(np.zeros((3, 2)), None, 3)
    with pytest.raises(ValueError, match=r"radius_graph: loop=True adds self loops to one point set \(pos_dst=None\)"):
        jgo.radius_graph(np.zeros((3, 2)), np.zeros((2, 2)), 1.0, loop=True)
    with pytest.raises(TypeError, match="knn_graph: loop must be a bool; got 'yes'"):
        jgo.knn_graph(np.zeros((3, 2)), None, 1, loop="yes")
    with pytest.raises(ValueError, match="pos_src must be \\[n, d\\]"):
        jgo.knn_graph(np.zeros(3), None, 1)


@pytest.mark.parametrize("hidden", [5000, 20000])
@pytest.mark.parametrize("kernel", ["matrix", "diagonal"])
def test_wide_kernel_mlp(rng, x64, hidden, kernel):
    """Hidden widths whose per-block vectors exceed 48 KiB (the CUDA kernels raise their shared
    memory limit) and 227 KiB (they move them to global memory), forward and gradients."""
    g = random_graph(rng, 5, 4, 9)
    args = params(rng, g, hidden=hidden, c_in=2, c_out=2, kernel=kernel, weighted=True)
    args = (args[0], args[1], args[2] / np.sqrt(hidden), *args[3:])
    loss = lambda impl: lambda *a: jnp.sum(jnp.sin(conv(g, kernel, "sum", impl)(*a)))  # noqa: E731
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)  # noqa: E731 (sums of 20k terms)
    close(conv(g, kernel, "sum")(*args), conv(g, kernel, "sum", "xla")(*args))
    for got, want in zip(jax.grad(loss(None), tuple(range(7)))(*args), jax.grad(loss("xla"), tuple(range(7)))(*args)):
        close(got, want)


# ---------------------------------------------------------------------------------------
# zero edges and zero-width features (issue 19: ZeroDivisionError)


@pytest.mark.parametrize("kernel", ["matrix", "diagonal"])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
def test_graph_without_edges(kernel, reduce, weighted):
    """The reference (impl="xla") used to raise ZeroDivisionError on a graph with 0 edges; both give 0 and zero
    gradients."""
    g = jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 4, 3)
    rng = np.random.default_rng(0)
    c_in, c_out, h, d = 2, 3, 4, 2
    p = c_in if kernel == "diagonal" else c_out * c_in
    args = [jnp.asarray(rng.normal(size=s), jnp.float32) for s in ((4, c_in), (0, d), (h, d), (h,), (p, h), (p,))]
    w = jnp.zeros(0) if weighted else None
    for impl in (None, "xla"):
        def f(*a):
            return jgo.gno_conv(g, *a, kernel=kernel, reduce=reduce, edge_weight=w, impl=impl)
        out = f(*args)
        assert out.shape == (3, c_in if kernel == "diagonal" else c_out)
        np.testing.assert_array_equal(out, 0)
        for grad in jax.grad(lambda *a: jnp.sum(f(*a)), argnums=tuple(range(6)))(*args):
            np.testing.assert_array_equal(grad, 0)


def test_zero_width_features():
    """c_in = 0: the diagonal kernel gives [n_dst, 0] (both implementations); the matrix kernel cannot read c_out
    from V [c_out * 0, H] and says so (the fused op used to raise ZeroDivisionError)."""
    g = jgo.Graph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
    f, dx, U, b_u = jnp.ones((3, 0)), jnp.ones((3, 2)), jnp.ones((4, 2)), jnp.ones(4)
    for impl in (None, "xla"):
        out = jgo.gno_conv(g, f, dx, U, b_u, jnp.ones((0, 4)), jnp.ones(0), kernel="diagonal", impl=impl)
        assert out.shape == (3, 0)
        with pytest.raises(ValueError, match=r"gno_conv: f_src has no features \(shape \(3, 0\)\); kernel='matrix'"):
            jgo.gno_conv(g, f, dx, U, b_u, jnp.ones((4, 4)), jnp.ones(4), kernel="matrix", impl=impl)


def test_misspelt_options_are_suggested():
    g = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 0]))
    args = (jnp.ones((2, 1)), jnp.ones((2, 1)), jnp.ones((1, 1)), jnp.ones(1), jnp.ones((1, 1)), jnp.ones(1))
    with pytest.raises(ValueError, match=r"gno_conv: kernel must be one of 'matrix', 'diagonal'; got 'diagnal' "
                                         r"\(did you mean 'diagonal'\?\)"):
        jgo.gno_conv(g, *args, kernel="diagnal")
    with pytest.raises(ValueError, match=r"gno_conv: reduce must be one of 'sum', 'mean'; got 'maen' "
                                         r"\(did you mean 'mean'\?\)"):
        jgo.gno_conv(g, *args, reduce="maen")
