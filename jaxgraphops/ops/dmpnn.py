"""Chemprop's directed bond message: ``agg_dmpnn``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import reference
from .._checks import as_float_array, check_choice
from ..graph import Graph, check_graph
from ._dmpnn_primitives import dmpnn
from ._primitive_utils import compute_dtype, graph_arrays
from ._public_op import public_op
from .message_passing import IMPLS


def check_rev_edge_ids(fn: str, rev, n_edges: int, n_real: int | None = None) -> None:
    """A concrete ``rev_edge_ids`` must lie in ``[-1, n_edges)`` and be an involution on its defined entries; with
    ``n_real`` (the graph's real edges, the others padding), a real edge's entry must not name a padding edge, and
    the padding edges' entries are not read."""
    rev = np.asarray(rev).astype(np.int64)
    bad = np.flatnonzero((rev < -1) | (rev >= n_edges))
    if bad.size:
        k = bad[0]
        raise ValueError(f"{fn}: rev_edge_ids[{k}] = {rev[k]} is out of range [-1, {n_edges}) (the input-order id "
                         f"of edge {k}'s reverse, or -1 for none)")
    if n_real is not None:
        rev = rev[:n_real]
        bad = np.flatnonzero(rev >= n_real)
        if bad.size:
            k = bad[0]
            raise ValueError(f"{fn}: rev_edge_ids[{k}] = {rev[k]} names a padding edge: the graph's edges from "
                             f"{n_real} on are padding (in no neighbourhood), so a real edge's reverse is a real "
                             f"edge or -1 (none)")
    defined = np.flatnonzero(rev >= 0)
    bad = defined[rev[rev[defined]] != defined]
    if bad.size:
        k = bad[0]
        raise ValueError(f"{fn}: rev_edge_ids must be an involution (rev[rev[e]] == e wherever rev[e] != -1): "
                         f"rev_edge_ids[{k}] = {rev[k]} but rev_edge_ids[{rev[k]}] = {rev[rev[k]]}")


def _check_concrete_rev(g, rev):
    """agg_dmpnn's check of a concrete ``rev_edge_ids`` of the right type and shape (traced: the kernels')."""
    if not isinstance(rev, jax.core.Tracer):
        concrete_graph = not isinstance(g.csc_offsets, jax.core.Tracer)
        check_rev_edge_ids("agg_dmpnn", rev, g.n_edges, int(np.asarray(g.csc_offsets)[-1]) if concrete_graph else None)


def _rev_checked(g=None, h=None, rev_edge_ids=None, *_, **__):
    """agg_dmpnn's checks of concrete values, before its traced body (which checks types and shapes)."""
    rev = np.asarray(rev_edge_ids)  # a missing argument: the traced body's TypeError names the op
    if isinstance(g, Graph) and rev.shape == (g.n_edges,) and np.issubdtype(rev.dtype, np.integer):
        _check_concrete_rev(g, rev)


@public_op(checks=_rev_checked)
def agg_dmpnn(g: Graph, h, rev_edge_ids, *, concat_own: bool = False, impl: str | None = None):
    """Chemprop's directed bond message (D-MPNN, ``BondMessagePassing``), ``[n_edges, D]`` or ``[n_edges, 2D]``.

    The graph's edges are directed bonds ``e = (v -> w)`` between atoms (``n_src == n_dst``). For
    each edge::

        m[e] = sum_{e' into v} h[e'] - h[rev(e)]

    the sum of the states of the bonds into ``e``'s source atom, minus that of ``e``'s reverse
    bond ``w -> v`` (nothing when ``rev_edge_ids[e] == -1``). With ``concat_own`` the result is
    ``[m[e] | h[e]]``. The fused kernels do it in one pass per node (the node's sum kept while its
    out-edges are written) and the backward likewise over the reverse graph, without atomics.

    Args:
      g: the bond graph; ``n_src == n_dst`` (the atoms).
      h: bond states ``[n_edges, D]`` in input edge order.
      rev_edge_ids: int ``[n_edges]``, the input-order id of each edge's reverse, or -1 for none.
        It must be an involution on its defined entries (``rev[rev[e]] == e`` wherever
        ``rev[e] != -1``), as Chemprop's reverse-bond index always is: the fused backward relies
        on it. ``rev[e] == e`` is allowed (a self loop ``v -> v`` is its own reverse; the
        subtracted row is then ``h[e]`` itself, which is one of the summed in-edges of ``v``).
      concat_own: append each edge's own state, ``[m | h]``.
      impl: None or ``"ffi"`` for the fused kernels, ``"xla"`` for the pure-JAX reference.

    Returns:
      ``[n_edges, D]`` (``[n_edges, 2D]`` with ``concat_own``) in ``h``'s dtype (half precision is
      computed in float32). Differentiable in ``h`` to every order; ``rev_edge_ids`` and the graph
      are not differentiable.

    On a padded graph (:class:`~jaxgraphops.Graph`) the padding edges' entries are not read, and a real
    edge's entry must not name a padding edge (the padding edges are in no neighbourhood; a padding row is
    not a reverse bond).

    Errors: a concrete ``rev_edge_ids`` out of range ``[-1, n_edges)``, not an involution, or naming a
    padding edge from a real edge is a ValueError. Under ``jit`` the CPU kernels check it when they run (a
    ``JaxRuntimeError`` naming rev_edge_ids); the CUDA kernels cannot raise: they write NaN into the rows
    of the edges whose entry is out of range, breaks the involution or names a padding edge (forward and
    gradient), never touching memory out of bounds. ``impl="xla"``, and the pure-JAX lowering where no
    kernel runs (``JGO_KERNELS=xla``, a GPU without the CUDA build), compute the definition and its true
    gradient for any in-range ``rev``, involution or not (a padding edge's row is 0 there); a traced entry
    out of range is clamped there, as every JAX gather does.

    NaN and Inf propagate as in the reference: each node's sum is formed first and the reverse row
    subtracted from it after, so an infinite ``h[e']`` that is also the subtracted reverse gives
    ``inf - inf = NaN`` (Chemprop's ``M_all[src] - H[rev]`` does the same), and a NaN anywhere in
    the sum reaches every out-edge of the node.

    >>> import jax.numpy as jnp, jaxgraphops as jgo
    >>> g = jgo.Graph.from_edges(jnp.array([0, 1, 1, 2]), jnp.array([1, 0, 2, 1]))  # bonds 0-1, 1-2
    >>> h = jnp.array([[1.0], [2.0], [4.0], [8.0]])
    >>> jgo.agg_dmpnn(g, h, jnp.array([1, 0, 3, 2]))  # e.g. edge 2 = 1 -> 2: h[0] + h[3] - h[3]
    Array([[0.],
           [8.],
           [1.],
           [0.]], dtype=float32)
    """
    fn = "agg_dmpnn"
    check_graph(fn, g)
    check_choice(fn, "impl", impl, IMPLS)
    if g.n_src != g.n_dst:
        raise ValueError(f"{fn}: g must be a square graph of directed bonds between one set of atoms "
                         f"(n_src == n_dst); got n_src={g.n_src}, n_dst={g.n_dst}")
    h = as_float_array(fn, "h", h, g.n_edges, "n_edges")
    if h.ndim != 2:
        raise ValueError(f"{fn}: h must be [n_edges, D]; got shape {h.shape}")
    rev = rev_edge_ids if isinstance(rev_edge_ids, jax.Array) else np.asarray(rev_edge_ids)
    if not jnp.issubdtype(rev.dtype, jnp.integer):
        raise TypeError(f"{fn}: rev_edge_ids must be an integer array; got dtype {rev.dtype}")
    if rev.shape != (g.n_edges,):
        raise ValueError(f"{fn}: rev_edge_ids must have shape [n_edges] = ({g.n_edges},); got {rev.shape}")
    _check_concrete_rev(g, rev)
    if impl == "xla":
        return reference.agg_dmpnn(g, h, rev, concat_own=concat_own)
    idx = g.index_dtype
    # the padding edges' entries are not read: -1, so that a real edge naming a padding edge breaks the
    # involution (the CUDA kernels' NaN rows; the CPU kernels name it)
    rev = jnp.where(g.real_edge_mask(), jnp.asarray(rev), -1)
    if rev.dtype != idx:
        if jnp.iinfo(rev.dtype).bits > jnp.iinfo(idx).bits:  # keep an out-of-range entry out of range
            rev = jnp.clip(rev, -2, g.n_edges)
        rev = rev.astype(idx)
    dtype, work = compute_dtype(h)
    return dmpnn(graph_arrays(g), h.astype(work), rev, concat_own=concat_own).astype(dtype)
