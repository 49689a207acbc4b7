"""Matplotlib figures of the peer report: jaxgraphops' speed-up over each peer per op, and the
scaling sweep (time and throughput against the number of edges)."""

from __future__ import annotations

import numpy as np

from .tables import OURS, _columns, _index, _rows


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def speedups(results, path: str, title: str) -> None:
    """Grouped bars, one panel per pass: ``peer time / jaxgraphops time`` per op, log scale."""
    plt = _pyplot()
    index, peers = _index(results), [lib for lib in _columns(results) if lib != OURS]
    passes = list(dict.fromkeys(r["pass"] for r in results))
    fig, axes = plt.subplots(len(passes), 1, figsize=(12, 3.6 * len(passes)), squeeze=False)
    for ax, pass_ in zip(axes[:, 0], passes):
        rows = [(key, op) for key, op, _, p in _rows(results) if p == pass_]
        width = 0.8 / len(peers)
        for i, lib in enumerate(peers):
            ratios = [index[(k, pass_, lib)]["ms"] / index[(k, pass_, OURS)]["ms"]
                      if (k, pass_, lib) in index else np.nan for k, _ in rows]
            ax.bar(np.arange(len(rows)) + (i - (len(peers) - 1) / 2) * width, ratios, width, label=lib)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_ylabel("peer time / jaxgraphops time")
        ax.set_title(f"{pass_}")
        ax.set_xticks(np.arange(len(rows)), [op for _, op in rows], rotation=15, ha="right", fontsize=8)
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0, 0].legend(ncol=4, fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def scaling(sweep, path: str, title: str) -> None:
    """Two panels per op: median time vs E (log-log, with a linear-growth guide) and edges per
    second vs E, one line per (library, pass)."""
    plt = _pyplot()
    ops = list(dict.fromkeys(r["op"] for r in sweep))
    fig, axes = plt.subplots(2, len(ops), figsize=(6 * len(ops), 8), squeeze=False)
    for col, op in enumerate(ops):
        lines = dict.fromkeys((r["library"], r["pass"]) for r in sweep if r["op"] == op)
        for lib, pass_ in lines:
            pts = sorted((r["edges"], r["ms"]) for r in sweep if (r["op"], r["library"], r["pass"]) == (op, lib, pass_))
            e, ms = np.array(pts, dtype=float).T
            style = "-" if lib == OURS else "--"
            axes[0, col].loglog(e, ms, style, marker="o", label=f"{lib}, {pass_}")
            axes[1, col].semilogx(e, e / (ms * 1e-3) / 1e6, style, marker="o", label=f"{lib}, {pass_}")
        e_all = np.array(sorted({r["edges"] for r in sweep if r["op"] == op}), dtype=float)
        first = min((r for r in sweep if r["op"] == op and r["library"] == OURS), key=lambda r: -r["edges"])
        axes[0, col].loglog(e_all, first["ms"] * e_all / first["edges"], ":", color="gray", label="linear in E")
        axes[0, col].set(title=op, xlabel="edges E", ylabel="median time (ms)")
        axes[1, col].set(xlabel="edges E", ylabel="throughput (million edges / s)")
        for ax in axes[:, col]:
            ax.grid(which="both", alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
