"""Graph transformations used by the layers."""

from __future__ import annotations

import jax.numpy as jnp

from ..graph import Graph, check_graph


def _append_one_per_group(offsets, values, eids, extra_values, extra_eids):
    """Groups ``(offsets, values, eids)`` with one more entry appended at the end of every group; the
    entries after the groups (padding edges) stay after them."""
    n_groups, n_entries = offsets.shape[0] - 1, values.shape[0]
    group_of_entry = jnp.repeat(jnp.arange(n_groups, dtype=offsets.dtype), jnp.diff(offsets),
                                total_repeat_length=n_entries)
    k = jnp.arange(n_entries, dtype=offsets.dtype)
    old_pos = k + jnp.where(k < offsets[-1], group_of_entry, n_groups)
    new_pos = offsets[1:] + jnp.arange(n_groups, dtype=offsets.dtype)
    new_offsets = offsets + jnp.arange(n_groups + 1, dtype=offsets.dtype)

    def scatter(old, extra):
        return jnp.zeros(n_entries + n_groups, old.dtype).at[old_pos].set(old).at[new_pos].set(extra)

    return new_offsets, scatter(values, extra_values), scatter(eids, extra_eids)


def add_self_loops(g: Graph) -> Graph:
    """``g`` with one edge ``i -> i`` appended for every node (the graph of ``A + I``).

    The loops get edge ids ``n_edges .. n_edges + n - 1`` (node order), after the existing edges,
    which keep theirs; a node that already has a loop gets a second one. The groupings are built
    without sorting, so this is cheap and works inside ``jit``. A graph with padding edges (its
    ``R = csc_offsets[-1]`` real edges first, :class:`~jaxgraphops.Graph`) keeps them last: the loops
    get the ids ``R .. R + n - 1`` and the padding edges ``R + n ..``.

    Args:
      g: a square graph (``n_src == n_dst``).

    Returns:
      A graph with ``g.n_edges + g.n_src`` edges.

    >>> import numpy as np, jaxgraphops as jgo
    >>> from jaxgraphops.nn import add_self_loops
    >>> g = add_self_loops(jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 2])))
    >>> g.src.tolist(), g.dst.tolist(), g.in_degrees().tolist()
    ([0, 1, 0, 1, 2], [1, 2, 0, 1, 2], [1, 2, 2])
    """
    check_graph("add_self_loops", g)
    if g.n_src != g.n_dst:
        raise ValueError(f"add_self_loops: g must be square; got a bipartite graph with "
                         f"n_src={g.n_src}, n_dst={g.n_dst}")
    n, idx = g.n_src, g.index_dtype
    nodes = jnp.arange(n, dtype=idx)
    real = g.csc_offsets[-1]  # R: the padding edges, ids R.., move after the loops
    loop_eids = real + nodes

    def moved(eid):
        return jnp.where(eid < real, eid, eid + n)

    csc = _append_one_per_group(g.csc_offsets, g.csc_src, moved(g.csc_eid), nodes, loop_eids)
    csr = _append_one_per_group(g.csr_offsets, g.csr_dst, moved(g.csr_eid), nodes, loop_eids)
    src, dst = (with_loop_rows(g, ends, nodes) for ends in (g.src, g.dst))
    out = Graph(src, dst, *csc, *csr, g.n_src, g.n_dst, validate=False)
    out._checked = g._checked  # valid if g is
    return out


def with_loop_rows(g: Graph, rows, loop_rows):
    """Edge rows of :func:`add_self_loops`'s graph: ``rows [E, ...]`` of ``g``'s edges and ``loop_rows
    [n, ...]`` of the loops, in its edge order (the loops after the real edges, before the padding edges)."""
    n, e = loop_rows.shape[0], g.n_edges
    if e == 0 or n == 0:
        return jnp.concatenate([rows, loop_rows])
    real = g.csc_offsets[-1]
    k = jnp.arange(e + n, dtype=g.index_dtype)
    old = jnp.clip(jnp.where(k < real, k, k - n), 0, e - 1)
    is_loop = ((k >= real) & (k < real + n)).reshape((-1,) + (1,) * (rows.ndim - 1))
    return jnp.where(is_loop, loop_rows[jnp.clip(k - real, 0, n - 1)], rows[old])
