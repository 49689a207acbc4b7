"""Invalid edge lists and hand-built graphs: errors naming the array, the id and the edge, never a
silently remapped node. Oracle: the ids planted in the inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo
from jaxgraphops.graph import Graph

N = 4
SRC = np.array([0, 1, 2, 3, 1], np.int32)
DST = np.array([1, 2, 3, 0, 0], np.int32)
KEY = jax.random.PRNGKey(0)
X = jax.random.normal(KEY, (N, 4))
W = jnp.linspace(0.5, 1.5, SRC.size)


# Every public op family, called on a graph built from (src, dst) inside the jitted function.
# "gspmm max" never reads a src id through the edge weights, "copy_e" never reads src at all.
def _ops(impl):
    return {
        "gspmm sum": lambda g: jgo.gspmm(g, X, op="copy_u", reduce="sum", impl=impl),
        "gspmm max copy_e": lambda g: jgo.gspmm(g, e=W[:, None], op="copy_e", reduce="max", impl=impl),
        "gsddmm": lambda g: jgo.gsddmm(g, X, X, op="dot", impl=impl),
        "edge_softmax": lambda g: jgo.edge_softmax(g, W, impl=impl),
        "agg_simple": lambda g: jgo.agg_simple(g, X, reduce="mean", impl=impl),
        "agg_weighted": lambda g: jgo.agg_weighted(g, X, W, impl=impl),
        "agg_concat": lambda g: jgo.agg_concat(g, X, x_dst=X, impl=impl),
        "mha_gat": lambda g: jgo.mha_gat(g, X, jnp.ones(8), num_heads=2, impl=impl),
        "mha_gat_v2": lambda g: jgo.mha_gat_v2(g, X, X, jnp.ones(4), num_heads=2, impl=impl),
        "mha_simple": lambda g: jgo.mha_simple(g, X, X, X, num_heads=2, impl=impl),
        "gno_conv": lambda g: jgo.gno_conv(g, X, jnp.ones((SRC.size, 2)), jnp.ones((3, 2)), jnp.zeros(3),
                                           jnp.ones((16, 3)), jnp.zeros(16), impl=impl),
        "edge_vectors": lambda g: jgo.edge_vectors(g, X[:, :3]),
        "in_degrees": lambda g: g.in_degrees(),
    }


OPS = [(name, impl) for impl in (None, "xla") for name in _ops(impl)]


def _run(op, src, dst):
    return jax.jit(lambda s, d: jnp.sum(op(Graph.from_edges(s, d, N, N)).astype(jnp.float32)))(src, dst)


@pytest.mark.parametrize("name,impl", OPS, ids=[f"{n}-{i or 'ffi'}" for n, i in OPS])
@pytest.mark.parametrize("array,pos,value", [("dst", 1, -1), ("dst", 4, N), ("src", 2, -3), ("src", 0, 2**20)])
def test_invalid_id_under_jit_names_the_array_and_edge(name, impl, array, pos, value):
    op = _ops(impl)[name]
    src, dst = SRC.copy(), DST.copy()
    {"src": src, "dst": dst}[array][pos] = value
    expected = np.asarray(_run(op, jnp.asarray(SRC), jnp.asarray(DST)))  # the valid graph runs
    assert np.isfinite(expected).all()
    with pytest.raises(jax.errors.JaxRuntimeError,
                       match=rf"Graph\.from_edges: {array} id {value} at edge {pos} out of range \[0, {N}\)"):
        np.asarray(_run(op, jnp.asarray(src), jnp.asarray(dst)))


@pytest.mark.parametrize("dtype", [np.int64, np.uint32])
def test_ids_are_checked_before_they_are_narrowed(x64, dtype):
    """Issue 34: with x64 on and ``index_dtype=int32``, ``from_edges`` under ``jit`` cast traced ids to int32 before
    checking them, so id 2^32 + 1 became node 1 silently (eager, and with int64 under ``jit``, it is refused). A
    uint32 id from 2^31 on is refused too, never wrapped to a negative or small id."""
    big = 2**32 + 1 if dtype == np.int64 else 2**31 + 1
    src = np.array([0, big, 2], dtype)
    dst = np.array([1, 2, 0], dtype)
    build = jax.jit(lambda s, d: Graph.from_edges(s, d, N, N, index_dtype=np.int32).in_degrees())
    with pytest.raises(jax.errors.JaxRuntimeError, match=rf"Graph\.from_edges: src id {big} at edge 1 out of range"):
        np.asarray(build(src, dst))
    np.testing.assert_array_equal(build(np.array([0, 1, 2], dtype), dst), [1, 1, 1, 0])


def test_invalid_id_under_jit_fails_grad_too():
    dst = DST.copy()
    dst[3] = -1
    fn = jax.jit(jax.grad(lambda x, s, d: jgo.gspmm(Graph.from_edges(s, d, N, N), x).sum()))
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"dst id -1 at edge 3 out of range \[0, 4\)"):
        np.asarray(fn(X, jnp.asarray(SRC), jnp.asarray(dst)))
    np.testing.assert_array_equal(fn(X, jnp.asarray(SRC), jnp.asarray(DST)),
                                  np.bincount(SRC, minlength=N)[:, None] * np.ones((1, 4)))


def test_invalid_id_under_jit_fails_where_no_id_is_read():
    """XLA needs no id of a graph with one node per side (a gather from a one-row array reads no index)
    nor of an unused graph: the check still runs (found by the fuzzer, seed 4775)."""
    x = jnp.ones((1, 2))
    sddmm = lambda s, d: jgo.gsddmm(Graph.from_edges(s, d, 1, 1), x, x, op="div", lhs_target="v",  # noqa: E731
                                    rhs_target="v", impl="xla")
    unused = lambda s, d: (Graph.from_edges(s, d, 1, 1), x)[1]  # noqa: E731
    for fn in (sddmm, unused):
        np.testing.assert_array_equal(jax.jit(fn)(jnp.array([0]), jnp.array([0])), x)
        with pytest.raises(jax.errors.JaxRuntimeError, match=r"src id -2 at edge 0 out of range \[0, 1\)"):
            np.asarray(jax.jit(fn)(jnp.array([-2]), jnp.array([0])))


def test_first_bad_id_of_a_long_edge_list_is_named():
    # spans many of the CPU kernel's chunks (65536 ids each); the first bad edge is reported
    E = 300_000
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 1000, E).astype(np.int32), rng.integers(0, 1000, E).astype(np.int32)
    dst[[200_001, 70_000, 299_999]] = [5000, -2, 1000]
    fn = jax.jit(lambda s, d: Graph.from_edges(s, d, 1000, 1000).csc_offsets)
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"dst id -2 at edge 70000 out of range \[0, 1000\)"):
        np.asarray(fn(src, dst))
    src[123_456] = -7  # src is checked first
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"src id -7 at edge 123456 "):
        np.asarray(fn(src, dst))


def test_valid_graph_under_jit_equals_the_eager_graph():
    g = jax.jit(lambda s, d: Graph.from_edges(s, d, N, N))(jnp.asarray(SRC), jnp.asarray(DST))
    ref = Graph.from_edges(SRC, DST, N, N)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(ref)):
        np.testing.assert_array_equal(a, b)


def test_vmapped_edge_lists_are_checked_per_batch_row():
    src = jnp.stack([jnp.asarray(SRC), jnp.asarray(SRC)])
    dst = jnp.stack([jnp.asarray(DST), jnp.asarray(DST).at[2].set(7)])
    fn = jax.jit(jax.vmap(lambda s, d: Graph.from_edges(s, d, N, N).in_degrees()))
    np.testing.assert_array_equal(fn(src, src % N)[0], np.bincount(SRC, minlength=N))
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"dst id 7 at edge 2 of batch row 1 out of range"):
        np.asarray(fn(src, dst))


def test_empty_edge_list_under_jit():
    e = jnp.zeros((0,), jnp.int32)
    g = jax.jit(lambda s, d: Graph.from_edges(s, d, 3, 3))(e, e)
    np.testing.assert_array_equal(g.csc_offsets, [0, 0, 0, 0])


def test_int64_edge_lists_under_jit():
    with jax.enable_x64(True):
        src, dst = jnp.asarray(SRC, jnp.int64), jnp.asarray(DST, jnp.int64).at[0].set(-(2**40))
        fn = jax.jit(lambda s, d: Graph.from_edges(s, d, N, N).csr_offsets)
        with pytest.raises(jax.errors.JaxRuntimeError, match=rf"dst id {-(2**40)} at edge 0 out of range"):
            np.asarray(fn(src, dst))


# -- hand-built graphs -----------------------------------------------------------------------

def _arrays(g):
    return {n: np.asarray(getattr(g, n)) for n in ("src", "dst", "csc_offsets", "csc_src", "csc_eid",
                                                     "csr_offsets", "csr_dst", "csr_eid")}


@pytest.mark.parametrize("field,pos,value,match", [
    ("dst", 1, -1, r"Graph: g\.dst\[1\] = -1 is out of range \[0, 4\)"),
    ("src", 0, 4, r"Graph: g\.src\[0\] = 4 is out of range \[0, 4\)"),
    ("csc_src", 2, 3, r"Graph: g\.csc_src\[2\] = 3, but its edge g\.csc_eid\[2\] = 0 has src 0"),
    ("csr_dst", 0, 3, r"Graph: g\.csr_dst\[0\] = 3, but its edge g\.csr_eid\[0\] = 0 has dst 1"),
    ("csc_eid", 0, 1, r"g\.csc_eid must be a permutation of \[0, 5\); edge id 1 appears 2 times"),
    ("csr_offsets", 2, 0, r"g\.csr_offsets must start at 0, never decrease and end at n_edges=5"),
    ("csc_offsets", 4, 4, r"g\.csc_offsets must start at 0, never decrease and end at n_edges=5"),
    ("dst", 0, 2, r"g\.csc_offsets and g\.csc_eid put edge 0 in group 1, but g\.dst\[0\] = 2"),  # COO edited only
])
def test_hand_built_graph_is_checked(field, pos, value, match):
    arrays = _arrays(Graph.from_edges(SRC, DST, N, N))
    Graph(*(jnp.asarray(v) for v in arrays.values()), N, N)  # the consistent graph passes
    arrays[field] = arrays[field].copy()
    arrays[field][pos] = value
    with pytest.raises(ValueError, match=match):
        Graph(*(jnp.asarray(v) for v in arrays.values()), N, N)
    Graph(*(jnp.asarray(v) for v in arrays.values()), N, N, validate=False)  # left to the first op


def test_hand_built_graph_dtypes_and_shapes_are_checked():
    arrays = _arrays(Graph.from_edges(SRC, DST, N, N))
    with pytest.raises(TypeError, match="Graph: g.src must have dtype int32 or int64; got float32"):
        Graph(*(v.astype(np.float32) for v in arrays.values()), N, N)
    arrays["csc_src"] = arrays["csc_src"][:-1]
    with pytest.raises(ValueError, match=r"Graph: g\.csc_src must have shape \(5,\)"):
        Graph(*arrays.values(), N, N)


def test_pytree_round_trip_and_traced_construction_skip_the_check():
    g = Graph.from_edges(SRC, DST, N, N)
    leaves, treedef = jax.tree.flatten(g)
    assert jax.tree.unflatten(treedef, [None] * len(leaves)).src is None
    out = jax.jit(lambda *a: Graph(*a, N, N).in_degrees())(*leaves)
    np.testing.assert_array_equal(out, np.bincount(DST, minlength=N))


def test_host_callback_check_of_backends_without_kernels():
    # what a GPU without the CUDA build (or another backend) runs instead of jgo_check_edges
    from jaxgraphops._edge_check import _callback_check

    fn = jax.jit(lambda s, d: _callback_check(s, d, N, N)[1] + 0)
    np.testing.assert_array_equal(fn(jnp.asarray(SRC), jnp.asarray(DST)), DST)
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"Graph\.from_edges: dst id 9 at edge 3 out of range"):
        np.asarray(fn(jnp.asarray(SRC), jnp.asarray(DST).at[3].set(9)))
