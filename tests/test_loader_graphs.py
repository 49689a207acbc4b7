"""GraphLoader (jaxgraphops/loader/graphs.py): each batch equals ``pad_batch(batch(graphs))`` with the features
gathered by a NumPy loop over the graphs; every graph once per epoch in the documented order; a jitted step
compiles once per bucket and gives each real graph what the graph alone gives; the background thread stops at
the end of an epoch, on an exception in the consumer or the producer, and leaks neither threads nor arrays
over 1,000 batches."""

import gc
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo


def _dataset(rng, n=30):
    """Random graphs (one without edges, one with an isolated node) and their node, edge and graph features."""
    graphs, nodes, edges = [], [], []
    for k in range(n):
        v = int(rng.integers(1, 9))
        m = 0 if k == 3 else int(rng.integers(1, 3 * v + 1))
        src, dst = rng.integers(0, v, m), rng.integers(0, v, m)
        graphs.append(jgo.Graph.from_edges(src, dst, v + (k == 5)))
        nodes.append(rng.normal(size=(v + (k == 5), 3)).astype(np.float32))
        edges.append(rng.normal(size=(m, 2)).astype(np.float32))
    targets = rng.normal(size=(n, 1)).astype(np.float32)
    return graphs, nodes, edges, targets


def _loader(rng, **kwargs):
    graphs, nodes, edges, targets = _dataset(rng)
    options = {"nodes": {"x": np.concatenate(nodes)}, "edges": np.concatenate(edges),
               "globals": (targets, np.arange(len(graphs)))} | kwargs
    return jgo.GraphLoader(graphs, 4, **options), (graphs, nodes, edges, targets)


def _padded(rows, n):
    return np.concatenate([rows, np.zeros((n - len(rows), *rows.shape[1:]), rows.dtype)])


def test_batches_equal_pad_batch_and_the_features_of_each_graph(rng):
    loader, (graphs, nodes, edges, targets) = _loader(rng, shuffle=True, key=jax.random.key(3), n_buckets=3)
    for epoch in range(2):
        seen = []
        order = np.asarray(jax.random.permutation(jax.random.split(jax.random.fold_in(jax.random.key(3), epoch))[0],
                                                  len(graphs)))
        for k, b in enumerate(loader):
            idx = order[4 * k:4 * k + 4]
            n, e = b.graph.graph.n_dst, b.graph.graph.n_edges
            assert (n, e) in loader.buckets and b.graph.n_graphs == 5
            want = jgo.pad_batch(jgo.batch([graphs[i] for i in idx]), n, e, 5)
            for name, got, ref in zip(("src", "dst", "csc_offsets", "csc_src", "csc_eid", "csr_offsets", "csr_dst",
                                       "csr_eid"), b.graph.graph.tree_flatten()[0], want.graph.tree_flatten()[0]):
                np.testing.assert_array_equal(got, ref, err_msg=name)
            for name in ("src_graph_ids", "dst_graph_ids", "graph_mask"):
                np.testing.assert_array_equal(getattr(b.graph, name), getattr(want, name), err_msg=name)
            np.testing.assert_array_equal(b.indices, np.concatenate([idx, [-1] * (5 - len(idx))]))
            np.testing.assert_array_equal(b.nodes["x"], _padded(np.concatenate([nodes[i] for i in idx]), n))
            np.testing.assert_array_equal(b.edges, _padded(np.concatenate([edges[i] for i in idx]), e))
            np.testing.assert_array_equal(b.globals[0], _padded(targets[idx], 5))
            np.testing.assert_array_equal(b.globals[1], _padded(idx, 5))
            assert b.graph.graph._checked
            seen += b.indices[b.graph.graph_mask].tolist()
        assert sorted(seen) == list(range(len(graphs))) and seen == order.tolist()
    assert loader.epoch == 2 and len(loader) == 8


def test_jitted_step_compiles_once_per_bucket_and_matches_each_graph_alone(rng):
    """Per-graph readout of a sum aggregation scaled by the target: a NumPy loop over the graphs is the oracle."""
    loader, (graphs, nodes, edges, targets) = _loader(rng, n_buckets=3, prefetch=3)

    @jax.jit
    def step(b):
        h = jgo.gspmm(b.graph.graph, b.nodes["x"], b.edges[:, :1], op="u_mul_e", reduce="sum")
        return b.graph.pool(h) * b.globals[0]

    used = set()
    for b in loader:
        used.add((b.graph.graph.n_dst, b.graph.graph.n_edges))
        out = np.asarray(step(b))
        for slot, i in enumerate(b.indices.tolist()):
            if i < 0:
                assert slot >= 1 and b.graph.graph_mask[slot] == False  # noqa: E712
                continue
            src, dst = (np.asarray(a) for a in (graphs[i].src, graphs[i].dst))
            h = np.zeros_like(nodes[i])
            np.add.at(h, dst, nodes[i][src] * edges[i][:, :1])
            np.testing.assert_allclose(out[slot], h.sum(0) * targets[i], rtol=1e-5, atol=1e-5)
    assert len(used) > 1 and step._cache_size() == len(used)


def test_drop_last_and_given_buckets(rng):
    graphs, *_ = _dataset(rng, n=10)
    big = jgo.Bucket(64, 128)
    loader = jgo.GraphLoader(graphs, 4, buckets=[big], drop_last=True, prefetch=0)
    batches = list(loader)
    assert len(loader) == len(batches) == 2
    assert [b.indices.tolist() for b in batches] == [[0, 1, 2, 3, -1], [4, 5, 6, 7, -1]]
    assert all((b.graph.graph.n_dst, b.graph.graph.n_edges) == tuple(big) for b in batches)
    assert all((b.nodes, b.edges, b.globals) == (None, None, None) for b in batches)


def _threads():
    return sum(t.name == "jaxgraphops-loader" for t in threading.enumerate())


def test_thread_stops_at_the_end_on_consumer_and_producer_errors(rng, monkeypatch):
    loader, _ = _loader(rng, prefetch=2)
    assert _threads() == 0
    it = iter(loader)
    next(it)
    assert _threads() == 1
    assert len(list(it)) == len(loader) - 1 and _threads() == 0  # the end of the epoch

    with pytest.raises(RuntimeError, match="consumer"):
        for k, _ in enumerate(loader):
            if k == 2:
                raise RuntimeError("consumer")
    gc.collect()
    assert _threads() == 0

    for k, _ in enumerate(loader):  # stopping early
        if k == 1:
            break
    gc.collect()
    assert _threads() == 0

    real, calls = loader.batch, []

    def failing(idx):
        calls.append(1)
        if len(calls) == 3:
            raise ValueError("producer")
        return real(idx)

    monkeypatch.setattr(loader, "batch", failing)
    got = []
    with pytest.raises(ValueError, match="producer"):
        for b in loader:
            got.append(b)
    assert len(got) == 2 and _threads() == 0


def test_no_thread_or_memory_leak_over_1000_batches(rng):
    """1,000 batches, every third epoch abandoned half way: no thread left, no device array and no Python object
    more than after the first epochs."""
    loader, _ = _loader(rng, prefetch=2)  # 8 batches an epoch

    def run(n_batches, epoch=0):
        done = 0
        while done < n_batches:
            for k, b in enumerate(loader):
                done += 1
                if epoch % 3 == 2 and k == 4:
                    break
            epoch += 1
        gc.collect()
        return epoch

    epoch = run(100)  # compile, warm the caches
    arrays, objects = len(jax.live_arrays()), len(gc.get_objects())
    run(900, epoch)
    assert _threads() == 0
    assert len(jax.live_arrays()) == arrays
    assert len(gc.get_objects()) - objects < 500, "Python objects pile up"


def test_progress_bar(rng, capsys):
    pytest.importorskip("tqdm", reason="progress=True needs tqdm")
    loader, _ = _loader(rng, progress="training")
    plain, _ = _loader(np.random.default_rng(0))
    assert len(list(loader)) == len(plain)
    assert "training" in capsys.readouterr().err


def test_errors(rng):
    graphs, nodes, edges, _ = _dataset(rng, n=5)
    with pytest.raises(ValueError, match="GraphLoader: graphs must be a non-empty"):
        jgo.GraphLoader([], 2)
    with pytest.raises(TypeError, match=r"GraphLoader: graphs\[1\] must be a Graph"):
        jgo.GraphLoader([graphs[0], "g"], 2)
    with pytest.raises(ValueError, match="GraphLoader: batch_size must be a positive int"):
        jgo.GraphLoader(graphs, 0)
    with pytest.raises(ValueError, match=r"GraphLoader: nodes\['x'\] must have one row per node of the graphs, "
                                         rf"\[{sum(len(x) for x in nodes)}, ...\]"):
        jgo.GraphLoader(graphs, 2, nodes={"x": nodes[0]})
    with pytest.raises(ValueError, match="GraphLoader: globals must have one row per graph"):
        jgo.GraphLoader(graphs, 2, globals=np.zeros(4))
    with pytest.raises(ValueError, match="GraphLoader: key must be a JAX PRNG key with shuffle=True"):
        jgo.GraphLoader(graphs, 2, shuffle=True)
    with pytest.raises(ValueError, match="GraphLoader: prefetch must be a non-negative int"):
        jgo.GraphLoader(graphs, 2, prefetch=-1)
    with pytest.raises(ValueError, match="GraphLoader: graphs.4. has padding edges"):
        jgo.GraphLoader([*graphs[:4], jgo.pad(graphs[0], 9, 9, 30)], 2)
    bipartite = jgo.Graph.from_edges(np.array([0]), np.array([0]), 2, 1)
    with pytest.raises(ValueError, match=r"GraphLoader: graphs\[0\] is bipartite"):
        jgo.GraphLoader([bipartite], 2)
    with pytest.raises(ValueError, match="GraphLoader: no bucket holds the 2 largest graphs together"):
        jgo.GraphLoader(graphs, 2, buckets=[jgo.Bucket(4, 4)])
    loader = jgo.GraphLoader(graphs, 2)
    with pytest.raises(ValueError, match=r"GraphLoader.batch: indices\[1\] = 7 is out of range \[0, 5\)"):
        loader.batch([0, 7])


def test_indices_visit_a_subset_and_batch_serves_the_others(rng):
    graphs, nodes, *_ = _dataset(rng, n=12)
    train = np.array([7, 2, 9, 4, 11])
    loader = jgo.GraphLoader(graphs, 2, nodes=np.concatenate(nodes), indices=train, prefetch=0)
    assert len(loader) == 3
    assert [b.indices.tolist() for b in loader] == [[7, 2, -1], [9, 4, -1], [11, -1, -1]]
    other = loader.batch([0, 5])  # a graph outside the subset: the buckets hold every graph
    np.testing.assert_array_equal(other.nodes[:len(nodes[0]) + len(nodes[5])], np.concatenate([nodes[0], nodes[5]]))
    with pytest.raises(ValueError, match="GraphLoader.batch: indices must name at most batch_size=2 graphs; got 3"):
        loader.batch([0, 1, 2])
    with pytest.raises(ValueError, match=r"GraphLoader: indices\[0\] = 12 is out of range \[0, 12\)"):
        jgo.GraphLoader(graphs, 2, indices=[12])
