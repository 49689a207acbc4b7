"""Neighbour graphs of point sets (host side, on ``scipy.spatial.cKDTree``).

Both builders return a :class:`~jaxgraphops.Graph` whose edges go from a source point (a data
point ``y_j``) to a destination point (a query ``x_i``), grouped by destination in increasing
source order, the layout a GNO layer integrates over. Positions must be concrete (NumPy or JAX
arrays outside ``jit``).
"""

from __future__ import annotations

import numpy as np

from .graph import Graph


def _points(fn, name, pos):
    pos = np.asarray(pos)
    if not np.issubdtype(pos.dtype, np.floating) and not np.issubdtype(pos.dtype, np.integer):
        raise TypeError(f"{fn}: {name} must be a numeric array; got dtype {pos.dtype}")
    if pos.ndim != 2:
        raise ValueError(f"{fn}: {name} must be [n, d]; got shape {pos.shape}")
    return pos.astype(np.float64)


def _pair(fn, pos_src, pos_dst):
    src = _points(fn, "pos_src", pos_src)
    dst = src if pos_dst is None else _points(fn, "pos_dst", pos_dst)
    if dst.shape[1] != src.shape[1]:
        raise ValueError(f"{fn}: pos_src and pos_dst must have the same dimension d; got {src.shape[1]} and "
                         f"{dst.shape[1]}")
    return src, dst


def _graph(lists, n_src, n_dst, index_dtype):
    counts = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    src = np.concatenate([np.sort(np.asarray(x, dtype=np.int64)) for x in lists]) if counts.sum() else np.zeros(0, np.int64)
    dst = np.repeat(np.arange(n_dst, dtype=np.int64), counts)
    return Graph.from_edges(src, dst, n_src, n_dst, index_dtype=index_dtype)


def _check_loop(fn, loop, pos_dst) -> bool:
    if not isinstance(loop, (bool, np.bool_)):
        raise TypeError(f"{fn}: loop must be a bool; got {loop!r}")
    if loop and pos_dst is not None:
        raise ValueError(f"{fn}: loop=True adds self loops to one point set (pos_dst=None); with two point sets "
                         f"(pos_dst given) source j and destination i are different points and no edge is a loop")
    return bool(loop)


def radius_graph(pos_src, pos_dst, r: float, *, loop: bool = False, max_num_neighbors: int | None = None,
                 index_dtype=None) -> Graph:
    """Edges ``j -> i`` for every source point within distance ``r`` of destination point ``i``.

    ``pos_src [n_src, d]``, ``pos_dst [n_dst, d]`` (None: ``pos_src``, one point set). Distances ``<= r``
    count. On one point set, ``loop=False`` (the default, as PyG's ``radius_graph``) leaves out the self
    loops ``i -> i``, whose distance 0 would make a force or a direction from ``pos[j] - pos[i]`` NaN;
    ``loop=True`` keeps them (neuraloperator's neighbour search, a GNO's integral over a ball around each
    point). With ``max_num_neighbors``, each destination keeps its nearest ``max_num_neighbors`` sources
    within ``r`` (ties by source index). Edges are grouped by destination, sources in increasing order.

    >>> import numpy as np, jaxgraphops as jgo
    >>> g = jgo.radius_graph(np.array([[0.0], [1.0], [3.0]]), None, 1.5)
    >>> g.src.tolist(), g.dst.tolist()
    ([1, 0], [0, 1])
    >>> g = jgo.radius_graph(np.array([[0.0], [1.0], [3.0]]), None, 1.5, loop=True)
    >>> g.src.tolist(), g.dst.tolist()
    ([0, 1, 0, 1, 2], [0, 0, 1, 1, 2])
    """
    from scipy.spatial import cKDTree

    fn = "radius_graph"
    src, dst = _pair(fn, pos_src, pos_dst)
    loop = _check_loop(fn, loop, pos_dst)
    r = float(r)
    if not np.isfinite(r) or r < 0:
        raise ValueError(f"{fn}: r must be a finite number >= 0; got {r}")
    if max_num_neighbors is not None and (isinstance(max_num_neighbors, bool) or int(max_num_neighbors) < 1):
        raise ValueError(f"{fn}: max_num_neighbors must be a positive int or None; got {max_num_neighbors!r}")
    lists = cKDTree(src).query_ball_point(dst, r) if len(src) else [[] for _ in range(len(dst))]
    if pos_dst is None and not loop:
        lists = [[j for j in js if j != i] for i, js in enumerate(lists)]
    if max_num_neighbors is not None:
        k = int(max_num_neighbors)
        kept = []
        for i, js in enumerate(lists):
            js = np.sort(np.asarray(js, dtype=np.int64))
            d2 = ((src[js] - dst[i]) ** 2).sum(axis=1)
            kept.append(js[np.argsort(d2, kind="stable")[:k]])
        lists = kept
    return _graph(lists, len(src), len(dst), index_dtype)


def knn_graph(pos_src, pos_dst, k: int, *, loop: bool = False, index_dtype=None) -> Graph:
    """Edges ``j -> i`` from the ``k`` nearest source points of every destination point ``i``.

    ``pos_src [n_src, d]``, ``pos_dst [n_dst, d]`` (None: ``pos_src``, one point set). On one point set,
    ``loop=False`` (the default, as PyG's ``knn_graph``) leaves a point out of its own neighbours: the ``k``
    nearest other points (needs ``k < n_src``); ``loop=True`` counts the point itself, its own nearest
    neighbour (needs ``k <= n_src``). Ties in distance are broken by the KD-tree. Edges are grouped by
    destination, sources in increasing order.

    >>> import numpy as np, jaxgraphops as jgo
    >>> g = jgo.knn_graph(np.array([[0.0], [1.0], [3.0]]), None, 1)
    >>> g.src.tolist(), g.dst.tolist()
    ([1, 0, 1], [0, 1, 2])
    >>> g = jgo.knn_graph(np.array([[0.0], [1.0], [3.0]]), None, 2, loop=True)
    >>> g.src.tolist(), g.dst.tolist()
    ([0, 1, 0, 1, 1, 2], [0, 0, 1, 1, 2, 2])
    """
    from scipy.spatial import cKDTree

    fn = "knn_graph"
    src, dst = _pair(fn, pos_src, pos_dst)
    loop = _check_loop(fn, loop, pos_dst)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"{fn}: k must be a positive int; got {k!r}")
    skip_self = pos_dst is None and not loop
    if k + skip_self > len(src):
        what = "other points (loop=False leaves a point out of its own neighbours)" if skip_self else "source points"
        raise ValueError(f"{fn}: k={k} exceeds the number of {what}: n_src={len(src)}")
    if len(dst) == 0:
        return _graph([], len(src), 0, index_dtype)
    _, idx = cKDTree(src).query(dst, k=int(k) + skip_self)
    idx = np.asarray(idx).reshape(len(dst), int(k) + skip_self)
    if skip_self:  # drop the point itself, or the farthest where a tie at distance 0 left it out
        is_self = idx == np.arange(len(dst))[:, None]
        drop = np.where(is_self.any(axis=1), is_self.argmax(axis=1), int(k))
        idx = idx[np.arange(int(k) + 1)[None, :] != drop[:, None]].reshape(len(dst), int(k))
    return _graph(list(idx), len(src), len(dst), index_dtype)
