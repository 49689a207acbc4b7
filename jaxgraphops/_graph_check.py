"""The checks of a graph's arrays, behind :func:`jaxgraphops.graph.check_graph` (which checks that ``g`` is a
:class:`~jaxgraphops.Graph` first): the eight index arrays have the shapes and the one integer dtype the ops
need (checked at trace time, also under ``jit``), and, when the arrays are concrete (outside ``jit``), hold a
valid graph: every id in range, the CSC and CSR groupings permutations of the edges that agree with
``src``/``dst``, the padding edges (if any) last. A leaf module: it reads the arrays by name.
"""

from __future__ import annotations

import jax
import numpy as np

_GRAPH_ARRAYS = ("src", "dst", "csc_offsets", "csc_src", "csc_eid", "csr_offsets", "csr_dst", "csr_eid")
_HINT = "(build graphs with Graph.from_edges; a Graph built by hand must hold the arrays from_edges would)"


def check_arrays(fn: str, g) -> None:
    """Checks the arrays of the graph ``g`` (structure always, values once where concrete: the result is kept
    on ``g``); raises TypeError/ValueError naming ``fn``."""
    _check_structure(fn, g)
    if getattr(g, "_checked", False) or getattr(g, "_values_checked", False):
        return
    arrays = [getattr(g, n) for n in _GRAPH_ARRAYS]
    if not any(isinstance(a, jax.core.Tracer) for a in arrays):
        _check_values(fn, g, [np.asarray(a) for a in arrays])
        g._values_checked = True  # not _checked: that one is the graph's structure (Graph.tree_flatten)


def _check_structure(fn, g) -> None:
    """Shapes and dtypes of the index arrays: static, so checked under jit too."""
    for name, n in (("n_src", g.n_src), ("n_dst", g.n_dst)):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"{fn}: g.{name} must be a non-negative int; got {n!r} {_HINT}")
    dtype = None
    for name in _GRAPH_ARRAYS:
        x = getattr(g, name)
        if not hasattr(x, "shape") or not hasattr(x, "dtype"):
            raise TypeError(f"{fn}: g.{name} must be an integer array; got {type(x).__name__} {_HINT}")
        d = np.dtype(x.dtype)
        if d not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise TypeError(f"{fn}: g.{name} must have dtype int32 or int64; got {d} {_HINT}")
        if dtype is None:
            dtype = d
        elif d != dtype:
            raise TypeError(f"{fn}: the index arrays of g must share one dtype; g.src is {dtype}, "
                            f"g.{name} is {d} {_HINT}")
    if len(g.src.shape) != 1:
        raise ValueError(f"{fn}: g.src must be 1-D [n_edges]; got shape {tuple(g.src.shape)} {_HINT}")
    e = g.src.shape[0]
    want = {"dst": (e,), "csc_offsets": (g.n_dst + 1,), "csc_src": (e,), "csc_eid": (e,),
            "csr_offsets": (g.n_src + 1,), "csr_dst": (e,), "csr_eid": (e,)}
    for name, shape in want.items():
        got = tuple(getattr(g, name).shape)
        if got != shape:
            what = "n_dst + 1" if name == "csc_offsets" else "n_src + 1" if name == "csr_offsets" else "n_edges"
            raise ValueError(f"{fn}: g.{name} must have shape {shape} ([{what}]); got {got} {_HINT}")


def _check_values(fn, g, arrays) -> None:
    """Ids in range, groupings that are permutations of the edges and agree with src/dst; the padding edges,
    if any, last (positions ``R:`` of both groupings, ``R`` where both end, holding ids ``R..E-1`` in order)."""
    src, dst, csc_offsets, csc_src, csc_eid, csr_offsets, csr_dst, csr_eid = (a.astype(np.int64) for a in arrays)
    n_src, n_dst, e = g.n_src, g.n_dst, src.shape[0]
    # R, where both groupings end: the edges after it are padding, in no row. Of groupings that end in two
    # places, the error names the one that does not end at n_edges (csr_offsets if neither does).
    ends = int(csc_offsets[-1]), int(csr_offsets[-1])
    real = e if ends[0] != ends[1] and e in ends else ends[0]
    for name, x, n in (("src", src, n_src), ("dst", dst, n_dst), ("csc_src", csc_src, n_src),
                       ("csr_dst", csr_dst, n_dst), ("csc_eid", csc_eid, e), ("csr_eid", csr_eid, e)):
        bad = np.flatnonzero((x < 0) | (x >= n))
        if bad.size:
            k = bad[0]
            raise ValueError(f"{fn}: g.{name}[{k}] = {x[k]} is out of range [0, {n}) {_HINT}")
    for side, offsets, key, nbr, other, eid, n_rows in (
            ("csc", csc_offsets, dst, csc_src, src, csc_eid, n_dst),
            ("csr", csr_offsets, src, csr_dst, dst, csr_eid, n_src)):
        nbr_name = "csc_src" if side == "csc" else "csr_dst"
        key_name, other_name = ("dst", "src") if side == "csc" else ("src", "dst")
        other_end = (csr_offsets if side == "csc" else csc_offsets)[-1]
        if offsets[0] != 0 or not 0 <= offsets[-1] <= e or offsets[-1] != real or np.any(np.diff(offsets) < 0):
            raise ValueError(f"{fn}: g.{side}_offsets must start at 0, never decrease and end at n_edges={e} (or, "
                             f"with padding edges, where the other grouping ends: {other_end}); got "
                             f"{_preview(offsets)} {_HINT}")
        seen = np.bincount(eid, minlength=e)
        if np.any(seen != 1):
            twice = int(np.flatnonzero(seen > 1)[0])
            raise ValueError(f"{fn}: g.{side}_eid must be a permutation of [0, {e}); edge id {twice} appears "
                             f"{seen[twice]} times {_HINT}")
        tail = np.flatnonzero(eid[real:] < real)
        if tail.size:
            k = real + tail[0]
            raise ValueError(f"{fn}: the padding edges must come last: the groupings end at {real} of {e} edges, "
                             f"so g.{side}_eid[{k}:] must hold the edge ids {real}..{e - 1}; g.{side}_eid[{k}] = "
                             f"{eid[k]} {_HINT}")
        eid = eid[:real]
        rows = np.repeat(np.arange(n_rows), np.diff(offsets))
        bad = np.flatnonzero(key[eid] != rows)
        if bad.size:
            k = bad[0]
            raise ValueError(f"{fn}: g.{side}_offsets and g.{side}_eid put edge {eid[k]} in group {rows[k]}, "
                             f"but g.{key_name}[{eid[k]}] = {key[eid[k]]} {_HINT}")
        bad = np.flatnonzero(nbr[:real] != other[eid])
        if bad.size:
            k = bad[0]
            raise ValueError(f"{fn}: g.{nbr_name}[{k}] = {nbr[k]}, but its edge g.{side}_eid[{k}] = {eid[k]} has "
                             f"{other_name} {other[eid[k]]} {_HINT}")


def _preview(x, n=8):
    x = np.asarray(x).tolist()
    return str(x) if len(x) <= n else str(x[:n])[:-1] + ", ...]"
