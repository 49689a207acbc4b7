"""Two builds of jaxgraphops' kernels timed against each other: ``python -m benchmarks.ab A B``.

A and B are folders each holding an installed jaxgraphops (``pip install --no-deps --target A wheel_a.whl``).
Each round runs one process per build, in alternating order, that times the kernel side of the chosen suites
of ``python -m benchmarks`` (medians of ``--repeats`` runs); the table gives per case each build's median over
the rounds and B / A. On a noisy machine this alternation is what makes the ratio mean something: both builds
meet the same noise, round by round. Used to show that a build change (flags, how a file is split) leaves the
kernels' speed where it was::

    python -m benchmarks.ab /tmp/ab/main /tmp/ab/new --suite gspmm --suite gno --rounds 5 --scale 0.5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _worker(suites: list[str], scale: float, repeats: int) -> None:
    """Times the kernels of ``suites`` in this process; prints ``{case: ms}`` as one JSON line."""
    import jaxgraphops

    from . import __main__ as suites_module
    from ._timing import median_ms

    times = {"__file__": jaxgraphops.__file__}
    for suite in suites:
        for name, shape, pass_, kernel, _, operands in suites_module.SUITES[suite](scale):
            times[f"{suite}: {name} {pass_} ({shape})"] = median_ms(kernel, *operands, repeats=repeats)
    print(json.dumps(times))


def run_build(site: Path, suites: list[str], scale: float, repeats: int) -> dict[str, float]:
    """One timing process importing the jaxgraphops installed in ``site`` (the benchmarks from this checkout),
    started outside the checkout so that its source tree is not imported instead."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    args = [sys.executable, "-m", "benchmarks.ab", "--worker", *sum((["--suite", s] for s in suites), []),
            "--scale", str(scale), "--repeats", str(repeats)]
    done = subprocess.run(args, env=env, cwd=site, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"the timing process for {site} failed:\n{done.stderr[-3000:]}")
    times = json.loads(done.stdout.strip().splitlines()[-1])
    loaded = Path(times.pop("__file__")).resolve()
    if site.resolve() not in loaded.parents:
        sys.exit(f"{site}: the timing process imported {loaded}, not the build in {site}")
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path, nargs="?", help="folder holding build A (installed with pip --target)")
    parser.add_argument("b", type=Path, nargs="?", help="folder holding build B")
    parser.add_argument("--suite", action="append", help="suites of python -m benchmarks (default: gspmm)")
    parser.add_argument("--rounds", type=int, default=5, help="alternations of the two builds (default 5)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per case and process (default 5)")
    parser.add_argument("--scale", type=float, default=1.0, help="graph sizes as python -m benchmarks --scale")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    suites = args.suite or ["gspmm"]
    if args.worker:
        _worker(suites, args.scale, args.repeats)
        return 0
    if args.a is None or args.b is None:
        parser.error("two build folders are needed")
    runs: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
    for r in range(args.rounds):
        order = [("A", args.a), ("B", args.b)][:: 1 if r % 2 == 0 else -1]
        for label, site in order:
            for case, ms in run_build(site, suites, args.scale, args.repeats).items():
                runs[label].setdefault(case, []).append(ms)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    print(f"A = {args.a}\nB = {args.b}\n{args.rounds} alternating rounds, medians of {args.repeats} runs each\n")
    print("| case | A (ms) | B (ms) | B / A |\n|---|---:|---:|---:|")
    for case in runs["A"]:
        a, b = np.median(runs["A"][case]), np.median(runs["B"][case])
        print(f"| {case} | {a:.1f} | {b:.1f} | {b / a:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
