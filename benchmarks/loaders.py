"""``python -m benchmarks.loaders``: the host's cost per batch of ``jgo.GraphLoader`` against the jitted step.

On the QM9 stream of ``benchmarks.padding`` (``--molecules`` molecules, 5 Å radius graphs, batches of
``--batch``, 4 shape buckets; its 3-layer GNN's SGD step under ``jit``), written to ``BENCHMARKS.md``
(section "Loaders"):

- **host time per batch**: one batch prepared in the caller's thread (``GraphLoader.batch``: the union, the
  padding, the features gathered and padded: NumPy arrays), against the same batch the way the examples built
  it by hand before the loader (``jgo.padded_batches`` and a gather per graph, device arrays), medians over the
  epoch's batches;
- **the jitted step's time**: the value-and-gradient step on a prepared batch (its call transfers the batch's
  NumPy arrays), median over the epoch's batches after every bucket has compiled;
- **what the training loop sees**: an epoch of steps fed by the loader (``prefetch=2``: a background thread
  prepares the next batches) and by the loader without its thread (``prefetch=0``), against the same steps
  over batches prepared before the clock starts; the difference per batch is the loader's visible cost.

Every figure is a median of ``--repeats`` epochs (the timing loops alternate). The target of issue 36: the host
time per batch at most 25% of the step.

And ``jgo.NeighborLoader`` on a random graph of ``--nodes`` nodes and ``--degree`` in-edges each (1M edges by
default): batches of ``--seeds`` training seeds, ``fanouts=[10, 5]``, a two-layer GraphSAGE-mean step (64
features) under ``jit``; the loader's time per batch alone (sampling and gathers, one jitted call) against the
step's, and an epoch fed by the loader against the same steps over batches sampled before the clock starts.
On a CPU the loader's work and the step share the cores.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxgraphops as jgo

from . import tables
from ._timing import machine, section_name
from .padding import ELEMENTS, add_stream_arguments, energy_loss, init_params, qm9_molecules


def dataset(molecules) -> dict:
    """The loader's arrays of ``benchmarks.padding``'s molecules: atom types per node; the standardised U0 per
    atom and the atom count per graph."""
    energies = np.array([m[2] for m in molecules])
    return {"graphs": [m[1] for m in molecules], "nodes": np.concatenate([m[0] for m in molecules]).astype(np.int32),
            "globals": (((energies - energies.mean()) / energies.std()).astype(np.float32),
                        np.array([len(m[0]) for m in molecules], np.float32))}


def loader(data: dict, batch: int, prefetch: int, seed: int) -> jgo.GraphLoader:
    return jgo.GraphLoader(data["graphs"], batch, nodes=data["nodes"], globals=data["globals"], n_buckets=4,
                           shuffle=True, key=jax.random.key(seed), prefetch=prefetch)


def make_step(lr: float = 1e-3):
    """The SGD step on a :class:`~jaxgraphops.GraphBatch` (padding nodes: their own embedding row)."""
    def loss(params, b):
        types = jnp.where(b.graph.node_mask, b.nodes, len(ELEMENTS))
        target, n_atoms = b.globals
        return energy_loss(params, b.graph.graph, types, b.graph.dst_graph_ids, target, n_atoms, b.graph.n_graphs)

    @jax.jit
    def step(params, b):
        value, grads = jax.value_and_grad(loss)(params, b)
        return jax.tree_util.tree_map(lambda p, d: p - lr * d, params, grads), value
    return step


def by_hand(data: dict, graphs_loader: jgo.GraphLoader, order: np.ndarray):
    """The batches as the examples built them before the loader: ``padded_batches`` and a gather per graph."""
    per_graph_types = np.split(data["nodes"], np.cumsum([g.n_dst for g in data["graphs"]])[:-1])
    target, n_atoms = data["globals"]
    for bg, idx in jgo.padded_batches(data["graphs"], graphs_loader.batch_size, graphs_loader.buckets, order=order):
        types = bg.pad_nodes(np.concatenate([per_graph_types[i] for i in idx]))
        yield bg, types, bg.pad_graphs(target[idx]), bg.pad_graphs(n_atoms[idx])


def _timed(iterable):
    """Seconds to produce each item of ``iterable`` (ready on the device)."""
    out, it = [], iter(iterable)
    while True:
        start = time.perf_counter()
        try:
            item = next(it)
        except StopIteration:
            return out
        jax.block_until_ready(item)
        out.append(time.perf_counter() - start)


def _step_times(step, params, batches) -> list[float]:
    """Seconds of the jitted step on each of ``batches``, one at a time."""
    out = []
    for b in batches:
        start = time.perf_counter()
        jax.block_until_ready(step(params, b))
        out.append(time.perf_counter() - start)
    return out


def _epoch(step, params, batches) -> float:
    start = time.perf_counter()
    for b in batches:
        params, value = step(params, b)
    jax.block_until_ready(params)
    return time.perf_counter() - start


def measure(molecules, batch: int, repeats: int, seed: int, log=print) -> dict:
    """The medians (ms per batch) of the module's docstring, and the loader's buckets and batch count."""
    data = dataset(molecules)
    threaded, synchronous = loader(data, batch, 2, seed), loader(data, batch, 0, seed)
    order = np.asarray(jax.random.permutation(jax.random.split(jax.random.fold_in(jax.random.key(seed), 0))[0],
                                              len(data["graphs"])))
    prepared = list(synchronous.iter_epoch(0))
    step, params = make_step(), init_params(jax.random.key(seed))
    for b in prepared:  # compile every bucket
        jax.block_until_ready(step(params, b))
    host, old, steps, fed, fed_sync, ahead = ([] for _ in range(6))
    for r in range(repeats):
        host += _timed(synchronous.iter_epoch(0))
        old += _timed(by_hand(data, synchronous, order))
        steps += _step_times(step, params, prepared)
        ahead.append(_epoch(step, params, prepared))
        fed.append(_epoch(step, params, threaded.iter_epoch(0)))
        fed_sync.append(_epoch(step, params, synchronous.iter_epoch(0)))
        log(f"repeat {r + 1}/{repeats}: host {np.median(host) * 1e3:.2f} ms, by hand {np.median(old) * 1e3:.2f} ms, "
            f"step {np.median(steps) * 1e3:.2f} ms per batch")
    n = len(prepared)
    ms = lambda seconds: float(np.median(seconds) * 1e3)  # noqa: E731
    per_batch = lambda epochs: float(np.median(epochs) * 1e3 / n)  # noqa: E731
    return {"host": ms(host), "by hand": ms(old), "step": ms(steps), "prepared": per_batch(ahead),
            "prefetch=2": per_batch(fed), "prefetch=0": per_batch(fed_sync), "batches": n,
            "buckets": threaded.buckets}


def sage_step(lr: float = 1e-2):
    """The SGD step of a two-layer GraphSAGE-mean (root and neighbour weights) on a
    :class:`~jaxgraphops.NeighborBatch`, cross-entropy over the real seeds."""
    def loss(params, b):
        h = b.inputs
        for i, (block, (w_root, w_nbr)) in enumerate(zip(b.blocks, params)):
            h = h[:block.graph.n_dst] @ w_root + jgo.gspmm(block.graph, h, reduce="mean") @ w_nbr
            h = jax.nn.relu(h) if i == 0 else h
        nll = -jnp.take_along_axis(jax.nn.log_softmax(h), b.targets[:, None], 1)[:, 0]
        return jnp.sum(jnp.where(b.seed_mask, nll, 0)) / jnp.sum(b.seed_mask)

    @jax.jit
    def step(params, b):
        value, grads = jax.value_and_grad(loss)(params, b)
        return jax.tree_util.tree_map(lambda p, d: p - lr * d, params, grads), value
    return step


def measure_sampled(n_nodes: int, degree: int, seeds: int, repeats: int, seed: int, log=print) -> dict:
    """The NeighborLoader's medians (ms per batch) of the module's docstring on a random graph."""
    rng = np.random.default_rng(seed)
    n_edges = n_nodes * degree
    g = jgo.Graph.from_edges(rng.integers(0, n_nodes, n_edges), np.repeat(np.arange(n_nodes), degree), n_nodes,
                             n_nodes)
    x, labels = rng.normal(size=(n_nodes, 64)).astype(np.float32), rng.integers(0, 8, n_nodes)
    train = rng.permutation(n_nodes)[:n_nodes // 10]
    sampled = jgo.NeighborLoader(g, [10, 5], seeds, seeds=train, nodes=x, targets=labels, key=jax.random.key(seed),
                                 shuffle=True, prefetch=2)
    keys = jax.random.split(jax.random.key(seed), 4)
    params = [(jax.random.normal(keys[0], (64, 64)) / 8, jax.random.normal(keys[1], (64, 64)) / 8),
              (jax.random.normal(keys[2], (64, 8)) / 8, jax.random.normal(keys[3], (64, 8)) / 8)]
    step = sage_step()
    prepared = list(sampled.iter_epoch(0))
    jax.block_until_ready(step(params, prepared[0]))
    batch_s, steps, ahead, fed, fed_sync = [], [], [], [], []
    for r in range(repeats):
        sampled.prefetch = 0  # the loader's own time: each batch made in this thread
        batch_s += _timed(sampled.iter_epoch(0))
        fed_sync.append(_epoch(step, params, sampled.iter_epoch(0)))
        sampled.prefetch = 2
        steps += _step_times(step, params, prepared)
        ahead.append(_epoch(step, params, prepared))
        fed.append(_epoch(step, params, sampled.iter_epoch(0)))
        log(f"sampled, repeat {r + 1}/{repeats}: loader {np.median(batch_s) * 1e3:.2f} ms, step "
            f"{np.median(steps) * 1e3:.2f} ms per batch")
    n = len(prepared)
    return {"loader": float(np.median(batch_s) * 1e3), "step": float(np.median(steps) * 1e3),
            "prepared": float(np.median(ahead) * 1e3 / n), "prefetch=2": float(np.median(fed) * 1e3 / n),
            "prefetch=0": float(np.median(fed_sync) * 1e3 / n),
            "batches": n, "edges": n_edges, "nodes": n_nodes, "seeds": seeds, "train": train.size}


def render(result: dict, sampled: dict, args, command: str, seconds: float) -> str:
    r = result
    buckets = ", ".join(f"({b.n_nodes}, {b.n_edges})" for b in r["buckets"])
    intro = (f"The QM9 stream of `benchmarks.padding`: {args.molecules:,} molecules ({args.cutoff:g} Å radius "
             f"graphs), batches of {args.batch} ({r['batches']} an epoch), buckets {buckets} (nodes, edges), the "
             "3-layer GNN's SGD step under `jit`. Medians over the batches of "
             f"{args.repeats} epochs (timing loops alternating). **The machine was shared with other jobs** "
             "(2 cores, several processes): the absolute times are noisy, the ratios less so.")
    lines = [f"## Loaders ({section_name()[1]}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             f"{machine()}. Command: `{command}` ({seconds:.0f} s).", "", intro, "",
             "| per batch | ms | against the step |", "|---|---:|---:|",
             f"| jitted step (value and gradient, SGD update) | {r['step']:.2f} | 1 |",
             f"| host: `GraphLoader.batch` (union, padding, feature gathers; NumPy) | {r['host']:.2f} | "
             f"{r['host'] / r['step']:.0%} |",
             f"| host, by hand: `padded_batches` + a gather per graph (before the loader) | {r['by hand']:.2f} | "
             f"{r['by hand'] / r['step']:.0%} |",
             f"| training loop over batches prepared ahead | {r['prepared']:.2f} | "
             f"{r['prepared'] / r['step']:.0%} |",
             f"| training loop fed by the loader, `prefetch=0` (no thread) | {r['prefetch=0']:.2f} | "
             f"{r['prefetch=0'] / r['step']:.0%} |",
             f"| training loop fed by the loader, `prefetch=2` (background thread) | {r['prefetch=2']:.2f} | "
             f"{r['prefetch=2'] / r['step']:.0%} |"]
    q = sampled
    lines += ["", f"`NeighborLoader` on a random graph of {q['nodes']:,} nodes and {q['edges']:,} edges "
              f"({q['edges'] // q['nodes']} in-edges each): {q['train']:,} training seeds in batches of {q['seeds']} "
              f"({q['batches']} an epoch), `fanouts=[10, 5]`, features gathered on the host (the CPU default), a "
              "two-layer GraphSAGE-mean step (64 features) under `jit`. On the CPU the loader's work (sampling, "
              "gathers) and the step share the cores.", "",
              "| per batch | ms | against the step |", "|---|---:|---:|",
              f"| jitted step (value and gradient, SGD update) | {q['step']:.2f} | 1 |",
              f"| loader: `sample_blocks` (one jitted call) and the gathers | {q['loader']:.2f} | "
              f"{q['loader'] / q['step']:.0%} |",
              f"| training loop over batches sampled ahead | {q['prepared']:.2f} | {q['prepared'] / q['step']:.0%} |",
              f"| training loop fed by the loader, `prefetch=0` | {q['prefetch=0']:.2f} | "
              f"{q['prefetch=0'] / q['step']:.0%} |",
              f"| training loop fed by the loader, `prefetch=2` | {q['prefetch=2']:.2f} | "
              f"{q['prefetch=2'] / q['step']:.0%} |"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.loaders", description=__doc__.split("\n\n")[0])
    add_stream_arguments(parser, molecules=2_000, section="Loaders")
    parser.add_argument("--repeats", type=int, default=5, help="epochs per measurement (medians)")
    parser.add_argument("--nodes", type=int, default=100_000, help="nodes of the sampled graph")
    parser.add_argument("--degree", type=int, default=10, help="in-edges per node of the sampled graph")
    parser.add_argument("--seeds", type=int, default=1024, help="seeds per batch of the sampled graph")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    result = measure(qm9_molecules(args.molecules, args.cutoff, args.seed), args.batch, args.repeats, args.seed)
    sampled = measure_sampled(args.nodes, args.degree, args.seeds, args.repeats, args.seed)
    body = render(result, sampled, args, tables.command("benchmarks.loaders", argv), time.perf_counter() - start)
    tables.publish(body, args.output, f"loaders-{section_name()[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
