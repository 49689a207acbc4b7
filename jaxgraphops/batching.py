"""Batches of graphs for ``jit``: the disjoint union, padding to fixed sizes, jraph's ``GraphsTuple``.

Many small graphs (molecules, meshes, the graphs of a dataset) train as one graph, their disjoint
union (:func:`batch`), which records each node's graph so that a readout (:meth:`BatchedGraph.pool`)
gives one row per graph. ``jit`` compiles once per set of shapes, so a stream of batches is padded
to fixed sizes (:func:`pad_batch`) by jraph's ``pad_with_graphs`` convention: one padding graph after
the real ones owns every padding node and edge (padding edges join padding nodes only, so no message
reaches a real node and no real graph's readout sees padding), and empty graphs fill up ``n_graphs``.
A :class:`BatchedGraph` is a pytree whose sizes and ``n_graphs`` are static (aux data) and whose
``graph_mask`` is an array, so batches of different real sizes padded to the same sizes share one
compilation; the node and edge masks follow from the graph mask.

Features travel beside the graph, not inside it. The ops take feature arrays and a graph (as DGL's
and cugraph-ops' do), and models keep their inputs in pytrees of their own (species and positions,
several edge inputs, per-graph targets), so a container with fixed node/edge/global slots would add
nothing that jraph's ``GraphsTuple`` does not already give, the container JAX GNN code exchanges.
This module interoperates with it instead, in both directions and inside ``jit``
(:meth:`BatchedGraph.from_jraph`, padded tuples included; :meth:`BatchedGraph.to_jraph`, features
attached), and pads feature pytrees to a padded batch (:meth:`BatchedGraph.pad_nodes`,
:meth:`~BatchedGraph.pad_edges`, :meth:`~BatchedGraph.pad_graphs`).

>>> import numpy as np, jax, jax.numpy as jnp, jaxgraphops as jgo
>>> pair = jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 0]))
>>> triangle = jgo.Graph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]))
>>> padded = jgo.pad_batch(jgo.batch([pair, triangle]), n_nodes=8, n_edges=8, n_graphs=4)
>>> padded
BatchedGraph(n_graphs=4, graph=Graph(n_src=8, n_dst=8, n_edges=8, index_dtype=int32))
>>> padded.dst_graph_ids.tolist(), padded.graph_mask.tolist()
([0, 0, 1, 1, 1, 2, 2, 2], [True, True, False, False])
>>> x = padded.pad_nodes(jnp.arange(5.0)[:, None])  # the 5 real nodes' features, zero rows after
>>> jax.jit(lambda bg, x: bg.pool(x, reduce="mean"))(padded, x)[:, 0]
Array([0.5, 3. , 0. , 0. ], dtype=float32)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._checks import check_choice
from .graph import Graph, jraph_node_count, padded_arrays, static_count
from .ops.aggregation import pool

__all__ = ["BatchedGraph", "batch", "pad_batch"]


@jax.tree_util.register_pytree_node_class
class BatchedGraph:
    """The disjoint union of ``n_graphs`` graphs, padded or not (:func:`batch`, :func:`pad_batch`).

    Attributes:
      graph: the union, a :class:`~jaxgraphops.Graph` with the graphs' nodes one after another.
      src_graph_ids: ``[graph.n_src]`` (int32), each source node's graph; never decreasing (each
        graph's nodes are contiguous).
      dst_graph_ids: ``[graph.n_dst]`` (int32), each destination node's graph; never decreasing.
      n_graphs: a static int (pytree aux data, so ``pool`` gets a Python int inside ``jit``).
      graph_mask: ``[n_graphs]`` (bool), True for real graphs, False for padding graphs; all True
        unless padded. :attr:`node_mask`, :attr:`src_node_mask` and :attr:`edge_mask` follow from it.

    The constructor checks shapes and dtypes, and concrete graph ids (in range, never decreasing).
    """

    __slots__ = ("dst_graph_ids", "graph", "graph_mask", "n_graphs", "src_graph_ids")

    def __init__(self, graph: Graph, src_graph_ids, dst_graph_ids, n_graphs: int, graph_mask=None, *,
                 validate: bool = True):
        fn = "BatchedGraph"
        self.n_graphs = static_count(fn, "n_graphs", n_graphs)
        self.graph, self.src_graph_ids, self.dst_graph_ids = graph, src_graph_ids, dst_graph_ids
        self.graph_mask = jax.device_put(np.ones(self.n_graphs, bool)) if graph_mask is None else graph_mask
        if validate:
            self._check(fn)

    def _check(self, fn: str) -> None:
        if not isinstance(self.graph, Graph):
            raise TypeError(f"{fn}: graph must be a Graph, got {type(self.graph).__name__}")
        for name, n in (("src_graph_ids", self.graph.n_src), ("dst_graph_ids", self.graph.n_dst)):
            ids = getattr(self, name)
            if jnp.shape(ids) != (n,) or not jnp.issubdtype(jnp.result_type(ids), jnp.integer):
                raise ValueError(f"{fn}: {name} must be an integer array of shape ({n},); "
                                 f"got {jnp.result_type(ids)}{jnp.shape(ids)}")
            if not isinstance(ids, jax.core.Tracer):
                ids = np.asarray(ids)
                bad = np.flatnonzero((ids < 0) | (ids >= self.n_graphs))
                if bad.size:
                    raise ValueError(f"{fn}: {name}[{bad[0]}] = {ids[bad[0]]} is out of range [0, {self.n_graphs})")
                down = np.flatnonzero(np.diff(ids) < 0)
                if down.size:
                    raise ValueError(f"{fn}: {name} must never decrease (each graph's nodes contiguous); "
                                     f"{name}[{down[0] + 1}] = {ids[down[0] + 1]} follows {ids[down[0]]}")
        mask = self.graph_mask
        if jnp.shape(mask) != (self.n_graphs,) or jnp.result_type(mask) != jnp.bool_:
            raise ValueError(f"{fn}: graph_mask must be a bool array of shape ({self.n_graphs},); "
                             f"got {jnp.result_type(mask)}{jnp.shape(mask)}")

    # -- pytree ---------------------------------------------------------------------------

    def tree_flatten(self):
        return (self.graph, self.src_graph_ids, self.dst_graph_ids, self.graph_mask), (self.n_graphs,)

    @classmethod
    def tree_unflatten(cls, aux, children):
        graph, src_ids, dst_ids, mask = children
        return cls(graph, src_ids, dst_ids, *aux, mask, validate=False)  # leaves may be anything

    def __repr__(self) -> str:
        return f"BatchedGraph(n_graphs={self.n_graphs}, graph={self.graph!r})"

    # -- masks ----------------------------------------------------------------------------

    def _gather_mask(self, ids):
        xp = _array_module(self.graph_mask, ids)
        return _to_jax(xp.asarray(self.graph_mask)[xp.asarray(ids)])

    @property
    def node_mask(self) -> jax.Array:
        """``[graph.n_dst]`` bool: True for the (destination) nodes of real graphs."""
        return self._gather_mask(self.dst_graph_ids)

    @property
    def src_node_mask(self) -> jax.Array:
        """``[graph.n_src]`` bool: True for the source nodes of real graphs (:attr:`node_mask` if square)."""
        return self._gather_mask(self.src_graph_ids)

    @property
    def edge_mask(self) -> jax.Array:
        """``[graph.n_edges]`` bool, in input edge order: True for the edges of real graphs."""
        xp = _array_module(self.dst_graph_ids, self.graph.dst)
        return self._gather_mask(xp.asarray(self.dst_graph_ids)[xp.asarray(self.graph.dst)])

    # -- readout and padding --------------------------------------------------------------

    def pool(self, x, *, reduce: str = "sum", impl: str | None = None) -> jax.Array:
        """Per-graph readout of node features ``x [graph.n_dst, ...]`` -> ``[n_graphs, ...]``.

        :func:`jaxgraphops.pool` over :attr:`dst_graph_ids` (sorted, so no sort runs). A real
        graph's row reads its own nodes only; padding graphs' rows hold whatever the padding
        nodes hold (0 for the empty ones): mask them with :attr:`graph_mask`.
        """
        x = jnp.asarray(x)
        if x.ndim == 0 or x.shape[0] != self.graph.n_dst:
            raise ValueError(f"BatchedGraph.pool: x must have one row per node, [{self.graph.n_dst}, ...]; "
                             f"got shape {x.shape}")
        return pool(x, self.dst_graph_ids, self.n_graphs, reduce=reduce, ids_are_sorted=True, impl=impl)

    def pad(self, n_nodes: int | tuple[int, int], n_edges: int, n_graphs: int) -> BatchedGraph:
        """This batch padded to fixed sizes; see :func:`pad_batch`."""
        return pad_batch(self, n_nodes, n_edges, n_graphs)

    def pad_nodes(self, x, *, side: str = "dst"):
        """``x`` (a pytree of arrays ``[n_real, ...]``) with zero rows appended up to the node count.

        ``x`` holds the features of the real nodes; the result has ``graph.n_dst`` rows
        (``graph.n_src`` with ``side="src"``, for bipartite batches). Concrete masks check that
        ``n_real`` is the number of real nodes.
        """
        check_choice("BatchedGraph.pad_nodes", "side", side, ("src", "dst"))
        mask = self.node_mask if side == "dst" else self.src_node_mask
        return _pad_rows("BatchedGraph.pad_nodes", "nodes", x, mask)

    def pad_edges(self, x):
        """``x`` (a pytree of arrays ``[n_real_edges, ...]``) with zero rows up to ``graph.n_edges``."""
        return _pad_rows("BatchedGraph.pad_edges", "edges", x, self.edge_mask)

    def pad_graphs(self, x):
        """``x`` (a pytree of per-graph arrays ``[n_real_graphs, ...]``) with zero rows up to ``n_graphs``."""
        return _pad_rows("BatchedGraph.pad_graphs", "graphs", x, self.graph_mask)

    # -- jraph ----------------------------------------------------------------------------

    @classmethod
    def from_jraph(cls, graphs, *, padded: bool = False, n_nodes: int | None = None,
                   index_dtype=None) -> BatchedGraph:
        """The batch of a jraph ``GraphsTuple``: its graph, graph ids and (``padded=True``) masks.

        Works inside ``jit``: ``n_graphs`` is ``graphs.n_node``'s length, the node count as in
        :meth:`Graph.from_jraph <jaxgraphops.Graph.from_jraph>` (``n_nodes``, or the concrete
        ``sum(graphs.n_node)``, or the leading size of ``graphs.nodes``). With ``padded=True`` the
        tuple is one from ``jraph.pad_with_graphs``, the graph mask is jraph's
        (``jraph.get_graph_padding_mask``: the last graph and the empty graphs after it are padding),
        and the padding graph's edges are the graph's padding edges (:class:`~jaxgraphops.Graph`), which
        every op skips, as after :func:`pad_batch`.

        >>> import jax, jax.numpy as jnp, jraph
        >>> gt = jraph.GraphsTuple(nodes=jnp.ones((3, 1)), edges=None, globals=None,
        ...                        senders=jnp.array([0, 1]), receivers=jnp.array([1, 0]),
        ...                        n_node=jnp.array([2, 1]), n_edge=jnp.array([2, 0]))
        >>> padded = jraph.pad_with_graphs(gt, n_node=5, n_edge=4, n_graph=4)
        >>> bg = jax.jit(lambda t: BatchedGraph.from_jraph(t, padded=True))(padded)
        >>> bg.dst_graph_ids.tolist(), bg.graph_mask.tolist(), bg.edge_mask.tolist()
        ([0, 0, 1, 2, 2], [True, True, False, False], [True, True, False, False])
        """
        fn = "BatchedGraph.from_jraph"
        n = jraph_node_count(fn, graphs, n_nodes)
        g = Graph.from_edges(graphs.senders, graphs.receivers, n, n, index_dtype=index_dtype)
        n_node = jnp.asarray(graphs.n_node)
        if n_node.ndim != 1 or not jnp.issubdtype(n_node.dtype, jnp.integer):
            raise ValueError(f"{fn}: graphs.n_node must be a 1-D integer array; got {n_node.dtype}{n_node.shape}")
        n_graphs = n_node.shape[0]
        ids = jnp.repeat(jnp.arange(n_graphs, dtype=jnp.int32), n_node, total_repeat_length=n)
        if not padded:
            return cls(g, ids, ids, n_graphs, validate=False)
        if n_graphs == 0:
            raise ValueError(f"{fn}: padded=True needs a padding graph, but graphs.n_node is empty")
        trailing_empty = jnp.argmin(n_node[::-1] == 0)  # jraph: the empty graphs after the padding graph
        mask = jnp.arange(n_graphs) < n_graphs - 1 - trailing_empty
        # the padding graph's edges (last, between padding nodes: last in both groupings) as padding edges
        real_edges = jnp.sum(jnp.where(mask, jnp.asarray(graphs.n_edge), 0)).astype(g.index_dtype)
        g = Graph(g.src, g.dst, jnp.minimum(g.csc_offsets, real_edges), g.csc_src, g.csc_eid,
                  jnp.minimum(g.csr_offsets, real_edges), g.csr_dst, g.csr_eid, n, n, validate=False)
        return cls(g, ids, ids, n_graphs, mask, validate=False)

    def to_jraph(self, *, nodes=None, edges=None, globals=None):  # globals: jraph's field name
        """A jraph ``GraphsTuple`` of this batch (a square graph), padding included.

        ``n_node`` and ``n_edge`` count each graph's nodes and edges (the padding graph's too), so
        ``jraph.get_*_padding_mask`` of the result agree with :attr:`node_mask`, :attr:`edge_mask`
        and :attr:`graph_mask` after :func:`pad_batch`. ``nodes [graph.n_dst, ...]``,
        ``edges [graph.n_edges, ...]`` and ``globals [n_graphs, ...]`` (pytrees) are attached as
        given. Works inside ``jit``.

        >>> import numpy as np, jaxgraphops as jgo
        >>> bg = jgo.batch([jgo.Graph.from_edges(np.array([0]), np.array([1]))]).pad(3, 2, 2)
        >>> gt = bg.to_jraph()
        >>> gt.n_node.tolist(), gt.n_edge.tolist(), gt.senders.tolist(), gt.receivers.tolist()
        ([2, 1], [1, 1], [0, 2], [1, 2])
        """
        fn = "BatchedGraph.to_jraph"
        try:
            import jraph
        except ImportError:
            raise ImportError(f"{fn} needs jraph (pip install jraph)") from None
        g = self.graph
        if g.n_src != g.n_dst:
            raise ValueError(f"{fn}: jraph graphs are square; this batch is bipartite "
                             f"(n_src={g.n_src}, n_dst={g.n_dst})")
        ids = (self.src_graph_ids, self.dst_graph_ids)
        if _array_module(ids) is np and not np.array_equal(*map(np.asarray, ids)):
            raise ValueError(f"{fn}: jraph graphs are square; this batch's graphs are bipartite "
                             f"(src_graph_ids differ from dst_graph_ids)")
        attached = (("nodes", nodes, g.n_dst), ("edges", edges, g.n_edges), ("globals", globals, self.n_graphs))
        for name, tree, n in attached:
            for leaf in jax.tree_util.tree_leaves(tree):
                if jnp.ndim(leaf) == 0 or jnp.shape(leaf)[0] != n:
                    raise ValueError(f"{fn}: {name} must hold arrays [{n}, ...]; got shape {jnp.shape(leaf)}")
        n_node = jnp.bincount(self.dst_graph_ids, length=self.n_graphs).astype(jnp.int32)
        n_edge = jnp.bincount(self.dst_graph_ids[g.dst], length=self.n_graphs).astype(jnp.int32)
        return jraph.GraphsTuple(nodes=nodes, edges=edges, receivers=g.dst, senders=g.src, globals=globals,
                                 n_node=n_node, n_edge=n_edge)


def _pad_rows(fn: str, what: str, tree, mask):
    """Every leaf of ``tree`` zero-padded along its first axis to ``len(mask)`` rows (NumPy leaves on the host)."""
    n = mask.shape[0]
    n_real = None if isinstance(mask, jax.core.Tracer) else int(np.sum(np.asarray(mask)))

    def pad(leaf):
        xp = jnp if isinstance(leaf, jax.Array) else np
        leaf = xp.asarray(leaf)
        rows = leaf.shape[0] if leaf.ndim else None
        if rows is None or rows > n or (n_real is not None and rows != n_real):
            expected = f"{n_real} rows (the real {what})" if n_real is not None else f"at most {n} rows"
            raise ValueError(f"{fn}: x must hold arrays with {expected}; got shape {leaf.shape}")
        return _to_jax(xp.pad(leaf, [(0, n - rows)] + [(0, 0)] * (leaf.ndim - 1)))

    return jax.tree_util.tree_map(pad, tree)


def _array_module(*trees):
    """NumPy for concrete inputs (host-side batching: no compilation per new shape), ``jnp`` under ``jit``."""
    traced = any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(trees))
    return jnp if traced else np


def _to_jax(x):
    """``x`` as a JAX array; NumPy arrays are device_put (``jnp.asarray`` would compile per new shape)."""
    return jax.device_put(x) if isinstance(x, np.ndarray) else x


def _disjoint_union(fn: str, graphs: list[Graph]) -> Graph:
    """The disjoint union of ``graphs`` (one index dtype): ids offset, groupings concatenated (no re-sort)."""
    dtypes = {g.index_dtype for g in graphs}
    if len(dtypes) > 1:
        raise ValueError(f"{fn}: all graphs must have one index dtype, got {sorted(map(str, dtypes))}")
    idx = dtypes.pop()
    n_src = np.array([g.n_src for g in graphs])
    n_dst = np.array([g.n_dst for g in graphs])
    n_edges = np.array([g.n_edges for g in graphs])
    if max(n_src.sum(), n_dst.sum(), n_edges.sum()) > np.iinfo(idx).max:
        raise ValueError(f"{fn}: the union does not fit the index dtype {idx}")
    src_off, dst_off, e_off = (np.cumsum(n) - n for n in (n_src, n_dst, n_edges))
    xp = _array_module(graphs)

    def cat(field, offsets):
        return xp.concatenate([xp.asarray(getattr(g, field)) + o.astype(idx) for g, o in zip(graphs, offsets)])

    def cat_offsets(field):
        """The groupings' offsets: graph k's rows start after the real edges of the graphs before it, so the union
        ends where the real edges do and the padding edges of a graph, if any (only the last graph with edges
        may have them: padding edges come last), stay in no row, also before an empty padding graph."""
        offsets = [xp.asarray(getattr(g, field)) for g in graphs]
        ends = xp.stack([o[-1].astype(idx) for o in offsets])
        starts = xp.cumsum(ends) - ends
        parts = [o[:-1] + starts[k] for k, o in enumerate(offsets)]
        return xp.concatenate([*parts, offsets[-1][-1:] + starts[-1]]).astype(idx)

    arrays = (cat("src", src_off), cat("dst", dst_off),
              cat_offsets("csc_offsets"), cat("csc_src", src_off), cat("csc_eid", e_off),
              cat_offsets("csr_offsets"), cat("csr_dst", dst_off), cat("csr_eid", e_off))
    union = Graph(*map(_to_jax, arrays), int(n_src.sum()), int(n_dst.sum()), validate=False)
    union._checked = all(g._checked for g in graphs)
    return union


def batch(graphs) -> BatchedGraph:
    """The disjoint union of ``graphs`` (a non-empty sequence of graphs of one index dtype).

    Node ids of each graph are offset by the node counts of the graphs before it, and edges
    are concatenated in order, so the edge arrays of the parts concatenate in the same order.
    The CSC/CSR groupings are concatenated too (no re-sort), so this works inside ``jit``.
    Pad the result to fixed sizes with :func:`pad_batch`. Only the last graph may have padding edges
    (they must come last); inside ``jit`` that is not checked.

    >>> import numpy as np, jaxgraphops as jgo
    >>> a = jgo.Graph.from_edges(np.array([0]), np.array([1]))
    >>> b = jgo.Graph.from_edges(np.array([1, 0]), np.array([0, 0]), 2)
    >>> bg = batch([a, b])
    >>> bg.graph.src.tolist(), bg.graph.dst.tolist()
    ([0, 3, 2], [1, 2, 2])
    >>> bg.dst_graph_ids.tolist(), bg.n_graphs
    ([0, 0, 1, 1], 2)
    """
    graphs = list(graphs)
    if not graphs:
        raise ValueError("batch: graphs must be a non-empty sequence of Graph; got an empty one")
    others = sorted({type(g).__name__ for g in graphs if not isinstance(g, Graph)})
    if others:
        raise TypeError(f"batch: graphs must be a sequence of Graph; got {', '.join(others)} among them")
    for i, g in enumerate(graphs[:-1]):
        ends = [np.asarray(o)[-1] for o in (g.csc_offsets, g.csr_offsets) if not isinstance(o, jax.core.Tracer)]
        if any(end != g.n_edges for end in ends):
            raise ValueError(f"batch: graphs[{i}] has padding edges (its groupings end at {ends[0]} of {g.n_edges} "
                             f"edges): padding edges must come last, so only the last graph may have them; batch the "
                             f"graphs unpadded and pad the batch with pad_batch")
    union = _disjoint_union("batch", graphs)
    ids = np.arange(len(graphs), dtype=np.int32)
    src_ids = jax.device_put(np.repeat(ids, [g.n_src for g in graphs]))
    dst_ids = jax.device_put(np.repeat(ids, [g.n_dst for g in graphs]))
    return BatchedGraph(union, src_ids, dst_ids, len(graphs), validate=False)


def pad_batch(batched: BatchedGraph, n_nodes: int | tuple[int, int], n_edges: int, n_graphs: int) -> BatchedGraph:
    """``batched`` padded to ``n_nodes`` nodes, ``n_edges`` edges and ``n_graphs`` graphs (all static).

    As ``jraph.pad_with_graphs``: one padding graph (id ``batched.n_graphs``) is appended that owns
    every padding node and edge, each padding edge going from its first source node to its first
    destination node (node ``batched.graph.n_dst`` to itself in a square batch); empty graphs follow
    up to ``n_graphs``. The padding edges are padding edges of the :class:`~jaxgraphops.Graph`, in no
    neighbourhood: every op skips them (no work, nothing reaches any node, 0 at every edge-valued
    result), so a padded batch costs about what the real one does. Like jraph, this needs room
    for the padding graph and at least one padding node: ``n_graphs > batched.n_graphs`` and
    ``n_nodes > batched.graph.n_dst``. ``n_nodes`` may be a pair ``(n_src, n_dst)`` for a bipartite
    batch. The result's :attr:`~BatchedGraph.graph_mask`, :attr:`~BatchedGraph.node_mask` and
    :attr:`~BatchedGraph.edge_mask` tell real entries from padding; pad the features with
    :meth:`~BatchedGraph.pad_nodes`, :meth:`~BatchedGraph.pad_edges` and
    :meth:`~BatchedGraph.pad_graphs`. Works inside ``jit``; the padded edges, groupings and ids are
    appended, never re-sorted, so real edges keep their positions.

    >>> import numpy as np, jaxgraphops as jgo
    >>> bg = jgo.batch([jgo.Graph.from_edges(np.array([0, 1]), np.array([1, 0]))])
    >>> padded = pad_batch(bg, n_nodes=4, n_edges=3, n_graphs=3)
    >>> padded.graph.src.tolist(), padded.graph.dst.tolist(), padded.dst_graph_ids.tolist()
    ([0, 1, 2], [1, 0, 2], [0, 0, 1, 1])
    >>> padded.node_mask.tolist(), padded.edge_mask.tolist(), padded.graph_mask.tolist()
    ([True, True, False, False], [True, True, False], [True, False, False])
    """
    fn = "pad_batch"
    if not isinstance(batched, BatchedGraph):
        hint = " (pad a single Graph with pad)" if isinstance(batched, Graph) else ""
        raise TypeError(f"{fn}: batched must be a BatchedGraph{hint}; got {type(batched).__name__}")
    g = batched.graph
    if isinstance(n_nodes, tuple | list):
        if len(n_nodes) != 2:
            raise ValueError(f"{fn}: n_nodes must be an int or a pair (n_src, n_dst); got {n_nodes!r}")
        sides = (("n_nodes[0]", static_count(fn, "n_nodes[0]", n_nodes[0]), g.n_src, "source nodes"),
                 ("n_nodes[1]", static_count(fn, "n_nodes[1]", n_nodes[1]), g.n_dst, "destination nodes"))
    else:
        n = static_count(fn, "n_nodes", n_nodes)
        what = "nodes" if g.n_src == g.n_dst else "source nodes"
        sides = (("n_nodes", n, g.n_src, what), ("n_nodes", n, g.n_dst, "destination nodes"))
    n_edges = static_count(fn, "n_edges", n_edges)
    n_graphs = static_count(fn, "n_graphs", n_graphs)
    for name, new, old, what in sides:
        if new <= old:
            raise ValueError(f"{fn}: {name}={new} leaves no padding node: the batch has {old} {what} and the "
                             f"padding graph needs at least one (as in jraph.pad_with_graphs), so {name} must be "
                             f"at least {old + 1}")
    if n_edges < g.n_edges:
        raise ValueError(f"{fn}: n_edges={n_edges} is smaller than the batch's {g.n_edges} edges")
    if n_graphs <= batched.n_graphs:
        raise ValueError(f"{fn}: n_graphs={n_graphs} leaves no room for the padding graph: the batch has "
                         f"{batched.n_graphs} graphs, so n_graphs must be at least {batched.n_graphs + 1}")
    (_, n_src, _, _), (_, n_dst, _, _) = sides
    idx = g.index_dtype
    # the padding graph: its nodes, and its edges (first padding source -> first padding destination) as padding
    # edges, in no row (jaxgraphops.Graph): every op skips them
    none = np.zeros(0, idx)
    empty = Graph(none, none, np.zeros(1, idx), none, none, np.zeros(1, idx), none, none, 0, 0, validate=False)
    padding = Graph(*padded_arrays(empty, n_src - g.n_src, n_dst - g.n_dst, n_edges - g.n_edges, 0, 0),
                    n_src - g.n_src, n_dst - g.n_dst, validate=False)
    padding._checked = True
    union = _disjoint_union(fn, [g, padding])
    pad_id = batched.n_graphs
    xp = _array_module(batched)

    def ids(real, n_pad):
        return _to_jax(xp.concatenate([xp.asarray(real, np.int32), xp.full(n_pad, pad_id, np.int32)]))

    mask = _to_jax(xp.concatenate([xp.asarray(batched.graph_mask), xp.zeros(n_graphs - batched.n_graphs, bool)]))
    return BatchedGraph(union, ids(batched.src_graph_ids, n_src - g.n_src), ids(batched.dst_graph_ids, n_dst - g.n_dst),
                        n_graphs, mask, validate=False)
