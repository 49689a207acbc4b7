"""Markdown tables of the peer report, from its result records (dicts with ``key, op, shape, pass,
library, ms, peak_bytes``)."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

LIBRARIES = ("jaxgraphops", "XLA reference", "jraph", "e3nn-jax", "cuEquivariance naive", "PyG", "PyG CSR spmm",
             "DGL", "neuraloperator")
OURS, XLA = LIBRARIES[0], LIBRARIES[1]


def _index(results):
    return {(r["key"], r["pass"], r["library"]): r for r in results}


def _rows(results):
    """``(key, op, shape, pass)`` in the order measured, without repeats."""
    seen = {}
    for r in results:
        seen.setdefault((r["key"], r["pass"]), (r["key"], r["op"], r["shape"], r["pass"]))
    return list(seen.values())


def _columns(results):
    present = {r["library"] for r in results}
    return [lib for lib in LIBRARIES if lib in present]


def _table(results, cell, columns, first="op"):
    index = _index(results)
    lines = [f"| {first} | shape | pass | " + " | ".join(columns) + " |",
             "|---|---|---|" + "---:|" * len(columns)]
    for key, op, shape, pass_ in _rows(results):
        cells = [cell(index, key, pass_, lib) for lib in columns]
        lines.append(f"| {op} | {shape} | {pass_} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def times(results) -> str:
    """Median ms per library, with each library's speed-up over the XLA reference in brackets."""
    def cell(index, key, pass_, lib):
        r, ref = index.get((key, pass_, lib)), index.get((key, pass_, XLA))
        if r is None:
            return "—"
        return f"{r['ms']:.1f}" + (f" ({ref['ms'] / r['ms']:.2f}x)" if ref and lib != XLA else "")
    return _table(results, cell, _columns(results))


def speedups(results) -> str:
    """jaxgraphops' speed-up over every other library: their time / jaxgraphops' time."""
    def cell(index, key, pass_, lib):
        r, ours = index.get((key, pass_, lib)), index.get((key, pass_, OURS))
        return "—" if r is None or ours is None else f"**{r['ms'] / ours['ms']:.2f}x**"
    return _table(results, cell, [lib for lib in _columns(results) if lib != OURS])


def memory(results) -> str:
    """Peak memory per library in MB (resident memory added during one call on the CPU, the
    allocator's peak on an accelerator)."""
    def cell(index, key, pass_, lib):
        r = index.get((key, pass_, lib))
        return "—" if r is None or r["peak_bytes"] is None else f"{r['peak_bytes'] / 2**20:.0f}"
    return _table(results, cell, _columns(results))


def bandwidth(results, cases, copy_gbps: float) -> str:
    """Forward of the memory-bound ops: their byte bounds, the roofline times at the measured copy
    bandwidth, and each library's no-reuse bytes per second (and fraction of the copy bandwidth)."""
    index, columns = _index(results), _columns(results)
    lines = ["| op | shape | compulsory / no-reuse MB | roofline (ms) | " + " | ".join(columns) + " |",
             "|---|---|---:|---:|" + "---:|" * len(columns)]
    for case in cases:
        if case.min_bytes is None:
            continue
        cells = []
        for lib in columns:
            r = index.get((case.key, "forward", lib))
            gbps = case.no_reuse_bytes / (r["ms"] * 1e6) if r else None
            cells.append("—" if gbps is None else f"{gbps:.1f} GB/s ({100 * gbps / copy_gbps:.0f}%)")
        lo, hi = (b / (copy_gbps * 1e6) for b in (case.min_bytes, case.no_reuse_bytes))
        lines.append(f"| {case.op} | {case.shape} | {case.min_bytes / 1e6:.0f} / {case.no_reuse_bytes / 1e6:.0f} | "
                     f"{lo:.1f}–{hi:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def replace_section(path: Path, begin: str, end: str, body: str) -> None:
    """Replaces the text between the markers ``begin`` and ``end`` in ``path`` with ``body`` (appends the
    block the first time)."""
    text = path.read_text() if path.exists() else ""
    block = f"{begin}\n{body}{end}"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


def command(module: str, argv=None) -> str:
    """The command line that ran ``python -m module`` with ``argv`` (the process's when None)."""
    return shlex.join(["python", "-m", module, *(argv if argv is not None else sys.argv[1:])])


def publish(body: str, output: str, tag: str) -> None:
    """Prints a benchmark's section and writes it into ``output`` (unless empty) between the markers
    ``<!-- TAG -->`` and ``<!-- /TAG -->``."""
    print(body)
    if output:
        replace_section(Path(output), f"<!-- {tag} -->", f"<!-- /{tag} -->", body)
