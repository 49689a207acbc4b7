"""Every transformation keeps a padded graph's padding edges as padding (issue 34): ``reorder``, ``partition_graph``,
the conversions, ``dimenet.triplets``, the samplers and batching give on a padded graph what they give on the graph
without its padding, and the ops on their results equal the ops on the padded graph (0 at its padding nodes and
edges). Before, each turned the padding edges into real edges: after ``reorder`` the padding node summed them (21
instead of 0) and ``edge_softmax`` gave them 1/3; after ``partition_graph`` the padding node got 7.0; a round trip
through ``to_edge_index``/``to_scipy``/``to_networkx`` made them self loops of the padding node.

Oracles: the same op on the padded graph itself (whose padding semantics tests/test_padding.py checks against the
unpadded graph), the unpadded graph's conversions and triplets, a NumPy halo exchange for the partitioned graph.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_graph

import jaxgraphops as jgo

REDUCES = ("sum", "mean", "max", "min")


def _padded(seed, n=8, e=30):
    """``(rng, g, p)``: a random graph (self loops, duplicate edges, an isolated node) and ``pad(g)`` with 3 padding
    nodes and 7 padding edges."""
    rng = np.random.default_rng(seed)
    g = random_graph(rng, n, n, e)
    return rng, g, jgo.pad(g, n + 3, n + 3, e + 7)


def _valid(g):
    """``g`` re-checked from its arrays (the constructor's full check), returned."""
    return jgo.Graph(*map(np.asarray, g.tree_flatten()[0]), g.n_src, g.n_dst)


@pytest.mark.parametrize("method", ["rcm", "degree", "metis"])
def test_reorder_keeps_the_padding_edges(method):
    """The identity ``unpermute(op(new, permute(x))) == op(p, x)`` on a padded graph, bit for bit (each destination
    keeps its in-edges' order, so every sum adds in the same order), the padding node 0 and the padding edges' softmax
    weight 0 (issue 34: 21 and 1/3)."""
    if method == "metis":
        pytest.importorskip("pymetis", reason="pymetis not installed: method='metis' needs it")
    rng, g, p = _padded(0)
    new, perm = jgo.reorder(p, method)
    _valid(new)
    assert int(new.csc_offsets[-1]) == int(new.csr_offsets[-1]) == g.n_edges
    np.testing.assert_array_equal(perm.edges[g.n_edges:], np.arange(g.n_edges, p.n_edges))  # last, in their order
    np.testing.assert_array_equal(np.asarray(new.real_edge_mask()), np.asarray(p.real_edge_mask()))
    x = rng.normal(size=(p.n_src, 3)).astype(np.float32)
    w = rng.normal(size=p.n_edges).astype(np.float32)
    for reduce in REDUCES:
        got = perm.unpermute_nodes(jgo.gspmm(new, perm.permute_nodes(x), perm.permute_edges(w), op="u_mul_e",
                                             reduce=reduce))
        want = jgo.gspmm(p, x, w, op="u_mul_e", reduce=reduce)
        np.testing.assert_array_equal(got, want, err_msg=reduce)
        np.testing.assert_array_equal(got[g.n_dst:], 0, err_msg=f"{reduce} at the padding nodes")
    alpha = perm.unpermute_edges(jgo.edge_softmax(new, perm.permute_edges(w)))
    np.testing.assert_array_equal(alpha, jgo.edge_softmax(p, w))
    np.testing.assert_array_equal(alpha[g.n_edges:], 0)


def test_partition_graph_of_a_padded_graph_equals_the_padded_graph():
    """Each part's padding edges are padding edges of its local graph (in no row); the padded graph's own padding
    edges belong to no part (``gather_edges`` gives them 0); the partitioned forward pass, with the halo rows
    exchanged in NumPy, equals the op on the padded graph: 0 at its padding nodes (issue 34: 7.0)."""
    rng, g, p = _padded(1)
    pg = jgo.partition_graph(p, 3)
    edges = np.asarray(pg.edges)
    np.testing.assert_array_equal(np.sort(edges[edges >= 0]), np.arange(g.n_edges))  # the real edges, once each
    w = rng.normal(size=(p.n_edges, 2)).astype(np.float32)
    np.testing.assert_array_equal(pg.gather_edges(pg.scatter_edges(w)), np.where((np.arange(p.n_edges) < g.n_edges)
                                                                                 [:, None], w, 0))
    x = rng.normal(size=(p.n_dst, 2)).astype(np.float32)
    owned, send, halo, valid = (np.asarray(a) for a in (pg.owned, pg.send, pg.halo, pg.halo_valid))
    n_send = send.shape[2]
    outs = {reduce: [] for reduce in REDUCES}
    for part in range(pg.n_parts):
        local = jax.tree.map(lambda a, part=part: a[part], pg.graph)
        _valid(local)
        assert int(local.csc_offsets[-1]) == int((edges[part] >= 0).sum())  # the padding edges in no row
        q, j = halo[part] // n_send, halo[part] % n_send  # halo row k: slot j of what part q sends
        halo_ids = np.where(valid[part], owned[q, send[q, part, j]], -1)
        ids = np.concatenate([owned[part], halo_ids])
        x_local = np.where((ids >= 0)[:, None], x[np.maximum(ids, 0)], 0)
        for reduce in REDUCES:
            outs[reduce].append(jgo.gspmm(local, x_local, reduce=reduce))
    for reduce in REDUCES:
        got = pg.gather_nodes(jnp.stack(outs[reduce]))
        np.testing.assert_allclose(got, jgo.gspmm(p, x, reduce=reduce), rtol=1e-6, atol=1e-6, err_msg=reduce)
        np.testing.assert_array_equal(got[g.n_dst:], 0, err_msg=f"{reduce} at the padding nodes")


def test_conversions_drop_the_padding_edges():
    """``to_scipy``, ``to_edge_index`` and ``to_networkx`` of a padded graph are those of the graph without its
    padding: a round trip gives the unpadded graph back, not self loops of the padding node. ``to_edge_index(
    padding="keep")`` keeps them (also inside ``jit``, where dropping them is an error naming the fix)."""
    _, g, p = _padded(2)
    w = np.arange(p.n_edges, dtype=np.float64)
    np.testing.assert_array_equal(p.to_scipy(w).toarray()[: g.n_src, : g.n_dst], g.to_scipy(w[: g.n_edges]).toarray())
    assert p.to_scipy().nnz == g.n_edges and p.to_scipy().shape == (p.n_src, p.n_dst)
    np.testing.assert_array_equal(p.to_edge_index(), g.to_edge_index())
    back = jgo.Graph.from_edge_index(p.to_edge_index(), p.n_src)
    np.testing.assert_array_equal(jgo.gspmm(back, np.ones((p.n_src, 1), np.float32)),
                                  jgo.gspmm(p, np.ones((p.n_src, 1), np.float32)))
    assert sorted(p.to_networkx().edges()) == sorted(g.to_networkx().edges())
    assert p.to_networkx().number_of_nodes() == p.n_src
    keep = p.to_edge_index(padding="keep")
    np.testing.assert_array_equal(keep, np.stack([p.src, p.dst]))
    np.testing.assert_array_equal(jax.jit(lambda p: p.to_edge_index(padding="keep"))(p), keep)
    with pytest.raises(TypeError, match=r"Graph.to_edge_index: padding='drop' needs a concrete graph .* inside "
                                        r"jax.jit pass padding='keep'"):
        jax.jit(lambda p: p.to_edge_index())(p)
    with pytest.raises(ValueError, match=r"Graph.to_edge_index: padding must be one of 'drop', 'keep'; got 'mask'"):
        p.to_edge_index(padding="mask")


def test_triplets_of_a_padded_graph():
    """A padding edge is in no triplet, whatever its endpoints (also a real node's, as after ``reorder``); DimeNet++'s
    triplet step on the padded graph equals the unpadded one, values and gradients, with NaN in the padding rows
    (the ``W_a`` gradient summed them before)."""
    rng = np.random.default_rng(3)
    g = jgo.Graph.from_edges(rng.integers(0, 6, 24), rng.integers(0, 6, 24), 6)
    p = jgo.pad(g, 7, 7, 29)
    arrays = list(p.tree_flatten()[0])
    arrays[0] = arrays[0].at[g.n_edges:].set(jnp.asarray([0, 1, 2, 3, 4], arrays[0].dtype))  # padding edges from
    p = jgo.Graph(*arrays, 7, 7)  # real nodes: still in no row, so in no triplet
    t, tp = jgo.dimenet.triplets(g), jgo.dimenet.triplets(p)
    assert tp.n_triplets == t.n_triplets and tp.n_edges == p.n_edges
    np.testing.assert_array_equal(tp.out_offsets, np.r_[np.asarray(t.out_offsets), [t.n_triplets] * 5])
    for a, b in zip(tp.arrays()[1:], t.arrays()[1:]):  # the same triplets; in_offsets: 0 for the padding edges
        np.testing.assert_array_equal(a[: len(b)], b)
    pos = rng.normal(size=(7, 3)).astype(np.float32)
    vec = pos[np.asarray(g.src)] - pos[np.asarray(g.dst)] + 0.1  # non-zero
    inputs = [vec, rng.normal(size=(24, 42)), rng.normal(size=(24, 5)), rng.normal(size=(47, 3)) / 4]
    inputs = [jnp.asarray(a, jnp.float32) for a in inputs]
    padded = [jnp.concatenate([a, jnp.full((5,) + a.shape[1:], np.nan, a.dtype)]) for a in inputs[:3]] + inputs[3:]

    def loss(vec, sbf, emb, weights, t):
        return jnp.sum(jnp.tanh(jgo.dimenet.agg_edge_to_edge(vec, sbf, emb, weights, t)[:24]))

    for impl in (None, "xla"):
        out = jgo.dimenet.agg_edge_to_edge(*padded, tp, impl=impl)
        np.testing.assert_allclose(out[:24], jgo.dimenet.agg_edge_to_edge(*inputs, t, impl=impl), rtol=1e-5,
                                   atol=1e-5)
        np.testing.assert_array_equal(out[24:], 0)
        got = jax.grad(lambda *a: loss(*a, tp), (0, 1, 2, 3))(*padded)
        want = jax.grad(lambda *a: loss(*a, t), (0, 1, 2, 3))(*inputs)
        for k, (a, b) in enumerate(zip(got, want)):
            np.testing.assert_allclose(a[: b.shape[0]], b, rtol=1e-4, atol=1e-5, err_msg=f"{impl}: gradient {k}")
            np.testing.assert_array_equal(a[b.shape[0]:], 0, err_msg=f"{impl}: gradient {k} at the padding rows")


def test_samplers_on_a_padded_graph_sample_the_graph():
    """The samplers read the groupings, which end before the padding edges: the same blocks as on the graph itself
    (same key, same seeds), and a padding node as a seed samples nothing."""
    rng = np.random.default_rng(4)
    g = jgo.Graph.from_edges(rng.integers(0, 40, 200), rng.integers(0, 40, 200), 40)
    p = jgo.pad(g, 44, 44, 230)
    seeds = np.arange(0, 40, 3)
    for replace in (False, True):
        a = jgo.sample_blocks(jax.random.key(1), g, seeds, [3, 4], replace=replace)
        b = jgo.sample_blocks(jax.random.key(1), p, seeds, [3, 4], replace=replace)
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
            np.testing.assert_array_equal(x, y)
    block = jgo.sample_neighbors(jax.random.key(0), p, np.array([42, 0, 43]), 5)
    np.testing.assert_array_equal(np.asarray(block.graph.in_degrees())[[0, 2]], 0)


def test_batches_of_padded_graphs_keep_the_padding_edges():
    """``pad_batch`` of a batch whose last graph is padded, and a padded batch padded again: the padding edges stay in
    no row (before, the last real node's row ran over them), and every op equals the unpadded batch's."""
    rng = np.random.default_rng(5)
    a, b = random_graph(rng, 5, 5, 12), random_graph(rng, 6, 6, 15)
    plain = jgo.pad_batch(jgo.batch([a, b]), 16, 40, 3)
    last_padded = jgo.pad_batch(jgo.batch([a, jgo.pad(b, 8, 8, 20)]), 16, 40, 3)
    twice = jgo.pad_batch(jgo.pad_batch(jgo.batch([a, b]), 13, 30, 3), 16, 40, 4)
    x = jnp.asarray(rng.normal(size=(16, 3)), jnp.float32)
    w = jnp.asarray(rng.normal(size=40), jnp.float32)
    for bg in (last_padded, twice):
        _valid(bg.graph)
        assert int(bg.graph.csc_offsets[-1]) == int(bg.graph.csr_offsets[-1]) == 27
        for reduce in REDUCES:
            got = jgo.gspmm(bg.graph, x, w, op="u_mul_e", reduce=reduce)
            want = jgo.gspmm(plain.graph, x, w, op="u_mul_e", reduce=reduce)
            np.testing.assert_array_equal(got[:11], want[:11], err_msg=reduce)  # the real nodes (a's 5, b's 6)
            np.testing.assert_array_equal(got[11:], 0, err_msg=f"{reduce} at the padding nodes")
