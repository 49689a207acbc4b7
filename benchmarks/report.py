"""``python -m benchmarks.report``: jaxgraphops against its peers on realistic shapes, every op
family, forward and forward+backward, all libraries in one run; then a scaling sweep, neighbour sampling
and the roofline table (``benchmarks/roofline.py``, its own section). Writes the tables into BENCHMARKS.md
(replacing this device's previous report), the plots into ``benchmarks/plots/`` and the raw records as
JSON next to them.

Peers that are not installed are listed as such and left out. Before timing, every library's
forward output is checked against jaxgraphops' (the same work, or the report stops).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shlex
import sys
import time
from pathlib import Path

import jax
import numpy as np

from . import impl_jax, plots, roofline, sampling, scaling, tables
from ._timing import machine
from .cases import cases as all_cases
from .runners import IMPLEMENTATIONS, median_ms, pin_mmap_threshold

ROOT = Path(__file__).resolve().parent.parent


def copy_bandwidth_gbps() -> float:
    """Measured copy bandwidth (bytes read + written per second, best of 5) over 512 MiB: on the
    CPU ``np.copyto`` into a buffer already paged in, on an accelerator ``y = 2 x`` in JAX."""
    if jax.default_backend() == "cpu":
        src, dst = np.ones(2**27, np.float32), np.zeros(2**27, np.float32)
        best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(5))
        return 2 * src.nbytes / best / 1e9
    x = jax.numpy.ones(2**27, np.float32)
    double = jax.jit(lambda x: 2 * x)
    jax.block_until_ready(double(x))
    best = min(_timed(lambda: jax.block_until_ready(double(x))) for _ in range(5))
    return 2 * x.nbytes / best / 1e9


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _load_peers(gpu: bool) -> str | None:
    """Imports the torch peers; returns why not when torch is missing."""
    try:
        from . import impl_torch
    except ImportError as e:
        return f"torch peers not run: {e}"
    impl_torch.use_cuda(gpu)
    return None


def _check_same_work(case, library, out, expected) -> None:
    scale = max(float(np.abs(expected).max()), 1.0)
    if out.shape != expected.shape or not np.allclose(out, expected, rtol=1e-3, atol=1e-3 * scale):
        raise AssertionError(f"{library} disagrees with jaxgraphops on {case.op} ({case.shape}): "
                             f"max |diff| {np.abs(out - expected).max() if out.shape == expected.shape else out.shape}")


def measure(case_list, repeats: int, log=print):
    """Result records and the libraries that could not run (library -> reason)."""
    results, missing = [], {}
    for case in case_list:
        expected = None
        for library, make in IMPLEMENTATIONS.get(case.key, {}).items():
            try:
                runner = make(case.data)
                out = runner.output()
            except ImportError as e:
                missing[library] = f"not installed ({e.name})"
                continue
            except Exception as e:  # a peer that does not run on this stack (jaxgraphops' own errors propagate)
                if library in (impl_jax.JAXGRAPHOPS, impl_jax.XLA):
                    raise
                missing[f"{library}, {case.op}"] = f"failed on this stack: {type(e).__name__}: {e}"[:300]
                continue
            if expected is None:  # jaxgraphops is registered first
                expected = out
            _check_same_work(case, library, out, expected)
            for pass_ in case.passes:
                if pass_ in runner.untimed:
                    missing[f"{library}, {case.op}, {pass_}"] = runner.untimed[pass_]
                    continue
                call = runner.calls[pass_]
                ms = median_ms(call, runner.sync, repeats=repeats)
                peak = runner.memory(pass_)
                results.append({"key": case.key, "op": case.op, "family": case.family, "shape": case.shape,
                                "pass": pass_, "library": library, "ms": ms, "peak_bytes": peak})
                log(f"{case.op:<38} {pass_:<17} {library:<20} {ms:10.2f} ms   "
                    f"{'' if peak is None else f'{peak / 2**20:8.0f} MB'}")
            del runner, out
            gc.collect()
    return results, missing


def _write_section(path: Path, tag: str, body: str) -> None:
    """Replaces the text between ``<!-- tag -->`` and ``<!-- /tag -->`` in ``path`` (appends it the first time)."""
    tables.replace_section(path, f"<!-- {tag} -->", f"<!-- /{tag} -->", body + "\n")


WORKLOADS = """\
Workloads: an ogbn-arxiv-sized power-law graph (Chung-Lu, degree exponent 2.2, no multi-edges,
random node order; 128 features, or 8 heads of 16); a QM9-like batch of 4,096 molecules of 9 to 29
atoms (pool); 4 OC20-like fcc(111) metal slabs of 80 atoms, periodic, 5 Å cutoff (the MLPerf HPC
DimeNet++ step; n_emb 64, n_mid 8); pygsp's airfoil mesh with a radius graph (GNO: H 64, c 32).
The attention peers are the libraries' layers with identity projections and no bias, so they
compute the same op; PyG's aggregations are its MessagePassing path (`utils.scatter`) and, for
gspmm, also `utils.spmm` over a CSR adjacency; DGL's are `dgl.ops` and its conv layers.
"""


def render(device, command, seconds, args, copy_gbps, results, missing, case_list, sweep, link, sampled=None) -> str:
    """The markdown section of one report."""
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    skipped = "".join(f"- {lib}: {why}\n" for lib, why in sorted(missing.items()))
    body = (f"## Peer report ({device.upper()}), {stamp}\n\n{machine()}. Command: `{command}` ({seconds:.0f} s). "
            f"Medians of {args.repeats} timed runs (at least 3, fewer when they take over 8 s together) after a "
            f"warm-up run, every library in the same run; forward+backward is the value and gradient of "
            f"`sum(out ** 2)` in every float input and weight. Measured copy bandwidth: {copy_gbps:.1f} GB/s.\n\n"
            f"{WORKLOADS}\n" + (f"Not run:\n{skipped}\n" if skipped else "")
            + f"### jaxgraphops' speed-up over each library (their time / ours)\n\n{tables.speedups(results)}\n"
            f"![speed-ups]({link}/speedups_{device}.png)\n\n"
            f"### Median time (ms), and in brackets the speed-up over the XLA reference\n\n{tables.times(results)}\n"
            f"### Peak memory of one call (MB)\n\nJAX: XLA's buffer assignment of the compiled program (scratch and "
            f"outputs). torch: on the CPU the resident memory added during one call (glibc's mmap threshold pinned "
            f"at 256 KiB so that freed buffers leave the process), on CUDA the allocator's peak.\n\n"
            f"{tables.memory(results)}\n"
            f"### Achieved bandwidth, forward of the memory-bound ops\n\n"
            f"The byte counts of `benchmarks/cases.py`: compulsory = indices and every input read once, the "
            f"output written once (perfect reuse); no reuse = every gathered row read from memory. Roofline = "
            f"those bytes at the measured copy bandwidth. Each library's bandwidth is the no-reuse bytes over "
            f"its forward time, and in brackets its fraction of the copy bandwidth.\n\n"
            f"{tables.bandwidth(results, case_list, copy_gbps)}\n")
    if sweep:
        body += (f"### Scaling sweep (median ms)\n\ngspmm u_mul_e sum (F = 64) and mha_gat (H = 8, C = 8) on power-law "
                 f"graphs of average degree 10, E from 1e4 to {args.sweep_max_edges:.0e} for jaxgraphops and to "
                 f"{args.sweep_reference_max_edges:.0e} for the XLA reference (a time budget; `--sweep-max-edges` and "
                 f"`--sweep-reference-max-edges` go further). The lower panels show throughput: it rises while "
                 f"the per-call overhead dominates and flattens where the thread pool is saturated.\n\n"
                 f"{scaling.table(sweep)}\n![scaling]({link}/scaling_{device}.png)\n")
    if sampled:
        records, not_run = sampled
        body += (f"### Neighbour sampling (seeds per second)\n\n"
                 f"`sample_blocks` with fanouts {sampling.FANOUTS} (two hops, without replacement; kernels and "
                 f"`impl=\"xla\"`) and the CPU samplers of DGL and PyG; {records[0]['shape'] if records else ''}. "
                 f"Seeds per second over one run of every batch (median of {args.repeats} runs after a warm-up "
                 f"run); relabelled blocks out (`benchmarks/sampling.py`).\n\n{sampling.table(records, not_run)}\n")
    return body


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the graph sizes (default 1)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per measurement (median reported)")
    parser.add_argument("--sweep-max-edges", type=float, default=1e7, help="largest E of the sweep (0: no sweep)")
    parser.add_argument("--sweep-reference-max-edges", type=float, default=1e6,
                        help="largest E at which the sweep also times the XLA reference")
    parser.add_argument("--only", action="append", help="run only these case keys (e.g. gat; sampling: the "
                        "neighbour-sampling table; roofline: the roofline table, benchmarks/roofline.py)")
    parser.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"), help="markdown file to update ('' to skip)")
    parser.add_argument("--plot-dir", default=str(ROOT / "benchmarks" / "plots"), help="where the PNGs and JSON go")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    pin_mmap_threshold()

    gpu = jax.default_backend() != "cpu"
    device = "gpu" if gpu else "cpu"
    peers_note = _load_peers(gpu)
    if peers_note:
        print(peers_note)
    case_list = [c for c in all_cases(args.scale) if not args.only or c.key in args.only]
    results, missing = measure(case_list, args.repeats)
    copy_gbps = copy_bandwidth_gbps()
    print(f"copy bandwidth: {copy_gbps:.1f} GB/s")
    sweep = []
    if args.sweep_max_edges > 0:
        sweep = scaling.run(int(args.sweep_max_edges), int(args.sweep_reference_max_edges), args.repeats)
    sampled = sampling.run(args.scale, args.repeats) if not args.only or "sampling" in args.only else None
    roofline_started = time.perf_counter()
    roof = roofline.run(args.scale) if not args.only or "roofline" in args.only else None
    roofline_s = time.perf_counter() - roofline_started

    plot_dir = Path(args.plot_dir).resolve()
    plot_dir.mkdir(parents=True, exist_ok=True)
    (plot_dir / f"report_{device}.json").write_text(json.dumps(
        {"machine": machine(), "copy_gbps": copy_gbps, "results": results, "sweep": sweep,
         "sampling": sampled and sampled[0], "roofline": roof}, indent=1))
    if results:
        plots.speedups(results, str(plot_dir / f"speedups_{device}.png"), f"jaxgraphops vs peers, {machine()}")
    if sweep:
        plots.scaling(sweep, str(plot_dir / f"scaling_{device}.png"), f"scaling sweep, {machine()}")

    command = shlex.join(["python", "-m", "benchmarks.report", *(argv if argv is not None else sys.argv[1:])])
    body = render(device, command, time.perf_counter() - started, args, copy_gbps, results, missing, case_list,
                  sweep, os.path.relpath(plot_dir, Path(args.output or ".").resolve().parent), sampled)
    print(body)
    if args.output:
        _write_section(Path(args.output), f"peer-report-{device}", body)
    if roof:
        roof_body = roofline.render(roof, command, roofline_s, args.scale)
        print(roof_body)
        if args.output:
            roofline.write_section(Path(args.output), roof_body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
