"""Neighbour-sampling throughput: ``jgo.sample_blocks`` with fanouts [25, 10] (two hops, GraphSAGE's)
against DGL's and PyG's CPU samplers, in seeds per second, every library in the same run.

The graph: a power-law graph (``workloads.power_law_graph``, degree exponent 2.2, random node order) of
200,000 nodes and 10,000,000 edges (mean in-degree 50, that of ogbn-products) at ``scale`` 1. One run
samples the same 16 batches of 1,024 distinct random seeds in every library, without replacement, the
in-edges of each seed (10 per seed, then 25 per reached node) and returns relabelled blocks:

- jaxgraphops: ``jax.jit(sample_blocks)`` (the CPU kernels when JAX runs on the CPU, the CUDA ones on a
  GPU): two static-shape blocks, CSC and CSR views included; and the same with ``impl="xla"`` (the
  pure-JAX sampler, which draws the same sample: the "XLA reference" row).
- DGL: ``dgl.dataloading.NeighborSampler([25, 10]).sample_blocks`` (``sample_neighbors`` and
  ``to_block`` per hop).
- PyG: ``torch_geometric.sampler.NeighborSampler(num_neighbors=[10, 25])`` (PyG lists hops from the seeds
  outwards), which needs pyg-lib or torch-sparse.

Before timing, each library's first batch must sample exactly ``sum(min(in-degree, 10))`` edges into
the seeds (what sampling without replacement gives), so the libraries do the same work.

``python -m benchmarks --suite sampling`` times the kernels against the pure-JAX sampler (``impl="xla"``,
which draws the same sample); ``python -m benchmarks.report`` puts the peer table in BENCHMARKS.md.
"""

from __future__ import annotations

import sys
import time
import types

import jax
import jax.numpy as jnp
import numpy as np

import jaxgraphops as jgo

from . import workloads

FANOUTS = [25, 10]  # layer order (DGL's): 10 in-neighbours of each seed, then 25 of each reached node
BATCH, BATCHES = 1024, 16
LIBRARIES = ("jaxgraphops", "XLA reference", "DGL", "PyG")


def workload(scale: float = 1.0):
    """``(src, dst, n, seed batches [BATCHES, BATCH])``: the power-law graph and the seeds of one run."""
    n, e = int(200_000 * scale), int(10_000_000 * scale)
    src, dst = workloads.power_law_graph(n, e, seed=5)
    rng = np.random.default_rng(6)
    seeds = np.stack([rng.choice(n, min(BATCH, n), replace=False) for _ in range(BATCHES)]).astype(np.int32)
    return src, dst, n, seeds


def shape(n: int, e: int) -> str:
    return f"power-law N={n:,} E={e:,}, {BATCHES} batches of {BATCH} seeds, fanouts {FANOUTS}"


def _jax_sampler(src, dst, n, seeds, impl=None):
    """``(run, hop1_edges)``: ``run()`` samples every batch; ``hop1_edges()`` counts the first batch's
    sampled edges into its seeds."""
    g = jgo.Graph.from_edges(src, dst, n, n)
    sample = jax.jit(lambda key, g, seeds: jgo.sample_blocks(key, g, seeds, FANOUTS, impl=impl))
    keys = jax.random.split(jax.random.key(0), len(seeds))
    batches = [jnp.asarray(s) for s in seeds]

    def run():
        return jax.block_until_ready([sample(k, g, s) for k, s in zip(keys, batches)])

    return run, lambda: int(sample(keys[0], g, batches[0])[-1].edge_mask.sum())


def _dgl():
    if "dgl.graphbolt" not in sys.modules:  # its compiled parts exist only for torch <= 2.2; not used here
        stub = types.ModuleType("dgl.graphbolt")
        stub.__path__ = []
        sys.modules["dgl.graphbolt"] = stub
    import dgl
    return dgl


def _dgl_sampler(src, dst, n, seeds):
    import torch

    dgl = _dgl()
    from dgl.dataloading import NeighborSampler

    g = dgl.graph((torch.from_numpy(src.astype(np.int64)), torch.from_numpy(dst.astype(np.int64))), num_nodes=n)
    g.create_formats_()
    sampler = NeighborSampler(FANOUTS)
    batches = [torch.from_numpy(s.astype(np.int64)) for s in seeds]

    def run():
        return [sampler.sample_blocks(g, s) for s in batches]

    return run, lambda: int(sampler.sample_blocks(g, batches[0])[2][-1].num_edges())


def _pyg_sampler(src, dst, n, seeds):
    import torch
    from torch_geometric.data import Data
    from torch_geometric.sampler import NeighborSampler, NodeSamplerInput

    data = Data(edge_index=torch.from_numpy(np.stack([src, dst]).astype(np.int64)), num_nodes=n)
    sampler = NeighborSampler(data, num_neighbors=FANOUTS[::-1])
    inputs = [NodeSamplerInput(None, torch.from_numpy(s.astype(np.int64))) for s in seeds]

    def run():
        return [sampler.sample_from_nodes(i) for i in inputs]

    def hop1_edges():  # seeds have the local ids [0, BATCH); hop 1 samples into them only
        out = sampler.sample_from_nodes(inputs[0])
        return int((out.col < len(seeds[0])).sum())

    return run, hop1_edges


SAMPLERS = {"jaxgraphops": _jax_sampler, "XLA reference": lambda *a: _jax_sampler(*a, impl="xla"),
            "DGL": _dgl_sampler, "PyG": _pyg_sampler}


def _unavailable(library: str, error: Exception) -> str:
    if library == "PyG" and "requires either 'pyg-lib' or 'torch-sparse'" in str(error):
        return ("its NeighborSampler needs pyg-lib (no PyPI release) or torch-sparse (PyPI has only the sdist, "
                "to build with torch-scatter against the installed torch); neither is installed")
    if isinstance(error, ImportError):
        return f"not installed ({error.name or error})"
    return f"failed on this stack: {type(error).__name__}: {error}"[:300]


def median_run_s(run, repeats: int) -> float:
    """Median wall time of ``run()`` in seconds, after one warm-up run (compilation, first-touch)."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def run(scale: float = 1.0, repeats: int = 5, log=print):
    """Records ``{"library", "seeds_per_s", "ms_per_batch", "shape"}`` and the libraries that did not
    run (library -> reason)."""
    src, dst, n, seeds = workload(scale)
    expected = int(np.minimum(np.bincount(dst, minlength=n)[seeds[0]], FANOUTS[-1]).sum())
    records, missing = [], {}
    for library, make in SAMPLERS.items():
        try:
            sample, hop1_edges = make(src, dst, n, seeds)
            got = hop1_edges()
        except Exception as e:  # a peer that does not run on this stack (jaxgraphops' own errors propagate)
            if library in ("jaxgraphops", "XLA reference"):
                raise
            missing[library] = _unavailable(library, e)
            log(f"sampling: {library} not run: {missing[library]}")
            continue
        if got != expected:
            raise AssertionError(f"{library} sampled {got} edges into the first batch's seeds; sampling without "
                                 f"replacement gives {expected}")
        seconds = median_run_s(sample, repeats)
        records.append({"library": library, "seeds_per_s": seeds.size / seconds,
                        "ms_per_batch": 1e3 * seconds / len(seeds), "shape": shape(n, len(src))})
        log(f"sampling {library:<12} {records[-1]['seeds_per_s']:12,.0f} seeds/s   "
            f"{records[-1]['ms_per_batch']:8.2f} ms per batch of {BATCH}")
        del sample
    return records, missing


def table(records, missing) -> str:
    """A markdown table: one row per library (seeds/s, ms per batch, jaxgraphops' speed-up), then the
    libraries that did not run and why."""
    ours = next((r for r in records if r["library"] == "jaxgraphops"), None)
    lines = ["| library | seeds/s | ms per batch | jaxgraphops' speed-up |", "|---|---:|---:|---:|"]
    for r in records:
        speedup = "—" if ours is None or r is ours else f"**{ours['seeds_per_s'] / r['seeds_per_s']:.2f}x**"
        lines.append(f"| {r['library']} | {r['seeds_per_s']:,.0f} | {r['ms_per_batch']:.2f} | {speedup} |")
    for library, why in missing.items():
        lines.append(f"| {library} | unavailable: {why} | — | — |")
    return "\n".join(lines) + "\n"


def cases(scale: float = 1.0):
    """``python -m benchmarks``' suite: one batch of 1,024 seeds through ``sample_blocks``, the kernels
    against the pure-JAX sampler (the same sample), as ``(name, shape, pass, kernel, reference, args)``."""
    src, dst, n, seeds = workload(scale)
    g = jgo.Graph.from_edges(src, dst, n, n)

    def op(impl):
        return jax.jit(lambda key, g, seeds: jgo.sample_blocks(key, g, seeds, FANOUTS, impl=impl))

    shape_ = f"power-law N={n:,} E={len(src):,}, {BATCH} seeds, fanouts {FANOUTS}"
    yield "sample_blocks", shape_, "sampling", op(None), op("xla"), (jax.random.key(0), g, jnp.asarray(seeds[0]))
