"""``python -m benchmarks``: runs the benchmarks, prints a table, appends it to BENCHMARKS.md."""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys

import jax
import numpy as np

from . import aggregation, attention, dimenet, gno, gspmm, relational, sampling
from ._timing import machine, median_ms

SUITES = {"aggregation": aggregation.cases, "attention": attention.cases, "dimenet": dimenet.cases,
          "gno": gno.cases, "gspmm": gspmm.cases, "relational": relational.cases, "sampling": sampling.cases}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--suite", choices=sorted(SUITES), action="append", help="suites to run (default: all)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply graph sizes (default 1: the issue's shape)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per measurement; the median is reported")
    parser.add_argument("--append", default="BENCHMARKS.md", help="file to append the table to ('' to skip)")
    args = parser.parse_args(argv)

    rows = []
    for suite in args.suite or sorted(SUITES):
        for name, shape, pass_, kernel, reference, operands in SUITES[suite](args.scale):
            jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3),
                                   kernel(*operands), reference(*operands))
            t_ref = median_ms(reference, *operands, repeats=args.repeats)
            t_ker = median_ms(kernel, *operands, repeats=args.repeats)
            rows.append((name, shape, pass_, t_ker, t_ref, t_ref / t_ker))
            print(f"{name:<20} {pass_:<17} jaxgraphops {t_ker:9.1f} ms   XLA {t_ref:9.1f} ms   x{t_ref / t_ker:5.2f}",
                  flush=True)

    header = "| op | shape | pass | jaxgraphops (ms) | XLA reference (ms) | speed-up |\n|---|---|---|---:|---:|---:|\n"
    table = header + "".join(f"| {n} | {s} | {p} | {k:.1f} | {r:.1f} | {x:.2f}x |\n" for n, s, p, k, r, x in rows)
    command = shlex.join(["python", "-m", "benchmarks", *(argv if argv is not None else sys.argv[1:])])
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    report = (f"\n### {stamp}: {machine()}\n\nCommand: `{command}` (medians of {args.repeats} runs after "
              f"2 warm-up runs, both columns measured in the same run)\n\n{table}")
    print(report)
    if args.append:
        with open(args.append, "a") as f:
            f.write(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
