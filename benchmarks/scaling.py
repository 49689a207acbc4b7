"""The scaling sweep of the peer report: gspmm (u_mul_e sum, F=64) and mha_gat (H=8, C=8) on
power-law graphs of average degree 10, E from 1e4 up, jaxgraphops against the XLA reference."""

from __future__ import annotations

import gc

import numpy as np

from . import workloads
from .impl_jax import JAXGRAPHOPS, XLA
from .runners import IMPLEMENTATIONS, median_ms

OPS = {"gspmm u_mul_e sum, F=64": "gspmm_sum", "mha_gat, H=8 C=8": "gat"}


def edge_counts(max_edges: int) -> list[int]:
    """1e4, 3e4, 1e5, ... up to ``max_edges``."""
    counts = [int(m * 10**k) for k in range(4, 10) for m in (1, 3)]
    return [e for e in counts if e <= max_edges]


def _data(e: int) -> dict:
    n, f = max(e // 10, 100), 64
    src, dst = workloads.power_law_graph(n, e, seed=5)
    rng = np.random.default_rng(6)
    return dict(src=src, dst=dst, n=n, x=rng.normal(size=(n, f)).astype(np.float32),
                w=rng.uniform(0.5, 1.5, e).astype(np.float32),
                att=(rng.normal(size=2 * f) / np.sqrt(8)).astype(np.float32), heads=8)


def run(max_edges: int, reference_max_edges: int, repeats: int, log=print) -> list[dict]:
    """Median times of forward and forward+backward; the reference stops at ``reference_max_edges``."""
    records = []
    for e in edge_counts(max_edges):
        data = _data(e)
        for op, key in OPS.items():
            for library in (JAXGRAPHOPS, XLA):
                if library == XLA and e > reference_max_edges:
                    continue
                runner = IMPLEMENTATIONS[key][library](data)
                for pass_, call in runner.calls.items():
                    ms = median_ms(call, runner.sync, repeats=repeats)
                    records.append({"op": op, "library": library, "pass": pass_, "edges": e, "ms": ms})
                    log(f"  sweep {op:<24} E={e:>11,} {library:<14} {pass_:<17} {ms:10.2f} ms")
                del runner
                gc.collect()
    return records


def table(records) -> str:
    """Markdown: one row per E, median ms per (op, library, pass)."""
    columns = list(dict.fromkeys((r["op"], r["library"], r["pass"]) for r in records))
    index = {(r["op"], r["library"], r["pass"], r["edges"]): r["ms"] for r in records}
    lines = ["| E | " + " | ".join(f"{op}: {lib} {p} (ms)" for op, lib, p in columns) + " |",
             "|---:|" + "---:|" * len(columns)]
    for e in sorted({r["edges"] for r in records}):
        cells = [f"{index[(*c, e)]:.2f}" if (*c, e) in index else "—" for c in columns]
        lines.append(f"| {e:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
