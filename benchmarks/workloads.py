"""The realistic inputs of the peer report, as NumPy arrays (every library converts them itself).

- :func:`power_law_graph`: a Chung-Lu random graph with power-law in- and out-degrees, in the size
  class of ogbn-arxiv (169,343 nodes, 1,166,243 edges, 128 features).
- :func:`molecule_batch_sizes`: graph sizes of a QM9-like batch of molecules (9 to 29 atoms).
- :func:`catalyst_batch`: an OC20-like batch for DimeNet++ (metal slabs, periodic, 5 Å cutoff).
- :func:`airfoil_points`: the 2-D airfoil mesh shipped with pygsp (4,253 nodes), for the GNO.
- :func:`mesh_graph`: a MeshGraphNet-like 2-D mesh (k nearest neighbours of scattered points, both
  directions), ids shuffled.
"""

from __future__ import annotations

import importlib.resources

import numpy as np


def power_law_graph(n: int, e: int, *, exponent: float = 2.2, seed: int = 0):
    """``(src [e], dst [e])`` int32: ``e`` distinct edges (no multi-edges), both ends drawn with
    probability density proportional to ``rank ** (-1 / (exponent - 1))`` over the ``n`` node ranks
    (the expected degrees follow a power law with that exponent), node ids randomly permuted (no
    locality to exploit), edges in random order.

    >>> src, dst = power_law_graph(1000, 20_000)
    >>> int(np.bincount(dst, minlength=1000).max()) > 10 * 20   # hubs far above the mean degree
    True
    """
    rng = np.random.default_rng(seed)
    a = 1.0 - 1.0 / (exponent - 1.0)  # the rank density r ** (a - 1) has the CDF r ** a on [1, n + 1]

    def ranks(size):
        return ((1.0 + rng.random(size) * ((n + 1.0) ** a - 1.0)) ** (1.0 / a)).astype(np.int64) - 1

    keys = np.empty(0, np.int64)
    while len(keys) < e:  # redraw until e distinct (src, dst) pairs
        more = 2 * (e - len(keys)) + 16
        keys = np.sort(np.concatenate([keys, ranks(more) * n + ranks(more)]))
        keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    keys = rng.permutation(keys)[:e]
    relabel = rng.permutation(n).astype(np.int32)
    return relabel[keys // n], relabel[keys % n]


def molecule_batch_sizes(n_graphs: int, *, seed: int = 0) -> np.ndarray:
    """Atom counts of ``n_graphs`` molecules, uniform in QM9's range 9..29 (mean 19)."""
    return np.random.default_rng(seed).integers(9, 30, n_graphs)


def catalyst_batch(n_structures: int = 4, *, seed: int = 0):
    """OC20-like structures for DimeNet++ (the MLPerf HPC workload: 4 systems per GPU step): fcc(111)
    slabs of Cu, Pt, Au or Ni, 4x4 surface cells 5 layers deep (80 atoms), periodic in-plane, with
    the atoms rattled by 0.05 Å. Returns a list of ``(pos, cell, pbc)`` for
    :func:`jaxgraphops.dimenet.radius_graph_pbc`."""
    from ase.build import fcc111

    rng = np.random.default_rng(seed)
    structures = []
    for b in range(n_structures):
        slab = fcc111(("Cu", "Pt", "Au", "Ni")[b % 4], size=(4, 4, 5), vacuum=6.0)
        pos = slab.positions + rng.normal(scale=0.05, size=slab.positions.shape)
        structures.append((pos, np.asarray(slab.cell), tuple(bool(p) for p in slab.pbc)))
    return structures


def airfoil_points() -> np.ndarray:
    """The nodes ``[4253, 2]`` of pygsp's airfoil mesh, scaled to the unit square."""
    from scipy.io import loadmat

    mat = loadmat(importlib.resources.files("pygsp") / "data" / "pointclouds" / "airfoil.mat")
    pos = np.stack([mat["x"].ravel(), mat["y"].ravel()], axis=1).astype(np.float64)
    pos -= pos.min(axis=0)
    return pos / pos.max()


def mesh_graph(n: int, k: int = 6, *, seed: int = 0):
    """``(src, dst)`` int32 of a 2-D mesh-like graph on ``n`` random points of the unit square: each
    point's ``k`` nearest neighbours, every edge in both directions (duplicates removed), node ids
    randomly permuted, edges in random order.

    >>> src, dst = mesh_graph(1000)
    >>> bool(np.all(src != dst)) and 6 <= len(src) / 1000 <= 12
    True
    """
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    pos = rng.random((n, 2))
    _, nbr = cKDTree(pos).query(pos, k + 1)
    u, v = np.repeat(np.arange(n), k), nbr[:, 1:].ravel()
    keys = np.unique(np.concatenate([u * n + v, v * n + u]))
    keys = rng.permutation(keys)
    relabel = rng.permutation(n).astype(np.int32)
    return relabel[keys // n], relabel[keys % n]
