"""``python -m benchmarks.padding``: what padding to static shapes costs, with padding edges and without.

Two measurements, written to ``BENCHMARKS.md`` (section "Padding"):

- **Ops at 50% padding.** A uniform random graph (``--nodes`` nodes, 16 incoming edges each, F = 64;
  GAT with 4 heads of 16) padded to twice its nodes and edges, forward+backward (value and gradient of
  ``sum(out ** 2)``) of gspmm copy_u sum and of ``mha_gat``, four ways in one alternation: the graph
  itself (*exact*), the graph with as many isolated nodes as the padding adds (*padding nodes only*: the
  padded node arrays without padding edges), ``jgo.pad``'s graph whose new edges are padding edges that
  every kernel skips (*padding-aware*), and the same edge list with the padding edges made real
  (``Graph.from_edges``, as plain padding computes them: they all go into the last padding node, as
  jraph's and ``jgo.pad``'s do). Medians of ``--repeats`` alternations.
- **A QM9 stream.** ``--molecules`` molecules of QM9 (qm9pack, no download; 5 Å radius graphs),
  batched ``--batch`` at a time in a fixed shuffled order, one epoch of SGD on a 3-layer GNN (atom-type
  embedding, each layer ``relu(h W + gspmm(g, h, reduce="mean") W')``, sum pooling, an energy head on
  U0 per atom) under ``jit``, three ways: *exact shapes* (each batch as it is: one compilation per new
  shape), *buckets, plain padding* (``jgo.bucket_sizes`` with 4 buckets, the padding edges made real)
  and *buckets, padding-aware* (``jgo.padded_batches``). The batches are built before the clock
  starts; the first epoch's time includes its compilations; a second epoch, with nothing left to compile,
  gives the steady-state time.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxgraphops as jgo

from . import tables
from ._timing import machine, section_name


def _plain(g: jgo.Graph) -> jgo.Graph:
    """``g`` with its padding edges made real edges (what plain padding computes)."""
    return jgo.Graph.from_edges(np.asarray(g.src), np.asarray(g.dst), g.n_src, g.n_dst, index_dtype=g.index_dtype)


# -- ops at 50% padding ---------------------------------------------------------------------------

DEGREE = 16


VARIANTS = ("exact", "padding nodes only", "padding-aware", "plain padding")


def _op_cases(n: int, rng) -> list[tuple[str, object, dict]]:
    """gspmm and GAT value-and-gradient steps, each with its inputs (keyed by ``VARIANTS``) on the graph
    of ``n`` nodes and ``16 n`` edges, on the same graph with ``n`` isolated nodes more, and padded to
    ``2 n`` nodes and ``32 n`` edges."""
    degree, f, heads = DEGREE, 64, 4
    src, dst = rng.integers(0, n, degree * n), np.repeat(np.arange(n), degree)
    g = jgo.Graph.from_edges(src, dst, n, n)
    padded = jgo.pad(g, 2 * n, 2 * n, 2 * degree * n)
    graphs = dict(zip(VARIANTS, (g, jgo.Graph.from_edges(src, dst, 2 * n, 2 * n), padded, _plain(padded))))
    x = rng.normal(size=(n, f)).astype(np.float32)
    a = rng.normal(size=(2 * f,)).astype(np.float32)

    def loss_spmm(g, x):
        return jnp.sum(jgo.gspmm(g, x) ** 2)

    def loss_gat(g, x, a):
        return jnp.sum(jgo.mha_gat(g, x, a, num_heads=heads) ** 2)

    cases = []
    for name, loss, args in (("gspmm copy_u sum", loss_spmm, (x,)), ("mha_gat, 4 heads", loss_gat, (x, a))):
        step = jax.jit(jax.value_and_grad(loss, argnums=tuple(range(1, len(args) + 1))))
        inputs = {}
        for kind, graph in graphs.items():
            xs = np.zeros((graph.n_src, f), np.float32)
            xs[:n] = x
            inputs[kind] = (graph, jax.device_put(xs), *map(jax.device_put, args[1:]))
        cases.append((name, step, inputs))
    return cases


def _alternate(step, inputs: dict, repeats: int) -> dict:
    for args in inputs.values():  # compile and warm up
        jax.block_until_ready(step(*args))
    times = {kind: [] for kind in inputs}
    for _ in range(repeats):
        for kind, args in inputs.items():
            start = time.perf_counter()
            jax.block_until_ready(step(*args))
            times[kind].append(time.perf_counter() - start)
    return {kind: float(np.median(t) * 1e3) for kind, t in times.items()}


def measure_ops(n: int, repeats: int, log=print) -> list[tuple[str, dict]]:
    """``(op, {variant: ms})`` for each op."""
    rows = []
    for name, step, inputs in _op_cases(n, np.random.default_rng(0)):
        ms = _alternate(step, inputs, repeats)
        log(f"{name}: " + ", ".join(f"{kind} {t:.1f} ms" for kind, t in ms.items()))
        rows.append((name, ms))
    return rows


# -- the QM9 stream -------------------------------------------------------------------------------

ELEMENTS = {"H": 0, "C": 1, "N": 2, "O": 3, "F": 4}


def add_stream_arguments(parser: argparse.ArgumentParser, *, molecules: int, section: str) -> None:
    """The QM9 stream's options (``--molecules``, ``--batch``, ``--cutoff``, ``--seed``) and ``--output``, the file
    whose ``section`` is replaced."""
    parser.add_argument("--molecules", type=int, default=molecules, help="QM9 molecules in the stream")
    parser.add_argument("--batch", type=int, default=32, help="molecules per batch")
    parser.add_argument("--cutoff", type=float, default=5.0, help="radius graph cutoff (Å)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="BENCHMARKS.md", help=f"file whose {section} section is replaced ('' to skip)")


def qm9_molecules(n: int, cutoff: float, seed: int) -> list[tuple[np.ndarray, jgo.Graph, float]]:
    """``n`` random QM9 molecules as ``(atom types [atoms], radius graph, U0 per atom in eV)``."""
    import pandas as pd

    spec = importlib.util.find_spec("qm9pack")
    if spec is None:
        raise SystemExit("benchmarks.padding needs qm9pack and pandas: pip install jaxgraphops[examples]")
    data = os.path.join(spec.submodule_search_locations[0], "data")
    table = pd.concat([pd.read_csv(os.path.join(data, f"qm9_part{i}.csv"), usecols=["Elements", "XYZ_Ang", "InternalEnergy_0K_au"])
                       for i in (1, 2, 3)], ignore_index=True)
    rows = table.iloc[np.sort(np.random.default_rng(seed).choice(len(table), n, replace=False))]
    molecules = []
    for elements, xyz, u0 in rows.itertuples(index=False):
        types = np.array([ELEMENTS[s] for s in json.loads(elements.replace("'", '"'))])
        src, dst, _ = jgo.dimenet.neighbor_list(np.array(json.loads(xyz)), cutoff)
        g = jgo.Graph.from_edges(src, dst, len(types), len(types))
        molecules.append((types, g, float(u0) * 27.211386 / len(types)))
    return molecules


def init_params(key, width: int = 64, layers: int = 3) -> dict:
    keys = jax.random.split(key, 2 * layers + 2)
    scale = 1 / np.sqrt(width)
    return {"embed": jax.random.normal(keys[0], (len(ELEMENTS) + 1, width)) * scale,
            "self": [jax.random.normal(k, (width, width)) * scale for k in keys[1:layers + 1]],
            "nbr": [jax.random.normal(k, (width, width)) * scale for k in keys[layers + 1:2 * layers + 1]],
            "head": jax.random.normal(keys[-1], (width,)) * scale}


def energy_loss(params, g, types, graph_ids, target, n_atoms, n_graphs: int):
    """Mean squared error of the per-atom energy of the real molecules (``n_atoms`` 0 marks a padding slot)."""
    h = params["embed"][types]
    for w_self, w_nbr in zip(params["self"], params["nbr"]):
        h = jax.nn.relu(h @ w_self + jgo.gspmm(g, h, reduce="mean") @ w_nbr)
    energy = jgo.pool(h @ params["head"][:, None], graph_ids, n_graphs, ids_are_sorted=True)[:, 0]
    real = n_atoms > 0
    per_atom = energy / jnp.where(real, n_atoms, 1)
    return jnp.sum(jnp.where(real, (per_atom - target) ** 2, 0)) / jnp.sum(real)


def _batch_arrays(bg: jgo.BatchedGraph, molecules, idx, slots: int, mean: float, std: float, plain: bool):
    n = bg.graph.n_dst
    types = np.full(n, len(ELEMENTS), np.int32)  # padding nodes: their own embedding row
    types[:sum(len(molecules[i][0]) for i in idx)] = np.concatenate([molecules[i][0] for i in idx])
    target, n_atoms = np.zeros(slots, np.float32), np.zeros(slots, np.float32)
    target[:len(idx)] = [(molecules[i][2] - mean) / std for i in idx]
    n_atoms[:len(idx)] = [len(molecules[i][0]) for i in idx]
    g = _plain(bg.graph) if plain else bg.graph
    return g, jnp.asarray(types), bg.dst_graph_ids, jnp.asarray(target), jnp.asarray(n_atoms)


def stream_batches(molecules, batch: int, seed: int) -> dict:
    """The epoch's batches (fixed shuffled order) for each variant, built ahead, with padding fractions."""
    order = np.random.default_rng(seed).permutation(len(molecules))
    energies = np.array([m[2] for m in molecules])
    mean, std = float(energies.mean()), float(energies.std())
    graphs = [m[1] for m in molecules]
    variants = {"exact shapes": []}
    for start in range(0, len(order), batch):
        idx = order[start:start + batch]
        bg = jgo.batch([graphs[i] for i in idx])
        variants["exact shapes"].append(_batch_arrays(bg, molecules, idx, len(idx), mean, std, False))
    buckets = jgo.bucket_sizes([g.n_dst for g in graphs], [g.n_edges for g in graphs], batch_size=batch, n_buckets=4)
    padded = list(jgo.padded_batches(graphs, batch, buckets, order=order))
    for name, plain in (("buckets, plain padding", True), ("buckets, padding-aware", False)):
        variants[name] = [_batch_arrays(bg, molecules, idx, batch + 1, mean, std, plain) for bg, idx in padded]
    real_nodes = sum(g.n_dst for g in graphs)
    real_edges = sum(g.n_edges for g in graphs)
    slots = (sum(bg.graph.n_dst for bg, _ in padded), sum(bg.graph.n_edges for bg, _ in padded))
    fractions = (1 - real_nodes / slots[0], 1 - real_edges / slots[1])
    return {"variants": variants, "buckets": buckets, "padding": fractions}


def run_epoch(step, params, batches, lr: float = 1e-3):
    start = time.perf_counter()
    losses = []
    for g, types, ids, target, n_atoms in batches:
        loss, grads = step(params, g, types, ids, target, n_atoms)
        params = jax.tree_util.tree_map(lambda p, d: p - lr * d, params, grads)
        losses.append(loss)
    jax.block_until_ready(params)
    return params, time.perf_counter() - start, float(np.mean(losses))


def measure_stream(molecules, batch: int, seed: int, log=print) -> dict:
    """Two epochs of each variant on ``molecules``, as
    :func:`qm9_molecules` gives them: compilations, epoch times and the epoch's mean loss."""
    start = time.perf_counter()
    stream = stream_batches(molecules, batch, seed)
    log(f"{len(molecules)} molecules batched in {time.perf_counter() - start:.0f} s; buckets "
        f"{[tuple(b) for b in stream['buckets']]}, padding {stream['padding'][0]:.0%} of node slots, "
        f"{stream['padding'][1]:.0%} of edge slots")
    rows = {}
    for name, batches in stream["variants"].items():
        traces = []

        def loss(params, g, types, ids, target, n_atoms, _traces=traces):
            _traces.append(1)  # runs once per compilation
            return energy_loss(params, g, types, ids, target, n_atoms, target.shape[0])

        step = jax.jit(jax.value_and_grad(loss))
        params = init_params(jax.random.key(seed))
        params, first, loss_1 = run_epoch(step, params, batches)
        compiles = len(traces)
        second = run_epoch(step, params, batches)[1]
        log(f"{name}: {compiles} compilations, epoch {first:.1f} s, again {second:.2f} s, mean loss {loss_1:.3f}")
        rows[name] = (compiles, first, second, loss_1)
    return {"rows": rows, **{k: stream[k] for k in ("buckets", "padding")}}


# -- report ---------------------------------------------------------------------------------------

def render(ops, stream, args, command: str, seconds: float) -> str:
    n = args.nodes
    ops_intro = (f"Forward+backward at 50% padding: a uniform random graph of {n:,} nodes and {DEGREE * n:,} edges "
                 f"(F = 64), exact; with {n:,} isolated nodes more (*padding nodes only*: the padded node arrays, "
                 f"no padding edge); and padded to {2 * n:,} nodes and {2 * DEGREE * n:,} edges. Medians of "
                 f"{args.repeats} alternating runs. The padded node rows cost in XLA's elementwise ops (the loss, "
                 "its cotangent) and, under glibc's default malloc, as fresh output pages, whatever the kernels do: "
                 "the padding edges' own cost is the padded graph against *padding nodes only*.")
    lines = [f"## Padding ({section_name()[1]}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             f"{machine()}. Command: `{command}` ({seconds:.0f} s).", "", ops_intro, "",
             ("| op | exact (ms) | padding nodes only (ms) | padding-aware (ms) | ratio to exact / to padding nodes "
              "only | plain padding (ms) | ratio to exact / to padding nodes only |"),
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, ms in ops:
        e, i, a, p = (ms[k] for k in VARIANTS)
        lines.append(f"| {name} | {e:.1f} | {i:.1f} | {a:.1f} | {a / e:.2f}x / {a / i:.2f}x | {p:.1f} | "
                     f"{p / e:.2f}x / {p / i:.2f}x |")
    nodes, edges = stream["padding"]
    stream_intro = (f"A QM9 stream: {args.molecules:,} molecules ({args.cutoff:g} Å radius graphs), batches of "
                    f"{args.batch}, one epoch of a 3-layer GNN's SGD step (jit); buckets "
                    f"{', '.join(f'({b.n_nodes}, {b.n_edges})' for b in stream['buckets'])} (nodes, edges) from "
                    f"`jgo.bucket_sizes(..., n_buckets=4)`, padding {nodes:.0%} of the node slots and {edges:.0%} "
                    "of the edge slots. Epoch times include compilation; the second epoch has nothing left to "
                    "compile. The three variants train the same model on the same batches: their losses agree.")
    lines += ["", stream_intro, "",
              "| variant | compilations | first epoch (s) | second epoch (s) | mean loss, first epoch |",
              "|---|---:|---:|---:|---:|"]
    for name, (compiles, first, second, loss) in stream["rows"].items():
        lines.append(f"| {name} | {compiles} | {first:.1f} | {second:.2f} | {loss:.6f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.padding", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000, help="nodes of the op benchmark's graph")
    parser.add_argument("--repeats", type=int, default=21, help="alternations per op (medians)")
    add_stream_arguments(parser, molecules=10_000, section="Padding")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    ops = measure_ops(args.nodes, args.repeats)
    stream = measure_stream(qm9_molecules(args.molecules, args.cutoff, args.seed), args.batch, args.seed)
    body = render(ops, stream, args, tables.command("benchmarks.padding", argv), time.perf_counter() - start)
    tables.publish(body, args.output, f"padding-{section_name()[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
