"""Tests of the graph container (jaxgraphops/graph.py) against literal tables and NumPy/SciPy/networkx oracles."""

import collections

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest
import scipy.sparse

from jaxgraphops.graph import Graph, pad, padding_masks

LEAVES = ("src", "dst", "csc_offsets", "csc_src", "csc_eid", "csr_offsets", "csr_dst", "csr_eid")

# A 5-node graph with a duplicate edge (0->1 twice), a self loop (3->3) and an isolated node (4).
SRC = [0, 2, 0, 3, 1, 3, 1]
DST = [1, 1, 1, 3, 0, 1, 2]
# Hand-computed groupings; within a group the edges keep their input order.
EXPECTED = dict(
    csc_offsets=[0, 1, 5, 6, 7, 7],
    csc_src=[1, 0, 2, 0, 3, 1, 3],
    csc_eid=[4, 0, 1, 2, 5, 6, 3],
    csr_offsets=[0, 2, 4, 5, 7, 7],
    csr_dst=[1, 1, 0, 2, 1, 3, 1],
    csr_eid=[0, 2, 4, 6, 1, 3, 5],
)


def small_graph(**kwargs):
    return Graph.from_edges(np.array(SRC), np.array(DST), 5, **kwargs)


def assert_same_graph(a: Graph, b: Graph):
    assert (a.n_src, a.n_dst) == (b.n_src, b.n_dst)
    for name in LEAVES:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=name)


def edge_list(g: Graph):
    return list(zip(np.asarray(g.src).tolist(), np.asarray(g.dst).tolist()))


# -- from_edges --------------------------------------------------------------------------


def test_from_edges_literal():
    g = small_graph()
    assert (g.n_src, g.n_dst, g.n_edges) == (5, 5, 7)
    assert g.index_dtype == np.int32
    np.testing.assert_array_equal(g.src, SRC)
    np.testing.assert_array_equal(g.dst, DST)
    for name, expected in EXPECTED.items():
        np.testing.assert_array_equal(getattr(g, name), expected, err_msg=name)
    np.testing.assert_array_equal(g.in_degrees(), [1, 4, 1, 1, 0])
    np.testing.assert_array_equal(g.out_degrees(), [2, 2, 1, 2, 0])
    assert repr(g) == "Graph(n_src=5, n_dst=5, n_edges=7, index_dtype=int32)"


def test_from_edges_default_sizes():
    g = Graph.from_edges(np.array(SRC), np.array(DST))
    assert (g.n_src, g.n_dst) == (4, 4)  # max index 3, node 4 unknown
    g = Graph.from_edges(np.array([0, 1]), np.array([1, 2]), n_dst=6)
    assert (g.n_src, g.n_dst) == (6, 6)


@pytest.mark.parametrize("seed", range(3))
def test_from_edges_random_against_python_oracle(seed):
    rng = np.random.default_rng(seed)
    n_src, n_dst, n_edges = 7, 5, 40
    src = rng.integers(0, n_src, n_edges)
    dst = rng.integers(0, n_dst, n_edges)
    g = Graph.from_edges(src, dst, n_src, n_dst)
    for offsets, other, eids, keys, others, n in (
        (g.csc_offsets, g.csc_src, g.csc_eid, dst, src, n_dst),
        (g.csr_offsets, g.csr_dst, g.csr_eid, src, dst, n_src),
    ):
        offsets, other, eids = map(np.asarray, (offsets, other, eids))
        for node in range(n):
            group = [e for e in range(n_edges) if keys[e] == node]
            assert eids[offsets[node] : offsets[node + 1]].tolist() == group
            assert other[offsets[node] : offsets[node + 1]].tolist() == others[group].tolist()


def test_from_edges_bipartite():
    g = Graph.from_edges(np.array([1, 0, 1]), np.array([2, 2, 0]), n_src=2, n_dst=3)
    assert (g.n_src, g.n_dst, g.n_edges) == (2, 3, 3)
    np.testing.assert_array_equal(g.csc_offsets, [0, 1, 1, 3])
    np.testing.assert_array_equal(g.csc_src, [1, 1, 0])
    np.testing.assert_array_equal(g.csc_eid, [2, 0, 1])
    np.testing.assert_array_equal(g.csr_offsets, [0, 1, 3])
    np.testing.assert_array_equal(g.csr_dst, [2, 2, 0])
    np.testing.assert_array_equal(g.csr_eid, [1, 0, 2])
    np.testing.assert_array_equal(g.in_degrees(), [1, 0, 2])
    np.testing.assert_array_equal(g.out_degrees(), [1, 2])


def test_from_edges_no_edges():
    empty = np.zeros(0, np.int32)
    g = Graph.from_edges(empty, empty)
    assert (g.n_src, g.n_dst, g.n_edges) == (0, 0, 0)
    np.testing.assert_array_equal(g.csc_offsets, [0])
    g = Graph.from_edges(empty, empty, 3, 2)
    assert g.n_edges == 0
    np.testing.assert_array_equal(g.csc_offsets, [0, 0, 0])
    np.testing.assert_array_equal(g.csr_offsets, [0, 0, 0, 0])
    np.testing.assert_array_equal(g.in_degrees(), [0, 0])
    assert g.csc_src.shape == g.csr_eid.shape == (0,)


def test_from_edges_accepts_jax_and_any_integer_dtype():
    for dtype in (np.uint8, np.int16, np.int32, np.int64):
        g = Graph.from_edges(np.array(SRC, dtype), jnp.array(DST), 5)
        assert g.index_dtype == np.int32
        assert_same_graph(g, small_graph())


def test_index_dtype():
    assert small_graph().index_dtype == np.int32  # int64 input without x64
    with pytest.raises(ValueError, match="int64.*x64"):
        small_graph(index_dtype=np.int64)
    with pytest.raises(ValueError, match="index_dtype must be int32 or int64, got int16"):
        small_graph(index_dtype=np.int16)
    with jax.enable_x64(True):
        g64 = small_graph()
        assert g64.index_dtype == np.int64
        assert all(getattr(g64, name).dtype == jnp.int64 for name in LEAVES)
        g32 = Graph.from_edges(np.array(SRC, np.int32), np.array(DST, np.int32), 5)
        assert g32.index_dtype == np.int32
        assert small_graph(index_dtype=np.int32).index_dtype == np.int32
        assert Graph.from_edges(np.array(SRC, np.int32), np.array(DST, np.int32), 5,
                                index_dtype="int64").index_dtype == np.int64
        for name, expected in EXPECTED.items():
            np.testing.assert_array_equal(getattr(g64, name), expected, err_msg=name)


def test_from_edges_validation():
    with pytest.raises(ValueError, match=r"edge 1 has src=7, out of range \[0, 5\)"):
        Graph.from_edges(np.array([0, 7, 9]), np.array([0, 1, 2]), 5)
    with pytest.raises(ValueError, match=r"edge 2 has dst=-1, out of range \[0, 3\)"):
        Graph.from_edges(np.array([0, 1, 1]), np.array([0, 1, -1]), 2, 3)
    with pytest.raises(ValueError, match=r"edge 0 has dst=2, out of range \[0, 2\)"):
        Graph.from_edges(np.array([0]), np.array([2]), n_src=3, n_dst=2)
    with pytest.raises(TypeError, match="src must have an integer dtype, got float32"):
        Graph.from_edges(np.zeros(2, np.float32), np.zeros(2, np.int32))
    with pytest.raises(TypeError, match="dst must have an integer dtype, got bool"):
        Graph.from_edges(np.zeros(2, np.int32), np.zeros(2, bool))
    with pytest.raises(ValueError, match="same length, got 3 and 2"):
        Graph.from_edges(np.zeros(3, np.int32), np.zeros(2, np.int32))
    with pytest.raises(ValueError, match=r"src must be 1-D \[E\], got shape \(2, 2\)"):
        Graph.from_edges(np.zeros((2, 2), np.int32), np.zeros((2, 2), np.int32))
    with pytest.raises(ValueError, match="n_src must be >= 0, got -1"):
        Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), -1)


# -- tracing -----------------------------------------------------------------------------


def test_traced_construction_matches_concrete():
    build = jax.jit(Graph.from_edges, static_argnums=(2, 3))
    assert_same_graph(build(jnp.array(SRC), jnp.array(DST), 5, None), small_graph())
    src, dst = np.array([1, 0, 1]), np.array([2, 2, 0])
    assert_same_graph(build(src, dst, 2, 3), Graph.from_edges(src, dst, 2, 3))
    empty = jnp.zeros(0, jnp.int32)
    assert_same_graph(build(empty, empty, 3, 2), Graph.from_edges(empty, empty, 3, 2))
    with jax.enable_x64(True):
        traced = build(jnp.array(SRC, jnp.int64), jnp.array(DST, jnp.int64), 5, None)
        assert_same_graph(traced, small_graph())
        assert traced.index_dtype == np.int64


def test_traced_construction_needs_sizes():
    with pytest.raises(ValueError, match="n_src or n_dst is required.*traced"):
        jax.jit(Graph.from_edges)(jnp.array(SRC), jnp.array(DST))


# -- reverse and pytree ------------------------------------------------------------------


def test_reverse():
    g = Graph.from_edges(np.array([1, 0, 1]), np.array([2, 2, 0]), n_src=2, n_dst=3)
    r = g.reverse()
    assert_same_graph(r, Graph.from_edges(np.array([2, 2, 0]), np.array([1, 0, 1]), n_src=3, n_dst=2))
    assert_same_graph(r.reverse(), g)
    np.testing.assert_array_equal(r.in_degrees(), g.out_degrees())
    r = small_graph().reverse()
    np.testing.assert_array_equal(r.csc_offsets, EXPECTED["csr_offsets"])
    np.testing.assert_array_equal(r.csc_src, EXPECTED["csr_dst"])
    np.testing.assert_array_equal(r.csc_eid, EXPECTED["csr_eid"])


def test_pytree_round_trip():
    g = small_graph()
    leaves, treedef = jax.tree_util.tree_flatten(g)
    assert len(leaves) == len(LEAVES)
    assert_same_graph(jax.tree_util.tree_unflatten(treedef, leaves), g)
    doubled = jax.tree_util.tree_map(lambda x: 2 * x, g)
    np.testing.assert_array_equal(doubled.src, 2 * np.array(SRC))
    assert (doubled.n_src, doubled.n_dst) == (5, 5)


def test_graph_passes_through_jit():
    g = Graph.from_edges(np.array([1, 0, 1]), np.array([2, 2, 0]), n_src=2, n_dst=3)
    assert_same_graph(jax.jit(lambda g: g)(g), g)

    @jax.jit
    def weighted_in_sum(g, w):
        return jax.ops.segment_sum(w[g.csc_eid], jnp.repeat(jnp.arange(g.n_dst), g.in_degrees(),
                                   total_repeat_length=g.n_edges), g.n_dst)

    w = jnp.array([1.0, 10.0, 100.0])
    np.testing.assert_allclose(weighted_in_sum(g, w), [100.0, 0.0, 11.0])
    np.testing.assert_array_equal(jax.jit(Graph.reverse)(g).csc_offsets, g.csr_offsets)


# -- conversions -------------------------------------------------------------------------


def test_scipy():
    # duplicate (0, 1), explicit zero at (1, 2), shape (2, 3)
    a = scipy.sparse.csr_array((np.array([1.0, 2.0, 0.0, 3.0]), np.array([1, 1, 2, 0]), np.array([0, 2, 4])),
                               shape=(2, 3))
    g = Graph.from_scipy(a)
    coo = a.tocoo()
    assert (g.n_src, g.n_dst, g.n_edges) == (2, 3, 4)
    assert edge_list(g) == [(0, 1), (0, 1), (1, 2), (1, 0)]
    np.testing.assert_array_equal(coo.data, [1.0, 2.0, 0.0, 3.0])  # lines up with the edges
    np.testing.assert_array_equal(g.to_scipy(coo.data).toarray(), a.toarray())
    back = g.to_scipy()
    assert isinstance(back, scipy.sparse.coo_array) and back.shape == (2, 3) and back.nnz == 4
    np.testing.assert_array_equal(back.toarray(), [[0, 2, 0], [1, 0, 1]])
    assert_same_graph(Graph.from_scipy(back), g)
    assert_same_graph(Graph.from_scipy(scipy.sparse.coo_matrix(back)), g)
    with pytest.raises(ValueError, match=r"weights must have shape \(4,\), got \(3,\)"):
        g.to_scipy(np.ones(3))
    with pytest.raises(TypeError, match="scipy.sparse"):
        Graph.from_scipy(a.toarray())


def test_scipy_dense_oracle():
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 6, 30), rng.integers(0, 4, 30)
    w = rng.normal(size=30)
    dense = np.zeros((6, 4))
    np.add.at(dense, (src, dst), w)
    g = Graph.from_edges(src, dst, 6, 4)
    np.testing.assert_allclose(g.to_scipy(w).toarray(), dense)


def test_networkx_directed():
    G = nx.MultiDiGraph([(2, 0), (0, 1), (2, 0), (1, 1)])  # nodes [2, 0, 1]; edges grouped by source
    g = Graph.from_networkx(G)
    assert (g.n_src, g.n_dst) == (3, 3)
    assert edge_list(g) == [(0, 1), (0, 1), (1, 2), (2, 2)]
    g = Graph.from_networkx(G, nodes=[0, 1, 2])
    assert edge_list(g) == [(2, 0), (2, 0), (0, 1), (1, 1)]
    D = nx.DiGraph()
    D.add_nodes_from(["x", "y", "z", "isolated"])
    D.add_edges_from([("y", "x"), ("x", "z")])
    g = Graph.from_networkx(D)
    assert g.n_src == 4 and edge_list(g) == [(0, 2), (1, 0)]
    with pytest.raises(ValueError, match="each node of G exactly once"):
        Graph.from_networkx(G, nodes=[0, 1])
    with pytest.raises(ValueError, match="each node of G exactly once"):
        Graph.from_networkx(G, nodes=[0, 1, 2, 2])


def test_networkx_undirected():
    G = nx.Graph([("a", "b"), ("b", "c"), ("c", "c")])
    assert edge_list(Graph.from_networkx(G)) == [(0, 1), (1, 0), (1, 2), (2, 1), (2, 2)]
    M = nx.MultiGraph([(0, 1), (0, 1), (1, 2)])
    assert edge_list(Graph.from_networkx(M)) == [(0, 1), (1, 0), (0, 1), (1, 0), (1, 2), (2, 1)]


def test_networkx_round_trip():
    g = small_graph()
    G = g.to_networkx()
    assert isinstance(G, nx.MultiDiGraph)
    assert list(G.nodes) == list(range(5))
    assert collections.Counter(G.edges()) == collections.Counter(zip(SRC, DST))
    back = Graph.from_networkx(G)
    assert (back.n_src, back.n_dst) == (5, 5)
    assert collections.Counter(edge_list(back)) == collections.Counter(zip(SRC, DST))
    with pytest.raises(ValueError, match="bipartite.*n_src=2, n_dst=3"):
        Graph.from_edges(np.array([0]), np.array([2]), 2, 3).to_networkx()


def test_edge_index():
    edge_index = jnp.array([SRC, DST])
    g = Graph.from_edge_index(edge_index, num_nodes=5)
    assert_same_graph(g, small_graph())
    np.testing.assert_array_equal(g.to_edge_index(), edge_index)
    assert Graph.from_edge_index(edge_index).n_src == 4
    with pytest.raises(ValueError, match=r"shape \[2, E\], got \(3, 2\)"):
        Graph.from_edge_index(np.zeros((3, 2), np.int32))


def test_senders_receivers_and_jraph():
    senders, receivers = jnp.array(SRC), jnp.array(DST)
    assert_same_graph(Graph.from_senders_receivers(senders, receivers, 5), small_graph())
    GraphsTuple = collections.namedtuple("GraphsTuple", "nodes edges receivers senders globals n_node n_edge")
    graphs = GraphsTuple(None, None, receivers, senders, None, jnp.array([2, 3]), jnp.array([3, 4]))
    assert_same_graph(Graph.from_jraph(graphs), small_graph())


# -- padding (batches: test_batching.py) ----------------------------------------------------------------


def test_pad_and_masks():
    g = Graph.from_edges(np.array([1, 0, 1]), np.array([2, 2, 0]), n_src=2, n_dst=3)
    p = pad(g, 4, 5, 6)
    assert (p.n_src, p.n_dst, p.n_edges) == (4, 5, 6)
    assert edge_list(p) == [(1, 2), (0, 2), (1, 0), (3, 4), (3, 4), (3, 4)]
    # the padding edges are in no row: the groupings end at the 3 real edges, the padding ids after them
    np.testing.assert_array_equal(p.csc_offsets, [0, 1, 1, 3, 3, 3])
    np.testing.assert_array_equal(p.csc_eid, [2, 0, 1, 3, 4, 5])
    np.testing.assert_array_equal(p.csr_offsets, [0, 1, 3, 3, 3])
    np.testing.assert_array_equal(p.csr_eid, [1, 0, 2, 3, 4, 5])
    np.testing.assert_array_equal(p.real_edge_mask(), [True] * 3 + [False] * 3)
    assert_same_graph(g.pad(4, 5, 6), p)
    src_mask, dst_mask, edge_mask = padding_masks(g, p)
    np.testing.assert_array_equal(src_mask, [True, True, False, False])
    np.testing.assert_array_equal(dst_mask, [True, True, True, False, False])
    np.testing.assert_array_equal(edge_mask, [True, True, True, False, False, False])
    # node padding alone needs no padding node for edges
    assert_same_graph(pad(g, 2, 4, 3), Graph.from_edges(g.src, g.dst, 2, 4))
    assert_same_graph(pad(g, 2, 3, 3), g)


def test_pad_errors():
    g = Graph.from_edges(np.array([1, 0, 1]), np.array([2, 2, 0]), n_src=2, n_dst=3)
    with pytest.raises(ValueError, match="n_src=1 is smaller than the graph's n_src=2"):
        pad(g, 1, 3, 3)
    with pytest.raises(ValueError, match="n_edges=2 is smaller"):
        pad(g, 2, 3, 2)
    with pytest.raises(ValueError, match="padding source and a padding destination"):
        pad(g, 2, 4, 4)
    with pytest.raises(ValueError, match="padding source and a padding destination"):
        pad(g, 3, 3, 4)
    with pytest.raises(ValueError, match="padded.n_dst=2 is smaller than original.n_dst=3"):
        padding_masks(g, Graph.from_edges(np.array([0]), np.array([1]), 2, 2))


# ---------------------------------------------------------------------------------------
# hand-built graphs: every op checks the graph it gets (issue 19)

import jaxgraphops as jgo  # noqa: E402
from jaxgraphops.graph import check_graph  # noqa: E402


def _hand_built(g, **changes):
    """``g`` rebuilt by hand from its arrays, some of them replaced; ``validate=False`` leaves the check to the
    first op (the constructor's own check is tested in test_graph_validation.py)."""
    arrays = {n: np.asarray(getattr(g, n)).copy() for n in LEAVES}
    for name, change in changes.items():
        arrays[name] = change(arrays[name])
    return Graph(*(jnp.asarray(a) for a in arrays.values()), g.n_src, g.n_dst, validate=False)


def _set(i, v):
    def change(a):
        a[i] = v
        return a
    return change


BAD_VALUES = [
    (dict(src=_set(3, 5)), r"g\.src\[3\] = 5 is out of range \[0, 5\)"),
    (dict(dst=_set(0, -1)), r"g\.dst\[0\] = -1 is out of range \[0, 5\)"),
    (dict(csc_src=_set(2, 9)), r"g\.csc_src\[2\] = 9 is out of range"),
    (dict(csr_eid=_set(1, 7)), r"g\.csr_eid\[1\] = 7 is out of range \[0, 7\)"),
    (dict(csc_eid=_set(0, 0)), r"g\.csc_eid must be a permutation of \[0, 7\); edge id 0 appears 2 times"),
    (dict(csc_offsets=_set(0, 1)), r"g\.csc_offsets must start at 0, never decrease and end at n_edges=7"),
    (dict(csr_offsets=_set(-1, 6)), r"g\.csr_offsets must start at 0, never decrease and end at n_edges=7"),
    # in range and permutations, but not the grouping of src/dst: found only by cross-checking the copies
    (dict(csc_src=lambda a: a[::-1].copy()), r"g\.csc_src\[0\] = 3, but its edge g\.csc_eid\[0\] = 4 has src 1"),
    (dict(csr_eid=lambda a: a[::-1].copy()), r"g\.csr_offsets and g\.csr_eid put edge \d in group \d"),
    (dict(src=_set(0, 2)), r"g\.csr_offsets and g\.csr_eid put edge|g\.csc_src\[\d\] = 0, but"),
]


@pytest.mark.parametrize("validate", [True, False])
def test_an_aot_compiled_function_takes_the_graph_it_was_lowered_with(validate):
    """``jit(f).lower(g, x).compile()`` then called with ``g``: JAX's lowering rebuilds the arguments from their
    leaves, so a graph's static flag must survive unflatten (the engine branch's first CI: benchmarks' AOT runners
    raised 'Function compiled with input pytree does not match'); also after an op checked an unchecked graph."""
    g = Graph.from_edges(np.array(SRC), np.array(DST), 5)
    if not validate:
        g = Graph(*g.tree_flatten()[0], 5, 5, validate=False)
    x = jnp.arange(10.0).reshape(5, 2)
    compiled = jax.jit(lambda g, x: jgo.gspmm(g, x)).lower(g, x).compile()
    want = jgo.reference.gspmm(g, x)
    np.testing.assert_array_equal(compiled(g, x), want)
    np.testing.assert_array_equal(compiled(g, x), want)  # after the eager reference checked an unchecked g


@pytest.mark.parametrize("changes, message", BAD_VALUES)
@pytest.mark.parametrize("impl", [None, "xla"])
def test_ops_check_the_values_of_a_concrete_hand_built_graph(changes, message, impl):
    """Out-of-range ids, id lists that are not permutations and groupings that disagree with src/dst are a
    ValueError naming the op and the array, with the kernels and with the reference (which used to drop
    out-of-range ids silently)."""
    bad = _hand_built(Graph.from_edges(np.array(SRC), np.array(DST), 5), **changes)
    x = jnp.ones((5, 2))
    with pytest.raises(ValueError, match=f"gspmm: {message}"):
        jgo.gspmm(bad, x, op="copy_u", reduce="sum", impl=impl)
    with pytest.raises(ValueError, match=f"edge_softmax: {message}"):
        jgo.edge_softmax(bad, jnp.ones(7), impl=impl)
    with pytest.raises(ValueError, match=f"edge_vectors: {message}"):
        jgo.edge_vectors(bad, x)
    with pytest.raises(ValueError, match=f"reference.gspmm: {message}"):
        jgo.reference.gspmm(bad, x)
    assert not bad._checked


def test_a_valid_hand_built_graph_is_accepted_and_checked_once():
    g = Graph.from_edges(np.array(SRC), np.array(DST), 5)
    assert g._checked  # from_edges: valid by construction
    assert jax.tree_util.tree_map(lambda a: a, g)._checked  # the flag is structure: a rebuilt graph keeps it
    unchecked = Graph(*g.tree_flatten()[0], 5, 5, validate=False)
    treedef = jax.tree_util.tree_structure(unchecked)
    x = jnp.arange(10.0).reshape(5, 2)
    np.testing.assert_array_equal(jgo.gspmm(unchecked, x), jgo.gspmm(g, x))
    assert unchecked._values_checked and not unchecked._checked  # checked once, its structure unchanged
    assert jax.tree_util.tree_structure(unchecked) == treedef
    union = jgo.batch([g, g]).graph
    padded = jgo.pad_batch(jgo.batch([g, g]), 12, 16, 3).graph
    assert union._checked and padded._checked
    # the library's own hand-built graphs pass the check (rebuilt, so that they are checked)
    from jaxgraphops.nn._attention import gat_graph
    for derived in (union, union.reverse(), padded, jgo.nn.add_self_loops(g), gat_graph(g),
                    gat_graph(padded)):
        check_graph("test", jax.tree_util.tree_map(lambda a: a, derived))


def test_graph_shapes_and_dtypes_are_checked_under_jit():
    """Shapes and dtypes are static: a malformed hand-built graph is a clear error at trace time, also inside
    jit (where its values can only be checked by the kernels)."""
    g = Graph.from_edges(np.array(SRC), np.array(DST), 5)
    x = jnp.ones((5, 2))
    f = jax.jit(lambda g, x: jgo.gspmm(g, x))
    with pytest.raises(ValueError, match=r"gspmm: g\.csc_offsets must have shape \(6,\) \(\[n_dst \+ 1\]\); got \(5,\)"):
        f(_hand_built(g, csc_offsets=lambda a: a[:-1]), x)
    with pytest.raises(ValueError, match=r"gspmm: g\.csr_dst must have shape \(7,\) \(\[n_edges\]\); got \(8,\)"):
        f(_hand_built(g, csr_dst=lambda a: np.concatenate([a, a[:1]])), x)
    with pytest.raises(TypeError, match=r"gspmm: g\.csc_eid must have dtype int32 or int64; got float32"):
        f(_hand_built(g, csc_eid=lambda a: a.astype(np.float32)), x)
    with jax.enable_x64(True):
        with pytest.raises(TypeError, match=r"gspmm: the index arrays of g must share one dtype; g\.src is int32, "
                                            r"g\.csr_eid is int64"):
            f(_hand_built(g, csr_eid=lambda a: a.astype(np.int64)), x)


def test_reference_under_jit_does_not_check_values():
    """Documented: inside jit the reference cannot check a hand-built graph's values; a gather through an
    out-of-range source reads 0 (as through a padding edge) and a segment sum drops an out-of-range destination."""
    g = Graph.from_edges(np.array(SRC), np.array(DST), 5)
    bad = _hand_built(g, src=_set(3, 9))
    x = jnp.arange(1.0, 6.0)[:, None]
    out = jax.jit(lambda g, x: jgo.gspmm(g, x, impl="xla"))(bad, x)
    want = np.asarray(jgo.reference.gspmm(g, x)).copy()
    want[DST[3]] -= np.asarray(x)[SRC[3]]  # edge 3's message is 0
    np.testing.assert_array_equal(out, want)
