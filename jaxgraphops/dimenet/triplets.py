"""The triplets of a DimeNet interaction: pairs of directed edges ``(e_in = k->j, e_out = j->i)``, ``k != i``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Triplets", "triplets"]


@jax.tree_util.register_pytree_node_class
class Triplets:
    """The triplets of a graph in the two groupings the fused kernels walk.

    Array leaves (one integer dtype, that of the graph):

    - ``out_offsets [E+1]``, ``out_in [T]``: triplets grouped by ``e_out`` (the output edge of
      ``agg_edge_to_edge``); those of edge ``b`` are positions ``out_offsets[b]:out_offsets[b+1]``
      and ``out_in[p]`` is the ``e_in`` of position ``p``. Within a group, ``e_in`` ascends.
    - ``in_offsets [E+1]``, ``in_out [T]``, ``in_pos [T]``: the same triplets grouped by
      ``e_in`` (for the atomic-free backward); ``in_out[q]`` is the ``e_out`` of position ``q``
      and ``in_pos[q]`` its position in the ``e_out`` grouping.

    ``n_edges`` and ``n_triplets`` are static.
    """

    __slots__ = ("out_offsets", "out_in", "in_offsets", "in_out", "in_pos", "n_edges", "n_triplets")

    def __init__(self, out_offsets, out_in, in_offsets, in_out, in_pos, n_edges: int, n_triplets: int):
        self.out_offsets, self.out_in = out_offsets, out_in
        self.in_offsets, self.in_out, self.in_pos = in_offsets, in_out, in_pos
        self.n_edges, self.n_triplets = n_edges, n_triplets

    def tree_flatten(self):
        return (self.out_offsets, self.out_in, self.in_offsets, self.in_out, self.in_pos), (self.n_edges,
                                                                                              self.n_triplets)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, *aux)

    def arrays(self) -> tuple:
        return (self.out_offsets, self.out_in, self.in_offsets, self.in_out, self.in_pos)

    def pairs(self):
        """``(e_in [T], e_out [T])`` in the ``e_out`` grouping (traceable)."""
        counts = jnp.diff(self.out_offsets)
        e_out = jnp.repeat(jnp.arange(self.n_edges, dtype=self.out_in.dtype), counts,
                           total_repeat_length=self.n_triplets)
        return self.out_in, e_out

    def __repr__(self) -> str:
        return f"Triplets(n_edges={self.n_edges}, n_triplets={self.n_triplets}, index_dtype={self.out_in.dtype})"


def triplets(g) -> Triplets:
    """All triplets ``(e_in = k->j, e_out = j->i)`` with ``k != i`` of a Graph (built on the host).

    The graph must be square (``n_src == n_dst``) and concrete (not traced): like
    ``Graph.from_edges``, this runs outside ``jit``. The padding edges of a padded graph
    (:class:`~jaxgraphops.Graph`) are in no triplet: ``agg_edge_to_edge`` gives them 0.

    >>> import jaxgraphops as jgo, numpy as np
    >>> g = jgo.Graph.from_edges(np.array([0, 1, 1, 2]), np.array([1, 0, 2, 1]))
    >>> t = jgo.dimenet.triplets(g)            # 0->1->2 and 2->1->0
    >>> [tuple(map(int, p)) for p in zip(*t.pairs())]
    [(3, 1), (0, 2)]
    """
    if g.n_src != g.n_dst:
        raise ValueError(f"triplets: the graph must be square, got n_src={g.n_src}, n_dst={g.n_dst}")
    try:
        src, dst = np.asarray(g.src).astype(np.int64), np.asarray(g.dst).astype(np.int64)
        csc_offsets, csc_eid = np.asarray(g.csc_offsets).astype(np.int64), np.asarray(g.csc_eid).astype(np.int64)
    except jax.errors.TracerArrayConversionError:
        raise TypeError("triplets: the graph must be concrete; build triplets outside jit") from None
    n_edges = src.shape[0]
    # For every real e_out = (j -> i): the edges into j, from the CSC grouping (real edges only: a padding edge,
    # in no row, is in no triplet, whatever its endpoints)
    real = np.arange(n_edges) < csc_offsets[-1]
    starts, counts = csc_offsets[src], np.where(real, csc_offsets[src + 1] - csc_offsets[src], 0)
    e_out = np.repeat(np.arange(n_edges), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    e_in = csc_eid[np.repeat(starts, counts) + np.arange(e_out.shape[0]) - first]
    keep = src[e_in] != dst[e_out]
    e_in, e_out = e_in[keep], e_out[keep]
    order = np.lexsort((e_in, e_out))  # e_out major, e_in ascending
    e_in, e_out = e_in[order], e_out[order]
    n_triplets = e_in.shape[0]
    out_offsets = np.zeros(n_edges + 1, np.int64)
    np.cumsum(np.bincount(e_out, minlength=n_edges), out=out_offsets[1:])
    in_pos = np.argsort(e_in, kind="stable")
    in_offsets = np.zeros(n_edges + 1, np.int64)
    np.cumsum(np.bincount(e_in, minlength=n_edges), out=in_offsets[1:])
    dtype = g.src.dtype
    arrays = [jnp.asarray(a.astype(dtype)) for a in (out_offsets, e_in, in_offsets, e_out[in_pos], in_pos)]
    return Triplets(*arrays, n_edges=n_edges, n_triplets=n_triplets)
