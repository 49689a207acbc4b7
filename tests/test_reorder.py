"""jgo.reorder: every op on the reordered graph, its inputs permuted and its result unpermuted, equals
the pure-JAX reference on the original graph (forward and gradients); the permutations are bijections
that relabel the graph exactly; RCM lowers a shuffled mesh's bandwidth, degree sorts the degrees, METIS
groups each part; bad input raises errors naming the function and the argument."""

import importlib.util
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_graph

import jaxgraphops as jgo
from benchmarks import workloads  # importable through conftest.py

METHODS = ("rcm", "degree", "metis")


def _metis_or_skip(method):
    if method == "metis":
        pytest.importorskip("pymetis", reason="pymetis not installed: method='metis' needs it")


def _graph(rng, bipartite):
    return random_graph(rng, 9, 7, 40) if bipartite else random_graph(rng, 8, 8, 40)


@pytest.mark.parametrize("bipartite", [False, True], ids=["square", "bipartite"])
@pytest.mark.parametrize("method", METHODS)
def test_permutations_are_bijections_that_relabel_the_graph(rng, method, bipartite):
    _metis_or_skip(method)
    g = _graph(rng, bipartite)
    new, perm = jgo.reorder(g, method, **({"n_parts": 2} if method == "metis" else {}))
    assert (new.n_src, new.n_dst, new.n_edges, new.index_dtype) == (g.n_src, g.n_dst, g.n_edges, g.index_dtype)
    assert perm.square == (not bipartite)
    for order, n in ((perm.src, g.n_src), (perm.dst, g.n_dst), (perm.edges, g.n_edges)):
        np.testing.assert_array_equal(np.sort(order), np.arange(n))
    for order, inverse in ((perm.src, perm.inverse.src), (perm.dst, perm.inverse.dst), (perm.edges, perm.inverse.edges)):
        np.testing.assert_array_equal(order[inverse], np.arange(len(order)))
    # new edge k is old edge perm.edges[k], its endpoints relabelled (a loop over the edges)
    old_src, old_dst = np.asarray(g.src), np.asarray(g.dst)
    for k, e in enumerate(perm.edges):
        assert perm.src[new.src[k]] == old_src[e] and perm.dst[new.dst[k]] == old_dst[e]
    # edges sorted by destination, each destination's in-edges in their old input order: the input order is the
    # CSC order, and each row is the old row
    np.testing.assert_array_equal(np.asarray(new.csc_eid), np.arange(g.n_edges))
    assert np.all(np.diff(np.asarray(new.dst)) >= 0)
    same_row = np.diff(np.asarray(new.dst)) == 0
    assert np.all(np.diff(perm.edges)[same_row] > 0)
    # the inverse relabels the reordered graph back
    back_src = perm.inverse.src[np.asarray(g.src)]
    np.testing.assert_array_equal(perm.unpermute_edges(np.asarray(new.src)), back_src)


@pytest.mark.parametrize("bipartite", [False, True], ids=["square", "bipartite"])
@pytest.mark.parametrize("method", METHODS)
def test_ops_on_the_reordered_graph_equal_the_reference_on_the_original(rng, method, bipartite):
    _metis_or_skip(method)
    g = _graph(rng, bipartite)
    new, perm = jgo.reorder(g, method, **({"n_parts": 3} if method == "metis" else {}))
    side = {"side": "src"} if bipartite else {}
    dside = {"side": "dst"} if bipartite else {}
    x = rng.normal(size=(g.n_src, 4)).astype(np.float32)
    xd = rng.normal(size=(g.n_dst, 4)).astype(np.float32)
    w = rng.normal(size=g.n_edges).astype(np.float32)
    px, pxd, pw = perm.permute_nodes(x, **side), perm.permute_nodes(xd, **dside), perm.permute_edges(w)

    def nodes(y):
        return np.asarray(perm.unpermute_nodes(y, **dside))

    for reduce in ("sum", "max", "mean"):
        np.testing.assert_allclose(nodes(jgo.gspmm(new, px, pw, op="u_mul_e", reduce=reduce)),
                                   jgo.gspmm(g, x, w, op="u_mul_e", reduce=reduce, impl="xla"), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(nodes(jgo.agg_simple(new, px, reduce=reduce)),
                                   jgo.agg_simple(g, x, reduce=reduce, impl="xla"), rtol=1e-5, atol=1e-5)
    dots = jgo.gsddmm(new, px, pxd, op="dot", lhs_target="u", rhs_target="v")
    np.testing.assert_allclose(perm.unpermute_edges(np.asarray(dots)),
                               jgo.gsddmm(g, x, xd, op="dot", lhs_target="u", rhs_target="v", impl="xla"), rtol=1e-5,
                               atol=1e-5)
    logits = rng.normal(size=(g.n_edges, 2)).astype(np.float32)
    np.testing.assert_allclose(perm.unpermute_edges(np.asarray(jgo.edge_softmax(new, perm.permute_edges(logits)))),
                               jgo.edge_softmax(g, logits, impl="xla"), rtol=1e-5, atol=1e-6)
    a = rng.normal(size=8).astype(np.float32)
    out, alpha = jgo.mha_gat(new, px, a, x_dst=pxd, num_heads=2, return_attention=True)
    ref_out, ref_alpha = jgo.mha_gat(g, x, a, x_dst=xd, num_heads=2, return_attention=True, impl="xla")
    np.testing.assert_allclose(nodes(out), ref_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(perm.unpermute_edges(np.asarray(alpha)), ref_alpha, rtol=1e-5, atol=1e-6)

    # gradients (sum: no ties), with the permutation applied inside jit to JAX arrays
    def loss(graph, p):
        def f(x, w):
            y = jgo.gspmm(graph, p.permute_nodes(x, **side) if p else x, p.permute_edges(w) if p else w,
                          op="u_mul_e", reduce="sum", impl=None if p else "xla")
            return jnp.sum(jnp.tanh(p.unpermute_nodes(y, **dside) if p else y) * xd[:, :1])
        return jax.jit(jax.grad(f, (0, 1)))

    for got, want in zip(loss(new, perm)(jnp.asarray(x), jnp.asarray(w)), loss(g, None)(x, w)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_rcm_lowers_the_bandwidth_of_a_shuffled_mesh():
    src, dst = workloads.mesh_graph(3000, seed=2)
    g = jgo.Graph.from_edges(src, dst)
    new, _ = jgo.reorder(g, "rcm")
    shuffled = int(np.abs(src.astype(np.int64) - dst).max())
    ordered = int(np.abs(np.asarray(new.src, np.int64) - np.asarray(new.dst)).max())
    assert shuffled > 2500 and ordered < shuffled / 10, (shuffled, ordered)  # ~ sqrt(3000) * a few rows


def test_degree_puts_the_most_gathered_nodes_first(rng):
    src, dst = workloads.power_law_graph(500, 4000, seed=3)
    g = jgo.Graph.from_edges(src, dst, 500, 500)
    new, perm = jgo.reorder(g, "degree")
    degree = np.bincount(np.concatenate([np.asarray(new.src), np.asarray(new.dst)]), minlength=500)
    assert np.all(np.diff(degree) <= 0)
    np.testing.assert_array_equal(degree, np.bincount(np.concatenate([src, dst]), minlength=500)[perm.src])
    # bipartite: sources by out-degree, destinations by in-degree
    b = jgo.Graph.from_edges(np.array([0, 1, 1, 2, 2, 2]), np.array([0, 0, 1, 0, 1, 3]), 3, 4)
    _, perm = jgo.reorder(b, "degree")
    assert perm.src.tolist() == [2, 1, 0] and perm.dst.tolist() == [0, 1, 3, 2]


def test_metis_groups_each_part():
    pytest.importorskip("pymetis", reason="pymetis not installed: method='metis' needs it")
    # two 6-cliques with interleaved ids (even, odd): two parts must be the two cliques, each contiguous
    clique = [(i, j) for i in range(6) for j in range(6) if i != j]
    src = np.array([2 * i + c for c in (0, 1) for i, _ in clique])
    dst = np.array([2 * j + c for c in (0, 1) for _, j in clique])
    _, perm = jgo.reorder(jgo.Graph.from_edges(src, dst), "metis", n_parts=2)
    first, second = set(perm.src[:6] % 2), set(perm.src[6:] % 2)
    assert len(first) == len(second) == 1 and first != second


def test_zero_edge_graph():
    g = jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 3, 3)
    for method in ("rcm", "degree"):
        new, perm = jgo.reorder(g, method)
        assert new.n_edges == 0 and sorted(perm.src.tolist()) == [0, 1, 2]
    for method in ("rcm", "degree"):  # no nodes at all (issue 34: a raw NumPy reduction error for "rcm")
        new, perm = jgo.reorder(jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), 0, 0), method)
        assert new.n_src == new.n_dst == 0 and perm.src.shape == perm.edges.shape == (0,)


@pytest.mark.parametrize("method", METHODS)
def test_max_min_ties_keep_their_winner_and_sums_their_bits(rng, method):
    """Issue 34: ``reorder`` re-sorted each row by new source id, so a max/min tie's gradient went to another edge
    than on the original graph. Each destination keeps its in-edges' order now: the gradients of a max and a min
    with ties everywhere (small integer features, duplicate edges) are those of the original graph: exactly for the
    edge weights (each edge's gradient is one product: a tie sent elsewhere changes it), to rounding for the node
    features (a source sums its out-edges' terms in the new edge order). The forward pass is exact (a destination
    adds its in-edges in the same order)."""
    _metis_or_skip(method)
    src, dst = rng.integers(0, 10, 80), rng.integers(0, 10, 80)
    g = jgo.Graph.from_edges(src, dst, 10, 10)
    new, perm = jgo.reorder(g, method, **({"n_parts": 2} if method == "metis" else {}))
    x = jnp.asarray(rng.integers(0, 3, (10, 2)), jnp.float32)  # three values: ties in every row
    w = jnp.asarray(rng.integers(1, 3, 80), jnp.float32)
    cot = jnp.asarray(rng.normal(size=(10, 2)), jnp.float32)

    def value_and_grads(graph, p):
        def loss(x, w):
            y = jgo.gspmm(graph, p.permute_nodes(x) if p else x, p.permute_edges(w) if p else w, op="u_mul_e",
                          reduce=reduce)
            y = p.unpermute_nodes(y) if p else y
            return jnp.sum(y * cot), y
        return jax.grad(loss, (0, 1), has_aux=True)(x, w)

    for reduce in ("max", "min", "sum"):
        (d_x, d_w), y = value_and_grads(new, perm)
        (want_x, want_w), want_y = value_and_grads(g, None)
        np.testing.assert_array_equal(y, want_y, err_msg=reduce)
        np.testing.assert_array_equal(d_w, want_w, err_msg=reduce)
        np.testing.assert_allclose(d_x, want_x, rtol=1e-6, atol=1e-6, err_msg=reduce)


def test_bad_input_errors(rng, monkeypatch):
    g = _graph(rng, False)
    with pytest.raises(TypeError, match="reorder: g must be a jaxgraphops.Graph; got ndarray"):
        jgo.reorder(np.zeros((2, 3)), "rcm")
    with pytest.raises(ValueError, match="reorder: method must be one of 'rcm', 'degree', 'metis'; got 'rmc'.*'rcm'"):
        jgo.reorder(g, "rmc")
    with pytest.raises(ValueError, match="reorder: n_parts is a METIS option; got n_parts=4 with method='rcm'"):
        jgo.reorder(g, "rcm", n_parts=4)
    with pytest.raises(TypeError, match="reorder: needs a concrete graph"):
        jax.jit(lambda g: jgo.reorder(g, "rcm")[0].src)(g)
    monkeypatch.setitem(sys.modules, "pymetis", None)  # import pymetis raises ImportError
    with pytest.raises(ImportError, match=r"reorder: method='metis' needs pymetis.*jaxgraphops\[distributed\]"):
        jgo.reorder(g, "metis", n_parts=2)
    monkeypatch.undo()
    if importlib.util.find_spec("pymetis") is not None:
        with pytest.raises(ValueError, match="reorder: n_parts must be a positive int; got 0"):
            jgo.reorder(g, "metis", n_parts=0)
    _, perm = jgo.reorder(g, "degree")
    with pytest.raises(ValueError, match=r"Permutation.permute_nodes: the array must have n_dst=8 rows .*got shape \(7, 2\)"):
        perm.permute_nodes(np.zeros((7, 2)))
    with pytest.raises(ValueError, match=r"Permutation.unpermute_edges: the array must have E=40 rows .*got shape \(\)"):
        perm.unpermute_edges(np.float32(1))
    with pytest.raises(ValueError, match="Permutation.permute_nodes: side must be one of None, 'src', 'dst'; got 'u'"):
        perm.permute_nodes(np.zeros(8), side="u")
    _, bperm = jgo.reorder(_graph(rng, True), "rcm")
    with pytest.raises(ValueError, match="Permutation.unpermute_nodes: the graph is bipartite .*pass side='src' or "):
        bperm.unpermute_nodes(np.zeros(7))


def test_int64_graph_keeps_its_index_dtype(x64, rng):
    g = random_graph(rng, 8, 8, 30, index_dtype=np.int64)
    new, perm = jgo.reorder(g, "rcm")
    assert new.index_dtype == np.int64
    x = rng.normal(size=(8, 3))
    np.testing.assert_allclose(perm.unpermute_nodes(jgo.agg_simple(new, perm.permute_nodes(x), reduce="max")),
                               jgo.agg_simple(g, x, reduce="max", impl="xla"), rtol=1e-12)
