"""The graph container: a directed (possibly bipartite) graph as a JAX pytree.

Edges go from a source node to a destination node (``src -> dst``) and messages
are aggregated at the destination. Sources and destinations are separate node
sets of sizes ``n_src`` and ``n_dst``; an ordinary graph has ``n_src == n_dst``.
Edge-valued arrays are always in the input edge order, the order of ``src`` and
``dst`` given to :meth:`Graph.from_edges`. Batches of graphs (the disjoint union, padding a batch
for ``jit``, jraph's ``GraphsTuple``) live in :mod:`jaxgraphops.batching`.
"""

from __future__ import annotations

import operator

import jax
import jax.numpy as jnp
import numpy as np

from ._checks import check_choice
from ._edge_check import checked_edges
from ._graph_check import check_arrays

__all__ = ["Graph", "pad", "padding_masks"]

_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def _x64_enabled() -> bool:
    return bool(jax.config.jax_enable_x64)


def _resolve_index_dtype(index_dtype, input_dtypes) -> np.dtype:
    """The index dtype: the requested one, else int64 for int64 input under x64, else int32."""
    if index_dtype is None:
        wide = _x64_enabled() and any(d == np.int64 for d in input_dtypes)
        return np.dtype(np.int64 if wide else np.int32)
    dtype = np.dtype(index_dtype)
    if dtype not in _INDEX_DTYPES:
        raise ValueError(f"Graph.from_edges: index_dtype must be int32 or int64, got {dtype}")
    if dtype == np.int64 and not _x64_enabled():
        raise ValueError(
            "Graph.from_edges: index_dtype=int64 needs 64-bit JAX types; enable them with "
            "jax.config.update('jax_enable_x64', True) or the jax.enable_x64(True) context manager"
        )
    return dtype


def _check_edge_array(name: str, x) -> None:
    if not jnp.issubdtype(x.dtype, jnp.integer):
        raise TypeError(f"Graph.from_edges: {name} must have an integer dtype, got {x.dtype}")
    if x.ndim != 1:
        raise ValueError(f"Graph.from_edges: {name} must be 1-D [E], got shape {tuple(x.shape)}")


def static_count(fn: str, name: str, n) -> int:
    """``n`` as a non-negative Python int, or a TypeError/ValueError naming ``fn`` and ``name``."""
    if isinstance(n, jax.core.Tracer):
        raise TypeError(f"{fn}: {name} must be a static int (it sets array shapes); got a traced value. "
                        f"Pass a Python int (mark it static: jax.jit(..., static_argnames=...))")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be an int, got {type(n).__name__}") from None
    if n < 0:
        raise ValueError(f"{fn}: {name} must be >= 0, got {n}")
    return n


def _group_np(keys: np.ndarray, values: np.ndarray, n: int):
    """Stable grouping of edges by ``keys`` (numpy): (offsets [n+1], values [E], edge ids [E])."""
    order = np.argsort(keys, kind="stable")
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=offsets[1:])
    return offsets, values[order], order


def _group_jnp(keys: jax.Array, values: jax.Array, n: int):
    """Stable grouping of edges by ``keys`` (traceable): (offsets [n+1], values [E], edge ids [E])."""
    order = jnp.argsort(keys, stable=True)
    counts = jnp.bincount(keys, length=n)
    offsets = jnp.concatenate([jnp.zeros(1, counts.dtype), jnp.cumsum(counts)])
    return offsets, values[order], order


@jax.tree_util.register_pytree_node_class
class Graph:
    """A directed graph with ``n_src`` source nodes, ``n_dst`` destination nodes and ``E`` edges.

    Array leaves (all of one integer index dtype, int32 or int64):

    - ``src [E]``, ``dst [E]``: the edges in input order.
    - ``csc_offsets [n_dst+1]``, ``csc_src [E]``, ``csc_eid [E]``: the edges grouped by
      destination (a stable sort, so edges into one node keep their input order); the edges
      into node ``d`` are positions ``csc_offsets[d]:csc_offsets[d+1]``, ``csc_src[k]`` is the
      source of the k-th of them and ``csc_eid[k]`` its input edge id.
    - ``csr_offsets [n_src+1]``, ``csr_dst [E]``, ``csr_eid [E]``: the same grouped by source.

    ``n_src`` and ``n_dst`` are static (Python ints in the pytree's aux data), and so is whether the
    graph is valid by construction (built by a constructor, which checks concrete arrays, or by the
    library from such graphs): inside ``jit`` the kernels still know it, and the CUDA kernels then write
    every output row themselves instead of zero-filling their outputs first. Like the sizes, the flag
    stays with the graph through ``jit``, ``device_put`` and ``tree_map``; a ``tree_map`` that changes the
    index values must build a new graph with a constructor. Build graphs with :meth:`from_edges` or one of
    the other ``from_*`` constructors.

    **Padding edges.** The groupings may end before the last edge: ``csc_offsets[-1] ==
    csr_offsets[-1] == R <= E``. The last ``E - R`` edges (input order, and positions ``R:`` of
    both groupings, which hold the edge ids ``R..E-1``) are then padding, in no node's
    neighbourhood, and every op ignores them: they add nothing to any node, every edge-valued
    result (weights, attention, ``gsddmm``, ``update_efeat``, ...) is 0 at them, and gradients with
    respect to their edge data are 0. The kernels skip them, so padding costs no work: :func:`pad`
    and :func:`jaxgraphops.pad_batch` make such graphs, with ``R`` carried by the arrays (graphs
    padded to the same sizes share one compilation whatever their real sizes), and so do the
    samplers (a block's empty slots) and :func:`jaxgraphops.distributed.partition_graph` (its parts); every
    transformation keeps them as padding (``docs/semantics.md``, "Padding").
    :meth:`real_edge_mask` tells the real edges. The constructor, and
    every op given a graph, check it (``check_graph``): the shapes and the one
    int32/int64 dtype of the arrays always (also under ``jit``), and concrete arrays for their
    values, once per graph (every id in range, ``csc_eid`` and ``csr_eid`` permutations of
    ``[0, E)``, the CSC and CSR groupings those of ``src``/``dst``): a ValueError naming the
    function and the array. ``validate=False`` leaves the check to the first op. A hand-built
    graph passed into ``jit`` is checked only by the kernels, for the arrays each reads: the CPU
    kernels reject out-of-range ids and id lists that are not permutations
    (``INVALID_ARGUMENT``), the CUDA kernels skip out-of-range indices and zero what no edge
    writes, and the pure-JAX reference (``impl="xla"``) reads 0 through an out-of-range id and drops
    out-of-range scatters. Groupings that are in range but disagree with
    ``src``/``dst`` are not detected there. (:meth:`from_edges` checks traced edge lists when the
    computation runs.)
    """

    __slots__ = (
        "src", "dst",
        "csc_offsets", "csc_src", "csc_eid",
        "csr_offsets", "csr_dst", "csr_eid",
        "n_src", "n_dst", "_checked", "_values_checked",
    )

    def __init__(self, src, dst, csc_offsets, csc_src, csc_eid,
                 csr_offsets, csr_dst, csr_eid, n_src: int, n_dst: int, *, validate: bool = True):
        self.src, self.dst = src, dst
        self.csc_offsets, self.csc_src, self.csc_eid = csc_offsets, csc_src, csc_eid
        self.csr_offsets, self.csr_dst, self.csr_eid = csr_offsets, csr_dst, csr_eid
        self.n_src, self.n_dst = n_src, n_dst
        # _checked: valid by construction (checked here, or built by the library from checked graphs): static, in
        # the pytree's aux data, fixed for the graph's life. _values_checked: a later check by an op (check_graph),
        # which skips the next ones but changes no structure (a jit or an AOT-compiled function sees one treedef).
        self._checked = self._values_checked = False
        if validate and not any(isinstance(x, jax.core.Tracer) for x in self.tree_flatten()[0]):
            check_graph("Graph", self)
            self._checked = True

    # -- pytree ---------------------------------------------------------------------------

    def tree_flatten(self):
        children = (self.src, self.dst, self.csc_offsets, self.csc_src, self.csc_eid,
                    self.csr_offsets, self.csr_dst, self.csr_eid)
        return children, (self.n_src, self.n_dst, self._checked is True)

    @classmethod
    def tree_unflatten(cls, aux, children):
        n_src, n_dst, checked = aux
        g = cls(*children, n_src, n_dst, validate=False)  # leaves may be anything (specs, shapes, sentinels)
        # The flag is structure, like the sizes: a rebuilt graph (jit's tracers, device_put, tree_map, JAX's own
        # lowering) keeps it, so that unflatten(flatten(g)) has g's treedef (an AOT-compiled function is called
        # with the treedef it was lowered with). A tree_map that changes the index values must rebuild the graph
        # with a constructor instead (Graph(...), from_edges).
        g._checked = checked
        return g

    # -- basic properties -----------------------------------------------------------------

    @property
    def n_edges(self) -> int:
        return self.src.shape[0]

    @property
    def index_dtype(self) -> np.dtype:
        return np.dtype(self.src.dtype)

    def __repr__(self) -> str:
        return (f"Graph(n_src={self.n_src}, n_dst={self.n_dst}, n_edges={self.n_edges}, "
                f"index_dtype={self.index_dtype})")

    def real_edge_mask(self) -> jax.Array:
        """``[E]`` bool in input edge order: True for the real edges, False for the padding edges (the
        positions from ``csc_offsets[-1]`` on; all True for a graph without padding)."""
        return jnp.arange(self.n_edges, dtype=self.csc_offsets.dtype) < self.csc_offsets[-1]

    def in_degrees(self) -> jax.Array:
        """Number of edges into each destination node, ``[n_dst]``."""
        return jnp.diff(self.csc_offsets)

    def out_degrees(self) -> jax.Array:
        """Number of edges out of each source node, ``[n_src]``."""
        return jnp.diff(self.csr_offsets)

    def reverse(self) -> Graph:
        """The graph with every edge flipped (``dst -> src``); edge ids are unchanged."""
        g = Graph(self.dst, self.src, self.csr_offsets, self.csr_dst, self.csr_eid,
                  self.csc_offsets, self.csc_src, self.csc_eid, self.n_dst, self.n_src, validate=False)
        g._checked = self._checked
        return g

    def pad(self, n_src: int, n_dst: int, n_edges: int) -> Graph:
        """This graph padded to fixed sizes; see :func:`pad`."""
        return pad(self, n_src, n_dst, n_edges)

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def from_edges(cls, src, dst, n_src: int | None = None, n_dst: int | None = None, *,
                   index_dtype=None) -> Graph:
        """Builds a graph from edge lists ``src [E]`` and ``dst [E]`` (edge ``i`` is ``src[i] -> dst[i]``).

        ``src`` and ``dst`` are NumPy or JAX arrays of any integer dtype. If only one of
        ``n_src``/``n_dst`` is given, the other equals it (a square graph); if neither is,
        both are ``max(src.max(), dst.max()) + 1`` (0 without edges). The index dtype is
        ``index_dtype`` if given, else int64 when an input is int64 and JAX's x64 mode is
        on, else int32.

        Concrete inputs are checked (every index in range, else ``ValueError``) and grouped
        with NumPy. Traced inputs (inside ``jax.jit``) need ``n_src`` or ``n_dst``, are
        grouped with ``jnp`` and checked when the computation runs: an id out of range fails
        it (``JaxRuntimeError: ... Graph.from_edges: dst id -1 at edge 1 out of range [0, 4)``)
        instead of being grouped into a wrong node.

        >>> import numpy as np
        >>> g = Graph.from_edges(np.array([0, 2, 0]), np.array([2, 1, 1]))
        >>> g
        Graph(n_src=3, n_dst=3, n_edges=3, index_dtype=int32)
        >>> g.in_degrees().tolist(), g.csc_offsets.tolist()
        ([0, 2, 1], [0, 0, 2, 3])
        >>> g.csc_src.tolist(), g.csc_eid.tolist()
        ([2, 0, 0], [1, 2, 0])
        """
        traced = isinstance(src, jax.core.Tracer) or isinstance(dst, jax.core.Tracer)
        src, dst = (jnp.asarray(src), jnp.asarray(dst)) if traced else (np.asarray(src), np.asarray(dst))
        _check_edge_array("src", src)
        _check_edge_array("dst", dst)
        if src.shape != dst.shape:
            raise ValueError(f"Graph.from_edges: src and dst must have the same length, "
                             f"got {src.shape[0]} and {dst.shape[0]}")
        idx = _resolve_index_dtype(index_dtype, (src.dtype, dst.dtype))

        if n_src is None and n_dst is None:
            if traced:
                raise ValueError("Graph.from_edges: n_src or n_dst is required when src/dst "
                                 "are traced (inside jit); node counts cannot be inferred")
            n_src = n_dst = int(max(src.max(), dst.max())) + 1 if src.size else 0
        n_src = static_count("Graph.from_edges", "n_src", n_dst if n_src is None else n_src)
        n_dst = static_count("Graph.from_edges", "n_dst", n_src if n_dst is None else n_dst)
        if max(n_src, n_dst, src.shape[0]) > np.iinfo(idx).max:
            raise ValueError(f"Graph.from_edges: n_src={n_src}, n_dst={n_dst}, E={src.shape[0]} "
                             f"do not fit the index dtype {idx}")

        if traced:
            # checked before the cast to the index dtype, which could wrap an id into range (2^32 + 1 -> 1)
            wide = np.int64 if _x64_enabled() else np.int32
            src, dst = checked_edges(src.astype(wide), dst.astype(wide), n_src, n_dst)
            src, dst = src.astype(idx), dst.astype(idx)
            csc = _group_jnp(dst, src, n_dst)
            csr = _group_jnp(src, dst, n_src)
        else:
            for name, x, n in (("src", src, n_src), ("dst", dst, n_dst)):
                bad = np.flatnonzero((x < 0) | (x >= n))
                if bad.size:
                    e = bad[0]
                    raise ValueError(f"Graph.from_edges: edge {e} has {name}={x[e]}, "
                                     f"out of range [0, {n})")
            src, dst = src.astype(idx), dst.astype(idx)
            csc = _group_np(dst, src, n_dst)
            csr = _group_np(src, dst, n_src)
        leaves = (src, dst, *csc, *csr)
        # concrete: cast on the host and device_put, which (unlike jnp.asarray) compiles nothing per new shape
        to_jax = (lambda x: jnp.asarray(x, dtype=idx)) if traced else (lambda x: jax.device_put(np.asarray(x, idx)))
        g = cls(*map(to_jax, leaves), n_src, n_dst, validate=False)
        g._checked = not traced  # valid by construction
        return g

    @classmethod
    def from_scipy(cls, a, *, index_dtype=None) -> Graph:
        """Graph of a scipy.sparse matrix or array of shape ``(n_src, n_dst)``.

        Each stored entry ``a[i, j]`` (explicit zeros and duplicates included) is an edge
        ``i -> j``, in the order of ``a.tocoo()``, so ``a.tocoo().data`` lines up with the edges.
        """
        import scipy.sparse

        if not scipy.sparse.issparse(a):
            raise TypeError(f"Graph.from_scipy: a must be a scipy.sparse matrix or array, "
                            f"got {type(a).__name__}")
        coo = a.tocoo()
        return cls.from_edges(coo.row, coo.col, *coo.shape, index_dtype=index_dtype)

    @classmethod
    def from_networkx(cls, G, nodes=None, *, index_dtype=None) -> Graph:
        """Graph of a networkx graph; node ``nodes[i]`` (default ``list(G.nodes)``) becomes node ``i``.

        A directed graph gives one edge per ``G.edges`` entry, in that order. An undirected
        graph gives both directions of each edge, ``u -> v`` then ``v -> u`` (a self loop
        once). Parallel edges of multigraphs are kept.
        """
        nodes = list(G.nodes) if nodes is None else list(nodes)
        ids = {v: i for i, v in enumerate(nodes)}
        if len(ids) != len(nodes) or ids.keys() != set(G.nodes):
            raise ValueError("Graph.from_networkx: nodes must list each node of G exactly once")
        pairs = []
        for u, v in G.edges():
            pairs.append((ids[u], ids[v]))
            if not G.is_directed() and u != v:
                pairs.append((ids[v], ids[u]))
        edges = np.array(pairs, dtype=np.int64).reshape(-1, 2)
        return cls.from_edges(edges[:, 0], edges[:, 1], len(nodes), len(nodes), index_dtype=index_dtype)

    @classmethod
    def from_senders_receivers(cls, senders, receivers, n_nodes: int, *, index_dtype=None) -> Graph:
        """Graph from jraph-style ``senders [E]`` (sources) and ``receivers [E]`` (destinations)."""
        return cls.from_edges(senders, receivers, n_nodes, n_nodes, index_dtype=index_dtype)

    @classmethod
    def from_jraph(cls, graphs, *, n_nodes: int | None = None, index_dtype=None) -> Graph:
        """Graph of a jraph ``GraphsTuple`` (or anything with ``senders``, ``receivers``, ``n_node``, ``nodes``).

        Works inside ``jit``. The node count is static: ``n_nodes`` if given, else
        ``sum(graphs.n_node)`` when that is concrete, else the leading size of the arrays in
        ``graphs.nodes`` (jraph's convention, padded tuples included). A traced ``n_node``
        without node arrays needs ``n_nodes``. Concrete counts are checked against the arrays.
        For the graph ids and padding masks of a batch, see
        :meth:`jaxgraphops.BatchedGraph.from_jraph`.

        >>> import jax, jax.numpy as jnp, jraph
        >>> gt = jraph.GraphsTuple(nodes=jnp.zeros((3, 2)), edges=None, globals=None,
        ...                        senders=jnp.array([0, 1]), receivers=jnp.array([1, 2]),
        ...                        n_node=jnp.array([3]), n_edge=jnp.array([2]))
        >>> jax.jit(lambda gt: Graph.from_jraph(gt).in_degrees())(gt).tolist()
        [0, 1, 1]
        """
        n = jraph_node_count("Graph.from_jraph", graphs, n_nodes)
        return cls.from_edges(graphs.senders, graphs.receivers, n, n, index_dtype=index_dtype)

    @classmethod
    def from_edge_index(cls, edge_index, num_nodes: int | None = None, *, index_dtype=None) -> Graph:
        """Graph from a PyG-style ``edge_index [2, E]`` (row 0: sources, row 1: targets)."""
        if len(edge_index.shape) != 2 or edge_index.shape[0] != 2:
            raise ValueError(f"Graph.from_edge_index: edge_index must have shape [2, E], "
                             f"got {tuple(edge_index.shape)}")
        if num_nodes is None and isinstance(edge_index, jax.core.Tracer):
            raise ValueError("Graph.from_edge_index: num_nodes (a static int) is required when edge_index is "
                             "traced (inside jit): the node count cannot be read from traced ids")
        return cls.from_edges(edge_index[0], edge_index[1], num_nodes, num_nodes, index_dtype=index_dtype)

    # -- export ---------------------------------------------------------------------------

    def to_scipy(self, weights=None):
        """``scipy.sparse.coo_array`` of shape ``(n_src, n_dst)`` with one entry per real edge.

        ``weights [E]`` (default ones, input edge order) are the entries; duplicate edges stay separate
        entries. The padding edges (:class:`Graph`) are dropped, with their weights: a sparse matrix
        has no entries that are in no neighbourhood, so ``Graph.from_scipy(g.to_scipy())`` is ``g``
        without its padding.
        """
        import scipy.sparse

        _require_concrete("Graph.to_scipy", self, weights)
        data = np.ones(self.n_edges) if weights is None else np.asarray(weights)
        if data.shape != (self.n_edges,):
            raise ValueError(f"Graph.to_scipy: weights must have shape ({self.n_edges},), "
                             f"got {data.shape}")
        real = self._n_real_edges()
        coords = (np.asarray(self.src)[:real], np.asarray(self.dst)[:real])
        return scipy.sparse.coo_array((data[:real], coords), shape=(self.n_src, self.n_dst))

    def to_edge_index(self, *, padding: str = "drop") -> jax.Array:
        """PyG-style ``edge_index [2, E]``: row 0 the sources, row 1 the destinations.

        ``padding="drop"`` (the default) returns the real edges only, ``[2, R]``: PyG has no padding
        edges, and kept ones would be real edges there (a round trip through
        :meth:`from_edge_index` makes them edges of the padding nodes). It needs a concrete graph,
        since ``R`` sets the shape. ``padding="keep"`` returns every edge, ``[2, E]``, also inside
        ``jit``, the padding edges last (mask them with :meth:`real_edge_mask`).

        >>> import numpy as np
        >>> p = Graph.from_edges(np.array([0, 1]), np.array([1, 0])).pad(3, 3, 3)
        >>> p.to_edge_index().tolist(), p.to_edge_index(padding="keep").tolist()
        ([[0, 1], [1, 0]], [[0, 1, 2], [1, 0, 2]])
        """
        check_choice("Graph.to_edge_index", "padding", padding, ("drop", "keep"))
        every = jnp.stack([self.src, self.dst])
        if padding == "keep":
            return every
        if any(isinstance(x, jax.core.Tracer) for x in (self.src, self.csc_offsets)):
            raise TypeError("Graph.to_edge_index: padding='drop' needs a concrete graph (the number of real edges "
                            "sets the shape); inside jax.jit pass padding='keep', which returns every edge with "
                            "the padding edges last (mask them with g.real_edge_mask()), or convert outside jit")
        return every[:, : self._n_real_edges()]

    def to_networkx(self):
        """``networkx.MultiDiGraph`` with nodes ``0..n-1`` and one edge per real edge (the padding edges of a
        padded graph are dropped: networkx has none)."""
        import networkx as nx

        _require_concrete("Graph.to_networkx", self)
        if self.n_src != self.n_dst:
            raise ValueError(f"Graph.to_networkx: needs n_src == n_dst, got a bipartite graph "
                             f"with n_src={self.n_src}, n_dst={self.n_dst}")
        real = self._n_real_edges()
        G = nx.MultiDiGraph()
        G.add_nodes_from(range(self.n_src))
        G.add_edges_from(zip(np.asarray(self.src)[:real].tolist(), np.asarray(self.dst)[:real].tolist()))
        return G

    def _n_real_edges(self) -> int:
        """``R``, the number of real edges (the padding edges are the last ``E - R``), of a concrete graph."""
        return int(np.asarray(self.csc_offsets)[-1])


def check_graph(fn: str, g) -> None:
    """Checks that ``g`` is a valid :class:`Graph` (its arrays: ``jaxgraphops._graph_check``) for the function
    ``fn``, which the TypeError/ValueError names. A graph from :meth:`Graph.from_edges` is valid by construction
    and is not checked again; a hand-built one is checked once (the result is kept on the object). Traced graphs
    (inside ``jit``) are checked for their shapes and dtypes only; the CPU kernels check the arrays each reads."""
    if not isinstance(g, Graph):
        raise TypeError(f"{fn}: g must be a jaxgraphops.Graph; got {type(g).__name__}")
    check_arrays(fn, g)


def pad(g: Graph, n_src: int, n_dst: int, n_edges: int) -> Graph:
    """``g`` padded to ``n_src`` source nodes, ``n_dst`` destination nodes and ``n_edges`` edges.

    New nodes get ids after the existing ones and no edges. The new edges are **padding edges**
    (see :class:`Graph`): in no neighbourhood, ignored by every op and skipped by the kernels, so a
    padded graph costs about what the original does. They nominally go from the last source node
    ``n_src - 1`` to the last destination node ``n_dst - 1``, which must therefore be padding
    nodes: adding edges needs ``n_src > g.n_src`` and ``n_dst > g.n_dst``. Every result at a
    padding node is an empty neighbourhood's (0 for every reduction) and at a padding edge 0. The
    groupings are appended to, never re-sorted, so this works inside ``jit`` (and on a graph already
    padded). Use :func:`padding_masks` to tell real entries from padding. A batch of graphs is
    padded with :func:`jaxgraphops.pad_batch` instead (one padding graph, graph ids and masks kept).
    What is defined by the sizes rather than by the edges follows the padded sizes: the GAT layers'
    self loops on a bipartite graph (``docs/semantics.md``, "Padding").

    >>> import numpy as np
    >>> g = Graph.from_edges(np.array([0, 1]), np.array([1, 0]))
    >>> p = pad(g, 3, 3, 4)
    >>> p.src.tolist(), p.dst.tolist(), p.csc_offsets.tolist()
    ([0, 1, 2, 2], [1, 0, 2, 2], [0, 1, 2, 2])
    >>> p.real_edge_mask().tolist()
    [True, True, False, False]
    """
    if not isinstance(g, Graph):
        hint = " (pad a BatchedGraph with pad_batch)" if type(g).__name__ == "BatchedGraph" else ""
        raise TypeError(f"pad: g must be a Graph{hint}; got {type(g).__name__}")
    n_src, n_dst, n_edges = (static_count("pad", name, n) for name, n in
                             (("n_src", n_src), ("n_dst", n_dst), ("n_edges", n_edges)))
    sizes = (("n_src", n_src, g.n_src), ("n_dst", n_dst, g.n_dst), ("n_edges", n_edges, g.n_edges))
    for name, new, old in sizes:
        if new < old:
            raise ValueError(f"pad: {name}={new} is smaller than the graph's {name}={old}")
    n_pad = n_edges - g.n_edges
    if n_pad and (n_src == g.n_src or n_dst == g.n_dst):
        raise ValueError(
            f"pad: {n_pad} padding edges need a padding source and a padding destination node "
            f"(they go from node n_src-1 to node n_dst-1), so n_src and n_dst must exceed the "
            f"graph's; got n_src={n_src} (graph {g.n_src}), n_dst={n_dst} (graph {g.n_dst})"
        )
    if max(n_src, n_dst, n_edges) > np.iinfo(g.index_dtype).max:
        raise ValueError(f"pad: n_src={n_src}, n_dst={n_dst}, n_edges={n_edges} do not fit the index dtype "
                         f"{g.index_dtype}")
    padded = Graph(*padded_arrays(g, n_src, n_dst, n_pad), n_src, n_dst, validate=False)
    padded._checked = g._checked
    return padded


def padded_arrays(g: Graph, n_src: int, n_dst: int, n_pad: int, pad_src=None, pad_dst=None) -> tuple:
    """The eight arrays of ``g`` with ``n_src - g.n_src`` source and ``n_dst - g.n_dst`` destination nodes
    (no edges) and ``n_pad`` padding edges (``pad_src -> pad_dst``: node ids, or ``[n_pad]`` arrays of them;
    default the last nodes; in no row) appended, never re-sorted: NumPy for a concrete graph, ``jnp`` for a
    traced one."""
    traced = any(isinstance(x, jax.core.Tracer) for x in (*g.tree_flatten()[0], pad_src, pad_dst))
    xp, idx = (jnp if traced else np), g.index_dtype
    src, dst = (xp.broadcast_to(xp.asarray(n - 1 if node is None else node).astype(idx), (n_pad,))
                for n, node in ((n_src, pad_src), (n_dst, pad_dst)))
    new_ids = xp.arange(g.n_edges, g.n_edges + n_pad, dtype=idx)

    def cat(a, b):
        return xp.concatenate([xp.asarray(a), b])

    def empty_rows(offsets, n_new):  # the new nodes' rows are empty: they end where the real edges end
        return cat(offsets, xp.full(n_new, xp.asarray(offsets)[-1], idx))

    arrays = (cat(g.src, src), cat(g.dst, dst), empty_rows(g.csc_offsets, n_dst - g.n_dst), cat(g.csc_src, src),
              cat(g.csc_eid, new_ids), empty_rows(g.csr_offsets, n_src - g.n_src), cat(g.csr_dst, dst),
              cat(g.csr_eid, new_ids))
    return tuple(a if traced else jax.device_put(a) for a in arrays)


def padding_masks(original: Graph, padded: Graph) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Boolean masks of the real entries of ``padded = pad(original, ...)``.

    Returns ``(src_node_mask [padded.n_src], dst_node_mask [padded.n_dst], edge_mask [padded.n_edges])``.
    """
    sizes = (("n_src", original.n_src, padded.n_src), ("n_dst", original.n_dst, padded.n_dst),
             ("n_edges", original.n_edges, padded.n_edges))
    for name, old, new in sizes:
        if new < old:
            raise ValueError(f"padding_masks: padded.{name}={new} is smaller than original.{name}={old}")
    return tuple(jnp.arange(new) < old for _, old, new in sizes)


def _require_concrete(fn: str, g: Graph, *arrays) -> None:
    if any(isinstance(x, jax.core.Tracer) for x in (g.src, g.dst, g.csc_offsets, *arrays)):
        raise TypeError(f"{fn}: needs concrete arrays (it builds a host object); call it outside jax.jit")


def jraph_node_count(fn: str, graphs, n_nodes) -> int:
    """The static node count of a jraph ``GraphsTuple`` for ``fn``, checked against what is concrete."""
    leaves = jax.tree_util.tree_leaves(getattr(graphs, "nodes", None))
    from_nodes = leaves[0].shape[0] if leaves and jnp.ndim(leaves[0]) else None
    from_counts = None if isinstance(graphs.n_node, jax.core.Tracer) else int(np.sum(np.asarray(graphs.n_node)))
    if n_nodes is not None:
        n_nodes = static_count(fn, "n_nodes", n_nodes)
    found = [(name, n) for name, n in (("n_nodes", n_nodes), ("sum(graphs.n_node)", from_counts),
                                       ("the leading size of graphs.nodes", from_nodes)) if n is not None]
    if not found:
        raise ValueError(f"{fn}: the node count is data-dependent: graphs.n_node is traced (inside jit) and "
                         f"graphs.nodes holds no array to read it from; pass n_nodes=<static int>")
    if len({n for _, n in found}) > 1:
        raise ValueError(f"{fn}: the node counts disagree: " + ", ".join(f"{name} = {n}" for name, n in found))
    n_edge = getattr(graphs, "n_edge", None)
    if n_edge is not None and not isinstance(n_edge, jax.core.Tracer):
        total = int(np.sum(np.asarray(n_edge)))
        if total != graphs.senders.shape[0]:
            raise ValueError(f"{fn}: sum(graphs.n_edge) = {total}, but graphs.senders has "
                             f"{graphs.senders.shape[0]} edges")
    return found[0][1]
