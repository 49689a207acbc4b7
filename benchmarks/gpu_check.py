"""``python -m benchmarks.gpu_check``: the timing step of the prepared GPU check (``tools/gpu_check.sh``, step b;
issue 31 item 6): jaxgraphops against the XLA composition and cuSPARSE on the GPU model's shapes, with bitwise
determinism over repeated runs.

Cases, in the order they run (a run stopped by its time limit keeps the first):

1. ``spmm/GRAPH/OP/F``: gspmm ``u_mul_e`` and ``copy_u`` sums, the product every library has, on the power-law
   graph (N=169,343 E=1,166,243) and a uniform random graph (N=100,000 E=1,600,000) at F = 128 and 64, then
   ``copy_u`` on the 2-D mesh (N=200,000) and the molecule batch (7,000 molecules of 18 atoms): jaxgraphops
   (the process's kernels: the CUDA plugin's on a GPU), the XLA composition (``impl="xla"``), cuSPARSE's CSR
   SpMM with ALG3 and with its default algorithm (:mod:`benchmarks.cusparse`, through CuPy).
2. ``report/KEY``: the first GPU run's 22 rows (BENCHMARKS.md, "First GPU run": the peer report's cases of
   :mod:`benchmarks.cases`, forward and forward+backward), jaxgraphops and the XLA composition.

Every (case, implementation, pass) appends one JSON line to ``--out`` as soon as it is measured, with the
fields of ``RECORD_FIELDS``: ``ms`` (median of ``--repeats`` single calls, each waited for: what the peer report
measures), ``ms_pipelined`` (median over batches of ``batch`` back-to-back calls, per call: the launch gaps
hidden), ``distinct_outputs`` over ``--determinism`` further runs (1: bitwise deterministic), ``max_abs_diff``
and ``rel_diff`` of the forward output against the XLA composition's, ``note`` (cuSPARSE's version and the dense
layout it ran), or ``error``. The first line
(``"env"``) names the device, the kernels and the versions.

``--scale S`` multiplies the graph sizes (the CPU dry run: 0.01), ``--only KEY...`` picks cases (``--list``
names them), ``--budget SECONDS`` starts no case after that many seconds and records those left (the shell's
``timeout`` is the hard limit), ``--cache DIR`` keeps the graphs' arrays for later processes.
``--ncu-case KEY --impl NAME`` runs one warmed-up forward pass between ``cudaProfilerStart`` and
``cudaProfilerStop``, for ``ncu --profile-from-start off`` (step d).

Example (on the CPU, a few seconds)::

    python -m benchmarks.gpu_check --out /tmp/timing.jsonl --scale 0.01 --only spmm/uniform/copy_u/F64
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import jax
import numpy as np

import jaxgraphops as jgo

from . import cases as report_cases
from . import impl_jax, relational, roofline, workloads
from .runners import IMPLEMENTATIONS, Runner, jax_runner

JAXGRAPHOPS, XLA, ALG3, DEFAULT = "jaxgraphops", "xla", "cusparse-alg3", "cusparse-default"
RECORD_FIELDS = ("step", "case", "op", "shape", "pass", "impl", "ms", "ms_pipelined", "batch", "repeats",
                 "determinism_runs", "distinct_outputs", "max_abs_diff", "rel_diff", "note", "error")
FORWARD = "forward"
PIPELINE_MS = 5.0  # a pipelined batch lasts about this long


@dataclass(frozen=True)
class Case:
    """An op on one input: ``impls`` maps an implementation's name to ``make() -> Runner``; the XLA
    composition's forward output is the reference of the others."""

    key: str
    op: str
    shape: str
    impls: dict
    passes: tuple = (FORWARD,)


# -- the graphs -----------------------------------------------------------------------------------------------

def _power_law(s):
    n = int(169_343 * s)
    return (*workloads.power_law_graph(n, int(1_166_243 * s)), n)


def _uniform(s):
    n = int(100_000 * s)
    return (*roofline.uniform_graph(n, int(1_600_000 * s), np.random.default_rng(0)), n)


def _mesh(s):
    n = int(200_000 * s)
    return (*workloads.mesh_graph(n), n)


def _molecules(s):
    molecules = max(int(7_000 * s), 1)
    src, dst, _ = relational.molecule_bonds(molecules, 18)
    return src, dst, molecules * 18


GRAPHS = {"power-law": _power_law, "uniform": _uniform, "mesh": _mesh, "molecules": _molecules}
_graphs: dict = {}


def graph_arrays(name: str, scale: float, cache: Path | None = None):
    """``(src, dst, n)`` of one of ``GRAPHS`` at ``scale``, built once per process (and once per ``cache``)."""
    key = (name, scale)
    if key not in _graphs:
        path = cache / f"{name}-{scale:g}.npz" if cache else None
        if path is not None and path.exists():
            with np.load(path) as f:
                _graphs[key] = (f["src"], f["dst"], int(f["n"]))
        else:
            _graphs[key] = GRAPHS[name](scale)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                np.savez(path, src=_graphs[key][0], dst=_graphs[key][1], n=_graphs[key][2])
    return _graphs[key]


# -- the cases ------------------------------------------------------------------------------------------------

def _cusparse(g, x, values, algorithm):
    def make():
        from .cusparse import CsrSpmm

        spmm = CsrSpmm(np.asarray(g.csc_offsets), np.asarray(g.csc_src), values, g.n_src, x, algorithm)
        runner = Runner({FORWARD: spmm.run}, spmm.sync, spmm.output, lambda pass_: None)
        runner.note = f"{spmm.layout}-major dense matrices, cuSPARSE {spmm.version}"
        return runner
    return make


def _spmm_case(graph: str, op: str, f: int, scale: float, cache: Path | None) -> Case:
    src, dst, n = graph_arrays(graph, scale, cache)
    g = jgo.Graph.from_edges(src, dst, n, n)
    x = np.random.default_rng(f).normal(size=(n, f)).astype(np.float32)
    if op == "u_mul_e":  # GCN's symmetric normalisation, the usual edge weight
        deg = np.maximum(np.bincount(dst, minlength=n), 1).astype(np.float32)
        w = ((deg[src] * deg[dst]) ** -0.5).astype(np.float32)
        args, values = (g, x, w), w[np.asarray(g.csc_eid)]
    else:
        args, values = (g, x), np.ones(len(src), np.float32)

    def jax_impl(impl):
        return lambda: jax_runner(lambda *a: jgo.gspmm(*a, op=op, reduce="sum", impl=impl), args, (1,))

    return Case(f"spmm/{graph}/{op}/F{f}", f"gspmm {op} sum", f"{graph} N={n:,} E={len(src):,} F={f}",
                {XLA: jax_impl("xla"), JAXGRAPHOPS: jax_impl(None), ALG3: _cusparse(g, x, values, "alg3"),
                 DEFAULT: _cusparse(g, x, values, "default")})


SPMM_CASES = ([(graph, op, f) for graph in ("power-law", "uniform") for f in (128, 64) for op in ("u_mul_e", "copy_u")]
              + [(graph, "copy_u", f) for graph in ("mesh", "molecules") for f in (128, 64)])
# the first GPU run's rows, most telling first, and the part of benchmarks.cases that builds each
REPORT_KEYS = ("gspmm_sum", "agg_mean", "agg_max", "gat", "update_efeat", "hg_basis", "pool_sum", "gatv2",
               "transformer", "pool_max", "dmpnn")
_REPORT_PARTS = {**dict.fromkeys(("gspmm_sum", "agg_mean", "agg_max", "gat", "gatv2", "transformer"), "_graph_cases"),
                 **dict.fromkeys(("pool_sum", "pool_max"), "_pool_cases"),
                 **dict.fromkeys(("hg_basis", "update_efeat", "dmpnn"), "_relational_cases")}
_report: dict = {}


def _report_case(key: str, scale: float) -> Case:
    if key not in _report:  # the part's cases, built together (they share their graph)
        _report.update({c.key: c for c in getattr(report_cases, _REPORT_PARTS[key])(scale)})
    c = _report[key]
    makers = IMPLEMENTATIONS[key]
    return Case(f"report/{key}", c.op, c.shape, {XLA: lambda: makers[impl_jax.XLA](c.data),
                                                JAXGRAPHOPS: lambda: makers[impl_jax.JAXGRAPHOPS](c.data)},
                c.passes)


def case_keys() -> list[str]:
    return [f"spmm/{g}/{op}/F{f}" for g, op, f in SPMM_CASES] + [f"report/{k}" for k in REPORT_KEYS]


def build_case(key: str, scale: float, cache: Path | None = None) -> Case:
    kind, *rest = key.split("/")
    if kind == "spmm" and len(rest) == 3 and rest[0] in GRAPHS and rest[2].startswith("F"):
        return _spmm_case(rest[0], rest[1], int(rest[2][1:]), scale, cache)
    if kind == "report" and len(rest) == 1 and rest[0] in REPORT_KEYS:
        return _report_case(rest[0], scale)
    raise ValueError(f"gpu_check: unknown case {key!r}; the cases are {', '.join(case_keys())}")


# -- measuring ------------------------------------------------------------------------------------------------

def _host_leaves(result) -> list[np.ndarray]:
    """The arrays of a result (a JAX pytree, or a CuPy array) on the host."""
    leaves = []
    for leaf in jax.tree_util.tree_leaves(result):
        leaves.append(leaf.get() if type(leaf).__module__.startswith("cupy") else np.asarray(leaf))
    return leaves


def bits(result) -> tuple:
    """The exact content of a result: each array's dtype, shape and bytes (equal only if bit for bit equal;
    compared, not hashed: a comparison of two 87 MB outputs is a memcmp, a hash of each is not)."""
    return tuple((str(leaf.dtype), leaf.shape, np.ascontiguousarray(leaf).tobytes()) for leaf in _host_leaves(result))


def distinct_outputs(call: Callable, sync: Callable, runs: int) -> int:
    """How many different results ``runs`` calls give, bit for bit (1: deterministic)."""
    seen: list = []
    for _ in range(runs):
        out = bits(sync(call()))
        if not any(out == s for s in seen):
            seen.append(out)
    return len(seen)


def timings(call: Callable, sync: Callable, repeats: int) -> tuple[float, float, int]:
    """``(ms, ms_pipelined, batch)``: the median of ``repeats`` single synchronised calls, and per call the
    median of ``repeats`` batches of ``batch`` back-to-back calls synchronised once (about PIPELINE_MS each)."""
    singles = []
    for _ in range(repeats):
        start = time.perf_counter()
        sync(call())
        singles.append(time.perf_counter() - start)
    ms = float(np.median(singles) * 1e3)
    batch = int(min(max(math.ceil(PIPELINE_MS / max(ms, 1e-3)), 1), 200))
    batches = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(batch):
            result = call()
        sync(result)
        batches.append((time.perf_counter() - start) / batch)
    return ms, float(np.median(batches) * 1e3), batch


def _error(e: BaseException) -> str:
    return " ".join(f"{type(e).__name__}: {e}".split())[:500]


def measure(case: Case, repeats: int, runs: int, write: Callable[[dict], None]) -> None:
    """Times every implementation of ``case`` on every pass it has and writes one record each."""
    reference = None
    for impl, make in case.impls.items():
        base = {"step": "timing", "case": case.key, "op": case.op, "shape": case.shape, "impl": impl}
        try:
            runner = make()
            out = runner.output()
        except Exception as e:  # an implementation that cannot run here (no CuPy, no GPU): recorded, not fatal
            write({**base, "pass": FORWARD, "error": _error(e)})
            continue
        if impl == XLA:
            reference = out
        if getattr(runner, "note", None):
            base["note"] = runner.note
        for pass_ in case.passes:
            record = {**base, "pass": pass_}
            try:
                call = runner.calls[pass_]
                ms, ms_pipelined, batch = timings(call, runner.sync, repeats)
                record.update(ms=ms, ms_pipelined=ms_pipelined, batch=batch, repeats=repeats, determinism_runs=runs,
                              distinct_outputs=distinct_outputs(call, runner.sync, runs))
                if pass_ == FORWARD and reference is not None:
                    diff = float(np.max(np.abs(np.asarray(out, np.float64) - reference), initial=0.0))
                    record.update(max_abs_diff=diff,
                                  rel_diff=diff / max(float(np.max(np.abs(reference), initial=0.0)), 1e-30))
            except Exception as e:
                record["error"] = _error(e)
            write(record)
        del runner, out


def environment() -> dict:
    import jaxlib

    from jaxgraphops import _backend

    plugin = _backend._plugin
    return {"step": "timing", "env": {
        "device": jax.devices()[0].device_kind, "backend": jax.default_backend(), "kernels": jgo.kernel_platform(),
        "plugin": f"{plugin.distribution} {plugin.version}" if plugin else None, "jax": jax.__version__,
        "jaxlib": jaxlib.__version__, "numpy": np.__version__, "jaxgraphops": jgo.__version__,
        "python": sys.version.split()[0]}}


def _profiler():
    """``(cudaProfilerStart, cudaProfilerStop)`` of CuPy's CUDA runtime or of a libcudart found by the loader
    (the profiler acts on the device's primary context, which JAX uses too); None where there is neither."""
    try:
        from cupy.cuda import runtime

        return runtime.profilerStart, runtime.profilerStop
    except Exception:
        pass
    import ctypes

    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        return lib.cudaProfilerStart, lib.cudaProfilerStop
    return None


def _profiled_forward(key: str, impl: str, scale: float, cache: Path | None) -> None:
    """One warmed-up forward of ``impl`` on ``key`` between cudaProfilerStart and cudaProfilerStop (without a
    CUDA runtime the pass runs unmarked, and a note says so)."""
    case = build_case(key, scale, cache)
    runner = case.impls[impl]()
    runner.output()  # compiles and runs it once
    profiler = _profiler()
    try:
        if profiler is None:
            raise RuntimeError("no CUDA runtime found")
        profiler[0]()
    except Exception as e:  # no CUDA runtime, or no GPU for it (the CPU dry run)
        print(f"gpu_check: no cudaProfilerStart ({_error(e)}): the pass runs unmarked", file=sys.stderr)
        profiler = None
    runner.sync(runner.calls[FORWARD]())
    if profiler is not None:
        profiler[1]()
    print(f"gpu_check: profiled one forward of {impl} on {key} ({case.shape})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="JSON-lines file the records are appended to")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the graph sizes (default 1)")
    parser.add_argument("--repeats", type=int, default=7, help="timed calls (and batches) per measurement")
    parser.add_argument("--determinism", type=int, default=10, help="further runs compared bit for bit")
    parser.add_argument("--only", nargs="+", metavar="KEY", help="the cases to run (default: all, in order)")
    parser.add_argument("--budget", type=float, default=math.inf, help="seconds after which no case starts")
    parser.add_argument("--cache", type=Path, help="a folder keeping the graphs' arrays between processes")
    parser.add_argument("--list", action="store_true", help="print the case keys and exit")
    parser.add_argument("--ncu-case", metavar="KEY", help="profile one forward pass of this case (step d)")
    parser.add_argument("--impl", default=JAXGRAPHOPS, help="the implementation --ncu-case runs")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(case_keys()))
        return 0
    if args.ncu_case:
        _profiled_forward(args.ncu_case, args.impl, args.scale, args.cache)
        return 0
    if args.out is None:
        parser.error("--out is required (or --list, --ncu-case)")
    keys = args.only or case_keys()
    unknown = [key for key in keys if key not in case_keys()]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)} (--list names them)")

    def write(record: dict) -> None:
        with open(args.out, "a") as f:  # opened per record: a killed run keeps every line written
            f.write(json.dumps(record) + "\n")
        if "case" in record:
            ms = "error: " + record["error"] if "error" in record else (
                f"{record['ms']:9.3f} ms ({record['ms_pipelined']:.3f} pipelined), "
                f"{record['distinct_outputs']} distinct of {record['determinism_runs']}")
            print(f"{record['case']:<34} {record['pass']:<17} {record['impl']:<17} {ms}", flush=True)

    started = time.perf_counter()
    write(environment())
    for i, key in enumerate(keys):
        if time.perf_counter() - started > args.budget:
            write({"step": "timing", "skipped": keys[i:], "reason": f"--budget {args.budget:g} s spent"})
            break
        try:
            case = build_case(key, args.scale, args.cache)
        except Exception as e:
            write({"step": "timing", "case": key, "pass": FORWARD, "impl": "-", "error": _error(e)})
            continue
        measure(case, args.repeats, args.determinism, write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
