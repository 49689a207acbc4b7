"""NeighborLoader (jaxgraphops/loader/neighbors.py): each batch equals an unbatched loop of ``sample_blocks`` with
the documented keys and a NumPy gather of the features and targets; every seed once per epoch; the last batch
padded with -1; one compilation; a mean over a block equals the NumPy mean over the sampled neighbours; a
jitted training step over the loader compiles once."""

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxgraphops as jgo


def _graph(rng, n=60, m=400):
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    return jgo.Graph.from_edges(src, dst, n, n), rng.normal(size=(n, 4)).astype(np.float32), rng.integers(0, 3, n)


@pytest.mark.parametrize(("prefetch", "gather"), [(0, "host"), (2, "device"), (2, None)])
def test_batches_equal_an_unbatched_loop(rng, prefetch, gather):
    g, x, y = _graph(rng)
    seeds = rng.permutation(60)[:23]
    key = jax.random.key(7)
    loader = jgo.NeighborLoader(g, [3, 2], 5, seeds=seeds, nodes={"x": x}, targets=y, key=key, shuffle=True,
                                prefetch=prefetch, gather=gather)
    assert len(loader) == 5
    sample = jax.jit(lambda key, g, seeds: jgo.sample_blocks(key, g, seeds, [3, 2]))  # the oracle, batch by batch
    for epoch in range(2):
        shuffle_key, sample_key = jax.random.split(jax.random.fold_in(key, epoch))
        order = seeds[np.asarray(jax.random.permutation(shuffle_key, len(seeds)))]
        order = np.concatenate([order, [-1, -1]]).reshape(5, 5)
        visited = []
        for i, b in enumerate(loader):
            compiled = compiled if epoch or i else loader._sample._cache_size()
            np.testing.assert_array_equal(b.seeds, order[i])
            np.testing.assert_array_equal(b.seed_mask, order[i] >= 0)
            want = sample(jax.random.fold_in(sample_key, i), g, order[i])
            for got, ref in zip(b.blocks, want, strict=True):
                for a, r in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref), strict=True):
                    np.testing.assert_array_equal(a, r)
            ids = np.asarray(want[0].input_nodes)
            np.testing.assert_array_equal(b.inputs["x"], np.where(ids[:, None] >= 0, x[ids], 0))
            np.testing.assert_array_equal(b.targets, np.where(order[i] >= 0, y[order[i]], 0))
            visited += order[i][order[i] >= 0].tolist()
        assert sorted(visited) == sorted(seeds.tolist())
    assert loader._sample._cache_size() == compiled  # the short last batch is padded: one shape


def test_block_mean_equals_the_sampled_neighbours_mean(rng):
    """The last block's mean over the sampled in-edges (the edge ids name them in g) against NumPy."""
    g, x, _ = _graph(rng)
    loader = jgo.NeighborLoader(g, [4], 8, nodes=x, key=jax.random.key(1), drop_last=True)
    src = np.asarray(g.src)
    for b in loader:
        block = b.blocks[-1]
        out = np.asarray(jgo.gspmm(block.graph, b.inputs, reduce="mean"))
        eids, dst = np.asarray(block.edge_ids), np.asarray(block.graph.dst)
        for s, seed in enumerate(np.asarray(b.seeds)):
            sampled = eids[(dst == s) & (eids >= 0)]
            want = x[src[sampled]].mean(0) if sampled.size else np.zeros(4)
            np.testing.assert_allclose(out[s], want, rtol=1e-5, atol=1e-6)
    assert len(loader) == 7


def test_jitted_training_step_compiles_once(rng):
    """A two-layer mean model trained over two epochs of the loader: one compilation, the loss goes down."""
    g, x, y = _graph(rng)

    def model(w, batch):
        h = batch.inputs
        for block, wi in zip(batch.blocks, w):
            h = (jgo.gspmm(block.graph, h, reduce="mean") + h[:block.graph.n_dst]) @ wi
        return h

    def loss_fn(w, batch):
        logp = jax.nn.log_softmax(model(w, batch))
        nll = -jnp.take_along_axis(logp, batch.targets[:, None], 1)[:, 0]
        return jnp.sum(jnp.where(batch.seed_mask, nll, 0)) / batch.seed_mask.sum()

    @jax.jit
    def step(w, batch):
        loss, grads = jax.value_and_grad(loss_fn)(w, batch)
        return jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, w, grads), loss

    loader = jgo.NeighborLoader(g, [3, 3], 16, nodes=x, targets=y, key=jax.random.key(0), shuffle=True)
    w = [jax.random.normal(jax.random.key(1), (4, 4)), jax.random.normal(jax.random.key(2), (4, 3))]
    losses = []
    for _ in range(4):
        for b in loader:
            w, loss = step(w, b)
            losses.append(float(loss))
    assert step._cache_size() == 1
    assert np.mean(losses[-4:]) < np.mean(losses[:4])
    assert sum(t.name == "jaxgraphops-loader" for t in threading.enumerate()) == 0


def test_errors(rng):
    g, x, y = _graph(rng)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="NeighborLoader: key must be a JAX PRNG key to sample"):
        jgo.NeighborLoader(g, [2], 4, key=None)
    with pytest.raises(TypeError, match="NeighborLoader: key must be a JAX PRNG key"):
        jgo.NeighborLoader(g, [2], 4, key=3)
    raw = jgo.NeighborLoader(g, [2], 4, key=jax.random.PRNGKey(0), prefetch=0)  # a raw key: its typed twin
    typed = jgo.NeighborLoader(g, [2], 4, key=jax.random.key(0), prefetch=0)
    np.testing.assert_array_equal(next(iter(raw)).blocks[0].input_nodes, next(iter(typed)).blocks[0].input_nodes)
    with pytest.raises(ValueError, match=r"NeighborLoader: fanouts\[1\] must be a positive int"):
        jgo.NeighborLoader(g, [2, 0], 4, key=key)
    with pytest.raises(ValueError, match="NeighborLoader: fanouts must name at least one hop"):
        jgo.NeighborLoader(g, [], 4, key=key)
    with pytest.raises(ValueError, match=r"NeighborLoader: seeds\[1\] = 60 is out of range"):
        jgo.NeighborLoader(g, [2], 4, seeds=[0, 60], key=key)
    with pytest.raises(ValueError, match="NeighborLoader: seeds must be distinct"):
        jgo.NeighborLoader(g, [2], 4, seeds=[3, 3], key=key)
    with pytest.raises(ValueError, match=r"NeighborLoader: seeds must be node ids; seeds\[0\] is -1"):
        jgo.NeighborLoader(g, [2], 4, seeds=[-1, 3], key=key)
    with pytest.raises(ValueError, match=r"NeighborLoader: nodes must have one row per node of the graph, \[60"):
        jgo.NeighborLoader(g, [2], 4, nodes=x[:5], key=key)
    with pytest.raises(ValueError, match=r"NeighborLoader: targets\[0\] must have one row per node"):
        jgo.NeighborLoader(g, [2], 4, targets=(y[:3],), key=key)
    with pytest.raises(ValueError, match="NeighborLoader: gather must be one of None, 'host', 'device'; got 'cpu'"):
        jgo.NeighborLoader(g, [2], 4, key=key, gather="cpu")
    with pytest.raises(ValueError, match="NeighborLoader: graph must have one node set"):
        jgo.NeighborLoader(jgo.Graph.from_edges(np.array([0]), np.array([0]), 2, 1), [2], 4, key=key)
