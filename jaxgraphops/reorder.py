"""Locality reordering: relabel a graph's nodes (and sort its edges) so that the rows a kernel gathers
together lie together in memory.

:func:`reorder` returns the relabelled graph and a :class:`Permutation` that moves node and edge arrays
between the two labellings. It runs on the host (NumPy, SciPy, pymetis), once per graph, outside ``jit``.

Methods:

- ``"rcm"``: reverse Cuthill-McKee (``scipy.sparse.csgraph``) on the symmetrised sparsity pattern. It
  minimises the bandwidth ``max |src - dst|``, so a destination's neighbours have nearby ids: on meshes
  and other graphs with geometry, the rows gathered for consecutive destinations overlap and stay in
  cache.
- ``"degree"``: by descending degree (in + out degree, ties in the old order). A source row is gathered
  once per out-edge by the forward kernels (which walk the edges grouped by destination) and a
  destination's gradient row once per in-edge by the backward kernels (grouped by source); putting the
  most gathered rows first packs the hot rows of a power-law graph into few cache lines and pages. The
  kernels split rows over threads by equal work (rows + edges), so the hubs' rows coming first does not
  unbalance them.
- ``"metis"``: pymetis partitions the symmetrised graph into ``n_parts`` parts (default one per 1,024
  nodes) with few cut edges; nodes are grouped by part, in their old order within a part. Needs pymetis
  (the ``test``, ``examples`` or ``distributed`` extra).

Edges are sorted by new destination, the in-edges of each destination kept in their input order: the
reordered graph's input edge order is its CSC order, so edge-valued arrays (weights, edge features,
attention) are read contiguously by the forward kernels instead of through a scattered edge-id gather,
and each destination sees its in-edges in the order it saw them before, so every op gives the same
result on the reordered graph, gradients included (a sum adds in the same order; a max/min tie goes to
the same edge; a node's gradient, a sum over its out-edges, agrees to rounding).
:meth:`Permutation.permute_edges` takes an edge array from the old input order to the new one,
:meth:`Permutation.unpermute_edges` back. A padded graph's padding edges (:class:`~jaxgraphops.Graph`)
stay padding edges, last and in their order; the relabelling sees the real edges only.

Bipartite graphs (``n_src != n_dst``) have their source and destination sides permuted separately: the
methods run on the graph of ``n_src + n_dst`` nodes in which each edge links its source node to its
destination node, and each side keeps the order of its nodes there. A square graph is one node set
(source ``i`` and destination ``i`` are the same node) and gets one permutation.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import jax
import numpy as np

from ._checks import check_choice
from .graph import Graph, check_graph, padded_arrays

__all__ = ["Permutation", "reorder"]

METHODS = ("rcm", "degree", "metis")
PART_SIZE = 1024  # nodes per METIS part by default: 1,024 rows of 128 float32 features are 512 KiB, an L2's size


@dataclass(frozen=True, eq=False)
class Permutation:
    """How :func:`reorder` relabelled a graph: for each new position, the old id it holds.

    - ``src [n_src]``: new source node ``i`` is old source node ``src[i]``.
    - ``dst [n_dst]``: new destination node ``i`` is old destination node ``dst[i]`` (the same array as
      ``src`` for a square graph: one node set).
    - ``edges [E]``: new edge ``k`` is old edge ``edges[k]`` (both in input edge order).

    So ``new.src[k] == perm.inverse.src[old.src[perm.edges[k]]]``. ``inverse`` maps the reordered
    graph back. The ``permute_*`` methods take an array in the old order ``[n, ...]`` (NumPy or JAX, also
    inside ``jit``) to the new order, the ``unpermute_*`` methods take it back.

    >>> import numpy as np, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(np.array([0, 2, 1]), np.array([2, 0, 2]))
    >>> new, perm = jgo.reorder(g, "degree")
    >>> perm.src.tolist(), perm.inverse.src.tolist()
    ([2, 0, 1], [1, 2, 0])
    >>> x = np.array([10.0, 11.0, 12.0])
    >>> perm.permute_nodes(x).tolist(), perm.unpermute_nodes(perm.permute_nodes(x)).tolist()
    ([12.0, 10.0, 11.0], [10.0, 11.0, 12.0])
    """

    src: np.ndarray
    dst: np.ndarray
    edges: np.ndarray

    @functools.cached_property
    def inverse(self) -> Permutation:
        """The permutation back: new id -> position in the old labelling, for each of the three."""
        src = _invert(self.src)
        return Permutation(src, src if self.dst is self.src else _invert(self.dst), _invert(self.edges))

    @property
    def square(self) -> bool:
        """True when sources and destinations are one node set (a single node permutation)."""
        return self.dst is self.src

    def _nodes(self, fn: str, side):
        check_choice(f"Permutation.{fn}", "side", side, (None, "src", "dst"))
        if side is None:
            if not self.square:
                raise ValueError(f"Permutation.{fn}: the graph is bipartite (n_src={len(self.src)}, "
                                 f"n_dst={len(self.dst)}); pass side='src' or side='dst'")
            side = "dst"
        return side, getattr(self, side)

    def permute_nodes(self, x, side: str | None = None):
        """``x [n, ...]`` of old nodes to the new order (``x[perm]``); ``side``: ``"src"`` or ``"dst"``
        for a bipartite graph (``None``, a square graph's one node set)."""
        side, order = self._nodes("permute_nodes", side)
        return _take("permute_nodes", x, order, f"n_{side}")

    def unpermute_nodes(self, x, side: str | None = None):
        """``x [n, ...]`` of new nodes (a result on the reordered graph) back to the old order."""
        side, _ = self._nodes("unpermute_nodes", side)
        return _take("unpermute_nodes", x, getattr(self.inverse, side), f"n_{side}")

    def permute_edges(self, w):
        """``w [E, ...]`` in the old input edge order to the reordered graph's edge order."""
        return _take("permute_edges", w, self.edges, "E")

    def unpermute_edges(self, w):
        """``w [E, ...]`` in the reordered graph's edge order (e.g. returned attention) back to the old one."""
        return _take("unpermute_edges", w, self.inverse.edges, "E")


def reorder(g: Graph, method: str = "rcm", *, n_parts: int | None = None) -> tuple[Graph, Permutation]:
    """Relabels the nodes of ``g`` for locality and sorts its edges by destination (stable).

    Args:
      g: a concrete :class:`~jaxgraphops.Graph` (not traced: call it outside ``jit``, once per graph).
      method: ``"rcm"`` (reverse Cuthill-McKee: low bandwidth, for meshes), ``"degree"`` (most gathered
        rows first, for power-law graphs) or ``"metis"`` (nodes grouped by METIS part; needs pymetis).
        The module docstring says why each helps.
      n_parts: METIS parts (``"metis"`` only); default ``ceil(nodes / 1024)``.

    Returns:
      ``(reordered graph, Permutation)``; the graph keeps ``g``'s sizes, index dtype and padding edges
      (last, as padding). An op on the reordered graph with permuted inputs gives the permuted result,
      and its gradients the permuted gradients: ``perm.unpermute_nodes(op(new, perm.permute_nodes(x)))``
      equals ``op(g, x)``: the forward pass bit for bit on the CPU (each destination adds its in-edges in
      the same order), a max/min tie's gradient on the same edge; a node's gradient sums its out-edges in
      the new edge order (equal to rounding). A bipartite graph's sources and destinations are relabelled
      apart, so what is defined by position rather than by the edges is not carried over: the self loops
      ``i -> i`` that the GAT layers' ``add_self_loops`` adds on a bipartite graph join other node pairs
      after a reorder (a square graph's sources and destinations share one permutation: its loops stay loops).

    >>> import numpy as np, jaxgraphops as jgo
    >>> ring = np.array([0, 3, 1, 4, 2])  # a 5-cycle 0-3-1-4-2-0 with scattered ids
    >>> g = jgo.Graph.from_edges(ring, np.roll(ring, 1))
    >>> new, perm = jgo.reorder(g, "rcm")
    >>> int(np.abs(np.asarray(g.src) - np.asarray(g.dst)).max()), int(np.abs(new.src - new.dst).max())
    (3, 2)
    >>> x = np.arange(5.0)[:, None]
    >>> out = perm.unpermute_nodes(jgo.gspmm(new, perm.permute_nodes(x), op="copy_u", reduce="sum"))
    >>> np.allclose(out, jgo.gspmm(g, x, op="copy_u", reduce="sum"))
    True
    """
    fn = "reorder"
    if not isinstance(g, Graph):
        raise TypeError(f"{fn}: g must be a jaxgraphops.Graph; got {type(g).__name__}")
    check_choice(fn, "method", method, METHODS)
    if any(isinstance(x, jax.core.Tracer) for x in g.tree_flatten()[0]):
        raise TypeError(f"{fn}: needs a concrete graph (it relabels the nodes on the host, once per graph); "
                        f"got a traced one: call it outside jax.jit and pass the reordered graph in")
    if n_parts is not None and method != "metis":
        raise ValueError(f"{fn}: n_parts is a METIS option; got n_parts={n_parts!r} with method={method!r}")
    check_graph(fn, g)
    real = g._n_real_edges()  # the edges after it are padding: in no row, kept last
    src, dst = np.asarray(g.src, np.int64), np.asarray(g.dst, np.int64)
    square = g.n_src == g.n_dst
    # one node set for a square graph; sources then destinations (offset by n_src) for a bipartite one
    n = g.n_src if square else g.n_src + g.n_dst
    a, b = (src[:real], dst[:real]) if square else (src[:real], dst[:real] + g.n_src)
    if method == "rcm":
        order = _rcm(a, b, n) if n else np.zeros(0, np.int64)  # scipy's RCM fails on an empty pattern
    elif method == "degree":
        order = np.argsort(-np.bincount(np.concatenate([a, b]), minlength=n), kind="stable")
    else:
        order = _metis(fn, a, b, n, n_parts)
    if square:
        new_src = new_dst = order
    else:
        new_src, new_dst = order[order < g.n_src], order[order >= g.n_src] - g.n_src
    inv_src = _invert(new_src)
    inv_dst = inv_src if square else _invert(new_dst)
    s, d = inv_src[src], inv_dst[dst]
    # by new destination; a destination's in-edges stay in their input order (the same sums, the same max ties)
    edges = np.concatenate([np.argsort(d[:real], kind="stable"), np.arange(real, g.n_edges)])
    new = Graph.from_edges(s[edges[:real]], d[edges[:real]], g.n_src, g.n_dst, index_dtype=g.index_dtype)
    if real < g.n_edges:
        new = Graph(*padded_arrays(new, g.n_src, g.n_dst, g.n_edges - real, s[real:], d[real:]), g.n_src, g.n_dst,
                    validate=False)
        new._checked = True
    return new, Permutation(new_src, new_dst, edges)


def _rcm(a, b, n):
    import scipy.sparse
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    pattern = scipy.sparse.csr_matrix((np.ones(2 * len(a), np.int8), (np.concatenate([a, b]), np.concatenate([b, a]))),
                                      shape=(n, n))
    return np.asarray(reverse_cuthill_mckee(pattern, symmetric_mode=True), np.int64)


def _metis(fn, a, b, n, n_parts):
    if n_parts is None:
        n_parts = max(1, math.ceil(n / PART_SIZE))
    elif isinstance(n_parts, bool) or not isinstance(n_parts, (int, np.integer)) or n_parts < 1:
        raise ValueError(f"{fn}: n_parts must be a positive int; got {n_parts!r}")
    if n_parts == 1 or n == 0:
        return np.arange(n, dtype=np.int64)
    try:
        import pymetis
    except ImportError as err:
        raise ImportError(f"{fn}: method='metis' needs pymetis, in jaxgraphops' 'distributed', 'test' and "
                          f"'examples' extras (pip install 'jaxgraphops[distributed]'); 'rcm' and 'degree' need "
                          f"nothing") from err
    keep = a != b  # METIS takes a simple undirected graph
    pairs = np.unique(np.stack([np.concatenate([a[keep], b[keep]]), np.concatenate([b[keep], a[keep]])], 1), axis=0)
    xadj = np.concatenate([[0], np.cumsum(np.bincount(pairs[:, 0], minlength=n))])
    _, part = pymetis.part_graph(int(n_parts), adjacency=pymetis.CSRAdjacency(xadj, pairs[:, 1]))
    return np.argsort(np.asarray(part, np.int64), kind="stable")


def _invert(order):
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order), dtype=order.dtype)
    return inverse


def _take(fn, x, index, rows_name):
    """``x[index]`` along the first axis, for NumPy and JAX arrays; ``x`` must have ``len(index)`` rows."""
    shape = np.shape(x)
    if len(shape) == 0 or shape[0] != len(index):
        raise ValueError(f"Permutation.{fn}: the array must have {rows_name}={len(index)} rows [{rows_name}, ...]; "
                         f"got shape {tuple(shape)}")
    return x[index] if isinstance(x, (np.ndarray, jax.Array)) else np.asarray(x)[index]
