"""Shape buckets (jaxgraphops/buckets.py): every batch of a stream fits one of at most ``n_buckets`` sizes,
the largest holds the worst case, a batch gets its smallest bucket, and a jitted step over the padded batches
compiles once per bucket and gives each real graph what the graph alone gives (NumPy oracle)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo


def _stream(rng, n=400):
    nodes = rng.integers(3, 40, n)
    edges = nodes * rng.integers(1, 4, n)
    return nodes, edges


def test_every_batch_fits_a_bucket_and_the_largest_holds_the_worst_case(rng):
    nodes, edges = _stream(rng)
    buckets = jgo.bucket_sizes(nodes, edges, batch_size=16, n_buckets=4, multiple=8)
    assert 1 <= len(buckets) <= 4 and list(buckets) == sorted(buckets)
    assert all(b.n_nodes % 8 == 0 and b.n_edges % 8 == 0 for b in buckets)
    worst = (np.sort(nodes)[-16:].sum() + 1, np.sort(edges)[-16:].sum())
    assert buckets[-1].n_nodes >= worst[0] and buckets[-1].n_edges >= worst[1]
    assert buckets[-1].n_nodes - 8 < worst[0] or buckets[-1].n_edges - 8 < worst[1]  # rounded, not larger
    for _ in range(300):
        idx = rng.permutation(nodes.size)[:16]
        bucket = jgo.pick_bucket(buckets, int(nodes[idx].sum()), int(edges[idx].sum()))
        assert bucket.n_nodes > nodes[idx].sum() and bucket.n_edges >= edges[idx].sum()


def test_buckets_cut_padding_against_one_size(rng):
    """With 4 buckets the padded nodes of random batches are fewer than with one size (the worst case)."""
    nodes, edges = _stream(rng)
    one = jgo.bucket_sizes(nodes, edges, batch_size=16, n_buckets=1)
    four = jgo.bucket_sizes(nodes, edges, batch_size=16, n_buckets=4)
    assert len(one) == 1 and len(four) > 1
    totals = [(int(nodes[i].sum()), int(edges[i].sum())) for i in np.split(rng.permutation(nodes.size), 25)]
    padded = {k: sum(jgo.pick_bucket(b, n, e).n_nodes for n, e in totals) for k, b in (("one", one), ("four", four))}
    assert padded["four"] < padded["one"]


def test_hand_computed_sizes():
    # batch of 2: the two largest graphs have 10 + 10 nodes (+1 padding node: 21 -> 24) and 7 + 5 edges (12 -> 16)
    assert jgo.bucket_sizes([1, 1, 10, 10], [7, 1, 5, 2], batch_size=2, n_buckets=1) == (jgo.Bucket(24, 16),)
    # a batch larger than the stream holds the whole stream
    assert jgo.bucket_sizes([2, 3], [1, 1], batch_size=8, n_buckets=3, multiple=1) == (jgo.Bucket(6, 2),)


def test_random_batches_are_uniform_without_replacement():
    """The batches ``bucket_sizes`` samples: distinct graphs within a batch, each graph equally likely (chi-square
    against a deliberately biased draw, which fails it), each pair of graphs equally likely to share a batch."""
    from scipy import stats

    from jaxgraphops.buckets import _random_batches

    picks = _random_batches(np.random.default_rng(0), 12, 5, 6000)
    assert picks.shape == (6000, 5) and all(len(set(row)) == 5 for row in picks.tolist())
    assert stats.chisquare(np.bincount(picks.ravel(), minlength=12)).pvalue > 1e-4
    pairs = np.zeros((12, 12))
    for row in picks:
        pairs[np.ix_(row, row)] += 1
    assert stats.chisquare(pairs[np.triu_indices(12, 1)]).pvalue > 1e-4
    biased = np.random.default_rng(1).integers(0, 16, picks.size) % 12  # 0..3 twice as likely
    assert stats.chisquare(np.bincount(biased, minlength=12)).pvalue < 1e-4


def test_memory_does_not_grow_with_the_number_of_graphs():
    """Issue 34: the batches were an argsort of a ``(samples, n_graphs)`` random matrix, 8.3 GB and 88 s on QM9's
    130,000 molecules. Now ``samples * batch_size`` draws: a few MB (tracemalloc sees NumPy's allocations), and the
    same whether 2,000 or 130,000 graphs (beyond the ``n_graphs`` sizes themselves)."""
    import tracemalloc

    rng = np.random.default_rng(2)
    peaks = []
    for n in (2_000, 130_000):
        nodes = rng.integers(3, 30, n)
        tracemalloc.start()
        buckets = jgo.bucket_sizes(nodes, 2 * nodes, batch_size=32)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert len(buckets) == 4
    assert peaks[1] < 20e6 and peaks[1] - peaks[0] < 10 * 128_000 * 8, peaks  # sorts of the sizes, not n x samples


def test_pick_bucket_takes_the_smallest_that_fits():
    buckets = [jgo.Bucket(32, 64), jgo.Bucket(16, 40), jgo.Bucket(64, 64)]
    assert jgo.pick_bucket(buckets, 15, 40) == jgo.Bucket(16, 40)
    assert jgo.pick_bucket(buckets, 16, 40) == jgo.Bucket(32, 64)  # 16 nodes leave no padding node in 16
    assert jgo.pick_bucket(buckets, 10, 64) == jgo.Bucket(32, 64)
    with pytest.raises(ValueError, match=r"pick_bucket: a batch of 64 nodes and 10 edges fits none"):
        jgo.pick_bucket(buckets, 64, 10)


def test_a_jitted_step_compiles_once_per_bucket_and_equals_each_graph_alone(rng):
    sizes = rng.integers(2, 12, 60)
    graphs, feats = [], []
    for n in sizes:
        e = int(rng.integers(1, 3 * n))
        graphs.append(jgo.Graph.from_edges(rng.integers(0, n, e), rng.integers(0, n, e), int(n)))
        feats.append(rng.normal(size=(int(n), 3)).astype(np.float32))
    buckets = jgo.bucket_sizes(sizes, [g.n_edges for g in graphs], batch_size=8, n_buckets=3)
    traces = []

    @jax.jit
    def step(bg, x):
        traces.append(None)
        return bg.pool(jgo.gspmm(bg.graph, x, op="copy_u", reduce="sum"), reduce="sum")

    order = rng.permutation(len(graphs))
    for bg, idx in jgo.padded_batches(graphs, 8, buckets, order=order):
        out = np.asarray(step(bg, bg.pad_nodes(jnp.asarray(np.concatenate([feats[i] for i in idx])))))
        for row, i in enumerate(idx):  # each graph alone: the sum over its nodes of the summed in-messages
            src, dst = np.asarray(graphs[i].src), np.asarray(graphs[i].dst)
            want = np.zeros_like(feats[i])
            np.add.at(want, dst, feats[i][src])
            np.testing.assert_allclose(out[row], want.sum(0), rtol=1e-5, atol=1e-5)
        assert not np.asarray(out[len(idx):]).any()  # the padding graphs' rows
    assert 1 <= len(traces) <= len(buckets)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_nodes=[], n_edges=[]), "bucket_sizes: n_nodes must be a non-empty 1-D array"),
    (dict(n_nodes=[1.5, 2], n_edges=[1, 2]), "bucket_sizes: n_nodes must be a non-empty 1-D array of non-negative"),
    (dict(n_nodes=[1, 2], n_edges=[1, -2]), "bucket_sizes: n_edges must be a non-empty 1-D array of non-negative"),
    (dict(n_nodes=[1, 2], n_edges=[1]), "bucket_sizes: n_nodes and n_edges must have one entry per graph"),
    (dict(n_nodes=[1, 2], n_edges=[1, 2], batch_size=0), "bucket_sizes: batch_size must be a positive int"),
    (dict(n_nodes=[1, 2], n_edges=[1, 2], n_buckets=0), "bucket_sizes: n_buckets must be a positive int"),
    (dict(n_nodes=[1, 2], n_edges=[1, 2], multiple=True), "bucket_sizes: multiple must be a positive int"),
])
def test_bad_input(kwargs, match):
    kwargs = dict(dict(batch_size=2), **kwargs)
    with pytest.raises(ValueError, match=match):
        jgo.bucket_sizes(**kwargs)


@pytest.mark.parametrize("order, match", [
    ([0, 5], r"padded_batches: order\[1\] = 5 is not a graph index: graphs has 3 graphs, so order must index \[0, 3\)"),
    ([-1, 0], r"padded_batches: order\[0\] = -1 is not a graph index"),
    ([[0, 1]], r"padded_batches: order must be a 1-D array of graph indices \(ints\); got shape \(1, 2\)"),
    ([0.0, 1.0], r"padded_batches: order must be a 1-D array of graph indices \(ints\); got shape \(2,\), "
                 r"dtype float64"),
])
def test_padded_batches_bad_order(order, match):
    """Issue 34: an order naming no graph was a bare IndexError from inside the generator."""
    graphs = [jgo.Graph.from_edges(np.array([0]), np.array([1]))] * 3
    with pytest.raises(ValueError, match=match):
        next(jgo.padded_batches(graphs, 2, [jgo.Bucket(8, 8)], order=order))

