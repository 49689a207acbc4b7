"""``python -m benchmarks.roofline``: the memory-bound ops against the memory roofline, on four graph
families, with and without locality reordering (``jgo.reorder``).

Families (N = 200,000 nodes at ``--scale 1``):

- uniform: ``10 N`` edges with both ends uniform (no locality, no hubs);
- power-law sources: Chung-Lu sources (degree exponent 2.2, the largest out-degree thousands of times
  the mean), uniform destinations, ``10 N`` edges, ids shuffled;
- 2-D mesh, shuffled: each of N random points of the unit square linked to its 6 nearest neighbours,
  both directions, ids and edge order shuffled (a MeshGraphNet-like mesh as a file would give it);
- 2-D mesh, RCM: the same mesh after ``jgo.reorder(g, "rcm")``.

Ops: gspmm copy_u sum and u_mul_e sum, agg_simple sum (F = 64 and 128), gsddmm (dot of u and v rows,
F = 64), edge_softmax (8 heads), and pool sum (F = 64, 32 nodes per graph, sorted graph ids; it reads
no graph, so it has one row). All float32, int32 graphs.

For each: the op's **compulsory** bytes (the graph structure it reads, each distinct input row read once,
outputs written once) and **no-reuse** bytes (every gathered row read from memory), the achieved
bandwidth under both, and its ratio to a STREAM-like copy (``np.copyto`` split over one thread per core,
into a buffer already paged in) measured in the same run: op and copy alternate, 9 times, and the
medians are compared. The **fault share** is the part of the op's time spent faulting in fresh output
pages: the op as called (XLA allocates its output, fresh pages for a large one) against the same op
writing into a buffer already written (an earlier output, donated: ``jit(donate_argnums=...)`` aliases it
to the new output), timed in the same alternation: ``(fresh - touched) / fresh``; glibc's mmap threshold is
pinned at 256 KiB (as in the peer report), so outputs above it always get fresh pages; under a preloaded
malloc (``LD_PRELOAD`` of tcmalloc or jemalloc) the pin does nothing, outputs reuse freed pages, and the
run writes its own section (``roofline-cpu-tcmalloc``). Also the pure-JAX
reference (``impl="xla"``) and, for the first three families, the op on the graph after
``jgo.reorder(g, "rcm")`` and ``jgo.reorder(g, "degree")`` (inputs permuted with the returned
:class:`~jaxgraphops.Permutation`), timed in the op's own alternation.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import shlex
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxgraphops as jgo

from . import tables
from ._timing import allocator, machine, section_name
from .runners import median_ms, pin_mmap_threshold

ROOT = Path(__file__).resolve().parent.parent
N_NODES, DEGREE, MESH_K = 200_000, 10, 6
WIDTHS, SDDMM_WIDTH, HEADS, POOL_WIDTH, POOL_GROUP = (64, 128), 64, 8, 64, 32
RUNS = 9  # alternating runs of op and copy
REFERENCE_RUNS = 3
METHODS = ("rcm", "degree")
S = I = 4  # float32 values, int32 indices (bytes)


@dataclass(frozen=True)
class Family:
    """A graph of the benchmark, and whether the reordered columns apply to it."""

    name: str
    graph: jgo.Graph
    reorderable: bool


def uniform_graph(n: int, e: int, rng):
    """``(src, dst)`` int32: ``e`` edges with both ends uniform over ``n`` nodes (multi-edges possible)."""
    return rng.integers(0, n, e, dtype=np.int32), rng.integers(0, n, e, dtype=np.int32)


def power_law_sources(n: int, e: int, rng, exponent: float = 2.2):
    """``(src, dst)`` int32: Chung-Lu sources (node of rank r drawn with probability proportional to
    ``r ** (-1 / (exponent - 1))``, ids shuffled) and uniform destinations.

    >>> src, dst = power_law_sources(200_000, 2_000_000, np.random.default_rng(0))
    >>> int(np.bincount(src).max()) > 1000 * 10   # the largest out-degree, against the mean of 10
    True
    """
    weight = np.arange(1, n + 1, dtype=np.float64) ** (-1.0 / (exponent - 1.0))
    ranks = rng.choice(n, e, p=weight / weight.sum())
    return rng.permutation(n).astype(np.int32)[ranks], rng.integers(0, n, e, dtype=np.int32)


def knn_mesh(n: int, k: int, rng):
    """``(src, dst)`` int32 of the ``k``-nearest-neighbour graph of ``n`` random points of the unit
    square, both directions, no duplicates, node ids and edge order shuffled."""
    from scipy.spatial import cKDTree

    pos = rng.random((n, 2))
    _, nbr = cKDTree(pos).query(pos, k + 1)
    u, v = np.repeat(np.arange(n), k), nbr[:, 1:].ravel()
    keys = rng.permutation(np.unique(np.concatenate([u * n + v, v * n + u])))
    relabel = rng.permutation(n).astype(np.int32)
    return relabel[keys // n], relabel[keys % n]


def families(scale: float = 1.0, seed: int = 0) -> list[Family]:
    """The four graph families at ``N = 200,000 * scale`` nodes."""
    n = max(int(N_NODES * scale), 2 * MESH_K)
    rng = np.random.default_rng(seed)
    mesh = jgo.Graph.from_edges(*knn_mesh(n, MESH_K, rng), n, n)
    return [Family("uniform", jgo.Graph.from_edges(*uniform_graph(n, DEGREE * n, rng), n, n), True),
            Family("power-law sources", jgo.Graph.from_edges(*power_law_sources(n, DEGREE * n, rng), n, n), True),
            Family("2-D mesh, shuffled", mesh, True),
            Family("2-D mesh, RCM", jgo.reorder(mesh, "rcm")[0], False)]


@dataclass(frozen=True)
class Op:
    """One measured op: ``call(g, *arrays, impl=...)``; ``kinds`` says what each array is indexed by
    (``src``/``dst`` nodes, ``edge``, or ``ids``: sorted graph ids of ``POOL_GROUP`` nodes each, not
    permuted) and ``nbytes(stats)`` gives its (compulsory, no-reuse) bytes."""

    name: str
    width: int
    call: object
    shapes: object  # (n_src, n_dst, E) -> tuple of array shapes
    kinds: tuple
    nbytes: object


def _structure(st, edge_ids: bool) -> int:
    """CSC offsets and neighbour ids, plus the edge ids when the op reads or writes edge arrays."""
    return (st["n_dst"] + 1) * I + st["E"] * I * (2 if edge_ids else 1)


def _spmm_bytes(f, weighted):
    def nbytes(st):
        base = _structure(st, weighted) + st["n_dst"] * f * S + (st["E"] * S if weighted else 0)
        return base + st["distinct_src"] * f * S, base + st["E"] * f * S
    return nbytes


def _sddmm_bytes(f):
    def nbytes(st):
        base = _structure(st, True) + st["E"] * S
        # no reuse: the source row per edge, the destination row once per destination (the CSC walk)
        return base + (st["distinct_src"] + st["distinct_dst"]) * f * S, base + (st["E"] + st["n_dst"]) * f * S
    return nbytes


def _softmax_bytes(st):
    b = _structure(st, True) - st["E"] * I + 2 * st["E"] * HEADS * S  # offsets, edge ids, logits in and out
    return b, b


def _pool_bytes(st):
    b = st["n_src"] * (I + POOL_WIDTH * S) + math.ceil(st["n_src"] / POOL_GROUP) * POOL_WIDTH * S
    return b, b


def _pool(g, x, ids, impl=None):
    return jgo.pool(x, ids, math.ceil(x.shape[0] / POOL_GROUP), reduce="sum", ids_are_sorted=True, impl=impl)


def ops() -> list[Op]:
    """The measured ops, in table order."""
    listed = []
    for f in WIDTHS:
        listed += [
            Op("gspmm copy_u sum", f, lambda g, x, impl=None: jgo.gspmm(g, x, op="copy_u", reduce="sum", impl=impl),
               lambda ns, nd, e, f=f: ((ns, f),), ("src",), _spmm_bytes(f, False)),
            Op("gspmm u_mul_e sum", f,
               lambda g, x, w, impl=None: jgo.gspmm(g, x, w, op="u_mul_e", reduce="sum", impl=impl),
               lambda ns, nd, e, f=f: ((ns, f), (e,)), ("src", "edge"), _spmm_bytes(f, True)),
            Op("agg_simple sum", f, lambda g, x, impl=None: jgo.agg_simple(g, x, reduce="sum", impl=impl),
               lambda ns, nd, e, f=f: ((ns, f),), ("src",), _spmm_bytes(f, False)),
        ]
    listed += [
        Op("gsddmm dot(u, v)", SDDMM_WIDTH,
           lambda g, x, y, impl=None: jgo.gsddmm(g, x, y, op="dot", lhs_target="u", rhs_target="v", impl=impl),
           lambda ns, nd, e: ((ns, SDDMM_WIDTH), (nd, SDDMM_WIDTH)), ("src", "dst"), _sddmm_bytes(SDDMM_WIDTH)),
        Op("edge_softmax", HEADS, lambda g, z, impl=None: jgo.edge_softmax(g, z, impl=impl),
           lambda ns, nd, e: ((e, HEADS),), ("edge",), _softmax_bytes),
    ]
    return listed


POOL = Op("pool sum", POOL_WIDTH, _pool, lambda ns, nd, e: ((ns, POOL_WIDTH), (ns,)), ("src", "ids"), _pool_bytes)


def graph_stats(g: jgo.Graph) -> dict:
    """Sizes the byte counts need: nodes, edges, and how many distinct nodes edges read."""
    src, dst = np.asarray(g.src), np.asarray(g.dst)
    return {"n_src": g.n_src, "n_dst": g.n_dst, "E": g.n_edges,
            "distinct_src": int(np.count_nonzero(np.bincount(src, minlength=g.n_src))),
            "distinct_dst": int(np.count_nonzero(np.bincount(dst, minlength=g.n_dst)))}


def _arrays(op: Op, g: jgo.Graph, rng) -> tuple:
    out = []
    for shape, kind in zip(op.shapes(g.n_src, g.n_dst, g.n_edges), op.kinds):
        if kind == "ids":
            out.append(np.arange(shape[0], dtype=np.int32) // POOL_GROUP)
        else:
            out.append(rng.normal(size=shape).astype(np.float32))
    return tuple(out)


def _permuted(op: Op, arrays, perm: jgo.Permutation) -> tuple:
    moved = []
    for a, kind in zip(arrays, op.kinds):
        if kind == "edge":
            a = perm.permute_edges(a)
        elif kind in ("src", "dst"):
            a = perm.permute_nodes(a, side=kind)
        moved.append(a)
    return tuple(moved)


class Copy:
    """A STREAM-like copy: ``np.copyto`` of ``n`` float32 split over one thread per core, into a buffer
    already paged in; on an accelerator, a jitted copy into a donated (already written) buffer."""

    def __init__(self, n: int):
        self.nbytes = 2 * 4 * n  # read + write
        if jax.default_backend() == "cpu":
            self.src, self.dst = np.ones(n, np.float32), np.zeros(n, np.float32)
            threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
            self.bounds = np.linspace(0, n, threads + 1).astype(np.int64)
            self.pool = ThreadPoolExecutor(threads)
        else:
            self.src, self.dst = jnp.ones(n, jnp.float32), jnp.zeros(n, jnp.float32)
            self.copy = jax.jit(lambda dst, src: src * 1, donate_argnums=0)
            self.pool = None

    def __call__(self) -> None:
        if self.pool is None:
            self.dst = jax.block_until_ready(self.copy(self.dst, self.src))
            return
        b = self.bounds
        list(self.pool.map(lambda i: np.copyto(self.dst[b[i]:b[i + 1]], self.src[b[i]:b[i + 1]]), range(len(b) - 1)))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class _Measured:
    """An op jitted twice on one graph and arrays: as called (fresh output) and writing into a donated,
    already written buffer of the output's shape (touched)."""

    def __init__(self, op: Op, g, arrays):
        call = op.call
        self.args = (g, *map(jnp.asarray, arrays))
        self.fresh = jax.jit(call)
        self.into = jax.jit(lambda buf, *a: call(*a), donate_argnums=0, keep_unused=True)
        self.reference = jax.jit(lambda *a: call(*a, impl="xla"))
        out = jax.block_until_ready(self.fresh(*self.args))
        self.buf = jnp.zeros_like(out) + 0  # written, so paged in
        pointer = self.buf.unsafe_buffer_pointer()
        self.buf = jax.block_until_ready(self.into(self.buf, *self.args))
        self.aliased = self.buf.unsafe_buffer_pointer() == pointer
        self.output = out

    def run_fresh(self):
        jax.block_until_ready(self.fresh(*self.args))

    def run_touched(self):
        self.buf = jax.block_until_ready(self.into(self.buf, *self.args))


def measure_op(op: Op, family: Family, copy: Copy, rng, reorders: dict, log=print) -> dict:
    """One row: alternating runs of the op (fresh and touched output) and the copy, the reference, and
    the op on each reordered graph."""
    g = family.graph
    arrays = _arrays(op, g, rng)
    m = _Measured(op, g, arrays)
    moved = {method: _reordered(op, new, _permuted(op, arrays, perm))
             for method, (new, perm) in reorders.items()} if family.reorderable else {}
    fresh, touched, copies, after = [], [], [], {method: [] for method in moved}
    for _ in range(RUNS):
        fresh.append(_timed(m.run_fresh))
        touched.append(_timed(m.run_touched))
        copies.append(_timed(copy))
        for method, run_moved in moved.items():
            after[method].append(_timed(run_moved))
    reference = median_ms(lambda: m.reference(*m.args), jax.block_until_ready, repeats=REFERENCE_RUNS)
    np.testing.assert_allclose(np.asarray(m.output), np.asarray(m.reference(*m.args)), rtol=1e-3, atol=1e-3,
                               err_msg=f"{op.name} disagrees with its reference on {family.name}")
    stats = graph_stats(g)
    compulsory, no_reuse = op.nbytes(stats)
    ms, copy_gbps = 1e3 * float(np.median(fresh)), copy.nbytes / float(np.median(copies)) / 1e9
    row = {"family": family.name, "op": op.name, "width": op.width, "compulsory_bytes": compulsory,
           "no_reuse_bytes": no_reuse, "ms": ms, "touched_ms": 1e3 * float(np.median(touched)), "aliased": m.aliased,
           "copy_gbps": copy_gbps, "reference_ms": reference,
           "reordered_ms": {method: 1e3 * float(np.median(v)) for method, v in after.items()}}
    gc.collect()
    log(f"{family.name:<20} {op.name:<18} F={op.width:<4} {ms:9.2f} ms  touched {row['touched_ms']:9.2f} ms  "
        f"copy {copy_gbps:6.1f} GB/s  xla {reference:9.2f} ms  "
        + "  ".join(f"{k} {v:8.2f} ms" for k, v in row["reordered_ms"].items()))
    return row


def _reordered(op, g, arrays):
    """The op on a reordered graph and its permuted arrays, compiled: a call that waits for its result."""
    fn = jax.jit(op.call)
    args = (g, *map(jnp.asarray, arrays))
    jax.block_until_ready(fn(*args))
    return lambda: jax.block_until_ready(fn(*args))


def run(scale: float = 1.0, copy_elements: int | None = None, log=print) -> list[dict]:
    """Every row of the table; ``copy_elements`` float32 per copy buffer (default 2**26, 256 MiB, or
    less at small scales)."""
    pin_mmap_threshold()  # as the peer report does: fresh pages for every output over 256 KiB, from either entry point
    rng = np.random.default_rng(1)
    copy = Copy(copy_elements or int(min(2**26, max(2**22, 2**26 * scale))))
    rows = []
    try:
        for family in families(scale):
            reorders = {m: jgo.reorder(family.graph, m) for m in METHODS} if family.reorderable else {}
            for op in ops():
                rows.append(measure_op(op, family, copy, rng, reorders, log))
        n = max(int(N_NODES * scale), 2 * MESH_K)  # pool reads no graph: an edgeless one gives the row its sizes
        edgeless = jgo.Graph.from_edges(np.zeros(0, np.int32), np.zeros(0, np.int32), n, n)
        rows.append(measure_op(POOL, Family("any (sorted graph ids)", edgeless, False), copy, rng, {}, log))
    finally:
        copy.close()
    return rows


def table(rows) -> str:
    """Markdown: one row per (family, op, width)."""
    head = ("| family | op | F | compulsory / no-reuse MB | ms | GB/s compulsory / no-reuse | % of copy | "
            "fault share | XLA reference ms (speed-up) | " + " | ".join(f"after {m} (ms)" for m in METHODS) + " |")
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * len(METHODS)]
    for r in rows:
        lo, hi = (r[k] / (r["ms"] * 1e6) for k in ("compulsory_bytes", "no_reuse_bytes"))
        share = f"{100 * (r['ms'] - r['touched_ms']) / r['ms']:.0f}%" if r["aliased"] else "n/a (not aliased)"
        cells = [f"{r['reordered_ms'][m]:.2f}" if m in r["reordered_ms"] else "—" for m in METHODS]
        lines.append(f"| {r['family']} | {r['op']} | {r['width']} | {r['compulsory_bytes'] / 1e6:.0f} / "
                     f"{r['no_reuse_bytes'] / 1e6:.0f} | {r['ms']:.2f} | {lo:.1f} / {hi:.1f} | "
                     f"{100 * lo / r['copy_gbps']:.0f}% / {100 * hi / r['copy_gbps']:.0f}% | {share} | "
                     f"{r['reference_ms']:.2f} ({r['reference_ms'] / r['ms']:.1f}x) | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _pages_note() -> str:
    """Where this run's output buffers come from, for the fault share's sentence."""
    malloc = allocator()
    if malloc in ("tcmalloc", "jemalloc"):
        return (f"{malloc} preloaded: it keeps freed buffers, so an output mostly lands on pages an earlier call "
                f"wrote; `python -m benchmarks.fresh_pages`")
    return ("glibc's mmap threshold pinned at 256 KiB, so every output above it is fresh pages, as glibc gives any "
            "buffer over 32 MiB anyway")


def render(rows, command: str, seconds: float, scale: float) -> str:
    """The markdown section: how it was measured, then the table."""
    copies = [r["copy_gbps"] for r in rows]
    n = max(int(N_NODES * scale), 2 * MESH_K)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (f"## Roofline ({section_name()[1]}), {stamp}\n\n{machine()}. Command: `{command}` ({seconds:.0f} s). "
            f"N = {n:,} nodes; uniform and power-law-source graphs of {DEGREE} N edges, a 2-D {MESH_K}-nearest-"
            f"neighbour mesh (both directions) with shuffled ids, and the same mesh after `jgo.reorder(g, \"rcm\")`. "
            f"float32 features, int32 graphs.\n\n"
            f"Compulsory bytes: the CSC structure the op reads (offsets, neighbour ids, and edge ids where it "
            f"reads or writes edge arrays), each distinct input row once, the output once; no-reuse bytes: every "
            f"gathered row from memory (sources per edge; gsddmm's destination rows once per destination). The "
            f"ms column is the median of {RUNS} runs alternating with a STREAM-like copy (`np.copyto` on one "
            f"thread per core into a paged-in buffer, {copies and min(copies):.1f}–{copies and max(copies):.1f} "
            f"GB/s over the rows); % of copy is each bandwidth over the copy's in the same row. Fault share: "
            f"(fresh − touched) / fresh, where touched is the same op writing into a donated buffer already "
            f"written (timed in the same alternation; {_pages_note()}). XLA reference: `impl=\"xla\"`, median of "
            f"{REFERENCE_RUNS}. After rcm / degree: the op on `jgo.reorder(g, method)` with permuted inputs "
            f"(edges sorted into CSC order), timed in the same alternation as the ms column, so the two compare "
            f"run for run; `benchmarks/roofline.py`.\n\n"
            + table(rows))


def write_section(path: Path, body: str) -> None:
    """Replaces this device's (and allocator's) roofline section of ``path`` (appends it the first time)."""
    marker = section_name()[0]
    tables.replace_section(path, f"<!-- roofline-{marker} -->", f"<!-- /roofline-{marker} -->", body + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.roofline", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply N (default 1: 200,000 nodes)")
    parser.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"), help="markdown file to update ('' to skip)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = run(args.scale)
    command = shlex.join(["python", "-m", "benchmarks.roofline", *(argv if argv is not None else sys.argv[1:])])
    body = render(rows, command, time.perf_counter() - started, args.scale)
    print(body)
    if args.output:
        write_section(Path(args.output), body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
