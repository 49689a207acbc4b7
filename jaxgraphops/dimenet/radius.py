"""Radius graphs of molecules and periodic crystals for DimeNet++ (host-side, scipy cKDTree; needs scipy)."""

from __future__ import annotations

import numpy as np

from ..graph import Graph

__all__ = ["neighbor_list", "radius_graph_pbc"]


def _images(cell, pbc, cutoff):
    """Integer image offsets covering every neighbour within ``cutoff`` (per periodic axis:
    ceil(cutoff / distance between lattice planes))."""
    volume = abs(np.linalg.det(cell))
    if volume < 1e-12:
        raise ValueError("radius_graph_pbc: the cell is singular")
    reps = []
    for k in range(3):
        if not pbc[k]:
            reps.append(np.array([0]))
            continue
        a, b = cell[(k + 1) % 3], cell[(k + 2) % 3]
        plane = volume / np.linalg.norm(np.cross(a, b))
        n = int(np.ceil(cutoff / plane))
        reps.append(np.arange(-n, n + 1))
    return np.stack(np.meshgrid(*reps, indexing="ij"), -1).reshape(-1, 3)


def neighbor_list(pos, cutoff: float, cell=None, pbc=None):
    """Directed pairs ``j -> i`` with ``|pos[j] + shift - pos[i]| < cutoff`` (no zero-length pair).

    Args:
      pos: ``[N, 3]`` positions (Cartesian).
      cutoff: the radius.
      cell: ``[3, 3]`` lattice vectors as rows, or None (a molecule).
      pbc: three booleans, which cell axes are periodic (default: all, when a cell is given).

    Returns ``(src [E], dst [E], shifts [E, 3])``: the edge vector of ``src -> dst`` is
    ``pos[src] + shifts - pos[dst]``. Sorted by ``(dst, src)``, then by shift.
    """
    from scipy.spatial import cKDTree  # scipy is needed only here

    pos = np.asarray(pos, np.float64)
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise ValueError(f"radius_graph_pbc: pos must be [N, 3], got {pos.shape}")
    if cell is None:
        images = np.zeros((1, 3))
        cell = np.eye(3)
    else:
        cell = np.asarray(cell, np.float64)
        if cell.shape != (3, 3):
            raise ValueError(f"radius_graph_pbc: cell must be [3, 3], got {cell.shape}")
        pbc = (True, True, True) if pbc is None else tuple(bool(p) for p in pbc)
        images = _images(cell, pbc, cutoff)
    shifts = images @ cell  # [S, 3]
    n = len(pos)
    replicated = (pos[None] + shifts[:, None]).reshape(-1, 3)  # image s of atom j at s * n + j
    pairs = cKDTree(replicated).query_ball_point(pos, cutoff)  # neighbours of each i
    dst = np.repeat(np.arange(n), [len(p) for p in pairs])
    flat = np.fromiter((q for p in pairs for q in p), np.int64, count=len(dst))
    src, image = flat % n, flat // n
    vec = replicated[flat] - pos[dst]
    keep = np.einsum("ij,ij->i", vec, vec) > 1e-20
    src, dst, image = src[keep], dst[keep], image[keep]
    order = np.lexsort((image, src, dst))
    return src[order], dst[order], shifts[image[order]]


def radius_graph_pbc(structures, cutoff: float, *, index_dtype=None):
    """The radius graph of a batch of structures, as one Graph.

    Args:
      structures: a list of ``(pos [N_b, 3], cell [3, 3] or None, pbc or None)``.
      cutoff: the radius.

    Returns ``(g, shifts [E, 3], batch [N])``: the Graph over all atoms (structure ``b``'s atoms
    after those of structures ``< b``), the edge shifts (``vec = pos[src] + shifts - pos[dst]``)
    and each atom's structure index.

    >>> import numpy as np
    >>> from jaxgraphops.dimenet import radius_graph_pbc
    >>> g, shifts, batch = radius_graph_pbc([(np.zeros((1, 3)), 2.0 * np.eye(3), None)], 2.5)
    >>> g.n_edges                                  # the 6 nearest images of a simple cubic atom
    6
    """
    srcs, dsts, shifts, batch, offset = [], [], [], [], 0
    for b, (pos, cell, pbc) in enumerate(structures):
        s, d, sh = neighbor_list(pos, cutoff, cell, pbc)
        srcs.append(s + offset)
        dsts.append(d + offset)
        shifts.append(sh)
        batch.append(np.full(len(pos), b))
        offset += len(pos)
    g = Graph.from_edges(np.concatenate(srcs), np.concatenate(dsts), offset, offset, index_dtype=index_dtype)
    return g, np.concatenate(shifts), np.concatenate(batch)
