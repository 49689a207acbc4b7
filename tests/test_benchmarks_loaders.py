"""The loaders benchmark (benchmarks/loaders.py): the loader's batches and the batches built by hand (the way
the examples did before the loader) give the step the same loss, batch by batch; the measurement runs on a
small stream and its table reports what was measured."""

import jax
import numpy as np
import pytest
from test_benchmarks_padding import _molecules

import jaxgraphops as jgo
from benchmarks import loaders  # importable through conftest.py


def test_loader_and_hand_built_batches_give_the_same_loss():
    data = loaders.dataset(_molecules(40, np.random.default_rng(0)))
    loader = jgo.GraphLoader(data["graphs"], 8, nodes=data["nodes"], globals=data["globals"], n_buckets=1,
                             shuffle=True, key=jax.random.key(0), prefetch=0)  # one bucket: two compilations
    order = np.asarray(jax.random.permutation(jax.random.split(jax.random.fold_in(jax.random.key(0), 0))[0], 40))
    step = loaders.make_step()
    params = loaders.init_params(jax.random.key(0))
    energy_loss = jax.jit(loaders.energy_loss, static_argnums=6)
    by_hand = list(loaders.by_hand(data, loader, order))
    ours = list(loader.iter_epoch(0))
    assert len(by_hand) == len(ours) == 5
    for b, (bg, types, target, n_atoms) in zip(ours, by_hand, strict=True):
        np.testing.assert_array_equal(b.indices[b.graph.graph_mask], order[:int(b.graph.graph_mask.sum())])
        order = order[int(b.graph.graph_mask.sum()):]
        types = np.where(np.asarray(bg.node_mask), types, len(loaders.ELEMENTS))
        want = energy_loss(params, bg.graph, types, bg.dst_graph_ids, target, n_atoms, bg.n_graphs)
        assert float(step(params, b)[1]) == pytest.approx(float(want), rel=1e-5)


def test_measure_and_render():
    logged = []
    result = loaders.measure(_molecules(30, np.random.default_rng(1)), batch=8, repeats=1, seed=0, log=logged.append)
    assert result["batches"] == 4 and len(logged) == 1
    assert all(result[k] > 0 for k in ("host", "by hand", "step", "prepared", "prefetch=0", "prefetch=2"))

    sampled = loaders.measure_sampled(2_000, 5, 64, repeats=1, seed=0, log=logged.append)
    assert sampled["batches"] == 4 and sampled["edges"] == 10_000 and len(logged) == 2
    assert all(sampled[k] > 0 for k in ("loader", "step", "prepared", "prefetch=0", "prefetch=2"))

    class Args:
        molecules, batch, cutoff, repeats = 30, 8, 5.0, 1

    text = loaders.render(result, sampled, Args, "python -m benchmarks.loaders", 1.0)
    assert text.startswith("## Loaders (CPU)") and f"| {result['host']:.2f} | {result['host'] / result['step']:.0%} |" \
        in text
    assert "`NeighborLoader` on a random graph of 2,000 nodes and 10,000 edges" in text
